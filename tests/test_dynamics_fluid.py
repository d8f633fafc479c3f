"""The fluid mode against the closed forms: steady state, scaling lag, warm pool, retries, failover, Figure 21.

The plan here is made by hand so that every expected value can be worked out beside it: a replica
completes 10 request/s with its batch cap of 8 full, and at the planned 7 request/s (utilization 0.7)
runs 3.5 sequences with a mean TTFT of 300 ms and a TPOT of 20 ms. By Little's law a request stays
3.5 / 7 = 0.5 s in the batch at the planned load and 8 / 10 = 0.8 s at the cap.
"""

import dataclasses
import math

import numpy as np
import pytest

from calculator import Q_
from calculator.autoscaling import predictive_schedule, scaling_response_time
from calculator.dynamics import (
    Admission,
    Autoscaler,
    ColdStart,
    DemandCurve,
    Failure,
    Region,
    RetryPolicy,
    Scenario,
    demand_shape,
)
from calculator.dynamics.fluid import run_fluid
from calculator.errors import InputError
from calculator.fleet.plan import FleetPlan, Layout, PlanCost, PlanService
from calculator.regions import failover_headroom, symmetric_failover_utilization
from calculator.routing.resilience import retry_amplification, retry_equilibrium
from calculator.serving import Targets, Workload

MU, SLOTS, UTILIZATION, RUNNING, TTFT, TPOT = 10.0, 8, 0.7, 3.5, 0.3, 0.020
PRICE = 2.0  # USD per GPU-hour


def toy_plan(replicas=10, gpus_per_replica=1, tpot_target=0.040):
    gpus = replicas * gpus_per_replica
    service = PlanService(
        ttft=Q_(TTFT, "s"),
        tpot=Q_(TPOT, "s"),
        tbt_max=Q_(TPOT, "s"),
        ttft_interval=(Q_(TTFT, "s"), Q_(TTFT, "s")),
        tpot_interval=(Q_(TPOT, "s"), Q_(TPOT, "s")),
        replica_throughput=Q_(MU, "request/s"),
        running_batch=RUNNING,
        utilization=UTILIZATION,
    )
    per_hour = Q_(PRICE * gpus, "USD/hour")
    return FleetPlan(
        True,
        "hand-made",
        model="llama-3.1-8b",
        precision="fp8",
        batch=SLOTS,
        replicas=replicas,
        gpus=gpus,
        layout=Layout(tensor_parallel=gpus_per_replica),
        service=service,
        cost=PlanCost(per_hour, per_hour * 730.5, Q_(1, "USD"), Q_(1, "USD")),
        targets=Targets(ttft=Q_(1, "s"), tpot=Q_(tpot_target, "s"), max_utilization=0.8),
    )


def flat(rate, hours=1.0):
    return demand_shape("flat", Q_(rate, "request/s"), duration=Q_(hours, "hour"))


def fixed(replicas):
    return Autoscaler(kind="fixed", min_replicas=replicas, max_replicas=replicas)


def erlang_c(servers, load):
    """Erlang C from its textbook sum (independent of calculator.queueing's log-space form)."""
    terms = [load**k / math.factorial(k) for k in range(servers + 1)]
    blocking = terms[-1] / sum(terms)
    return servers * blocking / (servers - load * (1 - blocking))


# --------------------------------------------------------------------------------------------
# Steady state


