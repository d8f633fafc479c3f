"""Serving economics: worked numbers of section 10.4, pinned at the precision the chapter prints."""

import pytest

from calculator import Q_
from calculator.economics import cost_per_million_tokens, lifetime_cost

DAY = Q_(1, "day")


def test_napkin_math_10_1_first_year_of_a_70b_chat_service():
    # Napkin Math 10.1 (seed L165-176): $2M training, 1M DAU x 50 requests/day, $0.001/request, 365 days.
    training = Q_(2_000_000, "USD")
    rate = Q_(1_000_000 * 50, "request/day")
    total = lifetime_cost(training, Q_(0.001, "USD/request"), 365 * DAY, rate)
    serving = total - training
    assert serving.m_as("USD") == pytest.approx(18_250_000)  # book prints "$18,250,000"
    assert round(serving.m_as("USD") / training.m_as("USD"), 1) == 9.1  # book prints "9.1x"
    assert round(0.10 * serving.m_as("USD") / 1e6, 1) == 1.8  # book prints "saves about $1.8M"


def test_dlrm_lifetime_serving_is_788_times_training():
    # Seed L184: training = 1,000 GPU-hours x $2 plus 3x engineering = $8,000; 10,000 QPS for 730 days at
    # $10 per million queries -> "$6,307,200 to serve", "788.4x".
    training = Q_(1000 * 2 * (1 + 3), "USD")
    total = lifetime_cost(training, Q_(10 / 1e6, "USD/query"), 730 * DAY, Q_(10_000, "query/s"))
    serving = (total - training).m_as("USD")
    assert serving == pytest.approx(6_307_200)
    assert round(serving / training.m_as("USD"), 1) == 788.4


def test_self_check_10_4_q1_ratio_126():
    # Self-check 10.4 Q1 (seed L206, answer L2572): $50,000 training -> "approximately 126.1 times".
    training = Q_(50_000, "USD")
    total = lifetime_cost(training, Q_(10 / 1e6, "USD/query"), 730 * DAY, Q_(10_000, "query/s"))
    assert round(((total - training) / training).m_as(""), 1) == 126.1


def test_lifetime_cost_solves_for_the_crossover_duration():
    # Serving equals training when c_q * T * lambda = C_train: for Napkin Math 10.1, 40 days ("roughly six
    # weeks", Figure 3 caption, seed L202).
    duration = lifetime_cost.solve_for(
        "duration",
        lifetime_cost=Q_(4_000_000, "USD"),
        training_cost=Q_(2_000_000, "USD"),
        cost_per_query=Q_(0.001, "USD/request"),
        arrival_rate=Q_(50_000_000, "request/day"),
    )
    assert duration.m_as("day") == pytest.approx(40)
    assert round(duration.m_as("week")) == 6


def test_table_14_cost_per_million_tokens_falls_with_the_gpu_count():
    # Table 14 (seed L1331-1334): FP16 on 8 x A100 $2.40, AWQ 4-bit on 4 x A100 $1.20, on 2 x A100 $0.60 per 1M
    # tokens, "at equal unit prices and unchanged useful token throughput" (L1327). The table prints no price or
    # rate (catalog A15); $2.16 per GPU-hour and 2,000 useful tokens/s are assumed, which give the printed $2.40.
    price, rate = Q_(2.16, "USD/hour"), Q_(2000, "token/s")
    costs = [cost_per_million_tokens(gpus, price, rate).m_as("USD/megatoken") for gpus in (8, 4, 2)]
    assert [round(c, 2) for c in costs] == [2.40, 1.20, 0.60]
    # Seed L1336: "The illustrated 2-4x cost reduction".
    assert round(costs[0] / costs[1]) == 2 and round(costs[0] / costs[2]) == 4


def test_table_14_fewer_useful_tokens_can_erase_the_saving():
    # Seed L1336: if the smaller replica completes fewer qualifying tokens per second, cost per token falls by less
    # and can increase.
    eight = cost_per_million_tokens(8, Q_(2, "USD/hour"), Q_(2000, "token/s"))
    two_slow = cost_per_million_tokens(2, Q_(2, "USD/hour"), Q_(400, "token/s"))
    assert two_slow > eight
