"""Serving contracts and queueing: load, SLO goodput, the serving tax, Little's law, M/M/c, M/G/1, G/G/c.

Chapter sections 10.1-10.3 (offered and admitted load, TTFT/TPOT, SLO goodput, the serving-tax
decomposition of Eq. 1, the three triggers for distribution) and the queueing side of 10.6.2
(Little's law, replicas from throughput, utilization). The chapter names queueing delay but leaves
its models to other chapters; fleet sizing needs waits and their tails, so this module adds:

* **M/M/c** (Poisson arrivals, exponential service, ``c`` servers): exact. Erlang C is computed from
  the Poisson distribution in log space (``P(N = c) / P(N <= c)`` gives Erlang B), stable for
  thousands of servers.
* **M/G/1**: the Pollaczek-Khinchine mean wait, exact for any service distribution.
* **G/G/c**: the Allen-Cunneen approximation, the M/M/c wait scaled by ``(c_a^2 + c_s^2) / 2``.
  It is exact for M/M/c and for M/G/1, and for a single server it is Kingman's formula.
  Validated against discrete-event simulation in ``docs/models-10.1-10.6.md``.
* **Wait tails**: exact for M/M/c (``P(W > t) = C e^{-(c mu - lambda) t}``); for G/G/c the same
  exponential tail with its mean scaled by the Allen-Cunneen factor (an approximation whose error
  the docs table records).

Queue functions broadcast over numpy arrays (``servers`` may be an integer array) and never raise on
overload: at utilization >= 1 they return ``P(wait) = 1`` and infinite waits, and
:func:`queue_stable` / :class:`QueueMetrics` say so explicitly.
"""

from __future__ import annotations

from .contracts import (
    CapacityMeasurement,
    DistributionTriggers,
    QueueMetrics,
    ServingTaxBudget,
    StreamMetrics,
    arrival_times,
    compare_capacity,
    coordination_latency,
    distribution_triggers,
    end_to_end_latency,
    erlang_c,
    ggc_mean_wait,
    ggc_wait_exceedance,
    ggc_wait_quantile,
    goodput_from_requests,
    in_flight,
    interactivity,
    kingman_wait,
    mg1_mean_wait,
    mmc_mean_wait,
    mmc_wait_exceedance,
    mmc_wait_quantile,
    network_latency,
    queue_metrics,
    queue_stable,
    replica_demand,
    replicas_for_load,
    serving_tax_budget,
    shed_fraction,
    slo_attainment,
    slo_goodput,
    stream_metrics,
    utilization,
    variability_factor,
)

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