@pytest.mark.parametrize("rate", [70.0, 90.0])
def test_steady_state_matches_the_mmc_closed_forms(rate):
    plan = toy_plan(replicas=10)
    result = run_fluid(plan, Scenario(flat(rate), autoscaler=fixed(10)))
    # Time in the batch is linear between (3.5, 0.5 s) and (8, 0.8 s): T(b) = 0.8/3 + b/15.
    t0, k = 0.5 - 3.5 / 15, 1 / 15
    per_replica = rate / 10
    batch = per_replica * t0 / (1 - per_replica * k)  # Little's law, b = lambda T(b): 3.5 at 7/s, 6 at 9/s
    held = t0 + k * batch
    # The plan's 300 ms mean TTFT less the M/M/8 mean slot wait at the planned load is what does not queue.
    c_plan = erlang_c(SLOTS, 3.5)
    base = TTFT - c_plan * 0.5 / (SLOTS - 3.5)
    c_now = erlang_c(SLOTS, batch)
    decay = (SLOTS - batch) / held
    meets = 1 - c_now * math.exp(-decay * (1.0 - base))  # P(TTFT <= 1 s); TPOT is below 40 ms
    p99 = base + max(math.log(c_now / 0.01) / decay, 0.0)
    rows = result.windows
    assert rows["queue"].max() == pytest.approx(0.0, abs=1e-9)
    assert rows["served"].to_numpy() == pytest.approx(rate * 300)
    assert rows["attainment"].to_numpy() == pytest.approx(meets, rel=1e-9)
    assert rows["ttft_p50_s"].to_numpy() == pytest.approx(base, rel=1e-6)
    assert rows["ttft_p99_s"].to_numpy() == pytest.approx(p99, rel=1e-6)
    assert rows["tpot_p50_s"].to_numpy() == pytest.approx(TPOT * held / 0.5, rel=1e-9)
    assert result.gpu_hours.m_as("hour") == pytest.approx(10.0)  # ten replicas of one GPU for an hour
    assert result.cost.m_as("USD") == pytest.approx(10.0 * PRICE)


def test_the_plans_own_load_gives_the_plans_mean_ttft():
    result = run_fluid(toy_plan(), Scenario(flat(70.0), autoscaler=fixed(10)))
    # Mean TTFT = base + E[W] = the plan's 300 ms, so P(W > 0) of the requests wait; the median does not.
    assert result.windows["ttft_p50_s"].iloc[0] < TTFT < result.windows["ttft_p99_s"].iloc[0]


def test_ttft_percentiles_add_the_prefill_queue_to_the_slot_wait():
    # The hand-made plan priced on an H100 (Llama-3.1-8B FP8, 1,024-token prompts of CV 1): each replica also
    # queues for its prefill, one server of one prompt's prefill time s (Poisson arrivals, exponential-like
    # service: the M/M/1 queue, Allen-Cunneen factor (1 + 1) / 2 = 1). TTFT = base + W1 + W2, W1 the M/M/1
    # prefill wait and W2 the M/M/8 slot wait, independent; the plan's 300 ms mean at its own load fixes base.
    from scipy.integrate import quad
    from scipy.optimize import brentq

    from calculator.performance import prefill_time
    from calculator.serving import Workload

    plan = dataclasses.replace(toy_plan(), accelerator="h100_sxm",
                               workload=Workload(Q_(70, "request/s"), 1024, 128, input_cv=1.0))  # fmt: skip
    s = prefill_time("llama-3.1-8b", "h100_sxm", "fp8", 1, 1024).m_as("s")
    t0, k = 0.5 - 3.5 / 15, 1 / 15  # T(b) as in the steady-state test above

    def waits(per_replica):
        """(rho, P(W1 > t), M/M/8's (C, decay)) at a load per replica; M/M/1: P(W1 > t) = rho e^{-(1 - rho) t / s}."""
        batch = per_replica * t0 / (1 - per_replica * k)
        return per_replica * s, erlang_c(SLOTS, batch), (SLOTS - batch) / (t0 + k * batch)

    rho, c, decay = waits(7.0)
    base = TTFT - rho * s / (1 - rho) - c / decay  # the plan's mean less the two mean waits
    rho, c, decay = waits(9.0)

    def cdf(x):  # P(W1 + W2 <= x) by numerical convolution: W1's atom, then its density against W2's law
        slot = lambda y: 1 - c * math.exp(-decay * y)  # noqa: E731
        density = lambda u: rho * (1 - rho) / s * math.exp(-(1 - rho) * u / s) * slot(x - u)  # noqa: E731
        return (1 - rho) * slot(x) + quad(density, 0, x, limit=200)[0]

    expected = [base + brentq(lambda x, q=q: cdf(x) - q, 0, 10) if cdf(0) < q else base for q in (0.5, 0.99)]
    rows = run_fluid(plan, Scenario(flat(90.0), autoscaler=fixed(10))).windows
    assert 0 < rho < 0.9 and expected[1] > expected[0]  # the prefill queue spreads TTFT
    assert rows["ttft_p50_s"].to_numpy() == pytest.approx(expected[0], rel=1e-5)
    assert rows["ttft_p99_s"].to_numpy() == pytest.approx(expected[1], rel=1e-5)
    meets = cdf(1.0 - base)  # P(TTFT <= 1 s)
    assert rows["attainment"].to_numpy() == pytest.approx(meets, rel=1e-6)


