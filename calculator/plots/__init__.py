"""Plotly figures of the library's results: the chapter's figures, rebuilt from live numbers.

Every builder takes what a library function returned (a result dataclass, a DataFrame, quantities)
and returns a :class:`plotly.graph_objects.Figure`. The builders compute nothing: each number drawn
is a value the library produced, converted only to the display unit named in the axis title. The
dashboard (``app_pages/``) and notebooks call the same builders.

plotly is imported by this module only; ``import calculator`` never loads it.

>>> from calculator import Q_
>>> from calculator.memory import kv_wall
>>> wall = kv_wall(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), [1024, 65_536], [1, 8])
>>> fig = kv_wall_figure(wall)
>>> [trace.name for trace in fig.data]
['batch 1', 'batch 8', 'batch 8: wall', 'capacity 80 GB']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..errors import InputError
from ..results import percentile_label
from ..units import ureg
from ._style import _LAYOUT, _figure, _finish
from .day import day_figure

__all__ = [
    "ACCELERATOR_COLORS",
    "accelerator_color",
    "batching_curve_figure",
    "benchmark_prediction_figure",
    "cost_curves_figure",
    "curves_figure",
    "day_figure",
    "demand_schedule_figure",
    "frontier_figure",
    "hockey_stick_figure",
    "kv_occupancy_over_time",
    "kv_wall_figure",
    "latency_distribution",
    "max_load_figure",
    "memory_breakdown_figure",
    "speculative_speedup_figure",
    "tp_layer_time_figure",
    "unit_cost_figure",
    "verification_chart",
]

#: One colour per accelerator on every figure and page: the colour of the accelerator at position k of the
#: registry's accelerator list is ``ACCELERATOR_COLORS[k]`` (the qualitative D3 palette, then seven hues of D3's
#: category20b), one per packaged accelerator.
ACCELERATOR_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#bd9e39",
)  # fmt: skip
#: Marker symbol of each precision (of :data:`calculator.precision.PRECISIONS`; aliases resolve first).
_PRECISION_SYMBOLS = {
    "fp16": "circle", "bf16": "circle-open", "fp8": "diamond", "int8": "diamond-open", "fp4": "square",
    "int4": "square-open", "fp32": "triangle-up", "tf32": "triangle-up-open", "fp64": "pentagon",
}  # fmt: skip


def _values(value: Any, unit: str) -> np.ndarray:
    """Magnitudes in ``unit`` (a quantity), or the plain numbers as they are."""
    if isinstance(value, ureg.Quantity):
        return np.atleast_1d(np.asarray(value.m_as(unit), dtype=float))
    return np.atleast_1d(np.asarray(value, dtype=float))


def _symbol(unit: str) -> str:
    """The unit's symbol for an axis title (``GB``, ``ms``, ``USD/h``)."""
    return f"{ureg.Unit(unit):~P}" if unit else ""


def _title(name: str, unit: str) -> str:
    """``name [symbol]``; without a unit the name as given (a plain number names its kind: ``"Replicas [count]"``)."""
    symbol = _symbol(unit)
    return f"{name} [{symbol}]" if symbol else name


def accelerator_color(accelerator: str, registry: Any = None) -> str:
    """The colour of an accelerator on every figure, whatever subset or order a figure shows.

    Parameters
    ----------
    accelerator : str
        Registry id (``"h100-sxm"``).
    registry : Registry, optional
        The registry the id comes from (default: the built-in one). Its k-th accelerator gets
        ``ACCELERATOR_COLORS[k]`` (cycling), so the built-in accelerators keep their colours when a user
        registry adds entries after them; an id the registry does not hold gets a colour from a hash of the id.

    Returns
    -------
    str
        A ``#rrggbb`` colour.
    """
    import zlib

    from .._support import registry_or_default

    ids = list(registry_or_default(registry, "accelerator_color").accelerators)
    position = ids.index(accelerator) if accelerator in ids else zlib.crc32(str(accelerator).encode())
    return ACCELERATOR_COLORS[position % len(ACCELERATOR_COLORS)]


def _precision_symbol(precision: str) -> str:
    """The marker symbol of a precision (the same on every figure; ``circle`` for an unknown name)."""
    from ..precision import ALIASES

    name = str(precision).lower()
    return _PRECISION_SYMBOLS.get(ALIASES.get(name, name), "circle")


