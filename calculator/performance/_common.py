"""Helpers the performance submodules share: the costs to price with, checked counts as floats, the TP degree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._support import check_broadcast, count, model_of
from ..errors import InputError
from ..memory import check_tensor_parallel
from .arrays import StepArrays
from .engines import Efficiency, engine_profile

__all__: list[str] = []

#: Steps of the vectorized bisections (each halves the bracket: 2**-32 of it at the end).
_BISECTION_STEPS = 32


def _bisection(
    low: np.ndarray, high: np.ndarray, below: Any, steps: int = _BISECTION_STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """The bracket ``(low, high)`` narrowed, per row, onto where ``below(x)`` turns False.

    ``below`` (array -> bool array) holds at ``low`` and not at ``high`` (it holds up to a point); each of the
    ``steps`` steps keeps the half where the change lies.
    """
    for _ in range(steps):
        middle = (low + high) / 2
        holds = below(middle)
        low, high = np.where(holds, middle, low), np.where(holds, high, middle)
    return low, high


def _efficiency(
    engine: Any, efficiency: Efficiency | None, accelerator_id: str | None = None, registry: Any = None
) -> Efficiency:
    """The costs to price with: those given, or the engine's on this accelerator (a resolved id)."""
    if efficiency is not None:
        if not isinstance(efficiency, Efficiency):
            raise InputError(
                "argument 'efficiency' must be an Efficiency (an engine's costs, engine_profile(...).efficiency) "
                f"or None, got {type(efficiency).__name__}"
            )
        return efficiency
    return engine_profile(engine, registry).efficiency_for(accelerator_id)


def _counts(function: str, argument: str, value: Any, minimum: int = 1) -> np.ndarray:
    return np.asarray(count(function, argument, value, minimum), dtype=float)


def _plain_arrays(function: str, given: Mapping[str, tuple[Any, float | None]]) -> tuple[np.ndarray, ...]:
    """The plain-array arguments of ``function`` broadcast as floats, each finite and at least its least value.

    ``given`` maps each argument's name to its value and least value (``None``: checked by the caller).
    """
    floats = {}
    for name, (value, _) in given.items():
        try:
            floats[name] = np.asarray(value, dtype=float)
        except (TypeError, ValueError):  # a name, a set, a ragged list
            raise InputError(f"{function}(): argument '{name}' must be a number or an array of numbers") from None
    check_broadcast(function, {name: v.shape for name, v in floats.items()}, "the arrays must broadcast together")
    arrays = np.broadcast_arrays(*floats.values())
    if arrays and arrays[0].size == 0:
        raise InputError(f"{function}(): the array arguments must not be empty")
    for (name, (_, least)), value in zip(given.items(), arrays, strict=True):
        if least is not None and (not np.all(value >= least) or not np.all(np.isfinite(value))):  # NaN fails both
            raise InputError(f"{function}(): argument '{name}' must be finite and >= {least:g}")
    return arrays


def _step_inputs(function: str, a: Any, costs: Any, costs_name: str, costs_type: type) -> None:
    """``a`` a :class:`StepArrays` and ``costs`` of ``costs_type`` (the plain-array functions take no ids)."""
    if not isinstance(a, StepArrays):
        raise InputError(f"{function}(): argument 'a' must be a StepArrays (step_arrays(...)), got {type(a).__name__}")
    if not isinstance(costs, costs_type):
        raise InputError(
            f"{function}(): argument '{costs_name}' must be of type {costs_type.__name__}, got {type(costs).__name__}"
        )


def checked_tp(model: Any, tensor_parallel: Any, function: str, registry: Any = None) -> np.ndarray:
    """The tensor-parallel degrees, checked against ``model`` (resolved in ``registry``)."""
    return np.asarray(check_tensor_parallel(model_of(model, registry), tensor_parallel, function), dtype=float)


