"""Sweeps: evaluate a model over a grid of inputs and get a tidy pandas DataFrame.

:func:`sweep` evaluates a closed-form model (a :class:`~calculator.formula.Formula`, by object or by
its :func:`~calculator.formula.catalog` name) or any vectorized function of the library
(:func:`~calculator.memory.memory_fit`, :func:`~calculator.performance.predict_benchmark`, ...)
over the Cartesian product of the values given for its arguments. Each argument given as a list,
a 1-D array or a 1-D quantity array is an axis of the grid; any other value is held fixed. The
grid is never materialised point by point: every numeric axis becomes an open (sparse) mesh and
the model runs once, by numpy broadcasting. Only axes of names (model or accelerator ids,
precisions) are looped over, one vectorized call per combination of names.

:func:`sweep_fleet` does the same for :func:`~calculator.fleet.size_fleet`, whose search over
configurations is vectorized inside: it loops over the (small) outer grid of workload values and
targets, one sizing per point.

The frame has one row per grid point: the inputs that produced it, then the results. Quantity
columns are labelled ``name [unit]`` (``kv_bytes_per_token [B/token]``); inputs given as quantities
keep the caller's unit, results keep the model's unit unless ``units`` asks for another. Plain
numbers have a bare name; counts stay integers. ``frame.attrs["provenance"]`` records the model,
the inputs and the registry entries used, for :mod:`calculator.export`.
"""

from __future__ import annotations

import inspect
import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import numpy as np

from ._reuse import reusing
from ._support import executor_or_none, mapping, registry_or_none
from .errors import InputError, UnitsError
from .formula import Formula, catalog, catalog_module
from .results import Result, column_label, flatten, frame_columns, is_axis, parse_label
from .types import ModelRef, Precision, Rate, Time, Tokens
from .units import Q_, describe_value, parse_unit, ureg
from .units import shown as _quoted

if TYPE_CHECKING:
    from .registry import Registry, RegistryDocument

__all__ = ["resolve_model", "sweep", "sweep_fleet"]

#: The most points a sweep's grid may have (the product of its axes' lengths), checked before anything is built.
MAX_POINTS = 10_000_000
#: The most points of a fleet sweep: each is a sizing and a row held in memory (about 14 ms and 7 kB a point
#: measured on one core, so 10^5 points take about 25 minutes and 0.7 GB).
MAX_FLEET_POINTS = 100_000


def resolve_model(model: Any) -> Formula | Callable[..., Any]:
    """A formula from its catalog name (``"memory.kv_bytes_per_token"`` or, if unique, ``"kv_bytes_per_token"``).

    Formulas and other callables pass through.
    """
    if callable(model):
        return model
    if not isinstance(model, str):
        raise InputError(f"sweep(): expected a formula, a function or a formula name, got {model!r}")
    formulas = catalog()
    if model in formulas:
        return formulas[model]
    matches = [key for key, f in formulas.items() if f.name == model]
    if len(matches) == 1:
        return formulas[matches[0]]
    if matches:
        raise InputError(f"sweep(): formula name {model!r} is ambiguous; use one of {matches}")
    raise InputError(
        f"sweep(): no formula named {model!r}; catalog() lists module.name keys such as {next(iter(formulas))!r}"
    )


