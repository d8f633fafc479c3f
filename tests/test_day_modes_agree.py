"""The fluid and the request-level modes of a day agree within the tolerance of docs/production-day.md.

Four scenarios on one plan (Llama-3.1-8B FP8 under vLLM, one H100 sized for 20 request/s of 512/128 tokens,
TTFT p90 within 500 ms, TPOT within 30 ms: a replica completes about 97 request/s with its batch full and meets
the targets up to about 77; short requests, so that the request mode's utilization, read from completions,
lags the arrivals by seconds only), short days in 1-minute windows so that both modes run in a few
seconds: steady demand below saturation; a compressed diurnal day under a reactive autoscaler; a demand spike
met by a warm pool; a replica lost with clients that retry. Each is compared aggregated over its windows:

- attainment (the day's share of requests meeting the targets) within 0.03 absolute;
- the mean queueing delay (Little's law: the mean waiting requests over the day's served rate) within 50 ms
  absolute;
- the mean ready replicas within 10 %;
- the cost within 10 %.

In the failure scenario the survivor stays below its capacity, and the modes agree over every window,
the loss's included. Where they cannot agree is near saturation (docs/production-day.md, "Where the fluid mode
stops being trustworthy"): a fifth case, the spike at 93 % of one replica's capacity until the second replica
is ready, compares replicas and cost only; its attainment differs by more than the tolerance (the fluid mode
gives every request of a step the same TPOT, over the target there, where the request mode's spread leaves
most requests under it), which the test records without bounding.
"""

import math

import numpy as np
import pytest

from calculator import Q_
from calculator.dynamics import (
    Autoscaler,
    ColdStart,
    DemandCurve,
    Failure,
    RetryPolicy,
    day_scenario,
    plan_autoscaler,
    run_day,
)
from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

ATTAINMENT, DELAY, REPLICAS, COST = 0.03, 0.050, 0.10, 0.10  # docs/production-day.md, "The two modes agree"
MINUTE = Q_(1, "min")
COLD = ColdStart(Q_(30, "s"), Q_(30, "s"), Q_(30, "s"), warm_start=Q_(5, "s"))


@pytest.fixture(scope="module")
def plan():
    workload = Workload(Q_(20, "request/s"), 512, 128, input_cv=0.5, output_cv=0.5)
    return size_fleet("llama-3.1-8b", workload, Targets(Q_(500, "ms"), Q_(30, "ms"), ttft_percentile=0.9),
                      SearchSpace("h100-sxm", "fp8"), engine="vllm")  # fmt: skip


def _curve(times, rates):
    return DemandCurve(np.asarray(times, dtype=float), np.asarray(rates, dtype=float))


def _scenario(plan, case):
    if case == "steady":  # 60 request/s on the plan's replica (62 % of its capacity), 5 minutes
        return day_scenario(plan, _curve([0, 300], [60, 60]), cold_start=COLD, window=MINUTE)
    if case == "diurnal":  # a raised cosine 20 -> 120 -> 20 request/s over 15 minutes, reactive on utilization
        times = np.linspace(0, 900, 61)
        rates = 20 + 100 * (1 - np.cos(2 * math.pi * times / 900)) / 2
        scaler = plan_autoscaler(plan, "reactive", interval=Q_(15, "s"), max_replicas=8)
        return day_scenario(plan, _curve(times, rates), autoscaler=scaler, cold_start=COLD, window=MINUTE)
    if case == "saturated":  # the spike below, to 90 request/s: 93 % of one replica's capacity until the second
        scaler = plan_autoscaler(plan, "reactive", interval=Q_(15, "s"), max_replicas=6, warm_pool=2)
        curve = _curve([0, 120, 125, 240, 245, 420], [30, 30, 90, 90, 30, 30])
        return day_scenario(plan, curve, autoscaler=scaler, cold_start=COLD, window=MINUTE)
    if case == "spike":  # 30 request/s, 82 from 2:00 to 4:00 (past the replica's safe load, within its
        # capacity), 30 again; a warm pool of 2 starts the second replica in 5 s instead of the 90 s cold start
        scaler = plan_autoscaler(plan, "reactive", interval=Q_(15, "s"), max_replicas=6, warm_pool=2)
        curve = _curve([0, 120, 125, 240, 245, 420], [30, 30, 82, 82, 30, 30])
        return day_scenario(plan, curve, autoscaler=scaler, cold_start=COLD, window=MINUTE)
    # failure: 60 request/s on two replicas (fixed), one lost at 3:00 and replaced cold (90 s), the survivor at
    # 62 % of its capacity meanwhile; clients give up
    # after 5 s without a first token and try 3 times
    scaler = Autoscaler(kind="fixed", min_replicas=2, max_replicas=2)
    retry = RetryPolicy(timeout=Q_(5, "s"), max_attempts=3, backoff_base=Q_(0.5, "s"))
    return day_scenario(plan, _curve([0, 480], [60, 60]), autoscaler=scaler, cold_start=COLD, retry=retry,
                        failures=(Failure("replica", Q_(180, "s"), target=1),), window=MINUTE)  # fmt: skip


def _aggregate(result):
    """Attainment, mean queueing delay (s), mean ready replicas and cost over the day's windows."""
    w = result.windows
    first = w.demand_rate * 60
    attainment = float((w.attainment * first).sum() / first.sum())
    served_rate = w.served.sum() / (60 * len(w))
    return {
        "attainment": attainment,
        "delay": float(w.queue.mean() / served_rate),
        "ready": float(w.ready.mean()),
        "cost": float(w.cost.sum()),
    }


@pytest.mark.parametrize("case", ["steady", "diurnal", "spike", "failure", "saturated"])
def test_the_modes_agree_within_the_documented_tolerance(plan, case):
    scenario = _scenario(plan, case)
    f, r = (_aggregate(run_day(plan, scenario, mode=mode)) for mode in ("fluid", "requests"))
    assert r["ready"] == pytest.approx(f["ready"], rel=REPLICAS)
    assert r["cost"] == pytest.approx(f["cost"], rel=COST)
    if case == "saturated":  # measured: fluid 0.932, requests 0.992 (docs/production-day.md); not bounded
        assert f["attainment"] < r["attainment"]
        return
    assert r["attainment"] == pytest.approx(f["attainment"], abs=ATTAINMENT)
    assert r["delay"] == pytest.approx(f["delay"], abs=DELAY)
