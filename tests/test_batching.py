"""Batching (section 10.6): worked numbers, the dynamic-batching model against simulation, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError, UnitsError
from calculator.batching import (
    TABLE_7,
    TABLE_9,
    adaptive_window,
    batch_formation,
    batch_operating_points,
    batch_service_time,
    batch_throughput,
    batched_utilization,
    concurrency_plan,
    continuous_batching_ceiling,
    dynamic_batching_latency,
    effective_service_rate,
    effective_waste,
    frames_of_delay,
    knee_batch_size,
    max_batch_for_budget,
    padding_waste,
    pipeline_sustains,
    reasoning_budget,
    reasoning_latency,
    select_batching_strategy,
    shard_batch_size,
    shard_lookup_rate,
    simulate_dynamic_batching,
    slo_adaptive_step,
    slot_timeline,
    speedup_from_waste,
    static_batch_accounting,
    streaming_latency,
    window_batch_size,
)
from calculator.cases import decode_bandwidth_floor
from calculator.memory import kv_bytes_per_token, weight_bytes
from calculator.queueing import network_latency

MS = Q_(1, "ms")
RPS = Q_(1, "request/s")


# --------------------------------------------------------------------------------------------
# 10.6.2 Batching physics


def test_napkin_math_10_2_vision_knee_is_2():
    # Napkin Math 10.2 (§10.6.2): T0 = 2 ms, t_m = 1 ms -> "B ~ 2 ms/1 ms = 2".
    assert knee_batch_size(2 * MS, 1 * MS) == pytest.approx(2)


def test_napkin_math_10_2_llm_decode_knee_is_80():
    # Napkin Math 10.2 (§10.6.2) and self-check 10.6 Q1 (answer D, §10.18): T0 = 40 ms,
    # t_m = 0.5 ms -> "B ~ 40 ms/0.5 ms = 80".
    assert knee_batch_size(40 * MS, 0.5 * MS) == pytest.approx(80)


def test_napkin_math_10_2_40_ms_is_the_weight_stream_and_tp8_keeps_the_knee():
    # §10.6.2: 40 ms is "roughly the time to stream the model's 140 GB of FP16 weights through one
    # H100's 3.35 TB/s" (41.8 ms; catalog A-03: the knee uses the stated 40 ms). Eight-way tensor
    # parallelism divides T0 and t_m by 8 and leaves the knee at 80.
    floor = decode_bandwidth_floor(weight_bytes(70e9, 16), 1, Q_(3.35, "TB/s"))
    assert floor.m_as("ms") == pytest.approx(40, rel=0.05)
    assert floor.m_as("ms") == pytest.approx(41.8, abs=0.05)
    assert decode_bandwidth_floor(Q_(140, "GB"), 8, Q_(3.35, "TB/s")).m_as("ms") == pytest.approx(41.79 / 8, abs=1e-3)
    assert knee_batch_size(40 / 8 * MS, 0.5 / 8 * MS) == pytest.approx(80)


def test_batching_curve_saturates_at_the_marginal_rate_and_halves_at_the_knee():
    # §10.6.1: throughput approaches 1/t_m; at the knee B t_m = T0 it is half that asymptote.
    fixed, marginal = 40 * MS, 0.5 * MS
    assert effective_service_rate(80, fixed, marginal).m_as("request/s") == pytest.approx(1000)
    big = effective_service_rate(10**7, fixed, marginal).m_as("request/s")
    assert big == pytest.approx(2000, rel=1e-4)
    sizes = np.arange(1, 513)
    rates = effective_service_rate(sizes, fixed, marginal).m_as("request/s")
    assert np.all(np.diff(rates) > 0) and np.all(np.diff(rates, 2) < 0)  # increasing and concave
    assert batch_service_time(8, fixed, marginal).m_as("ms") == pytest.approx(44)


def test_execution_only_feasibility_uses_the_remaining_budget():
    # §10.6.2: T(B) <= SLO must use the budget left after routing, queueing, formation and delivery.
    assert max_batch_for_budget(40 * MS, 0.5 * MS, 50 * MS) == 20
    assert max_batch_for_budget(40 * MS, 0.5 * MS, 40.2 * MS) == 0  # not even one request fits
    assert max_batch_for_budget(2 * MS, 1 * MS, Q_([3, 10, 2.9999999999], "ms")).tolist() == [1, 8, 1]
    assert batch_service_time(20, 40 * MS, 0.5 * MS) <= 50 * MS < batch_service_time(21, 40 * MS, 0.5 * MS)


def test_figure_6_model_curve_trades_interactivity_for_throughput():
    # Figure 6 (§10.6.2) from the linear step model of the 70B replica over 8 GPUs
    # (T0 = 5 ms, t_m = 0.0625 ms): per-user rate falls and per-GPU rate rises with the batch.
    points = batch_operating_points(np.array([1, 80, 256]), 5 * MS, 0.0625 * MS, devices=8)
    assert points.interactivity.m_as("token/s") == pytest.approx([197.5, 100, 47.6], abs=0.05)
    assert points.throughput_per_device.m_as("token/s") == pytest.approx([24.7, 1000, 1523.8], abs=0.05)


def test_theorem_10_1_application_concurrency_plan():
    # §10.6.2 and self-check 10.6 Q4 (answer A, §10.18): 1,000 req/s, assumed 100 ms mean latency,
    # batches of 8 in 80 ms, 80 % utilization target -> 100 in flight, 100 req/s per replica, lower bound
    # 10, 13 replicas, 104 executing positions, 80 executing, 20 waiting, "about 76.9 percent".
    plan = concurrency_plan(Q_(1000, "request/s"), Q_(100, "ms"), 8, Q_(80, "ms"), 0.8)
    assert plan.in_flight.m_as("request") == pytest.approx(100)
    assert plan.replica_throughput.m_as("request/s") == pytest.approx(100)
    assert plan.min_replicas == 10
    assert plan.replicas == 13
    assert plan.executing_positions == 104
    assert plan.executing.m_as("request") == pytest.approx(80)
    assert plan.waiting.m_as("request") == pytest.approx(20)
    assert round(100 * plan.utilization, 1) == 76.9
    assert isinstance(plan.replicas, int) and isinstance(plan.executing_positions, int)


def test_batch_throughput_of_8_in_80_ms_is_100_per_second():
    # §10.6.2: "Replica throughput = 8/0.08 = 100 req/s".
    assert batch_throughput(8, Q_(80, "ms")).m_as("request/s") == pytest.approx(100)


# --------------------------------------------------------------------------------------------
# 10.6.3 Dynamic batching (Example 10.1, Eq. 3)


def test_example_10_1_option_a_unbatched_is_overloaded():
    # Example 10.1 (§10.6.3): "rho = 500 x 0.005 = 2.5".
    assert batched_utilization(500 * RPS, 1, 5 * MS) == pytest.approx(2.5)


def test_example_10_1_option_b_10_ms_window():
    # §10.6.3: a 10 ms window collects "about 5 requests"; 8 ms / 5 = "1.6 ms of execution";
    # "rho = 500 x 0.0016 = 0.8".
    batch = window_batch_size(500 * RPS, 10 * MS, 64)
    assert batch == pytest.approx(5)
    assert (1 / batch_throughput(batch, 8 * MS)).m_as("ms/request") == pytest.approx(1.6)
    assert batched_utilization(500 * RPS, batch, 8 * MS) == pytest.approx(0.8)


def test_example_10_1_option_c_20_ms_window_adds_33_percent_capacity():
    # §10.6.3: 20 ms collects "about 10 requests", "1.2 ms each", "rho = 0.6", and "a further 33
    # percent of per-replica capacity" (833 vs 625 req/s).
    batch = window_batch_size(500 * RPS, 20 * MS, 64)
    assert batch == pytest.approx(10)
    assert (1 / batch_throughput(batch, 12 * MS)).m_as("ms/request") == pytest.approx(1.2)
    assert batched_utilization(500 * RPS, batch, 12 * MS) == pytest.approx(0.6)
    gain = batch_throughput(10, 12 * MS) / batch_throughput(5, 8 * MS) - 1
    assert round(100 * gain.m_as("")) == 33


def test_window_batch_size_respects_max_batch():
    assert window_batch_size(Q_(5000, "request/s"), 10 * MS, 32) == 32


def test_batch_formation_limits():
    # No window: batches of one, no formation delay, Poisson dispatches.
    alone = batch_formation(500 * RPS, 0 * MS, 32)
    assert alone.mean_batch_size == 1 and alone.formation_delay.m_as("s") == 0 and alone.batch_interval_cv == 1
    # B_max = 1: never waits whatever the window.
    assert batch_formation(500 * RPS, 50 * MS, 1).formation_delay.m_as("s") == 0
    # Light traffic: a lone request waits (almost) the whole window.
    light = batch_formation(Q_(1, "request/s"), 10 * MS, 32)
    assert light.formation_delay.m_as("ms") == pytest.approx(10, rel=0.01)
    # Heavy traffic, no cap: half the window on average, batch ~ 1 + lambda T_w, near-periodic dispatch.
    heavy = batch_formation(Q_(1e6, "request/s"), 10 * MS, 10**5)
    assert heavy.formation_delay.m_as("ms") == pytest.approx(5, rel=1e-3)
    assert heavy.mean_batch_size == pytest.approx(1e4 + 1, rel=1e-6)
    assert heavy.batch_interval_cv < 1e-3
    # Cap-limited: batches are full and the dispatch interval is Erlang(B_max).
    capped = batch_formation(Q_(1e5, "request/s"), 1 * Q_(1, "s"), 16)
    assert capped.mean_batch_size == pytest.approx(16)
    assert capped.batch_interval_cv == pytest.approx(1 / 4)
    assert capped.formation_delay.m_as("s") == pytest.approx(15 / 2 / 1e5)


def test_eq_3_model_matches_the_event_simulation():
    # Eq. 3 (§10.6.3): the formation term is exact for the policy; the queueing term is the G/G/c
    # approximation, so the mean latency is checked within the error documented in the docs table.
    rng = np.random.default_rng(3)
    times = Q_(np.cumsum(rng.exponential(1 / 500, 60_000)), "s")
    args = (10 * MS, 64, 4 * MS, 0.8 * MS)
    trace = simulate_dynamic_batching(times, *args)
    model = dynamic_batching_latency(500 * RPS, *args)
    keep = slice(6000, None)
    formation = trace.formation_delay.m_as("ms")[keep]
    half = 3 * formation.std() / np.sqrt(formation.size)
    assert abs(model.formation_delay.m_as("ms") - formation.mean()) < half
    assert trace.batch_sizes.mean() == pytest.approx(model.mean_batch_size, rel=0.02)
    assert model.time_in_system.m_as("ms") == pytest.approx(trace.latency.m_as("ms")[keep].mean(), rel=0.06)
    total = model.queueing_delay + model.formation_delay + model.service_time
    assert model.time_in_system.m_as("ms") == pytest.approx(total.m_as("ms"))


def test_dynamic_batching_overload_is_reported_not_hidden():
    model = dynamic_batching_latency(Q_(5000, "request/s"), 2 * MS, 4, 4 * MS, 0.8 * MS)
    assert model.stable is False and model.utilization > 1
    assert model.queueing_delay.m_as("s") == np.inf and model.time_in_system.m_as("s") == np.inf


# --------------------------------------------------------------------------------------------
# 10.6.8 Adaptive batching


def test_self_check_10_6_q6_the_window_shrinks_as_traffic_rises():
    # Self-check 10.6 Q6 (§10.6.7, answer §10.18): "False" - widening the timeout during a spike is not
    # optimal; the traffic-adaptive rule T_w = min(T_max, B_target / lambda) shortens it (§10.6.8).
    windows = adaptive_window(Q_([100, 1000, 4000], "request/s"), 16, 20 * MS).m_as("ms")
    assert windows.tolist() == pytest.approx([20, 16, 4])


def test_section_10_6_8_slo_adaptive_controller_steps():
    # §10.6.8: above 0.9 SLO cut B_max and the window by 20 %; below 0.5 SLO grow them by 10 %.
    # From B_max = 32, T = 50 ms: one cut gives 25.6 and 40 ms; a cut then a raise gives 28.16, not 32.
    slo = Q_(100, "ms")
    batch, window = slo_adaptive_step(95 * MS, slo, 32, 50 * MS)
    assert batch == pytest.approx(25.6) and window.m_as("ms") == pytest.approx(40)
    batch, window = slo_adaptive_step(30 * MS, slo, batch, window)
    assert batch == pytest.approx(28.16) and window.m_as("ms") == pytest.approx(44)
    unchanged = slo_adaptive_step(70 * MS, slo, 32, 50 * MS)
    assert unchanged[0] == 32 and unchanged[1].m_as("ms") == pytest.approx(50)


def test_slo_adaptive_controller_on_a_trace_converges_at_moderate_load():
    # §10.6.8: the controller must be evaluated on an arrival trace. 300 req/s on a replica with
    # T0 = 4 ms, t_m = 1 ms and a 30 ms SLO: a 60 ms window breaches it; the controller shrinks the
    # window until p99 sits under 0.9 x SLO.
    rng = np.random.default_rng(7)
    times = Q_(np.cumsum(rng.exponential(1 / 300, 20_000)), "s")
    trace = simulate_dynamic_batching(
        times, 60 * MS, 64, 4 * MS, 1 * MS, slo=Q_(30, "ms"), control_interval=Q_(0.5, "s")
    )
    assert trace.control_window.m_as("ms")[-1] < 60
    assert trace.control_p99.m_as("ms")[-1] < 0.9 * 30 < trace.control_p99.m_as("ms")[0]
    # Light traffic and a tiny window: latency stays far below the SLO, so the controller grows both knobs.
    light = simulate_dynamic_batching(
        Q_(np.cumsum(rng.exponential(1 / 50, 5000)), "s"),
        1 * MS,
        4,
        4 * MS,
        1 * MS,
        slo=Q_(100, "ms"),
        control_interval=Q_(1, "s"),
    )
    assert light.control_window.m_as("ms")[-1] > 1 and light.control_max_batch[-1] > 4


def test_slo_adaptive_controller_can_shrink_a_loaded_replica_into_overload():
    # §10.6.8: "Reducing batch size can shorten execution while also reducing service capacity and
    # increasing queueing under heavy load." At 700 req/s the replica needs batches above 9.3
    # (B / (4 ms + B x 1 ms) > 0.7 per ms); cutting B_max and the window on every breach drives it below
    # that, and p99 grows without bound instead of recovering.
    rng = np.random.default_rng(7)
    times = Q_(np.cumsum(rng.exponential(1 / 700, 20_000)), "s")
    trace = simulate_dynamic_batching(
        times, 60 * MS, 64, 4 * MS, 1 * MS, slo=Q_(30, "ms"), control_interval=Q_(0.5, "s")
    )
    assert trace.control_max_batch[-1] == 1  # clamped at one request
    assert trace.control_p99.m_as("ms")[-1] > 10 * trace.control_p99.m_as("ms")[0]


# --------------------------------------------------------------------------------------------
# 10.6.4-10.6.5 Static and continuous batching


def test_section_10_6_4_single_early_finisher_wastes_11_25_percent():
    # §10.6.2: batch of 8, one sequence stops after 10 tokens, the others need 100 ->
    # "(100 - 10) x 1 / (100 x 8) = 11.25%".
    assert 100 * padding_waste([10] + [100] * 7) == pytest.approx(11.25)


def test_section_10_6_4_short_reply_strands_its_slot_for_90_steps():
    # §10.6.4: a 10-token reply next to a 100-token neighbour leaves its slot idle for 90 steps.
    accounting = static_batch_accounting([10, 100], Q_(20, "ms"))
    assert accounting.idle_slot_iterations == 90


def test_figure_7_static_uses_20_of_32_slot_iterations_and_continuous_all_32():
    # Figure 7 (§10.6.2): 4 slots x 8 iterations; fixed membership "20 of 32", continuous "all 32".
    # The seed gives no lengths; the book's figure source draws R1..R4 = 3, 8, 5, 4 (catalog W-45).
    static = slot_timeline([3, 8, 5, 4])
    assert (static.used_slot_iterations, static.slot_iterations) == (20, 32)
    assert padding_waste([3, 8, 5, 4]) == pytest.approx(0.375)
    continuous = slot_timeline([3, 8, 5, 4], refill=True, queued_lengths=[8, 8, 8], prefill_iterations=1)
    assert continuous.used_slot_iterations == 32
    assert continuous.prefill.sum() == 3  # each admitted request starts with a prefill cell
    assert continuous.start_iteration.tolist() == [0, 0, 0, 0, 3, 4, 5]


def test_napkin_math_10_3_slot_accounting():
    # Napkin Math 10.3 (§10.6.5): max 200 (R2), mean "(50 + 200 + 100 + 150)/4 = 125 tokens",
    # "Total decode iterations: 200", "200 x 20 ms = 4,000 ms", "W = 1 - 125/200 = 37.5%",
    # "4 x 200 = 800 sequence-iterations but only 500 are useful".
    a = static_batch_accounting([50, 200, 100, 150], Q_(20, "ms"))
    assert (a.max_length, a.mean_length, a.iterations) == (200, 125, 200)
    assert a.batch_time.m_as("ms") == pytest.approx(4000)
    assert 100 * a.waste == pytest.approx(37.5)
    assert (a.slot_iterations, a.useful_slot_iterations) == (800, 500)


def test_napkin_math_10_3_latencies_with_and_without_the_barrier():
    # §10.6.5: with the barrier every request takes "4,000 ms"; released on completion R1 1,000 ms
    # (4x), R2 4,000 (no improvement), R3 2,000 (2x), R4 3,000 (1.33x); averages 4,000 vs 2,500, "reduces
    # the original requests' average latency by 37.5 percent". Catalog A-12: the unitless "2,000" and
    # "3,000" are read as milliseconds.
    a = static_batch_accounting([50, 200, 100, 150], Q_(20, "ms"))
    assert a.barrier_latency.m_as("ms").tolist() == pytest.approx([4000] * 4)
    assert a.release_latency.m_as("ms").tolist() == pytest.approx([1000, 4000, 2000, 3000])
    assert a.speedup.round(2).tolist() == [4.0, 1.0, 2.0, 1.33]
    assert a.mean_barrier_latency.m_as("ms") == pytest.approx(4000)
    assert a.mean_release_latency.m_as("ms") == pytest.approx(2500)
    assert 100 * a.latency_reduction == pytest.approx(37.5)


def test_napkin_math_10_3_continuous_admission_advances_seven_requests():
    # §10.6.5: R1 completes at 50, R3 at 100, R4 at 150 -> R5, R6, R7 join; "the same 200
    # iterations now advance seven requests rather than four".
    a = static_batch_accounting([50, 200, 100, 150], Q_(20, "ms"))
    assert a.freed_at.tolist() == [50, 100, 150]
    assert a.requests_advanced == 7
    timeline = slot_timeline([50, 200, 100, 150], refill=True, queued_lengths=[200, 200, 200])
    assert timeline.admitted == 7 and timeline.used_slot_iterations == 800
    assert timeline.start_iteration[4:].tolist() == [50, 100, 150]
    assert slot_timeline([50, 200, 100, 150]).used_slot_iterations == 500


def test_self_check_10_6_q2_waste_is_one_minus_mean_over_max():
    # Self-check 10.6 Q2 (§10.6.7, answer §10.18): B S_max slots, B S_mean useful, waste 1 - S_mean/S_max.
    lengths = np.array([12, 40, 7, 40, 25])
    assert padding_waste(lengths) == pytest.approx(1 - lengths.mean() / lengths.max())


@pytest.mark.parametrize(
    ("row", "printed_waste", "ceiling"),
    [(0, 16.7, 1.75), (1, 33.3, 2.2), (2, 50.0, 3.5), (3, 64.3, 5.5), (4, 71.4, 6.0)],
)
def test_table_7_waste_column_and_ceilings(row, printed_waste, ceiling):
    # Table 7 (§10.6.5): the waste column is 1 - 1/speedup (catalog A-06: the "Waste (trad.)"
    # header notwithstanding, it is the effective waste the assumed speedup implies). The 1 + k CV
    # ceilings are not printed; every assumed speedup lies below its ceiling (§10.6.5).
    scenario = TABLE_7[row]
    assert 100 * scenario.effective_waste == pytest.approx(printed_waste, abs=0.05)
    assert scenario.ceiling == pytest.approx(ceiling)
    assert 1 <= scenario.speedup < scenario.ceiling
    assert speedup_from_waste(scenario.effective_waste) == pytest.approx(scenario.speedup)


def test_table_8_uniform_lengths_gain_nothing():
    # Table 8 (§10.6.5): uniform output lengths -> "~1.0x (no improvement)"; Eq. 4 gives zero waste.
    assert continuous_batching_ceiling(0.0, 2.5) == 1.0
    assert padding_waste([64] * 16) == 0.0


# --------------------------------------------------------------------------------------------
# Example 10.2, 10.6.6, 10.6.7, 10.6.9, 10.6.10


def test_example_10_2_bandwidth_only_transfer_pcie_vs_nvlink():
    # Example 10.2 (§10.6.5): 100 MB over PCIe Gen4 at 32 GB/s "~ 3.1 ms" versus "0.17 ms" over NVLink.
    # Catalog A-15: 0.17 ms needs 600 GB/s, the A100's NVLink 3 total; the per-direction 300 GB/s would
    # give 0.33 ms. We pin the 600 GB/s reading.
    pcie = network_latency(1, Q_(0, "s"), Q_(100, "MB"), Q_(32, "GB/s"))
    nvlink = network_latency(1, Q_(0, "s"), Q_(100, "MB"), Q_(600, "GB/s"))
    assert pcie.m_as("ms") == pytest.approx(3.1, abs=0.05)
    assert nvlink.m_as("ms") == pytest.approx(0.17, abs=0.005)


def test_example_10_3_fifty_million_lookups_per_shard():
    # Example 10.3 (§10.6.6): 10M QPS x 5,000 lookups over 1,000 shards -> "50 million lookups/sec
    # per shard"; a 1 ms window -> "batches of 50K lookups per shard".
    rate = shard_lookup_rate(Q_(10e6, "request/s"), 5000, 1000)
    assert rate.m_as("1/s") == pytest.approx(50e6)
    assert shard_batch_size(rate, Q_(1, "ms")) == pytest.approx(50_000)


def test_section_10_6_7_speech_pipeline_holds_five_frames():
    # §10.6.7: "20 ms frames and a 100 ms budget can hold at most five frames of delay".
    assert frames_of_delay(Q_(100, "ms"), Q_(20, "ms")) == 5
    assert frames_of_delay(Q_(0.3, "s"), Q_(0.1, "s")) == 3  # float noise does not lose a frame
    latency = streaming_latency(Q_(20, "ms"), Q_(5, "ms"), Q_(40, "ms"), Q_(10, "ms"))
    assert latency <= Q_(100, "ms")
    assert pipeline_sustains(Q_([20, 5, 15], "ms"), Q_(20, "ms"))
    assert not pipeline_sustains(Q_([20, 5, 40], "ms"), Q_(20, "ms"))


def test_napkin_math_10_4_reasoning_turns_100_ms_into_12_8_s():
    # Napkin Math 10.4 (§10.6.5, margin §10.6.9): "128 x 100 ms = 12.8 seconds", "the 128-fold
    # expansion". Reading pinned: the reasoning response's 128 serial tokens include its answer.
    assert reasoning_latency(128, Q_(100, "ms")).m_as("s") == pytest.approx(12.8)
    budget = reasoning_budget(Q_(100, "ms"), Q_(10, "s"), 128, answer_tokens=1, candidates=4, token_budget=400)
    assert budget.direct_latency.m_as("ms") == pytest.approx(100)
    assert budget.latency_multiplier == 128
    assert budget.max_serial_tokens == 100
    assert budget.within_latency is False
    assert budget.generated_tokens == 512 and budget.within_capacity is False
    # A faster replica shortens both responses and leaves the 128-fold expansion intact (§10.6.6).
    assert reasoning_budget(Q_(10, "ms"), Q_(10, "s"), 128).latency_multiplier == 128


def test_section_10_6_10_decision_tree_and_table_9():
    # §10.6.6: the decision tree and Table 9's rows.
    assert select_batching_strategy(True).strategy == "continuous batching with chunked prefill"
    assert [r.model_type for r in select_batching_strategy(True).rows] == ["LLM (prefill)", "LLM (decode)"]
    assert select_batching_strategy(False, True).rows[0].typical_batch == "1"
    assert select_batching_strategy(False, False, True).strategy == "feature-parallel batching"
    vision = select_batching_strategy(False)
    assert vision.strategy == "dynamic batching with adaptive parameters"
    assert vision.rows[0].typical_batch == "32-256" and vision.rows[0].strategy == "Static/Dynamic"
    assert {row.model_type: row.key_constraint for row in TABLE_9}["LLM (decode)"] == "Memory bandwidth"


def test_checkpoint_10_3_uniform_vision_does_not_need_continuous_batching():
    # Checkpoint 10.3 (§10.6.6): uniform vision inputs -> static or dynamic batching; with equal
    # lengths static batching wastes nothing (Eq. 4), so continuous batching has nothing to recover.
    assert select_batching_strategy(False).rows[0].strategy == "Static/Dynamic"
    assert padding_waste([1] * 32) == 0.0


def test_table_9_vision_typical_batch_lies_above_its_knee():
    # Table 9 caption (§10.6.6) and catalog A-18: typical batches may lie above the knee of
    # Napkin Math 10.2, so the knee is not a recommended batch.
    assert knee_batch_size(2 * MS, 1 * MS) < 32


def test_section_10_7_opening_gqa_caches_one_eighth_of_mha():
    # §10.6.8 (catalog W-63): GQA with 8 KV heads caches one eighth of a 64-head MHA baseline.
    gqa = kv_bytes_per_token(80, 8, 128, Q_(2, "B"))
    mha = kv_bytes_per_token(80, 64, 128, Q_(2, "B"))
    assert (gqa / mha).m_as("") == pytest.approx(1 / 8)


# --------------------------------------------------------------------------------------------
# Properties and bad input


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 4096), min_size=1, max_size=64))
def test_padding_waste_is_in_0_1_and_zero_for_equal_lengths(lengths):
    waste = padding_waste(lengths)
    assert 0 <= waste < 1
    assert padding_waste([lengths[0]] * len(lengths)) == 0
    accounting = static_batch_accounting(lengths, Q_(10, "ms"))
    assert accounting.latency_reduction == pytest.approx(waste)


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(1, 1e4), window=st.floats(0, 0.05), cap=st.integers(1, 256))
def test_formation_delay_is_at_most_the_window_and_batches_fit_the_cap(rate, window, cap):
    formed = batch_formation(Q_(rate, "request/s"), Q_(window, "s"), cap)
    assert 0 <= formed.formation_delay.m_as("s") <= window + 1e-15
    assert 1 <= formed.mean_batch_size <= cap + 1e-9
    assert formed.mean_square_batch_size >= formed.mean_batch_size**2 * (1 - 1e-9)


def test_bad_batching_input_is_named():
    with pytest.raises(InputError, match="'batch_size' must be an integer >= 1"):
        batch_service_time(0, 40 * MS, 0.5 * MS)
    with pytest.raises(InputError, match="'batch_size' must be an integer >= 1"):
        batch_service_time(2.5, 40 * MS, 0.5 * MS)
    with pytest.raises(InputError, match="'max_batch' must be an integer >= 1"):
        batch_formation(500 * RPS, 10 * MS, 0)
    with pytest.raises(InputError, match="'arrival_rate' must be > 0"):
        dynamic_batching_latency(0 * RPS, 10 * MS, 8, 4 * MS, 1 * MS)
    with pytest.raises(InputError, match="'output_lengths' must be an integer >= 1"):
        padding_waste([10, 0, 5])
    with pytest.raises(InputError, match="non-empty"):
        padding_waste([])
    with pytest.raises(InputError, match="'effective_waste'"):
        effective_waste(0.5)  # a slowdown has no waste fraction in [0, 1)
    with pytest.raises(InputError, match="'time_in_system' must be at least"):
        concurrency_plan(Q_(1000, "request/s"), Q_(50, "ms"), 8, Q_(80, "ms"))
    with pytest.raises(InputError, match="'autoregressive' must be True or False"):
        select_batching_strategy("yes")
    with pytest.raises(InputError, match="'control_interval' is required"):
        simulate_dynamic_batching(Q_([0, 1], "s"), MS, 4, MS, MS, slo=Q_(1, "s"))
    with pytest.raises(InputError, match="non-decreasing"):
        simulate_dynamic_batching(Q_([0, 2, 1], "s"), MS, 4, MS, MS)
    with pytest.raises(UnitsError, match="'window'"):
        window_batch_size(500 * RPS, 10, 8)
    with pytest.raises(UnitsError, match="'marginal_time'"):
        batch_service_time(8, 40 * MS, Q_(0.5, "ms/token"))
