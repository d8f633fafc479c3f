"""A day in production over time: one figure per panel of a :class:`~calculator.dynamics.DayResult`'s windows."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..errors import InputError
from ..results import percentile_label
from ._style import _figure, _finish

__all__ = ["DAY_PANELS", "day_figure"]

#: The panels :func:`day_figure` draws, with their titles.
DAY_PANELS = {
    "load": "Demand, offered load and replicas",
    "ttft": "Time to first token per window",
    "tpot": "Time per output token per window",
    "requests": "Shed, failed and retried requests, and the queue",
}
#: The colour of the windows whose attainment is below the goal.
_MISSED = "rgba(214, 39, 40, 0.15)"


def _missed_spans(start_h: np.ndarray, window_h: float, meets: np.ndarray) -> list[tuple[float, float]]:
    """The runs of consecutive windows that miss the goal, as (start, end) in hours."""
    spans: list[tuple[float, float]] = []
    for begin, missed in zip(start_h, ~meets, strict=True):
        if not missed:
            continue
        if spans and abs(spans[-1][1] - begin) < 1e-9:
            spans[-1] = (spans[-1][0], begin + window_h)
        else:
            spans.append((begin, begin + window_h))
    return spans


def _line(figure: go.Figure, x: np.ndarray, y: Any, name: str, **style: Any) -> None:
    figure.add_trace(go.Scatter(x=x, y=np.asarray(y, dtype=float), name=name, line={"shape": "hv", **style}))


def day_figure(result: Any, panel: str, targets: Any = None) -> go.Figure:
    """One panel of a day in production, window by window over the hours of the run.

    Parameters
    ----------
    result : DayResult
        :func:`calculator.dynamics.run_day`'s result.
    panel : str
        One of :data:`DAY_PANELS`: ``"load"`` (demand and offered rates; ready and starting replicas on a
        second axis), ``"ttft"`` and ``"tpot"`` (p50 and p99 of each window, and the plan's target when
        ``targets`` is given), ``"requests"`` (shed, failed and retried attempts per window as bars; the mean
        queue on a second axis).
    targets : Targets, optional
        The plan's targets (``plan.targets``): the TTFT or TPOT target drawn as a dashed line.

    Returns
    -------
    plotly.graph_objects.Figure
        Windows drawn as steps from their start; the windows whose attainment is below the result's goal
        shaded red.
    """
    if panel not in DAY_PANELS:
        raise InputError(f"day_figure(): argument 'panel' must be one of {', '.join(DAY_PANELS)}, got {panel!r}")
    frame = result.windows
    start = frame["start_s"].to_numpy(dtype=float) / 3600
    window = float(start[1] - start[0]) if start.size > 1 else 1.0
    if panel == "load":
        figure = _figure(DAY_PANELS[panel], "Time [h]", "Rate [request/s]", yaxis={"rangemode": "tozero"}, yaxis2={
            "title": "Replicas [count]", "overlaying": "y", "side": "right", "rangemode": "tozero"})  # fmt: skip
        _line(figure, start, frame["demand_rate"], "demand")
        _line(figure, start, frame["offered_rate"], "offered (with retries)", dash="dot")
        for column, dash in (("ready", "solid"), ("starting", "dash")):
            figure.add_trace(go.Scatter(x=start, y=frame[column].to_numpy(dtype=float), name=f"{column} replicas",
                                        yaxis="y2", line={"shape": "hv", "dash": dash}))  # fmt: skip
    elif panel in ("ttft", "tpot"):
        figure = _figure(DAY_PANELS[panel], "Time [h]", f"{panel.upper()} [ms]")
        for stat in ("p50", "p99"):
            _line(figure, start, frame[f"{panel}_{stat}_s"].to_numpy(dtype=float) * 1e3, f"{panel.upper()} {stat}")
        if targets is not None:
            target = getattr(targets, panel).m_as("ms")
            at = percentile_label(getattr(targets, f"{panel}_percentile"))
            ends = np.array([start[0], start[-1] + window])
            figure.add_trace(go.Scatter(x=ends, y=[target, target], name=f"target ({at})", mode="lines",
                                        line={"dash": "dash", "color": "black"}))  # fmt: skip
    else:
        figure = _figure(DAY_PANELS[panel], "Time [h]", "Attempts per window [requests]", barmode="group",
                         yaxis2={"title": "Mean queue [requests]", "overlaying": "y", "side": "right",
                                 "rangemode": "tozero"})  # fmt: skip
        for column in ("shed", "failed", "retried"):
            figure.add_trace(go.Bar(x=start + window / 2, y=frame[column].to_numpy(dtype=float), name=column,
                                    width=window))  # fmt: skip
        figure.add_trace(go.Scatter(x=start, y=frame["queue"].to_numpy(dtype=float), name="queue (mean)",
                                    yaxis="y2", line={"shape": "hv", "color": "black"}))  # fmt: skip
    for begin, end in _missed_spans(start, window, frame["meets"].to_numpy(dtype=bool)):
        figure.add_vrect(x0=begin, x1=end, fillcolor=_MISSED, line_width=0, layer="below")
    return _finish(figure)
