"""Queueing and serving contracts (sections 10.1-10.3, 10.6.2): worked numbers, properties, bad input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError, UnitsError
from calculator.memory import weight_bytes
from calculator.queueing import (
    CapacityMeasurement,
    arrival_times,
    compare_capacity,
    coordination_latency,
    distribution_triggers,
    end_to_end_latency,
    erlang_c,
    ggc_mean_wait,
    ggc_wait_exceedance,
    ggc_wait_quantile,
    goodput_from_requests,
    in_flight,
    interactivity,
    kingman_wait,
    mg1_mean_wait,
    mmc_mean_wait,
    mmc_wait_exceedance,
    mmc_wait_quantile,
    network_latency,
    queue_metrics,
    queue_stable,
    replica_demand,
    replicas_for_load,
    serving_tax_budget,
    shed_fraction,
    slo_attainment,
    slo_goodput,
    stream_metrics,
    utilization,
)

MS = Q_(1, "ms")
RPS = Q_(1, "request/s")


# --------------------------------------------------------------------------------------------
# Section 10.1: offered vs admitted load, capacity at a fixed mix


def test_self_check_10_1_q1_meeting_the_slo_on_admitted_requests_is_not_serving_offered_load():
    # Self-check 10.1 Q1 (§10.1, answer §10.18): "False". Every admitted request meets the SLO, but
    # 20 % of the offered load was shed, so goodput covers only 80 % of what arrived.
    offered, admitted = 1000 * RPS, 800 * RPS
    assert shed_fraction(offered, admitted) == pytest.approx(0.2)
    goodput = slo_goodput(admitted, 1.0)
    assert (goodput / offered).m_as("") < 1


def test_self_check_10_1_q2_rates_on_different_mixes_cannot_be_ranked():
    # Self-check 10.1 Q2 (§10.1, answer B at §10.18): X 900 req/s on short prompts, Y 700 req/s on
    # the production mix, same TTFT/TPOT targets -> "neither can be ranked yet".
    x = CapacityMeasurement(900 * RPS, "short-prompt benchmark", 300 * MS, 50 * MS)
    y = CapacityMeasurement(700 * RPS, "production", 300 * MS, 50 * MS)
    assert compare_capacity(x, y) == "not comparable"
    other_slo = CapacityMeasurement(700 * RPS, "short-prompt benchmark", 300 * MS, 80 * MS)
    assert compare_capacity(x, other_slo) == "not comparable"


def test_self_check_10_1_q3_queueing_400_ms_misses_a_300_ms_ttft():
    # Answer §10.18: "A request queued 400 ms behind a burst misses a 300 ms TTFT target however fast
    # decode runs." Token times: first token after 400 ms of queueing + a 20 ms prefill, then fast decode.
    tokens = Q_(0.42 + 0.005 * np.arange(20), "s")
    metrics = stream_metrics(tokens, Q_(0, "s"))
    assert metrics.ttft > 300 * MS
    ttft, tpot = (Q_([value.m_as("s")], "s") for value in (metrics.ttft, metrics.tpot))
    assert slo_attainment(ttft, tpot, 300 * MS, 50 * MS) == 0.0


# --------------------------------------------------------------------------------------------
# Section 10.2: triggers for distribution (Table 1)


def test_section_10_2_illustrative_moe_needs_3_5_tb_and_sharding():
    # §10.1: "~1.8T parameters, FP16 weights alone require ~3.5 TB". The catalog finds 3.5 TB
    # only for 1.76T parameters (1.8T gives 3.6 TB); we pin the 1.76T reading. Table 1 (§10.1): memory ->
    # tensor/pipeline parallelism against an 80 GB H100.
    weights = weight_bytes(1.76e12, 16)
    assert weights.m_as("TB") == pytest.approx(3.5, abs=0.05)
    triggers = distribution_triggers(memory_required=weights, device_memory=Q_(80, "GB"))
    assert triggers.memory is True
    assert triggers.strategies == ("tensor/pipeline parallelism",)


def test_section_10_2_throughput_trigger_needs_at_least_ten_machines():
    # §10.1 and self-check 10.2 Q1 (answer C, §10.18): 100,000 QPS against a 10,000-QPS machine ->
    # "replicate the full model across at least ten machines".
    triggers = distribution_triggers(
        demand=Q_(100_000, "request/s"),
        peak_throughput=Q_(10_000, "request/s"),
        execution_latency=Q_(5, "ms"),
        latency_target=Q_(10, "ms"),
    )
    assert triggers.min_replicas == 10
    assert (triggers.throughput, triggers.latency) == (True, False)
    assert triggers.strategies == ("horizontal replication",)


def test_section_10_2_70b_fp16_exceeds_one_80_gb_gpu():
    # §10.1: 70B at FP16 "requires approximately 140 GB ... exceeding a single 80 GB H100".
    weights = weight_bytes(70e9, 16)
    assert weights.m_as("GB") == pytest.approx(140)
    assert distribution_triggers(memory_required=weights, device_memory=Q_(80, "GB")).memory


def test_table_1_latency_trigger_calls_for_model_sharding():
    # Table 1 (§10.1): a forward pass longer than the SLO (500 ms LLM TTFT) -> model sharding.
    triggers = distribution_triggers(execution_latency=Q_(650, "ms"), latency_target=Q_(500, "ms"))
    assert triggers.latency and triggers.strategies == ("model sharding",)


def test_checkpoint_10_1_13b_fits_so_doubling_throughput_means_replication():
    # Checkpoint 10.1 (§10.2): a 13B model has 26 GB of weights and fits one A100 (80 GB); doubled
    # throughput demand is a throughput trigger -> horizontal replication.
    weights = weight_bytes(13e9, 16)
    assert weights.m_as("GB") == pytest.approx(26)
    triggers = distribution_triggers(
        memory_required=weights,
        device_memory=Q_(80, "GB"),
        demand=Q_(2_000, "request/s"),
        peak_throughput=Q_(1_000, "request/s"),
    )
    assert triggers.memory is False
    assert triggers.strategies == ("horizontal replication",)


def test_checkpoint_10_1_175b_needs_multiple_80_gb_gpus():
    # Checkpoint 10.1 (§10.2): a 175B FP16 model "requires multiple 80 GB GPUs" (350 GB, not printed).
    assert distribution_triggers(memory_required=weight_bytes(175e9, 16), device_memory=Q_(80, "GB")).memory


def test_self_check_10_2_q2_quantized_70b_fits_yet_may_need_sharding_for_latency():
    # Self-check 10.2 Q2 (§10.2, answer §10.18): quantization removes the memory trigger (INT4: 35 GB),
    # but a phase slower than its own target still calls for sharding (decode 80 ms vs a 50 ms TPOT).
    triggers = distribution_triggers(
        memory_required=weight_bytes(70e9, 4),
        device_memory=Q_(80, "GB"),
        execution_latency=Q_(80, "ms"),
        latency_target=Q_(50, "ms"),
    )
    assert (triggers.memory, triggers.latency) == (False, True)
    assert triggers.strategies == ("model sharding",)


def test_self_check_10_2_q3_a_stream_can_meet_tpot_and_still_stall():
    # Self-check 10.2 Q3 (§10.2, answer §10.18): "False" - TPOT is the mean gap; one 300 ms gap stalls
    # the reader while the mean stays under a 60 ms target.
    gaps = np.r_[np.full(20, 0.03), 0.3, np.full(20, 0.03)]
    tokens = Q_(0.2 + np.r_[0, np.cumsum(gaps)], "s")
    metrics = stream_metrics(tokens, Q_(0, "s"))
    assert metrics.tpot < 60 * MS
    assert metrics.tbt_max.m_as("ms") == pytest.approx(300)
    assert metrics.ttft.m_as("ms") == pytest.approx(200)


# --------------------------------------------------------------------------------------------
# Section 10.3: SLO goodput and the serving tax


def test_section_10_3_1_two_second_request_fails_a_100_ms_contract():
    # §10.3: "an interactive request that takes 2 seconds against a 100 ms target fails its contract".
    assert not serving_tax_budget(Q_(100, "ms"), Q_(2, "s")).feasible


def test_section_10_3_2_100_ms_target_leaves_30_ms_after_70_ms_of_execution():
    # §10.3.1: 100 ms target, 70 ms execution on an idle replica -> "the remaining 30 ms".
    budget = serving_tax_budget(Q_(100, "ms"), Q_(70, "ms"))
    assert budget.non_compute_slack.m_as("ms") == pytest.approx(30)
    assert budget.queueing_slack.m_as("ms") == pytest.approx(30)


def test_section_10_3_2_four_sequential_exchanges_expose_200_us_to_2_ms():
    # §10.3.1: "four sequential exchanges taking 50-500 microseconds each ... 200 microseconds to 2 ms".
    no_payload = (Q_(0, "B"), Q_(1, "GB/s"))
    assert network_latency(4, Q_(50, "us"), *no_payload).m_as("us") == pytest.approx(200)
    assert network_latency(4, Q_(500, "us"), *no_payload).m_as("ms") == pytest.approx(2)


def test_section_10_3_2_exchanges_claim_up_to_2_ms_of_the_30_ms_slack():
    # §10.3.1: "the four sequential exchanges alone can claim up to 2 ms of the 30 ms non-compute slack
    # before any request waits for a busy replica" -> 28 ms left for queueing (derived, not printed).
    network = network_latency(4, Q_(500, "us"), Q_(0, "B"), Q_(1, "GB/s"))
    budget = serving_tax_budget(Q_(100, "ms"), Q_(70, "ms"), network=network)
    assert budget.serving_tax.m_as("ms") == pytest.approx(2)
    assert budget.non_compute_slack.m_as("ms") == pytest.approx(30)
    assert budget.queueing_slack.m_as("ms") == pytest.approx(28)
    total = end_to_end_latency(Q_(70, "ms"), network, Q_(0, "ms"), Q_(0, "ms"), budget.queueing_slack)
    assert total.m_as("ms") == pytest.approx(100)


def test_self_check_10_3_q1_goodput_950_beats_840():
    # Self-check 10.3 Q1 (§10.3.2, answer D at §10.18): X 1,200 req/s x 70 %, Y 1,000 req/s x 95 %
    # -> "about 950 per second against about 840 for X".
    x = slo_goodput(1200 * RPS, 0.70)
    y = slo_goodput(1000 * RPS, 0.95)
    assert x.m_as("request/s") == pytest.approx(840)
    assert y.m_as("request/s") == pytest.approx(950)
    same = ("production", 300 * MS, 50 * MS)
    assert compare_capacity(CapacityMeasurement(x, *same), CapacityMeasurement(y, *same)) == "second"


def test_goodput_from_per_request_measurements():
    # 4 completions in 2 s; the second misses TTFT, the fourth misses TPOT -> 2 of 4 count: 1 req/s.
    ttft = Q_([100, 400, 200, 250], "ms")
    tpot = Q_([30, 30, 40, 55], "ms")
    assert slo_attainment(ttft, tpot, 300 * MS, 50 * MS) == 0.5
    assert goodput_from_requests(ttft, tpot, 300 * MS, 50 * MS, Q_(2, "s")).m_as("request/s") == 1.0


def test_fan_out_critical_path_is_the_slowest_branch_plus_the_join():
    # §10.3.1: the critical path includes exposed coordination and the slowest branch, not the sum.
    branches = Q_([[3, 8, 5], [1, 1, 2]], "ms")
    assert coordination_latency(branches, Q_(0.5, "ms")).m_as("ms") == pytest.approx([8.5, 2.5])


# --------------------------------------------------------------------------------------------
# Theorem 10.1 and its application (the fleet numbers are tested in test_batching.py)


def test_theorem_10_1_littles_law_100_in_flight():
    # §10.6.2: 1,000 req/s x 0.1 s = "100 concurrent requests".
    assert in_flight(Q_(1000, "request/s"), Q_(100, "ms")).m_as("request") == pytest.approx(100)


def test_theorem_10_1_application_replica_counts_and_utilization():
    # §10.6.2: 100 req/s replicas; throughput-only bound 10; 80 % headroom 13; about 76.9 %.
    throughput = Q_(100, "request/s")
    assert replicas_for_load(1000 * RPS, throughput) == 10
    assert replicas_for_load(1000 * RPS, throughput, 0.8) == 13
    assert replica_demand(1000 * RPS, throughput, 0.8) == pytest.approx(12.5)
    assert round(100 * utilization(1000 * RPS, throughput, 13), 1) == 76.9
    assert utilization(1000 * RPS, throughput, 10) == pytest.approx(1.0)


def test_interactivity_is_the_reciprocal_of_tpot():
    # §10.6.2: 13 and 100 tokens/s per user (TPOT 76.9 ms and 10 ms); Figure 6's dashed line at
    # 50 tokens/s per user is a 20 ms TPOT.
    assert interactivity(Q_(20, "ms")).m_as("token/s") == pytest.approx(50)
    assert interactivity(Q_(10, "ms")).m_as("token/s") == pytest.approx(100)
    tpot = interactivity.solve_for("time_per_output_token", interactivity=Q_(13, "token/s"))
    assert tpot.m_as("ms") == pytest.approx(76.9, abs=0.05)


# --------------------------------------------------------------------------------------------
# Queueing closed forms: textbook values, exact special cases, stability


def erlang_c_by_recurrence(load, servers):
    """Independent Erlang C: Erlang B by its forward recurrence (stable in floating point)."""
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = load * blocking / (k + load * blocking)
    return servers * blocking / (servers - load * (1 - blocking))


@pytest.mark.parametrize(
    ("load", "servers"), [(0.5, 1), (2.0, 3), (10.0, 12), (45.5, 50), (99.0, 100), (950.0, 1000), (4990.0, 5000)]
)
def test_erlang_c_matches_the_erlang_b_recurrence_up_to_thousands_of_servers(load, servers):
    value = erlang_c(Q_(load, "request/s"), Q_(1, "s"), servers)
    assert value == pytest.approx(erlang_c_by_recurrence(load, servers), rel=1e-9)


def test_erlang_c_textbook_value_and_single_server_identity():
    # M/M/3 with a = 2 Erlangs: C = 4/9. For one server C equals the utilization.
    assert erlang_c(Q_(2, "request/s"), Q_(1, "s"), 3) == pytest.approx(4 / 9)
    rho = np.linspace(0.05, 0.95, 19)
    assert erlang_c(Q_(rho, "request/s"), Q_(1, "s"), 1) == pytest.approx(rho)


def test_mm1_wait_and_quantile_closed_forms():
    # M/M/1, rho = 0.5, s = 1: W_q = rho s / (1 - rho) = 1 s; P(W_q > t) = rho e^{-(1 - rho) t / s}.
    rate, service = Q_(0.5, "request/s"), Q_(1, "s")
    assert mmc_mean_wait(rate, service, 1).m_as("s") == pytest.approx(1.0)
    assert mmc_wait_exceedance(rate, service, 1, Q_(2, "s")) == pytest.approx(0.5 * math.exp(-1))
    assert mmc_wait_quantile(rate, service, 1, 0.99).m_as("s") == pytest.approx(2 * math.log(50))
    assert mmc_wait_quantile(rate, service, 1, 0.3).m_as("s") == 0.0  # 50 % never wait
    assert mmc_wait_quantile(rate, service, 1, 1.0).m_as("s") == math.inf


def test_md1_is_half_the_mm1_wait():
    # Pollaczek-Khinchine: deterministic service halves the M/M/1 wait.
    rate, service = Q_(80, "request/s"), Q_(10, "ms")
    mm1 = mmc_mean_wait(rate, service, 1).m_as("s")
    assert mg1_mean_wait(rate, service, 0).m_as("s") == pytest.approx(mm1 / 2)
    assert mg1_mean_wait(rate, service, 1).m_as("s") == pytest.approx(mm1)


def test_allen_cunneen_reduces_to_exact_and_kingman_forms():
    rate, service = Q_(np.array([30.0, 70.0, 95.0]), "request/s"), Q_(10, "ms")
    # Poisson arrivals and exponential service: exact M/M/c.
    assert ggc_mean_wait(rate, service, 4, 1, 1).m_as("s") == pytest.approx(mmc_mean_wait(rate, service, 4).m_as("s"))
    # One server, Poisson arrivals: exact Pollaczek-Khinchine.
    assert ggc_mean_wait(rate, service, 1, 1, 0.4).m_as("s") == pytest.approx(
        mg1_mean_wait(rate, service, 0.4).m_as("s")
    )
    # One server, general arrivals: Kingman.
    kingman = kingman_wait((rate * service).m_as("request"), service, 1.5, 0.7)  # offered load, in requests
    assert ggc_mean_wait(rate, service, 1, 1.5, 0.7).m_as("s") == pytest.approx(kingman.m_as("s"))
    # Exponential tail, M/M/c case.
    threshold = Q_(5, "ms")
    assert ggc_wait_exceedance(rate, service, 3, 1, 1, threshold) == pytest.approx(
        mmc_wait_exceedance(rate, service, 3, threshold)
    )


def test_kingman_wait_solves_for_the_utilization_that_meets_a_target_wait():
    # M/D/1 with 10 ms service: the highest utilization that keeps the mean wait at 20 ms is 0.8.
    rho = kingman_wait.solve_for(
        "utilization", kingman_wait=Q_(20, "ms"), service_time=Q_(10, "ms"), arrival_cv=1, service_cv=0
    )
    assert rho == pytest.approx(0.8)


def test_unstable_queues_report_infinite_waits_never_nan():
    rate, service = Q_(1000, "request/s"), Q_(10, "ms")
    servers = np.array([5, 10, 11, 20])
    assert queue_stable(rate, service, servers).tolist() == [False, False, True, True]
    assert erlang_c(rate, service, servers)[:2].tolist() == [1.0, 1.0]
    for wait in (
        mmc_mean_wait(rate, service, servers),
        ggc_mean_wait(rate, service, servers, 1.3, 0.5),
        mmc_wait_quantile(rate, service, servers, 0.99),
        ggc_wait_quantile(rate, service, servers, 0.5, 2.0, 0.9),
    ):
        values = wait.m_as("s")
        assert np.all(np.isinf(values[:2])) and np.all(np.isfinite(values[2:])) and not np.any(np.isnan(values))
    assert mg1_mean_wait(Q_(150, "request/s"), service, 0.5).m_as("s") == math.inf
    metrics = queue_metrics(rate, service, 10)
    assert metrics.stable is False and metrics.utilization == 1.0
    assert metrics.mean_wait.m_as("s") == math.inf and metrics.mean_queue_length.m_as("request") == math.inf
    assert metrics.wait_exceedance(Q_(1, "s")) == 1.0


def test_deterministic_queue_never_waits():
    # D/D/c below saturation: the variability factor is 0, so waits, tails and quantiles are 0.
    rate, service = Q_(80, "request/s"), Q_(10, "ms")
    assert ggc_mean_wait(rate, service, 1, 0, 0).m_as("s") == 0
    assert ggc_wait_exceedance(rate, service, 1, 0, 0, Q_(0, "s")) == 0
    assert ggc_wait_quantile(rate, service, 1, 0, 0, 1.0).m_as("s") == 0


def test_queue_functions_broadcast_over_servers_and_rates():
    rates = Q_(np.array([[50.0], [90.0]]), "request/s")
    servers = np.array([1, 2, 4])
    waits = ggc_mean_wait(rates, Q_(10, "ms"), servers, 1.0, 0.5)
    assert waits.shape == (2, 3)
    assert erlang_c(rates, Q_(10, "ms"), servers).shape == (2, 3)
    metrics = queue_metrics(rates, Q_(10, "ms"), servers, 1.0, 0.5)
    assert metrics.mean_wait.shape == (2, 3) and metrics.exact.tolist() == [[True, False, False]] * 2


def test_queue_metrics_little_law_consistency_and_units():
    metrics = queue_metrics(Q_(600, "request/min"), Q_(0.5, "s"), 8)
    assert metrics.utilization == pytest.approx(10 * 0.5 / 8)
    assert metrics.mean_queue_length.m_as("request") == pytest.approx(10 * metrics.mean_wait.m_as("s"))
    assert metrics.mean_in_system.m_as("request") == pytest.approx(10 * (metrics.mean_wait.m_as("s") + 0.5))
    assert metrics.wait_quantile(0.5).m_as("s") == pytest.approx(
        mmc_wait_quantile(Q_(10, "request/s"), Q_(500, "ms"), 8, 0.5).m_as("s")
    )
    assert set(metrics.to_dict()) >= {"mean_wait", "stable", "exact"}
    assert "QueueMetrics(" in repr(metrics)


# --------------------------------------------------------------------------------------------
# Properties


loads = st.floats(0.01, 0.99)
server_counts = st.integers(1, 300)
cvs = st.floats(0.0, 3.0)


@settings(max_examples=60, deadline=None)
@given(rho=loads, servers=server_counts, extra=st.integers(1, 50), ca=cvs, cs=cvs)
def test_more_servers_never_increase_waiting(rho, servers, extra, ca, cs):
    rate = Q_(rho * servers, "request/s")
    service = Q_(1, "s")
    counts = np.array([servers, servers + extra])
    probability = erlang_c(rate, service, counts)
    assert probability[1] <= probability[0] + 1e-12
    for wait in (mmc_mean_wait(rate, service, counts), ggc_mean_wait(rate, service, counts, ca, cs)):
        assert wait[1] <= wait[0] * (1 + 1e-9)
    q99 = ggc_wait_quantile(rate, service, counts, ca, cs, 0.99)
    assert q99[1] <= q99[0] * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(rho=loads, bump=st.floats(1.0001, 1.5), servers=server_counts, ca=cvs, cs=cvs)
def test_waits_grow_with_utilization(rho, bump, servers, ca, cs):
    service = Q_(1, "s")
    rates = Q_(np.array([rho, rho * bump]) * servers, "request/s")
    for wait in (
        erlang_c(rates, service, servers),
        mmc_mean_wait(rates, service, servers).m_as("s"),
        ggc_mean_wait(rates, service, servers, ca, cs).m_as("s"),
        mmc_wait_quantile(rates, service, servers, 0.95).m_as("s"),
    ):
        assert wait[1] >= wait[0] * (1 - 1e-9)  # inf >= finite once the bump crosses saturation


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(1e-3, 1e6), time=st.floats(1e-6, 1e4))
def test_littles_law_round_trips(rate, time):
    arrival_rate, time_in_system = Q_(rate, "request/s"), Q_(time, "s")
    concurrency = in_flight(arrival_rate, time_in_system)
    assert in_flight.solve_for("arrival_rate", in_flight=concurrency, time_in_system=time_in_system).m_as(
        "request/s"
    ) == pytest.approx(rate, rel=1e-9)
    assert in_flight.solve_for("time_in_system", in_flight=concurrency, arrival_rate=arrival_rate).m_as(
        "s"
    ) == pytest.approx(time, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(rho=loads, servers=server_counts, ca=cvs, cs=st.floats(0.05, 3.0), q=st.floats(0.0, 0.999))
def test_wait_quantile_inverts_the_exceedance(rho, servers, ca, cs, q):
    rate, service = Q_(rho * servers, "request/s"), Q_(1, "s")
    wait = ggc_wait_quantile(rate, service, servers, ca, cs, q)
    tail = ggc_wait_exceedance(rate, service, servers, ca, cs, wait)
    if wait.m_as("s") > 0:
        assert tail == pytest.approx(1 - q, rel=1e-6)
    else:
        assert tail <= 1 - q + 1e-12


# --------------------------------------------------------------------------------------------
# Bad input


def test_bad_rates_and_servers_name_the_argument():
    service = Q_(10, "ms")
    with pytest.raises(InputError, match="'arrival_rate' must be > 0"):
        erlang_c(Q_(0, "request/s"), service, 2)
    with pytest.raises(InputError, match="'arrival_rate' must be > 0"):
        mmc_mean_wait(Q_(-5, "request/s"), service, 2)
    with pytest.raises(InputError, match="'service_time' must be > 0"):
        ggc_mean_wait(Q_(5, "request/s"), Q_(0, "s"), 2, 1, 1)
    with pytest.raises(InputError, match="'servers' must be an integer >= 1"):
        erlang_c(Q_(5, "request/s"), service, 0)
    with pytest.raises(InputError, match="'servers' must be an integer >= 1"):
        erlang_c(Q_(5, "request/s"), service, np.array([2, 2.5]))
    with pytest.raises(InputError, match="'arrival_cv' must be >= 0"):
        ggc_mean_wait(Q_(5, "request/s"), service, 2, -1, 1)
    with pytest.raises(InputError, match="contains NaN"):
        erlang_c(Q_(np.nan, "request/s"), service, 2)


def test_probabilities_outside_0_1_are_errors():
    with pytest.raises(InputError, match="'quantile' must be a probability"):
        mmc_wait_quantile(Q_(5, "request/s"), Q_(10, "ms"), 2, 1.2)
    with pytest.raises(InputError, match="'slo_attainment' must be a probability"):
        slo_goodput(Q_(5, "request/s"), -0.1)
    with pytest.raises(InputError, match="'max_utilization' must be a probability"):
        replicas_for_load(Q_(5, "request/s"), Q_(1, "request/s"), 1.5)
    with pytest.raises(InputError, match="'max_utilization' must be > 0"):
        replicas_for_load(Q_(5, "request/s"), Q_(1, "request/s"), 0)
    with pytest.raises(InputError, match="'admitted_rate' must not exceed"):
        shed_fraction(Q_(5, "request/s"), Q_(6, "request/s"))
    with pytest.raises(InputError, match="'utilization' must be a fraction in \\[0, 1\\)"):
        kingman_wait(1.0, Q_(1, "s"), 1, 1)


def test_wrong_units_name_the_argument():
    with pytest.raises(UnitsError, match="'arrival_rate'"):
        erlang_c(Q_(5, "GB/s"), Q_(10, "ms"), 2)  # a rate of bytes, not of requests
    # A bare per-second rate counts requests (the convention of the public API).
    assert erlang_c(Q_(5, "1/s"), Q_(10, "ms"), 2) == erlang_c(Q_(5, "request/s"), Q_(10, "ms"), 2)
    with pytest.raises(UnitsError, match="'service_time'"):
        mmc_mean_wait(Q_(5, "request/s"), 10, 2)
    with pytest.raises(UnitsError, match="'servers'"):
        erlang_c(Q_(5, "request/s"), Q_(10, "ms"), Q_(2, "s"))
    with pytest.raises(UnitsError, match="'time_in_system'"):
        in_flight(Q_(5, "request/s"), Q_(3, "request"))
    with pytest.raises(UnitsError, match="'slo'"):
        serving_tax_budget(Q_(100, "B"), Q_(70, "ms"))


def test_stream_metrics_rejects_impossible_streams():
    with pytest.raises(InputError, match="at least two tokens"):
        stream_metrics(Q_([0.1], "s"), Q_(0, "s"))
    with pytest.raises(InputError, match="non-decreasing"):
        stream_metrics(Q_([0.1, 0.3, 0.2], "s"), Q_(0, "s"))
    with pytest.raises(InputError, match="precedes"):
        stream_metrics(Q_([0.1, 0.3], "s"), Q_(1, "s"))


def test_arrival_times_have_the_rate_and_the_gap_variability_asked_for():
    for cv in (0.5, 1.0, 2.0):
        times = arrival_times(Q_(200, "request/s"), 200_000, arrival_cv=cv, seed=3).m_as("s")
        gaps = np.diff(times)
        assert np.all(gaps >= 0)
        assert 1 / gaps.mean() == pytest.approx(200, rel=0.02)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.03)
    same = arrival_times(Q_(5, "request/s"), 10, seed=7).m_as("s")
    assert np.array_equal(same, arrival_times(Q_(5, "request/s"), 10, seed=7).m_as("s"))
    with pytest.raises(InputError, match="'requests' must be an integer >= 1"):
        arrival_times(Q_(5, "request/s"), 0)
    with pytest.raises(InputError, match="'arrival_cv' must be >= 0"):
        arrival_times(Q_(5, "request/s"), 10, arrival_cv=-1)
