"""``servecalc size`` (with --emit, --disaggregated, --demand and --verify) and ``servecalc compare``."""

from __future__ import annotations

import functools
import inspect
import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..results import format_number as _number
from ._app import (
    Format,
    FormatOption,
    JsonOption,
    OutOption,
    _check_out,
    _emit,
    _fail,
    _format,
    _library_errors,
    _load,
    _stderr_progress,
    app,
)
from .sizing import (
    CLI_TIME_LIMIT,
    ModelArgument,
    RequestsOption,
    SizingFlags,
    SizingInputs,
    TimeLimitOption,
    _field_lines,
    _fill_prices,
    _flag,
    _missing,
    _quantity,
    _replicas,
    _shown,
    _size_plan,
    _sizing_inputs,
    _sizing_options,
    _understood,
)

#: The KV handoff link of the disaggregated pools (``size --disaggregated`` and ``compare``).
InterconnectOption = Annotated[
    str | None,
    typer.Option(
        metavar="LINK",
        help="Registry interconnect carrying the KV handoff between the pools (with --disaggregated and in "
        "compare; default infiniband-ndr).",
        show_default=False,
    ),
]


class EmitTarget(StrEnum):
    """What ``size --emit`` prints instead of the table: an engine's launch command or a Kubernetes manifest."""

    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"
    k8s = "k8s"
    bench = "bench"


EmitOption = Annotated[
    EmitTarget | None,
    typer.Option(
        "--emit",
        help="Print the feasible plan as a launch command (vllm, sglang, trtllm), a Kubernetes manifest (k8s, of "
        "the --engine, default vllm) or the benchmark runs that measure it (bench) instead of the table.",
        show_default=False,
    ),
]


#: The flags of colocated serving only: size --disaggregated refuses them, compare applies them to the colocated plan.
_COLOCATED_FLAGS = ("prefix_hit", "shared_prefix", "speculate", "chunk", "tbt", "router")


def _pools(plan: Any) -> str:
    """A disaggregated plan's pools in a line: ``prefill 2 x h100-sxm at fp8 (2 replicas of TP 1); decode ...``."""
    p, d = plan.prefill, plan.decode
    return (
        f"prefill {p['gpus']} x {p['accelerator']} at {p['precision']} ({_replicas(p['replicas'])} of "
        f"TP {p['tensor_parallel']}); decode {d['gpus']} x {d['accelerator']} at {d['precision']} "
        f"({_replicas(d['replicas'])} of TP {d['tensor_parallel']}, batch cap {d['batch']})"
    )


def _configuration(plan: Any) -> str:
    """A colocated plan's configuration in a line: ``6 x h100-sxm at fp8 (3 replicas of TP 2, batch cap 208)``."""
    from ..fleet.plan import layout_text

    return (
        f"{plan.gpus} x {plan.accelerator} at {plan.precision} ({_replicas(plan.replicas)} of "
        f"{layout_text(plan.layout)}, "
        f"batch cap {plan.batch})"
    )


