"""Load balancing and routing (section 10.11): worked numbers, simulations against closed forms, properties."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError, UnitsError, load_registry
from calculator.memory import kv_bytes_per_token
from calculator.routing import (
    CircuitBreaker,
    CircuitBreakerConfig,
    ConsistentHashRing,
    expected_max_load,
    fanout_slow_probability,
    inverse_latency_weights,
    kv_migration,
    max_load_order,
    per_leaf_budget,
    probe_hit_probability,
    remap_fraction_on_add,
    remap_fraction_on_remove,
    remapped_fraction,
    retry_amplification,
    retry_equilibrium,
    route_two_choices,
    routing_shares,
    simulate_circuit_breaker,
    simulate_max_load,
    tail_event_rate,
    wasted_token_fraction,
)

QPS = "request/s"


# ------------------------------------------------------------------ 10.11.1 fan-out tails


def test_lighthouse_10_2_expected_1000_tail_events_per_second():
    # Lighthouse 10.2 (§10.11): "At 10^7 QPS, an event probability of 10^-4 implies an expected 1,000 such
    # events per second."
    assert tail_event_rate(Q_(1e7, QPS), Q_(1e-4, "1/request")).m_as("1/s") == pytest.approx(1000)


def test_fanout_100_shards_at_p99_miss_63_percent():
    # §10.11.1: 100 shards each meeting their p99 independently: "misses that threshold about 63 percent".
    assert round(100 * fanout_slow_probability(0.01, 100)) == 63


def test_fanout_leaf_budget_moves_from_p99_to_p99_99():
    # §10.11.1: "each of the 100 leaves may be slow only about 0.01 percent of the time, so the leaf target
    # moves from p99 to roughly p99.99". Exact inverse 1 - 0.99^(1/100) = 1.005e-4.
    budget = per_leaf_budget(0.01, 100)
    assert round(100 * budget, 2) == 0.01
    assert round(100 * (1 - budget), 2) == 99.99
    assert fanout_slow_probability(budget, 100) == pytest.approx(0.01)


@given(st.floats(0, 1), st.integers(1, 10_000))
def test_per_leaf_budget_inverts_the_fanout_tail(request_probability, fanout):
    leaf = per_leaf_budget(request_probability, fanout)
    assert 0 <= leaf <= request_probability + 1e-15
    assert fanout_slow_probability(leaf, fanout) == pytest.approx(request_probability, abs=1e-9)


def test_fanout_broadcasts_and_rejects_bad_probabilities():
    miss = fanout_slow_probability(np.array([0.01, 0.001, 0.0001]), np.array([[1], [100], [1000]]))
    assert miss.shape == (3, 3) and np.all(np.diff(miss, axis=0) > 0)
    with pytest.raises(InputError, match="'leaf_probability' must be a probability"):
        fanout_slow_probability(1.5, 10)
    with pytest.raises(InputError, match="'request_probability' must be a probability"):
        per_leaf_budget(-0.1, 10)
    with pytest.raises(InputError, match="'fanout' must be an integer >= 1"):
        fanout_slow_probability(0.01, 0)


# ------------------------------------------------------------------ balls into bins (eq. 14, 15; Theorem 10.2)


def test_self_check_two_choices_improve_occupancy_order_for_1000_servers():
    # Self-check §10.11.10 (answer §10.18): two probes improve static occupancy from Theta(log R / log log R) to
    # Theta(log log R) for a 1,000-server fleet. Derived leading terms: 3.57 and ln ln 1000 / ln 2 = 2.79.
    assert round(max_load_order(1000), 2) == 3.57
    assert round(max_load_order(1000, 2), 2) == 2.79
    assert round(np.log(np.log(1000)), 2) == 1.93  # the eq. 15 form without the 1 / ln 2 constant


def test_theorem_10_2_two_choices_beat_random_placement_in_simulation():
    random_placement = simulate_max_load(1000, choices=1, trials=200, seed=7)
    two_choices = simulate_max_load(1000, choices=2, trials=200, seed=7)
    assert two_choices.mean < random_placement.mean - 2


@pytest.mark.parametrize(("bins", "choices"), [(100, 1), (100, 2), (1000, 1), (1000, 2), (1000, 3), (5000, 2)])
def test_simulated_max_load_matches_the_fluid_limit(bins, choices):
    # Seeded simulation vs the closed-form fluid limit: within 4 standard errors plus 3 %.
    sim = simulate_max_load(bins, choices=choices, trials=300, seed=11)
    analytic = expected_max_load(bins, choices=choices)
    assert abs(sim.mean - analytic) <= 4 * sim.standard_error + 0.03 * analytic


def test_more_balls_than_bins_and_bad_inputs():
    sim = simulate_max_load(200, balls=2000, choices=2, trials=200, seed=3)
    assert abs(sim.mean - expected_max_load(200, 2000, 2)) < 0.1 * sim.mean
    with pytest.raises(InputError, match="'bins' must be >= 3"):
        max_load_order(2)
    with pytest.raises(InputError, match="'choices'"):
        simulate_max_load(100, choices=0)


def test_probe_hit_probability_squares_with_two_probes():
    # §10.11.3: one probe hits the hot set with probability H/R, two probes both hit it with (H/R)^2.
    assert probe_hit_probability(50, 1000, 1) == pytest.approx(0.05)
    assert probe_hit_probability(50, 1000, 2) == pytest.approx(0.0025)
    with pytest.raises(InputError, match="'hot_bins'"):
        probe_hit_probability(1001, 1000)


def test_algorithm_4_picks_the_lower_normalized_post_admission_load():
    rng = np.random.default_rng(1)
    counts = np.zeros(3, int)
    for _ in range(2000):
        counts[route_two_choices([10.0, 0.0, 10.0], [1, 1, 1], 1.0, rng).replica] += 1
    # Replica 1 is chosen whenever it is probed: 1 - (2/3)^2 = 5/9 of the time.
    assert counts[1] / counts.sum() == pytest.approx(5 / 9, abs=0.03)
    # Capacity weights normalize the work: a replica with 4x the capacity and 2x the work is less loaded.
    assert route_two_choices([20, 10], [4, 1], 0, np.random.default_rng(0), attempts=50).replica in (0, 1)


def test_algorithm_4_rejects_when_nothing_admits_or_the_set_is_empty():
    rng = np.random.default_rng(2)
    rejected = route_two_choices([1, 2], [1, 1], 1, rng, admit=lambda replica: False, attempts=3)
    assert rejected.replica is None and rejected.attempts == 3 and "overload" in rejected.reason
    assert route_two_choices([], [], 1, rng).replica is None
    with pytest.raises(InputError, match="'capacity_weights' must be > 0"):
        route_two_choices([1, 2], [1, 0], 1, rng)


# ------------------------------------------------------------------ 10.11.4 weighted routing, Example 10.8

H100_A100 = (Q_([1000, 600], QPS), Q_(15_000, QPS))


def test_example_10_8_round_robin_500_qps_each_50_and_83_3_percent():
    # Example 10.8 (§10.11.4): round robin "routes equal request counts (500 QPS) to all nodes", H100s at
    # "50 percent", A100s at "83.3 percent".
    rr = routing_shares(*H100_A100, counts=[10, 20], policy="round_robin")
    assert rr.rate.m_as(QPS).tolist() == pytest.approx([500, 500])
    assert round(100 * rr.utilization[0]) == 50
    assert round(100 * rr.utilization[1], 1) == 83.3


def test_example_10_8_weighted_4_5_and_2_7_percent_at_68_2_percent():
    # Example 10.8 (§10.11.4): weights "4.5 percent" and "2.7 percent", "68.2 percent vs. 68.2 percent".
    weighted = routing_shares(*H100_A100, counts=[10, 20])
    assert round(100 * weighted.share[0], 1) == 4.5
    assert round(100 * weighted.share[1], 1) == 2.7
    assert [round(100 * u, 1) for u in weighted.utilization] == [68.2, 68.2]


def test_self_check_example_10_8_answer_4_55_and_2_73_percent_of_22000():
    # Answer §10.18 / option §10.11.10: "1000/22000 ~ 4.55%", "600/22000 ~ 2.73%", 681.8 and 409.1 QPS, 68.2 %.
    weighted = routing_shares(*H100_A100, counts=[10, 20])
    assert weighted.total_capacity.m_as(QPS) == pytest.approx(22_000)
    assert [round(100 * s, 2) for s in weighted.share] == [4.55, 2.73]
    assert [round(r, 1) for r in weighted.rate.m_as(QPS)] == [681.8, 409.1]
    assert 10 * weighted.share[0] + 20 * weighted.share[1] == pytest.approx(1)


def test_round_robin_saturates_the_slow_tier_first():
    # Derived from Example 10.8: round robin saturates the A100s at 18,000 QPS; weighting at 22,000 QPS.
    assert routing_shares(*H100_A100, [10, 20], "round_robin").saturation_rate.m_as(QPS) == pytest.approx(18_000)
    assert routing_shares(*H100_A100, [10, 20]).saturation_rate.m_as(QPS) == pytest.approx(22_000)
    overloaded = routing_shares(Q_([1000, 600], QPS), Q_(20_000, QPS), [10, 20], "round_robin")
    assert not overloaded.stable


@settings(deadline=None)
@given(
    st.lists(st.floats(10, 5000), min_size=1, max_size=12),
    st.floats(10, 5000),
    st.floats(0, 20_000),
    st.sampled_from(["weighted", "round_robin"]),
)
def test_more_replicas_never_raise_utilization(capacities, added, rate, policy):
    before = routing_shares(Q_(capacities, QPS), Q_(rate, QPS), policy=policy)
    after = routing_shares(Q_([*capacities, added], QPS), Q_(rate, QPS), policy=policy)
    # Every existing replica carries no more load, and with capacity weights no replica is busier than before.
    assert np.all(after.utilization[:-1] <= before.utilization + 1e-12)
    if policy == "weighted":
        assert after.utilization.max() <= before.utilization.max() + 1e-12


def test_inverse_latency_weights_shift_traffic_from_slow_replicas():
    # §10.11.4: latency[i] = EMA(observed), weight[i] = 1 / latency[i].
    average, weights = inverse_latency_weights(Q_([50, 50], "ms"))
    assert weights.tolist() == [0.5, 0.5]
    average, weights = inverse_latency_weights(Q_([50, 500], "ms"), smoothing=0.5, previous=average)
    assert average.m_as("ms").tolist() == pytest.approx([50, 275])
    assert weights[0] == pytest.approx(275 / 325)
    with pytest.raises(InputError, match="'smoothing'"):
        inverse_latency_weights(Q_([50], "ms"), smoothing=0)


def test_routing_shares_rejects_bad_inputs():
    with pytest.raises(InputError, match="'capacities' must be > 0"):
        routing_shares(Q_([1000, 0], QPS), Q_(100, QPS))
    with pytest.raises(InputError, match="'arrival_rate' must be >= 0"):
        routing_shares(Q_([1000], QPS), Q_(-1, QPS))
    with pytest.raises(InputError, match="'policy'"):
        routing_shares(Q_([1000], QPS), Q_(1, QPS), policy="random")
    with pytest.raises(UnitsError, match="'capacities'"):
        routing_shares(Q_([1000], "GB"), Q_(1, QPS))


# ------------------------------------------------------------------ 10.11.6 consistent hashing


def test_consistent_hashing_remaps_1_over_n_plus_1_on_add_and_1_over_n_on_remove():
    # §10.11.6 (answer §10.18): adding a server moves an expected 1/(N+1) of keys; removing one affects its
    # 1/N share. Derived for N = 10: 9.09 % and 10 %.
    assert round(100 * remap_fraction_on_add(10), 2) == 9.09
    assert round(100 * remap_fraction_on_remove(10), 2) == 10.0
    ring = ConsistentHashRing([f"replica-{i}" for i in range(10)], virtual_nodes=400, seed=3)
    keys = np.arange(200_000)
    assert remapped_fraction(ring, ring.with_server("replica-10"), keys) == pytest.approx(1 / 11, rel=0.12)
    removed = ring.without_server("replica-4")
    assert remapped_fraction(ring, removed, keys) == pytest.approx(ring.load_shares(keys)["replica-4"], abs=1e-12)
    assert remapped_fraction(ring, removed, keys) == pytest.approx(1 / 10, rel=0.12)


def test_only_keys_of_the_changed_server_move():
    ring = ConsistentHashRing(["a", "b", "c"], virtual_nodes=100)
    keys = np.arange(30_000)
    grown = ring.with_server("d")
    moved = ring.lookup(keys) != grown.lookup(keys)
    assert set(grown.lookup(keys)[moved]) == {"d"}  # every moved key went to the new server
    assert ring.lookup(["session-42"])[0] == ring.lookup(["session-42"])[0]  # same key, same server


def test_remap_fraction_shrinks_as_the_ring_grows():
    keys = np.arange(100_000)
    measured = []
    for servers in (2, 4, 8, 16, 32):
        ring = ConsistentHashRing([f"s{i}" for i in range(servers)], virtual_nodes=1000)
        measured.append(remapped_fraction(ring, ring.with_server("new"), keys))
    assert all(later < earlier for earlier, later in itertools.pairwise(measured))
    assert np.allclose(measured, [1 / (n + 1) for n in (2, 4, 8, 16, 32)], rtol=0.15)


def test_few_virtual_nodes_give_uneven_ranges():
    # §10.11.6: virtual nodes smooth uneven ranges.
    keys = np.arange(100_000)
    coarse = ConsistentHashRing([f"s{i}" for i in range(20)], virtual_nodes=1, seed=5).load_shares(keys)
    fine = ConsistentHashRing([f"s{i}" for i in range(20)], virtual_nodes=500, seed=5).load_shares(keys)
    assert np.std(list(coarse.values())) > 4 * np.std(list(fine.values()))


def test_ring_rejects_bad_membership():
    with pytest.raises(InputError, match="'servers'"):
        ConsistentHashRing([])
    ring = ConsistentHashRing(["a"])
    with pytest.raises(InputError, match="last server"):
        ring.without_server("a")
    with pytest.raises(InputError, match="already"):
        ring.with_server("a")


# ------------------------------------------------------------------ 10.11.8 KV migration


@pytest.fixture(scope="module")
def llama3_70b_migration():
    # §10.11.8: Llama 3 70B (GQA; dims from its config: 80 layers, 8 KV heads of 128, FP16), 4,096 tokens,
    # TP 8, 100 Gb/s, 7.1e10 parameters, 40 % of the H100's dense BF16 peak (989 TFLOP/s, not printed there).
    model = load_registry().models["llama-3.1-70b"]
    per_token = kv_bytes_per_token(model.layers, model.kv_heads, model.head_dim, Q_(2, "B"))
    peak = load_registry().accelerators["h100-sxm"].peak_throughput("bf16")
    return kv_migration(per_token, Q_(4096, "token"), 7.1e10, 8, Q_(100, "Gb/s"), peak, 0.4)


def test_kv_migration_cache_1_3_gb_and_168_mb_per_device(llama3_70b_migration):
    # §10.11.8: "about 1.3 GB total per sequence, or about 168 MB per device under 8-way tensor parallelism".
    assert round(llama3_70b_migration.cache_bytes.m_as("GB"), 1) == 1.3
    assert round(llama3_70b_migration.bytes_per_device.m_as("MB")) == 168


def test_kv_migration_shard_13_ms_full_cache_107_ms(llama3_70b_migration):
    # §10.11.8: "roughly 13 ms" for one shard, "about 107 ms" for the full cache over one link (this needs the
    # unrounded 1.342 GB; 1.3 GB would give 104 ms).
    assert round(llama3_70b_migration.shard_transfer_time.m_as("ms")) == 13
    assert round(llama3_70b_migration.transfer_time.m_as("ms")) == 107


def test_kv_migration_prefill_5_8e14_flops_roughly_180_ms_transfer_wins(llama3_70b_migration):
    # §10.11.8: "5.8 x 10^14 FLOPs (2 x 7.1 x 10^10 parameters x 4,096 tokens), giving roughly 180 ms";
    # "Transfer is faster in this comparison". With 989.4 TFLOP/s: 183.7 ms, which rounds to 180.
    assert round(llama3_70b_migration.prefill_flops.m_as("FLOP") / 1e14, 1) == 5.8
    assert round(llama3_70b_migration.rebuild_time.m_as("ms"), -1) == 180
    assert llama3_70b_migration.decision == "transfer"


def test_kv_migration_concurrent_links_unreachable_source_and_slow_networks():
    args = (Q_(327680, "B/token"), Q_(4096, "token"), 7.1e10, 8)
    peak = Q_(989, "TFLOP/s")
    parallel = kv_migration(*args, Q_(100, "Gb/s"), peak, 0.4, concurrent_links=8)
    assert parallel.transfer_time.m_as("ms") == pytest.approx(parallel.shard_transfer_time.m_as("ms"))
    lost = kv_migration(*args, Q_(100, "Gb/s"), peak, 0.4, source_available=False)
    assert lost.decision == "rebuild" and "history" in lost.reason
    assert kv_migration(*args, Q_(10, "Gb/s"), peak, 0.4).decision == "rebuild"
    via_registry = kv_migration(*args, "chapter-ethernet-100g", peak, 0.4)
    assert via_registry.transfer_time.m_as("ms") == pytest.approx(107.374 + 0.05, abs=1e-3)  # + 50 us alpha
    with pytest.raises(InputError, match="'utilization'"):
        kv_migration(*args, Q_(100, "Gb/s"), peak, 0)
    with pytest.raises(InputError, match="'link' must be > 0"):
        kv_migration(*args, Q_(0, "Gb/s"), peak, 0.4)
    with pytest.raises(UnitsError, match="'link' needs a bandwidth"):
        kv_migration(*args, Q_(100, "GB"), peak, 0.4)


# ------------------------------------------------------------------ 10.11.10 circuit breaker and retries


def slowdown_trace(slow_from=10.0, slow_until=40.0, step=0.05, end=70.0):
    # §10.11.10: "an illustrative rise in service time from 50 ms to 500 ms".
    t = np.arange(0, end, step)
    slow = (t >= slow_from) & (t < slow_until)
    return t, slow, Q_(np.where(slow, 500, 50), "ms")


def test_circuit_breaker_opens_on_the_50_to_500_ms_slowdown_and_recovers():
    t, slow, latency = slowdown_trace()
    config = CircuitBreakerConfig(
        failure_threshold=0.5, window=20, min_requests=10, latency_threshold=Q_(200, "ms"), open_interval=Q_(5, "s")
    )
    trace = simulate_circuit_breaker(Q_(t, "s"), np.zeros(t.size, bool), latency, config)
    first_open = next(time for time, _, to in trace.transitions if to == "open")
    assert 10 <= first_open < 10 + 11 * 0.05  # after min_requests bad outcomes at the threshold
    assert not trace.admitted[(t > first_open + 0.01) & (t < first_open + 4.9)].any()  # fails fast while open
    # While slow, half-open probes fail and reopen; after recovery the probes pass and it closes.
    reopen = [time for time, start, to in trace.transitions if start == "half_open" and to == "open"]
    assert reopen and all(time < 40 for time in reopen)
    closed = [time for time, start, to in trace.transitions if start == "half_open" and to == "closed"]
    assert len(closed) == 1 and 40 <= closed[0] <= 46
    assert trace.states[-1] == "closed"
    # Most of the slow window was failed fast instead of queued behind 500 ms requests.
    assert (~trace.admitted[slow]).mean() > 0.9


def test_circuit_breaker_state_machine_transitions():
    breaker = CircuitBreaker(
        CircuitBreakerConfig(window=4, min_requests=4, open_interval=Q_(1, "s"), half_open_probes=2)
    )
    for i in range(3):
        assert breaker.allow(i * 0.1)
        breaker.record(i * 0.1, success=False)
    assert breaker.state == "closed"  # below min_requests
    breaker.allow(0.3)
    breaker.record(0.3, success=True)
    assert breaker.state == "open"  # 3 of 4 bad >= 50 %
    assert not breaker.allow(0.5)
    assert breaker.allow(1.4) and breaker.state == "half_open"
    assert breaker.allow(1.41) and not breaker.allow(1.42)  # only two probes
    breaker.record(1.5, success=True)
    breaker.record(1.6, success=True)
    assert breaker.state == "closed"
    assert [to for _, _, to in breaker.transitions] == ["open", "half_open", "closed"]


def test_breaker_rejects_bad_configuration_and_traces():
    with pytest.raises(InputError, match="'failure_threshold'"):
        CircuitBreakerConfig(failure_threshold=1.5)
    with pytest.raises(InputError, match="'min_requests'"):
        CircuitBreakerConfig(window=5, min_requests=10)
    with pytest.raises(InputError, match="nondecreasing"):
        simulate_circuit_breaker(Q_([1, 0], "s"), [False, False])


def test_retry_amplification_and_overload_equilibrium():
    assert retry_amplification(0.0, 3) == 1
    assert retry_amplification(0.5, 2) == pytest.approx(1.75)
    assert retry_amplification(1.0, 2) == 3
    # Below capacity, retries cost nothing; above it they multiply the offered load while goodput stays at mu.
    calm = retry_equilibrium(Q_(800, QPS), Q_(1000, QPS), 3)
    assert (calm.amplification, calm.failure_probability, calm.overloaded) == (1.0, 0.0, False)
    storm = retry_equilibrium(Q_(2000, QPS), Q_(1000, QPS), 3)
    assert storm.attempt_rate.m_as(QPS) > 3000
    assert storm.goodput.m_as(QPS) == pytest.approx(1000, rel=1e-6)
    with pytest.raises(InputError, match="'failure_probability'"):
        retry_amplification(1.2, 3)
    with pytest.raises(InputError, match="'max_retries'"):
        retry_amplification(0.5, 1.5)


@given(st.floats(1, 1e5), st.floats(1, 1e5), st.integers(0, 8))
def test_retry_goodput_never_exceeds_capacity(rate, capacity, retries):
    eq = retry_equilibrium(Q_(rate, QPS), Q_(capacity, QPS), retries)
    assert eq.goodput.m_as(QPS) <= min(rate, capacity) * (1 + 1e-9)
    assert 1 <= eq.amplification <= retries + 1 + 1e-9
    served = eq.attempt_rate.m_as(QPS) * (1 - eq.failure_probability)
    assert served == pytest.approx(eq.goodput.m_as(QPS), rel=1e-6)


def test_wasted_token_rate():
    # §10.11.10: the fraction of generated tokens spent on canceled, timed-out or late requests.
    assert wasted_token_fraction(Q_(900, "token"), Q_(100, "token")) == pytest.approx(0.1)


# --------------------------------------------------------------------------------------------
# Least connections and the policy comparison (section 10.11.5)


def test_least_connections_picks_the_fewest_active_requests():
    from calculator.routing import least_connections

    assert least_connections([4, 2, 7, 2]) == 1
    rng = np.random.default_rng(3)
    picks = {least_connections([9, 0, 9, 9], probes=2, rng=rng) for _ in range(200)}
    assert 1 in picks and len(picks) > 1  # sampled: probes may all miss the idle replica
    with pytest.raises(InputError, match="needs rng="):
        least_connections([1, 2], probes=2)
    with pytest.raises(InputError, match="argument 'active'"):
        least_connections([])


def test_policy_comparison_at_light_load_is_just_decoding():
    from calculator.routing import compare_routing_policies

    # §10.11.5: a 10-token reply against a 500-token essay. At light load every policy finds an idle
    # replica, so each request takes its own length x (T0 + t), whatever the policy.
    r = compare_routing_policies(Q_(0.5, "request/s"), [10, 500], 8, Q_(10, "ms"), Q_(1, "ms"), requests=300)
    expected = 0.5 * (10 + 500) * 0.011
    assert r.mean.m_as("s") == pytest.approx([expected] * 5, rel=0.1)
    by = dict(zip(r.policies, r.max_active, strict=True))
    assert by["least_connections"] <= 2 and by["least_work"] <= 2  # an idle replica is always found


def test_policy_comparison_least_connections_balances_better_than_random():
    from calculator.routing import compare_routing_policies

    lengths = np.unique(np.round(np.geomspace(10, 2000, 30)))
    r = compare_routing_policies(Q_(20, "request/s"), lengths, 8, Q_(10, "ms"), Q_(0.5, "ms"), requests=1500)
    by = dict(zip(r.policies, r.max_active, strict=True))
    assert by["least_connections"] <= by["random"]
    p99 = dict(zip(r.policies, r.p99.m_as("s"), strict=True))
    assert p99["least_connections"] <= p99["random"]
    with pytest.raises(InputError, match="argument 'policies'"):
        compare_routing_policies(Q_(1, "request/s"), [10], 2, Q_(1, "ms"), Q_(0, "ms"), policies=["fastest"])
