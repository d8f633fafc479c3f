"""Chunked-local attention (Llama 4) and indexed sparse attention (DeepSeek-V3.2's DSA, GLM-5).

A chunked-local layer attends only within its chunk and keeps at most one chunk, so it takes the sliding window's
path (``StepArrays.kv_tokens``) with a decode read of the tokens since its chunk began. An indexed sparse layer keeps
every token (its MLA latent and the indexer's FP8 key with an FP32 scale per 128 elements) and attends to at most
``index_topk`` of them after its indexer scores them all. Every expected value below is worked out by hand from the
config numbers (comments show the arithmetic).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from calculator import Q_, load_registry
from calculator.errors import InputError
from calculator.memory import model_kv_bytes_per_token
from calculator.model_import import import_model_config
from calculator.performance import ENGINES, Efficiency, engine_memory_fit, step_arrays
from calculator.performance.iteration import causal_pairs, chunk_pairs, iteration_seconds, window_reads
from calculator.registry import Model

REG = load_registry()
ROOFLINE = Efficiency(0.8, 0.65, 0.77, Q_(28e-6, "s"), Q_(0, "s"), Q_(0, "s"), kernels=False)


# ------------------------------------------------------------------------------------ the registry's entries


def test_the_registry_records_the_indexer_and_the_chunks_from_the_configs():
    # deepseek-ai--DeepSeek-V3.2_config.json: index_topk 2048, index_n_heads 64, index_head_dim 128;
    # zai-org--GLM-5_config.json: 2048, 32, 128; Llama 4's text_config: attention_chunk_size 8192 on 48 - 48 / 4.
    v32, glm = REG.model("deepseek-v3.2"), REG.model("glm-5")
    assert (v32.index_topk, v32.index_heads, v32.index_head_dim) == (2048, 64, 128)
    assert (glm.index_topk, glm.index_heads, glm.index_head_dim) == (2048, 32, 128)
    for name in ("llama-4-scout-17b-16e", "llama-4-maverick-17b-128e"):
        assert (REG.model(name).attention_chunk, REG.model(name).chunked_layers) == (8192, 36)


#: id, the card's total and active (each with the step it is rounded to), the vocabulary-by-hidden matrices the
#: card's active count leaves out; the same rule as tests/test_packaged_models.py.
CARDS = [
    ("deepseek-v3.2", (671e9, 1e9), (37e9, 1e9), 1),  # 685B on disk with the 14B MTP module, 671B without
    ("glm-5", (744e9, 1e9), (40e9, 1e9), 2),  # GLM-5 report: 744B total, 40B activated
    ("glm-5.1", (744e9, 1e9), (40e9, 1e9), 2),
    ("llama-4-maverick-17b-128e", (400e9, 1e9), (17e9, 1e9), 0),  # Meta: 17B active, 128 experts, 400B total
]


@pytest.mark.parametrize(("model_id", "total", "active", "left_out"), CARDS)
def test_the_counts_match_the_cards(model_id, total, active, left_out):
    m = REG.model(model_id)
    assert m.active_parameters is not None and m.vocab_size is not None and m.hidden_size is not None
    assert abs(m.parameters - total[0]) <= max(0.01 * total[0], total[1] / 2)
    counted = m.active_parameters - left_out * m.vocab_size * m.hidden_size
    assert abs(counted - active[0]) <= max(0.01 * active[0], active[1] / 2)


def test_scout_counts_its_text_model_below_the_cards_total_with_the_vision_encoder():
    # Meta's 109B counts the vision encoder, which the entry does not: the text model is 107.77B (1.1 % less).
    m = REG.model("llama-4-scout-17b-16e")
    assert 0 < 109e9 - m.parameters < 0.015 * 109e9
    assert abs(m.active - 17e9) <= 0.5e9


# ------------------------------------------------------------------------------------ the KV cache


def test_an_indexed_model_caches_the_latent_and_the_indexer_key_per_token():
    # DeepSeek-V3.2: 61 layers x (the latent 512 + the rotary key 64 at the KV precision + the indexer's key of 128
    # FP8 bytes and one 4-byte scale) = 61 x (576 x 2 + 132) = 78,324 B at BF16, 61 x (576 + 132) = 43,188 at FP8.
    assert model_kv_bytes_per_token("deepseek-v3.2", "bf16").m_as("B/token") == 61 * (576 * 2 + 132) == 78_324
    assert model_kv_bytes_per_token("deepseek-v3.2", "fp8").m_as("B/token") == 61 * (576 + 132) == 43_188
    # GLM-5: 78 layers x (576 x 2 + 132) = 100,152 B.
    assert model_kv_bytes_per_token("glm-5", "bf16").m_as("B/token") == 78 * 1284


@pytest.mark.parametrize("tokens", [1000, 2048, 65536, 163840])
def test_an_indexed_model_keeps_every_token(tokens):
    # Sparse attention reads fewer tokens but keeps all of them: a sequence of L tokens holds L tokens of every layer.
    a = step_arrays("deepseek-v3.2", "b200-sxm", "fp4")
    assert float(a.kv_tokens(tokens)) == tokens
    assert a.kv_bytes_per_token * tokens == 43_188 * tokens  # the NVFP4 checkpoint's FP8 cache


@pytest.mark.parametrize(
    ("tokens", "held"),
    [
        (4096, 4096),  # inside the first chunk every layer keeps every token
        (8192, 8192),
        # 12 global layers keep 32,768, 36 chunked layers at most a chunk of 8,192: (12 x 32,768 + 36 x 8,192) / 48
        (32768, (12 * 32768 + 36 * 8192) / 48),  # = 14,336
        (1_000_000, (12 * 1_000_000 + 36 * 8192) / 48),  # = 256,144
    ],
)
def test_a_chunked_layer_keeps_at_most_one_chunk(tokens, held):
    a = step_arrays("llama-4-scout-17b-16e", "h200-sxm", "bf16")
    assert float(a.kv_tokens(tokens)) == held
    # in bytes: 2 (K and V) x 8 KV heads x 128 x 2 bytes = 4,096 B per layer and token, per layer held
    assert a.kv_bytes_per_token == 48 * 4096
    assert float(a.kv_tokens(tokens)) * a.kv_bytes_per_token == pytest.approx(
        (12 * tokens + 36 * min(tokens, 8192)) * 4096
    )


def test_the_engine_fit_divides_the_cache_by_the_held_tokens():
    # Scout at BF16 on two H200s under vLLM (blocks of 16): a 32,768-token sequence holds 14,336 tokens of all layers.
    fit = engine_memory_fit("llama-4-scout-17b-16e", "h200-sxm", "bf16", 32768, 2, engine="vllm")
    assert fit.block == 16 and fit.sequences == fit.kv_tokens // 14336
    # DeepSeek-V3.2 keeps all 65,536 (vLLM's MLA block of 64 divides it).
    fit = engine_memory_fit("deepseek-v3.2", "b200-sxm", "fp4", 65536, 8, engine="vllm")
    assert fit.sequences == fit.kv_tokens // 65536


# ------------------------------------------------------------------------------------ attention's work


@pytest.mark.parametrize(("tokens", "prior", "chunk"), [(5, 0, 3), (5, 2, 3), (7, 10, 4), (300, 0, 128), (9, 1, 100)])
def test_chunk_pairs_count_each_querys_keys(tokens, prior, chunk):
    # By hand: the query at position i (from 0) attends to the keys of its chunk up to itself, i mod chunk + 1.
    expected = sum(i % chunk + 1 for i in range(prior, prior + tokens))
    assert float(chunk_pairs(tokens, prior, chunk)) == expected
    assert float(chunk_pairs(tokens, prior, 10**9)) == float(causal_pairs(tokens, prior))


def test_a_chunked_decode_reads_half_a_chunk_on_average_beyond_the_first():
    assert float(window_reads(100.0, 8192.0, True)) == 100.0
    assert float(window_reads(30000.0, 8192.0, True)) == 4096.0
    assert float(window_reads(30000.0, 8192.0, False)) == 8192.0  # a sliding window reads all of it


def test_a_chunked_decode_step_reads_the_chunk_on_its_layers():
    # Roofline path: 64 sequences at 32,768 tokens. The 36 chunked layers of 48 read 4,096 tokens each (half a chunk)
    # instead of 32,768: 64 x 0.75 x (32,768 - 4,096) tokens of all layers fewer, at the cache's bytes per token.
    a = step_arrays("llama-4-scout-17b-16e", "h200-sxm", "bf16")
    full = dataclasses.replace(a, window_share=0.0, window=np.inf, chunked=False)
    args = (ROOFLINE, 2.0, 64.0, 32768.0)
    saved = 64 * 0.75 * (32768 - 4096) * a.kv_bytes_per_token / 2  # the cache split over the 2 GPUs
    seconds = saved / (ROOFLINE.hbm_bandwidth * a.hbm_bandwidth)
    assert float(iteration_seconds(full, *args) - iteration_seconds(a, *args)) == pytest.approx(seconds, rel=1e-6)


@pytest.mark.parametrize("efficiency", [ROOFLINE, ENGINES["vllm"].efficiency], ids=["roofline", "kernels"])
def test_an_indexed_decode_step_attends_to_at_most_topk_tokens(efficiency):
    # Without the indexer's own work, a decode step at any context beyond index_topk 2,048 costs what it costs at
    # 2,048: the latent read and its attention FLOP stop growing there.
    a = step_arrays("deepseek-v3.2", "h200-sxm", "fp8")
    latent = dataclasses.replace(a, index_bytes_per_token=0.0, index_flops_per_pair=0.0)
    at = [float(iteration_seconds(latent, efficiency, 8.0, 64.0, c)) for c in (1024.0, 2048.0, 16384.0, 131072.0)]
    assert at[0] < at[1] == at[2] == at[3]
    # The indexer reads every cached key: its part grows with the whole context.
    full = [float(iteration_seconds(a, efficiency, 8.0, 64.0, c)) for c in (2048.0, 131072.0)]
    assert full[1] > full[0]


def test_the_indexers_decode_reads_are_its_keys_over_the_whole_context():
    # Roofline path, 64 sequences on 8 GPUs (the latent replicated, kv_shards 1): from 2,048 to 131,072 tokens the
    # bytes grow by the indexer's keys only, 64 x (131,072 - 2,048) x 61 x 132 B, and the FLOP by its scores,
    # 64 x (131,072 - 2,048) x 61 x 2 x 64 x 128 over 8 GPUs; the roofline's max takes one of the two, at least.
    a = step_arrays("deepseek-v3.2", "h200-sxm", "fp8")
    grown = float(
        iteration_seconds(a, ROOFLINE, 8.0, 64.0, 131072.0) - iteration_seconds(a, ROOFLINE, 8.0, 64.0, 2048.0)
    )
    keys = 64 * (131072 - 2048) * 61 * 132 / (ROOFLINE.hbm_bandwidth * a.hbm_bandwidth)
    scores = 64 * (131072 - 2048) * 61 * 2 * 64 * 128 / 8 / (ROOFLINE.compute * a.peak_flops)
    assert min(keys, scores) * (1 - 1e-9) <= grown <= (keys + scores) * (1 + 1e-9)


# ------------------------------------------------------------------------------------ the importer


def _write(tmp_path, name, config):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


TINY_DSA = {
    "architectures": ["DeepseekV32ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "moe_intermediate_size": 32, "num_hidden_layers": 2, "first_k_dense_replace": 1, "num_attention_heads": 4,
    "num_key_value_heads": 4, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
    "v_head_dim": 8, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "vocab_size": 10000,
    "max_position_embeddings": 1024, "tie_word_embeddings": False, "index_topk": 16, "index_n_heads": 2,
    "index_head_dim": 128,
}  # fmt: skip


def test_the_importer_reads_an_indexed_sparse_config(tmp_path):
    model = import_model_config(_write(tmp_path, "dsa", TINY_DSA), model_id="tiny-dsa").model
    assert (model.index_topk, model.index_heads, model.index_head_dim, model.attention) == (16, 2, 128, "mla")
    # By hand, one layer's attention: q_a 64 x 16 + its norm 16 + q_b 16 x 4 x 12 + kv_a 64 x 12 + its norm 8
    # + kv_b 8 x 4 x 16 + o 4 x 8 x 64 = 1,024 + 16 + 768 + 768 + 8 + 512 + 2,048 = 5,144;
    # its indexer: wq_b 16 x 2 x 128 + wk 64 x 128 + k_norm 2 x 128 + weights_proj 64 x 2 = 4,096 + 8,192 + 256 + 128
    # = 12,672. Embedding and LM head 2 x 10,000 x 64 = 1,280,000; the dense MLP 3 x 64 x 128 = 24,576; the MoE layer's
    # 4 routed and 1 shared experts 5 x 3 x 64 x 32 = 30,720 and its router 64 x 4 = 256; norms 2 x 2 x 64 + 64 = 320.
    total = 2 * (5144 + 12672) + 1_280_000 + 24576 + 30720 + 256 + 320
    assert model.parameters == total
    # Active: all but 2 of the 4 routed experts, 2 x 3 x 64 x 32 = 12,288.
    assert model.active_parameters == total - 12288


TINY_LLAMA4 = {
    "architectures": ["Llama4ForCausalLM"], "hidden_size": 64, "intermediate_size": 32, "intermediate_size_mlp": 128,
    "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
    "max_position_embeddings": 4096, "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
    "attention_chunk_size": 256,
}  # fmt: skip


def test_the_importer_reads_a_chunked_config(tmp_path):
    model = import_model_config(_write(tmp_path, "l4", TINY_LLAMA4), model_id="tiny-l4").model
    # no_rope_layers absent: every 4th layer (3 and 7) attends globally, the other 6 within 256-token chunks.
    assert (model.attention_chunk, model.chunked_layers, model.attention) == (256, 6, "gqa")
    # By hand: attention 64 x (64 + 2 x 32) + 64 x 64 = 12,288 per layer; layers 1, 3, 5, 7 route to 4 experts and
    # one shared expert of 3 x 64 x 32 = 6,144 each, with a router of 64 x 4; layers 0, 2, 4, 6 are dense MLPs of
    # 3 x 64 x 128 = 24,576; embedding and LM head (untied by default) 2 x 100 x 64; norms 8 x 2 x 64 + 64.
    total = 8 * 12288 + 4 * (5 * 6144 + 256) + 4 * 24576 + 12800 + 1088
    assert model.parameters == total
    assert model.active_parameters == total - 4 * 3 * 6144
    # An explicit no_rope_layers names the chunked layers itself (1: rotary positions, chunked).
    listed = {**TINY_LLAMA4, "no_rope_layers": [1, 1, 0, 1, 1, 1, 0, 0]}
    assert import_model_config(_write(tmp_path, "l4b", listed), model_id="tiny-l4b").model.chunked_layers == 5


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"compress_ratios": [0, 4]}, "compress_ratios"),  # DeepSeek-V4's compressed caches
        ({"indexer_types": ["full", "shared"]}, "indexer_types"),  # GLM-5.2 and 5.3: shared indexers
    ],
)
def test_what_an_indexed_model_adds_beyond_dsa_is_refused_naming_it(tmp_path, extra, field):
    with pytest.raises(InputError, match=f"field '{field}'.*cannot express it"):
        import_model_config(_write(tmp_path, "x", {**TINY_DSA, **extra}), model_id="x")


def test_an_indexer_on_an_architecture_without_one_is_still_refused(tmp_path):
    plain = {**TINY_DSA, "architectures": ["DeepseekV3ForCausalLM"]}
    with pytest.raises(InputError, match=r"field 'index_topk'.*cannot express it"):
        import_model_config(_write(tmp_path, "x", plain), model_id="x")


def test_mimo_v2_flashs_windowed_heads_are_refused_naming_them(tmp_path):
    mimo = {"architectures": ["MiMoV2FlashForCausalLM"], "attention_chunk_size": 128, "swa_num_key_value_heads": 8}
    with pytest.raises(InputError, match=r"field 'swa_num_key_value_heads'.*cannot express it"):
        import_model_config(_write(tmp_path, "x", mimo), model_id="x")


def test_a_dsa_layer_types_list_is_read(tmp_path):
    # GLM-5.2's NVFP4 config lists 'deepseek_sparse_attention' layers: the indexer's layers, expressible.
    listed = {**TINY_DSA, "layer_types": ["deepseek_sparse_attention"] * 2}
    assert import_model_config(_write(tmp_path, "x", listed), model_id="x").model.index_topk == 16


# ------------------------------------------------------------------------------------ the schema


def test_the_fields_go_together():
    base = dict(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
                parameters=1e9, layers=4, attention_heads=4, kv_heads=4, head_dim=8)  # fmt: skip
    with pytest.raises(ValueError, match="attention_chunk and chunked_layers"):
        Model(**base, attention="mha", attention_chunk=64)
    with pytest.raises(ValueError, match="cannot exceed layers"):
        Model(**base, attention="mha", attention_chunk=64, chunked_layers=5)
    with pytest.raises(ValueError, match="index_topk, index_heads and index_head_dim"):
        Model(**base, attention="mla", kv_lora_rank=8, qk_rope_head_dim=4, index_topk=16)
    with pytest.raises(ValueError, match="needs attention 'mla'"):
        Model(**base, attention="mha", index_topk=16, index_heads=2, index_head_dim=8)
