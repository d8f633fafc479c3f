"""Speed of the fleet sizer: full size_fleet searches over about 10**5 candidates.

Run from the repository root: ``python benchmarks/bench_fleet.py`` (``--exhaustive``: every candidate
evaluated, as the sizer did before its search bounded them). Results go in ``docs/benchmarks.md``.
``tests/test_search_bounds.py`` checks that the bounded search gives the exhaustive plan on these grids.
"""

import dataclasses
import sys
import time

sys.path.insert(0, ".")

from calculator.fleet import Costs, SearchSpace, Targets, Workload, search, size_fleet
from calculator.units import Q_

ACCELERATORS = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200-sxm", "gb200", "l40s", "mi300x", "h100-pcie"]
BATCHES = tuple(range(1, 1025))

#: name -> (model, workload, targets, space, keyword arguments of size_fleet)
CASES = {
    # 8 accelerators x 3 precisions x 4 TP x 1,024 batch caps
    "dense": (
        "llama-3.1-70b",
        Workload(Q_(20, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace(ACCELERATORS, ["bf16", "fp8", "int4"], batches=BATCHES),
        {"costs": Costs(Q_(4, "USD/hour"))},
    ),
    # a mixture of experts in its three layouts: 4 accelerators x 2 precisions x 4 TP x 1,024 caps x 3
    "moe": (
        "qwen3-235b-a22b",
        Workload(Q_(20, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace(
            ["h100-sxm", "h200-sxm", "b200-sxm", "mi300x"],
            ["fp8", "int4"],
            batches=BATCHES,
            moe_layouts=("tensor", "expert", "attention-dp"),
        ),
        {"costs": Costs(Q_(4, "USD/hour"))},
    ),
}


def run(case="dense"):
    model, workload, targets, space, kwargs = CASES[case]
    return size_fleet(model, workload, targets, space, **kwargs)


@dataclasses.dataclass(frozen=True)
class _Exhaustive(search._Search):
    exhaustive: bool = True


def main():
    if "--exhaustive" in sys.argv:
        search._Search = _Exhaustive
    for case in CASES:
        start = time.perf_counter()
        plan = run(case)
        first = time.perf_counter() - start
        times = []
        for _ in range(5):
            start = time.perf_counter()
            run(case)
            times.append(time.perf_counter() - start)
        bounded = sum(r.code == "bound" for r in plan.rejections)
        print(
            f"{case}: size_fleet over {plan.candidates:,} candidates: first call {first * 1e3:.0f} ms (imports and "
            f"registry load included), then best {min(times) * 1e3:.0f} ms, median {sorted(times)[2] * 1e3:.0f} ms; "
            f"{bounded} of {len(plan.rejections) + 1} rows left unevaluated by the bounds"
        )
        print(f"  plan: {plan.gpus} x {plan.accelerator} ({plan.precision}, TP {plan.layout.stage_gpus}, "
              f"EP {plan.layout.expert_parallel}, batch {plan.batch})")  # fmt: skip


if __name__ == "__main__":
    main()