# --------------------------------------------------------------------------------------------
# Scaling lag and the warm pool


def step_demand(low, high, at, hours=1.0):
    return DemandCurve(np.array([0.0, at, at + 1.0, hours * 3600]), np.array([low, low, high, high]))


COLD = ColdStart(Q_(60, "s"), Q_(120, "s"), Q_(60, "s"), Q_(15, "s"))


def scaling_run(warm_pool):
    scaler = Autoscaler(scale_up_at=0.8, scale_down_at=0.4, interval=Q_(30, "s"), warm_pool=warm_pool, min_replicas=1)
    scenario = Scenario(step_demand(35.0, 80.0, 1810.0), autoscaler=scaler, cold_start=COLD, window=Q_(5, "s"))
    return run_fluid(toy_plan(replicas=7), scenario).windows.set_index("start_s")["ready"]


def test_replicas_lag_the_demand_step_by_the_scaling_response_time():
    ready = scaling_run(warm_pool=0)
    # The rise at 1,810 s is seen at the next decision (1,830 s: 20 s of detection); the 5 new replicas
    # (7 busy / 0.6 = 11.7 -> 12) provision, load and warm up (eq. 16).
    response = scaling_response_time(Q_(20, "s"), Q_(0, "s"), Q_(180, "s"), Q_(60, "s")).m_as("s")
    assert response == 260
    assert ready.loc[: 1810.0 + response - 5].max() == 7
    assert ready.loc[1810.0 + response] == 12


def test_a_warm_pool_shortens_the_lag_for_its_replicas():
    ready = scaling_run(warm_pool=3)
    # Three of the five come from the pool 15 s after the decision at 1,830 s; the other two cold at 2,070 s.
    assert ready.loc[1840.0] == 7
    assert ready.loc[1845.0] == 10
    assert ready.loc[2065.0] == 10 and ready.loc[2070.0] == 12


def test_the_warm_pool_is_billed_while_idle():
    plan = toy_plan(replicas=5)
    bare = run_fluid(plan, Scenario(flat(30.0), autoscaler=fixed(5)))
    pooled = run_fluid(plan, Scenario(flat(30.0), autoscaler=Autoscaler(kind="fixed", min_replicas=5, warm_pool=2)))
    assert pooled.gpu_hours.m_as("hour") - bare.gpu_hours.m_as("hour") == pytest.approx(2.0)  # 2 GPUs for 1 h


# --------------------------------------------------------------------------------------------
# Retries


def retry_run(rate, retries):
    retry = RetryPolicy(timeout=Q_(10, "s"), max_attempts=retries + 1, backoff_base=Q_(1, "s"), jitter="none")
    scenario = Scenario(flat(rate, hours=2.0), autoscaler=fixed(10), retry=retry)
    return run_fluid(toy_plan(replicas=10), scenario).windows


@pytest.mark.parametrize("rate", [80.0, 120.0, 150.0])
def test_retry_amplification_matches_the_equilibrium(rate):
    rows = retry_run(rate, retries=3).iloc[12:]  # the second hour
    amplification = rows["offered_rate"].mean() / rows["demand_rate"].mean()
    expected = retry_equilibrium(Q_(rate, "request/s"), Q_(10 * MU, "request/s"), 3)
    # Below capacity nothing times out; above it the attempts beyond 100/s time out and come back.
    assert amplification == pytest.approx(expected.amplification, rel=0.01)
    # The share of attempts that fail, put in retry_amplification, gives the same attempts per request.
    failing = rows["failed"].sum() / rows[["served", "failed"]].sum().sum()
    assert amplification == pytest.approx(retry_amplification(failing, 3), rel=0.01)
    assert rows["served"].sum() / (rows.shape[0] * 300) == pytest.approx(min(rate, 100.0), rel=1e-6)


