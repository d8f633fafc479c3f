"""The generic efficiency curve tested on GPUs it has not seen, and the intervals and words that follow from it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calculator import kernels
from calculator.errors import InputError
from calculator.kernel_holdout import DECODE_POINTS, PREFILL_POINTS, held_out_errors, holdout_summary
from calculator.uncertainty import HOLDOUT_FILE, generic_band, kernel_basis, prediction_interval


def test_the_recorded_holdout_is_what_the_tables_give_now():
    # benchmarks/generic_curve_holdout.py --write rewrites the file; a change of the tables or the step model
    # that moves the test must rewrite it too.
    recorded = json.loads(HOLDOUT_FILE.read_text(encoding="utf-8"))
    fresh = json.loads(json.dumps(holdout_summary()))
    assert sorted(recorded["per_gpu"]) == sorted(kernels._system_ids().values())
    for system, result in fresh["per_gpu"].items():
        for kind, ratios in result["iteration_log_ratios"].items():
            assert ratios == pytest.approx(recorded["per_gpu"][system]["iteration_log_ratios"][kind], abs=2e-6)
    assert fresh["pooled_iterations"] == pytest.approx(recorded["pooled_iterations"], abs=2e-6)
    for generation, stats in fresh["per_generation"].items():
        assert stats == pytest.approx(recorded["per_generation"][generation], abs=2e-6)


def test_a_generation_left_out_is_priced_by_the_other_generations():
    # Hopper left out whole: the H100 is priced by a curve without the H200 too, so its iterations differ from the
    # leave-one-GPU-out ones (where the H200 stood in), and the share inside the band is counted over both GPUs.
    from calculator.kernel_holdout import GENERATIONS

    alone = held_out_errors("h100_sxm")["iteration_log_ratios"]["decode"]
    without_hopper = held_out_errors("h100_sxm", GENERATIONS["hopper"])["iteration_log_ratios"]["decode"]
    assert alone != without_hopper
    recorded = json.loads(HOLDOUT_FILE.read_text(encoding="utf-8"))
    band = generic_band(True)
    ratios = [
        x
        for system in GENERATIONS["hopper"]
        for values in held_out_errors(system, GENERATIONS["hopper"])["iteration_log_ratios"].values()
        for x in values
    ]
    inside = sum(band[0] <= x <= band[1] for x in ratios) / len(ratios)
    assert recorded["per_generation"]["hopper"]["inside_band"] == pytest.approx(inside, abs=1e-6)
    assert sorted(s for g in GENERATIONS.values() for s in g) == sorted(recorded["per_gpu"])


def test_a_left_out_gpu_is_priced_by_the_others_only():
    # The H100 left out: the curve is the median over the eight other GPUs, so leaving it out moves the curve, and
    # a GPU's own tables are never compared with a curve that contains them.
    with_it, without = kernels.generic_efficiency(), kernels.generic_efficiency_without("h100_sxm")
    assert not np.allclose(with_it["decode"][2], without["decode"][2])
    result = held_out_errors("h100_sxm")
    assert result["accelerator"] == "h100-sxm"
    assert len(result["iteration_log_ratios"]["decode"]) == len(DECODE_POINTS)
    assert len(result["iteration_log_ratios"]["prefill"]) == len(PREFILL_POINTS)
    with pytest.raises(InputError, match="argument 'system' must be one of"):
        held_out_errors("mi300x")


def test_the_pooled_band_is_the_percentiles_of_every_left_out_iteration():
    recorded = json.loads(HOLDOUT_FILE.read_text(encoding="utf-8"))
    pooled = [x for gpu in recorded["per_gpu"].values() for r in gpu["iteration_log_ratios"].values() for x in r]
    assert len(pooled) == 9 * (len(DECODE_POINTS) + len(PREFILL_POINTS))
    low, high = generic_band(True)
    assert low == pytest.approx(np.percentile(pooled, 10), abs=1e-6)
    assert high == pytest.approx(np.percentile(pooled, 90), abs=1e-6)
    # Another vendor: the widest single GPU's band at each end.
    per_gpu = [s for gpu in recorded["per_gpu"].values() for s in gpu["iterations"].values()]
    assert generic_band(False) == (min(s["p10"] for s in per_gpu), max(s["p90"] for s in per_gpu))


def test_an_answer_on_the_generic_curve_is_widened_by_the_holdout_in_quadrature():
    # The T4 (NVIDIA, no tables) and the H100 share the cross-GPU terms of the packaged interval; the curve's
    # band adds to each end in quadrature. The MI300X (AMD) takes the widest single GPU's band instead.
    measured = prediction_interval("vllm", "h200-sxm", True)
    for accelerator, band in (("t4", generic_band(True)), ("mi300x", generic_band(False))):
        generic = prediction_interval("vllm", accelerator, False)
        for metric in ("ttft", "tpot"):
            low, high = (math.log(v) for v in measured[metric])
            assert math.log(generic[metric][0]) == pytest.approx(-math.hypot(low, min(band[0], 0.0)))
            assert math.log(generic[metric][1]) == pytest.approx(math.hypot(high, max(band[1], 0.0)))


def test_the_answer_says_what_its_step_times_rest_on():
    assert kernel_basis("h100-sxm", True) == "measured kernel tables of this accelerator"
    nvidia = kernel_basis("t4", False)
    assert nvidia.startswith("the generic efficiency curve") and "9 measured GPUs" in nvidia and "AMD" not in nvidia
    # A vendor no table covers, without measurements of its own (a user's entry): the widest band, in words.
    other = kernel_basis("my-npu", False)
    assert "this accelerator's vendor's kernels was not tested" in other and "may still be optimistic" in other
    # The AMD accelerators' curve is anchored to their own GEMMs (tests/test_kernel_anchors.py); the answer says so.
    amd = kernel_basis("mi300x", False, kernels.tables_for("mi300x").anchors)
    assert "anchored to its own GEMM measurements" in amd and "aiter" in amd and "gfx942 with 304" in amd
    assert "AMD's attention and communication kernels was not tested" in amd
