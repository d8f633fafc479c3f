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
from .seed import _Run, _simulate_seed

if TYPE_CHECKING:
    from collections.abc import Callable

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
    # Each replica's finished multi-token requests, in request order: grouped once (not a scan per replica).
    eligible = np.flatnonzero(np.isfinite(finish) & (raw["output"] > 1))
    eligible = eligible[np.argsort(replica[eligible], kind="stable")]
    bounds = np.searchsorted(replica[eligible], np.arange(len(raw["ends"]) + 1))
    for r, (ends, decoded) in enumerate(zip(raw["ends"], raw["decoded"], strict=True)):
        mine = eligible[bounds[r] : bounds[r + 1]]
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
            "decode_rounds": raw["rounds"],
            "dropped": raw["dropped"],
            "measured": measured & np.isfinite(finish),
        }
    )


def _replica_series(raw: dict[str, Any], seed: int, rows: int = 2000) -> tuple[Any, np.ndarray]:
    """KV occupancy and running batch over time and utilization.

    At most ``rows`` rows in all: up to 2,000 points per replica (at least 2), and replicas chosen evenly
    over the fleet (first, last and between) when ``rows`` cannot give every replica two.
    """
    import pandas as pd

    start = float(np.nanmin(raw["sent"])) if raw["sent"].size else 0.0
    end = float(np.nanmax(raw["finish"])) if np.isfinite(raw["finish"]).any() else start
    span = max(end - start, 1e-12)
    ranks = int(raw.get("ranks", 1))
    series = raw["ends"]
    points = int(min(max(rows // max(len(series), 1), 2), 2000))
    columns: dict[str, list[np.ndarray]] = {"replica": [], "time": [], "kv": [], "running": []}
    chosen = np.unique(np.linspace(0, len(series) - 1, min(max(rows // points, 1), len(series))).astype(int))
    for r in chosen.tolist():
        ends, kv, batch = series[r], raw["kv"][r], raw["batch"][r]
        if ends.size == 0:
            continue
        pick = np.unique(np.linspace(0, ends.size - 1, min(points, ends.size)).astype(int))
        columns["replica"].append(np.full(pick.size, r))
        columns["time"].append(ends[pick])
        columns["kv"].append(kv[pick] / raw["capacity"])
        columns["running"].append(batch[pick])
    if not columns["time"]:
        return pd.DataFrame(), raw["busy"] / span
    replica = np.concatenate(columns["replica"])
    frame = pd.DataFrame(
        {
            "seed": np.full(replica.size, seed, dtype=np.int64),
            "replica": replica // ranks,
            "rank": replica % ranks,
            "time": np.concatenate(columns["time"]),
            "kv_occupancy": np.concatenate(columns["kv"]),
            "running": np.concatenate(columns["running"]),
        }
    )
    return frame, raw["busy"] / span


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
        One row per request and seed (at most :data:`~calculator.simulation.inputs.MAX_KEPT_REQUESTS` per
        call: beyond that an even sample of each seed's requests, ``simulated_requests`` says how many
        ran): ``arrival``, ``first_token``, ``finish`` (s from the start),
        ``ttft``, ``tpot`` (NaN for one-token outputs), ``tbt_max`` (longest gap between streamed
        tokens), ``e2e``, ``queue_wait`` (arrival at the engine to first scheduled), ``replica``,
        ``preemptions``, ``decode_rounds`` (the decode iterations that emitted its tokens after a prompt's first:
        one a token, fewer under speculative decoding), ``dropped`` and ``measured`` (inside the
        warm-up/cool-down window).
    summary : DataFrame
        Rows ``metric`` x ``statistic`` (mean, p50-p99) with ``value`` (s) and a 95 % interval:
        over seeds when there are several, over ten consecutive batches of requests otherwise. The
        value is exact where it can be: one seed's statistics are of all its requests, and the mean over
        several seeds weighs each seed's mean by its requests; percentiles over several seeds pool the
        measured requests of ``requests`` (all of them up to ``MAX_KEPT_REQUESTS``; beyond, an even
        sample, and ``verdict`` says so). Each seed's estimate behind the interval uses all of its requests.
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
        The seeds that ran (``truncated`` says when the call's deadline left some out).
    replicas : int
    router : str
    simulated_requests : int
        Requests simulated over every seed (``requests`` may keep a sample of them).
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
    simulated_requests: int = 0

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
            "simulated_requests": self.simulated_requests,
        }

    def value(self, metric: str, statistic: str = "mean") -> Any:
        """One summary value as a quantity (``result.value("ttft", "p99")``)."""
        row = self.summary[(self.summary.metric == metric) & (self.summary.statistic == statistic)]
        if row.empty:
            raise InputError(
                f"SimulationResult.value(): no {metric!r}/{statistic!r}; metrics {METRICS}, statistics {STATISTICS}"
            )
        return Q_(float(row.value.iloc[0]), "s")


def _statistic_values(values: np.ndarray, statistics: tuple[str, ...]) -> dict[str, float]:
    """Each statistic (``mean``, ``p50``, ...) of the finite values (NaN when there are none), in one pass."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return dict.fromkeys(statistics, math.nan)
    qs = [float(s[1:]) / 100 for s in statistics if s != "mean"]
    quantiles = iter(np.quantile(values, qs).tolist() if qs else [])
    return {s: float(values.mean()) if s == "mean" else float(next(quantiles)) for s in statistics}


def _every(frame: Any, rows: int) -> Any:
    """At most ``rows`` rows of a frame: all, or every k-th (an even sample over the run)."""
    if len(frame) <= rows:
        return frame
    return frame.iloc[:: -(-len(frame) // max(rows, 1))].reset_index(drop=True)


def _seed_result(run: _Run, progress: Callable[[float], None] | None = None) -> dict[str, Any] | None:
    """One seed simulated and summarized where it ran (None: the call's deadline had passed before it started).

    What leaves the worker is bounded: the seed's statistics, counts and flow, its share (``run.keep``) of
    the per-request rows and (``run.points``) of the occupancy series, and the replicas' busy fractions.
    """
    raw = _simulate_seed(run, progress)
    if raw is None:
        return None
    frame = _frame(raw, run.seed, run.warmup, run.cooldown)
    occupancy, busy = _replica_series(raw, run.seed, run.points)
    measured = frame[frame.measured]
    statistics = run.statistics or STATISTICS
    values = {metric: measured[metric].to_numpy(dtype=float) for metric in METRICS}
    batches = []
    if run.batches:  # the only seed: its interval comes from ten consecutive batches of its requests
        parts = {m: np.array_split(v, 10) if v.size >= 20 else [v] for m, v in values.items()}
        batches = [{m: _statistic_values(p, statistics) for m, p in zip(values, cut, strict=True)}
                   for cut in zip(*parts.values(), strict=True)]  # fmt: skip
    met, ok_all = {}, np.ones(len(measured), dtype=bool)
    for metric, (target, _) in run.targets.items():
        ok = ~(values[metric] > target)  # NaN (one-token outputs have no TPOT) counts as met
        met[metric] = int(ok.sum())
        ok_all &= ok
    met["all"] = int(ok_all.sum())
    return {
        "seed": run.seed,
        "requests": len(frame),
        "kept": _every(frame, run.keep),
        "statistics": {metric: _statistic_values(v, statistics) for metric, v in values.items()},
        "finite": {metric: int(np.count_nonzero(np.isfinite(v))) for metric, v in values.items()},
        "batches": batches,
        "measured": len(measured),
        "met": met,
        "flow": _Flow.of(measured, raw),
        "dropped": int(frame.dropped.sum()),
        "truncated": raw["truncated"],
        "occupancy": occupancy,
        "busy": busy,
    }


def _summarize(
    parts: list[dict[str, Any]],
    targets: dict[str, tuple[float, str]],
    replicas: int,
    router: str,
    seeds_note: str = "",
) -> SimulationResult:
    """The seeds' summaries (:func:`_seed_result`, those that ran) as one result; ``seeds_note``: seeds not run."""
    import pandas as pd

    requests = pd.concat([p["kept"] for p in parts], ignore_index=True)
    kept = requests[requests.measured]
    summary = _summary_table(parts, kept, targets)
    measured = sum(p["measured"] for p in parts)
    attainment = {k: sum(p["met"][k] for p in parts) / measured if measured else 0.0 for k in targets}
    if targets:
        attainment["all"] = sum(p["met"]["all"] for p in parts) / measured if measured else 0.0
    flows = [p["flow"] for p in parts]
    window, completed = sum(f.window for f in flows), sum(f.completed for f in flows)
    stable = all(f.stable for f in flows)
    goodput_count = sum(p["met"]["all"] for p in parts) if targets else completed
    # No measured window (every request refused, or a run cut short before two completed): none served.
    throughput = completed / window if window > 0 else 0.0
    goodput = goodput_count / window if window > 0 else 0.0
    series = [p["occupancy"] for p in parts if len(p["occupancy"])]
    notes = sorted({p["truncated"] for p in parts if p["truncated"]})
    truncated = "; ".join([*notes, seeds_note] if seeds_note else notes)
    dropped = sum(p["dropped"] for p in parts)
    meets, verdict = _verdict(summary, measured, targets, truncated, stable, dropped)
    sampled = _sample_note(parts, len(kept), measured)
    verdict = f"{verdict} ({sampled})" if sampled else verdict
    return SimulationResult(
        requests=requests,
        summary=summary,
        attainment=attainment,
        goodput=Q_(goodput, "request/s"),
        throughput=Q_(throughput, "request/s"),
        utilization=np.mean(np.array([p["busy"] for p in parts]), axis=0),
        occupancy=pd.concat(series, ignore_index=True) if series else pd.DataFrame(),
        in_flight=sum(f.in_flight for f in flows) / len(flows),
        littles_law=sum(f.little for f in flows) / len(flows),
        meets_targets=meets,
        verdict=verdict,
        stable=stable,
        truncated=truncated,
        dropped=dropped,
        seeds=tuple(p["seed"] for p in parts),
        replicas=replicas,
        router=router,
        simulated_requests=sum(p["requests"] for p in parts),
    )


def _summary_table(parts: list[dict[str, Any]], measured: Any, targets: dict[str, tuple[float, str]]) -> Any:
    """Each metric's statistics over the measured requests, with the interval of independent estimates."""
    import pandas as pd

    rows = []
    statistics = _statistics_of(targets)
    for metric in METRICS:
        # The value is exact where it can be: one seed's statistics are of all its requests, and the mean
        # of several seeds weighs each seed's mean by its requests. Percentiles over several seeds pool the
        # measured requests kept (all of them up to MAX_KEPT_REQUESTS; beyond, an even sample, which the
        # verdict says). The interval's half-width comes from the spread of independent estimates, each
        # from all of its requests: the seeds, or ten consecutive batches of requests for one seed.
        pooled = _pooled(parts, metric, measured[metric].to_numpy(dtype=float), statistics)
        for statistic in statistics:
            value = pooled[statistic]
            if len(parts) >= 2:
                estimates = [p["statistics"][metric][statistic] for p in parts]
            else:
                estimates = [batch[metric][statistic] for batch in parts[0]["batches"]]
            center, low, high = _interval(np.array(estimates))
            low, high = value - (center - low), value + (high - center)
            low, high = max(min(low, value), 0.0), max(high, value)  # latencies are >= 0
            rows.append({"metric": metric, "statistic": statistic, "value": value, "low": low, "high": high})
    return pd.DataFrame(rows)


def _pooled(
    parts: list[dict[str, Any]], metric: str, kept: np.ndarray, statistics: tuple[str, ...]
) -> dict[str, float]:
    """The statistics of ``metric`` over every seed's measured requests: exact where they can be (see above)."""
    if len(parts) == 1:
        return dict(parts[0]["statistics"][metric])
    pooled = _statistic_values(kept, statistics)
    counts = np.array([p["finite"][metric] for p in parts], dtype=float)
    if "mean" in pooled and counts.sum() > 0:
        means = np.array([p["statistics"][metric]["mean"] for p in parts])
        pooled["mean"] = float(np.sum(np.where(counts > 0, means, 0.0) * counts) / counts.sum())
    return pooled


def _sample_note(parts: list[dict[str, Any]], kept: int, measured: int) -> str:
    """What the pooled percentiles rest on when a call kept fewer requests than it measured over several seeds."""
    if len(parts) < 2 or kept >= measured:
        return ""
    return f"percentiles over the seeds from an even sample of {kept:,} of the {measured:,} measured requests"


def _statistics_of(targets: dict[str, tuple[float, str]]) -> tuple[str, ...]:
    """The summary's statistics: :data:`STATISTICS` and any other percentile a target is set at."""
    return (*STATISTICS, *sorted({s for _, s in targets.values()} - set(STATISTICS) - {"mean"}))


@dataclass(frozen=True)
class _Flow:
    """What one seed's run carried: the measured window and completions, Little's law, stability."""

    window: float
    completed: int
    in_flight: float
    little: float
    stable: bool

    @classmethod
    def of(cls, measured: Any, raw: dict[str, Any]) -> _Flow:
        window, completed, in_flight, little = 0.0, 0, 0.0, 0.0
        if len(measured) >= 2:
            window = float(measured.finish.max() - measured.arrival.min())
            completed = len(measured)
        # Little's law over the whole run: the replicas' time-average population vs rate x time.
        engine_arrival = raw["arrival"]
        ok = np.isfinite(raw["finish"])
        span = float(np.nanmax(raw["finish"]) - engine_arrival.min()) if ok.any() else 0.0
        if span > 0:
            area = 0.0
            for ends, starts, population in zip(raw["ends"], raw["starts"], raw["in_system"], strict=True):
                area += float(np.sum(population * (ends[: starts.size] - starts)))
            in_flight = area / span
            little = float(np.sum(raw["finish"][ok] - engine_arrival[ok])) / span
        return cls(window, completed, in_flight, little, _stable(raw))


def _verdict(
    summary: Any, measured: int, targets: dict[str, tuple[float, str]], truncated: str, stable: bool, dropped: int
) -> tuple[bool | None, str]:
    """Whether the run meets its targets (None without targets), and the sentence that says why."""
    meets = None
    parts = []
    if targets:
        meets = True
        for metric, (target, statistic) in targets.items():
            row = summary[(summary.metric == metric) & (summary.statistic == statistic)]
            value = float(row.value.iloc[0])
            if math.isnan(value):
                # No value: no request was measured, or none emitted a second token (no TPOT or gap).
                good = measured > 0 and metric != "ttft"
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
