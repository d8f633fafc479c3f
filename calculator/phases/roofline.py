"""Prefill and decode: arithmetic intensity, roofline times, chunked prefill, disaggregation (section 10.8).

Also the serving ceilings of weight quantization (section 10.9.3, Table 12).

The roofline pieces are general and vectorized: FLOPs per token are ``2 x active parameters`` plus
attention FLOPs that grow with the context; the bytes of a decode step are the weights per device
plus every sequence's KV cache per device; a step takes ``max(FLOPs / peak, bytes / bandwidth)``
on one device of a tensor-parallel group. They are lower bounds (no kernel inefficiency,
communication or scheduling overhead); a calibrated step-time model builds on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import accelerator_of, bits_of, count, magnitude, renamed, transformer_of
from ..errors import InputError
from ..formula import formula, maximum, per, var
from ..memory import device_share, kv_cache_bytes, model_kv_bytes_per_token
from ..precision import bits_per_element, check_precision
from ..results import Result, ceil_count
from ..types import AcceleratorRef, Count, InterconnectRef, ModelRef, Precision, Rate, Time, TokenRate, Tokens
from ..units import Q_, check_units

__all__ = [
    "ChunkedPrefillTradeoff",
    "ChunkedSchedule",
    "PoolSizes",
    "PreemptionCosts",
    "QuantizationCeilings",
    "RooflineEstimate",
    "projection_arithmetic_intensity",
    "ridge_point",
    "accelerator_ridge_point",
    "attention_flops_per_pair",
    "prefill_flops",
    "decode_flops",
    "roofline_time",
    "roofline_prefill_time",
    "roofline_decode_step_time",
    "hybrid_iteration_time",
    "prefill_iterations",
    "schedule_iteration",
    "simulate_chunked_prefill",
    "chunked_prefill_tradeoff",
    "kv_handoff_time",
    "model_kv_handoff_time",
    "preemption_costs",
    "disaggregated_pool_sizes",
    "quantization_ceilings",
]


# ============================================================================================
# Arithmetic intensity and the ridge point (section 10.8.1)


@formula(
    result=var("FLOP/B", "I", description="FLOPs per byte of weights loaded"),
    reference="section 10.8.1 (I_pre ~ P, I_dec ~ B_dec for FP16 weights)",
    tokens=var("", "n", "positive", "tokens sharing one read of the weights"),
    bytes_per_weight=var("B", r"s_{W}", description="bytes per weight"),
)
def projection_arithmetic_intensity(tokens, bytes_per_weight):
    r"""Arithmetic intensity of a linear projection applied to ``n`` tokens per weight read.

    Parameters
    ----------
    tokens : float
        Rows sharing the weight read: the prompt length ``P`` in prefill, the decode batch
        ``B_dec`` in decode.
    bytes_per_weight : Quantity [information]
        2 B for FP16 weights.

    Returns
    -------
    Quantity [compute / information]

    Notes
    -----
    .. math:: I = \frac{2 n H^2}{s_W H^2} = \frac{2 n}{s_W}

    Section 10.8.1: with FP16 weights (:math:`s_W = 2` B) :math:`I_{\mathrm{pre}} \approx P` and
    :math:`I_{\mathrm{dec}} \approx B_{\mathrm{dec}}`. Weight traffic only: KV-cache reads, which
    grow with batch x context, lower the decode intensity further (see :func:`decode_step_time`).

    Examples
    --------
    >>> projection_arithmetic_intensity(1024, Q_(2, "B"))
    <Quantity(1024.0, 'FLOP / byte')>
    """
    return per(2 * tokens / bytes_per_weight, "FLOP")


@formula(
    result=var("FLOP/B", r"I^{*}", description="intensity above which execution is compute-bound"),
    reference="section 10.8.1 (roofline ridge point)",
    peak_throughput=var("FLOP/s", r"R_{\mathrm{peak}}", description="peak compute throughput"),
    memory_bandwidth=var("B/s", r"BW_{\mathrm{mem}}", description="memory bandwidth"),
)
def ridge_point(peak_throughput, memory_bandwidth):
    r"""Ridge point of the roofline: peak FLOP/s over memory bandwidth.

    Parameters
    ----------
    peak_throughput : Quantity [compute / time]
    memory_bandwidth : Quantity [information / time]

    Returns
    -------
    Quantity [compute / information]

    Notes
    -----
    .. math:: I^{*} = R_{\mathrm{peak}} / BW_{\mathrm{mem}}

    Examples
    --------
    H100 SXM at dense FP16 (989 TFLOP/s, 3.35 TB/s):

    >>> round(ridge_point(Q_(989, "TFLOP/s"), Q_(3.35, "TB/s")).m_as("FLOP/B"))
    295
    """
    return peak_throughput / memory_bandwidth


def accelerator_ridge_point(accelerator: AcceleratorRef, precision: str = "fp16") -> Any:
    """Ridge point of a registry accelerator at a precision (dense throughput / memory bandwidth).

    Parameters
    ----------
    accelerator : str or Accelerator
    precision : str

    Returns
    -------
    Quantity [compute / information]
    """
    device = accelerator_of(accelerator)
    return ridge_point(device.peak_throughput(precision), device.memory_bandwidth)


# ============================================================================================
# FLOPs and roofline time


def attention_flops_per_pair(model: ModelRef) -> Any:
    """Attention FLOPs for one (query token, cached token) pair, summed over layers and heads.

    Parameters
    ----------
    model : str or Model

    Returns
    -------
    Quantity [compute]
        ``2 L H (d_qk + d_v)``: the ``q . k`` score and the ``p v`` accumulation of every query head;
        ``4 L H d_h`` for MHA/GQA/MQA. For MLA, ``d_qk = qk_nope_head_dim + qk_rope_head_dim`` and
        ``d_v = v_head_dim`` (the per-head attention of DeepSeek-V2/V3; ``head_dim`` if unknown).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> attention_flops_per_pair(m)
    <Quantity(2621440, 'FLOP')>
    """
    resolved = transformer_of(model, "attention_flops_per_pair")
    if resolved.attention == "mla" and resolved.qk_nope_head_dim is not None:
        qk = resolved.qk_nope_head_dim + resolved.qk_rope_head_dim
        value = resolved.v_head_dim or resolved.head_dim
    else:
        qk = value = resolved.head_dim
    return Q_(2 * resolved.layers * resolved.attention_heads * (qk + value), "FLOP")


@formula(
    result=var("FLOP", r"F_{\mathrm{pre}}", description="FLOPs of one sequence's prefill"),
    reference="section 10.8.1 (2 N_act FLOPs per token plus attention over the causal prefix)",
    active_parameters=var("", r"N_{\mathrm{act}}", description="parameters used per token"),
    prompt_tokens=var("", "P", description="tokens prefilled"),
    attention_flops=var("FLOP", "a", "nonnegative", "attention FLOPs per (query, key) pair"),
    cached_tokens=var("", "c_{0}", "nonnegative", "tokens already cached before the prompt"),
)
def prefill_flops(active_parameters, prompt_tokens, attention_flops, cached_tokens=0):
    r"""FLOPs to prefill ``P`` tokens after ``c_0`` cached ones (causal attention).

    Parameters
    ----------
    active_parameters : float
    prompt_tokens : float
    attention_flops : Quantity [compute]
        :func:`attention_flops_per_pair` of the model.
    cached_tokens : float, optional
        Prefix already in the cache (a prefix-cache hit or an earlier chunk).

    Returns
    -------
    Quantity [compute]

    Notes
    -----
    .. math:: F_{\mathrm{pre}} = 2 N_{\mathrm{act}} P + a \left(P c_0 + \tfrac{P (P+1)}{2}\right)

    Token :math:`i` of the prompt attends to the :math:`c_0 + i` tokens before and including it.

    Examples
    --------
    >>> prefill_flops(70e9, 4096, Q_(0, "FLOP")).to("TFLOP")
    <Quantity(573.44, 'teraFLOP')>
    """
    pairs = prompt_tokens * cached_tokens + prompt_tokens * (prompt_tokens + 1) / 2
    return per(2 * active_parameters * prompt_tokens, "FLOP") + attention_flops * pairs


@formula(
    result=var("FLOP", r"F_{\mathrm{dec}}", description="FLOPs of one decode step of a batch"),
    reference="section 10.8.1",
    active_parameters=var("", r"N_{\mathrm{act}}", description="parameters used per token"),
    batch=var("", "B", "nonnegative", "sequences decoding"),
    context=var("", "S", "nonnegative", "tokens each new token attends to"),
    attention_flops=var("FLOP", "a", "nonnegative", "attention FLOPs per (query, key) pair"),
)
def decode_flops(active_parameters, batch, context, attention_flops):
    r"""FLOPs of one decode step: one new token for each of ``B`` sequences at context ``S``.

    Parameters
    ----------
    active_parameters : float
    batch : float
    context : float
    attention_flops : Quantity [compute]

    Returns
    -------
    Quantity [compute]

    Notes
    -----
    .. math:: F_{\mathrm{dec}} = B \, (2 N_{\mathrm{act}} + a S)

    Examples
    --------
    >>> decode_flops(70e9, 1, 0, Q_(0, "FLOP")).to("GFLOP")
    <Quantity(140.0, 'gigaFLOP')>
    """
    return batch * (per(2 * active_parameters, "FLOP") + attention_flops * context)


@formula(
    result=var("s", "T", "nonnegative", "roofline time of a step"),
    reference="section 10.8.1 (roofline), Eq. 9",
    flops=var("FLOP", "F", "nonnegative", "FLOPs executed on the device"),
    bytes_moved=var("B", "M", "nonnegative", "bytes moved through device memory"),
    peak_throughput=var("FLOP/s", r"R_{\mathrm{peak}}", description="peak compute throughput"),
    memory_bandwidth=var("B/s", r"BW_{\mathrm{mem}}", description="memory bandwidth"),
)
def roofline_time(flops, bytes_moved, peak_throughput, memory_bandwidth):
    r"""Roofline lower bound on a step's time: the slower of compute and memory traffic.

    Parameters
    ----------
    flops : Quantity [compute]
    bytes_moved : Quantity [information]
    peak_throughput : Quantity [compute / time]
    memory_bandwidth : Quantity [information / time]

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T = \max\left(\frac{F}{R_{\mathrm{peak}}}, \frac{M}{BW_{\mathrm{mem}}}\right)

    All four quantities must describe the same device or shard (section 10.8.2).

    Examples
    --------
    >>> roofline_time(Q_(140, "GFLOP"), Q_(140, "GB"), Q_(989, "TFLOP/s"), Q_(3.35, "TB/s")).to("ms")
    <Quantity(41.7910448, 'millisecond')>
    """
    return maximum(flops / peak_throughput, bytes_moved / memory_bandwidth)


@dataclass(frozen=True, repr=False)
class RooflineEstimate(Result):
    """Roofline estimate of a prefill or decode step on one device (arrays broadcast).

    Attributes
    ----------
    time : Quantity [time]
        ``max(compute_time, memory_time)``: a lower bound.
    compute_time, memory_time : Quantity [time]
    flops : Quantity [compute]
        FLOPs per device.
    bytes_moved : Quantity [information]
        Bytes per device (weights + KV).
    tokens : array
        Tokens the step produces (prefill: prompt tokens x batch; decode: batch).
    compute_bound : bool or array of bool
    """

    time: Any
    compute_time: Any
    memory_time: Any
    flops: Any
    bytes_moved: Any
    tokens: Any
    compute_bound: Any

    @property
    def tokens_per_second(self) -> Any:
        """Tokens per second at this step time (decode: batch / step time)."""
        return (self.tokens / self.time).to("1/s") * Q_(1, "token")

    @property
    def arithmetic_intensity(self) -> Any:
        """FLOPs per byte moved, with KV traffic included."""
        return (self.flops / self.bytes_moved).to("FLOP/B")


def _device_setup(function, model, accelerator, precision, tensor_parallel, weight_bits, kv_precision):
    """Per-device constants of a model on an accelerator (magnitudes; no batch/context yet)."""
    resolved = transformer_of(model, function)
    device = accelerator_of(accelerator)
    compute = check_precision(precision)
    bits = bits_per_element(compute) if weight_bits is None else bits_of(function, "weight_bits", weight_bits)
    share = device_share(resolved, tensor_parallel, bits, kv_precision)
    return {
        "model": resolved,
        "degree": np.asarray(share.tensor_parallel, dtype=float),
        "weights": share.weights.m_as("B"),
        "kv_per_token": share.kv_per_token.m_as("B/token"),
        "attention": attention_flops_per_pair(resolved).m_as("FLOP"),
        "peak": device.peak_throughput(compute).m_as("FLOP/s"),
        "bandwidth": device.memory_bandwidth.m_as("B/s"),
    }


def _estimate(flops, bytes_moved, tokens, peak, bandwidth) -> RooflineEstimate:
    compute = np.asarray(flops / peak, dtype=float)
    memory = np.asarray(bytes_moved / bandwidth, dtype=float)
    time = roofline_time.numeric(flops=flops, bytes_moved=bytes_moved, peak_throughput=peak, memory_bandwidth=bandwidth)

    def out(x):
        x = np.asarray(x)
        return x.item() if x.ndim == 0 else x

    return RooflineEstimate(
        time=Q_(out(time), "s"),
        compute_time=Q_(out(compute), "s"),
        memory_time=Q_(out(memory), "s"),
        flops=Q_(out(np.asarray(flops, dtype=float) + 0 * memory), "FLOP"),
        bytes_moved=Q_(out(np.asarray(bytes_moved, dtype=float) + 0 * compute), "B"),
        tokens=out(np.asarray(tokens) + 0 * compute),
        compute_bound=out(compute >= memory),
    )


@renamed(kv_dtype="kv_precision")
def roofline_prefill_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    prompt_tokens: Tokens,
    precision: str = "fp16",
    tensor_parallel: Count = 1,
    batch: Count = 1,
    cached_tokens: Tokens = 0,
    weight_bits: Precision = None,
    kv_precision: Precision = "fp16",
) -> RooflineEstimate:
    """Roofline time to prefill ``batch`` prompts of ``prompt_tokens`` on a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    accelerator : str or Accelerator
    prompt_tokens : int or array
        Tokens per prompt.
    precision : str
        Compute precision (sets the peak throughput) and, unless ``weight_bits`` is given, the
        weight precision.
    tensor_parallel : int or array
        Degree ``t``: FLOPs, weights and KV divide as in :mod:`calculator.memory`.
    batch : int or array
        Prompts prefilled together.
    cached_tokens : int or array
        Tokens already cached before each prompt (prefix-cache hit, earlier chunks).
    weight_bits : str or float, optional
        Weight storage when it differs from ``precision`` (``"int4"`` for W4A16).
    kv_precision : str

    Returns
    -------
    RooflineEstimate
        FLOPs per device = batch x :func:`prefill_flops` / t; bytes per device = weights / t +
        batch x (P + c_0) x KV bytes per token per device (KV written and prefix read).

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> est = roofline_prefill_time(m, h100, 4096, tensor_parallel=8)
    >>> round(est.time.m_as("ms"), 1), est.compute_bound
    (75.3, True)
    """
    name = "prefill_time"
    setup = _device_setup(name, model, accelerator, precision, tensor_parallel, weight_bits, kv_precision)
    prompt = np.asarray(count(name, "prompt_tokens", prompt_tokens), dtype=float)
    sequences = np.asarray(count(name, "batch", batch), dtype=float)
    cached = np.asarray(count(name, "cached_tokens", cached_tokens, minimum=0), dtype=float)
    flops = (
        sequences
        * prefill_flops.numeric(
            active_parameters=setup["model"].active,
            prompt_tokens=prompt,
            attention_flops=setup["attention"],
            cached_tokens=cached,
        )
        / setup["degree"]
    )
    bytes_moved = setup["weights"] + kv_cache_bytes.numeric(
        batch=sequences, context=prompt + cached, kv_per_token=setup["kv_per_token"]
    )
    return _estimate(flops, bytes_moved, sequences * prompt, setup["peak"], setup["bandwidth"])


@renamed(kv_dtype="kv_precision")
def roofline_decode_step_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    batch: Count,
    context: Tokens,
    precision: str = "fp16",
    tensor_parallel: Count = 1,
    weight_bits: Precision = None,
    kv_precision: Precision = "fp16",
) -> RooflineEstimate:
    """Roofline time of one decode step of ``batch`` sequences at ``context`` tokens each.

    Parameters
    ----------
    model : str or Model
    accelerator : str or Accelerator
    batch : int or array
    context : int or array
        Tokens each sequence holds (its new token attends to all of them).
    precision, tensor_parallel, weight_bits, kv_precision
        As for :func:`prefill_time`.

    Returns
    -------
    RooflineEstimate
        FLOPs per device = :func:`decode_flops` / t; bytes per device = weights / t + batch x
        context x KV bytes per token per device. ``tokens_per_second`` is the decode throughput
        bound (at batch 1, about memory bandwidth / weight bytes: section 10.9.3).

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> step = roofline_decode_step_time(m, h100, batch=np.array([1, 64]), context=4096, tensor_parallel=8)
    >>> step.time.to("ms")
    <Quantity([5.27396184 8.42908007], 'millisecond')>
    """
    name = "decode_step_time"
    setup = _device_setup(name, model, accelerator, precision, tensor_parallel, weight_bits, kv_precision)
    sequences = np.asarray(count(name, "batch", batch), dtype=float)
    tokens = np.asarray(count(name, "context", context), dtype=float)
    flops = (
        decode_flops.numeric(
            active_parameters=setup["model"].active, batch=sequences, context=tokens, attention_flops=setup["attention"]
        )
        / setup["degree"]
    )
    bytes_moved = setup["weights"] + kv_cache_bytes.numeric(
        batch=sequences, context=tokens, kv_per_token=setup["kv_per_token"]
    )
    return _estimate(flops, bytes_moved, sequences, setup["peak"], setup["bandwidth"])


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


def prefill_time(*args: Any, **kwargs: Any) -> RooflineEstimate:
    """Deprecated name of :func:`roofline_prefill_time` (the calibrated one is ``performance.prefill_time``)."""
    _renamed("phases.prefill_time", "roofline_prefill_time")
    return roofline_prefill_time(*args, **kwargs)


def decode_step_time(*args: Any, **kwargs: Any) -> RooflineEstimate:
    """Deprecated name of :func:`roofline_decode_step_time` (the calibrated one is ``performance.decode_step_time``)."""
    _renamed("phases.decode_step_time", "roofline_decode_step_time")
    return roofline_decode_step_time(*args, **kwargs)


def _renamed(old: str, new: str) -> None:
    import warnings

    warnings.warn(
        f"{old} is renamed {new} (the roofline estimate); the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )


def prefill_iterations(
    prompt_tokens: Tokens, chunk_size: Tokens, token_budget: Tokens = None, decode_batch: Count = 0
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
    prompt = np.asarray(count(name, "prompt_tokens", prompt_tokens))
    step = np.asarray(count(name, "chunk_size", chunk_size))
    if token_budget is not None:
        residual = np.asarray(count(name, "token_budget", token_budget)) - count(
            name, "decode_batch", decode_batch, minimum=0
        )
        if np.any(residual < 1):
            raise InputError(f"{name}(): decode_batch uses the whole token_budget; no prefill tokens fit (Eq. 8)")
        step = np.minimum(step, residual)
    iterations = -(-prompt // step)
    return int(iterations) if iterations.ndim == 0 else iterations.astype(np.int64)


def schedule_iteration(
    decode_batch: int, prefill_queue: Sequence[tuple[int, int]], token_budget: int, chunk_size: int
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
    decode = count(name, "decode_batch", decode_batch, minimum=0)
    budget = count(name, "token_budget", token_budget)
    step = count(name, "chunk_size", chunk_size)
    if decode > budget:
        raise InputError(f"{name}(): decode_batch ({decode}) exceeds token_budget ({budget}) (Eq. 8)")
    remaining = budget - decode
    plan: list[tuple[int, int, int]] = []
    for index, (length, offset) in enumerate(prefill_queue):
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


def simulate_chunked_prefill(
    prompt_lengths: Sequence[int], decode_batch: int, token_budget: int, chunk_size: int
) -> ChunkedSchedule:
    """Run Algorithm 3 on a queue of prompts with a fixed set of decode streams.

    Promoted prompts join the decode set (one token per iteration from then on); the existing
    streams are assumed to keep decoding throughout. Every iteration satisfies Eq. 8.

    Parameters
    ----------
    prompt_lengths : sequence of int
        Prompts waiting, in queue order.
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
    queue = [[count(name, f"prompt_lengths[{i}]", p), 0] for i, p in enumerate(prompt_lengths)]
    decode = count(name, "decode_batch", decode_batch, minimum=0)
    if decode + len(queue) > count(name, "token_budget", token_budget):
        raise InputError(
            f"{name}(): decode_batch + prompts ({decode + len(queue)}) exceed token_budget ({token_budget}); "
            f"admission must keep promoted prompts within the budget (section 10.8.2)"
        )
    first = np.zeros(len(queue), dtype=np.int64)
    waiting = list(range(len(queue)))
    decode_log: list[int] = []
    prefill_log: list[int] = []
    while waiting:
        plan = schedule_iteration(decode, [tuple(queue[i]) for i in waiting], token_budget, chunk_size)
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
    monolithic_tbt: Any
    monolithic_ttft: Any
    chunked_tbt: Any
    chunked_ttft: Any
    decode_step: Any


