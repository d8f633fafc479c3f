"""Step-time model on measured kernels, and the continuous-batching scheduler of a serving engine.

Two layers, each physical:

**Iteration time** (:func:`iteration_seconds`). One scheduler iteration runs the decode tokens of
the running sequences and any prefill tokens scheduled with them through every layer: the matrix
products at their actual shapes (QKV, output, MLP or the experts a batch touches, the LM head),
prefill and decode attention, two all-reduces per layer under tensor parallelism, and the
activation traffic of norms and residuals. Kernel times come from measured tables
(:mod:`calculator.kernels`; aiconfigurator-core microbenchmarks per GPU and dtype), or, for an
accelerator without tables, from its registry peaks times a generic efficiency curve. The serving
engine adds a fixed cost per iteration and a cost per running sequence (scheduling, sampling,
detokenization), the :class:`Efficiency` fields fitted on the H100 benchmarks. ``Efficiency(...,
kernels=False)`` prices every kernel at fixed fractions of the peaks instead (``ROOFLINE``: the
chapter's pure bound).

**Scheduler** (:func:`closed_loop_seconds`). Engines run iteration-level continuous batching with a
token budget per iteration (vLLM ``max_num_batched_tokens``, SGLang ``chunked_prefill_size``,
TensorRT-LLM ``max_num_tokens``), admit waiting requests once per iteration while KV memory allows,
and either mix prefill chunks into decode iterations (vLLM, TensorRT-LLM) or run prefill batches
that pause decoding (SGLang). :class:`EngineProfile` holds each engine's documented defaults with
their citations. A closed-loop benchmark starts all clients at once and sends about ten requests per
client; the model follows the prefill groups that burst creates through the run (see
``docs/performance-model.md``). Every function is vectorized over its array arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import accelerator_of, count, model_of, renamed
from ..errors import InputError
from ..memory import check_tensor_parallel, effective_bits_per_weight, model_kv_bytes_per_token, weight_bytes
from ..memory.kv import kv_shard_limit, kv_shards
from ..parallelism import ring_allreduce_time
from ..phases import attention_flops_per_pair, decode_flops, prefill_flops, roofline_time
from ..precision import PRECISIONS, check_precision
from ..results import Result
from ..types import AcceleratorRef, Count, ModelRef, Tokens
from ..units import Q_, ureg

if TYPE_CHECKING:
    from ..registry import Registry


__all__ = [
    "ENGINES",
    "WEIGHT_BITS",
    "BenchmarkPrediction",
    "EngineProfile",
    "Efficiency",
    "compute_precision",
    "decode_step_time",
    "engine_profile",
    "iteration_seconds",
    "predict_benchmark",
    "prefill_time",
    "StepArrays",
    "step_arrays",
]

#: Stored bits per weight of each serving precision, scales included: FP8 keeps one scale per
#: 128x128 block (negligible), INT4 one FP16 scale per group of 128 weights (AWQ/GPTQ layout),
#: FP4 one FP8 scale per 16 weights (NVFP4). Embeddings stay at 16 bits (see ``step_arrays``).
WEIGHT_BITS: dict[str, float] = {
    "fp64": 64.0,
    "fp32": 32.0,
    "tf32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": effective_bits_per_weight.numeric(bits=4, block_size=128, scale_bits=16),
    "fp4": effective_bits_per_weight.numeric(bits=4, block_size=16, scale_bits=8),
}

#: Where an accelerator lacks tensor throughput at a precision, weights are dequantized and the
#: matrix products run at the first of these it has (W8A16 on an A100, W4A16 on an H100).
_COMPUTE_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp8", "bf16", "fp16"),
    "int4": ("int4", "fp8", "bf16", "fp16"),
    "fp8": ("fp8", "bf16", "fp16"),
    "int8": ("int8", "bf16", "fp16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "tf32": ("tf32", "fp32"),
    "fp32": ("fp32", "tf32"),
    "fp64": ("fp64",),
}
# int4/fp4 weights multiply as 16-bit activations on GPUs whose int4/fp4 rate is for int4 activations.
_WEIGHT_ONLY = {"int4"}

#: GEMM table of each weight precision: the table's weights have that storage width.
_TABLE_OF_WEIGHTS = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int8": "fp8", "fp4": "fp4", "int4": "fp4"}

ACTIVATION_BYTES = 2.0  # all-reduce payloads and activations are BF16/FP16
#: Reads and writes of a hidden-size activation per layer and token outside the matrix products and
#: attention (two RMSNorms, two residual adds, RoPE and the activation quantization): HBM traffic.
ELEMENTWISE_PASSES = 8
#: Decode attention of a latent (MLA) cache is compute bound at this fraction of the 16-bit peak.
MLA_DECODE_COMPUTE_FRACTION = 0.5
#: Log2-spaced token counts on which an iteration's per-layer linear time is tabulated.
_M_GRID = np.arange(0.0, 17.01, 0.25)


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
    wave_persistence : float
        In [0, 1]: how much of the wave a request's prompt waits behind (1: all clients' prompts
        keep arriving together, as SGLang's prefill-first scheduling enforces; 0: arrivals spread
        out, each prompt prefilled alone). Fitted for engines that mix prefill into decoding.
    wave_exponent : float
        In (0, 1]: how a wave disperses as it grows: a request waits for
        ``persistence x (G - 1) ** exponent / 2`` of the other ``G - 1`` prefills (1: the whole
        half-wave, SGLang's prefill-first scheduling; below 1: large waves spread out). Fitted for
        engines that mix prefill into decoding.
    request_overhead : Quantity [time]
        Time every request spends outside the GPU before its first token (HTTP, tokenization,
        the client's round trip). Fitted.
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
    wave_persistence: float
    request_overhead: Any
    source: str
    citations: Mapping[str, str] = field(default_factory=dict)
    per_accelerator: Mapping[str, Efficiency] = field(default_factory=dict)
    wave_exponent: float = 1.0

    def __post_init__(self) -> None:
        if self.memory_policy not in ("device", "free", "sglang"):
            raise InputError(
                f"EngineProfile: 'memory_policy' must be 'device', 'free' or 'sglang', got {self.memory_policy!r}"
            )
        for name in ("memory_utilization", "output_reservation", "wave_persistence", "wave_exponent"):
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
    },
}


def _profile(
    name: str,
    costs: tuple[float, float],
    memory: tuple[float, str, float],
    scheduler: tuple[tuple[tuple[float, int, int], ...], bool, bool, float],
    behaviour: tuple[float, float, float],
    citations: str | None,
) -> EngineProfile:
    step_ms, sequence_us = costs
    utilization, policy, reserve_gb = memory
    tiers, chunked, mixed, reservation = scheduler
    persistence, exponent, request_ms = behaviour
    hbm, comp, link, floor = GENERIC_FRACTIONS
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
        wave_persistence=persistence,
        wave_exponent=exponent,
        request_overhead=Q_(request_ms, "ms"),
        source=_FIT_SOURCE,
        citations=dict(_CITATIONS.get(citations or "", {})),
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
    None: _profile(
        "generic", (0.8777, 26.07), (0.9, "device", 2.0), (_VLLM_TIERS, True, True, 0.5), (1.0, 0.372, 80.0), None
    ),
    "vllm": _profile(
        "vllm", (1.798, 36.31), (0.9, "device", 2.0), (_VLLM_TIERS, True, True, 0.5), (0.9863, 0.344, 25.6), "vllm"
    ),
    "sglang": _profile(
        "sglang", (0.9266, 26.24), (0.88, "sglang", 2.0), (_SGLANG_TIERS, True, False, 0.5), (1.0, 1.0, 80.0), "sglang"
    ),
    "trtllm": _profile(
        "trtllm", (0.7604, 24.54), (0.9, "free", 2.0), (_TRTLLM_TIERS, False, True, 1.0), (1.0, 0.4305, 80.0), "trtllm"
    ),
}


def engine_profile(engine: str | EngineProfile | None) -> EngineProfile:
    """The profile of ``engine`` (a name, a profile, or ``None`` for the engine-agnostic default)."""
    if isinstance(engine, EngineProfile):
        return engine
    key = engine.lower().replace("-", "").replace("_", "") if isinstance(engine, str) else engine
    aliases: dict[str | None, str | None] = {"tensorrtllm": "trtllm", "trt": "trtllm", "generic": None}
    key = aliases.get(key, key)
    if key not in ENGINES:
        known = ", ".join(sorted(str(k) for k in ENGINES if k))
        raise InputError(f"argument 'engine' must be one of {known} or None, got {engine!r}")
    return ENGINES[key]


# --------------------------------------------------------------------------------------------
# Resolving registry objects into the arrays the step model needs


def compute_precision(accelerator: AcceleratorRef, precision: str) -> str:
    """The precision the matrix products run at for weights stored at ``precision``.

    The accelerator's own rate where it has one (FP8 on an H100); otherwise the weights are
    dequantized to the first precision the accelerator supports (FP8 weights on an A100 run W8A16
    at the BF16 rate). INT4 weights always multiply as 16-bit activations (W4A16).

    Examples
    --------
    >>> compute_precision("a100-sxm-80gb", "fp8"), compute_precision("h100-sxm", "fp8")
    ('bf16', 'fp8')
    """
    device = accelerator_of(accelerator)
    name = check_precision(precision)
    chain = _COMPUTE_FALLBACK[name][1:] if name in _WEIGHT_ONLY else _COMPUTE_FALLBACK[name]
    for candidate in chain:
        if candidate in device.dense_throughput:
            return candidate
    raise InputError(
        f"accelerator '{device.id}' has no tensor throughput usable for {name} weights "
        f"(it lists {sorted(device.dense_throughput)})"
    )


@dataclass(eq=False)
class StepArrays:
    """One (model, accelerator, precision) as the step model reads it: plain floats in SI units.

    ``step_arrays`` builds it; ``iteration_seconds`` and the sizer and simulator price iterations from
    it. Shapes are per layer and whole-model (before tensor-parallel sharding).
    """

    weight_bytes: float  #: resident weight bytes of the whole model (embeddings kept at 16 bits)
    streamed_params: float  #: parameters read by a one-token decode step (all but the input embedding)
    shared_params: float  #: parameters every token reads in a mixture-of-experts model
    expert_params: float  #: parameters of one routed expert
    experts: float
    experts_per_token: float
    bytes_per_param: float
    kv_bytes_per_token: float
    kv_shards_max: float  #: the KV cache splits over at most this many tensor-parallel ranks
    attention_flops_per_pair: float  #: attention FLOP per (query, key) pair over all layers
    layers: float
    hidden: float
    heads: float
    kv_heads: float
    head_dim: float
    mla: float  #: 1.0 for multi-head latent attention
    kv_lora_rank: float
    q_lora_rank: float
    qk_nope_head_dim: float
    qk_rope_head_dim: float
    v_head_dim: float
    mlp_width: float  #: a dense layer's MLP width (0 for mixture-of-experts)
    expert_width: float
    shared_expert_width: float
    vocab: float
    accelerator: str  #: the accelerator's registry id
    memory: float  #: bytes per device (physical)
    hbm_bandwidth: float  #: B/s
    peak_flops: float  #: FLOP/s at the weights' compute precision
    bf16_flops: float  #: FLOP/s at BF16
    link_bandwidth: float  #: B/s per direction (NVLink, or the host link where there is none)
    tables: Any  #: the accelerator's :class:`~calculator.kernels.KernelTables`
    dtype: str  #: the GEMM table of the weights
    measured: bool  #: whether measured kernel tables cover the accelerator and dtype
    curves: dict[float, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)  #: cache per TP degree

    def __getitem__(self, key: str) -> Any:
        """The old dict access (``arrays["kv_bytes_per_token"]``), kept for one release."""
        import warnings

        warnings.warn(
            "step_arrays() returns a StepArrays object: read fields as attributes (arrays.kv_bytes_per_token); "
            "item access goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, key)


def step_arrays(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    kv_precision: str | None = None,
    *,
    registry: Registry | None = None,
) -> StepArrays:
    """The numbers the step model needs for one (model, accelerator, precision), in SI units.

    Returns a :class:`StepArrays`. Ids resolve in ``registry`` (default: the packaged registry), and an
    entry object's own ids (its host link) in the registry it came from.

    Examples
    --------
    >>> step_arrays("llama-3.1-70b", "h100-sxm", "fp8").kv_bytes_per_token
    327680.0
    """
    from ..kernels import tables_for

    spec = model_of(model, registry)
    device = accelerator_of(accelerator, registry)
    name = check_precision(precision)
    if spec.kind != "transformer":
        raise InputError(f"the performance model covers transformer LLMs; model '{spec.id}' is a {spec.kind} model")
    kv_name = check_precision(kv_precision or ("bf16" if PRECISIONS[name] < 16 else name), "kv_precision")
    hidden = spec.hidden_size or spec.attention_heads * spec.head_dim
    embedding = float(spec.vocab_size * hidden) if spec.vocab_size else 0.0
    bits = WEIGHT_BITS[name]
    quantized = spec.parameters - embedding
    resident = weight_bytes.numeric(parameters=quantized, bits_per_weight=bits) + weight_bytes.numeric(
        parameters=embedding, bits_per_weight=max(bits, 16.0)
    )
    active = spec.active - embedding
    k, experts = spec.experts_per_token, spec.experts
    per_expert = (spec.parameters - spec.active) / (experts - k) if experts > k else 0.0
    shared = active - k * per_expert
    kv = model_kv_bytes_per_token(spec, kv_name).m_as("B/token")
    link = device.nvlink_bandwidth
    if link is None:
        from ..registry import registry_of

        host = registry_of(device, registry).interconnect(device.host_link) if device.host_link else None
        link = host.bandwidth if host is not None else Q_(16, "GB/s")
    layers = float(spec.layers)
    heads, head_dim = float(spec.attention_heads), float(spec.head_dim)
    kv_heads = float(spec.kv_heads or spec.attention_heads)
    mla = spec.attention == "mla" and spec.kv_lora_rank is not None
    if mla:
        nope, rope = float(spec.qk_nope_head_dim or head_dim), float(spec.qk_rope_head_dim or 0)
        value = float(spec.v_head_dim or head_dim)
        q_lora = float(spec.q_lora_rank or 0)
        attention_params = (
            (hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope))
            + hidden * (spec.kv_lora_rank + rope)
            + spec.kv_lora_rank * heads * (nope + value)
            + heads * value * hidden
        )
    else:
        nope = rope = value = q_lora = 0.0
        attention_params = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden
    lm_head = embedding
    if experts > 1:
        expert_width = per_expert / (3 * hidden * layers)
        shared_width = spec.shared_experts * expert_width
        mlp_width = 0.0
    else:
        expert_width = shared_width = 0.0
        derived = max(active - lm_head - layers * attention_params, 0.0) / (3 * hidden * layers)
        mlp_width = float(spec.intermediate_size or derived)
    tables = tables_for(device)
    return StepArrays(
        weight_bytes=float(resident),
        streamed_params=float(active),
        shared_params=float(shared),
        expert_params=float(per_expert),
        experts=float(experts),
        experts_per_token=float(k),
        bytes_per_param=bits / 8,
        kv_bytes_per_token=float(kv),
        kv_shards_max=float(kv_shard_limit(spec)),
        attention_flops_per_pair=attention_flops_per_pair(spec).m_as("FLOP"),
        layers=layers,
        hidden=float(hidden),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        mla=float(mla),
        kv_lora_rank=float(spec.kv_lora_rank or 0),
        q_lora_rank=q_lora,
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=value,
        mlp_width=mlp_width,
        expert_width=float(expert_width),
        shared_expert_width=float(shared_width),
        vocab=float(spec.vocab_size or 0),
        accelerator=device.id,
        memory=device.memory.m_as("B"),
        hbm_bandwidth=device.memory_bandwidth.m_as("B/s"),
        peak_flops=device.peak_throughput(compute_precision(device, name)).m_as("FLOP/s"),
        bf16_flops=device.peak_throughput(compute_precision(device, "bf16")).m_as("FLOP/s"),
        link_bandwidth=link.m_as("B/s"),
        tables=tables,
        dtype=_TABLE_OF_WEIGHTS.get(name, "bf16"),
        measured=bool(tables.measured and _TABLE_OF_WEIGHTS.get(name, "bf16") in tables.measured_dtypes),
    )


# --------------------------------------------------------------------------------------------
# Kernel pricing: per-layer linear time over a grid of token counts, per tensor-parallel degree


def _layer_gemms(a: StepArrays, tp: float) -> list[tuple[float, float]]:
    """(n, k) of the dense matrix products of one layer on one rank (tokens are the m dimension)."""
    h, heads, hd = a.hidden, a.heads, a.head_dim
    heads_r = heads / tp
    if a.mla:
        nope, rope, value, lora = a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim, a.kv_lora_rank
        q_lora = a.q_lora_rank
        shapes = [(lora + rope, h)]  # KV down-projection (replicated)
        shapes += [(q_lora, h), (heads_r * (nope + rope), q_lora)] if q_lora else [(heads_r * (nope + rope), h)]
        shapes += [(heads_r * (nope + value), lora), (h, heads_r * value)]
    else:
        kv_r = max(a.kv_heads / tp, 1.0)
        shapes = [((heads_r + 2 * kv_r) * hd, h), (h, heads_r * hd)]
    if a.mlp_width > 0:
        width = a.mlp_width / tp
        shapes += [(2 * width, h), (h, width)]
    if a.shared_expert_width > 0:
        width = a.shared_expert_width / tp
        shapes += [(2 * width, h), (h, width)]
    return shapes


def _curves(a: StepArrays, tp: float) -> dict[str, np.ndarray]:
    """Per-layer time of the token-proportional work at the token counts of ``_M_GRID`` (cached)."""
    cache = a.curves
    if tp in cache:
        return cache[tp]
    from ..kernels import gemm_seconds, grouped_gemm_seconds

    tables, dtype = a.tables, a.dtype
    m = 2.0**_M_GRID
    linear = np.zeros_like(m)
    for n, k in _layer_gemms(a, tp):
        linear += gemm_seconds(tables, dtype, m, max(n, 1.0), max(k, 1.0))
    if a.experts > 1:
        # The experts run as one grouped GEMM per projection (one launch over every touched expert):
        # priced as a GEMM of the touched experts' stacked weights at the tokens each expert gets.
        e, top = a.experts, a.experts_per_token
        touched = e * (1 - (1 - top / e) ** m)
        per_expert_tokens = m * top / touched
        width = a.expert_width / tp
        h = a.hidden
        for n, k in ((2 * width, h), (h, width)):
            linear += grouped_gemm_seconds(tables, dtype, per_expert_tokens, n, k, touched)
        linear += gemm_seconds(tables, "bf16", m, e, h)  # the router
    elementwise = m * ELEMENTWISE_PASSES * a.hidden * ACTIVATION_BYTES / a.hbm_bandwidth
    lm_head = gemm_seconds(tables, dtype, m, max(a.vocab / tp, 1.0), a.hidden) if a.vocab else np.zeros_like(m)
    out = {"layer": np.log2(linear + elementwise), "lm_head": np.log2(np.maximum(lm_head, 1e-12))}
    cache[tp] = out
    return out


def _interp_curve(curve: np.ndarray, tokens: Any) -> np.ndarray:
    """Seconds at ``tokens`` (array) on a per-token-count curve; linear beyond the grid."""
    lm = np.log2(np.maximum(np.asarray(tokens, dtype=float), 1.0))
    beyond = np.maximum(lm - _M_GRID[-1], 0.0)
    return 2.0 ** (np.interp(lm, _M_GRID, curve) + beyond)


def _kernel_iteration(
    a: StepArrays,
    tp: float,
    decode: Any,
    context: Any,
    tokens: Any,
    prefill: Any,
    requests: Any,
    prior: Any,
) -> np.ndarray:
    """Seconds of the GPU work of one iteration on one tensor-parallel degree (measured kernels)."""
    from ..kernels import (
        DECODE_REFERENCE_BYTES,
        allreduce_seconds,
        decode_attention_seconds,
        prefill_attention_seconds,
    )

    tables = a.tables
    layers = a.layers
    curves = _curves(a, tp)
    m = decode * tokens + prefill
    logits = decode * tokens + requests
    t = layers * _interp_curve(curves["layer"], m)
    t = t + np.where(logits > 0, _interp_curve(curves["lm_head"], np.maximum(logits, 1.0)), 0.0)
    shards = kv_shards(tp, a.kv_shards_max)
    per_token_layer = a.kv_bytes_per_token / layers / shards
    pair_flops = a.attention_flops_per_pair / layers / tp
    # Decode attention: bandwidth bound on the KV bytes read (measured), compute bound for MLA.
    reads = decode_attention_seconds(
        tables, np.maximum(decode, 1.0), context * per_token_layer / DECODE_REFERENCE_BYTES
    )
    if a.mla:
        compute = decode * tokens * context * pair_flops / (MLA_DECODE_COMPUTE_FRACTION * a.bf16_flops)
        reads = np.maximum(reads, compute)
    t = t + layers * np.where(decode > 0, reads, 0.0)
    # Prefill attention: the causal pairs of the scheduled chunk after ``prior`` cached tokens.
    per_request = prefill / np.maximum(requests, 1e-9)
    pairs = prefill * prior + prefill * (per_request + 1) / 2
    flops = pairs * pair_flops
    att = prefill_attention_seconds(tables, flops, per_request + prior, np.maximum(requests, 1.0) * a.heads / tp)
    t = t + layers * np.where(prefill > 0, att, 0.0)
    if tp > 1:
        t = t + 2 * layers * allreduce_seconds(tables, tp, m * a.hidden * ACTIVATION_BYTES, a.link_bandwidth)
    return t


def _streamed_bytes(a: StepArrays, batch: Any) -> Any:
    """Weight bytes one decode step reads: shared weights plus the experts the batch touches."""
    if a.experts <= 1:
        return a.streamed_params * a.bytes_per_param
    e, k = a.experts, a.experts_per_token
    touched = e * (1 - (1 - k / e) ** batch)
    return (a.shared_params + touched * a.expert_params) * a.bytes_per_param


def _allreduce_seconds(a: StepArrays, eff: Efficiency, tp: Any, message_bytes: Any) -> Any:
    """One ring all-reduce of ``message_bytes`` over ``tp`` ranks at the achieved link bandwidth."""
    return ring_allreduce_time.numeric(
        message=message_bytes,
        devices=tp,
        bandwidth=eff.link_bandwidth * a.link_bandwidth,
        latency=0.0,
        floor=eff.collective_latency.m_as("s"),
    )


def _roofline_iteration(
    a: StepArrays,
    eff: Efficiency,
    tp: Any,
    decode: Any,
    context: Any,
    tokens: Any,
    prefill: Any,
    requests: Any,
    prior: Any,
) -> Any:
    """Seconds of one iteration priced at fixed fractions of the peaks (``kernels=False``)."""
    shards = kv_shards(tp, a.kv_shards_max)
    m = decode * tokens + prefill
    memory_bytes = _streamed_bytes(a, np.maximum(m, 1.0)) / tp + decode * context * a.kv_bytes_per_token / shards
    per_request = prefill / np.maximum(requests, 1e-9)
    flops = (
        decode_flops.numeric(
            active_parameters=a.streamed_params,
            batch=decode * tokens,
            context=context,
            attention_flops=a.attention_flops_per_pair,
        )
        + np.maximum(requests, 0.0)
        * prefill_flops.numeric(
            active_parameters=a.streamed_params,
            prompt_tokens=np.maximum(per_request, 1.0),
            attention_flops=a.attention_flops_per_pair,
            cached_tokens=prior,
        )
        * (prefill > 0)
    ) / tp
    step = roofline_time.numeric(
        flops=flops,
        bytes_moved=memory_bytes,
        peak_throughput=eff.compute * a.peak_flops,
        memory_bandwidth=eff.hbm_bandwidth * a.hbm_bandwidth,
    )
    return step + 2 * a.layers * _allreduce_seconds(a, eff, tp, m * a.hidden * ACTIVATION_BYTES)


@renamed(tp="tensor_parallel")
def iteration_seconds(
    a: StepArrays,
    eff: Efficiency,
    tensor_parallel: Count,
    decode: Count,
    context: Tokens = 0,
    prefill: Tokens = 0,
    requests: Count = 0,
    prior: Tokens = 0,
    tokens: Tokens = 1,
) -> Any:
    """Seconds of one scheduler iteration (plain arrays, broadcast).

    Parameters
    ----------
    a : StepArrays
        From :func:`step_arrays`.
    eff : Efficiency
        Fixed costs and kernel pricing.
    tensor_parallel : int or array
        Tensor-parallel degree.
    decode, context : array
        Decoding sequences and the tokens each holds.
    prefill, requests, prior : array
        Prompt tokens scheduled in the iteration, over how many requests, and the tokens of those
        requests already cached (earlier chunks).
    tokens : array
        Tokens each decoding sequence adds (``k + 1`` when a speculative round verifies ``k``).
    """
    tp, decode, context, prefill, requests, prior, tokens = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (tensor_parallel, decode, context, prefill, requests, prior, tokens))
    )
    fixed = eff.step_overhead.m_as("s") + eff.sequence_overhead.m_as("s") * (decode + requests)
    if not eff.kernels:
        return fixed + _roofline_iteration(a, eff, tp, decode, context, tokens, prefill, requests, prior)
    out = np.empty(tp.shape)
    for degree in np.unique(tp):
        mask = tp == degree
        out[mask] = _kernel_iteration(
            a, float(degree), decode[mask], context[mask], tokens[mask], prefill[mask], requests[mask], prior[mask]
        )
    return fixed + out if out.ndim else fixed + float(out)


def decode_step_seconds(
    a: StepArrays, eff: Efficiency, tensor_parallel: Any, batch: Any, context: Any, tokens: Any = 1
) -> Any:
    """One decode step of ``batch`` sequences holding ``context`` tokens each (plain arrays).

    ``tokens`` new tokens per sequence are processed in the step (more than one when a speculative
    round verifies its draft): compute and all-reduce payloads scale with it, weight and KV traffic
    do not.
    """
    return iteration_seconds(a, eff, tensor_parallel, batch, context, tokens=tokens)


def prefill_seconds(a: StepArrays, eff: Efficiency, tensor_parallel: Any, prompt: Any) -> Any:
    """Prefill of one prompt of ``prompt`` tokens alone in an iteration (plain arrays)."""
    return iteration_seconds(a, eff, tensor_parallel, 0, 0, prefill=prompt, requests=1)


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


# --------------------------------------------------------------------------------------------
# Public, unit-carrying step times


def _seconds(values: Any) -> Any:
    """Seconds as a quantity; a 0-d result becomes a plain float."""
    return Q_(float(values) if np.ndim(values) == 0 else values, "s")


def _efficiency(engine: Any, efficiency: Efficiency | None, accelerator_id: str | None = None) -> Efficiency:
    """The costs to price with: those given, or the engine's on this accelerator (a resolved id)."""
    if efficiency is not None:
        return efficiency
    return engine_profile(engine).efficiency_for(accelerator_id)


