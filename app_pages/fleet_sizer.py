"""Fleet sizer: the cheapest fleet that serves a workload within its TTFT and TPOT targets."""

import threading
from collections import OrderedDict
from dataclasses import astuple, dataclass, replace

import pandas as pd
import streamlit as st

from app_pages import _common as ui
from app_pages._fleet_disaggregated import show_pools
from calculator import Q_
from calculator.bench import benchmark_command
from calculator.deploy import launch_command, manifest_engine
from calculator.economics import cost_per_million_tokens
from calculator.errors import InputError
from calculator.fleet import (
    Costs,
    SearchSpace,
    ServingOptions,
    Targets,
    Workload,
    default_price_entry,
    explain_infeasible,
    frontier,
    interval_note,
    size_fleet,
    tie_lines,
)
from calculator.fleet.inputs import MOE_LAYOUTS
from calculator.kubernetes import kubernetes_manifest
from calculator.performance import outside_validated_range
from calculator.plots import frontier_figure, kv_occupancy_over_time, latency_distribution, verification_chart
from calculator.precision import DEFAULT_PRECISION
from calculator.queueing import replica_demand, utilization
from calculator.registry import load_registry
from calculator.results import percentile_label
from calculator.simulation import DEFAULT_ROUTER, verify_plan

PERCENTILES = {"mean": None, "p90": 0.9, "p95": 0.95, "p99": 0.99}
#: Labels of the dispatch policies of `calculator.simulation.ROUTERS`, by canonical name.
ROUTER_LABELS = {
    "round_robin": "round robin",
    "random": "random",
    "least_connections": "join shortest queue (fewest requests)",
    "least_work": "least outstanding tokens",
    "two_choices": "power of two choices",
}
AS_SIZED = "as sized"
#: Simulation defaults: small enough to answer in a few seconds on two cores.
SIMULATED_REQUESTS, SIMULATED_SEEDS = 3000, 2
SHARED_VERIFICATIONS, SESSION_VERIFICATIONS = 16, 4
#: What one click may cost: requests x seeds per replica count simulated, and the wall clock of the whole check.
CLICK_REQUESTS, CLICK_SECONDS = 400_000, 30.0
#: Bytes of per-request rows and occupancy series the server's store of verifications holds (the oldest go first).
SHARED_BYTES = 256 * 2**20


@dataclass(frozen=True)
class SizingRequest:
    """What the page sizes, as the sidebar gives it: plain values, so that the caches below can hash it.

    :meth:`parts` builds :func:`calculator.fleet.size_fleet`'s arguments from it.
    """

    extra: tuple[str, ...]
    model: str
    accelerators: tuple[str, ...]
    precisions: tuple[str, ...]
    rate: float  # request/s
    prompt: int
    output: int
    arrival_cv: float
    prompt_cv: float
    output_cv: float
    ttft_ms: float
    tpot_ms: float
    percentile: float | None
    max_utilization: float
    prices: tuple[tuple[str, float], ...]  # USD/hour per GPU, by accelerator
    engine: str | None
    kv_precision: str | None
    router: str
    moe_layouts: tuple[str, ...]
    tpot_percentile: float | None = None  # each request's TPOT at this percentile (None: the mean)
    tbt_p99_ms: float = 0.0  # the 99th percentile of all token gaps (0: no target)

    def parts(self):
        """The keyword arguments of size_fleet and explain_infeasible: the model, the parts and the engine.

        The model and the accelerators are entries of the session's registry (its custom files), where the
        sizer resolves every id.
        """
        reg = load_registry(extra=self.extra)
        return {
            "model": reg.model(self.model),
            "workload": Workload(
                Q_(self.rate, "request/s"),
                self.prompt,
                self.output,
                input_cv=self.prompt_cv,
                output_cv=self.output_cv,
                arrival_cv=self.arrival_cv,
            ),
            "targets": Targets(
                Q_(self.ttft_ms, "ms"),
                Q_(self.tpot_ms, "ms"),
                Q_(self.tbt_p99_ms, "ms") if self.tbt_p99_ms > 0 else None,
                self.percentile,
                self.max_utilization,
                tpot_percentile=self.tpot_percentile,
                tbt_percentile=0.99 if self.tbt_p99_ms > 0 else None,
            ),
            "space": SearchSpace(
                tuple(reg.accelerator(a) for a in self.accelerators),
                self.precisions,
                kv_precision=self.kv_precision,
                moe_layouts=self.moe_layouts,
            ),
            "engine": self.engine,
            "serving": ServingOptions(router=self.router),
            "costs": Costs({name: Q_(price, "USD/hour") for name, price in self.prices}),
        }

    def loosened(self, factor):
        """The same request with both targets multiplied by ``factor``."""
        return replace(self, ttft_ms=self.ttft_ms * factor, tpot_ms=self.tpot_ms * factor)


