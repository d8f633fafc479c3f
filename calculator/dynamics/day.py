"""A plan through a day in either mode: :func:`run_day`, and :func:`day_scenario` that builds a scenario for a plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from ..errors import InputError
from ..units import Q_, shown
from .demand import DemandCurve
from .policies import Admission, Autoscaler, ColdStart, Failure, Region, RetryPolicy, Scenario
from .result import DayResult

__all__ = ["MODES", "run_day", "day_scenario", "plan_autoscaler"]

#: The two fidelities: the fluid (mean-field) mode and the request-level simulation.
MODES = ("fluid", "requests")


def run_day(
    plan: Any,
    scenario: Scenario,
    *,
    mode: str = "fluid",
    seeds: int | Sequence[int] = 1,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    step: Any = None,
) -> DayResult:
    """Run a plan through a scenario's day, in the fluid mode or request by request.

    Parameters
    ----------
    plan : FleetPlan
        A feasible plan (``size_fleet``'s, or read from ``servecalc size --json``).
    scenario : Scenario
        Demand, autoscaler, cold start, retries, admission, failures, regions, price and window
        (:func:`day_scenario` builds one around a plan).
    mode : str
        ``"fluid"`` (:func:`calculator.dynamics.fluid.run_fluid`: a week in seconds) or ``"requests"``
        (:func:`calculator.simulation.simulate_day`: every request through the simulator's replicas).
    seeds, executor, progress
        The request mode's independent days, the executor that runs them and a progress callback
        (the fluid mode is deterministic and runs here; ``progress`` is told when it is done).
    step : Quantity [time], optional
        The fluid mode's time step (default :data:`calculator.dynamics.fluid.DEFAULT_STEP`).

    Returns
    -------
    DayResult
        The same columns in both modes, so they compare window by window.
    """
    if progress is not None and not callable(progress):
        raise InputError(f"run_day(): argument 'progress' must be a callable or None, got {shown(progress)}")
    if not isinstance(mode, str) or mode not in MODES:
        raise InputError(f"run_day(): argument 'mode' must be one of {', '.join(MODES)}, got {shown(mode)}")
    if mode == "requests":
        if step is not None:
            raise InputError("run_day(): argument 'step' is the fluid mode's; the request mode has none")
        try:
            from ..simulation import simulate_day  # type: ignore[attr-defined,unused-ignore]
        except ImportError:
            raise InputError("run_day(): the request-level mode (simulation.simulate_day) is not available") from None
        return simulate_day(plan, scenario, seeds=seeds, executor=executor, progress=progress)  # type: ignore[no-any-return,unused-ignore]
    from .fluid import DEFAULT_STEP, run_fluid

    result = run_fluid(plan, scenario, step=step if step is not None else DEFAULT_STEP)
    if progress is not None:
        progress(1.0)
    return result


#: Where a reactive autoscaler scales down, as a share of where it scales up (it sizes for the midpoint).
SCALE_DOWN_SHARE = 0.6


def plan_autoscaler(plan: Any, kind: str = "reactive", metric: str = "utilization", **settings: Any) -> Autoscaler:
    """An autoscaler whose thresholds sit at the highest load a replica carries within the plan's promises.

    That load is the plan's ``max_utilization`` of a replica's throughput, or less where the plan's TPOT or
    TTFT target is missed first (:meth:`ReplicaService.safe_rate` on the plan's service curve). A reactive
    autoscaler scales up where a replica passes it (its utilization, or the running batch or KV use there)
    and down below :data:`SCALE_DOWN_SHARE` of it, sizing for the midpoint (80 % of it); on the queue
    metric, above one waiting request per replica and below 0.1. A predictive one sizes for the forecast
    at the plan's load per replica; a fixed one holds the plan's replicas. Between 1 and ten times the
    plan's replicas otherwise. ``settings`` override any field of :class:`Autoscaler`.
    """
    from .service import ReplicaService

    if not getattr(plan, "feasible", False) or getattr(plan, "service", None) is None:
        raise InputError(f"plan_autoscaler(): argument 'plan' must be a feasible FleetPlan, got {shown(plan)}")
    if not isinstance(metric, str):
        raise InputError(f"plan_autoscaler(): argument 'metric' must be a metric's name, got {shown(metric)}")
    service = ReplicaService.from_plan(plan, price=0.0)  # the curve alone: no cost is read
    rate = service.safe_rate(plan.max_utilization)
    batch = float(service.running(rate))
    at_limit = {"utilization": rate / service.capacity, "running": batch, "kv_use": batch / service.slots}
    up, down = (at_limit[metric], at_limit[metric] * SCALE_DOWN_SHARE) if metric in at_limit else (1.0, 0.1)
    replicas = int(plan.replicas)
    bounds = (replicas, replicas) if kind == "fixed" else (1, 10 * replicas)
    defaults = {"scale_up_at": up, "scale_down_at": down, "min_replicas": bounds[0], "max_replicas": bounds[1]}
    return Autoscaler(kind=kind, metric=metric, **{**defaults, **settings})


def day_scenario(
    plan: Any,
    demand: DemandCurve,
    *,
    autoscaler: Autoscaler | None = None,
    cold_start: ColdStart | None = None,
    retry: RetryPolicy | None = None,
    admission: Admission | None = None,
    failures: Sequence[Failure] = (),
    regions: Sequence[str] = (),
    round_trip: Any = None,
    storage_bandwidth: Any = None,
    registry: Any = None,
    **scenario: Any,
) -> Scenario:
    """A scenario around a plan: its defaults taken from the plan where the plan says them.

    The autoscaler defaults to a fixed fleet of the plan's replicas (:func:`plan_autoscaler` makes
    others around the plan's load); the cold start to
    :meth:`ColdStart.from_plan` (the plan's weights over ``storage_bandwidth``, 1 GB/s by default);
    named ``regions`` share the demand and the plan's replicas equally (rounded up), ``round_trip``
    apart (default 0 s). Other keywords (``price``, ``window``, ``duration``, ``goal``) go to
    :class:`Scenario`.
    """
    if not getattr(plan, "feasible", False):
        raise InputError(f"day_scenario(): argument 'plan' must be a feasible FleetPlan, got {shown(plan)}")
    if autoscaler is None:
        autoscaler = plan_autoscaler(plan, "fixed")
    if cold_start is None:
        bandwidth = {} if storage_bandwidth is None else {"storage_bandwidth": storage_bandwidth}
        cold_start = ColdStart.from_plan(plan, registry, **bandwidth)
    if isinstance(regions, str) or not isinstance(regions, Sequence):
        raise InputError(f"day_scenario(): argument 'regions' must be a list of region names, got {shown(regions)}")
    if not isinstance(failures, Sequence) or not all(isinstance(f, Failure) for f in failures):
        raise InputError(f"day_scenario(): argument 'failures' must be a list of Failure, got {shown(failures)}")
    names = list(regions)
    if len(set(names)) != len(names):
        raise InputError(f"day_scenario(): argument 'regions' must name each region once, got {names}")
    trip = round_trip if round_trip is not None else Q_(0, "s")
    per_region = -(-int(plan.replicas) // max(len(names), 1))
    pools = tuple(Region(name, 1 / len(names), per_region, trip) for name in names)
    return Scenario(
        demand,
        autoscaler=autoscaler,
        cold_start=cold_start,
        retry=retry or RetryPolicy(),
        admission=admission or Admission(),
        failures=tuple(failures),
        regions=pools,
        **scenario,
    )
