"""Calls of every public function built from its signature: the shared ground of the API-wide tests.

Each parameter's type alias (``calculator.types``: ``Time``, ``Count``, ``ModelRef``, ...) says what it
holds, so a valid argument can be made for it: a quantity of the alias's unit at a typical magnitude, a
count, a probability, a registry id. ``OVERRIDES`` gives the values a function needs beyond that (a
stable queue, a feasible plan). ``valid_call(name)`` returns the arguments of a call that succeeds, or
``None`` when the function's arguments cannot all be made from its signature.
"""

from __future__ import annotations

import inspect
import typing
from functools import cache
from typing import Any

import calculator
from calculator import Q_
from calculator.formula import Formula
from calculator.types import Dimension, alias_dimension

#: Typical magnitudes per unit (a value inside most functions' domains).
MAGNITUDES = {
    "s": 0.05,
    "B": 1e9,
    "B/s": 1e11,
    "request/s": 2.0,
    "token/s": 5000.0,
    "FLOP": 1e12,
    "FLOP/s": 1e14,
    "USD": 100.0,
    "USD/h": 2.0,
    "USD/request": 0.001,
    "W": 700.0,
    "J": 1e6,
    "B/token": 1e5,
}

#: Values per kind of plain argument.
PLAIN = {"count": 4, "tokens": 512, "probability": 0.5, "fraction": 0.5, "number": 2.0, "precision": "fp8"}
#: Values of parameters annotated with a plain type.
PLAIN_TYPES: dict[Any, Any] = {int: 4, float: 0.5, bool: True}
ENTRIES = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "interconnect": "nvlink4", "capacity": Q_(80, "GB")}

#: Values of parameters without an alias, by name (registry ids, precision names, engines).
BY_NAME: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "precision": "fp8",
    "engine": "vllm",
    "link": "nvlink4",
    "interconnect": "nvlink4",
}

_STABLE_QUEUE = {"arrival_rate": Q_(2, "request/s"), "service_time": Q_(1, "s"), "servers": 4}
_SIZING = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "precision": "fp8",
    "arrival_rate": Q_(5, "request/s"),
    "input_tokens": 1024,
    "output_tokens": 256,
    "ttft_slo": Q_(1, "s"),
    "tpot_slo": Q_(50, "ms"),
}

#: A feasible plan as size_fleet returns one (built by hand: sizing costs a second).
_PLAN = calculator.FleetPlan(
    True,
    "cheapest",
    model="llama-3.1-8b",
    accelerator="h100-sxm",
    precision="fp8",
    engine="vllm",
    tensor_parallel=1,
    batch=64,
    replicas=2,
    gpus=2,
    max_utilization=0.8,
    running_batch=20.0,
    targets={"kv_precision": "fp8", "chunk_size": None, "speculation": False, "registry_files": ()},
)

#: Arguments a function needs beyond its signature's kinds (a stable queue, a feasible plan).
OVERRIDES: dict[str, dict[str, Any]] = {
    "launch_command": {"plan": _PLAN, "engine": "vllm"},
    "kubernetes_manifest": {"plan": _PLAN, "engine": "vllm"},
    **{name: _STABLE_QUEUE for name in ("erlang_c", "mmc_mean_wait", "queue_stable")},
    "mmc_wait_exceedance": {**_STABLE_QUEUE, "threshold": Q_(0.1, "s")},
    "mmc_wait_quantile": {**_STABLE_QUEUE, "quantile": 0.9},
    "mg1_mean_wait": {"arrival_rate": Q_(2, "request/s"), "service_time": Q_(0.1, "s"), "service_cv": 1.0},
    "ggc_mean_wait": {**_STABLE_QUEUE, "arrival_cv": 1.0, "service_cv": 1.0},
    "ggc_wait_exceedance": {**_STABLE_QUEUE, "arrival_cv": 1.0, "service_cv": 1.0, "threshold": Q_(0.1, "s")},
    "ggc_wait_quantile": {**_STABLE_QUEUE, "arrival_cv": 1.0, "service_cv": 1.0, "quantile": 0.9},
    "replicas_for_load": {"arrival_rate": Q_(20, "request/s"), "replica_throughput": Q_(3, "request/s")},
    "size_fleet": _SIZING,
    "relax_targets": _SIZING,
    "frontier": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "input_tokens": 1024,
        "output_tokens": 256,
    },
    "predict_benchmark": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "tensor_parallel": 1,
        "input_tokens": 1024,
        "output_tokens": 256,
        "concurrency": 16,
    },
    "decode_step_time": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "tensor_parallel": 1,
        "batch": 16,
        "context": 2048,
    },
    "prefill_time": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "tensor_parallel": 1,
        "prompt_tokens": 1024,
    },
}