def _counts(function: str, argument: str, value: Any, minimum: int = 1) -> np.ndarray:
    return np.asarray(count(function, argument, value, minimum), dtype=float)


def _tp(model: Any, tensor_parallel: Any, function: str) -> np.ndarray:
    return np.asarray(check_tensor_parallel(model_of(model), tensor_parallel, function), dtype=float)


def decode_step_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    batch: Count,
    context: Tokens,
    *,
    engine: str | EngineProfile | None = None,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
) -> Any:
    r"""Time of one decode step of a tensor-parallel replica.

    Parameters
    ----------
    model, accelerator : str or registry object
        Registry ids (or aliases such as ``"meta-llama/Llama-3.1-70B"``) or objects.
    precision : str
        Weight precision (``"bf16"``, ``"fp8"``, ``"int4"``, ``"fp4"``, ...).
    tensor_parallel, batch : int or array
        Devices per replica and sequences in the batch.
    context : int or array
        Tokens held per sequence (prompt plus tokens generated so far).
    engine : str, EngineProfile or None
        Whose per-iteration costs to use; ``None`` for the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the engine's costs and pricing (``ROOFLINE`` gives the pure roofline bound).
    kv_precision : str, optional
        KV-cache precision; defaults to 16-bit.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    With measured kernels, ``t = t_0 + c B + L [g(B) + a_dec(B, S) + 2 r(B H b_a)] + h(B)``: the
    iteration cost, the per-sequence cost, and per layer the matrix products ``g`` at ``B`` tokens,
    decode attention, two all-reduces, plus the LM head. With ``kernels=False`` the pricing is the
    roofline with efficiencies:

    .. math::
        t_{\mathrm{step}} = t_0 + \max\!\left(\frac{W_s/t + B S m_{\mathrm{tok}}/t_{kv}}{f_{bw} BW},
        \frac{B (2 N_a + 4 S d_a L)/t}{f_c R}\right) + 2 L \left(\alpha + \frac{2(t-1)}{t}
        \frac{B H b_a}{f_l B_l}\right)

    Examples
    --------
    The chapter's bandwidth floor of the reference replica (70B FP16 over 8 H100s, §10.15.1):

    >>> from calculator.performance import ROOFLINE
    >>> step = decode_step_time("chapter-70b-mha", "h100-sxm", "fp16", 8, 1, 1, efficiency=ROOFLINE)
    >>> round(step.m_as("ms"), 1)
    5.2
    """
    a = step_arrays(model, accelerator, precision, kv_precision)
    tp = _tp(model, tensor_parallel, "decode_step_time")
    seconds = decode_step_seconds(
        a,
        _efficiency(engine, efficiency, a.accelerator),
        tp,
        _counts("decode_step_time", "batch", batch),
        _counts("decode_step_time", "context", context, 0),
    )
    return _seconds(seconds)


