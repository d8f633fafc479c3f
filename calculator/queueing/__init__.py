"""Serving contracts and queueing: load, SLO goodput, the serving tax, Little's law, M/M/c, M/G/1, G/G/c.

Chapter sections 10.1-10.3 (offered and admitted load, TTFT/TPOT, SLO goodput, the serving-tax
decomposition of Eq. 1, the three triggers for distribution) and the queueing side of 10.6.2
(Little's law, replicas from throughput, utilization). The chapter names queueing delay but leaves
its models to other chapters; fleet sizing needs waits and their tails, so this package adds M/M/c
(exact), M/G/1 (Pollaczek-Khinchine) and G/G/c (Allen-Cunneen) waits and wait tails.

The submodules, each re-exported here:

* :mod:`~calculator.queueing.contracts`: offered and admitted load, capacity at a fixed mix and SLO,
  TTFT/TPOT/TBT, SLO goodput (10.1-10.3).
* :mod:`~calculator.queueing.capacity`: the triggers for distribution (10.2, Table 1), Little's law,
  replicas and utilization (10.6.2).
* :mod:`~calculator.queueing.latency`: the serving tax (10.3.2, Eq. 1).
* :mod:`~calculator.queueing.mmc`: M/M/c, exact (Erlang C, mean wait, wait tail and quantile).
* :mod:`~calculator.queueing.ggc`: M/G/1 and G/G/c, :func:`queue_metrics`, and :func:`arrival_times`
  (a renewal arrival trace to simulate).

Queue functions broadcast over numpy arrays (``servers`` may be an integer array) and never raise on
overload: at utilization >= 1 they return ``P(wait) = 1`` and infinite waits, and
:func:`queue_stable` / :class:`QueueMetrics` say so explicitly.
"""

from __future__ import annotations

from .capacity import (
    DistributionTriggers,
    distribution_triggers,
    in_flight,
    replica_demand,
    replicas_for_load,
    utilization,
)
from .contracts import (
    CapacityMeasurement,
    StreamMetrics,
    compare_capacity,
    goodput_from_requests,
    interactivity,
    shed_fraction,
    slo_attainment,
    slo_goodput,
    stream_metrics,
)
from .ggc import (
    QueueMetrics,
    arrival_times,
    ggc_mean_wait,
    ggc_wait_exceedance,
    ggc_wait_quantile,
    kingman_wait,
    mg1_mean_wait,
    queue_metrics,
    variability_factor,
)
from .latency import ServingTaxBudget, coordination_latency, end_to_end_latency, network_latency, serving_tax_budget
from .mmc import erlang_c, mmc_mean_wait, mmc_wait_exceedance, mmc_wait_quantile, queue_stable

__all__ = [
    "shed_fraction",
    "CapacityMeasurement",
    "compare_capacity",
    "DistributionTriggers",
    "distribution_triggers",
    "interactivity",
    "StreamMetrics",
    "stream_metrics",
    "slo_goodput",
    "slo_attainment",
    "goodput_from_requests",
    "end_to_end_latency",
    "network_latency",
    "coordination_latency",
    "ServingTaxBudget",
    "serving_tax_budget",
    "in_flight",
    "replica_demand",
    "replicas_for_load",
    "utilization",
    "queue_stable",
    "erlang_c",
    "mmc_mean_wait",
    "mmc_wait_exceedance",
    "mmc_wait_quantile",
    "variability_factor",
    "kingman_wait",
    "mg1_mean_wait",
    "ggc_mean_wait",
    "ggc_wait_exceedance",
    "ggc_wait_quantile",
    "QueueMetrics",
    "queue_metrics",
    "arrival_times",
]
