"""Hostile arguments for every public function: the cases of the fuzz test (``tests/test_fuzz.py``).

Each case takes a call that succeeds (``public_calls.valid_call``) and replaces one argument with a
hostile value: missing (``None``), NaN, infinity, zero, a negative, a huge or tiny number, a string,
an empty list, a quantity of the wrong dimension, a NaN quantity. The arguments many functions share
by name get theirs whether the valid call gives them or not (:data:`BY_NAME`: a ``registry`` that is
not a Registry, a ``seed`` that is NaN, negative or past 2**63). A call may raise one of the
project's errors (``CalculatorError``) or return a result; it may not raise anything else, hang, or
return NaN where every input was a finite number of the right type.
"""

from __future__ import annotations

import dataclasses
import math
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from public_calls import public_functions, valid_call

from calculator import Q_, ureg

#: Hostile values for any argument, with whether the value is a finite number of the right type
#: (then the result must be finite too, or an error).
GENERIC: list[tuple[str, Any]] = [
    ("none", None),
    ("string", "abc"),
    ("empty-string", ""),
    ("empty-list", []),
    ("bool", True),
]


#: Hostile values of optional arguments, by name, for every function that takes one (issue 57: a registry
#: 'abc' was an AttributeError in about 40 functions; a NaN or negative seed reached numpy).
BY_NAME: dict[str, list[tuple[str, Any]]] = {
    "registry": [("registry-string", "abc"), ("registry-int", 42)],
    "seed": [("seed-nan", math.nan), ("seed-negative", -1), ("seed-2**70", 2**70), ("seed-half", 0.5)],
}


def numeric_values(value: Any) -> Iterator[tuple[str, Any, bool]]:
    """Hostile numbers of the kind of ``value`` (a plain number or a quantity): (label, value, finite)."""
    unit = value.units if isinstance(value, ureg.Quantity) else None

    def make(x: float) -> Any:
        return x if unit is None else Q_(x, unit)

    for label, x, finite in [
        ("nan", math.nan, False),
        ("inf", math.inf, False),
        ("-inf", -math.inf, False),
        ("zero", 0.0, True),
        ("negative", -3.0, True),
        ("huge", 1e300, True),
        ("tiny", 1e-300, True),
        ("half", 0.5, True),
    ]:
        yield label, make(x), finite
    if unit is not None:
        yield "wrong-dimension", Q_(1.0, "kg"), False
    else:
        yield "quantity-of-seconds", Q_(1.0, "s"), False


def cases(limit_per_function: int | None = None) -> Iterator[tuple[str, str, str, Any, bool]]:
    """(function, argument, label, value, finite) for every callable public function."""
    import inspect

    for name in sorted(public_functions()):
        call = valid_call(name)
        if call is None:
            continue
        parameters = inspect.signature(public_functions()[name]).parameters
        found = [(a, label, v, False) for a, values in BY_NAME.items() if a in parameters for label, v in values]
        for argument, value in call.items():
            numeric = isinstance(value, int | float | ureg.Quantity) and not isinstance(value, bool)
            hostile = list(numeric_values(value)) if numeric else []
            hostile += [(label, v, False) for label, v in GENERIC]
            found += [(argument, label, bad, finite) for label, bad, finite in hostile]
        for argument, label, bad, finite in found[:limit_per_function]:
            yield name, argument, label, bad, finite


class CallTimeoutError(Exception):
    """A call ran past its time limit."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CallTimeoutError` in the main thread after ``seconds`` (Unix interval timer)."""

    def stop(signum: int, frame: Any) -> None:
        raise CallTimeoutError(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def has_nan(value: Any, depth: int = 0) -> bool:
    """Whether a result holds NaN anywhere (quantities, arrays, result objects, mappings, frames)."""
    if depth > 6:
        return False
    if isinstance(value, ureg.Quantity):
        return has_nan(value.magnitude, depth + 1)
    if isinstance(value, float | np.floating):
        return bool(np.isnan(value))
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "f" and bool(np.isnan(value).any())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(has_nan(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return any(has_nan(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_nan(v, depth + 1) for v in value[:1000])
    if hasattr(value, "select_dtypes"):  # a DataFrame; an infeasible plan's row has no values (NaN) by design
        rows = value[value["feasible"].astype(bool)] if "feasible" in value.columns else value
        numbers = rows.select_dtypes("number")
        return bool(numbers.isna().to_numpy().any())
    return False


__all__ = ["CallTimeoutError", "cases", "has_nan", "time_limit"]
