"""Serving memory: weights, KV cache, memory fit, fragmentation, paging, prefix caching, LoRA, quantization.

Chapter sections 10.7 (memory and decode-time management) and 10.9 (weight quantization for serving).

Every capacity function takes the memory it may use as an argument, so each calculation states its
basis: the registered byte capacity of an accelerator (``Accelerator.memory``, 80 GiB for an H100)
or the conservative decimal budget of its nameplate (``Accelerator.memory_nameplate``, 80 GB).
Functions that take a registry ``model`` or ``accelerator`` accept its id or the registry object.

Tensor parallelism (degree ``t``) follows the layout of Megatron-style serving engines (vLLM,
TensorRT-LLM): weights divide by ``t``; query heads must divide by ``t``; the KV heads divide by ``t``
when ``t <= kv_heads`` (and must divide evenly), and when ``t > kv_heads`` each KV head is replicated
on ``t / kv_heads`` devices, so a device holds one KV head (``t`` must then be a multiple of
``kv_heads``; vLLM's rule). The MLA latent of DeepSeek-style models is replicated on every rank.

The submodules, each re-exported here:

* :mod:`~calculator.memory.kv`: KV bytes per token (eq. 5, MLA) and the tensor-parallel rule (10.7.1).
* :mod:`~calculator.memory.weights`: weight bytes, block-scale metadata (Definition 10.6) and the
  fewest devices for the weights (10.2, 10.9.1).
* :mod:`~calculator.memory.fit`: the KV footprint, max batch, max context, memory fit and the
  per-device share of a registry model (10.7.1, Napkin Math 10.5).
* :mod:`~calculator.memory.dividend`: the KV cache wall (Figure 9) and the precision dividend
  (Napkin Math 10.7).
* :mod:`~calculator.memory.paging`: fragmentation and paging (10.7.2-10.7.3).
* :mod:`~calculator.memory.hierarchy`: the KV budget with headroom (10.7.8) and the memory hierarchy
  (Example 10.4).
* :mod:`~calculator.memory.prefix`: prefix caching (10.7.4, Napkin Math 10.6).
* :mod:`~calculator.memory.lora`: LoRA adapters (10.7.9, eq. 7).
* :mod:`~calculator.memory.quantize`: quantizing a weight vector (10.9.1, Figure 15).
"""

from __future__ import annotations

from .dividend import KvWall, PrecisionDividend, compare_precisions, kv_wall, precision_dividend
from .fit import (
    DeviceShare,
    MaxBatch,
    MaxBatches,
    MemoryFit,
    device_share,
    kv_cache_bytes,
    max_batch,
    max_batch_numeric,
    max_context,
    memory_fit,
    memory_footprint,
    min_tensor_parallel,
    model_max_batch,
    model_memory_fit,
)
from .hierarchy import (
    NO_TIME,
    KvBudget,
    MemoryTier,
    TierRetention,
    kv_budget,
    kv_handoff_time,
    kv_pool_size,
    tiered_retention,
)
from .kv import (
    check_tensor_parallel,
    kv_bytes_per_token,
    kv_bytes_per_token_per_device,
    mla_kv_bytes_per_token,
    model_kv_bytes_per_token,
    tensor_parallel_valid,
    window_shares,
)
from .lora import lora_adapter_bytes, lora_adapter_parameters, lora_parameters
from .paging import (
    PagedAllocation,
    ReservationComparison,
    SlotMap,
    paged_allocation,
    pool_admission,
    reservation_vs_paging,
    slot_map,
)
from .prefix import PrefixCacheMemory, prefix_cache_memory, prefix_cache_tokens, shared_block_usage
from .quantize import QuantizedTensor, quantize
from .state import StateShape, state_bytes_per_sequence, state_shape
from .weights import (
    NO_BYTES,
    WEIGHT_BITS,
    QuantizationOverhead,
    effective_bits_per_weight,
    min_devices_for_weights,
    model_weight_bytes,
    quantization_overhead,
    routed_expert_parameters,
    vision_weight_bytes,
    weight_bytes,
)

__all__ = [
    "kv_handoff_time",
    "WEIGHT_BITS",
    "NO_BYTES",
    "NO_TIME",
    "KvBudget",
    "KvWall",
    "MemoryFit",
    "MemoryTier",
    "PagedAllocation",
    "PrecisionDividend",
    "PrefixCacheMemory",
    "QuantizationOverhead",
    "QuantizedTensor",
    "ReservationComparison",
    "SlotMap",
    "TierRetention",
    "kv_bytes_per_token",
    "mla_kv_bytes_per_token",
    "model_kv_bytes_per_token",
    "state_bytes_per_sequence",
    "StateShape",
    "state_shape",
    "window_shares",
    "vision_weight_bytes",
    "kv_bytes_per_token_per_device",
    "tensor_parallel_valid",
    "check_tensor_parallel",
    "DeviceShare",
    "device_share",
    "weight_bytes",
    "model_weight_bytes",
    "effective_bits_per_weight",
    "quantization_overhead",
    "min_devices_for_weights",
    "routed_expert_parameters",
    "kv_cache_bytes",
    "memory_footprint",
    "max_batch",
    "max_batch_numeric",
    "max_context",
    "memory_fit",
    "model_memory_fit",
    "MaxBatch",
    "MaxBatches",
    "model_max_batch",
    "min_tensor_parallel",
    "kv_wall",
    "precision_dividend",
    "compare_precisions",
    "reservation_vs_paging",
    "pool_admission",
    "slot_map",
    "paged_allocation",
    "kv_pool_size",
    "kv_budget",
    "tiered_retention",
    "prefix_cache_tokens",
    "prefix_cache_memory",
    "shared_block_usage",
    "lora_parameters",
    "lora_adapter_parameters",
    "lora_adapter_bytes",
    "quantize",
]
