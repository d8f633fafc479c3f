"""The mean-field closed loop: a benchmark's engine iterations at a decoding population, and where its cycle closes.

:class:`_Scheduler` prices the iterations a decoding population sees (the other clients' prompts landing in
them, under the engine's :class:`~calculator.performance.scheduler.SchedulerRules`) and the waits of a prompt;
:func:`_operating_point` finds the population where the clients' cycle closes. The closed-loop benchmark
(:func:`~calculator.performance.benchmark.closed_loop_seconds`) builds on both (``docs/performance-model.md``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ._common import _BISECTION_STEPS, _bisection
from .arrays import StepArrays
from .engines import Efficiency
from .iteration import _iteration_seconds, _overlap_expectation, spread_over_ranks
from .scheduler import SchedulerRules, whole_prompts
from .speculation import PLAIN, Rounds

__all__: list[str] = []  # the benchmark model's own parts

#: Resolution of the closed-loop operating point (the decoding population), as a fraction of its range. The
#: calibration's finite-difference Jacobian needs it fine: at 2**-24 (24 bisection steps) the fit's shared stage
#: stopped at a 0.7 % higher cost.
_RESOLUTION = 2.0**-32
#: Steps of the root search: false position first (superlinear where the gap is smooth), bisection after.
_SECANT_STEPS = 16
#: A count this far (relative) from its own fixed point after the secant is bisected, in this many steps.
_COUNT_TOLERANCE, _COUNT_STEPS = 0.01, 12


def _operating_point(scheduler: _Scheduler) -> np.ndarray:
    """The decoding population where the cycle closes, with ``scheduler.count`` set to its fixed point.

    The others' prompts a decoding request meets are counted over the cycle's iterations
    (:meth:`_Scheduler.counted`), which depend on the operating point: the count is taken where the secant
    through its first two evaluations (at 1 and at the first count) meets it, three closing searches in all.
    """

    def close() -> np.ndarray:
        return _closing_population(scheduler, np.minimum(scheduler.held, scheduler.decoding_cap()))

    first = scheduler.counted(scheduler.terms(close()))  # the count at 1
    scheduler.count = first
    moved = first != 1.0
    slope = (scheduler.counted(scheduler.terms(close())) - first) / np.where(moved, first - 1.0, 1.0)
    crossing = (first - slope) / np.where(slope < 1.0, 1.0 - slope, 1.0)
    crossing = np.clip(crossing, np.minimum(first, 1.0), np.maximum(first, 1.0))
    scheduler.count = np.where(moved & (slope < 1.0), crossing, first)
    population = close()
    # Where the count is far from linear in itself (prompts much longer than a request's decoding, few clients) the
    # secant can miss its fixed point: the count a request meets at the point found is not the count assumed. Those
    # rows alone bisect the count between 1 and the first, where the count met equals the count assumed.
    met = scheduler.counted(scheduler.terms(population))
    off = np.abs(met - scheduler.count) > _COUNT_TOLERANCE * scheduler.count
    if np.any(off):
        rows = scheduler.rows(off)
        edges = np.minimum(first[off], 1.0), np.maximum(first[off], 1.0)

        def short(count: np.ndarray) -> np.ndarray:  # the count met exceeds the count assumed: the root is above
            rows.count = count
            return (
                rows.counted(rows.terms(_closing_population(rows, np.minimum(rows.held, rows.decoding_cap())))) > count
            )

        low, high = _bisection(*edges, short, steps=_COUNT_STEPS)
        rows.count = (low + high) / 2
        count = np.array(scheduler.count, dtype=float)
        count[off] = rows.count
        scheduler.count = count
        population[off] = _closing_population(rows, np.minimum(rows.held, rows.decoding_cap()))
    return population


def _closing_population(scheduler: _Scheduler, cap: np.ndarray) -> np.ndarray:
    """The largest decoding population in ``[0, cap]`` where the cycle's gap is negative (to :data:`_RESOLUTION`).

    The gap rises with the population. A bracketing search: false position with the Illinois rule (an end
    kept a second time in a row has its gap halved, so both ends close in superlinearly), then bisection
    for any row :data:`_SECANT_STEPS` steps leave open. Where the gap is negative over the whole range the
    population is ``cap``; where it is not negative at 0, it is 0 (a NaN gap counts as not negative).
    Where the gap comes out exactly 0 (the root, to rounding) the search stops there.
    """
    low, high = np.zeros_like(cap), cap.astype(float).copy()
    g_low, g_high = scheduler.terms(low).gap, scheduler.terms(high).gap
    at_cap = g_high < 0
    open_ = (g_low < 0) & ~at_cap  # a root in between
    tolerance = _RESOLUTION * cap
    kept = np.zeros(cap.shape, dtype=int)  # +1: the high end was kept last step, -1: the low end
    for step in range(_SECANT_STEPS + _BISECTION_STEPS):
        active = open_ & (high - low > tolerance)  # a row stops where it converges: its answer is its own
        if not np.any(active):
            break
        secant = low - g_low * (high - low) / np.where(open_, g_high - g_low, 1.0)
        inside = (secant > low) & (secant < high) & (step < _SECANT_STEPS)
        middle = np.where(inside, secant, (low + high) / 2)
        gap = scheduler.terms(np.where(active, middle, low)).gap
        below = (gap < 0) & active
        above = ~(gap < 0) & active
        g_high = np.where(below & (kept == 1), g_high / 2, g_high)
        g_low = np.where(above & (kept == -1), g_low / 2, g_low)
        low = np.where(below | ((gap == 0) & active), middle, low)  # a gap of exactly 0: the root, to rounding
        g_low = np.where(below, gap, g_low)
        high, g_high = np.where(above, middle, high), np.where(above, gap, g_high)
        kept = np.where(below, 1, np.where(above, -1, kept))
    return np.where(at_cap, cap, low)


def _qna_weight(load: Any, clients: Any) -> Any:
    """Whitt's QNA weight ``w`` of the other clients' superposed streams: their ``c_a^2 = 1 - w``."""
    return 1.0 / (1.0 + 4.0 * (1.0 - np.minimum(load, 1.0)) ** 2 * np.maximum(clients - 2.0, 0.0))


def _peak_load(clients: np.ndarray) -> np.ndarray:
    """The load at which the closed loop's queue ``rho^2 / (1 - rho) * (1 - w)`` peaks, per row (1: no peak).

    With ``u = 1 - rho`` and ``K = C - 2`` the queue goes as ``(1 - u)^2 u / (1 + 4 K u^2)``, whose
    logarithm's derivative ``1/u - 2/(1 - u) - 8 K u / (1 + 4 K u^2)`` falls through zero once in
    ``(0, 1/3)`` (near ``1 / (2 sqrt(K))`` among many clients): bisection. Two clients or fewer have no
    queue (``w = 1``).
    """
    k = np.maximum(np.asarray(clients, dtype=float) - 2.0, 0.0)
    low, high = _bisection(
        np.full(k.shape, 1e-12),
        np.full(k.shape, 1.0 / 3.0),
        lambda u: 1 / u - 2 / (1 - u) - 8 * k * u / (1 + 4 * k * u * u) > 0,  # the queue still rising
    )
    return np.where(k > 0, 1.0 - (low + high) / 2, 1.0)


@dataclass
class _Terms:
    gap: np.ndarray  # clients the cycle holds minus the clients there are, at a decoding population
    rate: np.ndarray  # requests per second
    step: np.ndarray  # TPOT: the iteration a decoding request sees
    wait: np.ndarray  # a prompt's time in the engine until its first token
    jitter: np.ndarray  # the part of the wait that varies from prompt to prompt, in decode iterations
    phase: np.ndarray  # iterations from a request's completion to its client's next first token
    admitted: np.ndarray  # a prompt's wait from a freed slot to its first token, already at the engine


class _Base(NamedTuple):
    """What both kinds of iteration read at a decoding population (seconds; prompts per iteration and request)."""

    drawn: np.ndarray  # the other clients' prompts per decode iteration, per decoding request and O - 1
    arrive: np.ndarray  # their part of the arrivals (crowded in the rounds after the burst)
    t_dec: np.ndarray  # a decode iteration of the population
    t_idle: np.ndarray  # the same, zero without decodes
    t_seen: np.ndarray  # the decode iteration a decoding request sees


@dataclass(frozen=True)
class _Cycle:
    """The engine's iterations at a decoding population, before a prompt's waits (:meth:`_Scheduler.terms`)."""

    k: np.ndarray  # a prompt's chunks (iterations)
    rate: np.ndarray  # requests per second
    step: np.ndarray  # TPOT
    local: np.ndarray  # requests per second at a crowded round's pace
    own: np.ndarray  # a prompt's own iterations
    following: np.ndarray  # the next iteration, by count
    service: np.ndarray  # a prompt's share of full-budget iterations
    carries: np.ndarray  # the share of iterations that carry prompt work
    t_prompt: np.ndarray  # such an iteration's mean length
    per_iteration: np.ndarray  # prompts arriving per iteration
    filled: np.ndarray  # the iterations of the budget a prompt fills
    full: np.ndarray  # a full-budget iteration
    others: np.ndarray  # the others' prompts joining per second (mixing engines; else 0)
    fits: np.ndarray  # the prompts the budget has room for beside one (mixing engines; else 0)
    added: np.ndarray  # a chunk's seconds over a plain decode iteration (mixing engines; else 0)


@dataclass
class _Scheduler:
    """The engine's iterations at a decoding population ``n``, with dispersed arrivals (mean field).

    Decoding requests see ``1 + (1 - 1/C) n`` sequences in a decode step and the other clients'
    prompts landing in their iterations: in chunks of the budget left by the decodes (mixing engines)
    or as prefill batches that pause decoding (prefill-first), packed with the prompts that arrived
    in the same iteration. A prompt arrives per iteration, not per second: its client sends it when its
    last request completes, at an iteration's end, and it reaches the engine the request path later. It
    waits for the iteration it lands in (a long prompt iteration only as often as one starts in that
    time) and the later chunks of the prompt it lands behind, under an overlap scheduler for the
    iteration already built after it (unless that is such a chunk), its own iterations, and
    the prompts queued ahead of it for the prefill budget (one server loaded by the share of iterations
    the prompts fill, a deterministic service, less the residual of the prompt in service, which the
    wait for the prompt it lands behind already counts, scaled by the arrival variability of the other clients'
    nearly periodic streams, Whitt's QNA superposition). The prompts a decoding request meets per iteration are
    ``count`` times ``(1 - 1/C) n / (O - 1)``: each other client's once per cycle, the cycle counted in
    iterations (:meth:`counted`).
    """

    a: StepArrays
    eff: Efficiency
    rules: SchedulerRules
    tp: np.ndarray
    inputs: np.ndarray
    slots: np.ndarray
    clients: np.ndarray
    context: np.ndarray
    held: np.ndarray
    overhead: np.ndarray
    length_cv: Any = np.inf  # the spread of the prompts' lengths (inf: none given; whole prompts pack as a share)
    crowd: Any = 1.0  # the other clients' arrivals per iteration, as a multiple of the mixed state's
    peak_load: Any = None  # the prompt load where the queue peaks (:func:`_peak_load`; None: from the clients)
    count: Any = 1.0  # the prompts a decoding request meets per iteration, over (1 - 1/C) n / (O - 1) (:meth:`counted`)
    speculative: Rounds = PLAIN  # how a decode iteration runs: a plain step or a speculative round (``slots`` of them)

    def __post_init__(self) -> None:
        if self.peak_load is None:
            self.peak_load = _peak_load(self.clients)

    def rows(self, which: np.ndarray) -> _Scheduler:
        """The scheduler of the rows ``which`` (a boolean mask over the rows) alone."""
        shape = np.shape(self.held)
        return dataclasses.replace(
            self,
            **{
                f.name: getattr(self, f.name)[which]
                for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), np.ndarray) and np.shape(getattr(self, f.name)) == shape
            },
        )

    def decoding_cap(self) -> np.ndarray:
        """The most requests that can decode at once when the prompts replacing them share the budget.

        A mixing engine's iteration holds the decodes and the other clients' prompt chunks in one token
        budget: ``n`` decoding requests draw ``(1 - 1/C) n I / (O - 1)`` prompt tokens per iteration, which
        must fit in the room ``T - n`` the decodes leave (:meth:`SchedulerRules.room`). An engine that does
        not chunk draws ``(1 - 1/C) n / (O - 1)`` prompts per iteration, which must not exceed the whole prompts
        the room takes (:func:`~calculator.performance.scheduler.whole_prompts`, at least one however long the
        prompt). Prefill-first engines run
        their prefill batches apart (no cap).
        """
        rules = self.rules
        if not rules.mixed:
            return np.full_like(self.held, np.inf)
        share = (1.0 - 1.0 / self.clients) * self.count
        budget = rules.token_budget
        if not rules.chunked:

            def excess(n: np.ndarray) -> np.ndarray:  # prompts drawn beyond those taken; rises with n
                return share * n / self.slots - whole_prompts(rules.room(n, True), self.inputs, self.length_cv)

            high = self.slots * np.maximum(budget / self.inputs, 1.0) / np.maximum(share, 1e-300)
            low, _ = _bisection(np.zeros_like(self.held), high, lambda n: excess(n) <= 0)
            return np.where(share > 0, low, np.inf)
        drawn = share * self.inputs / self.slots  # prompt tokens per decoding request
        v = rules.decode_tokens  # the budget's tokens a decode takes (k + 1 under speculation)
        shared = budget / (v + drawn)  # room = T - v n
        with np.errstate(divide="ignore"):
            full = 1.0 / drawn  # room = one token (the closed form's least): drawn n <= 1
        most = (budget - 1.0) / v  # the decodes that leave the room its one token
        return np.where(shared <= most, shared, np.maximum(full, most))

    def terms(self, n: np.ndarray) -> _Terms:
        """The cycle's terms at a decoding population ``n``.

        The iterations (:meth:`_mixed`, :meth:`_prefill_first`) and a prompt's waits in them (:meth:`_waits`).
        """
        base = self._base(n)
        its = self._mixed(n, base) if self.rules.mixed else self._prefill_first(n, base)
        return self._waits(n, base, its)

    def _base(self, n: np.ndarray) -> _Base:
        a, eff, tp, context = self.a, self.eff, self.tp, self.context
        share = 1.0 - 1.0 / self.clients  # the other clients' part of the load
        drawn = share * self.count  # their prompts per decode iteration, per decoding request and O - 1
        arrive = drawn * self.crowd  # their part of the arrivals (crowded in the rounds after the burst)
        t_dec = self.speculative.iteration(a, eff, tp, n, context)
        t_idle = np.where(n > 0, t_dec, 0.0)
        t_seen = self.speculative.iteration(a, eff, tp, 1.0 + share * n, context)
        return _Base(drawn, arrive, t_dec, t_idle, t_seen)

    def _mixed(self, n: np.ndarray, base: _Base) -> _Cycle:
        """A mixing engine's iterations: the other clients' prompt chunks ride in the decode iterations."""
        a, eff, tp, inputs, slots, context = self.a, self.eff, self.tp, self.inputs, self.slots, self.context
        drawn, arrive, t_dec, t_idle, t_seen = base
        rules, speculative = self.rules, self.speculative
        room = rules.room(n, closed_form=True)
        k = rules.chunks(inputs, n, self.length_cv)
        chunk = inputs / k
        prior = (k - 1) / 2 * chunk
        added = np.maximum(speculative.iteration(a, eff, tp, n, context, chunk, 1, prior) - t_idle, 0.0)
        per_prompt = k * added
        arrivals = arrive * n * k / slots  # chunks landing per iteration
        # Chunks landing together are priced together (a Poisson count of them): under an asynchronous engine
        # the first hide under the fixed costs and the next add their GPU time, and the GPU work of several is
        # not their sum (eight 128-token prompts beside 1,000 decodes of Llama-3.1-70B FP8 on four H100s add
        # 17 % less each than one alone).
        if eff.overlap or rules.ranks <= 1:
            # (a speculative round's drafting does not change with the prompts: the verification alone)
            verify = t_idle - speculative.drafting(eff, tp, n, context)
            expected = _overlap_expectation(
                a, eff, tp, n, context, chunk, prior, arrivals, verify, speculative.verified
            )[0]
            per_prompt = np.where(arrivals > 1e-9, k * expected / np.maximum(arrivals, 1e-300), per_prompt)
        else:  # a synchronous engine's attention ranks: chunks landing together prefill side by side
            r = rules.ranks
            together = np.maximum(speculative.iteration(a, eff, tp, n, context, r * chunk, r, prior) - t_idle, 0.0)
            per_prompt = per_prompt * spread_over_ranks(arrivals, r, added, together)
        rate = n / np.maximum(slots * t_seen + drawn * n * per_prompt, 1e-300)
        step = t_seen + drawn * n * per_prompt / slots
        local = n / np.maximum(slots * t_seen + arrive * n * per_prompt, 1e-300)  # crowded: the round's pace
        others = arrive * local
        # An iteration carries a Poisson count of chunks, `arrivals` on average (more than one where
        # prompts come faster than iterations), each adding its cost: the mean and second moment.
        # an iteration takes `capacity` chunks: the room's share, or (an engine that does not chunk) the
        # whole prompts that fit in it, at least one
        capacity = rules.prompts_taken(room, chunk, inputs, self.length_cv)
        carrying = np.minimum(arrivals, capacity)
        per_chunk = per_prompt / k
        mean = t_idle + carrying * per_chunk
        # Prompts that arrive during the iteration this one lands in join its iterations (the next one the
        # scheduler builds takes them all), each adding its chunk, only as far as the budget has room beside
        # it (a prompt that fills the budget is prefilled without company): at `others` a second, up to `fits`.
        fits = np.maximum(capacity - 1.0, 0.0)
        own = k * (t_dec + added)
        following = mean
        # By count: iterations that carry prompt work (at least one chunk) and their mean length; prompts
        # arriving per iteration (each decoding request completes once in `slots` iterations); the
        # iterations of the budget a prompt fills.
        carries = 1.0 - np.exp(-carrying)
        t_prompt = t_idle + per_chunk * carrying / np.maximum(carries, 1e-300)
        per_iteration = arrive * n / slots
        fill = room if rules.chunked else capacity * inputs  # the tokens of a full iteration
        filled = inputs / fill
        prior_full = np.maximum(inputs - fill, 0.0) / 2
        full = speculative.iteration(a, eff, tp, n, context, fill, np.maximum(fill / inputs, 1.0), prior_full)
        service = filled * np.maximum(full, t_dec)  # a prompt's share of full iterations
        return _Cycle(
            k, rate, step, local, own, following, service, carries, t_prompt, per_iteration, filled, full, others, fits,
            added,
        )  # fmt: skip

    def _prefill_first(self, n: np.ndarray, base: _Base) -> _Cycle:
        """A prefill-first engine's iterations: prefill batches that pause decoding."""
        a, eff, tp, inputs, slots = self.a, self.eff, self.tp, self.inputs, self.slots
        drawn, arrive, _, t_idle, t_seen = base
        rules = self.rules
        k = rules.chunks(inputs, 0.0, self.length_cv)
        chunk = inputs / k
        per_batch = np.maximum(rules.room(0.0) / chunk, 1.0)
        prior = (k - 1) / 2 * chunk
        # The prompts a decode iteration's completions send arrive together, the request path later, and
        # share the next prefill batch: a prompt's batch holds its own group, the other clients' completions
        # of one decode iteration (a Poisson count seen from one of its members: one plus the mean).
        packed = np.minimum(1.0 + arrive * n / slots, per_batch)
        t_batch = _iteration_seconds(a, eff, tp, 0, 0, packed * chunk, packed, prior)
        per_prompt = k * t_batch / packed
        rate = n / np.maximum(slots * t_seen + drawn * n * per_prompt, 1e-300)
        local = n / np.maximum(slots * t_seen + arrive * n * per_prompt, 1e-300)
        prefilling = np.minimum(arrive * local * per_prompt, 1.0)
        # the next iteration, by count
        following = 1.0 / (prefilling / np.maximum(t_batch, 1e-300) + (1 - prefilling) / np.maximum(t_idle, 1e-300))
        step = t_seen + drawn * n * per_prompt / slots
        own = k * t_batch
        full = _iteration_seconds(a, eff, tp, 0, 0, per_batch * chunk, per_batch, prior)
        service = k * full / per_batch
        # By count: prefill batches among the iterations; prompts arrive only from decode iterations (a
        # prefill batch pauses decoding); a prompt fills 1/per_batch of its k batches.
        carries = following * prefilling / np.maximum(t_batch, 1e-300)
        t_prompt = t_batch
        per_iteration = arrive * n / slots * (1.0 - carries)
        filled = k / per_batch
        zero = np.zeros_like(k)
        return _Cycle(
            k, rate, step, local, own, following, service, carries, t_prompt, per_iteration, filled, full, zero, zero,
            zero,
        )  # fmt: skip

    def _waits(self, n: np.ndarray, base: _Base, its: _Cycle) -> _Terms:
        """A prompt's waits in the iterations ``its`` at a decoding population ``n``, and the cycle's gap."""
        slots, rules = self.slots, self.rules
        _, arrive, t_dec, t_idle, _ = base
        k, rate, step, local, own, following, service, carries, t_prompt, per_iteration, filled, full = (
            its.k, its.rate, its.step, its.local, its.own, its.following, its.service, its.carries, its.t_prompt,
            its.per_iteration, its.filled, its.full,
        )  # fmt: skip
        others, fits, added = its.others, its.fits, its.added
        # Another client's request is in the engine when this one arrives (none with one client).
        with np.errstate(over="ignore"):  # a rate near zero (the closing search's low end): an endless cycle
            cycle = self.clients / np.maximum(rate, 1e-300)
        busy = 1.0 - np.minimum(self.overhead / np.maximum(cycle, 1e-300), 1.0) ** (self.clients - 1)
        # Closed-loop arrivals are completions: they come per iteration, not per second, so the prompt budget's
        # load is the share of iterations it fills (an iteration carrying prompts is at least as long as the
        # mean one: never above the share of time). Queued prompts ahead wait through full-budget iterations:
        # M/D/1 in iterations, less the residual of the prompt in service (the iteration in flight counts it).
        load = np.minimum(per_iteration * filled, np.maximum(arrive * local * service, 0.0))
        stable = load < 1
        # The other clients' prompts are a superposition of C - 1 nearly periodic streams (a client sends its
        # next request when its last one ends): Whitt's QNA gives them c_a^2 = 1 - w, Poisson-like at light
        # load and among many clients, regular near saturation among few (Kingman: the queue scales by c_a^2).
        # That regularity empties the queue as the load nears 1, so past its peak the queue would shrink as
        # more requests decode, and the cycle close on either side of the dip (TTFT falling as clients are
        # added); a closed loop's wait does not fall with its population: past the peak the queue holds.
        queued = np.minimum(load, self.peak_load)
        queue = queued**2 * service / 2 / np.maximum(1 - queued, 1e-12) * (1.0 - _qna_weight(queued, self.clients))
        queue = np.where(stable, queue, np.inf)
        # A crowded round (after the burst) arrives within a window of `clients (O - 1) / (n crowd)` iterations:
        # its queue never holds more than the window's prompts ahead, half of them on average.
        # (a population near zero, the low end of the closing search, makes the window infinite: no bound)
        with np.errstate(over="ignore", invalid="ignore"):
            window = self.clients * slots / np.maximum(n * self.crowd, 1e-300)
            queue = np.where(self.crowd > 1, np.fmin(queue, load * window / 2 * service / filled), queue)
        # The iteration in flight: the arrival reaches the engine an overhead o after a completion at an
        # iteration's end. About j = o / t_idle iterations start in that time; if one of them carries prompts
        # (probability 1 - (1 - carries)^j) the arrival lands in it, on average o (j + 1) / 2j after its start,
        # else in a decode iteration, halfway. (Poisson arrivals would see the length-biased iteration, which
        # overweights the long prompt iterations that closed-loop completions rarely fall next to.) Landing in
        # a chunk of a prompt in k chunks, it also waits for that prompt's later chunks: (k - 1) / 2 prompt
        # iterations on average, completions falling alike after each of the k.
        o = self.overhead
        j = np.minimum(np.maximum(o / np.maximum(t_idle, 1e-300), 1.0), 1e6)
        landing = 1.0 - (1.0 - np.minimum(carries, 1.0)) ** j
        remaining = np.maximum(t_prompt - o * (j + 1) / (2 * j), t_idle / 2) + (k - 1) / 2 * t_prompt
        # An overlap scheduler built the next iteration before this prompt arrived: it waits for that one too,
        # unless that iteration is the next chunk of the prompt it landed behind (already counted).
        lagged = rules.lag_iterations * (1.0 - landing * (k - 1) / k)  # in iterations
        lag = following * lagged
        residual = landing * remaining + (1 - landing) * t_idle / 2
        if rules.mixed:  # the others joining over the whole iteration it lands in
            own = own + np.minimum(others * (landing * t_prompt + (1 - landing) * t_idle), fits) * added
        wait = busy * (residual + lag) + own + queue
        # Admitted from the engine's queue as a completion frees a slot (at an iteration's end): its own k iterations,
        # each carrying the prompts admitted with it (the completions of an iteration free theirs together), the
        # queued prompts' and the later chunks of the prompt in service; no landing phase, no overlap lag.
        admitted = np.maximum(own, k * t_prompt) + queue + busy * landing * (k - 1) / 2 * t_prompt
        gap = n + rate * wait - np.minimum(self.clients - rate * self.overhead, self.held)
        # How much the wait varies between prompts (decode iterations): a wait uniform over twice the mean
        # remaining iteration where the prompt lands behind another's (else none), and the queue.
        hit = busy * landing
        spread = np.sqrt(np.maximum(hit * 4 / 3 * remaining**2 - (hit * remaining) ** 2, 0.0) + queue**2)
        jitter = spread / np.maximum(t_idle, 1e-300)
        # The same wait in iterations: the path's, half the one it lands in and the later chunks of the prompt
        # it lands behind, the overlap scheduler's, the queued prompts' full ones and its own k.
        with np.errstate(invalid="ignore"):  # an endless queue: endless iterations
            queued_iterations = queue / np.maximum(full, t_dec)
        phase = o / np.maximum(following, 1e-300) + 0.5 + landing * (k - 1) / 2 + lagged + queued_iterations + k
        return _Terms(gap, rate, step, wait, jitter, phase, admitted)

    def counted(self, steady: _Terms) -> np.ndarray:
        """The others' prompts a decoding request meets per decode iteration, relative to ``(1 - 1/C) n / (O - 1)``.

        Every other client's prompt is prefilled once per cycle, and completions, which send the prompts, come per
        iteration: a request meets the share ``(O - 1) / (O - 1 + P)`` of them while it decodes, ``P`` the
        iterations from its completion to its next first token (``_Terms.phase``). ``n / (O - 1)`` counts the
        cycle in seconds at the decode step instead, ``O - 1 + (o + wait) / TPOT`` iterations: where the prompt's
        iterations are longer than the decode steps (long prompts, short outputs, few clients) it misses the
        prompts that arrive while a request waits and queue behind it. The ratio:
        ``(decode + o + wait) / (decode + P TPOT)`` (1 where the steady state has no finite wait).
        """
        decode = self.slots * steady.step
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            ratio = (decode + self.overhead + steady.wait) / (decode + steady.phase * steady.step)
        return np.where(np.isfinite(ratio) & (ratio > 0), ratio, 1.0)
