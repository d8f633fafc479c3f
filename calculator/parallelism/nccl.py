"""Calibration of the collectives on measured NCCL all-reduce: a per-collective floor and an achieved bandwidth.

Datasheet link latencies (0.5 us for NVLink) under-predict small collectives 5-10x;
:data:`NCCL_ALLREDUCE_H100` and :data:`NCCL_ALLREDUCE_A100` carry a floor and an achieved bandwidth
fitted on public NCCL measurements (see :func:`fit_ring_allreduce`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked
from ..errors import InputError
from ..results import Result
from ..types import Bandwidth, Bytes, Count, Time
from ..units import Q_, shown
from ._common import _ZERO_SECONDS
from .collectives import ring_allreduce_time  # noqa: F401 (the doctests use it)

__all__ = [
    "AllReduceCalibration",
    "NCCL_ALLREDUCE_H100",
    "NCCL_ALLREDUCE_A100",
    "DECODE_MESSAGES",
    "AllReduceFit",
    "FitErrorRow",
    "fit_ring_allreduce",
]


# --------------------------------------------------------------------------------------------
# Calibration on measured NCCL all-reduce


@dataclass(frozen=True, repr=False)
class AllReduceCalibration(Result):
    """Fitted parameters of :func:`ring_allreduce_time` for one system, with their provenance.

    Use as ``ring_allreduce_time(message, n, cal.bandwidth, cal.latency, cal.floor)``.
    """

    floor: Time
    bandwidth: Bandwidth
    latency: Time
    source: str


_NCCL_SOURCE = (
    "fitted by fit_ring_allreduce (log-uniform weights, least relative absolute error, messages 16 KiB-64 MiB, "
    "2/4/8 GPUs) on microsoft/vidur@7d47513363ec447a741ac5e47241580b47724fbf "
    "data/profiling/network/{sku}/all_reduce.csv, single-node rows (MIT); "
    "calculator/data/calibration/nccl_allreduce_single_node.csv"
)

#: NCCL all-reduce on one H100 DGX node (NVLink 4 + NVSwitch): per-call floor and achieved per-link
#: ("bus") bandwidth of the ring model, with the startup latency folded into the floor.
NCCL_ALLREDUCE_H100 = AllReduceCalibration(
    floor=Q_(27.9, "us"), bandwidth=Q_(348.0, "GB/s"), latency=Q_(0.0, "us"), source=_NCCL_SOURCE.format(sku="h100_dgx")
)
#: NCCL all-reduce on one A100 DGX node (NVLink 3 + NVSwitch), fitted the same way.
NCCL_ALLREDUCE_A100 = AllReduceCalibration(
    floor=Q_(35.1, "us"), bandwidth=Q_(162.0, "GB/s"), latency=Q_(0.0, "us"), source=_NCCL_SOURCE.format(sku="a100_dgx")
)


@dataclass(frozen=True, repr=False)
class FitErrorRow(Result):
    """Relative error of a fit on one device count and message regime (error = model/measured - 1)."""

    devices: int
    regime: str
    points: int
    median_absolute_error: float
    median_error: float
    max_absolute_error: float


@dataclass(frozen=True, repr=False)
class AllReduceFit(Result):
    """A fitted ring all-reduce: floor and bandwidth, and the error per device count and regime."""

    floor: Time
    bandwidth: Bandwidth
    latency: Time
    errors: tuple[FitErrorRow, ...]

    def error(self, devices: int, regime: str) -> FitErrorRow:
        """The error row for one device count and regime (``"decode"``, ``"large"`` or ``"all"``)."""
        for row in self.errors:
            if row.devices == devices and row.regime == regime:
                return row
        raise InputError(f"no error row for devices={devices}, regime={regime!r}")


#: Message sizes of tensor-parallel all-reduces in decode; fit errors are reported for this regime,
#: for larger messages ("large") and for every message fitted ("all").
DECODE_MESSAGES = (Q_(16, "KiB"), Q_(1, "MiB"))


@checked(measured_time="positive")
def fit_ring_allreduce(
    message: Bytes,
    devices: Count,
    measured_time: Time,
    latency: Time = _ZERO_SECONDS,
    min_message: Bytes = DECODE_MESSAGES[0],
) -> AllReduceFit:
    r"""Fit the per-collective floor and the achieved link bandwidth of :func:`ring_allreduce_time`.

    Parameters
    ----------
    message : Quantity [information], array
        Message sizes of the measurements.
    devices : array of int
        Ranks of each measurement.
    measured_time : Quantity [time], array
        Measured all-reduce times (medians).
    latency : Quantity [time], optional
        Alpha held fixed in the fit (zero: the floor absorbs every per-call latency); one number.
    min_message : Quantity [information], optional
        Smaller messages are left out of the fit (their times are bimodal and below the decode range).

    Returns
    -------
    AllReduceFit
        ``floor``, ``bandwidth`` (per-link, NCCL's "bus bandwidth") and the relative error per device
        count for the ``decode`` (16 KiB-1 MiB), ``large`` (> 1 MiB) and ``all`` regimes.

    Notes
    -----
    The model is linear in :math:`(T_0, 1/\beta)`. The fit minimizes the sum of absolute relative
    errors (iteratively reweighted least squares), with every octave of message size given equal
    total weight per device count, so that the many large-message rows do not swamp the small
    messages that tensor-parallel decode sends. Absolute relative error is robust to the bimodal
    latencies that NCCL shows for small messages.

    Examples
    --------
    Four synthetic points generated with a 30 us floor and 300 GB/s are recovered:

    >>> size = Q_([1e5, 1e6, 1e7, 1e8], "B")
    >>> devices = np.array([8, 8, 8, 8])
    >>> fit = fit_ring_allreduce(size, devices, ring_allreduce_time(size, devices, Q_(300, "GB/s"), Q_(0, "s"),
    ...                                                              Q_(30, "us")))
    >>> round(float(fit.floor.m_as("us")), 3), round(float(fit.bandwidth.m_as("GB/s")), 3)
    (30.0, 300.0)
    """
    for name, value in (("latency", latency), ("min_message", min_message)):
        if np.ndim(value):
            raise InputError(f"fit_ring_allreduce(): argument '{name}' must be one number, got {shown(value)}")
    size, ranks, times = (np.asarray(values, dtype=float) for values in (message, devices, measured_time))
    alpha = float(latency)
    if not (size.shape == ranks.shape == times.shape) or size.ndim != 1:
        raise InputError("fit_ring_allreduce(): message, devices and measured_time must be 1-D arrays of one length")
    keep = (size >= min_message) & (ranks > 1)
    if keep.sum() < 3:
        raise InputError("fit_ring_allreduce(): need at least 3 measurements with devices > 1 above min_message")
    x, n, y = size[keep], ranks[keep], times[keep]
    design = np.column_stack([np.ones_like(x), 2 * (n - 1) / n * x])
    target = y - 2 * (n - 1) * alpha
    octave = np.floor(np.log2(x)).astype(int)
    groups = {(k, o): np.count_nonzero((n == k) & (octave == o)) for k, o in zip(n, octave, strict=True)}
    weights = np.array([1.0 / groups[k, o] for k, o in zip(n, octave, strict=True)])
    scaled = design / y[:, None]
    params = np.zeros(2)
    residual_weights = np.ones_like(y)
    for _ in range(200):
        root = np.sqrt(weights * residual_weights)
        new, *_ = np.linalg.lstsq(scaled * root[:, None], target / y * root, rcond=None)
        converged = np.allclose(new, params, rtol=1e-10, atol=0)
        params = new
        if converged:
            break
        residual_weights = 1.0 / np.maximum(np.abs(scaled @ params - target / y), 1e-4)
    floor, inverse_bandwidth = params
    if floor < 0 or inverse_bandwidth <= 0:
        raise InputError("fit_ring_allreduce(): the data give a negative floor or bandwidth; check the inputs")
    predicted = floor + 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * size * inverse_bandwidth
    relative = predicted / times - 1
    low, high = (q.m_as("B") for q in DECODE_MESSAGES)
    regimes = {"decode": (size >= low) & (size <= high), "large": size > high, "all": size >= min_message}
    rows = []
    for count in sorted(set(ranks[ranks > 1].astype(int))):
        for regime, in_regime in regimes.items():
            mask = in_regime & (ranks == count)
            if not mask.any():
                continue
            error = relative[mask]
            rows.append(
                FitErrorRow(
                    devices=int(count),
                    regime=regime,
                    points=int(mask.sum()),
                    median_absolute_error=float(np.median(np.abs(error))),
                    median_error=float(np.median(error)),
                    max_absolute_error=float(np.max(np.abs(error))),
                )
            )
    return AllReduceFit(
        floor=Q_(float(floor), "s").to("us"),
        bandwidth=Q_(float(1 / inverse_bandwidth), "B/s").to("GB/s"),
        latency=Q_(alpha, "s"),
        errors=tuple(rows),
    )
