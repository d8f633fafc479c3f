"""The request-level simulator: queueing theory, Little's law, the benchmark model, routers, traffic
kinds, the scheduler's memory semantics, bad input, and plan verification.

The queueing checks run the scheduler with a fixed iteration time (``SimulationSetup.step_time``) and
one-token prompts, so a replica with ``max_num_seqs = c`` is a c-server FCFS queue whose service time
is ``O`` iterations; they compare with Erlang C, the M/M/c mean wait and ciw (an independent
discrete-event simulator).
"""

from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest
from ciw_reference import simulate_waits

from calculator import Q_
from calculator.errors import InputError
from calculator.fleet import SearchSpace, ServingOptions, Targets, Workload, size_fleet
from calculator.performance import predict_benchmark
from calculator.queueing import erlang_c, mmc_mean_wait
from calculator.simulation import (
    SimulationSetup,
    Traffic,
    router_name,
    simulate,
    simulate_plan,
    verify_plan,
)

TICK = 1e-3  # the fixed iteration time of the queueing checks


def _queue(servers: int, output_cv: float, rate: float, seeds: int = 3, requests: int = 12_000):
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", max_num_seqs=servers, step_time=Q_(TICK, "s"))
    traffic = Traffic(
        Q_(rate, "request/s"), 1, 100, output_cv=output_cv, length_distribution="gamma", requests=requests
    )
    result = simulate(setup, traffic, seeds=seeds, executor=ThreadPoolExecutor(1))
    waits = [frame.queue_wait[frame.measured].to_numpy() for _, frame in result.requests.groupby("seed")]
    return result, waits


