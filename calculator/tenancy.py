"""Multi-tenancy and isolation (section 10.12).

KV-pool contention between tenants, noisy-neighbor bursts, max-min fair sharing by water filling,
dominant resource fairness by progressive filling, the multidimensional quota check of Listing 1
with an atomic reservation ledger, priority classes (Table 19) and bulkhead partitions
(Example 10.10).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._support import checked, instance, mapping, numbers, one, scalar
from .errors import InputError
from .formula import check_domain
from .results import Result, floor_count
from .types import Bytes, Count, Number, Rate, Time, Tokens
from .units import Q_, shown, ureg

if TYPE_CHECKING:
    from pint import Quantity

__all__ = [
    "KvPoolContention",
    "kv_pool_contention",
    "TenantBurst",
    "tenant_burst",
    "FairAllocation",
    "max_min_fair",
    "DrfAllocation",
    "dominant_resource_fairness",
    "TenantQuota",
    "TenantUsage",
    "QuotaRequest",
    "QuotaDecision",
    "check_quota",
    "Reservation",
    "QuotaLedger",
    "PriorityClass",
    "PRIORITY_CLASSES",
    "can_preempt",
    "priority_allocation",
    "bulkhead_partition",
    "RequestCaps",
    "check_request_caps",
    "TokenBucket",
    "RateLimitDecision",
    "HierarchicalRateLimiter",
]


# --------------------------------------------------------------------------------------------
# Noisy neighbors (section 10.12.1)


@dataclass(frozen=True, repr=False)
class KvPoolContention(Result):
    """Concurrent sequences per tenant with fair KV shares and after one tenant grows its allocation."""

    fair_share: Bytes
    sequences_fair: int
    remaining_per_tenant: Bytes
    sequences_after: int
    reduction: float


@checked(pool=one("positive"), tenants=one(), kv_bytes_per_sequence=one("positive"), hog_allocation=one())
def kv_pool_contention(
    pool: Bytes, tenants: Count, kv_bytes_per_sequence: Bytes, hog_allocation: Bytes
) -> KvPoolContention:
    r"""Concurrency left to the other tenants when one tenant takes ``hog_allocation`` of a shared KV pool.

    Parameters
    ----------
    pool : Quantity [information]
        Shared KV-cache pool.
    tenants : int
        Tenants sharing it (at least 2); nominal shares are equal.
    kv_bytes_per_sequence : Quantity [information]
        KV bytes one of the other tenants' sequences holds.
    hog_allocation : Quantity [information]
        KV the growing tenant ends up holding (no enforced limit).

    Returns
    -------
    KvPoolContention

    Notes
    -----
    .. math:: n_{\mathrm{fair}} = \left\lfloor \frac{P / T}{m} \right\rfloor, \quad
              n_{\mathrm{after}} = \left\lfloor \frac{(P - H)/(T - 1)}{m} \right\rfloor

    §10.12.1. This is a concurrency loss, not a throughput prediction: the effect on throughput
    depends on the execution regime and preemption costs.

    Examples
    --------
    Three tenants on a 60 GB pool with 0.1 GB sequences; one grows to 45 GB (§10.12.1):

    >>> c = kv_pool_contention(Q_(60, "GB"), 3, Q_(0.1, "GB"), Q_(45, "GB"))
    >>> c.sequences_fair, c.sequences_after, c.reduction
    (200, 75, 0.625)
    """
    function = "kv_pool_contention"
    if np.any(np.asarray(tenants) < 2):
        raise InputError(f"{function}(): argument 'tenants' must be >= 2, got {shown(tenants)}")
    if hog_allocation > pool:
        raise InputError(
            f"{function}(): argument 'hog_allocation' ({Q_(hog_allocation, 'B').to('GB'):g~P}) exceeds the pool "
            f"({Q_(pool, 'B').to('GB'):g~P})"
        )
    fair = pool / tenants
    remaining = (pool - hog_allocation) / (tenants - 1)
    before = floor_count(fair / kv_bytes_per_sequence)
    after = floor_count(remaining / kv_bytes_per_sequence)
    return KvPoolContention(
        fair_share=Q_(fair, "B").to("GB"),
        sequences_fair=before,
        remaining_per_tenant=Q_(remaining, "B").to("GB"),
        sequences_after=after,
        reduction=1 - after / before if before else 0.0,
    )


@dataclass(frozen=True, repr=False)
class TenantBurst(Result):
    """Pool load when one tenant bursts, with and without a per-tenant quota."""

    pool_rate: Rate
    pool_utilization: float | None
    admitted: Rate
    throttled_rate: Rate


@checked(bursting_tenant="nonnegative_integer", pool_capacity="positive")
def tenant_burst(
    rates: Rate,
    bursting_tenant: Count,
    multiplier: Number,
    pool_capacity: Rate | None = None,
    quota: Rate | None = None,
) -> TenantBurst:
    r"""Offered pool load when one tenant multiplies its traffic, optionally capped by a quota.

    Parameters
    ----------
    rates : Quantity [request / time], array
        Baseline rate of every tenant.
    bursting_tenant : int
        Index of the tenant that bursts.
    multiplier : float
        Burst factor (5 in Example 10.9 and section 10.16).
    pool_capacity : Quantity [request / time], optional
        Pool service capacity, for the utilization.
    quota : Quantity [request / time], optional
        Per-tenant rate quota; admitted traffic above it is throttled (rejected or delayed).

    Returns
    -------
    TenantBurst

    Notes
    -----
    .. math:: \lambda' = \sum_i \lambda_i + (m - 1)\lambda_b, \qquad
              \lambda'_{\mathrm{quota}} = \sum_{i \ne b} \lambda_i + \min(m\lambda_b, q)

    The chapter's latency outcomes (p99 of 22-45 ms without quotas, 15 ms with them) are scenario
    assertions with no service model; this gives the load that a queueing model turns into latency.

    Examples
    --------
    Example 10.9: ten tenants at 100 QPS, tenant 3 bursts 5x, quota 120 QPS.

    >>> rates = Q_([100] * 10, "request/s")
    >>> tenant_burst(rates, 3, 5).pool_rate, tenant_burst(rates, 3, 5, quota=Q_(120, "request/s")).pool_rate
    (<Quantity(1400.0, 'request / second')>, <Quantity(1020.0, 'request / second')>)
    """
    function = "tenant_burst"
    base = np.atleast_1d(rates).astype(float)
    if np.ndim(bursting_tenant) or not bursting_tenant < base.size:
        raise InputError(f"{function}(): argument 'bursting_tenant' must index one of {base.size} tenants")
    for name, value in (("multiplier", multiplier), ("pool_capacity", pool_capacity)):
        if value is not None and np.ndim(value):
            raise InputError(f"{function}(): argument '{name}' must be one number, got {shown(value)}")
    offered = base.copy()
    offered[int(bursting_tenant)] *= multiplier
    admitted = offered.copy()
    if quota is not None:
        admitted = np.minimum(offered, quota)
    total = float(admitted.sum())
    utilization = None
    if pool_capacity is not None:
        utilization = total / float(pool_capacity)
    return TenantBurst(
        pool_rate=Q_(total, "request/s"),
        pool_utilization=utilization,
        admitted=Q_(admitted, "request/s"),
        throttled_rate=Q_(float((offered - admitted).sum()), "request/s"),
    )


# --------------------------------------------------------------------------------------------
# Fair sharing (section 10.12.2)


@dataclass(frozen=True, repr=False)
class FairAllocation(Result):
    """Max-min fair allocation: per-tenant amounts, the water level per unit weight, who is satisfied."""

    allocation: Quantity | np.ndarray
    level: Quantity | float
    satisfied: np.ndarray


@checked(weights="positive")
def max_min_fair(demands: Any, capacity: Any, weights: Number | None = None) -> FairAllocation:
    r"""Weighted max-min fair allocation of one divisible resource by water filling.

    Parameters
    ----------
    demands : Quantity array (or plain array)
        What each tenant asks for.
    capacity : Quantity (same dimension)
        What the pool has.
    weights : array of float, optional
        Relative shares (equal if omitted).

    Returns
    -------
    FairAllocation
        ``allocation`` per tenant (never above its demand, summing to at most the capacity, and
        to the capacity whenever total demand exceeds it), ``level`` (allocation per unit weight of every
        unsatisfied tenant) and the ``satisfied`` mask.

    Notes
    -----
    .. math:: a_i = \min(d_i, w_i L), \qquad \sum_i \min(d_i, w_i L) = \min\left(C, \sum_i d_i\right)

    Progressive filling: every unsatisfied tenant gets the same share per unit weight of what
    remains, capped at its demand (§10.12.2). Dominant resource fairness reduces to this when one
    resource binds (:func:`dominant_resource_fairness`).

    Examples
    --------
    §10.12.2: demands of 30,000, 20,000 and 80,000 tokens/s on a 100,000 tokens/s pool.

    >>> max_min_fair(Q_([30000, 20000, 80000], "token/s"), Q_(100000, "token/s")).allocation
    <Quantity([30000. 20000. 50000.], 'token / second')>
    """
    function = "max_min_fair"
    unit = demands.units if isinstance(demands, ureg.Quantity) else None
    if unit is not None:
        if not isinstance(capacity, ureg.Quantity) or capacity.dimensionality != demands.dimensionality:
            raise InputError(
                f"{function}(): 'capacity' must have the dimension of 'demands' ({demands.dimensionality})"
            )
        d = np.atleast_1d(demands.m_as(unit)).astype(float)
        c = float(capacity.m_as(unit))
    else:
        if isinstance(capacity, ureg.Quantity):
            raise InputError(f"{function}(): 'demands' and 'capacity' must both be quantities or both numbers")
        d = numbers(function, "demands", demands)
        c = scalar(function, "capacity", capacity)
    if d.ndim != 1 or d.size == 0:
        raise InputError(f"{function}(): argument 'demands' must be a non-empty 1-D array")
    check_domain(function, "demands", d, "nonnegative")
    check_domain(function, "capacity", c, "nonnegative")
    w = np.ones_like(d) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != d.shape:
        raise InputError(f"{function}(): argument 'weights' must have one entry per demand")
    ratio = d / w
    order = np.argsort(ratio, kind="stable")
    sorted_demand, sorted_weight, sorted_ratio = d[order], w[order], ratio[order]
    before = np.concatenate([[0.0], np.cumsum(sorted_demand)[:-1]])
    weight_left = np.cumsum(sorted_weight[::-1])[::-1]
    levels = (c - before) / weight_left
    capped = np.nonzero(levels < sorted_ratio)[0]
    level = float(levels[capped[0]]) if capped.size else float(sorted_ratio[-1])
    allocation = np.minimum(d, w * level)
    satisfied = allocation >= d * (1 - 1e-12)
    wrap = (lambda x: Q_(x, unit)) if unit is not None else (lambda x: x)
    return FairAllocation(allocation=wrap(allocation), level=wrap(level), satisfied=satisfied)


@dataclass(frozen=True, repr=False)
class DrfAllocation(Result):
    """Dominant-resource-fair allocation: tasks per user, dominant shares and resource usage."""

    tasks: np.ndarray
    dominant_shares: np.ndarray
    usage: dict[str, Quantity]
    saturated: tuple[str, ...]


@checked(max_tasks="nonnegative+inf")
def dominant_resource_fairness(
    capacities: Mapping[str, Any], demands: Sequence[Mapping[str, Any]], max_tasks: Number | None = None
) -> DrfAllocation:
    r"""Dominant resource fairness by progressive filling over divisible tasks.

    Parameters
    ----------
    capacities : mapping of str to Quantity
        Capacity of each resource (``{"prefill": Q_(2e5, "token/s"), "kv": Q_(60, "GB")}``).
    demands : sequence of mappings of str to Quantity
        Per user, what one unit of its work (a "task": a request, a token/s of decode) needs of each
        resource; resources a user does not name it does not use.
    max_tasks : array of float, optional
        Work each user wants (its demand cap); unlimited if omitted or infinite.

    Returns
    -------
    DrfAllocation

    Notes
    -----
    Each user's dominant share is :math:`s_i = x_i \max_r d_{ir}/C_r`. All unfrozen users' dominant
    shares rise together; a user freezes when it reaches its demand, and every user of a resource
    freezes when that resource saturates (Ghodsi et al. 2011). With one resource and equal costs this
    is max-min fairness (§10.12.2). Coupled prefill, decode and memory limits need this joint check:
    independent per-resource fair shares do not compose into a feasible service.

    Examples
    --------
    >>> alloc = dominant_resource_fairness(
    ...     {"cpu": Q_(9, ""), "memory": Q_(18, "GB")},
    ...     [{"cpu": Q_(1, ""), "memory": Q_(4, "GB")}, {"cpu": Q_(3, ""), "memory": Q_(1, "GB")}])
    >>> alloc.tasks.round(6).tolist()  # Ghodsi et al.'s example: 3 and 2 tasks
    [3.0, 2.0]
    """
    function = "dominant_resource_fairness"
    names = tuple(mapping(function, "capacities", capacities))
    if (
        isinstance(demands, str)
        or not isinstance(demands, Sequence)
        or not all(isinstance(d, Mapping) for d in demands)
    ):
        raise InputError(
            f"{function}(): argument 'demands' must be a list of mappings (one per user), got {shown(demands)}"
        )
    if not names:
        raise InputError(f"{function}(): argument 'capacities' must name at least one resource")
    if not demands:
        raise InputError(f"{function}(): argument 'demands' must list at least one user")
    capacity = np.array([float(Q_(capacities[r]).m_as(Q_(capacities[r]).units)) for r in names])
    check_domain(function, "capacities", capacity, "positive")
    need = np.zeros((len(demands), len(names)))
    for i, user in enumerate(demands):
        unknown = set(user) - set(names)
        if unknown:
            raise InputError(f"{function}(): user {i} demands unknown resource(s) {sorted(unknown)}")
        for j, resource in enumerate(names):
            if resource in user:
                amount = Q_(user[resource])
                unit = Q_(capacities[resource]).units
                if amount.dimensionality != Q_(1, unit).dimensionality:
                    raise InputError(
                        f"{function}(): user {i} demand for '{resource}' must have the dimension of its capacity"
                    )
                need[i, j] = amount.m_as(unit)
    check_domain(function, "demands", need, "nonnegative")
    per_task_share = (need / capacity).max(axis=1)
    if np.any(per_task_share <= 0):
        raise InputError(f"{function}(): every user must need some of at least one resource")
    cap = np.full(len(demands), np.inf) if max_tasks is None else np.asarray(max_tasks, dtype=float)
    if cap.shape != (len(demands),):
        raise InputError(f"{function}(): argument 'max_tasks' must have one entry per user")
    tasks = np.zeros(len(demands))
    active = cap > 0
    saturated: list[str] = []
    share = 0.0
    while active.any():  # at most users + resources events
        used = tasks @ need
        rate = (need[active] / per_task_share[active, None]).sum(axis=0)  # resource use per unit of share
        with np.errstate(divide="ignore", invalid="ignore"):
            to_saturate = np.where(rate > 0, (capacity - used) / rate, np.inf)
        to_cap = cap[active] * per_task_share[active] - share
        step = min(to_saturate.min(), to_cap.min())
        share += max(step, 0.0)
        tasks[active] = share / per_task_share[active]
        done = np.zeros_like(active)
        done[np.flatnonzero(active)[to_cap <= step * (1 + 1e-12) + 1e-15]] = True
        for j in np.flatnonzero(to_saturate <= step * (1 + 1e-12) + 1e-15).tolist():
            saturated.append(names[j])
            done |= active & (need[:, j] > 0)
        active &= ~done
    usage = tasks @ need
    return DrfAllocation(
        tasks=tasks,
        dominant_shares=tasks * per_task_share,
        usage={r: Q_(usage[j], Q_(capacities[r]).units) for j, r in enumerate(names)},
        saturated=tuple(dict.fromkeys(saturated)),
    )


# --------------------------------------------------------------------------------------------
# Quotas (Listing 1)

_LISTING_1_KV = Q_(20_000, "MB")
_NO_KV = Q_(0, "MB")
_REQUEST_TIME_CAP = Q_(30, "s")


@dataclass(frozen=True)
class TenantQuota:
    """Per-tenant limits of Listing 1 (§10.12.2); KV in bytes, tokens as counts."""

    max_concurrent_requests: int = 100
    max_kv_cache: Bytes = _LISTING_1_KV
    max_qps: int = 1000
    max_input_tokens_per_minute: int = 10**9
    max_output_tokens_per_minute: int = 10**9
    max_batch_tokens: int = 50_000


@dataclass(frozen=True)
class TenantUsage:
    """A tenant's current use, including outstanding reservations in their time windows."""

    concurrent: int = 0
    kv_cache: Bytes = _NO_KV
    requests_last_second: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class QuotaRequest:
    """What one request would consume: KV reserved for prompt and output budget, tokens, prefill chunk."""

    reserved_kv: Bytes = _NO_KV
    input_tokens: int = 0
    max_output_tokens: int = 0
    prefill_chunk_tokens: int = 0


