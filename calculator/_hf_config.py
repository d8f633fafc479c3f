"""A Hugging Face ``config.json`` read into the shapes the registry's :class:`~calculator.registry.Model` holds.

The architectures :mod:`calculator.model_import` takes (:data:`ARCHITECTURES`), the fields no architecture of
the registry can express (:func:`refuse_inexpressible`), the shapes of one config (:func:`read_shape`), the
parameters counted from them (:func:`count_parameters`), and the checkpoint's precision a quantization config
declares (:func:`read_quantization`). docs/registry.md says how each field is derived and what is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .errors import InputError
from .units import shown


@dataclasses.dataclass(frozen=True)
class Architecture:
    """How one ``architectures`` value lays its weights out (the parts the count and the KV cache differ in)."""

    label: str
    #: ``tie_word_embeddings`` where the config leaves it out (the architecture's default).
    tied: bool = False
    #: q, k and v carry biases whatever ``attention_bias`` says (Qwen2); o does not.
    qkv_bias: bool = False
    #: ``attention_bias`` adds biases to q, k, v and o (None: the architecture has none).
    bias_key: str | None = "attention_bias"
    #: A per-head RMSNorm of the queries and the keys (Qwen3, Gemma 3).
    qk_norm: bool = False
    #: The q and k norms span all heads (MiniMax-M2's ``qk_norm_type: per_layer``) instead of one head's width.
    qk_norm_across_heads: bool = False
    #: RMSNorms per decoder layer (Gemma 2 and 3 norm before and after attention and MLP).
    norms: int = 2
    #: ``mlp_bias`` adds biases to the MLP's three matrices (Llama).
    mlp_bias_key: str | None = None
    #: How the experts are declared: None (dense), "mixtral", "qwen3_moe", "deepseek", "gpt_oss", "minimax" (MiniMax-M2:
    #: ``num_local_experts`` of width ``intermediate_size`` on every layer) or "step" (Step-3.7-Flash: ``num_experts``
    #: of width ``moe_intermediate_size`` from ``first_k_dense_replace`` on, shared experts of ``share_expert_dim``).
    moe: str | None = None
    #: Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).
    mla: bool = False
    #: Which layers attend through ``sliding_window`` when the config has no ``layer_types``: "none", "all",
    #: "qwen" (``use_sliding_window``, from ``max_window_layers`` up), "alternate" (every even-indexed layer,
    #: Gemma 2) or "pattern" (all but every ``sliding_window_pattern``-th layer, Gemma 3).
    window: str = "none"
    #: One learned attention sink per head and layer (gpt-oss).
    sinks: bool = False
    #: Indexed sparse attention (DeepSeek-V3.2's DSA): an indexer per layer (``index_topk``, ``index_n_heads``,
    #: ``index_head_dim``) picks the tokens each query attends to.
    indexer: bool = False
    #: Which layers attend within ``attention_chunk_size`` chunks: "none", or "llama4" (the layers that use
    #: rotary positions, ``no_rope_layers`` 1; by default all but every fourth).
    chunked: str = "none"
    #: A hybrid whose other layers keep a fixed state (:mod:`calculator._hf_hybrid`): "nemotron_h" (Mamba-2) or
    #: "gated_deltanet" (Qwen3-Next, Qwen3.5's text model).
    hybrid: str | None = None
    #: ---- added by qwen35 (issue 54): the config field giving the precision vLLM keeps a Gated DeltaNet's
    #: recurrent state at (None: the model's dtype). vLLM 0.18 reads ``mamba_ssm_dtype`` for Qwen3.5's multimodal
    #: classes only (``Qwen3_5ForConditionalGenerationConfig``, vllm/model_executor/models/config.py).
    state_dtype_key: str | None = None
    #: Full-attention layers with a head width and KV heads of their own (Gemma 4: ``global_head_dim``,
    #: ``num_global_key_value_heads`` and ``attention_k_eq_v``) beside the sliding-window layers' (added by gemma4).
    global_shape: bool = False


_LLAMA = Architecture("Llama", mlp_bias_key="mlp_bias")
_QWEN3 = Architecture("Qwen3", qk_norm=True, window="qwen")
_DEEPSEEK = Architecture("DeepSeek (MLA)", moe="deepseek", mla=True)
_DSA = Architecture("DeepSeek (MLA, indexed sparse attention)", moe="deepseek", mla=True, indexer=True)
_LLAMA4 = Architecture("Llama 4 (text)", moe="llama4", chunked="llama4")
_GDN = Architecture("Qwen3-Next (Gated DeltaNet)", qk_norm=True, hybrid="gated_deltanet")

#: The architectures the import reads, by the config's ``architectures`` entry.
ARCHITECTURES: dict[str, Architecture] = {
    "LlamaForCausalLM": _LLAMA,
    "MistralForCausalLM": Architecture("Mistral", bias_key=None, window="all"),
    "MixtralForCausalLM": Architecture("Mixtral", bias_key=None, moe="mixtral", window="all"),
    "Qwen2ForCausalLM": Architecture("Qwen2", qkv_bias=True, bias_key=None, window="qwen"),
    "Qwen3ForCausalLM": _QWEN3,
    "Qwen3MoeForCausalLM": dataclasses.replace(_QWEN3, label="Qwen3-MoE", moe="qwen3_moe"),
    "DeepseekV2ForCausalLM": _DEEPSEEK,
    "DeepseekV3ForCausalLM": _DEEPSEEK,
    "GptOssForCausalLM": Architecture("gpt-oss", moe="gpt_oss", sinks=True),
    "Gemma2ForCausalLM": Architecture("Gemma 2", tied=True, norms=4, window="alternate"),
    "Gemma3ForCausalLM": Architecture("Gemma 3", tied=True, norms=4, qk_norm=True, window="pattern"),
    "Phi3ForCausalLM": Architecture("Phi-3", bias_key=None, window="all"),
    # ---- added by models (issue 54): MiniMax-M2, Step-3.7-Flash and MiMo
    "MiniMaxM2ForCausalLM": Architecture(
        "MiniMax-M2", bias_key=None, qk_norm=True, qk_norm_across_heads=True, moe="minimax"
    ),
    "Step3p7FlashForCausalLM": Architecture("Step-3.7-Flash", bias_key=None, moe="step"),
    "MiMoForCausalLM": Architecture("MiMo", qkv_bias=True, bias_key=None, window="qwen"),
    "DeepseekV32ForCausalLM": _DSA,
    "GlmMoeDsaForCausalLM": _DSA,
    "Llama4ForCausalLM": _LLAMA4,
    "NemotronHForCausalLM": Architecture("Nemotron-H", norms=1, mlp_bias_key="mlp_bias", hybrid="nemotron_h"),
    "Qwen3NextForCausalLM": _GDN,
    "Qwen3_5ForCausalLM": dataclasses.replace(_GDN, label="Qwen3.5"),
    "Qwen3_5MoeForCausalLM": dataclasses.replace(_GDN, label="Qwen3.5-MoE"),
    # ---- added by qwen35 (issue 54): Qwen3.5 / 3.6's published multimodal checkpoints (their text_config, read
    # as this class: split_vision passes the wrapper's architectures on)
    "Qwen3_5ForConditionalGeneration": dataclasses.replace(
        _GDN, label="Qwen3.5 (multimodal)", state_dtype_key="mamba_ssm_dtype"
    ),
    "Qwen3_5MoeForConditionalGeneration": dataclasses.replace(
        _GDN, label="Qwen3.5-MoE (multimodal)", state_dtype_key="mamba_ssm_dtype"
    ),
    # ---- added by gemma4: Gemma 4's text model (its multimodal wrapper's text_config)
    "Gemma4ForCausalLM": Architecture("Gemma 4", tied=True, norms=4, qk_norm=True, moe="gemma4", global_shape=True),
}
#: The same, by ``model_type`` (a config without ``architectures``).
MODEL_TYPES: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "kimi_k2": "DeepseekV3ForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    # ---- added by models (issue 54): the text models inside multimodal configs, and the new architectures
    "qwen3_vl_text": "Qwen3ForCausalLM",
    "qwen3_vl_moe_text": "Qwen3MoeForCausalLM",
    "minimax_m2": "MiniMaxM2ForCausalLM",
    "step3p7": "Step3p7FlashForCausalLM",
    "mimo": "MiMoForCausalLM",
    "deepseek_v32": "DeepseekV32ForCausalLM",
    "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "llama4_text": "Llama4ForCausalLM",
    "nemotron_h": "NemotronHForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM",
    "qwen3_5_text": "Qwen3_5ForCausalLM",
    "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM",
    "gemma4_text": "Gemma4ForCausalLM",  # added by gemma4
}

# --------------------------------------------------------------------------------------------
# What no architecture of the registry expresses

#: The attention of a layer the registry's Model holds: every layer attends to all tokens, or to a window.
_LAYER_KINDS = frozenset({"full_attention", "sliding_attention"})
#: Fields whose presence (not null, not empty, not false) declares what the Model cannot express, and why.
_INEXPRESSIBLE: tuple[tuple[str, str], ...] = (
    ("compress_ratios", "compressed KV caches (tokens pooled per layer at its own ratio) beside the indexer"),
    ("indexer_types", "indexers shared across layers (a layer reusing another's selected tokens)"),
    ("swa_num_key_value_heads", "sliding-window layers with their own head counts beside the full layers'"),
    (
        "attention_chunk_size",
        "chunked attention: a token attends only within its chunk, interleaved with global layers",
    ),
    ("hybrid_override_pattern", "Mamba (state-space) layers between the attention layers"),
    ("layers_block_type", "Mamba or other non-attention layer blocks between the attention layers"),
    ("attn_layer_period", "attention on every few layers only, Mamba layers between them"),
    ("full_attention_interval", "linear-attention layers between the full-attention layers"),
    ("linear_num_value_heads", "linear-attention (Gated DeltaNet) layers that keep a fixed state per sequence"),
    ("index_topk", "sparse attention: an indexer picks the tokens each query attends to"),
    ("ssm_state_size", "state-space (Mamba) layers that keep a fixed state per sequence"),
    # ---- added by models (issue 54)
    ("linear_attn_config", "linear-attention (Kimi Delta Attention) layers that keep a fixed state per sequence"),
    ("sparse_attention_config", "sparse attention: each query attends to the blocks an indexer picks"),
    ("global_head_dim", "global-attention layers with a head width and KV heads of their own, beside the sliding ones"),
    # ---- added by gemma4: Gemma 4's smaller models (E2B, E4B)
    ("hidden_size_per_layer_input", "per-layer embeddings (a second embedding table feeding every layer)"),
    ("num_kv_shared_layers", "layers that reuse an earlier layer's KV cache instead of keeping their own"),
    ("use_double_wide_mlp", "MLPs twice as wide on the layers that share another's KV cache"),
    ("audio_config", "an audio encoder beside the language model"),
)
#: Why a ``layer_types`` entry cannot be expressed, by entry (others: a layer kind the Model has no field for).
_LAYER_REASONS = {
    "linear_attention": "linear attention (Gated DeltaNet) keeps a fixed state per sequence instead of a KV cache",
    "chunked_attention": "chunked attention attends only within a chunk of tokens",
    "mamba": "a Mamba layer keeps a fixed state per sequence instead of a KV cache",
}


def _declared(value: Any) -> bool:
    return value not in (None, False, [], {}, "", 0)


#: The fields (and ``layer_types`` entries) an architecture expresses that others are refused for.
def _expressed(config: Mapping[str, Any]) -> frozenset[str]:
    names = config.get("architectures")
    name = names[0] if isinstance(names, list) and names else MODEL_TYPES.get(str(config.get("model_type")), "")
    family = ARCHITECTURES.get(name) if isinstance(name, str) else None
    inner = config.get("text_config")  # Gemma 4's multimodal wrapper: its language model reads global_head_dim
    text = ARCHITECTURES.get(MODEL_TYPES.get(str(inner.get("model_type")), "")) if isinstance(inner, Mapping) else None
    own = {"global_head_dim"} if any(f is not None and f.global_shape for f in (family, text)) else set()
    if family is None:
        return frozenset(own)
    indexer = {"index_topk", "deepseek_sparse_attention"} if family.indexer else set()
    return frozenset(indexer | own | ({"attention_chunk_size"} if family.chunked != "none" else set()))


def refuse_inexpressible(config: Mapping[str, Any], label: str) -> None:
    """Raise :class:`InputError` naming the first field of ``config`` (or its ``text_config``) no Model expresses.

    ``label`` starts the message (``config: x.json``). A hybrid model (linear attention, Mamba), chunked or
    indexed sparse attention is refused rather than approximated as a transformer (a vision encoder is read by
    :func:`split_vision`).
    """
    from ._hf_hybrid import read_fields

    inner = config.get("text_config")
    scopes = [("", config)] + ([("text_config.", inner)] if isinstance(inner, Mapping) else [])
    expressed = _expressed(config)
    names = config.get("architectures")
    named = ARCHITECTURES.get(
        (names[0] if isinstance(names, list) and names else MODEL_TYPES.get(str(config.get("model_type")))) or ""
    )
    read = read_fields(named.hybrid if named is not None else None)
    for prefix, scope in scopes:
        scope = {k: v for k, v in scope.items() if k not in read and not (read and str(k).startswith("mamba_"))}
        kinds = scope.get("layer_types")
        if isinstance(kinds, list):
            odd = next((kind for kind in kinds if kind not in _LAYER_KINDS | expressed), None)
            if odd is not None:
                reason = _LAYER_REASONS.get(str(odd), "a layer kind the registry's Model has no field for")
                _refuse(label, f"{prefix}layer_types", f"lists {shown(odd)} layers ({reason})")
        for field, reason in _INEXPRESSIBLE:
            if field not in expressed and _declared(scope.get(field)):
                _refuse(label, f"{prefix}{field}", f"declares {reason}")
        mamba = sorted(key for key in scope if str(key).startswith("mamba_"))
        if mamba:
            _refuse(label, f"{prefix}{mamba[0]}", "declares Mamba (state-space) layers")


def _refuse(label: str, field: str, why: str) -> None:
    raise InputError(
        f"{label}: field '{field}' {why}; the registry's Model cannot express it, and the import refuses the "
        "model rather than approximate it as a plain transformer (docs/registry.md, What is refused)"
    )


def architecture_of(config: Mapping[str, Any], label: str) -> tuple[str, Architecture]:
    """The ``architectures`` name of ``config`` and its :class:`Architecture`; an unknown one is refused."""
    names = config.get("architectures")
    if names is not None and not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise InputError(f"{label}: field 'architectures': expected a list of class names, found {shown(names)}")
    name = names[0] if names else MODEL_TYPES.get(str(config.get("model_type")), "")
    if name not in ARCHITECTURES:
        found = shown(names[0]) if names else f"model_type {shown(config.get('model_type'))}"
        raise InputError(
            f"{label}: field 'architectures': {found} is not an architecture the import reads; it reads "
            f"{', '.join(sorted(ARCHITECTURES))} (docs/registry.md)"
        )
    return name, ARCHITECTURES[name]


# --------------------------------------------------------------------------------------------
# The vision encoder of a multimodal config (added by models, issue 54)


@dataclasses.dataclass(frozen=True)
class Vision:
    """A vision encoder's weights, counted from its ``vision_config`` (its per-image work is not priced)."""

    parameters: int
    described: str