def test_without_retries_the_overload_times_out():
    rows = retry_run(120.0, retries=0).iloc[12:]
    assert rows["retried"].sum() == 0
    assert rows["failed"].sum() / rows["shed"].add(rows["served"]).add(rows["failed"]).sum() == pytest.approx(
        20 / 120, rel=1e-3
    )


def test_a_retry_budget_caps_the_amplification():
    retry = RetryPolicy(timeout=Q_(10, "s"), max_attempts=4, jitter="none", budget=0.1)
    rows = run_fluid(toy_plan(), Scenario(flat(150.0, 2.0), autoscaler=fixed(10), retry=retry)).windows.iloc[12:]
    assert rows["offered_rate"].mean() / rows["demand_rate"].mean() == pytest.approx(1.1, rel=1e-3)


@pytest.mark.parametrize("cancel", [True, False])
def test_abandoned_attempts_the_engine_keeps_hold_the_fleet_overloaded(cancel):
    # Capacity 100/s (10 replicas of 10/s). Demand 80/s with a minute at 200/s (10:00-11:00), clients giving up
    # after 2 s and trying 4 times. During the burst the queue holds what is served within the timeout (the
    # wait limit, about 1.7 s, x 100/s) and the rest time out. Cancelled, they leave: after the burst the queue
    # and the retries drain (the spare 20/s clears them) and the last window (25:00-30:00) is back at 80/s,
    # every request served. Kept (cancel=False), the abandoned attempts stay at the head of the queue and run
    # first: once more of them wait than the replicas clear within the timeout, every new attempt times out
    # behind them, each request's 4 attempts all time out, more work joins the abandoned than the 100/s
    # serve, and nothing is served again: the metastable state.
    demand = DemandCurve(np.array([0, 600, 600.01, 660, 660.01, 1800.0]), np.array([80, 80, 200, 200, 80, 80.0]))
    retry = RetryPolicy(timeout=Q_(2, "s"), max_attempts=4, backoff_base=Q_(0.2, "s"), backoff_cap=Q_(2, "s"),
                        jitter="none", cancel=cancel)  # fmt: skip
    last = run_fluid(toy_plan(), Scenario(demand, autoscaler=fixed(10), retry=retry)).windows.iloc[-1]
    assert last.demand_rate == pytest.approx(80.0)
    if cancel:
        assert last.retried == pytest.approx(0.0, abs=1e-6) and last.served == pytest.approx(80 * 300)
        assert last.attainment > 0.99
    else:
        assert last.offered_rate == pytest.approx(4 * 80.0, rel=0.01) and last.served == 0.0
        assert last.attainment == 0.0 and math.isnan(last.ttft_p50_s)
        assert last.queue > 100 * 300  # abandoned work piling up faster than it is served


def test_with_no_replica_ready_every_arrival_is_shed_at_once():
    # One pool starting empty; the fixed autoscaler starts 2 replicas at 0 s, ready after a 60 s cold start.
    # Until then the gateway has no backend: the 10 request/s of the first minute (600) are shed at once (with
    # one attempt, not retried), none waits or times out; from 60 s on they are served.
    scenario = Scenario(flat(10.0, hours=5 / 60), autoscaler=fixed(2), regions=(Region("fleet", 1.0, 0),),
                        cold_start=ColdStart(Q_(60, "s"), Q_(0, "s"), Q_(0, "s")), retry=RetryPolicy(max_attempts=1),
                        window=Q_(1, "min"))  # fmt: skip
    rows = run_fluid(toy_plan(), scenario).windows
    assert rows.shed.tolist() == pytest.approx([600.0, 0, 0, 0, 0])
    assert rows.failed.sum() == 0 and rows.served.iloc[0] == 0
    assert rows.served.iloc[1:].tolist() == pytest.approx([600.0] * 4)


def test_admission_sheds_above_the_queue_limit_lowest_class_first():
    admission = Admission(max_queue=5, classes=(("interactive", 0.8), ("batch", 0.2)))
    retry = RetryPolicy(max_attempts=1)
    scenario = Scenario(flat(110.0), autoscaler=fixed(10), admission=admission, retry=retry)
    rows = run_fluid(toy_plan(), scenario).windows.iloc[1:]
    # 10/s beyond the 100/s served are shed once 50 wait; all from the batch class (22/s of it arrive).
    assert rows["shed"].to_numpy() == pytest.approx(10 * 300)
    assert rows["shed_batch"].to_numpy() == pytest.approx(10 * 300)
    assert rows["shed_interactive"].sum() == 0
    assert rows["queue"].to_numpy() == pytest.approx(50)