def sweep(model: Any, /, *, units: Mapping[str, str] | None = None, **grids: Any) -> Any:
    """Evaluate a model over the Cartesian product of its inputs' values; one row per point.

    Parameters
    ----------
    model : Formula, callable or str
        A formula (or its catalog name), or a function of the library that broadcasts over numpy
        arrays and returns a quantity, an array or a :class:`~calculator.results.Result`.
    units : mapping of str to str, optional
        Units to show columns in, by name (``{"kv_bytes_per_token": "KiB/token"}``); a name that is
        no column of the result is an :class:`~calculator.errors.InputError`.
    **grids
        Every argument of the model: a fixed value, or a list / range / 1-D array / 1-D quantity array
        of values to sweep. For a formula, every argument must be given.

    Returns
    -------
    pandas.DataFrame
        One row per grid point (the last axis varies fastest): the inputs, then the results, with
        ``name [unit]`` labels. ``attrs["provenance"]`` is a :class:`~calculator.export.Provenance`.

    Notes
    -----
    A formula runs once on an open mesh of the numeric axes (``numpy`` broadcasting), through
    :meth:`Formula.numeric` after one unit and domain check per axis, so a sweep of 10^6 points costs
    about what one array evaluation does (``docs/notebooks.md`` records the benchmark). A function
    runs once per combination of its non-numeric axes (ids, precision names). A point where the
    model is undefined is an :class:`~calculator.errors.InputError` naming it, never a NaN row.

    Examples
    --------
    >>> from calculator import Q_
    >>> frame = sweep("memory.kv_bytes_per_token", layers=80, kv_heads=[8, 64], head_dim=128,
    ...               bytes_per_element=Q_([1, 2], "B"), units={"kv_bytes_per_token": "KiB/token"})
    >>> list(frame.columns)
    ['layers', 'kv_heads', 'head_dim', 'bytes_per_element [B]', 'kv_bytes_per_token [KiB/token]']
    >>> frame[["kv_heads", "bytes_per_element [B]", "kv_bytes_per_token [KiB/token]"]]
       kv_heads  bytes_per_element [B]  kv_bytes_per_token [KiB/token]
    0         8                      1                           160.0
    1         8                      2                           320.0
    2        64                      1                          1280.0
    3        64                      2                          2560.0
    """
    target = resolve_model(model)
    shown = _units_of("sweep", units)
    grids = _ranges_as_lists(grids)
    if isinstance(target, Formula):
        frame = _sweep_formula(target, grids, shown)
        name = _formula_key(target)
    else:
        frame = _sweep_function(target, grids, shown)
        name = _function_key(target)
    _check_unit_keys(f"sweep({name.rpartition('.')[2]})", frame, shown)
    from .export import Provenance

    frame.attrs["provenance"] = Provenance(models=(name,), inputs=dict(grids), registry_ids=_registry_ids(grids))
    return frame


def _formula_key(target: Formula) -> str:
    return f"{catalog_module(target.__module__)}.{target.name}"


def _function_key(target: Callable[..., Any]) -> str:
    """``module.name`` of a library function; ``user:module.name`` of the caller's own code.

    A function that a package re-exports is cited by the package (``batching.batch_formation``), not
    by the submodule that defines it.
    """
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__qualname__", getattr(target, "__name__", "function"))
    if module.startswith("calculator."):
        owner = catalog_module(module)
        if getattr(sys.modules.get(f"calculator.{owner}"), name, None) is not target:
            owner = module.removeprefix("calculator.")
        return f"{owner}.{name}"
    return f"user:{module}.{name}"


