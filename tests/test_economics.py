"""Serving economics (sections 10.1-10.5): worked numbers pinned at the precision the chapter prints."""

import numpy as np
import pytest

from calculator import Q_, InputError, UnitsError
from calculator.economics import (
    SERVING_HIERARCHY,
    break_even_volume,
    cost_per_million_tokens,
    crossover_time,
    cumulative_cost_curve,
    lifetime_cost,
    piecewise_lifetime_cost,
    request_volume,
    serving_cost,
    serving_cost_rate,
    serving_hierarchy_level,
    serving_training_ratio,
    training_cost,
    unit_cost_at_volume,
    unit_cost_savings,
    user_request_rate,
)
from calculator.regions import cost_per_completed_request

DAY = Q_(1, "day")


def test_napkin_math_10_1_first_year_of_a_70b_chat_service():
    # Napkin Math 10.1 (§10.4): $2M training, 1M DAU x 50 requests/day, $0.001/request, 365 days.
    training = Q_(2_000_000, "USD")
    rate = Q_(1_000_000 * 50, "request/day")
    total = lifetime_cost(training, Q_(0.001, "USD/request"), 365 * DAY, rate)
    serving = total - training
    assert serving.m_as("USD") == pytest.approx(18_250_000)  # book prints "$18,250,000"
    assert round(serving.m_as("USD") / training.m_as("USD"), 1) == 9.1  # book prints "9.1x"
    assert round(0.10 * serving.m_as("USD") / 1e6, 1) == 1.8  # book prints "saves about $1.8M"


def test_dlrm_lifetime_serving_is_788_times_training():
    # §10.4: training = 1,000 GPU-hours x $2 plus 3x engineering = $8,000; 10,000 QPS for 730 days at
    # $10 per million queries -> "$6,307,200 to serve", "788.4x".
    training = Q_(1000 * 2 * (1 + 3), "USD")
    total = lifetime_cost(training, Q_(10 / 1e6, "USD/query"), 730 * DAY, Q_(10_000, "query/s"))
    serving = (total - training).m_as("USD")
    assert serving == pytest.approx(6_307_200)
    assert round(serving / training.m_as("USD"), 1) == 788.4


def test_self_check_10_4_q1_ratio_126():
    # Self-check 10.4 Q1 (§10.4, answer §10.18): $50,000 training -> "approximately 126.1 times".
    training = Q_(50_000, "USD")
    total = lifetime_cost(training, Q_(10 / 1e6, "USD/query"), 730 * DAY, Q_(10_000, "query/s"))
    assert round(((total - training) / training).m_as(""), 1) == 126.1


def test_lifetime_cost_solves_for_the_crossover_duration():
    # Serving equals training when c_q * T * lambda = C_train: for Napkin Math 10.1, 40 days ("roughly six
    # weeks", Figure 3 caption, §10.4).
    duration = lifetime_cost.solve_for(
        "duration",
        lifetime_cost=Q_(4_000_000, "USD"),
        training_cost=Q_(2_000_000, "USD"),
        cost_per_query=Q_(0.001, "USD/request"),
        arrival_rate=Q_(50_000_000, "request/day"),
    )
    assert duration.m_as("day") == pytest.approx(40)
    assert round(duration.m_as("week")) == 6


# --------------------------------------------------------------------------------------------
# Eq. 2 decomposed, ratios, savings and the curves of Figures 2 and 3


YEAR = 365 * DAY
NAPKIN_RATE = user_request_rate(1e6, Q_(50, "request/day"), 1)


def test_napkin_math_10_1_annual_volume_is_18_25_billion():
    # Napkin Math 10.1 (§10.3.2): "10^6 users x 50 reqs x 365 days ~ 18.25B requests/year".
    assert request_volume(NAPKIN_RATE, YEAR).m_as("request") == pytest.approx(18.25e9)


