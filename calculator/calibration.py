"""Fit the performance model's parameters to measured serving benchmarks, and report its error.

The measurements are rows of a closed-loop benchmark (the layout of aiconfigurator's silicon
samples, ``calculator/data/calibration/serving_benchmarks_h100.csv``): model, system, backend, precision,
input/output lengths, client concurrency, tensor-parallel degree, and the measured mean TTFT and
TPOT. :func:`load_benchmarks` reads such a file into a tidy frame (with each campaign's harness, from
``benchmark_harness.csv``: whether its clients stay in waves), :func:`fit_profiles` fits
:class:`~calculator.performance.EngineProfile` parameters (the physics shared by all engines, the
behaviour per engine) by robust least squares on log errors, and :func:`prediction_errors`
compares any profile with the measurements. Users can refit on their own measurements the same way
(:func:`read_benchmark_files` reads their result files: :mod:`calculator.calibration_files`).

pandas and scipy load only when these functions run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._paths import CALIBRATION_DIR
from ._support import registry_or_default
from .calibration_files import (  # noqa: F401 (re-exported: the readers' public names are this module's)
    BENCHMARK_FORMATS,
    MAX_BENCHMARK_FILE_BYTES,
    MAX_BENCHMARK_TOTAL_CHARS,
    MAX_CALIBRATION_RUNS,
    MAX_GENAI_PERF_LINES,
    PLAUSIBLE_RUN,
    RUNS_CAP_NOTE,
    engine_name,
    genai_perf_concurrency,
    read_benchmark_files,
)
from .errors import InputError
from .performance import ENGINES, EngineProfile, closed_loop_seconds, release_numbers, step_arrays
from .precision import check_precision
from .uncertainty import joint_bands
from .units import Q_

if TYPE_CHECKING:
    from .registry import Registry

__all__ = [
    "CALIBRATION_DIR",
    "BENCHMARK_FORMATS",
    "CalibrationFit",
    "FITTED",
    "HARNESS_FILE",
    "USER_FITTED",
    "UserCalibration",
    "calibrate",
    "calibrate_engine",
    "check_calibration",
    "engine_entry_yaml",
    "fit_client_overheads",
    "fit_profiles",
    "load_benchmarks",
    "prediction_errors",
    "read_benchmark_files",
]

#: The harness settings of benchmark campaigns (by engine, version and, where given, precision) where the data
#: show one, with the evidence: ``arrivals`` (clients kept in waves), and the harness's own latency per
#: request: ``harness`` names its parts (``"a + b"``: a collection shared by several campaigns, plus one
#: campaign's own part) and ``client_overhead_ms`` their latencies in the same order (``fit_client_overhead:
#: yes``: fitted with the engines' costs, one value per part, shared by every campaign that names it).
#: Every other campaign is predicted with the defaults: dispersed arrivals, no client overhead.
HARNESS_FILE = CALIBRATION_DIR / "benchmark_harness.csv"


def _harness_parts(harness: str) -> list[str]:
    """The parts of a campaign's harness (``"a + b"``: ``["a", "b"]``), each with a latency of its own."""
    return [part.strip() for part in str(harness).split("+") if part.strip()]


