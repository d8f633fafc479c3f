"""One seed: the event loop of continuous-batching replicas behind a router, request by request.

Each replica runs the continuous-batching scheduler of :mod:`calculator.simulation.scheduler` (the
scheduler of :mod:`calculator.performance`, iteration by iteration), every iteration priced by
:mod:`calculator.simulation.steps`. A router (:class:`_Router`) spreads the requests over the replicas
with one of the policies of :mod:`calculator.routing`; the arrivals (:class:`_Arrivals`) are an open
loop's times or a closed loop's clients; a replica of several attention ranks (:class:`_RankGroup`) runs
its ranks' iterations together. :func:`_simulate_seed` draws the requests, builds these parts and runs
the heap of events (:func:`_run_events`). A seed's run is plain values (:class:`_Run`) and
:func:`_simulate_seed` a module-level function, so both pickle for a process pool.
"""

from __future__ import annotations

import heapq
import math
import time as _time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..routing.policies import _pick_replica  # private: the policies' one pick rule, run per request on plain lists
from ._common import _Deadline
from .inputs import MAX_KEPT_POINTS, MAX_KEPT_REQUESTS, REQUESTS_PER_SECOND, SimulationSetup, Traffic
from .scheduler import _DONE, _DROPPED, _Engine, _ReplicaScheduler, _Requests
from .speculation import _Acceptance
from .steps import _FixedStep, _StepTable

if TYPE_CHECKING:
    from ..performance import StepArrays
    from ..performance.scheduler import SchedulerRules
    from ..performance.speculation import Rounds

#: Offsets the acceptance draws' generator from the seed's others (lengths, routing, request paths).
_ACCEPTANCE_SEED = 15_485_863

__all__: list[str] = []


@dataclass
class _Run:
    """Everything one seed needs (plain values, picklable for a process pool).

    ``deadline`` is the whole call's: a seed that starts after it has passed does not run. ``warmup``,
    ``cooldown``, ``targets`` and ``statistics`` say what the seed's summary holds; ``keep`` and ``points``
    its share of the per-request rows and of the occupancy series the call keeps; ``batches`` that it is
    the only seed (its interval comes from ten batches of its requests).
    """

    setup: SimulationSetup
    traffic: Traffic
    replicas: int
    router: str
    seed: int
    deadline: _Deadline
    warmup: float = 0.1
    cooldown: float = 0.05
    targets: dict[str, tuple[float, str]] = field(default_factory=dict)
    statistics: tuple[str, ...] = ()
    keep: int = MAX_KEPT_REQUESTS
    points: int = MAX_KEPT_POINTS
    batches: bool = False