def _interval(values: list[float]) -> tuple[float, float]:
    from scipy import stats

    values = np.asarray(values)
    half = stats.t.ppf(0.995, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return float(values.mean() - half), float(values.mean() + half)


def test_mdc_wait_agrees_with_ciw():
    # 4 slots, 100 iterations of 1 ms each: M/D/4 with service 0.1 s at utilization 0.8.
    _, waits = _queue(4, 0.0, 32.0)
    low, high = _interval([w.mean() for w in waits])
    reference = simulate_waits(32.0, 0.1, 4, arrival_cv=1.0, service_cv=0.0, customers=12_000, replications=6)
    ref_low, ref_high = reference.mean_interval()
    # Admission happens at iteration boundaries: at most one iteration beyond the queue's wait.
    assert low - TICK <= ref_high and ref_low <= high + TICK, ((low, high), (ref_low, ref_high))


def test_mmc_wait_and_erlang_c_match_theory():
    # Exponential outputs (mean 100 tokens) make the service time exponential: M/M/4 at 0.75.
    rate, service, servers = 30.0, 0.1, 4
    result, waits = _queue(servers, 1.0, rate, seeds=4, requests=15_000)
    theory = mmc_mean_wait(Q_(rate, "request/s"), Q_(service, "s"), servers).m_as("s")
    low, high = _interval([w.mean() for w in waits])
    assert low - TICK <= theory <= high + TICK, (low, theory, high)
    # Erlang C: the share of requests that wait for a slot (more than the iteration alignment).
    probability = float(erlang_c(Q_(rate, "request/s"), Q_(service, "s"), servers))
    p_low, p_high = _interval([float((w > TICK).mean()) for w in waits])
    assert p_low - 0.02 <= probability <= p_high + 0.02, (p_low, probability, p_high)
    # Little's law on the same runs.
    assert result.in_flight == pytest.approx(result.littles_law, rel=0.03)


def test_littles_law_holds_on_a_step_model_run():
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm")
    traffic = Traffic(Q_(40, "request/s"), 1024, 256, input_cv=0.5, output_cv=0.5, requests=4000)
    result = simulate(setup, traffic, replicas=3, router="random")
    assert result.in_flight == pytest.approx(result.littles_law, rel=0.03)
    # Every request of a stable run finishes, on the replica it was routed to.
    frame = result.requests
    assert frame.finish.notna().all() and frame.replica.between(0, 2).all()
    assert (frame.first_token >= frame.arrival).all() and (frame.finish >= frame.first_token).all()


BENCHMARKS = [
    # model, accelerator, precision, TP, input, output, clients, engine
    ("qwen3-32b", "h100-sxm", "bf16", 4, 1024, 512, 32, "vllm"),
    ("llama-3.1-8b", "h100-sxm", "fp8", 1, 1024, 256, 64, "vllm"),
    ("llama-3.1-8b", "h100-sxm", "bf16", 1, 2048, 128, 16, "sglang"),
    ("llama-3.1-70b", "h100-sxm", "fp8", 2, 1024, 512, 128, "trtllm"),
    ("llama-3.1-8b", "h100-sxm", "fp8", 1, 4096, 512, 256, "vllm"),
]


@pytest.mark.parametrize(("model", "gpu", "precision", "tp", "inputs", "outputs", "clients", "engine"), BENCHMARKS)
def test_closed_loop_agrees_with_the_benchmark_model(model, gpu, precision, tp, inputs, outputs, clients, engine):
    # The benchmark model is the simulator's mechanism in closed form (docs/performance-model.md): with
    # lengths that vary a little (CV 0.1, the model's length_cv) the clients disperse after the first rounds;
    # identical requests started together stay in waves, its arrivals="waves" (prefill-first engines).
    setup = SimulationSetup(model, gpu, precision, tp, engine=engine)
    predicted = predict_benchmark(model, gpu, precision, tp, inputs, outputs, clients, engine=engine, length_cv=0.1)
    jitter = Traffic(clients=clients, input_tokens=inputs, output_tokens=outputs, requests=10 * clients,
                     input_cv=0.1, output_cv=0.1)  # fmt: skip
    dispersed = simulate(setup, jitter)
    assert dispersed.throughput.m_as("request/s") == pytest.approx(predicted.throughput.m_as("request/s"), rel=0.10)
    assert dispersed.value("tpot").m_as("s") == pytest.approx(predicted.tpot.m_as("s"), rel=0.10)
    assert dispersed.value("ttft").m_as("s") == pytest.approx(predicted.ttft.m_as("s"), rel=0.15)
    if engine == "sglang":
        waves = predict_benchmark(model, gpu, precision, tp, inputs, outputs, clients, engine=engine, arrivals="waves")
        fixed = simulate(setup, jitter.replace(input_cv=0.0, output_cv=0.0))
        assert fixed.value("ttft").m_as("s") == pytest.approx(waves.ttft.m_as("s"), rel=0.10)
        assert fixed.value("tpot").m_as("s") == pytest.approx(waves.tpot.m_as("s"), rel=0.10)


def test_few_clients_of_long_prompts_meet_the_count_of_prompts_the_cycle_closes_at():
    # The prompts a decoding request meets are counted over the cycle's iterations, a count that depends on the
    # operating point it sets: a secant through two evaluations found its fixed point on every calibration row,
    # but not where the prompts' prefill dwarfs the decoding (32,768-token prompts, 16-token outputs, two
    # clients): the count assumed was 2.1 (over the mean field's) where the point it set met 1.5, and
    # the TPOT came out 45 % above the simulator's (140 against 96 ms), the throughput 12 % below. Those rows
    # now bisect the count onto its fixed point.
    from calculator.performance import benchmark, cycle

    case = ("llama-3.1-70b", "h100-sxm", "fp8", 4)
    found = []

    def operating_point(scheduler):
        population = cycle._operating_point(scheduler)
        found.append((scheduler.count, scheduler.counted(scheduler.terms(population))))
        return population

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(benchmark, "_operating_point", operating_point)
        predicted = predict_benchmark(*case, 32768, 16, 2, engine="sglang", length_cv=0.1)
    [(assumed, met)] = found
    assert met == pytest.approx(assumed, rel=0.02)
    traffic = Traffic(clients=2, input_tokens=32768, output_tokens=16, requests=40, input_cv=0.1, output_cv=0.1)
    simulated = simulate(SimulationSetup(*case, engine="sglang"), traffic)
    assert predicted.tpot.m_as("s") == pytest.approx(simulated.value("tpot").m_as("s"), rel=0.15)
    assert predicted.throughput.m_as("request/s") == pytest.approx(simulated.throughput.m_as("request/s"), rel=0.05)


def test_routers_balance_as_expected():
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm")
    traffic = Traffic(Q_(90, "request/s"), 2048, 128, input_cv=0.8, output_cv=0.8, requests=6000)
    runs = {router: simulate(setup, traffic, replicas=4, router=router) for router in ("round_robin", "random", "jsq")}
    counts = runs["round_robin"].requests.replica.value_counts()
    assert counts.max() - counts.min() <= 1
    assert runs["jsq"].value("ttft", "p99") < runs["random"].value("ttft", "p99")
    assert runs["round_robin"].value("ttft", "p99") < runs["random"].value("ttft", "p99")
    assert router_name("power_of_two") == "two_choices" and router_name("least_outstanding_tokens") == "least_work"
    for router in ("power_of_two", "least_outstanding_tokens"):
        run = simulate(setup, traffic.replace(requests=1500), replicas=4, router=router)
        assert run.requests.finish.notna().all() and run.requests.replica.nunique() == 4


def test_traffic_kinds_draw_what_they_say():
    gamma = Traffic(Q_(10, "request/s"), 500, 200, arrival_cv=2.0, input_cv=0.5, output_cv=1.0, requests=40_000)
    times, inputs, outputs = gamma.draw(3)
    gaps = np.diff(times)
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.08)
    assert inputs.mean() == pytest.approx(500, rel=0.03) and inputs.std() / inputs.mean() == pytest.approx(
        0.5, rel=0.08
    )
    assert outputs.std() / outputs.mean() == pytest.approx(1.0, rel=0.1)
    fixed = Traffic(Q_(10, "request/s"), 500, 200, arrival_cv=0.0, requests=100).draw(0)
    assert np.allclose(np.diff(fixed[0]), 0.1) and (fixed[1] == 500).all() and (fixed[2] == 200).all()
    # A trace replays as given (sorted by arrival, starting at zero).
    trace = pd.DataFrame({"arrival_time": [5.0, 2.0, 3.5], "input_tokens": [10, 20, 30], "output_tokens": [4, 5, 6]})
    replay = Traffic.from_trace(trace).draw(0)
    assert replay[0].tolist() == [0.0, 1.5, 3.0] and replay[1].tolist() == [20, 30, 10]