@st.cache_data(show_spinner="Sizing every configuration...", max_entries=64)
def plan_for(request):
    return size_fleet(**request.parts())


@st.cache_data(show_spinner="Searching what would serve: each target alone, the rate...", max_entries=32)
def answers_for(request):
    return explain_infeasible(**request.parts())


@st.cache_resource(show_spinner=False)
def _verification_store():
    """Verifications shared by every session, most recent last (a simulation is seeded: same inputs, same answer).

    Not ``st.cache_data``: the simulation reports progress to a bar on the page, which a cached
    function may not touch.
    """
    return OrderedDict(), threading.Lock()


def _verify(plan, key, requests, seeds, router):
    """The plan checked by simulation, from this server's store or simulated now with a progress bar."""
    store, lock = _verification_store()
    with lock:
        verification = store.get(key)
        if verification is not None:
            store.move_to_end(key)
            return verification
    bar = st.progress(0.0, text="Simulating the plan request by request...")
    try:
        verification = verify_plan(
            plan,
            requests=requests,
            seeds=seeds,
            router=None if router == AS_SIZED else router,
            progress=lambda done: bar.progress(done, text=f"Simulating the plan request by request... {done:.0%}"),
            time_limit=CLICK_SECONDS,
        )
    finally:
        bar.empty()
    with lock:
        store[key] = verification
        while len(store) > SHARED_VERIFICATIONS or (len(store) > 1 and sum(map(_bytes, store.values())) > SHARED_BYTES):
            store.popitem(last=False)
    return verification


def _bytes(verification):
    """The memory a verification's runs hold: their per-request rows and occupancy series."""
    runs = verification.results.values()
    return sum(int(r.requests.memory_usage().sum()) + int(r.occupancy.memory_usage().sum()) for r in runs)


@st.cache_data(show_spinner="Tracing the frontier...", max_entries=32)
def frontier_for(extra, model, accelerators, precisions, prompt, output, engine, kv_precision):
    reg = load_registry(extra=extra)
    return frontier(
        reg.model(model),
        [reg.accelerator(a) for a in accelerators],
        list(precisions),
        prompt,
        output,
        engine=engine,
        kv_precision=kv_precision,
    )


def _registry_price(accelerator):
    """The registry's default GPU-hour price and the entry it comes from (None, "" when it has none)."""
    try:
        entry = default_price_entry(accelerator, ui.registry())
    except (KeyError, ValueError):
        return None, ""
    return round(entry.price.m_as("USD/hour"), 2), entry.id