def test_napkin_math_10_1_annual_serving_cost_ratio_and_savings():
    # §10.3.2: "18.25B requests x $0.001/request = $18,250,000"; "Serving costs 9.1x more than
    # training"; "A 10 percent reduction ... saves about $1.8M". Catalog A-05: 9.125 is "9.1x as much".
    annual = serving_cost(Q_(0.001, "USD/request"), YEAR, NAPKIN_RATE)
    assert annual.m_as("USD") == pytest.approx(18_250_000)
    ratio = serving_training_ratio(Q_(2e6, "USD"), Q_(0.001, "USD/request"), YEAR, NAPKIN_RATE)
    assert ratio == pytest.approx(9.1, abs=0.05)
    assert unit_cost_savings(annual, 0.10).m_as("USD") / 1e6 == pytest.approx(1.8, abs=0.05)


def test_section_10_4_margin_one_year_is_about_nine_times_training():
    # Margin note (§10.3.2): "one year of serving costs about nine times the training run".
    assert round(serving_training_ratio(Q_(2e6, "USD"), Q_(0.001, "USD/request"), YEAR, NAPKIN_RATE)) == 9


def test_self_check_10_4_q4_ten_percent_saves_about_1_8m():
    # Self-check 10.4 Q4 (§10.4, answer §10.18): "$2M to train, about $18M" of first-year serving; a
    # 10 % unit-cost cut "saves about $1.8M in the first year alone".
    assert unit_cost_savings(Q_(18.25e6, "USD"), 0.1).m_as("USD") / 1e6 == pytest.approx(1.8, abs=0.05)


def test_dlrm_training_cost_composition():
    # §10.3.2: "$8,000 ($2,000 hardware for 1,000 GPU-hours at $2/GPU-hour, plus 3x additional
    # engineering cost)".
    assert training_cost(Q_(1000, "h"), Q_(2, "USD/h"), 0).m_as("USD") == pytest.approx(2000)
    assert training_cost(Q_(1000, "h"), Q_(2, "USD/h"), 3).m_as("USD") == pytest.approx(8000)


def test_dlrm_lifetime_queries_and_ratio():
    # §10.3.2: 10,000 QPS for 730 days "accumulates $6.31 x 10^11 lifetime queries" (catalog A-12: the
    # "$" is a slip), "$6,307,200 to serve", "788.4x"; answer §10.18: "6.3072 x 10^11 queries".
    rate, days = Q_(10_000, "query/s"), 730 * DAY
    queries = request_volume(rate, days).m_as("request")
    assert round(queries / 1e11, 2) == 6.31
    assert queries == pytest.approx(6.3072e11)
    assert serving_cost(Q_(10 / 1e6, "USD/query"), days, rate).m_as("USD") == pytest.approx(6_307_200)
    ratio = serving_training_ratio(Q_(8000, "USD"), Q_(10 / 1e6, "USD/query"), days, rate)
    assert round(ratio, 1) == 788.4


def test_self_check_10_4_q2_serving_does_not_always_exceed_training():
    # Self-check 10.4 Q2 (§10.4, answer §10.18): "False" - a low-traffic or short deployment leaves
    # training as the larger cost, whatever the model size.
    ratio = serving_training_ratio(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(90, "day"), Q_(1e5, "request/day"))
    assert ratio < 1


def test_self_check_10_4_q3_idle_reserved_capacity_is_charged_in_the_unit_cost():
    # Self-check 10.4 Q3 (§10.4, answer D at §10.18): charge billed idle and reserved replicas inside
    # the unit cost, over the same served queries. 8 GPUs at $2.50/h serve 2 req/s each for 16 busy hours
    # and sit reserved and idle for 8: the unit cost is 1.5x the busy-only figure.
    price, gpus, busy, rate = Q_(2.5, "USD/hour"), 8, Q_(16, "hour"), Q_(2, "request/s")
    busy_only = cost_per_completed_request(price, gpus, busy, rate)
    billed = cost_per_completed_request(price, gpus, busy, rate, idle_time=Q_(8, "hour"))
    assert (billed / busy_only).m_as("") == pytest.approx(1.5)
    # Charged this way, Eq. 2's serving term reproduces the whole bill: 8 GPUs x 24 h x $2.50 = $480 a day.
    served = rate * gpus * busy / Q_(1, "day")
    assert serving_cost(billed, Q_(1, "day"), served).m_as("USD") == pytest.approx(480)


