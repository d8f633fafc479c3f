"""The generic efficiency curve anchored to an accelerator's own GEMM measurements: the rules and their record.

An accelerator without aiconfigurator tables is priced by :func:`calculator.kernels.generic_efficiency`, the median
fraction of the roofline over the measured NVIDIA GPUs, at its registry peaks. The AMD Instinct GPUs have GEMM
measurements of their own, the results of AMD's aiter GEMM tuner (``kernels/anchor_gemm.csv``,
``tools/extract_anchor_gemms.py``). The curve's compute-bound and memory-bound parts are scaled to what those rows
show: this module holds the rules (which rows set which scale, :func:`regime_scales`) and the record of a fit
(:class:`Anchor`); :mod:`calculator.kernels` prices the rows on the curve and builds the anchored tables
(:attr:`calculator.kernels.KernelTables.anchors`). ``docs/performance-model.md`` ("Anchored") says how it was tested.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ANCHOR_SYSTEMS", "Anchor"]

#: Accelerators without aiconfigurator tables whose generic curve is anchored to GEMM measurements of their own
#: (``anchor_gemm.csv``: the results of AMD's aiter GEMM tuner, ``tools/extract_anchor_gemms.py``): registry id ->
#: the table's system. The MI325X has the MI300X's compute (CDNA 3, 304 compute units; the registry's notes), so
#: both read the gfx942 rows, which do not say which of the two they were measured on.
ANCHOR_SYSTEMS = {"mi300x": "gfx942_cu304", "mi325x": "gfx942_cu304", "mi355x": "gfx950_cu256"}
#: For a dtype a system has no rows of, the measured dtypes that stand in, in order of preference.
ANCHOR_STAND_INS = {"fp4": ("fp8", "bf16"), "fp8": ("bf16",), "bf16": ("fp8",)}
#: A GEMM counts as compute-bound (memory-bound) where its time at the memory bandwidth (compute peak) is at most
#: this share of its time at the compute peak (memory bandwidth); the rows between set neither scale.
ANCHOR_REGIME_MARGIN = 0.5
#: Fewest rows of a regime that set its scale; with fewer, the same regime's scale of the system's other dtypes
#: stands in (their median), else none (1).
ANCHOR_MIN_ROWS = 3
#: Memory-bound rows count only where the launch's weights are at least this large: smaller ones run partly from
#: the last-level cache (in the tables, the L40S's and RTX PRO 6000's GEMMs of small weights beat their memory
#: bandwidth 2-3x). Chosen on the leave-one-GPU-out test of the anchoring (docs/performance-model.md, "Anchored").
ANCHOR_MIN_WEIGHT_BYTES = 32 * 2**20


@dataclass(frozen=True)
class Anchor:
    """How an accelerator's own GEMM measurements scale the generic curve, for one dtype.

    Attributes
    ----------
    system : str
        The rows' system in ``anchor_gemm.csv`` (``"gfx942_cu304"``).
    dtype, source_dtype : str
        The dtype anchored, and the dtype whose rows anchored it (another where the system has no rows of it).
    compute, bandwidth : float
        Factors on the generic curve's time above its launch floor for compute-bound and memory-bound GEMMs
        (above 1: slower than the curve at the registry peaks): the median over the rows of each regime of
        ``(measured - floor) / (generic - floor)``. The anchored curve is the generic one at ``peak / compute`` and
        ``bandwidth / bandwidth``.
    rows, compute_rows, bandwidth_rows : int
        The rows, and those that set each scale.
    median_abs, generic_median_abs : float
        Median ``|ln(measured / priced)|`` over the rows, anchored and not.
    """

    system: str
    dtype: str
    source_dtype: str
    compute: float
    bandwidth: float
    rows: int
    compute_rows: int
    bandwidth_rows: int
    median_abs: float
    generic_median_abs: float


def table_seconds(table: Any, m: np.ndarray, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Seconds of each (m, n, k) GEMM on a :mod:`calculator.kernels` GEMM ``table`` (one curve per weight shape)."""
    out = np.empty(m.shape)
    for width, depth in set(zip(n.tolist(), k.tolist(), strict=True)):
        rows = (n == width) & (k == depth)
        log_tflops = np.interp(np.log2(m[rows]), table.m, table.curve(width, depth))
        out[rows] = 2.0 * m[rows] * width * depth / (2.0**log_tflops * 1e12)
    return out


def regime_scales(
    rows: tuple[np.ndarray, ...],
    plain: np.ndarray,
    floor: float,
    dtype: str,
    peak: float,
    bandwidth: float,
    fill: tuple[float, float] | None = None,
) -> tuple[tuple[float, float], tuple[int, int]]:
    """The compute and bandwidth scales GEMM measurements set, and how many rows set each.

    ``rows``: (batch, m, n, k, seconds) arrays.
    ``plain``: each row's time on the generic curve at the registry ``peak`` (FLOP/s) and ``bandwidth`` (B/s) of
    ``dtype``, whose launch floor is ``floor`` seconds. A regime's scale is the median of ``(measured - floor) /
    (curve - floor)`` over its rows (a batched launch pays the floor once); one with fewer than
    :data:`ANCHOR_MIN_ROWS` takes ``fill``'s, else NaN.
    """
    from .memory import WEIGHT_BITS

    batch, m, n, k, seconds = rows
    above = batch * (plain - floor)
    ratio = (seconds - floor) / np.maximum(above, 1e-30)
    compute_time = 2.0 * m * n * k / peak
    memory_time = (n * k * WEIGHT_BITS[dtype] / 8 + 2.0 * m * (k + n)) / bandwidth
    usable = above >= floor  # the roofline part outweighs the floor
    weights = batch * n * k * WEIGHT_BITS[dtype] / 8
    chosen = (
        usable & (memory_time <= ANCHOR_REGIME_MARGIN * compute_time),
        usable & (compute_time <= ANCHOR_REGIME_MARGIN * memory_time) & (weights >= ANCHOR_MIN_WEIGHT_BYTES),
    )
    compute, memory = (
        float(np.median(ratio[c])) if c.sum() >= ANCHOR_MIN_ROWS else (fill[i] if fill else math.nan)
        for i, c in enumerate(chosen)
    )
    return (compute, memory), (int(chosen[0].sum()), int(chosen[1].sum()))


def anchor_error(rows: tuple[np.ndarray, ...], floor: float, priced: np.ndarray) -> float:
    """Median ``|ln(measured / priced)|`` of ``rows`` (batch, m, n, k, seconds), a batched launch flooring once."""
    batch, seconds = rows[0], rows[-1]
    return float(np.median(np.abs(np.log(seconds / (floor + batch * (priced - floor))))))


def common_scales(anchors: Iterable[Anchor]) -> tuple[float, float]:
    """The median compute and bandwidth scales of ``anchors`` (NaN ones aside; 1 where none is known)."""
    anchors = list(anchors)
    known = [[getattr(a, r) for a in anchors if not math.isnan(getattr(a, r))] for r in ("compute", "bandwidth")]
    compute, memory = (float(np.median(values)) if values else 1.0 for values in known)
    return compute, memory
