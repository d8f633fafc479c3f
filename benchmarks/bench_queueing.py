"""Time the vectorized queueing functions on 1e6 points (the fleet sizer evaluates ~1e5 candidates).

Run from the repository root:

    python benchmarks/bench_queueing.py

Prints the best of five runs of each call through the public API (quantities in, unit and domain
checks, quantities out). Server counts range over 1-4096 so that the large-c path of Erlang C is
exercised, and about 5 % of the points are unstable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculator import Q_
from calculator.queueing import (
    erlang_c,
    ggc_mean_wait,
    ggc_wait_quantile,
    mmc_mean_wait,
    queue_metrics,
)

POINTS = 1_000_000


def best_of(repeats: int, call) -> float:
    """Best wall time of ``repeats`` calls, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Build 1e6 random stable and unstable queues and time each function on them."""
    rng = np.random.default_rng(0)
    servers = rng.integers(1, 4097, POINTS)
    utilization = rng.uniform(0.05, 1.05, POINTS)  # about 5 % unstable
    service = Q_(rng.uniform(0.005, 2.0, POINTS), "s")
    rate = Q_(utilization * servers / service.magnitude, "request/s")
    arrival_cv = rng.uniform(0.0, 2.0, POINTS)
    service_cv = rng.uniform(0.0, 2.0, POINTS)
    calls = {
        "erlang_c": lambda: erlang_c(rate, service, servers),
        "mmc_mean_wait": lambda: mmc_mean_wait(rate, service, servers),
        "ggc_mean_wait": lambda: ggc_mean_wait(rate, service, servers, arrival_cv, service_cv),
        "ggc_wait_quantile (p99)": lambda: ggc_wait_quantile(rate, service, servers, arrival_cv, service_cv, 0.99),
        "queue_metrics (G/G/c)": lambda: queue_metrics(rate, service, servers, arrival_cv, service_cv),
    }
    print(f"{POINTS:,} points, servers 1-4096, utilization 0.05-1.05; best of 5\n")
    print("| call | time | per point |")
    print("|---|---|---|")
    for name, call in calls.items():
        seconds = best_of(5, call)
        print(f"| `{name}` | {seconds * 1e3:.0f} ms | {seconds / POINTS * 1e9:.0f} ns |")
    values = erlang_c(rate, service, servers)
    assert not np.any(np.isnan(values)), "Erlang C produced NaN"


if __name__ == "__main__":
    main()
