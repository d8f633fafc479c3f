"""What a day in production returns, whichever mode ran it: a row per reporting window and the day's summary."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..results import Result
from ..types import Money, Time
from ..units import Q_

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["WINDOW_COLUMNS", "DayResult", "attainment_goal", "day_result"]

#: The columns of :attr:`DayResult.windows`, in order, with their units. Counts are requests in the window;
#: rates request/s; times seconds; ``ready`` and ``starting`` the window's mean replicas.
WINDOW_COLUMNS = {
    "start_s": "s",
    "demand_rate": "request/s",
    "offered_rate": "request/s",
    "ready": "replica",
    "starting": "replica",
    "queue": "request",
    "ttft_p50_s": "s",
    "ttft_p99_s": "s",
    "tpot_p50_s": "s",
    "tpot_p99_s": "s",
    "served": "request",
    "shed": "request",
    "failed": "request",
    "retried": "request",
    "attainment": "",
    "gpu_hours": "hour",
    "cost": "USD",
    "meets": "",
}


@dataclass(frozen=True, repr=False)
class DayResult(Result):
    """A plan run through a day: per-window rows and the day's summary.

    Attributes
    ----------
    windows : pandas.DataFrame
        One row per reporting window with the columns of :data:`WINDOW_COLUMNS`: demand (first attempts)
        and offered (with retries) rates, mean ready and starting replicas, the mean queue, TTFT and
        TPOT at p50 and p99 of the requests served, and counts of attempts: served (began service), shed
        (refused by admission), failed (timed out waiting, or lost with a replica or a region) and
        retried (retries that arrived); attainment (first attempts served meeting every target, over
        first attempts arrived: a request that needed a retry does not count as meeting), GPU-hours and
        cost billed (ready, starting and warm-pool replicas), and whether attainment reaches ``goal``.
        With priority classes, ``shed_<class>`` columns follow.
    mode : str
        ``"fluid"`` or ``"requests"``.
    goal : float
        The attainment a window must reach to meet the targets.
    attainment : float
        Over the whole run: requests meeting every target over requests arrived.
    gpu_hours : Quantity [time]
    cost : Quantity [currency]
    hours_missing : Quantity [time]
        Time in windows that miss ``goal``.
    peak_replicas : float
        The most replicas ready and starting in any window (window means).
    verdict : str
        The day in a sentence.
    """

    windows: pd.DataFrame = field(repr=False)
    mode: str
    goal: float
    attainment: float
    gpu_hours: Time
    cost: Money
    hours_missing: Time
    peak_replicas: float
    verdict: str


def attainment_goal(plan: Any, scenario: Any) -> float:
    """The attainment a window must reach: the scenario's ``goal``, else the targets' highest percentile, else 0.5.

    A plan sized for percentile targets promises that share of requests within them; one sized for mean
    targets promises the typical request (the median). Both modes judge their windows with it.
    """
    from .policies import Scenario

    if not isinstance(scenario, Scenario):
        raise InputError(f"attainment_goal(): argument 'scenario' must be a Scenario, got {type(scenario).__name__}")
    if scenario.goal is not None:
        return float(scenario.goal)
    targets = getattr(plan, "targets", None)
    if targets is None:
        raise InputError(f"attainment_goal(): argument 'plan' must be a FleetPlan with targets, got {plan!r:.80}")
    named = [p for p in (targets.ttft_percentile, targets.tpot_percentile) if p is not None]
    return float(max(named)) if named else 0.5


def day_result(windows: Any, window: float, goal: float, mode: str) -> DayResult:
    """The :class:`DayResult` of per-window rows: ``meets``, the summary and the verdict, the same for both modes.

    ``windows`` holds every column of :data:`WINDOW_COLUMNS` but ``meets`` (others, such as ``shed_<class>``,
    follow them); ``window`` is the
    reporting window in seconds; ``goal`` the attainment a window must reach.
    """
    import pandas as pd

    if not isinstance(windows, pd.DataFrame):
        raise InputError(f"day_result(): argument 'windows' must be a DataFrame, got {type(windows).__name__}")
    missing = [c for c in WINDOW_COLUMNS if c != "meets" and c not in windows.columns]
    if missing:
        raise InputError(f"day_result(): argument 'windows' lacks column(s) {missing}")
    for name, value, low in (("window", window, 0.0), ("goal", goal, 0.0)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not low < value < math.inf:
            raise InputError(f"day_result(): argument '{name}' must be a number above 0, got {value!r:.80}")
    if goal > 1:
        raise InputError(f"day_result(): argument 'goal' must be at most 1, got {goal!r}")
    if mode not in ("fluid", "requests"):
        raise InputError(f"day_result(): argument 'mode' must be fluid or requests, got {mode!r:.80}")
    extra = [c for c in windows.columns if c not in WINDOW_COLUMNS]  # a mode's own columns (shed per class) follow
    frame = windows.assign(meets=windows["attainment"].to_numpy() >= goal - 1e-12)[[*WINDOW_COLUMNS, *extra]]
    arrived = frame["demand_rate"].to_numpy() * window
    total = arrived.sum()
    attainment = float(np.dot(frame["attainment"].to_numpy(), arrived) / total) if total > 0 else 1.0
    missing_hours = float((~frame["meets"]).sum()) * window / 3600
    gpu_hours, cost = float(frame["gpu_hours"].sum()), float(frame["cost"].sum())
    peak = float((frame["ready"] + frame["starting"]).max())
    verdict = (
        f"{attainment:.2%} of requests met every target; {missing_hours:.2f} h in windows below {goal:.0%}; "
        f"{gpu_hours:,.0f} GPU-hours, {cost:,.0f} USD; at most {peak:,.0f} replicas"
    )
    return DayResult(
        windows=frame.reset_index(drop=True),
        mode=mode,
        goal=float(goal),
        attainment=attainment,
        gpu_hours=Q_(gpu_hours, "hour"),
        cost=Q_(cost, "USD"),
        hours_missing=Q_(missing_hours, "hour"),
        peak_replicas=peak,
        verdict=verdict,
    )
