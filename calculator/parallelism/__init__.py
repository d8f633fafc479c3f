r"""Model sharding: collectives, tensor/pipeline/expert parallelism and embedding sharding (section 10.10).

Communication follows the alpha-beta model: a message of :math:`M` bytes over a link with startup
latency :math:`\alpha` and bandwidth :math:`\beta` takes :math:`\alpha + M/\beta`; collectives
are built from such steps (ring all-reduce, all-gather, reduce-scatter, all-to-all). Every collective
also takes a **per-collective latency floor**: the launch, protocol and synchronization cost that a
real library (NCCL) pays once per call. Datasheet link latencies (0.5 us for NVLink) under-predict
small collectives 5-10x; :data:`NCCL_ALLREDUCE_H100` and :data:`NCCL_ALLREDUCE_A100` carry a floor
and an achieved bandwidth fitted on public NCCL measurements (see :func:`fit_ring_allreduce`).

Bandwidth basis: the registry's interconnects carry ``bandwidth`` (per direction) and
``bandwidth_total`` (both directions). The collectives here use the per-direction figure, which is
the physically right one: in a ring each link carries one direction of the traffic at a time. The
chapter's Table 17 prints 900 GB/s for NVLink, the two-direction total; the chapter itself uses
450 GB/s per direction elsewhere (§10.8.3). Functions that take a link accept a registry id or an
:class:`~calculator.registry.Interconnect` and a ``bandwidth_basis`` (``"per_direction"`` or
``"total"``) so that either reading can be evaluated and stated.
"""

from __future__ import annotations

from .collectives import (
    BANDWIDTH_BASES,
    COLLECTIVES,
    DECODE_MESSAGES,
    NCCL_ALLREDUCE_A100,
    NCCL_ALLREDUCE_H100,
    AllReduceCalibration,
    AllReduceFit,
    EmbeddingLookup,
    EmbeddingTiers,
    ExpertPlacement,
    FitErrorRow,
    HybridLayout,
    KvHeadPlacement,
    MoeDecodeFloor,
    MoeWeights,
    PipelinePerformance,
    PipelineStage,
    activation_message_bytes,
    alltoall_time,
    collective_overhead_share,
    collective_time,
    distributed_step_time,
    embedding_lookup_time,
    embedding_table_bytes,
    expert_capacity,
    expert_placement,
    fit_ring_allreduce,
    hybrid_layout,
    kv_head_placement,
    link_bandwidth,
    link_latency,
    min_shards,
    moe_decode_floor,
    moe_weights,
    pipeline_bubble_fraction,
    pipeline_performance,
    point_to_point_time,
    resident_bytes_per_entity,
    resolve_interconnect,
    ring_allgather_time,
    ring_allreduce_time,
    ring_reduce_scatter_time,
    sharding_speedup,
    simulate_expert_overflow,
    tensor_parallel_layer_time,
    tensor_parallel_layer_time_ring,
    tensor_parallel_speedup,
    tiered_embedding_placement,
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
    "expert_capacity",
    "simulate_expert_overflow",
    "embedding_table_bytes",
    "resident_bytes_per_entity",
    "EmbeddingTiers",
    "tiered_embedding_placement",
    "EmbeddingLookup",
    "embedding_lookup_time",
]
