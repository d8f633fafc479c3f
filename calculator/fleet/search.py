"""The fleet sizer's search: the cheapest feasible candidate, its binding constraint and its error band.

:func:`_size` (behind :func:`~calculator.fleet.size_fleet`) evaluates every candidate of the
:class:`~calculator.fleet.inputs.SearchSpace` at once (:mod:`calculator.fleet.evaluate`). The
cheapest feasible candidate wins (the largest cap among equals). The plan reports its binding
constraint (what keeps it from one replica fewer), why each rejected family failed, the closest
achievable values when nothing is feasible, and the GPUs its configuration needs at the ends of the
model's error interval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..performance import EngineProfile
from ..uncertainty import prediction_interval
from ..units import Q_
from ._common import HOURS, MAX_FLEET_GPUS, _fleet_costs
from .evaluate import Evaluation, _evaluate, _Family
from .inputs import Costs, ServingOptions, Targets, Workload
from .plan import FleetPlan, Rejection

if TYPE_CHECKING:
    from .sizing import _Problem

__all__: list[str] = []

#: The electricity price of the energy estimate when none is given (a scenario value).
DEFAULT_ELECTRICITY_PRICE = Q_(0.10, "USD/(kW*hour)")


# --------------------------------------------------------------------------------------------
# The search


@dataclass(frozen=True)
class _Masks:
    """Which candidates of one family's grid fit in memory and meet each target."""

    fits: np.ndarray
    tpot: np.ndarray
    ttft: np.ndarray
    tbt: np.ndarray

    @classmethod
    def of(cls, e: Evaluation, targets: Targets) -> _Masks:
        tbt = targets.tbt.m_as("s") if targets.tbt is not None else np.inf
        return cls(e.fits, e.tpot <= targets.tpot.m_as("s"), e.ttft <= targets.ttft.m_as("s"), e.tbt_max <= tbt)

    @property
    def feasible(self) -> np.ndarray:
        return self.fits & self.tpot & self.ttft & self.tbt


@dataclass(frozen=True)
class _Candidate:
    """The cheapest feasible batch cap of one family at one TP degree: row ``i``, column ``j`` of its grid."""

    rank: tuple[float, float, float]  # cost per hour, GPUs, TP degree
    family: _Family
    key: str
    i: int
    j: int
    evaluation: Evaluation
    masks: _Masks

    @property
    def replicas(self) -> int:
        return int(self.evaluation.replicas[self.i, self.j])


@dataclass(frozen=True)
class _Outcome:
    """What a search found: the best candidate (None if nothing is feasible) and why the others are not it."""

    best: _Candidate | None
    rejected: dict[str, Rejection]
    closest_ttft: float
    closest_tpot: float


