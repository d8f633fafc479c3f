"""The published engine costs are what a refit of the H100 benchmarks gives.

The fit's two stages are checked in two files (10-15 s each; the suite distributes
whole files over its workers): here the behaviour shared by all engines and the harness overheads.

The engines' request overhead and the TensorRT-LLM 1.0.0rc3 harness's client overhead trade along a flat
valley of the fit's cost (docs/performance-model.md): where in the valley the trust region stops depends
on the floating-point details of the installed numpy and scipy and of the root search (measured: 52.4 ms
and 88.4 ms when the constants were fitted, 55.3 ms and 85.2 ms with numpy 2.4.6 and scipy 1.17, 56.6 ms
and 83.7 ms with those and the false-position root search; the valley's floor, scanned, near 57 ms and
83 ms, at a cost 0.05 % below the published point). So the test asks what the data determine: the sum
of the two overheads, the other costs, and the predictions on every row.
"""

import numpy as np
import pytest

from calculator.calibration import FITTED, _fit, _get, _predict, load_benchmarks
from calculator.performance import ENGINES

#: Median and largest difference, as a log ratio, of the refit's and the published constants' predictions
#: (the largest on the shortest TTFTs, where 3 ms more request overhead is 3 %).
MEDIAN_AGREES, LARGEST_AGREES = 0.01, 0.05


def test_the_shared_stage_of_the_fit_is_reproducible():
    rows = load_benchmarks()
    fit = _fit(rows, pooled_only=True)
    refit, published = fit.pooled, ENGINES[None]
    for name, _, _, unit, _ in FITTED:
        tolerance = 0.10 if name == "request_overhead" else 0.01  # the flat valley
        assert _get(refit, name, unit) == pytest.approx(_get(published, name, unit), rel=tolerance), name
    recorded = rows[rows.fit_client_overhead].groupby("harness").client_overhead.first().to_dict()
    assert sorted(fit.client_overheads) == sorted(recorded) == ["trtllm 1.0.0rc3"]
    harness = "trtllm 1.0.0rc3"
    assert fit.client_overheads[harness] == pytest.approx(recorded[harness], rel=0.10)
    total = _get(refit, "request_overhead", "s") + fit.client_overheads[harness]
    assert total == pytest.approx(_get(published, "request_overhead", "s") + recorded[harness], rel=0.01)

    engines = sorted(rows.engine.unique())
    refit_rows = rows.assign(
        client_overhead=rows.harness.map(fit.client_overheads).where(rows.fit_client_overhead, rows.client_overhead)
    )
    ours = _predict(refit_rows, dict.fromkeys(engines, refit))
    theirs = _predict(rows, dict.fromkeys(engines, published))
    for name, a, b in zip(("TTFT", "TPOT"), ours, theirs, strict=True):
        differences = np.abs(np.log(a / b))
        assert np.median(differences) < MEDIAN_AGREES and np.max(differences) < LARGEST_AGREES, name
