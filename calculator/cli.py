"""Command-line interface: ``servecalc`` (or ``python -m calculator``).

Commands print tables for people. The commands that return tables (``registry list``, ``size``,
``compare``, ``simulate``, ``frontier``) also take ``--format csv|json|xlsx`` (``--json`` is ``--format json``); CSV
and JSON go to standard output or to ``--out FILE``, XLSX needs ``--out FILE`` and writes the workbook
of :func:`calculator.export.to_xlsx` (inputs, results, and the formulas and registry sources used).
``simulate`` checks a plan (``size --json``'s file, or the sizing options) by simulating every request
(:mod:`calculator.simulation`); its progress bar goes to standard error. A bad registry file exits
with status 2 and the :class:`~calculator.errors.RegistryError` message; other bad input also exits
with status 2 and an ``error:`` line.

``size``, ``compare`` and ``simulate`` share the sizing options (:class:`SizingFlags`, declared once);
``compare`` sizes colocated and disaggregated serving side by side (:func:`calculator.fleet.compare_serving_modes`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import math
import typing
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from .errors import RegistryError
from .results import format_number as _number


class _PlainHelp:
    """Help as a reader needs it: a flag shows no ``<bool>`` type, an argument shows its name in capitals.

    typer renders every option's type (``<str>``, ``<bool>``); the options here carry a ``metavar``
    naming what to write (``TIME``, ``RATE``), flags get an empty one, and arguments are named in
    capitals (``MODEL``) in the usage line instead of typer's ``{model}``.
    """

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_parameters(self.params)
        # typer keeps a docstring's single line breaks, which rich then wraps again: one line per paragraph.
        text = inspect.cleandoc(getattr(self, "help", None) or "")
        self.help = "\n\n".join(" ".join(p.split()) for p in text.split("\n\n")) or None

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        _plain_parameters([option])
        return option


def _plain_parameters(params: list[Any]) -> None:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
        elif isinstance(param, TyperArgument):
            param.metavar = param.metavar or (param.name or "").upper()
            param.display_type_rich = _no_type  # type: ignore[method-assign]  # the name in capitals says it


def _no_type(ctx: Any) -> None:
    """An argument's type column in help: empty (typer would print ``<str>`` beside ``MODEL``)."""


class _Command(_PlainHelp, TyperCommand):
    """A command with :class:`_PlainHelp`; the usage line reads ``[OPTIONS] MODEL`` (``[MODEL]`` if optional)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(param.display_name_raw if param.required else f"[{param.display_name_raw}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class _Group(_PlainHelp, TyperGroup):
    """A command group with :class:`_PlainHelp`."""


class _Typer(typer.Typer):
    """A typer app whose groups and commands render help with :class:`_PlainHelp`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_Group, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return super().command(*args, cls=_Command, **kwargs)


app = _Typer(help="Capacity planning for ML inference serving.", no_args_is_help=True, add_completion=False)


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


registry_app = _Typer(help="Browse and validate the hardware and model registry.", no_args_is_help=True)
app.add_typer(registry_app, name="registry")

ExtraOption = Annotated[
    list[Path] | None,
    typer.Option("--extra", "-e", metavar="FILE", help="A user registry file applied over the base (repeatable)."),
]
RegistryOption = Annotated[
    Path | None, typer.Option(metavar="FILE", help="Base registry file (default: the packaged one).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (same as --format json).")]


class Format(StrEnum):
    """Output formats of the table-returning commands."""

    table = "table"
    csv = "csv"
    json = "json"
    xlsx = "xlsx"


FormatOption = Annotated[
    Format | None,
    typer.Option(
        "--format", "-f", show_default=False, help="Output: table (default), csv, json, or xlsx (needs --out)."
    ),
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
    Path | None, typer.Option("--out", "-o", metavar="FILE", help="Write the output to this file (required for xlsx).")
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
    registry: RegistryOption = None,
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
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="The id of an entry in any section.")],
    registry: RegistryOption = None,
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
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="A registry YAML file (a full registry or a user file).")
    ],
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


def _quantity(name: str, text: str | None, unit: str, bare: str | None = None, *, positive: bool = False) -> Any:
    """A quantity from the command line, read by the library's strict parser (``units.parse_quantity``).

    A bare number is read in ``bare`` where the option's help says so (a rate in request/s); elsewhere a
    bare number is an error that names the option, so ``--tpot 40`` cannot become 40 seconds. With
    ``positive`` a value of zero or below is an error naming the option (before any sizing).
    """
    from .errors import UnitsError
    from .units import parse_quantity

    if text is None:
        raise _fail(f"option --{name} is required (a quantity like '1 {unit}')")
    try:
        value = parse_quantity(text, unit, what=f"option --{name}", bare=bare).to(unit)
    except UnitsError as exc:
        raise _fail(exc) from None
    if positive and not value.magnitude > 0:
        raise _fail(f"option --{name}: must be greater than zero, got {text!r}")
    return value


# The options. Each carries a metavar naming what to write; the sizing options are the fields of
# SizingFlags, declared once for size, simulate and compare.
ModelArgument = Annotated[
    str | None, typer.Argument(metavar="MODEL", help="Registry model id or alias.", show_default=False)
]
AcceleratorOption = Annotated[
    list[str], typer.Option("--accelerator", "-a", metavar="GPU", help="Candidate accelerator id (repeatable).")
]
PrecisionOption = Annotated[
    list[str],
    typer.Option("--precision", "-p", metavar="PRECISION", help="Candidate weight precision (repeatable)."),
]
EngineOption = Annotated[
    str | None,
    typer.Option(metavar="ENGINE", help="Serving engine profile: vllm, sglang or trtllm (default: generic)."),
]
TimeHelp = "with its unit, e.g. '{}' (a bare number is an error)"