@dataclass(frozen=True, repr=False)
class QuotaDecision(Result):
    """Admission verdict: the limit that rejected the request (``None`` if admitted) and why."""

    admitted: bool
    limit: str | None
    reason: str
    reservation: Reservation | None = None


#: Listing 1's checks, in its order: (limit name, message).
QUOTA_LIMITS = (
    ("max_concurrent_requests", "concurrent request limit"),
    ("max_kv_cache", "memory limit"),
    ("max_qps", "rate limit"),
    ("max_input_tokens_per_minute", "input-token limit"),
    ("max_output_tokens_per_minute", "output-token limit"),
    ("max_batch_tokens", "prefill chunk exceeds batch-token limit"),
)


def check_quota(quota: TenantQuota, usage: TenantUsage, request: QuotaRequest) -> QuotaDecision:
    """Listing 1's snapshot check: the first limit the request would exceed, or admission.

    Parameters
    ----------
    quota : TenantQuota
    usage : TenantUsage
    request : QuotaRequest

    Returns
    -------
    QuotaDecision

    Notes
    -----
    A passing snapshot is not an admission guarantee: simultaneous callers can see the same free
    capacity (§10.12.2). Use :class:`QuotaLedger` to check and reserve atomically.

    Examples
    --------
    >>> check_quota(TenantQuota(), TenantUsage(concurrent=100), QuotaRequest()).reason
    'concurrent request limit'
    >>> check_quota(TenantQuota(), TenantUsage(concurrent=99), QuotaRequest()).admitted
    True
    """
    instance("check_quota", "quota", quota, TenantQuota, "a TenantQuota")
    instance("check_quota", "usage", usage, TenantUsage, "a TenantUsage")
    instance("check_quota", "request", request, QuotaRequest, "a QuotaRequest")
    exceeded = {
        "max_concurrent_requests": usage.concurrent + 1 > quota.max_concurrent_requests,
        "max_kv_cache": Q_(usage.kv_cache) + Q_(request.reserved_kv) > Q_(quota.max_kv_cache),
        "max_qps": usage.requests_last_second + 1 > quota.max_qps,
        "max_input_tokens_per_minute": usage.input_tokens + request.input_tokens > quota.max_input_tokens_per_minute,
        "max_output_tokens_per_minute": usage.output_tokens + request.max_output_tokens
        > quota.max_output_tokens_per_minute,
        "max_batch_tokens": request.prefill_chunk_tokens > quota.max_batch_tokens,
    }
    for limit, message in QUOTA_LIMITS:
        if exceeded[limit]:
            return QuotaDecision(admitted=False, limit=limit, reason=message)
    return QuotaDecision(admitted=True, limit=None, reason="eligible (snapshot; nothing reserved)")


