"""Demand over time: a trace's demand curve, and a plan's configuration scaled over a demand curve."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import instance
from ..errors import InputError
from ..results import Result
from ..serving import read_trace
from ..types import Money, Rate, Time
from ..units import Q_
from ._common import HOURS, _seconds
from .plan import FleetPlan

if TYPE_CHECKING:
    from ..autoscaling import ScalingPlan

__all__ = ["DemandPlan", "demand_from_trace", "plan_over_time"]

#: The most bins :func:`demand_from_trace` counts arrivals in (800 kB of counts): a day in one-second
#: bins (86,400), a week in ten-second bins; a smaller bin over the trace's span is refused with the
#: smallest bin that span allows (a 1 ns bin over an hour's trace asked for 3.6e12 counts, 26 TiB).
MAX_DEMAND_BINS = 100_000


# --------------------------------------------------------------------------------------------
# Demand over time


def demand_from_trace(trace: Any, bin_width: Time = None, *, time: str = "arrival_time") -> tuple[Any, Any]:
    """The demand curve of a request trace: arrivals counted per ``bin_width`` (default one hour).

    Returns ``(times, rates)``: the start of each bin (from the first arrival) and its mean request
    rate, ready for :func:`plan_over_time`. The arrivals must span at least two bins (a curve of one
    step has no shape to plan over), as a demand curve needs two rows, and at most
    :data:`MAX_DEMAND_BINS` (a smaller ``bin_width`` is refused with the smallest one the span allows).
    """
    width = _seconds("bin_width", bin_width) if bin_width is not None else HOURS
    frame = read_trace(trace, (time,))
    arrivals = np.sort(frame[time].to_numpy(dtype=float))
    start, span = arrivals[0], arrivals[-1] - arrivals[0]
    if span / width >= MAX_DEMAND_BINS:  # floor(span / width) + 1 bins
        bins = span / width + 1
        raise InputError(
            f"demand_from_trace(): a bin of {width:g} s cuts the trace's {span:,.6g} s of arrivals into "
            f"{f'{math.floor(bins):,}' if bins < 1e15 else f'{bins:.3g}'} bins, more than {MAX_DEMAND_BINS:,} "
            f"(MAX_DEMAND_BINS); give 'bin_width' at least {_ceil_significant(span / (MAX_DEMAND_BINS - 1)):g} s"
        )
    bins = np.floor((arrivals - start) / width).astype(int)
    counts = np.bincount(bins)
    if counts.size < 2:
        raise InputError(
            f"demand_from_trace(): the trace's {arrivals.size:,} arrival(s) fall in one bin of {width:g} s; a demand "
            "curve needs at least two bins (a longer trace, or a smaller bin_width)"
        )
    return Q_(start + width * np.arange(counts.size), "s"), Q_(counts / width, "request/s")


def _ceil_significant(value: float, digits: int = 3) -> float:
    """``value`` rounded up to ``digits`` significant digits (a bound that still holds once printed)."""
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.ceil(value / scale) * scale


@dataclass(frozen=True, repr=False)
class DemandPlan(Result):
    """A plan's configuration scaled over a demand curve.

    Attributes
    ----------
    predictive : ScalingPlan
        The forecast-driven schedule (:func:`~calculator.autoscaling.predictive_schedule`): replicas
        started ``lead_time`` ahead of each rise.
    reactive : ScalingPlan
        A reactive autoscaler on the same curve (:func:`~calculator.autoscaling.simulate_reactive_scaling`).
    tensor_parallel : int
        GPUs per replica.
    peak_gpus, mean_gpus : float
        Of the predictive schedule (billed GPUs, warming replicas included).
    cost, reactive_cost, static_cost : Quantity [currency]
        Predictive and reactive schedules over the window, and the peak fleet held for the whole window.
    """

    predictive: ScalingPlan
    reactive: ScalingPlan
    tensor_parallel: int
    peak_gpus: float
    mean_gpus: float
    cost: Money
    reactive_cost: Money
    static_cost: Money


def plan_over_time(
    plan: FleetPlan,
    times: Time,
    demand: Rate,
    startup_time: Time = None,
    lead_time: Time = None,
    end: Time = None,
    step: Time = None,
) -> DemandPlan:
    """Replicas, GPUs and cost of a plan's configuration over a demand curve (requests/s over a day).

    A replica sustains the plan's ``service.replica_throughput`` at its ``max_utilization`` ceiling. The
    predictive schedule starts replicas ``lead_time`` (default: ``startup_time``) ahead of each rise;
    the reactive one sees demand late and waits a cold start (``startup_time``, for example
    :func:`~calculator.autoscaling.cold_start_time`). Both come from :mod:`calculator.autoscaling`.
    """
    from ..autoscaling import DEFAULT_SCALING_STEP, predictive_schedule, simulate_reactive_scaling

    instance("plan_over_time", "plan", plan, FleetPlan, "a FleetPlan (from size_fleet)")
    if not plan.feasible:
        raise InputError(f"plan_over_time(): the plan is infeasible ({plan.reason})")
    if plan.cost is None or plan.service is None or plan.layout is None:
        raise InputError("plan_over_time(): the plan records no replica throughput or cost (make it with size_fleet)")
    startup = startup_time if startup_time is not None else Q_(0.0, "s")
    grid = {"end": end} if end is not None else {}
    if step is not None:
        grid["step"] = step
    capacity = plan.service.replica_throughput
    lead = lead_time if lead_time is not None else startup
    predictive = predictive_schedule(
        times, demand, capacity, startup, lead, target_utilization=plan.max_utilization, **grid
    )
    reactive = simulate_reactive_scaling(
        times, demand, capacity, startup, target_utilization=plan.max_utilization, **grid
    )
    tp = plan.layout.gpus  # GPUs per replica
    price = plan.cost.per_hour / plan.gpus  # per GPU-hour
    gpus = predictive.billed * tp
    window = predictive.times.size * (step if step is not None else DEFAULT_SCALING_STEP)
    return DemandPlan(
        predictive=predictive,
        reactive=reactive,
        tensor_parallel=tp,
        peak_gpus=float(gpus.max()),
        mean_gpus=float(gpus.mean()),
        cost=(predictive.replica_hours * tp * price).to("USD"),
        reactive_cost=(reactive.replica_hours * tp * price).to("USD"),
        static_cost=(float(gpus.max()) * window * price).to("USD"),
    )
