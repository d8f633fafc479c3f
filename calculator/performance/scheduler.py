"""An engine's scheduling rules, once: the one object the predictor, the sizer and the simulator ask.

A serving engine's scheduler builds each iteration from a token budget: the running decodes take a
token each, the room they leave goes to prompts, chunked where the engine chunks, and a waiting
prompt is admitted while the sequence cap and the KV cache allow. :class:`SchedulerRules` holds
those rules for one engine release on one replica layout, built from the registry's engine entry
(:class:`~calculator.performance.EngineProfile`, its cited defaults) by :func:`scheduler_rules`.

Three users read them:

* the closed-loop predictor (:func:`~calculator.performance.closed_loop_seconds`), a mean-field closed
  form over a continuous decoding population;
* the fleet sizer's evaluation (``calculator.fleet.evaluate``), the same rules at each batch cap;
* the simulator (``calculator.simulation``), iteration by iteration on whole tokens.

The room the decodes leave is one rule, the engine's mechanism: ``T - n`` tokens of a budget of
``T`` beside ``n`` decodes (vLLM's scheduler subtracts each running request's new tokens from
``max_num_batched_tokens`` before it schedules a waiting one; TensorRT-LLM's capacity scheduler
counts the generation tokens against ``max_num_tokens`` alike). Where the decodes fill the budget the
engine admits no prompt until one finishes; the simulator does exactly that. The closed forms work on
a continuous population and must chunk a prompt into a finite count, so they read at least one token
of room (:meth:`SchedulerRules.room` with ``closed_form=True``): a prompt then takes as many
iterations as it has tokens, which no latency target survives, and the decoding caps keep ``n`` below
``T`` wherever the answer matters. (The predictor once took ``max(T - n, T/4)``: that floor binds only
where more than three quarters of the budget decodes, which no packaged engine's defaults allow; the
comparison is in ``docs/ARCHITECTURE.md``.)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..results import Result

if TYPE_CHECKING:
    from .engines import EngineProfile

#: Beyond this many whole prompts in the room, an engine that does not chunk packs them as a share of the room.
WHOLE_PROMPTS_COUNTED = 32


@dataclass(frozen=True, repr=False)
class SchedulerRules(Result):
    """One engine's scheduling rules on one replica (every attention rank of it).

    Attributes
    ----------
    engine : str
        The engine profile's name.
    token_budget : float or ndarray
        Tokens one iteration of the replica takes (every attention rank's budget together).
    max_sequences : float or ndarray
        Most sequences the replica runs at once (every rank's cap together).
    ranks : float or ndarray
        Attention ranks of the replica; each schedules its own share of the budget and the cap.
    mixed : bool
        Prompt chunks share iterations with the running decodes (vLLM, TensorRT-LLM); else a
        prefill batch runs alone and pauses decoding (SGLang).
    chunked : bool
        A prompt longer than the room is split over iterations.
    overlap : bool
        The scheduler builds iteration ``k + 1`` while the GPU runs ``k``: a prompt that arrives while an
        iteration runs is first scheduled one iteration later than under a synchronous scheduler.
    output_reservation : float
        The share of a request's output the admission reserves KV for.
    kv_block : int
        Tokens per KV-cache block: an admission reserves, and a sequence holds, whole blocks.
    window, window_share : float
        The model's sliding window (tokens; inf: none) and the share of its layers that use it: a sequence's
        KV in tokens of every layer is :meth:`kv_tokens` of its length.
    decode_tokens : int
        The budget's tokens a decoding sequence takes an iteration: 1, or under speculative decoding its
        ``k + 1`` (the token and its ``k`` drafts, verified together). vLLM schedules a running request's
        ``num_tokens_with_spec - num_computed_tokens`` from the token budget (``v1/core/sched/scheduler.py``,
        ``Scheduler.schedule``) and TensorRT-LLM's micro-batch scheduler counts a generation request's beam
        width plus its draft tokens against ``max_num_tokens`` (``batch_manager/microBatchScheduler.cpp``).
    state_tokens : float
        A hybrid's fixed state per sequence in tokens of KV (:attr:`StepArrays.state_tokens`; 0: none).
    """

    engine: str
    token_budget: int | float | np.ndarray
    max_sequences: int | float | np.ndarray
    ranks: int | float | np.ndarray
    mixed: bool
    chunked: bool
    overlap: bool
    output_reservation: float
    kv_block: int = 1
    window: float = float("inf")
    window_share: float = 0.0
    decode_tokens: int = 1
    state_tokens: float = 0.0

    def kv_tokens(self, tokens: Any) -> Any:
        """The KV a sequence of ``tokens`` holds, in tokens of every layer (:func:`windowed_tokens`)."""
        return windowed_tokens(tokens, self.window, self.window_share, self.state_tokens)

    def room(self, decodes: Any, closed_form: bool = False) -> Any:
        """The tokens the budget leaves for prompts beside ``decodes`` running decodes: ``T - v n``.

        ``v`` is :attr:`decode_tokens` (1 without speculation). A prefill-first engine's prompt batch runs alone
        with the whole budget. ``closed_form``: at least one token (a continuous model's chunk count stays
        finite; see the module's note).
        """
        budget, v = self.token_budget, self.decode_tokens
        if isinstance(decodes, int) and isinstance(budget, int):  # the simulator's whole tokens, in its hot loop
            return max(budget - v * decodes if self.mixed else budget, 1 if closed_form else 0)
        left = budget - (v * np.asarray(decodes) if self.mixed else 0 * np.asarray(decodes))
        return np.maximum(left, 1.0) if closed_form else np.maximum(left, 0)

    def per_rank(self) -> SchedulerRules:
        """One attention rank's rules: its share of the budget and of the sequence cap (at least one)."""
        ranks = self.ranks
        if ranks == 1:
            return self
        if isinstance(self.token_budget, int) and isinstance(self.max_sequences, int) and isinstance(ranks, int):
            whole = self.token_budget // ranks, max(self.max_sequences // ranks, 1)
            return dataclasses.replace(self, token_budget=whole[0], max_sequences=whole[1], ranks=1)
        share = np.maximum(self.max_sequences / ranks, 1.0)
        return dataclasses.replace(self, token_budget=self.token_budget / ranks, max_sequences=share, ranks=1.0)

    def chunk_size(self, decodes: Any) -> Any:
        """The most tokens of one prompt an iteration takes beside ``decodes``: one rank's share of the room."""
        return self.room(decodes, closed_form=True) / self.ranks

    def chunks(self, tokens: Any, decodes: Any, length_cv: Any = 0.0) -> np.ndarray:
        """The mean number of iterations a prompt of ``tokens`` takes beside ``decodes`` (1 if not chunked)."""
        if not self.chunked:
            return np.ones(np.broadcast(np.asarray(tokens), np.asarray(decodes)).shape)
        return chunk_count(tokens, np.maximum(self.chunk_size(decodes), 1.0), length_cv)

    def prompts_taken(self, room: Any, chunk: Any, inputs: Any, length_cv: Any) -> np.ndarray:
        """The prompt chunks an iteration of ``room`` tokens takes: the room's share, or whole prompts.

        A chunking engine fills the room with chunks of ``chunk`` tokens; one that does not chunk takes the
        whole prompts of ``inputs`` tokens that fit, in order, at least one however long
        (:func:`whole_prompts`).
        """
        if self.chunked:
            return np.asarray(room / chunk, dtype=float)
        return whole_prompts(room, inputs, length_cv)

    def admission_tokens(self, prompt: Any, output: Any, length_cv: Any = 0.0) -> Any:
        """The KV tokens an admission reserves: the prompt and the reserved share of the output, in whole blocks.

        ``length_cv``: the requests' lengths spread around ``prompt`` and ``output`` (the mean over them of
        their whole blocks, :func:`block_slack`); 0, one request's exact count.
        """
        tokens = self.kv_tokens(prompt + self.output_reservation * output)
        return tokens if self.kv_block == 1 else tokens + block_slack(tokens, self.kv_block, length_cv)

    def block_slack(self, tokens: Any, length_cv: Any = 0.0) -> Any:
        """The unused tokens of sequences' last KV blocks (spread by ``length_cv``): :func:`block_slack`."""
        return block_slack(tokens, self.kv_block, length_cv)

    @property
    def lag_iterations(self) -> float:
        """The iterations an arriving prompt waits beyond a synchronous scheduler's: one under overlap."""
        return 1.0 if self.overlap else 0.0


def scheduler_rules(
    profile: EngineProfile,
    memory_bytes: float,
    accelerator: str = "",
    ranks: Any = 1.0,
    *,
    max_num_tokens: int | None = None,
    max_num_seqs: int | None = None,
    chunk_size: int | None = None,
    kv: Any = None,
    decode_tokens: int = 1,
) -> SchedulerRules:
    """The :class:`SchedulerRules` of ``profile`` on a device of ``memory_bytes`` with ``ranks`` attention ranks.

    The budget and the sequence cap are the engine's tier for the device (``EngineProfile.limits``) unless
    given: ``max_num_tokens`` per rank (the engine's flag), ``max_num_seqs`` per replica. A ``chunk_size``
    (per rank) is the budget of an engine told to chunk its prompts: it chunks whatever its default. A mixing
    engine runs no more sequences than its budget holds decodes (vLLM refuses ``max_num_seqs`` above
    ``max_num_batched_tokens``). Whole numbers stay whole (the simulator schedules tokens). ``kv``: the model's
    :class:`~calculator.performance.StepArrays`, whose latent attention picks the engine's MLA block and whose
    sliding windows shrink a sequence's KV and whose fixed state adds to it (:meth:`SchedulerRules.kv_tokens`); None:
    neither. ``decode_tokens``: the budget's tokens a decoding sequence takes (``k + 1`` under speculative decoding,
    ``Rounds.verified``).
    """
    from .engines import EngineProfile

    if not isinstance(profile, EngineProfile):
        raise InputError(
            f"scheduler_rules(): argument 'profile' must be an EngineProfile, got {type(profile).__name__}"
        )
    tokens, seqs = profile.limits(memory_bytes, accelerator)
    budget = (chunk_size or max_num_tokens or tokens) * ranks
    sequences = max_num_seqs or seqs * ranks
    if profile.mixed_batching:
        sequences = min(sequences, budget) if np.ndim(budget) == 0 else np.minimum(sequences, budget)
    return SchedulerRules(
        engine=profile.name,
        token_budget=budget,
        max_sequences=sequences,
        ranks=ranks,
        mixed=profile.mixed_batching,
        chunked=profile.chunked_prefill or bool(chunk_size),
        overlap=profile.overlap_scheduler,
        output_reservation=profile.output_reservation,
        kv_block=profile.kv_block(kv is not None and kv.mla),
        window=kv.window if kv is not None else float("inf"),
        window_share=kv.window_share if kv is not None else 0.0,
        decode_tokens=decode_tokens,
        state_tokens=kv.state_tokens if kv is not None else 0.0,
    )


def windowed_tokens(tokens: Any, window: float, share: float, fixed: float = 0.0) -> Any:
    """The KV a sequence of ``tokens`` holds in tokens of every layer, ``share`` of them windowed.

    A sliding-window layer keeps (and a decode step reads) at most ``window`` tokens: ``tokens - share x
    max(tokens - window, 0)``. No window (``share`` 0): ``tokens`` itself. ``fixed``: a hybrid's state
    layers' fixed state in tokens of KV (:attr:`StepArrays.state_tokens`), held whatever the length.
    """
    if share:
        tokens = tokens - share * np.maximum(np.asarray(tokens, dtype=float) - window, 0.0)
    return tokens + fixed if fixed else tokens


def block_slack(tokens: Any, block: int, length_cv: Any = 0.0) -> Any:
    """The mean unused tokens of the last KV block of a sequence of ``tokens`` tokens, blocks of ``block``.

    Fixed lengths (``length_cv`` 0, or ``inf``: none given): ``ceil(tokens / block) block - tokens``. Lengths
    spread normally by ``length_cv``: ``E[ceil(X / b) b] - tokens`` over whole token counts ``X``, which is
    ``(b - 1) / 2`` once the spread is a block or more (the last block's fill is then uniform to 1e-8), and
    otherwise summed over the few blocks around the mean. A block of 1 leaves none.
    """
    if block == 1:
        return 0.0 * np.asarray(tokens) if isinstance(tokens, np.ndarray) else 0
    if isinstance(tokens, int | float) and not length_cv:  # the simulator's one request, in its admission
        return -(-tokens // block) * block - tokens
    tokens, cv = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (tokens, length_cv)))
    fixed = np.ceil(tokens / block) * block - tokens
    sigma = np.where(np.isfinite(cv) & (cv > 0), cv * tokens, 0.0)
    if not np.any(sigma > 0):
        return fixed
    narrow = (sigma > 0) & (sigma < block)
    out = np.where(sigma >= block, (block - 1) / 2, fixed)
    if np.any(narrow):
        from scipy.special import ndtr

        mu, sd = tokens[narrow], sigma[narrow]
        first = np.maximum(np.floor((mu - 8 * sd) / block), 0.0)  # P(X <= first b) is nil
        j = first + np.arange(18.0).reshape((-1,) + (1,) * mu.ndim)  # 8 sd each side of a block or less
        # E[ceil(X / b)] = first + sum_{j >= first} P(X > j b), X whole tokens (continuity: > j b + 1/2)
        blocks = first + ndtr((mu - (j * block + 0.5)) / sd).sum(axis=0)
        out[narrow] = blocks * block - mu
    return out


def whole_prompts(room: Any, inputs: Any, length_cv: Any) -> np.ndarray:
    """The whole prompts an iteration of ``room`` tokens takes, in order while they fit (at least one).

    Prompts of ``inputs`` tokens spread normally by ``length_cv``: ``sum_k P(S_k <= room)``, ``S_k`` the
    first ``k`` prompts' tokens. Fixed lengths (0) give ``floor(room / inputs)``; no spread given
    (``inf``), a spread of 1 or more (where a normal spread would give negative lengths), or more than
    :data:`WHOLE_PROMPTS_COUNTED` prompts, the room's share ``room / inputs``.
    """
    from scipy.special import ndtr

    room, inputs, cv = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (room, inputs, length_cv)))
    share = room / inputs
    k = np.arange(1, WHOLE_PROMPTS_COUNTED + 2, dtype=float).reshape((-1,) + (1,) * room.ndim)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (room - k * inputs) / (np.sqrt(k) * cv * inputs)
    counted = ndtr(np.where(np.isnan(z), np.inf, z)).sum(axis=0)  # nan: fixed lengths that fit exactly
    return np.maximum(np.where((cv < 1) & (share <= WHOLE_PROMPTS_COUNTED), counted, share), 1.0)


def chunk_count(inputs: Any, size: Any, length_cv: Any) -> np.ndarray:
    """The mean number of chunks of ``size`` tokens a prompt takes: ``E[ceil(I / size)]``.

    Prompts spread normally by ``length_cv`` around ``inputs`` take ``1 + sum_j P(I > j size)`` chunks on average
    (a mean of exactly two budgets is two chunks for half of them and three for the other half); fixed lengths
    (0) or no spread given (``inf``) take ``ceil(inputs / size)``.
    """
    inputs, size, cv = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (inputs, size, length_cv)))
    fixed = np.ceil(inputs / size)
    spread = np.isfinite(cv) & (cv > 0) & (cv < 1)
    if not np.any(spread):
        return fixed
    from scipy.special import ndtr  # only for spread lengths (scipy.special takes 0.17 s to import)

    most = int(np.max(np.where(spread, np.ceil(inputs * (1 + 8 * np.where(spread, cv, 0.0)) / size), 1.0)))
    j = np.arange(1, most + 1, dtype=float).reshape((-1,) + (1,) * inputs.ndim)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (inputs - j * size) / (np.where(spread, cv, 1.0) * inputs)
    return np.where(spread, 1.0 + ndtr(z).sum(axis=0), fixed)