def prefill_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    prompt_tokens: Tokens,
    *,
    engine: str | EngineProfile | None = None,
    efficiency: Efficiency | None = None,
) -> Any:
    """Time to prefill one prompt alone on a tensor-parallel replica.

    Examples
    --------
    >>> prefill_time("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024).to("ms")  # doctest: +ELLIPSIS
    <Quantity(..., 'millisecond')>
    """
    a = step_arrays(model, accelerator, precision)
    tp = _tp(model, tensor_parallel, "prefill_time")
    prompt = _counts("prefill_time", "prompt_tokens", prompt_tokens)
    seconds = prefill_seconds(a, _efficiency(engine, efficiency, a.accelerator), tp, prompt)
    return _seconds(seconds)


# --------------------------------------------------------------------------------------------
# Closed-loop benchmark


@dataclass(frozen=True, repr=False)
class BenchmarkPrediction(Result):
    """What a closed-loop serving benchmark would report (means over the run), with its error band.

    Attributes
    ----------
    ttft, tpot : Quantity [time]
        Mean time to first token and mean time per output token after the first.
    ttft_interval, tpot_interval : tuple of Quantity
        ``(low, high)``: the range that held the measured value in 80 % of cross-validated
        predictions (``calculator.uncertainty``), wider where the accelerator has no kernel tables.
    throughput : Quantity [request / time]
        Completed requests per second.
    output_throughput : Quantity [token / time]
        Output tokens per second (whole replica).
    active_batch : float or array
        Sequences decoding together (the concurrency, or the KV-cache limit if lower).
    max_concurrency : float or array
        Sequences the KV cache admits at the benchmark's lengths under the engine's policy.
    memory_limited : bool or array
        True where clients wait for a KV slot (concurrency above ``max_concurrency``).
    prefill_time, decode_step_time : Quantity [time]
        One prompt's prefill alone and the decode step at the active batch.
    engine : str
        The engine profile used.
    measured_kernels : bool
        True when the step times come from kernel measurements of this accelerator and precision;
        False when they are the generic efficiency curve at the registry peaks.
    """

    ttft: Any
    tpot: Any
    ttft_interval: Any
    tpot_interval: Any
    throughput: Any
    output_throughput: Any
    active_batch: Any
    max_concurrency: Any
    memory_limited: Any
    prefill_time: Any
    decode_step_time: Any
    engine: str
    measured_kernels: bool


