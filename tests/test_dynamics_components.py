"""The components of a day in production, each on its own: demand curves, policies, the result's summary."""

import math

import numpy as np
import pandas as pd
import pytest

from calculator import Q_
from calculator.dynamics import (
    Admission,
    Autoscaler,
    AutoscalerState,
    ColdStart,
    DemandCurve,
    Failure,
    Region,
    RetryPolicy,
    Scenario,
    day_result,
    demand_from_file,
    demand_shape,
    parse_clock,
    parse_failure,
)
from calculator.errors import InputError, UnitsError
from calculator.fleet.plan import FleetPlan
from calculator.registry import load_registry

PEAK = Q_(1000, "request/s")


# --------------------------------------------------------------------------------------------
# Demand


def test_curve_interpolates_and_integrates_exactly():
    curve = DemandCurve(np.array([0.0, 100.0, 200.0]), np.array([0.0, 10.0, 10.0]))
    assert curve.rate_at(50.0) == pytest.approx(5.0)
    assert curve.rate_at(Q_(150, "s")).m_as("request/s") == pytest.approx(10.0)
    assert curve.rate_at(500.0) == pytest.approx(10.0)  # flat after the last knot
    # Triangle 0..100 s holds 0.5 * 100 * 10 = 500 requests; 100..200 s holds 1,000.
    assert curve.mean_between(np.array([0.0]), np.array([200.0]))[0] == pytest.approx(1500 / 200)
    assert curve.mean_between(np.array([50.0]), np.array([100.0]))[0] == pytest.approx((5 + 10) / 2)
    assert curve.mean_rate.m_as("request/s") == pytest.approx(7.5)
    assert curve.peak_rate.m_as("request/s") == 10
    assert curve.duration.m_as("s") == 200


@pytest.mark.parametrize(
    ("times", "rates", "words"),
    [
        ([0.0], [1.0], "at least two knots"),
        ([1.0, 2.0], [1.0, 1.0], "start at 0 s"),
        ([0.0, 2.0, 1.0], [1.0, 1.0, 1.0], "increase strictly"),
        ([0.0, 1.0], [1.0, -1.0], "at least 0"),
    ],
)
def test_curve_refuses_bad_knots(times, rates, words):
    with pytest.raises(InputError, match=words):
        DemandCurve(np.array(times), np.array(rates))


def test_diurnal_mean_peak_and_trough():
    curve = demand_shape("diurnal", PEAK, trough=0.3)
    # A raised cosine between 0.3 and 1 averages their midpoint, 0.65, over whole days.
    assert curve.mean_rate.m_as("request/s") == pytest.approx(650, rel=1e-9)
    assert curve.rate_at(16 * 3600.0) == pytest.approx(1000)
    assert curve.rate_at(4 * 3600.0) == pytest.approx(300)
    assert curve.duration.m_as("hour") == 24


def test_weekly_weekends_at_seventy_percent():
    curve = demand_shape("weekly", PEAK)
    # Five weekdays at 0.65 of the peak on average, two weekend days at 0.7 x 0.65.
    assert curve.mean_rate.m_as("request/s") == pytest.approx(1000 * 0.65 * (5 + 2 * 0.7) / 7, rel=1e-9)
    assert curve.rate_at(5 * 86400 + 16 * 3600.0) == pytest.approx(700)


def test_spike_base_and_peak():
    curve = demand_shape("spike", PEAK, spike_at=Q_(9, "hour"), spike_factor=4)
    assert curve.rate_at(8 * 3600.0) == pytest.approx(250)
    assert curve.rate_at(9 * 3600.0) == pytest.approx(1000)
    # Two hours after it starts, the excess over the base has decayed by e^-1.
    assert curve.rate_at(11 * 3600.0) == pytest.approx(250 + 750 * math.exp(-1))


def test_shape_errors_name_the_argument():
    with pytest.raises(InputError, match="'shape'"):
        demand_shape("monthly", PEAK)
    with pytest.raises(InputError, match="'peak_rate'"):
        demand_shape("flat", Q_(0, "request/s"))
    with pytest.raises(UnitsError, match="'peak_rate'"):
        demand_shape("flat", 5)
    with pytest.raises(InputError, match="'spike_factor'"):
        demand_shape("spike", PEAK, spike_factor=1)