def main():
    st.title("Fleet sizer")
    st.caption(
        "How many GPUs, at what tensor-parallel degree and batch, serve this traffic within the TTFT and TPOT "
        "targets, and at what cost? Every (accelerator, precision, TP, batch) candidate is evaluated with the "
        "calibrated step model and the queueing models (sections 10.3, 10.6, 10.8; `calculator.fleet.size_fleet`)."
    )
    sc = ui.Scenario("fleet")
    # The answer comes first: the inputs sit in the sidebar (collapsed on a phone), the plan at the top.
    with st.sidebar:
        model, accelerators, precisions, engine, kv, layouts = _hardware_inputs(sc)
        rate, prompt, output, arrival_cv, prompt_cv, output_cv = _traffic_inputs(sc)
        ttft_ms, (percentile, tpot_stat, gap_ms), tpot_ms, max_util, router, prices = _target_inputs(sc, accelerators)

    if not accelerators or not precisions or not layouts:
        st.warning("Choose at least one accelerator, one precision and one expert layout.")
        return
    missing = [name for name, price in prices.items() if price is None]
    if missing:
        st.warning(f"Enter a GPU-hour price for {ui.plain(', '.join(missing))}: the registry has none.")
        return

    kv_precision = None if kv == ui.ENGINE_DEFAULT_KV else kv
    request = SizingRequest(
        extra=ui.extra_files(),
        model=model,
        accelerators=tuple(accelerators),
        precisions=tuple(precisions),
        rate=rate,
        prompt=prompt,
        output=output,
        arrival_cv=arrival_cv,
        prompt_cv=prompt_cv,
        output_cv=output_cv,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        percentile=PERCENTILES[percentile],
        max_utilization=max_util,
        prices=tuple(sorted(prices.items())),
        engine=ui.ENGINES[engine],
        kv_precision=kv_precision,
        router=router,
        moe_layouts=tuple(layouts),
        tpot_percentile=PERCENTILES[tpot_stat],
        tbt_p99_ms=gap_ms,
    )
    plan = plan_for(request)

    st.divider()
    check = None
    if plan.feasible:
        check = _check_settings(sc, plan, request)
        verification = _show_plan(plan, rate, output, prices, tpot_ms, check, sc)
        if verification is not None:
            st.subheader("Simulation check")
            _show_verification(plan, verification)
    else:
        _show_infeasible(plan, request)
        sc.answered()
    simulated = check[1:3] if check is not None else (SIMULATED_REQUESTS, SIMULATED_SEEDS)
    _show_alternatives(sc, plan, request, simulated)


def _hardware_inputs(sc):
    """The sidebar's model and hardware: model, accelerators, precisions, engine, KV precision, expert layouts."""
    reg = ui.registry()
    st.subheader("Model and hardware")
    model = sc.model("Model", "model", "llama-3.1-70b")
    accelerators = sc.multiselect("Accelerators", "gpus", list(reg.accelerators), ["h100-sxm", "h200-sxm"])
    precisions = sc.multiselect("Weight precisions", "precisions", ui.SERVING_PRECISIONS, [DEFAULT_PRECISION])
    engine = sc.select("Serving engine", "engine", list(ui.ENGINES), "generic")
    kv = sc.select(
        "KV-cache precision",
        "kv",
        [ui.ENGINE_DEFAULT_KV, "fp16", "fp8"],
        ui.ENGINE_DEFAULT_KV,
        help="The engine's default: FP8 for FP8/FP4 weights under vLLM, TensorRT-LLM and the generic profile "
        "(on GPUs with FP8), 16-bit otherwise (calculator.performance.KV_PRECISION_RULE).",
    )
    layouts = sc.multiselect(
        "Expert layouts (mixture of experts)",
        "moe_layouts",
        list(MOE_LAYOUTS),
        list(MOE_LAYOUTS),
        help="How a replica's GPUs hold a mixture of experts: 'tensor' splits each expert over them, 'expert' "
        "spreads whole experts over them (expert parallelism, EP = TP), 'attention-dp' gives each GPU its own "
        "attention rank and sequences with the experts spread (attention data parallelism). All are searched "
        "by default; dense models ignore this.",
    )
    return model, accelerators, precisions, engine, kv, layouts


def _traffic_inputs(sc):
    """The sidebar's traffic: arrival rate, mean prompt and output, arrival, prompt- and output-length CVs."""
    st.subheader("Traffic")
    rate = sc.number("Arrival rate [request/s]", "rate", 10.0, min_value=0.01, max_value=1e6, step=1.0)
    prompt = sc.number("Mean prompt [token]", "prompt", 1024, min_value=1, max_value=1_000_000, integer=True)
    output = sc.number("Mean output [token]", "output", 256, min_value=1, max_value=100_000, integer=True)
    arrival_cv = sc.number("Arrival CV (1 = Poisson)", "arrival_cv", 1.0, min_value=0.0, max_value=10.0, step=0.1)
    prompt_cv = sc.number("Prompt-length CV", "prompt_cv", 0.0, min_value=0.0, max_value=10.0, step=0.1)
    output_cv = sc.number(
        "Output-length CV",
        "output_cv",
        0.0,
        min_value=0.0,
        max_value=10.0,
        step=0.1,
        help="Spread of the output lengths (reasoning traces: about 1). The longer outputs are more often in the "
        "batch, so the running sequences hold more KV than the mean request (Workload.held_context).",
    )
    return rate, prompt, output, arrival_cv, prompt_cv, output_cv


