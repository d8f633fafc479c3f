"""Figure builders: each trace carries the library's numbers, in the unit its axis names."""

import re

import numpy as np
import pytest

from calculator import Q_, plots
from calculator.autoscaling import predictive_schedule, simulate_reactive_scaling
from calculator.batching import batch_operating_points, knee_batch_size
from calculator.economics import cumulative_cost_curve, unit_cost_at_volume
from calculator.errors import InputError
from calculator.fleet import Costs, SearchSpace, Targets, Workload, frontier, size_fleet
from calculator.memory import kv_wall, model_memory_fit
from calculator.parallelism import tensor_parallel_layer_time
from calculator.performance import predict_benchmark
from calculator.queueing import ggc_mean_wait, mmc_mean_wait
from calculator.routing import expected_max_load, simulate_max_load
from calculator.speculative import speedup


def test_frontier_figure_draws_every_fitting_configuration_and_marks_the_plan():
    table = frontier("llama-3.1-8b", ["h100-sxm", "l4"], "fp16", 512, 128)
    plan = size_fleet(
        "llama-3.1-8b",
        Workload(Q_(2, "request/s"), 512, 128),
        Targets(Q_(2, "s"), Q_(100, "ms")),
        SearchSpace(["h100-sxm", "l4"], "fp16"),
        costs=Costs(Q_(2, "USD/hour")),
    )
    figure = plots.frontier_figure(table, plan)
    clouds = [t for t in figure.data if t.mode == "markers" and t.name != "plan"]
    assert sum(len(t.x) for t in clouds) == len(table)
    lines = {t.name: t for t in figure.data if t.mode == "lines+markers"}
    h100 = table[(table.accelerator == "h100-sxm") & table.pareto].sort_values("tokens_per_s_per_user")
    assert np.allclose(lines["h100-sxm frontier"].y, h100.tokens_per_s_per_gpu)
    star = next(t for t in figure.data if t.name == "plan")
    row = table[
        (table.accelerator == plan.accelerator)
        & (table.tensor_parallel == plan.layout.stage_gpus)
        & (table.batch == plan.batch)
    ]
    assert star.y[0] == pytest.approx(row.tokens_per_s_per_gpu.iloc[0])


def test_frontier_figure_skips_the_star_for_an_infeasible_plan():
    table = frontier("llama-3.1-8b", "l4", "fp16", 512, 128)
    plan = size_fleet(
        "llama-3.1-8b", Workload(Q_(2, "request/s"), 512, 128), Targets(Q_(1, "ms"), Q_(1, "ms")),
        SearchSpace("l4", "fp16"), costs=Costs(Q_(1, "USD/hour")),
    )  # fmt: skip
    assert not plan.feasible
    assert all(t.name != "plan" for t in plots.frontier_figure(table, plan).data)


def test_kv_wall_figure_has_a_log_memory_axis_the_capacity_in_the_legend_and_each_crossing():
    # Figure 9's setting: 80 GB, 35 GB of INT4 weights, 327,680 B/token.
    wall = kv_wall(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), [1024, 16_384, 131_072], [1, 8])
    figure = plots.kv_wall_figure(wall)
    traces = {t.name: t for t in figure.data}
    assert np.allclose(traces["batch 8"].y, wall.footprint[1].m_as("GB"))
    assert figure.layout.yaxis.type == "log"  # the capacity is not squashed under footprints many times larger
    capacity = traces["capacity 80 GB"]  # named in the legend, no label over the lines
    assert np.allclose(capacity.y, 80) and list(capacity.x) == [1024, 131_072]
    # 8 sequences hit the wall at (80 - 35) GB / (8 x 327,680 B/token) = 17,166 tokens: a marker on the capacity.
    wall_8 = traces["batch 8: wall"]
    assert wall_8.x[0] == 45e9 // (8 * 327_680) and wall_8.y[0] == pytest.approx(80)
    assert wall_8.marker.color == traces["batch 8"].line.color
    assert "batch 1: wall" not in traces  # one sequence fits 137,329 tokens, beyond the axis
    assert "[GB]" in figure.layout.yaxis.title.text
    assert "[GiB]" in plots.kv_wall_figure(wall, unit="GiB").layout.yaxis.title.text


