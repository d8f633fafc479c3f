"""One replica's service as the fluid mode reads it from a plan: capacity, running batch, TPOT and TTFT versus load.

The plan gives its replica at two loads: at the planned load (``service.utilization`` of the throughput
with the batch cap full) it runs ``service.running_batch`` sequences with the plan's TPOT and TTFT;
at the cap it completes ``service.replica_throughput``. By Little's law a request stays
``T = b / lambda`` in the running batch, which gives ``T`` at both points; the fluid mode takes ``T``
linear in the running batch between them, ``T(b) = T0 + k b``, so the running batch at a load
``lambda`` per replica solves ``b = lambda T(b)``: ``b = lambda T0 / (1 - lambda k)``, reaching the
cap exactly at the replica's throughput. TPOT scales with ``T(b)`` from the plan's.

The wait for a running slot is the M/M/c queue of :mod:`calculator.queueing.mmc` with the cap's
``c`` slots, each held ``T(b)`` (offered load ``a = lambda T = b``); the plan's TTFT less that wait at
the planned load is the part of TTFT that does not queue (the request path, the prefill iterations).
The derivation and its limits are in ``docs/production-day.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..queueing.mmc import mean_wait_seconds, wait_exceedance_probability, wait_quantile_seconds
from ..units import shown

__all__ = ["ReplicaService", "MAX_SLOT_LOAD"]

#: The slot utilization the M/M/c wait is evaluated at, at most: past it the fluid queue carries the overload
#: and the stochastic wait stays at its value there (the M/M/c wait diverges at 1).
MAX_SLOT_LOAD = 0.98


@dataclass(frozen=True)
class ReplicaService:
    """A replica's service curve from a plan (plain SI numbers: request/s, seconds).

    Attributes
    ----------
    capacity : float
        Requests per second with the batch cap full (``service.replica_throughput``).
    slots : int
        The batch cap (``plan.batch``).
    t0, k : float
        Time in the running batch ``T(b) = t0 + k b`` (s, s per sequence).
    planned_time : float
        ``T`` at the planned load.
    planned_rate : float
        The planned load per replica, request/s.
    tpot : float
        The plan's TPOT at the planned load.
    ttft_base : float
        TTFT less the slot wait (the part that does not queue), at the targets' statistic.
    ttft_target, tpot_target : float
    gpus : int
        GPUs per replica.
    price : float
        USD per GPU-hour.
    percentile : float or None
        The statistic of the plan's TTFT: a percentile, or None for the mean.
    """

    capacity: float
    slots: int
    t0: float
    k: float
    planned_time: float
    planned_rate: float
    tpot: float
    ttft_base: float
    ttft_target: float
    tpot_target: float
    gpus: int
    price: float
    percentile: float | None

    @classmethod
    def from_plan(cls, plan: Any, price: float | None = None) -> ReplicaService:
        """The service curve of a feasible plan's replica (``price`` USD per GPU-hour; None: the plan's)."""
        service, targets = getattr(plan, "service", None), getattr(plan, "targets", None)
        if not getattr(plan, "feasible", False) or service is None or targets is None or plan.layout is None:
            raise InputError(
                f"run_day(): argument 'plan' must be a feasible FleetPlan with its service, targets and layout "
                f"(size_fleet's), got {shown(plan)}"
            )
        if price is None and plan.cost is None:
            raise InputError("run_day(): the plan states no cost; give the scenario a 'price' per GPU-hour")
        capacity = float(service.replica_throughput.m_as("request/s"))
        rate = float(service.utilization) * capacity
        running, slots = float(service.running_batch), int(plan.batch)
        if not (capacity > 0 and rate > 0 and running > 0 and slots >= running - 1e-9):
            raise InputError("run_day(): the plan's service records no positive throughput, load and running batch")
        planned_time, full_time = running / rate, slots / capacity
        k = max((full_time - planned_time) / (slots - running), 0.0) if slots - running > 1e-9 else 0.0
        t0 = planned_time - k * running
        percentile = targets.ttft_percentile
        wait = _slot_wait(running, slots, planned_time, percentile)
        return cls(
            capacity=capacity,
            slots=slots,
            t0=t0,
            k=k,
            planned_time=planned_time,
            planned_rate=rate,
            tpot=float(service.tpot.m_as("s")),
            ttft_base=max(float(service.ttft.m_as("s")) - float(wait), 0.0),
            ttft_target=float(targets.ttft.m_as("s")),
            tpot_target=float(targets.tpot.m_as("s")),
            gpus=int(plan.layout.gpus),
            price=float(price) if price is not None else float(plan.cost.per_hour.m_as("USD/hour")) / plan.gpus,
            percentile=percentile,
        )

    def running(self, rate: Any) -> np.ndarray:
        """Mean running batch at ``rate`` request/s per replica (the cap at and past the capacity)."""
        rate = np.asarray(rate, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            batch = rate * self.t0 / (1 - rate * self.k)
        return np.where((rate < self.capacity) & (batch >= 0), np.minimum(batch, self.slots), self.slots)

    def time_running(self, batch: Any) -> np.ndarray:
        """Seconds a request spends in a running batch of ``batch`` sequences."""
        return self.t0 + self.k * np.asarray(batch, dtype=float)

    def tpot_at(self, batch: Any) -> np.ndarray:
        """TPOT at a running batch: the plan's, scaled with the time in the batch."""
        return self.tpot * self.time_running(batch) / self.planned_time

    def meets_targets(self, rate: float) -> bool:
        """Whether a replica at ``rate`` request/s meets the plan's TPOT and TTFT targets (at their statistic)."""
        batch = self.running(rate)
        ttft = self.ttft_base + _slot_wait(float(batch), self.slots, float(self.time_running(batch)), self.percentile)
        return bool(self.tpot_at(batch) <= self.tpot_target * (1 + 1e-9) and ttft <= self.ttft_target * (1 + 1e-9))

    def safe_rate(self, ceiling: float) -> float:
        """The highest load per replica (request/s) that meets the targets, at most ``ceiling`` of the capacity.

        A bisection between the planned load (which meets them) and ``ceiling x capacity``; TPOT and the
        slot wait grow with the load, so the targets are met below one load and missed above it.
        """
        low, high = self.planned_rate, max(ceiling * self.capacity, self.planned_rate)
        if self.meets_targets(high):
            return high
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if self.meets_targets(middle) else (low, middle)
        return low

    def slot_wait_exceedance(self, batch: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """P(slot wait > ``threshold`` s) at a running batch (0 where the threshold is below 0 is 1)."""
        load = np.minimum(batch, MAX_SLOT_LOAD * self.slots)
        tail = wait_exceedance_probability(load, self.slots, self.time_running(batch), 1.0, np.maximum(threshold, 0.0))
        return np.where(np.asarray(threshold) < 0, 1.0, tail)

    def slot_wait_quantile(self, batch: np.ndarray, quantile: float) -> np.ndarray:
        """The slot wait (s) at ``quantile`` at a running batch."""
        load = np.minimum(batch, MAX_SLOT_LOAD * self.slots)
        return wait_quantile_seconds(load, self.slots, self.time_running(batch), 1.0, quantile)


def _slot_wait(batch: float, slots: int, held: float, percentile: float | None) -> Any:
    """The M/M/c slot wait at the plan's statistic (its mean, or its percentile)."""
    load = min(batch, MAX_SLOT_LOAD * slots)
    if percentile is None:
        return mean_wait_seconds(load, slots, held, 1.0)
    return wait_quantile_seconds(load, slots, held, 1.0, percentile)