def _target_inputs(sc, accelerators):
    """The sidebar's targets and cost: TTFT target and statistic, TPOT target, cap, router, GPU-hour prices."""
    st.subheader("Targets and cost")
    ttft_ms = sc.number("TTFT target [ms]", "ttft", 1000.0, min_value=1.0, max_value=600_000.0, step=50.0)
    percentile = sc.select("TTFT statistic", "ttft_stat", list(PERCENTILES), "mean")
    tpot_ms = sc.number("TPOT target [ms]", "tpot", 50.0, min_value=0.1, max_value=10_000.0, step=5.0)
    tpot_stat = sc.select("TPOT statistic (of each request's TPOT)", "tpot_stat", list(PERCENTILES), "mean")
    gap_ms = sc.number(
        "Token-gap p99 target [ms] (0: none)", "tbt_p99", 0.0, min_value=0.0, max_value=60_000.0, step=10.0
    )
    max_util = sc.slider(
        "Utilization cap", "util", 0.8, min_value=0.05, max_value=1.0, step=0.05, help="headroom per replica"
    )
    router = sc.select(
        "Router",
        "router",
        list(ROUTER_LABELS),
        DEFAULT_ROUTER,
        format_func=ROUTER_LABELS.get,
        help="How the load balancer spreads requests over the replicas; it sets the burstiness each replica "
        "sees. Default: round robin, the default of common HTTP load balancers.",
    )
    prices = {}
    for name in accelerators:
        default, entry = _registry_price(name)
        prices[name] = sc.number(
            f"{name} price [USD/h per GPU]",
            f"price.{name}",
            default,
            min_value=0.01,
            max_value=1000.0,
            step=0.1,
            help=f"defaults to the registry's cheapest published on-demand price ({entry or 'none listed'})",
        )
    return ttft_ms, (percentile, tpot_stat, gap_ms), tpot_ms, max_util, router, prices


def _show_alternatives(sc, plan, request, simulated):
    """Why the other configurations lost, the frontier and disaggregated pools, in tabs drawn on demand.

    ``simulated``: the requests and seeds of a simulation check (the sidebar's, else the defaults).
    """
    # The alternatives in tabs drawn on demand: the frontier's 1,700-point chart (and Plotly's script) no
    # longer stands between a new visitor and the plan's metrics (docs/dashboard.md, "Speed").
    lost, curve, pools = sc.tabs(
        ["Why the other configurations lost", "Throughput vs interactivity (Figure 6)", "Disaggregated pools"]
    )
    if lost.open:
        with lost:
            rejected = pd.DataFrame(
                [{"configuration": key, "outcome": why} for key, why in plan.rejected.items()],
                columns=["configuration", "outcome"],
            )
            ui.table(rejected, "rejected-configurations")
    if curve.open:
        with curve:
            _frontier(plan, request)
    if pools.open:
        with pools:
            show_pools(request, plan, *simulated, CLICK_SECONDS)


def _frontier(plan, request):
    table = frontier_for(
        request.extra,
        request.model,
        request.accelerators,
        request.precisions,
        request.prompt,
        request.output,
        request.engine,
        request.kv_precision,
    )
    st.plotly_chart(frontier_figure(table, plan, registry=ui.registry()), key="frontier")
    st.caption(
        "Every configuration that fits in memory at full load; a line joins the Pareto points of each accelerator "
        "(any precision); the star is the plan's configuration (evaluated here at full load, without the "
        "utilization cap). The table lists the Pareto configurations; its CSV has every configuration. TTFT is that "
        "of a fleet sized for 1 request/s: its replicas round up, so the load per replica (utilization) jumps from "
        "one batch cap to the next; 'ttft binds' names the largest part of that TTFT (the prompt's prefill, the "
        "queue for prefill budget, or the wait for a running slot)."
    )
    ui.table(table[table.pareto].drop(columns="pareto"), "frontier", download=table)


def _interval(pair, unit):
    return f"80% interval {ui.fmt(pair[0], unit, 3)} to {ui.fmt(pair[1], unit, 3)}"