def test_memory_breakdown_figure_stacks_weights_reserve_kv_and_free():
    fit = model_memory_fit("llama-3.1-70b", "h100-sxm", 4096, batch=8, weight_bits="fp8", reserve=Q_(2, "GB"))
    figure = plots.memory_breakdown_figure({"H100": fit})
    bars = {t.name: t.y[0] for t in figure.data if t.type == "bar"}
    assert bars["weights"] == pytest.approx(fit.weights.m_as("GB"))
    assert bars["KV cache"] == pytest.approx(fit.kv.m_as("GB"))
    assert sum(bars.values()) == pytest.approx(fit.capacity.m_as("GB"))
    assert "over capacity" not in bars
    (line,) = figure.layout.shapes  # the capacity spans the whole bar
    assert (line.x0, line.x1) == (-0.5, 0.5) and line.y0 == line.y1 == pytest.approx(fit.capacity.m_as("GB"))


def test_memory_breakdown_figure_marks_the_capacity_and_hatches_what_overflows_it():
    fit = model_memory_fit("llama-3.1-70b", "h100-sxm", 32_768, batch=32, weight_bits="fp8", reserve=Q_(2, "GB"))
    assert not fit.fits
    figure = plots.memory_breakdown_figure({"H100": fit}, unit="GiB")
    bars = {t.name: t for t in figure.data}
    in_use = sum(bars[name].y[0] for name in ("weights", "reserve", "KV cache", "free"))
    over = bars["over capacity"]  # from the 80 GiB capacity to the top of the stack
    assert over.base[0] == pytest.approx(80) and over.base[0] + over.y[0] == pytest.approx(in_use)
    assert over.marker.pattern.shape == "/" and f"over by {in_use - 80:,.4g} GiB" == over.text[0]
    (line,) = figure.layout.shapes
    assert (line.x0, line.x1) == (-0.5, 0.5) and line.y0 == pytest.approx(80)
    assert "capacity 80 GiB" in {a.text for a in figure.layout.annotations}


def test_cost_curves_figure_plots_cumulative_cost_and_the_crossover():
    # Napkin Math 10.1's scenario: crossover after 40 days.
    curve = cumulative_cost_curve(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(50e6, "request/day"), Q_(360, "day"))
    figure = plots.cost_curves_figure({"chatbot": curve}, time_unit="day")
    assert np.allclose(figure.data[0].y, curve.cumulative_cost.m_as("USD"))
    assert figure.layout.shapes[0].x0 == pytest.approx(40)


def test_unit_cost_figure_draws_each_curve_and_the_price():
    volumes = Q_(np.logspace(4, 8, 9), "request/day")
    cost = unit_cost_at_volume(volumes, Q_(0.02 / 1000, "USD/token"), Q_(1e6, "request/day"), 0.55)
    figure = plots.unit_cost_figure(volumes, {"optimized": cost}, price=Q_(0.05 / 1000, "USD/token"))
    assert np.allclose(figure.data[0].y, cost.m_as("USD/ktoken"))
    assert figure.layout.shapes[0].y0 == pytest.approx(0.05)


def test_batching_curve_figure_has_throughput_interactivity_and_knee():
    points = batch_operating_points(np.arange(1, 161), Q_(5, "ms"), Q_(0.0625, "ms"), devices=8)
    knee = knee_batch_size(Q_(5, "ms"), Q_(0.0625, "ms"))
    figure = plots.batching_curve_figure(points, knee)
    assert np.allclose(figure.data[0].y, points.throughput_per_device.m_as("token/s"))
    assert np.allclose(figure.data[1].y, points.interactivity.m_as("token/s"))
    assert figure.layout.shapes[0].x0 == pytest.approx(80)


def test_hockey_stick_figure_carries_both_queue_models():
    rho = np.linspace(0.1, 0.95, 18)
    service = Q_(100, "ms")
    rate = Q_(rho * 4 / 0.1, "request/s")
    mmc = mmc_mean_wait(rate, service, 4)
    ggc = ggc_mean_wait(rate, service, 4, 1.5, 1.0)
    figure = plots.hockey_stick_figure(rho, {"M/M/4": mmc, "G/G/4": ggc})
    assert np.allclose(figure.data[0].y, mmc.m_as("ms"))
    assert np.allclose(figure.data[1].y, ggc.m_as("ms"))
    assert figure.data[1].y[-1] > figure.data[0].y[-1]  # burstier arrivals wait longer


