"""``servecalc bench`` and ``servecalc check``: measure a plan's deployment, and check the results against the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import _library_errors, app
from .simulate import _plan_from_json

PlanOption = Annotated[
    Path,
    typer.Option("--plan", metavar="FILE", help="The plan, as 'servecalc size --json' wrote it.", show_default=False),
]


def benchmark_text(plan: Any, tool: str | None) -> str:
    """:func:`~calculator.bench.benchmark_command`'s runs as shell lines (``size --emit bench`` prints them too)."""
    from ..bench import benchmark_command

    with _library_errors():
        command = benchmark_command(plan, tool)
    header = (
        f"# {len(command.rates)} runs against one replica at {', '.join(f'{r.m:g}' for r in command.rates)} request/s "
        f"(the plan's {command.plan_rate.m:.4g} request/s per replica last), {command.requests:,} requests each; "
        f"then: servecalc check {' '.join(command.result_files)} --plan PLAN.json"
    )
    return "\n".join([header, command.command])


@app.command("bench")
def bench_command(
    plan_file: PlanOption,
    tool: Annotated[
        str | None,
        typer.Option(metavar="vllm|sglang|trtllm", help="Benchmark client (default: the plan's engine's)."),
    ] = None,
) -> None:
    """Print the serving-benchmark runs that measure one replica of a plan at the load the plan puts on it.

    vLLM: 'vllm bench serve'; SGLang: 'python3 -m sglang.bench_serving'; TensorRT-LLM: its
    'benchmark_serving' script for trtllm-serve. Three runs at 50%, 75% and 100% of the plan's rate per
    replica, with the plan's lengths and their spread; 'servecalc check' compares the last with the plan, and
    'servecalc calibrate' fits the engine on all three.
    """
    typer.echo(benchmark_text(_plan_from_json(plan_file), tool))


@app.command("check")
def check_command(
    results: Annotated[
        list[Path],
        typer.Argument(
            metavar="RESULTS...",
            help="The runs' results: vLLM or TensorRT-LLM --save-result JSON, SGLang --output-file JSONL.",
        ),
    ],
    plan_file: PlanOption,
) -> None:
    """Compare measured TTFT and TPOT with the plan's predictions and 80% intervals, target by target.

    The run compared is the one at the plan's rate per replica ('servecalc bench' writes it). Exit status 0
    when every target is within the plan's interval, 1 when a re-plan is advised (the commands are printed).
    """
    from ..bench import check_plan

    plan = _plan_from_json(plan_file)
    with _library_errors():
        check = check_plan(plan, results)
    lines = [
        f"run: {check.run} at {check.rate.m:.4g} request/s (the plan's {check.plan_rate.m:.4g} request/s per "
        f"replica); completed {check.throughput.m:.4g} request/s"
    ]
    for row in check.table.itertuples():
        lines.append(
            f"{row.statistic} {row.target.upper()}: measured {row.measured:.4g} ms, predicted {row.predicted:.4g} ms "
            f"(interval {row.low:.4g}-{row.high:.4g} ms), target {row.target_value:.4g} ms: {row.verdict}"
            f"{'' if row.meets_target else ', misses the target'}"
        )
    lines.append(check.advice)
    typer.echo("\n".join(lines))
    if check.replan:
        raise typer.Exit(1)