def test_demand_from_a_rate_table_and_from_a_trace(tmp_path):
    path = tmp_path / "demand.csv"
    pd.DataFrame({"time": [60, 0, 120], "rate": [20, 10, 30]}).to_csv(path, index=False)
    curve = demand_from_file(path)
    assert curve.times.tolist() == [0, 60, 120] and curve.rates.tolist() == [10, 20, 30]
    assert curve.name == "demand.csv"
    # A trace: 3 arrivals in the first minute, 1 in the second -> 0.05 and 1/60 request/s.
    trace = pd.DataFrame({"arrival_time": [0.0, 10.0, 20.0, 70.0], "input_tokens": 5, "output_tokens": 5})
    curve = demand_from_file(trace, bin_width=Q_(1, "min"))
    assert curve.rates.tolist() == pytest.approx([3 / 60, 1 / 60])
    with pytest.raises(InputError, match="'time' and 'rate'"):
        demand_from_file(pd.DataFrame({"t": [0, 1]}))
    with pytest.raises(InputError, match="'rate'"):
        demand_from_file(pd.DataFrame({"time": [0, 1], "rate": [1, "x"]}))


# --------------------------------------------------------------------------------------------
# Autoscaler


def test_reactive_scales_up_to_the_midpoint_target():
    scaler = Autoscaler(scale_up_at=0.8, scale_down_at=0.4, cooldown=Q_(5, "min"))
    # 9 busy replicas over 10 ready is 0.9 > 0.8: size for 9 / 0.6 = 15.
    assert scaler.decide(0.0, 9.0, 10, 0) == 15
    # Inside the band: keep the 10.
    assert scaler.decide(0.0, 6.0, 10, 0) == 10
    # Starting replicas count: 9 over 10 + 2 is 0.75, inside the band.
    assert scaler.decide(0.0, 9.0, 10, 2) == 12


def test_reactive_scale_down_waits_for_the_cooldown():
    # The cooldown alone (no stabilization window; with one, the first decision would count the 10 standing).
    scaler = Autoscaler(
        scale_up_at=0.8, scale_down_at=0.4, cooldown=Q_(300, "s"), min_replicas=2, stabilization=Q_(0, "s")
    )
    state = AutoscalerState().record(1000.0, wanted=12, current=10)
    assert state.last_up == 1000.0
    assert scaler.decide(1200.0, 1.2, 10, 0, state=state) == 10  # 200 s after scaling up: hold
    assert scaler.decide(1300.0, 1.2, 10, 0, state=state) == 2  # 1.2 / 0.6 = 2
    assert scaler.decide(1300.0, 0.0, 10, 0, state=state) == 2  # never below min_replicas


def _decisions(scaler, metric):
    """Decisions every 30 s over ``metric`` (the summed metric at each), the fleet resized to each answer."""
    state, current, counts = None, 10, []
    for n, observed in enumerate(metric):
        current, state = scaler.step(30.0 * n, observed, current, 0, state=state)
        counts.append(current)
    return counts


def test_scale_down_waits_for_the_highest_recommendation_over_the_stabilization_window():
    # Target 0.6 per replica. A metric of 6.0 over 10 replicas (0.6) is inside the band: the rule recommends
    # 10; a dip to 1.2 (0.12 < 0.4) recommends 1.2 / 0.6 = 2. Noise: high at 0 and 60 s, dips at 30, 90, ...
    noisy = [6.0, 1.2, 6.0] + [1.2] * 12
    bare = Autoscaler(scale_up_at=0.8, scale_down_at=0.4, cooldown=Q_(0, "s"), stabilization=Q_(0, "s"))
    assert _decisions(bare, noisy)[:2] == [10, 2]  # without the window the first dip shrinks the fleet
    # A first decision on a dip, with a window: the 10 standing count as recommended at 0 s, so the fleet holds
    # them until 300 s (decision 10), then takes the dips' 2.
    assert _decisions(Autoscaler(scale_up_at=0.8, scale_down_at=0.4, cooldown=Q_(0, "s")), [1.2] * 12) == (
        [10] * 10 + [2] * 2
    )
    held = Autoscaler(scale_up_at=0.8, scale_down_at=0.4, cooldown=Q_(0, "s"))
    assert held.stabilization == Q_(300, "s")  # Kubernetes' default
    counts = _decisions(held, noisy)
    # The last recommendation of 10 is at 60 s; it leaves the window once it is 300 s old, at 360 s
    # (decision 12): until then every dip is held at 10, then the fleet goes to the dips' 2.
    assert counts == [10] * 12 + [2] * 3
    # With the noise going on, the fleet never shrinks.
    assert set(_decisions(held, [6.0, 1.2] * 20)) == {10}


