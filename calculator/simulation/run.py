"""The entry point: :func:`simulate` checks its inputs, runs the seeds through an executor and summarizes.

Seeds run in parallel through any :class:`concurrent.futures.Executor` (by default a process pool over
this machine's cores); one seed without an executor runs in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .._support import executor_or_none
from ..errors import InputError
from ..types import Time
from ._common import _positive_seconds, _process_pool, _seeds, _statistic_name, _time_seconds
from .inputs import DEFAULT_ROUTER, MAX_REPLICAS, TIME_LIMIT, SimulationSetup, Traffic, router_name
from .results import SimulationResult, _frame, _replica_series, _summarize
from .seed import _limits, _Run, _simulate_seed

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
        targets["ttft"] = (_time_seconds("simulate()", "ttft_slo", ttft_slo), _statistic_name(ttft_percentile))
    if tpot_slo is not None:
        targets["tpot"] = (_time_seconds("simulate()", "tpot_slo", tpot_slo), _statistic_name(tpot_percentile))
    if tbt_slo is not None:
        targets["tbt_max"] = (_time_seconds("simulate()", "tbt_slo", tbt_slo), "p99")
    return targets


def simulate(
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
        Wall-clock seconds a seed may run before it stops and says so (``truncated``).

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
    if not isinstance(setup, SimulationSetup):
        raise InputError(f"simulate(): argument 'setup' must be a SimulationSetup, got {type(setup).__name__}")
    if not isinstance(traffic, Traffic):
        raise InputError(f"simulate(): argument 'traffic' must be a Traffic, got {type(traffic).__name__}")
    if isinstance(replicas, bool) or not (isinstance(replicas, int | np.integer) and 1 <= replicas <= MAX_REPLICAS):
        raise InputError(
            f"simulate(): argument 'replicas' must be a whole number in [1, {MAX_REPLICAS}], got {replicas!r}"
        )
    for name, value in (("warmup", warmup), ("cooldown", cooldown)):
        if not (isinstance(value, int | float) and 0 <= value < 0.5):
            raise InputError(f"simulate(): argument '{name}' must be in [0, 0.5), got {value!r}")
    time_limit = _positive_seconds("simulate", "time_limit", time_limit)
    if progress is not None and not callable(progress):
        raise InputError(
            f"simulate(): argument 'progress' must be a callable taking the share done, or None, got {progress!r}"
        )
    executor_or_none("simulate", executor)
    policy = router_name(router)
    seed_list = _seeds(seeds)
    targets = _targets(ttft_slo, tpot_slo, tbt_slo, ttft_percentile, tpot_percentile)
    if traffic.clients is not None:
        warmup = cooldown = 0.0
    _limits(setup)  # resolve the registry ids here, so bad input fails before any process starts
    runs = [_Run(setup, traffic, int(replicas), policy, seed, float(time_limit)) for seed in seed_list]
    raws = _run_all(runs, executor, progress)
    frames, series, utilization = [], [], []
    for run, raw in zip(runs, raws, strict=True):
        frames.append(_frame(raw, run.seed, warmup, cooldown))
        occupancy, busy = _replica_series(raw, run.seed)
        series.append(occupancy)
        utilization.append(busy)
    count = int(max(np.asarray(traffic.replica_schedule[1]).max(), 1)) if traffic.replica_schedule else replicas
    return _summarize(frames, series, utilization, raws, targets, count, policy, seed_list)


def _run_all(runs: list[_Run], executor: Executor | None, progress: Callable[[float], None] | None) -> list[dict]:
    if len(runs) == 1 and executor is None:
        return [_simulate_seed(runs[0], progress)]
    from concurrent.futures import as_completed

    pool = executor or _process_pool(len(runs))
    try:
        futures = {pool.submit(_simulate_seed, run): k for k, run in enumerate(runs)}
        out: list[dict | None] = [None] * len(runs)
        for done, future in enumerate(as_completed(futures), start=1):
            out[futures[future]] = future.result()
            if progress is not None:
                progress(done / len(runs))
    finally:
        if executor is None:
            pool.shutdown(cancel_futures=True)
    return out  # type: ignore[return-value]
