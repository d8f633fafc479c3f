"""One engine scheduler for the predictor, the sizer and the simulator (issue 52, item 1).

``calculator.performance.scheduler`` owns each engine's scheduling rules; the closed-loop predictor, the
fleet sizer's evaluation and the simulator ask it. These tests pin the rules against the engines' own
numbers and show that one rule changed in a user registry file moves all three.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet
from calculator.performance import engine_profile, predict_benchmark
from calculator.performance.scheduler import SchedulerRules, chunk_count, scheduler_rules, whole_prompts
from calculator.registry import load_registry
from calculator.simulation import SimulationSetup, Traffic, simulate
from calculator.units import Q_

H100 = 80e9  # bytes: above vLLM's 75.16 GB tier


def test_the_room_is_the_budget_less_one_token_per_running_decode():
    # vLLM's scheduler takes a token of max_num_batched_tokens per running decode before it schedules a waiting
    # prompt (v1/core/sched/scheduler.py): 8,192 tokens beside 1,000 decodes leave 7,192.
    rules = scheduler_rules(engine_profile("vllm"), H100, "h100-sxm")
    assert rules.token_budget == 8192
    assert rules.room(1000) == 7192
    # decodes filling the budget leave nothing (the simulator admits no prompt); a closed form reads one token
    assert rules.room(8192) == 0
    assert rules.room(8192, closed_form=True) == 1
    # a prompt of 20,000 tokens beside 1,000 decodes: ceil(20,000 / 7,192) = 3 chunks
    assert rules.chunks(20_000, 1000) == 3


def test_a_prefill_first_engine_gives_its_prompt_batch_the_whole_budget():
    # SGLang's prefill batch runs alone (it pauses decoding): its room does not shrink with the decodes.
    rules = scheduler_rules(engine_profile("sglang"), H100, "h100-sxm")
    assert not rules.mixed
    assert rules.room(500) == rules.token_budget == 8192


def test_attention_ranks_each_schedule_their_own_budget_and_a_prompt_is_chunked_to_one_ranks_share():
    rules = scheduler_rules(engine_profile("vllm"), H100, "h100-sxm", ranks=4)
    assert rules.token_budget == 4 * 8192
    assert rules.max_sequences == 4 * 1024
    # 4,000 decodes over the replica leave 28,768 tokens, 7,192 a rank: a 10,000-token prompt takes 2 chunks
    assert rules.chunk_size(4000) == 7192
    assert rules.chunks(10_000, 4000) == 2


def test_a_mixing_engine_runs_no_more_sequences_than_its_budget_holds_decodes():
    # vLLM refuses max_num_seqs above max_num_batched_tokens (SchedulerConfig._verify_args): a 512-token
    # budget caps the 1,024 sequences of the H100 tier at 512. A given budget also makes the engine chunk.
    rules = scheduler_rules(engine_profile("trtllm"), H100, "h100-sxm", chunk_size=512)
    assert rules.max_sequences == 512
    assert rules.chunked
    assert not scheduler_rules(engine_profile("trtllm"), H100, "h100-sxm").chunked


def test_whole_prompts_and_chunk_counts():
    # an engine that does not chunk takes the whole prompts that fit, at least one however long
    assert whole_prompts(8192.0, 4096.0, 0.0) == 2.0
    assert whole_prompts(8191.0, 4096.0, 0.0) == 1.0
    assert whole_prompts(1000.0, 16384.0, 0.0) == 1.0
    # prompts spread around two budgets: half take two chunks, half three
    assert chunk_count(8192.0, 4096.0, 0.0) == 2.0
    assert float(chunk_count(8192.0, 4096.0, 0.2)) == pytest.approx(2.5, abs=0.01)


def test_the_overlap_scheduler_costs_an_arriving_prompt_one_iteration():
    assert scheduler_rules(engine_profile("trtllm"), H100, "h100-sxm").lag_iterations == 1.0
    generic = engine_profile(None)
    assert scheduler_rules(generic, H100, "h100-sxm").lag_iterations == 0.0


SMALL_BUDGET = textwrap.dedent(
    """\
    sources:
      - id: our-vllm-config
        title: "Our vLLM deployment's settings"
        url: "https://example.com/vllm-config"
        kind: user
    engines:
      - id: vllm
        token_budget:
          - {max_num_tokens: 1024, max_num_seqs: 256}
        sources: [{source: our-vllm-config, fields: [token_budget]}]
    """
)


def test_one_token_budget_in_a_user_file_moves_the_predictor_the_sizer_and_the_simulator(tmp_path, monkeypatch):
    # Acceptance of issue 52: the three ask the one scheduler module (every room they read goes through
    # SchedulerRules.room), and one rule changed in a user registry file moves all three.
    path = tmp_path / "budget.yaml"
    path.write_text(SMALL_BUDGET, encoding="utf-8")
    ours = load_registry(extra=[path])
    budgets: list[float] = []
    room = SchedulerRules.room

    def spy(self: SchedulerRules, decodes: object, closed_form: bool = False) -> object:
        budgets.append(float(np.max(self.token_budget)))
        return room(self, decodes, closed_form)

    monkeypatch.setattr(SchedulerRules, "room", spy)

    def predicted(registry: object) -> float:
        budgets.clear()
        out = predict_benchmark(
            "llama-3.1-8b", "h100-sxm", "bf16", 1, engine="vllm", input_tokens=4096, output_tokens=128,
            concurrency=32, registry=registry,
        )  # fmt: skip
        assert budgets and set(budgets) == {8192.0 if registry is None else 1024.0}
        return float(np.asarray(out.ttft.m_as("s")).ravel()[0])

    def sized(registry: object) -> float:
        budgets.clear()
        plan = size_fleet(
            "llama-3.1-8b", Workload(Q_(10, "request/s"), 4096, 256), Targets(Q_(2, "s"), Q_(50, "ms")),
            SearchSpace("h100-sxm", "bf16"), engine="vllm", costs=Costs(Q_(3, "USD/hour")), registry=registry,
        )  # fmt: skip
        assert plan.feasible, plan.reason
        assert budgets and max(budgets) == (8192.0 if registry is None else 1024.0)
        return plan.service.tbt_max.m_as("s")

    def simulated(files: tuple) -> float:
        budgets.clear()
        setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "bf16", 1, engine="vllm", registry_files=files)
        run = simulate(setup, Traffic(None, 4096, 128, requests=200, clients=32), seeds=1)
        assert budgets and set(budgets) == {8192.0 if not files else 1024.0}
        return run.value("ttft", "mean").m_as("s")

    # a 1,024-token budget chunks a 4,096-token prompt into four iterations: the first token moves by more than a
    # tenth in both models (each against itself here; benchmarks/validate_closed_loop.py holds them to each other)
    assert abs(np.log(predicted(ours) / predicted(None))) > 0.1
    assert abs(np.log(simulated((str(path),)) / simulated(()))) > 0.1
    # and smaller prefill chunks beside the decodes: shorter gaps between tokens
    assert sized(ours) < sized(None)


def test_small_chunks_beside_a_full_budget_never_price_a_prompt_below_nothing(tmp_path, monkeypatch):
    # A 1,024-token budget beside 1,008 decodes leaves 16 tokens: a 4,096-token prompt is 256 chunks, about a
    # thousand landing per iteration. Priced together under vLLM's asynchronous scheduling, the mean chunk costs
    # less than one alone; the difference, taken over 256 chunks, once exceeded the prompt's own cost, and the
    # candidate's rate came out negative (-41.5 request/s per replica, and a division by zero in the replicas).
    from calculator.fleet import evaluate

    path = tmp_path / "budget.yaml"
    path.write_text(SMALL_BUDGET, encoding="utf-8")
    seen = []
    mixed = evaluate._mixed_iteration

    def spy(grid, t_dec, per_token, prompts, rules, decode_slots, *args):
        out = mixed(grid, t_dec, per_token, prompts, rules, decode_slots, *args)
        if np.isfinite(decode_slots):  # not the light-load limit (a request alone: no rate of its own)
            seen.append((np.broadcast_to(per_token, out.step.shape), out))
        return out

    monkeypatch.setattr(evaluate, "_mixed_iteration", spy)
    plan = size_fleet(
        "llama-3.1-8b", Workload(Q_(10, "request/s"), 4096, 256), Targets(Q_(2, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "bf16"), engine="vllm", costs=Costs(Q_(3, "USD/hour")),
        registry=load_registry(extra=[path]),
    )  # fmt: skip
    assert plan.feasible, plan.reason
    assert seen and any(np.max(out.prompt_time / per_token) > 0 for per_token, out in seen)
    for per_token, out in seen:
        assert np.all(out.prompt_time >= 0), out.prompt_time.min()
        assert np.all(out.step >= per_token)  # a prompt riding in a decode iteration never shortens it
        assert np.all(out.rate > 0)


def test_the_sizer_holds_the_engines_output_reservation_as_the_simulator_admits():
    # TensorRT-LLM reserves a request's whole output at admission (GUARANTEED_NO_EVICT; registry output_reservation
    # 1.0), and the simulator and the predictor admit by that rule; the sizer counted the cache at the running
    # sequences' mean context alone. Llama-3.1-70B BF16 on H100s at 1 request/s of 256/2,000 tokens was planned on
    # two TP-2 replicas capped at 58 sequences: the simulator admits 32 of them, its queue grew, and its p99 TTFT
    # was 45 s against the plan's 105 ms.
    from calculator.fleet import ServingOptions
    from calculator.fleet.evaluate import _fits
    from calculator.fleet.families import _families
    from calculator.performance import kv_capacity_tokens
    from calculator.simulation import simulate_plan

    workload = Workload(Q_(1, "request/s"), 256, 2000)
    targets = Targets(Q_(0.5, "s"), Q_(50, "ms"), ttft_percentile=0.99)
    space = SearchSpace("h100-sxm", "bf16")
    plan = size_fleet("llama-3.1-70b", workload, targets, space, engine="trtllm", costs=Costs(Q_(3, "USD/hour")))
    assert plan.feasible, plan.reason
    reg = load_registry()
    profile = engine_profile("trtllm", reg)
    (family,) = _families(reg.model("llama-3.1-70b"), space, Costs(Q_(3, "USD/hour")), None, reg, profile)
    a = family.arrays
    tp = np.array([[2.0], [float(plan.layout.tensor_parallel)]])
    capacity, _ = _fits(family, profile, workload, tp, np.ones((2, 1)), ServingOptions())
    reserved = kv_capacity_tokens(a, profile, tp) / scheduler_rules(
        profile, a.memory, "h100-sxm", kv=a
    ).admission_tokens(256, 2000)
    np.testing.assert_array_equal(capacity, np.floor(reserved))  # the reservation binds: 2,256 tokens, not 1,256 held
    assert plan.batch <= capacity[1, 0]
    run = simulate_plan(plan, requests=800, seeds=1)
    assert run.meets_targets, run.verdict
