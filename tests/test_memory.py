"""Weights and KV bytes per token (section 10.7), pinned at the chapter's printed values."""

import pytest

from calculator import Q_
from calculator.memory import kv_bytes_per_token, weight_bytes


def test_eq5_gqa_reference_model_327680_bytes_per_token():
    # Napkin Math 10.5 (seed L790): 2 x 80 x 8 x 128 x 2 B = 327,680 B per token.
    assert kv_bytes_per_token(80, 8, 128, Q_(2, "B")).m_as("B/token") == 327_680


def test_eq5_mha_baseline_2_5_mb_per_token():
    # Seed L875 / answer L2688: the 64-head MHA baseline caches 2,621,440 B per token.
    assert kv_bytes_per_token(80, 64, 128, Q_(2, "B")).m_as("B/token") == 2_621_440


def test_weight_bytes_section_10_2():
    # Seed L71: 70B at FP16 = 140 GB; L86: 13B = 26 GB; Napkin Math 10.7 (L934): 70B at INT4 = 35 GB.
    assert weight_bytes(70e9, 16).m_as("GB") == pytest.approx(140)
    assert weight_bytes(13e9, 16).m_as("GB") == pytest.approx(26)
    assert weight_bytes(70e9, 4).m_as("GB") == pytest.approx(35)
