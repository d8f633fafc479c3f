"""The calculator's one pint unit registry.

Information is a real dimension here: pint's default registry defines ``bit = []``, which lets
``Q_(80, "GB") + 1`` pass silently. This registry makes the byte a base unit of dimension
``[information]``, and adds ``FLOP`` (``[compute]``; integer operations count as one each),
``token``, ``request`` (alias ``query``) and ``USD`` (``[currency]``). Decimal and binary prefixes
both work: ``GB`` is 10**9 bytes and ``GiB`` is 2**30 bytes.

``check_units`` checks the dimension of named arguments at a function's boundary and raises
:class:`UnitsError` naming the function, the argument, the dimension it needs and what it got.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import UnitsError

# pint imports ``dask.base`` at its own import wherever dask is installed (for quantities of dask
# arrays, which the calculator never makes): 0.1 s of ``import calculator`` in an environment with the
# ``cluster`` extra. An installed dask that nothing has imported yet is hidden while pint loads
# (``find_spec("dask")`` is then None) and visible again afterwards; a dask imported before is left alone.
_HIDE_DASK = "dask" not in sys.modules and "pint" not in sys.modules
if _HIDE_DASK:
    sys.modules["dask"] = None  # type: ignore[assignment]
try:
    import pint
finally:
    if _HIDE_DASK:
        del sys.modules["dask"]

__all__ = [
    "CACHE_ENV",
    "MAX_QUANTITY_TEXT",
    "Q_",
    "Quantity",
    "UnitsError",
    "cache_folder",
    "check_units",
    "describe_value",
    "dimension_of",
    "parse_quantity",
    "shown",
    "ureg",
]


#: Where the parsed unit definitions are kept between processes: a folder, or "" for none.
CACHE_ENV = "SERVECALC_CACHE_DIR"


def _definitions() -> str:
    """The default definitions of pint as the calculator changes them (one text, the constants inlined)."""
    folder = Path(pint.__file__).parent
    text = (folder / "default_en.txt").read_text(encoding="utf-8")
    constants = (folder / "constants_en.txt").read_text(encoding="utf-8")
    replacements = {
        # Inline the constants file: definitions are loaded from text, not from pint's folder.
        "@import constants_en.txt": constants,
        # The byte becomes the base unit of a real information dimension.
        "bit = []": "byte = [information] = B = octet\nbit = byte / 8 = b",
        "byte = 8 * bit = B = octet": "",
        # Network rates are written "100 Gb/s": "b" is the bit, not the barn, and "Gb" is not the
        # gilbert (a CGS magnetomotive force unit nobody sizes a fleet with).
        "barn = 1e-28 * meter ** 2 = b": "barn = 1e-28 * meter ** 2",
        "gilbert = 1 / (4 * π) * biot_turn = Gb": "gilbert = 1 / (4 * π) * biot_turn",
    }
    for old, new in replacements.items():
        if old not in text:  # pragma: no cover - only on an incompatible pint release
            raise RuntimeError(f"pint's default definitions changed: cannot find {old!r}")
        text = text.replace(old, new)
    return text


def cache_folder() -> Path | None:
    """The folder of the unit cache: ``$SERVECALC_CACHE_DIR`` or the user's cache folder; None when set empty."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen) if chosen.strip() else None
    import platformdirs

    return platformdirs.user_cache_path("servecalc", appauthor=False)