def _show_plan(plan, rate, output, prices, tpot_ms, check, sc):
    st.success(
        f"{plan.gpus} × {ui.plain(plan.accelerator)} at {plan.precision} (KV cache {plan.kv_precision}): "
        f"{ui.plain(plan.reason)}."
    )
    low, high = plan.gpus_interval
    band = f"{low}-{high} GPUs" if high is not None else f"{low} GPUs to infeasible"
    note = interval_note(plan)  # a sentence here: its first letter raised, the rest as written
    st.info(
        f"At the model's error: {band} (the plan rerun with step times at the ends of the performance "
        "model's 80% interval; docs/performance-model.md)."
        + (f" {ui.plain(note[0].upper() + note[1:])}." if note else "")
    )
    _plan_metrics(plan, band)
    sc.answered()
    _cost_link(plan, rate)
    _day_link(plan)
    ties = tie_lines(plan)
    if ties:
        st.info(
            "Within 2% of this cost, other configurations (what differs from the plan):\n\n"
            + "\n".join(f"- {ui.plain(line)}" for line in ties)
        )
    verification = _check(plan, *check)
    _plan_warnings(plan, tpot_ms)
    ui.download_json(plan, "fleet-plan", label="Download the plan as JSON")
    with st.expander("Plan details"):
        ui.table(ui.rows(_plan_details(plan, low, high)), "plan-details")
    _deploy(plan)
    _plan_math(plan, rate, output, prices)
    return verification


def _plan_metrics(plan, band):
    """The plan's headline metrics: GPUs, layout, batch, binding constraint, latencies and costs."""
    layout, service, cost = plan.layout, plan.service, plan.cost
    first = st.columns(4)
    first[0].metric("GPUs", ui.fmt(plan.gpus), help=f"{band} at the ends of the model's 80% error interval")
    first[1].metric(
        "Replicas × TP",
        f"{plan.replicas} × {layout.stage_gpus}"
        + (f" (attention DP {layout.data_parallel})" if layout.data_parallel > 1 else "")
        + (f" (EP {layout.expert_parallel})" if layout.expert_parallel > 1 else "")
        + (f" (PP {layout.pipeline_parallel})" if layout.pipeline_parallel > 1 else "")
        + (f" over {layout.nodes} nodes" if layout.nodes > 1 else ""),
        help="GPUs per replica; EP: a mixture of experts' routed experts spread over them (expert parallelism); "
        "nodes: a replica wider than one NVLink domain, over the accelerator's scale-out link",
    )
    first[2].metric(
        "Batch cap per replica",
        ui.fmt(plan.batch),
        help=f"the engine's max_num_seqs; at the planned load about {service.running_batch:,.0f} sequences run on "
        "average, where TTFT and TPOT are evaluated",
    )
    first[3].metric("Binding constraint", plan.binding_constraint)
    at = percentile_label(plan.targets.ttft_percentile)
    second = st.columns(3)  # three to a row: "9,949 USD/month" does not fit a quarter of 1440 px
    second[0].metric(f"TTFT ({at})", ui.fmt(service.ttft, "ms", 4), help=_interval(service.ttft_interval, "ms"))
    second[1].metric("TPOT (mean)", ui.fmt(service.tpot, "ms", 4), help=_interval(service.tpot_interval, "ms"))
    second[2].metric("Cost per hour", ui.fmt(cost.per_hour, "USD/hour", 5))
    third = st.columns(3)
    third[0].metric("Cost per month", ui.fmt(cost.per_month, "USD/month", 4), help="a month of 730.5 hours")
    third[1].metric("Per 1M output tokens", ui.fmt(cost.per_million_output_tokens, "USD", 4))
    third[2].metric(
        "Per 1M total tokens", ui.fmt(cost.per_million_total_tokens, "USD", 4), help="prompt and output tokens"
    )
    st.caption(f"TTFT {_interval(service.ttft_interval, 'ms')}; TPOT {_interval(service.tpot_interval, 'ms')}.")


