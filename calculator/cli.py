"""Command-line interface: ``servecalc`` (or ``python -m calculator``).

Commands print tables for people. The commands that return tables (``registry list``, ``size``,
``simulate``, ``frontier``) also take ``--format csv|json|xlsx`` (``--json`` is ``--format json``); CSV
and JSON go to standard output or to ``--out FILE``, XLSX needs ``--out FILE`` and writes the workbook
of :func:`calculator.export.to_xlsx` (inputs, results, and the formulas and registry sources used).
``simulate`` checks a plan (``size --json``'s file, or the sizing options) by simulating every request
(:mod:`calculator.simulation`); its progress bar goes to standard error. A bad registry file exits
with status 2 and the :class:`~calculator.errors.RegistryError` message; other bad input also exits
with status 2 and an ``error:`` line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import RegistryError

app = typer.Typer(help="Capacity planning for ML inference serving.", no_args_is_help=True, add_completion=False)


def _version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"servecalc {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Capacity planning for ML inference serving."""


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


class EmitTarget(StrEnum):
    """What ``size --emit`` prints instead of the table: an engine's launch command or a Kubernetes manifest."""

    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"
    k8s = "k8s"


EmitOption = Annotated[
    EmitTarget | None,
    typer.Option(
        "--emit",
        help="Print the feasible plan as a launch command (vllm, sglang, trtllm) or a Kubernetes manifest (k8s, of "
        "the --engine, default vllm) instead of the table.",
        show_default=False,
    ),
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

    if out is not None:
        _check_out(out)
    if fmt is Format.xlsx:
        if out is None:
            typer.echo("error: --format xlsx needs --out FILE", err=True)
            raise typer.Exit(2)
        to_xlsx(frame(), out, **cite)
        typer.echo(f"wrote {out}", err=True)
        return
    output = (to_csv(frame()) or "") if fmt is Format.csv else text()
    if out is None:
        typer.echo(output, nl=not output.endswith("\n"))
    else:
        try:
            out.write_text(output if output.endswith("\n") else output + "\n", encoding="utf-8")
        except OSError as exc:
            typer.echo(f"error: --out {out}: cannot write the file ({exc.strerror})", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"wrote {out}", err=True)


def _check_out(out: Path) -> None:
    """``--out`` names a file in a folder that exists (checked before any work is done)."""
    if out.is_dir():
        typer.echo(f"error: --out {out} is a folder; give a file name such as {out / 'plan.json'}", err=True)
        raise typer.Exit(2)
    if not out.parent.is_dir():
        typer.echo(f"error: --out {out}: the folder {out.parent} does not exist", err=True)
        raise typer.Exit(2)


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


def _quantity(name: str, text: str | None, unit: str, bare: str | None = None) -> Any:
    """A quantity from the command line, read by the library's strict parser (``units.parse_quantity``).

    A bare number is read in ``bare`` where the option's help says so (a rate in request/s); elsewhere a
    bare number is an error that names the option, so ``--tpot 40`` cannot become 40 seconds.
    """
    from .errors import UnitsError
    from .units import parse_quantity

    if text is None:
        typer.echo(f"error: option --{name} is required (a quantity like '1 {unit}')", err=True)
        raise typer.Exit(2)
    try:
        return parse_quantity(text, unit, what=f"option --{name}", bare=bare).to(unit)
    except UnitsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


AcceleratorOption = Annotated[
    list[str], typer.Option("--accelerator", "-a", help="Candidate accelerator (repeatable).")
]
PrecisionOption = Annotated[
    list[str], typer.Option("--precision", "-p", help="Candidate weight precision (repeatable).")
]
EngineOption = Annotated[str | None, typer.Option(help="Serving engine profile: vllm, sglang or trtllm.")]

# The sizing options: ``size`` requires the first six, ``simulate`` takes them when it has no ``--plan``.
ModelArgument = Annotated[str | None, typer.Argument(help="Registry model id or alias.", show_default=False)]
RateOption = Annotated[
    str | None, typer.Option(help="Arrival rate, e.g. '20 request/s' (a bare number is request/s).", show_default=False)
]
InputTokensOption = Annotated[float | None, typer.Option("--input", help="Mean prompt tokens.", show_default=False)]
OutputTokensOption = Annotated[float | None, typer.Option("--output", help="Mean output tokens.", show_default=False)]
TtftOption = Annotated[str | None, typer.Option(help="TTFT target with its unit, e.g. '500 ms'.", show_default=False)]
TpotOption = Annotated[str | None, typer.Option(help="TPOT target with its unit, e.g. '40 ms'.", show_default=False)]
PriceOption = Annotated[
    list[str] | None,
    typer.Option(
        help="GPU-hour price: '2.5 USD/hour' for every accelerator, or 'h100-sxm=2.5 USD/hour' for one (repeatable; "
        "a bare number is USD/hour). Default: the registry's price, shown in the output.",
        show_default=False,
    ),
]
TensorParallelOption = Annotated[
    list[int] | None,
    typer.Option("--tp", help="Candidate tensor-parallel degree (repeatable); default 1, 2, 4, 8.", show_default=False),
]
MaxUtilizationOption = Annotated[float, typer.Option(help="Planned utilization ceiling.")]
TtftPercentileOption = Annotated[float | None, typer.Option(help="Plan TTFT at this percentile.")]
ArrivalCvOption = Annotated[float, typer.Option(help="Inter-arrival CV (1 = Poisson).")]
InputCvOption = Annotated[float, typer.Option(help="Prompt-length CV.")]
OutputCvOption = Annotated[float, typer.Option(help="Output-length CV.")]
ChunkOption = Annotated[
    int | None, typer.Option("--chunk", help="Chunked-prefill token budget per iteration (tokens).", show_default=False)
]
TbtOption = Annotated[
    str | None,
    typer.Option("--tbt", help="Longest gap between two tokens with its unit, e.g. '200 ms'.", show_default=False),
]
PrefixHitOption = Annotated[
    float, typer.Option("--prefix-hit", help="Share of prompt tokens served from a prefix cache.")
]
KvPrecisionOption = Annotated[str | None, typer.Option(help="KV-cache precision.")]
RouterOption = Annotated[
    str | None,
    typer.Option(
        help="How requests are spread over the replicas: round_robin (the default), random, "
        "join_shortest_queue, least_outstanding_tokens or power_of_two."
    ),
]


def _prices(texts: list[str]) -> Any:
    """``--price`` values: one price for every accelerator, or ``GPU=price`` pairs (one per accelerator)."""
    pairs = [text.split("=", 1) for text in texts]
    if all(len(pair) == 1 for pair in pairs):
        if len(texts) > 1:
            typer.echo("error: give one --price for all accelerators, or --price GPU=PRICE for each", err=True)
            raise typer.Exit(2)
        return _quantity("price", texts[0], "USD/hour", bare="USD/hour")
    if not all(len(pair) == 2 for pair in pairs):
        typer.echo("error: --price: mix of 'GPU=PRICE' and a bare price; give GPU=PRICE for each", err=True)
        raise typer.Exit(2)
    prices: dict[str, Any] = {}
    for name, text in pairs:
        if name.strip() in prices:
            typer.echo(f"error: --price names {name.strip()} twice", err=True)
            raise typer.Exit(2)
        prices[name.strip()] = _quantity(f"price {name.strip()}", text, "USD/hour", bare="USD/hour")
    return prices


def _sizing_inputs(
    model: str | None,
    rate: str | None,
    input_tokens: float | None,
    output_tokens: float | None,
    ttft: str | None,
    tpot: str | None,
    accelerator: list[str],
    precision: list[str],
    engine: str | None,
    price: list[str] | None,
    max_utilization: float,
    ttft_percentile: float | None,
    arrival_cv: float,
    input_cv: float,
    kv_precision: str | None,
    router: str | None,
) -> dict[str, Any]:
    """The keyword arguments of :func:`~calculator.fleet.size_fleet` from the sizing options."""
    inputs = {
        "model": model,
        "accelerator": accelerator,
        "precision": precision,
        "arrival_rate": _quantity("rate", rate, "request/s", bare="request/s"),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "ttft_slo": _quantity("ttft", ttft, "s"),
        "tpot_slo": _quantity("tpot", tpot, "s"),
        "engine": engine,
        "price": _prices(price) if price else None,
        "max_utilization": max_utilization,
        "ttft_percentile": ttft_percentile,
        "arrival_cv": arrival_cv,
        "input_cv": input_cv,
        "kv_precision": kv_precision,
    }
    if router is not None:
        inputs["router"] = router
    return inputs


def _fail(exc: BaseException | str, code: int = 2) -> typer.Exit:
    """Print ``error: ...`` on standard error and return the exit to raise (``raise _fail(exc) from None``)."""
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code)


