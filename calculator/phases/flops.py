"""FLOPs of a prefill and of a decode step, attention included, and the roofline time (section 10.8.1, Eq. 9)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._support import transformer_of
from ..formula import formula, maximum, per, var
from ..types import ModelRef
from ..units import Q_

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "attention_flops_per_pair",
    "prefill_flops",
    "decode_flops",
    "roofline_time",
]


# ============================================================================================
# FLOPs and roofline time


def attention_flops_per_pair(model: ModelRef, *, registry: Registry | None = None) -> Any:
    """Attention FLOPs for one (query token, cached token) pair, summed over layers and heads.

    Parameters
    ----------
    model : str or Model

    Returns
    -------
    Quantity [compute]
        ``2 L H (d_qk + d_v)``: the ``q . k`` score and the ``p v`` accumulation of every query head;
        ``4 L H d_h`` for MHA/GQA/MQA. For MLA, ``d_qk = qk_nope_head_dim + qk_rope_head_dim`` and
        ``d_v = v_head_dim`` (the per-head attention of DeepSeek-V2/V3; ``head_dim`` if unknown).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> attention_flops_per_pair(m)
    <Quantity(2621440, 'FLOP')>
    """
    resolved = transformer_of(model, "attention_flops_per_pair", registry=registry)
    if resolved.attention == "mla" and resolved.qk_nope_head_dim is not None:
        qk = resolved.qk_nope_head_dim + resolved.qk_rope_head_dim
        value = resolved.v_head_dim or resolved.head_dim
    else:
        qk = value = resolved.head_dim
    if resolved.global_kv_heads is not None:  # Gemma 4: the full-attention layers' heads are global_head_dim wide
        full, width = resolved.global_layers, resolved.global_head_dim
        windowed = resolved.kv_layers - full
        return Q_(2 * resolved.attention_heads * (windowed * 2 * qk + full * 2 * width), "FLOP")
    return Q_(2 * resolved.kv_layers * resolved.attention_heads * (qk + value), "FLOP")  # attending layers


@formula(
    result=var("FLOP", r"F_{\mathrm{pre}}", description="FLOPs of one sequence's prefill"),
    reference="section 10.8.1 (2 N_act FLOPs per token plus attention over the causal prefix)",
    active_parameters=var("", r"N_{\mathrm{act}}", description="parameters used per token"),
    prompt_tokens=var("", "P", description="tokens prefilled"),
    attention_flops=var("FLOP", "a", "nonnegative", "attention FLOPs per (query, key) pair"),
    cached_tokens=var("", "c_{0}", "nonnegative", "tokens already cached before the prompt"),
    example={"active_parameters": 70e9, "prompt_tokens": 4096, "attention_flops": "2621440 FLOP"},
)
def prefill_flops(active_parameters, prompt_tokens, attention_flops, cached_tokens=0):
    r"""FLOPs to prefill ``P`` tokens after ``c_0`` cached ones (causal attention).

    Parameters
    ----------
    active_parameters : float
    prompt_tokens : float
    attention_flops : Quantity [compute]
        :func:`attention_flops_per_pair` of the model.
    cached_tokens : float, optional
        Prefix already in the cache (a prefix-cache hit or an earlier chunk).

    Returns
    -------
    Quantity [compute]

    Notes
    -----
    .. math:: F_{\mathrm{pre}} = 2 N_{\mathrm{act}} P + a \left(P c_0 + \tfrac{P (P+1)}{2}\right)

    Token :math:`i` of the prompt attends to the :math:`c_0 + i` tokens before and including it.

    Examples
    --------
    >>> prefill_flops(70e9, 4096, Q_(0, "FLOP")).to("TFLOP")
    <Quantity(573.44, 'teraFLOP')>
    """
    pairs = prompt_tokens * cached_tokens + prompt_tokens * (prompt_tokens + 1) / 2
    return per(2 * active_parameters * prompt_tokens, "FLOP") + attention_flops * pairs


@formula(
    result=var("FLOP", r"F_{\mathrm{dec}}", description="FLOPs of one decode step of a batch"),
    reference="section 10.8.1",
    active_parameters=var("", r"N_{\mathrm{act}}", description="parameters used per token"),
    batch=var("", "B", "nonnegative", "sequences decoding"),
    context=var("", "S", "nonnegative", "tokens each new token attends to"),
    attention_flops=var("FLOP", "a", "nonnegative", "attention FLOPs per (query, key) pair"),
    example={"active_parameters": 70e9, "batch": 32, "context": 4096, "attention_flops": "2621440 FLOP"},
)
def decode_flops(active_parameters, batch, context, attention_flops):
    r"""FLOPs of one decode step: one new token for each of ``B`` sequences at context ``S``.

    Parameters
    ----------
    active_parameters : float
    batch : float
    context : float
    attention_flops : Quantity [compute]

    Returns
    -------
    Quantity [compute]

    Notes
    -----
    .. math:: F_{\mathrm{dec}} = B \, (2 N_{\mathrm{act}} + a S)

    Examples
    --------
    >>> decode_flops(70e9, 1, 0, Q_(0, "FLOP")).to("GFLOP")
    <Quantity(140.0, 'gigaFLOP')>
    """
    return batch * (per(2 * active_parameters, "FLOP") + attention_flops * context)


@formula(
    result=var("s", "T", "nonnegative", "roofline time of a step"),
    reference="section 10.8.1 (roofline), Eq. 9",
    flops=var("FLOP", "F", "nonnegative", "FLOPs executed on the device"),
    bytes_moved=var("B", "M", "nonnegative", "bytes moved through device memory"),
    peak_throughput=var("FLOP/s", r"R_{\mathrm{peak}}", description="peak compute throughput"),
    memory_bandwidth=var("B/s", r"BW_{\mathrm{mem}}", description="memory bandwidth"),
    example={
        "flops": "140 GFLOP",
        "bytes_moved": "140 GB",
        "peak_throughput": "989 TFLOP/s",
        "memory_bandwidth": "3.35 TB/s",
    },
)
def roofline_time(flops, bytes_moved, peak_throughput, memory_bandwidth):
    r"""Roofline lower bound on a step's time: the slower of compute and memory traffic.

    Parameters
    ----------
    flops : Quantity [compute]
    bytes_moved : Quantity [information]
    peak_throughput : Quantity [compute / time]
    memory_bandwidth : Quantity [information / time]

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T = \max\left(\frac{F}{R_{\mathrm{peak}}}, \frac{M}{BW_{\mathrm{mem}}}\right)

    All four quantities must describe the same device or shard (section 10.8.2).

    Examples
    --------
    >>> roofline_time(Q_(140, "GFLOP"), Q_(140, "GB"), Q_(989, "TFLOP/s"), Q_(3.35, "TB/s")).to("ms")
    <Quantity(41.7910448, 'millisecond')>
    """
    return maximum(flops / peak_throughput, bytes_moved / memory_bandwidth)
