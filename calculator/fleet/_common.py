"""Helpers the fleet submodules share: argument checks, the candidate grid and registry lookups."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import InputError
from ..units import ureg
from .plan import PlanCost

__all__: list[str] = []

HOURS = 3600.0
#: The month a monthly cost is quoted in: pint's ``month``, a twelfth of a 365.25-day year (730.5 hours).
MONTH = "month"
#: The largest fleet the sizer plans (GPUs); a load that needs more is infeasible with that reason.
MAX_FLEET_GPUS = 10_000_000


def _as_list(value: Any, argument: str) -> list[Any]:
    """One candidate or several: an id, a registry entry object (iterable, but one item) or a list."""
    if isinstance(value, str) or hasattr(value, "id") or not isinstance(value, Iterable):
        return [value]
    items = list(value)
    if not items:
        raise InputError(f"argument '{argument}' is an empty list; give at least one candidate")
    return items


def _seconds(name: str, value: Any) -> float:
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
        raise InputError(f"size_fleet(): argument '{name}' must be a time such as Q_(200, 'ms'), got {value!r}")
    if np.ndim(value.magnitude):
        raise InputError(
            f"size_fleet(): argument '{name}' must be one time (size each target separately), got {value!r}"
        )
    if not value.magnitude > 0:
        raise InputError(f"size_fleet(): argument '{name}' must be > 0, got {value!r}")
    return value.m_as("s")


def _model_id(model: Any) -> str:
    return model.id if hasattr(model, "id") else str(model)


def _registry_for(registry: Any, *entries: Any) -> Any:
    """The registry to resolve ids in: the one given, else the one an entry object came from, else the default."""
    from .._support import registry_or_none
    from ..registry import load_registry, registry_of

    if registry_or_none(registry) is not None:
        return registry
    for entry in entries:
        for item in entry if isinstance(entry, list | tuple) else (entry,):
            if not isinstance(item, str) and hasattr(item, "id"):
                return registry_of(item)
    return load_registry()


def _fleet_costs(
    gpus: int, cost_per_hour: float, arrival_rate: float, input_tokens: float, output_tokens: float
) -> PlanCost:
    """A plan's cost from its fleet cost (USD/hour) and its workload (request/s, tokens per request).

    The cost per million output tokens is the chapter's unit cost (Table 14,
    :func:`~calculator.economics.cost_per_million_tokens`); the cost per million total tokens counts the
    prompt tokens too, as a per-token price list does; the monthly cost is the hourly one over a
    month of :data:`MONTH` (730.5 hours).
    """
    from ..economics import cost_per_million_tokens
    from ..units import Q_

    def per_million(tokens: float) -> Any:
        throughput = arrival_rate * tokens * HOURS / 1e6  # million tokens per hour
        price = cost_per_hour / gpus
        return Q_(
            float(cost_per_million_tokens.numeric(gpus=gpus, price_per_gpu_hour=price, throughput=throughput)), "USD"
        )

    hourly = Q_(cost_per_hour, "USD/hour")
    return PlanCost(
        per_hour=hourly,
        per_month=hourly.to(f"USD/{MONTH}"),
        per_million_output_tokens=per_million(output_tokens),
        per_million_total_tokens=per_million(input_tokens + output_tokens),
    )