@dataclasses.dataclass(frozen=True)
class SizingFlags:
    """The sizing options of ``size``, ``simulate`` and ``compare``, one field per flag, as typed.

    :func:`_sizing_options` adds them to a command's options; :func:`_sizing_inputs` turns them into
    the keyword arguments of :func:`~calculator.fleet.size_fleet`. Left out on purpose: ``batches``
    (the searched grid of batch caps), ``idle_power_fraction`` and ``electricity_price`` (they change
    only the energy estimate, not the plan; the API takes them).
    """

    rate: Annotated[
        str | None,
        typer.Option(
            metavar="RATE",
            help="Arrival rate, e.g. '20 request/s' (a bare number is request/s). Required unless --trace.",
            show_default=False,
        ),
    ] = None
    input_tokens: Annotated[
        float | None,
        typer.Option("--input", metavar="TOKENS", min=1, help="Mean prompt length (tokens).", show_default=False),
    ] = None
    output_tokens: Annotated[
        float | None,
        typer.Option("--output", metavar="TOKENS", min=1, help="Mean output length (tokens).", show_default=False),
    ] = None
    trace: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="A CSV request trace (columns arrival_time in s, input_tokens, output_tokens): the rate, the mean "
            "lengths and the three CVs are read from it, in place of --rate, --input, --output and the CVs.",
            show_default=False,
        ),
    ] = None
    ttft: Annotated[
        str | None, typer.Option(metavar="TIME", help="TTFT target " + TimeHelp.format("500 ms"), show_default=False)
    ] = None
    tpot: Annotated[
        str | None, typer.Option(metavar="TIME", help="TPOT target " + TimeHelp.format("40 ms"), show_default=False)
    ] = None
    tbt: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Longest gap between two streamed tokens " + TimeHelp.format("200 ms"),
            show_default=False,
        ),
    ] = None
    percentile: Annotated[
        str | None,
        typer.Option(
            "--percentile",
            "--ttft-percentile",
            metavar="PCT",
            help="Plan TTFT at this percentile: 99, p99 or 0.99 (a number below 1 is a fraction). Default: the mean.",
            show_default=False,
        ),
    ] = None
    accelerator: AcceleratorOption = dataclasses.field(default_factory=lambda: ["h100-sxm"])
    precision: PrecisionOption = dataclasses.field(default_factory=lambda: ["fp8"])
    tensor_parallel: Annotated[
        list[int] | None,
        typer.Option(
            "--tp",
            metavar="INT",
            min=1,
            help="Candidate tensor-parallel degree (repeatable; default 1, 2, 4 and 8).",
        ),
    ] = None
    engine: EngineOption = None
    kv_precision: Annotated[
        str | None, typer.Option(metavar="PRECISION", help="KV-cache precision (default: the weights').")
    ] = None
    price: Annotated[
        list[str] | None,
        typer.Option(
            metavar="[GPU=]USD/h",
            help="GPU-hour price: '2.5 USD/hour' for every accelerator, or 'h100-sxm=2.5 USD/hour' for one "
            "(repeatable; a bare number is USD/hour). Default: the registry's price, shown in the output.",
            show_default=False,
        ),
    ] = None
    max_utilization: Annotated[
        float,
        typer.Option(
            metavar="FRACTION", min=0, max=1, help="Load each replica to at most this share of its throughput (> 0)."
        ),
    ] = 0.8
    arrival_cv: Annotated[
        float | None,
        typer.Option(metavar="CV", min=0, help="Inter-arrival time CV: 1 (the default) is Poisson, above 1 bursty."),
    ] = None
    input_cv: Annotated[
        float | None, typer.Option(metavar="CV", min=0, help="Prompt-length CV (default 0: one length).")
    ] = None
    output_cv: Annotated[
        float | None, typer.Option(metavar="CV", min=0, help="Output-length CV (default 0: one length).")
    ] = None
    prefix_hit: Annotated[
        float,
        typer.Option(
            "--prefix-hit",
            metavar="FRACTION",
            min=0,
            max=1,
            help="Prefix caching: share of requests whose prompt starts with the shared prefix (with --shared-prefix).",
        ),
    ] = 0.0
    shared_prefix: Annotated[
        float,
        typer.Option(
            "--shared-prefix",
            metavar="TOKENS",
            min=0,
            help="Prefix caching: tokens of the prefix those requests share, e.g. a system prompt (with --prefix-hit).",
        ),
    ] = 0.0
    speculate: Annotated[
        str | None,
        typer.Option(
            metavar="DRAFT:K:ALPHA",
            help="Speculative decoding: registry model DRAFT proposes K tokens per round (default 4), each accepted "
            "with probability ALPHA (default 0.7); e.g. 'llama-3.2-1b:4:0.7' or 'llama-3.2-1b'.",
            show_default=False,
        ),
    ] = None
    chunk: Annotated[
        int | None,
        typer.Option(
            "--chunk", metavar="TOKENS", min=1, help="Chunked prefill: prompt tokens per iteration.", show_default=False
        ),
    ] = None
    router: Annotated[
        str | None,
        typer.Option(
            metavar="ROUTER",
            help="How requests are spread over the replicas: round_robin (the default; with simulate --plan, the "
            "plan's), random, join_shortest_queue, least_outstanding_tokens or power_of_two.",
            show_default=False,
        ),
    ] = None
    extra: ExtraOption = None

    def given(self) -> list[str]:
        """The flags given on the command line (a value other than the default), as spelled there."""
        defaults = SizingFlags()
        return [_flag(name) for name in _SIZING_FIELDS if getattr(self, name) != getattr(defaults, name)]


