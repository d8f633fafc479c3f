"""``servecalc registry``: list, show, validate registry entries, import a model's config.json, print the schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import RegistryError
from ._app import (
    ExtraOption,
    Format,
    FormatOption,
    JsonOption,
    OutOption,
    RegistryOption,
    _check_out,
    _emit,
    _fail,
    _format,
    _library_errors,
    _load,
    _Typer,
    app,
)

registry_app = _Typer(help="Browse and validate the hardware and model registry.", no_args_is_help=True)
app.add_typer(registry_app, name="registry")


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
            raise _fail(exc) from None
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
        raise _fail(exc) from None
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
    reg = _load(None, [file], ("FILE", "FILE")) if over_base else _load(file, None, ("FILE", "FILE"))
    counts = ", ".join(f"{len(reg.section(s))} {s}" for s in ("accelerators", "interconnects", "models", "prices"))
    typer.echo(f"{file}: valid ({counts} after loading)")


@registry_app.command("import")
def registry_import(
    config: Annotated[Path, typer.Argument(metavar="CONFIG", help="The model's Hugging Face config.json.")],
    model_id: Annotated[
        str | None,
        typer.Option(
            "--id", metavar="ID", help="The entry's id (default: from --repo, else the file name; not a registry id)."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(metavar="NAME", help="The entry's display name (default: --repo, else the id).")
    ] = None,
    repo: Annotated[
        str | None,
        typer.Option(
            metavar="OWNER/NAME",
            help="The Hugging Face repository of the config: the entry's alias and its quantized checkpoint's repo.",
        ),
    ] = None,
    index: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="model.safetensors.index.json: its total_size must match the count (1 %)."),
    ] = None,
    quant: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="hf_quant_config.json: the checkpoint's weight and KV-cache precision."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", metavar="FILE", help="Write the YAML file here (default: print it).")
    ] = None,
    registry: RegistryOption = None,
    extra: ExtraOption = None,
) -> None:
    """Import a model from its Hugging Face config.json as a user-registry entry (docs/registry.md).

    Counts the parameters from the shapes and writes a validated YAML file (--out, else standard output) with
    the model and the file as its source; use it with --extra. Refuses, naming the field, an architecture the
    registry cannot express (linear attention, Mamba layers, chunked or sparse attention, a vision encoder of a
    layout it does not count); a counted vision encoder's per-image work is not priced (the notes say so).
    """
    from ..model_import import import_model_config

    reg = _load(registry, extra)
    if out is not None:
        _check_out(out, example="model.yaml")
    with _library_errors():
        imported = import_model_config(
            config, model_id=model_id, name=name, repo=repo, index=index, quant=quant, out=out, registry=reg
        )
    if out is None:
        typer.echo(imported.text, nl=False)
    for note in imported.notes:
        typer.echo(f"note: {note}", err=True)
    if out is not None:
        typer.echo(f"wrote {out}: model '{imported.model.id}'; use it with --extra {out}", err=True)


@registry_app.command("schema")
def registry_schema() -> None:
    """Print the JSON schema of registry files."""
    from ..registry import schema_text

    typer.echo(schema_text(), nl=False)
