"""A day in production, request by request: :func:`simulate_day` runs a plan through a day's scenario.

The replicas are the simulator's continuous-batching schedulers (:mod:`calculator.simulation.scheduler`), every
iteration priced as :func:`~calculator.simulation.simulate` prices it; around them the fleet moves
(:mod:`calculator.simulation.fleet`): an autoscaler reads a metric every interval and starts replicas that take
traffic after a cold start (or a warm start from the pool) or drains them; failures lose replicas or a region
with the requests they held; clients give up on an attempt without a first token within the timeout (it is
cancelled and its KV freed) and retry after a backoff with jitter, within their attempts and retry budget, so
retry amplification emerges rather than being assumed; admission sheds on a queue limit or a predicted wait,
lower classes first, and a circuit breaker per replica stops sending to a failing one; regions route each
request to the nearest pool, spilling over when its queue passes the admission limit and failing over when it
is down.

The event loop (:class:`_Day`) handles four kinds of event in time order: first attempts (the demand curve's
arrivals), timed control events (retries, timeouts, replicas ready, autoscaler decisions, failures, samples
of the fleet), and the replicas' iterations' ends. Every result is reported per window
(:data:`calculator.dynamics.WINDOW_COLUMNS`), as the fluid mode reports it (:func:`calculator.dynamics.run_day`).
``docs/simulation.md`` ("A day in production") states the rules.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import executor_or_none
from ..errors import InputError
from ..serving import ServingPlan
from ._common import _seeds
from .fleet import _GONE, _Clients, _Gate, _Pool
from .inputs import MAX_REQUESTS, SimulationSetup, Traffic
from .scheduler import _ABORTED, _DECODE, _DONE, _DROPPED, _PREFILL, _WAIT, _Requests
from .seed import _engine, _limits

__all__ = ["simulate_day", "simulate_days"]

# What became of an attempt.
_PENDING, _SERVED, _SHED, _TIMED_OUT, _FAILED, _REFUSED = 0, 1, 2, 3, 4, 5
# Control events: (time, order, kind, a, b).
_SEND, _TIMEOUT, _READY, _TICK, _FAIL, _RECOVER, _REFILL, _SAMPLE = range(8)
#: Samples of the fleet (ready, starting, queued) per reporting window.
SAMPLES_PER_WINDOW = 10


@dataclass
class _DayRun:
    """One seed of a day (plain values and the scenario's frozen policies: picklable for any executor).

    ``targets``: per-request TTFT and TPOT bounds in seconds (None: no such target); ``initial``: each region's
    replicas at the start; ``per_replica_rate``: request/s one replica serves at the plan's load (the predictive
    autoscaler's and the deadline shed's prior); ``price``: USD
    per GPU-hour; ``capacity``: request/s one replica serves with its batch full (utilization's denominator);
    ``per_node``: replicas one node carries (what a node failure takes).
    """

    setup: SimulationSetup
    traffic: Traffic
    scenario: Any
    router: str
    seed: int
    initial: tuple[int, ...]
    per_replica_rate: float
    targets: tuple[float | None, float | None]
    duration: float
    price: float = 0.0
    capacity: float = 1.0
    per_node: int = 1  # replicas one node carries (a node failure's)


class _Day:
    """One seed's fleet through the day: the state of every attempt, replica and region, and the event handlers."""

    def __init__(self, run: _DayRun):
        setup, scenario = run.setup, run.scenario
        self.run, self.scenario = run, scenario
        a, profile, rules, capacity, speculative = _limits(setup)
        arrival, prompt, output = run.traffic.draw(run.seed)
        engine = _engine(setup, (a, profile, rules, capacity, speculative), 1, run.seed, (prompt, output))
        self.overhead = profile.request_overhead.m_as("s")
        self.requests = _Requests(prompt.tolist(), output.tolist(), capacity, rules.kv_block)
        self.iterations: list[tuple[float, int]] = []
        self.pool = _Pool(engine, self.requests, self.release, self.iterations, scenario.admission.breaker)
        self.gate = _Gate(scenario.admission, run.per_replica_rate)
        rng = np.random.default_rng(run.seed + 31_337)
        self.rng = rng
        self.clients = _Clients(scenario.retry, rng)
        self.regions = scenario.regions or ()
        names = [r.name for r in self.regions] or ["fleet"]
        self.names = names
        jobs = arrival.size
        self.arrival = arrival.tolist()
        self.next_job = 0
        self.home = rng.choice(len(names), size=jobs, p=[r.share for r in self.regions] or [1.0]).tolist()
        self.klass = rng.choice(len(scenario.admission.classes), size=jobs, p=scenario.admission.shares).tolist()
        # each region's users' order of pools: their own first, then the others by round trip
        self.trips = [[r.trip_to(other) for other in names] for r in self.regions] or [[0.0]]
        self.order = [sorted(range(len(names)), key=_nearest(i, self.trips[i])) for i in range(len(names))]
        self.down = [False] * len(names)
        self.warm = [scenario.autoscaler.warm_pool] * len(names)
        # attempts (the first attempts are the jobs, in order; retries are appended)
        self.job = list(range(jobs))
        self.tries = [1] * jobs
        self.sent = [math.nan] * jobs
        self.path = [0.0] * jobs  # request overhead plus the round trip to the pool that took it
        self.outcome = [_PENDING] * jobs
        self.ended = [math.nan] * jobs
        self.pending: dict[int, list[int]] = {}  # replica -> attempts to abort when its iteration ends
        self.controls: list[tuple[float, int, int, int, int]] = []
        self.order_counter = itertools.count()
        self.turn = 0
        self.idle: list[int] = []
        self.samples: list[tuple[float, int, int, int]] = []
        self.seen: dict[int, int] = {}  # each replica's completions at the autoscaler's last look
        self.scaler_state: list[Any] = []

    # ---- the event queue

    def push(self, time: float, kind: int, a: int = 0, b: int = 0) -> None:
        heapq.heappush(self.controls, (time, next(self.order_counter), kind, a, b))

    def next_arrival(self) -> float:
        return self.arrival[self.next_job] if self.next_job < len(self.arrival) else math.inf

    # ---- attempts

    def send(self, job: int, attempt: int, now: float) -> None:
        """Attempt ``attempt`` of request ``job`` leaves its client at ``now``: routed, or shed."""
        if attempt == 1:
            index = job
            self.clients.first(now)
        else:
            requests = self.requests
            index = requests.add(requests.prompt[job], requests.output[job])
            self.job.append(job)
            self.tries.append(attempt)
            self.sent.append(now)
            self.path.append(0.0)
            self.outcome.append(_PENDING)
            self.ended.append(math.nan)
        self.sent[index] = now
        target = self.route(index, now)
        if target is None:
            self.finish(index, now, _SHED)
            return
        rep = self.pool.reps[target]
        rep.arrive(index, now)
        if not rep.in_iteration and target not in self.idle:
            self.idle.append(target)
        self.push(max(now + self.scenario.retry.timeout.m - self.path[index], now), _TIMEOUT, index)

    def route(self, index: int, now: float) -> int | None:
        """The replica attempt ``index`` goes to (None: shed).

        The users' own region when it is up and admits the attempt; else (failover, spill-over) the other regions
        that are up, the least loaded first (waiting requests per ready replica; the nearer of equals), as the
        closed form spreads a failed region's load to equalize the survivors' (``regions.failover_headroom``).
        """
        job = self.job[index]
        home, klass = self.home[job], self.klass[job]
        target = self.admit(home, klass, now)
        if target is not None:
            self.path[index] = self.overhead + self.trips[home][home]
            return target
        pool = self.pool
        others = [r for r in self.order[home][1:] if not self.down[r] and pool.ready.get(r)]
        others.sort(key=lambda r: pool.waiting(r) / len(pool.ready[r]))  # stable: the nearer of equals first
        for region in others:
            target = self.admit(region, klass, now)
            if target is not None:
                self.path[index] = self.overhead + self.trips[home][region]
                return target
        return None

    def admit(self, region: int, klass: int, now: float) -> int | None:
        """A replica of ``region`` that takes an attempt of class ``klass`` at ``now`` (None: down, full or refused)."""
        pool, gate = self.pool, self.gate
        ready = len(pool.ready.get(region, ()))
        if self.down[region] or not ready:
            return None
        if gate.max_queue is not None and gate.region_full(pool.waiting(region), ready, klass):
            return None
        target = pool.pick(region, self.run.router, self.turn, self.rng, now)
        self.turn += 1
        if target is None:  # every breaker there open
            return None
        if gate.deadline is not None:
            rate = pool.service_rate(target, now, gate.prior)
            if gate.too_late(len(pool.reps[target].waiting), rate, klass):
                return None
        return target

    def finish(self, index: int, now: float, outcome: int) -> None:
        """Attempt ``index`` ended at ``now`` without serving (shed, timed out, failed): its client may retry."""
        self.outcome[index], self.ended[index] = outcome, now
        at = self.clients.retry_at(self.tries[index], now) if outcome != _REFUSED else None
        if at is not None:
            self.push(at, _SEND, self.job[index], self.tries[index] + 1)

    def release(self, req: int, now: float) -> None:
        """A replica's scheduler let ``req`` go (finished, refused as too long, or aborted by the loop)."""
        state, index = self.requests.state[req], self.requests.replica[req]
        pool = self.pool
        if state == _DONE:
            pool.completed(index, now)
            if self.outcome[req] == _PENDING:
                self.outcome[req], self.ended[req] = _SERVED, now
                breaker = pool.breakers[index]
                if breaker is not None:
                    breaker.record(now, True, self._latency(req))
        elif state == _DROPPED:
            self.finish(req, now, _REFUSED)
        pool.left(index, now)

    def _latency(self, req: int) -> Any:
        """The attempt's time to first token as a quantity, for a breaker with a latency threshold (else None)."""
        if self.scenario.admission.breaker.latency_threshold is None:
            return None
        from ..units import Q_

        return Q_(self.requests.first[req] - self.sent[req], "s")

    def timeout(self, index: int, now: float) -> None:
        """The client of attempt ``index`` has had no first token by its timeout: it cancels the attempt and retries."""
        requests = self.requests
        if self.outcome[index] != _PENDING or requests.first[index] == requests.first[index]:
            return  # ended already, or streaming
        self.finish(index, now, _TIMED_OUT)
        target = requests.replica[index]
        breaker = self.pool.breakers[target]
        if breaker is not None:
            breaker.record(now, False)
        if self.pool.status[target] == _GONE or not self.scenario.retry.cancel:
            return
        rep = self.pool.reps[target]
        if requests.state[index] == _WAIT or not rep.in_iteration:
            rep.abort(index, now)
        else:
            self.pending.setdefault(target, []).append(index)

    def abort_pending(self, target: int, now: float) -> None:
        """The attempts cancelled during the iteration that just ended on ``target`` leave it now."""
        state = self.requests.state
        rep = self.pool.reps[target]
        for index in self.pending.pop(target, ()):
            if state[index] in (_WAIT, _PREFILL, _DECODE):
                rep.abort(index, now)

    # ---- the fleet

    def start_replica(self, region: int, now: float) -> None:
        """A replica of ``region`` starts: from the warm pool (warm start; the pool refills cold) or cold."""
        cold = self.scenario.cold_start
        index = self.pool.start(region, now)
        if self.warm[region] > 0:
            self.warm[region] -= 1
            self.push(now + cold.warm_start.m, _READY, index)
            self.push(now + cold.total.m, _REFILL, region)
        else:
            self.push(now + cold.total.m, _READY, index)

    def lose(self, index: int, now: float) -> None:
        """Replica ``index`` fails at ``now``: the attempts it held fail, and their clients retry."""
        held = self.pool.lose(index, now)
        self.pending.pop(index, None)
        for req in held:
            self.requests.state[req] = _ABORTED
            if self.outcome[req] == _PENDING:
                self.finish(req, now, _FAILED)

    def fail(self, number: int, now: float) -> None:
        """Failure ``number`` of the scenario happens: a region goes down, or replicas are lost."""
        failure = self.scenario.failures[number]
        pool = self.pool
        if failure.kind == "region":
            region = self.names.index(failure.target)
            self.down[region] = True
            self.warm[region] = 0
            for index, status in enumerate(pool.status):  # starting, ready and draining
                if pool.region[index] == region and status != _GONE:
                    self.lose(index, now)
        else:
            region = max(pool.ready, key=lambda r: len(pool.ready[r]))  # the largest region (the first of equals)
            for index in list(pool.ready[region][: failure.replicas_lost(self.run.per_node)]):
                self.lose(index, now)
        if failure.end < math.inf:
            self.push(failure.end, _RECOVER, number)

    def recover(self, number: int, now: float) -> None:
        """Failure ``number`` ends: a region comes back, cold, with its replicas at the start and its warm pool."""
        failure = self.scenario.failures[number]
        if failure.kind != "region":
            return  # lost replicas are replaced by the autoscaler
        region = self.names.index(failure.target)
        self.down[region] = False
        self.warm[region] = self.scenario.autoscaler.warm_pool
        for _ in range(self.run.initial[region]):
            self.start_replica(region, now)

    def tick(self, now: float) -> None:
        """The autoscaler decides every region's replicas at ``now`` (a region that is down is left alone)."""
        scaler = self.scenario.autoscaler
        pool = self.pool
        interval = scaler.interval.m
        for region in range(len(self.names)):
            if self.down[region]:
                continue
            ready, starting = len(pool.ready.get(region, ())), len(pool.starting.get(region, ()))
            current = ready + starting
            observed = pool.observe(region, scaler.metric, self.seen, interval, self.run.capacity)
            forecast = None
            if scaler.kind == "predictive":  # the highest demand over the lead time, as the fluid mode reads it
                share = self.regions[region].share if self.regions else 1.0
                forecast = self.scenario.demand.peak_between(now, now + scaler.lead_time.m) * share
            state = self.scaler_state[region]
            wanted, self.scaler_state[region] = scaler.step(
                now, observed, ready, starting, forecast, self.run.per_replica_rate, state
            )
            self.resize(region, wanted - current, now)
        self.push(now + interval, _TICK)

    def resize(self, region: int, change: int, now: float) -> None:
        """Start ``change`` replicas of ``region`` (> 0), or stop ``-change``: starting ones, then the emptiest."""
        pool = self.pool
        for _ in range(change):
            self.start_replica(region, now)
        for _ in range(-change):
            starting = pool.starting.get(region, [])
            if starting:
                pool.drain(starting[-1], now)
                continue
            ready = pool.ready.get(region, [])
            if len(ready) <= 0:
                return
            pool.drain(min(ready, key=lambda i: (pool.reps[i].outstanding, -i)), now)

    def sample(self, now: float) -> None:
        """Record the fleet (ready, starting, waiting) at ``now``; the live replicas' series are trimmed."""
        pool = self.pool
        for index in (i for r in (pool.ready, pool.starting) for indices in r.values() for i in indices):
            pool.trim(index)
        ready = sum(len(r) for r in pool.ready.values())
        starting = sum(len(s) for s in pool.starting.values())
        queued = sum(pool.waiting(region) for region in pool.ready)
        self.samples.append((now, ready, starting, queued))
        self.push(now + self.scenario.window.m / SAMPLES_PER_WINDOW, _SAMPLE)

    def control(self, event: tuple[float, int, int, int, int]) -> None:
        """Handle one timed event."""
        now, _, kind, a, b = event
        if kind == _SEND:
            self.send(a, b, now)
        elif kind == _TIMEOUT:
            self.timeout(a, now)
        elif kind == _READY:
            self.pool.make_ready(a, now)
        elif kind == _TICK:
            self.tick(now)
        elif kind == _FAIL:
            self.fail(a, now)
        elif kind == _RECOVER:
            self.recover(a, now)
        elif kind == _REFILL:
            self.warm[a] += 1 if not self.down[a] else 0
        else:
            self.sample(now)

    # ---- the loop

    def start(self) -> None:
        """The fleet at time 0: each region's replicas ready, the autoscaler's first decision, the failures."""
        from ..dynamics.policies import AutoscalerState

        for region, count in enumerate(self.run.initial):
            for _ in range(count):
                self.pool.make_ready(self.pool.start(region, 0.0), 0.0)
        self.scaler_state = [AutoscalerState() for _ in self.names]
        self.push(0.0, _TICK)  # decisions at 0, interval, 2 intervals, ... (as the fluid mode decides)
        self.push(0.0, _SAMPLE)
        for number, failure in enumerate(self.scenario.failures):
            self.push(failure.at.m, _FAIL, number)

    def iteration(self, now: float, index: int) -> None:
        """Replica ``index``'s iteration ended at ``now``: cancelled attempts leave, then the next iteration starts."""
        if self.pool.status[index] == _GONE:
            return  # lost mid-iteration
        rep = self.pool.reps[index]
        rep.end_iteration(now)
        if index in self.pending:
            self.abort_pending(index, now)
        if rep.n and not rep.waiting and not rep.prefilling:
            horizon = min(self.next_arrival(), self.controls[0][0] if self.controls else math.inf)
            now, _ = rep.fast_forward(now, horizon)
        rep.start_iteration(now)

    def loop(self, progress: Callable[[float], None] | None) -> None:
        """Every event in time order until the day ends and the fleet is empty."""
        end = self.run.duration
        controls, iterations = self.controls, self.iterations
        events = 0
        while True:
            t_arrival = self.next_arrival()
            t_control = controls[0][0] if controls else math.inf
            t_iteration = iterations[0][0] if iterations else math.inf
            if t_arrival <= t_control and t_arrival <= t_iteration:
                self.next_job += 1
                self.send(self.next_job - 1, 1, t_arrival)
                now = t_arrival
            elif t_control <= t_iteration:
                if t_control > end and not iterations and t_arrival == math.inf:
                    break  # only the fleet's own events are left, past the day's end
                now = t_control
                self.control(heapq.heappop(controls))
            else:
                now, index = heapq.heappop(iterations)
                self.iteration(now, index)
                continue
            if self.idle and min(self.next_arrival(), controls[0][0] if controls else math.inf) > now:
                for index in self.idle:  # started once every arrival of this instant is queued
                    rep = self.pool.reps[index]
                    if not rep.in_iteration and self.pool.status[index] != _GONE:
                        rep.start_iteration(now)
                self.idle.clear()
            events += 1
            if progress is not None and events % 4096 == 0:
                progress(min(now / end, 1.0))


def _nearest(home: int, trips: list[float]) -> Callable[[int], tuple[bool, float]]:
    """The sort key of the pools for the users of region ``home``: their own first, then by round trip."""
    return lambda pool: (pool != home, trips[pool])


def _day_seed(run: _DayRun, progress: Callable[[float], None] | None = None) -> Any:
    """One seed's day, as its per-window frame."""
    day = _Day(run)
    day.start()
    day.loop(progress)
    return _windows(day)


# --------------------------------------------------------------------------------------------
# Per-window results


def _windows(day: _Day) -> Any:
    """The seed's rows per reporting window (every column of ``WINDOW_COLUMNS`` but ``meets``, then ``shed_<class>``).

    As the fluid mode counts them (:class:`~calculator.dynamics.DayResult`): attempts served (began service),
    shed, failed (timed out, lost with a replica or a region, or too long for the cache) and retried; TTFT and
    TPOT of the attempts served, sent in the window, as their clients saw them; attainment, the first attempts
    served within every target over the first attempts sent.
    """
    import pandas as pd

    run = day.run
    width = float(day.scenario.window.m)
    count = max(math.ceil(run.duration / width - 1e-9), 1)
    edges = np.arange(count + 1) * width

    def per_window(times: np.ndarray) -> np.ndarray:
        bins = np.floor(times[np.isfinite(times)] / width).astype(np.int64)
        return np.bincount(bins[(bins >= 0) & (bins < count)], minlength=count)[:count].astype(float)

    sent, ended = np.array(day.sent), np.array(day.ended)
    outcome, tries = np.array(day.outcome), np.array(day.tries)
    ttft, tpot, good = _attempt_latencies(day, sent, outcome)
    window_of = np.floor(sent / width).astype(np.int64)
    rows: dict[str, Any] = {"start_s": edges[:-1]}
    rows["demand_rate"] = per_window(sent[tries == 1]) / width
    rows["offered_rate"] = per_window(sent) / width
    samples = np.array(day.samples, dtype=float).reshape(-1, 4)
    for column, k in (("ready", 1), ("starting", 2), ("queue", 3)):
        rows[column] = _window_mean(samples[:, 0], samples[:, k], width, count)
    for column, values in (("ttft", ttft), ("tpot", tpot)):
        for q in (50, 99):
            rows[f"{column}_p{q}_s"] = _window_quantile(window_of, values, q / 100, count)
    rows["served"] = per_window(np.array(day.requests.started))
    rows["shed"] = per_window(ended[outcome == _SHED])
    rows["failed"] = per_window(ended[(outcome == _TIMED_OUT) | (outcome == _FAILED) | (outcome == _REFUSED)])
    rows["retried"] = per_window(sent[tries > 1])
    arrived = rows["demand_rate"] * width
    rows["attainment"] = np.where(arrived > 0, per_window(sent[good]) / np.maximum(arrived, 1), 1.0)
    hours = _replica_seconds(day, edges) * run.setup.tensor_parallel * run.setup.pipeline_parallel / 3600
    rows["gpu_hours"] = hours
    rows["cost"] = hours * run.price
    classes = day.scenario.admission.classes
    if len(classes) > 1:
        klass = np.array(day.klass)[np.array(day.job)]
        for k, (name, _) in enumerate(classes):
            rows[f"shed_{name}"] = per_window(ended[(outcome == _SHED) & (klass == k)])
    return pd.DataFrame(rows)


def _attempt_latencies(day: _Day, sent: np.ndarray, outcome: np.ndarray) -> tuple:
    """Each attempt's TTFT and TPOT as its client saw them (NaN unless served); the first attempts within every target.

    The first attempts served within the plan's TTFT and TPOT bounds are the ones meeting the targets (a request
    that needed a retry does not count, as in the fluid mode).
    """
    requests = day.requests
    served = outcome == _SERVED
    path = np.array(day.path)
    first = np.where(served, np.array(requests.first) + path, np.nan)
    finish = np.array(requests.finish) + path
    output = np.array(requests.output)
    ttft = first - sent
    tpot = np.where(output > 1, (finish - first) / np.maximum(output - 1, 1), np.nan)
    ttft_bound, tpot_bound = day.run.targets
    good = served & (np.array(day.tries) == 1)
    if ttft_bound is not None:
        good &= ttft <= ttft_bound
    if tpot_bound is not None:
        good &= ~(tpot > tpot_bound)
    return ttft, tpot, good


def _window_mean(times: np.ndarray, values: np.ndarray, width: float, count: int) -> np.ndarray:
    bins = np.floor(times / width).astype(np.int64)
    ok = bins < count
    total = np.bincount(bins[ok], weights=values[ok], minlength=count)[:count]
    seen = np.bincount(bins[ok], minlength=count)[:count]
    return np.where(seen > 0, total / np.maximum(seen, 1), np.nan)


def _window_quantile(window: np.ndarray, values: np.ndarray, q: float, count: int) -> np.ndarray:
    out = np.full(count, np.nan)
    ok = np.isfinite(values) & (window < count)
    order = np.argsort(window[ok], kind="stable")
    grouped, data = window[ok][order], values[ok][order]
    bounds = np.searchsorted(grouped, np.arange(count + 1))
    for k in range(count):
        if bounds[k + 1] > bounds[k]:
            out[k] = float(np.quantile(data[bounds[k] : bounds[k + 1]], q))
    return out


def _replica_seconds(day: _Day, edges: np.ndarray) -> np.ndarray:
    """Replica-seconds billed per window: every replica from its start to its end, and each region's warm pool."""
    spans = np.array(day.pool.spans, dtype=float).reshape(-1, 2)
    start, stop = spans[:, 0], np.minimum(spans[:, 1], edges[-1])
    lo, hi = edges[:-1], edges[1:]
    overlap = np.clip(np.minimum(stop[:, None], hi[None, :]) - np.maximum(start[:, None], lo[None, :]), 0.0, None)
    pool = day.scenario.autoscaler.warm_pool * len(day.names) * (hi - lo)
    return overlap.sum(axis=0) + pool


# --------------------------------------------------------------------------------------------
# The entry point


def simulate_day(
    plan: ServingPlan,
    scenario: Any,
    *,
    seeds: int | Sequence[int] = 1,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
) -> Any:
    """Run ``plan`` through ``scenario``'s day request by request; a :class:`~calculator.dynamics.DayResult`.

    Parameters
    ----------
    plan : FleetPlan
        The replica (its model, GPUs, engine and batch), the lengths of its workload, its router and targets,
        and its replicas (the fleet at the start when ``scenario.regions`` is empty).
    scenario : Scenario
        Demand, autoscaler, cold start, retries, admission, failures, regions, price and reporting window.
    seeds : int or sequence of int
        Independent days; the windows are their means.
    executor : concurrent.futures.Executor, optional
        Runs the seeds, one task each (a ``dask.distributed`` client's ``get_executor()`` included); without
        one they run here, one after the other.
    progress : callable, optional
        Called with the share done, in [0, 1].

    Returns
    -------
    DayResult
        ``mode="requests"``; its windows as :func:`calculator.dynamics.run_day`'s fluid mode reports them.
    """
    return _simulate_days(plan, [scenario], seeds, executor, progress, "simulate_day")[0]


def simulate_days(
    plan: ServingPlan,
    scenarios: Sequence[Any],
    *,
    seeds: int | Sequence[int] = 1,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
) -> list[Any]:
    """:func:`simulate_day` of each scenario (a policy sweep), every seed of every scenario one task on ``executor``.

    Returns one :class:`~calculator.dynamics.DayResult` per scenario, in order.
    """
    if isinstance(scenarios, str | bytes) or not isinstance(scenarios, Sequence) or not scenarios:
        raise InputError(f"simulate_days(): argument 'scenarios' must be a list of Scenario, got {scenarios!r}")
    return _simulate_days(plan, list(scenarios), seeds, executor, progress, "simulate_days")


def _simulate_days(
    plan: ServingPlan,
    scenarios: list[Any],
    seeds: int | Sequence[int],
    executor: Executor | None,
    progress: Callable[[float], None] | None,
    function: str,
) -> list[Any]:
    import pandas as pd

    from ..dynamics.result import day_result

    executor_or_none(function, executor)
    if progress is not None and not callable(progress):
        raise InputError(f"{function}(): argument 'progress' must be a callable or None, got {progress!r}")
    prepared = [_day_runs(plan, scenario, seeds, function) for scenario in scenarios]
    frames = _run_days([run for runs, _ in prepared for run in runs], executor, progress)
    results = []
    for scenario, (runs, goal) in zip(scenarios, prepared, strict=True):
        mine, frames = frames[: len(runs)], frames[len(runs) :]
        mean = pd.concat(mine).groupby(level=0).mean() if len(mine) > 1 else mine[0]
        results.append(day_result(mean, float(scenario.window.m), goal, "requests"))
    return results


def _run_days(runs: list[_DayRun], executor: Executor | None, progress: Callable[[float], None] | None) -> list:
    """Each seed's windows, in order: here one after the other, or one task each on ``executor``."""
    if executor is None:
        frames = []
        for k, run in enumerate(runs):
            share = None if progress is None else (lambda done, k=k: progress((k + done) / len(runs)))
            frames.append(_day_seed(run, share))
            if progress is not None:
                progress((k + 1) / len(runs))
        return frames
    futures = [executor.submit(_day_seed, run) for run in runs]
    frames = []
    for k, future in enumerate(futures):
        frames.append(future.result())
        if progress is not None:
            progress((k + 1) / len(runs))
    return frames


def _day_runs(
    plan: ServingPlan, scenario: Any, seeds: int | Sequence[int], function: str = "simulate_day"
) -> tuple[list[_DayRun], float]:
    """Each seed's run of ``plan`` through ``scenario``, and the attainment a window must reach."""
    from ..dynamics.policies import Scenario
    from ..dynamics.result import attainment_goal
    from ..dynamics.service import ReplicaService
    from .plans import _check_plan, plan_setup

    _check_plan(plan, function)
    if not isinstance(scenario, Scenario):
        raise InputError(f"{function}(): argument 'scenario' must be a Scenario, got {type(scenario).__name__}")
    duration = scenario.seconds
    curve = scenario.demand
    times = np.append(curve.times[curve.times < duration], duration)
    rates = curve.rate_at(times)
    expected = float(np.sum(np.diff(times) * (rates[1:] + rates[:-1]) / 2))
    requests = int(expected + 6 * math.sqrt(expected) + 10)
    if requests > MAX_REQUESTS:
        raise InputError(
            f"{function}(): the demand asks about {expected:,.0f} requests, more than the {MAX_REQUESTS:,} a seed "
            "simulates; run the fluid mode, or a shorter stretch of the day"
        )
    workload, targets = plan.workload, plan.targets
    assert workload is not None and targets is not None  # _check_plan
    traffic = Traffic.from_workload(workload, requests)
    traffic = Traffic(
        demand=(times, rates), input_tokens=traffic.input_tokens, output_tokens=traffic.output_tokens,
        input_cv=traffic.input_cv, output_cv=traffic.output_cv, requests=requests,
    )  # fmt: skip
    initial = tuple(r.replicas for r in scenario.regions) or (int(plan.replicas),)
    # the plan's replica as the fluid mode reads it: its planned load and price (one source for both modes)
    service = ReplicaService.from_plan(plan, scenario.price.m if scenario.price is not None else None)
    bounds = (
        None if targets.ttft is None else float(targets.ttft.m_as("s")),
        None if targets.tpot is None else float(targets.tpot.m_as("s")),
    )
    setup = plan_setup(plan)
    if setup.data_parallel > 1:
        raise InputError(f"{function}(): replicas of several attention ranks (data_parallel > 1) are not simulated")
    runs = [
        _DayRun(setup, traffic, scenario, plan.router, seed, initial, service.planned_rate, bounds, duration,
                price=service.price, capacity=service.capacity, per_node=service.per_node)
        for seed in _seeds(seeds, function)
    ]  # fmt: skip
    return runs, attainment_goal(plan, scenario)
