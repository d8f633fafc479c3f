"""servecalc calibrate: an engine's costs fitted to the user's own benchmark files, in each format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from calculator import Q_, Costs, SearchSpace, Targets, Workload, calibration, size_fleet
from calculator.calibration import (
    USER_FITTED,
    _get,
    _refit_engine,
    calibrate_engine,
    cross_validation_folds,
    load_benchmarks,
    prediction_errors,
    read_benchmark_files,
)
from calculator.cli import app
from calculator.errors import InputError
from calculator.performance import ENGINES, engine_profile
from calculator.registry import load_registry


def _runs(engine, version, precision, tp, count=4):
    rows = load_benchmarks()
    chosen = rows[
        (rows.engine == engine)
        & (rows.backend_version.astype(str) == version)
        & (rows.precision == precision)
        & (rows.tensor_parallel == tp)
    ]
    return chosen.iloc[np.linspace(0, len(chosen) - 1, count).astype(int)]


def _summary(row):
    n = 10 * int(row.concurrency)
    return {
        "completed": n,
        "total_input_tokens": row.input_tokens * n,
        "total_output_tokens": row.output_tokens * n,
        "mean_ttft_ms": row.ttft * 1e3,
        "mean_tpot_ms": row.tpot * 1e3,
        "max_concurrency": int(row.concurrency),
    }


def _files(tmp_path, kind, runs):
    if kind == "vllm":  # vllm bench serve --save-result: one JSON object per run
        paths = []
        for i, row in enumerate(runs.itertuples()):
            paths.append(tmp_path / f"vllm-{i}.json")
            paths[-1].write_text(json.dumps(_summary(row)), encoding="utf-8")
        return paths
    if kind == "sglang":  # bench_serving --output-file: a JSON line per run
        path = tmp_path / "sglang.jsonl"
        path.write_text("\n".join(json.dumps(_summary(r)) for r in runs.itertuples()) + "\n", encoding="utf-8")
        return [path]
    paths = []  # genai-perf: one CSV per run, in a folder that names the concurrency
    for i, row in enumerate(runs.itertuples()):
        folder = tmp_path / f"model-openai-chat-concurrency{int(row.concurrency)}-{i}"
        folder.mkdir()
        text = (
            "Metric,avg,min,max,p99,p90,p75\n"
            f"Time To First Token (ms),{row.ttft * 1e3:.6f},1,2,3,4,5\n"
            f"Inter Token Latency (ms),{row.tpot * 1e3:.6f},1,2,3,4,5\n"
            "Request Latency (ms),1000,1,2,3,4,5\n"
            f"Output Sequence Length (tokens),{row.output_tokens:.0f},1,2,3,4,5\n"
            f"Input Sequence Length (tokens),{row.input_tokens:.0f},1,2,3,4,5\n"
            "\nMetric,Value\nOutput Token Throughput (per sec),1000\nRequest Throughput (per sec),4\n"
        )
        paths.append(folder / "profile_export_genai_perf.csv")
        paths[-1].write_text(text, encoding="utf-8")
    return paths


CASES = [
    # file format, engine, version, precision, TP, harness arrivals
    ("vllm", "vllm", "0.12.0", "bf16", 4, "dispersed"),
    ("sglang", "sglang", "0.5.1.post1", "bf16", 4, "waves"),
    ("genai-perf", "trtllm", "1.0.0rc3", "fp8", 2, "dispersed"),
]


@pytest.mark.parametrize(("kind", "engine", "version", "precision", "tp", "arrivals"), CASES)
def test_each_benchmark_format_reads_back_its_runs(tmp_path, kind, engine, version, precision, tp, arrivals):
    runs = _runs(engine, version, precision, tp)
    read = read_benchmark_files(
        _files(tmp_path, kind, runs), "qwen3-32b", "h100-sxm", engine, precision, tp, arrivals=arrivals
    )
    # the files give back the runs: lengths, clients, TTFT and TPOT, and the harness's arrivals
    for column in ("input_tokens", "output_tokens", "concurrency", "ttft", "tpot"):
        assert read[column].to_numpy() == pytest.approx(runs[column].to_numpy(), rel=1e-6), column
    assert (read.arrivals == arrivals).all()


def test_a_harness_length_spread_is_read_with_the_runs_and_priced(tmp_path):
    # The runs' length spread is a harness setting like the arrivals: recorded on every row, and the
    # crowded rounds after the first burst it implies raise the predicted TTFT; the TPOT moves only by the
    # spread's length bias on the running sequences' context (0.125 % of half the output at 0.05).
    kind, engine, version, precision, tp, _ = CASES[0]
    paths = _files(tmp_path, kind, _runs(engine, version, precision, tp))
    mixed = read_benchmark_files(paths, "qwen3-32b", "h100-sxm", engine, precision, tp)
    spread = read_benchmark_files(paths, "qwen3-32b", "h100-sxm", engine, precision, tp, length_cv=0.05)
    assert np.isinf(mixed.length_cv).all() and (spread.length_cv == 0.05).all()
    before, after = (prediction_errors(frame) for frame in (mixed, spread))
    assert (after.ttft_pred >= before.ttft_pred).all() and (after.ttft_pred > 1.05 * before.ttft_pred).any()
    assert after.tpot_pred.to_numpy() == pytest.approx(before.tpot_pred.to_numpy(), rel=1e-3)
    assert (after.tpot_pred >= before.tpot_pred).all()
    with pytest.raises(InputError, match="read_benchmark_files\\(\\): argument 'length_cv'"):
        read_benchmark_files(paths, "qwen3-32b", "h100-sxm", engine, precision, tp, length_cv=-1)


def test_calibrate_writes_the_fit_and_the_sizer_uses_it(tmp_path, monkeypatch):
    # One format through the whole command (the fit and its leave-one-run-out check take about 25 s; the
    # formats differ only in how they are read, checked above): SGLang's, with the harness's waves.
    kind, engine, version, precision, tp, arrivals = CASES[1]
    paths = _files(tmp_path, kind, _runs(engine, version, precision, tp))
    read = read_benchmark_files(paths, "qwen3-32b", "h100-sxm", engine, precision, tp, arrivals=arrivals)
    written = tmp_path / "mine.yaml"
    fits = []  # each refit the command runs: its runs, its starting engine and its result

    def recorded(frame, base):
        fits.append((frame, base, refit(frame, base)))
        return fits[-1][2]

    refit = _refit_engine
    monkeypatch.setattr(calibration, "_refit_engine", recorded)
    result = CliRunner().invoke(
        app,
        ["calibrate", *map(str, paths), "--model", "qwen3-32b", "-a", "h100-sxm", "--engine", engine, "-p", precision,
         "--tp", str(tp), "--arrivals", arrivals, "--write", str(written)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "each run left out: TTFT" in result.stdout and "80% interval" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.yaml", "sglang.jsonl"]  # no temporary file left
    # the written engine entry is a valid registry file, and it is what the fit found
    reg = load_registry(extra=[written])
    calibrated = engine_profile(engine, reg)
    # the command's first refit is _refit_engine on every run read, from the engine's own costs: a pure function
    # of those, so its result is what _refit_engine(read, ENGINES[engine]) gives (not fitted a second time here)
    frame, base, fit = fits[0]
    pd.testing.assert_frame_equal(frame, read)
    assert base == ENGINES[engine] and len(fits) == 1 + cross_validation_folds(len(read))
    same = fit.pooled
    for name, _, _, unit, _ in USER_FITTED:  # the same fit as on the rows themselves (4 significant digits)
        ours, theirs = (_get(p, name, unit, "h100-sxm") for p in (calibrated, same))
        assert ours == pytest.approx(theirs, rel=1e-3), name
    assert calibrated.interval.accelerators == ("h100-sxm",)
    # the sizer uses it: its step times and its interval
    plan = size_fleet(
        "qwen3-32b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
        SearchSpace("h100-sxm", precision, tensor_parallel=[tp]), engine=engine, costs=Costs(Q_(3, "USD/hour")),
        registry=reg,
    )  # fmt: skip
    low, high = plan.service.tpot_interval
    assert (low / plan.service.tpot).m_as("") == pytest.approx(min(calibrated.interval.tpot[0], 1.0), rel=1e-6)
    assert (high / plan.service.tpot).m_as("") == pytest.approx(max(calibrated.interval.tpot[1], 1.0), rel=1e-6)


def test_bad_benchmark_files_are_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"completed": 10}', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.json: not a serving benchmark result"):
        read_benchmark_files([bad], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    with pytest.raises(InputError, match="unknown benchmark format"):
        read_benchmark_files([text], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    one = tmp_path / "one.json"
    one.write_text(
        json.dumps({**_summary(next(_runs("vllm", "0.12.0", "bf16", 4).itertuples())), "max_concurrency": None})
    )
    with pytest.raises(InputError, match="give --concurrency"):
        read_benchmark_files([one], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    frame = read_benchmark_files([one], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4, concurrency=8)
    with pytest.raises(InputError, match="at least three benchmark runs"):
        calibrate_engine(frame, "vllm")
    result = CliRunner().invoke(
        app, ["calibrate", str(bad), "--model", "qwen3-32b", "-a", "h100-sxm", "--engine", "vllm"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output and "bad.json" in result.output