def test_a_circuit_breaker_fails_arrivals_fast_while_open():
    from calculator.routing.resilience import CircuitBreakerConfig

    breaker = CircuitBreakerConfig(failure_threshold=0.2, min_requests=10, open_interval=Q_(30, "s"))
    retry = RetryPolicy(timeout=Q_(10, "s"), max_attempts=1)

    def run(admission):
        scenario = Scenario(flat(150.0), autoscaler=fixed(10), retry=retry, admission=admission)
        return run_fluid(toy_plan(), scenario).windows[["served", "shed", "failed"]].sum()

    plain, guarded = run(Admission()), run(Admission(breaker=breaker))
    # Without it a third of the 150/s time out; with it every arrival of an open interval (30 s x 150/s) is
    # refused at once, and the timeouts that open it are a small share.
    assert plain["shed"] == 0 and plain["failed"] / (150 * 3600) == pytest.approx(1 / 3, rel=0.01)
    opened = guarded["shed"] / (150 * 30)
    assert opened == pytest.approx(round(opened)) and opened >= 10
    assert guarded["failed"] < 0.2 * plain["failed"]
    assert guarded["served"] + guarded["shed"] + guarded["failed"] == pytest.approx(150 * 3600, rel=1e-3)


# --------------------------------------------------------------------------------------------
# Regions


def three_regions():
    return tuple(Region(name, 1 / 3, 10, Q_(50, "ms")) for name in ("a", "b", "c"))


def test_failover_utilization_matches_the_closed_forms():
    failure = Failure("region", Q_(1, "hour"), target="a")
    scenario = Scenario(flat(180.0, 3.0), autoscaler=fixed(10), regions=three_regions(), failures=(failure,))
    rows = run_fluid(toy_plan(), scenario).windows
    before, after = rows.iloc[2:12], rows.iloc[14:]
    utilization = after["served"] / (after["ready"] * MU * 300)
    loads = dict.fromkeys("abc", Q_(60, "request/s"))
    headroom = failover_headroom(dict.fromkeys("abc", Q_(100, "request/s")), loads, "a")
    assert (before["served"] / (before["ready"] * MU * 300)).to_numpy() == pytest.approx(0.6)
    assert utilization.to_numpy() == pytest.approx(symmetric_failover_utilization(0.6, 3))
    assert utilization.to_numpy() == pytest.approx(headroom.utilization["b"])
    # A third of the requests now cross a 50 ms round trip: the tail grows by it.
    assert after["ttft_p99_s"].mean() > before["ttft_p99_s"].mean() + 0.04


def test_a_region_that_recovers_restarts_cold():
    failure = Failure("region", Q_(1, "hour"), Q_(30, "min"), "a")
    scenario = Scenario(
        flat(180.0, 3.0), autoscaler=fixed(10), regions=three_regions(), failures=(failure,), cold_start=COLD
    )
    ready = run_fluid(toy_plan(), scenario).windows.set_index("start_s")["ready"]
    assert ready.loc[3900.0] == 20  # a down
    # Back at 1.5 h, its ten replicas start cold (240 s): ready at 5,640 s, inside the window from 5,400 s.
    assert ready.loc[5400.0] == pytest.approx(20 + 10 * (300 - 240) / 300)


def test_spill_over_to_the_next_region():
    regions = (Region("a", 0.7, 10, Q_(30, "ms")), Region("b", 0.3, 10, Q_(30, "ms")))
    rows = run_fluid(toy_plan(), Scenario(flat(150.0), autoscaler=fixed(10), regions=regions)).windows
    # a's 105/s exceed its 100/s: 5/s spill to b; nothing waits.
    assert rows["queue"].max() == pytest.approx(0.0, abs=1e-6)
    assert rows["served"].to_numpy() == pytest.approx(150 * 300)


# --------------------------------------------------------------------------------------------
# Figure 21: predictive versus reactive on the same demand


HOURS = [0, 6, 9, 17, 20]
RATES = [5.0, 15.0, 30.0, 20.0, 10.0]  # Table 21's curve at a hundredth of its QPS