@dataclass(frozen=True)
class Reservation:
    """Resources held for one admitted request until :meth:`QuotaLedger.release` or :meth:`QuotaLedger.rollback`."""

    tenant: str
    request: QuotaRequest
    time: float
    ticket: int


@dataclass
class _TenantState:
    concurrent: int = 0
    kv_bytes: float = 0.0
    arrivals: deque = field(default_factory=deque)  # (time, ticket)
    input_events: deque = field(default_factory=deque)  # (time, ticket, tokens)
    output_events: deque = field(default_factory=deque)


class QuotaLedger:
    """Atomic check-and-reserve admission against Listing 1's quotas (§10.12.2).

    :meth:`try_reserve` checks every limit and records the reservation under one lock, so concurrent
    callers can never both take the last unit of capacity. :meth:`release` returns the concurrency
    and KV reservation when a request completes or is canceled (its tokens stay counted in their
    one-minute windows and its arrival in the one-second window); :meth:`rollback` undoes an admission
    that failed downstream completely.

    Parameters
    ----------
    quotas : mapping of str to TenantQuota
        Limits per tenant id.

    Examples
    --------
    >>> ledger = QuotaLedger({"acme": TenantQuota(max_concurrent_requests=1)})
    >>> first = ledger.try_reserve("acme", QuotaRequest(), now=0.0)
    >>> first.admitted, ledger.try_reserve("acme", QuotaRequest(), now=0.1).reason
    (True, 'concurrent request limit')
    >>> ledger.release(first.reservation)
    >>> ledger.try_reserve("acme", QuotaRequest(), now=0.2).admitted
    True
    """

    def __init__(self, quotas: Mapping[str, TenantQuota]) -> None:
        self.quotas = dict(quotas)
        self._state = {tenant: _TenantState() for tenant in self.quotas}
        self._lock = threading.Lock()
        self._tickets = 0
        self._open: set[int] = set()

    def _tenant(self, tenant: str) -> _TenantState:
        if tenant not in self._state:
            raise InputError(f"QuotaLedger: unknown tenant {tenant!r}; known: {sorted(self._state)}")
        return self._state[tenant]

    @staticmethod
    def _expire(state: _TenantState, now: float) -> None:
        while state.arrivals and state.arrivals[0][0] <= now - 1.0:
            state.arrivals.popleft()
        for events in (state.input_events, state.output_events):
            while events and events[0][0] <= now - 60.0:
                events.popleft()

    def usage(self, tenant: str, now: float) -> TenantUsage:
        """The tenant's usage at time ``now`` (seconds), reservations included."""
        with self._lock:
            return self._usage(tenant, now)

    def _usage(self, tenant: str, now: float) -> TenantUsage:
        state = self._tenant(tenant)
        self._expire(state, now)
        return TenantUsage(
            concurrent=state.concurrent,
            kv_cache=Q_(state.kv_bytes, "B").to("MB"),
            requests_last_second=len(state.arrivals),
            input_tokens=sum(e[2] for e in state.input_events),
            output_tokens=sum(e[2] for e in state.output_events),
        )

    def try_reserve(self, tenant: str, request: QuotaRequest, now: float) -> QuotaDecision:
        """Check every limit and, if all pass, reserve the request's resources, atomically."""
        with self._lock:
            usage = self._usage(tenant, now)
            decision = check_quota(self.quotas[tenant], usage, request)
            if not decision.admitted:
                return decision
            state = self._state[tenant]
            self._tickets += 1
            ticket = self._tickets
            state.concurrent += 1
            state.kv_bytes += float(Q_(request.reserved_kv).m_as("B"))
            state.arrivals.append((now, ticket))
            state.input_events.append((now, ticket, request.input_tokens))
            state.output_events.append((now, ticket, request.max_output_tokens))
            self._open.add(ticket)
            reservation = Reservation(tenant=tenant, request=request, time=now, ticket=ticket)
            return QuotaDecision(admitted=True, limit=None, reason="admitted and reserved", reservation=reservation)

    def release(self, reservation: Reservation) -> None:
        """Return a finished or canceled request's concurrency slot and KV reservation."""
        with self._lock:
            self._close(reservation)

    def rollback(self, reservation: Reservation) -> None:
        """Undo an admission entirely (a downstream step failed): also remove its rate and token counts."""
        with self._lock:
            self._close(reservation)
            state = self._state[reservation.tenant]
            for events in (state.arrivals, state.input_events, state.output_events):
                kept = [e for e in events if e[1] != reservation.ticket]
                events.clear()
                events.extend(kept)

    def _close(self, reservation: Reservation) -> None:
        if reservation.ticket not in self._open:
            raise InputError(f"QuotaLedger: reservation {reservation.ticket} is not open (released twice?)")
        self._open.discard(reservation.ticket)
        state = self._state[reservation.tenant]
        state.concurrent -= 1
        state.kv_bytes -= float(Q_(reservation.request.reserved_kv).m_as("B"))


