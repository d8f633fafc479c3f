"""Speed of the fleet sizer: a full size_fleet search over about 10**5 candidates.

Run from the repository root: ``python benchmarks/bench_fleet.py``. Results go in ``docs/benchmarks.md``.
"""

import sys
import time

sys.path.insert(0, ".")

from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet
from calculator.units import Q_

ACCELERATORS = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200-sxm", "gb200", "l40s", "mi300x", "h100-pcie"]


def run():
    return size_fleet(
        "llama-3.1-70b",
        Workload(Q_(20, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace(ACCELERATORS, ["bf16", "fp8", "int4"], batches=tuple(range(1, 1025))),
        costs=Costs(Q_(4, "USD/hour")),
    )


def main():
    start = time.perf_counter()
    plan = run()
    first = time.perf_counter() - start
    times = []
    for _ in range(5):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(
        f"size_fleet over {plan.candidates:,} candidates: first call {first * 1e3:.0f} ms "
        f"(imports and registry load included), then best {min(times) * 1e3:.0f} ms, median "
        f"{sorted(times)[2] * 1e3:.0f} ms"
    )
    print(f"plan: {plan.gpus} x {plan.accelerator} ({plan.precision}, TP {plan.tensor_parallel}, batch {plan.batch})")


if __name__ == "__main__":
    main()
