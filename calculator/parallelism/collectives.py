r"""Model sharding: collectives, tensor/pipeline/expert parallelism and embedding sharding (section 10.10).

Communication follows the alpha-beta model: a message of :math:`M` bytes over a link with startup
latency :math:`\alpha` and bandwidth :math:`\beta` takes :math:`\alpha + M/\beta`; collectives
are built from such steps (ring all-reduce, all-gather, reduce-scatter, all-to-all). Every collective
also takes a **per-collective latency floor**: the launch, protocol and synchronization cost that a
real library (NCCL) pays once per call. Datasheet link latencies (0.5 us for NVLink) under-predict
small collectives 5-10x; :data:`NCCL_ALLREDUCE_H100` and :data:`NCCL_ALLREDUCE_A100` carry a floor
and an achieved bandwidth fitted on public NCCL measurements (see :func:`fit_ring_allreduce`).

Bandwidth basis: the registry's interconnects carry ``bandwidth`` (per direction) and
``bandwidth_total`` (both directions). The collectives here use the per-direction figure, which is
the physically right one: in a ring each link carries one direction of the traffic at a time. The
chapter's Table 17 prints 900 GB/s for NVLink, the two-direction total; the chapter itself uses
450 GB/s per direction elsewhere (§10.8.3). Functions that take a link accept a registry id or an
:class:`~calculator.registry.Interconnect` and a ``bandwidth_basis`` (``"per_direction"`` or
``"total"``) so that either reading can be evaluated and stated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..formula import check_domain, formula, maximum, minimum, var
from ..memory import kv_shards, min_devices_for_weights, weight_bytes
from ..phases import kv_handoff_time
from ..results import Result, as_count, plain
from ..units import Q_, check_units

__all__ = [
    "BANDWIDTH_BASES",
    "COLLECTIVES",
    "AllReduceCalibration",
    "NCCL_ALLREDUCE_H100",
    "NCCL_ALLREDUCE_A100",
    "resolve_interconnect",
    "link_bandwidth",
    "link_latency",
    "point_to_point_time",
    "ring_allreduce_time",
    "ring_allgather_time",
    "ring_reduce_scatter_time",
    "alltoall_time",
    "collective_time",
    "DECODE_MESSAGES",
    "AllReduceFit",
    "FitErrorRow",
    "fit_ring_allreduce",
    "min_shards",
    "distributed_step_time",
    "sharding_speedup",
    "activation_message_bytes",
    "tensor_parallel_layer_time",
    "tensor_parallel_layer_time_ring",
    "tensor_parallel_speedup",
    "collective_overhead_share",
    "KvHeadPlacement",
    "kv_head_placement",
    "PipelineStage",
    "HybridLayout",
    "hybrid_layout",
    "PipelinePerformance",
    "pipeline_performance",
    "pipeline_bubble_fraction",
    "MoeWeights",
    "moe_weights",
    "ExpertPlacement",
    "expert_placement",
    "MoeDecodeFloor",
    "moe_decode_floor",
    "expert_capacity",
    "simulate_expert_overflow",
    "embedding_table_bytes",
    "resident_bytes_per_entity",
    "EmbeddingTiers",
    "tiered_embedding_placement",
    "EmbeddingLookup",
    "embedding_lookup_time",
]

_ZERO_SECONDS = Q_(0.0, "s")
_ZERO_BYTES = Q_(0.0, "B")
BANDWIDTH_BASES = ("per_direction", "total")
COLLECTIVES = ("point_to_point", "allreduce", "allgather", "reduce_scatter", "alltoall")


def _check_count(function: str, argument: str, value: Any) -> Any:
    check_domain(function, argument, value, "positive_integer")
    return as_count(value)


# --------------------------------------------------------------------------------------------
# Interconnects


def resolve_interconnect(link: Any) -> Any:
    """An :class:`~calculator.registry.Interconnect` from a registry id or an Interconnect object.

    Parameters
    ----------
    link : str or Interconnect
        Registry id (or alias) of an interconnect, or the entry itself (passed through).

    Returns
    -------
    Interconnect

    Examples
    --------
    >>> resolve_interconnect("chapter-nvlink-h100").startup_latency
    <Quantity(500, 'nanosecond')>
    """
    from ..registry import Interconnect, load_registry

    if isinstance(link, Interconnect):
        return link
    if isinstance(link, str):
        return load_registry().interconnect(link)
    raise InputError(f"argument 'link' must be a registry interconnect id or an Interconnect, got {link!r}")


def link_bandwidth(link: Any, basis: str = "per_direction") -> Any:
    """The bandwidth of a link on the stated basis.

    Parameters
    ----------
    link : str or Interconnect
        Registry id or entry.
    basis : {"per_direction", "total"}
        ``per_direction`` (the registry's ``bandwidth``, right for ring collectives and point-to-point
        transfers) or ``total`` (``bandwidth_total``, both directions summed, as the chapter's
        Table 17 prints NVLink).

    Returns
    -------
    Quantity [information / time]

    Examples
    --------
    >>> link_bandwidth("chapter-nvlink-h100").to("GB/s"), link_bandwidth("chapter-nvlink-h100", "total").to("GB/s")
    (<Quantity(450.0, 'gigabyte / second')>, <Quantity(900.0, 'gigabyte / second')>)
    """
    if basis not in BANDWIDTH_BASES:
        raise InputError(f"argument 'basis' must be one of {BANDWIDTH_BASES}, got {basis!r}")
    entry = resolve_interconnect(link)
    if basis == "total":
        if entry.bandwidth_total is None:
            raise InputError(f"interconnect '{entry.id}' has no bandwidth_total in the registry; use 'per_direction'")
        return entry.bandwidth_total
    return entry.bandwidth


def link_latency(link: Any) -> Any:
    """The per-message startup latency (alpha) of a link; :class:`InputError` if the registry has none.

    Parameters
    ----------
    link : str or Interconnect
        Registry id or entry.

    Returns
    -------
    Quantity [time]

    Examples
    --------
    >>> link_latency("chapter-ethernet-100g")
    <Quantity(50, 'microsecond')>
    """
    entry = resolve_interconnect(link)
    if entry.startup_latency is None:
        raise InputError(
            f"interconnect '{entry.id}' has no startup_latency in the registry; pass latency= explicitly "
            "(for NCCL on one node, see NCCL_ALLREDUCE_H100)"
        )
    return entry.startup_latency


# --------------------------------------------------------------------------------------------
# Alpha-beta collectives


@formula(
    result=var("s", r"T_{\mathrm{p2p}}", description="point-to-point transfer time"),
    reference="alpha-beta model, section 10.10.7; eq. 10 (§10.8.3)",
    message=var("B", "M", "nonnegative", "bytes sent"),
    bandwidth=var("B/s", r"\beta", description="link bandwidth, per direction"),
    latency=var("s", r"\alpha", "nonnegative", "per-message startup latency"),
)
def point_to_point_time(message, bandwidth, latency):
    r"""Time to send one message point to point: one startup latency plus a bandwidth term.

    Parameters
    ----------
    message : Quantity [information]
        Bytes sent.
    bandwidth : Quantity [information / time]
        Link bandwidth in the direction of the transfer (per direction).
    latency : Quantity [time]
        Startup latency, including setup and queueing at the operating point.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{p2p}} = \alpha + M / \beta

    The alpha-beta model of section 10.10.7 (pipeline stage hand-offs, §10.10.7); the KV-cache
    handoff of eq. 10 (:func:`calculator.phases.kv_handoff_time`, which it evaluates with one path) is
    the same transfer. Valid for one uncontended transfer.

    Examples
    --------
    The 1.34 GB KV cache of a 4,096-token Llama-3-70B sequence over 100 Gb/s (§10.11.8, "about
    107 ms"):

    >>> point_to_point_time(Q_(1.342177, "GB"), Q_(100, "Gb/s"), Q_(0, "s")).to("ms")
    <Quantity(107.37416, 'millisecond')>
    """
    return kv_handoff_time.func(message, bandwidth, latency, 1)


@formula(
    result=var("s", r"T_{\mathrm{AR}}", description="ring all-reduce completion time"),
    reference="ring all-reduce, alpha-beta model (§10.10.2, §10.10.7)",
    message=var("B", "M", "nonnegative", "bytes each rank contributes (the full reduced tensor)"),
    devices=var("", "n", "positive_integer", "ranks in the ring"),
    bandwidth=var("B/s", r"\beta", description="link bandwidth per direction"),
    latency=var("s", r"\alpha", "nonnegative", "startup latency per ring step"),
    floor=var("s", r"T_{0}", "nonnegative", "per-collective latency floor (launch, protocol, sync)"),
)
def ring_allreduce_time(message, devices, bandwidth, latency, floor=0.0):
    r"""Completion time of a ring all-reduce of ``message`` bytes over ``devices`` ranks.

    Parameters
    ----------
    message : Quantity [information]
        Bytes each rank contributes: the full tensor being reduced (for tensor parallelism,
        tokens x hidden width x bytes per element).
    devices : int
        Ranks in the ring; one rank does no communication and takes no time.
    bandwidth : Quantity [information / time]
        Link bandwidth **per direction** (the ring sends one direction per step). Passing the
        two-direction total (NVLink's 900 GB/s) halves the bandwidth term.
    latency : Quantity [time]
        Startup latency paid at each of the :math:`2(n-1)` ring steps (a link's alpha).
    floor : Quantity [time], optional
        Per-collective latency floor: launch, protocol and synchronization paid once per call
        (zero in the textbook model; about 28 us for NCCL on an H100 node, see
        :data:`NCCL_ALLREDUCE_H100`).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{AR}} = T_0 \min(n-1, 1) + 2(n-1)\,\alpha + \frac{2(n-1)}{n}\,\frac{M}{\beta}

    The ring reduce-scatter plus all-gather: :math:`2(n-1)` steps, each moving :math:`M/n` bytes
    per link. The startup term grows linearly with :math:`n` and the bandwidth term approaches
    :math:`2M/\beta` (§10.10.7). The floor is the empirical per-call cost that the alpha-beta
    terms miss for small messages. Broadcasts over arrays of every argument.

    Examples
    --------
    An 8 MB all-reduce on 8 ranks over the chapter's NVLink (450 GB/s per direction, 0.5 us):

    >>> ring_allreduce_time(Q_(8, "MB"), 8, Q_(450, "GB/s"), Q_(0.5, "us")).to("us")
    <Quantity(38.1111111, 'microsecond')>
    """
    steps = 2 * (devices - 1)
    return floor * minimum(devices - 1, 1) + steps * latency + steps / devices * message / bandwidth


@formula(
    result=var("s", r"T_{\mathrm{AG}}", description="ring all-gather completion time"),
    reference="ring all-gather, alpha-beta model (section 10.10.7)",
    message=var("B", "M", "nonnegative", "bytes of the gathered result on each rank"),
    devices=var("", "n", "positive_integer", "ranks in the ring"),
    bandwidth=var("B/s", r"\beta", description="link bandwidth per direction"),
    latency=var("s", r"\alpha", "nonnegative", "startup latency per ring step"),
    floor=var("s", r"T_{0}", "nonnegative", "per-collective latency floor"),
)
def ring_allgather_time(message, devices, bandwidth, latency, floor=0.0):
    r"""Completion time of a ring all-gather whose gathered result is ``message`` bytes per rank.

    Parameters
    ----------
    message : Quantity [information]
        Bytes of the full gathered tensor (each rank contributes :math:`M/n`).
    devices : int
        Ranks in the ring.
    bandwidth : Quantity [information / time]
        Link bandwidth per direction.
    latency : Quantity [time]
        Startup latency per ring step.
    floor : Quantity [time], optional
        Per-collective latency floor.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{AG}} = T_0 \min(n-1, 1) + (n-1)\,\alpha + \frac{n-1}{n}\,\frac{M}{\beta}

    Half of a ring all-reduce: :math:`n-1` steps of :math:`M/n` bytes.

    Examples
    --------
    >>> ring_allgather_time(Q_(8, "MB"), 8, Q_(450, "GB/s"), Q_(0.5, "us")).to("us")
    <Quantity(19.0555556, 'microsecond')>
    """
    steps = devices - 1
    return floor * minimum(devices - 1, 1) + steps * latency + steps / devices * message / bandwidth


@formula(
    result=var("s", r"T_{\mathrm{RS}}", description="ring reduce-scatter completion time"),
    reference="ring reduce-scatter, alpha-beta model (section 10.10.7)",
    message=var("B", "M", "nonnegative", "bytes of the full input tensor on each rank"),
    devices=var("", "n", "positive_integer", "ranks in the ring"),
    bandwidth=var("B/s", r"\beta", description="link bandwidth per direction"),
    latency=var("s", r"\alpha", "nonnegative", "startup latency per ring step"),
    floor=var("s", r"T_{0}", "nonnegative", "per-collective latency floor"),
)
def ring_reduce_scatter_time(message, devices, bandwidth, latency, floor=0.0):
    r"""Completion time of a ring reduce-scatter of a ``message``-byte tensor.

    Parameters
    ----------
    message : Quantity [information]
        Bytes of the full input tensor on each rank (each rank ends with a reduced :math:`M/n`).
    devices : int
        Ranks in the ring.
    bandwidth : Quantity [information / time]
        Link bandwidth per direction.
    latency : Quantity [time]
        Startup latency per ring step.
    floor : Quantity [time], optional
        Per-collective latency floor.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{RS}} = T_0 \min(n-1, 1) + (n-1)\,\alpha + \frac{n-1}{n}\,\frac{M}{\beta}

    The same traffic as the all-gather, in reverse; a ring all-reduce is one of each.

    Examples
    --------
    >>> ring_reduce_scatter_time(Q_(8, "MB"), 8, Q_(450, "GB/s"), Q_(0.5, "us")).to("us")
    <Quantity(19.0555556, 'microsecond')>
    """
    # The mirror image of the all-gather: the same n - 1 steps of M/n bytes per link.
    return ring_allgather_time.func(message, devices, bandwidth, latency, floor)


@formula(
    result=var("s", r"T_{\mathrm{A2A}}", description="all-to-all completion time"),
    reference="AllToAll completion, section 10.10.7 (§10.10.7, §10.10.4)",
    message=var("B", "M", "nonnegative", "bytes the busiest rank sends (or receives)"),
    devices=var("", "n", "positive_integer", "ranks exchanging"),
    bandwidth=var("B/s", r"\beta", description="endpoint injection bandwidth per direction"),
    latency=var("s", r"\alpha", "nonnegative", "per-message startup latency"),
    bisection_bandwidth=var("B/s", r"B_{\mathrm{bis}}", description="fabric bisection bandwidth per direction"),
    floor=var("s", r"T_{0}", "nonnegative", "per-collective latency floor"),
)
def alltoall_time(message, devices, bandwidth, latency, bisection_bandwidth, floor=0.0):
    r"""Completion time of an all-to-all: the largest of startup, endpoint and bisection terms.

    Parameters
    ----------
    message : Quantity [information]
        Bytes of the busiest rank's buffer: under routing skew, the send or receive volume of the
        rank hosting the most popular expert (the incast point, §10.10.4).
    devices : int
        Ranks exchanging.
    bandwidth : Quantity [information / time]
        Endpoint injection (and reception) bandwidth per direction.
    latency : Quantity [time]
        Startup latency per message; a rank sends :math:`n-1` messages.
    bisection_bandwidth : Quantity [information / time]
        Bandwidth across the fabric bisection, per direction. A non-blocking switch gives
        :math:`n\beta/2`.
    floor : Quantity [time], optional
        Per-collective latency floor.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{A2A}} = T_0 \min(n-1,1) + \max\left((n-1)\alpha,\ \frac{n-1}{n}\frac{M}{\beta},\
              \frac{n M}{4 B_{\mathrm{bis}}}\right)

    The chapter states the completion time is "set by the largest of per-message startup, endpoint
    injection or reception, and traffic across the fabric bisection" (§10.10.7). With a uniform
    exchange each rank keeps :math:`M/n` and sends the rest; :math:`nM/4` bytes cross a bisection in
    each direction. Each MoE layer pays two (dispatch and gather, §10.10.4).

    Examples
    --------
    >>> alltoall_time(Q_(8, "MB"), 8, Q_(450, "GB/s"), Q_(0.5, "us"), Q_(1800, "GB/s")).to("us")
    <Quantity(15.5555556, 'microsecond')>
    """
    startup = (devices - 1) * latency
    injection = (devices - 1) / devices * message / bandwidth
    bisection = devices * message / (4 * bisection_bandwidth)
    return floor * minimum(devices - 1, 1) + maximum(maximum(startup, injection), bisection)


@check_units(message="B", floor="s", latency="s", bisection_bandwidth="B/s")
def collective_time(
    collective: str,
    message: Any,
    devices: Any,
    link: Any,
    *,
    floor: Any = _ZERO_SECONDS,
    latency: Any = None,
    bandwidth_basis: str = "per_direction",
    bisection_bandwidth: Any = None,
) -> Any:
    """Time of one collective over a registry interconnect.

    Parameters
    ----------
    collective : {"point_to_point", "allreduce", "allgather", "reduce_scatter", "alltoall"}
        The communication pattern.
    message : Quantity [information]
        Bytes, as each collective's formula defines them.
    devices : int
        Ranks (ignored for point to point).
    link : str or Interconnect
        Registry id or entry; supplies the bandwidth and, unless ``latency`` is given, alpha.
    floor : Quantity [time], optional
        Per-collective latency floor (added to alpha for point to point).
    latency : Quantity [time], optional
        Overrides the link's startup latency (required for registry links without one).
    bandwidth_basis : {"per_direction", "total"}
        Which registry bandwidth to use; per direction is the physically right one.
    bisection_bandwidth : Quantity [information / time], optional
        For all-to-all; defaults to a non-blocking switch, ``devices / 2`` links.

    Returns
    -------
    Quantity [time]

    Examples
    --------
    Table 17's Ethernet 100G startup term alone for an 8-rank all-reduce is 2 x 7 x 50 us:

    >>> collective_time("allreduce", Q_(0, "B"), 8, "chapter-ethernet-100g").to("us")
    <Quantity(700.0, 'microsecond')>
    """
    if collective not in COLLECTIVES:
        raise InputError(f"argument 'collective' must be one of {COLLECTIVES}, got {collective!r}")
    bandwidth = link_bandwidth(link, bandwidth_basis)
    alpha = link_latency(link) if latency is None else latency
    if collective == "point_to_point":
        return point_to_point_time(message, bandwidth, alpha + floor)
    if collective == "alltoall":
        bisection = bandwidth * np.asarray(devices) / 2 if bisection_bandwidth is None else bisection_bandwidth
        return alltoall_time(message, devices, bandwidth, alpha, bisection, floor)
    function = {
        "allreduce": ring_allreduce_time,
        "allgather": ring_allgather_time,
        "reduce_scatter": ring_reduce_scatter_time,
    }[collective]
    return function(message, devices, bandwidth, alpha, floor)


# --------------------------------------------------------------------------------------------
# Calibration on measured NCCL all-reduce


@dataclass(frozen=True, repr=False)
class AllReduceCalibration(Result):
    """Fitted parameters of :func:`ring_allreduce_time` for one system, with their provenance.

    Use as ``ring_allreduce_time(message, n, cal.bandwidth, cal.latency, cal.floor)``.
    """

    floor: Any
    bandwidth: Any
    latency: Any
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

    floor: Any
    bandwidth: Any
    latency: Any
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


@check_units(message="B", measured_time="s", latency="s", min_message="B")
def fit_ring_allreduce(
    message: Any,
    devices: Any,
    measured_time: Any,
    latency: Any = _ZERO_SECONDS,
    min_message: Any = DECODE_MESSAGES[0],
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
        Alpha held fixed in the fit (zero: the floor absorbs every per-call latency).
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
    size = np.asarray(message.m_as("B"), dtype=float)
    ranks = np.asarray(devices, dtype=float)
    times = np.asarray(measured_time.m_as("s"), dtype=float)
    alpha = float(latency.m_as("s"))
    if not (size.shape == ranks.shape == times.shape) or size.ndim != 1:
        raise InputError("fit_ring_allreduce(): message, devices and measured_time must be 1-D arrays of one length")
    check_domain("fit_ring_allreduce", "devices", ranks, "positive_integer")
    check_domain("fit_ring_allreduce", "measured_time", times, "positive")
    keep = (size >= min_message.m_as("B")) & (ranks > 1)
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
    regimes = {"decode": (size >= low) & (size <= high), "large": size > high, "all": size >= min_message.m_as("B")}
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
        latency=latency,
        errors=tuple(rows),
    )


# --------------------------------------------------------------------------------------------
# Sharding triggers and step time (eq. 11-13)


@check_units(weight_bytes="B", device_capacity="B", reserve="B")
def min_shards(weight_bytes: Any, device_capacity: Any, reserve: Any = _ZERO_BYTES) -> Any:
    r"""Weight-only lower bound on the number of devices that can hold a model's weights.

    Parameters
    ----------
    weight_bytes : Quantity [information]
        Weight payload (eq. 11, :func:`calculator.memory.weight_bytes`).
    device_capacity : Quantity [information]
        Memory of one device, on the basis you choose (physical or nameplate).
    reserve : Quantity [information], optional
        Memory per device kept for KV state, buffers and runtime.

    Returns
    -------
    int (or int array)

    Notes
    -----
    .. math:: n_{\min} = \left\lceil \frac{M_W}{C - r} \right\rceil

    Section 10.10.1: KV state, buffers, replication within the partition and uneven
    placement can require a larger degree; a reserve expresses the first two. The chapter's name for
    :func:`calculator.memory.min_devices_for_weights`, which it calls.

    Examples
    --------
    >>> min_shards(weight_bytes(70e9, 16), Q_(80, "GB"))
    2
    """
    return min_devices_for_weights(weight_bytes, device_capacity, reserve)


@formula(
    result=var("s", r"T_{\mathrm{step}}", description="distributed step time"),
    reference="Eq. 12, section 10.10.1",
    compute_time=var("s", r"T_{\mathrm{comp}}", description="serial compute time of the step"),
    devices=var("", "n", "positive_integer", "devices in the sharding group"),
    communication_time=var("s", r"T_{\mathrm{comm}}", "nonnegative", "communication time at n devices"),
    synchronization_time=var("s", r"T_{\mathrm{sync}}", "nonnegative", "synchronization time at n devices"),
    overlap_time=var("s", r"T_{\mathrm{overlap}}", "nonnegative", "communication hidden behind compute"),
)
def distributed_step_time(compute_time, devices, communication_time, synchronization_time=0.0, overlap_time=0.0):
    r"""Step time of a sharded replica: divided compute plus the overhead that is not hidden.

    Parameters
    ----------
    compute_time : Quantity [time]
        Serial compute time of the step on one device.
    devices : int
        Devices in the sharding group.
    communication_time : Quantity [time]
        Communication time at ``devices``.
    synchronization_time : Quantity [time], optional
        Extra synchronization time at ``devices``.
    overlap_time : Quantity [time], optional
        Communication and synchronization hidden behind compute; overlap beyond the overhead hides
        nothing more.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{step}}(n) = \frac{T_{\mathrm{comp}}}{n}
              + \max\left(T_{\mathrm{comm}} + T_{\mathrm{sync}} - T_{\mathrm{overlap}}, 0\right)

    Eq. 12 (§10.10.1, the Fleet Law for one request). The chapter writes the subtraction without
    the clamp; hiding more than the overhead cannot make the step shorter than the divided compute.
    Sharding pays only if the non-overlapped overhead is below :math:`T_{\mathrm{comp}}(1 - 1/n)`
    (§10.10.1), i.e. :func:`sharding_speedup` > 1.

    Examples
    --------
    >>> distributed_step_time(Q_(30, "ms"), 8, Q_(0.6, "ms")).to("ms")
    <Quantity(4.35, 'millisecond')>
    """
    return compute_time / devices + maximum(communication_time + synchronization_time - overlap_time, 0)


@formula(
    result=var("", "S", description="speedup of the sharded step over one device"),
    reference="Eq. 12, section 10.10.1",
    compute_time=var("s", r"T_{\mathrm{comp}}"),
    devices=var("", "n", "positive_integer"),
    communication_time=var("s", r"T_{\mathrm{comm}}", "nonnegative"),
    synchronization_time=var("s", r"T_{\mathrm{sync}}", "nonnegative"),
    overlap_time=var("s", r"T_{\mathrm{overlap}}", "nonnegative"),
)
def sharding_speedup(compute_time, devices, communication_time, synchronization_time=0.0, overlap_time=0.0):
    r"""Speedup of a sharded step over the serial compute time; above 1 only when sharding pays.

    Parameters
    ----------
    compute_time, devices, communication_time, synchronization_time, overlap_time
        As for :func:`distributed_step_time`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: S = T_{\mathrm{comp}} / T_{\mathrm{step}}(n)

    Examples
    --------
    >>> round(sharding_speedup(Q_(30, "ms"), 8, Q_(0.6, "ms")), 1)
    6.9
    """
    return compute_time / distributed_step_time.func(
        compute_time, devices, communication_time, synchronization_time, overlap_time
    )


@formula(
    result=var("B", "M", description="activation bytes each rank contributes to a tensor-parallel all-reduce"),
    reference="section 10.10.2",
    tokens=var("", "N_{t}", "positive_integer", "tokens in the step (batch x new tokens per sequence)"),
    hidden_size=var("", "d", "positive_integer", "hidden width"),
    bytes_per_element=var("B", "s", description="bytes per activation element"),
)
def activation_message_bytes(tokens, hidden_size, bytes_per_element):
    r"""Payload of one tensor-parallel all-reduce: the full activation of the step.

    Parameters
    ----------
    tokens : int
        Tokens in the step: the batch for decode, the prompt tokens for prefill.
    hidden_size : int
        Hidden width of the model.
    bytes_per_element : Quantity [information]
        Bytes per activation element (2 B for FP16/BF16).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M = N_t \, d \, s

    The reduced activation keeps its full shape whatever the tensor-parallel degree (§10.10.2).

    Examples
    --------
    A batch of 64 decode tokens of an 8,192-wide model at FP16:

    >>> activation_message_bytes(64, 8192, Q_(2, "B")).to("MiB")
    <Quantity(1.0, 'mebibyte')>
    """
    return tokens * hidden_size * bytes_per_element


@formula(
    result=var("s", r"T_{\mathrm{TP}}", description="tensor-parallel layer time"),
    reference="Eq. 13, section 10.10.2; Example 10.6",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}", description="sequential compute time of one layer"),
    tensor_parallel=var("", "t", "positive_integer", "tensor-parallel degree"),
    allreduce_time=var("s", r"T_{\mathrm{AR}}", "nonnegative", "time of one all-reduce"),
)
def tensor_parallel_layer_time(layer_compute_time, tensor_parallel, allreduce_time):
    r"""Time of one transformer layer under tensor parallelism, with two all-reduces per layer.

    Parameters
    ----------
    layer_compute_time : Quantity [time]
        Sequential compute time of one layer on one device.
    tensor_parallel : int
        Tensor-parallel degree.
    allreduce_time : Quantity [time]
        Time of one all-reduce (a fixed assumption as in Example 10.6, or
        :func:`ring_allreduce_time`; see :func:`tensor_parallel_layer_time_ring`).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{TP}} = \frac{T_{\mathrm{comp}}}{t} + 2\,T_{\mathrm{AR}}

    Eq. 13 (§10.10.2): one all-reduce after attention, one after the feed-forward sublayer. Compute
    divides ideally; the collectives do not shrink with :math:`t`. With :math:`t = 1` pass a zero
    all-reduce time (or use the ring version, which gives zero by itself).

    Examples
    --------
    Example 10.6: 30 ms of layer compute over 8 GPUs with 0.3 ms all-reduces.

    >>> tensor_parallel_layer_time(Q_(30, "ms"), 8, Q_(0.3, "ms")).to("ms")
    <Quantity(4.35, 'millisecond')>
    """
    return layer_compute_time / tensor_parallel + 2 * allreduce_time


@formula(
    result=var("s", r"T_{\mathrm{TP}}", description="tensor-parallel layer time with ring all-reduces"),
    reference="Eq. 13 with the ring all-reduce cost model (§10.10.2)",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}", description="sequential compute time of one layer"),
    tensor_parallel=var("", "t", "positive_integer", "tensor-parallel degree"),
    message=var("B", "M", "nonnegative", "activation bytes per all-reduce"),
    bandwidth=var("B/s", r"\beta", description="link bandwidth per direction"),
    latency=var("s", r"\alpha", "nonnegative", "startup latency per ring step"),
    floor=var("s", r"T_{0}", "nonnegative", "per-collective latency floor"),
)
def tensor_parallel_layer_time_ring(layer_compute_time, tensor_parallel, message, bandwidth, latency, floor=0.0):
    r"""Eq. 13 with each all-reduce priced by the ring model; broadcasts over configurations.

    Parameters
    ----------
    layer_compute_time : Quantity [time]
        Sequential compute time of one layer.
    tensor_parallel : int
        Tensor-parallel degree (also the ring size); 1 means no collectives.
    message : Quantity [information]
        Activation bytes per all-reduce (:func:`activation_message_bytes`).
    bandwidth : Quantity [information / time]
        Link bandwidth per direction.
    latency : Quantity [time]
        Startup latency per ring step.
    floor : Quantity [time], optional
        Per-collective latency floor.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{TP}} = \frac{T_{\mathrm{comp}}}{t} + 2\,T_{\mathrm{AR}}(M, t, \beta, \alpha, T_0)

    Examples
    --------
    A 1 MiB decode all-reduce at TP 1, 2, 4, 8 with the fitted H100 NCCL floor:

    >>> cal = NCCL_ALLREDUCE_H100
    >>> tensor_parallel_layer_time_ring(Q_(0.4, "ms"), np.array([1, 2, 4, 8]), Q_(1, "MiB"), cal.bandwidth,
    ...                                 cal.latency, cal.floor).to("us")
    <Quantity([400.         261.82629885 164.83944828 116.34602299], 'microsecond')>
    """
    allreduce = ring_allreduce_time.func(message, tensor_parallel, bandwidth, latency, floor)
    return tensor_parallel_layer_time.func(layer_compute_time, tensor_parallel, allreduce)


@formula(
    result=var("", "S", description="layer speedup over one device"),
    reference="Example 10.6 (§10.10.2)",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}"),
    tensor_parallel=var("", "t", "positive_integer"),
    allreduce_time=var("s", r"T_{\mathrm{AR}}", "nonnegative"),
)
def tensor_parallel_speedup(layer_compute_time, tensor_parallel, allreduce_time):
    r"""Speedup of a tensor-parallel layer over its serial compute time.

    Parameters
    ----------
    layer_compute_time, tensor_parallel, allreduce_time
        As for :func:`tensor_parallel_layer_time`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: S = T_{\mathrm{comp}} / T_{\mathrm{TP}}, \qquad \text{efficiency} = S / t

    Examples
    --------
    Example 10.6, "a 6.9x reduction":

    >>> round(tensor_parallel_speedup(Q_(30, "ms"), 8, Q_(0.3, "ms")), 1)
    6.9
    """
    return layer_compute_time / tensor_parallel_layer_time.func(layer_compute_time, tensor_parallel, allreduce_time)


@formula(
    result=var("", r"\phi", description="share of the layer time spent in collectives"),
    reference="section 10.10.7",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}"),
    tensor_parallel=var("", "t", "positive_integer"),
    allreduce_time=var("s", r"T_{\mathrm{AR}}", "nonnegative"),
)
def collective_overhead_share(layer_compute_time, tensor_parallel, allreduce_time):
    r"""Fraction of a tensor-parallel layer spent in its two all-reduces.

    Parameters
    ----------
    layer_compute_time, tensor_parallel, allreduce_time
        As for :func:`tensor_parallel_layer_time`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: \phi = \frac{2 T_{\mathrm{AR}}}{T_{\mathrm{comp}}/t + 2 T_{\mathrm{AR}}}

    The share grows as per-device compute shrinks, which is why decode, with little compute per layer,
    feels the fixed collective latency most (§10.10.2, §10.10.7).

    Examples
    --------
    >>> round(collective_overhead_share(Q_(30, "ms"), 8, Q_(0.3, "ms")), 3)
    0.138
    """
    return 2 * allreduce_time / tensor_parallel_layer_time.func(layer_compute_time, tensor_parallel, allreduce_time)


# --------------------------------------------------------------------------------------------
# Placement: KV heads under TP, hybrid TP x PP layouts


@dataclass(frozen=True, repr=False)
class KvHeadPlacement(Result):
    """Attention and KV heads per tensor-parallel rank.

    ``kv_head_ranges[d]`` is the inclusive ``(first, last)`` KV head held by device ``d``; with more
    ranks than KV heads each KV head is replicated on ``kv_replication`` consecutive devices.
    ``kv_fraction_per_device`` is the share of one sequence's KV cache each device stores.
    """

    tensor_parallel: int
    heads_per_device: int
    kv_heads_per_device: int
    kv_replication: int
    kv_head_ranges: tuple[tuple[int, int], ...]
    kv_fraction_per_device: float


def kv_head_placement(attention_heads: int, kv_heads: int, tensor_parallel: int) -> KvHeadPlacement:
    """Place attention heads and KV-cache heads across tensor-parallel ranks (section 10.10.2).

    Parameters
    ----------
    attention_heads : int
        Query heads per layer; must be divisible by ``tensor_parallel``.
    kv_heads : int
        Key/value heads per layer (equal to ``attention_heads`` for MHA, fewer for GQA, 1 for MQA).
    tensor_parallel : int
        Tensor-parallel degree.

    Returns
    -------
    KvHeadPlacement

    Raises
    ------
    InputError
        If the degree divides neither the KV heads nor is divided by them, or does not divide the
        attention heads.

    Notes
    -----
    Each device computes attention for :math:`H/t` heads and stores the KV cache of its own heads
    (§10.10.2). When :math:`t` exceeds the KV heads (GQA/MQA), each KV head is replicated on
    :math:`t / H_{kv}` devices, so per-device KV memory stops shrinking at one head.

    Examples
    --------
    The chapter's 64-KV-head MHA layout at TP 8 (device 0 holds heads 0-7, device 7 heads 56-63):

    >>> placement = kv_head_placement(64, 64, 8)
    >>> placement.kv_head_ranges[0], placement.kv_head_ranges[7]
    ((0, 7), (56, 63))
    >>> kv_head_placement(64, 8, 8).kv_heads_per_device
    1
    """
    heads = _check_count("kv_head_placement", "attention_heads", attention_heads)
    kv = _check_count("kv_head_placement", "kv_heads", kv_heads)
    degree = _check_count("kv_head_placement", "tensor_parallel", tensor_parallel)
    if kv > heads or heads % kv:
        raise InputError(
            f"kv_head_placement(): argument 'kv_heads' ({kv}) must divide attention_heads ({heads}) (MHA/GQA/MQA)"
        )
    if heads % degree:
        raise InputError(
            f"kv_head_placement(): argument 'tensor_parallel' ({degree}) must divide attention_heads ({heads})"
        )
    if kv % degree and degree % kv:
        raise InputError(
            f"kv_head_placement(): argument 'tensor_parallel' ({degree}) must divide kv_heads ({kv}) or be a "
            "multiple of it"
        )
    shards = int(kv_shards(degree, kv))
    per, replication = kv // shards, degree // shards
    ranges = tuple(((d // replication) * per, (d // replication) * per + per - 1) for d in range(degree))
    return KvHeadPlacement(
        tensor_parallel=degree,
        heads_per_device=heads // degree,
        kv_heads_per_device=per,
        kv_replication=replication,
        kv_head_ranges=ranges,
        kv_fraction_per_device=per / kv,
    )


@dataclass(frozen=True, repr=False)
class PipelineStage(Result):
    """One pipeline stage: its inclusive 1-based layer range and the devices of its TP group."""

    index: int
    first_layer: int
    last_layer: int
    devices: tuple[int, ...]


@dataclass(frozen=True, repr=False)
class HybridLayout(Result):
    """A pipeline-by-tensor-parallel layout: ``devices = pipeline_parallel x tensor_parallel``.

    ``layers_per_stage`` is the most layers any stage holds: stages differ by at most one layer when
    the pipeline degree does not divide the layer count (the first stages take the extra layers).
    """

    pipeline_parallel: int
    tensor_parallel: int
    devices: int
    layers_per_stage: int
    stages: tuple[PipelineStage, ...]


def hybrid_layout(
    layers: int, pipeline_parallel: int, tensor_parallel: int, attention_heads: int | None = None
) -> HybridLayout:
    """Lay out a model as pipeline stages of contiguous layers, each a tensor-parallel group.

    Parameters
    ----------
    layers : int
        Transformer layers, at least ``pipeline_parallel``; when the degree does not divide them, the
        contiguous stages differ by one layer (DeepSeek-V3's 61 layers on 4 stages: 16, 15, 15, 15).
    pipeline_parallel : int
        Pipeline stages.
    tensor_parallel : int
        Devices per stage.
    attention_heads : int, optional
        If given, checked to be divisible by ``tensor_parallel``.

    Returns
    -------
    HybridLayout

    Notes
    -----
    Section 10.10.6: the tensor split cuts per-layer compute by up to the TP degree;
    the pipeline stages complete the memory distribution and add no per-request latency benefit.

    Examples
    --------
    The chapter's 2 x 4 layout of an 80-layer model:

    >>> layout = hybrid_layout(80, 2, 4)
    >>> [(s.first_layer, s.last_layer, s.devices) for s in layout.stages]
    [(1, 40, (0, 1, 2, 3)), (41, 80, (4, 5, 6, 7))]

    A layer count the pipeline degree does not divide:

    >>> [(s.first_layer, s.last_layer) for s in hybrid_layout(61, 4, 8).stages]
    [(1, 16), (17, 31), (32, 46), (47, 61)]
    """
    count = _check_count("hybrid_layout", "layers", layers)
    stages = _check_count("hybrid_layout", "pipeline_parallel", pipeline_parallel)
    degree = _check_count("hybrid_layout", "tensor_parallel", tensor_parallel)
    if stages > count:
        raise InputError(
            f"hybrid_layout(): argument 'pipeline_parallel' ({stages}) must not exceed layers ({count}): "
            "every stage holds at least one layer"
        )
    if attention_heads is not None and _check_count("hybrid_layout", "attention_heads", attention_heads) % degree:
        raise InputError(
            f"hybrid_layout(): argument 'tensor_parallel' ({degree}) must divide attention_heads ({attention_heads})"
        )
    per, extra = divmod(count, stages)
    bounds = [0]
    for i in range(stages):
        bounds.append(bounds[-1] + per + (1 if i < extra else 0))
    return HybridLayout(
        pipeline_parallel=stages,
        tensor_parallel=degree,
        devices=stages * degree,
        layers_per_stage=per + (1 if extra else 0),
        stages=tuple(
            PipelineStage(
                index=i,
                first_layer=bounds[i] + 1,
                last_layer=bounds[i + 1],
                devices=tuple(range(i * degree, (i + 1) * degree)),
            )
            for i in range(stages)
        ),
    )


# --------------------------------------------------------------------------------------------
# Pipeline parallelism


@dataclass(frozen=True, repr=False)
class PipelinePerformance(Result):
    """Single-request latency, steady-state throughput, makespan and bubble of a pipeline."""

    stages: int
    requests: int
    latency: Any
    throughput: Any
    makespan: Any
    bubble_fraction: float


@check_units(stage_times="s", transfer_time="s")
def pipeline_performance(
    stage_times: Any, requests: int = 1, transfer_time: Any = _ZERO_SECONDS
) -> PipelinePerformance:
    r"""Latency, throughput and bubble of a pipeline of stages serving ``requests`` identical requests.

    Parameters
    ----------
    stage_times : Quantity [time], 1-D array
        Execution time of each stage for one request (or micro-batch).
    requests : int, optional
        Requests in flight over the window.
    transfer_time : Quantity [time], scalar or array of ``stages - 1``
        Activation transfer between consecutive stages (:func:`point_to_point_time`), on links that
        run concurrently with compute.

    Returns
    -------
    PipelinePerformance
        ``latency`` (one request: the sum of stages and transfers), ``throughput`` (requests per
        second at saturation: one over the slowest stage or link), ``makespan`` of the ``requests``
        and ``bubble_fraction`` (idle share of the stage devices over the makespan).

    Notes
    -----
    .. math:: L = \sum_i T_i + \sum_j X_j, \quad X = 1/\max(T_i, X_j), \quad
              T_{\mathrm{make}} = L + (m - 1)\max(T_i, X_j)

    A request still traverses every stage, so staging alone gives no latency reduction (seed
    §10.10.3); throughput is limited by the slowest stage (§10.10.3). The makespan is exact for
    identical requests through a flow shop; for balanced stages the bubble is
    :func:`pipeline_bubble_fraction`.

    Examples
    --------
    Four balanced 5 ms stages: a lone request keeps three of four devices idle; 12 in flight
    amortize the fill.

    >>> pipeline_performance(Q_([5, 5, 5, 5], "ms")).bubble_fraction
    0.75
    >>> round(pipeline_performance(Q_([5, 5, 5, 5], "ms"), requests=12).bubble_fraction, 4)
    0.2
    """
    times = np.atleast_1d(stage_times.m_as("s")).astype(float)
    if times.ndim != 1 or times.size == 0:
        raise InputError("pipeline_performance(): argument 'stage_times' must be a non-empty 1-D array")
    check_domain("pipeline_performance", "stage_times", times, "positive")
    count = _check_count("pipeline_performance", "requests", requests)
    transfers = np.broadcast_to(np.asarray(transfer_time.m_as("s"), dtype=float), (times.size - 1,))
    check_domain("pipeline_performance", "transfer_time", transfers, "nonnegative")
    bottleneck = max(times.max(), transfers.max(initial=0.0))
    latency = times.sum() + transfers.sum()
    makespan = latency + (count - 1) * bottleneck
    return PipelinePerformance(
        stages=times.size,
        requests=count,
        latency=Q_(latency, "s").to("ms"),
        throughput=Q_(1 / bottleneck, "request/s"),
        makespan=Q_(makespan, "s").to("ms"),
        bubble_fraction=float(1 - count * times.sum() / (times.size * makespan)),
    )


@formula(
    result=var("", "b", description="idle fraction of a balanced pipeline"),
    reference="section 10.10.3 (Figure 17); standard fill-and-drain bubble (not written in the chapter)",
    stages=var("", "P", "positive_integer", "pipeline stages"),
    requests=var("", "m", "positive_integer", "requests (micro-batches) in flight"),
)
def pipeline_bubble_fraction(stages, requests):
    r"""Idle fraction of ``stages`` balanced stages over the fill and drain of ``requests`` requests.

    Parameters
    ----------
    stages : int
        Pipeline stages.
    requests : int
        Requests (or micro-batches) in flight.

    Returns
    -------
    float

    Notes
    -----
    .. math:: b = \frac{P - 1}{m + P - 1}

    The balanced special case of :func:`pipeline_performance` with no transfer time. The chapter
    describes the fill (Figure 17: every stage busy from slot :math:`t_4` with four stages) but
    writes no fraction; this is the standard form.

    Examples
    --------
    >>> pipeline_bubble_fraction(4, 1)
    0.75
    """
    return (stages - 1) / (requests + stages - 1)


# --------------------------------------------------------------------------------------------
# Mixture of experts


@dataclass(frozen=True, repr=False)
class MoeWeights(Result):
    """Resident (all experts) and per-token active weight bytes of a mixture of experts."""

    resident_bytes: Any
    active_bytes: Any
    total_to_active_ratio: float


def _check_parameters(function: str, total: Any, active: Any) -> None:
    check_domain(function, "total_parameters", total, "positive")
    check_domain(function, "active_parameters", active, "positive")
    if np.any(np.asarray(active) > np.asarray(total)):
        raise InputError(f"{function}(): argument 'active_parameters' ({active}) exceeds total_parameters ({total})")


def moe_weights(total_parameters: Any, active_parameters: Any, bits_per_weight: Any) -> MoeWeights:
    r"""Resident and active weight bytes of a mixture-of-experts model.

    Parameters
    ----------
    total_parameters : float
        All parameters, every expert included (they are all resident).
    active_parameters : float
        Parameters used per token (shared layers plus the selected experts).
    bits_per_weight : float
        Stored bits per weight.

    Returns
    -------
    MoeWeights

    Notes
    -----
    .. math:: M_{\mathrm{res}} = N_{\mathrm{tot}} b / 8, \quad M_{\mathrm{act}} = N_{\mathrm{act}} b / 8

    Section 10.10.4.1 (§10.10.4, footnote 5 §10.10.4): total parameters set storage; active
    parameters estimate weight traffic and arithmetic per token at batch size 1.

    Examples
    --------
    DeepSeek-V3 at FP16 (§10.10.4: "approximately 74 GB", "approximately 1342 GB"):

    >>> w = moe_weights(671e9, 37e9, 16)
    >>> w.resident_bytes.to("GB"), w.active_bytes.to("GB")
    (<Quantity(1342.0, 'gigabyte')>, <Quantity(74.0, 'gigabyte')>)
    """
    _check_parameters("moe_weights", total_parameters, active_parameters)
    return MoeWeights(
        resident_bytes=weight_bytes(total_parameters, bits_per_weight).to("GB"),
        active_bytes=weight_bytes(active_parameters, bits_per_weight).to("GB"),
        total_to_active_ratio=plain(np.asarray(total_parameters) / np.asarray(active_parameters)),
    )


@dataclass(frozen=True, repr=False)
class ExpertPlacement(Result):
    """Per-device weights under expert parallelism, with the implied per-expert and shared parameters."""

    expert_parameters: float
    shared_parameters: float
    experts_per_device: int
    even: bool
    device_weight_bytes: Any
    replicated_weight_bytes: Any


def expert_placement(
    total_parameters: float,
    active_parameters: float,
    experts: int,
    experts_per_token: int,
    expert_parallel: int,
    bits_per_weight: float,
) -> ExpertPlacement:
    r"""Weights each device holds when ``expert_parallel`` devices split the experts (shared layers replicated).

    Parameters
    ----------
    total_parameters, active_parameters : float
        Total and per-token active parameters.
    experts : int
        Routed experts per MoE layer.
    experts_per_token : int
        Experts the gate selects per token (top-k); must be fewer than ``experts``.
    expert_parallel : int
        Devices in the expert-parallel group.
    bits_per_weight : float
        Stored bits per weight.

    Returns
    -------
    ExpertPlacement
        The implied parameters per expert :math:`e` and shared parameters :math:`s`, the experts on the
        busiest device, its weight bytes, and the bytes if every device held every expert.

    Notes
    -----
    .. math:: e = \frac{N_{\mathrm{tot}} - N_{\mathrm{act}}}{E - k}, \quad s = N_{\mathrm{act}} - k e,
              \quad M_{\mathrm{dev}} = \left(s + \lceil E/D \rceil e\right) b / 8

    Implied by Example 10.7 (§10.10.4): each device holds "the shared attention layers plus its
    local experts". Uneven splits put :math:`\lceil E/D \rceil` experts on the busiest device.

    Examples
    --------
    Example 10.7, Mixtral-8x7B over 4 GPUs ("about 25.8 GB" vs "93.4 GB" replicated):

    >>> p = expert_placement(46.7e9, 12.9e9, 8, 2, 4, 16)
    >>> round(p.device_weight_bytes.m_as("GB"), 1), round(p.replicated_weight_bytes.m_as("GB"), 1)
    (25.8, 93.4)
    """
    function = "expert_placement"
    _check_parameters(function, total_parameters, active_parameters)
    routed = _check_count(function, "experts", experts)
    top_k = _check_count(function, "experts_per_token", experts_per_token)
    devices = _check_count(function, "expert_parallel", expert_parallel)
    if top_k >= routed:
        raise InputError(f"{function}(): argument 'experts_per_token' ({top_k}) must be below experts ({routed})")
    per_expert = (total_parameters - active_parameters) / (routed - top_k)
    shared = active_parameters - top_k * per_expert
    if shared < -1e-9 * total_parameters:
        raise InputError(
            f"{function}(): active_parameters ({active_parameters:.4g}) is below experts_per_token x the implied "
            f"expert size ({top_k} x {per_expert:.4g}); the counts are inconsistent"
        )
    shared = max(shared, 0.0)
    local = -(-routed // devices)
    return ExpertPlacement(
        expert_parameters=per_expert,
        shared_parameters=shared,
        experts_per_device=local,
        even=routed % devices == 0,
        device_weight_bytes=weight_bytes(shared + local * per_expert, bits_per_weight).to("GB"),
        replicated_weight_bytes=weight_bytes(total_parameters, bits_per_weight).to("GB"),
    )


@dataclass(frozen=True, repr=False)
class MoeDecodeFloor(Result):
    """Napkin Math 10.8: nodes for the resident weights and the batch-one decode floor."""

    resident_bytes: Any
    nodes: int
    node_capacity: Any
    devices: int
    read_bytes_per_device: Any
    read_time: Any
    token_time: Any
    tokens_per_second: Any


@check_units(device_capacity="B", memory_bandwidth="B/s", routing_time="s")
def moe_decode_floor(
    total_parameters: float,
    active_parameters: float,
    bits_per_weight: float,
    devices_per_node: int,
    device_capacity: Any,
    memory_bandwidth: Any,
    routing_time: Any = _ZERO_SECONDS,
    devices: int | None = None,
) -> MoeDecodeFloor:
    r"""Nodes needed to hold an MoE model's weights and its optimistic batch-one decode floor.

    Parameters
    ----------
    total_parameters, active_parameters : float
        Total (resident) and per-token active parameters.
    bits_per_weight : float
        Stored bits per weight.
    devices_per_node : int
        Accelerators per node.
    device_capacity : Quantity [information]
        Memory per accelerator, on the basis you choose (the chapter uses the 80 GB nameplate).
    memory_bandwidth : Quantity [information / time]
        HBM bandwidth per accelerator.
    routing_time : Quantity [time], optional
        Routing and dispatch overhead per token.
    devices : int, optional
        Devices sharing the active reads; defaults to every device of the nodes needed.

    Returns
    -------
    MoeDecodeFloor

    Notes
    -----
    .. math:: \text{nodes} = \left\lceil \frac{M_{\mathrm{res}}}{g\,C} \right\rceil, \quad
              t_{\mathrm{read}} = \frac{M_{\mathrm{act}} / n}{B_{\mathrm{HBM}}}, \quad
              t_{\mathrm{token}} = t_{\mathrm{read}} + t_{\mathrm{route}}

    Napkin Math 10.8 (§10.10.4). Assumes reads spread evenly over the devices, which expert
    placement and routing do not guarantee at batch one; compute, KV traffic, synchronization and
    imbalance are left out, so this is an optimistic estimate, not a bound. The remaining memory
    must still hold KV state and buffers.

    Examples
    --------
    >>> floor = moe_decode_floor(671e9, 37e9, 8, 8, Q_(80, "GB"), Q_(3.35, "TB/s"), Q_(0.3, "ms"))
    >>> floor.nodes, round(floor.read_time.m_as("ms"), 2)
    (2, 0.69)
    """
    function = "moe_decode_floor"
    _check_parameters(function, total_parameters, active_parameters)
    per_node = _check_count(function, "devices_per_node", devices_per_node)
    check_domain(function, "device_capacity", device_capacity.m_as("B"), "positive")
    check_domain(function, "memory_bandwidth", memory_bandwidth.m_as("B/s"), "positive")
    check_domain(function, "routing_time", routing_time.m_as("s"), "nonnegative")
    resident = weight_bytes(total_parameters, bits_per_weight)
    node_capacity = per_node * device_capacity
    nodes = min_shards(resident, node_capacity)
    count = nodes * per_node if devices is None else _check_count(function, "devices", devices)
    per_device = weight_bytes(active_parameters, bits_per_weight) / count
    read = (per_device / memory_bandwidth).to("ms")
    token = (read + routing_time).to("ms")
    return MoeDecodeFloor(
        resident_bytes=resident.to("GB"),
        nodes=nodes,
        node_capacity=node_capacity.to("GB"),
        devices=int(count),
        read_bytes_per_device=per_device.to("GB"),
        read_time=read,
        token_time=token,
        tokens_per_second=(1 / token).to("1/s") * Q_(1, "token"),
    )


def expert_capacity(tokens: Any, experts_per_token: int, experts: int, capacity_factor: float = 1.25) -> Any:
    r"""Token slots per expert under a capacity factor.

    Parameters
    ----------
    tokens : int
        Tokens in the batch routed through the MoE layer.
    experts_per_token : int
        Experts selected per token (top-k).
    experts : int
        Experts in the layer.
    capacity_factor : float
        Slack over the even share (1.25 is the chapter's illustrative setting, §10.10.4).

    Returns
    -------
    int

    Notes
    -----
    .. math:: C = \left\lceil \mathrm{CF} \cdot \frac{T k}{E} \right\rceil

    The standard form (the chapter names the capacity factor but writes no formula). Tokens beyond
    an expert's capacity are dropped or rerouted (which changes the computation) or buffered (latency).

    Examples
    --------
    >>> expert_capacity(4096, 2, 8)
    1280
    """
    count = _check_count("expert_capacity", "tokens", tokens)
    check_domain("expert_capacity", "capacity_factor", capacity_factor, "positive")
    share = np.asarray(count) * _check_count("expert_capacity", "experts_per_token", experts_per_token)
    share = share / _check_count("expert_capacity", "experts", experts)
    return as_count(np.ceil(capacity_factor * share * (1 - 1e-12)))


def simulate_expert_overflow(
    tokens: int,
    experts: int,
    experts_per_token: int,
    capacity_factor: float = 1.25,
    popularity: Any = None,
    trials: int = 200,
    seed: int = 0,
) -> float:
    """Mean fraction of token-to-expert assignments that exceed expert capacity (seeded simulation).

    Parameters
    ----------
    tokens, experts, experts_per_token, capacity_factor
        As for :func:`expert_capacity`.
    popularity : array of float, optional
        Relative routing probability of each expert (skew); uniform if omitted.
    trials : int
        Simulated batches.
    seed : int
        Random seed.

    Returns
    -------
    float
        Dropped (or buffered) assignments over all assignments.

    Notes
    -----
    Each token picks ``experts_per_token`` distinct experts with probability proportional to
    ``popularity`` (Gumbel top-k sampling). Even a uniform router overflows some experts at a
    capacity factor near 1, and skew makes the popular expert's host an incast point (§10.10.4).

    Examples
    --------
    >>> simulate_expert_overflow(512, 8, 2, 1.25, trials=50) < 0.01
    True
    """
    capacity = expert_capacity(tokens, experts_per_token, experts, capacity_factor)
    weights = np.ones(experts) if popularity is None else np.asarray(popularity, dtype=float)
    if weights.shape != (experts,):
        raise InputError(f"simulate_expert_overflow(): argument 'popularity' needs {experts} values")
    check_domain("simulate_expert_overflow", "popularity", weights, "nonnegative")
    if np.count_nonzero(weights) < experts_per_token:
        raise InputError("simulate_expert_overflow(): fewer experts with positive popularity than experts_per_token")
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights / weights.sum())
    dropped = 0
    for _ in range(_check_count("simulate_expert_overflow", "trials", trials)):
        keys = log_weights + rng.gumbel(size=(tokens, experts))
        chosen = np.argpartition(-keys, experts_per_token - 1, axis=1)[:, :experts_per_token]
        load = np.bincount(chosen.ravel(), minlength=experts)
        dropped += np.maximum(load - capacity, 0).sum()
    return float(dropped / (trials * tokens * experts_per_token))


# --------------------------------------------------------------------------------------------
# Recommendation embeddings (Lighthouse 10.1)


@formula(
    result=var("B", r"M_{\mathrm{emb}}", description="bytes of a dense embedding table"),
    reference="Lighthouse 10.1 (§10.10.5)",
    entities=var("", "N", description="rows (entities)"),
    dimension=var("", "d", "positive_integer", "embedding dimension"),
    bytes_per_element=var("B", "s", description="bytes per element"),
)
def embedding_table_bytes(entities, dimension, bytes_per_element):
    r"""Bytes of a dense embedding table: one vector per entity.

    Parameters
    ----------
    entities : float
        Rows.
    dimension : int
        Elements per vector.
    bytes_per_element : Quantity [information]
        1 B for INT8, 2 B for FP16.

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_{\mathrm{emb}} = N d s

    Examples
    --------
    Lighthouse 10.1: 10 trillion entities x 128 dims at INT8 "would require at least 1,280 TB".

    >>> embedding_table_bytes(1e13, 128, Q_(1, "B")).to("TB")
    <Quantity(1280.0, 'terabyte')>
    """
    return entities * dimension * bytes_per_element


@formula(
    result=var("B", r"m_{\mathrm{ent}}", description="average resident bytes per entity"),
    reference="Lighthouse 10.1 (§10.10.5)",
    resident_budget=var("B", "R", description="resident embedding budget"),
    entities=var("", "N", description="entities in the catalog"),
)
def resident_bytes_per_entity(resident_budget, entities):
    r"""Average resident bytes available per entity of the catalog.

    Parameters
    ----------
    resident_budget : Quantity [information]
        Platform-wide resident embedding budget.
    entities : float
        Entities in the catalog.

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: m_{\mathrm{ent}} = R / N

    Examples
    --------
    Lighthouse 10.1: 100 TB over 10 trillion entities "averages only 10 bytes per entity".

    >>> resident_bytes_per_entity(Q_(100, "TB"), 1e13)
    <Quantity(10.0, 'byte')>
    """
    return resident_budget / entities


@dataclass(frozen=True, repr=False)
class EmbeddingTiers(Result):
    """Hot (replicated), warm (column-sharded) and cold (row-sharded) tiers of a resident population."""

    hot_entities: float
    warm_entities: float
    cold_entities: float
    hot_bytes: Any
    warm_bytes: Any
    cold_bytes: Any
    total_bytes: Any
    warm_slice_bytes: Any
    fits: bool | None
    max_admitted_entities: float | None


@check_units(vector_bytes="B", resident_budget="B")
def tiered_embedding_placement(
    admitted_entities: float,
    vector_bytes: Any,
    hot_replicas: int,
    hot_fraction: float = 0.01,
    warm_fraction: float = 0.10,
    warm_shards: int = 8,
    resident_budget: Any = None,
) -> EmbeddingTiers:
    r"""Memory of a hot/warm/cold embedding placement, counting hot replicas against the budget.

    Parameters
    ----------
    admitted_entities : float
        Entities admitted to the resident tier (not the whole catalog).
    vector_bytes : Quantity [information]
        Bytes of one vector (dimension x bytes per element).
    hot_replicas : int
        Copies of each hot vector (replication within selected shard groups; the chapter gives none).
    hot_fraction, warm_fraction : float
        Shares of the admitted population (1 % and 10 % in Lighthouse 10.1); the rest is cold.
    warm_shards : int
        Column-sharding degree of the warm tier (8-way in the chapter).
    resident_budget : Quantity [information], optional
        If given, ``fits`` and the largest admissible population are reported.

    Returns
    -------
    EmbeddingTiers

    Notes
    -----
    .. math:: M = N_{\mathrm{adm}}\, v\, (f_h r_h + f_w + 1 - f_h - f_w)

    Lighthouse 10.1 (§10.10.5): "Replica bytes count against the platform-wide resident
    budget, so the admitted population and replication scope must be chosen together."

    Examples
    --------
    >>> tiers = tiered_embedding_placement(5e11, Q_(128, "B"), hot_replicas=8, resident_budget=Q_(100, "TB"))
    >>> tiers.total_bytes.to("TB"), tiers.fits
    (<Quantity(68.48, 'terabyte')>, True)
    """
    function = "tiered_embedding_placement"
    check_domain(function, "admitted_entities", admitted_entities, "positive")
    check_domain(function, "vector_bytes", vector_bytes.m_as("B"), "positive")
    replicas = _check_count(function, "hot_replicas", hot_replicas)
    shards = _check_count(function, "warm_shards", warm_shards)
    check_domain(function, "hot_fraction", hot_fraction, "probability")
    check_domain(function, "warm_fraction", warm_fraction, "probability")
    if hot_fraction + warm_fraction > 1:
        raise InputError(f"{function}(): hot_fraction + warm_fraction must be <= 1, got {hot_fraction + warm_fraction}")
    cold_fraction = 1 - hot_fraction - warm_fraction
    hot, warm, cold = (admitted_entities * f for f in (hot_fraction, warm_fraction, cold_fraction))
    factor = hot_fraction * replicas + warm_fraction + cold_fraction
    total = (admitted_entities * factor * vector_bytes).to("TB")
    fits = max_admitted = None
    if resident_budget is not None:
        fits = bool(total <= resident_budget)
        max_admitted = float((resident_budget / (factor * vector_bytes)).m_as(""))
    return EmbeddingTiers(
        hot_entities=hot,
        warm_entities=warm,
        cold_entities=cold,
        hot_bytes=(hot * replicas * vector_bytes).to("TB"),
        warm_bytes=(warm * vector_bytes).to("TB"),
        cold_bytes=(cold * vector_bytes).to("TB"),
        total_bytes=total,
        warm_slice_bytes=(vector_bytes / shards).to("B"),
        fits=fits,
        max_admitted_entities=max_admitted,
    )


#: Lookup accumulation window of Lighthouse 10.1 (§10.10.5).
DEFAULT_BATCHING_WINDOW = Q_(1, "ms")


@dataclass(frozen=True, repr=False)
class EmbeddingLookup(Result):
    """Sequential per-lookup RPCs vs one batched, deduplicated, shard-grouped dispatch wave."""

    sequential_time: Any
    sequential_waves: int
    batched_time: Any
    batched_rpcs: int
    lookups_per_shard: int
    speedup: float


@check_units(rpc_time="s", batching_window="s", vector_bytes="B", shard_bandwidth="B/s")
def embedding_lookup_time(
    lookups: int,
    rpc_time: Any,
    shards: int,
    batching_window: Any = DEFAULT_BATCHING_WINDOW,
    unique_fraction: float = 1.0,
    vector_bytes: Any = _ZERO_BYTES,
    shard_bandwidth: Any = None,
) -> EmbeddingLookup:
    r"""Latency of a request's embedding lookups: one RPC wave per lookup vs one batched wave.

    Parameters
    ----------
    lookups : int
        Embedding lookups per request (about 5,000 in Lighthouse 10.1).
    rpc_time : Quantity [time]
        Round-trip time of one lookup RPC (startup dominated).
    shards : int
        Shards the lookups are grouped by.
    batching_window : Quantity [time]
        Time lookups accumulate before dispatch (1 ms in the chapter).
    unique_fraction : float
        Share of lookups left after deduplication across the window.
    vector_bytes : Quantity [information]
        Bytes returned per lookup.
    shard_bandwidth : Quantity [information / time], optional
        Network bandwidth of one shard's reply path; omitted means replies are startup dominated.

    Returns
    -------
    EmbeddingLookup

    Notes
    -----
    .. math:: T_{\mathrm{seq}} = N\,t_{\mathrm{rpc}}, \qquad
              T_{\mathrm{batch}} = t_{\mathrm{win}} + t_{\mathrm{rpc}} + \lceil uN/S \rceil v / \beta

    Lighthouse 10.1 and Table 16 (§10.10.5): sequential dispatch pays one RPC per lookup;
    batching waits for the window, deduplicates, groups by destination shard and sends one parallel
    wave (several shard RPCs, not one RPC to the fleet). Keys are assumed spread evenly over shards.

    Examples
    --------
    >>> r = embedding_lookup_time(5000, Q_(10, "us"), shards=1000)
    >>> r.sequential_time.to("ms"), r.batched_time.to("ms")
    (<Quantity(50.0, 'millisecond')>, <Quantity(1.01, 'millisecond')>)
    """
    function = "embedding_lookup_time"
    count = _check_count(function, "lookups", lookups)
    shard_count = _check_count(function, "shards", shards)
    check_domain(function, "rpc_time", rpc_time.m_as("s"), "positive")
    check_domain(function, "batching_window", batching_window.m_as("s"), "nonnegative")
    check_domain(function, "unique_fraction", unique_fraction, "probability")
    if unique_fraction <= 0:
        raise InputError(f"{function}(): argument 'unique_fraction' must be > 0, got {unique_fraction}")
    unique = max(1, int(np.ceil(count * unique_fraction - 1e-9)))
    per_shard = -(-unique // shard_count)
    transfer = Q_(0, "s") if shard_bandwidth is None else (per_shard * vector_bytes / shard_bandwidth).to("s")
    sequential = (count * rpc_time).to("ms")
    batched = (batching_window + rpc_time + transfer).to("ms")
    return EmbeddingLookup(
        sequential_time=sequential,
        sequential_waves=count,
        batched_time=batched,
        batched_rpcs=min(shard_count, unique),
        lookups_per_shard=per_shard,
        speedup=float((sequential / batched).m_as("")),
    )
