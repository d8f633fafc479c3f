"""Multi-tenancy (section 10.12): worked numbers, fairness properties, atomic quota reservation."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError
from calculator.tenancy import (
    PRIORITY_CLASSES,
    QuotaLedger,
    QuotaRequest,
    TenantQuota,
    TenantUsage,
    bulkhead_partition,
    can_preempt,
    check_quota,
    check_request_caps,
    dominant_resource_fairness,
    kv_pool_contention,
    max_min_fair,
    priority_allocation,
    tenant_burst,
)

QPS = "request/s"


# ------------------------------------------------------------------ 10.12.1 noisy neighbors


def test_noisy_neighbor_kv_pool_200_to_75_sequences_62_5_percent():
    # §10.12.1: three tenants, 60 GB KV pool, 20 GB shares; one grows to 45 GB; the others drop "from 200
    # concurrent sequences each to 75, a 62.5 percent reduction". KV per sequence (0.1 GB) is implied by 20 GB / 200.
    contention = kv_pool_contention(Q_(60, "GB"), 3, Q_(20, "GB") / 200, Q_(45, "GB"))
    assert contention.fair_share.m_as("GB") == pytest.approx(20)
    assert (contention.sequences_fair, contention.sequences_after) == (200, 75)
    assert round(100 * contention.reduction, 1) == 62.5


def test_kv_pool_contention_bad_inputs():
    with pytest.raises(InputError, match="'hog_allocation'"):
        kv_pool_contention(Q_(60, "GB"), 3, Q_(0.1, "GB"), Q_(61, "GB"))
    with pytest.raises(InputError, match="'tenants' must be >= 2"):
        kv_pool_contention(Q_(60, "GB"), 1, Q_(0.1, "GB"), Q_(10, "GB"))


def test_example_10_9_tenant_3_bursts_to_500_qps_5x_and_is_held_to_120():
    # Example 10.9 (§10.12.1): 10 tenants at 100 QPS, tenant 3 bursts to 500 QPS ("5x its baseline"); with
    # quotas it is limited to 120 QPS. The p99 figures (22-45 ms, 15 ms) have no service model behind them and
    # are not computed. Derived pool loads: 1,000 at baseline, 1,400 during the burst, 1,020 with the quota.
    rates = Q_([100] * 10, QPS)
    burst = tenant_burst(rates, 3, 5, pool_capacity=Q_(2000, QPS))
    assert burst.admitted[3].m_as(QPS) == pytest.approx(500)
    assert burst.pool_rate.m_as(QPS) == pytest.approx(1400)
    assert burst.pool_utilization == pytest.approx(0.7)
    limited = tenant_burst(rates, 3, 5, quota=Q_(120, QPS))
    assert limited.admitted[3].m_as(QPS) == pytest.approx(120)
    assert limited.pool_rate.m_as(QPS) == pytest.approx(1020)
    assert limited.throttled_rate.m_as(QPS) == pytest.approx(380)  # judged against tenant 3's own contract
    with pytest.raises(InputError, match="'bursting_tenant'"):
        tenant_burst(rates, 10, 5)


def test_pitfall_tenant_bursting_to_5x_normal_traffic():
    # Section 10.16: "A tenant bursting to 5x normal traffic can degrade latency for all other tenants".
    burst = tenant_burst(Q_([100, 100, 100, 100], QPS), 0, 5, pool_capacity=Q_(600, QPS))
    assert (
        burst.pool_utilization > 1 > tenant_burst(Q_([100] * 4, QPS), 0, 1, pool_capacity=Q_(600, QPS)).pool_utilization
    )


# ------------------------------------------------------------------ 10.12.2 quotas and fairness


def test_listing_1_quota_defaults_and_the_concurrent_limit():
    # Listing 1 (§10.12.2): max_concurrent_requests 100, max_kv_cache_mb 20,000, max_qps 1,000,
    # max_batch_tokens 50,000. "usage.concurrent + 1 > quota.max_concurrent_requests" rejects at 100, admits 99.
    quota = TenantQuota()
    assert (quota.max_concurrent_requests, quota.max_kv_cache.m_as("MB"), quota.max_qps) == (100, 20_000, 1000)
    assert quota.max_batch_tokens == 50_000
    assert check_quota(quota, TenantUsage(concurrent=100), QuotaRequest()).limit == "max_concurrent_requests"
    assert check_quota(quota, TenantUsage(concurrent=99), QuotaRequest()).admitted


def test_listing_1_each_limit_in_order():
    quota = TenantQuota(max_input_tokens_per_minute=100_000, max_output_tokens_per_minute=20_000)
    cases = {
        "memory limit": (TenantUsage(kv_cache=Q_(19_000, "MB")), QuotaRequest(reserved_kv=Q_(1.5, "GB"))),
        "rate limit": (TenantUsage(requests_last_second=1000), QuotaRequest()),
        "input-token limit": (TenantUsage(input_tokens=99_000), QuotaRequest(input_tokens=1001)),
        "output-token limit": (TenantUsage(output_tokens=19_000), QuotaRequest(max_output_tokens=1001)),
        "prefill chunk exceeds batch-token limit": (TenantUsage(), QuotaRequest(prefill_chunk_tokens=50_001)),
    }
    for reason, (usage, request) in cases.items():
        assert check_quota(quota, usage, request).reason == reason
    at_limit = QuotaRequest(
        reserved_kv=Q_(1, "GB"), input_tokens=1000, max_output_tokens=1000, prefill_chunk_tokens=50_000
    )
    usage = TenantUsage(kv_cache=Q_(19_000, "MB"), input_tokens=99_000, output_tokens=19_000, requests_last_second=999)
    assert check_quota(quota, usage, at_limit).admitted
    # The first failing check in Listing 1's order is reported.
    both = check_quota(quota, TenantUsage(concurrent=100, requests_last_second=1000), QuotaRequest())
    assert both.reason == "concurrent request limit"


def test_snapshot_check_is_not_an_admission_guarantee_but_the_ledger_is():
    # §10.12.2: "simultaneous callers can observe the same free capacity. Production admission must check and
    # reserve resources atomically, roll back failed admissions, and release reservations".
    quota = TenantQuota(max_concurrent_requests=100)
    snapshot = TenantUsage(concurrent=99)
    assert (
        check_quota(quota, snapshot, QuotaRequest()).admitted and check_quota(quota, snapshot, QuotaRequest()).admitted
    )
    ledger = QuotaLedger({"t": quota})
    admitted = []
    lock = threading.Lock()

    def caller():
        decision = ledger.try_reserve("t", QuotaRequest(reserved_kv=Q_(100, "MB")), now=0.5)
        if decision.admitted:
            with lock:
                admitted.append(decision.reservation)

    threads = [threading.Thread(target=caller) for _ in range(250)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 100
    usage = ledger.usage("t", now=0.5)
    assert usage.concurrent == 100 and usage.kv_cache.m_as("MB") == pytest.approx(10_000)
    ledger.release(admitted[0])
    assert ledger.usage("t", now=0.6).concurrent == 99
    with pytest.raises(InputError, match="not open"):
        ledger.release(admitted[0])


def test_ledger_windows_release_and_rollback():
    quota = TenantQuota(max_qps=2, max_output_tokens_per_minute=1000)
    ledger = QuotaLedger({"t": quota})
    a = ledger.try_reserve("t", QuotaRequest(max_output_tokens=400), now=0.0)
    b = ledger.try_reserve("t", QuotaRequest(max_output_tokens=400), now=0.2)
    assert ledger.try_reserve("t", QuotaRequest(), now=0.5).reason == "rate limit"
    assert ledger.try_reserve("t", QuotaRequest(max_output_tokens=400), now=1.5).reason == "output-token limit"
    ledger.rollback(b.reservation)  # failed downstream: its tokens no longer count
    assert ledger.try_reserve("t", QuotaRequest(max_output_tokens=400), now=1.5).admitted
    ledger.release(a.reservation)  # completed: its tokens still count in their minute
    assert ledger.usage("t", now=30).output_tokens == 800
    assert ledger.usage("t", now=61).output_tokens == 400
    with pytest.raises(InputError, match="unknown tenant"):
        ledger.try_reserve("other", QuotaRequest(), now=0)


def test_max_min_fairness_30k_20k_50k():
    # §10.12.2: demands 30,000, 20,000 and 80,000 output tokens/s, 100,000 tokens/s pool: "the allocation is
    # 30,000, 20,000, and 50,000". Answer §10.18: "max-min".
    allocation = max_min_fair(Q_([30_000, 20_000, 80_000], "token/s"), Q_(100_000, "token/s"))
    assert allocation.allocation.m_as("token/s").tolist() == pytest.approx([30_000, 20_000, 50_000])
    assert allocation.satisfied.tolist() == [True, True, False]
    assert allocation.level.m_as("token/s") == pytest.approx(50_000)


def test_drf_reduces_to_max_min_with_one_resource_and_equal_costs():
    # §10.12.2: DRF "reduces to max-min fairness when only one divisible resource constrains the allocation".
    pool = {"decode": Q_(100_000, "token/s")}
    users = [{"decode": Q_(1, "token/s")}] * 3
    drf = dominant_resource_fairness(pool, users, max_tasks=[30_000, 20_000, 80_000])
    assert drf.tasks.tolist() == pytest.approx([30_000, 20_000, 50_000])
    assert drf.saturated == ("decode",)


def test_drf_couples_prefill_decode_and_memory():
    # A prefill-heavy and a memory-heavy tenant: DRF equalizes dominant shares until a resource saturates.
    pool = {"prefill": Q_(200_000, "token/s"), "kv": Q_(60, "GB")}
    users = [
        {"prefill": Q_(4000, "token/s"), "kv": Q_(0.2, "GB")},
        {"prefill": Q_(500, "token/s"), "kv": Q_(1.0, "GB")},
    ]
    drf = dominant_resource_fairness(pool, users)
    assert drf.dominant_shares[0] == pytest.approx(drf.dominant_shares[1])
    assert drf.usage["kv"].m_as("GB") <= 60 + 1e-9 and drf.usage["prefill"].m_as("token/s") <= 200_000 + 1e-6
    assert drf.saturated  # something binds
    with pytest.raises(InputError, match="unknown resource"):
        dominant_resource_fairness(pool, [{"gpu": Q_(1, "")}])


@settings(deadline=None)
@given(
    st.lists(st.floats(0, 1e5), min_size=1, max_size=10),
    st.floats(0, 3e5),
    st.lists(st.floats(0.1, 10), min_size=10, max_size=10),
)
def test_fair_allocations_never_exceed_capacity_or_demand(demands, capacity, weights):
    demand = np.array(demands)
    fair = max_min_fair(demand, capacity, weights[: len(demand)])
    allocation = fair.allocation
    assert np.all(allocation <= demand + 1e-9)
    assert allocation.sum() <= capacity + 1e-6
    assert allocation.sum() == pytest.approx(min(capacity, demand.sum()), rel=1e-9, abs=1e-6)  # work conserving
    drf = dominant_resource_fairness({"r": Q_(capacity + 1e-9, "")}, [{"r": Q_(1, "")}] * len(demand), demand)
    assert np.all(drf.tasks <= demand + 1e-6)
    assert drf.tasks.sum() <= capacity + 1e-6
    assert drf.tasks == pytest.approx(max_min_fair(demand, capacity + 1e-9).allocation, abs=1e-6)


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 10), st.floats(0.01, 10), st.floats(1, 100)), min_size=1, max_size=6))
def test_drf_never_exceeds_any_resource_or_any_demand(users):
    pool = {"a": Q_(100, ""), "b": Q_(50, "")}
    demands = [{"a": Q_(a, ""), "b": Q_(b, "")} for a, b, _ in users]
    cap = [c for *_, c in users]
    drf = dominant_resource_fairness(pool, demands, cap)
    assert drf.usage["a"].m <= 100 + 1e-6 and drf.usage["b"].m <= 50 + 1e-6
    assert np.all(drf.tasks <= np.array(cap) + 1e-6)


def test_fairness_bad_inputs():
    with pytest.raises(InputError, match="'demands' must be >= 0"):
        max_min_fair(Q_([-1, 2], "token/s"), Q_(10, "token/s"))
    with pytest.raises(InputError, match="'capacity' must have the dimension"):
        max_min_fair(Q_([1, 2], "token/s"), Q_(10, "GB"))
    with pytest.raises(InputError, match="'weights'"):
        max_min_fair([1, 2], 3, weights=[1, 0])


# ------------------------------------------------------------------ 10.12.3-4 priority and bulkheads


def test_table_19_priority_classes():
    # Table 19 (§10.12.3): Critical can preempt lower, 100% reserved; Standard can preempt best-effort,
    # weighted share; Best-effort cannot preempt, no guarantee.
    assert [c.guarantee for c in PRIORITY_CLASSES] == ["100% reserved", "Weighted share", "No guarantee"]
    assert can_preempt("critical", "best_effort") and can_preempt("standard", "best_effort")
    assert not can_preempt("standard", "critical") and not can_preempt("best_effort", "best_effort")
    split = priority_allocation(Q_(100, QPS), Q_(120, QPS), Q_([10, 10], QPS), Q_(5, QPS))
    assert split["critical"].m_as(QPS) == 100 and split["unserved"].m_as(QPS) == pytest.approx(45)
    with pytest.raises(InputError, match="'victim'"):
        can_preempt("critical", "gold")


def test_request_level_caps_8000_2000_30_s():
    # §10.12.4: "Caps such as 8,000 input tokens, 2,000 output tokens, and 30 seconds of execution".
    assert check_request_caps(8000, 2000, Q_(30, "s")) is None
    assert check_request_caps(8001, 2000) == "input tokens 8001 > 8000"
    assert check_request_caps(100, 2001).startswith("output tokens")
    assert check_request_caps(100, 100, Q_(31, "s")).startswith("execution time")


def test_example_10_10_bulkheads_70_30_of_the_shared_pool():
    # Example 10.10 (§10.12.4): Enterprise on dedicated pools; "70 percent of the remaining shared capacity to
    # Professional", Free capped "at 30 percent best-effort capacity".
    parts = bulkhead_partition(
        Q_(64, "request/s"), {"enterprise": Q_(24, "request/s")}, {"professional": 0.7, "free": 0.3}
    )
    assert parts["enterprise"].m_as(QPS) == 24
    assert parts["professional"].m_as(QPS) == pytest.approx(28)
    assert parts["free"].m_as(QPS) == pytest.approx(12)
    with pytest.raises(InputError, match="sum to"):
        bulkhead_partition(Q_(10, QPS), {}, {"a": 0.7, "b": 0.4})
    with pytest.raises(InputError, match="exceed the capacity"):
        bulkhead_partition(Q_(10, QPS), {"enterprise": Q_(11, QPS)}, {})


# --------------------------------------------------------------------------------------------
# Hierarchical rate limiting (section 10.15.3)


def test_hierarchical_limits_each_tier_in_turn():
    from calculator.tenancy import HierarchicalRateLimiter

    limiter = HierarchicalRateLimiter(
        key_requests_per_second=5, key_tokens_per_minute=3000, org_tokens_per_minute=4000, model_tokens_per_second=1e6
    )
    # Per-key tokens per minute: a 3,000-token burst, then refused.
    assert limiter.admit("a", "acme", 2000, now=0).admitted
    refused = limiter.admit("a", "acme", 2000, now=0)
    assert (refused.admitted, refused.limit) == (False, "key_tokens_per_minute")
    # The organization's quota is shared by its keys: key b has room, acme has 2,000 left of 4,000.
    assert limiter.admit("b", "acme", 2000, now=0).admitted
    assert limiter.admit("c", "acme", 100, now=0).limit == "org_tokens_per_minute"
    # Another organization is unaffected (no noisy neighbour).
    assert limiter.admit("d", "other", 2000, now=0).admitted
    # Buckets refill: after 30 s key a has regained 1,500 tokens, the org 2,000.
    assert limiter.admit("a", "acme", 1500, now=30).admitted


def test_a_refusal_never_charges_earlier_tiers():
    from calculator.tenancy import HierarchicalRateLimiter

    limiter = HierarchicalRateLimiter(
        key_requests_per_second=1, key_tokens_per_minute=10**6, org_tokens_per_minute=10**6, model_tokens_per_second=100
    )
    # The model ceiling (100 tokens/s, 100-token burst) refuses 500 tokens; the key's one-request
    # budget must stay untouched, so a small request right after is admitted.
    assert limiter.admit("k", "o", 500, now=0).limit == "model_tokens_per_second"
    assert limiter.admit("k", "o", 50, now=0).admitted
    assert limiter.admit("k", "o", 10, now=0).limit == "key_requests_per_second"


def test_rate_limiter_bad_input():
    from calculator.tenancy import HierarchicalRateLimiter, TokenBucket

    with pytest.raises(InputError, match="argument 'org_tokens_per_minute' must be > 0"):
        HierarchicalRateLimiter(1, 1, 0, 1)
    bucket = TokenBucket(rate=1, capacity=2)
    bucket.take(1, now=5)
    with pytest.raises(InputError, match="time went backwards"):
        bucket.available(now=4)