def curves_figure(
    x: Any,
    series: Mapping[str, Any],
    *,
    x_name: str,
    y_name: str,
    x_unit: str = "",
    y_unit: str = "",
    title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    mode: str = "lines",
    reference: Mapping[str, float] | None = None,
    powers_of_two: bool = False,
) -> go.Figure:
    """One line per series over a shared x axis (the general builder the specific ones follow).

    Parameters
    ----------
    x : array or Quantity
        The shared x values.
    series : mapping of str to array or Quantity
        Name -> y values (same length as ``x``).
    x_name, y_name : str
        Axis names; the unit symbol is appended. A plain-number axis names its kind in brackets itself
        (``"Fan-out [leaves]"``, ``"Bubble [fraction]"``).
    x_unit, y_unit : str
        Display units (``""`` for plain numbers).
    title : str
        Figure title.
    log_x, log_y : bool
        Logarithmic axes.
    mode : str
        Plotly trace mode (``"lines"``, ``"lines+markers"``, ``"markers"``).
    reference : mapping of str to float, optional
        Horizontal reference lines (label -> y value in ``y_unit``).
    powers_of_two : bool
        Ticks of a logarithmic x axis at powers of two (degrees, batches, counts of devices).

    Returns
    -------
    plotly.graph_objects.Figure
    """
    figure = _figure(title, _title(x_name, x_unit), _title(y_name, y_unit))
    xs = _values(x, x_unit)
    for name, ys in series.items():
        figure.add_trace(go.Scatter(x=xs, y=_values(ys, y_unit), name=name, mode=mode))
    for label, level in (reference or {}).items():
        figure.add_hline(y=level, line_dash="dash", line_color="gray", annotation_text=label)
    figure.update_xaxes(type="log" if log_x else "linear")
    figure.update_yaxes(type="log" if log_y else "linear")
    return _finish(figure, powers_of_two=("xaxis",) if powers_of_two else ())


def frontier_figure(table: Any, plan: Any = None, *, registry: Any = None) -> go.Figure:
    """The throughput-vs-interactivity frontier (Figure 6) from :func:`calculator.fleet.frontier`.

    Parameters
    ----------
    table : pandas.DataFrame
        The frontier table: one row per fitting (accelerator, precision, TP, batch), with
        ``tokens_per_s_per_user``, ``tokens_per_s_per_gpu`` and ``pareto``.
    plan : FleetPlan, optional
        A feasible plan whose configuration is marked (the row with its accelerator, precision,
        tensor-parallel degree and batch).
    registry : Registry, optional
        The registry the accelerator ids come from (their colours: :func:`accelerator_color`).

    Returns
    -------
    plotly.graph_objects.Figure
        One marker trace per accelerator and precision (every configuration, faint; the accelerator's
        colour, the precision's symbol), one line per accelerator through its Pareto points (``pareto``: no
        configuration of the same accelerator, at any precision, beats it on both axes), and a star for the plan.
    """
    figure = _figure(
        "Throughput vs interactivity",
        "Interactivity per user, 1/TPOT [token/s]",
        "Output throughput per GPU [token/s]",
    )
    for (accelerator, precision), group in table.groupby(["accelerator", "precision"], sort=False):
        hover = [f"TP {t}, batch {b}" for t, b in zip(group.tensor_parallel, group.batch, strict=True)]
        figure.add_trace(
            go.Scatter(
                x=group.tokens_per_s_per_user,
                y=group.tokens_per_s_per_gpu,
                mode="markers",
                name=f"{accelerator} {precision}",
                marker={
                    "size": 6,
                    "opacity": 0.4,
                    "color": accelerator_color(accelerator, registry),
                    "symbol": _precision_symbol(precision),
                },
                text=hover,
                legendgroup=accelerator,
            )
        )
    for accelerator, group in table.groupby("accelerator", sort=False):
        best = group[group.pareto].sort_values("tokens_per_s_per_user")
        figure.add_trace(
            go.Scatter(
                x=best.tokens_per_s_per_user,
                y=best.tokens_per_s_per_gpu,
                mode="lines+markers",
                name=f"{accelerator} frontier",
                line={"color": accelerator_color(accelerator, registry), "width": 2.5},
                text=[
                    f"{p}, TP {t}, batch {b}"
                    for p, t, b in zip(best.precision, best.tensor_parallel, best.batch, strict=True)
                ],
                legendgroup=accelerator,
            )
        )
    layout = getattr(plan, "layout", None) if getattr(plan, "feasible", False) else None
    if layout is not None:
        row = table[
            (table.accelerator == plan.accelerator)
            & (table.precision == plan.precision)
            & (table.tensor_parallel == layout.stage_gpus)
            & (table.get("expert_parallel", 1) == layout.expert_parallel)
            & (table.get("data_parallel", 1) == layout.data_parallel)
            & (table.batch == plan.batch)
        ]
        if len(row):
            figure.add_trace(
                go.Scatter(
                    x=row.tokens_per_s_per_user,
                    y=row.tokens_per_s_per_gpu,
                    mode="markers",
                    name="plan",
                    marker={"symbol": "star", "size": 16, "color": "black"},
                    text=[f"{plan.accelerator} {plan.precision}, TP {layout.stage_gpus}, batch {plan.batch}"],
                )
            )
    return _finish(figure)


