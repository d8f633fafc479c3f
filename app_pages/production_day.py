"""A day in production: a plan played through a day of demand with its autoscaler, failures, retries, admission."""

import hashlib
import json
from collections import OrderedDict
from dataclasses import astuple, dataclass, replace

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.dynamics import (
    AUTOSCALER_KINDS,
    AUTOSCALER_METRICS,
    DEMAND_SHAPES,
    WINDOW_COLUMNS,
    Admission,
    Failure,
    RetryPolicy,
    day_scenario,
    demand_from_file,
    demand_shape,
    parse_clock,
    plan_autoscaler,
    run_day,
)
from calculator.errors import CalculatorError
from calculator.fleet import FleetPlan, SearchSpace, Targets, Workload, plan_summary, size_fleet
from calculator.fleet.plan import MAX_PLAN_FILE_BYTES
from calculator.plots import day_figure
from calculator.precision import DEFAULT_PRECISION

#: Where the plan comes from: the page's default (the fleet sizer's default inputs, sized here), the plan the
#: fleet sizer showed in this session (its link "Play this plan through a day" selects it), or an uploaded JSON.
PLAN_SOURCES = {"default": "default plan", "sizer": "the fleet sizer's plan", "upload": "uploaded plan (JSON)"}
UPLOADED = "uploaded CSV"
FAILURES = ("none", "replicas", "region")
#: A demand file is at most what the server accepts from an upload (server.maxUploadSize, 1 MB).
MAX_DEMAND_BYTES = 1_000_000
#: The request-level run: hours simulated from the start of the day, at most.
MAX_REQUEST_HOURS = 4.0
#: The request-level run: requests (first attempts, every seed) the page simulates at most; the library's own
#: limit is 2,000,000 a seed (``simulation.MAX_REQUESTS``), minutes of a server's time the page does not spend.
MAX_PAGE_REQUESTS = 200_000


@dataclass(frozen=True)
class DaySettings:
    """The page's scenario as plain values (hashable for the cache); :meth:`scenario` builds the library's."""

    demand: str
    demand_file: str | None
    peak: float | None  # request/s; None: the plan's rate (a shape) or the file's rates
    kind: str
    metric: str
    warm_pool: int
    min_replicas: int | None
    max_replicas: int | None
    interval_s: float
    cooldown_s: float
    lead_min: float
    failure: str
    fail_count: int
    fail_region: str | None
    fail_at: str
    fail_hours: float  # 0: to the end of the run
    regions: tuple[str, ...]
    round_trip_ms: float
    timeout_s: float
    attempts: int
    budget: float | None
    max_queue: float | None
    deadline_s: float | None
    window_min: float
    storage_gbps: float
    hours: float | None = None  # the run's length; None: the demand curve's

    def scenario(self, plan):
        peak = None if self.peak is None else Q_(self.peak, "request/s")
        if self.demand in DEMAND_SHAPES:
            curve = demand_shape(self.demand, peak if peak is not None else plan.workload.arrival_rate)
        else:
            curve = demand_from_file(self.demand_file)
            curve = curve.scaled(peak) if peak is not None else curve
        bounds = {"min_replicas": self.min_replicas, "max_replicas": self.max_replicas}
        scaler = plan_autoscaler(
            plan, self.kind, self.metric, warm_pool=self.warm_pool, interval=Q_(self.interval_s, "s"),
            cooldown=Q_(self.cooldown_s, "s"), lead_time=Q_(self.lead_min, "min"),
            **{name: value for name, value in bounds.items() if value is not None},
        )  # fmt: skip
        return day_scenario(
            plan,
            curve,
            autoscaler=scaler,
            retry=RetryPolicy(timeout=Q_(self.timeout_s, "s"), max_attempts=self.attempts, budget=self.budget),
            admission=Admission(self.max_queue, None if self.deadline_s is None else Q_(self.deadline_s, "s")),
            failures=self.failures(),
            regions=self.regions,
            round_trip=Q_(self.round_trip_ms, "ms"),
            storage_bandwidth=Q_(self.storage_gbps, "GB/s"),
            window=Q_(self.window_min, "min"),
            duration=None if self.hours is None else Q_(self.hours, "hour"),
        )

    def failures(self):
        if self.failure == "none":
            return ()
        lasting = Q_(self.fail_hours, "hour") if self.fail_hours > 0 else None
        at = parse_clock(self.fail_at, "failure time")
        if self.failure == "region":
            return (Failure("region", at, lasting, self.fail_region),)
        return (Failure("replica", at, lasting, self.fail_count),)