def split_vision(config: Mapping[str, Any], label: str) -> tuple[Mapping[str, Any], Vision | None]:
    """The language model's config and the counted vision encoder of ``config`` (None where it declares none).

    A config with a ``vision_config`` serves text through its ``text_config`` (which inherits the wrapper's
    ``tie_word_embeddings`` where it gives none, and the wrapper's ``architectures`` where that is a class the
    import reads: Qwen3.5's); the encoder's weights are counted from its shapes for the three layouts read
    (Qwen3-VL's, which Qwen3.5 shares, Kimi's MoonViT and Gemma 4's, docs/registry.md), any other is refused naming
    ``vision_config``.
    """
    vision = config.get("vision_config")
    if not _declared(vision):
        return config, None
    text = config.get("text_config")
    if not isinstance(vision, Mapping) or not isinstance(text, Mapping):
        raise InputError(
            f"{label}: field 'vision_config' declares a vision encoder, so the config must hold the language model "
            f"as an object 'text_config', found {shown(text)}"
        )
    inherited = {"tie_word_embeddings": config["tie_word_embeddings"]} if "tie_word_embeddings" in config else {}
    names = config.get("architectures")
    if isinstance(names, list) and names and names[0] in ARCHITECTURES and "architectures" not in text:
        inherited["architectures"] = names[:1]  # a wrapper read as its own class (Qwen3.5's state precision)
    fields = Fields(vision, f"{label}: vision_config")
    if "deepstack_visual_indexes" in vision:
        counted = _qwen3_vl_vision(fields)
    elif "vt_hidden_size" in vision and vision.get("mm_projector_type") == "patchmerger":
        counted = _moonvit_vision(fields)
    elif vision.get("model_type") == "gemma4_vision":
        counted = _gemma4_vision(fields, Fields(text, f"{label}: text_config").whole("hidden_size"))
    else:
        raise InputError(
            f"{label}: field 'vision_config' declares a vision encoder whose layout the import does not count (it "
            "counts Qwen3-VL's, with deepstack_visual_indexes, Kimi's MoonViT, with vt_hidden_size and the "
            "patchmerger projector, and Gemma 4's, model_type gemma4_vision); the registry would understate the "
            "model's weights, so it is refused"
        )
    return {**inherited, **text}, counted