def kv_wall_figure(wall: Any, unit: str = "GB") -> go.Figure:
    """The KV cache wall (Figure 9) from :func:`calculator.memory.kv_wall`.

    Parameters
    ----------
    wall : KvWall
        Footprints over a batch x context grid, the device capacity and each batch's boundary.
    unit : str
        Memory display unit (``"GB"`` or ``"GiB"``).

    Returns
    -------
    plotly.graph_objects.Figure
        One line per batch (memory in use against context) on a logarithmic memory axis, so the capacity
        and every crossing stay readable beside footprints many times larger; the capacity as a dashed
        line named in the legend (``capacity 74.51 GiB``); and each batch's boundary (the longest context
        that fits) as an open marker on the capacity line, in the batch's colour.
    """
    figure = _figure("The KV cache wall", "Context [token]", _title("Memory per device", unit))
    contexts = _values(wall.contexts, "")
    footprint = np.atleast_2d(wall.footprint.m_as(unit))
    capacity = float(wall.capacity.m_as(unit))
    symbol = _symbol(unit)
    colors = _colors()
    rows = zip(np.atleast_1d(wall.batches), footprint, np.atleast_1d(wall.boundary), strict=True)
    for k, (batch, row, boundary) in enumerate(rows):
        name, color, fits_to = f"batch {int(batch)}", colors[k % len(colors)], int(boundary)
        figure.add_trace(
            go.Scatter(
                x=contexts,
                y=row,
                mode="lines",
                name=name,
                legendgroup=name,
                line={"color": color},
                hovertemplate=f"%{{x:,}} token: %{{y:,.4~g}} {symbol}<br>fits up to {fits_to:,} tokens"
                f"<extra>{name}</extra>",
            )
        )
        if contexts.min() <= fits_to <= contexts.max():
            figure.add_trace(
                go.Scatter(
                    x=[fits_to],
                    y=[capacity],
                    mode="markers",
                    name=f"{name}: wall",
                    legendgroup=name,
                    showlegend=False,
                    marker={"symbol": "circle-open", "size": 11, "line": {"width": 2.5}, "color": color},
                    hovertemplate=f"{name} fits up to %{{x:,}} token in {capacity:,.4g} {symbol}<extra></extra>",
                )
            )
    figure.add_trace(
        go.Scatter(
            x=[contexts.min(), contexts.max()],
            y=[capacity, capacity],
            mode="lines",
            name=f"capacity {capacity:,.4g} {symbol}",
            line={"dash": "dash", "color": "black", "width": 2},
            hovertemplate=f"capacity {capacity:,.4g} {symbol}<extra></extra>",
        )
    )
    figure.update_xaxes(type="log")
    figure.update_yaxes(type="log")
    return _finish(figure)


#: Colours of the parts of a memory budget (the free part light, so the used memory stands out).
_MEMORY_PARTS = {"weights": "#4c78a8", "reserve": "#9d755d", "KV cache": "#f58518", "free": "#d9d9d9"}


def memory_breakdown_figure(fits: Mapping[str, Any], unit: str = "GB") -> go.Figure:
    """Per-device memory of one or more fits: weights, reserve, KV cache and what is left free.

    Parameters
    ----------
    fits : mapping of str to MemoryFit
        Label -> a scalar :class:`calculator.memory.MemoryFit`.
    unit : str
        Memory display unit.

    Returns
    -------
    plotly.graph_objects.Figure
        Stacked bars (weights, reserve, KV, free). Each bar's capacity is a dashed line across the whole
        bar, labelled; where the memory in use exceeds it (``fit.missing`` > 0), the part of the stack above
        the capacity is hatched red (``over capacity``) and labelled with the bytes missing.
    """
    figure = _figure("Memory per device", "Configuration", _title("Memory", unit), barmode="stack")
    labels = list(fits)
    symbol = _symbol(unit)
    for name, color in _MEMORY_PARTS.items():
        field = {"KV cache": "kv"}.get(name, name)
        values = [float(getattr(fit, field).m_as(unit)) for fit in fits.values()]
        figure.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color))
    capacities = [float(fit.capacity.m_as(unit)) for fit in fits.values()]
    missing = [float(fit.missing.m_as(unit)) for fit in fits.values()]
    if any(missing):  # the part of the stack above the capacity, hatched over it (an explicit base stacks on nothing)
        figure.add_trace(
            go.Bar(
                x=labels, y=missing, base=capacities, name="over capacity",
                text=[f"over by {m:,.4g} {symbol}" if m else "" for m in missing], textposition="inside",
                insidetextanchor="middle", textfont={"color": "#8b0000", "size": 14},
                marker={"color": "rgba(0, 0, 0, 0)", "line": {"color": "#d62728", "width": 2},
                        "pattern": {"shape": "/", "fgcolor": "#d62728", "bgcolor": "rgba(255, 255, 255, 0.6)"}},
            )
        )  # fmt: skip
    for k, capacity in enumerate(capacities):
        figure.add_shape(
            type="line", xref="x", yref="y", x0=k - 0.5, x1=k + 0.5, y0=capacity, y1=capacity,
            line={"color": "#d62728", "width": 3, "dash": "dash"}, layer="above",
        )  # fmt: skip
        figure.add_annotation(
            x=k + 0.5, y=capacity, xanchor="right", yanchor="bottom", text=f"capacity {capacity:,.4g} {symbol}",
            showarrow=False, font={"color": "#d62728"}, bgcolor="rgba(255, 255, 255, 0.8)",
        )  # fmt: skip
    figure.update_xaxes(type="category")
    figure = _finish(figure)
    figure.update_layout(legend_traceorder="normal")  # the parts in stacking order, left to right
    return figure