@st.cache_data(show_spinner="Sizing the default plan...", max_entries=1)
def default_plan():
    """The fleet sizer's default inputs (the registry's default GPU prices) sized by the library: the default plan."""
    return size_fleet(
        "llama-3.1-70b",
        Workload(Q_(10, "request/s"), 1024, 256),
        Targets(Q_(1000, "ms"), Q_(50, "ms")),
        SearchSpace(("h100-sxm", "h200-sxm"), (DEFAULT_PRECISION,)),
    )


@st.cache_data(show_spinner="Playing the plan through the day...", max_entries=32)
def fluid_day(_plan, plan_key, settings):
    """The day in the fluid mode (``plan_key`` names the plan for the cache: a hash of its JSON)."""
    return run_day(_plan, settings.scenario(_plan))


def plan_key(plan):
    return hashlib.sha256(json.dumps(plan.to_json_dict(), sort_keys=True, default=str).encode()).hexdigest()


def main():
    st.title("A day in production")
    st.caption(
        "A plan played through a day of demand with its autoscaler, cold starts, a failure, client retries and "
        "overload control, window by window (sections 10.11-10.14; `calculator.dynamics.run_day`)."
    )
    sc = ui.Scenario("day")
    answer = st.container()  # the metrics first; the inputs sit in the sidebar (collapsed on a phone)
    with st.sidebar:
        plan = _plan(sc)
        settings = _settings(sc)
    if plan is None or settings is None:
        return
    if not plan.feasible:
        st.warning(f"The plan is infeasible ({ui.plain(plan.reason)}): there is no fleet to play through a day.")
        return
    result = fluid_day(plan, plan_key(plan), settings)
    _answer(answer, plan, result)
    sc.answered()
    load, latency, requests, windows, check = sc.tabs(
        ["Demand and replicas", "Latency", "Requests", "Windows", "Request by request"]
    )
    if load.open:
        with load:
            st.plotly_chart(day_figure(result, "load"), key="day-load")
            st.caption("Shaded: the windows whose attainment is below the goal.")
    if latency.open:
        with latency:
            st.plotly_chart(day_figure(result, "ttft", plan.targets), key="day-ttft")
            st.plotly_chart(day_figure(result, "tpot", plan.targets), key="day-tpot")
    if requests.open:
        with requests:
            st.plotly_chart(day_figure(result, "requests"), key="day-requests")
    if windows.open:
        with windows:
            ui.table(_labelled(result.windows), "day-windows")
    if check.open:
        with check:
            _request_check(sc, plan, settings)


def _answer(where, plan, result):
    with where:
        first, second = st.columns(3), st.columns(3)
        first[0].metric("Attainment", f"{100 * result.attainment:.2f} %", help="requests meeting every target")
        below = result.hours_missing
        first[1].metric("Time below goal", ui.fmt(below, "min" if below.m_as("hour") < 1 else "hour", 3),
                        help=f"time in windows whose attainment is below {result.goal:.0%}")  # fmt: skip
        first[2].metric("Peak replicas", ui.number(result.peak_replicas, 4), help="ready and starting")
        second[0].metric("GPU-hours", ui.fmt(result.gpu_hours, "hour", 4), help="ready, starting and warm pool")
        second[1].metric("Cost", ui.fmt(result.cost, "USD", 4))
        (st.success if result.hours_missing.m == 0 else st.warning)(f"{ui.plain(result.verdict)}.")
        st.caption(f"Plan: {ui.plain(plan_summary(plan))}; targets TTFT {ui.fmt(plan.targets.ttft, 'ms', 4)}, "
                   f"TPOT {ui.fmt(plan.targets.tpot, 'ms', 4)}.")  # fmt: skip


def _labelled(frame):
    """The windows with their units in the column names (the CSV keeps full precision)."""
    units = {name: unit for name, unit in WINDOW_COLUMNS.items() if unit and not name.endswith("_s")}
    return frame.rename(columns={name: f"{name} [{unit}]" for name, unit in units.items()})


