"""One seed: the event loop of continuous-batching replicas behind a router, request by request.

Each replica runs the continuous-batching scheduler of :mod:`calculator.performance` (an
iteration-level loop: a token budget per iteration, chunked prefill where the engine chunks, prefill
mixed into decoding or run alone, admission by free KV cache and a sequence cap, and preemption with
recompute when the cache runs out); every iteration is priced by :mod:`calculator.simulation.steps`.
A router spreads the requests over the replicas with one of the policies of :mod:`calculator.routing`.
A seed's run is plain values (:class:`_Run`) and :func:`_simulate_seed` a module-level function, so
both pickle for a process pool.
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
from ..routing.policies import _pick_replica
from ._common import _Deadline
from .inputs import MAX_KEPT_POINTS, MAX_KEPT_REQUESTS, REQUESTS_PER_SECOND, SimulationSetup, Traffic
from .steps import _FixedStep, _StepTable

if TYPE_CHECKING:
    from ..performance import StepArrays

__all__: list[str] = []


# --------------------------------------------------------------------------------------------
# One seed


_WAIT, _PREFILL, _DECODE, _DONE, _DROPPED = 0, 1, 2, 3, 4


class _Replica:
    __slots__ = (
        "arrivals",
        "arrived",
        "arrived_at_start",
        "batch",
        "busy",
        "dec_kv",
        "decode_count",
        "decoded",
        "ends",
        "finish_heap",
        "in_iteration",
        "index",
        "kv",
        "n",
        "outstanding",
        "outstanding_tokens",
        "pf_kv",
        "population",
        "prefilling",
        "reserved",
        "running",
        "scheduled",
        "scheduled_decodes",
        "starts",
        "waiting",
    )

    def __init__(self, index: int):
        self.index = index
        self.busy = 0.0
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}  # admission order (preemption takes the last)
        self.prefilling: list[int] = []
        self.n = 0  # decoding sequences
        self.dec_kv = 0.0  # KV tokens of the decoding sequences
        self.pf_kv = 0.0  # KV tokens of the partly prefilled ones
        self.reserved = 0.0  # KV the admission policy has promised the running requests
        self.decode_count = 0  # decode iterations run (a decoding request advances one token in each)
        self.finish_heap: list[tuple[int, int]] = []
        self.ends: list[float] = []  # iteration end times
        self.decoded: list[bool] = []  # whether the iteration emitted decode tokens
        self.kv: list[float] = []  # KV tokens in use during the iteration
        self.batch: list[int] = []  # sequences running during the iteration
        self.outstanding = 0
        self.outstanding_tokens = 0
        self.in_iteration = False
        self.scheduled: list[tuple[int, int]] = []  # (request, chunk) of the iteration under way
        self.scheduled_decodes = 0  # decoding sequences in the iteration under way
        self.starts: list[float] = []  # iteration start times
        self.population: list[int] = []  # requests in the replica when the iteration starts
        self.arrived = 0  # requests routed here so far
        self.arrived_at_start = 0
        self.arrivals: list[int] = []  # requests routed here during the iteration


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


def _limits(setup: SimulationSetup) -> tuple[StepArrays, Any, int, int, float]:
    from ..performance import engine_profile, kv_capacity_tokens, step_arrays
    from ..performance._common import _layout, _tp
    from ..registry import load_registry

    registry = load_registry(extra=setup.registry_files)
    ranks = int(setup.data_parallel)
    tp = _tp(registry.model(setup.model), int(setup.tensor_parallel) // ranks, "simulate")
    profile = engine_profile(setup.engine, registry)
    a = step_arrays(
        setup.model, setup.accelerator, setup.precision, setup.kv_precision, engine=profile, registry=registry
    )
    a, _ = _layout(a, tp, ranks, setup.expert_parallel, "simulate", setup.pipeline_parallel)
    budget, seqs = profile.limits(a.memory, a.accelerator)
    budget = int(setup.max_num_tokens or budget) * ranks  # every attention rank schedules its own budget
    seqs = int(setup.max_num_seqs or seqs * ranks)
    capacity = float(kv_capacity_tokens(a, profile, setup.tensor_parallel))
    return a, profile, budget, seqs, capacity


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


def _simulate_seed(run: _Run, progress: Callable[[float], None] | None = None) -> dict[str, Any] | None:
    """Simulate one seed; returns per-request arrays and per-replica series (None: the call's deadline had passed).

    The seed's setup (the registry, the step arrays, drawing the requests, the replicas) counts against the
    call's deadline, which it checks between those stages.
    """
    if run.deadline.left() <= 0:
        return None
    setup, traffic = run.setup, run.traffic
    a, profile, budget, max_seqs, capacity = _limits(setup)
    if capacity < 1:
        raise InputError(
            f"simulate(): the weights of {setup.model} at {setup.precision} leave no KV cache on "
            f"{setup.tensor_parallel} x {setup.accelerator} under the {profile.name} engine's memory policy"
        )
    eff = profile.efficiency_for(a.accelerator)
    # Attention ranks: each rank of a replica schedules its own share of the budget, the cap and the KV cache.
    ranks = max(int(setup.data_parallel), 1)
    budget, max_seqs, capacity = budget // ranks, max(max_seqs // ranks, 1), capacity / ranks
    if run.deadline.left() <= 0:
        return None
    arrival, prompt, output, short = _draw(run)
    if run.deadline.left() <= 0:
        return None
    total = arrival.size
    overhead = profile.request_overhead.m_as("s")
    scale = setup.step_scale
    chunked, mixed, reservation = profile.chunked_prefill, profile.mixed_batching, profile.output_reservation
    # An overlap scheduler builds iteration k while k - 1 runs: it sees the requests that had arrived when
    # k - 1 started (a request arriving during an iteration waits for one more before its own).
    lagged = profile.overlap_scheduler
    if setup.step_time is not None:
        table: Any = _FixedStep(setup.step_time.m_as("s"))
    else:
        table = _StepTable(
            a, eff, int(setup.tensor_parallel), float((prompt + output).max()) + 1, float(max(budget, prompt.max()))
        )
    prompt_l = prompt.tolist()
    output_l = output.tolist()

    # Per-request state.
    state = [_WAIT] * total
    todo = prompt_l[:]  # prompt tokens still to prefill (prompt plus generated after a preemption)
    filled = [0] * total  # prefilled tokens (KV held while prefilling)
    need = [0.0] * total  # KV the admission reserved
    join = [0] * total  # decode_count when the request started decoding
    base = [0] * total  # KV held when it started decoding
    remaining = output_l[:]  # tokens still to emit
    first = [math.nan] * total
    finish = [math.nan] * total
    started = [math.nan] * total  # first scheduled
    queued = [math.inf] * total  # when it reached its replica's waiting queue
    replica_of = [-1] * total
    stall = [0.0] * total
    last_token = [0.0] * total
    preempted = [0] * total

    # Arrivals at the engine (after the request overhead); closed loop releases them as clients free up.
    closed = traffic.clients is not None
    path = [overhead] * total  # each request's path to the engine
    if closed and traffic.request_path_spread:
        share = np.random.default_rng(run.seed + 104_729).uniform(-1.0, 1.0, total) * traffic.request_path_spread
        path = (overhead * (1.0 + share)).tolist()
    if closed:
        clients = min(int(traffic.clients or 0), total)
        pending = deque(range(clients, total))
        sent = [math.nan] * total
        for i in range(clients):
            sent[i] = 0.0
        events: list[tuple[float, int]] = [(path[i], i) for i in range(clients)]
        heapq.heapify(events)
    else:
        sent = arrival.tolist()
        events = []
        pending = deque()
    next_arrival = 0  # open loop: index of the next arrival

    schedule = traffic.replica_schedule
    if schedule is not None:
        count = max(int(schedule[1].max()), 1)
        s_times, s_ready = schedule[0].tolist(), schedule[1].tolist()
    else:
        count = run.replicas
    reps = [_Replica(i) for i in range(count * ranks)]  # replica g's ranks: reps[g * ranks:(g + 1) * ranks]
    group_busy = [False] * count
    rng = np.random.default_rng(run.seed + 7_919)
    router = run.router
    rr = 0
    iterations: list[tuple[float, int]] = []  # heap of (end time, replica)
    # Round robin and random dispatch of an open-loop stream do not depend on the replicas' state:
    # route every request up front, so each replica knows when its own next request lands.
    preroute = not closed and schedule is None and router in ("round_robin", "random") and ranks == 1
    if preroute:
        targets = np.arange(total) % count if router == "round_robin" else rng.integers(count, size=total)
        routed = targets.tolist()
        order = np.argsort(targets, kind="stable")  # each replica's requests in arrival order, grouped
        bounds = np.searchsorted(targets[order], np.arange(count + 1)).tolist()
        landing = (arrival[order] + overhead).tolist()
        own_arrivals = [[*landing[bounds[r] : bounds[r + 1]], math.inf] for r in range(count)]
        own_next = [0] * count
    too_big = [p + o > capacity for p, o in zip(prompt_l, output_l, strict=True)]
    done = 0
    truncated = ""
    # The loop stops early enough to leave time for turning the requests and the replicas' series
    # into arrays and a summary (about 1 us per request and 0.1 ms per replica on an idle core, twice
    # that for seeds side by side on a busy machine): the call returns within about its time_limit.
    left = max(run.deadline.left(), 0.0)
    stop_at = run.deadline.end - min(0.8 * left, 2e-6 * total + 2e-4 * count * ranks)
    steps = 0

    def ready_replicas(now: float) -> int:
        if schedule is None:
            return count
        k = int(np.searchsorted(s_times, now, side="right")) - 1
        return s_ready[k] if k >= 0 else s_ready[0]

    def route(req: int, now: float) -> int:
        nonlocal rr
        live = ready_replicas(now)
        if live <= 0:
            live = 1  # no replica ready: the request waits on the first one
        if ranks == 1:
            target = _pick_replica(
                router, rr, live, rng, lambda k: reps[k].outstanding, lambda k: reps[k].outstanding_tokens
            )
            rr += router == "round_robin"
            return target
        members = range(ranks)
        group = _pick_replica(
            router, rr, live, rng,
            lambda k: sum(reps[k * ranks + i].outstanding for i in members),
            lambda k: sum(reps[k * ranks + i].outstanding_tokens for i in members),
        )  # fmt: skip
        rr += router == "round_robin"
        # Inside the replica the engine sends a request to its least loaded rank.
        return min((reps[group * ranks + i].outstanding, group * ranks + i) for i in members)[1]

    def start_group(group: int, now: float) -> None:
        """One iteration of a replica's attention ranks together, each on its own work; all wait for the slowest.

        The MoE layers run every rank's tokens at once, so a rank cannot start its next iteration alone.
        """
        members = reps[group * ranks : (group + 1) * ranks]
        loads = [start_iteration(rep, now, grouped=True) for rep in members]
        working = [load for load in loads if load is not None]
        group_busy[group] = bool(working)
        if not working:
            return
        # Per layer each rank runs its own attention and dense work (the busiest sets the pace), then the
        # experts and their exchange run every rank's tokens together: the busiest rank's time without its
        # share of that (priced as if every rank carried its load), plus that work at the replica's tokens;
        # the ranks' schedulers run side by side.
        own = max(gpu - table.together(tokens * ranks, tokens * ranks, prefill) for gpu, tokens, _, prefill in working)
        busiest = max(tokens for _, tokens, *_ in working)
        prompts = any(prefill for *_, prefill in working)
        together = own + table.together(sum(tokens for _, tokens, *_ in working), busiest * ranks, prompts)
        longest = table.total(together, max(sequences for _, _, sequences, _ in working)) * scale
        end = now + longest
        for rep, load in zip(members, loads, strict=True):
            if load is not None:
                _commit(rep, now, end, longest)
        heapq.heappush(iterations, (end, group))

    def end_group(group: int, now: float) -> None:
        for rep in reps[group * ranks : (group + 1) * ranks]:
            if rep.in_iteration:
                end_iteration(rep, now)
                rep.in_iteration = False
        start_group(group, now)

    def _commit(rep: _Replica, now: float, end: float, t: float) -> None:
        rep.busy += t
        rep.in_iteration = True
        rep.ends.append(end)
        rep.starts.append(now)
        rep.population.append(len(rep.running) + len(rep.waiting))
        rep.arrived_at_start = rep.arrived
        rep.decoded.append(rep.scheduled_decodes > 0)
        rep.kv.append(rep.dec_kv + rep.pf_kv)
        rep.batch.append(len(rep.running))

    def start_iteration(rep: _Replica, now: float, grouped: bool = False) -> tuple[float, float, int, bool] | None:
        """Schedule the next iteration of ``rep`` at ``now`` (if it has work) and push its end.

        ``grouped``: ``rep`` is one attention rank of a replica. Its work is priced as if every rank carried
        it (the step model's busiest rank) and returned, ``(GPU seconds, tokens, sequences, prefilling)``, for
        :func:`start_group` to combine and commit.
        """
        waiting, running = rep.waiting, rep.running
        # What the scheduler sees: with an overlap scheduler running back to back (an iteration ended now and
        # work remains), the requests that had arrived when the iteration that just ended started.
        busy = lagged and rep.ends and rep.ends[-1] == now and bool(rep.n or rep.prefilling)
        cutoff = rep.starts[-1] if busy else now
        # Prefill-first (no mixing): a prefill batch runs alone when a prompt can be scheduled.
        prefill_only = not mixed and bool(
            rep.prefilling
            or (waiting and queued[waiting[0]] <= cutoff and len(running) < max_seqs and _admissible(rep, waiting[0]))
        )
        preempting = False
        if not prefill_only:
            # Decodes first: each needs one more KV slot; preempt the latest admitted until they fit.
            while rep.n and rep.dec_kv + rep.pf_kv + rep.n > capacity:
                _preempt(rep, now)
                preempting = True
        n = rep.n
        scheduled = rep.scheduled
        scheduled.clear()
        tokens = 0
        pairs = 0.0
        room = budget - n if mixed else (budget if prefill_only else 0)
        # Continue partly prefilled prompts (admission order), then admit waiting ones.
        for req in rep.prefilling:
            if room <= 0:
                break
            chunk = todo[req] if not chunked else min(todo[req], room)
            if not chunked and chunk > room and tokens > 0:
                break
            scheduled.append((req, chunk))
            pairs += chunk * filled[req] + chunk * (chunk + 1) / 2
            tokens += chunk
            room -= chunk
        while waiting and room > 0 and len(running) < max_seqs and not preempting:
            req = waiting[0]
            if queued[req] > cutoff:
                break
            if too_big[req]:
                waiting.popleft()
                state[req] = _DROPPED
                rep.outstanding -= 1
                rep.outstanding_tokens -= prompt_l[req] + output_l[req]
                release(req, now)
                continue
            if not _admissible(rep, req, tokens + (0 if prefill_only else n)):
                break
            chunk = todo[req] if not chunked else min(todo[req], room)
            if not chunked and chunk > room and tokens > 0:
                break
            waiting.popleft()
            running[req] = None
            rep.prefilling.append(req)
            state[req] = _PREFILL
            need[req] = todo[req] + reservation * remaining[req]
            rep.reserved += need[req]
            if started[req] != started[req]:
                started[req] = now
            scheduled.append((req, chunk))
            pairs += chunk * chunk / 2 + chunk / 2
            tokens += chunk
            room -= chunk
        decodes = 0 if prefill_only else n
        if decodes == 0 and tokens == 0:
            rep.in_iteration = False
            return None
        for req, chunk in scheduled:
            filled[req] += chunk
            rep.pf_kv += chunk
        if decodes:
            rep.dec_kv += decodes
        r = len(scheduled)
        k = ranks if grouped else 1  # a rank's load on every rank: the step model prices its busiest rank
        gpu = table.decode(decodes * k, rep.dec_kv / decodes if decodes else 0.0)
        if tokens:
            prior = max((pairs - tokens * (tokens / r + 1) / 2) / tokens, 0.0)
            gpu += table.prefill(decodes * k, tokens * k, r * k, prior)
        rep.scheduled_decodes = decodes
        if grouped:
            return gpu, float(decodes + tokens), decodes + r, tokens > 0
        t = table.total(gpu, decodes + r) * scale
        end = now + t
        _commit(rep, now, end, t)
        heapq.heappush(iterations, (end, rep.index))
        return None

    def _admissible(rep: _Replica, req: int, allocated: float = 0.0) -> bool:
        """Whether ``req`` fits beside what the cache holds and what this iteration already allocated.

        ``allocated``: the running decodes' next slots and the chunks scheduled before it (vLLM allocates
        each request's blocks when it schedules it).
        """
        want = todo[req] + reservation * remaining[req]
        used = rep.dec_kv + rep.pf_kv + allocated
        return max(rep.reserved, used) + want <= capacity or not rep.running

    def _preempt(rep: _Replica, now: float) -> None:
        req, _ = rep.running.popitem()
        rep.reserved -= need[req]
        if state[req] == _DECODE:
            emitted = rep.decode_count - join[req]
            rep.dec_kv -= base[req] + emitted
            rep.n -= 1
            remaining[req] -= emitted
            last_token[req] = now
            todo[req] = prompt_l[req] + output_l[req] - remaining[req]  # recompute prompt and output so far
        else:
            rep.prefilling.remove(req)
            rep.pf_kv -= filled[req]
            todo[req] += filled[req]
        filled[req] = 0
        state[req] = _WAIT
        preempted[req] += 1
        rep.waiting.appendleft(req)

    def release(req: int, now: float) -> None:
        """A request left the system: in closed loop its client sends the next one."""
        nonlocal done
        done += 1
        if closed and pending:
            nxt = pending.popleft()
            sent[nxt] = now
            heapq.heappush(events, (now + path[nxt], nxt))

    def end_iteration(rep: _Replica, now: float) -> None:
        k = len(rep.ends) - 1
        rep.arrivals.append(rep.arrived - rep.arrived_at_start)
        if rep.decoded[k]:
            rep.decode_count += 1
            heap = rep.finish_heap
            while heap and heap[0][0] <= rep.decode_count:
                _, req = heapq.heappop(heap)
                if state[req] != _DECODE or join[req] + remaining[req] != rep.decode_count:
                    continue  # preempted since (a stale entry)
                held = base[req] + remaining[req]
                rep.dec_kv -= held
                rep.n -= 1
                rep.reserved -= need[req]
                del rep.running[req]
                state[req] = _DONE
                remaining[req] = 0
                finish[req] = now
                rep.outstanding -= 1
                rep.outstanding_tokens -= prompt_l[req] + output_l[req]
                release(req, now)
        for req, _chunk in rep.scheduled:
            todo[req] -= _chunk
            if todo[req] > 0 or state[req] != _PREFILL:
                continue
            # Prompt done: the iteration's end emits a token.
            rep.prefilling.remove(req)
            rep.pf_kv -= filled[req]
            if first[req] != first[req]:
                first[req] = now
                remaining[req] -= 1
            else:
                stall[req] = max(stall[req], now - last_token[req])
                remaining[req] -= 1
            if remaining[req] <= 0:
                del rep.running[req]
                rep.reserved -= need[req]
                state[req] = _DONE
                finish[req] = now
                rep.outstanding -= 1
                rep.outstanding_tokens -= prompt_l[req] + output_l[req]
                release(req, now)
                continue
            state[req] = _DECODE
            base[req] = filled[req]
            join[req] = rep.decode_count
            rep.dec_kv += filled[req]
            rep.n += 1
            heapq.heappush(rep.finish_heap, (rep.decode_count + remaining[req], req))
        rep.scheduled.clear()

    def fast_forward(rep: _Replica, now: float, horizon: float) -> tuple[float, int]:
        """Run plain decode iterations inline while nothing can change the replica's state.

        Only the running decodes, no prompt waiting: up to (not including) the iteration in which
        a request finishes, the KV cache would need a preemption, or the next arrival could land
        (that iteration and everything after go through the event loop). Returns the new time and
        the iterations run.
        """
        n = rep.n
        heap = rep.finish_heap
        limit = (heap[0][0] if heap else rep.decode_count + 1) - rep.decode_count - 1
        limit = min(limit, int((capacity - rep.dec_kv - rep.pf_kv) // n) - 1)
        if limit <= 0:
            return now, 0
        running = len(rep.running)
        decode = table.decode
        step, per_sequence, overlap = table.fixed
        fixed = step + per_sequence * n
        ends, starts, kv = rep.ends, rep.starts, rep.kv
        dec_kv, pf_kv, busy = rep.dec_kv, rep.pf_kv, rep.busy
        done_here = 0
        while done_here < limit:
            gpu = decode(n, (dec_kv + n) / n)
            t = (max(fixed, gpu) if overlap else fixed + gpu) * scale
            end = now + t
            if end >= horizon:
                break
            dec_kv += n
            starts.append(now)
            ends.append(end)
            kv.append(dec_kv + pf_kv)
            busy += t
            now = end
            done_here += 1
        if done_here:
            rep.dec_kv, rep.busy = dec_kv, busy
            rep.decode_count += done_here
            rep.decoded.extend([True] * done_here)
            rep.batch.extend([running] * done_here)
            rep.population.extend([running] * done_here)
            rep.arrivals.extend([0] * done_here)
        return now, done_here

    inf = math.inf
    checked = 0
    idle_arrived: list[int] = []  # replicas (attention groups) that an arrival of this instant found idle

    def next_arrival_at() -> float:
        if closed:
            return events[0][0] if events else inf
        return arrival[next_arrival] + overhead if next_arrival < total else inf

    while True:
        t_arrival = next_arrival_at()
        t_iter = iterations[0][0] if iterations else inf
        if t_arrival == inf and t_iter == inf:
            break
        if t_arrival <= t_iter:
            if closed:
                now, req = heapq.heappop(events)
            else:
                now, req = t_arrival, next_arrival
                next_arrival += 1
            if preroute:
                target = routed[req]
                own_next[target] += 1
            else:
                target = route(req, now)
            rep = reps[target]
            replica_of[req] = target
            rep.outstanding += 1
            rep.outstanding_tokens += prompt_l[req] + output_l[req]
            rep.arrived += 1
            rep.waiting.append(req)
            queued[req] = now
            unit = target // ranks if ranks > 1 else target
            idle = not group_busy[unit] if ranks > 1 else not rep.in_iteration
            if idle and unit not in idle_arrived:
                idle_arrived.append(unit)
            # An idle replica starts once every arrival of this instant is in its queue (a burst of
            # simultaneous requests is one batch, not a first prompt alone and the rest in the next).
            if next_arrival_at() > now:
                for unit in idle_arrived:
                    if ranks > 1:
                        start_group(unit, now)
                    else:
                        start_iteration(reps[unit], now)
                idle_arrived.clear()
        else:
            now, index = heapq.heappop(iterations)
            if ranks > 1:
                end_group(index, now)
            else:
                rep = reps[index]
                end_iteration(rep, now)
                if rep.n and not rep.waiting and not rep.prefilling:
                    horizon = own_arrivals[index][own_next[index]] if preroute else next_arrival_at()
                    now, inline = fast_forward(rep, now, horizon)
                    steps += inline
                start_iteration(rep, now)
        steps += 1  # arrivals count too: a burst of a million simultaneous ones is checked as it is routed
        if steps & 4095 == 0 or steps - checked > 4096:
            checked = steps
            if _time.time() > stop_at:
                truncated = run.deadline.stopped()
                break
            if progress is not None:
                progress(done / total)
    if progress is not None:
        progress(1.0)
    unfinished = sum(1 for s in state if s not in (_DONE, _DROPPED))
    if unfinished and not truncated:
        truncated = f"{unfinished} requests never finished (the scheduler could not admit them)"
    truncated = "; ".join(part for part in (short, truncated) if part)
    return {
        "sent": np.array(sent),
        "arrival": np.array(sent) + np.array(path),
        "prompt": prompt,
        "output": output,
        "first": np.array(first),
        "finish": np.array(finish),
        "started": np.array(started),
        "replica": np.array(replica_of),
        "stall": np.array(stall),
        "preemptions": np.array(preempted),
        "dropped": np.array([s == _DROPPED for s in state]),
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