def _vit_blocks(layers: int, hidden: int, width: int) -> int:
    """Pre-norm ViT blocks: two LayerNorms, qkv and output projections and a two-matrix MLP, all with biases."""
    return layers * (4 * hidden * hidden + 2 * hidden * width + 9 * hidden + width)


def _qwen3_vl_vision(f: Fields) -> Vision:
    """Qwen3-VL: a Conv3d patch embedding, learned positions, the blocks, a merger and one deepstack merger each."""
    h, width, layers = f.whole("hidden_size"), f.whole("intermediate_size"), f.whole("depth")
    patch = f.whole("in_channels", 3) * f.whole("temporal_patch_size") * f.whole("patch_size") ** 2 * h + h
    positions = f.whole("num_position_embeddings") * h
    merged, out = h * f.whole("spatial_merge_size") ** 2, f.whole("out_hidden_size")
    projection = merged * merged + merged + merged * out + out  # two linear layers with biases
    deep = f.config.get("deepstack_visual_indexes")
    if not isinstance(deep, list):
        raise InputError(f"{f.label}: field 'deepstack_visual_indexes': expected a list, found {shown(deep)}")
    blocks = _vit_blocks(layers, h, width)
    mergers = (2 * h + projection) + len(deep) * (2 * merged + projection)  # LayerNorm before / after the merge
    total = patch + positions + blocks + mergers
    return Vision(
        total,
        f"Qwen3-VL vision encoder: patch embedding {patch:,}, positions {positions:,}, {layers} blocks of width {h} "
        f"{blocks:,}, merger and {len(deep)} deepstack mergers {mergers:,}; total {total:,}",
    )


