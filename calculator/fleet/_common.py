"""Helpers the fleet submodules share: argument checks, the candidate grid, registry lookups and traces."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..units import shown, ureg

if TYPE_CHECKING:
    pass

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


def _read_trace(trace: Any, columns: tuple[str, ...]) -> Any:
    """A request trace (a DataFrame, or the path of a CSV file) with ``columns`` checked and made floats.

    The first column is a time (s, at least 0), the others token counts (at least 1); a cell that is
    not such a number is an InputError naming its column and row.
    """
    import pandas as pd

    from .._files import MAX_TABLE_BYTES, read_csv

    if isinstance(trace, pd.DataFrame):
        frame, what = trace, "the trace"
    elif isinstance(trace, str | Path):
        what = f"the trace {trace}"
        frame = read_csv(trace, MAX_TABLE_BYTES, what)
    else:
        raise InputError(f"a trace is a DataFrame or a CSV file path, got {shown(trace)}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"the trace lacks column(s) {missing}; it has {shown(list(frame.columns))}")
    twice = [c for c in columns if list(frame.columns).count(c) > 1]
    if twice:
        raise InputError(f"{what} has column(s) {twice} more than once")
    if len(frame) < 1:
        raise InputError("the trace has no requests")
    checked = {column: _trace_column(frame, column, index == 0, what) for index, column in enumerate(columns)}
    return frame.assign(**checked)


def _trace_column(frame: Any, column: str, is_time: bool, what: str) -> np.ndarray:
    """A trace column as floats: times at least 0 s, lengths at least one token; else the first bad cell named."""
    import pandas as pd

    cells = frame[column]
    try:
        values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):  # complex numbers, objects pandas cannot coerce
        raise InputError(f"{what}: column {column!r} holds {cells.dtype} values; expected numbers") from None
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= (0.0 if is_time else 1.0))))
    if not bad.size:
        return values
    row = int(bad[0])
    cell, found = cells.iloc[row], shown(cells.iloc[row], 80)
    if pd.api.types.is_scalar(cell) and pd.isna(cell):
        problem = "an empty cell (missing values cannot be replayed)"
    elif np.isnan(values[row]):
        problem = f"expected a number, found {found}"
    elif is_time:
        problem = f"expected a time of at least 0 s, found {found}"
    else:
        problem = f"found {found}, a length below one token"
    raise InputError(f"{what}: column {column!r}, row {row + 1:,} (counting from 1 below the header): {problem}")


def _fleet_costs(gpus: int, cost_per_hour: float, arrival_rate: float, input_tokens: float, output_tokens: float):
    """A plan's cost fields from its fleet cost (USD/hour) and its workload (request/s, tokens per request).

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
    return {
        "cost_per_hour": hourly,
        "cost_per_month": hourly.to(f"USD/{MONTH}"),
        "cost_per_million_output_tokens": per_million(output_tokens),
        "cost_per_million_total_tokens": per_million(input_tokens + output_tokens),
    }
