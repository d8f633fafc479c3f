"""Speculative decoding: tokens per round, speedup, token timing, draft memory (section 10.7.6).

A draft model proposes ``K`` tokens; the target verifies them in one pass and accepts each with
probability ``min(1, p/q)`` (Algorithm 2). Under the chapter's simplified model each drafted
position is accepted independently with probability ``alpha``; a round then emits its accepted
prefix plus one target-sampled token (Eq. 6). Drafters built into the target (multi-token-prediction
layers, EAGLE heads) accept later positions less often than earlier ones:
:func:`expected_tokens_per_round_by_position` takes one conditional probability per position.
Costs are in units of one target decode step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ._support import arg, checked, one, renamed
from .errors import InputError
from .formula import formula, var
from .memory import NO_BYTES, MemoryFit, device_share, memory_fit
from .results import Result, as_count
from .types import Bytes, Capacity, Count, Fraction, ModelRef, Number, Precision, Probability, Time, Tokens
from .units import Q_

if TYPE_CHECKING:
    from .registry import Registry

__all__ = [
    "DraftMemory",
    "SpeculativeSample",
    "SpeculativeTiming",
    "expected_tokens_per_round",
    "expected_tokens_per_round_by_position",
    "speedup",
    "speculative_timing",
    "acceptance_for_speedup",
    "best_draft_length",
    "emitted_tokens",
    "simulate_tokens_per_round",
    "acceptance_rate",
    "speculative_sample",
    "draft_memory_fit",
]


def _geometric_series(ratio: Any, terms: Any) -> Any:
    """``1 + r + ... + r^(n-1)``, exact at ``r = 1`` (``n``) and symbolic on sympy symbols."""
    if hasattr(ratio, "free_symbols") or hasattr(terms, "free_symbols"):
        return (1 - ratio**terms) / (1 - ratio)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(ratio)
        closed = np.expm1(terms * log_ratio) / np.expm1(log_ratio)  # accurate as r -> 1
    return np.where(ratio == 1, terms, closed)


@formula(
    result=var("", r"\mathbb{E}[N]", description="expected tokens emitted per verification round"),
    reference="Eq. 6, section 10.7.6",
    acceptance=var("", r"\alpha", "probability", "per-position draft acceptance probability"),
    draft_length=var("", "K", "positive_integer", "drafted tokens per round"),
    example={"acceptance": 0.9, "draft_length": 5},
)
def expected_tokens_per_round(acceptance, draft_length):
    r"""Expected tokens a speculative round emits: the accepted draft prefix plus one target token.

    Parameters
    ----------
    acceptance : float
        Probability ``alpha`` that a drafted position is accepted, independently of the others.
    draft_length : int
        Drafted tokens ``K`` per round.

    Returns
    -------
    float
        Between 1 (``alpha = 0``) and ``K + 1`` (``alpha = 1``).

    Notes
    -----
    .. math:: \mathbb{E}[N] = \sum_{i=0}^{K} \alpha^i = \frac{1 - \alpha^{K+1}}{1 - \alpha}

    Equation 6 (section 10.7.6); at :math:`\alpha = 1` the limit :math:`K + 1`.

    Examples
    --------
    >>> round(expected_tokens_per_round(0.9, 5), 2)
    4.69
    >>> expected_tokens_per_round(1.0, 5)
    6.0
    """
    return _geometric_series(acceptance, draft_length + 1)


@checked(acceptance=arg("probability"))
def expected_tokens_per_round_by_position(acceptance: Probability) -> Tokens:
    r"""Expected tokens a round emits when each drafted position has its own acceptance probability.

    Parameters
    ----------
    acceptance : sequence or array of float, shape (..., K)
        ``alpha_i``: the probability that drafted position ``i`` is accepted once positions ``1 .. i-1``
        were (a conditional probability, what an engine's per-position acceptance rates estimate).

    Returns
    -------
    float or array
        The accepted prefix's expected length plus the target's own token, over the last axis.

    Notes
    -----
    .. math:: \mathbb{E}[N] = 1 + \sum_{i=1}^{K} \prod_{j=1}^{i} \alpha_j

    Position ``i`` is in the accepted prefix when it and every position before it pass; equal
    alphas give Eq. 6 (:func:`expected_tokens_per_round`). Not a ``@formula``: its argument is one
    vector per round, where the formulas broadcast scalars element by element.

    Examples
    --------
    >>> round(expected_tokens_per_round_by_position([0.9, 0.5]), 12)  # 1 + 0.9 + 0.9 x 0.5
    2.35
    """
    alphas = np.asarray(acceptance, dtype=float)
    if alphas.ndim == 0:
        raise InputError(
            "expected_tokens_per_round_by_position(): argument 'acceptance' needs one probability per drafted "
            f"position (a sequence), got {acceptance!r}"
        )
    return _out(1.0 + np.cumprod(alphas, axis=-1).sum(axis=-1))


@formula(
    result=var("", "S", description="decode speedup over plain target decoding"),
    reference="section 10.7.6 (sensitivity calculation after Eq. 6)",
    acceptance=var("", r"\alpha", "probability", "per-position draft acceptance probability"),
    draft_length=var("", "K", "positive_integer", "drafted tokens per round"),
    draft_cost_ratio=var("", "c", "nonnegative", "cost of one draft step / one target decode step"),
    verification_cost_ratio=var("", "v", "positive", "cost of the verification pass / one target step"),
    example={"acceptance": 0.9, "draft_length": 5, "draft_cost_ratio": 0.05},
)
def speedup(acceptance, draft_length, draft_cost_ratio, verification_cost_ratio=1):
    r"""Speedup of speculative decoding: tokens per round over the round's cost in target steps.

    Parameters
    ----------
    acceptance : float
    draft_length : int
    draft_cost_ratio : float
        One draft step relative to one target decode step (1/20 for a draft "20x faster").
    verification_cost_ratio : float, optional
        The verification pass relative to one target decode step (1 while decode leaves compute
        idle; it grows with batch size, which is how a gain turns into a loss at high load).

    Returns
    -------
    float
        Below 1 when low acceptance makes speculation slower than plain decoding.

    Notes
    -----
    .. math:: S = \frac{\mathbb{E}[N]}{K c + v}

    The chapter gives the inputs and results (K = 5, c = 1/20, v = 1: 3.7x, 2.4x, 1.6x at
    alpha = 0.9, 0.7, 0.5); this is the cost model that reproduces them.

    Examples
    --------
    >>> round(speedup(0.9, 5, 1 / 20), 1)
    3.7
    """
    return expected_tokens_per_round.func(acceptance, draft_length) / (
        draft_length * draft_cost_ratio + verification_cost_ratio
    )


@dataclass(frozen=True, repr=False)
class SpeculativeTiming(Result):
    """Token timing of speculative decoding (see :func:`speculative_timing`).

    ``tpot`` is the average time per output token; ``tbt_gap`` the time between a round's bursts,
    which a streaming user sees as the wait between token deliveries.
    """

    tokens_per_round: Tokens
    round_time: Time
    tpot: Time
    tbt_gap: Time
    speedup: Number


@checked(
    draft_length="positive_integer",
    target_step_time="positive",
    draft_cost_ratio="nonnegative",
    verification_cost_ratio="positive",
)
def speculative_timing(
    acceptance: Probability,
    draft_length: Tokens,
    target_step_time: Time,
    draft_cost_ratio: Fraction,
    verification_cost_ratio: Number = 1.0,
) -> SpeculativeTiming:
    """TPOT and the per-gap TBT of speculative rounds.

    Parameters
    ----------
    acceptance, draft_length, draft_cost_ratio, verification_cost_ratio
        As for :func:`speedup`.
    target_step_time : Quantity [time]
        One plain target decode step (at the operating batch).

    Returns
    -------
    SpeculativeTiming
        ``round_time = (K c + v) T``; ``tpot = round_time / E[N]``; ``tbt_gap = round_time``: a
        round's tokens arrive together, so the gap between deliveries is a whole round, longer than
        one plain step even when TPOT is shorter (section 10.7.6 and 10.3's TBT/TPOT distinction).

    Examples
    --------
    >>> t = speculative_timing(0.9, 5, Q_(20, "ms"), 1 / 20)
    >>> t.round_time.to("ms"), round(t.tpot.m_as("ms"), 2)
    (<Quantity(25.0, 'millisecond')>, 5.34)
    """
    tokens = expected_tokens_per_round.numeric(acceptance=acceptance, draft_length=draft_length)
    round_time = (draft_length * draft_cost_ratio + verification_cost_ratio) * target_step_time
    return SpeculativeTiming(
        tokens_per_round=_out(tokens),
        round_time=Q_(_out(round_time), "s"),
        tpot=Q_(_out(round_time / tokens), "s"),
        tbt_gap=Q_(_out(round_time), "s"),
        speedup=_out(target_step_time / (round_time / tokens)),
    )


def _count_out(x: Any) -> Any:
    x = np.asarray(x, dtype=np.int64)
    return int(x) if x.ndim == 0 else x


def _out(x: Any) -> Any:
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


@checked(
    target_speedup="positive",
    draft_length="positive_integer",
    draft_cost_ratio="nonnegative",
    verification_cost_ratio="positive",
)
def acceptance_for_speedup(
    target_speedup: Number, draft_length: Tokens, draft_cost_ratio: Fraction, verification_cost_ratio: Number = 1.0
) -> Probability:
    """Acceptance probability needed for a target speedup (the inverse of :func:`speedup` in alpha).

    Parameters
    ----------
    target_speedup : float or array
        Wanted speedup (1 gives the break-even acceptance).
    draft_length, draft_cost_ratio, verification_cost_ratio
        As for :func:`speedup`.

    Returns
    -------
    float or array
        The smallest alpha in [0, 1] reaching the target; 0 if even alpha = 0 reaches it.

    Raises
    ------
    InputError
        If the target exceeds the ceiling ``(K + 1) / (K c + v)`` reached at alpha = 1.

    Notes
    -----
    The speedup increases strictly with alpha, so the root is unique; it is found by vectorized
    bisection to 1e-12.

    Examples
    --------
    Break-even for K = 5 and a draft 20x faster than the target:

    >>> round(acceptance_for_speedup(1.0, 5, 1 / 20), 3)
    0.2
    """
    name = "acceptance_for_speedup"
    wanted, length, draft, verify = np.broadcast_arrays(
        np.asarray(target_speedup, dtype=float),
        np.asarray(draft_length, dtype=np.int64),
        np.asarray(draft_cost_ratio, dtype=float),
        np.asarray(verification_cost_ratio),
    )
    ceiling = (length + 1) / (length * draft + verify)
    if np.any(wanted > ceiling * (1 + 1e-12)):
        index = np.argmax(wanted > ceiling)
        raise InputError(
            f"{name}(): a speedup of {wanted.flat[index]:g} is out of reach: with draft_length "
            f"{length.flat[index]} the ceiling (alpha = 1) is {ceiling.flat[index]:.4g}"
        )
    low, high = np.zeros(wanted.shape), np.ones(wanted.shape)
    for _ in range(45):  # 2^-45 < 1e-13
        middle = (low + high) / 2
        reached = (
            speedup.numeric(
                acceptance=middle, draft_length=length, draft_cost_ratio=draft, verification_cost_ratio=verify
            )
            >= wanted
        )
        high, low = np.where(reached, middle, high), np.where(reached, low, middle)
    floor_speedup = speedup.numeric(
        acceptance=0.0, draft_length=length, draft_cost_ratio=draft, verification_cost_ratio=verify
    )
    return _out(np.where(floor_speedup >= wanted, 0.0, high))


@checked(draft_cost_ratio="nonnegative", max_draft_length=one("positive_integer"), verification_cost_ratio="positive")
def best_draft_length(
    acceptance: Probability,
    draft_cost_ratio: Fraction,
    max_draft_length: Tokens = 16,
    verification_cost_ratio: Number = 1.0,
) -> tuple[Tokens, Any]:
    """Draft length that maximises :func:`speedup`, searched over 1..``max_draft_length``.

    Parameters
    ----------
    acceptance : float or array
    draft_cost_ratio : float or array
    max_draft_length : int
    verification_cost_ratio : float or array

    Returns
    -------
    (int or array, float or array)
        Best ``K`` and its speedup.

    Examples
    --------
    >>> best_draft_length(0.5, 1 / 20)
    (3, 1.63...)
    """
    alpha, draft, verify = acceptance, draft_cost_ratio, verification_cost_ratio
    lengths = np.arange(1, int(max_draft_length) + 1)
    shape = np.broadcast_shapes(np.shape(alpha), np.shape(draft), np.shape(verify))
    grid = speedup.numeric(
        acceptance=np.asarray(alpha)[..., None],
        draft_length=lengths,
        draft_cost_ratio=np.asarray(draft)[..., None],
        verification_cost_ratio=np.asarray(verify)[..., None],
    )
    grid = np.broadcast_to(grid, (*shape, lengths.size))
    best = np.argmax(grid, axis=-1)
    gain = np.take_along_axis(grid, best[..., None], axis=-1)[..., 0]
    return (int(lengths[best]) if best.ndim == 0 else lengths[best]), _out(gain)


# ============================================================================================
# Simulation (Algorithm 2)


def emitted_tokens(accepted: Count) -> Tokens:
    """Tokens each round emits from its per-position acceptance outcomes.

    Parameters
    ----------
    accepted : array of bool, shape (..., K)
        Whether each drafted position passed the acceptance test.

    Returns
    -------
    int or array of int
        Accepted prefix (up to the first rejection) plus one target token: the correction at the
        first rejection, or the extra token after full acceptance.

    Examples
    --------
    Figure 12: four drafts, the fourth rejected, so one target pass emits four tokens.

    >>> emitted_tokens([True, True, True, False])
    4
    """
    outcomes = np.asarray(accepted, dtype=bool)
    if outcomes.ndim == 0 or outcomes.shape[-1] == 0:
        raise InputError("emitted_tokens(): argument 'accepted' needs one outcome per drafted position")
    prefix = np.cumprod(outcomes, axis=-1).sum(axis=-1)
    tokens = prefix + 1
    return int(tokens) if np.ndim(tokens) == 0 else tokens


@checked(draft_length=one("positive_integer"), seed="nonnegative_integer", acceptance=one(), rounds=one())
def simulate_tokens_per_round(
    acceptance: Probability, draft_length: Tokens, rounds: Count, seed: Count | None = None
) -> np.ndarray:
    """Monte Carlo of the simplified model behind Eq. 6: independent acceptance per position.

    Parameters
    ----------
    acceptance : float
    draft_length : int
    rounds : int
    seed : int, optional

    Returns
    -------
    array of int
        Tokens emitted by each simulated round.

    Examples
    --------
    >>> round(float(simulate_tokens_per_round(0.9, 5, 200_000, seed=1).mean()), 1)
    4.7
    """
    rng = np.random.default_rng(None if seed is None else as_count(seed))
    return emitted_tokens(rng.random((int(rounds), int(draft_length))) < acceptance)


def _distribution(function: str, argument: str, values: Any) -> np.ndarray:
    """A next-token distribution: ``checked`` saw its values in [0, 1]; it must be 1-D, non-empty and sum to 1."""
    probs = np.atleast_1d(values)
    if probs.ndim != 1 or probs.size == 0:
        raise InputError(f"{function}(): argument '{argument}' must be a non-empty 1-D array of probabilities")
    if not np.isclose(probs.sum(), 1.0, atol=1e-9):
        raise InputError(f"{function}(): argument '{argument}' must sum to 1, got {probs.sum():.6g}")
    return probs / probs.sum()


@checked()
def acceptance_rate(target_probs: Probability, draft_probs: Probability) -> float:
    """Per-position acceptance probability of Algorithm 2: ``sum_x min(p(x), q(x))``.

    Parameters
    ----------
    target_probs, draft_probs : array of float
        Target ``p`` and draft ``q`` next-token distributions over the same vocabulary.

    Returns
    -------
    float
        ``1 - TV(p, q)`` (Leviathan et al. 2023, section 3.5).

    Examples
    --------
    >>> round(acceptance_rate([0.5, 0.3, 0.2], [0.4, 0.4, 0.2]), 12)
    0.9
    """
    p = _distribution("acceptance_rate", "target_probs", target_probs)
    q = _distribution("acceptance_rate", "draft_probs", draft_probs)
    if p.shape != q.shape:
        raise InputError("acceptance_rate(): target_probs and draft_probs need the same vocabulary size")
    return float(np.minimum(p, q).sum())


@dataclass(frozen=True, repr=False)
class SpeculativeSample(Result):
    """Output of :func:`speculative_sample`: emitted tokens and tokens per round."""

    tokens: np.ndarray
    tokens_per_round: np.ndarray


@checked(draft_length=one("positive_integer"), seed="nonnegative_integer", rounds=one())
def speculative_sample(
    target_probs: Probability,
    draft_probs: Probability,
    draft_length: Tokens,
    rounds: Count,
    seed: Count | None = None,
) -> SpeculativeSample:
    """Algorithm 2 with context-free target and draft distributions, vectorized over rounds.

    Each round drafts ``K`` tokens from ``q``, accepts each with probability ``min(1, p/q)`` until the
    first rejection, replaces the rejected one by a sample of the normalized residual ``(p - q)+``,
    or appends one sample of ``p`` if all ``K`` pass. The emitted tokens are distributed as ``p``.

    Parameters
    ----------
    target_probs, draft_probs : array of float
    draft_length : int
    rounds : int
    seed : int, optional

    Returns
    -------
    SpeculativeSample

    Examples
    --------
    >>> s = speculative_sample([0.5, 0.3, 0.2], [0.4, 0.4, 0.2], 4, 50_000, seed=0)
    >>> np.round(np.bincount(s.tokens) / s.tokens.size, 2)
    array([0.5, 0.3, 0.2])
    """
    name = "speculative_sample"
    p = _distribution(name, "target_probs", target_probs)
    q = _distribution(name, "draft_probs", draft_probs)
    if p.shape != q.shape:
        raise InputError(f"{name}(): target_probs and draft_probs need the same vocabulary size")
    length, total = int(draft_length), int(rounds)
    rng = np.random.default_rng(None if seed is None else as_count(seed))
    drafts = rng.choice(p.size, size=(total, length), p=q)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q[drafts] > 0, p[drafts] / q[drafts], 0.0)
    accepted = rng.random((total, length)) < np.minimum(1.0, ratio)
    kept = np.cumprod(accepted, axis=1).sum(axis=1)
    residual = np.maximum(p - q, 0.0)
    residual = residual / residual.sum() if residual.sum() > 0 else p
    all_accepted = kept == length
    last = np.where(all_accepted, rng.choice(p.size, size=total, p=p), rng.choice(p.size, size=total, p=residual))
    keep_mask = np.arange(length)[None, :] < kept[:, None]
    tokens = np.concatenate([drafts, last[:, None]], axis=1)
    mask = np.concatenate([keep_mask, np.ones((total, 1), dtype=bool)], axis=1)
    return SpeculativeSample(tokens=tokens[mask], tokens_per_round=kept + 1)


# ============================================================================================
# Draft-model memory (section 10.7.6, first concern)


@dataclass(frozen=True, repr=False)
class DraftMemory(Result):
    """Memory fit with and without a colocated draft model (see :func:`draft_memory_fit`)."""

    without_draft: MemoryFit
    with_draft: MemoryFit
    draft_weights: Bytes
    draft_kv_per_request: Bytes
    batch_loss: Count


@renamed(kv_dtype="kv_precision")
@checked(context="positive_integer", batch="nonnegative_integer")
def draft_memory_fit(  # noqa: PLR0913  # public entry point: its keyword options are the API
    target: ModelRef,
    draft: ModelRef,
    capacity: Capacity,
    context: Tokens,
    batch: Count = 1,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    tensor_parallel: Count = 1,
    draft_tensor_parallel: Count | None = None,
    draft_weight_bits: Precision = None,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    *,
    registry: Registry | None = None,
) -> DraftMemory:
    """What a colocated draft model costs in memory: its weights and per-request KV, and lost batch.

    Parameters
    ----------
    target, draft : str or Model
    capacity : Quantity or accelerator
        Memory per device.
    context : int
        Tokens per sequence (the draft caches the same tokens).
    batch : int
        Sequences to check the fit for.
    weight_bits, kv_precision, tensor_parallel, reserve, capacity_basis
        As for :func:`calculator.memory.model_memory_fit`, for the target.
    draft_tensor_parallel : int, optional
        The draft's own degree: ``tensor_parallel`` (sharded like the target, the default) or 1
        (a full copy on every device).
    draft_weight_bits : str or float, optional
        Draft weight precision (defaults to ``weight_bits``).
    registry : Registry, optional
        Where the model ids and an accelerator id given as ``capacity`` resolve (default: the packaged
        registry).

    Returns
    -------
    DraftMemory
        Per-device fits without and with the draft, the draft's weights and KV per request on one
        device, and ``batch_loss`` (max batch without minus with).

    Notes
    -----
    Section 10.7.6: a 7B draft with a 70B target "adds roughly 14 GB of FP16 weights per replica
    plus per-request draft cache"; colocated, that comes out of the KV admission budget, and
    disabling speculation frees neither (answer to self-check, §10.18).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> def model(i, n, l, h, kv, d):
    ...     return Model(id=i, name=i, provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...         parameters=n, layers=l, attention_heads=h, kv_heads=kv, head_dim=d, attention="gqa")
    >>> target, draft = model("t", 70e9, 80, 64, 8, 128), model("d", 7e9, 32, 32, 8, 128)
    >>> d = draft_memory_fit(target, draft, Q_(80, "GB"), 4096, tensor_parallel=8)
    >>> d.without_draft.max_batch, d.with_draft.max_batch
    (372, 258)
    """
    name = "draft_memory_fit"
    degree = as_count(tensor_parallel)
    draft_degree = degree if draft_tensor_parallel is None else as_count(draft_tensor_parallel)
    if np.any((np.asarray(draft_degree) != 1) & (np.asarray(draft_degree) != degree)):
        raise InputError(f"{name}(): draft_tensor_parallel must be 1 or tensor_parallel ({degree}), got {draft_degree}")
    from ._support import device_capacity

    main = device_share(target, degree, weight_bits, kv_precision, registry=registry)
    draft_bits = weight_bits if draft_weight_bits is None else draft_weight_bits
    extra = device_share(draft, draft_degree, draft_bits, kv_precision, registry=registry)
    cap = Q_(device_capacity(name, capacity, capacity_basis, registry=registry), "B")
    spare = Q_(reserve, "B")
    without = memory_fit(cap, main.weights, main.kv_per_token, context, batch, spare)
    with_draft = memory_fit(
        cap, main.weights + extra.weights, main.kv_per_token + extra.kv_per_token, context, batch, spare
    )
    return DraftMemory(
        without_draft=without,
        with_draft=with_draft,
        draft_weights=extra.weights,
        draft_kv_per_request=extra.kv_per_token * Q_(as_count(context), "token"),
        batch_loss=_count_out(np.asarray(without.max_batch) - np.asarray(with_draft.max_batch)),
    )
