"""A user calibration recovers a known change: benchmark files written from the model's own predictions.

Each case writes genai-perf exports (the format ``servecalc calibrate`` reads) of ``predict_benchmark``'s
TTFT and TPOT for Llama-3.1-8B on one H100 over a small grid of clients and lengths, priced by an engine's
profile under one known change: the GPU's work 20 % slower on the H100, or the request path 5 ms longer.
The fit starts from the unchanged profile (its prior) and must find the change, for vLLM scheduling
asynchronously (its default from 0.14, which hides the engine's per-iteration costs behind the GPU's
work), vLLM synchronously (releases before 0.14), SGLang and TensorRT-LLM.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from calculator import Q_, SearchSpace, Targets, Workload, size_fleet
from calculator.calibration import (
    USER_FITTED,
    _determined,
    _get,
    _refit_engine,
    prediction_errors,
    read_benchmark_files,
)
from calculator.cli import app
from calculator.performance import ENGINES, decode_step_time, predict_benchmark
from calculator.registry import load_registry
from calculator.simulation import SimulationSetup, Traffic, simulate

MODEL, GPU, OTHER_GPU = "llama-3.1-8b", "h100-sxm", "h200-sxm"
#: Clients x (prompt, output) tokens: a short and a long prompt, from one client to a full batch.
GRID = [(c, i, o) for c in (1, 16, 64) for i, o in ((1024, 256), (256, 1024))]

PROFILES = {
    "vllm": ENGINES["vllm"],  # asynchronous scheduling (registry: async_scheduling)
    "vllm-sync": ENGINES["vllm"].with_async_scheduling(False),
    "sglang": ENGINES["sglang"],
    "trtllm": ENGINES["trtllm"],
}
SLOWER_GPU, LONGER_PATH = 1.2, Q_(5, "ms")


def _write_runs(folder, profile, grid=GRID):
    """genai-perf exports of the model's TTFT and TPOT under ``profile``, one folder per run (its clients named)."""
    clients, prompts, outputs = (np.array(v, dtype=float) for v in zip(*grid, strict=True))
    predicted = predict_benchmark(MODEL, GPU, "bf16", 1, prompts, outputs, clients, engine=profile)
    paths = []
    for k, (c, i, o) in enumerate(grid):
        run = folder / f"llama-openai-chat-concurrency{c}-{k}"
        run.mkdir(parents=True)
        paths.append(run / "profile_export_genai_perf.csv")
        paths[-1].write_text(
            "Metric,avg,min,max,p99,p90,p75\n"
            f"Time To First Token (ms),{predicted.ttft[k].m_as('ms'):.6f},1,2,3,4,5\n"
            f"Inter Token Latency (ms),{predicted.tpot[k].m_as('ms'):.6f},1,2,3,4,5\n"
            f"Output Sequence Length (tokens),{o},1,2,3,4,5\n"
            f"Input Sequence Length (tokens),{i},1,2,3,4,5\n",
            encoding="utf-8",
        )
    return paths


def _values(profile):
    return {name: _get(profile, name, unit, GPU) for name, _, _, unit, _ in USER_FITTED}


@pytest.mark.parametrize("change", ["gpu", "request"])
@pytest.mark.parametrize("case", list(PROFILES))
def test_a_known_change_is_recovered(tmp_path, case, change):
    base = PROFILES[case]
    if change == "gpu":
        truth = base.with_gpu_time_scale(GPU, SLOWER_GPU)
    else:
        truth = base.replace(request_overhead=base.request_overhead + LONGER_PATH)
    runs = read_benchmark_files(_write_runs(tmp_path, truth), MODEL, GPU, base.name)
    fit = _refit_engine(runs, base)
    found, start = _values(fit.pooled), _values(base)
    # the change, within 3 %: a factor 1.2 on the GPU's work, or 5 ms more on the registry's request path
    expected_scale = SLOWER_GPU if change == "gpu" else 1.0
    expected_path = start["request_overhead"] + (LONGER_PATH.m_as("ms") if change == "request" else 0.0)
    assert found["gpu_time_scale"] == pytest.approx(expected_scale, rel=0.03)
    assert found["request_overhead"] == pytest.approx(expected_path, rel=0.03)
    # and the runs, to well within 1 % (they are the model's own)
    errors = prediction_errors(runs, {base.name: fit.pooled})
    assert np.abs(errors[["ttft_error", "tpot_error"]].to_numpy()).max() < 0.005
    # What the runs determine. Scheduling asynchronously the engine's per-iteration costs hide behind the GPU:
    # at 64 clients they are 1.71 ms + 64 x 36.6 us = 4.05 ms (registry), less than the decode step's weight
    # reads alone (16.1 GB of BF16 weights at 3.35 TB/s: 4.8 ms), so the runs cannot see them; synchronously
    # they add to every iteration and the grid separates them from the GPU's work.
    hidden = case == "vllm"
    assert fit.determined == {
        "step_overhead": not hidden,
        "sequence_overhead": not hidden,
        "request_overhead": True,
        "gpu_time_scale": True,
    }
    if not hidden:  # determined, so recovered as well (the prior is the truth here)
        for name in ("step_overhead", "sequence_overhead"):
            assert found[name] == pytest.approx(start[name], rel=0.03), name
    else:  # left at the prior: the per-iteration cost exactly, the per-sequence cost near it
        assert found["step_overhead"] == start["step_overhead"]


