"""The generic curve anchored to an accelerator's own GEMM measurements (AMD's aiter tuner results).

The rows are kernel microbenchmarks of AMD Instinct GPUs (``anchor_gemm.csv``, ``tools/extract_anchor_gemms.py``);
each test reads them from the file and checks what the library prices against them.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from calculator import kernel_anchors, kernels
from calculator.kernel_holdout import anchored_errors
from calculator.performance import ENGINES, iteration_seconds, step_arrays
from calculator.registry import load_registry
from calculator.uncertainty import HOLDOUT_FILE, kernel_basis

ANCHOR_FILE = kernels.KERNEL_DIR / "anchor_gemm.csv"


def anchor_rows(system, dtype):
    with ANCHOR_FILE.open() as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return [r for r in rows if r["system"] == system and r["dtype"] == dtype and r["batch"] == "1"]


def test_the_table_is_sourced_and_holds_each_amd_gpus_dtypes():
    first = ANCHOR_FILE.read_text().splitlines()[0]
    assert first.startswith("# ") and "ROCm/aiter" in first and "MIT" in first
    with ANCHOR_FILE.open() as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    kinds = {(r["system"], r["dtype"]) for r in rows}
    assert kinds == {
        ("gfx942_cu304", "bf16"),
        ("gfx942_cu304", "fp8"),
        ("gfx950_cu256", "bf16"),
        ("gfx950_cu256", "fp8"),
        ("gfx950_cu256", "fp4"),
    }
    assert all(float(r["us"]) > 0 and int(r["m"]) & (int(r["m"]) - 1) == 0 for r in rows)
    assert set(kernel_anchors.ANCHOR_SYSTEMS.values()) == {s for s, _ in kinds}


def test_every_amd_accelerator_is_anchored_and_no_other_is():
    reg = load_registry()
    amd = {a.id for a in reg.accelerators.values() if a.vendor == "AMD"}
    assert set(kernel_anchors.ANCHOR_SYSTEMS) == amd
    for accelerator in reg.accelerators.values():
        tables = kernels.tables_for(accelerator.id)
        assert bool(tables.anchors) == (accelerator.id in amd)
        if tables.anchors:
            assert not tables.measured and tables.system == "generic"


@pytest.mark.parametrize(
    ("accelerator", "system", "dtype"),
    [("mi300x", "gfx942_cu304", "fp8"), ("mi355x", "gfx950_cu256", "bf16"), ("mi355x", "gfx950_cu256", "fp4")],
)
def test_anchored_gemms_come_close_to_the_measured_ones_where_the_plain_curve_did_not(accelerator, system, dtype):
    rows = anchor_rows(system, dtype)
    m, n, k, us = (np.array([float(r[c]) for r in rows]) for c in ("m", "n", "k", "us"))
    device = load_registry().accelerators[accelerator]
    anchored = kernels.tables_for(accelerator)
    plain = kernels._build(device, None)  # the curve at the registry peaks, not anchored

    def error(tables):
        priced = np.array(
            [float(kernels.gemm_seconds(tables, dtype, mi, ni, ki)) for mi, ni, ki in zip(m, n, k, strict=True)]
        )
        return float(np.median(np.abs(np.log(us * 1e-6 / priced))))

    assert error(anchored) < 0.22 and error(anchored) < error(plain)
    assert anchored.anchors[dtype].median_abs == pytest.approx(error(anchored), abs=0.02)


def test_the_mi300x_computes_below_its_datasheet_share_and_its_large_gemms_show_it():
    # A large FP8 GEMM of the rows: the MI300X's measured rate is well below the curve's at its registry peak.
    rows = [r for r in anchor_rows("gfx942_cu304", "fp8") if int(r["m"]) >= 8192]
    measured = [2 * int(r["m"]) * int(r["n"]) * int(r["k"]) / (float(r["us"]) * 1e-6) for r in rows]
    tables = kernels.tables_for("mi300x")
    priced = [
        2
        * int(r["m"])
        * int(r["n"])
        * int(r["k"])
        / float(kernels.gemm_seconds(tables, "fp8", int(r["m"]), int(r["n"]), int(r["k"])))
        for r in rows
    ]
    peak = load_registry().accelerators["mi300x"].dense_throughput["fp8"].m_as("FLOP/s")
    assert np.median(measured) < 0.45 * peak  # AMD's own tuned kernels
    assert np.median(priced) == pytest.approx(np.median(measured), rel=0.15)
    assert tables.anchors["fp8"].compute > 1.5


def test_the_issue_case_the_mi300x_decode_step_is_no_longer_faster_than_the_h200s():
    # Issue 53, item 5: the plain curve made a 70B FP8 decode step of 300 sequences faster on the MI300X than
    # on the H200; with its GEMMs anchored it is slower.
    eff = ENGINES["vllm"].efficiency
    step = {
        gpu: float(iteration_seconds(step_arrays("llama-3.1-70b", gpu, "fp8"), eff, 1.0, decode=300.0, context=2048.0))
        for gpu in ("mi300x", "h200-sxm")
    }
    assert step["mi300x"] > step["h200-sxm"]


def test_a_user_entry_with_other_peaks_is_not_anchored():
    reg = load_registry()
    device = reg.accelerators["mi300x"]
    assert kernels.tables_for(device).anchors  # the packaged entry itself
    changed = device.model_copy(update={"memory_bandwidth": device.memory_bandwidth * 1.2})
    assert not kernels.tables_for(changed).anchors
    assert "anchored" not in kernel_basis(changed.id, False, kernels.tables_for(changed).anchors)


def test_a_regime_without_rows_takes_the_systems_other_dtypes_scale():
    anchors = kernels._anchors_for("mi300x")
    # FP4 has no rows on the gfx942 (no FP4 units): it takes FP8's scales.
    assert anchors["fp4"].source_dtype == "fp8" and anchors["fp4"].compute == anchors["fp8"].compute
    assert all(math.isfinite(a.compute) and math.isfinite(a.bandwidth) for a in anchors.values())
    rows = (np.ones(3), np.array([4096.0, 8192.0, 16384.0]), np.full(3, 8192.0), np.full(3, 8192.0), np.full(3, 1e-3))
    peak = load_registry().accelerators["mi300x"].dense_throughput["bf16"].m_as("FLOP/s")
    lone = kernels._fit_anchor(rows, "test", "bf16", "bf16", peak, 5.3e12)
    assert math.isnan(lone.bandwidth) and math.isfinite(lone.compute)  # compute-bound rows only
    filled = kernels._fit_anchor(rows, "test", "bf16", "bf16", peak, 5.3e12, fill=(9.0, 1.3))
    assert filled.bandwidth == 1.3 and filled.compute == lone.compute


def test_the_anchoring_left_out_on_the_measured_gpus_prices_them_closer_than_the_plain_curve():
    recorded = json.loads(HOLDOUT_FILE.read_text(encoding="utf-8"))
    plain, anchored = recorded["pooled_iterations"], recorded["anchored"]["pooled_iterations"]
    assert anchored["median_abs"] < 0.6 * plain["median_abs"]
    assert anchored["p90"] - anchored["p10"] < plain["p90"] - plain["p10"]
    # On every left-out GPU the anchored iterations are no worse than the plain curve's, within a point.
    for system, result in recorded["anchored"]["per_gpu"].items():
        before = recorded["per_gpu"][system]["iteration_log_ratios"]
        after = result["iteration_log_ratios"]
        size = [
            float(np.median(np.abs(np.concatenate([r[k] for k in ("decode", "prefill")])))) for r in (before, after)
        ]
        assert size[1] <= size[0] + 0.01, system
    fresh = anchored_errors("h100_sxm")
    assert fresh["iteration_log_ratios"] == recorded["anchored"]["per_gpu"]["h100_sxm"]["iteration_log_ratios"]


def test_the_extractor_keeps_fp8_and_drops_int8_and_mixed_kernels(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "extract", kernels.KERNEL_DIR.parents[3] / "tools" / "extract_anchor_gemms.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    configs = tmp_path / "aiter" / "configs"
    configs.mkdir(parents=True)
    header = "gfx,cu_num,M,N,K,q_dtype_w,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n"
    (configs / "a8w8_bpreshuffle_tuned_gemm.csv").write_text(
        header
        + "gfx942,304,64,1024,1024,torch.int8,1,0,9.0,k,1,1,0\n"
        + "gfx942,304,64,2048,1024,torch.float8_e4m3fnuz,1,0,8.0,k,1,1,0\n"
        + "gfx942,304,48,2048,1024,torch.float8_e4m3fnuz,1,0,7.0,k,1,1,0\n"  # not a power of two
        + "gfx942,80,64,2048,1024,torch.float8_e4m3fnuz,1,0,5.0,k,1,1,0\n"  # another GPU (MI308X)
    )
    (configs / "a8w8_blockscale_tuned_gemm.csv").write_text(
        "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n"
        "gfx942,304,64,2048,1024,ck,1,0,6.5,k,1,1,0\n"  # the same shape, faster: the fastest kernel is kept
    )
    (configs / "a6w4_asm_tuned_gemm.csv").write_text(header + "gfx950,256,64,2048,1024,x,1,0,3.0,k,1,1,0\n")
    out = tmp_path / "anchor.csv"
    assert tool.main([str(tmp_path / "aiter"), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[1:] == ["system,dtype,batch,m,n,k,us", "gfx942_cu304,fp8,1,64,2048,1024,6.5"]


def test_a_plan_on_an_amd_gpu_says_its_step_times_rest_on_the_anchored_curve():
    from calculator import Q_
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

    plan = size_fleet(
        "llama-3.1-8b",
        Workload(Q_(5, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("mi355x", "bf16", tensor_parallel=(1,)),
    )
    assert plan.feasible
    basis = plan.service.kernel_basis
    assert "anchored to its own GEMM measurements" in basis and "gfx950 with 256 compute units" in basis
    assert f"BF16, {kernel_anchors_rows('gfx950_cu256', 'bf16')} rows" in basis


def kernel_anchors_rows(system, dtype):
    with ANCHOR_FILE.open() as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return sum(1 for r in rows if r["system"] == system and r["dtype"] == dtype)
