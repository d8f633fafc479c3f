"""Helpers shared by the plain (non-formula) functions: input checks, registry objects, results.

Formulas check their arguments through :mod:`calculator.formula`; the plain functions of
:mod:`calculator.memory`, :mod:`calculator.phases` and :mod:`calculator.speculative` (searches,
simulations, results with several parts) use these helpers at their boundary so that their errors
read the same way: the function, the argument, what was expected and what was given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InputError, UnitsError
from .formula import magnitude
from .units import describe_value, shown, ureg

__all__ = [
    "renamed",
    "accelerator_of",
    "bits_of",
    "count",
    "device_capacity",
    "magnitude",
    "model_of",
    "instance",
    "instances",
    "mapping",
    "numbers",
    "probability",
    "scalar",
    "transformer_of",
]


def count(function: str, argument: str, value: Any, minimum: int = 1, maximum: float = 2**53) -> Any:
    """An integer count (a plain number, or a quantity of tokens/requests) in ``[minimum, maximum]``.

    The default ``maximum`` is the largest whole number a float holds exactly (2**53); routines whose
    work grows with a count (simulations, searches) pass a smaller one.

    Returns a Python int for a scalar, an int64 array for an array.
    """
    if isinstance(value, ureg.Quantity):
        if value.dimensionality not in (ureg.token.dimensionality, ureg.request.dimensionality, {}):
            raise UnitsError(
                f"{function}(): argument '{argument}' is a count (a plain number of tokens or requests), "
                f"got {describe_value(value)}"
            )
        value = value.magnitude
    if np.ndim(value) and np.size(value) == 0:
        raise InputError(f"{function}(): argument '{argument}' is an empty list; give a whole number (or numbers)")
    domain = "positive_integer" if minimum >= 1 else "nonnegative"
    values = magnitude(function, argument, value, "", domain)
    if not np.all(np.isfinite(values)):
        raise InputError(f"{function}(): argument '{argument}' must be a finite whole number, got {shown(value)}")
    if minimum < 1 and np.any(np.asarray(values) != np.round(values)):
        raise InputError(f"{function}(): argument '{argument}' must be a whole number, got {shown(value)}")
    if np.any(np.asarray(values) < minimum):
        raise InputError(f"{function}(): argument '{argument}' must be >= {minimum}, got {shown(value)}")
    if np.any(np.asarray(values) > maximum):
        raise InputError(f"{function}(): argument '{argument}' must be at most {maximum:,}, got {shown(value)}")
    if np.ndim(values):
        return np.asarray(values).astype(np.int64)
    return int(values)


def scalar(function: str, argument: str, value: Any, unit: str = "", domain: str = "nonnegative") -> float:
    """One number (not an array) in ``unit`` and ``domain``, as a float: for arguments that are not vectorized."""
    if np.ndim(value if not isinstance(value, ureg.Quantity) else value.magnitude):
        raise InputError(f"{function}(): argument '{argument}' must be one number, got {shown(value)}")
    return float(magnitude(function, argument, value, unit, domain))


def mapping(function: str, argument: str, value: Any) -> Any:
    """A mapping (``{"prefill": ..., "decode": ...}``), or :class:`InputError` naming the argument."""
    from collections.abc import Mapping

    if not isinstance(value, Mapping):
        raise InputError(
            f"{function}(): argument '{argument}' must be a mapping of names to values, got {shown(value)}"
        )
    return value


def instance(function: str, argument: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is a ``kind`` (a plan, a measurement, a ring), else an :class:`InputError` naming it."""
    if not isinstance(value, kind):
        raise InputError(f"{function}(): argument '{argument}' must be {what}, got {shown(value)}")
    return value


def instances(function: str, argument: str, value: Any, kind: type, what: str) -> Any:
    """A non-empty list (or tuple) of ``kind`` objects, else :class:`InputError` saying ``what`` it must list."""
    from collections.abc import Sequence

    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise InputError(f"{function}(): argument '{argument}' must list at least one {what}, got {shown(value)}")
    if not all(isinstance(item, kind) for item in value):
        raise InputError(f"{function}(): argument '{argument}' must list {what} objects only, got {shown(value)}")
    return value


