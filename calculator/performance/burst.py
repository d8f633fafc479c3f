"""Prompts that arrive at once: the iterations that prefill them and where their first tokens fall.

A closed-loop benchmark's first burst (every client's prompt at once), each round of identical requests kept in
waves, and the prompts a cache admits together in :func:`~calculator.performance.cache.group_cache_run` are
prefilled budget by budget: a chunking engine fills every iteration, an engine that does not chunk takes whole
prompts, as many as fit (at least one).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import _bisection
from .arrays import StepArrays
from .engines import Efficiency
from .iteration import _iteration_seconds
from .scheduler import SchedulerRules
from .speculation import PLAIN, Rounds

#: Bursts of up to this many iterations have their first tokens summed iteration by iteration.
_EXACT_BURST = 64


def burst_seconds(
    a: StepArrays,
    eff: Efficiency,
    rules: SchedulerRules,
    tp: np.ndarray,
    prompts: np.ndarray,
    inputs: np.ndarray,
    speculative: Rounds = PLAIN,
) -> tuple[np.ndarray, ...]:
    """A burst of ``prompts`` prompts of ``inputs`` tokens prefilled from an idle engine.

    The engine's ``rules`` give the tokens an iteration takes over its attention ranks.
    The first iteration is prompts alone. Under a mixing engine the burst's prompts decode from the iteration
    after their prefill, beside the later ones, and take a token of the budget each (about half the burst on
    average: an engine that does not chunk fits one whole prompt fewer where they filled the budget exactly);
    a prefill-first engine runs the whole burst first. Returns ``(G, the mean iteration of a first token, the
    mean time from the burst's start to a first token (s), the burst's mean iteration (s))`` (see
    :func:`burst_first_token`); a later chunk of a prompt attends to its earlier ones. The prompts decoding
    beside the later ones run ``speculative`` (:class:`~calculator.performance.speculation.Rounds`).
    """
    per_first, prior_first = _packing(rules, inputs, rules.room(0.0, closed_form=True))
    # the first stage: the iterations up to the first prompt's first token, prompts alone at the full budget
    stage = np.maximum(np.ceil(1.0 / per_first * (1 - 1e-12)), 1.0)
    staged = stage * per_first
    decodes = np.zeros_like(staged)
    if rules.mixed:  # the prompts through by then and later, decoding beside the rest: their mean
        decodes = np.where(prompts > staged, np.clip((staged + prompts - per_first) / 2, staged, prompts), 0.0)
    room = rules.room(decodes, closed_form=True)
    per_iteration, prior = _packing(rules, inputs, room)
    iterations, mean_iteration, last_share = burst_first_token(prompts, per_iteration, inputs, room, per_first)
    later = iterations > stage
    first_prompts = np.minimum(per_first, prompts)
    done = np.where(later, staged + (iterations - stage - 1) * per_iteration, (iterations - 1) * per_first)
    full_tokens = np.where(later, per_iteration, first_prompts) * inputs
    last_tokens = (prompts - done) * inputs
    t_first = _iteration_seconds(a, eff, tp, 0, 0, first_prompts * inputs, np.maximum(first_prompts, 1.0), prior_first)
    t_full, t_last = (
        speculative.iteration(
            a, eff, tp, np.where(later, decodes, 0.0), inputs, tokens, np.maximum(tokens / inputs, 1.0),
            np.where(later, prior, prior_first),
        )
        for tokens in (full_tokens, last_tokens)
    )  # fmt: skip
    start = np.where(later, stage * t_first, 0.0)  # the later iterations' start
    base = np.where(later, stage, 0.0)
    first = start + (mean_iteration - base) * t_full - last_share * (t_full - t_last)
    mean = (start + (iterations - base - 1) * t_full + t_last) / iterations
    return iterations, mean_iteration, first, mean


def _packing(rules: SchedulerRules, inputs: np.ndarray, budget: Any) -> tuple[np.ndarray, np.ndarray]:
    """Prompts' worth of tokens an iteration of ``budget`` tokens for prompts takes, and a chunk's mean earlier tokens.

    A chunking engine fills the ``budget``; one that does not chunk takes whole prompts, as many as fit a rank's
    share, one at least. A later chunk attends to its prompt's earlier ones.
    """
    ranks = rules.ranks
    per_rank = budget / ranks
    if not rules.chunked:
        return np.maximum(np.floor(per_rank / inputs), 1.0) * ranks, np.zeros_like(inputs)
    # k full chunks of p tokens and a rest of r: the tokens' mean earlier tokens of their prompt (a rest of a few
    # tokens adds next to nothing, where a count of equal pieces would jump with it)
    full = np.floor(inputs / per_rank)
    rest = inputs - full * per_rank
    return budget / inputs, (per_rank * per_rank * full * (full - 1) / 2 + rest * full * per_rank) / inputs


def burst_first_token(
    prompts: np.ndarray, per_iteration: np.ndarray, inputs: np.ndarray, budget: Any, first: Any = None
) -> tuple[np.ndarray, ...]:
    """The burst's iterations, and where its prompts' first tokens fall in them.

    ``prompts`` arrive at once; the ``s = ceil(1 / m1)`` iterations up to the first prompt's first token (one
    where a prompt fits an iteration) take ``m1 = first`` prompts' worth each (default: ``m``), the later ones
    ``m = per_iteration`` each, full ones first: by the end of iteration ``g > s`` the first tokens of
    ``floor(s m1 + (g - s) m)`` prompts have come (``floor(g m1)`` before; a chunking engine's with the iteration
    holding a prompt's last token, a prompt of several chunks waiting for all of them). Over the ``N`` prompts
    and ``G = s + ceil((N - s m1) / m)`` iterations (``ceil(N / m1)`` where ``N <= s m1``) the mean iteration of
    a first token is ``G - S / N``, ``S`` the sum of those counts over ``g < G`` (for ``s = 1``:
    ``(G - 1) m1 + m (G - 1) (G - 2) / 2``) less the fractional parts, which for ``m = a / b`` in lowest terms
    average ``(b - 1) / (2 b)`` (a whole number of prompts an iteration: none; prompts of two full budgets: 1/4).
    ``m`` is ``budget / inputs`` for a chunking engine (``b`` from the prompt's and budget's tokens) and a whole
    number otherwise. Returns ``(G, the mean iteration count, the share of the prompts whose first token comes
    with the last iteration)``: those have it at the end of the full ones plus the last one's own (shorter) time.
    """
    n, m = prompts, per_iteration
    m1 = m if first is None else first
    stage = np.maximum(np.ceil(1.0 / m1 * (1 - 1e-12)), 1.0)  # the iterations at m1: up to the first first token
    staged = stage * m1
    later = n > staged * (1 + 1e-12)
    iterations = np.where(
        later, stage + np.ceil((n - staged) / m * (1 - 1e-12)), np.maximum(np.ceil(n / m1 * (1 - 1e-12)), 1.0)
    )
    whole = np.isclose(m, np.round(m))
    tokens, room = (np.maximum(np.round(v), 1).astype(np.int64) for v in (inputs, budget))
    denominator = np.where(whole, 1, tokens // np.gcd(tokens, room))
    fraction = (denominator - 1) / (2 * denominator)
    k = np.minimum(stage, iterations - 1)
    j = np.maximum(iterations - 1 - stage, 0.0)
    below = m1 * k * (k + 1) / 2 + j * staged + m * j * (j + 1) / 2 - (iterations - 1) * fraction

    def done(g: Any) -> Any:  # prompts whose first token has come by the end of iteration g
        return np.floor(np.where(g <= stage, g * m1, staged + (g - stage) * m) * (1 + 1e-12))

    # a short burst (a few iterations, part of a cycle of the fractional parts): the sum itself
    g = np.arange(1, _EXACT_BURST, dtype=float).reshape((-1,) + (1,) * np.ndim(iterations))
    exact = np.where(g < iterations, done(g), 0.0).sum(axis=0)
    mean = iterations - np.where(iterations <= _EXACT_BURST, exact, below) / n
    return iterations, mean, (n - done(iterations - 1)) / n


def staggered_round(
    a: StepArrays,
    eff: Efficiency,
    rules: SchedulerRules,
    tp: np.ndarray,
    held: np.ndarray,
    inputs: np.ndarray,
    context: np.ndarray,
    slots: np.ndarray,
    path: np.ndarray,
    t_decode: np.ndarray,
    speculative: Rounds = PLAIN,
) -> tuple[np.ndarray, np.ndarray]:
    """A round after the first of identical requests under an engine that mixes prompts into decode iterations.

    The first burst's groups (the prompts one iteration takes, or one prompt over several iterations) start
    decoding one group's iterations apart, so they finish as far apart, round after round. The first group's
    prompts come back ``path`` after their completion and wait for the rest of the iteration in flight (the
    decode iteration ``t_decode`` less the path where the path is shorter, else half of one on average) and,
    under an overlap scheduler, one more: meanwhile the decode iterations stay short and more groups finish,
    ``b`` of them before the first long iteration (a group's prompts beside the others' decodes) starts. From
    then on every long iteration prefills one group and completes another, so the ``b`` groups queued stay
    queued: a later group's first token comes ``b`` long iterations after its completion (more where a round's
    groups outnumber its decode iterations). A request's decode iterations include the other groups' long
    ones. Where the prompt budget binds, no more requests decode at once than the groups prefilled over a
    request's decode steps; the rest wait in the engine's queue. Returns the round's mean TTFT from the clients'
    sending (the ``path`` included) and its decode iteration (s; a speculative round under ``speculative``, ``slots``
    of them a request).
    """

    # The requests decoding beside a group's iteration take a token of the budget each: the held ones but the
    # group (a group of about a budget's prompts, one at least), or, where the prompt budget binds, those its groups
    # prefill over a request's decode steps, the rest waiting in the engine's queue: `slots` times the prompts an
    # iteration takes beside them, which fall as they rise (the fixed point, by bisection).
    def packing(decoding: np.ndarray) -> tuple[np.ndarray, ...]:
        per, prior = _packing(rules, inputs, rules.room(decoding, closed_form=True))
        return per, prior, np.minimum(np.maximum(per, 1.0), held)

    low, _ = _bisection(
        np.zeros_like(held), np.maximum(held - 1.0, 0.0), lambda d: d <= slots * np.minimum(packing(d)[0], held)
    )
    per_iteration, prior, group = packing(np.maximum(held - np.maximum(rules.token_budget / inputs, 1.0), 0.0))
    bound = low < held - group
    decoding = np.where(bound, low, held - group)
    per_iteration, prior, group = (
        np.where(bound, b, f) for b, f in zip(packing(low), (per_iteration, prior, group), strict=True)
    )
    budget_left = rules.room(decoding, closed_form=True)
    # A group: the prompts one iteration takes, or one prompt over several iterations (its first token with the
    # last), and its iterations.
    groups = np.maximum(np.ceil(held / group * (1 - 1e-12)), 1.0)
    taken = np.minimum(per_iteration, held)
    iterations = np.maximum(1.0 / per_iteration, 1.0)
    t_iteration = speculative.iteration(
        a, eff, tp, np.maximum(decoding, 0.0), context, taken * inputs, np.maximum(taken, 1.0), prior
    )
    t_long = iterations * t_iteration
    # a prompt over several iterations has its first token with the iteration that holds its last token: the
    # prompts' iterations are whole (ceil(j k) for the j-th at k iterations a prompt), on average this many more
    several = per_iteration < 1
    _, mean_iteration, _ = burst_first_token(held, per_iteration, inputs, budget_left)
    spill = np.where(several, np.maximum(mean_iteration - (held + 1) / 2 / per_iteration, 0.0), 0.0) * t_iteration
    # The decode iterations between the first group's completion and its long iteration (the one in flight
    # when its prompts arrive, which started at the completion, and the overlap scheduler's), each completing
    # a group; once the other groups have finished the engine idles and starts the prompts as they arrive.
    lag = rules.lag_iterations
    apart = iterations * t_decode  # between two groups' completions (a group's iterations)
    draining = (groups - 1) * apart  # until the last group finishes
    in_flight = t_decode * np.maximum(path / np.maximum(t_decode, 1e-300) + 0.5, 1.0)  # (a shorter path: the rest)
    start = np.where(draining <= path, path, np.minimum(in_flight + lag * t_decode, draining))
    back = np.minimum(1.0 + start / np.maximum(apart, 1e-300), groups)  # the groups back by then
    queued = np.maximum(back, groups - slots)  # a later group's long iterations to wait
    # per group in the order they come back: the first ones wait for the short iterations left and the long
    # ones of the groups ahead and their own (j of them), the later ones for the `queued` long iterations
    units = back * (back + 1) / 2 + (groups - back) * queued
    total = back * start - apart * back * (back - 1) / 2 + t_long * units
    last_units = np.where(groups > back, queued, groups)
    last = np.where(groups > back, 0.0, start - (groups - 1) * apart) + last_units * t_long
    extra = groups * group - held  # the last group's missing prompts
    ttft = (group * total - extra * last) / held + spill
    # a round holds every group's long iteration(s) once (`held / group` of them, the last group's a part): those
    # not in a request's wait are in its decode steps, each of a group's iterations one of them (the others
    # decode beside its chunks); where the groups' iterations outnumber a request's decode steps (the prompt
    # budget binds and the other prompts queue), every decode step is a long one
    waited = (group * units - extra * last_units) / held + spill / np.maximum(t_long, 1e-300)
    steps = np.minimum(iterations * np.maximum(held / group - waited, 0.0), slots)
    tpot = t_decode + steps * np.maximum(t_iteration - t_decode, 0.0) / slots
    return ttft, tpot
