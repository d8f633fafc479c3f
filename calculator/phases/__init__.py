"""Prefill and decode: arithmetic intensity, roofline times, chunked prefill, disaggregation (section 10.8).

Also the serving ceilings of weight quantization (section 10.9.3, Table 12).

The roofline pieces are general and vectorized: FLOPs per token are ``2 x active parameters`` plus
attention FLOPs that grow with the context; the bytes of a decode step are the weights per device
plus every sequence's KV cache per device; a step takes ``max(FLOPs / peak, bytes / bandwidth)``
on one device of a tensor-parallel group. They are lower bounds (no kernel inefficiency,
communication or scheduling overhead); a calibrated step-time model builds on them.

The deprecated names ``prefill_time`` and ``decode_step_time`` (of :func:`roofline_prefill_time` and
:func:`roofline_decode_step_time`) stay importable from here for one release; they are not in ``__all__``.
"""

from __future__ import annotations

from .roofline import (
    ChunkedPrefillTradeoff,
    ChunkedSchedule,
    PoolSizes,
    PreemptionCosts,
    QuantizationCeilings,
    RooflineEstimate,
    accelerator_ridge_point,
    attention_flops_per_pair,
    chunked_prefill_tradeoff,
    decode_flops,
    disaggregated_pool_sizes,
    hybrid_iteration_time,
    kv_handoff_time,
    model_kv_handoff_time,
    preemption_costs,
    prefill_flops,
    prefill_iterations,
    projection_arithmetic_intensity,
    quantization_ceilings,
    ridge_point,
    roofline_decode_step_time,
    roofline_prefill_time,
    roofline_time,
    schedule_iteration,
    simulate_chunked_prefill,
)
from .roofline import decode_step_time as decode_step_time
from .roofline import prefill_time as prefill_time

__all__ = [
    "ChunkedPrefillTradeoff",
    "ChunkedSchedule",
    "PoolSizes",
    "PreemptionCosts",
    "QuantizationCeilings",
    "RooflineEstimate",
    "projection_arithmetic_intensity",
    "ridge_point",
    "accelerator_ridge_point",
    "attention_flops_per_pair",
    "prefill_flops",
    "decode_flops",
    "roofline_time",
    "roofline_prefill_time",
    "roofline_decode_step_time",
    "hybrid_iteration_time",
    "prefill_iterations",
    "schedule_iteration",
    "simulate_chunked_prefill",
    "chunked_prefill_tradeoff",
    "kv_handoff_time",
    "model_kv_handoff_time",
    "preemption_costs",
    "disaggregated_pool_sizes",
    "quantization_ceilings",
]