def _limits(setup: SimulationSetup) -> tuple[StepArrays, Any, SchedulerRules, float, Rounds]:
    """The step arrays, the engine profile, a replica's scheduling rules, its KV tokens and its decode rounds.

    Under speculative decoding the drafter's weights and KV take their share of the KV tokens, as the predictor
    and the sizer count them (:class:`~calculator.performance.speculation.Rounds`).
    """
    from ..performance import engine_profile, kv_capacity_tokens, step_arrays
    from ..performance._common import checked_tp, replica_layout
    from ..performance.scheduler import scheduler_rules
    from ..performance.speculation import speculative_rounds
    from ..registry import load_registry

    registry = load_registry(extra=setup.registry_files)
    ranks = int(setup.data_parallel)
    model = registry.model(setup.model)
    tp = checked_tp(model, int(setup.tensor_parallel) // ranks, "simulate")
    profile = engine_profile(setup.engine, registry)
    if setup.engine_release:
        profile = profile.for_release(setup.engine_release)
    profile = profile.for_streaming(setup.streaming).with_stream_interval(setup.stream_interval, "SimulationSetup")
    a = step_arrays(
        setup.model, setup.accelerator, setup.precision, setup.kv_precision, engine=profile, registry=registry
    )
    a, _ = replica_layout(
        a, tp, ranks, setup.expert_parallel, "simulate", setup.pipeline_parallel, setup.redundant_experts
    )
    speculative = speculative_rounds(
        "simulate", setup.speculation, model, a, setup.precision, setup.kv_precision, profile, registry
    )
    # every attention rank schedules its own budget (max_num_tokens, per rank) and share of the cap
    rules = scheduler_rules(
        profile,
        a.memory,
        a.accelerator,
        ranks,
        max_num_tokens=setup.max_num_tokens,
        max_num_seqs=setup.max_num_seqs,
        kv=a,
        decode_tokens=speculative.verified,
    )
    capacity = float(
        speculative.kv_tokens(a, setup.tensor_parallel, kv_capacity_tokens(a, profile, setup.tensor_parallel))
    )
    return a, profile, rules, capacity, speculative


def _draw(run: _Run) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The seed's requests, at most what the time left can simulate (:data:`REQUESTS_PER_SECOND`), and why fewer."""
    traffic = run.traffic
    asked = len(traffic.trace) if traffic.trace is not None else int(traffic.requests)
    limit = int(REQUESTS_PER_SECOND * max(run.deadline.left(), 0.0)) + 1
    arrival, prompt, output = traffic.draw(run.seed, limit if limit < asked else None)
    short = ""
    if limit < asked:
        short = (  # the same words for every seed cut so (the result says how many were simulated)
            f"drew fewer than the {asked:,} requests asked, what was left of the {run.deadline.seconds:.3g} s "
            "time_limit could simulate"
        )
    return arrival, prompt, output, short


# --------------------------------------------------------------------------------------------
# The parts of a seed: arrivals, the router, replicas of several attention ranks


class _Arrivals:
    """Requests reaching the engine, after the request overhead (``path``: each request's way there).

    Open loop: the drawn arrival times in order (``next``: the next request). Closed loop: the clients'
    requests in a heap of (time, request), each client sending its next one when the last leaves.
    """

    __slots__ = ("closed", "done", "events", "landing", "next", "path", "pending", "sent", "total")

    def __init__(self, run: _Run, arrival: np.ndarray, overhead: float):
        traffic = run.traffic
        total = self.total = arrival.size
        self.closed = closed = traffic.clients is not None
        self.path = [overhead] * total
        if closed and traffic.request_path_spread:
            share = np.random.default_rng(run.seed + 104_729).uniform(-1.0, 1.0, total) * traffic.request_path_spread
            self.path = (overhead * (1.0 + share)).tolist()
        self.landing = (arrival + overhead).tolist()  # open loop: when each request reaches the engine
        self.next = 0
        self.done = 0  # requests gone (finished or dropped)
        self.events: list[tuple[float, int]] = []
        self.pending: deque[int] = deque()
        if closed:
            clients = min(int(traffic.clients or 0), total)
            self.pending = deque(range(clients, total))
            self.sent = [math.nan] * total
            for i in range(clients):
                self.sent[i] = 0.0
            self.events = [(self.path[i], i) for i in range(clients)]
            heapq.heapify(self.events)
        else:
            self.sent = arrival.tolist()

    def next_at(self) -> float:
        """When the next request reaches the engine (infinity: none will)."""
        if self.closed:
            return self.events[0][0] if self.events else math.inf
        return self.landing[self.next] if self.next < self.total else math.inf

    def release(self, req: int, now: float) -> None:
        """A request left the system: in closed loop its client sends the next one."""
        self.done += 1
        if self.closed and self.pending:
            nxt = self.pending.popleft()
            self.sent[nxt] = now
            heapq.heappush(self.events, (now + self.path[nxt], nxt))


class _Router:
    """Sends each request to a replica with one of :mod:`calculator.routing`'s policies.

    With attention ranks (``ranks`` > 1) it picks a replica by its ranks' load together, and there the
    engine's least loaded rank. A ``replica_schedule`` limits the choice to the replicas ready at the time.
    Round robin and random dispatch of an open-loop stream do not depend on the replicas' state: ``routed``
    holds every request's replica, decided up front, and ``landings`` each replica's own arrival times.
    """

    __slots__ = ("count", "landings", "next_landing", "policy", "ranks", "ready", "reps", "rng", "routed", "turn")

    def __init__(self, run: _Run, reps: list[_ReplicaScheduler], count: int, ranks: int):
        self.policy, self.reps, self.count, self.ranks = run.router, reps, count, ranks
        self.rng = np.random.default_rng(run.seed + 7_919)
        self.turn = 0
        schedule = run.traffic.replica_schedule
        self.ready = None if schedule is None else (schedule[0].tolist(), schedule[1].tolist())
        self.routed: list[int] | None = None
        self.landings: list[list[float]] = []
        self.next_landing: list[int] = []

    def route_up_front(self, arrival: np.ndarray, overhead: float) -> None:
        """Decide every request's replica now (round robin or random, open loop, no schedule, no ranks)."""
        count = self.count
        size = arrival.size
        targets = np.arange(size) % count if self.policy == "round_robin" else self.rng.integers(count, size=size)
        self.routed = targets.tolist()
        order = np.argsort(targets, kind="stable")  # each replica's requests in arrival order, grouped
        bounds = np.searchsorted(targets[order], np.arange(count + 1)).tolist()
        landing = (arrival[order] + overhead).tolist()
        self.landings = [[*landing[bounds[r] : bounds[r + 1]], math.inf] for r in range(count)]
        self.next_landing = [0] * count

    def ready_replicas(self, now: float) -> int:
        """Replicas ready at ``now`` (the first of them take the requests)."""
        if self.ready is None:
            return self.count
        times, counts = self.ready
        k = int(np.searchsorted(times, now, side="right")) - 1
        return counts[k] if k >= 0 else counts[0]

    def route(self, now: float) -> int:
        """The replica (with ranks, the attention rank) a request arriving at ``now`` goes to."""
        live = self.ready_replicas(now)
        if live <= 0:
            live = 1  # no replica ready: the request waits on the first one
        reps, ranks, policy = self.reps, self.ranks, self.policy
        if ranks == 1:
            target = _pick_replica(
                policy, self.turn, live, self.rng, lambda k: reps[k].outstanding, lambda k: reps[k].outstanding_tokens
            )
            self.turn += policy == "round_robin"
            return target
        members = range(ranks)
        group = _pick_replica(
            policy, self.turn, live, self.rng,
            lambda k: sum(reps[k * ranks + i].outstanding for i in members),
            lambda k: sum(reps[k * ranks + i].outstanding_tokens for i in members),
        )  # fmt: skip
        self.turn += policy == "round_robin"
        # Inside the replica the engine sends a request to its least loaded rank.
        return min((reps[group * ranks + i].outstanding, group * ranks + i) for i in members)[1]


class _RankGroup:
    """A replica of several attention ranks: one iteration of them together, each on its own work.

    The MoE layers run every rank's tokens at once, so a rank cannot start its next iteration alone:
    all wait for the slowest.
    """

    __slots__ = ("in_iteration", "index", "iterations", "members", "ranks", "scale", "table")

    def __init__(self, index: int, members: list[_ReplicaScheduler], engine: _Engine, iterations: list):
        self.index, self.members, self.iterations = index, members, iterations
        self.table, self.scale, self.ranks = engine.table, engine.scale, engine.ranks
        self.in_iteration = False

    def start_iteration(self, now: float) -> None:
        """Schedule every rank's next iteration at ``now`` (if any has work) and push their common end."""
        table, ranks = self.table, self.ranks
        loads = [rep.start_iteration(now, grouped=True) for rep in self.members]
        working = [load for load in loads if load is not None]
        self.in_iteration = bool(working)
        if not working:
            return
        # Per layer each rank runs its own attention and dense work (the busiest sets the pace), then the
        # experts and their exchange run every rank's tokens together: the busiest rank's time without its
        # share of that (priced as if every rank carried its load), plus that work at the replica's tokens;
        # the ranks' schedulers run side by side.
        own = max(
            gpu - table.together(tokens * ranks, tokens * ranks, prefill) for gpu, tokens, _, prefill, _ in working
        )
        busiest = max(tokens for _, tokens, *_ in working)
        prompts = any(prefill for _, _, _, prefill, _ in working)
        together = own + table.together(sum(tokens for _, tokens, *_ in working), busiest * ranks, prompts)
        sequences = max(sequences for _, _, sequences, _, _ in working)
        # a speculative round's drafting (the busiest rank's) after the verification
        longest = (table.total(together, sequences) + max(drafting for *_, drafting in working)) * self.scale
        end = now + longest
        for rep, load in zip(self.members, loads, strict=True):
            if load is not None:
                rep.commit(now, end, longest)
        heapq.heappush(self.iterations, (end, self.index))

    def next_iteration(self, now: float) -> None:
        """The ranks' iteration ended at ``now``: end it on each rank that ran, then start the next."""
        for rep in self.members:
            if rep.in_iteration:
                rep.end_iteration(now)
                rep.in_iteration = False
        self.start_iteration(now)


# --------------------------------------------------------------------------------------------
# One seed: the event loop


def _simulate_seed(run: _Run, progress: Callable[[float], None] | None = None) -> dict[str, Any] | None:
    """Simulate one seed; returns per-request arrays and per-replica series (None: the call's deadline had passed).

    The seed's setup (the registry, the step arrays, drawing the requests, the replicas) counts against the
    call's deadline, which it checks between those stages.
    """
    if run.deadline.left() <= 0:
        return None
    setup = run.setup
    a, profile, rules, capacity, speculative = _limits(setup)
    if capacity < 1:
        raise InputError(
            f"simulate(): the weights of {setup.model} at {setup.precision} leave no KV cache on "
            f"{setup.tensor_parallel} x {setup.accelerator} under the {profile.name} engine's memory policy"
        )
    # Attention ranks: each rank of a replica schedules its own share of the budget, the cap and the KV cache.
    ranks = max(int(setup.data_parallel), 1)
    rules, capacity = rules.per_rank(), capacity / ranks
    if run.deadline.left() <= 0:
        return None
    arrival, prompt, output, short = _draw(run)
    if run.deadline.left() <= 0:
        return None
    # An overlap scheduler builds iteration k while k - 1 runs: it sees the requests that had arrived when
    # k - 1 started (a request arriving during an iteration waits for one more before its own).
    engine = _engine(setup, (a, profile, rules, capacity, speculative), ranks, run.seed, (prompt, output))
    requests = _Requests(prompt.tolist(), output.tolist(), capacity, rules.kv_block, run.traffic.cached_prompt)
    overhead = profile.request_overhead.m_as("s")
    arrivals = _Arrivals(run, arrival, overhead)
    schedule = run.traffic.replica_schedule
    count = max(int(schedule[1].max()), 1) if schedule is not None else run.replicas
    iterations: list[tuple[float, int]] = []  # heap of (end time, replica or replica of ranks)
    reps = [_ReplicaScheduler(i, engine, requests, arrivals.release, iterations) for i in range(count * ranks)]
    groups = [_RankGroup(g, reps[g * ranks : (g + 1) * ranks], engine, iterations) for g in range(count)]
    router = _Router(run, reps, count, ranks)
    if not arrivals.closed and schedule is None and run.router in ("round_robin", "random") and ranks == 1:
        router.route_up_front(arrival, overhead)
    # The loop stops early enough to leave time for turning the requests and the replicas' series
    # into arrays and a summary (about 1 us per request and 0.1 ms per replica on an idle core, twice
    # that for seeds side by side on a busy machine): the call returns within about its time_limit.
    left = max(run.deadline.left(), 0.0)
    stop_at = run.deadline.end - min(0.8 * left, 2e-6 * arrivals.total + 2e-4 * count * ranks)
    truncated = _run_events(arrivals, router, groups if ranks > 1 else reps, iterations, stop_at, run, progress)
    if progress is not None:
        progress(1.0)
    unfinished = sum(1 for s in requests.state if s not in (_DONE, _DROPPED))
    if unfinished and not truncated:
        truncated = f"{unfinished} requests never finished (the scheduler could not admit them)"
    truncated = "; ".join(part for part in (short, truncated) if part)
    return _result(requests, arrivals, reps, count, capacity, prompt, output, truncated)


def _engine(
    setup: SimulationSetup, limits: tuple, ranks: int, seed: int, lengths: tuple[np.ndarray, np.ndarray]
) -> _Engine:
    """What every scheduler of a seed obeys.

    ``limits`` come from :func:`_limits` (per attention rank); the iterations are priced for the longest of the
    seed's requests (``lengths``: prompts and outputs); the acceptance of drafts is drawn from ``seed``.
    """
    a, profile, rules, capacity, speculative = limits
    prompt, output = lengths
    if setup.step_time is not None:
        table: Any = _FixedStep(setup.step_time.m_as("s"))
    else:
        eff = profile.efficiency_for(a.accelerator)
        longest = float((prompt + output).max()) + 1
        # a rank's iteration is priced as every rank's (``ranks`` times its tokens): the table spans that
        budget = float(max(rules.token_budget, prompt.max())) * ranks
        table = _StepTable(a, eff, int(setup.tensor_parallel), longest, budget, speculative)
    acceptance = None  # speculative decoding: each round's accepted drafts, drawn from the seed
    if speculative.drafter is not None:
        acceptance = _Acceptance(speculative.positions, speculative.tokens, seed + _ACCEPTANCE_SEED)
    return _Engine(rules, capacity, table, setup.step_scale, ranks, acceptance)


def _run_events(
    arrivals: _Arrivals,
    router: _Router,
    units: list[_RankGroup] | list[_ReplicaScheduler],
    iterations: list[tuple[float, int]],
    stop_at: float,
    run: _Run,
    progress: Callable[[float], None] | None,
) -> str:
    """Run the seed's events in time order: arrivals (routed, queued) and iterations' ends (the next starts).

    ``units`` start iterations: the replicas, or with attention ranks the replicas of ranks. Returns ``""``
    when no event is left, or why it stopped early (the call's deadline, ``stop_at``).
    """
    reps, ranks, route = router.reps, router.ranks, router.route
    closed, events, next_at, total = arrivals.closed, arrivals.events, arrivals.next_at, arrivals.total
    preroute = router.routed is not None
    routed, landings, own_next = router.routed or [], router.landings, router.next_landing
    inf = math.inf
    steps = checked = 0
    idle_arrived: list[int] = []  # units that an arrival of this instant found idle
    while True:
        t_arrival = next_at()
        t_iter = iterations[0][0] if iterations else inf
        if t_arrival == inf and t_iter == inf:
            break
        if t_arrival <= t_iter:
            if closed:
                now, req = heapq.heappop(events)
            else:
                now, req = t_arrival, arrivals.next
                arrivals.next = req + 1
            if preroute:
                target = routed[req]
                own_next[target] += 1
            else:
                target = route(now)
            reps[target].arrive(req, now)
            unit = target // ranks
            if not units[unit].in_iteration and unit not in idle_arrived:
                idle_arrived.append(unit)
            # An idle replica starts once every arrival of this instant is in its queue (a burst of
            # simultaneous requests is one batch, not a first prompt alone and the rest in the next).
            if next_at() > now:
                for unit in idle_arrived:
                    units[unit].start_iteration(now)
                idle_arrived.clear()
        else:
            now, index = heapq.heappop(iterations)
            if ranks > 1:
                units[index].next_iteration(now)  # type: ignore[union-attr]
            else:
                rep = reps[index]
                rep.end_iteration(now)
                if rep.n and not rep.waiting and not rep.prefilling:
                    horizon = landings[index][own_next[index]] if preroute else next_at()
                    now, inline = rep.fast_forward(now, horizon)
                    steps += inline
                rep.start_iteration(now)
        steps += 1  # arrivals count too: a burst of a million simultaneous ones is checked as it is routed
        if steps & 4095 == 0 or steps - checked > 4096:
            checked = steps
            if _time.time() > stop_at:
                return run.deadline.stopped()
            if progress is not None:
                progress(arrivals.done / total)
    return ""


def _result(
    requests: _Requests,
    arrivals: _Arrivals,
    reps: list[_ReplicaScheduler],
    count: int,
    capacity: float,
    prompt: np.ndarray,
    output: np.ndarray,
    truncated: str,
) -> dict[str, Any]:
    """The seed's per-request arrays and per-replica series (``busy``: per replica, its busiest rank's)."""
    ranks = len(reps) // count
    return {
        "sent": np.array(arrivals.sent),
        "arrival": np.array(arrivals.sent) + np.array(arrivals.path),
        "prompt": prompt,
        "output": output,
        "first": np.array(requests.first),
        "finish": np.array(requests.finish),
        "started": np.array(requests.started),
        "replica": np.array(requests.replica),
        "stall": np.array(requests.stall),
        "preemptions": np.array(requests.preempted),
        "rounds": np.array(requests.rounds),
        "dropped": np.array([s == _DROPPED for s in requests.state]),
        "ends": [np.array(r.ends) for r in reps],
        "decoded": [np.array(r.decoded, dtype=bool) for r in reps],
        "kv": [np.array(r.kv) for r in reps],
        "batch": [np.array(r.batch) for r in reps],
        "busy": np.array([max(r.busy for r in reps[g * ranks : (g + 1) * ranks]) for g in range(count)]),
        "ranks": ranks,
        "in_system": [np.array(r.population[: len(r.arrivals)]) + np.array(r.arrivals) / 2 for r in reps],
        "starts": [np.array(r.starts[: len(r.arrivals)]) for r in reps],
        "capacity": capacity,
        "truncated": truncated,
    }
