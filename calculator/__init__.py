"""Serving capacity calculator: the chapter "Serving at Scale" as unit-checked models.

``import calculator`` loads only the unit registry. The formula modules and the registry
(pydantic, YAML) load on first use, so ``calculator.memory`` or ``calculator.load_registry`` work
without importing them explicitly; sympy, scipy, plotly and streamlit are never loaded here.

>>> from calculator import Q_, load_registry
>>> load_registry().models["llama-3.1-70b"].kv_heads
8
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .errors import CalculatorError, InputError, RegistryError, UnitsError
from .units import Q_, check_units, ureg

__version__ = "0.1.0"

_LAZY_NAMES = {"load_registry": "registry", "Registry": "registry", "catalog": "formula"}

__all__ = [
    "Q_",
    "ureg",
    "check_units",
    "load_registry",
    "catalog",
    "CalculatorError",
    "InputError",
    "RegistryError",
    "UnitsError",
]


def __getattr__(name: str) -> Any:
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module 'calculator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