def test_speculative_speedup_figure_one_line_per_draft_length():
    alpha = np.linspace(0, 1, 21)
    figure = plots.speculative_speedup_figure(alpha, {k: speedup(alpha, k, 0.05) for k in (2, 4)})
    assert [t.name for t in figure.data] == ["K = 2", "K = 4"]
    assert np.allclose(figure.data[1].y, speedup(alpha, 4, 0.05))


def test_demand_schedule_figure_overlays_predictive_and_reactive():
    times, demand = Q_([0, 6, 9, 17, 20, 24], "hour"), Q_([500, 1500, 3000, 2000, 1000, 500], "request/s")
    per_replica = Q_(100, "request/s")
    predictive = predictive_schedule(times, demand, per_replica, Q_(7, "min"), Q_(30, "min"), end=Q_(24.5, "hour"))
    reactive = simulate_reactive_scaling(times, demand, per_replica, Q_(7, "min"), end=Q_(24.5, "hour"))
    figure = plots.demand_schedule_figure({"predictive": predictive, "reactive": reactive})
    assert [t.name for t in figure.data] == ["required by demand", "predictive: ready", "reactive: ready"]
    assert np.array_equal(figure.data[1].y, predictive.ready)
    assert np.allclose(figure.data[2].x, reactive.times.m_as("hour"))


def test_tp_layer_time_figure_and_curves_figure():
    degrees = np.array([1, 2, 4, 8])
    times = {
        "fast": tensor_parallel_layer_time(Q_(30, "ms"), degrees, Q_(0.05, "ms")),
        "slow": tensor_parallel_layer_time(Q_(30, "ms"), degrees, Q_(1.0, "ms")),
    }
    figure = plots.tp_layer_time_figure(degrees, times)
    assert np.allclose(figure.data[1].y, times["slow"].m_as("ms"))
    assert figure.layout.xaxis.type == "log"
    assert "[ms]" in figure.layout.yaxis.title.text


def test_max_load_figure_shows_fluid_limit_and_simulation():
    bins = [100, 1000]
    expected = {"random": [expected_max_load(n, choices=1) for n in bins]}
    simulated = {"random": [simulate_max_load(n, choices=1, trials=20, seed=1) for n in bins]}
    figure = plots.max_load_figure(bins, expected, simulated)
    assert np.allclose(figure.data[0].y, expected["random"])
    assert figure.data[1].y[1] == pytest.approx(simulated["random"][1].mean)


# ---------------------------------------------------------------------------------------------- Simulation


