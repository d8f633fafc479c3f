"""A hybrid model's ``config.json`` read into its layer kinds and state shapes (Nemotron-H, Qwen3-Next, Qwen3.5).

Nemotron-H (``NemotronHForCausalLM``) stacks single-mixer blocks: ``M`` a Mamba-2 mixer, ``*`` attention, ``-`` a
relu2 MLP (two matrices, no gate), ``E`` a mixture of experts (relu2 experts, shared experts, a sigmoid router
with a score-correction bias, and in Nemotron 3 Super/Ultra a latent projection around the experts). The kinds
come from ``hybrid_override_pattern`` or ``layers_block_type``. Qwen3-Next and Qwen3.5's text model
(``Qwen3NextForCausalLM``, ``Qwen3_5ForCausalLM``, ``Qwen3_5MoeForCausalLM``) run Gated DeltaNet or gated
attention on each layer (``layer_types``, else every ``full_attention_interval``-th layer attends), each followed
by a SwiGLU MLP or experts with one gated shared expert. docs/registry.md (Hybrid models) gives the count.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from .errors import InputError
from .units import shown

# This module reads what :mod:`calculator._hf_config` hands it (its ``Fields``, ``Architecture`` and ``Shape``, typed
# ``Any`` here) and returns plain values, so that the two do not import each other.

#: ``layers_block_type`` names by ``hybrid_override_pattern`` letter.
_BLOCKS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
#: The fields each hybrid family's config declares that the refusal of hybrids would otherwise name (and mamba_*).
_READ = {
    "nemotron_h": frozenset({"hybrid_override_pattern", "layers_block_type", "ssm_state_size"}),
    "gated_deltanet": frozenset({"layer_types", "full_attention_interval", "linear_num_value_heads"}),
}
#: Gated DeltaNet's layer kinds (``layer_types``): attention with a KV cache, or a linear layer with a fixed state.
_GDN_KINDS = {"full_attention": "*", "linear_attention": "M"}
#: The recurrent state's precision as vLLM keeps it, by the config's ``mamba_ssm_cache_dtype`` (Nemotron-H; absent:
#: float16, vLLM's ``NemotronHForCausalLMConfig.verify_and_update_config``) or ``mamba_ssm_dtype`` (Qwen3.5's
#: multimodal classes; absent: the model's dtype, bfloat16).
_STATE_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def read_fields(hybrid: str | None) -> frozenset[str]:
    """The config fields a ``hybrid`` family (an ``Architecture.hybrid``) reads that would otherwise be refused."""
    return _READ.get(hybrid or "", frozenset())


@dataclasses.dataclass(frozen=True)
class HybridShape:
    """A hybrid stack: how many layers of each kind, and the state layers', MLP and expert widths."""

    kind: str  # the state layers' mixer: "mamba2" (Nemotron-H) or "gated_deltanet" (Qwen3-Next, Qwen3.5)
    #: Layers by kind: M (state), * (attention), - (dense MLP), E (MoE). Nemotron-H's are one block each;
    #: Gated DeltaNet models count each layer's mixer (M or *) and its MLP (- or E).
    kinds: dict[str, int]
    state_heads: int
    state_head_dim: int
    state_key_dim: int
    state_groups: int
    conv_kernel: int
    state_precision: str
    latent: int  # the experts' latent width (0: the experts read the hidden state)
    shared_intermediate: int
    output_gate: bool = False  # the attention's query projection also gives a gate (Qwen3-Next, Qwen3.5)


def read_hybrid(fields: Any, layers: int, architecture: Any) -> dict[str, Any]:
    """The :class:`~calculator._hf_config.Shape` fields of a hybrid config (its ``hybrid`` and MLP/experts)."""
    if architecture.hybrid == "gated_deltanet":
        return _gated_deltanet(fields, layers, architecture.state_dtype_key)
    return _nemotron_h(fields, layers)