@contextlib.contextmanager
def _library_errors() -> Iterator[None]:
    """Turn a library error (or an unknown registry id) into ``error: ...`` and exit status 2.

    Enter it before a progress bar (``with _library_errors(), bar:``) so the bar is gone when the
    message is printed.
    """
    from .errors import CalculatorError

    try:
        yield
    except (CalculatorError, KeyError) as exc:
        raise _fail(exc) from None


def _fill_prices(inputs: dict[str, Any], registry: Any) -> list[str]:
    """Every candidate's price in ``inputs``: the one given with --price, else the registry's (ids returned)."""
    from .fleet import default_price_entry

    given, accelerators = inputs["price"], inputs["accelerator"]
    if isinstance(given, dict) and set(given) - set(accelerators):
        raise _fail(f"--price names {', '.join(sorted(set(given) - set(accelerators)))}, not a candidate (-a)")
    hourly, defaults = {}, []
    for name in accelerators:
        chosen = given.get(name) if isinstance(given, dict) else given
        if chosen is None:
            entry = default_price_entry(name, registry)
            chosen = entry.price
            defaults.append(entry.id)
        hourly[name] = chosen
    inputs["price"] = hourly
    return defaults


def _size_plan(inputs: dict[str, Any], bar: Any, registry: Any) -> Any:
    """:func:`~calculator.fleet.size_fleet` on the sizing inputs, with a task on the rich progress ``bar``."""
    from .fleet import size_fleet

    task = bar.add_task("searching configurations", total=None)
    return size_fleet(
        **inputs, registry=registry, progress=lambda done, total: bar.update(task, completed=done, total=total)
    )


