"""The typer app and what every command shares: plain help, the output options and their writer, errors."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from ..errors import RegistryError


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

    def invoke(self, ctx: Any) -> Any:
        """Run the command with its context at hand for :func:`_command_flags` (error messages in its flags)."""
        token = _RUNNING.set(ctx)
        try:
            return super().invoke(ctx)
        finally:
            _RUNNING.reset(token)


#: The context of the command running (its parameters and their values), set by :meth:`_Command.invoke`.
_RUNNING: contextvars.ContextVar[Any] = contextvars.ContextVar("servecalc_command", default=None)


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
        from .. import __version__

        typer.echo(f"servecalc {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Capacity planning for ML inference serving."""


ExtraOption = Annotated[
    list[Path] | None,
    typer.Option("--extra", "-e", metavar="FILE", help="A user registry file applied over the base (repeatable)."),
]
RegistryOption = Annotated[
    Path | None, typer.Option(metavar="FILE", help="Base registry file (default: the packaged one).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table (same as --format json).")]


#: One configuration's weight precision (``fit``, ``predict``, ``calibrate``); its default is the library's
#: :data:`calculator.precision.DEFAULT_PRECISION`, which the sizing commands' candidates also default to.
WeightPrecisionOption = Annotated[str, typer.Option("--precision", "-p", metavar="PRECISION", help="Weight precision.")]


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
    from ..export import to_csv, to_xlsx

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


def _check_out(out: Path, flag: str = "--out", example: str = "plan.json") -> None:
    """``--out`` (or ``flag``) names a file in a folder that exists (checked before any work is done)."""
    if out.is_dir():
        typer.echo(f"error: {flag} {out} is a folder; give a file name such as {out / example}", err=True)
        raise typer.Exit(2)
    if not out.parent.is_dir():
        typer.echo(f"error: {flag} {out}: the folder {out.parent} does not exist", err=True)
        raise typer.Exit(2)


#: Token-count suffixes as vLLM's ``--max-model-len`` reads them (``human_readable_int`` in its
#: ``engine/arg_utils.py``, 0.18): lower case decimal, upper case binary, so ``128K`` is Llama 3.1's 131,072.
TOKEN_SUFFIXES = {"k": 10**3, "m": 10**6, "K": 2**10, "M": 2**20}


def tokens(minimum: int = 1, *, whole: bool = True) -> Callable[[str], Any]:
    """The parser of a token-count option: a number with an optional suffix of :data:`TOKEN_SUFFIXES`.

    ``2k`` is 2,000 and ``2K`` 2,048; ``25.6k`` is 25,600, while a binary suffix takes a whole number
    (``1.5K`` is refused, as vLLM refuses it). ``whole`` options (a context, a chunk) take integers; a mean
    length may be fractional. Values below ``minimum`` are refused; typer names the flag in the message.
    """

    def parse(text: str | float) -> Any:
        if not isinstance(text, str):  # typer passes a number default through the parser too
            return text
        match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)([kKmM]?)\s*", text)
        if match is None:
            raise typer.BadParameter(f"expected a token count such as 4096, 128K (131,072) or 2k (2,000), got {text!r}")
        number, suffix = match.groups()
        if suffix.isupper() and "." in number:
            raise typer.BadParameter(f"{text!r}: a binary suffix takes a whole number; did you mean {text.lower()!r}?")
        value = float(number) * TOKEN_SUFFIXES.get(suffix, 1)
        if whole and value != int(value):
            raise typer.BadParameter(f"expected a whole number of tokens, got {text!r}")
        if value < minimum:
            raise typer.BadParameter(f"expected {minimum:,} or more tokens, got {text!r}")
        return int(value) if whole or value == int(value) else value

    return parse


def _load(registry: Path | None, extra: list[Path] | None, flags: tuple[str, str] = ("--registry", "--extra")) -> Any:
    """The registry of ``--registry`` and ``--extra`` (``flags``: what the command calls them); a bad file exits 2.

    The message names the flag of the file it is about: the file the registry's message starts with, else the
    only file given (the packaged base is valid).
    """
    from ..registry import load_registry

    try:
        return load_registry(registry, extra or ())
    except RegistryError as exc:
        message = str(exc)
        given = [(flags[0], registry)] if registry is not None else []
        files = given + [(flags[1], path) for path in extra or ()]
        named = [flag for flag, path in files if message.startswith((f"{path}:", f"{path.name}:"))]
        named = named or [flag for flag, _ in files] * (len(files) == 1)
        raise _fail(f"{named[0]}: {message}" if named else message) from None


def _fail(exc: BaseException | str, code: int = 2) -> typer.Exit:
    """Print ``error: ...`` on standard error and return the exit to raise (``raise _fail(exc) from None``).

    A library exception's message is told in the command's flags (:func:`_in_flags`).
    """
    typer.echo(f"error: {_in_flags(str(exc)) if isinstance(exc, BaseException) else exc}", err=True)
    return typer.Exit(code)


#: Library argument names that are not a command's parameter name (or its plural): the name -> the parameter's.
_LIBRARY_NAMES = {"tensor_parallel": "tp", "tensor_parallels": "tp", "speculation": "speculate"}
#: Library functions a message refers the reader to, and the command that does the same.
_LIBRARY_COMMANDS = {"check_plan()": "servecalc check", "benchmark_command()": "'servecalc bench'"}


