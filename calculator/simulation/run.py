"""The entry point: :func:`simulate` checks its inputs, runs the seeds through an executor and summarizes.

Seeds run in parallel through any :class:`concurrent.futures.Executor` (by default a process pool over
this machine's cores); one seed without an executor runs in this process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any

import numpy as np

from .._support import executor_or_none
from ..errors import InputError
from ..results import percentile_label
from ..types import Time
from ._common import _Deadline, _NoTimeLeftError, _process_pool, _seeds, _time_seconds
from .inputs import (
    DEFAULT_ROUTER,
    MAX_KEPT_POINTS,
    MAX_KEPT_REQUESTS,
    MAX_REPLICAS,
    MAX_SIMULATED_REQUESTS,
    TIME_LIMIT,
    SimulationSetup,
    Traffic,
    router_name,
)
from .results import SimulationResult, _seed_result, _statistics_of, _summarize
from .seed import _limits, _Run

__all__ = ["simulate"]


# --------------------------------------------------------------------------------------------
# Entry points


def _targets(
    ttft_slo: Any, tpot_slo: Any, tbt_slo: Any, ttft_percentile: float | None, tpot_percentile: float | None
) -> dict[str, tuple[float, str]]:
    for name, value in (("ttft_percentile", ttft_percentile), ("tpot_percentile", tpot_percentile)):
        if value is not None and not (isinstance(value, int | float) and 0 < value < 1):
            raise InputError(f"simulate(): argument '{name}' must be in (0, 1), got {value!r}")
    targets = {}
    if ttft_slo is not None:
        targets["ttft"] = (_time_seconds("simulate()", "ttft_slo", ttft_slo), percentile_label(ttft_percentile))
    if tpot_slo is not None:
        targets["tpot"] = (_time_seconds("simulate()", "tpot_slo", tpot_slo), percentile_label(tpot_percentile))
    if tbt_slo is not None:
        targets["tbt_max"] = (_time_seconds("simulate()", "tbt_slo", tbt_slo), "p99")
    return targets


def simulate(  # noqa: PLR0913  # public entry point: its keyword options are the API
    setup: SimulationSetup,
    traffic: Traffic,
    *,
    replicas: int = 1,
    router: str = DEFAULT_ROUTER,
    seeds: int | Sequence[int] = 1,
    ttft_slo: Time = None,
    tpot_slo: Time = None,
    tbt_slo: Time = None,
    ttft_percentile: float | None = None,
    tpot_percentile: float | None = None,
    warmup: float = 0.1,
    cooldown: float = 0.05,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    time_limit: float = TIME_LIMIT,
) -> SimulationResult:
    """Simulate ``replicas`` continuous-batching replicas behind a router, request by request.

    Parameters
    ----------
    setup : SimulationSetup
        Model, accelerator, precision, tensor-parallel degree, engine and its limits.
    traffic : Traffic
        Arrivals and lengths (open loop, trace, demand curve, or closed loop with ``clients``).
    replicas : int
        Replicas behind the router (ignored when ``traffic.replica_schedule`` is given).
    router : str
        ``"round_robin"`` (default), ``"random"``, ``"join_shortest_queue"`` (fewest outstanding
        requests), ``"least_outstanding_tokens"`` (fewest prompt plus output tokens assigned and not
        finished) or ``"power_of_two"`` (the less loaded of two random replicas).
    seeds : int or sequence of int
        Independent runs (a count, or the seeds themselves); the summary's intervals are over them.
    ttft_slo, tpot_slo, tbt_slo : Quantity [time], optional
        Targets: TTFT at ``ttft_percentile`` (mean if ``None``), TPOT at ``tpot_percentile`` (mean
        if ``None``), and the p99 of each request's longest token gap.
    warmup, cooldown : float
        Fractions of the requests (by arrival) left out of the summary at the start and the end
        of an open-loop run (the fleet starts empty and drains at the end); closed loop keeps all.
    executor : concurrent.futures.Executor, optional
        Runs the seeds (default: a process pool over this machine's cores when there are several
        seeds; any Executor works, a ``dask.distributed`` client's ``get_executor()`` included:
        ``docs/simulation.md``). Each seed is one task, its result gathered in order.
    progress : callable, optional
        Called with the fraction done, in [0, 1].
    time_limit : float
        Wall-clock seconds for the whole call, setup included: one deadline for every seed. Each seed
        gets what is left of it (and draws no more requests than that can simulate); seeds not started
        when it passes are not run; ``truncated`` says so, and ``seeds`` holds the seeds that ran.

    Returns
    -------
    SimulationResult

    Examples
    --------
    Llama-3.1-8B at FP8 on one H100 under vLLM, 4 requests/s of 1024/128 tokens:

    >>> from calculator import Q_
    >>> setup = SimulationSetup("llama-3.1-8b", "h100_sxm", "fp8", engine="vllm")
    >>> run = simulate(setup, Traffic(Q_(4, "request/s"), 1024, 128, requests=400), ttft_slo=Q_(1, "s"))
    >>> run.meets_targets, run.stable, run.dropped
    (True, True, 0)
    """
    deadline = _Deadline.start("simulate", time_limit)
    return _simulate(
        setup, traffic, deadline, replicas=replicas, router=router, seeds=seeds, executor=executor, progress=progress,
        targets=_targets(ttft_slo, tpot_slo, tbt_slo, ttft_percentile, tpot_percentile), warmup=warmup,
        cooldown=cooldown,
    )  # fmt: skip


def _simulate(
    setup: SimulationSetup,
    traffic: Traffic,
    deadline: _Deadline,
    *,
    replicas: int,
    router: str,
    seeds: int | Sequence[int],
    targets: dict[str, tuple[float, str]],
    warmup: float = 0.1,
    cooldown: float = 0.05,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    function: str = "simulate",
) -> SimulationResult:
    """:func:`simulate` within ``deadline`` (one for the whole call: :func:`verify_plan` shares it over counts)."""
    if not isinstance(setup, SimulationSetup):
        raise InputError(f"{function}(): argument 'setup' must be a SimulationSetup, got {type(setup).__name__}")
    if not isinstance(traffic, Traffic):
        raise InputError(f"{function}(): argument 'traffic' must be a Traffic, got {type(traffic).__name__}")
    if isinstance(replicas, bool) or not (isinstance(replicas, int | np.integer) and 1 <= replicas <= MAX_REPLICAS):
        raise InputError(
            f"{function}(): argument 'replicas' must be a whole number in [1, {MAX_REPLICAS}], got {replicas!r}"
        )
    for name, value in (("warmup", warmup), ("cooldown", cooldown)):
        if not (isinstance(value, int | float) and 0 <= value < 0.5):
            raise InputError(f"{function}(): argument '{name}' must be in [0, 0.5), got {value!r}")
    if progress is not None and not callable(progress):
        raise InputError(
            f"{function}(): argument 'progress' must be a callable taking the share done, or None, got {progress!r}"
        )
    executor_or_none(function, executor)
    policy = router_name(router)
    seed_list = _seeds(seeds, function)
    _check_work(function, len(seed_list), traffic)
    if traffic.clients is not None:
        warmup = cooldown = 0.0
    _limits(setup)  # resolve the registry ids here, so bad input fails before any process starts
    share = max(MAX_KEPT_REQUESTS // len(seed_list), 1)
    runs = [
        _Run(setup, traffic, int(replicas), policy, seed, deadline, warmup, cooldown, targets, _statistics_of(targets),
             share, max(MAX_KEPT_POINTS // len(seed_list), 1), len(seed_list) == 1)
        for seed in seed_list
    ]  # fmt: skip
    parts = _run_all(runs, executor, progress, deadline)
    ran = [part for part in parts if part is not None]
    if not ran:
        raise _NoTimeLeftError(
            f"{function}(): argument 'time_limit' ({deadline.seconds:g} s) ran out before a seed could start "
            "(setting up takes longer: give more time)"
        )
    note = "" if len(ran) == len(runs) else f"{len(ran)} of {len(runs)} seeds ran within the call's time_limit"
    count = int(max(np.asarray(traffic.replica_schedule[1]).max(), 1)) if traffic.replica_schedule else replicas
    return _summarize(ran, targets, count, policy, note)


def _check_work(function: str, seeds: int, traffic: Traffic) -> None:
    """Seeds x requests within :data:`MAX_SIMULATED_REQUESTS` (refused before anything runs)."""
    requests = len(traffic.trace) if traffic.trace is not None else int(traffic.requests)
    if seeds * requests > MAX_SIMULATED_REQUESTS:
        raise InputError(
            f"{function}(): {seeds:,} seeds x {requests:,} requests is {seeds * requests:,} requests, more than "
            f"the {MAX_SIMULATED_REQUESTS:,} one simulation runs (MAX_SIMULATED_REQUESTS): give fewer seeds or requests"
        )


def _run_all(
    runs: list[_Run], executor: Executor | None, progress: Callable[[float], None] | None, deadline: _Deadline
) -> list[dict[str, Any] | None]:
    """Each seed's summary, in order (None: not started before the deadline).

    A few seeds at a time are in flight (twice the executor's workers, or this machine's cores), so a
    thousand seeds are not a thousand pickled tasks at once; none is sent once the deadline has passed,
    and the call waits for the seeds under way at most :data:`_GRACE` past it.
    """
    if len(runs) == 1 and executor is None:
        return [_seed_result(runs[0], progress)]
    import pandas  # noqa: F401  (imported once here, not by each forked worker on the clock)

    pool = executor or _process_pool(len(runs))
    # The standard library's pools keep their worker count in _max_workers (no public accessor); any other
    # executor (a dask client's) gets this machine's cores, and may run fewer seeds at once than it could.
    window = 2 * (getattr(pool, "_max_workers", None) or os.cpu_count() or 1)
    out: list[dict[str, Any] | None] = [None] * len(runs)
    waiting = iter(enumerate(runs))
    pending: dict[Future, int] = {}
    done = 0
    try:
        while True:
            while len(pending) < window and deadline.left() > 0 and (item := next(waiting, None)) is not None:
                pending[pool.submit(_seed_result, item[1])] = item[0]
            if not pending:
                break
            finished, _ = wait(pending, timeout=max(deadline.left(), 0.0) + _GRACE, return_when=FIRST_COMPLETED)
            if not finished:
                break  # the seeds under way overran the deadline by the grace: their results are not awaited
            for future in finished:
                out[pending.pop(future)] = future.result()
                done += 1
                if progress is not None:
                    progress(done / len(runs))
    finally:
        for future in pending:
            future.cancel()
        if executor is None:  # the seeds under way check the deadline: they end within about the grace
            pool.shutdown(cancel_futures=True)
    return out


#: Seconds past the deadline the call waits for the seeds under way (each checks the deadline itself).
_GRACE = 0.5
