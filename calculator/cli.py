"""Command-line interface: ``servecalc`` (or ``python -m calculator``).

Commands print tables for people. The commands that return tables (``registry list``, ``size``,
``frontier``) also take ``--format csv|json|xlsx`` (``--json`` is ``--format json``); CSV and JSON go
to standard output or to ``--out FILE``, XLSX needs ``--out FILE`` and writes the workbook of
:func:`calculator.export.to_xlsx` (inputs, results, and the formulas and registry sources used).
A bad registry file exits with status 2 and the :class:`~calculator.errors.RegistryError` message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import RegistryError

app = typer.Typer(help="Capacity planning for ML inference serving.", no_args_is_help=True, add_completion=False)
registry_app = typer.Typer(help="Browse and validate the hardware and model registry.", no_args_is_help=True)
app.add_typer(registry_app, name="registry")

ExtraOption = Annotated[
    list[Path] | None,
    typer.Option("--extra", "-e", help="A user registry file applied over the base (repeatable)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (same as --format json).")]


class Format(StrEnum):
    """Output formats of the table-returning commands."""

    table = "table"
    csv = "csv"
    json = "json"
    xlsx = "xlsx"


FormatOption = Annotated[
    Format | None, typer.Option("--format", "-f", help="Output: table (default), csv, json, or xlsx (needs --out).")
]
OutOption = Annotated[
    Path | None, typer.Option("--out", "-o", help="Write the output to this file (required for xlsx).")
]


def _format(chosen: Format | None, as_json: bool) -> Format:
    """The format asked for; ``--json`` is ``--format json``."""
    if as_json and chosen not in (None, Format.json):
        typer.echo(f"error: --json conflicts with --format {chosen.value}", err=True)
        raise typer.Exit(2)
    return Format.json if as_json else (chosen or Format.table)


def _emit(fmt: Format, out: Path | None, text: Callable[[], str], frame: Callable[[], Any], **cite: Any) -> None:
    """Print or write a command's output: ``text()`` for table and JSON, ``frame()`` for CSV and XLSX."""
    from .export import to_csv, to_xlsx

    if fmt is Format.xlsx:
        if out is None:
            typer.echo("error: --format xlsx needs --out FILE", err=True)
            raise typer.Exit(2)
        to_xlsx(frame(), out, **cite)
        typer.echo(f"wrote {out}", err=True)
        return
    output = to_csv(frame()) if fmt is Format.csv else text()
    if out is None:
        typer.echo(output, nl=not output.endswith("\n"))
    else:
        out.write_text(output if output.endswith("\n") else output + "\n", encoding="utf-8")
        typer.echo(f"wrote {out}", err=True)


def _load(registry: Path | None, extra: list[Path] | None) -> Any:
    from .registry import load_registry

    try:
        return load_registry(registry, extra or ())
    except RegistryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@registry_app.command("list")
