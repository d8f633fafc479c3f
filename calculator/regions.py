"""Global inference infrastructure (section 10.14).

Wide-area round trips (Table 23) and tier budgets (Figure 23), edge caching with central inference
(expected latency and GPU load at a hit rate, Table 24), the penalty of sharding one model across
regions, failover headroom when a region fails and the bounded failover of Listing 3, and the cost
of a completed request per region with the eligibility filter of Listing 4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._support import checked, instances, mapping, scalar
from .errors import InputError
from .formula import check_domain, formula, var
from .results import Result
from .types import Count, Fraction, MoneyPerRequest, Rate, Time
from .units import Q_, shown

__all__ = [
    "CHAPTER_RTT",
    "CHAPTER_TIER_BUDGETS",
    "EDGE_HIT_RATE_ENVELOPES",
    "CHAPTER_US_USER_LATENCY",
    "wide_area_latency",
    "placement_penalty",
    "TierBudgetCheck",
    "tier_budget_check",
    "edge_cache_latency",
    "edge_cache_gpu_rate",
    "cache_hit_allowed",
    "CrossRegionSharding",
    "cross_region_sharding",
    "symmetric_failover_utilization",
    "FailoverHeadroom",
    "failover_headroom",
    "FailoverAttempt",
    "FailoverOutcome",
    "failover_attempts",
    "cost_per_completed_request",
    "RegionOption",
    "RouteChoice",
    "route_request",
]

#: Table 23 (§10.14.1): RTT from each user location to US-East and to a local region.
CHAPTER_RTT = {
    "new_york": (Q_(10, "ms"), Q_(10, "ms")),
    "london": (Q_(75, "ms"), Q_(10, "ms")),
    "tokyo": (Q_(150, "ms"), Q_(10, "ms")),
    "sydney": (Q_(200, "ms"), Q_(10, "ms")),
}

#: Figure 23 (§10.14): the illustrative 10 ms, 50 ms and 2 s budgets, read as edge, gateway and GPU cluster.
CHAPTER_TIER_BUDGETS = {"edge": Q_(10, "ms"), "gateway": Q_(50, "ms"), "cluster": Q_(2, "s")}

#: Table 24 (§10.14.3): illustrative cache-hit envelopes (sensitivity inputs, not workload statistics).
EDGE_HIT_RATE_ENVELOPES = {
    "autocomplete": (0.60, 0.80, "Excellent"),
    "faq_chatbot": (0.40, 0.60, "Good"),
    "open_ended_chat": (0.05, 0.15, "Poor"),
    "code_generation": (0.20, 0.40, "Moderate"),
}

#: Table 25 (§10.14.6): hypothetical latency from US users to each region (min, max). Prices are
#: the registry's ``chapter-<region>-h100-spot`` / ``-on-demand`` entries.
CHAPTER_US_USER_LATENCY = {
    "us-east": (Q_(10, "ms"), Q_(50, "ms")),
    "us-west": (Q_(30, "ms"), Q_(70, "ms")),
    "eu-west": (Q_(75, "ms"), Q_(100, "ms")),
}

_ZERO_SECONDS = Q_(0, "s")
_ATTEMPT_BUDGETS = (Q_(2.0, "s"), Q_(5.0, "s"))


# --------------------------------------------------------------------------------------------
# Wide-area latency (Table 23, Figure 23)


@formula(
    result=var("s", r"L_{\mathrm{net}}", description="exposed wide-area latency"),
    reference="Table 23 and §10.14.1",
    round_trip=var("s", r"\mathrm{RTT}", "nonnegative", "client-to-region round-trip time"),
    sequential_crossings=var("", "k", "positive_integer", "sequential calls crossing the distant boundary"),
    example={"round_trip": "200 ms", "sequential_crossings": 1},
)
def wide_area_latency(round_trip, sequential_crossings):
    r"""Network latency a request pays for its sequential calls across the client-to-region boundary.

    Parameters
    ----------
    round_trip : Quantity [time]
        Round-trip time from the user to the serving region.
    sequential_crossings : int
        Sequential calls that cross that boundary; calls inside the backend region do not pay it
        again (§10.14.1).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{net}} = k \cdot \mathrm{RTT}

    Examples
    --------
    >>> wide_area_latency(CHAPTER_RTT["sydney"][0], 1)
    <Quantity(0.2, 'second')>
    """
    return sequential_crossings * round_trip


@formula(
    result=var("s", r"\Delta L", description="extra latency of serving from the remote region"),
    reference="Table 23 (§10.14.1)",
    remote_round_trip=var("s", r"\mathrm{RTT}_{\mathrm{remote}}", "nonnegative"),
    local_round_trip=var("s", r"\mathrm{RTT}_{\mathrm{local}}", "nonnegative"),
    sequential_crossings=var("", "k", "positive_integer"),
    example={"remote_round_trip": "150 ms", "local_round_trip": "10 ms", "sequential_crossings": 2},
)
def placement_penalty(remote_round_trip, local_round_trip, sequential_crossings):
    r"""Extra latency of a single distant deployment over a local region.

    Parameters
    ----------
    remote_round_trip : Quantity [time]
        RTT to the distant serving region.
    local_round_trip : Quantity [time]
        RTT to a local region.
    sequential_crossings : int
        Sequential boundary crossings per request.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: \Delta L = k (\mathrm{RTT}_{\mathrm{remote}} - \mathrm{RTT}_{\mathrm{local}})

    Examples
    --------
    >>> placement_penalty(*CHAPTER_RTT["tokyo"], 2).to("ms")
    <Quantity(280.0, 'millisecond')>
    """
    return sequential_crossings * (remote_round_trip - local_round_trip)


@dataclass(frozen=True, repr=False)
class TierBudgetCheck(Result):
    """Per-tier latency against budget, and the miss path's total."""

    within_budget: dict[str, bool]
    slack: dict[str, Time]
    miss_path: Time


