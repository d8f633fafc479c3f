"""``servecalc predict``: what a closed-loop serving benchmark would report, one row per client concurrency.

The command prints :func:`~calculator.performance.predict_benchmark` over the ``--concurrency`` values: mean
TTFT and TPOT with their 80 % intervals, the throughputs, the batch the engine holds and what limits it (the KV
cache or the engine's sequence cap), and the prediction's caveats. The header says which engine profile,
KV-cache precision and step times the numbers rest on; the CSV and JSON rows carry the same columns (not the
caveats), in the units their names give.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import numpy as np
import typer

from ..precision import DEFAULT_PRECISION
from ._app import (
    ExtraOption,
    Format,
    FormatOption,
    JsonOption,
    OutOption,
    WeightPrecisionOption,
    _emit,
    _fail,
    _format,
    _library_errors,
    _load,
    app,
    tokens,
)
from .sizing import EngineOption, KvPrecisionOption, SpeculateOption, _speculation, _speculation_text


class Arrivals(StrEnum):
    """How the benchmark's clients meet: :data:`calculator.performance.ARRIVALS` (not imported with the CLI)."""

    dispersed = "dispersed"
    waves = "waves"


@app.command("predict")
def predict_command(
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Registry model id or alias.")],
    input_tokens: Annotated[
        int, typer.Option("--input", metavar="TOKENS", parser=tokens(), help="Prompt tokens per request (2K is 2,048).")
    ],
    output_tokens: Annotated[
        int, typer.Option("--output", metavar="TOKENS", parser=tokens(), help="Output tokens per request.")
    ],
    concurrency: Annotated[
        list[int],
        typer.Option("--concurrency", "-c", metavar="INT", min=1, help="Clients in the benchmark (repeatable)."),
    ],
    accelerator: Annotated[str, typer.Option("--accelerator", "-a", metavar="GPU", help="Accelerator id.")] = (
        "h100-sxm"
    ),
    precision: WeightPrecisionOption = DEFAULT_PRECISION,
    tensor_parallel: Annotated[int, typer.Option("--tp", metavar="INT", min=1, help="GPUs per replica.")] = 1,
    engine: EngineOption = None,
    engine_version: Annotated[
        str | None,
        typer.Option(
            metavar="RELEASE",
            help="The --engine release to price (e.g. 0.12 or 1.2.0): its dated mechanisms (scheduling, KV "
            "declaration), and whether the fit saw it (default: the current defaults, release unstated).",
            show_default=False,
        ),
    ] = None,
    kv_precision: KvPrecisionOption = None,
    arrivals: Annotated[
        Arrivals,
        typer.Option(help="How the clients meet: dispersed (lengths or timing vary a little) or waves (identical)."),
    ] = Arrivals.dispersed,
    length_cv: Annotated[
        float | None,
        typer.Option(
            metavar="CV",
            min=0.0,
            help="Spread of the output lengths: it mixes the clients after the first burst and lengthens the running "
            "sequences' mean context (default: mixed at once, none).",
            show_default=False,
        ),
    ] = None,
    requests_per_client: Annotated[
        float | None,
        typer.Option(
            metavar="N", min=1.0, help="Requests each client sends in the run (default: 10).", show_default=False
        ),
    ] = None,
    data_parallel: Annotated[
        int, typer.Option(metavar="INT", min=1, help="Mixture of experts: attention ranks of --tp GPUs each.")
    ] = 1,
    expert_parallel: Annotated[
        int, typer.Option(metavar="INT", min=1, help="Mixture of experts: GPUs the routed experts spread over.")
    ] = 1,
    redundant_experts: Annotated[
        int,
        typer.Option(
            metavar="INT", min=0, help="Mixture of experts: expert copies a load balancer places beside the experts."
        ),
    ] = 0,
    speculate: SpeculateOption = None,
    streaming: Annotated[
        bool,
        typer.Option(
            "--streaming/--no-streaming",
            help="Whether each token is streamed to its client, as serving benchmarks do; --no-streaming prices a run "
            "that returns each output whole (an offline throughput benchmark).",
        ),
    ] = True,
    stream_interval: Annotated[
        int | None,
        typer.Option(
            metavar="INT",
            help="Iterations between a streamed request's responses (TensorRT-LLM's stream_interval; default 1, a "
            "response every token).",
        ),
    ] = None,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """What a closed-loop serving benchmark of MODEL would report at each --concurrency.

    Each client sends its next request when its last one completes, all start together, and every
    request has --input prompt and --output output tokens. Prints the mean TTFT and TPOT with their
    80 % intervals, requests and output tokens per second, the batch the engine holds and what limits
    it (the KV cache or the engine's sequence cap), and where the prediction is less certain than its
    intervals (docs/performance-model.md). With --speculate each decode iteration is a speculative round and
    the TPOT its share of each token.
    """
    from ..kernels import tables_for
    from ..performance import BENCHMARK_UNITS, REQUESTS_PER_CLIENT, engine_profile, predict_benchmark
    from ..uncertainty import kernel_basis

    fmt = _format(output_format, as_json)
    if length_cv is not None and arrivals is Arrivals.waves:
        raise _fail("--length-cv applies to dispersed arrivals; identical requests in --arrivals waves have none")
    if engine_version is not None and engine is None:
        raise _fail("--engine-version needs --engine: the release of which engine")
    if not streaming and stream_interval not in (None, 1):
        raise _fail("--stream-interval applies to a streamed run; --no-streaming returns each output whole")
    registry = _load(None, extra)
    profile: Any = engine
    if engine_version is not None:
        with _library_errors():
            profile = engine_profile(engine, registry).for_release(engine_version)
    speculation = _speculation(speculate, registry)
    clients = np.asarray(concurrency, dtype=float)
    rounds = REQUESTS_PER_CLIENT if requests_per_client is None else requests_per_client
    with _library_errors():
        spec, device = registry.model(model), registry.accelerator(accelerator)
        result = predict_benchmark(
            spec, device, precision, tensor_parallel, input_tokens, output_tokens, clients, profile,
            kv_precision=kv_precision, requests_per_client=rounds, arrivals=arrivals.value, length_cv=length_cv,
            data_parallel=data_parallel, expert_parallel=expert_parallel, redundant_experts=redundant_experts,
            speculation=speculation, streaming=streaming, stream_interval=stream_interval, registry=registry,
        )  # fmt: skip
    header = {
        "model": spec.id,
        "accelerator": device.id,
        "precision": precision,
        "tensor_parallel": tensor_parallel,
        "gpus": tensor_parallel * data_parallel,
        "engine": result.engine,
        "engine_release": engine_version,
        "kv_precision": result.kv_precision,
        "kv_precision_basis": "given" if kv_precision else f"{result.engine} engine default",
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "arrivals": arrivals.value,
        "length_cv": length_cv,
        "requests_per_client": rounds,
        "speculate": speculate,
        "streaming": streaming,
        "stream_interval": 1 if stream_interval is None else stream_interval,
    }
    frame = _frame(header, result.to_frame(BENCHMARK_UNITS), clients)

    def table() -> str:
        first = (
            f"answer: {spec.id} {precision} on {header['gpus']} x {device.id} (TP {tensor_parallel}) under "
            f"{result.engine}, {input_tokens:,}/{output_tokens:,} tokens per request; KV cache "
            f"{result.kv_precision} ({header['kv_precision_basis']}); step times from "
            f"{kernel_basis(device.id, result.measured_kernels, tables_for(device).anchors)}"
            + (_speculation_text(speculation) if speculation is not None else "")
        )
        shown = _shown(frame)
        note = (
            f"closed loop, {rounds:g} requests per client, {arrivals.value} arrivals; the TTFT and TPOT ranges held "
            "the measured value in 80-85 % of cross-validated predictions (wider away from the H100), the output "
            "rate's is the two together (about 75 %)"
        )
        release = [f"release: {result.release_note}"] if result.release_note and result.release_fitted else []
        return "\n".join([first, *release, shown.round(2).to_string(index=False), note, *result.caveats()])

    _emit(
        fmt,
        out,
        (lambda: frame.to_json(orient="records", indent=2)) if fmt is Format.json else table,
        lambda: frame,
        models=["performance.predict_benchmark"],
        registry_ids=[spec.id, device.id],
        inputs={**header, "concurrency": list(concurrency)},
        registry=registry,
    )


def _shown(frame: Any) -> Any:
    """The table's columns as read: each value with its range, the batch held and what limits it."""
    shown = frame.assign(
        ttft=_ranges(frame, "ttft"),
        tpot=_ranges(frame, "tpot"),
        tokens=_ranges(frame, "output_throughput", "token/s"),
        held=frame["active_batch"].astype(int),
        limited=np.where(frame["memory_limited"], "KV cache", np.where(frame["sequence_limited"], "sequence cap", "-")),
    )[["concurrency", "ttft", "tpot", "throughput [request/s]", "tokens", "held", "limited"]]
    shown.columns = ["clients", "TTFT ms (80 % range)", "TPOT ms (80 % range)", "requests/s",
                     "output tokens/s (range)", "batch held", "limited by"]  # fmt: skip
    return shown


def _ranges(frame: Any, name: str, unit: str = "ms") -> list[str]:
    """``value (low-high)`` of ``name`` per row."""
    return [f"{_readable(v)} ({_readable(lo)}-{_readable(hi)})" for v, lo, hi in _columns(frame, name, unit)]


def _readable(value: float) -> str:
    """A number as read in a table: three significant digits below 100, whole ones with separators above."""
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def _columns(frame: Any, name: str, unit: str = "ms") -> Any:
    """``(value, low, high)`` of ``name`` per row, in ``unit`` (milliseconds by default)."""
    return zip(
        frame[f"{name} [{unit}]"],
        frame[f"{name}_interval.low [{unit}]"],
        frame[f"{name}_interval.high [{unit}]"],
        strict=True,
    )


def _frame(header: dict[str, Any], rows: Any, clients: np.ndarray) -> Any:
    """One row per concurrency: the header columns, the concurrency, then the prediction's columns."""
    frame = rows.drop(columns=["engine", "kv_precision", "streaming"])
    frame.insert(0, "concurrency", clients.astype(int))
    for position, (key, value) in enumerate(header.items()):
        frame.insert(position, key, value)
    return frame
