"""Measured kernel efficiency: achieved GEMM, attention and all-reduce times per accelerator.

The step model (:mod:`calculator.performance`) prices every matrix product, attention kernel and
all-reduce of an iteration at its actual shape. Where a GPU has measured kernel tables
(``calculator/data/calibration/kernels/``, extracted from NVIDIA's aiconfigurator-core microbenchmarks by
``tools/extract_kernel_tables.py``) the times interpolate those measurements; elsewhere (MI300X,
TPU, an L4, a user's entry) they are the accelerator's registry peaks divided by a **generic
efficiency curve**: the median, over every measured GPU, of the fraction of the roofline each
kernel shape reaches (:func:`generic_efficiency`). :attr:`KernelTables.measured` says which; the AMD GPUs' curve
is anchored to their own GEMMs (:mod:`calculator.kernel_anchors`, :attr:`KernelTables.anchors`).

All interpolation is multilinear in log coordinates and vectorized over the varying dimension
(tokens, batch, context, bytes); beyond the measured range throughput is held at the edge value, so
time grows linearly with size there. Measured times are made non-decreasing in every size (a
noisy point never makes more work faster). Tables load on first use (about 0.2 s) and are cached.

Examples
--------
>>> t = tables_for("h100-sxm")
>>> t.measured, t.system
(True, 'h100_sxm')
>>> round(float(gemm_seconds(t, "bf16", 4096, 8192, 8192)) * 1e3, 2)  # gemm.csv: 805 TFLOP/s; in ms
0.68
>>> tables_for("mi300x").measured
False
>>> round(tables_for("mi300x").anchors["fp8"].compute, 2)  # its FP8 GEMMs: 1.8x the plain curve's time
1.82
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._paths import KERNEL_DIR
from ._support import check_broadcast, instance, plain_number
from .errors import InputError
from .kernel_anchors import (
    ANCHOR_STAND_INS,
    ANCHOR_SYSTEMS,
    Anchor,
    anchor_error,
    common_scales,
    regime_scales,
    table_seconds,
)
from .types import AcceleratorRef, Count, Tokens
from .units import shown

if TYPE_CHECKING:
    from .registry import Registry

__all__ = [
    "KERNEL_DIR",
    "KernelTables",
    "allreduce_seconds",
    "decode_attention_seconds",
    "gemm_seconds",
    "generic_efficiency",
    "grouped_gemm_seconds",
    "moe_seconds",
    "prefill_attention_seconds",
    "tables_for",
    "wide_moe_seconds",
]


#: Bytes per token and layer of the decode-attention reference: one KV head of width 128, K and V,
#: 16 bits each. Other layouts read ``context x (their bytes / this)`` equivalent tokens.
DECODE_REFERENCE_BYTES = 2 * 128 * 2


# --------------------------------------------------------------------------------------------
# Interpolation on log grids


def _log2(values: Any) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(values, dtype=float), 1e-300))


def _locate(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower cell index and weight of ``x`` on ``grid`` (clamped to the grid)."""
    x = np.minimum(np.maximum(x, grid[0]), grid[-1])  # np.clip's dispatch costs more on small arrays
    i = np.minimum(np.maximum(grid.searchsorted(x, side="right") - 1, 0), len(grid) - 2)
    w = (x - grid[i]) / (grid[i + 1] - grid[i])
    return i, w


