"""Adaptive batching (section 10.6.8): rate-following windows and the SLO-adaptive controller.

:func:`simulate_dynamic_batching` runs the dynamic-batching policy of :mod:`calculator.batching.dynamic`
on any arrival trace, optionally under the chapter's SLO-adaptive controller.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .._support import checked, magnitude, one
from ..errors import InputError
from ..formula import formula, minimum, per, var
from ..results import Result, plain
from ..types import Count, Fraction, Number, Time
from ..units import Q_, shown

__all__ = [
    "adaptive_window",
    "slo_adaptive_step",
    "BatchingTrace",
    "simulate_dynamic_batching",
]

#: The most controller steps ``simulate_dynamic_batching`` takes (a bound on its work).
MAX_CONTROL_TICKS = 1_000_000


# --------------------------------------------------------------------------------------------
# 10.6.8 Adaptive batching


@formula(
    result=var("s", "T_{w}", "nonnegative", "batching window"),
    reference="section 10.6.8 (traffic-adaptive batching)",
    arrival_rate=var("request/s", r"\lambda", "positive", "current arrival rate"),
    target_batch_size=var("", r"B_{\mathrm{target}}", "positive", "batch the window aims to collect"),
    max_window=var("s", r"T_{\max}", "nonnegative", "cap on the formation delay"),
    example={"arrival_rate": "2000 request/s", "target_batch_size": 16, "max_window": "20 ms"},
)
def adaptive_window(arrival_rate, target_batch_size, max_window):
    r"""Traffic-adaptive batching window: long enough to collect the target batch, but capped.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Current arrival rate.
    target_batch_size : float
        Batch the window aims to collect.
    max_window : Quantity [time]
        Cap that bounds formation delay at low traffic.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_w = \min\left(T_{\max}, \frac{B_{\mathrm{target}}}{\lambda}\right)

    Section 10.6.8. The window shrinks as traffic rises (self-check answer §10.18:
    widening it during a spike is not the optimal policy). The cap bounds formation delay, not the
    wait for a busy replica.

    Examples
    --------
    >>> adaptive_window(Q_(2000, "request/s"), 16, Q_(20, "ms")).to("ms")
    <Quantity(8.0, 'millisecond')>
    """
    return minimum(max_window, per(target_batch_size / arrival_rate, "request"))


@checked(slo="positive", max_batch="positive", window="unchecked", decrease="fraction_open")
def slo_adaptive_step(
    p99_latency: Time,
    slo: Time,
    max_batch: Count,
    window: Time,
    high: Number = 0.9,
    low: Number = 0.5,
    decrease: Fraction = 0.2,
    increase: Number = 0.1,
) -> tuple[Count, Time]:
    r"""One step of the chapter's SLO-adaptive batching controller.

    Parameters
    ----------
    p99_latency : Quantity [time]
        Observed p99 latency over the last control interval.
    slo : Quantity [time]
        The latency target.
    max_batch : float
        Current :math:`B_{\max}` (kept real so that repeated steps compound exactly).
    window : Quantity [time]
        Current batching window.
    high, low : float, default 0.9, 0.5
        Back off above ``high x slo``; grow below ``low x slo``.
    decrease, increase : float, default 0.2, 0.1
        Fractional step down and up.

    Returns
    -------
    (float, Quantity [time])
        The new ``max_batch`` (at least 1) and ``window``.

    Notes
    -----
    Section 10.6.8::

        if P99 > 0.9 SLO: B_max, T_window *= 0.8
        elif P99 < 0.5 SLO: B_max, T_window *= 1.1

    A heuristic: it may oscillate, and shrinking batches under heavy load cuts capacity and grows
    queueing (§10.6.8). Evaluate it on an arrival trace with :func:`simulate_dynamic_batching`.

    Examples
    --------
    >>> slo_adaptive_step(Q_(95, "ms"), Q_(100, "ms"), 32, Q_(50, "ms"))
    (25.6, <Quantity(40.0, 'millisecond')>)
    """
    # The window is checked here, not by ``checked``: the new window is given back in the caller's unit.
    span = magnitude("slo_adaptive_step", "window", window, "s", "nonnegative")
    if np.any(np.asarray(low) > high):
        raise InputError(f"slo_adaptive_step(): argument 'low' ({shown(low)}) must not exceed 'high' ({shown(high)})")
    scale = np.where(p99_latency > high * slo, 1 - decrease, np.where(p99_latency < low * slo, 1 + increase, 1.0))
    # B_max never drops below one request; the window may shrink towards zero.
    return plain(np.maximum(max_batch * scale, 1.0)), Q_(plain(span * scale), "s").to(window.units)


@dataclass(frozen=True, repr=False)
class BatchingTrace(Result):
    r"""Per-request and per-control-step record of a simulated dynamic batcher.

    Attributes
    ----------
    latency, formation_delay, queueing_delay, service_time : Quantity [time], arrays (requests,)
        Each request's end-to-end latency and its three Eq. 3 parts.
    batch_sizes : ndarray of int
        Size of every dispatched batch, in dispatch order.
    control_times : Quantity [time], array
        When the controller acted (empty without a controller).
    control_p99 : Quantity [time], array
        p99 latency it observed over the preceding interval.
    control_max_batch : ndarray
        :math:`B_{\max}` after each step.
    control_window : Quantity [time], array
        Window after each step.
    """

    latency: Time
    formation_delay: Time
    queueing_delay: Time
    service_time: Time
    batch_sizes: Count
    control_times: Time
    control_p99: Time
    control_max_batch: Count
    control_window: Time

    @property
    def mean_latency(self) -> Time:
        """Mean of :attr:`latency`."""
        return self.latency.mean()

    def latency_quantile(self, quantile: float) -> Time:
        """A quantile of :attr:`latency` (0.99 for p99)."""
        return Q_(float(np.quantile(self.latency.m_as("s"), quantile)), "s")


@checked(
    arrival_times="any",
    window=one(),
    max_batch=one("positive"),
    fixed_time=one(),
    marginal_time=one(),
    replicas=one(),
    slo=one("positive"),
    control_interval=one("positive"),
)
def simulate_dynamic_batching(
    arrival_times: Time,
    window: Time,
    max_batch: Count,
    fixed_time: Time,
    marginal_time: Time,
    replicas: Count = 1,
    slo: Time | None = None,
    control_interval: Time | None = None,
) -> BatchingTrace:
    r"""Simulate a window-or-max-batch batcher on an arrival trace, optionally under SLO-adaptive control.

    Parameters
    ----------
    arrival_times : Quantity [time], array (requests,)
        Arrival time of each request, non-decreasing.
    window : Quantity [time]
        Initial batching window (a batch opens at its first request).
    max_batch : float
        Initial :math:`B_{\max}` (the effective cap is its floor, at least 1).
    fixed_time, marginal_time : Quantity [time]
        Execution time of a batch of ``B`` is ``fixed_time + B x marginal_time``.
    replicas : int, default 1
        Replicas serving formed batches first come, first served.
    slo : Quantity [time], optional
        Turns on the SLO-adaptive controller (:func:`slo_adaptive_step`) with this target.
    control_interval : Quantity [time], optional
        How often the controller acts; it sees the p99 latency of the requests that completed in
        the interval just ended. Required with ``slo``.

    Returns
    -------
    BatchingTrace

    Notes
    -----
    A discrete-event simulation of the policy of section 10.6.3, used to evaluate the controller of
    section 10.6.8 on a trace (§10.6.8: "the controller must be evaluated with the intended
    arrival trace") and to check :func:`dynamic_batching_latency`. Formation does not wait for a
    free replica; formed batches queue for the first free replica.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> times = Q_(np.cumsum(rng.exponential(1 / 500, 20_000)), "s")
    >>> trace = simulate_dynamic_batching(times, Q_(10, "ms"), 64, Q_(4, "ms"), Q_(0.8, "ms"))
    >>> round(trace.mean_latency.m_as("ms"))
    15
    """
    name = "simulate_dynamic_batching"
    arrivals = np.asarray(arrival_times, dtype=float).ravel()
    if arrivals.size == 0 or np.any(np.diff(arrivals) < 0) or not np.all(np.isfinite(arrivals)):
        raise InputError(f"{name}(): argument 'arrival_times' must be a non-empty, finite, non-decreasing array")
    span, cap, fixed, marginal = float(window), float(max_batch), float(fixed_time), float(marginal_time)
    count = int(replicas)
    controlled = slo is not None
    if slo is not None:
        if control_interval is None:
            raise InputError(f"{name}(): argument 'control_interval' is required with 'slo'")
        interval = float(control_interval)
        target = Q_(slo, "s")
        ticks = (arrivals[-1] - arrivals[0]) / interval
        if not ticks <= MAX_CONTROL_TICKS:
            raise InputError(
                f"{name}(): the arrivals span {ticks:,.3g} control intervals, more than {MAX_CONTROL_TICKS:,}; use a "
                "longer control_interval or a shorter trace"
            )
        next_tick = arrivals[0] + interval
    n = arrivals.size
    close_at, start_at, finish_at = np.empty(n), np.empty(n), np.empty(n)
    free = [arrivals[0]] * count
    completions: list[tuple[float, float]] = []  # (finish, latency) not yet seen by the controller
    sizes: list[int] = []
    controls: list[tuple[float, float, float, float]] = []
    i = 0
    while i < n:
        while controlled and next_tick <= arrivals[i]:
            seen = []
            while completions and completions[0][0] <= next_tick:
                seen.append(heapq.heappop(completions)[1])
            if seen:
                p99 = float(np.percentile(seen, 99))
                cap, new_window = slo_adaptive_step(Q_(p99, "s"), target, cap, Q_(span, "s"))
                span = new_window.m_as("s")
                controls.append((next_tick, p99, cap, span))
            next_tick += interval
        limit = max(1, int(np.floor(cap + 1e-9)))
        close = arrivals[i] + span
        j = int(np.searchsorted(arrivals, close, side="right"))
        j = min(j, i + limit, n)
        if j - i == limit:
            close = arrivals[j - 1]  # full: dispatch at the arrival that filled it
        start = max(close, heapq.heappop(free))
        finish = start + fixed + marginal * (j - i)
        heapq.heappush(free, finish)
        close_at[i:j], start_at[i:j], finish_at[i:j] = close, start, finish
        if controlled:
            for latency in finish - arrivals[i:j]:
                heapq.heappush(completions, (finish, float(latency)))
        sizes.append(j - i)
        i = j
    record = np.array(controls).reshape(-1, 4)
    return BatchingTrace(
        latency=Q_(finish_at - arrivals, "s"),
        formation_delay=Q_(close_at - arrivals, "s"),
        queueing_delay=Q_(start_at - close_at, "s"),
        service_time=Q_(finish_at - start_at, "s"),
        batch_sizes=np.array(sizes),
        control_times=Q_(record[:, 0], "s"),
        control_p99=Q_(record[:, 1], "s"),
        control_max_batch=record[:, 2],
        control_window=Q_(record[:, 3], "s"),
    )