def test_demand_curve_with_a_replica_schedule():
    # Demand doubles halfway; a second replica becomes ready at 60 s (its cold start included).
    traffic = Traffic(
        demand=([0.0, 59.999, 60.0, 120.0], [5.0, 5.0, 10.0, 10.0]),
        input_tokens=256,
        output_tokens=64,
        requests=100_000,
        replica_schedule=([0.0, 60.0], [1, 2]),
    )
    times = traffic.draw(1)[0]
    assert (times < 60).sum() == pytest.approx(300, rel=0.2) and (times >= 60).sum() == pytest.approx(600, rel=0.15)
    run = simulate(SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8"), traffic, router="round_robin")
    early = run.requests[run.requests.arrival < 59.0]
    late = run.requests[run.requests.arrival > 61.0]
    assert (early.replica == 0).all() and set(late.replica) == {0, 1} and run.replicas == 2


def test_preemption_when_the_cache_runs_out_and_no_eviction_under_full_reservation():
    # A small cache: Llama-70B BF16 on 2 x H100 holds few long sequences.
    traffic = Traffic(Q_(2, "request/s"), 6000, 1500, requests=120)
    vllm = simulate(SimulationSetup("llama-3.1-70b", "h100-sxm", "bf16", 2, engine="vllm"), traffic)
    assert vllm.requests.preemptions.sum() > 0
    assert vllm.requests.finish.notna().all() and vllm.occupancy.kv_occupancy.max() <= 1.0 + 1e-9
    # A preempted request's recompute shows as a long gap between its tokens.
    preempted = vllm.requests[vllm.requests.preemptions > 0]
    assert (preempted.tbt_max > 5 * vllm.value("tpot", "p50").m_as("s")).all()
    trt = simulate(SimulationSetup("llama-3.1-70b", "h100-sxm", "bf16", 2, engine="trtllm"), traffic)
    assert trt.requests.preemptions.sum() == 0 and trt.requests.finish.notna().all()


@pytest.mark.parametrize(
    "setup, clients",
    [
        (SimulationSetup("llama-3.1-8b", "h100-sxm", "bf16", engine="vllm"), 4),
        # attention ranks: one client on each of the eight ranks, which iterate together
        (SimulationSetup("deepseek-v3", "h200-sxm", "fp8", tensor_parallel=8, engine="trtllm", expert_parallel=8,
                         data_parallel=8), 8),
    ],
    ids=["replica", "attention-ranks"],
)  # fmt: skip
def test_requests_arriving_together_share_the_idle_replicas_first_iteration(setup, clients):
    # A closed loop's clients all send at the start: every prompt of that instant is queued before the idle
    # replica starts, so the small prompts share one iteration and have their first token together. (Until
    # 2026-12-03 the first arrival started an iteration alone and the others waited for the next one.)
    run = simulate(setup, Traffic(clients=clients, input_tokens=64, output_tokens=16, requests=clients), seeds=1)
    assert (run.requests.arrival == 0).all()
    assert run.requests.first_token.nunique() == 1


@pytest.mark.parametrize("prompt", [2000, 4000])
def test_a_lone_prompt_on_attention_ranks_takes_the_step_models_prefill(prompt):
    # gpt-oss-120b BF16 on eight L40S, attention data parallel 8 under TensorRT-LLM: a rank's iteration is priced
    # as every rank's (eight times its prompt), so the simulator's tables must span eight times a rank's
    # 8,192-token budget. They spanned one rank's, and beyond it a prompt's cost was extrapolated linearly from
    # the table's last column: a lone 4,000-token prompt took 2.88 s where the step model prices 1.19 s (and a
    # 2,000-token one 0.71 s against 0.63), and a plan of that layout simulated at twice its TPOT (2026-12-08).
    from calculator.performance import predict_benchmark

    setup = SimulationSetup("gpt-oss-120b", "l40s", "bf16", 8, engine="trtllm", data_parallel=8, expert_parallel=8)
    run = simulate(setup, Traffic(clients=1, input_tokens=prompt, output_tokens=4, requests=2, input_cv=0.0,
                                  output_cv=0.0), seeds=1)  # fmt: skip
    alone = predict_benchmark("gpt-oss-120b", "l40s", "bf16", 1, prompt, 4, 1, "trtllm", data_parallel=8,
                              expert_parallel=8)  # fmt: skip
    assert run.value("ttft", "mean").m_as("s") == pytest.approx(alone.ttft.m_as("s"), rel=0.03)


def test_a_varying_request_path_frees_the_clients_from_the_iterations_phase():
    # Four clients of 128/1,024 tokens, Llama-3.1-8B on one H100 under vLLM: on the fixed 11.3 ms request path
    # each next prompt lands 1.74 decode iterations after a completion, late in the iteration in flight, and
    # the simulated TTFT sits 7.5 % under the closed form (which averages over the phase; 10 % at the 12.16 ms
    # path fitted before 2026-12-04, 1.87 iterations). A path varying by up to half (uniformly) spreads the
    # phases, and the two agree within 3 %.
    from calculator.performance import ENGINES, closed_loop_seconds, step_arrays

    profile = ENGINES["vllm"]
    closed = closed_loop_seconds(step_arrays("llama-3.1-8b", "h100-sxm", "bf16", engine=profile), profile, 1,
                                 128, 1024, 4, length_cv=0.1)  # fmt: skip
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "bf16", engine="vllm")
    ttft = {}
    for spread in (0.0, 0.5):
        traffic = Traffic(clients=4, input_tokens=128, output_tokens=1024, requests=40, input_cv=0.1, output_cv=0.1,
                          request_path_spread=spread)  # fmt: skip
        run = simulate(setup, traffic, seeds=8)
        ttft[spread] = run.value("ttft", "mean").m_as("s")
    assert float(closed["ttft"]) / ttft[0.0] - 1 > 0.05
    assert float(closed["ttft"]) == pytest.approx(ttft[0.5], rel=0.03)