#: Requests each client sends in a benchmark run (the usual harness sends about ten times the
#: concurrency): the burst of the first wave is averaged over this many requests per client.
REQUESTS_PER_CLIENT = 10


def closed_loop_seconds(
    a: StepArrays,
    profile: EngineProfile,
    tp: Any,
    input_tokens: Any,
    output_tokens: Any,
    concurrency: Any,
    efficiency: Efficiency | None = None,
    requests_per_client: float = REQUESTS_PER_CLIENT,
) -> dict[str, Any]:
    """The closed-loop benchmark model on plain arrays (seconds); see :func:`predict_benchmark`."""
    eff = efficiency or profile.efficiency
    tp, inputs, outputs, clients = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (tp, input_tokens, output_tokens, concurrency))
    )
    decode_steps = np.maximum(outputs - 1, 1.0)
    context = inputs + outputs / 2
    # Admission: KV for the prompt plus the reserved share of the output; a sequence cap.
    reserved = inputs + profile.output_reservation * outputs
    kv_limit = np.floor(kv_capacity_tokens(a, profile, tp) / reserved)
    tokens_cap, seqs_cap = profile.limits(a.memory, a.accelerator)
    budget = float(tokens_cap)
    max_seqs = float(min(seqs_cap, tokens_cap) if profile.mixed_batching else seqs_cap)
    batch = np.maximum(np.minimum(np.minimum(clients, kv_limit), max_seqs), 1.0)
    t_dec = iteration_seconds(a, eff, tp, batch, context)
    overhead = profile.request_overhead.m_as("s")

    # The first wave: every client's prompt arrives at once and is prefilled budget by budget.
    burst_iterations = np.ceil(batch * inputs / budget)
    burst_tokens = batch * inputs / burst_iterations
    t_burst = iteration_seconds(a, eff, tp, 0, 0, burst_tokens, burst_tokens / inputs, 0)
    first_wave = overhead + (burst_iterations + 1) / 2 * t_burst

    if profile.mixed_batching:
        # Each prompt is prefilled beside the running decodes: in full-budget chunks plus a
        # remainder where the engine chunks, whole in one iteration where it does not.
        room = np.maximum(budget - batch, budget / 4)
        running = np.maximum(batch - 1, 0.0)
        if profile.chunked_prefill:
            full = np.floor(inputs / room)
            rest = inputs - full * room
            t_full = iteration_seconds(a, eff, tp, running, context, room, room / inputs, inputs / 2 * (full > 1))
        else:
            full = np.zeros_like(inputs)
            rest = inputs
            t_full = np.zeros_like(inputs)
        t_rest = iteration_seconds(a, eff, tp, running, context, rest, rest / inputs, inputs * (full > 0))
        iterations = full + (rest > 0)  # iterations one prompt's prefill takes
        t_group = full * t_full + np.where(rest > 0, t_rest, 0.0)
        extra = np.maximum(t_group - iterations * t_dec, 0.0)  # what those iterations add over decoding
        groups = batch
    else:
        # Prefill batches of up to the budget run alone and pause decoding.
        groups = burst_iterations
        iterations = np.ones_like(groups)
        t_group = t_burst
        extra = t_burst
    # The clients' prompts arrive in waves (all start together and keep their order): a request
    # waits for ``persistence x others ** exponent / 2`` of the other prefills of its wave (all of
    # the half-wave under prefill-first scheduling; large waves spread out where prefill mixes with
    # decoding); the rest of the others' prefills land in its decode steps. Beyond one prefill
    # iteration per decode step the replica is prefill bound and the groups queue.
    persistence = profile.wave_persistence if profile.mixed_batching else 1.0  # prefill-first keeps waves
    others = groups - 1
    exponent = profile.wave_exponent if profile.mixed_batching else 1.0
    ahead = np.minimum(persistence * others**exponent, others) / 2
    in_decode = np.minimum((others - ahead) * iterations, decode_steps)
    tpot = t_dec + in_decode / np.maximum(iterations, 1.0) * extra / decode_steps
    behind = np.maximum((others - ahead) * iterations - decode_steps, 0.0) / np.maximum(iterations, 1.0) * t_group
    steady = overhead + t_dec / 2 + t_group * (1 + ahead) + behind
    ttft_active = steady + np.maximum(first_wave - steady, 0.0) / requests_per_client
    throughput = batch / (ttft_active + decode_steps * tpot)
    waiting = np.maximum(clients - batch, 0.0)
    ttft = ttft_active + waiting / throughput
    return {
        "ttft": ttft,
        "tpot": tpot,
        "throughput": throughput,
        "active_batch": batch,
        "max_concurrency": kv_limit,
        "memory_limited": clients > kv_limit,
        "prefill": prefill_seconds(a, eff, tp, inputs),
        "decode_step": t_dec,
    }


