"""One replica's service as the fluid mode reads it from a plan: capacity, running batch, TPOT and TTFT versus load.

The plan gives its replica at two loads: at the planned load (``service.utilization`` of the throughput
with the batch cap full) it runs ``service.running_batch`` sequences with the plan's TPOT and TTFT;
at the cap it completes ``service.replica_throughput``. By Little's law a request stays
``T = b / lambda`` in the running batch, which gives ``T`` at both points; the fluid mode takes ``T``
linear in the running batch between them, ``T(b) = T0 + k b``, so the running batch at a load
``lambda`` per replica solves ``b = lambda T(b)``: ``b = lambda T0 / (1 - lambda k)``, reaching the
cap exactly at the replica's throughput. TPOT scales with ``T(b)`` from the plan's.

A request waits twice before its first token, as the sizer counts it: for the replica's prefill (one
server, each prompt's prefill time ``s``, the G/G/1 queue of :mod:`calculator.queueing` at load
``lambda s``) and for a running slot (the M/M/c queue of :mod:`calculator.queueing.mmc` with the cap's
``c`` slots, each held ``T(b)``, offered load ``a = lambda T = b``). Each wait is an atom at zero and an
exponential tail, so their sum has a closed-form law (:meth:`ReplicaService.wait_exceedance`). The
plan's TTFT less the sum's statistic at the planned load is the part of TTFT that does not queue (the
request path, the prefill iterations). The derivation and its limits are in ``docs/production-day.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..queueing.mmc import mean_wait_seconds, wait_quantile_seconds, wait_tail
from ..units import shown

__all__ = ["ReplicaService", "MAX_SLOT_LOAD"]

#: The slot (and prefill) utilization the waits are evaluated at, at most: past it the fluid queue carries the
#: overload and the stochastic wait stays at its value there (the M/M/c wait diverges at 1).
MAX_SLOT_LOAD = 0.98
#: Bisection rounds of a wait quantile (the bracket shrinks 2^-60).
_ROUNDS = 60
#: A queue as :mod:`calculator.queueing.mmc` takes it: (load, servers, service time, variability factor).
_Queue = tuple[Any, Any, Any, Any]


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
        TTFT less the waits (the part that does not queue), at the targets' statistic.
    ttft_target, tpot_target : float
    gpus : int
        GPUs per replica.
    price : float
        USD per GPU-hour.
    percentile : float or None
        The statistic of the plan's TTFT: a percentile, or None for the mean.
    prefill : float
        One prompt's prefill time alone on the replica (s): the prefill queue's service time; 0 when the
        plan names no accelerator to price it (no prefill wait).
    prefill_factor : float
        The prefill queue's Allen-Cunneen variability factor ``(ca^2 + cs^2) / 2``: Poisson arrivals, the
        prompt lengths' CV as the service's.
    per_node : int
        Replicas one node carries (the accelerator's ``node_gpus`` over the replica's GPUs, at least 1: a
        replica spanning nodes is lost with any of them); 1 when the registry states no node size.
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
    prefill: float = 0.0
    prefill_factor: float = 1.0
    per_node: int = 1

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
        curve = cls(
            capacity=capacity,
            slots=slots,
            t0=t0,
            k=k,
            planned_time=planned_time,
            planned_rate=rate,
            tpot=float(service.tpot.m_as("s")),
            ttft_base=0.0,
            ttft_target=float(targets.ttft.m_as("s")),
            tpot_target=float(targets.tpot.m_as("s")),
            gpus=int(plan.layout.gpus),
            price=float(price) if price is not None else float(plan.cost.per_hour.m_as("USD/hour")) / plan.gpus,
            percentile=targets.ttft_percentile,
            per_node=_per_node(plan),
            **_prefill_queue(plan),
        )
        wait = float(curve.wait_statistic(rate, running))
        return dataclasses.replace(curve, ttft_base=max(float(service.ttft.m_as("s")) - wait, 0.0))

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
        ttft = self.ttft_base + float(self.wait_statistic(rate, batch))
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

    def _queues(self, rate: Any, batch: Any) -> tuple[_Queue, _Queue]:
        """The prefill and the slot queue as ``(load, servers, service time, factor)``, loads capped."""
        rate, batch = np.broadcast_arrays(np.asarray(rate, dtype=float), np.asarray(batch, dtype=float))
        slot = (np.minimum(batch, MAX_SLOT_LOAD * self.slots), self.slots, self.time_running(batch), 1.0)
        if self.prefill <= 0:  # no prefill queue: a D/D/1 queue never waits
            return (np.zeros(rate.shape), 1.0, 1.0, 0.0), slot
        return (np.minimum(rate * self.prefill, MAX_SLOT_LOAD), 1.0, self.prefill, self.prefill_factor), slot

    def wait_exceedance(self, rate: Any, batch: Any, threshold: Any) -> np.ndarray:
        """P(prefill wait + slot wait > ``threshold`` s) at ``rate`` request/s per replica and a running batch.

        Each wait is 0 with probability ``1 - p`` and else exponential at rate ``r``
        (:func:`calculator.queueing.mmc.wait_tail`); for independent waits the sum exceeds ``t`` when either
        alone does, ``p1 (1 - p2) e^{-r1 t} + p2 (1 - p1) e^{-r2 t}``, or both,
        ``p1 p2 (r2 e^{-r1 t} - r1 e^{-r2 t}) / (r2 - r1)`` (``(1 + r t) e^{-r t}`` at equal rates).
        1 below a threshold of 0.
        """
        (p1, r1), (p2, r2) = (wait_tail(*queue) for queue in self._queues(rate, batch))
        t = np.maximum(np.asarray(threshold, dtype=float), 0.0)
        with np.errstate(all="ignore"):
            e1 = np.where(p1 > 0, np.exp(-r1 * t), 0.0)
            e2 = np.where(p2 > 0, np.exp(-r2 * t), 0.0)
            close = np.abs(r2 - r1) <= 1e-9 * np.maximum(r1, r2)
            both = np.where(close, (1 + r1 * t) * e1, (r2 * e1 - r1 * e2) / (r2 - r1))
            tail = p1 * (1 - p2) * e1 + p2 * (1 - p1) * e2 + np.where(p1 * p2 > 0, p1 * p2 * both, 0.0)
        return np.where(np.asarray(threshold) < 0, 1.0, np.clip(tail, 0.0, 1.0))

    def wait_bound(self, rate: Any, batch: Any, quantile: float) -> np.ndarray:
        """A wait (s) the sum exceeds with probability at most ``1 - quantile``: each wait at ``(1 + quantile) / 2``."""
        level = 1 - (1 - quantile) / 2
        prefill, slot = self._queues(rate, batch)
        return wait_quantile_seconds(*prefill, level) + wait_quantile_seconds(*slot, level)

    def wait_statistic(self, rate: Any, batch: Any) -> np.ndarray:
        """The summed wait at the plan's TTFT statistic: its mean, or its percentile (by bisection)."""
        prefill, slot = self._queues(rate, batch)
        if self.percentile is None:
            return mean_wait_seconds(*prefill) + mean_wait_seconds(*slot)
        low, high = np.zeros(np.shape(prefill[0])), self.wait_bound(rate, batch, self.percentile)
        for _ in range(_ROUNDS):
            middle = (low + high) / 2
            over = self.wait_exceedance(rate, batch, middle) > 1 - self.percentile
            low, high = np.where(over, middle, low), np.where(over, high, middle)
        return high


