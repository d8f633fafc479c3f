"""The fluid (mean-field) mode: the fleet advanced in time steps, requests as flows.

Each step: first attempts (the demand curve's integral over the step) and the retries due arrive at
their region; routing sends them to the nearest pool with spare capacity (spill-over), skipping
pools that are down (failover); admission sheds above its queue limit or deadline; what waits
longer than the client's timeout leaves and is retried after the backoff; ready replicas serve at
the plan's throughput; the autoscaler decides every interval on its metric; new replicas become
ready after the cold start (warm-pool ones after the warm start); failures remove replicas and fail
the requests they ran. Latencies are evaluated afterwards, vectorized over the steps, from the
replica's service curve (:mod:`.service`). The equations are in ``docs/production-day.md``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..formula import magnitude
from ..units import Q_
from ._windows import StepRecord, window_result
from .policies import AutoscalerState, Failure, Region, Scenario
from .result import DayResult, attainment_goal
from .service import ReplicaService

__all__ = ["DEFAULT_STEP", "MAX_FLUID_STEPS", "run_fluid"]

#: The fluid mode's time step unless one is given.
DEFAULT_STEP = Q_(5, "s")
#: The most steps one run takes (four weeks at 5 s is 483,840).
MAX_FLUID_STEPS = 2_000_000


@dataclass
class _Pool:
    """One region's replicas and waiting requests, as the loop advances them (plain numbers)."""

    region: Region
    ready: int
    queue: list[float]  # waiting requests by attempt (0 = first)
    abandoned: float = 0.0  # attempts whose clients left but the engine keeps (RetryPolicy.cancel False), queued first
    pending: deque[tuple[float, int]] = field(default_factory=deque)  # (ready time, replicas), in time order
    warm: int = 0  # warm-pool replicas loaded and idle
    refilling: deque[tuple[float, int]] = field(default_factory=deque)  # warm-pool replicas being loaded
    state: AutoscalerState = field(default_factory=AutoscalerState)
    down_until: float = -math.inf
    open_until: float = -math.inf  # the circuit breaker fails arrivals fast until then

    @property
    def starting(self) -> int:
        return sum(n for _, n in self.pending)

    def promote(self, now: float) -> None:
        """Replicas whose start is done join the ready ones; loaded warm-pool replicas join the pool."""
        while self.pending and self.pending[0][0] <= now + 1e-9:
            self.ready += self.pending.popleft()[1]
        while self.refilling and self.refilling[0][0] <= now + 1e-9:
            self.warm += self.refilling.popleft()[1]

    def start(self, now: float, count: int, scenario: Scenario) -> None:
        """Start ``count`` replicas: warm-pool ones first (ready after the warm start), the rest cold."""
        cold = scenario.cold_start.total.m
        from_pool = min(count, self.warm)
        self.warm -= from_pool
        if from_pool:
            self._queue_start(now + scenario.cold_start.warm_start.m, from_pool)
            self.refilling.append((now + cold, from_pool))
        if count > from_pool:
            self._queue_start(now + cold, count - from_pool)

    def _queue_start(self, at: float, count: int) -> None:
        self.pending.append((at, count))
        self.pending = deque(sorted(self.pending))

    def stop(self, count: int) -> None:
        """Remove ``count`` replicas: the last started first, then ready ones."""
        while count and self.pending:
            at, n = self.pending.pop()
            taken = min(n, count)
            if n > taken:
                self.pending.append((at, n - taken))
            count -= taken
        self.ready -= min(count, self.ready)

    @property
    def billed(self) -> int:
        """Replicas paid for: ready, starting and the warm pool (idle or loading)."""
        return self.ready + self.starting + self.warm + sum(n for _, n in self.refilling)


def _checked_step(scenario: Scenario, step: Any) -> tuple[float, int]:
    """The step (s), adjusted to divide the reporting window, and the steps per window."""
    wanted = magnitude("run_fluid", "step", step, "s", "positive")
    window = scenario.window.m
    if wanted > window:
        raise InputError(
            f"run_fluid(): argument 'window' ({window:g} s) must be at least the fluid mode's time step, "
            f"argument 'step' ({wanted:g} s)"
        )
    per_window = max(round(window / wanted), 1)
    steps = math.ceil(scenario.seconds / window) * per_window
    if steps > MAX_FLUID_STEPS:
        dt, windows = window / per_window, MAX_FLUID_STEPS // per_window
        shorter = (
            f"argument 'duration' at most {windows * window:,.6g} s"
            if windows
            else f"argument 'window' at most {MAX_FLUID_STEPS * dt:,.6g} s"
        )
        raise InputError(
            f"run_fluid(): {scenario.seconds:,.6g} s in steps of {dt:g} s is {steps:,} steps, more than "
            f"{MAX_FLUID_STEPS:,} (MAX_FLUID_STEPS); give {shorter}, or a longer argument 'step'"
        )
    return window / per_window, per_window


