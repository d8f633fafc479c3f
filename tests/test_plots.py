"""Figure builders: each trace carries the library's numbers, in the unit its axis names."""

import numpy as np
import pytest

from calculator import Q_, plots
from calculator.autoscaling import predictive_schedule, simulate_reactive_scaling
from calculator.batching import batch_operating_points, knee_batch_size
from calculator.economics import cumulative_cost_curve, unit_cost_at_volume
from calculator.fleet import frontier, size_fleet
from calculator.memory import kv_wall, model_memory_fit
from calculator.parallelism import tensor_parallel_layer_time
from calculator.queueing import ggc_mean_wait, mmc_mean_wait
from calculator.routing import expected_max_load, simulate_max_load
from calculator.speculative import speedup


def test_frontier_figure_draws_every_fitting_configuration_and_marks_the_plan():
    table = frontier("llama-3.1-8b", ["h100-sxm", "l4"], "fp16", 512, 128)
    plan = size_fleet(
        "llama-3.1-8b",
        ["h100-sxm", "l4"],
        "fp16",
        Q_(2, "request/s"),
        512,
        128,
        Q_(2, "s"),
        Q_(100, "ms"),
        price=Q_(2, "USD/hour"),
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
        & (table.tensor_parallel == plan.tensor_parallel)
        & (table.batch == plan.batch)
    ]
    assert star.y[0] == pytest.approx(row.tokens_per_s_per_gpu.iloc[0])


def test_frontier_figure_skips_the_star_for_an_infeasible_plan():
    table = frontier("llama-3.1-8b", "l4", "fp16", 512, 128)
    plan = size_fleet(
        "llama-3.1-8b", "l4", "fp16", Q_(2, "request/s"), 512, 128, Q_(1, "ms"), Q_(1, "ms"), price=Q_(1, "USD/hour")
    )
    assert not plan.feasible
    assert all(t.name != "plan" for t in plots.frontier_figure(table, plan).data)


def test_kv_wall_figure_lines_are_the_footprints_in_gb_with_the_capacity_line():
    # Figure 9's setting: 80 GB, 35 GB of INT4 weights, 327,680 B/token.
    wall = kv_wall(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), [1024, 16_384, 131_072], [1, 8])
    figure = plots.kv_wall_figure(wall)
    assert [t.name for t in figure.data] == ["batch 1", "batch 8"]
    assert np.allclose(figure.data[1].y, wall.footprint[1].m_as("GB"))
    assert figure.layout.shapes[0].y0 == pytest.approx(80)
    assert "[GB]" in figure.layout.yaxis.title.text
    assert "[GiB]" in plots.kv_wall_figure(wall, unit="GiB").layout.yaxis.title.text


def test_memory_breakdown_figure_stacks_weights_reserve_kv_and_free():
    fit = model_memory_fit("llama-3.1-70b", "h100-sxm", 4096, batch=8, weight_bits="fp8", reserve=Q_(2, "GB"))
    figure = plots.memory_breakdown_figure({"H100": fit})
    bars = {t.name: t.y[0] for t in figure.data if t.type == "bar"}
    assert bars["weights"] == pytest.approx(fit.weights.m_as("GB"))
    assert bars["KV cache"] == pytest.approx(fit.kv.m_as("GB"))
    assert sum(bars.values()) == pytest.approx(fit.capacity.m_as("GB"))


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
