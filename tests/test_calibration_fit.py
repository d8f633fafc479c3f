"""The published engine costs are what a refit of the H100 benchmarks gives.

The fit's two stages are checked in two files (each takes about a minute, and the suite distributes
whole files over its workers): here the behaviour shared by all engines and the harness overheads.
"""

import pytest

from calculator.calibration import FITTED, _fit, _get, load_benchmarks
from calculator.performance import ENGINES


def test_the_shared_stage_of_the_fit_is_reproducible():
    # Refitting from the fixed starting point reproduces the engine-agnostic profile's costs and the
    # harness client overheads of benchmark_harness.csv.
    rows = load_benchmarks()
    fit = _fit(rows, pooled_only=True)
    for name, _, _, unit, _ in FITTED:
        assert _get(fit.pooled, name, unit) == pytest.approx(_get(ENGINES[None], name, unit), rel=0.01, abs=0.002), name
    recorded = rows[rows.fit_client_overhead].groupby("harness").client_overhead.first().to_dict()
    assert fit.client_overheads == pytest.approx(recorded, abs=1e-4)
