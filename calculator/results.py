"""Result objects: frozen dataclasses of quantities with a readable repr and ``to_dict()``.

A model that returns several related numbers (a latency budget, a queue's metrics, a batch schedule)
returns a frozen dataclass that subclasses :class:`Result`. Declare it with
``@dataclass(frozen=True, repr=False)`` so that the compact repr below is kept.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .units import ureg

__all__ = ["Result", "as_count", "plain"]


class Result:
    """Mixin for result dataclasses: ``to_dict()`` and a repr that prints quantities compactly."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (values keep their units; use it to build a DataFrame row)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}  # type: ignore[arg-type]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={_show(value)}" for name, value in self.to_dict().items())
        return f"{type(self).__name__}({shown})"


def _show(value: Any) -> str:
    if isinstance(value, ureg.Quantity):
        if np.ndim(value.magnitude):
            return f"{_show(value.magnitude)} {value.units:~P}"
        return f"{value:.4g~P}"
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return np.array2string(value, threshold=6)
        return np.array2string(value, precision=4, threshold=6, suppress_small=True)
    if isinstance(value, float | np.floating):
        return f"{value:.4g}"
    return repr(value)


def plain(values: Any) -> Any:
    """A 0-d array as a Python scalar; arrays unchanged (results keep the caller's shape)."""
    array = np.asarray(values)
    return array.item() if array.ndim == 0 else array


def as_count(values: Any) -> Any:
    """Whole-number floats as an ``int`` (or an int64 array): counts are ints, never floats."""
    counts = np.asarray(values).astype(np.int64)
    return counts.item() if counts.ndim == 0 else counts
