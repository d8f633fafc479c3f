"""The policies of a day in production: autoscaler, cold start, client retries, admission, failures, regions.

Each policy is a frozen dataclass checked when it is made (an :class:`~calculator.errors.InputError`
naming the argument). Times and rates are given as quantities and kept as quantities in seconds and
request/s, so ``policy.interval.m`` is seconds; the simulations read those magnitudes. The two
decisions the simulations ask of a policy are pure functions of what they are given:
:meth:`Autoscaler.decide` (the replicas wanted) and :meth:`RetryPolicy.delay` (a retry's backoff).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CalculatorError, InputError
from ..formula import magnitude
from ..results import Result
from ..routing.resilience import CircuitBreakerConfig
from ..types import MoneyRate, Time
from ..units import Q_, parse_quantity, shown
from .demand import DemandCurve

__all__ = [
    "AUTOSCALER_KINDS",
    "AUTOSCALER_METRICS",
    "Autoscaler",
    "AutoscalerState",
    "ColdStart",
    "RetryPolicy",
    "Admission",
    "Failure",
    "parse_failure",
    "parse_clock",
    "Region",
    "Scenario",
]

AUTOSCALER_KINDS = ("reactive", "predictive", "fixed")
#: What a reactive autoscaler reads, summed over ready replicas: waiting requests, running sequences,
#: KV-cache use (a fraction per replica) or utilization (busy fraction per replica).
AUTOSCALER_METRICS = ("queue", "running", "kv_use", "utilization")
JITTERS = ("full", "equal", "none")
FAILURE_KINDS = ("replica", "region", "node")
# The policies' defaults.
_0_S = Q_(0, "s")
_10_MIN = Q_(10, "min")
_120_S = Q_(120, "s")
_15_S = Q_(15, "s")
_1_GB_S = Q_(1, "GB/s")
_1_S = Q_(1, "s")
_30_S = Q_(30, "s")
_300_S = Q_(300, "s")
_5_MIN = Q_(5, "min")
_60_S = Q_(60, "s")


def _quantity(owner: str, name: str, value: Any, unit: str, domain: str = "nonnegative") -> Any:
    """``value`` checked (dimension, domain, one number) and returned as a quantity in ``unit``."""
    number = magnitude(owner, name, value, unit, domain)
    if np.ndim(number):
        raise InputError(f"{owner}: argument '{name}' must be one number, got {shown(value)}")
    return Q_(float(number), unit)


def _convert(instance: Any, owner: str, fields: Mapping[str, tuple[str, str]]) -> None:
    """Check and store each named field of a frozen dataclass as a quantity in its unit (None stays None)."""
    for name, (unit, domain) in fields.items():
        value = getattr(instance, name)
        if value is not None:
            object.__setattr__(instance, name, _quantity(owner, name, value, unit, domain))


def _whole(owner: str, name: str, value: Any, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InputError(f"{owner}: argument '{name}' must be a whole number at least {low}, got {shown(value)}")
    return int(value)


def _choice(owner: str, name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise InputError(f"{owner}: argument '{name}' must be one of {', '.join(options)}, got {shown(value)}")


# --------------------------------------------------------------------------------------------
# Autoscaler


@dataclass(frozen=True)
class AutoscalerState:
    """What an autoscaler remembers between decisions.

    ``last_up`` and ``last_down``: when it last scaled up and down (seconds); ``recommendations``: the
    ``(time, replicas)`` its rule recommended at each decision within the scale-down stabilization window,
    before stabilization (:meth:`Autoscaler.decide` keeps the highest of them).
    """

    last_up: float = -math.inf
    last_down: float = -math.inf
    recommendations: tuple[tuple[float, int], ...] = ()

    def record(self, now: float, wanted: int, current: int) -> AutoscalerState:
        """The state after a decision at ``now`` that asked ``wanted`` replicas with ``current`` ready or starting."""
        if wanted > current:
            return dataclasses.replace(self, last_up=now)
        if wanted < current:
            return dataclasses.replace(self, last_down=now)
        return self

    def recommended(self, now: float, replicas: int, window: float) -> AutoscalerState:
        """The state with the recommendation ``replicas`` at ``now`` kept and those older than ``window`` dropped."""
        kept = tuple((t, r) for t, r in self.recommendations if t > now - window)
        return dataclasses.replace(self, recommendations=(*kept, (now, replicas)))


@dataclass(frozen=True)
class Autoscaler:
    """How the fleet's replica count follows demand.

    Attributes
    ----------
    kind : str
        ``"reactive"`` (reads ``metric`` every ``interval``), ``"predictive"`` (sizes for the demand
        forecast ``lead_time`` ahead, times ``headroom``) or ``"fixed"`` (holds ``min_replicas``;
        lost replicas are replaced).
    metric : str
        One of :data:`AUTOSCALER_METRICS` (reactive).
    scale_up_at, scale_down_at : float
        The metric per ready replica above which the reactive autoscaler adds replicas and below which
        it removes them; it sizes for the midpoint of the two. Utilization and KV use are fractions.
    interval : Quantity [time]
        Time between decisions.
    cooldown : Quantity [time]
        Time after any scaling before replicas are removed (hysteresis).
    stabilization : Quantity [time]
        The scale-down stabilization window: a scale-down goes only to the highest replica count the rule
        recommended over this past window (the current decision's included), so a metric that dips for
        one decision does not shrink the fleet. Scale-ups are not stabilized. The default, 300 s, is
        Kubernetes' ``HorizontalPodAutoscaler`` ``behavior.scaleDown.stabilizationWindowSeconds``
        (autoscaling/v2 API reference, ``HorizontalPodAutoscalerBehavior.scaleDown``: "the default value is
        to allow to scale down to minReplicas pods, with a 300 second stabilization window (i.e., the
        highest recommendation for the last 300sec is used)"). 0 turns it off.
    min_replicas, max_replicas : int
        Bounds on the replicas wanted.
    warm_pool : int
        Replicas kept provisioned and loaded but not serving; a scale-up takes them first, ready after
        :attr:`ColdStart.warm_start`, and the pool refills with a cold start. Billed while idle.
    lead_time : Quantity [time]
        How far ahead the predictive autoscaler reads the forecast (at least the cold start).
    headroom : float
        Predictive: replicas for ``headroom`` times the forecast load at ``per_replica_rate``.
    """

    kind: str = "reactive"
    metric: str = "utilization"
    scale_up_at: float = 0.8
    scale_down_at: float = 0.5
    interval: Any = _30_S
    cooldown: Any = _5_MIN
    stabilization: Any = _300_S
    min_replicas: int = 1
    max_replicas: int = 10_000
    warm_pool: int = 0
    lead_time: Any = _10_MIN
    headroom: float = 1.0

    def __post_init__(self) -> None:
        owner = "Autoscaler"
        _choice(owner, "kind", self.kind, AUTOSCALER_KINDS)
        _choice(owner, "metric", self.metric, AUTOSCALER_METRICS)
        _convert(self, owner, {"interval": ("s", "positive"), "cooldown": ("s", "nonnegative")})
        _convert(self, owner, {"lead_time": ("s", "nonnegative"), "stabilization": ("s", "nonnegative")})
        for name in ("scale_up_at", "scale_down_at", "headroom"):
            object.__setattr__(self, name, float(_quantity(owner, name, getattr(self, name), "", "positive").m))
        if self.scale_down_at >= self.scale_up_at:
            raise InputError(
                f"Autoscaler: 'scale_down_at' ({self.scale_down_at:g}) must be below "
                f"'scale_up_at' ({self.scale_up_at:g})"
            )
        low = _whole(owner, "min_replicas", self.min_replicas)
        if _whole(owner, "max_replicas", self.max_replicas, max(low, 1)) < low:
            raise InputError(f"Autoscaler: 'max_replicas' must be at least 'min_replicas' ({low})")
        _whole(owner, "warm_pool", self.warm_pool)

    def clamp(self, replicas: float) -> int:
        """``replicas`` rounded up and held within ``[min_replicas, max_replicas]``."""
        return int(min(max(math.ceil(replicas - 1e-9), self.min_replicas), self.max_replicas))

    def decide(
        self,
        now: float,
        observed: float,
        ready: int,
        starting: int,
        forecast_rate: float | None = None,
        per_replica_rate: float | None = None,
        state: AutoscalerState | None = None,
    ) -> int:
        """The replica count wanted at ``now`` (seconds): ready and starting replicas together.

        ``observed`` is the metric summed over the ready replicas (reactive); ``forecast_rate`` the
        highest demand forecast from ``now`` to ``now + lead_time`` (request/s: replicas start a lead
        ahead of a rise and stop only when demand has fallen) and ``per_replica_rate`` the rate one
        replica serves at its planned load (predictive). Scale-downs go no lower than the highest
        recommendation within ``stabilization`` of ``now`` in ``state`` and wait ``cooldown`` after the
        last scaling. Pure: the same arguments give the same count. :meth:`step` also returns the state
        after the decision, which the simulations keep.
        """
        return self.step(now, observed, ready, starting, forecast_rate, per_replica_rate, state)[0]

    def step(
        self,
        now: float,
        observed: float,
        ready: int,
        starting: int,
        forecast_rate: float | None = None,
        per_replica_rate: float | None = None,
        state: AutoscalerState | None = None,
    ) -> tuple[int, AutoscalerState]:
        """:meth:`decide`'s count and the state after it (the rule's recommendation and the scaling recorded).

        As Kubernetes' HorizontalPodAutoscaler stabilizes: the rule's recommendation is recorded unstabilized;
        a count above the current one is taken at once; below it, the count is the highest recommendation
        within the window (never above the current count), and none while ``cooldown`` runs. The first
        decision counts the fleet as it stands as a recommendation (as the HorizontalPodAutoscaler seeds
        its window with the current replicas). A fixed autoscaler takes its count at once.
        """
        state = state or AutoscalerState()
        current = ready + starting
        if not state.recommendations:  # the first decision: the fleet as it stands counts as recommended now
            state = state.recommended(now, current, self.stabilization.m)
        recommended = self._recommend(observed, ready, current, forecast_rate, per_replica_rate)
        state = state.recommended(now, recommended, self.stabilization.m)
        wanted = recommended
        if wanted < current and self.kind != "fixed":  # a fixed fleet holds its count at once
            wanted = min(current, max(r for _, r in state.recommendations))
            if now - max(state.last_up, state.last_down) < self.cooldown.m:
                wanted = current
        return wanted, state.record(now, wanted, current)

    def _recommend(
        self, observed: float, ready: int, current: int, forecast_rate: float | None, per_replica_rate: float | None
    ) -> int:
        """The rule's replica count before stabilization and cooldown."""
        if self.kind == "fixed":
            return self.clamp(self.min_replicas)
        if self.kind == "predictive":
            if forecast_rate is None or not per_replica_rate:
                raise InputError(
                    "Autoscaler.decide(): a predictive autoscaler needs 'forecast_rate' and 'per_replica_rate'"
                )
            return self.clamp(forecast_rate * self.headroom / per_replica_rate)
        target = (self.scale_up_at + self.scale_down_at) / 2
        if observed > self.scale_up_at * max(current, 1):
            return max(self.clamp(observed / target), current)
        if observed < self.scale_down_at * max(ready, 1):
            return self.clamp(observed / target)
        return self.clamp(current)


# --------------------------------------------------------------------------------------------
# Cold start


@dataclass(frozen=True)
class ColdStart:
    """How long a new replica takes to serve: provisioning, artifact load, warm-up; from a warm pool, ``warm_start``.

    Attributes
    ----------
    provisioning, load, warmup : Quantity [time]
        The sequential phases of :func:`calculator.autoscaling.cold_start_time`.
    warm_start : Quantity [time]
        Time for a warm-pool replica (provisioned, weights loaded) to take traffic.
    """

    provisioning: Any = _60_S
    load: Any = _120_S
    warmup: Any = _60_S
    warm_start: Any = _15_S

    def __post_init__(self) -> None:
        _convert(
            self, "ColdStart", dict.fromkeys(("provisioning", "load", "warmup", "warm_start"), ("s", "nonnegative"))
        )

    @property
    def total(self) -> Any:
        """The cold start, provisioning + load + warm-up (eq. 16's provisioning and warm-up phases)."""
        return self.provisioning + self.load + self.warmup

    @classmethod
    def from_plan(
        cls,
        plan: Any,
        registry: Any = None,
        *,
        storage_bandwidth: Any = _1_GB_S,
        provisioning: Any = _60_S,
        warmup: Any = _60_S,
        warm_start: Any = _15_S,
    ) -> ColdStart:
        """The cold start of a plan's replica: its weight bytes (every GPU of the replica) over ``storage_bandwidth``.

        The load time is :func:`calculator.autoscaling.model_load_time` of
        :func:`calculator.memory.model_weight_bytes` at the plan's precision; each GPU of a replica
        loads its shard in parallel from storage shared at ``storage_bandwidth``, so the whole
        replica's bytes count.
        """
        from ..autoscaling import model_load_time
        from ..memory import model_weight_bytes

        if not getattr(plan, "feasible", False) or not getattr(plan, "model", ""):
            raise InputError(f"ColdStart.from_plan(): argument 'plan' must be a feasible FleetPlan, got {shown(plan)}")
        bandwidth = _quantity("ColdStart.from_plan", "storage_bandwidth", storage_bandwidth, "B/s", "positive")
        weights = model_weight_bytes(plan.model, plan.precision, registry=registry)
        return cls(provisioning, model_load_time(weights, bandwidth).to("s"), warmup, warm_start)


# --------------------------------------------------------------------------------------------
# Retries


@dataclass(frozen=True)
class RetryPolicy:
    """Clients that give up and try again.

    Attributes
    ----------
    timeout : Quantity [time]
        A client abandons an attempt that has produced no first token within this time.
    max_attempts : int
        Attempts per request, the first included (1 = never retry).
    backoff_base, backoff_cap : Quantity [time]
        The backoff before retry ``k`` (k = 1 for the second attempt) is ``min(cap, base 2^(k-1))``.
    jitter : str
        ``"full"`` (uniform on [0, backoff]), ``"equal"`` (half fixed, half uniform) or ``"none"``.
    budget : float or None
        Retries allowed as a share of first attempts (0.1: one retry per ten requests); None: unlimited.
    cancel : bool
        Whether the engine learns that a client gave up (its connection closed) and frees the attempt:
        True (the default), the abandoned attempt leaves the queue, or the batch, and its KV is freed; False,
        it keeps its place and runs to its end, its work wasted, as on an engine that does not see a closed
        connection. Both modes honour it (the fluid mode keeps abandoned attempts in its queue, served ahead
        of the later ones, counted neither served nor met).
    """

    timeout: Any = _30_S
    max_attempts: int = 3
    backoff_base: Any = _1_S
    backoff_cap: Any = _30_S
    jitter: str = "full"
    budget: float | None = None
    cancel: bool = True

    def __post_init__(self) -> None:
        owner = "RetryPolicy"
        _convert(self, owner, {"timeout": ("s", "positive"), "backoff_base": ("s", "nonnegative")})
        _convert(self, owner, {"backoff_cap": ("s", "nonnegative")})
        _whole(owner, "max_attempts", self.max_attempts, 1)
        _choice(owner, "jitter", self.jitter, JITTERS)
        if not isinstance(self.cancel, bool | np.bool_):
            raise InputError(f"{owner}: argument 'cancel' must be True or False, got {shown(self.cancel)}")
        object.__setattr__(self, "cancel", bool(self.cancel))
        if self.budget is not None:
            object.__setattr__(self, "budget", float(_quantity(owner, "budget", self.budget, "").m))

    def backoff(self, attempt: int) -> float:
        """The backoff ceiling (seconds) before retry ``attempt`` (1 = the first retry)."""
        _whole("RetryPolicy.backoff", "attempt", attempt, 1)
        return min(self.backoff_cap.m, self.backoff_base.m * 2.0 ** (attempt - 1))

    def delay(self, attempt: int, rng: np.random.Generator | None = None) -> float:
        """One draw of the delay (seconds) before retry ``attempt``, with the policy's jitter."""
        ceiling = self.backoff(attempt)
        if self.jitter == "none":
            return ceiling
        draw = (rng or np.random.default_rng()).random()
        return ceiling * draw if self.jitter == "full" else ceiling * (0.5 + 0.5 * draw)

    def mean_delay(self, attempt: int) -> float:
        """The expected delay (seconds) before retry ``attempt``: what the fluid mode delays its retry flow by."""
        share = {"full": 0.5, "equal": 0.75, "none": 1.0}[self.jitter]
        return share * self.backoff(attempt)


# --------------------------------------------------------------------------------------------
# Admission and overload control


@dataclass(frozen=True)
class Admission:
    """Overload control at the front door.

    Attributes
    ----------
    max_queue : float or None
        Waiting requests allowed per ready replica; arrivals beyond it are shed. None: unlimited.
    deadline : Quantity [time] or None
        Shed an arrival whose predicted wait exceeds it. None: off.
    breaker : CircuitBreakerConfig or None
        A circuit breaker in front of the fleet (:class:`calculator.routing.resilience.CircuitBreaker`).
    classes : tuple of (str, float)
        Priority classes and their shares of demand, highest priority first; shedding takes the lowest first.
    """

    max_queue: float | None = None
    deadline: Any = None
    breaker: CircuitBreakerConfig | None = None
    classes: tuple[tuple[str, float], ...] = (("default", 1.0),)

    def __post_init__(self) -> None:
        owner = "Admission"
        if self.max_queue is not None:
            object.__setattr__(self, "max_queue", float(_quantity(owner, "max_queue", self.max_queue, "").m))
        _convert(self, owner, {"deadline": ("s", "positive")})
        if self.breaker is not None and not isinstance(self.breaker, CircuitBreakerConfig):
            raise InputError(f"{owner}: argument 'breaker' must be a CircuitBreakerConfig, got {shown(self.breaker)}")
        classes = tuple(tuple(c) for c in self.classes)
        if not classes or any(len(c) != 2 or not isinstance(c[0], str) for c in classes):
            raise InputError(f"{owner}: argument 'classes' must be (name, share) pairs, got {shown(self.classes)}")
        shares = np.array([float(_quantity(owner, f"classes[{c[0]!r}]", c[1], "", "positive").m) for c in classes])
        if abs(shares.sum() - 1) > 1e-9:
            raise InputError(f"{owner}: the shares of 'classes' must sum to 1, got {shares.sum():g}")
        object.__setattr__(self, "classes", tuple((c[0], float(s)) for c, s in zip(classes, shares, strict=True)))

    @property
    def shares(self) -> np.ndarray:
        """The classes' shares of demand, highest priority first."""
        return np.array([share for _, share in self.classes])


# --------------------------------------------------------------------------------------------
# Failures and regions


@dataclass(frozen=True)
class Failure:
    """A scheduled failure.

    Attributes
    ----------
    kind : str
        ``"replica"`` (``target`` replicas lost; their running requests fail), ``"node"`` (``target`` nodes
        lost, with every replica they carry: :meth:`replicas_lost`) or ``"region"`` (the region named
        ``target`` is down).
    at : Quantity [time]
        When it happens, from the start of the run.
    duration : Quantity [time] or None
        How long it lasts; None: to the end of the run. Lost replicas are replaced by the autoscaler
        (with a cold start); a region's replicas come back, cold, when the region recovers.
    target : str or int
    """

    kind: str
    at: Any
    duration: Time | None = None
    target: str | int = 1

    def __post_init__(self) -> None:
        _choice("Failure", "kind", self.kind, FAILURE_KINDS)
        _convert(self, "Failure", {"at": ("s", "nonnegative"), "duration": ("s", "positive")})
        if self.kind == "region":
            if not isinstance(self.target, str) or not self.target:
                raise InputError(
                    f"Failure: a region failure's 'target' must be a region name, got {shown(self.target)}"
                )
        else:
            _whole("Failure", "target", self.target, 1)

    @property
    def end(self) -> float:
        """When it ends, seconds (infinity if it lasts to the end of the run)."""
        return math.inf if self.duration is None else self.at.m + self.duration.m

    def replicas_lost(self, per_node: int) -> int:
        """Replicas a replica or node failure takes: ``target``, or ``target`` nodes of ``per_node`` replicas each.

        >>> parse_failure("node:2@14:00").replicas_lost(per_node=4)  # two nodes of 8 GPUs, TP 2
        8
        """
        if self.kind == "region":
            raise InputError("Failure.replicas_lost(): a region failure takes the region's replicas, not a count")
        return int(self.target) * (int(per_node) if self.kind == "node" else 1)


_CLOCK = re.compile(r"^(?:(\d+)d)?(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def parse_clock(text: str, what: str = "time") -> Any:
    """``[Nd]HH:MM[:SS]`` (day N from 0) as a quantity of seconds from the start of the run."""
    found = _CLOCK.match(text.strip()) if isinstance(text, str) else None
    if not found or int(found[2]) > 23 or int(found[3]) > 59 or int(found[4] or 0) > 59:
        raise InputError(f"the {what} must read HH:MM, HH:MM:SS or 2d14:00 (day 2), got {shown(text)}")
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return Q_(days * 86_400 + hours * 3600 + minutes * 60 + seconds, "s")


def parse_failure(text: str) -> Failure:
    """A failure written ``KIND:TARGET@WHEN[+DURATION]``.

    ``region:us-east@14:00+2h`` (the region us-east fails at 14:00 for two hours),
    ``replicas:4@09:30`` (four replicas lost at 09:30), ``node:1@1d03:00+30min`` (one node lost, with the
    replicas it carries, on the second day at 03:00, for half an hour).

    Examples
    --------
    >>> parse_failure("region:us-east@14:00+2h")
    Failure(kind='region', at=<Quantity(50400.0, 'second')>, duration=<Quantity(7200.0, 'second')>, target='us-east')
    """
    found = re.match(r"^\s*(\w+):([\w.-]+)@([^+]+)(?:\+(.+))?$", text) if isinstance(text, str) else None
    if not found:
        raise InputError(
            f"a failure must read KIND:TARGET@HH:MM[+DURATION] (region:us-east@14:00+2h), got {shown(text)}"
        )
    kind, target, when, lasting = found.groups()
    kind = {"replicas": "replica"}.get(kind, kind)
    if kind not in FAILURE_KINDS:
        raise InputError(f"a failure's kind must be one of {', '.join(FAILURE_KINDS)} (or replicas), got {kind!r}")
    duration: Time | None = None
    if lasting is not None:
        try:
            duration = parse_quantity(lasting.strip(), "s", what="a failure's duration")
        except CalculatorError:
            raise InputError(f"a failure's duration must be a time such as 2h or 30min, got {lasting!r}") from None
    if kind != "region":
        if not target.isdigit():
            raise InputError(f"a {kind} failure's target must be a count of {kind}s, got {target!r}")
        target = int(target)
    return Failure(kind, parse_clock(when, "failure time"), duration, target)


@dataclass(frozen=True)
class Region:
    """A pool of replicas near a share of the users.

    Attributes
    ----------
    name : str
    share : float
        Share of demand arising near this region.
    replicas : int
        Replicas at the start of the run.
    round_trip : Quantity [time] or mapping of region name to Quantity
        Round trip from this region's users to each region's pool (a scalar: to every other region;
        the region's own pool is at 0 unless the mapping names it).
    """

    name: str
    share: float = 1.0
    replicas: int = 1
    round_trip: Any = _0_S

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"Region: argument 'name' must be a region name, got {shown(self.name)}")
        object.__setattr__(self, "share", float(_quantity("Region", "share", self.share, "", "probability").m))
        _whole("Region", "replicas", self.replicas)
        if isinstance(self.round_trip, Mapping):
            trips = {str(k): _quantity("Region", f"round_trip[{k!r}]", v, "s") for k, v in self.round_trip.items()}
            object.__setattr__(self, "round_trip", trips)
        else:
            object.__setattr__(self, "round_trip", _quantity("Region", "round_trip", self.round_trip, "s"))

    def trip_to(self, other: str) -> float:
        """Round trip in seconds from this region's users to the pool of ``other``."""
        if isinstance(self.round_trip, dict):
            if other in self.round_trip:
                return float(self.round_trip[other].m)
            if other == self.name:
                return 0.0
            raise InputError(f"Region {self.name!r}: 'round_trip' names no time to region {other!r}")
        return 0.0 if other == self.name else float(self.round_trip.m)


# --------------------------------------------------------------------------------------------
# Scenario


@dataclass(frozen=True, repr=False)
class Scenario(Result):
    """Everything a day in production is run with, besides the plan.

    Attributes
    ----------
    demand : DemandCurve
    autoscaler : Autoscaler
    cold_start : ColdStart
    retry : RetryPolicy
    admission : Admission
    failures : tuple of Failure
    regions : tuple of Region
        Empty: one pool holding the plan's replicas.
    price : Quantity [currency / time] or None
        Per GPU-hour; None: the plan's.
    window : Quantity [time]
        The reporting window (default five minutes).
    duration : Quantity [time] or None
        Length of the run; None: the demand curve's.
    goal : float or None
        The attainment a window must reach to meet the targets; None: the plan's highest target
        percentile, or 0.5 (the median request) for mean targets (:func:`~calculator.dynamics.attainment_goal`).
    """

    demand: DemandCurve
    autoscaler: Autoscaler = field(default_factory=Autoscaler)
    cold_start: ColdStart = field(default_factory=ColdStart)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    admission: Admission = field(default_factory=Admission)
    failures: tuple[Failure, ...] = ()
    regions: tuple[Region, ...] = ()
    price: MoneyRate | None = None
    window: Time = _5_MIN
    duration: Time | None = None
    goal: float | None = None

    def __post_init__(self) -> None:
        owner = "Scenario"
        for name, kind in (
            ("demand", DemandCurve),
            ("autoscaler", Autoscaler),
            ("cold_start", ColdStart),
            ("retry", RetryPolicy),
            ("admission", Admission),
        ):
            if not isinstance(getattr(self, name), kind):
                raise InputError(
                    f"{owner}: argument '{name}' must be a {kind.__name__}, got {shown(getattr(self, name))}"
                )
        object.__setattr__(self, "failures", tuple(self.failures))
        object.__setattr__(self, "regions", tuple(self.regions))
        if not all(isinstance(f, Failure) for f in self.failures):
            raise InputError(f"{owner}: argument 'failures' must hold Failure records, got {shown(self.failures)}")
        self._check_regions()
        _convert(self, owner, {"price": ("USD/hour", "nonnegative"), "window": ("s", "positive")})
        _convert(self, owner, {"duration": ("s", "positive")})
        if self.goal is not None:
            goal = float(_quantity(owner, "goal", self.goal, "", "probability").m)
            if goal <= 0:
                raise InputError(f"{owner}: argument 'goal' must be above 0, got {goal:g}")
            object.__setattr__(self, "goal", goal)

    def _check_regions(self) -> None:
        if not all(isinstance(r, Region) for r in self.regions):
            raise InputError(f"Scenario: argument 'regions' must hold Region records, got {shown(self.regions)}")
        names = [r.name for r in self.regions]
        if len(set(names)) != len(names):
            raise InputError(f"Scenario: the regions' names must differ, got {names}")
        if self.regions and abs(sum(r.share for r in self.regions) - 1) > 1e-9:
            raise InputError("Scenario: the regions' shares of demand must sum to 1")
        for failure in self.failures:
            if failure.kind == "region" and failure.target not in names:
                known = f"the regions are {', '.join(names)}" if names else "argument 'regions' names none"
                raise InputError(f"Scenario: the failure names region {failure.target!r}; {known}")

    @property
    def seconds(self) -> float:
        """Length of the run in seconds."""
        return float(self.duration.m) if self.duration is not None else float(self.demand.times[-1])
