"""Resolving registry objects into the arrays the step model needs (:class:`StepArrays`).

A (model, accelerator, precision) becomes plain floats in SI units: resident and streamed weight bytes
at the stored bits per weight (``WEIGHT_BITS``, scales included), the per-layer shapes, KV bytes per
token, the accelerator's peaks at the precision its matrix products run at (:func:`compute_precision`)
and its measured kernel tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .._support import accelerator_of, model_of
from ..errors import ExtrapolationWarning, InputError
from ..memory import WEIGHT_BITS, model_kv_bytes_per_token, routed_expert_parameters, weight_bytes
from ..memory.kv import kv_shard_limit
from ..phases import attention_flops_per_pair
from ..precision import GEMM_TABLE_OF_WEIGHTS, PRECISIONS, check_precision, tensor_precision
from ..types import AcceleratorRef, ModelRef
from ..units import Q_

if TYPE_CHECKING:
    from ..registry import Registry

#: Bytes a value of NVFP4 activations takes: a 4-bit value and an FP8 (E4M3) scale per 16 values. TensorRT-LLM's fused
#: MoE quantizes the ranks' tokens before it all-gathers them to NVFP4 experts (``EngineProfile.fp4_gather``).
NVFP4_GATHER_BYTES = 0.5 + 1 / 16

__all__ = [
    "CHECKPOINT_RULE",
    "KV_PRECISION_RULE",
    "checkpoint_for",
    "compute_precision",
    "kv_cache_precision",
    "outside_validated_range",
    "StepArrays",
    "step_arrays",
]


# --------------------------------------------------------------------------------------------
# Resolving registry objects into the arrays the step model needs


def compute_precision(accelerator: AcceleratorRef, precision: str, *, registry: Registry | None = None) -> str:
    """The precision the matrix products run at for weights stored at ``precision``.

    The accelerator's own rate where it has one (FP8 on an H100); otherwise the weights are
    dequantized to the first precision the accelerator supports (FP8 weights on an A100 run W8A16
    at the BF16 rate). INT4 weights always multiply as 16-bit activations (W4A16).

    Examples
    --------
    >>> compute_precision("a100-sxm-80gb", "fp8"), compute_precision("h100-sxm", "fp8")
    ('bf16', 'fp8')
    """
    device = accelerator_of(accelerator, registry=registry)
    return tensor_precision(device, precision)


#: How the KV-cache precision an engine runs by default (no KV flag) follows from the weights. Each
#: engine's own part is ``EngineProfile.quantized_kv_precision`` (cited in its ``citations``).
KV_PRECISION_RULE = (
    "16-bit and wider weights: the weights' precision. INT4/INT8 weights (AWQ, GPTQ, SmoothQuant checkpoints declare "
    "no KV quantization): BF16. FP8/FP4 weights: the KV cache the registry's checkpoint of those weights declares "
    "(Model.checkpoints[].kv_cache), else the engine's default for a ModelOpt export (ModelOpt's PTQ scripts write "
    "kv_cache_quant_algo FP8 by default, --kv_cache_qformat fp8, in NVIDIA Model Optimizer's examples/llm_ptq): FP8 "
    "where the engine reads that declaration (TensorRT-LLM 'auto', vLLM >= 0.14), BF16 where it does not (SGLang "
    "before 0.5.4, and SGLang's online and compressed-tensors FP8). FP8 KV only on accelerators with FP8 tensor "
    "throughput."
)


#: Which of a model's checkpoints at one precision a plan assumes: the launch loads it (``deploy.weights_source``)
#: and its KV cache is the one it declares (:func:`kv_cache_precision`). The engine's own part is
#: ``EngineProfile.checkpoint_format`` (cited in the registry).
CHECKPOINT_RULE = (
    "The checkpoint the plan was named by: a repository of one of the model's checkpoints at the plan's precision, "
    "listed among the model's aliases (size_fleet and servecalc size by that name, FleetPlan.served_model, "
    "weights_source(served=), step_arrays and predict_benchmark by that name). Else the first listed at that "
    "precision in the format the engine's documentation runs quantized weights from (EngineProfile."
    "checkpoint_format: TensorRT-LLM runs ModelOpt exports). Else the first listed at that precision (the registry "
    "lists the model publisher's own checkpoint first; vLLM and SGLang document no preference)."
)


def checkpoint_for(
    model: ModelRef, precision: str, engine: Any = None, *, served: str = "", registry: Registry | None = None
) -> Any:
    """The registry's checkpoint of ``model``'s weights at ``precision`` a plan on ``engine`` assumes, or None.

    ``served``: the repository the plan was named by (default ``model`` where that is a name); it picks the
    checkpoint of that repository where there is one at ``precision`` (``CHECKPOINT_RULE``).

    Examples
    --------
    >>> checkpoint_for("llama-3.1-70b", "fp8", "sglang").repo
    'nvidia/Llama-3.1-70B-Instruct-FP8'
    >>> checkpoint_for("qwen3-235b-a22b", "fp8", "trtllm").format  # Qwen's own: no ModelOpt FP8 in the registry
    'fp8-block'
    """
    from .engines import engine_profile

    if not isinstance(served, str):
        raise InputError(f"checkpoint_for(): argument 'served' must be a repository name (str), got {served!r:.80}")
    served = served or (model if isinstance(model, str) else "")
    name = check_precision(precision)
    listed = [c for c in model_of(model, registry).checkpoints if c.precision == name]
    preferred = engine_profile(engine, registry).checkpoint_format
    for wanted in (lambda c: c.repo.lower() == served.lower(), lambda c: c.format == preferred):
        chosen = next(filter(wanted, listed), None)
        if chosen is not None:
            return chosen
    return next(iter(listed), None)


#: The ranges the step model was validated on: the measured campaigns of ``calibration/`` (8B-405B
#: dense, MoE to 671B, on A100-B200 class GPUs) and the packaged registry around them. A model or an
#: accelerator outside them still gets numbers, with an :class:`~calculator.errors.ExtrapolationWarning`.
VALIDATED_RANGE = {
    "parameters": (5e8, 1e12, ""),
    "layers": (12, 200, ""),
    "memory_bandwidth": (0.25, 10.0, "TB/s"),
    "memory": (16, 400, "GB"),
}


def outside_validated_range(
    model: ModelRef, accelerator: AcceleratorRef, *, registry: Registry | None = None
) -> tuple[str, ...]:
    """Each value of ``model`` and ``accelerator`` outside :data:`VALIDATED_RANGE`, in words (empty: inside).

    What the :class:`~calculator.errors.ExtrapolationWarning` of the step model names, for a front end
    to show beside its numbers.

    Examples
    --------
    >>> outside_validated_range("llama-3.1-70b", "h100-sxm")
    ()
    """
    spec = model_of(model, registry)
    device = accelerator_of(accelerator, registry)
    outside = []
    for name, (low, high, unit) in VALIDATED_RANGE.items():
        owner = device if name.startswith("memory") else spec
        value = getattr(owner, name)
        number = value.m_as(unit) if unit else float(value)
        if not low <= number <= high:
            outside.append(f"{owner.id}.{name} = {number:.4g} {unit}".rstrip() + f" (validated {low:g}-{high:g})")
    return tuple(outside)


def _windows(spec: Any) -> dict[str, Any]:
    """The fields of :class:`StepArrays` for sliding-window, chunked-local and indexed sparse attention.

    A chunked-local layer keeps at most one chunk, as a sliding-window layer keeps at most its window: both
    take the window's path (``window``, ``window_share``), the chunked one flagged ``chunked``.
    """
    from ..memory.kv import index_key_bytes, window_shares

    window = spec.sliding_window or spec.attention_chunk
    kv_share, pair_share = window_shares(spec)
    index = 2.0 * (spec.index_heads or 0) * (spec.index_head_dim or 0) * spec.layers  # multiply-adds of the scores
    full = spec.global_layers / float(spec.layers) if spec.global_kv_heads is not None else 0.0
    return {
        "window": float(window or np.inf),
        "window_share": kv_share,
        "window_pair_share": pair_share if spec.global_kv_heads is not None else None,
        "global_share": full,
        "global_kv_heads": float(spec.global_kv_heads or 0),
        "global_head_dim": float(spec.global_head_dim or 0),
        "chunked": spec.attention_chunk is not None,
        "index_topk": float(spec.index_topk or np.inf),
        "index_bytes_per_token": index_key_bytes(spec),
        "index_flops_per_pair": float(index),
    }


def _warn_outside_validated(spec: Any, device: Any) -> None:
    """An :class:`~calculator.errors.ExtrapolationWarning` naming each value outside :data:`VALIDATED_RANGE`."""
    import warnings

    outside = outside_validated_range(spec, device)
    if outside:
        warnings.warn(
            f"{', '.join(outside)}: outside the range the performance model was validated on; the result is an "
            "extrapolation (docs/hardening.md)",
            ExtrapolationWarning,
            stacklevel=3,
        )


def kv_cache_precision(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    engine: Any = None,
    *,
    served: str = "",
    registry: Registry | None = None,
) -> str:
    """The KV-cache precision ``engine`` runs by default for weights stored at ``precision`` (``KV_PRECISION_RULE``).

    The checkpoint is the one the plan assumes (:func:`checkpoint_for`; ``served``: the repository it was named by,
    default ``model`` where that is a name).

    Examples
    --------
    >>> kv_cache_precision("qwen3-32b", "h100-sxm", "fp8", "trtllm"), kv_cache_precision(
    ...     "qwen3-32b", "h100-sxm", "fp8", "sglang")  # Qwen's FP8 checkpoint declares none: each engine's rule
    ('fp8', 'bf16')
    >>> kv_cache_precision("qwen3-235b-a22b", "b200-sxm", "fp4", "sglang")  # NVIDIA's NVFP4 checkpoint declares FP8
    'fp8'
    >>> kv_cache_precision("deepseek-v3", "h100-sxm", "fp8", "vllm")  # its FP8 checkpoint declares no KV quantization
    'bf16'
    >>> kv_cache_precision("llama-3.1-70b", "a100-sxm-80gb", "fp8", "vllm"), kv_cache_precision(
    ...     "llama-3.1-8b", "h100-sxm", "int4", "vllm")
    ('bf16', 'bf16')
    """
    from .engines import engine_profile

    name = check_precision(precision)
    if PRECISIONS[name] >= 16:
        return name
    if name not in ("fp8", "fp4"):
        return "bf16"
    profile = engine_profile(engine, registry)
    checkpoint = checkpoint_for(model, name, profile, served=served, registry=registry)
    declared = checkpoint.kv_cache if checkpoint is not None and profile.reads_kv_declaration else None
    kv = declared or profile.quantized_kv_precision
    if PRECISIONS[kv] == 8 and "fp8" not in accelerator_of(accelerator, registry).dense_throughput:
        return "bf16"
    return kv


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
    link_bandwidth: float  #: B/s per direction (NVLink, one link of a scale-up mesh, or the host link where neither)
    tables: Any  #: the accelerator's :class:`~calculator.kernels.KernelTables`
    dtype: str  #: the GEMM table of the weights
    kv_precision: str  #: the KV cache's precision (``kv_cache_precision`` unless given)
    measured: bool  #: whether measured kernel tables cover the accelerator and dtype
    precision: str = ""  #: the weights' precision name (the measured MoE layers are per weight precision)
    engine: str | None = None  #: whose measured MoE kernels price the experts (None: the median of the engines)
    #: GPUs each routed expert is split over (expert tensor parallelism); the TP group's other factor spreads the
    #: experts (expert parallelism, ``tp / expert_tensor_parallel``). None: every expert split over the whole group.
    expert_tensor_parallel: float | None = None
    #: Routed experts placed on the GPUs: the logical ones plus the engine's redundant copies (its expert-parallel load
    #: balancer's, :meth:`with_redundant_experts`). None: the logical experts.
    physical_experts: float | None = None
    #: The engine accepts an expert-parallel degree that does not divide the experts (no redundant copies): the first
    #: ranks hold one expert more (vLLM). False: the placed experts must divide evenly (SGLang, TensorRT-LLM).
    uneven_experts: bool = False
    #: GPUs each attention (and dense layer) group spans; a replica of ``t`` GPUs then runs ``t /
    #: attention_tensor_parallel`` data-parallel attention ranks, each with its own sequences and KV cache
    #: (attention data parallelism). None: attention split over the whole group.
    attention_tensor_parallel: float | None = None
    #: Pipeline stages: each of ``pipeline_parallel`` groups of the tensor-parallel GPUs holds ``1 / pipeline_parallel``
    #: of the layers (their weights and KV cache), and an iteration's batch runs as that many micro-batches.
    pipeline_parallel: float = 1.0
    #: GPUs of one scale-up (NVLink) domain: a collective over more crosses ``scale_out_bandwidth`` (inf: unknown)
    node_gpus: float = float("inf")
    scale_out_bandwidth: float = 0.0  #: B/s per direction and GPU between scale-up domains (0: none registered)
    #: Links per GPU of a fully connected scale-up mesh (``Accelerator.scale_up_links``, AMD Infinity Fabric), each of
    #: ``link_bandwidth``; a collective over ``t`` GPUs moves on ``min(t - 1, mesh_links)`` of them. 0: a switched
    #: domain (NVLink), ``link_bandwidth`` per GPU whatever the count.
    mesh_links: float = 0.0
    #: How attention data-parallel ranks exchange tokens around the experts (``EngineProfile.expert_exchange``).
    expert_exchange: str = "gather_scatter"
    #: Bytes a value of the tokens all-gathered to the experts takes: 16 bits, or :data:`NVFP4_GATHER_BYTES` where the
    #: engine quantizes them for NVFP4 experts before the gather (``EngineProfile.fp4_gather``).
    gather_value_bytes: float = 2.0
    #: Sliding-window attention: the tokens a windowed layer attends to and caches (inf: none), and the windowed
    #: layers' share of a token's KV bytes (gpt-oss: 128 tokens, half of them; the share of the layers where every
    #: layer has one shape, :func:`~calculator.memory.kv.window_shares`).
    window: float = float("inf")
    window_share: float = 0.0
    #: The windowed layers' share of the attention FLOP per (query, key) pair (None: :attr:`window_share`; they
    #: differ where the full-attention layers have heads of their own width, Gemma 4).
    window_pair_share: float | None = None
    #: Full-attention layers with a shape of their own (Gemma 4): their share of the layers, KV heads and head width
    #: (0: every layer has :attr:`kv_heads` and :attr:`head_dim`).
    global_share: float = 0.0
    global_kv_heads: float = 0.0
    global_head_dim: float = 0.0
    #: The windowed layers attend within chunks of :attr:`window` tokens (chunked-local attention, Llama 4):
    #: they keep at most a chunk like a sliding window, but a query reads only the tokens since its chunk began.
    chunked: bool = False
    #: Indexed sparse attention (DSA): the tokens each query attends to (inf: all), the bytes per token of the
    #: indexer's cached keys (all layers; part of :attr:`kv_bytes_per_token`) and its scoring FLOP per (query,
    #: key) pair over all layers.
    index_topk: float = float("inf")
    index_bytes_per_token: float = 0.0
    index_flops_per_pair: float = 0.0
    #: Hybrid models (Mamba-2, Gated DeltaNet layers): the fixed state a sequence keeps over the state layers (bytes),
    #: the shares of the layers that attend and that keep a state, and one state layer's input and output projection
    #: widths and its scan's FLOPs per token (:mod:`calculator.memory.state`).
    state_bytes: float = 0.0
    attention_share: float = 1.0
    state_share: float = 0.0
    state_in: float = 0.0
    state_inner: float = 0.0
    state_flops: float = 0.0
    curves: dict[float, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)  #: cache per TP degree
    #: The GPU work of the iterations priced so far (:func:`~calculator.performance.iteration._kernel_iteration`),
    #: by their counts. Not an argument: ``dataclasses.replace`` gives every variant an empty one.
    priced: dict[tuple[Any, ...] | None, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    @property
    def pair_share(self) -> float:
        """The windowed layers' share of the attention FLOP per pair (:attr:`window_pair_share`)."""
        return self.window_share if self.window_pair_share is None else self.window_pair_share

    def kv_tokens(self, tokens: Any) -> Any:
        """The KV a sequence of ``tokens`` holds and a decode step reads, in tokens of every attending layer.

        A windowed layer keeps (and attends to) at most :attr:`window` tokens: ``tokens - share x
        max(tokens - window, 0)``. Without windows, ``tokens`` itself. A hybrid's state layers add their fixed
        state, :attr:`state_tokens`, whatever the length.
        """
        from .scheduler import windowed_tokens

        return windowed_tokens(tokens, self.window, self.window_share, self.state_tokens)

    @property
    def state_tokens(self) -> float:
        """A hybrid's fixed state per sequence in tokens of KV (``state_bytes / kv_bytes_per_token``; 0: none).

        Counted where the KV is: whole-model bytes over whole-model bytes, so it spreads over the devices as the
        KV does (a bound from above where tensor parallelism replicates KV heads but splits the state).
        """
        return self.state_bytes / self.kv_bytes_per_token if self.state_bytes else 0.0

    def attention_group(self, tp: Any) -> Any:
        """GPUs one attention rank spans in a replica of ``tp`` GPUs."""
        return tp if self.attention_tensor_parallel is None else np.minimum(self.attention_tensor_parallel, tp)

    @property
    def placed_experts(self) -> float:
        """Routed experts placed on the GPUs: :attr:`physical_experts`, or the logical experts."""
        return self.experts if self.physical_experts is None else self.physical_experts

    def experts_per_gpu(self, tp: Any) -> Any:
        """Routed experts (whole or split) the busiest GPU of a replica of ``tp`` GPUs holds.

        The placed experts spread over the expert-parallel degree ``tp / expert_tensor_parallel``; where it does not
        divide them, the first ranks hold one more (vLLM's placement), so the busiest ``ceil(placed / ep)``.
        """
        tp = np.asarray(tp, dtype=float)
        split = tp if self.expert_tensor_parallel is None else np.minimum(self.expert_tensor_parallel, tp)
        return np.ceil(self.placed_experts / (tp / split))

    def weights_per_device(self, tp: Any) -> Any:
        """Resident weight bytes of the busiest GPU: its routed experts, and the rest over an attention rank."""
        tp = np.asarray(tp, dtype=float)
        if self.experts <= 1:
            return self.weight_bytes / self.attention_group(tp) / self.pipeline_parallel
        routed = self.experts * self.expert_params * self.bytes_per_param
        split = tp if self.expert_tensor_parallel is None else np.minimum(self.expert_tensor_parallel, tp)
        held = self.experts_per_gpu(tp) * self.expert_params * self.bytes_per_param / split
        return ((self.weight_bytes - routed) / self.attention_group(tp) + held) / self.pipeline_parallel

    def kv_spread(self, tp: Any) -> Any:
        """Devices' worth of KV memory a token's cache uses less of: ranks x the KV shards within a rank."""
        from ..memory.kv import kv_shards

        tp = np.asarray(tp, dtype=float)
        group = self.attention_group(tp)
        return tp / group * kv_shards(group, self.kv_shards_max) * self.pipeline_parallel

    def with_attention_data_parallel(self, attention_tensor_parallel: float) -> StepArrays:
        """The same arrays with attention ranks of ``attention_tensor_parallel`` GPUs, data parallel over a replica.

        Each rank holds its own sequences and their KV cache and a copy of the attention and dense weights;
        the routed experts stay spread over the whole replica (their layout: :meth:`with_expert_tensor_parallel`).
        Engines call it attention data parallelism (vLLM ``--data-parallel-size``, SGLang
        ``--enable-dp-attention``, TensorRT-LLM ``enable_attention_dp``). With its own kernel cache.
        """
        import dataclasses

        return dataclasses.replace(self, attention_tensor_parallel=float(attention_tensor_parallel), curves={})

    def with_pipeline_parallel(self, stages: float) -> StepArrays:
        """The same arrays over ``stages`` pipeline stages (each of the tensor-parallel group's size), own kernel cache.

        Each stage holds its share of the layers, their weights and KV cache; an iteration runs its batch
        as ``stages`` micro-batches through the stages (vLLM's virtual engines, TensorRT-LLM's and
        SGLang's micro-batches), so a token of every sequence takes ``stages`` stage times.
        """
        import dataclasses

        return dataclasses.replace(self, pipeline_parallel=float(stages), curves={})

    def with_expert_tensor_parallel(self, degree: float | None) -> StepArrays:
        """The same arrays with each routed expert split over ``degree`` GPUs, with its own kernel cache.

        1: whole experts spread over the group (expert parallelism); None: tensor parallelism.
        """
        import dataclasses

        degree = None if degree is None else float(degree)
        if degree == self.expert_tensor_parallel:
            return self
        return dataclasses.replace(self, expert_tensor_parallel=degree, curves={})

    def with_redundant_experts(self, redundant: float) -> StepArrays:
        """The same arrays with ``redundant`` copies of routed experts beside the logical ones, own kernel cache.

        An expert-parallel load balancer (vLLM's EPLB, SGLang's ``--ep-num-redundant-experts``, TensorRT-LLM's MoE
        load balancer ``num_slots``) replicates the most used experts on more GPUs: every GPU then holds ``(experts +
        redundant) / ep`` experts.
        """
        import dataclasses

        placed = self.experts + float(redundant) if redundant else None
        if placed == self.physical_experts:
            return self
        return dataclasses.replace(self, physical_experts=placed, curves={})

    def draft_head(self, method: str) -> StepArrays:
        """A speculative drafter built into this model, as the step model prices it: one decoder layer and an LM head.

        ``"mtp"``: one more of the model's own layers (its attention, and its MLP or, for a mixture of
        experts, its experts), at the model's precision, as DeepSeek-V3's multi-token-prediction module is;
        it shares the model's embedding and LM head, so its resident weights are the layer's alone while a
        pass reads the LM head again. ``"eagle"``: an EAGLE-3-style head, one dense decoder layer at the
        model's hidden size (the model's attention; a mixture of experts' head gets an MLP as wide as the
        experts one token runs) and an LM head of its own over the model's vocabulary, at 16 bits (the
        published heads are BF16 checkpoints). Either caches one layer's KV per token. A layer's weights
        are the model's mean layer (the model's own less its embedding and LM head, over its layers). Not
        counted: the projection that feeds the target's hidden states into the head (2 or 3 hidden-size
        rows, a few percent of a pass) and a reduced draft vocabulary (an upper bound on its LM head).
        """
        import dataclasses

        if method not in ("mtp", "eagle"):
            raise InputError(f"draft_head(): argument 'method' must be 'mtp' or 'eagle', got {method!r}")
        lm_head = self.vocab * self.hidden
        layer = (self.streamed_params - lm_head) / self.layers  # one token's parameters in a layer
        attending = self.layers * self.attention_share  # the drafter's layer attends (Nemotron 3's MTP: '*E')
        one_layer: dict[str, Any] = {
            "layers": 1.0,
            "kv_bytes_per_token": self.kv_bytes_per_token / attending,
            "attention_flops_per_pair": self.attention_flops_per_pair / attending,
            "window": float("inf"),
            "window_share": 0.0,
            "window_pair_share": None,
            "global_share": 0.0,
            "chunked": False,
            "index_bytes_per_token": self.index_bytes_per_token / self.layers,
            "index_flops_per_pair": self.index_flops_per_pair / self.layers,
            "state_bytes": 0.0,
            "attention_share": 1.0,
            "state_share": 0.0,
            "curves": {},
        }
        if method == "mtp":
            resident = self.weight_bytes - lm_head * (max(self.bytes_per_param, 2.0) + self.bytes_per_param)
            return dataclasses.replace(
                self,
                weight_bytes=resident / self.layers,
                streamed_params=layer + lm_head,
                shared_params=(self.shared_params - lm_head) / self.layers + lm_head,
                expert_params=self.expert_params / self.layers,
                **one_layer,
            )
        wide = max(self.bytes_per_param, 2.0)
        dtype = self.dtype if self.bytes_per_param >= 2 else "bf16"
        width = self.mlp_width if self.experts <= 1 else self.experts_per_token * self.expert_width
        return dataclasses.replace(
            self,
            weight_bytes=(layer + lm_head) * wide,
            streamed_params=layer + lm_head,
            shared_params=layer + lm_head,
            expert_params=0.0,
            experts=1.0,
            experts_per_token=1.0,
            bytes_per_param=wide,
            mlp_width=width + self.shared_expert_width,
            expert_width=0.0,
            shared_expert_width=0.0,
            dtype=dtype,
            peak_flops=self.peak_flops if dtype == self.dtype else self.bf16_flops,
            measured=bool(self.tables.measured and dtype in self.tables.measured_dtypes),
            precision=self.precision if dtype == self.dtype else "bf16",
            **one_layer,
        )

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
    engine: Any = None,
    registry: Registry | None = None,
) -> StepArrays:
    """The numbers the step model needs for one (model, accelerator, precision), in SI units.

    Returns a :class:`StepArrays`. Ids resolve in ``registry`` (default: the packaged registry), and an
    entry object's own ids (its host link) in the registry it came from. The KV cache is at
    ``kv_precision``, or at the precision ``engine`` runs by default for these weights
    (:func:`kv_cache_precision`; ``None``: the engine-agnostic profile's).

    Examples
    --------
    >>> step_arrays("llama-3.1-70b", "h100-sxm", "bf16").kv_bytes_per_token
    327680.0
    >>> a = step_arrays("llama-3.1-70b", "h100-sxm", "fp8")  # an FP8 KV cache, as vLLM and TensorRT-LLM run it
    >>> a.kv_precision, a.kv_bytes_per_token
    ('fp8', 163840.0)
    """
    from ..kernels import tables_for

    spec = model_of(model, registry)
    device = accelerator_of(accelerator, registry)
    name = check_precision(precision)
    if spec.kind != "transformer":
        raise InputError(f"the performance model covers transformer LLMs; model '{spec.id}' is a {spec.kind} model")
    _warn_outside_validated(spec, device)
    kv_name = (
        check_precision(kv_precision, "kv_precision")
        if kv_precision is not None
        else kv_cache_precision(model, device, name, engine, registry=registry)
    )
    kv = model_kv_bytes_per_token(spec, kv_name).m_as("B/token")
    link = _link_bandwidth(device, registry)
    bits = WEIGHT_BITS[name]
    m = _shapes(spec, bits)
    hidden, resident, active, shared, per_expert, experts, k = (
        m.hidden,
        m.resident,
        m.active,
        m.shared,
        m.per_expert,
        m.experts,
        m.k,
    )
    layers, heads, head_dim, kv_heads, mla = m.layers, m.heads, m.head_dim, m.kv_heads, m.mla
    nope, rope, value, q_lora = m.attention
    mlp_width, expert_width, shared_width = m.mlp_width, m.expert_width, m.shared_width
    tables = tables_for(device)
    profile = None
    if engine is not None:
        from .engines import engine_profile

        profile = engine_profile(engine, registry)
        _check_vendor(profile, device, registry)
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
        **_windows(spec),
        **_hybrid(spec),
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
        dtype=GEMM_TABLE_OF_WEIGHTS.get(name, "bf16"),
        kv_precision=kv_name,
        measured=bool(tables.measured and GEMM_TABLE_OF_WEIGHTS.get(name, "bf16") in tables.measured_dtypes),
        precision=name,
        **_engine_fields(profile, name),
        node_gpus=float(device.node_gpus or float("inf")),
        scale_out_bandwidth=_scale_out_bandwidth(device, registry),
        mesh_links=float(device.scale_up_links or 0) if device.scale_up is not None else 0.0,
    )


