"""The published engine costs are what a refit of the H100 benchmarks gives.

The fit's two stages are checked in two files (about 20 s each; the suite distributes
whole files over its workers): here the behaviour shared by all engines and the harness overheads.
The search starts from the published constants, so the test asks that they are where the fit's cost is
least on these rows (a change of the model or of the rows that moves the optimum fails it). The fit from
the nominal start (``FIT_START``), which takes a minute here, is what ``benchmarks/fit_performance.py``
runs to publish the constants.

The engines' request overhead and the harnesses' client overheads trade along flat valleys of the fit's
cost (docs/performance-model.md): where in a valley the trust region stops depends on the floating-point
details of the installed numpy and scipy and of the root search. So the test asks what the data determine:
each harness's whole latency (the request overhead plus the parts of the harness that a campaign names),
the other costs, and the predictions on every row.
"""

import numpy as np
import pytest

from calculator.calibration import (
    FITTED,
    _fit,
    _get,
    _harness_parts,
    _predict,
    _recorded_harness,
    _vector,
    load_benchmarks,
)
from calculator.performance import ENGINES

#: Median and largest difference, as a log ratio, of the refit's and the published constants' predictions
#: (the largest on the shortest TTFTs, where 3 ms more request overhead is 3 %).
MEDIAN_AGREES, LARGEST_AGREES = 0.01, 0.05


def test_the_shared_stage_of_the_fit_is_reproducible():
    rows = load_benchmarks()
    published, recorded = ENGINES[None], _recorded_harness()
    parts = sorted({p for h in rows.harness[rows.fit_client_overhead] for p in _harness_parts(h)})
    fit = _fit(rows, pooled_only=True, begin=np.concatenate([_vector(published), [1e3 * recorded[p] for p in parts]]))
    refit = fit.pooled
    for name, _, _, unit, _ in FITTED:
        tolerance = 0.10 if name == "request_overhead" else 0.01  # the flat valley
        assert _get(refit, name, unit) == pytest.approx(_get(published, name, unit), rel=tolerance), name
    assert sorted(fit.client_overheads) == ["aic gap analysis", "trtllm 1.0.0rc3"]
    for part, value in fit.client_overheads.items():
        assert value == pytest.approx(recorded[part], rel=0.10), part
    # Every fitted campaign's whole latency: the engine's request path plus its harness parts.
    for harness in rows.harness[rows.fit_client_overhead].unique():
        ours = _get(refit, "request_overhead", "s") + sum(fit.client_overheads[p] for p in _harness_parts(harness))
        theirs = _get(published, "request_overhead", "s") + sum(recorded[p] for p in _harness_parts(harness))
        assert ours == pytest.approx(theirs, rel=0.01), harness

    # The predictions the fit's residuals use (without the group's cache run, which the fit leaves out).
    engines = sorted(rows.engine.unique())
    ours = _predict(fit.apply(rows), dict.fromkeys(engines, refit), cache_run=False)
    theirs = _predict(rows, dict.fromkeys(engines, published), cache_run=False)
    for name, a, b in zip(("TTFT", "TPOT"), ours, theirs, strict=True):
        differences = np.abs(np.log(a / b))
        assert np.median(differences) < MEDIAN_AGREES and np.max(differences) < LARGEST_AGREES, name