def tier_budget_check(latencies: Mapping[str, Time], budgets: Mapping[str, Time] | None = None) -> TierBudgetCheck:
    """Check measured per-tier latencies against tier budgets (Figure 23).

    Parameters
    ----------
    latencies : mapping of str to Quantity [time]
        Latency per tier (``edge``, ``gateway``, ``cluster``).
    budgets : mapping of str to Quantity [time], optional
        Budgets per tier; defaults to :data:`CHAPTER_TIER_BUDGETS`. The application must say whether the
        cluster budget governs first token, each token or completion (§10.14).

    Returns
    -------
    TierBudgetCheck

    Examples
    --------
    >>> check = tier_budget_check({"edge": Q_(4, "ms"), "gateway": Q_(60, "ms"), "cluster": Q_(800, "ms")})
    >>> check.within_budget
    {'edge': True, 'gateway': False, 'cluster': True}
    """
    mapping("tier_budget_check", "latencies", latencies)
    limits = CHAPTER_TIER_BUDGETS if budgets is None else mapping("tier_budget_check", "budgets", budgets)
    missing = set(latencies) - set(limits)
    if missing:
        raise InputError(f"tier_budget_check(): no budget for tier(s) {sorted(missing)}")
    ok, slack = {}, {}
    for tier, latency in latencies.items():
        value = Q_(latency)
        check_domain("tier_budget_check", f"latencies['{tier}']", value.m_as("s"), "nonnegative")
        slack[tier] = (Q_(limits[tier]) - value).to("ms")
        ok[tier] = bool(slack[tier].m_as("ms") >= 0)
    total = sum((Q_(v) for v in latencies.values()), _ZERO_SECONDS).to("ms")
    return TierBudgetCheck(within_budget=ok, slack=slack, miss_path=total)


# --------------------------------------------------------------------------------------------
# Edge caching (section 10.14.3)