def _state_precision(fields: Any, key: str | None, default: str) -> str:
    """The recurrent state's registry precision from the config's ``key`` (``default`` where absent or no key)."""
    dtype = fields.config.get(key) if key else None
    dtype = default if dtype is None else dtype
    if dtype not in _STATE_DTYPES:
        raise InputError(
            f"{fields.label}: field '{key}': expected one of {sorted(_STATE_DTYPES)}, found {shown(dtype)}"
        )
    return _STATE_DTYPES[dtype]


def _nemotron_h(fields: Any, layers: int) -> dict[str, Any]:
    """Nemotron-H's blocks, Mamba-2 shapes, MLP and experts."""
    kinds = _kinds(fields, layers)
    moe = kinds["E"]
    hybrid = HybridShape(
        kind="mamba2",
        kinds=dict(kinds),
        state_heads=fields.whole("mamba_num_heads"),
        state_head_dim=fields.whole("mamba_head_dim"),
        state_key_dim=fields.whole("ssm_state_size"),
        state_groups=fields.whole("n_groups"),
        conv_kernel=fields.whole("conv_kernel"),
        state_precision=_state_precision(fields, "mamba_ssm_cache_dtype", "float16"),
        latent=fields.whole("moe_latent_size", 0, minimum=0) if moe else 0,
        shared_intermediate=fields.whole("moe_shared_expert_intermediate_size", 0, minimum=0) if moe else 0,
    )
    experts: dict[str, int] = {"intermediate": fields.whole("intermediate_size") if kinds["-"] else 0}
    if moe:
        experts |= {
            "experts": fields.whole("n_routed_experts"),
            "experts_per_token": fields.whole("num_experts_per_tok"),
            "shared_experts": fields.whole("n_shared_experts", 0, minimum=0),
            "expert_intermediate": fields.whole("moe_intermediate_size"),
            "moe_layers": moe,
        }
    return {**experts, "hybrid": hybrid}


