"""The KV cache wall (Figure 9) and the precision dividend (Napkin Math 10.7, section 10.7.5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import bits_of, checked
from ..errors import InputError
from ..formula import formula, var
from ..results import Result
from ..types import Bytes, BytesPerToken, Capacity, Count, ModelRef, Number, Tokens
from ..units import Q_, shown
from ._common import _kv_precision_bytes
from .fit import MemoryFit, max_context, memory_footprint, model_memory_fit
from .weights import NO_BYTES

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "KvWall",
    "kv_wall",
    "precision_dividend",
    "PrecisionDividend",
    "compare_precisions",
]


# ============================================================================================
# The KV wall (Figure 9) and the precision dividend (Napkin Math 10.7)


@dataclass(frozen=True, repr=False)
class KvWall(Result):
    """Memory in use against context for several batch sizes (Figure 9); see :func:`kv_wall`.

    ``footprint[i, j]`` is the memory of ``batches[i]`` sequences of ``contexts[j]`` tokens;
    ``boundary[i]`` is the longest context at which ``batches[i]`` sequences fit.
    """

    contexts: Tokens
    batches: Count
    footprint: Bytes
    capacity: Bytes
    boundary: Tokens


@checked(capacity="positive", kv_per_token="positive", contexts="positive_integer")
def kv_wall(
    capacity: Bytes,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    contexts: Tokens,
    batches: Count,
    reserve: Bytes = NO_BYTES,
) -> KvWall:
    """The KV cache wall (Figure 9): footprint over a context x batch grid and each batch's boundary.

    Parameters
    ----------
    capacity, weights, kv_per_token, reserve
        As for :func:`max_batch` (one device).
    contexts : array of int
        Context lengths (x axis).
    batches : array of int
        Batch sizes (one line each).

    Returns
    -------
    KvWall

    Examples
    --------
    >>> wall = kv_wall(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), [1024, 131_072], [1, 2, 8])
    >>> wall.boundary
    array([137329,  68664,  17166])
    """
    context = np.atleast_1d(contexts).astype(np.int64)
    batch = np.atleast_1d(batches).astype(np.int64)
    footprint = memory_footprint.numeric(
        weights=weights, batch=batch[:, None], context=context[None, :], kv_per_token=kv_per_token, reserve=reserve
    )
    boundary = max_context(Q_(capacity, "B"), Q_(weights, "B"), Q_(kv_per_token, "B/token"), batch, Q_(reserve, "B"))
    return KvWall(
        contexts=context, batches=batch, footprint=Q_(footprint, "B"), capacity=Q_(capacity, "B"), boundary=boundary
    )


@formula(
    result=var("", "D", description="ratio of max batches after and before a precision change"),
    reference="Napkin Math 10.7, section 10.7.5",
    capacity=var("B", "C", description="memory per device"),
    weights=var("B", r"M_{W}", "nonnegative", "weight bytes per device before the change"),
    reserve=var("B", r"M_{\mathrm{res}}", "nonnegative", "reserve per device"),
    weight_bits_before=var("", r"b_{W}", "precision", "weight bits before"),
    weight_bits_after=var("", r"b_{W}'", "precision", "weight bits after"),
    kv_bits_before=var("", r"b_{\mathrm{KV}}", "precision", "KV bits before"),
    kv_bits_after=var("", r"b_{\mathrm{KV}}'", "precision", "KV bits after"),
    example={
        "capacity": "80 GB",
        "weights": "17.5 GB",
        "reserve": "0 GB",
        "weight_bits_before": 16,
        "weight_bits_after": 4,
        "kv_bits_before": 16,
        "kv_bits_after": 8,
    },
)
def precision_dividend(
    capacity, weights, reserve, weight_bits_before, weight_bits_after, kv_bits_before, kv_bits_after
):
    r"""The precision dividend: factor by which a precision change raises the (continuous) max batch.

    Parameters
    ----------
    capacity : Quantity [information]
    weights : Quantity [information]
        Weight bytes per device at the old precision.
    reserve : Quantity [information]
    weight_bits_before, weight_bits_after : float
    kv_bits_before, kv_bits_after : float

    Returns
    -------
    float

    Notes
    -----
    .. math:: D = \frac{C - M_{\mathrm{res}} - M_W \, b_W' / b_W}{C - M_{\mathrm{res}} - M_W}
              \cdot \frac{b_{\mathrm{KV}}}{b_{\mathrm{KV}}'}

    Napkin Math 10.7: max batch is free memory over per-request cache, and a precision change scales
    both, whatever the head count, so MHA and GQA get the same continuous dividend. The integer
    counts (46 -> 112, 372 -> 901) differ slightly from it because of the floors.

    Examples
    --------
    >>> round(precision_dividend(Q_(80, "GB"), Q_(17.5, "GB"), Q_(0, "GB"), 16, 4, 16, 8), 2)
    2.42
    """
    free_before = capacity - reserve - weights
    free_after = capacity - reserve - weights * weight_bits_after / weight_bits_before
    return free_after / free_before * kv_bits_before / kv_bits_after


@dataclass(frozen=True, repr=False)
class PrecisionDividend(Result):
    """Max batch before and after a precision change (see :func:`compare_precisions`)."""

    before: MemoryFit
    after: MemoryFit
    dividend: Number
    batch_ratio: float
    capacity_basis: str = "as given"


@checked(context="positive_integer")
def compare_precisions(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    before: tuple[Any, Any] = ("fp16", "fp16"),
    after: tuple[Any, Any] = ("int4", "int8"),
    tensor_parallel: Count = 1,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    *,
    registry: Registry | None = None,
) -> PrecisionDividend:
    """Napkin Math 10.7 for any model: max batch at two (weight, KV) precisions and the dividend.

    Parameters
    ----------
    model : str or Model
    capacity : Quantity or accelerator
    context : int
        Tokens per sequence (one number).
    before, after : (weight precision or bits, KV precision)
    tensor_parallel : int
        Tensor-parallel degree (one number).
    reserve : Quantity [information]
        Reserve per device (one number).
    capacity_basis : {"physical", "nameplate"}
    registry : Registry, optional
        Where the model and accelerator ids resolve (default: the packaged registry).

    Returns
    -------
    PrecisionDividend
        ``before`` and ``after`` fits, the continuous ``dividend`` (:func:`precision_dividend`) and
        ``batch_ratio`` of the integer max batches (``inf`` if nothing fit before).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> gqa = Model(id="gqa", name="70B GQA", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> d = compare_precisions(gqa, Q_(80, "GB"), 4096, tensor_parallel=8)
    >>> d.before.max_batch, d.after.max_batch, round(d.dividend, 2)
    (372, 901, 2.42)
    """
    capacity_value = getattr(capacity, "magnitude", 0)  # bytes, or an accelerator (one by nature)
    for argument, value in (
        ("capacity", capacity_value), ("context", context), ("tensor_parallel", tensor_parallel), ("reserve", reserve)
    ):  # fmt: skip
        if np.ndim(value):
            raise InputError(f"compare_precisions(): argument '{argument}' must be one number, got {shown(value)}")
    fits = [
        model_memory_fit(
            model,
            capacity,
            context,
            0,
            weight_bits=weights,
            kv_precision=kv,
            tensor_parallel=tensor_parallel,
            reserve=Q_(reserve, "B"),
            capacity_basis=capacity_basis,
            registry=registry,
        )
        for weights, kv in (before, after)
    ]
    old, new = fits
    name = "compare_precisions"
    bits = [bits_of(name, "weight_bits", w) for w, _ in (before, after)] + [
        _kv_precision_bytes(kv) * 8 for _, kv in (before, after)
    ]
    dividend = precision_dividend(old.capacity, old.weights, old.reserve, *bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.divide(new.max_batch, old.max_batch) if old.max_batch else float("inf")
    return PrecisionDividend(
        before=old, after=new, dividend=dividend, batch_ratio=float(ratio), capacity_basis=old.capacity_basis
    )