def test_piecewise_lifetime_cost_adds_intervals():
    # §10.3.2: a changing price is evaluated as separate intervals.
    rate = Q_(50e6, "request/day")
    total = piecewise_lifetime_cost(
        Q_(2e6, "USD"), Q_([0.002, 0.001], "USD/request"), Q_([100, 265], "day"), rate
    ).m_as("USD")
    assert total == pytest.approx(2e6 + 0.002 * 50e6 * 100 + 0.001 * 50e6 * 265)
    single = piecewise_lifetime_cost(Q_(2e6, "USD"), Q_([0.001], "USD/request"), Q_([365], "day"), rate)
    assert single.m_as("USD") == pytest.approx(
        lifetime_cost(Q_(2e6, "USD"), Q_(0.001, "USD/request"), YEAR, rate).m_as("USD")
    )


def test_table_14_cost_per_million_tokens_falls_with_the_gpu_count():
    # Table 14 (§10.9.5): FP16 on 8 x A100 $2.40, AWQ 4-bit on 4 x A100 $1.20, on 2 x A100 $0.60 per 1M
    # tokens, "at equal unit prices and unchanged useful token throughput" (§10.9.5). The table prints no price or
    # rate (catalog A15); $2.16 per GPU-hour and 2,000 useful tokens/s are assumed, which give the printed $2.40.
    price, rate = Q_(2.16, "USD/hour"), Q_(2000, "token/s")
    costs = [cost_per_million_tokens(gpus, price, rate).m_as("USD/megatoken") for gpus in (8, 4, 2)]
    assert [round(c, 2) for c in costs] == [2.40, 1.20, 0.60]
    # §10.9.5: "The illustrated 2-4x cost reduction".
    assert round(costs[0] / costs[1]) == 2 and round(costs[0] / costs[2]) == 4


def test_table_14_fewer_useful_tokens_can_erase_the_saving():
    # §10.9.5: if the smaller replica completes fewer qualifying tokens per second, cost per token falls by less
    # and can increase.
    eight = cost_per_million_tokens(8, Q_(2, "USD/hour"), Q_(2000, "token/s"))
    two_slow = cost_per_million_tokens(2, Q_(2, "USD/hour"), Q_(400, "token/s"))
    assert two_slow > eight


def test_figure_2_constructed_curves_cross_the_price_near_2e5_and_4e7():
    # §10.3.2: against $0.05 per 1,000 tokens "the optimized curve crosses near 2 x 10^5 requests per day
    # and the unbatched single-GPU curve near 4 x 10^7". The seed does not print the curves; catalog M-15
    # recovers them from the book's public figure code: a (V0/V)^p with V0 = 1e6/day, (a, p) = ($0.02/1K,
    # 0.55) and ($0.15/1K, 0.30). The crossings are asserted at the printed one significant figure.
    price, reference = Q_(0.05 / 1000, "USD/token"), Q_(1e6, "request/day")
    optimized = break_even_volume(price, Q_(0.02 / 1000, "USD/token"), reference, 0.55).m_as("request/day")
    single_gpu = break_even_volume(price, Q_(0.15 / 1000, "USD/token"), reference, 0.30).m_as("request/day")
    assert float(f"{optimized:.0e}") == 2e5
    assert float(f"{single_gpu:.0e}") == 4e7
    at = unit_cost_at_volume(Q_(optimized, "request/day"), Q_(0.02 / 1000, "USD/token"), reference, 0.55)
    assert at.m_as("USD/token") == pytest.approx(0.05 / 1000)