@app.command("size")
@_sizing_options
def size(  # noqa: PLR0915  # the size command: read the flags, size, verify, print each format
    model: ModelArgument,
    *,
    sizing: SizingFlags,
    disaggregated: Annotated[
        bool,
        typer.Option(
            "--disaggregated", help="Size separate prefill and decode pools (section 10.8.3) instead of replicas."
        ),
    ] = False,
    interconnect: InterconnectOption = None,
    demand: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="Scale the plan over a demand curve: a request trace (column arrival_time in s, binned by "
            "--demand-bin) or a CSV of time (s) and rate (request/s). Without --rate the plan is sized at the "
            "curve's peak.",
            show_default=False,
        ),
    ] = None,
    demand_bin: Annotated[
        str | None,
        typer.Option(metavar="TIME", help="Bin width of a --demand trace (default 1 hour).", show_default=False),
    ] = None,
    cold_start: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Cold start of a replica over the --demand curve, which the reactive autoscaler waits (default 0 s).",
            show_default=False,
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Also simulate the plan request by request and print the verdict (takes seconds)."
        ),
    ] = False,
    requests: RequestsOption = None,
    seeds: Annotated[
        int | None,
        typer.Option(metavar="INT", min=1, max=1000, help="Seeds of --verify (default 2).", show_default=False),
    ] = None,
    time_limit: TimeLimitOption = CLI_TIME_LIMIT,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
    emit: EmitOption = None,
) -> None:
    """Size the cheapest fleet serving MODEL at RATE within the TTFT and TPOT targets.

    The output starts with the workload, the targets and the prices as they were understood. With
    --emit it is the plan's launch command or Kubernetes manifest instead (calculator.deploy); with
    --disaggregated the plan has a prefill and a decode pool; with --demand the plan's replicas are
    scheduled over a demand curve; with --verify the plan is also checked by simulation.
    """
    fmt = _format(output_format, as_json)
    if emit is not None and fmt is not Format.table:
        raise _fail(f"--emit {emit.value} conflicts with --format {fmt.value}")
    if out is not None:
        _check_out(out)
    if not verify and (requests is not None or seeds is not None or time_limit != CLI_TIME_LIMIT):
        raise _fail("--requests, --seeds and --time-limit set up --verify; add --verify")
    registry = _load(None, sizing.extra)
    curve = _demand_curve(demand, demand_bin) if demand is not None else None
    if curve is None and (demand_bin is not None or cold_start is not None):
        raise _fail("--demand-bin and --cold-start apply to a --demand curve; add --demand FILE")
    startup = _quantity("cold-start", cold_start, "s") if cold_start is not None else None
    if startup is not None and startup.magnitude < 0:
        raise _fail(f"option --cold-start: must be zero or more, got {cold_start!r}")
    if curve is not None and fmt not in (Format.table, Format.json):
        raise _fail(f"--demand prints a table or JSON, not --format {fmt.value}")
    missing = _missing(model, sizing, rate_known=curve is not None)
    if missing:
        raise _fail(f"missing {', '.join(missing)} (--trace FILE gives the rate and the lengths)")
    peak = curve[1].max() if curve is not None and sizing.rate is None and sizing.trace is None else None
    inputs = _sizing_inputs(model, sizing, registry, rate=peak)
    if disaggregated:
        given = [flag for flag, on in (("--demand", curve),) if on]
        checks = {"requests": requests, "seeds": seeds, "time_limit": time_limit} if verify else None
        _size_disaggregated(inputs, sizing, registry, interconnect, (fmt, out), given, emit=emit, verify=checks)
    if interconnect is not None:
        raise _fail("--interconnect is the KV handoff link of --disaggregated or of 'servecalc compare'")
    asked = {"requests": requests, "seeds": seeds, "time_limit": time_limit if verify else None}
    checks = {name: value for name, value in asked.items() if value is not None}
    with _library_errors():
        inputs = _fill_prices(inputs, registry)
        with _stderr_progress() as bar:
            plan = _size_plan(inputs, bar, registry, verify_options=checks if verify else None)
    if emit is not None:
        _emit_deployment(plan, emit, out, registry)
    scaled = None
    if curve is not None and plan.feasible:
        with _library_errors():
            scaled = _scale_over(plan, curve, startup)

    answers = functools.cache(lambda: _infeasible_answers(plan, inputs, registry))  # once, by the output shown

    def table() -> str:
        from ..fleet import interval_note, plan_summary

        lines = _understood(inputs, sizing.trace)
        if peak is not None:
            lines[0] += "; the rate is the --demand curve's peak"
        lines += [f"answer: {plan_summary(plan)}", _weights_line(plan, registry)] if plan.feasible else []
        lines += [f"note: {note}"] if (note := interval_note(plan)) else []
        lines += _tie_lines(plan)
        if plan.verification is not None:
            lines += _verification_lines(plan)
        lines += _field_lines(plan, skip=_NOT_LISTED) + _closest_lines(plan) + _serving_lines(answers())
        lines += ["families:", *(f"  {key}: {why}" for key, why in plan.rejected.items())]
        if scaled is not None and curve is not None:
            lines += ["", *_demand_lines(scaled, curve, demand)]
        if plan.feasible and plan.verification is None:
            lines += ["", "check it request by request: add --verify, or run 'servecalc simulate' with these options"]
        return "\n".join(lines)

    def as_json_text() -> str:
        body = plan.to_json_dict()
        if answers() is not None:  # beside the plan's fields: a plan file read back ignores it
            body["answers"] = {key: value for key, value in answers().to_json_dict().items() if key != "plan"}
        if scaled is not None and curve is not None:
            body["demand"] = _demand_json(scaled, curve)
        return json.dumps(body, indent=2)

    from ..sweeps import PLAN_UNITS

    _emit(
        fmt,
        out,
        as_json_text if fmt is Format.json else table,
        lambda: plan.to_frame(PLAN_UNITS),
        models=["fleet.size_fleet"],
        registry_ids=[model, *sizing.accelerator, *inputs.defaults],
        inputs=inputs.record(),
        registry=registry,
    )
    raise typer.Exit(0 if plan.feasible else 1)


