"""Serving capacity calculator: the chapter "Serving at Scale" as unit-checked models.

``import calculator`` loads only the unit registry. Every public model is importable from the top
level (``from calculator import size_fleet, kv_bytes_per_token, erlang_c``); the module that defines
a name loads on its first use, so ``import calculator`` stays light and never loads sympy, scipy,
plotly or streamlit. The modules themselves (``calculator.memory``, ``calculator.fleet``, ...) stay
importable too. Figures (``calculator.plots``) and the command line (``calculator.cli``) are not part
of the flat namespace: they need the optional dependencies.

>>> from calculator import Q_, load_registry
>>> load_registry().models["llama-3.1-70b"].kv_heads
8
>>> from calculator import erlang_c
>>> round(float(erlang_c(Q_(0.8, "request/s"), Q_(1, "s"), 1)), 2)
0.8
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from typing import Any

from .errors import CalculatorError as CalculatorError
from .errors import InputError as InputError
from .errors import RegistryError as RegistryError
from .errors import UnitsError as UnitsError
from .units import Q_ as Q_
from .units import check_units as check_units
from .units import ureg as ureg

__version__ = "0.1.0"

#: Modules whose public names are not served from the top level (they need optional libraries), and
#: a module whose name is also one of its own names (``calculator.formula`` stays the module).
_OUTSIDE = frozenset({"cli", "plots", "__main__"})
_KEEP_MODULE = frozenset({"formula"})
_CORE = ("Q_", "ureg", "check_units", "CalculatorError", "InputError", "RegistryError", "UnitsError")


@functools.cache
def _exports() -> dict[str, str]:
    """Public name -> module, read from each module's ``__all__`` in its source (nothing is imported).

    A package directly under ``calculator`` (``calculator/batching/__init__.py``) counts as the module
    ``batching``; its ``__init__`` lists the names its submodules define. Folders without an
    ``__init__.py`` (``calculator/data``) are not modules.
    """
    import ast
    import re
    from pathlib import Path

    folder = Path(__file__).parent
    sources = {path.stem: path for path in folder.glob("*.py")}
    sources.update({path.parent.name: path for path in folder.glob("*/__init__.py")})
    out: dict[str, str] = {}
    for module, path in sorted(sources.items()):
        if module.startswith("_") or module in _OUTSIDE:
            continue
        found = re.search(r"^__all__\s*=\s*(\[.*?\])", path.read_text(encoding="utf-8"), re.S | re.M)
        for name in ast.literal_eval(found.group(1)) if found else ():
            if name not in _KEEP_MODULE:
                out.setdefault(name, module)
    return out


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted({*_CORE, *_exports()})
    exports = _exports()
    if name in exports:
        value = getattr(importlib.import_module(f".{exports[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'calculator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