def _moe_layout(a: StepArrays, tp: np.ndarray, expert_parallel: Any, function: str, redundant: Any = 0) -> StepArrays:
    """``a`` with the routed experts spread over ``expert_parallel`` GPUs of each replica (1: tensor parallel).

    The replica's ``tensor_parallel`` GPUs then split each expert over ``tensor_parallel /
    expert_parallel`` of them (expert tensor parallelism), as TensorRT-LLM's ``moe_expert_parallel_size``
    and ``moe_tensor_parallel_size`` do. ``redundant`` copies of experts (an expert-parallel load balancer's) are
    placed beside the logical ones. The placed experts must divide evenly over ``expert_parallel`` unless the engine
    places them unevenly (:attr:`StepArrays.uneven_experts`, vLLM without redundant copies).
    """
    if np.ndim(expert_parallel):
        raise InputError(f"{function}(): argument 'expert_parallel' must be one whole number, got {expert_parallel!r}")
    ep = count(function, "expert_parallel", expert_parallel)
    if np.ndim(redundant) or isinstance(redundant, bool) or not float(redundant).is_integer() or redundant < 0:
        raise InputError(f"{function}(): argument 'redundant_experts' must be a whole number >= 0, got {redundant!r}")
    extra = int(redundant)
    if ep == 1 and extra == 0:
        return a
    if a.experts <= 1:
        name = "expert_parallel" if ep > 1 else "redundant_experts"
        raise InputError(f"{function}(): {name} applies to mixture-of-experts models; this one is dense")
    if ep == 1:
        raise InputError(
            f"{function}(): redundant_experts {extra} needs expert parallelism (expert_parallel > 1): the copies "
            "spread the busiest experts' tokens over more GPUs"
        )
    degrees = np.unique(tp)
    if degrees.size != 1:
        raise InputError(f"{function}(): give one tensor_parallel degree with expert_parallel {ep}")
    group = float(degrees[0])
    if group % ep:
        raise InputError(f"{function}(): expert_parallel {ep} must divide tensor_parallel ({group:g})")
    placed = a.experts + extra
    if placed % ep and not (a.uneven_experts and extra == 0):
        fill = int(-a.experts % ep) or ep
        engine = a.engine or "this engine"
        raise InputError(
            f"{function}(): under {engine} expert_parallel {ep} must divide the experts placed ({a.experts:g} + "
            f"redundant_experts {extra}); give redundant_experts {fill} (or another that makes the sum divisible), "
            "or an expert_parallel that divides the experts"
        )
    return a.with_expert_tensor_parallel(group / ep).with_redundant_experts(extra)


def _pipeline(a: StepArrays, pipeline_parallel: Any, function: str) -> StepArrays:
    """``a`` over ``pipeline_parallel`` stages; at most one stage per layer."""
    if np.ndim(pipeline_parallel):
        raise InputError(
            f"{function}(): argument 'pipeline_parallel' must be one whole number, got {pipeline_parallel!r}"
        )
    stages = count(function, "pipeline_parallel", pipeline_parallel)
    if stages == 1:
        return a
    if stages > a.layers:
        raise InputError(
            f"{function}(): argument 'pipeline_parallel' ({stages}) must not exceed the model's {a.layers:g} layers"
        )
    return a.with_pipeline_parallel(stages)


def replica_layout(
    a: StepArrays,
    tp: np.ndarray,
    data_parallel: Any,
    expert_parallel: Any,
    function: str,
    pipeline_parallel: Any = 1,
    redundant_experts: Any = 0,
) -> tuple[StepArrays, np.ndarray]:
    """``a`` in a replica's layout, and the GPUs of one pipeline stage: ``tensor_parallel x data_parallel``.

    ``data_parallel`` attention ranks of ``tensor_parallel`` GPUs each (attention data parallelism, for
    a mixture of experts), the routed experts over all the stage's GPUs with ``expert_parallel`` of them
    spreading the experts (:func:`_moe_layout`); ``pipeline_parallel`` stages of those GPUs, each with its
    share of the layers (a replica of ``tensor_parallel x data_parallel x pipeline_parallel`` GPUs), with
    ``redundant_experts`` copies placed beside the routed experts.
    """
    a = _pipeline(a, pipeline_parallel, function)
    if np.ndim(data_parallel):
        raise InputError(f"{function}(): argument 'data_parallel' must be one whole number, got {data_parallel!r}")
    dp = count(function, "data_parallel", data_parallel)
    if dp == 1:
        return _moe_layout(a, tp, expert_parallel, function, redundant_experts), tp
    if a.experts <= 1:
        raise InputError(
            f"{function}(): data_parallel applies to the attention of a mixture of experts (its ranks share the "
            "experts); a dense model's data-parallel ranks are replicas"
        )
    degrees = np.unique(tp)
    if degrees.size != 1:
        raise InputError(f"{function}(): give one tensor_parallel degree with data_parallel {dp}")
    group = tp * dp
    spread = a.with_attention_data_parallel(float(degrees[0]))
    return _moe_layout(spread, group, expert_parallel, function, redundant_experts), group
