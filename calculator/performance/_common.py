"""Helpers the performance submodules share: the costs to price with, checked counts as floats, the TP degree."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._support import count, model_of
from ..memory import check_tensor_parallel
from .engines import Efficiency, engine_profile

__all__: list[str] = []


def _efficiency(
    engine: Any, efficiency: Efficiency | None, accelerator_id: str | None = None, registry: Any = None
) -> Efficiency:
    """The costs to price with: those given, or the engine's on this accelerator (a resolved id)."""
    if efficiency is not None:
        return efficiency
    return engine_profile(engine, registry).efficiency_for(accelerator_id)


def _counts(function: str, argument: str, value: Any, minimum: int = 1) -> np.ndarray:
    return np.asarray(count(function, argument, value, minimum), dtype=float)


def _tp(model: Any, tensor_parallel: Any, function: str, registry: Any = None) -> np.ndarray:
    """The tensor-parallel degrees, checked against ``model`` (resolved in ``registry``)."""
    return np.asarray(check_tensor_parallel(model_of(model, registry), tensor_parallel, function), dtype=float)
