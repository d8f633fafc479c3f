"""The fluid mode's steps summed into reporting windows: counts, replicas, cost, attainment and latency percentiles.

The latencies are evaluated here, after the step loop, vectorized over every step: a request served
at step ``i`` in pool ``p`` from origin ``o`` has TTFT ``base + d_i + rtt_op + W``, with ``d_i`` the
fluid queue's delay (queue over service rate: the FIFO wait of a backlog), ``rtt_op`` the round trip and
``W`` the prefill and slot waits at the step's load per replica and running batch
(:class:`~calculator.dynamics.service.ReplicaService`). A window's TTFT
percentile is the percentile of the mixture of its steps' distributions, weighted by requests
served, found by bisection; its TPOT percentiles are the weighted percentiles of the steps' TPOT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .policies import Scenario
from .result import DayResult, day_result
from .service import ReplicaService

#: Bisection rounds of a window's TTFT percentile (the bracket shrinks 2^-50: far below a microsecond).
_BISECTIONS = 50


@dataclass
class StepRecord:
    """What the fluid loop wrote at each step (rows) for each pool (columns); counts are requests in the step."""

    dt: float
    per_window: int
    ready: np.ndarray
    starting: np.ndarray
    billed: np.ndarray
    queue: np.ndarray
    served: np.ndarray
    served_first: np.ndarray
    shed: np.ndarray
    failed: np.ndarray
    lost: np.ndarray
    offered: np.ndarray
    delay: np.ndarray
    first: np.ndarray  # first attempts by origin
    flows: np.ndarray  # step x origin x pool: arrivals sent from each origin to each pool
    retried_sent: np.ndarray  # step: retries scheduled

    @classmethod
    def empty(cls, steps: int, pools: int, dt: float, per_window: int) -> StepRecord:
        """A record of zeros for ``steps`` steps of ``pools`` pools."""
        names = ("ready", "starting", "billed", "queue", "served", "served_first", "shed", "failed", "lost")
        arrays = {name: np.zeros((steps, pools)) for name in (*names, "offered", "delay", "first")}
        return cls(dt, per_window, flows=np.zeros((steps, pools, pools)), retried_sent=np.zeros(steps), **arrays)


def _by_window(values: np.ndarray, per_window: int) -> np.ndarray:
    """Per-step values (first axis) reshaped to windows x steps-in-window x the rest."""
    return values.reshape(values.shape[0] // per_window, per_window, *values.shape[1:])


def _per_flow(record: StepRecord, trip: np.ndarray, service: ReplicaService) -> dict[str, np.ndarray]:
    """Each step's served requests split by (origin, pool), with what sets their TTFT and TPOT."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_replica = np.where(record.ready > 0, record.served / (record.dt * np.maximum(record.ready, 1)), 0.0)
        inflow = record.flows.sum(axis=1, keepdims=True)
        origin = np.where(inflow > 0, record.flows / inflow, 1.0 / record.flows.shape[1])
    batch = service.running(per_replica)
    served = record.served[:, None, :] * origin  # step x origin x pool
    shift = service.ttft_base + record.delay[:, None, :] + trip[None, :, :]
    return {
        "rate": np.broadcast_to(per_replica[:, None, :], served.shape),
        "batch": np.broadcast_to(batch[:, None, :], served.shape),
        "served": served,
        "first": record.served_first[:, None, :] * origin,
        "shift": shift,
        "tpot": service.tpot_at(batch),
    }


def _ttft_quantiles(flow: dict[str, np.ndarray], service: ReplicaService, per_window: int, q: float) -> np.ndarray:
    """Each window's TTFT at quantile ``q``: the mixture of its steps' and flows' distributions, by bisection."""
    weight = _by_window(flow["served"], per_window).reshape(-1, per_window * flow["served"][0].size)
    batch = _by_window(flow["batch"], per_window).reshape(weight.shape)
    rate = _by_window(flow["rate"], per_window).reshape(weight.shape)
    shift = _by_window(flow["shift"], per_window).reshape(weight.shape)
    total = weight.sum(axis=1)
    used = (weight > 0) & np.isfinite(shift)
    low = np.where(used, shift, np.inf).min(axis=1)
    tail = shift + service.wait_bound(rate, batch, q)
    high = np.where(used, tail, -np.inf).max(axis=1)
    low, high = np.where(total > 0, low, 0.0), np.where(total > 0, high, 0.0)
    queues = used & (service.wait_exceedance(rate, batch, np.zeros_like(batch)) > 0)  # the rest never wait
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        threshold = middle[:, None] - shift
        below = (threshold >= 0).astype(float)
        below[queues] = 1 - service.wait_exceedance(rate[queues], batch[queues], threshold[queues])
        cdf = np.where(used, weight * below, 0.0).sum(axis=1) / np.maximum(total, 1e-300)
        low, high = np.where(cdf < q, middle, low), np.where(cdf < q, high, middle)
    return np.where(total > 0, high, np.nan)


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> np.ndarray:
    """Row-wise weighted quantile (the smallest value whose cumulative weight reaches ``q``); NaN without weight."""
    order = np.argsort(values, axis=1)
    values, weights = np.take_along_axis(values, order, 1), np.take_along_axis(weights, order, 1)
    cumulative = np.cumsum(weights, axis=1)
    total = cumulative[:, -1:]
    index = (cumulative < q * total - 1e-12).sum(axis=1)
    picked = np.take_along_axis(values, np.minimum(index, values.shape[1] - 1)[:, None], 1)[:, 0]
    return np.where(total[:, 0] > 0, picked, np.nan)


