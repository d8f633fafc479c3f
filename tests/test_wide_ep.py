"""Wide expert parallelism priced from the wide-EP MoE kernel tables (``moe_wide.csv``): TensorRT-LLM's kernel with
and without its load balancer, SGLang's DeepEP kernels, the degrees between measured ones, and what stays as it was.

Expected values are read from the CSV files with pandas and worked by hand here: a time is the running maximum over
the measured tokens (more tokens never take less time), in microseconds in the files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from calculator.kernel_holdout import wide_degree_holdout
from calculator.kernels import KERNEL_DIR, measured_wide_moe, tables_for, wide_layout_seconds, wide_moe_seconds
from calculator.performance import step_arrays
from calculator.performance._common import replica_layout
from calculator.performance.iteration import _expert_seconds

DEEPSEEK = (7168, 2048, 8, 256)  # DeepSeek-V3's config.json: hidden, moe_intermediate_size, experts per token, experts
WIDE = pd.read_csv(KERNEL_DIR / "moe_wide.csv", comment="#")
_MOE_WIDE = pd.read_csv(KERNEL_DIR / "moe.csv", comment="#")  # a row per layer, a column tN per token count N
MOE = (
    _MOE_WIDE.melt(id_vars=[c for c in _MOE_WIDE if not c.startswith("t") or c == "topk"], var_name="tokens",
                   value_name="latency_us")
    .dropna(subset=["latency_us"])
    .assign(tokens=lambda d: d.tokens.str[1:].astype(int))
)  # fmt: skip


def _measured(table, tokens, **where):
    """Seconds at ``tokens`` on one measured curve of ``table``: the running maximum of its rows, by tokens."""
    rows = table
    for column, value in where.items():
        rows = rows[rows[column] == value]
    curve = rows.sort_values("tokens").set_index("tokens").latency_us.cummax()
    return curve.loc[tokens].to_numpy() * 1e-6


def _wide(tokens, system="h200_sxm", framework="trtllm", ep=64, slots=256, balancer=False, phase="any"):
    distribution = "power_law_1.2_eplb" if balancer else "power_law_1.2"
    where = {"system": system, "framework": framework, "phase": phase, "distribution": distribution, "slots": slots}
    where |= dict(zip(("hidden", "width", "topk", "experts"), DEEPSEEK, strict=True))
    return _measured(WIDE, tokens, moe_ep=ep, **where)


def _experts(engine, ep, redundant=0, gpu="h200-sxm", tokens=(4096.0,)):
    """The step model's expert time of DeepSeek-V3 in FP8 on ``ep`` GPUs, one attention rank each."""
    a = step_arrays("deepseek-v3", gpu, "fp8", engine=engine)
    arrays, group = replica_layout(a, np.asarray([1.0]), ep, ep, "test", 1, redundant)
    return _expert_seconds(arrays, float(group[0]), np.asarray(tokens, dtype=float))


def test_a_measured_layout_reads_the_table():
    tokens = [1, 512, 4096, 16384]
    expected = _wide(tokens)
    h200 = tables_for("h200-sxm")
    found = wide_moe_seconds(h200, "fp8", np.asarray(tokens, float), DEEPSEEK, 64, engine="trtllm")
    assert found == pytest.approx(expected, rel=1e-12)
    # beyond the measured tokens the time grows in proportion: twice the tokens of the last point, twice its time
    beyond = wide_moe_seconds(h200, "fp8", np.asarray([32768.0]), DEEPSEEK, 64, engine="trtllm")
    assert beyond == pytest.approx(2 * expected[-1], rel=1e-12)
    # the step model of TensorRT-LLM on 64 GPUs reads the same (moe.csv stops at 16 GPUs)
    assert _experts("trtllm", 64, tokens=tokens) == pytest.approx(expected, rel=1e-12)


def test_sglang_reads_its_decode_kernel_then_its_prefill_kernel():
    # DeepEP's low-latency kernel was measured up to 128 tokens a rank (4096 on 32 GPUs), the normal one beyond:
    # at 512 tokens the low-latency time (the normal kernel, 366 us there, is not read), at 8192 the normal one.
    low = _wide([512, 4096], framework="sglang", ep=32, phase="generation")
    high = _wide([8192], framework="sglang", ep=32, phase="context")
    assert _experts("sglang", 32, tokens=(512.0, 4096.0, 8192.0)) == pytest.approx([*low, *high], rel=1e-12)


def test_copies_read_the_balancers_table_and_relieve_where_it_says_so():
    tokens = [16, 512, 8192, 16384]
    plain, balanced = _wide(tokens, ep=32), _wide(tokens, ep=32, slots=288, balancer=True)
    assert np.all(balanced <= plain)  # the table: 288 slots with the balancer beat 256 without at every token here
    without, with_copies = _experts("trtllm", 32, tokens=tokens), _experts("trtllm", 32, 32, tokens=tokens)
    assert without == pytest.approx(plain, rel=1e-12)
    assert with_copies == pytest.approx(balanced, rel=1e-12)
    # SGLang's tables have no balancer: its copies read TensorRT-LLM's
    assert _experts("sglang", 32, 32, tokens=tokens) == pytest.approx(balanced, rel=1e-12)


