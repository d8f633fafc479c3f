"""Command-line interface: ``servecalc`` (or ``python -m calculator``).

Commands print tables for people and JSON with ``--json`` for scripts. A bad registry file exits
with status 2 and the :class:`~calculator.errors.RegistryError` message.
"""

from __future__ import annotations

import json
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
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


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
) -> None:
    """List registry entries (id, name, provenance), by section."""
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
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for name, entries in rows.items():
        typer.echo(f"{name} ({len(entries)})")
        width = max((len(e["id"]) for e in entries), default=0)
        for e in entries:
            typer.echo(f"  {e['id']:<{width}}  {e['name']}  [{e['provenance']}]")


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


def main() -> None:
    """Entry point of the ``servecalc`` console script."""
    app()
