"""The fixed state a hybrid model's state layers keep per sequence (Mamba-2, Gated DeltaNet).

A hybrid model (Nemotron-H, Nemotron 3, Qwen3-Next, Qwen3.5) attends on a few of its layers, which keep a
KV cache that grows with the sequence, and runs a recurrent mixer on the others, which keeps a state of fixed
size per sequence whatever its length: the recurrent state and the last ``conv_kernel - 1`` inputs of the
short causal convolution before it. docs/registry.md (Hybrid models) gives the shapes and their sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .._support import transformer_of
from ..precision import bits_per_element
from ..types import ModelRef
from ..units import Q_

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["StateShape", "state_shape", "state_bytes_per_sequence"]

#: The convolution state's bytes per element: vLLM keeps it at the model's dtype (``mamba_cache_dtype`` "auto",
#: ``MambaStateDtypeCalculator`` in vllm/model_executor/layers/mamba/mamba_utils.py), BF16 for every hybrid here.
CONV_STATE_BYTES = 2.0


class StateShape(NamedTuple):
    """One state layer's state per sequence and the widths of its projections (elements, whole model width)."""

    recurrent: int  #: elements of the recurrent state: heads x head_dim x key_dim
    conv_channels: int  #: channels the short convolution runs over: heads x head_dim + 2 x groups x key_dim
    conv: int  #: elements of the convolution state: (conv_kernel - 1) x conv_channels
    inner: int  #: the mixer's inner width, heads x head_dim (the output projection's input)
    in_projection: int  #: output width of the input projection (the convolved channels, the gate, and per head terms)


def state_shape(model: ModelRef, *, registry: Registry | None = None) -> StateShape | None:
    """The :class:`StateShape` of a hybrid model's state layers (None for a model without state layers).

    Mamba-2 (vLLM ``MambaStateShapeCalculator.mamba2_state_shape``): the SSM state ``heads x head_dim x
    d_state`` and the convolution over ``heads x head_dim + 2 x n_groups x d_state`` channels; the input
    projection also gives the gate (``heads x head_dim``) and one time step per head. Gated DeltaNet
    (``gated_delta_net_state_shape``): the state ``value_heads x key_head_dim x value_head_dim`` and the
    convolution over ``2 x key_heads x key_head_dim + value_heads x value_head_dim`` channels; the input
    projections also give the gate ``z`` and two scalars (beta, alpha) per value head.
    """
    spec = transformer_of(model, "state_shape", registry=registry)
    if spec.state_kind is None:
        return None
    heads, width, key, groups = spec.state_heads, spec.state_head_dim, spec.state_key_dim, spec.state_groups
    inner = heads * width
    channels = inner + 2 * groups * key
    per_head = heads if spec.state_kind == "mamba2" else 2 * heads
    return StateShape(
        recurrent=heads * width * key,
        conv_channels=channels,
        conv=(spec.conv_kernel - 1) * channels,
        inner=inner,
        in_projection=channels + inner + per_head,
    )


def state_bytes_per_sequence(model: ModelRef, *, registry: Registry | None = None) -> Any:
    """Bytes of the fixed state one sequence keeps over all the state layers (0 B without state layers).

    ``state_layers x (recurrent x state_precision + conv x 2 B)``: the recurrent state at the precision the
    engines keep it (``Model.state_precision``), the convolution state at 16 bits. It does not grow with the
    sequence, and a KV-cache precision (FP8 KV) does not apply to it (vLLM's ``mamba_cache_dtype`` is its own
    setting, "auto": the model's dtype).

    Examples
    --------
    >>> state_bytes_per_sequence("nemotron-3-nano-30b-a3b")  # 23 Mamba-2 layers, their SSM state at FP32
    <Quantity(49082368.0, 'byte')>
    """
    spec = transformer_of(model, "state_bytes_per_sequence", registry=registry)
    shape = state_shape(spec)
    if shape is None:
        return Q_(0.0, "B")
    recurrent = shape.recurrent * bits_per_element(spec.state_precision) / 8
    return Q_(float(spec.state_layers * (recurrent + shape.conv * CONV_STATE_BYTES)), "B")