@formula(
    result=var("s", r"\mathbb{E}[L]", description="expected request latency with an edge cache"),
    reference="section 10.14.3, Figure 25 (§10.14.3)",
    hit_rate=var("", "h", "probability", "hit rate among requests eligible for reuse"),
    hit_latency=var("s", r"L_{\mathrm{hit}}", "nonnegative", "latency of a hit at the edge"),
    miss_latency=var("s", r"L_{\mathrm{miss}}", "nonnegative", "latency of a miss through the central cluster"),
    eligible_fraction=var("", "e", "probability", "share of requests eligible for reuse"),
    example={"hit_rate": 0.5, "hit_latency": "10 ms", "miss_latency": "1.2 s"},
)
def edge_cache_latency(hit_rate, hit_latency, miss_latency, eligible_fraction=1.0):
    r"""Expected latency when an edge cache answers some requests and the rest go to the central cluster.

    Parameters
    ----------
    hit_rate : float
        Hit rate among the requests eligible for reuse (from production traces; Table 24 gives envelopes).
    hit_latency : Quantity [time]
        Latency of a hit (under 10 ms in the chapter's illustration).
    miss_latency : Quantity [time]
        Latency of a miss: edge, wide-area trip, gateway and inference.
    eligible_fraction : float
        Share of requests whose responses may be reused at all.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: \mathbb{E}[L] = e h L_{\mathrm{hit}} + (1 - e h) L_{\mathrm{miss}}

    Hits avoid the backend round trip, misses incur it (§10.14.3). Only the mean is modelled: the
    tail is still set by misses.

    Examples
    --------
    An FAQ chatbot at a 50 % hit rate, 10 ms hits and 1.2 s misses:

    >>> edge_cache_latency(0.5, Q_(10, "ms"), Q_(1.2, "s")).to("ms")
    <Quantity(605.0, 'millisecond')>
    """
    served = eligible_fraction * hit_rate
    return served * hit_latency + (1 - served) * miss_latency


@formula(
    result=var("request/s", r"\lambda_{\mathrm{GPU}}", "nonnegative", "request rate reaching the GPU cluster"),
    reference="section 10.14.3",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "request rate at the edge"),
    hit_rate=var("", "h", "probability", "hit rate among eligible requests"),
    eligible_fraction=var("", "e", "probability", "share of requests eligible for reuse"),
    example={"arrival_rate": "1000 request/s", "hit_rate": 0.7},
)
def edge_cache_gpu_rate(arrival_rate, hit_rate, eligible_fraction=1.0):
    r"""Request rate that still needs full model execution behind an edge cache.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Requests arriving at the edge.
    hit_rate : float
        Hit rate among eligible requests.
    eligible_fraction : float
        Share of requests eligible for reuse.

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: \lambda_{\mathrm{GPU}} = (1 - e h)\lambda

    "Any cache miss still requires full model execution" (§10.14.3); at equal utilization the GPU
    fleet shrinks by the same factor.

    Examples
    --------
    >>> edge_cache_gpu_rate(Q_(1000, "request/s"), 0.7)
    <Quantity(300.0, 'request / second')>
    """
    return (1 - eligible_fraction * hit_rate) * arrival_rate


#: What a cached response must match before the edge may return it (§10.14.3, answer §10.18).
CACHE_MATCH_FIELDS = ("model_version", "context", "generation_policy")


@checked()
def cache_hit_allowed(
    authorized: bool,
    cached: Mapping[str, Any],
    request: Mapping[str, Any],
    age: Time | None = None,
    max_age: Time | None = None,
) -> tuple[bool, str]:
    """Whether an edge may return a cached response: a text match alone is not enough.

    Parameters
    ----------
    authorized : bool
        The request passed authorization at the edge.
    cached, request : mapping
        ``model_version``, ``context`` (conversation or retrieval context) and ``generation_policy`` of the
        cached response and of the incoming request.
    age, max_age : Quantity [time], optional
        Age of the cached response and the freshness the request requires.

    Returns
    -------
    (bool, str)
        The verdict and the first reason it fails.

    Examples
    --------
    >>> entry = {"model_version": "v7", "context": "faq-2025", "generation_policy": "greedy"}
    >>> cache_hit_allowed(True, entry, {**entry, "model_version": "v8"})
    (False, 'model_version differs')
    """
    if not isinstance(authorized, bool | np.bool_):
        raise InputError(f"cache_hit_allowed(): argument 'authorized' must be True or False, got {shown(authorized)}")
    mapping("cache_hit_allowed", "cached", cached)
    mapping("cache_hit_allowed", "request", request)
    if not authorized:
        return False, "request not authorized"
    for name in CACHE_MATCH_FIELDS:
        if name not in cached or name not in request:
            raise InputError(f"cache_hit_allowed(): 'cached' and 'request' must both give {name!r}")
        if cached[name] != request[name]:
            return False, f"{name} differs"
    if max_age is not None:
        if age is None:
            return False, "freshness required but the entry's age is unknown"
        for name, value in (("age", age), ("max_age", max_age)):
            if np.ndim(value):
                raise InputError(f"cache_hit_allowed(): argument '{name}' must be one number, got {shown(value)}")
        if age > max_age:
            return False, "entry is stale"
    return True, "valid hit"


