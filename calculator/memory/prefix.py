"""Prefix caching (section 10.7.4, Napkin Math 10.6, Table 10): shared prefix blocks and their memory."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .._support import checked, count
from ..errors import InputError
from ..formula import ceil, floor, formula, minimum, var
from ..results import Result
from ..types import Bytes, BytesPerToken, Count, Fraction, Number, Probability, Tokens
from ..units import Q_
from ._common import _float

__all__ = [
    "prefix_cache_tokens",
    "PrefixCacheMemory",
    "prefix_cache_memory",
    "shared_block_usage",
]


# ============================================================================================
# Prefix caching (section 10.7.4)


@formula(
    result=var("", r"T_{\mathrm{KV}}", "nonnegative", "token slots held by the population"),
    reference="Napkin Math 10.6, section 10.7.4 (block sharing with copy-on-write)",
    users=var("", "N", "positive", "concurrent requests"),
    prefix_tokens=var("", "P", "nonnegative", "shared prefix tokens"),
    unique_tokens=var("", "U", "nonnegative", "private tokens per request"),
    hit_rate=var("", "h", "probability", "share of requests that reuse the cached prefix"),
    block_size=var("", "b", "positive_integer", "tokens per KV block"),
    example={"users": 1000, "prefix_tokens": 2000, "unique_tokens": 500},
)
def prefix_cache_tokens(users, prefix_tokens, unique_tokens, hit_rate=1, block_size=1):
    r"""Token slots held by ``N`` requests that share a ``P``-token prefix at hit rate ``h``.

    Parameters
    ----------
    users : float
        Concurrent requests ``N``.
    prefix_tokens : float
        Common prefix ``P`` (system prompt, shared document).
    unique_tokens : float
        Private tokens per request ``U`` (its own suffix and response).
    hit_rate : float, optional
        Fraction of requests whose prefix matches the cached one (1 in Napkin Math 10.6).
    block_size : int, optional
        KV block size ``b``; only whole blocks are shared, and a prefix ending inside a block is
        copied on write into every request's private blocks.

    Returns
    -------
    float
        Token slots (multiply by bytes per token for memory).

    Notes
    -----
    With :math:`P_s = \lfloor P/b \rfloor b` shared, the rest :math:`r = P - P_s` private,
    :math:`\lceil x \rceil_b = \lceil x/b \rceil b` and :math:`n = hN` requests hitting:

    .. math:: T = \min(n, 1)\,P_s + n \lceil r + U \rceil_b + (N - n) \lceil P + U \rceil_b

    For :math:`b = 1`, :math:`h = 1` this is the chapter's :math:`P + N U`; for :math:`h = 0` it is
    the unshared :math:`N (P + U)`.

    Examples
    --------
    Napkin Math 10.6: 1,000 users, a 2,000-token prompt, 500-token responses:

    >>> prefix_cache_tokens(1000, 2000, 500), prefix_cache_tokens(1000, 2000, 500, 0)
    (502000.0, 2500000.0)
    """
    shared = floor(prefix_tokens / block_size) * block_size
    tail = prefix_tokens - shared
    hits = hit_rate * users
    per_hit = ceil((tail + unique_tokens) / block_size) * block_size
    per_miss = ceil((prefix_tokens + unique_tokens) / block_size) * block_size
    return minimum(hits, 1) * shared + hits * per_hit + (users - hits) * per_miss


@dataclass(frozen=True, repr=False)
class PrefixCacheMemory(Result):
    """KV memory with and without prefix sharing (see :func:`prefix_cache_memory`)."""

    tokens_without: Tokens
    tokens_with: Tokens
    bytes_without: Bytes
    bytes_with: Bytes
    reduction: Fraction
    capacity_ratio: Number


@checked(prefix_tokens="nonnegative_integer", unique_tokens="nonnegative_integer", kv_per_token="positive")
def prefix_cache_memory(
    users: Count,
    prefix_tokens: Tokens,
    unique_tokens: Tokens,
    kv_per_token: BytesPerToken,
    hit_rate: Probability = 1.0,
    block_size: Count = 1,
) -> PrefixCacheMemory:
    """Prefix caching: KV memory of a request population with and without a shared prefix.

    Parameters
    ----------
    users, prefix_tokens, unique_tokens, hit_rate, block_size
        As for :func:`prefix_cache_tokens`.
    kv_per_token : Quantity [information / token]

    Returns
    -------
    PrefixCacheMemory
        Token slots and bytes without and with sharing, the ``reduction`` (``1 - with/without``,
        Table 10's "memory savings") and the ``capacity_ratio`` (``without/with``).

    Notes
    -----
    Napkin Math 10.6 and Table 10. Sharing needs the same token prefix, model and adapter, and
    tenant-permitted reuse (section 10.7.4); the hit rate is the fraction of requests meeting that.

    Examples
    --------
    >>> p = prefix_cache_memory(1000, 2000, 500, Q_(2_621_440, "B/token"))
    >>> p.bytes_without.to("TB"), round(p.reduction, 4)
    (<Quantity(6.5536, 'terabyte')>, 0.7992)
    """
    args = {"users": users, "prefix_tokens": prefix_tokens, "unique_tokens": unique_tokens, "block_size": block_size}
    without = prefix_cache_tokens.numeric(**args, hit_rate=0.0)
    with_sharing = prefix_cache_tokens.numeric(**args, hit_rate=hit_rate)
    if np.any(np.asarray(without) == 0):
        raise InputError("prefix_cache_memory(): the requests hold no tokens (prefix_tokens + unique_tokens = 0)")
    return PrefixCacheMemory(
        tokens_without=_float(without),
        tokens_with=_float(with_sharing),
        bytes_without=Q_(_float(without * kv_per_token), "B"),
        bytes_with=Q_(_float(with_sharing * kv_per_token), "B"),
        reduction=_float(np.maximum(1 - with_sharing / without, 0.0)),  # >= 0 up to rounding
        capacity_ratio=_float(without / with_sharing),
    )


def shared_block_usage(block_tables: Iterable[Sequence[int]]) -> tuple[int, int]:
    """Logical and physical blocks of a set of block tables that may share physical blocks.

    Parameters
    ----------
    block_tables : iterable of sequences of int
        Each request's page table (physical block ids, Figure 11).

    Returns
    -------
    (int, int)
        Blocks the requests would hold without sharing, and distinct physical blocks with it.

    Examples
    --------
    Section 10.7.4's three page tables sharing blocks 0-5:

    >>> shared_block_usage([[0, 1, 2, 3, 4, 5, 10, 11], [0, 1, 2, 3, 4, 5, 12, 13, 14], [0, 1, 2, 3, 4, 5, 15]])
    (24, 12)
    """
    if isinstance(block_tables, str) or not isinstance(block_tables, Iterable):
        raise InputError("shared_block_usage(): argument 'block_tables' must be a list of lists of block numbers")
    name = "shared_block_usage"
    tables = [
        np.atleast_1d(count(name, "block_tables", t, minimum=0)).tolist() if np.size(t) else [] for t in block_tables
    ]
    return sum(len(t) for t in tables), len({b for t in tables for b in t})