def _harness_settings(table: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The rows of :data:`HARNESS_FILE` by (engine, version, precision), each with its parts' latencies (s)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    latency: dict[str, float] = {}
    for row in table.to_dict("records"):
        where = f"{HARNESS_FILE.name}, {row['backend']} {row['backend_version']}"
        names = _harness_parts(row.get("harness", "")) or [f"{row['backend']} {row['backend_version']}"]
        values = [v.strip() for v in str(row.get("client_overhead_ms", "")).split("+") if v.strip()] or ["0"]
        if len(values) != len(names):
            raise InputError(f"{where}: {len(names)} harness part(s) but {len(values)} client_overhead_ms value(s)")
        try:
            seconds = [float(v) / 1e3 for v in values]
        except ValueError:
            raise InputError(f"{where}: client_overhead_ms must be numbers joined by '+', got {values!r}") from None
        for name, value in zip(names, seconds, strict=True):
            if not math.isclose(latency.setdefault(name, value), value, abs_tol=1e-6):
                raise InputError(f"{where}: harness part {name!r} has two latencies ({latency[name]:g} s, {value:g} s)")
        spread = str(row.get("length_cv", "")).strip()
        try:
            cv = float(spread) if spread else math.inf  # none given: the clients mix from the second round on
        except ValueError:
            cv = -1.0
        if not cv >= 0:
            raise InputError(f"{where}: length_cv must be a number >= 0 or empty, got {spread!r}")
        key = (row["backend"], row["backend_version"], str(row.get("precision", "")))
        out[key] = {**row, "parts": dict(zip(names, seconds, strict=True)), "length_cv": cv}
    return out


def _recorded_harness(path: str | Path | None = None) -> dict[str, float]:
    """The recorded latency (seconds) of every harness part in :data:`HARNESS_FILE` (or ``path``)."""
    import pandas as pd

    table = pd.read_csv(path or HARNESS_FILE, dtype=str).fillna("")
    return {name: v for row in _harness_settings(table).values() for name, v in row["parts"].items()}


def _harness_latency(frame: Any, latencies: Mapping[str, float], *, unknown: str = "recorded") -> np.ndarray:
    """Each row's client overhead (seconds) with its harness parts' ``latencies``.

    Rows whose harness is fitted (``fit_client_overhead``) take the sum of their parts' latencies; a part
    missing from ``latencies`` counts 0, and a row none of whose parts is there keeps its recorded value
    (``unknown="recorded"``) or gets 0 (``unknown="zero"``: a harness the fit never saw). Other rows keep
    their recorded value.
    """
    parts = [_harness_parts(h) for h in frame.harness]
    total = np.array([sum(latencies.get(p, 0.0) for p in names) for names in parts])
    seen = np.array([any(p in latencies for p in names) for names in parts], dtype=bool)
    recorded = frame.client_overhead.to_numpy(dtype=float)
    fitted = frame.fit_client_overhead.to_numpy(dtype=bool)
    fallback = recorded if unknown == "recorded" else np.zeros_like(recorded)
    return np.where(fitted, np.where(seen, total, fallback), recorded)


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


def _release(version: Any) -> tuple[int, ...] | None:
    """A release's numbers (``performance.engines.release_numbers``); None where the version has no number."""
    try:
        return release_numbers(str(version))
    except InputError:
        return None


def _release_since(field: str, engine: str, version: Any) -> bool | None:
    """Whether ``engine`` at ``version`` is at or after the release its registry entry names in ``field``.

    ``field`` is ``async_scheduling_since`` (the first release that schedules asynchronously by default: vLLM
    0.14) or ``kv_declaration_since`` (the first whose ``--kv-cache-dtype auto`` takes the KV cache a quantized
    checkpoint declares: vLLM 0.14). None: the engine declares no such release, or the version is unrecorded.
    """
    from .registry import load_registry

    entry = load_registry().engines.get(engine)
    written = getattr(entry, field) if entry is not None else None
    since = _release(written) if written else None
    found = _release(version)
    if since is None or found is None:
        return None
    return found >= since


def _release_kv_precision(declared: bool) -> str | None:
    """The KV precision to price a benchmark row with (``kv_declaration``: its release's rule).

    None (the engine's rule) where the release takes the checkpoint's KV declaration, else BF16, the model
    dtype of the releases before it.
    """
    return None if declared else "bf16"


def _async_scheduling(engine: str, version: Any) -> bool | None:
    """Whether ``engine`` at ``version`` schedules asynchronously by default (None: the profile's own)."""
    return _release_since("async_scheduling_since", engine, version)


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
        ``input_tokens``, ``output_tokens``, ``concurrency``, ``tensor_parallel``,
        ``expert_tensor_parallel`` (the recorded ``moe_tp_size``: GPUs each expert is split over, the
        rest of the group spreading the experts; 0 where not recorded: the whole group), ``ttft`` and
        ``tpot`` (seconds), ``arrivals`` (the campaign's harness, :data:`HARNESS_FILE`; ``"dispersed"``
        unless listed there), ``length_cv`` (the spread that mixes its clients after the first burst,
        :func:`~calculator.performance.predict_benchmark`; ``inf`` unless listed: mixed at once), plus the
        original columns.
    """
    import pandas as pd

    from ._files import read_csv
    from .registry import load_registry

    frame = read_csv(
        path or CALIBRATION_DIR / "serving_benchmarks_h100.csv", MAX_BENCHMARK_FILE_BYTES, "load_benchmarks()"
    )
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"load_benchmarks(): the file lacks column(s) {missing}")
    reg = load_registry()
    # An empty GEMM quantization mode means the BF16 checkpoint.
    quant = frame.get("gemm_quant_mode", pd.Series([""] * len(frame))).fillna("").astype(str)
    precision = [check_precision(q or "bf16", "gemm_quant_mode") for q in quant]
    settings = _harness_settings(pd.read_csv(HARNESS_FILE, dtype=str).fillna(""))
    versions = frame.get("backend_version", pd.Series([""] * len(frame))).fillna("unrecorded").astype(str)
    engines = frame.backend.str.lower()
    known = [
        settings.get((e, v, p), settings.get((e, v, ""))) for e, v, p in zip(engines, versions, precision, strict=True)
    ]
    frame = frame.assign(
        harness=[
            " + ".join(s["parts"]) if s is not None else f"{e} {v}"
            for s, e, v in zip(known, engines, versions, strict=True)
        ],
        arrivals=[s["arrivals"] if s is not None else "dispersed" for s in known],
        length_cv=[s["length_cv"] if s is not None else math.inf for s in known],
        client_overhead=[sum(s["parts"].values()) if s is not None else 0.0 for s in known],
        fit_client_overhead=[s is not None and s["fit_client_overhead"] == "yes" for s in known],
        async_scheduling=[
            {"yes": True, "no": False}.get(s.get("async_scheduling", "")) if s is not None else None for s in known
        ],
        model=[reg.models[m].id for m in frame.model_path],
        accelerator=[reg.accelerators[s].id for s in frame.system],
        precision=precision,
        engine=frame.backend.str.lower(),
        input_tokens=frame.isl.astype(float),
        output_tokens=frame.osl.astype(float),
        concurrency=frame.batch_size.astype(float),
        tensor_parallel=frame.tp_size.astype(float),
        expert_tensor_parallel=frame.get("moe_tp_size", pd.Series([0.0] * len(frame))).fillna(0.0).astype(float),
        ttft=frame.silicon_ttft_ms / 1e3,
        tpot=frame.silicon_tpot_ms / 1e3,
    )
    by_version = [_async_scheduling(e, v) for e, v in zip(frame.engine, versions, strict=True)]
    scheduling = [v if v is not None else d for v, d in zip(frame.async_scheduling, by_version, strict=True)]
    # A release before the engine honoured KV declarations runs a BF16 cache for quantized weights. Where the
    # version is unrecorded, the harness file's scheduling dates the release when both changes came together.
    declared = []
    for engine, version, flag in zip(frame.engine, versions, scheduling, strict=True):
        honoured = _release_since("kv_declaration_since", engine, version)
        entry = reg.engines.get(engine)
        since = (entry.kv_declaration_since, entry.async_scheduling_since) if entry is not None else (None, None)
        together = since[0] is not None and _release(since[0]) == _release(since[1])
        declared.append(honoured if honoured is not None else (flag if together else None))
    return frame.assign(
        async_scheduling=scheduling,
        kv_declaration=[d is not False for d in declared],
    )


def _predict(
    frame: Any,
    profiles: dict[str, EngineProfile],
    arrays: dict[tuple[str, ...], Any] | None = None,
    cache_run: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Predicted TTFT and TPOT of every row; ``arrays`` keeps the step arrays between calls of one fit.

    ``cache_run=False`` (the fit's residuals) keeps the mixed state's slot wait where the cache binds instead
    of following the group's cache through the run (``closed_loop_seconds``): seconds per evaluation.
    """
    return _Rows(frame).predict(profiles, arrays, cache_run)


class _Rows:
    """Benchmark rows grouped as :func:`_predict` prices them, once for the many evaluations of a fit.

    A group shares the model, accelerator, precision, engine, expert tensor parallelism, the release's
    scheduling (-1: the profile's own) and whether the release honours KV declarations.
    """

    KEYS = ("model", "accelerator", "precision", "engine", "expert_tensor_parallel", "overlap", "kv_declaration")

    def __init__(self, frame: Any) -> None:
        if "expert_tensor_parallel" not in frame:
            frame = frame.assign(expert_tensor_parallel=0.0)
        if "kv_declaration" not in frame:
            frame = frame.assign(kv_declaration=True)
        overlap = frame.async_scheduling if "async_scheduling" in frame else None
        frame = frame.assign(overlap=-1 if overlap is None else overlap.map({True: 1, False: 0}).fillna(-1))
        self.size = len(frame)
        self.overhead = frame.client_overhead.to_numpy(dtype=float) if "client_overhead" in frame else None
        self.groups = []
        for key, group in frame.groupby(list(self.KEYS), sort=False):
            columns = {
                name: group[name].to_numpy(dtype=float)
                for name in ("tensor_parallel", "input_tokens", "output_tokens", "concurrency")
            }
            columns["arrivals"] = (group.arrivals == "waves").to_numpy() if "arrivals" in group else "dispersed"
            columns["length_cv"] = group.length_cv.to_numpy(dtype=float) if "length_cv" in group else None
            self.groups.append((key, frame.index.get_indexer(group.index), columns))

    def predict(
        self,
        profiles: dict[str, EngineProfile],
        arrays: dict[tuple[str, ...], Any] | None = None,
        cache_run: bool = True,
        client_overhead: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_predict` of the rows; ``client_overhead`` (seconds, by row) in place of the frame's."""
        ttft, tpot = np.empty(self.size), np.empty(self.size)
        built = {} if arrays is None else arrays
        overhead = self.overhead if client_overhead is None else client_overhead
        for (model, accelerator, precision, engine, moe_tp, flag, declared), index, columns in self.groups:
            profile = profiles[engine]
            if flag >= 0:  # the release's own scheduling: the fixed costs' overlap and the scheduler's lag
                profile = profile.with_async_scheduling(bool(flag))
            efficiency = profile.efficiency_for(accelerator)
            kv = _release_kv_precision(declared)
            key = (model, accelerator, precision, kv or profile.quantized_kv_precision, profile.name, moe_tp)
            if key not in built:  # the step arrays (and their kernel curves) depend on the KV rule, not on the costs
                base = step_arrays(model, accelerator, precision, kv, engine=profile)
                built[key] = base.with_expert_tensor_parallel(moe_tp or None)
            out = closed_loop_seconds(
                built[key],
                profile,
                columns["tensor_parallel"],
                columns["input_tokens"],
                columns["output_tokens"],
                columns["concurrency"],
                efficiency,
                arrivals=columns["arrivals"],
                client_overhead=0.0 if overhead is None else overhead[index],
                length_cv=columns["length_cv"],
                cache_run=cache_run,
            )
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

#: The GPU-side parameter a user calibration fits besides :data:`FITTED` (:func:`calibrate_engine`, as a
#: :data:`FITTED` row): a factor on the GPU work of every iteration on the accelerator the runs were measured
#: on (:attr:`~calculator.performance.Efficiency.gpu_time_scale`), between 0.25 and 4, starting from the
#: engine's own (1: the kernel tables as measured). Not fitted on the packaged benchmarks, whose kernel tables
#: were measured on the same H100s.
GPU_TIME_SCALE = ("gpu_time_scale", 0.25, 4.0, "", 0.25)

#: What a user calibration fits (:func:`calibrate_engine`): the engine's costs and the accelerator's GPU factor.
USER_FITTED = (*FITTED, GPU_TIME_SCALE)

#: The least a parameter must move the fit's residuals to count as determined by the runs
#: (:func:`_determined`): moved by its prior width (the last entry of its :data:`FITTED` row), the part of the
#: change no other fitted parameter can make up is at least this root sum of squares of log errors (0.01:
#: one run's TTFT by 1 %).
DETERMINED = 0.01

#: Rows' worth of weight that pulls each engine's behaviour toward the shared behaviour.
PRIOR_ROWS = 60

#: Restarts of a fit from its own result, while each lowers the cost (see :func:`fit_profiles`).
_RESTARTS = 3


#: The fitted parameters held by the efficiency (the rest by the profile).
_EFFICIENCY_FIELDS = ("step_overhead", "sequence_overhead", "gpu_time_scale")


def _get(profile: EngineProfile, name: str, unit: str, accelerator: str | None = None) -> float:
    """A fitted parameter of ``profile`` in ``unit`` (on ``accelerator``: its own efficiency, if it has one)."""
    holder = profile.efficiency_for(accelerator) if name in _EFFICIENCY_FIELDS else profile
    value = getattr(holder, name)
    return float(value.m_as(unit)) if unit else float(value)


def _vector(profile: EngineProfile, parameters: tuple = FITTED, accelerator: str | None = None) -> np.ndarray:
    return np.array([_get(profile, name, unit, accelerator) for name, _, _, unit, _ in parameters])


def _with(
    profile: EngineProfile, values: np.ndarray, parameters: tuple = FITTED, accelerator: str | None = None
) -> EngineProfile:
    """``profile`` with the fitted ``values`` of ``parameters``.

    The engine's costs apply on every accelerator (its efficiency and each of ``per_accelerator``, as
    the registry holds them); the GPU factor only on ``accelerator`` (:meth:`EngineProfile.with_gpu_time_scale`).
    """
    changes: dict[str, Any] = {}
    costs: dict[str, Any] = {}
    scale = None
    for (name, _, _, unit, _), value in zip(parameters, values, strict=True):
        if name == "gpu_time_scale":
            scale = float(value)
            continue
        quantity = Q_(float(value), unit) if unit else float(value)
        (costs if name in _EFFICIENCY_FIELDS else changes)[name] = quantity
    out = profile.replace(
        efficiency=profile.efficiency.replace(**costs),
        per_accelerator={device: e.replace(**costs) for device, e in profile.per_accelerator.items()},
        **changes,
    )
    if scale is None:
        return out
    if accelerator is None:
        raise InputError("_with(): fitting 'gpu_time_scale' needs the accelerator the runs were measured on")
    return out.with_gpu_time_scale(accelerator, scale)


def _determined(jacobian: np.ndarray, parameters: tuple) -> dict[str, bool]:
    """Whether the runs determine each of ``parameters`` (:data:`DETERMINED`), from the fit's Jacobian.

    ``jacobian``: the residuals' derivatives at the solution (weighted by the robust loss, as
    ``least_squares`` returns them), a column per parameter, then any harness overheads fitted with them.
    A column scaled by the parameter's prior width, less its projection on the other columns, is what
    moving that parameter does that no other can undo: about zero where the parameter moves nothing (a
    cost the GPU's work hides) or where another moves the same (collinear).
    """
    scaled = np.asarray(jacobian, dtype=float).copy()
    scaled[:, : len(parameters)] *= np.array([row[4] for row in parameters])
    out = {}
    for j, (name, *_) in enumerate(parameters):
        column, others = scaled[:, j], np.delete(scaled, j, axis=1)
        if others.shape[1]:
            column = column - others @ np.linalg.lstsq(others, column, rcond=None)[0]
        out[name] = bool(np.linalg.norm(column) >= DETERMINED)
    return out


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
        Seconds per request of each harness part fitted (``fit_client_overhead`` in :data:`HARNESS_FILE`).
    determined : dict
        Whether the rows determine each parameter of the first stage (:func:`_determined`); empty where
        that stage was given (``first_stage``).
    """

    profiles: dict[str, EngineProfile]
    pooled: EngineProfile
    client_overheads: dict[str, float]
    determined: Mapping[str, bool] = field(default_factory=dict)

    def apply(self, frame: Any, unknown: str = "recorded") -> Any:
        """``frame`` with the fitted client overheads of its harnesses (:func:`_harness_latency`)."""
        return frame.assign(client_overhead=_harness_latency(frame, self.client_overheads, unknown=unknown))


def calibrate(frame: Any, **options: Any) -> CalibrationFit:
    """Fit the engines' profiles, the engine-agnostic profile and the harnesses' client overheads at once.

    ``options`` are :func:`fit_profiles`'s (``pooled`` excepted).
    """
    return _fit(frame, **options)


def fit_client_overheads(frame: Any, **options: Any) -> dict[str, float]:
    """The client overhead (seconds) of each harness part marked ``fit_client_overhead`` in :data:`HARNESS_FILE`.

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
    first_stage: np.ndarray | None = None,
    begin: np.ndarray | None = None,
    engines_begin: Mapping[str, np.ndarray] | None = None,
    parameters: tuple = FITTED,
    accelerator: str | None = None,
) -> CalibrationFit:
    """The two stages of :func:`fit_profiles`.

    ``first_stage`` (the shared behaviour in :data:`FITTED` units, then the fitted harness overheads in
    ms) skips the first stage, ``pooled_only`` the second. ``begin`` (the same layout) is where the first
    stage's search starts instead of :data:`FIT_START` and 50 ms of each harness overhead; ``engines_begin``
    (by engine, in :data:`FITTED` units) where an engine's stage starts instead of the shared behaviour.
    ``parameters`` are the rows fitted (:data:`FITTED`, or :data:`USER_FITTED` with the ``accelerator`` of
    the GPU factor: :func:`calibrate_engine`).
    """
    from scipy.optimize import least_squares

    frame = frame.reset_index(drop=True)
    engines: Mapping[Any, EngineProfile] = start or ENGINES
    names = sorted(frame.engine.unique())
    fitted_harness = (
        sorted({p for h in frame.harness[frame.fit_client_overhead] for p in _harness_parts(h)})
        if "harness" in frame
        else []
    )
    lower = np.array([f[1] for f in parameters] + [CLIENT_OVERHEAD_BOUNDS[0]] * len(fitted_harness))
    upper = np.array([f[2] for f in parameters] + [CLIENT_OVERHEAD_BOUNDS[1]] * len(fitted_harness))
    widths = np.array([f[4] for f in parameters])
    nominal = np.concatenate([_vector(FIT_START, parameters, accelerator), np.full(len(fitted_harness), 50.0)])
    x0 = np.clip(nominal if begin is None else np.asarray(begin, dtype=float), lower, upper)
    count = len(parameters)
    behave = functools.partial(_with, parameters=parameters, accelerator=accelerator)  # a profile with values

    def harness_latency(rows: Any, values: np.ndarray) -> np.ndarray | None:
        """Each row's client overhead with the fitted harness parts' ``values`` (ms); None: none fitted."""
        if not fitted_harness:
            return None
        return _harness_latency(rows, dict(zip(fitted_harness, values / 1e3, strict=True)))

    def with_harness(rows: Any, values: np.ndarray) -> Any:
        overhead = harness_latency(rows, values)
        return rows if overhead is None else rows.assign(client_overhead=overhead)

    cache: dict[tuple[str, ...], Any] = {}  # step arrays shared by every evaluation of this fit

    def solve(
        rows: Any,
        profiles: dict[str, EngineProfile],
        prior: np.ndarray | None,
        harness: Any,
        at: np.ndarray | None = None,
    ) -> Any:
        rows = rows.reset_index(drop=True)
        measured_ttft, measured_tpot = rows.ttft.to_numpy(), rows.tpot.to_numpy()
        pull = np.sqrt(prior_rows * (1 + tpot_weight**2)) / widths
        priced = _Rows(rows if harness is None else harness.reset_index(drop=True))

        def residuals(vector: np.ndarray) -> np.ndarray:
            behaviour = vector[:count]
            overhead = harness_latency(rows, vector[count:]) if harness is None else None
            refit = {e: behave(p, behaviour) for e, p in profiles.items()}
            ttft, tpot = priced.predict(refit, cache, cache_run=False, client_overhead=overhead)
            parts = [np.log(ttft / measured_ttft), tpot_weight * np.log(tpot / measured_tpot)]
            if prior is not None:
                parts.append(0.1 * pull * (behaviour - prior))  # in units of the soft-L1 scale (0.1)
            return np.concatenate(parts)

        if harness is None or prior is None:
            start_at, low, high = x0, lower, upper
        else:
            first_guess = prior if at is None else np.asarray(at, dtype=float)
            start_at, low, high = np.clip(first_guess, lower[:count], upper[:count]), lower[:count], upper[:count]
        fit = least_squares(residuals, start_at, bounds=(low, high), loss="soft_l1", f_scale=0.1, x_scale="jac")
        # The engines' and the harness's request overheads trade along a flat valley, where the trust
        # region can stop early: restart from the result while that lowers the cost.
        for _ in range(_RESTARTS):
            again = least_squares(residuals, fit.x, bounds=(low, high), loss="soft_l1", f_scale=0.1, x_scale="jac")
            if again.cost >= fit.cost * (1 - 1e-6):
                break
            fit = again
        return fit

    found = solve(frame, {e: engines[e] for e in names}, None, None) if first_stage is None else None
    first = np.asarray(first_stage) if found is None else found.x
    determined = {} if found is None else _determined(found.jac, parameters)
    shared, overheads = first[:count], first[count:]
    frame = with_harness(frame, overheads)

    def finish(profile: EngineProfile) -> EngineProfile:
        return profile.replace(source=source) if source else profile

    out = {}
    for e in [] if pooled_only else names:
        rows = frame[frame.engine == e].reset_index(drop=True)
        at = None if engines_begin is None else engines_begin[e]
        out[e] = finish(behave(engines[e], solve(rows, {e: engines[e]}, shared, rows, at).x))
    client = dict(zip(fitted_harness, (float(v) / 1e3 for v in overheads), strict=True))
    return CalibrationFit(out, finish(behave(engines[None], shared)), client, determined)


#: Where every fit starts (nominal values), so that a refit reproduces the published constants.
FIT_START = ENGINES["vllm"].replace(
    efficiency=ENGINES["vllm"].efficiency.replace(step_overhead=Q_(3, "ms"), sequence_overhead=Q_(10, "us")),
    request_overhead=Q_(30, "ms"),
)


#: The most folds of :func:`calibrate_engine`'s cross-validation: up to this many runs each run is left out
#: alone (leave-one-out); beyond, run ``i`` goes to fold ``i mod MAX_CV_FOLDS`` and each fold is predicted by a
#: fit without it. A calibration is then at most ``MAX_CV_FOLDS + 1`` fits (a few seconds each), whatever
#: the number of runs (leave-one-out on 100 runs took 241 s).
MAX_CV_FOLDS = 10


@dataclass(frozen=True)
class UserCalibration:
    """What ``servecalc calibrate`` found: the refit engine, its errors, its interval, and what the runs fixed."""

    profile: EngineProfile  # its GPU factor on the runs' accelerator in ``per_accelerator``
    in_sample: tuple[float, float]  # median |error| of TTFT and TPOT in the fit
    held_out: tuple[float, float]  # the same, each run predicted by a fit without it
    interval: dict[str, tuple[float, float]]  # 80 % factors from the held-out ratios
    runs: int
    #: Each of :data:`USER_FITTED`: True where the runs determined it, False where the fit left it at the
    #: prior, the engine's own value (:func:`_determined`).
    determined: Mapping[str, bool] = field(default_factory=dict)


def cross_validation_folds(runs: int) -> int:
    """The folds :func:`calibrate_engine` checks ``runs`` runs with: one per run, at most :data:`MAX_CV_FOLDS`."""
    return max(1, min(int(runs), MAX_CV_FOLDS))


def _refit_engine(frame: Any, base: EngineProfile) -> CalibrationFit:
    """The fit of :func:`calibrate_engine`: :data:`USER_FITTED` on ``frame``'s runs, from ``base``'s values.

    One stage of :func:`_fit` (the runs are one engine's, with no harness to fit), started from the engine's
    own costs and GPU factor, which are the prior: where the runs do not move a parameter it stays there
    (``determined``). The refit engine is the result's ``pooled`` profile.
    """
    accelerator = frame.accelerator.iloc[0]
    begin = _vector(base, USER_FITTED, accelerator)
    start = {frame.engine.iloc[0]: base, None: base}
    return _fit(frame, start=start, pooled_only=True, begin=begin, parameters=USER_FITTED, accelerator=accelerator)


def calibrate_engine(
    frame: Any, engine: str | EngineProfile, *, registry: Any = None, progress: Callable[[int, int], Any] | None = None
) -> UserCalibration:
    """Refit ``engine``'s costs and the GPU's speed on a user's benchmark runs (:func:`read_benchmark_files`).

    The fit (:func:`_refit_engine`) is :func:`fit_profiles`'s first stage on :data:`USER_FITTED`: the engine's
    three costs and a factor on the GPU work of an iteration on the runs' accelerator, started from the
    engine's registry profile (its costs, and its factor there: 1 unless a registry file gives one), where
    the parameters the runs do not determine stay (``UserCalibration.determined``). Each run is also
    predicted by a fit without it (cross-validation, :func:`cross_validation_folds`: each run left out
    alone up to :data:`MAX_CV_FOLDS` runs, else run ``i`` in fold ``i mod MAX_CV_FOLDS``), and those
    held-out ratios (measured / predicted) give the engine's own intervals
    (:func:`~calculator.uncertainty.joint_bands`: their 10th-90th percentiles, widened until TTFT and TPOT
    hold together on 75 % of the runs where they can, each at most 85 % alone). Whether the result may be
    used is :func:`check_calibration`'s to say. ``progress(done, total)``, if given, is called after the fit
    and after each fold's refit (``total`` is one more than the folds), for a progress bar.
    """
    import pandas as pd

    from .performance import engine_profile

    needed = {
        "ttft",
        "tpot",
        "engine",
        "accelerator",
        "input_tokens",
        "output_tokens",
        "concurrency",
        "tensor_parallel",
    }
    if not isinstance(frame, pd.DataFrame) or not needed <= set(frame.columns) or frame.accelerator.nunique() > 1:
        raise InputError(
            "calibrate_engine(): argument 'frame' must be read_benchmark_files()'s table of runs (on one accelerator)"
        )
    base = engine_profile(engine, registry)
    if len(frame) < 3:
        raise InputError(
            f"calibrate: {len(frame)} run(s); fitting the engine's costs and the GPU's factor takes at least three "
            "benchmark runs"
        )
    if len(frame) > MAX_CALIBRATION_RUNS:
        raise InputError(f"calibrate_engine(): {len(frame):,} runs; {RUNS_CAP_NOTE}")
    name = frame.engine.iloc[0]
    folds = cross_validation_folds(len(frame))
    step = progress or (lambda done, total: None)
    fit = _refit_engine(frame, base)
    step(1, folds + 1)
    fitted = prediction_errors(frame, {name: fit.pooled})
    held = []
    fold_of = np.arange(len(frame)) % folds
    for fold in range(folds):
        refit = _refit_engine(frame[fold_of != fold], base).pooled
        held.append(prediction_errors(frame[fold_of == fold], {name: refit}))
        step(fold + 2, folds + 1)
    cv = pd.concat(held, ignore_index=True)
    bands, _ = joint_bands({metric: -np.log1p(cv[f"{metric}_error"].to_numpy()) for metric in ("ttft", "tpot")})
    interval = {metric: (math.exp(low), math.exp(high)) for metric, (low, high) in bands.items()}

    def medians(errors: Any) -> tuple[float, float]:
        return float(np.median(np.abs(errors.ttft_error))), float(np.median(np.abs(errors.tpot_error)))

    return UserCalibration(fit.pooled, medians(fitted), medians(cv), interval, len(frame), dict(fit.determined))


#: The least certain calibration that may be used (:func:`check_calibration`): a median held-out error above
#: 50 %, or an 80 % interval reaching beyond a factor of 4 either way (0.25x-4x; the packaged engines' widest
#: is 0.725x-2.09x, ``prediction_intervals.json``), says the runs disagree with the model or with each other,
#: and an engine written with it would size fleets with a confidence it does not have.
MAX_HELD_OUT_ERROR = 0.5
MAX_INTERVAL_FACTOR = 4.0


def check_calibration(calibration: UserCalibration, what: str = "calibrate") -> None:
    """Refuse a calibration too uncertain to use: an :class:`InputError` naming the measure and its bound.

    Bounds: :data:`MAX_HELD_OUT_ERROR` on the median held-out |error| of TTFT and TPOT, and
    :data:`MAX_INTERVAL_FACTOR` on each end of their 80 % intervals (NaN fails both).
    """
    if not isinstance(calibration, UserCalibration):
        raise InputError(f"{what}: argument 'calibration' must be calibrate_engine()'s result")
    try:
        errors = [float(v) for v in calibration.held_out]
        intervals = [[float(v) for v in calibration.interval[m]] for m in ("ttft", "tpot")]
    except (TypeError, ValueError, KeyError):
        errors, intervals = [], []
    if len(errors) != 2 or [len(pair) for pair in intervals] != [2, 2]:
        raise InputError(f"{what}: argument 'calibration' has malformed errors or intervals")
    problems = []
    for metric, error, (low, high) in zip(("ttft", "tpot"), errors, intervals, strict=True):
        if not error <= MAX_HELD_OUT_ERROR:
            problems.append(f"held-out {metric.upper()} error {error:.0%} is above {MAX_HELD_OUT_ERROR:.0%}")
        if not 1 / MAX_INTERVAL_FACTOR <= low <= high <= MAX_INTERVAL_FACTOR:
            problems.append(
                f"{metric.upper()} interval {low:.3g}x-{high:.3g}x reaches beyond "
                f"{1 / MAX_INTERVAL_FACTOR:g}x-{MAX_INTERVAL_FACTOR:g}x"
            )
    if problems:
        raise InputError(
            f"{what}: the fit is too uncertain to use ({'; '.join(problems)}): the runs disagree with the model or "
            "with each other (check their units, concurrency and lengths)"
        )


def engine_entry_yaml(
    calibration: UserCalibration, engine: str, accelerator: str, files: Iterable[str], registry: Registry | None = None
) -> str:
    """A registry file that overrides ``engine``'s fitted costs and interval with ``calibration``'s.

    Loaded with ``--extra`` (or ``load_registry(extra=[...])``), the sizer, the simulator and the
    launch configs use the calibrated engine; its own source (of kind ``fit``) names the files.
    ``engine`` is resolved in ``registry`` (default: the packaged one).
    """
    import yaml

    check_calibration(calibration, "engine_entry_yaml()")
    if not isinstance(accelerator, str) or not accelerator:
        raise InputError(
            f"engine_entry_yaml(): argument 'accelerator' must be an accelerator id, got {accelerator!r:.80}"
        )
    engine = engine_name(engine, registry_or_default(registry, "engine_entry_yaml"))
    files = [str(f) for f in files] if isinstance(files, Iterable) and not isinstance(files, str) else []
    p = calibration.profile
    scales = {device: float(f"{e.gpu_time_scale:.4g}") for device, e in p.per_accelerator.items()}
    fields = ["step_overhead", "sequence_overhead", "request_overhead", *(["gpu_time_scale"] if scales else [])]
    listed = [Path(f).name for f in files]
    names = ", ".join(listed) if len(listed) <= 3 else f"{listed[0]} ... {listed[-1]}"
    source_id = f"servecalc-calibrate-{engine}"
    document = {
        "sources": [
            {
                "id": source_id,
                "title": f"servecalc calibrate on {calibration.runs} benchmark runs ({names})",
                "url": f"file:{listed[0] if listed else 'benchmarks'}",
                "kind": "fit",
                "note": (
                    f"median |error| in the fit TTFT {calibration.in_sample[0]:.1%}, "
                    f"TPOT {calibration.in_sample[1]:.1%}; "
                    f"each run left out TTFT {calibration.held_out[0]:.1%}, TPOT {calibration.held_out[1]:.1%}"
                ),
            }
        ],
        "engines": [
            {
                "id": engine,
                "step_overhead": f"{p.efficiency.step_overhead.m_as('ms'):.4g} ms",
                "sequence_overhead": f"{p.efficiency.sequence_overhead.m_as('us'):.4g} us",
                "request_overhead": f"{p.request_overhead.m_as('ms'):.4g} ms",
                **({"gpu_time_scale": scales} if scales else {}),
                "prediction_interval": {
                    "ttft": [round(v, 3) for v in calibration.interval["ttft"]],
                    "tpot": [round(v, 3) for v in calibration.interval["tpot"]],
                    "accelerators": [accelerator],
                },
                "sources": [
                    {
                        "source": source_id,
                        "fields": [*fields, "prediction_interval"],
                    }
                ],
            }
        ],
    }
    return yaml.safe_dump(document, sort_keys=False)
