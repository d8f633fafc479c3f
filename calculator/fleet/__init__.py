"""SLO-driven fleet sizing: which GPUs, at what tensor-parallel degree and batch cap, how many, what cost.

:func:`size_fleet` searches every candidate configuration (accelerator x precision x TP degree x
cap ``B`` on running sequences) at once with numpy, using the calibrated step model of
:mod:`calculator.performance` and the queueing models of :mod:`calculator.queueing`. The cheapest
feasible candidate wins; the plan reports its binding constraint, why each rejected family failed,
and the closest achievable values when nothing is feasible.
:func:`calculator.simulation.verify_plan` checks a plan request by request.

The submodules, each re-exported here:

* :mod:`~calculator.fleet.inputs`: the sizer's named inputs: the traffic (:class:`Workload`), the
  targets (:class:`Targets`), the configurations searched (:class:`SearchSpace`), the serving
  features (:class:`ServingOptions`, speculative decoding with :class:`Speculation`) and the prices
  (:class:`Costs`, GPU-hour prices from the registry).
* :mod:`~calculator.fleet.plan`: the answer (:class:`FleetPlan`) in parts (its :class:`Layout`,
  :class:`PlanService`, :class:`PlanCost` and :class:`PlanEnergy`), why each family is not it
  (:class:`Rejection`), :func:`plan_summary` and :func:`interval_note`.
* :mod:`~calculator.fleet.evaluate`: the vectorized evaluation of the candidate grid (memory,
  iteration time, throughput, running batch, TPOT, TTFT with its waits) into an
  :class:`~calculator.fleet.evaluate.Evaluation`, and the TTFT and TPOT rules.
* :mod:`~calculator.fleet.sizing`: :func:`size_fleet`, its parts resolved once into the problem the
  search takes.
* :mod:`~calculator.fleet.search`: the search for the cheapest feasible candidate, its binding
  constraint and the GPUs at the ends of the model's error interval.
* :mod:`~calculator.fleet.frontier`: the closest feasible alternative (:func:`relax_targets`) and
  the throughput-vs-interactivity frontier (Figure 6).
* :mod:`~calculator.fleet.disaggregated`: prefill and decode pools (10.8.3, :func:`size_disaggregated`)
  and colocated against disaggregated serving (:func:`compare_serving_modes`).
* :mod:`~calculator.fleet.demand`: a trace's demand curve and a plan scaled over a demand curve
  (:func:`plan_over_time`).
"""

from __future__ import annotations

from .answers import InfeasibleAnswers, RateRelief, TargetAlone, explain_infeasible
from .demand import DemandPlan, demand_from_trace, plan_over_time
from .disaggregated import DisaggregatedPlan, ServingModeComparison, compare_serving_modes, size_disaggregated
from .frontier import RelaxedPlan, frontier, relax_targets
from .inputs import (
    DEFAULT_BATCHES,
    DEFAULT_TENSOR_PARALLEL,
    Costs,
    SearchSpace,
    ServingOptions,
    Speculation,
    Targets,
    Workload,
    default_price,
    default_price_entry,
)
from .plan import (
    Alternative,
    FleetPlan,
    Layout,
    PlanCost,
    PlanEnergy,
    PlanService,
    Rejection,
    interval_note,
    plan_summary,
    tie_lines,
)
from .sizing import size_fleet

__all__ = [
    "DEFAULT_BATCHES",
    "Alternative",
    "DEFAULT_TENSOR_PARALLEL",
    "Costs",
    "DemandPlan",
    "DisaggregatedPlan",
    "FleetPlan",
    "InfeasibleAnswers",
    "Layout",
    "PlanCost",
    "PlanEnergy",
    "PlanService",
    "RateRelief",
    "RelaxedPlan",
    "Rejection",
    "SearchSpace",
    "ServingModeComparison",
    "ServingOptions",
    "Speculation",
    "TargetAlone",
    "Targets",
    "Workload",
    "compare_serving_modes",
    "default_price",
    "default_price_entry",
    "demand_from_trace",
    "explain_infeasible",
    "frontier",
    "plan_over_time",
    "interval_note",
    "plan_summary",
    "relax_targets",
    "size_disaggregated",
    "size_fleet",
    "tie_lines",
]