def _moonvit_vision(f: Fields) -> Vision:
    """MoonViT (Kimi-K2.5): a Conv2d patch embedding, a learned 2-D position grid, the blocks, a patch merger."""
    h, width, layers = f.whole("vt_hidden_size"), f.whole("vt_intermediate_size"), f.whole("vt_num_hidden_layers")
    patch = 3 * f.whole("patch_size") ** 2 * h + h
    positions = f.whole("init_pos_emb_height") * f.whole("init_pos_emb_width") * h
    kernel = f.config.get("merge_kernel_size")
    if not (isinstance(kernel, list) and len(kernel) == 2 and all(isinstance(k, int) and k > 0 for k in kernel)):
        raise InputError(f"{f.label}: field 'merge_kernel_size': expected two whole numbers, found {shown(kernel)}")
    merged, out = f.whole("mm_hidden_size") * kernel[0] * kernel[1], f.whole("text_hidden_size")
    blocks = _vit_blocks(layers, h, width) + 2 * h  # and the final LayerNorm
    projector = 2 * f.whole("mm_hidden_size") + merged * merged + merged + merged * out + out
    total = patch + positions + blocks + projector
    return Vision(
        total,
        f"MoonViT vision encoder: patch embedding {patch:,}, position grid {positions:,}, {layers} blocks of width {h} "
        f"{blocks:,}, patch-merger projector {projector:,}; total {total:,}",
    )


def _gemma4_vision(f: Fields, text_hidden: int) -> Vision:
    """Gemma 4 (added by gemma4): patch projection, a 2-D position table, RMSNorm blocks, a projection to the text.

    transformers' ``Gemma4VisionModel`` (modeling_gemma4.py): ``input_proj`` (3 x patch^2 -> hidden, no bias), the
    ``position_embedding_table`` (2 x position_embedding_size x hidden), blocks of q, k, v and o projections without
    biases, q and k norms of a head's width (the v norm has no weight), four RMSNorms and a gated MLP, the
    ``std_bias`` and ``std_scale`` of ``standardize``; ``Gemma4MultimodalEmbedder`` projects to the text's hidden
    size without bias (its norm has no weight). Clipped linears (``use_clipped_linears``) are refused.
    """
    if f.flag("use_clipped_linears"):
        raise InputError(
            f"{f.label}: field 'use_clipped_linears' declares clipping bounds on every linear layer, which the import "
            "does not count; the model is refused rather than its encoder understated"
        )
    h, width, layers = f.whole("hidden_size"), f.whole("intermediate_size"), f.whole("num_hidden_layers")
    heads, kv = f.whole("num_attention_heads"), f.whole("num_key_value_heads")
    head = f.whole("head_dim")
    patch = 3 * f.whole("patch_size") ** 2 * h
    positions = 2 * f.whole("position_embedding_size") * h
    attention = h * head * (2 * heads + 2 * kv) + 2 * head
    blocks = layers * (attention + 4 * h + 3 * h * width)
    projection = (2 * h if f.flag("standardize") else 0) + h * text_hidden
    total = patch + positions + blocks + projection
    return Vision(
        total,
        f"Gemma 4 vision encoder: patch projection {patch:,}, position table {positions:,}, {layers} blocks of width "
        f"{h} {blocks:,}, standardization and projection to the text's {text_hidden} {projection:,}; total {total:,}",
    )


# --------------------------------------------------------------------------------------------
# The shapes


@dataclasses.dataclass(frozen=True)
class Shape:
    """The sizes of one model as its config declares them (MLA and expert sizes 0 where absent)."""

    architecture: Architecture
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # the dense MLP's (0: no dense layer)
    vocab: int
    max_context: int | None
    tied: bool
    attention_bias: bool
    mlp_bias: bool
    q_lora: int = 0
    kv_lora: int = 0
    nope: int = 0
    rope: int = 0
    value: int = 0
    experts: int = 1
    experts_per_token: int = 1
    shared_experts: int = 0
    expert_intermediate: int = 0
    moe_layers: int = 0
    router_bias: int = 0  # biases per router (gpt-oss: one per expert; DeepSeek-V3: the score correction)
    window: int | None = None
    window_layers: int = 0
    index_topk: int = 0  # indexed sparse attention (0: none): the tokens each query attends to
    index_heads: int = 0
    index_head_dim: int = 0
    chunk: int | None = None  # chunked-local attention: the chunk and how many layers attend within it
    chunk_layers: int = 0
    hybrid: Any = None  # a hybrid's layer kinds and state shapes (:class:`calculator._hf_hybrid.HybridShape`)
    global_layers: int = 0  # full-attention layers of their own shape (Gemma 4; 0: none), their KV heads and width
    global_kv_heads: int = 0
    global_head_dim: int = 0
    k_eq_v: bool = False  # those layers have no value projection: the key's weights give the value too
    layer_extras: int = 0  # parameters per layer beside attention, MLP, experts, routers and arch.norms (Gemma 4)
    notes: tuple[str, ...] = ()


