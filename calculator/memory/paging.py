"""Fragmentation and paging (sections 10.7.2-10.7.3): reservation against pages, slot maps, paged blocks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked, count
from ..errors import InputError
from ..results import Result
from ..types import Count, Fraction, Number, Tokens
from ..units import shown
from ._common import _float

__all__ = [
    "ReservationComparison",
    "reservation_vs_paging",
    "pool_admission",
    "SlotMap",
    "slot_map",
    "PagedAllocation",
    "paged_allocation",
]


# ============================================================================================
# Fragmentation and paging (sections 10.7.2-10.7.3)


@dataclass(frozen=True, repr=False)
class ReservationComparison(Result):
    """Contiguous worst-case reservation against on-demand (paged) allocation of one pool."""

    reserved_sequences: Count
    paged_sequences: Count
    idle_reserved_tokens: Tokens
    reservation_waste: Fraction
    paged_waste: Fraction
    capacity_gain: Number


@checked(pool_tokens="positive_integer", reserved_tokens="positive_integer", used_tokens="positive_integer")
def reservation_vs_paging(
    pool_tokens: Tokens, reserved_tokens: Tokens, used_tokens: Tokens, block_size: Count = 1
) -> ReservationComparison:
    """How many sequences a pool holds under max-length reservation vs on-demand pages.

    Parameters
    ----------
    pool_tokens : int
        Token slots in the KV pool (pool bytes / KV bytes per token).
    reserved_tokens : int
        Slots a contiguous allocator reserves per sequence (its maximum length).
    used_tokens : int
        Slots a sequence actually fills (<= reserved).
    block_size : int, optional
        Page size of the on-demand allocator (1 = per-token, the hotel analogy).

    Returns
    -------
    ReservationComparison
        ``reserved_sequences = floor(pool / reserved)``; ``paged_sequences = floor(pool / pages)``
        with ``pages = ceil(used / b) b``; ``idle_reserved_tokens`` held but unused under
        reservation; ``reservation_waste = 1 - used / reserved`` (section 10.7.2's internal
        fragmentation); ``paged_waste`` = unused fraction of the last page;
        ``capacity_gain = paged / reserved`` sequences.

    Examples
    --------
    Systems Perspective 10.1 (100 lockers, up to 10 suitcases per guest, 1 each):

    >>> r = reservation_vs_paging(100, 10, 1)
    >>> r.reserved_sequences, r.paged_sequences, r.idle_reserved_tokens
    (10, 100, 90)
    """
    pool, reserved, used, blocks = pool_tokens, reserved_tokens, used_tokens, block_size
    if np.any(np.asarray(used) > reserved):
        raise InputError(
            f"reservation_vs_paging(): used_tokens ({_int(used)}) exceeds reserved_tokens ({_int(reserved)})"
        )
    pages = np.ceil(np.asarray(used) / blocks) * blocks
    held = np.floor_divide(pool, reserved)
    paged = np.floor_divide(pool, pages).astype(np.int64)
    return ReservationComparison(
        reserved_sequences=_int(held),
        paged_sequences=_int(paged),
        idle_reserved_tokens=_int(held * (np.asarray(reserved) - used)),
        reservation_waste=_float(1 - np.asarray(used) / reserved),
        paged_waste=_float(1 - np.asarray(used) / pages),
        capacity_gain=_float(
            np.divide(paged, held, out=np.full(np.broadcast(paged, held).shape, np.inf), where=held > 0)
        ),
    )


def _int(x: Any) -> Any:
    x = np.asarray(x).astype(np.int64)
    return int(x) if x.ndim == 0 else x


@checked(pool_tokens="nonnegative_integer", sequence_tokens="positive_integer")
def pool_admission(pool_tokens: Tokens, sequence_tokens: Tokens, block_size: Count = 1) -> int:
    """How many sequences of a queue, taken in order, a KV pool admits before the next one does not fit.

    Parameters
    ----------
    pool_tokens : int
        Token slots in the pool.
    sequence_tokens : sequence of int
        Slots each queued sequence needs: its maximum length under contiguous reservation, its
        current length under paging.
    block_size : int, optional
        Page size; each sequence holds ``ceil(tokens / b)`` whole pages.

    Returns
    -------
    int
        Length of the longest prefix of the queue whose (page-rounded) sizes sum to at most the pool.

    Examples
    --------
    A 1,000-slot pool, sequences of 100-400 tokens: reserving 512 slots each admits 1; 16-token pages admit 4.

    >>> lengths = [100, 250, 400, 130, 300]
    >>> pool_admission(1000, [512] * len(lengths)), pool_admission(1000, lengths, block_size=16)
    (1, 4)
    """
    for argument, value in (("pool_tokens", pool_tokens), ("block_size", block_size)):
        if np.ndim(value):
            raise InputError(f"pool_admission(): argument '{argument}' must be one number, got {shown(value)}")
    tokens = np.atleast_1d(sequence_tokens)
    held = np.cumsum(-(-tokens // block_size) * block_size)
    return int(np.searchsorted(held, pool_tokens, side="right"))


@dataclass(frozen=True, repr=False)
class SlotMap(Result):
    """A KV slot map: ``"A"`` used by sequence A, ``"a"`` reserved for A but unused, ``" "`` free.

    See :func:`slot_map`. ``admits(need)`` answers whether a new sequence fits.
    """

    slots: tuple[str, ...]
    used: int
    reserved_unused: int
    free: int
    largest_free_run: int
    internal_waste: float
    external_fragmentation: float

    def admits(self, need: int, paged: bool = False, block_size: int = 1) -> bool:
        """Whether a sequence needing ``need`` slots can be placed.

        A contiguous allocator needs a free run of ``need`` slots; a paged allocator needs
        ``ceil(need / block_size)`` free aligned blocks anywhere (Figure 10 (b) and (c)).
        """
        need = count("SlotMap.admits", "need", need)
        if not paged:
            return self.largest_free_run >= need
        size = count("SlotMap.admits", "block_size", block_size)
        free = np.array([s == " " for s in self.slots])
        whole = free[: len(free) // size * size].reshape(-1, size).all(axis=1)
        return int(whole.sum()) >= -(-need // size)


def slot_map(slots: str | Sequence[str]) -> SlotMap:
    """Fragmentation of a KV slot map written as in section 10.7.2 (``"[A][A][a][a][B][B][B][b]"``).

    Parameters
    ----------
    slots : str or sequence of str
        ``"[X]"`` cells (or one-character strings): an upper-case letter is a slot in use, a
        lower-case letter a slot reserved but unused, a blank a free slot.

    Returns
    -------
    SlotMap
        Counts, the largest contiguous free run, the internal waste (reserved-unused over all
        reserved slots) and the external fragmentation ``1 - largest_free_run / free``.

    Examples
    --------
    Section 10.7.2, time 2: four free slots, largest run two; a contiguous allocator cannot place a
    4-slot sequence, a paged one can.

    >>> m = slot_map("[ ][ ][C][C][ ][ ][D][D]")
    >>> m.free, m.largest_free_run, m.admits(4), m.admits(4, paged=True)
    (4, 2, False, True)
    """
    if not isinstance(slots, str | list | tuple):
        raise InputError(
            f"slot_map(): argument 'slots' must be text like '[A][a][ ]' or a list of cells, got {slots!r}"
        )
    cells = tuple(slots[1::3]) if isinstance(slots, str) else tuple(str(s) or " " for s in slots)
    if isinstance(slots, str) and "[" + "][".join(cells) + "]" != slots.strip():
        raise InputError(f"slot_map(): expected cells like '[A][a][ ]', got {slots!r}")
    if not cells or any(len(c) != 1 or not (c == " " or c.isalpha()) for c in cells):
        raise InputError(f"slot_map(): each slot must be a letter or a blank, got {cells!r}")
    free = np.array([c == " " for c in cells])
    used = sum(c.isupper() for c in cells)
    unused = sum(c.islower() for c in cells)
    edges = np.diff(np.concatenate([[0], free.astype(np.int8), [0]]))
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    largest = int(runs.max()) if runs.size else 0
    total_free = int(free.sum())
    return SlotMap(
        slots=cells,
        used=used,
        reserved_unused=unused,
        free=total_free,
        largest_free_run=largest,
        internal_waste=unused / (used + unused) if used + unused else 0.0,
        external_fragmentation=1 - largest / total_free if total_free else 0.0,
    )


@dataclass(frozen=True, repr=False)
class PagedAllocation(Result):
    """Pages of a sequence under paged KV allocation (see :func:`paged_allocation`)."""

    blocks: Count
    allocated_tokens: Tokens
    waste_tokens: Tokens
    waste_fraction: Fraction


@checked(context="positive_integer")
def paged_allocation(context: Tokens, block_size: Count = 16) -> PagedAllocation:
    """Blocks a sequence occupies under PagedAttention and the unused tail of its last block.

    Parameters
    ----------
    context : int or array of int
        Tokens in the sequence.
    block_size : int, optional
        Tokens per block (16 is the default of the PagedAttention paper, section 10.7.3).

    Returns
    -------
    PagedAllocation
        ``blocks = ceil(S / b)``, ``allocated_tokens = blocks b``, ``waste_tokens`` (at most
        ``b - 1``) and ``waste_fraction`` of the allocation.

    Examples
    --------
    >>> p = paged_allocation(100)
    >>> p.blocks, p.waste_tokens
    (7, 12)
    """
    tokens = np.asarray(context)
    blocks = -(-tokens // block_size)
    allocated = blocks * block_size
    return PagedAllocation(
        blocks=_int(blocks),
        allocated_tokens=_int(allocated),
        waste_tokens=_int(allocated - tokens),
        waste_fraction=_float((allocated - tokens) / allocated),
    )
