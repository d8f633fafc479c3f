"""SLO-driven fleet sizing: the cheapest feasible candidate, its binding constraint and its error band.

:func:`size_fleet` searches every candidate configuration (accelerator x precision x TP degree x
cap ``B`` on running sequences) at once, each evaluated by :mod:`calculator.fleet.evaluate`.
The cheapest feasible candidate wins (the largest cap among equals). The plan reports its binding
constraint (what keeps it from one replica fewer), why each rejected family failed, the closest
achievable values when nothing is feasible, and the throughput-vs-interactivity frontier.
:func:`calculator.simulation.verify_plan` checks a plan request by request (``verify=True``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import magnitude, probability
from ..errors import InputError
from ..performance import EngineProfile, engine_profile
from ..simulation.inputs import DEFAULT_ROUTER, router_name
from ..types import ModelRef, Rate, Time
from ..uncertainty import prediction_interval
from ..units import Q_
from ._common import HOURS, MAX_FLEET_GPUS, _as_list, _check_options, _grid, _model_id, _rate, _registry_for, _seconds
from .evaluate import _evaluate, _families
from .inputs import DEFAULT_BATCHES, DEFAULT_TENSOR_PARALLEL, Speculation, Workload
from .plan import FleetPlan, Rejection

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["size_fleet"]

#: The keyword arguments of :func:`calculator.simulation.verify_plan` that ``verify_options`` may give.
_VERIFY_OPTIONS = frozenset({"requests", "seeds", "router", "max_replicas", "executor", "progress", "time_limit"})


def _workload(rate: Any, inputs: Any, outputs: Any, input_cv: float, output_cv: float, arrival_cv: float) -> Workload:
    """The traffic: a :class:`Workload` given whole, or built from the flat arguments."""
    if isinstance(rate, Workload):
        given = [n for n, v in (("input_tokens", inputs), ("output_tokens", outputs)) if v is not None]
        given += [n for n, v, d in (("input_cv", input_cv, 0.0), ("output_cv", output_cv, 0.0),
                                    ("arrival_cv", arrival_cv, 1.0)) if v != d]  # fmt: skip
        if given:
            raise InputError(f"size_fleet(): a Workload carries the traffic; leave out {', '.join(given)}")
        return rate
    for name, value in (("input_tokens", inputs), ("output_tokens", outputs)):
        if value is None:
            raise InputError(f"size_fleet(): argument '{name}' is required (or pass a Workload as 'arrival_rate')")
    return Workload(_rate(rate), inputs, outputs, input_cv, output_cv, arrival_cv)


def _why(
    family: Any,
    tp: int,
    out: dict[str, np.ndarray],
    i: int,
    ok: tuple[np.ndarray, np.ndarray, np.ndarray],
    targets: tuple[float, float],
) -> Rejection:
    """The reason code (and its values) no batch cap of one family meets the targets."""
    ok_tpot, ok_ttft, ok_tbt = ok
    tpot_target, ttft_target = targets
    fits = out["fits"][i]
    record = {"accelerator": family.accelerator, "precision": family.precision, "tensor_parallel": int(tp)}
    key = f"{family.accelerator}/{family.precision}/tp{int(tp)}"
    if fits.any() and out["oversized"][i][fits].all():
        return Rejection(key, **record, code="fleet_size", values={"limit": MAX_FLEET_GPUS})
    if not fits.any():
        values = {
            "weights_per_device": Q_(float(out["weights_per_device"][i, 0]), "B"),
            "usable_per_device": Q_(float(out["usable_per_device"]), "B"),
        }
        return Rejection(key, **record, code="memory", values=values)
    if not (fits & ok_tpot).any():
        best = Q_(float(np.min(out["tpot"][i][fits])), "s")
        return Rejection(key, **record, code="tpot", values={"best": best, "target": Q_(tpot_target, "s")})
    if not (fits & ok_ttft).any():
        best = Q_(float(np.min(out["ttft"][i][fits])), "s")
        return Rejection(key, **record, code="ttft", values={"best": best, "target": Q_(ttft_target, "s")})
    if not (fits & ok_tbt).any():
        return Rejection(key, **record, code="tbt")
    return Rejection(key, **record, code="joint")


def _binding(out: dict[str, np.ndarray], ok: tuple[np.ndarray, ...], i: int, j: int) -> str:
    """What keeps the plan from one replica fewer: the constraint every such candidate misses."""
    fits, ok_tpot, ok_ttft, ok_tbt = ok
    fewer = out["replicas"][i] < out["replicas"][i, j]
    if not fewer.any():
        return "throughput"  # no cap on the grid sustains the load on fewer replicas within the headroom
    for name, mask in (("memory", fits), ("tpot", ok_tpot), ("ttft", ok_ttft), ("tbt", ok_tbt)):
        if not mask[fewer].any():
            return name
        fewer &= mask
    return "throughput"


def _infeasible_reason(
    rejected: dict[str, Rejection], closest_ttft: float, closest_tpot: float, heads: int | None = None
) -> str:
    """Why no candidate is feasible, in the terms of what blocks every one of them."""
    codes = {r.code for r in rejected.values()}
    if codes == {"fleet_size"}:
        return f"the load needs more than {MAX_FLEET_GPUS:,} GPUs on every candidate; no plan is made for it"
    if codes == {"memory"}:
        widest = max(rejected.values(), key=lambda r: r.tensor_parallel)
        return (
            f"the weights leave no room for the KV cache at any candidate tensor-parallel degree (up to TP "
            f"{widest.tensor_parallel}: {widest.text.removeprefix('memory: ')}); {_wider(rejected, heads)}"
        )
    if not np.isfinite(closest_ttft) or not np.isfinite(closest_tpot):
        return "no configuration meets every target: " + "; ".join(sorted({r.text for r in rejected.values()}))[:400]
    return (
        "no configuration meets every target; closest achievable: TTFT "
        f"{closest_ttft * 1e3:.0f} ms, TPOT {closest_tpot * 1e3:.1f} ms"
    )


def _wider(rejected: dict[str, Rejection], heads: int | None) -> str:
    """Which larger tensor-parallel degree would hold the weights of each family, or what else to try."""
    hints = []
    for family in {(r.accelerator, r.precision) for r in rejected.values()}:
        widest = max((r for r in rejected.values() if (r.accelerator, r.precision) == family),
                     key=lambda r: r.tensor_parallel)  # fmt: skip
        weights = widest.values["weights_per_device"].m_as("B") * widest.tensor_parallel
        usable = widest.values["usable_per_device"].m_as("B")
        for degree in (2**k for k in range(1, 8)):  # up to 128 devices
            if (
                degree > widest.tensor_parallel
                and (heads is None or heads % degree == 0)
                and weights / degree < 0.8 * usable
            ):
                per_device = weights / degree / 1e9
                hints.append(
                    f"TP {degree} on {family[0]} at {family[1]} would leave room ({per_device:,.1f} GB per device)"
                )
                break
    if hints:
        return "; ".join(sorted(hints)) + " (pass tensor_parallel=[...], CLI --tp)"
    return "try a smaller precision or an accelerator with more memory"


class _Search:
    """The cheapest feasible candidate over every family, with step times optionally scaled."""

    def __init__(self, families, profile, workload, tps, tp_grid, batch_grid, options, targets, lam, max_utilization):
        self.families, self.profile, self.workload, self.options = families, profile, workload, options
        self.tps, self.tp_grid, self.batch_grid = tps, tp_grid, batch_grid
        self.targets, self.lam, self.max_utilization = targets, lam, max_utilization

    def run(self, scales: dict[tuple[str, str], tuple[float, float]] | None = None, progress: Any = None) -> tuple:
        """``(best, rejected, closest_ttft, closest_tpot)``; ``scales`` per family accelerator."""
        ttft_target, tpot_target, tbt_target = self.targets
        tps, tp_grid, batch_grid = self.tps, self.tp_grid, self.batch_grid
        best: tuple[Any, ...] | None = None
        rejected: dict[str, Rejection] = {}
        closest_ttft, closest_tpot = np.inf, np.inf
        for done, family in enumerate(self.families, start=1):
            scale = scales[family.accelerator, family.precision] if scales else (1.0, 1.0)
            out = _evaluate(family, self.profile, self.workload, tp_grid, batch_grid, self.options, scale)
            if progress is not None:
                progress(done, len(self.families))
            ok_tpot = out["tpot"] <= tpot_target
            ok_ttft = out["ttft"] <= ttft_target
            ok_tbt = out["tbt_max"] <= tbt_target
            feasible = out["fits"] & ok_tpot & ok_ttft & ok_tbt & ~out["oversized"]
            replicas = out["replicas"]
            cost = replicas * tp_grid * family.price
            if out["fits"].any():
                closest_ttft = min(closest_ttft, float(np.min(out["ttft"][out["fits"]])))
                closest_tpot = min(closest_tpot, float(np.min(out["tpot"][out["fits"]])))
            for i, tp in enumerate(tps):
                key = f"{family.accelerator}/{family.precision}/tp{int(tp)}"
                if not feasible[i].any():
                    ok_i = (ok_tpot[i], ok_ttft[i], ok_tbt[i])
                    rejected[key] = _why(family, tp, out, i, ok_i, (tpot_target, ttft_target))
                    continue
                # The largest cap at the lowest cost: the same replicas, and room for bursts.
                masked = np.where(feasible[i], cost[i], np.inf)
                j = int(np.flatnonzero(masked == masked.min())[-1])
                values = {
                    "gpus": int(replicas[i, j] * tp),
                    "batch": int(batch_grid[i, j]),
                    "cost_per_hour": Q_(float(cost[i, j]), "USD/hour"),
                }
                rejected[key] = Rejection(
                    key, family.accelerator, family.precision, int(tp), code="costlier", values=values
                )
                rank = (cost[i, j], replicas[i, j] * tp, tp)
                if best is None or rank < best[0]:
                    ok = (out["fits"][i], ok_tpot[i], ok_ttft[i], ok_tbt[i])
                    best = (rank, family, key, i, j, out, replicas[i, j], ok)
        return best, rejected, closest_ttft, closest_tpot

    def gpus_at(self, end: int, family: Any, tp_index: int) -> int | None:
        """GPUs the plan's own configuration (``family`` at its TP) needs with step times at one interval end.

        The interval of the plan itself, not of whichever configuration would win there.
        """
        bands = prediction_interval(
            self.profile.name, family.accelerator, family.arrays.measured, self.profile.interval
        )
        # Step times (prefill and decode) scale by the TPOT band: it measures the step model. The
        # TTFT band is wider because it carries a benchmark's queueing, which the sizer models itself.
        scales = {(family.accelerator, family.precision): (bands["tpot"][end], bands["tpot"][end])}
        tps = self.tps[tp_index : tp_index + 1]
        own = _Search(
            [family], self.profile, self.workload, tps, self.tp_grid[tp_index : tp_index + 1],
            self.batch_grid[tp_index : tp_index + 1], self.options, self.targets, self.lam, self.max_utilization,
        )  # fmt: skip
        best = own.run(scales)[0]
        if best is None:
            return None
        return int(best[6] * tps[0])


def size_fleet(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    arrival_rate: Rate,
    input_tokens: float | None = None,
    output_tokens: float | None = None,
    ttft_slo: Time = None,
    tpot_slo: Time = None,
    *,
    engine: str | EngineProfile | None = None,
    max_utilization: float = 0.8,
    ttft_percentile: float | None = None,
    price: Any = None,
    tensor_parallel: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
    batches: Sequence[int] = DEFAULT_BATCHES,
    input_cv: float = 0.0,
    output_cv: float = 0.0,
    arrival_cv: float = 1.0,
    kv_precision: str | None = None,
    prefix_hit_rate: float = 0.0,
    shared_prefix_tokens: float = 0.0,
    speculation: Speculation | None = None,
    chunk_size: int | None = None,
    tbt_slo: Time = None,
    idle_power_fraction: float = 0.3,
    electricity_price: Any = None,
    progress: Any = None,
    router: str = DEFAULT_ROUTER,
    verify: bool = False,
    verify_options: dict[str, Any] | None = None,
    registry: Registry | None = None,
) -> FleetPlan:
    """Size the cheapest fleet that serves a workload within TTFT and TPOT targets.

    Parameters
    ----------
    model : str or Model
        Registry id or alias.
    accelerator : str, Accelerator, or a list of them
        Candidate accelerators.
    precision : str or list of str
        Candidate weight precisions.
    arrival_rate : Quantity [request / time] or Workload
        Mean request rate, or the whole traffic as a :class:`Workload` (rate, lengths and their
        variability; then leave out the lengths and CVs).
    input_tokens, output_tokens : float
        Mean prompt and output lengths (with a rate).
    ttft_slo, tpot_slo : Quantity [time]
        Targets: TTFT (mean, or the ``ttft_percentile``) and mean TPOT.
    engine : str or EngineProfile, optional
        Serving engine profile (memory policy and efficiency); ``None`` for the generic default.
    max_utilization : float
        Load each replica to at most this fraction of its throughput at the batch cap (headroom).
    ttft_percentile : float, optional
        Plan TTFT at this percentile (e.g. 0.99) instead of the mean.
    price : Quantity [USD / hour] or dict, optional
        GPU-hour price (one for all, or per accelerator id); defaults to :func:`default_price`.
    tensor_parallel, batches : sequences of int
        The grid searched.
    input_cv, output_cv, arrival_cv : float
        Variability of prompt lengths, output lengths and inter-arrival times.
    kv_precision : str, optional
        KV-cache precision (``"fp8"`` halves KV memory and traffic).
    prefix_hit_rate, shared_prefix_tokens : float
        Prefix caching: the fraction of requests that reuse a shared prefix of that many tokens.
    speculation : Speculation, optional
        Speculative decoding with a draft model.
    chunk_size : int, optional
        Chunked prefill: prompt tokens per iteration (bounds the token gap, lengthens TTFT).
    tbt_slo : Quantity [time], optional
        A bound on the longest gap between streamed tokens.
    idle_power_fraction : float
        Power an idle GPU draws as a fraction of its TDP (energy estimate).
    electricity_price : Quantity [USD / (kW h)], optional
        For the electricity cost per million tokens (default 0.10 USD/kWh, a scenario value).
    progress : callable, optional
        Called as ``progress(done, total)`` after each (accelerator, precision) family.
    router : str
        How requests are spread over the replicas (default ``"round_robin"``; also ``"random"``,
        ``"join_shortest_queue"``, ``"least_outstanding_tokens"``, ``"power_of_two"``): it sets the
        arrival variability each replica sees.
    verify : bool
        Also simulate the plan request by request (:func:`calculator.simulation.verify_plan`) and
        report the smallest replica count that meets the targets in simulation beside the
        analytical one (``simulated_replicas``, ``verification``). Takes seconds, not milliseconds.
    verify_options : dict, optional
        Keyword arguments for :func:`~calculator.simulation.verify_plan` (``requests``, ``seeds``,
        ``executor``, ``progress``).
    registry : Registry, optional
        Where ids resolve (``load_registry(extra=[...])`` for your own hardware, models and prices);
        default: the registry the given objects came from, or the packaged one.

    Returns
    -------
    FleetPlan

    Examples
    --------
    >>> plan = size_fleet("llama-3.1-70b", "h100-sxm", "fp8", Q_(10, "request/s"), 1024, 256,
    ...                   Q_(1, "s"), Q_(50, "ms"), price=Q_(4, "USD/hour"))
    >>> plan.feasible, plan.gpus > 0, plan.binding_constraint in {"memory", "tpot", "ttft", "throughput"}
    (True, True, True)
    """
    workload = _workload(arrival_rate, input_tokens, output_tokens, input_cv, output_cv, arrival_cv)
    if ttft_slo is None or tpot_slo is None:
        missing = "ttft_slo" if ttft_slo is None else "tpot_slo"
        raise InputError(f"size_fleet(): argument '{missing}' is required (a time such as Q_(500, 'ms'))")
    _check_options(workload, max_utilization, ttft_percentile, prefix_hit_rate, shared_prefix_tokens, chunk_size)
    probability("size_fleet", "idle_power_fraction", idle_power_fraction)
    if electricity_price is not None:
        magnitude("size_fleet", "electricity_price", electricity_price, "USD/(kW*hour)", "nonnegative")
    ttft_target = _seconds("ttft_slo", ttft_slo)
    tpot_target = _seconds("tpot_slo", tpot_slo)
    tbt_target = _seconds("tbt_slo", tbt_slo) if tbt_slo is not None else np.inf
    reg = _registry_for(registry, model, accelerator)
    profile = engine_profile(engine, reg)
    model = reg.model(model)
    tps, grid_batches = _grid(model, tensor_parallel, batches)
    longest = workload.input_tokens + workload.output_tokens
    if model.max_context is not None and longest > model.max_context:
        return FleetPlan(
            feasible=False,
            reason=f"a request of {longest:,.0f} tokens (input + output) exceeds {model.id}'s context limit of "
            f"{model.max_context:,} tokens; no engine serves it",
            model=model.id,
            engine=profile.name,
            workload=workload,
        )
    options = {
        "prefix_hit_rate": prefix_hit_rate,
        "shared_prefix_tokens": shared_prefix_tokens,
        "speculation": speculation,
        "chunk_size": chunk_size,
        "ttft_percentile": ttft_percentile,
        "max_utilization": max_utilization,
        "arrival_rate": workload.arrival_rate.m_as("request/s"),
        "router": router_name(router),
    }
    families = _families(
        model,
        _as_list(accelerator, "accelerator"),
        _as_list(precision, "precision"),
        price,
        speculation,
        kv_precision,
        reg,
        profile,
    )
    lam = workload.arrival_rate.m_as("request/s")
    tokens_per_hour = lam * workload.output_tokens * HOURS
    tp_grid, batch_grid = np.meshgrid(tps, grid_batches, indexing="ij")

    targets = (ttft_target, tpot_target, tbt_target)
    targets_record = {
        "ttft": Q_(ttft_target, "s"),
        "tpot": Q_(tpot_target, "s"),
        "tbt": Q_(tbt_target, "s") if tbt_slo is not None else None,
        "ttft_percentile": ttft_percentile,
        "kv_precision": kv_precision,
        "chunk_size": chunk_size,
        "speculation": speculation is not None,
        "draft": (
            {"model": speculation.draft_model, "length": speculation.draft_length, "acceptance": speculation.acceptance}
            if speculation is not None
            else None
        ),
        "prefix_caching": prefix_hit_rate > 0,
        "registry_files": reg.user_files,
    }
    search = _Search(families, profile, workload, tps, tp_grid, batch_grid, options, targets, lam, max_utilization)
    best, rejected, closest_ttft, closest_tpot = search.run(progress=progress)
    count = len(families) * tp_grid.size
    if best is None:
        return FleetPlan(
            feasible=False,
            reason=_infeasible_reason(rejected, closest_ttft, closest_tpot, model.attention_heads),
            model=_model_id(model),
            engine=profile.name,
            rejected={key: r.text for key, r in rejected.items()},
            rejections=tuple(rejected.values()),
            closest={"ttft": Q_(closest_ttft, "s"), "tpot": Q_(closest_tpot, "s")},
            candidates=count,
            router=options["router"],
            workload=workload,
            targets=targets_record,
        )
    _, family, key, i, j, out, replica_count, ok = best
    del rejected[key]
    binding = _binding(out, ok, i, j)
    bands = prediction_interval(profile.name, family.accelerator, family.arrays.measured, profile.interval)
    tp = int(tps[i])
    replicas = int(replica_count)
    gpus_low, gpus_high = (search.gpus_at(end, family, i) for end in (0, 1))
    # the interval holds the plan: faster steps never need more GPUs of the same configuration
    gpus_low = min(gpus_low, replicas * tp) if gpus_low is not None else replicas * tp
    gpus_high = max(gpus_high, replicas * tp) if gpus_high is not None else None
    rate = float(out["rate"][i, j])
    utilization = lam / (replicas * rate)
    gpus = replicas * tp
    cost_hour = gpus * family.price
    power = gpus * family.tdp * (idle_power_fraction + (1 - idle_power_fraction) * utilization)
    energy = power * HOURS / tokens_per_hour * 1e6  # joules per million output tokens
    kwh = electricity_price if electricity_price is not None else Q_(0.10, "USD/(kW*hour)")
    reason = {
        "memory": "one replica fewer would need a larger batch cap than the KV cache holds",
        "tpot": "with one replica fewer the running batch would exceed the TPOT target",
        "ttft": "with one replica fewer TTFT would exceed its target",
        "tbt": "with one replica fewer the token gap would exceed its target",
        "throughput": "one replica fewer would run above the max_utilization headroom",
    }[binding]
    plan = FleetPlan(
        feasible=True,
        reason=f"cheapest of {count} configurations; {reason}",
        model=_model_id(model),
        accelerator=family.accelerator,
        precision=family.precision,
        engine=profile.name,
        kv_precision=family.arrays.kv_precision,
        tensor_parallel=tp,
        batch=int(batch_grid[i, j]),
        replicas=replicas,
        gpus=gpus,
        utilization=float(utilization),
        max_utilization=max_utilization,
        ttft=Q_(float(out["ttft"][i, j]), "s"),
        tpot=Q_(float(out["tpot"][i, j]), "s"),
        tbt_max=Q_(float(out["tbt_max"][i, j]), "s"),
        ttft_interval=tuple(Q_(float(out["ttft"][i, j]) * f, "s") for f in bands["ttft"]),
        tpot_interval=tuple(Q_(float(out["tpot"][i, j]) * f, "s") for f in bands["tpot"]),
        gpus_interval=(gpus_low, gpus_high),
        replica_throughput=Q_(rate, "request/s"),
        binding_constraint="tpot" if binding == "tbt" else binding,
        cost_per_hour=Q_(cost_hour, "USD/hour"),
        cost_per_million_tokens=Q_(cost_hour / tokens_per_hour * 1e6, "USD"),
        power=Q_(power, "W").to("kW"),
        energy_per_million_tokens=Q_(energy, "J").to("kWh"),
        electricity_cost_per_million_tokens=(Q_(energy, "J") * kwh).to("USD"),
        rejected={key: r.text for key, r in rejected.items()},
        rejections=tuple(rejected.values()),
        candidates=count,
        running_batch=float(out["running"][i, j]),
        router=options["router"],
        workload=workload,
        targets={**targets_record, "kv_precision": family.arrays.kv_precision},
    )
    if verify:
        from ..simulation import verify_plan

        options = dict(verify_options or {})
        unknown = sorted(set(options) - _VERIFY_OPTIONS)
        if unknown:
            raise InputError(f"size_fleet(): 'verify_options' takes {sorted(_VERIFY_OPTIONS)}, got unknown {unknown}")
        checked = verify_plan(plan, **options)
        plan = dataclasses.replace(plan, simulated_replicas=checked.simulated_replicas, verification=checked)
    return plan