_SIZING_FIELDS = tuple(field.name for field in dataclasses.fields(SizingFlags))


def _flag(name: str) -> str:
    """The command-line spelling of a :class:`SizingFlags` field (``input_tokens`` -> ``--input``)."""
    info = typing.get_args(typing.get_type_hints(SizingFlags, include_extras=True)[name])[1]
    declared = (info.default, *(info.param_decls or ()))  # typer keeps the first name given as the default
    return next((d for d in declared if isinstance(d, str) and d.startswith("--")), "--" + name.replace("_", "-"))


def _sizing_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the :class:`SizingFlags` options; it receives them as one ``sizing`` argument.

    typer reads a command's options from its signature, so the returned function's signature is the
    command's arguments, then the sizing options, then the command's own options.
    """
    hints = typing.get_type_hints(SizingFlags, include_extras=True)
    keyword = inspect.Parameter.KEYWORD_ONLY
    defaults = SizingFlags()
    flags = [
        inspect.Parameter(name, keyword, annotation=hints[name], default=getattr(defaults, name))
        for name in _SIZING_FIELDS
    ]
    own = [
        parameter.replace(kind=keyword)
        for parameter in inspect.signature(command, eval_str=True).parameters.values()
        if parameter.name != "sizing"
    ]

    def is_argument(parameter: inspect.Parameter) -> bool:
        return any(isinstance(info, typer.models.ArgumentInfo) for info in typing.get_args(parameter.annotation)[1:])

    parameters = [*filter(is_argument, own), *flags, *(p for p in own if not is_argument(p))]

    @functools.wraps(command)
    def with_sizing(**values: Any) -> None:
        sizing = SizingFlags(**{name: values.pop(name) for name in _SIZING_FIELDS})
        command(sizing=sizing, **values)

    with_sizing.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    with_sizing.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return with_sizing


def _prices(texts: list[str]) -> Any:
    """``--price`` values: one price for every accelerator, or ``GPU=price`` pairs (one per accelerator)."""
    pairs = [text.split("=", 1) for text in texts]
    if all(len(pair) == 1 for pair in pairs):
        if len(texts) > 1:
            raise _fail("give one --price for all accelerators, or --price GPU=PRICE for each")
        return _quantity("price", texts[0], "USD/hour", bare="USD/hour", positive=True)
    if not all(len(pair) == 2 for pair in pairs):
        raise _fail("--price: mix of 'GPU=PRICE' and a bare price; give GPU=PRICE for each")
    prices: dict[str, Any] = {}
    for name, text in pairs:
        if name.strip() in prices:
            raise _fail(f"--price names {name.strip()} twice")
        prices[name.strip()] = _quantity(f"price {name.strip()}", text, "USD/hour", bare="USD/hour", positive=True)
    return prices


def _percentile(text: str | None) -> float | None:
    """``--percentile``: ``99``, ``p99`` or ``0.99`` as the fraction the sizer takes (``None``: the mean)."""
    if text is None:
        return None
    raw = text.strip().lower()
    try:
        value = float(raw.removeprefix("p"))
    except ValueError:
        value = float("nan")
    fraction = value / 100 if raw.startswith("p") or value >= 1 else value
    if not 0 < fraction < 1:
        raise _fail(
            f"option --percentile: expected a percentile between 0 and 100 such as 99, p99 or 0.99, got {text!r}"
        )
    return fraction


def _speculation(text: str | None, registry: Any) -> Any:
    """``--speculate DRAFT:K:ALPHA`` as a :class:`~calculator.fleet.Speculation` (K and ALPHA may be left out)."""
    from .errors import CalculatorError
    from .fleet import Speculation

    if text is None:
        return None
    parts = text.split(":")
    example = "such as 'llama-3.2-1b:4:0.7' (draft model id, draft tokens per round, acceptance probability)"
    try:
        if not 1 <= len(parts) <= 3 or not parts[0].strip():
            raise ValueError
        values: dict[str, Any] = {"draft_model": parts[0].strip()}
        if len(parts) > 1:
            values["draft_length"] = int(parts[1])
        if len(parts) > 2:
            values["acceptance"] = float(parts[2])
    except ValueError:
        raise _fail(f"option --speculate: expected DRAFT:K:ALPHA {example}, got {text!r}") from None
    try:
        speculation = Speculation(**values)
        registry.model(speculation.draft_model)
    except (CalculatorError, KeyError) as exc:
        raise _fail(f"option --speculate: {exc}") from None
    return speculation


#: The traffic flags --trace replaces (with the size_fleet argument each sets).
_TRAFFIC = {
    "rate": "arrival_rate",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "arrival_cv": "arrival_cv",
    "input_cv": "input_cv",
    "output_cv": "output_cv",
}


def _missing(model: str | None, sizing: SizingFlags, rate_known: bool = False) -> list[str]:
    """The required sizing inputs not given: MODEL, the traffic (unless --trace) and the two targets."""
    needed: dict[str, Any] = {"MODEL": model, "--ttft": sizing.ttft, "--tpot": sizing.tpot}
    if sizing.trace is None:
        needed |= {"--rate": sizing.rate or rate_known or None, "--input": sizing.input_tokens,
                   "--output": sizing.output_tokens}  # fmt: skip
    order = ("MODEL", "--rate", "--input", "--output", "--ttft", "--tpot")
    return [name for name in order if name in needed and needed[name] is None]


def _sizing_inputs(model: str | None, sizing: SizingFlags, registry: Any, rate: Any = None) -> dict[str, Any]:
    """The keyword arguments of :func:`~calculator.fleet.size_fleet` from the sizing options.

    ``rate`` (a quantity) stands in for a missing ``--rate`` (``size --demand`` sizes at the curve's peak).
    Every check that names a flag runs here, before any sizing.
    """
    from .fleet import Workload

    if sizing.trace is not None:
        given = [_flag(name) for name in _TRAFFIC if getattr(sizing, name) is not None]
        if given:
            raise _fail(f"--trace gives the rate, the lengths and their CVs; leave out {', '.join(given)}")
        with _library_errors():
            workload = Workload.from_trace(sizing.trace)
        traffic = {argument: getattr(workload, argument) for argument in _TRAFFIC.values()}
    else:
        arrival = _quantity("rate", sizing.rate, "request/s", bare="request/s", positive=True) if sizing.rate else rate
        defaults = {"arrival_cv": 1.0, "input_cv": 0.0, "output_cv": 0.0}
        traffic = {
            argument: getattr(sizing, name) if getattr(sizing, name) is not None else defaults.get(argument)
            for name, argument in _TRAFFIC.items()
        }
        traffic["arrival_rate"] = arrival
    if sizing.max_utilization == 0:
        raise _fail("option --max-utilization: must be greater than zero (at most 1), got 0")
    if (sizing.prefix_hit > 0) != (sizing.shared_prefix > 0):
        raise _fail(
            "--prefix-hit and --shared-prefix go together: the share of requests that hit the prefix cache, "
            "and the tokens of the prefix they share"
        )
    if sizing.shared_prefix > traffic["input_tokens"]:
        raise _fail(
            f"--shared-prefix {sizing.shared_prefix:g} is longer than the mean prompt "
            f"({traffic['input_tokens']:g} tokens)"
        )
    inputs: dict[str, Any] = {
        "model": model,
        "accelerator": sizing.accelerator,
        "precision": sizing.precision,
        **traffic,
        "ttft_slo": _quantity("ttft", sizing.ttft, "s", positive=True),
        "tpot_slo": _quantity("tpot", sizing.tpot, "s", positive=True),
        "tbt_slo": _quantity("tbt", sizing.tbt, "s", positive=True) if sizing.tbt is not None else None,
        "engine": sizing.engine,
        "price": _prices(sizing.price) if sizing.price else None,
        "max_utilization": sizing.max_utilization,
        "ttft_percentile": _percentile(sizing.percentile),
        "kv_precision": sizing.kv_precision,
        "prefix_hit_rate": sizing.prefix_hit,
        "shared_prefix_tokens": sizing.shared_prefix,
        "speculation": _speculation(sizing.speculate, registry),
        "chunk_size": sizing.chunk,
    }
    if sizing.tensor_parallel:
        inputs["tensor_parallel"] = tuple(sizing.tensor_parallel)
    if sizing.router is not None:
        inputs["router"] = sizing.router
    return inputs


#: size_fleet's arguments size_disaggregated takes too (the rest are options of colocated serving).
_DISAGGREGATED_ARGUMENTS = frozenset(
    {"model", "accelerator", "precision", "arrival_rate", "input_tokens", "output_tokens", "ttft_slo", "tpot_slo",
     "engine", "max_utilization", "ttft_percentile", "price", "tensor_parallel", "input_cv", "arrival_cv",
     "kv_precision"}
)  # fmt: skip
#: The flags of colocated serving only: size --disaggregated refuses them, compare applies them to the colocated plan.
_COLOCATED_FLAGS = ("output_cv", "prefix_hit", "shared_prefix", "speculate", "chunk", "tbt", "router")


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


def _size_plan(inputs: dict[str, Any], bar: Any, registry: Any, **options: Any) -> Any:
    """:func:`~calculator.fleet.size_fleet` on the sizing inputs, with a task on the rich progress ``bar``."""
    from .fleet import size_fleet

    task = bar.add_task("searching configurations", total=None)
    return size_fleet(
        **inputs,
        registry=registry,
        progress=lambda done, total: bar.update(task, completed=done, total=total),
        **options,
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


# ------------------------------------------------------------------------------------------- showing a plan

#: Labels of the plan's fields where the field name alone would mislead (the token costs count output tokens).
PLAN_LABELS = {
    "cost_per_million_tokens": "cost_per_million_output_tokens",
    "energy_per_million_tokens": "energy_per_million_output_tokens",
    "electricity_cost_per_million_tokens": "electricity_cost_per_million_output_tokens",
    "handoff": "kv_handoff",
}


def _shown(key: str, value: Any) -> str:
    """A field's value as text: quantities in the unit of :data:`calculator.sweeps.PLAN_UNITS` (not compacted)."""
    from .sweeps import PLAN_UNITS
    from .units import ureg

    if isinstance(value, ureg.Quantity):
        unit = {**PLAN_UNITS, "handoff": "ms", "saving": "USD/hour"}.get(key) or PLAN_UNITS.get(f"{key}.low")
        value = value.to(unit) if unit else value
        return f"{_number(float(value.magnitude))} {value.units:~P}"
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, tuple | list):
        return "(" + ", ".join("none" if item is None else _shown(key, item) for item in value) + ")"
    if isinstance(value, dict):
        return ", ".join(f"{name} {_shown(name, item)}" for name, item in value.items())
    return str(value)


