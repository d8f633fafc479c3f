"""Fit the performance model's parameters to measured serving benchmarks, and report its error.

The measurements are rows of a closed-loop benchmark (the layout of aiconfigurator's silicon
samples, ``calculator/data/calibration/serving_benchmarks_h100.csv``): model, system, backend, precision,
input/output lengths, client concurrency, tensor-parallel degree, and the measured mean TTFT and
TPOT. :func:`load_benchmarks` reads such a file into a tidy frame (with each campaign's harness, from
``benchmark_harness.csv``: whether its clients stay in waves), :func:`fit_profiles` fits
:class:`~calculator.performance.EngineProfile` parameters (the physics shared by all engines, the
behaviour per engine) by robust least squares on log errors, and :func:`prediction_errors`
compares any profile with the measurements. Users can refit on their own measurements the same way.

pandas and scipy load only when these functions run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._paths import CALIBRATION_DIR
from .errors import InputError
from .performance import ENGINES, EngineProfile, closed_loop_seconds, step_arrays
from .precision import check_precision
from .units import Q_

__all__ = [
    "CALIBRATION_DIR",
    "CalibrationFit",
    "FITTED",
    "HARNESS_FILE",
    "calibrate",
    "fit_client_overheads",
    "fit_profiles",
    "load_benchmarks",
    "prediction_errors",
]

#: The harness settings of benchmark campaigns (by engine and version) where the data show one, with the
#: evidence: ``arrivals`` (clients kept in waves), and ``client_overhead_ms``, the harness's own latency
#: per request (``fit_client_overhead: yes``: fitted with the engines' costs, one value per harness).
#: Every other campaign is predicted with the defaults: dispersed arrivals, no client overhead.
HARNESS_FILE = CALIBRATION_DIR / "benchmark_harness.csv"


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
        ``tpot`` (seconds), ``arrivals`` (the campaign's harness, :data:`HARNESS_FILE`; ``"dispersed"``
        unless listed there), plus the original columns.
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
    table = pd.read_csv(HARNESS_FILE, dtype=str).fillna("")
    harness = frame.backend.str.lower() + " " + frame.get("backend_version", pd.Series([""] * len(frame))).astype(str)
    settings = {f"{r.backend} {r.backend_version}": r for r in table.itertuples()}
    known = [settings.get(h) for h in harness]
    return frame.assign(
        harness=harness,
        arrivals=[s.arrivals if s is not None else "dispersed" for s in known],
        client_overhead=[float(s.client_overhead_ms or 0) / 1e3 if s is not None else 0.0 for s in known],
        fit_client_overhead=[s is not None and s.fit_client_overhead == "yes" for s in known],
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
        profile = profiles[engine]
        arrays = step_arrays(model, accelerator, precision, engine=profile)
        arrivals = (group.arrivals == "waves").to_numpy() if "arrivals" in group else "dispersed"
        extra = group.client_overhead.to_numpy() if "client_overhead" in group else 0.0
        out = closed_loop_seconds(
            arrays,
            profile,
            group.tensor_parallel.to_numpy(),
            group.input_tokens.to_numpy(),
            group.output_tokens.to_numpy(),
            group.concurrency.to_numpy(),
            profile.efficiency_for(accelerator),
            arrivals=arrivals,
            client_overhead=extra,
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
        quantity = Q_(float(value), unit) if unit else float(value)
        (efficiency if name in ("step_overhead", "sequence_overhead") else changes)[name] = quantity
    return profile.replace(efficiency=profile.efficiency.replace(**efficiency), **changes)


#: Bounds of a fitted harness latency per request (``client_overhead``), in milliseconds.
CLIENT_OVERHEAD_BOUNDS = (0.0, 500.0)


@dataclass(frozen=True)
class CalibrationFit:
    """Everything one fit produces (:func:`calibrate`).

    Attributes
    ----------
    profiles : dict
        Each engine's fitted profile (as :func:`fit_profiles` returns).
    pooled : EngineProfile
        The engine-agnostic profile (the behaviour shared by all engines, on vLLM's scheduler).
    client_overheads : dict
        Seconds per request of each harness fitted (``fit_client_overhead`` in :data:`HARNESS_FILE`).
    """

    profiles: dict[str, EngineProfile]
    pooled: EngineProfile
    client_overheads: dict[str, float]

    def apply(self, frame: Any) -> Any:
        """``frame`` with the fitted client overheads of its harnesses (others keep theirs)."""
        mapped = frame.harness.map(self.client_overheads)
        return frame.assign(
            client_overhead=mapped.where(mapped.notna() & frame.fit_client_overhead, frame.client_overhead)
        )


def calibrate(frame: Any, **options: Any) -> CalibrationFit:
    """Fit the engines' profiles, the engine-agnostic profile and the harnesses' client overheads at once.

    ``options`` are :func:`fit_profiles`'s (``pooled`` excepted).
    """
    return _fit(frame, **options)


def fit_client_overheads(frame: Any, **options: Any) -> dict[str, float]:
    """The client overhead (seconds) of each harness marked ``fit_client_overhead`` in :data:`HARNESS_FILE`.

    Fitted in the first stage of :func:`fit_profiles`, jointly with the behaviour shared by all
    engines; ``options`` are :func:`fit_profiles`'s.
    """
    return _fit(frame, **options).client_overheads


def fit_profiles(
    frame: Any,
    *,
    pooled: bool = False,
    tpot_weight: float = 2.0,
    prior_rows: float = PRIOR_ROWS,
    source: str = "",
    start: Mapping[Any, EngineProfile] | None = None,
) -> dict[Any, EngineProfile]:
    """Fit the engines' behaviour parameters (:data:`FITTED`) by robust least squares on log errors.

    The fit has two stages. First one behaviour shared by all engines, each row predicted with its
    own engine's documented scheduler, together with the client overhead of each harness marked for
    fitting in :data:`HARNESS_FILE` (a campaign setting, :func:`fit_client_overheads`). Then each
    engine's own behaviour, pulled toward the shared one by ``prior_rows`` rows' worth of weight
    (partial pooling), so that an engine measured in one or two benchmark campaigns does not take on
    that campaign's harness.

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
    fit = _fit(frame, tpot_weight=tpot_weight, prior_rows=prior_rows, source=source, start=start, pooled_only=pooled)
    if pooled:
        return {None: fit.pooled, **dict.fromkeys(sorted(frame.engine.unique()), fit.pooled)}
    return dict(fit.profiles)


def _fit(
    frame: Any,
    *,
    tpot_weight: float = 2.0,
    prior_rows: float = PRIOR_ROWS,
    source: str = "",
    start: Mapping[Any, EngineProfile] | None = None,
    pooled_only: bool = False,
) -> CalibrationFit:
    from scipy.optimize import least_squares

    frame = frame.reset_index(drop=True)
    engines: Mapping[Any, EngineProfile] = start or ENGINES
    names = sorted(frame.engine.unique())
    fitted_harness = sorted(frame.harness[frame.fit_client_overhead].unique()) if "harness" in frame else []
    lower = np.array([f[1] for f in FITTED] + [CLIENT_OVERHEAD_BOUNDS[0]] * len(fitted_harness))
    upper = np.array([f[2] for f in FITTED] + [CLIENT_OVERHEAD_BOUNDS[1]] * len(fitted_harness))
    widths = np.array([f[4] for f in FITTED])
    x0 = np.clip(np.concatenate([_vector(FIT_START), np.full(len(fitted_harness), 50.0)]), lower, upper)
    count = len(FITTED)

    def with_harness(rows: Any, values: np.ndarray) -> Any:
        if not fitted_harness:
            return rows
        overhead = dict(zip(fitted_harness, values / 1e3, strict=True))
        mapped = rows.harness.map(overhead)
        return rows.assign(client_overhead=mapped.where(rows.fit_client_overhead, rows.client_overhead))

    def solve(rows: Any, profiles: dict[str, EngineProfile], prior: np.ndarray | None, harness: Any) -> np.ndarray:
        rows = rows.reset_index(drop=True)
        measured_ttft, measured_tpot = rows.ttft.to_numpy(), rows.tpot.to_numpy()
        pull = np.sqrt(prior_rows * (1 + tpot_weight**2)) / widths

        def residuals(vector: np.ndarray) -> np.ndarray:
            behaviour = vector[:count]
            chosen = with_harness(rows, vector[count:]) if harness is None else harness
            ttft, tpot = _predict(chosen, {e: _with(p, behaviour) for e, p in profiles.items()})
            parts = [np.log(ttft / measured_ttft), tpot_weight * np.log(tpot / measured_tpot)]
            if prior is not None:
                parts.append(0.1 * pull * (behaviour - prior))  # in units of the soft-L1 scale (0.1)
            return np.concatenate(parts)

        if harness is None or prior is None:
            start_at, low, high = x0, lower, upper
        else:
            start_at, low, high = np.clip(prior, lower[:count], upper[:count]), lower[:count], upper[:count]
        fit = least_squares(residuals, start_at, bounds=(low, high), loss="soft_l1", f_scale=0.1, x_scale="jac")
        return fit.x

    first = solve(frame, {e: engines[e] for e in names}, None, None)
    shared, overheads = first[:count], first[count:]
    frame = with_harness(frame, overheads)

    def finish(profile: EngineProfile) -> EngineProfile:
        return profile.replace(source=source) if source else profile

    out = {}
    for e in [] if pooled_only else names:
        rows = frame[frame.engine == e].reset_index(drop=True)
        out[e] = finish(_with(engines[e], solve(rows, {e: engines[e]}, shared, rows)))
    client = dict(zip(fitted_harness, (float(v) / 1e3 for v in overheads), strict=True))
    return CalibrationFit(out, finish(_with(engines[None], shared)), client)


#: Where every fit starts (nominal values), so that a refit reproduces the published constants.
FIT_START = ENGINES["vllm"].replace(
    efficiency=ENGINES["vllm"].efficiency.replace(step_overhead=Q_(3, "ms"), sequence_overhead=Q_(10, "us")),
    request_overhead=Q_(30, "ms"),
)
