"""The queueing closed forms against an independent discrete-event simulator (ciw).

Exact models (M/M/c) must sit inside the simulation's 99 % confidence interval; approximations
(G/G/c, Allen-Cunneen, and its exponential-tail quantiles) within the error documented in
``docs/models-10.1-10.6.md`` for the region each point lies in. Every simulation is seeded and small
(a few tens of thousands of customers), so the file runs in a few seconds; the docs table uses longer
runs from ``benchmarks/validate_queueing.py``.
"""

import numpy as np
import pytest
from ciw_reference import simulate_waits

from calculator import Q_
from calculator.queueing import ggc_wait_quantile, mg1_mean_wait, queue_metrics

SERVICE = 1.0  # seconds; every point is in units of the mean service time


@pytest.mark.parametrize(("utilization", "servers"), [(0.7, 2), (0.8, 4), (0.85, 16)])
def test_mmc_mean_wait_and_tail_sit_in_the_simulation_interval(utilization, servers):
    rate = utilization * servers / SERVICE
    sim = simulate_waits(rate, SERVICE, servers, customers=4000, replications=10, seed=101)
    model = queue_metrics(Q_(rate, "request/s"), Q_(SERVICE, "s"), servers)
    low, high = sim.mean_interval(0.99)
    assert low <= model.mean_wait.m_as("s") <= high
    threshold = model.mean_wait
    low, high = sim.exceedance_interval(threshold.m_as("s"), 0.99)
    assert low <= model.wait_exceedance(threshold) <= high
    low, high = sim.exceedance_interval(0.0, 0.99)
    assert low <= model.wait_probability <= high


def test_md1_pollaczek_khinchine_sits_in_the_simulation_interval():
    rate = 0.8 / SERVICE
    sim = simulate_waits(rate, SERVICE, 1, 1.0, 0.0, customers=6000, replications=10, seed=202)
    low, high = sim.mean_interval(0.99)
    assert low <= mg1_mean_wait(Q_(rate, "request/s"), Q_(SERVICE, "s"), 0).m_as("s") <= high


@pytest.mark.parametrize(
    ("utilization", "servers", "arrival_cv", "service_cv", "wait_tolerance"),
    [
        (0.85, 4, 0.5, 0.5, 0.35),  # rho >= 0.8, c <= 4, CVs in [0.5, 2]: wait within 35 %
        (0.85, 2, 1.5, 1.0, 0.35),
        (0.9, 2, 1.0, 2.0, 0.35),
        (0.8, 16, 0.7, 0.3, None),  # many servers, low variability: only the latency bounds hold
        (0.85, 16, 2.0, 1.0, None),
    ],
)
def test_ggc_allen_cunneen_is_within_the_documented_error(utilization, servers, arrival_cv, service_cv, wait_tolerance):
    # Documented (docs/models-10.1-10.6.md, G/G/c table): at utilization >= 0.8 the mean time in system is
    # within 25 % and the p90/p99 waits within 25 % of (simulated wait quantile + service time); the wait
    # itself within 35 % where c <= 4 and both CVs lie in [0.5, 2]. The simulation's own standard error at
    # these run lengths is a few percent.
    rate = utilization * servers / SERVICE
    sim = simulate_waits(rate, SERVICE, servers, arrival_cv, service_cv, customers=8000, replications=6, seed=303)
    model = queue_metrics(Q_(rate, "request/s"), Q_(SERVICE, "s"), servers, arrival_cv, service_cv)
    assert model.exact is False
    simulated = sim.means.mean()
    assert model.mean_time_in_system.m_as("s") == pytest.approx(simulated + SERVICE, rel=0.25)
    if wait_tolerance is not None:
        assert model.mean_wait.m_as("s") == pytest.approx(simulated, rel=wait_tolerance)
    for q in (0.9, 0.99):
        predicted = ggc_wait_quantile(Q_(rate, "request/s"), Q_(SERVICE, "s"), servers, arrival_cv, service_cv, q)
        observed = np.quantile(sim.pooled, q)
        assert abs(predicted.m_as("s") - observed) <= 0.25 * (observed + SERVICE)
