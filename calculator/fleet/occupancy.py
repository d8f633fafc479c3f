"""The running batch as a queue: its fixed point, birth-death occupancy, waits for prefill budget, what arrivals meet.

The fleet sizer's evaluation (:mod:`calculator.fleet.evaluate`) and the disaggregated decode pool read a replica's
running batch at its load from the TP row's rate-versus-batch curve; these are the queueing parts of that reading.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _running_batch(batch: np.ndarray, rate: np.ndarray, cap: np.ndarray, load: np.ndarray) -> np.ndarray:
    """Sequences running at ``load`` per replica: where a TP row's rate-vs-batch curve reaches it.

    ``rate[j]`` is what a replica sustains with ``batch[j]`` sequences running (one TP row of the
    grid), so the running batch at a given load is the inverse of that curve (interpolated on the
    grid), at most the candidate's ``cap``.
    """
    curve = np.maximum.accumulate(rate)
    below = batch[0] * load / max(curve[0], 1e-300)  # fewer than the smallest grid batch
    return np.minimum(np.where(load < curve[0], below, np.interp(load, curve, batch)), cap)


def _occupancy(batch: np.ndarray, rate: np.ndarray, cap: np.ndarray, load: np.ndarray) -> tuple[np.ndarray, ...]:
    """The running batch as a birth-death process: arrivals ``load``, completions ``rate(n)``.

    With ``n`` sequences running a replica completes ``rate(n)`` requests per second (the TP row's
    rate curve ``rate`` over ``batch``, interpolated at every whole ``n``); beyond the cap ``B``
    requests wait and complete at ``rate(B)``. Returns, per candidate (its ``cap`` and ``load``), the
    mean running batch, the mean wait for a slot, the probability the cap is full, and ``rate(B) -
    load`` (the drain rate of that queue; <= 0 unstable).

    ``log P(n) = n log(load) - sum_{k <= n} log rate(k)`` up to a constant. Candidates of one load
    (one replica count) share it: running log-sum-exps of ``P(n)`` and ``n P(n)`` (sequential, so the
    sums up to a cap do not depend on how far the table runs) give every cap's normalization and
    mean at once, one pass per load instead of a table per candidate.
    """
    n = np.arange(int(cap.max()) + 1, dtype=float)
    curve = np.interp(n[1:], batch, rate)
    cumulative = np.concatenate(([0.0], np.cumsum(np.log(np.maximum(curve, 1e-300)))))
    rho = np.minimum(load / np.interp(cap, n[1:], curve), 1 - 1e-12)
    with np.errstate(divide="ignore"):
        log_n = np.log(n)  # -inf at n = 0: it adds nothing to the mean
    mean, wait, full = np.empty_like(load), np.empty_like(load), np.empty_like(load)
    for value in np.unique(load):
        group = np.flatnonzero(load == value)
        k = cap[group].astype(int)
        log_p = n[: k.max() + 1] * np.log(value) - cumulative[: k.max() + 1]
        total = np.logaddexp.accumulate(log_p)[k]  # log of the sum of P(n) up to each cap
        first = np.logaddexp.accumulate(log_p + log_n[: k.max() + 1])[k]  # and of n P(n)
        at_cap = np.exp(log_p[k] - total)  # P(cap) over the sum up to the cap
        r = rho[group]
        tail = at_cap * r / (1 - r)  # the states beyond the cap (requests waiting), geometric at rho
        norm = 1 + tail
        mean[group] = (np.exp(first - total) + cap[group] * tail) / norm
        full[group] = (at_cap + tail) / norm
        wait[group] = at_cap * r / (1 - r) ** 2 / norm / value
    drain = np.interp(cap, batch, rate) - load
    unstable = drain <= 0
    return (
        np.where(unstable, np.inf, mean),
        np.where(unstable, np.inf, wait),
        np.where(unstable, 1.0, full),
        drain,
    )


def _burst_gain(load: np.ndarray, prompt_time: np.ndarray) -> np.ndarray:
    """How much more an arrival moves the running batch than one sequence does: ``1 / (1 - rho)``.

    A request joins the batch, and its prefill adds ``prompt_time`` to the iterations every running
    sequence waits for. Completions come one token per iteration, so while that prefill runs the
    batch's completions stall. At a prefill share ``rho = load x prompt_time`` of the replica's
    time, the completions one prefill holds back are ``rho / (1 - rho)`` of an arrival. Each arrival
    therefore moves the batch's count against its completions by ``b = 1 / (1 - rho)``. A stream of
    such batches has ``b`` times the index of dispersion of the arrivals, so ``cv^2`` scales by
    ``b``. Bursts of arrivals (random dispatch, cv near 1) then raise the mean running batch, and
    TPOT with it, the more so where prompts are long. Smooth arrivals (round robin over many
    replicas, cv^2 near 0) are hardly affected. Against the simulator on the same step physics, with
    prompts of 2,000-8,000 tokens under random dispatch, the plans' TPOT is now low by 0-5% (was
    5-19% low); the rest is prompts that collide in one iteration (``docs/fleet-sizer.md``).

    Examples
    --------
    >>> float(_burst_gain(np.array(4.0), np.array(0.125)))  # half the time in prefill: each arrival counts twice
    2.0
    """
    share = np.minimum(load * prompt_time, 0.95)
    return 1.0 / (1.0 - share)


def _replica_arrival_cv(arrival_cv: float, replicas: np.ndarray, router: str) -> np.ndarray:
    """Inter-arrival CV at one of ``replicas`` replicas behind ``router``.

    Random dispatch thins the stream (``cv^2 / R + 1 - 1 / R``: Poisson-like as ``R`` grows); round
    robin sums ``R`` consecutive gaps (``cv^2 / R``). Load-aware routers (join-shortest-queue, least
    outstanding tokens, power of two) balance at least as well as round robin and are given its value.
    """
    share = 1.0 / np.maximum(replicas, 1)
    if router == "random":
        return np.sqrt(arrival_cv**2 * share + 1 - share)
    return np.sqrt(arrival_cv**2 * share)


def _wait(load: Any, service: Any, arrival_cv: Any, service_cv: float, percentile: float | None) -> np.ndarray:
    """The wait for prefill budget: a G/G/1 queue, its mean or its ``percentile``, plain arrays.

    The numeric core of :func:`~calculator.queueing.ggc_mean_wait` and
    :func:`~calculator.queueing.ggc_wait_quantile` on one server, without their checks (the loads
    and service times here are the grid's own, positive by construction). The mean is scaled by Kraemer
    and Langenbach-Belz's factor (:func:`_klb_factor`): Allen-Cunneen's two-moment wait is a heavy-traffic
    form, and smooth arrivals at a light load (round robin over many replicas) hardly wait at all. A
    percentile keeps the two-moment tail: scaling its chance of waiting by the same factor under-counted
    the waits of prompts of one length behind round robin over six replicas (0.2 % of arrivals waiting
    where the simulator had about 2 %, and a p99 TTFT 20 % over the plan's).
    """
    from ..queueing.ggc import variability_factor
    from ..queueing.mmc import mean_wait_seconds, wait_quantile_seconds

    factor = variability_factor.numeric(arrival_cv=arrival_cv, service_cv=service_cv)
    utilization = load * service
    if percentile is None:
        return _klb_factor(utilization, arrival_cv, service_cv) * mean_wait_seconds(utilization, 1.0, service, factor)
    return wait_quantile_seconds(utilization, 1.0, service, factor, percentile)


def _klb_factor(utilization: Any, arrival_cv: Any, service_cv: Any) -> np.ndarray:
    """Kraemer and Langenbach-Belz's correction to a GI/G/1 queue's two-moment mean wait (1 for Poisson arrivals).

    ``exp(-2 (1 - rho) (1 - ca^2)^2 / (3 rho (ca^2 + cs^2)))`` for ``ca <= 1``, ``exp(-(1 - rho) (ca^2 - 1) /
    (ca^2 + 4 cs^2))`` above (W. Kraemer and M. Langenbach-Belz, "Approximate formulae for the delay in the
    queueing system GI/G/1", 8th International Teletraffic Congress, 1976; W. Whitt, "The Queueing Network
    Analyzer", Bell System Technical Journal 62(9), 1983).

    Examples
    --------
    >>> float(_klb_factor(0.5, 1.0, 0.5))
    1.0
    >>> round(float(_klb_factor(0.32, 0.21, 0.5)), 4)  # round robin over 22 replicas, a third loaded
    0.0123
    """
    rho = np.clip(np.asarray(utilization, dtype=float), 1e-12, 1.0)
    ca2, cs2 = np.asarray(arrival_cv, dtype=float) ** 2, np.asarray(service_cv, dtype=float) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):  # both branches are computed; each is taken where defined
        smooth = -2 * (1 - rho) * (1 - ca2) ** 2 / (3 * rho * (ca2 + cs2))
        bursty = -(1 - rho) * (ca2 - 1) / (ca2 + 4 * cs2)
    return np.exp(np.where(ca2 <= 1, np.nan_to_num(smooth, nan=0.0, neginf=-np.inf), bursty))


def _renewal_count(gaps: np.ndarray, cv: np.ndarray) -> np.ndarray:
    """Arrivals expected within ``gaps`` mean inter-arrival times after an arrival (the renewal function, smoothed).

    A renewal stream of inter-arrival CV ``cv`` counts ``H(x) -> x - a`` over ``x`` mean gaps, ``a = (1 - cv^2) / 2``
    (Cox, *Renewal Theory*, 1962, section 4.5). Smoother than Poisson (``cv < 1``), ``x - a (1 - exp(-x / a))``
    is taken: none at the origin, that asymptote beyond a few gaps, increasing in ``x`` and in ``cv``. The exact
    function of smooth arrivals oscillates about the asymptote (a staircase for regular ones, ``floor(x)``), and
    the search's bisection over replicas needs latencies monotone in the load and the CV. For gamma gaps the
    smooth form is never below the exact count at ``cv^2`` of 0.1 and above (at most 0.19 over it, at the knee
    within the first gap), and within +0.26/-0.06 at 0.05 (round robin over 20 replicas of a Poisson stream),
    +0.34/-0.16 at 0.02 and half an arrival for regular ones. Poisson (``cv = 1``) and burstier streams count
    ``x``, the stationary rate (burstier ones meet more at short windows, not modelled).

    Examples
    --------
    >>> float(_renewal_count(np.array(2.5), np.array(1.0)))  # Poisson: the window's mean count
    2.5
    >>> round(float(_renewal_count(np.array(0.2), np.array(0.0))), 3)  # regular arrivals: few within a fifth of a gap
    0.035
    >>> round(float(_renewal_count(np.array(2.5), np.array(0.0))), 3)  # two-and-a-half gaps: two, the staircase's mean
    2.003
    """
    x, cv = np.asarray(gaps, dtype=float), np.minimum(np.asarray(cv, dtype=float), 1.0)
    a = (1 - cv**2) / 2
    return x - a * -np.expm1(-x / np.maximum(a, 1e-300))


def _landing_share(load: np.ndarray, cv: np.ndarray, decoding: np.ndarray, prefill: np.ndarray) -> np.ndarray:
    """The share of the replica's prompt landings that a request's decoding meets, against a random moment's.

    The iteration model lands ``load`` prompts a second in every decode step, the stationary rate. A request
    meets the prompts that arrive after its own, at the replica's arrival process: another prompt of the same
    time to its first token lands in the request's ``decoding`` seconds if it arrives within ``decoding`` after
    it, in part over a ``prefill`` second ramp at either end. So it meets ``H(load (decoding + prefill / 2)) -
    H(load prefill / 2)`` prompts (:func:`_renewal_count`; arrivals of CV ``cv``), against ``load x decoding``
    at the stationary rate. Poisson arrivals (random dispatch) meet exactly their share (1). Round robin over
    ``R`` replicas spaces a replica's arrivals (CV ``1 / sqrt(R)`` of a Poisson stream): at a light load a
    request decodes before the next one's prompt arrives, and meets few (the smoothed count's, at least the
    exact one's). The second example's exact share is nil.

    Examples
    --------
    >>> float(_landing_share(np.array(0.5), np.array(1.0), np.array(2.0), np.array(1.0)))
    1.0
    >>> round(float(_landing_share(np.array(0.1), np.array(0.2), np.array(2.0), np.array(1.0))), 2)  # next in 10 s
    0.26
    """
    stationary = load * decoding
    counted = np.isfinite(stationary) & (stationary > 0)  # an unbounded decoding (a saturated candidate) meets all
    window = np.where(counted, decoding, 0.0)
    met = _renewal_count(load * (window + prefill / 2), cv) - _renewal_count(load * prefill / 2, cv)
    return np.where(counted, np.maximum(met, 0.0) / np.where(counted, stationary, 1.0), 1.0)


def _company_share(load: np.ndarray, cv: np.ndarray, life: np.ndarray) -> np.ndarray:
    """The running sequences an arrival finds, against a random moment's: ``H(load life) / (load life)``.

    A request in the running batch for ``life`` seconds is still there when the next ones arrive within that
    time: an arrival finds the ``H(load x life)`` sequences of the arrivals before it (the renewal function,
    :func:`_renewal_count`, counted backwards over the replica's arrivals of CV ``cv``), where a random moment
    finds ``load x life`` (Little's law). Poisson arrivals see the time average (1); round robin at a light
    load finds the replica idle, or nearly (the smoothed count's; the second example's exact share is nil).

    Examples
    --------
    >>> float(_company_share(np.array(0.5), np.array(1.0), np.array(3.0)))
    1.0
    >>> round(float(_company_share(np.array(0.1), np.array(0.2), np.array(3.0))), 2)  # the last one left 7 s ago
    0.26
    """
    mean = load * life
    return np.where(mean > 0, _renewal_count(mean, cv) / np.maximum(mean, 1e-300), 1.0)


def _arrived_within(gaps: Any, cv: Any) -> np.ndarray:
    """The chance that the arrival before one came within ``gaps`` mean inter-arrival times of it.

    The gap's distribution function, a gamma of CV ``cv`` (shape ``1 / cv^2``; Poisson arrivals: ``1 -
    exp(-x)``). Round robin over ``R`` replicas of a stream of CV ``c`` makes the gap the sum of ``R`` of the
    stream's, a gamma of shape ``R / c^2`` at a fixed scale: the chance falls as replicas are added, and with
    the window (``gaps`` proportional to each replica's load).

    Examples
    --------
    >>> round(float(_arrived_within(np.array(0.5), np.array(1.0))), 4)  # Poisson: 1 - exp(-0.5)
    0.3935
    >>> round(float(_arrived_within(np.array(0.5), np.array(0.2))), 4)  # round robin over 25: hardly ever
    0.0012
    """
    from scipy.special import gammainc

    shape = 1.0 / np.maximum(np.asarray(cv, dtype=float) ** 2, 1e-4)
    return gammainc(shape, shape * np.maximum(np.asarray(gaps, dtype=float), 0.0))