class Fields:
    """The numbers of one config, each checked and named in a message that starts with ``label``."""

    def __init__(self, config: Mapping[str, Any], label: str) -> None:
        self.config, self.label = config, label

    def whole(self, key: str, default: int | None = None, *, minimum: int = 1) -> int:
        """A whole number at least ``minimum``; ``default`` where the key is absent or null (else required)."""
        value = self.config.get(key)
        if value is None:
            if default is None:
                raise InputError(
                    f"{self.label}: field '{key}' is missing; a config.json of this architecture gives it "
                    "(is this the model's config.json?)"
                )
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError(f"{self.label}: field '{key}': expected a whole number >= {minimum}, found {shown(value)}")
        return value

    def flag(self, key: str | None, default: bool = False) -> bool:
        """A boolean (``default`` where the key is absent, null or ``key`` is None)."""
        value = self.config.get(key) if key else None
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InputError(f"{self.label}: field '{key}': expected true or false, found {shown(value)}")
        return value


def read_shape(config: Mapping[str, Any], architecture: Architecture, label: str) -> Shape:
    """The :class:`Shape` of ``config`` (its ``architectures`` read as ``architecture``)."""
    fields = Fields(config, label)
    blocks = config.get("layers_block_type") if architecture.hybrid else None  # Nemotron 3 Ultra: no layer count
    layers = fields.whole("num_hidden_layers", len(blocks) if isinstance(blocks, list) and blocks else None)
    hidden = fields.whole("hidden_size")
    heads = fields.whole("num_attention_heads")
    kv_heads = fields.whole("num_key_value_heads", heads)
    if not architecture.mla and heads % kv_heads:
        raise InputError(
            f"{label}: field 'num_key_value_heads': {kv_heads} does not divide num_attention_heads {heads}"
        )
    tied = fields.flag("tie_word_embeddings", architecture.tied)
    context = fields.whole("max_position_embeddings", 0) or None
    common: dict[str, Any] = dict(
        architecture=architecture,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        vocab=fields.whole("vocab_size"),
        max_context=context,
        tied=tied,
        attention_bias=fields.flag(architecture.bias_key),
        mlp_bias=fields.flag(architecture.mlp_bias_key),
    )
    default = f"tie_word_embeddings absent: {architecture.label}'s default, {'tied' if tied else 'untied'}"
    notes = [] if "tie_word_embeddings" in config else [default]
    attention = _mla(fields) if architecture.mla else {"head_dim": _head_dim(fields, hidden, heads, notes)}
    if architecture.hybrid:
        from ._hf_hybrid import read_hybrid

        hybrid: dict[str, Any] = {**common, **attention, **read_hybrid(fields, layers, architecture)}
        return Shape(**hybrid, notes=tuple(notes))
    experts = _experts(fields, architecture, layers)
    window = _window(fields, architecture, layers, context, notes)
    sparse = _indexer(fields) if architecture.indexer else {}
    chunks = _chunks(fields, layers, context, notes) if architecture.chunked != "none" else {}
    full = _gemma4_layers(fields, layers, window, notes) if architecture.global_shape else {}
    parts: dict[str, Any] = {**common, **attention, **experts, **window, **sparse, **chunks, **full}
    return Shape(**parts, notes=tuple(notes))


def _head_dim(fields: Fields, hidden: int, heads: int, notes: list[str]) -> int:
    for key in ("head_dim", "attention_head_dim"):  # Nemotron-H's first configs call it attention_head_dim
        if fields.config.get(key) is not None:
            return fields.whole(key)
    if hidden % heads:
        raise InputError(
            f"{fields.label}: field 'head_dim' is missing and hidden_size {hidden} does not divide by "
            f"num_attention_heads {heads}; the config must give head_dim"
        )
    notes.append(f"head_dim absent: hidden_size {hidden} / {heads} heads = {hidden // heads}")
    return hidden // heads


def _mla(fields: Fields) -> dict[str, int]:
    """The sizes of multi-head latent attention; ``head_dim`` is the no-position width (the registry's rule)."""
    nope, value = fields.whole("qk_nope_head_dim"), fields.whole("v_head_dim")
    return {
        "q_lora": fields.whole("q_lora_rank", 0, minimum=0),
        "kv_lora": fields.whole("kv_lora_rank"),
        "nope": nope,
        "rope": fields.whole("qk_rope_head_dim"),
        "value": value,
        "head_dim": nope,
    }


def _indexer(fields: Fields) -> dict[str, int]:
    """The indexer of indexed sparse attention: the tokens it selects, its heads and their width."""
    return {
        "index_topk": fields.whole("index_topk"),
        "index_heads": fields.whole("index_n_heads"),
        "index_head_dim": fields.whole("index_head_dim"),
    }


def _chunks(fields: Fields, layers: int, context: int | None, notes: list[str]) -> dict[str, Any]:
    """The chunk of Llama 4's chunked-local layers and how many there are.

    They are the layers with rotary positions (``no_rope_layers`` 1), by default all but every
    ``no_rope_layer_interval``-th (4: transformers' ``Llama4TextConfig``); vLLM gives them
    ``ChunkedLocalAttention`` (``llama4.py``).
    """
    chunk = fields.whole("attention_chunk_size", 0, minimum=0)
    if not chunk:
        return {}
    rope = fields.config.get("no_rope_layers")
    if rope:
        if not isinstance(rope, list) or len(rope) != layers or any(v not in (0, 1) for v in rope):
            raise InputError(
                f"{fields.label}: field 'no_rope_layers': expected one 0 or 1 per layer ({layers}), found {shown(rope)}"
            )
        count, rule = sum(rope), "no_rope_layers"
    else:
        interval = fields.whole("no_rope_layer_interval", 4)
        count, rule = layers - layers // interval, f"all but every {interval}th layer"
    if context is not None and chunk >= context:
        notes.append(f"attention_chunk_size {chunk} >= max_position_embeddings {context}: the chunk never binds")
        return {}
    notes.append(f"{count} of {layers} layers attend within {chunk}-token chunks ({rule})")
    return {"chunk": chunk, "chunk_layers": count} if count else {}