def _field_lines(result: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """``name: value`` lines of a plan's fields; an infeasible plan shows no zero configuration."""
    return [
        f"{PLAN_LABELS.get(key, key)}: {_shown(key, value)}"
        for key, value in result.to_dict().items()
        if key not in skip
        and value is not None
        and not (isinstance(value, str | dict | tuple) and not value)
        and (result.feasible or isinstance(value, bool) or not isinstance(value, int | float) or value != 0)
    ]


def _understood(inputs: dict[str, Any], defaults: list[str], trace: Path | None = None) -> list[str]:
    """The first lines of the output: the workload, the targets and the prices, as the command read them."""
    lines = [
        f"workload: {_number(inputs['arrival_rate'].m_as('request/s'))} request/s; "
        f"{_number(inputs['input_tokens'])} prompt tokens -> {_number(inputs['output_tokens'])} output tokens "
        f"(arrival CV {inputs['arrival_cv']:.3g}, prompt-length CV {inputs['input_cv']:.3g}, "
        f"output-length CV {inputs['output_cv']:.3g})"
        + (f"; read from the trace {trace.name}" if trace is not None else "")
        + (
            f"; prefix-cache hit rate {inputs['prefix_hit_rate']:g} on a {_number(inputs['shared_prefix_tokens'])}"
            "-token shared prefix"
            if inputs.get("prefix_hit_rate")
            else ""
        )
        + (f"; chunked prefill at {inputs['chunk_size']:,} tokens" if inputs.get("chunk_size") else "")
        + (
            f"; speculative decoding with draft {spec.draft_model} ({spec.draft_length} tokens per round, "
            f"acceptance {spec.acceptance:g})"
            if (spec := inputs.get("speculation")) is not None
            else ""
        )
    ]
    at = f"p{_number(100 * inputs['ttft_percentile'])}" if inputs.get("ttft_percentile") else "mean"
    gap = f", token gap {_number(inputs['tbt_slo'].m_as('ms'))} ms" if inputs.get("tbt_slo") is not None else ""
    lines.append(
        f"targets: TTFT {_number(inputs['ttft_slo'].m_as('ms'))} ms ({at}), "
        f"TPOT {_number(inputs['tpot_slo'].m_as('ms'))} ms{gap}; utilization at most {inputs['max_utilization']:g}"
    )
    shown = ", ".join(f"{name} {_number(price.m_as('USD/hour'))} USD/hour" for name, price in inputs["price"].items())
    lines.append(f"prices: {shown}" + (f" (registry entries: {', '.join(defaults)})" if defaults else " (given)"))
    return lines


def _pools(plan: Any) -> str:
    """A disaggregated plan's pools in a line: ``prefill 2 x h100-sxm at fp8 (TP 1); decode ...``."""
    p, d = plan.prefill, plan.decode
    return (
        f"prefill {p['replicas']} x {p['accelerator']} at {p['precision']} (TP {p['tensor_parallel']}); "
        f"decode {d['replicas']} x {d['accelerator']} at {d['precision']} (TP {d['tensor_parallel']}, "
        f"batch cap {d['batch']})"
    )


def _configuration(plan: Any) -> str:
    """A colocated plan's configuration in a line: ``3 x h100-sxm at fp8 (TP 2, batch cap 208)``."""
    return (
        f"{plan.replicas} x {plan.accelerator} at {plan.precision} (TP {plan.tensor_parallel}, batch cap {plan.batch})"
    )


# ------------------------------------------------------------------------------------------------ size

RequestsOption = Annotated[
    int | None,
    typer.Option(
        metavar="INT",
        min=1,
        help="Requests per seed and replica count (default 2,000 per replica, 6,000 to 60,000).",
        show_default=False,
    ),
]


@app.command("size")
@_sizing_options
def size(
    model: ModelArgument,
    *,
    sizing: SizingFlags,
    disaggregated: Annotated[
        bool,
        typer.Option(
            "--disaggregated", help="Size separate prefill and decode pools (section 10.8.3) instead of replicas."
        ),
    ] = False,
    interconnect: Annotated[
        str | None,
        typer.Option(
            metavar="LINK",
            help="Registry interconnect carrying the KV handoff between the pools (with --disaggregated; "
            "default infiniband-ndr).",
            show_default=False,
        ),
    ] = None,
    demand: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="Scale the plan over a demand curve: a request trace (column arrival_time in s, binned by "
            "--demand-bin) or a CSV of time (s) and rate (request/s). Without --rate the plan is sized at the "
            "curve's peak.",
            show_default=False,
        ),
    ] = None,
    demand_bin: Annotated[
        str | None,
        typer.Option(metavar="TIME", help="Bin width of a --demand trace (default 1 hour).", show_default=False),
    ] = None,
    cold_start: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Cold start of a replica over the --demand curve, which the reactive autoscaler waits (default 0 s).",
            show_default=False,
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Also simulate the plan request by request and print the verdict (takes seconds)."
        ),
    ] = False,
    requests: RequestsOption = None,
    seeds: Annotated[
        int | None,
        typer.Option(metavar="INT", min=1, max=1000, help="Seeds of --verify (default 2).", show_default=False),
    ] = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
    emit: EmitOption = None,
) -> None:
    """Size the cheapest fleet serving MODEL at RATE within the TTFT and TPOT targets.

    The output starts with the workload, the targets and the prices as they were understood. With
    --emit it is the plan's launch command or Kubernetes manifest instead (calculator.deploy); with
    --disaggregated the plan has a prefill and a decode pool; with --demand the plan's replicas are
    scheduled over a demand curve; with --verify the plan is also checked by simulation.
    """
    fmt = _format(output_format, as_json)
    if emit is not None and fmt is not Format.table:
        raise _fail(f"--emit {emit.value} conflicts with --format {fmt.value}")
    if out is not None:
        _check_out(out)
    if not verify and (requests is not None or seeds is not None):
        raise _fail("--requests and --seeds set up --verify; add --verify")
    registry = _load(None, sizing.extra)
    curve = _demand_curve(demand, demand_bin) if demand is not None else None
    if curve is None and (demand_bin is not None or cold_start is not None):
        raise _fail("--demand-bin and --cold-start apply to a --demand curve; add --demand FILE")
    startup = _quantity("cold-start", cold_start, "s") if cold_start is not None else None
    if startup is not None and startup.magnitude < 0:
        raise _fail(f"option --cold-start: must be zero or more, got {cold_start!r}")
    if curve is not None and fmt not in (Format.table, Format.json):
        raise _fail(f"--demand prints a table or JSON, not --format {fmt.value}")
    missing = _missing(model, sizing, rate_known=curve is not None)
    if missing:
        raise _fail(f"missing {', '.join(missing)} (--trace FILE gives the rate and the lengths)")
    peak = curve[1].max() if curve is not None and sizing.rate is None and sizing.trace is None else None
    inputs = _sizing_inputs(model, sizing, registry, rate=peak)
    if disaggregated:
        given = [flag for flag, on in (("--verify", verify), ("--demand", curve), ("--emit", emit)) if on]
        _size_disaggregated(inputs, sizing, registry, interconnect, fmt, out, given)
    if interconnect is not None:
        raise _fail("--interconnect is the KV handoff link of --disaggregated or of 'servecalc compare'")
    checks = {name: value for name, value in (("requests", requests), ("seeds", seeds)) if value is not None}
    verification = {"verify": True, "verify_options": checks} if verify else {}
    with _library_errors():
        prices = _fill_prices(inputs, registry)
        with _stderr_progress() as bar:
            plan = _size_plan(inputs, bar, registry, **verification)
    if emit is not None:
        _emit_deployment(plan, emit, out, registry)
    scaled = None
    if curve is not None and plan.feasible:
        with _library_errors():
            scaled = _scale_over(plan, curve, startup)

    def table() -> str:
        from .fleet import plan_summary
        from .units import ureg

        lines = _understood(inputs, prices, sizing.trace)
        if peak is not None:
            lines[0] += "; the rate is the --demand curve's peak"
        lines += [f"answer: {plan_summary(plan)}"] if plan.feasible else []
        if plan.verification is not None:
            lines.append(f"simulation check: {plan.verification.verdict}")
        lines += _field_lines(plan, skip=("rejected", "closest", "workload", "targets", "rejections", "verification"))
        lines += [  # an infinite latency means no configuration fits: the reason says so already
            f"closest {key}: {_shown(key, value)}"
            for key, value in plan.closest.items()
            if not (isinstance(value, ureg.Quantity) and math.isinf(value.magnitude))
        ]
        lines += ["families:", *(f"  {key}: {why}" for key, why in plan.rejected.items())]
        if scaled is not None and curve is not None:
            lines += ["", *_demand_lines(scaled, curve, demand)]
        if plan.feasible and plan.verification is None:
            lines += ["", "check it request by request: add --verify, or run 'servecalc simulate' with these options"]
        return "\n".join(lines)

    def as_json_text() -> str:
        body = plan.to_json_dict()
        if scaled is not None and curve is not None:
            body["demand"] = _demand_json(scaled, curve)
        return json.dumps(body, indent=2)

    from .sweeps import PLAN_UNITS

    _emit(
        fmt,
        out,
        as_json_text if fmt is Format.json else table,
        lambda: plan.to_frame(PLAN_UNITS),
        models=["fleet.size_fleet"],
        registry_ids=[model, *sizing.accelerator, *prices],
        inputs={k: v for k, v in inputs.items() if v is not None},
        registry=registry,
    )
    raise typer.Exit(0 if plan.feasible else 1)


