"""Memory (sections 10.7 and 10.9): the chapter's worked numbers at the precision printed, published model
configurations, properties and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError, UnitsError
from calculator.memory import (
    MemoryTier,
    compare_precisions,
    device_share,
    effective_bits_per_weight,
    kv_budget,
    kv_bytes_per_token,
    kv_bytes_per_token_per_device,
    kv_cache_bytes,
    kv_wall,
    lora_adapter_bytes,
    lora_adapter_parameters,
    lora_parameters,
    max_batch,
    max_batch_numeric,
    max_context,
    memory_fit,
    memory_footprint,
    min_devices_for_weights,
    min_tensor_parallel,
    mla_kv_bytes_per_token,
    model_kv_bytes_per_token,
    model_max_batch,
    model_memory_fit,
    model_weight_bytes,
    paged_allocation,
    pool_admission,
    precision_dividend,
    prefix_cache_memory,
    prefix_cache_tokens,
    quantization_overhead,
    quantize,
    reservation_vs_paging,
    shared_block_usage,
    slot_map,
    tensor_parallel_valid,
    tiered_retention,
    weight_bytes,
)
from calculator.registry import Accelerator, Model

GB = Q_(1, "GB")
FP16 = Q_(2, "B")
GQA_TOKEN = Q_(327_680, "B/token")  # eq. 5 for 80 layers x 8 KV heads x 128 at FP16 (§10.7.1)
MHA_TOKEN = Q_(2_621_440, "B/token")  # the same with 64 KV heads (§10.7.4, answer §10.18)


def model(id, parameters, layers, heads, kv_heads, head_dim, attention, **extra):
    """A registry Model built in the test (the packaged registry is checked separately below)."""
    return Model(
        id=id,
        name=id,
        provenance="published",
        sources=[{"source": "config", "fields": ["parameters", "layers"]}],
        parameters=parameters,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        attention=attention,
        **extra,
    )


# The chapter's illustrative models: the 64-head MHA baseline (§10.7.4, §10.7.5: 70B, 80 layers, 64 KV heads of
# 128) and the 70B GQA reference (§10.7.1: 8 KV heads); Napkin Math 10.5 weighs it at 141.2 GB (70.6B, §10.7.1).
MHA_70B = model("chapter-70b-mha", 70e9, 80, 64, 64, 128, "mha", hidden_size=8192)
GQA_70B = model("chapter-70b-gqa", 70e9, 80, 64, 8, 128, "gqa", hidden_size=8192)
GQA_70_6B = model("llama-3.1-70b", 70.6e9, 80, 64, 8, 128, "gqa", hidden_size=8192, max_context=131_072)

# Published configurations (Hugging Face config.json of each model): KV bytes per token at FP16.
PUBLISHED = {
    # id: (model, bytes per token at fp16)
    "llama-2-7b": (model("llama-2-7b", 6.74e9, 32, 32, 32, 128, "mha"), 524_288),
    "llama-2-13b": (model("llama-2-13b", 13.0e9, 40, 40, 40, 128, "mha"), 819_200),
    "llama-2-70b": (model("llama-2-70b", 69.0e9, 80, 64, 8, 128, "gqa"), 327_680),
    "llama-3.1-8b": (model("llama-3.1-8b", 8.03e9, 32, 32, 8, 128, "gqa"), 131_072),
    "llama-3.1-70b": (GQA_70_6B, 327_680),
    "llama-3.1-405b": (model("llama-3.1-405b", 405.9e9, 126, 128, 8, 128, "gqa"), 516_096),
    "qwen3-32b": (model("qwen3-32b", 32.8e9, 64, 64, 8, 128, "gqa"), 262_144),
    "mixtral-8x7b": (
        model("mixtral-8x7b", 46.7e9, 32, 32, 8, 128, "gqa", active_parameters=12.9e9, experts=8, experts_per_token=2),
        131_072,
    ),
    "gpt-3-175b": (model("gpt-3-175b", 175e9, 96, 96, 96, 128, "mha"), 4_718_592),
    # Falcon-7B: multi-query attention, 71 query heads of 64, one KV head.
    "falcon-7b": (model("falcon-7b", 7.2e9, 32, 71, 1, 64, "mqa"), 8_192),
    # DeepSeek-V3: MLA, 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64 cached per layer (one latent).
    "deepseek-v3": (
        model(
            "deepseek-v3", 671e9, 61, 128, 128, 128, "mla", active_parameters=37e9, kv_lora_rank=512,
            qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, experts=256, experts_per_token=8,
        ),
        70_272,
    ),
}  # fmt: skip


# ------------------------------------------------------------------ eq. 5 and published configurations


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_kv_bytes_per_token_of_published_configurations(name):
    entry, expected = PUBLISHED[name]
    assert model_kv_bytes_per_token(entry).m_as("B/token") == expected
    assert model_kv_bytes_per_token(entry, "fp8").m_as("B/token") == expected / 2
    assert model_kv_bytes_per_token(entry, "int4").m_as("B/token") == expected / 4


@pytest.mark.parametrize("registry_id", sorted(set(PUBLISHED) - {"falcon-7b"} | {"chapter-70b-mha", "chapter-70b-gqa"}))
def test_registry_models_match_their_published_kv_bytes(registry_id):
    expected = {"chapter-70b-mha": 2_621_440, "chapter-70b-gqa": 327_680} | {k: v for k, (_, v) in PUBLISHED.items()}
    assert model_kv_bytes_per_token(registry_id).m_as("B/token") == expected[registry_id]


def test_eq5_gqa_reference_model_327680_bytes_per_token():
    # Napkin Math 10.5 step 1 (§10.7.1): 2 x 80 x 8 x 128 x 2 = 327,680 bytes ~ 0.33 MB/token.
    per_token = kv_bytes_per_token(80, 8, 128, FP16)
    assert per_token.m_as("B/token") == 327_680
    assert round(per_token.m_as("MB/token"), 2) == 0.33


def test_mla_caches_one_latent_not_k_and_v():
    # DeepSeek-V2 Table 1: (d_c + d_h^R) l elements per token; at BF16 for V3: 61 x 576 x 2 bytes.
    assert mla_kv_bytes_per_token(61, 512, 64, FP16).m_as("B/token") == 70_272


def test_gqa_caches_one_eighth_of_the_mha_baseline():
    # §10.7: eight KV heads cache "one eighth the state of a 64-head multi-head attention baseline".
    assert model_kv_bytes_per_token(GQA_70B) / model_kv_bytes_per_token(MHA_70B) == pytest.approx(1 / 8)


# ------------------------------------------------------------------ Figure 9: the KV cache wall


def test_figure_9_batch_of_8_reaches_the_wall_at_roughly_17k_tokens():
    # §10.7.1: 35 GB of 4-bit weights on an 80 GB (decimal) H100, eight-KV-head GQA state at FP16:
    # "A batch of 8 reaches the memory boundary at roughly 17K tokens per sequence."
    tokens = max_context(80 * GB, weight_bytes(70e9, 4), GQA_TOKEN, batch=8)
    assert round(tokens / 1000) == 17


def test_figure_9_a_second_128k_request_exceeds_80_gb():
    # §10.7.1: with 35 GB of weights, one 128K-token request fits and "admitting a second" exceeds 80 GB.
    one = memory_fit(80 * GB, 35 * GB, GQA_TOKEN, 131_072, batch=1)
    two = memory_fit(80 * GB, 35 * GB, GQA_TOKEN, 131_072, batch=2)
    assert one.fits and not two.fits
    assert one.max_batch == 1


def test_figure_9_caption_35_gb_plus_84_gb_exceeds_80_gb():
    # §10.7.1: "At 128K context, a batch size of 2 is physically impossible ... (35 GB + 84 GB exceeds 80 GB)".
    # 84 GB reproduces only with 128K = 128,000 tokens (2 x 131,072 tokens gives 85.9 GB); we pin that reading
    # here, while Napkin Math 10.5 states 131,072 explicitly (catalog ambiguity A1).
    kv = kv_cache_bytes(2, 128_000, GQA_TOKEN)
    assert round(kv.m_as("GB")) == 84
    assert memory_footprint(35 * GB, 2, 128_000, GQA_TOKEN) > 80 * GB


def test_kv_wall_boundaries_are_the_max_context_of_each_batch():
    wall = kv_wall(80 * GB, 35 * GB, GQA_TOKEN, np.array([1_000, 17_000, 17_500]), [1, 8])
    assert wall.footprint.shape == (2, 3)
    assert wall.boundary[1] == max_context(80 * GB, 35 * GB, GQA_TOKEN, 8)
    # below the boundary the footprint fits, above it it does not
    assert wall.footprint[1, 1] <= 80 * GB < wall.footprint[1, 2]


# ------------------------------------------------------------------ Napkin Math 10.5: the capacity estimator


def napkin_10_5_fit(basis="physical"):
    h100 = Accelerator(
        id="h100-sxm", name="H100 SXM", provenance="published", vendor="NVIDIA",
        sources=[{"source": "datasheet", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
        memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W",
    )  # fmt: skip
    # 8 x H100, 141.2 GB of FP16 weights (70.6B), 20 GB "System" for the node, 131,072 tokens.
    return model_memory_fit(
        GQA_70_6B, h100, 131_072, batch=0, tensor_parallel=8, reserve=20 * GB / 8, capacity_basis=basis
    )


def test_napkin_math_10_5_cache_per_request_42_9_gb():
    # §10.7.1: "131,072 tokens x 0.33 MB/token ~ 42.9 GB/request" (the 42.9 comes from the unrounded 327,680 B;
    # 131,072 x 0.33 MB would be 43.25 GB: catalog ambiguity A3).
    fit = napkin_10_5_fit()
    assert round((fit.kv_per_request * fit.tensor_parallel).m_as("GB"), 1) == 42.9


def test_napkin_math_10_5_available_526_gb_and_max_batch_12():
    # §10.7.1: 687.2 GB (Total) - 141.2 GB (Weights) - 20 GB (System) = 526.0 GB; floor(526.0 / 42.9) = 12.
    # The estimator keeps the registered byte capacity (8 x 80 GiB, §10.7.1), not the 640 GB of the problem.
    fit = napkin_10_5_fit()
    devices = fit.tensor_parallel
    assert round((fit.capacity * devices).m_as("GB"), 1) == 687.2
    assert round((fit.weights * devices).m_as("GB"), 1) == 141.2
    assert round((fit.available * devices).m_as("GB"), 1) == 526.0
    assert fit.max_batch == 12  # §10.7.1: "A dozen 128K-token requests exhaust the whole KV budget."


def test_napkin_math_10_5_on_the_640_gb_nameplate_gives_11():
    # Catalog ambiguity A2: the problem's "640 GB total HBM" (§10.7.1) would give 11, not the printed 12; the
    # printed 12 needs the registered bytes. Both bases are available; the test pins which gives which.
    assert napkin_10_5_fit("nameplate").max_batch == 11


def test_napkin_math_10_5_flat_node_budget_gives_the_same_12():
    # The same estimate on node totals, with the binding max_batch signature.
    assert max_batch(8 * Q_(80, "GiB"), Q_(141.2, "GB"), GQA_TOKEN, 131_072, 20 * GB) == 12


def test_napkin_math_10_5_from_the_registry():
    # The same estimate from registry ids: chapter-70b-gqa (70.6B, 8 KV heads) on h100-sxm, registered bytes.
    fit = model_memory_fit("chapter-70b-gqa", "h100-sxm", 131_072, tensor_parallel=8, reserve=20 * GB / 8)
    assert fit.max_batch == 12
    nameplate = model_memory_fit(
        "chapter-70b-gqa", "h100-sxm", 131_072, tensor_parallel=8, reserve=20 * GB / 8, capacity_basis="nameplate"
    )
    assert nameplate.max_batch == 11


def test_figure_9_and_a100_residency_from_the_registry():
    # §10.7.1 (80 GB H100 nameplate) and §10.9.4 (80 GB A100 nameplate), with registry ids.
    h100 = model_memory_fit(
        "chapter-70b-gqa", "h100-sxm", 17_000, batch=8, weight_bits="int4", capacity_basis="nameplate"
    )
    assert h100.fits and h100.max_context // 1000 == 17
    a100 = model_memory_fit("chapter-70b-mha", "a100-sxm-80gb", 1000, weight_bits="int4", capacity_basis="nameplate")
    assert a100.max_batch == 17
    with pytest.raises(InputError, match="exceeds the context limit"):
        model_memory_fit("llama-2-70b", "h100-sxm", 8192)


# ------------------------------------------------------------------ section 10.7.5: KV compression and layout


def test_mha_cache_10_7_gb_per_request_and_85_9_gb_for_eight():
    # §10.7.5: 2 x 80 x 64 x 128 x 4096 x 2 ~ 10.7 GB; §10.7.5: a batch of 8 needs 85.9 GB.
    per_token = kv_bytes_per_token(80, 64, 128, FP16)
    assert round(kv_cache_bytes(1, 4096, per_token).m_as("GB"), 1) == 10.7
    assert round(kv_cache_bytes(8, 4096, per_token).m_as("GB"), 1) == 85.9


def test_int4_kv_cache_2_7_gb_a_4x_reduction():
    # §10.7.5: INT4 cache payload "approximately 2.7 GB per request, a 4x reduction".
    int4 = kv_cache_bytes(1, 4096, model_kv_bytes_per_token(MHA_70B, "int4"))
    fp16 = kv_cache_bytes(1, 4096, model_kv_bytes_per_token(MHA_70B, "fp16"))
    assert round(int4.m_as("GB"), 1) == 2.7
    assert fp16 / int4 == 4


def test_gqa_cache_1_3_gb_an_8x_reduction():
    # §10.7.5/§10.7.5: 2 x 80 x 8 x 128 x 4096 x 2 ~ 1.3 GB (FP16); 64 -> 8 KV heads is an 8x reduction.
    gqa = kv_cache_bytes(1, 4096, model_kv_bytes_per_token(GQA_70B))
    assert round(gqa.m_as("GB"), 1) == 1.3
    assert kv_cache_bytes(1, 4096, model_kv_bytes_per_token(MHA_70B)) / gqa == 8


# ------------------------------------------------------------------ Napkin Math 10.7: the precision dividend


def test_napkin_math_10_7_mha_before_46():
    # §10.7.5 (80 GB decimal per GPU, §10.7.5): 17.5 GB/GPU; 80 - 17.5 = 62.5 GB; 10.7 / 8 ~ 1.34 GB/GPU; 46.
    fit = compare_precisions(MHA_70B, 80 * GB, 4096, tensor_parallel=8).before
    assert round(fit.weights.m_as("GB"), 1) == 17.5
    assert round(fit.available.m_as("GB"), 1) == 62.5
    assert round(fit.kv_per_request.m_as("GB"), 2) == 1.34
    assert fit.max_batch == 46


def test_napkin_math_10_7_mha_after_112():
    # §10.7.5: 17.5 x 4/16 = 4.38 GB/GPU; 80 - 4.38 = 75.62 GB; 5.4 / 8 ~ 0.67 GB/GPU; floor -> 112.
    fit = compare_precisions(MHA_70B, 80 * GB, 4096, tensor_parallel=8).after
    assert round(fit.weights.m_as("GB"), 2) == 4.38
    assert round(fit.available.m_as("GB"), 2) == 75.62
    assert round((fit.kv_per_request * 8).m_as("GB"), 1) == 5.4
    assert round(fit.kv_per_request.m_as("GB"), 2) == 0.67
    assert fit.max_batch == 112


def test_napkin_math_10_7_gqa_372_to_901_a_2_4x_dividend():
    # §10.7.5: GQA at FP16 1.34 GB per request, 0.17 GB/GPU -> about 372; INT8 0.08 GB/GPU -> about 901;
    # "a dividend of 2.4x". 372 and 901 follow from the unrounded per-GPU cache (62.5 / 0.17 would give 367;
    # catalog ambiguity A5), which is what the calculator uses.
    dividend = compare_precisions(GQA_70B, 80 * GB, 4096, tensor_parallel=8)
    assert round((dividend.before.kv_per_request * 8).m_as("GB"), 2) == 1.34
    assert round(dividend.before.kv_per_request.m_as("GB"), 2) == 0.17
    assert round(dividend.after.kv_per_request.m_as("GB"), 2) == 0.08
    assert (dividend.before.max_batch, dividend.after.max_batch) == (372, 901)
    assert round(dividend.batch_ratio, 1) == 2.4


def test_napkin_math_10_7_same_dividend_for_both_layouts_and_mha_an_eighth():
    # §10.7.5: "The two layouts yield the same multiplicative dividend" and "the MHA replica admits roughly an
    # eighth as many requests". The continuous dividend is identical; the floored counts agree at one decimal.
    mha = compare_precisions(MHA_70B, 80 * GB, 4096, tensor_parallel=8)
    gqa = compare_precisions(GQA_70B, 80 * GB, 4096, tensor_parallel=8)
    assert mha.dividend == pytest.approx(gqa.dividend)
    assert round(mha.batch_ratio, 1) == round(gqa.batch_ratio, 1) == 2.4
    assert round(gqa.before.max_batch / mha.before.max_batch) == 8
    assert round(gqa.after.max_batch / mha.after.max_batch) == 8


def test_self_check_precision_dividend_1_21_times_2():
    # Self-check §10.7.9 / answer §10.18: INT4 weights ~4.4 GB/GPU; KV budget 62.5 -> ~75.6 GB/GPU, a factor ~1.21;
    # halving per-request cache doubles it again: ~2.4.
    after = compare_precisions(GQA_70B, 80 * GB, 4096, tensor_parallel=8).after
    assert round(after.weights.m_as("GB"), 1) == 4.4
    assert round(after.available.m_as("GB"), 1) == 75.6
    assert round(precision_dividend(80 * GB, 17.5 * GB, 0 * GB, 16, 4, 16, 16), 2) == 1.21
    assert round(precision_dividend(80 * GB, 17.5 * GB, 0 * GB, 16, 4, 16, 8), 1) == 2.4


def test_precision_dividend_matches_the_ratio_of_continuous_batches():
    d = compare_precisions(GQA_70B, Q_(80, "GiB"), 8192, before=("bf16", "fp16"), after=("fp8", "fp8"),
                           tensor_parallel=4, reserve=3 * GB)  # fmt: skip
    continuous = [(f.available / f.kv_per_request).m_as("") for f in (d.before, d.after)]
    assert d.dividend == pytest.approx(continuous[1] / continuous[0])


# ------------------------------------------------------------------ fragmentation and paging (10.7.2-10.7.3)


def test_output_reservation_97_6_percent_unused():
    # §10.7.2: a 4,096-token output reservation whose average output uses 100 tokens: "97.6 percent ... unused".
    waste = reservation_vs_paging(pool_tokens=1_000_000, reserved_tokens=4096, used_tokens=100).reservation_waste
    assert round(100 * waste, 1) == 97.6


def test_hotel_analogy_10_guests_90_idle_lockers_100_on_demand():
    # Systems Perspective 10.1 (§10.7.3): 100 lockers, up to 10 suitcases each, 1 each: 10 guests under
    # maximum-size reservation with "the other 90" lockers reserved but unused; 100 guests on demand.
    hotel = reservation_vs_paging(100, 10, 1)
    assert hotel.reserved_sequences == 10
    assert hotel.idle_reserved_tokens == 90
    assert hotel.paged_sequences == 100


def test_eight_slot_example_external_fragmentation():
    # §10.7.2 / Figure 10(b): "Total free slots = 4, largest block = 2"; Seq E needs 4 contiguous slots and
    # cannot be admitted; Figure 10(c): paged allocation admits it.
    later = slot_map("[ ][ ][C][C][ ][ ][D][D]")
    assert (later.free, later.largest_free_run) == (4, 2)
    assert not later.admits(4)
    assert later.admits(4, paged=True)
    assert later.external_fragmentation == 0.5


def test_eight_slot_example_internal_fragmentation_at_time_0():
    # §10.7.2: [A][A][a][a][B][B][B][b], lowercase = reserved but unused: 3 of the 8 reserved slots idle.
    start = slot_map("[A][A][a][a][B][B][B][b]")
    assert (start.used, start.reserved_unused, start.free) == (5, 3, 0)
    assert start.internal_waste == 3 / 8
    assert not start.admits(1) and not start.admits(1, paged=True)


def test_paged_blocks_bound_waste_to_the_last_block():
    # Definition 10.3 (§10.7.3): waste is bounded by the unused portion of the final block; 16-token blocks
    # (§10.7.3). 100 tokens -> 7 blocks, 12 tokens unused.
    pages = paged_allocation(100, 16)
    assert (pages.blocks, pages.waste_tokens) == (7, 12)
    many = paged_allocation(np.arange(1, 2000), 16)
    assert np.all((many.waste_tokens >= 0) & (many.waste_tokens <= 15))


def test_paged_max_batch_rounds_each_sequence_up_to_whole_blocks():
    exact = max_batch(80 * GB, 35 * GB, GQA_TOKEN, 1000)
    paged = max_batch(80 * GB, 35 * GB, GQA_TOKEN, 1000, block_size=16)  # 1000 -> 1008 tokens held
    assert paged == int(45e9 // (1008 * 327_680)) and paged <= exact


def test_pool_admission_of_variable_lengths_reserved_vs_paged():
    # Section 10.7.2-10.7.3: contiguous allocation reserves the maximum length per sequence; paging holds only the
    # blocks in use. Same queue of requests whose outputs stop at 100 of 4,096 permitted tokens (§10.7.2).
    pool = 64 * 4096
    queue = np.full(5000, 100)
    assert pool_admission(pool, np.full(1000, 4096)) == 64
    assert pool_admission(pool, queue, block_size=16) == pool // 112
    assert pool_admission(0, queue) == 0


def test_block_tables_share_the_prefix_blocks():
    # §10.7.4 (Figure 11): three page tables sharing physical blocks 0-5.
    logical, physical = shared_block_usage(
        [[0, 1, 2, 3, 4, 5, 10, 11], [0, 1, 2, 3, 4, 5, 12, 13, 14], [0, 1, 2, 3, 4, 5, 15]]
    )
    assert (logical, physical) == (24, 12)


# ------------------------------------------------------------------ Napkin Math 10.6: prefix caching


def test_napkin_math_10_6_without_prefix_caching_6_6_tb():
    # §10.7.4: 2,000 + 500 = 2,500 tokens per user; x 1000 users x 2 x 80 x 8192 x 2 = 6.6 TB.
    memory = prefix_cache_memory(1000, 2000, 500, MHA_TOKEN)
    assert memory.tokens_without / 1000 == 2500
    assert round(memory.bytes_without.m_as("TB"), 1) == 6.6
    assert memory.bytes_without.m_as("TB") == pytest.approx(6.5536)  # answer §10.18 prints 6.5536 TB


def test_napkin_math_10_6_with_prefix_caching_1_3_tb_79_9_percent():
    # §10.7.4: (2000 x 1) + (500 x 1000) = 502,000 tokens; 1.3 TB; "79.9 percent memory reduction",
    # "a roughly 5x capacity ratio"; answer §10.18: 1.316 TB and 79.92%; §10.7.4 "roughly four-fifths".
    memory = prefix_cache_memory(1000, 2000, 500, MHA_TOKEN)
    assert memory.tokens_with == 502_000
    assert round(memory.bytes_with.m_as("TB"), 1) == 1.3
    assert round(memory.bytes_with.m_as("TB"), 3) == 1.316
    assert round(100 * memory.reduction, 1) == 79.9
    assert round(100 * memory.reduction, 2) == 79.92
    assert round(memory.capacity_ratio) == 5
    assert round(memory.reduction * 5) == 4


@pytest.mark.parametrize(
    "hit_rates, prefix, unique, users, band",
    [
        # Table 10 (§10.7.4) gives hit rates and savings but no lengths; the lengths here are assumptions
        # (chatbot: Napkin Math 10.6's; document QA: a 6,000-token document and 2,000 private tokens; general
        # API: 1,500 shared and 500 private), chosen to show the bands follow from the hit rate and prefix share.
        ((0.95, 1.0), 2000, 500, 1000, (0.70, 0.80)),
        ((0.80, 0.90), 6000, 2000, 100, (0.50, 0.70)),
        ((0.20, 0.40), 1500, 500, 100, (0.10, 0.30)),
    ],
)
def test_table_10_savings_bands_from_hit_rates(hit_rates, prefix, unique, users, band):
    for rate in hit_rates:
        saving = prefix_cache_memory(users, prefix, unique, GQA_TOKEN, hit_rate=rate).reduction
        assert band[0] <= saving <= band[1]


def test_prefix_sharing_copies_a_partial_last_block_on_write():
    # Section 10.7.4: a prefix ending partway through a block is copied on write. With 16-token
    # blocks, 2,000 = 125 whole blocks, so only whole blocks are shared; with 2,008 the 8-token tail is private.
    assert prefix_cache_tokens(10, 2000, 500, 1, 16) == 2000 + 10 * 512
    assert prefix_cache_tokens(10, 2008, 500, 1, 16) == 2000 + 10 * 512
    assert prefix_cache_tokens(10, 2000, 500, 0, 16) == 10 * 2512


# ------------------------------------------------------------------ 10.7.8 budget and Example 10.4 hierarchy


def test_kv_budget_keeps_10_percent_headroom():
    # §10.7.8: KV pool = 0.9 x (Total - Weights - Activations - Overhead); max concurrent = pool /
    # (avg length x bytes per token). Applied to Napkin Math 10.5's node it admits 11, not 12 (catalog W-B03).
    budget = kv_budget(8 * Q_(80, "GiB"), Q_(141.2, "GB"), GQA_TOKEN, 131_072, overhead=20 * GB)
    assert round(budget.pool.m_as("GB"), 1) == round(0.9 * 525.995, 1)
    assert budget.max_concurrent == 11


def test_kv_budget_that_does_not_fit_says_how_much_is_missing():
    budget = kv_budget(80 * GB, 140 * GB, GQA_TOKEN, 1000)
    assert not budget.fits and budget.max_concurrent == 0
    assert budget.missing.m_as("GB") == pytest.approx(60)


def test_example_10_4_hierarchy_retains_500_with_50_active():
    # Example 10.4 (§10.7.8): HBM holds 50 active sequences; paging to CPU DRAM and NVMe raises retained
    # capacity from 50 to 500 while the active set stays 50. The chapter gives no byte sizes: here 1.6 GB per
    # sequence (80 GB / 50) and lower tiers sized for 300 + 150 sequences are the scenario's assumption.
    per_sequence = 80 * GB / 50
    retention = tiered_retention(
        50,
        per_sequence,
        [MemoryTier("dram", 300 * per_sequence, Q_(25, "GB/s"), Q_(1, "ms")), MemoryTier("nvme", 150 * per_sequence)],
    )
    assert retention.active == 50
    assert retention.retained == 500
    assert retention.retained / retention.active == 10
    assert retention.restore_time["dram"].m_as("ms") == pytest.approx(1 + 64)


# ------------------------------------------------------------------ LoRA (10.7.9)


def test_lora_adds_r_times_din_plus_dout_parameters():
    # §10.7.9: each adapted projection adds r (d_in + d_out) parameters instead of d_in x d_out. For an 8192 x
    # 8192 projection at rank 16 (typical ranks 8, 16, 64; §10.7.9): 262,144 vs 67,108,864, 0.39%.
    assert lora_parameters(8192, 8192, 16) == 262_144
    assert round(100 * lora_parameters(8192, 8192, 16) / 8192**2, 2) == 0.39


def test_lora_adapter_set_and_resident_budget():
    llama8b = model("llama-3.1-8b", 8.03e9, 32, 32, 8, 128, "gqa", hidden_size=4096, intermediate_size=14336)
    # q: 4096->4096, k/v: 4096->1024, o: 4096->4096 per layer, rank 16
    per_layer = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)
    assert lora_adapter_parameters(llama8b, 16) == 32 * per_layer
    all_linear = lora_adapter_parameters(llama8b, 16, ("q", "k", "v", "o", "gate", "up", "down"))
    assert all_linear == 32 * (per_layer + 16 * 3 * (4096 + 14336))
    resident = lora_adapter_bytes(llama8b, 16, adapters=np.array([1, 100]))
    assert resident[1] == 100 * resident[0] == weight_bytes(100 * 32 * per_layer, 16)


def test_ten_thousand_full_copies_versus_adapters():
    # §10.7.9: a separate 140 GB copy per tenant for 10,000 tenants is "prohibitive": 1.4 PB.
    assert (10_000 * weight_bytes(70e9, 16)).m_as("PB") == pytest.approx(1.4)


def test_lora_rejects_projections_the_registry_cannot_size():
    with pytest.raises(InputError, match="cannot size projection 'q'"):
        lora_adapter_parameters(PUBLISHED["deepseek-v3"][0], 16)
    with pytest.raises(InputError, match="unknown projection"):
        lora_adapter_parameters(GQA_70B, 16, ("qkv",))


# ------------------------------------------------------------------ weights and quantization (10.9)


def test_70b_fp16_needs_two_80_gb_gpus_int4_one():
    # §10.9: 140 GB of FP16 weights force "at least two 80 GB GPUs"; INT4 is a 35 GB payload; ideal 4x.
    fp16, int4 = model_weight_bytes(GQA_70B, "fp16"), model_weight_bytes(GQA_70B, "int4")
    assert fp16.m_as("GB") == pytest.approx(140)
    assert int4.m_as("GB") == pytest.approx(35)
    assert min_devices_for_weights(fp16, 80 * GB) == 2
    assert min_devices_for_weights(int4, 80 * GB) == 1  # §10.9: "a two-GPU model into a one-GPU candidate"
    assert fp16 / int4 == 4
    # §10.9: quantization decreases the footprint "by 2-4x" (INT8 and INT4).
    assert fp16 / model_weight_bytes(GQA_70B, "int8") == 2


def test_175b_int4_payload_87_5_gb_exceeds_one_h100():
    # §10.9.5: a 175B model "still needs about 87.5 GB for its 4-bit weight payload alone, more than one 80 GB
    # H100 holds".
    payload = weight_bytes(175e9, 4)
    assert round(payload.m_as("GB"), 1) == 87.5
    assert min_devices_for_weights(payload, 80 * GB) == 2


def test_a100_residency_17_sequences_of_1k_tokens():
    # §10.9.4 (decimal 80 GB A100): 4-bit 70B ~35 GB leaves 45 GB; FP16 KV "about 2.6 GB per 1K-token sequence"
    # (MHA baseline) supports "about 17". 2.6 and 17 reproduce with 1K = 1,000 tokens (1,024 gives 2.7 GB and 16;
    # catalog ambiguity A8), the reading pinned here.
    fit = model_memory_fit(MHA_70B, 80 * GB, 1000, batch=0, weight_bits="int4")
    assert round(fit.available.m_as("GB")) == 45
    assert round(fit.kv_per_request.m_as("GB"), 1) == 2.6
    assert fit.max_batch == 17
    fp16 = model_memory_fit(MHA_70B, 80 * GB, 1000, batch=0)  # "would not fit on one A100 at all"
    assert not fp16.fits and fp16.missing.m_as("GB") == pytest.approx(60) and fp16.max_batch == 0


def test_block_metadata_int4_group_64_fp16_scale():
    # Definition 10.6 significance (§10.9.1): 16/64 = 0.25 bits per weight, effective 4.25 bits, 6.25 percent of
    # the INT4 payload, "about 1.6 percent" of the FP16 size, a 4x memory reduction.
    q = quantization_overhead("int4", 64, "fp16")
    assert q.metadata_bits == 0.25 and q.effective_bits == 4.25
    assert round(100 * q.overhead_vs_payload, 2) == 6.25
    assert round(100 * q.overhead_vs_baseline, 1) == 1.6
    assert q.payload_compression == 4


def test_block_metadata_smaller_blocks_cost_more():
    # §10.9.1: G = 32 doubles the metadata of G = 64; G = 16 adds 1 bit per weight, 25 percent of the INT4
    # payload, 6.25 percent of FP16. Answer §10.18: "an effective 5.0 bits per weight".
    assert quantization_overhead("int4", 32).metadata_bits == 2 * quantization_overhead("int4", 64).metadata_bits
    q16 = quantization_overhead("int4", 16)
    assert q16.metadata_bits == 1.0 and q16.effective_bits == 5.0
    assert round(100 * q16.overhead_vs_payload) == 25
    assert round(100 * q16.overhead_vs_baseline, 2) == 6.25


def test_block_metadata_int8_fp32_scale_per_128():
    # §10.9.1: INT8 with one FP32 scale per 128 weights adds 32/128 = 0.25 bits, "about 3 percent" of payload.
    q = quantization_overhead("int8", 128, "fp32")
    assert q.metadata_bits == 0.25
    assert round(100 * q.overhead_vs_payload) == 3


def test_effective_bits_feed_weight_bytes():
    bits = effective_bits_per_weight(4, 64, 16)
    assert model_weight_bytes(GQA_70B, bits).m_as("GB") == pytest.approx(70e9 * 4.25 / 8 / 1e9)
    assert effective_bits_per_weight(4, 32, 16, 4) == 4.625  # affine: FP16 scale + 4-bit zero point per 32


# Figure 15's eight weights are not printed (catalog W-B28). These are constructed to meet every printed fact:
# one outlier 58.7; the first block's largest magnitude 0.2096 gives its scale 0.00165 (0.2096 / 127); exactly one
# small weight (0.35, in the outlier's block) is at least half the per-tensor step 0.462, so it rounds to one.
FIGURE_15 = np.array([0.2096, -0.15, 0.07, 0.03, 58.7, 0.35, -0.12, 0.05])


def test_figure_15_per_tensor_scale_crushes_six_of_seven_small_weights():
    # §10.9.1: per-tensor scale ~0.462 "forces six of the seven small weights to round to zero" and "the
    # seventh rounds to one". The scale is the symmetric 58.7 / 127 (the affine /255 of Definition 10.6 would give
    # 0.230; catalog ambiguity A9).
    q = quantize(FIGURE_15, bits=8)
    assert round(float(q.scales[0]), 3) == 0.462
    small = np.abs(FIGURE_15) < 1
    assert np.sum(q.codes[small] == 0) == 6
    assert np.sum(np.abs(q.codes[small]) == 1) == 1


def test_figure_15_block_wise_scales_keep_the_first_block():
    # §10.9.1: four-element blocks confine the coarse scale to the second block; the first block's scale is
    # ~0.00165 and "preserves full INT8 resolution"; small weights in the outlier's block are still crushed.
    q = quantize(FIGURE_15, bits=8, block_size=4)
    assert round(float(q.scales[0]), 5) == 0.00165
    assert round(float(q.scales[1]), 3) == 0.462
    first = slice(0, 4)
    assert np.max(np.abs(q.dequantized[first] - FIGURE_15[first])) <= q.scales[0] / 2
    assert q.zeroed == 2  # -0.12 and 0.05, in the outlier's block
    assert q.rmse < quantize(FIGURE_15, bits=8).rmse


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=40),
    bits=st.integers(2, 8),
    block=st.integers(1, 16),
    symmetric=st.booleans(),
)
def test_quantization_error_is_at_most_half_a_step(values, bits, block, symmetric):
    q = quantize(values, bits=bits, block_size=block, symmetric=symmetric)
    step = np.repeat(q.scales, block)[: len(values)]
    assert np.all(np.abs(q.dequantized - q.values) <= step / 2 * (1 + 1e-9) + 1e-12)


# ------------------------------------------------------------------ tensor parallelism


def test_kv_heads_shard_then_replicate_past_the_kv_head_count():
    degrees = np.array([1, 2, 4, 8, 16, 32, 64])
    per_device = kv_bytes_per_token_per_device(GQA_70B, "fp16", degrees).m_as("B/token")
    assert list(per_device) == [327_680 / min(t, 8) for t in degrees]
    assert list(tensor_parallel_valid(GQA_70B, np.array([3, 5, 6, 12, 24]))) == [False] * 5
    # MLA: the latent is on every rank
    deepseek = PUBLISHED["deepseek-v3"][0]
    assert kv_bytes_per_token_per_device(deepseek, "fp16", 8) == model_kv_bytes_per_token(deepseek)
    # MQA: one KV head, replicated on every rank
    falcon = PUBLISHED["falcon-7b"][0]
    assert tensor_parallel_valid(falcon, 71) and not tensor_parallel_valid(falcon, 2)


def test_heads_not_dividing_the_tensor_parallel_degree_are_an_error():
    with pytest.raises(InputError, match="tensor_parallel 3 does not split model 'chapter-70b-gqa'"):
        model_memory_fit(GQA_70B, 80 * GB, 4096, tensor_parallel=3)
    with pytest.raises(InputError, match="tensor_parallel 12"):
        device_share(GQA_70B, np.array([4, 12]))


def test_moe_weights_use_total_parameters():
    mixtral = PUBLISHED["mixtral-8x7b"][0]
    assert model_weight_bytes(mixtral).m_as("GB") == pytest.approx(46.7e9 * 2 / 1e9)


def test_vectorized_model_max_batch_matches_scalar_fits():
    capacities = Q_(np.array([40, 80, 141]), "GB")[:, None, None]
    degrees = np.array([1, 2, 4, 8])[None, :, None]
    contexts = np.array([1024, 8192, 131_072])[None, None, :]
    grid = model_max_batch(GQA_70_6B, capacities, contexts, tensor_parallel=degrees)
    assert grid.shape == (3, 4, 3) and grid.dtype == np.int64 and grid.min() >= 0
    for i, j, k in [(0, 0, 0), (1, 3, 2), (2, 2, 1), (1, 1, 0)]:
        fit = model_memory_fit(GQA_70_6B, capacities[i, 0, 0], contexts[0, 0, k], tensor_parallel=degrees[0, j, 0])
        assert grid[i, j, k] == fit.max_batch


# ------------------------------------------------------------------ properties


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.floats(1e9, 2e12),
    extra=st.floats(0, 1e12),
    weights=st.floats(0, 1e12),
    per_token=st.floats(1e3, 5e6),
    context=st.integers(1, 1_000_000),
    reserve=st.floats(0, 1e11),
    block=st.sampled_from([1, 16, 32]),
)
def test_more_memory_never_lowers_max_batch(capacity, extra, weights, per_token, context, reserve, block):
    small = max_batch_numeric(capacity, weights, per_token, context, reserve, block)
    large = max_batch_numeric(capacity + extra, weights, per_token, context, reserve, block)
    assert 0 <= small <= large
    # the max batch fits and one more does not
    held = -(-context // block) * block
    assert small * held * per_token <= max(capacity - weights - reserve, 0) * (1 + 1e-9)
    assert (small + 1) * held * per_token > (capacity - weights - reserve) * (1 - 1e-9)


@settings(max_examples=100, deadline=None)
@given(batch=st.integers(1, 512), per_token=st.floats(1e3, 5e6), weights=st.floats(0, 7e10))
def test_max_context_and_max_batch_are_inverse(batch, per_token, weights):
    capacity = Q_(80, "GB")
    context = max_context(capacity, Q_(weights, "B"), Q_(per_token, "B/token"), batch)
    if context >= 1:  # the longest context holds `batch` sequences; one more token per sequence does not
        assert max_batch(capacity, Q_(weights, "B"), Q_(per_token, "B/token"), context) >= batch
        assert max_batch(capacity, Q_(weights, "B"), Q_(per_token, "B/token"), context + 1) < batch


def test_footprint_solves_for_batch_and_context():
    batch = memory_footprint.solve_for(
        "batch", memory_footprint=80 * GB, weights=35 * GB, context=17_166, kv_per_token=GQA_TOKEN, reserve=0 * GB
    )
    assert batch == pytest.approx(45e9 / (17_166 * 327_680))
    context = memory_footprint.solve_for(
        "context", memory_footprint=80 * GB, weights=35 * GB, batch=8, kv_per_token=GQA_TOKEN, reserve=0 * GB
    )
    assert int(context) == max_context(80 * GB, 35 * GB, GQA_TOKEN, 8)


@settings(max_examples=100, deadline=None)
@given(
    users=st.integers(1, 5000),
    prefix=st.integers(0, 8000),
    unique=st.integers(1, 4000),
    rate=st.floats(0, 1),
    block=st.sampled_from([1, 16]),
)
def test_prefix_sharing_never_costs_memory(users, prefix, unique, rate, block):
    memory = prefix_cache_memory(users, prefix, unique, GQA_TOKEN, rate, block)
    assert memory.tokens_with <= memory.tokens_without * (1 + 1e-12)
    assert 0 <= memory.reduction < 1


# ------------------------------------------------------------------ bad input


def test_bad_input_is_a_clear_error_never_a_negative_batch():
    assert max_batch(80 * GB, 200 * GB, GQA_TOKEN, 4096) == 0
    with pytest.raises(InputError, match="argument 'capacity' must be > 0"):
        max_batch(0 * GB, 35 * GB, GQA_TOKEN, 4096)
    with pytest.raises(InputError, match="argument 'weights' must be >= 0"):
        max_batch(80 * GB, -1 * GB, GQA_TOKEN, 4096)
    with pytest.raises(InputError, match="argument 'context' must be an integer >= 1"):
        max_batch(80 * GB, 35 * GB, GQA_TOKEN, 0)
    with pytest.raises(InputError, match="argument 'kv_per_token' must be > 0"):
        max_batch(80 * GB, 35 * GB, Q_(0, "B/token"), 4096)
    with pytest.raises(InputError, match="contains NaN"):
        max_batch(Q_(np.nan, "GB"), 35 * GB, GQA_TOKEN, 4096)
    with pytest.raises(UnitsError, match="argument 'capacity' needs dimension"):
        max_batch(80, 35 * GB, GQA_TOKEN, 4096)
    with pytest.raises(InputError, match=r"exceeds the context limit of model 'llama-3\.1-70b' \(131072 tokens\)"):
        model_memory_fit(GQA_70_6B, 80 * GB, 200_000)
    with pytest.raises(InputError, match="used_tokens"):
        reservation_vs_paging(100, 10, 11)
    with pytest.raises(InputError, match="must be one of"):
        model_kv_bytes_per_token(GQA_70B, "fp12")
    with pytest.raises(InputError, match="not a transformer"):
        model_kv_bytes_per_token(Model(id="dlrm", name="DLRM", provenance="user", kind="recommendation",
                                       sources=[{"source": "u", "fields": ["parameters"]}], parameters=1e9))  # fmt: skip


def test_a_configuration_that_does_not_fit_reports_what_is_missing():
    fit = model_memory_fit(GQA_70B, 80 * GB, 131_072, batch=4, weight_bits="int4")
    assert not fit.fits
    assert fit.missing.m_as("B") == pytest.approx(35e9 + 4 * 131_072 * 327_680 - 80e9)
    assert fit.free.m_as("B") == 0 and fit.max_batch == 1
    assert "fits=False" in repr(fit) and fit.to_dict()["max_batch"] == 1


def test_min_tensor_parallel_is_the_smallest_valid_degree_that_holds_the_batch():
    # Napkin Math 10.7's GQA baseline on 80 GB: max batch 14 at TP 2, 134 at TP 4, 372 at TP 8 (FP16, 4,096 tokens).
    assert min_tensor_parallel(GQA_70B, 80 * GB, 4096, batch=14) == 2
    assert min_tensor_parallel(GQA_70B, 80 * GB, 4096, batch=15) == 4
    assert min_tensor_parallel(GQA_70B, 80 * GB, 4096, batch=372) == 8
    # 3 and 6 do not split 64 heads / 8 KV heads; 373 sequences need more than TP 8 (replicated KV heads at 16).
    assert min_tensor_parallel(GQA_70B, 80 * GB, 4096, batch=100, degrees=(3, 6, 4)) == 4
    assert min_tensor_parallel(GQA_70B, 80 * GB, 4096, batch=373, degrees=(1, 2, 4, 8)) == 0
    assert min_tensor_parallel(GQA_70B, 80 * GB, 4096, batch=1, degrees=(3, 6)) == 0


def test_kv_dtype_is_renamed_kv_precision_and_the_old_name_still_works():
    from calculator.errors import InputError
    from calculator.memory import model_kv_bytes_per_token

    new = model_kv_bytes_per_token("llama-3.1-70b", kv_precision="fp8")
    with pytest.warns(DeprecationWarning, match="'kv_dtype' is renamed 'kv_precision'"):
        old = model_kv_bytes_per_token("llama-3.1-70b", kv_dtype="fp8")
    assert old == new
    with pytest.raises(InputError, match="give 'kv_precision' only"):
        model_kv_bytes_per_token("llama-3.1-70b", kv_dtype="fp8", kv_precision="fp8")


def test_attention_ranks_keep_a_copy_of_the_dense_weights_and_spread_the_experts():
    # Issue 23: with eight attention ranks of one GPU, a GPU holds all attention/dense weights and an eighth of
    # the routed experts; the replica holds eight ranks' sequences.
    from calculator import load_registry
    from calculator.memory import device_share, model_max_batch, model_weight_bytes, routed_expert_parameters

    reg = load_registry()
    model = reg.model("deepseek-v3")
    routed = routed_expert_parameters(model)
    assert 0.9 * model.parameters < routed < model.parameters  # the experts are most of the weights
    share = device_share(model, 1, "fp8", "fp8", data_parallel=8)
    total = model_weight_bytes(model, "fp8")
    assert share.weights.m_as("B") == pytest.approx(total.m_as("B") * (1 - routed / model.parameters * 7 / 8))
    ranks = model_max_batch(model, "h200-sxm", 8192, "fp8", "fp16", 1, data_parallel=8)
    assert ranks % 8 == 0 and ranks > 5 * model_max_batch(model, "h200-sxm", 8192, "fp8", "fp16", 8)
    with pytest.raises(InputError, match="a dense model's data-parallel ranks are replicas"):
        device_share("llama-3.1-70b", 2, "fp8", "fp8", data_parallel=2)
