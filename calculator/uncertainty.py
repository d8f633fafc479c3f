"""Prediction intervals of the performance model, from its cross-validated errors.

``benchmarks/fit_performance.py`` refits the model with one benchmark campaign (model, engine version,
precision, TP) left out at a time and records, for each held-out row, the ratio of measured to
predicted TTFT and TPOT. The 10th and 90th percentiles of those ratios (their bias as well as their
spread), moved out (each by its own tail) until TTFT and TPOT hold together on 75 % of the held-out rows
(each then holds 80-85 % alone), give the intervals as factors on the prediction
(``calculator/data/calibration/prediction_intervals.json``). The interval widens where the model knows less:

* every prediction is for an engine version the fit may not have seen: each end moves out (log space)
  by the term that makes the band hold as much of the leave-one-engine-version-out predictions;
* an engine the data does not cover (the ``generic`` profile) uses the pooled errors of all engines;
* an accelerator without end-to-end measurements in the fit (every GPU but the H100) widens each end
  by the cross-generation spread of the splitwise transfer check (log space);
* an accelerator or precision without measured kernel tables (the generic efficiency curve at its
  registry peaks) widens each end by what the curve missed on GPUs it had not seen: each measured GPU
  left out in turn and priced by the others' curve, the 10th and 90th percentiles of ln(own tables /
  the others' curve) over their decode steps and prefills (:mod:`calculator.kernel_holdout`,
  ``generic_curve_holdout.json``), added in quadrature (independent errors).

Examples
--------
>>> low, high = prediction_interval("vllm", "h100-sxm", True)["tpot"]
>>> low < 1 < high
True
>>> other = prediction_interval("vllm", "h200-sxm", True)["tpot"]
>>> generic = prediction_interval("vllm", "mi300x", False)["tpot"]
>>> generic[0] < other[0] < low and generic[1] > other[1] > high
True
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ._paths import CALIBRATION_DIR

__all__ = ["HOLDOUT_FILE", "INTERVALS_FILE", "generic_band", "kernel_basis", "prediction_interval", "vendor_tested"]

INTERVALS_FILE = CALIBRATION_DIR / "prediction_intervals.json"
#: The generic efficiency curve tested on each measured GPU left out (:mod:`calculator.kernel_holdout`).
HOLDOUT_FILE = CALIBRATION_DIR / "generic_curve_holdout.json"

#: The coverage each interval starts from, the share of held-out rows on which a prediction's TTFT and
#: TPOT intervals should hold together (two independent 80 % intervals: 64 %), and the most either may
#: hold alone on the way (:func:`joint_bands`).
COVERAGE = 0.80
JOINT_COVERAGE = 0.75
WIDEST_COVERAGE = 0.85


def joint_bands(
    log_ratios: dict[str, Any], others: Sequence[dict[str, Any]] = ()
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """The bands of log(measured / predicted), per metric, and the coverage each holds alone.

    Each band starts as the central ``COVERAGE`` range of its held-out ratios (their bias as well as their
    spread) and may widen, by its own tail, until every metric's band holds at once on ``JOINT_COVERAGE`` of
    the rows, none holding more than ``WIDEST_COVERAGE`` alone, of these rows or of any of ``others`` (other
    held-out rows the bands are stated for, such as unseen engine versions'). Of the tails that do, the
    narrowest (the least coverage added; then the most held together); where none does, the pair that holds
    the most together within ``WIDEST_COVERAGE`` alone; where every pair holds more alone, the widest allowed.
    """
    import itertools

    import numpy as np

    # An infinite prediction (an unstable queue) counts as a factor of e^-20: the quantiles stay finite.
    def clipped(ratios: dict[str, Any]) -> dict[str, np.ndarray]:
        return {metric: np.clip(np.asarray(r, dtype=float), -20.0, 20.0) for metric, r in ratios.items()}

    logs, extra = clipped(log_ratios), [clipped(o) for o in others]
    metrics = list(logs)
    tails = np.arange((1 - COVERAGE) / 2, (1 - WIDEST_COVERAGE) / 2 - 1e-9, -0.0025)
    best: tuple[Any, ...] | None = None
    for chosen in itertools.product(tails, repeat=len(metrics)):
        bands = {
            m: (float(np.quantile(logs[m], t)), float(np.quantile(logs[m], 1 - t)))
            for m, t in zip(metrics, chosen, strict=True)
        }
        inside = {m: (r >= bands[m][0]) & (r <= bands[m][1]) for m, r in logs.items()}
        held = float(np.mean(np.logical_and.reduce(list(inside.values()))))
        alone = {m: float(np.mean(h)) for m, h in inside.items()}
        widest = max(
            [*alone.values()]
            + [float(np.mean((o[m] >= bands[m][0]) & (o[m] <= bands[m][1]))) for o in extra for m in metrics]
        )
        allowed = widest <= WIDEST_COVERAGE
        reached = allowed and held >= JOINT_COVERAGE
        narrow = round(float(sum(chosen)), 6)
        # reaching the joint coverage: the narrowest; short of it: the most held together, then the narrowest
        key = (reached, allowed, *((narrow, held) if reached else (held, narrow)))
        if best is None or key > best[:4]:
            best = (*key, bands, {m: float(1 - 2 * t) for m, t in zip(metrics, chosen, strict=True)})
    assert best is not None
    if not best[1]:  # every pair holds more than the widest coverage of some rows alone: the widest allowed
        bands = {m: (float(np.quantile(r, tails[-1])), float(np.quantile(r, 1 - tails[-1]))) for m, r in logs.items()}
        return bands, {m: float(1 - 2 * tails[-1]) for m in metrics}
    return best[4], best[5]


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(INTERVALS_FILE.read_text())


def prediction_interval(
    engine: str, accelerator: str, measured_kernels: bool, own: Any = None, fitted_release: bool = False
) -> dict[str, tuple[float, float]]:
    """The 80 % interval of TTFT and TPOT as factors ``(low, high)`` on the prediction.

    Parameters
    ----------
    engine : str
        Profile name (``"vllm"``, ``"sglang"``, ``"trtllm"``, ``"generic"``); other names use the
        engine-agnostic interval.
    accelerator : str
        Registry id; the accelerators of the end-to-end fit get the cross-validated interval itself.
    measured_kernels : bool
        Whether the accelerator and precision have measured kernel tables.
    own : registry.EngineInterval, optional
        The engine's own interval (a calibration on the user's benchmarks): used instead of the packaged
        one, on its own accelerators as it is and elsewhere widened by the cross-generation spread.
    fitted_release : bool
        True where the prediction is for an engine release whose benchmarks were in the fit
        (``EngineProfile.release_fitted``): the unseen-release term is left out. False (a release not fitted, or
        unstated) keeps it.
    """
    table = _table()
    curve = (0.0, 0.0) if measured_kernels else _generic_band(accelerator)
    if own is not None:
        spread = 0.0 if accelerator in own.accelerators else table["cross_gpu_spread"]
        return {
            metric: (
                math.exp(-math.hypot(-min(math.log(getattr(own, metric)[0]), 0.0) + spread, curve[0])),
                math.exp(math.hypot(max(math.log(getattr(own, metric)[1]), 0.0) + spread, curve[1])),
            )
            for metric in ("ttft", "tpot")
        }
    intervals = table["intervals"]
    row = intervals.get(engine if isinstance(engine, str) else "generic", intervals["generic"])
    spread = 0.0 if accelerator in table["calibrated_accelerators"] else table["cross_gpu_spread"]
    out = {}
    for metric in ("ttft", "tpot"):
        low, high = (math.log(v) for v in row[metric])
        unseen = 0.0 if fitted_release else row.get(f"{metric}_version_widening", 0.0)
        extra = math.hypot(spread, unseen)  # independent terms
        low, high = min(low, 0.0) - extra, max(high, 0.0) + extra
        low, high = -math.hypot(low, curve[0]), math.hypot(high, curve[1])
        out[metric] = (math.exp(low), math.exp(high))
    return out


def _generic_band(accelerator: str) -> tuple[float, float]:
    """How far below and above its own tables the generic curve priced a left-out GPU (log, both >= 0).

    The pooled band for an accelerator of the vendor the tables cover; the widest single GPU's otherwise.
    """
    low, high = generic_band(vendor_tested(accelerator))
    return -min(low, 0.0), max(high, 0.0)


@functools.lru_cache(maxsize=1)
def _recorded() -> dict[str, Any]:
    return json.loads(HOLDOUT_FILE.read_text(encoding="utf-8"))


#: The vendor whose GPUs the kernel tables (and so the test) cover.
TESTED_VENDOR = "nvidia"


def generic_band(tested_vendor: bool = True) -> tuple[float, float]:
    """How far the others' curve missed a left-out GPU: ln(own tables / the others' curve), low and high.

    ``tested_vendor``: the 10th and 90th percentiles pooled over the left-out GPUs' iterations. Otherwise (an
    accelerator of a vendor no table covers, or one the packaged registry does not know) the widest band of
    any single left-out GPU at each end: the test spans one vendor, so the GPU the curve priced worst stands
    in for what it cannot measure.
    """
    recorded = _recorded()
    if tested_vendor:
        pooled = recorded["pooled_iterations"]
        return float(pooled["p10"]), float(pooled["p90"])
    bands = [stats for gpu in recorded["per_gpu"].values() for stats in gpu["iterations"].values()]
    return min(float(b["p10"]) for b in bands), max(float(b["p90"]) for b in bands)


def vendor_tested(accelerator_id: str) -> bool:
    """Whether ``accelerator_id`` is a packaged accelerator of the vendor the kernel tables cover."""
    from .registry import load_registry

    device = load_registry().accelerators.get(accelerator_id)
    return device is not None and device.vendor.lower() == TESTED_VENDOR


def kernel_basis(accelerator: str, measured: bool, anchors: Mapping[str, Any] | None = None) -> str:
    """What an answer's step times rest on, in words: the accelerator's own tables, or the generic curve and its test.

    ``accelerator``: a registry id; ``measured``: whether its tables cover the weights' precision; ``anchors``: the
    tables' :attr:`~calculator.kernels.KernelTables.anchors`, where the curve is anchored to the accelerator's GEMMs.
    """
    if measured:
        return "measured kernel tables of this accelerator"
    if anchors:
        return _anchored_basis(accelerator, dict(anchors))
    recorded = _recorded()
    pooled = recorded["pooled_iterations"]
    low, high = (math.exp(x) for x in generic_band(True))
    text = (
        f"the generic efficiency curve at this accelerator's registry peaks (a median over {len(recorded['per_gpu'])} "
        f"measured GPUs): left out one at a time, each GPU's decode and prefill iterations came out within "
        f"{100 * (math.exp(pooled['median_abs']) - 1):.0f} % (median), 80 % of them between {low:.2f}x and {high:.2f}x "
        "of its own tables, and the interval is widened by that"
    )
    from .registry import load_registry

    device = load_registry().accelerators.get(accelerator)
    vendor = device.vendor if device is not None else "this accelerator's vendor"
    if not vendor_tested(accelerator):
        worst = (math.exp(x) for x in generic_band(False))
        text += (
            f"; every measured GPU is NVIDIA's: how the curve carries to {vendor}'s kernels was not tested, so the "
            "interval takes the widest band of any left-out GPU ({:.2f}x-{:.2f}x), and the answer may still be "
            "optimistic".format(*worst)
        )
    return text


def _anchored_basis(accelerator: str, anchors: dict[str, Any]) -> str:
    """:func:`kernel_basis` for an accelerator whose generic curve is anchored to its own GEMM measurements."""
    from .registry import load_registry

    first = next(iter(anchors.values()))
    own = {a.source_dtype: a for a in anchors.values()}  # the dtypes measured on it
    scales = "; ".join(
        f"{d.upper()}, {a.rows} rows: compute-bound GEMMs at 1/{a.compute:.2f} and memory-bound ones at "
        f"1/{a.bandwidth:.2f} of the curve's rate; anchored, the curve is within "
        f"{100 * (math.exp(a.median_abs) - 1):.0f} % of them (median; "
        f"{100 * (math.exp(a.generic_median_abs) - 1):.0f} % before)"
        for d, a in sorted(own.items())
    )
    stand_ins = ", ".join(
        f"{d.upper()} by {a.source_dtype.upper()}'s" for d, a in sorted(anchors.items()) if d != a.source_dtype
    )
    tested = _recorded()["anchored"]["pooled_iterations"]
    worst = (math.exp(x) for x in generic_band(False))
    device = load_registry().accelerators.get(accelerator)
    vendor = device.vendor if device is not None else "this accelerator's vendor"
    text = (
        f"the generic efficiency curve at this accelerator's registry peaks, anchored to its own GEMM measurements "
        f"(AMD's aiter GEMM tuner, {first.system.replace('_cu', ' with ')} compute units): {scales}"
    )
    if stand_ins:
        text += f" ({stand_ins} scales, not measured in it)"
    text += (
        "; prefill attention follows the BF16 GEMMs' compute scale and decode attention the plain curve, neither "
        "measured. Tested on the measured GPUs, each left out and the others' curve anchored to its GEMMs, their "
        f"iterations came within {100 * (math.exp(tested['median_abs']) - 1):.0f} % (median), 80 % between "
        f"{math.exp(tested['p10']):.2f}x and {math.exp(tested['p90']):.2f}x of their own tables; every one of them is "
        f"NVIDIA's, so how this carries to {vendor}'s attention and communication kernels was not tested and "
        "the interval takes the widest band of any left-out GPU on the plain curve ({:.2f}x-{:.2f}x)".format(*worst)
    )
    return text