#: The plan's fields the table does not list as ``name: value`` lines (it shows them otherwise, or not at all).
_NOT_LISTED = ("rejected", "closest", "workload", "targets", "rejections", "verification", "alternatives")


def _serving_lines(answers: Any) -> list[str]:
    """What would serve an infeasible sizing (:meth:`~calculator.fleet.InfeasibleAnswers.lines`); none: nothing."""
    return ["what would serve:", *(f"  {line}" for line in answers.lines())] if answers is not None else []


def _tie_lines(plan: Any) -> list[str]:
    """The plan's near ties under the answer, each with what differs (:func:`~calculator.fleet.tie_lines`)."""
    from ..fleet import tie_lines
    from ..fleet.inputs import NEAR_TIE

    ties = tie_lines(plan)
    return (
        [f"near ties (within {NEAR_TIE:.0%} of the cost, other configurations):", *(f"  {t}" for t in ties)]
        if ties
        else []
    )


def _closest_lines(plan: Any) -> list[str]:
    """An infeasible plan's closest values, each saying whether it is within its target or gives it up."""
    from ..units import ureg

    lines = []
    for key, value in plan.closest.items():
        if isinstance(value, ureg.Quantity) and math.isinf(value.magnitude):
            continue  # an infinite latency means no configuration fits: the reason says so already
        target = getattr(plan.targets, key)
        verdict = (
            f"within the {_shown(key, target)} target"
            if value <= target
            else f"over the {_shown(key, target)} target: gives it up"
        )
        lines.append(f"closest {key}: {_shown(key, value)} ({verdict})")
    return lines


def _infeasible_answers(plan: Any, inputs: SizingInputs, registry: Any) -> Any:
    """:func:`~calculator.fleet.explain_infeasible` of an infeasible plan's sizing, or None.

    None for a feasible plan, and where no candidate reached a step time (nothing fits in memory, the context is
    too long): no target or rate helps, and the reason says what would.
    """
    from ..fleet import explain_infeasible

    timed = ("tpot", "ttft", "tbt", "joint", "fleet_size")
    if plan.feasible or not any(r.code in timed for r in plan.rejections):
        return None
    with _library_errors():
        return explain_infeasible(**inputs.parts(), registry=registry)


def _verification_lines(plan: Any) -> list[str]:
    """``--verify``'s verdict, then each target's simulated statistic at the plan's replicas and the analytical one."""
    from ..results import percentile_label

    verification, targets = plan.verification, plan.targets
    lines = [f"simulation check: {verification.verdict}"]
    run = verification.results.get(plan.replicas)
    if run is None:  # the plan's count was not simulated (a search that started elsewhere)
        return lines
    service = plan.service
    checks = [("ttft", percentile_label(targets.ttft_percentile), service.ttft, targets.ttft)]
    checks.append(("tpot", "mean", service.tpot, targets.tpot))
    if targets.tbt is not None:
        checks.append(("tbt_max", "p99", service.tbt_max, targets.tbt))
    for metric, statistic, analytical, target in checks:
        simulated = run.value(metric, statistic)
        lines.append(
            f"simulated {statistic} {metric} at {_replicas(plan.replicas)}: {_shown(metric, simulated)} "
            f"(analytical {_shown(metric, analytical)}, target {_shown(metric, target)})"
        )
    return lines


