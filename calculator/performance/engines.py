"""Serving engines: the costs of the engine loop and each engine's scheduler defaults.

:class:`Efficiency` holds the fixed costs of one iteration and of one running sequence, and the kernel
pricing (measured tables, or fixed fractions of the peaks: ``ROOFLINE`` is the chapter's pure bound).
:class:`EngineProfile` holds each engine's documented scheduler defaults with their citations and its
fitted costs; ``ENGINES`` has vLLM, SGLang, TensorRT-LLM and the engine-agnostic default. The KV
cache a replica holds follows the engine's memory policy (:func:`kv_capacity_tokens`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..memory.kv import kv_shards
from ..results import Result
from ..units import Q_, ureg

if TYPE_CHECKING:
    from .arrays import StepArrays

__all__ = [
    "ENGINES",
    "EngineProfile",
    "Efficiency",
    "engine_profile",
]


# --------------------------------------------------------------------------------------------
# Engine costs and profiles: the fixed costs, the kernel pricing, the scheduler defaults


@dataclass(frozen=True, repr=False)
class Efficiency(Result):
    """Fixed costs of the engine loop, and the kernel pricing of the step model.

    Attributes
    ----------
    hbm_bandwidth, compute, link_bandwidth : float
        Achieved fractions of HBM bandwidth, dense tensor peak and per-direction link bandwidth.
        Used only when ``kernels`` is False (the roofline-with-efficiencies pricing).
    collective_latency : Quantity [time]
        Latency floor of one all-reduce when ``kernels`` is False.
    step_overhead : Quantity [time]
        Fixed cost of one scheduler iteration (scheduling, launches, sampling), independent of size.
    sequence_overhead : Quantity [time]
        Cost per running sequence per iteration (scheduler bookkeeping, sampling and detokenizing
        one token): what makes small models CPU bound at hundreds of sequences.
    kernels : bool
        True: price kernels from the accelerator's measured tables (or the generic efficiency curve
        at its peaks). False: at the fractions above of the registry peaks.
    """

    hbm_bandwidth: float
    compute: float
    link_bandwidth: float
    collective_latency: Any
    step_overhead: Any
    sequence_overhead: Any = field(default_factory=lambda: Q_(0.0, "s"))
    kernels: bool = True

    def __post_init__(self) -> None:
        for name in ("hbm_bandwidth", "compute", "link_bandwidth"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InputError(f"Efficiency: '{name}' must be a fraction in (0, 1], got {value!r}")
        for name in ("collective_latency", "step_overhead", "sequence_overhead"):
            value = getattr(self, name)
            if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
                raise InputError(f"Efficiency: '{name}' must be a time quantity, got {value!r}")
            if not value.magnitude >= 0:
                raise InputError(f"Efficiency: '{name}' must be >= 0, got {value!r}")

    def replace(self, **changes: Any) -> Efficiency:
        """A copy with some parameters changed."""
        return dataclasses.replace(self, **changes)


#: The roofline: every peak reached, no fixed costs. A lower bound on any real step time.
ROOFLINE = Efficiency(1.0, 1.0, 1.0, Q_(0.0, "s"), Q_(0.0, "s"), kernels=False)

#: Fractions of the peaks an engine profile uses when asked to price kernels without tables
#: (``kernels=False``): round values read off the measured tables (a GEMV streams weights at about
#: 0.8 of HBM bandwidth; large GEMMs reach 0.45-0.85 of the dense peak by generation and dtype) and the
#: NCCL fit of calculator/data/calibration (0.77 of the link, 28 us floor).
GENERIC_FRACTIONS = (0.80, 0.65, 0.77, 28e-6)


@dataclass(frozen=True, repr=False)
class EngineProfile(Result):
    """A serving engine: its scheduler defaults (cited) and its fitted per-iteration costs.

    Attributes
    ----------
    name : str
        ``"vllm"``, ``"sglang"``, ``"trtllm"`` or ``"generic"``.
    efficiency : Efficiency
        Fixed costs per iteration and per running sequence (fitted), and the kernel pricing.
    memory_utilization : float
        Fraction of memory the engine claims: of the whole device (``memory_policy="device"``:
        vLLM ``gpu_memory_utilization``) or of what the weights leave free (``"free"``:
        TensorRT-LLM ``free_gpu_memory_fraction``). ``"sglang"`` computes SGLang's
        ``mem_fraction_static`` from the device memory, token budget and TP degree instead.
    memory_policy : str
        ``"device"``, ``"free"`` or ``"sglang"``, as above.
    memory_reserve : Quantity [information]
        Memory per device the engine keeps beyond its policy (activations, CUDA graphs,
        communication buffers), not available to the KV cache. Fitted within bounds.
    max_num_tokens : int
        Token budget of one iteration (decode tokens count against it where batching is mixed), on
        the largest memory tier; see ``tiers``.
    max_num_seqs : int
        Most sequences running at once (largest memory tier).
    tiers : tuple of (float, int, int)
        ``(minimum device memory in GB, max_num_tokens, max_num_seqs)``: engines pick smaller
        defaults on smaller GPUs. Empty: the two fields above everywhere.
    small_tier_devices : tuple of str
        Accelerator ids (substrings) that always get the first tier (vLLM treats any A100 so).
    chunked_prefill : bool
        Whether a prompt longer than the remaining budget is split over iterations.
    mixed_batching : bool
        True: prefill chunks share iterations with the running decodes. False: a prefill batch runs
        alone and pauses decoding while requests wait (SGLang's default).
    output_reservation : float
        Fraction of each request's output the admission policy reserves KV for (1: TensorRT-LLM's
        guaranteed-no-evict; 0.5: admit on the prompt and preempt when the cache fills).
    request_overhead : Quantity [time]
        Time every request spends outside the GPU before its first token (HTTP, tokenization,
        the client's round trip). Fitted.
    quantized_kv_precision : str
        The KV-cache precision the engine runs, with no KV flag, for FP8/FP4 weights whose checkpoint's own
        KV declaration is not in the registry (``performance.KV_PRECISION_RULE``).
    source : str
        Where the defaults and fitted values come from.
    citations : mapping of str to str
        The documentation or source line of each default.
    per_accelerator : mapping of str to Efficiency
        Costs measured on particular accelerators (registry ids), used there instead of
        ``efficiency`` (:meth:`efficiency_for`).
    """

    name: str
    efficiency: Efficiency
    memory_utilization: float
    memory_policy: str
    memory_reserve: Any
    max_num_tokens: int
    max_num_seqs: int
    tiers: tuple[tuple[float, int, int], ...]
    small_tier_devices: tuple[str, ...]
    chunked_prefill: bool
    mixed_batching: bool
    output_reservation: float
    request_overhead: Any
    source: str
    citations: Mapping[str, str] = field(default_factory=dict)
    per_accelerator: Mapping[str, Efficiency] = field(default_factory=dict)
    quantized_kv_precision: str = "fp8"

    def __post_init__(self) -> None:
        if self.quantized_kv_precision not in ("fp8", "bf16", "fp16"):
            raise InputError(
                "EngineProfile: 'quantized_kv_precision' must be 'fp8', 'bf16' or 'fp16', "
                f"got {self.quantized_kv_precision!r}"
            )
        if self.memory_policy not in ("device", "free", "sglang"):
            raise InputError(
                f"EngineProfile: 'memory_policy' must be 'device', 'free' or 'sglang', got {self.memory_policy!r}"
            )
        for name in ("memory_utilization", "output_reservation"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise InputError(f"EngineProfile: '{name}' must be in [0, 1], got {value!r}")
        for name in ("max_num_tokens", "max_num_seqs"):
            if not int(getattr(self, name)) >= 1:
                raise InputError(f"EngineProfile: '{name}' must be >= 1, got {getattr(self, name)!r}")

    def limits(self, memory_bytes: float, accelerator: str = "") -> tuple[int, int]:
        """``(max_num_tokens, max_num_seqs)`` on a device of ``memory_bytes`` (the engine's tiers)."""
        if not self.tiers:
            return int(self.max_num_tokens), int(self.max_num_seqs)
        tier = self.tiers[0]
        if not any(name in accelerator for name in self.small_tier_devices):
            for candidate in self.tiers:
                if memory_bytes >= candidate[0] * 1e9:
                    tier = candidate
        return int(tier[1]), int(tier[2])

    def efficiency_for(self, accelerator: str | None) -> Efficiency:
        """The costs on ``accelerator`` (its own if measured, else the profile's)."""
        return self.per_accelerator.get(accelerator, self.efficiency) if accelerator else self.efficiency

    def replace(self, **changes: Any) -> EngineProfile:
        """A copy with some parameters changed (``efficiency=...`` included)."""
        return dataclasses.replace(self, **changes)


_FIT_SOURCE = (
    "scheduler defaults from each engine's documentation and source (citations); per-iteration and "
    "per-request costs fitted by benchmarks/fit_performance.py on "
    "calculator/data/calibration/serving_benchmarks_h100.csv (aiconfigurator silicon samples, H100 SXM only); "
    "kernel times from calculator/data/calibration/kernels"
)

_CITATIONS = {
    "vllm": {
        "memory_utilization": "vLLM CacheConfig.gpu_memory_utilization default 0.9 (vllm/config/cache.py)",
        "max_num_tokens": "vLLM max_num_batched_tokens default 8192 for the OpenAI server on GPUs with >= 70 GiB "
        "(vllm/engine/arg_utils.py, _set_default_args)",
        "max_num_seqs": "vLLM max_num_seqs default 1024 for the OpenAI server on GPUs with >= 70 GiB "
        "(vllm/engine/arg_utils.py)",
        "chunked_prefill": "vLLM V1 enables chunked prefill by default (vllm/config/scheduler.py)",
        "mixed_batching": "vLLM V1 scheduler fills the token budget with running decodes first, then prefill "
        "chunks of waiting requests (vllm/v1/core/sched/scheduler.py)",
        "output_reservation": "vLLM allocates KV blocks for the prompt at admission and preempts (recompute) when "
        "decoding runs out of blocks (vllm/v1/core/sched/scheduler.py)",
        "quantized_kv_precision": "vLLM --kv-cache-dtype auto takes the KV cache a ModelOpt checkpoint declares "
        "(kv_cache_quant_algo FP8 -> fp8_e4m3) from 0.14.0 on (resolve_kv_cache_dtype_string in "
        "vllm/utils/torch_utils.py, PR #30785), and a compressed-tensors kv_cache_scheme from 0.15.0; else the model "
        "dtype",
    },
    "sglang": {
        "memory_utilization": "SGLang mem_fraction_static, about 0.85-0.9 for 80-192 GB GPUs at TP 1-8 "
        "(python/sglang/srt/server_args.py)",
        "max_num_tokens": "SGLang chunked_prefill_size 8192 on 80-160 GB GPUs (python/sglang/srt/server_args.py)",
        "max_num_seqs": "SGLang max_running_requests derived from the KV pool (no fixed cap by default)",
        "chunked_prefill": "SGLang chunks prompts longer than chunked_prefill_size (on by default)",
        "mixed_batching": "SGLang enable_mixed_chunk defaults to False: a prefill batch runs alone, and the "
        "scheduler prefers a new prefill batch over a decode step (python/sglang/srt/managers/scheduler.py)",
        "output_reservation": "SGLang admits with new_token_ratio of the remaining output reserved (0.7 decaying to "
        "0.1) and retracts requests when memory runs out (python/sglang/srt/managers/schedule_policy.py)",
        "quantized_kv_precision": "SGLang --kv-cache-dtype auto is the model dtype up to 0.5.2; from 0.5.4 it takes "
        "the FP8 KV cache a ModelOpt checkpoint declares (model_runner.py, modelopt_quant.py), while online "
        "--quantization fp8 and compressed-tensors FP8 (before 0.5.19) keep BF16",
    },
    "trtllm": {
        "memory_utilization": "TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction default 0.9 of the memory free "
        "after loading the model (tensorrt_llm/llmapi/llm_args.py)",
        "max_num_tokens": "trtllm-serve --max_num_tokens default 8192 (tensorrt_llm/commands/serve.py)",
        "max_num_seqs": "trtllm-serve --max_batch_size default 2048 (tensorrt_llm/commands/serve.py)",
        "chunked_prefill": "TensorRT-LLM enable_chunked_prefill default False (tensorrt_llm/llmapi/llm_args.py)",
        "mixed_batching": "TensorRT-LLM in-flight batching runs context and generation requests in one iteration",
        "output_reservation": "TensorRT-LLM capacity scheduler GUARANTEED_NO_EVICT by default: a request is admitted "
        "only when KV for its whole output fits (tensorrt_llm/llmapi/llm_args.py, SchedulerConfig)",
        "quantized_kv_precision": "TensorRT-LLM kv_cache_config.dtype 'auto' uses the checkpoint's KV quantization "
        "(validate_and_set_kv_cache_quant, tensorrt_llm/_torch/pyexecutor/model_loader.py); quantized weights come "
        "from ModelOpt checkpoints, whose PTQ scripts write kv_cache_quant_algo FP8 by default",
    },
}


def _profile(
    name: str,
    costs: tuple[float, float],
    memory: tuple[float, str, float],
    scheduler: tuple[tuple[tuple[float, int, int], ...], bool, bool, float],
    request_ms: float,
    citations: str | None,
) -> EngineProfile:
    step_ms, sequence_us = costs
    utilization, policy, reserve_gb = memory
    tiers, chunked, mixed, reservation = scheduler
    hbm, comp, link, floor = GENERIC_FRACTIONS
    quantized_kv = "bf16" if citations == "sglang" else "fp8"
    return EngineProfile(
        name=name,
        efficiency=Efficiency(hbm, comp, link, Q_(floor, "s"), Q_(step_ms, "ms"), Q_(sequence_us, "us")),
        memory_utilization=utilization,
        memory_policy=policy,
        memory_reserve=Q_(reserve_gb, "GB"),
        max_num_tokens=tiers[-1][1],
        max_num_seqs=tiers[-1][2],
        tiers=tiers,
        small_tier_devices=("a100",) if citations == "vllm" or name == "generic" else (),
        chunked_prefill=chunked,
        mixed_batching=mixed,
        output_reservation=reservation,
        request_overhead=Q_(request_ms, "ms"),
        source=_FIT_SOURCE,
        citations=dict(_CITATIONS.get(citations or "", {})),
        quantized_kv_precision=quantized_kv,
    )


#: Memory tiers of the token budget and sequence cap (minimum device GB, tokens, sequences).
_VLLM_TIERS = ((0.0, 2048, 256), (70 * 2**30 / 1e9, 8192, 1024))
_SGLANG_TIERS = (
    (0.0, 2048, 4096),
    (35 * 2**20 * 1e3 / 1e9, 4096, 4096),
    (60 * 2**20 * 1e3 / 1e9, 8192, 4096),
    (160 * 2**20 * 1e3 / 1e9, 16384, 4096),
)
_TRTLLM_TIERS = ((0.0, 8192, 2048),)

#: Engine profiles: documented scheduler defaults plus fitted costs. ``None`` is the engine-agnostic
#: default (vLLM's scheduler, costs fitted on all rows).
ENGINES: dict[str | None, EngineProfile] = {
    None: _profile("generic", (0.9928, 33.81), (0.9, "device", 2.0), (_VLLM_TIERS, True, True, 0.5), 56.44, None),
    "vllm": _profile("vllm", (1.913, 40.01), (0.9, "device", 2.0), (_VLLM_TIERS, True, True, 0.5), 56.08, "vllm"),
    "sglang": _profile(
        "sglang", (0.9655, 32.72), (0.88, "sglang", 2.0), (_SGLANG_TIERS, True, False, 0.5), 56.88, "sglang"
    ),
    "trtllm": _profile(
        "trtllm", (0.8248, 33.15), (0.9, "free", 2.0), (_TRTLLM_TIERS, False, True, 1.0), 56.22, "trtllm"
    ),
}


def engine_profile(engine: str | EngineProfile | None) -> EngineProfile:
    """The profile of ``engine`` (a name, a profile, or ``None`` for the engine-agnostic default)."""
    if isinstance(engine, EngineProfile):
        return engine
    key = engine.lower().replace("-", "").replace("_", "") if isinstance(engine, str) else engine
    aliases: dict[str | None, str | None] = {"tensorrtllm": "trtllm", "trt": "trtllm", "generic": None}
    if not isinstance(key, str | None):
        raise InputError(f"argument 'engine' must be an engine name or None, got {engine!r}")
    key = aliases.get(key, key)
    if key not in ENGINES:
        known = ", ".join(sorted(str(k) for k in ENGINES if k))
        raise InputError(f"argument 'engine' must be one of {known} or None, got {engine!r}")
    return ENGINES[key]


# --------------------------------------------------------------------------------------------
# The KV cache a replica holds under an engine's memory policy


def kv_capacity_tokens(a: StepArrays, profile: EngineProfile, tensor_parallel: Any) -> Any:
    """KV-cache tokens a replica of ``tensor_parallel`` devices holds under ``profile``'s memory policy."""
    per_device = usable_kv_bytes(a, profile, tensor_parallel)
    return np.maximum(per_device, 0.0) * kv_shards(tensor_parallel, a.kv_shards_max) / a.kv_bytes_per_token


def usable_kv_bytes(a: StepArrays, profile: EngineProfile, tensor_parallel: Any) -> Any:
    """KV-cache bytes per device under the engine's memory policy (negative: the weights do not fit)."""
    tp = np.asarray(tensor_parallel, dtype=float)
    weights = a.weight_bytes / tp
    reserve = profile.memory_reserve.m_as("B")
    if profile.memory_policy == "free":
        free = a.memory - weights - reserve
        return np.where(free > 0, profile.memory_utilization * free, free)
    fraction = (
        sglang_memory_fraction(a.memory, profile.limits(a.memory)[0], tp)
        if (profile.memory_policy == "sglang")
        else profile.memory_utilization
    )
    return fraction * a.memory - weights - reserve


def sglang_memory_fraction(memory: float, chunk: float, tp: Any) -> Any:
    """SGLang's default ``mem_fraction_static`` (python/sglang/srt/server_args.py, 0.5.3-0.5.9).

    ``(M - reserved) / M`` with ``reserved = 512 + 1.5 max(chunk, 2048) + 2 g + 1024 t / 8`` MiB, ``g``
    the CUDA-graph batch (256 below TP 4 on GPUs under 160 GB, else 512), and at least 10 GiB on
    GPUs over 60 GB.

    Examples
    --------
    >>> round(float(sglang_memory_fraction(81559 * 2**20, 8192, 1)), 3)  # H100 80GB, TP 1
    0.835
    """
    mib = memory / 2**20
    tp = np.asarray(tp, dtype=float)
    graphs = np.where((tp >= 4) | (memory >= 160e9), 512.0, 256.0)
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graphs + tp * 1024 / 8
    reserved = np.where(mib > 60 * 1024, np.maximum(reserved, 10240.0), reserved)
    return (mib - reserved) / mib