def chunked_prefill_tradeoff(
    model: ModelRef,
    accelerator: AcceleratorRef,
    prompt_tokens: int,
    chunk_size: int,
    decode_batch: int,
    precision: str = "fp16",
    tensor_parallel: int = 1,
    weight_bits: Precision = None,
) -> ChunkedPrefillTradeoff:
    """Figure 13: what chunking a prompt does to its own TTFT and to the streams' largest TBT gap.

    Parameters
    ----------
    model, accelerator, precision, tensor_parallel, weight_bits
        As for :func:`prefill_time`.
    prompt_tokens : int
        The arriving prompt ``P``.
    chunk_size : int
        ``C_chunk``; the iteration budget is ``B_dec + C_chunk``.
    decode_batch : int
        Streams decoding on the worker.

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
    setup = _device_setup(name, model, accelerator, precision, tensor_parallel, weight_bits, "fp16")
    prompt = count(name, "prompt_tokens", prompt_tokens)
    step = count(name, "chunk_size", chunk_size)
    decode = count(name, "decode_batch", decode_batch, minimum=0)
    schedule = simulate_chunked_prefill([prompt], 0, step, step)  # the prompt's chunk sizes
    chunks = schedule.prefill_tokens

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


# ============================================================================================
# Disaggregation (section 10.8.3) and preemption (section 10.7.7)


@formula(
    result=var("s", r"T_{\mathrm{handoff}}", "nonnegative", "KV-cache transfer time"),
    reference="Eq. 10, section 10.8.3",
    kv_bytes=var("B", r"M_{\mathrm{KV}}", "nonnegative", "KV bytes to move"),
    link_bandwidth=var("B/s", r"BW_{\mathrm{link}}", description="usable bandwidth of one path"),
    startup_latency=var("s", r"\alpha", "nonnegative", "setup and queueing time"),
    parallel_links=var("", "n", "positive_integer", "independent paths used at once"),
)
def kv_handoff_time(kv_bytes, link_bandwidth, startup_latency=0, parallel_links=1):
    r"""Time to hand a KV cache from the prefill pool to the decode pool (Eq. 10).

    Parameters
    ----------
    kv_bytes : Quantity [information]
    link_bandwidth : Quantity [information / time]
        Usable bandwidth of one path (per direction).
    startup_latency : Quantity [time], optional
        Setup and queueing at the operating point (not a fixed network latency).
    parallel_links : int, optional
        Paths used in parallel; spreading over a tensor-parallel group divides the payload time only
        when each device has its own path (section 10.8.3).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{handoff}} = \alpha + \frac{M_{\mathrm{KV}}}{n \, BW_{\mathrm{link}}}

    Examples
    --------
    Section 10.8.3: a 128K-token request of the GQA model (42.9 GB) over one 450 GB/s NVLink direction:

    >>> kv_handoff_time(Q_(42.95, "GB"), Q_(450, "GB/s")).to("ms")
    <Quantity(95.4444444, 'millisecond')>
    """
    return startup_latency + kv_bytes / (parallel_links * link_bandwidth)


def _link(function: str, link: Any) -> tuple[float, float]:
    """(bandwidth B/s, startup latency s) from a bandwidth quantity or a registry interconnect."""
    if isinstance(link, Q_):
        return magnitude(function, "link", link, "B/s", "positive"), 0.0
    if isinstance(link, str):
        from ..registry import load_registry

        link = load_registry().interconnect(link)
    if not hasattr(link, "bandwidth"):
        raise InputError(f"{function}(): argument 'link' must be a bandwidth or an interconnect, got {link!r}")
    latency = link.startup_latency.m_as("s") if getattr(link, "startup_latency", None) is not None else 0.0
    return link.bandwidth.m_as("B/s"), latency


@renamed(kv_dtype="kv_precision")
def model_kv_handoff_time(
    model: ModelRef,
    prompt_tokens: Tokens,
    link: InterconnectRef,
    kv_precision: Precision = "fp16",
    parallel_links: Count = 1,
    startup_latency: Time = None,
) -> Any:
    """Eq. 10 for a registry model: hand a prompt's KV cache over a link.

    Parameters
    ----------
    model : str or Model
    prompt_tokens : int or array
    link : Quantity [information / time] or str or Interconnect
        A bandwidth per direction, or a registry interconnect (its ``bandwidth`` and
        ``startup_latency``).
    kv_precision : str
    parallel_links : int
    startup_latency : Quantity [time], optional
        Overrides the interconnect's startup latency (set it to the loaded operating point).

    Returns
    -------
    Quantity [time]

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> round(model_kv_handoff_time(m, 131_072, Q_(450, "GB/s")).m_as("ms"), 1)
    95.4
    """
    name = "model_kv_handoff_time"
    bandwidth, latency = _link(name, link)
    if startup_latency is not None:
        latency = magnitude(name, "startup_latency", startup_latency, "s")
    tokens = count(name, "prompt_tokens", prompt_tokens)
    kv = kv_cache_bytes.numeric(
        batch=1,
        context=np.asarray(tokens, dtype=float),
        kv_per_token=model_kv_bytes_per_token(model, kv_precision).m_as("B/token"),
    )
    links = count(name, "parallel_links", parallel_links)
    return kv_handoff_time(Q_(kv, "B"), Q_(bandwidth, "B/s"), Q_(latency, "s"), links)


@dataclass(frozen=True, repr=False)
class PreemptionCosts(Result):
    """The three ways to free a running sequence's KV cache (section 10.7.7)."""

    retain_bytes: Any
    swap_time: Any
    recompute_time: Any


