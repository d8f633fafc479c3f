"""The running batch as a queue: its fixed point, its birth-death occupancy and the waits for prefill budget.

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
    """The wait for prefill budget: a G/G/1 queue (Allen-Cunneen), its mean or its ``percentile``, plain arrays.

    The numeric core of :func:`~calculator.queueing.ggc_mean_wait` and
    :func:`~calculator.queueing.ggc_wait_quantile` on one server, without their checks: the loads
    and service times here are the grid's own, positive by construction.
    """
    from ..queueing.ggc import variability_factor
    from ..queueing.mmc import mean_wait_seconds, wait_quantile_seconds

    factor = variability_factor.numeric(arrival_cv=arrival_cv, service_cv=service_cv)
    if percentile is None:
        return mean_wait_seconds(load * service, 1.0, service, factor)
    return wait_quantile_seconds(load * service, 1.0, service, factor, percentile)