def _sweep_formula(target: Formula, grids: dict[str, Any], units: Mapping[str, str]) -> Any:
    import pandas as pd

    missing = [n for n in target.inputs if n not in grids]
    unknown = [n for n in grids if n not in target.variables]
    if missing or unknown:
        raise InputError(
            f"sweep({target.name}): give every argument {list(target.inputs)}; missing {missing}, unknown {unknown}"
        )
    grids = _grid(target.name, grids)
    result_quantity = Q_(1, target.result.unit)
    _check_column_units(f"sweep({target.name})", {**grids, target.name: result_quantity}, units)
    magnitudes = target.magnitudes(**grids)  # unit and domain checks, once per axis
    axes = [n for n in target.inputs if is_axis(grids[n])]
    mesh = _open_mesh({n: magnitudes[n] for n in axes})
    shape = tuple(np.size(magnitudes[n]) for n in axes)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = np.broadcast_to(np.asarray(target.numeric(**{**magnitudes, **mesh}), dtype=float), shape)
    target.check_overflow(result, magnitudes)  # finite arguments overflowing the result, as a call refuses them
    invalid, reason = target.invalid_results(result)
    if reason:
        index = np.unravel_index(int(np.argmax(invalid)), shape)
        point = {n: np.ravel(grids[n])[i] for n, i in zip(axes, index, strict=True)}
        raise InputError(f"sweep({target.name}): {reason} at {point}")
    columns: dict[str, Any] = {}
    size = int(np.prod(shape))
    for name in target.inputs:
        spec = target.variables[name]
        value = grids[name]
        shown = value.to(units[name]) if name in units and isinstance(value, ureg.Quantity) else value
        unit = shown.units if isinstance(shown, ureg.Quantity) else spec.unit
        values = np.asarray(shown.magnitude if isinstance(shown, ureg.Quantity) else shown)
        if spec.domain == "positive_integer":
            values = values.astype(np.int64)
        if name in axes:
            position = axes.index(name)
            values = np.broadcast_to(values.reshape(_axis_shape(position, len(axes))), shape).ravel()
        else:
            values = np.full(size, values.item())
        columns[column_label(name, unit)] = values
    result_unit = target.result.unit
    if target.name in units:
        result = Q_(result, result_unit).m_as(units[target.name])
        result_unit = units[target.name]
    columns[column_label(target.name, result_unit)] = result.ravel()
    return pd.DataFrame(columns)


def _sweep_function(target: Callable[..., Any], grids: dict[str, Any], units: Mapping[str, str]) -> Any:
    import pandas as pd

    name = getattr(target, "__name__", "result")
    _check_arguments(target, name, grids)
    grids = _grid(name, grids)
    numeric = [n for n, v in grids.items() if is_axis(v) and _is_numeric(v)]
    named = [n for n, v in grids.items() if is_axis(v) and n not in numeric]
    mesh = {n: _reshaped(grids[n], _axis_shape(i, len(numeric))) for i, n in enumerate(numeric)}
    shape = tuple(np.size(_magnitude(grids[n])) for n in numeric)
    inputs = {n: _input_value(v) for n, v in grids.items() if n not in named} | mesh
    frames = []
    for combination in itertools.product(*(grids[n] for n in named)):
        choice = dict(zip(named, combination, strict=True))
        out = target(**{n: v for n, v in grids.items() if not is_axis(v)}, **choice, **mesh)
        if isinstance(out, Result):
            results = flatten(out.to_dict())
        elif isinstance(out, ureg.Quantity) or np.ndim(out) or isinstance(out, int | float):
            results = {name: out}
        else:
            raise InputError(f"sweep({name}): expected a quantity, an array or a Result, got {type(out).__name__}")
        row_inputs = {n: inputs[n] if n in inputs else _input_value(choice[n]) for n in grids}
        # A result that repeats an input (memory_fit's context) is shown once, in the input's column.
        results = {
            (f"result.{k}" if k in row_inputs else k): v
            for k, v in results.items()
            if k not in row_inputs or not _same(row_inputs[k], v, shape)
        }
        _check_column_units(f"sweep({name})", row_inputs | results, units)
        try:
            columns = frame_columns(row_inputs, units, shape) | frame_columns(results, units, shape)
        except ValueError:
            raise InputError(f"sweep({name}): its results do not broadcast over the grid {shape}") from None
        frames.append(pd.DataFrame(columns))
    return pd.concat(frames, ignore_index=True)


def _check_arguments(target: Callable[..., Any], name: str, grids: Mapping[str, Any]) -> None:
    """Every swept name is a parameter of ``target`` (unless it takes ``**kwargs``), with the list if not."""
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):  # a callable without a signature: let the call say what it accepts
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    keywords = [n for n, p in parameters.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY]
    unknown = [n for n in grids if n not in keywords]
    if unknown:
        raise InputError(f"sweep({name}): unknown argument(s) {unknown}; it takes {keywords}")


