"""The KV budget with headroom (section 10.7.8) and the memory hierarchy below HBM (Example 10.4)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked, magnitude
from ..formula import formula, var
from ..results import Result, as_count, floor_whole
from ..types import Bytes, BytesPerToken, Count, Fraction, Time, Tokens
from ..units import Q_
from .fit import max_batch_numeric
from .weights import NO_BYTES

__all__ = [
    "NO_TIME",
    "kv_pool_size",
    "KvBudget",
    "kv_budget",
    "MemoryTier",
    "TierRetention",
    "tiered_retention",
    "kv_handoff_time",
]

#: Default restore latency of a memory tier (a module-level constant, not a call per default).
NO_TIME = Q_(0, "s")


# ============================================================================================
# KV budget with headroom (10.7.8) and the memory hierarchy (Example 10.4)


@formula(
    result=var("B", r"M_{\mathrm{pool}}", "any", "managed KV pool"),
    reference="section 10.7.8 (KV pool size = 0.9 x available)",
    total=var("B", r"M_{\mathrm{HBM}}", description="device memory"),
    weights=var("B", r"M_{W}", "nonnegative", "weights"),
    activations=var("B", r"M_{\mathrm{act}}", "nonnegative", "activation memory"),
    overhead=var("B", r"M_{\mathrm{ovh}}", "nonnegative", "runtime overhead"),
    headroom=var("", "h", "fraction_open", "safety headroom left unused"),
    example={"total": "80 GB", "weights": "35 GB", "activations": "3 GB", "overhead": "2 GB"},
)
def kv_pool_size(total, weights, activations, overhead, headroom=0.1):
    r"""Managed KV pool: memory left after weights, activations and overhead, less a headroom.

    Parameters
    ----------
    total, weights, activations, overhead : Quantity [information]
    headroom : float, optional
        Fraction of the remainder kept free (0.1 in section 10.7.8).

    Returns
    -------
    Quantity [information]
        Negative when the fixed claims already exceed the memory (see :func:`kv_budget`).

    Notes
    -----
    .. math:: M_{\mathrm{pool}} = (1 - h)\,(M_{\mathrm{HBM}} - M_W - M_{\mathrm{act}} - M_{\mathrm{ovh}})

    Examples
    --------
    >>> kv_pool_size(Q_(80, "GB"), Q_(35, "GB"), Q_(3, "GB"), Q_(2, "GB")).to("GB")
    <Quantity(36.0, 'gigabyte')>
    """
    return (1 - headroom) * (total - weights - activations - overhead)


@dataclass(frozen=True, repr=False)
class KvBudget(Result):
    """Section 10.7.8's capacity accounting (see :func:`kv_budget`)."""

    available: Bytes
    pool: Bytes
    max_concurrent: Count
    fits: bool | np.ndarray
    missing: Bytes


@checked(total="positive", kv_per_token="positive", sequence_length="positive_integer", headroom="fraction_open")
def kv_budget(
    total: Bytes,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    sequence_length: Tokens,
    activations: Bytes = NO_BYTES,
    overhead: Bytes = NO_BYTES,
    headroom: Fraction = 0.1,
) -> KvBudget:
    """KV pool with headroom and the number of concurrent sequences it holds (section 10.7.8).

    Parameters
    ----------
    total, weights, activations, overhead : Quantity [information]
    kv_per_token : Quantity [information / token]
    sequence_length : int
        Tokens budgeted per sequence: the average length gives the chapter's estimate; the maximum
        admitted length gives a bound that reserves room for growth.
    headroom : float, optional
        Fraction of the remainder kept free, in [0, 1) (0.1 in section 10.7.8).

    Returns
    -------
    KvBudget
        ``available`` memory, the ``pool``, ``max_concurrent`` sequences (never negative),
        ``fits`` (False if the fixed claims exceed the memory) and ``missing`` bytes.

    Examples
    --------
    >>> b = kv_budget(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), 4096)
    >>> b.pool.to("GB"), b.max_concurrent
    (<Quantity(40.5, 'gigabyte')>, 30)
    """
    pool = kv_pool_size.numeric(
        total=total, weights=weights, activations=activations, overhead=overhead, headroom=headroom
    )
    available = pool / (1 - headroom)
    return KvBudget(
        available=Q_(available, "B"),
        pool=Q_(pool, "B"),
        max_concurrent=max_batch_numeric(pool, 0.0, kv_per_token, sequence_length),
        fits=_scalar_bool(available >= 0),
        missing=Q_(np.maximum(-available, 0.0), "B"),
    )


