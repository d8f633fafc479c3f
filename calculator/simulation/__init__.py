"""Request-level simulation of continuous-batching replicas behind a router (issue 12).

The fleet sizer answers with closed forms; this package checks its answers by simulating every
request. Each replica runs the continuous-batching scheduler of :mod:`calculator.performance`
(an iteration-level loop: a token budget per iteration, chunked prefill where the engine chunks,
prefill mixed into decoding or run alone, admission by free KV cache and a sequence cap, and
preemption with recompute when the cache runs out); every iteration is priced by
:func:`calculator.performance.iteration_seconds`, read from tables of that function (exact in the
decode count, within 1 % in context length, interpolated in the prefill tokens). A router spreads
the requests over the replicas with one of the policies of :mod:`calculator.routing`.

Traffic is open loop (Poisson, gamma renewal with a coefficient of variation, a trace, or a demand
curve with a replica schedule from :mod:`calculator.autoscaling`) or closed loop (``clients``
sending their next request when the last one completes, as a serving benchmark does). Results are a
per-request DataFrame and a summary with confidence intervals over seeds; seeds run in parallel
through any :class:`concurrent.futures.Executor`.

:func:`verify_plan` simulates a :class:`~calculator.fleet.FleetPlan` (any
:class:`~calculator.serving.ServingPlan`) and searches the smallest replica count that meets its targets in
simulation; the simulator imports nothing of the sizer. ``docs/simulation.md`` states the design, the
scheduler assumptions and the validation against queueing theory and the benchmark model.

The submodules, each re-exported here:

* :mod:`~calculator.simulation.inputs`: the replica (:class:`SimulationSetup`), the traffic
  (:class:`Traffic`: arrivals and lengths) and the router policies (:data:`ROUTERS`, :func:`router_name`,
  the serving vocabulary's: :mod:`calculator.serving`, which the fleet sizer shares).
* :mod:`~calculator.simulation.steps`: iteration times, read from tables of the step model.
* :mod:`~calculator.simulation.scheduler`: one replica's continuous-batching scheduler and the
  requests' state.
* :mod:`~calculator.simulation.seed`: one seed, the event loop of the replicas and the router.
* :mod:`~calculator.simulation.results`: the per-request frame, the summary with its intervals and
  the verdict (:class:`SimulationResult`).
* :mod:`~calculator.simulation.run`: :func:`simulate`, the seeds run through an executor.
* :mod:`~calculator.simulation.plans`: checking a fleet plan (:func:`plan_setup`, :func:`simulate_plan`,
  :func:`verify_plan`, :class:`PlanVerification`).
* :mod:`~calculator.simulation.disaggregated`: checking a disaggregated plan's two pools
  (:func:`verify_disaggregated`, :class:`DisaggregatedVerification`).
* :mod:`~calculator.simulation.fleet` and :mod:`~calculator.simulation.day`: a plan through a day in production
  (:func:`simulate_day`, and :func:`simulate_days` for a sweep of scenarios: an autoscaler, cold starts,
  failures, clients that time out and retry, admission and regions around the same replicas), the
  request-level mode of :func:`calculator.dynamics.run_day`.
"""

from __future__ import annotations

from .day import simulate_day, simulate_days
from .disaggregated import DisaggregatedVerification, verify_disaggregated
from .inputs import DEFAULT_ROUTER, ROUTERS, SimulationSetup, Traffic, router_name
from .plans import PlanVerification, default_requests, plan_setup, simulate_plan, verify_plan
from .results import SimulationResult
from .run import simulate

__all__ = [
    "ROUTERS",
    "DEFAULT_ROUTER",
    "SimulationSetup",
    "Traffic",
    "SimulationResult",
    "PlanVerification",
    "default_requests",
    "plan_setup",
    "simulate_plan",
    "verify_plan",
    "DisaggregatedVerification",
    "verify_disaggregated",
    "router_name",
    "simulate",
    "simulate_day",
    "simulate_days",
]
