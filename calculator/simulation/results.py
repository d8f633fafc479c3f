"""A simulated run's results: the per-request frame, the replicas' series, the summary and the verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..results import Result, format_number
from ..types import Rate
from ..units import Q_

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SimulationResult"]


# --------------------------------------------------------------------------------------------
# Results


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(values[lo:hi + 1])`` per pair (``-inf`` where the range is empty), by a sparse table."""
    out = np.full(lo.shape, -np.inf)
    ok = (hi >= lo) & (lo >= 0) & (hi < values.size)
    if values.size == 0 or not ok.any():
        return out
    levels = [values]
    while 2 ** len(levels) <= values.size:
        prev, step = levels[-1], 2 ** (len(levels) - 1)
        levels.append(np.maximum(prev[:-step], prev[step:]))
    lo_ok, hi_ok = lo[ok], hi[ok]
    span = hi_ok - lo_ok + 1
    level = np.floor(np.log2(span)).astype(int)
    result = np.empty(lo_ok.size)
    for k in np.unique(level):
        m = level == k
        table = levels[k]
        result[m] = np.maximum(table[lo_ok[m]], table[hi_ok[m] - 2**k + 1])
    out[ok] = result
    return out


def _frame(raw: dict[str, Any], seed: int, warmup: float, cooldown: float) -> Any:
    """The per-request DataFrame of one seed."""
    import pandas as pd

    n = raw["sent"].size
    first, finish, replica = raw["first"], raw["finish"], raw["replica"]
    gap = np.full(n, np.nan)
    for r, (ends, decoded) in enumerate(zip(raw["ends"], raw["decoded"], strict=True)):
        mine = np.flatnonzero((replica == r) & np.isfinite(finish) & (raw["output"] > 1))
        if mine.size == 0:
            continue
        emits = ends[decoded]
        k0 = np.searchsorted(emits, first[mine], side="right")
        k1 = np.searchsorted(emits, finish[mine], side="right") - 1
        lead = np.where(k0 < emits.size, emits[np.minimum(k0, emits.size - 1)] - first[mine], 0.0)
        inner = _range_max(np.diff(emits), k0, k1 - 1)
        gap[mine] = np.maximum(np.maximum(lead, inner), raw["stall"][mine])
    order = np.argsort(raw["sent"], kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    measured = (rank >= math.floor(warmup * n)) & (rank < n - math.floor(cooldown * n))
    ranks = int(raw.get("ranks", 1))  # the series are per attention rank; a request's replica is its rank's
    outputs = raw["output"]
    ttft = first - raw["sent"]
    tpot = np.where(outputs > 1, (finish - first) / np.maximum(outputs - 1, 1), np.nan)
    return pd.DataFrame(
        {
            "seed": seed,
            "request": np.arange(n),
            "replica": replica // ranks,
            "rank": replica % ranks,
            "arrival": raw["sent"],
            "input_tokens": raw["prompt"],
            "output_tokens": outputs,
            "first_token": first,
            "finish": finish,
            "ttft": ttft,
            "tpot": tpot,
            "tbt_max": gap,
            "e2e": finish - raw["sent"],
            "queue_wait": raw["started"] - raw["arrival"],
            "preemptions": raw["preemptions"],
            "dropped": raw["dropped"],
            "measured": measured & np.isfinite(finish),
        }
    )


def _replica_series(raw: dict[str, Any], seed: int, points: int = 2000) -> tuple[Any, np.ndarray]:
    """KV occupancy and running batch over time (at most ``points`` per replica) and utilization."""
    import pandas as pd

    frames = []
    start = float(np.nanmin(raw["sent"])) if raw["sent"].size else 0.0
    end = float(np.nanmax(raw["finish"])) if np.isfinite(raw["finish"]).any() else start
    span = max(end - start, 1e-12)
    ranks = int(raw.get("ranks", 1))
    for r, (ends, kv, batch) in enumerate(zip(raw["ends"], raw["kv"], raw["batch"], strict=True)):
        if ends.size == 0:
            continue
        pick = np.unique(np.linspace(0, ends.size - 1, min(points, ends.size)).astype(int))
        frames.append(
            pd.DataFrame(
                {
                    "seed": seed,
                    "replica": r // ranks,
                    "rank": r % ranks,
                    "time": ends[pick],
                    "kv_occupancy": kv[pick] / raw["capacity"],
                    "running": batch[pick],
                }
            )
        )
    series = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return series, raw["busy"] / span


#: The statistics of the summary, by metric.
STATISTICS = ("mean", "p50", "p90", "p95", "p99")
METRICS = ("ttft", "tpot", "tbt_max", "e2e", "queue_wait")


def _interval(samples: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval of independent estimates."""
    from scipy import stats

    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(samples.mean())
    if samples.size < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, samples.size - 1) * samples.std(ddof=1) / math.sqrt(samples.size))
    return mean, mean - half, mean + half


@dataclass(frozen=True, repr=False)
class SimulationResult(Result):
    """A simulated run: every request, the summary with confidence intervals, and the verdict.

    Attributes
    ----------
    requests : DataFrame
        One row per request and seed: ``arrival``, ``first_token``, ``finish`` (s from the start),
        ``ttft``, ``tpot`` (NaN for one-token outputs), ``tbt_max`` (longest gap between streamed
        tokens), ``e2e``, ``queue_wait`` (arrival at the engine to first scheduled), ``replica``,
        ``preemptions``, ``dropped`` and ``measured`` (inside the warm-up/cool-down window).
    summary : DataFrame
        Rows ``metric`` x ``statistic`` (mean, p50-p99) with ``value`` (s) and a 95 % interval:
        over seeds when there are several, over ten consecutive batches of requests otherwise.
    attainment : dict
        Share of measured requests meeting each target given (``ttft``, ``tpot``, ``tbt_max``)
        and all of them (``all``); 0 when no request was measured.
    goodput : Quantity [request / time]
        Measured requests meeting every target, per second of the measured window (0 when no
        request was measured: all refused, or the run stopped before two completed).
    throughput : Quantity [request / time]
        Measured requests completed per second of the measured window (0 likewise).
    utilization : ndarray
        Busy fraction of each replica (mean over seeds).
    occupancy : DataFrame
        ``seed``, ``replica``, ``time``, ``kv_occupancy`` (fraction of the KV cache) and ``running``.
    in_flight, littles_law : float
        Time-average requests in the engines (from the replicas' iterations) and arrival rate x
        mean time in the engine (from the requests): Little's law says they agree.
    meets_targets : bool or None
        Whether the run meets every target given at its percentile (``None`` without targets).
    verdict : str
        The targets checked and the values reached, or why the run is not trustworthy.
    stable : bool
        False when the backlog grows through the run (the offered load exceeds what it serves).
    truncated : str
        Why the run stopped early ("" when it ran to the end).
    dropped : int
        Requests refused because they can never fit the KV cache.
    seeds : tuple of int
    replicas : int
    router : str
    """

    requests: pd.DataFrame = field(repr=False)
    summary: pd.DataFrame = field(repr=False)
    attainment: dict[str, float]
    goodput: Rate
    throughput: Rate
    utilization: np.ndarray
    occupancy: pd.DataFrame = field(repr=False)
    in_flight: float
    littles_law: float
    meets_targets: bool | None
    verdict: str
    stable: bool
    truncated: str
    dropped: int
    seeds: tuple[int, ...]
    replicas: int
    router: str

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain records and the verdict (the per-request frame stays in ``requests``)."""
        return {
            "summary": self.summary.to_dict(orient="records"),
            "attainment": dict(self.attainment),
            "goodput": self.goodput,
            "throughput": self.throughput,
            "utilization": [float(u) for u in np.atleast_1d(self.utilization)],
            "in_flight": self.in_flight,
            "littles_law": self.littles_law,
            "meets_targets": self.meets_targets,
            "verdict": self.verdict,
            "stable": self.stable,
            "truncated": self.truncated,
            "dropped": self.dropped,
            "seeds": list(self.seeds),
            "replicas": self.replicas,
            "router": self.router,
        }

    def value(self, metric: str, statistic: str = "mean") -> Any:
        """One summary value as a quantity (``result.value("ttft", "p99")``)."""
        row = self.summary[(self.summary.metric == metric) & (self.summary.statistic == statistic)]
        if row.empty:
            raise InputError(
                f"SimulationResult.value(): no {metric!r}/{statistic!r}; metrics {METRICS}, statistics {STATISTICS}"
            )
        return Q_(float(row.value.iloc[0]), "s")


def _percentile_value(values: np.ndarray, statistic: str) -> float:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan
    if statistic == "mean":
        return float(values.mean())
    return float(np.quantile(values, float(statistic[1:]) / 100))


def _summarize(
    frames: list[Any],
    series: list[Any],
    utilization: list[np.ndarray],
    raws: list[dict[str, Any]],
    targets: dict[str, tuple[float, str]],
    replicas: int,
    router: str,
    seeds: tuple[int, ...],
) -> SimulationResult:
    import pandas as pd

    requests = pd.concat(frames, ignore_index=True)
    measured = requests[requests.measured]
    attainment, ok_all = _attainment(measured, targets)
    flow = _Flow.of(frames, raws)
    goodput_count = int(ok_all.sum()) if targets else flow.completed
    # No measured window (every request refused, or a run cut short before two completed): none served.
    throughput = flow.completed / flow.window if flow.window > 0 else 0.0
    goodput = goodput_count / flow.window if flow.window > 0 else 0.0
    occupancy = pd.concat(series, ignore_index=True) if series else pd.DataFrame()
    truncated = "; ".join(sorted({r["truncated"] for r in raws if r["truncated"]}))
    dropped = int(requests.dropped.sum())
    meets, verdict = _verdict(measured, targets, truncated, flow.stable, dropped)
    return SimulationResult(
        requests=requests,
        summary=_summary_table(frames, measured, targets),
        attainment=attainment,
        goodput=Q_(goodput, "request/s"),
        throughput=Q_(throughput, "request/s"),
        utilization=np.mean(np.array(utilization), axis=0),
        occupancy=occupancy,
        in_flight=flow.in_flight,
        littles_law=flow.little,
        meets_targets=meets,
        verdict=verdict,
        stable=flow.stable,
        truncated=truncated,
        dropped=dropped,
        seeds=seeds,
        replicas=replicas,
        router=router,
    )


def _summary_table(frames: list[Any], measured: Any, targets: dict[str, tuple[float, str]]) -> Any:
    """Each metric's statistics over the measured requests, with the interval of independent estimates."""
    import pandas as pd

    rows = []
    extra = sorted({s for _, s in targets.values()} - set(STATISTICS) - {"mean"})
    for metric in METRICS:
        for statistic in (*STATISTICS, *extra):
            # The value pools every seed's measured requests (the verdict reads the same); the
            # interval's half-width comes from the spread of independent estimates: the seeds, or
            # ten consecutive batches of requests when there is one seed.
            values = measured[metric].to_numpy(dtype=float)
            value = _percentile_value(values, statistic)
            if len(frames) >= 2:
                parts = [f.loc[f.measured, metric].to_numpy(dtype=float) for f in frames]
            else:
                parts = np.array_split(values, 10) if values.size >= 20 else [values]
            center, low, high = _interval(np.array([_percentile_value(part, statistic) for part in parts]))
            low, high = value - (center - low), value + (high - center)
            low, high = max(min(low, value), 0.0), max(high, value)  # latencies are >= 0
            rows.append({"metric": metric, "statistic": statistic, "value": value, "low": low, "high": high})
    return pd.DataFrame(rows)


def _attainment(measured: Any, targets: dict[str, tuple[float, str]]) -> tuple[dict[str, float], np.ndarray]:
    """The share of measured requests within each target, and which requests met them all."""
    attainment: dict[str, float] = {}
    ok_all = np.ones(len(measured), dtype=bool)
    for metric, (target, _) in targets.items():
        values = measured[metric].to_numpy(dtype=float)
        ok = ~(values > target)  # NaN (one-token outputs have no TPOT) counts as met
        attainment[metric] = float(ok.mean()) if ok.size else 0.0  # none measured: none met it
        ok_all &= ok
    if targets:
        attainment["all"] = float(ok_all.mean()) if ok_all.size else 0.0
    return attainment, ok_all


@dataclass(frozen=True)
class _Flow:
    """What the seeds' runs carried: the measured window and completions, Little's law, stability."""

    window: float
    completed: int
    in_flight: float
    little: float
    stable: bool

    @classmethod
    def of(cls, frames: list[Any], raws: list[dict[str, Any]]) -> _Flow:
        window, completed, in_flight, little, stable = 0.0, 0, 0.0, 0.0, True
        for frame, raw in zip(frames, raws, strict=True):
            m = frame[frame.measured]
            if len(m) >= 2:
                window += float(m.finish.max() - m.arrival.min())
                completed += len(m)
            # Little's law over the whole run: the replicas' time-average population vs rate x time.
            engine_arrival = raw["arrival"]
            ok = np.isfinite(raw["finish"])
            span = float(np.nanmax(raw["finish"]) - engine_arrival.min()) if ok.any() else 0.0
            if span > 0:
                area = 0.0
                for ends, starts, population in zip(raw["ends"], raw["starts"], raw["in_system"], strict=True):
                    area += float(np.sum(population * (ends[: starts.size] - starts)))
                in_flight += area / span / len(frames)
                little += float(np.sum(raw["finish"][ok] - engine_arrival[ok])) / span / len(frames)
            stable &= _stable(raw)
        return cls(window, completed, in_flight, little, stable)


def _verdict(
    measured: Any, targets: dict[str, tuple[float, str]], truncated: str, stable: bool, dropped: int
) -> tuple[bool | None, str]:
    """Whether the run meets its targets (None without targets), and the sentence that says why."""
    meets = None
    parts = []
    if targets:
        meets = True
        for metric, (target, statistic) in targets.items():
            value = _percentile_value(measured[metric].to_numpy(dtype=float), statistic)
            if math.isnan(value):
                # No value: no request was measured, or none emitted a second token (no TPOT or gap).
                good = len(measured) > 0 and metric != "ttft"
                parts.append(
                    f"{statistic} {metric}: no request emitted a second token"
                    if good
                    else f"{statistic} {metric}: no request was measured"
                )
            else:
                good = bool(value <= target)
                shown, limit = format_number(value * 1e3), format_number(target * 1e3)
                parts.append(f"{statistic} {metric} {shown} ms {'<=' if good else '>'} {limit} ms")
            meets &= good
    verdict = "; ".join(parts) if parts else "no targets given"
    problems = []
    if truncated:
        problems.append(f"run incomplete: {truncated}")
    if not stable:
        problems.append("the backlog grows through the run: the load exceeds what the replicas serve")
    if dropped:
        problems.append(f"{dropped} requests can never fit the KV cache and were refused")
    if problems:
        meets = False if meets is not None else None
        verdict = "; ".join([*problems, verdict])
    return meets, verdict


def _stable(raw: dict[str, Any]) -> bool:
    """False when the requests in the system keep growing while arrivals last.

    A stable fleet holds about as many requests at the last arrival as once it has filled (when a
    fifth of them had arrived, or a median request's time in the system after the first arrival,
    whichever is later: long requests take that long to reach their steady population); an
    overloaded one holds more and more (starting empty, about five times as many). The run is
    unstable when the count at the end exceeds twice the earlier count plus ten and the growth is
    over 5 % of the arrivals in between.
    """
    kept = ~raw["dropped"]
    arrival = np.sort(raw["arrival"][kept])
    if arrival.size < 50:
        return True
    finish = raw["finish"][kept]
    end = arrival[-1]
    filled = arrival[0] + float(np.median(finish - raw["arrival"][kept]))
    start = arrival[arrival.size // 5]
    if start < filled < arrival[arrival.size // 2]:
        start = filled  # a run too short to fill by half way keeps the fifth

    def in_system(t: float) -> int:
        return int(np.count_nonzero(arrival <= t) - np.count_nonzero(finish <= t))

    before, after = in_system(start), in_system(end)
    arrived = np.count_nonzero((arrival > start) & (arrival <= end))
    return not (after > 2 * before + 10 and after - before > 0.05 * arrived)
