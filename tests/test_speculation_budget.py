"""Speculative decoding in the token budget: a decoding sequence takes its token and its k drafts.

vLLM schedules a running request's ``num_tokens_with_spec - num_computed_tokens`` tokens from the budget
(``v1/core/sched/scheduler.py``) and TensorRT-LLM's micro-batch scheduler counts a generation request's beam width
plus its draft tokens against ``max_num_tokens`` (``microBatchScheduler.cpp``): with k drafts a decode takes k + 1.
"""

from __future__ import annotations

import pytest

from calculator.fleet import Speculation
from calculator.performance import engine_profile, predict_benchmark
from calculator.performance.scheduler import scheduler_rules
from calculator.simulation import SimulationSetup, Traffic, simulate
from calculator.simulation.seed import _limits

DRAFT = Speculation("llama-3.2-1b", draft_length=4, acceptance=0.7)


def test_a_speculating_decode_takes_its_drafts_from_the_budget():
    profile = engine_profile("vllm")
    plain = scheduler_rules(profile, 80e9, "h100_sxm")
    drafted = scheduler_rules(profile, 80e9, "h100_sxm", decode_tokens=5)
    budget = plain.token_budget
    assert plain.room(100) == budget - 100
    assert drafted.room(100) == budget - 5 * 100  # 100 decodes of 1 + 4 tokens each
    assert drafted.room(100.0) == pytest.approx(budget - 500.0)
    assert drafted.per_rank().decode_tokens == 5


def test_the_simulator_and_the_predictor_count_the_drafts_alike():
    # A budget of 1,024 tokens that 128 clients' decodes (5 tokens each under 4 drafts) mostly fill: the prompts
    # get what the drafts leave. The simulator schedules whole tokens from the same rules, the closed form its means.
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm", speculation=DRAFT,
                            max_num_tokens=1024, max_num_seqs=256)  # fmt: skip
    _, _, rules, _, _ = _limits(setup)
    assert rules.decode_tokens == 5 and rules.token_budget == 1024
    profile = engine_profile("vllm").replace(tiers=(), max_num_tokens=1024, max_num_seqs=256)
    predicted = predict_benchmark("llama-3.1-8b", "h100-sxm", "fp8", 1, 1024, 128, 128, engine=profile,
                                  length_cv=0.1, speculation=DRAFT)  # fmt: skip
    traffic = Traffic(clients=128, input_tokens=1024, output_tokens=128, requests=1280, input_cv=0.1, output_cv=0.1)
    run = simulate(setup, traffic, seeds=1)
    assert run.value("ttft").m_as("s") == pytest.approx(predicted.ttft.m_as("s"), rel=0.15)
    assert run.value("tpot").m_as("s") == pytest.approx(predicted.tpot.m_as("s"), rel=0.10)
    assert run.throughput.m_as("request/s") == pytest.approx(predicted.throughput.m_as("request/s"), rel=0.10)
