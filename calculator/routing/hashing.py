"""Consistent hashing (section 10.11.6) and KV-cache migration (section 10.11.8).

The fraction of keys that move when a server joins or leaves, a consistent-hash ring with virtual
nodes, and the transfer-or-rebuild decision for a session's KV cache when it changes replica.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import checked, instance, random_seed
from ..errors import InputError, UnitsError
from ..formula import check_domain, formula, var
from ..phases import kv_handoff_time
from ..results import Result
from ..types import Bytes, BytesPerToken, Compute, ComputeRate, Count, Fraction, InterconnectRef, Number, Time, Tokens
from ..units import Q_, shown, ureg
from .tails import _check_int

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "remap_fraction_on_add",
    "remap_fraction_on_remove",
    "ConsistentHashRing",
    "remapped_fraction",
    "KvMigration",
    "kv_migration",
]


_ZERO_SECONDS = Q_(0.0, "s")


# --------------------------------------------------------------------------------------------
# Consistent hashing (section 10.11.6)


@formula(
    result=var("", "f", "probability", "expected fraction of keys that move"),
    reference="section 10.11.6",
    servers=var("", "N", "positive_integer", "servers on the ring before the change"),
    example={"servers": 10},
)
def remap_fraction_on_add(servers):
    r"""Expected fraction of keys that move when one server joins a balanced ring of ``servers``.

    Parameters
    ----------
    servers : int
        Servers before the change.

    Returns
    -------
    float

    Notes
    -----
    .. math:: f = \frac{1}{N + 1}

    With balanced equal-capacity assignments and uniform keys (§10.11.6). Virtual nodes bring a
    real ring close to it; see :class:`ConsistentHashRing`.

    Examples
    --------
    >>> round(remap_fraction_on_add(10), 4)
    0.0909
    """
    return 1 / (servers + 1)


@formula(
    result=var("", "f", "probability", "expected fraction of keys that move"),
    reference="section 10.11.6",
    servers=var("", "N", "positive_integer", "servers on the ring before the change"),
    example={"servers": 10},
)
def remap_fraction_on_remove(servers):
    r"""Expected fraction of keys that move when one of ``servers`` leaves a balanced ring.

    Parameters
    ----------
    servers : int
        Servers before the change.

    Returns
    -------
    float

    Notes
    -----
    .. math:: f = \frac{1}{N}

    Examples
    --------
    >>> remap_fraction_on_remove(10)
    0.1
    """
    return 1 / servers


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def _mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a fast, well-mixed 64-bit hash of integer keys (vectorized)."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class ConsistentHashRing:
    """A consistent-hash ring with virtual nodes (Karger et al. 1997; §10.11.6).

    Each server is placed at ``virtual_nodes`` pseudo-random points of a 64-bit ring; a key goes to the
    first server point clockwise from the key's hash. The ring is immutable: :meth:`with_server` and
    :meth:`without_server` return new rings, so the keys that move on a membership change can be
    measured with :func:`remapped_fraction`.

    Parameters
    ----------
    servers : iterable of str
        Server names (unique, at least one).
    virtual_nodes : int
        Points per server; more points give more even ranges (the relative spread of a server's share
        falls roughly as one over the square root of the points).
    seed : int
        Salt of the point hashes (blake2b), so different rings are independent.

    Examples
    --------
    >>> ring = ConsistentHashRing([f"s{i}" for i in range(10)], virtual_nodes=200)
    >>> keys = np.arange(100_000)
    >>> round(remapped_fraction(ring, ring.with_server("s10"), keys), 2)  # 1/11 = 0.091 expected
    0.09
    """

    def __init__(self, servers: Iterable[str], virtual_nodes: int = 100, seed: int = 0) -> None:
        names = tuple(str(s) for s in servers)
        if not names:
            raise InputError("ConsistentHashRing(): argument 'servers' must name at least one server")
        if len(set(names)) != len(names):
            raise InputError("ConsistentHashRing(): argument 'servers' has duplicate names")
        self.servers = names
        self.virtual_nodes = int(_check_int("ConsistentHashRing", "virtual_nodes", virtual_nodes))
        self.seed = random_seed("ConsistentHashRing", "seed", seed)
        points = np.array(
            [_hash64(f"{self.seed}:{name}#{i}") for name in names for i in range(self.virtual_nodes)],
            dtype=np.uint64,
        )
        owners = np.repeat(np.arange(len(names)), self.virtual_nodes)
        order = np.argsort(points, kind="stable")
        self._points = points[order]
        self._owners = owners[order]

    def __repr__(self) -> str:
        return f"<ConsistentHashRing {len(self.servers)} servers x {self.virtual_nodes} virtual nodes>"

    def key_hashes(self, keys: Any) -> np.ndarray:
        """64-bit ring positions of keys: integers are mixed (vectorized), strings hashed with blake2b."""
        array = np.asarray(keys)
        if array.dtype.kind in "iu":
            return _mix64(array.ravel()).reshape(array.shape)
        return np.array([_hash64(f"key:{k}") for k in array.ravel()], dtype=np.uint64).reshape(array.shape)

    def lookup(self, keys: Any) -> np.ndarray:
        """Server name of each key (the first server point clockwise from the key's hash)."""
        return np.asarray(self.servers, dtype=object)[self.owner_indices(keys)]

    def owner_indices(self, keys: Any) -> np.ndarray:
        """Index into :attr:`servers` of each key's owner."""
        slot = np.searchsorted(self._points, self.key_hashes(keys), side="left")
        return self._owners[slot % self._points.size]

    def load_shares(self, keys: Any) -> dict[str, float]:
        """Fraction of ``keys`` owned by each server."""
        counts = np.bincount(np.ravel(self.owner_indices(keys)), minlength=len(self.servers))
        return dict(zip(self.servers, (counts / counts.sum()).tolist(), strict=True))

    def with_server(self, name: str) -> ConsistentHashRing:
        """A new ring with one more server."""
        if name in self.servers:
            raise InputError(f"ConsistentHashRing.with_server(): server {name!r} is already on the ring")
        return ConsistentHashRing((*self.servers, name), self.virtual_nodes, self.seed)

    def without_server(self, name: str) -> ConsistentHashRing:
        """A new ring without ``name``."""
        if name not in self.servers:
            raise InputError(f"ConsistentHashRing.without_server(): server {name!r} is not on the ring")
        if len(self.servers) == 1:
            raise InputError("ConsistentHashRing.without_server(): cannot remove the last server")
        return ConsistentHashRing((s for s in self.servers if s != name), self.virtual_nodes, self.seed)


def remapped_fraction(before: ConsistentHashRing, after: ConsistentHashRing, keys: Any) -> float:
    """Fraction of ``keys`` whose server differs between two rings (measured, not assumed).

    Parameters
    ----------
    before, after : ConsistentHashRing
        The ring before and after a membership change.
    keys : array of int or sequence of str
        Routing keys (session or user ids) to compare: at least one (the fraction of no keys is undefined).

    Returns
    -------
    float

    Examples
    --------
    >>> ring = ConsistentHashRing(["a", "b", "c", "d"], virtual_nodes=300)
    >>> 0.2 < remapped_fraction(ring, ring.without_server("d"), np.arange(50_000)) < 0.3
    True
    """
    instance("remapped_fraction", "before", before, ConsistentHashRing, "a ConsistentHashRing")
    instance("remapped_fraction", "after", after, ConsistentHashRing, "a ConsistentHashRing")
    if keys is None or np.size(keys) == 0:
        raise InputError(f"remapped_fraction(): argument 'keys' must list at least one key, got {shown(keys)}")
    return float(np.mean(before.lookup(keys) != after.lookup(keys)))


# --------------------------------------------------------------------------------------------
# KV-cache migration (section 10.11.8)


@dataclass(frozen=True, repr=False)
class KvMigration(Result):
    """Transfer-or-rebuild comparison for moving one session's KV cache to another shard group."""

    cache_bytes: Bytes
    bytes_per_device: Bytes
    shard_transfer_time: Time
    transfer_time: Time
    prefill_flops: Compute
    rebuild_time: Time
    decision: str
    reason: str


@checked(kv_bytes_per_token="positive", context_tokens="positive", parameters="positive", peak_throughput="positive")
def kv_migration(
    kv_bytes_per_token: BytesPerToken,
    context_tokens: Tokens,
    parameters: Number,
    tensor_parallel: Count,
    link: InterconnectRef,
    peak_throughput: ComputeRate,
    utilization: Fraction,
    latency: Time | None = None,
    concurrent_links: Count = 1,
    bandwidth_basis: str = "per_direction",
    source_available: bool = True,
    *,
    registry: Registry | None = None,
) -> KvMigration:
    r"""Decide between sending a session's KV cache over the network and re-running its prefill.

    Parameters
    ----------
    kv_bytes_per_token : Quantity [information / token]
        KV bytes per token (:func:`calculator.memory.kv_bytes_per_token`).
    context_tokens : Quantity [token]
        Tokens of conversation state.
    parameters : float
        Model parameters (prefill costs about :math:`2P` FLOPs per token).
    tensor_parallel : int
        Devices of the destination group; each holds :math:`1/t` of the cache and runs the prefill.
    link : Quantity [information / time], str or Interconnect
        Network bandwidth of one link (a quantity), or a registry link.
    peak_throughput : Quantity [compute / time]
        Peak dense throughput of one device at the serving precision.
    utilization : float
        Achieved fraction of peak during the rebuild prefill.
    latency : Quantity [time], optional
        Startup latency of a transfer; defaults to the registry link's (zero for a bare bandwidth, as
        the chapter's estimate).
    concurrent_links : int
        Links used in parallel, up to one per device; each carries its devices' shards.
    bandwidth_basis : {"per_direction", "total"}
        Basis for a registry link's bandwidth.
    source_available : bool
        ``False`` after an unrecoverable failure: only rebuild from history is possible (§10.11.8).
    registry : Registry, optional
        Where a link id resolves (default: the packaged registry).

    Returns
    -------
    KvMigration
        Cache bytes, bytes per device, one shard's transfer time, the transfer time with the given
        links, prefill FLOPs, rebuild time and the ``decision`` (``"transfer"`` or ``"rebuild"``) with
        its reason.

    Notes
    -----
    .. math:: T_{\mathrm{xfer}} = \alpha + \frac{m_{\mathrm{tok}} N}{\min(k, t)\,\beta}, \qquad
              T_{\mathrm{rebuild}} = \frac{2 P N}{t \, R_{\mathrm{peak}} \, u}

    §10.11.8: transfer if the bandwidth-only estimate beats the prefill time. The transfer is
    eq. 10's handoff (:func:`calculator.memory.kv_handoff_time`). Both grow
    linearly with context in this approximation; long-context attention adds rebuild work it omits,
    and shared bottlenecks, cache conversion and destination queueing can flip the decision.

    Examples
    --------
    The chapter's Llama-3-70B, 4,096 tokens, TP 8, 100 Gb/s, 40 % of a 989 TFLOP/s H100:

    >>> m = kv_migration(Q_(327680, "B/token"), Q_(4096, "token"), 7.1e10, 8, Q_(100, "Gb/s"),
    ...                  Q_(989, "TFLOP/s"), 0.4)
    >>> round(m.transfer_time.m_as("ms")), round(m.rebuild_time.m_as("ms")), m.decision
    (107, 184, 'transfer')
    """
    function = "kv_migration"
    for name, value in (
        ("kv_bytes_per_token", kv_bytes_per_token),
        ("context_tokens", context_tokens),
        ("parameters", parameters),
        ("tensor_parallel", tensor_parallel),
        ("peak_throughput", peak_throughput),
        ("utilization", utilization),
        ("latency", latency),
        ("concurrent_links", concurrent_links),
    ):
        if value is not None and np.ndim(value):
            raise InputError(f"{function}(): argument '{name}' must be one number, got {shown(value)}")
    if utilization <= 0:
        raise InputError(f"{function}(): argument 'utilization' must be > 0, got {utilization}")
    degree, links = int(tensor_parallel), int(concurrent_links)
    if isinstance(link, ureg.Quantity):
        if link.dimensionality != Q_(1, "B/s").dimensionality:
            raise UnitsError(f"{function}(): argument 'link' needs a bandwidth (for example GB/s), got {link:~P}")
        bandwidth = link
        alpha = _ZERO_SECONDS if latency is None else Q_(latency, "s")
    else:
        from ..parallelism import link_bandwidth, resolve_interconnect

        entry = resolve_interconnect(link, registry=registry)
        bandwidth = link_bandwidth(entry, bandwidth_basis, registry=registry)
        alpha = Q_(latency, "s") if latency is not None else (entry.startup_latency or _ZERO_SECONDS)
    check_domain(function, "link", bandwidth.m_as("B/s"), "positive")
    cache = Q_(kv_bytes_per_token * context_tokens, "B").to("GB")
    per_device = (cache / degree).to("MB")
    shard = kv_handoff_time(per_device, bandwidth, alpha).to("ms")
    transfer = kv_handoff_time(cache, bandwidth, alpha, min(links, degree)).to("ms")
    flops = Q_(2 * parameters * context_tokens, "FLOP")
    rebuild = Q_(flops.m_as("FLOP") / (degree * peak_throughput * utilization), "s").to("ms")
    if not source_available:
        decision, reason = "rebuild", "no reachable source or saved copy: rebuild from authoritative history"
    elif transfer < rebuild:
        decision, reason = "transfer", f"transfer {transfer:.3g~P} < rebuild {rebuild:.3g~P}"
    else:
        decision, reason = "rebuild", f"rebuild {rebuild:.3g~P} <= transfer {transfer:.3g~P}"
    return KvMigration(
        cache_bytes=cache,
        bytes_per_device=per_device,
        shard_transfer_time=shard,
        transfer_time=transfer,
        prefill_flops=flops,
        rebuild_time=rebuild,
        decision=decision,
        reason=reason,
    )
