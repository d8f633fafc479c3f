"""Autoscaling and regions: cold start, predictive vs reactive scaling, warm pool, edge cache, cost, failover."""

import itertools

import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.autoscaling import (
    cold_start_time,
    idle_cost_rate,
    peak_reduction,
    predictive_schedule,
    scaling_response_time,
    simulate_reactive_scaling,
    warm_pool,
)
from calculator.plots import demand_schedule_figure
from calculator.queueing import utilization
from calculator.regions import (
    EDGE_HIT_RATE_ENVELOPES,
    cost_per_completed_request,
    edge_cache_gpu_rate,
    edge_cache_latency,
    failover_headroom,
    symmetric_failover_utilization,
)


@st.cache_data(show_spinner="Simulating the autoscalers...", max_entries=32)
def schedules(hours, demand, per_replica, startup_min, lead_min, detection_min, drain_min, down_min, end_hour):
    times, rates = Q_(list(hours), "hour"), Q_(list(demand), "request/s")
    capacity, startup, end = Q_(per_replica, "request/s"), Q_(startup_min, "min"), Q_(end_hour, "hour")
    predictive = predictive_schedule(times, rates, capacity, startup, Q_(lead_min, "min"), end=end)
    reactive = simulate_reactive_scaling(
        times,
        rates,
        capacity,
        startup,
        detection_time=Q_(detection_min, "min"),
        end=end,
        backlog_drain_time=Q_(drain_min, "min") if drain_min > 0 else None,
        scale_down_delay=Q_(down_min, "min"),
    )
    return predictive, reactive


def main():
    st.title("Autoscaling and regions")
    st.caption(
        "How long new capacity takes, what forecasting buys over reacting, what a warm pool and an edge cache cost "
        "and save, and whether the other regions can take a failed region's traffic "
        "(sections 10.13 and 10.14; `calculator.autoscaling`, `calculator.regions`)."
    )
    sc = ui.Scenario("autoscaling")
    cold, scaling, pool, edge, regions = sc.tabs(
        ["Cold start", "Predictive vs reactive (Figure 21)", "Warm pool", "Edge cache", "Regions and failover"]
    )
    with cold:  # drawn even when hidden (a few inputs): the scaling tab can take its cold start
        startup = _cold_start(sc)
    if scaling.open:
        with scaling:
            _scaling(sc, startup)
    if pool.open:
        with pool:
            _warm_pool(sc)
    if edge.open:
        with edge:
            _edge(sc)
    if regions.open:
        with regions:
            _regions(sc)


def _cold_start(sc):
    answer = st.container()  # the metrics above the inputs
    a, b, c, d = st.columns(4)
    provisioning = sc.number("Provisioning [s]", "provision", 60.0, min_value=0.0, max_value=1e5, step=10.0, where=a)
    artifacts = sc.number(
        "Artifacts to fetch [GB]", "artifacts", 140.0, min_value=0.0, max_value=1e6, step=10.0, where=b
    )
    bandwidth = sc.number("Storage bandwidth [GB/s]", "storage", 0.5, min_value=1e-4, max_value=1e4, step=0.1, where=c)
    warmup = sc.number("Load and warm up [s]", "warmup", 60.0, min_value=0.0, max_value=1e5, step=10.0, where=d)
    e, f = st.columns(2)
    detection = sc.number("Detection [s]", "detect", 30.0, min_value=0.0, max_value=1e5, step=5.0, where=e)
    decision = sc.number("Decision [s]", "decide", 3.0, min_value=0.0, max_value=1e5, step=1.0, where=f)
    args = (Q_(provisioning, "s"), Q_(artifacts, "GB"), Q_(bandwidth, "GB/s"), Q_(warmup, "s"))
    cold = cold_start_time(*args)
    provisioned = cold_start_time(*args[:3], Q_(0, "s"))  # provisioning with the artifact fetch inside it
    response = scaling_response_time(Q_(detection, "s"), Q_(decision, "s"), provisioned, Q_(warmup, "s"))
    cols = answer.columns(2)
    cols[0].metric("Cold start of one replica", ui.fmt(cold, "min"))
    cols[1].metric("Demand change to serving capacity (Eq. 16)", ui.fmt(response, "min"))
    sc.answered()
    ui.show_math(cold_start_time, *args, title="cold start (Example 10.11)")
    ui.show_math(
        scaling_response_time, Q_(detection, "s"), Q_(decision, "s"), provisioned.to("s"), Q_(warmup, "s"),
        title="scaling response time (Eq. 16), the artifact fetch counted in provisioning",
    )  # fmt: skip
    return cold


