"""Speculative decoding in the closed-loop benchmark predictor, the simulator and their commands.

A decode iteration is a round: the target verifies ``k + 1`` tokens of every decoding sequence and the drafter
proposes ``k`` (a draft model's steps, or a head's passes); a sequence emits its accepted prefix and one token of
the target's. The predictor decodes a request in ``(O - 1) / E`` rounds; the simulator draws each round's accepted
prefix per position.
"""

import dataclasses
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from calculator import Q_
from calculator.cli import app
from calculator.errors import InputError
from calculator.fleet import SearchSpace, ServingOptions, Speculation, Targets, Workload, size_fleet
from calculator.performance import (
    decode_step_seconds,
    engine_profile,
    kv_capacity_tokens,
    predict_benchmark,
    step_arrays,
)
from calculator.simulation import SimulationSetup, Traffic, plan_setup, simulate
from calculator.simulation.seed import _limits

runner = CliRunner()

INPUTS, OUTPUTS = 1024, 512
CONTEXT = INPUTS + OUTPUTS / 2  # the closed loop's mean context: the prompt and half the output

# DeepSeek-V3's MTP layer drafting two tokens, the second accepted less often than the first:
# E = 1 + 0.9 + 0.9 x 0.6 = 2.44 tokens a round
MTP = Speculation(method="mtp", draft_length=2, acceptance=[0.9, 0.6])
MTP_TOKENS = 2.44
# Llama-3.1-8B drafting four tokens for Llama-3.1-70B at 0.7 each (Eq. 6):
# E = (1 - 0.7^5) / (1 - 0.7) = 0.83193 / 0.3 = 2.77310
DRAFT = Speculation("llama-3.1-8b", 4, 0.7)
DRAFT_TOKENS = (1 - 0.7**5) / (1 - 0.7)


def _round_seconds(model, spec, tp, engine, batch, accelerator="h200-sxm", precision="fp8"):
    """One round at ``batch`` from the step functions: the verification of k + 1 tokens and the k drafts."""
    profile = engine_profile(engine)
    eff = profile.efficiency_for(accelerator)
    a = step_arrays(model, accelerator, precision, engine=profile)
    k = spec.draft_length
    verify = decode_step_seconds(a, eff, tp, batch, CONTEXT, tokens=k + 1)
    if spec.method == "draft":  # each draft step an iteration of the draft model, with the engine's fixed costs
        drafter, passes = step_arrays(spec.draft_model, accelerator, precision, engine=profile), eff
    else:  # a head's passes run inside the target's iteration: their GPU work alone
        drafter = a.draft_head(spec.method)
        passes = eff.replace(step_overhead=Q_(0, "s"), sequence_overhead=Q_(0, "s"))
    return verify + k * decode_step_seconds(drafter, passes, tp, batch, CONTEXT)


# --------------------------------------------------------------------------------------------
# One client: no queueing, every decode iteration a round of one sequence


@pytest.mark.parametrize(
    ("model", "spec", "tp", "engine", "alphas", "tokens"),
    [("deepseek-v3", MTP, 8, "vllm", [0.9, 0.6], MTP_TOKENS),
     ("llama-3.1-70b", DRAFT, 4, "trtllm", [0.7] * 4, DRAFT_TOKENS)],
)  # fmt: skip
def test_one_client_tpot_is_the_round_at_batch_one_over_its_tokens(model, spec, tp, engine, alphas, tokens):
    # A request's 511 tokens after the first take f(511) rounds (the renewal count, the last round cut at the length;
    # about 511 / E plus a fraction), so its TPOT is the round times f(511) / 511, within 0.5 % of the round over E.
    one = predict_benchmark(model, "h200-sxm", "fp8", tp, INPUTS, OUTPUTS, 1, engine=engine, speculation=spec)
    round_ = _round_seconds(model, spec, tp, engine, 1)
    rounds = _expected_rounds(OUTPUTS - 1, alphas)
    assert one.tpot.m_as("s") == pytest.approx(round_ * rounds / (OUTPUTS - 1), rel=1e-9)
    assert one.tpot.m_as("s") == pytest.approx(round_ / tokens, rel=5e-3)
    assert one.decode_step_time.m_as("s") == pytest.approx(round_, rel=1e-9)  # the iteration the engine runs
    plain = predict_benchmark(model, "h200-sxm", "fp8", tp, INPUTS, OUTPUTS, 1, engine=engine)
    assert one.tpot < plain.tpot  # a round costs less than the E plain steps its tokens would take here