def test_scale_up_is_not_stabilized():
    held = Autoscaler(scale_up_at=0.8, scale_down_at=0.4, cooldown=Q_(0, "s"))
    # 1.2 recommends 2 (held at 10: the first decision counts the 10 standing as recommended); then 9.0 over
    # 10 (0.9 > 0.8) asks 9 / 0.6 = 15 at once.
    assert _decisions(held, [1.2, 9.0]) == [10, 15]


def test_predictive_and_fixed():
    scaler = Autoscaler(kind="predictive", headroom=1.25, max_replicas=20)
    assert scaler.decide(0.0, 0.0, 1, 0, forecast_rate=400.0, per_replica_rate=50.0) == 10  # 400 x 1.25 / 50
    assert scaler.decide(0.0, 0.0, 1, 0, forecast_rate=4000.0, per_replica_rate=50.0) == 20  # capped
    with pytest.raises(InputError, match="forecast_rate"):
        scaler.decide(0.0, 0.0, 1, 0)
    fixed = Autoscaler(kind="fixed", min_replicas=7, max_replicas=7)
    assert fixed.decide(0.0, 100.0, 3, 0) == 7


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"kind": "magic"}, "'kind'"),
        ({"metric": "cpu"}, "'metric'"),
        ({"scale_up_at": 0.3, "scale_down_at": 0.5}, "'scale_down_at'"),
        ({"interval": Q_(0, "s")}, "'interval'"),
        ({"min_replicas": 5, "max_replicas": 2}, "'max_replicas'"),
        ({"warm_pool": -1}, "'warm_pool'"),
        ({"min_replicas": 1.5}, "'min_replicas'"),
    ],
)
def test_autoscaler_errors_name_the_argument(kwargs, name):
    with pytest.raises(InputError, match=name):
        Autoscaler(**kwargs)


def test_autoscaler_wants_time_quantities():
    with pytest.raises(UnitsError, match="'cooldown'"):
        Autoscaler(cooldown=30)


# --------------------------------------------------------------------------------------------
# Cold start, retries, admission


def test_cold_start_total_and_from_plan():
    start = ColdStart(Q_(1, "min"), Q_(280, "s"), Q_(1, "min"), Q_(10, "s"))
    assert start.total.m_as("s") == 400  # Example 10.11's phases: 60 + 280 + 60
    plan = FleetPlan(True, "", model="llama-3.1-8b", precision="fp8", replicas=2, gpus=2)
    parameters = load_registry().models["llama-3.1-8b"].parameters
    derived = ColdStart.from_plan(plan, storage_bandwidth=Q_(2, "GB/s"))
    assert derived.load.m_as("s") == pytest.approx(parameters * 1.0 / 2e9)  # one byte per fp8 weight at 2 GB/s
    with pytest.raises(InputError, match="'plan'"):
        ColdStart.from_plan(FleetPlan(False, "nothing fits"))


def test_retry_backoff_and_jitter():
    retry = RetryPolicy(backoff_base=Q_(1, "s"), backoff_cap=Q_(5, "s"), jitter="none")
    assert [retry.delay(k) for k in (1, 2, 3, 4)] == [1, 2, 4, 5]
    full = RetryPolicy(backoff_base=Q_(2, "s"), jitter="full")
    draws = [full.delay(2, np.random.default_rng(seed)) for seed in range(200)]
    assert min(draws) >= 0 and max(draws) <= 4
    assert full.mean_delay(2) == 2.0
    assert RetryPolicy(backoff_base=Q_(2, "s"), jitter="equal").mean_delay(2) == 3.0
    with pytest.raises(InputError, match="'max_attempts'"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(InputError, match="'jitter'"):
        RetryPolicy(jitter="some")


def test_admission_classes():
    admission = Admission(max_queue=8, classes=(("interactive", 0.7), ("batch", 0.3)))
    assert admission.shares.tolist() == [0.7, 0.3]
    with pytest.raises(InputError, match="sum to 1"):
        Admission(classes=(("a", 0.5), ("b", 0.4)))
    with pytest.raises(InputError, match="'classes'"):
        Admission(classes=(("a",),))


# --------------------------------------------------------------------------------------------
# Failures, regions, scenario


def test_parse_failure_forms():
    region = parse_failure("region:us-east@14:00+2h")
    assert (region.kind, region.target, region.at.m_as("s"), region.end) == ("region", "us-east", 50400, 57600)
    replicas = parse_failure("replicas:4@1d09:30")
    assert (replicas.kind, replicas.target, replicas.at.m_as("s"), replicas.end) == (
        "replica",
        4,
        86400 + 9.5 * 3600,
        math.inf,
    )
    assert parse_failure("node:8@03:00+30min").duration.m_as("s") == 1800
    assert parse_clock("00:00:30").m_as("s") == 30


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("region@14:00", "KIND:TARGET"),
        ("disk:1@14:00", "kind must be one of"),
        ("replicas:x@14:00", "count of replicas"),
        ("region:eu@25:00", "HH:MM"),
        ("region:eu@14:00+soon", "duration"),
    ],
)
def test_parse_failure_errors(text, words):
    with pytest.raises(InputError, match=words):
        parse_failure(text)


