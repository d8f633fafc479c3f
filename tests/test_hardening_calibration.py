"""servecalc calibrate refuses the impossible: bounded readers, plausible runs, no uncertain fit written.

Issue 57, items 6 and 7: every benchmark file is read within its caps (a device, a huge file, too many
runs), every measured value is a finite number in a plausible range, every reader error is one line
naming the file and the field (exit status 2 from the CLI), a fit too uncertain to use is reported but not
written, and nothing is left on disk after a refusal. No test here runs the fit itself (seconds per fit):
the normal calibration that fits and writes is ``tests/test_calibrate.py``'s.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from typer.testing import CliRunner

import calculator.calibration as calibration
from calculator import ENGINES, load_registry
from calculator.calibration import (
    MAX_BENCHMARK_FILE_BYTES,
    MAX_CALIBRATION_RUNS,
    MAX_CV_FOLDS,
    CalibrationFit,
    UserCalibration,
    calibrate_engine,
    check_calibration,
    engine_entry_yaml,
    genai_perf_concurrency,
    read_benchmark_files,
)
from calculator.cli import app
from calculator.errors import InputError
from calculator.performance import engine_profile

#: One run of ``vllm bench serve --save-result`` (qwen3-32b on 4 x H100, 8 clients).
RUN = {
    "completed": 80,
    "total_input_tokens": 81920,
    "total_output_tokens": 10240,
    "mean_ttft_ms": 126.1,
    "mean_tpot_ms": 11.76,
    "max_concurrency": 8,
}
ARGS = ["--model", "qwen3-32b", "-a", "h100-sxm", "--engine", "vllm", "--tp", "4"]
#: A calibration as a sound fit gives it (the errors and intervals of the packaged engines).
SOUND = UserCalibration(ENGINES["vllm"], (0.1, 0.05), (0.12, 0.06), {"ttft": (0.8, 1.3), "tpot": (0.9, 1.1)}, 5)


def _calibrate(files, out, *extra):
    """``servecalc calibrate`` on ``files`` writing into the folder ``out``; the result."""
    return CliRunner().invoke(app, ["calibrate", *map(str, files), *ARGS, *extra, "--write", str(out / "mine.yaml")])


def _refused(result, *words):
    """The CLI refused in one line on standard error, without a traceback, naming ``words``."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    error = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and error[0].startswith("error: "), result.stderr
    for word in words:
        assert word in error[0], (word, error[0])


def _runs_file(folder, name, runs):
    path = folder / name
    if name.endswith(".jsonl"):
        path.write_text("\n".join(json.dumps(run) for run in runs) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(runs[0]), encoding="utf-8")
    return path


# Each absurd run or hostile file: (file name, its content, words the one-line error must hold).
HOSTILE = [
    # the plausible ranges (item 7): a one-week mean TTFT, 10^9 clients, a 1 ns TPOT, and the impossible
    ("week.jsonl", [RUN, {**RUN, "mean_ttft_ms": 7 * 86400e3}], ("line 2", "mean_ttft_ms", "600000 ms")),
    ("crowd.json", [{**RUN, "max_concurrency": 10**9}], ("max_concurrency", "1e+09", "1 to 100000")),
    ("fast.json", [{**RUN, "mean_tpot_ms": 1e-6}], ("mean_tpot_ms", "0.05 ms to 10000 ms")),
    ("long.json", [{**RUN, "total_input_tokens": 80e9}], ("total_input_tokens / completed", "1e+09 tokens")),
    ("empty.json", [{**RUN, "total_output_tokens": 0}], ("total_output_tokens / completed",)),
    ("zero.json", [{**RUN, "mean_tpot_ms": 0}], ("mean_tpot_ms", "plausible range")),
    ("negative.json", [{**RUN, "mean_ttft_ms": -5}], ("mean_ttft_ms", "-5 ms")),
    ("half.json", [{**RUN, "max_concurrency": 8.5}], ("max_concurrency", "whole number")),
    ("none.json", [{**RUN, "completed": 0}], ("completed", "at least 1")),
    # the tracebacks of item 7: NaN, inf, a non-numeric max_concurrency
    ("nan.json", [{**RUN, "mean_ttft_ms": float("nan")}], ("mean_ttft_ms", "finite")),
    ("inf.json", [{**RUN, "mean_tpot_ms": float("inf")}], ("mean_tpot_ms", "finite")),
    ("text.json", [{**RUN, "max_concurrency": "abc"}], ("max_concurrency", "must be a number", "'abc'")),
    ("list.json", [{**RUN, "max_concurrency": [8]}], ("max_concurrency", "must be a number")),
    ("flag.json", [{**RUN, "completed": True}], ("completed", "must be a number")),
    ("huge.json", [{**RUN, "completed": 10**400}], ("completed", "must be a number")),
    ("deep.json", "[" * 100_000 + "]" * 100_000, ("deep.json", "nested too deeply")),
    ("digits.json", '{"completed": ' + "9" * 5000 + "}", ("digits.json", "more than 4,300 digits")),
    ("twice.json", '{"completed": 80, "completed": 8}', ("twice.json", "'completed' is given twice")),
    ("latin.json", b'{"completed": "\xff"}', ("latin.json", "not UTF-8")),
    ("partial.jsonl", json.dumps(RUN) + "\n{\n", ("partial.jsonl, line 2", "malformed JSON")),
]