def test_prefill_first_engine_pauses_decoding():
    # SGLang runs a prefill batch alone: a long prompt arriving mid-stream stalls every decode.
    traffic = Traffic(Q_(4, "request/s"), 8000, 300, requests=300)
    sglang = simulate(SimulationSetup("llama-3.1-8b", "h100-sxm", "bf16", engine="sglang"), traffic)
    vllm = simulate(SimulationSetup("llama-3.1-8b", "h100-sxm", "bf16", engine="vllm"), traffic)
    assert sglang.value("tbt_max", "p50") > vllm.value("tbt_max", "p50")


def test_seeds_run_through_any_executor_and_repeat_exactly():
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8")
    traffic = Traffic(Q_(20, "request/s"), 512, 128, input_cv=0.5, requests=800)
    threads = simulate(setup, traffic, seeds=[4, 5], executor=ThreadPoolExecutor(2))
    processes = simulate(setup, traffic, seeds=[4, 5])  # the default process pool
    pd.testing.assert_frame_equal(threads.requests, processes.requests)
    ttft = threads.summary.query("metric == 'ttft' and statistic == 'mean'").iloc[0]
    assert ttft.low <= ttft.value <= ttft.high and ttft.low < ttft.high
    assert threads.seeds == (4, 5)


def test_bad_input_gets_a_clear_error_or_an_explicit_result():
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8")
    with pytest.raises(InputError, match="arrival_rate"):
        Traffic(Q_(0, "request/s"), 100, 10)
    with pytest.raises(InputError, match="no requests"):
        Traffic.from_trace(pd.DataFrame({"arrival_time": [], "input_tokens": [], "output_tokens": []}))
    with pytest.raises(InputError, match="exactly one"):
        Traffic(Q_(1, "request/s"), 100, 10, clients=4)
    with pytest.raises(InputError, match="requests"):
        Traffic(Q_(1, "request/s"), 100, 10, requests=10**9)
    for spread in (-0.1, 1.5, math.nan, True):
        with pytest.raises(InputError, match=r"'request_path_spread' must be a share in \[0, 1\]"):
            Traffic(clients=4, input_tokens=100, output_tokens=10, request_path_spread=spread)
    with pytest.raises(InputError, match="'request_path_spread' applies to closed-loop traffic"):
        Traffic(Q_(1, "request/s"), 100, 10, request_path_spread=0.5)
    with pytest.raises(InputError, match="router"):
        simulate(setup, Traffic(Q_(1, "request/s"), 100, 10, requests=10), router="fastest")
    with pytest.raises(InputError, match="max_num_seqs"):
        SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", max_num_seqs=0)
    # a replica's GPUs over its attention ranks (it said "'tensor_parallel' must be an integer >= 1, got 0.0")
    with pytest.raises(InputError, match=r"'tensor_parallel' \(1\) must be a multiple of 'data_parallel' \(8\)"):
        SimulationSetup("gpt-oss-120b", "l40s", "bf16", 1, data_parallel=8, expert_parallel=8)
    with pytest.raises(InputError, match="leave no KV cache"):
        simulate(SimulationSetup("llama-3.1-405b", "l4", "bf16"), Traffic(Q_(1, "request/s"), 10, 10, requests=5))
    # A request larger than the whole cache is refused and said so, the others are served.
    small = SimulationSetup("llama-3.1-70b", "h100-sxm", "bf16", 2, engine="vllm")
    trace = pd.DataFrame(
        {"arrival_time": [0.0, 0.1, 0.2], "input_tokens": [500, 2_000_000, 500], "output_tokens": [20, 20, 20]}
    )
    run = simulate(small, Traffic.from_trace(trace), ttft_slo=Q_(10, "s"), warmup=0.0, cooldown=0.0)
    assert run.dropped == 1 and run.meets_targets is False and "never fit" in run.verdict
    assert run.requests.finish.notna().sum() == 2
    # An overloaded run ends (finite requests) and says the backlog grows.
    overloaded = simulate(setup, Traffic(Q_(400, "request/s"), 2048, 512, requests=6000), tpot_slo=Q_(1, "s"))
    assert not overloaded.stable and overloaded.meets_targets is False and "backlog" in overloaded.verdict
    # Targets without values say why instead of comparing NaN.
    one_token = simulate(setup, Traffic(Q_(5, "request/s"), 100, 1, requests=200), tpot_slo=Q_(10, "ms"))
    assert one_token.meets_targets and "no request emitted a second token" in one_token.verdict
    refused = simulate(setup, Traffic(Q_(1, "request/s"), 10**9, 10, requests=20), ttft_slo=Q_(1, "s"))
    assert refused.meets_targets is False and "no request was measured" in refused.verdict
    with pytest.raises(InputError, match="tensor_parallel"):
        simulate(SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", 3), Traffic(Q_(1, "request/s"), 10, 10, requests=5))
    # The wall-clock cap stops a long run and says so.
    capped = simulate(setup, Traffic(Q_(50, "request/s"), 512, 2000, requests=20_000), time_limit=0.05)
    assert capped.truncated and capped.meets_targets is None and "time_limit" in capped.verdict


def _plan(model="llama-3.1-8b", rate=60.0, ttft_ms=400.0, tpot_ms=25.0, *, percentile=0.9, **serving):
    """A plan on H100s at FP8 under vLLM of 1,024 -> 256 tokens (CV 0.5); ``serving``: ServingOptions fields."""
    return size_fleet(
        model,
        Workload(Q_(rate, "request/s"), 1024, 256, input_cv=0.5, output_cv=0.5),
        Targets(Q_(ttft_ms, "ms"), Q_(tpot_ms, "ms"), ttft_percentile=percentile),
        SearchSpace("h100-sxm", "fp8"),
        engine="vllm",
        serving=ServingOptions(**serving),
    )


def test_verify_plan_finds_the_simulated_minimum():
    plan = _plan()
    check = verify_plan(plan, seeds=2, requests=6000)
    assert check.analytical_replicas == plan.replicas
    assert check.meets_targets and check.simulated_replicas == plan.replicas and check.tight
    assert list(check.table.replicas) == [plan.replicas - 1, plan.replicas]
    assert check.table.meets_targets.tolist() == [False, True]
    assert str(plan.replicas) in check.verdict


def test_verify_plan_searches_upward_when_the_plan_misses():
    # Ask the simulation to check too few replicas: it climbs until the targets are met.
    plan = _plan()
    import dataclasses

    short = dataclasses.replace(plan, replicas=plan.replicas - 1)
    check = verify_plan(short, seeds=1, requests=5000)
    assert not check.meets_targets and check.simulated_replicas == plan.replicas


def test_verify_plan_refuses_what_it_cannot_simulate():
    infeasible = _plan(tpot_ms=1)
    assert not infeasible.feasible
    with pytest.raises(InputError, match="infeasible"):
        verify_plan(infeasible)
    cached = _plan(prefix_hit_rate=0.5, shared_prefix_tokens=512)
    with pytest.raises(InputError, match="prefix caching is not simulated"):
        simulate_plan(cached)


def test_the_sizer_uses_the_running_batch_and_the_router():
    plan = _plan(percentile=None)
    # TPOT is evaluated where the load puts the batch, below the replica's cap.
    assert plan.service.running_batch < plan.batch
    check = simulate_plan(plan, seeds=1, requests=6000)
    assert check.value("tpot").m_as("s") == pytest.approx(plan.service.tpot.m_as("s"), rel=0.15)
    assert check.occupancy.running.mean() == pytest.approx(plan.service.running_batch, rel=0.15)
    # Random dispatch leaves each replica Poisson arrivals; round robin smooths them.
    random = _plan(rate=120, router="random")
    ordered = _plan(rate=120, router="round_robin")
    assert random.router == "random" and ordered.router == "round_robin"
    assert random.replicas >= ordered.replicas and random.service.ttft >= ordered.service.ttft


def test_step_tables_match_the_step_model():
    from calculator.performance import engine_profile, iteration_seconds, step_arrays
    from calculator.simulation.steps import _StepTable

    rng = np.random.default_rng(0)
    a = step_arrays("qwen3-30b-a3b", "h200-sxm", "fp8")
    overlapped = engine_profile("vllm").efficiency_for(a.accelerator)  # vLLM schedules asynchronously
    assert overlapped.overlap
    for eff in (overlapped, overlapped.replace(overlap=False)):
        table = _StepTable(a, eff, 1, 20_000, 8192)
        for _ in range(150):
            n, context = int(rng.integers(1, 400)), float(rng.uniform(100, 15_000))
            exact = iteration_seconds(a, eff, 1, n, context)
            assert table.total(table.decode(n, context), n) == pytest.approx(exact, rel=0.005)
            tokens, requests = float(rng.integers(1, 8000)), int(rng.integers(1, 4))
            prior = float(rng.uniform(0, 8000))
            exact = iteration_seconds(a, eff, 1, n, context, tokens, requests, prior)
            gpu = table.decode(n, context) + table.prefill(n, tokens, requests, prior)
            assert table.total(gpu, n + requests) == pytest.approx(exact, rel=0.02)


def test_an_autoscaling_plan_drives_the_replica_schedule():
    from calculator.autoscaling import predictive_schedule

    times = Q_(np.linspace(0, 600, 61), "s")
    demand = Q_(np.where(np.linspace(0, 600, 61) < 300, 4.0, 12.0), "request/s")
    scaling = predictive_schedule(
        times, demand, Q_(6, "request/s"), startup_time=Q_(60, "s"), lead_time=Q_(0, "s"), step=Q_(10, "s")
    )
    traffic = Traffic(demand=(times, demand), input_tokens=256, output_tokens=64, replica_schedule=scaling)
    assert traffic.replica_schedule[1].max() == scaling.ready.max()
    run = simulate(SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8"), traffic)
    ready_at = np.interp(run.requests.arrival, traffic.replica_schedule[0], traffic.replica_schedule[1])
    assert (run.requests.replica < np.maximum(np.ceil(ready_at), 1)).mean() > 0.99
    with pytest.raises(InputError, match="demand"):
        Traffic(demand=([0, 10], [-1, 2]), input_tokens=10, output_tokens=10)


def test_short_overloads_are_flagged_and_the_table_reads_like_the_verdict():
    plan = _plan("llama-3.1-70b", rate=20, ttft_ms=2000, tpot_ms=60)
    run = simulate_plan(plan, replicas=1, requests=3000, seeds=2)
    assert plan.replicas > 1 and not run.stable and "backlog" in run.verdict
    # The summary pools the seeds, as the verdict does, and its intervals stay >= 0.
    pooled = np.quantile(run.requests.loc[run.requests.measured, "ttft"], 0.9)
    assert run.value("ttft", "p90").m_as("s") == pytest.approx(pooled)
    shown = re.search(r"p90 ttft ([\d,.]+) ms", run.verdict)  # to 4 significant digits, with separators
    assert shown and float(shown[1].replace(",", "")) == pytest.approx(pooled * 1e3, rel=5e-4)
    assert (run.summary.low >= 0).all() and (run.summary.low <= run.summary.value).all()
    with pytest.raises(InputError, match="requests"):
        simulate_plan(plan, requests=0)
    with pytest.raises(InputError, match="max_replicas"):
        verify_plan(plan, max_replicas="many")


def test_a_vanishing_cv_draws_fixed_arrivals_and_lengths():
    # 1e-300 squared underflows to zero: the gamma shape 1/cv**2 divided by zero before
    traffic = Traffic(Q_(4, "request/s"), 100, 20, input_cv=1e-300, arrival_cv=1e-300, requests=50)
    times, prompts, outputs = traffic.draw(seed=1)
    assert np.allclose(np.diff(times), 0.25) and set(prompts) == {100} and set(outputs) == {20}


@pytest.mark.parametrize(
    ("model", "gpu", "rate", "prompt", "output", "ttft", "tpot"),
    [
        ("llama-3.1-70b", "h100-sxm", 10, 8000, 200, "4 s", "60 ms"),  # prefill about 60% of each replica's time
        ("qwen3-32b", "h200-sxm", 100, 2000, 300, "1 s", "40 ms"),  # the case (issue 24 item 11)
    ],
)
def test_random_dispatch_plans_count_the_bursts_prefill_adds_to_tpot(model, gpu, rate, prompt, output, ttft, tpot):
    """Under random dispatch an arrival's prefill holds back every running sequence's token, so bursts of
    arrivals swell the running batch: the sizer's TPOT was 5-19% below the simulated one, and the first
    plan here missed its 60 ms target (70.6 ms simulated). Now each plan's TPOT is within 6% of the simulated
    one. The sizer plans to the target with no margin, so a plan landing within 6% of its TPOT target may
    simulate up to 6% over it (the Llama case: 59.0 ms planned, 61.9 ms simulated with vLLM's asynchronous
    scheduling); the TTFT target holds."""
    from calculator.simulation import simulate_plan

    plan = size_fleet(
        model, Workload(Q_(rate, "request/s"), prompt, output, input_cv=0.5, output_cv=0.5),
        Targets(Q_(ttft), Q_(tpot)), SearchSpace(gpu, "fp8"), engine="vllm", serving=ServingOptions(router="random"),
    )  # fmt: skip
    run = simulate_plan(plan, replicas=plan.replicas, requests=20000, seeds=[0, 1], router="random")
    assert run.stable and run.value("ttft") <= Q_(ttft), run.verdict
    assert run.value("tpot") <= 1.06 * Q_(tpot), run.verdict
    assert run.value("tpot").m_as("ms") == pytest.approx(plan.service.tpot.m_as("ms"), rel=0.06)


def test_long_requests_filling_the_fleet_are_not_a_growing_backlog():
    # Requests that stay 77-110 s in the system (1,024 output tokens, TPOT rising with the running batch as
    # the fleet fills over its first 150 s) in a run of 280 s of arrivals, as DeepSeek-V3's plan on H200s
    # with attention ranks: a fifth of the way in the fleet has not filled, so comparing with that point
    # reads the fill as a backlog (10,530 in the system at the end against 5,183 then). Measured from a
    # median request's time in the system, the steady fleet is stable, and one whose waits grow with
    # every arrival is not.
    from calculator.simulation.results import _stable

    rng = np.random.default_rng(3)
    arrival = np.sort(rng.uniform(0, 280, 28_000))
    stay = (77 + 33 * np.minimum(arrival / 150, 1)) * rng.lognormal(-0.11, 0.47, arrival.size)
    steady = {"arrival": arrival, "finish": arrival + stay, "dropped": np.zeros(arrival.size, bool)}
    assert _stable(steady)
    growing = {**steady, "finish": arrival + stay + 0.8 * arrival}  # each arrival waits longer than the last
    assert not _stable(growing)


def test_admission_counts_what_the_iteration_allocated_and_admits_nothing_after_a_preemption():
    # vLLM's scheduler admits waiting requests only when the step preempted nobody
    # (vllm/v1/core/sched/scheduler.py, "Next, schedule the WAITING requests": `if not preempted_reqs`),
    # and allocates each admitted request's blocks as it schedules it, after the running decodes' slots,
    # so the next admission sees them. This closed loop outgrows the KV cache: with neither rule each
    # request was preempted 4.6 times on average (recomputing its context each time), with the first
    # alone 2.7 times (several prompts admitted in one iteration against the same free memory, then
    # preempted together), with both 0.37 times.
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "bf16", engine="vllm")
    traffic = Traffic(clients=1024, input_tokens=128, output_tokens=1024, requests=10240, input_cv=0.1, output_cv=0.1)
    run = simulate(setup, traffic, time_limit=300)
    assert 0 < run.requests.preemptions.mean() < 1.0