def _size_disaggregated(
    inputs: dict[str, Any],
    sizing: SizingFlags,
    registry: Any,
    interconnect: str | None,
    fmt: Format,
    out: Path | None,
    colocated_only: list[str],
) -> None:
    """``size --disaggregated``: the prefill and decode pools of :func:`~calculator.fleet.size_disaggregated`."""
    from .fleet import size_disaggregated

    colocated = {_flag(name) for name in _COLOCATED_FLAGS}
    refused = [flag for flag in sizing.given() if flag in colocated] + colocated_only
    if refused:
        raise _fail(f"--disaggregated sizes prefill and decode pools; leave out {', '.join(refused)} (colocated only)")
    link: dict[str, Any] = {"interconnect": interconnect} if interconnect is not None else {}
    with _library_errors():
        prices = _fill_prices(inputs, registry)
        plan = size_disaggregated(
            **{k: v for k, v in inputs.items() if k in _DISAGGREGATED_ARGUMENTS}, **link, registry=registry
        )

    def table() -> str:
        lines = _understood(inputs, prices, sizing.trace)
        lines.append(f"KV handoff over: {interconnect or _default_interconnect()}")
        if inputs["output_cv"]:  # a trace's: the decode pool is sized on the mean output length
            lines.append("note: the disaggregated sizer plans on the mean output length (its CV is not used)")
        lines += [f"answer: {plan.gpus} GPUs: {_pools(plan)}"] if plan.feasible else []
        lines += _field_lines(plan)
        return "\n".join(lines)

    _emit(
        fmt,
        out,
        (lambda: json.dumps(plan.to_json_dict(), indent=2)) if fmt is Format.json else table,
        lambda: plan.to_frame({"handoff": "ms", "ttft": "ms", "tpot": "ms", "cost_per_hour": "USD/hour"}),
        models=["fleet.size_disaggregated"],
        registry_ids=[inputs["model"], *sizing.accelerator, *prices],
        inputs={k: v for k, v in inputs.items() if v is not None and k in _DISAGGREGATED_ARGUMENTS},
        registry=registry,
    )
    raise typer.Exit(0 if plan.feasible else 1)


