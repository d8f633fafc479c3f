"""Export results to CSV and XLSX, with the formulas and registry sources that produced them.

A table to export is a pandas DataFrame (a sweep from :mod:`calculator.sweeps`, a frontier, a
registry listing) or a result object (any :class:`~calculator.results.Result`; its
:meth:`~calculator.results.Result.to_frame` is exported). Column labels carry units
(``ttft [ms]``), so a CSV is self-describing and reads back with ``pandas.read_csv``.

An XLSX workbook has three sheets:

``inputs``
    One row per input: name, unit, the value or swept values, and how many.
``results``
    The table itself, one row per result (for a sweep: the inputs of each row, then its results).
``sources``
    What the numbers come from: one row per model (``kind`` ``formula``: its LaTeX equation and
    chapter reference; ``function``: a library function such as ``fleet.size_fleet``) and one row
    per registry entry and source document (``kind`` ``registry``: the entry, the document's title
    and address, the fields it supports and the basis note).

Provenance is recorded by :class:`Provenance`: the models (formula catalog keys such as
``memory.kv_bytes_per_token``, or function paths such as ``fleet.size_fleet``), the registry ids
and the inputs. Sweeps attach one to their frame (``frame.attrs["provenance"]``); for other tables
pass ``models=``, ``registry_ids=`` and ``inputs=`` to :func:`to_xlsx`. Registry ids are also
picked up from the table's text cells (a ``model`` or ``accelerator`` column), so a fleet plan
cites its model, accelerator and price without being told.

Text is written inert: a text cell or column label that begins with ``=``, ``+``, ``-``, ``@``, a tab
or a line break would be read by a spreadsheet as a formula (OWASP, "CSV Injection"), so it gets a
leading ``'`` in CSV and XLSX alike, and a carriage return inside text is written as a line feed
(:func:`escape_formulas`). Numbers stay numbers.
"""

from __future__ import annotations

import importlib
import io
import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InputError
from .results import Result, column_label, is_axis
from .units import shown, ureg

if TYPE_CHECKING:
    from .registry import Registry


__all__ = [
    "FORMULA_TRIGGERS",
    "SHEETS",
    "Provenance",
    "as_frame",
    "escape_cell",
    "escape_formulas",
    "read_xlsx",
    "to_csv",
    "to_xlsx",
]

#: The sheets of an exported workbook, in order.
SHEETS = ("inputs", "results", "sources")
#: Columns of the ``sources`` sheet.
SOURCE_COLUMNS = ("kind", "id", "name", "reference", "latex", "source", "url", "fields", "note")
#: Rows a worksheet holds below its header (Excel's limit).
MAX_SHEET_ROWS = 1_048_575
#: The largest workbook :func:`read_xlsx` reads (bytes): a full sheet of a sweep is a few tens of MB.
MAX_WORKBOOK_BYTES = 256 * 1024 * 1024
#: Swept values listed in full on the inputs sheet; longer axes show their range.
MAX_LISTED_VALUES = 100
#: The library modules (directly under ``calculator``; a package counts as one) whose functions a table
#: cites by ``module.name`` on its sources sheet: the formula modules and the other models' modules. The
#: sources sheet imports them by name; ``tests/test_imports.py`` counts these edges in the import graph.
CITED_MODULES = (
    "autoscaling",
    "batching",
    "calibration",
    "cases",
    "deploy",
    "economics",
    "fleet",
    "kernels",
    "memory",
    "parallelism",
    "performance",
    "phases",
    "precision",
    "queueing",
    "regions",
    "routing",
    "serving",
    "simulation",
    "speculative",
    "tenancy",
    "uncertainty",
)
#: First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection"), and
#: the line feed a carriage return is written as (:func:`escape_cell`).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\n")


