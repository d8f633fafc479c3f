"""Batching: the batch service curve, dynamic and adaptive batching, padding waste, continuous batching.

Chapter section 10.6: the linear batch service time and its knee (10.6.2), Little's law applied to
a batching fleet, dynamic batching and its latency decomposition (Eq. 3, Example 10.1), static
batching waste (Eq. 4) and continuous batching (Napkin Math 10.3, Table 7), feature-parallel
batching for recommendation (Example 10.3), streaming budgets (10.6.7), adaptive windows and the
SLO-adaptive controller (10.6.8), test-time compute budgets (Napkin Math 10.4) and the strategy
decision tree (Table 9).

The submodules, each re-exported here:

* :mod:`~calculator.batching.service`: the batch service curve ``T(B)``, throughput, knee, operating
  points, and Little's law for a batching fleet (10.6.2, Theorem 10.1).
* :mod:`~calculator.batching.dynamic`: dynamic batching, the exact mean formation delay of a window
  and the latency decomposition of Eq. 3 (10.6.3).
* :mod:`~calculator.batching.adaptive`: adaptive windows, the SLO-adaptive controller and
  :func:`simulate_dynamic_batching` on any arrival trace (10.6.8).
* :mod:`~calculator.batching.continuous`: static batching waste and continuous batching (10.6.4-10.6.5).
* :mod:`~calculator.batching.workloads`: feature-parallel, streaming and test-time compute budgets
  (10.6.6, 10.6.7, 10.6.9).
* :mod:`~calculator.batching.strategy`: the strategy decision tree (10.6.10, Table 9).
"""

from __future__ import annotations

from .adaptive import BatchingTrace, adaptive_window, simulate_dynamic_batching, slo_adaptive_step
from .continuous import (
    TABLE_7,
    ContinuousBatchingScenario,
    SlotTimeline,
    StaticBatchAccounting,
    continuous_batching_ceiling,
    effective_waste,
    padding_waste,
    padding_waste_fraction,
    slot_timeline,
    speedup_from_waste,
    static_batch_accounting,
)
from .dynamic import (
    BatchFormation,
    DynamicBatchingLatency,
    batch_formation,
    batched_utilization,
    dynamic_batching_latency,
    request_time_in_system,
    window_batch_size,
)
from .service import (
    ConcurrencyPlan,
    OperatingPoints,
    batch_operating_points,
    batch_service_time,
    batch_throughput,
    concurrency_plan,
    effective_service_rate,
    knee_batch_size,
    max_batch_for_budget,
)
from .strategy import TABLE_9, BatchingRecommendation, BatchingStrategy, select_batching_strategy
from .workloads import (
    ReasoningBudget,
    frames_of_delay,
    pipeline_sustains,
    reasoning_budget,
    reasoning_latency,
    shard_batch_size,
    shard_lookup_rate,
    streaming_latency,
)

__all__ = [
    "batch_service_time",
    "batch_throughput",
    "effective_service_rate",
    "knee_batch_size",
    "max_batch_for_budget",
    "OperatingPoints",
    "batch_operating_points",
    "ConcurrencyPlan",
    "concurrency_plan",
    "window_batch_size",
    "batched_utilization",
    "request_time_in_system",
    "BatchFormation",
    "batch_formation",
    "DynamicBatchingLatency",
    "dynamic_batching_latency",
    "adaptive_window",
    "slo_adaptive_step",
    "BatchingTrace",
    "simulate_dynamic_batching",
    "padding_waste_fraction",
    "padding_waste",
    "StaticBatchAccounting",
    "static_batch_accounting",
    "SlotTimeline",
    "slot_timeline",
    "continuous_batching_ceiling",
    "speedup_from_waste",
    "effective_waste",
    "ContinuousBatchingScenario",
    "TABLE_7",
    "shard_lookup_rate",
    "shard_batch_size",
    "streaming_latency",
    "frames_of_delay",
    "pipeline_sustains",
    "reasoning_latency",
    "ReasoningBudget",
    "reasoning_budget",
    "BatchingStrategy",
    "TABLE_9",
    "BatchingRecommendation",
    "select_batching_strategy",
]
