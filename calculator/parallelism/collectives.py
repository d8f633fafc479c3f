r"""Interconnects and alpha-beta collectives: ring all-reduce, all-gather, reduce-scatter, all-to-all.

Communication follows the alpha-beta model: a message of :math:`M` bytes over a link with startup
latency :math:`\alpha` and bandwidth :math:`\beta` takes :math:`\alpha + M/\beta`; collectives
are built from such steps (ring all-reduce, all-gather, reduce-scatter, all-to-all). Every collective
also takes a **per-collective latency floor**: the launch, protocol and synchronization cost that a
real library (NCCL) pays once per call (fitted in :mod:`calculator.parallelism.nccl`).

Bandwidth basis: the registry's interconnects carry ``bandwidth`` (per direction) and
``bandwidth_total`` (both directions). The collectives here use the per-direction figure, which is
the physically right one: in a ring each link carries one direction of the traffic at a time. The
chapter's Table 17 prints 900 GB/s for NVLink, the two-direction total; the chapter itself uses
450 GB/s per direction elsewhere (§10.8.3). Functions that take a link accept a registry id or an
:class:`~calculator.registry.Interconnect` and a ``bandwidth_basis`` (``"per_direction"`` or
``"total"``) so that either reading can be evaluated and stated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import checked
from ..errors import InputError
from ..formula import formula, maximum, minimum, var
from ..phases import kv_handoff_time
from ..types import Bandwidth, Bytes, Count, InterconnectRef, Time
from ..units import Q_
from ._common import _ZERO_SECONDS

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "BANDWIDTH_BASES",
    "COLLECTIVES",
    "resolve_interconnect",
    "link_bandwidth",
    "link_latency",
    "point_to_point_time",
    "ring_allreduce_time",
    "ring_allgather_time",
    "ring_reduce_scatter_time",
    "alltoall_time",
    "collective_time",
]


BANDWIDTH_BASES = ("per_direction", "total")
COLLECTIVES = ("point_to_point", "allreduce", "allgather", "reduce_scatter", "alltoall")


# --------------------------------------------------------------------------------------------
# Interconnects


def resolve_interconnect(link: InterconnectRef, *, registry: Registry | None = None) -> Any:
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
    from .._support import registry_or_default, registry_or_none
    from ..registry import Interconnect

    registry_or_none(registry)
    if isinstance(link, Interconnect):
        return link
    if isinstance(link, str):
        return registry_or_default(registry).interconnect(link)
    raise InputError(f"argument 'link' must be a registry interconnect id or an Interconnect, got {link!r}")


def link_bandwidth(
    link: InterconnectRef, basis: str = "per_direction", *, registry: Registry | None = None
) -> Bandwidth:
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
    entry = resolve_interconnect(link, registry=registry)
    if basis == "total":
        if entry.bandwidth_total is None:
            raise InputError(f"interconnect '{entry.id}' has no bandwidth_total in the registry; use 'per_direction'")
        return entry.bandwidth_total
    return entry.bandwidth


def link_latency(link: InterconnectRef, *, registry: Registry | None = None) -> Time:
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
    entry = resolve_interconnect(link, registry=registry)
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
    example={"message": "1.342177 GB", "bandwidth": "100 Gb/s", "latency": "0 s"},
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
    handoff of eq. 10 (:func:`calculator.memory.kv_handoff_time`, which it evaluates with one path) is
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
    example={"message": "8 MB", "devices": 8, "bandwidth": "450 GB/s", "latency": "0.5 us"},
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
    example={"message": "8 MB", "devices": 8, "bandwidth": "450 GB/s", "latency": "0.5 us"},
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
    example={"message": "8 MB", "devices": 8, "bandwidth": "450 GB/s", "latency": "0.5 us"},
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
    example={
        "message": "8 MB",
        "devices": 8,
        "bandwidth": "450 GB/s",
        "latency": "0.5 us",
        "bisection_bandwidth": "1800 GB/s",
    },
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


@checked(bisection_bandwidth="positive")
def collective_time(
    collective: str,
    message: Bytes,
    devices: Count,
    link: InterconnectRef,
    *,
    floor: Time = _ZERO_SECONDS,
    latency: Time | None = None,
    bandwidth_basis: str = "per_direction",
    bisection_bandwidth: Bandwidth | None = None,
    registry: Registry | None = None,
) -> Time:
    """Time of one collective over a registry interconnect.

    Parameters
    ----------
    collective : {"point_to_point", "allreduce", "allgather", "reduce_scatter", "alltoall"}
        The communication pattern.
    message : Quantity [information]
        Bytes, as each collective's formula defines them.
    devices : int
        Ranks (a whole number >= 1; ignored for point to point).
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
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

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
    bandwidth = link_bandwidth(link, bandwidth_basis, registry=registry)
    alpha = link_latency(link, registry=registry) if latency is None else Q_(latency, "s")
    size, start = Q_(message, "B"), Q_(floor, "s")
    if collective == "point_to_point":
        return point_to_point_time(size, bandwidth, alpha + start)
    if collective == "alltoall":
        bisection = (
            bandwidth * np.asarray(devices) / 2 if bisection_bandwidth is None else Q_(bisection_bandwidth, "B/s")
        )
        return alltoall_time(size, devices, bandwidth, alpha, bisection, start)
    function = {
        "allreduce": ring_allreduce_time,
        "allgather": ring_allgather_time,
        "reduce_scatter": ring_reduce_scatter_time,
    }[collective]
    return function(size, devices, bandwidth, alpha, start)