@dataclass(frozen=True)
class Provenance:
    """What produced a table: models, registry entries and inputs.

    Attributes
    ----------
    models : tuple of str
        Formula catalog keys (``"memory.kv_bytes_per_token"``), library function paths
        (``"fleet.size_fleet"``), or ``"user:module.name"`` for the caller's own functions.
    registry_ids : tuple of str
        Registry entries whose values were used (``"llama-3.1-70b"``, ``"h100-sxm"``).
    inputs : mapping
        Input name to the value used, or the list/array of values swept.
    """

    models: tuple[str, ...] = ()
    registry_ids: tuple[str, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)

    def merge(self, other: Provenance) -> Provenance:
        """Both records together (this one's inputs win on a shared name)."""
        return Provenance(
            models=tuple(dict.fromkeys((*self.models, *other.models))),
            registry_ids=tuple(dict.fromkeys((*self.registry_ids, *other.registry_ids))),
            inputs={**other.inputs, **self.inputs},
        )

    def inputs_frame(self) -> Any:
        """The ``inputs`` sheet: name, unit, value(s) and count of values, one row per input."""
        import pandas as pd

        rows = [_input_row(name, value) for name, value in self.inputs.items()]
        return pd.DataFrame(rows, columns=["name", "unit", "values", "points"])

    def sources_frame(self, registry: Any = None) -> Any:
        """The ``sources`` sheet: the models, then each registry entry's source documents."""
        import pandas as pd

        from ._support import registry_or_default

        reg = registry_or_default(registry, "Provenance.sources_frame")
        rows = [_model_row(key) for key in self.models]
        entries: dict[str, Any] = {}  # an alias and its id cite the entry once
        for name in self.registry_ids:
            section, entry = reg.find(name)
            entries.setdefault(entry.id, (section, entry))
        for section, entry in entries.values():
            rows.extend(_registry_rows(reg, section, entry))
        return pd.DataFrame(rows, columns=list(SOURCE_COLUMNS))


def as_frame(data: Any, units: Mapping[str, str] | None = None) -> Any:
    """A DataFrame from a DataFrame (returned as is) or a result object (:meth:`Result.to_frame`)."""
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, Result):
        return data.to_frame(units)
    raise InputError(f"export: expected a pandas DataFrame or a result object, got {type(data).__name__}")


def escape_cell(value: Any) -> Any:
    r"""A cell as a spreadsheet must show it: text beginning with a formula trigger gets a leading ``'``.

    Text beginning with one of :data:`FORMULA_TRIGGERS` (``=``, ``+``, ``-``, ``@``, tab, carriage
    return, line feed) would be evaluated as a formula by Excel, LibreOffice or Google Sheets; the
    quote makes it text. A carriage return inside text becomes a line feed, a cell's line break:
    Python's CSV writer quotes a field for a line feed but not for a bare carriage return, which a
    spreadsheet reads as the start of a new row, so ``"x\r=1+1"`` would open a row beginning with
    a formula (XLSX stores a carriage return as a line feed anyway). Anything that is not text
    (numbers, negative ones included; missing values) is returned as it is. Text that reads as a
    number (``"-1.5"``) is escaped like any other text: the rule has no exceptions to get wrong, and
    the calculator's numbers are numbers, not text. Other control characters (``\x00``, ``\x07``),
    which a worksheet cannot hold, become U+FFFD.

    Examples
    --------
    >>> escape_cell("=cmd|' /C calc'!A0")
    "'=cmd|' /C calc'!A0"
    >>> escape_cell(-1.5), escape_cell("-1.5"), escape_cell("llama-3.1-8b"), escape_cell("x\r=1+1")
    (-1.5, "'-1.5", 'llama-3.1-8b', 'x\n=1+1')
    >>> escape_cell("a\x00b")
    'a\ufffdb'
    """
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_TRIGGERS):
        value = "'" + value
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\ufffd", value)


#: Control characters a worksheet cannot hold (all but tab and line feed; carriage returns are line feeds by then).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def escape_formulas(frame: Any) -> Any:
    """A copy of a table (DataFrame or result object) with every text cell and column label made inert.

    Each cell and label goes through :func:`escape_cell`. Only text changes: numeric, boolean and
    date columns are kept as they are, so a negative number stays a number. :func:`to_csv` and
    :func:`to_xlsx` apply it to every sheet they write; call it yourself before writing a table for
    a spreadsheet by other means.

    Examples
    --------
    >>> import pandas as pd
    >>> escape_formulas(pd.DataFrame({"@name": ["+1 GPU", "h100-sxm"], "delta [ms]": [-1.5, 2.0]}))
         '@name  delta [ms]
    0  '+1 GPU        -1.5
    1  h100-sxm         2.0
    """
    from pandas.api.types import is_object_dtype, is_string_dtype

    frame = as_frame(frame)
    escaped = frame.copy()
    escaped.columns = range(frame.shape[1])  # positions: labels may repeat
    for position in escaped.columns:
        values = escaped[position]
        if is_object_dtype(values) or is_string_dtype(values) or values.dtype.name == "category":
            escaped[position] = values.astype(object).map(escape_cell)
    escaped.columns = frame.columns.map(_escape_label)
    return escaped


