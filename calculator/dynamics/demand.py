"""Demand over a day or a week: a piecewise-linear curve of request rates, from a named shape or a file.

A :class:`DemandCurve` holds its knots in seconds and request/s (plain float arrays, so the fleet
simulations read it in their inner loops without unit conversions); its public summaries
(:attr:`~DemandCurve.duration`, :attr:`~DemandCurve.mean_rate`, :attr:`~DemandCurve.peak_rate`) are
quantities, and :meth:`~DemandCurve.rate_at` answers in the unit it is asked in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._support import checked
from ..errors import InputError
from ..formula import magnitude
from ..results import Result
from ..types import Fraction, Number, Rate, Time
from ..units import Q_, shown, ureg

__all__ = ["DemandCurve", "DEMAND_SHAPES", "demand_shape", "demand_from_file", "DAY", "WEEK"]

#: Seconds in a day and in a week.
DAY = 86_400.0
WEEK = 7 * DAY

#: The named shapes :func:`demand_shape` draws.
DEMAND_SHAPES = ("diurnal", "weekly", "spike", "flat")


@dataclass(frozen=True, repr=False)
class DemandCurve(Result):
    """Request rate over time, linear between knots and held flat after the last one.

    Attributes
    ----------
    times : numpy.ndarray
        Knot times in seconds from the start of the run, strictly increasing, the first 0.
    rates : numpy.ndarray
        Request rate at each knot, request/s, at least 0.
    name : str
        Where the curve came from (a shape's name, a file's).
    """

    times: np.ndarray = field(repr=False)
    rates: np.ndarray = field(repr=False)
    name: str = "demand"

    def __post_init__(self) -> None:
        times = np.atleast_1d(np.asarray(self.times, dtype=float))
        rates = np.atleast_1d(np.asarray(self.rates, dtype=float))
        if times.ndim != 1 or times.size < 2 or times.shape != rates.shape:
            raise InputError("DemandCurve: 'times' and 'rates' must be 1-D arrays of one length, at least two knots")
        if not (np.all(np.isfinite(times)) and np.all(np.isfinite(rates))):
            raise InputError("DemandCurve: 'times' and 'rates' must be finite")
        if np.any(np.diff(times) <= 0) or times[0] != 0:
            raise InputError(f"DemandCurve: 'times' must start at 0 s and increase strictly, got {shown(times)}")
        if np.any(rates < 0):
            raise InputError(f"DemandCurve: 'rates' must be at least 0 request/s, got {shown(rates)}")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "rates", rates)

    def rate_at(self, t: Any) -> Any:
        """The rate at ``t``: a quantity of time gives request/s as a quantity; plain seconds give plain request/s."""
        if isinstance(t, ureg.Quantity):
            seconds = magnitude("DemandCurve.rate_at", "t", t, "s", "any")
            return Q_(np.interp(seconds, self.times, self.rates), "request/s")
        return np.interp(t, self.times, self.rates)

    def mean_between(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        """Mean rate (request/s) over each interval ``[start, stop)`` in seconds: the exact integral of the curve."""
        start, stop = np.asarray(start, dtype=float), np.asarray(stop, dtype=float)
        return (self._integral(stop) - self._integral(start)) / (stop - start)

    def peak_between(self, start: float, stop: float) -> float:
        """The highest rate (request/s) on ``[start, stop]`` seconds: a forecast's look over its lead time."""
        inside = self.rates[(self.times > start) & (self.times < stop)]
        ends = np.interp([start, stop], self.times, self.rates)
        return float(max(ends.max(), inside.max(initial=0.0)))

    def _integral(self, t: np.ndarray) -> np.ndarray:
        """Requests arrived from 0 to ``t`` seconds (trapezoids between knots, flat after the last)."""
        cumulative = np.concatenate([[0.0], np.cumsum(np.diff(self.times) * (self.rates[1:] + self.rates[:-1]) / 2)])
        index = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, self.times.size - 1)
        rate_there = np.interp(t, self.times, self.rates)
        return cumulative[index] + (t - self.times[index]) * (self.rates[index] + rate_there) / 2

    @property
    def duration(self) -> Any:
        """The span of the knots (the run's length unless the scenario says otherwise)."""
        return Q_(float(self.times[-1]), "s")

    @property
    def mean_rate(self) -> Any:
        """Time-averaged rate over :attr:`duration`."""
        end = self.times[-1]
        return Q_(float(self._integral(np.asarray(end)) / end), "request/s")

    @property
    def peak_rate(self) -> Any:
        """The highest rate on the curve."""
        return Q_(float(self.rates.max()), "request/s")

    def scaled(self, peak_rate: Any) -> DemandCurve:
        """The same shape with its peak at ``peak_rate``."""
        peak = magnitude("DemandCurve.scaled", "peak_rate", peak_rate, "request/s", "positive")
        top = self.rates.max()
        if top <= 0:
            raise InputError(f"DemandCurve.scaled(): the curve {self.name!r} is 0 everywhere; nothing to scale")
        return DemandCurve(self.times, self.rates * (peak / top), self.name)


def _diurnal(hours: np.ndarray, trough: float) -> np.ndarray:
    """A day's shape in [trough, 1]: low at 04:00, high at 16:00 (a raised cosine)."""
    return trough + (1 - trough) * (1 - np.cos(2 * np.pi * (hours - 4) / 24)) / 2