def _engine_fields(profile: Any, precision: str) -> dict[str, Any]:
    """What :class:`StepArrays` takes of the engine (``profile``, None: the engine-agnostic one) at ``precision``."""
    if profile is None:
        return {"engine": None, "expert_exchange": "gather_scatter", "gather_value_bytes": 2.0, "uneven_experts": True}
    return {
        "engine": None if profile.name == "generic" else str(profile.name),
        "expert_exchange": profile.expert_exchange,
        "gather_value_bytes": NVFP4_GATHER_BYTES if profile.fp4_gather and precision == "fp4" else 2.0,
        "uneven_experts": bool(profile.uneven_experts),
    }


class _Shapes(NamedTuple):
    """A transformer's shapes as the step model reads them (:func:`step_arrays`)."""

    hidden: float
    resident: float
    active: float
    shared: float
    per_expert: float
    experts: int
    k: int
    layers: float
    heads: float
    head_dim: float
    kv_heads: float
    mla: bool
    attention: tuple[float, float, float, float]
    mlp_width: float
    expert_width: float
    shared_width: float


def _shapes(spec: Any, bits: float) -> _Shapes:
    """The weights resident and streamed, the experts, the attention and the MLP widths of ``spec`` at ``bits``."""
    hidden = spec.hidden_size or spec.attention_heads * spec.head_dim
    embedding = float(spec.vocab_size * hidden) if spec.vocab_size else 0.0
    quantized = spec.parameters - embedding
    resident = weight_bytes.numeric(parameters=quantized, bits_per_weight=bits) + weight_bytes.numeric(
        parameters=embedding, bits_per_weight=max(bits, 16.0)
    )
    active = spec.active - embedding
    k, experts = spec.experts_per_token, spec.experts
    per_expert = routed_expert_parameters(spec) / experts if experts > k else 0.0
    shared = active - k * per_expert
    layers = float(spec.layers)
    heads, head_dim = float(spec.attention_heads), float(spec.head_dim)
    kv_heads = float(spec.kv_heads or spec.attention_heads)
    mla = spec.attention == "mla" and spec.kv_lora_rank is not None
    attention_params, (nope, rope, value, q_lora) = _attention_params(spec, float(hidden), mla)
    lm_head = embedding
    mixers = spec.kv_layers * attention_params + _state_parameters(spec, float(hidden))
    # A hybrid's MLPs and shared experts differ by layer (Nemotron-H: relu2 MLPs, MoE on half the layers): the
    # parameters its attention and state layers leave, as one mean gated MLP per layer (the bytes a token reads).
    rest = max((shared if experts > 1 else active) - lm_head - mixers, 0.0) / (3 * hidden * layers)
    if experts > 1:
        expert_width = per_expert / (3 * hidden * layers)
        shared_width = rest if spec.state_kind else spec.shared_experts * expert_width
        mlp_width = 0.0
    else:
        expert_width = shared_width = 0.0
        mlp_width = rest if spec.state_kind else float(spec.intermediate_size or rest)
    return _Shapes(
        float(hidden), float(resident), float(active), float(shared), float(per_expert), experts, k, layers, heads,
        head_dim, kv_heads, mla, (nope, rope, value, q_lora), mlp_width, float(expert_width), float(shared_width),
    )  # fmt: skip