def _stderr_progress() -> Any:
    """A transient rich progress bar on standard error, shown only when it is a terminal.

    Standard output stays clean for ``--json`` and ``--format csv``; a redirected standard error (a
    log file, a CI job) gets no bar at all rather than its control characters.
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


@app.command("size")
def size(
    model: ModelArgument,
    rate: RateOption,
    input_tokens: InputTokensOption,
    output_tokens: OutputTokensOption,
    ttft: TtftOption,
    tpot: TpotOption,
    accelerator: AcceleratorOption = ["h100-sxm"],  # noqa: B006 - typer reads list defaults
    precision: PrecisionOption = ["fp8"],  # noqa: B006
    engine: EngineOption = None,
    price: PriceOption = None,
    max_utilization: MaxUtilizationOption = 0.8,
    ttft_percentile: TtftPercentileOption = None,
    arrival_cv: ArrivalCvOption = 1.0,
    input_cv: InputCvOption = 0.0,
    kv_precision: KvPrecisionOption = None,
    router: RouterOption = None,
    tensor_parallel: TensorParallelOption = None,
    output_cv: OutputCvOption = 0.0,
    chunk: ChunkOption = None,
    tbt: TbtOption = None,
    prefix_hit: PrefixHitOption = 0.0,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
    emit: EmitOption = None,
) -> None:
    """Size the cheapest fleet serving MODEL at RATE within the TTFT and TPOT targets.

    The output starts with the workload, the targets and the prices as they were understood. With
    ``--emit`` it is the plan's launch command or Kubernetes manifest instead (calculator.deploy).
    """
    fmt = _format(output_format, as_json)
    if emit is not None and fmt is not Format.table:
        raise _fail(f"--emit {emit.value} conflicts with --format {fmt.value}")
    if out is not None:
        _check_out(out)
    registry = _load(None, extra)
    inputs = _sizing_inputs(
        model, rate, input_tokens, output_tokens, ttft, tpot, accelerator, precision, engine, price,
        max_utilization, ttft_percentile, arrival_cv, input_cv, kv_precision, router,
    )  # fmt: skip
    if tensor_parallel:
        inputs["tensor_parallel"] = tuple(tensor_parallel)
    inputs |= {"output_cv": output_cv, "chunk_size": chunk, "prefix_hit_rate": prefix_hit}
    if tbt is not None:
        inputs["tbt_slo"] = _quantity("tbt", tbt, "s")
    with _library_errors():
        prices = _fill_prices(inputs, registry)
        with _stderr_progress() as bar:
            plan = _size_plan(inputs, bar, registry)
    if emit is not None:
        _emit_deployment(plan, emit, out, registry)

    def table() -> str:
        from .results import format_value

        lines = _understood(inputs, prices)
        lines += [f"answer: {plan_summary(plan)}"] if plan.feasible else []
        lines += [
            f"{PLAN_LABELS.get(key, key)}: {format_value(value)}"
            for key, value in plan.to_dict().items()
            if key not in ("rejected", "closest", "workload", "targets", "rejections")
            and value not in (None, "")
            and (plan.feasible or isinstance(value, bool) or not isinstance(value, int | float) or value != 0)
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
        registry=registry,
    )
    raise typer.Exit(0 if plan.feasible else 1)


def _emit_deployment(plan: Any, emit: EmitTarget, out: Path | None, registry: Any) -> None:
    """``size --emit``: print (or write) the plan's launch command or manifest; an infeasible plan exits 1."""
    from .deploy import kubernetes_manifest, launch_command

    if not plan.feasible:
        raise _fail(f"no feasible plan, nothing to emit: {plan.reason}", code=1)
    with _library_errors():
        if emit is EmitTarget.k8s:
            engine = plan.engine if plan.engine in ("vllm", "sglang", "trtllm") else "vllm"
            text = kubernetes_manifest(plan, engine, registry=registry)
        else:
            text = launch_command(plan, emit.value, registry=registry).command
    _emit(Format.table, out, lambda: text, lambda: None)
    raise typer.Exit(0)


