"""Recommendation embeddings (Lighthouse 10.1): table bytes, tiered placement and sharded lookup time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked, one
from ..errors import InputError
from ..formula import formula, var
from ..results import Result, plain
from ..types import Bandwidth, Bytes, Count, Fraction, Number, Time
from ..units import Q_
from ._common import _ZERO_BYTES

__all__ = [
    "embedding_table_bytes",
    "resident_bytes_per_entity",
    "EmbeddingTiers",
    "tiered_embedding_placement",
    "EmbeddingLookup",
    "embedding_lookup_time",
]


# --------------------------------------------------------------------------------------------
# Recommendation embeddings (Lighthouse 10.1)


@formula(
    result=var("B", r"M_{\mathrm{emb}}", description="bytes of a dense embedding table"),
    reference="Lighthouse 10.1 (§10.10.5)",
    entities=var("", "N", description="rows (entities)"),
    dimension=var("", "d", "positive_integer", "embedding dimension"),
    bytes_per_element=var("B", "s", description="bytes per element"),
    example={"entities": 1e13, "dimension": 128, "bytes_per_element": "1 B"},
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
    example={"resident_budget": "100 TB", "entities": 1e13},
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
    hot_bytes: Bytes
    warm_bytes: Bytes
    cold_bytes: Bytes
    total_bytes: Bytes
    warm_slice_bytes: Bytes
    fits: bool | None
    max_admitted_entities: float | None


@checked(admitted_entities=one("positive"), vector_bytes="positive", hot_fraction=one(), warm_fraction=one())
def tiered_embedding_placement(
    admitted_entities: Number,
    vector_bytes: Bytes,
    hot_replicas: Count,
    hot_fraction: Fraction = 0.01,
    warm_fraction: Fraction = 0.10,
    warm_shards: Count = 8,
    resident_budget: Bytes | None = None,
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
    admitted, hot_fraction, warm_fraction = float(admitted_entities), float(hot_fraction), float(warm_fraction)
    vector_bytes, hot_replicas, warm_shards = plain(vector_bytes), plain(hot_replicas), plain(warm_shards)
    if hot_fraction + warm_fraction > 1:
        raise InputError(f"{function}(): hot_fraction + warm_fraction must be <= 1, got {hot_fraction + warm_fraction}")
    cold_fraction = 1 - hot_fraction - warm_fraction
    hot, warm, cold = (admitted * f for f in (hot_fraction, warm_fraction, cold_fraction))
    factor = hot_fraction * hot_replicas + warm_fraction + cold_fraction
    total = Q_(admitted * factor * vector_bytes, "B").to("TB")
    fits = max_admitted = None
    if resident_budget is not None:
        fits = bool(total.m_as("B") <= resident_budget)
        max_admitted = float(resident_budget / (factor * vector_bytes))
    return EmbeddingTiers(
        hot_entities=hot,
        warm_entities=warm,
        cold_entities=cold,
        hot_bytes=Q_(hot * hot_replicas * vector_bytes, "B").to("TB"),
        warm_bytes=Q_(warm * vector_bytes, "B").to("TB"),
        cold_bytes=Q_(cold * vector_bytes, "B").to("TB"),
        total_bytes=total,
        warm_slice_bytes=Q_(vector_bytes / warm_shards, "B"),
        fits=fits,
        max_admitted_entities=max_admitted,
    )


#: Lookup accumulation window of Lighthouse 10.1 (§10.10.5).
DEFAULT_BATCHING_WINDOW = Q_(1, "ms")


@dataclass(frozen=True, repr=False)
class EmbeddingLookup(Result):
    """Sequential per-lookup RPCs vs one batched, deduplicated, shard-grouped dispatch wave."""

    sequential_time: Time
    sequential_waves: int
    batched_time: Time
    batched_rpcs: int
    lookups_per_shard: int
    speedup: float


@checked(
    lookups=one(),
    rpc_time=one("positive"),
    shards=one(),
    batching_window=one(),
    unique_fraction=one(),
    vector_bytes=one(),
    shard_bandwidth=one("positive"),
)
def embedding_lookup_time(
    lookups: Count,
    rpc_time: Time,
    shards: Count,
    batching_window: Time = DEFAULT_BATCHING_WINDOW,
    unique_fraction: Fraction = 1.0,
    vector_bytes: Bytes = _ZERO_BYTES,
    shard_bandwidth: Bandwidth | None = None,
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
    count, shard_count = int(lookups), int(shards)
    rpc_time, batching_window, vector_bytes = plain(rpc_time), plain(batching_window), plain(vector_bytes)
    shard_bandwidth = None if shard_bandwidth is None else plain(shard_bandwidth)
    if unique_fraction <= 0:
        raise InputError(f"{function}(): argument 'unique_fraction' must be > 0, got {unique_fraction}")
    unique = max(1, int(np.ceil(count * unique_fraction - 1e-9)))
    per_shard = -(-unique // shard_count)
    transfer = 0.0 if shard_bandwidth is None else per_shard * vector_bytes / shard_bandwidth
    sequential = Q_(count * rpc_time, "s").to("ms")
    batched = Q_(batching_window + rpc_time + transfer, "s").to("ms")
    return EmbeddingLookup(
        sequential_time=sequential,
        sequential_waves=count,
        batched_time=batched,
        batched_rpcs=min(shard_count, unique),
        lookups_per_shard=per_shard,
        speedup=float((sequential / batched).m_as("")),
    )