def test_a_degree_between_measured_ones_interpolates_in_log_degree():
    # 288 slots on 24 GPUs (12 each) between the measured 16 and 32: log2 time linear in log2 degree at the same
    # tokens, weight log2(24 / 16) on 32 GPUs' time
    tokens = [64, 8192]
    weight = math.log2(24 / 16)
    t16, t32 = (_wide(tokens, ep=ep, slots=288, balancer=True) for ep in (16, 32))
    expected = 2.0 ** ((1 - weight) * np.log2(t16) + weight * np.log2(t32))
    assert _experts("trtllm", 24, 32, tokens=tokens) == pytest.approx(expected, rel=1e-12)
    # the held-out check, by hand: 64 GPUs priced from 32 and 128 (halfway in log degree) at 4096 tokens
    layouts = dict(measured_wide_moe()[("h200_sxm", "fp8", *DEEPSEEK, False)]["trtllm"])
    del layouts[(256, 64)]
    priced = 2.0 ** wide_layout_seconds(layouts, 256, 64, np.asarray([12.0]))
    assert priced == pytest.approx(math.sqrt(_wide([4096], ep=32)[0] * _wide([4096], ep=128)[0]), rel=1e-12)


def test_an_uneven_degree_reads_the_even_one_whose_gpus_hold_as_many_experts():
    # vLLM on 72 GPUs: 256 = 3 x 72 + 40, the busiest GPU holds 4 experts, as on 64 GPUs. vLLM's own kernel is not in
    # the tables: the median of TensorRT-LLM's and SGLang's (two: their mean) at 64 GPUs.
    trtllm = _wide([4096], ep=64)[0]
    sglang = _wide([4096], framework="sglang", ep=64, phase="generation")[0]  # 64 a rank: DeepEP low latency
    assert _experts("vllm", 72)[0] == pytest.approx((trtllm + sglang) / 2, rel=1e-12)


def test_the_held_out_degrees_stay_within_the_documented_error():
    # A regression guard, not an independent check: the bounds are what the holdout measured when the interpolation
    # was chosen (the docs state them), so a change to the interpolation or the tables that worsens it fails here.
    # docs/performance-model.md, "Expert placement": each measured degree priced from its neighbours, ln(measured /
    # priced) over every system and token count: median size 0.07, 10th-90th percentiles -0.21 to +0.11; per
    # framework and variant at most 0.08 in median size and within -0.24 to +0.17.
    stats = wide_degree_holdout()
    assert set(stats) == {"all", "sglang", "trtllm", "trtllm_eplb"}
    assert stats["all"]["points"] == sum(stats[k]["points"] for k in ("sglang", "trtllm", "trtllm_eplb"))
    assert stats["all"]["median_abs"] <= 0.07
    assert stats["all"]["p10"] >= -0.22 and stats["all"]["p90"] <= 0.12
    for name in ("sglang", "trtllm", "trtllm_eplb"):
        assert stats[name]["points"] > 200
        assert stats[name]["median_abs"] <= 0.08
        assert stats[name]["p10"] >= -0.24 and stats[name]["p90"] <= 0.17


def test_layouts_moe_csv_covers_are_unchanged():
    # SGLang on 8 GPUs: moe.csv has its layout (expert tensor parallelism 1, expert parallelism 8), read before the
    # wide tables (its DeepEP kernel there is 1.0 ms at 4096 tokens against moe.csv's 1.8)
    rows = MOE[(MOE.system == "h200_sxm") & (MOE.framework == "sglang") & (MOE.dtype == "fp8") & (MOE.hidden == 7168)]
    expected = _measured(rows, [4096], experts=256, moe_tp=1, moe_ep=8)
    assert _experts("sglang", 8) == pytest.approx(expected, rel=1e-12)
    assert not np.isclose(expected[0], _wide([4096], framework="sglang", ep=8, phase="context")[0], rtol=0.1)


def test_beyond_the_measured_layouts_the_balanced_estimate_stays():
    h200, tokens = tables_for("h200-sxm"), np.asarray([4096.0])
    # 288 slots were measured on 2 to 32 GPUs (64 and 128 do not divide 288): 72 GPUs lie beyond
    assert wide_moe_seconds(h200, "fp8", tokens, DEEPSEEK, 72, slots=288, load_balancer=True) is None
    # a GB200's balancer tables are NVFP4 only: FP8 copies have none
    assert wide_moe_seconds(tables_for("gb200"), "fp8", tokens, DEEPSEEK, 32, slots=288, load_balancer=True) is None
    # another model's shape (Qwen3-235B-A22B's 128 experts) was not measured wide; nor a GPU without tables
    assert wide_moe_seconds(h200, "fp8", tokens, (4096, 1536, 8, 128), 32) is None
    assert wide_moe_seconds(tables_for("mi300x"), "fp8", tokens, DEEPSEEK, 64) is None


def test_the_wide_tables_hold_the_registrys_newer_expert_shapes():
    # Re-extracted with the registry's 16 expert shapes (2026-12-07): Kimi-K2's 384 experts, GLM-5's and
    # MiniMax-M2.5's 256 are read from TensorRT-LLM's wide-EP measurements on 64 H200s, as DeepSeek-V3's were.
    h200, tokens = tables_for("h200-sxm"), np.asarray([4096.0])
    for model in ("kimi-k2", "glm-5", "minimax-m2.5"):
        a = step_arrays(model, "h200-sxm", "fp8")
        shape = (a.hidden, a.expert_width, a.experts_per_token, a.experts)
        rows = WIDE[(WIDE.system == "h200_sxm") & (WIDE.framework == "trtllm") & (WIDE.hidden == round(a.hidden))]
        rows = rows[(rows.experts == a.experts) & (rows.moe_ep == 64) & (rows.distribution == "power_law_1.2")]
        assert not rows.empty, model
        expected = rows.sort_values("tokens").set_index("tokens").latency_us.cummax().loc[4096] * 1e-6
        assert wide_moe_seconds(h200, "fp8", tokens, shape, 64, engine="trtllm")[0] == pytest.approx(expected), model
