"""Chunked prefill (section 10.8.2): the hybrid iteration (Eq. 9) and Algorithm 3 under the token budget (Eq. 8).

Also Figure 13's trade-off: what chunking a long prompt does to its own TTFT and to the streams' TBT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import checked, count, one
from ..errors import InputError
from ..formula import formula, per, var
from ..results import Result
from ..types import AcceleratorRef, Count, ModelRef, Precision, Time, Tokens
from ..units import Q_, shown
from ._common import _device_setup
from .flops import roofline_time

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "hybrid_iteration_time",
    "prefill_iterations",
    "schedule_iteration",
    "ChunkedSchedule",
    "simulate_chunked_prefill",
    "ChunkedPrefillTradeoff",
    "chunked_prefill_tradeoff",
]

#: The most scheduler iterations a chunked-prefill routine steps through (a bound on its work).
MAX_ITERATIONS = 1_000_000


# ============================================================================================
# Chunked prefill (section 10.8.2): Eq. 8, Algorithm 3, Eq. 9


@formula(
    result=var("s", r"T_{\mathrm{iter}}", "nonnegative", "hybrid iteration time (lower bound)"),
    reference="Eq. 9, section 10.8.2",
    weights=var("B", r"M_{W}", "nonnegative", "weight bytes on the device"),
    memory_bandwidth=var("B/s", r"BW_{\mathrm{mem}}", description="sustained memory bandwidth"),
    decode_tokens=var("", r"B_{\mathrm{dec}}", "nonnegative", "decode tokens in the iteration"),
    prefill_tokens=var("", r"\sum c_i", "nonnegative", "prefill chunk tokens in the iteration"),
    active_parameters=var("", r"N_{\mathrm{act}}", "nonnegative", "active parameters on the device"),
    peak_throughput=var("FLOP/s", r"R_{\mathrm{peak}}", description="peak compute throughput"),
    example={
        "weights": "17.5 GB",
        "memory_bandwidth": "3.35 TB/s",
        "decode_tokens": 32,
        "prefill_tokens": 512,
        "active_parameters": 8.75e9,
        "peak_throughput": "989 TFLOP/s",
    },
)
def hybrid_iteration_time(weights, memory_bandwidth, decode_tokens, prefill_tokens, active_parameters, peak_throughput):
    r"""Projection-only lower bound on a hybrid (decode + prefill chunks) iteration (Eq. 9).

    Parameters
    ----------
    weights : Quantity [information]
        Weight bytes streamed by the device (per shard under tensor parallelism).
    memory_bandwidth : Quantity [information / time]
    decode_tokens : float
        Active decode tokens ``B_dec``.
    prefill_tokens : float
        Prompt tokens of the iteration's chunks, ``sum c_i``.
    active_parameters : float
        Active parameters per token on the device.
    peak_throughput : Quantity [compute / time]

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{iter}} \gtrsim \max\left(\frac{M_W}{BW_{\mathrm{mem}}},
              \frac{2 (B_{\mathrm{dec}} + \sum_i c_i) N_{\mathrm{act}}}{R_{\mathrm{peak}}}\right)

    Equation 9: the roofline of the projections only (:func:`roofline_time` with
    :math:`F = 2 (B + \sum c) N` and :math:`M = M_W`); it ignores attention-state traffic,
    communication and scheduling, so it cannot guarantee a TBT target.

    Examples
    --------
    >>> hybrid_iteration_time(Q_(17.5, "GB"), Q_(3.35, "TB/s"), 32, 512, 70e9 / 8, Q_(989, "TFLOP/s")).to("ms")
    <Quantity(9.62588473, 'millisecond')>
    """
    flops = per(2 * (decode_tokens + prefill_tokens) * active_parameters, "FLOP")
    return roofline_time.func(flops, weights, peak_throughput, memory_bandwidth)


@checked(
    prompt_tokens="positive_integer",
    chunk_size="positive_integer",
    token_budget="positive_integer",
    decode_batch="nonnegative_integer",
)
def prefill_iterations(
    prompt_tokens: Tokens, chunk_size: Tokens, token_budget: Tokens | None = None, decode_batch: Count = 0
) -> Any:
    """Iterations a prompt needs under chunked prefill (the lone prefill of its iterations).

    Parameters
    ----------
    prompt_tokens : int or array
    chunk_size : int or array
        Largest chunk ``C_chunk``.
    token_budget : int, optional
        Iteration token budget ``N_budget`` (Eq. 8); the chunk is limited to what the decode
        tokens leave, ``N_budget - B_dec``.
    decode_batch : int, optional
        Active decode tokens ``B_dec`` sharing each iteration.

    Returns
    -------
    int or array of int
        ``ceil(P / min(C_chunk, N_budget - B_dec))``: ``ceil(P / C_chunk)`` when the budget is not
        binding (section 10.8.2: "a smaller residual token budget can require more").

    Raises
    ------
    InputError
        If the decode tokens use the whole budget (no prefill progress is possible).

    Examples
    --------
    Example 10.5: a 10,000-token prompt in 512-token chunks.

    >>> prefill_iterations(10_000, 512)
    20
    """
    name = "prefill_iterations"
    prompt, step = np.asarray(prompt_tokens), np.asarray(chunk_size)
    if token_budget is not None:
        residual = np.asarray(token_budget) - decode_batch
        if np.any(residual < 1):
            raise InputError(f"{name}(): decode_batch uses the whole token_budget; no prefill tokens fit (Eq. 8)")
        step = np.minimum(step, residual)
    iterations = -(-prompt // step)
    return int(iterations) if iterations.ndim == 0 else iterations.astype(np.int64)


@checked(
    decode_batch=one("nonnegative_integer"), token_budget=one("positive_integer"), chunk_size=one("positive_integer")
)
def schedule_iteration(
    decode_batch: Count, prefill_queue: Sequence[tuple[int, int]], token_budget: Tokens, chunk_size: Tokens
) -> list[tuple[int, int, int]]:
    """One pass of Algorithm 3: the prefill chunks of the next hybrid iteration.

    Parameters
    ----------
    decode_batch : int
        Active decode requests ``B_dec`` (one token each).
    prefill_queue : sequence of (prompt_length, offset)
        Waiting prefills in queue order; ``offset`` tokens of each are already prefilled.
    token_budget : int
        ``N_budget`` of Eq. 8.
    chunk_size : int
        ``C_chunk``.

    Returns
    -------
    list of (queue index, offset, chunk tokens)
        Each waiting request gets at most one chunk ``min(C_chunk, N_rem, P_i - o_i)``; the total
        satisfies Eq. 8, ``B_dec + sum c_i <= N_budget``.

    Raises
    ------
    InputError
        If ``decode_batch`` exceeds the budget (admission must keep it within, section 10.8.2).

    Examples
    --------
    >>> schedule_iteration(100, [(1000, 0), (300, 200), (50, 0)], token_budget=612, chunk_size=256)
    [(0, 0, 256), (1, 200, 100), (2, 0, 50)]
    """
    name = "schedule_iteration"
    decode, budget, step = int(decode_batch), int(token_budget), int(chunk_size)
    if decode > budget:
        raise InputError(f"{name}(): decode_batch ({decode}) exceeds token_budget ({budget}) (Eq. 8)")
    remaining = budget - decode
    plan: list[tuple[int, int, int]] = []
    if isinstance(prefill_queue, str) or not isinstance(prefill_queue, Sequence):
        raise InputError(f"{name}(): argument 'prefill_queue' must be a list of (prompt_length, offset) pairs")
    for index, entry in enumerate(prefill_queue):
        if isinstance(entry, str) or not isinstance(entry, Sequence) or len(entry) != 2:
            raise InputError(f"{name}(): prefill_queue[{index}] must be a (prompt_length, offset) pair")
        length, offset = entry
        length = count(name, f"prefill_queue[{index}].prompt_length", length)
        offset = count(name, f"prefill_queue[{index}].offset", offset, minimum=0)
        if offset >= length:
            raise InputError(f"{name}(): prefill_queue[{index}] is already fully prefilled (offset {offset})")
        if remaining > 0:
            chunk = min(step, remaining, length - offset)
            plan.append((index, offset, chunk))
            remaining -= chunk
    return plan


@dataclass(frozen=True, repr=False)
class ChunkedSchedule(Result):
    """Iterations of Algorithm 3 until every queued prompt is prefilled (:func:`simulate_chunked_prefill`).

    ``decode_tokens[k]`` and ``prefill_tokens[k]`` are the tokens of iteration ``k``;
    ``first_token_iteration[i]`` is the (1-based) iteration after which prompt ``i`` is promoted to
    decode, i.e. when its first token is produced.
    """

    decode_tokens: np.ndarray
    prefill_tokens: np.ndarray
    first_token_iteration: np.ndarray


@checked(
    prompt_lengths="positive_integer",
    decode_batch=one("nonnegative_integer"),
    token_budget=one("positive_integer"),
    chunk_size=one("positive_integer"),
)
def simulate_chunked_prefill(
    prompt_lengths: Tokens, decode_batch: Count, token_budget: Tokens, chunk_size: Tokens
) -> ChunkedSchedule:
    """Run Algorithm 3 on a queue of prompts with a fixed set of decode streams.

    Promoted prompts join the decode set (one token per iteration from then on); the existing
    streams are assumed to keep decoding throughout. Every iteration satisfies Eq. 8.

    Parameters
    ----------
    prompt_lengths : sequence of int
        Prompts waiting, in queue order (a list or 1-D array of token counts).
    decode_batch : int
        Streams already decoding.
    token_budget, chunk_size : int

    Returns
    -------
    ChunkedSchedule

    Examples
    --------
    >>> s = simulate_chunked_prefill([10_000], decode_batch=30, token_budget=542, chunk_size=512)
    >>> len(s.prefill_tokens), s.first_token_iteration
    (20, array([20]))
    """
    name = "simulate_chunked_prefill"
    if np.ndim(prompt_lengths) != 1:
        raise InputError(
            f"{name}(): argument 'prompt_lengths' must be a list of prompt lengths, got {shown(prompt_lengths)}"
        )
    queue = [[int(length), 0] for length in prompt_lengths]
    decode, budget, step = int(decode_batch), int(token_budget), int(chunk_size)
    least = min(budget - decode, step)
    if least >= 1 and sum(length for length, _ in queue) / least > MAX_ITERATIONS:
        raise InputError(f"{name}(): the prompts need more than {MAX_ITERATIONS:,} iterations at this budget")
    if decode + len(queue) > budget:
        raise InputError(
            f"{name}(): decode_batch + prompts ({decode + len(queue)}) exceed token_budget ({budget}); "
            f"admission must keep promoted prompts within the budget (section 10.8.2)"
        )
    first = np.zeros(len(queue), dtype=np.int64)
    waiting = list(range(len(queue)))
    decode_log: list[int] = []
    prefill_log: list[int] = []
    while waiting:
        plan = schedule_iteration(decode, [(queue[i][0], queue[i][1]) for i in waiting], budget, step)
        decode_log.append(decode)
        prefill_log.append(sum(chunk for _, _, chunk in plan))
        for position, offset, chunk in plan:
            queue[waiting[position]][1] = offset + chunk
        done = [i for i in waiting if queue[i][1] == queue[i][0]]
        for i in done:
            first[i] = len(decode_log)
            decode += 1
        waiting = [i for i in waiting if i not in done]
    return ChunkedSchedule(
        decode_tokens=np.array(decode_log, dtype=np.int64),
        prefill_tokens=np.array(prefill_log, dtype=np.int64),
        first_token_iteration=first,
    )


@dataclass(frozen=True, repr=False)
class ChunkedPrefillTradeoff(Result):
    """A long prompt's TTFT against the TBT of active streams, monolithic vs chunked.

    See :func:`chunked_prefill_tradeoff`.
    """

    iterations: int
    monolithic_tbt: Time
    monolithic_ttft: Time
    chunked_tbt: Time
    chunked_ttft: Time
    decode_step: Time


@checked(
    prompt_tokens=one("positive_integer"), chunk_size=one("positive_integer"), decode_batch=one("nonnegative_integer")
)
def chunked_prefill_tradeoff(
    model: ModelRef,
    accelerator: AcceleratorRef,
    prompt_tokens: Tokens,
    chunk_size: Tokens,
    decode_batch: Count,
    precision: str = "fp16",
    tensor_parallel: Count = 1,
    weight_bits: Precision = None,
    *,
    registry: Registry | None = None,
) -> ChunkedPrefillTradeoff:
    """Figure 13: what chunking a prompt does to its own TTFT and to the streams' largest TBT gap.

    Parameters
    ----------
    model, accelerator, precision, tensor_parallel, weight_bits
        As for :func:`roofline_prefill_time`.
    prompt_tokens : int
        The arriving prompt ``P``.
    chunk_size : int
        ``C_chunk``; the iteration budget is ``B_dec + C_chunk``.
    decode_batch : int
        Streams decoding on the worker.
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    ChunkedPrefillTradeoff
        Monolithic: the prompt runs alone, then the streams' next decode step, so the streams' gap
        is ``T(0, P) + T(B, 0)`` and the prompt's TTFT ``T(0, P)``. Chunked: ``n = ceil(P / C)``
        hybrid iterations, the gap is the longest one and the TTFT their sum. ``T`` is Eq. 9 on one
        device (weights and active parameters per shard): a lower bound.

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> t = chunked_prefill_tradeoff(m, h100, 10_000, 512, 30, tensor_parallel=8)
    >>> t.iterations, t.chunked_tbt < t.monolithic_tbt, t.chunked_ttft > t.monolithic_ttft
    (20, True, True)
    """
    name = "chunked_prefill_tradeoff"
    setup = _device_setup(name, model, accelerator, precision, tensor_parallel, weight_bits, "fp16", registry=registry)
    prompt, step, decode = int(prompt_tokens), int(chunk_size), int(decode_batch)
    limit = setup["model"].max_context
    if limit is not None and prompt > limit:
        raise InputError(f"{name}(): prompt_tokens ({prompt:,}) exceed the model's context limit of {limit:,} tokens")
    iterations = -(-prompt // step)
    if iterations > MAX_ITERATIONS:
        raise InputError(
            f"{name}(): prompt_tokens / chunk_size make {iterations:,} iterations, more than {MAX_ITERATIONS:,}"
        )
    # The prompt alone under the budget of one chunk: full chunks, then the remainder (Algorithm 3).
    chunks = np.full(iterations, step, dtype=np.int64)
    chunks[-1] = prompt - step * (iterations - 1)

    def iteration(decode_tokens, prefill_tokens):
        return hybrid_iteration_time.numeric(
            weights=setup["weights"],
            memory_bandwidth=setup["bandwidth"],
            decode_tokens=decode_tokens,
            prefill_tokens=prefill_tokens,
            active_parameters=setup["model"].active / setup["degree"],
            peak_throughput=setup["peak"],
        )

    alone = float(iteration(0, prompt))
    step_time = float(iteration(decode, 0))
    hybrid = np.asarray(iteration(decode, chunks), dtype=float)
    return ChunkedPrefillTradeoff(
        iterations=len(chunks),
        monolithic_tbt=Q_(alone + step_time, "s"),
        monolithic_ttft=Q_(alone, "s"),
        chunked_tbt=Q_(float(hybrid.max()), "s"),
        chunked_ttft=Q_(float(hybrid.sum()), "s"),
        decode_step=Q_(step_time, "s"),
    )
