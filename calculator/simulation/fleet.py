"""The moving parts of a day at request level: replicas that start, drain and fail, admission, clients that retry.

Each part is a small class the event loop of :mod:`calculator.simulation.day` calls, tested on its own
(``tests/test_simulation_dynamics.py``); the policies they obey are :mod:`calculator.dynamics`'
(:class:`~calculator.dynamics.Autoscaler`, :class:`~calculator.dynamics.ColdStart`,
:class:`~calculator.dynamics.RetryPolicy`, :class:`~calculator.dynamics.Admission`,
:class:`~calculator.dynamics.Region`):

* :class:`_Pool`: every replica of the run, its region and its state (starting, ready, draining, gone), the
  ready ones a router may pick, a circuit breaker per replica
  (:class:`~calculator.routing.resilience.CircuitBreaker`) and each replica's recent service rate;
* :class:`_Gate`: admission, a queue limit per ready replica and a deadline on the predicted wait, each
  tighter for a lower priority class (the lowest shed first);
* :class:`_Clients`: when a client retries an attempt that failed, timed out or was shed (backoff with
  jitter, at most ``max_attempts``, within the retry budget).

None of them runs in :func:`~calculator.simulation.simulate`: a steady-state simulation is unchanged.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from ..routing.policies import _pick_replica  # private: the policies' one pick rule, run per request on plain lists
from ..routing.resilience import CircuitBreaker
from .scheduler import _Engine, _ReplicaScheduler, _Requests

__all__: list[str] = []

_STARTING, _READY, _DRAINING, _GONE = 0, 1, 2, 3

#: Seconds of completions a replica's service rate is measured over (the deadline shed's predicted wait).
RATE_WINDOW = 30.0


class _Pool:
    """Every replica of a run: its scheduler, region and state, the ready ones per region, breakers, service rates.

    A replica is *starting* from its start until its cold (or warm) start ends, then *ready* (routable), *draining*
    once scaled down (no new requests; gone when empty) and *gone* once drained or lost. ``spans`` holds each
    replica's provisioned interval (billed).
    """

    def __init__(self, engine: _Engine, requests: _Requests, release: Any, iterations: list, breaker: Any = None):
        self.engine, self.requests, self.release, self.iterations = engine, requests, release, iterations
        self.breaker = breaker  # a CircuitBreakerConfig, or None
        self.reps: list[_ReplicaScheduler] = []
        self.region: list[int] = []
        self.status: list[int] = []
        self.spans: list[list[float]] = []  # [provisioned at, gone at]
        self.ready_at: list[float] = []  # when each became ready (infinity: never)
        self.breakers: list[CircuitBreaker | None] = []
        self.done: list[deque[float]] = []  # each replica's recent completion times
        self.completions: list[int] = []  # each replica's completions so far
        self.ready: dict[int, list[int]] = {}  # region -> its ready replicas, in start order
        self.starting: dict[int, list[int]] = {}

    def start(self, region: int, now: float) -> int:
        """A new replica of ``region``, provisioned from ``now`` and starting (the loop says when it is ready)."""
        index = len(self.reps)
        self.reps.append(_ReplicaScheduler(index, self.engine, self.requests, self.release, self.iterations))
        self.region.append(region)
        self.status.append(_STARTING)
        self.spans.append([now, math.inf])
        self.ready_at.append(math.inf)
        self.breakers.append(CircuitBreaker(self.breaker) if self.breaker is not None else None)
        self.done.append(deque())
        self.completions.append(0)
        self.starting.setdefault(region, []).append(index)
        self.ready.setdefault(region, [])
        return index

    def make_ready(self, index: int, now: float) -> None:
        """The replica's start ended at ``now``: it takes requests (unless it was stopped or lost meanwhile)."""
        if self.status[index] != _STARTING:
            return
        self.status[index] = _READY
        self.ready_at[index] = now
        self.starting[self.region[index]].remove(index)
        self.ready[self.region[index]].append(index)

    def drain(self, index: int, now: float) -> None:
        """Scale ``index`` down: a starting replica stops at once, a ready one takes no more and goes when empty."""
        region = self.region[index]
        if self.status[index] == _STARTING:
            self.starting[region].remove(index)
            self.gone(index, now)
            return
        self.ready[region].remove(index)
        self.status[index] = _DRAINING
        if self.reps[index].outstanding == 0:
            self.gone(index, now)

    def lose(self, index: int, now: float) -> list[int]:
        """The replica fails at ``now``: it is gone, and the requests it held (waiting or running) are returned."""
        region, status = self.region[index], self.status[index]
        if status == _READY:
            self.ready[region].remove(index)
        elif status == _STARTING:
            self.starting[region].remove(index)
        rep = self.reps[index]
        held = [*rep.waiting, *rep.running]
        self.gone(index, now)
        return held

    def gone(self, index: int, now: float) -> None:
        self.status[index] = _GONE
        self.spans[index][1] = now
        self.trim(index, 0)

    def trim(self, index: int, keep: int = 2) -> None:
        """Forget replica ``index``'s per-iteration series but their last ``keep`` entries.

        The scheduler reads only the last ones (the iteration under way, the one before); a day reports per window,
        so a long day's memory stays flat instead of growing by an entry of each series per iteration.
        """
        rep = self.reps[index]
        for series in (rep.ends, rep.starts, rep.decoded, rep.kv, rep.batch, rep.population, rep.arrivals):
            del series[: len(series) - keep]

    def left(self, index: int, now: float) -> None:
        """A request left replica ``index``: a draining replica that is now empty is gone."""
        if self.status[index] == _DRAINING and self.reps[index].outstanding == 0:
            self.gone(index, now)

    def completed(self, index: int, now: float) -> None:
        """A request finished on ``index`` at ``now`` (its service rate counts it)."""
        self.completions[index] += 1
        done = self.done[index]
        done.append(now)
        while done[0] < now - RATE_WINDOW:
            done.popleft()

    def service_rate(self, index: int, now: float, prior: float) -> float:
        """Requests per second ``index`` completed over the last :data:`RATE_WINDOW` (``prior`` until it has 10)."""
        done = self.done[index]
        while done and done[0] < now - RATE_WINDOW:
            done.popleft()
        if len(done) < 10:
            return prior
        return len(done) / min(RATE_WINDOW, max(now - self.spans[index][0], 1e-9))

    def pick(self, region: int, policy: str, turn: int, rng: np.random.Generator, now: float) -> int | None:
        """A ready replica of ``region`` by the router ``policy``, its breaker letting the request in (None: none)."""
        choices = self.ready.get(region, [])
        if self.breaker is not None:
            choices = list(choices)
        reps = self.reps
        while choices:
            k = _pick_replica(
                policy, turn, len(choices), rng,
                lambda i: reps[choices[i]].outstanding, lambda i: reps[choices[i]].outstanding_tokens,
            )  # fmt: skip
            index = choices[k]
            breaker = self.breakers[index]
            if breaker is None or breaker.allow(now):
                return index
            choices.pop(k)
        return None

    def waiting(self, region: int) -> int:
        """Requests waiting in the queues of ``region``'s ready replicas."""
        reps = self.reps
        return sum(len(reps[i].waiting) for i in self.ready.get(region, []))

    def observe(self, region: int, metric: str, since: dict[int, int], interval: float, capacity: float) -> float:
        """An autoscaler's metric summed over ``region``'s ready replicas.

        Utilization is what a replica completed since the last look (``since``: its completions then), over
        ``interval`` seconds, as a share of its ``capacity`` (request/s at its full batch), as the fluid mode
        reads it: the time an engine spends iterating is near all of it whenever it decodes anything, so it
        would not steer.
        """
        total = 0.0
        for i in self.ready.get(region, []):
            rep = self.reps[i]
            if metric == "queue":
                total += len(rep.waiting)
            elif metric == "running":
                total += len(rep.running)
            elif metric == "kv_use":
                total += (rep.dec_kv + rep.pf_kv + rep.slack - rep.saved) / rep.capacity
            else:
                total += min((self.completions[i] - since.get(i, 0)) / interval / capacity, 1.0)
            since[i] = self.completions[i]
        return total


