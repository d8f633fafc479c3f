"""SLO-driven fleet sizing: which GPUs, at what tensor-parallel degree and batch cap, how many, what cost.

:func:`size_fleet` searches every candidate configuration (accelerator x precision x TP degree x
cap ``B`` on running sequences) at once with numpy, using the calibrated step model of
:mod:`calculator.performance` and the queueing models of :mod:`calculator.queueing`:

* **memory**: weights per device plus the KV cache of ``B`` sequences at the mean context must fit
  the engine's share of device memory (the KV cache shards over the tensor-parallel ranks);
* **iteration at running batch n**: where the engine mixes prefill into decoding, ``n / (O - 1)``
  prompts land in an iteration on average, each adding its chunks' cost over a plain decode step
  (averaged over the prompt-length distribution); prefill-first engines pause decoding instead;
* **throughput** at the cap: ``lambda_r(B) = B / ((O - 1) t_iter(B))``, or the token budget left by
  the decodes if prompts fill it first; replicas ``ceil(lambda / (u_max lambda_r(B)))``;
* **running batch**: the planned load per replica, ``lambda / R``, read back through the
  ``lambda_r(n)`` curve (Little's law); **TPOT** is the iteration time there;
* **TTFT**: the request overhead of the engine, half an iteration, the iterations that carry the
  prompt, and two waits: for the prefill budget (G/G/1 at full-budget iterations) and for a running
  slot when the batch is at its cap (G/G/B, holding time from Little's law); the router sets each
  replica's arrival variability (random dispatch keeps it Poisson-like, round robin smooths it); a
  percentile target combines the prompt-length tail and the wait tail;
* **headroom**: replicas are loaded to at most ``max_utilization`` of ``lambda_r(B)``.

The cheapest feasible candidate wins (the largest cap among equals). The plan reports its binding
constraint (what keeps it from one replica fewer), why each rejected family failed, the closest
achievable values when nothing is feasible, and the throughput-vs-interactivity frontier.
:func:`calculator.simulation.verify_plan` checks a plan request by request (``verify=True``).
Disaggregated prefill/decode pools (:func:`size_disaggregated`) size each pool for its own work and
add the KV handoff (Eq. 10) to TTFT.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import count, probability
from ..errors import InputError
from ..formula import magnitude
from ..performance import (
    EngineProfile,
    StepArrays,
    decode_step_seconds,
    engine_profile,
    iteration_seconds,
    kv_capacity_tokens,
    prefill_seconds,
    step_arrays,
)
from ..precision import check_precision
from ..queueing import replica_demand
from ..results import Result, ceil_count
from ..simulation import DEFAULT_ROUTER, router_name
from ..types import AcceleratorRef, InterconnectRef, ModelRef, Rate, Time
from ..uncertainty import prediction_interval
from ..units import Q_, ureg

if TYPE_CHECKING:
    from ..registry import Registry


__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_TENSOR_PARALLEL",
    "DemandPlan",
    "DisaggregatedPlan",
    "FleetPlan",
    "RelaxedPlan",
    "Rejection",
    "ServingModeComparison",
    "Speculation",
    "Workload",
    "compare_serving_modes",
    "default_price",
    "default_price_entry",
    "demand_from_trace",
    "frontier",
    "plan_over_time",
    "plan_summary",
    "relax_targets",
    "size_disaggregated",
    "size_fleet",
]

DEFAULT_TENSOR_PARALLEL = (1, 2, 4, 8)
#: The keyword arguments of :func:`calculator.simulation.verify_plan` that ``verify_options`` may give.
_VERIFY_OPTIONS = frozenset({"requests", "seeds", "router", "max_replicas", "executor", "progress", "time_limit"})
#: Operating batches searched: every size to 16, then steps that keep the grid about 90 points.
DEFAULT_BATCHES = tuple(sorted({*range(1, 17), *range(18, 65, 2), *range(68, 257, 4), *range(264, 1025, 8)}))
HOURS = 3600.0


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, repr=False)
class Workload(Result):
    """Traffic as a capacity planner has it: a rate and request lengths with their variability.

    Attributes
    ----------
    arrival_rate : Quantity [request / time]
        Mean request rate to serve.
    input_tokens, output_tokens : float
        Mean prompt and output lengths.
    input_cv, output_cv : float
        Coefficients of variation of the lengths (0 for fixed lengths).
    arrival_cv : float
        Coefficient of variation of inter-arrival times (1 for Poisson, > 1 for bursty traffic).
    """

    arrival_rate: Any
    input_tokens: float
    output_tokens: float
    input_cv: float = 0.0
    output_cv: float = 0.0
    arrival_cv: float = 1.0

    def __post_init__(self) -> None:
        rate = self.arrival_rate
        if not isinstance(rate, ureg.Quantity) or rate.dimensionality != ureg.parse_units("request/s").dimensionality:
            raise InputError(f"Workload: 'arrival_rate' must be a rate in request/s, got {rate!r}")
        if not rate.magnitude > 0:
            raise InputError(f"Workload: 'arrival_rate' must be > 0, got {rate!r}")
        for name in ("input_tokens", "output_tokens"):
            # A length is a token count: a plain number or a quantity of tokens.
            tokens = float(magnitude("Workload", name, getattr(self, name), "token", "positive"))
            if not tokens >= 1:
                raise InputError(f"Workload: '{name}' must be >= 1 token, got {getattr(self, name)!r}")
            object.__setattr__(self, name, tokens)
        for name in ("input_cv", "output_cv", "arrival_cv"):
            if not getattr(self, name) >= 0:
                raise InputError(f"Workload: '{name}' must be >= 0, got {getattr(self, name)!r}")

    @classmethod
    def from_trace(
        cls, trace: Any, *, time: str = "arrival_time", inputs: str = "input_tokens", outputs: str = "output_tokens"
    ) -> Workload:
        """A workload from a request trace (CSV path or DataFrame with arrival times in seconds).

        The rate is the number of requests over the span of arrivals, the lengths' means and CVs
        come from the columns, and the arrival CV from the inter-arrival times.
        """
        frame = _read_trace(trace, (time, inputs, outputs))
        times = np.sort(frame[time].to_numpy(dtype=float))
        span = times[-1] - times[0]
        if len(times) < 2 or span <= 0:
            raise InputError("Workload.from_trace(): the trace needs at least two distinct arrival times")
        gaps = np.diff(times)
        lengths_in = frame[inputs].to_numpy(dtype=float)
        lengths_out = frame[outputs].to_numpy(dtype=float)
        return cls(
            arrival_rate=Q_((len(times) - 1) / span, "request/s"),
            input_tokens=float(lengths_in.mean()),
            output_tokens=float(lengths_out.mean()),
            input_cv=float(lengths_in.std() / lengths_in.mean()),
            output_cv=float(lengths_out.std() / lengths_out.mean()),
            arrival_cv=float(gaps.std() / gaps.mean()) if gaps.mean() > 0 else 0.0,
        )


def demand_from_trace(trace: Any, bin_width: Time = None, *, time: str = "arrival_time") -> tuple[Any, Any]:
    """The demand curve of a request trace: arrivals counted per ``bin_width`` (default one hour).

    Returns ``(times, rates)``: the start of each bin (from the first arrival) and its mean request
    rate, ready for :func:`plan_over_time`.
    """
    width = _seconds("bin_width", bin_width) if bin_width is not None else HOURS
    frame = _read_trace(trace, (time,))
    arrivals = np.sort(frame[time].to_numpy(dtype=float))
    start = arrivals[0]
    bins = np.floor((arrivals - start) / width).astype(int)
    counts = np.bincount(bins)
    return Q_(start + width * np.arange(counts.size), "s"), Q_(counts / width, "request/s")


@dataclass(frozen=True, repr=False)
class Speculation(Result):
    """Speculative decoding with a draft model (section 10.7.6).

    Attributes
    ----------
    draft_model : str
        Registry id of the draft model (it runs on the same devices as the target).
    draft_length : int
        Draft tokens proposed per round, ``K``.
    acceptance : float
        Per-token acceptance probability, ``alpha``.
    """

    draft_model: str
    draft_length: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        if int(self.draft_length) != self.draft_length or self.draft_length < 1:
            raise InputError(f"Speculation: 'draft_length' must be an integer >= 1, got {self.draft_length!r}")
        if not 0 <= self.acceptance <= 1:
            raise InputError(f"Speculation: 'acceptance' must be in [0, 1], got {self.acceptance!r}")


def default_price(accelerator: AcceleratorRef, registry: Registry | None = None) -> Any:
    """A GPU-hour price for ``accelerator`` from the registry: the cheapest published on-demand price.

    Falls back to the chapter's scenario prices; raises :class:`InputError` when the registry has
    none (pass ``price=`` to :func:`size_fleet`). :func:`default_price_entry` gives the entry.
    ``registry`` defaults to :func:`~calculator.registry.load_registry`.
    """
    return default_price_entry(accelerator, registry).price


def default_price_entry(accelerator: AcceleratorRef, registry: Registry | None = None) -> Any:
    """The registry price entry :func:`default_price` reads (to cite it as a source)."""
    from ..registry import load_registry

    reg = registry if registry is not None else load_registry()
    device = reg.accelerator(accelerator)
    prices = [p for p in reg.prices.values() if p.accelerator == device.id and p.market == "on_demand"]
    published = [p for p in prices if p.provenance == "published"] or prices
    if not published:
        raise InputError(
            f"the registry has no on-demand price for accelerator '{device.id}'; pass price= (USD/hour per GPU)"
        )
    return min(published, key=lambda p: p.price.m_as("USD/hour"))


# --------------------------------------------------------------------------------------------
# Plan


@dataclass(frozen=True, repr=False)
class Rejection(Result):
    """Why one (accelerator, precision, TP) family is not the plan: a reason code and its values.

    Attributes
    ----------
    family : str
        ``accelerator/precision/tpN``.
    accelerator, precision : str
    tensor_parallel : int
    code : str
        ``"memory"`` (the weights leave no room for one sequence's KV cache), ``"tpot"``, ``"ttft"``
        or ``"tbt"`` (no batch cap meets that target), ``"joint"`` (each target is met by some cap,
        none meets all), or ``"costlier"`` (feasible, but not the cheapest).
    values : dict
        The numbers behind the code: ``weights_per_device`` and ``usable_per_device`` (memory), the
        ``best`` value reached and the ``target`` (tpot, ttft), or ``gpus``, ``batch`` and
        ``cost_per_hour`` (costlier).
    """

    family: str
    accelerator: str
    precision: str
    tensor_parallel: int
    code: str
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The reason in a sentence, as the front ends show it."""
        v = self.values
        if self.code == "memory":
            return (
                f"memory: {v['weights_per_device'].m_as('GB'):.1f} GB of weights per device leave no room for one "
                f"sequence's KV cache in {v['usable_per_device'].m_as('GB'):.1f} GB usable"
            )
        if self.code == "tpot":
            return f"TPOT: at best {v['best'].m_as('ms'):.1f} ms, above the {v['target'].m_as('ms'):g} ms target"
        if self.code == "ttft":
            return f"TTFT: at best {v['best'].m_as('ms'):.0f} ms, above the {v['target'].m_as('ms'):g} ms target"
        if self.code == "tbt":
            return "token gap: every batch stalls a decode step longer than the target"
        if self.code == "joint":
            return "no batch meets the TPOT and TTFT targets together"
        return (
            f"feasible but not the cheapest: {v['gpus']} GPUs at batch {v['batch']}, "
            f"{v['cost_per_hour'].m_as('USD/hour'):.2f} USD/hour"
        )


@dataclass(frozen=True, repr=False)
class FleetPlan(Result):
    """The cheapest feasible configuration for the workload, or why there is none.

    Attributes
    ----------
    feasible : bool
        Whether any candidate meets every target.
    reason : str
        Why the plan is what it is (binding constraint), or why nothing is feasible.
    model, accelerator, precision, engine : str
        The chosen configuration.
    tensor_parallel, batch, replicas, gpus : int
        Devices per replica, the cap on sequences running on a replica (the engine's
        ``max_num_seqs`` to configure), replicas, and total GPUs.
    running_batch : float
        Sequences running on a replica on average at the planned load (Little's law); TPOT and
        TTFT are evaluated there.
    utilization : float
        Load of each replica as a fraction of its throughput at the batch cap.
    max_utilization : float
        The planning ceiling on that load (headroom).
    ttft, tpot, tbt_max : Quantity [time]
        Predicted TTFT (mean, or the requested percentile), TPOT, and the longest gap between
        streamed tokens (a prefill or chunk landing in a decode step).
    ttft_interval, tpot_interval : tuple of Quantity
        ``(low, high)``: the performance model's 80 % interval around TTFT and TPOT
        (:mod:`calculator.uncertainty`).
    gpus_interval : tuple of int
        GPUs the cheapest plan needs if the step times sit at the low and at the high end of the
        model's step-time (TPOT) interval: the search rerun with prefill and decode times scaled.
        The high end is ``None`` when no candidate meets the targets there.
    replica_throughput : Quantity [request / time]
        What one replica sustains with its batch cap full.
    binding_constraint : str
        ``"memory"``, ``"tpot"``, ``"ttft"`` or ``"throughput"``.
    cost_per_hour, cost_per_million_tokens : Quantity [currency / time], [currency]
        Fleet cost and cost per million output tokens.
    power, energy_per_million_tokens, electricity_cost_per_million_tokens : Quantity
        Fleet power draw, energy and electricity cost per million output tokens.
    rejected : dict
        Per family ``accelerator/precision/tpN``: why it cannot serve the workload (or its best cost),
        in a sentence; ``rejections`` has the same as records.
    closest : dict
        When infeasible: the lowest TTFT and TPOT any candidate reaches.
    candidates : int
        Configurations evaluated.
    router : str
        The dispatch policy assumed (``size_fleet``'s ``router``, round robin unless told).
    workload : Workload
        The traffic planned for.
    targets : dict
        ``ttft``, ``tpot``, ``tbt`` (Quantity or None), ``ttft_percentile`` (None for the mean),
        ``kv_precision`` and ``chunk_size``: what a simulation needs to check the plan.
    rejections : tuple of Rejection
        The families not chosen, each with a reason code and the values behind it.
    simulated_replicas : int or None
        With ``verify=True``: the fewest replicas that meet the targets in simulation.
    verification : PlanVerification or None
        With ``verify=True``: the simulations behind ``simulated_replicas``.
    """

    feasible: bool
    reason: str
    model: str = ""
    accelerator: str = ""
    precision: str = ""
    engine: str = ""
    tensor_parallel: int = 0
    batch: int = 0
    replicas: int = 0
    gpus: int = 0
    utilization: float = 0.0
    max_utilization: float = 0.0
    ttft: Any = None
    tpot: Any = None
    tbt_max: Any = None
    ttft_interval: Any = None
    tpot_interval: Any = None
    gpus_interval: Any = None
    replica_throughput: Any = None
    binding_constraint: str = ""
    cost_per_hour: Any = None
    cost_per_million_tokens: Any = None
    power: Any = None
    energy_per_million_tokens: Any = None
    electricity_cost_per_million_tokens: Any = None
    rejected: dict[str, str] = field(default_factory=dict)
    closest: dict[str, Any] = field(default_factory=dict)
    candidates: int = 0
    running_batch: float = 0.0
    router: str = DEFAULT_ROUTER
    workload: Any = None
    targets: dict[str, Any] = field(default_factory=dict)
    rejections: tuple[Rejection, ...] = ()
    simulated_replicas: int | None = None
    verification: Any = None


# --------------------------------------------------------------------------------------------
# The vectorized evaluation


@dataclass
class _Family:
    """One (accelerator, precision) with its step-model arrays and price."""

    accelerator: str
    precision: str
    arrays: StepArrays
    price: float  # USD per GPU-hour
    tdp: float  # W
    draft: StepArrays | None


def _evaluate(
    family: _Family,
    profile: EngineProfile,
    workload: Workload,
    tp: np.ndarray,
    batch: np.ndarray,
    options: dict[str, Any],
    scale: tuple[float, float] = (1.0, 1.0),
) -> dict[str, np.ndarray]:
    """Every quantity of the plan for the candidate grid ``tp`` x ``batch`` (plain arrays, SI).

    ``batch`` is the replica's cap on running sequences; replicas are set by the throughput at that
    cap, and the latencies are evaluated at the running batch the planned load produces (Little's
    law on the grid). ``scale`` multiplies prefill and decode step times (the ends of the model's
    error interval).
    """
    a = family.arrays
    eff = profile.efficiency_for(family.accelerator)
    inputs, outputs = workload.input_tokens, workload.output_tokens
    hit, shared = options["prefix_hit_rate"], options["shared_prefix_tokens"]
    computed = max(inputs - hit * shared, 1.0)  # prompt tokens actually prefilled
    # Tokens a running sequence holds on average: its prompt plus half its output, the output
    # length-biased (long outputs stay longer in the batch): E[O^2] / (2 E[O]) = O (1 + cv^2) / 2.
    context = inputs + outputs * (1 + workload.output_cv**2) / 2
    private = context - hit * shared  # KV tokens each sequence holds privately

    capacity_tokens = kv_capacity_tokens(a, profile, tp)
    spec = options["speculation"]
    if spec is not None and family.draft is not None:
        d = family.draft
        capacity_tokens = capacity_tokens - d.weight_bytes / tp * np.minimum(tp, a.kv_shards_max) / a.kv_bytes_per_token
        private = private * (1 + d.kv_bytes_per_token / a.kv_bytes_per_token)
    capacity = np.floor(np.maximum(capacity_tokens - (shared if hit > 0 else 0.0), 0.0) / private)
    fits = batch <= capacity

    t_pf = scale[0] * prefill_seconds(a, eff, tp, computed)
    t_dec = scale[1] * decode_step_seconds(a, eff, tp, batch, context)
    if spec is not None and family.draft is not None:
        from ..speculative import expected_tokens_per_round

        k = spec.draft_length
        verify = scale[1] * decode_step_seconds(a, eff, tp, batch, context, tokens=k + 1)
        drafting = scale[1] * k * decode_step_seconds(family.draft, eff, tp, batch, context)
        per_token = (verify + drafting) / expected_tokens_per_round.numeric(acceptance=spec.acceptance, draft_length=k)
    else:
        per_token = t_dec

    decode_slots = max(outputs - 1, 1.0)
    budget = float(options["chunk_size"] or profile.limits(a.memory, a.accelerator)[0])
    chunked = profile.chunked_prefill or bool(options["chunk_size"])
    percentile = options["ttft_percentile"]
    # Prompt lengths: quadrature nodes of the log-normal length distribution (prefill cost is
    # convex in the length), and the length at the TTFT percentile.
    nodes, weights = _length_nodes(inputs, workload.input_cv)
    tail_prompt = _length_quantile(inputs, workload.input_cv, percentile)
    hit_tokens = hit * shared
    if profile.mixed_batching:
        # Prompts arrive whole and ride in decode iterations, in ``k`` chunks where the budget left
        # by the decodes is smaller than the prompt. At running batch n, n / (O - 1) prompts land per
        # iteration on average, each adding its chunks' cost over a plain decode step.
        room = np.maximum(budget - batch, 1.0)
        plain = t_dec / scale[1]

        def prompt_cost(length: float) -> tuple[np.ndarray, np.ndarray]:
            """(chunks, added seconds per chunk iteration) of a prompt of ``length`` tokens."""
            tokens = max(length - hit_tokens, 1.0)
            k = np.ceil(tokens / room) if chunked else np.ones_like(room)
            chunk = tokens / k
            added = iteration_seconds(a, eff, tp, batch, context, chunk, 1, (k - 1) / 2 * chunk) - plain
            return k, scale[0] * np.maximum(added, 0.0)

        costs = [prompt_cost(length) for length in nodes]
        per_prompt = sum(w * k * d for w, (k, d) in zip(weights, costs, strict=True))
        step = per_token + batch / decode_slots * per_prompt
        rate = np.minimum(batch / (decode_slots * step), room / (computed * step))
        first_mean = step / 2 + sum(w * k * (step + d) for w, (k, d) in zip(weights, costs, strict=True))
        k_tail, d_tail = prompt_cost(tail_prompt) if tail_prompt != nodes[0] or len(nodes) > 1 else costs[0]
        first_tail = step / 2 + k_tail * (step + d_tail)
        full = scale[0] * np.maximum(iteration_seconds(a, eff, tp, batch, context, room, 1) - plain, 0.0)
        service = computed / room * (per_token + full)  # a prompt's share of full-budget iterations
        tbt = step + np.maximum(d_tail, costs[-1][1])
        own_time = sum(w * k * (step + d) for w, (k, d) in zip(weights, costs, strict=True))
    else:
        # Prefill-first: prefill batches run alone and pause decoding (work conservation).
        rate = batch / (batch * t_pf + decode_slots * per_token)
        step = per_token
        tail_pf = scale[0] * prefill_seconds(a, eff, tp, max(tail_prompt - hit_tokens, 1.0))
        first_mean = per_token / 2 + t_pf
        first_tail = per_token / 2 + tail_pf
        service = t_pf
        tbt = per_token + np.maximum(t_pf, tail_pf)
        own_time = t_pf
    lam = options["arrival_rate"]
    replicas = ceil_count(
        replica_demand.numeric(arrival_rate=lam, replica_throughput=rate, max_utilization=options["max_utilization"])
    )
    load = lam / replicas  # each replica's arrival rate
    arrival_cv = _replica_arrival_cv(workload.arrival_cv, replicas, options["router"])
    # The running batch fluctuates: every running sequence gets a token per iteration, a symmetric
    # (processor-sharing) queue whose completion rate with n running is the rate curve at n. Its
    # birth-death distribution gives the mean running batch, the chance the cap is full and the
    # wait for a slot (exact for Poisson arrivals, whatever the output lengths); smoother arrivals
    # (round robin) keep a share (1 + cv^2) / 2 of the excess over the fluid fixed point.
    fluid = _running_batch(batch, rate, load)
    mean_running, slot_wait, full, headroom = _occupancy(batch, rate, load)
    smooth = (1 + arrival_cv**2) / 2
    running = fluid + smooth * np.maximum(mean_running - fluid, 0.0)
    first_mean, first_tail, service, tbt_max, own = (
        _on_row(fluid, batch, v) for v in (first_mean, first_tail, service, tbt, own_time)
    )
    # TPOT: a request's time running (Little's law) less its prefill iterations, per output token.
    fixed_point = _on_row(fluid, batch, step if profile.mixed_batching else per_token)
    if not profile.mixed_batching:
        fixed_point = fixed_point / (1 - np.minimum(load * t_pf, 0.999))
    tpot = np.maximum((running / np.maximum(load, 1e-300) - own) / decode_slots, fixed_point)

    # Two queues a request can wait in: for prefill budget (one server at full-budget iterations),
    # and for a running slot when the batch is at its cap (the birth-death tail).
    wait_mean = _wait(load, service, 1, arrival_cv, workload.input_cv, None) + smooth * slot_wait
    ttft = profile.request_overhead.m_as("s") + first_mean + wait_mean
    if percentile is not None:
        # The percentile of a sum of independent delays: means plus the root-sum-square of the
        # excesses of each at the percentile (between the largest excess and their sum).
        wait_tail = _wait(load, service, 1, arrival_cv, workload.input_cv, percentile)
        # A full cap drains at the cap's completion rate: P(wait > x) = P(full) exp(-headroom x).
        slot_tail = np.log(np.maximum(full, 1e-300) / (1 - percentile)) / np.maximum(headroom, 1e-300)
        wait_tail = wait_tail + smooth * np.where(headroom > 0, np.maximum(slot_tail, 0.0), np.inf)
        excess = np.hypot(np.maximum(first_tail - first_mean, 0.0), np.maximum(wait_tail - wait_mean, 0.0))
        ttft = np.where(np.isfinite(wait_tail), ttft + excess, np.inf)
    usable = profile.memory_utilization * a.memory - profile.memory_reserve.m_as("B")
    return {
        "fits": fits,
        "capacity": capacity,
        "usable_per_device": usable,
        "prefill": t_pf,
        "decode_step": t_dec,
        "tpot": tpot,
        "tpot_at_batch": step,
        "ttft": ttft,
        "tbt_max": tbt_max,
        "rate": rate,
        "replicas": replicas,
        "running": running,
        "weights_per_device": a.weight_bytes / tp,
    }


def _length_nodes(mean: float, cv: float, points: int = 5) -> tuple[list[float], list[float]]:
    """Gauss-Hermite nodes and weights of a log-normal length with ``mean`` and ``cv`` (one node if fixed)."""
    if cv <= 0:
        return [mean], [1.0]
    sigma = math.sqrt(math.log1p(cv**2))
    z, w = np.polynomial.hermite_e.hermegauss(points)
    w = w / w.sum()
    return [float(v) for v in mean * np.exp(sigma * z - sigma**2 / 2)], [float(v) for v in w]


def _length_quantile(mean: float, cv: float, quantile: float | None) -> float:
    """The ``quantile`` of a log-normal length (the mean when fixed or when no quantile is asked)."""
    if cv <= 0 or quantile is None:
        return mean
    from scipy.stats import norm

    sigma = math.sqrt(math.log1p(cv**2))
    return float(mean * math.exp(sigma * norm.ppf(quantile) - sigma**2 / 2))


def _running_batch(batch: np.ndarray, rate: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Sequences running at ``load`` per replica: where a row's rate-vs-batch curve reaches it.

    ``rate[i, j]`` is what a replica sustains with ``batch[i, j]`` sequences running, so the running
    batch at a given load is the inverse of that curve (interpolated on the grid).
    """
    out = np.empty_like(load, dtype=float)
    for i in range(batch.shape[0]):
        curve = np.maximum.accumulate(rate[i])
        below = batch[i, 0] * load[i] / max(curve[0], 1e-300)  # fewer than the smallest grid batch
        out[i] = np.where(load[i] < curve[0], below, np.interp(load[i], curve, batch[i]))
    return np.minimum(out, batch)


def _occupancy(batch: np.ndarray, rate: np.ndarray, load: np.ndarray) -> tuple[np.ndarray, ...]:
    """The running batch as a birth-death process: arrivals ``load``, completions ``rate(n)``.

    With ``n`` sequences running a replica completes ``rate(n)`` requests per second (the grid's
    rate curve, interpolated at every whole ``n``); beyond the cap ``B`` requests wait and complete at
    ``rate(B)``. Returns, per candidate, the mean running batch, the mean wait for a slot, the
    probability the cap is full, and ``rate(B) - load`` (the drain rate of that queue; <= 0 unstable).
    """
    mean = np.empty_like(load, dtype=float)
    wait, full = np.empty_like(mean), np.empty_like(mean)
    top = int(batch.max())
    n = np.arange(top + 1, dtype=float)
    for i in range(batch.shape[0]):
        curve = np.interp(n[1:], batch[i], rate[i])
        cumulative = np.concatenate(([0.0], np.cumsum(np.log(np.maximum(curve, 1e-300)))))
        lam = load[i][:, None]
        cap = batch[i][:, None]
        log_p = n[None, :] * np.log(lam) - cumulative[None, :]
        log_p = np.where(n[None, :] <= cap, log_p, -np.inf)
        log_p -= log_p.max(axis=1, keepdims=True)
        p = np.exp(log_p)
        at_cap = np.take_along_axis(p, batch[i][:, None].astype(int), axis=1)[:, 0]
        rho = np.minimum(load[i] / np.interp(batch[i], n[1:], curve), 1 - 1e-12)
        tail = at_cap * rho / (1 - rho)
        total = p.sum(axis=1) + tail
        mean[i] = ((p * n[None, :]).sum(axis=1) + batch[i] * tail) / total
        full[i] = (at_cap + tail) / total
        wait[i] = at_cap * rho / (1 - rho) ** 2 / total / load[i]
    drain = np.stack([np.interp(batch[i], batch[i], rate[i]) for i in range(batch.shape[0])]) - load
    unstable = drain <= 0
    return (
        np.where(unstable, np.inf, mean),
        np.where(unstable, np.inf, wait),
        np.where(unstable, 1.0, full),
        drain,
    )


def _on_row(running: np.ndarray, batch: np.ndarray, values: Any) -> np.ndarray:
    """``values`` (a grid over ``batch``) read at each candidate's running batch."""
    values = np.broadcast_to(values, batch.shape)
    return np.stack([np.interp(running[i], batch[i], values[i]) for i in range(batch.shape[0])])


def _replica_arrival_cv(arrival_cv: float, replicas: np.ndarray, router: str) -> np.ndarray:
    """Inter-arrival CV at one of ``replicas`` replicas behind ``router``.

    Random dispatch thins the stream (``cv^2 / R + 1 - 1 / R``: Poisson-like as ``R`` grows); round
    robin sums ``R`` consecutive gaps (``cv^2 / R``). Load-aware routers (join-shortest-queue, least
    outstanding tokens, power of two) balance at least as well as round robin and are given its value.
    """
    share = 1.0 / np.maximum(replicas, 1)
    if router == "random":
        return np.sqrt(arrival_cv**2 * share + 1 - share)
    return np.sqrt(arrival_cv**2 * share)


def _wait(load: Any, service: Any, servers: Any, arrival_cv: Any, service_cv: float, percentile: Any) -> np.ndarray:
    from ..queueing import ggc_mean_wait, ggc_wait_quantile

    arrival, service_q = Q_(load, "request/s"), Q_(service, "s")
    if percentile is None:
        return ggc_mean_wait(arrival, service_q, servers, arrival_cv, service_cv).m_as("s")
    return ggc_wait_quantile(arrival, service_q, servers, arrival_cv, service_cv, percentile).m_as("s")


def _families(
    model: Any,
    accelerators: Sequence[Any],
    precisions: Sequence[str],
    price: Any,
    speculation: Speculation | None,
    kv_precision: str | None,
    reg: Any,
) -> list[_Family]:
    out = []
    for accelerator in accelerators:
        device = reg.accelerator(accelerator)
        hourly = _price_for(device.id, accelerator, price, reg)
        for precision in precisions:
            arrays = step_arrays(model, device, precision, kv_precision, registry=reg)
            draft = (
                step_arrays(speculation.draft_model, device, precision, kv_precision, registry=reg)
                if speculation
                else None
            )
            out.append(_Family(device.id, check_precision(precision), arrays, hourly, device.tdp.m_as("W"), draft))
    return out


def _price_for(accelerator_id: str, given_name: Any, price: Any, reg: Any) -> float:
    if price is None:
        hourly = default_price(accelerator_id, reg)
    elif isinstance(price, dict):
        hourly = price.get(accelerator_id, price.get(given_name) if isinstance(given_name, str) else None)
        if hourly is None:
            raise InputError(f"size_fleet(): argument 'price' has no entry for accelerator '{accelerator_id}'")
    else:
        hourly = price
    if not isinstance(hourly, ureg.Quantity) or hourly.dimensionality != _PRICE_DIMENSION:
        raise InputError(f"size_fleet(): argument 'price' must be a quantity in USD/hour per GPU, got {hourly!r}")
    if not hourly.magnitude > 0:
        raise InputError(f"size_fleet(): argument 'price' must be > 0, got {hourly!r}")
    return hourly.m_as("USD/hour")


_PRICE_DIMENSION = ureg.parse_units("USD/hour").dimensionality


def _as_list(value: Any) -> list[Any]:
    """One candidate or several: an id, a registry entry object (iterable, but one item) or a list."""
    if isinstance(value, str) or hasattr(value, "id") or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _rate(value: Any) -> Any:
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.parse_units("request/s").dimensionality:
        raise InputError(
            f"size_fleet(): argument 'arrival_rate' must be a rate such as Q_(10, 'request/s'), got {value!r}"
        )
    if not value.magnitude > 0:
        raise InputError(
            f"size_fleet(): argument 'arrival_rate' must be > 0 (zero traffic needs no fleet), got {value!r}"
        )
    return value.to("request/s")


def _seconds(name: str, value: Any) -> float:
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
        raise InputError(f"size_fleet(): argument '{name}' must be a time such as Q_(200, 'ms'), got {value!r}")
    if not value.magnitude > 0:
        raise InputError(f"size_fleet(): argument '{name}' must be > 0, got {value!r}")
    return value.m_as("s")


def _model_id(model: Any) -> str:
    return model.id if hasattr(model, "id") else str(model)


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


def _registry_for(registry: Any, *entries: Any) -> Any:
    """The registry to resolve ids in: the one given, else the one an entry object came from, else the default."""
    from ..registry import load_registry, registry_of

    if registry is not None:
        return registry
    for entry in entries:
        for item in entry if isinstance(entry, list | tuple) else (entry,):
            if not isinstance(item, str) and hasattr(item, "id"):
                return registry_of(item)
    return load_registry()


def _read_trace(trace: Any, columns: tuple[str, ...]) -> Any:
    import pandas as pd

    frame = trace if isinstance(trace, pd.DataFrame) else pd.read_csv(trace)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"the trace lacks column(s) {missing}; it has {list(frame.columns)}")
    values = frame[list(columns)].to_numpy(dtype=float)
    if len(values) < 1:
        raise InputError("the trace has no requests")
    if not np.all(np.isfinite(values)) or np.any(values[:, 1:] < 1) or np.any(values[:, 0] < 0):
        raise InputError("the trace has negative times, lengths below one token, or missing values")
    return frame


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


def _check_options(
    workload: Workload,
    max_utilization: float,
    ttft_percentile: float | None,
    prefix_hit_rate: float,
    shared_prefix_tokens: float,
    chunk_size: int | None,
) -> None:
    name = "size_fleet"
    if not probability(name, "max_utilization", max_utilization) > 0:
        raise InputError(f"size_fleet(): argument 'max_utilization' must be in (0, 1], got {max_utilization!r}")
    if ttft_percentile is not None and not 0 < probability(name, "ttft_percentile", ttft_percentile) < 1:
        raise InputError(f"size_fleet(): argument 'ttft_percentile' must be in (0, 1), got {ttft_percentile!r}")
    probability(name, "prefix_hit_rate", prefix_hit_rate)
    if not magnitude(name, "shared_prefix_tokens", shared_prefix_tokens, "token") <= workload.input_tokens:
        raise InputError("size_fleet(): argument 'shared_prefix_tokens' must be between 0 and input_tokens")
    if chunk_size is not None:
        count(name, "chunk_size", chunk_size)


def _grid(model: Any, tensor_parallel: Sequence[int], batches: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The TP degrees that split ``model`` (a registry Model) and the batch caps, as arrays."""
    if not len(tensor_parallel) or not len(batches):
        raise InputError("size_fleet(): 'tensor_parallel' and 'batches' must be non-empty lists of integers >= 1")
    tps = np.unique(np.asarray(count("size_fleet", "tensor_parallel", list(tensor_parallel)), dtype=float))
    grid_batches = np.unique(np.asarray(count("size_fleet", "batches", list(batches)), dtype=float))
    heads = model.attention_heads
    if heads is None:
        raise InputError(f"size_fleet(): model '{_model_id(model)}' is not a transformer LLM")
    usable = tps[heads % tps == 0]
    if usable.size == 0:
        raise InputError(f"size_fleet(): no tensor-parallel degree in {list(tensor_parallel)} divides {heads} heads")
    return usable, grid_batches


def plan_summary(plan: FleetPlan) -> str:
    """The answer in a line, with the model's error band: ``8 x h100-sxm (TP 2): 4-16 GPUs at ...``.

    Examples
    --------
    >>> plan = FleetPlan(True, "", accelerator="h100-sxm", precision="fp8", tensor_parallel=2, gpus=8)
    >>> import dataclasses
    >>> print(plan_summary(dataclasses.replace(plan, gpus_interval=(6, 12))))
    8 x h100-sxm at fp8 (TP 2); 6-12 GPUs at the ends of the model's 80% error interval
    >>> print(plan_summary(dataclasses.replace(plan, gpus_interval=(6, None))))  # doctest: +NORMALIZE_WHITESPACE
    8 x h100-sxm at fp8 (TP 2); 6 GPUs at the low end of the model's 80% error interval,
    and no candidate meets the targets at the high end
    >>> checked = dataclasses.replace(plan, gpus_interval=(6, 12), simulated_replicas=3, verification=object())
    >>> print(plan_summary(checked))  # doctest: +NORMALIZE_WHITESPACE
    8 x h100-sxm at fp8 (TP 2); 6-12 GPUs at the ends of the model's 80% error interval;
    in simulation 6 GPUs (3 replicas) meet the targets
    """
    head = f"{plan.gpus} x {plan.accelerator} at {plan.precision} (TP {plan.tensor_parallel})"
    if not plan.feasible or plan.gpus_interval is None:
        return head
    low, high = plan.gpus_interval
    if high is None:
        line = (
            f"{head}; {low} GPUs at the low end of the model's 80% error interval, "
            "and no candidate meets the targets at the high end"
        )
    else:
        line = f"{head}; {low}-{high} GPUs at the ends of the model's 80% error interval"
    if plan.verification is not None:
        simulated = plan.simulated_replicas
        line += (
            f"; in simulation {simulated * plan.tensor_parallel} GPUs ({simulated} replicas) meet the targets"
            if simulated is not None
            else "; in simulation no replica count tried meets the targets"
        )
    return line


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
            feasible = out["fits"] & ok_tpot & ok_ttft & ok_tbt
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

    def gpus_at(self, end: int) -> int | None:
        """GPUs of the cheapest plan with every family's step times at one end of its interval."""
        scales: dict[tuple[str, str], tuple[float, float]] = {}
        for family in self.families:
            bands = prediction_interval(self.profile.name, family.accelerator, family.arrays.measured)
            # Step times (prefill and decode) scale by the TPOT band: it measures the step model. The
            # TTFT band is wider because it carries a benchmark's queueing, which the sizer models itself.
            scales[family.accelerator, family.precision] = (bands["tpot"][end], bands["tpot"][end])
        best = self.run(scales)[0]
        if best is None:
            return None
        _, family, _, i, _, _, replicas, _ = best
        return int(replicas * self.tps[i])


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
    ttft_target = _seconds("ttft_slo", ttft_slo)
    tpot_target = _seconds("tpot_slo", tpot_slo)
    tbt_target = _seconds("tbt_slo", tbt_slo) if tbt_slo is not None else np.inf
    profile = engine_profile(engine)
    reg = _registry_for(registry, model, accelerator)
    model = reg.model(model)
    tps, grid_batches = _grid(model, tensor_parallel, batches)
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
    families = _families(model, _as_list(accelerator), _as_list(precision), price, speculation, kv_precision, reg)
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
        "prefix_caching": prefix_hit_rate > 0,
        "registry_files": reg.user_files,
    }
    search = _Search(families, profile, workload, tps, tp_grid, batch_grid, options, targets, lam, max_utilization)
    best, rejected, closest_ttft, closest_tpot = search.run(progress=progress)
    count = len(families) * tp_grid.size
    if best is None:
        return FleetPlan(
            feasible=False,
            reason="no configuration meets every target; closest achievable: TTFT "
            f"{closest_ttft * 1e3:.0f} ms, TPOT {closest_tpot * 1e3:.1f} ms",
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
    bands = prediction_interval(profile.name, family.accelerator, family.arrays.measured)
    gpus_low, gpus_high = (search.gpus_at(end) for end in (0, 1))
    tp = int(tps[i])
    replicas = int(replica_count)
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
        targets=targets_record,
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


@dataclass(frozen=True, repr=False)
class RelaxedPlan(Result):
    """The closest feasible alternative of a sizing: the targets loosened by one common factor.

    Attributes
    ----------
    found : bool
        Whether a factor up to the search limit admits a plan.
    factor : float
        The smallest factor (within the search tolerance) by which both targets were multiplied;
        1 when the original targets are feasible.
    ttft_slo, tpot_slo : Quantity [time]
        The loosened targets.
    plan : FleetPlan
        The plan at the loosened targets (infeasible when ``found`` is False).
    """

    found: bool
    factor: float
    ttft_slo: Any
    tpot_slo: Any
    plan: FleetPlan


def relax_targets(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    arrival_rate: Rate,
    input_tokens: float,
    output_tokens: float,
    ttft_slo: Time,
    tpot_slo: Time,
    *,
    max_factor: float = 100.0,
    tolerance: float = 0.01,
    **options: Any,
) -> RelaxedPlan:
    """The closest feasible alternative: the smallest common factor on the TTFT and TPOT targets with a plan.

    Parameters
    ----------
    model, accelerator, precision, arrival_rate, input_tokens, output_tokens, ttft_slo, tpot_slo
        As for :func:`size_fleet`.
    max_factor : float
        The largest loosening searched.
    tolerance : float
        Relative precision of the factor.
    **options
        Passed to :func:`size_fleet` (engine, price, max_utilization, ...).

    Returns
    -------
    RelaxedPlan

    Notes
    -----
    Looser targets only add feasible candidates, so feasibility is monotone in the factor and a
    bisection on its logarithm finds the smallest one. When nothing fits in memory no factor helps
    (``found`` is False and the plan's ``rejected`` says why).

    Examples
    --------
    >>> r = relax_targets("llama-3.1-70b", "h100-sxm", "fp8", Q_(10, "request/s"), 1024, 256,
    ...                   Q_(50, "ms"), Q_(5, "ms"), price=Q_(4, "USD/hour"))
    >>> r.found, r.factor > 1, r.plan.tpot <= r.tpot_slo
    (True, True, True)
    """
    if not max_factor > 1 or not 0 < tolerance < 1:
        raise InputError("relax_targets(): 'max_factor' must be > 1 and 'tolerance' in (0, 1)")
    args = (model, accelerator, precision, arrival_rate, input_tokens, output_tokens)
    ttft, tpot = Q_(_seconds("ttft_slo", ttft_slo), "s"), Q_(_seconds("tpot_slo", tpot_slo), "s")

    def attempt(factor: float) -> FleetPlan:
        return size_fleet(*args, ttft * factor, tpot * factor, **options)

    plan = attempt(1.0)
    if plan.feasible:
        return RelaxedPlan(True, 1.0, ttft, tpot, plan)
    loose = attempt(max_factor)
    if not loose.feasible:
        return RelaxedPlan(False, max_factor, ttft * max_factor, tpot * max_factor, loose)
    low, high, best = 0.0, math.log(max_factor), loose
    while high - low > math.log1p(tolerance):
        middle = (low + high) / 2
        candidate = attempt(math.exp(middle))
        if candidate.feasible:
            high, best = middle, candidate
        else:
            low = middle
    factor = math.exp(high)
    return RelaxedPlan(True, factor, ttft * factor, tpot * factor, best)


def frontier(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    input_tokens: float,
    output_tokens: float,
    *,
    engine: str | EngineProfile | None = None,
    tensor_parallel: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
    batches: Sequence[int] = DEFAULT_BATCHES,
    kv_precision: str | None = None,
    registry: Registry | None = None,
) -> Any:
    """The throughput-vs-interactivity frontier (Figure 6) of a model on each accelerator.

    For every (accelerator, precision, TP, batch) that fits in memory: output tokens per second per
    GPU at full load against tokens per second per user (``1 / TPOT``), with ``pareto`` marking the
    points no other point of the same accelerator beats on both axes.

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    workload = Workload(Q_(1.0, "request/s"), input_tokens, output_tokens)
    profile = engine_profile(engine)
    reg = _registry_for(registry, model, accelerator)
    model = reg.model(model)
    tps, grid_batches = _grid(model, tensor_parallel, batches)
    tp_grid, batch_grid = np.meshgrid(tps, grid_batches, indexing="ij")
    options = {
        "prefix_hit_rate": 0.0,
        "shared_prefix_tokens": 0.0,
        "speculation": None,
        "chunk_size": None,
        "ttft_percentile": None,
        "max_utilization": 1.0,
        "arrival_rate": 1.0,
        "router": "round_robin",
    }
    rows = []
    for family in _families(
        model, _as_list(accelerator), _as_list(precision), Q_(1, "USD/hour"), None, kv_precision, reg
    ):
        out = _evaluate(family, profile, workload, tp_grid, batch_grid, options)
        keep = out["fits"]
        rows.append(
            pd.DataFrame(
                {
                    "accelerator": family.accelerator,
                    "precision": family.precision,
                    "tensor_parallel": tp_grid[keep].astype(int),
                    "batch": batch_grid[keep].astype(int),
                    "tokens_per_s_per_gpu": (out["rate"] * workload.output_tokens / tp_grid)[keep],
                    "tokens_per_s_per_user": (1 / out["tpot_at_batch"])[keep],
                    "tpot_ms": out["tpot_at_batch"][keep] * 1e3,
                    "ttft_ms": out["ttft"][keep] * 1e3,
                }
            )
        )
    table = pd.concat(rows, ignore_index=True)
    table["pareto"] = False
    for _, group in table.groupby("accelerator"):
        order = group.sort_values("tokens_per_s_per_user", ascending=False)
        best = -np.inf
        for index, value in zip(order.index, order.tokens_per_s_per_gpu, strict=True):
            if value > best:
                table.loc[index, "pareto"] = True
                best = value
    return table


# --------------------------------------------------------------------------------------------
# Disaggregated prefill and decode pools (section 10.8.3)


@dataclass(frozen=True, repr=False)
class DisaggregatedPlan(Result):
    """Separate prefill and decode pools sized for their own work.

    Attributes
    ----------
    feasible : bool
    reason : str
    prefill, decode : dict
        Each pool's accelerator, precision, tensor-parallel degree, replicas and GPUs (decode: batch).
    handoff : Quantity [time]
        KV-cache transfer from the prefill to the decode pool (Eq. 10), part of TTFT.
    ttft, tpot : Quantity [time]
    gpus : int
    cost_per_hour, cost_per_million_tokens : Quantity
    """

    feasible: bool
    reason: str
    prefill: dict[str, Any] = field(default_factory=dict)
    decode: dict[str, Any] = field(default_factory=dict)
    handoff: Any = None
    ttft: Any = None
    tpot: Any = None
    gpus: int = 0
    cost_per_hour: Any = None
    cost_per_million_tokens: Any = None


def size_disaggregated(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    arrival_rate: Rate,
    input_tokens: float,
    output_tokens: float,
    ttft_slo: Time,
    tpot_slo: Time,
    *,
    interconnect: InterconnectRef = "infiniband-ndr",
    engine: str | EngineProfile | None = None,
    max_utilization: float = 0.8,
    ttft_percentile: float | None = None,
    price: Any = None,
    tensor_parallel: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
    batches: Sequence[int] = DEFAULT_BATCHES,
    input_cv: float = 0.0,
    arrival_cv: float = 1.0,
    kv_precision: str | None = None,
    registry: Registry | None = None,
    max_prefill_replicas: int = 4096,
) -> DisaggregatedPlan:
    """Size disaggregated prefill and decode pools for a workload (compare with :func:`size_fleet`).

    The decode pool runs only decode steps, so ``TPOT = t_dec(B)`` with no prefill interference and a
    replica sustains ``B / ((O - 1) t_dec)`` requests per second. The prefill pool is a G/G/c queue of
    prefills (``c`` replicas, service ``t_pf``); TTFT adds its wait, the KV handoff of Eq. 10 over
    ``interconnect`` (per-direction bandwidth and startup latency from the registry), and half a
    decode step. Each pool takes its cheapest feasible configuration; the KV handoff bandwidth is
    per request (one path).
    """
    from ..phases import kv_handoff_time
    from ..queueing import ggc_mean_wait, ggc_wait_quantile

    workload = Workload(_rate(arrival_rate), input_tokens, output_tokens, input_cv, 0.0, arrival_cv)
    _check_options(workload, max_utilization, ttft_percentile, 0.0, 0.0, None)
    ttft_target = _seconds("ttft_slo", ttft_slo)
    tpot_target = _seconds("tpot_slo", tpot_slo)
    profile = engine_profile(engine)
    reg = _registry_for(registry, model, accelerator)
    model = reg.model(model)
    tps, grid_batches = _grid(model, tensor_parallel, batches)
    link = reg.interconnect(interconnect)
    latency = link.startup_latency.m_as("s") if link.startup_latency is not None else 0.0
    lam = workload.arrival_rate.m_as("request/s")
    families = _families(model, _as_list(accelerator), _as_list(precision), price, None, kv_precision, reg)
    tp_grid, batch_grid = np.meshgrid(tps, grid_batches, indexing="ij")
    decode_slots = max(workload.output_tokens - 1, 1.0)
    context = workload.input_tokens + workload.output_tokens / 2

    decode_best: tuple[Any, ...] | None = None
    for family in families:
        a = family.arrays
        capacity = np.floor(kv_capacity_tokens(a, profile, tp_grid) / context)
        t_dec = decode_step_seconds(a, profile.efficiency_for(family.accelerator), tp_grid, batch_grid, context)
        rate = batch_grid / (decode_slots * t_dec)
        ok = (batch_grid <= capacity) & (t_dec <= tpot_target)
        replicas = ceil_count(
            replica_demand.numeric(arrival_rate=lam, replica_throughput=rate, max_utilization=max_utilization)
        )
        cost = np.where(ok, replicas * tp_grid * family.price, np.inf)
        index = np.unravel_index(np.argmin(cost), cost.shape)
        if np.isfinite(cost[index]) and (decode_best is None or cost[index] < decode_best[0]):
            decode_best = (cost[index], family, index, replicas[index], t_dec[index])
    if decode_best is None:
        return DisaggregatedPlan(False, "decode pool: no configuration meets the TPOT target within memory")
    _, d_family, d_index, d_replicas, t_dec_best = decode_best
    kv_bytes = workload.input_tokens * d_family.arrays.kv_bytes_per_token
    handoff = float(
        kv_handoff_time.numeric(
            kv_bytes=kv_bytes, link_bandwidth=link.bandwidth.m_as("B/s"), startup_latency=latency, parallel_links=1
        )
    )
    budget = ttft_target - handoff - t_dec_best / 2

    prefill_best: tuple[Any, ...] | None = None
    for family in families:
        t_pf = prefill_seconds(family.arrays, profile.efficiency_for(family.accelerator), tps, workload.input_tokens)
        least = np.ceil(lam * t_pf / max_utilization)
        # Pool sizes from the utilization floor upward; the TTFT wait shrinks as replicas are added.
        counts = least[:, None] + np.arange(64)[None, :]
        arrival = Q_(np.full(counts.shape, lam), "request/s")
        service = Q_(np.broadcast_to(t_pf[:, None], counts.shape), "s")
        if ttft_percentile is None:
            wait = ggc_mean_wait(arrival, service, counts, arrival_cv, input_cv).m_as("s")
        else:
            wait = ggc_wait_quantile(arrival, service, counts, arrival_cv, input_cv, ttft_percentile).m_as("s")
        ok = (t_pf[:, None] + wait <= budget) & (counts <= max_prefill_replicas)
        cost = np.where(ok, counts * tps[:, None] * family.price, np.inf)
        index = np.unravel_index(np.argmin(cost), cost.shape)
        if np.isfinite(cost[index]) and (prefill_best is None or cost[index] < prefill_best[0]):
            ttft = t_pf[index[0]] + wait[index] + handoff + t_dec_best / 2
            prefill_best = (cost[index], family, int(tps[index[0]]), int(counts[index]), ttft)
    if prefill_best is None:
        return DisaggregatedPlan(
            False,
            f"prefill pool: no configuration meets the TTFT target after a {handoff * 1e3:.1f} ms KV handoff",
            handoff=Q_(handoff, "s"),
        )
    p_cost, p_family, p_tp, p_replicas, ttft = prefill_best
    d_tp = int(tp_grid[d_index])
    cost_hour = p_cost + decode_best[0]
    tokens_per_hour = lam * workload.output_tokens * HOURS
    return DisaggregatedPlan(
        feasible=True,
        reason="each pool is its cheapest configuration meeting its own target",
        prefill={
            "accelerator": p_family.accelerator,
            "precision": p_family.precision,
            "tensor_parallel": p_tp,
            "replicas": p_replicas,
            "gpus": p_replicas * p_tp,
        },
        decode={
            "accelerator": d_family.accelerator,
            "precision": d_family.precision,
            "tensor_parallel": d_tp,
            "batch": int(batch_grid[d_index]),
            "replicas": int(d_replicas),
            "gpus": int(d_replicas) * d_tp,
        },
        handoff=Q_(handoff, "s"),
        ttft=Q_(float(ttft), "s"),
        tpot=Q_(float(t_dec_best), "s"),
        gpus=p_replicas * p_tp + int(d_replicas) * d_tp,
        cost_per_hour=Q_(cost_hour, "USD/hour"),
        cost_per_million_tokens=Q_(cost_hour / tokens_per_hour * 1e6, "USD"),
    )


# --------------------------------------------------------------------------------------------
# Demand over time


@dataclass(frozen=True, repr=False)
class DemandPlan(Result):
    """A plan's configuration scaled over a demand curve.

    Attributes
    ----------
    predictive : ScalingPlan
        The forecast-driven schedule (:func:`~calculator.autoscaling.predictive_schedule`): replicas
        started ``lead_time`` ahead of each rise.
    reactive : ScalingPlan
        A reactive autoscaler on the same curve (:func:`~calculator.autoscaling.simulate_reactive_scaling`).
    tensor_parallel : int
        GPUs per replica.
    peak_gpus, mean_gpus : float
        Of the predictive schedule (billed GPUs, warming replicas included).
    cost, reactive_cost, static_cost : Quantity [currency]
        Predictive and reactive schedules over the window, and the peak fleet held for the whole window.
    """

    predictive: Any
    reactive: Any
    tensor_parallel: int
    peak_gpus: float
    mean_gpus: float
    cost: Any
    reactive_cost: Any
    static_cost: Any


def plan_over_time(
    plan: FleetPlan,
    times: Time,
    demand: Rate,
    startup_time: Time = None,
    lead_time: Time = None,
    end: Time = None,
    step: Time = None,
) -> DemandPlan:
    """Replicas, GPUs and cost of a plan's configuration over a demand curve (requests/s over a day).

    A replica sustains the plan's ``replica_throughput`` at its ``max_utilization`` ceiling. The
    predictive schedule starts replicas ``lead_time`` (default: ``startup_time``) ahead of each rise;
    the reactive one sees demand late and waits a cold start (``startup_time``, for example
    :func:`~calculator.autoscaling.cold_start_time`). Both come from :mod:`calculator.autoscaling`.
    """
    from ..autoscaling import predictive_schedule, simulate_reactive_scaling

    if not plan.feasible:
        raise InputError(f"plan_over_time(): the plan is infeasible ({plan.reason})")
    startup = startup_time if startup_time is not None else Q_(0.0, "s")
    grid = {"end": end} if end is not None else {}
    if step is not None:
        grid["step"] = step
    capacity = plan.replica_throughput
    lead = lead_time if lead_time is not None else startup
    predictive = predictive_schedule(
        times, demand, capacity, startup, lead, target_utilization=plan.max_utilization, **grid
    )
    reactive = simulate_reactive_scaling(
        times, demand, capacity, startup, target_utilization=plan.max_utilization, **grid
    )
    tp = plan.tensor_parallel
    price = plan.cost_per_hour / plan.gpus  # per GPU-hour
    gpus = predictive.billed * tp
    window = predictive.times[-1] - predictive.times[0] + (predictive.times[1] - predictive.times[0])
    return DemandPlan(
        predictive=predictive,
        reactive=reactive,
        tensor_parallel=tp,
        peak_gpus=float(gpus.max()),
        mean_gpus=float(gpus.mean()),
        cost=(predictive.replica_hours * tp * price).to("USD"),
        reactive_cost=(reactive.replica_hours * tp * price).to("USD"),
        static_cost=(float(gpus.max()) * window * price).to("USD"),
    )


@dataclass(frozen=True, repr=False)
class ServingModeComparison(Result):
    """Colocated against disaggregated serving for one workload.

    Attributes
    ----------
    colocated : FleetPlan
    disaggregated : DisaggregatedPlan
    cheaper : str
        ``"colocated"``, ``"disaggregated"``, or ``"neither"`` when both are infeasible.
    saving : Quantity [currency / time]
        What the cheaper mode saves per hour (zero when only one is feasible).
    """

    colocated: FleetPlan
    disaggregated: DisaggregatedPlan
    cheaper: str
    saving: Any


def compare_serving_modes(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    arrival_rate: Rate,
    input_tokens: float,
    output_tokens: float,
    ttft_slo: Time,
    tpot_slo: Time,
    *,
    interconnect: InterconnectRef = "infiniband-ndr",
    **options: Any,
) -> ServingModeComparison:
    """Size the workload both colocated (:func:`size_fleet`) and disaggregated (:func:`size_disaggregated`).

    ``options`` go to both sizers where they apply (engine, max_utilization, ttft_percentile, price,
    tensor_parallel, batches, input_cv, arrival_cv, kv_precision); the remaining ones (prefix caching,
    speculation, chunked prefill) apply to the colocated plan only.
    """
    args = (model, accelerator, precision, arrival_rate, input_tokens, output_tokens, ttft_slo, tpot_slo)
    shared = {
        "engine",
        "max_utilization",
        "ttft_percentile",
        "price",
        "tensor_parallel",
        "batches",
        "input_cv",
        "arrival_cv",
        "kv_precision",
    }
    colocated = size_fleet(*args, **options)
    disaggregated = size_disaggregated(
        *args, interconnect=interconnect, **{k: v for k, v in options.items() if k in shared}
    )
    costs = {
        "colocated": colocated.cost_per_hour if colocated.feasible else None,
        "disaggregated": disaggregated.cost_per_hour if disaggregated.feasible else None,
    }
    feasible = {k: v for k, v in costs.items() if v is not None}
    if not feasible:
        return ServingModeComparison(colocated, disaggregated, "neither", Q_(0.0, "USD/hour"))
    cheaper = min(feasible, key=lambda k: feasible[k].m_as("USD/hour"))
    saving = (max(feasible.values()) - feasible[cheaper]) if len(feasible) == 2 else Q_(0.0, "USD/hour")
    return ServingModeComparison(colocated, disaggregated, cheaper, saving)