@dataclass(frozen=True)
class _Search:
    """The cheapest feasible candidate over every family, with step times optionally scaled."""

    families: list[_Family]
    profile: EngineProfile
    workload: Workload
    targets: Targets
    serving: ServingOptions
    tps: np.ndarray
    tp_grid: np.ndarray
    batch_grid: np.ndarray

    def evaluate(self, family: _Family, scale: tuple[float, float] = (1.0, 1.0)) -> Evaluation:
        return _evaluate(
            family, self.profile, self.workload, family.stage_tp(self.tp_grid),
            family.caps(family.stage_tp(self.tp_grid), self.batch_grid), self.serving,
            percentile=self.targets.ttft_percentile, max_utilization=self.targets.max_utilization, scale=scale,
        )  # fmt: skip

    def run(self, scales: dict[tuple[str, str], tuple[float, float]] | None = None, progress: Any = None) -> _Outcome:
        """Search every family; ``scales`` multiply the step times per (accelerator, precision)."""
        best: _Candidate | None = None
        rejected: dict[str, Rejection] = {}
        closest_ttft, closest_tpot, nearest = np.inf, np.inf, np.inf
        ttft_target, tpot_target = self.targets.ttft.m_as("s"), self.targets.tpot.m_as("s")
        for done, family in enumerate(self.families, start=1):
            e = self.evaluate(family, scales[family.accelerator, family.precision] if scales else (1.0, 1.0))
            if progress is not None:
                progress(done, len(self.families))
            ok = _Masks.of(e, self.targets)
            feasible = ok.feasible & ~e.oversized
            cost = e.replicas * self.tp_grid * family.price
            # The candidate nearest to meeting both targets: the smallest of the larger ratio to its target.
            with np.errstate(invalid="ignore"):
                score = np.maximum(e.ttft / ttft_target, e.tpot / tpot_target)
            score = np.where(e.fits & np.isfinite(score), score, np.inf)
            k = np.unravel_index(int(np.argmin(score)), score.shape)
            if score[k] < nearest:
                nearest, closest_ttft, closest_tpot = float(score[k]), float(e.ttft[k]), float(e.tpot[k])
            layout_ok = family.layout_ok(self.tps)
            nodes_ok = family.nodes_ok(self.tps)
            for i, tp in enumerate(self.tps):
                key = family.key_at(int(tp))
                if not layout_ok[i] and family.stages > 1:
                    continue  # pipeline families exist for replicas of several whole nodes only
                if not (layout_ok[i] and nodes_ok[i]):
                    code, values = (
                        ("layout", {"experts": int(family.arrays.experts)})
                        if not layout_ok[i]
                        else ("nodes", {"node_gpus": int(family.arrays.node_gpus)})
                    )
                    rejected[key] = Rejection(key, family.accelerator, family.precision, int(tp), code, values)
                    continue
                if not feasible[i].any():
                    rejected[key] = _why(family, int(tp), e, i, ok, self.targets, self.workload)
                    continue
                # The largest cap at the lowest cost: the same replicas, and room for bursts.
                masked = np.where(feasible[i], cost[i], np.inf)
                j = int(np.flatnonzero(masked == masked.min())[-1])
                values = {
                    "gpus": int(e.replicas[i, j] * tp),
                    "batch": int(family.caps(family.stage_tp(self.tp_grid), self.batch_grid)[i, j]),
                    "cost_per_hour": Q_(float(cost[i, j]), "USD/hour"),
                }
                rejected[key] = Rejection(
                    key, family.accelerator, family.precision, int(tp), code="costlier", values=values
                )
                rank = (float(cost[i, j]), float(e.replicas[i, j] * tp), float(tp))
                if best is None or rank < best.rank:
                    best = _Candidate(rank, family, key, i, j, e, ok)
        return _Outcome(best, rejected, closest_ttft, closest_tpot)

    def gpus_at(self, end: int, best: _Candidate) -> int | None:
        """GPUs the plan's own configuration needs with step times at one end (0 low, 1 high) of the interval.

        The interval of the plan itself (its family at its TP, the batch cap re-chosen), not of
        whichever configuration would win there.
        """
        family, i = best.family, best.i
        profile = self.profile
        bands = prediction_interval(profile.name, family.accelerator, family.arrays.measured, profile.interval)
        # Step times (prefill and decode) scale by the TPOT band: it measures the step model. The
        # TTFT band is wider because it carries a benchmark's queueing, which the sizer models itself.
        scales = {(family.accelerator, family.precision): (bands["tpot"][end], bands["tpot"][end])}
        rows = slice(i, i + 1)
        own = dataclasses.replace(
            self, families=[family], tps=self.tps[rows], tp_grid=self.tp_grid[rows], batch_grid=self.batch_grid[rows]
        )
        found = own.run(scales).best
        return None if found is None else found.replicas * int(own.tps[0])


# --------------------------------------------------------------------------------------------
# Why a family is not the plan