def _experts(fields: Fields, architecture: Architecture, layers: int) -> dict[str, int]:
    """The experts (none for a dense model), their width and how many layers route to them."""
    kind = architecture.moe
    if kind is None:
        return {"intermediate": fields.whole("intermediate_size")}
    if kind == "llama4":  # every interleave_moe_layer_step-th layer routes, with one shared expert
        step = fields.whole("interleave_moe_layer_step", 1)
        routed = sum((i + 1) % step == 0 for i in range(layers))
        return {
            "intermediate": fields.whole("intermediate_size_mlp") if routed < layers else 0,
            "experts": fields.whole("num_local_experts"),
            "experts_per_token": fields.whole("num_experts_per_tok"),
            "shared_experts": 1,
            "expert_intermediate": fields.whole("intermediate_size"),
            "moe_layers": routed,
        }
    if kind in ("mixtral", "gpt_oss"):
        experts = fields.whole("num_local_experts")
        top = fields.whole("num_experts_per_tok" if "num_experts_per_tok" in fields.config else "experts_per_token")
        width = fields.whole("intermediate_size")
        return {"intermediate": 0, "experts": experts, "experts_per_token": top, "expert_intermediate": width,
                "moe_layers": layers, "router_bias": experts if kind == "gpt_oss" else 0}  # fmt: skip
    if kind == "minimax":
        return _minimax_experts(fields, layers)
    if kind == "gemma4":
        return _gemma4_experts(fields, layers)
    if kind == "qwen3_moe":
        experts, step = fields.whole("num_experts"), fields.whole("decoder_sparse_step", 1)
        dense = _layer_list(fields, "mlp_only_layers", layers)
        moe = [i for i in range(layers) if i not in dense and (i + 1) % step == 0]
        shared = 0
    else:  # deepseek, step
        experts = fields.whole("num_experts" if kind == "step" else "n_routed_experts")
        first, every = fields.whole("first_k_dense_replace", 0, minimum=0), fields.whole("moe_layer_freq", 1)
        moe = [i for i in range(layers) if i >= first and i % every == 0]
        shared = fields.whole("n_shared_experts", 0, minimum=0)
        if kind == "step" and shared and fields.whole("share_expert_dim") != fields.whole("moe_intermediate_size"):
            raise InputError(
                f"{fields.label}: field 'share_expert_dim': a shared expert wider or narrower than the routed ones "
                "(moe_intermediate_size) is not a layout the registry's Model holds"
            )
    top = fields.whole("num_experts_per_tok")
    biased = fields.config.get("topk_method") == "noaux_tc" or fields.flag("use_moe_router_bias")
    return {
        "intermediate": fields.whole("intermediate_size") if len(moe) < layers else 0,
        "experts": experts,
        "experts_per_token": top,
        "shared_experts": shared,
        "expert_intermediate": fields.whole("moe_intermediate_size"),
        "moe_layers": len(moe),
        "router_bias": experts if biased else 0,
    }


def _minimax_experts(fields: Fields, layers: int) -> dict[str, int]:
    """MiniMax-M2: every layer routes to ``num_local_experts`` of width ``intermediate_size``, none shared."""
    if fields.whole("shared_intermediate_size", 0, minimum=0):
        raise InputError(
            f"{fields.label}: field 'shared_intermediate_size': a shared expert of another width than the routed "
            "ones is not a layout the registry's Model holds"
        )
    experts = fields.whole("num_local_experts")
    return {"intermediate": 0, "experts": experts, "experts_per_token": fields.whole("num_experts_per_tok"),
            "expert_intermediate": fields.whole("intermediate_size"), "moe_layers": layers,
            "router_bias": experts if fields.flag("use_routing_bias") else 0}  # fmt: skip


def _gemma4_experts(fields: Fields, layers: int) -> dict[str, int]:
    """Gemma 4: a dense MLP on every layer and, with ``enable_moe_block``, routed experts beside it.

    vLLM's ``Gemma4DecoderLayer`` runs the MLP (``intermediate_size``) and the experts (``num_experts`` of
    ``moe_intermediate_size``, ``top_k_experts`` per token) side by side and adds their outputs; a gated MLP of
    width ``n x w`` is ``n`` gated MLPs of width ``w`` summed, so the MLP is ``n`` shared experts where ``w``
    divides it. The router holds its projection, a scale per hidden unit and an output scale per expert.
    """
    width = fields.whole("intermediate_size")
    if not fields.flag("enable_moe_block"):
        return {"intermediate": width}
    expert_key = "moe_intermediate_size" if "moe_intermediate_size" in fields.config else "expert_intermediate_size"
    expert = fields.whole(expert_key)
    if width % expert:
        raise InputError(
            f"{fields.label}: field 'intermediate_size': a dense MLP of {width} beside experts of {expert} "
            f"({expert_key}) is a whole number of shared experts only where {expert} divides it; the registry's "
            "Model holds no other layout"
        )
    experts = fields.whole("num_experts")
    return {"intermediate": 0, "experts": experts, "experts_per_token": fields.whole("top_k_experts"),
            "shared_experts": width // expert, "expert_intermediate": expert, "moe_layers": layers,
            "router_bias": experts + fields.whole("hidden_size")}  # fmt: skip


def _layer_list(fields: Fields, key: str, layers: int) -> set[int]:
    value = fields.config.get(key) or []
    if not isinstance(value, list) or not all(isinstance(i, int) and 0 <= i < layers for i in value):
        raise InputError(
            f"{fields.label}: field '{key}': expected a list of layer indices below {layers}, found {shown(value)}"
        )
    return set(value)