def table21_curve():
    times, rates = [0.0], [RATES[0]]
    for hour, before, after in zip(HOURS[1:], RATES[:-1], RATES[1:], strict=True):
        times += [hour * 3600.0, hour * 3600.0 + 1]
        rates += [before, after]
    return DemandCurve(np.array([*times, 86400.0]), np.array([*rates, RATES[-1]]))


def figure21(kind):
    cold = ColdStart(Q_(60, "s"), Q_(240, "s"), Q_(120, "s"))  # the example's 7-minute startup
    scaler = Autoscaler(kind=kind, interval=Q_(60, "s"), lead_time=Q_(30, "min"), cooldown=Q_(0, "s"))
    scenario = Scenario(table21_curve(), autoscaler=scaler, cold_start=cold, window=Q_(1, "min"))
    return run_fluid(toy_plan(replicas=1), scenario)


def test_predictive_follows_the_forecast_schedule():
    result = figure21("predictive")
    schedule = predictive_schedule(
        Q_(HOURS, "hour"),
        Q_(RATES, "request/s"),
        Q_(MU, "request/s"),
        Q_(7, "min"),
        Q_(30, "min"),
        end=Q_(24, "hour"),
        target_utilization=UTILIZATION,
    )
    ready = result.windows["ready"].to_numpy()
    assert np.mean(np.abs(ready - schedule.ready) < 0.5) > 0.99  # off only at the minute of a change
    assert result.gpu_hours.m_as("hour") == pytest.approx(schedule.replica_hours.m_as("hour"), rel=0.01)


def test_predictive_keeps_attainment_where_reactive_lags():
    predictive, reactive = figure21("predictive"), figure21("reactive")
    assert predictive.attainment > reactive.attainment
    assert predictive.hours_missing < reactive.hours_missing
    at_ramp = predictive.windows["start_s"].between(9 * 3600, 9 * 3600 + 300)
    # Reactive replicas arrive late: at 09:00-09:05 the predictive fleet is ready, the reactive one starting.
    assert (predictive.windows["ready"][at_ramp] > reactive.windows["ready"][at_ramp]).all()
    assert predictive.windows["meets"][at_ramp].all() and not reactive.windows["meets"][at_ramp].all()


def test_on_a_smooth_diurnal_day_reactive_replicas_arrive_late():
    from calculator.dynamics import plan_autoscaler

    cold = ColdStart(Q_(60, "s"), Q_(240, "s"), Q_(120, "s"))
    curve = demand_shape("diurnal", Q_(300, "request/s"), trough=0.1)  # 30 to 300 request/s

    def day(kind):
        scaler = plan_autoscaler(toy_plan(), kind, lead_time=Q_(30, "min"), interval=Q_(60, "s"))
        return run_fluid(toy_plan(replicas=14), Scenario(curve, autoscaler=scaler, cold_start=cold))

    predictive, reactive = day("predictive"), day("reactive")
    # Windows whose ready replicas carry less than their demand at the plan's 7 request/s a replica.
    late = {
        name: int((r.windows["demand_rate"] > r.windows["ready"] * MU * UTILIZATION * (1 + 1e-9)).sum())
        for name, r in (("predictive", predictive), ("reactive", reactive))
    }
    assert late["predictive"] == 0 and late["reactive"] > 0
    assert predictive.hours_missing.m == 0 and reactive.hours_missing.m == 0  # both within the goal all day


# --------------------------------------------------------------------------------------------
# Scale and errors


def test_a_week_at_a_thousand_requests_per_second():
    plan = toy_plan(replicas=150, gpus_per_replica=8)  # 1,000/s at 7/s a replica: 143 replicas, 1,200 GPUs
    demand = demand_shape("weekly", Q_(1000, "request/s"))
    scaler = Autoscaler(min_replicas=20, max_replicas=400)
    result = run_fluid(plan, Scenario(demand, autoscaler=scaler))
    rows = result.windows
    assert len(rows) == 7 * 24 * 12
    assert rows["demand_rate"].mean() == pytest.approx(demand.mean_rate.m_as("request/s"), rel=1e-9)
    assert rows["ready"].max() * 8 > 1000  # over a thousand GPUs at the peak
    assert not rows[["ttft_p99_s", "tpot_p99_s"]].isna().any().any()


