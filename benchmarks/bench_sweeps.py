"""Time and peak memory of 10**6-point sweeps, and of writing them out.

Run from the repository root: ``python benchmarks/bench_sweeps.py``. Results go in ``docs/notebooks.md``.
Peak memory is measured with tracemalloc (numpy reports its buffers to it), above what was allocated
before the call.
"""

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")

from calculator.export import to_csv, to_xlsx
from calculator.memory import memory_fit
from calculator.sweeps import sweep
from calculator.units import Q_

KV_GRID = {
    "layers": np.arange(1, 101),
    "kv_heads": np.arange(1, 101),
    "head_dim": np.arange(1, 101) * 8,
    "bytes_per_element": Q_([2.0], "B"),
}
FIT_GRID = {
    "capacity": Q_(80, "GB"),
    "weights": Q_(np.linspace(10, 75, 100), "GB"),
    "kv_per_token": Q_(np.linspace(32, 1024, 100), "KiB/token"),
    "context": np.arange(1, 101) * 1024,
    "batch": 8,
}


def measure(label, call, repeats=3):
    call()  # warm up (imports, catalog)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    result = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    size = result.memory_usage(deep=True).sum() if hasattr(result, "memory_usage") else 0
    print(
        f"{label}: best {min(times) * 1e3:.0f} ms, median {sorted(times)[len(times) // 2] * 1e3:.0f} ms; "
        f"peak {peak / 1e6:.0f} MB traced" + (f" for a {size / 1e6:.0f} MB frame" if size else "")
    )
    return result


def main():
    frame = measure("sweep(kv_bytes_per_token), 10^6 points", lambda: sweep("memory.kv_bytes_per_token", **KV_GRID))
    assert len(frame) == 1_000_000
    fits = measure("sweep(memory_fit), 10^6 points", lambda: sweep(memory_fit, **FIT_GRID))
    assert len(fits) == 1_000_000
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sweep.csv"
        start = time.perf_counter()
        to_csv(frame, path)
        print(
            f"to_csv of the 10^6-row kv sweep: {time.perf_counter() - start:.1f} s, {path.stat().st_size / 1e6:.0f} MB"
        )
        small = sweep("memory.kv_bytes_per_token", **{**KV_GRID, "head_dim": [128]})  # 10^4 rows
        book = Path(folder) / "sweep.xlsx"
        start = time.perf_counter()
        to_xlsx(small, book)
        print(f"to_xlsx of a 10^4-row sweep: {time.perf_counter() - start:.1f} s, {book.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