def _window(
    fields: Fields, architecture: Architecture, layers: int, context: int | None, notes: list[str]
) -> dict[str, Any]:
    """The sliding window and how many layers attend through it (``layer_types`` first, else the family's rule)."""
    kinds = fields.config.get("layer_types")
    if isinstance(kinds, list):
        if len(kinds) != layers:
            raise InputError(
                f"{fields.label}: field 'layer_types': expected one entry per layer ({layers}), found {len(kinds)}"
            )
        count = sum(kind == "sliding_attention" for kind in kinds)
        rule = "layer_types"
    else:
        count, rule = _window_rule(fields, architecture, layers), architecture.window
    if not count:
        return {}
    window = fields.whole("sliding_window")
    if context is not None and window >= context:
        notes.append(f"sliding_window {window} >= max_position_embeddings {context}: the window never binds")
        return {}
    notes.append(f"{count} of {layers} layers attend through a {window}-token window ({rule})")
    return {"window": window, "window_layers": count}


def _gemma4_layers(fields: Fields, layers: int, window: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """Gemma 4's full-attention layers: their head width, KV heads and shared key-value projection.

    vLLM's ``Gemma4DecoderLayer`` (gemma4.py) gives a full-attention layer ``global_head_dim`` and, where
    ``attention_k_eq_v``, ``num_global_key_value_heads`` KV heads (else ``num_key_value_heads``). It caches a key
    and a value per head either way (the key with its norm and rotary embedding, the value with its own norm), so
    K = V halves the projection's weights, not the cache. The layer scalar per layer (a loaded buffer) is counted
    among its parameters, and with the MoE block three more RMSNorms (``layer_extras``).
    """
    h = fields.whole("hidden_size")
    extras = 1 + (3 * h if fields.flag("enable_moe_block") else 0)
    full = layers - int(window.get("window_layers", 0))
    if not full or "window" not in window:
        return {"layer_extras": extras}  # every layer one shape: the config's head_dim and KV heads
    k_eq_v = fields.flag("attention_k_eq_v")
    kv_key = "num_global_key_value_heads" if k_eq_v else "num_key_value_heads"
    kv, width = fields.whole(kv_key), fields.whole("global_head_dim")
    heads = fields.whole("num_attention_heads")
    if heads % kv:
        raise InputError(f"{fields.label}: field '{kv_key}': {kv} does not divide num_attention_heads {heads}")
    notes.append(
        f"{full} full-attention layers of {kv} KV heads ({kv_key}) of global_head_dim {width}"
        + (", the key's projection giving the value too (attention_k_eq_v; both cached)" if k_eq_v else "")
    )
    return {"global_layers": full, "global_kv_heads": kv, "global_head_dim": width, "k_eq_v": k_eq_v,
            "layer_extras": extras}  # fmt: skip


def _window_rule(fields: Fields, architecture: Architecture, layers: int) -> int:
    """Layers attending through the window by the architecture's rule (0 where it has no window)."""
    rule = architecture.window
    if rule == "none" or fields.config.get("sliding_window") is None:
        return 0
    if rule == "all":
        return layers
    if rule == "qwen":
        if not fields.flag("use_sliding_window"):
            return 0
        return max(layers - fields.whole("max_window_layers", layers, minimum=0), 0)
    if rule == "alternate":
        return (layers + 1) // 2
    key = "_sliding_window_pattern" if "_sliding_window_pattern" in fields.config else "sliding_window_pattern"
    return layers - layers // fields.whole(key, 6)  # Gemma 3: every sixth layer attends globally by default


# --------------------------------------------------------------------------------------------
# The parameters


@dataclasses.dataclass(frozen=True)
class Counts:
    """Parameters by part, counted from a :class:`Shape` (whole numbers)."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    shared_experts: int
    routers: int
    norms: int
    unused_experts: int  # the routed experts' parameters a token does not read
    state: int = 0  # a hybrid's state layers (Mamba-2 mixers: projections, convolution, per-head terms, norm)
    latent: int = 0  # latent MoE: the projections into and out of the experts' latent width (Nemotron 3)

    @property
    def total(self) -> int:
        """Every parameter the checkpoint stores for these layers."""
        return sum(getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "unused_experts")

    @property
    def active(self) -> int:
        """Parameters a token reads: all but the routed experts it is not routed to (the input embedding counted)."""
        return self.total - self.unused_experts


def count_parameters(shape: Shape) -> Counts:
    """The parameters of ``shape`` by part: embeddings, attention (MLA too), MLPs, experts, routers, norms."""
    s, arch, h = shape, shape.architecture, shape.hidden
    if s.hybrid is not None:
        from ._hf_hybrid import hybrid_counts

        return Counts(**hybrid_counts(s, _attention_parameters(s)))
    attention = _attention_parameters(s)
    full = s.global_layers * (_global_attention_parameters(s) - attention)  # Gemma 4's full layers differ
    dense_layers = s.layers - s.moe_layers
    dense_mlp = dense_layers * (3 * h * s.intermediate + (2 * s.intermediate + h if s.mlp_bias else 0))
    expert = 3 * h * s.expert_intermediate + (2 * s.expert_intermediate + h if arch.moe == "gpt_oss" else 0)
    return Counts(
        embedding=s.vocab * h,
        lm_head=0 if s.tied else s.vocab * h,
        attention=s.layers * attention + full,
        dense_mlp=dense_mlp,
        routed_experts=s.moe_layers * s.experts * expert if s.moe_layers else 0,
        shared_experts=s.moe_layers * s.shared_experts * 3 * h * s.expert_intermediate,
        routers=s.moe_layers * (h * s.experts + s.router_bias) if s.moe_layers else 0,
        norms=s.layers * (arch.norms * h + s.layer_extras) + h,
        unused_experts=s.moe_layers * (s.experts - s.experts_per_token) * expert if s.moe_layers else 0,
    )


def _indexer_parameters(s: Shape) -> int:
    """One layer's indexer weights (vLLM's ``Indexer``, deepseek_v2.py).

    Its query heads from the query latent (``wq_b``), its key (``wk``) with a LayerNorm (weight and bias), and
    the heads' weights (``weights_proj``).
    """
    if not s.index_heads:
        return 0
    query = (s.q_lora or s.hidden) * s.index_heads * s.index_head_dim
    return query + s.hidden * s.index_head_dim + 2 * s.index_head_dim + s.hidden * s.index_heads


def _attention_parameters(s: Shape) -> int:
    """One layer's attention weights, with its biases, per-head norms and sinks."""
    h, heads, arch = s.hidden, s.heads, s.architecture
    if arch.mla:
        query = (
            h * s.q_lora + s.q_lora + s.q_lora * heads * (s.nope + s.rope)
            if s.q_lora
            else h * heads * (s.nope + s.rope)
        )
        weights = (
            query + h * (s.kv_lora + s.rope) + s.kv_lora + s.kv_lora * heads * (s.nope + s.value) + heads * s.value * h
        )
        biases = s.q_lora + s.kv_lora + s.rope + h if s.attention_bias else 0
        return weights + biases + _indexer_parameters(s)
    q, kv = heads * s.head_dim, s.kv_heads * s.head_dim
    weights = h * (q + 2 * kv) + q * h
    biases = (q + 2 * kv + h) if s.attention_bias else (q + 2 * kv) if arch.qkv_bias else 0
    norms = (heads + s.kv_heads if arch.qk_norm_across_heads else 2) * s.head_dim if arch.qk_norm else 0
    return weights + biases + norms + (heads if arch.sinks else 0)