def _cached_registry(text: str, folder: Path) -> pint.UnitRegistry:
    """A registry whose parsed definitions and root-unit tables come from pint's disk cache in ``folder``.

    Parsing pint's definition text takes 0.1 s of every process (a third of ``import calculator``); pint
    keeps the parse, and the table of each unit's root units, in ``folder`` keyed by the text's content,
    so a process after the first reads them back in a few milliseconds. The definitions are written under
    their own hash, so another pint release (or another edit above) is another file.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"units-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}.txt"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    return pint.UnitRegistry(str(path), autoconvert_offset_to_baseunit=True, cache_folder=folder / "pint")


def _build_registry(cache: Path | None = None) -> pint.UnitRegistry:
    """The calculator's registry; with a ``cache`` folder, read from pint's disk cache where it can be.

    Anything that goes wrong with the cache (a read-only folder, a file another process is still
    writing) falls back to parsing the text, which gives the same registry (tests/test_units.py).
    """
    text = _definitions()
    registry: pint.UnitRegistry | None = None
    if cache is not None:
        try:
            registry = _cached_registry(text, cache)
        except Exception:  # any failure of the cache means: parse the text instead
            registry = None
    if registry is None:
        registry = pint.UnitRegistry(None, autoconvert_offset_to_baseunit=True)
        registry.load_definitions(text.splitlines())
    registry.define("FLOP = [compute] = _ = flop")
    registry.define("token = [token] = _ = tokens")
    # A request is a count: a per-second rate of requests is a plain per-second rate (1/s reads as request/s).
    registry.define("request = [] = _ = query = requests = queries")
    registry.define("USD = [currency] = _ = dollar")
    registry.formatter.default_format = "~P"
    return registry


ureg: pint.UnitRegistry = _build_registry(cache_folder())
pint.set_application_registry(ureg)
Quantity = ureg.Quantity


def dimension_of(unit: str) -> Any:
    """Return the dimensionality of a unit expression, e.g. ``dimension_of("GB/s")``.

    The text is read by :func:`parse_unit` (no arithmetic), so an unknown or hostile unit is a
    :class:`~calculator.errors.UnitsError`.
    """
    return parse_unit(unit).dimensionality if unit else ureg.dimensionless.dimensionality


def describe_value(value: Any) -> str:
    """Describe a value for an error message: its repr and its dimension."""
    if isinstance(value, ureg.Quantity):
        dim = value.dimensionality
        text = f"{value:~P}"
        if len(text) > 200:
            text = f"{text[:180]}... ({len(text)} characters)"
        return f"{text} (dimension {dim if dim else 'dimensionless'})"
    return f"{shown(value)} (a plain {type(value).__name__}, no unit)"


def _check_one(function: str, argument: str, value: Any, unit: str) -> None:
    needed = dimension_of(unit)
    if isinstance(value, ureg.Quantity):
        if value.dimensionality == needed:
            return
    elif not needed:
        return
    raise UnitsError(
        f"{function}(): argument '{argument}' needs dimension {needed if needed else 'dimensionless'}"
        f" (for example {unit or 'a plain number'}), got {describe_value(value)}"
    )


#: pint's errors for a quantity of the wrong unit met inside a function's body.
PINT_UNIT_ERRORS = (
    pint.errors.DimensionalityError,
    pint.errors.UndefinedUnitError,
    pint.errors.OffsetUnitCalculusError,
)


def wrong_unit(function: str, error: Exception) -> UnitsError:
    """The project's error for an argument no boundary check covered that had the wrong unit, named."""
    return UnitsError(f"{function}(): an argument has the wrong unit ({shown(str(error))})")