def test_figure_3_crossovers_six_weeks_for_the_70b_llm_and_within_days_for_recsys():
    # Figure 3 caption (§10.3.2): serving equals training "within days in the plotted recommendation
    # scenario and roughly six weeks in the 70B LLM scenario". The plotted scenarios are not printed
    # (catalog A-08); we use the chapter's own: Napkin Math 10.1 (40 days = 5.7 weeks) and the DLRM of
    # §10.3.2 ($8,000: 0.93 day; the self-check's $50,000: 5.8 days).
    llm = cumulative_cost_curve(Q_(2e6, "USD"), Q_(0.001, "USD/request"), NAPKIN_RATE, Q_(36 * 365 / 12, "day"))
    assert llm.crossover.m_as("day") == pytest.approx(40)
    assert round(llm.crossover.m_as("week")) == 6
    assert llm.crosses_within_horizon
    recsys_rate = serving_cost_rate(Q_(10 / 1e6, "USD/query"), Q_(10_000, "query/s"))
    for training in (8_000, 50_000):
        assert crossover_time(Q_(training, "USD"), recsys_rate).m_as("day") < 7
    # The curve starts at the training cost and its serving part equals training at the crossover.
    assert llm.cumulative_cost[0].m_as("USD") == pytest.approx(2e6)
    at = np.interp(40, llm.elapsed.m_as("day"), llm.serving_cost.m_as("USD"))
    assert at == pytest.approx(2e6, rel=1e-3)


def test_figure_3_low_traffic_training_stays_larger_over_the_horizon():
    # Figure 3 caption (§10.4): "In the low-traffic scenario, training expense remains larger over
    # the plotted period."
    low = cumulative_cost_curve(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(1e4, "request/day"), Q_(1095, "day"))
    assert not low.crosses_within_horizon
    assert low.serving_cost[-1] < low.training_cost


def test_user_request_rate_counts_model_calls_per_interaction():
    # Section 10.5.1: one interaction can trigger several model calls.
    rate = user_request_rate(1e6, Q_(20, "request/day"), 3)
    assert rate.m_as("request/day") == pytest.approx(60e6)


def test_table_5_serving_hierarchy_levels():
    # Table 5 (§10.5.2), Checkpoint 10.2 (§10.5.2) and self-check 10.5 Q1 (answer C, §10.18).
    assert serving_hierarchy_level("dynamic batching") == "request"
    assert serving_hierarchy_level("response caching") == "request"
    assert serving_hierarchy_level("KV-cache paging") == "replica"
    assert serving_hierarchy_level("Load balancing") == "service"
    assert serving_hierarchy_level("autoscaling") == "service"
    assert serving_hierarchy_level("multi-tenancy") == "platform"
    assert SERVING_HIERARCHY["service"][0] == "aggregate capacity"


def test_self_check_10_5_q2_hierarchy_order():
    # Self-check 10.5 Q2 (answer §10.18): Request -> Replica -> Service -> Platform.
    assert list(SERVING_HIERARCHY) == ["request", "replica", "service", "platform"]


def test_bad_economics_input_is_named():
    with pytest.raises(InputError, match="'training_cost' must be > 0"):
        serving_training_ratio(Q_(0, "USD"), Q_(0.001, "USD/request"), YEAR, NAPKIN_RATE)
    with pytest.raises(InputError, match="'reduction' must be a probability"):
        unit_cost_savings(Q_(1e6, "USD"), 1.5)
    with pytest.raises(InputError, match="'serving_cost_rate' must be > 0"):
        crossover_time(Q_(1e6, "USD"), Q_(0, "USD/day"))
    with pytest.raises(UnitsError, match="'cost_per_query'"):
        serving_cost(Q_(0.001, "USD/s"), YEAR, NAPKIN_RATE)
    # A request is a count: a cost per query may be written per request or as a plain amount.
    assert serving_cost(Q_(0.001, "USD"), YEAR, NAPKIN_RATE) == serving_cost(
        Q_(0.001, "USD/request"), YEAR, NAPKIN_RATE
    )
    with pytest.raises(InputError, match="unknown technique"):
        serving_hierarchy_level("quantum annealing")
