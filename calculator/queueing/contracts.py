"""Serving contracts and queueing: load, SLO goodput, the serving tax, Little's law, M/M/c, M/G/1, G/G/c.

Chapter sections 10.1-10.3 (offered and admitted load, TTFT/TPOT, SLO goodput, the serving-tax
decomposition of Eq. 1, the three triggers for distribution) and the queueing side of 10.6.2
(Little's law, replicas from throughput, utilization). The chapter names queueing delay but leaves
its models to other chapters; fleet sizing needs waits and their tails, so this module adds:

* **M/M/c** (Poisson arrivals, exponential service, ``c`` servers): exact. Erlang C is computed from
  the Poisson distribution in log space (``P(N = c) / P(N <= c)`` gives Erlang B), stable for
  thousands of servers.
* **M/G/1**: the Pollaczek-Khinchine mean wait, exact for any service distribution.
* **G/G/c**: the Allen-Cunneen approximation, the M/M/c wait scaled by ``(c_a^2 + c_s^2) / 2``.
  It is exact for M/M/c and for M/G/1, and for a single server it is Kingman's formula.
  Validated against discrete-event simulation in ``docs/models-10.1-10.6.md``.
* **Wait tails**: exact for M/M/c (``P(W > t) = C e^{-(c mu - lambda) t}``); for G/G/c the same
  exponential tail with its mean scaled by the Allen-Cunneen factor (an approximation whose error
  the docs table records).

Queue functions broadcast over numpy arrays (``servers`` may be an integer array) and never raise on
overload: at utilization >= 1 they return ``P(wait) = 1`` and infinite waits, and
:func:`queue_stable` / :class:`QueueMetrics` say so explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import count, magnitude
from ..errors import InputError
from ..formula import formula, per, var
from ..parallelism import point_to_point_time
from ..results import Result, as_count, ceil_count, plain
from ..units import Q_, check_units

__all__ = [
    "shed_fraction",
    "CapacityMeasurement",
    "compare_capacity",
    "DistributionTriggers",
    "distribution_triggers",
    "interactivity",
    "StreamMetrics",
    "stream_metrics",
    "slo_goodput",
    "slo_attainment",
    "goodput_from_requests",
    "end_to_end_latency",
    "network_latency",
    "coordination_latency",
    "ServingTaxBudget",
    "serving_tax_budget",
    "in_flight",
    "replica_demand",
    "replicas_for_load",
    "utilization",
    "queue_stable",
    "erlang_c",
    "mmc_mean_wait",
    "mmc_wait_exceedance",
    "mmc_wait_quantile",
    "variability_factor",
    "kingman_wait",
    "mg1_mean_wait",
    "ggc_mean_wait",
    "ggc_wait_exceedance",
    "ggc_wait_quantile",
    "QueueMetrics",
    "queue_metrics",
    "arrival_times",
]


# --------------------------------------------------------------------------------------------
# Section 10.1: offered and admitted load; capacity compared at a fixed mix and SLO


@check_units(offered_rate="request/s", admitted_rate="request/s")
def shed_fraction(offered_rate: Any, admitted_rate: Any) -> Any:
    r"""Fraction of offered load that the service rejects or sheds.

    Parameters
    ----------
    offered_rate : Quantity [request / time]
        Work arriving at the endpoint, including requests the service may reject.
    admitted_rate : Quantity [request / time]
        Work the service accepts; at most ``offered_rate``.

    Returns
    -------
    float or ndarray
        :math:`1 - \lambda_{\mathrm{adm}} / \lambda_{\mathrm{off}}`, in [0, 1].

    Notes
    -----
    Section 10.1 (§10.1; self-check answer §10.18): meeting the SLO on every *admitted* request
    does not mean the offered load is served. Capacity counts offered work that completes within
    the targets.

    Examples
    --------
    >>> shed_fraction(Q_(1000, "request/s"), Q_(750, "request/s"))
    0.25
    """
    offered = magnitude("shed_fraction", "offered_rate", offered_rate, "request/s", "positive")
    admitted = magnitude("shed_fraction", "admitted_rate", admitted_rate, "request/s", "nonnegative")
    if np.any(np.asarray(admitted) > np.asarray(offered)):
        raise InputError("shed_fraction(): argument 'admitted_rate' must not exceed 'offered_rate'")
    return plain(1 - np.asarray(admitted) / np.asarray(offered))


@dataclass(frozen=True, repr=False)
class CapacityMeasurement(Result):
    """A measured serving capacity and the contract it was measured under.

    Attributes
    ----------
    slo_goodput : Quantity [request / time]
        Completed requests per unit time that met every target (see :func:`slo_goodput`).
    request_mix : str
        Name of the prompt/output length mix the load used (e.g. ``"production"``).
    ttft_target, tpot_target : Quantity [time]
        The latency targets the requests were judged against.
    """

    slo_goodput: Any
    request_mix: str
    ttft_target: Any
    tpot_target: Any


def compare_capacity(first: CapacityMeasurement, second: CapacityMeasurement) -> str:
    """Which of two measurements shows more serving capacity, if they can be compared at all.

    Parameters
    ----------
    first, second : CapacityMeasurement
        The two measurements.

    Returns
    -------
    str
        ``"first"``, ``"second"``, ``"equal"``, or ``"not comparable"`` when the request mix or
        the SLO targets differ.

    Notes
    -----
    Section 10.1 (§10.1, self-check §10.1 / answer §10.18): request rate alone is not a capacity
    metric for language models; capacities compare only at the same request mix and SLO.

    Examples
    --------
    >>> x = CapacityMeasurement(Q_(840, "request/s"), "production", Q_(300, "ms"), Q_(50, "ms"))
    >>> y = CapacityMeasurement(Q_(950, "request/s"), "production", Q_(0.3, "s"), Q_(50, "ms"))
    >>> compare_capacity(x, y)
    'second'
    """
    same_slo = np.isclose(first.ttft_target.m_as("s"), second.ttft_target.m_as("s")) and np.isclose(
        first.tpot_target.m_as("s"), second.tpot_target.m_as("s")
    )
    if first.request_mix != second.request_mix or not same_slo:
        return "not comparable"
    a = first.slo_goodput.m_as("request/s")
    b = second.slo_goodput.m_as("request/s")
    return "equal" if np.isclose(a, b) else ("first" if a > b else "second")


# --------------------------------------------------------------------------------------------
# Section 10.2: the three triggers for distributing inference (Table 1)


@dataclass(frozen=True, repr=False)
class DistributionTriggers(Result):
    """Which single-machine limits a workload exceeds (Table 1), and what each calls for.

    Attributes
    ----------
    memory : bool or None
        Resident state (weights, KV cache, embedding tables) exceeds one device.
    throughput : bool or None
        Demand exceeds one machine's peak throughput.
    latency : bool or None
        One forward pass exceeds its latency target.
    min_replicas : int or None
        Throughput-only lower bound on machines, ``ceil(demand / peak)``.
    strategies : tuple of str
        The matching distribution strategies of Table 1, in the table's order.

    A trigger is ``None`` when its inputs were not given.
    """

    memory: bool | None
    throughput: bool | None
    latency: bool | None
    min_replicas: int | None
    strategies: tuple[str, ...]


_TABLE_1 = {
    "memory": "tensor/pipeline parallelism",
    "throughput": "horizontal replication",
    "latency": "model sharding",
}


@check_units(
    memory_required="B",
    device_memory="B",
    demand="request/s",
    peak_throughput="request/s",
    execution_latency="s",
    latency_target="s",
)
def distribution_triggers(
    memory_required: Any = None,
    device_memory: Any = None,
    demand: Any = None,
    peak_throughput: Any = None,
    execution_latency: Any = None,
    latency_target: Any = None,
) -> DistributionTriggers:
    """Classify why one machine cannot serve a workload: memory, throughput or latency (Table 1).

    Parameters
    ----------
    memory_required : Quantity [information], optional
        State that must stay resident: weights (:func:`calculator.memory.weight_bytes`), KV cache,
        embedding tables.
    device_memory : Quantity [information], optional
        Capacity of one device.
    demand : Quantity [request / time], optional
        Arriving request rate.
    peak_throughput : Quantity [request / time], optional
        One machine's peak rate with optimal batching.
    execution_latency : Quantity [time], optional
        One forward pass (measure prefill against TTFT and decode against TPOT separately).
    latency_target : Quantity [time], optional
        The target that phase must meet.

    Returns
    -------
    DistributionTriggers

    Notes
    -----
    Section 10.2, Table 1 (§10.1). Memory calls for tensor or pipeline parallelism,
    throughput for horizontal replication (at least ``ceil(demand / peak)`` machines, self-check
    answer §10.18), latency for model sharding, whose benefit must be measured per phase (§10.1).

    Examples
    --------
    >>> t = distribution_triggers(demand=Q_(100_000, "request/s"), peak_throughput=Q_(10_000, "request/s"))
    >>> t.throughput, t.min_replicas, t.strategies
    (True, 10, ('horizontal replication',))
    """
    name = "distribution_triggers"
    memory = throughput = latency = None
    replicas = None
    if memory_required is not None or device_memory is not None:
        need = magnitude(name, "memory_required", memory_required, "B", "nonnegative")
        have = magnitude(name, "device_memory", device_memory, "B", "positive")
        memory = bool(need > have)
    if demand is not None or peak_throughput is not None:
        replicas = replicas_for_load(demand, peak_throughput)
        throughput = replicas > 1
    if execution_latency is not None or latency_target is not None:
        run = magnitude(name, "execution_latency", execution_latency, "s", "nonnegative")
        target = magnitude(name, "latency_target", latency_target, "s", "positive")
        latency = bool(run > target)
    fired = {"memory": memory, "throughput": throughput, "latency": latency}
    strategies = tuple(_TABLE_1[key] for key, value in fired.items() if value)
    return DistributionTriggers(memory, throughput, latency, replicas, strategies)


# --------------------------------------------------------------------------------------------
# Sections 10.1-10.3: TTFT, TPOT, TBT, SLO goodput


@formula(
    result=var("token/s", r"I", description="output tokens per second one user receives"),
    reference="section 10.6.2 (interactivity is the reciprocal of TPOT)",
    time_per_output_token=var("s", r"\mathrm{TPOT}", description="average gap between streamed tokens"),
)
def interactivity(time_per_output_token):
    r"""Interactivity: the output tokens per second a user receives, the reciprocal of TPOT.

    Parameters
    ----------
    time_per_output_token : Quantity [time]
        TPOT, the average gap between streamed tokens (a time per token; the chapter writes "20 ms").

    Returns
    -------
    Quantity [token / time]

    Notes
    -----
    .. math:: I = 1 / \mathrm{TPOT}

    Section 10.6.2: InferenceX reports interactivity, the reciprocal of TPOT.

    Examples
    --------
    >>> interactivity(Q_(20, "ms"))
    <Quantity(50.0, 'token / second')>
    """
    return per(1 / time_per_output_token, "token")


@dataclass(frozen=True, repr=False)
class StreamMetrics(Result):
    """Latency metrics of one streamed response (or one per row).

    Attributes
    ----------
    ttft : Quantity [time]
        Time to first token: from the request's start to the first streamed token.
    tpot : Quantity [time]
        Time per output token: the mean gap between successive tokens.
    tbt_max : Quantity [time]
        The longest gap between successive tokens (a stall the reader sees).
    tbt_p99 : Quantity [time]
        99th percentile of the gaps.
    interactivity : Quantity [token / time]
        ``1 / tpot``.
    """

    ttft: Any
    tpot: Any
    tbt_max: Any
    tbt_p99: Any
    interactivity: Any


@check_units(token_times="s", request_start="s")
def stream_metrics(token_times: Any, request_start: Any) -> StreamMetrics:
    """TTFT, TPOT and the time-between-tokens tail of streamed responses from their token timestamps.

    Parameters
    ----------
    token_times : Quantity [time], array (..., tokens)
        Emission time of each streamed token, non-decreasing along the last axis (at least two).
    request_start : Quantity [time]
        When each request arrived (broadcast against the leading axes).

    Returns
    -------
    StreamMetrics

    Notes
    -----
    Section 10.2 (§10.1; self-check answer §10.18): TPOT is the *average* of the time between
    tokens (TBT), so a stream can meet its TPOT target while a single long gap stalls the reader;
    per-gap targets are stated on TBT. TTFT covers everything up to the end of prefill, including
    queueing (§10.1, answer §10.18).

    Examples
    --------
    A stream that meets a 50 ms TPOT target on average but stalls for 300 ms once:

    >>> times = Q_([0.2, 0.21, 0.22, 0.52, 0.53, 0.54, 0.55], "s")
    >>> m = stream_metrics(times, Q_(0, "s"))
    >>> round(m.tpot.m_as("ms"), 1), m.tbt_max.to("ms")
    (58.3, <Quantity(300.0, 'millisecond')>)
    """
    times = np.asarray(magnitude("stream_metrics", "token_times", token_times, "s", "any"), dtype=float)
    start = magnitude("stream_metrics", "request_start", request_start, "s", "any")
    if times.ndim == 0 or times.shape[-1] < 2:
        raise InputError("stream_metrics(): argument 'token_times' needs at least two tokens along its last axis")
    gaps = np.diff(times, axis=-1)
    if np.any(gaps < 0):
        raise InputError("stream_metrics(): argument 'token_times' must be non-decreasing along its last axis")
    ttft = times[..., 0] - start
    if np.any(ttft < 0):
        raise InputError("stream_metrics(): the first token precedes 'request_start'")
    tpot = Q_(plain(gaps.mean(axis=-1)), "s")
    return StreamMetrics(
        ttft=Q_(plain(ttft), "s"),
        tpot=tpot,
        tbt_max=Q_(plain(gaps.max(axis=-1)), "s"),
        tbt_p99=Q_(plain(np.percentile(gaps, 99, axis=-1)), "s"),
        interactivity=interactivity(tpot),
    )


@formula(
    result=var("request/s", r"G_{\mathrm{SLO}}", "nonnegative", "completed requests per second that met the SLO"),
    reference="section 10.3.1 (SLO goodput)",
    completed_rate=var("request/s", r"R_{\mathrm{done}}", "nonnegative", "completed requests per second"),
    slo_attainment=var("", r"f_{\mathrm{SLO}}", "probability", "fraction of completions meeting TTFT and TPOT"),
)
def slo_goodput(completed_rate, slo_attainment):
    r"""SLO goodput: the rate of completed requests that meet both TTFT and TPOT targets.

    Parameters
    ----------
    completed_rate : Quantity [request / time]
        Completed requests per unit time, at a fixed request mix.
    slo_attainment : float
        Fraction of those completions that met every target (see :func:`slo_attainment`).

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: G_{\mathrm{SLO}} = R_{\mathrm{done}} \, f_{\mathrm{SLO}}

    Section 10.3.1 (§10.3.1; self-check §10.3.2 / answer §10.18). A request that misses its contract
    counts for nothing. Comparisons hold the request mix and the SLO fixed
    (:func:`compare_capacity`).

    Examples
    --------
    Self-check 10.3: X completes 1,200 req/s with 70 % meeting both targets.

    >>> slo_goodput(Q_(1200, "request/s"), 0.70)
    <Quantity(840.0, 'request / second')>
    """
    return completed_rate * slo_attainment


@check_units(ttft="s", tpot="s", ttft_target="s", tpot_target="s")
def slo_attainment(ttft: Any, tpot: Any, ttft_target: Any, tpot_target: Any) -> float:
    """Fraction of completed requests that met both the TTFT and the TPOT target.

    Parameters
    ----------
    ttft, tpot : Quantity [time], arrays (requests,)
        Measured time to first token and time per output token of each completed request.
    ttft_target, tpot_target : Quantity [time]
        The targets (a request meets the SLO when it is at or under both).

    Returns
    -------
    float

    Examples
    --------
    >>> slo_attainment(Q_([100, 400, 200], "ms"), Q_([30, 30, 80], "ms"), Q_(300, "ms"), Q_(50, "ms"))
    0.3333333333333333
    """
    name = "slo_attainment"
    first = np.asarray(magnitude(name, "ttft", ttft, "s", "nonnegative"))
    gap = np.asarray(magnitude(name, "tpot", tpot, "s", "nonnegative"))
    if first.shape != gap.shape or first.size == 0:
        raise InputError(f"{name}(): 'ttft' and 'tpot' must be non-empty arrays of the same shape")
    met = (first <= magnitude(name, "ttft_target", ttft_target, "s", "positive")) & (
        gap <= magnitude(name, "tpot_target", tpot_target, "s", "positive")
    )
    return float(met.mean())


@check_units(ttft="s", tpot="s", ttft_target="s", tpot_target="s", window="s")
def goodput_from_requests(ttft: Any, tpot: Any, ttft_target: Any, tpot_target: Any, window: Any) -> Any:
    """SLO goodput from per-request measurements collected over a window.

    Parameters
    ----------
    ttft, tpot : Quantity [time], arrays (requests,)
        One entry per request completed in the window.
    ttft_target, tpot_target : Quantity [time]
        The targets.
    window : Quantity [time]
        Length of the measurement window.

    Returns
    -------
    Quantity [request / time]
        :func:`slo_goodput` of the window's completion rate and :func:`slo_attainment`.

    Examples
    --------
    >>> goodput_from_requests(Q_([100, 400, 200, 250], "ms"), Q_([30, 30, 40, 45], "ms"),
    ...                       Q_(300, "ms"), Q_(50, "ms"), Q_(2, "s"))
    <Quantity(1.5, 'request / second')>
    """
    attainment = slo_attainment(ttft, tpot, ttft_target, tpot_target)
    completed = Q_(np.size(ttft.magnitude), "request") / window
    return slo_goodput(completed, attainment)


# --------------------------------------------------------------------------------------------
# Section 10.3.2: the serving tax (Eq. 1)


@formula(
    result=var("s", r"L_{\mathrm{e2e}}", "nonnegative", "end-to-end request latency"),
    reference="Eq. 1, section 10.3.2",
    inference=var("s", r"L_{\mathrm{inf}}", "nonnegative", "model execution"),
    network=var("s", r"L_{\mathrm{net}}", "nonnegative", "exposed network transfers"),
    serialization=var("s", r"L_{\mathrm{ser}}", "nonnegative", "exposed serialization"),
    coordination=var("s", r"L_{\mathrm{coord}}", "nonnegative", "exposed coordination (critical path)"),
    queueing=var("s", r"L_{\mathrm{queue}}", "nonnegative", "queueing delay"),
)
def end_to_end_latency(inference, network, serialization, coordination, queueing):
    r"""End-to-end request latency as model execution plus the exposed serving tax (Eq. 1).

    Parameters
    ----------
    inference : Quantity [time]
        Model execution on the request's critical path.
    network : Quantity [time]
        Exposed network transfer time (see :func:`network_latency`).
    serialization : Quantity [time]
        Exposed serialization and deserialization.
    coordination : Quantity [time]
        Exposed coordination, e.g. a fan-out's join (see :func:`coordination_latency`).
    queueing : Quantity [time]
        Waiting for busy resources.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{e2e}} = L_{\mathrm{inf}} + L_{\mathrm{net}} + L_{\mathrm{ser}}
              + L_{\mathrm{coord}} + L_{\mathrm{queue}}

    Equation 1 (§10.3.1). Each term is an *exposed* contribution on the critical path, so work
    that overlaps is not counted twice. The serving tax is :math:`L_{\mathrm{e2e}} - L_{\mathrm{inf}}`.

    Examples
    --------
    >>> end_to_end_latency(Q_(70, "ms"), Q_(2, "ms"), Q_(1, "ms"), Q_(3, "ms"), Q_(10, "ms")).to("ms")
    <Quantity(86.0, 'millisecond')>
    """
    return inference + network + serialization + coordination + queueing


@formula(
    result=var("s", r"L_{\mathrm{net}}", "nonnegative", "exposed network latency"),
    reference="section 10.3.2 (sequential exchanges; alpha-beta transfer model)",
    exchanges=var("", "n", "nonnegative", "sequential exchanges on the critical path"),
    startup_latency=var("s", r"\alpha", "nonnegative", "fixed cost of one exchange"),
    payload=var("B", "M", "nonnegative", "bytes moved per exchange"),
    bandwidth=var("B/s", r"\beta", "positive", "link bandwidth"),
)
def network_latency(exchanges, startup_latency, payload, bandwidth):
    r"""Exposed network latency of sequential exchanges, each a startup cost plus a transfer.

    Parameters
    ----------
    exchanges : float
        Sequential (non-overlapping) exchanges on the request's critical path.
    startup_latency : Quantity [time]
        Fixed cost per exchange (the alpha of the alpha-beta model).
    payload : Quantity [information]
        Bytes per exchange; 0 for a latency-only estimate.
    bandwidth : Quantity [information / time]
        Link bandwidth (the beta), in the direction the payload travels.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{net}} = n \, (\alpha + M / \beta)

    Each exchange is :func:`calculator.parallelism.point_to_point_time`. Section 10.3.2 (§10.3.1):
    four sequential exchanges of 50-500 us expose 200 us to 2 ms.
    Example 10.2 (§10.6.5) uses the bandwidth-only term (``n = 1``, ``alpha = 0``). Real collectives
    also depend on topology, contention and rounds; check the implementation before charging one
    round trip per collective.

    Examples
    --------
    >>> network_latency(1, Q_(0, "s"), Q_(100, "MB"), Q_(32, "GB/s")).to("ms")
    <Quantity(3.125, 'millisecond')>
    """
    return exchanges * point_to_point_time.func(payload, bandwidth, startup_latency)


@check_units(branch_latencies="s", join_overhead="s")
def coordination_latency(branch_latencies: Any, join_overhead: Any) -> Any:
    """Critical path of a fan-out: the join's own overhead plus the slowest required branch.

    Parameters
    ----------
    branch_latencies : Quantity [time], array (..., branches)
        Latency of each concurrent branch (feature stores, retrieval, rankers).
    join_overhead : Quantity [time]
        Exposed coordination work at the join.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    Section 10.3.2 (§10.3.1): independent calls run concurrently, so the critical path includes
    the slowest branch, not the sum of the branches.

    Examples
    --------
    >>> coordination_latency(Q_([4, 9, 6], "ms"), Q_(1, "ms")).to("ms")
    <Quantity(10.0, 'millisecond')>
    """
    branches = np.asarray(magnitude("coordination_latency", "branch_latencies", branch_latencies, "s", "nonnegative"))
    overhead = magnitude("coordination_latency", "join_overhead", join_overhead, "s", "nonnegative")
    if branches.ndim == 0 or branches.shape[-1] == 0:
        raise InputError("coordination_latency(): argument 'branch_latencies' needs at least one branch")
    return Q_(plain(overhead + branches.max(axis=-1)), "s")


@dataclass(frozen=True, repr=False)
class ServingTaxBudget(Result):
    """A request's latency budget split by Eq. 1, with the slack left for queueing.

    Attributes
    ----------
    slo : Quantity [time]
        The end-to-end target.
    inference, network, serialization, coordination : Quantity [time]
        The exposed terms of Eq. 1 other than queueing.
    non_compute_slack : Quantity [time]
        ``slo - inference``: what routing, transfers, serialization, coordination and queueing share.
    serving_tax : Quantity [time]
        ``network + serialization + coordination`` (the tax before any queueing).
    queueing_slack : Quantity [time]
        What remains for queueing (and batch formation); negative when the budget is already spent.
    feasible : bool or ndarray
        ``queueing_slack >= 0``.
    """

    slo: Any
    inference: Any
    network: Any
    serialization: Any
    coordination: Any
    non_compute_slack: Any
    serving_tax: Any
    queueing_slack: Any
    feasible: Any


@check_units(slo="s", inference="s", network="s", serialization="s", coordination="s")
def serving_tax_budget(
    slo: Any, inference: Any, network: Any = None, serialization: Any = None, coordination: Any = None
) -> ServingTaxBudget:
    """Spend a latency target on Eq. 1's terms and report the slack left for queueing.

    Parameters
    ----------
    slo : Quantity [time]
        End-to-end latency target.
    inference : Quantity [time]
        Model execution time on an idle replica.
    network, serialization, coordination : Quantity [time], optional
        Exposed serving-tax terms (zero when omitted).

    Returns
    -------
    ServingTaxBudget

    Notes
    -----
    Eq. 1 (§10.3.1) read as a budget: ``queueing_slack = slo - (inference + network +
    serialization + coordination)``. For a budget over arbitrary named stages see
    :func:`calculator.cases.latency_budget`. Section 10.3.2 (§10.3.1): a 100 ms target with 70 ms of
    execution leaves 30 ms for everything else; four exchanges can claim up to 2 ms of it (§10.3.1).

    Examples
    --------
    >>> b = serving_tax_budget(Q_(100, "ms"), Q_(70, "ms"), network=Q_(2, "ms"))
    >>> b.non_compute_slack.to("ms"), b.queueing_slack.to("ms")
    (<Quantity(30.0, 'millisecond')>, <Quantity(28.0, 'millisecond')>)
    """
    zero = Q_(0.0, "s")
    parts = {
        "inference": inference,
        "network": zero if network is None else network,
        "serialization": zero if serialization is None else serialization,
        "coordination": zero if coordination is None else coordination,
    }
    target = Q_(magnitude("serving_tax_budget", "slo", slo, "s", "positive"), "s")
    before_queueing = end_to_end_latency(queueing=zero, **parts)
    slack = (target - before_queueing).to("s")
    return ServingTaxBudget(
        slo=target,
        **{k: v.to("s") for k, v in parts.items()},
        non_compute_slack=(target - parts["inference"]).to("s"),
        serving_tax=(before_queueing - parts["inference"]).to("s"),
        queueing_slack=slack,
        feasible=plain(slack.magnitude >= 0),
    )


# --------------------------------------------------------------------------------------------
# Section 10.6.2: Little's law, replicas, utilization


@formula(
    result=var("request", "Q", "nonnegative", "mean requests in the system"),
    reference="Theorem 10.1 (Little's law), section 10.6.2",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate"),
    time_in_system=var("s", "W", "nonnegative", "mean time a request spends in the system"),
)
def in_flight(arrival_rate, time_in_system):
    r"""Little's law: mean requests in flight from the arrival rate and the mean time in system.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Mean arrival rate (equal to the throughput of a stable system).
    time_in_system : Quantity [time]
        Mean time a request spends inside the chosen boundary.

    Returns
    -------
    Quantity [request]

    Notes
    -----
    .. math:: Q = \lambda W

    Theorem 10.1 (§10.6.2). Holds for any stable system and any arrival and service
    distribution, on any boundary (the whole service, the queue, the executing batch, §10.6.2), but
    relates means only: it bounds neither capacity nor tail latency, and a percentile cannot be
    substituted for the mean (§10.6.2).

    Examples
    --------
    >>> in_flight(Q_(1000, "request/s"), Q_(100, "ms"))
    <Quantity(100.0, 'request')>
    """
    return arrival_rate * time_in_system


@formula(
    result=var("", r"N^{*}", "nonnegative", "fractional replicas the load needs"),
    reference="Theorem 10.1 application, section 10.6.2",
    arrival_rate=var("request/s", r"\lambda", "positive", "arrival rate"),
    replica_throughput=var("request/s", r"\mu", "positive", "service rate of one replica"),
    max_utilization=var("", r"\rho_{\max}", "probability", "highest mean utilization allowed"),
)
def replica_demand(arrival_rate, replica_throughput, max_utilization):
    r"""The (fractional) number of replicas a load needs at a utilization cap.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Offered rate.
    replica_throughput : Quantity [request / time]
        Service rate of one replica (for a batching replica, ``B / T(B)``).
    max_utilization : float
        Highest mean utilization allowed, in (0, 1]; 1 gives the stability boundary.

    Returns
    -------
    float

    Notes
    -----
    .. math:: N^{*} = \frac{\lambda}{\rho_{\max}\, \mu}

    With ``max_utilization = 1`` this is the offered load in Erlangs. :func:`replicas_for_load`
    rounds it up.

    Examples
    --------
    >>> replica_demand(Q_(1000, "request/s"), Q_(100, "request/s"), 0.8)
    12.5
    """
    return arrival_rate / (max_utilization * replica_throughput)


@check_units(arrival_rate="request/s", replica_throughput="request/s", max_utilization="")
def replicas_for_load(arrival_rate: Any, replica_throughput: Any, max_utilization: Any = 1.0) -> Any:
    r"""Replicas needed to carry a load at or under a utilization cap.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Offered rate (> 0).
    replica_throughput : Quantity [request / time]
        Service rate of one replica (> 0).
    max_utilization : float, default 1.0
        Mean utilization cap in (0, 1]. The default gives the throughput-only lower bound, which
        runs at the stability boundary.

    Returns
    -------
    int or ndarray of int

    Notes
    -----
    .. math:: N = \left\lceil \frac{\lambda}{\rho_{\max}\,\mu} \right\rceil

    Theorem 10.1 application (§10.6.2). A utilization cap is headroom, not a latency
    guarantee: a percentile SLO needs an arrival/service model (:func:`queue_metrics`) or a load
    test (§10.6.2).

    Examples
    --------
    >>> replicas_for_load(Q_(1000, "request/s"), Q_(100, "request/s"), 0.8)
    13
    """
    cap = magnitude("replicas_for_load", "max_utilization", max_utilization, "", "probability")
    if np.any(np.asarray(cap) == 0):
        raise InputError("replicas_for_load(): argument 'max_utilization' must be > 0, got 0")
    demand = replica_demand(arrival_rate, replica_throughput, cap)
    return ceil_count(demand)


@formula(
    result=var("", r"\rho", "nonnegative", "mean service utilization"),
    reference="Theorem 10.1 application, section 10.6.2",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate"),
    replica_throughput=var("request/s", r"\mu", "positive", "service rate of one replica"),
    replicas=var("", "N", "positive_integer", "replicas"),
)
def utilization(arrival_rate, replica_throughput, replicas):
    r"""Mean service utilization of a fleet: offered work over service capacity.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Offered rate.
    replica_throughput : Quantity [request / time]
        Service rate of one replica.
    replicas : int
        Replicas sharing the load.

    Returns
    -------
    float
        Values >= 1 mean overload: the queue grows without bound.

    Notes
    -----
    .. math:: \rho = \frac{\lambda}{N \mu}

    §10.6.2: 1,000 req/s on 13 replicas of 100 req/s runs at about 76.9 %.

    Examples
    --------
    >>> round(utilization(Q_(1000, "request/s"), Q_(100, "request/s"), 13), 3)
    0.769
    """
    return arrival_rate / (replicas * replica_throughput)


# --------------------------------------------------------------------------------------------
# Queues: M/M/c, M/G/1, G/G/c


def _queue_inputs(function: str, arrival_rate: Any, service_time: Any, servers: Any) -> tuple[Any, Any, Any]:
    rate = magnitude(function, "arrival_rate", arrival_rate, "request/s", "positive")
    service = magnitude(function, "service_time", service_time, "s", "positive")
    count = magnitude(function, "servers", servers, "", "positive_integer")
    return rate, service, count


def _erlang_c(load: Any, servers: Any) -> np.ndarray:
    """Erlang C from the offered load ``a = lambda s`` and the server count, in log space."""
    from scipy.special import gammaincc, gammaln

    load, servers = np.broadcast_arrays(np.asarray(load, dtype=float), np.asarray(servers, dtype=float))
    stable = load < servers
    with np.errstate(all="ignore"):
        # Erlang B = P(N = c) / P(N <= c) for N ~ Poisson(a); P(N <= c) = Q(c + 1, a) >= ~1/2 when a < c.
        log_pmf = servers * np.log(load) - load - gammaln(servers + 1)
        blocking = np.exp(log_pmf) / gammaincc(servers + 1, load)
        waiting = blocking / (1 - (load / servers) * (1 - blocking))
    return np.where(stable, np.clip(waiting, 0.0, 1.0), 1.0)


def _mean_wait(load: Any, servers: Any, service_time: Any, factor: Any) -> np.ndarray:
    """Allen-Cunneen mean wait: Erlang C x s / (c - a) x factor (factor 1: exact M/M/c)."""
    load, servers, service_time, factor = (np.asarray(v, dtype=float) for v in (load, servers, service_time, factor))
    probability = _erlang_c(load, servers)
    with np.errstate(all="ignore"):
        wait = probability * factor * service_time / (servers - load)
    return np.where(np.asarray(load) < np.asarray(servers), wait, np.inf)


def _wait_exceedance(load: Any, servers: Any, service_time: Any, factor: Any, threshold: Any) -> np.ndarray:
    """P(wait > t): Erlang C times an exponential tail with rate (c - a) / (factor s)."""
    load, servers, service_time, factor, threshold = (
        np.asarray(v, dtype=float) for v in (load, servers, service_time, factor, threshold)
    )
    probability = _erlang_c(load, servers)
    with np.errstate(all="ignore"):
        decay = np.exp(-(servers - load) * threshold / (factor * service_time))
        tail = np.where(np.asarray(factor) > 0, probability * decay, 0.0)  # factor 0: D/D/c never waits
    return np.where(np.asarray(load) < np.asarray(servers), tail, 1.0)


def _wait_quantile(load: Any, servers: Any, service_time: Any, factor: Any, quantile: Any) -> np.ndarray:
    """Inverse of :func:`_wait_exceedance`: zero while the quantile lies in the no-wait mass."""
    load, servers, service_time, factor, quantile = (
        np.asarray(v, dtype=float) for v in (load, servers, service_time, factor, quantile)
    )
    probability = _erlang_c(load, servers)
    with np.errstate(all="ignore"):
        waited = factor * service_time / (servers - load) * np.log(probability / (1 - quantile))
        waited = np.where(np.asarray(factor) > 0, waited, 0.0)
    wait = np.where(1 - np.asarray(quantile) < probability, waited, 0.0)
    return np.where(np.asarray(load) < np.asarray(servers), np.maximum(wait, 0.0), np.inf)


@check_units(arrival_rate="request/s", service_time="s", servers="")
def queue_stable(arrival_rate: Any, service_time: Any, servers: Any) -> Any:
    r"""Whether a queue is stable: offered load below the server count (utilization < 1).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Arrival rate.
    service_time : Quantity [time]
        Mean service time of one request on one server.
    servers : int or array of int
        Servers.

    Returns
    -------
    bool or ndarray of bool
        :math:`\lambda s < c`.

    Examples
    --------
    >>> queue_stable(Q_(1000, "request/s"), Q_(10, "ms"), [9, 10, 11])
    array([False, False,  True])
    """
    rate, service, count = _queue_inputs("queue_stable", arrival_rate, service_time, servers)
    return plain(rate * service < count)


@check_units(arrival_rate="request/s", service_time="s", servers="")
def erlang_c(arrival_rate: Any, service_time: Any, servers: Any) -> Any:
    r"""Erlang C: the probability that an arriving request waits in an M/M/c queue.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate (> 0).
    service_time : Quantity [time]
        Mean (exponential) service time on one server (> 0).
    servers : int or array of int
        Servers (>= 1).

    Returns
    -------
    float or ndarray
        P(wait) in [0, 1]; 1 when the queue is unstable (:math:`a \ge c`).

    Notes
    -----
    .. math:: C(c, a) = \frac{c\,B(c, a)}{c - a\,(1 - B(c, a))}, \qquad
              B(c, a) = \frac{P(N = c)}{P(N \le c)},\ N \sim \mathrm{Poisson}(a),\ a = \lambda s

    Erlang B is evaluated as a ratio of Poisson probabilities in log space (``gammaln`` and the
    regularized incomplete gamma function), which stays accurate for thousands of servers where
    the factorial form overflows. Exact for Poisson arrivals and exponential service.

    Examples
    --------
    >>> round(erlang_c(Q_(2, "request/s"), Q_(1, "s"), 3), 4)
    0.4444
    """
    rate, service, count = _queue_inputs("erlang_c", arrival_rate, service_time, servers)
    return plain(_erlang_c(rate * service, count))


@check_units(arrival_rate="request/s", service_time="s", servers="")
def mmc_mean_wait(arrival_rate: Any, service_time: Any, servers: Any) -> Any:
    r"""Mean queueing delay (excluding service) of an M/M/c queue.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate.
    service_time : Quantity [time]
        Mean exponential service time.
    servers : int or array of int
        Servers.

    Returns
    -------
    Quantity [time]
        ``inf`` where the queue is unstable.

    Notes
    -----
    .. math:: W_q = \frac{C(c, a)}{c \mu - \lambda} = \frac{C(c, a)\, s}{c - a}

    Exact. Add ``service_time`` for the mean time in system.

    Examples
    --------
    >>> mmc_mean_wait(Q_(0.9, "request/s"), Q_(1, "s"), 1)
    <Quantity(9.0, 'second')>
    """
    rate, service, count = _queue_inputs("mmc_mean_wait", arrival_rate, service_time, servers)
    return Q_(plain(_mean_wait(rate * service, count, service, 1.0)), "s")


@check_units(arrival_rate="request/s", service_time="s", servers="", threshold="s")
def mmc_wait_exceedance(arrival_rate: Any, service_time: Any, servers: Any, threshold: Any) -> Any:
    r"""P(wait > t) for an M/M/c queue (FCFS).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate.
    service_time : Quantity [time]
        Mean exponential service time.
    servers : int or array of int
        Servers.
    threshold : Quantity [time]
        The wait ``t`` (>= 0).

    Returns
    -------
    float or ndarray
        1 where the queue is unstable.

    Notes
    -----
    .. math:: P(W_q > t) = C(c, a)\, e^{-(c\mu - \lambda) t}

    Exact for first-come first-served M/M/c.

    Examples
    --------
    >>> round(mmc_wait_exceedance(Q_(0.5, "request/s"), Q_(1, "s"), 1, Q_(2, "s")), 4)
    0.1839
    """
    rate, service, count = _queue_inputs("mmc_wait_exceedance", arrival_rate, service_time, servers)
    t = magnitude("mmc_wait_exceedance", "threshold", threshold, "s", "nonnegative")
    return plain(_wait_exceedance(rate * service, count, service, 1.0, t))


@check_units(arrival_rate="request/s", service_time="s", servers="", quantile="")
def mmc_wait_quantile(arrival_rate: Any, service_time: Any, servers: Any, quantile: Any) -> Any:
    r"""Quantile of the queueing delay of an M/M/c queue (FCFS).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate.
    service_time : Quantity [time]
        Mean exponential service time.
    servers : int or array of int
        Servers.
    quantile : float
        In [0, 1] (0.99 for p99); 1 gives ``inf``.

    Returns
    -------
    Quantity [time]
        Zero when the quantile falls in the probability of not waiting; ``inf`` when unstable.

    Notes
    -----
    .. math:: w_q = \max\left(0, \frac{s}{c - a} \ln\frac{C(c, a)}{1 - q}\right)

    Exact (inverse of :func:`mmc_wait_exceedance`). This is the wait only; the response-time
    quantile also includes service.

    Examples
    --------
    >>> mmc_wait_quantile(Q_(0.5, "request/s"), Q_(1, "s"), 1, 0.99).to("s")
    <Quantity(7.82404601, 'second')>
    """
    rate, service, count = _queue_inputs("mmc_wait_quantile", arrival_rate, service_time, servers)
    q = magnitude("mmc_wait_quantile", "quantile", quantile, "", "probability")
    return Q_(plain(_wait_quantile(rate * service, count, service, 1.0, q)), "s")


@formula(
    result=var("", r"f_{\mathrm{var}}", "nonnegative", "variability factor of the queueing delay"),
    reference="Kingman (1961); Allen-Cunneen approximation",
    arrival_cv=var("", "c_{a}", "nonnegative", "coefficient of variation of inter-arrival times"),
    service_cv=var("", "c_{s}", "nonnegative", "coefficient of variation of service times"),
)
def variability_factor(arrival_cv, service_cv):
    r"""Variability factor that scales an exponential queue's wait to a general one.

    Parameters
    ----------
    arrival_cv : float
        Coefficient of variation of inter-arrival times (1 for Poisson arrivals).
    service_cv : float
        Coefficient of variation of service times (1 exponential, 0 deterministic).

    Returns
    -------
    float

    Notes
    -----
    .. math:: f_{\mathrm{var}} = \frac{c_a^2 + c_s^2}{2}

    Equal to 1 for M/M/c. The chapter notes that utilization and service-time variability multiply
    queueing delay (§10.6.2).

    Examples
    --------
    >>> variability_factor(1, 0)
    0.5
    """
    return (arrival_cv**2 + service_cv**2) / 2


@formula(
    result=var("s", r"W_q", "nonnegative", "mean queueing delay"),
    reference="Kingman (1961) G/G/1; Pollaczek-Khinchine (M/G/1) when c_a = 1",
    utilization=var("", r"\rho", "fraction_open", "server utilization, below 1"),
    service_time=var("s", "s", "positive", "mean service time"),
    arrival_cv=var("", "c_{a}", "nonnegative", "coefficient of variation of inter-arrival times"),
    service_cv=var("", "c_{s}", "nonnegative", "coefficient of variation of service times"),
)
def kingman_wait(utilization, service_time, arrival_cv, service_cv):
    r"""Mean queueing delay of a single-server queue in utilization form (Kingman / Pollaczek-Khinchine).

    Parameters
    ----------
    utilization : float
        :math:`\rho = \lambda s`, in [0, 1).
    service_time : Quantity [time]
        Mean service time.
    arrival_cv : float
        Coefficient of variation of inter-arrival times (1 for Poisson: exact Pollaczek-Khinchine).
    service_cv : float
        Coefficient of variation of service times.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: W_q = \frac{\rho}{1 - \rho}\, \frac{c_a^2 + c_s^2}{2}\, s

    With Poisson arrivals (:math:`c_a = 1`) this is the Pollaczek-Khinchine formula, exact for any
    service distribution; otherwise Kingman's approximation, asymptotically exact as
    :math:`\rho \to 1`. In utilization form it solves for the highest utilization that keeps the
    mean wait under a target (``kingman_wait.solve_for("utilization", ...)``).

    Examples
    --------
    >>> kingman_wait(0.5, Q_(10, "ms"), 1, 0).to("ms")
    <Quantity(5.0, 'millisecond')>
    """
    return utilization / (1 - utilization) * variability_factor.func(arrival_cv, service_cv) * service_time


@check_units(arrival_rate="request/s", service_time="s", service_cv="")
def mg1_mean_wait(arrival_rate: Any, service_time: Any, service_cv: Any) -> Any:
    r"""Mean queueing delay of an M/G/1 queue (Pollaczek-Khinchine).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate.
    service_time : Quantity [time]
        Mean service time.
    service_cv : float
        Coefficient of variation of the service time (0 deterministic, 1 exponential).

    Returns
    -------
    Quantity [time]
        ``inf`` where :math:`\rho = \lambda s \ge 1`.

    Notes
    -----
    .. math:: W_q = \frac{\rho\, s\, (1 + c_s^2)}{2 (1 - \rho)}

    Exact for any service distribution with these two moments (:func:`kingman_wait` with
    :math:`c_a = 1`).

    Examples
    --------
    >>> mg1_mean_wait(Q_(50, "request/s"), Q_(10, "ms"), 0).to("ms")
    <Quantity(5.0, 'millisecond')>
    """
    rate, service, _ = _queue_inputs("mg1_mean_wait", arrival_rate, service_time, 1)
    cv = magnitude("mg1_mean_wait", "service_cv", service_cv, "", "nonnegative")
    rho = rate * service
    stable = rho < 1
    with np.errstate(all="ignore"):
        wait = kingman_wait.numeric(
            utilization=np.where(stable, rho, 0.0), service_time=service, arrival_cv=1.0, service_cv=cv
        )
    return Q_(plain(np.where(stable, wait, np.inf)), "s")


@check_units(arrival_rate="request/s", service_time="s", servers="", arrival_cv="", service_cv="")
def ggc_mean_wait(arrival_rate: Any, service_time: Any, servers: Any, arrival_cv: Any, service_cv: Any) -> Any:
    r"""Mean queueing delay of a G/G/c queue (Allen-Cunneen approximation).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Arrival rate.
    service_time : Quantity [time]
        Mean service time on one server.
    servers : int or array of int
        Servers.
    arrival_cv : float
        Coefficient of variation of inter-arrival times (1 Poisson, > 1 bursty).
    service_cv : float
        Coefficient of variation of service times.

    Returns
    -------
    Quantity [time]
        ``inf`` where the queue is unstable.

    Notes
    -----
    .. math:: W_q \approx \frac{C(c, a)\, s}{c - a}\, \frac{c_a^2 + c_s^2}{2}

    Allen-Cunneen: the exact M/M/c wait (:func:`mmc_mean_wait`) scaled by
    :func:`variability_factor`. Exact for M/M/c and for M/G/1 (Pollaczek-Khinchine); equal to
    Kingman's formula for one server. Against simulation (``docs/models-10.1-10.6.md``) the mean time in
    system is within about 20 % over utilizations 0.5-0.95, 1-64 servers and CVs 0-2, and the wait itself
    within 35 % at utilization >= 0.8 with up to 4 servers and CVs in [0.5, 2]. Where the wait is a small
    fraction of the service time its relative error is large: many servers with low variability
    (over-estimated) or bursty arrivals at moderate load (under-estimated).

    Examples
    --------
    >>> ggc_mean_wait(Q_(0.9, "request/s"), Q_(1, "s"), 1, 1, 0)
    <Quantity(4.5, 'second')>
    """
    rate, service, count = _queue_inputs("ggc_mean_wait", arrival_rate, service_time, servers)
    factor = _factor("ggc_mean_wait", arrival_cv, service_cv)
    return Q_(plain(_mean_wait(rate * service, count, service, factor)), "s")


@check_units(arrival_rate="request/s", service_time="s", servers="", arrival_cv="", service_cv="", threshold="s")
def ggc_wait_exceedance(
    arrival_rate: Any, service_time: Any, servers: Any, arrival_cv: Any, service_cv: Any, threshold: Any
) -> Any:
    r"""Approximate P(wait > t) for a G/G/c queue: Erlang C with an Allen-Cunneen-scaled exponential tail.

    Parameters
    ----------
    arrival_rate, service_time, servers, arrival_cv, service_cv
        As for :func:`ggc_mean_wait`.
    threshold : Quantity [time]
        The wait ``t`` (>= 0).

    Returns
    -------
    float or ndarray
        1 where the queue is unstable.

    Notes
    -----
    .. math:: P(W_q > t) \approx C(c, a)\, \exp\!\left(-\frac{(c - a)\, t}{f_{\mathrm{var}}\, s}\right)

    The probability of waiting is taken from Erlang C and the conditional wait as exponential with
    mean :math:`f_{\mathrm{var}} s / (c - a)`, so the mean equals :func:`ggc_mean_wait`. Exact for
    M/M/c; the conditional wait of a heavily loaded G/G/c queue is approximately exponential
    (heavy-traffic limit), which is where the approximation is best. The validation table in the
    docs records its error at p90/p99 against simulation.

    Examples
    --------
    >>> round(ggc_wait_exceedance(Q_(0.5, "request/s"), Q_(1, "s"), 1, 1, 1, Q_(2, "s")), 4)
    0.1839
    """
    rate, service, count = _queue_inputs("ggc_wait_exceedance", arrival_rate, service_time, servers)
    factor = _factor("ggc_wait_exceedance", arrival_cv, service_cv)
    t = magnitude("ggc_wait_exceedance", "threshold", threshold, "s", "nonnegative")
    return plain(_wait_exceedance(rate * service, count, service, factor, t))


@check_units(arrival_rate="request/s", service_time="s", servers="", arrival_cv="", service_cv="", quantile="")
def ggc_wait_quantile(
    arrival_rate: Any, service_time: Any, servers: Any, arrival_cv: Any, service_cv: Any, quantile: Any
) -> Any:
    r"""Approximate quantile of the queueing delay of a G/G/c queue.

    Parameters
    ----------
    arrival_rate, service_time, servers, arrival_cv, service_cv
        As for :func:`ggc_mean_wait`.
    quantile : float
        In [0, 1].

    Returns
    -------
    Quantity [time]
        ``inf`` where unstable.

    Notes
    -----
    .. math:: w_q \approx \max\left(0, \frac{f_{\mathrm{var}}\, s}{c - a} \ln\frac{C(c, a)}{1 - q}\right)

    Inverse of :func:`ggc_wait_exceedance`; exact for M/M/c.

    Examples
    --------
    >>> ggc_wait_quantile(Q_(0.5, "request/s"), Q_(1, "s"), 1, 1, 0, 0.99).to("s")
    <Quantity(3.91202301, 'second')>
    """
    rate, service, count = _queue_inputs("ggc_wait_quantile", arrival_rate, service_time, servers)
    factor = _factor("ggc_wait_quantile", arrival_cv, service_cv)
    q = magnitude("ggc_wait_quantile", "quantile", quantile, "", "probability")
    return Q_(plain(_wait_quantile(rate * service, count, service, factor, q)), "s")


@dataclass(frozen=True, repr=False)
class QueueMetrics(Result):
    r"""Steady-state metrics of a c-server queue, with its stability and whether they are exact.

    Attributes
    ----------
    utilization : float or ndarray
        :math:`\rho = \lambda s / c`.
    stable : bool or ndarray
        :math:`\rho < 1`; where False every wait and queue length is ``inf``.
    exact : bool or ndarray
        True for M/M/c (both CVs 1) and M/G/1 (Poisson arrivals, one server); otherwise the values
        are the Allen-Cunneen approximation.
    wait_probability : float or ndarray
        Erlang C, the probability an arrival waits (M/M/c exact; used as the G/G/c approximation).
    mean_wait : Quantity [time]
        Mean queueing delay.
    mean_time_in_system : Quantity [time]
        ``mean_wait + service_time``.
    mean_queue_length : Quantity [request]
        Little's law on the queue, :math:`\lambda W_q`.
    mean_in_system : Quantity [request]
        Little's law on the whole system.
    """

    utilization: Any
    stable: Any
    exact: Any
    wait_probability: Any
    mean_wait: Any
    mean_time_in_system: Any
    mean_queue_length: Any
    mean_in_system: Any
    arrival_rate: Any
    service_time: Any
    servers: Any
    arrival_cv: Any
    service_cv: Any

    def wait_exceedance(self, threshold: Any) -> Any:
        """P(wait > threshold) (see :func:`ggc_wait_exceedance`)."""
        return ggc_wait_exceedance(
            self.arrival_rate, self.service_time, self.servers, self.arrival_cv, self.service_cv, threshold
        )

    def wait_quantile(self, quantile: Any) -> Any:
        """Quantile of the queueing delay (see :func:`ggc_wait_quantile`)."""
        return ggc_wait_quantile(
            self.arrival_rate, self.service_time, self.servers, self.arrival_cv, self.service_cv, quantile
        )


@check_units(arrival_rate="request/s", service_time="s", servers="", arrival_cv="", service_cv="")
def queue_metrics(
    arrival_rate: Any, service_time: Any, servers: Any, arrival_cv: Any = 1.0, service_cv: Any = 1.0
) -> QueueMetrics:
    """All steady-state metrics of an M/M/c (default) or G/G/c queue in one result.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Arrival rate.
    service_time : Quantity [time]
        Mean service time on one server.
    servers : int or array of int
        Servers.
    arrival_cv, service_cv : float, default 1.0
        Coefficients of variation (1 and 1: M/M/c).

    Returns
    -------
    QueueMetrics

    Notes
    -----
    The waits are :func:`ggc_mean_wait` (exact for M/M/c and M/G/1), the lengths follow from
    Little's law (:func:`in_flight`). An unstable queue is reported, not raised:
    ``stable=False`` and infinite waits.

    Examples
    --------
    >>> m = queue_metrics(Q_(1000, "request/s"), Q_(10, "ms"), 10)
    >>> m.stable, m.mean_wait
    (False, <Quantity(inf, 'second')>)
    >>> m = queue_metrics(Q_(1000, "request/s"), Q_(10, "ms"), 12)
    >>> m.stable, round(m.wait_probability, 3), round(m.mean_wait.m_as("ms"), 2)
    (True, 0.449, 2.25)
    """
    rate, service, count = _queue_inputs("queue_metrics", arrival_rate, service_time, servers)
    factor = _factor("queue_metrics", arrival_cv, service_cv)
    arrival_cv = magnitude("queue_metrics", "arrival_cv", arrival_cv, "", "nonnegative")
    service_cv = magnitude("queue_metrics", "service_cv", service_cv, "", "nonnegative")
    load = rate * service
    wait = Q_(plain(_mean_wait(load, count, service, factor)), "s")
    exact = (np.asarray(arrival_cv) == 1) & ((np.asarray(service_cv) == 1) | (np.asarray(count) == 1))
    rate_q = Q_(rate, "request/s")
    return QueueMetrics(
        utilization=plain(load / count),
        stable=plain(load < count),
        exact=plain(np.broadcast_to(exact, np.shape(load / count))),
        wait_probability=plain(_erlang_c(load, count)),
        mean_wait=wait,
        mean_time_in_system=wait + Q_(service, "s"),
        mean_queue_length=in_flight(rate_q, wait),
        mean_in_system=in_flight(rate_q, wait + Q_(service, "s")),
        arrival_rate=rate_q,
        service_time=Q_(service, "s"),
        servers=as_count(count),
        arrival_cv=arrival_cv,
        service_cv=service_cv,
    )


# --------------------------------------------------------------------------------------------
# helpers


def _factor(function: str, arrival_cv: Any, service_cv: Any) -> Any:
    return variability_factor.numeric(
        arrival_cv=magnitude(function, "arrival_cv", arrival_cv, "", "nonnegative"),
        service_cv=magnitude(function, "service_cv", service_cv, "", "nonnegative"),
    )


@check_units(arrival_rate="request/s")
def arrival_times(arrival_rate: Any, requests: int, arrival_cv: float = 1.0, seed: int = 0) -> Any:
    r"""Arrival times of a renewal process with a given rate and inter-arrival variability (a trace to simulate).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Mean arrival rate :math:`\lambda`.
    requests : int
        Arrivals to draw.
    arrival_cv : float, default 1.0
        Coefficient of variation of the gaps: 1 is Poisson, 0 a fixed clock, above 1 bursty traffic.
    seed : int
        Seed of the generator (the same seed gives the same trace).

    Returns
    -------
    Quantity [time], 1-D array
        Nondecreasing arrival times, the first one gap after zero.

    Notes
    -----
    The gaps are gamma distributed with mean :math:`1/\lambda` and shape :math:`1/c_a^2` (exponential at
    :math:`c_a = 1`), the renewal process the G/G/c formulas (:func:`ggc_mean_wait`) are stated for.

    Examples
    --------
    >>> times = arrival_times(Q_(500, "request/s"), 100_000, seed=1)
    >>> round(float(100_000 / times[-1].m_as("s")), -1)
    500.0
    >>> arrival_times(Q_(2, "request/s"), 3, arrival_cv=0).m_as("s").tolist()
    [0.5, 1.0, 1.5]
    """
    name = "arrival_times"
    rate = magnitude(name, "arrival_rate", arrival_rate, "request/s", "positive")
    draws = count(name, "requests", requests)
    cv = magnitude(name, "arrival_cv", arrival_cv, "", "nonnegative")
    if np.ndim(rate) or np.ndim(cv):
        raise InputError(f"{name}(): 'arrival_rate' and 'arrival_cv' must be scalars")
    mean_gap = 1 / rate
    if cv == 0:
        gaps = np.full(draws, mean_gap)
    else:
        shape = 1 / cv**2
        gaps = np.random.default_rng(seed).gamma(shape, mean_gap / shape, draws)
    return Q_(np.cumsum(gaps), "s")