# --------------------------------------------------------------------------------------------
# Priority classes (Table 19) and bulkheads (Example 10.10)


@dataclass(frozen=True)
class PriorityClass:
    """One row of Table 19."""

    name: str
    use_case: str
    preempts: tuple[str, ...]
    guarantee: str


#: Table 19 (§10.12.3).
PRIORITY_CLASSES = (
    PriorityClass("critical", "Revenue-generating", ("standard", "best_effort"), "100% reserved"),
    PriorityClass("standard", "General traffic", ("best_effort",), "Weighted share"),
    PriorityClass("best_effort", "Background, batch", (), "No guarantee"),
)


def can_preempt(preempting: str, victim: str) -> bool:
    """Whether a request of class ``preempting`` may displace one of class ``victim`` (Table 19).

    Parameters
    ----------
    preempting, victim : {"critical", "standard", "best_effort"}
        Priority classes.

    Returns
    -------
    bool

    Examples
    --------
    >>> can_preempt("critical", "standard"), can_preempt("best_effort", "standard")
    (True, False)
    """
    classes = {c.name: c for c in PRIORITY_CLASSES}
    for argument, name in (("preempting", preempting), ("victim", victim)):
        if not isinstance(name, str) or name not in classes:
            raise InputError(f"can_preempt(): argument '{argument}' must be one of {sorted(classes)}, got {name!r}")
    return victim in classes[preempting].preempts