def _command_flags() -> tuple[dict[str, str], dict[str, list[str]], set[str]]:
    """The running command's parameters: flags by library argument name, values by flag, and the files given.

    Built from the command's own (typer) parameters: ``precision`` and its plural ``precisions`` read
    ``-p/--precision``, an argument its name in capitals (``MODEL``); :data:`_LIBRARY_NAMES` adds the few
    library names that are neither.
    """
    ctx = _RUNNING.get()
    if ctx is None:
        return {}, {}, set()
    flags: dict[str, str] = {}
    given: dict[str, list[str]] = {}
    files: set[str] = set()
    for param in ctx.command.params:
        if param.name is None or param.name in ("as_json", "output_format", "out", "extra"):
            continue
        if isinstance(param, TyperArgument):
            shown = (param.metavar or param.name.upper()).rstrip(".")  # RESULTS..., FILE...
        else:
            shown = "/".join(sorted(param.opts, key=len))
        flags[param.name] = flags[param.name + "s"] = shown
        value = ctx.params.get(param.name)
        values = value if isinstance(value, list | tuple) else [] if value is None else [value]
        given[shown] = [str(getattr(v, "value", v)) for v in values]
        files.update(str(v) for v in values if isinstance(v, Path))
    for library, name in _LIBRARY_NAMES.items():
        if name in flags:
            flags.setdefault(library, flags[name])
    return flags, given, files


def _in_flags(message: str) -> str:
    """A library message told in the running command's flags rather than the API's argument names.

    ``size_fleet(): argument 'precisions' must be ...`` reads ``option -p/--precision must be ...``;
    ``model_memory_fit(): context 1000000 exceeds ...`` reads ``--context 1000000 exceeds ...``;
    an argument both ``-p`` and ``--kv-precision`` could mean is the one whose value the message
    quotes; the engine ``None`` is ``generic``; a message naming no flag but quoting a value given to
    one (``unknown accelerator id 'bogus'``), or a file given to one, is prefixed with that flag; a library
    function the message refers to is the command doing the same (:data:`_LIBRARY_COMMANDS`).
    """
    flags, given, files = _command_flags()
    if not flags:
        return message
    quoted = re.search(r"got '?([^',)]+)'?", message)

    def flag(name: str) -> str:
        if quoted is not None:
            holders = [shown for shown, values in given.items() if quoted.group(1) in values]
            if len(holders) == 1:
                return holders[0]
        return flags[name]

    # a function's or a class's name before the message goes; an argument's becomes its flag
    text = re.sub(r"^(\w+)(\(\))?: ", lambda m: f"{flags[m[1]]}: " if m[1] in flags and not m[2] else "", message)
    text = re.sub(r"argument '(\w+)'", lambda m: f"option {flag(m.group(1))}" if m.group(1) in flags else m[0], text)
    text = re.sub(r"^'?(\w+)'? ", lambda m: f"{flag(m.group(1))} " if m.group(1) in flags else m[0], text)
    # a bare argument name (a quoted one is a value, such as a trace's column 'output_tokens')
    text = re.sub(r"(?<!')\b[a-z]+(_[a-z]+)+\b(?!')", lambda m: flags.get(m[0], m[0]), text)
    if "--engine" in text:
        text = text.replace(" or None,", " or generic,")
    # a library message that already gave the flag beside the argument: "--id (--id)", "(--id, --id)"
    text = re.sub(r"(\S+) \(\1\)", r"\1", text)
    text = re.sub(r"\((\S+), \1\)", r"(\1)", text)
    for function, command in _LIBRARY_COMMANDS.items():
        text = text.replace(function, command)
    if not any(shown in text for shown in given):
        holders = [
            shown
            for shown, values in given.items()
            if any(f"'{v}'" in text or (v in files and re.search(rf"(^|[\s(]){re.escape(v)}\b", text)) for v in values)
        ]
        if len(holders) == 1:
            text = f"option {holders[0]}: {text}" if holders[0].startswith("-") else f"{holders[0]}: {text}"
    return text


@contextlib.contextmanager
def _library_errors() -> Iterator[None]:
    """Turn a library error (or an unknown registry id) into ``error: ...`` and exit status 2.

    Enter it before a progress bar (``with _library_errors(), bar:``) so the bar is gone when the
    message is printed.
    """
    from ..errors import CalculatorError

    try:
        yield
    except (CalculatorError, KeyError) as exc:
        raise _fail(exc) from None


class _NoBar:
    """A progress bar where standard error is not a terminal: it draws nothing, and rich is not imported."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def update(self, *args: Any, **kwargs: Any) -> None:
        return None


def _stderr_progress() -> Any:
    """A transient rich progress bar on standard error, shown only when it is a terminal.

    Standard output stays clean for ``--json`` and ``--format csv``; a redirected standard error (a
    log file, a CI job) gets no bar at all rather than its control characters, and the process does
    not load rich for it (40 ms of a ``servecalc size`` run).
    """
    if not sys.stderr.isatty():
        return _NoBar()
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


def main() -> None:
    """Entry point of the ``servecalc`` console script."""
    app()
