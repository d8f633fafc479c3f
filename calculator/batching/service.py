"""The batch service curve (section 10.6.2) and the concurrency of a batching fleet (Theorem 10.1).

The linear batch service time ``T(B)``, its throughput, effective service rate and knee, the largest
batch an execution budget allows, operating points over a range of batch sizes, and Little's law
applied to a batching fleet (concurrency and replicas).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked
from ..errors import InputError
from ..formula import formula, per, var
from ..queueing import in_flight, replicas_for_load, utilization
from ..results import Result, as_count, plain
from ..types import Count, Fraction, Rate, Time, TokenRate
from ..units import Q_

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
]


# --------------------------------------------------------------------------------------------
# 10.6.2 Batching physics: T(B), throughput, knee


@formula(
    result=var("s", r"T(B)", description="execution time of one batch"),
    reference="section 10.6.2 (batch service time)",
    batch_size=var("", "B", "positive_integer", "requests in the batch"),
    fixed_time=var("s", "T_{0}", "nonnegative", "per-batch fixed cost (weight streaming, launches)"),
    marginal_time=var("s", "t_{m}", "nonnegative", "added time per request in the batch"),
    example={"batch_size": 8, "fixed_time": "40 ms", "marginal_time": "0.5 ms"},
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
    example={"batch_size": 8, "batch_time": "80 ms"},
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
    example={"batch_size": 80, "fixed_time": "40 ms", "marginal_time": "0.5 ms"},
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
    example={"fixed_time": "40 ms", "marginal_time": "0.5 ms"},
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


@checked(marginal_time="positive")
def max_batch_for_budget(fixed_time: Time, marginal_time: Time, execution_budget: Time) -> Count:
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
    # T(B) <= budget solved for B; the small offset keeps 20.000000000000004 from flooring to 20 - 1.
    largest = np.floor((np.asarray(execution_budget) - fixed_time) / marginal_time + 1e-9)
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

    batch_size: Count
    step_time: Time
    interactivity: TokenRate
    throughput_per_device: TokenRate


@checked()
def batch_operating_points(
    batch_sizes: Count, fixed_time: Time, marginal_time: Time, devices: Count = 1
) -> OperatingPoints:
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
    step = Q_(
        plain(batch_service_time.numeric(batch_size=batch_sizes, fixed_time=fixed_time, marginal_time=marginal_time)),
        "s",
    )
    per_user = (Q_(1, "token") / step).to("token/s")
    return OperatingPoints(
        batch_size=as_count(batch_sizes),
        step_time=step,
        interactivity=per_user,
        throughput_per_device=(per_user * batch_sizes / devices).to("token/s"),
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

    in_flight: Count
    replica_throughput: Rate
    min_replicas: Count
    replicas: Count
    utilization: Fraction
    executing_positions: Count
    executing: Count
    waiting: Count


@checked(arrival_rate="positive", time_in_system="nonnegative+inf", batch_time="positive")
def concurrency_plan(
    arrival_rate: Rate, time_in_system: Time, batch_size: Count, batch_time: Time, max_utilization: Fraction = 1.0
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
    if np.any(np.asarray(time_in_system) < batch_time):
        raise InputError(
            "concurrency_plan(): argument 'time_in_system' must be at least 'batch_time' (execution alone)"
        )
    rate = Q_(arrival_rate, "request/s")
    throughput = batch_throughput(batch_size, Q_(batch_time, "s"))
    minimum_count = replicas_for_load(rate, throughput)
    count = replicas_for_load(rate, throughput, max_utilization)
    total = in_flight(rate, Q_(time_in_system, "s")).to("request")
    executing = in_flight(rate, Q_(batch_time, "s")).to("request")
    return ConcurrencyPlan(
        in_flight=total,
        replica_throughput=throughput,
        min_replicas=minimum_count,
        replicas=count,
        utilization=utilization(rate, throughput, count),
        executing_positions=as_count(np.asarray(count) * np.asarray(batch_size)),
        executing=executing,
        waiting=total - executing,
    )
