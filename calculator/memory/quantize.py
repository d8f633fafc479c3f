"""Quantizing a weight vector (section 10.9.1, Figure 15): per-tensor or per-block, symmetric or affine."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked
from ..errors import InputError
from ..results import Result
from ..types import Count, Number
from ..units import shown

__all__ = [
    "QuantizedTensor",
    "quantize",
]


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


@checked(values="any")
def quantize(
    values: Number, bits: Count = 8, block_size: Count | None = None, symmetric: bool = True
) -> QuantizedTensor:
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
    data = np.ravel(values)
    if data.size == 0 or not np.all(np.isfinite(data)):
        raise InputError(f"{name}(): argument 'values' must be a non-empty array of finite numbers")
    if np.ndim(bits):
        raise InputError(f"{name}(): argument 'bits' must be one number, got {shown(bits)}")
    if block_size is not None and np.ndim(block_size):
        raise InputError(f"{name}(): argument 'block_size' must be one number, got {shown(block_size)}")
    width = int(bits)
    if width > 32:  # integer grids of 2 to 32 bits
        raise InputError(f"{name}(): argument 'bits' must be at most 32, got {width}")
    if width < 2:
        raise InputError(f"{name}(): argument 'bits' must be >= 2, got {width}")
    size = data.size if block_size is None else int(block_size)
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