def cost_curves_figure(curves: Mapping[str, Any], time_unit: str = "month", cost_unit: str = "USD") -> go.Figure:
    """Cumulative training-plus-serving cost over time (Figure 3), from ``cumulative_cost_curve``.

    Parameters
    ----------
    curves : mapping of str to CostCurve
        Scenario name -> its curve.
    time_unit, cost_unit : str
        Display units.

    Returns
    -------
    plotly.graph_objects.Figure
        One cumulative-cost line per scenario (:func:`calculator.economics.cumulative_cost_curve`),
        its training cost as a dotted line, and a vertical line at each crossover within the horizon.
    """
    figure = _figure(
        "Lifetime cost: training vs serving", _title("Time deployed", time_unit), _title("Cost", cost_unit)
    )
    for name, curve in curves.items():
        elapsed = _values(curve.elapsed, time_unit)
        figure.add_trace(go.Scatter(x=elapsed, y=_values(curve.cumulative_cost, cost_unit), mode="lines", name=name))
        training = float(curve.training_cost.m_as(cost_unit))
        figure.add_trace(
            go.Scatter(
                x=[elapsed[0], elapsed[-1]],
                y=[training, training],
                mode="lines",
                line={"dash": "dot"},
                name=f"{name}: training",
            )
        )
        if curve.crosses_within_horizon:
            crossover = float(curve.crossover.m_as(time_unit))
            figure.add_vline(
                x=crossover,
                line_dash="dash",
                line_color="gray",
                annotation_text=f"{name}: crossover {crossover:,.3g} {_symbol(time_unit)}",
            )
    return _finish(figure)