def _same(given: Any, result: Any, shape: tuple[int, ...]) -> bool:
    """Whether a result field equals an input (same values in the input's unit) at every grid point."""
    try:
        if isinstance(given, ureg.Quantity) != isinstance(result, ureg.Quantity) and (
            isinstance(given, str) or isinstance(result, str)
        ):
            return False  # an id ("h100-sxm") given for a quantity the result reports (a capacity)
        if isinstance(given, ureg.Quantity) or isinstance(result, ureg.Quantity):
            given, result = Q_(given).magnitude, Q_(result).m_as(Q_(given).units)
        given, result = np.broadcast_to(given, shape), np.broadcast_to(result, shape)
        if given.dtype.kind in "biuf" and result.dtype.kind in "biuf":
            return bool(np.allclose(given, result, rtol=1e-12, atol=0.0))
        return bool(np.all(given == result))
    except (TypeError, ValueError):  # other dimensions (pint's DimensionalityError is a TypeError), shapes
        return False


def _check_axis(function: str, argument: str, value: Any) -> None:
    if not is_axis(value):
        return
    try:
        flat = np.ndim(_magnitude(value)) == 1 and np.size(_magnitude(value)) > 0
    except (TypeError, ValueError):  # a ragged list of lists, or quantities nested in one
        flat = False
    if not flat:
        raise InputError(f"sweep({function}): argument '{argument}' must be a value or a non-empty 1-D list of values")


def _ranges_as_lists(grids: Mapping[str, Any]) -> dict[str, Any]:
    """A ``range`` axis as the list of its values (it was taken as one value)."""
    return {n: list(v) if isinstance(v, range) else v for n, v in grids.items()}


def _not_a_set(function: str, argument: str, value: Any) -> None:
    """A set has no order, so it is no axis (nor a value): an :class:`InputError` naming the argument."""
    if isinstance(value, AbstractSet):
        raise InputError(
            f"sweep({function}): argument '{argument}': an axis must be a list, tuple or array,"
            f" got a {type(value).__name__} ({_quoted(value)})"
        )


def _first_quantity(function: str, argument: str, values: Sequence[Any]) -> Any:
    """The first quantity of a list axis, once every value is checked to be a quantity of its dimension."""
    first = next(v for v in values if isinstance(v, ureg.Quantity))
    for value in values:
        if not isinstance(value, ureg.Quantity) or value.dimensionality != first.dimensionality:
            raise UnitsError(
                f"sweep({function}): argument '{argument}' needs every value in one dimension,"
                f" {first.dimensionality or 'dimensionless'} (like {first:~P}), got {describe_value(value)}"
            )
    return first


def _grid(function: str, grids: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of :func:`sweep` checked as axes, before anything is built.

    No sets; a list of quantities becomes one quantity array in its first value's unit (each value
    checked for that dimension); every axis is 1-D and non-empty; the grid has at most
    :data:`MAX_POINTS` points.
    """
    checked: dict[str, Any] = {}
    for argument, value in grids.items():
        _not_a_set(function, argument, value)
        if isinstance(value, list | tuple) and any(isinstance(v, ureg.Quantity) for v in value):
            first = _first_quantity(function, argument, value)
            magnitudes = [v.m_as(first.units) for v in value]
            _check_axis(function, argument, magnitudes)
            value = Q_(np.asarray(magnitudes), first.units)
        _check_axis(function, argument, value)
        checked[argument] = value
    _check_size(function, [len(_magnitude(v)) for v in checked.values() if is_axis(v)])
    return checked


def _check_size(function: str, lengths: Sequence[int], most: int = MAX_POINTS) -> None:
    """An :class:`InputError` for a grid of more than ``most`` points, from its axes' lengths."""
    points = math.prod(lengths)
    if points > most:
        raise InputError(
            f"sweep({function}): the grid has {' x '.join(f'{n:,}' for n in lengths)} = {points:,} points;"
            f" a sweep takes at most {most:,}: sweep fewer values, or the grid in parts"
        )