def _nearest_first(trips: np.ndarray, own: int) -> list[int]:
    """Pools in order of round trip from one origin, its own pool first among equals."""
    return sorted(range(trips.size), key=lambda p: (float(trips[p]), p != own))


def _pools(plan: Any, scenario: Scenario, attempts: int) -> list[_Pool]:
    regions = scenario.regions or (Region("fleet", 1.0, int(plan.replicas)),)
    warm = scenario.autoscaler.warm_pool
    return [_Pool(region, region.replicas, [0.0] * attempts, warm=warm) for region in regions]


def run_fluid(plan: Any, scenario: Scenario, *, step: Any = DEFAULT_STEP) -> DayResult:
    """Run a plan through a scenario in the fluid (mean-field) mode.

    Parameters
    ----------
    plan : FleetPlan
        A feasible plan (``size_fleet``'s, or read from ``servecalc size --json``): its replica's
        throughput, batch, running batch, TTFT and TPOT set the service curve (:mod:`.service`), its
        replicas the fleet unless the scenario's regions say otherwise, its price the cost.
    scenario : Scenario
        Demand, autoscaler, cold start, retries, admission, failures, regions, reporting window.
    step : Quantity [time]
        The time step (default 5 s), adjusted down to divide the window.

    Returns
    -------
    DayResult
        One row per window; TTFT and TPOT percentiles of the requests served (see
        ``docs/production-day.md`` for how they are approximated).
    """
    if not isinstance(scenario, Scenario):
        raise InputError(f"run_fluid(): argument 'scenario' must be a Scenario, got {type(scenario).__name__}")
    service = ReplicaService.from_plan(plan, scenario.price.m if scenario.price is not None else None)
    dt, per_window = _checked_step(scenario, step)
    loop = _Loop(scenario, service, _pools(plan, scenario, scenario.retry.max_attempts), dt, per_window)
    record = loop.run()
    return window_result(record, scenario, service, attainment_goal(plan, scenario))


