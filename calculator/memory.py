"""Serving memory: weights and KV cache (chapter section 10.7)."""

from __future__ import annotations

from .formula import formula, per, var

__all__ = ["kv_bytes_per_token", "weight_bytes"]


@formula(
    result=var("B/token", r"m_{\mathrm{tok}}", description="KV-cache bytes per token of one sequence"),
    reference="Eq. 5, section 10.7.1",
    layers=var("", "L", "positive_integer", "transformer layers"),
    kv_heads=var("", r"H_{\mathrm{kv}}", "positive_integer", "key/value heads per layer"),
    head_dim=var("", "d_{h}", "positive_integer", "elements per head"),
    bytes_per_element=var("B", "s", description="bytes per cached element"),
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

    Examples
    --------
    The 70B GQA reference model (80 layers, 8 KV heads of 128 at FP16):

    >>> from calculator.units import Q_
    >>> kv_bytes_per_token(80, 8, 128, Q_(2, "B"))
    <Quantity(327680.0, 'byte / token')>
    """
    return per(2 * layers * kv_heads * head_dim * bytes_per_element, "1/token")


@formula(
    result=var("B", r"M_{W}", description="bytes of model weights"),
    reference="section 10.2 (weights = parameters x bytes per parameter); section 10.9",
    parameters=var("", "N", description="parameter count"),
    bits_per_weight=var("", "b", description="stored bits per weight, including any scale metadata"),
)
def weight_bytes(parameters, bits_per_weight):
    r"""Bytes needed to hold a model's weights.

    Parameters
    ----------
    parameters : float
        Number of parameters (total parameters for a mixture of experts: every expert is resident).
    bits_per_weight : float
        Stored bits per weight: 16 for FP16/BF16, 8 for FP8/INT8, 4 for INT4; block-scaled formats
        add their scale bits per weight (4.25 for INT4 with an FP16 scale per 64 weights).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_W = N \, b / 8

    Examples
    --------
    A 70B model at FP16 (section 10.2: "140 GB"):

    >>> weight_bytes(70e9, 16).to("GB")
    <Quantity(140.0, 'gigabyte')>
    """
    return per(parameters * bits_per_weight / 8, "B")
