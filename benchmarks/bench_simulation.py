"""Speed of the simulator: 10 replicas, 10**5 requests (the target is under 10 s on 2 cores).

Run from the repository root: ``python benchmarks/bench_simulation.py``. Results go in ``docs/benchmarks.md``.
"""

import sys
import time

sys.path.insert(0, ".")

from calculator.simulation import SimulationSetup, Traffic, simulate
from calculator.units import Q_

CASES = [
    ("llama-3.1-8b h100 fp8, vLLM, 120 req/s, 1024/256 (CV 0.5)", "llama-3.1-8b", "vllm", 120, 1024, 256),
    ("llama-3.1-70b h100 fp8 TP2, SGLang, 12 req/s, 2048/512 (CV 0.5)", "llama-3.1-70b", "sglang", 12, 2048, 512),
]


def main():
    for name, model, engine, rate, inputs, outputs in CASES:
        tp = 2 if "70b" in model else 1
        setup = SimulationSetup(model, "h100-sxm", "fp8", tp, engine=engine)
        traffic = Traffic(Q_(rate, "request/s"), inputs, outputs, input_cv=0.5, output_cv=0.5, requests=100_000)
        start = time.perf_counter()
        result = simulate(setup, traffic, replicas=10, router="round_robin")
        elapsed = time.perf_counter() - start
        print(
            f"{name}: 10 replicas, 100,000 requests in {elapsed:.1f} s "
            f"(mean TTFT {result.value('ttft').m_as('ms'):.0f} ms, TPOT {result.value('tpot').m_as('ms'):.1f} ms)"
        )


if __name__ == "__main__":
    main()
