"""A user's own serving benchmark results as calibration rows: vLLM, SGLang and genai-perf files.

:func:`read_benchmark_files` reads vLLM's ``vllm bench serve --save-result`` JSON, SGLang's
``bench_serving`` JSONL and genai-perf's CSV export (:data:`BENCHMARK_FORMATS`) into the rows
:func:`calculator.calibration.load_benchmarks` gives, which ``servecalc calibrate`` fits an engine's costs
on (:func:`calculator.calibration.calibrate_engine`). Every file is read within caps (bytes, runs, lines)
and every measured value checked against :data:`PLAUSIBLE_RUN` (docs/hardening.md, "Calibration").
:mod:`calculator.calibration` re-exports the public names, where callers import them.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ._files import load_json, read_text
from ._support import count, registry_or_default
from .errors import InputError
from .performance.benchmark import check_length_cv
from .precision import check_precision
from .units import shown

__all__ = ["BENCHMARK_FORMATS", "read_benchmark_files", "read_result_records", "result_number"]

#: The result files :func:`read_benchmark_files` reads, by how their name ends.
BENCHMARK_FORMATS = {
    ".json": "vLLM `vllm bench serve --save-result` (one run per file)",
    ".jsonl": "SGLang `python -m sglang.bench_serving --output-file` (one run per line)",
    ".csv": "genai-perf `profile_export_genai_perf.csv` (a run per file; concurrency from its folder or --concurrency)",
}

#: The most bytes read from one benchmark file. A result without per-request details is a few KB; 32 MiB
#: holds the per-request details (``--save-detailed``: each request's token latencies) of about a million
#: tokens. A larger file, or one that is not a regular file (``/dev/zero``), is refused before it is parsed.
MAX_BENCHMARK_FILE_BYTES = 32 * 2**20

#: The most characters read from all the files of one call together.
MAX_BENCHMARK_TOTAL_CHARS = 256 * 2**20

#: The most runs (files, JSONL lines) one calibration reads: a sweep of 10 concurrencies x 10 length pairs x
#: 10 repeats. A JSONL file with more non-blank lines is refused before its lines are parsed.
MAX_CALIBRATION_RUNS = 1_000
RUNS_CAP_NOTE = f"one calibration reads at most {MAX_CALIBRATION_RUNS:,} runs (files and JSONL lines together)"

#: The most lines read from one genai-perf CSV export (its tables have about 20 rows).
MAX_GENAI_PERF_LINES = 1_000

#: Plausible values of one measured run, ``(low, high)`` in seconds, clients and tokens; a run outside is
#: refused with its file, the field and the range (docs/hardening.md). Generous physical bounds:
#: mean TTFT 0.1 ms-10 min (a forward pass and an HTTP response take more than 0.1 ms; a mean wait of
#: minutes is a stalled or overloaded server, not a serving cost to fit); mean TPOT 0.05 ms-10 s (20,000
#: tokens/s per stream is ten times the fastest single-stream decode published, 1,800 tokens/s for
#: Llama 3.1 8B on Cerebras in 2024; 0.1 token/s serves no one); concurrency 1-100,000 clients (one
#: client host opens about 28,000 connections to one server port with Linux's default ephemeral ports);
#: mean prompt and output lengths 1-10^7 tokens (the longest context window, Llama 4 Scout's, is 10M).
PLAUSIBLE_RUN: Mapping[str, tuple[float, float]] = {
    "ttft": (1e-4, 600.0),
    "tpot": (5e-5, 10.0),
    "concurrency": (1.0, 1e5),
    "input_tokens": (1.0, 1e7),
    "output_tokens": (1.0, 1e7),
}


def result_number(where: str, field: str, value: Any) -> float:
    """The finite number in field ``field`` of a benchmark file; an :class:`InputError` naming both otherwise."""
    if isinstance(value, str):
        value = value.strip().replace(",", "")  # genai-perf may group thousands
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{where}: field '{field}' must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise InputError(f"{where}: field '{field}' must be a number, got {shown(value, 60)}") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: field '{field}' must be a finite number, got {shown(value, 60)}")
    return number


def _measured(where: str, field: str, value: Any, key: str, unit: str = "", scale: float = 1.0) -> float:
    """Field ``field`` (in ``unit``; times ``scale`` in :data:`PLAUSIBLE_RUN`'s) inside ``key``'s plausible range."""
    number = result_number(where, field, value)
    low, high = PLAUSIBLE_RUN[key]
    if not low <= number * scale <= high:
        space = f" {unit}" if unit else ""
        raise InputError(
            f"{where}: field '{field}' = {number:.4g}{space} is outside the plausible range "
            f"{low / scale:g}{space} to {high / scale:g}{space} (docs/hardening.md)"
        )
    if key == "concurrency" and number != round(number):
        raise InputError(f"{where}: field '{field}' must be a whole number of clients, got {number:g}")
    return number * scale


#: The fields of a vLLM or SGLang result that :func:`_run_from_summary` reads.
_SUMMARY_FIELDS = ("completed", "total_input_tokens", "total_output_tokens", "mean_ttft_ms", "mean_tpot_ms")


def _run_from_summary(summary: Mapping[str, Any], where: str, concurrency: float | None) -> dict[str, float]:
    """One run of a vLLM or SGLang result: prompt and output tokens per request, clients, TTFT and TPOT."""
    missing = [name for name in _SUMMARY_FIELDS if name not in summary]
    if missing:
        raise InputError(
            f"{where}: not a serving benchmark result (needs {', '.join(_SUMMARY_FIELDS)}); lacks {', '.join(missing)}"
        )
    completed = result_number(where, "completed", summary["completed"])
    if completed < 1:
        raise InputError(f"{where}: field 'completed' must be at least 1 request, got {completed:g}")
    row: dict[str, float] = {}
    for kind in ("input", "output"):
        total = result_number(where, f"total_{kind}_tokens", summary[f"total_{kind}_tokens"])
        row[f"{kind}_tokens"] = _measured(
            where, f"total_{kind}_tokens / completed", total / completed, f"{kind}_tokens", "tokens"
        )
    row["ttft"] = _measured(where, "mean_ttft_ms", summary["mean_ttft_ms"], "ttft", "ms", 1e-3)
    row["tpot"] = _measured(where, "mean_tpot_ms", summary["mean_tpot_ms"], "tpot", "ms", 1e-3)
    clients = summary.get("max_concurrency")
    in_flight = _open_loop_clients(summary, where)
    if clients is not None:
        row["concurrency"] = _measured(where, "max_concurrency", clients, "concurrency")
    elif in_flight is not None:
        row["concurrency"] = _measured(where, "request_throughput x mean end-to-end latency", in_flight, "concurrency")
    elif concurrency is not None:
        row["concurrency"] = concurrency
    else:
        raise InputError(f"{where}: the result records no max_concurrency; give --concurrency")
    return row


#: The mean end-to-end latency of a result, by tool: vLLM's and TensorRT-LLM's (with ``--percentile-metrics``
#: naming ``e2el``), SGLang's (always written).
_E2E_FIELDS = ("mean_e2el_ms", "mean_e2e_latency_ms")


def _open_loop_clients(summary: Mapping[str, Any], where: str) -> float | None:
    """The clients an open-loop run held on average, by Little's law; None for a run that is not one.

    A run at a finite ``request_rate`` with no ``max_concurrency`` (``servecalc bench``'s) holds
    ``request_throughput x mean end-to-end latency`` requests in flight on average (Little's law), rounded
    to whole clients: :func:`read_benchmark_files` fits it as a closed loop of that many clients. The mean
    batch is the same; the waits of arrivals that bunch up are not in a closed loop's TTFT
    (docs/fleet-sizer.md, "Closing the loop").
    """
    rate = summary.get("request_rate")
    e2e = next((name for name in _E2E_FIELDS if name in summary), None)
    if rate is None or (isinstance(rate, str) and rate.strip().lower() == "inf") or e2e is None:
        return None
    if "request_throughput" not in summary:
        return None
    throughput = result_number(where, "request_throughput", summary["request_throughput"])
    return float(max(round(throughput * result_number(where, e2e, summary[e2e]) / 1e3), 1))


def genai_perf_concurrency(path: str | Path) -> float | None:
    """The clients of a genai-perf run, read from the name of the folder that holds its export (None: none named).

    genai-perf writes each run's exports (``profile_export_genai_perf.csv`` and ``.json``) into a folder of
    the run's own under ``artifacts/``, named ``<model>-<service kind>-<endpoint type or backend>-concurrency<N>``
    for ``--concurrency N`` (``request_rate<R>`` for a rate; ``_set_artifact_paths`` in genai-perf's
    ``parser.py``). The rule: the concurrency is the last ``concurrency<N>`` in the name of the export's own
    folder (its parent directory), starting the name or after ``-``, ``_`` or ``.``. Folders further up are
    not this run's: ``study-concurrency1/model-concurrency64/profile_export_genai_perf.csv`` ran 64 clients.

    Examples
    --------
    >>> genai_perf_concurrency("study-concurrency1/llama-openai-chat-concurrency64/profile_export_genai_perf.csv")
    64.0
    >>> genai_perf_concurrency("concurrency8/run/profile_export_genai_perf.csv") is None
    True
    """
    found = re.findall(r"(?:^|[-_.])concurrency(\d+)", Path(path).parent.name)
    return float(found[-1]) if found else None


#: The rows of genai-perf's CSV export that a run is read from (lower case, how the metric's name begins),
#: and their units.
_GENAI_PERF_ROWS = {
    "input_tokens": ("input sequence length", "tokens", 1.0),
    "output_tokens": ("output sequence length", "tokens", 1.0),
    "ttft": ("time to first token", "ms", 1e-3),
    "tpot": ("inter token latency", "ms", 1e-3),
}


def _run_from_genai_perf(text: str, path: Path, where: str, concurrency: float | None) -> dict[str, float]:
    """One run of genai-perf's CSV export (the average column of its metric rows)."""
    import csv
    import io

    values: dict[str, str] = {}
    reader = csv.reader(io.StringIO(text))
    try:
        for row in reader:
            if reader.line_num > MAX_GENAI_PERF_LINES:
                raise InputError(
                    f"{where}: more than {MAX_GENAI_PERF_LINES:,} lines; a genai-perf CSV export has about 20"
                )
            if len(row) >= 2 and row[0].strip():
                values.setdefault(row[0].strip().lower()[:80], row[1])
    except csv.Error as exc:  # a field over csv's 131,072 characters, a NUL byte
        raise InputError(f"{where}: not a genai-perf CSV export (line {reader.line_num}: {str(exc)[:120]})") from None
    run = {}
    for key, (name, unit, scale) in _GENAI_PERF_ROWS.items():
        label = next((label for label in values if label.startswith(name)), None)
        if label is None:
            raise InputError(f"{where}: genai-perf export without a row '{name}'")
        run[key] = _measured(where, label, values[label], key, unit, scale)
    clients = genai_perf_concurrency(path)
    if clients is not None:
        run["concurrency"] = _measured(where, "concurrency<N> of its folder's name", clients, "concurrency")
    elif concurrency is not None:
        run["concurrency"] = concurrency
    else:
        raise InputError(
            f"{where}: no concurrency in the name of its folder (genai-perf's ...-concurrency16/); give --concurrency"
        )
    return run


def _json_object(text: str, where: str) -> Mapping[str, Any]:
    """One JSON object (:func:`~calculator._files.load_json`: no duplicate keys, depth and digits bounded)."""
    value = load_json(text, where)
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: a benchmark result is a JSON object, got {type(value).__name__}")
    return value


def _where(path: Path) -> str:
    return path.name if len(str(path)) > 200 else str(path)


def _records_of_file(path: Path, text: str, room: int) -> list[tuple[str, Mapping[str, Any]]]:
    """The results in a JSON (one) or JSONL (a line each) file's ``text``, at most ``room`` of them."""
    import io

    where = _where(path)
    if path.suffix.lower() == ".json":
        return [(where, _json_object(text, where))]
    # JSONL: the non-blank lines, counted (at most room + 1 kept) before any is parsed
    lines = list(itertools.islice(((n, s) for n, s in enumerate(io.StringIO(text), 1) if s.strip()), room + 1))
    if len(lines) > room:
        raise InputError(f"{where}: too many runs; {RUNS_CAP_NOTE}")
    return [(f"{where}, line {n}", _json_object(s, f"{where}, line {n}")) for n, s in lines]


def _runs_of_file(path: Path, text: str, concurrency: float | None, room: int) -> list[dict[str, Any]]:
    """The runs in one benchmark file's ``text``, at most ``room`` of them (more: an :class:`InputError`).

    Each run also carries ``where`` (the file, and its line) and ``recorded_tp``, the tensor-parallel degree
    the record states (:func:`_recorded_tensor_parallel`; NaN if none), for :func:`_check_tensor_parallel`.
    """
    if path.suffix.lower() == ".csv":
        runs = [(_where(path), _run_from_genai_perf(text, path, _where(path), concurrency), math.nan)]
    else:
        runs = [
            (where, _run_from_summary(record, where, concurrency), _recorded_tensor_parallel(record, where))
            for where, record in _records_of_file(path, text, room)
        ]
    return [{**run, "where": where, "recorded_tp": recorded} for where, run, recorded in runs]


#: Fields a result may state its tensor-parallel degree in: vLLM's and TensorRT-LLM's ``--metadata KEY=VALUE``
#: writes each pair at the top level of the result JSON (``result_json[key] = value``, benchmark_serving.py).
TENSOR_PARALLEL_FIELDS = ("tensor_parallel_size", "tensor-parallel-size", "tp_size", "tp")


def _recorded_tensor_parallel(record: Mapping[str, Any], where: str) -> float:
    """The tensor-parallel degree a result records (:data:`TENSOR_PARALLEL_FIELDS`), NaN when it records none."""
    field = next((name for name in TENSOR_PARALLEL_FIELDS if name in record), None)
    if field is None:
        return math.nan
    value = record[field]
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,4}\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(
            f"{where}: field '{field}' must be a tensor-parallel degree (1, 2, 4, ...), got {shown(value)}"
        )
    return float(value)


def _check_tensor_parallel(runs: Any, model: Any, device: Any, precision: str, tp: int, registry: Any) -> None:
    """The runs could have been served on ``tp`` x ``device``: an :class:`InputError` naming the argument if not.

    Three checks, each a contradiction the files or the hardware give: a degree a run records
    (:data:`TENSOR_PARALLEL_FIELDS`) that is not ``tp``; weights per GPU larger than the GPU's memory; a run's
    mean TPOT below the time ``tp`` GPUs take to read the weights a decode step needs once (the active
    parameters' bytes per GPU over the memory bandwidth, a floor no batch or kernel beats; a run under it was
    served on more GPUs, or with speculative decoding, which the calibration does not model).
    """
    from .memory import device_share, min_tensor_parallel

    name = "read_benchmark_files(): argument 'tensor_parallel'"
    stated = runs[runs.recorded_tp.notna() & (runs.recorded_tp != tp)]
    if len(stated):
        first = stated.iloc[0]
        raise InputError(f"{name} is {tp}, but {first['where']} records a degree of {first.recorded_tp:g}")
    weights = device_share(model, tp, precision, precision, registry=registry).weights
    capacity = device.memory
    if weights > capacity:
        least = min_tensor_parallel(model, capacity, 1, 1, precision, precision, registry=registry)
        raise InputError(
            f"{name} {tp}: {model.id}'s weights at {precision} take {weights.to('GB'):~.4g} per GPU, more than "
            f"{device.id}'s {capacity:~g}; the runs were served on more GPUs "
            + (f"(at least {least})" if least else "(more than 64)")
        )
    active = (model.active_parameters or model.parameters) / model.parameters
    floor = (weights * active / device.memory_bandwidth).m_as("s")
    fast = runs[runs.tpot < floor]
    if len(fast):
        first = fast.iloc[0]
        raise InputError(
            f"{name} {tp} contradicts {first['where']}: its mean TPOT, {first.tpot * 1e3:.3g} ms, is below the "
            f"{floor * 1e3:.3g} ms {tp} x {device.id} take to read {model.id}'s active weights at {precision} once "
            f"({(weights * active).to('GB'):~.4g} per GPU at {device.memory_bandwidth:~P}), which every decode step "
            "does; the runs were served on more GPUs (or with speculative decoding, which the calibration does not "
            "model): give the degree they used"
        )


def _path_list(paths: Any, function: str) -> list[str | Path]:
    """``paths`` as a list of file names (at most one beyond the runs' cap), or an InputError naming the argument."""
    if isinstance(paths, str | Path) or not isinstance(paths, Iterable):
        raise InputError(f"{function}(): argument 'paths' must be a list of files, got {paths!r:.80}")
    chosen = list(itertools.islice(paths, MAX_CALIBRATION_RUNS + 1))
    if not chosen or not all(isinstance(p, str | Path) for p in chosen):
        raise InputError(f"{function}(): argument 'paths' must be a non-empty list of file names")
    return chosen


def _file_texts(paths: list[Path], formats: Mapping[str, str], function: str) -> Iterator[tuple[Path, str]]:
    """Each file of ``paths`` and its text, within :data:`MAX_CALIBRATION_RUNS` files and the byte caps."""
    if len(paths) > MAX_CALIBRATION_RUNS:
        raise InputError(f"{function}(): more than {MAX_CALIBRATION_RUNS:,} files; {RUNS_CAP_NOTE}")
    read = 0
    for path in paths:
        if path.suffix.lower() not in formats:
            raise InputError(f"{_where(path)}: unknown benchmark format; expected {', '.join(formats)}")
        text = read_text(path, MAX_BENCHMARK_FILE_BYTES, "benchmark file")
        read += len(text)
        if read > MAX_BENCHMARK_TOTAL_CHARS:
            raise InputError(
                f"{_where(path)}: the files hold more than {MAX_BENCHMARK_TOTAL_CHARS:,} characters together, "
                "the most one calibration reads"
            )
        yield path, text


def _read_runs(paths: list[Path], concurrency: float | None) -> list[dict[str, Any]]:
    """The runs of every file in ``paths``, within :data:`MAX_CALIBRATION_RUNS` and the byte caps."""
    runs: list[dict[str, Any]] = []
    for path, text in _file_texts(paths, BENCHMARK_FORMATS, "read_benchmark_files"):
        runs += _runs_of_file(path, text, concurrency, MAX_CALIBRATION_RUNS - len(runs))
        if len(runs) > MAX_CALIBRATION_RUNS:
            raise InputError(f"{_where(path)}: too many runs; {RUNS_CAP_NOTE}")
    if not runs:
        raise InputError("read_benchmark_files(): no benchmark runs in the files given")
    return runs


#: The result files :func:`read_result_records` reads (the tools' JSON summaries; genai-perf's CSV records no rate).
RESULT_FORMATS = {
    ".json": "vLLM `vllm bench serve --save-result` or TensorRT-LLM `benchmark_serving --save-result` (a run per file)",
    ".jsonl": BENCHMARK_FORMATS[".jsonl"],
}


def read_result_records(paths: Iterable[str | Path]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each run of vLLM's, TensorRT-LLM's (JSON) or SGLang's (JSONL) result files as it is written, with its place.

    ``(where, record)``: the file (and its line) and the JSON object of one run, read within the caps of
    :func:`read_benchmark_files` (bytes, runs). A file of another format, not JSON, or holding no run is an
    :class:`InputError` naming it.
    """
    records: list[tuple[str, Mapping[str, Any]]] = []
    chosen = _path_list(paths, "read_result_records")
    for path, text in _file_texts([Path(p) for p in chosen], RESULT_FORMATS, "read_result_records"):
        records += _records_of_file(path, text, MAX_CALIBRATION_RUNS - len(records))
        if len(records) > MAX_CALIBRATION_RUNS:
            raise InputError(f"{_where(path)}: too many runs; {RUNS_CAP_NOTE}")
    if not records:
        raise InputError("read_result_records(): no benchmark runs in the files given")
    return records


def read_benchmark_files(
    paths: Iterable[str | Path],
    model: str,
    accelerator: str,
    engine: str,
    precision: str = "bf16",
    tensor_parallel: int = 1,
    *,
    concurrency: float | None = None,
    arrivals: str = "dispersed",
    length_cv: float | None = None,
    registry: Any = None,
) -> Any:
    """Serving benchmark results as :func:`~calculator.calibration.load_benchmarks` rows, to fit and check an engine on.

    Reads vLLM's ``vllm bench serve`` JSON, SGLang's ``bench_serving`` JSONL (a line per run) and
    genai-perf's CSV export (:data:`BENCHMARK_FORMATS`; its concurrency from its folder's name,
    :func:`genai_perf_concurrency`). The files do not record the deployment, so the model, accelerator,
    engine, weight precision and tensor-parallel degree are given; ``concurrency`` stands in where a file
    records none; ``arrivals`` and ``length_cv`` describe the harness
    (:func:`~calculator.performance.predict_benchmark`). A degree the runs contradict (one a result records
    through ``--metadata``, weights that do not fit, a TPOT faster than reading the weights) is refused
    (:func:`_check_tensor_parallel`).

    Each file is read through :func:`~calculator._files.read_text` (a regular file of at most
    :data:`MAX_BENCHMARK_FILE_BYTES`, UTF-8), at most :data:`MAX_CALIBRATION_RUNS` runs in all, and every
    measured value must be a finite number inside :data:`PLAUSIBLE_RUN`; anything else is an
    :class:`InputError` naming the file and the field.
    """
    import pandas as pd

    chosen = _path_list(paths, "read_benchmark_files")
    if arrivals not in ("dispersed", "waves"):
        raise InputError(f"read_benchmark_files(): argument 'arrivals' must be dispersed or waves, got {arrivals!r}")
    spread = check_length_cv("read_benchmark_files", length_cv)
    reg = registry_or_default(registry, "read_benchmark_files")
    profile_name = engine_name(engine, reg)
    tp = count("read_benchmark_files", "tensor_parallel", tensor_parallel)
    if concurrency is not None:
        given = float(count("read_benchmark_files", "concurrency", concurrency))
        concurrency = _measured("read_benchmark_files()", "concurrency", given, "concurrency")
    runs = pd.DataFrame(_read_runs([Path(p) for p in chosen], concurrency))
    device, weight_precision = reg.accelerator(accelerator), check_precision(precision)
    _check_tensor_parallel(runs, reg.model(model), device, weight_precision, tp, reg)
    frame = runs.drop(columns=["where", "recorded_tp"])
    return frame.assign(
        model_path=reg.model(model).id,
        system=device.id,
        backend=profile_name,
        backend_version="user",
        model=reg.model(model).id,
        accelerator=device.id,
        precision=weight_precision,
        engine=profile_name,
        tensor_parallel=float(tp),
        harness=f"{profile_name} user",
        arrivals=arrivals,
        length_cv=math.inf if spread is None else spread,
        client_overhead=0.0,
        fit_client_overhead=False,
    )


def engine_name(engine: Any, registry: Any) -> str:
    """The registry id of ``engine`` (an engine name); an :class:`InputError` naming the known ones."""
    found = registry.engines.resolve(engine) if isinstance(engine, str) else None
    if found is None or found == "generic":
        known = ", ".join(sorted(k for k in registry.engines if k != "generic"))
        raise InputError(f"argument 'engine' must be one of {known}, got {engine!r:.80}")
    return found