def unit_cost_figure(volumes: Any, curves: Mapping[str, Any], price: Any = None, unit: str = "USD/ktoken") -> go.Figure:
    """Unit cost against daily volume (Figure 2) from :func:`calculator.economics.unit_cost_at_volume`.

    Parameters
    ----------
    volumes : Quantity [request / time]
        The volumes the curves were evaluated at.
    curves : mapping of str to Quantity [currency / token]
        Serving approach -> unit cost at each volume.
    price : Quantity [currency / token], optional
        The price charged (a dashed line: below it the approach is profitable).
    unit : str
        Display unit of the unit cost.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    reference = {"price": float(price.m_as(unit))} if price is not None else None
    return curves_figure(
        volumes,
        curves,
        x_name="Daily volume",
        y_name="Unit cost",
        x_unit="request/day",
        y_unit=unit,
        title="Unit cost falls with volume",
        log_x=True,
        log_y=True,
        reference=reference,
    )


def batching_curve_figure(points: Any, knee: float | None = None) -> go.Figure:
    """Batching efficiency: per-device throughput and per-user speed against batch size (section 10.6).

    Parameters
    ----------
    points : OperatingPoints
        From :func:`calculator.batching.batch_operating_points` over a range of batch sizes.
    knee : float, optional
        The knee batch size (:func:`calculator.batching.knee_batch_size`), drawn as a vertical line.

    Returns
    -------
    plotly.graph_objects.Figure
        Throughput per device (left axis) and interactivity per user (right axis).
    """
    figure = _figure("Batching efficiency", "Batch size [sequences]", "Throughput per device [token/s]")
    batches = _values(points.batch_size, "")
    figure.add_trace(
        go.Scatter(x=batches, y=_values(points.throughput_per_device, "token/s"), name="throughput per device")
    )
    figure.add_trace(
        go.Scatter(x=batches, y=_values(points.interactivity, "token/s"), name="interactivity per user", yaxis="y2")
    )
    figure.update_layout(yaxis2={"title": "Interactivity per user [token/s]", "overlaying": "y", "side": "right"})
    if knee is not None:
        figure.add_vline(x=float(knee), line_dash="dash", line_color="gray", annotation_text=f"knee {float(knee):.3g}")
    return _finish(figure)


def benchmark_prediction_figure(prediction: Any, concurrency: Any, metric: str = "ttft", unit: str = "ms") -> go.Figure:
    """A closed-loop benchmark's mean TTFT or TPOT against its client concurrency, with the 80 % interval.

    Parameters
    ----------
    prediction : BenchmarkPrediction
        From :func:`calculator.performance.predict_benchmark` over an array of concurrencies.
    concurrency : array of int
        The concurrencies it was called with (the x axis, log scale).
    metric : {"ttft", "tpot"}
        Which of the two to draw.
    unit : str
        Display unit of the time.

    Returns
    -------
    plotly.graph_objects.Figure
        The interval as a band, the prediction as a line, and the points where the KV cache or the engine's
        sequence cap limits the batch marked.
    """
    labels = {"ttft": "Mean TTFT", "tpot": "Mean TPOT"}
    if metric not in labels:
        raise InputError(f"benchmark_prediction_figure(): argument 'metric' must be 'ttft' or 'tpot', got {metric!r}")
    clients = _values(concurrency, "")
    value = _values(getattr(prediction, metric), unit)
    low, high = (_values(end, unit) for end in getattr(prediction, f"{metric}_interval"))
    figure = _figure(f"{labels[metric]} against the clients", "Clients [count]", _title(labels[metric], unit))
    figure.add_trace(go.Scatter(x=clients, y=high, mode="lines", line={"width": 0}, showlegend=False, name="80 % high"))
    figure.add_trace(
        go.Scatter(
            x=clients, y=low, mode="lines", line={"width": 0}, fill="tonexty", fillcolor="rgba(31, 119, 180, 0.2)",
            name="80 % interval",
        )
    )  # fmt: skip
    figure.add_trace(go.Scatter(x=clients, y=value, mode="lines+markers", name="predicted", line={"color": "#1f77b4"}))
    limits = (("memory_limited", "KV cache", "x"), ("sequence_limited", "sequence cap", "cross"))
    for flag, what, symbol in limits:
        limited = np.broadcast_to(np.asarray(getattr(prediction, flag), dtype=bool), clients.shape)
        if limited.any():
            figure.add_trace(
                go.Scatter(
                    x=clients[limited], y=value[limited], mode="markers", name=f"{what} limits the batch",
                    marker={"color": "#d62728", "size": 10, "symbol": symbol},
                )
            )  # fmt: skip
    figure.update_xaxes(type="log")
    figure.update_yaxes(type="log")
    return _finish(figure, powers_of_two=("xaxis",))


def hockey_stick_figure(utilization: Any, waits: Mapping[str, Any], unit: str = "ms") -> go.Figure:
    """Mean queueing wait against utilization: the hockey stick (section 10.6).

    Parameters
    ----------
    utilization : array of float
        Server utilization of each point (``rho``).
    waits : mapping of str to Quantity [time]
        Queue model -> its mean wait at each utilization (``inf`` where the queue is unstable is not
        drawn).
    unit : str
        Display unit of the wait.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    figure = _figure("Wait vs utilization", "Utilization [%]", _title("Mean queueing wait", unit))
    rho = _values(utilization, "")
    for name, wait in waits.items():
        values = _values(wait, unit)
        figure.add_trace(go.Scatter(x=rho, y=np.where(np.isfinite(values), values, np.nan), name=name))
    figure.update_xaxes(tickformat=".0%")
    figure.update_yaxes(type="log")
    return _finish(figure)


def speculative_speedup_figure(acceptance: Any, speedups: Mapping[int, Any]) -> go.Figure:
    """Speculative decoding speedup against acceptance rate, one line per draft length (section 10.7.6).

    Parameters
    ----------
    acceptance : array of float
        Per-token acceptance probabilities.
    speedups : mapping of int to array
        Draft length ``K`` -> :func:`calculator.speculative.speedup` at each acceptance.

    Returns
    -------
    plotly.graph_objects.Figure
        The break-even speedup of 1 is a dashed line.
    """
    return curves_figure(
        acceptance,
        {f"K = {k}": values for k, values in speedups.items()},
        x_name="Acceptance rate α [probability]",
        y_name="Speedup [×]",
        title="Speculative decoding speedup",
        reference={"no gain": 1.0},
    )


