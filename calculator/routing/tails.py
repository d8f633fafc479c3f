"""Fan-out tails (section 10.11.1) and balls into bins (eq. 14-15, Theorem 10.2).

The probability that a fanned-out request meets a slow leaf and the per-leaf budget that bounds it,
and the maximum load of random and d-choice placement (closed form and seeded simulation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._support import count as _check_int
from .._support import random_seed
from ..errors import InputError
from ..formula import check_domain, formula, var
from ..results import Result
from ..types import Count, Probability
from ..units import Q_  # noqa: F401 (the doctests use it)

__all__ = [
    "tail_event_rate",
    "fanout_slow_probability",
    "per_leaf_budget",
    "probe_hit_probability",
    "max_load_order",
    "expected_max_load",
    "MaxLoadSimulation",
    "simulate_max_load",
]


# --------------------------------------------------------------------------------------------
# Fan-out tails (section 10.11.1)


@formula(
    result=var("1/s", r"\dot{n}_{\mathrm{tail}}", "nonnegative", "expected tail events per second"),
    reference="Lighthouse 10.2 (§10.11)",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "request rate"),
    event_probability=var("1/request", "p", "probability", "probability a request is a tail event"),
    example={"arrival_rate": "1e7 request/s", "event_probability": "1e-4 1/request"},
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
    example={"leaf_probability": 0.01, "fanout": 100},
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
    example={"request_probability": 0.01, "fanout": 100},
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


def probe_hit_probability(hot_bins: Count, bins: Count, probes: int = 2) -> Probability:
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


def max_load_order(bins: Count, choices: int = 1) -> Count:
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
    rng = np.random.default_rng(random_seed("simulate_max_load", "seed", seed))
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