# --------------------------------------------------------------------------------------------
# Cross-region model sharding (section 10.14.4)


@dataclass(frozen=True, repr=False)
class CrossRegionSharding(Result):
    """Step time of a model whose pipeline stages sit in different regions, vs co-located."""

    step_time: Time
    colocated_time: Time
    slowdown: float


@checked(stage_times="positive", crossings="nonnegative_integer")
def cross_region_sharding(
    stage_times: Time, transfer_time: Time, crossings: Count | None = None
) -> CrossRegionSharding:
    r"""Penalty of placing pipeline stages of one replica in different regions.

    Parameters
    ----------
    stage_times : Quantity [time], array
        Local compute time of each stage (1-5 ms in the chapter's illustration).
    transfer_time : Quantity [time]
        Exposed inter-region transfer per crossing (75-150 ms illustrated).
    crossings : int, optional
        Region boundaries crossed per step; defaults to stages - 1 (a linear pipeline, one region per stage).

    Returns
    -------
    CrossRegionSharding

    Notes
    -----
    .. math:: T = \sum_s t_s + k\,t_{\mathrm{xfer}}, \qquad \text{slowdown} = T / \sum_s t_s

    §10.14.4: the gap "can slow inference by 10-100x, though the exact penalty depends on the model's
    stage layout". Compare actual transfer times and message sizes, not RTT per stage (answer §10.18).

    Examples
    --------
    >>> round(cross_region_sharding(Q_([5, 5], "ms"), Q_(75, "ms")).slowdown, 6)
    8.5
    """
    stages = np.atleast_1d(stage_times).astype(float)
    if stages.ndim != 1 or stages.size == 0:
        raise InputError("cross_region_sharding(): argument 'stage_times' must be a non-empty 1-D array")
    if np.ndim(transfer_time):
        raise InputError(
            f"cross_region_sharding(): argument 'transfer_time' must be one number, got {shown(transfer_time)}"
        )
    count = stages.size - 1 if crossings is None else crossings
    local = float(stages.sum())
    total = local + count * float(transfer_time)
    return CrossRegionSharding(
        step_time=Q_(total, "s").to("ms"), colocated_time=Q_(local, "s").to("ms"), slowdown=total / local
    )


# --------------------------------------------------------------------------------------------
# Failover (section 10.14.5)


@formula(
    result=var("", r"\rho'", "nonnegative", "utilization of each survivor"),
    reference="section 10.14.5; N+1 regional headroom",
    utilization=var("", r"\rho", "nonnegative", "utilization of each region before the failure"),
    regions=var("", "R", "positive_integer", "equal regions sharing the load"),
    example={"utilization": 0.6, "regions": 3},
)
def symmetric_failover_utilization(utilization, regions):
    r"""Utilization of each surviving region when one of ``regions`` equal regions fails.

    Parameters
    ----------
    utilization : float
        Utilization of every region before the failure.
    regions : int
        Regions (at least 2).

    Returns
    -------
    float

    Notes
    -----
    .. math:: \rho' = \rho \frac{R}{R - 1}

    Survivors stay below 1 only if :math:`\rho < (R - 1)/R`: 50 % for two regions, 67 % for three.
    KV rebuild work adds to this (:func:`failover_headroom`).

    Examples
    --------
    >>> round(symmetric_failover_utilization(0.6, 3), 6)
    0.9
    """
    return utilization * regions / (regions - 1)