def _cost_link(plan, rate):
    """A link to the cost page with the plan's serving cost per query and its daily volume filled in."""
    arrival = Q_(rate, "request/s")
    per_query = (plan.cost.per_hour / arrival).to("USD/request")  # the fleet's cost rate over the requests served
    st.page_link(
        "app_pages/cost.py",
        label=f"Lifetime cost of this plan: {ui.fmt(per_query, 'USD/request', 3)} at {ui.fmt(arrival, 'request/s')}",
        icon=":material/payments:",
        query_params={
            "per_query": f"{per_query.m_as('USD/request'):.6g}",
            "per_day": f"{arrival.m_as('request/day'):.10g}",
        },
    )


def _day_link(plan):
    """A link to "A day in production" playing this plan: the plan stays in the session, the link selects it."""
    st.session_state[ui.SIZER_PLAN] = plan
    st.page_link(
        "app_pages/production_day.py",
        label="Play this plan through a day in production",
        icon=":material/schedule:",
        query_params={"plan": "sizer"},
    )


def _plan_warnings(plan, tpot_ms):
    """Warnings on the plan: outside the validated range, a longest token gap beyond the TPOT target."""
    outside = outside_validated_range(plan.model, plan.accelerator, registry=ui.registry())
    if outside:  # what the library's ExtrapolationWarning says (a cached plan would not repeat the warning)
        st.warning(
            f"{ui.plain('; '.join(outside))}: outside the range the performance model was validated on, so these "
            "numbers are an extrapolation (docs/hardening.md)."
        )
    gap, target = plan.service.tbt_max, Q_(tpot_ms, "ms")
    if gap > target:
        st.warning(
            f"The longest gap between two tokens of a stream is {ui.fmt(gap, 'ms', 3)}, "
            f"{(gap / target).m_as(''):.2g}× the {ui.fmt(target, 'ms', 3)} TPOT target: TPOT is the average gap, "
            "and the streams decoding on a replica wait while a prompt's prefill runs there (section 10.8.2). If users "
            "notice such pauses, chunked or disaggregated prefill bounds them (Decode speedups page)."
        )


def _plan_details(plan, low, high):
    """The rows of the "Plan details" table."""
    service, energy, layout = plan.service, plan.energy, plan.layout
    return {
        "GPUs at the low / high end of the model's error": f"{low} / {high if high is not None else 'infeasible'}",
        "utilization per replica": service.utilization,
        "utilization cap": plan.max_utilization,
        "replica throughput": service.replica_throughput,
        "longest token gap (TBT)": service.tbt_max.to("ms"),
        "fleet power": energy.power,
        "energy per 1M output tokens": energy.per_million_output_tokens,
        "electricity per 1M output tokens": energy.electricity_cost_per_million_output_tokens,
        "engine profile": plan.engine,
        "KV-cache precision": plan.kv_precision,
        "expert parallelism (GPUs the experts spread over)": layout.expert_parallel,
        "attention ranks (attention data parallelism)": layout.data_parallel,
        "configurations evaluated": plan.candidates,
    }


def _plan_math(plan, rate, output, prices):
    """The formulas behind the replica count, the utilization and the cost per million output tokens."""
    arrival = Q_(rate, "request/s")
    ui.show_math(
        replica_demand,
        arrival,
        plan.service.replica_throughput,
        plan.max_utilization,
        title=f"replicas: {plan.replicas} is the ceiling of the replica demand",
    )
    ui.show_math(utilization, arrival, plan.service.replica_throughput, plan.replicas, title="utilization per replica")
    ui.show_math(
        cost_per_million_tokens,
        plan.gpus,
        Q_(prices[plan.accelerator], "USD/hour"),
        (arrival * Q_(output, "token/request")).to("token/s"),
        title="cost per million output tokens",
    )


#: Deployment downloads: label, target, file name.
DEPLOY_FILES = (
    ("vLLM command", "vllm", "launch-vllm.sh"),
    ("SGLang command", "sglang", "launch-sglang.sh"),
    ("TensorRT-LLM command", "trtllm", "launch-trtllm.sh"),
    ("Kubernetes manifest", "k8s", "fleet-plan-k8s.yaml"),
)