@renamed(kv_dtype="kv_precision")
def preemption_costs(
    model: ModelRef,
    accelerator: AcceleratorRef,
    context: int,
    host_link: InterconnectRef,
    precision: str = "fp16",
    tensor_parallel: int = 1,
    kv_precision: Precision = "fp16",
) -> PreemptionCosts:
    """Cost of keeping, swapping or recomputing a preempted sequence's KV cache.

    Parameters
    ----------
    model, accelerator, precision, tensor_parallel, kv_precision
        As for :func:`prefill_time`.
    context : int
        Tokens the sequence holds.
    host_link : Quantity [information / time] or str or Interconnect
        Device-host path (PCIe), per direction; each device of the group has its own.

    Returns
    -------
    PreemptionCosts
        ``retain_bytes``: HBM per device the sequence keeps; ``swap_time``: out and back in over the
        host link (twice Eq. 10); ``recompute_time``: the roofline prefill of ``context`` tokens.
        Section 10.7.7 compares these with the waiting request's deadline; the chapter gives no
        formula, this is the direct reading.

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> c = preemption_costs(m, h100, 8192, Q_(64, "GB/s"), tensor_parallel=8)
    >>> c.retain_bytes.to("MB"), c.swap_time.to("ms")
    (<Quantity(335.54432, 'megabyte')>, <Quantity(10.48576, 'millisecond')>)
    """
    name = "preemption_costs"
    setup = _device_setup(name, model, accelerator, precision, tensor_parallel, None, kv_precision)
    tokens = count(name, "context", context)
    bandwidth, latency = _link(name, host_link)
    held = kv_cache_bytes.numeric(batch=1, context=tokens, kv_per_token=setup["kv_per_token"])
    one_way = kv_handoff_time.numeric(kv_bytes=held, link_bandwidth=bandwidth, startup_latency=latency)
    rebuild = roofline_prefill_time(
        model, accelerator, tokens, precision, tensor_parallel, kv_precision=kv_precision
    ).time
    return PreemptionCosts(
        retain_bytes=Q_(float(held), "B"), swap_time=Q_(2 * float(one_way), "s"), recompute_time=rebuild
    )