@dataclass(frozen=True, repr=False)
class FailoverHeadroom(Result):
    """Survivor loads after a regional failure: utilization per region, feasibility and shortfall."""

    utilization: dict[str, float]
    moved_load: Rate
    spare_capacity: Rate
    shortfall: Rate
    feasible: bool
    reason: str


@checked()
def failover_headroom(
    capacities: Mapping[str, Any],
    loads: Mapping[str, Any],
    failed: str,
    reroutable_fraction: Fraction = 1.0,
    rebuild_load: Any = None,
    eligible: Sequence[str] | None = None,
) -> FailoverHeadroom:
    r"""Whether the surviving regions can absorb a failed region's traffic plus KV-state reconstruction.

    Parameters
    ----------
    capacities, loads : mapping of region to Quantity (one rate dimension)
        Capacity and current load of every region.
    failed : str
        The region that fails.
    reroutable_fraction : float
        Share of the failed region's load that placement policy allows to move (data residency).
    rebuild_load : Quantity, optional
        Extra load of re-running prefill from history to rebuild lost KV state, over the rebuild window.
    eligible : sequence of str, optional
        Survivors allowed to take the traffic (all others if omitted).

    Returns
    -------
    FailoverHeadroom
        Moved load is spread in proportion to spare capacity (equalizing utilization where possible).

    Notes
    -----
    .. math:: \sum_{r \in S} (C_r - \lambda_r) \ge f \lambda_{\mathrm{failed}} + \Lambda_{\mathrm{rebuild}}

    The destination needs authoritative history and headroom "for both reconstruction and continuing
    traffic" (§10.14.5).

    Examples
    --------
    >>> caps = {"us-east": Q_(1000, "request/s"), "eu-west": Q_(1000, "request/s"), "ap": Q_(1000, "request/s")}
    >>> loads = {"us-east": Q_(600, "request/s"), "eu-west": Q_(600, "request/s"), "ap": Q_(600, "request/s")}
    >>> failover_headroom(caps, loads, "us-east").utilization
    {'eu-west': 0.9, 'ap': 0.9}
    """
    if not mapping("failover_headroom", "capacities", capacities):
        raise InputError("failover_headroom(): argument 'capacities' must name at least one region")
    mapping("failover_headroom", "loads", loads)
    if not isinstance(failed, str):
        raise InputError(f"failover_headroom(): argument 'failed' must be a region name, got {shown(failed)}")
    if set(capacities) != set(loads):
        raise InputError("failover_headroom(): 'capacities' and 'loads' must name the same regions")
    if failed not in capacities:
        raise InputError(f"failover_headroom(): argument 'failed' ({failed!r}) is not one of {sorted(capacities)}")
    if np.ndim(reroutable_fraction):
        raise InputError(
            f"failover_headroom(): argument 'reroutable_fraction' must be one number, got {shown(reroutable_fraction)}"
        )
    reroutable_fraction = float(reroutable_fraction)
    unit = Q_(capacities[failed]).units
    survivors = [r for r in capacities if r != failed and (eligible is None or r in eligible)]
    cap = {r: Q_(capacities[r]).m_as(unit) for r in capacities}
    load = {r: Q_(loads[r]).m_as(unit) for r in loads}
    for region in capacities:
        check_domain("failover_headroom", f"capacities['{region}']", cap[region], "nonnegative")
        check_domain("failover_headroom", f"loads['{region}']", load[region], "nonnegative")
    extra = 0.0 if rebuild_load is None else Q_(rebuild_load).m_as(unit)
    check_domain("failover_headroom", "rebuild_load", extra, "nonnegative")
    moved = reroutable_fraction * load[failed] + extra
    spare = {r: max(cap[r] - load[r], 0.0) for r in survivors}
    total_spare = sum(spare.values())
    share = {r: spare[r] / total_spare if total_spare > 0 else 0.0 for r in survivors}
    taken = min(moved, total_spare)
    utilization = {r: (load[r] + taken * share[r]) / cap[r] if cap[r] > 0 else float("inf") for r in survivors}
    shortfall = moved - taken
    if not survivors:
        feasible, reason = moved == 0, "no eligible surviving region"
    elif shortfall > 1e-12 * max(moved, 1.0):
        feasible, reason = False, f"survivors lack {shortfall:.4g} {unit:~P} of headroom"
    else:
        feasible, reason = True, "survivors absorb the moved load"
    return FailoverHeadroom(
        utilization=utilization,
        moved_load=Q_(moved, unit),
        spare_capacity=Q_(total_spare, unit),
        shortfall=Q_(max(shortfall, 0.0), unit),
        feasible=bool(feasible),
        reason=reason,
    )


