"""Validate the request-level simulator; print the Markdown tables of ``docs/simulation.md``.

Run from the repository root (about two minutes):

    python benchmarks/validate_simulation.py

* queueing theory: one replica with a fixed iteration time, one-token prompts and a sequence cap of
  ``c`` is a c-server FCFS queue whose service is ``O`` iterations; its waits against the M/M/c
  closed form, Erlang C and ciw (an independent discrete-event simulator, ``tests/ciw_reference.py``);
* Little's law on step-model runs;
* closed loop against :func:`calculator.performance.predict_benchmark`.

Every simulation is seeded, so the tables are reproducible.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ciw_reference import simulate_waits

from calculator import Q_
from calculator.performance import predict_benchmark
from calculator.queueing import erlang_c, mmc_mean_wait
from calculator.simulation import SimulationSetup, Traffic, simulate

TICK = 1e-3


def queues() -> None:
    print("| Queue | c | Utilization | Mean wait, simulator (ms) | Reference (ms) | P(wait), simulator | Erlang C |")
    print("|---|---|---|---|---|---|---|")
    for kind, cv in (("M/D/c", 0.0), ("M/M/c", 1.0)):
        for servers in (1, 4, 16):
            for rho in (0.5, 0.8, 0.9):
                service = 0.1
                rate = rho * servers / service
                setup = SimulationSetup(
                    "llama-3.1-8b", "h100-sxm", "fp8", max_num_seqs=servers, step_time=Q_(TICK, "s")
                )
                traffic = Traffic(
                    Q_(rate, "request/s"), 1, 100, output_cv=cv, length_distribution="gamma", requests=20_000
                )
                result = simulate(setup, traffic, seeds=4, executor=ThreadPoolExecutor(1))
                measured = result.requests[result.requests.measured]
                waits = measured.queue_wait.to_numpy()
                if cv == 1.0:
                    reference = mmc_mean_wait(Q_(rate, "request/s"), Q_(service, "s"), servers).m_as("s")
                    label = "M/M/c closed form"
                else:
                    reference = simulate_waits(rate, service, servers, 1.0, 0.0, customers=20_000, replications=4)
                    reference = float(reference.pooled.mean())
                    label = "ciw"
                probability = float(erlang_c(Q_(rate, "request/s"), Q_(service, "s"), servers))
                print(
                    f"| {kind} | {servers} | {rho} | {waits.mean() * 1e3:.1f} | {reference * 1e3:.1f} ({label}) | "
                    f"{(waits > TICK).mean():.3f} | {probability:.3f}{' (M/M/c)' if cv == 0 else ''} |"
                )


def littles_law() -> None:
    print("\n| Run | In flight (replica iterations) | Arrival rate x time in engine | Difference |")
    print("|---|---|---|---|")
    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm")
    for rate, router, replicas in ((40, "random", 3), (100, "round_robin", 4), (30, "join_shortest_queue", 2)):
        traffic = Traffic(Q_(rate, "request/s"), 1024, 256, input_cv=0.5, output_cv=0.5, requests=8000)
        result = simulate(setup, traffic, replicas=replicas, router=router)
        print(
            f"| Llama-3.1-8B FP8, {replicas} x H100, {rate} req/s, {router} | {result.in_flight:.2f} | "
            f"{result.littles_law:.2f} | {100 * (result.in_flight / result.littles_law - 1):+.2f} % |"
        )


CLOSED = [
    ("qwen3-32b", "h100-sxm", "bf16", 4, 1024, 512, 32, "vllm"),
    ("llama-3.1-8b", "h100-sxm", "fp8", 1, 1024, 256, 64, "vllm"),
    ("llama-3.1-8b", "h100-sxm", "bf16", 1, 2048, 128, 16, "sglang"),
    ("llama-3.1-70b", "h100-sxm", "fp8", 2, 1024, 512, 128, "trtllm"),
    ("llama-3.1-8b", "h100-sxm", "fp8", 1, 4096, 512, 256, "vllm"),
    ("qwen3-32b", "h100-sxm", "bf16", 1, 1024, 1024, 8, None),
    ("llama-3.1-70b", "h100-sxm", "bf16", 2, 4000, 1000, 64, "vllm"),
]


def closed_loop() -> None:
    print(
        "\n| Benchmark | TTFT model (ms) | TTFT sim, fixed lengths | TTFT sim, CV 0.2 | TPOT model (ms) | "
        "TPOT sim | Throughput model (req/s) | Throughput sim |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model, gpu, precision, tp, inputs, outputs, clients, engine in CLOSED:
        predicted = predict_benchmark(model, gpu, precision, tp, inputs, outputs, clients, engine=engine)
        setup = SimulationSetup(model, gpu, precision, tp, engine=engine)
        base = Traffic(clients=clients, input_tokens=inputs, output_tokens=outputs, requests=10 * clients)
        fixed = simulate(setup, base)
        jittered = simulate(setup, base.replace(input_cv=0.2, output_cv=0.2))
        name = f"{model} {precision} TP{tp}, {engine or 'generic'}, {inputs}/{outputs}, C={clients}"
        if predicted.memory_limited:
            name += " (memory-limited)"
        print(
            f"| {name} | {predicted.ttft.m_as('ms'):.0f} | {fixed.value('ttft').m_as('ms'):.0f} | "
            f"{jittered.value('ttft').m_as('ms'):.0f} | {predicted.tpot.m_as('ms'):.2f} | "
            f"{fixed.value('tpot').m_as('ms'):.2f} | {predicted.throughput.m_as('request/s'):.2f} | "
            f"{fixed.throughput.m_as('request/s'):.2f} |"
        )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    queues()
    littles_law()
    closed_loop()
