"""Checking a fleet plan by simulation: its replica, its traffic and targets, and the fewest replicas that meet them.

:func:`verify_plan` simulates a :class:`~calculator.fleet.FleetPlan` and searches the smallest
replica count that meets its targets in simulation. A plan is read through the serving vocabulary's
:class:`~calculator.serving.ServingPlan` (a FleetPlan is one), so the simulator never imports the sizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import count, executor_or_none
from ..errors import InputError
from ..results import Result, percentile_label
from ..serving import Layout, ServingPlan
from ._common import _Deadline, _NoTimeLeftError, _process_pool, _seeds
from .inputs import MAX_KEPT_POINTS, MAX_KEPT_REQUESTS, MAX_REPLICAS, MAX_REQUESTS, TIME_LIMIT, SimulationSetup, Traffic
from .results import SimulationResult, _every
from .run import _simulate, _targets

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PlanVerification", "default_requests", "plan_setup", "simulate_plan", "verify_plan"]


# --------------------------------------------------------------------------------------------
# Checking a fleet plan


def plan_setup(plan: ServingPlan, step_scale: float = 1.0) -> SimulationSetup:
    """The replica a :class:`~calculator.fleet.FleetPlan` describes (its cap on running sequences included)."""
    layout = _check_plan(plan, "plan_setup")
    return SimulationSetup(
        model=plan.model,
        accelerator=plan.accelerator,
        precision=plan.precision,
        tensor_parallel=layout.stage_gpus,
        expert_parallel=layout.expert_parallel,
        data_parallel=layout.data_parallel,
        pipeline_parallel=layout.pipeline_parallel,
        redundant_experts=layout.redundant_experts,
        engine=None if plan.engine == "generic" else plan.engine,
        kv_precision=plan.kv_precision or None,
        max_num_seqs=int(plan.batch),
        max_num_tokens=plan.serving.chunk_size,
        step_scale=step_scale,
        registry_files=plan.registry_documents,
        speculation=plan.serving.speculation,
        engine_release=getattr(plan, "engine_release", "") or None,
    )


def _check_plan(plan: Any, function: str) -> Layout:
    """The plan's layout, once the plan is one the simulator checks (feasible, with its workload and targets)."""
    if not isinstance(plan, ServingPlan):
        raise InputError(f"{function}(): argument 'plan' must be a FleetPlan, got {type(plan).__name__}")
    if not plan.feasible or plan.layout is None:
        raise InputError(f"{function}(): the plan is infeasible ({plan.reason}); there is nothing to simulate")
    if plan.workload is None or plan.targets is None:
        raise InputError(f"{function}(): the plan does not record its workload and targets (make it with size_fleet)")
    if plan.serving.prefix_hit_rate > 0:
        raise InputError(f"{function}(): prefix caching is not simulated; size the plan without it")
    return plan.layout


def _check_requests(function: str, requests: Any) -> None:
    if requests is not None and not (isinstance(requests, int | np.integer) and 1 <= requests <= MAX_REQUESTS):
        raise InputError(
            f"{function}(): argument 'requests' must be a whole number in [1, {MAX_REQUESTS}], got {requests!r}"
        )


def default_requests(replicas: int) -> int:
    """Requests a plan check simulates: 2,000 per replica, at least 6,000 and at most 60,000."""
    return int(min(max(2_000 * count("default_requests", "replicas", replicas), 6_000), 60_000))


def simulate_plan(
    plan: ServingPlan,
    *,
    replicas: int | None = None,
    requests: int | None = None,
    seeds: int | Sequence[int] = 2,
    router: str | None = None,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    time_limit: float = TIME_LIMIT,
) -> SimulationResult:
    """Simulate a :class:`~calculator.fleet.FleetPlan` at its (or another) replica count, against its targets.

    The plan's workload drives open-loop arrivals (Poisson, or gamma renewal with its arrival CV;
    log-normal lengths with its CVs); its router unless ``router`` is given; each replica capped at
    the plan's batch. The targets are the plan's: TTFT at its percentile (or mean), mean TPOT,
    and the token-gap bound at p99 when one was given. ``time_limit`` bounds the whole call, as
    :func:`~calculator.simulation.simulate`'s does.
    """
    deadline = _Deadline.start("simulate_plan", time_limit)
    _check_plan(plan, "simulate_plan")
    return _simulate_plan(plan, deadline, replicas, requests, seeds, router, executor, progress, "simulate_plan")


