"""Speed of the simulator: 10 replicas, 10**5 requests (the target is under 10 s on 2 cores).

Run from the repository root: ``python benchmarks/bench_simulation.py``. Results go in ``docs/benchmarks.md``.

``python benchmarks/bench_simulation.py --against REV`` times the event loop of this tree against the one of
commit ``REV`` (its ``calculator/simulation/seed.py``, read with ``git show`` and loaded beside this tree's
modules) in the same process: one seed of each case, the two alternating ``--repeat`` times, in CPU seconds
of this process (the fastest of each counts, which keeps a busy machine's noise out of the ratio), and
checks that both give the same results bit for bit. ``REV`` defaults to the last commit before the
simulator was split into parts (``_simulate_seed`` with nested closures).
"""

import argparse
import subprocess
import sys
import time
import types

import numpy as np

sys.path.insert(0, ".")

from calculator.simulation import SimulationSetup, Traffic, simulate
from calculator.units import Q_

CASES = [
    ("llama-3.1-8b h100 fp8, vLLM, 120 req/s, 1024/256 (CV 0.5)", "llama-3.1-8b", "vllm", 120, 1024, 256),
    ("llama-3.1-70b h100 fp8 TP2, SGLang, 12 req/s, 2048/512 (CV 0.5)", "llama-3.1-70b", "sglang", 12, 2048, 512),
]
#: The last commit whose seed.py ran the simulator as one function of nested closures.
BEFORE_PARTS = "02c3b13"


def _case(model, engine, rate, inputs, outputs, requests=100_000):
    tp = 2 if "70b" in model else 1
    setup = SimulationSetup(model, "h100-sxm", "fp8", tp, engine=engine)
    traffic = Traffic(Q_(rate, "request/s"), inputs, outputs, input_cv=0.5, output_cv=0.5, requests=requests)
    return setup, traffic


def main():
    for name, model, engine, rate, inputs, outputs in CASES:
        setup, traffic = _case(model, engine, rate, inputs, outputs)
        start = time.perf_counter()
        result = simulate(setup, traffic, replicas=10, router="round_robin")
        elapsed = time.perf_counter() - start
        print(
            f"{name}: 10 replicas, 100,000 requests in {elapsed:.1f} s "
            f"(mean TTFT {result.value('ttft').m_as('ms'):.0f} ms, TPOT {result.value('tpot').m_as('ms'):.1f} ms)"
        )


def _seed_module(rev):
    """``calculator/simulation/seed.py`` as of commit ``rev``, loaded as a module of this tree's package."""
    source = subprocess.run(
        ["git", "show", f"{rev}:calculator/simulation/seed.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType(f"calculator.simulation._seed_{rev}")
    module.__package__ = "calculator.simulation"
    module.__file__ = f"{rev}:calculator/simulation/seed.py"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def _same(a, b):
    """Whether two seeds' results are equal bit for bit (arrays by dtype, shape and bytes)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and (a == b or (a != a and b != b))


def against(rev, repeat, requests):
    from calculator.simulation import seed as new
    from calculator.simulation._common import _Deadline

    old = _seed_module(rev)
    ratios = []
    for name, model, engine, rate, inputs, outputs in CASES:
        setup, traffic = _case(model, engine, rate, inputs, outputs, requests)
        times = {"old": [], "new": []}
        results = {}
        for _ in range(repeat):
            for label, module in (("old", old), ("new", new)):
                run = module._Run(setup, traffic, 10, "round_robin", 0, _Deadline(time.time() + 600, 600))
                start = time.process_time()
                results[label] = module._simulate_seed(run)
                times[label].append(time.process_time() - start)
        if not _same(results["old"], results["new"]):
            raise SystemExit(f"{name}: the results of {rev} and of this tree differ")
        ratio = min(times["new"]) / min(times["old"])
        ratios.append(ratio)
        print(
            f"{name}: one seed, 10 replicas, {requests:,} requests: {rev} {min(times['old']):.2f} s CPU, "
            f"this tree {min(times['new']):.2f} s, new/old {ratio:.3f} (fastest of {repeat}; results identical)"
        )
    print(f"geometric mean new/old {float(np.exp(np.mean(np.log(ratios)))):.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", nargs="?", const=BEFORE_PARTS, help="time against commit REV")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side with --against (default 3)")
    parser.add_argument("--requests", type=int, default=100_000, help="requests per seed with --against")
    arguments = parser.parse_args()
    if arguments.against:
        against(arguments.against, arguments.repeat, arguments.requests)
    else:
        main()
