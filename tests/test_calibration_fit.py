"""The published engine costs are what a refit of the H100 benchmarks gives (a file of its own: the fit
takes about two minutes, and the suite distributes whole files over its workers)."""

import pytest

from calculator.calibration import load_benchmarks
from calculator.performance import ENGINES


def test_calibration_fit_is_reproducible():
    # Refitting from the fixed starting point reproduces the published constants: each engine's costs,
    # the engine-agnostic profile's, and the harness client overheads of benchmark_harness.csv.
    from calculator.calibration import FITTED, _get, calibrate

    rows = load_benchmarks()
    fit = calibrate(rows)
    for engine, profile in [*fit.profiles.items(), (None, fit.pooled)]:
        for name, _, _, unit, _ in FITTED:
            published = _get(ENGINES[engine], name, unit)
            assert _get(profile, name, unit) == pytest.approx(published, rel=0.01, abs=0.002), (engine, name)
    recorded = rows[rows.fit_client_overhead].groupby("harness").client_overhead.first().to_dict()
    assert fit.client_overheads == pytest.approx(recorded, abs=1e-4)