def _scalar_bool(x: Any) -> Any:
    x = np.asarray(x)
    return bool(x) if x.ndim == 0 else x


@dataclass(frozen=True)
class MemoryTier:
    """A memory tier below HBM that can hold swapped-out KV pages (CPU DRAM, NVMe SSD).

    Attributes
    ----------
    name : str
    capacity : Quantity [information]
        Bytes available to swapped KV state.
    bandwidth : Quantity [information / time], optional
        Effective restore bandwidth back to HBM.
    latency : Quantity [time], optional
        Per-restore startup (setup and queueing) time.
    """

    name: str
    capacity: Any
    bandwidth: Any = None
    latency: Any = NO_TIME


@dataclass(frozen=True, repr=False)
class TierRetention(Result):
    """Sequences retained across memory tiers (see :func:`tiered_retention`)."""

    active: int
    per_tier: Mapping[str, int]
    retained: int
    restore_time: Mapping[str, Time]


@checked(active_sequences="nonnegative_integer", sequence_bytes="positive")
def tiered_retention(active_sequences: Count, sequence_bytes: Bytes, tiers: Iterable[MemoryTier]) -> TierRetention:
    """Retained sequence capacity of a multi-tier KV hierarchy (Example 10.4).

    Parameters
    ----------
    active_sequences : int
        Sequences HBM holds (the active, HBM-resident set; it does not grow).
    sequence_bytes : Quantity [information]
        KV bytes of one swapped-out sequence.
    tiers : iterable of MemoryTier
        Lower tiers in order (CPU DRAM, NVMe).

    Returns
    -------
    TierRetention
        ``retained = active + sum(floor(tier capacity / sequence bytes))``, and for each tier with
        a bandwidth the time to restore one sequence, ``latency + bytes / bandwidth`` (the transfer
        model of equation 10, :func:`kv_handoff_time`).

    Examples
    --------
    >>> t = tiered_retention(50, Q_(1.6, "GB"), [MemoryTier("dram", Q_(720, "GB"), Q_(25, "GB/s"))])
    >>> t.retained, t.restore_time["dram"].to("ms")
    (500, <Quantity(64.0, 'millisecond')>)
    """
    active = as_count(active_sequences)
    size = sequence_bytes
    per_tier: dict[str, int] = {}
    restore: dict[str, Any] = {}
    for tier in tiers:
        held = magnitude("tiered_retention", f"tiers['{tier.name}'].capacity", tier.capacity, "B")
        per_tier[tier.name] = int(floor_whole(held / size))
        if tier.bandwidth is not None:
            restore[tier.name] = kv_handoff_time(Q_(size, "B"), tier.bandwidth, tier.latency)
    return TierRetention(
        active=active, per_tier=per_tier, retained=active + sum(per_tier.values()), restore_time=restore
    )


@formula(
    result=var("s", r"T_{\mathrm{handoff}}", "nonnegative", "KV-cache transfer time"),
    reference="Eq. 10, section 10.8.3",
    kv_bytes=var("B", r"M_{\mathrm{KV}}", "nonnegative", "KV bytes to move"),
    link_bandwidth=var("B/s", r"BW_{\mathrm{link}}", description="usable bandwidth of one path"),
    startup_latency=var("s", r"\alpha", "nonnegative", "setup and queueing time"),
    parallel_links=var("", "n", "positive_integer", "independent paths used at once"),
    example={"kv_bytes": "42.95 GB", "link_bandwidth": "450 GB/s"},
)
def kv_handoff_time(kv_bytes, link_bandwidth, startup_latency=0, parallel_links=1):
    r"""Time to hand a KV cache from the prefill pool to the decode pool (Eq. 10).

    Parameters
    ----------
    kv_bytes : Quantity [information]
    link_bandwidth : Quantity [information / time]
        Usable bandwidth of one path (per direction).
    startup_latency : Quantity [time], optional
        Setup and queueing at the operating point (not a fixed network latency).
    parallel_links : int, optional
        Paths used in parallel; spreading over a tensor-parallel group divides the payload time only
        when each device has its own path (section 10.8.3).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{handoff}} = \alpha + \frac{M_{\mathrm{KV}}}{n \, BW_{\mathrm{link}}}

    Examples
    --------
    Section 10.8.3: a 128K-token request of the GQA model (42.9 GB) over one 450 GB/s NVLink direction:

    >>> kv_handoff_time(Q_(42.95, "GB"), Q_(450, "GB/s")).to("ms")
    <Quantity(95.4444444, 'millisecond')>
    """
    return startup_latency + kv_bytes / (parallel_links * link_bandwidth)