#: FLOPs per recurrent-state element and token of a state layer's chunked scan: the state read into the output
#: and the state update, a multiply-add each (the work the recurrence does per token; the intra-chunk products,
#: chunk x (key + value) widths per head, are left out: a quarter of it or less at the published shapes).
STATE_SCAN_FLOPS_PER_ELEMENT = 4.0


def _state_parameters(spec: Any, hidden: float) -> float:
    """The state layers' projection weights (input and output; the convolution and norms are negligible)."""
    from ..memory.state import state_shape

    shape = state_shape(spec)
    return 0.0 if shape is None else float(spec.state_layers * hidden * (shape.in_projection + shape.inner))


def _hybrid(spec: Any) -> dict[str, Any]:
    """:class:`StepArrays`' hybrid fields of ``spec`` (none for a model without state layers)."""
    from ..memory.state import state_bytes_per_sequence, state_shape

    shape = state_shape(spec)
    if shape is None:
        return {}
    layers = float(spec.layers)
    return {
        "state_bytes": state_bytes_per_sequence(spec).m_as("B"),
        "attention_share": spec.attention_layers / layers,
        "state_share": spec.state_layers / layers,
        "state_in": float(shape.in_projection),
        "state_inner": float(shape.inner),
        "state_flops": STATE_SCAN_FLOPS_PER_ELEMENT * shape.recurrent + 2.0 * spec.conv_kernel * shape.conv_channels,
    }