@pytest.fixture(scope="module")
def checked_plan():
    """A plan of a few replicas with a p99 TTFT target, checked by a small simulation (threads, not processes)."""
    from concurrent.futures import ThreadPoolExecutor

    from calculator.simulation import verify_plan

    plan = size_fleet(
        "llama-3.1-70b", Workload(Q_(20, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms"), ttft_percentile=0.99),
        SearchSpace("h100-sxm", "fp8"), costs=Costs(Q_(4, "USD/hour")),
    )  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        verification = verify_plan(plan, requests=1200, seeds=2, executor=pool)
    return plan, verification


def test_latency_distribution_is_the_ecdf_of_each_seeds_measured_requests_with_the_target(checked_plan):
    plan, verification = checked_plan
    result = verification.results[plan.replicas]
    figure = plots.latency_distribution(result, "ttft", plan.targets.ttft, 0.99, max_points=10_000)
    assert [t.name for t in figure.data] == ["seed 0", "seed 1"]
    for seed, curve in zip((0, 1), figure.data, strict=True):
        rows = result.requests[(result.requests.seed == seed) & result.requests.measured]
        expected = np.sort(rows.ttft.to_numpy()) * 1e3
        assert np.allclose(curve.x, expected)  # every measured request, in ms, sorted
        assert np.allclose(curve.y, np.arange(1, len(expected) + 1) / len(expected))
    target, level = figure.layout.shapes
    assert target.x0 == target.x1 == pytest.approx(1000) and target.yref == "y domain"
    assert level.y0 == level.y1 == pytest.approx(0.99) and level.xref == "x domain"
    assert "[ms]" in figure.layout.xaxis.title.text


def test_latency_distribution_pooled_thinned_and_mean_target(checked_plan):
    plan, verification = checked_plan
    result = verification.results[plan.replicas]
    measured = result.requests[result.requests.measured]
    figure = plots.latency_distribution(result, "tpot", plan.targets.tpot, pooled=True, max_points=50)
    (curve,) = figure.data
    values = np.sort(measured.tpot.dropna().to_numpy()) * 1e3
    assert curve.name == "all seeds" and len(curve.x) <= 50
    assert curve.x[-1] == pytest.approx(values[-1]) and curve.y[-1] == pytest.approx(1.0)
    assert np.all(np.isin(np.round(curve.x, 9), np.round(values, 9)))  # points of the exact step function
    assert np.all(np.diff(curve.y) > 0)
    target, mean = figure.layout.shapes  # a mean target: the run's mean is drawn beside it
    assert target.x0 == pytest.approx(50)
    assert mean.x0 == pytest.approx(result.value("tpot", "mean").m_as("ms"))
    with pytest.raises(InputError, match="'metric' must be one of"):
        plots.latency_distribution(result, "latency")


def test_kv_occupancy_over_time_draws_each_replicas_series(checked_plan):
    plan, verification = checked_plan
    result = verification.results[plan.replicas]
    figure = plots.kv_occupancy_over_time(result, seed=1)
    names = [t.name for t in figure.data]
    assert names == [f"replica {r}: {kind}" for r in range(plan.replicas) for kind in ("KV", "running")]
    last = plan.replicas - 1
    rows = result.occupancy[(result.occupancy.seed == 1) & (result.occupancy.replica == last)]
    kv, running = figure.data[2 * last], figure.data[2 * last + 1]
    assert np.allclose(kv.x, rows.time) and np.allclose(kv.y, rows.kv_occupancy)
    assert np.allclose(running.y, rows.running) and running.yaxis == "y2"
    assert kv.line.color == running.line.color
    assert figure.layout.shapes[0].y0 == pytest.approx(1.0)  # the cache's capacity
    assert len(plots.kv_occupancy_over_time(result, running=False, max_replicas=1).data) == 1


def test_verification_chart_plots_the_table_against_the_targets(checked_plan):
    import dataclasses

    plan, verification = checked_plan
    table = verification.table.sort_values("replicas")
    figure = plots.verification_chart(verification, plan)
    traces = {t.name: t for t in figure.data}
    ttft = traces["p99 TTFT (simulated)"]
    assert np.array_equal(ttft.x, table.replicas) and np.allclose(ttft.y, table.ttft_p99_ms)
    assert np.allclose(traces["mean TPOT (simulated)"].y, table.tpot_mean_ms)
    assert list(ttft.marker.color) == ["#2ca02c" if ok else "#d62728" for ok in table.meets_targets]
    assert np.allclose(traces["p99 TTFT target 1000 ms"].y, 1000)
    assert np.allclose(traces["mean TPOT target 50 ms"].y, 50)
    assert figure.layout.yaxis.type == "log"
    lines = {shape.x0 for shape in figure.layout.shapes}  # a vertical line per counted answer, on both panels
    assert lines == {verification.analytical_replicas, verification.simulated_replicas} - {None}
    # A plan sized with verify=True carries its verification; apart counts get a line each.
    apart = dataclasses.replace(verification, simulated_replicas=verification.analytical_replicas + 1)
    figure = plots.verification_chart(dataclasses.replace(plan, verification=apart))
    texts = {a.text for a in figure.layout.annotations}
    assert {f"analytical {plan.replicas}", f"simulated {plan.replicas + 1}"} <= texts
    assert "p99 TTFT target 1000 ms" in {t.name for t in figure.data}
    with pytest.raises(InputError, match="no verification"):
        plots.verification_chart(plan)


def hand_day(attainment):
    """A DayResult of four half-hour windows written by hand (goal 0.5)."""
    import pandas as pd

    from calculator.dynamics import day_result

    frame = pd.DataFrame(
        {
            "start_s": [0.0, 1800.0, 3600.0, 5400.0], "demand_rate": [10.0, 20.0, 30.0, 40.0],
            "offered_rate": [10.0, 25.0, 36.0, 40.0], "ready": [2.0, 2.0, 3.0, 3.0], "starting": [0.0, 1.0, 0.0, 0.0],
            "queue": [0.0, 4.0, 2.0, 0.0], "ttft_p50_s": [0.2, 0.3, 0.4, 0.2], "ttft_p99_s": [0.5, 0.9, 1.2, 0.5],
            "tpot_p50_s": [0.03] * 4, "tpot_p99_s": [0.04, 0.05, 0.06, 0.04], "served": [1.8e4] * 4,
            "shed": [0.0, 5.0, 1.0, 0.0], "failed": [0.0, 7.0, 2.0, 0.0], "retried": [0.0, 6.0, 2.0, 0.0],
            "attainment": attainment, "gpu_hours": [1.0] * 4, "cost": [2.0] * 4,
        }
    )  # fmt: skip
    return day_result(frame, 1800.0, 0.5, "fluid")


def test_day_figure_draws_the_windows_and_shades_those_below_the_goal():
    # Half-hour windows start at 0, 0.5, 1 and 1.5 h; windows 2 and 3 (attainment 0.2 and 0.3 < 0.5) miss the
    # goal: one shaded span from 0.5 h to 1.5 h. Alone-standing misses (the first and the third) are two spans.
    load = plots.day_figure(hand_day([1.0, 0.2, 0.3, 1.0]), "load")
    traces = {t.name: t for t in load.data}
    assert np.allclose(traces["demand"].x, [0, 0.5, 1, 1.5]) and np.allclose(traces["demand"].y, [10, 20, 30, 40])
    assert np.allclose(traces["offered (with retries)"].y, [10, 25, 36, 40])
    assert traces["ready replicas"].yaxis == "y2" and np.allclose(traces["starting replicas"].y, [0, 1, 0, 0])
    assert [(s.x0, s.x1) for s in load.layout.shapes] == [(0.5, 1.5)]
    apart = plots.day_figure(hand_day([0.1, 1.0, 0.1, 1.0]), "load")
    assert [(s.x0, s.x1) for s in apart.layout.shapes] == [(0.0, 0.5), (1.0, 1.5)]
    # TTFT in ms (0.9 s = 900 ms) against the p99 target of 1 s drawn across the day, 0 to 2 h.
    ttft = {
        t.name: t
        for t in plots.day_figure(hand_day([1.0] * 4), "ttft", Targets(Q_(1, "s"), Q_(50, "ms"), None, 0.99)).data
    }
    assert np.allclose(ttft["TTFT p99"].y, [500, 900, 1200, 500]) and np.allclose(
        ttft["TTFT p50"].y, [200, 300, 400, 200]
    )
    assert np.allclose(ttft["target (p99)"].x, [0, 2]) and np.allclose(ttft["target (p99)"].y, [1000, 1000])
    tpot = {t.name: t for t in plots.day_figure(hand_day([1.0] * 4), "tpot").data}
    assert np.allclose(tpot["TPOT p99"].y, [40, 50, 60, 40]) and "target (mean)" not in tpot
    requests = {t.name: t for t in plots.day_figure(hand_day([1.0] * 4), "requests").data}
    assert np.allclose(requests["shed"].y, [0, 5, 1, 0]) and np.allclose(requests["failed"].y, [0, 7, 2, 0])
    assert np.allclose(requests["retried"].y, [0, 6, 2, 0]) and np.allclose(
        requests["shed"].x, [0.25, 0.75, 1.25, 1.75]
    )
    assert requests["queue (mean)"].yaxis == "y2" and np.allclose(requests["queue (mean)"].y, [0, 4, 2, 0])
    with pytest.raises(InputError, match="'panel' must be one of load, ttft, tpot, requests"):
        plots.day_figure(hand_day([1.0] * 4), "cost")


# ---------------------------------------------------------------------------------------------- Chart rules


#: The figure builders of calculator.plots (its public names that are not the colour mapping).
BUILDERS = sorted(set(plots.__all__) - {"ACCELERATOR_COLORS", "accelerator_color"})


@pytest.fixture(scope="module")
def every_figure(checked_plan):
    """Each builder of calculator.plots with representative inputs (the simulation ones on the checked plan)."""
    plan, verification = checked_plan
    result = verification.results[plan.replicas]
    wall = kv_wall(
        Q_(80, "GiB"), Q_(35, "GB"), Q_(327_680, "B/token"), np.geomspace(256, 131_072, 10).round(), [1, 8, 128]
    )
    fit = model_memory_fit("llama-3.1-70b", "h100-sxm", 32_768, batch=32, weight_bits="fp8", reserve=Q_(2, "GB"))
    volumes = Q_(np.logspace(4, 8, 9), "request/day")
    rho = np.linspace(0.1, 0.95, 18)
    rate = Q_(rho * 4 / 0.1, "request/s")
    degrees = np.array([1, 2, 4, 8, 16, 32, 64])
    alpha = np.linspace(0, 1, 21)
    times, demand = Q_([0, 6, 9, 17, 20, 24], "hour"), Q_([500, 1500, 3000, 2000, 1000, 500], "request/s")
    schedule = predictive_schedule(times, demand, Q_(100, "request/s"), Q_(7, "min"), Q_(30, "min"), end=Q_(25, "hour"))
    curve = cumulative_cost_curve(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(50e6, "request/day"), Q_(360, "day"))
    sizes = Q_(np.geomspace(1e3, 1e9, 13), "B")
    clients = np.array([1, 4, 16, 64, 256, 1024, 4096])
    return {
        "batching_curve_figure": plots.batching_curve_figure(
            batch_operating_points(np.arange(1, 161), Q_(5, "ms"), Q_(0.0625, "ms"), devices=8), 80
        ),
        "benchmark_prediction_figure": plots.benchmark_prediction_figure(
            predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 4, 1024, 128, clients, "vllm"), clients, "tpot"
        ),
        "cost_curves_figure": plots.cost_curves_figure({"chatbot": curve}, time_unit="day"),
        "curves_figure": plots.curves_figure(
            sizes.to("MB"),
            {"all-reduce": Q_(np.geomspace(1e-4, 1e-1, 13), "ms")},
            x_name="Message",
            y_name="Time",
            x_unit="MB",
            y_unit="ms",
            log_x=True,
            log_y=True,
        ),
        "day_figure": plots.day_figure(hand_day([1.0, 0.2, 0.3, 1.0]), "load"),
        "demand_schedule_figure": plots.demand_schedule_figure({"predictive": schedule}),
        "frontier_figure": plots.frontier_figure(frontier("llama-3.1-8b", ["h100-sxm", "l4"], "fp16", 512, 128), plan),
        "hockey_stick_figure": plots.hockey_stick_figure(rho, {"M/M/4": mmc_mean_wait(rate, Q_(100, "ms"), 4)}),
        "kv_occupancy_over_time": plots.kv_occupancy_over_time(result),
        "kv_wall_figure": plots.kv_wall_figure(wall, unit="GiB"),
        "latency_distribution": plots.latency_distribution(result, "ttft", plan.targets.ttft, 0.99, log_x=True),
        "max_load_figure": plots.max_load_figure(
            [10, 100, 1000], {"random": [expected_max_load(n, choices=1) for n in (10, 100, 1000)]}, {}
        ),
        "memory_breakdown_figure": plots.memory_breakdown_figure({"h100-sxm, TP 1": fit}, unit="GiB"),
        "speculative_speedup_figure": plots.speculative_speedup_figure(alpha, {4: speedup(alpha, 4, 0.05)}),
        "tp_layer_time_figure": plots.tp_layer_time_figure(
            degrees, {"nvlink": tensor_parallel_layer_time(Q_(30, "ms"), degrees, Q_(0.05, "ms"))}, unit="us"
        ),
        "unit_cost_figure": plots.unit_cost_figure(
            volumes,
            {"optimized": unit_cost_at_volume(volumes, Q_(2e-5, "USD/token"), Q_(1e6, "request/day"), 0.55)},
            price=Q_(5e-5, "USD/token"),
        ),
        "verification_chart": plots.verification_chart(verification, plan),
    }


def _axes(figure):
    return {name: figure.layout[name] for name in figure.layout if re.fullmatch(r"[xy]axis\d*", name)}


def test_every_builder_is_checked_by_the_chart_rules(every_figure):
    assert sorted(every_figure) == BUILDERS


@pytest.mark.parametrize("builder", BUILDERS)
def test_every_axis_names_its_unit_and_labels_ticks_as_plain_numbers_in_it(every_figure, builder):
    figure = every_figure[builder]
    for name, axis in _axes(figure).items():
        title = axis.title.text or ""
        if axis.type == "category":
            assert title, (builder, name)
        else:  # a unit, or the kind of a plain number: [ms], [GiB], [token/s], [count], [%]
            assert re.search(r"\[[^\]]+\]$", title), (builder, name, title)
        assert axis.exponentformat == "none" and axis.separatethousands, (builder, name)  # no "100µ", no "2k"
        if axis.type == "log":
            ticks, labels = list(axis.tickvals), list(axis.ticktext)
            assert len(ticks) >= 2 and len(labels) == len(ticks), (builder, name)
            # Each label reads as the number it marks, in the axis unit (no SI prefix, no exponent shorthand).
            assert [float(label.replace(",", "")) for label in labels] == pytest.approx(ticks), (builder, name)
            assert all(ticks[i] < ticks[i + 1] for i in range(len(ticks) - 1))


@pytest.mark.parametrize("builder", BUILDERS)
def test_every_trace_hovers_with_its_unit_and_the_legend_sits_clear_of_the_plot(every_figure, builder):
    figure = every_figure[builder]
    for trace in figure.data:
        ref = getattr(trace, "yaxis", None) or "y"
        unit = re.search(r"\[([^\]]+)\]$", figure.layout[f"yaxis{ref[1:]}"].title.text).group(1)
        assert trace.hovertemplate and unit in trace.hovertemplate, (builder, trace.name, trace.hovertemplate)
    legend, title = figure.layout.legend, figure.layout.title
    # Above the plotting area, below the title (pinned to the top), in rows: Plotly moves the plot down for it.
    assert (legend.orientation, legend.yref, legend.yanchor) == ("h", "container", "top")
    assert (title.yref, title.y, title.yanchor) == ("container", 1, "top")
    assert legend.y < 1 if title.text else legend.y == 1


def test_log_axes_tick_powers_of_two_for_degrees_and_1_2_5_decades_for_times(every_figure):
    tp = every_figure["tp_layer_time_figure"]
    assert list(tp.layout.xaxis.tickvals) == [1, 2, 4, 8, 16, 32, 64]
    assert list(tp.layout.xaxis.ticktext) == ["1", "2", "4", "8", "16", "32", "64"]
    # A time axis in ms from 0.0001 to 0.1 ms: plain numbers in ms (Plotly's default would print "100µ").
    small = every_figure["curves_figure"].layout.yaxis
    assert list(small.ticktext) == ["0.0001", "0.0002", "0.0005", "0.001", "0.002", "0.005", "0.01", "0.02",
                                    "0.05", "0.1"]  # fmt: skip
    # Decades only when the data span many of them: the message axis runs 0.001 MB to 1,000 MB.
    assert list(every_figure["curves_figure"].layout.xaxis.ticktext) == ["0.001", "0.01", "0.1", "1", "10", "100",
                                                                         "1,000"]  # fmt: skip


def test_reference_labels_on_a_log_axis_sit_at_their_line(every_figure):
    # Plotly places annotations on a log axis at log10 of y: the price label must sit at the price line.
    figure = every_figure["unit_cost_figure"]
    (line,) = figure.layout.shapes
    (label,) = figure.layout.annotations
    assert line.y0 == pytest.approx(0.05) and 10**label.y == pytest.approx(0.05)


def test_an_accelerator_keeps_its_colour_across_figures_subsets_and_orders():
    first = plots.frontier_figure(frontier("llama-3.1-8b", ["h100-sxm", "l4"], "fp16", 512, 128))
    second = plots.frontier_figure(frontier("llama-3.1-8b", ["l4", "h200-sxm", "h100-sxm"], ["fp8", "fp16"], 512, 128))

    def colours(figure):
        lines = {t.name.removesuffix(" frontier"): t.line.color for t in figure.data if t.mode == "lines+markers"}
        clouds = {t.name: t.marker.color for t in figure.data if t.mode == "markers"}
        return lines, clouds

    (lines_1, clouds_1), (lines_2, clouds_2) = colours(first), colours(second)
    assert lines_1["h100-sxm"] == lines_2["h100-sxm"] and lines_1["l4"] == lines_2["l4"]
    assert lines_1["h100-sxm"] != lines_1["l4"] != lines_2["h200-sxm"] != lines_2["h100-sxm"]
    # An accelerator's cloud of configurations has its colour at every precision; the precision is the symbol.
    assert clouds_2["h100-sxm fp8"] == clouds_2["h100-sxm fp16"] == clouds_1["h100-sxm fp16"] == lines_2["h100-sxm"]
    symbols = {t.name: t.marker.symbol for t in second.data if t.mode == "markers"}
    assert symbols["h100-sxm fp8"] == symbols["l4 fp8"] != symbols["h100-sxm fp16"]


def test_every_registry_accelerator_has_its_own_colour():
    from calculator.registry import load_registry

    registry = load_registry()
    colours = [plots.accelerator_color(name) for name in registry.accelerators]
    assert len(set(colours)) == len(colours)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours)
    assert plots.accelerator_color("my-accelerator") == plots.accelerator_color("my-accelerator")  # not registered
