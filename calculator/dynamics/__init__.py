"""A day in production: a plan run through demand over time with its autoscaler, failures, retries and overload control.

:mod:`.demand` draws the demand curve, :mod:`.policies` holds the policies a :class:`Scenario` gathers,
:mod:`.result` the :class:`DayResult` both modes return. :func:`run_day` runs a plan through a
:class:`Scenario` (:func:`day_scenario` builds one around a plan) in the fluid (mean-field) mode of
:mod:`.fluid` or request by request (:func:`calculator.simulation.simulate_day`).
"""

from .day import MODES, day_scenario, plan_autoscaler, run_day
from .demand import DAY, DEMAND_SHAPES, WEEK, DemandCurve, demand_from_file, demand_shape
from .fluid import DEFAULT_STEP, MAX_FLUID_STEPS, run_fluid
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
from .result import WINDOW_COLUMNS, DayResult, attainment_goal, day_result
from .service import MAX_SLOT_LOAD, ReplicaService

__all__ = [
    "AUTOSCALER_KINDS",
    "AUTOSCALER_METRICS",
    "DAY",
    "DEFAULT_STEP",
    "MAX_FLUID_STEPS",
    "MAX_SLOT_LOAD",
    "MODES",
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
    "ReplicaService",
    "RetryPolicy",
    "Scenario",
    "attainment_goal",
    "day_result",
    "day_scenario",
    "demand_from_file",
    "demand_shape",
    "parse_clock",
    "parse_failure",
    "plan_autoscaler",
    "run_day",
    "run_fluid",
]
