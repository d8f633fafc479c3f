"""Speculative decoding with the model's own MTP layers and with EAGLE heads, and per-position acceptance."""

import dataclasses
import json
import typing

import numpy as np
import pytest

from calculator import Q_
from calculator.deploy import EAGLE_HEAD, launch_command
from calculator.errors import InputError
from calculator.fleet import (
    Costs,
    FleetPlan,
    SearchSpace,
    ServingOptions,
    Speculation,
    Targets,
    Workload,
    size_fleet,
)
from calculator.fleet.evaluate import _evaluate
from calculator.fleet.families import _families
from calculator.performance import decode_step_seconds, engine_profile
from calculator.registry import load_registry
from calculator.speculative import (
    emitted_tokens,
    expected_tokens_per_round,
    expected_tokens_per_round_by_position,
)

TRAFFIC = Workload(Q_(5, "request/s"), 2000, 500)
TARGETS = Targets(Q_(3, "s"), Q_(60, "ms"))

# DeepSeek-V3 in the registry (its config.json): 671e9 parameters, 61 layers, hidden 7168, vocab 129280,
# MLA with kv_lora_rank 512 and qk_rope_head_dim 64.
DS_PARAMETERS, DS_LAYERS, DS_HIDDEN, DS_VOCAB = 671e9, 61, 7168, 129280
DS_KV_PER_LAYER = (512 + 64) * 2  # bytes per token of one MLA layer's latent and rotary key, BF16 KV


# --------------------------------------------------------------------------------------------
# The expected tokens of a round with per-position acceptance


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 0.95, 1.0])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_equal_acceptances_give_eq_6(alpha, k):
    assert expected_tokens_per_round_by_position([alpha] * k) == pytest.approx(expected_tokens_per_round(alpha, k))


def test_per_position_acceptance_by_hand():
    # a round of three drafts: the first passes 0.9 of the time, the second 0.8 of those, the third half of those:
    # 1 (the target's token) + 0.9 + 0.9 x 0.8 + 0.9 x 0.8 x 0.5 = 1 + 0.9 + 0.72 + 0.36 = 2.98
    assert expected_tokens_per_round_by_position([0.9, 0.8, 0.5]) == pytest.approx(2.98, abs=1e-12)
    # vectorized over leading axes: one round shape per row
    rows = expected_tokens_per_round_by_position(np.array([[0.9, 0.8, 0.5], [0.0, 1.0, 1.0]]))
    assert rows == pytest.approx([2.98, 1.0])


def test_per_position_acceptance_matches_a_simulation():
    # Independent outcomes per position, each round's tokens counted by emitted_tokens (accepted prefix + 1).
    alphas = np.array([0.9, 0.7, 0.5, 0.3])
    rng = np.random.default_rng(3)
    tokens = emitted_tokens(rng.random((200_000, 4)) < alphas)
    standard_error = tokens.std() / np.sqrt(tokens.size)
    assert abs(tokens.mean() - expected_tokens_per_round_by_position(alphas)) < 4 * standard_error


def test_per_position_acceptance_refuses_one_number_and_values_outside_0_1():
    with pytest.raises(InputError, match="argument 'acceptance' needs one probability per drafted position"):
        expected_tokens_per_round_by_position(0.5)
    with pytest.raises(InputError, match="argument 'acceptance'"):
        expected_tokens_per_round_by_position([0.5, 1.2])


# --------------------------------------------------------------------------------------------
# Speculation: the methods, their errors, and the old calls


def test_old_speculation_calls_are_unchanged():
    old = Speculation("llama-3.2-1b", 3, 0.6)
    assert (old.draft_model, old.draft_length, old.acceptance, old.method) == ("llama-3.2-1b", 3, 0.6, "draft")
    default = Speculation("llama-3.2-1b")
    assert (default.draft_length, default.acceptance) == (4, 0.7)  # the defaults before methods existed
    assert Speculation(draft_model="llama-3.2-1b", draft_length=2, acceptance=0.5) == Speculation(
        "llama-3.2-1b", 2, 0.5
    )


def test_method_defaults_and_per_position_acceptance():
    assert Speculation(method="mtp", draft_length=1).acceptance == 0.85
    assert Speculation(method="eagle").acceptance == 0.68
    spec = Speculation(method="eagle", draft_length=2, acceptance=[0.8, 0.6])
    assert spec.acceptance == (0.8, 0.6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "argument 'draft_model' .* is required for method 'draft'"),
        ({"method": "mtp", "draft_model": "llama-3.2-1b"}, "argument 'draft_model' applies to method 'draft' only"),
        ({"method": "eagle", "draft_model": "llama-3.2-1b"}, "argument 'draft_model' applies to method 'draft' only"),
        ({"method": "medusa"}, "argument 'method' must be one of draft, mtp, eagle"),
        ({"method": "mtp", "draft_length": 3, "acceptance": [0.9, 0.8]}, "argument 'acceptance' must be one .* or 3"),
        ({"method": "mtp", "draft_length": 2, "acceptance": [0.9, 1.5]}, "argument 'acceptance' must be a prob"),
        ({"method": "mtp", "acceptance": -0.1}, "argument 'acceptance' must be a prob"),
    ],
)
def test_speculation_refuses_what_it_cannot_run(kwargs, message):
    with pytest.raises(InputError, match=message):
        Speculation(**kwargs)