def _why(
    family: _Family, tp: int, e: Evaluation, i: int, ok: _Masks, targets: Targets, workload: Workload
) -> Rejection:
    """The reason code (and its values) no batch cap of one family (row ``i`` of ``e``) meets the targets."""
    ok_tpot, ok_ttft, ok_tbt = ok.tpot[i], ok.ttft[i], ok.tbt[i]
    fits = e.fits[i]
    record: dict[str, Any] = {
        "accelerator": family.accelerator,
        "precision": family.precision,
        "tensor_parallel": int(tp),
    }
    key = family.key_at(int(tp))
    if fits.any() and e.oversized[i][fits].all():
        return Rejection(key, **record, code="fleet_size", values={"limit": MAX_FLEET_GPUS})
    if not fits.any() and np.max(e.capacity[i]) >= 1:  # one sequence fits: every cap searched is above the cache
        return Rejection(key, **record, code="batch", values={"capacity": int(np.max(e.capacity[i]))})
    if not fits.any():
        a = family.arrays
        values = {
            "weights_per_device": Q_(float(e.weights_per_device[i, 0]), "B"),
            "usable_per_device": Q_(float(e.usable_per_device), "B"),
            # One sequence's KV cache at the workload's context, whole (before the shards of a wider group).
            "kv_per_sequence": Q_(float(a.kv_bytes_per_token * workload.held_context), "B"),
            "kv_shards_max": int(a.kv_shards_max),
        }
        return Rejection(key, **record, code="memory", values=values)
    if not (fits & ok_tpot).any():
        best = Q_(float(np.min(e.tpot[i][fits])), "s")
        return Rejection(key, **record, code="tpot", values={"best": best, "target": targets.tpot})
    if not (fits & ok_ttft).any():
        best = Q_(float(np.min(e.ttft[i][fits])), "s")
        return Rejection(key, **record, code="ttft", values={"best": best, "target": targets.ttft})
    if not (fits & ok_tbt).any():
        return Rejection(key, **record, code="tbt")
    return Rejection(key, **record, code="joint")


def _binding(best: _Candidate) -> str:
    """What keeps the plan from one replica fewer: the constraint every such candidate misses."""
    e, ok, i, j = best.evaluation, best.masks, best.i, best.j
    fewer = e.replicas[i] < e.replicas[i, j]
    if not fewer.any():
        return "throughput"  # no cap on the grid sustains the load on fewer replicas within the headroom
    for name, mask in (("memory", ok.fits[i]), ("tpot", ok.tpot[i]), ("ttft", ok.ttft[i]), ("tbt", ok.tbt[i])):
        if not mask[fewer].any():
            return name
        fewer &= mask
    return "throughput"


def _beyond_context(model: Any, workload: Workload) -> str:
    """Why no engine serves the workload's requests on ``model`` (resolved), or "" where they fit its context."""
    longest = workload.input_tokens + workload.output_tokens
    if model.max_context is None or longest <= model.max_context:
        return ""
    return (
        f"a request of {longest:,.0f} tokens (input + output) exceeds {model.id}'s context limit of "
        f"{model.max_context:,} tokens; no engine serves it"
    )


def _infeasible_reason(
    rejected: dict[str, Rejection], closest_ttft: float, closest_tpot: float, targets: Targets, heads: int | None = None
) -> str:
    """Why no candidate is feasible, in the terms of what blocks every one of them."""
    codes = {r.code for r in rejected.values()}
    if codes == {"fleet_size"}:
        return f"the load needs more than {MAX_FLEET_GPUS:,} GPUs on every candidate; no plan is made for it"
    if codes == {"memory"}:
        widest = max(rejected.values(), key=lambda r: r.tensor_parallel)
        return (
            f"no candidate tensor-parallel degree holds the weights and one sequence's KV cache (up to TP "
            f"{widest.tensor_parallel}: {widest.text.removeprefix('memory: ')}); {_wider(rejected, heads)}"
        )
    if codes <= {"batch", "memory"} and "batch" in codes:
        most = max((r for r in rejected.values() if r.code == "batch"), key=lambda r: r.values["capacity"])
        return (
            f"every batch cap searched is above what the KV cache holds (at most {most.values['capacity']:,} "
            f"sequences, {most.family}); search smaller caps"
        )
    meets_both = closest_ttft <= targets.ttft.m_as("s") and closest_tpot <= targets.tpot.m_as("s")
    if not np.isfinite(closest_ttft) or not np.isfinite(closest_tpot) or meets_both:
        # nothing fits, or the nearest candidate meets TTFT and TPOT and fails on something else (the token gap, size)
        return "no configuration meets every target: " + "; ".join(sorted({r.text for r in rejected.values()}))[:400]
    return (
        "no configuration meets every target; closest achievable: TTFT "
        f"{closest_ttft * 1e3:.0f} ms, TPOT {closest_tpot * 1e3:.1f} ms"
    )