def _deploy(plan):
    """Downloads of the plan as each engine's launch command and as a Kubernetes manifest (calculator.deploy)."""
    engine = manifest_engine(plan)
    with st.expander("Deploy this plan"):
        st.caption(
            "Each engine's server command with the plan's tensor parallelism, batch cap, memory fraction and token "
            f"budget (documented flags only; docs/fleet-sizer.md), and a Kubernetes Deployment of the {engine} "
            "command with an autoscaler sketch. Comment lines name what must be set by hand."
        )
        ui.launch_downloads(
            DEPLOY_FILES,
            lambda target: (
                kubernetes_manifest(plan, engine) if target == "k8s" else launch_command(plan, target).command + "\n"
            ),
            "deploy",
        )
        try:  # the benchmark that measures the deployment (calculator.bench), beside its launch command
            bench = benchmark_command(plan, engine)
        except InputError as exc:
            st.warning(f"Benchmark: {ui.plain(str(exc))}")
            return
        st.caption(
            f"Measure one replica: {len(bench.rates)} runs of the {engine} benchmark client at 50-100% of the plan's "
            f"rate per replica; then `servecalc check {' '.join(bench.result_files)} --plan plan.json` compares "
            "them with the plan, target by target (docs/fleet-sizer.md, Closing the loop)."
        )
        st.code(bench.command, language="bash")


def _check_settings(sc, plan, request):
    """The simulation check's settings (in the sidebar) and the key of its result.

    The key holds the request's values, not the request: each run of this script defines SizingRequest anew,
    and requests of two runs' classes never compare equal.
    """
    with st.sidebar:
        st.subheader("Simulation check")
        requests = sc.number(
            "Requests per seed", "sim_requests", SIMULATED_REQUESTS, min_value=200, max_value=200_000, step=1000,
            integer=True, help="per replica count simulated; more requests narrow the intervals",
        )  # fmt: skip
        seeds = sc.number(
            "Seeds", "sim_seeds", SIMULATED_SEEDS, min_value=1, max_value=16, integer=True,
            help="independent runs; the intervals are over them",
        )  # fmt: skip
        labels = {AS_SIZED: f"as sized ({ROUTER_LABELS[plan.router]})", **ROUTER_LABELS}
        router = sc.select("Router to simulate", "sim_router", list(labels), AS_SIZED, format_func=labels.get)
    return (astuple(request), requests, seeds, router), requests, seeds, router


def _check(plan, key, requests, seeds, router):
    """The button that checks the plan by simulation, and its verdict beside it (kept for reruns)."""
    verified = st.session_state.setdefault("fleet.verified", OrderedDict())
    left, right = st.columns([1, 3], vertical_alignment="center")
    clicked = left.button(
        "Check by simulation", key="fleet.verify", type="primary",
        help="Simulate every request through continuous-batching replicas behind the router: each iteration priced "
        "by the step model, admission by free KV cache and the batch cap, open-loop arrivals with the workload's "
        "rate and variability (`calculator.simulation.verify_plan`). The plan's replica count is simulated, then "
        "one fewer, or one more, until the fewest that meet the targets are found. Runs are seeded: the same "
        "inputs give the same answer. Requests, seeds and router: in the sidebar.",
    )  # fmt: skip
    if clicked and requests * seeds > CLICK_REQUESTS:
        left.error(
            f"{requests:,} requests × {seeds} seeds is {requests * seeds:,} requests per replica count, more than the "
            f"{CLICK_REQUESTS:,} one check may simulate here: lower the requests or the seeds in the sidebar "
            "(`servecalc simulate` takes more)."
        )
    elif clicked:
        verified[key] = _verify(plan, key, requests, seeds, router)
        while len(verified) > SESSION_VERIFICATIONS:
            verified.popitem(last=False)
    verification = verified.get(key)
    with right:
        if verification is None:
            st.caption(
                f"Not checked yet: about {requests * seeds:,} requests per replica count simulated, a few seconds at "
                f"the defaults ({SIMULATED_REQUESTS:,} requests, {SIMULATED_SEEDS} seeds); at most {CLICK_REQUESTS:,} "
                f"requests × seeds and {CLICK_SECONDS:g} s per check."
            )
        else:
            _verdict(verification)
    return verification


def _verdict(verification):
    text = f"Simulation: {ui.plain(verification.verdict)}."
    if verification.meets_targets and verification.simulated_replicas == verification.analytical_replicas:
        st.success(text)
    elif verification.meets_targets:
        st.info(text)
    else:
        st.warning(text)