#: Labels of the plan's fields where the field name alone would mislead (the token costs count output tokens).
PLAN_LABELS = {
    "cost_per_million_tokens": "cost_per_million_output_tokens",
    "energy_per_million_tokens": "energy_per_million_output_tokens",
    "electricity_cost_per_million_tokens": "electricity_cost_per_million_output_tokens",
}


def _understood(inputs: dict[str, Any], defaults: list[str]) -> list[str]:
    """The first lines of ``size``: the workload, the targets and the prices, as the command read them."""
    rate = inputs["arrival_rate"].m_as("request/s")
    lines = [
        f"workload: {rate:,.6g} request/s; {inputs['input_tokens']:,.6g} prompt tokens -> "
        f"{inputs['output_tokens']:,.6g} output tokens (arrival CV {inputs['arrival_cv']:g}, "
        f"prompt-length CV {inputs['input_cv']:g}, output-length CV {inputs.get('output_cv', 0.0):g})"
        + (f"; prefix-cache hit rate {inputs['prefix_hit_rate']:g}" if inputs.get("prefix_hit_rate") else "")
        + (f"; chunked prefill at {inputs['chunk_size']:,} tokens" if inputs.get("chunk_size") else "")
    ]
    at = f"p{100 * inputs['ttft_percentile']:g}" if inputs.get("ttft_percentile") else "mean"
    gap = f", token gap {inputs['tbt_slo'].m_as('ms'):,.6g} ms" if inputs.get("tbt_slo") is not None else ""
    lines.append(
        f"targets: TTFT {inputs['ttft_slo'].m_as('ms'):,.6g} ms ({at}), TPOT {inputs['tpot_slo'].m_as('ms'):,.6g} ms"
        f"{gap}; utilization at most {inputs['max_utilization']:g}"
    )
    shown = ", ".join(f"{name} {price.m_as('USD/hour'):,.4g} USD/hour" for name, price in inputs["price"].items())
    lines.append(f"prices: {shown}" + (f" (registry entries: {', '.join(defaults)})" if defaults else " (given)"))
    return lines


