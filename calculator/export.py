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
"""

from __future__ import annotations

import importlib
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


__all__ = ["SHEETS", "Provenance", "as_frame", "read_xlsx", "to_csv", "to_xlsx"]

#: The sheets of an exported workbook, in order.
SHEETS = ("inputs", "results", "sources")
#: Columns of the ``sources`` sheet.
SOURCE_COLUMNS = ("kind", "id", "name", "reference", "latex", "source", "url", "fields", "note")
#: Rows a worksheet holds below its header (Excel's limit).
MAX_SHEET_ROWS = 1_048_575
#: Swept values listed in full on the inputs sheet; longer axes show their range.
MAX_LISTED_VALUES = 100


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

        from .registry import load_registry

        reg = registry if registry is not None else load_registry()
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


def to_csv(data: Any, path: str | Path | None = None, *, units: Mapping[str, str] | None = None) -> str | None:
    """Write a table (DataFrame or result object) as CSV; return the text when no ``path`` is given.

    Columns keep their ``name [unit]`` labels; no index column is written. Read it back with
    ``pandas.read_csv(path)`` (``inf`` reads back as infinity, missing values as NaN).

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
    return frame.to_csv(path, index=False)


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
        The file written.
    """
    import pandas as pd

    frame = as_frame(data, units)
    if len(frame) > MAX_SHEET_ROWS:
        raise InputError(
            f"to_xlsx(): {len(frame)} rows do not fit a worksheet ({MAX_SHEET_ROWS} at most); write CSV instead"
        )
    from .registry import load_registry

    reg = registry if registry is not None else load_registry()
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
            sheet.to_excel(writer, sheet_name=name, index=False)
            _tidy_sheet(writer.sheets[name], sheet)
    return path


def read_xlsx(path: str | Path) -> dict[str, Any]:
    """The sheets of a workbook written by :func:`to_xlsx`, as DataFrames keyed by sheet name.

    Infinite values (written as the text ``inf``, as Excel has no infinity) are read back as floats.
    """
    import pandas as pd

    if not isinstance(path, str | Path):
        raise InputError(f"read_xlsx(): argument 'path' must be a file path, got {shown(path)}")
    try:
        sheets = pd.read_excel(path, sheet_name=None, engine="openpyxl")
    except (OSError, ValueError, KeyError) as exc:  # missing file, not a workbook
        raise InputError(f"read_xlsx(): cannot read {shown(str(path))}: {shown(str(exc))}") from None
    return {name: _restore_infinities(sheet) for name, sheet in sheets.items()}


# --------------------------------------------------------------------------------------------
# helpers


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