def _show_verification(plan, verification):
    found = verification.simulated_replicas
    results = verification.results
    mine = results[verification.analytical_replicas]
    cols = st.columns(4)
    cols[0].metric(
        "Analytical replicas", ui.fmt(verification.analytical_replicas), help="the plan's, from the closed forms"
    )
    cols[1].metric(
        "Simulated replicas",
        ui.fmt(found) if found is not None else "none",
        help="the fewest meeting every target in simulation",
    )
    cols[2].metric(
        "Attainment, per request",
        f"{100 * mine.attainment.get('all', float('nan')):.1f} %",
        help=(
            "at the plan's replicas, the share of measured requests whose own TTFT and TPOT meet every target; "
            "the TPOT target is a mean over requests, so a plan meets its targets while some requests' TPOT is "
            "above it"
        ),
    )
    cols[3].metric(
        "Goodput [request/s]",
        ui.number(mine.goodput.m_as("request/s"), 4),
        help="at the plan's replicas, measured requests meeting every target, per second",
    )
    st.plotly_chart(verification_chart(verification, plan), key="verification")
    counts = sorted(results)
    shown = st.radio(
        "Replica count to inspect", counts, index=counts.index(verification.analytical_replicas),
        horizontal=True, key="fleet.sim_inspect",
    )  # fmt: skip
    result = results[shown]
    targets = plan.targets
    left, right = st.columns(2)
    with left:
        figure = latency_distribution(result, "ttft", targets.ttft, targets.ttft_percentile)
        st.plotly_chart(figure, key="ttft-cdf")
    with right:
        st.plotly_chart(latency_distribution(result, "tpot", targets.tpot), key="tpot-cdf")
    attainment = pd.DataFrame(
        [
            {
                "replicas": count,
                **{f"{name} attained [%]": 100 * share for name, share in results[count].attainment.items()},
                "meets targets": bool(results[count].meets_targets),
                "verdict": results[count].verdict,
            }
            for count in counts
        ]
    )
    st.markdown("**Attainment**: the share of measured requests meeting each target, by replica count")
    ui.table(attainment, "simulated-attainment")
    with st.expander("KV cache and running sequences over time"):
        st.plotly_chart(kv_occupancy_over_time(result), key="kv-occupancy")
    ui.download_json(verification, "plan-verification", label="Download the verification as JSON")


_LOOSENED = {"ttft": "the TTFT target", "tpot": "the TPOT target", "both": "both targets", "none": "nothing"}


def _show_infeasible(plan, request):
    st.warning(f"No feasible plan: {ui.plain(plan.reason)}.")
    answers = answers_for(request)
    if answers.lines():
        st.info(
            "What would serve (the sizer's search with one target loosened, or the rate lowered):\n\n"
            + "\n".join(f"- {ui.plain(line)}" for line in answers.lines())
        )
    relaxed = answers.relaxed
    if relaxed is not None and relaxed.found:
        alternative = relaxed.plan
        st.info(
            f"Closest feasible alternative: loosen {_LOOSENED[relaxed.loosened]} by ×{ui.number(relaxed.factor, 3)} "
            f"to TTFT ≤ {ui.fmt(relaxed.ttft_slo, 'ms', 4)} and TPOT ≤ {ui.fmt(relaxed.tpot_slo, 'ms', 4)}: "
            f"{alternative.gpus} × {alternative.accelerator} at {alternative.precision} "
            f"(TP {alternative.layout.stage_gpus}, batch {alternative.batch}), "
            f"{ui.fmt(alternative.cost.per_hour, 'USD/hour', 5)}, {ui.number(relaxed.scale, 2)}× the GPUs this "
            "traffic takes when latency hardly binds (the smallest loosening within 10× of that: just above a "
            "target's floor, a plan would need replicas loaded next to nothing)."
        )
        ui.download_json(alternative, "closest-feasible-plan", label="Download the alternative plan as JSON")
    else:
        st.info(
            "No loosening of the targets up to ×100 gives a plan: the model does not fit these accelerators "
            "(add devices through a larger TP degree, a lower precision, or larger accelerators)."
        )


ui.run(main)