def _check_vendor(profile: Any, device: Any, registry: Registry | None) -> None:
    """Refuse an accelerator of a vendor the engine does not run on (``EngineProfile.accelerator_vendors``)."""
    vendors = profile.accelerator_vendors
    if not vendors or device.vendor.lower() in {v.lower() for v in vendors}:
        return
    from ..registry import load_registry

    engines = (registry or load_registry()).engines.values()
    others = [
        e.id
        for e in engines
        if e.id != "generic" and (not e.accelerator_vendors or device.vendor in e.accelerator_vendors)
    ]
    raise InputError(
        f"engine '{profile.name}' runs on {' and '.join(vendors)} accelerators only, and accelerator '{device.id}' is "
        f"{device.vendor}'s: choose {' or '.join(others) if others else 'another engine'}"
    )


def _link_bandwidth(device: Any, registry: Registry | None) -> Any:
    """The device's GPU-to-GPU bandwidth: NVLink, one link of its scale-up mesh, its host link, else 16 GB/s PCIe.

    The mesh and host links are read in the device's own registry.
    """
    if device.nvlink_bandwidth is not None:
        return device.nvlink_bandwidth
    from ..registry import registry_of

    if device.scale_up is not None:
        return registry_of(device, registry).interconnect(device.scale_up).bandwidth
    host = registry_of(device, registry).interconnect(device.host_link) if device.host_link else None
    return host.bandwidth if host is not None else Q_(16, "GB/s")


