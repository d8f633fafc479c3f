"""Numeric precisions: their names and storage size per element.

The names are the ones the whole library accepts (``precision="fp8"``). Storage sizes are the
element widths of the formats; block-scaled formats add their scale metadata separately
(:mod:`calculator.memory`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InputError
from .types import Bytes
from .units import Q_

__all__ = [
    "ALIASES",
    "DEFAULT_PRECISION",
    "PRECISIONS",
    "bits_per_element",
    "bytes_per_element",
    "check_precision",
    "tensor_precision",
    "GEMM_TABLE_OF_WEIGHTS",
]

#: The weight precision the CLI's commands (and the dashboard's pages) assume when none is given: FP8, the
#: serving format of the accelerators the sizer targets first (H100 and later run FP8 matrix arithmetic), and
#: one default so that ``fit``, ``predict``, ``size`` and ``calibrate`` describe the same deployment unless told
#: otherwise (docs/cli.md). On a GPU without FP8 arithmetic the performance model counts FP8 weights' bytes.
DEFAULT_PRECISION = "fp8"

#: Bits per stored element for each precision name.
PRECISIONS: dict[str, float] = {
    "fp64": 64,
    "fp32": 32,
    "tf32": 32,  # stored as fp32; tf32 only names the tensor-core math mode
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
}


#: Other spellings users and benchmark files use for the same formats.
ALIASES: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8_block": "fp8",
    "fp8-block": "fp8",
    "e4m3": "fp8",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "w4a16": "int4",
    "int4_wo": "int4",
    "w8a8": "int8",
    # No quantization ("auto", "none"): the 16-bit checkpoint. An empty or missing value is an error.
    "auto": "bf16",
    "none": "bf16",
}


def check_precision(precision: str, argument: str = "precision") -> str:
    """Return the normalised precision name, or raise :class:`InputError` listing the known ones.

    Examples
    --------
    >>> check_precision("BF16"), check_precision("nvfp4"), check_precision("fp8_block"), check_precision("auto")
    ('bf16', 'fp4', 'fp8', 'bf16')
    """
    if not isinstance(precision, str) or not precision.strip():
        raise InputError(
            f"argument '{argument}' must be a precision name, one of {sorted(PRECISIONS)}, got {_shown(precision)}"
        )
    name = precision.strip().lower()
    name = ALIASES.get(name, name)
    if name not in PRECISIONS:
        raise InputError(f"argument '{argument}' must be one of {sorted(PRECISIONS)}, got {_shown(precision)}")
    return name


def _shown(value: Any) -> str:
    """``repr`` of a user value, cut to 80 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bits_per_element(precision: str) -> float:
    """Bits per stored element of ``precision`` (``"int4"`` -> 4)."""
    return PRECISIONS[check_precision(precision)]


def bytes_per_element(precision: str) -> Bytes:
    """Bytes per stored element of ``precision`` as a quantity.

    Examples
    --------
    >>> bytes_per_element("fp16")
    <Quantity(2.0, 'byte')>
    >>> bytes_per_element("int4")
    <Quantity(0.5, 'byte')>
    """
    return Q_(bits_per_element(precision) / 8, "B")


#: Where an accelerator lacks tensor throughput at a precision, weights are dequantized and the
#: matrix products run at the first of these it has (W8A16 on an A100, W4A16 on an H100).
_COMPUTE_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp8", "bf16", "fp16"),
    "int4": ("int4", "fp8", "bf16", "fp16"),
    "fp8": ("fp8", "bf16", "fp16"),
    "int8": ("int8", "bf16", "fp16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "tf32": ("tf32", "fp32"),
    "fp32": ("fp32", "tf32"),
    "fp64": ("fp64",),
}
# int4/fp4 weights multiply as 16-bit activations on GPUs whose int4/fp4 rate is for int4 activations.
_WEIGHT_ONLY = {"int4"}

#: GEMM table of each weight precision: the table's weights have that storage width.
GEMM_TABLE_OF_WEIGHTS = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int8": "fp8", "fp4": "fp4", "int4": "fp4"}


def tensor_precision(device: Any, precision: str) -> str:
    """The precision ``device`` (a registry accelerator) multiplies weights stored at ``precision`` at.

    Its own tensor rate where it has one; otherwise the weights are dequantized to the first precision
    it supports (``_COMPUTE_FALLBACK``). INT4 weights always multiply as 16-bit activations (W4A16).
    """
    if not isinstance(getattr(device, "dense_throughput", None), Mapping):
        raise InputError(f"tensor_precision(): argument 'device' must be a registry accelerator, got {device!r:.80}")
    name = check_precision(precision)
    chain = _COMPUTE_FALLBACK[name][1:] if name in _WEIGHT_ONLY else _COMPUTE_FALLBACK[name]
    for candidate in chain:
        if candidate in device.dense_throughput:
            return candidate
    raise InputError(
        f"accelerator '{device.id}' has no tensor throughput usable for {name} weights "
        f"(it lists {sorted(device.dense_throughput)})"
    )
