"""The GPU work a StepArrays keeps of the iterations it priced (calculator.performance.iteration._kernel_iteration).

A fit's evaluations and a search's steps price the same iterations again; the kept answers must be the ones a
fresh pricing gives, belong to one set of arrays only, stay unchanged by callers, and stay bounded.
"""

import dataclasses

import numpy as np
import pytest

from calculator import Q_
from calculator.performance import ENGINES, iteration_seconds, step_arrays
from calculator.performance import iteration as iteration_module

DECODE, CONTEXT = np.array([1.0, 64.0, 300.0]), np.array([512.0, 2048.0, 8192.0])


def _gpu():
    """SGLang's efficiency on the H100 without its fixed costs: the iteration is the GPU work alone."""
    return ENGINES["sglang"].efficiency_for("h100-sxm").replace(step_overhead=Q_(0, "s"), sequence_overhead=Q_(0, "s"))


def test_a_kept_iteration_is_the_fresh_pricing_and_costs_still_apply():
    a = step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
    first = iteration_seconds(a, _gpu(), 4, DECODE, CONTEXT, 256, 1, 0)
    assert len(a.priced) == 1
    again = iteration_seconds(a, _gpu(), 4, DECODE, CONTEXT, 256, 1, 0)
    assert len(a.priced) == 1  # the second call read the kept answer
    fresh = step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
    assert np.array_equal(again, first)
    assert np.array_equal(iteration_seconds(fresh, _gpu(), 4, DECODE, CONTEXT, 256, 1, 0), first)
    # the engine's costs are not part of what is kept: other costs on the same GPU work add as they should
    sync = ENGINES["sglang"].efficiency_for("h100-sxm").replace(overlap=False)
    step, per_sequence = sync.fixed_seconds
    assert iteration_seconds(a, sync, 4, DECODE, CONTEXT, 256, 1, 0) == pytest.approx(
        first + step + per_sequence * (DECODE + 1)
    )
    assert len(a.priced) == 1
    # another degree, or other counts, are other iterations
    iteration_seconds(a, _gpu(), 8, DECODE, CONTEXT, 256, 1, 0)
    iteration_seconds(a, _gpu(), 4, DECODE + 1, CONTEXT, 256, 1, 0)
    assert len(a.priced) == 3


@pytest.mark.parametrize("changed", range(6))
def test_every_count_is_part_of_what_names_a_kept_iteration(changed):
    # decode, context, tokens a sequence, prefill tokens, prompts and their earlier tokens: changing any one is
    # another iteration, priced afresh (a key without it would return the first one's time)
    a = step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
    counts = [np.array([64.0]), np.array([2048.0]), np.ones(1), np.array([512.0]), np.ones(1), np.array([256.0])]
    first = iteration_module._kernel_iteration(a, 4.0, *counts)
    counts[changed] = 2 * counts[changed]
    other = iteration_module._kernel_iteration(a, 4.0, *counts)
    fresh = iteration_module._kernel_iteration(step_arrays("llama-3.1-70b", "h100-sxm", "fp8"), 4.0, *counts)
    assert len(a.priced) == 2 and np.array_equal(other, fresh) and not np.array_equal(other, first)


def test_every_variant_of_the_arrays_prices_its_own_iterations():
    a = step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
    plain = iteration_seconds(a, _gpu(), 4, DECODE, CONTEXT)
    wider = dataclasses.replace(a, kv_bytes_per_token=4 * a.kv_bytes_per_token)  # reads four times the KV
    staged = a.with_pipeline_parallel(2)
    assert not wider.priced and not staged.priced
    assert np.all(iteration_seconds(wider, _gpu(), 4, DECODE, CONTEXT) > plain)
    assert not np.array_equal(iteration_seconds(staged, _gpu(), 4, DECODE, CONTEXT), plain)


def test_a_kept_answer_cannot_be_changed_by_its_caller():
    a = step_arrays("llama-3.1-8b", "h100-sxm", "bf16")
    flat = (np.array([8.0]), np.array([1024.0]), np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1))
    kept = iteration_module._kernel_iteration(a, 1.0, *flat)
    with pytest.raises(ValueError, match="read-only"):
        kept[0] = 0.0


def test_the_kept_iterations_are_bounded(monkeypatch):
    monkeypatch.setattr(iteration_module, "_PRICED_KEPT", 3)
    a = step_arrays("llama-3.1-8b", "h100-sxm", "bf16")
    for batch in (1.0, 2.0, 3.0, 4.0, 5.0):
        iteration_seconds(a, _gpu(), 1, batch, 1024)
        assert 1 <= len(a.priced) <= 3  # cleared when full, then the new one kept
    assert len(a.priced) == 2
    # calls of many rows (a sweep) are not kept
    iteration_seconds(a, _gpu(), 1, np.arange(1.0, 2 + iteration_module._PRICED_SIZE), 1024)
    assert len(a.priced) == 2