def _default_interconnect() -> str:
    """The KV-handoff link the disaggregated sizer assumes when none is given (its signature's default)."""
    from .fleet import size_disaggregated

    return str(inspect.signature(size_disaggregated).parameters["interconnect"].default)


def _demand_curve(path: Path, bin_text: str | None) -> tuple[Any, Any, Any]:
    """``--demand FILE``: ``(times, rates, width)``, from a request trace binned by ``--demand-bin`` or a curve.

    A trace has a column ``arrival_time`` (s; :func:`~calculator.fleet.demand_from_trace` counts its
    arrivals per bin); a demand curve has columns ``time`` (s, start of each step) and ``rate``
    (request/s). ``width`` is the length of the last step, so the curve's end is its last time plus it.
    """
    import pandas as pd

    from .fleet import demand_from_trace
    from .units import Q_

    try:
        columns = set(pd.read_csv(path, nrows=0).columns)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise _fail(f"--demand {path}: cannot read the CSV ({exc})") from None
    with _library_errors():
        if "arrival_time" in columns:
            width = _quantity("demand-bin", bin_text, "s", positive=True) if bin_text else Q_(1, "hour")
            times, rates = demand_from_trace(path, width)
            return times, rates, width
        if not {"time", "rate"} <= columns:
            raise _fail(
                f"--demand {path}: expected a request trace (column arrival_time, in s) or a demand curve "
                f"(columns time in s and rate in request/s); it has {sorted(columns)}"
            )
        if bin_text is not None:
            raise _fail("--demand-bin bins a request trace; this --demand file is a demand curve already")
        frame = pd.read_csv(path)
        times = Q_(pd.to_numeric(frame["time"], errors="coerce").to_numpy(dtype=float), "s")
        rates = Q_(pd.to_numeric(frame["rate"], errors="coerce").to_numpy(dtype=float), "request/s")
        if len(frame) < 2:
            raise _fail(f"--demand {path}: a demand curve needs at least two rows (time, rate)")
        return times, rates, times[-1] - times[-2]