def demand_schedule_figure(plans: Mapping[str, Any], time_unit: str = "hour") -> go.Figure:
    """Replicas over a demand curve: predictive against reactive scaling (Figure 21).

    Parameters
    ----------
    plans : mapping of str to ScalingPlan
        Policy name -> :func:`calculator.autoscaling.predictive_schedule` or
        :func:`calculator.autoscaling.simulate_reactive_scaling` on the same curve.
    time_unit : str
        Display unit of the time axis.

    Returns
    -------
    plotly.graph_objects.Figure
        The replicas the demand requires (from the first plan), and the ready replicas of each plan,
        as step lines.
    """
    figure = _figure("Capacity against demand", _title("Time", time_unit), "Replicas [count]")
    first = next(iter(plans.values()))
    figure.add_trace(
        go.Scatter(
            x=_values(first.times, time_unit),
            y=_values(first.required, ""),
            name="required by demand",
            line={"shape": "hv", "dash": "dot", "color": "black"},
        )
    )
    for name, plan in plans.items():
        figure.add_trace(
            go.Scatter(
                x=_values(plan.times, time_unit), y=_values(plan.ready, ""), name=f"{name}: ready", line={"shape": "hv"}
            )
        )
    return _finish(figure)


def tp_layer_time_figure(degrees: Any, times: Mapping[str, Any], unit: str = "ms") -> go.Figure:
    """Layer time against tensor-parallel degree, one line per interconnect (Eq. 13, section 10.10).

    Parameters
    ----------
    degrees : array of int
        Tensor-parallel degrees.
    times : mapping of str to Quantity [time]
        Interconnect -> layer time at each degree (compute divided plus two all-reduces).
    unit : str
        Display unit.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    return curves_figure(
        degrees,
        times,
        x_name="Tensor-parallel degree [GPUs]",
        y_name="Layer time",
        y_unit=unit,
        title="Tensor-parallel layer time",
        log_x=True,
        log_y=True,
        mode="lines+markers",
        powers_of_two=True,
    )


def max_load_figure(bins: Any, expected: Mapping[str, Any], simulated: Mapping[str, Sequence[Any]]) -> go.Figure:
    """Maximum load of random vs power-of-d placement (section 10.11): fluid limit and simulation.

    Parameters
    ----------
    bins : array of int
        Number of bins (replicas), with as many balls (requests).
    expected : mapping of str to array
        Policy -> :func:`calculator.routing.expected_max_load` at each bin count.
    simulated : mapping of str to sequence of MaxLoadSimulation
        Policy -> :func:`calculator.routing.simulate_max_load` at each bin count (mean and standard
        error drawn as markers with error bars).

    Returns
    -------
    plotly.graph_objects.Figure
    """
    figure = _figure("Maximum load: random vs two choices", "Replicas = requests [count]", "Maximum load [requests]")
    xs = _values(bins, "")
    for name, values in expected.items():
        figure.add_trace(go.Scatter(x=xs, y=_values(values, ""), name=f"{name}: expected", mode="lines"))
    for name, runs in simulated.items():
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=[float(run.mean) for run in runs],
                error_y={"type": "data", "array": [float(run.standard_error) for run in runs]},
                name=f"{name}: simulated",
                mode="markers",
            )
        )
    figure.update_xaxes(type="log")
    return _finish(figure)


# --------------------------------------------------------------------------------------------
# Request-level simulation (calculator.simulation)

#: Per-request metrics of a :class:`~calculator.simulation.SimulationResult` and their display names.
_SIMULATED_METRICS = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "tbt_max": "Longest token gap",
    "e2e": "End-to-end latency",
    "queue_wait": "Queue wait",
}
_MEETS, _MISSES = "#2ca02c", "#d62728"


def _colors() -> list[str]:
    """The colour cycle of the shared template (so a replica's two lines can share a colour)."""
    import plotly.io as pio

    return list(pio.templates[_LAYOUT["template"]].layout.colorway)


def latency_distribution(
    result: Any,
    metric: str = "ttft",
    target: Any = None,
    percentile: float | None = None,
    *,
    pooled: bool = False,
    unit: str = "ms",
    log_x: bool = False,
    max_points: int = 2000,
) -> go.Figure:
    """Empirical CDF of a per-request latency of a simulated run, with the target marked.

    Parameters
    ----------
    result : SimulationResult
        From :func:`calculator.simulation.simulate` or :func:`~calculator.simulation.simulate_plan`.
        Only the measured requests (inside the warm-up/cool-down window) are drawn; requests
        without a value (TPOT of a one-token answer) are left out.
    metric : str
        A column of ``result.requests``: ``"ttft"``, ``"tpot"``, ``"tbt_max"``, ``"e2e"`` or
        ``"queue_wait"``.
    target : Quantity [time], optional
        The target, drawn as a vertical dashed line.
    percentile : float, optional
        The share of requests the target is set at (0.99 for a p99 target), drawn as a horizontal
        line. Without it (a target on the mean) the run's mean is drawn as a dotted vertical line.
    pooled : bool
        One curve over every seed's requests instead of one curve per seed.
    unit : str
        Display unit of the latency axis.
    log_x : bool
        Logarithmic latency axis.
    max_points : int
        At most this many points per curve (points of the exact step function, evenly spaced in rank,
        the largest value always included).

    Returns
    -------
    plotly.graph_objects.Figure
        A step line per seed (``seed 0``, ...) or ``all seeds``: x the sorted values, y the share of
        requests at or below each.
    """
    if metric not in _SIMULATED_METRICS:
        raise InputError(
            f"latency_distribution(): 'metric' must be one of {', '.join(_SIMULATED_METRICS)}, got {metric!r}"
        )
    if percentile is not None and not 0 < percentile < 1:
        raise InputError(f"latency_distribution(): 'percentile' must be in (0, 1), got {percentile!r}")
    name = _SIMULATED_METRICS[metric]
    frame = result.requests[result.requests.measured]
    groups = [("all seeds", frame)] if pooled else [(f"seed {seed}", rows) for seed, rows in frame.groupby("seed")]
    figure = _figure(
        f"{name}: {len(frame):,} measured requests, {result.replicas} replicas",
        _title(name, unit),
        "Share of requests at or below [%]",
    )
    for label, rows in groups:
        values = np.sort(rows[metric].to_numpy(dtype=float))
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        ranks = np.unique(np.linspace(0, values.size - 1, min(max_points, values.size)).round().astype(int))
        figure.add_trace(
            go.Scatter(
                x=ureg.Quantity(values[ranks], "s").m_as(unit),
                y=(ranks + 1) / values.size,
                mode="lines",
                line={"shape": "hv"},
                name=label,
                hovertemplate=f"%{{x:.4g}} {_symbol(unit)}: %{{y:.2%}} of requests<extra>{label}</extra>",
            )
        )
    if target is not None:
        level = float(_values(target, unit)[0])
        figure.add_vline(
            x=level,
            line_dash="dash",
            line_color=_MISSES,
            annotation_text=f"target {level:.4g} {_symbol(unit)}",
            annotation_position="top left",
        )
    if percentile is not None:
        figure.add_hline(
            y=percentile,
            line_dash="dot",
            line_color="gray",
            annotation_text=percentile_label(percentile),
            annotation_position="bottom left",
        )
    elif target is not None:
        mean = float(result.value(metric, "mean").m_as(unit))
        figure.add_vline(
            x=mean, line_dash="dot", line_color="gray", annotation_text=f"mean {mean:.4g} {_symbol(unit)}",
            annotation_position="bottom right",
        )  # fmt: skip
    figure.update_yaxes(range=[0, 1.02], tickformat=".0%")
    figure.update_xaxes(type="log" if log_x else "linear")
    return _finish(figure)


def kv_occupancy_over_time(
    result: Any, *, seed: int | None = None, running: bool = True, max_replicas: int = 8, time_unit: str = "s"
) -> go.Figure:
    """KV-cache occupancy (and running sequences) of each replica over a simulated run.

    Parameters
    ----------
    result : SimulationResult
        Its ``occupancy`` frame (``seed``, ``replica``, ``time``, ``kv_occupancy``, ``running``).
    seed : int, optional
        The seed to draw (default: the run's first).
    running : bool
        Also draw the sequences running on each replica (dotted, right axis).
    max_replicas : int
        Draw at most the first this many replicas.
    time_unit : str
        Display unit of the time axis.

    Returns
    -------
    plotly.graph_objects.Figure
        Per replica ``replica k: KV`` (fraction of its KV cache in use) and ``replica k: running``,
        in the same colour, with the cache's capacity (1) as a dashed line.
    """
    chosen = result.seeds[0] if seed is None else seed
    occupancy = result.occupancy
    rows = occupancy[occupancy.seed == chosen] if len(occupancy) else occupancy
    shown = sorted(rows.replica.unique())[:max_replicas] if len(rows) else []
    total = result.replicas
    title = f"KV cache over time, seed {chosen}" + (
        f" (first {len(shown)} of {total} replicas)" if len(shown) < total else ""
    )
    figure = _figure(title, _title("Time", time_unit), "KV cache in use [% of capacity]")
    colors = _colors()
    for k, replica in enumerate(shown):
        group = rows[rows.replica == replica]
        times = ureg.Quantity(group.time.to_numpy(dtype=float), "s").m_as(time_unit)
        color = colors[k % len(colors)]
        figure.add_trace(
            go.Scatter(
                x=times,
                y=group.kv_occupancy.to_numpy(dtype=float),
                mode="lines",
                name=f"replica {replica}: KV",
                legendgroup=f"replica {replica}",
                line={"color": color},
            )
        )
        if running:
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=group.running.to_numpy(dtype=float),
                    mode="lines",
                    name=f"replica {replica}: running",
                    legendgroup=f"replica {replica}",
                    line={"color": color, "dash": "dot", "width": 1},
                    yaxis="y2",
                )
            )
    if running:
        figure.update_layout(
            yaxis2={"title": "Running sequences [count]", "overlaying": "y", "side": "right", "rangemode": "tozero"}
        )
    figure.add_hline(y=1.0, line_dash="dash", line_color="gray", annotation_text="KV capacity")
    figure.update_layout(yaxis_rangemode="tozero", yaxis_tickformat=".0%")
    return _finish(figure)


