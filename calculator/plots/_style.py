"""The rules every figure of :mod:`calculator.plots` follows: layout, axis titles, ticks, hover text, legend.

Builders start from :func:`_figure` and end with :func:`_finish` (docs/ARCHITECTURE.md, "Charts").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

#: Layout shared by every figure: compact margins, hover labels that show whole trace names.
_LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "height": 440,
    "hoverlabel": {"namelength": -1},
}
#: Pixels at the top of a figure for its title; the legend starts below them (see :func:`_finish`).
_TITLE_BAND = 44

#: Mantissas of the log-axis ticks per decade by the decades the data span (up to one, up to three; beyond: 1).
_MANTISSAS = ((1.0, (1, 1.5, 2, 3, 4, 5, 6, 8)), (3.0, (1, 2, 5)))
_MAX_LOG_TICKS = 12


def _figure(title: str, x_title: str, y_title: str, **layout: Any) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, **{**_LAYOUT, **layout})
    return figure


def _tick_label(value: float) -> str:
    """A tick value as a plain number (``0.002``, ``5``, ``16,384``), never an SI prefix."""
    if value != 0 and not 1e-4 <= abs(value) < 1e12:
        mantissa, exponent = f"{value:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{float(f'{value:.12g}'):,.12g}"


def _log_ticks(values: np.ndarray, powers_of_two: bool = False) -> dict[str, Any]:
    """Explicit ticks of a log axis over ``values``: powers of two (1, 2, 4, 8, ...) or 1-2-5 decades.

    The ticks cover the data and one step beyond each end (Plotly pads the range), at most about
    :data:`_MAX_LOG_TICKS` of them (every other power or decade when the data span more).
    """
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size == 0:
        return {}
    low, high = float(positive.min()), float(positive.max())
    if powers_of_two:
        first, last = int(np.floor(np.log2(low))), int(np.ceil(np.log2(high)))
        step = max(1, int(np.ceil((last - first + 1) / _MAX_LOG_TICKS)))
        ticks = [2.0**k for k in range(first - first % step, last + step, step)]
    else:
        first, last = int(np.floor(np.log10(low))), int(np.ceil(np.log10(high)))
        span = np.log10(high) - np.log10(low)
        mantissas = next((m for limit, m in _MANTISSAS if span <= limit), (1,))
        step = max(1, int(np.ceil((last - first + 1) / _MAX_LOG_TICKS))) if len(mantissas) == 1 else 1
        candidates = sorted(m * 10.0**e for e in range(first - first % step, last + 1, step) for m in mantissas)
        below = [t for t in candidates if t <= low]
        above = [t for t in candidates if t >= high]
        start = below[-1] if below else candidates[0]
        stop = above[0] if above else candidates[-1]
        ticks = [t for t in candidates if start <= t <= stop]
    return {"tickvals": ticks, "ticktext": [_tick_label(t) for t in ticks]}


def _axis_values(figure: go.Figure, axis: str) -> np.ndarray:
    """Every number drawn against layout axis ``axis`` (``"xaxis"``, ``"yaxis2"``): traces and line shapes."""
    letter, suffix = axis[0], axis[5:]
    ref = letter + suffix  # "x", "y2"
    found: list[np.ndarray] = []
    for trace in figure.data:
        if (getattr(trace, f"{letter}axis", None) or letter) == ref and getattr(trace, letter, None) is not None:
            try:
                found.append(np.asarray(getattr(trace, letter), dtype=float).ravel())
            except (TypeError, ValueError):  # a category axis
                continue
    for shape in figure.layout.shapes:
        if getattr(shape, f"{letter}ref") == ref:
            found.append(np.array([getattr(shape, f"{letter}0"), getattr(shape, f"{letter}1")], dtype=float))
    return np.concatenate(found) if found else np.array([])


def _hover_value(axis: Any, letter: str) -> str:
    """The hover template of one coordinate, formatted like its axis (a share as a percentage)."""
    if axis.type == "category":
        return f"%{{{letter}}}"
    if (axis.tickformat or "").endswith("%"):
        return f"%{{{letter}:.1%}}"
    return f"%{{{letter}:,.4~g}}"


def _finish(figure: go.Figure, *, powers_of_two: Sequence[str] = ()) -> go.Figure:
    """The rules every figure follows (docs/ARCHITECTURE.md, "Charts").

    Tick labels are plain numbers in the axis unit (no ``100µ`` on an axis in ms, no ``2k``); a log axis
    gets explicit ticks over its data, powers of two on the axes named in ``powers_of_two`` (``"xaxis"``:
    tensor-parallel degrees, batches, GPU counts) and 1-2-5 decades otherwise; a trace without its own hover
    template shows both coordinates under the axis titles, with their units; an annotation on a log axis is
    moved to the logarithm of its value (where Plotly draws it). Call it once, last. The title is pinned to the
    top and the legend runs horizontally just below it, above the plotting area, wrapping into rows as the
    names need: Plotly pushes the plot down by the legend's height, so the legend never covers data, an axis,
    a second y axis at the right or the title, however long the names or narrow the page.
    """
    axes = [name for name in figure.layout if re.fullmatch(r"[xy]axis\d*", name)]
    for name in axes:
        axis = figure.layout[name]
        axis.update(exponentformat="none", separatethousands=True, automargin=True)
        if axis.overlaying:  # Plotly would sync its ticks to the main axis' grid (labels such as 64.2, 84.2)
            axis.update(tickmode="auto", showgrid=False)
        if axis.type == "log":
            axis.update(tickmode="array", **_log_ticks(_axis_values(figure, name), name in powers_of_two))
    for annotation in figure.layout.annotations:  # Plotly places an annotation on a log axis at log10(value)
        for letter in "xy":
            ref, value = getattr(annotation, f"{letter}ref") or letter, getattr(annotation, letter)
            on_log = re.fullmatch(r"[xy]\d*", ref) and figure.layout[f"{letter}axis{ref[1:]}"].type == "log"
            if on_log and value is not None and float(value) > 0:
                annotation[letter] = float(np.log10(float(value)))
    for trace in figure.data:
        if trace.hovertemplate is not None or trace.type not in ("scatter", "bar"):
            continue
        parts = []
        for letter in "xy":
            ref = getattr(trace, f"{letter}axis", None) or letter
            axis = figure.layout[f"{letter}axis{ref[1:]}"]
            title = axis.title.text or ""
            value = _hover_value(axis, letter)
            parts.append(f"{title}: {value}" if title else value)
        if getattr(trace, "text", None) is not None:
            parts.append("%{text}")
        trace.hovertemplate = "<br>".join(parts)
    height = figure.layout.height or _LAYOUT["height"]
    figure.update_layout(
        showlegend=True,
        title={"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 12}},
        legend={
            "orientation": "h",
            "xanchor": "left",
            "x": 0,
            "yref": "container",
            "yanchor": "top",
            "y": 1 - _TITLE_BAND / height if figure.layout.title.text else 1,
        },
    )
    return figure
