"""Speed of the fluid mode: a week at 1,000 request/s over a few thousand GPUs (the target is under 10 s).

Run from the repository root: ``python benchmarks/bench_fluid_week.py``. Results go in ``docs/benchmarks.md``.

The plan is Llama-3.1-405B on H100s at 1,000 request/s (2,000 prompt and 500 output tokens, TTFT 2 s,
TPOT 50 ms), about 5,500 GPUs; the week is the ``weekly`` shape peaking at 1,000 request/s, with a reactive
autoscaler, a warm pool, a 5 % replica loss on Wednesday afternoon and retries. The fluid mode's steps
(5 s) and the windows' latencies are timed together, the best of ``--repeat`` runs.
"""

import argparse
import sys
import time

sys.path.insert(0, ".")

from calculator.dynamics import RetryPolicy, day_scenario, demand_shape, parse_failure, plan_autoscaler, run_day
from calculator.fleet import SearchSpace, Targets, Workload, size_fleet
from calculator.units import Q_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plan = size_fleet(
        "llama-3.1-405b",
        Workload(Q_(1000, "request/s"), 2000, 500),
        Targets(Q_(2, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"),
    )
    demand = demand_shape("weekly", Q_(1000, "request/s"))
    scaler = plan_autoscaler(plan, min_replicas=50, warm_pool=20)
    failure = parse_failure(f"replicas:{plan.replicas // 20}@2d14:00")
    scenario = day_scenario(plan, demand, autoscaler=scaler, retry=RetryPolicy(), failures=(failure,))
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = run_day(plan, scenario)
        times.append(time.perf_counter() - start)
    print(f"plan: {plan.gpus:,} GPUs ({plan.replicas} replicas of {plan.layout.gpus}), batch {plan.batch}")
    print(f"week: {len(result.windows):,} windows; {result.verdict}")
    print(f"fluid mode: best {min(times):.2f} s, runs {', '.join(f'{t:.2f}' for t in times)}")


if __name__ == "__main__":
    main()
