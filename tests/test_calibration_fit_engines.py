"""The published engine costs are what a refit of the H100 benchmarks gives: each engine's own stage,
pulled toward the published shared behaviour (the shared stage is checked in test_calibration_fit.py)."""

import numpy as np
import pytest

from calculator.calibration import FITTED, _fit, _get, _vector, load_benchmarks
from calculator.performance import ENGINES


def test_each_engines_stage_of_the_fit_is_reproducible():
    rows = load_benchmarks()
    harness = rows[rows.fit_client_overhead].groupby("harness").client_overhead.first().sort_index()
    shared = np.concatenate([_vector(ENGINES[None]), 1e3 * harness.to_numpy()])
    fit = _fit(rows, first_stage=shared)
    assert sorted(fit.profiles) == ["sglang", "trtllm", "vllm"]
    # Started from the published shared values (four significant digits, the harness overhead to 0.1 ms)
    # rather than the first stage's own, TensorRT-LLM's request overhead comes out 1.5 % lower: it sits in
    # the flat valley it shares with the harness overhead (docs/performance-model.md). So 2 % for that one
    # cost; every other reproduces within 1 % (measured: 0.6 %).
    for engine, profile in fit.profiles.items():
        for name, _, _, unit, _ in FITTED:
            published = _get(ENGINES[engine], name, unit)
            rel = 0.02 if (engine, name) == ("trtllm", "request_overhead") else 0.01
            assert _get(profile, name, unit) == pytest.approx(published, rel=rel, abs=0.002), (engine, name)