def _scale_over(plan: Any, curve: tuple[Any, Any, Any], cold_start: Any) -> Any:
    """:func:`~calculator.fleet.plan_over_time` of a plan over the ``--demand`` curve, to its last step's end."""
    from .fleet import plan_over_time
    from .units import Q_

    times, rates, width = curve
    step = min(width, Q_(1, "minute"))  # plan_over_time's grid, at least one point per step of the curve
    return plan_over_time(plan, times, rates, startup_time=cold_start, end=times[-1] + width, step=step)


def _demand_rows(scaled: Any, curve: tuple[Any, Any, Any]) -> Any:
    """Per step of the curve: its start, demand, and the most GPUs each schedule bills during it."""
    import numpy as np
    import pandas as pd

    times, rates, _ = curve
    grid = scaled.predictive.times.m_as("s")
    starts = np.minimum(np.searchsorted(grid, times.m_as("s")), grid.size - 1)
    tp = scaled.tensor_parallel
    return pd.DataFrame(
        {
            "start [h]": times.m_as("hour"),
            "demand [request/s]": rates.m_as("request/s"),
            "predictive GPUs": np.maximum.reduceat(scaled.predictive.billed, starts) * tp,
            "reactive GPUs": np.maximum.reduceat(scaled.reactive.billed, starts) * tp,
        }
    )


def _demand_lines(scaled: Any, curve: tuple[Any, Any, Any], path: Path | None) -> list[str]:
    rows = _demand_rows(scaled, curve)
    window = (curve[0][-1] + curve[2] - curve[0][0]).m_as("hour")
    return [
        f"over the demand curve of {path.name if path else 'the file'} ({len(rows)} steps, {_number(window)} h; "
        f"replicas of this plan's configuration, {scaled.tensor_parallel} GPUs each):",
        *("  " + line for line in rows.to_string(index=False, float_format=_number).splitlines()),
        f"  predictive schedule: peak {_number(scaled.peak_gpus)} GPUs, mean {_number(scaled.mean_gpus)} GPUs, "
        f"cost {_shown('cost', scaled.cost)}",
        f"  reactive autoscaler: cost {_shown('cost', scaled.reactive_cost)}, "
        f"{_number(scaled.reactive.deficit.m_as('request'))} requests beyond capacity while it scales",
        f"  static fleet at the peak: {_number(scaled.peak_gpus)} GPUs, cost {_shown('cost', scaled.static_cost)}",
    ]


def _demand_json(scaled: Any, curve: tuple[Any, Any, Any]) -> dict[str, Any]:
    body = {key: value for key, value in scaled.to_json_dict().items() if key not in ("predictive", "reactive")}
    body["reactive_deficit_requests"] = float(scaled.reactive.deficit.m_as("request"))
    body["steps"] = _demand_rows(scaled, curve).to_dict(orient="records")
    return body


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


# --------------------------------------------------------------------------------------------- compare


