"""Batching: the batch service curve, dynamic and adaptive batching, padding waste, continuous batching.

Chapter section 10.6: the linear batch service time and its knee (10.6.2), Little's law applied to
a batching fleet, dynamic batching and its latency decomposition (Eq. 3, Example 10.1), static
batching waste (Eq. 4) and continuous batching (Napkin Math 10.3, Table 7), feature-parallel
batching for recommendation (Example 10.3), streaming budgets (10.6.7), adaptive windows and the
SLO-adaptive controller (10.6.8), test-time compute budgets (Napkin Math 10.4) and the strategy
decision tree (Table 9).

Eq. 3 names queueing and formation delay but gives no model for either. This module adds the exact
mean formation delay of a window that opens at a batch's first arrival and closes after ``T_w`` or
at ``B_max`` requests (Poisson arrivals), and prices the queueing of the formed batches with the
G/G/c approximation of :mod:`calculator.queueing`; :func:`simulate_dynamic_batching` runs the same
policy on any arrival trace, optionally under the chapter's SLO-adaptive controller.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import magnitude
from ..errors import InputError
from ..formula import formula, minimum, per, var
from ..queueing import ggc_mean_wait, in_flight, replicas_for_load, utilization
from ..results import Result, as_count, plain
from ..units import Q_, check_units

__all__ = [
    "batch_service_time",
    "batch_throughput",
    "effective_service_rate",
    "knee_batch_size",
    "max_batch_for_budget",
    "OperatingPoints",
    "batch_operating_points",
    "ConcurrencyPlan",
    "concurrency_plan",
    "window_batch_size",
    "batched_utilization",
    "request_time_in_system",
    "BatchFormation",
    "batch_formation",
    "DynamicBatchingLatency",
    "dynamic_batching_latency",
    "adaptive_window",
    "slo_adaptive_step",
    "BatchingTrace",
    "simulate_dynamic_batching",
    "padding_waste_fraction",
    "padding_waste",
    "StaticBatchAccounting",
    "static_batch_accounting",
    "SlotTimeline",
    "slot_timeline",
    "continuous_batching_ceiling",
    "speedup_from_waste",
    "effective_waste",
    "ContinuousBatchingScenario",
    "TABLE_7",
    "shard_lookup_rate",
    "shard_batch_size",
    "streaming_latency",
    "frames_of_delay",
    "pipeline_sustains",
    "reasoning_latency",
    "ReasoningBudget",
    "reasoning_budget",
    "BatchingStrategy",
    "TABLE_9",
    "BatchingRecommendation",
    "select_batching_strategy",
]


# --------------------------------------------------------------------------------------------
# 10.6.2 Batching physics: T(B), throughput, knee


@formula(
    result=var("s", r"T(B)", description="execution time of one batch"),
    reference="section 10.6.2 (batch service time)",
    batch_size=var("", "B", "positive_integer", "requests in the batch"),
    fixed_time=var("s", "T_{0}", "nonnegative", "per-batch fixed cost (weight streaming, launches)"),
    marginal_time=var("s", "t_{m}", "nonnegative", "added time per request in the batch"),
)
def batch_service_time(batch_size, fixed_time, marginal_time):
    r"""Execution time of a batch: a fixed per-batch cost plus a marginal cost per request.

    Parameters
    ----------
    batch_size : int
        Requests in the batch (>= 1).
    fixed_time : Quantity [time]
        :math:`T_0`, paid once per batch: streaming weights from HBM, kernel launches
        (:func:`calculator.cases.decode_bandwidth_floor` gives the weight-streaming floor).
    marginal_time : Quantity [time]
        :math:`t_m`, added per request: its compute, or for LLM decode its own KV-cache reads.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T(B) = T_0 + B\, t_m

    Section 10.6.2 (§10.6.1). Execution only: excludes queueing and batch formation (§10.6.1).
    A local approximation for one workload and execution regime; kernel changes, cache traffic and
    saturation bend the measured curve as ``B`` grows.

    Examples
    --------
    >>> batch_service_time(8, Q_(40, "ms"), Q_(0.5, "ms")).to("ms")
    <Quantity(44.0, 'millisecond')>
    """
    return fixed_time + batch_size * marginal_time


@formula(
    result=var("request/s", r"\mu", description="requests completed per second by one replica"),
    reference="section 10.6.2 (batched service rate); Theorem 10.1 application",
    batch_size=var("", "B", "positive", "requests per batch (a mean may be fractional)"),
    batch_time=var("s", "T", description="execution time of one batch"),
)
def batch_throughput(batch_size, batch_time):
    r"""Throughput of a replica that runs full batches back to back.

    Parameters
    ----------
    batch_size : float
        Requests per batch.
    batch_time : Quantity [time]
        Execution time of one batch (measured, or :func:`batch_service_time`).

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: \mu = B / T

    §10.6.2: batches of 8 in 80 ms give 100 req/s.

    Examples
    --------
    >>> batch_throughput(8, Q_(80, "ms"))
    <Quantity(100.0, 'request / second')>
    """
    return per(batch_size / batch_time, "request")


@formula(
    result=var("request/s", r"\mu(B)", description="batched service rate"),
    reference="section 10.6.2 (effective service rate)",
    batch_size=var("", "B", "positive_integer", "requests in the batch"),
    fixed_time=var("s", "T_{0}", "nonnegative", "per-batch fixed cost"),
    marginal_time=var("s", "t_{m}", "nonnegative", "added time per request"),
)
def effective_service_rate(batch_size, fixed_time, marginal_time):
    r"""Batched service rate :math:`B / T(B)`, concave in ``B`` and saturating at :math:`1/t_m`.

    Parameters
    ----------
    batch_size : int
        Requests per batch.
    fixed_time : Quantity [time]
        :math:`T_0`.
    marginal_time : Quantity [time]
        :math:`t_m`.

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: \mu(B) = \frac{B}{T_0 + B\, t_m}

    §10.6.1. As ``B`` grows the rate approaches :math:`1/t_m`; at the knee
    (:func:`knee_batch_size`) it is exactly half of that asymptote.

    Examples
    --------
    >>> effective_service_rate(80, Q_(40, "ms"), Q_(0.5, "ms"))
    <Quantity(1000.0, 'request / second')>
    """
    return batch_throughput.func(batch_size, batch_service_time.func(batch_size, fixed_time, marginal_time))


@formula(
    result=var("", r"B_{\mathrm{knee}}", description="batch where fixed and per-request costs are equal"),
    reference="section 10.6.2, Napkin Math 10.2",
    fixed_time=var("s", "T_{0}", "positive", "per-batch fixed cost"),
    marginal_time=var("s", "t_{m}", "positive", "added time per request"),
)
def knee_batch_size(fixed_time, marginal_time):
    r"""The knee of the batching efficiency curve, where :math:`B\,t_m = T_0`.

    Parameters
    ----------
    fixed_time : Quantity [time]
        :math:`T_0`.
    marginal_time : Quantity [time]
        :math:`t_m`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: B_{\mathrm{knee}} = T_0 / t_m

    Napkin Math 10.2 (§10.6.2). Tensor parallelism over ``d`` devices divides both costs by
    ``d`` and leaves the knee unchanged. A candidate operating point only: the latency budget,
    arrivals and KV capacity decide the batch actually run (Table 9 ranges lie on both sides).

    Examples
    --------
    >>> knee_batch_size(Q_(40, "ms"), Q_(0.5, "ms"))
    80.0
    """
    return fixed_time / marginal_time


@check_units(fixed_time="s", marginal_time="s", execution_budget="s")
def max_batch_for_budget(fixed_time: Any, marginal_time: Any, execution_budget: Any) -> Any:
    r"""Largest batch whose execution fits a budget: :math:`T(B) \le` the budget left for execution.

    Parameters
    ----------
    fixed_time : Quantity [time]
        :math:`T_0`.
    marginal_time : Quantity [time]
        :math:`t_m` (> 0).
    execution_budget : Quantity [time]
        What remains of the SLO after routing, queueing, formation and delivery
        (see :func:`calculator.queueing.serving_tax_budget`).

    Returns
    -------
    int or ndarray of int
        0 when not even one request fits.

    Notes
    -----
    .. math:: B_{\max} = \left\lfloor \frac{L_{\mathrm{exec}} - T_0}{t_m} \right\rfloor

    Section 10.6.2: the execution-only condition :math:`T(B) \le` SLO must use the
    remaining budget, not the full SLO.

    Examples
    --------
    >>> max_batch_for_budget(Q_(40, "ms"), Q_(0.5, "ms"), Q_(50, "ms"))
    20
    """
    name = "max_batch_for_budget"
    fixed = magnitude(name, "fixed_time", fixed_time, "s", "nonnegative")
    marginal = magnitude(name, "marginal_time", marginal_time, "s", "positive")
    budget = magnitude(name, "execution_budget", execution_budget, "s", "nonnegative")
    # T(B) <= budget solved for B; the small offset keeps 20.000000000000004 from flooring to 20 - 1.
    largest = np.floor((np.asarray(budget) - fixed) / marginal + 1e-9)
    return as_count(np.maximum(largest, 0))


@dataclass(frozen=True, repr=False)
class OperatingPoints(Result):
    r"""Per-user and per-device rates of a decode replica at several batch sizes.

    Attributes
    ----------
    batch_size : ndarray
        The batch sizes.
    step_time : Quantity [time]
        :math:`T(B)`, one decode step (one token for every sequence in the batch).
    interactivity : Quantity [token / time]
        Tokens per second each user receives, :math:`1/T(B)`.
    throughput_per_device : Quantity [token / time]
        Tokens per second each device delivers, :math:`B / (T(B)\, d)`.
    """

    batch_size: Any
    step_time: Any
    interactivity: Any
    throughput_per_device: Any


@check_units(fixed_time="s", marginal_time="s")
def batch_operating_points(batch_sizes: Any, fixed_time: Any, marginal_time: Any, devices: int = 1) -> OperatingPoints:
    r"""Throughput versus interactivity of a decode replica from its linear step-time model.

    Parameters
    ----------
    batch_sizes : int or array of int
        Concurrent sequences per decode step.
    fixed_time : Quantity [time]
        :math:`T_0` of one decode step (already divided by the tensor-parallel degree).
    marginal_time : Quantity [time]
        :math:`t_m` per sequence.
    devices : int, default 1
        Devices in the replica (divides the per-device throughput).

    Returns
    -------
    OperatingPoints

    Notes
    -----
    Figure 6 (§10.6.2) plots measured frontiers; this is the model-side curve from
    :func:`batch_service_time`: per user :math:`1/T(B)` (one token per step, the reciprocal of
    TPOT), per device :math:`B / (T(B)\, d)`. Larger batches buy per-device output with per-user
    speed, which is why a throughput figure needs its interactivity target.

    Examples
    --------
    The 70B replica over 8 GPUs (T0 = 40/8 ms, t_m = 0.5/8 ms) at the knee:

    >>> p = batch_operating_points(80, Q_(5, "ms"), Q_(0.0625, "ms"), devices=8)
    >>> p.interactivity, p.throughput_per_device
    (<Quantity(100.0, 'token / second')>, <Quantity(1000.0, 'token / second')>)
    """
    count = magnitude("batch_operating_points", "devices", devices, "", "positive_integer")
    step = batch_service_time(batch_sizes, fixed_time, marginal_time).to("s")
    sizes = magnitude("batch_operating_points", "batch_sizes", batch_sizes, "", "positive_integer")
    per_user = (Q_(1, "token") / step).to("token/s")
    return OperatingPoints(
        batch_size=as_count(sizes),
        step_time=step,
        interactivity=per_user,
        throughput_per_device=(per_user * sizes / count).to("token/s"),
    )


# --------------------------------------------------------------------------------------------
# Theorem 10.1 application: concurrency and replicas of a batching fleet


@dataclass(frozen=True, repr=False)
class ConcurrencyPlan(Result):
    r"""Little's law applied to a batching fleet (Theorem 10.1 application).

    Attributes
    ----------
    in_flight : Quantity [request]
        Mean requests in the system, :math:`\lambda W`.
    replica_throughput : Quantity [request / time]
        :math:`B / T(B)` of one replica.
    min_replicas : int
        Throughput-only lower bound (runs at the stability boundary).
    replicas : int
        Replicas at the utilization cap.
    utilization : float
        Realised mean service utilization on ``replicas``.
    executing_positions : int
        ``replicas x batch_size``: the most requests that can be executing (excludes waiting ones).
    executing : Quantity [request]
        Mean requests executing, :math:`\lambda T(B)` (Little's law on the execution boundary).
    waiting : Quantity [request]
        ``in_flight - executing``: waiting for a replica or accumulating into a batch.
    """

    in_flight: Any
    replica_throughput: Any
    min_replicas: Any
    replicas: Any
    utilization: Any
    executing_positions: Any
    executing: Any
    waiting: Any


@check_units(arrival_rate="request/s", time_in_system="s", batch_time="s", max_utilization="")
def concurrency_plan(
    arrival_rate: Any, time_in_system: Any, batch_size: Any, batch_time: Any, max_utilization: Any = 1.0
) -> ConcurrencyPlan:
    r"""Mean concurrency, replica count and executing/waiting split for a batching fleet.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Offered rate.
    time_in_system : Quantity [time]
        Assumed (or measured) mean end-to-end latency; at least ``batch_time``.
    batch_size : int
        Requests per full batch.
    batch_time : Quantity [time]
        Execution time of one full batch.
    max_utilization : float, default 1.0
        Utilization cap used to size the fleet (0.8 in the chapter's example).

    Returns
    -------
    ConcurrencyPlan

    Notes
    -----
    Theorem 10.1 application (§10.6.2): :math:`Q = \lambda W`; :math:`\mu = B/T(B)`;
    :math:`N = \lceil \lambda / (\rho_{\max} \mu) \rceil`; :math:`\rho = \lambda/(N\mu)`;
    executing on average :math:`\lambda T(B)`, the rest of :math:`Q` waiting or accumulating.
    This sizes mean capacity only; it does not prove a percentile SLO (use
    :func:`calculator.queueing.queue_metrics` or :func:`dynamic_batching_latency`, or a load test).

    Examples
    --------
    >>> p = concurrency_plan(Q_(1000, "request/s"), Q_(100, "ms"), 8, Q_(80, "ms"), 0.8)
    >>> p.replicas, p.executing_positions, p.waiting
    (13, 104, <Quantity(20.0, 'request')>)
    """
    name = "concurrency_plan"
    size = magnitude(name, "batch_size", batch_size, "", "positive_integer")
    if np.any(time_in_system < batch_time):
        raise InputError(f"{name}(): argument 'time_in_system' must be at least 'batch_time' (execution alone)")
    throughput = batch_throughput(size, batch_time)
    minimum_count = replicas_for_load(arrival_rate, throughput)
    count = replicas_for_load(arrival_rate, throughput, max_utilization)
    total = in_flight(arrival_rate, time_in_system).to("request")
    executing = in_flight(arrival_rate, batch_time).to("request")
    return ConcurrencyPlan(
        in_flight=total,
        replica_throughput=throughput,
        min_replicas=minimum_count,
        replicas=count,
        utilization=utilization(arrival_rate, throughput, count),
        executing_positions=as_count(np.asarray(count) * np.asarray(size)),
        executing=executing,
        waiting=total - executing,
    )


# --------------------------------------------------------------------------------------------
# 10.6.3 Dynamic batching (Eq. 3, Example 10.1)


@formula(
    result=var("", "B", "nonnegative", "requests collected in one window"),
    reference="Example 10.1 (batch = arrival rate x window), section 10.6.3",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate at the batcher"),
    window=var("s", "T_{w}", "nonnegative", "batching window"),
    max_batch=var("", r"B_{\max}", "positive_integer", "largest batch allowed"),
)
def window_batch_size(arrival_rate, window, max_batch):
    r"""Requests a batching window collects: the chapter's deterministic rule, capped at ``B_max``.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Arrival rate at this batcher (per replica for replica-local batching).
    window : Quantity [time]
        The batching window.
    max_batch : int
        Largest batch allowed.

    Returns
    -------
    float

    Notes
    -----
    .. math:: B \approx \min(B_{\max}, \lambda T_w)

    Example 10.1 (§10.6.3). Exact in mean for windows that close on a clock (Figure 4's
    :math:`\Delta t`) without a cap. A window that opens on its first arrival holds that request
    too; :func:`batch_formation` gives its exact mean, :math:`1 + E[\min(N(T_w), B_{\max} - 1)]`.

    Examples
    --------
    >>> window_batch_size(Q_(500, "request/s"), Q_(10, "ms"), 32)
    5.0
    """
    return minimum(max_batch, per(arrival_rate * window, "1/request"))


@formula(
    result=var("", r"\rho", "nonnegative", "service utilization of one replica"),
    reference="Example 10.1, section 10.6.3",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate at the replica"),
    batch_size=var("", "B", "positive", "requests per batch"),
    batch_time=var("s", "T(B)", "positive", "execution time of the batch"),
)
def batched_utilization(arrival_rate, batch_size, batch_time):
    r"""Utilization of a batching replica: arrival rate times the execution time one request consumes.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Arrival rate at the replica.
    batch_size : float
        Requests per batch.
    batch_time : Quantity [time]
        Execution time of such a batch.

    Returns
    -------
    float
        Above 1 the replica is overloaded.

    Notes
    -----
    .. math:: \rho = \lambda\, \frac{T(B)}{B}

    Example 10.1 (§10.6.3): alone, 500 x 5 ms = 2.5; in batches of 5 taking 8 ms, 0.8. The same
    as :func:`calculator.queueing.utilization` of one replica whose throughput is
    :func:`batch_throughput`.

    Examples
    --------
    >>> batched_utilization(Q_(500, "request/s"), 5, Q_(8, "ms"))
    0.8
    """
    return utilization.func(arrival_rate, batch_throughput.func(batch_size, batch_time), 1)


@formula(
    result=var("s", r"E[W]", "nonnegative", "mean time a request spends in the system"),
    reference="Eq. 3, section 10.6.3",
    queueing_delay=var("s", r"E[L_{\mathrm{queue}}]", "nonnegative", "mean wait for a free replica"),
    formation_delay=var("s", r"D_{\mathrm{form}}", "nonnegative", "mean wait for the batch to close"),
    service_time=var("s", "T(B)", "nonnegative", "mean execution time of the request's batch"),
)
def request_time_in_system(queueing_delay, formation_delay, service_time):
    r"""Mean request latency under dynamic batching: queueing plus formation plus execution (Eq. 3).

    Parameters
    ----------
    queueing_delay : Quantity [time]
        Mean wait for a busy replica, excluding formation.
    formation_delay : Quantity [time]
        Mean wait for the batch to close (at most the window).
    service_time : Quantity [time]
        Mean execution time of the batch a request rides in.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: E[W] = E[L_{\mathrm{queue}}] + D_{\mathrm{form}} + T(B)

    Equation 3 (§10.6.3). The window bounds formation, never queueing.
    :func:`dynamic_batching_latency` supplies all three terms.

    Examples
    --------
    >>> request_time_in_system(Q_(3, "ms"), Q_(5, "ms"), Q_(8, "ms")).to("ms")
    <Quantity(16.0, 'millisecond')>
    """
    return queueing_delay + formation_delay + service_time


@dataclass(frozen=True, repr=False)
class BatchFormation(Result):
    r"""Statistics of batches formed by a window opened at the first arrival (Poisson arrivals).

    Attributes
    ----------
    mean_batch_size : float
        :math:`E[B] = 1 + E[\min(N, B_{\max} - 1)]`, ``N ~ Poisson(lambda T_w)``.
    batch_size_cv : float
        Coefficient of variation of the batch size.
    mean_square_batch_size : float
        :math:`E[B^2]`.
    formation_delay : Quantity [time]
        Mean time a request waits for its batch to close (per request, not per batch).
    batch_rate : Quantity [1 / time]
        Batches formed per unit time, :math:`\lambda / E[B]`.
    batch_interval_cv : float
        Coefficient of variation of the times between batch dispatches.
    """

    mean_batch_size: Any
    batch_size_cv: Any
    mean_square_batch_size: Any
    formation_delay: Any
    batch_rate: Any
    batch_interval_cv: Any


def _formation_sums(mean_arrivals: Any, extra: Any) -> tuple[np.ndarray, ...]:
    """Sums over j of P(N >= j), N ~ Poisson(mean_arrivals), weighted for the formation moments."""
    from scipy.special import gammainc

    mean, cap = np.broadcast_arrays(np.asarray(mean_arrivals, dtype=float), np.asarray(extra, dtype=float))
    first, delay, square, interval = (np.zeros(mean.shape) for _ in range(4))
    for j in range(1, int(cap.max()) + 2):
        tail = gammainc(j, mean)  # P(N >= j): the j-th arrival comes within the window
        inside = j <= cap
        first += np.where(inside, tail, 0.0)
        delay += np.where(inside, j * tail, 0.0)
        square += np.where(inside, (2 * j - 1) * tail, 0.0)
        interval += np.where(j <= cap + 1, (j - 1) * tail, 0.0)
        if np.all(tail < 1e-18):
            break
    return first, delay, square, interval


@check_units(arrival_rate="request/s", window="s")
def batch_formation(arrival_rate: Any, window: Any, max_batch: Any) -> BatchFormation:
    r"""Exact batch-size and formation-delay statistics of a window-or-max-batch policy.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate at the batcher (> 0).
    window : Quantity [time]
        :math:`T_w`: the longest a batch stays open after its first request (>= 0).
    max_batch : int
        :math:`B_{\max}`: a batch closes as soon as it holds this many requests.

    Returns
    -------
    BatchFormation

    Notes
    -----
    The policy of section 10.6.3: a batch opens at its first request and closes after
    :math:`T_w` or at :math:`B_{\max}` requests, whichever comes first; the next batch opens at the
    next arrival. With :math:`N = N(T_w) \sim \mathrm{Poisson}(\lambda T_w)`, :math:`m = B_{\max}-1`
    and :math:`p_j = P(N \ge j)`:

    .. math::
        E[B] = 1 + \sum_{j=1}^{m} p_j, \qquad
        E[B^2] = \Big(1 + \sum_{j=1}^{m} p_j\Big)^2 + \sum_{j=1}^{m}(2j-1)p_j - \Big(\sum_{j=1}^{m} p_j\Big)^2,

    .. math::
        D_{\mathrm{form}} = \frac{\sum_{j=1}^{m} j\, p_j}{\lambda\, E[B]}, \qquad
        c_I^2 = \frac{2\sum_{j=2}^{m+1}(j-1)p_j - (\sum_{j=1}^{m} p_j)^2 + 1}{E[B]^2}

    (the total wait of a batch's members is :math:`\sum_j j\,p_j/\lambda`; :math:`c_I` is the CV
    of the batch inter-dispatch time, the close time plus an exponential gap). Limits: without a
    cap and at high load :math:`D_{\mathrm{form}} \to T_w/2`; a lone request waits the full window;
    :math:`B_{\max} = 1` never waits. Exact for Poisson arrivals when formation does not depend on
    replica availability.

    Examples
    --------
    >>> f = batch_formation(Q_(500, "request/s"), Q_(10, "ms"), 64)
    >>> round(f.mean_batch_size, 3), round(f.formation_delay.m_as("ms"), 3)
    (6.0, 5.833)
    """
    name = "batch_formation"
    rate = magnitude(name, "arrival_rate", arrival_rate, "request/s", "positive")
    span = magnitude(name, "window", window, "s", "nonnegative")
    cap = magnitude(name, "max_batch", max_batch, "", "positive_integer")
    first, delay, square, interval = _formation_sums(rate * span, np.asarray(cap) - 1)
    mean = 1 + first
    variance = np.maximum(square - first**2, 0.0)
    return BatchFormation(
        mean_batch_size=plain(mean),
        batch_size_cv=plain(np.sqrt(variance) / mean),
        mean_square_batch_size=plain(variance + mean**2),
        formation_delay=Q_(plain(delay / (rate * mean)), "s"),
        batch_rate=Q_(plain(rate / mean), "1/s"),
        batch_interval_cv=plain(np.sqrt(np.maximum(2 * interval - first**2 + 1, 0.0)) / mean),
    )


@dataclass(frozen=True, repr=False)
class DynamicBatchingLatency(Result):
    """Eq. 3 evaluated for a dynamic batcher feeding ``replicas`` servers.

    Attributes
    ----------
    mean_batch_size : float
        Mean requests per dispatched batch.
    formation_delay, queueing_delay, service_time : Quantity [time]
        The three terms of Eq. 3 (service time is request-weighted: a request is more likely to
        ride in a large batch).
    time_in_system : Quantity [time]
        Their sum, the mean request latency.
    utilization : float
        Mean utilization of the replicas.
    stable : bool
        ``utilization < 1``; when False the queueing delay and the total are ``inf``.
    """

    mean_batch_size: Any
    formation_delay: Any
    queueing_delay: Any
    service_time: Any
    time_in_system: Any
    utilization: Any
    stable: Any


@check_units(arrival_rate="request/s", window="s", fixed_time="s", marginal_time="s")
def dynamic_batching_latency(
    arrival_rate: Any, window: Any, max_batch: Any, fixed_time: Any, marginal_time: Any, replicas: Any = 1
) -> DynamicBatchingLatency:
    r"""Mean request latency of dynamic batching: queueing + formation + execution (Eq. 3).

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrival rate at the batcher.
    window : Quantity [time]
        Batching window :math:`T_w`.
    max_batch : int
        :math:`B_{\max}`.
    fixed_time, marginal_time : Quantity [time]
        :math:`T_0` and :math:`t_m` of :func:`batch_service_time`.
    replicas : int, default 1
        Replicas the formed batches are dispatched to (a centralized batcher). For replica-local
        batching pass the per-replica arrival rate and ``replicas=1``.

    Returns
    -------
    DynamicBatchingLatency

    Notes
    -----
    Formation: :func:`batch_formation` (exact for the policy). Execution: the request-weighted
    mean :math:`T_0 + t_m E[B^2]/E[B]`. Queueing: the formed batches are jobs of a G/G/c queue with
    arrival rate :math:`\lambda/E[B]`, inter-dispatch CV from :func:`batch_formation`, service
    mean :math:`T_0 + t_m E[B]` and service CV :math:`t_m\,\sigma_B/(T_0 + t_m E[B])`, priced by
    :func:`calculator.queueing.ggc_mean_wait` (Allen-Cunneen). The queueing term is approximate:
    it ignores the correlation between a batch's size and the gap before it, and real batchers
    that keep collecting while every replica is busy form larger batches near saturation than this
    window-driven policy, so it is conservative there. ``docs/models-10.1-10.6.md`` compares it with
    :func:`simulate_dynamic_batching`.

    Examples
    --------
    Example 10.1's replica (500 req/s) with a 10 ms window, using a linear fit of its timings:

    >>> d = dynamic_batching_latency(Q_(500, "request/s"), Q_(10, "ms"), 64, Q_(4, "ms"), Q_(0.8, "ms"))
    >>> d.stable, round(d.utilization, 2), round(d.time_in_system.m_as("ms"), 1)
    (True, 0.73, 16.1)
    """
    name = "dynamic_batching_latency"
    formed = batch_formation(arrival_rate, window, max_batch)
    fixed = magnitude(name, "fixed_time", fixed_time, "s", "nonnegative")
    marginal = magnitude(name, "marginal_time", marginal_time, "s", "nonnegative")
    count = magnitude(name, "replicas", replicas, "", "positive_integer")
    mean = formed.mean_batch_size
    batch_service = fixed + marginal * mean
    service_cv = marginal * formed.batch_size_cv * mean / batch_service
    # Each formed batch is one job of the replicas' queue.
    batch_rate = Q_(formed.batch_rate.m_as("1/s"), "request/s")
    queueing = ggc_mean_wait(batch_rate, Q_(batch_service, "s"), count, formed.batch_interval_cv, service_cv)
    riding = Q_(fixed + marginal * formed.mean_square_batch_size / mean, "s")
    load = formed.batch_rate.m_as("1/s") * batch_service / np.asarray(count)
    return DynamicBatchingLatency(
        mean_batch_size=mean,
        formation_delay=formed.formation_delay,
        queueing_delay=queueing,
        service_time=riding,
        time_in_system=request_time_in_system(queueing, formed.formation_delay, riding),
        utilization=plain(load),
        stable=plain(load < 1),
    )


# --------------------------------------------------------------------------------------------
# 10.6.8 Adaptive batching


@formula(
    result=var("s", "T_{w}", "nonnegative", "batching window"),
    reference="section 10.6.8 (traffic-adaptive batching)",
    arrival_rate=var("request/s", r"\lambda", "positive", "current arrival rate"),
    target_batch_size=var("", r"B_{\mathrm{target}}", "positive", "batch the window aims to collect"),
    max_window=var("s", r"T_{\max}", "nonnegative", "cap on the formation delay"),
)
def adaptive_window(arrival_rate, target_batch_size, max_window):
    r"""Traffic-adaptive batching window: long enough to collect the target batch, but capped.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Current arrival rate.
    target_batch_size : float
        Batch the window aims to collect.
    max_window : Quantity [time]
        Cap that bounds formation delay at low traffic.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_w = \min\left(T_{\max}, \frac{B_{\mathrm{target}}}{\lambda}\right)

    Section 10.6.8. The window shrinks as traffic rises (self-check answer §10.18:
    widening it during a spike is not the optimal policy). The cap bounds formation delay, not the
    wait for a busy replica.

    Examples
    --------
    >>> adaptive_window(Q_(2000, "request/s"), 16, Q_(20, "ms")).to("ms")
    <Quantity(8.0, 'millisecond')>
    """
    return minimum(max_window, per(target_batch_size / arrival_rate, "request"))


@check_units(p99_latency="s", slo="s", window="s")
def slo_adaptive_step(
    p99_latency: Any,
    slo: Any,
    max_batch: Any,
    window: Any,
    high: float = 0.9,
    low: float = 0.5,
    decrease: float = 0.2,
    increase: float = 0.1,
) -> tuple[Any, Any]:
    r"""One step of the chapter's SLO-adaptive batching controller.

    Parameters
    ----------
    p99_latency : Quantity [time]
        Observed p99 latency over the last control interval.
    slo : Quantity [time]
        The latency target.
    max_batch : float
        Current :math:`B_{\max}` (kept real so that repeated steps compound exactly).
    window : Quantity [time]
        Current batching window.
    high, low : float, default 0.9, 0.5
        Back off above ``high x slo``; grow below ``low x slo``.
    decrease, increase : float, default 0.2, 0.1
        Fractional step down and up.

    Returns
    -------
    (float, Quantity [time])
        The new ``max_batch`` (at least 1) and ``window``.

    Notes
    -----
    Section 10.6.8::

        if P99 > 0.9 SLO: B_max, T_window *= 0.8
        elif P99 < 0.5 SLO: B_max, T_window *= 1.1

    A heuristic: it may oscillate, and shrinking batches under heavy load cuts capacity and grows
    queueing (§10.6.8). Evaluate it on an arrival trace with :func:`simulate_dynamic_batching`.

    Examples
    --------
    >>> slo_adaptive_step(Q_(95, "ms"), Q_(100, "ms"), 32, Q_(50, "ms"))
    (25.6, <Quantity(40.0, 'millisecond')>)
    """
    name = "slo_adaptive_step"
    observed = magnitude(name, "p99_latency", p99_latency, "s", "nonnegative")
    target = magnitude(name, "slo", slo, "s", "positive")
    size = magnitude(name, "max_batch", max_batch, "", "positive")
    span = magnitude(name, "window", window, "s", "nonnegative")
    for argument, value in (("high", high), ("low", low), ("decrease", decrease), ("increase", increase)):
        magnitude(name, argument, value, "", "fraction_open" if argument == "decrease" else "nonnegative")
    if low > high:
        raise InputError(f"{name}(): argument 'low' ({low}) must not exceed 'high' ({high})")
    scale = np.where(observed > high * target, 1 - decrease, np.where(observed < low * target, 1 + increase, 1.0))
    # B_max never drops below one request; the window may shrink towards zero.
    return plain(np.maximum(size * scale, 1.0)), Q_(plain(span * scale), "s").to(window.units)


@dataclass(frozen=True, repr=False)
class BatchingTrace(Result):
    r"""Per-request and per-control-step record of a simulated dynamic batcher.

    Attributes
    ----------
    latency, formation_delay, queueing_delay, service_time : Quantity [time], arrays (requests,)
        Each request's end-to-end latency and its three Eq. 3 parts.
    batch_sizes : ndarray of int
        Size of every dispatched batch, in dispatch order.
    control_times : Quantity [time], array
        When the controller acted (empty without a controller).
    control_p99 : Quantity [time], array
        p99 latency it observed over the preceding interval.
    control_max_batch : ndarray
        :math:`B_{\max}` after each step.
    control_window : Quantity [time], array
        Window after each step.
    """

    latency: Any
    formation_delay: Any
    queueing_delay: Any
    service_time: Any
    batch_sizes: Any
    control_times: Any
    control_p99: Any
    control_max_batch: Any
    control_window: Any

    @property
    def mean_latency(self) -> Any:
        """Mean of :attr:`latency`."""
        return self.latency.mean()

    def latency_quantile(self, quantile: float) -> Any:
        """A quantile of :attr:`latency` (0.99 for p99)."""
        return Q_(float(np.quantile(self.latency.m_as("s"), quantile)), "s")


@check_units(arrival_times="s", window="s", fixed_time="s", marginal_time="s", slo="s", control_interval="s")
def simulate_dynamic_batching(
    arrival_times: Any,
    window: Any,
    max_batch: Any,
    fixed_time: Any,
    marginal_time: Any,
    replicas: int = 1,
    slo: Any = None,
    control_interval: Any = None,
) -> BatchingTrace:
    r"""Simulate a window-or-max-batch batcher on an arrival trace, optionally under SLO-adaptive control.

    Parameters
    ----------
    arrival_times : Quantity [time], array (requests,)
        Arrival time of each request, non-decreasing.
    window : Quantity [time]
        Initial batching window (a batch opens at its first request).
    max_batch : float
        Initial :math:`B_{\max}` (the effective cap is its floor, at least 1).
    fixed_time, marginal_time : Quantity [time]
        Execution time of a batch of ``B`` is ``fixed_time + B x marginal_time``.
    replicas : int, default 1
        Replicas serving formed batches first come, first served.
    slo : Quantity [time], optional
        Turns on the SLO-adaptive controller (:func:`slo_adaptive_step`) with this target.
    control_interval : Quantity [time], optional
        How often the controller acts; it sees the p99 latency of the requests that completed in
        the interval just ended. Required with ``slo``.

    Returns
    -------
    BatchingTrace

    Notes
    -----
    A discrete-event simulation of the policy of section 10.6.3, used to evaluate the controller of
    section 10.6.8 on a trace (§10.6.8: "the controller must be evaluated with the intended
    arrival trace") and to check :func:`dynamic_batching_latency`. Formation does not wait for a
    free replica; formed batches queue for the first free replica.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> times = Q_(np.cumsum(rng.exponential(1 / 500, 20_000)), "s")
    >>> trace = simulate_dynamic_batching(times, Q_(10, "ms"), 64, Q_(4, "ms"), Q_(0.8, "ms"))
    >>> round(trace.mean_latency.m_as("ms"))
    15
    """
    name = "simulate_dynamic_batching"
    arrivals = np.asarray(magnitude(name, "arrival_times", arrival_times, "s", "any"), dtype=float).ravel()
    if arrivals.size == 0 or np.any(np.diff(arrivals) < 0) or not np.all(np.isfinite(arrivals)):
        raise InputError(f"{name}(): argument 'arrival_times' must be a non-empty, finite, non-decreasing array")
    span = float(magnitude(name, "window", window, "s", "nonnegative"))
    cap = float(magnitude(name, "max_batch", max_batch, "", "positive"))
    fixed = float(magnitude(name, "fixed_time", fixed_time, "s", "nonnegative"))
    marginal = float(magnitude(name, "marginal_time", marginal_time, "s", "nonnegative"))
    count = int(magnitude(name, "replicas", replicas, "", "positive_integer"))
    controlled = slo is not None
    if controlled:
        if control_interval is None:
            raise InputError(f"{name}(): argument 'control_interval' is required with 'slo'")
        interval = float(magnitude(name, "control_interval", control_interval, "s", "positive"))
        target = Q_(magnitude(name, "slo", slo, "s", "positive"), "s")
        next_tick = arrivals[0] + interval
    n = arrivals.size
    close_at, start_at, finish_at = np.empty(n), np.empty(n), np.empty(n)
    free = [arrivals[0]] * count
    completions: list[tuple[float, float]] = []  # (finish, latency) not yet seen by the controller
    sizes: list[int] = []
    controls: list[tuple[float, float, float, float]] = []
    i = 0
    while i < n:
        while controlled and next_tick <= arrivals[i]:
            seen = []
            while completions and completions[0][0] <= next_tick:
                seen.append(heapq.heappop(completions)[1])
            if seen:
                p99 = float(np.percentile(seen, 99))
                cap, new_window = slo_adaptive_step(Q_(p99, "s"), target, cap, Q_(span, "s"))
                span = new_window.m_as("s")
                controls.append((next_tick, p99, cap, span))
            next_tick += interval
        limit = max(1, int(np.floor(cap + 1e-9)))
        close = arrivals[i] + span
        j = int(np.searchsorted(arrivals, close, side="right"))
        j = min(j, i + limit, n)
        if j - i == limit:
            close = arrivals[j - 1]  # full: dispatch at the arrival that filled it
        start = max(close, heapq.heappop(free))
        finish = start + fixed + marginal * (j - i)
        heapq.heappush(free, finish)
        close_at[i:j], start_at[i:j], finish_at[i:j] = close, start, finish
        if controlled:
            for latency in finish - arrivals[i:j]:
                heapq.heappush(completions, (finish, float(latency)))
        sizes.append(j - i)
        i = j
    record = np.array(controls).reshape(-1, 4)
    return BatchingTrace(
        latency=Q_(finish_at - arrivals, "s"),
        formation_delay=Q_(close_at - arrivals, "s"),
        queueing_delay=Q_(start_at - close_at, "s"),
        service_time=Q_(finish_at - start_at, "s"),
        batch_sizes=np.array(sizes),
        control_times=Q_(record[:, 0], "s"),
        control_p99=Q_(record[:, 1], "s"),
        control_max_batch=record[:, 2],
        control_window=Q_(record[:, 3], "s"),
    )


# --------------------------------------------------------------------------------------------
# 10.6.4-10.6.5 Static batching waste and continuous batching


@formula(
    result=var("", "W", "fraction_open", "fraction of slot-iterations left idle by fixed membership"),
    reference="Eq. 4, section 10.6.5",
    mean_length=var("", r"\bar{L}", "positive", "mean output length in the batch"),
    max_length=var("", r"L_{\max}", "positive", "longest output length in the batch"),
)
def padding_waste_fraction(mean_length, max_length):
    r"""Padding waste of a static batch from its mean and longest output lengths (Eq. 4).

    Parameters
    ----------
    mean_length : float
        Mean output length :math:`\bar L` in the batch (tokens).
    max_length : float
        Longest output length :math:`L_{\max}` (at least the mean).

    Returns
    -------
    float

    Notes
    -----
    .. math:: W = 1 - \frac{\sum_i L_i}{B\, L_{\max}} = 1 - \frac{\bar L}{L_{\max}}

    Equation 4 (§10.6.5): a static batch keeps all ``B`` slots until its longest sequence
    ends. Counts executed waste only if the kernel keeps computing finished slots; otherwise it is
    unused slot capacity. Use :func:`padding_waste` for a list of lengths.

    Examples
    --------
    >>> padding_waste_fraction(125, 200)
    0.375
    """
    return 1 - mean_length / max_length


def padding_waste(output_lengths: Any) -> Any:
    """Padding waste (Eq. 4) of static batches given each request's output length.

    Parameters
    ----------
    output_lengths : array of int, shape (..., batch)
        Output tokens of each request (>= 1); the last axis is the batch.

    Returns
    -------
    float or ndarray
        In [0, 1); 0 when every length is equal.

    Examples
    --------
    §10.6.4: one sequence of a batch of 8 stops after 10 tokens, the others run 100.

    >>> round(padding_waste([10] + [100] * 7), 6)
    0.1125
    """
    lengths = _lengths("padding_waste", output_lengths)
    return plain(padding_waste_fraction.numeric(mean_length=lengths.mean(axis=-1), max_length=lengths.max(axis=-1)))


@dataclass(frozen=True, repr=False)
class StaticBatchAccounting(Result):
    """Slot-iteration accounting and per-request latencies of one static batch (Napkin Math 10.3).

    Attributes
    ----------
    batch_size : int
        Slots.
    max_length, mean_length : float
        Longest and mean output length.
    iterations : int
        Decode iterations until the longest request ends.
    batch_time : Quantity [time]
        ``iterations x iteration_time``.
    slot_iterations, useful_slot_iterations, idle_slot_iterations : int
        ``B x L_max``, ``sum L_i`` and the difference.
    waste : float
        Eq. 4.
    barrier_latency : Quantity [time], array
        Each request's latency when responses are held until the batch ends.
    release_latency : Quantity [time], array
        Each request's latency when it is released on completion.
    mean_barrier_latency, mean_release_latency : Quantity [time]
        Their means.
    latency_reduction : float
        ``1 - mean_release / mean_barrier`` (numerically equal to ``waste``).
    speedup : ndarray
        Per-request ``barrier / release``.
    freed_at : ndarray of int
        Iterations at which slots free before the batch ends (where continuous admission can
        start a waiting request).
    requests_advanced : int
        Requests the same iterations advance with continuous admission, one new request per freed
        slot (the new ones still running at the end).
    """

    batch_size: Any
    max_length: Any
    mean_length: Any
    iterations: Any
    batch_time: Any
    slot_iterations: Any
    useful_slot_iterations: Any
    idle_slot_iterations: Any
    waste: Any
    barrier_latency: Any
    release_latency: Any
    mean_barrier_latency: Any
    mean_release_latency: Any
    latency_reduction: Any
    speedup: Any
    freed_at: Any
    requests_advanced: Any


@check_units(iteration_time="s")
def static_batch_accounting(output_lengths: Any, iteration_time: Any) -> StaticBatchAccounting:
    """Account a static batch's slot-iterations and its requests' latencies with and without a barrier.

    Parameters
    ----------
    output_lengths : sequence of int
        Output tokens of each request in the batch.
    iteration_time : Quantity [time]
        Time of one decode iteration for the whole batch (assumed fixed).

    Returns
    -------
    StaticBatchAccounting

    Notes
    -----
    Napkin Math 10.3 (§10.6.5). With fixed membership the batch runs ``L_max`` iterations of
    ``B`` slots. Holding every response until the end (a response barrier) gives every request
    ``L_max x t``; releasing on completion gives ``L_i x t``. Release and slot reuse are separate
    decisions: release helps the requests in the batch, only continuous admission recovers the idle
    slot-iterations for new requests (§10.6.5).

    Examples
    --------
    >>> a = static_batch_accounting([50, 200, 100, 150], Q_(20, "ms"))
    >>> a.waste, a.mean_release_latency.to("ms"), a.requests_advanced
    (0.375, <Quantity(2500.0, 'millisecond')>, 7)
    """
    lengths = _lengths("static_batch_accounting", output_lengths)
    if lengths.ndim != 1:
        raise InputError("static_batch_accounting(): argument 'output_lengths' must be one batch (a 1-d sequence)")
    step = Q_(magnitude("static_batch_accounting", "iteration_time", iteration_time, "s", "positive"), "s")
    longest = int(lengths.max())
    size = lengths.size
    barrier = Q_(np.full(size, longest * step.magnitude), "s")
    release = Q_(lengths * step.magnitude, "s")
    freed = np.sort(lengths[lengths < longest]).astype(int)
    useful = int(lengths.sum())
    return StaticBatchAccounting(
        batch_size=size,
        max_length=float(longest),
        mean_length=float(lengths.mean()),
        iterations=longest,
        batch_time=(longest * step).to("s"),
        slot_iterations=size * longest,
        useful_slot_iterations=useful,
        idle_slot_iterations=size * longest - useful,
        waste=padding_waste(lengths),
        barrier_latency=barrier,
        release_latency=release,
        mean_barrier_latency=barrier.mean(),
        mean_release_latency=release.mean(),
        latency_reduction=float(1 - (release.mean() / barrier.mean()).m_as("")),
        speedup=(barrier / release).m_as(""),
        freed_at=freed,
        requests_advanced=size + freed.size,
    )


@dataclass(frozen=True, repr=False)
class SlotTimeline(Result):
    """A slot x iteration schedule of a batch (Figure 7).

    Attributes
    ----------
    grid : ndarray of int, shape (slots, iterations)
        Index of the request occupying each cell (into ``output_lengths`` then ``queued_lengths``),
        -1 for an idle cell.
    prefill : ndarray of bool, same shape
        Cells spent on a newly admitted request's prefill.
    slot_iterations : int
        ``slots x iterations``.
    used_slot_iterations : int
        Cells doing work (prefill or decode).
    occupancy : float
        ``used / slot_iterations``.
    admitted : int
        Requests that started within the horizon.
    completed : int
        Requests that finished within the horizon.
    start_iteration : ndarray of int
        First iteration of each request (-1 if it never started).
    """

    grid: Any
    prefill: Any
    slot_iterations: Any
    used_slot_iterations: Any
    occupancy: Any
    admitted: Any
    completed: Any
    start_iteration: Any


def slot_timeline(
    output_lengths: Any,
    slots: int | None = None,
    iterations: int | None = None,
    refill: bool = False,
    queued_lengths: Any = (),
    prefill_iterations: int = 0,
) -> SlotTimeline:
    """Lay out a batch on a slot x iteration grid, with fixed membership or continuous admission.

    Parameters
    ----------
    output_lengths : sequence of int
        Output tokens of the requests that start the batch (one per slot, in slot order; any beyond
        ``slots`` wait in the queue first).
    slots : int, optional
        Batch width; defaults to ``len(output_lengths)``.
    iterations : int, optional
        Horizon; defaults to the longest starting request.
    refill : bool, default False
        Continuous admission: a freed slot takes the next waiting request at the next iteration
        boundary. With False, membership is fixed and freed slots stay idle.
    queued_lengths : sequence of int, optional
        Output lengths of waiting requests, in admission order.
    prefill_iterations : int, default 0
        Cells a newly admitted request spends on its prefill before decoding (Figure 7 draws one).

    Returns
    -------
    SlotTimeline

    Notes
    -----
    Section 10.6.4, Figure 7 (§10.6.2): over 8 iterations of 4 slots, fixed membership keeps
    20 of 32 cells busy and continuous admission all 32 when waiting requests and cache capacity
    allow. KV-cache admission limits are not modelled here.

    Examples
    --------
    >>> slot_timeline([3, 8, 5, 4]).used_slot_iterations
    20
    >>> slot_timeline([3, 8, 5, 4], refill=True, queued_lengths=[8, 8, 8], prefill_iterations=1).occupancy
    1.0
    """
    name = "slot_timeline"
    first = _lengths(name, output_lengths)
    waiting = _lengths(name, queued_lengths) if len(queued_lengths) else np.zeros(0, dtype=int)
    if first.ndim != 1 or waiting.ndim != 1:
        raise InputError(f"{name}(): lengths must be 1-d sequences")
    width = int(magnitude(name, "slots", first.size if slots is None else slots, "", "positive_integer"))
    horizon = int(
        magnitude(name, "iterations", int(first.max()) if iterations is None else iterations, "", "positive_integer")
    )
    prefill_cells = int(magnitude(name, "prefill_iterations", prefill_iterations, "", "nonnegative"))
    if not isinstance(refill, bool | np.bool_):
        raise InputError(f"{name}(): argument 'refill' must be True or False, got {refill!r}")
    lengths = np.concatenate([first, waiting]).astype(int)
    grid = np.full((width, horizon), -1)
    prefill = np.zeros((width, horizon), dtype=bool)
    start = np.full(lengths.size, -1)
    finish = np.full(lengths.size, -1)

    def place(slot: int, request: int, at: int, warmup: int) -> int:
        start[request] = at
        end = at + warmup + lengths[request]
        grid[slot, at : min(end, horizon)] = request
        prefill[slot, at : min(at + warmup, horizon)] = True
        finish[request] = end
        return end

    # Requests that open the batch were prefilled before iteration 0; freed slots take the next
    # waiting request in the order they free (ties by slot).
    frees = [(place(slot, slot, 0, 0), slot) for slot in range(min(width, lengths.size))]
    heapq.heapify(frees)
    waiting_next = len(frees)
    while refill and frees and waiting_next < lengths.size:
        at, slot = heapq.heappop(frees)
        if at >= horizon:
            break
        heapq.heappush(frees, (place(slot, waiting_next, at, prefill_cells), slot))
        waiting_next += 1
    used = int((grid >= 0).sum())
    return SlotTimeline(
        grid=grid,
        prefill=prefill,
        slot_iterations=width * horizon,
        used_slot_iterations=used,
        occupancy=used / (width * horizon),
        admitted=int((start >= 0).sum()),
        completed=int(((finish >= 0) & (finish <= horizon)).sum()),
        start_iteration=start,
    )


@formula(
    result=var("", r"S_{\max}", description="ceiling on the continuous-batching capacity gain"),
    reference="section 10.6.5 (efficiency regimes), Table 7",
    output_cv=var("", r"\mathrm{CV}", "nonnegative", "coefficient of variation of output lengths"),
    deviation_multiple=var("", "k", "nonnegative", "standard deviations from the mean to a batch's longest"),
)
def continuous_batching_ceiling(output_cv, deviation_multiple):
    r"""Ceiling on the capacity gain of continuous over static batching, :math:`1 + k\,\mathrm{CV}`.

    Parameters
    ----------
    output_cv : float
        :math:`\sigma/\mu` of the workload's output lengths.
    deviation_multiple : float
        :math:`k`: how many standard deviations above the mean a batch's longest request lies.
        An assumption about the batch (it grows with batch size), not a workload property.

    Returns
    -------
    float

    Notes
    -----
    .. math:: \text{Improvement} \approx \frac{L_{\max}}{\bar L} = \frac{\mu + k\sigma}{\mu} = 1 + k\,\mathrm{CV}

    §10.6.5: a ceiling, assuming immediate refill and unchanged iteration time; scheduler
    overhead, KV pressure and refill gaps recover less. Uniform lengths give 1.

    Examples
    --------
    >>> continuous_batching_ceiling(1.0, 2.5)
    3.5
    """
    return 1 + deviation_multiple * output_cv


@formula(
    result=var("", "S", description="throughput speedup"),
    reference="section 10.6.5, Table 7 (speedup = 1 / (1 - W_eff))",
    effective_waste=var("", r"W_{\mathrm{eff}}", "fraction_open", "effective waste the speedup recovers"),
)
def speedup_from_waste(effective_waste):
    r"""Speedup from recovering an effective waste fraction.

    Parameters
    ----------
    effective_waste : float
        In [0, 1).

    Returns
    -------
    float

    Notes
    -----
    .. math:: S = \frac{1}{1 - W_{\mathrm{eff}}}

    §10.6.5: Table 7's waste column restates its assumed speedup through this relation.
    :func:`effective_waste` is its inverse.

    Examples
    --------
    >>> speedup_from_waste(0.5)
    2.0
    """
    return 1 / (1 - effective_waste)


def effective_waste(speedup: Any) -> Any:
    r"""Effective waste implied by a continuous-batching speedup: :math:`1 - 1/S`.

    Parameters
    ----------
    speedup : float
        Throughput ratio of continuous to static batching (>= 1).

    Returns
    -------
    float

    Examples
    --------
    >>> round(effective_waste(1.5), 3)
    0.333
    """
    return speedup_from_waste.solve_for("effective_waste", speedup_from_waste=speedup)


@dataclass(frozen=True, repr=False)
class ContinuousBatchingScenario(Result):
    """A row of Table 7: a workload's output-length variability and an assumed realised speedup.

    Attributes
    ----------
    workload : str
    output_cv : float
        Coefficient of variation of output lengths.
    deviation_multiple : float
        Assumed ``k``.
    speedup : float
        Assumed realised speedup (held below the ceiling; not a measurement).
    """

    workload: str
    output_cv: float
    deviation_multiple: float
    speedup: float

    @property
    def ceiling(self) -> float:
        r""":math:`1 + k\,\mathrm{CV}` (:func:`continuous_batching_ceiling`)."""
        return continuous_batching_ceiling(self.output_cv, self.deviation_multiple)

    @property
    def effective_waste(self) -> float:
        """The waste column: :math:`1 - 1/S` (:func:`effective_waste`)."""
        return effective_waste(self.speedup)

    @property
    def recovered_share(self) -> float:
        r"""Share of the ceiling's gain the assumed speedup recovers, :math:`(S - 1)/(k\,\mathrm{CV})`."""
        return (self.speedup - 1) / (self.ceiling - 1)


#: Table 7 (§10.6.5): inputs CV and k, and the assumed speedups; the waste column is derived.
TABLE_7 = (
    ContinuousBatchingScenario("Code completion", 0.3, 2.5, 1.2),
    ContinuousBatchingScenario("Chat (short responses)", 0.6, 2.0, 1.5),
    ContinuousBatchingScenario("General text generation", 1.0, 2.5, 2.0),
    ContinuousBatchingScenario("Creative writing", 1.5, 3.0, 2.8),
    ContinuousBatchingScenario("RAG with variable docs", 2.0, 2.5, 3.5),
)


# --------------------------------------------------------------------------------------------
# 10.6.6 Feature-parallel batching (Example 10.3)


@formula(
    result=var("1/s", r"\lambda_{\mathrm{shard}}", description="embedding lookups per second at one shard"),
    reference="Example 10.3, section 10.6.6",
    arrival_rate=var("request/s", r"\lambda", description="requests per second"),
    lookups_per_request=var("", "n_{L}", description="embedding lookups each request issues"),
    shards=var("", "S", "positive_integer", "embedding shards sharing the lookups"),
)
def shard_lookup_rate(arrival_rate, lookups_per_request, shards):
    r"""Lookups per second each embedding shard must sustain, for evenly spread lookups.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Request rate.
    lookups_per_request : float
        Embedding lookups per request.
    shards : int
        Shards the lookups spread over evenly.

    Returns
    -------
    Quantity [1 / time]
        Lookups per second per shard.

    Notes
    -----
    .. math:: \lambda_{\mathrm{shard}} = \frac{\lambda\, n_L}{S}

    Example 10.3 (§10.6.6). Skewed access (hot embeddings) concentrates load above this mean.

    Examples
    --------
    >>> shard_lookup_rate(Q_(10e6, "request/s"), 5000, 1000)
    <Quantity(50000000.0, '1 / second')>
    """
    return per(arrival_rate * lookups_per_request / shards, "1/request")


@formula(
    result=var("", r"B_{\mathrm{shard}}", "nonnegative", "lookups one shard batches per window"),
    reference="Example 10.3, section 10.6.6",
    lookup_rate=var("1/s", r"\lambda_{\mathrm{shard}}", "nonnegative", "lookups per second at the shard"),
    window=var("s", "T_{w}", "nonnegative", "accumulation window"),
)
def shard_batch_size(lookup_rate, window):
    r"""Lookups a shard accumulates in one window.

    Parameters
    ----------
    lookup_rate : Quantity [1 / time]
        From :func:`shard_lookup_rate`.
    window : Quantity [time]
        Accumulation window (it spends part of the end-to-end budget).

    Returns
    -------
    float

    Notes
    -----
    .. math:: B_{\mathrm{shard}} = \lambda_{\mathrm{shard}}\, T_w

    Example 10.3 (§10.6.6): 50 M lookups/s over 1 ms gives batches of 50K, an opportunity to
    deduplicate and coalesce, not a way to make random addresses sequential.

    Examples
    --------
    >>> shard_batch_size(Q_(50e6, "1/s"), Q_(1, "ms"))
    50000.0
    """
    return lookup_rate * window


# --------------------------------------------------------------------------------------------
# 10.6.7 Streaming


@formula(
    result=var("s", r"L_{\mathrm{stream}}", "nonnegative", "end-to-end latency of one streamed input"),
    reference="section 10.6.7 (streaming end-to-end latency)",
    capture=var("s", r"t_{\mathrm{capture}}", "nonnegative", "input capture"),
    transfer=var("s", r"t_{\mathrm{transfer}}", "nonnegative", "payload transfer"),
    inference=var("s", r"t_{\mathrm{inf}}", "nonnegative", "inference"),
    action=var("s", r"t_{\mathrm{action}}", "nonnegative", "acting on the result"),
)
def streaming_latency(capture, transfer, inference, action):
    r"""End-to-end latency of a streaming pipeline, which must fit its budget.

    Parameters
    ----------
    capture, transfer, inference, action : Quantity [time]
        Input capture, payload transfer, inference and result action.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{stream}} = t_{\mathrm{capture}} + t_{\mathrm{transfer}} + t_{\mathrm{inf}}
              + t_{\mathrm{action}}

    §10.6.7. The budget may span several frames (:func:`frames_of_delay`); a pipelined
    implementation must also keep its slowest stage faster than the frames arrive
    (:func:`pipeline_sustains`).

    Examples
    --------
    >>> streaming_latency(Q_(20, "ms"), Q_(5, "ms"), Q_(40, "ms"), Q_(10, "ms")).to("ms")
    <Quantity(75.0, 'millisecond')>
    """
    return capture + transfer + inference + action


@check_units(budget="s", frame_interval="s")
def frames_of_delay(budget: Any, frame_interval: Any) -> Any:
    r"""How many frame intervals of delay a latency budget can hold.

    Parameters
    ----------
    budget : Quantity [time]
        End-to-end latency budget.
    frame_interval : Quantity [time]
        Time between input frames (1 / frame rate).

    Returns
    -------
    int or ndarray of int

    Notes
    -----
    .. math:: n = \lfloor L_{\mathrm{budget}} / \Delta t_{\mathrm{frame}} \rfloor

    §10.6.7: 20 ms frames and a 100 ms budget hold at most five frames of delay; batching ready
    frames from independent streams helps only while the added wait fits that slack.

    Examples
    --------
    >>> frames_of_delay(Q_(100, "ms"), Q_(20, "ms"))
    5
    """
    span = magnitude("frames_of_delay", "budget", budget, "s", "nonnegative")
    frame = magnitude("frames_of_delay", "frame_interval", frame_interval, "s", "positive")
    return as_count(np.floor(np.asarray(span) / frame + 1e-9))


@check_units(stage_times="s", frame_interval="s")
def pipeline_sustains(stage_times: Any, frame_interval: Any) -> bool:
    """Whether a pipeline keeps up with its input: its slowest stage is no slower than the frame interval.

    Parameters
    ----------
    stage_times : Quantity [time], array (stages,)
        Processing time per frame of each pipelined stage.
    frame_interval : Quantity [time]
        Time between frames.

    Returns
    -------
    bool

    Notes
    -----
    §10.6.7: a pipelined implementation must sustain the input arrival rate.

    Examples
    --------
    >>> pipeline_sustains(Q_([5, 18, 9], "ms"), Q_(20, "ms"))
    True
    """
    stages = np.asarray(magnitude("pipeline_sustains", "stage_times", stage_times, "s", "nonnegative"))
    frame = magnitude("pipeline_sustains", "frame_interval", frame_interval, "s", "positive")
    if stages.size == 0:
        raise InputError("pipeline_sustains(): argument 'stage_times' needs at least one stage")
    return bool(stages.max() <= frame)


# --------------------------------------------------------------------------------------------
# 10.6.9 Test-time compute


@formula(
    result=var("s", r"L_{\mathrm{serial}}", "nonnegative", "latency of serially generated tokens"),
    reference="Napkin Math 10.4, section 10.6.9",
    serial_tokens=var("", "N", "nonnegative", "tokens generated one after another"),
    time_per_token=var("s", r"t_{\mathrm{tok}}", "positive", "time per generated token"),
)
def reasoning_latency(serial_tokens, time_per_token):
    r"""Latency of tokens that must be generated serially (reasoning or answer).

    Parameters
    ----------
    serial_tokens : float
        Tokens generated one after another.
    time_per_token : Quantity [time]
        Time per token (TPOT).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{serial}} = N\, t_{\mathrm{tok}}

    Napkin Math 10.4 (§10.6.5): 128 reasoning tokens at 100 ms are 12.8 s.

    Examples
    --------
    >>> reasoning_latency(128, Q_(100, "ms")).to("s")
    <Quantity(12.8, 'second')>
    """
    return serial_tokens * time_per_token


@dataclass(frozen=True, repr=False)
class ReasoningBudget(Result):
    """A per-request test-time compute budget checked in latency and in capacity.

    Attributes
    ----------
    direct_latency : Quantity [time]
        Latency of the direct answer.
    reasoning_latency : Quantity [time]
        Latency of the serial reasoning response.
    latency_multiplier : float
        ``reasoning_tokens / answer_tokens``: independent of the time per token.
    max_serial_tokens : int
        Serial tokens that fit the latency budget.
    within_latency : bool
        The reasoning response fits the latency budget.
    generated_tokens : float
        Tokens the request generates over all parallel candidates (its capacity cost).
    within_capacity : bool or None
        ``generated_tokens <= token_budget`` (None without a token budget).
    """

    direct_latency: Any
    reasoning_latency: Any
    latency_multiplier: Any
    max_serial_tokens: Any
    within_latency: Any
    generated_tokens: Any
    within_capacity: Any


@check_units(time_per_token="s", latency_budget="s")
def reasoning_budget(
    time_per_token: Any,
    latency_budget: Any,
    reasoning_tokens: Any,
    answer_tokens: Any = 1,
    candidates: Any = 1,
    token_budget: Any = None,
) -> ReasoningBudget:
    """Check a reasoning request against a per-request compute budget, stated in latency and capacity.

    Parameters
    ----------
    time_per_token : Quantity [time]
        Time per generated token.
    latency_budget : Quantity [time]
        The request's latency target.
    reasoning_tokens : float
        Serial tokens of the reasoning response (its answer included).
    answer_tokens : float, default 1
        Tokens of the direct answer it is compared with.
    candidates : int, default 1
        Candidates generated in parallel (each adds compute and KV residency, not serial latency).
    token_budget : float, optional
        The request's share of fleet capacity, in generated tokens.

    Returns
    -------
    ReasoningBudget

    Notes
    -----
    Napkin Math 10.4 and section 10.6.9 (§10.6.5, answer §10.18): serial reasoning multiplies
    latency by ``reasoning_tokens / answer_tokens`` whatever each token costs; parallel candidates
    multiply capacity, not serial latency. The budget binds on whichever runs out first.

    Examples
    --------
    >>> b = reasoning_budget(Q_(100, "ms"), Q_(10, "s"), 128)
    >>> b.reasoning_latency.to("s"), b.latency_multiplier, b.max_serial_tokens, b.within_latency
    (<Quantity(12.8, 'second')>, 128.0, 100, False)
    """
    name = "reasoning_budget"
    step = Q_(magnitude(name, "time_per_token", time_per_token, "s", "positive"), "s")
    budget = Q_(magnitude(name, "latency_budget", latency_budget, "s", "nonnegative"), "s")
    serial = magnitude(name, "reasoning_tokens", reasoning_tokens, "", "nonnegative")
    answer = magnitude(name, "answer_tokens", answer_tokens, "", "positive")
    width = magnitude(name, "candidates", candidates, "", "positive_integer")
    latency = reasoning_latency(serial, step)
    generated = float(width * serial)
    within_capacity = None
    if token_budget is not None:
        within_capacity = generated <= magnitude(name, "token_budget", token_budget, "", "nonnegative")
        within_capacity = bool(within_capacity) if np.ndim(within_capacity) == 0 else within_capacity
    return ReasoningBudget(
        direct_latency=reasoning_latency(answer, step),
        reasoning_latency=latency,
        latency_multiplier=float(serial / answer),
        max_serial_tokens=as_count(np.floor((budget / step).m_as("") + 1e-9)),
        within_latency=bool(latency <= budget),
        generated_tokens=generated,
        within_capacity=within_capacity,
    )


# --------------------------------------------------------------------------------------------
# 10.6.10 Selecting a batching strategy (decision tree, Table 9)


@dataclass(frozen=True, repr=False)
class BatchingStrategy(Result):
    """A row of Table 9: the batching policy a model class starts from."""

    model_type: str
    strategy: str
    typical_batch: str
    key_constraint: str
    key_parameters: str
    tuning_goal: str


#: Table 9 (§10.6.6). Typical batches are starting ranges, not requirements; they may lie
#: below or above the knee of :func:`knee_batch_size`.
TABLE_9 = (
    BatchingStrategy(
        "Vision (CNN)",
        "Static/Dynamic",
        "32-256",
        "GPU compute",
        "Batch size; window and max batch",
        "Balance latency vs. throughput",
    ),
    BatchingStrategy(
        "LLM (prefill)", "Dynamic", "1-64", "GPU compute", "Window, max batch", "Balance latency vs. throughput"
    ),
    BatchingStrategy(
        "LLM (decode)",
        "Continuous",
        "Tens-hundreds (KV-limited)",
        "Memory bandwidth",
        "Chunk size, max batch",
        "Minimize decode latency variance",
    ),
    BatchingStrategy(
        "RecSys",
        "Feature-parallel",
        "1000-10000s",
        "Embedding lookup",
        "Accumulation window",
        "Match embedding shard capacity",
    ),
    BatchingStrategy("Speech", "Streaming", "1", "Real-time", "Pipeline depth", "Meet real-time deadline"),
)


@dataclass(frozen=True, repr=False)
class BatchingRecommendation(Result):
    """The decision tree's answer and the Table 9 rows that describe it."""

    strategy: str
    rows: tuple[BatchingStrategy, ...]


def select_batching_strategy(
    autoregressive: bool, realtime_streaming: bool = False, embedding_dominated: bool = False
) -> BatchingRecommendation:
    """Walk the chapter's batching-strategy decision tree (section 10.6.10).

    Parameters
    ----------
    autoregressive : bool
        Autoregressive text generation?
    realtime_streaming : bool, default False
        Real-time streaming speech, video or robotics?
    embedding_dominated : bool, default False
        Do embedding lookups dominate latency?

    Returns
    -------
    BatchingRecommendation

    Notes
    -----
    §10.6.6, the questions asked in order; Table 9 (§10.6.6) gives each outcome's typical
    batch, binding constraint and tuning parameter. A starting point for measurement: memory
    admission, arrivals and the remaining latency budget set the usable settings.

    Examples
    --------
    >>> select_batching_strategy(autoregressive=True).strategy
    'continuous batching with chunked prefill'
    >>> select_batching_strategy(False, embedding_dominated=True).rows[0].typical_batch
    '1000-10000s'
    """
    for argument, value in (
        ("autoregressive", autoregressive),
        ("realtime_streaming", realtime_streaming),
        ("embedding_dominated", embedding_dominated),
    ):
        if not isinstance(value, bool | np.bool_):
            raise InputError(f"select_batching_strategy(): argument '{argument}' must be True or False, got {value!r}")
    rows = {row.model_type: row for row in TABLE_9}
    if autoregressive:
        return BatchingRecommendation(
            "continuous batching with chunked prefill", (rows["LLM (prefill)"], rows["LLM (decode)"])
        )
    if realtime_streaming:
        return BatchingRecommendation("streaming pipeline with minimal or no batching", (rows["Speech"],))
    if embedding_dominated:
        return BatchingRecommendation("feature-parallel batching", (rows["RecSys"],))
    return BatchingRecommendation("dynamic batching with adaptive parameters", (rows["Vision (CNN)"],))


# --------------------------------------------------------------------------------------------
# helpers


def _lengths(function: str, output_lengths: Any) -> np.ndarray:
    lengths = np.asarray(output_lengths)
    if lengths.ndim == 0 or lengths.shape[-1] == 0:
        raise InputError(f"{function}(): output lengths must be a non-empty sequence")
    magnitude(function, "output_lengths", lengths, "", "positive_integer")
    return lengths.astype(int)
