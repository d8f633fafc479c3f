"""Speculative decoding (section 10.7.6): Eq. 6 and the sensitivity numbers, simulations, draft memory, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError
from calculator.memory import weight_bytes
from calculator.registry import Model
from calculator.speculative import (
    acceptance_for_speedup,
    acceptance_rate,
    best_draft_length,
    draft_memory_fit,
    emitted_tokens,
    expected_tokens_per_round,
    simulate_tokens_per_round,
    speculative_sample,
    speculative_timing,
    speedup,
)

DRAFT_COST = 1 / 20  # §10.7.6: "a draft step 20x faster than a target decode step"


def gqa(id, parameters, layers, heads, kv_heads):
    return Model(
        id=id, name=id, provenance="published", sources=[{"source": "hf", "fields": ["layers"]}],
        parameters=parameters, layers=layers, attention_heads=heads, kv_heads=kv_heads, head_dim=128, attention="gqa",
    )  # fmt: skip


TARGET_70B = gqa("chapter-70b-gqa", 70e9, 80, 64, 8)
DRAFT_7B = gqa("draft-7b", 7e9, 32, 32, 8)


# ------------------------------------------------------------------ Eq. 6 and the sensitivity calculation


@pytest.mark.parametrize(
    "acceptance, tokens, gain",
    [
        (0.9, 4.69, 3.7),  # §10.7.6: "an expected 4.69 tokens per verification round for a 3.7x speedup"
        (0.7, 2.94, 2.4),  # "2.94 tokens per round for a 2.4x speedup"
        (0.5, 1.97, 1.6),  # "1.97 tokens per round, yielding a modest speedup of 1.6x"
    ],
)
def test_speculative_sensitivity_k5_draft_20x_faster(acceptance, tokens, gain):
    # §10.7.6: K = 5, draft step 20x faster, verification = one target step. The speedup uses the unrounded
    # E[N] (4.69 / 1.25 would print 3.8: catalog ambiguity A10).
    assert round(expected_tokens_per_round(acceptance, 5), 2) == tokens
    assert round(speedup(acceptance, 5, DRAFT_COST, 1.0), 1) == gain


def test_figure_12_three_accepted_drafts_emit_four_tokens_in_one_pass():
    # §10.7.6: d1..d4 drafted, three accepted, d4 rejected and replaced: four tokens for one target pass, where
    # standard decoding needs four passes.
    assert emitted_tokens([True, True, True, False]) == 4
    assert emitted_tokens([True, True, True, True]) == 5
    assert emitted_tokens([False, True, True, True]) == 1


def test_low_acceptance_makes_speculation_slower():
    # §10.7.6: "low acceptance can make generation slower than ordinary decoding". For K = 5 and a draft 20x
    # faster, break-even is at alpha ~ 0.200 (catalog M-B17).
    assert round(acceptance_for_speedup(1.0, 5, DRAFT_COST), 3) == 0.2
    assert speedup(0.1, 5, DRAFT_COST) < 1 < speedup(0.3, 5, DRAFT_COST)


def test_verification_cost_growing_with_batch_turns_a_gain_into_a_loss():
    # §10.7.6: "verification is cheap only while decode leaves compute idle"; when the verification pass costs
    # more than one step (a loaded batch), the same configuration crosses from a gain to a loss.
    assert speedup(0.7, 5, DRAFT_COST, 1.0) > 1 > speedup(0.7, 5, DRAFT_COST, 3.0)


def test_best_draft_length_depends_on_acceptance():
    # Catalog M-B17 extra: best K is 13 at alpha = 0.9 (4.674x), 6 at 0.7, 3 at 0.5 (1.630x).
    assert best_draft_length(0.9, DRAFT_COST, 20)[0] == 13
    assert best_draft_length(0.7, DRAFT_COST, 20)[0] == 6
    k, gain = best_draft_length(np.array([0.5, 0.9]), DRAFT_COST, 20)
    assert list(k) == [3, 13] and round(gain[0], 3) == 1.630


def test_tpot_falls_but_each_gap_is_a_whole_round():
    # TPOT = round time / E[N]; a round's tokens arrive together, so a streaming user waits a whole round between
    # deliveries: longer than one plain step even while TPOT is shorter.
    timing = speculative_timing(0.9, 5, Q_(20, "ms"), DRAFT_COST)
    assert timing.round_time == Q_(25, "ms") == timing.tbt_gap
    assert timing.tpot.m_as("ms") == pytest.approx(25 / expected_tokens_per_round(0.9, 5))
    assert timing.tpot < Q_(20, "ms") < timing.tbt_gap
    assert timing.speedup == pytest.approx(speedup(0.9, 5, DRAFT_COST))


# ------------------------------------------------------------------ properties and simulation


@settings(max_examples=200, deadline=None)
@given(low=st.floats(0, 1), high=st.floats(0, 1), k=st.integers(1, 64))
def test_higher_acceptance_never_lowers_expected_tokens(low, high, k):
    low, high = min(low, high), max(low, high)
    e_low, e_high = expected_tokens_per_round(low, k), expected_tokens_per_round(high, k)
    assert e_low <= e_high * (1 + 1e-12)
    assert e_low >= 1 - 1e-12 and e_high <= k + 1 + 1e-9


def test_expected_tokens_limits():
    assert expected_tokens_per_round(0.0, 7) == 1
    assert expected_tokens_per_round(1.0, 7) == 8
    assert expected_tokens_per_round(1 - 1e-12, 7) == pytest.approx(8)
    grid = expected_tokens_per_round(np.array([0.0, 0.5, 1.0])[:, None], np.array([1, 4]))
    assert grid.shape == (3, 2) and grid[2, 1] == 5


@pytest.mark.parametrize("acceptance, k", [(0.9, 5), (0.7, 5), (0.5, 3), (0.95, 12), (0.3, 1)])
def test_monte_carlo_rounds_match_eq_6(acceptance, k):
    rounds = simulate_tokens_per_round(acceptance, k, 100_000, seed=7)
    standard_error = rounds.std() / np.sqrt(rounds.size)
    assert abs(rounds.mean() - expected_tokens_per_round(acceptance, k)) < 4 * standard_error
    assert rounds.min() >= 1 and rounds.max() <= k + 1


def test_algorithm_2_preserves_the_target_distribution_and_matches_eq_6():
    # §10.7.6: min(1, p/q) acceptance and residual resampling make the output distributed exactly as the target.
    # With context-free p and q every position is accepted with alpha = sum min(p, q), so Eq. 6 holds.
    p = np.array([0.45, 0.25, 0.15, 0.1, 0.05])
    q = np.array([0.3, 0.3, 0.2, 0.05, 0.15])
    alpha = acceptance_rate(p, q)
    assert alpha == pytest.approx(0.8)
    sample = speculative_sample(p, q, 4, 60_000, seed=3)
    frequencies = np.bincount(sample.tokens, minlength=p.size) / sample.tokens.size
    assert frequencies == pytest.approx(p, abs=0.006)
    standard_error = sample.tokens_per_round.std() / np.sqrt(sample.tokens_per_round.size)
    assert abs(sample.tokens_per_round.mean() - expected_tokens_per_round(alpha, 4)) < 4 * standard_error


@settings(max_examples=60, deadline=None)
@given(acceptance=st.floats(0.01, 0.99), k=st.integers(1, 16), cost=st.floats(0, 0.3))
def test_acceptance_for_speedup_inverts_speedup(acceptance, k, cost):
    target = speedup(acceptance, k, cost)
    found = acceptance_for_speedup(target, k, cost)
    assert speedup(found, k, cost) == pytest.approx(target, rel=1e-9)


# ------------------------------------------------------------------ draft-model memory


def test_a_7b_draft_adds_14_gb_of_fp16_weights():
    # §10.7.6: "Pairing a 7B draft model with a 70B target adds roughly 14 GB of FP16 weights per replica plus
    # per-request draft cache."
    assert round(weight_bytes(7e9, 16).m_as("GB")) == 14
    fit = draft_memory_fit(TARGET_70B, DRAFT_7B, Q_(80, "GB"), 4096, tensor_parallel=8)
    assert round((fit.draft_weights * 8).m_as("GB")) == 14
    assert fit.draft_kv_per_request.m_as("B") == 4096 * 2 * 32 * 8 * 128 * 2 / 8


def test_colocated_draft_lowers_max_concurrency():
    # §10.7.6 and answer §10.18: draft weights and draft KV come out of the target's admission budget.
    fit = draft_memory_fit(TARGET_70B, DRAFT_7B, Q_(80, "GB"), 4096, tensor_parallel=8)
    assert fit.with_draft.max_batch < fit.without_draft.max_batch
    assert fit.batch_loss == fit.without_draft.max_batch - fit.with_draft.max_batch
    # a full draft copy on every device costs more than a sharded one
    replicated = draft_memory_fit(TARGET_70B, DRAFT_7B, Q_(80, "GB"), 4096, tensor_parallel=8, draft_tensor_parallel=1)
    assert replicated.with_draft.max_batch < fit.with_draft.max_batch
    expected = int((80e9 - 17.5e9 - 14e9) // (4096 * (40_960 + 131_072)))
    assert replicated.with_draft.max_batch == expected


@settings(max_examples=40, deadline=None)
@given(capacity=st.floats(20, 200), extra=st.floats(0, 100), context=st.integers(1, 65_536))
def test_more_memory_never_lowers_the_batch_with_a_draft(capacity, extra, context):
    small = draft_memory_fit(TARGET_70B, DRAFT_7B, Q_(capacity, "GB"), context, tensor_parallel=8)
    large = draft_memory_fit(TARGET_70B, DRAFT_7B, Q_(capacity + extra, "GB"), context, tensor_parallel=8)
    assert 0 <= small.with_draft.max_batch <= large.with_draft.max_batch
    assert small.with_draft.max_batch <= small.without_draft.max_batch


def test_draft_memory_with_registry_models():
    # A Llama 3.1 8B draft for the Llama 3.1 70B target on H100s (registered bytes), both sharded over 8 GPUs.
    fit = draft_memory_fit("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 8192, tensor_parallel=8)
    assert fit.draft_weights.m_as("GB") == pytest.approx(8.030261248 * 2 / 8)
    assert 0 < fit.with_draft.max_batch < fit.without_draft.max_batch


# ------------------------------------------------------------------ bad input


def test_bad_input_is_a_clear_error():
    with pytest.raises(InputError, match=r"argument 'acceptance' must be a probability in \[0, 1\], got 1.2"):
        expected_tokens_per_round(1.2, 5)
    with pytest.raises(InputError, match="argument 'acceptance' must be a probability"):
        speedup(-0.1, 5, DRAFT_COST)
    with pytest.raises(InputError, match="argument 'draft_length' must be an integer >= 1"):
        expected_tokens_per_round(0.5, 0)
    with pytest.raises(InputError, match="contains NaN"):
        expected_tokens_per_round(np.nan, 5)
    with pytest.raises(InputError, match="out of reach"):
        acceptance_for_speedup(6.0, 5, DRAFT_COST)
    with pytest.raises(InputError, match="must sum to 1"):
        acceptance_rate([0.5, 0.4], [0.5, 0.5])
    with pytest.raises(InputError, match="draft_tensor_parallel must be 1 or tensor_parallel"):
        draft_memory_fit(TARGET_70B, DRAFT_7B, Q_(80, "GB"), 4096, tensor_parallel=8, draft_tensor_parallel=2)
    with pytest.raises(InputError, match="argument 'acceptance' must be a probability"):
        simulate_tokens_per_round(1.5, 5, 10)
