"""The chapter's case studies and the numeric fallacies (sections 10.15 and 10.16).

The decode-budget ledger of the reference replica (Table 26) with bottleneck displacement, the
bandwidth floor and MBU, the all-reduce breakdown, speculation's average TPOT against its per-gap
TBT, component latency budgets (Table 27, the two-tower online path), the ranking cascade
(Table 28) with deadline-ordered fallback, two-tower freshness, the design axes of Table 30, and the
fallacies' arithmetic: surge headroom and useful capacity.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._support import checked, instances, mapping, one
from .errors import InputError
from .formula import check_domain, formula, var
from .results import Result, plain
from .types import Count, Fraction, Probability, Time, Tokens
from .units import Q_, ureg

__all__ = [
    "DecodeBudget",
    "LeverLimit",
    "decode_budget",
    "REFERENCE_DECODE_BUDGET",
    "decode_bandwidth_floor",
    "memory_bandwidth_utilization",
    "AllReduceBreakdown",
    "allreduce_breakdown",
    "SpeculationContract",
    "speculation_contract",
    "LatencyBudget",
    "latency_budget",
    "CascadeStage",
    "TABLE_28_CASCADE",
    "RankingCascade",
    "ranking_cascade",
    "ScheduledItem",
    "deadline_schedule",
    "speculative_ensemble_latency",
    "TwoTowerFreshness",
    "two_tower_freshness",
    "uncached_item_latency",
    "DESIGN_AXES",
    "design_axes",
    "surge_utilization",
    "saturating_surge",
    "useful_capacity",
]

_ZERO_SECONDS = Q_(0, "s")


# --------------------------------------------------------------------------------------------
# 10.15.1 One replica against its token-latency target: the decode-budget ledger (Table 26)


@dataclass(frozen=True, repr=False)
class LeverLimit(Result):
    """What cutting one interval alone can achieve against a target (Amdahl's bound on one lever)."""

    interval: str
    min_step: Time
    required_cut: float
    feasible: bool


@dataclass(frozen=True, repr=False)
class DecodeBudget(Result):
    """Nonoverlapping exposed intervals of one decode step (Table 26); immutable, every change returns a new ledger.

    ``intervals`` maps interval names to times. The ledger only adds intervals on one absolute-time
    boundary: overlapping work must not be counted twice (§10.15.1).
    """

    intervals: Mapping[str, Time]

    @property
    def total(self) -> Time:
        """The step time: the sum of the intervals."""
        return sum((Q_(t) for t in self.intervals.values()), Q_(0.0, "ms")).to("ms")

    @property
    def shares(self) -> dict[str, float]:
        """Each interval's share of the step."""
        total = self.total
        return {name: float((Q_(t) / total).m_as("")) for name, t in self.intervals.items()}

    def apply(self, cut: Mapping[str, float] | None = None, set_to: Mapping[str, Time] | None = None) -> DecodeBudget:
        """A new ledger after an experiment: ``cut`` removes a fraction of an interval, ``set_to`` replaces it.

        Examples
        --------
        >>> REFERENCE_DECODE_BUDGET.apply(cut={"gemm": 0.45}).total
        <Quantity(69.7, 'millisecond')>
        """
        cut = dict(cut or {})
        set_to = dict(set_to or {})
        unknown = (set(cut) | set(set_to)) - set(self.intervals)
        if unknown:
            raise InputError(
                f"DecodeBudget.apply(): unknown interval(s) {sorted(unknown)}; known {list(self.intervals)}"
            )
        updated = dict(self.intervals)
        for name, fraction in cut.items():
            check_domain("DecodeBudget.apply", f"cut['{name}']", fraction, "probability")
            updated[name] = (Q_(updated[name]) * (1 - fraction)).to("ms")
        for name, value in set_to.items():
            updated[name] = _interval(f"set_to['{name}']", value)
        return DecodeBudget(updated)

    def headroom(self, target: Time) -> Time:
        """Target minus step time: what a batching policy can spend (negative when the step misses)."""
        return (Q_(target) - self.total).to("ms")

    def lever_limit(self, interval: str, target: Time) -> LeverLimit:
        r"""The best one interval can do alone: the step without it, and the cut it needs to reach ``target``.

        Notes
        -----
        .. math:: T_{\min} = T - t_i, \qquad r_{\mathrm{req}} = \frac{T - T_{\mathrm{target}}}{t_i}

        A large cut to one interval removes only that interval's share of the step (§10.15.1).

        Examples
        --------
        >>> REFERENCE_DECODE_BUDGET.lever_limit("gemm", Q_(50, "ms")).min_step
        <Quantity(51.0, 'millisecond')>
        """
        if interval not in self.intervals:
            raise InputError(f"DecodeBudget.lever_limit(): unknown interval {interval!r}")
        part = Q_(self.intervals[interval]).to("ms")
        rest = (self.total - part).to("ms")
        needed = float(((self.total - Q_(target)) / part).m_as("")) if part.m_as("ms") > 0 else np.inf
        return LeverLimit(interval=interval, min_step=rest, required_cut=max(needed, 0.0), feasible=needed <= 1)


def _interval(argument: str, value: Any) -> Any:
    quantity = Q_(value)
    if quantity.dimensionality != Q_(1, "s").dimensionality:
        raise InputError(f"decode_budget(): interval '{argument}' needs a time, got {value!r}")
    check_domain("decode_budget", argument, quantity.m_as("ms"), "nonnegative")
    return quantity.to("ms")


def decode_budget(**intervals: Time) -> DecodeBudget:
    """A decode-step ledger from named nonoverlapping intervals (times).

    Parameters
    ----------
    **intervals : Quantity [time]
        Exposed, nonoverlapping critical-path intervals of one step, by name.

    Returns
    -------
    DecodeBudget

    Examples
    --------
    >>> decode_budget(gemm=Q_(30, "ms"), other=Q_(10, "ms")).shares
    {'gemm': 0.75, 'other': 0.25}
    """
    if not intervals:
        raise InputError("decode_budget(): give at least one interval")
    return DecodeBudget({name: _interval(name, value) for name, value in intervals.items()})


#: Table 26 baseline column (§10.15.1): the constructed batch-one decode step of the reference
#: 70B replica on eight H100s, 85 ms. Illustrative intervals, not benchmark results.
REFERENCE_DECODE_BUDGET = decode_budget(
    gemm=Q_(34, "ms"),
    attention=Q_(20.4, "ms"),
    elementwise=Q_(10.2, "ms"),
    allreduce=Q_(10.2, "ms"),
    launch_runtime=Q_(10.2, "ms"),
)


@formula(
    result=var("s", r"T_{\mathrm{floor}}", description="weight-streaming floor of one decode step"),
    reference="section 10.15.1",
    weight_bytes=var("B", r"M_{W}", description="weights of the replica"),
    tensor_parallel=var("", "t", "positive_integer", "devices the weights are split over"),
    memory_bandwidth=var("B/s", r"B_{\mathrm{HBM}}", description="HBM bandwidth of one device"),
    example={"weight_bytes": "140 GB", "tensor_parallel": 8, "memory_bandwidth": "3.35 TB/s"},
)
def decode_bandwidth_floor(weight_bytes, tensor_parallel, memory_bandwidth):
    r"""Time to stream each device's weight shard once at full HBM bandwidth: the batch-one decode floor.

    Parameters
    ----------
    weight_bytes : Quantity [information]
        Weights of the replica (:func:`calculator.memory.weight_bytes`).
    tensor_parallel : int
        Devices sharing the weights evenly.
    memory_bandwidth : Quantity [information / time]
        Peak HBM bandwidth of one device.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{floor}} = \frac{M_W / t}{B_{\mathrm{HBM}}}

    Weights only (KV reads are small at batch one). Memory capacity does not enter: a GPU with more
    memory and the same bandwidth has the same floor (section 10.16).

    Examples
    --------
    The reference replica: 140 GB over 8 H100s at 3.35 TB/s ("the 5.2 ms", §10.15.1).

    >>> round(decode_bandwidth_floor(Q_(140, "GB"), 8, Q_(3.35, "TB/s")).m_as("ms"), 1)
    5.2
    """
    return weight_bytes / tensor_parallel / memory_bandwidth


@formula(
    result=var("", "U", "nonnegative", "memory-bandwidth utilization (MBU)"),
    reference="section 10.15.1",
    step_time=var("s", r"T_{\mathrm{step}}", description="measured or assumed decode step"),
    weight_bytes=var("B", r"M_{W}"),
    tensor_parallel=var("", "t", "positive_integer"),
    memory_bandwidth=var("B/s", r"B_{\mathrm{HBM}}"),
    example={"step_time": "85 ms", "weight_bytes": "140 GB", "tensor_parallel": 8, "memory_bandwidth": "3.35 TB/s"},
)
def memory_bandwidth_utilization(step_time, weight_bytes, tensor_parallel, memory_bandwidth):
    r"""Memory-bandwidth utilization of a decode step: the bandwidth floor over the step time.

    Parameters
    ----------
    step_time : Quantity [time]
        Decode step time.
    weight_bytes, tensor_parallel, memory_bandwidth
        As for :func:`decode_bandwidth_floor`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: \mathrm{MBU} = T_{\mathrm{floor}} / T_{\mathrm{step}}

    Its inverse is how far the step sits above the floor ("about 16x", §10.15.1).

    Examples
    --------
    >>> round(100 * memory_bandwidth_utilization(Q_(85, "ms"), Q_(140, "GB"), 8, Q_(3.35, "TB/s")), 1)
    6.1
    """
    return decode_bandwidth_floor.func(weight_bytes, tensor_parallel, memory_bandwidth) / step_time


@dataclass(frozen=True, repr=False)
class AllReduceBreakdown(Result):
    """A step's all-reduce interval split into collectives, their expected floor and the unexplained excess."""

    collectives: int
    per_collective: Time
    floor_total: Time
    excess: Time


@checked(layers=one(), collectives_per_layer=one())
def allreduce_breakdown(
    allreduce_time: Time, layers: Count, per_collective_floor: Time, collectives_per_layer: Count = 2
) -> AllReduceBreakdown:
    r"""Spread a step's all-reduce time over its collectives and compare with a per-collective floor.

    Parameters
    ----------
    allreduce_time : Quantity [time]
        Exposed all-reduce time of one step.
    layers : int
        Transformer layers.
    per_collective_floor : Quantity [time]
        Expected launch-and-transfer time of one collective (about 5 us in the chapter; the NCCL fit of
        :data:`calculator.parallelism.NCCL_ALLREDUCE_H100` measures ~28 us on one H100 node).
    collectives_per_layer : int
        Two for tensor parallelism (eq. 13).

    Returns
    -------
    AllReduceBreakdown

    Notes
    -----
    The excess is "the protocol and synchronization cost of small collectives" that a trace should
    attribute before communication becomes the next experiment (§10.15.1).

    Examples
    --------
    >>> b = allreduce_breakdown(Q_(10.2, "ms"), 80, Q_(5, "us"))
    >>> b.collectives, round(b.per_collective.m_as("us")), b.floor_total
    (160, 64, <Quantity(0.8, 'millisecond')>)
    """
    count = int(layers) * int(collectives_per_layer)
    step, floor = Q_(plain(allreduce_time), "s"), (count * Q_(plain(per_collective_floor), "s")).to("ms")
    return AllReduceBreakdown(
        collectives=count,
        per_collective=(step / count).to("us"),
        floor_total=floor,
        excess=(step - floor).to("ms"),
    )


@dataclass(frozen=True, repr=False)
class SpeculationContract(Result):
    """Speculative decoding against separate TPOT (average) and TBT (per-gap) targets."""

    tokens_per_round: float
    round_time: Time
    tpot: Time
    tpot_improvement: float
    max_gap: Time
    tpot_ok: bool | None
    tbt_ok: bool | None


@checked(
    draft_length=one("positive_integer"),
    verify_time=one("positive"),
    draft_cost_ratio=one("nonnegative"),
    acceptance=one(),
    draft_time=one(),
    tpot_target=one(),
    tbt_target=one(),
)
def speculation_contract(
    acceptance: Probability,
    draft_length: Tokens,
    draft_time: Time | None = None,
    verify_time: Time | None = None,
    tpot_target: Time | None = None,
    tbt_target: Time | None = None,
    *,
    draft_cost_ratio: Fraction | None = None,
) -> SpeculationContract:
    r"""Speculation on one replica: rounds of ``draft_length`` drafts plus one verification step.

    Parameters
    ----------
    acceptance : float
        Per-token acceptance probability (independent acceptances, eq. 6).
    draft_length : int
        Drafted tokens per round.
    draft_time : Quantity [time], optional
        Deprecated: the time to draft the whole round. Give ``draft_cost_ratio`` instead; a
        ``draft_time`` still works for one release (with a ``DeprecationWarning``) and is read as
        ``draft_cost_ratio = draft_time / (draft_length * verify_time)``.
    verify_time : Quantity [time]
        One target decode step (the verification pass), also the plain step it is compared with.
        Required.
    tpot_target, tbt_target : Quantity [time], optional
        Average time-per-output-token target and per-gap time-between-tokens target.
    draft_cost_ratio : float
        The cost of one drafted token as a fraction of a target step (the chapter's :math:`c`), the
        convention of :func:`calculator.speculative.speculative_timing` and
        :func:`~calculator.speculative.speedup`. Keyword only; required unless the deprecated
        ``draft_time`` is given (exactly one of the two).

    Returns
    -------
    SpeculationContract

    Raises
    ------
    InputError
        If ``verify_time`` is missing, or unless exactly one of ``draft_cost_ratio`` and ``draft_time``
        is given.

    Notes
    -----
    .. math:: T_{\mathrm{round}} = (K c + 1)\, T_{\mathrm{verify}}, \quad
              \mathrm{TPOT} = T_{\mathrm{round}} / \mathbb{E}[N], \quad \max \mathrm{TBT} = T_{\mathrm{round}}

    Tokens arrive in blocks, one block per round, so the gap between blocks is a whole round even when
    the average per token is short (§10.15.1). The gain belongs to batch one. Computed by
    :func:`calculator.speculative.speculative_timing` (verification cost ratio 1).

    Examples
    --------
    The reference replica (§10.15.1): 5 drafts in 4 ms, 49.6 ms verification, acceptance 0.78, so one
    drafted token costs (4 ms / 5) / 49.6 ms of a target step.

    >>> spec = speculation_contract(0.78, 5, verify_time=Q_(49.6, "ms"), tpot_target=Q_(50, "ms"),
    ...                             tbt_target=Q_(50, "ms"), draft_cost_ratio=4 / 5 / 49.6)
    >>> round(spec.tpot.m_as("ms"), 1), round(spec.max_gap.m_as("ms"), 1), (spec.tpot_ok, spec.tbt_ok)
    (15.2, 53.6, (True, False))
    """
    from .speculative import speculative_timing

    name = "speculation_contract"
    if verify_time is None:
        raise InputError(f"{name}(): argument 'verify_time' (one target decode step) is required")
    if (draft_cost_ratio is None) == (draft_time is None):
        raise InputError(
            f"{name}(): give exactly one of 'draft_cost_ratio' (one drafted token's cost as a fraction of a "
            "target step) and the deprecated 'draft_time'"
        )
    if draft_cost_ratio is None:  # the deprecated draft_time is given instead (exactly one of the two)
        warnings.warn(
            f"{name}(): argument 'draft_time' (the whole round's drafting time) is replaced by 'draft_cost_ratio', "
            "one drafted token's cost as a fraction of a target step (the convention of speculative_timing); "
            "draft_time goes in the next release",
            DeprecationWarning,
            stacklevel=3,  # the caller, past checked's wrapper
        )
        draft_cost_ratio = draft_time / (draft_length * verify_time)
    step = Q_(plain(verify_time), "s")
    timing = speculative_timing(float(acceptance), draft_length, step, float(draft_cost_ratio))
    tpot = Q_(timing.tpot).to("ms")
    gap = Q_(timing.tbt_gap).to("ms")
    return SpeculationContract(
        tokens_per_round=float(timing.tokens_per_round),
        round_time=Q_(timing.round_time).to("ms"),
        tpot=tpot,
        tpot_improvement=float((step / tpot).m_as("")),
        max_gap=gap,
        tpot_ok=None if tpot_target is None else bool(tpot <= Q_(tpot_target, "s")),
        tbt_ok=None if tbt_target is None else bool(gap <= Q_(tbt_target, "s")),
    )


# --------------------------------------------------------------------------------------------
# Component budgets (Table 27, two-tower online path, the serving tax)


@dataclass(frozen=True, repr=False)
class LatencyBudget(Result):
    """A sum of component latencies against a budget: total, slack and the largest component."""

    total: Time
    budget: Time
    slack: Time
    largest: str
    within: bool


@checked(components="unchecked", budget=one())  # a mapping of times, checked entry by entry below
def latency_budget(components: Mapping[str, Time], budget: Time) -> LatencyBudget:
    """Add component latencies on one request path and compare with the budget.

    Parameters
    ----------
    components : mapping of str to Quantity [time]
        Latency of each stage on the path.
    budget : Quantity [time]
        End-to-end (or tier) budget.

    Returns
    -------
    LatencyBudget
        ``slack`` is what remains for the terms not listed (queueing, delivery, network).

    Notes
    -----
    Component budgets exclude queueing and response delivery, so their sum alone does not establish a
    p99 target (Table 27 caption, §10.15.2).

    Examples
    --------
    The serving tax of section 10.16: 70 ms of model execution in a 100 ms target.

    >>> latency_budget({"model_execution": Q_(70, "ms")}, Q_(100, "ms")).slack
    <Quantity(30.0, 'millisecond')>
    """
    if not mapping("latency_budget", "components", components):
        raise InputError("latency_budget(): argument 'components' must list at least one stage")
    values = {}
    for name, value in components.items():
        quantity = Q_(value)
        if quantity.dimensionality != Q_(1, "s").dimensionality:
            raise InputError(f"latency_budget(): component {name!r} needs a time, got {value!r}")
        check_domain("latency_budget", f"components['{name}']", quantity.m_as("s"), "nonnegative")
        values[name] = quantity.to("ms")
    total = sum(values.values(), Q_(0, "ms"))
    limit = Q_(plain(budget), "s").to("ms")
    return LatencyBudget(
        total=total,
        budget=limit,
        slack=(limit - total).to("ms"),
        largest=max(values, key=lambda k: values[k].m_as("ms")),
        within=bool(total <= limit),
    )


# --------------------------------------------------------------------------------------------
# 10.15.4 Search ranking under a deadline (Table 28)


@dataclass(frozen=True)
class CascadeStage:
    """One stage of a ranking cascade: candidates in and out, its latency budget and its recall."""

    name: str
    candidates_in: int
    candidates_out: int
    budget: Time
    recall: float = 1.0


#: Table 28 (§10.15.4).
TABLE_28_CASCADE = (
    CascadeStage("L0 retrieval (lexical and ANN)", 1_000_000, 10_000, Q_(10, "ms")),
    CascadeStage("L1 first pass (two-tower or GBDT)", 10_000, 1_000, Q_(20, "ms")),
    CascadeStage("L2 second pass (deep MLP)", 1_000, 100, Q_(50, "ms")),
    CascadeStage("L3 final rank (cross-attention transformer)", 100, 10, Q_(100, "ms")),
)


@dataclass(frozen=True, repr=False)
class RankingCascade(Result):
    """Candidate reductions and the additive-work accounting of a ranking cascade."""

    stage_reductions: tuple[float, ...]
    per_candidate_cost: tuple[Time, ...]
    final_stage_reduction: float
    cascade_budget: Time
    brute_force_work: Time
    compute_reduction: float
    total_recall: float
    deadline_slack: Time


@checked()
def ranking_cascade(stages: Sequence[CascadeStage], deadline: Time | None = None) -> RankingCascade:
    r"""Candidate reduction, per-candidate cost and the compute saved by a ranking cascade.

    Parameters
    ----------
    stages : sequence of CascadeStage
        Stages in order; each stage's input must be the previous stage's output.
    deadline : Quantity [time], optional
        End-to-end target, for the slack left after the stage budgets.

    Returns
    -------
    RankingCascade

    Notes
    -----
    .. math:: c_i = B_i / n_{\mathrm{in},i}, \quad W_{\mathrm{brute}} = N_0 c_{\mathrm{last}}, \quad
              \text{reduction} = W_{\mathrm{brute}} / \sum_i B_i, \quad R = \prod_i r_i

    Stage budgets are treated as additive model work and the last stage's cost as linear in candidates;
    this is an accounting estimate, not a measured speedup (§10.15.4). A relevant item discarded
    upstream cannot be recovered downstream, so recall multiplies (§10.15.4).

    Examples
    --------
    >>> cascade = ranking_cascade(TABLE_28_CASCADE, deadline=Q_(200, "ms"))
    >>> cascade.final_stage_reduction, cascade.cascade_budget, round(cascade.compute_reduction)
    (10000.0, <Quantity(180, 'millisecond')>, 5556)
    """
    instances("ranking_cascade", "stages", stages, CascadeStage, "CascadeStage")
    for i, stage in enumerate(stages):
        check_domain("ranking_cascade", f"stages[{i}].candidates_in", stage.candidates_in, "positive_integer")
        check_domain("ranking_cascade", f"stages[{i}].candidates_out", stage.candidates_out, "positive_integer")
        check_domain("ranking_cascade", f"stages[{i}].budget", Q_(stage.budget).m_as("s"), "positive")
        check_domain("ranking_cascade", f"stages[{i}].recall", stage.recall, "probability")
        if stage.candidates_out > stage.candidates_in:
            raise InputError(f"ranking_cascade(): stage {stage.name!r} outputs more candidates than it receives")
        if i and stage.candidates_in != stages[i - 1].candidates_out:
            raise InputError(
                f"ranking_cascade(): stage {stage.name!r} receives {stage.candidates_in} candidates but the previous "
                f"stage emits {stages[i - 1].candidates_out}"
            )
    budget = sum((Q_(s.budget) for s in stages), Q_(0, "ms")).to("ms")
    costs = tuple((Q_(s.budget) / s.candidates_in).to("us") for s in stages)
    brute = (stages[0].candidates_in * costs[-1]).to("s")
    return RankingCascade(
        stage_reductions=tuple(s.candidates_in / s.candidates_out for s in stages),
        per_candidate_cost=costs,
        final_stage_reduction=stages[0].candidates_in / stages[-1].candidates_in,
        cascade_budget=budget,
        brute_force_work=brute,
        compute_reduction=float((brute / budget).m_as("")),
        total_recall=float(np.prod([s.recall for s in stages])),
        deadline_slack=None if deadline is None else (Q_(plain(deadline), "s") - budget).to("ms"),
    )


@dataclass(frozen=True, repr=False)
class ScheduledItem(Result):
    """One sub-request of a worker queue: when it ran, and whether it was scored or fell back."""

    name: str
    start: Time
    finish: Time
    result: str


def deadline_schedule(items: Mapping[str, tuple[Time, Time]]) -> tuple[ScheduledItem, ...]:
    """Serve a worker's queue earliest-deadline-first, falling back when an item cannot finish in time.

    Parameters
    ----------
    items : mapping of str to (remaining budget, service time)
        Remaining time budget and service time of each queued sub-request (both quantities).

    Returns
    -------
    tuple of ScheduledItem
        In execution order. An item whose predicted completion exceeds its remaining budget returns a
        cached or default score at once (``"fallback"``) instead of timing out the parent query
        (§10.15.4), and takes no worker time.

    Examples
    --------
    The chapter's queue (§10.15.4): Doc2, with 30 ms left, is processed first.

    >>> order = deadline_schedule({"Doc1": (Q_(50, "ms"), Q_(20, "ms")), "Doc2": (Q_(30, "ms"), Q_(20, "ms")),
    ...                            "Doc3": (Q_(80, "ms"), Q_(20, "ms"))})
    >>> [(item.name, item.result) for item in order]
    [('Doc2', 'scored'), ('Doc1', 'scored'), ('Doc3', 'scored')]
    """
    if not mapping("deadline_schedule", "items", items):
        return ()
    for key, entry in items.items():
        pair = isinstance(entry, tuple | list) and len(entry) == 2
        if not (pair and all(isinstance(v, ureg.Quantity) for v in entry)):
            raise InputError(f"deadline_schedule(): items[{key!r}] must be a (work, deadline) pair of times")
    clock = Q_(0.0, "ms")
    out = []
    for name, (remaining, service) in sorted(items.items(), key=lambda kv: Q_(kv[1][0]).m_as("s")):
        check_domain("deadline_schedule", f"items['{name}'] service", Q_(service).m_as("s"), "nonnegative")
        finish = (clock + Q_(service)).to("ms")
        if finish > Q_(remaining):
            out.append(ScheduledItem(name, clock, clock, "fallback"))
            continue
        out.append(ScheduledItem(name, clock, finish, "scored"))
        clock = finish
    return tuple(out)


@checked(deadline=one())
def speculative_ensemble_latency(model_times: Time, deadline: Time) -> dict[str, Any]:
    """Sequential vs speculative-parallel latency of a dependent model ensemble (§10.15.4).

    Parameters
    ----------
    model_times : Quantity [time], array
        Times of the models; the last depends on the earlier ones' outputs.
    deadline : Quantity [time]
        Budget for the ensemble.

    Returns
    -------
    dict
        ``sequential`` (sum), ``parallel`` (max, the last model running on predicted inputs) and
        ``sequential_meets_deadline``; speculation needs a validated fallback-quality policy.

    Examples
    --------
    >>> out = speculative_ensemble_latency(Q_([20, 30, 40], "ms"), Q_(60, "ms"))
    >>> out["sequential"], out["parallel"], out["sequential_meets_deadline"]
    (<Quantity(90.0, 'millisecond')>, <Quantity(40.0, 'millisecond')>, False)
    """
    times = np.atleast_1d(model_times) * 1e3  # ms
    sequential = Q_(times.sum().item(), "ms")
    return {
        "sequential": sequential,
        "parallel": Q_(times.max().item(), "ms"),
        "sequential_meets_deadline": bool(sequential.m_as("s") <= deadline),
    }


# --------------------------------------------------------------------------------------------
# 10.15.5 Multimodal recommendation and freshness


@dataclass(frozen=True, repr=False)
class TwoTowerFreshness(Result):
    """Staleness of cached item embeddings under a batch refresh, against an ingestion target."""

    max_staleness: Time
    mean_staleness: Time
    meets_target: bool | None


@checked(refresh_period=one("positive"), batch_processing_time=one(), ingestion_target=one())
def two_tower_freshness(
    refresh_period: Time, batch_processing_time: Time = _ZERO_SECONDS, ingestion_target: Time | None = None
) -> TwoTowerFreshness:
    r"""Worst-case and mean age of a cached item embedding refreshed in periodic batches.

    Parameters
    ----------
    refresh_period : Quantity [time]
        Batch refresh cadence of the item (video) tower (hourly in Table 29).
    batch_processing_time : Quantity [time]
        Time a batch takes to publish its embeddings.
    ingestion_target : Quantity [time], optional
        How soon new content must become recommendable ("within minutes" for time-sensitive uploads).

    Returns
    -------
    TwoTowerFreshness

    Notes
    -----
    .. math:: a_{\max} = T_{\mathrm{refresh}} + T_{\mathrm{batch}}, \qquad
              \bar a = T_{\mathrm{refresh}}/2 + T_{\mathrm{batch}}

    "The hourly refresh cadence alone does not meet the shorter ingestion targets" (§10.15.5): new
    content needs its own path (prioritized ingestion, a fallback, or on-demand inference).

    Examples
    --------
    >>> two_tower_freshness(Q_(1, "hour"), Q_(5, "min"), Q_(10, "min")).meets_target
    False
    """
    worst = Q_(plain(refresh_period + batch_processing_time), "s").to("min")
    mean = Q_(plain(refresh_period / 2 + batch_processing_time), "s").to("min")
    meets = None if ingestion_target is None else bool(worst <= Q_(ingestion_target, "s"))
    return TwoTowerFreshness(max_staleness=worst, mean_staleness=mean, meets_target=meets)


@checked(online_latency=one(), uncached_fraction=one(), on_demand_latency=one(), budget=one())
def uncached_item_latency(
    online_latency: Time, uncached_fraction: Fraction, on_demand_latency: Time, budget: Time
) -> dict[str, Any]:
    """Latency when some candidates lack a cached embedding and run vision inference on demand.

    Parameters
    ----------
    online_latency : Quantity [time]
        The cached path (the two-tower online path).
    uncached_fraction : float
        Share of requests that need an on-demand embedding.
    on_demand_latency : Quantity [time]
        Added latency of on-demand vision inference.
    budget : Quantity [time]
        The p99 budget.

    Returns
    -------
    dict
        ``expected`` latency and ``on_demand_fits`` (whether the slow path itself fits the budget).

    Examples
    --------
    >>> out = uncached_item_latency(Q_(19, "ms"), 0.01, Q_(80, "ms"), Q_(50, "ms"))
    >>> round(out["expected"].m_as("ms"), 2), out["on_demand_fits"]
    (19.8, False)
    """
    return {
        "expected": Q_(plain(online_latency + uncached_fraction * on_demand_latency), "s").to("ms"),
        "on_demand_fits": bool(online_latency + on_demand_latency <= budget),
    }


# --------------------------------------------------------------------------------------------
# 10.15.6 Design axes (Table 30)


#: Table 30 (§10.15.6): candidate design choices per workload family, not prescriptions.
DESIGN_AXES = {
    "vision_embedding": {
        "batching": "Static/dynamic (uniform inputs)",
        "memory": "Preallocated (predictable)",
        "scheduling": "FCFS (uniform cost)",
        "topology": "Single-GPU replicas",
        "state": "Stateless",
    },
    "llm": {
        "batching": "Continuous (variable outputs)",
        "memory": "Paged (variable KV cache)",
        "scheduling": "Preemptive (high variance)",
        "topology": "Tensor/pipeline parallel",
        "state": "Request state; optional session cache",
    },
    "recommendation": {
        "batching": "Feature-parallel (sharded embeddings)",
        "memory": "Distributed (embedding tables)",
        "scheduling": "Priority-aware (SLO tiers)",
        "topology": "Hybrid CPU-GPU sharding",
        "state": "Stateless or session features",
    },
}


def design_axes(workload: str) -> dict[str, str]:
    """Table 30's design choices for ``vision_embedding``, ``llm`` or ``recommendation``.

    Parameters
    ----------
    workload : {"vision_embedding", "llm", "recommendation"}
        Workload family.

    Returns
    -------
    dict of str to str
        Batching, memory, scheduling, topology and state choices (candidates, not prescriptions).

    Examples
    --------
    >>> design_axes("llm")["batching"]
    'Continuous (variable outputs)'
    """
    if not isinstance(workload, str) or workload not in DESIGN_AXES:
        raise InputError(f"design_axes(): argument 'workload' must be one of {sorted(DESIGN_AXES)}, got {workload!r}")
    return dict(DESIGN_AXES[workload])


# --------------------------------------------------------------------------------------------
# 10.16 Fallacies and pitfalls: the numbers


@formula(
    result=var("", r"\rho'", "nonnegative", "utilization after the surge"),
    reference="section 10.16, sizing by average throughput (§10.16)",
    utilization=var("", r"\rho", "nonnegative", "utilization before the surge"),
    surge=var("", "g", "nonnegative", "fractional traffic increase"),
    example={"utilization": 0.8, "surge": 0.25},
)
def surge_utilization(utilization, surge):
    r"""Utilization after a traffic surge, with unchanged work per request and service capacity.

    Parameters
    ----------
    utilization : float
        Utilization before.
    surge : float
        Fractional increase in traffic (0.25 for +25 %).

    Returns
    -------
    float

    Notes
    -----
    .. math:: \rho' = \rho (1 + g)

    At :math:`\rho' \ge 1` there is no spare capacity; whether an SLO is missed depends on burst
    duration, the waiting budget and admission, and cold starts delay relief for minutes (§10.16).

    Examples
    --------
    >>> surge_utilization(0.8, 0.25)
    1.0
    """
    return utilization * (1 + surge)


@formula(
    result=var("", "g", "nonnegative", "surge that saturates the fleet"),
    reference="section 10.16 (§10.16, answer §10.18)",
    utilization=var("", r"\rho", "positive", "utilization before the surge"),
    example={"utilization": 0.8},
)
def saturating_surge(utilization):
    r"""The fractional traffic increase that takes a fleet from ``utilization`` to 100 %.

    Parameters
    ----------
    utilization : float
        Current utilization.

    Returns
    -------
    float

    Notes
    -----
    .. math:: g_{\max} = 1/\rho - 1

    Examples
    --------
    >>> round(saturating_surge(0.8), 6)
    0.25
    """
    return 1 / utilization - 1


@formula(
    result=var("token/s", r"X_{\mathrm{useful}}", "nonnegative", "throughput of responses that pass quality checks"),
    reference="section 10.16, lowest precision fallacy (§10.16)",
    throughput=var("token/s", "X", "nonnegative", "raw throughput"),
    quality_pass_rate=var("", "q", "probability", "share of responses passing per-task quality evaluation"),
    example={"throughput": "2000 token/s", "quality_pass_rate": 0.9},
)
def useful_capacity(throughput, quality_pass_rate):
    r"""Throughput that counts: raw tokens per second times the share of responses that pass quality evaluation.

    Parameters
    ----------
    throughput : Quantity [token / time]
        Raw throughput.
    quality_pass_rate : float
        Share of responses that pass per-task quality evaluation (not perplexity).

    Returns
    -------
    Quantity [token / time]

    Notes
    -----
    .. math:: X_{\mathrm{useful}} = q X

    "A serving system that doubles its tokens per second with a format that lowers answer quality has
    not doubled its useful capacity" (§10.16).

    Examples
    --------
    >>> useful_capacity(Q_(2000, "token/s"), 0.9)
    <Quantity(1800.0, 'token / second')>
    """
    return quality_pass_rate * throughput
