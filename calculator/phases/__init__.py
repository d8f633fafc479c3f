"""Prefill and decode: arithmetic intensity, roofline times, chunked prefill, disaggregation (section 10.8).

Also the serving ceilings of weight quantization (section 10.9.3, Table 12).

The roofline pieces are general and vectorized: FLOPs per token are ``2 x active parameters`` plus
attention FLOPs that grow with the context; the bytes of a decode step are the weights per device
plus every sequence's KV cache per device; a step takes ``max(FLOPs / peak, bytes / bandwidth)``
on one device of a tensor-parallel group. They are lower bounds (no kernel inefficiency,
communication or scheduling overhead); a calibrated step-time model builds on them.

The submodules, each re-exported here:

* :mod:`~calculator.phases.intensity`: arithmetic intensity and the ridge point (10.8.1).
* :mod:`~calculator.phases.flops`: FLOPs of a prefill and of a decode step, and the roofline time (10.8.1, Eq. 9).
* :mod:`~calculator.phases.roofline`: the roofline estimates of a prefill and of a decode step of a registry model.
* :mod:`~calculator.phases.chunked`: chunked prefill, Algorithm 3 and its TTFT/TBT trade-off (10.8.2, Eq. 8-9).
* :mod:`~calculator.phases.disaggregation`: the KV handoff (Eq. 10), the pool sizes of a disaggregated
  deployment (10.8.3) and the costs of preemption (10.7.7).
* :mod:`~calculator.phases.quantization`: the serving ceilings of weight quantization (10.9.3, Table 12).
"""

from __future__ import annotations

from .chunked import (
    ChunkedPrefillTradeoff,
    ChunkedSchedule,
    chunked_prefill_tradeoff,
    hybrid_iteration_time,
    prefill_iterations,
    schedule_iteration,
    simulate_chunked_prefill,
)
from .disaggregation import (
    PoolSizes,
    PreemptionCosts,
    disaggregated_pool_sizes,
    model_kv_handoff_time,
    preemption_costs,
)
from .disaggregation import kv_handoff_time as kv_handoff_time  # defined in calculator.memory
from .flops import attention_flops_per_pair, decode_flops, prefill_flops, roofline_time
from .intensity import accelerator_ridge_point, projection_arithmetic_intensity, ridge_point
from .quantization import QuantizationCeilings, quantization_ceilings
from .roofline import RooflineEstimate, roofline_decode_step_time, roofline_prefill_time

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
    "model_kv_handoff_time",
    "preemption_costs",
    "disaggregated_pool_sizes",
    "quantization_ceilings",
]
