"""Serving contracts (sections 10.1-10.3): offered and admitted load, TTFT/TPOT/TBT and SLO goodput.

The load a service admits and sheds, capacity compared at a fixed mix and SLO, the stream metrics
of a request, and goodput: the completed rate that meets its latency targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked, instance, one
from ..errors import InputError
from ..formula import formula, per, var
from ..results import Result, plain
from ..types import Fraction, Rate, Time, TokenRate
from ..units import Q_

__all__ = [
    "shed_fraction",
    "CapacityMeasurement",
    "compare_capacity",
    "interactivity",
    "StreamMetrics",
    "stream_metrics",
    "slo_goodput",
    "slo_attainment",
    "goodput_from_requests",
]


# --------------------------------------------------------------------------------------------
# Section 10.1: offered and admitted load; capacity compared at a fixed mix and SLO


@checked(offered_rate="positive")
def shed_fraction(offered_rate: Rate, admitted_rate: Rate) -> Fraction:
    r"""Fraction of offered load that the service rejects or sheds.

    Parameters
    ----------
    offered_rate : Quantity [request / time]
        Work arriving at the endpoint, including requests the service may reject.
    admitted_rate : Quantity [request / time]
        Work the service accepts; at most ``offered_rate``.

    Returns
    -------
    float or ndarray
        :math:`1 - \lambda_{\mathrm{adm}} / \lambda_{\mathrm{off}}`, in [0, 1].

    Notes
    -----
    Section 10.1 (§10.1; self-check answer §10.18): meeting the SLO on every *admitted* request
    does not mean the offered load is served. Capacity counts offered work that completes within
    the targets.

    Examples
    --------
    >>> shed_fraction(Q_(1000, "request/s"), Q_(750, "request/s"))
    0.25
    """
    if np.any(np.asarray(admitted_rate) > np.asarray(offered_rate)):
        raise InputError("shed_fraction(): argument 'admitted_rate' must not exceed 'offered_rate'")
    return plain(1 - np.asarray(admitted_rate) / np.asarray(offered_rate))


@dataclass(frozen=True, repr=False)
class CapacityMeasurement(Result):
    """A measured serving capacity and the contract it was measured under.

    Attributes
    ----------
    slo_goodput : Quantity [request / time]
        Completed requests per unit time that met every target (see :func:`slo_goodput`).
    request_mix : str
        Name of the prompt/output length mix the load used (e.g. ``"production"``).
    ttft_target, tpot_target : Quantity [time]
        The latency targets the requests were judged against.
    """

    slo_goodput: Rate
    request_mix: str
    ttft_target: Time
    tpot_target: Time


def compare_capacity(first: CapacityMeasurement, second: CapacityMeasurement) -> str:
    """Which of two measurements shows more serving capacity, if they can be compared at all.

    Parameters
    ----------
    first, second : CapacityMeasurement
        The two measurements.

    Returns
    -------
    str
        ``"first"``, ``"second"``, ``"equal"``, or ``"not comparable"`` when the request mix or
        the SLO targets differ.

    Notes
    -----
    Section 10.1 (§10.1, self-check §10.1 / answer §10.18): request rate alone is not a capacity
    metric for language models; capacities compare only at the same request mix and SLO.

    Examples
    --------
    >>> x = CapacityMeasurement(Q_(840, "request/s"), "production", Q_(300, "ms"), Q_(50, "ms"))
    >>> y = CapacityMeasurement(Q_(950, "request/s"), "production", Q_(0.3, "s"), Q_(50, "ms"))
    >>> compare_capacity(x, y)
    'second'
    """
    instance("compare_capacity", "first", first, CapacityMeasurement, "a CapacityMeasurement")
    instance("compare_capacity", "second", second, CapacityMeasurement, "a CapacityMeasurement")
    same_slo = np.isclose(first.ttft_target.m_as("s"), second.ttft_target.m_as("s")) and np.isclose(
        first.tpot_target.m_as("s"), second.tpot_target.m_as("s")
    )
    if first.request_mix != second.request_mix or not same_slo:
        return "not comparable"
    a = first.slo_goodput.m_as("request/s")
    b = second.slo_goodput.m_as("request/s")
    return "equal" if np.isclose(a, b) else ("first" if a > b else "second")


# --------------------------------------------------------------------------------------------
# Sections 10.1-10.3: TTFT, TPOT, TBT, SLO goodput


@formula(
    result=var("token/s", r"I", description="output tokens per second one user receives"),
    reference="section 10.6.2 (interactivity is the reciprocal of TPOT)",
    time_per_output_token=var("s", r"\mathrm{TPOT}", description="average gap between streamed tokens"),
    example={"time_per_output_token": "20 ms"},
)
def interactivity(time_per_output_token):
    r"""Interactivity: the output tokens per second a user receives, the reciprocal of TPOT.

    Parameters
    ----------
    time_per_output_token : Quantity [time]
        TPOT, the average gap between streamed tokens (a time per token; the chapter writes "20 ms").

    Returns
    -------
    Quantity [token / time]

    Notes
    -----
    .. math:: I = 1 / \mathrm{TPOT}

    Section 10.6.2: InferenceX reports interactivity, the reciprocal of TPOT.

    Examples
    --------
    >>> interactivity(Q_(20, "ms"))
    <Quantity(50.0, 'token / second')>
    """
    return per(1 / time_per_output_token, "token")


@dataclass(frozen=True, repr=False)
class StreamMetrics(Result):
    """Latency metrics of one streamed response (or one per row).

    Attributes
    ----------
    ttft : Quantity [time]
        Time to first token: from the request's start to the first streamed token.
    tpot : Quantity [time]
        Time per output token: the mean gap between successive tokens.
    tbt_max : Quantity [time]
        The longest gap between successive tokens (a stall the reader sees).
    tbt_p99 : Quantity [time]
        99th percentile of the gaps.
    interactivity : Quantity [token / time]
        ``1 / tpot``.
    """

    ttft: Time
    tpot: Time
    tbt_max: Time
    tbt_p99: Time
    interactivity: TokenRate


@checked(token_times="any", request_start="any")
def stream_metrics(token_times: Time, request_start: Time) -> StreamMetrics:
    """TTFT, TPOT and the time-between-tokens tail of streamed responses from their token timestamps.

    Parameters
    ----------
    token_times : Quantity [time], array (..., tokens)
        Emission time of each streamed token, non-decreasing along the last axis (at least two).
    request_start : Quantity [time]
        When each request arrived (broadcast against the leading axes).

    Returns
    -------
    StreamMetrics

    Notes
    -----
    Section 10.2 (§10.1; self-check answer §10.18): TPOT is the *average* of the time between
    tokens (TBT), so a stream can meet its TPOT target while a single long gap stalls the reader;
    per-gap targets are stated on TBT. TTFT covers everything up to the end of prefill, including
    queueing (§10.1, answer §10.18).

    Examples
    --------
    A stream that meets a 50 ms TPOT target on average but stalls for 300 ms once:

    >>> times = Q_([0.2, 0.21, 0.22, 0.52, 0.53, 0.54, 0.55], "s")
    >>> m = stream_metrics(times, Q_(0, "s"))
    >>> round(m.tpot.m_as("ms"), 1), m.tbt_max.to("ms")
    (58.3, <Quantity(300.0, 'millisecond')>)
    """
    times = np.asarray(token_times, dtype=float)
    if times.ndim == 0 or times.shape[-1] < 2:
        raise InputError("stream_metrics(): argument 'token_times' needs at least two tokens along its last axis")
    gaps = np.diff(times, axis=-1)
    if np.any(gaps < 0):
        raise InputError("stream_metrics(): argument 'token_times' must be non-decreasing along its last axis")
    ttft = times[..., 0] - request_start
    if np.any(ttft < 0):
        raise InputError("stream_metrics(): the first token precedes 'request_start'")
    tpot = Q_(plain(gaps.mean(axis=-1)), "s")
    return StreamMetrics(
        ttft=Q_(plain(ttft), "s"),
        tpot=tpot,
        tbt_max=Q_(plain(gaps.max(axis=-1)), "s"),
        tbt_p99=Q_(plain(np.percentile(gaps, 99, axis=-1)), "s"),
        interactivity=interactivity(tpot),
    )


@formula(
    result=var("request/s", r"G_{\mathrm{SLO}}", "nonnegative", "completed requests per second that met the SLO"),
    reference="section 10.3.1 (SLO goodput)",
    completed_rate=var("request/s", r"R_{\mathrm{done}}", "nonnegative", "completed requests per second"),
    slo_attainment=var("", r"f_{\mathrm{SLO}}", "probability", "fraction of completions meeting TTFT and TPOT"),
    example={"completed_rate": "1200 request/s", "slo_attainment": 0.7},
)
def slo_goodput(completed_rate, slo_attainment):
    r"""SLO goodput: the rate of completed requests that meet both TTFT and TPOT targets.

    Parameters
    ----------
    completed_rate : Quantity [request / time]
        Completed requests per unit time, at a fixed request mix.
    slo_attainment : float
        Fraction of those completions that met every target (see :func:`slo_attainment`).

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: G_{\mathrm{SLO}} = R_{\mathrm{done}} \, f_{\mathrm{SLO}}

    Section 10.3.1 (§10.3.1; self-check §10.3.2 / answer §10.18). A request that misses its contract
    counts for nothing. Comparisons hold the request mix and the SLO fixed
    (:func:`compare_capacity`).

    Examples
    --------
    Self-check 10.3: X completes 1,200 req/s with 70 % meeting both targets.

    >>> slo_goodput(Q_(1200, "request/s"), 0.70)
    <Quantity(840.0, 'request / second')>
    """
    return completed_rate * slo_attainment


@checked(ttft_target=one("positive"), tpot_target=one("positive"))
def slo_attainment(ttft: Time, tpot: Time, ttft_target: Time, tpot_target: Time) -> float:
    """Fraction of completed requests that met both the TTFT and the TPOT target.

    Parameters
    ----------
    ttft, tpot : Quantity [time], arrays (requests,)
        Measured time to first token and time per output token of each completed request.
    ttft_target, tpot_target : Quantity [time]
        The targets (a request meets the SLO when it is at or under both).

    Returns
    -------
    float

    Examples
    --------
    >>> slo_attainment(Q_([100, 400, 200], "ms"), Q_([30, 30, 80], "ms"), Q_(300, "ms"), Q_(50, "ms"))
    0.3333333333333333
    """
    return _attainment("slo_attainment", ttft, tpot, ttft_target, tpot_target)


def _attainment(function: str, ttft: Any, tpot: Any, ttft_target: Any, tpot_target: Any) -> float:
    """The share of requests at or under both targets, from magnitudes in seconds."""
    first, gap = np.asarray(ttft), np.asarray(tpot)
    if first.shape != gap.shape or first.size == 0:
        raise InputError(f"{function}(): 'ttft' and 'tpot' must be non-empty arrays of the same shape")
    return float(((first <= ttft_target) & (gap <= tpot_target)).mean())


@checked(ttft_target=one("positive"), tpot_target=one("positive"), window=one("positive"))
def goodput_from_requests(ttft: Time, tpot: Time, ttft_target: Time, tpot_target: Time, window: Time) -> Rate:
    """SLO goodput from per-request measurements collected over a window.

    Parameters
    ----------
    ttft, tpot : Quantity [time], arrays (requests,)
        One entry per request completed in the window.
    ttft_target, tpot_target : Quantity [time]
        The targets.
    window : Quantity [time]
        Length of the measurement window.

    Returns
    -------
    Quantity [request / time]
        :func:`slo_goodput` of the window's completion rate and :func:`slo_attainment`.

    Examples
    --------
    >>> goodput_from_requests(Q_([100, 400, 200, 250], "ms"), Q_([30, 30, 40, 45], "ms"),
    ...                       Q_(300, "ms"), Q_(50, "ms"), Q_(2, "s"))
    <Quantity(1.5, 'request / second')>
    """
    attainment = _attainment("goodput_from_requests", ttft, tpot, ttft_target, tpot_target)
    completed = Q_(np.size(ttft) / window, "request/s")
    return slo_goodput(completed, attainment)
