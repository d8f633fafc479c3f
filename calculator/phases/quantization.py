"""The serving ceilings of weight quantization (section 10.9.3, Table 12): upper bounds, not measured speedups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._support import accelerator_of, bits_of
from ..errors import InputError
from ..precision import bits_per_element, check_precision
from ..results import Result
from ..types import AcceleratorRef, Precision

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "QuantizationCeilings",
    "quantization_ceilings",
]


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
    *,
    registry: Registry | None = None,
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
        device = accelerator_of(accelerator, registry=registry)
        ceiling = float(device.peak_throughput(compute) / device.peak_throughput(reference))
    return QuantizationCeilings(weight_bytes_ratio=ratio, prefill_compute_ceiling=ceiling, decode_traffic_ceiling=ratio)