@dataclass(frozen=True, repr=False)
class FailoverAttempt(Result):
    """One attempt of Listing 3: the region tried, its timeout and what happened."""

    region: str
    start: Time
    timeout: Time
    outcome: str


@dataclass(frozen=True, repr=False)
class FailoverOutcome(Result):
    """Result of the bounded failover: the serving region (or none), the attempts and the time used."""

    region: str | None
    result: str
    attempts: tuple[FailoverAttempt, ...]
    time_used: Time


@checked(deadline="any", budgets="unchecked")
def failover_attempts(
    deadline: Time,
    regions_by_distance: Sequence[str],
    response_times: Mapping[str, Time | None],
    budgets: Sequence[Time] = _ATTEMPT_BUDGETS,
) -> FailoverOutcome:
    """Listing 3: try the nearest eligible regions in turn, each within ``min(budget, remaining deadline)``.

    Parameters
    ----------
    deadline : Quantity [time]
        Time left for the request when routing starts.
    regions_by_distance : sequence of str
        Eligible regions (placement, version, readiness, capacity), nearest first.
    response_times : mapping of region to Quantity [time] or None
        How long each region would take to answer; ``None`` means it is unavailable or rejects admission
        (the attempt fails at once).
    budgets : sequence of Quantity [time]
        Per-attempt budgets, (2 s, 5 s) in Listing 3.

    Returns
    -------
    FailoverOutcome

    Notes
    -----
    At most ``len(budgets)`` attempts; the worst case spends ``min(deadline, sum(budgets))``. Abandoned
    attempts must be canceled, and retries need replay-safe semantics (§10.14.5).

    Examples
    --------
    >>> out = failover_attempts(Q_(6, "s"), ["us-east", "us-west"], {"us-east": Q_(9, "s"), "us-west": Q_(1, "s")})
    >>> out.region, [(a.region, a.timeout.m_as("s"), a.outcome) for a in out.attempts]
    ('us-west', [('us-east', 2.0, 'timeout'), ('us-west', 4.0, 'ok')])
    """
    name = "failover_attempts"
    if np.ndim(deadline):
        raise InputError(f"{name}(): argument 'deadline' must be one number, got {shown(deadline)}")
    names = regions_by_distance
    if isinstance(names, str) or not isinstance(names, Sequence) or not all(isinstance(r, str) for r in names):
        raise InputError(f"{name}(): argument 'regions_by_distance' must be a list of region names, got {shown(names)}")
    answers = {
        region: None if value is None else Q_(scalar(name, f"response_times[{region!r}]", value, "s"), "s")
        for region, value in mapping(name, "response_times", response_times).items()
    }  # a negative or NaN response time would count as an answer within any timeout
    if isinstance(budgets, str) or not isinstance(budgets, Sequence) or not budgets:
        raise InputError(f"{name}(): argument 'budgets' must list at least one time, got {shown(budgets)}")
    budgets = [Q_(scalar(name, f"budgets[{i}]", value, "s", "positive"), "s") for i, value in enumerate(budgets)]
    remaining = Q_(float(deadline), "s")
    elapsed = Q_(0.0, "s")
    attempts = []
    tried: set[str] = set()
    for budget in budgets:
        left = (remaining - elapsed).to("s")
        candidates = [r for r in regions_by_distance if r not in tried]
        if left.m_as("s") <= 0 or not candidates:
            break
        region = candidates[0]
        tried.add(region)
        timeout = min(budget, left)
        response = answers.get(region)
        if response is None:
            attempts.append(FailoverAttempt(region, elapsed, timeout, "unavailable_or_rejected"))
            continue
        if response <= timeout:
            attempts.append(FailoverAttempt(region, elapsed, timeout, "ok"))
            return FailoverOutcome(region, "ok", tuple(attempts), (elapsed + response).to("s"))
        attempts.append(FailoverAttempt(region, elapsed, timeout, "timeout"))
        elapsed = elapsed + timeout
    return FailoverOutcome(None, "unavailable_or_deadline_exceeded", tuple(attempts), elapsed)