def _interp2(gx: np.ndarray, gy: np.ndarray, values: np.ndarray, x: Any, y: Any) -> np.ndarray:
    """Bilinear interpolation of ``values[len(gx), len(gy)]`` at (x, y), clamped."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:  # broadcast_arrays costs more than the interpolation on the step model's small arrays
        x, y = np.broadcast_arrays(x, y)
    i, wx = _locate(gx, x)
    j, wy = _locate(gy, y)
    flat, row = values.ravel(), i * values.shape[1] + j  # one index for the four corners
    v00, v01 = flat[row], flat[row + 1]
    v10, v11 = flat[row + values.shape[1]], flat[row + values.shape[1] + 1]
    return (v00 * (1 - wy) + v01 * wy) * (1 - wx) + (v10 * (1 - wy) + v11 * wy) * wx


def _fill_nan(values: np.ndarray, axis: int) -> np.ndarray:
    """Fill gaps along ``axis`` with the nearest measured value (forward, then backward)."""
    out = np.moveaxis(values.copy(), axis, -1)
    flat = out.reshape(-1, out.shape[-1])
    for r in np.flatnonzero(~np.isfinite(flat).all(axis=1)):
        row = flat[r]
        good = np.flatnonzero(np.isfinite(row))
        if good.size == 0:
            continue
        idx = np.arange(row.size)
        nearest = good[np.clip(np.searchsorted(good, idx), 0, good.size - 1)]
        before = good[np.clip(np.searchsorted(good, idx, side="right") - 1, 0, good.size - 1)]
        pick = np.where(np.abs(idx - before) <= np.abs(nearest - idx), before, nearest)
        row[:] = np.where(np.isfinite(row), row, row[pick])
    return np.moveaxis(out, -1, axis)


# --------------------------------------------------------------------------------------------
# Tables


@dataclass(frozen=True, eq=False)
class _Gemm:
    m: np.ndarray  # log2 grid of tokens
    n: np.ndarray
    k: np.ndarray
    log_tflops: np.ndarray  # [m, n, k]

    def curve(self, n: float, k: float) -> np.ndarray:
        """log2 TFLOP/s over the m grid at one (n, k)."""
        i, wn = _locate(self.n, np.asarray(math.log2(n)))
        j, wk = _locate(self.k, np.asarray(math.log2(k)))
        v = self.log_tflops
        return (v[:, i, j] * (1 - wk) + v[:, i, j + 1] * wk) * (1 - wn) + (
            v[:, i + 1, j] * (1 - wk) + v[:, i + 1, j + 1] * wk
        ) * wn


class _GemmTables(Mapping[str, _Gemm]):
    """A GEMM table per dtype, each made on first use.

    A measured GPU's tables are at hand; a dtype it was not measured in (FP4 on an H100, which the
    registry gives an FP4 peak) comes from the generic curves, a median over every measured GPU that
    takes 0.1-0.2 s to compute: only a search that prices that dtype pays for it.
    """

    __slots__ = ("_made", "_make")

    def __init__(self, made: dict[str, _Gemm], make: dict[str, Callable[[], _Gemm]]) -> None:
        self._made = dict(made)
        self._make = {**dict.fromkeys(made), **make}

    def __getitem__(self, dtype: str) -> _Gemm:
        table = self._made.get(dtype)
        if table is None:
            table = self._make[dtype]()  # type: ignore[misc]  # a KeyError for an unknown dtype
            self._made[dtype] = table
        return table

    def __iter__(self) -> Iterator[str]:
        return iter(self._make)

    def __len__(self) -> int:
        return len(self._make)


@dataclass(frozen=True, eq=False)
class KernelTables:
    """Kernel performance of one accelerator: measured tables, or the generic curve at its peaks.

    Attributes
    ----------
    accelerator : str
        Registry id.
    system : str
        The measured system the tables come from (``"h100_sxm"``), or ``"generic"``.
    measured : bool
        True when the GEMM, attention and all-reduce numbers are measurements of this accelerator.
    gemm : mapping
        Per dtype (``"bf16"``, ``"fp8"``, ``"fp4"``): log2 grids and log2 TFLOP/s (a dtype synthesized
        from the generic curve is made on first use).
    measured_dtypes : frozenset of str
        The GEMM dtypes measured on this accelerator (others use the generic curve).
    anchors : mapping
        dtype -> :class:`Anchor` where the generic curve is scaled by the accelerator's own GEMM measurements
        (:data:`ANCHOR_SYSTEMS`); empty otherwise.
    """

    accelerator: str
    system: str
    measured: bool
    gemm: Mapping[str, _Gemm]
    prefill: tuple[np.ndarray, np.ndarray, np.ndarray]  # log2 isl, log2 batch*heads, log2 TFLOP/s
    decode: tuple[np.ndarray, np.ndarray, np.ndarray]  # log2 batch, log2 context, log2 seconds
    #: ``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"``, ``"alltoall"`` -> gpus -> (log2 bytes, log2 seconds)
    collectives: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]
    measured_dtypes: frozenset[str] = frozenset()
    #: KV precision (``"bf16"``, ``"fp8"``) -> (log2 heads, log2 batch, log2 context, log2 seconds) of MLA decode
    mla_decode: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: dtype -> :class:`Anchor`: the generic curve scaled by the accelerator's own GEMM measurements (empty if not)
    anchors: Mapping[str, Anchor] = field(default_factory=dict)
    _curves: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    def gemm_curve(self, dtype: str, n: float, k: float) -> tuple[np.ndarray, np.ndarray]:
        """(log2 m grid, log2 TFLOP/s) of ``dtype`` GEMMs at one (n, k), cached."""
        key = (dtype, float(n), float(k))
        curve = self._curves.get(key)
        if curve is None:
            table = self.gemm.get(dtype)
            if table is None:
                raise InputError(f"accelerator '{self.accelerator}' has no {dtype} GEMM table")
            curve = table.curve(n, k)
            self._curves[key] = curve
        return self.gemm[dtype].m, curve


#: The columns of a kernel table that hold names; the others hold numbers.
_TEXT_COLUMNS = ("system", "framework", "dtype", "op", "kv", "phase", "distribution")


def _read(name: str, system: str | None = None) -> dict[str, np.ndarray]:
    """A kernel table as columns: ``system``, ``framework`` and ``dtype`` as strings, the rest as floats.

    The tables are plain comma-separated values (``tools/extract_kernel_tables.py`` writes no quoted
    field), parsed by numpy's C reader: a few times faster than ``csv`` for the large GEMM and MoE tables.
    With ``system``, only that system's rows (every table's first column is the system) are parsed.
    """
    with (KERNEL_DIR / name).open() as fh:
        lines = [line for line in fh if not line.startswith("#")]
    if system is not None:
        lines = lines[:1] + [line for line in lines[1:] if line.startswith(f"{system},")]
    header = next(csv.reader(lines[:1]))
    text = [i for i, h in enumerate(header) if h in _TEXT_COLUMNS]
    numeric = [i for i in range(len(header)) if i not in text]
    numbers = np.loadtxt(lines[1:], delimiter=",", usecols=numeric, dtype=float, ndmin=2)
    columns = {header[i]: numbers[:, j] for j, i in enumerate(numeric)}
    if text:
        names = np.loadtxt(lines[1:], delimiter=",", usecols=text, dtype=str, ndmin=2)
        for j, i in enumerate(text):
            columns[header[i]] = np.array(names[:, j].tolist())  # each as wide as its longest name
    return {h: columns[h] for h in header}


def _select(table: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in table.items()}


def _grid(table: dict[str, np.ndarray], keys: tuple[str, ...], value: str) -> tuple:
    """The rows of ``table`` as a dense array over the sorted unique values of ``keys`` (log2 values)."""
    axes, index = [], []
    for k in keys:
        axis, inverse = np.unique(table[k], return_inverse=True)
        axes.append(axis)
        index.append(inverse)
    out = np.full([len(a) for a in axes], np.nan)
    v = table[value]
    out[tuple(index)] = np.where(v > 0, _log2(np.where(v > 0, v, 1.0)), np.nan)
    return tuple(_log2(a) for a in axes), out


@functools.lru_cache(maxsize=1)
def _gemm_dtypes() -> dict[str, tuple[str, ...]]:
    """Each measured system's GEMM dtypes, sorted, read from the GEMM table's first two columns only."""
    out: dict[str, set[str]] = {}
    with (KERNEL_DIR / "gemm.csv").open() as fh:
        for line in fh:
            if not line.startswith("#"):
                system, dtype = line.split(",", 2)[:2]
                out.setdefault(system, set()).add(dtype)
    del out["system"]  # the header
    return {system: tuple(sorted(dtypes)) for system, dtypes in sorted(out.items())}


@functools.cache
def _measured(system: str) -> dict[str, Any]:
    """One measured system's tables (loaded once, the other systems' rows not parsed)."""
    gemm, prefill = _read("gemm.csv", system), _read("attention_prefill.csv", system)
    decode, allreduce = _read("attention_decode.csv", system), _read("allreduce.csv", system)
    gathers, mla = _read("collectives.csv", system), _read("mla_decode.csv", system)
    entry: dict[str, Any] = {"gemm": {}, "collectives": {op: {} for op in COLLECTIVE_PASSES}}
    for dtype in np.unique(gemm["dtype"]):
        (m, n, k), values = _grid(_select(gemm, gemm["dtype"] == dtype), ("m", "n", "k"), "tflops")
        values = _fill_nan(_fill_nan(_fill_nan(values, 0), 1), 2)
        entry["gemm"][str(dtype)] = _Gemm(m, n, k, _monotone_gemm(m, n, k, values))
    rows = _select(prefill, prefill["isl"] >= 16)
    (isl, bh), values = _grid(rows, ("isl", "batch_heads"), "tflops")
    work = 2 * isl[:, None] + bh[None, :]  # log2 of the FLOPs up to a constant
    latency = work - _fill_nan(_fill_nan(values, 1), 0)
    latency = np.maximum.accumulate(np.maximum.accumulate(latency, axis=0), axis=1)
    entry["prefill"] = (isl, bh, work - latency)
    (batch, ctx), values = _grid(decode, ("batch", "context"), "latency_us")
    values = _extend_bandwidth_bound(batch, ctx, values)
    values = np.maximum.accumulate(np.maximum.accumulate(values, axis=0), axis=1)
    entry["decode"] = (batch, ctx, values - _log2(1e6))
    for op in COLLECTIVE_PASSES:
        mine = allreduce if op == "all_reduce" else _select(gathers, gathers["op"] == op)
        for gpus in np.unique(mine["gpus"]):
            (size,), values = _grid(_select(mine, mine["gpus"] == gpus), ("bytes",), "latency_us")
            entry["collectives"][op][int(gpus)] = (size, np.maximum.accumulate(values) - _log2(1e6))
    entry["mla_decode"] = {}
    for kv in np.unique(mla["kv"]):
        (heads, batch, ctx), values = _grid(_select(mla, mla["kv"] == kv), ("heads", "batch", "context"), "latency_us")
        entry["mla_decode"][str(kv)] = (heads, batch, ctx, _monotone_mla(ctx, values) - _log2(1e6))
    return entry


def _monotone_mla(log_context: np.ndarray, values: np.ndarray) -> np.ndarray:
    """MLA decode latencies (log2, ``[heads, batch, context]``) made complete and non-decreasing in batch and context.

    Contexts beyond the longest measured one of a (heads, batch) row grow in proportion (bandwidth
    bound). A time is then the least of the times measured at as much work or more (the reverse running
    minimum), so a spike of one measurement (a few cells of the wheel's tables are 50x their neighbours)
    does not propagate to every larger shape, as a running maximum would.
    """
    out = values.copy()
    finite = np.isfinite(out)
    last = np.where(finite.any(axis=2), finite.shape[2] - 1 - np.argmax(finite[..., ::-1], axis=2), 0)
    top = np.take_along_axis(out, last[..., None], axis=2)
    beyond = np.arange(out.shape[2]) > last[..., None]
    out = np.where(beyond, top + log_context[None, None, :] - log_context[last][..., None], out)
    out = _fill_nan(_fill_nan(out, 1), 0)
    out = np.minimum.accumulate(out[:, ::-1, :], axis=1)[:, ::-1, :]
    return np.minimum.accumulate(out[:, :, ::-1], axis=2)[:, :, ::-1]


def _monotone_gemm(m: np.ndarray, n: np.ndarray, k: np.ndarray, log_tflops: np.ndarray) -> np.ndarray:
    """Make GEMM latency non-decreasing in every dimension, returned as log throughput.

    Measurement noise aside, more work never takes less time: cumulative maxima of log latency.
    """
    log_latency = m[:, None, None] + n[None, :, None] + k[None, None, :] - log_tflops
    for axis in range(3):
        log_latency = np.maximum.accumulate(log_latency, axis=axis)
    return m[:, None, None] + n[None, :, None] + k[None, None, :] - log_latency


def _extend_bandwidth_bound(batch: np.ndarray, ctx: np.ndarray, log_latency: np.ndarray) -> np.ndarray:
    """Fill unmeasured (large batch x context) cells: latency grows with the bytes read."""
    out = log_latency.copy()
    for i in range(out.shape[0]):
        good = np.flatnonzero(np.isfinite(out[i]))
        if good.size and good[-1] < out.shape[1] - 1:
            last = good[-1]
            out[i, last + 1 :] = out[i, last] + (ctx[last + 1 :] - ctx[last])
    return _fill_nan(out, 0)


# --------------------------------------------------------------------------------------------
# Which tables an accelerator gets


def _system_ids() -> dict[str, str]:
    """Registry accelerator id -> measured system name (through the registry's aliases)."""
    from .registry import load_registry

    reg = load_registry()
    out = {}
    for system in _gemm_dtypes():
        if system in reg.accelerators:
            out[reg.accelerators[system].id] = system
    return out


def _roofline_peaks(device: Any) -> dict[str, float]:
    from .precision import tensor_precision

    peaks = {}
    for dtype in ("bf16", "fp8", "fp4"):
        try:
            peaks[dtype] = device.peak_throughput(tensor_precision(device, dtype)).m_as("FLOP/s")
        except InputError:
            continue
    return peaks


def _gemm_roofline(
    m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str, peak: float, bandwidth: float
) -> np.ndarray:
    """Seconds of an (m, n, k) GEMM at the peaks: compute or bytes (weights, activations in and out)."""
    from .memory import WEIGHT_BITS  # stored bits per weight, scales included

    flops = 2.0 * m * n * k
    moved = n * k * WEIGHT_BITS[dtype] / 8 + 2.0 * m * (k + n)
    return np.maximum(flops / peak, moved / bandwidth)


def _measured_devices() -> Iterator[tuple[Any, dict[str, Any], dict[str, float], list[str]]]:
    """Each measured GPU: its registry entry, its tables, its roofline peaks and the GEMM dtypes it has both for."""
    from .registry import load_registry

    reg = load_registry()
    for accelerator_id, system in _system_ids().items():
        device = reg.accelerators[accelerator_id]
        tables, peaks = _measured(system), _roofline_peaks(device)
        yield device, tables, peaks, [dtype for dtype in tables["gemm"] if dtype in peaks]


@functools.lru_cache(maxsize=1)
def _generic_dtypes() -> tuple[str, ...]:
    """The dtypes of :func:`generic_efficiency`'s GEMM curves, in its order, loading no system's tables.

    The order is :func:`_measured_devices`'s, from the GEMM table's (system, dtype) pairs.
    """
    from .registry import load_registry

    reg = load_registry()
    listed = ((_roofline_peaks(reg.accelerators[a]), _gemm_dtypes()[system]) for a, system in _system_ids().items())
    return tuple(dict.fromkeys(dtype for peaks, dtypes in listed for dtype in dtypes if dtype in peaks))


def generic_efficiency() -> dict[str, Any]:
    """The generic efficiency curves: median fraction of the roofline over every measured GPU.

    A kernel's time is split into a launch floor and a part that scales with the roofline: ``t =
    floor + roofline / efficiency``, so that on another GPU the floor stays a floor (it does not grow
    with a slower memory) while the rest follows that GPU's peaks.

    Returns a dict with ``gemm`` (per dtype, on the GEMM grid: roofline over the time above the
    floor, at most 1) and ``gemm_floor`` (per dtype, seconds),
    ``prefill`` (attention TFLOP/s as a fraction of the BF16 dense peak), ``decode`` (the
    decode-attention time in units of the reference bytes over HBM bandwidth, and its floor), and
    ``allreduce`` (achieved fraction of the per-direction link bandwidth and the latency floor).
    """
    return generic_efficiency_without(None)


@functools.lru_cache(maxsize=16)
def generic_efficiency_without(left_out: str | tuple[str, ...] | None) -> dict[str, Any]:
    """:func:`generic_efficiency` over every measured GPU but the system(s) ``left_out`` (None: over all of them).

    Leaving one GPU (or one generation's GPUs) out and pricing it by the others' curves is how the curve is
    tested (:mod:`calculator.kernel_holdout`).
    """
    excluded = (left_out,) if isinstance(left_out, str) else tuple(left_out or ())
    gemm: dict[str, list[np.ndarray]] = {}
    gemm_floors: dict[str, list[float]] = {}
    prefill, decode, floors = [], [], []
    grids: dict[str, _Gemm] = {}
    for device, tables, peaks, dtypes in _measured_devices():
        if _system_ids().get(device.id) in excluded:
            continue
        bandwidth = device.memory_bandwidth.m_as("B/s")
        for dtype in dtypes:
            table = tables["gemm"][dtype]
            m, n, k = np.meshgrid(2.0**table.m, 2.0**table.n, 2.0**table.k, indexing="ij")
            seconds = 2.0 * m * n * k / 2.0**table.log_tflops / 1e12
            floor = 0.9 * float(seconds.min())
            roofline = _gemm_roofline(m, n, k, dtype, peaks[dtype], bandwidth)
            gemm.setdefault(dtype, []).append(np.minimum(roofline / np.maximum(seconds - floor, roofline), 1.0))
            gemm_floors.setdefault(dtype, []).append(floor)
            grids[dtype] = table
        isl, bh, log_tflops = tables["prefill"]
        prefill.append(2.0**log_tflops * 1e12 / peaks["bf16"])
        batch, ctx, log_seconds = tables["decode"]
        reference = 2.0 ** batch[:, None] * 2.0 ** ctx[None, :] * DECODE_REFERENCE_BYTES / bandwidth
        decode.append(2.0**log_seconds / reference)
        floors.append(2.0 ** log_seconds.min())
    out = {
        "gemm": {d: _Gemm(grids[d].m, grids[d].n, grids[d].k, _log2(np.median(v, axis=0))) for d, v in gemm.items()},
        "gemm_floor": {d: float(np.median(v)) for d, v in gemm_floors.items()},
        "prefill": (isl, bh, _log2(np.median(prefill, axis=0))),
        "decode": (batch, ctx, _log2(np.median(decode, axis=0))),
        "decode_floor": float(np.median(floors)),
        # In-node all-reduce beyond the measured GPUs: the NCCL fit of calculator/data/calibration (27.9 us floor,
        # 348 of 450 GB/s on H100 SXM; docs/performance-model.md).
        "allreduce_fraction": 348.0 / 450.0,
        "allreduce_floor": 27.9e-6,
    }
    return out


def _generic_gemm(dtype: str, peak: float, bandwidth: float, left_out: str | tuple[str, ...] | None = None) -> _Gemm:
    """The ``dtype`` GEMM table at ``peak`` and ``bandwidth`` from the generic curve (without GPU ``left_out``)."""
    generic = generic_efficiency_without(left_out)
    return _synthesized_gemm(generic["gemm"][dtype], generic["gemm_floor"][dtype], dtype, peak, bandwidth)


def _synthesized_gemm(curve: _Gemm, floor: float, dtype: str, peak: float, bandwidth: float) -> _Gemm:
    """A GEMM table at ``peak`` and ``bandwidth`` from the generic curve: floor + roofline / efficiency."""
    m, n, k = np.meshgrid(2.0**curve.m, 2.0**curve.n, 2.0**curve.k, indexing="ij")
    seconds = floor + _gemm_roofline(m, n, k, dtype, peak, bandwidth) / 2.0**curve.log_tflops
    log_tflops = _log2(2.0 * m * n * k / seconds / 1e12)
    return _Gemm(curve.m, curve.n, curve.k, _monotone_gemm(curve.m, curve.n, curve.k, log_tflops))


# --------------------------------------------------------------------------------------------
# The generic curve anchored to an accelerator's own GEMM measurements (calculator.kernel_anchors)


@functools.cache
def _anchor_rows(system: str) -> dict[str, tuple[np.ndarray, ...]]:
    """The (batch, m, n, k, seconds) of each dtype's rows (a dict) of one system's rows of ``anchor_gemm.csv``."""
    table = _read("anchor_gemm.csv", system)
    out: dict[str, tuple[np.ndarray, ...]] = {}
    for dtype in np.unique(table["dtype"]):
        rows = _select(table, table["dtype"] == dtype)
        out[str(dtype)] = (rows["batch"], rows["m"], rows["n"], rows["k"], rows["us"] * 1e-6)
    return out


def _fit_anchor(
    rows: tuple[np.ndarray, ...],
    system: str,
    dtype: str,
    source_dtype: str,
    peak: float,
    bandwidth: float,
    left_out: str | tuple[str, ...] | None = None,
    fill: tuple[float, float] | None = None,
) -> Anchor:
    """The :class:`~calculator.kernel_anchors.Anchor` of ``dtype`` from ``source_dtype`` GEMM ``rows``.

    ``rows``: (batch, m, n, k, seconds); ``peak``, ``bandwidth``: the registry roofline of ``source_dtype``;
    ``left_out``: the curve without those GPUs; ``fill``: see :func:`~calculator.kernel_anchors.regime_scales`.
    """
    m, n, k = rows[1:4]
    generic = generic_efficiency_without(left_out)
    curve, floor = generic["gemm"][source_dtype], generic["gemm_floor"][source_dtype]

    def priced(scale_compute: float, scale_bandwidth: float) -> np.ndarray:
        table = _synthesized_gemm(curve, floor, source_dtype, peak / scale_compute, bandwidth / scale_bandwidth)
        return table_seconds(table, m, n, k)

    plain = priced(1.0, 1.0)
    (compute, memory), used = regime_scales(rows, plain, floor, source_dtype, peak, bandwidth, fill)
    anchored = priced(1.0 if math.isnan(compute) else compute, 1.0 if math.isnan(memory) else memory)
    misses = (anchor_error(rows, floor, each) for each in (anchored, plain))
    return Anchor(system, dtype, source_dtype, compute, memory, int(m.size), *used, *misses)


@functools.lru_cache(maxsize=64)
def _anchors_for(accelerator_id: str, left_out: str | tuple[str, ...] | None = None) -> dict[str, Anchor]:
    """Each dtype's anchor of a packaged accelerator of ``ANCHOR_SYSTEMS`` (else none), ``left_out`` GPUs aside."""
    from .registry import load_registry

    system = ANCHOR_SYSTEMS.get(accelerator_id)
    if system is None:
        return {}
    device = load_registry().accelerators[accelerator_id]
    peaks, bandwidth = _roofline_peaks(device), device.memory_bandwidth.m_as("B/s")
    measured = _anchor_rows(system)
    out = {}
    for dtype in _generic_dtypes():
        if dtype not in peaks:
            continue
        source = next((d for d in (dtype, *ANCHOR_STAND_INS.get(dtype, ())) if d in measured and d in peaks), None)
        if source is not None:
            out[dtype] = _fit_anchor(measured[source], system, dtype, source, peaks[source], bandwidth, left_out)
    fill = common_scales(out.values())  # a regime too few rows set: the system's other dtypes' scale of it
    for dtype, a in out.items():
        if math.isnan(a.compute) or math.isnan(a.bandwidth):
            source = a.source_dtype
            out[dtype] = _fit_anchor(measured[source], system, dtype, source, peaks[source], bandwidth, left_out, fill)
    return out


def _build(
    device: Any,
    system: str | None,
    left_out: str | tuple[str, ...] | None = None,
    *,
    anchors: Mapping[str, Anchor] | None = None,
) -> KernelTables:
    """Measured tables of ``system`` where it has them; the generic curve at the device's peaks elsewhere.

    The generic curves (a median over every measured GPU, but ``left_out`` if given) are computed only when
    some table is not measured: a measured GPU with a table for every dtype it has a peak for does without them.
    ``anchors``: scale the generic curve by the device's own GEMM measurements (:func:`_anchors_for`): each
    dtype's GEMMs by its anchor, and prefill attention by the BF16 anchor's compute scale (attention kernels are
    not in the measurements). Decode attention keeps the generic curve: the GEMMs' bandwidth scale made it worse
    on the GPUs the test leaves out (docs/performance-model.md, "Anchored").
    """
    peaks = _roofline_peaks(device)
    bandwidth = device.memory_bandwidth.m_as("B/s")
    source = _measured(system) if system else None
    anchors = dict(anchors or {}) if source is None else {}
    made: dict[str, _Gemm] = {}
    make: dict[str, Callable[[], _Gemm]] = {}
    for dtype in _generic_dtypes():
        if dtype not in peaks:
            continue
        if source is not None and dtype in source["gemm"]:
            made[dtype] = source["gemm"][dtype]
        elif dtype in anchors:  # the generic table at the anchor's scaled peaks
            scaled = (peaks[dtype] / anchors[dtype].compute, bandwidth / anchors[dtype].bandwidth)
            make[dtype] = functools.partial(_generic_gemm, dtype, *scaled, left_out)
        else:
            make[dtype] = functools.partial(_generic_gemm, dtype, peaks[dtype], bandwidth, left_out)
    gemm, measured = _GemmTables(made, make), set(made)
    if source is not None:
        tables = (source["prefill"], source["decode"], source["collectives"])
        return KernelTables(
            device.id, str(system), True, gemm, *tables, frozenset(measured), mla_decode=source["mla_decode"]
        )
    generic = generic_efficiency_without(left_out)
    compute = anchors["bf16"].compute if "bf16" in anchors else 1.0
    isl, bh, fraction = generic["prefill"]
    prefill = (isl, bh, fraction + _log2(peaks.get("bf16", max(peaks.values(), default=1.0)) / compute / 1e12))
    batch, ctx, units = generic["decode"]
    reference = 2.0 ** batch[:, None] * 2.0 ** ctx[None, :] * DECODE_REFERENCE_BYTES / bandwidth
    decode = (batch, ctx, _log2(np.maximum(2.0**units * reference, generic["decode_floor"])))
    return KernelTables(device.id, "generic", False, gemm, prefill, decode, {}, frozenset(), anchors=anchors)


@functools.lru_cache(maxsize=64)
def _tables_for_id(accelerator_id: str) -> KernelTables:
    from .registry import load_registry

    device = load_registry().accelerators[accelerator_id]
    return _build(device, _system_ids().get(accelerator_id), anchors=_anchors_for(accelerator_id))


def tables_for(accelerator: AcceleratorRef, *, registry: Registry | None = None) -> KernelTables:
    """The kernel tables of ``accelerator`` (a registry id, alias or object): measured or generic.

    A registry entry overridden or added by the user (a different memory bandwidth or peak than the
    measured part) gets the generic curve at its own peaks, since the measurements are of the
    published part.
    """
    from ._support import accelerator_of
    from .registry import load_registry

    device = accelerator_of(accelerator, registry=registry)
    accelerators = load_registry().accelerators
    if device.id in accelerators and accelerators[device.id] == device:
        return _tables_for_id(device.id)
    key = (device.id, device.memory_bandwidth.m_as("B/s"), tuple(sorted(_roofline_peaks(device).items())))
    if key not in _GENERIC_CACHE:
        if len(_GENERIC_CACHE) > 32:
            _GENERIC_CACHE.clear()
        _GENERIC_CACHE[key] = _build(device, None)
    return _GENERIC_CACHE[key]


_GENERIC_CACHE: dict[Any, KernelTables] = {}


# --------------------------------------------------------------------------------------------
# Kernel times (seconds; arrays broadcast)


def _gemm_arguments(function: str, tables: Any, dtype: Any, m: Any, n: Any, k: Any) -> tuple[np.ndarray, float, float]:
    """The checked arguments of a GEMM time: the tables and their ``dtype``, tokens ``m`` >= 0, one ``n``, ``k`` > 0.

    Plain numbers (no units), as the step model passes them; anything else is an :class:`InputError` naming
    the argument (a negative width made the time NaN).
    """
    instance(function, "tables", tables, KernelTables, "the KernelTables of tables_for()")
    if not isinstance(dtype, str) or dtype not in tables.gemm:
        raise InputError(
            f"{function}(): argument 'dtype' must be one of {sorted(tables.gemm)} on '{tables.accelerator}', "
            f"got {shown(dtype)}"
        )
    tokens = np.maximum(plain_number(function, "m", m), 1.0)
    width, depth = (plain_number(function, name, v, "positive", one=True) for name, v in (("n", n), ("k", k)))
    return tokens, width, depth


def gemm_seconds(tables: KernelTables, dtype: str, m: Tokens, n: float, k: float) -> np.ndarray:
    """Time of ``m x k @ k x n`` GEMMs (``m`` an array of token counts; ``n``, ``k`` one shape).

    Plain numbers: ``m`` >= 0 (below one token priced as one), ``n`` and ``k`` > 0; ``dtype`` one of the
    tables' GEMM precisions. Anything else is an :class:`InputError` naming the argument.
    """
    m, n, k = _gemm_arguments("gemm_seconds", tables, dtype, m, n, k)
    grid, curve = tables.gemm_curve(dtype, n, k)
    log_tflops = np.interp(np.log2(m), grid, curve)
    return 2.0 * m * n * k / (2.0**log_tflops * 1e12)


def grouped_gemm_seconds(tables: KernelTables, dtype: str, m: Tokens, n: float, k: float, groups: Count) -> np.ndarray:
    """Time of a grouped GEMM: ``groups`` experts, each ``m x k @ k x n`` (arrays ``m``, ``groups``).

    One launch covers every group, so it is priced as a GEMM whose weights are the groups' stacked
    weights (``groups x n`` columns) at ``m`` tokens: weight streaming and the kernel floor are paid once.
    Arguments as for :func:`gemm_seconds`; ``groups`` >= 0 (below one priced as one).
    """
    m, n, k = _gemm_arguments("grouped_gemm_seconds", tables, dtype, m, n, k)
    stacked = np.maximum(plain_number("grouped_gemm_seconds", "groups", groups), 1.0) * n
    table = tables.gemm[dtype]
    lm, ln = np.broadcast_arrays(np.log2(m), np.log2(stacked))
    i, wm = _locate(table.m, lm)
    j, wn = _locate(table.n, ln)
    kk, wk = _locate(table.k, np.full(lm.shape, math.log2(k)))
    v = table.log_tflops
    log_tflops = 0.0
    for di, fi in ((0, 1 - wm), (1, wm)):
        for dj, fj in ((0, 1 - wn), (1, wn)):
            for dk, fk in ((0, 1 - wk), (1, wk)):
                log_tflops = log_tflops + fi * fj * fk * v[i + di, j + dj, kk + dk]
    return 2.0 * m * stacked * k / (2.0**log_tflops * 1e12)


#: Relative distance within which a measured expert width is a model's (``tools/extract_kernel_tables.py``).
MOE_WIDTH_TOLERANCE = 0.08


@functools.cache
def _measured_moe(system: str) -> dict[tuple[Any, ...], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """One system's measured MoE layers, loaded on first use (a process reads the systems it prices).

    ``moe.csv`` has a row per layer and a column per token count (``t1`` .. ``t32768``, ``nan`` where not
    measured).

    Keyed by (dtype, hidden, width, topk, experts, moe_tp, moe_ep), then framework: (log2 tokens, log2
    seconds, non-decreasing).
    """
    table = _read("moe.csv", system)
    keys = ("hidden", "width", "topk", "experts", "moe_tp", "moe_ep")
    points = [(float(name[1:]), column) for name, column in table.items() if name[:1] == "t" and name[1:].isdigit()]
    tokens = np.array([t for t, _ in points])
    latency = np.column_stack([column for _, column in points]) if points else np.empty((0, 0))
    out: dict[tuple[Any, ...], dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    columns = zip(table["framework"], table["dtype"], *(table[k] for k in keys), strict=True)
    for i, (framework, dtype, *shape) in enumerate(columns):
        measured = np.isfinite(latency[i])
        curve = np.maximum.accumulate(_log2(latency[i, measured] * 1e-6))
        layer = (str(dtype), *(int(v) for v in shape))
        out.setdefault(layer, {})[str(framework)] = (_log2(tokens[measured]), curve)
    return out


def _same_shape(measured: tuple[int, ...], shape: tuple[float, float, float, float]) -> bool:
    """A measured (hidden, width, topk, experts) is the model's: the same but the width, within the tolerance."""
    hidden, width, topk, experts = shape
    h, w, k, e = measured
    return (h, k, e) == (int(hidden), int(topk), int(experts)) and abs(w - width) <= MOE_WIDTH_TOLERANCE * width


def _on_curve(grid: np.ndarray, curve: np.ndarray, log_tokens: np.ndarray) -> np.ndarray:
    """Log2 seconds of a measured (log2 tokens, log2 seconds) curve; beyond its tokens the time grows in proportion."""
    return np.interp(log_tokens, grid, curve) + np.maximum(log_tokens - grid[-1], 0.0)


def _engine_median(times: Mapping[str, np.ndarray], engine: str | None) -> np.ndarray | None:
    """``engine``'s own measured time where it has one, else the median over the frameworks measured (None: none)."""
    if not times:
        return None
    chosen = [times[engine]] if engine is not None and engine in times else list(times.values())
    return np.asarray(np.median(chosen, axis=0))


def moe_seconds(
    tables: KernelTables,
    dtype: str,
    tokens: Tokens,
    shape: tuple[float, float, float, float],
    layout: tuple[int, int],
    engine: str | None = None,
) -> np.ndarray | None:
    """Measured time of one MoE layer's expert computation, or None where the tables lack it.

    ``shape`` is (hidden, expert width, experts per token, experts), ``layout`` (expert tensor
    parallelism, expert parallelism); ``tokens`` (array) enter the layer. The measurements
    (``moe.csv``) carry the wheel's routing imbalance; beyond the measured tokens the time grows in
    proportion. ``engine``'s own kernel where it was measured (the engines' MoE kernels differ by up
    to 3x), else the median over the frameworks measured.
    """
    if not tables.measured:
        return None
    lt = _log2(np.maximum(np.asarray(tokens, dtype=float), 1.0))
    for (dt, *measured, mtp, mep), curves in _measured_moe(tables.system).items():
        if (dt, mtp, mep) == (dtype, *layout) and _same_shape(tuple(measured), shape):
            times = {fw: 2.0 ** _on_curve(grid, curve, lt) for fw, (grid, curve) in curves.items()}
            return _engine_median(times, engine)
    return None


#: A wide expert-parallel layout: (slots, expert-parallel degree) -> (log2 tokens, log2 seconds, non-decreasing).
WideLayouts = dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]


@functools.lru_cache(maxsize=1)
def measured_wide_moe() -> dict[tuple[Any, ...], dict[str, WideLayouts]]:
    """The wide expert-parallel MoE tables (``moe_wide.csv``), loaded on first use.

    Keyed by (system, dtype, hidden, width, topk, experts, load balancer), then framework, then layout. SGLang's
    two DeepEP kernels make one curve: the low-latency one (its decode kernel, measured up to 128 tokens per rank,
    its default dispatch limit) up to the most tokens it was measured at, the normal-mode one (prefill) beyond.
    """
    table = _read("moe_wide.csv")
    keys = ("hidden", "width", "topk", "experts", "slots", "moe_ep")
    columns = (table["system"], table["framework"], table["dtype"], table["distribution"], table["phase"])
    points: dict[tuple[Any, ...], dict[str, list[tuple[float, float]]]] = {}
    rows = zip(*columns, *(table[k] for k in keys), table["tokens"], table["latency_us"], strict=True)
    for system, framework, dtype, distribution, phase, *shape, tokens, latency in rows:
        layer = (str(system), str(dtype), *(int(v) for v in shape[:4]), str(distribution).endswith("_eplb"))
        layout = (str(framework), int(shape[4]), int(shape[5]))
        points.setdefault((*layer, *layout), {}).setdefault(str(phase), []).append((tokens, latency))
    out: dict[tuple[Any, ...], dict[str, WideLayouts]] = {}
    for (*shape_key, framework, slots, ep), phases in points.items():
        low = phases.get("generation", []) + phases.get("any", [])
        top = max((t for t, _ in low), default=0.0)
        tokens, latency = np.array(sorted(low + [p for p in phases.get("context", []) if p[0] > top])).T
        curve = (_log2(tokens), np.maximum.accumulate(_log2(latency * 1e-6)))
        out.setdefault(tuple(shape_key), {}).setdefault(framework, {})[(slots, ep)] = curve
    return out


def wide_layout_seconds(layouts: WideLayouts, slots: float, ep: float, log_tokens: np.ndarray) -> np.ndarray | None:
    """Log2 seconds at ``slots`` placed experts over ``ep`` GPUs from one framework's measured ``layouts``, or None.

    A measured layout is read as it is. A degree between two measured at the same slots interpolates the two
    neighbours' log2 times at the same tokens entering the layer, linearly in log2 of the degree (a time that
    halves with each doubling, as both the weights each GPU reads and the tokens it computes do, is followed
    exactly). Outside the measured degrees: None. Each measured degree priced from its neighbours
    (:func:`calculator.kernel_holdout.wide_degree_holdout`) is off by 7 % in the median; the choice against
    matching the tokens each GPU receives instead is in ``docs/performance-model.md``.
    """
    if (slots, ep) in layouts:
        return _on_curve(*layouts[(int(slots), int(ep))], log_tokens)
    degrees = sorted(e for s, e in layouts if s == slots)
    low, high = [e for e in degrees if e < ep], [e for e in degrees if e > ep]
    if not low or not high:
        return None
    weight = (math.log2(ep) - math.log2(low[-1])) / (math.log2(high[0]) - math.log2(low[-1]))
    below, above = (_on_curve(*layouts[(int(slots), degree)], log_tokens) for degree in (low[-1], high[0]))
    return np.asarray(below * (1.0 - weight) + above * weight)


def wide_moe_seconds(
    tables: KernelTables,
    dtype: str,
    tokens: Tokens,
    shape: tuple[float, float, float, float],
    ep: float,
    *,
    slots: float | None = None,
    load_balancer: bool = False,
    engine: str | None = None,
) -> np.ndarray | None:
    """Measured time of one wide expert-parallel MoE layer's routed experts, or None where the tables lack it.

    ``shape`` is (hidden, expert width, experts per token, experts), the experts spread over ``ep`` GPUs without
    expert tensor parallelism, ``slots`` experts placed (the logical ones and any copies; default the logical
    ones); ``tokens`` (array) are every attention rank's tokens together, the tokens that enter the layer
    (``moe_wide.csv``: TensorRT-LLM's wide-EP kernel and SGLang's DeepEP ones, routing ``power_law_1.2`` as
    ``moe.csv``). ``load_balancer``: the expert-parallel load balancer's placement (the ``_eplb`` tables), which
    copies need. A degree between measured ones interpolates (:func:`wide_layout_seconds`); beyond the measured
    tokens the time grows in proportion. ``engine``'s own kernel where measured, else the median over the
    frameworks measured (SGLang's tables have no load balancer: its copies read TensorRT-LLM's).
    """
    if not tables.measured:
        return None
    placed = shape[3] if slots is None else slots
    lt = _log2(np.maximum(np.asarray(tokens, dtype=float), 1.0))
    for (system, dt, *measured, balanced), frameworks in measured_wide_moe().items():
        if (system, dt, balanced) == (tables.system, dtype, load_balancer) and _same_shape(tuple(measured), shape):
            times = {}
            for framework, layouts in frameworks.items():
                found = wide_layout_seconds(layouts, placed, ep, lt)
                if found is not None:
                    times[framework] = 2.0**found
            return _engine_median(times, engine)
    return None


def prefill_attention_seconds(tables: KernelTables, flops: Any, tokens: Tokens, batch_heads: Count) -> np.ndarray:
    """Time of causal prefill attention of ``flops`` at ``tokens`` per sequence over ``batch_heads``."""
    isl, bh, values = tables.prefill
    log_tflops = _interp2(isl, bh, values, _log2(np.maximum(tokens, 16.0)), _log2(np.maximum(batch_heads, 2.0)))
    return np.asarray(flops, dtype=float) / (2.0**log_tflops * 1e12)


def decode_attention_seconds(tables: KernelTables, batch: Count, context_equivalent: Tokens) -> np.ndarray:
    """Time of one decode-attention kernel: ``batch`` sequences of ``context_equivalent`` reference tokens.

    Beyond the measured batch and context the time grows in proportion (bandwidth bound).
    """
    grid_b, grid_c, values = tables.decode
    lb = _log2(np.maximum(batch, 1.0))
    lc = _log2(np.maximum(context_equivalent, 2.0))
    extra = np.maximum(lb - grid_b[-1], 0.0) + np.maximum(lc - grid_c[-1], 0.0)
    return 2.0 ** (_interp2(grid_b, grid_c, values, lb, lc) + extra)


def mla_decode_seconds(
    tables: KernelTables, kv_precision: str, heads: float, batch: Count, context: Tokens
) -> np.ndarray | None:
    """Measured time of one MLA decode-attention kernel (``heads`` query heads per GPU), or None if unmeasured.

    ``kv_precision`` picks the FP8 or the 16-bit table (another precision: None). Between measured head
    counts, batches and contexts the time interpolates in log space; beyond the measured batch and
    context it grows in proportion (bandwidth bound), and the head count is clamped to the grid.
    """
    table = tables.mla_decode.get(
        "fp8" if kv_precision == "fp8" else "bf16" if kv_precision in ("bf16", "fp16") else ""
    )
    if table is None:
        return None
    grid_h, grid_b, grid_c, values = table
    index, weight = _locate(grid_h, np.asarray(math.log2(max(heads, 1.0))))
    i, w = int(index), float(weight)
    lb = _log2(np.maximum(batch, 1.0))
    lc = _log2(np.maximum(context, 2.0))
    extra = np.maximum(lb - grid_b[-1], 0.0) + np.maximum(lc - grid_c[-1], 0.0)
    low, high = (_interp2(grid_b, grid_c, values[k], lb, lc) for k in (i, i + 1))
    return 2.0 ** (low * (1 - w) + high * w + extra)


#: The in-node collectives of the tables and the bytes each GPU moves per byte of the buffer, over ``(t-1)/t``
#: (a ring all-reduce is a reduce-scatter and an all-gather).
COLLECTIVE_PASSES = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "alltoall": 1.0}


def allreduce_seconds(tables: KernelTables, gpus: Count, message_bytes: Any, link_bandwidth: float) -> np.ndarray:
    """Time of one in-node all-reduce of ``message_bytes`` over ``gpus`` devices (0 for one device).

    :func:`collective_seconds` of ``"all_reduce"``: plain numbers, ``gpus`` whole and >= 1,
    ``message_bytes`` >= 0, ``link_bandwidth`` > 0 (bytes/s); anything else is an :class:`InputError`.
    """
    return _collective("allreduce_seconds", tables, "all_reduce", gpus, message_bytes, link_bandwidth)


def collective_seconds(
    tables: KernelTables, op: str, gpus: Count, message_bytes: Any, link_bandwidth: float
) -> np.ndarray:
    """Time of one in-node ``op`` over ``gpus`` devices (0 for one device).

    ``op`` is ``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"`` or ``"alltoall"``; ``message_bytes``
    is the whole buffer (for a gather, the gathered one; for an all-to-all, each GPU's). Measured where
    the table has the GPU count (all-reduce: the faster of NCCL and the engines' custom kernel; the
    others NCCL); another count scales the measured curve of the nearest count by the ring factor
    ``(t-1)/t``; without tables it is the generic floor plus the ring transfer at the generic fraction
    of ``link_bandwidth`` (bytes/s per direction). Plain numbers: ``gpus`` whole and >= 1, ``message_bytes``
    >= 0, ``link_bandwidth`` > 0; anything else is an :class:`InputError` naming the argument.
    """
    return _collective("collective_seconds", tables, op, gpus, message_bytes, link_bandwidth)


def _collective(function: str, tables: Any, op: Any, gpus: Any, message_bytes: Any, link_bandwidth: Any) -> np.ndarray:
    """:func:`collective_seconds` with its arguments checked under the name of the public ``function`` called."""
    instance(function, "tables", tables, KernelTables, "the KernelTables of tables_for()")
    if not isinstance(op, str) or op not in COLLECTIVE_PASSES:
        raise InputError(f"{function}(): argument 'op' must be one of {sorted(COLLECTIVE_PASSES)}, got {shown(op)}")
    gpus = np.asarray(plain_number(function, "gpus", gpus, "positive_integer"))
    size = np.maximum(plain_number(function, "message_bytes", message_bytes), 1.0)
    link_bandwidth = plain_number(function, "link_bandwidth", link_bandwidth, "positive", one=True)
    shapes = {"gpus": np.shape(gpus), "message_bytes": np.shape(size)}
    check_broadcast(function, shapes, "'gpus' and 'message_bytes' must broadcast together")
    return collective_times(tables, op, gpus, size, link_bandwidth)


def collective_times(
    tables: KernelTables, op: str, gpus: Any, size: Any, link_bandwidth: float, mesh_links: float = 0.0
) -> np.ndarray:
    """:func:`collective_seconds` of arguments already valid: the step model's inner loop, which skips the checks.

    ``gpus`` whole and >= 1 (floats), ``size`` the message bytes at least 1, ``link_bandwidth`` in bytes/s.
    ``mesh_links``: the GPUs are a fully connected mesh of that many links each (AMD Infinity Fabric), and
    ``link_bandwidth`` is one link's: a collective over ``t`` GPUs sends each peer's share over its own link, so it
    moves at ``min(t - 1, mesh_links)`` links (0: a switched domain, one ``link_bandwidth`` per GPU, NVLink).
    """
    gpus, size = np.asarray(gpus, dtype=float), np.asarray(size, dtype=float)
    if gpus.ndim == 0:  # one GPU count (the step model's case): no mask to build
        if gpus <= 1:
            return np.zeros(size.shape)
        return np.asarray(_collective_one(tables, op, int(gpus), size, link_bandwidth, mesh_links))
    gpus, size = np.broadcast_arrays(gpus, size)
    out = np.zeros(gpus.shape)
    for t in np.unique(gpus):
        if t <= 1:
            continue
        mask = gpus == t
        out[mask] = _collective_one(tables, op, int(t), size[mask], link_bandwidth, mesh_links)
    return out


def mesh_lanes(gpus: Any, mesh_links: float) -> Any:
    """Links a collective over ``gpus`` GPUs moves on: ``min(gpus - 1, mesh_links)`` in a mesh, else one."""
    if mesh_links <= 0:
        return 1.0
    return np.clip(np.asarray(gpus, dtype=float) - 1.0, 1.0, mesh_links)


def _collective_one(
    tables: KernelTables, op: str, t: int, size: np.ndarray, link_bandwidth: float, mesh_links: float = 0.0
) -> np.ndarray:
    measured = tables.collectives.get(op)
    if not measured:
        generic = generic_efficiency()
        link = link_bandwidth * mesh_lanes(t, mesh_links)
        ring = COLLECTIVE_PASSES[op] * (t - 1) / t * size / (generic["allreduce_fraction"] * link)
        return generic["allreduce_floor"] + ring
    counts = np.array(sorted(measured))
    nearest = int(counts[np.argmin(np.abs(np.log2(counts) - math.log2(t)))])
    grid, values = measured[nearest]
    ls = _log2(size)
    seconds = 2.0 ** (np.interp(ls, grid, values) + np.maximum(ls - grid[-1], 0.0))
    if nearest != t:
        seconds = seconds * ((t - 1) / t) / ((nearest - 1) / nearest)
    return seconds