def _global_attention_parameters(s: Shape) -> int:
    """One of Gemma 4's full-attention layers: q, k (v unless ``k_eq_v``) and o at its width, the q and k norms."""
    if not s.global_layers:
        return 0
    q, kv = s.heads * s.global_head_dim, s.global_kv_heads * s.global_head_dim
    return s.hidden * (q + kv * (1 if s.k_eq_v else 2)) + q * s.hidden + 2 * s.global_head_dim


# --------------------------------------------------------------------------------------------
# The checkpoint's precision


@dataclasses.dataclass(frozen=True)
class Quantization:
    """The precision of a quantized checkpoint's weights and KV cache, and its format (registry names)."""

    precision: str
    format: str
    kv_cache: str | None
    described: str


#: ModelOpt's ``quant_algo`` values: the weights' precision.
_MODELOPT = {"FP8": "fp8", "FP8_PB_WO": "fp8", "FP8_BLOCK": "fp8", "NVFP4": "fp4", "W4A16_AWQ": "int4",
             "W4A8_AWQ": "int4", "INT8_SQ": "int8", "W8A16": "int8", "INT8": "int8"}  # fmt: skip
#: ModelOpt's ``kv_cache_quant_algo`` values: the KV cache's precision.
_MODELOPT_KV = {"FP8": "fp8", "NVFP4": "fp4", "INT8": "int8"}


def read_quantization(declared: Mapping[str, Any], label: str) -> Quantization:
    """The :class:`Quantization` an ``hf_quant_config.json`` or a config's ``quantization_config`` declares.

    ModelOpt (``quantization.quant_algo`` and ``kv_cache_quant_algo``, or ``quant_method: modelopt``), block-scaled
    FP8 (``quant_method: fp8`` with ``weight_block_size``), MXFP4, compressed-tensors (the weights' bits and type
    of its config groups, ``kv_cache_scheme``), AWQ and GPTQ; any other is refused naming the field.
    """
    nested = declared.get("quantization")
    method = str(declared.get("quant_method", "modelopt" if isinstance(nested, Mapping) else "")).lower()
    if method == "modelopt":
        return _modelopt(nested if isinstance(nested, Mapping) else declared, label)
    if method == "fp8" and declared.get("weight_block_size"):
        return Quantization("fp8", "fp8-block", None, f"block-scaled FP8 ({declared.get('weight_block_size')} blocks)")
    if method == "mxfp4":
        return Quantization("fp4", "mxfp4", None, "MXFP4")
    if method == "compressed-tensors":
        return _compressed_tensors(declared, label)
    if method in ("awq", "gptq"):
        bits = declared.get("bits", declared.get("w_bit"))
        if bits in (4, 8):
            return Quantization(f"int{bits}", method, None, f"{method.upper()} {bits}-bit")
        raise InputError(f"{label}: field 'bits': expected 4 or 8 for {method.upper()}, found {shown(bits)}")
    raise InputError(
        f"{label}: field 'quant_method': {shown(declared.get('quant_method'))} is not a format the registry records; "
        "it records modelopt, fp8 (with weight_block_size), mxfp4, compressed-tensors, awq and gptq"
    )


def _modelopt(declared: Mapping[str, Any], label: str) -> Quantization:
    algo, kv = declared.get("quant_algo"), declared.get("kv_cache_quant_algo")
    if algo not in _MODELOPT:
        raise InputError(f"{label}: field 'quant_algo': expected one of {sorted(_MODELOPT)}, found {shown(algo)}")
    if kv is not None and kv not in _MODELOPT_KV:
        raise InputError(
            f"{label}: field 'kv_cache_quant_algo': expected one of {sorted(_MODELOPT_KV)} or null, found {shown(kv)}"
        )
    described = f"ModelOpt quant_algo {algo}, kv_cache_quant_algo {kv}"
    return Quantization(_MODELOPT[algo], "modelopt", _MODELOPT_KV.get(kv) if kv else None, described)


def _compressed_tensors(declared: Mapping[str, Any], label: str) -> Quantization:
    groups = declared.get("config_groups")
    weights = [g.get("weights") for g in groups.values()] if isinstance(groups, Mapping) else []
    names = {_bits_name(w) for w in weights if isinstance(w, Mapping)}
    if len(names) != 1 or None in names:
        raise InputError(
            f"{label}: field 'config_groups': expected groups whose weights share one of fp8, fp4, int8, int4, "
            f"found {shown(groups)}"
        )
    scheme = declared.get("kv_cache_scheme")
    kv = _bits_name(scheme) if isinstance(scheme, Mapping) else None
    precision = names.pop()
    assert precision is not None
    return Quantization(precision, "compressed-tensors", kv, f"compressed-tensors {precision} weights, KV {kv}")


def _bits_name(spec: Mapping[str, Any]) -> str | None:
    kind, bits = spec.get("type"), spec.get("num_bits")
    name = f"{'fp' if kind == 'float' else 'int' if kind == 'int' else '?'}{bits}"
    return name if name in ("fp8", "fp4", "int8", "int4") else None