def _wider(rejected: dict[str, Rejection], heads: int | None) -> str:
    """Which larger tensor-parallel degree would hold each family's weights and one sequence's KV cache.

    A degree ``t`` holds ``weights / t`` and ``kv / min(t, kv_shards_max)`` of one sequence per device
    (the KV heads split until each rank holds one); it is named only if both fit in 80% of the usable
    memory, else the hint says what else to try.
    """
    from ..memory.kv import kv_shards

    hints = []
    for family in {(r.accelerator, r.precision) for r in rejected.values()}:
        widest = max((r for r in rejected.values() if (r.accelerator, r.precision) == family),
                     key=lambda r: r.tensor_parallel)  # fmt: skip
        weights = widest.values["weights_per_device"].m_as("B") * widest.tensor_parallel
        usable = widest.values["usable_per_device"].m_as("B")
        kv, shards = widest.values["kv_per_sequence"].m_as("B"), widest.values["kv_shards_max"]
        for degree in (2**k for k in range(1, 8)):  # up to 128 devices
            if (
                degree > widest.tensor_parallel
                and (heads is None or heads % degree == 0)
                and weights / degree + kv / kv_shards(degree, shards) < 0.8 * usable
            ):
                per_device = weights / degree / 1e9
                hints.append(
                    f"TP {degree} on {family[0]} at {family[1]} would leave room ({per_device:,.1f} GB per device)"
                )
                break
    if hints:
        return "; ".join(sorted(hints)) + " (pass tensor_parallel=[...], CLI --tp)"
    return "try a smaller weight or KV-cache precision, a shorter context, or an accelerator with more memory"


# --------------------------------------------------------------------------------------------
# The plan