@checked(standard_weights="positive")
def priority_allocation(
    capacity: Any, critical: Any, standard: Any, best_effort: Any, standard_weights: Number | None = None
) -> dict[str, Any]:
    """Split capacity by Table 19: critical fully reserved, standard weighted max-min, best effort the rest.

    Parameters
    ----------
    capacity : Quantity
        Pool capacity.
    critical : Quantity
        Critical demand; it gets all of it that fits (100 % reserved).
    standard : Quantity array
        Standard tenants' demands, sharing what critical leaves by weight.
    best_effort : Quantity
        Best-effort demand; it gets only the leftover.
    standard_weights : array of float, optional
        Weights of the standard tenants.

    Returns
    -------
    dict
        ``critical``, ``standard`` (array) and ``best_effort`` allocations, and ``unserved``.

    Notes
    -----
    Reservations must be provisioned and enforced separately: priority alone cannot create
    capacity (§10.12.3).

    Examples
    --------
    >>> split = priority_allocation(Q_(100, "request/s"), Q_(30, "request/s"), Q_([40, 40], "request/s"),
    ...                             Q_(20, "request/s"))
    >>> split["standard"], split["best_effort"]
    (<Quantity([35. 35.], 'request / second')>, <Quantity(0.0, 'request / second')>)
    """
    if not isinstance(capacity, ureg.Quantity):
        raise InputError(
            f"priority_allocation(): argument 'capacity' must be a quantity (a rate), got {shown(capacity)}"
        )
    for name, value in (("critical", critical), ("best_effort", best_effort)):
        if not isinstance(value, ureg.Quantity) or value.dimensionality != capacity.dimensionality:
            raise InputError(f"priority_allocation(): argument '{name}' must have the dimension of 'capacity'")
        check_domain("priority_allocation", name, value.m_as(capacity.units), "nonnegative")
    check_domain("priority_allocation", "capacity", capacity.magnitude, "nonnegative")
    critical_share = min(critical, capacity)
    shared = max_min_fair(standard, capacity - critical_share, standard_weights).allocation
    left = capacity - critical_share - shared.sum()
    best = min(best_effort, max(left, 0 * capacity))
    unserved = critical - critical_share + (standard - shared).sum() + best_effort - best
    return {"critical": critical_share, "standard": shared, "best_effort": best, "unserved": unserved}


