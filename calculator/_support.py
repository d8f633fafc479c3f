"""Helpers shared by the plain (non-formula) functions: input checks, registry objects, results.

Formulas check their arguments through :mod:`calculator.formula`; the plain functions of
:mod:`calculator.memory`, :mod:`calculator.phases` and :mod:`calculator.speculative` (searches,
simulations, results with several parts) use these helpers at their boundary so that their errors
read the same way: the function, the argument, what was expected and what was given.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .errors import InputError, UnitsError
from .formula import magnitude
from .types import alias_dimension
from .units import PINT_UNIT_ERRORS, describe_value, shown, ureg, wrong_unit

__all__ = [
    "Arg",
    "arg",
    "checked",
    "checked_arguments",
    "one",
    "renamed",
    "accelerator_of",
    "bits_of",
    "count",
    "device_capacity",
    "executor_or_none",
    "magnitude",
    "model_of",
    "instance",
    "instances",
    "mapping",
    "numbers",
    "plain_number",
    "probability",
    "random_seed",
    "registry_or_default",
    "registry_or_none",
    "scalar",
    "transformer_of",
]


_F = TypeVar("_F", bound=Callable[..., Any])

#: The domain an argument gets from the kind of its alias when ``checked`` names none for it.
DEFAULT_DOMAINS = {
    "quantity": "nonnegative",
    "tokens": "nonnegative",
    "count": "positive_integer",
    "probability": "probability",
    "fraction": "probability",
    "number": "nonnegative",
}

#: The largest whole number a float holds exactly: the bound of every count.
MAX_COUNT = 2**53

#: The largest coefficient of variation of a length or of inter-arrival times (traces measure 0.5 to about 5).
MAX_CV = 100.0

#: A domain written with this suffix also takes infinity (``deadline="positive+inf"``).
INFINITE = "+inf"

#: The domain that leaves an argument to the function (a ragged list of arrays, a trace it parses itself).
UNCHECKED = "unchecked"


def checked(**domains: str | Arg) -> Callable[[_F], _F]:
    """The one boundary check of a plain function: its signature's aliases say each argument's unit.

    Every parameter annotated with a quantity or number alias of :mod:`calculator.types` (``Time``,
    ``Rate``, ``Count``, ``Probability``, optional ones such as ``Time | None`` included) is checked
    for its dimension, its domain and finiteness by :func:`~calculator.formula.magnitude`, and the
    function body receives its magnitude in the alias's unit (seconds for ``Time``, request/s for
    ``Rate``): a float, or a float array. ``domains`` names the domain of an argument whose kind's
    default (:data:`DEFAULT_DOMAINS`: quantities and numbers >= 0, counts whole and >= 1 and at
    most :data:`MAX_COUNT`, probabilities and fractions in [0, 1]) does not fit: ``"positive"``,
    ``"nonnegative_integer"`` (a count that may be zero), ``"fraction_open"``, ``"any"``, ...,
    with :data:`INFINITE` appended where infinity is a valid value, or :data:`UNCHECKED` for an
    argument the body checks itself; :func:`one` declares an argument that takes one number, not an
    array. An empty array is refused unless :func:`arg` declares it valid (``arg(empty=True)``).
    ``None`` passes for a parameter whose default is ``None``; anywhere else it is an error naming
    the argument. A unit error raised
    inside the body (an argument without an alias) becomes a :class:`UnitsError` naming the function.

    The annotations are read on the first call, so decorating costs nothing at import time.

    Examples
    --------
    >>> from calculator import Q_
    >>> from calculator.types import Time
    >>> @checked(duration="positive")
    ... def twice(duration: Time) -> float:
    ...     return 2 * duration
    >>> twice(Q_(3, "ms"))
    np.float64(0.006)
    >>> twice(Q_(0, "s"))
    Traceback (most recent call last):
    ...
    calculator.errors.InputError: twice(): argument 'duration' must be > 0, got 0.0
    """

    def decorate(func: _F) -> _F:
        signature = inspect.signature(func)
        unknown = set(domains) - set(signature.parameters)
        if unknown:
            raise TypeError(f"checked on {func.__name__}: no arguments named {sorted(unknown)}")
        plan: list[_Checked] = []

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not plan:
                plan.extend(_plan(func, signature, domains))
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            for spec in plan:
                value = bound.arguments[spec.name]
                if value is None:
                    if signature.parameters[spec.name].default is None:
                        continue
                    example = spec.unit or "unit"
                    raise UnitsError(
                        f"{func.__name__}(): argument '{spec.name}' is required (like 1 {example}), got None"
                    )
                bound.arguments[spec.name] = spec.convert(func.__name__, value)
            try:
                return func(*bound.args, **bound.kwargs)
            except PINT_UNIT_ERRORS as exc:  # an argument without an alias had the wrong unit
                raise wrong_unit(func.__name__, exc) from None

        wrapper.__checked__ = (func, signature, dict(domains))  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


@dataclass(frozen=True)
class Arg:
    """The declaration of one argument in :func:`checked` beyond its domain (see :func:`one`, :func:`arg`)."""

    domain: str | None = None
    scalar: bool = False  # one number: arrays are refused
    empty: bool = False  # an empty array is a valid value (an empty queue)


def one(domain: str | None = None) -> Arg:
    """Declare, in :func:`checked`, an argument that is one number (a count of rounds, a step): arrays are refused.

    ``domain`` as for any argument of :func:`checked` (default: its kind's).
    """
    return Arg(domain, scalar=True)


def arg(domain: str | None = None, *, empty: bool = False) -> Arg:
    """Declare, in :func:`checked`, an argument whose empty array is a valid value (``empty=True``)."""
    return Arg(domain, empty=empty)


@dataclass(frozen=True)
class _Checked:
    """How :func:`checked` converts one argument: its unit, domain, whether infinity and arrays pass."""

    name: str
    unit: str
    domain: str
    infinite: bool
    declared: Arg

    def convert(self, function: str, value: Any) -> Any:
        value = magnitude(function, self.name, value, self.unit, self.domain, infinite=self.infinite)
        if np.ndim(value) and (self.declared.scalar or not (np.size(value) or self.declared.empty)):
            wanted = "one number" if self.declared.scalar else "a number or a non-empty array"
            raise InputError(f"{function}(): argument '{self.name}' must be {wanted}, got {shown(value)}")
        if self.domain.endswith("_integer") and np.any(np.asarray(value) > MAX_COUNT):
            raise InputError(f"{function}(): argument '{self.name}' must be at most {MAX_COUNT:,}, got {shown(value)}")
        return value


def checked_arguments(function: Any) -> dict[str, tuple[str, str]]:
    """Argument -> (unit, domain) that :func:`checked` converts for ``function`` (empty if it is not checked)."""
    found = getattr(function, "__checked__", None)
    if found is None:
        return {}
    func, signature, domains = found
    return {
        spec.name: (spec.unit, spec.domain + (INFINITE if spec.infinite else ""))
        for spec in _plan(func, signature, domains)
    }


def _plan(func: Callable[..., Any], signature: inspect.Signature, domains: dict[str, str | Arg]) -> list[_Checked]:
    """How ``checked`` converts each argument it converts, from the annotations and the declared domains."""
    plan = []
    for name, parameter in signature.parameters.items():
        dimension = _alias_of(parameter.annotation, func.__globals__)
        given = domains.get(name)
        spec = given if isinstance(given, Arg) else Arg(given)
        declared = spec.domain
        if dimension is None or dimension.kind not in DEFAULT_DOMAINS:
            if declared is not None and declared != UNCHECKED:
                raise TypeError(f"checked on {func.__name__}: '{name}' has no quantity or number alias to check")
            continue
        domain = declared or DEFAULT_DOMAINS[dimension.kind]
        if domain == UNCHECKED:
            continue
        infinite = domain.endswith(INFINITE)
        plan.append(_Checked(name, dimension.unit, domain.removesuffix(INFINITE), infinite, spec))
    return plan


def _alias_of(annotation: Any, namespace: dict[str, Any]) -> Any:
    """The :class:`~calculator.types.Dimension` of an annotation (a string under postponed evaluation), or None."""
    import types
    import typing

    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, namespace)  # the library's own annotation text
        except (NameError, TypeError):  # a class named only for the type checker: not an alias
            return None
    found = alias_dimension(annotation)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for member in typing.get_args(annotation) if found is None and union else ():
        found = found or alias_dimension(member)  # an optional alias: Time | None (not a Sequence[Time])
    return found


def count(function: str, argument: str, value: Any, minimum: int = 1, maximum: float = MAX_COUNT) -> Any:
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
    try:
        several = np.ndim(value if not isinstance(value, ureg.Quantity) else value.magnitude) != 0
    except ValueError:  # a ragged list: numpy cannot even give its shape
        several = True
    if several:
        raise InputError(f"{function}(): argument '{argument}' must be one number, got {shown(value)}")
    return float(magnitude(function, argument, value, unit, domain))


#: The domains :func:`plain_number` tests on its fast path (the others go to :func:`magnitude` at once).
_PLAIN_TESTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "any": lambda a: a == a,
    "positive": lambda a: a > 0,
    "nonnegative": lambda a: a >= 0,
    "positive_integer": lambda a: (a >= 1) & (a <= MAX_COUNT) & (a == np.floor(a)),
}


def plain_number(function: str, argument: str, value: Any, domain: str = "nonnegative", *, one: bool = False) -> Any:
    """A finite plain number (or array, unless ``one``) in ``domain``, as a float or float array; cheaply.

    The check of the plain-number functions the step model calls in its inner loops (kernel times,
    :func:`~calculator.memory.max_batch_numeric`): a valid int or float (array) costs a few numpy
    comparisons, no unit parsing. Anything else (NaN, infinity, a value outside ``domain``, a string, a
    quantity, an array where ``one`` number is meant, a count above :data:`MAX_COUNT`) gets the error of
    :func:`magnitude` and :func:`scalar`, naming ``function`` and ``argument``.
    """
    raw = None if isinstance(value, ureg.Quantity | str | bool) or value is None else np.asarray(value)
    if raw is not None and raw.dtype.kind in "iuf" and not (one and raw.ndim) and domain in _PLAIN_TESTS:
        array = raw.astype(float)
        if np.all(np.isfinite(array) & _PLAIN_TESTS[domain](array)):
            return array if array.ndim else float(array)
    out = scalar(function, argument, value, "", domain) if one else magnitude(function, argument, value, "", domain)
    if not np.all(np.isfinite(out)):
        raise InputError(f"{function}(): argument '{argument}' must be finite, got {shown(value)}")
    if domain.endswith("_integer") and np.any(np.asarray(out) > MAX_COUNT):
        raise InputError(f"{function}(): argument '{argument}' must be at most {MAX_COUNT:,}, got {shown(value)}")
    return out


def check_broadcast(function: str, shapes: dict[str, tuple[int, ...]], expected: str) -> None:
    """An :class:`InputError` naming the arguments (by their shapes) that do not broadcast together.

    ``expected`` completes "``function``(): ..." with what the arguments must be.
    """
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        given = ", ".join(f"'{name}' {_shape_words(shape)}" for name, shape in shapes.items())
        raise InputError(f"{function}(): {expected}, got {given}") from None


def _shape_words(shape: tuple[int, ...]) -> str:
    """An argument's shape for an error message: one number, N values or a shape."""
    if not shape:
        return "one number"
    if len(shape) > 1:
        return f"shape {shape}"
    return "1 value" if shape[0] == 1 else f"{shape[0]} values"


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


def executor_or_none(function: str, value: Any) -> Any:
    """``value`` if it is None or a :class:`concurrent.futures.Executor`, else an :class:`InputError` naming it.

    Any executor runs the tasks: a process or thread pool, or a ``dask.distributed`` client's
    ``get_executor()``.
    """
    from concurrent.futures import Executor

    if value is None:
        return None
    what = "a concurrent.futures.Executor (a process pool, a dask client's get_executor()) or None"
    return instance(function, "executor", value, Executor, what)


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


#: Seeds are whole numbers below this bound: numpy's generators take any size, but seeds travel through int64
#: arrays, plan files and the simulator's offsets (``seed + 7_919``).
MAX_SEED = 2**63


def random_seed(function: str, argument: str, value: Any) -> int:
    """A seed of a random generator: a whole number in ``[0, 2**63)`` (an int, or a float holding one), as an int.

    NaN, a negative or fractional number, a boolean, a string or an array is an :class:`InputError` naming
    the argument (numpy would otherwise fail with its own error, or take a float's truncation).
    """
    whole = isinstance(value, int | np.integer) or (
        isinstance(value, float | np.floating) and float(value).is_integer()
    )
    if isinstance(value, bool | np.bool_) or not whole or not 0 <= value < MAX_SEED:
        raise InputError(
            f"{function}(): argument '{argument}' must be a whole number in [0, 2**63), got {shown(value)}"
        )
    return int(value)


def registry_or_none(value: Any, function: str | None = None) -> Any:
    """``value`` if it is a :class:`~calculator.registry.Registry` or None, else an :class:`InputError`.

    The one check of every ``registry=`` argument: the places ids resolve (:func:`model_of`,
    :func:`accelerator_of`, :func:`registry_or_default`, ``registry.registry_of``) call it. ``function``
    prefixes the message when the caller knows its name.
    """
    if value is None:
        return None
    from .registry import Registry

    if not isinstance(value, Registry):
        where = f"{function}(): " if function else ""
        raise InputError(f"{where}argument 'registry' must be a Registry (load_registry()) or None, got {shown(value)}")
    return value


def registry_or_default(value: Any, function: str | None = None) -> Any:
    """The registry ids resolve in: ``value`` (checked by :func:`registry_or_none`), or the packaged one if None."""
    from .registry import load_registry

    found = registry_or_none(value, function)
    return found if found is not None else load_registry()


def model_of(value: Any, registry: Any = None) -> Any:
    """A registry :class:`~calculator.registry.Model` from an id or a model object (passed through).

    Ids resolve in ``registry`` (default: the packaged registry).
    """
    registry_or_none(registry)
    if isinstance(value, str):
        return registry_or_default(registry).model(value)
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
    registry_or_none(registry)
    if isinstance(value, str):
        return registry_or_default(registry).accelerator(value)
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
