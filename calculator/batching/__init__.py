"""Batching: the batch service curve, dynamic and adaptive batching, padding waste, continuous batching.

Chapter section 10.6: the linear batch service time and its knee (10.6.2), Little's law applied to
a batching fleet, dynamic batching and its latency decomposition (Eq. 3, Example 10.1), static
batching waste (Eq. 4) and continuous batching (Napkin Math 10.3, Table 7), feature-parallel
batching for recommendation (Example 10.3), streaming budgets (10.6.7), adaptive windows and the
SLO-adaptive controller (10.6.8), test-time compute budgets (Napkin Math 10.4) and the strategy
decision tree (Table 9).

Eq. 3 names queueing and formation delay but gives no model for either. This module adds the exact
mean formation delay of a window that opens at a batch's first arrival and closes after ``T_w`` or
at ``B_max`` requests (Poisson arrivals), and prices the queueing of the formed batches with the
G/G/c approximation of :mod:`calculator.queueing`; :func:`simulate_dynamic_batching` runs the same
policy on any arrival trace, optionally under the chapter's SLO-adaptive controller.
"""

from __future__ import annotations

from .service import (
    TABLE_7,
    TABLE_9,
    BatchFormation,
    BatchingRecommendation,
    BatchingStrategy,
    BatchingTrace,
    ConcurrencyPlan,
    ContinuousBatchingScenario,
    DynamicBatchingLatency,
    OperatingPoints,
    ReasoningBudget,
    SlotTimeline,
    StaticBatchAccounting,
    adaptive_window,
    batch_formation,
    batch_operating_points,
    batch_service_time,
    batch_throughput,
    batched_utilization,
    concurrency_plan,
    continuous_batching_ceiling,
    dynamic_batching_latency,
    effective_service_rate,
    effective_waste,
    frames_of_delay,
    knee_batch_size,
    max_batch_for_budget,
    padding_waste,
    padding_waste_fraction,
    pipeline_sustains,
    reasoning_budget,
    reasoning_latency,
    request_time_in_system,
    select_batching_strategy,
    shard_batch_size,
    shard_lookup_rate,
    simulate_dynamic_batching,
    slo_adaptive_step,
    slot_timeline,
    speedup_from_waste,
    static_batch_accounting,
    streaming_latency,
    window_batch_size,
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