def registry_list(
    section: Annotated[
        str | None, typer.Argument(help="accelerators, interconnects, models, prices or sources")
    ] = None,
    registry: Annotated[Path | None, typer.Option(help="Base registry file.")] = None,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """List registry entries (id, name, provenance), by section."""
    fmt = _format(output_format, as_json)
    reg = _load(registry, extra)
    names = [section] if section else ["accelerators", "interconnects", "models", "prices"]
    rows: dict[str, list[dict[str, str]]] = {}
    for name in names:
        try:
            entries = reg.section(name)
        except RegistryError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        if name == "sources":
            rows[name] = [{"id": e.id, "name": e.title, "provenance": e.kind} for e in entries.values()]
        else:
            rows[name] = [{"id": e.id, "name": e.name, "provenance": e.provenance} for e in entries.values()]

    def table() -> str:
        lines = []
        for name, entries in rows.items():
            lines.append(f"{name} ({len(entries)})")
            width = max((len(e["id"]) for e in entries), default=0)
            lines.extend(f"  {e['id']:<{width}}  {e['name']}  [{e['provenance']}]" for e in entries)
        return "\n".join(lines)

    def frame() -> Any:
        import pandas as pd

        return pd.DataFrame([{"section": name, **e} for name, entries in rows.items() for e in entries])

    _emit(
        fmt,
        out,
        (lambda: json.dumps(rows, indent=2)) if fmt is Format.json else table,
        frame,
        registry_ids=[e["id"] for entries in rows.values() for e in entries],
        registry=reg,
    )


@registry_app.command("show")
def registry_show(
    entry_id: Annotated[str, typer.Argument(help="The id of an entry in any section.")],
    registry: Annotated[Path | None, typer.Option(help="Base registry file.")] = None,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one entry: every value with its unit and the sources it comes from."""
    reg = _load(registry, extra)
    try:
        section, entry = reg.find(entry_id)
    except RegistryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if section == "sources":
        data = entry.model_dump()
    else:
        data = entry.display_values()
        data["sources"] = [
            {**reg.sources[link.source].model_dump(), "fields": list(link.fields), "basis": link.note}
            for link in entry.sources
        ]
    if as_json:
        typer.echo(json.dumps({"section": section, **data}, indent=2))
        return
    typer.echo(f"{entry_id} ({section})")
    for key, value in data.items():
        if key != "sources":
            typer.echo(f"  {key}: {value}")
    if section != "sources":
        typer.echo("  sources:")
        for link in entry.sources:
            source = reg.sources[link.source]
            typer.echo(f"    - {source.title} <{source.url}> ({source.kind})")
            typer.echo(f"      covers: {', '.join(link.fields)}")
            if link.note:
                typer.echo(f"      note: {link.note}")


@registry_app.command("validate")
def registry_validate(
    file: Annotated[Path, typer.Argument(help="A registry YAML file (a full registry or a user file).")],
    over_base: Annotated[
        bool, typer.Option("--over-base/--standalone", help="Apply the file over the packaged registry.")
    ] = True,
) -> None:
    """Validate a registry file; exit status 2 with the error message if it is invalid."""
    from .registry import DEFAULT_REGISTRY_PATH

    reg = _load(DEFAULT_REGISTRY_PATH, [file]) if over_base else _load(file, None)
    counts = ", ".join(f"{len(reg.section(s))} {s}" for s in ("accelerators", "interconnects", "models", "prices"))
    typer.echo(f"{file}: valid ({counts} after loading)")


@registry_app.command("schema")
def registry_schema() -> None:
    """Print the JSON schema of registry files."""
    from .registry import schema_text

    typer.echo(schema_text(), nl=False)


def _quantity(name: str, text: str, unit: str) -> Any:
    """A quantity from the command line; a bare number takes ``unit``."""
    from .units import Q_

    try:
        value = Q_(float(text), unit) if text.replace(".", "", 1).isdigit() else Q_(text)
        return value.to(unit)
    except Exception:
        typer.echo(
            f"error: option --{name} expects a quantity like '{unit}' (for example 1 {unit}), got {text!r}", err=True
        )
        raise typer.Exit(2) from None


AcceleratorOption = Annotated[
    list[str], typer.Option("--accelerator", "-a", help="Candidate accelerator (repeatable).")
]
PrecisionOption = Annotated[
    list[str], typer.Option("--precision", "-p", help="Candidate weight precision (repeatable).")
]
EngineOption = Annotated[str | None, typer.Option(help="Serving engine profile: vllm, sglang or trtllm.")]


@app.command("size")
def size(
    model: Annotated[str, typer.Argument(help="Registry model id or alias.")],
    rate: Annotated[str, typer.Option(help="Arrival rate (request/s).")],
    input_tokens: Annotated[float, typer.Option("--input", help="Mean prompt tokens.")],
    output_tokens: Annotated[float, typer.Option("--output", help="Mean output tokens.")],
    ttft: Annotated[str, typer.Option(help="TTFT target, e.g. '500 ms'.")],
    tpot: Annotated[str, typer.Option(help="TPOT target, e.g. '40 ms'.")],
    accelerator: AcceleratorOption = ["h100-sxm"],  # noqa: B006 - typer reads list defaults
    precision: PrecisionOption = ["fp8"],  # noqa: B006
    engine: EngineOption = None,
    price: Annotated[str | None, typer.Option(help="GPU-hour price (USD/hour); default from the registry.")] = None,
    max_utilization: Annotated[float, typer.Option(help="Planned utilization ceiling.")] = 0.8,
    ttft_percentile: Annotated[float | None, typer.Option(help="Plan TTFT at this percentile.")] = None,
    arrival_cv: Annotated[float, typer.Option(help="Inter-arrival CV (1 = Poisson).")] = 1.0,
    input_cv: Annotated[float, typer.Option(help="Prompt-length CV.")] = 0.0,
    kv_precision: Annotated[str | None, typer.Option(help="KV-cache precision.")] = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Size the cheapest fleet serving MODEL at RATE within the TTFT and TPOT targets."""
    from rich.progress import Progress

    from .errors import CalculatorError
    from .fleet import default_price_entry, size_fleet

    fmt = _format(output_format, as_json)
    inputs = {
        "model": model,
        "accelerator": accelerator,
        "precision": precision,
        "arrival_rate": _quantity("rate", rate, "request/s"),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "ttft_slo": _quantity("ttft", ttft, "s"),
        "tpot_slo": _quantity("tpot", tpot, "s"),
        "engine": engine,
        "price": _quantity("price", price, "USD/hour") if price else None,
        "max_utilization": max_utilization,
        "ttft_percentile": ttft_percentile,
        "arrival_cv": arrival_cv,
        "input_cv": input_cv,
        "kv_precision": kv_precision,
    }
    try:
        with Progress(transient=True, disable=fmt is not Format.table) as bar:
            task = bar.add_task("searching configurations", total=None)
            plan = size_fleet(**inputs, progress=lambda done, total: bar.update(task, completed=done, total=total))
        prices = [default_price_entry(a).id for a in accelerator] if price is None else []
    except (CalculatorError, KeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    def table() -> str:
        from .results import format_value

        lines = [f"answer: {plan_summary(plan)}"] if plan.feasible else []
        lines += [
            f"{key}: {format_value(value)}"
            for key, value in plan.to_dict().items()
            if key not in ("rejected", "closest") and value not in (None, "")
        ]
        lines += [f"closest {key}: {format_value(value)}" for key, value in plan.closest.items()]
        lines += ["families:", *(f"  {key}: {why}" for key, why in plan.rejected.items())]
        return "\n".join(lines)

    from .fleet import plan_summary
    from .sweeps import PLAN_UNITS

    _emit(
        fmt,
        out,
        (lambda: json.dumps(plan.to_json_dict(), indent=2)) if fmt is Format.json else table,
        lambda: plan.to_frame(PLAN_UNITS),
        models=["fleet.size_fleet"],
        registry_ids=[model, *accelerator, *prices],
        inputs={k: v for k, v in inputs.items() if v is not None},
    )
    raise typer.Exit(0 if plan.feasible else 1)


@app.command("frontier")
def frontier_command(
    model: Annotated[str, typer.Argument(help="Registry model id or alias.")],
    input_tokens: Annotated[float, typer.Option("--input", help="Prompt tokens.")],
    output_tokens: Annotated[float, typer.Option("--output", help="Output tokens.")],
    accelerator: AcceleratorOption = ["h100-sxm"],  # noqa: B006
    precision: PrecisionOption = ["fp8"],  # noqa: B006
    engine: EngineOption = None,
    pareto_only: Annotated[bool, typer.Option("--pareto/--all", help="Only the Pareto-optimal points.")] = True,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Throughput per GPU against tokens per second per user (Figure 6), per accelerator."""
    from .errors import CalculatorError
    from .fleet import frontier

    fmt = _format(output_format, as_json)
    try:
        table = frontier(model, accelerator, precision, input_tokens, output_tokens, engine=engine)
    except (CalculatorError, KeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if pareto_only:
        table = table[table.pareto]
    table = table.sort_values(["accelerator", "tokens_per_s_per_user"], ascending=[True, False])
    _emit(
        fmt,
        out,
        (lambda: table.to_json(orient="records", indent=2))
        if fmt is Format.json
        else (lambda: table.round(2).to_string(index=False)),
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


def main() -> None:
    """Entry point of the ``servecalc`` console script."""
    app()
