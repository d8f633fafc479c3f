"""Base of the calculator's multi-part results: frozen dataclasses of quantities.

Subclass with ``@dataclass(frozen=True, repr=False)``. The repr shows quantities compactly
(``4.35 ms`` rather than ``<Quantity(0.00435, 'second')>``); :meth:`Result.to_dict` gives a mapping
for DataFrames, JSON and the dashboard (nested results become nested dicts).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .units import ureg

__all__ = ["Result", "as_count", "plain"]


class Result:
    """Mixin for frozen result dataclasses: a compact repr and :meth:`to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (quantities stay quantities; nested results become dicts)."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            out[field.name] = value.to_dict() if isinstance(value, Result) else value
        return out

    def to_json_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values: a quantity becomes ``{"value": ..., "unit": ...}``."""
        return {key: _json_ready(value) for key, value in self.to_dict().items()}

    def __repr__(self) -> str:
        fields = dataclasses.fields(self)  # type: ignore[arg-type]
        parts = [f"{field.name}={_show(getattr(self, field.name))}" for field in fields if field.repr]
        return f"{type(self).__name__}({', '.join(parts)})"


def format_value(value: Any) -> str:
    """A value as short readable text (``79.45 ms``, ``14 USD/h``, ``0.7971``, strings as they are)."""
    return value if isinstance(value, str) else _show(value)


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


def as_count(values: Any) -> Any:
    """Whole-number floats as an ``int`` (or an int64 array): counts are ints, never floats."""
    counts = np.asarray(values).astype(np.int64)
    return counts.item() if counts.ndim == 0 else counts