def _size_disaggregated(
    inputs: SizingInputs,
    sizing: SizingFlags,
    registry: Any,
    interconnect: str | None,
    output: tuple[Format, Path | None],
    colocated_only: list[str],
    *,
    emit: EmitTarget | None = None,
    verify: dict[str, Any] | None = None,
) -> None:
    """``size --disaggregated``: the prefill and decode pools of :func:`~calculator.fleet.size_disaggregated`.

    With ``--emit`` each pool's and the router's commands
    (:func:`~calculator.deploy_disaggregated.disaggregated_launch`); with ``--verify`` the pools simulated
    (:func:`~calculator.simulation.verify_disaggregated`).
    """
    from ..fleet import size_disaggregated

    fmt, out = output
    colocated = {_flag(name) for name in _COLOCATED_FLAGS}
    refused = [flag for flag in sizing.given() if flag in colocated] + colocated_only
    if emit is EmitTarget.bench:
        raise _fail(
            "--emit bench measures a colocated plan's replicas; with --disaggregated, --emit takes vllm, sglang, "
            "trtllm (each pool's command and the router's) or k8s"
        )
    if refused:
        raise _fail(f"--disaggregated sizes prefill and decode pools; leave out {', '.join(refused)} (colocated only)")
    link: dict[str, Any] = {"interconnect": interconnect} if interconnect is not None else {}
    with _library_errors():
        inputs = _fill_prices(inputs, registry)
        plan = size_disaggregated(
            inputs.model, inputs.workload, inputs.targets, inputs.space, engine=inputs.engine, costs=inputs.costs,
            registry=registry, **link,
        )  # fmt: skip
    if emit is not None:
        _emit_disaggregated(plan, emit, out, registry)
    verification = _verify_disaggregated(plan, verify) if verify is not None else None

    def table() -> str:
        lines = _understood(inputs, sizing.trace)
        lines.append(f"KV handoff over: {interconnect or _default_interconnect()}")
        lines += [f"answer: {plan.gpus} GPUs: {_pools(plan)}"] if plan.feasible else []
        lines += _disaggregated_check_lines(verification) if verification is not None else []
        lines += _field_lines(plan)
        return "\n".join(lines)

    def as_json_text() -> str:
        body = plan.to_json_dict()
        if verification is not None:
            body["verification"] = verification.to_json_dict()
        return json.dumps(body, indent=2)

    _emit(
        fmt,
        out,
        as_json_text if fmt is Format.json else table,
        lambda: plan.to_frame({"kv_handoff": "ms", "ttft": "ms", "tpot": "ms", "cost.per_hour": "USD/hour"}),
        models=["fleet.size_disaggregated"],
        registry_ids=[inputs.model, *sizing.accelerator, *inputs.defaults],
        inputs=inputs.record("workload", "targets", "space", "costs"),
        registry=registry,
    )
    raise typer.Exit(0 if plan.feasible else 1)


def _emit_disaggregated(plan: Any, emit: EmitTarget, out: Path | None, registry: Any) -> None:
    """``size --disaggregated --emit ENGINE|k8s``: the pools' and the router's commands or Kubernetes objects.

    An infeasible plan exits 1; ``k8s`` runs the plan's engine (vLLM for the engine-agnostic profile).
    """
    from ..deploy import manifest_engine
    from ..deploy_disaggregated import disaggregated_launch
    from ..kubernetes import disaggregated_manifest

    if not plan.feasible:
        raise _fail(f"no feasible plan, nothing to emit: {plan.reason}", code=1)
    with _library_errors():
        if emit is EmitTarget.k8s:
            text = disaggregated_manifest(plan, manifest_engine(plan), registry=registry)
        else:
            text = disaggregated_launch(plan, emit.value, registry=registry).command
    _emit(Format.table, out, lambda: text, lambda: None)
    raise typer.Exit(0)


def _verify_disaggregated(plan: Any, options: dict[str, Any]) -> Any:
    """``size --disaggregated --verify``: the pools simulated, each pool's fewest replicas searched (or None)."""
    from ..simulation import verify_disaggregated

    if not plan.feasible:
        return None
    given = {name: value for name, value in options.items() if value is not None}
    with _library_errors():
        return verify_disaggregated(plan, search=True, **given)


