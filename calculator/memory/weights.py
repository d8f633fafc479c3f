"""Weights and quantization metadata (sections 10.2 and 10.9.1): weight bytes, block-scale overhead, devices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import bits_of, checked, model_of, scalar
from ..errors import InputError
from ..formula import formula, per, var
from ..results import Result, as_count, ceil_count, plain
from ..types import Bytes, Count, ModelRef, Precision
from ..units import Q_, shown

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "NO_BYTES",
    "WEIGHT_BITS",
    "weight_bytes",
    "model_weight_bytes",
    "effective_bits_per_weight",
    "QuantizationOverhead",
    "quantization_overhead",
    "min_devices_for_weights",
    "routed_expert_parameters",
    "vision_weight_bytes",
]

#: Default for reserves and other optional byte amounts (a module-level constant, not a call per default).
NO_BYTES = Q_(0, "B")


# ============================================================================================
# Weights and quantization metadata


@formula(
    result=var("B", r"M_{W}", description="bytes of model weights"),
    reference="section 10.2 (weights = parameters x bytes per parameter); section 10.9",
    parameters=var("", "N", description="parameter count"),
    bits_per_weight=var("", "b", "precision", "stored bits per weight, including any scale metadata"),
    example={"parameters": 70e9, "bits_per_weight": 16},
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
    example={"bits": 4, "block_size": 64, "scale_bits": 16},
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


@checked()
def quantization_overhead(
    bits: Precision,
    block_size: Count,
    scale_format: Precision = "fp16",
    zero_point: Precision | None = None,
    baseline: Precision = "fp16",
) -> QuantizationOverhead:
    """Metadata cost of block-wise quantization: bits per weight, overhead and compression.

    Parameters
    ----------
    bits : str or float
        Payload precision (``"int4"``) or bits per weight.
    block_size : int
        Weights per scale (one number).
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
    if np.ndim(block_size):
        raise InputError(f"{name}(): argument 'block_size' must be one number, got {shown(block_size)}")
    payload = bits_of(name, "bits", bits) if isinstance(bits, str) else scalar(name, "bits", bits, "", "positive")
    size = as_count(block_size)
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


@checked()
def model_weight_bytes(
    model: ModelRef, weight_bits: Precision = "fp16", tensor_parallel: Count = 1, *, registry: Registry | None = None
) -> Any:
    """Resident weight bytes of a registry model, per device of a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    weight_bits : str or float
        Precision name or stored bits per weight (``quantization_overhead(...).effective_bits`` for
        a block-scaled format).
    tensor_parallel : int or array of int
        Devices the weights are split over (weights divide evenly).
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    A mixture of experts keeps every expert resident, so the bytes use the total parameter count,
    not the active one. A multimodal model's vision encoder (``vision_parameters``) adds its weights at 16
    bits whatever ``weight_bits`` (the published quantized checkpoints leave it unquantized).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> model_weight_bytes(m, "int4").to("GB"), model_weight_bytes(m, "fp16", tensor_parallel=8).to("GB")
    (<Quantity(35.0, 'gigabyte')>, <Quantity(17.5, 'gigabyte')>)
    """
    resolved = model_of(model, registry=registry)
    bits = bits_of("model_weight_bytes", "weight_bits", weight_bits)
    return (weight_bytes(resolved.parameters, bits) + vision_weight_bytes(resolved)) / plain(tensor_parallel)


def vision_weight_bytes(model: ModelRef, *, registry: Registry | None = None) -> Any:
    """Bytes of a multimodal model's vision encoder (``Model.vision_parameters``) at 16 bits; 0 B without one.

    Examples
    --------
    >>> vision_weight_bytes("qwen3-vl-8b").to("GB"), vision_weight_bytes("qwen3-8b")
    (<Quantity(1.15277667, 'gigabyte')>, <Quantity(0, 'byte')>)
    """
    resolved = model_of(model, registry=registry)
    return weight_bytes(resolved.vision_parameters, 16) if resolved.vision_parameters else NO_BYTES


def routed_expert_parameters(model: ModelRef, *, registry: Registry | None = None) -> float:
    """Parameters of a mixture of experts' routed experts, all resident (0 for a dense model).

    ``experts x (parameters - active) / (experts - experts_per_token)``: the parameters a token does not
    read are those of the experts it is not routed to, ``experts - k`` of them.

    Parameters
    ----------
    model : str or Model
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Examples
    --------
    >>> round(routed_expert_parameters("qwen3-235b-a22b") / 1e9, 1)
    227.2
    """
    resolved = model_of(model, registry=registry)
    experts, top = float(resolved.experts or 1), float(resolved.experts_per_token or 1)
    return experts * (resolved.parameters - resolved.active) / (experts - top) if experts > top else 0.0


@checked(weights="positive", capacity="positive")
def min_devices_for_weights(weights: Bytes, capacity: Bytes, reserve: Bytes = NO_BYTES) -> Any:
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
    usable = capacity - reserve
    if np.any(np.asarray(usable) <= 0):
        raise InputError("min_devices_for_weights(): the reserve leaves no memory on a device (capacity <= reserve)")
    return ceil_count(np.asarray(weights) / usable)


#: Stored bits per weight of each serving precision, scales included: FP8 keeps one scale per
#: 128x128 block (negligible), INT4 one FP16 scale per group of 128 weights (AWQ/GPTQ layout),
#: FP4 one FP8 scale per 16 weights (NVFP4). Embeddings stay at 16 bits (see ``step_arrays``).
WEIGHT_BITS: dict[str, float] = {
    "fp64": 64.0,
    "fp32": 32.0,
    "tf32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": effective_bits_per_weight.numeric(bits=4, block_size=128, scale_bits=16),
    "fp4": effective_bits_per_weight.numeric(bits=4, block_size=16, scale_bits=8),
}
