"""Global inference (section 10.14): RTT tables, edge caching, cross-region sharding, failover, regional cost."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calculator import Q_, InputError, load_registry
from calculator.regions import (
    CHAPTER_RTT,
    CHAPTER_TIER_BUDGETS,
    CHAPTER_US_USER_LATENCY,
    EDGE_HIT_RATE_ENVELOPES,
    RegionOption,
    cache_hit_allowed,
    cost_per_completed_request,
    cross_region_sharding,
    edge_cache_gpu_rate,
    edge_cache_latency,
    failover_attempts,
    failover_headroom,
    placement_penalty,
    route_request,
    symmetric_failover_utilization,
    tier_budget_check,
    wide_area_latency,
)

QPS = "request/s"


# ------------------------------------------------------------------ 10.14.1 RTT (Table 23) and tiers (Figure 23)


def test_sydney_user_pays_roughly_200_ms_to_us_east():
    # §10.14: "a user in Sydney still pays roughly a 200 ms round trip to a US-East deployment".
    assert wide_area_latency(CHAPTER_RTT["sydney"][0], 1).m_as("ms") == pytest.approx(200)


def test_table_23_rtt_by_user_location():
    # Table 23 (§10.14.1): New York 10/10, London 75/10, Tokyo 150/10, Sydney 200/10 ms.
    printed = {"new_york": (10, 10), "london": (75, 10), "tokyo": (150, 10), "sydney": (200, 10)}
    for city, (remote, local) in printed.items():
        assert (CHAPTER_RTT[city][0].m_as("ms"), CHAPTER_RTT[city][1].m_as("ms")) == (remote, local)


def test_single_us_east_cluster_costs_75_to_200_ms_for_distant_users():
    # §10.14.1: European, Asian and Australian users pay "a 75 to 200 ms wide-area network round trip on every
    # request". Caption §10.14.1 calls it "an order of magnitude above the local-region floor": the derived ratios are
    # 7.5x (London), 15x (Tokyo) and 20x (Sydney), so "order of magnitude" is loose for London (catalog A5).
    distant = [CHAPTER_RTT[c][0].m_as("ms") for c in ("london", "tokyo", "sydney")]
    assert (min(distant), max(distant)) == (75, 200)
    ratios = [(CHAPTER_RTT[c][0] / CHAPTER_RTT[c][1]).m_as("") for c in ("london", "tokyo", "sydney")]
    assert ratios == pytest.approx([7.5, 15, 20])


def test_sequential_crossings_compound_but_in_region_calls_do_not():
    # §10.14.1: sequential calls across the distant boundary compound; calls inside the region do not pay again.
    assert wide_area_latency(CHAPTER_RTT["tokyo"][0], 3).m_as("ms") == pytest.approx(450)
    assert placement_penalty(*CHAPTER_RTT["london"], 1).m_as("ms") == pytest.approx(65)


def test_figure_23_tier_budgets_10_ms_50_ms_2_s():
    # §10.14: "Its 10 ms, 50 ms, and 2 s budgets are scenario targets". Pinned reading (catalog A4): edge,
    # gateway, GPU cluster, in the order the figure draws them.
    assert {k: v.m_as("ms") for k, v in CHAPTER_TIER_BUDGETS.items()} == {"edge": 10, "gateway": 50, "cluster": 2000}
    check = tier_budget_check({"edge": Q_(8, "ms"), "gateway": Q_(40, "ms"), "cluster": Q_(2.1, "s")})
    assert check.within_budget == {"edge": True, "gateway": True, "cluster": False}
    assert check.miss_path.m_as("ms") == pytest.approx(2148)
    with pytest.raises(InputError, match="no budget"):
        tier_budget_check({"cdn": Q_(1, "ms")})


# ------------------------------------------------------------------ 10.14.3 edge caching (Figure 25, Table 24)


def test_edge_hit_returns_within_10_ms_and_misses_pay_the_backend():
    # §10.14.3: a hit "returns within an illustrative 10 ms budget"; "cache hits avoid the backend round
    # trip, while misses incur it".
    hit, miss = Q_(10, "ms"), Q_(10, "ms") + CHAPTER_RTT["sydney"][0] + Q_(50, "ms") + Q_(1, "s")
    assert edge_cache_latency(1.0, hit, miss).m_as("ms") == pytest.approx(10)
    assert edge_cache_latency(0.0, hit, miss).m_as("ms") == pytest.approx(1260)
    assert edge_cache_latency(0.5, hit, miss).m_as("ms") == pytest.approx(635)


def test_table_24_hit_rate_envelopes_and_the_gpu_load_they_leave():
    # Table 24 (§10.14.3): autocomplete 60-80 % excellent, FAQ 40-60 % good, open-ended chat 5-15 % poor,
    # code generation 20-40 % moderate. Any miss still needs full model execution (§10.14.3).
    assert EDGE_HIT_RATE_ENVELOPES["autocomplete"] == (0.60, 0.80, "Excellent")
    assert EDGE_HIT_RATE_ENVELOPES["faq_chatbot"] == (0.40, 0.60, "Good")
    assert EDGE_HIT_RATE_ENVELOPES["open_ended_chat"] == (0.05, 0.15, "Poor")
    assert EDGE_HIT_RATE_ENVELOPES["code_generation"] == (0.20, 0.40, "Moderate")
    rate = Q_(10_000, QPS)
    _, high, _ = EDGE_HIT_RATE_ENVELOPES["open_ended_chat"]
    assert edge_cache_gpu_rate(rate, high).m_as(QPS) == pytest.approx(8500)
    assert edge_cache_gpu_rate(rate, EDGE_HIT_RATE_ENVELOPES["autocomplete"][1]).m_as(QPS) == pytest.approx(2000)
    # Only responses eligible for reuse count: half eligible halves the effect.
    assert edge_cache_gpu_rate(rate, 0.8, eligible_fraction=0.5).m_as(QPS) == pytest.approx(6000)


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_edge_cache_latency_and_gpu_load_fall_as_hits_rise(h1, h2, eligible):
    lo, hi = sorted((h1, h2))
    hit, miss = Q_(10, "ms"), Q_(900, "ms")
    assert edge_cache_latency(hi, hit, miss, eligible) <= edge_cache_latency(lo, hit, miss, eligible)
    assert edge_cache_gpu_rate(Q_(1, QPS), hi, eligible) <= edge_cache_gpu_rate(Q_(1, QPS), lo, eligible)


def test_self_check_exact_text_match_is_not_a_valid_hit():
    # Self-check §10.14.6 (answer §10.18): a hit requires authorization and a match of model version,
    # conversation or retrieval context, generation policy and freshness; the 10 ms is a latency budget, not a
    # validity window.
    entry = {"model_version": "v3", "context": "retrieval-A", "generation_policy": "t=0"}
    assert cache_hit_allowed(True, entry, dict(entry)) == (True, "valid hit")
    assert cache_hit_allowed(False, entry, dict(entry))[0] is False
    assert cache_hit_allowed(True, entry, {**entry, "context": "retrieval-B"}) == (False, "context differs")
    assert cache_hit_allowed(True, entry, dict(entry), age=Q_(2, "h"), max_age=Q_(1, "h")) == (False, "entry is stale")


# ------------------------------------------------------------------ 10.14.4 cross-region sharding


def test_cross_region_sharding_10_to_100x_slowdown():
    # §10.14.4: "every stage crossing pays a 75-150 ms inter-region transfer against only 1-5 ms of local stage
    # computation. That illustrative gap can slow inference by 10-100x, though the exact penalty depends on the
    # model's stage layout." Pinned reading (catalog A3): an order-of-magnitude statement over layouts. Two to four
    # regions at the corners of those ranges span 8.5x to 113.5x, an order of magnitude at best and about 100x at
    # worst.
    slowdowns = [
        cross_region_sharding(Q_([compute] * stages, "ms"), Q_(transfer, "ms")).slowdown
        for stages, compute, transfer in itertools.product((2, 3, 4), (1, 5), (75, 150))
    ]
    assert round(min(slowdowns), 1) == 8.5 and round(max(slowdowns), 1) == 113.5
    assert np.mean([10 <= s <= 100 for s in slowdowns]) >= 0.5
    # Per crossing the transfer is 15x to 150x the stage compute.
    assert (75 / 5, 150 / 1) == (15, 150)


def test_self_check_cross_region_sharding_does_not_minimize_p99():
    # Self-check §10.14.6 (answer §10.18): False. Co-located, the same two stages take 10 ms; split between US-East
    # and Asia-Pacific they take 160 ms.
    split = cross_region_sharding(Q_([5, 5], "ms"), Q_(150, "ms"))
    assert split.step_time.m_as("ms") == pytest.approx(160) and split.colocated_time.m_as("ms") == pytest.approx(10)


# ------------------------------------------------------------------ 10.14.5 failover


def test_failover_needs_headroom_for_reconstruction_and_continuing_traffic():
    # §10.14.5 and self-check §10.14.6 (answer §10.18): rerouting alone does not restore the session; region B
    # needs history and headroom for both KV reconstruction and continuing traffic.
    caps = {"a": Q_(1000, QPS), "b": Q_(1000, QPS)}
    loads = {"a": Q_(400, QPS), "b": Q_(400, QPS)}
    plain = failover_headroom(caps, loads, "a")
    assert plain.feasible and plain.utilization["b"] == pytest.approx(0.8)
    with_rebuild = failover_headroom(caps, loads, "a", rebuild_load=Q_(300, QPS))
    assert not with_rebuild.feasible and with_rebuild.shortfall.m_as(QPS) == pytest.approx(100)
    # Data-residency rules may keep part of the failed region's traffic from moving at all.
    eu_bound = failover_headroom(caps, loads, "a", reroutable_fraction=0.5, rebuild_load=Q_(300, QPS))
    assert eu_bound.feasible and eu_bound.moved_load.m_as(QPS) == pytest.approx(500)


def test_symmetric_regions_survive_one_failure_only_below_r_minus_1_over_r():
    # Derived N+1 rule (catalog M-D08): survivors run at rho R / (R - 1).
    assert symmetric_failover_utilization(0.5, 2) == pytest.approx(1.0)
    assert symmetric_failover_utilization(2 / 3, 3) == pytest.approx(1.0)
    assert symmetric_failover_utilization(0.75, 4) == pytest.approx(1.0)
    caps = {r: Q_(100, QPS) for r in "abc"}
    result = failover_headroom(caps, {r: Q_(60, QPS) for r in "abc"}, "b")
    assert result.utilization == pytest.approx({"a": 0.9, "c": 0.9})


def test_failover_spreads_by_spare_capacity_and_rejects_bad_inputs():
    caps = {"a": Q_(100, QPS), "b": Q_(200, QPS), "c": Q_(100, QPS)}
    loads = {"a": Q_(50, QPS), "b": Q_(50, QPS), "c": Q_(90, QPS)}
    result = failover_headroom(caps, loads, "a")
    assert result.utilization["b"] == pytest.approx((50 + 50 * 150 / 160) / 200)
    assert failover_headroom(caps, loads, "a", eligible=["c"]).feasible is False
    with pytest.raises(InputError, match="'capacities' must name at least one region"):
        failover_headroom({}, {}, "a")
    with pytest.raises(InputError, match="'failed'"):
        failover_headroom(caps, loads, "z")


def test_listing_3_at_most_two_attempts_within_the_deadline():
    # Listing 3 (§10.14.5): budgets (2.0, 5.0) s, timeout = min(budget, remaining), at most two attempts;
    # worst case min(deadline, 7 s) (derived).
    slow = {"us-east": Q_(30, "s"), "us-west": Q_(30, "s"), "eu-west": Q_(1, "s")}
    out = failover_attempts(Q_(20, "s"), ["us-east", "us-west", "eu-west"], slow)
    assert out.result == "unavailable_or_deadline_exceeded" and len(out.attempts) == 2
    assert [a.timeout.m_as("s") for a in out.attempts] == [2.0, 5.0]
    assert out.time_used.m_as("s") == pytest.approx(7)
    tight = failover_attempts(Q_(3, "s"), ["us-east", "us-west"], slow)
    assert [a.timeout.m_as("s") for a in tight.attempts] == [2.0, 1.0] and tight.time_used.m_as("s") == pytest.approx(3)
    rejected = failover_attempts(Q_(10, "s"), ["us-east", "eu-west"], {"us-east": None, "eu-west": Q_(1, "s")})
    assert rejected.region == "eu-west" and rejected.attempts[0].outcome == "unavailable_or_rejected"
    assert failover_attempts(Q_(10, "s"), [], {}).region is None


# ------------------------------------------------------------------ 10.14.6 cost across regions (Table 25, Listing 4)


def table_25(market):
    prices = load_registry().prices
    return {region: prices[f"chapter-{region}-h100-{market}"].price for region in ("us-east", "us-west", "eu-west")}


def test_table_25_hypothetical_prices_and_latencies():
    # Table 25 (§10.14.6): spot 2.50 / 2.30 / 2.80, on demand 4.00 / 3.80 / 4.20 $/hr; latency to US users
    # 10-50, 30-70, 75-100 ms.
    assert {r: p.m_as("USD/hour") for r, p in table_25("spot").items()} == pytest.approx(
        {"us-east": 2.50, "us-west": 2.30, "eu-west": 2.80}
    )
    assert {r: p.m_as("USD/hour") for r, p in table_25("on-demand").items()} == pytest.approx(
        {"us-east": 4.00, "us-west": 3.80, "eu-west": 4.20}
    )
    assert {r: (lo.m_as("ms"), hi.m_as("ms")) for r, (lo, hi) in CHAPTER_US_USER_LATENCY.items()} == {
        "us-east": (10, 50),
        "us-west": (30, 70),
        "eu-west": (75, 100),
    }


def test_self_check_cheaper_spot_hour_does_not_always_lower_completion_cost():
    # Self-check §10.14.6 (answer §10.18): False. "GPU price alone is insufficient" (§10.14.6). With 8 % lower
    # spot price (2.30 vs 2.50), US-West loses once its useful throughput falls below 0.92 of US-East's (derived
    # break-even) or once transfer charges exceed the saving.
    spot = table_25("spot")
    hour = Q_(1, "hour")
    east = cost_per_completed_request(spot["us-east"], 8, hour, Q_(10, QPS))
    same = cost_per_completed_request(spot["us-west"], 8, hour, Q_(10, QPS))
    slower = cost_per_completed_request(spot["us-west"], 8, hour, Q_(9, QPS))
    assert same < east < slower
    break_even = cost_per_completed_request(spot["us-west"], 8, hour, Q_(10 * 2.30 / 2.50, QPS))
    assert break_even.m_as("USD/request") == pytest.approx(east.m_as("USD/request"))
    shipped = cost_per_completed_request(spot["us-west"], 8, hour, Q_(10, QPS), transfer_bytes=Q_(100, "GB"),
                                         transfer_price=Q_(0.02, "USD/GB"))  # fmt: skip
    assert shipped > east
    idle = cost_per_completed_request(spot["us-west"], 8, hour, Q_(10, QPS), idle_time=Q_(0.25, "hour"))
    retries = cost_per_completed_request(spot["us-west"], 8, hour, Q_(10, QPS), retry_fraction=0.1)
    assert idle > east and retries > east


def test_listing_4_filters_then_picks_cheapest_for_low_priority_and_nearest_otherwise():
    # Listing 4 (§10.14.6): eligible_regions (placement, version, readiness, capacity, deadline); no region ->
    # no_feasible_destination; low priority -> lowest completion cost; else nearest.
    hour = Q_(1, "hour")
    spot = table_25("spot")
    options = [
        RegionOption("us-east", Q_(20, "ms"), cost_per_completed_request(spot["us-east"], 8, hour, Q_(10, QPS)), "us"),
        RegionOption("us-west", Q_(50, "ms"), cost_per_completed_request(spot["us-west"], 8, hour, Q_(10, QPS)), "us"),
        RegionOption("eu-west", Q_(90, "ms"), cost_per_completed_request(spot["eu-west"], 8, hour, Q_(10, QPS)), "eu"),
    ]
    assert route_request(options).region == "us-east"
    assert route_request(options, priority="low").region == "us-west"
    assert route_request(options, allowed_jurisdictions=["eu"]).region == "eu-west"
    assert route_request(options, deadline=Q_(30, "ms")).eligible == ("us-east",)
    # A nearby region whose queues are saturated loses to a farther one (§10.14.2).
    busy = RegionOption("us-east", Q_(20, "ms"), None, "us", queue_wait=Q_(500, "ms"))
    assert route_request([busy, options[1]]).region == "us-west"
    none = route_request([RegionOption("us-east", Q_(20, "ms"), ready=False)])
    assert none.region is None and none.reason.startswith("no_feasible_destination")
    with pytest.raises(InputError, match="'regions'"):
        route_request([])