#: The summary rows ``simulate`` prints: the latencies a serving target is written against.
SIMULATION_METRICS = ("ttft", "tpot", "token_gap")
SIMULATION_STATISTICS = ("mean", "p50", "p90", "p99")


def _plan_from_json(path: Path) -> Any:
    """The :class:`~calculator.fleet.FleetPlan` that ``servecalc size --json`` wrote to ``path``.

    The JSON holds every field of the plan, quantities as ``{"value": ..., "unit": ...}``; the plan
    is rebuilt as it was sized (not sized again), so its workload, targets, configuration and
    router are the ones recorded. A plan sized with ``verify=True`` loses its simulations (only the
    table was written).
    """
    import dataclasses

    from .fleet import FleetPlan, Rejection, Workload
    from .units import Q_

    def restore(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"value", "unit"}:
            return Q_(value["value"], value["unit"])
        if isinstance(value, dict):
            return {key: restore(item) for key, item in value.items()}
        if isinstance(value, list):
            return tuple(restore(item) for item in value)
        return value

    not_a_plan = f"{path} does not hold a plan written by 'servecalc size --json'"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(f"{not_a_plan} ({exc})") from None
    if not isinstance(data, dict) or not {"feasible", "model", "replicas"} <= set(data):
        raise _fail(not_a_plan)
    if data.get("workload") is None or not data.get("targets"):
        raise _fail(
            f"{path} does not record the plan's workload and targets (written by an older version?): "
            "size it again with 'servecalc size --json', or give the sizing options instead of --plan"
        )
    names = {field.name for field in dataclasses.fields(FleetPlan)} - {"verification"}
    try:
        values = {key: restore(value) for key, value in data.items() if key in names}
        values["workload"] = Workload(**values["workload"])
        values["rejections"] = tuple(Rejection(**record) for record in values.get("rejections", ()))
        return FleetPlan(**values)
    except Exception as exc:  # a hand-edited file: a unit pint cannot read, a field of the wrong kind
        raise _fail(f"{not_a_plan} ({type(exc).__name__}: {exc})") from None


def _summary_frame(result: Any) -> Any:
    """The latency summary of a run in ms: mean and percentiles of TTFT, TPOT and the longest token gap."""
    summary = result.summary
    rows = summary[summary.metric.isin(SIMULATION_METRICS) & summary.statistic.isin(SIMULATION_STATISTICS)]
    frame = rows[["metric", "statistic"]].reset_index(drop=True)
    for column in ("value", "low", "high"):
        frame[f"{column} [ms]"] = rows[column].to_numpy(dtype=float) * 1e3
    return frame


def _summary_text(result: Any) -> list[str]:
    frame = _summary_frame(result)
    seeds = len(result.seeds)
    basis = (
        f"pooled over {seeds} seeds, interval from their spread"
        if seeds > 1
        else "one seed, interval over ten batches of requests"
    )
    lines = [f"summary at {result.replicas} replicas ({basis}; 95% interval):"]
    for row in frame.itertuples(index=False):
        value, low, high = row[2], row[3], row[4]
        lines.append(f"  {row.metric:<10} {row.statistic:<5} {value:10.2f} ms  ({low:.2f} to {high:.2f})")
    attainment = ", ".join(f"{key} {share:.1%}" for key, share in result.attainment.items())
    lines.append(f"  attainment: {attainment or 'no targets'}")
    lines.append(
        f"  throughput {result.throughput.m_as('request/s'):.3g} request/s, "
        f"goodput {result.goodput.m_as('request/s'):.3g} request/s"
    )
    return lines