@pytest.mark.parametrize(("name", "content", "words"), HOSTILE, ids=[case[0] for case in HOSTILE])
def test_absurd_runs_and_hostile_files_are_refused_and_nothing_is_written(tmp_path, name, content, words):
    files, out = tmp_path / "in", tmp_path / "out"
    files.mkdir()
    out.mkdir()
    path = files / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path = _runs_file(files, name, content)
    # three copies: enough runs to fit, so the refusal is the file's, not the count's
    _refused(_calibrate([path] * 3, out), *words)
    assert list(out.iterdir()) == []


def test_a_genai_perf_field_over_the_csv_limit_and_a_nan_cell_are_clear_errors(tmp_path):
    folder = tmp_path / "model-openai-chat-concurrency8"
    folder.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    wide = folder / "profile_export_genai_perf.csv"
    wide.write_text("Metric,avg\n" + "x" * 131_073 + ",1\n", encoding="utf-8")  # _csv.Error before
    _refused(_calibrate([wide] * 3, out), "profile_export_genai_perf.csv", "not a genai-perf CSV export", "line 2")
    wide.write_text(
        "Metric,avg\nTime To First Token (ms),nan\nInter Token Latency (ms),10\n"
        "Output Sequence Length (tokens),100\nInput Sequence Length (tokens),1000\n",
        encoding="utf-8",
    )
    _refused(_calibrate([wide] * 3, out), "time to first token (ms)", "finite")
    wide.write_text("Metric,avg\n" + "a,1\n" * 2_000, encoding="utf-8")
    _refused(_calibrate([wide] * 3, out), "more than 1,000 lines")
    assert list(out.iterdir()) == []


