"""Base of the calculator's multi-part results: frozen dataclasses of quantities.

Subclass with ``@dataclass(frozen=True, repr=False)``. The repr shows quantities compactly
(``4.35 ms`` rather than ``<Quantity(0.00435, 'second')>``); :meth:`Result.to_dict` gives a mapping
for JSON and the dashboard (nested results become nested dicts); :meth:`Result.to_frame` gives a
tidy pandas DataFrame whose quantity columns carry their unit in the label (``ttft [ms]``), and
``_repr_html_`` shows a result as a table in a notebook.

Column labels are ``name [unit]`` (:func:`column_label`) with the unit in pint's short pretty form,
or the bare name for plain numbers; :func:`parse_label` reads one back. Nested results and dicts
flatten to dotted names (``closest.ttft [s]``).

For readers (the dashboard's tables and metrics): :func:`format_display` writes any value as text at 4
significant digits with thousands separators (``82.78 ms``, ``10,176``, ``yes``, ``—``),
:func:`format_number` a plain number, and :func:`human_label` turns a field name or column label into a
label (``ttft [ms]`` -> ``TTFT [ms]``, ``wait_probability`` -> ``Wait probability``).
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import InputError
from .types import Count
from .units import shown, ureg

__all__ = [
    "Result",
    "as_count",
    "column_label",
    "flatten",
    "format_display",
    "format_number",
    "percentile_label",
    "frame_columns",
    "human_label",
    "is_axis",
    "parse_label",
    "plain",
]


class Result:
    """Mixin for frozen result dataclasses: a compact repr, :meth:`to_dict` and :meth:`to_frame`."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (quantities stay quantities; nested results become dicts)."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if isinstance(value, Result):
                value = value.to_dict()
            elif isinstance(value, tuple) and value and all(isinstance(v, Result) for v in value):
                value = [v.to_dict() for v in value]  # records (a plan's rejections)
            out[field.name] = value
        return out

    def to_json_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values: a quantity becomes ``{"value": ..., "unit": ...}``."""
        return {key: _json_ready(value) for key, value in self.to_dict().items()}

    def to_frame(self, units: Mapping[str, str] | None = None) -> Any:
        """The result as a tidy pandas DataFrame with unit-labelled columns.

        Nested results and dicts flatten to dotted names. A result whose fields are arrays (a
        vectorized call) gives one row per element, its scalar fields repeated on every row; a
        scalar result gives one row. Fields whose arrays do not broadcast together stay whole, in a
        single row.

        Parameters
        ----------
        units : mapping of str to str, optional
            Unit to show a field in, by its (dotted) name, e.g. ``{"ttft": "ms"}``; others keep the
            unit they carry. A field that is ``None`` (an infeasible plan's TTFT) and has a unit here
            gets its labelled column with a missing value, so frames of several results line up.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> from calculator import Q_
        >>> from calculator.memory import memory_fit
        >>> fit = memory_fit(Q_(80, "GB"), Q_(140, "GB"), Q_(2_621_440, "B/token"), 1000, batch=0)
        >>> fit.to_frame(units={"missing": "GB"})[["fits", "missing [GB]", "max_batch"]]
            fits  missing [GB]  max_batch
        0  False          60.0          0
        """
        import pandas as pd

        # Lists of records (a plan's rejections) are not columns; they have their own field.
        values = {
            k: v for k, v in self._frame_values().items() if not (isinstance(v, list) and v and isinstance(v[0], dict))
        }
        return pd.DataFrame(frame_columns(flatten(values), units))

    def _frame_values(self) -> dict[str, Any]:
        """The values :meth:`to_frame` lays out as columns: :meth:`to_dict` (a result may add missing ones)."""
        return self.to_dict()

    def _repr_html_(self) -> str:
        """A notebook view: the scalar fields as a two-column table, array fields as a table of rows."""
        flat = flatten(self.to_dict())
        arrays = {k: v for k, v in flat.items() if _is_array(v)}
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(format_value(v))}</td></tr>"
            for k, v in flat.items()
            if k not in arrays
        )
        out = f"<div><strong>{html.escape(type(self).__name__)}</strong>" + (f"<table>{rows}</table>" if rows else "")
        if arrays:
            import pandas as pd

            out += pd.DataFrame(frame_columns(arrays)).to_html(max_rows=12, index=False)
        return out + "</div>"

    def __repr__(self) -> str:
        fields = dataclasses.fields(self)  # type: ignore[arg-type]
        parts = [f"{field.name}={_show(getattr(self, field.name))}" for field in fields if field.repr]
        return f"{type(self).__name__}({', '.join(parts)})"


def column_label(name: str, unit: Any = "") -> str:
    """A column label ``name [unit]`` (pint's short pretty unit); the bare name for plain numbers.

    Examples
    --------
    >>> column_label("kv_bytes_per_token", "B/token"), column_label("cost_per_hour", "USD/hour")
    ('kv_bytes_per_token [B/token]', 'cost_per_hour [USD/h]')
    >>> column_label("batch")
    'batch'
    """
    text = f"{ureg.Unit(unit):~P}" if unit else ""
    return f"{name} [{text}]" if text else name


def parse_label(label: str) -> tuple[str, str]:
    """The name and unit of a column label (``""`` for a plain number); the inverse of :func:`column_label`.

    Examples
    --------
    >>> parse_label("ttft [ms]"), parse_label("batch")
    (('ttft', 'ms'), ('batch', ''))
    """
    if label.endswith("]") and " [" in label:
        name, unit = label[:-1].rsplit(" [", 1)
        return name, unit
    return label, ""


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts and results as one level, with dotted keys (``closest.ttft``).

    An ``(low, high)`` pair named ``*_interval`` becomes two entries, ``ttft_interval.low`` and
    ``ttft_interval.high``; an interval of ``None`` (an infeasible plan's) none, so that rows of feasible and
    infeasible plans share the ``.low``/``.high`` columns (missing where there is none).
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Result):
            value = value.to_dict()
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif name.endswith("_interval") and isinstance(value, tuple) and len(value) == 2:
            out[f"{name}.low"], out[f"{name}.high"] = value
        elif name.endswith("_interval") and value is None:
            continue
        else:
            out[name] = value
    return out


def frame_columns(
    values: Mapping[str, Any], units: Mapping[str, str] | None = None, shape: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """Labelled columns of a flat mapping of values, arrays broadcast and raveled to a common length.

    Quantities become ``name [unit]`` columns of magnitudes (in ``units[name]`` if given). Arrays
    broadcast to ``shape`` (a ``ValueError`` if they cannot) or, without it, to their common shape;
    when they have none, every value stays whole in a single row.
    """
    units = units or {}
    labelled: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, ureg.Quantity):
            quantity = value.to(units[name]) if name in units else value
            labelled[column_label(name, quantity.units)] = quantity.magnitude
        elif value is None and name in units:
            labelled[column_label(name, units[name])] = np.nan
        else:
            labelled[name] = value
    labelled = {
        k: v.item() if isinstance(v, np.ndarray | np.generic) and np.ndim(v) == 0 else v for k, v in labelled.items()
    }
    if shape is None:
        shapes = [np.shape(v) for v in labelled.values() if _is_array(v)]
        try:
            shape = np.broadcast_shapes(*shapes) if shapes else ()
        except ValueError:
            return {label: [value] for label, value in labelled.items()}
    size = int(np.prod(shape))
    return {
        label: np.broadcast_to(value, shape).ravel() if _is_array(value) else [value] * size
        for label, value in labelled.items()
    }


def _is_array(value: Any) -> bool:
    magnitude = value.magnitude if isinstance(value, ureg.Quantity) else value
    return isinstance(magnitude, np.ndarray) and magnitude.ndim > 0


def format_value(value: Any) -> str:
    """A value as short readable text (``79.45 ms``, ``14 USD/h``, ``0.7971``, strings as they are)."""
    return value if isinstance(value, str) else _show(value)


#: The text of a missing value (``None``, NaN) in a readable display.
MISSING = "—"

#: Words written in capitals (or their own spelling) in a human label; every other word keeps its case.
ACRONYMS = {
    "ttft": "TTFT", "tpot": "TPOT", "tbt": "TBT", "tp": "TP", "pp": "PP", "ep": "EP", "kv": "KV", "gpu": "GPU",
    "gpus": "GPUs", "cpu": "CPU", "slo": "SLO", "slos": "SLOs", "moe": "MoE", "mla": "MLA", "gqa": "GQA",
    "mha": "MHA", "mqa": "MQA", "usd": "USD", "id": "ID", "ids": "IDs", "tdp": "TDP", "cv": "CV", "hbm": "HBM",
    "nvlink": "NVLink", "pcie": "PCIe", "lora": "LoRA", "qk": "QK", "q": "Q", "v": "V", "rtt": "RTT",
    "fp4": "FP4", "fp8": "FP8", "fp16": "FP16", "bf16": "BF16", "fp32": "FP32", "fp64": "FP64", "tf32": "TF32",
    "int4": "INT4", "int8": "INT8", "nccl": "NCCL", "llm": "LLM", "url": "URL", "flop": "FLOP", "flops": "FLOPs",
}  # fmt: skip

#: Trailing unit words of field names (``tpot_ms``): the label shows them as its unit.
_UNIT_SUFFIXES = {"ms": "ms", "s": "s", "us": "µs", "pct": "%", "gb": "GB", "gib": "GiB", "usd": "USD"}

_TIME_UNITS = tuple(ureg.Unit(name) for name in ("s", "ms", "us", "ns"))
_BYTE_UNITS = tuple(ureg.Unit(name) for name in ("B", "kB", "MB", "GB", "TB", "PB"))


def percentile_label(fraction: float | None) -> str:
    """A percentile as the outputs name it: ``p99``, ``p99.9``, ``p99.9999999`` (never ``p100``); None is ``mean``.

    Examples
    --------
    >>> percentile_label(0.99), percentile_label(0.999), percentile_label(0.999999999), percentile_label(None)
    ('p99', 'p99.9', 'p99.9999999', 'mean')
    """
    if fraction is None:
        return "mean"
    if isinstance(fraction, bool) or not isinstance(fraction, int | float | np.floating) or not 0 < fraction < 1:
        raise InputError(f"percentile_label: 'fraction' must be a number in (0, 1) or None, got {shown(fraction)}")
    return f"p{float(fraction) * 100:.12g}"


def format_number(value: Any, digits: int = 4) -> str:
    """A real number as text: ``digits`` significant digits, thousands separators, no exponent where readable.

    Ints are written exactly (``10,176``): counts keep every digit; floats are rounded. Outside
    ``1e-4 <= |x| < 1e15`` the exponent form is used; NaN is ``—`` and infinity ``∞``.

    Examples
    --------
    >>> format_number(0.082783), format_number(10176), format_number(20_261_234.5), format_number(2.0001)
    ('0.08278', '10,176', '20,260,000', '2')
    >>> format_number(1.5e-05), format_number(float("inf")), format_number(float("nan"))
    ('1.5e-05', '∞', '—')
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(f"format_number: 'value' must be a real number, got {shown(value)}")
    if not isinstance(digits, int | np.integer) or isinstance(digits, bool) or not 1 <= digits <= 17:
        raise InputError(f"format_number: 'digits' must be a whole number in [1, 17], got {shown(digits)}")
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    number = float(value)
    if math.isnan(number):
        return MISSING
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    if number == 0:
        return "0"
    exponent = math.floor(math.log10(abs(number)))
    if not -4 <= exponent < 15:
        return f"{number:.{digits}g}"
    decimals = digits - 1 - exponent
    if decimals < 0:
        return f"{round(number, decimals):,.0f}"
    text = f"{number:,.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text


def format_display(value: Any, unit: Any = None, digits: int = 4) -> str:
    """Any value as text for a reader (a dashboard cell or metric, a report).

    Numbers go through :func:`format_number`; a quantity is shown in ``unit`` when given, else in a
    readable unit (a time in s, ms or µs, a byte count in B ... TB, by its size; any other unit as it
    comes) with pint's short symbol; money from a million on is written in words (``20.26 million USD``);
    ``True``/``False`` are ``yes``/``no``; ``None``, NaN and an empty string are ``—``; a tuple is its
    items, comma-separated; other text is shown as it is.

    Examples
    --------
    >>> from calculator import Q_
    >>> format_display(Q_(0.082783, "s")), format_display(Q_(0.082783, "s"), "s"), format_display(True)
    ('82.78 ms', '0.08278 s', 'yes')
    >>> format_display(None), format_display(Q_(2_621_440, "B"), digits=3), format_display(Q_(1.5, "GiB"))
    ('—', '2.62 MB', '1.5 GiB')
    >>> format_display(Q_(20_261_234, "USD")), format_display(Q_(50_000, "USD/day"))
    ('20.26 million USD', '50,000 USD/d')
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return MISSING
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, ureg.Quantity):
        shown_as = value.to(unit) if unit else _readable_unit(value)
        if np.ndim(shown_as.magnitude):
            return ", ".join(format_display(item, digits=digits) for item in shown_as)
        magnitude, scale = _real(shown_as.magnitude), ""
        if "[currency]" in shown_as.dimensionality and math.isfinite(magnitude):
            # Money in words past a million (20.26 million USD): a metric has no room for 20,260,000 USD.
            scale, magnitude = next(
                ((word, magnitude / size) for word, size in _MONEY_SCALES if abs(magnitude) >= size), ("", magnitude)
            )
        return f"{format_number(magnitude, digits)} {scale} {shown_as.units:~P}".replace("  ", " ").strip()
    if isinstance(value, int | float | np.integer | np.floating):
        return format_number(value, digits)
    if isinstance(value, tuple | list | np.ndarray):
        if not len(value):
            return MISSING
        return ", ".join(format_display(item, unit, digits) for item in value)
    return str(value)


#: Words for large amounts of money, largest first.
_MONEY_SCALES = (("trillion", 1e12), ("billion", 1e9), ("million", 1e6))


def _real(magnitude: Any) -> Any:
    return magnitude.item() if isinstance(magnitude, np.generic) else magnitude


def _readable_unit(value: Any) -> Any:
    """A time in s, ms or µs and a decimal byte count in B ... TB by its size; other units unchanged."""
    if np.ndim(value.magnitude):
        return value
    magnitude = abs(float(value.magnitude))
    if value.units in _TIME_UNITS and magnitude > 0:
        seconds = abs(value.m_as("s"))
        return value.to("s" if seconds >= 1 else "ms" if seconds >= 1e-3 else "us")
    if value.units in _BYTE_UNITS and magnitude > 0:
        size = abs(value.m_as("B"))
        prefix = next((p for p, s in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)) if size >= s), "")
        return value.to(f"{prefix}B")
    return value


def human_label(name: str, unit: Any = None) -> str:
    """A column or row label for a reader from a field name or a ``name [unit]`` column label.

    Underscores and dots become words (a dotted part in brackets: ``dense_throughput.fp8`` -> ``Dense
    throughput (FP8)``), acronyms are capitalised (:data:`ACRONYMS`), ``per_s`` becomes ``/s``, a trailing unit
    word becomes the unit (``tpot_ms`` -> ``TPOT [ms]``), and the first letter is upper case. ``unit``
    (pint unit or text) is added in brackets unless the label has one.

    Examples
    --------
    >>> human_label("wait_probability"), human_label("ttft [ms]"), human_label("tokens_per_s_per_gpu")
    ('Wait probability', 'TTFT [ms]', 'Tokens/s per GPU')
    >>> human_label("max_context", "token"), human_label("closest.ttft [s]"), human_label("tpot_ms")
    ('Max context [token]', 'Closest (TTFT) [s]', 'TPOT [ms]')
    """
    if not isinstance(name, str):
        raise InputError(f"human_label: 'name' must be text, got {shown(name)}")
    text, bracket = parse_label(name.strip())
    if unit is not None and not bracket:
        bracket = unit if isinstance(unit, str) else f"{ureg.Unit(unit):~P}"
    parts = [part for part in text.split(".") if part] if " " not in text else [text]
    words = parts[0].replace("_", " ").split() if parts else []
    if not bracket and len(words) > 1 and len(parts) == 1 and words[-1] in _UNIT_SUFFIXES and words[-2] != "per":
        bracket = _UNIT_SUFFIXES[words.pop()]
    label = _words(words)
    if len(parts) > 1:
        label += " (" + ", ".join(_words(part.replace("_", " ").split()) for part in parts[1:]) + ")"
    if label[:1].isascii() and label[:1].islower():
        label = label[0].upper() + label[1:]
    return f"{label} [{bracket}]" if bracket else label


def _words(words: list[str]) -> str:
    out: list[str] = []
    for index, word in enumerate(words):
        if word == "s" and out and out[-1] == "per" and index > 1:
            out[-1:] = []
            out[-1] += "/s"
            continue
        out.append(ACRONYMS.get(word, word))
    return " ".join(out)


def _show(value: Any) -> str:
    if isinstance(value, ureg.Quantity):
        if np.ndim(value.magnitude):
            return f"<array {np.shape(value.magnitude)} {value.units:~P}>"
        shown = value if "[currency]" in value.dimensionality else value.to_compact()
        return f"{shown:.4g~P}"
    if isinstance(value, np.ndarray):
        return f"<array {value.shape} {value.dtype}>" if value.size > 8 else np.array2string(value, precision=4)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple):
        return "(" + ", ".join("none" if v is None else _show(v) for v in value) + ")"
    return repr(value)


def _json_ready(value: Any) -> Any:
    if isinstance(value, ureg.Quantity):
        magnitude = value.magnitude
        shown = magnitude.tolist() if isinstance(magnitude, np.ndarray) else float(magnitude)
        return {"value": shown, "unit": f"{value.units:~P}"}
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


def plain(values: Any) -> Any:
    """A 0-d array as a Python scalar; arrays unchanged (results keep the caller's shape)."""
    array = np.asarray(values)
    return array.item() if array.ndim == 0 else array


#: Relative tolerance of every count rounded from a real number: float noise rounds to the whole
#: number (45 GB / 2.5 GB = 17.999999999999996 is 18 slots; 12.000000000001 GPUs are 12), a real
#: shortfall does not (one byte short in 80 GB, relative 1.25e-11, is one slot fewer).
ROUNDING_TOLERANCE = 1e-12

#: The largest count a result holds exactly (2**53, the float's integer range); a larger one is an
#: error rather than an int64 overflow.
MAX_COUNT = 2**53


def ceil_whole(values: Any) -> Any:
    """Ceiling of non-negative reals (floats), forgiving float noise: 12.000000000001 -> 12."""
    return np.ceil(np.asarray(values, dtype=float) * (1 - ROUNDING_TOLERANCE))


def floor_whole(values: Any) -> Any:
    """Floor of non-negative reals (floats), forgiving float noise: 17.999999999999996 -> 18."""
    return np.floor(np.asarray(values, dtype=float) * (1 + ROUNDING_TOLERANCE))


def ceil_count(values: Any) -> Any:
    """Round a non-negative real count up to an int (see :func:`ceil_whole`)."""
    return as_count(ceil_whole(values))


def floor_count(values: Any) -> Any:
    """Round a non-negative real count down to an int (see :func:`floor_whole`)."""
    return as_count(floor_whole(values))


def as_count(values: Count) -> Count:
    """Whole-number floats as an ``int`` (or an int64 array): counts are ints, never floats.

    A count that is NaN, infinite or beyond :data:`MAX_COUNT` raises :class:`InputError` (callers that
    can meet one report it as infeasible first).
    """
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        raise InputError(f"a count must be a whole number, got {shown(values)}")
    if array.dtype.kind == "f" and (not np.all(np.isfinite(array)) or np.any(np.abs(array) > MAX_COUNT)):
        raise InputError(f"a count must be a finite whole number below 2**53, got {array.flat[0]!r}")
    counts = array.astype(np.int64)
    return counts.item() if counts.ndim == 0 else counts


def is_axis(value: Any) -> bool:
    """Whether a sweep argument is an axis of the grid (a list, tuple, or 1-D array or quantity array)."""
    magnitude = value.magnitude if isinstance(value, ureg.Quantity) else value
    return isinstance(magnitude, list | tuple) or (isinstance(magnitude, np.ndarray) and magnitude.ndim > 0)
