"""Serving memory: weights, KV cache, memory fit, fragmentation, paging, prefix caching, LoRA, quantization.

Chapter sections 10.7 (memory and decode-time management) and 10.9 (weight quantization for serving).

Every capacity function takes the memory it may use as an argument, so each calculation states its
basis: the registered byte capacity of an accelerator (``Accelerator.memory``, 80 GiB for an H100)
or the conservative decimal budget of its nameplate (``Accelerator.memory_nameplate``, 80 GB).
Functions that take a registry ``model`` or ``accelerator`` accept its id or the registry object.

Tensor parallelism (degree ``t``) follows the layout of Megatron-style serving engines (vLLM,
TensorRT-LLM): weights divide by ``t``; query heads must divide by ``t``; the KV heads divide by ``t``
when ``t <= kv_heads`` (and must divide evenly), and when ``t > kv_heads`` each KV head is replicated
on ``t / kv_heads`` devices, so a device holds one KV head (``t`` must then be a multiple of
``kv_heads``; vLLM's rule). The MLA latent of DeepSeek-style models is replicated on every rank.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import bits_of, count, device_capacity, magnitude, model_of, probability, renamed, transformer_of
from ..errors import InputError
from ..formula import ceil, floor, formula, minimum, per, var
from ..precision import bits_per_element
from ..results import Result, ceil_count, floor_whole
from ..types import Bytes, BytesPerToken, Capacity, Count, ModelRef, Precision, Tokens
from ..units import Q_, check_units, ureg

__all__ = [
    "NO_BYTES",
    "NO_TIME",
    "KvBudget",
    "KvWall",
    "MemoryFit",
    "MemoryTier",
    "PagedAllocation",
    "PrecisionDividend",
    "PrefixCacheMemory",
    "QuantizationOverhead",
    "QuantizedTensor",
    "ReservationComparison",
    "SlotMap",
    "TierRetention",
    "kv_bytes_per_token",
    "mla_kv_bytes_per_token",
    "model_kv_bytes_per_token",
    "kv_bytes_per_token_per_device",
    "tensor_parallel_valid",
    "check_tensor_parallel",
    "DeviceShare",
    "device_share",
    "weight_bytes",
    "model_weight_bytes",
    "effective_bits_per_weight",
    "quantization_overhead",
    "min_devices_for_weights",
    "kv_cache_bytes",
    "memory_footprint",
    "max_batch",
    "max_batch_numeric",
    "max_context",
    "memory_fit",
    "model_memory_fit",
    "MaxBatch",
    "MaxBatches",
    "model_max_batch",
    "min_tensor_parallel",
    "kv_wall",
    "precision_dividend",
    "compare_precisions",
    "reservation_vs_paging",
    "pool_admission",
    "slot_map",
    "paged_allocation",
    "kv_pool_size",
    "kv_budget",
    "tiered_retention",
    "prefix_cache_tokens",
    "prefix_cache_memory",
    "shared_block_usage",
    "lora_parameters",
    "lora_adapter_parameters",
    "lora_adapter_bytes",
    "quantize",
]

#: Default for reserves and other optional byte amounts (a module-level constant, not a call per default).
NO_BYTES = Q_(0, "B")
NO_TIME = Q_(0, "s")


# ============================================================================================
# KV bytes per token


@formula(
    result=var("B/token", r"m_{\mathrm{tok}}", description="KV-cache bytes per token of one sequence"),
    reference="Eq. 5, section 10.7.1",
    layers=var("", "L", "positive_integer", "transformer layers"),
    kv_heads=var("", r"H_{\mathrm{kv}}", "positive_integer", "key/value heads per layer"),
    head_dim=var("", "d_{h}", "positive_integer", "elements per head"),
    bytes_per_element=var("B", "s", "precision", "bytes per cached element"),
)
def kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_element):
    r"""KV-cache bytes per token: one key and one value vector per KV head in every layer.

    Parameters
    ----------
    layers : int
        Transformer layers that keep a KV cache.
    kv_heads : int
        Key/value heads per layer (equal to the attention heads for MHA, fewer for GQA, 1 for MQA).
    head_dim : int
        Elements per head.
    bytes_per_element : Quantity [information]
        Storage per cached element (2 B for FP16/BF16, 1 B for FP8/INT8).

    Returns
    -------
    Quantity [information / token]

    Notes
    -----
    .. math:: m_{\mathrm{tok}} = 2 \, L \, H_{\mathrm{kv}} \, d_h \, s

    Equation 5 of the chapter (section 10.7.1), for full attention where every layer caches K and V.
    Latent-attention models (MLA) cache something else: see :func:`mla_kv_bytes_per_token`.

    Examples
    --------
    The 70B GQA reference model (80 layers, 8 KV heads of 128 at FP16):

    >>> from calculator.units import Q_
    >>> kv_bytes_per_token(80, 8, 128, Q_(2, "B"))
    <Quantity(327680.0, 'byte / token')>
    """
    return per(2 * layers * kv_heads * head_dim * bytes_per_element, "1/token")


@formula(
    result=var("B/token", r"m_{\mathrm{tok}}", description="MLA cache bytes per token of one sequence"),
    reference="DeepSeek-V2 (arXiv:2405.04434) Table 1; DeepSeek-V3 (arXiv:2412.19437) section 2.1.1",
    layers=var("", "L", "positive_integer", "transformer layers"),
    latent_dim=var("", r"d_{c}", "positive_integer", "compressed KV latent width (kv_lora_rank)"),
    rope_dim=var("", r"d_{h}^{R}", "positive_integer", "decoupled RoPE key width (qk_rope_head_dim)"),
    bytes_per_element=var("B", "s", "precision", "bytes per cached element"),
)
def mla_kv_bytes_per_token(layers, latent_dim, rope_dim, bytes_per_element):
    r"""Cache bytes per token of multi-head latent attention (MLA): one latent plus one RoPE key per layer.

    Parameters
    ----------
    layers : int
        Transformer layers.
    latent_dim : int
        Width of the compressed joint KV latent ``c^{KV}`` (``kv_lora_rank``, 512 in DeepSeek-V2/V3).
    rope_dim : int
        Width of the decoupled RoPE key ``k^R`` shared by all heads (``qk_rope_head_dim``, 64).
    bytes_per_element : Quantity [information]
        Storage per cached element.

    Returns
    -------
    Quantity [information / token]

    Notes
    -----
    .. math:: m_{\mathrm{tok}} = L \, (d_c + d_h^R) \, s

    MLA caches, per token and layer, the latent ``c^{KV}`` from which keys and values are both
    reconstructed, and the RoPE key; there is no separate K and V and no factor of the head count
    (DeepSeek-V2, arXiv:2405.04434, Table 1: "(d_c + d_h^R) l" elements per token; DeepSeek-V3
    keeps the same attention). Serving engines (vLLM, SGLang) store exactly this latent.

    Examples
    --------
    DeepSeek-V3 (61 layers, latent 512, RoPE key 64) at BF16:

    >>> mla_kv_bytes_per_token(61, 512, 64, Q_(2, "B"))
    <Quantity(70272.0, 'byte / token')>
    """
    return per(layers * (latent_dim + rope_dim) * bytes_per_element, "1/token")


def _kv_precision_bytes(kv_precision: Any) -> float:
    """Bytes per cached element for a precision name (or a byte quantity)."""
    if isinstance(kv_precision, Q_):
        return magnitude("model_kv_bytes_per_token", "kv_precision", kv_precision, "B", "positive")
    return bits_per_element(kv_precision) / 8


@renamed(kv_dtype="kv_precision")
def model_kv_bytes_per_token(model: ModelRef, kv_precision: Precision = "fp16") -> Any:
    """KV-cache bytes per token of a registry model (MHA, GQA, MQA or MLA) at a KV precision.

    Parameters
    ----------
    model : str or Model
        Registry id or :class:`~calculator.registry.Model`.
    kv_precision : str or Quantity [information]
        Precision name of the cached elements (``"fp16"``, ``"fp8"``, ``"int8"``, ``"int4"``, ...)
        or the bytes per element.

    Returns
    -------
    Quantity [information / token]

    Notes
    -----
    MHA, GQA and MQA use equation 5 (:func:`kv_bytes_per_token`) with the model's KV heads; MLA uses
    :func:`mla_kv_bytes_per_token` with ``kv_lora_rank`` and ``qk_rope_head_dim``. KV quantization
    metadata (scales) is not included; block-scaled KV formats add it as for weights
    (:func:`effective_bits_per_weight`).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> llama = Model(id="llama-3.1-70b", name="Llama 3.1 70B", provenance="published",
    ...     sources=[{"source": "hf", "fields": ["parameters"]}], parameters=70.6e9, layers=80,
    ...     attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> model_kv_bytes_per_token(llama)
    <Quantity(327680.0, 'byte / token')>
    >>> model_kv_bytes_per_token(llama, "fp8")
    <Quantity(163840.0, 'byte / token')>
    """
    resolved = transformer_of(model, "model_kv_bytes_per_token")
    size = Q_(_kv_precision_bytes(kv_precision), "B")
    if resolved.attention == "mla":
        return mla_kv_bytes_per_token(resolved.layers, resolved.kv_lora_rank, resolved.qk_rope_head_dim, size)
    return kv_bytes_per_token(resolved.layers, resolved.kv_heads, resolved.head_dim, size)


def tensor_parallel_valid(model: ModelRef, tensor_parallel: Count) -> Any:
    """Whether a model can be split over ``tensor_parallel`` devices (bool or bool array).

    Query heads must divide by the degree ``t``; KV heads must divide by ``t`` when ``t <= kv_heads``,
    and ``t`` must be a multiple of ``kv_heads`` when ``t > kv_heads`` (each KV head replicated on
    ``t / kv_heads`` devices). MLA has no KV-head constraint: the latent is replicated.

    Examples
    --------
    >>> from calculator.registry import Model
    >>> llama = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> tensor_parallel_valid(llama, np.array([1, 2, 3, 8, 16, 24]))
    array([ True,  True, False,  True,  True, False])
    """
    resolved = transformer_of(model, "tensor_parallel_valid")
    degree = np.asarray(count("tensor_parallel_valid", "tensor_parallel", tensor_parallel))
    valid = resolved.attention_heads % degree == 0
    if resolved.attention != "mla":
        kv = resolved.kv_heads
        valid &= np.where(degree <= kv, kv % degree == 0, degree % kv == 0)
    return bool(valid) if valid.ndim == 0 else valid


def check_tensor_parallel(model: ModelRef, tensor_parallel: Count, function: str = "check_tensor_parallel") -> Any:
    """Return the degree (int or int array) if it splits the model, else raise :class:`InputError`.

    See :func:`tensor_parallel_valid` for the rule; ``function`` names the caller in the message.
    """
    resolved = transformer_of(model, function)
    degree = count(function, "tensor_parallel", tensor_parallel)
    valid = np.asarray(tensor_parallel_valid(resolved, degree))
    if not np.all(valid):
        bad = np.asarray(degree)[~valid] if valid.ndim else np.asarray(degree)
        kv = "" if resolved.attention == "mla" else f" and {resolved.kv_heads} KV heads"
        raise InputError(
            f"{function}(): tensor_parallel {int(bad.flat[0])} does not split model '{resolved.id}' "
            f"({resolved.attention_heads} attention heads{kv}): the degree must divide the attention heads and "
            f"either divide the KV heads or be a multiple of them"
        )
    return degree


def kv_shards(tensor_parallel: Any, kv_heads: Any) -> Any:
    """Devices a token's KV cache is split over in a tensor-parallel group (plain numbers, no checks).

    ``min(t, kv_heads)``: KV heads split across ranks until each rank holds one head, after which
    heads are replicated. Pass ``kv_heads=1`` for MLA, whose latent every rank keeps whole.

    Examples
    --------
    >>> kv_shards(np.array([1, 4, 8, 16]), 8)
    array([1, 4, 8, 8])
    """
    return np.minimum(tensor_parallel, kv_heads)


def kv_shard_limit(model: Any) -> int:
    """The ``kv_heads`` argument of :func:`kv_shards` for a model (1 for MLA's replicated latent)."""
    return 1 if model.attention == "mla" else int(model.kv_heads)


def _kv_share_per_device(model: Any, degree: Any) -> Any:
    """Fraction of a token's KV bytes held by one device of a tensor-parallel group (no checks)."""
    share = 1.0 / kv_shards(np.asarray(degree, dtype=float), kv_shard_limit(model))
    return share if np.ndim(degree) else float(share)


@renamed(kv_dtype="kv_precision")
def kv_bytes_per_token_per_device(model: ModelRef, kv_precision: Precision = "fp16", tensor_parallel: Count = 1) -> Any:
    """KV-cache bytes per token held by one device of a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    kv_precision : str or Quantity [information]
    tensor_parallel : int or array of int
        Tensor-parallel degree ``t``.

    Returns
    -------
    Quantity [information / token]
        ``m_tok / t`` while ``t <= kv_heads``; ``m_tok / kv_heads`` (one replicated head per device)
        when ``t > kv_heads``; the whole ``m_tok`` for MLA, whose latent every rank keeps.

    Raises
    ------
    InputError
        If ``t`` does not split the model's heads (see :func:`tensor_parallel_valid`).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> llama = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> kv_bytes_per_token_per_device(llama, "fp16", np.array([1, 8, 16]))
    <Quantity([327680.  40960.  40960.], 'byte / token')>
    """
    resolved = transformer_of(model, "kv_bytes_per_token_per_device")
    degree = check_tensor_parallel(resolved, tensor_parallel, "kv_bytes_per_token_per_device")
    return model_kv_bytes_per_token(resolved, kv_precision) * _kv_share_per_device(resolved, degree)


# ============================================================================================
# Weights and quantization metadata


@formula(
    result=var("B", r"M_{W}", description="bytes of model weights"),
    reference="section 10.2 (weights = parameters x bytes per parameter); section 10.9",
    parameters=var("", "N", description="parameter count"),
    bits_per_weight=var("", "b", "precision", "stored bits per weight, including any scale metadata"),
)
def weight_bytes(parameters, bits_per_weight):
    r"""Bytes needed to hold a model's weights.

    Parameters
    ----------
    parameters : float
        Number of parameters (total parameters for a mixture of experts: every expert is resident).
    bits_per_weight : float
        Stored bits per weight: 16 for FP16/BF16, 8 for FP8/INT8, 4 for INT4; block-scaled formats
        add their scale bits per weight (4.25 for INT4 with an FP16 scale per 64 weights).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_W = N \, b / 8

    Examples
    --------
    A 70B model at FP16 (section 10.2: "140 GB"):

    >>> weight_bytes(70e9, 16).to("GB")
    <Quantity(140.0, 'gigabyte')>
    """
    return per(parameters * bits_per_weight / 8, "B")


@formula(
    result=var("", r"b_{\mathrm{eff}}", description="stored bits per weight including block metadata"),
    reference="Definition 10.6, section 10.9.1",
    bits=var("", "b", description="bits of each quantized weight"),
    block_size=var("", "G", "positive_integer", "weights sharing one scale"),
    scale_bits=var("", r"b_{s}", "nonnegative", "bits of each block's scale"),
    zero_point_bits=var("", r"b_{z}", "nonnegative", "bits of each block's zero point (0 if symmetric)"),
)
def effective_bits_per_weight(bits, block_size, scale_bits, zero_point_bits=0):
    r"""Effective stored bits per weight of a block-wise quantized format.

    Parameters
    ----------
    bits : float
        Payload bits per weight (4 for INT4).
    block_size : int
        Weights per block ``G``.
    scale_bits : float
        Bits of the per-block scale (16 for an FP16 scale, 32 for FP32, 8 for an E8M0/FP8 scale).
    zero_point_bits : float, optional
        Bits of the per-block zero point of an affine scheme; 0 for a symmetric (scale-only) scheme.

    Returns
    -------
    float

    Notes
    -----
    .. math:: b_{\mathrm{eff}} = b + \frac{b_s + b_z}{G}

    Definition 10.6 (section 10.9.1): INT4 with an FP16 scale per 64 weights stores 4.25 bits.

    Examples
    --------
    >>> effective_bits_per_weight(4, 64, 16)
    4.25
    """
    return bits + (scale_bits + zero_point_bits) / block_size


@dataclass(frozen=True, repr=False)
class QuantizationOverhead(Result):
    """Scale metadata of a block-wise format (see :func:`quantization_overhead`)."""

    bits: float
    block_size: int
    metadata_bits: float
    effective_bits: float
    overhead_vs_payload: float
    overhead_vs_baseline: float
    payload_compression: float
    compression: float


def quantization_overhead(
    bits: Any, block_size: int, scale_format: Any = "fp16", zero_point: Any = None, baseline: Any = "fp16"
) -> QuantizationOverhead:
    """Metadata cost of block-wise quantization: bits per weight, overhead and compression.

    Parameters
    ----------
    bits : str or float
        Payload precision (``"int4"``) or bits per weight.
    block_size : int
        Weights per scale.
    scale_format : str or float
        Precision name or bits of each scale (``"fp16"``, ``"fp32"``, ``"fp8"``).
    zero_point : str or float, optional
        Precision name or bits of a per-block zero point (affine schemes); None for symmetric.
    baseline : str or float
        The unquantized format compared against (FP16).

    Returns
    -------
    QuantizationOverhead
        ``metadata_bits`` (scale bits per weight), ``effective_bits``, ``overhead_vs_payload``
        (metadata / payload), ``overhead_vs_baseline`` (metadata / baseline bits),
        ``payload_compression`` (baseline / payload bits) and ``compression`` (baseline / effective).

    Notes
    -----
    Definition 10.6 and section 10.9.1; the chapter's examples are symmetric scale-only formats.

    Examples
    --------
    >>> q = quantization_overhead("int4", 64)
    >>> q.metadata_bits, q.effective_bits, q.overhead_vs_payload, q.overhead_vs_baseline
    (0.25, 4.25, 0.0625, 0.015625)
    """
    name = "quantization_overhead"
    payload = bits_of(name, "bits", bits)
    size = count(name, "block_size", block_size)
    scale = bits_of(name, "scale_format", scale_format)
    zero = 0.0 if zero_point is None else bits_of(name, "zero_point", zero_point)
    reference = bits_of(name, "baseline", baseline)
    effective = float(effective_bits_per_weight(payload, size, scale, zero))
    metadata = effective - payload
    return QuantizationOverhead(
        bits=payload,
        block_size=size,
        metadata_bits=metadata,
        effective_bits=effective,
        overhead_vs_payload=metadata / payload,
        overhead_vs_baseline=metadata / reference,
        payload_compression=reference / payload,
        compression=reference / effective,
    )


def model_weight_bytes(model: ModelRef, weight_bits: Precision = "fp16", tensor_parallel: Count = 1) -> Any:
    """Resident weight bytes of a registry model, per device of a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    weight_bits : str or float
        Precision name or stored bits per weight (``quantization_overhead(...).effective_bits`` for
        a block-scaled format).
    tensor_parallel : int or array of int
        Devices the weights are split over (weights divide evenly).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    A mixture of experts keeps every expert resident, so the bytes use the total parameter count,
    not the active one.

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> model_weight_bytes(m, "int4").to("GB"), model_weight_bytes(m, "fp16", tensor_parallel=8).to("GB")
    (<Quantity(35.0, 'gigabyte')>, <Quantity(17.5, 'gigabyte')>)
    """
    resolved = model_of(model)
    bits = bits_of("model_weight_bytes", "weight_bits", weight_bits)
    degree = count("model_weight_bytes", "tensor_parallel", tensor_parallel)
    return weight_bytes(resolved.parameters, bits) / degree


@check_units(weights="B", capacity="B", reserve="B")
def min_devices_for_weights(weights: Bytes, capacity: Capacity, reserve: Bytes = NO_BYTES) -> Any:
    """Fewest devices whose memory (less a per-device reserve) holds the weights.

    Parameters
    ----------
    weights : Quantity [information]
        Total weight bytes.
    capacity : Quantity [information]
        Memory per device.
    reserve : Quantity [information], optional
        Memory per device kept for runtime buffers.

    Returns
    -------
    int or array of int
        ``ceil(weights / (capacity - reserve))``. This counts weights only: KV cache needs more.

    Examples
    --------
    Section 10.9: 140 GB of FP16 weights need "at least two 80 GB GPUs"; INT4 (35 GB) fits on one.

    >>> min_devices_for_weights(Q_(140, "GB"), Q_(80, "GB")), min_devices_for_weights(Q_(35, "GB"), Q_(80, "GB"))
    (2, 1)
    """
    name = "min_devices_for_weights"
    total = magnitude(name, "weights", weights, "B", "positive")
    usable = magnitude(name, "capacity", capacity, "B", "positive") - magnitude(name, "reserve", reserve, "B")
    if np.any(np.asarray(usable) <= 0):
        raise InputError(f"{name}(): the reserve leaves no memory on a device (capacity <= reserve)")
    return ceil_count(np.asarray(total) / usable)


# ============================================================================================
# KV footprint, memory fit, max batch and max context


@formula(
    result=var("B", r"M_{\mathrm{KV}}", "nonnegative", "KV-cache bytes of a batch"),
    reference="section 10.7.1 (M_KV = B S m_tok); Napkin Math 10.5",
    batch=var("", "B", "nonnegative", "concurrent sequences"),
    context=var("", "S", "nonnegative", "tokens held per sequence"),
    kv_per_token=var("B/token", r"m_{\mathrm{tok}}", "positive", "KV bytes per token"),
)
def kv_cache_bytes(batch, context, kv_per_token):
    r"""KV-cache bytes of ``batch`` sequences of ``context`` tokens each.

    Parameters
    ----------
    batch : int
        Concurrent sequences (1 for one request's cache).
    context : int
        Tokens held per sequence (prompt plus generated so far).
    kv_per_token : Quantity [information / token]

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_{\mathrm{KV}} = B \, S \, m_{\mathrm{tok}}

    Section 10.7.1.

    Examples
    --------
    Napkin Math 10.5: one 131,072-token request of the 70B GQA model at FP16:

    >>> kv_cache_bytes(1, 131_072, Q_(327_680, "B/token")).to("GB")
    <Quantity(42.949673, 'gigabyte')>
    """
    return per(batch * context * kv_per_token, "token")


@formula(
    result=var("B", r"M_{\mathrm{total}}", "nonnegative", "device memory in use"),
    reference="Napkin Math 10.5 (M_total = M_W + M_KV), section 10.7.1",
    weights=var("B", r"M_{W}", "nonnegative", "resident weight bytes"),
    batch=var("", "B", "nonnegative", "concurrent sequences"),
    context=var("", "S", "nonnegative", "tokens held per sequence"),
    kv_per_token=var("B/token", r"m_{\mathrm{tok}}", "positive", "KV bytes per token"),
    reserve=var("B", r"M_{\mathrm{res}}", "nonnegative", "runtime allocations and headroom"),
)
def memory_footprint(weights, batch, context, kv_per_token, reserve=0):
    r"""Memory in use: weights, the batch's KV cache and a runtime reserve.

    Parameters
    ----------
    weights : Quantity [information]
    batch : int
    context : int
    kv_per_token : Quantity [information / token]
    reserve : Quantity [information], optional
        Runtime buffers, activations and headroom ("System" in Napkin Math 10.5).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_{\mathrm{total}} = M_W + M_{\mathrm{res}} + B \, S \, m_{\mathrm{tok}}

    Napkin Math 10.5 and Figure 9 (the KV cache wall). A configuration fits when this is at most
    the device capacity (see :func:`memory_fit`).

    Examples
    --------
    Figure 9: 35 GB of INT4 weights plus two 128,000-token requests exceed an 80 GB H100:

    >>> memory_footprint(Q_(35, "GB"), 2, 128_000, Q_(327_680, "B/token")).to("GB")
    <Quantity(118.88608, 'gigabyte')>
    """
    return weights + reserve + kv_cache_bytes.func(batch, context, kv_per_token)


def max_batch_numeric(
    capacity: Any,
    weights: Any,
    kv_per_token: Any,
    context: Any,
    reserve: Any = 0.0,
    block_size: Any = 1,
) -> Any:
    """:func:`max_batch` on plain magnitudes (bytes, bytes/token, tokens), for vectorized searches.

    No unit or domain checks; arguments broadcast. Returns an int64 array (or int), never negative.
    """
    blocks = np.asarray(block_size, dtype=float)
    held = np.ceil(np.asarray(context, dtype=float) / blocks) * blocks  # tokens rounded up to whole blocks
    free = np.asarray(capacity, dtype=float) - weights - reserve
    with np.errstate(divide="ignore", invalid="ignore"):
        batch = floor_whole(free / (held * kv_per_token))
    batch = np.maximum(batch, 0).astype(np.int64)
    return int(batch) if batch.ndim == 0 else batch


def _memory_args(function: str, capacity: Any, weights: Any, kv_per_token: Any, reserve: Any, block_size: Any):
    return (
        magnitude(function, "capacity", capacity, "B", "positive"),
        magnitude(function, "weights", weights, "B"),
        magnitude(function, "kv_per_token", kv_per_token, "B/token", "positive"),
        magnitude(function, "reserve", reserve, "B"),
        count(function, "block_size", block_size),
    )


@check_units(capacity="B", weights="B", kv_per_token="B/token", reserve="B")
def max_batch(
    capacity: Capacity,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    context: Tokens,
    reserve: Bytes = NO_BYTES,
    block_size: Count = 1,
) -> Any:
    """Largest number of sequences of ``context`` tokens whose KV cache fits beside the weights.

    Parameters
    ----------
    capacity : Quantity [information]
        Memory of the device (or of the group, with group totals for the other arguments).
    weights : Quantity [information]
        Resident weight bytes on that memory.
    kv_per_token : Quantity [information / token]
        KV bytes per token on that memory.
    context : int
        Tokens held per sequence.
    reserve : Quantity [information], optional
        Runtime allocations and headroom.
    block_size : int, optional
        Tokens per KV page; each sequence holds whole pages (1 = exact token accounting; vLLM's
        PagedAttention default is 16).

    Returns
    -------
    int or array of int
        ``floor((capacity - weights - reserve) / (ceil(S / b) b m_tok))``, and 0 (never negative)
        when the weights and reserve leave no room. Arguments broadcast.

    Notes
    -----
    Section 10.7.1 and Napkin Math 10.5. The bound is optimistic: it ignores future growth of the
    admitted sequences, activations not counted in ``reserve`` and allocator waste.

    Examples
    --------
    Napkin Math 10.5: 8 x 80 GiB node, 141.2 GB of weights, 20 GB reserved, 131,072 tokens:

    >>> max_batch(8 * Q_(80, "GiB"), Q_(141.2, "GB"), Q_(327_680, "B/token"), 131_072, Q_(20, "GB"))
    12
    """
    name = "max_batch"
    values = _memory_args(name, capacity, weights, kv_per_token, reserve, block_size)
    tokens = count(name, "context", context)
    cap, wts, per_token, res, blocks = values
    return max_batch_numeric(cap, wts, per_token, tokens, res, blocks)


@check_units(capacity="B", weights="B", kv_per_token="B/token", reserve="B")
def max_context(
    capacity: Capacity,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    batch: Count = 1,
    reserve: Bytes = NO_BYTES,
    block_size: Count = 1,
) -> Any:
    """Longest context (tokens per sequence) at which ``batch`` sequences fit beside the weights.

    Parameters
    ----------
    capacity, weights, kv_per_token, reserve, block_size
        As for :func:`max_batch`.
    batch : int
        Concurrent sequences.

    Returns
    -------
    int or array of int
        ``floor(free / (B m_tok))`` tokens rounded down to whole blocks; 0 when nothing fits.

    Notes
    -----
    The inverse of :func:`max_batch` in the context (Figure 9's boundary points). A model's own
    context limit is not applied here; :func:`model_memory_fit` applies it.

    Examples
    --------
    Section 10.7.1: 35 GB of weights on an 80 GB (decimal) H100, GQA 70B at FP16, batch 8:
    "roughly 17K tokens per sequence".

    >>> max_context(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), 8)
    17166
    """
    name = "max_context"
    cap, wts, per_token, res, blocks = _memory_args(name, capacity, weights, kv_per_token, reserve, block_size)
    sequences = count(name, "batch", batch)
    free = np.asarray(cap - wts - res, dtype=float)
    tokens = floor_whole(free / (sequences * per_token * blocks)) * blocks
    tokens = np.maximum(tokens, 0).astype(np.int64)
    return int(tokens) if tokens.ndim == 0 else tokens


@dataclass(frozen=True, repr=False)
class MemoryFit(Result):
    """Per-device memory budget of a configuration (see :func:`memory_fit`).

    Attributes
    ----------
    fits : bool or array of bool
        Whether weights + reserve + the batch's KV cache fit in ``capacity``.
    capacity, weights, reserve, kv : Quantity [information]
        Per-device capacity, resident weights, reserve and KV cache of ``batch`` sequences.
    available : Quantity [information]
        ``capacity - weights - reserve``: the KV budget (negative if the weights do not fit).
    free : Quantity [information]
        Memory left after the KV cache (0 when it does not fit).
    missing : Quantity [information]
        Bytes short of fitting (0 when it fits).
    kv_per_token : Quantity [information / token]
        KV bytes per token on one device.
    kv_per_request : Quantity [information]
        KV bytes of one sequence of ``context`` tokens on one device (whole blocks).
    batch, context, tensor_parallel : int
    max_batch : int
        Sequences of ``context`` tokens that fit (0 if none).
    max_context : int
        Longest context at which ``batch`` sequences (at least one) fit.
    capacity_basis : str
        Which memory figure ``capacity`` is: ``"physical"`` or ``"nameplate"`` when it was read from an
        accelerator, ``"as given"`` when it was passed as a quantity.
    """

    fits: Any
    capacity: Any
    weights: Any
    reserve: Any
    kv: Any
    available: Any
    free: Any
    missing: Any
    kv_per_token: Any
    kv_per_request: Any
    batch: Any
    context: Any
    tensor_parallel: Any
    max_batch: Any
    max_context: Any
    capacity_basis: str = "as given"


def _fit(capacity, weights, kv_per_token, context, batch, reserve, block_size, tensor_parallel, context_limit=None):
    """MemoryFit from checked magnitudes (bytes, B/token, tokens); every field broadcast to one shape."""
    arrays = np.broadcast_arrays(
        *(
            np.asarray(x, dtype=float)
            for x in (capacity, weights, kv_per_token, context, batch, reserve, tensor_parallel)
        )
    )
    capacity, weights, kv_per_token, context, batch, reserve, tensor_parallel = arrays
    kv_request = np.ceil(context / block_size) * block_size * kv_per_token
    kv = batch * kv_request
    available = capacity - weights - reserve
    slack = available - kv
    fits = slack >= -1e-12 * capacity
    with np.errstate(divide="ignore"):  # batch 0 asks for the longest context of one sequence
        longest = floor_whole(available / (np.maximum(batch, 1) * kv_per_token * block_size)) * block_size
    if context_limit is not None:
        longest = np.minimum(longest, context_limit)

    def out(x, unit=None, kind=float):
        x = np.asarray(x).astype(kind)
        x = x.item() if x.ndim == 0 else x
        return Q_(x, unit) if unit else x

    return MemoryFit(
        fits=out(fits, kind=bool),
        capacity=out(capacity, "B"),
        weights=out(weights, "B"),
        reserve=out(reserve, "B"),
        kv=out(kv, "B"),
        available=out(available, "B"),
        free=out(np.maximum(slack, 0), "B"),
        missing=out(np.where(fits, 0.0, -slack), "B"),
        kv_per_token=out(kv_per_token, "B/token"),
        kv_per_request=out(kv_request, "B"),
        batch=out(batch, kind=np.int64),
        context=out(context, kind=np.int64),
        tensor_parallel=out(tensor_parallel, kind=np.int64),
        max_batch=out(max_batch_numeric(capacity, weights, kv_per_token, context, reserve, block_size), kind=np.int64),
        max_context=out(np.maximum(longest, 0), kind=np.int64),
    )


@check_units(capacity="B", weights="B", kv_per_token="B/token", reserve="B")
def memory_fit(
    capacity: Capacity,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    context: Tokens,
    batch: Count = 1,
    reserve: Bytes = NO_BYTES,
    block_size: Count = 1,
) -> MemoryFit:
    """Does a batch fit on one device? The per-device budget, max batch and what is missing.

    Parameters
    ----------
    capacity, weights, kv_per_token : Quantity
        Per-device memory, resident weights and KV bytes per token (see :func:`max_batch`).
    context : int
        Tokens per sequence.
    batch : int, optional
        Sequences to hold (0 checks the weights alone).
    reserve : Quantity [information], optional
    block_size : int, optional
        KV page size in tokens.

    Returns
    -------
    MemoryFit
        ``fits`` is False (never an error) when the configuration does not fit, and ``missing``
        says by how many bytes.

    Examples
    --------
    Section 10.9.4: FP16 weights of a 70B model (140 GB) do not fit on one 80 GB A100:

    >>> fit = memory_fit(Q_(80, "GB"), Q_(140, "GB"), Q_(2_621_440, "B/token"), 1000, batch=0)
    >>> fit.fits, fit.missing.to("GB"), fit.max_batch
    (False, <Quantity(60.0, 'gigabyte')>, 0)
    """
    name = "memory_fit"
    cap, wts, per_token, res, blocks = _memory_args(name, capacity, weights, kv_per_token, reserve, block_size)
    tokens = count(name, "context", context)
    sequences = count(name, "batch", batch, minimum=0)
    return _fit(cap, wts, per_token, tokens, sequences, res, blocks, 1)


@dataclass(frozen=True, repr=False)
class DeviceShare(Result):
    """What one device of a tensor-parallel group holds of a model (see :func:`device_share`)."""

    tensor_parallel: Any
    weights: Any
    kv_per_token: Any


@renamed(kv_dtype="kv_precision")
def device_share(
    model: ModelRef, tensor_parallel: Count = 1, weight_bits: Precision = "fp16", kv_precision: Precision = "fp16"
) -> DeviceShare:
    """Weights and KV bytes per token on one device of a tensor-parallel group (vectorized over ``t``).

    Parameters
    ----------
    model : str or Model
    tensor_parallel : int or array of int
    weight_bits : str or float
        Weight precision name or stored bits per weight.
    kv_precision : str or Quantity

    Returns
    -------
    DeviceShare
        ``weights`` = :func:`model_weight_bytes` / t and ``kv_per_token`` =
        :func:`kv_bytes_per_token_per_device`; the degree is checked (:func:`check_tensor_parallel`).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> share = device_share(m, 8)
    >>> share.weights.to("GB"), share.kv_per_token
    (<Quantity(17.5, 'gigabyte')>, <Quantity(40960.0, 'byte / token')>)
    """
    degree = check_tensor_parallel(model, tensor_parallel, "device_share")
    return DeviceShare(
        tensor_parallel=degree,
        weights=model_weight_bytes(model, weight_bits, degree),
        kv_per_token=kv_bytes_per_token_per_device(model, kv_precision, degree),
    )


def _model_budget(
    function, model, capacity, context, weight_bits, kv_precision, tensor_parallel, reserve, capacity_basis
):
    """Checked per-device magnitudes for a model: (model, capacity, weights, kv/token, context, t, reserve)."""
    resolved = transformer_of(model, function)
    degree = check_tensor_parallel(resolved, tensor_parallel, function)
    share = device_share(resolved, degree, weight_bits, kv_precision)
    cap = device_capacity(function, capacity, capacity_basis)
    tokens = count(function, "context", context)
    limit = getattr(resolved, "max_context", None)
    if limit is not None and np.any(np.asarray(tokens) > limit):
        raise InputError(
            f"{function}(): context {int(np.max(tokens))} exceeds the context limit of model '{resolved.id}' "
            f"({limit} tokens)"
        )
    res = magnitude(function, "reserve", reserve, "B")
    weights, per_token = share.weights.m_as("B"), share.kv_per_token.m_as("B/token")
    return resolved, cap, weights, per_token, tokens, share.tensor_parallel, res


@renamed(kv_dtype="kv_precision")
def model_memory_fit(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    batch: Count = 1,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    tensor_parallel: Count = 1,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    block_size: Count = 1,
) -> MemoryFit:
    """Memory fit of a registry model on one device of a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    capacity : Quantity [information] or str or Accelerator
        Memory per device, or an accelerator whose memory is used on ``capacity_basis``.
    context : int
        Tokens per sequence; must not exceed the model's ``max_context`` when it is known.
    batch : int, optional
        Sequences to hold.
    weight_bits : str or float, optional
        Weight precision name or stored bits per weight (metadata included).
    kv_precision : str or Quantity, optional
        KV-cache precision.
    tensor_parallel : int or array of int, optional
        Tensor-parallel degree ``t``: weights divide by ``t``, KV as in the module notes.
    reserve : Quantity [information], optional
        Reserve per device.
    capacity_basis : {"physical", "nameplate"}
        For an accelerator: registered bytes (80 GiB) or the nameplate's decimal budget (80 GB).
    block_size : int, optional
        KV page size in tokens.

    Returns
    -------
    MemoryFit
        Per-device budget. ``max_context`` is also capped at the model's limit.

    Examples
    --------
    Napkin Math 10.7 (MHA baseline, 8 GPUs, 80 GB each, 4,096 tokens, all FP16):

    >>> from calculator.registry import Model
    >>> mha = Model(id="mha", name="70B MHA", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=64, head_dim=128, attention="mha")
    >>> model_memory_fit(mha, Q_(80, "GB"), 4096, tensor_parallel=8).max_batch
    46
    """
    name = "model_memory_fit"
    resolved, cap, weights, per_token, tokens, degree, res = _model_budget(
        name, model, capacity, context, weight_bits, kv_precision, tensor_parallel, reserve, capacity_basis
    )
    sequences = count(name, "batch", batch, minimum=0)
    blocks = count(name, "block_size", block_size)
    fit = _fit(cap, weights, per_token, tokens, sequences, res, blocks, degree, resolved.max_context)
    basis = "as given" if isinstance(capacity, ureg.Quantity) else capacity_basis
    return dataclasses.replace(fit, capacity_basis=basis)


@renamed(kv_dtype="kv_precision")
def model_max_batch(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    tensor_parallel: Count = 1,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    block_size: Count = 1,
) -> Any:
    """Max batch of a registry model per tensor-parallel group, vectorized over the numeric arguments.

    Same arguments as :func:`model_memory_fit` (without ``batch``). ``capacity``, ``context``,
    ``tensor_parallel`` and ``reserve`` broadcast, so a sizer can evaluate many candidates at once;
    filter the degrees first with :func:`tensor_parallel_valid` (an invalid one is an error).

    Returns
    -------
    MaxBatch or MaxBatches
        An ``int`` (or an int array) carrying ``capacity_basis``: ``"physical"`` or ``"nameplate"`` when
        ``capacity`` is an accelerator, ``"as given"`` when it is a quantity.

    Examples
    --------
    >>> from calculator.registry import Model
    >>> gqa = Model(id="gqa", name="70B GQA", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> batches = model_max_batch(gqa, Q_(80, "GB"), 4096, tensor_parallel=np.array([2, 4, 8]))
    >>> batches.tolist(), batches.capacity_basis
    ([14, 134, 372], 'as given')
    """
    name = "model_max_batch"
    _, cap, weights, per_token, tokens, _, res = _model_budget(
        name, model, capacity, context, weight_bits, kv_precision, tensor_parallel, reserve, capacity_basis
    )
    batch = max_batch_numeric(cap, weights, per_token, tokens, res, count(name, "block_size", block_size))
    basis = "as given" if isinstance(capacity, ureg.Quantity) else capacity_basis
    if np.ndim(batch):
        out = np.asarray(batch).view(MaxBatches)
        out.capacity_basis = basis
        return out
    return MaxBatch(int(batch), basis)


class MaxBatch(int):
    """A max batch (an ``int``) that says which capacity basis it was computed on (``capacity_basis``)."""

    capacity_basis: str

    def __new__(cls, value: int, capacity_basis: str) -> MaxBatch:
        """A max batch of ``value`` computed on ``capacity_basis``."""
        out = super().__new__(cls, value)
        out.capacity_basis = capacity_basis
        return out


class MaxBatches(np.ndarray):
    """Max batches (an int array) that say which capacity basis they were computed on (``capacity_basis``)."""

    capacity_basis: str = "as given"

    def __array_finalize__(self, obj: Any) -> None:
        self.capacity_basis = getattr(obj, "capacity_basis", "as given")


@renamed(kv_dtype="kv_precision")
def min_tensor_parallel(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    batch: Count = 1,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    block_size: Count = 1,
    degrees: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
) -> int:
    """The smallest tensor-parallel degree at which ``batch`` sequences of ``context`` tokens fit.

    Parameters
    ----------
    model, capacity, context, weight_bits, kv_precision, reserve, capacity_basis, block_size
        As for :func:`model_memory_fit`.
    batch : int
        Sequences to hold.
    degrees : sequence of int
        Candidate degrees; those that do not split the model (:func:`tensor_parallel_valid`) are
        skipped.

    Returns
    -------
    int
        The smallest valid candidate whose :func:`model_max_batch` reaches ``batch``; 0 when none
        does (more devices than the candidates, or a lower precision, are needed).

    Notes
    -----
    The closest feasible alternative of a configuration that does not fit: weights divide by the
    degree, the KV cache by :func:`kv_shards`, so the max batch grows with the degree until the KV
    heads are replicated.

    Examples
    --------
    Llama 3.1 70B at FP16 with 4,096-token sequences on 80 GiB devices:

    >>> min_tensor_parallel("llama-3.1-70b", Q_(80, "GiB"), 4096, batch=32)
    4
    >>> min_tensor_parallel("llama-3.1-405b", Q_(24, "GB"), 131_072, batch=64, degrees=(1, 2))
    0
    """
    name = "min_tensor_parallel"
    wanted = count(name, "batch", batch)
    candidates = np.array(sorted({int(count(name, "degrees", d)) for d in degrees}))
    valid = candidates[np.atleast_1d(tensor_parallel_valid(model, candidates))]
    if valid.size == 0:
        return 0
    batches = np.atleast_1d(
        model_max_batch(model, capacity, context, weight_bits, kv_precision, valid, reserve, capacity_basis, block_size)
    )
    fitting = valid[batches >= wanted]
    return int(fitting[0]) if fitting.size else 0


# ============================================================================================
# The KV wall (Figure 9) and the precision dividend (Napkin Math 10.7)


@dataclass(frozen=True, repr=False)
class KvWall(Result):
    """Memory in use against context for several batch sizes (Figure 9); see :func:`kv_wall`.

    ``footprint[i, j]`` is the memory of ``batches[i]`` sequences of ``contexts[j]`` tokens;
    ``boundary[i]`` is the longest context at which ``batches[i]`` sequences fit.
    """

    contexts: Any
    batches: Any
    footprint: Any
    capacity: Any
    boundary: Any


@check_units(capacity="B", weights="B", kv_per_token="B/token", reserve="B")
def kv_wall(
    capacity: Capacity,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    contexts: Tokens,
    batches: Count,
    reserve: Bytes = NO_BYTES,
) -> KvWall:
    """The KV cache wall (Figure 9): footprint over a context x batch grid and each batch's boundary.

    Parameters
    ----------
    capacity, weights, kv_per_token, reserve : Quantity
        As for :func:`max_batch` (one device).
    contexts : array of int
        Context lengths (x axis).
    batches : array of int
        Batch sizes (one line each).

    Returns
    -------
    KvWall

    Examples
    --------
    >>> wall = kv_wall(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), [1024, 131_072], [1, 2, 8])
    >>> wall.boundary
    array([137329,  68664,  17166])
    """
    name = "kv_wall"
    cap, wts, per_token, res, _ = _memory_args(name, capacity, weights, kv_per_token, reserve, 1)
    context = np.atleast_1d(count(name, "contexts", np.asarray(contexts)))
    batch = np.atleast_1d(count(name, "batches", np.asarray(batches)))
    footprint = memory_footprint.numeric(
        weights=wts, batch=batch[:, None], context=context[None, :], kv_per_token=per_token, reserve=res
    )
    boundary = max_context(Q_(cap, "B"), Q_(wts, "B"), Q_(per_token, "B/token"), batch, Q_(res, "B"))
    return KvWall(
        contexts=context, batches=batch, footprint=Q_(footprint, "B"), capacity=Q_(cap, "B"), boundary=boundary
    )


@formula(
    result=var("", "D", description="ratio of max batches after and before a precision change"),
    reference="Napkin Math 10.7, section 10.7.5",
    capacity=var("B", "C", description="memory per device"),
    weights=var("B", r"M_{W}", "nonnegative", "weight bytes per device before the change"),
    reserve=var("B", r"M_{\mathrm{res}}", "nonnegative", "reserve per device"),
    weight_bits_before=var("", r"b_{W}", "precision", "weight bits before"),
    weight_bits_after=var("", r"b_{W}'", "precision", "weight bits after"),
    kv_bits_before=var("", r"b_{\mathrm{KV}}", "precision", "KV bits before"),
    kv_bits_after=var("", r"b_{\mathrm{KV}}'", "precision", "KV bits after"),
)
def precision_dividend(
    capacity, weights, reserve, weight_bits_before, weight_bits_after, kv_bits_before, kv_bits_after
):
    r"""The precision dividend: factor by which a precision change raises the (continuous) max batch.

    Parameters
    ----------
    capacity : Quantity [information]
    weights : Quantity [information]
        Weight bytes per device at the old precision.
    reserve : Quantity [information]
    weight_bits_before, weight_bits_after : float
    kv_bits_before, kv_bits_after : float

    Returns
    -------
    float

    Notes
    -----
    .. math:: D = \frac{C - M_{\mathrm{res}} - M_W \, b_W' / b_W}{C - M_{\mathrm{res}} - M_W}
              \cdot \frac{b_{\mathrm{KV}}}{b_{\mathrm{KV}}'}

    Napkin Math 10.7: max batch is free memory over per-request cache, and a precision change scales
    both, whatever the head count, so MHA and GQA get the same continuous dividend. The integer
    counts (46 -> 112, 372 -> 901) differ slightly from it because of the floors.

    Examples
    --------
    >>> round(precision_dividend(Q_(80, "GB"), Q_(17.5, "GB"), Q_(0, "GB"), 16, 4, 16, 8), 2)
    2.42
    """
    free_before = capacity - reserve - weights
    free_after = capacity - reserve - weights * weight_bits_after / weight_bits_before
    return free_after / free_before * kv_bits_before / kv_bits_after


@dataclass(frozen=True, repr=False)
class PrecisionDividend(Result):
    """Max batch before and after a precision change (see :func:`compare_precisions`)."""

    before: MemoryFit
    after: MemoryFit
    dividend: Any
    batch_ratio: Any
    capacity_basis: str = "as given"


def compare_precisions(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    before: tuple[Any, Any] = ("fp16", "fp16"),
    after: tuple[Any, Any] = ("int4", "int8"),
    tensor_parallel: Count = 1,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
) -> PrecisionDividend:
    """Napkin Math 10.7 for any model: max batch at two (weight, KV) precisions and the dividend.

    Parameters
    ----------
    model : str or Model
    capacity : Quantity or accelerator
    context : int
    before, after : (weight precision or bits, KV precision)
    tensor_parallel : int
    reserve : Quantity [information]
    capacity_basis : {"physical", "nameplate"}

    Returns
    -------
    PrecisionDividend
        ``before`` and ``after`` fits, the continuous ``dividend`` (:func:`precision_dividend`) and
        ``batch_ratio`` of the integer max batches (``inf`` if nothing fit before).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> gqa = Model(id="gqa", name="70B GQA", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> d = compare_precisions(gqa, Q_(80, "GB"), 4096, tensor_parallel=8)
    >>> d.before.max_batch, d.after.max_batch, round(d.dividend, 2)
    (372, 901, 2.42)
    """
    fits = [
        model_memory_fit(
            model,
            capacity,
            context,
            0,
            weight_bits=weights,
            kv_precision=kv,
            tensor_parallel=tensor_parallel,
            reserve=reserve,
            capacity_basis=capacity_basis,
        )
        for weights, kv in (before, after)
    ]
    old, new = fits
    name = "compare_precisions"
    bits = [bits_of(name, "weight_bits", w) for w, _ in (before, after)] + [
        _kv_precision_bytes(kv) * 8 for _, kv in (before, after)
    ]
    dividend = precision_dividend(old.capacity, old.weights, old.reserve, *bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.divide(new.max_batch, old.max_batch) if old.max_batch else float("inf")
    return PrecisionDividend(
        before=old, after=new, dividend=dividend, batch_ratio=float(ratio), capacity_basis=old.capacity_basis
    )


# ============================================================================================
# Fragmentation and paging (sections 10.7.2-10.7.3)


@dataclass(frozen=True, repr=False)
class ReservationComparison(Result):
    """Contiguous worst-case reservation against on-demand (paged) allocation of one pool."""

    reserved_sequences: Any
    paged_sequences: Any
    idle_reserved_tokens: Any
    reservation_waste: Any
    paged_waste: Any
    capacity_gain: Any


def reservation_vs_paging(
    pool_tokens: Any, reserved_tokens: Any, used_tokens: Any, block_size: Count = 1
) -> ReservationComparison:
    """How many sequences a pool holds under max-length reservation vs on-demand pages.

    Parameters
    ----------
    pool_tokens : int
        Token slots in the KV pool (pool bytes / KV bytes per token).
    reserved_tokens : int
        Slots a contiguous allocator reserves per sequence (its maximum length).
    used_tokens : int
        Slots a sequence actually fills (<= reserved).
    block_size : int, optional
        Page size of the on-demand allocator (1 = per-token, the hotel analogy).

    Returns
    -------
    ReservationComparison
        ``reserved_sequences = floor(pool / reserved)``; ``paged_sequences = floor(pool / pages)``
        with ``pages = ceil(used / b) b``; ``idle_reserved_tokens`` held but unused under
        reservation; ``reservation_waste = 1 - used / reserved`` (section 10.7.2's internal
        fragmentation); ``paged_waste`` = unused fraction of the last page;
        ``capacity_gain = paged / reserved`` sequences.

    Examples
    --------
    Systems Perspective 10.1 (100 lockers, up to 10 suitcases per guest, 1 each):

    >>> r = reservation_vs_paging(100, 10, 1)
    >>> r.reserved_sequences, r.paged_sequences, r.idle_reserved_tokens
    (10, 100, 90)
    """
    name = "reservation_vs_paging"
    pool = count(name, "pool_tokens", pool_tokens)
    reserved = count(name, "reserved_tokens", reserved_tokens)
    used = count(name, "used_tokens", used_tokens)
    blocks = count(name, "block_size", block_size)
    if np.any(np.asarray(used) > reserved):
        raise InputError(f"{name}(): used_tokens ({used}) exceeds reserved_tokens ({reserved})")
    pages = np.ceil(np.asarray(used) / blocks) * blocks
    held = np.floor_divide(pool, reserved)
    paged = np.floor_divide(pool, pages).astype(np.int64)
    return ReservationComparison(
        reserved_sequences=_int(held),
        paged_sequences=_int(paged),
        idle_reserved_tokens=_int(held * (np.asarray(reserved) - used)),
        reservation_waste=_float(1 - np.asarray(used) / reserved),
        paged_waste=_float(1 - np.asarray(used) / pages),
        capacity_gain=_float(np.divide(paged, held, out=np.full(np.shape(paged), np.inf), where=held > 0)),
    )


def _int(x: Any) -> Any:
    x = np.asarray(x).astype(np.int64)
    return int(x) if x.ndim == 0 else x


def _float(x: Any) -> Any:
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def pool_admission(pool_tokens: Any, sequence_tokens: Any, block_size: Count = 1) -> int:
    """How many sequences of a queue, taken in order, a KV pool admits before the next one does not fit.

    Parameters
    ----------
    pool_tokens : int
        Token slots in the pool.
    sequence_tokens : sequence of int
        Slots each queued sequence needs: its maximum length under contiguous reservation, its
        current length under paging.
    block_size : int, optional
        Page size; each sequence holds ``ceil(tokens / b)`` whole pages.

    Returns
    -------
    int
        Length of the longest prefix of the queue whose (page-rounded) sizes sum to at most the pool.

    Examples
    --------
    A 1,000-slot pool, sequences of 100-400 tokens: reserving 512 slots each admits 1; 16-token pages admit 4.

    >>> lengths = [100, 250, 400, 130, 300]
    >>> pool_admission(1000, [512] * len(lengths)), pool_admission(1000, lengths, block_size=16)
    (1, 4)
    """
    name = "pool_admission"
    pool = count(name, "pool_tokens", pool_tokens, minimum=0)
    tokens = np.atleast_1d(count(name, "sequence_tokens", np.asarray(sequence_tokens)))
    size = count(name, "block_size", block_size)
    held = np.cumsum(-(-tokens // size) * size)
    return int(np.searchsorted(held, pool, side="right"))


@dataclass(frozen=True, repr=False)
class SlotMap(Result):
    """A KV slot map: ``"A"`` used by sequence A, ``"a"`` reserved for A but unused, ``" "`` free.

    See :func:`slot_map`. ``admits(need)`` answers whether a new sequence fits.
    """

    slots: tuple[str, ...]
    used: int
    reserved_unused: int
    free: int
    largest_free_run: int
    internal_waste: float
    external_fragmentation: float

    def admits(self, need: int, paged: bool = False, block_size: int = 1) -> bool:
        """Whether a sequence needing ``need`` slots can be placed.

        A contiguous allocator needs a free run of ``need`` slots; a paged allocator needs
        ``ceil(need / block_size)`` free aligned blocks anywhere (Figure 10 (b) and (c)).
        """
        need = count("SlotMap.admits", "need", need)
        if not paged:
            return self.largest_free_run >= need
        size = count("SlotMap.admits", "block_size", block_size)
        free = np.array([s == " " for s in self.slots])
        whole = free[: len(free) // size * size].reshape(-1, size).all(axis=1)
        return int(whole.sum()) >= -(-need // size)


def slot_map(slots: str | Sequence[str]) -> SlotMap:
    """Fragmentation of a KV slot map written as in section 10.7.2 (``"[A][A][a][a][B][B][B][b]"``).

    Parameters
    ----------
    slots : str or sequence of str
        ``"[X]"`` cells (or one-character strings): an upper-case letter is a slot in use, a
        lower-case letter a slot reserved but unused, a blank a free slot.

    Returns
    -------
    SlotMap
        Counts, the largest contiguous free run, the internal waste (reserved-unused over all
        reserved slots) and the external fragmentation ``1 - largest_free_run / free``.

    Examples
    --------
    Section 10.7.2, time 2: four free slots, largest run two; a contiguous allocator cannot place a
    4-slot sequence, a paged one can.

    >>> m = slot_map("[ ][ ][C][C][ ][ ][D][D]")
    >>> m.free, m.largest_free_run, m.admits(4), m.admits(4, paged=True)
    (4, 2, False, True)
    """
    cells = tuple(slots[1::3]) if isinstance(slots, str) else tuple(str(s) or " " for s in slots)
    if isinstance(slots, str) and "[" + "][".join(cells) + "]" != slots.strip():
        raise InputError(f"slot_map(): expected cells like '[A][a][ ]', got {slots!r}")
    if not cells or any(len(c) != 1 or not (c == " " or c.isalpha()) for c in cells):
        raise InputError(f"slot_map(): each slot must be a letter or a blank, got {cells!r}")
    free = np.array([c == " " for c in cells])
    used = sum(c.isupper() for c in cells)
    unused = sum(c.islower() for c in cells)
    edges = np.diff(np.concatenate([[0], free.astype(np.int8), [0]]))
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    largest = int(runs.max()) if runs.size else 0
    total_free = int(free.sum())
    return SlotMap(
        slots=cells,
        used=used,
        reserved_unused=unused,
        free=total_free,
        largest_free_run=largest,
        internal_waste=unused / (used + unused) if used + unused else 0.0,
        external_fragmentation=1 - largest / total_free if total_free else 0.0,
    )


@dataclass(frozen=True, repr=False)
class PagedAllocation(Result):
    """Pages of a sequence under paged KV allocation (see :func:`paged_allocation`)."""

    blocks: Any
    allocated_tokens: Any
    waste_tokens: Any
    waste_fraction: Any


def paged_allocation(context: Tokens, block_size: Count = 16) -> PagedAllocation:
    """Blocks a sequence occupies under PagedAttention and the unused tail of its last block.

    Parameters
    ----------
    context : int or array of int
        Tokens in the sequence.
    block_size : int, optional
        Tokens per block (16 is the default of the PagedAttention paper, section 10.7.3).

    Returns
    -------
    PagedAllocation
        ``blocks = ceil(S / b)``, ``allocated_tokens = blocks b``, ``waste_tokens`` (at most
        ``b - 1``) and ``waste_fraction`` of the allocation.

    Examples
    --------
    >>> p = paged_allocation(100)
    >>> p.blocks, p.waste_tokens
    (7, 12)
    """
    name = "paged_allocation"
    tokens = np.asarray(count(name, "context", context))
    size = count(name, "block_size", block_size)
    blocks = -(-tokens // size)
    allocated = blocks * size
    return PagedAllocation(
        blocks=_int(blocks),
        allocated_tokens=_int(allocated),
        waste_tokens=_int(allocated - tokens),
        waste_fraction=_float((allocated - tokens) / allocated),
    )


# ============================================================================================
# KV budget with headroom (10.7.8) and the memory hierarchy (Example 10.4)


@formula(
    result=var("B", r"M_{\mathrm{pool}}", "any", "managed KV pool"),
    reference="section 10.7.8 (KV pool size = 0.9 x available)",
    total=var("B", r"M_{\mathrm{HBM}}", description="device memory"),
    weights=var("B", r"M_{W}", "nonnegative", "weights"),
    activations=var("B", r"M_{\mathrm{act}}", "nonnegative", "activation memory"),
    overhead=var("B", r"M_{\mathrm{ovh}}", "nonnegative", "runtime overhead"),
    headroom=var("", "h", "fraction_open", "safety headroom left unused"),
)
def kv_pool_size(total, weights, activations, overhead, headroom=0.1):
    r"""Managed KV pool: memory left after weights, activations and overhead, less a headroom.

    Parameters
    ----------
    total, weights, activations, overhead : Quantity [information]
    headroom : float, optional
        Fraction of the remainder kept free (0.1 in section 10.7.8).

    Returns
    -------
    Quantity [information]
        Negative when the fixed claims already exceed the memory (see :func:`kv_budget`).

    Notes
    -----
    .. math:: M_{\mathrm{pool}} = (1 - h)\,(M_{\mathrm{HBM}} - M_W - M_{\mathrm{act}} - M_{\mathrm{ovh}})

    Examples
    --------
    >>> kv_pool_size(Q_(80, "GB"), Q_(35, "GB"), Q_(3, "GB"), Q_(2, "GB")).to("GB")
    <Quantity(36.0, 'gigabyte')>
    """
    return (1 - headroom) * (total - weights - activations - overhead)


@dataclass(frozen=True, repr=False)
class KvBudget(Result):
    """Section 10.7.8's capacity accounting (see :func:`kv_budget`)."""

    available: Any
    pool: Any
    max_concurrent: Any
    fits: Any
    missing: Any


@check_units(total="B", weights="B", kv_per_token="B/token", activations="B", overhead="B")
def kv_budget(
    total: Bytes,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    sequence_length: Tokens,
    activations: Bytes = NO_BYTES,
    overhead: Bytes = NO_BYTES,
    headroom: float = 0.1,
) -> KvBudget:
    """KV pool with headroom and the number of concurrent sequences it holds (section 10.7.8).

    Parameters
    ----------
    total, weights, activations, overhead : Quantity [information]
    kv_per_token : Quantity [information / token]
    sequence_length : int
        Tokens budgeted per sequence: the average length gives the chapter's estimate; the maximum
        admitted length gives a bound that reserves room for growth.
    headroom : float, optional

    Returns
    -------
    KvBudget
        ``available`` memory, the ``pool``, ``max_concurrent`` sequences (never negative),
        ``fits`` (False if the fixed claims exceed the memory) and ``missing`` bytes.

    Examples
    --------
    >>> b = kv_budget(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), 4096)
    >>> b.pool.to("GB"), b.max_concurrent
    (<Quantity(40.5, 'gigabyte')>, 30)
    """
    name = "kv_budget"
    values = {
        "total": magnitude(name, "total", total, "B", "positive"),
        "weights": magnitude(name, "weights", weights, "B"),
        "activations": magnitude(name, "activations", activations, "B"),
        "overhead": magnitude(name, "overhead", overhead, "B"),
    }
    per_token = magnitude(name, "kv_per_token", kv_per_token, "B/token", "positive")
    tokens = count(name, "sequence_length", sequence_length)
    share = magnitude(name, "headroom", headroom, "", "fraction_open")
    pool = kv_pool_size.numeric(**values, headroom=share)
    available = pool / (1 - share)
    return KvBudget(
        available=Q_(available, "B"),
        pool=Q_(pool, "B"),
        max_concurrent=max_batch_numeric(pool, 0.0, per_token, tokens),
        fits=_scalar_bool(available >= 0),
        missing=Q_(np.maximum(-available, 0.0), "B"),
    )


def _scalar_bool(x: Any) -> Any:
    x = np.asarray(x)
    return bool(x) if x.ndim == 0 else x


@dataclass(frozen=True)
class MemoryTier:
    """A memory tier below HBM that can hold swapped-out KV pages (CPU DRAM, NVMe SSD).

    Attributes
    ----------
    name : str
    capacity : Quantity [information]
        Bytes available to swapped KV state.
    bandwidth : Quantity [information / time], optional
        Effective restore bandwidth back to HBM.
    latency : Quantity [time], optional
        Per-restore startup (setup and queueing) time.
    """

    name: str
    capacity: Any
    bandwidth: Any = None
    latency: Any = NO_TIME


@dataclass(frozen=True, repr=False)
class TierRetention(Result):
    """Sequences retained across memory tiers (see :func:`tiered_retention`)."""

    active: int
    per_tier: Mapping[str, int]
    retained: int
    restore_time: Mapping[str, Any]


@check_units(sequence_bytes="B")
def tiered_retention(active_sequences: int, sequence_bytes: Any, tiers: Iterable[MemoryTier]) -> TierRetention:
    """Retained sequence capacity of a multi-tier KV hierarchy (Example 10.4).

    Parameters
    ----------
    active_sequences : int
        Sequences HBM holds (the active, HBM-resident set; it does not grow).
    sequence_bytes : Quantity [information]
        KV bytes of one swapped-out sequence.
    tiers : iterable of MemoryTier
        Lower tiers in order (CPU DRAM, NVMe).

    Returns
    -------
    TierRetention
        ``retained = active + sum(floor(tier capacity / sequence bytes))``, and for each tier with
        a bandwidth the time to restore one sequence, ``latency + bytes / bandwidth`` (the transfer
        model of equation 10, :func:`calculator.phases.kv_handoff_time`).

    Examples
    --------
    >>> t = tiered_retention(50, Q_(1.6, "GB"), [MemoryTier("dram", Q_(720, "GB"), Q_(25, "GB/s"))])
    >>> t.retained, t.restore_time["dram"].to("ms")
    (500, <Quantity(64.0, 'millisecond')>)
    """
    from ..phases import kv_handoff_time

    name = "tiered_retention"
    active = count(name, "active_sequences", active_sequences, minimum=0)
    size = magnitude(name, "sequence_bytes", sequence_bytes, "B", "positive")
    per_tier: dict[str, int] = {}
    restore: dict[str, Any] = {}
    for tier in tiers:
        held = magnitude(name, f"tiers['{tier.name}'].capacity", tier.capacity, "B")
        per_tier[tier.name] = int(floor_whole(held / size))
        if tier.bandwidth is not None:
            restore[tier.name] = kv_handoff_time(Q_(size, "B"), tier.bandwidth, tier.latency)
    return TierRetention(
        active=active, per_tier=per_tier, retained=active + sum(per_tier.values()), restore_time=restore
    )


# ============================================================================================
# Prefix caching (section 10.7.4)


@formula(
    result=var("", r"T_{\mathrm{KV}}", "nonnegative", "token slots held by the population"),
    reference="Napkin Math 10.6, section 10.7.4 (block sharing with copy-on-write)",
    users=var("", "N", "positive", "concurrent requests"),
    prefix_tokens=var("", "P", "nonnegative", "shared prefix tokens"),
    unique_tokens=var("", "U", "nonnegative", "private tokens per request"),
    hit_rate=var("", "h", "probability", "share of requests that reuse the cached prefix"),
    block_size=var("", "b", "positive_integer", "tokens per KV block"),
)
def prefix_cache_tokens(users, prefix_tokens, unique_tokens, hit_rate=1, block_size=1):
    r"""Token slots held by ``N`` requests that share a ``P``-token prefix at hit rate ``h``.

    Parameters
    ----------
    users : float
        Concurrent requests ``N``.
    prefix_tokens : float
        Common prefix ``P`` (system prompt, shared document).
    unique_tokens : float
        Private tokens per request ``U`` (its own suffix and response).
    hit_rate : float, optional
        Fraction of requests whose prefix matches the cached one (1 in Napkin Math 10.6).
    block_size : int, optional
        KV block size ``b``; only whole blocks are shared, and a prefix ending inside a block is
        copied on write into every request's private blocks.

    Returns
    -------
    float
        Token slots (multiply by bytes per token for memory).

    Notes
    -----
    With :math:`P_s = \lfloor P/b \rfloor b` shared, the rest :math:`r = P - P_s` private,
    :math:`\lceil x \rceil_b = \lceil x/b \rceil b` and :math:`n = hN` requests hitting:

    .. math:: T = \min(n, 1)\,P_s + n \lceil r + U \rceil_b + (N - n) \lceil P + U \rceil_b

    For :math:`b = 1`, :math:`h = 1` this is the chapter's :math:`P + N U`; for :math:`h = 0` it is
    the unshared :math:`N (P + U)`.

    Examples
    --------
    Napkin Math 10.6: 1,000 users, a 2,000-token prompt, 500-token responses:

    >>> prefix_cache_tokens(1000, 2000, 500), prefix_cache_tokens(1000, 2000, 500, 0)
    (502000.0, 2500000.0)
    """
    shared = floor(prefix_tokens / block_size) * block_size
    tail = prefix_tokens - shared
    hits = hit_rate * users
    per_hit = ceil((tail + unique_tokens) / block_size) * block_size
    per_miss = ceil((prefix_tokens + unique_tokens) / block_size) * block_size
    return minimum(hits, 1) * shared + hits * per_hit + (users - hits) * per_miss


@dataclass(frozen=True, repr=False)
class PrefixCacheMemory(Result):
    """KV memory with and without prefix sharing (see :func:`prefix_cache_memory`)."""

    tokens_without: Any
    tokens_with: Any
    bytes_without: Any
    bytes_with: Any
    reduction: Any
    capacity_ratio: Any


@check_units(kv_per_token="B/token")
def prefix_cache_memory(
    users: Any,
    prefix_tokens: Any,
    unique_tokens: Any,
    kv_per_token: BytesPerToken,
    hit_rate: Any = 1.0,
    block_size: Count = 1,
) -> PrefixCacheMemory:
    """Prefix caching: KV memory of a request population with and without a shared prefix.

    Parameters
    ----------
    users, prefix_tokens, unique_tokens, hit_rate, block_size
        As for :func:`prefix_cache_tokens`.
    kv_per_token : Quantity [information / token]

    Returns
    -------
    PrefixCacheMemory
        Token slots and bytes without and with sharing, the ``reduction`` (``1 - with/without``,
        Table 10's "memory savings") and the ``capacity_ratio`` (``without/with``).

    Notes
    -----
    Napkin Math 10.6 and Table 10. Sharing needs the same token prefix, model and adapter, and
    tenant-permitted reuse (section 10.7.4); the hit rate is the fraction of requests meeting that.

    Examples
    --------
    >>> p = prefix_cache_memory(1000, 2000, 500, Q_(2_621_440, "B/token"))
    >>> p.bytes_without.to("TB"), round(p.reduction, 4)
    (<Quantity(6.5536, 'terabyte')>, 0.7992)
    """
    name = "prefix_cache_memory"
    args = {
        "users": count(name, "users", users),
        "prefix_tokens": count(name, "prefix_tokens", prefix_tokens, minimum=0),
        "unique_tokens": count(name, "unique_tokens", unique_tokens, minimum=0),
        "block_size": count(name, "block_size", block_size),
    }
    rate = probability(name, "hit_rate", hit_rate)
    per_token = magnitude(name, "kv_per_token", kv_per_token, "B/token", "positive")
    without = prefix_cache_tokens.numeric(**args, hit_rate=0.0)
    with_sharing = prefix_cache_tokens.numeric(**args, hit_rate=rate)
    if np.any(np.asarray(without) == 0):
        raise InputError(f"{name}(): the requests hold no tokens (prefix_tokens + unique_tokens = 0)")
    return PrefixCacheMemory(
        tokens_without=_float(without),
        tokens_with=_float(with_sharing),
        bytes_without=Q_(_float(without * per_token), "B"),
        bytes_with=Q_(_float(with_sharing * per_token), "B"),
        reduction=_float(np.maximum(1 - with_sharing / without, 0.0)),  # >= 0 up to rounding
        capacity_ratio=_float(without / with_sharing),
    )


def shared_block_usage(block_tables: Iterable[Sequence[int]]) -> tuple[int, int]:
    """Logical and physical blocks of a set of block tables that may share physical blocks.

    Parameters
    ----------
    block_tables : iterable of sequences of int
        Each request's page table (physical block ids, Figure 11).

    Returns
    -------
    (int, int)
        Blocks the requests would hold without sharing, and distinct physical blocks with it.

    Examples
    --------
    Section 10.7.4's three page tables sharing blocks 0-5:

    >>> shared_block_usage([[0, 1, 2, 3, 4, 5, 10, 11], [0, 1, 2, 3, 4, 5, 12, 13, 14], [0, 1, 2, 3, 4, 5, 15]])
    (24, 12)
    """
    tables = [list(t) for t in block_tables]
    return sum(len(t) for t in tables), len({b for t in tables for b in t})


# ============================================================================================
# LoRA adapters (section 10.7.9)


@formula(
    result=var("", r"N_{\mathrm{LoRA}}", description="adapter parameters of one projection"),
    reference="Eq. 7, section 10.7.9",
    input_width=var("", r"d_{\mathrm{in}}", "positive_integer", "projection input width"),
    output_width=var("", r"d_{\mathrm{out}}", "positive_integer", "projection output width"),
    rank=var("", "r", "positive_integer", "adapter rank"),
)
def lora_parameters(input_width, output_width, rank):
    r"""Parameters a rank-``r`` LoRA adapter adds to one ``d_in x d_out`` projection.

    Parameters
    ----------
    input_width, output_width : int
    rank : int

    Returns
    -------
    float

    Notes
    -----
    .. math:: N_{\mathrm{LoRA}} = r \, (d_{\mathrm{in}} + d_{\mathrm{out}})

    Equation 7: :math:`A \in \mathbb{R}^{r \times d_{in}}`, :math:`B \in \mathbb{R}^{d_{out} \times r}`,
    instead of a full :math:`d_{in} d_{out}` matrix.

    Examples
    --------
    >>> lora_parameters(8192, 8192, 16)
    262144.0
    """
    return rank * (input_width + output_width)


_PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


def _projection_shapes(model: Any) -> dict[str, tuple[int, int]]:
    hidden = model.hidden_size
    shapes: dict[str, tuple[int, int]] = {}
    if model.attention != "mla" and model.head_dim is not None and hidden is not None:
        q_width = model.attention_heads * model.head_dim
        kv_width = model.kv_heads * model.head_dim
        shapes |= {"q": (hidden, q_width), "k": (hidden, kv_width), "v": (hidden, kv_width), "o": (q_width, hidden)}
    if model.experts == 1 and model.intermediate_size is not None and hidden is not None:
        inner = model.intermediate_size
        shapes |= {"gate": (hidden, inner), "up": (hidden, inner), "down": (inner, hidden)}
    return shapes


def lora_adapter_parameters(model: ModelRef, rank: int, projections: Iterable[str] = ("q", "k", "v", "o")) -> int:
    """Parameters of one LoRA adapter applied to the given projections of every layer.

    Parameters
    ----------
    model : str or Model
        Needs ``hidden_size`` (and ``intermediate_size`` for the MLP projections).
    rank : int
    projections : iterable of str
        Any of ``q, k, v, o`` (attention; MHA/GQA/MQA) and ``gate, up, down`` (dense MLP).

    Returns
    -------
    int

    Raises
    ------
    InputError
        For a projection the model's registry entry cannot size: MLA attention projections and
        mixture-of-experts MLPs (give their widths to :func:`lora_parameters` directly).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=8e9, layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    ...     attention="gqa")
    >>> lora_adapter_parameters(m, 16)
    13631488
    """
    name = "lora_adapter_parameters"
    resolved = transformer_of(model, name)
    size = count(name, "rank", rank)
    shapes = _projection_shapes(resolved)
    total = 0.0
    for projection in projections:
        if projection not in _PROJECTIONS:
            raise InputError(f"{name}(): unknown projection {projection!r}; choose from {_PROJECTIONS}")
        if projection not in shapes:
            raise InputError(
                f"{name}(): cannot size projection {projection!r} of model '{resolved.id}' from its registry entry "
                f"(needs hidden_size/intermediate_size; MLA attention and MoE MLPs are not covered)"
            )
        input_width, output_width = shapes[projection]
        total += lora_parameters.numeric(input_width=input_width, output_width=output_width, rank=size)
    return int(total * resolved.layers)


def lora_adapter_bytes(
    model: ModelRef,
    rank: int,
    projections: Iterable[str] = ("q", "k", "v", "o"),
    precision: Any = "fp16",
    adapters: Count = 1,
) -> Any:
    """Resident bytes of ``adapters`` LoRA adapters of one rank (section 10.7.9's adapter budget).

    Parameters
    ----------
    model, rank, projections
        As for :func:`lora_adapter_parameters`.
    precision : str or float
        Adapter weight precision or bits.
    adapters : int or array of int
        Simultaneously loaded adapters.

    Returns
    -------
    Quantity [information]

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=8e9, layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    ...     attention="gqa")
    >>> lora_adapter_bytes(m, 16, adapters=100).to("GB")
    <Quantity(2.7262976, 'gigabyte')>
    """
    parameters = lora_adapter_parameters(model, rank, projections)
    loaded = count("lora_adapter_bytes", "adapters", adapters, minimum=0)
    return weight_bytes(
        parameters * np.asarray(loaded, dtype=float), bits_of("lora_adapter_bytes", "precision", precision)
    )


# ============================================================================================
# Quantizing a weight vector (section 10.9.1, Figure 15)


@dataclass(frozen=True, repr=False)
class QuantizedTensor(Result):
    """A weight vector quantized per tensor or per block (see :func:`quantize`).

    ``codes`` are the integers stored, ``scales`` (and ``zero_points`` for affine schemes) one
    per block, ``dequantized`` the values the kernel reconstructs.
    """

    values: np.ndarray
    codes: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray
    dequantized: np.ndarray
    bits: int
    block_size: int

    @property
    def max_error(self) -> float:
        """Largest absolute reconstruction error."""
        return float(np.max(np.abs(self.dequantized - self.values)))

    @property
    def rmse(self) -> float:
        """Root-mean-square reconstruction error."""
        return float(np.sqrt(np.mean((self.dequantized - self.values) ** 2)))

    @property
    def zeroed(self) -> int:
        """Non-zero weights that reconstruct as exactly zero (crushed by a coarse scale)."""
        return int(np.sum((self.values != 0) & (self.dequantized == 0)))


def quantize(values: Any, bits: int = 8, block_size: int | None = None, symmetric: bool = True) -> QuantizedTensor:
    """Quantize a weight vector with one scale per tensor or per block of ``block_size`` weights.

    Parameters
    ----------
    values : array_like of float
        The weights (flattened).
    bits : int
        Integer width ``b`` (8 for INT8, 4 for INT4).
    block_size : int, optional
        Weights per scale ``G``; None for one per-tensor scale. A last partial block gets its own
        scale.
    symmetric : bool
        Symmetric scale-only quantization, ``s = max|x| / (2^(b-1) - 1)`` and codes in
        ``[-(2^(b-1) - 1), 2^(b-1) - 1]`` (the chapter's metadata examples and Figure 15); or affine,
        ``s = (max - min) / (2^b - 1)`` with a zero point and codes in ``[0, 2^b - 1]``
        (Definition 10.6).

    Returns
    -------
    QuantizedTensor

    Notes
    -----
    Codes are ``round(x / s)`` (+ zero point), rounded half to even. A block of zeros gets scale 0
    and reconstructs exactly.

    Examples
    --------
    >>> q = quantize([0.2, -0.1, 0.05, 0.01, 58.7, 0.35, -0.12, 0.05], bits=8)
    >>> round(float(q.scales[0]), 3), q.zeroed
    (0.462, 6)
    """
    name = "quantize"
    data = np.asarray(values, dtype=float).ravel()
    if data.size == 0 or not np.all(np.isfinite(data)):
        raise InputError(f"{name}(): argument 'values' must be a non-empty array of finite numbers")
    width = count(name, "bits", bits)
    if width < 2:
        raise InputError(f"{name}(): argument 'bits' must be >= 2, got {bits}")
    size = data.size if block_size is None else count(name, "block_size", block_size)
    blocks = -(-data.size // size)
    padded = np.full(blocks * size, np.nan)
    padded[: data.size] = data
    grid = padded.reshape(blocks, size)
    if symmetric:
        levels = 2 ** (width - 1) - 1
        scales = np.nanmax(np.abs(grid), axis=1) / levels
        zero_points = np.zeros(blocks)
        low, high = -levels, levels
    else:
        low_value, high_value = np.nanmin(grid, axis=1), np.nanmax(grid, axis=1)
        scales = (high_value - low_value) / (2**width - 1)
        safe = np.where(scales > 0, scales, 1.0)
        zero_points = np.round(-low_value / safe)
        low, high = 0, 2**width - 1
    safe = np.where(scales > 0, scales, 1.0)[:, None]
    codes = np.clip(np.round(grid / safe) + zero_points[:, None], low, high)
    dequantized = (codes - zero_points[:, None]) * safe * (scales[:, None] > 0)
    if not symmetric:  # a constant block (scale 0) reconstructs its constant exactly
        dequantized = np.where(scales[:, None] > 0, dequantized, grid)
    return QuantizedTensor(
        values=data,
        codes=codes.ravel()[: data.size].astype(np.int64),
        scales=scales,
        zero_points=zero_points,
        dequantized=dequantized.ravel()[: data.size],
        bits=width,
        block_size=size,
    )