# --------------------------------------------------------------------------------------------
# Cost across regions (section 10.14.6)


@formula(
    result=var("USD/request", r"c_{\mathrm{req}}", "nonnegative", "cost per completed request"),
    reference="section 10.14.6; Listing 4",
    price=var("USD/s", "p", "nonnegative", "price per GPU-hour"),
    gpus=var("", "n", "positive", "GPUs provisioned"),
    busy_time=var("s", r"T_{\mathrm{busy}}", description="time serving"),
    useful_throughput=var("request/s", "X", description="completed-within-deadline requests per GPU"),
    startup_time=var("s", r"T_{\mathrm{start}}", "nonnegative", "billed startup time"),
    idle_time=var("s", r"T_{\mathrm{idle}}", "nonnegative", "billed idle time"),
    transfer_bytes=var("B", "D", "nonnegative", "data moved to and from the region"),
    transfer_price=var("USD/B", r"p_{\mathrm{xfer}}", "nonnegative", "transfer price"),
    retry_fraction=var("", "q", "fraction_open", "share of executed requests wasted on retries"),
    example={"price": "2.5 USD/hour", "gpus": 8, "busy_time": "1 hour", "useful_throughput": "2 request/s"},
)
def cost_per_completed_request(
    price,
    gpus,
    busy_time,
    useful_throughput,
    startup_time=0.0,
    idle_time=0.0,
    transfer_bytes=0.0,
    transfer_price=0.0,
    retry_fraction=0.0,
):
    r"""Cost of each completed request in a region: all billed GPU time and transfer over useful work.

    Parameters
    ----------
    price : Quantity [currency / time]
        Price per GPU-hour (spot or on demand; Table 25).
    gpus : int
        GPUs provisioned.
    busy_time : Quantity [time]
        Time spent serving.
    useful_throughput : Quantity [request / time]
        Requests per second per GPU that complete within their deadline (achieved, not peak).
    startup_time, idle_time : Quantity [time]
        Billed startup and idle time.
    transfer_bytes : Quantity [information]
        Data moved into and out of the region for the work.
    transfer_price : Quantity [currency / information]
        Price of that transfer.
    retry_fraction : float
        Share of executed requests wasted on retries or abandoned work.

    Returns
    -------
    Quantity [currency / request]

    Notes
    -----
    .. math:: c_{\mathrm{req}} = \frac{p\,n\,(T_{\mathrm{busy}} + T_{\mathrm{start}} + T_{\mathrm{idle}})
              + p_{\mathrm{xfer}} D}{X\,n\,T_{\mathrm{busy}}\,(1 - q)}

    "GPU price alone is insufficient: transfer charges, startup and idle capacity, retries, and achieved
    useful throughput determine the cost of completing the workload" (§10.14.6). Apply it only to regions
    that pass the eligibility filter (:func:`route_request`).

    Examples
    --------
    >>> cost_per_completed_request(Q_(2.5, "USD/hour"), 8, Q_(1, "hour"), Q_(2, "request/s")).to("USD/request")
    <Quantity(0.000347222222, 'USD / request')>
    """
    billed = price * gpus * (busy_time + startup_time + idle_time) + transfer_price * transfer_bytes
    return billed / (useful_throughput * gpus * busy_time * (1 - retry_fraction))