def to_csv(data: Any, path: str | Path | None = None, *, units: Mapping[str, str] | None = None) -> str | None:
    """Write a table (DataFrame or result object) as CSV; return the text when no ``path`` is given.

    Columns keep their ``name [unit]`` labels; no index column is written. Read it back with
    ``pandas.read_csv(path)`` (``inf`` reads back as infinity, missing values as NaN). Text that a
    spreadsheet would run as a formula is written with a leading ``'`` (:func:`escape_formulas`).

    Examples
    --------
    >>> from calculator import Q_
    >>> from calculator.sweeps import sweep
    >>> print(to_csv(sweep("memory.weight_bytes", parameters=[8e9, 70e9], bits_per_weight=16)))
    parameters,bits_per_weight,weight_bytes [B]
    8000000000.0,16,16000000000.0
    70000000000.0,16,140000000000.0
    <BLANKLINE>
    """
    frame = as_frame(data, units)
    return escape_formulas(frame).to_csv(path, index=False)


def to_xlsx(
    data: Any,
    path: str | Path,
    *,
    models: Iterable[str] = (),
    registry_ids: Iterable[str] = (),
    inputs: Mapping[str, Any] | None = None,
    units: Mapping[str, str] | None = None,
    registry: Registry | None = None,
) -> Path:
    """Write a workbook with ``inputs``, ``results`` and ``sources`` sheets (see the module docstring).

    Parameters
    ----------
    data : DataFrame or Result
        The table (a sweep carries its provenance in ``attrs["provenance"]``).
    path : str or Path
        The ``.xlsx`` file to write.
    models, registry_ids : iterables of str, optional
        Models and registry entries to cite besides those the table records or names.
    inputs : mapping, optional
        Inputs to list besides those the table records.
    units : mapping of str to str, optional
        Units for a result object's columns (see :meth:`Result.to_frame`).
    registry : Registry, optional
        Where to look sources up (the default registry if not given; pass yours when you loaded
        extra files).

    Returns
    -------
    Path
        The file written. Text cells and labels that a spreadsheet would run as a formula are
        written as text with a leading ``'`` (:func:`escape_formulas`); no cell holds a formula.
    """
    import pandas as pd

    frame = as_frame(data, units)
    if len(frame) > MAX_SHEET_ROWS:
        raise InputError(
            f"to_xlsx(): {len(frame)} rows do not fit a worksheet ({MAX_SHEET_ROWS} at most); write CSV instead"
        )
    from ._support import registry_or_default

    reg = registry_or_default(registry, "to_xlsx")
    given = Provenance(tuple(models), tuple(registry_ids), dict(inputs or {}))
    recorded = frame.attrs.get("provenance", Provenance())
    named = Provenance(registry_ids=_ids_in(frame, reg))
    provenance = given.merge(recorded).merge(named)
    sheets = {
        "inputs": provenance.inputs_frame(),
        "results": frame,
        "sources": provenance.sources_frame(reg),
    }
    path = Path(path)
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        for name, sheet in sheets.items():
            sheet = escape_formulas(sheet)
            sheet.to_excel(writer, sheet_name=name, index=False)
            _tidy_sheet(writer.sheets[name], sheet)
    return path


def read_xlsx(path: str | Path) -> dict[str, Any]:
    """The sheets of a workbook written by :func:`to_xlsx`, as DataFrames keyed by sheet name.

    Infinite values (written as the text ``inf``, as Excel has no infinity) are read back as floats.
    Text written with a leading ``'`` (:func:`escape_formulas`) is read back as written, quote included.
    """
    import pandas as pd

    from ._files import read_bytes

    if not isinstance(path, str | Path):
        raise InputError(f"read_xlsx(): argument 'path' must be a file path, got {shown(path)}")
    data = read_bytes(path, MAX_WORKBOOK_BYTES, "read_xlsx()")
    try:
        sheets = pd.read_excel(io.BytesIO(data), sheet_name=None, engine="openpyxl")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:  # not a workbook
        raise InputError(f"read_xlsx(): cannot read {shown(str(path))}: {shown(str(exc))}") from None
    return {name: _restore_infinities(sheet) for name, sheet in sheets.items()}


# --------------------------------------------------------------------------------------------
# helpers