def test_mtp_needs_a_model_that_declares_mtp_layers():
    assert load_registry().model("deepseek-v3").mtp_layers == 1  # num_nextn_predict_layers in its config.json
    assert load_registry().model("llama-3.1-8b").mtp_layers is None
    with pytest.raises(InputError, match=r"llama-3\.1-8b declares none"):
        size_fleet(
            "llama-3.1-8b", TRAFFIC, TARGETS, SearchSpace("h100-sxm", "fp8"),
            serving=ServingOptions(speculation=Speculation(method="mtp")),
        )  # fmt: skip


# --------------------------------------------------------------------------------------------
# The sizer: a round of verify + k head passes, and the head's memory


def _family(model, spec, engine, accelerator="h200-sxm", precision="fp8"):
    reg = load_registry()
    profile = engine_profile(engine, reg)
    space = SearchSpace(accelerator, precision, moe_layouts=("tensor",))
    families = _families(reg.model(model), space, Costs(Q_(1, "USD/hour")), spec, reg, profile)
    return families[0], profile


def test_mtp_round_is_a_verify_step_and_k_head_passes_over_the_expected_tokens():
    spec = Speculation(method="mtp", draft_length=2, acceptance=[0.9, 0.6])
    family, profile = _family("deepseek-v3", spec, "sglang")  # prefill first: an iteration is the decode round
    tp, batch = np.array([[8.0, 8.0]]), np.array([[16.0, 128.0]])
    e = _evaluate(family, profile, TRAFFIC, tp, batch, ServingOptions(speculation=spec))
    a, eff, context = family.arrays, profile.efficiency_for(family.accelerator), TRAFFIC.held_context
    verify = decode_step_seconds(a, eff, tp, batch, context, tokens=3)
    # The head: one layer of the model (its MLA attention over the context, its experts) and the LM head, its GPU
    # work alone (it runs inside the target's iteration, whose fixed costs the verification pays).
    layer = dataclasses.replace(
        a, layers=1.0, kv_bytes_per_token=DS_KV_PER_LAYER, attention_flops_per_pair=a.attention_flops_per_pair / 61,
        curves={},
    )  # fmt: skip
    gpu_only = eff.replace(step_overhead=Q_(0, "s"), sequence_overhead=Q_(0, "s"))
    head_pass = decode_step_seconds(layer, gpu_only, tp, batch, context)
    tokens = 1 + 0.9 + 0.9 * 0.6  # 2.44 a round; a request's 499 later tokens take f(499) rounds (renewal count)
    per_round = 499 / _rounds(499, [0.9, 0.6])
    assert per_round == pytest.approx(tokens, rel=3e-3)
    np.testing.assert_allclose(e.tpot_at_batch, (verify + 2 * head_pass) / per_round, rtol=1e-12)
    # a token gap spans a whole round (and a prefill batch that pauses it), not a round's share of one token: at the
    # running batch, between the gap of a request alone (below the smallest cap, the light-load limit) and at its cap
    gap = verify + 2 * head_pass + e.prefill
    one = np.ones_like(batch[:, :1])
    alone = (
        decode_step_seconds(a, eff, tp[:, :1], one, context, tokens=3)
        + 2 * decode_step_seconds(layer, gpu_only, tp[:, :1], one, context)
        + e.prefill
    )
    assert np.isfinite(e.tbt_max).all() and np.all(alone < gap[0, 0])
    assert np.all(e.tbt_max >= alone * (1 - 1e-9)) and np.all(e.tbt_max <= gap * (1 + 1e-9))
    assert np.all(gap[0, 0] - e.prefill[0, 0] > 2 * e.tpot_at_batch[0, 0])  # the round, over twice its per-token share
    np.testing.assert_allclose(e.decode_step, decode_step_seconds(a, eff, tp, batch, context), rtol=1e-12)
    assert np.all(head_pass < 0.25 * e.decode_step)  # one layer of 61 and the LM head


