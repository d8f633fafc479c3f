"""One replica's continuous-batching scheduler (or one attention rank's), iteration by iteration.

:class:`_ReplicaScheduler` owns a replica's waiting queue, its running and partly prefilled requests
and its KV tokens, and builds each iteration as the engine does: a token budget per iteration, chunked
prefill where the engine chunks, prefill mixed into decoding or run alone, admission by free KV cache
and a sequence cap, and preemption with recompute when the cache runs out. Every iteration is priced by
:mod:`calculator.simulation.steps`. The requests' own state (:class:`_Requests`) is shared by every
replica's scheduler of a seed: lists indexed by request, which the event loop of
:mod:`calculator.simulation.seed` turns into the seed's result.

The methods bind what their loops read to locals: attribute lookups on every access would cost the event
loop its speed (``benchmarks/bench_simulation.py`` times it).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .speculation import _RoundTokens

if TYPE_CHECKING:
    from ..performance.scheduler import SchedulerRules
    from .speculation import _Acceptance

__all__: list[str] = []

_WAIT, _PREFILL, _DECODE, _DONE, _DROPPED = 0, 1, 2, 3, 4
#: A request stopped before it finished: its client cancelled it, or its replica failed (``simulation.fleet``).
_ABORTED = 5

#: What an attention rank returns to its replica from :meth:`_ReplicaScheduler.start_iteration`:
#: (GPU seconds, tokens, sequences, whether a prompt is in the iteration, the drafting's seconds).
_Load = tuple[float, float, int, bool, float]


class _Requests:
    """Every request's state in one seed: lists indexed by request, shared by the replicas' schedulers."""

    __slots__ = (
        "base",
        "block",
        "capacity",
        "due",
        "filled",
        "finish",
        "first",
        "held",
        "join",
        "last_token",
        "need",
        "output",
        "preempted",
        "prompt",
        "queued",
        "remaining",
        "replica",
        "rounds",
        "slack",
        "stall",
        "started",
        "state",
        "todo",
        "too_big",
    )

    def __init__(self, prompt: list[int], output: list[int], capacity: float, block: int = 1, cached: bool = False):
        total = len(prompt)
        self.prompt, self.output = prompt, output
        self.capacity, self.block = capacity, block
        self.state = [_WAIT] * total
        # ``cached``: each prompt arrives in the KV cache but its last token (a disaggregated decode pool's, sent by
        # the prefill pool), held from admission on; the replica computes that one token.
        self.held = [p - 1 for p in prompt] if cached else [0] * total
        self.todo = [p - h for p, h in zip(prompt, self.held, strict=True)]  # prompt tokens still to prefill
        self.filled = [0] * total  # prefilled tokens (KV held while prefilling)
        self.need = [0.0] * total  # KV the admission reserved
        self.join = [0] * total  # decode_count when the request started decoding
        self.due = [0] * total  # decode_count when it emits its last token
        self.rounds = [0] * total  # decode iterations that emitted its tokens (after a prompt's own)
        self.base = [0] * total  # KV held when it started decoding
        self.remaining = output[:]  # tokens still to emit
        self.first = [math.nan] * total
        self.finish = [math.nan] * total
        self.started = [math.nan] * total  # first scheduled
        self.queued = [math.inf] * total  # when it reached its replica's waiting queue
        self.replica = [-1] * total
        self.stall = [0.0] * total
        self.last_token = [0.0] * total
        self.preempted = [0] * total
        self.slack = [0] * total  # the unused tokens of its last KV block (blocks of ``block`` tokens)
        # never fits the cache, in whole blocks
        self.too_big = [-(-(p + o) // block) * block > capacity for p, o in zip(prompt, output, strict=True)]

    def add(self, prompt: int, output: int) -> int:
        """A new request (a client's retry, in ``simulation.fleet``) of these lengths; returns its index."""
        self.prompt.append(prompt)
        self.output.append(output)
        for name, value in _NEW_REQUEST.items():
            getattr(self, name).append(value)
        self.todo.append(prompt)
        self.remaining.append(output)
        self.too_big.append(-(-(prompt + output) // self.block) * self.block > self.capacity)
        return len(self.prompt) - 1


#: A new request's entries in :class:`_Requests`' lists (besides its lengths and what they decide).
_NEW_REQUEST: dict[str, Any] = {
    "state": _WAIT, "filled": 0, "need": 0.0, "join": 0, "due": 0, "rounds": 0, "base": 0, "first": math.nan,
    "finish": math.nan, "started": math.nan, "queued": math.inf, "replica": -1, "stall": 0.0, "last_token": 0.0,
    "preempted": 0, "slack": 0, "held": 0,
}  # fmt: skip


class _Engine(NamedTuple):
    """What every scheduler of a seed obeys (per attention rank) and how it prices an iteration."""

    rules: SchedulerRules  # one attention rank's scheduling rules (performance.scheduler, shared with the models)
    capacity: float  # KV tokens
    table: Any  # iteration times (steps._StepTable or steps._FixedStep)
    scale: float  # SimulationSetup.step_scale
    ranks: int  # attention ranks of a replica
    acceptance: _Acceptance | None = None  # speculative decoding: the seed's acceptance draws (None: plain decoding)


class _ReplicaScheduler:
    """One replica's (or attention rank's) scheduler: its queue, its running requests, its iterations.

    ``release(req, now)`` is called when a request leaves the system (finished or dropped);
    ``iterations`` is the event loop's heap of (end time, replica) where an iteration's end goes.
    The series (``starts``, ``ends``, ``decoded``, ``kv``, ``batch``, ``population``, ``arrivals``)
    hold one entry per iteration for the seed's result.
    """

    __slots__ = (
        "arrivals",
        "arrived",
        "arrived_at_start",
        "batch",
        "busy",
        "capacity",
        "chunked",
        "dec_kv",
        "decode_count",
        "decoded",
        "ends",
        "finish_heap",
        "in_iteration",
        "index",
        "iterations",
        "kv",
        "lagged",
        "max_seqs",
        "mixed",
        "n",
        "outstanding",
        "outstanding_tokens",
        "passing",
        "pf_kv",
        "population",
        "prefilling",
        "ranks",
        "release",
        "requests",
        "reserved",
        "rules",
        "running",
        "saved",
        "scale",
        "scheduled",
        "scheduled_decodes",
        "slack",
        "spec",
        "starts",
        "table",
        "verified",
        "waiting",
    )

    def __init__(
        self,
        index: int,
        engine: _Engine,
        requests: _Requests,
        release: Callable[[int, float], None],
        iterations: list[tuple[float, int]],
    ):
        self.index = index
        rules = self.rules = engine.rules
        self.max_seqs, self.capacity = rules.max_sequences, engine.capacity
        self.chunked, self.mixed, self.lagged = rules.chunked, rules.mixed, rules.overlap
        self.table, self.scale, self.ranks = engine.table, engine.scale, engine.ranks
        # speculative decoding: each decoding sequence's tokens a round, and the tokens it verifies (k + 1)
        self.spec = None if engine.acceptance is None else _RoundTokens(engine.acceptance)
        self.verified = 1 if engine.acceptance is None else engine.acceptance.alphas.size + 1
        self.requests, self.release, self.iterations = requests, release, iterations
        self.busy = 0.0
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}  # admission order (preemption takes the last)
        self.prefilling: list[int] = []
        self.n = 0  # decoding sequences
        self.dec_kv = 0.0  # KV tokens of the decoding sequences
        self.pf_kv = 0.0  # KV tokens of the partly prefilled ones
        # Tokens of the held sequences' last KV blocks left unused (whole blocks, rules.kv_block): a prompt's,
        # kept while it decodes (decoding grows the KV a token at a time: on average the blocks it fills), less
        # what sliding-window layers do not keep of the prompt, plus a hybrid's fixed state (rules.kv_tokens)
        self.slack: float = 0
        # what the sliding-window layers do not keep of the decoded tokens: share x tokens decoded (exact for
        # prompts at least a window long)
        self.saved: float = 0
        self.reserved = 0.0  # KV the admission policy has promised the running requests
        self.decode_count = 0  # decode iterations run (a decoding request advances a token, or a round's, in each)
        self.finish_heap: list[tuple[int, int]] = []
        self.ends: list[float] = []  # iteration end times
        self.decoded: list[bool] = []  # whether the iteration emitted decode tokens
        self.kv: list[float] = []  # KV tokens in use during the iteration
        self.batch: list[int] = []  # sequences running during the iteration
        self.outstanding = 0  # requests routed here and not yet gone
        self.outstanding_tokens = 0  # their prompt and output tokens
        self.in_iteration = False
        self.scheduled: list[tuple[int, int]] = []  # (request, chunk) of the iteration under way
        self.scheduled_decodes = 0  # decoding sequences in the iteration under way
        self.passing = 0.0  # what the iteration's prompts' first tokens wait beyond its end (pipeline stages)
        self.starts: list[float] = []  # iteration start times
        self.population: list[int] = []  # requests in the replica when the iteration starts
        self.arrived = 0  # requests routed here so far
        self.arrived_at_start = 0
        self.arrivals: list[int] = []  # requests routed here during the iteration

    # ---- requests in and out

    def arrive(self, req: int, now: float) -> None:
        """The router sent ``req`` here at ``now``: it joins the waiting queue."""
        requests = self.requests
        requests.replica[req] = self.index
        self.outstanding += 1
        self.outstanding_tokens += requests.prompt[req] + requests.output[req]
        self.arrived += 1
        self.waiting.append(req)
        requests.queued[req] = now

    def _leave(self, req: int, now: float) -> None:
        """``req`` finished or was dropped: it no longer loads this replica."""
        self.outstanding -= 1
        self.outstanding_tokens -= self.requests.prompt[req] + self.requests.output[req]
        self.release(req, now)

    # ---- the scheduler's rules

    def room(self, decodes: int, prefill_only: bool) -> int:
        """Prompt tokens an iteration can take beside ``decodes`` running decodes (``prefill_only``: a prefill batch).

        The engine's rule, the one the predictor and the sizer read too
        (:meth:`calculator.performance.scheduler.SchedulerRules.room`): ``T - n`` for a mixing engine, the whole
        budget for a prefill-first engine's prefill batch; a prefill-first engine's decode iteration takes none.
        """
        return self.rules.room(decodes) if self.mixed or prefill_only else 0

    def admissible(self, req: int, allocated: float = 0.0) -> bool:
        """Whether ``req`` fits beside what the cache holds and what this iteration already allocated.

        ``allocated``: the running decodes' next slots and the chunks scheduled before it (vLLM allocates
        each request's blocks when it schedules it).
        """
        requests = self.requests
        want = self.rules.admission_tokens(requests.todo[req] + requests.held[req], requests.remaining[req])
        used = self.dec_kv + self.pf_kv + self.slack - self.saved + allocated
        return max(self.reserved, used) + want <= self.capacity or not self.running

    def preempt(self, now: float) -> None:
        """Preempt the latest admitted request: it frees its KV and waits at the head of the queue to recompute."""
        req = next(reversed(self.running))
        self._evict(req, now)
        self.requests.state[req] = _WAIT
        self.requests.preempted[req] += 1
        self.waiting.appendleft(req)

    def abort(self, req: int, now: float) -> None:
        """Stop ``req`` (its client cancelled it): out of the queue or its KV freed, between iterations.

        The fleet's event loop (``simulation.fleet``) aborts a running request once the replica's iteration ends.
        """
        requests = self.requests
        if requests.state[req] == _WAIT:
            self.waiting.remove(req)
        else:
            self._evict(req, now)
        requests.state[req] = _ABORTED
        self._leave(req, now)

    def _evict(self, req: int, now: float) -> None:
        """``req`` leaves the running set: its KV and reservation are freed, its progress kept for a recompute."""
        requests = self.requests
        del self.running[req]
        self.reserved -= requests.need[req]
        self.slack -= requests.slack[req]
        requests.slack[req] = 0
        if requests.state[req] == _DECODE:
            ran = self.decode_count - requests.join[req]
            requests.rounds[req] += ran
            emitted = ran if self.spec is None else self.spec.leave(req, self.decode_count)
            self.dec_kv -= requests.base[req] + emitted
            if self.rules.window_share:
                self.saved -= self.rules.window_share * emitted
            self.n -= 1
            requests.remaining[req] -= emitted
            requests.last_token[req] = now
            # recompute prompt and output so far
            requests.todo[req] = requests.prompt[req] + requests.output[req] - requests.remaining[req]
        else:
            self.prefilling.remove(req)
            self.pf_kv -= requests.filled[req]
            requests.todo[req] += requests.filled[req]
        requests.filled[req] = 0

    # ---- one iteration

    def start_iteration(self, now: float, grouped: bool = False) -> _Load | None:
        """Schedule the next iteration at ``now`` (if there is work) and push its end.

        ``grouped``: this is one attention rank of a replica. Its work is priced as if every rank carried
        it (the step model's busiest rank) and returned, ``(GPU seconds, tokens, sequences, prefilling)``,
        for the replica (``seed._RankGroup``) to combine and :meth:`commit`.
        """
        waiting = self.waiting
        # What the scheduler sees: with an overlap scheduler running back to back (an iteration ended now and
        # work remains), the requests that had arrived when the iteration that just ended started.
        lagging = self.lagged and self.ends and self.ends[-1] == now and bool(self.n or self.prefilling)
        cutoff = self.starts[-1] if lagging else now
        # Prefill-first (no mixing): a prefill batch runs alone when a prompt can be scheduled.
        prefill_only = not self.mixed and bool(
            self.prefilling
            or (
                waiting
                and self.requests.queued[waiting[0]] <= cutoff
                and len(self.running) < self.max_seqs
                and self.admissible(waiting[0])
            )
        )
        preempting = False
        if not prefill_only:
            # Decodes first: each needs KV slots for its tokens (one, or its round's); preempt the latest admitted
            # until they fit.
            while self.n and self.dec_kv + self.pf_kv + self.slack - self.saved + self._next_tokens() > self.capacity:
                self.preempt(now)
                preempting = True
        decodes = 0 if prefill_only else self.n
        grown = self._next_tokens() if decodes else 0
        self.scheduled.clear()
        tokens, pairs = 0, 0.0
        if waiting or self.prefilling:
            tokens, pairs = self._schedule_prompts(now, cutoff, (decodes, grown), prefill_only, preempting)
        if decodes == 0 and tokens == 0:
            self.in_iteration = False
            return None
        return self._price(now, (decodes, grown), tokens, pairs, grouped)

    def _next_tokens(self) -> int:
        """The tokens the decoding sequences add in the next decode iteration: one each, or their round's."""
        return self.n if self.spec is None else self.spec.at(self.decode_count + 1)

    def _schedule_prompts(
        self, now: float, cutoff: float, decoding: tuple[int, int], prefill_only: bool, preempting: bool
    ) -> tuple[int, float]:
        """Fill the empty :attr:`scheduled` with prompt chunks: partly prefilled prompts, then admitted waiting ones.

        ``decoding``: the decoding sequences and the KV tokens they add. Returns the prompt tokens and the sum over
        them of the tokens each attends to (``pairs``). A request queued after ``cutoff`` is not seen yet; one that
        can never fit the cache is dropped.
        """
        decodes, grown = decoding
        requests = self.requests
        todo, filled, queued = requests.todo, requests.filled, requests.queued
        waiting, running, scheduled = self.waiting, self.running, self.scheduled
        chunked, max_seqs = self.chunked, self.max_seqs
        tokens = 0
        pairs = 0.0
        room = self.room(decodes, prefill_only)
        # Continue partly prefilled prompts (admission order), then admit waiting ones.
        for req in self.prefilling:
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
            if requests.too_big[req]:
                waiting.popleft()
                requests.state[req] = _DROPPED
                self._leave(req, now)
                continue
            if not self.admissible(req, tokens + grown):
                break
            chunk = todo[req] if not chunked else min(todo[req], room)
            if not chunked and chunk > room and tokens > 0:
                break
            waiting.popleft()
            running[req] = None
            self.prefilling.append(req)
            requests.state[req] = _PREFILL
            held = requests.held[req]
            need = requests.need[req] = self.rules.admission_tokens(todo[req] + held, requests.remaining[req])
            self.reserved += need
            if requests.started[req] != requests.started[req]:
                requests.started[req] = now
            if held:  # a cached prompt's KV, in the cache from admission on
                filled[req] += held
                self.pf_kv += held
                requests.held[req] = 0
            scheduled.append((req, chunk))
            pairs += chunk * held + chunk * chunk / 2 + chunk / 2
            tokens += chunk
            room -= chunk
        return tokens, pairs

    def _price(self, now: float, decoding: tuple[int, int], tokens: int, pairs: float, grouped: bool) -> _Load | None:
        """Allocate the scheduled chunks and the decodes' slots, price the iteration and (alone) commit it.

        ``decoding``: the decoding sequences and the KV tokens they add (one each, or their round's).
        """
        decodes, grown = decoding
        filled, slack = self.requests.filled, self.requests.slack
        scheduled = self.scheduled
        rules = self.rules
        block, share = rules.kv_block, rules.window_share
        for req, chunk in scheduled:
            filled[req] += chunk
            self.pf_kv += chunk
            if block > 1 or share or rules.state_tokens:  # whole blocks, windowed layers capped, a fixed state
                kept = rules.kv_tokens(filled[req])
                unused = -kept % block + kept - filled[req]
                self.slack += unused - slack[req]
                slack[req] = unused
        if decodes:
            self.dec_kv += grown
            if share:
                self.saved += share * grown
        r = len(scheduled)
        k = self.ranks if grouped else 1  # a rank's load on every rank: the step model prices its busiest rank
        table = self.table
        context = self.dec_kv / decodes if decodes else 0.0
        gpu = table.decode(decodes * k, context)
        drafting = table.drafting(decodes * k, context) if decodes and self.spec is not None else 0.0
        if tokens:
            prior = max((pairs - tokens * (tokens / r + 1) / 2) / tokens, 0.0)
            gpu += table.prefill(decodes * k, tokens * k, r * k, prior)
            self.passing = table.pass_beyond(decodes * k, tokens * k, r * k, prior) * self.scale
        self.scheduled_decodes = decodes
        if grouped:
            return gpu, float(decodes * self.verified + tokens), decodes + r, tokens > 0, drafting
        t = (table.total(gpu, decodes + r) + drafting) * self.scale
        end = now + t
        self.commit(now, end, t)
        heapq.heappush(self.iterations, (end, self.index))
        return None

    def commit(self, now: float, end: float, t: float) -> None:
        """The iteration runs from ``now`` to ``end`` (``t`` seconds): record it in the series."""
        self.busy += t
        self.in_iteration = True
        self.ends.append(end)
        self.starts.append(now)
        self.population.append(len(self.running) + len(self.waiting))
        self.arrived_at_start = self.arrived
        self.decoded.append(self.scheduled_decodes > 0)
        self.kv.append(self.dec_kv + self.pf_kv + self.slack - self.saved)
        self.batch.append(len(self.running))

    def end_iteration(self, now: float) -> None:
        """The iteration under way ended at ``now``: decodes advance (some finish), prompt chunks land."""
        self.arrivals.append(self.arrived - self.arrived_at_start)
        if self.decoded[-1]:
            self.decode_count += 1
            heap = self.finish_heap
            if heap and heap[0][0] <= self.decode_count:
                self._finish_decodes(now)
        if self.scheduled:
            self._land_prompts(now)

    def _finish_decodes(self, now: float) -> None:
        """Decoding requests that emitted their last token in the iteration that ended at ``now`` leave."""
        decode_count = self.decode_count
        requests = self.requests
        state, due, remaining = requests.state, requests.due, requests.remaining
        heap = self.finish_heap
        while heap and heap[0][0] <= decode_count:
            _, req = heapq.heappop(heap)
            if state[req] != _DECODE or due[req] != decode_count:
                continue  # preempted since (a stale entry)
            requests.rounds[req] += decode_count - requests.join[req]
            if self.spec is not None:
                self.spec.leave(req, decode_count)
            held = requests.base[req] + remaining[req]
            self.dec_kv -= held
            if self.rules.window_share:
                self.saved -= self.rules.window_share * remaining[req]
            self.n -= 1
            self.reserved -= requests.need[req]
            self.slack -= requests.slack[req]
            requests.slack[req] = 0
            del self.running[req]
            state[req] = _DONE
            remaining[req] = 0
            requests.finish[req] = now
            self._leave(req, now)

    def _land_prompts(self, now: float) -> None:
        """The iteration's prompt chunks are in the cache: a prompt done emits its first token (or leaves)."""
        requests = self.requests
        todo, state, filled, remaining = requests.todo, requests.state, requests.filled, requests.remaining
        for req, chunk in self.scheduled:
            todo[req] -= chunk
            if todo[req] > 0 or state[req] != _PREFILL:
                continue
            # Prompt done: the iteration's end emits a token.
            self.prefilling.remove(req)
            self.pf_kv -= filled[req]
            if requests.first[req] != requests.first[req]:
                requests.first[req] = now + self.passing
            else:
                requests.stall[req] = max(requests.stall[req], now - requests.last_token[req])
            remaining[req] -= 1
            if remaining[req] <= 0:
                del self.running[req]
                self.reserved -= requests.need[req]
                self.slack -= requests.slack[req]
                requests.slack[req] = 0
                state[req] = _DONE
                requests.finish[req] = now + self.passing
                self._leave(req, now + self.passing)
                continue
            state[req] = _DECODE
            requests.base[req] = filled[req]
            requests.join[req] = self.decode_count
            self.dec_kv += filled[req]
            self.n += 1
            # the decode iterations to its last token: one a token, or the rounds its draws take
            rounds = remaining[req] if self.spec is None else self.spec.join(req, self.decode_count, remaining[req])
            requests.due[req] = self.decode_count + rounds
            heapq.heappush(self.finish_heap, (requests.due[req], req))
        self.scheduled.clear()

    def fast_forward(self, now: float, horizon: float) -> tuple[float, int]:
        """Run plain decode iterations inline while nothing can change the replica's state.

        Only the running decodes, no prompt waiting: up to (not including) the iteration in which
        a request finishes, the KV cache would need a preemption, or ``horizon`` (the next arrival)
        could land (that iteration and everything after go through the event loop). Returns the new
        time and the iterations run.
        """
        n = self.n
        heap = self.finish_heap
        limit = (heap[0][0] if heap else self.decode_count + 1) - self.decode_count - 1
        share = self.rules.window_share
        room = self.capacity - self.dec_kv - self.pf_kv - self.slack + self.saved
        spec, grown = self.spec, None
        if spec is None:
            limit = min(limit, int(room // (n * (1 - share))) - 1 if share < 1 else limit)
        else:  # the rounds' tokens, as far as the cache holds them
            grown = spec.within(self.decode_count + 1, limit, room / (1 - share) if share < 1 else float("inf"))
            limit = len(grown) - 1
        if limit <= 0:
            return now, 0
        running = len(self.running)
        table, scale = self.table, self.scale
        decode = table.decode
        drafting = None if spec is None else table.drafting
        step, per_sequence, overlap = table.fixed
        fixed = step + per_sequence * n
        ends, starts, kv = self.ends, self.starts, self.kv
        dec_kv, pf_kv, busy = self.dec_kv, self.pf_kv + self.slack - self.saved, self.busy
        done_here = 0
        while done_here < limit:
            g = n if grown is None else grown[done_here]
            context = (dec_kv + g) / n
            gpu = decode(n, context)
            t = max(fixed, gpu) if overlap else fixed + gpu
            if drafting is not None:
                t += drafting(n, context)
            t *= scale
            end = now + t
            if end >= horizon:
                break
            dec_kv += g
            pf_kv -= share * g  # the windowed layers' part of the tokens just decoded, not kept
            starts.append(now)
            ends.append(end)
            kv.append(dec_kv + pf_kv)
            busy += t
            now = end
            done_here += 1
        if done_here:
            self.saved += share * n * done_here if grown is None else share * (dec_kv - self.dec_kv)
            self.dec_kv, self.busy = dec_kv, busy
            self.decode_count += done_here
            self.decoded.extend([True] * done_here)
            self.batch.extend([running] * done_here)
            self.population.extend([running] * done_here)
            self.arrivals.extend([0] * done_here)
        return now, done_here
