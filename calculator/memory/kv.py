"""KV-cache bytes per token (section 10.7.1): MHA, GQA and MQA (eq. 5), MLA, and the tensor-parallel split.

Tensor parallelism (degree ``t``) follows the layout of Megatron-style serving engines (vLLM,
TensorRT-LLM): weights divide by ``t``; query heads must divide by ``t``; the KV heads divide by ``t``
when ``t <= kv_heads`` (and must divide evenly), and when ``t > kv_heads`` each KV head is replicated
on ``t / kv_heads`` devices, so a device holds one KV head (``t`` must then be a multiple of
``kv_heads``; vLLM's rule). The MLA latent of DeepSeek-style models is replicated on every rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import checked, count, model_of, renamed, transformer_of
from ..errors import InputError
from ..formula import formula, per, var
from ..types import Count, ModelRef, Precision
from ..units import Q_
from ._common import _kv_precision_bytes

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "kv_bytes_per_token",
    "mla_kv_bytes_per_token",
    "model_kv_bytes_per_token",
    "kv_bytes_per_token_per_device",
    "tensor_parallel_valid",
    "window_shares",
    "check_tensor_parallel",
]


# ============================================================================================
# KV bytes per token


@formula(
    result=var("B/token", r"m_{\mathrm{tok}}", description="KV-cache bytes per token of one sequence"),
    reference="Eq. 5, section 10.7.1",
    layers=var("", "L", "positive_integer", "transformer layers"),
    kv_heads=var("", r"H_{\mathrm{kv}}", "positive_integer", "key/value heads per layer"),
    head_dim=var("", "d_{h}", "positive_integer", "elements per head"),
    bytes_per_element=var("B", "s", "precision", "bytes per cached element"),
    example={"layers": 80, "kv_heads": 8, "head_dim": 128, "bytes_per_element": "2 B"},
)
def kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_element):
    r"""KV-cache bytes per token: one key and one value vector per KV head in every layer.

    Parameters
    ----------
    layers : int
        Transformer layers that keep a KV cache.
    kv_heads : int
        Key/value heads per layer (equal to the attention heads for MHA, fewer for GQA, 1 for MQA).
    head_dim : int
        Elements per head.
    bytes_per_element : Quantity [information]
        Storage per cached element (2 B for FP16/BF16, 1 B for FP8/INT8).

    Returns
    -------
    Quantity [information / token]

    Notes
    -----
    .. math:: m_{\mathrm{tok}} = 2 \, L \, H_{\mathrm{kv}} \, d_h \, s

    Equation 5 of the chapter (section 10.7.1), for full attention where every layer caches K and V.
    Latent-attention models (MLA) cache something else: see :func:`mla_kv_bytes_per_token`.

    Examples
    --------
    The 70B GQA reference model (80 layers, 8 KV heads of 128 at FP16):

    >>> from calculator.units import Q_
    >>> kv_bytes_per_token(80, 8, 128, Q_(2, "B"))
    <Quantity(327680.0, 'byte / token')>
    """
    return per(2 * layers * kv_heads * head_dim * bytes_per_element, "1/token")


@formula(
    result=var("B/token", r"m_{\mathrm{tok}}", description="MLA cache bytes per token of one sequence"),
    reference="DeepSeek-V2 (arXiv:2405.04434) Table 1; DeepSeek-V3 (arXiv:2412.19437) section 2.1.1",
    layers=var("", "L", "positive_integer", "transformer layers"),
    latent_dim=var("", r"d_{c}", "positive_integer", "compressed KV latent width (kv_lora_rank)"),
    rope_dim=var("", r"d_{h}^{R}", "positive_integer", "decoupled RoPE key width (qk_rope_head_dim)"),
    bytes_per_element=var("B", "s", "precision", "bytes per cached element"),
    example={"layers": 61, "latent_dim": 512, "rope_dim": 64, "bytes_per_element": "2 B"},
)
def mla_kv_bytes_per_token(layers, latent_dim, rope_dim, bytes_per_element):
    r"""Cache bytes per token of multi-head latent attention (MLA): one latent plus one RoPE key per layer.

    Parameters
    ----------
    layers : int
        Transformer layers.
    latent_dim : int
        Width of the compressed joint KV latent ``c^{KV}`` (``kv_lora_rank``, 512 in DeepSeek-V2/V3).
    rope_dim : int
        Width of the decoupled RoPE key ``k^R`` shared by all heads (``qk_rope_head_dim``, 64).
    bytes_per_element : Quantity [information]
        Storage per cached element.

    Returns
    -------
    Quantity [information / token]

    Notes
    -----
    .. math:: m_{\mathrm{tok}} = L \, (d_c + d_h^R) \, s

    MLA caches, per token and layer, the latent ``c^{KV}`` from which keys and values are both
    reconstructed, and the RoPE key; there is no separate K and V and no factor of the head count
    (DeepSeek-V2, arXiv:2405.04434, Table 1: "(d_c + d_h^R) l" elements per token; DeepSeek-V3
    keeps the same attention). Serving engines (vLLM, SGLang) store exactly this latent.

    Examples
    --------
    DeepSeek-V3 (61 layers, latent 512, RoPE key 64) at BF16:

    >>> mla_kv_bytes_per_token(61, 512, 64, Q_(2, "B"))
    <Quantity(70272.0, 'byte / token')>
    """
    return per(layers * (latent_dim + rope_dim) * bytes_per_element, "1/token")


@renamed(kv_dtype="kv_precision")
def model_kv_bytes_per_token(
    model: ModelRef, kv_precision: Precision = "fp16", *, registry: Registry | None = None
) -> Any:
    """KV-cache bytes per token of a registry model (MHA, GQA, MQA or MLA) at a KV precision.

    Parameters
    ----------
    model : str or Model
        Registry id or :class:`~calculator.registry.Model`.
    kv_precision : str or Quantity [information]
        Precision name of the cached elements (``"fp16"``, ``"fp8"``, ``"int8"``, ``"int4"``, ...)
        or the bytes per element.

    Returns
    -------
    Quantity [information / token]

    Notes
    -----
    MHA, GQA and MQA use equation 5 (:func:`kv_bytes_per_token`) with the model's KV heads; MLA uses
    :func:`mla_kv_bytes_per_token` with ``kv_lora_rank`` and ``qk_rope_head_dim``. KV quantization
    metadata (scales) is not included; block-scaled KV formats add it as for weights
    (:func:`effective_bits_per_weight`). An indexed-sparse-attention model (``index_topk``) adds its indexer's
    cached keys (:func:`index_key_bytes`).
    (:func:`effective_bits_per_weight`). A hybrid model counts its attention layers only
    (``Model.attention_layers``); its state layers' fixed state is
    :func:`~calculator.memory.state.state_bytes_per_sequence`.

    Examples
    --------
    >>> from calculator.registry import Model
    >>> llama = Model(id="llama-3.1-70b", name="Llama 3.1 70B", provenance="published",
    ...     sources=[{"source": "hf", "fields": ["parameters"]}], parameters=70.6e9, layers=80,
    ...     attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> model_kv_bytes_per_token(llama)
    <Quantity(327680.0, 'byte / token')>
    >>> model_kv_bytes_per_token(llama, "fp8")
    <Quantity(163840.0, 'byte / token')>
    """
    resolved = transformer_of(model, "model_kv_bytes_per_token", registry=registry)
    size = Q_(_kv_precision_bytes(kv_precision), "B")
    layers = resolved.kv_layers  # a hybrid's attention layers only: its state layers keep no KV cache
    if resolved.attention == "mla":
        latent = mla_kv_bytes_per_token(layers, resolved.kv_lora_rank, resolved.qk_rope_head_dim, size)
        return latent + Q_(index_key_bytes(resolved), "B/token")
    if resolved.global_kv_heads is not None:  # Gemma 4: the full-attention layers' own KV heads and width
        full = resolved.global_layers
        windowed = kv_bytes_per_token(layers - full, resolved.kv_heads, resolved.head_dim, size)
        return windowed + kv_bytes_per_token(full, resolved.global_kv_heads, resolved.global_head_dim, size)
    return kv_bytes_per_token(layers, resolved.kv_heads, resolved.head_dim, size)


def window_shares(model: Any) -> tuple[float, float]:
    """The windowed layers' (sliding or chunked) shares of a token's KV bytes and of its attention FLOP per pair.

    Each layer's share where every layer has one shape; with full-attention layers of their own shape
    (``global_kv_heads``, ``global_head_dim``) the windowed layers' bytes ``L_w H_kv d_h`` over all layers' (with
    ``L_g H_g d_g``), and their FLOP ``L_w d_h`` over ``L_w d_h + L_g d_g`` (every layer has the same query heads).

    Examples
    --------
    >>> window_shares("gpt-oss-120b")  # half its layers, of one shape
    (0.5, 0.5)
    """
    spec = model_of(model)
    windowed = float(spec.sliding_window_layers or spec.chunked_layers or 0)
    if spec.global_kv_heads is None:
        share = windowed / float(spec.layers or 1)
        return share, share
    full = float(spec.global_layers)
    kv, kv_full = windowed * spec.kv_heads * spec.head_dim, full * spec.global_kv_heads * spec.global_head_dim
    pairs, pairs_full = windowed * spec.head_dim, full * spec.global_head_dim
    return kv / (kv + kv_full), pairs / (pairs + pairs_full)


#: The indexer's cached key (indexed sparse attention) is FP8 with one FP32 scale per block of this many elements.
INDEX_SCALE_BLOCK = 128
INDEX_SCALE_BYTES = 4


def index_key_bytes(model: Any) -> float:
    """Bytes per token (all layers) of the indexer keys an indexed-sparse-attention model caches; 0 without one.

    Every layer caches one key of ``index_head_dim`` elements per token in FP8 with an FP32 scale per 128
    elements, whatever the KV precision: vLLM's ``DeepseekV32IndexerCache`` holds ``index_head_dim +
    index_head_dim // 128 * 4`` bytes per token (uint8), 132 for DeepSeek-V3.2 (docs/performance-model.md,
    Indexed sparse attention).
    """
    if model.index_head_dim is None:
        return 0.0
    width = model.index_head_dim
    return float(model.layers * (width + width // INDEX_SCALE_BLOCK * INDEX_SCALE_BYTES))


@checked()
def tensor_parallel_valid(model: ModelRef, tensor_parallel: Count, *, registry: Registry | None = None) -> Any:
    """Whether a model can be split over ``tensor_parallel`` devices (bool or bool array).

    Query heads must divide by the degree ``t``; KV heads must divide by ``t`` when ``t <= kv_heads``,
    and ``t`` must be a multiple of ``kv_heads`` when ``t > kv_heads`` (each KV head replicated on
    ``t / kv_heads`` devices). MLA has no KV-head constraint: the latent is replicated.

    Parameters
    ----------
    model : str or Model
        Registry id or :class:`~calculator.registry.Model`.
    tensor_parallel : int or array of int
        Tensor-parallel degrees ``t`` to test.
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Returns
    -------
    bool or array of bool

    Examples
    --------
    >>> from calculator.registry import Model
    >>> llama = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> tensor_parallel_valid(llama, np.array([1, 2, 3, 8, 16, 24]))
    array([ True,  True, False,  True,  True, False])
    """
    resolved = transformer_of(model, "tensor_parallel_valid", registry=registry)
    return _splits(resolved, tensor_parallel)


def _splits(model: Any, degree: Any) -> Any:
    """Whether the degrees (checked counts) split the model's heads: :func:`tensor_parallel_valid`'s rule."""
    degree = np.asarray(degree)
    valid = model.attention_heads % degree == 0
    if model.attention != "mla":
        for kv in {model.kv_heads, model.global_kv_heads or model.kv_heads}:  # and the full layers' own (Gemma 4)
            valid &= np.where(degree <= kv, kv % degree == 0, degree % kv == 0)
    return bool(valid) if valid.ndim == 0 else valid


def check_tensor_parallel(
    model: ModelRef,
    tensor_parallel: Count,
    function: str = "check_tensor_parallel",
    *,
    registry: Registry | None = None,
) -> Any:
    """Return the degree (int or int array) if it splits the model, else raise :class:`InputError`.

    See :func:`tensor_parallel_valid` for the rule; ``function`` names the caller in the message (the
    count check included, so another function's boundary can call this one).
    """
    resolved = transformer_of(model, function, registry=registry)
    degree = count(function, "tensor_parallel", tensor_parallel)
    _check_splits(resolved, degree, function)
    return degree


def _check_splits(model: Any, degree: Any, function: str) -> None:
    """:class:`InputError` naming ``function`` unless the degrees (checked counts) split the model."""
    valid = np.asarray(_splits(model, degree))
    if not np.all(valid):
        bad = np.asarray(degree)[~valid] if valid.ndim else np.asarray(degree)
        kv = "" if model.attention == "mla" else f" and {model.kv_heads} KV heads"
        kv += f" ({model.global_kv_heads} in its full-attention layers)" if model.global_kv_heads else ""
        raise InputError(
            f"{function}(): tensor_parallel {int(bad.flat[0])} does not split model '{model.id}' "
            f"({model.attention_heads} attention heads{kv}): the degree must divide the attention heads and "
            f"either divide the KV heads or be a multiple of them"
        )


def kv_shards(tensor_parallel: Any, kv_heads: Any) -> Any:
    """Devices a token's KV cache is split over in a tensor-parallel group (plain numbers, no checks).

    ``min(t, kv_heads)``: KV heads split across ranks until each rank holds one head, after which
    heads are replicated. Pass ``kv_heads=1`` for MLA, whose latent every rank keeps whole.

    Examples
    --------
    >>> kv_shards(np.array([1, 4, 8, 16]), 8)
    array([1, 4, 8, 8])
    """
    return np.minimum(tensor_parallel, kv_heads)


def kv_shard_limit(model: Any) -> int:
    """The ``kv_heads`` argument of :func:`kv_shards` for a model (1 for MLA's replicated latent).

    With full-attention layers of fewer KV heads than the windowed ones (Gemma 4's ``global_kv_heads``), the
    fewer: exact up to that degree; beyond it the windowed layers' heads, which still split, are counted as
    replicated too (a bound from above, docs/performance-model.md).
    """
    if model.attention == "mla":
        return 1
    return int(min(model.kv_heads, model.global_kv_heads or model.kv_heads))


def _kv_share_per_device(model: Any, degree: Any) -> Any:
    """Fraction of a token's KV bytes held by one device of a tensor-parallel group (no checks)."""
    share = 1.0 / kv_shards(np.asarray(degree, dtype=float), kv_shard_limit(model))
    return share if np.ndim(degree) else float(share)


@renamed(kv_dtype="kv_precision")
@checked()
def kv_bytes_per_token_per_device(
    model: ModelRef, kv_precision: Precision = "fp16", tensor_parallel: Count = 1, *, registry: Registry | None = None
) -> Any:
    """KV-cache bytes per token held by one device of a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    kv_precision : str or Quantity [information]
    tensor_parallel : int or array of int
        Tensor-parallel degree ``t``.
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Returns
    -------
    Quantity [information / token]
        ``m_tok / t`` while ``t <= kv_heads``; ``m_tok / kv_heads`` (one replicated head per device)
        when ``t > kv_heads``; the whole ``m_tok`` for MLA, whose latent every rank keeps.

    Raises
    ------
    InputError
        If ``t`` does not split the model's heads (see :func:`tensor_parallel_valid`).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> llama = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> kv_bytes_per_token_per_device(llama, "fp16", np.array([1, 8, 16]))
    <Quantity([327680.  40960.  40960.], 'byte / token')>
    """
    name = "kv_bytes_per_token_per_device"
    resolved = transformer_of(model, name, registry=registry)
    _check_splits(resolved, tensor_parallel, name)
    return model_kv_bytes_per_token(resolved, kv_precision) * _kv_share_per_device(resolved, tensor_parallel)
