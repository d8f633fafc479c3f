"""Arithmetic intensity of a linear projection and the roofline ridge point (section 10.8.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._support import accelerator_of
from ..formula import formula, per, var
from ..types import AcceleratorRef
from ..units import Q_  # noqa: F401 (the doctests use it)

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "projection_arithmetic_intensity",
    "ridge_point",
    "accelerator_ridge_point",
]


# ============================================================================================
# Arithmetic intensity and the ridge point (section 10.8.1)


@formula(
    result=var("FLOP/B", "I", description="FLOPs per byte of weights loaded"),
    reference="section 10.8.1 (I_pre ~ P, I_dec ~ B_dec for FP16 weights)",
    tokens=var("", "n", "positive", "tokens sharing one read of the weights"),
    bytes_per_weight=var("B", r"s_{W}", description="bytes per weight"),
    example={"tokens": 1024, "bytes_per_weight": "2 B"},
)
def projection_arithmetic_intensity(tokens, bytes_per_weight):
    r"""Arithmetic intensity of a linear projection applied to ``n`` tokens per weight read.

    Parameters
    ----------
    tokens : float
        Rows sharing the weight read: the prompt length ``P`` in prefill, the decode batch
        ``B_dec`` in decode.
    bytes_per_weight : Quantity [information]
        2 B for FP16 weights.

    Returns
    -------
    Quantity [compute / information]

    Notes
    -----
    .. math:: I = \frac{2 n H^2}{s_W H^2} = \frac{2 n}{s_W}

    Section 10.8.1: with FP16 weights (:math:`s_W = 2` B) :math:`I_{\mathrm{pre}} \approx P` and
    :math:`I_{\mathrm{dec}} \approx B_{\mathrm{dec}}`. Weight traffic only: KV-cache reads, which
    grow with batch x context, lower the decode intensity further (see :func:`decode_step_time`).

    Examples
    --------
    >>> projection_arithmetic_intensity(1024, Q_(2, "B"))
    <Quantity(1024.0, 'FLOP / byte')>
    """
    return per(2 * tokens / bytes_per_weight, "FLOP")


@formula(
    result=var("FLOP/B", r"I^{*}", description="intensity above which execution is compute-bound"),
    reference="section 10.8.1 (roofline ridge point)",
    peak_throughput=var("FLOP/s", r"R_{\mathrm{peak}}", description="peak compute throughput"),
    memory_bandwidth=var("B/s", r"BW_{\mathrm{mem}}", description="memory bandwidth"),
    example={"peak_throughput": "989 TFLOP/s", "memory_bandwidth": "3.35 TB/s"},
)
def ridge_point(peak_throughput, memory_bandwidth):
    r"""Ridge point of the roofline: peak FLOP/s over memory bandwidth.

    Parameters
    ----------
    peak_throughput : Quantity [compute / time]
    memory_bandwidth : Quantity [information / time]

    Returns
    -------
    Quantity [compute / information]

    Notes
    -----
    .. math:: I^{*} = R_{\mathrm{peak}} / BW_{\mathrm{mem}}

    Examples
    --------
    H100 SXM at dense FP16 (989 TFLOP/s, 3.35 TB/s):

    >>> round(ridge_point(Q_(989, "TFLOP/s"), Q_(3.35, "TB/s")).m_as("FLOP/B"))
    295
    """
    return peak_throughput / memory_bandwidth


def accelerator_ridge_point(
    accelerator: AcceleratorRef, precision: str = "fp16", *, registry: Registry | None = None
) -> Any:
    """Ridge point of a registry accelerator at a precision (dense throughput / memory bandwidth).

    Parameters
    ----------
    accelerator : str or Accelerator
    precision : str

    Returns
    -------
    Quantity [compute / information]
    """
    device = accelerator_of(accelerator, registry=registry)
    return ridge_point(device.peak_throughput(precision), device.memory_bandwidth)