def test_the_drafter_takes_its_share_of_the_cache():
    # Llama-3.1-70B FP8 over four H200 with Llama-3.1-8B as the draft (TensorRT-LLM's DraftTarget; vLLM 0.14 runs no
    # draft model): the draft's weights take their bytes of the replica's KV memory, and every token held costs a
    # token of each model's KV.
    profile = engine_profile("trtllm")
    a = step_arrays("llama-3.1-70b", "h200-sxm", "fp8", engine=profile)
    draft = step_arrays("llama-3.1-8b", "h200-sxm", "fp8", engine=profile)
    kv_bytes = float(kv_capacity_tokens(a, profile, 4)) * a.kv_bytes_per_token  # the replica's KV memory
    held = (kv_bytes - draft.weight_bytes) / (a.kv_bytes_per_token + draft.kv_bytes_per_token)
    _, _, rules, capacity, _ = _limits(SimulationSetup("llama-3.1-70b", "h200-sxm", "fp8", 4, engine="trtllm",
                                                       speculation=DRAFT))  # fmt: skip
    assert capacity == pytest.approx(held, rel=1e-9)
    # the predictor admits by the same cache: clients beyond it wait (long requests: the cache binds before the
    # engine's sequence cap)
    most = int(held // rules.admission_tokens(8192, 1024))
    inside, beyond = (
        predict_benchmark("llama-3.1-70b", "h200-sxm", "fp8", 4, 8192, 1024, c, engine="trtllm", speculation=DRAFT)
        for c in (most, most + 1)
    )
    assert inside.max_concurrency == most and not inside.memory_limited and beyond.memory_limited


# --------------------------------------------------------------------------------------------
# The closed form against the simulator


@pytest.mark.parametrize(
    ("model", "spec", "tp", "dp", "clients", "engine"),
    [
        ("deepseek-v3", MTP, 1, 8, 16, "vllm"),  # attention data parallel over eight ranks
        ("deepseek-v3", MTP, 1, 8, 128, "vllm"),
        ("llama-3.1-70b", DRAFT, 4, 1, 16, "trtllm"),  # a draft model: TensorRT-LLM's DraftTarget
        ("llama-3.1-70b", DRAFT, 4, 1, 128, "trtllm"),
    ],
)
def test_the_closed_form_agrees_with_the_simulator(model, spec, tp, dp, clients, engine):
    predicted = predict_benchmark(model, "h200-sxm", "fp8", tp, INPUTS, OUTPUTS, clients, engine=engine,
                                  data_parallel=dp, length_cv=0.1, speculation=spec)  # fmt: skip
    setup = SimulationSetup(model, "h200-sxm", "fp8", tp * dp, engine=engine, data_parallel=dp, speculation=spec)
    traffic = Traffic(clients=clients, input_tokens=INPUTS, output_tokens=OUTPUTS, requests=10 * clients,
                      input_cv=0.1, output_cv=0.1)  # fmt: skip
    run = simulate(setup, traffic, seeds=1)
    assert run.value("ttft").m_as("s") == pytest.approx(predicted.ttft.m_as("s"), rel=0.10)
    assert run.value("tpot").m_as("s") == pytest.approx(predicted.tpot.m_as("s"), rel=0.10)
    assert run.throughput.m_as("request/s") == pytest.approx(predicted.throughput.m_as("request/s"), rel=0.10)


def _expected_rounds(tokens, alphas):
    """Mean rounds to emit ``tokens``, a round emitting 1 + its accepted prefix (the last round cut short).

    The renewal recursion f(l) = 1 + sum_j P(T = j) f(l - j), f(l <= 0) = 0, where a round emits T = 1 + i tokens
    when positions 1..i pass and position i + 1 fails: P(T = 1 + i) = p_i - p_{i+1}, p_i the product of the first
    i acceptances (p_0 = 1, p_{k+1} = 0).
    """
    reach = np.concatenate([[1.0], np.cumprod(alphas), [0.0]])
    emitted = reach[:-1] - reach[1:]  # P(T = 1), ..., P(T = k + 1)
    f = np.zeros(tokens + 1)
    for left in range(1, tokens + 1):
        f[left] = 1 + sum(p * f[max(left - j, 0)] for j, p in enumerate(emitted, start=1))
    return f[tokens]


def test_the_simulated_rounds_follow_the_acceptance():
    # An EAGLE head drafting three tokens with falling acceptance: E = 1 + 0.8 + 0.48 + 0.192 = 2.472 tokens a
    # round. Every request emits 256 tokens after its prompt's, so it takes f(256) rounds on average, the renewal
    # count of rounds of E tokens a round on average (256 / 2.472 = 103.6, and the last round's cut: 103.9).
    alphas = [0.8, 0.6, 0.4]
    spec = Speculation(method="eagle", draft_length=3, acceptance=alphas)
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm", speculation=spec,
                            step_time=Q_(10, "ms"))  # fmt: skip
    run = simulate(setup, Traffic(clients=16, input_tokens=128, output_tokens=257, requests=800), seeds=1)
    rounds = run.requests.decode_rounds.to_numpy(dtype=float)
    assert np.all(run.requests.output_tokens == 257) and run.requests.preemptions.sum() == 0
    expected = _expected_rounds(256, alphas)
    assert 256 / 2.472 < expected < 256 / 2.472 + 1
    standard_error = rounds.std(ddof=1) / np.sqrt(rounds.size)  # about 0.15 rounds
    assert abs(rounds.mean() - expected) < 3 * standard_error  # (256 / E alone is 2.5 standard errors short)
    plain = dataclasses.replace(setup, speculation=None)
    alone = simulate(plain, Traffic(clients=4, input_tokens=128, output_tokens=33, requests=40), seeds=1)
    assert np.all(alone.requests.decode_rounds == 32)  # one token a decode iteration