def _units_of(function: str, units: Any) -> dict[str, str]:
    """The ``units=`` of a sweep: a mapping of column names to unit texts, each read by :func:`parse_unit`.

    The safe reader, before any conversion: a text such as ``"9**9**9*s"`` is a :class:`UnitsError`,
    not an evaluation.
    """
    if units is None:
        return {}
    checked: dict[str, str] = {}
    for name, text in mapping(function, "units", units).items():
        if not isinstance(name, str):
            raise InputError(f"{function}(): argument 'units' maps column names to units, got the key {_quoted(name)}")
        parse_unit(text, f"{function}(): units[{name!r}]")
        checked[name] = text
    return checked


def _check_unit_keys(caller: str, frame: Any, units: Mapping[str, str]) -> None:
    """Each key of ``units`` names a column of the sweep's ``frame`` (a typo was silently ignored)."""
    names = [parse_label(str(label))[0] for label in frame.columns]
    unknown = [key for key in units if key not in names]
    if unknown:
        raise InputError(f"{caller}: units= names no column: {unknown}; the columns are {names}")


def _check_column_units(caller: str, values: Mapping[str, Any], units: Mapping[str, str]) -> None:
    """Each unit of ``units`` that a quantity column is to be shown in has the column's dimension."""
    for name, value in values.items():
        if name in units and isinstance(value, ureg.Quantity):
            wanted = parse_unit(units[name]).dimensionality
            if wanted != value.dimensionality:
                needed, example = value.dimensionality or "dimensionless", f"{value.units:~P}"
                raise UnitsError(
                    f"{caller}: units[{name!r}] needs dimension {needed} (for example {example!r}),"
                    f" got {units[name]!r} (dimension {wanted or 'dimensionless'})"
                )


def _is_numeric(value: Any) -> bool:
    if isinstance(value, ureg.Quantity):
        return True
    values = np.asarray(value)
    return values.dtype != object and (np.issubdtype(values.dtype, np.number) or values.dtype == bool)


def _magnitude(value: Any) -> Any:
    return value.magnitude if isinstance(value, ureg.Quantity) else value


def _axis_shape(position: int, axes: int) -> tuple[int, ...]:
    return tuple(-1 if i == position else 1 for i in range(axes))


def _open_mesh(axes: dict[str, Any]) -> dict[str, Any]:
    return {n: np.asarray(v).reshape(_axis_shape(i, len(axes))) for i, (n, v) in enumerate(axes.items())}