def _shape_knots(shape: str, duration: float, trough: float, spike_at: float, spike_factor: float) -> tuple:
    step = 300.0  # knots every five minutes: the raised cosine is smooth at that spacing
    times = np.arange(0.0, duration + step / 2, step)
    hours = times / 3600 % 24
    if shape == "flat":
        return np.array([0.0, duration]), np.ones(2)
    if shape == "diurnal":
        return times, _diurnal(hours, trough)
    if shape == "weekly":
        weekday = (times // DAY) % 7
        weekend = np.where(weekday >= 5, 0.7, 1.0)  # Saturday and Sunday at 70 % of a weekday
        return times, _diurnal(hours, trough) * weekend
    # spike: a flat base at 1 / spike_factor of the peak, a launch that rises in 5 min and decays over 2 h
    base = 1.0 / spike_factor
    after = np.clip(times - spike_at, 0.0, None)
    rising = np.clip((times - spike_at + 300) / 300, 0.0, 1.0)
    decay = np.where(times >= spike_at, np.exp(-after / 7200), rising)
    return times, base + (1 - base) * decay


@checked(peak_rate="positive", duration="positive", spike_factor="positive")
def demand_shape(
    shape: str,
    peak_rate: Rate,
    *,
    duration: Time = None,
    trough: Fraction = 0.3,
    spike_at: Time = None,
    spike_factor: Number = 4.0,
) -> DemandCurve:
    """A named demand shape scaled to ``peak_rate``.

    Parameters
    ----------
    shape : str
        ``"diurnal"`` (a raised cosine over each day, lowest at 04:00 and highest at 16:00),
        ``"weekly"`` (the diurnal day, weekends at 70 %), ``"spike"`` (a launch: the base at
        ``1 / spike_factor`` of the peak, rising to the peak in 5 minutes at ``spike_at`` and decaying
        with a 2-hour time constant) or ``"flat"``.
    peak_rate : Quantity [request / time]
        The curve's highest rate.
    duration : Quantity [time], optional
        Length of the curve: a day (a week for ``"weekly"``) by default.
    trough : float
        The lowest rate of a day as a share of the peak (diurnal and weekly).
    spike_at : Quantity [time], optional
        When the spike starts (default: 09:00).
    spike_factor : float
        Peak over base of the spike, above 1.

    Returns
    -------
    DemandCurve

    Examples
    --------
    >>> curve = demand_shape("diurnal", Q_(1000, "request/s"))
    >>> curve.peak_rate, round(curve.mean_rate.m_as("request/s"))
    (<Quantity(1000.0, 'request / second')>, 650)
    """
    if shape not in DEMAND_SHAPES:
        raise InputError(f"demand_shape(): argument 'shape' must be one of {', '.join(DEMAND_SHAPES)}, got {shape!r}")
    if not spike_factor > 1:
        raise InputError(f"demand_shape(): argument 'spike_factor' must be above 1, got {shown(spike_factor)}")
    length = duration if duration is not None else (WEEK if shape == "weekly" else DAY)
    at = spike_at if spike_at is not None else 9 * 3600.0
    times, relative = _shape_knots(shape, length, float(trough), at, spike_factor)
    keep = times <= length
    times, relative = times[keep], relative[keep]
    if times[-1] < length:
        times, relative = np.append(times, length), np.append(relative, relative[-1])
    return DemandCurve(times, relative / relative.max() * peak_rate, shape)


def demand_from_file(source: Any, *, bin_width: Time = None) -> DemandCurve:
    """A demand curve from a CSV (or DataFrame) of ``time`` and ``rate`` rows, or from a request trace.

    Parameters
    ----------
    source : str, Path or pandas.DataFrame
        Either a table with columns ``time`` (s) and ``rate`` (request/s), or a request trace with an
        ``arrival_time`` column (the formats the sizer's traces read), whose arrivals are counted per
        ``bin_width`` (:func:`calculator.fleet.demand.demand_from_trace`).
    bin_width : Quantity [time], optional
        The bin of a trace's arrival counts (default one hour; five minutes suits an hour's trace).

    Returns
    -------
    DemandCurve
        Times shifted to start at 0.
    """
    import pandas as pd

    from .._files import MAX_TABLE_BYTES, read_csv
    from ..fleet.demand import demand_from_trace
    from ..serving import read_trace

    if isinstance(source, str | Path):
        frame, name = read_csv(source, MAX_TABLE_BYTES, f"the demand file {source}"), Path(source).name
    elif isinstance(source, pd.DataFrame):
        frame, name = source, "demand"
    else:
        raise InputError(
            f"demand_from_file(): argument 'source' must be a CSV path or a DataFrame, got {shown(source)}"
        )
    if "arrival_time" in frame.columns:
        times, rates = demand_from_trace(frame, bin_width)
        seconds, per_second = times.m_as("s"), rates.m_as("request/s")
    elif {"time", "rate"} <= set(frame.columns):
        seconds = read_trace(frame, ("time",))["time"].to_numpy(dtype=float)
        per_second = pd.to_numeric(frame["rate"], errors="coerce").to_numpy(dtype=float)
        if not np.all(np.isfinite(per_second)) or np.any(per_second < 0):
            raise InputError("demand_from_file(): column 'rate' must hold numbers of request/s at least 0")
    else:
        raise InputError(
            "demand_from_file(): the table needs columns 'time' and 'rate' (a demand curve) or 'arrival_time' "
            f"(a request trace); it has {shown(list(frame.columns))}"
        )
    order = np.argsort(seconds, kind="stable")
    return DemandCurve(seconds[order] - seconds[order][0], per_second[order], name)
