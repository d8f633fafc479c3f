"""Time and peak memory of 10**6-point sweeps and of writing them out; a fleet sweep of 400 plans; the CLI.

Run from the repository root: ``python benchmarks/bench_sweeps.py [grid] [fleet] [cli]`` (all three
by default). The grid sweeps' results go in ``docs/notebooks.md``, the fleet sweep's and the CLI's in
``docs/benchmarks.md``. Peak memory is measured with tracemalloc (numpy reports its buffers to it),
above what was allocated before the call.

* ``fleet``: ``sweep_fleet`` over 200 arrival rates x 2 accelerators (400 plans of Llama-3.1-70B at
  FP8), after one warm-up point (the registry and kernel tables load once per process), 3 runs.
* ``cli``: ``python -m calculator size ...`` as a whole process (interpreter start, imports, registry,
  kernel tables, the plan and its table), median of 3 runs.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")

from calculator.export import to_csv, to_xlsx
from calculator.memory import memory_fit
from calculator.sweeps import sweep, sweep_fleet
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


FLEET_SWEEP = ("llama-3.1-70b", ["h100-sxm", "h200-sxm"], "fp8", Q_(np.linspace(1, 200, 200), "request/s"), 2000, 300,
               Q_(2, "s"), Q_(50, "ms"))  # fmt: skip
CLI_SIZE = ["size", "llama-3.1-70b", "--rate", "20", "--input", "2000", "--output", "300", "--ttft", "2s", "--tpot",
            "50ms", "-a", "h100-sxm", "-p", "fp8"]  # fmt: skip


def fleet_sweep(repeats=3):
    """``sweep_fleet`` of 400 plans: seconds per run and milliseconds per plan."""
    model, accelerators, precision, rates, *rest = FLEET_SWEEP
    sweep_fleet(model, accelerators, precision, rates[:1], *rest)  # warm up: registry, kernel tables
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        frame = sweep_fleet(*FLEET_SWEEP)
        times.append(time.perf_counter() - start)
    assert len(frame) == 400 and frame["feasible"].all()
    best, median = min(times), statistics.median(times)
    print(
        f"sweep_fleet, {len(frame)} plans (200 rates x 2 accelerators): best {best:.2f} s, median {median:.2f} s "
        f"({median / len(frame) * 1e3:.1f} ms per plan)"
    )


def cli_size(repeats=9):
    """The whole ``servecalc size`` process (``python -m calculator``): median wall time of ``repeats`` runs.

    As a user's installation runs it: with Python's compiled bytecode written and read
    (``PYTHONDONTWRITEBYTECODE`` removed from the environment) and the calculator's cache folder filled
    by a first run that is not counted (calculator.units, calculator._files).
    """
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "calculator", *CLI_SIZE]
    subprocess.run(command, check=True, capture_output=True, env=environment)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=environment)
        times.append(time.perf_counter() - start)
    quartiles = statistics.quantiles(times, n=4)
    print(
        f"servecalc size (whole process): median {statistics.median(times):.2f} s, best {min(times):.2f} s, "
        f"quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f} s of {repeats}"
    )


def grid_sweeps():
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


def main(parts):
    chosen = parts or ["grid", "fleet", "cli"]
    unknown = sorted(set(chosen) - {"grid", "fleet", "cli"})
    if unknown:
        raise SystemExit(f"unknown part(s) {unknown}; choose from grid, fleet, cli")
    if "grid" in chosen:
        grid_sweeps()
    if "fleet" in chosen:
        fleet_sweep()
    if "cli" in chosen:
        cli_size()


if __name__ == "__main__":
    main(sys.argv[1:])
