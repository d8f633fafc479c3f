"""Routing policies: capacity-weighted and adaptive routing, two choices (section 10.11.4), least connections.

Weighted shares and inverse-latency weights, the power-of-two-choices router of Algorithm 4,
least-connections routing (10.11.5), and a seeded comparison of the policies on one trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked, magnitude, random_seed
from ..errors import InputError
from ..results import Result
from ..types import Count, Fraction, Number, Rate, Time
from ..units import Q_, shown

__all__ = [
    "RoutingShares",
    "routing_shares",
    "inverse_latency_weights",
    "RoutingDecision",
    "route_two_choices",
    "least_connections",
    "SIMULATED_POLICIES",
    "PolicyComparison",
    "compare_routing_policies",
]


# --------------------------------------------------------------------------------------------
# Weighted and adaptive routing (section 10.11.4)


@dataclass(frozen=True, repr=False)
class RoutingShares(Result):
    """Per-server routing share, rate and utilization, with the total rate at which the first server saturates."""

    policy: str
    share: np.ndarray
    rate: Rate
    utilization: np.ndarray
    total_capacity: Rate
    saturation_rate: Rate
    stable: bool


ROUTING_POLICIES = ("weighted", "round_robin")


@checked(capacities="positive")
def routing_shares(
    capacities: Rate,
    arrival_rate: Rate,
    counts: Count | None = None,
    policy: str = "weighted",
    weights: Number | None = None,
) -> RoutingShares:
    r"""Long-run share, rate and utilization of each server under weighted or round-robin routing.

    Parameters
    ----------
    capacities : Quantity [request / time], array
        Capacity (service rate) of each server, or of each server type when ``counts`` is given.
    arrival_rate : Quantity [request / time]
        Total offered rate.
    counts : array of int, optional
        Servers of each type; every row then describes one server of that type.
    policy : {"weighted", "round_robin"}
        ``weighted`` routes in proportion to ``weights`` (default: capacity); ``round_robin`` gives every
        server the same share.
    weights : array of float, optional
        Explicit routing weights per row (overrides the policy's weights).

    Returns
    -------
    RoutingShares
        Per row (one server of each type): ``share`` of the total, ``rate``, ``utilization``; the fleet's
        ``total_capacity``; ``saturation_rate``, the total rate at which the first server reaches
        utilization 1; ``stable`` when every utilization is below 1.

    Notes
    -----
    .. math:: \Pr(i) = \frac{w_i}{\sum_j c_j w_j}, \quad \lambda_i = \lambda \Pr(i), \quad
              \rho_i = \lambda_i / \mu_i

    §10.11.4. With capacity weights every server runs at :math:`\lambda/\sum\mu`; round robin
    saturates the slowest tier first (Example 10.8).

    Examples
    --------
    Example 10.8: 10 H100 at 1,000 QPS and 20 A100 at 600 QPS serving 15,000 QPS.

    >>> fleet = routing_shares(Q_([1000, 600], "request/s"), Q_(15000, "request/s"), counts=[10, 20])
    >>> fleet.utilization.round(3).tolist()
    [0.682, 0.682]
    >>> rr = routing_shares(Q_([1000, 600], "request/s"), Q_(15000, "request/s"), [10, 20], "round_robin")
    >>> rr.utilization.round(3).tolist()
    [0.5, 0.833]
    """
    capacity = np.atleast_1d(np.asarray(capacities, dtype=float))
    if capacity.ndim != 1 or capacity.size == 0:
        raise InputError("routing_shares(): argument 'capacities' must be a non-empty 1-D array")
    if np.ndim(arrival_rate):
        raise InputError(f"routing_shares(): argument 'arrival_rate' must be one number, got {shown(arrival_rate)}")
    rate = float(arrival_rate)
    number = np.ones_like(capacity) if counts is None else np.asarray(counts, dtype=float)
    if number.shape != capacity.shape:
        raise InputError("routing_shares(): argument 'counts' must have one entry per capacity")
    if policy not in ROUTING_POLICIES:
        raise InputError(f"routing_shares(): argument 'policy' must be one of {ROUTING_POLICIES}, got {policy!r}")
    if weights is not None:
        weight = np.asarray(weights, dtype=float)
        if weight.shape != capacity.shape:
            raise InputError("routing_shares(): argument 'weights' must have one entry per capacity")
        if not np.any(weight > 0):
            raise InputError("routing_shares(): argument 'weights' needs at least one positive weight")
    else:
        weight = capacity if policy == "weighted" else np.ones_like(capacity)
    share = weight / np.sum(number * weight)
    utilization = rate * share / capacity
    with np.errstate(divide="ignore"):
        saturation = np.min(np.where(share > 0, capacity / share, np.inf))
    return RoutingShares(
        policy="custom" if weights is not None else policy,
        share=share,
        rate=Q_(rate * share, "request/s"),
        utilization=utilization,
        total_capacity=Q_(float(np.sum(number * capacity)), "request/s"),
        saturation_rate=Q_(float(saturation), "request/s"),
        stable=bool(np.all(utilization < 1)),
    )


@checked(latencies="positive")
def inverse_latency_weights(
    latencies: Time, smoothing: Fraction = 1.0, previous: Time | None = None
) -> tuple[Time, np.ndarray]:
    r"""Adaptive routing weights from an exponential moving average of observed latency.

    Parameters
    ----------
    latencies : Quantity [time], array
        Latest observed latency per server.
    smoothing : float
        EMA weight of the new observation, in (0, 1] (the chapter gives no value).
    previous : Quantity [time], array, optional
        The previous moving averages; omitted on the first update.

    Returns
    -------
    (Quantity [time] array, array of float)
        The updated moving averages and the normalized weights (summing to 1).

    Notes
    -----
    .. math:: \bar L_i \leftarrow a L_i + (1 - a)\bar L_i, \qquad w_i = \frac{1/\bar L_i}{\sum_j 1/\bar L_j}

    §10.11.4: the signal mixes server condition with request cost, and lagging averages can
    oscillate; evaluate against comparable request classes.

    Examples
    --------
    >>> average, weights = inverse_latency_weights(Q_([50, 100], "ms"))
    >>> weights.round(3).tolist()
    [0.667, 0.333]
    """
    observed = np.atleast_1d(latencies).astype(float)
    if np.any(np.asarray(smoothing) <= 0):
        raise InputError("inverse_latency_weights(): argument 'smoothing' must be in (0, 1]")
    if previous is None:
        average = observed
    else:
        prior = np.atleast_1d(previous).astype(float)
        if prior.shape != observed.shape:
            raise InputError("inverse_latency_weights(): argument 'previous' must match 'latencies'")
        average = smoothing * observed + (1 - smoothing) * prior
    inverse = 1 / average
    return Q_(average, "s").to("ms"), inverse / inverse.sum()


@dataclass(frozen=True, repr=False)
class RoutingDecision(Result):
    """Outcome of one routing attempt loop: the admitting replica or an overload rejection."""

    replica: int | None
    attempts: int
    reason: str


@checked(work="unchecked", capacity_weights="unchecked")
def route_two_choices(
    work: Number,
    capacity_weights: Number,
    incremental_work: Number,
    rng: np.random.Generator,
    admit: Callable[[int], bool] | None = None,
    attempts: Count = 2,
    affinity: Any = None,
) -> RoutingDecision:
    r"""Algorithm 4: route a request to the less loaded of two capacity-weighted probes.

    Parameters
    ----------
    work : array of float
        Current work signal :math:`W_s` per eligible replica (queue length, active tokens, predicted
        work or KV occupancy, in one unit).
    capacity_weights : array of float
        Positive capacity weights :math:`w_s`; probes are sampled in proportion to them.
    incremental_work : float
        Estimated work of this request :math:`\hat c(r)`, in the unit of ``work``.
    rng : numpy.random.Generator
        Source of randomness (seed it for reproducible routing).
    admit : callable, optional
        ``admit(replica) -> bool``: the replica's atomic admit-and-reserve. Defaults to always admit.
    attempts : int
        Finite attempt budget.
    affinity : array of bool, optional
        Replicas holding reusable state for this request; they win ties.

    Returns
    -------
    RoutingDecision
        The replica index, or ``None`` with the reason (empty set or attempt budget exhausted).

    Notes
    -----
    .. math:: u_s = (W_s + \hat c(r)) / w_s

    §10.11.3: two probes sampled with replacement, post-admission normalized load compared,
    ties broken by cache affinity, admission atomic at the destination.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> route_two_choices([5, 0, 9], [1, 1, 1], 1, rng).reason
    'admitted'
    """
    # An empty replica set is allowed (Algorithm 4 rejects the request), which `checked` refuses: checked here.
    load = np.atleast_1d(magnitude("route_two_choices", "work", work, "", "nonnegative"))
    weight = np.atleast_1d(magnitude("route_two_choices", "capacity_weights", capacity_weights, "", "positive"))
    if np.ndim(attempts):
        raise InputError(f"route_two_choices(): argument 'attempts' must be one number, got {shown(attempts)}")
    budget = int(attempts)
    if load.size == 0:
        return RoutingDecision(replica=None, attempts=0, reason="no eligible replica: overload rejection")
    if weight.shape != load.shape:
        raise InputError("route_two_choices(): 'capacity_weights' must have one entry per replica")
    preferred = np.zeros(load.shape, bool) if affinity is None else np.asarray(affinity, dtype=bool)
    for attempt in range(1, budget + 1):
        pair = rng.choice(load.size, size=2, replace=True, p=weight / weight.sum())
        normalized = (load[pair] + incremental_work) / weight[pair]
        order = np.lexsort((~preferred[pair], normalized))
        chosen = int(pair[order[0]])
        if admit is None or admit(chosen):
            return RoutingDecision(replica=chosen, attempts=attempt, reason="admitted")
    return RoutingDecision(replica=None, attempts=budget, reason="attempt budget exhausted: overload rejection")


# --------------------------------------------------------------------------------------------
# Least connections and the simulated policies (section 10.11.5)


@checked(active="nonnegative_integer")
def least_connections(active: Count, probes: Count | None = None, rng: np.random.Generator | None = None) -> int:
    """Least-connections routing (section 10.11.5): the replica with the fewest active requests.

    Parameters
    ----------
    active : array of int
        Active requests per replica (incremented on dispatch, decremented on completion).
    probes : int, optional
        Sampled least-connections: probe this many replicas at random (with replacement) and take the
        least loaded of them; ``None`` inspects every replica.
    rng : numpy.random.Generator, optional
        Needed when ``probes`` is given.

    Returns
    -------
    int
        Index of the chosen replica (ties: the lowest index among the least loaded).

    Notes
    -----
    The count is a proxy for work: two in-flight requests can differ fiftyfold in remaining decode
    work (a 10-token reply against a 500-token essay, §10.11.5), which
    :func:`compare_routing_policies` measures against routing on remaining tokens.

    Examples
    --------
    >>> least_connections([3, 1, 2])
    1
    """
    counts = np.atleast_1d(active)
    if counts.ndim != 1 or counts.size == 0:
        raise InputError(
            f"least_connections(): argument 'active' must be a non-empty list of counts, got {shown(active)}"
        )
    if probes is None:
        return int(np.argmin(counts))
    if rng is None:
        raise InputError("least_connections(): sampled routing (probes=...) needs rng=np.random.default_rng(seed)")
    if np.ndim(probes):
        raise InputError(f"least_connections(): argument 'probes' must be one number, got {shown(probes)}")
    sample = rng.integers(0, counts.size, int(probes))
    return int(sample[np.argmin(counts[sample])])


#: The policies :func:`compare_routing_policies` and the serving simulator (:mod:`calculator.simulation`) run.
SIMULATED_POLICIES = ("round_robin", "random", "two_choices", "least_connections", "least_work")


def _pick_replica(
    policy: str,
    turn: int,
    replicas: int,
    rng: np.random.Generator,
    active: Callable[[int], float],
    work: Callable[[int], float],
) -> int:
    """The replica a simulated router sends the ``turn``-th request to (one of :data:`SIMULATED_POLICIES`).

    ``active(k)`` and ``work(k)`` read replica ``k``'s requests in flight and their remaining tokens
    (read only where the policy needs them: an event loop calls this once per request, so the
    arguments are its own and unchecked). Round robin
    takes the replicas in turn, random one uniformly, least connections and least work the replica
    with the fewest requests or tokens (ties: the lowest index), and two choices the less loaded of
    two drawn at random (with replacement; ties: the first drawn).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> flight, tokens = [3, 1, 2], [10, 500, 40]
    >>> [_pick_replica(p, 4, 3, rng, flight.__getitem__, tokens.__getitem__)
    ...  for p in ("round_robin", "least_connections", "least_work")]
    [1, 1, 0]
    """
    if policy == "round_robin":
        return turn % replicas
    if policy == "random":
        return int(rng.integers(replicas))
    if policy == "least_connections":
        return min(range(replicas), key=active)
    if policy == "least_work":
        return min(range(replicas), key=work)
    first, second = int(rng.integers(replicas)), int(rng.integers(replicas))
    return first if active(first) <= active(second) else second


@dataclass(frozen=True, repr=False)
class PolicyComparison(Result):
    """Latency of each routing policy on the same arrival trace and length mix.

    Attributes
    ----------
    policies : tuple of str
    mean, p99 : Quantity [time], arrays aligned with ``policies``
        Mean and 99th-percentile time in system (queueing for a slot plus decoding).
    max_active : ndarray of int
        The largest number of requests any replica held at once, per policy.
    requests : int
    """

    policies: tuple[str, ...]
    mean: Time
    p99: Time
    max_active: Count
    requests: int


@checked(arrival_rate="positive", step_time="positive")
def compare_routing_policies(
    arrival_rate: Rate,
    output_tokens: Count,
    replicas: Count,
    step_time: Time,
    step_time_per_request: Time,
    *,
    requests: Count = 2000,
    seed: int = 0,
    policies: Iterable[str] = SIMULATED_POLICIES,
) -> PolicyComparison:
    """Simulate routing policies on replicas that decode their active requests in continuous batches.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Poisson arrivals to the whole pool.
    output_tokens : array of int
        Request lengths to draw from (with replacement), for example a heavy-tailed mix of 10 to 2,000.
    replicas : int
        Replicas in the pool.
    step_time, step_time_per_request : Quantity [time]
        A replica's decode step takes ``step_time + n step_time_per_request`` with ``n`` active requests;
        each step advances every active request by one token (section 10.6.2's ``T(B) = T_0 + B t``).
    requests : int
        Arrivals simulated (seeded).
    seed : int
    policies : iterable of str
        Any of :data:`SIMULATED_POLICIES`: round robin, uniform random, two random choices on active
        counts, least connections, and least remaining work (active tokens).

    Returns
    -------
    PolicyComparison

    Notes
    -----
    Section 10.11.5: which policy meets a tail target is an empirical question,
    evaluated with the same arrival trace, request-length mix and replica capacities. Every policy
    here sees the same arrivals and lengths. Counting connections ignores how much work each one
    carries; routing on remaining tokens sees it, which matters most when lengths vary widely.

    Examples
    --------
    >>> r = compare_routing_policies(Q_(40, "request/s"), [10, 500], 4, Q_(10, "ms"), Q_(1, "ms"),
    ...                              requests=400, seed=1)
    >>> r.policies[0], bool(r.mean[3] <= r.mean[1])
    ('round_robin', True)
    """
    name = "compare_routing_policies"
    for argument, value in (
        ("arrival_rate", arrival_rate),
        ("replicas", replicas),
        ("step_time", step_time),
        ("step_time_per_request", step_time_per_request),
        ("requests", requests),
    ):
        if np.ndim(value):
            raise InputError(f"{name}(): argument '{argument}' must be one number, got {shown(value)}")
    lengths = np.atleast_1d(output_tokens)
    if lengths.ndim != 1 or lengths.size == 0:
        raise InputError(
            f"{name}(): argument 'output_tokens' must be a non-empty list of numbers, got {shown(output_tokens)}"
        )
    if np.any(lengths > 10**7):
        raise InputError(f"{name}(): argument 'output_tokens' must be at most 10,000,000 tokens")
    for argument, value, most in (("replicas", replicas, 10_000), ("requests", requests, 1_000_000)):
        if value > most:
            raise InputError(f"{name}(): argument '{argument}' must be at most {most:,}, got {value:,.0f}")
    rate, base, per_request = float(arrival_rate), float(step_time), float(step_time_per_request)
    chosen = tuple(policies)
    unknown = sorted(set(chosen) - set(SIMULATED_POLICIES))
    if unknown or not chosen:
        raise InputError(
            f"{name}(): argument 'policies' must name some of {SIMULATED_POLICIES}, got {unknown or chosen}"
        )
    seed = random_seed(name, "seed", seed)
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, int(requests)))
    sizes = rng.choice(np.atleast_1d(lengths), int(requests))  # one length, or a sample of lengths
    means, tails, peaks = [], [], []
    for policy in chosen:
        latency, peak = _route_and_decode(policy, arrivals, sizes, int(replicas), base, per_request, seed)
        means.append(latency.mean())
        tails.append(np.quantile(latency, 0.99))
        peaks.append(peak)
    return PolicyComparison(chosen, Q_(np.array(means), "s"), Q_(np.array(tails), "s"), np.array(peaks), int(requests))


def _route_and_decode(
    policy: str, arrivals: np.ndarray, sizes: np.ndarray, replicas: int, base: float, per_request: float, seed: int
) -> tuple[np.ndarray, int]:
    """Event loop: advance every replica's decode steps to each arrival, route it, finish the rest."""
    rng = np.random.default_rng(seed + 1)
    clock = np.zeros(replicas)
    remaining: list[list[float]] = [[] for _ in range(replicas)]
    owner: list[list[int]] = [[] for _ in range(replicas)]
    done = np.zeros(arrivals.size)
    peak = 0

    def advance(replica: int, until: float) -> None:
        while remaining[replica]:
            step = base + per_request * len(remaining[replica])
            if clock[replica] + step > until:
                return
            clock[replica] += step
            left = [r - 1 for r in remaining[replica]]
            keep = [i for i, r in enumerate(left) if r > 0]
            for i, r in enumerate(left):
                if r <= 0:
                    done[owner[replica][i]] = clock[replica]
            remaining[replica] = [left[i] for i in keep]
            owner[replica] = [owner[replica][i] for i in keep]
        clock[replica] = max(clock[replica], until)

    for index, (time, size) in enumerate(zip(arrivals, sizes, strict=True)):
        for replica in range(replicas):
            advance(replica, time)
        target = _pick_replica(policy, index, replicas, rng, lambda k: len(remaining[k]), lambda k: sum(remaining[k]))
        remaining[target].append(float(size))
        owner[target].append(index)
        peak = max(peak, len(remaining[target]))
    for replica in range(replicas):
        advance(replica, np.inf)
    return done - arrivals, peak
