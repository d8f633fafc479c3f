"""How well the generic efficiency curve prices a GPU it has not seen: each measured GPU left out in turn.

An accelerator without kernel tables (an MI300X, a GPU newer than the tables) is priced by
:func:`calculator.kernels.generic_efficiency`: the median fraction of the roofline over every measured GPU,
at the accelerator's registry peaks. This module tests that curve the way it is used: for each GPU with
measured tables, the curve is rebuilt from the other GPUs (:func:`calculator.kernels.generic_efficiency_without`)
and prices the left-out GPU, kernel by kernel (GEMMs, decode and prefill attention, against its measured
tables) and iteration by iteration (decode steps and prefills of Llama-3.1-8B on one GPU, against the same
iterations priced from its own tables). The log ratios ``ln(measured / priced by the others)``, pooled over
the GPUs, widen the prediction interval of every answer that rests on the curve
(:func:`calculator.uncertainty.prediction_interval`); ``benchmarks/generic_curve_holdout.py`` writes them to
``calculator/data/calibration/generic_curve_holdout.json``.

Only NVIDIA GPUs have tables: the test says how far the curve carries across NVIDIA generations, nothing
about another vendor's kernels (:func:`calculator.uncertainty.kernel_basis` says so where it applies).

:func:`wide_degree_holdout` tests the wide expert-parallel MoE tables the same way: each measured degree priced
from its neighbours, as a degree between two measured ones is.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .errors import InputError
from .units import shown

__all__ = ["GENERATIONS", "anchored_errors", "held_out_errors", "holdout_summary", "wide_degree_holdout"]

#: The iterations each left-out GPU is priced on: decode steps (sequences, context) and prefills (tokens).
DECODE_POINTS = ((1, 1024), (16, 2048), (64, 4096), (256, 2048), (32, 16384))
PREFILL_POINTS = (512, 2048, 8192)
#: The reference model of the iteration test, at BF16 (it fits one GPU of every measured kind).
REFERENCE_MODEL = "llama-3.1-8b"
#: The measured systems by NVIDIA architecture generation (Ampere A100; Ada Lovelace L40S; Hopper H100, H200;
#: Blackwell B200, B300, GB200, GB300 and the RTX PRO 6000 Blackwell Server Edition).
GENERATIONS = {
    "ampere": ("a100_sxm",),
    "ada": ("l40s",),
    "hopper": ("h100_sxm", "h200_sxm"),
    "blackwell": ("b200_sxm", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server"),
}


def _stats(log_ratios: np.ndarray) -> dict[str, float]:
    """Median bias, median size and the 10th and 90th percentiles of ``ln(measured / priced)``."""
    x = np.asarray(log_ratios, dtype=float)
    x = x[np.isfinite(x)]
    return {
        "points": int(x.size),
        "median": float(np.median(x)),
        "median_abs": float(np.median(np.abs(x))),
        "p10": float(np.percentile(x, 10)),
        "p90": float(np.percentile(x, 90)),
    }


def _kernel_ratios(own: Any, others: Any) -> dict[str, np.ndarray]:
    """ln(measured time / time priced by the others' curve), per kernel family, on the tables' common grids."""
    ln2 = np.log(2.0)
    gemm = [
        (others.gemm[d].log_tflops - own.gemm[d].log_tflops).ravel() * ln2
        for d in sorted(own.measured_dtypes)
        if d in others.gemm and others.gemm[d].log_tflops.shape == own.gemm[d].log_tflops.shape
    ]
    decode = (own.decode[2] - others.decode[2]).ravel() * ln2  # log2 seconds
    prefill = (others.prefill[2] - own.prefill[2]).ravel() * ln2  # log2 TFLOP/s: time goes the other way
    return {"gemm": np.concatenate(gemm) if gemm else np.zeros(0), "decode": decode, "prefill": prefill}


def _iteration_ratios(device: Any, others: Any) -> dict[str, np.ndarray]:
    """ln(iteration priced from the GPU's tables / priced by the others' curve), decode steps and prefills.

    The GPU work only: the engine's fixed costs are the same on both sides and left out.
    """
    from .performance import ENGINES, iteration_seconds, step_arrays

    eff = ENGINES[None].efficiency
    eff = eff.replace(step_overhead=eff.step_overhead * 0, sequence_overhead=eff.sequence_overhead * 0)
    a = step_arrays(REFERENCE_MODEL, device, "bf16")
    held = dataclasses.replace(a, tables=others, measured=False, curves={})

    def ratio(**work: float) -> float:
        return float(
            np.log(float(iteration_seconds(a, eff, 1.0, **work)) / float(iteration_seconds(held, eff, 1.0, **work)))
        )

    return {
        "decode": np.array([ratio(decode=float(n), context=float(c)) for n, c in DECODE_POINTS]),
        "prefill": np.array([ratio(decode=0.0, prefill=float(t), requests=1.0) for t in PREFILL_POINTS]),
    }


def held_out_errors(system: str, left_out: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The generic curve without ``system`` (a measured system name, ``"h100_sxm"``) pricing that GPU.

    ``left_out``: the systems the curve leaves out (default: ``system`` alone; its generation's, for
    :func:`_generation_holdout`).

    Returns ``{"accelerator", "kernels": {family: stats}, "iterations": {kind: stats}, "iteration_log_ratios":
    {kind: list}}``, each stats a dict of the log ratios' points, median, median size and 10th/90th
    percentiles (:func:`_stats`).
    """
    from . import kernels
    from .registry import load_registry

    ids = {system_name: accelerator for accelerator, system_name in kernels._system_ids().items()}
    if not isinstance(system, str) or system not in ids:
        raise InputError(f"held_out_errors(): argument 'system' must be one of {sorted(ids)}, got {shown(system)}")
    device = load_registry().accelerators[ids[system]]
    own = kernels._build(device, system)
    others = kernels._build(device, None, left_out=left_out or system)
    iterations = _iteration_ratios(device, others)
    return {
        "accelerator": device.id,
        "kernels": {k: _stats(v) for k, v in _kernel_ratios(own, others).items()},
        "iterations": {k: _stats(v) for k, v in iterations.items()},
        "iteration_log_ratios": {k: [round(float(x), 6) for x in v] for k, v in iterations.items()},
    }


def anchored_errors(system: str) -> dict[str, Any]:
    """The anchoring of the generic curve tested on a measured GPU: the others' curve anchored to its GEMMs.

    The curve without ``system`` is scaled by :func:`calculator.kernels._fit_anchor` on the GPU's own GEMM table
    (every grid point of each dtype it measured, as an AMD GPU's tuned GEMMs anchor it) and prices the GPU's
    decode steps and prefills (as :func:`held_out_errors`), attention included, which the anchor did not see.

    Returns ``{"accelerator", "scales": {dtype: [compute, bandwidth]}, "iterations": {kind: stats},
    "iteration_log_ratios": {kind: list}}``.
    """
    from . import kernels
    from .registry import load_registry

    ids = {system_name: accelerator for accelerator, system_name in kernels._system_ids().items()}
    if not isinstance(system, str) or system not in ids:
        raise InputError(f"anchored_errors(): argument 'system' must be one of {sorted(ids)}, got {shown(system)}")
    device = load_registry().accelerators[ids[system]]
    own = kernels._measured(system)["gemm"]
    peaks, bandwidth = kernels._roofline_peaks(device), device.memory_bandwidth.m_as("B/s")
    anchors = {}
    for dtype in sorted(d for d in own if d in peaks):
        m, n, k = np.meshgrid(2.0 ** own[dtype].m, 2.0 ** own[dtype].n, 2.0 ** own[dtype].k, indexing="ij")
        seconds = 2.0 * m * n * k / (2.0 ** own[dtype].log_tflops * 1e12)
        rows = (np.ones(m.size), m.ravel(), n.ravel(), k.ravel(), seconds.ravel())
        anchors[dtype] = kernels._fit_anchor(rows, system, dtype, dtype, peaks[dtype], bandwidth, left_out=system)
    anchored = kernels._build(device, None, left_out=system, anchors=anchors)
    iterations = _iteration_ratios(device, anchored)
    return {
        "accelerator": device.id,
        "scales": {d: [round(a.compute, 6), round(a.bandwidth, 6)] for d, a in anchors.items()},
        "iterations": {k: _stats(v) for k, v in iterations.items()},
        "iteration_log_ratios": {k: [round(float(x), 6) for x in v] for k, v in iterations.items()},
    }


def holdout_summary() -> dict[str, Any]:
    """Every measured GPU left out in turn, the iteration log ratios pooled over them, and the generations.

    The file's content: ``per_gpu``, ``pooled_iterations`` and ``per_generation`` (:func:`_generation_holdout`),
    and ``anchored``: the same left-out GPUs priced by the curve anchored to their own GEMMs
    (:func:`anchored_errors`), ``per_gpu`` and ``pooled_iterations``.
    """
    from . import kernels

    per_gpu: dict[str, Any] = {}
    anchored: dict[str, Any] = {}
    pooled: list[float] = []
    pooled_anchored: list[float] = []
    for system in sorted(kernels._system_ids().values()):
        per_gpu[system] = held_out_errors(system)
        pooled.extend(x for ratios in per_gpu[system]["iteration_log_ratios"].values() for x in ratios)
        anchored[system] = anchored_errors(system)
        pooled_anchored.extend(x for ratios in anchored[system]["iteration_log_ratios"].values() for x in ratios)
    band = _stats(np.array(pooled))
    return {
        "per_gpu": per_gpu,
        "pooled_iterations": band,
        "per_generation": _generation_holdout((band["p10"], band["p90"])),
        "anchored": {"per_gpu": anchored, "pooled_iterations": _stats(np.array(pooled_anchored))},
    }


def _generation_holdout(band: tuple[float, float]) -> dict[str, Any]:
    """Each GPU generation left out whole, its GPUs priced by the other generations' curve.

    Per generation: the iteration log ratios' stats pooled over its GPUs, and the share of them inside
    ``band`` (the leave-one-GPU-out 10th-90th percentiles, the interval's widening): how far the band
    carries to a generation the curve has not seen, which is what an accelerator newer than the tables is.
    """
    out: dict[str, Any] = {}
    for generation, systems in GENERATIONS.items():
        ratios = [
            x
            for system in systems
            for values in held_out_errors(system, systems)["iteration_log_ratios"].values()
            for x in values
        ]
        inside = float(np.mean([(band[0] <= x <= band[1]) for x in ratios]))
        out[generation] = {**_stats(np.array(ratios)), "inside_band": round(inside, 6)}
    return out


def wide_degree_holdout() -> dict[str, dict[str, float]]:
    """Each measured wide expert-parallel degree priced from its neighbours, as an unmeasured degree is.

    For every system, framework, load-balancer variant and slot count of ``moe_wide.csv``, each expert-parallel
    degree with a measured degree on both sides is left out and priced by
    :func:`calculator.kernels.wide_layout_seconds` from the others at every token count it was measured at. The
    neighbours are then twice as far apart (4x in degree) as for a degree between two measured ones.

    Returns the stats (:func:`_stats`) of ``ln(measured / interpolated)`` pooled per framework and variant
    (``"trtllm"``, ``"trtllm_eplb"``, ``"sglang"``) and over all (``"all"``).
    """
    from .kernels import measured_wide_moe, wide_layout_seconds

    ratios: dict[str, list[float]] = {}
    for (*_, balancer), frameworks in measured_wide_moe().items():
        for framework, layouts in frameworks.items():
            name = framework + ("_eplb" if balancer else "")
            for (slots, ep), (grid, curve) in layouts.items():
                others = {layout: c for layout, c in layouts.items() if layout != (slots, ep)}
                priced = wide_layout_seconds(others, slots, ep, grid)
                if priced is not None:
                    ratios.setdefault(name, []).extend((curve - priced) * np.log(2.0))
    ratios["all"] = [x for values in ratios.values() for x in values]
    return {name: _stats(np.array(values)) for name, values in sorted(ratios.items())}