def _plan(sc):
    st.subheader("Plan")
    source = sc.select("Plan", "plan", list(PLAN_SOURCES), "default", format_func=PLAN_SOURCES.get)
    if source == "sizer":
        plan = st.session_state.get(ui.SIZER_PLAN)
        if plan is not None:
            return plan
        st.warning("No fleet sizer plan in this session (a link carries none): the default plan is played.")
    elif source == "upload":
        uploaded = st.file_uploader("Plan JSON (servecalc size --json)", type=["json"], key="day.plan_file")
        if uploaded is None:
            st.info("Upload a plan to play it; until then the default plan is played.")
            return default_plan()
        path = ui.kept_upload(uploaded.getvalue(), MAX_PLAN_FILE_BYTES, "the plan file", "plan", ".json")
        try:
            return FleetPlan.from_json_file(path)
        except CalculatorError as exc:
            st.error(f"The plan file {message_of(exc)}.")
            return None
    return default_plan()


def message_of(exc):
    return ui.plain(ui.message(exc))


def _settings(sc):
    """The sidebar's demand and policy; None (with a message) when an upload is missing."""
    st.subheader("Demand")
    demand = sc.select("Demand", "demand", [*DEMAND_SHAPES, UPLOADED], "diurnal")
    peak = sc.number("Peak [request/s] (empty: the plan's rate)", "peak", None, min_value=0.001, max_value=1e6)
    path = None
    if demand == UPLOADED:
        uploaded = st.file_uploader("Demand CSV (time,rate) or trace (arrival_time)", type=["csv"], key="day.csv")
        if uploaded is None:
            st.info("Upload a demand curve (columns time and rate) or a request trace (arrival_time).")
            return None
        path = str(ui.kept_upload(uploaded.getvalue(), MAX_DEMAND_BYTES, "the demand file", "demand", ".csv"))
    st.subheader("Autoscaler")
    kind = sc.select("Autoscaler", "autoscaler", AUTOSCALER_KINDS, "reactive")
    a, b, c = st.columns(3)
    warm = sc.number("Warm pool", "warm", 0, min_value=0, max_value=10_000, integer=True, where=a)
    low = sc.number("Min", "min", None, min_value=0, max_value=100_000, integer=True, where=b,
                    help="fewest replicas (empty: 1; fixed: the plan's)")  # fmt: skip
    high = sc.number("Max", "max", None, min_value=1, max_value=100_000, integer=True, where=c,
                     help="most replicas (empty: ten times the plan's)")  # fmt: skip
    failure, count, region, at, hours, regions = _failure(sc)
    st.subheader("Clients and admission")
    d, e = st.columns(2)
    timeout = sc.number("Timeout [s]", "timeout", 30.0, min_value=0.1, max_value=3600.0, where=d)
    attempts = sc.number("Attempts", "attempts", 3, min_value=1, max_value=20, integer=True, where=e)
    queue = sc.number("Queue limit per replica (empty: none)", "queue", None, min_value=0.0, max_value=1e6)
    with st.expander("Advanced"):
        metric = sc.select("Reactive metric", "metric", AUTOSCALER_METRICS, "utilization")
        interval = sc.number("Decision interval [s]", "interval", 30.0, min_value=1.0, max_value=3600.0)
        cooldown = sc.number("Cooldown [s]", "cooldown", 300.0, min_value=0.0, max_value=86_400.0)
        lead = sc.number("Predictive lead [min]", "lead", 10.0, min_value=0.0, max_value=1440.0)
        storage = sc.number("Storage bandwidth [GB/s]", "storage", 1.0, min_value=0.01, max_value=1000.0,
                            help="the cold start loads the plan's weights at this rate")  # fmt: skip
        trip = sc.number("Round trip between regions [ms]", "trip", 0.0, min_value=0.0, max_value=10_000.0)
        budget = sc.number("Retry budget (empty: none)", "budget", None, min_value=0.0, max_value=100.0,
                           help="retries allowed per first attempt")  # fmt: skip
        deadline = sc.number("Shed above a wait of [s] (empty: never)", "deadline", None, min_value=0.01,
                             max_value=3600.0)  # fmt: skip
        window = sc.number("Window [min]", "window", 5.0, min_value=1.0, max_value=60.0)
    return DaySettings(
        demand, path, peak, kind, metric, warm, low, high, interval, cooldown, lead, failure, count, region, at,
        hours, regions, trip, timeout, attempts, budget, queue, deadline, window, storage,
    )  # fmt: skip


