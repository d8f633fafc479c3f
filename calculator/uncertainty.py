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
  registry peaks) further multiplies the log-width by :data:`GENERIC_KERNEL_WIDENING`.

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
from collections.abc import Sequence
from typing import Any

from ._paths import CALIBRATION_DIR

__all__ = ["GENERIC_KERNEL_WIDENING", "INTERVALS_FILE", "prediction_interval"]

INTERVALS_FILE = CALIBRATION_DIR / "prediction_intervals.json"

#: Log-width multiplier where kernels are priced by the generic curve instead of measurements.
GENERIC_KERNEL_WIDENING = 1.5

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
    engine: str, accelerator: str, measured_kernels: bool, own: Any = None
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
    """
    table = _table()
    if own is not None:
        spread = 0.0 if accelerator in own.accelerators else table["cross_gpu_spread"]
        widen = 1.0 if measured_kernels else GENERIC_KERNEL_WIDENING
        return {
            metric: (
                math.exp((min(math.log(getattr(own, metric)[0]), 0.0) - spread) * widen),
                math.exp((max(math.log(getattr(own, metric)[1]), 0.0) + spread) * widen),
            )
            for metric in ("ttft", "tpot")
        }
    intervals = table["intervals"]
    row = intervals.get(engine if isinstance(engine, str) else "generic", intervals["generic"])
    spread = 0.0 if accelerator in table["calibrated_accelerators"] else table["cross_gpu_spread"]
    out = {}
    for metric in ("ttft", "tpot"):
        low, high = (math.log(v) for v in row[metric])
        extra = math.hypot(spread, row.get(f"{metric}_version_widening", 0.0))  # independent terms
        low, high = min(low, 0.0) - extra, max(high, 0.0) + extra
        if not measured_kernels:
            low, high = low * GENERIC_KERNEL_WIDENING, high * GENERIC_KERNEL_WIDENING
        out[metric] = (math.exp(low), math.exp(high))
    return out