#: Public functions whose arguments are plain SI magnitudes by design (vectorized inner loops).
PLAIN_ARRAY_FUNCTIONS = frozenset({"iteration_seconds", "max_batch_numeric"})


def public_functions() -> dict[str, Any]:
    """Every public function and formula of the flat namespace (classes excluded)."""
    out = {}
    for name in calculator.__all__:
        value = getattr(calculator, name)
        if isinstance(value, Formula) or inspect.isfunction(value):
            out[name] = value
    return out


def hints(function: Any) -> dict[str, Any]:
    """Each parameter's annotation with its ``Annotated`` metadata (aliases resolved)."""
    if isinstance(function, Formula):
        return {p.name: p.annotation for p in inspect.signature(function).parameters.values()}
    return typing.get_type_hints(function, include_extras=True, localns=_TYPE_CHECKING_NAMES)


#: Classes some signatures name only for the type checker (imported under ``TYPE_CHECKING``).
_TYPE_CHECKING_NAMES = {
    "Registry": calculator.Registry,
    "FleetPlan": calculator.FleetPlan,
    "StepArrays": calculator.StepArrays,
}


def kinds(function: Any) -> dict[str, Dimension]:
    """Parameter -> the :class:`Dimension` of its alias, for the parameters that have one."""
    out = {}
    for name, hint in hints(function).items():
        found = alias_dimension(hint)
        if found is None:
            for member in typing.get_args(hint):  # an optional alias: Time | None
                found = found or alias_dimension(member)
        if found is not None and name != "return":
            out[name] = found
    return out


def value_for(dimension: Dimension, scale: float = 1.0) -> Any:
    """A valid argument of ``dimension`` (``scale`` multiplies a quantity's typical magnitude)."""
    if dimension.kind in ENTRIES:
        return ENTRIES[dimension.kind]
    if dimension.kind in PLAIN:
        return PLAIN[dimension.kind]
    return Q_(MAGNITUDES.get(dimension.unit, 1.0) * scale, dimension.unit)


@cache
def valid_call(name: str) -> dict[str, Any] | None:
    """Keyword arguments of a call of ``name`` that succeeds, or ``None``."""
    function = public_functions()[name]
    parameters = inspect.signature(function).parameters
    known = kinds(function)
    arguments: dict[str, Any] = {}
    for parameter in parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name in OVERRIDES.get(name, {}):
            arguments[parameter.name] = OVERRIDES[name][parameter.name]
        elif parameter.default is parameter.empty:
            if parameter.name in known:
                arguments[parameter.name] = value_for(known[parameter.name])
            elif parameter.name in BY_NAME:
                arguments[parameter.name] = BY_NAME[parameter.name]
            elif hints(function).get(parameter.name) in PLAIN_TYPES:
                arguments[parameter.name] = PLAIN_TYPES[hints(function)[parameter.name]]
            else:
                return None
    try:
        function(**arguments)
    except Exception:  # a call the signature alone cannot make valid
        return None
    return arguments


def same(a: Any, b: Any) -> bool:
    """Whether two results are equal: quantities, arrays, frames and result objects, field by field."""
    import dataclasses

    import numpy as np
    import pandas as pd

    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a)  # type: ignore[arg-type]
        )
    if isinstance(a, pd.DataFrame):
        return (
            isinstance(b, pd.DataFrame)
            and list(a.columns) == list(b.columns)
            and all(same(list(a[c]), list(b[c])) for c in a.columns)
        )
    if isinstance(a, pd.Series):
        return isinstance(b, pd.Series) and same(list(a), list(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, calculator.ureg.Quantity):
        if not isinstance(b, calculator.ureg.Quantity) or a.dimensionality != b.dimensionality:
            return False
        return same(a.magnitude, b.to(a.units).magnitude)
    if isinstance(a, np.ndarray | float | int | np.number) and not isinstance(a, bool):
        try:
            return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True))
        except (TypeError, ValueError):
            return False
    return bool(a == b) if not isinstance(a, np.ndarray) else False