def _attainment(flow: dict[str, np.ndarray], record: StepRecord, service: ReplicaService) -> np.ndarray:
    """Per window: first attempts served meeting both targets (less those lost mid-stream) over first attempts."""
    meets_ttft = 1 - service.wait_exceedance(flow["rate"], flow["batch"], service.ttft_target - flow["shift"])
    meets_tpot = flow["tpot"] <= service.tpot_target * (1 + 1e-9)
    good = (flow["first"] * meets_ttft * meets_tpot[:, None, :]).sum(axis=(1, 2))
    good = np.maximum(good - record.lost.sum(axis=1), 0.0)
    arrived = _by_window(record.first.sum(axis=1), record.per_window).sum(axis=1)
    met = _by_window(good, record.per_window).sum(axis=1)
    return np.where(arrived > 0, np.minimum(met / np.maximum(arrived, 1e-300), 1.0), 1.0)


def _class_sheds(record: StepRecord, scenario: Scenario) -> dict[str, np.ndarray]:
    """Requests shed per priority class and window: each step's shedding takes the lowest class first."""
    classes = scenario.admission.classes
    if len(classes) < 2:
        return {}
    shed, offered = record.shed.sum(axis=1), record.offered.sum(axis=1)
    out, left = {}, shed.copy()
    for name, share in reversed(classes):
        taken = np.minimum(left, offered * share)
        left -= taken
        out[f"shed_{name}"] = _by_window(taken, record.per_window).sum(axis=1)
    return dict(reversed(out.items()))


def window_result(record: StepRecord, scenario: Scenario, service: ReplicaService, goal: float) -> DayResult:
    """The :class:`DayResult` of a fluid run's step record."""
    import pandas as pd

    pools = scenario.regions
    trip = np.array([[o.trip_to(p.name) for p in pools] for o in pools]) if pools else np.zeros((1, 1))
    flow = _per_flow(record, trip, service)
    n, window = record.per_window, scenario.window.m

    def total(values: np.ndarray) -> np.ndarray:
        return _by_window(values.sum(axis=1), n).sum(axis=1)

    def mean(values: np.ndarray) -> np.ndarray:
        return _by_window(values.sum(axis=1), n).mean(axis=1)

    first, offered = total(record.first), total(record.offered)
    tpot = _by_window(flow["tpot"], n).reshape(-1, n * record.ready.shape[1])
    served_weights = _by_window(record.served, n).reshape(tpot.shape)
    gpu_hours = total(record.billed) * service.gpus * record.dt / 3600
    columns: dict[str, Any] = {
        "start_s": np.arange(first.size) * window,
        "demand_rate": first / window,
        "offered_rate": offered / window,
        "ready": mean(record.ready),
        "starting": mean(record.starting),
        "queue": mean(record.queue),
        "ttft_p50_s": _ttft_quantiles(flow, service, n, 0.5),
        "ttft_p99_s": _ttft_quantiles(flow, service, n, 0.99),
        "tpot_p50_s": _weighted_quantile(tpot, served_weights, 0.5),
        "tpot_p99_s": _weighted_quantile(tpot, served_weights, 0.99),
        "served": total(record.served),
        "shed": total(record.shed),
        "failed": total(record.failed) + total(record.lost),
        "retried": offered - first,
        "attainment": _attainment(flow, record, service),
        "gpu_hours": gpu_hours,
        "cost": gpu_hours * service.price,
    }
    columns.update(_class_sheds(record, scenario))
    return day_result(pd.DataFrame(columns), window, goal, "fluid")