def _scaling(sc, cold):
    st.caption("Table 21's day: 500 QPS at night, ramps at 06:00 and 09:00, 100 QPS per replica.")
    a, b = st.columns(2)
    hours = ui.parse_numbers(sc.text("Step start times [h]", "hours", "0, 6, 9, 17, 20", where=a), "Times")
    demand = ui.parse_numbers(sc.text("Demand of each step [request/s]", "demand", "500, 1500, 3000, 2000, 1000",
                                      where=b), "Demand")  # fmt: skip
    if len(hours) != len(demand) or any(later <= earlier for earlier, later in itertools.pairwise(hours)):
        st.warning("Give one demand per step and strictly increasing start times.")
        return
    c, d, e = st.columns(3)
    per_replica = sc.number("Per replica [request/s]", "per_replica", 100.0, min_value=0.001, max_value=1e9, where=c)
    use_cold = sc.toggle("Startup = the cold start of the first tab", "use_cold", False, where=d)
    startup = (
        cold.m_as("min")
        if use_cold
        else sc.number("Startup [min]", "startup", 7.0, min_value=0.0, max_value=1e4, step=1.0, where=d)
    )
    end = sc.number("Evaluate until [h]", "end", 24.5, min_value=hours[-1] + 0.1, max_value=1e4, step=0.5, where=e)
    f, g, h, i = st.columns(4)
    lead = sc.number("Forecast lead [min]", "lead", 30.0, min_value=0.0, max_value=1e4, step=5.0, where=f)
    detection = sc.number("Reactive detection [min]", "detection", 1.0, min_value=0.0, max_value=1e4, where=g)
    drain = sc.number("Backlog drain target [min] (0: ignore backlog)", "drain", 5.0, min_value=0.0, max_value=1e4,
                      where=h)  # fmt: skip
    down = sc.number("Scale-down delay [min]", "down", 10.0, min_value=0.0, max_value=1e4, where=i)
    predictive, reactive = schedules(
        tuple(hours), tuple(demand), per_replica, startup, lead, detection, drain, down, end
    )
    st.plotly_chart(demand_schedule_figure({"predictive": predictive, "reactive": reactive}), key="demand-schedule")
    rows = [
        {
            "policy": plan.policy,
            "peak replicas": plan.peak_replicas,
            "replica-hours": plan.replica_hours.m_as("hour"),
            "unserved [request]": plan.deficit.m_as("request"),
            "peak backlog [request]": plan.peak_backlog.m_as("request"),
        }
        for plan in (predictive, reactive)
    ]
    ui.table(pd.DataFrame(rows), "scaling-plans")
    if lead < startup:
        st.warning(
            f"The forecast starts replicas {lead:g} min ahead but they need {ui.number(startup, 3)} min: each rise is "
            f"uncovered for the difference. Closest feasible: a lead of at least {ui.number(startup, 3)} min."
        )
    ui.show_math(peak_reduction, predictive.peak_replicas, reactive.peak_replicas, title="peak reduction")


def _warm_pool(sc):
    a, b, c = st.columns(3)
    baseline = sc.number("Baseline capacity [request/s]", "baseline", 1000.0, min_value=0.0, max_value=1e9, where=a)
    surge = sc.number("Peak / baseline during provisioning", "surge", 2.0, min_value=1.0, max_value=100.0, where=b)
    headroom = sc.number("Headroom factor", "headroom", 1.5, min_value=1.0, max_value=10.0, step=0.1, where=c)
    d, e, f, g = st.columns(4)
    ready = sc.number("Ready capacity [request/s]", "ready", 1000.0, min_value=0.0, max_value=1e9, where=d)
    per_replica = sc.number("Per replica [request/s]", "pool_replica", 100.0, min_value=0.001, max_value=1e9, where=e)
    price = sc.number("Price per replica-hour [USD/h]", "pool_price", 4.0, min_value=0.0, max_value=1e5, where=f)
    idle = sc.slider("Idle share of the pool", "idle", 0.75, min_value=0.0, max_value=1.0, step=0.05, where=g)
    result = warm_pool(Q_(baseline, "request/s"), surge, headroom, Q_(ready, "request/s"), Q_(per_replica, "request/s"))
    cost = idle_cost_rate(result.pool_replicas, Q_(price, "USD/hour"), idle)
    cols = st.columns(3)
    cols[0].metric("Target capacity", ui.fmt(result.target_capacity, "request/s"))
    cols[1].metric("Warm replicas", ui.fmt(result.pool_replicas))
    cols[2].metric("Idle cost", ui.fmt(cost, "USD/hour"))
    ui.show_math(idle_cost_rate, result.pool_replicas, Q_(price, "USD/hour"), idle, title="idle cost of the pool")


