"""Dynamic batching (section 10.6.3, Eq. 3, Example 10.1): the batch a window forms and the latency it adds.

Eq. 3 names queueing and formation delay but gives no model for either. This module adds the exact
mean formation delay of a window that opens at a batch's first arrival and closes after ``T_w`` or
at ``B_max`` requests (Poisson arrivals), and prices the queueing of the formed batches with the
G/G/c approximation of :mod:`calculator.queueing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked
from ..errors import InputError
from ..formula import formula, minimum, per, var
from ..queueing import ggc_mean_wait, utilization
from ..results import Result, plain
from ..types import Count, Fraction, Number, Rate, Time
from ..units import Q_
from .service import batch_throughput

__all__ = [
    "window_batch_size",
    "batched_utilization",
    "request_time_in_system",
    "BatchFormation",
    "batch_formation",
    "DynamicBatchingLatency",
    "dynamic_batching_latency",
]


# --------------------------------------------------------------------------------------------
# 10.6.3 Dynamic batching (Eq. 3, Example 10.1)


@formula(
    result=var("", "B", "nonnegative", "requests collected in one window"),
    reference="Example 10.1 (batch = arrival rate x window), section 10.6.3",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "arrival rate at the batcher"),
    window=var("s", "T_{w}", "nonnegative", "batching window"),
    max_batch=var("", r"B_{\max}", "positive_integer", "largest batch allowed"),
    example={"arrival_rate": "500 request/s", "window": "10 ms", "max_batch": 32},
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
    example={"arrival_rate": "500 request/s", "batch_size": 5, "batch_time": "8 ms"},
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
    queueing_delay=var(
        "s", r"E[L_{\mathrm{queue}}]", "nonnegative", "mean wait for a free replica (inf: unstable)", infinite=True
    ),
    formation_delay=var("s", r"D_{\mathrm{form}}", "nonnegative", "mean wait for the batch to close"),
    service_time=var("s", "T(B)", "nonnegative", "mean execution time of the request's batch"),
    example={"queueing_delay": "3 ms", "formation_delay": "5 ms", "service_time": "8 ms"},
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

    mean_batch_size: Count
    batch_size_cv: Number
    mean_square_batch_size: Number
    formation_delay: Time
    batch_rate: Rate
    batch_interval_cv: Number


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


@checked(arrival_rate="positive")
def batch_formation(arrival_rate: Rate, window: Time, max_batch: Count) -> BatchFormation:
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
    if np.size(max_batch) == 0:
        raise InputError("batch_formation(): argument 'max_batch' is empty; give a number or a non-empty array")
    first, delay, square, interval = _formation_sums(arrival_rate * window, np.asarray(max_batch) - 1)
    mean = 1 + first
    variance = np.maximum(square - first**2, 0.0)
    return BatchFormation(
        mean_batch_size=plain(mean),
        batch_size_cv=plain(np.sqrt(variance) / mean),
        mean_square_batch_size=plain(variance + mean**2),
        formation_delay=Q_(plain(delay / (arrival_rate * mean)), "s"),
        batch_rate=Q_(plain(arrival_rate / mean), "1/s"),
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

    mean_batch_size: Count
    formation_delay: Time
    queueing_delay: Time
    service_time: Time
    time_in_system: Time
    utilization: Fraction
    stable: bool | np.ndarray


@checked(arrival_rate="positive")
def dynamic_batching_latency(
    arrival_rate: Rate, window: Time, max_batch: Count, fixed_time: Time, marginal_time: Time, replicas: Count = 1
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
    formed = batch_formation(Q_(arrival_rate, "request/s"), Q_(window, "s"), max_batch)
    fixed, marginal, count = fixed_time, marginal_time, replicas
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