def test_region_round_trips_and_scenario_checks():
    east = Region("east", 0.5, 4, {"west": Q_(70, "ms")})
    west = Region("west", 0.5, 4, Q_(70, "ms"))
    assert east.trip_to("east") == 0 and east.trip_to("west") == pytest.approx(0.07)
    assert west.trip_to("east") == pytest.approx(0.07)
    curve = demand_shape("flat", PEAK, duration=Q_(1, "hour"))
    scenario = Scenario(curve, regions=(east, west), failures=(Failure("region", Q_(10, "min"), target="east"),))
    assert scenario.seconds == 3600 and scenario.window.m_as("s") == 300
    with pytest.raises(InputError, match="region 'north'"):
        Scenario(curve, regions=(east, west), failures=(Failure("region", Q_(1, "s"), target="north"),))
    with pytest.raises(InputError, match="sum to 1"):
        Scenario(curve, regions=(east,))
    with pytest.raises(InputError, match="'autoscaler'"):
        Scenario(curve, autoscaler="reactive")


# --------------------------------------------------------------------------------------------
# Result


def test_day_result_summary():
    rows = pd.DataFrame(
        {
            "start_s": [0.0, 300.0],
            "demand_rate": [10.0, 30.0],
            "offered_rate": [10.0, 40.0],
            "ready": [2.0, 3.0],
            "starting": [0.0, 1.0],
            "queue": [0.0, 50.0],
            "ttft_p50_s": [0.2, 0.5],
            "ttft_p99_s": [0.4, 3.0],
            "tpot_p50_s": [0.02, 0.02],
            "tpot_p99_s": [0.03, 0.05],
            "served": [3000.0, 8000.0],
            "shed": [0.0, 500.0],
            "failed": [0.0, 500.0],
            "retried": [0.0, 3000.0],
            "attainment": [1.0, 0.8],
            "gpu_hours": [0.5, 1.0],
            "cost": [2.0, 4.0],
        }
    )
    result = day_result(rows, 300.0, 0.99, "fluid")
    # Arrivals 3,000 and 9,000: (3000 x 1 + 9000 x 0.8) / 12000 = 0.85.
    assert result.attainment == pytest.approx(0.85)
    assert result.windows["meets"].tolist() == [True, False]
    assert result.hours_missing.m_as("hour") == pytest.approx(300 / 3600)
    assert result.gpu_hours.m_as("hour") == 1.5 and result.cost.m_as("USD") == 6.0
    assert result.peak_replicas == 4.0
    with pytest.raises(InputError, match="'windows'"):
        day_result(rows.drop(columns="queue"), 300.0, 0.99, "fluid")


def test_the_attainment_goal_follows_the_targets():
    from types import SimpleNamespace

    from calculator.dynamics import attainment_goal
    from calculator.serving import Targets

    curve = demand_shape("flat", PEAK, duration=Q_(1, "hour"))
    mean = SimpleNamespace(targets=Targets(ttft=Q_(1, "s"), tpot=Q_(50, "ms")))
    tails = SimpleNamespace(
        targets=Targets(ttft=Q_(1, "s"), tpot=Q_(50, "ms"), ttft_percentile=0.9, tpot_percentile=0.95)
    )
    assert attainment_goal(mean, Scenario(curve)) == 0.5  # mean targets: the median request
    assert attainment_goal(tails, Scenario(curve)) == 0.95  # the strictest percentile
    assert attainment_goal(tails, Scenario(curve, goal=0.8)) == 0.8
    with pytest.raises(InputError, match="'goal'"):
        Scenario(curve, goal=0)
