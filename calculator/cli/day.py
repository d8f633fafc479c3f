"""``servecalc day``: a plan (from ``size --json``) run through a day of demand with its autoscaler and failures."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import FormatOption, JsonOption, OutOption, _emit, _fail, _format, _stderr_progress, app
from ._tables import frame_table
from .simulate import _plan_from_json
from .sizing import _quantity

#: The columns of the hourly table, under their headers.
HOURLY_HEADERS = {
    "hour": "hour",
    "demand_rate": "demand [req/s]",
    "offered_rate": "offered [req/s]",
    "ready": "ready",
    "starting": "starting",
    "queue": "queue",
    "ttft_p99_s": "TTFT p99 [ms]",
    "tpot_p99_s": "TPOT p99 [ms]",
    "shed": "shed",
    "failed": "failed",
    "retried": "retried",
    "attainment": "attained",
    "cost": "cost [USD]",
    "missing": "misses",
}


def _time(name: str, text: str | None, *, positive: bool = True) -> Any:
    return None if text is None else _quantity(name, text, "s", positive=positive)


def _demand(plan: Any, demand: str, peak_rate: str | None, duration: Any) -> Any:
    """The demand curve ``--demand`` names: a shape scaled to ``--peak-rate`` (default the plan's rate), or a file."""
    from ..dynamics import DEMAND_SHAPES, demand_from_file, demand_shape
    from ..errors import CalculatorError

    peak = _quantity("peak-rate", peak_rate, "request/s", "request/s", positive=True) if peak_rate else None
    try:
        if demand in DEMAND_SHAPES:
            rate = peak if peak is not None else plan.workload.arrival_rate
            return demand_shape(demand, rate, **({"duration": duration} if duration is not None else {}))
        path = Path(demand)
        if not path.is_file():
            raise _fail(f"option --demand: {demand!r} is neither a shape ({', '.join(DEMAND_SHAPES)}) nor a file")
        curve = demand_from_file(path)
        return curve.scaled(peak) if peak is not None else curve
    except CalculatorError as exc:
        raise _fail(f"option --demand {demand}: {_plain(exc)}") from None


def _plain(exc: BaseException) -> str:
    """A library message without its function's or class's name in front."""
    return re.sub(r"^[\w.]+(\(\))?: ", "", str(exc))


@contextlib.contextmanager
def _day_errors() -> Iterator[None]:
    """A library error as ``error: ...`` in the command's flags, without the class or function it came from."""
    from ..errors import CalculatorError

    try:
        yield
    except CalculatorError as exc:
        raise _fail(type(exc)(_plain(exc))) from None


def _regions(names: list[str]) -> list[str]:
    for name in names:
        if not re.fullmatch(r"[\w.-]+", name):
            raise _fail(f"option --region: a region name is letters, digits, '.', '-' or '_', got {name!r}")
    return names


def _failures(specs: list[str], regions: list[str]) -> tuple[Any, ...]:
    """The --fail specs, each read by ``parse_failure``.

    A kind with no target (``region@14:00``, ``replicas@09:30``) means the first --region, or one replica (node).
    """
    from ..dynamics import parse_failure
    from ..errors import CalculatorError

    def spelled(spec: str) -> str:
        kind, at, when = spec.partition("@")
        if not at or ":" in kind:
            return spec
        if kind.strip() != "region":
            return f"{kind}:1@{when}"
        if not regions:
            raise _fail(f"option --fail {spec}: a region failure names a region; give --region (or region:NAME@...)")
        return f"region:{regions[0]}@{when}"

    try:
        return tuple(parse_failure(spelled(spec)) for spec in specs)
    except CalculatorError as exc:
        raise _fail(f"option --fail: {_plain(exc)}") from None


def _hourly(frame: Any, window: float) -> Any:
    """The windows summed per hour (replicas and queue averaged, p99s the worst window's) for the table."""
    hour = (frame["start_s"] // 3600).astype(int)
    arrived = frame["demand_rate"] * window
    grouped = frame.assign(arrived=arrived, met=frame["attainment"] * arrived, missing=~frame["meets"]).groupby(hour)
    out = grouped.agg(
        demand_rate=("demand_rate", "mean"),
        offered_rate=("offered_rate", "mean"),
        ready=("ready", "mean"),
        starting=("starting", "mean"),
        queue=("queue", "mean"),
        ttft_p99_s=("ttft_p99_s", "max"),
        tpot_p99_s=("tpot_p99_s", "max"),
        shed=("shed", "sum"),
        failed=("failed", "sum"),
        retried=("retried", "sum"),
        met=("met", "sum"),
        arrived=("arrived", "sum"),
        cost=("cost", "sum"),
        missing=("missing", "sum"),
    )
    out["attainment"] = (out["met"] / out["arrived"].where(out["arrived"] > 0)).fillna(1.0)
    out["ttft_p99_s"], out["tpot_p99_s"] = out["ttft_p99_s"] * 1e3, out["tpot_p99_s"] * 1e3
    out["hour"] = [f"d{h // 24} {h % 24:02d}:00" if h >= 24 else f"{h:02d}:00" for h in out.index]
    out["missing"] = [f"{n} windows" if n else "" for n in out["missing"]]
    return out.reset_index(drop=True)


def _text(result: Any, window: float) -> str:
    title = f"A day in production ({result.mode} mode): {result.verdict}"
    return frame_table(_hourly(result.windows, window), HOURLY_HEADERS, title)


def _json(result: Any) -> str:
    summary = {k: v for k, v in result.to_json_dict().items() if k != "windows"}
    frame = result.windows.astype({"meets": bool})
    records = json.loads(frame.to_json(orient="records"))
    return json.dumps({**summary, "windows": records}, indent=2)


@app.command("day")
def day_command(
    plan_file: Annotated[
        Path,
        typer.Option(
            "--plan", metavar="FILE", help="The plan, as 'servecalc size --json' wrote it.", exists=True, dir_okay=False
        ),
    ],
    demand: Annotated[
        str, typer.Option(metavar="FILE|SHAPE", help="diurnal, weekly, spike or flat; or a CSV (time,rate) or trace.")
    ] = "diurnal",
    peak_rate: Annotated[
        str | None, typer.Option(metavar="RATE", help="The shape's peak (default: the plan's rate), req/s if bare.")
    ] = None,
    kind: Annotated[
        str, typer.Option("--autoscaler", metavar="reactive|predictive|fixed", help="How replicas follow demand.")
    ] = "reactive",
    metric: Annotated[
        str, typer.Option(metavar="METRIC", help="queue, running, kv_use or utilization.")
    ] = "utilization",
    min_replicas: Annotated[
        int | None, typer.Option(metavar="INT", min=0, help="Floor (default 1; fixed: the plan's replicas).")
    ] = None,
    max_replicas: Annotated[
        int | None, typer.Option(metavar="INT", min=1, help="Cap (default 10 x the plan's replicas).")
    ] = None,
    warm_pool: Annotated[int, typer.Option(metavar="INT", min=0, help="Replicas kept loaded and idle.")] = 0,
    cooldown: Annotated[str, typer.Option(metavar="TIME", help="Wait after scaling before scaling down.")] = "5 min",
    scale_down_window: Annotated[
        str, typer.Option(metavar="TIME", help="Scale down only to the highest count asked over it (0 s: off).")
    ] = "300 s",
    interval: Annotated[str, typer.Option(metavar="TIME", help="Between autoscaler decisions.")] = "30 s",
    lead_time: Annotated[str, typer.Option(metavar="TIME", help="Predictive: how far ahead it looks.")] = "10 min",
    fail: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SPEC",
            help="region:NAME@14:00+2h, replicas:N@HH:MM or node:N@HH:MM (N nodes with their replicas); repeatable.",
        ),
    ] = None,
    regions: Annotated[
        list[str] | None, typer.Option("--region", metavar="NAME", help="A region sharing demand (repeatable).")
    ] = None,
    round_trip: Annotated[str, typer.Option(metavar="TIME", help="Round trip between regions.")] = "0 s",
    timeout: Annotated[str, typer.Option("--retry-timeout", metavar="TIME", help="Client gives up after.")] = "30 s",
    max_attempts: Annotated[int, typer.Option(metavar="INT", min=1, max=20, help="Attempts per request.")] = 3,
    budget: Annotated[
        float | None, typer.Option("--retry-budget", metavar="FRACTION", min=0, help="Retries per first attempt.")
    ] = None,
    max_queue: Annotated[float | None, typer.Option(metavar="N", min=0, help="Waiting requests per replica.")] = None,
    deadline: Annotated[str | None, typer.Option(metavar="TIME", help="Shed a predicted wait above it.")] = None,
    window: Annotated[str, typer.Option(metavar="TIME", help="The reporting window.")] = "5 min",
    step: Annotated[
        str | None, typer.Option(metavar="TIME", help="Fluid mode: its time step (default 5 s; longer for weeks).")
    ] = None,
    duration: Annotated[str | None, typer.Option(metavar="TIME", help="Run length (default: the curve's).")] = None,
    storage_bandwidth: Annotated[str, typer.Option(metavar="BANDWIDTH", help="For the cold start.")] = "1 GB/s",
    mode: Annotated[str, typer.Option(metavar="fluid|requests", help="Fluid (fast) or request by request.")] = "fluid",
    seeds: Annotated[int, typer.Option(metavar="INT", min=1, max=1000, help="Request mode: independent days.")] = 1,
    output_format: FormatOption = None,
    as_json: JsonOption = False,
    out: OutOption = None,
) -> None:
    """Play a plan through a day: demand, autoscaler, cold starts, failures, retries and overload control.

    Prints each hour's demand, ready and starting replicas, queue, TTFT and TPOT p99, shed, failed and retried
    requests, attainment and cost, with the hours whose windows miss the targets marked (docs/production-day.md).
    """
    from ..dynamics import Admission, RetryPolicy, day_scenario, plan_autoscaler, run_day

    fmt = _format(output_format, as_json)
    plan = _plan_from_json(plan_file)
    if not plan.feasible:
        raise _fail(f"--plan {plan_file}: the plan is infeasible ({plan.reason}); there is no fleet to run")
    length = _time("duration", duration)
    curve = _demand(plan, demand, peak_rate, length)
    failures = _failures(fail or [], regions or [])
    with _day_errors():
        given = {"min_replicas": min_replicas, "max_replicas": max_replicas}
        scaler = plan_autoscaler(
            plan,
            kind,
            metric,
            interval=_time("interval", interval),
            cooldown=_time("cooldown", cooldown, positive=False),
            stabilization=_time("scale-down-window", scale_down_window, positive=False),
            lead_time=_time("lead-time", lead_time, positive=False),
            warm_pool=warm_pool,
            **{name: value for name, value in given.items() if value is not None},
        )
        retry = RetryPolicy(timeout=_time("retry-timeout", timeout), max_attempts=max_attempts, budget=budget)
        admission = Admission(max_queue=max_queue, deadline=_time("deadline", deadline))
        scenario = day_scenario(
            plan,
            curve,
            autoscaler=scaler,
            retry=retry,
            admission=admission,
            failures=failures,
            regions=_regions(regions or []),
            round_trip=_time("round-trip", round_trip, positive=False),
            storage_bandwidth=_quantity("storage-bandwidth", storage_bandwidth, "GB/s", positive=True),
            window=_time("window", window),
            duration=length,
        )
        with _stderr_progress() as bar:  # a request-level day can take minutes; the fluid one ends at once
            task = bar.add_task(f"a day, {mode}", total=1.0)
            result = run_day(
                plan, scenario, mode=mode, seeds=seeds, step=None if step is None else _time("step", step),
                progress=lambda done: bar.update(task, completed=done),
            )  # fmt: skip
    seconds = scenario.window.m
    _emit(fmt, out, lambda: _json(result) if fmt.value == "json" else _text(result, seconds), lambda: result.windows)