def test_what_the_runs_determine_is_read_off_the_jacobian():
    # Four parameters of prior width 1 over three residuals: the first and third columns are collinear (the
    # third is twice the first), the second is zero, the fourth alone moves the last residual by 0.02 per
    # width, and 0.005 would be below DETERMINED (0.01): what no other column can undo is what counts.
    parameters = tuple((name, 0.0, 1.0, "", 1.0) for name in ("a", "b", "c", "d"))
    jacobian = np.array([[1.0, 0.0, 2.0, 0.0], [0.5, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.02]])
    assert _determined(jacobian, parameters) == {"a": False, "b": False, "c": False, "d": True}
    jacobian[2, 3] = 0.005
    assert _determined(jacobian, parameters)["d"] is False
    # independent columns are each determined, whatever their scale once times the width
    wide = tuple((name, 0.0, 1.0, "", 0.1) for name in ("a", "b"))
    assert _determined(np.array([[1.0, 0.0], [0.0, 0.2]]), wide) == {"a": True, "b": True}
    assert _determined(np.array([[1.0, 0.0], [0.0, 0.05]]), wide) == {"a": True, "b": False}


def test_the_gpu_factor_multiplies_the_gpu_work_on_its_accelerator_only():
    # A synchronous engine's decode step is its fixed costs plus the GPU's work: with the factor 1.2 the
    # step grows by 0.2 x (step - fixed), fixed = step_overhead + 8 sequences x sequence_overhead.
    base = ENGINES["sglang"]
    slower = base.with_gpu_time_scale(GPU, 1.2)
    fixed = base.efficiency.step_overhead + 8 * base.efficiency.sequence_overhead
    plain, scaled = (decode_step_time(MODEL, GPU, "bf16", 1, 8, 2048, engine=p) for p in (base, slower))
    assert (scaled - plain).m_as("s") == pytest.approx(0.2 * (plain - fixed).m_as("s"), rel=1e-9)
    other = [decode_step_time(MODEL, OTHER_GPU, "bf16", 1, 8, 2048, engine=p) for p in (base, slower)]
    assert other[0] == other[1]


def test_calibrating_on_a_slower_gpu_moves_the_plan_there_and_nowhere_else(tmp_path):
    # The case: vLLM scheduling asynchronously on an H100 whose token latency is 20 % above the
    # model's. Through the command as a user runs it; the written file is what the sizer then reads.
    grid = [(c, i, o) for c in (1, 64) for i, o in ((1024, 256), (256, 1024))]
    paths = _write_runs(tmp_path / "runs", ENGINES["vllm"].with_gpu_time_scale(GPU, SLOWER_GPU), grid)
    written = tmp_path / "mine.yaml"
    result = CliRunner().invoke(
        app, ["calibrate", *map(str, paths), "--model", MODEL, "-a", GPU, "-p", "bf16", "--engine", "vllm",
              "--write", str(written)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"gpu_time_scale on {GPU}: 1.2" in result.stdout
    assert "determined by the runs: request_overhead, gpu_time_scale" in result.stdout
    assert "left at the engine's values (the runs do not move them): step_overhead, sequence_overhead" in result.stdout
    calibrated = load_registry(extra=[written])
    assert calibrated.engines["vllm"].gpu_time_scale == {GPU: pytest.approx(SLOWER_GPU, rel=0.03)}

    def plan(gpu, registry):
        workload = Workload(Q_(20, "request/s"), 1024, 256)
        return size_fleet(
            MODEL, workload, Targets(Q_(2, "s"), Q_(30, "ms")), SearchSpace(gpu, "bf16", tensor_parallel=[1]),
            engine="vllm", registry=registry,
        )  # fmt: skip

    # the runs' slower GPU, as the sizer now prices it: the model's TPOT on the runs 1.2 x what it was
    clients, prompts, outputs = (np.array(v, dtype=float) for v in zip(*grid, strict=True))
    tpot = [predict_benchmark(MODEL, GPU, "bf16", 1, prompts, outputs, clients, "vllm", registry=r).tpot for r in
            (None, calibrated)]  # fmt: skip
    assert (tpot[1] / tpot[0]).m_as("") == pytest.approx(np.full(len(grid), SLOWER_GPU), rel=0.01)
    # and as the simulator prices it: 16 clients' token latency, simulated on the same seed
    traffic = Traffic(input_tokens=1024, output_tokens=256, requests=160, clients=16)
    simulated = [
        simulate(SimulationSetup(MODEL, GPU, "bf16", engine="vllm", registry_files=files), traffic).value("tpot")
        for files in ((), (str(written),))
    ]
    assert (simulated[1] / simulated[0]).m_as("") == pytest.approx(SLOWER_GPU, rel=0.02)
    # so the fleet that meets the same targets needs more GPUs there, and the same elsewhere
    before, after = plan(GPU, None), plan(GPU, calibrated)
    assert after.gpus > before.gpus
    elsewhere = plan(OTHER_GPU, None), plan(OTHER_GPU, calibrated)
    assert elsewhere[0].gpus == elsewhere[1].gpus and elsewhere[0].service.tpot == elsewhere[1].service.tpot
