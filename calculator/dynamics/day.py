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

__all__ = ["MODES", "run_day", "day_scenario"]

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
    if mode not in MODES:
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

    The autoscaler defaults to a fixed fleet of the plan's replicas; the cold start to
    :meth:`ColdStart.from_plan` (the plan's weights over ``storage_bandwidth``, 1 GB/s by default);
    named ``regions`` share the demand and the plan's replicas equally (rounded up), ``round_trip``
    apart (default 0 s). Other keywords (``price``, ``window``, ``duration``, ``goal``) go to
    :class:`Scenario`.
    """
    if not getattr(plan, "feasible", False):
        raise InputError(f"day_scenario(): argument 'plan' must be a feasible FleetPlan, got {shown(plan)}")
    if autoscaler is None:
        autoscaler = Autoscaler(kind="fixed", min_replicas=plan.replicas, max_replicas=plan.replicas)
    if cold_start is None:
        bandwidth = {} if storage_bandwidth is None else {"storage_bandwidth": storage_bandwidth}
        cold_start = ColdStart.from_plan(plan, registry, **bandwidth)
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
