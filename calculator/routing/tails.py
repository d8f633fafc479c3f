"""Load balancing and request routing (section 10.11).

Fan-out tails and their per-leaf budget, balls-into-bins maximum load for random and d-choice
placement (closed form and seeded simulation), capacity-weighted routing, the power-of-two-choices
router of Algorithm 4, a consistent-hash ring with virtual nodes, the KV-migration
transfer-or-rebuild decision, a circuit breaker driven by a request trace, and retry amplification
under overload.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError, UnitsError
from ..formula import check_domain, formula, var
from ..phases import kv_handoff_time
from ..results import Result
from ..units import Q_, check_units, ureg

__all__ = [
    "tail_event_rate",
    "fanout_slow_probability",
    "per_leaf_budget",
    "probe_hit_probability",
    "max_load_order",
    "expected_max_load",
    "MaxLoadSimulation",
    "simulate_max_load",
    "RoutingShares",
    "routing_shares",
    "inverse_latency_weights",
    "RoutingDecision",
    "route_two_choices",
    "least_connections",
    "SIMULATED_POLICIES",
    "PolicyComparison",
    "compare_routing_policies",
    "remap_fraction_on_add",
    "remap_fraction_on_remove",
    "ConsistentHashRing",
    "remapped_fraction",
    "KvMigration",
    "kv_migration",
    "CircuitBreakerConfig",
    "CircuitBreaker",
    "BreakerTrace",
    "simulate_circuit_breaker",
    "retry_amplification",
    "RetryEquilibrium",
    "retry_equilibrium",
    "wasted_token_fraction",
]

_ZERO_SECONDS = Q_(0.0, "s")
_DEFAULT_OPEN_INTERVAL = Q_(30, "s")


# --------------------------------------------------------------------------------------------
# Fan-out tails (section 10.11.1)


@formula(
    result=var("1/s", r"\dot{n}_{\mathrm{tail}}", "nonnegative", "expected tail events per second"),
    reference="Lighthouse 10.2 (§10.11)",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "request rate"),
    event_probability=var("1/request", "p", "probability", "probability a request is a tail event"),
)
def tail_event_rate(arrival_rate, event_probability):
    r"""Expected rate of tail events: request rate times the per-request event probability.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Requests per second.
    event_probability : Quantity [1 / request]
        Probability that one request is a tail event (write ``Q_(1e-4, "1/request")``).

    Returns
    -------
    Quantity [1 / time]

    Notes
    -----
    .. math:: \dot n_{\mathrm{tail}} = \lambda p

    Examples
    --------
    Lighthouse 10.2: 10^7 QPS at 10^-4 "implies an expected 1,000 such events per second".

    >>> tail_event_rate(Q_(1e7, "request/s"), Q_(1e-4, "1/request"))
    <Quantity(1000.0, '1 / second')>
    """
    return arrival_rate * event_probability


@formula(
    result=var("", "P", "probability", "probability the request exceeds the threshold"),
    reference="section 10.11.1",
    leaf_probability=var("", "p", "probability", "probability one leaf exceeds its threshold"),
    fanout=var("", "N", "positive_integer", "leaves the request waits for"),
)
def fanout_slow_probability(leaf_probability, fanout):
    r"""Probability that a fan-out request is slow: at least one of its ``fanout`` leaves is slow.

    Parameters
    ----------
    leaf_probability : float
        Probability that one leaf exceeds its latency threshold (0.01 for a leaf at its p99).
    fanout : int
        Leaves the request must wait for.

    Returns
    -------
    float

    Notes
    -----
    .. math:: P = 1 - (1 - p)^N

    A series system: the request completes only when its slowest leaf returns (§10.11.1). Leaves are
    assumed independent, which is optimistic: a shared switch, host or hot key slows many together
    (§10.11.1). Broadcasts over arrays.

    Examples
    --------
    100 shards each at their p99 (§10.11.1: "misses that threshold about 63 percent of the time"):

    >>> round(fanout_slow_probability(0.01, 100), 2)
    0.63
    """
    return 1 - (1 - leaf_probability) ** fanout


@formula(
    result=var("", "p", "probability", "allowed per-leaf probability of exceeding the threshold"),
    reference="section 10.11.1",
    request_probability=var("", "P", "probability", "allowed probability the request exceeds the threshold"),
    fanout=var("", "N", "positive_integer", "leaves the request waits for"),
)
def per_leaf_budget(request_probability, fanout):
    r"""The per-leaf tail budget that keeps a fan-out request within its own tail target.

    Parameters
    ----------
    request_probability : float
        Allowed probability that the whole request exceeds the threshold (0.01 for a p99 target).
    fanout : int
        Leaves per request.

    Returns
    -------
    float

    Notes
    -----
    .. math:: p = 1 - (1 - P)^{1/N} \approx P / N

    The inverse of :func:`fanout_slow_probability` (§10.11.1: the leaf target "moves from p99 to
    roughly p99.99" for 100 leaves).

    Examples
    --------
    >>> round(per_leaf_budget(0.01, 100), 7)
    0.0001005
    """
    return 1 - (1 - request_probability) ** (1 / fanout)


def probe_hit_probability(hot_bins: Any, bins: Any, probes: int = 2) -> Any:
    r"""Probability that every one of ``probes`` uniform probes lands in the hot set of bins.

    Parameters
    ----------
    hot_bins : int
        Bins with occupancy at least the threshold.
    bins : int
        All bins (replicas).
    probes : int
        Independent uniform probes (1 for random routing, 2 for two choices).

    Returns
    -------
    float

    Notes
    -----
    .. math:: P = (H / R)^d

    §10.11.3: two probes suppress repeated unlucky placement because both must hit the hot set.

    Examples
    --------
    >>> probe_hit_probability(100, 1000, 1), probe_hit_probability(100, 1000, 2)
    (0.1, 0.01)
    """
    check_domain("probe_hit_probability", "hot_bins", hot_bins, "nonnegative")
    check_domain("probe_hit_probability", "bins", bins, "positive_integer")
    check_domain("probe_hit_probability", "probes", probes, "positive_integer")
    if np.any(np.asarray(hot_bins) > np.asarray(bins)):
        raise InputError(f"probe_hit_probability(): argument 'hot_bins' ({hot_bins}) exceeds bins ({bins})")
    probability = np.round((np.asarray(hot_bins) / np.asarray(bins)) ** probes, 15)
    return float(probability) if np.ndim(probability) == 0 else probability


# --------------------------------------------------------------------------------------------
# Balls into bins (eq. 14-15, Theorem 10.2)


def max_load_order(bins: Any, choices: int = 1) -> Any:
    r"""The leading-order maximum load of ``bins`` balls in ``bins`` bins (eq. 14 and 15).

    Parameters
    ----------
    bins : int
        Bins (replicas), also the number of balls; at least 3 so that :math:`\ln \ln R > 0`.
    choices : int
        1 for uniform random placement, :math:`d \ge 2` for the less loaded of :math:`d` probes.

    Returns
    -------
    float

    Notes
    -----
    .. math:: \frac{\ln R}{\ln \ln R}\ (d = 1), \qquad \frac{\ln \ln R}{\ln d}\ (d \ge 2)

    Eq. 14 and 15 give only the order, :math:`\Theta(\log R/\log\log R)` and
    :math:`\Theta(\log\log R)`; the constants here are the classical leading terms (Azar et al.),
    accurate only asymptotically. For a finite fleet use :func:`expected_max_load` or
    :func:`simulate_max_load`; neither predicts a serving queue (§10.11.2, §10.11.3).

    Examples
    --------
    >>> round(max_load_order(1000), 2), round(max_load_order(1000, 2), 2)
    (3.57, 2.79)
    """
    check_domain("max_load_order", "bins", bins, "positive_integer")
    check_domain("max_load_order", "choices", choices, "positive_integer")
    if np.any(np.asarray(bins) < 3):
        raise InputError(f"max_load_order(): argument 'bins' must be >= 3 (ln ln R > 0), got {bins}")
    log = np.log(np.asarray(bins, dtype=float))
    order = log / np.log(log) if choices == 1 else np.log(log) / np.log(choices)
    return float(order) if np.ndim(order) == 0 else order


def _occupancy_tails(load: float, choices: int, levels: int = 64, steps: int = 4000) -> np.ndarray:
    """Fluid-limit fraction of bins with at least i balls after ``load`` balls per bin (i = 1..levels)."""
    tails = np.zeros(levels + 1)
    tails[0] = 1.0

    def slope(s: np.ndarray) -> np.ndarray:
        powered = s**choices
        out = np.zeros_like(s)
        out[1:] = powered[:-1] - powered[1:]
        return out

    dt = load / steps
    for _ in range(steps):  # classical RK4 on ds_i/dt = s_{i-1}^d - s_i^d
        k1 = slope(tails)
        k2 = slope(tails + dt / 2 * k1)
        k3 = slope(tails + dt / 2 * k2)
        k4 = slope(tails + dt * k3)
        tails = np.clip(tails + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), 0.0, 1.0)
    return tails[1:]


def expected_max_load(bins: int, balls: int | None = None, choices: int = 1) -> float:
    r"""Expected maximum bin load of sequential balls-into-bins, from the fluid limit.

    Parameters
    ----------
    bins : int
        Bins (replicas).
    balls : int, optional
        Balls (equal-size jobs) placed without departures; defaults to ``bins`` (the chapter's model).
    choices : int
        Probes per ball; each ball joins the least loaded of ``choices`` uniform probes.

    Returns
    -------
    float

    Notes
    -----
    The fraction :math:`s_i` of bins holding at least :math:`i` balls follows
    :math:`ds_i/dt = s_{i-1}^d - s_i^d` as balls arrive (Mitzenmacher 2001), integrated to
    :math:`t = m/n`. For :math:`d = 1` this is the Poisson tail. Treating bins as independent,

    .. math:: \mathbb{E}[\max] \approx \sum_{i \ge 1} \left(1 - (1 - s_i)^n\right).

    Within a few percent of :func:`simulate_max_load` for hundreds of bins or more; the static
    model has no departures, service or heterogeneity, so it does not predict queues (§10.11.2).

    Examples
    --------
    >>> round(expected_max_load(1000), 1), round(expected_max_load(1000, choices=2), 1)
    (5.5, 3.0)
    """
    count = int(_check_int("expected_max_load", "bins", bins))
    total = count if balls is None else int(_check_int("expected_max_load", "balls", balls))
    d = int(_check_int("expected_max_load", "choices", choices))
    tails = _occupancy_tails(total / count, d)
    return float(np.sum(1 - (1 - tails) ** count))


def _check_int(function: str, argument: str, value: Any) -> Any:
    check_domain(function, argument, value, "positive_integer")
    return value


@dataclass(frozen=True, repr=False)
class MaxLoadSimulation(Result):
    """Maximum bin load over seeded trials: mean, standard error and every trial's maximum."""

    bins: int
    balls: int
    choices: int
    mean: float
    standard_error: float
    maxima: np.ndarray = field(repr=False)


def simulate_max_load(
    bins: int, balls: int | None = None, choices: int = 1, trials: int = 200, seed: int = 0
) -> MaxLoadSimulation:
    """Simulate sequential balls-into-bins with ``choices`` uniform probes per ball (ties: first probe).

    Parameters
    ----------
    bins : int
        Bins.
    balls : int, optional
        Balls; defaults to ``bins``.
    choices : int
        Probes per ball (1 = random placement, 2 = power of two choices).
    trials : int
        Independent repetitions (vectorized).
    seed : int
        Random seed.

    Returns
    -------
    MaxLoadSimulation

    Examples
    --------
    >>> sim = simulate_max_load(1000, choices=2, trials=50)
    >>> 2 <= sim.mean <= 4
    True
    """
    count = int(_check_int("simulate_max_load", "bins", bins))
    total = count if balls is None else int(_check_int("simulate_max_load", "balls", balls))
    d = int(_check_int("simulate_max_load", "choices", choices))
    runs = int(_check_int("simulate_max_load", "trials", trials))
    rng = np.random.default_rng(seed)
    if d == 1:
        picks = rng.integers(0, count, size=(runs, total)) + count * np.arange(runs)[:, None]
        loads = np.bincount(picks.ravel(), minlength=runs * count).reshape(runs, count)
    else:
        loads = np.zeros((runs, count), dtype=np.int64)
        rows = np.arange(runs)
        probes = rng.integers(0, count, size=(total, runs, d))
        for candidates in probes:  # balls are sequential: each sees the loads left by the previous ones
            best = candidates[rows, np.argmin(loads[rows[:, None], candidates], axis=1)]
            loads[rows, best] += 1
    maxima = loads.max(axis=1)
    return MaxLoadSimulation(
        bins=count,
        balls=total,
        choices=d,
        mean=float(maxima.mean()),
        standard_error=float(maxima.std(ddof=1) / np.sqrt(runs)) if runs > 1 else float("nan"),
        maxima=maxima,
    )


# --------------------------------------------------------------------------------------------
# Weighted and adaptive routing (section 10.11.4)


@dataclass(frozen=True, repr=False)
class RoutingShares(Result):
    """Per-server routing share, rate and utilization, with the total rate at which the first server saturates."""

    policy: str
    share: np.ndarray
    rate: Any
    utilization: np.ndarray
    total_capacity: Any
    saturation_rate: Any
    stable: bool


ROUTING_POLICIES = ("weighted", "round_robin")


@check_units(capacities="request/s", arrival_rate="request/s")
def routing_shares(
    capacities: Any, arrival_rate: Any, counts: Any = None, policy: str = "weighted", weights: Any = None
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
    capacity = np.atleast_1d(np.asarray(capacities.m_as("request/s"), dtype=float))
    if capacity.ndim != 1 or capacity.size == 0:
        raise InputError("routing_shares(): argument 'capacities' must be a non-empty 1-D array")
    check_domain("routing_shares", "capacities", capacity, "positive")
    rate = float(arrival_rate.m_as("request/s"))
    check_domain("routing_shares", "arrival_rate", rate, "nonnegative")
    number = np.ones_like(capacity) if counts is None else np.asarray(counts, dtype=float)
    if number.shape != capacity.shape:
        raise InputError("routing_shares(): argument 'counts' must have one entry per capacity")
    check_domain("routing_shares", "counts", number, "positive_integer")
    if policy not in ROUTING_POLICIES:
        raise InputError(f"routing_shares(): argument 'policy' must be one of {ROUTING_POLICIES}, got {policy!r}")
    if weights is not None:
        weight = np.asarray(weights, dtype=float)
        if weight.shape != capacity.shape:
            raise InputError("routing_shares(): argument 'weights' must have one entry per capacity")
        check_domain("routing_shares", "weights", weight, "nonnegative")
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


@check_units(latencies="s", previous="s")
def inverse_latency_weights(latencies: Any, smoothing: float = 1.0, previous: Any = None) -> tuple[Any, np.ndarray]:
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
    observed = np.atleast_1d(latencies.m_as("s")).astype(float)
    check_domain("inverse_latency_weights", "latencies", observed, "positive")
    check_domain("inverse_latency_weights", "smoothing", smoothing, "probability")
    if smoothing <= 0:
        raise InputError("inverse_latency_weights(): argument 'smoothing' must be in (0, 1]")
    if previous is None:
        average = observed
    else:
        prior = np.atleast_1d(previous.m_as("s")).astype(float)
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


def route_two_choices(
    work: Any,
    capacity_weights: Any,
    incremental_work: float,
    rng: np.random.Generator,
    admit: Callable[[int], bool] | None = None,
    attempts: int = 2,
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
    load = np.asarray(work, dtype=float)
    weight = np.asarray(capacity_weights, dtype=float)
    budget = int(_check_int("route_two_choices", "attempts", attempts))
    if load.size == 0:
        return RoutingDecision(replica=None, attempts=0, reason="no eligible replica: overload rejection")
    if weight.shape != load.shape:
        raise InputError("route_two_choices(): 'capacity_weights' must have one entry per replica")
    check_domain("route_two_choices", "work", load, "nonnegative")
    check_domain("route_two_choices", "capacity_weights", weight, "positive")
    check_domain("route_two_choices", "incremental_work", incremental_work, "nonnegative")
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
# Consistent hashing (section 10.11.6)


def least_connections(active: Any, probes: int | None = None, rng: np.random.Generator | None = None) -> int:
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
    counts = np.asarray(active, dtype=float)
    if counts.ndim != 1 or counts.size == 0:
        raise InputError(f"least_connections(): argument 'active' must be a non-empty list of counts, got {active!r}")
    check_domain("least_connections", "active", counts, "nonnegative")
    if probes is None:
        return int(np.argmin(counts))
    if rng is None:
        raise InputError("least_connections(): sampled routing (probes=...) needs rng=np.random.default_rng(seed)")
    check_domain("least_connections", "probes", probes, "positive_integer")
    sample = rng.integers(0, counts.size, int(probes))
    return int(sample[np.argmin(counts[sample])])


#: The policies :func:`compare_routing_policies` simulates.
SIMULATED_POLICIES = ("round_robin", "random", "two_choices", "least_connections", "least_work")


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
    mean: Any
    p99: Any
    max_active: Any
    requests: int


@check_units(arrival_rate="request/s", step_time="s", step_time_per_request="s")
def compare_routing_policies(
    arrival_rate: Any,
    output_tokens: Any,
    replicas: int,
    step_time: Any,
    step_time_per_request: Any,
    *,
    requests: int = 2000,
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
    rate = float(arrival_rate.m_as("request/s"))
    check_domain(name, "arrival_rate", rate, "positive")
    lengths = np.asarray(output_tokens, dtype=float)
    check_domain(name, "output_tokens", lengths, "positive_integer")
    check_domain(name, "replicas", replicas, "positive_integer")
    check_domain(name, "requests", requests, "positive_integer")
    base, per_request = float(step_time.m_as("s")), float(step_time_per_request.m_as("s"))
    check_domain(name, "step_time", base, "positive")
    check_domain(name, "step_time_per_request", per_request, "nonnegative")
    chosen = tuple(policies)
    unknown = sorted(set(chosen) - set(SIMULATED_POLICIES))
    if unknown or not chosen:
        raise InputError(
            f"{name}(): argument 'policies' must name some of {SIMULATED_POLICIES}, got {unknown or chosen}"
        )
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, int(requests)))
    sizes = rng.choice(lengths, int(requests))
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
        active = np.array([len(r) for r in remaining], dtype=float)
        if policy == "round_robin":
            target = index % replicas
        elif policy == "random":
            target = int(rng.integers(replicas))
        elif policy == "two_choices":
            target = least_connections(active, probes=2, rng=rng)
        elif policy == "least_connections":
            target = least_connections(active)
        else:  # least_work: fewest remaining tokens
            target = int(np.argmin([sum(r) for r in remaining]))
        remaining[target].append(float(size))
        owner[target].append(index)
        peak = max(peak, len(remaining[target]))
    for replica in range(replicas):
        advance(replica, np.inf)
    return done - arrivals, peak


@formula(
    result=var("", "f", "probability", "expected fraction of keys that move"),
    reference="section 10.11.6",
    servers=var("", "N", "positive_integer", "servers on the ring before the change"),
)
def remap_fraction_on_add(servers):
    r"""Expected fraction of keys that move when one server joins a balanced ring of ``servers``.

    Parameters
    ----------
    servers : int
        Servers before the change.

    Returns
    -------
    float

    Notes
    -----
    .. math:: f = \frac{1}{N + 1}

    With balanced equal-capacity assignments and uniform keys (§10.11.6). Virtual nodes bring a
    real ring close to it; see :class:`ConsistentHashRing`.

    Examples
    --------
    >>> round(remap_fraction_on_add(10), 4)
    0.0909
    """
    return 1 / (servers + 1)


@formula(
    result=var("", "f", "probability", "expected fraction of keys that move"),
    reference="section 10.11.6",
    servers=var("", "N", "positive_integer", "servers on the ring before the change"),
)
def remap_fraction_on_remove(servers):
    r"""Expected fraction of keys that move when one of ``servers`` leaves a balanced ring.

    Parameters
    ----------
    servers : int
        Servers before the change.

    Returns
    -------
    float

    Notes
    -----
    .. math:: f = \frac{1}{N}

    Examples
    --------
    >>> remap_fraction_on_remove(10)
    0.1
    """
    return 1 / servers


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def _mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a fast, well-mixed 64-bit hash of integer keys (vectorized)."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class ConsistentHashRing:
    """A consistent-hash ring with virtual nodes (Karger et al. 1997; §10.11.6).

    Each server is placed at ``virtual_nodes`` pseudo-random points of a 64-bit ring; a key goes to the
    first server point clockwise from the key's hash. The ring is immutable: :meth:`with_server` and
    :meth:`without_server` return new rings, so the keys that move on a membership change can be
    measured with :func:`remapped_fraction`.

    Parameters
    ----------
    servers : iterable of str
        Server names (unique, at least one).
    virtual_nodes : int
        Points per server; more points give more even ranges (the relative spread of a server's share
        falls roughly as one over the square root of the points).
    seed : int
        Salt of the point hashes (blake2b), so different rings are independent.

    Examples
    --------
    >>> ring = ConsistentHashRing([f"s{i}" for i in range(10)], virtual_nodes=200)
    >>> keys = np.arange(100_000)
    >>> round(remapped_fraction(ring, ring.with_server("s10"), keys), 2)  # 1/11 = 0.091 expected
    0.09
    """

    def __init__(self, servers: Iterable[str], virtual_nodes: int = 100, seed: int = 0) -> None:
        names = tuple(str(s) for s in servers)
        if not names:
            raise InputError("ConsistentHashRing(): argument 'servers' must name at least one server")
        if len(set(names)) != len(names):
            raise InputError("ConsistentHashRing(): argument 'servers' has duplicate names")
        self.servers = names
        self.virtual_nodes = int(_check_int("ConsistentHashRing", "virtual_nodes", virtual_nodes))
        self.seed = int(seed)
        points = np.array(
            [_hash64(f"{self.seed}:{name}#{i}") for name in names for i in range(self.virtual_nodes)],
            dtype=np.uint64,
        )
        owners = np.repeat(np.arange(len(names)), self.virtual_nodes)
        order = np.argsort(points, kind="stable")
        self._points = points[order]
        self._owners = owners[order]

    def __repr__(self) -> str:
        return f"<ConsistentHashRing {len(self.servers)} servers x {self.virtual_nodes} virtual nodes>"

    def key_hashes(self, keys: Any) -> np.ndarray:
        """64-bit ring positions of keys: integers are mixed (vectorized), strings hashed with blake2b."""
        array = np.asarray(keys)
        if array.dtype.kind in "iu":
            return _mix64(array.ravel()).reshape(array.shape)
        return np.array([_hash64(f"key:{k}") for k in array.ravel()], dtype=np.uint64).reshape(array.shape)

    def lookup(self, keys: Any) -> np.ndarray:
        """Server name of each key (the first server point clockwise from the key's hash)."""
        return np.asarray(self.servers, dtype=object)[self.owner_indices(keys)]

    def owner_indices(self, keys: Any) -> np.ndarray:
        """Index into :attr:`servers` of each key's owner."""
        slot = np.searchsorted(self._points, self.key_hashes(keys), side="left")
        return self._owners[slot % self._points.size]

    def load_shares(self, keys: Any) -> dict[str, float]:
        """Fraction of ``keys`` owned by each server."""
        counts = np.bincount(np.ravel(self.owner_indices(keys)), minlength=len(self.servers))
        return dict(zip(self.servers, (counts / counts.sum()).tolist(), strict=True))

    def with_server(self, name: str) -> ConsistentHashRing:
        """A new ring with one more server."""
        if name in self.servers:
            raise InputError(f"ConsistentHashRing.with_server(): server {name!r} is already on the ring")
        return ConsistentHashRing((*self.servers, name), self.virtual_nodes, self.seed)

    def without_server(self, name: str) -> ConsistentHashRing:
        """A new ring without ``name``."""
        if name not in self.servers:
            raise InputError(f"ConsistentHashRing.without_server(): server {name!r} is not on the ring")
        if len(self.servers) == 1:
            raise InputError("ConsistentHashRing.without_server(): cannot remove the last server")
        return ConsistentHashRing((s for s in self.servers if s != name), self.virtual_nodes, self.seed)


def remapped_fraction(before: ConsistentHashRing, after: ConsistentHashRing, keys: Any) -> float:
    """Fraction of ``keys`` whose server differs between two rings (measured, not assumed).

    Parameters
    ----------
    before, after : ConsistentHashRing
        The ring before and after a membership change.
    keys : array of int or sequence of str
        Routing keys (session or user ids) to compare.

    Returns
    -------
    float

    Examples
    --------
    >>> ring = ConsistentHashRing(["a", "b", "c", "d"], virtual_nodes=300)
    >>> 0.2 < remapped_fraction(ring, ring.without_server("d"), np.arange(50_000)) < 0.3
    True
    """
    return float(np.mean(before.lookup(keys) != after.lookup(keys)))


# --------------------------------------------------------------------------------------------
# KV-cache migration (section 10.11.8)


@dataclass(frozen=True, repr=False)
class KvMigration(Result):
    """Transfer-or-rebuild comparison for moving one session's KV cache to another shard group."""

    cache_bytes: Any
    bytes_per_device: Any
    shard_transfer_time: Any
    transfer_time: Any
    prefill_flops: Any
    rebuild_time: Any
    decision: str
    reason: str


@check_units(
    kv_bytes_per_token="B/token",
    context_tokens="token",
    peak_throughput="FLOP/s",
    latency="s",
)
def kv_migration(
    kv_bytes_per_token: Any,
    context_tokens: Any,
    parameters: float,
    tensor_parallel: int,
    link: Any,
    peak_throughput: Any,
    utilization: float,
    latency: Any = None,
    concurrent_links: int = 1,
    bandwidth_basis: str = "per_direction",
    source_available: bool = True,
) -> KvMigration:
    r"""Decide between sending a session's KV cache over the network and re-running its prefill.

    Parameters
    ----------
    kv_bytes_per_token : Quantity [information / token]
        KV bytes per token (:func:`calculator.memory.kv_bytes_per_token`).
    context_tokens : Quantity [token]
        Tokens of conversation state.
    parameters : float
        Model parameters (prefill costs about :math:`2P` FLOPs per token).
    tensor_parallel : int
        Devices of the destination group; each holds :math:`1/t` of the cache and runs the prefill.
    link : Quantity [information / time], str or Interconnect
        Network bandwidth of one link (a quantity), or a registry link.
    peak_throughput : Quantity [compute / time]
        Peak dense throughput of one device at the serving precision.
    utilization : float
        Achieved fraction of peak during the rebuild prefill.
    latency : Quantity [time], optional
        Startup latency of a transfer; defaults to the registry link's (zero for a bare bandwidth, as
        the chapter's estimate).
    concurrent_links : int
        Links used in parallel, up to one per device; each carries its devices' shards.
    bandwidth_basis : {"per_direction", "total"}
        Basis for a registry link's bandwidth.
    source_available : bool
        ``False`` after an unrecoverable failure: only rebuild from history is possible (§10.11.8).

    Returns
    -------
    KvMigration
        Cache bytes, bytes per device, one shard's transfer time, the transfer time with the given
        links, prefill FLOPs, rebuild time and the ``decision`` (``"transfer"`` or ``"rebuild"``) with
        its reason.

    Notes
    -----
    .. math:: T_{\mathrm{xfer}} = \alpha + \frac{m_{\mathrm{tok}} N}{\min(k, t)\,\beta}, \qquad
              T_{\mathrm{rebuild}} = \frac{2 P N}{t \, R_{\mathrm{peak}} \, u}

    §10.11.8: transfer if the bandwidth-only estimate beats the prefill time. The transfer is
    eq. 10's handoff (:func:`calculator.phases.kv_handoff_time`). Both grow
    linearly with context in this approximation; long-context attention adds rebuild work it omits,
    and shared bottlenecks, cache conversion and destination queueing can flip the decision.

    Examples
    --------
    The chapter's Llama-3-70B, 4,096 tokens, TP 8, 100 Gb/s, 40 % of a 989 TFLOP/s H100:

    >>> m = kv_migration(Q_(327680, "B/token"), Q_(4096, "token"), 7.1e10, 8, Q_(100, "Gb/s"),
    ...                  Q_(989, "TFLOP/s"), 0.4)
    >>> round(m.transfer_time.m_as("ms")), round(m.rebuild_time.m_as("ms")), m.decision
    (107, 184, 'transfer')
    """
    function = "kv_migration"
    check_domain(function, "kv_bytes_per_token", kv_bytes_per_token.m_as("B/token"), "positive")
    check_domain(function, "context_tokens", context_tokens.m_as("token"), "positive")
    check_domain(function, "parameters", parameters, "positive")
    degree = int(_check_int(function, "tensor_parallel", tensor_parallel))
    links = int(_check_int(function, "concurrent_links", concurrent_links))
    check_domain(function, "peak_throughput", peak_throughput.m_as("FLOP/s"), "positive")
    check_domain(function, "utilization", utilization, "probability")
    if utilization <= 0:
        raise InputError(f"{function}(): argument 'utilization' must be > 0, got {utilization}")
    if isinstance(link, ureg.Quantity):
        if link.dimensionality != Q_(1, "B/s").dimensionality:
            raise UnitsError(f"{function}(): argument 'link' needs a bandwidth (for example GB/s), got {link:~P}")
        bandwidth = link
        alpha = _ZERO_SECONDS if latency is None else latency
    else:
        from ..parallelism import link_bandwidth, resolve_interconnect

        entry = resolve_interconnect(link)
        bandwidth = link_bandwidth(entry, bandwidth_basis)
        alpha = latency if latency is not None else (entry.startup_latency or _ZERO_SECONDS)
    check_domain(function, "link", bandwidth.m_as("B/s"), "positive")
    check_domain(function, "latency", alpha.m_as("s"), "nonnegative")
    cache = (kv_bytes_per_token * context_tokens).to("GB")
    per_device = (cache / degree).to("MB")
    shard = kv_handoff_time(per_device, bandwidth, alpha).to("ms")
    transfer = kv_handoff_time(cache, bandwidth, alpha, min(links, degree)).to("ms")
    flops = Q_(2 * parameters * context_tokens.m_as("token"), "FLOP")
    rebuild = (flops / (degree * peak_throughput * utilization)).to("ms")
    if not source_available:
        decision, reason = "rebuild", "no reachable source or saved copy: rebuild from authoritative history"
    elif transfer < rebuild:
        decision, reason = "transfer", f"transfer {transfer:.3g~P} < rebuild {rebuild:.3g~P}"
    else:
        decision, reason = "rebuild", f"rebuild {rebuild:.3g~P} <= transfer {transfer:.3g~P}"
    return KvMigration(
        cache_bytes=cache,
        bytes_per_device=per_device,
        shard_transfer_time=shard,
        transfer_time=transfer,
        prefill_flops=flops,
        rebuild_time=rebuild,
        decision=decision,
        reason=reason,
    )


# --------------------------------------------------------------------------------------------
# Circuit breaker (section 10.11.10)


@dataclass(frozen=True)
class CircuitBreakerConfig:
    """Thresholds of a circuit breaker.

    Attributes
    ----------
    failure_threshold : float
        Share of bad outcomes in the window that opens the breaker.
    window : int
        Most recent admitted requests the share is computed over.
    min_requests : int
        Outcomes needed in the window before the breaker may open.
    latency_threshold : Quantity [time] or None
        An admitted request slower than this counts as bad (timeouts and slow service).
    open_interval : Quantity [time]
        Recovery interval spent open before probing.
    half_open_probes : int
        Probes admitted while half-open; all must succeed to close.
    """

    failure_threshold: float = 0.5
    window: int = 20
    min_requests: int = 10
    latency_threshold: Any = None
    open_interval: Any = _DEFAULT_OPEN_INTERVAL
    half_open_probes: int = 3

    def __post_init__(self) -> None:
        check_domain("CircuitBreakerConfig", "failure_threshold", self.failure_threshold, "probability")
        for name in ("window", "min_requests", "half_open_probes"):
            check_domain("CircuitBreakerConfig", name, getattr(self, name), "positive_integer")
        if self.min_requests > self.window:
            raise InputError("CircuitBreakerConfig(): 'min_requests' cannot exceed 'window'")
        check_domain("CircuitBreakerConfig", "open_interval", Q_(self.open_interval).m_as("s"), "nonnegative")
        if self.latency_threshold is not None:
            check_domain("CircuitBreakerConfig", "latency_threshold", Q_(self.latency_threshold).m_as("s"), "positive")


class CircuitBreaker:
    """The three-state breaker of Figure 19 (closed, open, half-open), driven by request outcomes.

    Closed: every request is admitted; when the share of bad outcomes over the last ``window``
    admitted requests reaches ``failure_threshold`` (with at least ``min_requests`` seen), the breaker
    opens. Open: requests fail fast until ``open_interval`` has passed. Half-open: up to
    ``half_open_probes`` probes are admitted; one bad probe reopens, all good ones close (§10.11.10).

    Examples
    --------
    >>> breaker = CircuitBreaker(CircuitBreakerConfig(window=4, min_requests=2))
    >>> for t in (0.0, 0.1):
    ...     breaker.allow(t) and breaker.record(t, success=False)
    >>> breaker.state
    'open'
    """

    def __init__(self, config: CircuitBreakerConfig | None = None) -> None:
        self.config = config or CircuitBreakerConfig()
        self.state = "closed"
        self.transitions: list[tuple[float, str, str]] = []
        self._outcomes: list[bool] = []
        self._opened_at = -np.inf
        self._probes_sent = 0
        self._probes_passed = 0

    def _move(self, now: float, state: str) -> None:
        self.transitions.append((now, self.state, state))
        self.state = state

    def allow(self, now: float) -> bool:
        """Whether a request arriving at ``now`` (seconds) may be sent to the replica."""
        if self.state == "open" and now >= self._opened_at + Q_(self.config.open_interval).m_as("s"):
            self._move(now, "half_open")
            self._probes_sent = self._probes_passed = 0
        if self.state == "closed":
            return True
        if self.state == "half_open" and self._probes_sent < self.config.half_open_probes:
            self._probes_sent += 1
            return True
        return False

    def record(self, now: float, success: bool, latency: Any = None) -> None:
        """Record the outcome of an admitted request (bad if it failed or exceeded the latency threshold)."""
        threshold = self.config.latency_threshold
        good = bool(success) and not (threshold is not None and latency is not None and Q_(latency) > Q_(threshold))
        if self.state == "half_open":
            if not good:
                self._open(now)
            else:
                self._probes_passed += 1
                if self._probes_passed >= self.config.half_open_probes:
                    self._move(now, "closed")
                    self._outcomes = []
            return
        if self.state != "closed":
            return
        self._outcomes = [*self._outcomes[-(self.config.window - 1) :], good]
        bad = self._outcomes.count(False)
        if len(self._outcomes) >= self.config.min_requests and bad >= self.config.failure_threshold * len(
            self._outcomes
        ):
            self._open(now)

    def _open(self, now: float) -> None:
        self._move(now, "open")
        self._opened_at = now


@dataclass(frozen=True, repr=False)
class BreakerTrace(Result):
    """State seen by each request of a trace, whether it was admitted, and the state transitions."""

    states: np.ndarray
    admitted: np.ndarray
    transitions: tuple[tuple[float, str, str], ...]
    rejected_fraction: float


@check_units(times="s", latencies="s")
def simulate_circuit_breaker(
    times: Any, failures: Any, latencies: Any = None, config: CircuitBreakerConfig | None = None
) -> BreakerTrace:
    """Drive a :class:`CircuitBreaker` with a request trace.

    Parameters
    ----------
    times : Quantity [time], array
        Arrival times, nondecreasing.
    failures : array of bool
        Whether each request would fail if sent (the replica's condition at that time).
    latencies : Quantity [time], array, optional
        Service latency each request would see if sent.
    config : CircuitBreakerConfig, optional

    Returns
    -------
    BreakerTrace
        The state in which each request arrived, the admitted mask, the transitions
        ``(time [s], from, to)`` and the share of requests failed fast.

    Examples
    --------
    A replica slows from 50 ms to 500 ms at t = 10 s and recovers at t = 40 s (§10.11.10):

    >>> t = np.arange(0, 60, 0.1)
    >>> slow = (t >= 10) & (t < 40)
    >>> cfg = CircuitBreakerConfig(latency_threshold=Q_(200, "ms"), open_interval=Q_(5, "s"))
    >>> trace = simulate_circuit_breaker(Q_(t, "s"), np.zeros(t.size, bool), Q_(np.where(slow, 500, 50), "ms"), cfg)
    >>> [to for _, _, to in trace.transitions][:2], trace.states[-1]
    (['open', 'half_open'], 'closed')
    """
    arrival = np.atleast_1d(times.m_as("s")).astype(float)
    failed = np.atleast_1d(np.asarray(failures, dtype=bool))
    if failed.shape != arrival.shape:
        raise InputError("simulate_circuit_breaker(): 'failures' must have one entry per time")
    if np.any(np.diff(arrival) < 0):
        raise InputError("simulate_circuit_breaker(): argument 'times' must be nondecreasing")
    served = None if latencies is None else np.atleast_1d(latencies.m_as("s")).astype(float)
    if served is not None and served.shape != arrival.shape:
        raise InputError("simulate_circuit_breaker(): 'latencies' must have one entry per time")
    breaker = CircuitBreaker(config)
    states = np.empty(arrival.size, dtype=object)
    admitted = np.zeros(arrival.size, dtype=bool)
    for i, now in enumerate(arrival):  # a state machine: each outcome depends on the previous ones
        allowed = breaker.allow(now)
        states[i] = breaker.state
        if allowed:
            admitted[i] = True
            breaker.record(now, not failed[i], None if served is None else Q_(served[i], "s"))
    return BreakerTrace(
        states=states,
        admitted=admitted,
        transitions=tuple(breaker.transitions),
        rejected_fraction=float(1 - admitted.mean()) if arrival.size else 0.0,
    )


# --------------------------------------------------------------------------------------------
# Retries under overload


def retry_amplification(failure_probability: Any, max_retries: int) -> Any:
    r"""Expected attempts per request when each attempt fails independently and is retried.

    Parameters
    ----------
    failure_probability : float
        Probability that one attempt fails (times out or is rejected).
    max_retries : int
        Retries after the first attempt (0 = no retries).

    Returns
    -------
    float

    Notes
    -----
    .. math:: A = \sum_{i=0}^{r} p^i = \frac{1 - p^{r+1}}{1 - p} \quad (A = r + 1 \text{ at } p = 1)

    Examples
    --------
    >>> retry_amplification(0.5, 3), retry_amplification(1.0, 3)
    (1.875, 4.0)
    """
    check_domain("retry_amplification", "failure_probability", failure_probability, "probability")
    check_domain("retry_amplification", "max_retries", max_retries, "nonnegative")
    if np.any(np.asarray(max_retries) != np.round(max_retries)):
        raise InputError(f"retry_amplification(): argument 'max_retries' must be an integer, got {max_retries}")
    p = np.asarray(failure_probability, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        attempts = np.where(p < 1, (1 - p ** (max_retries + 1)) / np.where(p < 1, 1 - p, 1), max_retries + 1.0)
    return float(attempts) if attempts.ndim == 0 else attempts


@dataclass(frozen=True, repr=False)
class RetryEquilibrium(Result):
    """Steady state of clients retrying against a capacity-limited service."""

    attempt_rate: Any
    amplification: float
    failure_probability: float
    goodput: Any
    success_fraction: float
    overloaded: bool


@check_units(arrival_rate="request/s", capacity="request/s")
def retry_equilibrium(arrival_rate: Any, capacity: Any, max_retries: int) -> RetryEquilibrium:
    r"""Offered attempts, failure probability and goodput when clients retry failed requests.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        First-attempt rate :math:`\lambda`.
    capacity : Quantity [request / time]
        Attempts the service completes per second :math:`\mu`; attempts above it fail.
    max_retries : int
        Retries per request.

    Returns
    -------
    RetryEquilibrium

    Notes
    -----
    The attempt rate :math:`\Lambda` solves :math:`\Lambda = \lambda A(p)` with
    :math:`p = \max(0, 1 - \mu/\Lambda)` (excess attempts fail at random) and :math:`A` from
    :func:`retry_amplification`. Goodput :math:`\lambda(1 - p^{r+1})` never exceeds :math:`\mu`, while
    the offered load grows up to :math:`(r+1)\lambda`: retries amplify an overload instead of relieving
    it (§10.11.10). Below capacity there is no amplification.

    Examples
    --------
    >>> eq = retry_equilibrium(Q_(1200, "request/s"), Q_(1000, "request/s"), 3)
    >>> round(eq.amplification, 2), round(eq.goodput.m_as("request/s"))
    (2.31, 1000)
    """
    rate = float(arrival_rate.m_as("request/s"))
    mu = float(capacity.m_as("request/s"))
    check_domain("retry_equilibrium", "arrival_rate", rate, "nonnegative")
    check_domain("retry_equilibrium", "capacity", mu, "positive")
    check_domain("retry_equilibrium", "max_retries", max_retries, "nonnegative")
    retries = int(max_retries)
    if rate <= mu or retries == 0:
        p = max(0.0, 1 - mu / rate) if rate > 0 else 0.0
        amplification = 1.0
    else:
        from scipy.optimize import brentq

        def gap(x: float) -> float:
            return float(retry_amplification(max(0.0, 1 - mu / (rate * x)), retries)) - x

        amplification = brentq(gap, 1.0, retries + 1.0, xtol=1e-12) if gap(retries + 1.0) < 0 else retries + 1.0
        p = max(0.0, 1 - mu / (rate * amplification))
    success = 1 - p ** (retries + 1)
    return RetryEquilibrium(
        attempt_rate=Q_(rate * amplification, "request/s"),
        amplification=float(amplification),
        failure_probability=float(p),
        goodput=Q_(rate * success, "request/s"),
        success_fraction=float(success),
        overloaded=rate > mu,
    )


@formula(
    result=var("", "w", "probability", "share of generated tokens that were wasted"),
    reference="section 10.11.10",
    useful_tokens=var("token", r"N_{\mathrm{ok}}", "nonnegative", "tokens of requests delivered in time"),
    wasted_tokens=var("token", r"N_{\mathrm{waste}}", "nonnegative", "tokens of canceled, timed-out or late requests"),
)
def wasted_token_fraction(useful_tokens, wasted_tokens):
    r"""The wasted-token rate: tokens spent on requests that were canceled, timed out or late.

    Parameters
    ----------
    useful_tokens : Quantity [token]
        Tokens of requests delivered within their deadline.
    wasted_tokens : Quantity [token]
        Tokens of requests canceled, timed out or delivered after their deadline.

    Returns
    -------
    float

    Notes
    -----
    .. math:: w = \frac{N_{\mathrm{waste}}}{N_{\mathrm{ok}} + N_{\mathrm{waste}}}

    Examples
    --------
    >>> wasted_token_fraction(Q_(9e6, "token"), Q_(1e6, "token"))
    0.1
    """
    return wasted_tokens / (useful_tokens + wasted_tokens)
