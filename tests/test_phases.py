"""Prefill and decode (section 10.8) and quantization ceilings (10.9.3): worked numbers, properties, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError
from calculator.errors import RegistryError
from calculator.phases import (
    accelerator_ridge_point,
    attention_flops_per_pair,
    chunked_prefill_tradeoff,
    disaggregated_pool_sizes,
    hybrid_iteration_time,
    kv_handoff_time,
    model_kv_handoff_time,
    preemption_costs,
    prefill_flops,
    prefill_iterations,
    projection_arithmetic_intensity,
    quantization_ceilings,
    ridge_point,
    roofline_decode_step_time,
    roofline_prefill_time,
    roofline_time,
    schedule_iteration,
    simulate_chunked_prefill,
)
from calculator.registry import Accelerator, Interconnect, Model

# H100 SXM: 3.35 TB/s (§10.2, §10.6.2); dense tensor throughput from the NVIDIA H100 datasheet (without sparsity):
# 989 TFLOP/s FP16/BF16, 1,979 TFLOP/s FP8 and 1,979 TOPS INT8.
H100 = Accelerator(
    id="h100-sxm", name="H100 SXM", provenance="published", vendor="NVIDIA",
    sources=[{"source": "datasheet", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    memory_bandwidth="3.35 TB/s",
    dense_throughput={"fp16": "989 TFLOP/s", "bf16": "989 TFLOP/s", "fp8": "1979 TFLOP/s", "int8": "1979 TFLOP/s"},
    tdp="700 W",
)  # fmt: skip
GQA_70B = Model(
    id="chapter-70b-gqa", name="70B GQA", provenance="chapter_scenario",
    sources=[{"source": "chapter", "fields": ["layers"]}], parameters=70e9, layers=80, hidden_size=8192,
    attention_heads=64, kv_heads=8, head_dim=128, attention="gqa", max_context=131_072,
)  # fmt: skip
DEEPSEEK_V3 = Model(
    id="deepseek-v3", name="DeepSeek-V3", provenance="published", sources=[{"source": "hf", "fields": ["layers"]}],
    parameters=671e9, active_parameters=37e9, layers=61, attention_heads=128, kv_heads=128, head_dim=128,
    attention="mla", kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
    experts=256, experts_per_token=8,
)  # fmt: skip


# ------------------------------------------------------------------ 10.8.1 the phase asymmetry


def test_prefill_intensity_1024_flops_per_byte_past_the_h100_ridge():
    # §10.8.1: a 1,024-token prompt "performs about 1,024 FLOPs per byte of FP16 weights, well past an H100's
    # FP16 ridge". The ridge is not printed in range (catalog A17); from 989 TFLOP/s and 3.35 TB/s it is ~295.
    intensity = projection_arithmetic_intensity(1024, Q_(2, "B"))
    assert intensity.m_as("FLOP/B") == 1024
    ridge = accelerator_ridge_point(H100, "fp16")
    assert round(ridge.m_as("FLOP/B")) == 295
    assert intensity > 3 * ridge


def test_decode_intensity_about_1_at_batch_one_and_below_the_ridge_at_the_knee():
    # §10.8.1: "At batch one the intensity is about 1 FLOP per byte of FP16 weights"; decode batches up to the
    # knee near 80 stay below the ridge point.
    assert projection_arithmetic_intensity(1, Q_(2, "B")).m_as("FLOP/B") == 1
    assert projection_arithmetic_intensity(80, Q_(2, "B")) < ridge_point(Q_(989, "TFLOP/s"), Q_(3.35, "TB/s"))


def test_long_prefill_is_compute_bound_and_decode_bandwidth_bound():
    # §10.8.1: "Long-prompt prefill reaches the compute ceiling; decode stays on the bandwidth slope."
    assert roofline_prefill_time(GQA_70B, H100, 1024, tensor_parallel=8).compute_bound
    decode = roofline_decode_step_time(GQA_70B, H100, np.array([1, 16, 80]), 4096, tensor_parallel=8)
    assert not np.any(decode.compute_bound)
    # with KV reads included the intensity stays under the ridge; past a few sequences the KV bytes (which GQA reads
    # at about 2 H_q / H_kv = 16 FLOP per element) pull it below the weight-only estimate B_dec (§10.8.1)
    intensity = decode.arithmetic_intensity.m_as("FLOP/B")
    assert np.all(intensity < accelerator_ridge_point(H100).m_as("FLOP/B"))
    assert np.all(intensity[1:] < np.array([16, 80]))


def test_a_4096_token_prefill_holds_one_h100_for_hundreds_of_milliseconds():
    # §10.8/§10.8.2: a 4,096-token prompt saturates the GPU "for hundreds of milliseconds". The chapter names no
    # hardware (catalog A12); on one H100 at peak FP16 the roofline bound for the 70B model is in that range.
    time = roofline_prefill_time(GQA_70B, H100, 4096).time.m_as("ms")
    assert 100 <= time < 1000


def test_batch_one_decode_rate_is_bandwidth_over_weight_bytes():
    # §10.9.3: batch-one decode "throughput then scales roughly as memory bandwidth divided by the model's
    # weight bytes"; 4-bit weights cut weight traffic 4x. §10.6.2: streaming 140 GB at 3.35 TB/s takes ~40 ms.
    fp16 = roofline_decode_step_time(GQA_70B, H100, 1, 1)
    int4 = roofline_decode_step_time(GQA_70B, H100, 1, 1, weight_bits="int4")
    assert round(fp16.time.m_as("ms"), -1) == 40
    assert fp16.tokens_per_second.m_as("token/s") == pytest.approx(3.35e12 / 140e9, rel=1e-4)
    assert int4.tokens_per_second / fp16.tokens_per_second == pytest.approx(4, rel=1e-4)


def test_roofline_pieces_are_general_and_vectorized():
    # FLOPs per token = 2 x active parameters + attention that grows with context; bytes = weights/t + B S m/t.
    batch = np.array([1, 8, 64])[:, None]
    context = np.array([512, 8192])[None, :]
    step = roofline_decode_step_time(GQA_70B, H100, batch, context, tensor_parallel=4)
    assert step.time.shape == (3, 2)
    per_pair = attention_flops_per_pair(GQA_70B).m_as("FLOP")
    assert per_pair == 4 * 80 * 64 * 128
    expected_flops = batch * (2 * 70e9 + per_pair * context) / 4
    assert step.flops.m_as("FLOP") == pytest.approx(expected_flops)
    expected_bytes = 140e9 / 4 + batch * context * 327_680 / 4
    assert step.bytes_moved.m_as("B") == pytest.approx(expected_bytes)
    assert step.time.m_as("s") == pytest.approx(np.maximum(expected_flops / 989e12, expected_bytes / 3.35e12))
    single = roofline_decode_step_time(GQA_70B, H100, 64, 8192, tensor_parallel=4)
    assert single.time == step.time[2, 1]


def test_mixture_of_experts_computes_with_active_parameters_but_streams_all_weights():
    # Roofline: FLOPs use the 37B active parameters; the weight term uses every resident expert (671B).
    step = roofline_decode_step_time(DEEPSEEK_V3, H100, 1, 1, precision="fp8", tensor_parallel=8)
    assert step.bytes_moved.m_as("GB") == pytest.approx(671 / 8 + 61 * 576 / 1e9, rel=1e-6)
    pair = 2 * 61 * 128 * (192 + 128)
    assert step.flops.m_as("FLOP") == pytest.approx((2 * 37e9 + pair) / 8)


def test_prefill_flops_count_the_causal_attention_pairs():
    assert prefill_flops(1e9, 4, Q_(10, "FLOP")).m_as("FLOP") == 2e9 * 4 + 10 * (1 + 2 + 3 + 4)
    assert prefill_flops(1e9, 4, Q_(10, "FLOP"), 100).m_as("FLOP") == 2e9 * 4 + 10 * (101 + 102 + 103 + 104)


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 256),
    more_batch=st.integers(0, 256),
    context=st.integers(1, 100_000),
    more_context=st.integers(0, 100_000),
)
def test_decode_step_time_never_falls_with_batch_or_context(batch, more_batch, context, more_context):
    small = roofline_decode_step_time(GQA_70B, H100, batch, context, tensor_parallel=8).time
    large = roofline_decode_step_time(
        GQA_70B, H100, batch + more_batch, min(context + more_context, 131_072), tensor_parallel=8
    ).time
    assert large >= small


# ------------------------------------------------------------------ 10.8.2 chunked prefill


def test_example_10_5_sarathi_10000_token_prompt_needs_20_iterations():
    # §10.8.2: "At 512 tokens per chunk, a 10,000-token prompt needs at least ceil(10,000/512) = 20 iterations".
    assert prefill_iterations(10_000, 512) == 20
    schedule = simulate_chunked_prefill([10_000], decode_batch=30, token_budget=30 + 512, chunk_size=512)
    assert schedule.first_token_iteration[0] == 20
    assert schedule.prefill_tokens.sum() == 10_000


def test_a_smaller_residual_budget_needs_more_iterations():
    # §10.8.2: at least ceil(P / C) iterations; "a smaller residual token budget can require more".
    assert prefill_iterations(10_000, 512, token_budget=512, decode_batch=112) == 25
    assert list(prefill_iterations(np.array([100, 1000, 10_000]), 256)) == [1, 4, 40]


def test_algorithm_3_respects_eq_8_and_gives_each_prompt_one_chunk():
    # Eq. 8 (§10.8.2): B_dec + sum c_i <= N_budget; each waiting request contributes at most one chunk.
    plan = schedule_iteration(100, [(1000, 0), (300, 200), (50, 0), (400, 0)], token_budget=612, chunk_size=256)
    assert plan == [(0, 0, 256), (1, 200, 100), (2, 0, 50), (3, 0, 106)]
    assert 100 + sum(chunk for *_, chunk in plan) <= 612
    schedule = simulate_chunked_prefill([3000, 200, 5000, 64], decode_batch=40, token_budget=552, chunk_size=512)
    assert np.all(schedule.decode_tokens + schedule.prefill_tokens <= 552)
    assert schedule.prefill_tokens.sum() == 3000 + 200 + 5000 + 64
    assert list(schedule.decode_tokens[:2]) == [40, 40]


def test_eq_9_hybrid_iteration_balances_near_the_ridge():
    # Eq. 9 (§10.8.2): max(M_W / BW, 2 (B_dec + sum c_i) N_act / R). For FP16 weights (M_W = 2 N) the two terms
    # meet at R / BW = ridge tokens (~295 on an H100): below it the weight stream binds, above it compute does.
    weights, params = Q_(17.5, "GB"), 70e9 / 8
    floor = (weights / Q_(3.35, "TB/s")).to("s")
    assert hybrid_iteration_time(weights, Q_(3.35, "TB/s"), 32, 250, params, Q_(989, "TFLOP/s")).m_as(
        "s"
    ) == pytest.approx(floor.m_as("s"))
    assert hybrid_iteration_time(weights, Q_(3.35, "TB/s"), 32, 300, params, Q_(989, "TFLOP/s")) > floor
    t = hybrid_iteration_time(weights, Q_(3.35, "TB/s"), 32, 480, params, Q_(989, "TFLOP/s"))
    assert t.m_as("s") == pytest.approx(
        roofline_time(Q_(2 * 512 * params, "FLOP"), weights, Q_(989, "TFLOP/s"), Q_(3.35, "TB/s")).m_as("s")
    )


def test_figure_13_chunking_trades_the_prompts_ttft_for_every_streams_tbt():
    # Figure 13 (§10.8.2): monolithic prefill stalls every stream for its full duration; chunked prefill limits
    # each gap to one hybrid iteration while the prompt's first token arrives later. "Chunking changes when the
    # prefill work runs, not how much of it there is."
    trade = chunked_prefill_tradeoff(GQA_70B, H100, 10_000, 512, 30, tensor_parallel=8)
    assert trade.iterations == 20
    assert trade.chunked_tbt < trade.monolithic_tbt
    assert trade.chunked_ttft > trade.monolithic_ttft
    assert trade.monolithic_tbt == trade.monolithic_ttft + trade.decode_step
    assert trade.chunked_tbt >= trade.decode_step


# ------------------------------------------------------------------ 10.8.3 disaggregation


def test_kv_handoff_of_a_128k_request_takes_about_a_hundred_milliseconds():
    # §10.8.3: a 128K-token request on the GQA model of notebook 10.5 (tens of gigabytes) over "a single 450 GB/s
    # NVLink direction takes on the order of a hundred milliseconds"; catalog: 42.95 GB / 450 GB/s = 95.4 ms.
    handoff = model_kv_handoff_time(GQA_70B, 131_072, Q_(450, "GB/s"))
    assert round(handoff.m_as("ms"), -2) == 100
    assert round(handoff.m_as("ms"), 1) == 95.4


def test_handoff_grows_linearly_with_the_prompt_and_uses_the_interconnects_latency():
    # Answer §10.18: KV bytes grow linearly with prompt length, so the longest prompts pay the largest handoff.
    ib = Interconnect(
        id="ib-hdr", name="InfiniBand HDR", provenance="published", scope="inter_node",
        sources=[{"source": "spec", "fields": ["bandwidth"]}], bandwidth="25 GB/s", startup_latency="5 us",
    )  # fmt: skip
    times = model_kv_handoff_time(GQA_70B, np.array([1000, 2000, 4000]), ib).m_as("s")
    assert np.diff(times) == pytest.approx([1000 * 327_680 / 25e9, 2000 * 327_680 / 25e9])
    assert times[0] == pytest.approx(5e-6 + 1000 * 327_680 / 25e9)
    assert kv_handoff_time(Q_(8, "GB"), Q_(25, "GB/s"), Q_(0, "s"), 8) == Q_(40, "ms")


def test_preemption_compares_retain_swap_and_recompute():
    costs = preemption_costs(GQA_70B, H100, 32_768, Q_(64, "GB/s"), tensor_parallel=8)
    held = 32_768 * 327_680 / 8
    assert costs.retain_bytes.m_as("B") == pytest.approx(held)
    assert costs.swap_time.m_as("s") == pytest.approx(2 * held / 64e9)
    assert costs.recompute_time == roofline_prefill_time(GQA_70B, H100, 32_768, tensor_parallel=8).time


def test_disaggregated_pools_sized_by_their_token_rates():
    # §10.8.3: the prefill pool sustains the prompt-token rate, the decode pool the output-token rate, each with
    # headroom: 10 req/s x 2,000 tokens / (20,000 tok/s x 0.8) -> 2; 10 x 500 / (2,000 x 0.8) -> 4.
    pools = disaggregated_pool_sizes(Q_(10, "request/s"), 2000, 500, Q_(20_000, "token/s"), Q_(2_000, "token/s"))
    assert (pools.prefill_instances, pools.decode_instances) == (2, 4)
    assert pools.prefill_utilization == pytest.approx(0.5)
    assert pools.decode_utilization == pytest.approx(0.625)


# ------------------------------------------------------------------ 10.9.3 Table 12


def test_table_12_w8a16_and_w8a8_ceilings():
    # Table 12 (§10.9.3): W8A16: weights reduced 2x, prefill ceiling 1x (FP16 math), decode up to 2x;
    # W8A8: 2x, up to 2x (INT8 tensor cores; H100 INT8/FP16 peak 1979/989), up to 2x.
    w8a16 = quantization_ceilings("int8", "fp16", H100)
    assert (w8a16.weight_bytes_ratio, w8a16.prefill_compute_ceiling, w8a16.decode_traffic_ceiling) == (2, 1, 2)
    w8a8 = quantization_ceilings("int8", "int8", H100)
    assert w8a8.weight_bytes_ratio == 2 and w8a8.decode_traffic_ceiling == 2
    assert round(w8a8.prefill_compute_ceiling) == 2


def test_w4a16_cuts_decode_weight_traffic_up_to_4x():
    # §10.9.3/§10.9.5: W4A16 "can cut the weight payload by up to 4x"; prefill stays on FP16 math.
    w4a16 = quantization_ceilings("int4")
    assert (w4a16.decode_traffic_ceiling, w4a16.prefill_compute_ceiling) == (4, 1)
    assert quantization_ceilings(4.25).decode_traffic_ceiling == pytest.approx(16 / 4.25)


def test_registry_ids_reproduce_the_ridge_ceiling_and_handoff():
    # Ridge of the registry H100 at FP16 (989.4 TFLOP/s / 3.35 TB/s, catalog A17); Table 12's 2x INT8 ceiling
    # (1978.9 / 989.4, §10.9.3); the 450 GB/s NVLink direction of §10.8.3 (registry: chapter-nvlink-h100).
    assert round(accelerator_ridge_point("h100-sxm", "fp16").m_as("FLOP/B")) == 295
    assert round(quantization_ceilings("int8", "int8", "h100-sxm").prefill_compute_ceiling, 1) == 2.0
    assert round(model_kv_handoff_time("chapter-70b-gqa", 131_072, "chapter-nvlink-h100").m_as("ms"), 1) == 95.4
    step = roofline_decode_step_time("llama-3.1-70b", "h100-sxm", 1, 1, tensor_parallel=8)
    assert step.time.m_as("ms") == pytest.approx(70.553706496e9 * 2 / 8 / 3.35e12 * 1e3, rel=1e-3)


# ------------------------------------------------------------------ bad input


def test_bad_input_is_a_clear_error():
    with pytest.raises(InputError, match="tensor_parallel 3 does not split"):
        roofline_decode_step_time(GQA_70B, H100, 8, 4096, tensor_parallel=3)
    with pytest.raises(InputError, match="argument 'chunk_size' must be an integer >= 1"):
        prefill_iterations(10_000, 0)
    with pytest.raises(InputError, match="decode_batch uses the whole token_budget"):
        prefill_iterations(10_000, 512, token_budget=64, decode_batch=64)
    with pytest.raises(InputError, match=r"decode_batch \(700\) exceeds token_budget"):
        schedule_iteration(700, [(100, 0)], 512, 256)
    with pytest.raises(RegistryError, match="no dense fp4 throughput"):
        roofline_prefill_time(GQA_70B, H100, 1024, precision="fp4")
    with pytest.raises(InputError, match="give an accelerator"):
        quantization_ceilings("int8", "int8")
    with pytest.raises(InputError, match="argument 'max_utilization' must be > 0"):
        disaggregated_pool_sizes(Q_(1, "request/s"), 10, 10, Q_(1, "token/s"), Q_(1, "token/s"), 0)
    with pytest.raises(InputError, match="argument 'prompt_tokens' must be an integer >= 1"):
        roofline_prefill_time(GQA_70B, H100, -5)


def test_the_roofline_estimates_have_one_name_each():
    import calculator.phases as phases

    assert not hasattr(phases, "decode_step_time") and not hasattr(phases, "prefill_time")  # performance's names