def _disaggregated_check_lines(check: Any) -> list[str]:
    """``--verify``'s verdict on the pools, then each target's simulated statistic against the plan's."""
    lines = [f"simulation check: {check.verdict}"]
    for metric, statistic, simulated, analytical, target in check.rows():
        lines.append(
            f"simulated {statistic} {metric}: {_shown(metric, simulated)} (analytical {_shown(metric, analytical)}, "
            f"target {_shown(metric, target)})"
        )
    lines.append(
        f"simulated mean ttft in parts: prefill pool {_shown('ttft', check.prefill_ttft)} + KV handoff "
        f"{_shown('ttft', check.kv_handoff)} + decode pool {_shown('ttft', check.decode_ttft)}"
    )
    return lines


def _default_interconnect() -> str:
    """The KV-handoff link the disaggregated sizer assumes when none is given (its signature's default)."""
    from ..fleet import size_disaggregated

    return str(inspect.signature(size_disaggregated).parameters["interconnect"].default)


def _demand_curve(path: Path, bin_text: str | None) -> tuple[Any, Any, Any]:
    """``--demand FILE``: ``(times, rates, width)``, from a request trace binned by ``--demand-bin`` or a curve.

    A trace has a column ``arrival_time`` (s; :func:`~calculator.fleet.demand_from_trace` counts its
    arrivals per bin); a demand curve has columns ``time`` (s, start of each step) and ``rate``
    (request/s). ``width`` is the length of the last step, so the curve's end is its last time plus it.
    """
    import numpy as np
    import pandas as pd

    from .._files import MAX_TABLE_BYTES, read_csv
    from ..errors import InputError
    from ..fleet import demand_from_trace
    from ..units import Q_, shown

    with _library_errors():
        frame = read_csv(path, MAX_TABLE_BYTES, f"--demand {path}")  # one bounded read
    columns = set(map(str, frame.columns))
    if "arrival_time" in columns:
        width = _quantity("demand-bin", bin_text, "s", positive=True) if bin_text else Q_(1, "hour")
        try:
            times, rates = demand_from_trace(frame, width)
        except InputError as exc:
            raise _fail(f"--demand {path}{f' --demand-bin {bin_text}' if bin_text else ''}: {exc}") from None
        return times, rates, width
    if not {"time", "rate"} <= columns:
        raise _fail(
            f"--demand {path}: expected a request trace (column arrival_time, in s) or a demand curve "
            f"(columns time in s and rate in request/s); it has {shown(sorted(columns))}"
        )
    if bin_text is not None:
        raise _fail("--demand-bin bins a request trace; this --demand file is a demand curve already")
    times = Q_(pd.to_numeric(frame["time"], errors="coerce").to_numpy(dtype=float), "s")
    rates = Q_(pd.to_numeric(frame["rate"], errors="coerce").to_numpy(dtype=float), "request/s")
    if len(frame) < 2:
        raise _fail(f"--demand {path}: a demand curve needs at least two rows (time, rate)")
    seconds, values = times.magnitude, rates.magnitude
    if not (np.isfinite(seconds).all() and np.isfinite(values).all()):
        raise _fail(f"--demand {path}: every time and rate must be a number (a cell is empty or not a number)")
    if (np.diff(seconds) <= 0).any():
        raise _fail(f"--demand {path}: the times (s) must increase from row to row")
    if (values < 0).any() or not (values > 0).any():
        raise _fail(f"--demand {path}: the rates (request/s) must be at least 0, and one of them above 0")
    return times, rates, times[-1] - times[-2]


def _scale_over(plan: Any, curve: tuple[Any, Any, Any], cold_start: Any) -> Any:
    """:func:`~calculator.fleet.plan_over_time` of a plan over the ``--demand`` curve, to its last step's end."""
    from ..autoscaling import MAX_STEPS
    from ..fleet import plan_over_time
    from ..units import Q_

    times, rates, width = curve
    step = min(width, Q_(1, "minute"))  # plan_over_time's grid, at least one point per step of the curve
    end = times[-1] + width
    if ((end - times[0]) / step).m_as("") > MAX_STEPS:
        raise _fail(
            f"--demand: the curve spans {(end - times[0]).m_as('day'):,.4g} days in steps of {step.m_as('s'):g} s, "
            f"more than the {MAX_STEPS:,} steps the scaling schedules follow; give a shorter curve or coarser steps"
        )
    return plan_over_time(plan, times, rates, startup_time=cold_start, end=end, step=step)


