"""Speed of the request-level day (``calculator.simulation.simulate_day``): requests simulated per second per core.

Run from the repository root: ``python benchmarks/bench_day.py``. Results go in ``docs/benchmarks.md``.

Each case sizes a plan with ``size_fleet``, then runs one seed of a stretch of a day through it in this process
(one core): the demand ramps from half the plan's rate to 1.5 times it, a predictive autoscaler (2 min ahead) with
cold starts, client timeouts and retries, and (the second case) a failure and an admission limit. It prints the
requests (first attempts) and attempts simulated per CPU second, and the same requests through
``simulate()`` at the plan's replicas for comparison (the steady-state loop). ``--minutes`` sets the stretch.
"""

import argparse
import sys
import time

import numpy as np

sys.path.insert(0, ".")

from calculator.dynamics import Admission, Autoscaler, ColdStart, DemandCurve, Failure, RetryPolicy, Scenario
from calculator.fleet import SearchSpace, Targets, Workload, size_fleet
from calculator.simulation import Traffic, plan_setup, simulate, simulate_day
from calculator.units import Q_

CASES = [
    ("llama-3.1-8b h100 fp8 vLLM, 1024/256 (CV 0.5), plan at 100 req/s", "llama-3.1-8b", 100.0, False),
    ("the same with a 2-replica failure and a queue limit", "llama-3.1-8b", 100.0, True),
]


def _scenario(plan, rate, minutes, hard):
    seconds = minutes * 60.0
    demand = DemandCurve(np.array([0.0, seconds / 2, seconds]), np.array([0.5, 1.5, 1.0]) * rate)
    scaler = Autoscaler(kind="predictive", lead_time=Q_(2, "min"), headroom=1.2, interval=Q_(15, "s"),
                        cooldown=Q_(2, "min"), min_replicas=1, max_replicas=4 * plan.replicas)  # fmt: skip
    extra = {}
    if hard:
        failure = Failure("replica", Q_(seconds / 3, "s"), target=2)
        extra = {"failures": (failure,), "admission": Admission(max_queue=64)}
    return Scenario(demand, autoscaler=scaler, cold_start=ColdStart(Q_(30, "s"), Q_(30, "s"), Q_(20, "s")),
                    retry=RetryPolicy(timeout=Q_(10, "s")), window=Q_(1, "min"), **extra)  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    for name, model, rate, hard in CASES:
        workload = Workload(Q_(rate, "request/s"), 1024, 256, input_cv=0.5, output_cv=0.5)
        plan = size_fleet(model, workload, Targets(Q_(1, "s"), Q_(50, "ms"), ttft_percentile=0.9),
                          SearchSpace("h100-sxm", "fp8"), engine="vllm")  # fmt: skip
        scenario = _scenario(plan, rate, args.minutes, hard)
        start, wall = time.process_time(), time.perf_counter()
        day = simulate_day(plan, scenario)
        cpu, wall = time.process_time() - start, time.perf_counter() - wall
        windows = day.windows
        requests = float(windows.demand_rate.sum() * 60)
        attempts = float(windows.offered_rate.sum() * 60)
        print(f"{name}: {plan.replicas} replicas planned, peak {day.peak_replicas:.0f}; {requests:,.0f} requests "
              f"({attempts:,.0f} attempts) in {cpu:.1f} s of CPU ({wall:.1f} s wall): {requests / cpu:,.0f} "
              f"requests/s per core; attainment {day.attainment:.1%}")  # fmt: skip
        traffic = Traffic.from_workload(workload, int(requests))
        start = time.process_time()
        simulate(plan_setup(plan), traffic, replicas=plan.replicas, router=plan.router)
        cpu = time.process_time() - start
        print(f"  simulate(), the same requests at the plan's {plan.replicas} replicas: {requests / cpu:,.0f} per s")


if __name__ == "__main__":
    main()
