"""A hybrid model's ``config.json`` read into its layer kinds and state shapes (Nemotron-H, Nemotron 3).

Nemotron-H (``NemotronHForCausalLM``) stacks single-mixer blocks: ``M`` a Mamba-2 mixer, ``*`` attention, ``-`` a
relu2 MLP (two matrices, no gate), ``E`` a mixture of experts (relu2 experts, shared experts, a sigmoid router
with a score-correction bias, and in Nemotron 3 Super/Ultra a latent projection around the experts). The kinds
come from ``hybrid_override_pattern`` or ``layers_block_type``. docs/registry.md (Hybrid models) gives the count.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .units import shown

if TYPE_CHECKING:
    from ._hf_config import Counts, Fields, Shape

#: ``layers_block_type`` names by ``hybrid_override_pattern`` letter.
_BLOCKS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
#: The fields a Nemotron-H config declares that the refusal of hybrids would otherwise name.
_NEMOTRON_H_FIELDS = frozenset({"hybrid_override_pattern", "layers_block_type", "ssm_state_size"})
#: The recurrent state's precision as vLLM keeps it, by the config's ``mamba_ssm_cache_dtype`` (absent: float16,
#: vLLM's ``NemotronHForCausalLMConfig.verify_and_update_config``).
_STATE_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def read_fields(architecture: str | None) -> frozenset[str]:
    """The config fields ``architecture`` reads that would otherwise be refused as inexpressible."""
    from ._hf_config import ARCHITECTURES

    found = ARCHITECTURES.get(architecture or "")
    return _NEMOTRON_H_FIELDS if found is not None and found.hybrid == "nemotron_h" else frozenset()


@dataclasses.dataclass(frozen=True)
class HybridShape:
    """A Nemotron-H stack: how many blocks of each kind, and the Mamba-2, MLP and expert widths."""

    kinds: dict[str, int]  # blocks by letter: M, *, -, E
    state_heads: int
    state_head_dim: int
    state_key_dim: int
    state_groups: int
    conv_kernel: int
    state_precision: str
    latent: int  # the experts' latent width (0: the experts read the hidden state)
    shared_intermediate: int


def read_hybrid(fields: Fields, layers: int) -> dict[str, Any]:
    """The :class:`~calculator._hf_config.Shape` fields of a Nemotron-H config (its ``hybrid`` and MLP/experts)."""
    kinds = _kinds(fields, layers)
    config = fields.config
    dtype = config.get("mamba_ssm_cache_dtype")
    dtype = "float16" if dtype is None else dtype
    if dtype not in _STATE_DTYPES:
        raise InputError(
            f"{fields.label}: field 'mamba_ssm_cache_dtype': expected one of {sorted(_STATE_DTYPES)}, "
            f"found {shown(dtype)}"
        )
    moe = kinds["E"]
    hybrid = HybridShape(
        kinds=dict(kinds),
        state_heads=fields.whole("mamba_num_heads"),
        state_head_dim=fields.whole("mamba_head_dim"),
        state_key_dim=fields.whole("ssm_state_size"),
        state_groups=fields.whole("n_groups"),
        conv_kernel=fields.whole("conv_kernel"),
        state_precision=_STATE_DTYPES[dtype],
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


def _kinds(fields: Fields, layers: int) -> Counter[str]:
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


def hybrid_counts(s: Shape, attention: int) -> Counts:
    """The parameters of a Nemotron-H :class:`~calculator._hf_config.Shape` by part (``attention``: one layer's)."""
    from ._hf_config import Counts

    hy, h = s.hybrid, s.hidden
    inner = hy.state_heads * hy.state_head_dim
    channels = inner + 2 * hy.state_groups * hy.state_key_dim
    # in_proj (gate, x, B, C, one time step per head), the depthwise convolution and its bias, A, D and the time
    # step's bias per head, the gated RMSNorm, out_proj (no projection biases: mamba_proj_bias false)
    mamba = h * (channels + inner + hy.state_heads) + channels * (hy.conv_kernel + 1) + 3 * hy.state_heads + inner
    mamba += inner * h
    moe, width = s.moe_layers, hy.latent or h
    expert = 2 * width * s.expert_intermediate  # up and down, relu2
    return Counts(
        embedding=s.vocab * h,
        lm_head=0 if s.tied else s.vocab * h,
        attention=hy.kinds["*"] * attention,
        dense_mlp=hy.kinds["-"] * 2 * h * s.intermediate,
        routed_experts=moe * s.experts * expert,
        shared_experts=moe * s.shared_experts * 2 * h * hy.shared_intermediate,
        routers=moe * (h * s.experts + s.experts),  # the gate and its score-correction bias
        norms=s.layers * h + h,
        unused_experts=moe * (s.experts - s.experts_per_token) * expert,
        state=hy.kinds["M"] * mamba,
        latent=moe * 2 * h * hy.latent,
    )
