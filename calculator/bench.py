"""Closing the loop: the benchmark that measures a plan's deployment, and the check of its results against the plan.

:func:`benchmark_command` gives the commands that measure one replica of a feasible
:class:`~calculator.fleet.FleetPlan` at the load the plan put on it: open-loop arrivals at the plan's rate per
replica (its arrival CV where the tool draws gamma gaps), the plan's mean prompt and output lengths spread
the way the tool spreads them, and enough requests for the TTFT percentile the plan targets. It is three
runs, at :data:`RATE_FRACTIONS` of that rate: the last is the plan's own load, which :func:`check_plan`
compares with the plan; the three together are what ``servecalc calibrate`` fits the engine on
(:func:`~calculator.calibration.read_benchmark_files` reads an open-loop run's clients by Little's law).

The tools (:data:`BENCH_TOOLS`) and the sources their flags were read in (:data:`BENCH_FLAGS`):

- vLLM: ``vllm bench serve`` (``vllm/benchmarks/serve.py`` and ``datasets.py`` of the vllm 0.14.0 wheel);
- SGLang: ``python3 -m sglang.bench_serving`` (``sglang/bench_serving.py`` of the sglang 0.5.9 wheel);
- TensorRT-LLM: ``python -m tensorrt_llm.serve.scripts.benchmark_serving``, the path its documentation gives
  for ``trtllm-serve`` (docs/source/commands/trtllm-serve/run-benchmark-with-trtllm-serve.md); the script is
  an adaptation of vLLM's ``benchmark_serving.py`` with the same flags and the same result JSON
  (``tensorrt_llm/serve/scripts/benchmark_serving.py``).

:func:`check_plan` reads the results (vLLM's and TensorRT-LLM's ``--save-result`` JSON, SGLang's
``--output-file`` JSONL), takes the run at the plan's rate per replica, and says target by target whether the
measured value sits inside the plan's 80 % interval, below it or above it, and whether to re-plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .results import Result, percentile_label
from .types import Rate
from .units import Q_

if TYPE_CHECKING:
    import pandas as pd

    from .fleet import FleetPlan

__all__ = [
    "BENCH_FLAGS",
    "BENCH_TOOLS",
    "RATE_FRACTIONS",
    "BenchmarkCommand",
    "BenchmarkCheck",
    "benchmark_command",
    "check_plan",
]

#: The benchmark tools :func:`benchmark_command` writes for, by the engine whose server they measure.
BENCH_TOOLS = ("vllm", "sglang", "trtllm")

_VLLM = "vllm 0.14.0 wheel, vllm/benchmarks/serve.py add_cli_args"
_VLLM_DATA = "vllm 0.14.0 wheel, vllm/benchmarks/datasets.py (random dataset arguments)"
_SGLANG = "sglang 0.5.9 wheel, sglang/bench_serving.py (its argument parser)"
_TRTLLM = "NVIDIA/TensorRT-LLM tensorrt_llm/serve/scripts/benchmark_serving.py (its argument parser)"

#: Each tool's flags that :func:`benchmark_command` sets, and where each was read.
BENCH_FLAGS: Mapping[str, Mapping[str, str]] = {
    "vllm": {
        **dict.fromkeys(
            ("--backend", "--host", "--port", "--model", "--request-rate", "--burstiness", "--num-prompts"), _VLLM
        ),
        **dict.fromkeys(("--save-result", "--result-filename", "--ignore-eos"), _VLLM),
        **dict.fromkeys(("--percentile-metrics", "--metric-percentiles"), _VLLM),
        **dict.fromkeys(("--dataset-name", "--random-input-len", "--random-output-len"), _VLLM_DATA),
        "--random-range-ratio": f"{_VLLM_DATA}: lengths uniform on [len x (1 - r), len x (1 + r)], r in [0, 1)",
    },
    "sglang": {
        **dict.fromkeys(("--backend", "--host", "--port", "--model", "--dataset-name", "--num-prompts"), _SGLANG),
        **dict.fromkeys(("--random-input-len", "--random-output-len", "--output-file"), _SGLANG),
        "--random-range-ratio": f"{_SGLANG}: compute_random_lens draws uniformly on [len x r, len]",
        "--request-rate": f"{_SGLANG}: Poisson arrivals (get_request draws exponential gaps; no burstiness flag)",
    },
    "trtllm": {
        **dict.fromkeys(
            ("--backend", "--host", "--port", "--model", "--request-rate", "--burstiness", "--num-prompts"), _TRTLLM
        ),
        **dict.fromkeys(("--save-result", "--result-filename", "--ignore-eos", "--random-prefix-len"), _TRTLLM),
        **dict.fromkeys(("--random-ids", "--tokenize-on-client"), _TRTLLM),
        **dict.fromkeys(("--percentile-metrics", "--metric-percentiles", "--dataset-name"), _TRTLLM),
        **dict.fromkeys(("--random-input-len", "--random-output-len"), _TRTLLM),
        "--random-range-ratio": f"{_TRTLLM}: lengths uniform on [len x (1 - r), len x (1 + r)], r in [0, 1)",
    },
}

#: The executable of each tool.
EXECUTABLES = {
    "vllm": ("vllm", "bench", "serve"),
    "sglang": ("python3", "-m", "sglang.bench_serving"),
    "trtllm": ("python", "-m", "tensorrt_llm.serve.scripts.benchmark_serving"),
}

#: The runs of a benchmark, as fractions of the plan's rate per replica: the last is the plan's own load
#: (:func:`check_plan` compares it); three loads are the fewest ``servecalc calibrate`` fits an engine on.
RATE_FRACTIONS = (0.5, 0.75, 1.0)

#: The shortest run at the plan's rate, in seconds: a few minutes, so the arrivals' randomness averages out.
MIN_RUN_SECONDS = 120.0

#: Requests of a run, at least: this many times the running batch (each sequence slot turns over ten times),
#: and this many beyond the TTFT percentile the plan targets (ten requests above a p99 need 1,000).
BATCH_TURNOVER = 10
TAIL_REQUESTS = 10

#: The largest range ratio of vLLM's and TensorRT-LLM's random dataset (r < 1): a CV of 0.99 / sqrt(3) = 0.57.
_MAX_SYMMETRIC_RATIO = 0.99

#: The largest burstiness written (gamma shape 1 / CV^2): arrivals almost evenly spaced.
_MAX_BURSTINESS = 100.0

#: How close a run's rate must be to the plan's rate per replica to be compared with the plan (relative).
RATE_TOLERANCE = 0.05


@dataclass(frozen=True, repr=False)
class BenchmarkCommand(Result):
    """The runs that measure one replica of a plan with a serving benchmark tool.

    Attributes
    ----------
    tool : str
        ``"vllm"``, ``"sglang"`` or ``"trtllm"``: the engine whose benchmark client it is.
    command : str
        The runs as shell lines, after one ``#`` comment line per note.
    arguments : tuple of tuple of str
        Each run's command as an argument list (executable first).
    rates : tuple of Quantity [request / time]
        Each run's request rate (:data:`RATE_FRACTIONS` of ``plan_rate``).
    plan_rate : Quantity [request / time]
        The plan's rate per replica (the workload's rate over the replicas).
    requests : int
        Requests of each run (the largest of :data:`BATCH_TURNOVER` x the running batch, :data:`MIN_RUN_SECONDS`
        at the plan's rate and :data:`TAIL_REQUESTS` beyond the TTFT percentile).
    input_len, output_len : int
        The tool's ``--random-input-len`` and ``--random-output-len``.
    range_ratio : float
        The tool's ``--random-range-ratio``: the spread of the lengths, from the plan's output CV.
    burstiness : float or None
        ``--burstiness`` (gamma arrivals of CV ``1 / sqrt(burstiness)``); None for SGLang (Poisson only).
    result_files : tuple of str
        The file each run writes (SGLang appends every run to one JSONL file).
    citations : dict
        Each flag and where it was read (:data:`BENCH_FLAGS`).
    notes : tuple of str
        Where the runs differ from the plan's workload.
    """

    tool: str
    command: str
    arguments: tuple[tuple[str, ...], ...]
    rates: tuple[Rate, ...]
    plan_rate: Rate
    requests: int
    input_len: int
    output_len: int
    range_ratio: float
    burstiness: float | None
    result_files: tuple[str, ...]
    citations: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _tool(plan: Any, tool: Any) -> str:
    """The tool asked for, or the plan's engine's (vLLM's for the engine-agnostic profile)."""
    if tool is None:
        return plan.engine if plan.engine in BENCH_TOOLS else "vllm"
    if not isinstance(tool, str) or tool.lower() not in BENCH_TOOLS:
        raise InputError(f"argument 'tool' must be one of {', '.join(BENCH_TOOLS)}, got {tool!r:.80}")
    return tool.lower()


def _feasible_plan(plan: Any, function: str) -> Any:
    """``plan`` once it is a feasible :class:`~calculator.fleet.FleetPlan` with its workload and targets."""
    from .fleet import FleetPlan

    if not isinstance(plan, FleetPlan):
        raise InputError(f"{function}(): argument 'plan' must be a FleetPlan, got {type(plan).__name__}")
    if not plan.feasible or plan.service is None or plan.layout is None:
        raise InputError(f"{function}(): the plan is infeasible ({plan.reason}); there is nothing to measure")
    if plan.workload is None or plan.targets is None:
        raise InputError(f"{function}(): the plan does not record its workload and targets (make it with size_fleet)")
    return plan


def _spread(tool: str, mean: float, cv: float, notes: list[str]) -> tuple[int, float]:
    """``(--random-*-len, --random-range-ratio)`` whose uniform lengths have mean ``mean`` and CV ``cv``.

    vLLM and TensorRT-LLM draw uniformly on ``[L (1 - r), L (1 + r)]``: mean ``L``, CV ``r / sqrt(3)``.
    SGLang draws uniformly on ``[L r, L]``: mean ``L (1 + r) / 2``, CV ``(1 - r) / ((1 + r) sqrt(3))``, so
    ``r = (1 - cv sqrt(3)) / (1 + cv sqrt(3))`` and ``L = 2 mean / (1 + r)``.

    Examples
    --------
    >>> _spread("vllm", 1000, 0.2, [])
    (1000, 0.346)
    >>> _spread("sglang", 1000, 0.0, [])
    (1000, 1.0)
    """
    root3 = math.sqrt(3)
    if tool == "sglang":
        ratio = max((1 - cv * root3) / (1 + cv * root3), 0.0)
        if cv * root3 > 1:
            notes.append(f"SGLang's uniform lengths reach a CV of 1/sqrt(3) = 0.58 at most; the plan's is {cv:.3g}")
        return max(round(2 * mean / (1 + ratio)), 1), round(ratio, 3)
    ratio = min(cv * root3, _MAX_SYMMETRIC_RATIO)
    if cv * root3 > _MAX_SYMMETRIC_RATIO:
        notes.append(f"the tool's uniform lengths reach a CV of 0.57 at most; the plan's is {cv:.3g}")
    return max(round(mean), 1), round(ratio, 3)


def _percentiles(plan: Any) -> tuple[str, ...]:
    """The percentiles a vLLM or TensorRT-LLM run reports: 50, 90, 99 and the plan's TTFT percentile."""
    asked = {50.0, 90.0, 99.0}
    if plan.targets.ttft_percentile is not None:
        asked.add(round(100 * float(plan.targets.ttft_percentile), 6))
    return tuple(_percent_word(p) for p in sorted(asked))


def _percent_word(percent: float) -> str:
    """How vLLM names a percentile in its result keys (``process_one_metric``): ``99``, ``99.9``."""
    return str(int(percent)) if int(percent) == percent else str(percent)


def _requests(plan: Any) -> int:
    """Requests of a run: :data:`BATCH_TURNOVER` batches, :data:`MIN_RUN_SECONDS`, :data:`TAIL_REQUESTS` in the tail."""
    rate = plan.workload.arrival_rate.m_as("request/s") / plan.replicas
    quantile = plan.targets.ttft_percentile
    tail = TAIL_REQUESTS / (1 - float(quantile)) if quantile is not None else 0.0
    wanted = max(BATCH_TURNOVER * plan.service.running_batch, rate * MIN_RUN_SECONDS, tail)
    return math.ceil(round(wanted, 6))


def benchmark_command(plan: FleetPlan, tool: str | None = None, *, registry: Any = None) -> BenchmarkCommand:
    """The serving-benchmark runs that measure one replica of ``plan`` at the load the plan puts on it.

    ``tool`` is ``"vllm"`` (``vllm bench serve``), ``"sglang"`` (``sglang.bench_serving``) or ``"trtllm"``
    (TensorRT-LLM's ``benchmark_serving``); by default the plan's engine's. Point it at one replica started
    with :func:`~calculator.deploy.launch_command` (the port is the engine's default there). The runs send
    :data:`RATE_FRACTIONS` of the plan's rate per replica, the plan's mean lengths with the spread of its output
    CV, each with :func:`_requests`'s count and ``ignore_eos`` so every output runs to its drawn length. An
    infeasible plan or an unknown tool is an :class:`~calculator.errors.InputError`.
    """
    from .deploy import PORTS, launch_command, shell_line

    plan = _feasible_plan(plan, "benchmark_command")
    assert plan.service and plan.targets and plan.workload and plan.layout  # _feasible_plan
    name = _tool(plan, tool)
    workload = plan.workload
    served = launch_command(plan, name, registry=registry).weights
    assert served is not None  # launch_command always names its weights
    notes: list[str] = []
    input_len, ratio = _spread(name, workload.input_tokens, workload.output_cv, notes)
    output_len, _ = _spread(name, workload.output_tokens, workload.output_cv, [])
    if abs(workload.input_cv - workload.output_cv) > 0.05:
        notes.append(
            f"one range ratio spreads prompts and outputs alike: it follows the output CV {workload.output_cv:.3g} "
            f"(the decode batch); the plan's prompt CV is {workload.input_cv:.3g}"
        )
    burstiness = None
    if name == "sglang":
        if abs(workload.arrival_cv - 1) > 0.05:
            notes.append(
                f"SGLang's bench_serving sends Poisson arrivals; the plan's arrival CV is {workload.arrival_cv:.3g}"
            )
    else:
        cv = max(workload.arrival_cv, 1 / math.sqrt(_MAX_BURSTINESS))
        burstiness = round(1 / cv**2, 4)
    plan_rate = workload.arrival_rate.m_as("request/s") / plan.replicas
    rates = tuple(float(f"{fraction * plan_rate:.4g}") for fraction in RATE_FRACTIONS)
    requests = _requests(plan)
    runs, files = [], []
    for rate in rates:
        flags, file = _tool_flags(name, plan, (served.repo, PORTS[name]), (input_len, output_len, ratio), rate)
        if burstiness is not None:
            flags["--burstiness"] = f"{burstiness:g}"
        flags["--num-prompts"] = str(requests)
        runs.append((*EXECUTABLES[name], *(part for pair in flags.items() for part in pair if part is not None)))
        files.append(file)
    if name == "sglang" and plan.targets.ttft_percentile not in (None, 0.5, 0.99):
        notes.append("SGLang's bench_serving records the mean, median and p99 TTFT, not the plan's percentile")
    command = "\n".join([*(f"# {note}" for note in notes), *(shell_line(run) for run in runs)])
    cited = BENCH_FLAGS[name]
    citations = {flag: cited[flag] for flag in cited if any(flag in run for run in runs)}
    return BenchmarkCommand(
        name, command, tuple(runs), tuple(Q_(r, "request/s") for r in rates), Q_(plan_rate, "request/s"),
        requests, input_len, output_len, ratio, burstiness, tuple(dict.fromkeys(files)), citations, tuple(notes),
    )  # fmt: skip


def _tool_flags(
    tool: str, plan: Any, server: tuple[str, int], lengths: tuple[int, int, float], rate: float
) -> tuple[dict[str, str | None], str]:
    """One run's flags (a ``None`` value is a switch) and the file it writes; the caller adds the counts."""
    input_len, output_len, ratio = lengths
    flags: dict[str, str | None] = {
        "--backend": "sglang" if tool == "sglang" else "openai",
        "--host": "127.0.0.1",
        "--port": str(server[1]),
        "--model": server[0],
        "--dataset-name": "random",
        "--random-input-len": str(input_len),
        "--random-output-len": str(output_len),
        "--random-range-ratio": f"{ratio:g}",
        "--request-rate": f"{rate:g}",
    }
    if tool == "sglang":  # ignore_eos is its default (--disable-ignore-eos turns it off)
        file = f"bench-{tool}.jsonl"
        flags["--output-file"] = file
        return flags, file
    file = f"bench-{tool}-rate{rate:g}.json"
    if tool == "trtllm":  # token ids drawn at random, tokenized by the client: no ShareGPT download, exact lengths
        flags |= {"--random-prefix-len": "0", "--random-ids": None, "--tokenize-on-client": None}
    flags |= {"--ignore-eos": None, "--percentile-metrics": "ttft,tpot,itl,e2el"}
    flags |= {"--metric-percentiles": ",".join(_percentiles(plan)), "--save-result": None, "--result-filename": file}
    return flags, file


# --------------------------------------------------------------------------------------------- check


@dataclass(frozen=True, repr=False)
class BenchmarkCheck(Result):
    """Measured against predicted, target by target, for the run at the plan's rate per replica.

    Attributes
    ----------
    table : DataFrame
        One row per target: ``target`` (``ttft``, ``tpot``), ``statistic`` (the plan's: ``p99``, ``mean``),
        ``measured``, ``predicted``, ``low`` and ``high`` (the plan's 80 % interval) and ``target`` in ms,
        ``verdict`` (``within interval``, ``better`` below it, ``worse`` above it) and ``meets_target``.
    replan : bool
        Whether a measured value left the plan's interval (a worse one: the plan under-provisions; a better one:
        it over-provisions).
    advice : str
        What to do, in a sentence: the calibrate and re-size commands when ``replan``.
    run : str
        The file (and JSONL line) compared.
    rate : Quantity [request / time]
        The rate that run sent; ``plan_rate`` the plan's per replica.
    throughput : Quantity [request / time]
        The requests that run completed per second.
    """

    table: pd.DataFrame = field(repr=False)
    replan: bool
    advice: str
    run: str
    rate: Rate
    plan_rate: Rate
    throughput: Rate


def _statistic_key(plan: Any) -> tuple[str, str]:
    """``(label, result key)`` of the TTFT statistic the plan targets: ``("p99", "p99_ttft_ms")`` or the mean."""
    quantile = plan.targets.ttft_percentile
    if quantile is None:
        return "mean", "mean_ttft_ms"
    return percentile_label(quantile), f"p{_percent_word(round(100 * float(quantile), 6))}_ttft_ms"


def _run_at_rate(records: list[tuple[str, Mapping[str, Any]]], plan_rate: float) -> tuple[str, Mapping[str, Any]]:
    """The run whose request rate is the plan's rate per replica (within :data:`RATE_TOLERANCE`)."""
    from .calibration_files import result_number

    rated = []
    for where, record in records:
        rate = record.get("request_rate")
        if isinstance(rate, str) and rate.strip().lower() == "inf":
            continue  # all requests at once: a throughput run, not a load the plan predicts
        if rate is not None:
            rated.append((abs(result_number(where, "request_rate", rate) / plan_rate - 1), where, record))
    if not rated:
        names = ", ".join(where for where, _ in records[:3]) + (", ..." if len(records) > 3 else "")
        raise InputError(
            f"{names}: no run records a finite request_rate; check_plan() expects the benchmark_command() runs "
            "(open-loop arrivals at the plan's rate per replica)"
        )
    gap, where, record = min(rated, key=lambda row: row[0])
    if gap > RATE_TOLERANCE:
        raise InputError(
            f"check_plan(): no run at the plan's rate per replica, {plan_rate:.4g} request/s (the nearest, {where}, "
            f"is {gap:.0%} off); run the benchmark_command() runs"
        )
    return where, record


def check_plan(plan: FleetPlan, results: Iterable[str | Path]) -> BenchmarkCheck:
    """Check ``plan`` against benchmark result files: measured, predicted and the plan's interval, target by target.

    ``results`` are the files :func:`benchmark_command`'s runs write (vLLM's and TensorRT-LLM's JSON, SGLang's
    JSONL; read within :mod:`calculator.calibration_files`'s caps). The run compared is the one at the plan's rate
    per replica; its TTFT statistic is the plan's (``p99_ttft_ms`` for a p99 target, ``mean_ttft_ms`` for a
    mean) and its TPOT the mean. A file that is not such a result, or a run that lacks the statistic, is an
    :class:`~calculator.errors.InputError` naming the file and the field.
    """
    import pandas as pd

    from .calibration_files import read_result_records, result_number

    plan = _feasible_plan(plan, "check_plan")
    assert plan.service and plan.targets and plan.workload and plan.layout  # _feasible_plan
    files = [Path(p) for p in _paths(results)]
    plan_rate = plan.workload.arrival_rate.m_as("request/s") / plan.replicas
    where, record = _run_at_rate(read_result_records(files), plan_rate)
    label, key = _statistic_key(plan)
    service, targets = plan.service, plan.targets
    rows = []
    for target, statistic, field_name, predicted, interval, goal in (
        ("ttft", label, key, service.ttft, service.ttft_interval, targets.ttft),
        ("tpot", "mean", "mean_tpot_ms", service.tpot, service.tpot_interval, targets.tpot),
    ):
        if field_name not in record:
            raise InputError(f"{where}: the run lacks '{field_name}' (the plan's {statistic} {target.upper()})")
        measured = result_number(where, field_name, record[field_name])
        low, high = (bound.m_as("ms") for bound in interval)
        verdict = "worse" if measured > high else "better" if measured < low else "within interval"
        rows.append(
            {"target": target, "statistic": statistic, "measured": measured, "predicted": predicted.m_as("ms"),
             "low": low, "high": high, "target_value": goal.m_as("ms"), "verdict": verdict,
             "meets_target": measured <= goal.m_as("ms")}
        )  # fmt: skip
    table = pd.DataFrame(rows)
    replan = bool((table.verdict != "within interval").any())
    if "request_throughput" not in record:
        raise InputError(f"{where}: the run lacks 'request_throughput' (completed requests per second)")
    throughput = result_number(where, "request_throughput", record["request_throughput"])
    sent = result_number(where, "request_rate", record["request_rate"])
    advice = _advice(plan, table, files)
    return BenchmarkCheck(
        table, replan, advice, where, Q_(sent, "request/s"), Q_(plan_rate, "request/s"), Q_(throughput, "request/s")
    )


def _paths(results: Any) -> list[Any]:
    if isinstance(results, str | Path) or not isinstance(results, Iterable):
        raise InputError(f"check_plan(): argument 'results' must be a list of files, got {results!r:.80}")
    paths = list(results)
    if not paths or not all(isinstance(p, str | Path) for p in paths):
        raise InputError("check_plan(): argument 'results' must be a non-empty list of file names")
    return paths


def _advice(plan: Any, table: Any, files: list[Path]) -> str:
    """What to do after the check: nothing, or calibrate the engine on the files and size again with it."""
    import shlex

    off = table[table.verdict != "within interval"]
    if off.empty:
        return "every target is within the plan's interval: the plan holds"
    what = ", ".join(f"{row.statistic} {row.target.upper()} {row.verdict}" for row in off.itertuples())
    engine = plan.engine if plan.engine in BENCH_TOOLS else "vllm"
    calibrate = shlex.join([
        "servecalc", "calibrate", *map(str, files), "--model", plan.model, "--accelerator", plan.accelerator,
        "--engine", engine, "--precision", plan.precision, "--tp", str(plan.layout.stage_gpus),
        "--write", "calibrated.yaml",
    ])  # fmt: skip
    return (
        f"re-plan ({what} than the plan's interval): {calibrate}; then size again with the same options and "
        f"--engine {engine} --extra calibrated.yaml"
    )