def test_a_draft_model_round_is_priced_as_before():
    # k decode steps of the draft model, each an iteration with the engine's fixed costs, and Eq. 6:
    # (1 - 0.6^4) / (1 - 0.6) = 2.176 tokens a round at alpha 0.6, K = 3
    spec = Speculation("llama-3.2-1b", 3, 0.6)
    family, profile = _family("llama-3.1-8b", spec, "sglang", accelerator="h100-sxm")
    tp, batch = np.array([[1.0, 1.0]]), np.array([[8.0, 64.0]])
    e = _evaluate(family, profile, TRAFFIC, tp, batch, ServingOptions(speculation=spec))
    a, eff, context = family.arrays, profile.efficiency_for(family.accelerator), TRAFFIC.held_context
    verify = decode_step_seconds(a, eff, tp, batch, context, tokens=4)
    drafts = 3 * decode_step_seconds(family.draft, eff, tp, batch, context)
    per_round = 499 / _rounds(499, [0.6] * 3)
    assert per_round == pytest.approx(2.176, rel=3e-3)
    np.testing.assert_allclose(e.tpot_at_batch, (verify + drafts) / per_round, rtol=1e-12)


def test_mtp_head_memory_is_one_layer_of_weights_and_kv():
    spec = Speculation(method="mtp", draft_length=1)
    family, _ = _family("deepseek-v3", spec, "vllm")
    head = family.draft
    # one layer of the model's weights at 1 byte each (FP8); the embedding and the LM head (129280 x 7168 each) are
    # not counted in a layer and the head shares the model's
    layer_bytes = (DS_PARAMETERS - 2 * DS_VOCAB * DS_HIDDEN) / DS_LAYERS
    assert head.weight_bytes == pytest.approx(layer_bytes, rel=1e-12)
    assert layer_bytes == pytest.approx(10.97e9, rel=1e-3)  # README_WEIGHTS.md: 11.5B with eh_proj and norms
    assert head.kv_bytes_per_token == pytest.approx(DS_KV_PER_LAYER)
    tp = np.array([8.0])
    assert head.weights_per_device(tp) == pytest.approx(layer_bytes / 8)  # the TP group splits it like the model


def test_eagle_head_is_a_dense_16_bit_layer_with_its_own_lm_head():
    family, _ = _family("llama-3.1-8b", Speculation(method="eagle"), "vllm", accelerator="h100-sxm")
    head, a = family.draft, family.arrays
    # Llama-3.1-8B: hidden 4096, 32 layers, 128256 vocabulary, GQA 32/8 heads of 128, MLP 14336
    attention = 4096 * (32 + 2 * 8) * 128 + 32 * 128 * 4096
    mlp = 3 * 4096 * 14336
    lm_head = 128256 * 4096
    assert head.mlp_width == 14336 and head.experts == 1 and head.dtype == "bf16"
    assert head.weight_bytes == pytest.approx(2 * (attention + mlp + lm_head), rel=0.01)  # BF16
    assert head.kv_bytes_per_token == pytest.approx(2 * 8 * 128 * 1)  # K and V of 8 heads of 128, FP8 KV cache
    assert a.kv_bytes_per_token == pytest.approx(32 * head.kv_bytes_per_token)


def test_a_head_costs_memory_and_buys_a_shorter_tpot():
    plain = size_fleet("deepseek-v3", TRAFFIC, TARGETS, SearchSpace("h200-sxm", "fp8"), engine="vllm")
    mtp = size_fleet(
        "deepseek-v3", TRAFFIC, TARGETS, SearchSpace("h200-sxm", "fp8"), engine="vllm",
        serving=ServingOptions(speculation=Speculation(method="mtp", draft_length=1)),
    )  # fmt: skip
    assert mtp.feasible and plain.feasible
    assert mtp.service.tpot < plain.service.tpot


# --------------------------------------------------------------------------------------------
# Launch flags and saved plans


@pytest.fixture(scope="module")
def mtp_plan():
    return size_fleet(
        "deepseek-v3", TRAFFIC, TARGETS, SearchSpace("h200-sxm", "fp8"), engine="vllm",
        serving=ServingOptions(speculation=Speculation(method="mtp", draft_length=2)),
    )  # fmt: skip


@pytest.fixture(scope="module")
def eagle_plan():
    return size_fleet(
        "llama-3.1-8b", TRAFFIC, TARGETS, SearchSpace("h100-sxm", "fp8"), engine="vllm",
        serving=ServingOptions(speculation=Speculation(method="eagle", draft_length=3)),
    )  # fmt: skip


