"""Speed of the vectorized step-time model: 10**6 (TP, batch, context) points with memory fit.

Run from the repository root: ``python benchmarks/bench_performance.py``. Results go in
``docs/benchmarks.md``.
"""

import sys
import time

import numpy as np

sys.path.insert(0, ".")

from calculator.performance import ENGINES, decode_step_seconds, kv_capacity_tokens, step_arrays


def best_of(repeats, func):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    arrays = step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
    profile = ENGINES["vllm"]
    rng = np.random.default_rng(0)
    n = 1_000_000
    tp = rng.choice([1, 2, 4, 8], n).astype(float)
    batch = rng.integers(1, 513, n).astype(float)
    context = rng.integers(128, 131072, n).astype(float)

    def evaluate():
        step = decode_step_seconds(arrays, profile.efficiency, tp, batch, context)
        fits = batch * context <= kv_capacity_tokens(arrays, profile, tp)
        return step, fits

    start = time.perf_counter()
    step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
    resolve = time.perf_counter() - start
    seconds = best_of(5, evaluate)
    print(
        f"step time + memory fit, {n:,} points: {seconds * 1e3:.0f} ms (best of 5); "
        f"registry resolution per (model, accelerator, precision): {resolve * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