def _simulate_plan(
    plan: ServingPlan,
    deadline: _Deadline,
    replicas: int | None,
    requests: int | None,
    seeds: int | Sequence[int],
    router: str | None,
    executor: Executor | None,
    progress: Callable[[float], None] | None,
    function: str,
) -> SimulationResult:
    if replicas is None:
        _check_replicas(plan, function)
    count = _replica_count(function, replicas if replicas is not None else plan.replicas)
    _check_requests(function, requests)
    traffic = Traffic.from_workload(plan.workload, default_requests(count) if requests is None else int(requests))
    targets = plan.targets
    assert targets is not None  # _check_plan
    return _simulate(
        plan_setup(plan),
        traffic,
        deadline,
        replicas=count,
        router=router or plan.router,
        seeds=seeds,
        # the simulator bounds each request's longest gap: a percentile-of-gaps target is the sizer's alone
        targets=_targets(
            targets.ttft,
            targets.tpot,
            targets.tbt if getattr(targets, "tbt_percentile", None) is None else None,
            targets.ttft_percentile,
            getattr(targets, "tpot_percentile", None),
        ),
        executor=executor,
        progress=progress,
        function=function,
    )


@dataclass(frozen=True, repr=False)
class PlanVerification(Result):
    """A plan checked by simulation: the analytical replica count and the simulated minimum.

    Attributes
    ----------
    analytical_replicas : int
        The plan's replicas (closed forms).
    simulated_replicas : int or None
        The fewest replicas meeting every target in simulation (None: none up to ``max_replicas``).
    meets_targets : bool
        Whether the plan as sized meets its targets in simulation.
    tight : bool
        Whether one replica less misses a target in simulation.
    table : DataFrame
        Per replica count simulated: the target statistics reached, attainment and the verdict.
    results : dict of int to SimulationResult
        The simulations, by replica count.
    verdict : str
    truncated : str
        Why the search stopped before it settled ("" when it did): the call's ``time_limit``.
    """

    analytical_replicas: int
    simulated_replicas: int | None
    meets_targets: bool
    tight: bool
    table: pd.DataFrame = field(repr=False)
    results: dict[int, SimulationResult] = field(repr=False)
    verdict: str
    truncated: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The replica counts, the table as records and the verdict (the runs stay in ``results``)."""
        return {
            "analytical_replicas": self.analytical_replicas,
            "simulated_replicas": self.simulated_replicas,
            "meets_targets": self.meets_targets,
            "tight": self.tight,
            "table": self.table.to_dict(orient="records"),
            "verdict": self.verdict,
            "truncated": self.truncated,
        }


def verify_plan(
    plan: ServingPlan,
    *,
    requests: int | None = None,
    seeds: int | Sequence[int] = 2,
    router: str | None = None,
    max_replicas: int | None = None,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    time_limit: float = TIME_LIMIT,
) -> PlanVerification:
    """Simulate a plan and search the smallest replica count that meets its targets in simulation.

    Starts at the plan's replicas. If they meet the targets it tries one fewer, then steps down by
    doubling strides (2, 4, 8, ...) until a count misses; otherwise one more, then up by doubling
    strides until a count meets them (up to ``max_replicas``, default twice the plan's plus two).
    Between the last miss and the first meet it bisects, so a plan of 1,000 replicas takes a few
    dozen simulations, not hundreds. Each count runs ``seeds`` seeds of ``requests`` requests
    (default :func:`default_requests`), in parallel through ``executor``. The whole call has one
    deadline, ``time_limit``; when it passes, the search stops with what it found and ``truncated``
    says so.

    Parameters
    ----------
    plan : FleetPlan
        A feasible plan of :func:`~calculator.fleet.size_fleet` (without prefix caching, which the simulator
        does not model; speculative decoding runs as the plan states it).
    requests : int, optional
        Requests per simulation (default :func:`default_requests` of the plan's replicas).
    seeds : int or sequence of int
        Seeds per replica count (a count, or the seeds themselves).
    router : str, optional
        The router to simulate (default: the plan's).
    max_replicas : int, optional
        The largest replica count tried (default twice the plan's plus two).
    executor : concurrent.futures.Executor, optional
        Runs the seeds of each count (default: a process pool over this machine's cores when
        there are several seeds, shut down at the end; any Executor works, a ``dask.distributed``
        client's ``get_executor()`` included: ``docs/simulation.md``).
    progress : callable, optional
        Called with the fraction done, in [0, 1].
    time_limit : float
        Wall-clock seconds for the whole call: each simulation gets what is left, and the search
        stops (``truncated`` says where) when none is.

    Returns
    -------
    PlanVerification
    """
    deadline = _Deadline.start("verify_plan", time_limit)
    _check_plan(plan, "verify_plan")
    _check_replicas(plan, "verify_plan")
    executor_or_none("verify_plan", executor)
    start = int(plan.replicas)
    _check_requests("verify_plan", requests)
    limit = _replica_limit(start, max_replicas)
    seed_list = _seeds(seeds, "verify_plan")
    results: dict[int, SimulationResult] = {}
    simulated, stopped = _search_replicas(
        plan, deadline, start, limit, results, requests, seed_list, router, executor, progress
    )
    if progress is not None:
        progress(1.0)
    truncated = ""
    if stopped:
        truncated = f"the search stopped at the {time_limit:g} s time_limit after {len(results)} replica count(s)"
    if start not in results:  # not even one simulation began: the deadline had passed
        raise InputError(f"verify_plan(): argument 'time_limit' ({time_limit:g} s) left no time to simulate the plan")
    table = _verification_table(plan, results)
    if results[start].truncated:  # the plan's own count ran out of time: no verdict on it
        return PlanVerification(
            analytical_replicas=start,
            simulated_replicas=None,
            meets_targets=False,
            tight=False,
            table=table,
            results=results,
            verdict=f"the plan's {_replicas(start)} could not be simulated to the end: {results[start].truncated} "
            "(give more time, fewer requests, or fewer replicas)",
            truncated=truncated,
        )
    meets = bool(results[start].meets_targets)
    tight = meets and ((start - 1 in results and not results[start - 1].meets_targets) or start == 1)
    return PlanVerification(
        analytical_replicas=start,
        simulated_replicas=simulated,
        meets_targets=meets,
        tight=bool(tight),
        table=table,
        results=results,
        verdict=_search_verdict(start, simulated, limit, tight, truncated),
        truncated=truncated,
    )


def _replica_limit(start: int, max_replicas: Any) -> int:
    """The largest replica count :func:`verify_plan` tries: ``max_replicas`` (checked), else 2 x ``start`` + 2."""
    if max_replicas is not None and not isinstance(max_replicas, int | np.integer):
        raise InputError(f"verify_plan(): argument 'max_replicas' must be a whole number, got {max_replicas!r}")
    limit = int(max_replicas) if max_replicas is not None else 2 * start + 2
    if limit < 1:
        raise InputError(f"verify_plan(): argument 'max_replicas' must be >= 1, got {max_replicas!r}")
    return limit


def _search_replicas(
    plan: ServingPlan,
    deadline: _Deadline,
    start: int,
    limit: int,
    results: dict[int, SimulationResult],
    requests: int | None,
    seed_list: tuple[int, ...],
    router: str | None,
    executor: Executor | None,
    progress: Callable[[float], None] | None,
) -> tuple[int | None, bool]:
    """The fewest replicas found to meet the targets (None: none) and whether the deadline stopped the search.

    Each count simulated is kept in ``results`` (a count cut short by the deadline, other than the plan's
    own, is dropped). The seeds run through ``executor``, else a process pool of this call's, shut down here.
    """
    own = executor is None and len(seed_list) > 1
    pool = _process_pool(len(seed_list)) if own else executor
    steps = [0]

    def run(count: int) -> bool:
        if deadline.left() <= 0:
            raise _OutOfTimeError
        try:
            results[count] = _simulate_plan(
                plan, deadline, count, requests, seed_list, router, pool, None, "verify_plan"
            )
        except _NoTimeLeftError:
            raise _OutOfTimeError from None
        _trim(results)
        steps[0] += 1
        if progress is not None:
            progress(min(steps[0] / 8, 0.95))
        if results[count].truncated and "time_limit" in results[count].truncated:
            if count != start:
                del results[count]  # cut short: neither a meet nor a miss
            raise _OutOfTimeError
        return bool(results[count].meets_targets)

    search = _Search(run)
    try:
        simulated = search.fewest_meeting(start, limit)
    except _OutOfTimeError:
        simulated = search.best
    finally:
        if own and pool is not None:
            pool.shutdown(cancel_futures=True)
    return simulated, search.stopped


def _search_verdict(start: int, simulated: int | None, limit: int, tight: bool, truncated: str) -> str:
    """What the search found, in words: the plan's count against the fewest that meet the targets."""
    if simulated is None:
        verdict = (
            "no replica count simulated meets the targets"
            if truncated
            else f"no replica count up to {limit} meets the targets in simulation"
        )
    elif simulated == start:
        verdict = f"the plan's {_replicas(start)} meet the targets in simulation"
        if start == 1:
            verdict = "the plan's single replica meets the targets in simulation"
        elif tight:
            verdict += f"; {start - 1} miss them"
    elif simulated < start:
        verb = "meets" if simulated == 1 else "meet"
        verdict = f"{_replicas(simulated)} {verb} the targets in simulation; the plan's {start:,} over-provision"
    else:
        verdict = f"the plan's {_replicas(start)} miss the targets in simulation; {simulated:,} meet them"
    if truncated:
        verdict += f" ({truncated}; fewer may meet them)" if simulated is not None else f" ({truncated})"
    return verdict


def _trim(results: dict[int, SimulationResult]) -> None:
    """Keep the call's per-request rows and occupancy series within ``MAX_KEPT_REQUESTS`` / ``MAX_KEPT_POINTS``.

    Every replica count simulated keeps an even share (a regular sample of its rows); the summaries,
    computed from every request, are untouched.
    """
    import dataclasses

    for column, cap in (("requests", MAX_KEPT_REQUESTS), ("occupancy", MAX_KEPT_POINTS)):
        if sum(len(getattr(r, column)) for r in results.values()) > cap:
            share = cap // len(results)
            for count, result in results.items():
                results[count] = dataclasses.replace(result, **{column: _every(getattr(result, column), share)})


def _check_replicas(plan: Any, function: str) -> None:
    """The plan's own replica count within what the simulator runs (no argument to name: the plan's field)."""
    if plan.replicas > MAX_REPLICAS:
        raise InputError(
            f"{function}(): the plan's {plan.replicas:,} replicas are more than the simulator runs at once "
            f"({MAX_REPLICAS:,}); size a share of the traffic (a tenth of the rate needs about a tenth of the "
            "replicas) and verify that plan"
        )


def _replica_count(function: str, value: Any) -> int:
    """A replica count to simulate: a whole number in [1, :data:`MAX_REPLICAS`] (not a bool, NaN or inf)."""
    return int(count(function, "replicas", value, 1, MAX_REPLICAS))


def _replicas(count: int) -> str:
    return f"{count:,} replica{'' if count == 1 else 's'}"


class _OutOfTimeError(Exception):
    """The call's deadline passed (internal: the search stops with what it found)."""


class _Search:
    """The fewest replicas meeting the targets: bracket by doubling strides from the plan's count, then bisect.

    ``run(count)`` simulates a count and says whether it meets the targets (assumed monotone in the
    count). ``best`` is the fewest count found to meet them so far; ``stopped`` says the deadline
    cut the search short.
    """

    def __init__(self, run: Callable[[int], bool]) -> None:
        self._run = run
        self.best: int | None = None
        self.stopped = False

    def meets(self, count: int) -> bool:
        try:
            ok = self._run(count)
        except _OutOfTimeError:
            self.stopped = True
            raise
        if ok and (self.best is None or count < self.best):
            self.best = count
        return ok

    def fewest_meeting(self, start: int, limit: int) -> int | None:
        if self.meets(start):
            miss, meet, stride = 0, start, 1  # 0 replicas never meet
            while meet - stride >= 1 and self.meets(meet - stride):
                meet, stride = meet - stride, stride * 2
            miss = max(meet - stride, 0)
        else:
            miss, stride = start, 1
            while True:
                if miss >= limit:
                    return None
                trial = min(miss + stride, limit)
                if self.meets(trial):
                    meet = trial
                    break
                miss, stride = trial, stride * 2
        while meet - miss > 1:  # miss < fewest <= meet
            middle = (miss + meet) // 2
            if self.meets(middle):
                meet = middle
            else:
                miss = middle
        return meet


def _verification_table(plan: ServingPlan, results: dict[int, SimulationResult]) -> Any:
    """One row per simulated replica count: the plan's TTFT statistic, the mean TPOT, attainment, verdict."""
    import pandas as pd

    rows = []
    ttft_stat = percentile_label(plan.targets.ttft_percentile if plan.targets is not None else None)
    for replicas, result in sorted(results.items()):
        rows.append(
            {
                "replicas": replicas,
                f"ttft_{ttft_stat}_ms": result.value("ttft", ttft_stat).m_as("ms"),
                "tpot_mean_ms": result.value("tpot", "mean").m_as("ms"),
                **({} if ttft_stat == "p99" else {"ttft_p99_ms": result.value("ttft", "p99").m_as("ms")}),
                "attainment": result.attainment.get("all", math.nan),
                "meets_targets": bool(result.meets_targets),
                "verdict": result.verdict,
            }
        )
    return pd.DataFrame(rows)
