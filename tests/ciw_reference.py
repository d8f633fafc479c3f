"""Reference queue simulations with ciw, an independent discrete-event simulator.

Used by the queueing validation tests and by ``benchmarks/validate_queueing.py`` (which writes the
table in ``docs/models-10.1-10.6.md``). Inter-arrival and service times with a coefficient of
variation ``cv`` are exponential (cv = 1), deterministic (cv = 0) or gamma with shape ``1 / cv^2``.
Each replication is an independent run with its own seed; the first ``warmup`` fraction of the
horizon is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass

import ciw
import numpy as np
from scipy import stats


def distribution(mean: float, cv: float) -> ciw.dists.Distribution:
    """A ciw distribution with this mean and coefficient of variation."""
    if cv == 1:
        return ciw.dists.Exponential(rate=1 / mean)
    if cv == 0:
        return ciw.dists.Deterministic(value=mean)
    return ciw.dists.Gamma(shape=1 / cv**2, scale=mean * cv**2)


@dataclass(frozen=True)
class SimulatedWaits:
    """Queueing delays of every replication: per-replication means and all waits pooled."""

    per_replication: list[np.ndarray]

    @property
    def means(self) -> np.ndarray:
        return np.array([w.mean() for w in self.per_replication])

    @property
    def pooled(self) -> np.ndarray:
        return np.concatenate(self.per_replication)

    def mean_interval(self, confidence: float = 0.99) -> tuple[float, float]:
        """Student-t confidence interval of the mean wait over replications."""
        return _interval(self.means, confidence)

    def exceedance_interval(self, threshold: float, confidence: float = 0.99) -> tuple[float, float]:
        """Confidence interval of P(wait > threshold) over replications."""
        return _interval(np.array([(w > threshold).mean() for w in self.per_replication]), confidence)


def simulate_waits(
    arrival_rate: float,
    service_time: float,
    servers: int,
    arrival_cv: float = 1.0,
    service_cv: float = 1.0,
    customers: int = 5000,
    replications: int = 10,
    seed: int = 0,
    warmup: float = 0.1,
) -> SimulatedWaits:
    """Simulate a G/G/c FCFS queue ``replications`` times for about ``customers`` arrivals each."""
    horizon = customers / arrival_rate
    runs = []
    for replication in range(replications):
        network = ciw.create_network(
            arrival_distributions=[distribution(1 / arrival_rate, arrival_cv)],
            service_distributions=[distribution(service_time, service_cv)],
            number_of_servers=[servers],
        )
        ciw.seed(seed + replication)
        simulation = ciw.Simulation(network)
        simulation.simulate_until_max_time(horizon)
        records = simulation.get_all_records()
        runs.append(np.array([r.waiting_time for r in records if r.arrival_date > warmup * horizon]))
    return SimulatedWaits(runs)


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    half = stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean() - half), float(values.mean() + half)