def _reshaped(value: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(value, ureg.Quantity):
        return Q_(np.asarray(value.magnitude).reshape(shape), value.units)
    return np.asarray(value).reshape(shape)


def _input_value(value: Any) -> Any:
    """An input as a frame cell: registry objects by id, token counts as numbers, rates in request/s."""
    if isinstance(value, ureg.Quantity):
        if value.dimensionality == ureg.token.dimensionality:
            return value.m_as("token")
        if value.dimensionality == _PER_SECOND:
            return value.to("request/s")
        return value
    return getattr(value, "id", value) if not isinstance(value, str) else value


_PER_SECOND = ureg.parse_units("request/s").dimensionality


def _registry_ids(grids: Mapping[str, Any], registry: Registry | None = None) -> tuple[str, ...]:
    """The registry entries named by string (or registry-object) inputs, by id (in ``registry``)."""
    items = [item for value in grids.values() for item in (value if isinstance(value, list | tuple) else [value])]
    names = [item for item in items if isinstance(item, str)]
    ids = [item.id for item in items if hasattr(item, "sources") and hasattr(item, "id")]
    if names:  # the registry loads only when some input could name an entry
        from .registry import load_registry

        reg = registry if registry is not None else load_registry()
        for name in names:
            try:
                ids.append(reg.find(name)[1].id)
            except KeyError:
                continue
    return tuple(dict.fromkeys(ids))


#: Units the fleet sweep shows plan quantities in (a planner's units; ``units=`` overrides).
PLAN_UNITS = {
    "service.ttft": "ms",
    "service.tpot": "ms",
    "service.ttft_interval.low": "ms",
    "service.ttft_interval.high": "ms",
    "service.tpot_interval.low": "ms",
    "service.tpot_interval.high": "ms",
    "service.tbt_max": "ms",
    "service.replica_throughput": "request/s",
    "cost.per_hour": "USD/hour",
    "cost.per_month": "USD/month",
    "cost.per_million_output_tokens": "USD",
    "cost.per_million_total_tokens": "USD",
    "energy.power": "kW",
    "energy.per_million_output_tokens": "kWh",
    "energy.electricity_cost_per_million_output_tokens": "USD",
    "closest.ttft": "ms",
    "closest.tpot": "ms",
}
#: Plan fields that repeat an input of the sweep, left out of its rows.
_REPEATED = frozenset({"model", "accelerator", "precision", "max_utilization"})
#: size_fleet options whose value is a list by nature, never an axis of the sweep.
_NOT_AXES = frozenset({"tensor_parallel", "batches", "moe_layouts", "progress"})
#: Plan fields a sweep leaves out: the notes on other families, the inputs a sweep already has as
#: columns (the workload and targets a plan records for its simulation check), and the simulation
#: check itself (a sweep does not simulate; ``verify_plan`` checks a chosen point).
_PLAN_INPUTS = (
    "rejected.", "rejections", "alternatives", "workload.", "targets.", "serving.", "registry_documents",
    "verification", "simulated_replicas",
)  # fmt: skip


def sweep_fleet(
    model: ModelRef,
    accelerator: Any,
    precision: Precision,
    arrival_rate: Rate,
    input_tokens: Tokens,
    output_tokens: Tokens,
    ttft_slo: Time,
    tpot_slo: Time,
    *,
    units: Mapping[str, str] | None = None,
    registry: Registry | None = None,
    executor: Executor | None = None,
    **options: Any,
) -> Any:
    """Size a fleet at every point of a grid of workloads, targets and hardware; one row per plan.

    Parameters
    ----------
    model, accelerator, precision, arrival_rate, input_tokens, output_tokens, ttft_slo, tpot_slo
        The model and fields of :func:`~calculator.fleet.size_fleet`'s parts (``arrival_rate`` is
        ``Workload.arrival_rate``, ``ttft_slo`` is ``Targets.ttft``, ``accelerator`` one of
        ``SearchSpace.accelerators``; :data:`calculator.fleet.sizing.FLAT_FIELDS`); each may be a list
        (or a range, or a 1-D quantity array) of values to sweep. A list of accelerators or precisions
        sizes each one separately (to compare them); pick the cheapest per workload with pandas afterwards.
    units : mapping of str to str, optional
        Units to show columns in, over :data:`PLAN_UNITS` (TTFT and TPOT in ms, cost in USD/h).
    registry : Registry, optional
        Where ids resolve (default: the registry the given objects came from, or the packaged one).
    executor : concurrent.futures.Executor, optional
        Sizes the points as tasks, one each, and gathers the rows in order (a process pool, or a
        ``dask.distributed`` client's ``get_executor()``); ``None`` sizes them in this process.
        Workers resolve ids in the packaged registry plus ``registry``'s user files, which must be
        readable at the same paths there.
    **options
        The engine, a ``progress(done, total)`` callback and the other fields of the parts by the same
        names (``max_utilization``, ``price`` for ``Costs.gpu_hour``, ``tbt_slo`` for ``Targets.tbt``,
        ...); any of them but ``tensor_parallel``, ``batches``, ``moe_layouts`` and ``progress`` may
        also be a list to sweep. Each point builds the parts and sizes them.

    Returns
    -------
    pandas.DataFrame
        The inputs of each point, then the plan's fields (:meth:`FleetPlan.to_frame`) but the ones
        that repeat an input (model, accelerator, precision, max_utilization) and the per-family
        ``rejected`` notes. The plan's parts are dotted columns: ``layout.*``, ``service.*``
        (``service.ttft [ms]``), ``cost.*`` (``cost.per_hour [USD/h]``) and ``energy.*``. Infeasible
        points have ``feasible`` False, their ``reason``, these columns missing and the ``closest.*``
        values any candidate reaches. ``attrs["provenance"]`` cites
        :func:`size_fleet` and the registry entries used (model, accelerators, default prices).

    Notes
    -----
    :func:`size_fleet` evaluates every (accelerator, precision, TP, batch) candidate of one point at
    once with numpy; this function loops over the outer grid of points in Python (a few milliseconds per
    point with the default candidate grid), which suits the tens to thousands of points a planning
    study sweeps; a grid of more than :data:`MAX_FLEET_POINTS` points is refused before any sizing. In
    this process the points share what does not depend on the traffic: the step arrays of each
    (model, accelerator, precision, engine) and the candidate grid priced for each set of request
    lengths (:mod:`calculator._reuse`), so points that differ only in their rate or targets cost
    mainly their queueing (``docs/benchmarks.md``). The plans are the same as
    :func:`size_fleet`'s, point by point, with or without ``executor``.

    Examples
    --------
    >>> from calculator import Q_
    >>> frame = sweep_fleet("llama-3.1-70b", ["h100-sxm", "h200-sxm"], "fp8", Q_([10, 40], "request/s"),
    ...                     1024, 256, Q_(1, "s"), Q_(50, "ms"), price=Q_(4, "USD/hour"))
    >>> frame[["accelerator", "arrival_rate [request/s]", "gpus", "cost.per_hour [USD/h]"]]
      accelerator  arrival_rate [request/s]  gpus  cost.per_hour [USD/h]
    0    h100-sxm                        10     4                     16
    1    h100-sxm                        40    12                     48
    2    h200-sxm                        10     3                     12
    3    h200-sxm                        40    10                     40
    """
    import pandas as pd

    from .fleet import default_price_entry

    grids = {
        "model": model,
        "accelerator": accelerator,
        "precision": precision,
        "arrival_rate": arrival_rate,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "ttft_slo": ttft_slo,
        "tpot_slo": tpot_slo,
        **options,
    }
    accepted = _size_fleet_options()
    unknown = [n for n in options if n not in accepted]
    if unknown:
        raise InputError(f"sweep_fleet(): unknown option(s) {unknown}, not size_fleet options; it takes {accepted}")
    registry_or_none(registry, "sweep_fleet")
    units = _units_of("sweep_fleet", units)
    grids = _ranges_as_lists(grids)
    if executor_or_none("sweep_fleet", executor) is not None and options.get("progress") is not None:
        raise InputError("sweep_fleet(): 'progress' reports from this process; leave it out with an 'executor'")
    for n, v in grids.items():
        if n not in _NOT_AXES:
            _not_a_set("size_fleet", n, v)
    axes = {n: _axis_values(n, v) for n, v in grids.items() if n not in _NOT_AXES and is_axis(v)}
    _check_size("size_fleet", [len(v) for v in axes.values()], MAX_FLEET_POINTS)
    shown = {**PLAN_UNITS, **units}
    points = [{**grids, **dict(zip(axes, values, strict=True))} for values in itertools.product(*axes.values())]
    if executor is None:
        with reusing():  # the points share their step arrays and priced candidate grids
            rows = [_plan_row(point, registry, units, shown) for point in points]
    else:
        rows = _gathered(executor, points, _worker_registry(registry, model, accelerator), units, shown)
    frame = pd.DataFrame.from_records(rows)
    _check_unit_keys("sweep_fleet()", frame, units)
    from .export import Provenance
    from .registry import load_registry

    reg = registry if registry is not None else load_registry()
    ids = list(_registry_ids({"model": model, "accelerator": accelerator}, reg))
    if options.get("price") is None:
        ids += [default_price_entry(a, reg).id for a in dict.fromkeys(_axis_values("accelerator", accelerator))]
    if options.get("speculation") is not None and options["speculation"].draft_model is not None:
        ids.append(reg.model(options["speculation"].draft_model).id)
    frame.attrs["provenance"] = Provenance(models=("fleet.size_fleet",), inputs=grids, registry_ids=tuple(ids))
    return frame


def _plan_row(
    point: Mapping[str, Any], registry: Any, units: Mapping[str, str] | None, shown: Mapping[str, str]
) -> dict[str, Any]:
    """One row of :func:`sweep_fleet`: the point's inputs, then its plan's fields.

    ``registry`` is a :class:`~calculator.registry.Registry`, or on a worker the user documents to load
    it from (a tuple of :class:`~calculator.registry.RegistryDocument`; the registry object does not pickle,
    and the workers need not see the user's files). Module level, so that an executor's
    workers can run it.
    """
    # the sizer's resolved problem and search, private to calculator.fleet: a sweep point reports its progress, which
    # size_fleet (eight parameters, the parts) does not take
    from .fleet.problem import _Problem
    from .fleet.search import _size
    from .fleet.sizing import FLAT_FIELDS, PARTS

    if isinstance(registry, tuple):
        from .registry import load_registry

        registry = load_registry(extra=registry)
    fields: dict[str, dict[str, Any]] = {part: {} for part in PARTS}
    for name, value in point.items():
        if name in FLAT_FIELDS:
            part, field = FLAT_FIELDS[name]
            fields[part][field] = value
    parts = {part: kind(**fields[part]) for part, kind in PARTS.items()}
    problem = _Problem.of(point["model"], **parts, engine=point.get("engine"), registry=registry)
    plan = _size(problem, point.get("progress"))
    given = {n: _input_value(v) for n, v in point.items() if n not in _NOT_AXES and not isinstance(v, dict)}
    values = plan._frame_values()  # an infeasible point's parts as missing values: the rows line up
    results = {k: v for k, v in flatten(values).items() if k not in _REPEATED and not k.startswith(_PLAN_INPUTS)}
    _check_column_units("sweep_fleet()", given, units or {})
    _check_column_units("sweep_fleet()", results, shown)
    columns = frame_columns(given, units) | frame_columns(results, shown)
    return {label: values[0] for label, values in columns.items()}


def _size_fleet_options() -> list[str]:
    """The options :func:`sweep_fleet` takes: the engine, a progress callback and the parts' fields.

    The fields of :func:`~calculator.fleet.size_fleet`'s parts go by the names of the sweep's columns
    (:data:`calculator.fleet.sizing.FLAT_FIELDS`).
    """
    from .fleet.sizing import FLAT_FIELDS

    positional = {"accelerator", "precision", "arrival_rate", "input_tokens", "output_tokens", "ttft_slo", "tpot_slo"}
    return sorted({*FLAT_FIELDS, "engine", "progress"} - positional)


def _worker_registry(registry: Registry | None, model: Any, accelerator: Any) -> tuple[RegistryDocument, ...] | None:
    """What a worker resolves ids in: None for the packaged registry, else the user documents of the one in use."""
    # private: the fleet's one rule for the registry of given objects, so a sweep's workers resolve as size_fleet
    from .fleet._common import _registry_for

    entries = [*_axis_values("model", model), *_axis_values("accelerator", accelerator)]
    documents = _registry_for(registry, *entries).user_documents
    return documents or None


def _gathered(
    executor: Executor, points: list[dict[str, Any]], registry: Any, units: Mapping[str, str] | None,
    shown: Mapping[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    """The rows of ``points``, one task each on ``executor``, in the points' order."""
    futures = [executor.submit(_plan_row, point, registry, units, shown) for point in points]
    try:
        return [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise


def _axis_values(name: str, value: Any) -> list[Any]:
    """The values of one axis (a fixed value is an axis of one); quantities in the first one's unit."""
    if not is_axis(value):
        return [value]
    if isinstance(value, ureg.Quantity):
        _check_axis("size_fleet", name, value)
        return [Q_(m, value.units) for m in value.magnitude]
    values = list(value)
    if not values:
        raise InputError(f"sweep(size_fleet): argument '{name}' must be a value or a non-empty 1-D list of values")
    if isinstance(values[0], ureg.Quantity):
        first = _first_quantity("size_fleet", name, values)
        return [v.to(first.units) for v in values]
    return values
