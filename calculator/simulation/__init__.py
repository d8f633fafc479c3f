"""Request-level simulation of continuous-batching replicas behind a router (issue 12).

The submodules, each re-exported here:

* :mod:`~calculator.simulation.seed`: the inputs, the iteration-time tables, the event loop of one
  seed, the results, the entry points and the check of a fleet plan.
"""

from __future__ import annotations

from .seed import (
    DEFAULT_ROUTER,
    ROUTERS,
    PlanVerification,
    SimulationResult,
    SimulationSetup,
    Traffic,
    default_requests,
    plan_setup,
    router_name,
    simulate,
    simulate_plan,
    verify_plan,
)

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
    "router_name",
    "simulate",
]
