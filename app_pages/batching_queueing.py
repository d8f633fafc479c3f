"""Batching and queueing: the batching knee, Little's law, dynamic and continuous batching, the hockey stick."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.batching import (
    TABLE_7,
    batch_operating_points,
    batch_service_time,
    concurrency_plan,
    continuous_batching_ceiling,
    dynamic_batching_latency,
    effective_service_rate,
    knee_batch_size,
    max_batch_for_budget,
    request_time_in_system,
    simulate_dynamic_batching,
    static_batch_accounting,
)
from calculator.plots import batching_curve_figure, curves_figure, hockey_stick_figure
from calculator.queueing import (
    arrival_times,
    ggc_mean_wait,
    ggc_wait_quantile,
    in_flight,
    mmc_mean_wait,
    queue_metrics,
    replica_demand,
    replicas_for_load,
    utilization,
)

SIMULATED_REQUESTS = 20_000
#: Rows the batching curve's table shows, evenly spaced over the batches plotted (the CSV has them all):
#: a table is for reading, and a styled one is limited to pandas' ``styler.render.max_elements`` cells.
SHOWN_BATCHES = 1_000


@st.cache_data(show_spinner=False, max_entries=256)
def simulated_latency_ms(rate, window_ms, max_batch, fixed_ms, marginal_ms, replicas, seed):
    """Mean latency of the event simulation of dynamic batching on a seeded Poisson trace."""
    times = arrival_times(Q_(rate, "request/s"), SIMULATED_REQUESTS, seed=seed)
    trace = simulate_dynamic_batching(
        times, Q_(window_ms, "ms"), max_batch, Q_(fixed_ms, "ms"), Q_(marginal_ms, "ms"), replicas
    )
    return float(np.mean(trace.latency.m_as("ms")))


@st.cache_data(show_spinner=False, max_entries=64)
def hockey_stick(servers, service_ms, arrival_cv, service_cv):
    """Waits of M/M/c and G/G/c over a utilization sweep."""
    rho = np.linspace(0.02, 0.98, 49)
    service = Q_(service_ms, "ms")
    rates = utilization.solve_for(
        "arrival_rate", utilization=rho, replica_throughput=Q_(1, "request") / service, replicas=servers
    )
    waits = {
        f"M/M/{servers}": mmc_mean_wait(rates, service, servers),
        f"G/G/{servers} (c_a={arrival_cv:g}, c_s={service_cv:g})": ggc_mean_wait(
            rates, service, servers, arrival_cv, service_cv
        ),
    }
    return rho, waits


def main():
    st.title("Batching and queueing")
    st.caption(
        "Why batches trade per-user speed for throughput, how many requests are in flight, what dynamic and "
        "continuous batching cost in latency and waste, and why waits explode near full utilization "
        "(sections 10.3 and 10.6; `calculator.batching`, `calculator.queueing`)."
    )
    sc = ui.Scenario("batching")
    # The shared step model in the sidebar (collapsed on a phone), so each tab's answer comes first.
    st.sidebar.markdown("**Batch step model of one replica** `T(B) = T0 + B t_m` (shared by the tabs)")
    a = b = c = st.sidebar
    fixed = sc.number("Fixed step time T0 [ms]", "t0", 40.0, min_value=0.001, max_value=1e5, step=1.0, where=a)
    marginal = sc.number(
        "Marginal time per request t_m [ms]", "tm", 0.5, min_value=0.0001, max_value=1e4, step=0.1, where=b
    )
    devices = sc.number("Devices per replica", "devices", 1, min_value=1, max_value=4096, integer=True, where=c)
    t0, tm = Q_(fixed, "ms"), Q_(marginal, "ms")
    curve, little, dynamic, continuous, queue = sc.tabs(
        ["Batching curve", "Little's law", "Dynamic batching", "Continuous batching", "Wait vs utilization"]
    )
    if curve.open:
        with curve:
            _curve(sc, t0, tm, devices)
    if little.open:
        with little:
            _little(sc, t0, tm)
    if dynamic.open:
        with dynamic:
            _dynamic(sc)
    if continuous.open:
        with continuous:
            _continuous(sc)
    if queue.open:
        with queue:
            _hockey(sc)


def _curve(sc, t0, tm, devices):
    answer = st.container()  # the metrics above the tab's inputs
    a, b = st.columns(2)
    largest = sc.number("Largest batch plotted", "largest", 256, min_value=2, max_value=100_000, integer=True, where=a)
    budget_ms = sc.number(
        "Execution budget per step [ms]", "budget", 100.0, min_value=0.001, max_value=1e6, step=5.0, where=b
    )
    knee = knee_batch_size(t0, tm)
    at_knee = max(1, round(knee))  # a batch is a whole number of requests
    points = batch_operating_points(np.arange(1, largest + 1), t0, tm, devices)
    fitting = max_batch_for_budget(t0, tm, Q_(budget_ms, "ms"))
    cols = answer.columns(3)
    cols[0].metric("Knee batch", ui.fmt(knee, digits=4))
    # B / T(B) is one decode step's sequences per step time: one token each, so tokens per second, shown per
    # device as the chart and the table show it.
    cols[1].metric(
        "Throughput per device at the knee",
        ui.fmt(batch_operating_points(at_knee, t0, tm, devices).throughput_per_device, "token/s"),
        help=f"at a batch of {at_knee:,}, the whole batch nearest the knee: one token per sequence per step",
    )  # fmt: skip
    cols[2].metric("Largest batch within the budget", f"{fitting:,}")
    sc.answered()
    if knee < 1:
        st.info(
            "The fixed step time T0 is shorter than the time per request t_m: the knee is below one request, so "
            "even a batch of 1 is past it and batching adds little throughput. The rate is shown at a batch of 1."
        )
    st.plotly_chart(batching_curve_figure(points, knee), key="batching-curve")
    table = pd.DataFrame(
        {
            "batch": points.batch_size,
            "step time [ms]": points.step_time.m_as("ms"),
            "interactivity per user [token/s]": points.interactivity.m_as("token/s"),
            "throughput per device [token/s]": points.throughput_per_device.m_as("token/s"),
        }
    )
    shown = table.iloc[np.unique(np.linspace(0, len(table) - 1, SHOWN_BATCHES).round().astype(int))]
    if len(shown) < len(table):
        st.caption(
            f"The table shows {len(shown):,} of the {len(table):,} batches, evenly spaced from 1 to {largest:,}; "
            "the CSV download has every batch."
        )
    ui.table(shown, "batching-curve", download=table)
    ui.show_math(knee_batch_size, t0, tm, title="the knee (Napkin Math 10.2)")
    ui.show_math(batch_service_time, at_knee, t0, tm, title="step time at the knee")
    ui.show_math(
        effective_service_rate, at_knee, t0, tm, title="service rate at the knee (one token per sequence per step)"
    )


def _little(sc, t0, tm):
    a, b, c, d = st.columns(4)
    rate = sc.number("Arrival rate [request/s]", "little_rate", 1000.0, min_value=0.001, max_value=1e9, where=a)
    latency = sc.number(
        "Mean time in system [ms]", "little_time", 100.0, min_value=0.001, max_value=1e7, step=10.0, where=b
    )
    batch = sc.number("Batch size", "little_batch", 8, min_value=1, max_value=1_000_000, integer=True, where=c)
    cap = sc.slider("Utilization cap", "little_cap", 0.8, min_value=0.05, max_value=1.0, step=0.05, where=d)
    batch_time = batch_service_time(batch, t0, tm)
    if Q_(latency, "ms") < batch_time:
        st.warning(
            f"The time in system cannot be shorter than one batch's execution, {ui.fmt(batch_time, 'ms')}: "
            f"the closest feasible value is {ui.fmt(batch_time, 'ms')}."
        )
        return
    plan = concurrency_plan(Q_(rate, "request/s"), Q_(latency, "ms"), batch, batch_time, cap)
    cols = st.columns(4)
    cols[0].metric("In flight (Little's law)", ui.fmt(plan.in_flight, "request"))
    cols[1].metric("Replicas", ui.fmt(plan.replicas))
    cols[2].metric("Utilization", f"{ui.number(100 * plan.utilization, 3)} %")
    cols[3].metric("Waiting on average", ui.fmt(plan.waiting, "request"))
    ui.table(ui.rows(plan.to_dict()), "concurrency-plan")
    ui.show_math(in_flight, Q_(rate, "request/s"), Q_(latency, "ms"), title="requests in flight (Theorem 10.1)")
    ui.show_math(
        replica_demand, Q_(rate, "request/s"), plan.replica_throughput, cap, title="replicas before rounding up"
    )


def _dynamic(sc):
    st.caption(
        "Example 10.1's image-classification replica: a linear fit of its batch timings, T0 = 4 ms, t_m = 0.8 ms."
    )
    e, f = st.columns(2)
    fixed = sc.number("T0 of this replica [ms]", "dyn_t0", 4.0, min_value=0.001, max_value=1e5, step=0.5, where=e)
    marginal = sc.number("t_m of this replica [ms]", "dyn_tm", 0.8, min_value=0.0001, max_value=1e4, step=0.1, where=f)
    a, b, c, d = st.columns(4)
    rate = sc.number("Arrival rate [request/s]", "dyn_rate", 500.0, min_value=0.01, max_value=1e7, step=50.0, where=a)
    window = sc.number("Window T_w [ms]", "dyn_window", 10.0, min_value=0.01, max_value=1e5, step=1.0, where=b)
    max_batch = sc.number("Max batch", "dyn_max", 64, min_value=1, max_value=100_000, integer=True, where=c)
    replicas = sc.number("Replicas", "dyn_replicas", 1, min_value=1, max_value=10_000, integer=True, where=d)
    args = (Q_(rate, "request/s"), Q_(window, "ms"), max_batch, Q_(fixed, "ms"), Q_(marginal, "ms"), replicas)
    result = dynamic_batching_latency(*args)
    cols = st.columns(5)
    cols[0].metric("Mean batch", ui.fmt(result.mean_batch_size))
    cols[1].metric("Formation delay", ui.fmt(result.formation_delay, "ms"))
    cols[2].metric("Queueing delay", ui.fmt(result.queueing_delay, "ms"))
    cols[3].metric("Execution", ui.fmt(result.service_time, "ms"))
    cols[4].metric("Time in system", ui.fmt(result.time_in_system, "ms"))
    if not result.stable:
        per_replica = effective_service_rate(result.mean_batch_size, Q_(fixed, "ms"), Q_(marginal, "ms"))
        needed = replicas_for_load(Q_(rate, "request/s"), per_replica, 0.9)
        check = dynamic_batching_latency(*args[:-1], needed)
        closest = (
            f"{needed} replicas (time in system {ui.fmt(check.time_in_system, 'ms')})"
            if check.stable
            else "a longer window or a larger max batch"
        )
        st.warning(
            f"Unstable: the replicas are {ui.number(100 * result.utilization, 3)} % loaded, so the queue grows without "
            f"bound. Closest feasible: {closest}."
        )
    else:
        ui.show_math(
            request_time_in_system, result.queueing_delay.to("ms"), result.formation_delay.to("ms"),
            result.service_time.to("ms"), title="time in system (Eq. 3)",
        )  # fmt: skip
    windows = np.geomspace(max(window / 20, 0.01), window * 5, 25)
    sweep = dynamic_batching_latency(args[0], Q_(windows, "ms"), *args[2:])
    series = {"model (Eq. 3)": sweep.time_in_system.to("ms")}
    simulate = sc.toggle("Check the model against a seeded event simulation", "dyn_sim", False)
    figure = curves_figure(
        Q_(windows, "ms"), series, x_name="Window", y_name="Mean time in system", x_unit="ms", y_unit="ms",
        title="Latency against the batching window", log_x=True,
    )  # fmt: skip
    if simulate:
        chosen = windows[::4]
        progress = st.progress(0.0, text="Simulating...")
        simulated = []
        for done, value in enumerate(chosen, start=1):
            simulated.append(simulated_latency_ms(rate, float(value), max_batch, fixed, marginal, replicas, 0))
            progress.progress(done / len(chosen), text=f"Simulated {done} of {len(chosen)} windows")
        progress.empty()
        figure.add_scatter(x=chosen, y=simulated, mode="markers", name=f"simulation ({SIMULATED_REQUESTS:,} requests)")
    st.plotly_chart(figure, key="dynamic-batching")


def _continuous(sc):
    st.caption(
        "Napkin Math 10.3: a static batch runs until its longest request ends; continuous batching releases and "
        "refills each slot as soon as its request finishes."
    )
    a, b = st.columns(2)
    text = sc.text("Output lengths of one static batch [token]", "lengths", "50, 200, 100, 150", where=a)
    step = sc.number("Iteration time [ms]", "iteration", 20.0, min_value=0.001, max_value=1e5, step=1.0, where=b)
    lengths = ui.parse_numbers(text, "Output lengths", integer=True, minimum=1)
    accounting = static_batch_accounting(lengths, Q_(step, "ms"))
    cols = st.columns(4)
    cols[0].metric("Idle slot share (waste)", f"{ui.number(100 * accounting.waste, 3)} %")
    cols[1].metric("Mean latency, static", ui.fmt(accounting.mean_barrier_latency, "ms"))
    cols[2].metric("Mean latency, released", ui.fmt(accounting.mean_release_latency, "ms"))
    cols[3].metric("Requests advanced meanwhile", ui.fmt(accounting.requests_advanced))
    st.markdown("**Ceiling on the continuous-batching gain** `1 + k CV` (Table 7)")
    c, d = st.columns(2)
    cv = sc.number("Output-length CV", "cv", 1.0, min_value=0.0, max_value=20.0, step=0.1, where=c)
    k = sc.number("Longest request, standard deviations above the mean", "k", 2.5, min_value=0.0, max_value=20.0,
                  step=0.5, where=d)  # fmt: skip
    st.metric("Capacity gain ceiling", f"{ui.number(continuous_batching_ceiling(cv, k), 3)}×")
    ui.show_math(continuous_batching_ceiling, cv, k, title="continuous-batching ceiling")
    ui.table(pd.DataFrame([row.to_dict() for row in TABLE_7]), "table-7")


def _hockey(sc):
    a, b, c, d = st.columns(4)
    servers = sc.number("Servers c", "servers", 4, min_value=1, max_value=10_000, integer=True, where=a)
    service = sc.number("Mean service time [ms]", "service", 100.0, min_value=0.001, max_value=1e7, step=10.0, where=b)
    arrival_cv = sc.number("Arrival CV", "ca", 1.5, min_value=0.0, max_value=10.0, step=0.1, where=c)
    service_cv = sc.number("Service CV", "cs", 1.0, min_value=0.0, max_value=10.0, step=0.1, where=d)
    rho, waits = hockey_stick(servers, service, arrival_cv, service_cv)
    st.plotly_chart(hockey_stick_figure(rho, waits), key="hockey-stick")
    st.caption("M/M/c is exact (Erlang C); G/G/c is the Allen-Cunneen approximation (docs/models-10.1-10.6.md).")
    rate = sc.number("Your arrival rate [request/s]", "rate", 30.0, min_value=0.001, max_value=1e9, step=1.0)
    args = (Q_(rate, "request/s"), Q_(service, "ms"), servers, arrival_cv, service_cv)
    metrics = queue_metrics(*args)
    if not metrics.stable:
        needed = replicas_for_load(args[0], Q_(1, "request") / args[1], 0.9)
        st.warning(
            f"Unstable: utilization {ui.number(metrics.utilization, 3)} ≥ 1, waits grow without bound. Closest "
            f"feasible: {needed} servers run it at 90 % utilization or less."
        )
        return
    p99 = ggc_wait_quantile(*args, 0.99)
    cols = st.columns(4)
    cols[0].metric("Utilization", f"{ui.number(100 * metrics.utilization, 3)} %")
    cols[1].metric("P(wait)", ui.number(metrics.wait_probability, 3))
    cols[2].metric("Mean wait", ui.fmt(metrics.mean_wait, "ms"))
    cols[3].metric("p99 wait", ui.fmt(p99, "ms"))
    ui.table(ui.rows(metrics.to_dict()), "queue-metrics")
    ui.show_math(utilization, args[0], Q_(1, "request") / args[1], servers, title="utilization")


ui.run(main)
