"""M/M/c queues (Poisson arrivals, exponential service, ``c`` servers): exact waits and their tails.

Erlang C is computed from the Poisson distribution in log space (``P(N = c) / P(N <= c)`` gives
Erlang B), stable for thousands of servers. The wait tail is exact:
``P(W > t) = C e^{-(c mu - lambda) t}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._support import checked
from ..results import plain
from ..types import Count, Probability, Rate, Time
from ..units import Q_

__all__ = [
    "queue_stable",
    "erlang_c",
    "mmc_mean_wait",
    "mmc_wait_exceedance",
    "mmc_wait_quantile",
]


# --------------------------------------------------------------------------------------------
# Queues: M/M/c


def _erlang_c(load: Any, servers: Any) -> np.ndarray:
    """Erlang C from the offered load ``a = lambda s`` and the server count, in log space.

    One server (M/M/1): the probability of waiting is the load itself, ``a`` (the sizer's prefill queue asks
    this on every candidate, and scipy.special takes 0.17 s to import).
    """
    load, servers = np.broadcast_arrays(np.asarray(load, dtype=float), np.asarray(servers, dtype=float))
    stable = load < servers
    if np.all(servers == 1):
        return np.where(stable, np.clip(load, 0.0, 1.0), 1.0)
    from scipy.special import gammaincc, gammaln

    with np.errstate(all="ignore"):
        # Erlang B = P(N = c) / P(N <= c) for N ~ Poisson(a); P(N <= c) = Q(c + 1, a) >= ~1/2 when a < c.
        log_pmf = servers * np.log(load) - load - gammaln(servers + 1)
        blocking = np.exp(log_pmf) / gammaincc(servers + 1, load)
        waiting = blocking / (1 - (load / servers) * (1 - blocking))
    return np.where(stable, np.clip(waiting, 0.0, 1.0), 1.0)


def mean_wait_seconds(load: Any, servers: Any, service_time: Any, factor: Any) -> np.ndarray:
    """Allen-Cunneen mean wait: Erlang C x s / (c - a) x factor (factor 1: exact M/M/c)."""
    load, servers, service_time, factor = (np.asarray(v, dtype=float) for v in (load, servers, service_time, factor))
    probability = _erlang_c(load, servers)
    with np.errstate(all="ignore"):
        wait = probability * factor * service_time / (servers - load)
    return np.where(np.asarray(load) < np.asarray(servers), wait, np.inf)


def wait_tail(load: Any, servers: Any, service_time: Any, factor: Any) -> tuple[np.ndarray, np.ndarray]:
    """The wait's law as ``(p, r)``: ``P(wait > t) = p e^{-r t}``, Erlang C ``p`` and rate ``(c - a) / (factor s)``.

    Factor 0 (D/D/c) never waits: ``p = 0``. Unstable (``a >= c``): ``p = 1``, ``r = 0``. Plain arrays.
    """
    load, servers, service_time, factor = (np.asarray(v, dtype=float) for v in (load, servers, service_time, factor))
    stable = load < servers
    with np.errstate(all="ignore"):
        rate = np.where(factor > 0, (servers - load) / (factor * service_time), np.inf)
    probability = np.where(factor > 0, _erlang_c(load, servers), 0.0)
    return np.where(stable, probability, 1.0), np.where(stable, rate, 0.0)


def wait_exceedance_probability(load: Any, servers: Any, service_time: Any, factor: Any, threshold: Any) -> np.ndarray:
    """P(wait > t): Erlang C times an exponential tail with rate (c - a) / (factor s) (:func:`wait_tail`)."""
    probability, rate = wait_tail(load, servers, service_time, factor)
    with np.errstate(all="ignore"):
        tail = probability * np.exp(-rate * np.asarray(threshold, dtype=float))
    return np.where(probability > 0, tail, 0.0)


def wait_quantile_seconds(load: Any, servers: Any, service_time: Any, factor: Any, quantile: Any) -> np.ndarray:
    """Inverse of :func:`wait_exceedance_probability`: zero while the quantile lies in the no-wait mass."""
    load, servers, service_time, factor, quantile = (
        np.asarray(v, dtype=float) for v in (load, servers, service_time, factor, quantile)
    )
    probability = _erlang_c(load, servers)
    with np.errstate(all="ignore"):
        waited = factor * service_time / (servers - load) * np.log(probability / (1 - quantile))
        waited = np.where(np.asarray(factor) > 0, waited, 0.0)
    wait = np.where(1 - np.asarray(quantile) < probability, waited, 0.0)
    return np.where(np.asarray(load) < np.asarray(servers), np.maximum(wait, 0.0), np.inf)


@checked(arrival_rate="positive", service_time="positive")
def queue_stable(arrival_rate: Rate, service_time: Time, servers: Count) -> Any:
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
    return plain(arrival_rate * service_time < servers)


@checked(arrival_rate="positive", service_time="positive")
def erlang_c(arrival_rate: Rate, service_time: Time, servers: Count) -> Probability:
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
    return plain(_erlang_c(arrival_rate * service_time, servers))


@checked(arrival_rate="positive", service_time="positive")
def mmc_mean_wait(arrival_rate: Rate, service_time: Time, servers: Count) -> Time:
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
    return Q_(plain(mean_wait_seconds(arrival_rate * service_time, servers, service_time, 1.0)), "s")


@checked(arrival_rate="positive", service_time="positive")
def mmc_wait_exceedance(arrival_rate: Rate, service_time: Time, servers: Count, threshold: Time) -> Probability:
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
    load = arrival_rate * service_time
    return plain(wait_exceedance_probability(load, servers, service_time, 1.0, threshold))


@checked(arrival_rate="positive", service_time="positive")
def mmc_wait_quantile(arrival_rate: Rate, service_time: Time, servers: Count, quantile: Probability) -> Time:
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
    load = arrival_rate * service_time
    return Q_(plain(wait_quantile_seconds(load, servers, service_time, 1.0, quantile)), "s")