@dataclass(frozen=True)
class RegionOption:
    """A candidate region for Listing 4, with everything its eligibility filter needs.

    ``round_trip`` is the user's RTT to the region; ``queue_wait`` and ``service_time`` complete the
    expected completion time (proximity alone does not determine it, §10.14.2); ``cost_per_request``
    comes from :func:`cost_per_completed_request`.
    """

    name: str
    round_trip: Time
    cost_per_request: MoneyPerRequest = None
    jurisdiction: str = ""
    ready: bool = True
    has_capacity: bool = True
    version_ok: bool = True
    queue_wait: Time = _ZERO_SECONDS
    service_time: Time = _ZERO_SECONDS

    def completion_time(self) -> Time:
        """Round trip plus queueing plus service."""
        return (Q_(self.round_trip) + Q_(self.queue_wait) + Q_(self.service_time)).to("ms")


@dataclass(frozen=True, repr=False)
class RouteChoice(Result):
    """The chosen region (or ``None`` with the reason) and the regions that passed the filter."""

    region: str | None
    reason: str
    eligible: tuple[str, ...]


@checked()
def route_request(
    regions: Sequence[RegionOption],
    priority: str = "interactive",
    allowed_jurisdictions: Sequence[str] | None = None,
    deadline: Time | None = None,
) -> RouteChoice:
    """Listing 4: filter eligible regions, then take the cheapest for low priority or the nearest otherwise.

    Parameters
    ----------
    regions : sequence of RegionOption
        Candidates (at least one).
    priority : {"interactive", "low"}
        ``low`` picks the lowest completion cost; anything else the lowest completion time.
    allowed_jurisdictions : sequence of str, optional
        Placement policy (e.g. ``["eu"]`` for data that must stay in the EU).
    deadline : Quantity [time], optional
        Regions whose completion time exceeds it are not eligible.

    Returns
    -------
    RouteChoice
        ``region`` is ``None`` with reason ``no_feasible_destination: ...`` when nothing passes.

    Examples
    --------
    >>> east = RegionOption("us-east", Q_(20, "ms"), Q_(0.0042, "USD/request"), "us")
    >>> west = RegionOption("us-west", Q_(50, "ms"), Q_(0.0039, "USD/request"), "us")
    >>> route_request([east, west]).region, route_request([east, west], priority="low").region
    ('us-east', 'us-west')
    """
    instances("route_request", "regions", regions, RegionOption, "RegionOption")
    if deadline is not None and np.ndim(deadline):
        raise InputError(f"route_request(): argument 'deadline' must be one number, got {shown(deadline)}")
    eligible: list[Any] = []
    rejected: list[Any] = []
    for option in regions:
        problems = [
            name
            for name, bad in (
                ("not ready", not option.ready),
                ("no capacity", not option.has_capacity),
                ("version", not option.version_ok),
                (
                    "placement",
                    allowed_jurisdictions is not None and option.jurisdiction not in allowed_jurisdictions,
                ),
                ("deadline", deadline is not None and option.completion_time().m_as("s") > deadline),
            )
            if bad
        ]
        (rejected if problems else eligible).append((option, problems))
    names = tuple(option.name for option, _ in eligible)
    if not eligible:
        why = "; ".join(f"{o.name}: {', '.join(p)}" for o, p in rejected)
        return RouteChoice(None, f"no_feasible_destination: {why}", names)
    options = [option for option, _ in eligible]
    if priority == "low":
        if any(o.cost_per_request is None for o in options):
            raise InputError("route_request(): low-priority routing needs cost_per_request for every eligible region")
        best = min(options, key=lambda o: Q_(o.cost_per_request).m_as("USD/request"))
        return RouteChoice(best.name, "lowest completion cost among eligible regions", names)
    best = min(options, key=lambda o: o.completion_time().m_as("ms"))
    return RouteChoice(best.name, "nearest eligible region by completion time", names)
