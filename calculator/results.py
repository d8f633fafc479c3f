"""A base class for multi-part results: frozen dataclasses of quantities with a readable repr.

Subclass with ``@dataclass(frozen=True, repr=False)``; the repr shows quantities compactly
(``4.35 ms`` rather than ``<Quantity(0.00435, 'second')>``) and :meth:`Result.to_dict` gives a
plain mapping for DataFrames, JSON and the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .units import ureg

__all__ = ["Result"]


def _show(value: Any) -> str:
    if isinstance(value, ureg.Quantity):
        if np.ndim(value.magnitude):
            return f"{np.array2string(np.asarray(value.magnitude), precision=4, threshold=8)} {value.units:~P}"
        return f"{value:.4g~P}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, np.ndarray):
        return np.array2string(value, precision=4, threshold=8)
    return repr(value)


@dataclass(frozen=True, repr=False)
class Result:
    """Base of the calculator's result objects (frozen dataclasses)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (quantities kept as quantities)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.name}={_show(getattr(self, f.name))}" for f in fields(self) if f.repr)
        return f"{type(self).__name__}({parts})"