@dataclass(frozen=True, repr=False)
class PoolSizes(Result):
    """Instances of each pool of a disaggregated deployment (see :func:`disaggregated_pool_sizes`)."""

    prefill_instances: Any
    decode_instances: Any
    prefill_utilization: Any
    decode_utilization: Any


@check_units(arrival_rate="request/s", prefill_throughput="token/s", decode_throughput="token/s")
def disaggregated_pool_sizes(
    arrival_rate: Rate,
    prompt_tokens: Tokens,
    output_tokens: Tokens,
    prefill_throughput: TokenRate,
    decode_throughput: TokenRate,
    max_utilization: float = 0.8,
) -> PoolSizes:
    """Size the prefill and decode pools of a disaggregated deployment by their token rates.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
    prompt_tokens, output_tokens : float
        Mean prompt and output tokens per request.
    prefill_throughput, decode_throughput : Quantity [token / time]
        Sustained SLO-compliant token rate of one prefill and one decode instance.
    max_utilization : float
        Planned utilization ceiling (headroom for the length distribution).

    Returns
    -------
    PoolSizes
        ``ceil(lambda P / (r_pre u))`` prefill and ``ceil(lambda O / (r_dec u))`` decode instances
        and their resulting utilizations.

    Notes
    -----
    Section 10.8.3: "the prefill pool must sustain the admitted prompt-token rate, the decode pool
    must sustain the admitted output-token rate, and both pools need headroom". Queueing delays at
    that utilization are priced separately.

    Examples
    --------
    >>> s = disaggregated_pool_sizes(Q_(10, "request/s"), 2000, 500, Q_(20_000, "token/s"), Q_(2_000, "token/s"))
    >>> s.prefill_instances, s.decode_instances
    (2, 4)
    """
    name = "disaggregated_pool_sizes"
    rate = magnitude(name, "arrival_rate", arrival_rate, "request/s")
    prompt = magnitude(name, "prompt_tokens", prompt_tokens, "", "nonnegative")
    output = magnitude(name, "output_tokens", output_tokens, "", "nonnegative")
    prefill = magnitude(name, "prefill_throughput", prefill_throughput, "token/s", "positive")
    decode = magnitude(name, "decode_throughput", decode_throughput, "token/s", "positive")
    ceiling = magnitude(name, "max_utilization", max_utilization, "", "probability")
    if np.any(np.asarray(ceiling) == 0):
        raise InputError(f"{name}(): argument 'max_utilization' must be > 0")
    demand_prefill, demand_decode = rate * prompt / prefill, rate * output / decode
    n_prefill = np.maximum(ceil_count(demand_prefill / ceiling), 1)
    n_decode = np.maximum(ceil_count(demand_decode / ceiling), 1)

    def out(x):
        return x.item() if np.ndim(x) == 0 else x

    return PoolSizes(
        prefill_instances=out(n_prefill),
        decode_instances=out(n_decode),
        prefill_utilization=out(demand_prefill / n_prefill),
        decode_utilization=out(demand_decode / n_decode),
    )