def _demand_rows(scaled: Any, curve: tuple[Any, Any, Any]) -> Any:
    """Per step of the curve: its start, demand, and the most GPUs each schedule bills during it."""
    import numpy as np
    import pandas as pd

    times, rates, _ = curve
    grid = scaled.predictive.times.m_as("s")
    starts = np.minimum(np.searchsorted(grid, times.m_as("s")), grid.size - 1)
    tp = scaled.tensor_parallel
    return pd.DataFrame(
        {
            "start [h]": times.m_as("hour"),
            "demand [request/s]": rates.m_as("request/s"),
            "predictive GPUs": np.maximum.reduceat(scaled.predictive.billed, starts) * tp,
            "reactive GPUs": np.maximum.reduceat(scaled.reactive.billed, starts) * tp,
        }
    )


def _demand_lines(scaled: Any, curve: tuple[Any, Any, Any], path: Path | None) -> list[str]:
    rows = _demand_rows(scaled, curve)
    window = (curve[0][-1] + curve[2] - curve[0][0]).m_as("hour")
    return [
        f"over the demand curve of {path.name if path else 'the file'} ({len(rows)} steps, {_number(window)} h; "
        f"replicas of this plan's configuration, {scaled.tensor_parallel} GPUs each):",
        *("  " + line for line in rows.to_string(index=False, float_format=_number).splitlines()),
        f"  predictive schedule: peak {_number(scaled.peak_gpus)} GPUs, mean {_number(scaled.mean_gpus)} GPUs, "
        f"cost {_shown('cost', scaled.cost)}",
        f"  reactive autoscaler: cost {_shown('cost', scaled.reactive_cost)}, "
        f"{_number(scaled.reactive.deficit.m_as('request'))} requests beyond capacity while it scales",
        f"  static fleet at the peak: {_number(scaled.peak_gpus)} GPUs, cost {_shown('cost', scaled.static_cost)}",
    ]


def _demand_json(scaled: Any, curve: tuple[Any, Any, Any]) -> dict[str, Any]:
    body = {key: value for key, value in scaled.to_json_dict().items() if key not in ("predictive", "reactive")}
    body["reactive_deficit_requests"] = float(scaled.reactive.deficit.m_as("request"))
    body["steps"] = _demand_rows(scaled, curve).to_dict(orient="records")
    return body


def _emit_deployment(plan: Any, emit: EmitTarget, out: Path | None, registry: Any) -> None:
    """``size --emit``: print (or write) the plan's launch command or manifest; an infeasible plan exits 1."""
    from ..deploy import launch_command, manifest_engine
    from ..kubernetes import kubernetes_manifest

    if not plan.feasible:
        raise _fail(f"no feasible plan, nothing to emit: {plan.reason}", code=1)
    with _library_errors():
        if emit is EmitTarget.bench:
            from .bench import benchmark_text

            text = benchmark_text(plan, None)
        elif emit is EmitTarget.k8s:
            text = kubernetes_manifest(plan, manifest_engine(plan), registry=registry)
        else:
            text = launch_command(plan, emit.value, registry=registry).command
    _emit(Format.table, out, lambda: text, lambda: None)
    raise typer.Exit(0)


# --------------------------------------------------------------------------------------------- compare


#: The columns of ``compare``: label, the part of a plan holding the value, its name there.
_COMPARED = (
    ("ttft", "service", "ttft"),
    ("tpot", "service", "tpot"),
    ("cost_per_hour", "cost", "per_hour"),
    ("cost_per_month", "cost", "per_month"),
    ("cost_per_million_output_tokens", "cost", "per_million_output_tokens"),
)