def verification_chart(verification: Any, plan: Any = None) -> go.Figure:
    """A plan checked by simulation: the target statistics against the replica count.

    Parameters
    ----------
    verification : PlanVerification or FleetPlan
        From :func:`calculator.simulation.verify_plan`, or a plan sized with ``verify=True`` (its
        ``verification``, with the plan's targets).
    plan : FleetPlan, optional
        The plan verified: its targets are drawn (a :class:`PlanVerification` does not record them).

    Returns
    -------
    plotly.graph_objects.Figure
        Two panels: the TTFT statistic the plan targets (log axis) and the mean TPOT, each a line over
        the replica counts simulated (green markers meet every target, red miss one), the targets as
        dashed lines, and vertical lines at the analytical and the simulated replica counts.
    """
    from plotly.subplots import make_subplots

    if hasattr(verification, "verification") and hasattr(verification, "targets"):
        plan, verification = verification, verification.verification
    if verification is None:
        raise InputError("verification_chart(): the plan has no verification (check it with verify_plan)")
    table = verification.table.sort_values("replicas")
    ttft_column = next(c for c in table.columns if c.startswith("ttft_") and c.endswith("_ms"))
    statistic = ttft_column.removeprefix("ttft_").removesuffix("_ms")
    panels = ((ttft_column, f"{statistic} TTFT", "ttft"), ("tpot_mean_ms", "mean TPOT", "tpot"))
    analytical, simulated = verification.analytical_replicas, verification.simulated_replicas
    found = f"simulated {simulated}" if simulated is not None else "no simulated count meets the targets"
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)  # each panel is named by its y axis
    figure.update_layout(title=f"Plan check by simulation: analytical {analytical} replicas, {found}", **_LAYOUT)
    replicas = table.replicas.to_numpy(dtype=float)
    meets = table.meets_targets.to_numpy(dtype=bool)
    hover = [
        f"{int(r)} replicas: attainment {a:.1%}<br>{v}"
        for r, a, v in zip(replicas, table.attainment.to_numpy(dtype=float), table.verdict, strict=True)
    ]
    span = [replicas.min() - 0.5, replicas.max() + 0.5]
    targets = plan.targets if plan is not None else None
    for col, (column, label, key) in enumerate(panels, start=1):
        figure.add_trace(
            go.Scatter(
                x=replicas,
                y=table[column].to_numpy(dtype=float),
                mode="lines+markers",
                name=f"{label} (simulated)",
                marker={"size": 11, "color": [_MEETS if ok else _MISSES for ok in meets]},
                line={"color": "gray"},
                text=hover,
                hovertemplate="%{y:.4g} ms<br>%{text}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        if targets is not None and getattr(targets, key) is not None:
            level = float(getattr(targets, key).m_as("ms"))
            figure.add_trace(
                go.Scatter(
                    x=span,
                    y=[level, level],
                    mode="lines",
                    name=f"{label} target {level:.4g} ms",
                    line={"dash": "dash", "color": _MISSES},
                ),
                row=1,
                col=col,
            )
        figure.update_yaxes(title_text=f"{label} [ms]", row=1, col=col, type="log" if key == "ttft" else "linear")
        figure.update_xaxes(title_text="Replicas [count]", dtick=1, row=1, col=col)
    if simulated == analytical:
        figure.add_vline(x=analytical, line_color=_MEETS, annotation_text=f"analytical = simulated = {analytical}")
    else:
        figure.add_vline(x=analytical, line_dash="dash", line_color="gray", annotation_text=f"analytical {analytical}")
        if simulated is not None:
            figure.add_vline(x=simulated, line_color=_MEETS, annotation_text=f"simulated {simulated}")
    return _finish(figure)