# ============================================================================================
# Quantization ceilings (section 10.9.3, Table 12)


#: FP16 and BF16 run at the same tensor-core rate on every registry accelerator.
_SIXTEEN_BIT = frozenset({"fp16", "bf16"})


@dataclass(frozen=True, repr=False)
class QuantizationCeilings(Result):
    """Upper bounds on what a weight/activation format buys (Table 12); not measured speedups."""

    weight_bytes_ratio: float
    prefill_compute_ceiling: float
    decode_traffic_ceiling: float


def quantization_ceilings(
    weight_bits: Precision,
    activation_precision: str = "fp16",
    accelerator: AcceleratorRef = None,
    baseline: str = "fp16",
) -> QuantizationCeilings:
    """Table 12's ceilings for WxAy against a baseline precision.

    Parameters
    ----------
    weight_bits : str or float
        Weight precision name or stored bits (metadata included).
    activation_precision : str
        Precision of the matrix arithmetic (``"fp16"`` for weight-only W8A16/W4A16 kernels, which
        dequantize to FP16 on chip; ``"int8"``/``"fp8"`` for W8A8).
    accelerator : str or Accelerator, optional
        Needed when the arithmetic precision differs from the baseline: its dense peak ratio is the
        prefill compute ceiling.
    baseline : str

    Returns
    -------
    QuantizationCeilings
        ``weight_bytes_ratio`` and ``decode_traffic_ceiling`` = baseline bits / weight bits (weight
        traffic bounds bandwidth-bound decode); ``prefill_compute_ceiling`` = peak at the arithmetic
        precision / peak at the baseline (1 for weight-only formats).

    Examples
    --------
    >>> quantization_ceilings("int4").decode_traffic_ceiling
    4.0
    """
    name = "quantization_ceilings"
    reference = check_precision(baseline, "baseline")
    ratio = bits_per_element(reference) / bits_of(name, "weight_bits", weight_bits)
    compute = check_precision(activation_precision, "activation_precision")
    if compute == reference or {compute, reference} <= _SIXTEEN_BIT:
        ceiling = 1.0
    elif accelerator is None:
        raise InputError(
            f"{name}(): activation_precision {compute!r} differs from the baseline {reference!r}; give an "
            f"accelerator whose peak-throughput ratio sets the prefill ceiling"
        )
    else:
        device = accelerator_of(accelerator)
        ceiling = float(device.peak_throughput(compute) / device.peak_throughput(reference))
    return QuantizationCeilings(weight_bytes_ratio=ratio, prefill_compute_ceiling=ceiling, decode_traffic_ceiling=ratio)
