"""Overload protection: a circuit breaker driven by a request trace (10.11.10) and retries under overload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked
from ..errors import InputError
from ..formula import check_domain, formula, var
from ..results import Result
from ..types import Count, Probability, Rate, Time
from ..units import Q_, shown

__all__ = [
    "CircuitBreakerConfig",
    "CircuitBreaker",
    "BreakerTrace",
    "simulate_circuit_breaker",
    "retry_amplification",
    "RetryEquilibrium",
    "retry_equilibrium",
    "wasted_token_fraction",
]


_DEFAULT_OPEN_INTERVAL = Q_(30, "s")


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
    latency_threshold: Time | None = None
    open_interval: Time = _DEFAULT_OPEN_INTERVAL
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


@checked(times="any", latencies="nonnegative+inf")
def simulate_circuit_breaker(
    times: Time, failures: Any, latencies: Time | None = None, config: CircuitBreakerConfig | None = None
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
    arrival = np.atleast_1d(times).astype(float)
    failed = np.atleast_1d(np.asarray(failures, dtype=bool))
    if failed.shape != arrival.shape:
        raise InputError("simulate_circuit_breaker(): 'failures' must have one entry per time")
    if np.any(np.diff(arrival) < 0):
        raise InputError("simulate_circuit_breaker(): argument 'times' must be nondecreasing")
    served = None if latencies is None else np.atleast_1d(latencies).astype(float)
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
        rejected_fraction=float(1 - admitted.mean()),
    )


# --------------------------------------------------------------------------------------------
# Retries under overload


@checked(max_retries="nonnegative_integer")
def retry_amplification(failure_probability: Probability, max_retries: Count) -> Count:
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
    if np.ndim(max_retries):
        raise InputError(f"retry_amplification(): argument 'max_retries' must be one number, got {shown(max_retries)}")
    p = np.asarray(failure_probability, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        attempts = np.where(p < 1, (1 - p ** (max_retries + 1)) / np.where(p < 1, 1 - p, 1), max_retries + 1.0)
    return float(attempts) if attempts.ndim == 0 else attempts


@dataclass(frozen=True, repr=False)
class RetryEquilibrium(Result):
    """Steady state of clients retrying against a capacity-limited service."""

    attempt_rate: Rate
    amplification: float
    failure_probability: float
    goodput: Rate
    success_fraction: float
    overloaded: bool


@checked(capacity="positive", max_retries="nonnegative_integer")
def retry_equilibrium(arrival_rate: Rate, capacity: Rate, max_retries: Count) -> RetryEquilibrium:
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
    for name, value in (("arrival_rate", arrival_rate), ("capacity", capacity), ("max_retries", max_retries)):
        if np.ndim(value):
            raise InputError(f"retry_equilibrium(): argument '{name}' must be one number, got {shown(value)}")
    rate, mu, retries = float(arrival_rate), float(capacity), int(max_retries)
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
    example={"useful_tokens": "9e6 token", "wasted_tokens": "1e6 token"},
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