def test_bad_arguments():
    scenario = Scenario(flat(10.0), autoscaler=fixed(2))
    with pytest.raises(InputError, match="'plan'"):
        run_fluid(FleetPlan(False, "infeasible"), scenario)
    with pytest.raises(InputError, match="'step'"):
        run_fluid(toy_plan(), scenario, step=Q_(10, "min"))
    with pytest.raises(InputError, match="'scenario'"):
        run_fluid(toy_plan(), "diurnal")


def test_the_plans_autoscaler_scales_where_the_plan_stops_promising():
    from calculator.dynamics import plan_autoscaler

    plan = toy_plan(replicas=10)
    # At the 0.8 utilization cap (8/s a replica) b = 8 t0 / (1 - 8 k) = 4.571 and TPOT 20 ms x T(b) / 0.5 s = 22.9 ms,
    # within 40 ms: the cap binds.
    reactive = plan_autoscaler(plan)
    assert (reactive.scale_up_at, reactive.scale_down_at) == pytest.approx((0.8, 0.48))
    assert (reactive.min_replicas, reactive.max_replicas) == (1, 100)
    batch = 8 * (0.8 / 3) / (1 - 8 / 15)
    assert plan_autoscaler(plan, metric="running").scale_up_at == pytest.approx(batch)
    assert plan_autoscaler(plan, metric="kv_use").scale_up_at == pytest.approx(batch / SLOTS)
    # With a 22 ms TPOT target, TPOT binds first: T(b) = 0.55 s, b = (0.55 - t0) x 15 = 4.25, at 4.25 / 0.55 request/s.
    tight = plan_autoscaler(toy_plan(tpot_target=0.022))
    assert tight.scale_up_at == pytest.approx(4.25 / 0.55 / MU, rel=1e-9)
    held = plan_autoscaler(plan, "fixed", warm_pool=2)
    assert (held.min_replicas, held.max_replicas, held.warm_pool) == (10, 10, 2)
    # It sizes for the band's midpoint, 0.64: 75 request/s on 10 replicas sits in the band; 85 request/s
    # (0.85 each) passes 0.8 and wants 8.5 busy / 0.64 = 13.3 -> 14 replicas.
    rows = run_fluid(plan, Scenario(flat(75.0, 2.0), autoscaler=reactive)).windows
    assert rows["ready"].iloc[-1] == 10
    rows = run_fluid(plan, Scenario(flat(85.0, 2.0), autoscaler=reactive)).windows
    assert rows["ready"].iloc[-1] == math.ceil(85 / MU / 0.64)


def test_a_node_failure_takes_every_replica_the_node_carries():
    # An H100 node holds 8 GPUs (the registry's node_gpus): replicas of TP 2 sit four to a node, replicas of TP 8
    # one. Losing one node at 30 min must take what losing that many replicas takes, in both modes' service.
    from calculator.dynamics.service import ReplicaService
    from calculator.simulation.day import _day_runs

    plan = dataclasses.replace(toy_plan(replicas=10, gpus_per_replica=2), accelerator="h100-sxm")
    assert ReplicaService.from_plan(plan).per_node == 4
    wide = dataclasses.replace(toy_plan(replicas=2, gpus_per_replica=8), accelerator="h100-sxm")
    assert ReplicaService.from_plan(wide).per_node == 1
    assert ReplicaService.from_plan(toy_plan()).per_node == 1  # a plan naming no accelerator: one per node
    runs = {}
    for failure in (Failure("node", Q_(30, "min"), target=1), Failure("replica", Q_(30, "min"), target=4)):
        scenario = Scenario(flat(60.0), autoscaler=fixed(10), failures=(failure,))
        runs[failure.kind] = run_fluid(plan, scenario).windows
        sized = dataclasses.replace(plan, workload=Workload(Q_(60, "request/s"), 1024, 128))  # as size_fleet's
        assert _day_runs(sized, scenario, 1)[0][0].per_node == 4  # the request mode reads the same count
    node, replica = runs["node"], runs["replica"]
    assert node.equals(replica)
    assert node["failed"].sum() > 0 and node["ready"].min() < 10