def _prefill_queue(plan: Any) -> dict[str, float]:
    """The prefill queue of a plan's replica: one prompt's prefill time alone, and the variability factor.

    None (no prefill wait) when the plan names no accelerator or workload to price the prompt with.
    """
    workload, layout = getattr(plan, "workload", None), plan.layout
    if not getattr(plan, "accelerator", "") or workload is None:
        return {}
    from ..performance.steps import prefill_time
    from ..queueing.ggc import variability_factor

    seconds = prefill_time(
        plan.model,
        plan.accelerator,
        plan.precision,
        layout.tensor_parallel,
        max(round(workload.input_tokens), 1),
        engine=plan.engine or None,
        data_parallel=layout.data_parallel,
        expert_parallel=layout.expert_parallel,
        pipeline_parallel=layout.pipeline_parallel,
        redundant_experts=layout.redundant_experts,
    )
    factor = variability_factor.numeric(arrival_cv=1.0, service_cv=float(workload.input_cv))
    return {"prefill": float(seconds.m_as("s")), "prefill_factor": float(factor)}


def _per_node(plan: Any) -> int:
    """Replicas of ``plan`` on one node: the accelerator's ``node_gpus`` over a replica's GPUs (at least 1)."""
    from ..errors import RegistryError
    from ..registry import load_registry

    try:
        node = load_registry(extra=plan.registry_documents).accelerator(plan.accelerator).node_gpus
    except (RegistryError, InputError, AttributeError):  # a hand-made plan naming no registered accelerator
        return 1
    return max(int(node) // int(plan.layout.gpus), 1) if node else 1
