"""The KV cache of a closed-loop group, followed through the run (the benchmark's cache admission).

A benchmark's clients start together, and with a small length spread their requests finish nearly
together, round after round. The mixed state's occupancy (``I + O/2`` a request) then understates the
cache the group holds near a round's end, up to ``I + O`` a request at fixed lengths: an engine that
admits on part of the output (vLLM, SGLang) preempts the latest admitted requests and readmits them
(their prompt and output recomputed) ahead of the clients' next prompts, which wait. An engine that
reserves the whole output (TensorRT-LLM) never preempts, and the clients beyond its reservations wait for
the requests finishing over the spread.

:func:`group_cache_run` follows that mechanism as a fluid: the running requests by age (tokens decoded
since admission), a length spread that finishes them, preemption of the youngest until the cache holds,
readmission of the preempted (the last preempted first), then the waiting prompts in arrival order, under
the engine's admission rule (its reservation, the cache, the sequence cap), and the admissions into a full
cache that the running decodes outgrow before the next completion frees room (:func:`_churn`). Steps are a
fraction of the mean output; each is priced by :func:`iteration_seconds`. Checked against the simulator in
``docs/performance-model.md`` ("Against the simulator").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..serving import held_output
from .arrays import StepArrays
from .burst import burst_seconds
from .engines import Efficiency
from .iteration import _iteration_seconds
from .scheduler import SchedulerRules
from .speculation import PLAIN, Rounds

#: Steps of the fluid per mean output (the step's decode iterations: ``O / STEPS_PER_OUTPUT``). The waits
#: converge from below as the steps shrink: at 64 steps 7 % under 128 on the grid's slowest-converging point
#: (Llama-3.1-70B, 128/8,192 tokens, 256 clients), at 256 within 3 % of 128.
STEPS_PER_OUTPUT = 128
#: Most steps one run takes: a long memory-limited run (many rounds of the engine) gets coarser steps.
_MOST_STEPS = 4096
#: Runs the fluid follows: up to this many rounds of the engine's mixed-state population (a longer run is
#: its steady state, the mixed state's slot wait), and a length spread below this (a wider one mixes the
#: clients within a round or two, and a normal spread would give negative lengths).
_MOST_ROUNDS, _MOST_SPREAD = 256, 0.5
#: Steps a run may take, in rounds of the engine's mixed-state population: beyond, it counts as stalled.
_STALL = 8.0
#: The ages a step's population spans, in standard deviations of the output length beyond its mean.
_TAIL = 6.0


def group_cache_run(
    a: StepArrays,
    eff: Efficiency,
    rules: SchedulerRules,
    tp: np.ndarray,
    inputs: np.ndarray,
    outputs: np.ndarray,
    clients: np.ndarray,
    length_cv: np.ndarray,
    kv_tokens: np.ndarray,
    requests_per_client: float,
    waves: np.ndarray,
    speculative: Rounds = PLAIN,
) -> tuple[np.ndarray, ...]:
    """Mean admission wait of the prompts (s), the run's throughput (requests/s) and two waits after admission (s).

    All arrays are 1-D over the rows; the engine's ``rules`` give the prompt tokens an iteration takes over all
    attention ranks (a rank's share the longest piece of a prompt) and the sequence cap. The wait is the time a
    prompt spends between its arrival and its admission; the throughput, the requests over the run's span, first
    burst to last completion (as a benchmark reports it). After its admission a prompt waits for the readmitted
    requests' prompts and output, recomputed ahead of it in the step that admits both (the third array); on
    the ``waves`` rows (identical requests under a prefill-first engine), the fourth is the mean time from a
    step's start to the first tokens of the prompts it admits, a burst of its own
    (:func:`~calculator.performance.burst.burst_seconds`; zero on the other rows). NaN on a row the fluid does
    not follow (see :data:`_MOST_ROUNDS`) or whose run stalls: the caller keeps the mixed state there. Under
    ``speculative`` a decode iteration is a round that advances a request by its expected tokens
    (:class:`~calculator.performance.speculation.Rounds`): a step of ``dt`` tokens takes ``dt / E`` of them.
    """
    total = clients * requests_per_client
    # a request's mean KV: whole blocks, and a sliding window capping its layers' part (SchedulerRules.kv_tokens)
    kept = rules.kv_tokens(inputs)
    half = held_output(outputs, length_cv)  # length-biased, as closed_loop_seconds' context
    grown = half if not rules.window_share else rules.kv_tokens(inputs + half) - kept
    mean_kv = kept + rules.block_slack(kept, length_cv) + grown
    rounds = np.ceil(total / np.maximum(np.minimum(kv_tokens / mean_kv, clients), 1.0))
    follow = (rounds <= _MOST_ROUNDS) & (length_cv < _MOST_SPREAD)
    out = tuple(np.full(len(inputs), np.nan) for _ in range(4))
    if np.any(follow):
        rows = _Rows(tp, inputs, outputs, clients, length_cv, kv_tokens, waves, rounds)
        followed = _Rows(*(v[follow] for v in rows))
        parts = _fluid_run(a, eff, rules, followed, requests_per_client, speculative)
        for whole, part in zip(out, parts, strict=True):
            whole[follow] = part
    return out


class _Rows(NamedTuple):
    """The rows a closed-loop group's cache run follows (1-D arrays, one entry a row)."""

    tp: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    clients: np.ndarray
    length_cv: np.ndarray
    kv_tokens: np.ndarray
    waves: np.ndarray
    rounds: np.ndarray


def _fluid_run(  # noqa: PLR0915  # one fluid step shares its arrays; its parts are the _ functions below
    a: StepArrays, eff: Efficiency, rules: SchedulerRules, followed: _Rows, requests_per_client: float,
    speculative: Rounds,
) -> tuple[np.ndarray, ...]:  # fmt: skip
    """:func:`group_cache_run` on the rows the fluid follows: the run step by step (a step, ``dt`` tokens decoded).

    Each step preempts the youngest until the cache holds the running requests, readmits the preempted and then
    admits waiting prompts while the reservations, the cache and the sequence cap have room, prices the step's
    decode iterations and prompts, and decodes: the finishing leave and their clients send the next prompts.
    """
    tp, inputs, outputs, clients, length_cv, kv_tokens, waves, rounds = followed
    total, res, max_seqs = clients * requests_per_client, rules.output_reservation, rules.max_sequences
    steps_per_output, dt, bins, stay, left, held, want, grow = _ages(inputs, outputs, length_cv, rounds, rules)
    iterations = dt / speculative.tokens  # decode iterations a step
    fresh = rules.admission_tokens(inputs, outputs, length_cv)
    # The KV a request holds is its tokens in whole blocks: the prompt's last block's slack, kept while it
    # decodes (its growth counted a token at a time: on average the same as the blocks it fills).
    # A sliding window caps its layers' part (SchedulerRules.kv_tokens).
    slack = rules.block_slack(rules.kv_tokens(inputs), length_cv)[:, None]
    if rules.window_share:
        kv = rules.kv_tokens(held) + slack
        kv_grow = stay * (rules.kv_tokens(held + dt[:, None]) + slack) - kv
    else:
        kv, kv_grow = held + slack, grow - (1 - stay) * slack

    rows = len(inputs)
    mass, reserved, preempted = np.zeros((rows, bins)), np.zeros((rows, bins)), np.zeros((rows, bins))
    queue, issued, done = clients.copy(), clients.copy(), np.zeros(rows)
    span, waited, admitted = np.zeros(rows), np.zeros(rows), np.zeros(rows)
    behind, own = np.zeros(rows), np.zeros(rows)
    bursts = bool(np.any(waves))
    lone = burst_seconds(a, eff, rules, tp, np.ones(rows), inputs, speculative)[2] if bursts else np.zeros(rows)
    active = np.ones(rows, dtype=bool)
    ahead = dt[:, None]
    last_finished = np.zeros(rows)
    for _ in range(int(_STALL * np.max(rounds * steps_per_output))):
        if not np.any(active):
            break
        preempting = _preempt_youngest(mass, reserved, preempted, kv, kv_tokens)  # such a step admits no one
        running = mass.sum(axis=1)
        # Room through the step: the reservations, the cache at the step's end, the sequence cap.
        room_reserved = np.where(preempting, 0.0, kv_tokens - reserved.sum(axis=1))
        room_cache = np.where(preempting, 0.0, kv_tokens - (mass * (kv + kv_grow)).sum(axis=1))
        room_seqs = np.where(preempting, 0.0, max_seqs - running)
        back = _readmitted(preempted, (want, kv + ahead, np.ones_like(held)), (room_reserved, room_cache, room_seqs))
        preempted -= back
        mass += back
        reserved += back * want
        recomputed = (back * held).sum(axis=1)
        prompt_tokens = recomputed.copy()
        prompts = back.sum(axis=1)
        room_reserved -= (back * want).sum(axis=1)
        room_cache -= (back * (kv + ahead)).sum(axis=1)
        room_seqs -= prompts
        # Then the waiting prompts, once no preempted request is left ahead of them.
        clear = preempted.sum(axis=1) <= 1e-9
        new = np.minimum.reduce([queue, room_reserved / fresh, room_cache / (kv[:, 0] + dt), room_seqs])
        new = np.where(clear & active, np.maximum(new, 0.0), 0.0)
        mass[:, 0] += new
        reserved[:, 0] += new * fresh
        queue -= new
        admitted += new
        prompt_tokens += new * inputs
        prompts += new
        if res < 1:
            mass, reserved, preempted = _churn(
                mass, reserved, preempted, back, new, stay, kv, kv_grow, want, res * left, dt
            )  # fmt: skip
        # The step's time: its decode iterations, and the prompts it (re)admitted.
        running = mass.sum(axis=1)
        context = np.where(running > 0, (mass * held).sum(axis=1) / np.maximum(running, 1e-300), inputs)
        step = np.where(running > 0, speculative.iteration(a, eff, tp, running, context), 0.0)
        batches, lift = _prompt_seconds(
            a, eff, rules, tp, (running, context, step), prompt_tokens, prompts, last_finished, iterations,
            speculative,
        )  # fmt: skip
        seconds = np.where(active, iterations * step + np.where(prompt_tokens > 0, lift, 0.0), 0.0)
        # The step's new prompts are packed behind the readmitted ones and wait for their share of the prefill
        # time (a mixing engine's prompt rides in the last of their iterations: its decode counted once).
        prefill = lift + ((batches - 1) * step if rules.mixed else 0.0)
        ahead_share = recomputed / np.maximum(prompt_tokens, 1e-300)
        behind += np.where(active & (prompt_tokens > 0), new * ahead_share * prefill, 0.0)
        if bursts:  # then their own burst (at least one prompt: a trickle comes a prompt at a time)
            _own_bursts(a, eff, rules, tp, inputs, new, active & waves, lone, own, speculative)
        waited += queue * seconds
        span += seconds
        # Decode the step: the finishing leave, their clients send the next prompts.
        finished = (mass * (1 - stay)).sum(axis=1)
        mass = np.concatenate([np.zeros((rows, 1)), (mass * stay)[:, :-1]], axis=1)
        reserved = np.concatenate([np.zeros((rows, 1)), (reserved * stay)[:, :-1]], axis=1)
        done += finished
        last_finished = finished
        sent = np.minimum(finished, total - issued)
        queue += sent
        issued += sent
        active = done < total * (1 - 1e-6)
    # a run that does not finish (a request the cache cannot hold whole): no answer from the fluid
    per_prompt = np.maximum(admitted, 1e-300)
    wait = np.where(active, np.nan, waited / per_prompt)
    return wait, np.where(active, np.nan, total / np.maximum(span, 1e-300)), behind / per_prompt, own / per_prompt


def _own_bursts(
    a: StepArrays, eff: Efficiency, rules: SchedulerRules, tp: np.ndarray, inputs: np.ndarray, new: np.ndarray,
    rows: np.ndarray, lone: np.ndarray, own: np.ndarray, speculative: Rounds,
) -> None:  # fmt: skip
    """Add to ``own`` the seconds the ``new`` prompts a step admits on ``rows`` wait for their own burst.

    ``lone``: one prompt's burst.
    """
    own += np.where(rows, new * lone, 0.0)
    k = rows & (new > 1)
    if np.any(k):
        own[k] += new[k] * (burst_seconds(a, eff, rules, tp[k], new[k], inputs[k], speculative)[2] - lone[k])


def _ages(
    inputs: np.ndarray, outputs: np.ndarray, length_cv: np.ndarray, rounds: np.ndarray, rules: SchedulerRules
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fluid's ages of a request, a step apart.

    Returns the steps per output, the decode iterations a step, the bins, and per (row, age) the share still
    running a step later, the output left, the tokens held, what an admission reserves (whole blocks) and the
    tokens' change a step.
    """
    from scipy.special import ndtr

    steps_per_output = np.clip(np.floor(_MOST_STEPS / rounds), 16, STEPS_PER_OUTPUT)
    dt = outputs / steps_per_output  # decode iterations a step
    spread = np.maximum(length_cv, 1e-9) * outputs
    bins = int(np.ceil(np.max(steps_per_output * (1 + _TAIL * length_cv)))) + 2
    age = dt[:, None] * np.arange(bins)[None, :]
    with np.errstate(over="ignore"):
        # a request that reaches its length has finished (identical lengths: all in the same step, not half)
        finish = outputs[:, None] - 1e-6 * dt[:, None]
        z = (age - finish) / spread[:, None]
        z_next = (age + dt[:, None] - finish) / spread[:, None]
    alive, alive_next = ndtr(-z), ndtr(-z_next)
    stay = np.where(alive > 1e-300, alive_next / np.maximum(alive, 1e-300), 0.0)  # share still running a step later
    stay[:, -1] = 0.0
    # the output a request of this age still has to produce (the normal's mean residual life)
    density = np.exp(-0.5 * np.minimum(z * z, 1400.0)) / np.sqrt(2 * np.pi)
    left = np.maximum(outputs[:, None] + spread[:, None] * density / np.maximum(alive, 1e-300) - age, 0.0)
    held = inputs[:, None] + age  # tokens a request holds at this age, and what readmitting it recomputes
    want = rules.admission_tokens(held, left, length_cv[:, None])  # what the admission reserves for it
    grow = stay * (held + dt[:, None]) - held  # a request's change of KV over a step (finishing ones leave)
    return steps_per_output, dt, bins, stay, left, held, want, grow


def _preempt_youngest(
    mass: np.ndarray, reserved: np.ndarray, preempted: np.ndarray, held: np.ndarray, kv_tokens: np.ndarray
) -> np.ndarray:
    """Preempt the youngest requests until the cache holds the running ones (in place); the rows preempting."""
    load = mass * held
    excess = load.sum(axis=1) - kv_tokens
    preempting = excess > 1e-9
    if np.any(preempting):
        before = np.cumsum(load, axis=1) - load
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            share = np.clip((excess[:, None] - before) / load, 0.0, 1.0)
        share = np.where(preempting[:, None] & (load > 0), share, 0.0)
        preempted += mass * share
        reserved *= 1 - share
        mass *= 1 - share
    return preempting


def _readmitted(preempted: np.ndarray, needs: tuple[np.ndarray, ...], rooms: tuple[np.ndarray, ...]) -> np.ndarray:
    """The preempted requests readmitted, the oldest (the last preempted) first, while each fits whole.

    ``needs``: what a request of each age takes of each room (its reservation, its cache at the step's end, a
    sequence); ``rooms``: what is left of them per row.
    """
    parts = [(preempted * need)[:, ::-1] for need in needs]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        fits = np.minimum.reduce(
            [(room[:, None] - (np.cumsum(p, axis=1) - p)) / p for room, p in zip(rooms, parts, strict=True)]
        )
    fits = np.where(parts[2] > 0, np.clip(fits, 0.0, 1.0), 1.0)
    short = fits < 1 - 1e-12
    first_short = np.argmax(short, axis=1)
    fits = np.where((np.cumsum(short, axis=1) > 0) & (np.arange(fits.shape[1]) != first_short[:, None]), 0.0, fits)
    return preempted * fits[:, ::-1]


def _prompt_seconds(
    a: StepArrays, eff: Efficiency, rules: SchedulerRules, tp: np.ndarray, decoding: tuple[np.ndarray, ...],
    prompt_tokens: np.ndarray, prompts: np.ndarray, finished: np.ndarray, dt: np.ndarray, speculative: Rounds,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The prefill batches of a step's (re)admitted prompts and the seconds they add to its decode iterations.

    ``decoding``: the running requests, their mean context and a decode iteration's seconds; ``finished``: the
    requests the last step completed (over its ``dt`` decode iterations). The prompts run budget by budget (whole
    where the engine does not chunk, at least one an iteration), a longer one attending to its earlier chunks
    (the closed form's mean prior).
    """
    running, context, step = decoding
    budget, chunk = rules.token_budget, rules.token_budget / rules.ranks
    length = prompt_tokens / np.maximum(prompts, 1e-300)
    if rules.chunked:
        batches = np.maximum(np.ceil(prompt_tokens / budget), 1.0)
        pieces = np.maximum(np.ceil(length / chunk), 1.0)
    else:
        batches = np.maximum(np.ceil(prompts / np.maximum(np.floor(budget / np.maximum(length, 1.0)), 1.0)), 1.0)
        pieces = 1.0
    if not rules.mixed:
        # A prefill batch runs alone whenever the head of the queue fits: the room opens as requests finish,
        # so the step's admissions come in as many batches as its iterations that see a completion
        # (Poisson over the step's decode iterations; at most one batch a prompt).
        batches = np.maximum(batches, dt * -np.expm1(-np.minimum(prompts, finished) / dt))
    prior = (pieces - 1) / 2 * length / pieces
    # a step's share of a prompt is priced as part of its whole chunk (the attention within a chunk)
    piece = np.maximum(length / pieces, 1.0)
    batch = (prompt_tokens / batches, prompt_tokens / batches / piece, prior)
    if rules.mixed:  # the prompts ride in decode iterations
        return batches, batches * (speculative.iteration(a, eff, tp, running, context, *batch) - step)
    return batches, batches * _iteration_seconds(a, eff, tp, 0, 0, *batch)  # prefill batches run alone


def _churn(
    mass: np.ndarray,
    reserved: np.ndarray,
    preempted: np.ndarray,
    back: np.ndarray,
    new: np.ndarray,
    stay: np.ndarray,
    held: np.ndarray,
    grow: np.ndarray,
    want: np.ndarray,
    cushion: np.ndarray,
    dt: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step's admissions that a full cache preempts again before the next completion frees room.

    Where the running requests use more of the cache than their reservations (those past the reserved share
    of their output), the engine admits while the free cache holds a request's reservation ``want`` and
    allocates only its prompt: the room left after the last admission is its reserved output (``cushion``)
    plus less than its prompt (spread evenly). The running decodes eat that room at one token each an
    iteration; if no request finishes before it is gone, the engine preempts the latest admitted. With the
    step's completions as a Poisson stream (rate ``r`` an iteration over ``n`` running), the chance is
    ``exp(-r c / n)`` for a room of ``c``, averaged over the even spread. The fluid's smooth completions
    miss this: in the simulation of Llama-3.1-70B FP8 on four H100s under vLLM, 256 clients of 1,024/8,192
    tokens, 60 % of the preemptions take requests fewer than 820 tokens after their admission.
    """
    leaving = (mass * (1 - stay)).sum(axis=1)
    running = mass.sum(axis=1)
    bound = (mass * (held + grow)).sum(axis=1) > reserved.sum(axis=1)  # the cache's use gates admission
    admitted = back.copy()
    admitted[:, 0] += new
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        per_token = (leaving / dt / np.maximum(running, 1e-300))[:, None]  # completions per token of growth
        spread = per_token * held
        chance = np.exp(-per_token * cushion) * np.where(spread > 1e-9, -np.expm1(-spread) / spread, 1.0)
    again = np.where(bound[:, None] & (admitted > 0), admitted * chance, 0.0)
    return mass - again, reserved - again * want, preempted + again