@app.command("simulate")
def simulate_command(
    model: ModelArgument = None,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="A plan written by 'servecalc size --json', in place of the sizing options.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    rate: RateOption = None,
    input_tokens: InputTokensOption = None,
    output_tokens: OutputTokensOption = None,
    ttft: TtftOption = None,
    tpot: TpotOption = None,
    accelerator: AcceleratorOption = ["h100-sxm"],  # noqa: B006 - typer reads list defaults
    precision: PrecisionOption = ["fp8"],  # noqa: B006
    engine: EngineOption = None,
    price: PriceOption = None,
    max_utilization: MaxUtilizationOption = 0.8,
    ttft_percentile: TtftPercentileOption = None,
    arrival_cv: ArrivalCvOption = 1.0,
    input_cv: InputCvOption = 0.0,
    kv_precision: KvPrecisionOption = None,
    router: Annotated[
        str | None,
        typer.Option(
            help="Router to simulate (default: the plan's). round_robin, random, join_shortest_queue, "
            "least_outstanding_tokens or power_of_two; with the sizing options the plan is also sized for it."
        ),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(min=1, help="Requests per seed and replica count (default 2,000 per replica, 6,000 to 60,000)."),
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, max=1000, help="Independent runs (the intervals are over them).")] = 2,
    replicas: Annotated[
        int | None, typer.Option(min=1, max=10_000, help="Simulate this many replicas instead of searching.")
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Search the fewest replicas meeting the targets (the default without --replicas)."
        ),
    ] = False,
    max_replicas: Annotated[
        int | None, typer.Option(min=1, help="Give up the search above this count (default twice the plan's plus 2).")
    ] = None,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Check a fleet plan by simulating every request through continuous-batching replicas.

    The plan comes from --plan (the JSON of 'servecalc size --json') or is sized from the same options
    as 'servecalc size'. With --verify (the default) the plan's replica count is simulated, then one
    fewer or one more until the fewest that meet the targets is found; with --replicas N only N are
    simulated. Progress goes to standard error, results to standard output.
    """
    from .simulation import router_name, simulate_plan, verify_plan

    fmt = _format(output_format, as_json)
    if replicas is not None and verify:
        raise _fail("give --replicas N (simulate N replicas) or --verify (search the fewest), not both")
    if router is not None:
        with _library_errors():
            router = router_name(router)
    sizing = {"MODEL": model, "--rate": rate, "--input": input_tokens, "--output": output_tokens,
              "--ttft": ttft, "--tpot": tpot, "--engine": engine, "--price": price,
              "--ttft-percentile": ttft_percentile, "--kv-precision": kv_precision}  # fmt: skip
    if plan_file is not None:
        given = [name for name, value in sizing.items() if value is not None]
        if given:
            raise _fail(f"--plan holds the plan; leave out the sizing options ({', '.join(given)})")
        plan = _plan_from_json(plan_file)
        if extra:  # the plan's own registry files, replaced by the ones given here
            _load(None, extra)
            files = tuple(str(Path(e).resolve()) for e in extra)
            plan = dataclasses.replace(plan, targets={**plan.targets, "registry_files": files})
        inputs: dict[str, Any] = {"plan": str(plan_file)}
    else:
        missing = ", ".join(name for name in list(sizing)[:6] if sizing[name] is None)
        if missing:
            raise _fail(f"give --plan FILE (from 'servecalc size --json') or the sizing options; missing {missing}")
        inputs = _sizing_inputs(
            model, rate, input_tokens, output_tokens, ttft, tpot, accelerator, precision, engine, price,
            max_utilization, ttft_percentile, arrival_cv, input_cv, kv_precision, router,
        )  # fmt: skip
        registry = _load(None, extra)
        with _library_errors(), _stderr_progress() as bar:
            _fill_prices(inputs, registry)
            plan = _size_plan(inputs, bar, registry)
    if not plan.feasible:
        raise _fail(f"the plan is infeasible, there is nothing to simulate: {plan.reason}", code=1)
    with _library_errors(), _stderr_progress() as bar:
        task = bar.add_task("simulating", total=1.0)
        options: dict[str, Any] = {"requests": requests, "seeds": seeds, "router": router,
                   "progress": lambda done: bar.update(task, completed=done)}  # fmt: skip
        if replicas is None:
            verification = verify_plan(plan, max_replicas=max_replicas, **options)
            results = verification.results
        else:
            verification = None
            results = {replicas: simulate_plan(plan, replicas=replicas, **options)}
    runs = dict(sorted(results.items()))
    first = next(iter(runs.values()))
    head: dict[str, Any] = {
        "plan": {
            key: getattr(plan, key)
            for key in ("model", "accelerator", "precision", "engine", "tensor_parallel", "batch", "replicas")
        },
        "router": first.router,
        "seeds": list(first.seeds),
        "requests_per_seed": {count: len(run.requests) // len(run.seeds) for count, run in runs.items()},
    }

    def text() -> str:
        lines = [
            f"plan: {plan.replicas} x {plan.accelerator} at {plan.precision} (TP {plan.tensor_parallel}), "
            f"batch cap {plan.batch}, engine {plan.engine}, router {first.router}",
            f"simulated: {len(first.seeds)} seed(s) x "
            + ", ".join(f"{n:,} requests at {count} replicas" for count, n in head["requests_per_seed"].items()),
        ]
        if verification is not None:
            found = verification.simulated_replicas
            lines += [
                f"verdict: {verification.verdict}",
                f"analytical replicas: {verification.analytical_replicas}",
                f"simulated replicas: {found if found is not None else 'none found'}",
                "",
                verification.table.drop(columns="verdict").round(3).to_string(index=False),
                "",
                *(f"  {row.replicas} replicas: {row.verdict}" for row in verification.table.itertuples()),
            ]
            shown: list[int] = [verification.analytical_replicas]
            if found is not None and found != verification.analytical_replicas:
                shown.append(found)
        else:
            lines.append(f"verdict: {first.verdict}")
            shown = [replicas] if replicas is not None else []
        for count in shown:
            lines += ["", *_summary_text(runs[count])]
        return "\n".join(lines)

    def as_json_text() -> str:
        if verification is not None:
            body: dict[str, Any] = {**head, **verification.to_json_dict()}
        else:
            body = {**head, "replicas": replicas, "meets_targets": first.meets_targets, "verdict": first.verdict}
        body["runs"] = {str(count): run.to_json_dict() for count, run in runs.items()}
        return json.dumps(body, indent=2)

    def frame() -> Any:
        return verification.table if verification is not None else _summary_frame(first)

    _emit(
        fmt,
        out,
        as_json_text if fmt is Format.json else text,
        frame,
        models=["simulation.verify_plan" if verification is not None else "simulation.simulate_plan"],
        registry_ids=[plan.model, plan.accelerator],
        inputs={
            **{k: v for k, v in inputs.items() if v is not None},
            "requests": requests if requests is not None else "default",
            "seeds": seeds,
            "router": first.router,
        },
    )


@app.command("frontier")
def frontier_command(
    model: Annotated[str, typer.Argument(help="Registry model id or alias.")],
    input_tokens: Annotated[float, typer.Option("--input", help="Prompt tokens.")],
    output_tokens: Annotated[float, typer.Option("--output", help="Output tokens.")],
    accelerator: AcceleratorOption = ["h100-sxm"],  # noqa: B006
    precision: PrecisionOption = ["fp8"],  # noqa: B006
    engine: EngineOption = None,
    pareto_only: Annotated[bool, typer.Option("--pareto/--all", help="Only the Pareto-optimal points.")] = True,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Throughput per GPU against tokens per second per user (Figure 6), per accelerator."""
    from .errors import CalculatorError
    from .fleet import frontier

    fmt = _format(output_format, as_json)
    registry = _load(None, extra)
    try:
        table = frontier(model, accelerator, precision, input_tokens, output_tokens, engine=engine, registry=registry)
    except (CalculatorError, KeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
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