def test_a_device_and_a_file_over_the_byte_cap_are_refused_unread(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    device = tmp_path / "zero.json"
    device.symlink_to("/dev/zero")  # read until memory ran out before
    _refused(_calibrate([device] * 3, out), "zero.json", "not a regular file")
    big = tmp_path / "big.jsonl"
    with big.open("wb") as handle:  # sparse: one byte over the cap without writing it
        handle.truncate(MAX_BENCHMARK_FILE_BYTES + 1)
    _refused(_calibrate([big], out), "big.jsonl", f"more than {MAX_BENCHMARK_FILE_BYTES:,} bytes")
    assert list(out.iterdir()) == []


def test_runs_are_capped_and_a_long_jsonl_is_refused_before_its_lines_are_parsed(tmp_path):
    # One line over the cap, none of them JSON: the count refuses the file before a line is parsed (a
    # 1M-line JSONL reached MemoryError after 104 s).
    lines = tmp_path / "runs.jsonl"
    lines.write_text("not json\n" * (MAX_CALIBRATION_RUNS + 1), encoding="utf-8")
    with pytest.raises(InputError, match=r"runs\.jsonl: too many runs; one calibration reads at most 1,000 runs"):
        read_benchmark_files([lines], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    # at the cap, the lines are parsed
    lines.write_text("not json\n" * MAX_CALIBRATION_RUNS, encoding="utf-8")
    with pytest.raises(InputError, match=r"runs\.jsonl, line 1: malformed JSON"):
        read_benchmark_files([lines], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    # too many files: refused before any is opened (these do not exist)
    many = [tmp_path / f"run-{i}.json" for i in range(MAX_CALIBRATION_RUNS + 1)]
    with pytest.raises(InputError, match="more than 1,000 files"):
        read_benchmark_files(many, "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    # the runs of several files count together
    full = _runs_file(tmp_path, "full.jsonl", [RUN] * MAX_CALIBRATION_RUNS)
    one = _runs_file(tmp_path, "one.json", [RUN])
    assert len(read_benchmark_files([full], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)) == MAX_CALIBRATION_RUNS
    with pytest.raises(InputError, match=r"one\.json: too many runs"):
        read_benchmark_files([full, one], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)


def test_the_given_concurrency_is_in_its_plausible_range(tmp_path):
    path = _runs_file(tmp_path, "run.json", [{**RUN, "max_concurrency": None}])
    with pytest.raises(InputError, match=r"field 'concurrency' = 1e\+09 is outside the plausible range 1 to 100000"):
        read_benchmark_files([path], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4, concurrency=10**9)
    assert read_benchmark_files(
        [path], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4, concurrency=64
    ).concurrency.tolist() == [64]


def _genai_perf(folder, clients=None):
    folder.mkdir(parents=True)
    path = folder / "profile_export_genai_perf.csv"
    path.write_text(
        "Metric,avg,min,max\nTime To First Token (ms),150.5,1,2\nInter Token Latency (ms),12.25,1,2\n"
        'Output Sequence Length (tokens),256,1,2\nInput Sequence Length (tokens),"1,024",1,2\n',
        encoding="utf-8",
    )
    return path


def test_genai_perf_concurrency_is_read_from_the_runs_own_folder(tmp_path):
    # genai-perf names each run's folder <model>-<kind>-<endpoint>-concurrency<N>; a study folder above
    # it that also names a concurrency is not this run's (it read 1 before).
    path = _genai_perf(tmp_path / "concurrency-study-concurrency1" / "qwen3-32b-openai-chat-concurrency64")
    run = read_benchmark_files([path], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    assert run.concurrency.tolist() == [64]
    assert run.input_tokens.tolist() == [1024] and run.ttft.tolist() == [pytest.approx(0.1505)]
    # a concurrency only further up the path is not read: the run's folder names none
    elsewhere = _genai_perf(tmp_path / "concurrency8" / "run")
    with pytest.raises(InputError, match=r"no concurrency in the name of its folder.*give --concurrency"):
        read_benchmark_files([elsewhere], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)
    assert read_benchmark_files(
        [elsewhere], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4, concurrency=4
    ).concurrency.tolist() == [4]
    # the folder's name holds it as genai-perf writes it, the last one counting
    assert genai_perf_concurrency("a/m-concurrency1-openai-chat-concurrency16/p.csv") == 16
    assert genai_perf_concurrency("a/myconcurrency16/p.csv") is None
    absurd = _genai_perf(tmp_path / "m-openai-chat-concurrency1000000000")
    with pytest.raises(InputError, match="concurrency<N> of its folder's name' = 1e\\+09"):
        read_benchmark_files([absurd], "qwen3-32b", "h100-sxm", "vllm", tensor_parallel=4)


def test_cross_validation_fits_at_most_the_capped_folds_and_leaves_each_run_out_once(monkeypatch):
    # Leave-one-out refit once per run (100 runs: 241 s); now at most MAX_CV_FOLDS + 1 fits. The fit and
    # the prediction are stubbed: the test counts the fits and the runs each one leaves out.
    runs = 3 * MAX_CV_FOLDS + 2
    frame = pd.DataFrame(
        {"ttft": 0.2, "tpot": 0.02, "engine": "vllm", "accelerator": "h100-sxm", "input_tokens": 1000.0,
         "output_tokens": 100.0, "concurrency": [float(i + 1) for i in range(runs)], "tensor_parallel": 1.0}
    )  # fmt: skip
    fitted, held = [], []

    def fit(rows, _base):
        fitted.append(set(rows.concurrency))
        return CalibrationFit({}, engine_profile("vllm"), {})

    def errors(rows, _profiles):
        held.append(set(rows.concurrency))
        return rows.assign(ttft_error=0.1, tpot_error=-0.05)

    monkeypatch.setattr(calibration, "_refit_engine", fit)
    monkeypatch.setattr(calibration, "prediction_errors", errors)
    result = calibrate_engine(frame, "vllm")
    assert len(fitted) == MAX_CV_FOLDS + 1 and result.runs == runs
    everything = set(frame.concurrency)
    folds = held[1:]  # held[0]: the full fit's in-sample errors
    assert sorted(c for fold in folds for c in fold) == sorted(everything)  # each run held out once
    assert all(rest == everything - fold for rest, fold in zip(fitted[1:], folds, strict=True))
    # up to MAX_CV_FOLDS runs it stays leave-one-out
    fitted.clear()
    held.clear()
    steps = []
    calibrate_engine(frame.iloc[:4], "vllm", progress=lambda done, total: steps.append((done, total)))
    assert len(fitted) == 5 and all(len(fold) == 1 for fold in held[1:])
    # the progress bar's steps: the full fit, then each of the 4 runs left out, each reported as it ends
    assert steps == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    with pytest.raises(InputError, match="1,001 runs; one calibration reads at most 1,000"):
        calibrate_engine(pd.concat([frame] * 32, ignore_index=True).iloc[: MAX_CALIBRATION_RUNS + 1], "vllm")


@pytest.mark.parametrize(
    ("held_out", "interval", "words"),
    [
        ((0.21, 0.2), {"ttft": (0.874, 11_000.0), "tpot": (1.15, 1.35)}, "TTFT interval 0.874x-1.1e+04x"),
        ((0.1, 0.8), {"ttft": (0.8, 1.3), "tpot": (0.9, 1.1)}, "held-out TPOT error 80% is above 50%"),
        ((0.1, 0.1), {"ttft": (0.8, 1.3), "tpot": (0.0004, 1.1)}, "TPOT interval 0.0004x-1.1x"),
        ((float("nan"), 0.1), {"ttft": (0.8, 1.3), "tpot": (0.9, 1.1)}, "held-out TTFT error nan%"),
    ],
)
def test_a_fit_too_uncertain_to_use_is_refused(held_out, interval, words):
    # the one-week TTFT's fit (interval 0.874x-11,000x, written before), a wide held-out error, an interval
    # that rounds to 0 in the registry file (it failed its own re-check), NaN
    uncertain = UserCalibration(ENGINES["vllm"], (0.1, 0.1), held_out, interval, 4)
    with pytest.raises(InputError, match="too uncertain to use") as caught:
        check_calibration(uncertain)
    assert words in str(caught.value)
    with pytest.raises(InputError, match=r"engine_entry_yaml\(\): the fit is too uncertain"):
        engine_entry_yaml(uncertain, "vllm", "h100-sxm", ["a.json"])
    check_calibration(SOUND)  # a sound fit passes


def test_an_uncertain_fit_is_reported_and_not_written(tmp_path, monkeypatch):
    path = _runs_file(tmp_path, "runs.jsonl", [RUN] * 3)
    out = tmp_path / "out"
    out.mkdir()
    uncertain = UserCalibration(ENGINES["vllm"], (0.13, 0.19), (0.21, 0.2), {"ttft": (0.874, 1.1e4), "tpot": (1, 1)}, 3)
    monkeypatch.setattr(calibration, "calibrate_engine", lambda *_, **__: uncertain)
    result = _calibrate([path], out)
    _refused(result, "too uncertain to use", "TTFT interval", "nothing written")
    assert "80% interval (factors on a prediction): TTFT 0.874-1.1e+04" in result.stdout  # reported
    assert list(out.iterdir()) == []


def test_a_written_file_that_fails_its_recheck_leaves_nothing_and_a_sound_one_is_written_whole(tmp_path, monkeypatch):
    path = _runs_file(tmp_path, "runs.jsonl", [RUN] * 3)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(calibration, "calibrate_engine", lambda *_, **__: SOUND)
    monkeypatch.setattr(calibration, "engine_entry_yaml", lambda *_, **__: "engines:\n- id: vllm\n  bogus: 1\n")
    _refused(_calibrate([path], out), "--write", "not a valid registry file", "mine.yaml", "nothing written")
    assert list(out.iterdir()) == []
    (out / "mine.yaml").write_text("keep: me\n", encoding="utf-8")  # an existing file is not touched either
    _refused(_calibrate([path], out), "nothing written")
    assert [p.name for p in out.iterdir()] == ["mine.yaml"] and (out / "mine.yaml").read_text() == "keep: me\n"
    # a sound fit replaces it whole, with the permissions a plain write gives and no temporary file beside it
    monkeypatch.setattr(calibration, "engine_entry_yaml", engine_entry_yaml)
    result = _calibrate([path], out)
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] == ["mine.yaml"]
    assert os.stat(out / "mine.yaml").st_mode & 0o777 == 0o666 & ~_umask()
    assert load_registry(extra=[out / "mine.yaml"]).engines["vllm"].prediction_interval.ttft == (0.8, 1.3)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
