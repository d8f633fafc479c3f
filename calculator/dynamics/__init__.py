"""A day in production: a plan run through demand over time with its autoscaler, failures, retries and overload control.

:mod:`.demand` draws the demand curve, :mod:`.policies` holds the policies a :class:`Scenario` gathers,
:mod:`.result` the :class:`DayResult` both modes return. The fluid (mean-field) mode and
:func:`run_day` come in :mod:`.fluid` and :mod:`.day`; the request-level mode lives in
:mod:`calculator.simulation`.
"""

from .demand import DAY, DEMAND_SHAPES, WEEK, DemandCurve, demand_from_file, demand_shape
from .policies import (
    AUTOSCALER_KINDS,
    AUTOSCALER_METRICS,
    Admission,
    Autoscaler,
    AutoscalerState,
    ColdStart,
    Failure,
    Region,
    RetryPolicy,
    Scenario,
    parse_clock,
    parse_failure,
)
from .result import WINDOW_COLUMNS, DayResult, day_result

__all__ = [
    "AUTOSCALER_KINDS",
    "AUTOSCALER_METRICS",
    "DAY",
    "DEMAND_SHAPES",
    "WEEK",
    "WINDOW_COLUMNS",
    "Admission",
    "Autoscaler",
    "AutoscalerState",
    "ColdStart",
    "DayResult",
    "DemandCurve",
    "Failure",
    "Region",
    "RetryPolicy",
    "Scenario",
    "day_result",
    "demand_from_file",
    "demand_shape",
    "parse_clock",
    "parse_failure",
]