def numbers(function: str, argument: str, value: Any, domain: str = "any") -> Any:
    """A non-empty 1-D array of plain numbers in ``domain`` (a list, a tuple or an array), as floats."""
    array = np.atleast_1d(magnitude(function, argument, value, "", domain))
    if array.ndim != 1 or array.size == 0:
        raise InputError(f"{function}(): argument '{argument}' must be a non-empty list of numbers, got {shown(value)}")
    return array


def probability(function: str, argument: str, value: Any) -> Any:
    """A probability in [0, 1] (float or float array)."""
    return magnitude(function, argument, value, "", "probability")


def model_of(value: Any, registry: Any = None) -> Any:
    """A registry :class:`~calculator.registry.Model` from an id or a model object (passed through).

    Ids resolve in ``registry`` (default: the packaged registry).
    """
    if isinstance(value, str):
        from .registry import load_registry

        return (registry if registry is not None else load_registry()).model(value)
    if not hasattr(value, "attention") or not hasattr(value, "parameters"):
        raise InputError(f"expected a registry model id or Model object, got {shown(value)}")
    return value


def transformer_of(value: Any, function: str, registry: Any = None) -> Any:
    """A registry model that is a transformer with a KV cache, or :class:`InputError` (ids resolve in ``registry``)."""
    model = model_of(value, registry)
    if getattr(model, "kind", "transformer") != "transformer" or getattr(model, "layers", None) is None:
        raise InputError(f"{function}(): model '{model.id}' is not a transformer with a KV cache")
    return model


def bits_of(function: str, argument: str, value: Any) -> float:
    """Bits per element from a precision name (``"int4"``) or a positive number of bits (``4.25``)."""
    if isinstance(value, str):
        from .precision import bits_per_element, check_precision

        return float(bits_per_element(check_precision(value, argument)))
    return magnitude(function, argument, value, "", "positive")


def accelerator_of(value: Any, registry: Any = None) -> Any:
    """A registry :class:`~calculator.registry.Accelerator` from an id or an accelerator object.

    Ids resolve in ``registry`` (default: the packaged registry).
    """
    if isinstance(value, str):
        from .registry import load_registry

        return (registry if registry is not None else load_registry()).accelerator(value)
    if not hasattr(value, "memory_bandwidth") or not hasattr(value, "peak_throughput"):
        raise InputError(f"expected a registry accelerator id or Accelerator object, got {shown(value)}")
    return value


CAPACITY_BASES = ("physical", "nameplate")


def device_capacity(function: str, capacity: Any, basis: str = "physical", registry: Any = None) -> Any:
    """Memory per device in bytes: a byte quantity as given, or an accelerator's capacity on ``basis``.

    ``basis="physical"`` is the registered byte capacity (``Accelerator.memory``, 80 GiB for an H100),
    ``"nameplate"`` the marketed figure (``Accelerator.memory_nameplate``, 80 GB), which the chapter
    calls the conservative decimal budget.
    """
    if isinstance(capacity, ureg.Quantity):
        return magnitude(function, "capacity", capacity, "B", "positive")
    if basis not in CAPACITY_BASES:
        raise InputError(f"{function}(): argument 'capacity_basis' must be one of {CAPACITY_BASES}, got {basis!r}")
    device = accelerator_of(capacity, registry)
    chosen = device.memory if basis == "physical" else device.memory_nameplate
    return chosen.m_as("B")


def renamed(**names: str) -> Any:
    """Keep old keyword names working for one release: ``@renamed(kv_dtype="kv_precision")``.

    A call with an old name warns (``DeprecationWarning``) and passes the value under the new name;
    giving both is an :class:`InputError`.
    """
    import functools
    import warnings

    def wrap(function: Any) -> Any:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in names.items():
                if old in kwargs:
                    if new in kwargs:
                        raise InputError(f"{function.__name__}(): give '{new}' only ('{old}' is its old name)")
                    warnings.warn(
                        f"{function.__name__}(): argument '{old}' is renamed '{new}'; the old name goes in the next "
                        "release",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return call

    return wrap