class _Gate:
    """Admission at the front door (:class:`~calculator.dynamics.Admission`).

    Class ``k`` of ``K`` (0 the highest priority) is admitted while its region's waiting requests stay below
    ``max_queue x (K - k) / K`` per ready replica and its predicted wait (the chosen replica's queue over its
    recent service rate) below ``deadline x (K - k) / K``: the lowest class is shed first, the highest only at
    the full limits.
    """

    def __init__(self, admission: Any, per_replica_rate: float):
        self.max_queue = admission.max_queue
        self.deadline = None if admission.deadline is None else float(admission.deadline.m)
        self.classes = len(admission.classes)
        self.prior = per_replica_rate

    def share(self, klass: int) -> float:
        """The share of the limits class ``klass`` may use."""
        return (self.classes - klass) / self.classes

    def region_full(self, waiting: int, ready: int, klass: int) -> bool:
        """Whether a region of ``ready`` replicas holding ``waiting`` requests refuses class ``klass`` (spill over)."""
        return self.max_queue is not None and waiting >= self.max_queue * self.share(klass) * ready

    def too_late(self, queue: int, rate: float, klass: int) -> bool:
        """Whether the wait predicted behind ``queue`` requests served at ``rate`` per second exceeds the deadline."""
        if self.deadline is None:
            return False
        return queue / max(rate, 1e-12) > self.deadline * self.share(klass)


class _Clients:
    """When a client tries again (:class:`~calculator.dynamics.RetryPolicy`).

    After ``delay(k)``, at most ``max_attempts`` in all, while the retries of the last :data:`BUDGET_WINDOW`
    seconds stay within ``budget`` times the first attempts of that window.
    """

    def __init__(self, policy: Any, rng: np.random.Generator):
        self.policy, self.rng = policy, rng
        self.allowance = policy.budget  # retries per first attempt (None: unlimited)
        self.firsts: deque[float] = deque()
        self.retries: deque[float] = deque()
        self.refused = 0  # retries the budget refused

    def first(self, now: float) -> None:
        """A request's first attempt was sent at ``now`` (the budget counts it)."""
        if self.allowance is not None:
            self.firsts.append(now)

    def retry_at(self, attempt: int, now: float) -> float | None:
        """When the client sends attempt ``attempt + 1`` after attempt ``attempt`` failed at ``now`` (None: never)."""
        policy = self.policy
        if attempt >= policy.max_attempts:
            return None
        if self.allowance is not None:
            for times in (self.firsts, self.retries):
                while times and times[0] < now - BUDGET_WINDOW:
                    times.popleft()
            if len(self.retries) + 1 > self.allowance * len(self.firsts):
                self.refused += 1
                return None
            self.retries.append(now)
        return now + policy.delay(attempt, self.rng)


#: Seconds over which a retry budget compares retries with first attempts.
BUDGET_WINDOW = 60.0
