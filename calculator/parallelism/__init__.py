"""Model sharding: collectives, tensor/pipeline/expert parallelism and embedding sharding (section 10.10).

Communication follows the alpha-beta model with a per-collective latency floor fitted on public NCCL
measurements; the collectives use the per-direction bandwidth of a link (the chapter's Table 17
prints the two-direction total), and functions that take a link say which basis they use.

The submodules, each re-exported here:

* :mod:`~calculator.parallelism.collectives`: interconnects (registry links, bandwidth basis) and the
  alpha-beta collectives (point to point, ring all-reduce, all-gather, reduce-scatter, all-to-all).
* :mod:`~calculator.parallelism.nccl`: the NCCL all-reduce calibrations and :func:`fit_ring_allreduce`.
* :mod:`~calculator.parallelism.tensor`: sharding triggers, distributed step time (eq. 11-13), tensor
  parallelism and KV-head placement under TP.
* :mod:`~calculator.parallelism.pipeline`: hybrid TP x PP layouts and pipeline parallelism.
* :mod:`~calculator.parallelism.moe`: mixture-of-experts weights, placement, decode floor and capacity.
* :mod:`~calculator.parallelism.embeddings`: recommendation embedding tables, tiers and lookups.
"""

from __future__ import annotations

from .collectives import (
    BANDWIDTH_BASES,
    COLLECTIVES,
    alltoall_time,
    collective_time,
    link_bandwidth,
    link_latency,
    point_to_point_time,
    resolve_interconnect,
    ring_allgather_time,
    ring_allreduce_time,
    ring_reduce_scatter_time,
)
from .embeddings import (
    EmbeddingLookup,
    EmbeddingTiers,
    embedding_lookup_time,
    embedding_table_bytes,
    resident_bytes_per_entity,
    tiered_embedding_placement,
)
from .moe import (
    ExpertPlacement,
    MoeDecodeFloor,
    MoeWeights,
    expert_capacity,
    expert_placement,
    moe_decode_floor,
    moe_dispatch_bytes,
    moe_weights,
    simulate_expert_overflow,
)
from .nccl import (
    DECODE_MESSAGES,
    NCCL_ALLREDUCE_A100,
    NCCL_ALLREDUCE_H100,
    AllReduceCalibration,
    AllReduceFit,
    FitErrorRow,
    fit_ring_allreduce,
)
from .pipeline import (
    HybridLayout,
    PipelinePerformance,
    PipelineStage,
    hybrid_layout,
    pipeline_bubble_fraction,
    pipeline_performance,
)
from .tensor import (
    KvHeadPlacement,
    activation_message_bytes,
    collective_overhead_share,
    distributed_step_time,
    kv_head_placement,
    min_shards,
    sharding_speedup,
    tensor_parallel_layer_time,
    tensor_parallel_layer_time_ring,
    tensor_parallel_speedup,
)

__all__ = [
    "BANDWIDTH_BASES",
    "COLLECTIVES",
    "AllReduceCalibration",
    "NCCL_ALLREDUCE_H100",
    "NCCL_ALLREDUCE_A100",
    "resolve_interconnect",
    "link_bandwidth",
    "link_latency",
    "point_to_point_time",
    "ring_allreduce_time",
    "ring_allgather_time",
    "ring_reduce_scatter_time",
    "alltoall_time",
    "collective_time",
    "DECODE_MESSAGES",
    "AllReduceFit",
    "FitErrorRow",
    "fit_ring_allreduce",
    "min_shards",
    "distributed_step_time",
    "sharding_speedup",
    "activation_message_bytes",
    "tensor_parallel_layer_time",
    "tensor_parallel_layer_time_ring",
    "tensor_parallel_speedup",
    "collective_overhead_share",
    "KvHeadPlacement",
    "kv_head_placement",
    "PipelineStage",
    "HybridLayout",
    "hybrid_layout",
    "PipelinePerformance",
    "pipeline_performance",
    "pipeline_bubble_fraction",
    "MoeWeights",
    "moe_weights",
    "ExpertPlacement",
    "expert_placement",
    "MoeDecodeFloor",
    "moe_decode_floor",
    "moe_dispatch_bytes",
    "expert_capacity",
    "simulate_expert_overflow",
    "embedding_table_bytes",
    "resident_bytes_per_entity",
    "EmbeddingTiers",
    "tiered_embedding_placement",
    "EmbeddingLookup",
    "embedding_lookup_time",
]
