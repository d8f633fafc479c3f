"""The closed-loop benchmark: what a serving benchmark reports at a client concurrency (:func:`predict_benchmark`).

Engines run iteration-level continuous batching with a token budget per iteration (vLLM
``max_num_batched_tokens``, SGLang ``chunked_prefill_size``, TensorRT-LLM ``max_num_tokens``), admit
waiting requests once per iteration while KV memory allows, and either mix prefill chunks into decode
iterations (vLLM, TensorRT-LLM) or run prefill batches that pause decoding (SGLang). A closed-loop
benchmark starts all clients at once and sends about ten requests per client; the model
(:func:`closed_loop_seconds`) follows the prefill groups that burst creates through the run (see
``docs/performance-model.md``).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import MAX_CV, check_broadcast, model_of
from ..errors import InputError
from ..formula import magnitude
from ..results import Result
from ..serving import held_output
from ..types import AcceleratorRef, Count, ModelRef, Rate, Time, TokenRate, Tokens
from ..units import Q_
from ._common import _counts, _efficiency, _plain_arrays, _step_inputs, checked_tp, replica_layout
from .arrays import StepArrays, step_arrays
from .burst import burst_seconds, staggered_round
from .cache import group_cache_run
from .cycle import _operating_point, _Scheduler
from .engines import Efficiency, EngineProfile, engine_profile, kv_capacity_tokens
from .iteration import pipeline_pass_seconds, prefill_seconds
from .scheduler import SchedulerRules, scheduler_rules
from .speculation import PLAIN, Rounds, speculative_rounds

if TYPE_CHECKING:
    from ..registry import Registry
    from ..serving import Speculation


__all__ = [
    "ARRIVALS",
    "BENCHMARK_UNITS",
    "BenchmarkPrediction",
    "predict_benchmark",
]


# --------------------------------------------------------------------------------------------
# Closed-loop benchmark


@dataclass(frozen=True, repr=False)
class BenchmarkPrediction(Result):
    """What a closed-loop serving benchmark would report (means over the run), with its error band.

    Attributes
    ----------
    ttft, tpot : Quantity [time]
        Mean time to first token and mean time per output token after the first.
    ttft_interval, tpot_interval : tuple of Quantity
        ``(low, high)``: the range that held the measured value in 80-85 % of cross-validated
        predictions, and both values together in about 75 % (``calculator.uncertainty``); wider
        away from the H100 and where the accelerator has no kernel tables.
    throughput : Quantity [request / time]
        Completed requests per second.
    output_throughput : Quantity [token / time]
        Output tokens per second (whole replica).
    throughput_interval, output_throughput_interval : tuple of Quantity
        ``(low, high)`` of the two rates: each client's request cycle (first token, then the tokens after it)
        rebuilt with its first-token part at the ends of ``ttft_interval`` and its decoding part at those of
        ``tpot_interval``, so they hold as often as the two intervals hold together (about 75 %).
    active_batch : float or array
        Sequences decoding together (the concurrency, or the KV-cache limit if lower).
    max_concurrency : float or array
        Sequences the KV cache admits at the benchmark's lengths under the engine's policy.
    memory_limited : bool or array
        True where clients wait for a KV slot: the KV cache holds fewer requests than the concurrency
        (``max_concurrency``) and binds before the engine's sequence cap (or together with it).
    sequence_limited : bool or array
        True where clients wait for a slot of the engine's sequence cap (``max_num_seqs``), which binds before
        the KV cache: more memory would not hold more requests.
    cache_pressure : bool or array
        True where the requests the engine holds, finishing together as a benchmark's clients do, would
        need more KV cache than there is under an engine that admits on part of the output and preempts
        (vLLM, SGLang): ``B`` times the group's peak, ``I + O`` at fixed lengths and lower with a
        ``length_cv`` (the requests with short outputs finish before the others peak). With a
        ``length_cv`` the prediction follows the group's cache through the run (preemptions included);
        without one it counts the mixed state's occupancy, and near the cache's limit the TTFT can be
        several times higher (``docs/performance-model.md``, "Decisions and limits").
    prefill_time, decode_step_time : Quantity [time]
        One prompt's prefill alone and the decode step at the active batch.
    engine : str
        The engine profile used.
    kv_precision : str
        The KV cache's precision (given, or the engine's default for the weights).
    measured_kernels : bool
        True when the step times come from kernel measurements of this accelerator and precision;
        False when they are the generic efficiency curve at the registry peaks.
    release_note : str
        The engine release priced and what its costs rest on (``EngineProfile.release_note``; empty where the
        profile states no release).
    release_fitted : bool
        Whether benchmarks of that release were in the fit (``EngineProfile.release_fitted``).
    batch_note : str
        Where the busiest rank runs more sequences than the engine's costs were fitted on
        (``EngineProfile.fitted_batch``), in words; empty elsewhere.
    vision_note : str
        For a model with a vision encoder (``Model.vision_parameters``): that its weights are in memory but the
        per-image prefill work is not priced; empty for a text-only model.
    streaming_note : str
        For a run without streaming (``streaming=False``), what that changes for the engine
        (``EngineProfile.streaming_note``); empty for a streamed run.
    streaming : bool
        Whether the run priced streams every token to its client.
    load_note : str
        Where the engine quantizes the 16-bit checkpoint as it loads it and its memory policy cannot hold the 16-bit
        weights (the sizer's ``load`` rejection), in words; empty where the weights load as priced.
    """

    ttft: Time
    tpot: Time
    ttft_interval: tuple[Time, Time]
    tpot_interval: tuple[Time, Time]
    throughput: Rate
    output_throughput: TokenRate
    throughput_interval: tuple[Rate, Rate]
    output_throughput_interval: tuple[TokenRate, TokenRate]
    active_batch: Count
    max_concurrency: Count
    memory_limited: bool | np.ndarray
    sequence_limited: bool | np.ndarray
    cache_pressure: bool | np.ndarray
    prefill_time: Time
    decode_step_time: Time
    engine: str
    kv_precision: str
    measured_kernels: bool
    release_note: str = ""
    release_fitted: bool = False
    load_note: str = ""
    batch_note: str = ""
    vision_note: str = ""
    streaming_note: str = ""
    streaming: bool = True

    def caveats(self) -> tuple[str, ...]:
        """Where this prediction is less certain than its intervals say, in sentences (none: as stated).

        The intervals come from every cross-validated prediction; the memory-limited ones were off by far more
        (``docs/performance-model.md``, "Decisions and limits"), and a group that outgrows the cache without a
        length spread is priced at the mixed state's occupancy.
        """
        notes = []
        if np.any(self.memory_limited):
            note = (
                "Where the KV cache limits the batch the model is least certain: on the memory-limited H100 "
                "benchmarks the measured TTFT ranged from a third of the prediction (vLLM, 1,024/8,192 tokens) to "
                "eight times it (SGLang, Qwen3-32B on one GPU), often outside these intervals."
            )
            if self.engine == "vllm":
                note += (
                    " vLLM admits a request on its prompt alone and preempts the newest when the cache runs out: with "
                    "outputs several times the prompts, part of the wait falls after the first token (a lower TTFT "
                    "and a higher TPOT than shown)."
                )
            notes.append(note)
        if np.any(self.cache_pressure):
            notes.append(
                "Requests that finish together would outgrow the cache at some of these points. Where no length "
                "spread is given (length_cv), the prediction counts the mixed state's occupancy there, and near the "
                "cache's limit TTFT can be several times higher."
            )
        if self.load_note:
            notes.append(self.load_note)
        if self.batch_note:
            notes.append(self.batch_note)
        if self.streaming_note:
            notes.append(self.streaming_note + ".")
        if self.vision_note:
            notes.append(self.vision_note)
        if self.release_note and not self.release_fitted:
            notes.append(self.release_note[:1].upper() + self.release_note[1:] + ".")
        return tuple(notes)


#: The units a benchmark prediction is shown in (``BenchmarkPrediction.to_frame(BENCHMARK_UNITS)``: the CLI's
#: ``predict`` rows and the dashboard's table).
BENCHMARK_UNITS = {
    "ttft": "ms",
    "ttft_interval.low": "ms",
    "ttft_interval.high": "ms",
    "tpot": "ms",
    "tpot_interval.low": "ms",
    "tpot_interval.high": "ms",
    "throughput": "request/s",
    "throughput_interval.low": "request/s",
    "throughput_interval.high": "request/s",
    "output_throughput": "token/s",
    "output_throughput_interval.low": "token/s",
    "output_throughput_interval.high": "token/s",
    "prefill_time": "ms",
    "decode_step_time": "ms",
}

#: Requests each client sends in a benchmark run (the usual harness sends about ten times the
#: concurrency): the burst of the first wave is averaged over this many requests per client.
REQUESTS_PER_CLIENT = 10

#: How a benchmark's clients meet each other (a property of the harness, not of the engine):
#: ``"dispersed"`` (default): requests vary a little in length or timing, so after the first burst each
#: request arrives as at a random moment and meets the others only by chance; ``"waves"``: identical
#: requests started together stay together: every round is a burst of all clients under a prefill-first
#: engine, the first round only under a mixing engine (its groups come back staggered, one iteration apart).
ARRIVALS = ("dispersed", "waves")


def closed_loop_seconds(  # noqa: PLR0913  # the benchmark model's entry point: its keyword options are the API
    a: StepArrays,
    profile: EngineProfile,
    tp: Any,
    input_tokens: Any,
    output_tokens: Any,
    concurrency: Any,
    efficiency: Efficiency | None = None,
    requests_per_client: float = REQUESTS_PER_CLIENT,
    arrivals: Any = "dispersed",
    client_overhead: Any = 0.0,
    length_cv: Any = None,
    cache_run: bool = True,
    speculative: Rounds = PLAIN,
) -> dict[str, Any]:
    """The closed-loop benchmark model on plain arrays (seconds); see :func:`predict_benchmark`.

    ``arrivals`` is ``"dispersed"``, ``"waves"`` or a boolean array (True: waves) over the rows;
    ``client_overhead`` (seconds, scalar or per row) is the harness's own latency per request;
    ``length_cv`` (scalar or per row; ``None``, or ``inf`` for a row: mixed from the second round on) the
    spread of the requests' lengths that mixes the clients after the first burst. The arrays are checked
    (finite, at least 1; the overhead at least 0) and must broadcast together. Where such a spread is given, or
    the requests are identical in waves, and the cache binds (clients beyond what it admits, or a group that would
    outgrow it finishing together), the cache admission follows the group through the run
    (:func:`~calculator.performance.cache.group_cache_run`; ``cache_run=False`` keeps the mixed state's slot
    wait there, as the calibration's fit does for speed). ``speculative``: how a decode iteration runs
    (:class:`~calculator.performance.speculation.Rounds`): under speculative decoding it is a round, a request's
    decode ``(O - 1) / E`` of them, and the TPOT a round over ``E``.
    """
    _step_inputs("closed_loop_seconds", a, profile, "profile", EngineProfile)
    eff = profile.efficiency if efficiency is None else _efficiency(profile, efficiency)
    _check_requests_per_client("closed_loop_seconds", requests_per_client)
    given = {"tp": (tp, 1.0), "input_tokens": (input_tokens, 1.0), "output_tokens": (output_tokens, 1.0)}
    given |= {"concurrency": (concurrency, 1.0), "client_overhead": (client_overhead, 0.0)}
    tp, inputs, outputs, clients, extra, spread = _plain_arrays(
        "closed_loop_seconds", given | {"length_cv": (np.inf if length_cv is None else length_cv, None)}
    )
    if not np.all((spread >= 0) & ((spread <= MAX_CV) | (spread == np.inf))):  # NaN fails too
        raise InputError(
            f"closed_loop_seconds(): argument 'length_cv' must be in [0, {MAX_CV:g}] (inf for a row: no spread given)"
        )
    shape = tp.shape
    tp, inputs, outputs, clients, extra, spread = (v.ravel() for v in (tp, inputs, outputs, clients, extra, spread))
    # A request's decode iterations: its output after the first token, E tokens a round under speculation.
    slots = speculative.rounds_for(np.maximum(outputs - 1, 1.0))  # decode iterations a request takes
    waves = _waves(arrivals, clients.shape)  # identical requests: no spread
    # The running sequences' mean context, length-biased where the lengths spread (as the sizer's Workload.held_context)
    context = inputs + held_output(outputs, np.where(waves, 0.0, spread))
    # Admission: KV for the prompt plus the reserved share of the output; a sequence cap. A drafter's weights
    # and KV take their share of the cache.
    kv_tokens = speculative.kv_tokens(a, tp, kv_capacity_tokens(a, profile, tp))
    ranks = float(np.max(tp / a.attention_group(tp)))  # attention ranks: each schedules its own budget and cap
    rules = scheduler_rules(profile, a.memory, a.accelerator, ranks, kv=a, decode_tokens=speculative.verified)
    kv_limit = np.floor(kv_tokens / rules.admission_tokens(inputs, outputs, spread))
    max_seqs = rules.max_sequences
    held = np.maximum(np.minimum(np.minimum(clients, kv_limit), max_seqs), 1.0)
    overhead = profile.request_overhead.m_as("s") + extra  # the engine's request path and the harness's
    scheduler = _Scheduler(
        a, eff, rules, tp, inputs, slots, clients, context, held, overhead, spread, speculative=speculative
    )

    # The operating point: the decoding population n where the clients' cycle closes.
    running = _operating_point(scheduler)
    steady = scheduler.terms(running)
    # Where the budget caps the decoding population, the clients the cycle leaves over wait for the
    # full iterations in the engine's queue (Little's law at the engine's rate).
    leftover = np.maximum(-steady.gap, 0.0) / np.maximum(steady.rate, 1e-300)
    steady.wait = steady.wait + leftover
    # The first burst: every client's prompt at once, prefilled budget by budget; weighs one round (see
    # :func:`_aftermath`).
    burst_iterations, mean_iteration, burst_first, t_burst = burst_seconds(a, eff, rules, tp, held, inputs, speculative)
    first = overhead + burst_first
    ttft = overhead + steady.wait
    after = _aftermath(
        scheduler, running, ttft, first, _iterations_spread(speculative, spread, outputs), burst_iterations,
        requests_per_client,
    )  # fmt: skip
    ttft = ttft + (np.maximum(first - ttft, 0.0) + after) / requests_per_client
    # A prompt that waits for a slot (below) is at the engine when a completion frees one, at an iteration's end,
    # and the next iteration takes it: after the slot wait, no landing phase, no overlap lag, no prompts queued
    # ahead but the budget's, and the rounds crowded after the burst only lengthen the slot queue. A slot frees
    # at the end of an iteration after the one the prompt lands in, so the slot wait covers what an arriving
    # prompt waits, and the TTFT is the longer of the two ways (where the queue is short, the arriving one).
    # Where fewer than one client waits beyond what the engine holds (or it waits for the cache a group outgrows,
    # followed below), the slot wait adds to the arriving prompt's, as much as the clients beyond fall short of one.
    admitted = overhead + steady.admitted + leftover
    admitted = admitted + np.maximum(first - admitted, 0.0) / requests_per_client
    tpot, rate = steady.step, steady.rate  # a decode iteration (a round under speculation; TPOT its share, below)
    if np.any(waves):
        waved = _in_waves(scheduler, (burst_iterations, mean_iteration, t_burst), first, requests_per_client)
        ttft, tpot, rate = (np.where(waves, w, d) for w, d in zip(waved, (ttft, tpot, rate), strict=True))
    # Clients beyond what the engine holds wait for a slot (Little's law at the engine's rate). The first
    # round's prompts all arrive at once and leave the queue one by one as slots free, so they wait half as
    # long on average (the first get a slot at once); every later round meets the full queue.
    queue = np.maximum(clients - held - rate * overhead, 0.0)
    full_queue = queue / np.maximum(rate, 1e-300)
    slot_wait = full_queue * (requests_per_client - 1 + queue / (2 * clients)) / requests_per_client
    # The group followed through the run: lengths spread a little, or identical requests in waves (no spread).
    run_spread = np.where(waves, 0.0, spread)
    peak = _group_peak(*_kv_lengths(rules, inputs, outputs, run_spread), run_spread)
    pressure = (rules.output_reservation < 1) & (held * peak > kv_tokens)
    group = (waves | (np.isfinite(spread) & (spread > 0))) & (kv_limit >= 1) & ((clients > kv_limit) | pressure)
    followed, run_rate = np.zeros_like(group), np.zeros(0)
    if cache_run and np.any(group):
        followed, run_rate = _followed_run(
            a, eff, rules, tp, (inputs, outputs, clients, run_spread, kv_tokens), requests_per_client, waves, group,
            (overhead, slot_wait, ttft), speculative,
        )  # fmt: skip
    admitted = np.where(waves, ttft, admitted)  # a wave's slot wait adds to its own first token
    slotted = np.minimum(queue, 1.0)

    def with_slot_wait(wait: np.ndarray) -> np.ndarray:
        return (1.0 - slotted) * (ttft + wait) + slotted * np.maximum(ttft, admitted + wait)

    throughput = clients / (with_slot_wait(full_queue) + slots * tpot)  # every client has one request in flight
    ttft = with_slot_wait(slot_wait) + _pass_beyond(a, eff, rules, tp, running, context, inputs)
    if np.any(followed):  # the run's requests over its span, the drain at the end included
        throughput[followed] = run_rate
    out = {
        "ttft": ttft,
        "tpot": tpot * slots / np.maximum(outputs - 1, 1.0),  # an iteration's share of each token after the first
        "throughput": throughput,
        "active_batch": held,
        "running": np.where(waves, held, running),
        "max_concurrency": kv_limit,
        # clients beyond what the engine holds, the KV cache or the sequence cap binding first
        "memory_limited": (clients > held) & (kv_limit <= max_seqs),
        "sequence_limited": (clients > held) & (kv_limit > max_seqs),
        # requests that finish together hold up to their group's peak each: beyond the cache an engine that admits
        # on part of the output preempts, which the mixed state's occupancy does not count (docs/performance-model.md)
        "cache_pressure": pressure,
        "prefill": prefill_seconds(a, eff, tp, inputs),
        "decode_step": speculative.iteration(a, eff, tp, held, context),
    }
    return {key: value.reshape(shape) for key, value in out.items()}


def _followed_run(
    a: StepArrays, eff: Efficiency, rules: SchedulerRules, tp: np.ndarray, rows: tuple[np.ndarray, ...],
    requests_per_client: float, waves: np.ndarray, group: np.ndarray, waits: tuple[np.ndarray, ...],
    speculative: Rounds,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A group that finishes together: the cache followed through the run (:func:`group_cache_run`).

    ``rows``: the inputs, outputs, clients, length spread and KV tokens of every row; ``group``: the rows to follow.
    ``waits``: the request path, the slot wait and the TTFT, the last two set in place on the rows followed. In
    waves a prefill-first engine's admissions are bursts of their own, the prompts the cache admits together (a
    mixing engine's groups stay staggered, their admission wait on top). Returns the rows followed and their
    throughput.
    """
    inputs, outputs, clients, run_spread, kv_tokens = rows
    overhead, slot_wait, ttft = waits
    bursts = waves & (not rules.mixed)
    wait, run_rate, behind, own = group_cache_run(
        a, eff, rules, tp[group], inputs[group], outputs[group], clients[group], run_spread[group],
        kv_tokens[group], requests_per_client, bursts[group], speculative,
    )  # fmt: skip
    kept = np.isfinite(wait)
    followed = np.zeros_like(group)
    followed[group] = kept
    slot_wait[followed] = (wait + behind)[kept]
    ttft[followed & bursts] = overhead[followed & bursts] + own[kept & bursts[group]]
    return followed, run_rate[kept]


def _in_waves(
    scheduler: _Scheduler, burst: tuple[np.ndarray, ...], first: np.ndarray, requests_per_client: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT, decode iteration and throughput where the clients send in waves.

    ``scheduler``: the engine and the requests (its fields, not its mixed state); ``burst``: the first burst's
    iterations, the mean iteration of a first token and its mean iteration's seconds; ``first``: its mean TTFT.
    """
    s = scheduler
    a, eff, rules, tp, held, inputs, context = s.a, s.eff, s.rules, s.tp, s.held, s.inputs, s.context
    slots, overhead, speculative = s.slots, s.overhead, s.speculative
    burst_iterations, mean_iteration, t_burst = burst
    # Every round is a burst: groups of the budget one after another; a request's first token
    # waits for the groups ahead, its decode steps for the ones behind (prefill-first engines pause
    # decoding for them, mixing engines add them to the decode iterations): the burst's iterations
    # after its own first token, G - mean_iteration ((G - 1) / 2 for whole groups; none for one
    # prompt in several chunks).
    t_batch = speculative.iteration(a, eff, tp, held, context)
    lift = np.maximum(t_burst - t_batch, 0.0) if rules.mixed else t_burst
    wave_tpot = t_batch + (burst_iterations - mean_iteration) * lift / slots
    wave_rate = held / (overhead + burst_iterations * t_burst + slots * t_batch)
    if rules.mixed:
        # Only the first round is a burst: its groups start decoding one iteration apart and stay staggered.
        later, later_tpot = staggered_round(
            a, eff, rules, tp, held, inputs, context, slots, overhead, t_batch, speculative
        )
        rounds = requests_per_client
        wave_ttft = (first + (rounds - 1) * later) / rounds
        wave_tpot = (wave_tpot + (rounds - 1) * later_tpot) / rounds
        wave_rate = held / (wave_ttft + slots * wave_tpot)
    else:
        wave_ttft = first
    return wave_ttft, wave_tpot, wave_rate


def _iterations_spread(speculative: Rounds, spread: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """The standard deviation of a request's decode iterations (``inf``: no length spread given).

    The output's (``spread`` of ``outputs`` tokens). Under speculative decoding a request's rounds are the
    output's over ``E``, and they vary besides with the acceptance: a round count of ``O - 1`` tokens at
    ``E`` a round, of variance ``v``, has variance ``(O - 1) v / E^3`` (a renewal count's).
    """
    if speculative.drafter is None:
        return spread * outputs
    e = speculative.tokens
    return np.sqrt((spread * outputs / e) ** 2 + np.maximum(outputs - 1, 1.0) * speculative.token_variance / e**3)


#: Rounds after the burst the aftermath follows (:func:`_aftermath`); later rounds count as mixed. A length
#: spread of 0.1 mixes the clients by about the ninth round, 0.05 by about the thirtieth.
_AFTERMATH_ROUNDS = 64
#: A crowding beyond which a round counts as the burst itself (its clients back within a fraction of an iteration).
_WHOLE_BURST = 1e6


def _aftermath(
    scheduler: _Scheduler,
    running: np.ndarray,
    steady: np.ndarray,
    first: np.ndarray,
    spread: np.ndarray,
    burst_iterations: np.ndarray,
    requests_per_client: float,
) -> np.ndarray:
    """The TTFT the rounds after the first burst add above the mixed state, summed over the rounds (seconds).

    The clients start together, so their next requests do not arrive spread over a whole cycle: round
    ``r`` arrives around the burst's iterations, spread by the burst itself (``G`` iterations: variance
    ``(G^2 - 1) / 12``) and by the lengths of the ``r - 1`` requests each client has completed since
    (``spread`` iterations each: the output length's standard deviation), the variances adding up. A
    round spread normally by ``s`` iterations meets its own arrivals at the density ``C / (2 sqrt(pi) s)``
    per iteration, where the mixed state has ``n / (O - 1)``: the ratio crowds the other clients' prompts
    (:class:`_Scheduler`, ``crowd``) until it falls to 1. A crowded round's waits spread the next one
    further (``_Terms.jitter``, their spread in decode iterations). A round never waits longer than the
    burst. ``spread`` of ``inf`` (no length given): mixed from the second round on.
    """
    total = np.zeros_like(steady)
    width = np.maximum(running, 1e-9) * 2 * np.sqrt(np.pi) / scheduler.slots  # per unit of density
    start = (burst_iterations**2 - 1) / 12  # the burst's own spread
    variance = start
    jitter = np.zeros_like(steady)
    rounds = int(min(np.floor(requests_per_client), _AFTERMATH_ROUNDS + 1))
    for _ in range(2, rounds + 1):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            variance = variance + spread**2 + jitter**2  # inf: mixed at once
            crowd = np.where(variance > 0, scheduler.clients / (width * np.sqrt(variance)), np.inf)
        if not np.any(crowd > 1.0):
            break
        # every client back at once (no spread at all): the round is the burst again
        whole = crowd > _WHOLE_BURST
        # A round no more crowded than the mixed state waits no longer than it (its next round is no more
        # crowded either: the spread only grows), and the whole burst back waits as the first: only the rows
        # in between are priced.
        priced = (crowd > 1.0) & ~whole
        in_between, spread_by = np.full_like(steady, np.inf), np.full_like(steady, np.nan)
        if np.any(priced):
            crowded = dataclasses.replace(scheduler, crowd=np.clip(crowd, 1.0, _WHOLE_BURST)).rows(priced)
            with np.errstate(all="ignore"):  # a saturated queue has no finite wait (handled below)
                terms = crowded.terms(running[priced])
            in_between[priced], spread_by[priced] = crowded.overhead + terms.wait, terms.jitter
        # a saturated queue (no finite wait) or the whole burst back: the round waits and spreads as the burst did
        wait = np.where(whole, first, np.where(priced, np.fmin(in_between, first), steady))
        total = total + np.maximum(wait - steady, 0.0)
        jitter = np.where(whole | (priced & ~np.isfinite(spread_by)), np.sqrt(start), np.nan_to_num(spread_by))
    return total


def _load_note(
    spec: Any, accelerator: Any, a: StepArrays, profile: EngineProfile, tp: np.ndarray, layout: tuple, registry: Any
) -> str:
    """Why the replica cannot load the 16-bit checkpoint its engine quantizes as it loads, or "" where it can."""
    from .capacity import load_shortfall, loads_online

    if not loads_online(spec, a.precision, profile):
        return ""
    sixteen = step_arrays(spec, accelerator, "bf16", a.kv_precision, engine=profile, registry=registry)
    laid, group = replica_layout(sixteen, tp, *layout)
    for degree in np.unique(group):
        short = load_shortfall(laid, profile, float(degree) / laid.pipeline_parallel)
        if short is not None:
            weights, usable = short[0] / 1e9, short[1] / 1e9
            return (
                f"{profile.name} loads the 16-bit checkpoint (no {a.precision} checkpoint in the registry) and "
                f"quantizes it as it loads: {weights:,.1f} GB of 16-bit weights per device exceed the {usable:,.1f} GB "
                f"its memory policy uses at {degree:g} GPU(s), so the launch that was priced would not load (the fleet "
                "sizer rejects such a replica; a pre-quantized checkpoint avoids it)."
            )
    return ""


def _no_room(a: StepArrays, tp: np.ndarray, drafter: Any, tensor_parallel: Any, profile: EngineProfile) -> InputError:
    """The error of weights that leave no room for one request's KV cache."""
    weights = float(np.max(a.weights_per_device(tp) + (0.0 if drafter is None else drafter.weights_per_device(tp))))
    return InputError(
        f"predict_benchmark(): the weights ({weights / 1e9:,.1f} GB per device at tensor_parallel "
        f"{tensor_parallel}) leave no room for one request's KV cache on {a.accelerator} under {profile.name}'s "
        "memory policy; use a larger tensor_parallel, a smaller precision or shorter requests"
    )


def _vision_note(spec: Any) -> str:
    """The caveat of a model with a vision encoder: its weights are counted, its images' work is not."""
    if not spec.vision_parameters:
        return ""
    return (
        f"{spec.name} has a vision encoder ({spec.vision_parameters / 1e9:,.2f}B parameters): its weights are in the "
        "memory, but this prediction prices text requests only; each image's prefill (the encoder's pass and the "
        "image's tokens) is not priced."
    )


def _pass_beyond(
    a: StepArrays,
    eff: Efficiency,
    rules: SchedulerRules,
    tp: np.ndarray,
    running: np.ndarray,
    context: np.ndarray,
    inputs: np.ndarray,
) -> np.ndarray:
    """What a prompt's pass through pipeline stages adds to its TTFT (0 without stages): its last chunk's pass.

    The iteration is the pipeline's round (:func:`~calculator.performance.iteration.pipeline_pass_seconds`).
    """
    if a.pipeline_parallel <= 1:
        return np.zeros_like(inputs)
    last = np.minimum(inputs, rules.chunk_size(running)) if rules.chunked else inputs
    return pipeline_pass_seconds(a, eff, tp, running, context, last, 1.0, inputs - last)


def _kv_lengths(
    rules: SchedulerRules, inputs: np.ndarray, outputs: np.ndarray, spread: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A request's prompt and output as the KV they hold: whole blocks, and sliding-window layers capped.

    The prompt's KV with its last block's slack; the output's, what decoding adds to it (a windowed layer's
    part stops growing once the window is full: exact for prompts at least a window long).
    """
    kept = rules.kv_tokens(inputs)
    grown = outputs if not rules.window_share else rules.kv_tokens(inputs + outputs) - kept
    return kept + rules.block_slack(kept, spread), grown


def _group_peak(inputs: np.ndarray, outputs: np.ndarray, length_cv: np.ndarray) -> np.ndarray:
    """The most KV tokens a request holds on average while a group started together decodes in step.

    At ``p`` tokens into their outputs the requests still running hold ``I + p`` each, and those whose output
    (spread normally by ``length_cv``) is longer than ``p`` still run: the peak of ``(I + p) P(L > p)`` over
    ``p``. Fixed lengths (0), or none given (``inf``: a harness's fixed lengths are the worst case): ``I + O``.
    """
    from scipy.special import ndtr

    inputs, outputs, cv = (np.asarray(v, dtype=float)[None] for v in (inputs, outputs, length_cv))
    x = np.linspace(0.0, 1.0, 201).reshape((-1,) + (1,) * (inputs.ndim - 1))  # the share of the output decoded
    fixed = ~(np.isfinite(cv) & (cv > 0))
    with np.errstate(over="ignore"):  # a spread of 1e-300: every request runs to the end (ndtr(inf) = 1)
        running = np.where(fixed, 1.0, ndtr((1.0 - x) / np.where(fixed, 1.0, cv)))
    return np.max((inputs + x * outputs) * running, axis=0)


def _waves(arrivals: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``arrivals`` as a boolean array over the rows (True: the harness keeps its clients in waves)."""
    if isinstance(arrivals, str):
        if arrivals not in ARRIVALS:
            raise InputError(f"argument 'arrivals' must be one of {', '.join(ARRIVALS)}, got {arrivals!r}")
        return np.full(shape, arrivals == "waves")
    try:
        return np.broadcast_to(np.asarray(arrivals, dtype=bool).ravel(), shape)
    except (TypeError, ValueError):
        raise InputError(
            f"argument 'arrivals' must be one of {', '.join(ARRIVALS)} or a boolean array over the rows {shape}, "
            f"got shape {np.shape(arrivals)}"
        ) from None


def check_length_cv(function: str, value: Any) -> float | None:
    """``length_cv`` of ``function`` checked: ``None`` or a number in ``[0, MAX_CV]``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) <= MAX_CV:
        raise InputError(
            f"{function}(): argument 'length_cv' must be a number in [0, {MAX_CV:g}] (the coefficient of "
            f"variation of the output lengths) or None, got {value!r}"
        )
    return float(value)


def _check_requests_per_client(function: str, value: Any) -> None:
    if isinstance(value, bool) or not (isinstance(value, numbers.Real) and 1 <= float(value) < 1e9):
        raise InputError(f"{function}(): argument 'requests_per_client' must be a number >= 1, got {value!r}")


def _interval_ends(
    result: dict[str, Any],
    bands: dict[str, tuple[float, float]],
    extrapolated: Any,
    serial: Any = None,
    unstreamed: Any = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The low and high ends of the TTFT and TPOT intervals: the bands' factors on the prediction.

    Where the busiest rank runs beyond the engine's fitted batch (``extrapolated``), the low end also holds the
    per-sequence cost stopping at that batch (:func:`_beyond_fitted_batch`). Where a run without streaming hides the
    loop's costs behind the GPU (``serial``: the same prediction with them added), the high end also holds that;
    where a run streamed every few iterations may reach the run without streaming (``unstreamed``), the low end.
    """
    low = {k: result[k] * bands[k][0] for k in ("ttft", "tpot")}
    if extrapolated is not None:
        low = {k: np.where(extrapolated.beyond, np.minimum(v, extrapolated.bound[k] * bands[k][0]), v)
               for k, v in low.items()}  # fmt: skip
    if unstreamed is not None:
        low = {k: np.minimum(v, np.asarray(unstreamed[k]) * bands[k][0]) for k, v in low.items()}
    high = {k: result[k] * bands[k][1] for k in ("ttft", "tpot")}
    if serial is not None:
        high = {k: np.maximum(v, np.asarray(serial[k]) * bands[k][1]) for k, v in high.items()}
    return low, high


def _rate_interval(
    clients: np.ndarray,
    outputs: np.ndarray,
    rate: np.ndarray,
    ttft: np.ndarray,
    tpot: np.ndarray,
    low: dict[str, np.ndarray],
    high: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The low and high request rates of a closed loop whose TTFT and TPOT sit at their intervals' ends.

    Each client has one request in flight, so the rate is ``clients / cycle``. The cycle's decoding part is the
    tokens after the first at the TPOT; the rest (the first token, a slot's wait, the harness) is its first-token
    part. Each part is scaled by its interval's factor: the slow ends together give the low rate.
    """
    cycle = clients / np.maximum(rate, 1e-300)
    decoding = np.minimum(tpot * np.maximum(outputs - 1, 0.0), cycle)
    first = cycle - decoding

    def at(ends: dict[str, np.ndarray]) -> np.ndarray:
        scaled = first * ends["ttft"] / np.maximum(ttft, 1e-300) + decoding * ends["tpot"] / np.maximum(tpot, 1e-300)
        return clients / np.maximum(scaled, 1e-300)

    return at(high), at(low)


def predict_benchmark(  # noqa: PLR0913  # public entry point: its keyword options are the API
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    input_tokens: Tokens,
    output_tokens: Tokens,
    concurrency: Count,
    engine: str | EngineProfile | None = None,
    *,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
    requests_per_client: float = REQUESTS_PER_CLIENT,
    arrivals: str = "dispersed",
    client_overhead: Time = None,
    length_cv: float | None = None,
    data_parallel: Count = 1,
    expert_parallel: Count = 1,
    pipeline_parallel: Count = 1,
    redundant_experts: Count = 0,
    speculation: Speculation | None = None,
    streaming: bool | None = None,
    stream_interval: int | None = None,
    registry: Registry | None = None,
) -> BenchmarkPrediction:
    """Mean TTFT and TPOT a closed-loop serving benchmark reports at client concurrency ``C``.

    Parameters
    ----------
    model, accelerator : str or registry object
        Registry ids or aliases (``"Qwen/Qwen3-32B"``, ``"h100_sxm"``) or objects.
    precision : str
        Weight precision (``"bf16"``, ``"fp8"``, ``"int4"``, ``"fp4"``).
    tensor_parallel : int or array
        Devices per replica.
    input_tokens, output_tokens : int or array
        Fixed prompt and output lengths of every request.
    concurrency : int or array
        Clients, each sending its next request when its last one completes; all start together.
    engine : {"vllm", "sglang", "trtllm"} or None
        The serving engine whose scheduler and costs to use; ``None`` uses the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the profile's costs and kernel pricing.
    kv_precision : str, optional
        KV-cache precision; defaults to the one the engine runs for these weights
        (:func:`~calculator.performance.kv_cache_precision`), stated in the result.
    requests_per_client : float
        Requests each client sends in the run (the first wave's burst is averaged over them).
    arrivals : {"dispersed", "waves"}
        How the harness's clients meet (:data:`ARRIVALS`): dispersed by small variations of length or
        timing (default), or kept in waves of identical requests started together. A prefill-first
        engine (SGLang) keeps each round a whole burst; a mixing engine's groups (the prompts one
        iteration takes) finish one iteration apart and come back staggered after the first round
        (``docs/performance-model.md``, "The closed-loop model", step 5).
    client_overhead : Quantity [time], optional
        The harness's own latency per request beyond the engine's request path (its HTTP client,
        pacing); none by default. A benchmark setting, not engine behaviour.
    length_cv : float, optional
        Coefficient of variation of the requests' output lengths over the run (a benchmark setting:
        ``0.1`` for lengths drawn 10 % apart). The clients start together, and this spread is what mixes
        them again: the rounds after the first burst arrive crowded until it has (about eight rounds at
        0.1), and their TTFT counts in the mean. ``None`` (default): mixed from the second round on, the
        dispersed steady state at once. Only with ``arrivals="dispersed"``. The model follows the
        simulator from a spread of about 0.05; below it the clients' groups stay in step longer than it
        counts (TTFT up to 28 % low at 0.02), and identical requests are ``arrivals="waves"``. The spread
        applies to the prompts alike: it sets how many chunks a prompt takes on average (half of the prompts
        around a whole number of budgets take one more) and, for an engine that does not chunk, how many
        whole prompts share an iteration. The running sequences then hold ``I + O (1 + cv^2) / 2`` tokens on
        average (the longer outputs are more often among them). Where the KV cache binds, the group's cache is
        followed through the run (about a second a point).
    data_parallel : int, default 1
        For a mixture of experts: attention ranks of ``tensor_parallel`` GPUs each (attention data
        parallelism, :func:`~calculator.performance.decode_step_time`); each schedules its own token
        budget and sequence cap. The replica is ``tensor_parallel x data_parallel`` GPUs.
    expert_parallel : int, default 1
        For a mixture of experts: GPUs of the replica the routed experts are spread over (expert
        parallelism), each expert split over the others (one ``tensor_parallel``).
    pipeline_parallel : int, default 1
        Pipeline stages, each of ``tensor_parallel x data_parallel`` GPUs with its share of the layers
        (:func:`~calculator.performance.decode_step_time`); at most the model's layers.
    redundant_experts : int, default 0
        Copies of routed experts an expert-parallel load balancer places beside the logical ones
        (:func:`~calculator.performance.decode_step_time`).
    speculation : Speculation, optional
        Speculative decoding (:class:`~calculator.serving.Speculation`): a draft model, the model's MTP layers or
        an EAGLE head drafts ``k`` tokens a round, which the target verifies in one iteration. A decode
        iteration is then a round (the verification of ``k + 1`` tokens a sequence and the drafting,
        :class:`~calculator.performance.speculation.Rounds`, as the sizer prices it), a request decodes in
        ``(O - 1) / E`` of them (``E`` the expected tokens a round from the acceptance), and the TPOT is a
        round over ``E``; the drafter's weights and KV take their share of the cache. ``decode_step_time`` is
        the round.
    streaming : bool, optional
        Whether every token is streamed to its client: True as the serving benchmarks do (they time the first
        token; the costs were fitted on them), False for a run that returns each output whole, as an offline
        throughput benchmark does (``trtllm-bench throughput`` without ``--streaming``).
        ``EngineProfile.for_streaming`` says what that changes for each engine, and ``streaming_note`` says it in
        the result. ``None`` (default): the engine profile's own, streamed unless it was made for an offline run.
    stream_interval : int, optional
        For a streamed run, the iterations between a request's responses (TensorRT-LLM's ``stream_interval``,
        1 by default): ``EngineProfile.with_stream_interval`` prices it, ``streaming_note`` says how, and from 2 on
        the interval's low end is the run without streaming. ``None`` (default): the profile's own (1).
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    BenchmarkPrediction
        ``.ttft``, ``.tpot`` with their 80 % intervals, throughputs, the active batch and whether
        memory limits it.

    Notes
    -----
    The engine holds ``B = min(C, KV capacity / (I + r O), max_num_seqs)`` requests (``r``: the
    output share its admission reserves). All ``C`` prompts arrive at once, and a budget of ``T``
    tokens per iteration prefills them in ``ceil(B I / T)`` iterations; that burst weighs one request
    in ``requests_per_client``. Afterwards (dispersed arrivals) each prompt meets the others by chance,
    arriving a request path after a completion at an iteration's end: it waits for the iteration it
    lands in, the one an overlap scheduler already built
    (``EngineProfile.overlap_scheduler``) and its own iterations, packed with the prompts that arrived
    alongside it, and queues for the budget only as the prefill load approaches it; the other clients'
    prompts land in a decoding request's iterations (mixing engines) or pause them (SGLang's prefill
    batches). The decoding population closes the clients' cycle (found by false position). Clients beyond
    ``B`` wait for a slot. ``docs/performance-model.md`` derives each term and compares the model with
    the simulator (``calculator.simulation``, closed loop).

    Examples
    --------
    Qwen3-32B BF16 on 4 H100s under vLLM 0.12, 32 clients, 1024/512 tokens (measured: TTFT 199.9 ms,
    TPOT 14.2 ms). vLLM 0.12 schedules synchronously (the profile is 0.14's, asynchronous), and the
    harness that measured it adds its own 66.5 ms per request and mixes its fixed-length clients as a
    length spread of 0.05 would (``benchmark_harness.csv``, the "aic gap analysis" collection); the
    measured values lie inside the 80 % intervals:

    >>> vllm_0_12 = engine_profile("vllm").with_async_scheduling(False)
    >>> p = predict_benchmark("Qwen/Qwen3-32B", "h100_sxm", "bf16", 4, 1024, 512, 32, engine=vllm_0_12,
    ...                       client_overhead=Q_(66.5, "ms"), length_cv=0.05)
    >>> bool(p.ttft_interval[0].m_as("ms") < 199.9 < p.ttft_interval[1].m_as("ms")), p.memory_limited
    (True, False)
    >>> bool(p.tpot_interval[0].m_as("ms") < 14.2 < p.tpot_interval[1].m_as("ms"))
    True
    """
    from ..uncertainty import prediction_interval

    profile = _streamed_or_not(engine_profile(engine, registry), streaming, stream_interval)
    a = step_arrays(model, accelerator, precision, kv_precision, engine=profile, registry=registry)
    tp = checked_tp(model_of(model, registry), tensor_parallel, "predict_benchmark")
    layout = (data_parallel, expert_parallel, "predict_benchmark", pipeline_parallel, redundant_experts)
    load_note = _load_note(model_of(model, registry), accelerator, a, profile, tp, layout, registry)
    a, tp = replica_layout(a, tp, *layout)
    inputs = _counts("predict_benchmark", "input_tokens", input_tokens)
    outputs = _counts("predict_benchmark", "output_tokens", output_tokens)
    clients = _counts("predict_benchmark", "concurrency", concurrency)
    shapes = {"tensor_parallel": np.shape(tp), "input_tokens": np.shape(inputs), "output_tokens": np.shape(outputs),
              "concurrency": np.shape(clients)}  # fmt: skip
    check_broadcast(
        "predict_benchmark", shapes, "the array arguments must broadcast together (scalars or arrays of one shape)"
    )
    limit = model_of(model, registry).max_context
    if limit is not None and np.any(inputs + outputs > limit):
        longest = float(np.max(inputs + outputs))
        raise InputError(
            f"predict_benchmark(): a request of {longest:,.0f} tokens (input_tokens + output_tokens) exceeds the "
            f"model's context limit of {limit:,} tokens"
        )
    _check_requests_per_client("predict_benchmark", requests_per_client)
    speculative = speculative_rounds(
        "predict_benchmark", speculation, model_of(model, registry), a, precision, kv_precision, profile, registry
    )
    eff = _efficiency(profile, efficiency, a.accelerator)
    run = functools.partial(
        closed_loop_seconds,
        a,
        profile,
        tp,
        inputs,
        outputs,
        clients,
        requests_per_client=float(requests_per_client),
        arrivals=arrivals if isinstance(arrivals, str) else repr(arrivals),  # a string, checked there
        client_overhead=0.0
        if client_overhead is None
        else magnitude("predict_benchmark", "client_overhead", client_overhead, "s", "nonnegative"),
        length_cv=check_length_cv("predict_benchmark", length_cv),
        speculative=speculative,
    )
    result = run(eff)
    if np.any(np.asarray(result["max_concurrency"]) < 1):
        raise _no_room(a, tp, speculative.drafter, tensor_parallel, profile)
    scalar = all(np.ndim(v) == 0 for v in (tensor_parallel, input_tokens, output_tokens, concurrency))

    def out(value: Any) -> Any:
        value = np.asarray(value)
        return value.item() if scalar else value

    extrapolated = _beyond_fitted_batch(profile, eff, np.asarray(result["active_batch"]) / data_parallel, run)
    bands = prediction_interval(profile.name, a.accelerator, a.measured, profile.interval, profile.release_fitted)
    unstreamed = _unstreamed(profile, eff, a.accelerator, run)
    low, high = _interval_ends(result, bands, extrapolated, _serial(profile, eff, run), unstreamed)
    rates = _rate_interval(clients, outputs, result["throughput"], result["ttft"], result["tpot"], low, high)
    return BenchmarkPrediction(
        ttft=Q_(out(result["ttft"]), "s"),
        tpot=Q_(out(result["tpot"]), "s"),
        ttft_interval=(Q_(out(low["ttft"]), "s"), Q_(out(high["ttft"]), "s")),
        tpot_interval=(Q_(out(low["tpot"]), "s"), Q_(out(high["tpot"]), "s")),
        throughput=Q_(out(result["throughput"]), "request/s"),
        output_throughput=Q_(out(result["throughput"] * outputs), "token/s"),
        throughput_interval=tuple(Q_(out(r), "request/s") for r in rates),
        output_throughput_interval=tuple(Q_(out(r * outputs), "token/s") for r in rates),
        active_batch=out(result["active_batch"]),
        max_concurrency=out(result["max_concurrency"]),
        memory_limited=out(result["memory_limited"]),
        sequence_limited=out(result["sequence_limited"]),
        cache_pressure=out(result["cache_pressure"]),
        prefill_time=Q_(out(result["prefill"]), "s"),
        decode_step_time=Q_(out(result["decode_step"]), "s"),
        engine=profile.name,
        kv_precision=a.kv_precision,
        measured_kernels=a.measured,
        **_engine_notes(profile, eff, a.accelerator),
        load_note=load_note,
        batch_note="" if extrapolated is None else extrapolated.note,
        vision_note=_vision_note(model_of(model, registry)),
    )


def _streamed_or_not(profile: EngineProfile, streaming: Any, interval: Any) -> EngineProfile:
    """The profile for a streamed or offline run, streamed every ``interval`` iterations (``None``: as it is)."""
    profile = profile if streaming is None else profile.for_streaming(streaming, "predict_benchmark")
    return profile if interval is None else profile.with_stream_interval(interval, "predict_benchmark")


def _unstreamed(profile: EngineProfile, eff: Efficiency, accelerator: str, run: Any) -> dict[str, Any] | None:
    """A run streamed every few iterations priced without streaming, its interval's low end (``None``: none).

    The engine's guide has an interval of 2 to 4 close the gap between a streamed run and one without streaming;
    the point keeps the response's share of the fitted cost, once in the interval's iterations. Not where the
    costs were given (``efficiency``).
    """
    if profile.stream_interval == 1 or profile.offline_sequence_overhead is None:
        return None
    if eff != profile.efficiency_for(accelerator):  # costs given with efficiency=: not the engine's own
        return None
    return run(profile.for_streaming(False).efficiency_for(accelerator))


def _engine_notes(profile: EngineProfile, eff: Efficiency, accelerator: str) -> dict[str, Any]:
    """The result's fields on the engine run: its release and whether it streams, with their notes."""
    return {
        "release_note": profile.release_note(),
        "release_fitted": profile.release_fitted,
        "streaming_note": _streaming_note(profile, eff, accelerator),
        "streaming": profile.streaming,
    }


def _streaming_note(profile: EngineProfile, eff: Efficiency, accelerator: str) -> str:
    """The profile's note on a run without streaming, or that the costs given (``efficiency``) replaced its own."""
    if profile.offline_sequence_overhead is None or profile.prices_offline_cost(eff):
        return profile.streaming_note()
    if profile.streaming and (profile.stream_interval == 1 or eff == profile.efficiency_for(accelerator)):
        return profile.streaming_note()
    run = "Without streaming" if not profile.streaming else f"Streamed every {profile.stream_interval} iterations"
    return f"{run} ({profile.name}): priced with the costs given (efficiency), not the engine's own"


def _serial(profile: EngineProfile, eff: Efficiency, run: Any) -> dict[str, Any] | None:
    """A run without streaming priced with the loop's costs added to the GPU's work (``None``: nothing hidden).

    Hiding them is the overlap scheduler's mechanism, read in the engine's source; the streamed benchmarks the
    costs were fitted on showed them added, so the interval's high end keeps that reading.
    """
    return run(eff.replace(overlap=False)) if profile.prices_offline_cost(eff) and eff.overlap else None


@dataclasses.dataclass(frozen=True)
class _Extrapolated:
    """Points whose running batch exceeds the one the engine's costs were fitted on, and their bound."""

    beyond: np.ndarray  # which points run more sequences a rank than the fit saw
    bound: dict[str, np.ndarray]  # TTFT and TPOT with the per-sequence cost stopping at the fit's batch
    note: str


def _beyond_fitted_batch(profile: EngineProfile, eff: Efficiency, batch: np.ndarray, run: Any) -> _Extrapolated | None:
    """The points beyond ``profile.fitted_batch`` sequences a rank, and their low end (``None``: no such point).

    The low end is the prediction again with the per-sequence cost scaled so that the largest batch pays what
    the fitted batch paid. The per-sequence cost was fitted on at most ``fitted_batch`` sequences; whether it
    keeps growing beyond them (Python work a sequence) or stops (hidden behind the GPU by an overlap scheduler,
    or batched) those rows cannot tell. The scaled cost charges every point at most ``c x fitted_batch``, so its
    TTFT and TPOT are a low end for each point beyond the fit (lower than needed for the smaller of them: the
    interval errs wide).
    """
    # a run without streaming at its cited cost: read at a batch of 1,000, not fitted on fitted_batch
    fitted = None if profile.prices_offline_cost(eff) else profile.fitted_batch
    cost = float(eff.sequence_overhead.m_as("s"))
    beyond = batch > (fitted or np.inf)
    if fitted is None or cost <= 0.0 or not np.any(beyond):
        return None
    largest = float(np.max(batch))
    bound = run(eff.replace(sequence_overhead=eff.sequence_overhead * (fitted / largest)))
    note = (
        f"The engine's per-sequence cost ({cost * 1e6:.3g} us) was fitted on benchmarks of at most {fitted} "
        f"sequences a replica; this runs up to {largest:,.0f}, so it is extrapolated ({cost * largest * 1e3:.3g} ms "
        "an iteration at the largest batch). The interval's low end is the prediction with that cost stopping at "
        f"{fitted} sequences."
    )
    return _Extrapolated(beyond, {"ttft": np.asarray(bound["ttft"]), "tpot": np.asarray(bound["tpot"])}, note)