def predict_benchmark(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    input_tokens: Tokens,
    output_tokens: Tokens,
    concurrency: Count,
    engine: str | EngineProfile | None = None,
    *,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
    requests_per_client: float = REQUESTS_PER_CLIENT,
    registry: Registry | None = None,
) -> BenchmarkPrediction:
    """Mean TTFT and TPOT a closed-loop serving benchmark reports at client concurrency ``C``.

    Parameters
    ----------
    model, accelerator : str or registry object
        Registry ids or aliases (``"Qwen/Qwen3-32B"``, ``"h100_sxm"``) or objects.
    precision : str
        Weight precision (``"bf16"``, ``"fp8"``, ``"int4"``, ``"fp4"``).
    tensor_parallel : int or array
        Devices per replica.
    input_tokens, output_tokens : int or array
        Fixed prompt and output lengths of every request.
    concurrency : int or array
        Clients, each sending its next request when its last one completes; all start together.
    engine : {"vllm", "sglang", "trtllm"} or None
        The serving engine whose scheduler and costs to use; ``None`` uses the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the profile's costs and kernel pricing.
    kv_precision : str, optional
        KV-cache precision; defaults to 16-bit.
    requests_per_client : float
        Requests each client sends in the run (the first wave's burst is averaged over them).
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    BenchmarkPrediction
        ``.ttft``, ``.tpot`` with their 80 % intervals, throughputs, the active batch and whether
        memory limits it.

    Notes
    -----
    The engine admits ``B = min(C, KV capacity / (I + r O), max_num_seqs)`` requests (``r``: the
    output share its admission reserves). All ``C`` prompts arrive at once; a budget of ``T`` tokens
    per iteration prefills them in ``ceil(B I / T)`` iterations, and those groups re-arrive one
    cycle later. Mixing engines prefill a group in one iteration beside the running decodes (TTFT is
    that iteration; the other groups' iterations stretch TPOT); SGLang's prefill batches pause
    decoding, so a wave keeps waiting for the batches ahead of it. Clients beyond ``B`` wait
    ``(C - B) / X`` for a slot. ``docs/performance-model.md`` derives each term.

    Examples
    --------
    Qwen3-32B BF16 on 4 H100s under vLLM 0.12, 32 clients, 1024/512 tokens (measured: TTFT 199.9 ms,
    TPOT 14.2 ms); the measured values lie inside the 80 % intervals:

    >>> p = predict_benchmark("Qwen/Qwen3-32B", "h100_sxm", "bf16", 4, 1024, 512, 32, engine="vllm")
    >>> bool(p.ttft_interval[0].m_as("ms") < 199.9 < p.ttft_interval[1].m_as("ms")), p.memory_limited
    (True, False)
    >>> bool(p.tpot_interval[0].m_as("ms") < 14.2 < p.tpot_interval[1].m_as("ms"))
    True
    """
    from ..uncertainty import prediction_interval

    a = step_arrays(model, accelerator, precision, kv_precision, registry=registry)
    profile = engine_profile(engine)
    tp = _tp(model_of(model, registry), tensor_parallel, "predict_benchmark")
    inputs = _counts("predict_benchmark", "input_tokens", input_tokens)
    outputs = _counts("predict_benchmark", "output_tokens", output_tokens)
    result = closed_loop_seconds(
        a,
        profile,
        tp,
        inputs,
        outputs,
        _counts("predict_benchmark", "concurrency", concurrency),
        _efficiency(engine, efficiency, a.accelerator),
        requests_per_client,
    )
    scalar = all(np.ndim(v) == 0 for v in (tensor_parallel, input_tokens, output_tokens, concurrency))

    def out(value: Any) -> Any:
        value = np.asarray(value)
        return value.item() if scalar else value

    ttft, tpot = result["ttft"], result["tpot"]
    bands = prediction_interval(profile.name, a.accelerator, a.measured)
    return BenchmarkPrediction(
        ttft=Q_(out(ttft), "s"),
        tpot=Q_(out(tpot), "s"),
        ttft_interval=(Q_(out(ttft * bands["ttft"][0]), "s"), Q_(out(ttft * bands["ttft"][1]), "s")),
        tpot_interval=(Q_(out(tpot * bands["tpot"][0]), "s"), Q_(out(tpot * bands["tpot"][1]), "s")),
        throughput=Q_(out(result["throughput"]), "request/s"),
        output_throughput=Q_(out(result["throughput"] * outputs), "token/s"),
        active_batch=out(result["active_batch"]),
        max_concurrency=out(result["max_concurrency"]),
        memory_limited=out(result["memory_limited"]),
        prefill_time=Q_(out(result["prefill"]), "s"),
        decode_step_time=Q_(out(result["decode_step"]), "s"),
        engine=profile.name,
        measured_kernels=a.measured,
    )