def _feasible_plan(
    search: _Search, best: _Candidate, outcome: _Outcome, costs: Costs, record: dict[str, Any]
) -> FleetPlan:
    """The plan of the best candidate: its numbers, interval, cost, energy and why not one replica fewer."""
    family, e, i, j = best.family, best.evaluation, best.i, best.j
    rejected = {key: r for key, r in outcome.rejected.items() if key != best.key}
    binding = _binding(best)
    profile = search.profile
    bands = prediction_interval(profile.name, family.accelerator, family.arrays.measured, profile.interval)
    tp, replicas = int(search.tps[i]), best.replicas
    gpus = replicas * tp
    low, high = (search.gpus_at(end, best) for end in (0, 1))
    # the interval holds the plan: faster steps never need more GPUs of the same configuration
    gpus_interval = (min(low, gpus) if low is not None else gpus, max(high, gpus) if high is not None else None)
    lam = search.workload.arrival_rate.m_as("request/s")
    tokens_per_hour = lam * search.workload.output_tokens * HOURS
    rate = float(e.rate[i, j])
    utilization = lam / (replicas * rate)
    power = gpus * family.tdp * (costs.idle_power_fraction + (1 - costs.idle_power_fraction) * utilization)
    energy = Q_(power * HOURS / tokens_per_hour * 1e6, "J")  # per million output tokens
    kwh = costs.electricity if costs.electricity is not None else DEFAULT_ELECTRICITY_PRICE
    ttft, tpot = float(e.ttft[i, j]), float(e.tpot[i, j])
    return FleetPlan(
        feasible=True,
        reason=f"cheapest of {record['candidates']} configurations; {_BINDING_REASONS[binding]}",
        accelerator=family.accelerator,
        precision=family.precision,
        kv_precision=family.arrays.kv_precision,
        tensor_parallel=tp // family.stages,
        expert_parallel=1 if family.moe_layout == "tensor" else tp,
        data_parallel=int(family.ranks(np.asarray(float(tp)))),
        pipeline_parallel=family.stages,
        nodes_per_replica=int(np.ceil(tp / family.arrays.node_gpus)) if np.isfinite(family.arrays.node_gpus) else 1,
        batch=int(family.caps(family.stage_tp(search.tp_grid), search.batch_grid)[i, j]),
        replicas=replicas,
        gpus=gpus,
        utilization=float(utilization),
        ttft=Q_(ttft, "s"),
        tpot=Q_(tpot, "s"),
        tbt_max=Q_(float(e.tbt_max[i, j]), "s"),
        ttft_interval=(Q_(ttft * bands["ttft"][0], "s"), Q_(ttft * bands["ttft"][1], "s")),
        tpot_interval=(Q_(tpot * bands["tpot"][0], "s"), Q_(tpot * bands["tpot"][1], "s")),
        gpus_interval=gpus_interval,
        replica_throughput=Q_(rate, "request/s"),
        binding_constraint="tpot" if binding == "tbt" else binding,
        **_fleet_costs(gpus, gpus * family.price, lam, search.workload.input_tokens, search.workload.output_tokens),
        power=Q_(power, "W").to("kW"),
        energy_per_million_output_tokens=energy.to("kWh"),
        electricity_cost_per_million_output_tokens=(energy * kwh).to("USD"),
        rejected={key: r.text for key, r in rejected.items()},
        rejections=tuple(rejected.values()),
        running_batch=float(e.running[i, j]),
        **record,
    )


_BINDING_REASONS = {
    "memory": "one replica fewer would need a larger batch cap than the KV cache holds",
    "tpot": "with one replica fewer the running batch would exceed the TPOT target",
    "ttft": "with one replica fewer TTFT would exceed its target",
    "tbt": "with one replica fewer the token gap would exceed its target",
    "throughput": "one replica fewer would run above the max_utilization headroom",
}


def _size(problem: _Problem, progress: Callable[[int, int], Any] | None = None) -> FleetPlan:
    """:func:`size_fleet` of a resolved problem, with a ``progress(done, total)`` callback per family."""
    workload, targets = problem.workload, problem.targets
    record: dict[str, Any] = {
        "model": problem.model.id, "engine": problem.profile.name, "workload": workload, "targets": targets,
        "serving": problem.serving, "registry_documents": problem.registry.user_documents,
    }  # fmt: skip
    if problem.beyond:
        return FleetPlan(feasible=False, reason=problem.beyond, **record)
    families, tps = list(problem.families), problem.tps
    tp_grid, batch_grid = np.meshgrid(tps, problem.batches, indexing="ij")
    search = _Search(families, problem.profile, workload, targets, problem.serving, tps, tp_grid, batch_grid)
    outcome = search.run(progress=progress)
    record["candidates"] = len(families) * tp_grid.size
    if outcome.best is not None:
        return _feasible_plan(search, outcome.best, outcome, problem.costs, record)
    rejected = outcome.rejected
    return FleetPlan(
        feasible=False,
        reason=_infeasible_reason(
            rejected, outcome.closest_ttft, outcome.closest_tpot, targets, problem.model.attention_heads
        ),
        rejected={key: r.text for key, r in rejected.items()},
        rejections=tuple(rejected.values()),
        # nothing achievable to name where no candidate holds the weights and a sequence
        closest=(
            {"ttft": Q_(outcome.closest_ttft, "s"), "tpot": Q_(outcome.closest_tpot, "s")}
            if np.isfinite(outcome.closest_ttft) and np.isfinite(outcome.closest_tpot)
            else {}
        ),
        **record,
    )