def _gated_deltanet(fields: Any, layers: int, dtype_key: str | None) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5's layer kinds, Gated DeltaNet shapes, MLP and experts (``qwen3_moe``'s layout).

    The recurrent state is kept at the model's dtype, or at the precision the config's ``dtype_key`` names.
    """
    config = fields.config
    kinds = Counter({letter: 0 for letter in "M*-E"})
    kinds.update(_gdn_kinds(fields, layers))
    experts: dict[str, int] = {}
    shared = 0
    if config.get("num_experts"):
        step = fields.whole("decoder_sparse_step", 1)
        dense = config.get("mlp_only_layers") or []
        if not isinstance(dense, list) or not all(isinstance(i, int) and 0 <= i < layers for i in dense):
            raise InputError(
                f"{fields.label}: field 'mlp_only_layers': expected a list of layer indices below {layers}, "
                f"found {shown(dense)}"
            )
        kinds["E"] = sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
        shared = fields.whole("shared_expert_intermediate_size", 0, minimum=0)
        experts = {
            "experts": fields.whole("num_experts"),
            "experts_per_token": fields.whole("num_experts_per_tok"),
            "shared_experts": 1 if shared else 0,
            "expert_intermediate": fields.whole("moe_intermediate_size"),
            "moe_layers": kinds["E"],
        }
    kinds["-"] = layers - kinds["E"]
    hybrid = HybridShape(
        kind="gated_deltanet",
        kinds=dict(kinds),
        state_heads=fields.whole("linear_num_value_heads"),
        state_head_dim=fields.whole("linear_value_head_dim"),
        state_key_dim=fields.whole("linear_key_head_dim"),
        state_groups=fields.whole("linear_num_key_heads"),
        conv_kernel=fields.whole("linear_conv_kernel_dim"),
        state_precision=_state_precision(fields, dtype_key, "bfloat16"),  # docs/registry.md, Hybrid models
        latent=0,
        shared_intermediate=shared,
        output_gate=fields.flag("attn_output_gate", True),
    )
    return {**experts, "intermediate": fields.whole("intermediate_size") if kinds["-"] else 0, "hybrid": hybrid}


def _gdn_kinds(fields: Any, layers: int) -> list[str]:
    """Each layer's mixer, ``*`` or ``M``: ``layer_types``, else attention on every ``full_attention_interval``-th."""
    kinds = fields.config.get("layer_types")
    if kinds is None:
        every = fields.whole("full_attention_interval")
        return ["*" if (i + 1) % every == 0 else "M" for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers or not set(kinds) <= set(_GDN_KINDS):
        raise InputError(
            f"{fields.label}: field 'layer_types': expected one of {sorted(_GDN_KINDS)} per layer ({layers}), "
            f"found {shown(kinds)}"
        )
    return [_GDN_KINDS[kind] for kind in kinds]


def _kinds(fields: Any, layers: int) -> Counter[str]:
    """Blocks by kind from ``hybrid_override_pattern`` or ``layers_block_type``, one per layer."""
    config = fields.config
    if "layers_block_type" in config:
        key, value = "layers_block_type", config["layers_block_type"]
        letters = [_BLOCKS.get(kind, "?") for kind in value] if isinstance(value, list) else ["?"]
    else:
        key, value = "hybrid_override_pattern", config.get("hybrid_override_pattern")
        letters = list(value) if isinstance(value, str) else ["?"]
    if not set(letters) <= set("M*-E") or len(letters) != layers:
        raise InputError(
            f"{fields.label}: field '{key}': expected one block per layer ({layers}) of "
            f"{'M * - E' if key == 'hybrid_override_pattern' else sorted(_BLOCKS)}, found {shown(value)}"
        )
    kinds = Counter({letter: 0 for letter in "M*-E"})
    kinds.update(letters)
    return kinds


def hybrid_counts(s: Any, attention: int) -> dict[str, int]:
    """The parameters of a hybrid :class:`~calculator._hf_config.Shape` by part (``attention``: one layer's).

    The keyword arguments of a :class:`~calculator._hf_config.Counts`.
    """
    hy, h = s.hybrid, s.hidden
    inner = hy.state_heads * hy.state_head_dim
    channels = inner + 2 * hy.state_groups * hy.state_key_dim
    gdn = hy.kind == "gated_deltanet"
    matrices = 3 if gdn else 2  # SwiGLU MLPs and experts (Qwen), relu2 ones (Nemotron-H)
    if gdn:
        # in_proj_qkvz and in_proj_ba (q, k, v, the gate z, beta and alpha per value head), the convolution (no
        # bias), A and the time step's bias per value head, the gated RMSNorm over a head, out_proj
        mixer = h * (channels + inner + 2 * hy.state_heads) + channels * hy.conv_kernel + 2 * hy.state_heads
        mixer += hy.state_head_dim + inner * h
        attention += h * s.heads * s.head_dim if hy.output_gate else 0  # the query projection's gate half
    else:
        # in_proj (gate, x, B, C, one time step per head), the depthwise convolution and its bias, A, D and the time
        # step's bias per head, the gated RMSNorm, out_proj (no projection biases: mamba_proj_bias false)
        mixer = h * (channels + inner + hy.state_heads) + channels * (hy.conv_kernel + 1) + 3 * hy.state_heads
        mixer += inner + inner * h
    moe, width = s.moe_layers, hy.latent or h
    expert = matrices * width * s.expert_intermediate
    shared = s.shared_experts * (matrices * h * hy.shared_intermediate + (h if gdn else 0))  # Qwen: a gate too
    return dict(
        embedding=s.vocab * h,
        lm_head=0 if s.tied else s.vocab * h,
        attention=hy.kinds["*"] * attention,
        dense_mlp=hy.kinds["-"] * matrices * h * s.intermediate,
        routed_experts=moe * s.experts * expert,
        shared_experts=moe * shared,
        routers=moe * (h * s.experts + (0 if gdn else s.experts)),  # Nemotron's score-correction bias
        norms=s.layers * s.architecture.norms * h + h,
        unused_experts=moe * (s.experts - s.experts_per_token) * expert,
        state=hy.kinds["M"] * mixer,
        latent=moe * 2 * h * hy.latent,
    )