def test_mtp_flags(mtp_plan):
    vllm = launch_command(mtp_plan, "vllm")
    # vLLM 0.14.0 SpeculativeConfig: method 'mtp' takes the target's own checkpoint as the drafter
    assert json.loads(vllm.flags["--speculative-config"]) == {"method": "mtp", "num_speculative_tokens": 2}
    assert "--async-scheduling" in vllm.flags  # 0.14.0 schedules asynchronously with MTP and EAGLE drafting
    sglang = launch_command(mtp_plan, "sglang")
    assert sglang.flags["--speculative-algorithm"] == "NEXTN"
    assert "--speculative-draft-model-path" not in sglang.flags  # DeepseekV3ForCausalLM: its own checkpoint
    steps = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    assert [sglang.flags[f] for f in steps] == ["2", "1", "3"]
    trtllm = launch_command(mtp_plan, "trtllm")
    options = __import__("yaml").safe_load(trtllm.files["extra-llm-api-config.yml"])
    assert options["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 2}
    for config in (vllm, sglang, trtllm):
        assert all(config.citations[flag] for flag in config.flags)


def test_eagle_flags(eagle_plan):
    vllm = launch_command(eagle_plan, "vllm")
    assert json.loads(vllm.flags["--speculative-config"]) == {
        "model": EAGLE_HEAD, "num_speculative_tokens": 3, "method": "eagle3",
    }  # fmt: skip
    assert any(EAGLE_HEAD in note for note in vllm.notes)  # the head's repository is the user's to give
    sglang = launch_command(eagle_plan, "sglang")
    assert sglang.flags["--speculative-algorithm"] == "EAGLE3"
    assert sglang.flags["--speculative-draft-model-path"] == EAGLE_HEAD
    assert sglang.flags["--speculative-num-draft-tokens"] == "4"
    trtllm = launch_command(eagle_plan, "trtllm")
    options = __import__("yaml").safe_load(trtllm.files["extra-llm-api-config.yml"])
    assert options["speculative_config"] == {
        "decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": EAGLE_HEAD,
    }  # fmt: skip


def test_a_draft_model_keeps_its_flags():
    plan = size_fleet(
        "llama-3.1-70b", TRAFFIC, TARGETS, SearchSpace("h100-sxm", "fp8"), engine="vllm",
        serving=ServingOptions(speculation=Speculation("llama-3.2-1b", 3, 0.7)),
    )  # fmt: skip
    vllm = launch_command(plan, "vllm")  # vLLM runs a draft model from 0.15 (0.14 raises NotImplementedError)
    assert vllm.flags["--speculative-config"] == (
        '{"model":"meta-llama/Llama-3.2-1B","num_speculative_tokens":3,"method":"draft_model"}'
    )
    assert "--async-scheduling" not in vllm.flags
    assert launch_command(plan, "sglang").flags["--speculative-algorithm"] == "STANDALONE"


def test_plans_save_and_load_per_position_acceptance_and_the_old_speculation_shape(eagle_plan):
    saved = json.loads(json.dumps(eagle_plan.to_json_dict()))
    assert saved["serving"]["speculation"]["method"] == "eagle"
    assert FleetPlan.from_json_dict(saved) == eagle_plan
    # a plan written before methods existed: no 'method', a draft model and one acceptance
    saved["serving"]["speculation"] = {"draft_model": "llama-3.2-1b", "draft_length": 3, "acceptance": 0.6}
    loaded = FleetPlan.from_json_dict(saved).serving.speculation
    assert loaded == Speculation("llama-3.2-1b", 3, 0.6) and loaded.method == "draft"
    per_position = dataclasses.replace(
        eagle_plan,
        serving=ServingOptions(speculation=Speculation(method="eagle", draft_length=2, acceptance=[0.8, 0.5])),
    )
    again = FleetPlan.from_json_dict(json.loads(json.dumps(per_position.to_json_dict())))
    assert again.serving.speculation.acceptance == (0.8, 0.5)


def test_the_command_lines_speculate_help_names_the_default_acceptances():
    import re

    from calculator.cli.sizing import SpeculateOption
    from calculator.serving import DEFAULT_ACCEPTANCE

    help_text = typing.get_args(SpeculateOption)[1].help
    named = dict(
        re.findall(
            r"(probability ALPHA|multi-token-prediction layers|EAGLE-3 head) \(?[^()]*?\(?default (0\.\d+)", help_text
        )
    )
    assert [float(v) for v in named.values()] == [DEFAULT_ACCEPTANCE[m] for m in ("draft", "mtp", "eagle")]


def _rounds(tokens, alphas):
    """Mean rounds to emit ``tokens``: f(l) = 1 + sum_j P(T = j) f(l - j), a round emitting 1 + its accepted prefix."""
    reach = np.concatenate([[1.0], np.cumprod(alphas), [0.0]])
    emitted = reach[:-1] - reach[1:]
    f = np.zeros(tokens + 1)
    for left in range(1, tokens + 1):
        f[left] = 1 + sum(p * f[max(left - j, 0)] for j, p in enumerate(emitted, start=1))
    return f[tokens]
