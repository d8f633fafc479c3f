"""General queues: M/G/1 (Pollaczek-Khinchine), G/G/c (Allen-Cunneen), the queue summary, arrival traces.

* **M/G/1**: the Pollaczek-Khinchine mean wait, exact for any service distribution.
* **G/G/c**: the Allen-Cunneen approximation, the M/M/c wait scaled by ``(c_a^2 + c_s^2) / 2``.
  It is exact for M/M/c and for M/G/1, and for a single server it is Kingman's formula.
  Validated against discrete-event simulation in ``docs/models-10.1-10.6.md``.
* **Wait tails**: for G/G/c the exponential tail of M/M/c with its mean scaled by the Allen-Cunneen
  factor (an approximation whose error the docs table records).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked, random_seed
from ..errors import InputError
from ..formula import formula, var
from ..results import Result, as_count, plain
from ..types import Count, Fraction, Number, Probability, Rate, Time
from ..units import Q_
from .capacity import in_flight
from .mmc import _erlang_c, mean_wait_seconds, wait_exceedance_probability, wait_quantile_seconds

__all__ = [
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
# Queues: M/G/1, G/G/c


@formula(
    result=var("", r"f_{\mathrm{var}}", "nonnegative", "variability factor of the queueing delay"),
    reference="Kingman (1961); Allen-Cunneen approximation",
    arrival_cv=var("", "c_{a}", "nonnegative", "coefficient of variation of inter-arrival times"),
    service_cv=var("", "c_{s}", "nonnegative", "coefficient of variation of service times"),
    example={"arrival_cv": 1, "service_cv": 0},
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
    example={"utilization": 0.5, "service_time": "10 ms", "arrival_cv": 1, "service_cv": 0},
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


@checked(arrival_rate="positive", service_time="positive")
def mg1_mean_wait(arrival_rate: Rate, service_time: Time, service_cv: Number) -> Time:
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
    rho = arrival_rate * service_time
    stable = rho < 1
    with np.errstate(all="ignore"):
        wait = kingman_wait.numeric(
            utilization=np.where(stable, rho, 0.0), service_time=service_time, arrival_cv=1.0, service_cv=service_cv
        )
    return Q_(plain(np.where(stable, wait, np.inf)), "s")


@checked(arrival_rate="positive", service_time="positive")
def ggc_mean_wait(
    arrival_rate: Rate, service_time: Time, servers: Count, arrival_cv: Number, service_cv: Number
) -> Time:
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
    factor = variability_factor.numeric(arrival_cv=arrival_cv, service_cv=service_cv)
    return Q_(plain(mean_wait_seconds(arrival_rate * service_time, servers, service_time, factor)), "s")


@checked(arrival_rate="positive", service_time="positive")
def ggc_wait_exceedance(
    arrival_rate: Rate, service_time: Time, servers: Count, arrival_cv: Number, service_cv: Number, threshold: Time
) -> Probability:
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
    factor = variability_factor.numeric(arrival_cv=arrival_cv, service_cv=service_cv)
    return plain(wait_exceedance_probability(arrival_rate * service_time, servers, service_time, factor, threshold))


@checked(arrival_rate="positive", service_time="positive")
def ggc_wait_quantile(
    arrival_rate: Rate,
    service_time: Time,
    servers: Count,
    arrival_cv: Number,
    service_cv: Number,
    quantile: Probability,
) -> Time:
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
    factor = variability_factor.numeric(arrival_cv=arrival_cv, service_cv=service_cv)
    return Q_(plain(wait_quantile_seconds(arrival_rate * service_time, servers, service_time, factor, quantile)), "s")


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

    utilization: Fraction
    stable: bool | np.ndarray
    exact: bool | np.ndarray
    wait_probability: Probability
    mean_wait: Time
    mean_time_in_system: Time
    mean_queue_length: Count
    mean_in_system: Count
    arrival_rate: Rate
    service_time: Time
    servers: Count
    arrival_cv: Number
    service_cv: Number

    def wait_exceedance(self, threshold: Time) -> Probability:
        """P(wait > threshold) (see :func:`ggc_wait_exceedance`)."""
        return ggc_wait_exceedance(
            self.arrival_rate, self.service_time, self.servers, self.arrival_cv, self.service_cv, threshold
        )

    def wait_quantile(self, quantile: Probability) -> Time:
        """Quantile of the queueing delay (see :func:`ggc_wait_quantile`)."""
        return ggc_wait_quantile(
            self.arrival_rate, self.service_time, self.servers, self.arrival_cv, self.service_cv, quantile
        )


@checked(arrival_rate="positive", service_time="positive")
def queue_metrics(
    arrival_rate: Rate, service_time: Time, servers: Count, arrival_cv: Number = 1.0, service_cv: Number = 1.0
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
    rate, service, count = arrival_rate, service_time, servers
    factor = variability_factor.numeric(arrival_cv=arrival_cv, service_cv=service_cv)
    load = rate * service
    wait = Q_(plain(mean_wait_seconds(load, count, service, factor)), "s")
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


@checked(arrival_rate="positive")
def arrival_times(arrival_rate: Rate, requests: Count, arrival_cv: Number = 1.0, seed: int = 0) -> Time:
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
    rate, cv = arrival_rate, arrival_cv
    if np.ndim(rate) or np.ndim(cv) or np.ndim(requests):
        raise InputError("arrival_times(): 'arrival_rate', 'requests' and 'arrival_cv' must be scalars")
    draws = int(requests)
    seed = random_seed("arrival_times", "seed", seed)
    mean_gap = 1 / rate
    if cv < 1e-6:  # gamma gaps of shape 1/cv^2 are fixed gaps to float precision (and NaN beyond)
        gaps = np.full(draws, mean_gap)
    else:
        shape = 1 / cv**2
        gaps = np.random.default_rng(seed).gamma(shape, mean_gap / shape, draws)
    return Q_(np.cumsum(gaps), "s")