def bulkhead_partition(
    capacity: Any, dedicated: Mapping[str, Any], shared_shares: Mapping[str, float]
) -> dict[str, Any]:
    """Partition capacity into dedicated pools and percentage shares of the remaining shared pool.

    Parameters
    ----------
    capacity : Quantity
        Total capacity (GPUs, request/s, tokens/s).
    dedicated : mapping of str to Quantity
        Tiers with their own dedicated pools.
    shared_shares : mapping of str to float
        Fractions of the remaining shared capacity (summing to at most 1).

    Returns
    -------
    dict of str to Quantity

    Notes
    -----
    Example 10.10 (§10.12.4): Enterprise on dedicated pools, 70 % of the remaining shared capacity to
    Professional, Free capped at 30 % best-effort. Deployment-level bulkheads isolate compute and memory;
    shared networking, storage and control planes still carry interference.

    Examples
    --------
    >>> parts = bulkhead_partition(Q_(1000, "request/s"), {"enterprise": Q_(400, "request/s")},
    ...                            {"professional": 0.7, "free": 0.3})
    >>> {tier: round(value.m_as("request/s"), 6) for tier, value in parts.items()}
    {'enterprise': 400, 'professional': 420.0, 'free': 180.0}
    """
    name = "bulkhead_partition"
    instance(name, "capacity", capacity, ureg.Quantity, "a quantity (a rate or a memory size)")
    unit = str(capacity.units)  # the capacity and every pool: one number >= 0 in the capacity's dimension
    total = scalar(name, "capacity", capacity, unit)
    pools = mapping(name, "dedicated", dedicated).items()
    reserved = sum(scalar(name, f"dedicated['{tier}']", value, unit) for tier, value in pools)
    if reserved > total:
        raise InputError(
            f"bulkhead_partition(): dedicated pools ({Q_(reserved, unit)}) exceed the capacity ({capacity})"
        )
    shares = {
        tier: scalar(name, f"shared_shares['{tier}']", share, "", "probability")
        for tier, share in mapping(name, "shared_shares", shared_shares).items()
    }
    if sum(shares.values()) > 1 + 1e-12:
        raise InputError(f"bulkhead_partition(): shared_shares sum to {sum(shares.values())}, more than 1")
    remaining = Q_(total - reserved, unit)
    return {**dict(dedicated), **{tier: share * remaining for tier, share in shares.items()}}


