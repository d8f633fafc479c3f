"""SLO-driven fleet sizing: which GPUs, at what tensor-parallel degree and batch cap, how many, what cost.

The submodules, each re-exported here:

* :mod:`~calculator.fleet.sizing`: the inputs, the plan, the vectorized evaluation and search
  (:func:`size_fleet`), disaggregated pools and demand over time.
"""

from __future__ import annotations

from .sizing import (
    DEFAULT_BATCHES,
    DEFAULT_TENSOR_PARALLEL,
    DemandPlan,
    DisaggregatedPlan,
    FleetPlan,
    Rejection,
    RelaxedPlan,
    ServingModeComparison,
    Speculation,
    Workload,
    compare_serving_modes,
    default_price,
    default_price_entry,
    demand_from_trace,
    frontier,
    plan_over_time,
    plan_summary,
    relax_targets,
    size_disaggregated,
    size_fleet,
)

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_TENSOR_PARALLEL",
    "DemandPlan",
    "DisaggregatedPlan",
    "FleetPlan",
    "RelaxedPlan",
    "Rejection",
    "ServingModeComparison",
    "Speculation",
    "Workload",
    "compare_serving_modes",
    "default_price",
    "default_price_entry",
    "demand_from_trace",
    "frontier",
    "plan_over_time",
    "plan_summary",
    "relax_targets",
    "size_disaggregated",
    "size_fleet",
]