class _Loop:
    """The step loop: state in :class:`_Pool` records, each step's flows written to a :class:`StepRecord`."""

    def __init__(self, scenario: Scenario, service: ReplicaService, pools: list[_Pool], dt: float, per_window: int):
        self.scenario, self.service, self.pools, self.dt = scenario, service, pools, dt
        windows = math.ceil(scenario.seconds / scenario.window.m)
        self.steps = windows * per_window
        self.attempts = scenario.retry.max_attempts
        count = len(pools)
        self.trip = np.array([[o.region.trip_to(p.region.name) for p in pools] for o in pools])
        self.order = [_nearest_first(self.trip[o], o) for o in range(count)]
        self.share = np.array([p.region.share for p in pools])
        horizon = self.steps + int(self._longest_delay() / dt) + 2
        self.retries = np.zeros((horizon, count, self.attempts))  # retries due at each step, by origin and attempt
        self.record = StepRecord.empty(self.steps, count, dt, per_window)
        self.interval = max(round(scenario.autoscaler.interval.m / dt), 1)
        self.failures = sorted(scenario.failures, key=lambda f: f.at.m)
        self.recoveries: list[tuple[float, int, int]] = []  # (time, pool, replicas to restart)
        self.observed = np.zeros(count)

    def _longest_delay(self) -> float:
        retry = self.scenario.retry
        return retry.timeout.m + max((retry.mean_delay(k) for k in range(1, self.attempts)), default=0.0)

    def run(self) -> StepRecord:
        starts = np.arange(self.steps) * self.dt
        first = self.scenario.demand.mean_between(starts, starts + self.dt) * self.dt
        self.record.first[:] = first[:, None] * self.share[None, :]
        shares = self.share.tolist()
        for i, arrived in enumerate(first.tolist()):
            now = i * self.dt
            self._events(i, now)
            for pool in self.pools:
                pool.promote(now)
            arrivals = self.retries[i].tolist()
            for o, share in enumerate(shares):
                arrivals[o][0] += arrived * share
            self._step(i, arrivals)
            if i % self.interval == 0:
                self._scale(now)
        return self.record

    # ----------------------------------------------------------------------------------------
    # Routing, admission, timeouts, service

    def _route(self, totals: list[float]) -> list[list[float]]:
        """Requests ``x[o][p]`` of origin ``o``'s ``totals`` sent to pool ``p``: nearest first, spill-over to spare."""
        count = len(self.pools)
        mu = self.service.capacity * self.dt
        spare = [max(p.ready * mu - sum(p.queue) - p.abandoned, 0.0) for p in self.pools]
        up = [p.down_until == -math.inf for p in self.pools]
        sent = [[0.0] * count for _ in range(count)]
        for o in range(count):
            left = totals[o]
            for distance in sorted({self.trip[o, p] for p in range(count) if up[p]}):
                tied = [p for p in self.order[o] if up[p] and self.trip[o, p] == distance]
                room = sum(spare[p] for p in tied)
                if left <= 0 or room <= 0:
                    continue
                taken = min(left, room)
                for p in tied:
                    part = taken * spare[p] / room
                    sent[o][p] += part
                    spare[p] -= part
                left -= taken
            if left > 0:  # no spare anywhere: it waits at the nearest pool up with a replica ready (its own first)
                serving = (p for p in self.order[o] if up[p] and self.pools[p].ready > 0)
                sent[o][next(serving, next((p for p in self.order[o] if up[p]), self.order[o][0]))] += left
        return sent

    def _step(self, i: int, arrivals: list[list[float]]) -> None:
        totals = [sum(row) for row in arrivals]
        if len(totals) == 1:  # one pool: everything goes to it
            self.record.flows[i, 0, 0] = totals[0]
            self._serve(i, 0, self.pools[0], arrivals[0], totals)
            return
        sent = self._route(totals)
        self.record.flows[i] = sent
        for p, pool in enumerate(self.pools):
            origins = [sent[o][p] for o in range(len(totals))]
            inflow = [0.0] * self.attempts
            for o, amount in enumerate(origins):
                if amount > 0:
                    for k, part in enumerate(arrivals[o]):
                        inflow[k] += part * amount / totals[o]
            self._serve(i, p, pool, inflow, origins)

    def _serve(self, i: int, p: int, pool: _Pool, inflow: list[float], origins: list[float]) -> None:
        scenario, service, dt = self.scenario, self.service, self.dt
        refused = self._refused(i, pool, inflow, origins)
        backlog = [q + x - r for q, x, r in zip(pool.queue, inflow, refused, strict=True)]
        total = sum(backlog)
        rate = pool.ready * service.capacity
        wasted = min(pool.abandoned, rate * dt)  # abandoned attempts at the head of the queue run first
        abandoned = pool.abandoned - wasted
        served = min(total, rate * dt - wasted)
        mix = [b / total for b in backlog] if total > 0 else backlog
        left = total - served
        shed = min(max(left + abandoned - self._admission_cap(pool.ready, rate), 0.0), left)
        wait_limit = max(scenario.retry.timeout.m - service.ttft_base, 0.0)
        timed_out = max(left - shed - max(wait_limit * rate - abandoned, 0.0), 0.0)
        waiting = left - shed - timed_out
        pool.queue = [m * waiting for m in mix]
        pool.abandoned = abandoned + (0.0 if scenario.retry.cancel else timed_out)
        r = self.record
        r.ready[i, p], r.starting[i, p], r.billed[i, p] = pool.ready, pool.starting, pool.billed
        r.queue[i, p], r.served[i, p], r.served_first[i, p] = waiting + pool.abandoned, served, served * mix[0]
        r.shed[i, p], r.failed[i, p], r.offered[i, p] = shed + sum(refused), timed_out, sum(inflow)
        ahead = waiting + pool.abandoned
        r.delay[i, p] = ahead / rate if rate > 0 else (math.inf if ahead > 0 else 0.0)
        self.observed[p] = sum(inflow) / dt
        if shed > 0:
            self._retry(i, [m * shed for m in mix], origins, 0.0)
        if timed_out > 0:
            self._retry(i, [m * timed_out for m in mix], origins, scenario.retry.timeout.m)
        self._trip(i * dt, pool, served, timed_out, r.delay[i, p])

    def _refused(self, i: int, pool: _Pool, inflow: list[float], origins: list[float]) -> list[float]:
        """Arrivals an open circuit breaker fails fast (retried after the backoff); none while it is closed."""
        if pool.open_until <= i * self.dt:
            return [0.0] * len(inflow)
        self._retry(i, inflow, origins, 0.0)
        return inflow

    def _trip(self, now: float, pool: _Pool, served: float, timed_out: float, delay: float) -> None:
        """Open the pool's breaker for its open interval when the step's bad outcomes reach its threshold.

        Bad outcomes are the attempts that timed out and, with a latency threshold, those served slower than
        it (the step's TTFT without its slot wait); the step's outcomes stand for the breaker's window.
        """
        breaker = self.scenario.admission.breaker
        outcomes = served + timed_out
        if breaker is None or pool.open_until > now or outcomes < breaker.min_requests:
            return
        threshold = breaker.latency_threshold
        slow = threshold is not None and self.service.ttft_base + delay > Q_(threshold).m_as("s")
        if timed_out + (served if slow else 0.0) >= breaker.failure_threshold * outcomes:
            pool.open_until = now + Q_(breaker.open_interval).m_as("s")

    def _admission_cap(self, ready: int, rate: float) -> float:
        """Waiting requests admission allows (infinite without a limit; none without a replica ready).

        With no replica ready the gateway has no backend to send to and answers at once (a load balancer
        with no healthy upstream returns 503): every attempt is shed and its client retries after its
        backoff, as the request mode sheds it.
        """
        if ready == 0:
            return 0.0
        admission = self.scenario.admission
        caps = [math.inf]
        if admission.max_queue is not None:
            caps.append(admission.max_queue * ready)
        if admission.deadline is not None:
            caps.append(admission.deadline.m * rate)
        return min(caps)

    def _retry(self, i: int, failed: list[float], origins: Any, waited: float) -> None:
        """Failed attempts (by attempt) retried after ``waited`` plus the backoff, within the attempts and budget."""
        if self.attempts == 1:
            return
        retry = self.scenario.retry
        again = np.asarray(failed[:-1], dtype=float)
        if retry.budget is not None:
            allowed = retry.budget * self.record.first[i].sum() - self.record.retried_sent[i]
            again *= min(1.0, max(allowed, 0.0) / max(again.sum(), 1e-300))
        self.record.retried_sent[i] += again.sum()
        origins = np.asarray(origins, dtype=float)
        weights = origins / origins.sum() if origins.sum() > 0 else self.share
        for k, amount in enumerate(again, start=1):
            due = i + max(round((waited + retry.mean_delay(k)) / self.dt), 1)
            self.retries[due, :, k] += amount * weights

    # ----------------------------------------------------------------------------------------
    # Failures and the autoscaler

    def _events(self, i: int, now: float) -> None:
        while self.failures and self.failures[0].at.m <= now + 1e-9:
            self._fail(i, now, self.failures.pop(0))
        for event in [e for e in self.recoveries if e[0] <= now + 1e-9]:
            self.recoveries.remove(event)
            _, p, replicas = event
            pool = self.pools[p]
            pool.down_until = -math.inf
            pool.start(now, replicas, self.scenario)

    def _fail(self, i: int, now: float, failure: Failure) -> None:
        """Apply a failure: replicas lost (their running requests fail), or a region down with its queue."""
        running = self.service.running(self.observed / np.maximum([p.ready for p in self.pools], 1))
        if failure.kind == "region":
            p = next(j for j, pool in enumerate(self.pools) if pool.region.name == failure.target)
            pool = self.pools[p]
            lost = pool.ready * running[p] + sum(pool.queue)
            self.recoveries.append((failure.end, p, pool.ready + pool.starting))
            pool.pending.clear()
            pool.refilling.clear()
            pool.ready, pool.warm, pool.down_until = 0, 0, failure.end
            pool.queue, pool.abandoned = [0.0] * self.attempts, 0.0
        else:
            p = int(np.argmax([pool.ready for pool in self.pools]))
            pool = self.pools[p]
            count = min(failure.replicas_lost(self.service.per_node), pool.ready)
            lost = count * running[p]
            pool.ready -= count  # the autoscaler replaces them (with a cold start) at its next decision
            if pool.ready == 0:  # the last replica's waiting requests go with it
                lost += sum(pool.queue)
                pool.queue, pool.abandoned = [0.0] * self.attempts, 0.0
        self.record.lost[i, p] += lost
        self._retry(i, [lost] + [0.0] * (self.attempts - 1), self.share, 0.0)

    def _scale(self, now: float) -> None:
        """Each pool's autoscaler decision, applied: replicas started (warm pool first) or stopped."""
        scaler, service = self.scenario.autoscaler, self.service
        for p, pool in enumerate(self.pools):
            if pool.down_until > now:
                continue
            forecast = None
            if scaler.kind == "predictive":
                forecast = self.scenario.demand.peak_between(now, now + scaler.lead_time.m) * self.share[p]
            observed = self._metric(p, pool)
            current = pool.ready + pool.starting
            wanted, pool.state = scaler.step(
                now, observed, pool.ready, pool.starting, forecast, service.planned_rate, pool.state
            )
            if wanted > current:
                pool.start(now, wanted - current, self.scenario)
            elif wanted < current:
                pool.stop(current - wanted)

    def _metric(self, p: int, pool: _Pool) -> float:
        """The autoscaler's metric summed over the pool's ready replicas, from the last step."""
        metric, service = self.scenario.autoscaler.metric, self.service
        if metric == "queue":
            return float(sum(pool.queue) + pool.abandoned)  # an engine counts the attempts it was not told to drop
        busy = (
            min(self.observed[p] / service.capacity, pool.ready) if pool.ready else self.observed[p] / service.capacity
        )
        if metric == "utilization":
            return float(busy)
        per_replica = self.observed[p] / max(pool.ready, 1)
        running = float(service.running(per_replica)) * max(pool.ready, 1)
        return running if metric == "running" else running / service.slots