def _scale_out_bandwidth(device: Any, registry: Registry | None) -> float:
    """B/s per direction of the device's link between scale-up domains (0 where none is registered)."""
    if device.scale_out is None:
        return 0.0
    from ..registry import registry_of

    return float(registry_of(device, registry).interconnect(device.scale_out).bandwidth.m_as("B/s"))


def _attention_params(spec: Any, hidden: float, mla: bool) -> tuple[float, tuple[float, float, float, float]]:
    """Attention weights per layer, and the MLA sizes (no-position, rotary, value head dims, query rank; GQA: 0)."""
    heads, head_dim = float(spec.attention_heads), float(spec.head_dim)
    if not mla:
        kv_heads = float(spec.kv_heads or spec.attention_heads)
        params = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden
        if spec.global_kv_heads is not None:  # the full-attention layers' own widths (Gemma 4), as a mean layer
            width = spec.global_head_dim
            wide = hidden * (heads + 2 * spec.global_kv_heads) * width + heads * width * hidden
            params += spec.global_layers / float(spec.layers) * (wide - params)
        return params, (0.0, 0.0, 0.0, 0.0)
    nope, rope = float(spec.qk_nope_head_dim or head_dim), float(spec.qk_rope_head_dim or 0)
    value = float(spec.v_head_dim or head_dim)
    q_lora = float(spec.q_lora_rank or 0)
    params = (
        (hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope))
        + hidden * (spec.kv_lora_rank + rope)
        + spec.kv_lora_rank * heads * (nope + value)
        + heads * value * hidden
    )
    return params, (nope, rope, value, q_lora)