@dataclass(frozen=True)
class RequestCaps:
    """Request-level bulkhead caps (§10.12.4: 8,000 input tokens, 2,000 output tokens, 30 s)."""

    max_input_tokens: int = 8000
    max_output_tokens: int = 2000
    max_execution_time: Time = _REQUEST_TIME_CAP


@checked()
def check_request_caps(
    input_tokens: Tokens, max_output_tokens: Tokens, execution_time: Time | None = None, caps: RequestCaps | None = None
) -> str | None:
    """The first request-level cap a request violates, or ``None``.

    Parameters
    ----------
    input_tokens : int
        Prompt tokens.
    max_output_tokens : int
        Requested output budget.
    execution_time : Quantity [time], optional
        Execution time so far (or predicted).
    caps : RequestCaps, optional
        Defaults to the chapter's 8,000 / 2,000 / 30 s.

    Returns
    -------
    str or None

    Notes
    -----
    Caps bound request size and duration only when the scheduler enforces them; they need
    concurrency limits, reservations and cancellation beside them, and cannot contain a crash
    (§10.12.4).

    Examples
    --------
    >>> check_request_caps(8000, 2000), check_request_caps(8001, 10)
    (None, 'input tokens 8001 > 8000')
    """
    limits = caps or RequestCaps()
    for name, value in (
        ("input_tokens", input_tokens),
        ("max_output_tokens", max_output_tokens),
        ("execution_time", execution_time),
    ):
        if value is not None and np.ndim(value):
            raise InputError(f"check_request_caps(): argument '{name}' must be one number, got {shown(value)}")
    if input_tokens > limits.max_input_tokens:
        return f"input tokens {input_tokens:g} > {limits.max_input_tokens}"
    if max_output_tokens > limits.max_output_tokens:
        return f"output tokens {max_output_tokens:g} > {limits.max_output_tokens}"
    if execution_time is not None and Q_(execution_time, "s") > Q_(limits.max_execution_time):
        return f"execution time {Q_(execution_time, 's'):g~P} > {Q_(limits.max_execution_time):~P}"
    return None


# --------------------------------------------------------------------------------------------
# Hierarchical rate limiting (section 10.15.3)


@dataclass
class TokenBucket:
    """A token bucket: ``capacity`` units at most, refilled at ``rate`` units per second.

    Attributes
    ----------
    rate : float
        Refill rate (units per second): requests per second, or tokens per minute / 60.
    capacity : float
        Burst size: the most the bucket holds.
    level : float
        Units available now (starts full).
    updated : float
        Time of the last refill, seconds.
    """

    rate: float
    capacity: float
    level: float = -1.0
    updated: float = 0.0

    def __post_init__(self) -> None:
        check_domain("TokenBucket", "rate", self.rate, "positive")
        check_domain("TokenBucket", "capacity", self.capacity, "positive")
        if self.level < 0:
            self.level = self.capacity

    def available(self, now: float) -> float:
        """Units available at ``now`` (refilled since the last update, capped at the capacity)."""
        if now < self.updated:
            raise InputError(f"TokenBucket: time went backwards ({now} < {self.updated})")
        return min(self.capacity, self.level + (now - self.updated) * self.rate)

    def take(self, amount: float, now: float) -> None:
        """Remove ``amount`` units at ``now`` (the caller checked :meth:`available`)."""
        self.level = self.available(now) - amount
        self.updated = now