def check_units(**units: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Check the dimension of named arguments when the decorated function is called.

    Parameters
    ----------
    **units
        Argument name to an example unit of the dimension it needs (``arrival_rate="request/s"``).
        An empty string means the argument must be dimensionless. Arguments that are ``None``
        are not checked, so optional quantities keep ``None`` as their default. A count of tokens
        (``"token"``) also takes a plain number, which the function receives as a quantity of tokens.

    Examples
    --------
    >>> @check_units(duration="s")
    ... def twice(duration):
    ...     return 2 * duration
    >>> twice(Q_(3, "ms"))
    <Quantity(6, 'millisecond')>
    >>> twice(3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calculator.errors.UnitsError: twice(): argument 'duration' needs dimension [time] ... got 3 (a plain int, no unit)
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func)
        unknown = set(units) - set(signature.parameters)
        if unknown:
            raise TypeError(f"check_units on {func.__name__}: no arguments named {sorted(unknown)}")

        tokens = {name for name, unit in units.items() if dimension_of(unit) == ureg.token.dimensionality}
        optional = {name for name in units if signature.parameters[name].default is None}

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            for name, unit in units.items():
                if name not in bound.arguments:
                    continue
                value = bound.arguments[name]
                if value is None:
                    if name in optional:
                        continue
                    raise UnitsError(
                        f"{func.__name__}(): argument '{name}' is required (like 1 {unit or 'unit'}), got None"
                    )
                if name in tokens and not isinstance(value, ureg.Quantity | bool | str):
                    # A count of tokens takes a plain number as well (the API's count convention).
                    bound.arguments[name] = value = ureg.Quantity(value, "token")
                _check_one(func.__name__, name, value, unit)
            try:
                return func(*bound.args, **bound.kwargs)
            except PINT_UNIT_ERRORS as exc:
                raise wrong_unit(func.__name__, exc) from None

        wrapper.__units__ = dict(units)  # type: ignore[attr-defined]
        return wrapper

    return decorate


# --------------------------------------------------------------------------------------------
# Parsing user text


#: The longest quantity text accepted from a user (registry file, command line, dashboard).
MAX_QUANTITY_TEXT = 100

_NUMBER = r"[+-]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?"
_UNIT_NAME = r"(?:[A-Za-z_%°µμΩ][A-Za-z0-9_°µμΩ]*)(?:\s*(?:\*\*|\^)\s*-?\d)?"
_UNIT = rf"(?:1\s*/\s*)?{_UNIT_NAME}(?:\s*[*/]\s*{_UNIT_NAME}|\s+{_UNIT_NAME})*"
_QUANTITY = re.compile(rf"\s*(?P<number>{_NUMBER})?\s*(?P<unit>{_UNIT})?\s*")


def shown(value: Any, limit: int = 200) -> str:
    """``repr`` of a user value cut to ``limit`` characters, for an error message."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = value.item()  # 'inf', not 'np.float64(inf)'
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


def parse_quantity(text: Any, unit: str | None = None, *, what: str = "value", bare: str | None = None) -> Any:
    """A quantity from user text (``"80 GB"``, ``"3.35 TB/s"``, ``"1e-3 USD/request"``), strictly.

    The one parser of quantities that come from outside (registry files, the command line, the
    dashboard). The grammar is a finite decimal or scientific number followed by a unit expression:
    unit names joined by ``*``, ``/`` or spaces, each with at most a one-digit exponent. No arithmetic
    on numbers, no parentheses, at most :data:`MAX_QUANTITY_TEXT` characters, so a text cannot make
    the parser evaluate ``9**9**9``.

    Parameters
    ----------
    text : str
        The text to read.
    unit : str, optional
        An example unit of the dimension the value must have (``"GB"``); ``None`` accepts any.
    what : str
        What the value is, for error messages (``"--rate"``, ``"accelerators['x'].memory"``).
    bare : str, optional
        The unit a bare number is read in; ``None`` (the default) makes a bare number an error when
        ``unit`` has a dimension.

    Raises
    ------
    UnitsError
        Naming ``what``, quoting the text (cut to 200 characters) and giving an example.

    Examples
    --------
    >>> parse_quantity("3.35 TB/s", "GB/s")
    <Quantity(3.35, 'terabyte / second')>
    >>> parse_quantity("9**9**9 GiB", "GB", what="memory")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calculator.errors.UnitsError: memory: expected a number and a unit like '1 GB', got '9**9**9 GiB'
    """
    example = f"1 {unit}" if unit else "1 GB"
    if not isinstance(text, str):
        raise UnitsError(f"{what}: expected a quantity as text like {example!r}, got {shown(text)}")
    if len(text) > MAX_QUANTITY_TEXT:
        raise UnitsError(f"{what}: the text is longer than {MAX_QUANTITY_TEXT} characters: {shown(text)}")
    match = _QUANTITY.fullmatch(text)
    if match is None or not (match.group("number") or match.group("unit")):
        raise UnitsError(f"{what}: expected a number and a unit like {example!r}, got {shown(text)}")
    digits = (match.group("number") or "1").replace("_", "")
    whole = digits.lstrip("+-").isdigit() and "/" not in (match.group("unit") or "")
    number: float = int(digits) if whole else float(digits)  # as pint reads them: 80 GiB, 3.35 TB/s, 450.0 GB/s
    if not math.isfinite(number):
        raise UnitsError(f"{what}: the number must be finite, got {shown(text)}")
    written = match.group("unit")
    if written is None:
        if unit and dimension_of(unit) and bare is None:
            raise UnitsError(f"{what}: {shown(text)} has no unit; write it with one, like {example!r}")
        written = bare or ""
    try:
        units = parse_unit(written.strip())
    except UnitsError:
        raise UnitsError(
            f"{what}: unknown unit in {shown(text)} (try e.g. ms, GB, GB/s, request/s, USD/hour)"
        ) from None
    quantity = ureg.Quantity(number, units)
    if unit is not None and quantity.dimensionality != dimension_of(unit):
        raise UnitsError(
            f"{what}: needs dimension {dimension_of(unit) or 'dimensionless'} (like {example!r}), got {shown(text)}"
        )
    return quantity


_UNIT_FACTOR = rf"(?:{_UNIT_NAME}|\(\s*{_UNIT}\s*\))"  # a name, or one level of parentheses: USD/(kW*hour)
_UNIT_TEXT = re.compile(rf"\s*(?:(?:1\s*/\s*)?{_UNIT_FACTOR}(?:\s*[*/]\s*{_UNIT_FACTOR}|\s+{_UNIT_NAME})*)?\s*")
#: Unit texts already read (bounded: a flood of distinct texts is read again, not stored).
_UNITS_READ: dict[str, Any] = {}


def parse_unit(text: Any, what: str = "unit") -> Any:
    """A pint unit from text (``"GB/s"``, ``"USD/hour"``), by the grammar of :func:`parse_quantity`.

    Unit names joined by ``*``, ``/`` or spaces, each with at most a one-digit exponent, and one level
    of parentheses (``USD/(kW*hour)``); no numbers, at most :data:`MAX_QUANTITY_TEXT` characters. An
    empty text is dimensionless.

    Raises
    ------
    UnitsError
        Naming ``what`` and quoting the text, for a malformed or unknown unit.

    Examples
    --------
    >>> parse_unit("GB/s")
    <Unit('gigabyte / second')>
    >>> parse_unit("9**9**9*second")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calculator.errors.UnitsError: unit: expected a unit like 'GB' or 'request/s', got '9**9**9*second'
    """
    if isinstance(text, str):
        known = _UNITS_READ.get(text)
        if known is not None:
            return known
    if not isinstance(text, str) or len(text) > MAX_QUANTITY_TEXT or not _UNIT_TEXT.fullmatch(text):
        raise UnitsError(f"{what}: expected a unit like 'GB' or 'request/s', got {shown(text)}")
    try:
        unit = ureg.parse_units(text.strip()) if text.strip() else ureg.dimensionless
    except Exception:  # pint raises several error types for unknown names
        raise UnitsError(f"{what}: unknown unit {shown(text)} (try e.g. ms, GB, GB/s, request/s, USD/hour)") from None
    if len(_UNITS_READ) < 4096:
        _UNITS_READ[text] = unit
    return unit


def Q_(value: Any, units: Any = None) -> Any:  # noqa: N802 - pint's customary name for the constructor
    """A quantity: ``Q_(80, "GB")``, ``Q_("80 GB")``, ``Q_(array, "ms")`` (pint's ``Quantity``, read safely).

    A text value is read by :func:`parse_quantity` and a unit text by :func:`parse_unit`, so neither
    can make pint evaluate arithmetic (``Q_("9**9**9 GiB")`` is a :class:`~calculator.errors.UnitsError`
    at once). Other values and unit objects go to pint as they are. ``isinstance(x, Quantity)`` (or
    ``ureg.Quantity``) tests for a quantity.

    Parameters
    ----------
    value : number, array, str or Quantity
    units : str or pint Unit, optional

    Examples
    --------
    >>> Q_(80, "GB"), Q_("3.35 TB/s")
    (<Quantity(80, 'gigabyte')>, <Quantity(3.35, 'terabyte / second')>)
    """
    if isinstance(value, str):
        quantity = parse_quantity(value, what="Q_()")
        target = parse_unit(units, "Q_()") if isinstance(units, str) else units
        return quantity if units is None else quantity.to(target)
    if isinstance(units, str):
        units = parse_unit(units, "Q_()")
    try:
        return ureg.Quantity(value) if units is None else ureg.Quantity(value, units)
    except (TypeError, ValueError, *PINT_UNIT_ERRORS) as exc:
        raise UnitsError(f"Q_(): cannot make a quantity of {shown(value)} in {shown(units)} ({exc})") from None
