"""``servecalc calibrate``: fit an engine's costs to your own serving benchmarks, write them as a registry file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from ..errors import CalculatorError
from ..precision import DEFAULT_PRECISION
from ._app import ExtraOption, WeightPrecisionOption, _check_out, _fail, _library_errors, _load, _stderr_progress, app


@app.command("calibrate")
def calibrate_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="Benchmark results: vLLM 'vllm bench serve --save-result' JSON, SGLang bench_serving JSONL, "
            "genai-perf CSV exports.",
        ),
    ],
    model: Annotated[str, typer.Option("--model", metavar="MODEL", help="Registry model id the runs served.")],
    accelerator: Annotated[
        str, typer.Option("--accelerator", "-a", metavar="GPU", help="Registry accelerator id they ran on.")
    ],
    engine: Annotated[str, typer.Option("--engine", metavar="ENGINE", help="vllm, sglang or trtllm.")],
    precision: WeightPrecisionOption = DEFAULT_PRECISION,
    tp: Annotated[int, typer.Option("--tp", metavar="INT", min=1, help="Tensor-parallel degree of the runs.")] = 1,
    concurrency: Annotated[
        float | None,
        typer.Option(metavar="INT", min=1, help="Clients, for files that record none (genai-perf CSV)."),
    ] = None,
    arrivals: Annotated[
        str,
        typer.Option(
            metavar="dispersed|waves",
            help="How the harness's clients met: 'waves' if it sent identical requests that stayed together.",
        ),
    ] = "dispersed",
    length_cv: Annotated[
        float | None,
        typer.Option(
            "--length-cv",
            metavar="FLOAT",
            min=0.0,
            help="Spread of the runs' output lengths (coefficient of variation, e.g. 0.1); default: clients mixed "
            "from the second round on.",
        ),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            metavar="FILE",
            help="Write the calibrated engine as a registry file (then pass it with --extra to size, simulate).",
        ),
    ] = None,
    extra: ExtraOption = None,
) -> None:
    """Fit ENGINE's per-iteration, per-sequence and per-request costs and the GPU's speed to your own benchmark runs.

    The GPU's speed is a factor (0.25-4) on the GPU work of every iteration on the runs' accelerator, written
    for that accelerator only. Prints the fit, which of its parameters the runs determined and which they left
    at the engine's own values, its error in the fit and with each run left out (in at most 10 folds), and
    the 80% interval those held-out errors give; --write stores the engine as a registry file that the sizer, the
    simulator and --emit use when passed with --extra. At most 1,000 runs of plausible values are read;
    a fit whose held-out error is above 50% or whose interval reaches beyond 0.25x-4x is reported and
    refused (exit status 2), and nothing is written.
    """
    from ..calibration import (
        calibrate_engine,
        check_calibration,
        cross_validation_folds,
        engine_entry_yaml,
        read_benchmark_files,
    )

    registry = _load(None, extra)
    if write is not None:
        _check_out(write, "--write", "mine.yaml")
    with _library_errors(), _stderr_progress() as bar:
        frame = read_benchmark_files(
            files, model, accelerator, engine, precision, tp, concurrency=concurrency, arrivals=arrivals,
            length_cv=length_cv, registry=registry,
        )  # fmt: skip
        task = bar.add_task(f"fitting {engine} to {len(frame)} runs, then each fold left out", total=None)
        result = calibrate_engine(
            frame, engine, registry=registry, progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
        device = registry.accelerator(accelerator).id
    p = result.profile
    folds = cross_validation_folds(result.runs)
    left_out = "each run left out" if folds == result.runs else f"each run left out ({folds} folds)"
    lines = [
        f"calibrated {p.name} on {result.runs} runs of {model} on {tp} x {accelerator} at {precision}",
        f"step_overhead: {p.efficiency.step_overhead.m_as('ms'):.4g} ms",
        f"sequence_overhead: {p.efficiency.sequence_overhead.m_as('us'):.4g} us",
        f"request_overhead: {p.request_overhead.m_as('ms'):.4g} ms",
        f"gpu_time_scale on {device}: {p.efficiency_for(device).gpu_time_scale:.4g} (x the kernels' time)",
        *_determined_lines(result.determined),
        f"median |error| in the fit: TTFT {result.in_sample[0]:.1%}, TPOT {result.in_sample[1]:.1%}",
        f"{left_out}: TTFT {result.held_out[0]:.1%}, TPOT {result.held_out[1]:.1%}",
        "80% interval (factors on a prediction): "
        f"TTFT {result.interval['ttft'][0]:.3g}-{result.interval['ttft'][1]:.3g}, "
        f"TPOT {result.interval['tpot'][0]:.3g}-{result.interval['tpot'][1]:.3g}",
    ]
    typer.echo("\n".join(lines))
    try:  # the fit is reported above; one too uncertain to use is refused, and nothing is written
        check_calibration(result)
        text = engine_entry_yaml(result, engine, device, [str(f) for f in files], registry)
    except CalculatorError as exc:
        raise _fail(f"{exc}; nothing written" if write is not None else exc) from None
    if write is not None:
        _write_registry_file(write, text, extra)
        typer.echo(f"wrote {write}; use it with --extra {write}")


def _determined_lines(determined: Mapping[str, bool]) -> list[str]:
    """What the runs determined and what they left at the engine's own values (``UserCalibration.determined``)."""
    lines = []
    for label, flag in (
        ("determined by the runs", True),
        ("left at the engine's values (the runs do not move them)", False),
    ):
        names = [name for name, value in determined.items() if value is flag]
        if names:
            lines.append(f"{label}: {', '.join(names)}")
    return lines


def _write_registry_file(path: Path, text: str, extra: list[Path] | None) -> None:
    """Write ``text`` to ``path`` only once it loads as a registry file: nothing is left behind on failure.

    The text goes to a temporary file in the same folder, is loaded with the user's other ``--extra`` files,
    and only then renamed over ``path`` (a rename within a folder is atomic); any failure removes it.
    """
    import os
    import tempfile

    from ..registry import load_registry

    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".yaml")
    except OSError as exc:
        raise _fail(f"--write: cannot write {path.name} ({exc.strerror})") from None
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(handle, 0o666 & ~mask)  # the permissions a plain write would give, not mkstemp's 0600
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        load_registry(extra=[*(extra or []), Path(temporary)])  # the file it writes is a valid registry file
        os.replace(temporary, path)
    except OSError as exc:
        raise _fail(f"--write: cannot write {path.name} ({exc.strerror})") from None
    except CalculatorError as exc:
        message = str(exc).replace(temporary, path.name).replace(Path(temporary).name, path.name)
        raise _fail(
            f"--write: the calibrated engine is not a valid registry file ({message}); nothing written"
        ) from None
    finally:
        Path(temporary).unlink(missing_ok=True)
