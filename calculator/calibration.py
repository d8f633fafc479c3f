"""Fit the performance model's parameters to measured serving benchmarks, and report its error.

The measurements are rows of a closed-loop benchmark (the layout of aiconfigurator's silicon
samples, ``data/calibration/serving_benchmarks_h100.csv``): model, system, backend, precision,
input/output lengths, client concurrency, tensor-parallel degree, and the measured mean TTFT and
TPOT. :func:`load_benchmarks` reads such a file into a tidy frame, :func:`fit_profiles` fits
:class:`~calculator.performance.EngineProfile` parameters (the physics shared by all engines, the
behaviour per engine) by robust least squares on log errors, and :func:`prediction_errors`
compares any profile with the measurements. Users can refit on their own measurements the same way.

pandas and scipy load only when these functions run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError
from .performance import ENGINES, Efficiency, EngineProfile, closed_loop_seconds, step_arrays
from .precision import check_precision
from .units import Q_

__all__ = ["CALIBRATION_DIR", "fit_profiles", "load_benchmarks", "prediction_errors"]

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "data" / "calibration"

_REQUIRED = (
    "model_path",
    "system",
    "backend",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)


def load_benchmarks(path: str | Path | None = None) -> Any:
    """Read benchmark measurements into a DataFrame with the columns the fit uses.

    Parameters
    ----------
    path : str or Path, optional
        A CSV in aiconfigurator's silicon-sample layout; defaults to the packaged H100 file.

    Returns
    -------
    pandas.DataFrame
        Columns ``model``, ``accelerator`` (registry ids), ``precision``, ``engine``,
        ``input_tokens``, ``output_tokens``, ``concurrency``, ``tensor_parallel``, ``ttft`` and
        ``tpot`` (seconds), plus the original columns.
    """
    import pandas as pd

    from .registry import load_registry

    frame = pd.read_csv(path or CALIBRATION_DIR / "serving_benchmarks_h100.csv")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"load_benchmarks(): the file lacks column(s) {missing}")
    reg = load_registry()
    # An empty GEMM quantization mode means the BF16 checkpoint.
    quant = frame.get("gemm_quant_mode", pd.Series([""] * len(frame))).fillna("").astype(str)
    precision = [check_precision(q or "bf16", "gemm_quant_mode") for q in quant]
    return frame.assign(
        model=[reg.models[m].id for m in frame.model_path],
        accelerator=[reg.accelerators[s].id for s in frame.system],
        precision=precision,
        engine=frame.backend.str.lower(),
        input_tokens=frame.isl.astype(float),
        output_tokens=frame.osl.astype(float),
        concurrency=frame.batch_size.astype(float),
        tensor_parallel=frame.tp_size.astype(float),
        ttft=frame.silicon_ttft_ms / 1e3,
        tpot=frame.silicon_tpot_ms / 1e3,
    )


def _predict(frame: Any, profiles: dict[str, EngineProfile]) -> tuple[np.ndarray, np.ndarray]:
    ttft = np.empty(len(frame))
    tpot = np.empty(len(frame))
    keys = ["model", "accelerator", "precision", "engine"]
    for (model, accelerator, precision, engine), group in frame.groupby(keys, sort=False):
        arrays = step_arrays(model, accelerator, precision)
        profile = profiles[engine]
        out = closed_loop_seconds(
            arrays,
            profile,
            group.tensor_parallel.to_numpy(),
            group.input_tokens.to_numpy(),
            group.output_tokens.to_numpy(),
            group.concurrency.to_numpy(),
            profile.efficiency_for(accelerator),
        )
        index = frame.index.get_indexer(group.index)
        ttft[index], tpot[index] = out["ttft"], out["tpot"]
    return ttft, tpot


def prediction_errors(
    frame: Any, engine_profiles: dict[str, EngineProfile] | None = None, use_engine: bool = True
) -> Any:
    """Relative errors (predicted / measured - 1) of TTFT and TPOT for every row.

    Parameters
    ----------
    frame : DataFrame
        From :func:`load_benchmarks`.
    engine_profiles : dict, optional
        Profiles by engine name; defaults to :data:`~calculator.performance.ENGINES`.
    use_engine : bool
        False predicts every row with the engine-agnostic default profile.
    """
    profiles = dict(engine_profiles or {k: v for k, v in ENGINES.items() if k})
    if not use_engine:
        profiles = dict.fromkeys(frame.engine.unique(), (engine_profiles or ENGINES).get(None, ENGINES[None]))
    frame = frame.reset_index(drop=True)
    ttft, tpot = _predict(frame, profiles)
    return frame.assign(
        ttft_pred=ttft, tpot_pred=tpot, ttft_error=ttft / frame.ttft - 1, tpot_error=tpot / frame.tpot - 1
    )


# Parameter vector layout: shared physics, then per-engine behaviour.
_SHARED = ("hbm_bandwidth", "compute", "link_bandwidth", "collective_latency_us")
_SHARED_BOUNDS = ((0.3, 1.0), (0.2, 1.0), (0.1, 1.0), (2.0, 100.0))
_ENGINE = (
    "step_overhead_ms",
    "prefill_batching",
    "admission_delay",
    "memory_utilization",
    "memory_reserve_gb",
    "request_overhead_ms",
)
_ENGINE_BOUNDS = ((0.0, 20.0), (0.0, 1.0), (0.0, 3.0), (0.75, 0.95), (0.0, 30.0), (0.0, 500.0))


def _profiles_from(vector: np.ndarray, engines: list[str], source: str) -> dict[str, EngineProfile]:
    hbm, comp, link, floor_us = vector[: len(_SHARED)]
    out = {}
    for i, engine in enumerate(engines):
        overhead_ms, batching, delay, util, reserve_gb, request_ms = vector[len(_SHARED) + i * len(_ENGINE) :][
            : len(_ENGINE)
        ]
        out[engine] = EngineProfile(
            name=engine,
            efficiency=Efficiency(hbm, comp, link, Q_(floor_us, "us"), Q_(overhead_ms, "ms")),
            prefill_batching=float(batching),
            admission_delay=float(delay),
            memory_utilization=float(util),
            memory_reserve=Q_(reserve_gb, "GB"),
            request_overhead=Q_(request_ms, "ms"),
            source=source,
        )
    return out


#: Where every fit starts (nominal values), so that a refit reproduces the published constants.
FIT_START = EngineProfile(
    name="start",
    efficiency=Efficiency(0.8, 0.7, 0.5, Q_(30, "us"), Q_(0.5, "ms")),
    prefill_batching=0.2,
    admission_delay=0.2,
    memory_utilization=0.9,
    memory_reserve=Q_(2, "GB"),
    request_overhead=Q_(20, "ms"),
    source="nominal starting point of calibration.fit_profiles",
)


def fit_profiles(
    frame: Any, *, pooled: bool = False, tpot_weight: float = 2.0, source: str = ""
) -> dict[str, EngineProfile]:
    """Fit engine profiles to measurements by robust least squares on log errors.

    Parameters
    ----------
    frame : DataFrame
        From :func:`load_benchmarks`.
    pooled : bool
        True fits one engine-agnostic profile to all rows (returned under every engine's name and
        under ``None``); False fits the shared physics and one behaviour set per engine.
    tpot_weight : float
        Weight of TPOT residuals relative to TTFT residuals (TPOT is measured more precisely).
    source : str
        Provenance text stored in the fitted profiles.

    Returns
    -------
    dict of str to EngineProfile
    """
    from scipy.optimize import least_squares

    frame = frame.reset_index(drop=True)
    names = sorted(frame.engine.unique())
    engines = ["pooled"] if pooled else names
    start = FIT_START
    x0 = [
        start.efficiency.hbm_bandwidth,
        start.efficiency.compute,
        start.efficiency.link_bandwidth,
        start.efficiency.collective_latency.m_as("us"),
    ]
    for _ in engines:
        x0 += [
            start.efficiency.step_overhead.m_as("ms"),
            start.prefill_batching,
            start.admission_delay,
            start.memory_utilization,
            start.memory_reserve.m_as("GB"),
            start.request_overhead.m_as("ms"),
        ]
    bounds = list(_SHARED_BOUNDS) + list(_ENGINE_BOUNDS) * len(engines)
    lower, upper = np.array(bounds).T
    x0 = np.clip(np.array(x0, dtype=float), lower, upper)
    measured_ttft, measured_tpot = frame.ttft.to_numpy(), frame.tpot.to_numpy()

    def residuals(vector: np.ndarray) -> np.ndarray:
        profiles = _profiles_from(vector, engines, source)
        by_engine = {e: profiles["pooled"] for e in names} if pooled else profiles
        ttft, tpot = _predict(frame, by_engine)
        return np.concatenate([np.log(ttft / measured_ttft), tpot_weight * np.log(tpot / measured_tpot)])

    fit = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1", f_scale=0.1, x_scale="jac")
    profiles = _profiles_from(fit.x, engines, source)
    if pooled:
        profile = profiles["pooled"].replace(name="generic")
        return {None: profile, **dict.fromkeys(names, profile)}  # type: ignore[dict-item]
    return profiles