# --------------------------------------------------------------------------------------------
# Bad input, plans and the commands


def test_bad_speculation_is_refused_naming_the_argument():
    with pytest.raises(InputError, match="predict_benchmark\\(\\): argument 'speculation' must be a Speculation"):
        predict_benchmark("llama-3.1-8b", "h100-sxm", "fp8", 1, 128, 128, 1, speculation="mtp:2")
    with pytest.raises(InputError, match=r"llama-3\.1-8b declares none"):
        predict_benchmark("llama-3.1-8b", "h100-sxm", "fp8", 1, 128, 128, 1, speculation=Speculation(method="mtp"))
    vllm_0_14 = engine_profile("vllm").for_release("0.14")  # 0.14 runs no separate draft model; 0.15 does
    with pytest.raises(InputError, match="predict_benchmark\\(\\): speculation with a draft model: vllm does not run"):
        predict_benchmark("llama-3.1-70b", "h200-sxm", "fp8", 4, 128, 128, 1, engine=vllm_0_14, speculation=DRAFT)
    with pytest.raises(InputError, match="SimulationSetup: 'speculation' must be a Speculation"):
        SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", speculation={"method": "mtp"})
    with pytest.raises(InputError, match="simulate\\(\\): speculation method 'mtp'"):
        simulate(SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", speculation=Speculation(method="mtp")),
                 Traffic(clients=1, requests=1))  # fmt: skip


def test_a_plan_with_speculation_is_simulated_with_it():
    plan = size_fleet(
        "llama-3.1-70b", Workload(Q_(4, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
        SearchSpace("h100-sxm", "fp8"), engine="sglang", serving=ServingOptions(speculation=Speculation("llama-3.2-1b")),
    )  # fmt: skip
    assert plan.feasible
    assert plan_setup(plan).speculation == Speculation("llama-3.2-1b")


def test_predict_command_speculates():
    args = ["predict", "deepseek-v3", "--input", str(INPUTS), "--output", str(OUTPUTS), "-c", "1", "-a", "h200-sxm",
            "-p", "fp8", "--tp", "8", "--engine", "vllm", "--speculate", "mtp:2:0.9,0.6"]  # fmt: skip
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["speculate"] == "mtp:2:0.9,0.6"
    per_token = _round_seconds("deepseek-v3", MTP, 8, "vllm", 1) * _expected_rounds(OUTPUTS - 1, [0.9, 0.6])
    assert row["tpot [ms]"] == pytest.approx(1e3 * per_token / (OUTPUTS - 1))
    table = runner.invoke(app, args).stdout.splitlines()
    assert "speculative decoding with the model's MTP layers (2 tokens per round, acceptance 0.9, 0.6)" in table[0]
    bad = runner.invoke(app, ["predict", "llama-3.1-8b", "--input", "128", "--output", "128", "-c", "1",
                              "--speculate", "mtp:2"])  # fmt: skip
    assert bad.exit_code == 2 and "llama-3.1-8b declares none (Model.mtp_layers)" in bad.output
    junk = runner.invoke(app, ["predict", "llama-3.1-8b", "--input", "128", "--output", "128", "-c", "1",
                               "--speculate", "mtp:two"])  # fmt: skip
    assert junk.exit_code == 2 and "option --speculate: expected DRAFT:K:ALPHA" in junk.output


def test_simulate_command_runs_a_plan_with_speculation(tmp_path):
    sizing = ["llama-3.1-70b", "--rate", "4", "--input", "1024", "--output", "256", "--ttft", "2 s", "--tpot",
              "60 ms", "-a", "h100-sxm", "-p", "fp8", "--price", "4", "--speculate", "llama-3.2-1b:3:0.7"]  # fmt: skip
    sized = runner.invoke(app, ["size", *sizing, "--json"])
    assert sized.exit_code == 0, sized.output
    plan = tmp_path / "plan.json"
    plan.write_text(sized.stdout)
    result = runner.invoke(app, ["simulate", "--plan", str(plan), "--replicas", "1", "--requests", "300",
                                 "--seeds", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "speculative decoding with draft llama-3.2-1b (3 tokens per round, acceptance 0.7)" in result.stdout


def test_a_short_output_takes_whole_rounds():
    # One token after the first takes one round whatever E: TPOT is the whole round, not the round over E; two
    # tokens take 1 + P(first draft rejected) = 1.1 rounds at acceptance 0.9 (the simulator's count).
    for outputs, rounds in ((2, 1.0), (3, 1.1)):
        one = predict_benchmark("deepseek-v3", "h200-sxm", "fp8", 8, INPUTS, outputs, 1, engine="vllm", speculation=MTP)
        round_ = _round_seconds("deepseek-v3", MTP, 8, "vllm", 1)
        assert one.tpot.m_as("s") == pytest.approx(round_ * rounds / (outputs - 1), rel=0.02)