@app.command("compare")
@_sizing_options
def compare_command(
    model: ModelArgument,
    *,
    sizing: SizingFlags,
    interconnect: Annotated[
        str | None,
        typer.Option(
            metavar="LINK",
            help="Registry interconnect carrying the KV handoff between the pools (default infiniband-ndr).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Size MODEL both colocated and disaggregated (prefill and decode pools) and print them side by side.

    The options of colocated serving only (--output-cv, prefix caching, --speculate, --chunk, --tbt,
    --router) apply to the colocated plan. Exit status 1 when neither mode is feasible.
    """
    from .fleet import compare_serving_modes

    fmt = _format(output_format, as_json)
    if out is not None:
        _check_out(out)
    registry = _load(None, sizing.extra)
    missing = _missing(model, sizing)
    if missing:
        raise _fail(f"missing {', '.join(missing)} (--trace FILE gives the rate and the lengths)")
    inputs = _sizing_inputs(model, sizing, registry)
    link: dict[str, Any] = {"interconnect": interconnect} if interconnect is not None else {}
    with _library_errors():
        prices = _fill_prices(inputs, registry)
        head = {k: inputs[k] for k in ("model", "accelerator", "precision", "arrival_rate", "input_tokens",
                                      "output_tokens", "ttft_slo", "tpot_slo")}  # fmt: skip
        options = {k: v for k, v in inputs.items() if k not in head}
        with _stderr_progress() as bar:
            task = bar.add_task("sizing both modes", total=None)
            comparison = compare_serving_modes(**head, **link, registry=registry, **options)
            bar.update(task, completed=1, total=1)
    colocated, split = comparison.colocated, comparison.disaggregated

    def frame() -> Any:
        """One row per mode: its configuration (or why it is infeasible), GPUs, latencies and costs."""
        import pandas as pd

        from .sweeps import PLAN_UNITS
        from .units import ureg

        rows = []
        for mode, plan, configuration in (("colocated", colocated, _configuration), ("disaggregated", split, _pools)):
            row: dict[str, Any] = {"mode": mode, "feasible": plan.feasible}
            row["configuration"] = configuration(plan) if plan.feasible else plan.reason
            row["gpus"] = plan.gpus if plan.feasible else None
            for key in ("ttft", "tpot", "cost_per_hour", "cost_per_million_tokens"):
                unit = PLAN_UNITS[key]
                label = f"{PLAN_LABELS.get(key, key)} [{ureg.Unit(unit):~P}]"
                row[label] = getattr(plan, key).m_as(unit) if plan.feasible else None
            rows.append(row)
        return pd.DataFrame(rows)

    def table() -> str:
        lines = _understood(inputs, prices, sizing.trace)
        lines.append(f"KV handoff over: {interconnect or _default_interconnect()}")
        colocated_only = [flag for flag in sizing.given() if flag in {_flag(name) for name in _COLOCATED_FLAGS}]
        if colocated_only:
            lines.append(f"colocated only: {', '.join(colocated_only)}")
        from .results import format_display, human_label

        side_by_side = frame().set_index("mode").T
        rows = [["", *side_by_side.columns]] + [
            [human_label(str(name)), *map(format_display, values)] for name, values in side_by_side.iterrows()
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["", *("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)]
        lines.append("")
        if comparison.cheaper == "neither":
            lines.append("cheaper: neither mode is feasible")
        else:
            saving = f", saving {_shown('saving', comparison.saving)}" if comparison.saving.magnitude else ""
            lines.append(f"cheaper: {comparison.cheaper}{saving}")
        return "\n".join(lines)

    _emit(
        fmt,
        out,
        (lambda: json.dumps(comparison.to_json_dict(), indent=2)) if fmt is Format.json else table,
        frame,
        models=["fleet.compare_serving_modes"],
        registry_ids=[model, *sizing.accelerator, *prices],
        inputs={k: v for k, v in inputs.items() if v is not None},
        registry=registry,
    )
    raise typer.Exit(1 if comparison.cheaper == "neither" else 0)


# -------------------------------------------------------------------------------------------- simulate

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
@_sizing_options
def simulate_command(
    model: ModelArgument = None,
    *,
    sizing: SizingFlags,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="FILE",
            help="A plan written by 'servecalc size --json', in place of the sizing options.",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    requests: RequestsOption = None,
    seeds: Annotated[
        int, typer.Option(metavar="INT", min=1, max=1000, help="Independent runs (the intervals are over them).")
    ] = 2,
    replicas: Annotated[
        int | None,
        typer.Option(metavar="INT", min=1, max=10_000, help="Simulate this many replicas instead of searching."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Search the fewest replicas meeting the targets (the default without --replicas)."
        ),
    ] = False,
    max_replicas: Annotated[
        int | None,
        typer.Option(
            metavar="INT",
            min=1,
            help="Give up the search above this count (default twice the plan's plus 2).",
            show_default=False,
        ),
    ] = None,
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
    router = sizing.router
    if router is not None:
        with _library_errors():
            router = router_name(router)
    if plan_file is not None:
        given = ["MODEL"] * (model is not None) + [f for f in sizing.given() if f not in ("--extra", "--router")]
        if given:
            raise _fail(f"--plan holds the plan; leave out the sizing options ({', '.join(given)})")
        plan = _plan_from_json(plan_file)
        if sizing.extra:  # the plan's own registry files, replaced by the ones given here
            _load(None, sizing.extra)
            files = tuple(str(Path(e).resolve()) for e in sizing.extra)
            plan = dataclasses.replace(plan, targets={**plan.targets, "registry_files": files})
        inputs: dict[str, Any] = {"plan": str(plan_file)}
    else:
        missing = _missing(model, sizing)
        if missing:
            raise _fail(
                f"give --plan FILE (from 'servecalc size --json') or the sizing options; missing {', '.join(missing)}"
            )
        registry = _load(None, sizing.extra)
        inputs = _sizing_inputs(model, sizing, registry)
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
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Registry model id or alias.")],
    input_tokens: Annotated[float, typer.Option("--input", metavar="TOKENS", min=1, help="Prompt tokens.")],
    output_tokens: Annotated[float, typer.Option("--output", metavar="TOKENS", min=1, help="Output tokens.")],
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
