"""Gemma 4: full-attention layers with KV heads and a head width of their own beside the sliding-window layers.

Gemma 4's ``text_config`` gives its sliding layers ``head_dim`` and ``num_key_value_heads`` and its full-attention
layers ``global_head_dim`` and (with ``attention_k_eq_v``) ``num_global_key_value_heads``; vLLM's ``gemma4.py`` and
transformers' ``modeling_gemma4.py`` cache a key and a value per head in both kinds (the value is the key's
projection with its own norm and no rotary embedding), so K = V drops the value projection's weights, not the cache.
Every expected value below is worked out by hand from the config numbers in the comments.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from calculator import Q_, load_registry
from calculator._hf_config import architecture_of, count_parameters, read_shape, refuse_inexpressible, split_vision
from calculator.errors import InputError
from calculator.memory import model_kv_bytes_per_token
from calculator.memory.kv import kv_bytes_per_token_per_device, tensor_parallel_valid, window_shares
from calculator.model_import import import_model_config
from calculator.performance import Efficiency, engine_memory_fit, step_arrays
from calculator.performance.iteration import iteration_seconds
from calculator.phases.flops import attention_flops_per_pair
from calculator.registry import Model

DATA = Path(__file__).parent / "data" / "model_configs"
REGISTRY = load_registry()

# gemma-4-26b-a4b (google--gemma-4-26B-A4B_config.json): 30 layers, 25 sliding of 8 KV heads x 256 through a
# 1024-token window, 5 full of 2 KV heads x 512. At 2 bytes a sliding layer caches 2 x 8 x 256 x 2 = 8,192 B per
# token (25 layers: 204,800) and a full layer 2 x 2 x 512 x 2 = 4,096 B (5 layers: 20,480): 225,280 B per token.
SLIDING_26B, FULL_26B = 204_800, 20_480
# gemma-4-31b: 50 sliding layers of 16 KV heads x 256 (2 x 16 x 256 x 2 = 16,384 B each: 819,200) and 10 full of
# 4 KV heads x 512 (2 x 4 x 512 x 2 = 8,192 B each: 81,920): 901,120 B per token.
SLIDING_31B, FULL_31B = 819_200, 81_920


def test_the_registry_entries_record_both_layer_shapes():
    big, moe = REGISTRY.models["gemma-4-31b"], REGISTRY.models["gemma-4-26b-a4b"]
    assert (moe.kv_heads, moe.head_dim, moe.global_kv_heads, moe.global_head_dim) == (8, 256, 2, 512)
    assert (moe.sliding_window, moe.sliding_window_layers, moe.global_layers) == (1024, 25, 5)
    assert (big.kv_heads, big.head_dim, big.global_kv_heads, big.global_head_dim) == (16, 256, 4, 512)
    assert (big.sliding_window, big.sliding_window_layers, big.global_layers) == (1024, 50, 10)


@pytest.mark.parametrize(
    ("model", "precision", "expected"),
    [("gemma-4-26b-a4b", "bf16", SLIDING_26B + FULL_26B), ("gemma-4-26b-a4b", "fp8", (SLIDING_26B + FULL_26B) / 2),
     ("gemma-4-31b", "bf16", SLIDING_31B + FULL_31B)],
)  # fmt: skip
def test_kv_bytes_per_token_sum_each_layer_kind_at_its_own_shape(model, precision, expected):
    assert model_kv_bytes_per_token(model, precision).m_as("B/token") == expected


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (512, (SLIDING_26B + FULL_26B) * 512),  # inside the window every layer keeps every token: 115,343,360 B
        (1024, (SLIDING_26B + FULL_26B) * 1024),  # at the window: 230,686,720 B
        (4096, SLIDING_26B * 1024 + FULL_26B * 4096),  # 209,715,200 + 83,886,080 = 293,601,280 B
        (32768, SLIDING_26B * 1024 + FULL_26B * 32768),  # 209,715,200 + 671,088,640 = 880,803,840 B
    ],
)
def test_a_sequence_keeps_the_window_on_sliding_layers_and_everything_on_full_ones(context, expected):
    # The step model's count of the sequence (the sizer's, the predictor's and the simulator's), in tokens of every
    # layer at 225,280 B each.
    a = step_arrays("gemma-4-26b-a4b", "h200-sxm", "bf16", "bf16")
    assert float(a.kv_tokens(context)) * a.kv_bytes_per_token == pytest.approx(expected, rel=1e-12)
    # An engine's cache (SGLang's, a token a block) holds as many such sequences as those tokens fit.
    fit = engine_memory_fit("gemma-4-26b-a4b", "h200-sxm", "bf16", context, 1, engine="sglang")
    assert fit.sequences == int(fit.kv_tokens // (expected / (SLIDING_26B + FULL_26B)))


def test_the_windowed_layers_shares_of_bytes_and_of_attention_flop():
    # Bytes: 204,800 / 225,280 = 10/11. Attention FLOP per pair (16 query heads on every layer): 25 x 256 of
    # 25 x 256 + 5 x 512 = 6,400 / 8,960 = 5/7.
    assert window_shares("gemma-4-26b-a4b") == pytest.approx((10 / 11, 5 / 7), rel=1e-12)
    # 2 x 16 heads x (25 layers x 2 x 256 + 5 layers x 2 x 512) = 32 x 17,920 = 573,440 FLOP per (query, key) pair.
    assert attention_flops_per_pair("gemma-4-26b-a4b").m_as("FLOP") == 573_440


def test_a_decode_step_past_the_window_reads_more_of_the_full_layers_only():
    # Roofline path (kernels=False), 64 sequences, memory bound: from 8,192 to 16,384 tokens the sliding layers read
    # their 1,024 tokens either way and the full layers 8,192 more each: 64 x 8,192 x 20,480 B more per step.
    a = step_arrays("gemma-4-26b-a4b", "h100-sxm", "bf16", "bf16")
    eff = Efficiency(0.8, 0.65, 0.77, Q_(28e-6, "s"), Q_(0, "s"), Q_(0, "s"), kernels=False)
    more = float(iteration_seconds(a, eff, 1.0, 64.0, 16384.0) - iteration_seconds(a, eff, 1.0, 64.0, 8192.0))
    assert more == pytest.approx(64 * 8192 * FULL_26B / (eff.hbm_bandwidth * a.hbm_bandwidth), rel=1e-9)
    # Inside the window both kinds read every token: 1,024 more tokens of all 225,280 bytes.
    inside = float(iteration_seconds(a, eff, 1.0, 64.0, 1024.0) - iteration_seconds(a, eff, 1.0, 64.0, 0.0))
    assert inside == pytest.approx(64 * 1024 * (SLIDING_26B + FULL_26B) / (eff.hbm_bandwidth * a.hbm_bandwidth))


def test_the_full_layers_projections_are_priced_at_their_own_width():
    # The full layers' q/k/v/o products are wider (16 heads x 512 and 2 KV heads x 512, vLLM computing a value slot
    # even where K = V): pricing every layer at the sliding shape makes a prefill of 8,192 tokens cheaper.
    a = step_arrays("gemma-4-26b-a4b", "h100-sxm", "bf16", "bf16")
    narrow = dataclasses.replace(a, global_share=0.0, curves={})
    args = (1.0, 0.0, 0.0, 8192.0, 1.0)
    eff = Efficiency(0.8, 0.65, 0.77, Q_(28e-6, "s"), Q_(0, "s"), Q_(0, "s"), kernels=True)
    assert float(iteration_seconds(a, eff, *args)) > float(iteration_seconds(narrow, eff, *args))


def test_tensor_parallel_splits_both_kinds_of_kv_heads():
    # 16 query heads, 8 sliding and 2 full KV heads: every power of two up to 16 divides or is a multiple of both.
    assert list(tensor_parallel_valid("gemma-4-26b-a4b", np.array([1, 2, 3, 4, 8, 16]))) == [
        True, True, False, True, True, True,
    ]  # fmt: skip
    # Up to the full layers' 2 KV heads the cache splits exactly: 225,280 / 2 = 112,640 B per token and device.
    per_device = kv_bytes_per_token_per_device("gemma-4-26b-a4b", "bf16", np.array([1, 2, 4]))
    assert list(per_device.m_as("B/token")) == [225_280, 112_640, 112_640]  # beyond 2: a bound (the docs)


def _entry(**fields) -> Model:
    base = dict(id="g", name="g", provenance="user", sources=[{"source": "u", "fields": ["layers"]}], parameters=1e9,
                layers=6, attention_heads=12, kv_heads=4, head_dim=64, attention="gqa", sliding_window=512,
                sliding_window_layers=5, global_kv_heads=3, global_head_dim=128)  # fmt: skip
    return Model(**{**base, **fields})


def test_a_degree_must_split_the_full_layers_kv_heads_too():
    # 12 query heads, 4 sliding KV heads, 3 full ones: 2 divides 4 but neither divides 3 nor is a multiple of it.
    assert list(tensor_parallel_valid(_entry(), np.array([1, 2, 3, 4, 12]))) == [True, False, False, False, True]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"global_head_dim": None}, "go together"),
        ({"sliding_window": None, "sliding_window_layers": None}, "need sliding_window"),
        ({"sliding_window_layers": 6}, "below layers"),
        ({"global_kv_heads": 5}, "must divide attention_heads"),
    ],
)
def test_the_schema_refuses_an_inconsistent_full_layer_shape(fields, message):
    with pytest.raises(ValueError, match=message):
        _entry(**fields)


def _read(name: str):
    config = json.loads((DATA / name).read_text())
    refuse_inexpressible(config, "config")
    text, vision = split_vision(config, "config")
    shape = read_shape(text, architecture_of(text, "config")[1], "config")
    return shape, count_parameters(shape), vision


def test_a_tiny_gemma_4_moe_counts_by_hand():
    shape, counts, vision = _read("tiny--gemma4-moe_config.json")
    assert (shape.window, shape.window_layers, shape.global_layers) == (16, 2, 1)
    assert (shape.global_kv_heads, shape.global_head_dim, shape.k_eq_v) == (1, 8, True)
    # Hidden 8, 2 heads, vocab 10 (tied): embedding 80.
    # A sliding layer (1 KV head of 4): q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192, q and k norms 4 + 4: 200 (2 layers: 400).
    # The full layer (1 KV head of 8, K = V: no v): q 8x16 + k 8x8 + o 16x8 = 320, norms 8 + 8: 336. Attention 736.
    # The dense MLP of 6 beside experts of 2 is 3 shared experts: 3 x 3 x 8 x 2 = 144 a layer, 432.
    # Routed experts 4 x 3 x 8 x 2 = 192 a layer, 576; routers 8 x 4 + 8 (scale) + 4 (per-expert scale) = 44, 132.
    # Norms 4 x 8 + 3 x 8 (the MoE block's) + 1 (layer scalar) = 57 a layer, 171, and the final 8: 179.
    assert (counts.embedding, counts.lm_head, counts.attention) == (80, 0, 736)
    assert (counts.shared_experts, counts.routed_experts, counts.routers, counts.norms) == (432, 576, 132, 179)
    assert counts.total == 80 + 736 + 432 + 576 + 132 + 179
    # A token skips 2 of 4 experts of 48 in each of 3 layers: 288.
    assert counts.active == counts.total - 288
    # Vision (hidden 4, 1 block, 2 heads and 2 KV heads of 2, MLP 6, patch 2, 5 positions a side):
    # patch projection 3 x 2 x 2 x 4 = 48; positions 2 x 5 x 4 = 40; block: q, k, v, o 4 x 4 each = 64, q and k norms
    # 2 + 2, four norms 16, MLP 3 x 4 x 6 = 72: 156; std_bias and std_scale 8, projection to the text 4 x 8 = 32.
    assert vision is not None and vision.parameters == 48 + 40 + 156 + 8 + 32


def test_a_tiny_dense_gemma_4_without_k_eq_v_keeps_the_value_projection():
    shape, counts, vision = _read("tiny--gemma4-dense_config.json")
    # attention_k_eq_v false: the full layer takes num_key_value_heads (1) and a value projection 8 x 8 = 64:
    # 320 + 64 + norms 16 = 400; with two sliding layers of 200: 800. MLP 3 x 8 x 6 = 144 a layer: 432.
    # Norms 4 x 8 + 1 a layer: 99, and the final 8: 107. Embedding 80.
    assert vision is None and shape.moe_layers == 0 and not shape.k_eq_v
    assert (counts.attention, counts.dense_mlp, counts.norms) == (800, 432, 107)
    assert counts.total == counts.active == 80 + 800 + 432 + 107


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hidden_size_per_layer_input": 256}, "text_config.hidden_size_per_layer_input"),  # E2B/E4B's embeddings
        ({"num_kv_shared_layers": 1}, "text_config.num_kv_shared_layers"),
        ({"use_double_wide_mlp": True}, "text_config.use_double_wide_mlp"),
        ({"intermediate_size": 5}, "intermediate_size"),  # not a whole number of experts of 2
    ],
)
def test_what_gemma_4_configs_declare_beyond_the_model_is_refused_naming_the_field(change, field):
    config = json.loads((DATA / "tiny--gemma4-moe_config.json").read_text())
    config["text_config"].update(change)
    with pytest.raises(InputError, match=rf"field '{field}'"):
        refuse_inexpressible(config, "config")
        text, _ = split_vision(config, "config")
        read_shape(text, architecture_of(text, "config")[1], "config")


def test_an_audio_encoder_and_clipped_vision_linears_are_refused():
    config = json.loads((DATA / "tiny--gemma4-moe_config.json").read_text())
    with pytest.raises(InputError, match=r"field 'audio_config'"):
        refuse_inexpressible({**config, "audio_config": {"hidden_size": 4}}, "config")
    config["vision_config"]["use_clipped_linears"] = True
    with pytest.raises(InputError, match=r"field 'use_clipped_linears'"):
        split_vision(config, "config")


# The published configs' counts by hand:
# 26B A4B: embedding 262,144 x 2,816 = 738,197,504; a sliding layer q 16x256x2816 + k and v 8x256x2816 each + o
# = 11,534,336 x 2 + 5,767,168 x 2 = 34,603,008 with norms 512 (x25 = 865,088,000); a full layer q and o 16x512x2816
# = 23,068,672 each, k 2x512x2816 = 2,883,584, norms 1,024: 49,021,952 (x5 = 245,109,760); MLP 3 x 2816 x 2112 =
# 17,842,176 (x30 = 535,265,280); experts 128 x 3 x 2816 x 704 = 761,266,176 (x30 = 22,837,985,280); routers
# (2816 x 128 + 2816 + 128) x 30 = 10,901,760; norms (7 x 2816 + 1) x 30 + 2816 = 594,206. Total 25,233,141,790;
# active: less 120 x 5,947,392 x 30 = 21,410,611,200, so 3,822,530,590. The card: 25.2B total, 3.8B active.
# 31B: embedding 262,144 x 5,376 = 1,409,286,144; sliding layer 2 x 32x256x5376 + 2 x 16x256x5376 + 512 =
# 132,121,088 (x50 = 6,606,054,400); full 2 x 32x512x5376 + 4x512x5376 + 1,024 = 187,171,840 (x10 = 1,871,718,400);
# MLP 3 x 5376 x 21504 = 346,816,512 (x60 = 20,808,990,720); norms (4 x 5376 + 1) x 60 + 5376 = 1,295,676.
# Total 30,697,345,340. The card: 30.7B.
@pytest.mark.parametrize(
    ("file", "quant", "entry", "total", "active", "card"),
    [
        ("google--gemma-4-26B-A4B_config.json", None, "gemma-4-26b-a4b", 25_233_141_790, 3_822_530_590, (25.2e9, 3.8e9)),
        ("nvidia--Gemma-4-31B-IT-NVFP4_config.json", "nvidia--Gemma-4-31B-IT-NVFP4_hf_quant_config.json",
         "gemma-4-31b", 30_697_345_340, 30_697_345_340, (30.7e9, 30.7e9)),
    ],
)  # fmt: skip
def test_the_published_configs_import_to_the_packaged_entries_and_match_the_cards(
    file, quant, entry, total, active, card
):
    imported = import_model_config(
        DATA / file, model_id=f"x-{entry}", quant=DATA / quant if quant else None, repo="example/gemma"
    )
    m, packaged = imported.model, REGISTRY.models[entry]
    assert (m.parameters, m.active) == (total, active) == (packaged.parameters, packaged.active)
    shape = ("layers", "kv_heads", "head_dim", "sliding_window", "sliding_window_layers", "global_kv_heads",
             "global_head_dim", "experts", "experts_per_token", "shared_experts", "intermediate_size",
             "vision_parameters")  # fmt: skip
    assert {f: getattr(m, f) for f in shape} == {f: getattr(packaged, f) for f in shape}
    # Within 0.1B, the step the cards round to.
    assert abs(total - card[0]) <= 0.05e9 and abs(active - card[1]) <= 0.05e9
    if quant:  # NVIDIA's export: NVFP4 weights, an FP8 KV cache, as the packaged checkpoint records
        checkpoint = m.checkpoint("fp4")
        assert checkpoint is not None and checkpoint.kv_cache == "fp8"
        assert packaged.checkpoint("fp4").kv_cache == "fp8"