def _failure(sc):
    st.subheader("Failure")
    failure = sc.select("Failure", "fail", FAILURES, "none")
    names = tuple(
        dict.fromkeys(n.strip() for n in sc.text("Regions (comma-separated; empty: one pool)", "regions", "").split(",")
                      if n.strip())
    )  # fmt: skip
    count, region, at, hours = 1, None, "14:00", 2.0
    if failure != "none":
        a, b, c = st.columns(3)
        if failure == "region":
            if not names:
                st.warning("Name the regions above: a region failure takes one of them down (none is played).")
                return "none", count, region, at, hours, names
            region = sc.select("Region", "fail_region", list(names), names[0], where=a)
        else:
            count = sc.number("Lost", "fail_count", 1, min_value=1, max_value=100_000, integer=True, where=a)
        at = sc.text("At (HH:MM)", "fail_at", "14:00", max_chars=16, where=b)
        hours = sc.number("For [h]", "fail_hours", 2.0, min_value=0.0, max_value=168.0, where=c,
                          help="0: to the end of the run")  # fmt: skip
    return failure, count, region, at, hours, names


def _requests_expected(scenario, seeds):
    """First attempts a request-level run of ``scenario`` draws, in expectation: the demand's integral per seed."""
    seconds = scenario.seconds
    return float(scenario.demand.mean_between(np.array([0.0]), np.array([seconds]))[0]) * seconds * seeds


def _request_check(sc, plan, settings):
    """The request-level mode on the first hours of the day, beside the fluid mode on the same hours."""
    st.caption(
        'Every request through the simulator\'s replicas (`run_day(mode="requests")`), on the first hours of '
        "the day with the same policies, beside the fluid mode on the same hours."
    )
    a, b = st.columns(2)
    hours = sc.number("Hours simulated", "req_hours", 1.0, min_value=0.25, max_value=MAX_REQUEST_HOURS, where=a)
    seeds = sc.number("Seeds", "req_seeds", 1, min_value=1, max_value=4, integer=True, where=b)
    short = replace(settings, hours=hours)
    key = (plan_key(plan), astuple(short), seeds)  # values: each run defines DaySettings anew
    done = st.session_state.setdefault("day.requests", OrderedDict())
    if st.button("Run request by request", key="day.run_requests", type="primary"):
        try:
            scenario = short.scenario(plan)
            expected = _requests_expected(scenario, seeds)
            if expected > MAX_PAGE_REQUESTS:
                st.error(
                    f"The request-level run would simulate about {expected:,.0f} requests ({hours:g} h, {seeds} "
                    f"seed{'s' if seeds > 1 else ''}); the page runs at most {MAX_PAGE_REQUESTS:,}. Simulate fewer "
                    "hours or seeds, or run `servecalc day --mode requests` (at most 2,000,000 requests a seed)."
                )
                return
            bar = st.progress(0.0, text="Simulating request by request...")
            report = lambda share: bar.progress(share, text=f"Simulating... {share:.0%}")  # noqa: E731
            try:
                done[key] = run_day(plan, scenario, mode="requests", seeds=seeds, progress=report)
            finally:
                bar.empty()
        except CalculatorError as exc:
            st.error(message_of(exc))
        while len(done) > 4:
            done.popitem(last=False)
    requests = done.get(key)
    if requests is None:
        return
    fluid = fluid_day(plan, plan_key(plan), short)
    rows = [
        {"mode": day.mode, "attainment [%]": 100 * day.attainment, "hours below goal [h]": day.hours_missing.m,
         "GPU-hours [h]": day.gpu_hours.m, "cost [USD]": day.cost.m, "peak replicas": day.peak_replicas}
        for day in (fluid, requests)
    ]  # fmt: skip
    ui.table(pd.DataFrame(rows), "day-modes")


ui.run(main)
