"""Capacity: Little's law, replicas and utilization (section 10.6.2), and when to distribute (section 10.2).

The three triggers for distributing inference of Table 1 (memory, latency, throughput) use the
replica count that Little's law and the replica throughput give.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked
from ..errors import InputError, UnitsError
from ..formula import formula, var
from ..results import Result, ceil_count
from ..types import Bytes, Count, Fraction, Rate, Time
from ..units import Q_

__all__ = [
    "DistributionTriggers",
    "distribution_triggers",
    "in_flight",
    "replica_demand",
    "replicas_for_load",
    "utilization",
]


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


@checked(device_memory="positive", demand="positive", peak_throughput="positive", latency_target="positive")
def distribution_triggers(
    memory_required: Bytes | None = None,
    device_memory: Bytes | None = None,
    demand: Rate | None = None,
    peak_throughput: Rate | None = None,
    execution_latency: Time | None = None,
    latency_target: Time | None = None,
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
    memory = throughput = latency = None
    replicas = None
    pairs = (
        ("memory_required", memory_required, "device_memory", device_memory),
        ("demand", demand, "peak_throughput", peak_throughput),
        ("execution_latency", execution_latency, "latency_target", latency_target),
    )
    for first, one, second, other in pairs:
        if (one is None) != (other is None):
            raise UnitsError(
                f"distribution_triggers(): give '{first}' and '{second}' together, "
                f"got '{second if other is None else first}' = None"
            )
    if memory_required is not None:
        memory = bool(memory_required > device_memory)
    if demand is not None:
        replicas = replicas_for_load(Q_(demand, "request/s"), Q_(peak_throughput, "request/s"))
        throughput = replicas > 1
    if execution_latency is not None:
        latency = bool(execution_latency > latency_target)
    fired = {"memory": memory, "throughput": throughput, "latency": latency}
    strategies = tuple(_TABLE_1[key] for key, value in fired.items() if value)
    return DistributionTriggers(memory, throughput, latency, replicas, strategies)


# --------------------------------------------------------------------------------------------
# Section 10.6.2: Little's law, replicas, utilization


@formula(
    result=var("request", "Q", "nonnegative", "mean requests in the system"),
    reference="Theorem 10.1 (Little's law), section 10.6.2",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate"),
    time_in_system=var(
        "s", "W", "nonnegative", "mean time a request spends in the system (inf: unstable)", infinite=True
    ),
    example={"arrival_rate": "1000 request/s", "time_in_system": "100 ms"},
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
    example={"arrival_rate": "1000 request/s", "replica_throughput": "100 request/s", "max_utilization": 0.8},
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


@checked(arrival_rate="positive", replica_throughput="positive")
def replicas_for_load(arrival_rate: Rate, replica_throughput: Rate, max_utilization: Fraction = 1.0) -> Count:
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
    if np.any(np.asarray(max_utilization) == 0):
        raise InputError("replicas_for_load(): argument 'max_utilization' must be > 0, got 0")
    with np.errstate(divide="ignore", over="ignore"):
        demand = replica_demand.numeric(
            arrival_rate=arrival_rate, replica_throughput=replica_throughput, max_utilization=max_utilization
        )
    return ceil_count(demand)


@formula(
    result=var("", r"\rho", "nonnegative", "mean service utilization"),
    reference="Theorem 10.1 application, section 10.6.2",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate"),
    replica_throughput=var("request/s", r"\mu", "positive", "service rate of one replica"),
    replicas=var("", "N", "positive_integer", "replicas"),
    example={"arrival_rate": "1000 request/s", "replica_throughput": "100 request/s", "replicas": 13},
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
