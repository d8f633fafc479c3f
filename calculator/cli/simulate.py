"""``servecalc simulate``: a plan (from ``size --json`` or the sizing options) checked request by request."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import (
    Format,
    FormatOption,
    JsonOption,
    OutOption,
    _emit,
    _fail,
    _format,
    _library_errors,
    _load,
    _stderr_progress,
    app,
)
from ._tables import frame_table, table
from .sizing import (
    CLI_TIME_LIMIT,
    ModelArgument,
    RequestsOption,
    SizingFlags,
    TimeLimitOption,
    _fill_prices,
    _missing,
    _replicas,
    _size_plan,
    _sizing_inputs,
    _sizing_options,
    _speculation_text,
)

#: The summary rows ``simulate`` prints: the latencies a serving target is written against.
SIMULATION_METRICS = ("ttft", "tpot", "tbt_max")
SIMULATION_STATISTICS = ("mean", "p50", "p90", "p99")


def _plan_from_json(path: Path) -> Any:
    """The :class:`~calculator.fleet.FleetPlan` that ``servecalc size --json`` wrote to ``path``.

    Read by :meth:`~calculator.fleet.FleetPlan.from_json_file` (the dashboard reads an uploaded plan with it
    too): the JSON holds every field of the plan, quantities as ``{"value": ..., "unit": ...}``; the plan is
    rebuilt as it was sized, so its workload, targets, configuration and router are the ones recorded. A plan
    with a verification loses its simulations (only the table was written).
    """
    from ..errors import CalculatorError
    from ..fleet import FleetPlan

    try:
        return FleetPlan.from_json_file(path)
    except CalculatorError as exc:  # the file's fault in a line, or the field a tampered file got wrong
        raise _fail(f"--plan {path}: {exc}") from None


def _summary_frame(result: Any) -> Any:
    """The latency summary of a run in ms: mean and percentiles of TTFT, TPOT and the longest token gap."""
    summary = result.summary
    rows = summary[summary.metric.isin(SIMULATION_METRICS) & summary.statistic.isin(SIMULATION_STATISTICS)]
    frame = rows[["metric", "statistic"]].reset_index(drop=True)
    for column in ("value", "low", "high"):
        frame[f"{column} [ms]"] = rows[column].to_numpy(dtype=float) * 1e3
    return frame


#: The simulated metrics as the summary names them.
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "tbt_max": "longest token gap"}


def _summary_text(result: Any) -> list[str]:
    """The latency summary at one replica count as a table (ms, each value with its 95 % interval)."""
    from ..results import format_number

    frame = _summary_frame(result)
    seeds = len(result.seeds)
    basis = (
        f"pooled over {seeds} seeds, interval from their spread"
        if seeds > 1
        else "one seed, interval over ten batches of requests"
    )
    rows = [
        [
            METRIC_NAMES.get(row[0], row[0]),
            row[1],
            format_number(row[2]),
            f"{format_number(row[3])}-{format_number(row[4])}",
        ]
        for row in frame.itertuples(index=False)
    ]
    attainment = ", ".join(f"{key} {share:.1%}" for key, share in result.attainment.items())
    return [
        table(
            ["metric", "statistic", "value [ms]", "95 % interval [ms]"],
            rows,
            f"summary at {_replicas(result.replicas)} ({basis}):",
        ),
        f"attainment: {attainment or 'no targets'}",
        f"throughput {result.throughput.m_as('request/s'):.3g} request/s, "
        f"goodput {result.goodput.m_as('request/s'):.3g} request/s",
    ]


@app.command("simulate")
@_sizing_options
def simulate_command(
    model: ModelArgument = None,
    *,
    sizing: SizingFlags,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="FILE",
            help="A plan written by 'servecalc size --json', in place of the sizing options.",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    requests: RequestsOption = None,
    seeds: Annotated[
        int, typer.Option(metavar="INT", min=1, max=1000, help="Independent runs (the intervals are over them).")
    ] = 2,
    replicas: Annotated[
        int | None,
        typer.Option(metavar="INT", min=1, max=10_000, help="Simulate this many replicas instead of searching."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Search the fewest replicas meeting the targets (the default without --replicas)."
        ),
    ] = False,
    max_replicas: Annotated[
        int | None,
        typer.Option(
            metavar="INT",
            min=1,
            help="Give up the search above this count (default twice the plan's plus 2).",
            show_default=False,
        ),
    ] = None,
    time_limit: TimeLimitOption = CLI_TIME_LIMIT,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Check a fleet plan by simulating every request through continuous-batching replicas.

    The plan comes from --plan (the JSON of 'servecalc size --json') or is sized from the same options
    as 'servecalc size'. With --verify (the default) the plan's replica count is simulated, then one
    fewer or one more, then in doubling strides and by bisection, until the fewest that meet the
    targets is found, within --time-limit for the whole search; with --replicas N only N are
    simulated. Progress goes to standard error, results to standard output.
    """
    from ..simulation import router_name

    fmt = _format(output_format, as_json)
    if replicas is not None and verify:
        raise _fail("give --replicas N (simulate N replicas) or --verify (search the fewest), not both")
    router = sizing.router
    if router is not None:
        with _library_errors():
            router = router_name(router)
    plan, inputs = _plan_to_simulate(model, sizing, plan_file)
    if not plan.feasible:
        raise _fail(f"the plan is infeasible, there is nothing to simulate: {plan.reason}", code=1)
    verification, runs = _simulation_runs(plan, replicas, max_replicas, requests, seeds, router, time_limit)
    first = next(iter(runs.values()))
    head: dict[str, Any] = {
        "plan": {
            **{key: getattr(plan, key) for key in ("model", "accelerator", "precision", "engine")},
            "layout": plan.layout.to_dict(),
            **{key: getattr(plan, key) for key in ("batch", "replicas", "gpus")},
        },
        "router": first.router,
        "seeds": list(first.seeds),
        "requests_per_seed": {count: run.simulated_requests // len(run.seeds) for count, run in runs.items()},
    }

    def text() -> str:
        return _simulation_text(plan, runs, head, verification, replicas, time_limit)

    def as_json_text() -> str:
        if verification is not None:
            body: dict[str, Any] = {**head, **verification.to_json_dict()}
        else:
            body = {**head, "replicas": replicas, "meets_targets": first.meets_targets, "verdict": first.verdict}
        body["runs"] = {str(count): run.to_json_dict() for count, run in runs.items()}
        return json.dumps(body, indent=2)

    def frame() -> Any:
        return verification.table if verification is not None else _summary_frame(first)

    _emit(
        fmt,
        out,
        as_json_text if fmt is Format.json else text,
        frame,
        models=["simulation.verify_plan" if verification is not None else "simulation.simulate_plan"],
        registry_ids=[plan.model, plan.accelerator],
        inputs={
            **{k: v for k, v in inputs.items() if v is not None},
            "requests": requests if requests is not None else "default",
            "seeds": seeds,
            "router": first.router,
        },
    )


def _simulation_runs(
    plan: Any,
    replicas: int | None,
    max_replicas: int | None,
    requests: int | None,
    seeds: int,
    router: str | None,
    time_limit: float,
) -> tuple[Any, dict[int, Any]]:
    """The verification (None with ``--replicas``) and the runs by replica count, in increasing count."""
    from ..simulation import simulate_plan, verify_plan

    with _library_errors(), _stderr_progress() as bar:
        task = bar.add_task("simulating", total=1.0)
        options: dict[str, Any] = {"requests": requests, "seeds": seeds, "router": router,
                   "progress": lambda done: bar.update(task, completed=done)}  # fmt: skip
        options["time_limit"] = time_limit
        if replicas is None:
            verification = verify_plan(plan, max_replicas=max_replicas, **options)
            results = verification.results
        else:
            verification = None
            results = {replicas: simulate_plan(plan, replicas=replicas, **options)}
    return verification, dict(sorted(results.items()))


def _simulation_text(
    plan: Any,
    runs: dict[int, Any],
    head: dict[str, Any],
    verification: Any,
    replicas: int | None,
    time_limit: float,
) -> str:
    """The text output of ``simulate``: the plan, what was simulated, the verdict and the latency summaries."""
    from ..fleet.plan import layout_text

    first = next(iter(runs.values()))
    stopped = verification.truncated if verification is not None else first.truncated
    lines = [
        f"plan: {plan.gpus} x {plan.accelerator} at {plan.precision} ({_replicas(plan.replicas)} of "
        f"{layout_text(plan.layout)}), batch cap {plan.batch}, engine {plan.engine}, router {first.router}"
        + (_speculation_text(plan.serving.speculation) if plan.serving.speculation is not None else ""),
        f"simulated: {len(first.seeds)} seed(s) x "
        + ", ".join(f"{n:,} requests at {_replicas(count)}" for count, n in head["requests_per_seed"].items()),
    ]
    if stopped:
        lines.append(f"note: cut short by --time-limit {time_limit:g} s: {stopped}")
    if verification is not None:
        found = verification.simulated_replicas
        lines += [
            f"verdict: {verification.verdict}",
            f"analytical replicas: {verification.analytical_replicas}",
            f"simulated replicas: {found if found is not None else 'none found'}",
            "",
            frame_table(verification.table.drop(columns="verdict")),
            "",
            *(f"  {_replicas(row.replicas)}: {row.verdict}" for row in verification.table.itertuples()),
        ]
        shown: list[int] = [verification.analytical_replicas]
        if found is not None and found != verification.analytical_replicas:
            shown.append(found)
    else:
        lines.append(f"verdict: {first.verdict}")
        shown = [replicas] if replicas is not None else []
    for count in shown:
        lines += ["", *_summary_text(runs[count])]
    return "\n".join(lines)


def _plan_to_simulate(model: str | None, sizing: SizingFlags, plan_file: Path | None) -> tuple[Any, dict[str, Any]]:
    """The plan to simulate, read from ``--plan`` or sized from the options, and the inputs it came from."""
    if plan_file is not None:
        given = ["MODEL"] * (model is not None) + [f for f in sizing.given() if f not in ("--extra", "--router")]
        if given:
            raise _fail(f"--plan holds the plan; leave out the sizing options ({', '.join(given)})")
        plan = _plan_from_json(plan_file)
        if sizing.extra:  # the plan's own registry documents, replaced by the files given here
            plan = dataclasses.replace(plan, registry_documents=_load(None, sizing.extra).user_documents)
        inputs: dict[str, Any] = {"plan": str(plan_file)}
    else:
        missing = _missing(model, sizing)
        if missing:
            raise _fail(
                f"give --plan FILE (from 'servecalc size --json') or the sizing options; missing {', '.join(missing)}"
            )
        registry = _load(None, sizing.extra)
        sized = _sizing_inputs(model, sizing, registry)
        with _library_errors(), _stderr_progress() as bar:
            sized = _fill_prices(sized, registry)
            plan = _size_plan(sized, bar, registry)
        inputs = sized.record()
    return plan, inputs
