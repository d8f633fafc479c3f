"""Autoscaling and capacity control (section 10.13).

Scaling response time (eq. 16), cold start from artifact size and storage bandwidth, replicas for
a demand curve, a predictive (forecast) schedule and a reactive controller simulated on the same
curve, warm-pool sizing and idle cost, and spot capacity: the termination budget and the savings
left after draining, rebuilding and retries.

Demand curves are piecewise constant: ``demand[i]`` holds from ``times[i]`` until ``times[i + 1]``
(the last value until ``end``). Both schedules are evaluated on one time grid, so their deficit
(request-seconds of demand above ready capacity) and replica-hours compare like for like.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._support import Arg, checked, mapping, one
from .errors import InputError
from .formula import check_domain, formula, var
from .queueing import replica_demand
from .results import ROUNDING_TOLERANCE, Result, as_count, ceil_count, ceil_whole, plain
from .types import Bandwidth, Bytes, Count, Fraction, Money, MoneyRate, Number, Rate, Time
from .units import Q_, shown

__all__ = [
    "DEFAULT_SCALING_STEP",
    "scaling_response_time",
    "model_load_time",
    "cold_start_time",
    "required_replicas",
    "replicas_for_phases",
    "ScalingAction",
    "ScalingPlan",
    "predictive_schedule",
    "simulate_reactive_scaling",
    "peak_reduction",
    "WARM_POOL_TIERS",
    "WarmPool",
    "warm_pool",
    "idle_cost_rate",
    "capacity_ready_within",
    "SpotTermination",
    "spot_termination_plan",
    "SpotSavings",
    "spot_savings",
]

_MINUTE = Q_(1, "min")
#: The time step of the scaling simulations unless one is given.
DEFAULT_SCALING_STEP = _MINUTE
_ZERO_SECONDS = Q_(0, "s")
_ZERO_HOURS = Q_(0, "hour")
_SPOT_WARNING = Q_(120, "s")
_DRAIN_TIMEOUT = Q_(90, "s")
_DEFAULT_SCALE_DOWN_DELAY = Q_(10, "min")


# --------------------------------------------------------------------------------------------
# Response time and cold start (eq. 16, Example 10.11)


@formula(
    result=var("s", r"T_{\mathrm{scale}}", description="scaling response time"),
    reference="Eq. 16, section 10.13.1; Table 20",
    detection_time=var("s", r"T_{\mathrm{detect}}", "nonnegative", "time to detect the need"),
    decision_time=var("s", r"T_{\mathrm{decide}}", "nonnegative", "time to decide"),
    provisioning_time=var("s", r"T_{\mathrm{prov}}", "nonnegative", "time to provision capacity"),
    warmup_time=var("s", r"T_{\mathrm{warm}}", "nonnegative", "time to warm up"),
    example={"detection_time": "10 s", "decision_time": "1 s", "provisioning_time": "30 s", "warmup_time": "5 s"},
)
def scaling_response_time(detection_time, decision_time, provisioning_time, warmup_time):
    r"""Time from a demand change until new capacity serves: detection, decision, provisioning, warmup.

    Parameters
    ----------
    detection_time, decision_time, provisioning_time, warmup_time : Quantity [time]
        The four phases of Table 20 (10-60 s, 1-5 s, 30 s-5 min, 5-30 s as illustrated).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{scale}} = T_{\mathrm{detect}} + T_{\mathrm{decide}} + T_{\mathrm{prov}}
              + T_{\mathrm{warm}}

    Eq. 16 (§10.13.1). Artifact loading sits inside provisioning or warmup depending on the
    platform; :func:`cold_start_time` makes it explicit. A warm pool removes only the phases
    already completed at its readiness level (§10.13.1).

    Examples
    --------
    Table 20's ranges give 46 s at best and 395 s at worst:

    >>> scaling_response_time(Q_(10, "s"), Q_(1, "s"), Q_(30, "s"), Q_(5, "s"))
    <Quantity(46.0, 'second')>
    """
    return detection_time + decision_time + provisioning_time + warmup_time


@formula(
    result=var("s", r"T_{\mathrm{load}}", description="model artifact load time"),
    reference="Example 10.11 (§10.13.2)",
    artifact_bytes=var("B", r"M_{\mathrm{art}}", "nonnegative", "bytes of model artifacts to fetch"),
    storage_bandwidth=var("B/s", r"B_{\mathrm{store}}", description="effective storage bandwidth"),
    example={"artifact_bytes": "140 GB", "storage_bandwidth": "0.5 GB/s"},
)
def model_load_time(artifact_bytes, storage_bandwidth):
    r"""Time to fetch a model's artifacts at the effective storage bandwidth.

    Parameters
    ----------
    artifact_bytes : Quantity [information]
        Artifact bytes (weights, engines).
    storage_bandwidth : Quantity [information / time]
        Effective bandwidth from storage to the replica.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{load}} = M_{\mathrm{art}} / B_{\mathrm{store}}

    Examples
    --------
    >>> round(model_load_time(Q_(140, "GB"), Q_(0.5, "GB/s")).m_as("min"), 1)
    4.7
    """
    return artifact_bytes / storage_bandwidth


@formula(
    result=var("s", r"T_{\mathrm{cold}}", description="replica cold-start time"),
    reference="Example 10.11 (§10.13.2)",
    provisioning_time=var("s", r"T_{\mathrm{prov}}", "nonnegative", "time to acquire capacity"),
    artifact_bytes=var("B", r"M_{\mathrm{art}}", "nonnegative", "bytes of model artifacts"),
    storage_bandwidth=var("B/s", r"B_{\mathrm{store}}", description="effective storage bandwidth"),
    warmup_time=var("s", r"T_{\mathrm{warm}}", "nonnegative", "device loading and warmup"),
    example={
        "provisioning_time": "1 min",
        "artifact_bytes": "140 GB",
        "storage_bandwidth": "0.5 GB/s",
        "warmup_time": "1 min",
    },
)
def cold_start_time(provisioning_time, artifact_bytes, storage_bandwidth, warmup_time):
    r"""Sequential cold start of a replica: provision, fetch the artifacts, load and warm up.

    Parameters
    ----------
    provisioning_time : Quantity [time]
        Time to acquire the accelerator allocation.
    artifact_bytes : Quantity [information]
        Artifact bytes to fetch.
    storage_bandwidth : Quantity [information / time]
        Effective storage bandwidth.
    warmup_time : Quantity [time]
        Device loading, compilation and warmup.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{cold}} = T_{\mathrm{prov}} + \frac{M_{\mathrm{art}}}{B_{\mathrm{store}}} + T_{\mathrm{warm}}

    Example 10.11 (§10.13.2). Cached artifacts or overlapping phases shorten it; scarce capacity and
    shared storage lengthen it, so plan for a high percentile (§10.13.2).

    Examples
    --------
    >>> round(cold_start_time(Q_(1, "min"), Q_(140, "GB"), Q_(0.5, "GB/s"), Q_(1, "min")).m_as("min"), 1)
    6.7
    """
    return provisioning_time + model_load_time.func(artifact_bytes, storage_bandwidth) + warmup_time


# --------------------------------------------------------------------------------------------
# Replicas for a demand


@checked(replica_capacity="positive", min_replicas="nonnegative_integer", spare_replicas="nonnegative_integer")
def required_replicas(
    demand: Rate,
    replica_capacity: Rate,
    target_utilization: Fraction = 1.0,
    min_replicas: Count = 0,
    spare_replicas: Count = 0,
) -> Count:
    r"""Replicas an autoscaler should hold for a demand (scalar or a whole curve).

    Parameters
    ----------
    demand : Quantity [request / time] (or any rate, with ``replica_capacity`` in the same dimension)
        Demand, scalar or array; must be nonnegative.
    replica_capacity : Quantity [request / time]
        Sustainable rate of one replica.
    target_utilization : float
        Utilization the replicas should run at, in (0, 1].
    min_replicas : int
        Floor on the count.
    spare_replicas : int
        Replicas held beyond the load, e.g. 1 to survive one replica failure (§10.13).

    Returns
    -------
    int or int array

    Notes
    -----
    .. math:: n = \max\left(n_{\min}, \left\lceil \frac{\lambda}{u\,\mu} \right\rceil\right) + n_{\mathrm{spare}}

    The same rule as the throughput bound of :mod:`calculator.queueing`, applied per time step with
    the autoscaler's floor and spare capacity. With ``spare_replicas=1``, :math:`(n - 1)\mu u \ge \lambda`.

    Examples
    --------
    Example 10.12 at 100 QPS per replica: 500 QPS needs 5, 3,000 QPS needs 30.

    >>> required_replicas(Q_([500, 3000], "request/s"), Q_(100, "request/s")).tolist()
    [5, 30]
    """
    function = "required_replicas"
    if np.ndim(replica_capacity):
        raise InputError(f"{function}(): argument 'replica_capacity' must be one number, got {shown(replica_capacity)}")
    if np.any(np.asarray(target_utilization) <= 0):
        raise InputError(f"{function}(): argument 'target_utilization' must be > 0, got {shown(target_utilization)}")
    needed = ceil_count(
        replica_demand.numeric(
            arrival_rate=np.asarray(demand), replica_throughput=replica_capacity, max_utilization=target_utilization
        )
    )
    return as_count(np.maximum(needed, min_replicas) + spare_replicas)


def replicas_for_phases(demands: Mapping[str, Any], per_replica: Mapping[str, Any]) -> tuple[int, str]:
    """Replicas a colocated deployment needs so that every phase's demand is covered, and the binding phase.

    Parameters
    ----------
    demands : mapping of str to Quantity
        Demand per phase or resource (prompt tokens/s, output tokens/s, KV bytes).
    per_replica : mapping of str to Quantity
        What one replica sustains of each, in a compatible unit.

    Returns
    -------
    (int, str)
        The replica count and the phase that sets it.

    Notes
    -----
    A colocated replica must satisfy all phase requirements (§10.13); disaggregated pools need
    separate counts plus a feasible KV transfer budget.

    Examples
    --------
    >>> replicas_for_phases({"prompt": Q_(2e5, "token/s"), "output": Q_(3e4, "token/s"), "kv": Q_(900, "GB")},
    ...                     {"prompt": Q_(5e4, "token/s"), "output": Q_(4e3, "token/s"), "kv": Q_(60, "GB")})
    (15, 'kv')
    """
    if not mapping("replicas_for_phases", "demands", demands):
        raise InputError("replicas_for_phases(): argument 'demands' must name at least one phase")
    mapping("replicas_for_phases", "per_replica", per_replica)
    counts = {}
    for phase, amount in demands.items():
        if phase not in per_replica:
            raise InputError(f"replicas_for_phases(): per_replica has no capacity for phase {phase!r}")
        capacity = Q_(per_replica[phase])
        if Q_(amount).dimensionality != capacity.dimensionality:
            raise InputError(f"replicas_for_phases(): phase {phase!r} demand and capacity have different dimensions")
        ratio = float((Q_(amount) / capacity).m_as(""))
        check_domain("replicas_for_phases", f"demands['{phase}']", ratio, "nonnegative")
        counts[phase] = ceil_count(ratio)
    binding = max(counts, key=lambda phase: counts[phase])
    return counts[binding], binding


# --------------------------------------------------------------------------------------------
# Demand curves, predictive and reactive schedules


@dataclass(frozen=True, repr=False)
class ScalingAction(Result):
    """One controller action: replicas started (positive) or terminated (negative) at ``time``."""

    time: Time
    change: int
    ready_at: Time
    kind: str


@dataclass(frozen=True, repr=False)
class ScalingPlan(Result):
    """A capacity timeline on a grid: demand, ready and billed replicas, deficit, replica-hours, actions."""

    policy: str
    times: Time = field(repr=False)
    demand: Rate = field(repr=False)
    required: np.ndarray = field(repr=False)
    ready: np.ndarray = field(repr=False)
    billed: np.ndarray = field(repr=False)
    deficit: Count
    replica_hours: Time
    peak_replicas: int
    peak_backlog: Count
    actions: tuple[ScalingAction, ...]


#: The most time steps a scaling simulation takes (a year at one-minute steps is 525,600).
MAX_STEPS = 2_000_000


def _grid(function: str, times: Any, demand: Any, end: Any, step: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """The evaluation grid and the demand on it, from magnitudes (seconds, request/s) already checked."""
    starts = np.atleast_1d(times).astype(float)
    rates = np.atleast_1d(demand).astype(float)
    if starts.ndim != 1 or starts.size == 0 or starts.shape != rates.shape:
        raise InputError(f"{function}(): 'times' and 'demand' must be non-empty 1-D arrays of one length")
    if np.any(np.diff(starts) <= 0):
        raise InputError(f"{function}(): argument 'times' must be strictly increasing")
    if not np.all(np.isfinite(starts)):
        raise InputError(f"{function}(): argument 'times' must be finite")
    dt = float(step)
    stop = float(end) if end is not None else starts[-1] + dt
    if stop <= starts[-1]:
        raise InputError(f"{function}(): argument 'end' must be after the last time")
    steps = (stop - starts[0]) / dt
    if not steps <= MAX_STEPS:
        raise InputError(
            f"{function}(): 'end' and 'step' make {steps:,.3g} steps, more than {MAX_STEPS:,}; use a longer step"
        )
    grid = starts[0] + dt * np.arange(max(int(np.round(steps)), 1))  # a window shorter than a step is one step
    index = np.searchsorted(starts, grid + 1e-9 * dt, side="right") - 1
    return grid, rates[index], dt


def _hours(seconds: float) -> Any:
    return Q_(float(seconds) / 3600, "hour")


def _plan(
    policy: str,
    grid: np.ndarray,
    rate: np.ndarray,
    dt: float,
    mu: float,
    required: np.ndarray,
    ready: np.ndarray,
    billed: np.ndarray,
    backlog_peak: float,
    actions: list[ScalingAction],
) -> ScalingPlan:
    shortfall = np.maximum(rate - ready * mu, 0.0)
    return ScalingPlan(
        policy=policy,
        times=Q_(grid, "s").to("hour"),
        demand=Q_(rate, "request/s"),
        required=required,
        ready=ready,
        billed=billed,
        deficit=Q_(float(shortfall.sum() * dt), "request"),
        replica_hours=Q_(float(billed.sum() * dt / 3600), "hour"),
        peak_replicas=int(billed.max()),
        peak_backlog=Q_(backlog_peak, "request"),
        actions=tuple(actions),
    )


#: The declarations the two scaling policies share: a demand trace on a time grid and a replica model.
_SCALING: dict[str, str | Arg] = {
    "times": "any",
    "replica_capacity": one("positive"),
    "end": one("any"),
    "step": one("positive"),
    "min_replicas": one("nonnegative_integer"),
    "startup_time": one(),
    "target_utilization": one(),
}


@checked(**_SCALING, lead_time=one())
def predictive_schedule(
    times: Time,
    demand: Rate,
    replica_capacity: Rate,
    startup_time: Time,
    lead_time: Time,
    end: Time | None = None,
    step: Time = DEFAULT_SCALING_STEP,
    target_utilization: Fraction = 1.0,
    min_replicas: Count = 1,
) -> ScalingPlan:
    """Forecast-driven schedule: start replicas ``lead_time`` before each forecast rise, stop them at each fall.

    Parameters
    ----------
    times : Quantity [time], array
        Start of each demand step (strictly increasing).
    demand : Quantity [request / time], array
        Forecast demand of each step (nonnegative).
    replica_capacity : Quantity [request / time]
        Rate one replica sustains at ``target_utilization`` = 1.
    startup_time : Quantity [time]
        Cold start of one replica (:func:`cold_start_time`).
    lead_time : Quantity [time]
        How far ahead of each rise replicas are started; at least ``startup_time`` for them to be ready.
    end : Quantity [time], optional
        End of the evaluated window (default: one ``step`` after the last time).
    step : Quantity [time]
        Evaluation grid.
    target_utilization : float
        Utilization the replicas are sized for.
    min_replicas : int
        Replicas never scaled below.

    Returns
    -------
    ScalingPlan
        Actions (start times of warming replicas and terminations), ready and billed replicas on the
        grid (warming replicas are billed), the deficit and replica-hours. Replicas present at the first
        time are assumed ready.

    Notes
    -----
    Example 10.12 and Table 21 (§10.13.2): start 30 minutes ahead of the ramps, which exceeds the
    assumed 7-minute startup. A lead shorter than the startup leaves a deficit of
    ``startup - lead`` at each rise. The forecast pays only if warming replica-hours cost less than the
    reactive overshoot (§10.13.2).

    Examples
    --------
    Table 21: 500 QPS at night, 1,500 from 06:00, 3,000 from 09:00, 2,000 from 17:00, 1,000 from 20:00.

    >>> plan = predictive_schedule(Q_([0, 6, 9, 17, 20], "hour"), Q_([500, 1500, 3000, 2000, 1000], "request/s"),
    ...                            Q_(100, "request/s"), Q_(7, "min"), Q_(30, "min"), end=Q_(24, "hour"))
    >>> [(round(a.time.m_as("hour"), 1), a.change) for a in plan.actions]
    [(5.5, 10), (8.5, 15), (17.0, -10), (20.0, -10)]
    >>> plan.replica_hours, plan.peak_replicas, plan.deficit
    (<Quantity(427.5, 'hour')>, 30, <Quantity(0.0, 'request')>)
    """
    function = "predictive_schedule"
    grid, rate, dt = _grid(function, times, demand, end, step)
    mu, startup, lead = float(replica_capacity), float(startup_time), float(lead_time)
    starts = np.atleast_1d(times).astype(float)
    capacity, floor = Q_(mu, "request/s"), int(min_replicas)
    steps = np.atleast_1d(required_replicas(Q_(demand, "request/s"), capacity, target_utilization, floor))
    required = np.atleast_1d(required_replicas(Q_(rate, "request/s"), capacity, target_utilization, floor))
    ready = np.full(grid.size, steps[0], dtype=np.int64)
    billed = ready.copy()
    actions = []
    for k in range(1, steps.size):
        change = int(steps[k] - steps[k - 1])
        at = starts[k]
        if change > 0:
            begin, online = at - lead, at - lead + startup
            billed[grid >= begin - 1e-9 * dt] += change
            ready[grid >= online - 1e-9 * dt] += change
            actions.append(ScalingAction(_hours(begin), change, _hours(online), "scale_up"))
        elif change < 0:
            billed[grid >= at - 1e-9 * dt] += change
            ready[grid >= at - 1e-9 * dt] += change
            actions.append(ScalingAction(_hours(at), change, _hours(at), "scale_down"))
    return _plan("predictive", grid, rate, dt, mu, required, ready, billed, 0.0, actions)


@checked(
    **_SCALING,
    backlog_drain_time=one("positive"),
    detection_time=one(),
    decision_time=one(),
    scale_down_delay=one(),
)
def simulate_reactive_scaling(
    times: Time,
    demand: Rate,
    replica_capacity: Rate,
    startup_time: Time,
    detection_time: Time = _MINUTE,
    decision_time: Time = _ZERO_SECONDS,
    end: Time | None = None,
    step: Time = DEFAULT_SCALING_STEP,
    target_utilization: Fraction = 1.0,
    min_replicas: Count = 1,
    backlog_drain_time: Time | None = None,
    scale_down_delay: Time = _DEFAULT_SCALE_DOWN_DELAY,
) -> ScalingPlan:
    """Simulate a reactive autoscaler on a demand curve: it sees demand late and waits for cold starts.

    Parameters
    ----------
    times, demand, replica_capacity, startup_time, end, step, target_utilization, min_replicas
        As for :func:`predictive_schedule` (``demand`` is the actual demand here).
    detection_time : Quantity [time]
        Lag of the metric the controller reads (eq. 16's detection).
    decision_time : Quantity [time]
        Delay before requested replicas start provisioning.
    backlog_drain_time : Quantity [time], optional
        If given, the controller also sizes for the queued backlog, to drain it within this time: the
        overshoot that makes reactive peaks higher than forecast peaks (§10.13.2).
    scale_down_delay : Quantity [time]
        How long the controller must see excess capacity before removing it (hysteresis, §10.13).

    Returns
    -------
    ScalingPlan
        As for :func:`predictive_schedule`; requests arriving above ready capacity queue, and the peak
        backlog is reported.

    Notes
    -----
    At each grid step the controller reads demand and backlog ``detection_time`` ago, computes the
    replicas needed (:func:`required_replicas`, plus backlog / drain time), starts the missing ones
    (ready after ``decision_time + startup_time``) and, after ``scale_down_delay`` of excess with
    nothing starting, stops the surplus. Warming replicas are billed.

    Examples
    --------
    >>> plan = simulate_reactive_scaling(Q_([0, 6, 9, 17, 20], "hour"), Q_([500, 1500, 3000, 2000, 1000], "request/s"),
    ...                                  Q_(100, "request/s"), Q_(7, "min"), end=Q_(24, "hour"))
    >>> plan.peak_replicas, plan.deficit.m_as("request") > 0
    (30, True)
    """
    function = "simulate_reactive_scaling"
    grid, rate, dt = _grid(function, times, demand, end, step)
    mu, min_replicas = float(replica_capacity), int(min_replicas)
    drain = None if backlog_drain_time is None else float(backlog_drain_time)
    lag = int(np.round(float(detection_time) / dt))
    provision = float(decision_time) + float(startup_time)
    required = np.atleast_1d(
        required_replicas(Q_(rate, "request/s"), Q_(mu, "request/s"), target_utilization, min_replicas)
    )
    per_replica = mu * target_utilization

    def wanted(observed: Any) -> Any:  # required_replicas on plain numbers, for the controller loop
        return np.maximum(ceil_whole(np.asarray(observed) / per_replica), min_replicas)

    seen_at = np.maximum(np.arange(grid.size) - lag, 0)
    desired_all = wanted(rate[seen_at]).astype(np.int64) if drain is None else None
    ready_count = int(required[0])
    pending: deque[tuple[float, int]] = deque()  # (ready time, replicas), in order of ready time
    starting = 0
    queue: list[float] = []  # the backlog after each step
    ready = np.zeros(grid.size, dtype=np.int64)
    billed = np.zeros(grid.size, dtype=np.int64)
    actions: list[ScalingAction] = []
    excess_since: float | None = None
    queued = 0.0
    down_delay = float(scale_down_delay) - 1e-9 * dt
    drain_seconds = drain if drain is not None else math.inf
    rates, grid_values = rate.tolist(), grid.tolist()
    for k, now in enumerate(grid_values):  # a controller loop: each decision depends on the previous state
        while pending and pending[0][0] <= now + 1e-9 * dt:
            ready_count += pending[0][1]
            starting -= pending.popleft()[1]
        if desired_all is not None:
            desired = int(desired_all[k])
        else:
            seen = max(k - lag, 0)
            load = (rates[seen] + (queue[seen] if seen < k else 0.0) / drain_seconds) / per_replica
            desired = max(math.ceil(load * (1 - ROUNDING_TOLERANCE)), min_replicas)  # ceil_whole on a float
        if desired > ready_count + starting:
            change = desired - ready_count - starting
            pending.append((now + provision, change))
            starting += change
            actions.append(ScalingAction(_hours(now), change, _hours(now + provision), "scale_up"))
            excess_since = None
        elif desired < ready_count and not pending:
            excess_since = now if excess_since is None else excess_since
            if now - excess_since >= down_delay:
                change = desired - ready_count
                ready_count = desired
                actions.append(ScalingAction(_hours(now), change, _hours(now), "scale_down"))
                excess_since = None
        else:
            excess_since = None
        ready[k] = ready_count
        billed[k] = ready_count + starting
        queued = max(0.0, queued + (rates[k] - ready_count * mu) * dt)
        queue.append(queued)
    backlog = np.asarray(queue)
    return _plan("reactive", grid, rate, dt, mu, required, ready, billed, float(backlog.max()), actions)


@formula(
    result=var("", "r", "any", "fractional reduction of the peak replica count"),
    reference="Example 10.12 systems insight (§10.13.2)",
    forecast_peak=var("", r"n_{\mathrm{fc}}", "nonnegative", "peak replicas with the forecast"),
    reactive_peak=var("", r"n_{\mathrm{re}}", "positive", "peak replicas of the reactive controller"),
    example={"forecast_peak": 30, "reactive_peak": 45},
)
def peak_reduction(forecast_peak, reactive_peak):
    r"""Fractional reduction of the peak replica count from forecasting.

    Parameters
    ----------
    forecast_peak : int
        Peak replicas of the predictive schedule.
    reactive_peak : int
        Peak replicas of the reactive controller.

    Returns
    -------
    float

    Notes
    -----
    .. math:: r = 1 - n_{\mathrm{fc}} / n_{\mathrm{re}}

    Peak count is only part of the bill: compare replica-hours too (§10.13.2).

    Examples
    --------
    >>> round(peak_reduction(30, 45), 3)
    0.333
    """
    return 1 - forecast_peak / reactive_peak


# --------------------------------------------------------------------------------------------
# Warm pools (section 10.13.3)


#: Table 22 (§10.13.3): readiness tiers, what activation still requires and what waiting costs.
WARM_POOL_TIERS = {
    "hot": ("Model running on allocated GPU", "Route admitted work", "Allocated GPU and service resources"),
    "warm": (
        "Capacity allocated; runtime partly prepared",
        "Finish initialization and validation",
        "Allocated resources remain billable",
    ),
    "cold": ("GPU not allocated", "Acquire capacity, load, and warm up", "Artifact storage; no allocated GPU"),
}


@dataclass(frozen=True, repr=False)
class WarmPool(Result):
    """Warm-pool sizing: capacity to hold through the provisioning delay and the replicas to keep ready."""

    target_capacity: Rate
    missing_capacity: Rate
    pool_replicas: int


@checked(
    baseline_capacity=one(),
    peak_multiplier=one("positive"),
    headroom_factor=one("positive"),
    ready_capacity=one(),
    replica_capacity=one("positive"),
)
def warm_pool(
    baseline_capacity: Rate,
    peak_multiplier: Number,
    headroom_factor: Number,
    ready_capacity: Rate,
    replica_capacity: Rate,
) -> WarmPool:
    r"""Replicas to keep prepared so that the surge fits while new capacity provisions.

    Parameters
    ----------
    baseline_capacity : Quantity [request / time]
        Capacity serving the baseline demand.
    peak_multiplier : float
        Peak demand over baseline during the provisioning delay (2 if it doubles).
    headroom_factor : float
        Headroom over the peak (1.5 in the chapter).
    ready_capacity : Quantity [request / time]
        Capacity already ready to serve.
    replica_capacity : Quantity [request / time]
        Capacity one prepared replica adds, assuming unchanged per-replica throughput.

    Returns
    -------
    WarmPool

    Notes
    -----
    .. math:: C_{\mathrm{target}} = C_{\mathrm{base}}\, m\, h, \qquad
              n_{\mathrm{pool}} = \left\lceil \frac{\max(0, C_{\mathrm{target}} - C_{\mathrm{ready}})}{\mu} \right\rceil

    §10.13.3: "If peak demand doubles and the chosen headroom factor is 1.5, the target is three
    times baseline capacity". Partly prepared replicas count only if ready in time
    (:func:`capacity_ready_within`).

    Examples
    --------
    >>> pool = warm_pool(Q_(1000, "request/s"), 2, 1.5, Q_(1000, "request/s"), Q_(100, "request/s"))
    >>> pool.target_capacity, pool.pool_replicas
    (<Quantity(3000.0, 'request / second')>, 20)
    """
    target = baseline_capacity * peak_multiplier * headroom_factor
    missing = np.maximum(target - ready_capacity, 0.0)
    return WarmPool(
        target_capacity=Q_(plain(target), "request/s"),
        missing_capacity=Q_(plain(missing), "request/s"),
        pool_replicas=int(required_replicas(Q_(missing, "request/s"), Q_(replica_capacity, "request/s"))),
    )


@formula(
    result=var("USD/hour", r"c_{\mathrm{idle}}", "nonnegative", "hourly cost of idle pool capacity"),
    reference="section 10.13.3",
    pool_replicas=var("", "n", "nonnegative", "replicas (GPUs) in the pool"),
    price=var("USD/hour", "p", "nonnegative", "price per replica-hour"),
    idle_fraction=var("", "f", "probability", "fraction of the time the pool is idle"),
    example={"pool_replicas": 16, "price": "4 USD/hour", "idle_fraction": 0.75},
)
def idle_cost_rate(pool_replicas, price, idle_fraction):
    r"""Hourly cost attributed to idle warm-pool capacity.

    Parameters
    ----------
    pool_replicas : int
        Replicas (or GPUs) held in the pool.
    price : Quantity [currency / time]
        Price per replica-hour (per GPU-hour for GPUs).
    idle_fraction : float
        Share of the time the pool is idle.

    Returns
    -------
    Quantity [currency / time]

    Notes
    -----
    .. math:: c_{\mathrm{idle}} = n \, p \, f

    "Pool size x GPU cost/hour x Idle fraction" (§10.13.3); it excludes busy capacity and non-GPU
    resources.

    Examples
    --------
    >>> idle_cost_rate(16, Q_(4, "USD/hour"), 0.75)
    <Quantity(48.0, 'USD / hour')>
    """
    return pool_replicas * price * idle_fraction


@checked(activation_delay="unchecked", deadline=one())
def capacity_ready_within(pool: Mapping[str, int], activation_delay: Mapping[str, Time], deadline: Time) -> int:
    """Replicas of a tiered pool that can serve within ``deadline``: only tiers that activate in time count.

    Parameters
    ----------
    pool : mapping of str to int
        Replicas per readiness tier (``{"hot": 4, "warm": 6, "cold": 10}``).
    activation_delay : mapping of str to Quantity [time]
        Measured activation delay of each tier (Table 22 gives the requirements, not the delays).
    deadline : Quantity [time]
        When the capacity is needed.

    Returns
    -------
    int

    Examples
    --------
    >>> capacity_ready_within({"hot": 4, "warm": 6, "cold": 10},
    ...     {"hot": Q_(0, "s"), "warm": Q_(45, "s"), "cold": Q_(7, "min")}, Q_(2, "min"))
    10
    """
    total = 0
    for tier, replicas in mapping("capacity_ready_within", "pool", pool).items():
        if tier not in mapping("capacity_ready_within", "activation_delay", activation_delay):
            raise InputError(f"capacity_ready_within(): no activation delay for tier {tier!r}")
        check_domain("capacity_ready_within", f"pool['{tier}']", replicas, "nonnegative")
        if Q_(activation_delay[tier]).m_as("s") <= deadline:
            total += int(replicas)
    return total


# --------------------------------------------------------------------------------------------
# Spot and preemptible capacity (section 10.13.4)


@dataclass(frozen=True, repr=False)
class SpotTermination(Result):
    """Time budget after a spot termination warning: drain, then save state, then shut down."""

    save_window: Time
    save_time: Time
    slack: Time
    feasible: bool
    reason: str


@checked(
    storage_bandwidth=one("positive"),
    state_bytes=one(),
    warning=one(),
    drain_timeout=one(),
    deregistration_time=one(),
    shutdown_time=one(),
)
def spot_termination_plan(
    state_bytes: Bytes,
    storage_bandwidth: Bandwidth,
    warning: Time = _SPOT_WARNING,
    drain_timeout: Time = _DRAIN_TIMEOUT,
    deregistration_time: Time = _ZERO_SECONDS,
    shutdown_time: Time = _ZERO_SECONDS,
) -> SpotTermination:
    r"""Whether Listing 2's shutdown sequence fits the provider's warning window.

    Parameters
    ----------
    state_bytes : Quantity [information]
        KV cache and state to persist for resumption elsewhere.
    storage_bandwidth : Quantity [information / time]
        Effective write bandwidth to storage.
    warning : Quantity [time]
        Termination warning (two minutes, §10.13.4).
    drain_timeout : Quantity [time]
        Time allowed to complete in-flight requests (90 s in Listing 2).
    deregistration_time : Quantity [time]
        Stopping admission and leaving the load balancer.
    shutdown_time : Quantity [time]
        Final termination.

    Returns
    -------
    SpotTermination

    Notes
    -----
    .. math:: T_{\mathrm{save}} = W - T_{\mathrm{dereg}} - T_{\mathrm{drain}} - T_{\mathrm{stop}}, \qquad
              \text{feasible iff } M / B \le T_{\mathrm{save}}

    Listing 2 (§10.13.4): stop admission and deregister, drain, save state, shut down.
    Requests that cannot finish need a permitted retry, reconstruction or rejection path (§10.13.4).

    Examples
    --------
    >>> plan = spot_termination_plan(Q_(20, "GB"), Q_(1, "GB/s"))
    >>> plan.save_window, plan.feasible
    (<Quantity(30.0, 'second')>, True)
    """
    window = Q_(float(warning - deregistration_time - drain_timeout - shutdown_time), "s")
    save = Q_(float(state_bytes / storage_bandwidth), "s")
    slack = window - save
    if window.m_as("s") < 0:
        spent = Q_(float(warning), "s") - window
        feasible, reason = False, f"drain and shutdown alone ({spent:~P}) exceed the warning"
    elif slack.m_as("s") < 0:
        feasible, reason = False, f"saving state takes {save:.3g~P}, {-slack:.3g~P} more than the {window:~P} left"
    else:
        feasible, reason = True, f"state saved with {slack:.3g~P} to spare"
    return SpotTermination(save_window=window, save_time=save, slack=slack, feasible=feasible, reason=reason)


@dataclass(frozen=True, repr=False)
class SpotSavings(Result):
    """Spot economics: productive fraction, effective price per useful GPU-hour, and savings."""

    productive_fraction: float
    useful_gpu_hours: Time
    spot_cost: Money
    on_demand_equivalent_cost: Money
    savings: Money
    savings_fraction: float
    effective_price: MoneyRate


@checked(
    on_demand_price=one("positive"),
    spot_gpu_hours=one("positive"),
    spot_price=one(),
    interruption_rate=one(),
    lost_time_per_interruption=one(),
    retry_fraction=one(),
    reserve_gpu_hours=one(),
)
def spot_savings(
    on_demand_price: MoneyRate,
    spot_price: MoneyRate,
    spot_gpu_hours: Time,
    interruption_rate: Rate,
    lost_time_per_interruption: Time,
    retry_fraction: Number = 0.0,
    reserve_gpu_hours: Time = _ZERO_HOURS,
) -> SpotSavings:
    r"""Savings of running work on spot capacity after interruptions, retries and reserve are paid.

    Parameters
    ----------
    on_demand_price : Quantity [currency / time]
        On-demand price per GPU-hour.
    spot_price : Quantity [currency / time]
        Spot price per GPU-hour.
    spot_gpu_hours : Quantity [time]
        Provisioned spot GPU-hours.
    interruption_rate : Quantity [1 / time]
        Interruptions per GPU-hour.
    lost_time_per_interruption : Quantity [time]
        Capacity lost per interruption: drain, reroute, KV rebuild and the replacement's cold start.
    retry_fraction : float
        Share of the spot work redone because it was interrupted (retried best-effort requests).
    reserve_gpu_hours : Quantity [time]
        On-demand GPU-hours held in reserve for the spot pool.

    Returns
    -------
    SpotSavings

    Notes
    -----
    .. math:: f = \max(0, 1 - r\,t_{\mathrm{lost}}), \quad
              H_{\mathrm{useful}} = \frac{H_{\mathrm{spot}} f}{1 + q}, \quad
              \text{savings} = H_{\mathrm{useful}} p_{\mathrm{od}} - (H_{\mathrm{spot}} p_{\mathrm{spot}}
              + H_{\mathrm{res}} p_{\mathrm{od}})

    The productive fraction pays for draining, rerouting and rebuilding in-flight KV state (seed
    §10.13.4). Savings depend on provisioned GPU-hours, discounts, retries and reserve capacity, not on the
    traffic share sent to spot (§10.13.4). The chapter gives no spot discount; Table 25's hypothetical
    prices are one scenario.

    Examples
    --------
    Table 25's US-East H100 ($2.50 spot, $4.00 on demand), one interruption per 10 GPU-hours costing 15 min:

    >>> s = spot_savings(Q_(4.0, "USD/hour"), Q_(2.5, "USD/hour"), Q_(1000, "hour"), Q_(0.1, "1/hour"),
    ...                  Q_(15, "min"), retry_fraction=0.02)
    >>> round(s.productive_fraction, 3), round(s.savings_fraction, 3)
    (0.975, 0.346)
    """
    # Prices are per hour (MoneyRate), times in seconds: work in hours.
    spot_hours, reserve_hours = float(spot_gpu_hours) / 3600, float(reserve_gpu_hours) / 3600
    productive = max(0.0, 1 - float(interruption_rate * lost_time_per_interruption))
    useful = spot_hours * productive / (1 + float(retry_fraction))
    cost = spot_hours * float(spot_price) + reserve_hours * float(on_demand_price)
    equivalent = useful * float(on_demand_price)
    savings = equivalent - cost
    return SpotSavings(
        productive_fraction=productive,
        useful_gpu_hours=Q_(useful, "hour"),
        spot_cost=Q_(cost, "USD"),
        on_demand_equivalent_cost=Q_(equivalent, "USD"),
        savings=Q_(savings, "USD"),
        savings_fraction=savings / equivalent if equivalent > 0 else -np.inf,
        effective_price=Q_(cost / useful if useful > 0 else np.inf, "USD/hour"),
    )