def _edge(sc):
    a, b, c, d = st.columns(4)
    hit = sc.slider("Hit rate among eligible", "hit", 0.5, min_value=0.0, max_value=1.0, step=0.05, where=a)
    eligible = sc.slider("Eligible share", "eligible", 1.0, min_value=0.0, max_value=1.0, step=0.05, where=b)
    hit_ms = sc.number("Hit latency [ms]", "hit_ms", 10.0, min_value=0.0, max_value=1e6, where=c)
    miss_ms = sc.number("Miss latency [ms]", "miss_ms", 1200.0, min_value=0.0, max_value=1e7, step=50.0, where=d)
    rate = sc.number("Requests at the edge [request/s]", "edge_rate", 1000.0, min_value=0.0, max_value=1e9)
    latency = edge_cache_latency(hit, Q_(hit_ms, "ms"), Q_(miss_ms, "ms"), eligible)
    gpu_rate = edge_cache_gpu_rate(Q_(rate, "request/s"), hit, eligible)
    cols = st.columns(2)
    cols[0].metric("Mean latency", ui.fmt(latency, "ms"))
    cols[1].metric("Rate still reaching the GPUs", ui.fmt(gpu_rate, "request/s"))
    ui.show_math(edge_cache_latency, hit, Q_(hit_ms, "ms"), Q_(miss_ms, "ms"), eligible, title="mean latency")
    envelopes = pd.DataFrame(
        [{"workload": name, "hit rate low": low, "hit rate high": high, "verdict": verdict}
         for name, (low, high, verdict) in EDGE_HIT_RATE_ENVELOPES.items()]
    )  # fmt: skip
    st.caption("Table 24's hit-rate envelopes (measure your own on production traces):")
    ui.table(envelopes, "edge-hit-rates")


def _regions(sc):
    reg = ui.registry()
    st.markdown("**Cost per completed request in each priced region**")
    a, b, c, d = st.columns(4)
    gpus = sc.number("GPUs", "gpus", 8, min_value=1, max_value=1_000_000, integer=True, where=a)
    useful = sc.number("Useful requests per GPU [request/s]", "useful", 2.0, min_value=1e-6, max_value=1e6, where=b)
    idle = sc.number("Idle per busy hour [h]", "idle_h", 0.25, min_value=0.0, max_value=1e3, step=0.05, where=c)
    retries = sc.slider("Wasted on retries", "retries", 0.02, min_value=0.0, max_value=0.95, step=0.01, where=d)
    rows = []
    for price in reg.prices.values():
        if price.accelerator is None:
            continue
        cost = cost_per_completed_request(
            price.price,
            gpus,
            Q_(1, "hour"),
            Q_(useful, "request/s"),
            idle_time=Q_(idle, "hour"),
            retry_fraction=retries,
        )
        rows.append(
            {
                "price entry": price.id,
                "region": price.region,
                "market": price.market,
                "accelerator": price.accelerator,
                "USD/h per GPU": price.price.m_as("USD/hour"),
                "USD per 1,000 completed requests": cost.m_as("USD/krequest"),
            }
        )
    ui.table(pd.DataFrame(rows).sort_values("USD per 1,000 completed requests"), "regional-cost")

    st.markdown("**Failover headroom**")
    e, f, g = st.columns(3)
    names = [
        n.strip() for n in sc.text("Regions", "regions", "us-east, us-west, eu-west", where=e).split(",") if n.strip()
    ]
    capacities = ui.parse_numbers(
        sc.text("Capacity [request/s]", "capacities", "1000, 1000, 1000", where=f), "Capacity"
    )
    loads = ui.parse_numbers(sc.text("Load [request/s]", "loads", "600, 600, 600", where=g), "Load")
    if not (len(names) == len(capacities) == len(loads)) or len(names) < 2 or len(set(names)) != len(names):
        st.warning("Give at least two distinct regions, with one capacity and one load each.")
        return
    h, i, j = st.columns(3)
    failed = sc.select("Region that fails", "failed", names, names[0], where=h)
    movable = sc.slider("Share allowed to move", "movable", 1.0, min_value=0.0, max_value=1.0, step=0.05, where=i)
    rebuild = sc.number("KV rebuild load [request/s]", "rebuild", 0.0, min_value=0.0, max_value=1e9, where=j)
    result = failover_headroom(
        {n: Q_(c, "request/s") for n, c in zip(names, capacities, strict=True)},
        {n: Q_(x, "request/s") for n, x in zip(names, loads, strict=True)},
        failed,
        movable,
        Q_(rebuild, "request/s"),
    )
    (st.success if result.feasible else st.warning)(
        f"{result.reason}." + ("" if result.feasible else f" Closest feasible: add {ui.fmt(result.shortfall)} of "
                              "capacity to the survivors, or move less of the failed region's traffic.")
    )  # fmt: skip
    ui.table(
        pd.DataFrame(
            {"survivor": list(result.utilization), "utilization after failover": list(result.utilization.values())}
        ),
        "failover",
    )
    first = utilization(Q_(loads[0], "request/s"), Q_(capacities[0], "request/s"), 1)
    ui.show_math(
        symmetric_failover_utilization, first, len(names),
        title="the symmetric case: every region at the first region's utilization",
    )  # fmt: skip


ui.run(main)
