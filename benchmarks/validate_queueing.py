"""Validate the queueing closed forms against discrete-event simulation; print the docs' Markdown tables.

Run from the repository root (takes several minutes):

    python benchmarks/validate_queueing.py > validation.md

* M/M/c and G/G/c waits against ciw (an independent simulator, ``tests/ciw_reference.py``);
* dynamic batching (:func:`calculator.batching.dynamic_batching_latency`) against
  :func:`calculator.batching.simulate_dynamic_batching`.

Every simulation is seeded, so the tables are reproducible.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ciw_reference import simulate_waits

from calculator import Q_
from calculator.batching import dynamic_batching_latency, simulate_dynamic_batching
from calculator.queueing import queue_metrics

SERVICE_TIME = 1.0  # every queue below is in units of its mean service time


def _customers(utilization: float) -> int:
    return int(min(100_000, 4000 / (1 - utilization)))


def mmc_table() -> str:
    """M/M/c: closed-form mean wait against the simulation's 99 % interval, and wait quantiles."""
    rows = [
        "| rho | c | sim mean wait (99 % CI) | Erlang C mean wait | in CI "
        "| sim p90 | model p90 | sim p99 | model p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for utilization, servers in [(0.5, 1), (0.8, 1), (0.7, 2), (0.8, 4), (0.9, 8), (0.85, 16), (0.95, 64), (0.9, 256)]:
        rate = utilization * servers / SERVICE_TIME
        sim = simulate_waits(rate, SERVICE_TIME, servers, customers=_customers(utilization), replications=10, seed=11)
        model = queue_metrics(Q_(rate, "request/s"), Q_(SERVICE_TIME, "s"), servers)
        low, high = sim.mean_interval(0.99)
        mean = model.mean_wait.m_as("s")
        p90, p99 = (model.wait_quantile(q).m_as("s") for q in (0.9, 0.99))
        rows.append(
            f"| {utilization} | {servers} | {sim.means.mean():.4f} ({low:.4f}-{high:.4f}) | {mean:.4f} | "
            f"{'yes' if low <= mean <= high else 'NO'} | {np.quantile(sim.pooled, 0.9):.3f} | {p90:.3f} | "
            f"{np.quantile(sim.pooled, 0.99):.3f} | {p99:.3f} |"
        )
    return "\n".join(rows)


GGC_CASES = [(1.0, 0.0), (1.0, 0.5), (0.5, 0.5), (0.5, 1.5), (1.0, 2.0), (1.5, 1.0), (2.0, 1.0), (0.2, 0.2)]


def ggc_table() -> tuple[str, list[tuple[float, ...]]]:
    """G/G/c: Allen-Cunneen mean wait and the approximate quantiles against simulation, on a grid."""
    rows = [
        "| rho | c | c_a | c_s | sim mean wait | Allen-Cunneen | wait error | time-in-system error "
        "| p90 error | p99 error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    data = []
    for utilization in (0.5, 0.7, 0.8, 0.9, 0.95):
        for servers in (1, 4, 16, 64):
            for arrival_cv, service_cv in GGC_CASES:
                rate = utilization * servers / SERVICE_TIME
                sim = simulate_waits(
                    rate,
                    SERVICE_TIME,
                    servers,
                    arrival_cv,
                    service_cv,
                    customers=_customers(utilization),
                    replications=6,
                    seed=23,
                )
                model = queue_metrics(Q_(rate, "request/s"), Q_(SERVICE_TIME, "s"), servers, arrival_cv, service_cv)
                simulated = sim.means.mean()
                mean = model.mean_wait.m_as("s")
                wait_error = mean / simulated - 1 if simulated > 0 else np.inf
                system_error = (mean + SERVICE_TIME) / (simulated + SERVICE_TIME) - 1
                quantile_errors = []
                for q in (0.9, 0.99):
                    observed = np.quantile(sim.pooled, q)
                    predicted = model.wait_quantile(q).m_as("s")
                    quantile_errors.append((predicted - observed) / (observed + SERVICE_TIME))
                point = (utilization, servers, arrival_cv, service_cv, simulated, mean, wait_error, system_error)
                data.append((*point, *quantile_errors))
                rows.append(
                    f"| {utilization} | {servers} | {arrival_cv} | {service_cv} | {simulated:.4f} | {mean:.4f} | "
                    f"{_pct(wait_error)} | {_pct(system_error)} | {_pct(quantile_errors[0])} | "
                    f"{_pct(quantile_errors[1])} |"
                )
    return "\n".join(rows), data


def ggc_summary(data: list) -> str:
    """Error of the G/G/c approximations by region of the grid."""
    array = np.array(data, dtype=float)
    rho, servers, arrival_cv, service_cv = array[:, 0], array[:, 1], array[:, 2], array[:, 3]
    rows = [
        "| region | points | median / max abs wait error (*) | max abs time-in-system error "
        "| max abs p90 error | max abs p99 error |",
        "|---|---|---|---|---|---|",
    ]
    moderate_cv = (arrival_cv >= 0.5) & (service_cv >= 0.5)
    regions = {
        "all points": np.ones(len(array), bool),
        "Poisson arrivals (c_a = 1)": arrival_cv == 1,
        "rho >= 0.8, c <= 4, CVs in [0.5, 2]": (rho >= 0.8) & (servers <= 4) & moderate_cv,
        "rho >= 0.8, c >= 16": (rho >= 0.8) & (servers >= 16),
        "rho >= 0.8, any c and CV": rho >= 0.8,
        "rho <= 0.7": rho <= 0.7,
    }
    for name, mask in regions.items():
        part = array[mask]
        meaningful = part[:, 4] >= 0.01 * SERVICE_TIME  # relative wait error of a ~zero wait means nothing
        waits = np.abs(part[meaningful, 6])
        shown = f"{_abs(np.median(waits))} / {_abs(waits.max())} ({meaningful.sum()})" if waits.size else "-"
        rows.append(
            f"| {name} | {mask.sum()} | {shown} | {_abs(np.abs(part[:, 7]).max())} | "
            f"{_abs(np.abs(part[:, 8]).max())} | {_abs(np.abs(part[:, 9]).max())} |"
        )
    rows.append("")
    rows.append(
        "(*) over the points whose simulated mean wait is at least 1 % of the service time (their count in "
        "brackets). Time-in-system error: (model wait + s) / (simulated wait + s) - 1. Quantile errors: "
        "(model - simulated wait quantile) / (simulated wait quantile + s)."
    )
    return "\n".join(rows)


def batching_table() -> str:
    """Eq. 3 model of dynamic batching against the event simulation of the same policy."""
    rows = [
        "| arrival rate | window | B_max | T0 | t_m | replicas | utilization | sim formation | model formation "
        "| sim mean latency | model mean latency | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cases = [
        (500, 10, 64, 4, 0.8, 1),
        (500, 20, 64, 4, 0.8, 1),
        (500, 10, 8, 4, 1.2, 1),
        (800, 10, 32, 4, 0.7, 1),
        (1000, 2, 32, 2, 0.5, 2),
        (2000, 5, 32, 5, 0.3, 4),
        (100, 20, 16, 10, 1.0, 1),
        (700, 10, 64, 5, 1.0, 1),
    ]
    rng = np.random.default_rng(5)
    for rate, window, cap, fixed, marginal, replicas in cases:
        times = Q_(np.cumsum(rng.exponential(1 / rate, 400_000)), "s")
        args = (Q_(window, "ms"), cap, Q_(fixed, "ms"), Q_(marginal, "ms"))
        trace = simulate_dynamic_batching(times, *args, replicas=replicas)
        model = dynamic_batching_latency(Q_(rate, "request/s"), *args, replicas=replicas)
        keep = slice(len(times) // 10, None)
        simulated = trace.latency.m_as("ms")[keep].mean()
        predicted = model.time_in_system.m_as("ms")
        rows.append(
            f"| {rate} | {window} ms | {cap} | {fixed} ms | {marginal} ms | {replicas} | {model.utilization:.2f} | "
            f"{trace.formation_delay.m_as('ms')[keep].mean():.3f} ms | {model.formation_delay.m_as('ms'):.3f} ms | "
            f"{simulated:.2f} ms | {predicted:.2f} ms | {_pct(predicted / simulated - 1)} |"
        )
    return "\n".join(rows)


def _pct(value: float) -> str:
    return "inf" if not np.isfinite(value) else f"{100 * value:+.1f} %"


def _abs(value: float) -> str:
    return f"{100 * value:.1f} %"


if __name__ == "__main__":
    print("### M/M/c against ciw\n")
    print(mmc_table())
    table, data = ggc_table()
    print("\n### G/G/c (Allen-Cunneen) against ciw: summary\n")
    print(ggc_summary(data))
    print("\n### G/G/c against ciw: every point\n")
    print(table)
    print("\n### Dynamic batching (Eq. 3 model) against the event simulation\n")
    print(batching_table())