@app.command("compare")
@_sizing_options
def compare_command(
    model: ModelArgument,
    *,
    sizing: SizingFlags,
    interconnect: InterconnectOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Size MODEL both colocated and disaggregated (prefill and decode pools) and print them side by side.

    The options of colocated serving only (prefix caching, --speculate, --chunk, --tbt, --router) apply to the
    colocated plan; --output-cv to both. Exit status 1 when neither mode is feasible.
    """
    from ..fleet import compare_serving_modes

    fmt = _format(output_format, as_json)
    if out is not None:
        _check_out(out)
    registry = _load(None, sizing.extra)
    missing = _missing(model, sizing)
    if missing:
        raise _fail(f"missing {', '.join(missing)} (--trace FILE gives the rate and the lengths)")
    inputs = _sizing_inputs(model, sizing, registry)
    link: dict[str, Any] = {"interconnect": interconnect} if interconnect is not None else {}
    with _library_errors():
        inputs = _fill_prices(inputs, registry)
        with _stderr_progress() as bar:
            task = bar.add_task("sizing both modes", total=None)
            comparison = compare_serving_modes(**inputs.parts(), **link, registry=registry)
            bar.update(task, completed=1, total=1)
    colocated, split = comparison.colocated, comparison.disaggregated

    def frame() -> Any:
        """One row per mode: its configuration (or why it is infeasible), GPUs, latencies and costs."""
        import pandas as pd

        from ..fleet import FleetPlan
        from ..sweeps import PLAN_UNITS
        from ..units import ureg

        rows = []
        for mode, plan, configuration in (("colocated", colocated, _configuration), ("disaggregated", split, _pools)):
            row: dict[str, Any] = {"mode": mode, "feasible": plan.feasible}
            row["configuration"] = configuration(plan) if plan.feasible else plan.reason
            row["gpus"] = plan.gpus if plan.feasible else None
            timing = plan.service if isinstance(plan, FleetPlan) else plan  # a disaggregated plan's are its own
            for key, part, name in _COMPARED:
                unit = PLAN_UNITS[f"{part}.{name}"]
                label = f"{key} [{ureg.Unit(unit):~P}]"
                value = getattr(timing if part == "service" else plan.cost, name) if plan.feasible else None
                row[label] = value.m_as(unit) if value is not None else None
            rows.append(row)
        return pd.DataFrame(rows)

    def table() -> str:
        lines = _understood(inputs, sizing.trace)
        lines.append(f"KV handoff over: {interconnect or _default_interconnect()}")
        colocated_only = [flag for flag in sizing.given() if flag in {_flag(name) for name in _COLOCATED_FLAGS}]
        if colocated_only:
            lines.append(f"colocated only: {', '.join(colocated_only)}")
        from ..results import format_display, human_label

        side_by_side = frame().set_index("mode").T
        rows = [["", *side_by_side.columns]] + [
            [human_label(str(name)), *map(format_display, values)] for name, values in side_by_side.iterrows()
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["", *("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)]
        lines.append("")
        if comparison.cheaper == "neither":
            lines.append("cheaper: neither mode is feasible")
        else:
            saving = f", saving {_shown('saving', comparison.saving)}" if comparison.saving.magnitude else ""
            lines.append(f"cheaper: {comparison.cheaper}{saving}")
        return "\n".join(lines)

    _emit(
        fmt,
        out,
        (lambda: json.dumps(comparison.to_json_dict(), indent=2)) if fmt is Format.json else table,
        frame,
        models=["fleet.compare_serving_modes"],
        registry_ids=[model, *sizing.accelerator, *inputs.defaults],
        inputs=inputs.record(),
        registry=registry,
    )
    raise typer.Exit(1 if comparison.cheaper == "neither" else 0)


def _weights_line(plan: Any, registry: Any) -> str:
    """The checkpoint the plan's engine loads, and how (``deploy.weights_source``), or why there is none to load."""
    from ..deploy import DEPLOY_TARGETS, weights_source
    from ..errors import InputError

    if plan.engine not in DEPLOY_TARGETS:
        return "note: the engine-agnostic profile loads no checkpoint in particular (--engine names what it loads)"
    try:
        served = plan.served_model or ""
        source = weights_source(plan.model, plan.precision, plan.engine, registry=registry, served=served)
    except InputError as error:
        return f"note: no weights to load: {error}"
    if source.method == "online":
        return f"note: the engine loads {source.repo}, the 16-bit checkpoint, quantized to {plan.precision} as it loads"
    return f"note: the engine loads the checkpoint {source.repo}"