def _escape_label(label: Any) -> Any:
    """A column label made inert; a multi-level label level by level."""
    return tuple(map(escape_cell, label)) if isinstance(label, tuple) else escape_cell(label)


def _input_row(name: str, value: Any) -> dict[str, Any]:

    unit = ""
    if isinstance(value, ureg.Quantity):
        unit = column_label("", value.units)[2:-1]
        value = value.magnitude
    elif isinstance(value, list | tuple) and value and isinstance(value[0], ureg.Quantity):
        unit = column_label("", value[0].units)[2:-1]
        value = [v.m_as(value[0].units) for v in value]
    if not is_axis(value):
        return {"name": name, "unit": unit, "values": _text(value), "points": 1}
    values = list(np.ravel(value)) if isinstance(value, np.ndarray) else list(value)
    if len(values) <= MAX_LISTED_VALUES:
        shown = ", ".join(_text(v) for v in values)
    else:
        shown = f"{_text(values[0])}, {_text(values[1])}, ..., {_text(values[-1])}"
    return {"name": name, "unit": unit, "values": shown, "points": len(values)}


def _text(value: Any) -> str:
    value = getattr(value, "id", value)
    if isinstance(value, np.generic):
        value = value.item()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _model_row(key: str) -> dict[str, Any]:
    from .formula import catalog

    formulas = catalog()
    if key in formulas:
        formula = formulas[key]
        return {
            "kind": "formula",
            "id": key,
            "name": _summary(formula.__doc__),
            "reference": formula.reference,
            "latex": formula.latex(),
        }
    if key.startswith("user:"):
        return {"kind": "function", "id": key.removeprefix("user:"), "reference": "the caller's own code"}
    module, _, name = key.rpartition(".")
    try:
        if module.split(".", 1)[0] not in CITED_MODULES:
            raise ImportError(f"calculator.{module} is not a cited module")
        function = getattr(importlib.import_module(f"calculator.{module}"), name)
    except (ImportError, AttributeError, ValueError):
        raise InputError(f"export: no formula or library function {key!r} to cite") from None
    return {"kind": "function", "id": key, "name": _summary(function.__doc__), "reference": f"calculator.{key}"}


def _summary(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0]


def _registry_rows(reg: Any, section: str, entry: Any) -> list[dict[str, Any]]:
    if section == "sources":
        return [
            {"kind": "registry", "id": entry.id, "name": entry.title, "source": entry.id, "url": entry.url}
            | {"reference": entry.kind, "note": entry.note}
        ]
    rows = []
    for link in entry.sources:
        document = reg.sources[link.source]
        rows.append(
            {
                "kind": "registry",
                "id": entry.id,
                "name": entry.name,
                "reference": entry.provenance,
                "source": document.title,
                "url": document.url,
                "fields": ", ".join(link.fields),
                "note": link.note,
            }
        )
    return rows


def _ids_in(frame: Any, reg: Any) -> tuple[str, ...]:
    """Registry entries named in the table's text columns (model, accelerator, ...)."""
    from pandas.api.types import is_object_dtype, is_string_dtype

    sections = [reg.section(name) for name in ("models", "accelerators", "interconnects", "prices")]
    ids: list[str] = []
    for column in frame.columns:
        if is_object_dtype(frame[column]) or is_string_dtype(frame[column]):
            for value in frame[column].dropna().unique():
                ids.extend(s[value].id for s in sections if isinstance(value, str) and value in s)
    return tuple(dict.fromkeys(ids))


def _tidy_sheet(sheet: Any, frame: Any) -> None:
    """Bold, frozen header row and columns wide enough for their labels."""
    from openpyxl.styles import Font

    sheet.freeze_panes = "A2"
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for index, label in enumerate(frame.columns, start=1):
        letter = sheet.cell(row=1, column=index).column_letter
        sheet.column_dimensions[letter].width = min(max(len(str(label)) + 2, 10), 60)


def _restore_infinities(frame: Any) -> Any:
    import pandas as pd
    from pandas.api.types import is_object_dtype, is_string_dtype

    for column in frame.columns:
        values = frame[column]
        if is_object_dtype(values) or is_string_dtype(values):
            present = values.dropna()
            infinite = present.map(lambda v: v in ("inf", "-inf"))
            numbers = present.map(lambda v: isinstance(v, int | float) and not isinstance(v, bool))
            if infinite.any() and (infinite | numbers).all():
                frame[column] = pd.to_numeric(values.replace({"inf": np.inf, "-inf": -np.inf}))
    return frame
