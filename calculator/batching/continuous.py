"""Static batching waste (sections 10.6.4-10.6.5, Eq. 4) and continuous batching (Napkin Math 10.3, Table 7)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import arg, checked, one
from ..errors import InputError
from ..formula import formula, var
from ..results import Result, plain
from ..types import Count, Fraction, Number, Time
from ..units import Q_

__all__ = [
    "padding_waste_fraction",
    "padding_waste",
    "StaticBatchAccounting",
    "static_batch_accounting",
    "SlotTimeline",
    "slot_timeline",
    "continuous_batching_ceiling",
    "speedup_from_waste",
    "effective_waste",
    "ContinuousBatchingScenario",
    "TABLE_7",
]


# --------------------------------------------------------------------------------------------
# 10.6.4-10.6.5 Static batching waste and continuous batching


@formula(
    result=var("", "W", "fraction_open", "fraction of slot-iterations left idle by fixed membership"),
    reference="Eq. 4, section 10.6.5",
    mean_length=var("", r"\bar{L}", "positive", "mean output length in the batch"),
    max_length=var("", r"L_{\max}", "positive", "longest output length in the batch"),
    example={"mean_length": 125, "max_length": 200},
)
def padding_waste_fraction(mean_length, max_length):
    r"""Padding waste of a static batch from its mean and longest output lengths (Eq. 4).

    Parameters
    ----------
    mean_length : float
        Mean output length :math:`\bar L` in the batch (tokens).
    max_length : float
        Longest output length :math:`L_{\max}` (at least the mean).

    Returns
    -------
    float

    Notes
    -----
    .. math:: W = 1 - \frac{\sum_i L_i}{B\, L_{\max}} = 1 - \frac{\bar L}{L_{\max}}

    Equation 4 (§10.6.5): a static batch keeps all ``B`` slots until its longest sequence
    ends. Counts executed waste only if the kernel keeps computing finished slots; otherwise it is
    unused slot capacity. Use :func:`padding_waste` for a list of lengths.

    Examples
    --------
    >>> padding_waste_fraction(125, 200)
    0.375
    """
    return 1 - mean_length / max_length


@checked()
def padding_waste(output_lengths: Count) -> Fraction:
    """Padding waste (Eq. 4) of static batches given each request's output length.

    Parameters
    ----------
    output_lengths : array of int, shape (..., batch)
        Output tokens of each request (>= 1); the last axis is the batch.

    Returns
    -------
    float or ndarray
        In [0, 1); 0 when every length is equal.

    Examples
    --------
    §10.6.4: one sequence of a batch of 8 stops after 10 tokens, the others run 100.

    >>> round(padding_waste([10] + [100] * 7), 6)
    0.1125
    """
    lengths = _lengths("padding_waste", "output_lengths", output_lengths)
    return plain(padding_waste_fraction.numeric(mean_length=lengths.mean(axis=-1), max_length=lengths.max(axis=-1)))


@dataclass(frozen=True, repr=False)
class StaticBatchAccounting(Result):
    """Slot-iteration accounting and per-request latencies of one static batch (Napkin Math 10.3).

    Attributes
    ----------
    batch_size : int
        Slots.
    max_length, mean_length : float
        Longest and mean output length.
    iterations : int
        Decode iterations until the longest request ends.
    batch_time : Quantity [time]
        ``iterations x iteration_time``.
    slot_iterations, useful_slot_iterations, idle_slot_iterations : int
        ``B x L_max``, ``sum L_i`` and the difference.
    waste : float
        Eq. 4.
    barrier_latency : Quantity [time], array
        Each request's latency when responses are held until the batch ends.
    release_latency : Quantity [time], array
        Each request's latency when it is released on completion.
    mean_barrier_latency, mean_release_latency : Quantity [time]
        Their means.
    latency_reduction : float
        ``1 - mean_release / mean_barrier`` (numerically equal to ``waste``).
    speedup : ndarray
        Per-request ``barrier / release``.
    freed_at : ndarray of int
        Iterations at which slots free before the batch ends (where continuous admission can
        start a waiting request).
    requests_advanced : int
        Requests the same iterations advance with continuous admission, one new request per freed
        slot (the new ones still running at the end).
    """

    batch_size: Count
    max_length: Count
    mean_length: Count
    iterations: Count
    batch_time: Time
    slot_iterations: Count
    useful_slot_iterations: Count
    idle_slot_iterations: Count
    waste: Fraction
    barrier_latency: Time
    release_latency: Time
    mean_barrier_latency: Time
    mean_release_latency: Time
    latency_reduction: Fraction
    speedup: np.ndarray
    freed_at: np.ndarray
    requests_advanced: Count


@checked(iteration_time=one("positive"))
def static_batch_accounting(output_lengths: Count, iteration_time: Time) -> StaticBatchAccounting:
    """Account a static batch's slot-iterations and its requests' latencies with and without a barrier.

    Parameters
    ----------
    output_lengths : sequence of int
        Output tokens of each request in the batch.
    iteration_time : Quantity [time]
        Time of one decode iteration for the whole batch (assumed fixed).

    Returns
    -------
    StaticBatchAccounting

    Notes
    -----
    Napkin Math 10.3 (§10.6.5). With fixed membership the batch runs ``L_max`` iterations of
    ``B`` slots. Holding every response until the end (a response barrier) gives every request
    ``L_max x t``; releasing on completion gives ``L_i x t``. Release and slot reuse are separate
    decisions: release helps the requests in the batch, only continuous admission recovers the idle
    slot-iterations for new requests (§10.6.5).

    Examples
    --------
    >>> a = static_batch_accounting([50, 200, 100, 150], Q_(20, "ms"))
    >>> a.waste, a.mean_release_latency.to("ms"), a.requests_advanced
    (0.375, <Quantity(2500.0, 'millisecond')>, 7)
    """
    lengths = _lengths("static_batch_accounting", "output_lengths", output_lengths)
    if lengths.ndim != 1:
        raise InputError("static_batch_accounting(): argument 'output_lengths' must be one batch (a 1-d sequence)")
    step = Q_(iteration_time, "s")
    longest = int(lengths.max())
    size = lengths.size
    barrier = Q_(np.full(size, longest * step.magnitude), "s")
    release = Q_(lengths * step.magnitude, "s")
    freed = np.sort(lengths[lengths < longest]).astype(int)
    useful = int(lengths.sum())
    return StaticBatchAccounting(
        batch_size=size,
        max_length=float(longest),
        mean_length=float(lengths.mean()),
        iterations=longest,
        batch_time=(longest * step).to("s"),
        slot_iterations=size * longest,
        useful_slot_iterations=useful,
        idle_slot_iterations=size * longest - useful,
        waste=padding_waste(lengths),
        barrier_latency=barrier,
        release_latency=release,
        mean_barrier_latency=barrier.mean(),
        mean_release_latency=release.mean(),
        latency_reduction=float(1 - (release.mean() / barrier.mean()).m_as("")),
        speedup=(barrier / release).m_as(""),
        freed_at=freed,
        requests_advanced=size + freed.size,
    )


@dataclass(frozen=True, repr=False)
class SlotTimeline(Result):
    """A slot x iteration schedule of a batch (Figure 7).

    Attributes
    ----------
    grid : ndarray of int, shape (slots, iterations)
        Index of the request occupying each cell (into ``output_lengths`` then ``queued_lengths``),
        -1 for an idle cell.
    prefill : ndarray of bool, same shape
        Cells spent on a newly admitted request's prefill.
    slot_iterations : int
        ``slots x iterations``.
    used_slot_iterations : int
        Cells doing work (prefill or decode).
    occupancy : float
        ``used / slot_iterations``.
    admitted : int
        Requests that started within the horizon.
    completed : int
        Requests that finished within the horizon.
    start_iteration : ndarray of int
        First iteration of each request (-1 if it never started).
    """

    grid: np.ndarray
    prefill: np.ndarray
    slot_iterations: Count
    used_slot_iterations: Count
    occupancy: Fraction
    admitted: Count
    completed: Count
    start_iteration: np.ndarray


@checked(queued_lengths=arg(empty=True), prefill_iterations="nonnegative_integer")
def slot_timeline(
    output_lengths: Count,
    slots: Count | None = None,
    iterations: Count | None = None,
    refill: bool = False,
    queued_lengths: Count = (),
    prefill_iterations: Count = 0,
) -> SlotTimeline:
    """Lay out a batch on a slot x iteration grid, with fixed membership or continuous admission.

    Parameters
    ----------
    output_lengths : sequence of int
        Output tokens of the requests that start the batch (one per slot, in slot order; any beyond
        ``slots`` wait in the queue first).
    slots : int, optional
        Batch width; defaults to ``len(output_lengths)``.
    iterations : int, optional
        Horizon; defaults to the longest starting request.
    refill : bool, default False
        Continuous admission: a freed slot takes the next waiting request at the next iteration
        boundary. With False, membership is fixed and freed slots stay idle.
    queued_lengths : sequence of int, optional
        Output lengths of waiting requests, in admission order.
    prefill_iterations : int, default 0
        Cells a newly admitted request spends on its prefill before decoding (Figure 7 draws one).

    Returns
    -------
    SlotTimeline

    Notes
    -----
    Section 10.6.4, Figure 7 (§10.6.2): over 8 iterations of 4 slots, fixed membership keeps
    20 of 32 cells busy and continuous admission all 32 when waiting requests and cache capacity
    allow. KV-cache admission limits are not modelled here.

    Examples
    --------
    >>> slot_timeline([3, 8, 5, 4]).used_slot_iterations
    20
    >>> slot_timeline([3, 8, 5, 4], refill=True, queued_lengths=[8, 8, 8], prefill_iterations=1).occupancy
    1.0
    """
    name = "slot_timeline"
    first = _lengths(name, "output_lengths", output_lengths)
    waiting = _lengths(name, "queued_lengths", queued_lengths) if np.size(queued_lengths) else np.zeros(0, dtype=int)
    if first.ndim != 1 or waiting.ndim != 1:
        raise InputError(f"{name}(): lengths must be 1-d sequences")
    width = first.size if slots is None else int(slots)
    horizon = int(first.max()) if iterations is None else int(iterations)
    prefill_cells = int(prefill_iterations)
    if not isinstance(refill, bool | np.bool_):
        raise InputError(f"{name}(): argument 'refill' must be True or False, got {refill!r}")
    lengths = np.concatenate([first, waiting]).astype(int)
    grid = np.full((width, horizon), -1)
    prefill = np.zeros((width, horizon), dtype=bool)
    start = np.full(lengths.size, -1)
    finish = np.full(lengths.size, -1)

    def place(slot: int, request: int, at: int, warmup: int) -> int:
        start[request] = at
        end = at + warmup + lengths[request]
        grid[slot, at : min(end, horizon)] = request
        prefill[slot, at : min(at + warmup, horizon)] = True
        finish[request] = end
        return end

    # Requests that open the batch were prefilled before iteration 0; freed slots take the next
    # waiting request in the order they free (ties by slot).
    frees = [(place(slot, slot, 0, 0), slot) for slot in range(min(width, lengths.size))]
    heapq.heapify(frees)
    waiting_next = len(frees)
    while refill and frees and waiting_next < lengths.size:
        at, slot = heapq.heappop(frees)
        if at >= horizon:
            break
        heapq.heappush(frees, (place(slot, waiting_next, at, prefill_cells), slot))
        waiting_next += 1
    used = int((grid >= 0).sum())
    return SlotTimeline(
        grid=grid,
        prefill=prefill,
        slot_iterations=width * horizon,
        used_slot_iterations=used,
        occupancy=used / (width * horizon),
        admitted=int((start >= 0).sum()),
        completed=int(((finish >= 0) & (finish <= horizon)).sum()),
        start_iteration=start,
    )


@formula(
    result=var("", r"S_{\max}", description="ceiling on the continuous-batching capacity gain"),
    reference="section 10.6.5 (efficiency regimes), Table 7",
    output_cv=var("", r"\mathrm{CV}", "nonnegative", "coefficient of variation of output lengths"),
    deviation_multiple=var("", "k", "nonnegative", "standard deviations from the mean to a batch's longest"),
    example={"output_cv": 1.0, "deviation_multiple": 2.5},
)
def continuous_batching_ceiling(output_cv, deviation_multiple):
    r"""Ceiling on the capacity gain of continuous over static batching, :math:`1 + k\,\mathrm{CV}`.

    Parameters
    ----------
    output_cv : float
        :math:`\sigma/\mu` of the workload's output lengths.
    deviation_multiple : float
        :math:`k`: how many standard deviations above the mean a batch's longest request lies.
        An assumption about the batch (it grows with batch size), not a workload property.

    Returns
    -------
    float

    Notes
    -----
    .. math:: \text{Improvement} \approx \frac{L_{\max}}{\bar L} = \frac{\mu + k\sigma}{\mu} = 1 + k\,\mathrm{CV}

    §10.6.5: a ceiling, assuming immediate refill and unchanged iteration time; scheduler
    overhead, KV pressure and refill gaps recover less. Uniform lengths give 1.

    Examples
    --------
    >>> continuous_batching_ceiling(1.0, 2.5)
    3.5
    """
    return 1 + deviation_multiple * output_cv


@formula(
    result=var("", "S", description="throughput speedup"),
    reference="section 10.6.5, Table 7 (speedup = 1 / (1 - W_eff))",
    effective_waste=var("", r"W_{\mathrm{eff}}", "fraction_open", "effective waste the speedup recovers"),
    example={"effective_waste": 0.5},
)
def speedup_from_waste(effective_waste):
    r"""Speedup from recovering an effective waste fraction.

    Parameters
    ----------
    effective_waste : float
        In [0, 1).

    Returns
    -------
    float

    Notes
    -----
    .. math:: S = \frac{1}{1 - W_{\mathrm{eff}}}

    §10.6.5: Table 7's waste column restates its assumed speedup through this relation.
    :func:`effective_waste` is its inverse.

    Examples
    --------
    >>> speedup_from_waste(0.5)
    2.0
    """
    return 1 / (1 - effective_waste)


def effective_waste(speedup: Number) -> Fraction:
    r"""Effective waste implied by a continuous-batching speedup: :math:`1 - 1/S`.

    Parameters
    ----------
    speedup : float
        Throughput ratio of continuous to static batching (>= 1).

    Returns
    -------
    float

    Examples
    --------
    >>> round(effective_waste(1.5), 3)
    0.333
    """
    return speedup_from_waste.solve_for("effective_waste", speedup_from_waste=speedup)


@dataclass(frozen=True, repr=False)
class ContinuousBatchingScenario(Result):
    """A row of Table 7: a workload's output-length variability and an assumed realised speedup.

    Attributes
    ----------
    workload : str
    output_cv : float
        Coefficient of variation of output lengths.
    deviation_multiple : float
        Assumed ``k``.
    speedup : float
        Assumed realised speedup (held below the ceiling; not a measurement).
    """

    workload: str
    output_cv: float
    deviation_multiple: float
    speedup: float

    @property
    def ceiling(self) -> float:
        r""":math:`1 + k\,\mathrm{CV}` (:func:`continuous_batching_ceiling`)."""
        return continuous_batching_ceiling(self.output_cv, self.deviation_multiple)

    @property
    def effective_waste(self) -> float:
        """The waste column: :math:`1 - 1/S` (:func:`effective_waste`)."""
        return effective_waste(self.speedup)

    @property
    def recovered_share(self) -> float:
        r"""Share of the ceiling's gain the assumed speedup recovers, :math:`(S - 1)/(k\,\mathrm{CV})`."""
        return (self.speedup - 1) / (self.ceiling - 1)


#: Table 7 (§10.6.5): inputs CV and k, and the assumed speedups; the waste column is derived.
TABLE_7 = (
    ContinuousBatchingScenario("Code completion", 0.3, 2.5, 1.2),
    ContinuousBatchingScenario("Chat (short responses)", 0.6, 2.0, 1.5),
    ContinuousBatchingScenario("General text generation", 1.0, 2.5, 2.0),
    ContinuousBatchingScenario("Creative writing", 1.5, 3.0, 2.8),
    ContinuousBatchingScenario("RAG with variable docs", 2.0, 2.5, 3.5),
)


# --------------------------------------------------------------------------------------------
# helpers


def _lengths(function: str, argument: str, values: Any) -> np.ndarray:
    """Checked output lengths (whole numbers >= 1) as an int array, non-empty along the batch axis."""
    lengths = np.asarray(values)
    if lengths.ndim == 0 or lengths.shape[-1] == 0:
        raise InputError(f"{function}(): argument '{argument}' must be a non-empty sequence of output lengths")
    return lengths.astype(int)
