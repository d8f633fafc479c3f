"""``servecalc frontier``: throughput per GPU against tokens per second per user (Figure 6)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..precision import DEFAULT_PRECISION
from ._app import (
    ExtraOption,
    Format,
    FormatOption,
    JsonOption,
    OutOption,
    _emit,
    _format,
    _library_errors,
    _load,
    app,
    tokens,
)
from ._tables import frame_table
from .sizing import AcceleratorOption, EngineOption, PrecisionOption


@app.command("frontier")
def frontier_command(
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Registry model id or alias.")],
    input_tokens: Annotated[float, typer.Option("--input", metavar="TOKENS", parser=tokens(), help="Prompt tokens.")],
    output_tokens: Annotated[float, typer.Option("--output", metavar="TOKENS", parser=tokens(), help="Output tokens.")],
    accelerator: AcceleratorOption = ["h100-sxm"],  # noqa: B006
    precision: PrecisionOption = [DEFAULT_PRECISION],  # noqa: B006
    engine: EngineOption = None,
    pareto_only: Annotated[bool, typer.Option("--pareto/--all", help="Only the Pareto-optimal points.")] = True,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Throughput per GPU against tokens per second per user (Figure 6), per accelerator."""
    from ..fleet import frontier

    fmt = _format(output_format, as_json)
    registry = _load(None, extra)
    with _library_errors():
        table = frontier(model, accelerator, precision, input_tokens, output_tokens, engine=engine, registry=registry)
    if table.empty:
        typer.echo(
            f"error: no configuration of {model} fits in memory on {', '.join(accelerator)} at "
            f"{', '.join(precision)}; try larger tensor-parallel degrees or another accelerator",
            err=True,
        )
        raise typer.Exit(1)
    if pareto_only:
        table = table[table.pareto]
    table = table.sort_values(["accelerator", "tokens_per_s_per_user"], ascending=[True, False])
    _emit(
        fmt,
        out,
        (lambda: table.to_json(orient="records", indent=2))
        if fmt is Format.json
        else (lambda: _text(table, pareto_only)),
        lambda: table,
        models=["fleet.frontier"],
        registry_ids=[model],
        inputs={
            "model": model,
            "accelerator": accelerator,
            "precision": precision,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "engine": engine or "generic",
            "pareto_only": pareto_only,
        },
    )


#: The frontier's columns as the table heads them (the CSV and JSON keep the names on the left).
FRONTIER_HEADERS = {
    "accelerator": "GPU",
    "precision": "precision",
    "tensor_parallel": "TP",
    "expert_parallel": "EP",
    "data_parallel": "attention ranks",
    "redundant_experts": "redundant experts",
    "batch": "batch",
    "tokens_per_s_per_gpu": "tokens/s per GPU",
    "tokens_per_s_per_user": "tokens/s per user",
    "ttft_ms": "TTFT [ms]",
    "tpot_ms": "TPOT [ms]",
    "replicas": "replicas",
    "utilization": "utilization",
    "ttft_binds": "TTFT bound by",
    "pareto": "Pareto-optimal",
}


def _text(table: Any, pareto_only: bool) -> str:
    """The table for people: a mixture of experts' layout columns only where a row uses one."""
    unused = {"expert_parallel": 1, "data_parallel": 1, "redundant_experts": 0, "pareto": True if pareto_only else None}
    shown = {
        column: header
        for column, header in FRONTIER_HEADERS.items()
        if column not in unused or not (table[column] == unused[column]).all()
    }
    return frame_table(table, shown)
