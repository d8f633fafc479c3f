"""Fit the performance model's parameters to measured serving benchmarks, and report its error.

The measurements are rows of a closed-loop benchmark (the layout of aiconfigurator's silicon
samples, ``calculator/data/calibration/serving_benchmarks_h100.csv``): model, system, backend, precision,
input/output lengths, client concurrency, tensor-parallel degree, and the measured mean TTFT and
TPOT. :func:`load_benchmarks` reads such a file into a tidy frame, :func:`fit_profiles` fits
:class:`~calculator.performance.EngineProfile` parameters (the physics shared by all engines, the
behaviour per engine) by robust least squares on log errors, and :func:`prediction_errors`
compares any profile with the measurements. Users can refit on their own measurements the same way.

pandas and scipy load only when these functions run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._paths import CALIBRATION_DIR
from .errors import InputError
from .performance import ENGINES, EngineProfile, closed_loop_seconds, step_arrays
from .precision import check_precision
from .units import Q_

__all__ = ["CALIBRATION_DIR", "FITTED", "fit_profiles", "load_benchmarks", "prediction_errors"]


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
        pool: Mapping[Any, EngineProfile] = engine_profiles or ENGINES
        profiles = dict.fromkeys(frame.engine.unique(), pool.get(None, ENGINES[None]))
    frame = frame.reset_index(drop=True)
    ttft, tpot = _predict(frame, profiles)
    return frame.assign(
        ttft_pred=ttft, tpot_pred=tpot, ttft_error=ttft / frame.ttft - 1, tpot_error=tpot / frame.tpot - 1
    )


#: The fitted behaviour of an engine: (name, lower bound, upper bound, unit, prior width). Everything
#: else in a profile is a documented default (``performance.ENGINES`` citations) or a kernel
#: measurement. The prior width is how far an engine's own fit may stray from the behaviour shared
#: by all engines at the cost of one row's worth of error (see :func:`fit_profiles`).
FITTED = (
    ("step_overhead", 0.0, 30.0, "ms", 1.0),
    ("sequence_overhead", 0.0, 200.0, "us", 15.0),
    ("request_overhead", 0.0, 80.0, "ms", 20.0),
    ("wave_persistence", 0.0, 1.0, "", 0.25),
    ("wave_exponent", 0.2, 1.0, "", 0.2),
)

#: Rows' worth of weight that pulls each engine's behaviour toward the shared behaviour.
PRIOR_ROWS = 60


def _get(profile: EngineProfile, name: str, unit: str) -> float:
    holder = profile.efficiency if name in ("step_overhead", "sequence_overhead") else profile
    value = getattr(holder, name)
    return float(value.m_as(unit)) if unit else float(value)


def _vector(profile: EngineProfile) -> np.ndarray:
    return np.array([_get(profile, name, unit) for name, _, _, unit, _ in FITTED])


def _with(profile: EngineProfile, values: np.ndarray) -> EngineProfile:
    changes: dict[str, Any] = {}
    efficiency: dict[str, Any] = {}
    for (name, _, _, unit, _), value in zip(FITTED, values, strict=True):
        if name in ("wave_persistence", "wave_exponent") and not profile.mixed_batching:
            continue  # prefill-first scheduling keeps waves whole: 1 by construction, not fitted
        quantity = Q_(float(value), unit) if unit else float(value)
        (efficiency if name in ("step_overhead", "sequence_overhead") else changes)[name] = quantity
    return profile.replace(efficiency=profile.efficiency.replace(**efficiency), **changes)


def fit_profiles(
    frame: Any,
    *,
    pooled: bool = False,
    tpot_weight: float = 2.0,
    prior_rows: float = PRIOR_ROWS,
    source: str = "",
    start: dict[str | None, EngineProfile] | None = None,
) -> dict[Any, EngineProfile]:
    """Fit the engines' behaviour parameters (:data:`FITTED`) by robust least squares on log errors.

    The fit has two stages. First one behaviour shared by all engines, each row predicted with its
    own engine's documented scheduler. Then each engine's own behaviour, pulled toward the shared
    one by ``prior_rows`` rows' worth of weight (partial pooling), so that an engine measured in one
    or two benchmark campaigns does not take on that campaign's harness.

    Parameters
    ----------
    frame : DataFrame
        From :func:`load_benchmarks`.
    pooled : bool
        True returns the engine-agnostic profile: vLLM's scheduler (the ``None`` entry of the
        defaults) with the shared behaviour, under every engine's name and under ``None``.
    tpot_weight : float
        Weight of TPOT residuals relative to TTFT residuals (TPOT is measured more precisely).
    prior_rows : float
        Strength of the pull toward the shared behaviour, in rows.
    source : str
        Provenance text stored in the fitted profiles (default: the profiles' own).
    start : dict, optional
        Profiles to start from (their scheduler defaults are kept); defaults to
        :data:`~calculator.performance.ENGINES`. Every fit starts from the same fixed values
        (:data:`FIT_START`), so a refit reproduces the published constants.

    Returns
    -------
    dict of str to EngineProfile
    """
    from scipy.optimize import least_squares

    frame = frame.reset_index(drop=True)
    start = start or ENGINES
    names = sorted(frame.engine.unique())
    lower = np.array([f[1] for f in FITTED])
    upper = np.array([f[2] for f in FITTED])
    widths = np.array([f[4] for f in FITTED])
    x0 = np.clip(_vector(FIT_START), lower, upper)

    def solve(rows: Any, profiles: dict[str, EngineProfile], prior: np.ndarray | None) -> np.ndarray:
        rows = rows.reset_index(drop=True)
        measured_ttft, measured_tpot = rows.ttft.to_numpy(), rows.tpot.to_numpy()
        pull = np.sqrt(prior_rows * (1 + tpot_weight**2)) / widths

        def residuals(vector: np.ndarray) -> np.ndarray:
            ttft, tpot = _predict(rows, {e: _with(p, vector) for e, p in profiles.items()})
            parts = [np.log(ttft / measured_ttft), tpot_weight * np.log(tpot / measured_tpot)]
            if prior is not None:
                parts.append(0.1 * pull * (vector - prior))  # in units of the soft-L1 scale (0.1)
            return np.concatenate(parts)

        start_at = x0 if prior is None else np.clip(prior, lower, upper)
        fit = least_squares(residuals, start_at, bounds=(lower, upper), loss="soft_l1", f_scale=0.1, x_scale="jac")
        return fit.x

    shared = solve(frame, {e: start[e] for e in names}, None)

    def finish(profile: EngineProfile) -> EngineProfile:
        return profile.replace(source=source) if source else profile

    if pooled:
        profile = finish(_with(start[None], shared))
        return {None: profile, **dict.fromkeys(names, profile)}
    return {e: finish(_with(start[e], solve(frame[frame.engine == e], {e: start[e]}, shared))) for e in names}


#: Where every fit starts (nominal values), so that a refit reproduces the published constants.
FIT_START = ENGINES["vllm"].replace(
    efficiency=ENGINES["vllm"].efficiency.replace(step_overhead=Q_(3, "ms"), sequence_overhead=Q_(10, "us")),
    request_overhead=Q_(30, "ms"),
    wave_persistence=0.5,
    wave_exponent=0.5,
)