@dataclass(frozen=True, repr=False)
class RateLimitDecision(Result):
    """Admission by the hierarchical limiter: the first tier that refused, or ``None``."""

    admitted: bool
    limit: str | None
    reason: str


class HierarchicalRateLimiter:
    """Rate limits at several granularities, checked together (section 10.15.3).

    Tiers, in the order checked: per-API-key request rate, per-API-key tokens per minute, the
    organization's token quota, and the model's global capacity ceiling (tokens per second). A request
    is admitted only if every tier has room, and then all of them are charged at once: a refusal by a
    later tier never consumes an earlier tier's budget (the atomic semantics of Listing 1). Buckets
    start full, so each tier allows a burst of its capacity.

    Parameters
    ----------
    key_requests_per_second, key_tokens_per_minute : float
        Limits of every API key.
    org_tokens_per_minute : float
        Quota of every organization (shared by its keys).
    model_tokens_per_second : float
        Global ceiling of the model's capacity (shared by everyone).
    burst_seconds : float
        Each bucket holds this many seconds of its rate (1 s for requests, 60 s for per-minute quotas
        unless given).

    Examples
    --------
    >>> limiter = HierarchicalRateLimiter(key_requests_per_second=2, key_tokens_per_minute=6000,
    ...                                   org_tokens_per_minute=9000, model_tokens_per_second=1e6)
    >>> [limiter.admit("k1", "acme", 1000, now=0.0).admitted for _ in range(3)]
    [True, True, False]
    >>> limiter.admit("k1", "acme", 1000, now=0.0).limit
    'key_requests_per_second'
    """

    TIERS = ("key_requests_per_second", "key_tokens_per_minute", "org_tokens_per_minute", "model_tokens_per_second")

    def __init__(
        self,
        key_requests_per_second: float,
        key_tokens_per_minute: float,
        org_tokens_per_minute: float,
        model_tokens_per_second: float,
        burst_seconds: float | None = None,
    ) -> None:
        limits = {
            "key_requests_per_second": key_requests_per_second,
            "key_tokens_per_minute": key_tokens_per_minute,
            "org_tokens_per_minute": org_tokens_per_minute,
            "model_tokens_per_second": model_tokens_per_second,
        }
        for name, value in limits.items():
            check_domain("HierarchicalRateLimiter", name, value, "positive")
        if burst_seconds is not None:
            check_domain("HierarchicalRateLimiter", "burst_seconds", burst_seconds, "positive")
        self._rates = {
            "key_requests_per_second": key_requests_per_second,
            "key_tokens_per_minute": key_tokens_per_minute / 60,
            "org_tokens_per_minute": org_tokens_per_minute / 60,
            "model_tokens_per_second": model_tokens_per_second,
        }
        default_burst = {
            "key_requests_per_second": 1.0,
            "key_tokens_per_minute": 60.0,
            "org_tokens_per_minute": 60.0,
            "model_tokens_per_second": 1.0,
        }
        self._burst = {k: burst_seconds or v for k, v in default_burst.items()}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._lock = threading.Lock()

    def _bucket(self, tier: str, owner: str) -> TokenBucket:
        key = (tier, owner)
        if key not in self._buckets:
            rate = self._rates[tier]
            self._buckets[key] = TokenBucket(rate=rate, capacity=rate * self._burst[tier])
        return self._buckets[key]

    def admit(self, api_key: str, organization: str, tokens: float, now: float) -> RateLimitDecision:
        """Check every tier for a request of ``tokens`` tokens at time ``now`` (s) and charge them all.

        Returns
        -------
        RateLimitDecision
            ``limit`` names the first tier without room.
        """
        check_domain("HierarchicalRateLimiter.admit", "tokens", tokens, "nonnegative")
        charges = {
            "key_requests_per_second": (api_key, 1.0),
            "key_tokens_per_minute": (api_key, float(tokens)),
            "org_tokens_per_minute": (organization, float(tokens)),
            "model_tokens_per_second": ("model", float(tokens)),
        }
        with self._lock:
            for tier in self.TIERS:
                owner, amount = charges[tier]
                if self._bucket(tier, owner).available(now) < amount:
                    return RateLimitDecision(False, tier, f"{tier.replace('_', ' ')} exhausted for {owner!r}")
            for tier in self.TIERS:
                owner, amount = charges[tier]
                self._bucket(tier, owner).take(amount, now)
        return RateLimitDecision(True, None, "admitted by every tier")
