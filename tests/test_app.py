"""Dashboard pages run headless with Streamlit's AppTest: no exception, the library's numbers, live inputs, charts.

Each page test checks that the page renders without an exception or an error box, that a default output equals
what the library returns for the same inputs, that changing one input changes the output as the library says,
and that its chart carries the library's data. Pages are opened directly (``switch_page`` before the first run)
with query parameters, which is also how a shared link reproduces a what-if.
"""

import base64
import functools
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from calculator import Q_
from calculator.autoscaling import cold_start_time, predictive_schedule
from calculator.batching import knee_batch_size
from calculator.economics import crossover_time, cumulative_cost_curve, serving_cost_rate
from calculator.errors import CalculatorError, RegistryError
from calculator.fleet import (
    Costs,
    SearchSpace,
    ServingOptions,
    Targets,
    Workload,
    default_price,
    frontier,
    relax_targets,
    size_fleet,
)
from calculator.memory import min_tensor_parallel, model_memory_fit
from calculator.parallelism import activation_message_bytes, ring_allreduce_time, tensor_parallel_layer_time
from calculator.precision import bytes_per_element
from calculator.queueing import mmc_mean_wait, queue_metrics, replicas_for_load
from calculator.registry import load_registry
from calculator.results import format_display, format_number
from calculator.routing import expected_max_load, fanout_slow_probability
from calculator.speculative import speculative_timing, speedup

ROOT = Path(__file__).resolve().parent.parent


def open_page(page: str, **params: str) -> AppTest:
    """Run the app landing on ``app_pages/<page>.py`` with the given query parameters."""
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.switch_page(f"app_pages/{page}.py")
    for name, value in params.items():
        app.query_params[name] = value
    app.run()
    assert_clean(app)
    return app


def rendered(markdown: str) -> str:
    """The text a reader sees of a message whose Markdown characters are escaped (``ui.plain``)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def assert_clean(app: AppTest) -> None:
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]


def tab_key(app: AppTest) -> str | None:
    """The session key of the page's open tab (``memory.tab``, ``Scenario.tabs``); ``None`` without such tabs."""
    return next((key for key in app.session_state if key.endswith(".tab")), None)


def open_tab(app: AppTest, label: str, *, clean: bool = True) -> AppTest:
    """Open the page's tab ``label`` and rerun: a page draws only its open tab."""
    assert label in [tab.label for tab in app.tabs], [tab.label for tab in app.tabs]
    app.session_state[tab_key(app)] = label
    app.run()
    if clean:
        assert_clean(app)
    return app


def each_tab(app: AppTest, *, clean: bool = True):
    """The page at each of its tabs in turn, or once as it is when it has no such tabs."""
    if tab_key(app) is None:
        yield app
        return
    for label in [tab.label for tab in app.tabs]:
        yield open_tab(app, label, clean=clean)


def metric(app: AppTest, label: str) -> str:
    return next(m.value for m in app.metric if m.label == label)


def charts(app: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def values(data) -> np.ndarray:
    """A trace's x or y as an array (plotly may ship arrays base64-encoded)."""
    if isinstance(data, dict) and "bdata" in data:
        array = np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
        return array.reshape(data["shape"]) if "shape" in data and isinstance(data["shape"], list) else array
    return np.asarray(data, dtype=float)


def trace(spec: dict, name: str) -> dict:
    return next(t for t in spec["data"] if t.get("name") == name)


# ---------------------------------------------------------------------------------------------- Fleet sizer


FLEET_ARGS = ("llama-3.1-70b", ["h100-sxm", "h200-sxm"], ["fp8"])  # the page's default: DEFAULT_PRECISION


def fleet_parts(rate: float, ttft_ms: float, tpot_ms: float) -> dict:
    """The page's default sizing as size_fleet's parts (the prices rounded to the cent, as the page shows them)."""
    model, accelerators, precisions = FLEET_ARGS
    prices = {name: Q_(round(default_price(name).m_as("USD/hour"), 2), "USD/hour") for name in accelerators}
    return {
        "model": model,
        "workload": Workload(Q_(rate, "request/s"), 1024, 256),
        "targets": Targets(Q_(ttft_ms, "ms"), Q_(tpot_ms, "ms")),
        "space": SearchSpace(accelerators, precisions),
        "costs": Costs(prices),
    }


def fleet_plan(rate: float, tpot_ms: float = 50.0):
    return size_fleet(**fleet_parts(rate, 1000, tpot_ms))


def test_fleet_sizer_is_the_landing_page_and_shows_the_library_plan():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert_clean(app)
    assert app.title[0].value == "Fleet sizer"
    plan = fleet_plan(10)
    assert metric(app, "GPUs") == str(plan.gpus)
    assert metric(app, "Replicas × TP") == f"{plan.replicas} × {plan.layout.stage_gpus}"
    assert metric(app, "Batch cap per replica") == str(plan.batch)
    assert metric(app, "Binding constraint") == plan.binding_constraint
    assert metric(app, "Cost per hour").startswith(f"{plan.cost.per_hour.m_as('USD/hour'):.2f}")
    # Budgets' units: per month (730.5 hours) and per million total tokens, beside per million output tokens.
    monthly, unit = metric(app, "Cost per month").replace(",", "").split()
    assert unit == "USD/month" and float(monthly) == pytest.approx(
        plan.cost.per_hour.m_as("USD/hour") * 730.5, rel=5e-4
    )
    assert metric(app, "Per 1M total tokens") == f"{plan.cost.per_million_total_tokens.m_as('USD'):.4g} USD"
    assert metric(app, "TTFT (mean)") and metric(app, "TPOT (mean)")  # a percentile target would say p99
    # The answer comes with the GPU count at the ends of the model's error interval.
    low, high = plan.gpus_interval
    assert low <= plan.gpus and (high is None or plan.gpus <= high)
    assert any(f"{low}-{high} GPUs" in info.value for info in app.info)
    # The alternatives open on their table; no chart is drawn before a visitor asks for one.
    assert app.tabs[0].label == "Why the other configurations lost" and not charts(app)
    # The frontier chart carries every configuration of the library's table and stars the plan's.
    table = frontier(*FLEET_ARGS, 1024, 256)
    spec = charts(open_tab(app, "Throughput vs interactivity (Figure 6)"))[0]
    clouds = [t for t in spec["data"] if t.get("mode") == "markers" and t["name"] != "plan"]
    assert sum(len(values(t["x"])) for t in clouds) == len(table)
    star = trace(spec, "plan")
    row = table[
        (table.accelerator == plan.accelerator)
        & (table.precision == plan.precision)
        & (table.tensor_parallel == plan.layout.stage_gpus)
        & (table.batch == plan.batch)
    ]
    assert values(star["y"])[0] == pytest.approx(row.tokens_per_s_per_gpu.iloc[0])
    # The whole what-if is in the address: every input is a query parameter.
    assert app.query_params["rate"] == "10.0"
    assert {"model", "gpus", "precisions", "ttft", "tpot", "util", "price.h100-sxm"} <= set(app.query_params)


def test_fleet_sizer_offers_the_plan_as_launch_commands_and_a_manifest():
    app = open_page("fleet_sizer")
    assert_clean(app)
    assert "Deploy this plan" in [e.label for e in app.expander]
    labels = [button.proto.label for button in app.get("download_button")]
    assert {"vLLM command", "SGLang command", "Kubernetes manifest"} <= set(labels)
    # The default plan runs Llama-3.1-70B at FP8: every engine loads NVIDIA's FP8 checkpoint of it.
    assert "TensorRT-LLM command" in labels
    assert not [w.value for w in app.warning if "command:" in w.value or "manifest:" in w.value]
    # Llama-3.3-70B has none in the registry: vLLM and SGLang quantize it as they load it, TensorRT-LLM needs a
    # pre-quantized checkpoint and says so instead of a wrong command.
    app = open_page("fleet_sizer", model="llama-3.3-70b")
    assert_clean(app)
    labels = [button.proto.label for button in app.get("download_button")]
    assert {"vLLM command", "SGLang command", "Kubernetes manifest"} <= set(labels)
    assert "TensorRT-LLM command" not in labels
    (warning,) = [w.value for w in app.warning if "command:" in w.value or "manifest:" in w.value]
    assert warning.startswith("TensorRT-LLM command:") and "checkpoints" in warning
    # Beside the launch commands, the benchmark that measures the deployment (the default plan's engine is
    # the generic profile, so vLLM's client), ending at the plan's own rate per replica
    (bench,) = [block.value for block in app.code if "bench serve" in block.value]
    assert bench.startswith("vllm bench serve") and bench.count("\n") == 2 and "--save-result" in bench


def test_fleet_sizer_shows_disaggregated_pools_with_intervals_commands_and_their_simulation_check():
    # Issue 55 item 4: the same traffic as prefill and decode pools, as size_disaggregated sizes it.
    from calculator.fleet import size_disaggregated
    from calculator.simulation import verify_disaggregated

    app = open_tab(open_page("fleet_sizer"), "Disaggregated pools")
    parts = fleet_parts(10, 1000, 50)
    pools = size_disaggregated(
        parts["model"], parts["workload"], parts["targets"], parts["space"], costs=parts["costs"]
    )
    assert pools.feasible
    prefill, decode = pools.prefill, pools.decode
    assert metric(app, "Prefill replicas × TP") == f"{prefill['replicas']} × {prefill['tensor_parallel']}"
    assert metric(app, "Decode replicas × TP") == f"{decode['replicas']} × {decode['tensor_parallel']}"
    assert metric(app, "Pools TTFT") == format_display(pools.ttft, "ms", 3)
    low, high = pools.ttft_interval
    assert any(
        f"TTFT {format_display(low, 'ms', 3)} to {format_display(high, 'ms', 3)}" in c.value for c in app.caption
    )
    labels = [button.proto.label for button in app.get("download_button")]
    assert {"vLLM pools and proxy", "SGLang pools and router", "TensorRT-LLM pools and server"} <= set(labels)
    assert "Kubernetes manifest of the pools" in labels
    app.button(key="fleet.verify_pools").click().run()
    assert_clean(app)
    check = verify_disaggregated(pools, requests=3000, seeds=2)  # the page's default requests and seeds
    assert f"Simulation: {check.verdict}." in [rendered(box.value) for box in [*app.success, *app.warning]]
    assert metric(app, "Simulated TPOT (mean)") == format_display(check.tpot, "ms", 3)


def test_fleet_sizer_follows_an_input_change_and_a_shared_link():
    app = open_page("fleet_sizer")
    app.number_input(key="fleet.rate").set_value(40.0).run()
    assert_clean(app)
    assert metric(app, "GPUs") == str(fleet_plan(40).gpus)
    linked = open_page("fleet_sizer", rate="40.0")
    assert metric(linked, "GPUs") == str(fleet_plan(40).gpus)
    assert linked.number_input(key="fleet.rate").value == 40.0


def test_fleet_sizer_plans_on_the_output_length_spread_it_is_given():
    # Reasoning traces spread their outputs (CV about 1): the longer ones are more often in the batch, so the
    # running sequences hold more KV than the mean request; the page's plan is the library's with that spread.
    import dataclasses

    parts = fleet_parts(40, 1000, 50.0)
    spread = size_fleet(**parts | {"workload": dataclasses.replace(parts["workload"], output_cv=1.0)})
    assert spread.gpus != fleet_plan(40).gpus or spread.batch != fleet_plan(40).batch  # the spread moves the plan
    linked = open_page("fleet_sizer", rate="40.0", output_cv="1.0")
    assert_clean(linked)
    assert linked.number_input(key="fleet.output_cv").value == 1.0
    assert (metric(linked, "GPUs"), metric(linked, "Batch cap per replica")) == (str(spread.gpus), str(spread.batch))


def test_fleet_sizer_links_its_plan_to_the_cost_page():
    # Issue 55 item 6: the plan's serving cost per query and daily volume fill the cost page's lifetime scenario.
    from urllib.parse import parse_qs

    app = open_page("fleet_sizer", rate="40.0")
    (link,) = [element.proto for element in app.get("page_link") if element.proto.page == "cost"]
    query = {name: float(value) for name, (value,) in parse_qs(link.query_string).items()}
    per_hour = fleet_plan(40).cost.per_hour.m_as("USD/hour")
    # Per query: the fleet's cost per hour over 40 request/s x 3,600 s; per day: 40 x 86,400 = 3,456,000.
    assert query == {"per_query": pytest.approx(per_hour / (40 * 3600), rel=1e-5), "per_day": 3_456_000}
    cost = open_page("cost", **{name: str(value) for name, value in query.items()})
    # The cost page's serving spend is then the fleet's cost per hour over a day.
    assert metric(cost, "Serving spend") == f"{format_number(per_hour * 24)} USD/d"


def test_fleet_sizer_shows_and_pins_a_mixture_of_experts_layout():
    # Issue 23: the expert layout is searched (both by default) or pinned; the plan shows its layout.
    app = open_page("fleet_sizer", model="qwen3-235b-a22b", gpus="h100-sxm", precisions="fp8", engine="trtllm")
    assert app.multiselect(key="fleet.moe_layouts").value == ["tensor", "expert", "attention-dp"]
    app.multiselect(key="fleet.moe_layouts").set_value(["expert"]).run()
    assert_clean(app)
    shown = metric(app, "Replicas × TP")
    tp = int(shown.split("×")[1].split("(")[0])
    assert f"(EP {tp})" in shown


def test_fleet_sizer_shows_a_replica_over_several_nodes():
    # DeepSeek-V3 at FP8 does not fit in one node of eight H100s: the plan's replicas span two nodes.
    app = open_page("fleet_sizer", model="deepseek-v3", gpus="h100-sxm", precisions="fp8", rate="50.0")
    assert metric(app, "Replicas × TP").endswith("over 2 nodes")
    assert "Kubernetes manifest" in [button.proto.label for button in app.get("download_button")]


def test_fleet_sizer_infeasible_targets_show_the_reason_and_the_closest_feasible_plan():
    app = open_page("fleet_sizer", tpot="5.0")
    plan = fleet_plan(10, tpot_ms=5.0)
    assert not plan.feasible
    assert any("No feasible plan" in w.value and "closest achievable" in w.value for w in app.warning)
    relaxed = relax_targets(**fleet_parts(10, 1000, 5))
    assert any(f"×{relaxed.factor:.3g}" in i.value and f"{relaxed.plan.gpus} ×" in i.value for i in app.info)
    # what would serve: the closest plan meeting the TTFT target alone names the TPOT target it gives up
    [serve] = [rendered(i.value) for i in app.info if "What would serve" in i.value]
    assert "meets the TTFT target (1,000 ms) alone" in serve and "over the 5 ms TPOT target (gives it up" in serve
    rejected = app.dataframe[0].value
    assert set(rejected["Configuration"]) == set(plan.rejected)
    # The smallest loosening of the TPOT target (x1.5) needed far more GPUs than this traffic needs when latency
    # hardly binds; the alternative is the smallest loosening within 10x of that, and says how far it is.
    loose = size_fleet(**fleet_parts(10, 1000, 500))  # the TPOT target loosened x100, as relax_targets does
    assert relaxed.plan.gpus <= 10 * loose.gpus and relaxed.scale == relaxed.plan.gpus / loose.gpus
    assert any(f"{relaxed.scale:.2g}× the GPUs this traffic takes" in rendered(i.value) for i in app.info)
    unbounded = relax_targets(**fleet_parts(10, 1000, 5), max_scale=float("inf"))
    assert unbounded.factor < relaxed.factor and unbounded.plan.gpus > 10 * loose.gpus


def test_fleet_sizer_a_closest_feasible_plan_is_in_proportion_with_the_traffic():
    # Below every plan's TTFT (a replica's unloaded TTFT is 53 ms: a request alone on an idle engine), at a rate whose
    # traffic takes tens of GPUs: a TTFT just above 53 ms is met only on replicas loaded next to nothing (54 ms on 3,856
    # GPUs at 1 %), so the alternative is the smallest loosening whose plan takes at most 10x the GPUs of the traffic
    # with latency hardly binding.
    app = open_page("fleet_sizer", rate="100.0", ttft="52.0")
    relaxed = relax_targets(**fleet_parts(100, 52, 50))
    loose = size_fleet(**fleet_parts(100, 5500, 50))  # the TTFT target loosened x100, as relax_targets does
    assert relaxed.loosened == "ttft" and relaxed.plan.gpus <= 10 * loose.gpus
    assert any("Closest feasible alternative" in i.value and f"{relaxed.plan.gpus} ×" in i.value for i in app.info)


def test_fleet_sizer_flags_a_token_gap_beyond_the_tpot_target_outside_the_details():
    app = open_page("fleet_sizer")
    plan = fleet_plan(10)
    ratio = plan.service.tbt_max.m_as("ms") / 50
    assert ratio > 1  # the default scenario: a prefill pauses the streams for longer than the TPOT target
    [flag] = [w.value for w in app.warning if "longest gap between two tokens" in w.value]
    assert f"{ratio:.2g}× the 50 ms TPOT target" in flag
    relaxed = open_page("fleet_sizer", tpot="200.0")
    plan = fleet_plan(10, tpot_ms=200.0)
    assert plan.service.tbt_max <= Q_(200, "ms")
    assert not any("longest gap between two tokens" in w.value for w in relaxed.warning)


def test_fleet_sizer_router_input_sizes_for_the_chosen_router():
    app = open_page("fleet_sizer")
    router = app.selectbox(key="fleet.router")
    assert router.value == "round_robin" and "Default: round robin" in router.help
    router.set_value("least_connections").run()
    assert_clean(app)
    assert app.query_params["router"] == "least_connections"
    plan = size_fleet(**fleet_parts(10, 1000, 50), serving=ServingOptions(router="join_shortest_queue"))
    assert metric(app, "GPUs") == str(plan.gpus) and plan.router == "least_connections"


def test_fleet_sizer_verifies_the_plan_by_simulation(monkeypatch):
    import calculator.simulation
    from calculator.simulation import verify_plan

    app = open_page("fleet_sizer", sim_requests="600")
    assert app.number_input(key="fleet.sim_requests").value == 600
    assert app.number_input(key="fleet.sim_seeds").value == 2  # the page's small default
    assert not [m for m in app.metric if m.label == "Analytical replicas"]  # nothing runs before the click
    # The check is a button beside the plan's metrics; its settings are in the sidebar with the other inputs.
    assert app.button(key="fleet.verify").label == "Check by simulation"
    assert {"fleet.sim_requests", "fleet.sim_seeds"} <= {w.key for w in app.sidebar.number_input}
    app.button(key="fleet.verify").click().run()
    assert_clean(app)
    plan = fleet_plan(10)
    expected = verify_plan(plan, requests=600, seeds=2)  # seeded: the page's numbers
    boxes = [*app.success, *app.info, *app.warning]
    assert any(box.value == f"Simulation: {expected.verdict}." for box in boxes)
    # The verdict sits with the plan's metrics, before the simulation's details.
    shown = [node for node in app.main if node.type in ("metric", "success", "info", "warning", "subheader")]
    place = {
        "GPUs": next(i for i, node in enumerate(shown) if node.type == "metric" and node.label == "GPUs"),
        "verdict": next(i for i, node in enumerate(shown) if node.value == f"Simulation: {expected.verdict}."),
        "details": next(i for i, node in enumerate(shown) if node.value == "Simulation check"),
    }
    assert place["GPUs"] < place["verdict"] < place["details"]
    assert metric(app, "Analytical replicas") == str(plan.replicas)
    assert metric(app, "Simulated replicas") == str(expected.simulated_replicas)
    specs = {spec["layout"]["title"]["text"].split(":")[0]: spec for spec in charts(app)}
    check = specs["Plan check by simulation"]
    table = expected.table.sort_values("replicas")
    assert np.allclose(values(trace(check, "mean TTFT (simulated)")["y"]), table.ttft_mean_ms)
    assert np.allclose(values(trace(check, "mean TPOT target 50 ms")["y"]), 50)
    mine = expected.results[plan.replicas]
    for metric_name, target in (("TTFT", 1000), ("TPOT", 50)):
        spec = specs[metric_name]
        assert any(shape["x0"] == pytest.approx(target) for shape in spec["layout"]["shapes"])  # the target line
        column = metric_name.lower()
        rows = mine.requests[(mine.requests.seed == 0) & mine.requests.measured]
        assert np.allclose(np.sort(values(trace(spec, "seed 0")["x"])), np.sort(rows[column].dropna()) * 1e3)
    attainment = next(frame.value for frame in app.dataframe if "All attained [%]" in frame.value.columns)
    assert attainment.set_index("Replicas").loc[plan.replicas, "All attained [%]"] == pytest.approx(
        100 * mine.attainment["all"]
    )

    # Reruns and a second click with the same inputs reuse the stored verification: nothing is simulated again.
    def no_simulation(*args, **kwargs):
        raise AssertionError("simulated again")

    monkeypatch.setattr(calculator.simulation, "verify_plan", no_simulation)
    app.radio(key="fleet.sim_inspect").set_value(min(expected.results)).run()
    assert_clean(app)
    app.button(key="fleet.verify").click().run()
    assert_clean(app)
    assert metric(app, "Simulated replicas") == str(expected.simulated_replicas)


def test_a_bad_link_parameter_is_ignored_with_a_warning_not_an_error():
    app = open_page("fleet_sizer", rate="-5", model="no-such-model")
    assert app.number_input(key="fleet.rate").value == 10.0
    warnings = " ".join(rendered(w.value) for w in app.warning)
    assert "rate=-5" in warnings and "model=no-such-model" in warnings


# ---------------------------------------------------------------------------------------------- Memory fit


def test_memory_fit_page_matches_model_memory_fit_and_suggests_the_closest_fit():
    app = open_page("memory_fit")
    fit = model_memory_fit("llama-3.1-70b", "h100-sxm", 4096, 8, "fp16", "fp16", 2, Q_(2, "GB"), block_size=16)
    assert metric(app, "Fits") == "yes"
    assert metric(app, "Weights / device") == f"{fit.weights.m_as('GB'):.4g} GB"
    assert metric(app, "Max batch at this context") == str(fit.max_batch)
    specs = charts(app)
    bars = {t["name"]: values(t["y"])[0] for t in specs[0]["data"] if t["type"] == "bar"}
    assert bars["KV cache"] == pytest.approx(fit.kv.m_as("GB"))
    # Show the math: the footprint equation with the page's numbers substituted, one line each (Napkin Math).
    footprint = next(x.value for x in app.get("latex") if "M_{\\mathrm{total}}" in x.value)
    assert "\\begin{aligned}" in footprint and "\\left(4096\\right)" in footprint and "\\left(8\\right)" in footprint
    wall = charts(open_tab(app, "KV wall (Figure 9)"))[0]
    assert len([t for t in wall["data"] if t["mode"] == "lines" and t["name"].startswith("batch")]) == 7
    # A batch that does not fit: the warning names the missing bytes and the smallest TP degree that fits.
    app.number_input(key="memory.batch").set_value(64).run()
    assert_clean(app)
    assert metric(app, "Fits") == "no"
    smallest = min_tensor_parallel("llama-3.1-70b", "h100-sxm", 4096, 64, reserve=Q_(2, "GB"), block_size=16)
    assert any(f"tensor parallelism over {smallest} devices" in w.value for w in app.warning)
    # GiB is a display choice: the same bytes, another unit.
    app.selectbox(key="memory.unit").set_value("GiB").run()
    assert metric(app, "Capacity / device") == "80 GiB"


def test_benchmark_page_shows_the_library_prediction_per_concurrency_and_the_kv_it_used():
    from calculator.performance import predict_benchmark

    app = open_page("benchmark", clients="1, 64, 4096")
    clients = np.array([1.0, 64.0, 4096.0])
    expected = predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 4, 1024, 128, clients, "vllm")
    # The headline is the largest concurrency's; the charts draw every concurrency with its interval.
    assert "At 4,096 clients" in [header.value for header in app.subheader]
    assert metric(app, "TPOT") == f"{expected.tpot.m_as('ms')[-1]:.4g} ms"
    ttft, tpot = charts(app)
    assert values(trace(ttft, "predicted")["y"]) == pytest.approx(expected.ttft.m_as("ms"))
    assert values(trace(tpot, "80 % interval")["y"]) == pytest.approx(expected.tpot_interval[0].m_as("ms"))
    # The table fits a 1440 px screen: each interval as one column of text, the step times in the CSV only.
    table = app.dataframe[0].value
    assert list(table.columns) == [
        "Clients", "TTFT [ms]", "TTFT 80 % interval [ms]", "TPOT [ms]", "TPOT 80 % interval [ms]",
        "Throughput [request/s]", "Output throughput [token/s]",
    ]  # fmt: skip
    low, high = (end.m_as("ms")[-1] for end in expected.tpot_interval)
    assert table["TPOT 80 % interval [ms]"].iloc[-1] == f"{format_number(low)} to {format_number(high)}"
    # At 4,096 clients the sequence cap holds 1,024 requests, fewer than the KV cache would (1,288).
    assert values(trace(ttft, "sequence cap limits the batch")["x"]) == pytest.approx([4096])
    assert [w.value for w in app.warning if "From 4,096 clients" in w.value] == [
        "From 4,096 clients the engine's sequence cap holds 1,024 requests at once, fewer than the KV cache would "
        "(1,288): the others wait for a slot, and more memory would not hold more."
    ]
    # The library's caveats, where it has any (here the sequence cap holds the batch: none).
    assert [i.value for i in app.info] == [
        f"{c} (docs/performance-model.md, 'Decisions and limits')" for c in expected.caveats()
    ]
    limited = open_page("benchmark", tp="2", output="8192", clients="64", kv="bf16")
    caveats = predict_benchmark(
        "llama-3.1-70b", "h100-sxm", "fp8", 2, 1024, 8192, 64, "vllm", kv_precision="bf16"
    ).caveats()
    assert any("From 64 clients the KV cache holds fewer requests" in w.value for w in limited.warning)
    assert values(trace(charts(limited)[0], "KV cache limits the batch")["x"]) == pytest.approx([64])
    assert "prompt alone" in limited.info[0].value
    assert caveats and [i.value for i in limited.info] == [
        f"{c} (docs/performance-model.md, 'Decisions and limits')" for c in caveats
    ]
    assert "KV cache fp8 (the engine's default for these weights)" in rendered(app.caption[-1].value)
    assert app.dataframe[0].value.shape[0] == 3
    # Waves take no length spread: said once, and the prediction is the waves' one.
    waves = open_page("benchmark", clients="16", arrivals="waves", length_cv="0.1")
    assert any("dispersed arrivals only" in i.value for i in waves.info)
    in_waves = predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 4, 1024, 128, 16, "vllm", arrivals="waves")
    assert metric(waves, "TPOT") == f"{in_waves.tpot.m_as('ms'):.4g} ms"


def test_benchmark_page_says_an_amd_gpus_step_times_rest_on_its_anchored_curve_and_shows_the_rates_range():
    from calculator.performance import predict_benchmark

    app = open_page("benchmark", gpu="mi300x", tp="8", clients="64")
    step_times = next(rendered(c.value) for c in app.caption if "step times from" in rendered(c.value))
    assert "anchored to this GPU's own GEMM measurements" in step_times
    expected = predict_benchmark("llama-3.1-70b", "mi300x", "fp8", 8, 1024, 128, 64, "vllm")
    low, high = (format_number(end.m_as("token/s")) for end in expected.output_throughput_interval)
    tokens = next(m for m in app.metric if m.label == "Output tokens/s")
    assert tokens.help.endswith(f"{low} to {high}")
    h100 = open_page("benchmark", clients="64")
    assert any("step times from measured kernel tables" in rendered(c.value) for c in h100.caption)


def test_benchmark_page_lays_a_mixture_of_experts_out_as_chosen():
    from calculator.performance import predict_benchmark

    app = open_page("benchmark", model="deepseek-v3", gpu="h200-sxm", tp="8", moe_layout="attention-dp", clients="64")
    # An attention rank per GPU, the experts spread over the eight: TP 1 attention, eight ranks, EP 8.
    expected = predict_benchmark("deepseek-v3", "h200-sxm", "fp8", 1, 1024, 128, 64, "vllm", data_parallel=8,
                                 expert_parallel=8)  # fmt: skip
    assert metric(app, "TPOT") == f"{expected.tpot.m_as('ms'):.4g} ms"
    assert "8 × h200-sxm (an attention rank per GPU)" in rendered(app.caption[-1].value)
    dense = open_page("benchmark")
    assert not [box for box in dense.selectbox if box.key == "benchmark.moe_layout"]  # a dense model has no layout


def test_benchmark_page_prices_an_engine_release_and_expert_copies():
    from calculator.performance import engine_profile, predict_benchmark

    # vLLM 0.12: the synchronous scheduler and a BF16 cache for FP8 weights, the costs fitted on its benchmarks.
    app = open_page("benchmark", clients="16", release="0.12")
    old = predict_benchmark(
        "llama-3.1-70b", "h100-sxm", "fp8", 4, 1024, 128, 16, engine_profile("vllm").for_release("0.12")
    )
    assert metric(app, "TPOT") == f"{old.tpot.m_as('ms'):.4g} ms"
    assert "KV cache bf16" in rendered(app.caption[-2].value)
    assert any("vllm release 0.12" in rendered(c.value) for c in app.caption)
    # A release the fit did not see is said in the caveats, not an error.
    unseen = open_page("benchmark", clients="16", engine="TensorRT-LLM", release="1.3")
    assert any("no benchmark of this release is in the fit" in i.value for i in unseen.info)
    # 8 GPUs with 8 copies of DeepSeek-V3's 256 experts: 33 each under SGLang, priced as the library does.
    copies = open_page("benchmark", model="deepseek-v3", gpu="h200-sxm", tp="8", moe_layout="attention-dp",
                       engine="SGLang", clients="64", redundant="8")  # fmt: skip
    expected = predict_benchmark("deepseek-v3", "h200-sxm", "fp8", 1, 1024, 128, 64, "sglang", data_parallel=8,
                                 expert_parallel=8, redundant_experts=8)  # fmt: skip
    assert metric(copies, "TPOT") == f"{expected.tpot.m_as('ms'):.4g} ms"
    # 3 copies do not divide over 8 GPUs under SGLang: said in words, naming the copies that would.
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.switch_page("app_pages/benchmark.py")
    for name, value in {"model": "deepseek-v3", "gpu": "h200-sxm", "tp": "8", "moe_layout": "expert",
                        "engine": "SGLang", "clients": "64", "redundant": "3"}.items():  # fmt: skip
        app.query_params[name] = value
    app.run()
    assert not app.exception and any("must divide the experts placed" in rendered(e.value) for e in app.error)
    bad = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    bad.switch_page("app_pages/benchmark.py")
    bad.query_params["release"] = "latest"
    bad.run()
    assert not bad.exception and any("must be a release such as" in rendered(e.value) for e in bad.error)


def test_benchmark_page_prices_a_run_without_streaming():
    from calculator.performance import predict_benchmark

    app = open_page("benchmark", model="gpt-oss-20b", gpu="b200-sxm", precision="fp4", tp="1", engine="TensorRT-LLM",
                    clients="64, 2048", prompt="1024", output="1024", streaming="false")  # fmt: skip
    expected = predict_benchmark("gpt-oss-20b", "b200", "fp4", 1, 1024, 1024, 2048, "trtllm", streaming=False)
    assert not app.exception and metric(app, "TPOT") == f"{expected.tpot.m_as('ms'):.4g} ms"
    assert any("Without streaming (trtllm)" in i.value for i in app.info)


def test_benchmark_page_prices_a_stream_interval():
    from calculator.performance import predict_benchmark

    app = open_page("benchmark", model="llama-3.1-8b", gpu="h100-sxm", precision="bf16", tp="1", engine="TensorRT-LLM",
                    clients="8, 256", prompt="1024", output="1024", stream_interval="4")  # fmt: skip
    expected = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 1024, 256, "trtllm", stream_interval=4)
    assert not app.exception and metric(app, "TPOT") == f"{expected.tpot.m_as('ms'):.4g} ms"
    assert any("Streamed every 4 iterations (trtllm stream_interval 4)" in i.value for i in app.info)
    # a run without streaming ignores the interval (its input is disabled)
    off = open_page("benchmark", engine="TensorRT-LLM", streaming="false", stream_interval="4")
    assert not off.exception and any("Without streaming (trtllm)" in i.value for i in off.info)


def test_benchmark_page_says_why_when_the_model_does_not_fit_or_a_count_is_bad():
    for params, reason in (
        ({"model": "llama-3.1-405b", "tp": "1"}, "leave no room for one request's KV cache"),
        ({"clients": "8, x"}, "Clients: expected whole numbers separated by commas, found 'x'"),
    ):
        app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        app.switch_page("app_pages/benchmark.py")
        for name, value in params.items():
            app.query_params[name] = value
        app.run()
        assert not app.exception and [reason in rendered(e.value) for e in app.error] == [True], params


def test_memory_fit_another_model_without_the_chosen_tp_degree_falls_back_without_a_link_warning():
    app = open_page("memory_fit", tp="64")  # Llama-3.1-70B's 64 heads split 64 ways
    assert app.selectbox(key="memory.tp").value == 64
    app.selectbox(key="memory.model").set_value("llama-3.1-8b").run()  # 32 heads: 64 is no longer offered
    assert_clean(app)
    assert app.selectbox(key="memory.tp").value == 2  # the page's default
    assert not app.warning, [w.value for w in app.warning]  # the address held the page's own value, not a link


def test_memory_fit_page_takes_attention_ranks_for_a_mixture_of_experts():
    # Issue 23: the memory page shows a layout: attention ranks hold their own sequences (DeepSeek-V3's MLA
    # latent is whole on every TP rank, so eight ranks of one GPU hold several times TP 8's batch).
    from calculator.memory import model_max_batch

    app = open_page("memory_fit", model="deepseek-v3", gpu="h200-sxm", weights="fp8", tp="1", context="8192")
    assert app.selectbox(key="memory.ranks").value == 1
    app.selectbox(key="memory.ranks").set_value(8).run()
    assert_clean(app)
    table = app.dataframe[0].value.set_index(app.dataframe[0].value.columns[0])
    expected = model_max_batch("deepseek-v3", "h200-sxm", 8192, "fp8", "fp16", 1, Q_(2, "GB"), block_size=16,
                               data_parallel=8)  # fmt: skip
    assert table.loc["Max batch at this context [sequences]"].iloc[0].replace(",", "") == str(int(expected))
    assert int(expected) > 5 * int(model_max_batch("deepseek-v3", "h200-sxm", 8192, "fp8", "fp16", 8, Q_(2, "GB"),
                                                   block_size=16))  # fmt: skip


def test_memory_fit_nameplate_basis_uses_the_decimal_label():
    app = open_page("memory_fit", basis="nameplate")
    assert metric(app, "Capacity / device") == "80 GB"


# ---------------------------------------------------------------------------------------------- Cost


def test_cost_page_crossover_and_curve_come_from_the_library():
    app = open_page("cost")
    # Napkin Math 10.1's scenario: $2M training, $0.001 per query, 50M queries a day: 40 days.
    assert metric(app, "Crossover after") == "40 d"
    # The answer first: the lifetime scenario's inputs are in the sidebar, its metrics lead the page.
    assert {"cost.training", "cost.per_query", "cost.per_day", "cost.months"} <= {
        w.key for w in app.sidebar.number_input
    }
    assert app.main.get("metric")[0].label == "Lifetime cost"
    # The chart covers the 12-month deployment, no further: 2M + 0.001 x 50M x 365.25 USD at its end.
    curve = cumulative_cost_curve(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(50e6, "request/day"), Q_(12, "month"))
    drawn = values(charts(app)[0]["data"][0]["y"])
    assert np.allclose(drawn, curve.cumulative_cost.m_as("USD"))
    assert drawn[-1] == pytest.approx(2e6 + 0.001 * 50e6 * 365.25)
    assert metric(open_tab(app, "Per request and per 1M tokens"), "Cost per 1M useful tokens") == "2.4 USD/Mtoken"
    app.number_input(key="cost.training").set_value(4e6).run()
    assert_clean(app)
    expected = crossover_time(Q_(4e6, "USD"), serving_cost_rate(Q_(0.001, "USD/request"), Q_(50e6, "request/day")))
    assert metric(app, "Crossover after") == f"{expected.m_as('day'):g} d"


# ---------------------------------------------------------------------------------------------- Batching and queueing


def test_batching_page_knee_hockey_stick_and_unstable_queue():
    app = open_page("batching_queueing")
    assert metric(app, "Knee batch") == "80"
    app.number_input(key="batching.t0").set_value(20.0).run()
    assert metric(app, "Knee batch") == f"{knee_batch_size(Q_(20, 'ms'), Q_(0.5, 'ms')):g}"
    hockey = charts(open_tab(app, "Wait vs utilization"))[0]
    rho = values(hockey["data"][0]["x"])
    rates = Q_(rho * 4 / 0.1, "request/s")
    assert np.allclose(values(hockey["data"][0]["y"]), mmc_mean_wait(rates, Q_(100, "ms"), 4).m_as("ms"), rtol=1e-6)
    metrics = queue_metrics(Q_(30, "request/s"), Q_(100, "ms"), 4, 1.5, 1.0)
    assert metric(app, "Mean wait") == f"{metrics.mean_wait.m_as('ms'):.4g} ms"
    app.number_input(key="batching.rate").set_value(50.0).run()
    assert_clean(app)
    needed = replicas_for_load(Q_(50, "request/s"), Q_(10, "request/s"), 0.9)  # one server serves 1 / 100 ms
    assert any("Unstable" in w.value and f"{needed} servers" in w.value for w in app.warning)


def test_dynamic_batching_simulation_shows_progress_and_adds_the_simulated_points():
    app = open_tab(open_page("batching_queueing", dyn_sim="true"), "Dynamic batching")
    figure = charts(app)[0]
    assert [t["name"] for t in figure["data"]] == ["model (Eq. 3)", "simulation (20,000 requests)"]
    assert metric(app, "Time in system") == "16.14 ms"  # the library's example for Example 10.1's replica


def test_continuous_batching_bad_lengths_are_an_error_box_not_a_traceback():
    app = open_tab(open_page("batching_queueing"), "Continuous batching")
    assert metric(app, "Idle slot share (waste)") == "37.5 %"  # Napkin Math 10.3
    app.text_input(key="batching.lengths").set_value("50, two hundred").run()
    assert not app.exception
    assert any("Output lengths" in e.value and "'two hundred'" in e.value for e in app.error)


# ---------------------------------------------------------------------------------------------- Decode speedups


def test_decode_page_speculative_speedup_and_its_chart():
    app = open_page("decode_speedups")
    timing = speculative_timing(0.7, 5, Q_(20, "ms"), 0.05, 1.0)
    assert metric(app, "Speedup") == f"{timing.speedup:.3g}×"
    assert metric(app, "TBT, longest gap") == f"{timing.tbt_gap.m_as('ms'):g} ms"
    chart = charts(app)[0]
    grid = values(trace(chart, "K = 5")["x"])
    assert np.allclose(values(trace(chart, "K = 5")["y"]), speedup(grid, 5, 0.05))
    app.slider(key="decode.alpha").set_value(0.9).run()
    assert_clean(app)
    assert metric(app, "Speedup") == f"{speedup(0.9, 5, 0.05):.3g}×"


def test_decode_page_flags_a_token_gap_beyond_the_tpot_target():
    app = open_page("decode_speedups")
    gap = speculative_timing(0.7, 5, Q_(20, "ms"), 0.05, 1.0).tbt_gap.m_as("ms")
    assert gap > 20  # a round of K = 5 drafts and a verification outlasts the 20 ms TPOT target
    tbt = next(m for m in app.metric if m.label == "TBT, longest gap")
    assert tbt.delta == f"{gap / 20:.2g}× the TPOT target"
    assert any(f"is {gap / 20:.2g}× the TPOT target" in box.value for box in [*app.success, *app.warning])
    # The arrow is red only when the per-gap TBT target (50 ms by default) is missed, not beside "targets met".
    from streamlit.proto.Metric_pb2 import Metric

    assert gap <= 50 and Metric.MetricColor.Name(tbt.proto.color) == "GRAY"
    app.number_input(key="decode.tbt").set_value(gap - 1).run()
    tbt = next(m for m in app.metric if m.label == "TBT, longest gap")
    assert Metric.MetricColor.Name(tbt.proto.color) == "RED" and app.warning
    app.number_input(key="decode.tpot").set_value(gap + 1).run()
    assert_clean(app)
    assert not next(m for m in app.metric if m.label == "TBT, longest gap").delta


def test_decode_page_best_draft_length_is_told_apart_from_the_current_one():
    from calculator.speculative import best_draft_length

    app = open_page("decode_speedups")
    best_k, best = best_draft_length(0.7, 0.05, 32)
    assert best_k != 5
    shown = next(m for m in app.metric if m.label == "Best K at this α")
    assert shown.value == f"K = {best_k}" and shown.delta == "within 0.5% of K = 5"
    gain = best / speedup(0.7, 5, 0.05) - 1
    assert gain < 0.005  # at α = 0.7 the best K is no real gain over K = 5, and the page says so
    assert any(
        f"Best K = {best_k}" in c.value and "you have K = 5" in c.value and "no reason" in c.value for c in app.caption
    )
    app.number_input(key="decode.k").set_value(best_k).run()
    assert_clean(app)
    shown = next(m for m in app.metric if m.label == "Best K at this α")
    assert shown.value == f"K = {best_k} (yours)" and not shown.delta
    app.number_input(key="decode.k").set_value(1).run()  # a real difference is not "within" anything
    gain = best / speedup(0.7, 1, 0.05) - 1
    assert gain > 0.005
    assert not any("no reason" in c.value for c in app.caption)
    shown = next(m for m in app.metric if m.label == "Best K at this α")
    assert shown.delta.startswith("+") and shown.delta.endswith("% speedup over K = 1")


# ---------------------------------------------------------------------------------------------- Sharding


def test_sharding_page_tensor_parallel_layer_time_per_interconnect():
    app = open_page("sharding")
    reg = load_registry()
    message = activation_message_bytes(32, 8192, bytes_per_element("fp16"))
    link = reg.interconnect("chapter-nvlink-h100")
    allreduce = ring_allreduce_time(message, 8, link.bandwidth, link.startup_latency)
    table = app.dataframe[0].value.set_index("Interconnect")
    assert table.loc["chapter-nvlink-h100", "All-reduce [µs]"] == pytest.approx(allreduce.m_as("us"))
    chart = charts(app)[0]
    degrees = np.array([1, 2, 4, 8, 16, 32, 64])
    expected = tensor_parallel_layer_time(
        Q_(0.4, "ms"), degrees, ring_allreduce_time(message, degrees, link.bandwidth, link.startup_latency)
    )
    assert np.allclose(values(trace(chart, "chapter-nvlink-h100")["y"]), expected.m_as("us"))
    app.selectbox(key="sharding.floor").set_value("nccl-h100").run()
    assert_clean(app)
    assert app.dataframe[0].value.set_index("Interconnect").loc["chapter-nvlink-h100", "All-reduce [µs]"] > 27.9


def test_sharding_page_shows_the_all_to_all_beside_the_all_reduce():
    # Issue 23: the MoE tab prices a layer's collectives for both expert layouts with the library's models.
    from calculator.parallelism import collective_time, moe_dispatch_bytes

    app = open_page("sharding")
    model, link = load_registry().model("qwen3-235b-a22b"), load_registry().interconnect("nvlink4")
    latency = link.startup_latency if link.startup_latency is not None else Q_(1, "us")  # the page's default alpha
    routed = moe_dispatch_bytes(256, model.hidden_size, model.experts_per_token, 8, Q_(2, "B"))
    expected = 2 * collective_time("alltoall", routed, 8, link, latency=latency)
    open_tab(app, "Mixture of experts")
    app.selectbox(key="sharding.moe_model").set_value("qwen3-235b-a22b").run()
    assert_clean(app)
    table = next(d.value for d in app.dataframe if "Layout" in d.value.columns).set_index("Layout")
    assert table.loc["experts spread (expert parallel)", "Time [µs]"] == pytest.approx(expected.m_as("us"))
    # Beside them, the attention ranks' exchange as the engines run it: measured NCCL on the tab's accelerator.
    from calculator.performance import expert_exchange_time

    ranks = table.loc[next(label for label in table.index if label.startswith("attention ranks on"))]
    measured = expert_exchange_time("qwen3-235b-a22b", "h100-sxm", 8, 256)
    assert ranks["Time [µs]"] == pytest.approx(measured.m_as("us"))
    from calculator.kernels import collective_seconds, tables_for
    from calculator.performance import step_arrays

    link = step_arrays("qwen3-235b-a22b", "h100-sxm", "bf16").link_bandwidth
    nccl = 2 * collective_seconds(tables_for("h100-sxm"), "alltoall", 8, routed.m_as("B"), link)
    spread = table.loc[next(label for label in table.index if label.endswith("(measured)"))]
    assert spread["Time [µs]"] == pytest.approx(float(nccl) * 1e6)


# ---------------------------------------------------------------------------------------------- Routing


def test_routing_page_fanout_and_simulated_max_load():
    app = open_page("routing_tails")
    assert metric(app, "Requests slowed by at least one leaf") == "63.4 %"  # §10.11.1: "about 63 percent"
    app.number_input(key="routing.fanout").set_value(10).run()
    assert metric(app, "Requests slowed by at least one leaf") == f"{100 * fanout_slow_probability(0.01, 10):.3g} %"
    chart = charts(open_tab(app, "Random vs two choices"))[0]
    expected = trace(chart, "random (d = 1): expected")
    bins = values(expected["x"]).astype(int)
    assert np.allclose(values(expected["y"]), [expected_max_load(int(n), choices=1) for n in bins])
    simulated = values(trace(chart, "two choices (d = 2): simulated")["y"])
    assert np.all(simulated < values(trace(chart, "random (d = 1): simulated")["y"]))


# ---------------------------------------------------------------------------------------------- Autoscaling


def test_autoscaling_page_cold_start_schedule_and_failover():
    app = open_page("autoscaling_regions")
    cold = cold_start_time(Q_(60, "s"), Q_(140, "GB"), Q_(0.5, "GB/s"), Q_(60, "s"))
    assert metric(app, "Cold start of one replica") == f"{cold.m_as('min'):.4g} min"  # Example 10.11: 6.7 min
    plan = predictive_schedule(
        Q_([0, 6, 9, 17, 20], "hour"), Q_([500, 1500, 3000, 2000, 1000], "request/s"), Q_(100, "request/s"),
        Q_(7, "min"), Q_(30, "min"), end=Q_(24.5, "hour"),
    )  # fmt: skip
    ready = trace(charts(open_tab(app, "Predictive vs reactive (Figure 21)"))[0], "predictive: ready")
    assert np.array_equal(values(ready["y"]), plan.ready)
    assert app.dataframe[0].value.set_index("Policy").loc["predictive", "Peak replicas"] == 30  # Table 21
    open_tab(app, "Regions and failover").text_input(key="autoscaling.loads").set_value("800, 800, 800").run()
    assert_clean(app)
    assert any("lack 400 request/s" in w.value for w in app.warning)


# ---------------------------------------------------------------------------------------------- Registry


def test_registry_page_lists_accelerators_with_units():
    app = open_page("registry")
    table = app.dataframe[0].value
    h100 = table[table["ID"] == "h100-sxm"].iloc[0]
    assert h100["Memory bandwidth"] == "3.35 TB/s"
    assert h100["Memory"] == "80 GiB" and h100["Memory nameplate"] == "80 GB"
    app.radio[0].set_value("models").run()
    assert_clean(app)
    assert "llama-3.1-70b" in set(app.dataframe[0].value["ID"])


def paste(app: AppTest, text: str) -> None:
    app.text_area[0].set_value(text)
    next(b for b in app.button if b.proto.form_id == "paste-yaml").click()
    app.run()
    assert not app.exception


def test_registry_page_shows_the_registry_error_of_a_bad_file():
    app = open_page("registry")
    paste(app, "accelerators:\n  - id: bad\n    name: x\n")
    assert any("accelerators['bad']" in rendered(e.value) and "sources" in e.value for e in app.error)
    paste(app, "!!python/object/apply:os.system ['echo unsafe']")
    assert any("malformed YAML" in e.value for e in app.error)


def test_registry_files_are_size_limited_before_they_are_parsed():
    from app_pages._common import MAX_REGISTRY_BYTES, add_registry_file

    with pytest.raises(RegistryError, match="the limit is"):
        add_registry_file("x" * (MAX_REGISTRY_BYTES + 1))


def test_a_custom_model_added_on_the_registry_page_is_sized_on_the_other_pages():
    app = open_page("registry")
    app.text_input[3].set_value("tiny-model")  # the model form's id
    next(b for b in app.button if b.proto.form_id == "add-model").click()
    app.run()
    assert_clean(app)
    assert any("tiny-model" in s.value for s in app.success)
    app.switch_page("app_pages/memory_fit.py").run()
    app.selectbox(key="memory.model").set_value("tiny-model").run()
    assert_clean(app)
    assert metric(app, "Weights / device") == "30 GB"  # 30B parameters at FP16 over TP 2


@pytest.mark.filterwarnings("ignore::calculator.errors.ExtrapolationWarning")  # the page shows it instead
def test_the_fleet_sizer_says_when_a_model_is_outside_the_validated_range():
    # Issue 25's ExtrapolationWarning on the dashboard: a custom model of 300 layers (validated: 12-200).
    app = open_page("registry")
    app.text_input[3].set_value("deep-model")
    next(n for n in app.number_input if n.label == "Layers").set_value(300)
    next(b for b in app.button if b.proto.form_id == "add-model").click()
    app.run()
    assert_clean(app)
    app.switch_page("app_pages/fleet_sizer.py").run()
    app.selectbox(key="fleet.model").set_value("deep-model").run()
    assert not app.exception
    assert any("deep-model.layers = 300" in rendered(w.value) and "extrapolation" in w.value for w in app.warning)


# ---------------------------------------------------------------------------------------------- Goal seek


def test_goal_seek_solves_for_the_chosen_input_and_reports_bad_units():
    app = open_page("goal_seek", formula="memory.kv_bytes_per_token")
    app.selectbox(key="goal.kv_bytes_per_token.unknown").set_value("kv_heads").run()
    for name, value in (("layers", 80), ("head_dim", 128), ("bytes_per_element", 2.0)):
        app.number_input(key=f"goal.kv_bytes_per_token.{name}").set_value(value)
    app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").set_value(327_680.0).run()
    assert_clean(app)
    assert metric(app, "Key/value heads per layer") == "8"  # Napkin Math 10.5: 327,680 B/token with 8 KV heads
    app.text_input(key="goal.kv_bytes_per_token.kv_bytes_per_token.unit").set_value("parsec").run()
    assert not app.exception
    assert any("needs dimension" in rendered(e.value) for e in app.error)
    app.text_input(key="goal.kv_bytes_per_token.kv_bytes_per_token.unit").set_value("GB/token**9**9**9").run()
    assert any("expected a number and a unit" in rendered(e.value) for e in app.error)


def test_goal_seek_whole_number_unknown_with_a_fractional_solution_warns_with_the_nearest_values():
    app = open_page("goal_seek", formula="memory.kv_bytes_per_token")
    per_layer = 2 * 8 * 128 * 2  # B/token of one layer of Llama-3.1-70B in BF16 (the starting inputs)
    app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").set_value(300_000.0).run()
    assert_clean(app)
    assert float(metric(app, "Transformer layers")) == pytest.approx(300_000 / per_layer, rel=1e-5)  # 73.24
    assert any("73 and 74" in w.value for w in app.warning)
    assert metric(app, "Check: KV-cache bytes per token of one sequence") == f"{74 * per_layer:,} B/token"


def test_goal_seek_starts_from_a_real_model_and_the_target_follows_the_inputs():
    app = open_page("goal_seek")
    inputs = {name: app.number_input(key=f"goal.kv_bytes_per_token.{name}").value for name in ("kv_heads", "head_dim")}
    assert inputs == {"kv_heads": 8, "head_dim": 128}  # Llama-3.1-70B, not ones
    target = app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token")
    assert target.value == 2 * 80 * 8 * 128 * 2  # Napkin Math 10.5: 327,680 B/token
    assert metric(app, "Transformer layers") == "80"
    # Another input: the target is recomputed from it, the solved value stays a real answer, no error.
    app.number_input(key="goal.kv_bytes_per_token.kv_heads").set_value(1).run()
    assert_clean(app)
    assert app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").value == 2 * 80 * 1 * 128 * 2
    assert metric(app, "Transformer layers") == "80"
    assert "kv_bytes_per_token.kv_bytes_per_token" not in app.query_params  # a computed target is not a link's
    # A typed target is the user's: the solved value follows it, and later input changes keep it.
    app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").set_value(2 * 40 * 1 * 128 * 2).run()
    assert_clean(app)
    assert metric(app, "Transformer layers") == "40"
    app.number_input(key="goal.kv_bytes_per_token.kv_heads").set_value(2).run()
    assert_clean(app)
    assert app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").value == 2 * 40 * 1 * 128 * 2
    assert metric(app, "Transformer layers") == "20"
    assert app.query_params["kv_bytes_per_token.kv_bytes_per_token"] == str(2 * 40 * 1 * 128 * 2.0)
    # Until the user asks for the computed target again.
    app.button(key="goal.recompute.kv_bytes_per_token").click().run()
    assert_clean(app)
    assert app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").value == 2 * 80 * 2 * 128 * 2
    assert metric(app, "Transformer layers") == "80"


def test_goal_seek_switching_module_or_formula_shows_no_link_warning():
    app = open_page("goal_seek")
    app.selectbox(key="goal.module").set_value("queueing").run()
    assert_clean(app)
    assert not app.warning, [w.value for w in app.warning]
    assert not any(name.startswith("kv_bytes_per_token.") for name in app.query_params)
    app.selectbox(key="goal.formula").set_value("queueing.utilization").run()
    assert_clean(app)
    assert not app.warning, [w.value for w in app.warning]
    # The formula's worked example (1,000 request/s over 13 replicas of 100 request/s) is solved back.
    assert app.number_input(key="goal.utilization.utilization").value == pytest.approx(1000 / (100 * 13))
    assert metric(app, "Arrival rate") == "1,000 request/s"


def test_goal_seek_an_impossible_target_is_a_plain_sentence_and_the_inputs_stay():
    app = open_page("goal_seek")
    app.number_input(key="goal.kv_bytes_per_token.kv_bytes_per_token").set_value(2.0).run()
    assert not app.exception
    [error] = [e.value for e in app.error]
    text = rendered(error)
    assert text.startswith("No value of transformer layers (a whole number of at least 1) gives ")
    assert "2 B/token" in text and "_" not in text and "`" not in text and "solve_for" not in text
    assert app.number_input(key="goal.kv_bytes_per_token.kv_heads").value == 8  # the inputs are still there
    assert not [m for m in app.metric if m.label == "Transformer layers"]


HOSTILE_LINK = "![x](https://attacker.example/x.png) [click](https://attacker.example) **bold**"


@pytest.mark.parametrize("page", ["fleet_sizer", "memory_fit", "goal_seek"])
def test_a_hostile_link_parameter_is_shown_as_text(page):
    # A shared link's parameter used to come back as Markdown: an image from any host, a link.
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.switch_page(f"app_pages/{page}.py")
    app.query_params["module" if page == "goal_seek" else "model"] = HOSTILE_LINK
    app.run()
    assert not app.exception
    shown = [w.value for w in app.warning] + [e.value for e in app.error]
    for text in shown:
        assert "](" not in text and "**" not in text.replace("\\*\\*", ""), text
    assert any("\\!\\[x\\]" in text for text in shown), shown


def test_a_repeated_gpu_in_a_link_is_taken_once():
    app = open_page("fleet_sizer", gpus="h100-sxm,h100-sxm")
    assert app.query_params["gpus"] == "h100-sxm"


def test_an_invalid_upload_leaves_no_file_and_a_session_folder_is_deleted_with_its_session():
    import gc

    from app_pages import _common as ui

    folder = ui.SessionFolder()
    path = folder.path
    (path / "x.yaml").write_text("models: []\n")
    del folder
    gc.collect()
    assert not path.exists()


PAGES = sorted(p.stem for p in (ROOT / "app_pages").glob("*.py") if not p.stem.startswith("_"))


@functools.cache
def tabs_opened(page: str) -> tuple[tuple[frozenset[str], str | None, tuple[str, ...], tuple[str, ...]], ...]:
    """The page opened clean at each of its tabs in turn (:func:`each_tab`): per tab, the link's parameter names,
    the open tab, the tabs drawn (with children) and every tab's label.

    Cached: a pure function of the page, read by the two tests below (each opened every tab of every page).
    """
    found = []
    for app in each_tab(open_page(page)):
        key = tab_key(app)
        found.append((
            frozenset(app.query_params),
            app.session_state[key] if key is not None else None,
            tuple(tab.label for tab in app.tabs if tab.children),
            tuple(tab.label for tab in app.tabs),
        ))  # fmt: skip
    return tuple(found)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_survives_hostile_values_in_every_link_parameter(page):
    # The page's own parameters (those of every tab), each set to Markdown, an unparsable number and a huge
    # value in turn; a hidden tab's parameters are read when the tab is opened.
    names = sorted({name for params, *_ in tabs_opened(page) for name in params})
    assert names, page
    for hostile in (HOSTILE_LINK, "1e999", "-" + "9" * 400, "nan"):
        app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        app.switch_page(f"app_pages/{page}.py")
        for name in names:
            app.query_params[name] = hostile
        app.run()
        for shown in each_tab(app, clean=False):
            assert not shown.exception, (page, hostile, shown.exception)
            for element in [*shown.warning, *shown.error]:
                # No Markdown link and no bare address, which Streamlit would make clickable even escaped
                # (issue 25 item 8), and the reason in the calculator's words, not Python's.
                outside = element.value
                address = outside.replace("\\", "")  # as Markdown reads it, escapes undone
                assert "](" not in outside and "://" not in address and "www." not in address, (page, element.value)
                assert "could not convert" not in outside and "invalid literal" not in outside, element.value
                assert len(element.value) < 1000, (page, element.value)


#: Pages whose tabs are drawn only when open (``Scenario.tabs``), and the tabs they draw even when hidden.
LAZY_TABS = {
    "memory_fit": (), "cost": (), "batching_queueing": (), "decode_speedups": (), "sharding": (),
    "routing_tails": (), "autoscaling_regions": ("Cold start",), "production_day": (),
}  # fmt: skip


@pytest.mark.parametrize("page", sorted(LAZY_TABS))
def test_a_page_draws_only_its_open_tab(page):
    # Issue 24: drawing every tab made the browser draw the hidden tabs' charts and tables before it showed the
    # page's first answer (docs/dashboard.md, "Speed"). Each tab, once open, is the one drawn.
    for _, shown, drawn, labels in tabs_opened(page):  # each tab opened by a rerun, as each_tab(open_page(page))
        drawn = list(drawn)
        assert drawn == [label for label in labels if label in {shown, *LAZY_TABS[page]}], (page, drawn)


def test_a_count_in_a_link_may_be_an_integral_float_and_a_refusal_is_in_our_words():
    # Issue 25 item 8: `fanout=1.0` was refused with Python's "invalid literal for int() with base 10".
    app = open_page("routing_tails", fanout="1.0")
    assert app.query_params["fanout"] == "1" and not app.warning
    for value, reason in (("2.5", "not a whole number"), ("abc", "not a number"), ("0", "outside 1 to 1,000,000")):
        refused = open_page("routing_tails", fanout=value)
        assert [rendered(w.value) for w in refused.warning] == [
            f"Ignored the link's parameter fanout={value}: {reason}"
        ]


# ---------------------------------------------------------------------------------------------- Issue 57: exports and errors


def test_batching_curve_at_its_largest_batch_shows_a_sample_and_downloads_every_batch():
    # Issue 57 item 11: the widget's own maximum ended in "could not finish ... Pandas Styler ... 262144".
    from app_pages.batching_queueing import SHOWN_BATCHES

    app = open_page("batching_queueing", largest="100000")  # no error box
    shown = app.dataframe[0].value
    assert len(shown) == SHOWN_BATCHES and shown.iloc[0, 0] == 1 and shown.iloc[-1, 0] == 100_000
    assert any(f"{SHOWN_BATCHES:,} of the 100,000 batches" in c.value for c in app.caption)
    assert not any("of the 256 batches" in c.value for c in open_page("batching_queueing").caption)


def test_batching_knee_below_one_request_or_between_batches_is_answered_not_refused():
    # Issue 57 item 11: `?t0=0.001` (and any knee that is not a whole batch, 40.25 ms / 0.5 ms) failed on
    # `batch_size`, an argument the page passes, not a widget the user set.
    tiny = open_page("batching_queueing", t0="0.001")
    assert metric(tiny, "Knee batch") == "0.002"
    # B / (T0 + B t_m) tokens per second per device, one token per sequence per step, at a batch of 1 (one device):
    # 1 / (0.001 ms + 0.5 ms) = 1,996 token/s.
    assert metric(tiny, "Throughput per device at the knee") == f"{1 / 0.501e-3:,.0f} token/s"
    assert any("knee is below one request" in i.value for i in tiny.info)
    between = open_page("batching_queueing", t0="40.25")
    assert metric(between, "Knee batch") == "80.5" and not between.info
    # At the whole batch 80 nearest the knee: 80 / (40.25 ms + 80 x 0.5 ms) = 996.9 token/s.
    assert metric(between, "Throughput per device at the knee") == f"{80 / 80.25e-3:.4g} token/s"


def test_a_table_download_writes_text_a_spreadsheet_would_run_as_text():
    # Issue 57 item 4: the dashboard's CSV downloads carried `=cmd|...` unescaped; they are the library's CSV.
    import csv
    import io

    import pandas as pd

    from app_pages import _common as ui
    from calculator.export import FORMULA_TRIGGERS

    class Place:  # where the table is drawn: records the download
        def dataframe(self, *args, **kwargs):
            pass

        def download_button(self, label, data, **kwargs):
            self.data = data.decode("utf-8")

    hostile = pd.DataFrame({"name": ["=cmd|' /C calc'!A0", "@SUM(1+1)", "\r=2+2"], "delta_ms": [-1.5, 0.0, 2.0]})
    place = Place()
    ui.table(pd.DataFrame({"other": [1]}), "hostile", where=place, download=hostile)
    rows = list(csv.reader(io.StringIO(place.data)))
    assert rows[1:] == [["'=cmd|' /C calc'!A0", "-1.5"], ["'@SUM(1+1)", "0.0"], ["'\n=2+2", "2.0"]]
    assert not [cell for row in rows for cell in row if cell.startswith(FORMULA_TRIGGERS) and cell != "-1.5"]


def test_memory_fit_page_headline_is_the_engines_memory_fit_and_the_chapters_formula_second():
    # Issue 52, item 5: with an engine chosen, fits / max batch / max context are engine_memory_fit's (what the
    # predictor, the sizer and the simulator hold); the chapter's formula with the page's reserve follows, labelled.
    from calculator.performance import engine_memory_fit

    app = open_page("memory_fit", weights="fp8", kv="fp8", tp="1", context="2300", engine="vLLM")
    held = engine_memory_fit("llama-3.1-70b", "h100-sxm", "fp8", 2300, 1, batch=8, engine="vllm", kv_precision="fp8")
    chapter = model_memory_fit("llama-3.1-70b", "h100-sxm", 2300, 8, "fp8", "fp8", 1, Q_(2, "GB"), block_size=16)
    labels = [m.label for m in app.metric]
    assert labels[:4] == [
        "Fits (vLLM)", "Max batch at this context (vLLM)", "Max context at this batch (vLLM)", "KV cache (vLLM)"
    ]  # fmt: skip
    assert metric(app, "Fits (vLLM)") == "yes" and held.sequences >= 8
    assert metric(app, "Max batch at this context (vLLM)") == f"{held.sequences:,}"
    assert metric(app, "Max context at this batch (vLLM)") == f"{held.max_context:,} tokens"
    assert metric(app, "KV cache (vLLM)") == f"{held.kv_tokens:,} tokens"
    # vLLM claims 0.9 of the device: fewer sequences than the whole device less a 2 GB reserve (the 35)
    assert metric(app, "Max batch at this context") == str(chapter.max_batch) == "35" and held.sequences < 35
    assert any("The chapter's formula" in m.value for m in app.markdown)
    assert any(f"up to {held.sequences:,} sequences at this context" in rendered(s.value) for s in app.success)
    # A batch above the engine's count does not fit under its policy, though the chapter's formula holds it.
    app.number_input(key="memory.batch").set_value(held.sequences + 1).run()
    assert_clean(app)
    assert metric(app, "Fits (vLLM)") == "no" and metric(app, "Fits") == "yes"
    # Weights that leave the engine nothing: said so, never "0 sequences".
    app.selectbox(key="memory.engine").set_value("SGLang").run()
    app.selectbox(key="memory.weights").set_value("bf16").run()
    assert_clean(app)
    assert metric(app, "Max batch at this context (SGLang)") == "weights do not fit"
    assert any("the weights alone do not fit" in rendered(w.value) for w in app.warning)
    assert not [m for m in app.metric if m.label.endswith("(SGLang)") and m.value.startswith("0")]
    # generic: the chapter's formula is the headline, the engine-agnostic policy a line below it
    app.selectbox(key="memory.engine").set_value("generic").run()
    assert app.metric[0].label == "Fits" and not any("(" in m.label for m in app.metric)


def test_the_dashboards_engines_are_the_registrys():
    from app_pages import _common as ui

    assert ui.ENGINES == {"generic": None, "vLLM": "vllm", "SGLang": "sglang", "TensorRT-LLM": "trtllm"}


def test_a_config_json_imported_for_the_session_is_in_the_sessions_registry():
    # Issue 54, item 1 on the dashboard: the registry page's import reads a config.json into the session's registry
    # (the function the page calls; the page's uploader itself is not driven by AppTest).
    from app_pages._common import MAX_REGISTRY_BYTES, import_config_files, registry

    with pytest.raises(RegistryError, match="the limit is"):
        import_config_files(b" " * (MAX_REGISTRY_BYTES + 1))
    config = (ROOT / "tests" / "data" / "model_configs" / "Qwen--Qwen3-8B_config.json").read_bytes()
    imported = import_config_files(config, repo="example/Qwen3-8B-copy", model_id="qwen3-8b-copy")
    assert imported.model.id == "qwen3-8b-copy" and imported.model.layers == 36  # Qwen3-8B: 36 layers (config)
    assert registry().model("qwen3-8b-copy").kv_heads == 8
    with pytest.raises(CalculatorError, match="architectures"):
        import_config_files(b'{"architectures": ["NotAModel"], "hidden_size": 8}')


def test_the_model_picker_lists_the_registry_by_family_and_size():
    # Issue 54, item 5: families together, each by size, each entry with its name, parameters and family (the
    # select box searches what is typed); the chosen value stays the registry id.
    app = open_page("memory_fit")
    box = app.selectbox(key="memory.model")
    labels = list(box.options)
    llama = [label for label in labels if label.endswith("· llama-3.1")]
    assert llama == [
        "Llama 3.1 8B · 8.03B parameters · llama-3.1",
        "Llama 3.1 70B · 70.6B parameters · llama-3.1",
        "Llama 3.1 405B · 406B parameters · llama-3.1",
    ]
    families = [label.rsplit("· ", 1)[1] for label in labels]
    assert families == sorted(families)  # each family's models together, the families in order
    assert box.value == "llama-3.1-70b"


@pytest.mark.parametrize("page", PAGES)
def test_a_sessions_first_run_of_a_page_holds_the_rest_after_its_answer(monkeypatch, page):
    # The pause that lets a first visit paint the answer before the rest's code loads (docs/dashboard.md, "First
    # answer in a real browser"): after the page's first answer element, once per page and session, never on a
    # later run.
    from streamlit.delta_generator import DeltaGenerator

    from app_pages import _common

    monkeypatch.setenv("SERVECALC_FIRST_PAINT_PAUSE", "0.25")
    log = []
    monkeypatch.setattr(_common, "time", SimpleNamespace(sleep=lambda s: log.append(("sleep", s))))
    drawn, main_area = DeltaGenerator.metric, st.metric  # every page answers with a metric first

    def logged(self, *args, **kwargs):
        log.append("metric")
        return drawn(self, *args, **kwargs)

    def logged_main(*args, **kwargs):  # st.metric: the main area's bound method
        log.append("metric")
        return main_area(*args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "metric", logged)
    monkeypatch.setattr(st, "metric", logged_main)
    app = open_page(page)
    assert log.count(("sleep", 0.25)) == 1 and log[0] == "metric", log[:5]  # after the answer's first metric
    del log[:]
    app.run()  # an edit's rerun, or a tab switch: not held
    assert ("sleep", 0.25) not in log


def test_a_first_run_that_stops_before_its_answer_holds_no_later_run(monkeypatch):
    from app_pages import _common

    monkeypatch.setenv("SERVECALC_FIRST_PAINT_PAUSE", "0.25")
    slept = []
    monkeypatch.setattr(_common, "time", SimpleNamespace(sleep=slept.append))
    app = open_page("fleet_sizer", gpus="")  # no accelerator chosen: a warning, no plan
    assert not app.metric and not slept
    app.multiselect(key="fleet.gpus").set_value(["h100-sxm"]).run()  # the second run answers, unheld
    assert app.metric and not slept


@pytest.mark.parametrize(
    ("raw", "seconds"), [("", 0.5), ("0", 0.0), ("1.5", 1.5), ("-1", 0.5), ("nan", 0.5), ("x", 0.5)]
)
def test_the_first_paint_pause_reads_the_environment(monkeypatch, raw, seconds):
    from app_pages._common import FIRST_PAINT_PAUSE, first_paint_pause

    monkeypatch.setenv("SERVECALC_FIRST_PAINT_PAUSE", raw)
    assert FIRST_PAINT_PAUSE == 0.5 and first_paint_pause() == seconds


def test_the_fleet_sizer_says_when_its_interval_stops_the_per_sequence_cost():
    app = open_page(
        "fleet_sizer", model="gpt-oss-20b", gpus="b200-sxm", precisions="fp4", engine="TensorRT-LLM", rate="500",
        prompt="1024", output="1024", ttft="10000", tpot="200", util="0.95",
    )  # fmt: skip
    band = [i.value for i in app.info if i.value.startswith("At the model's error")]
    text = rendered(band[0]) if band else ""
    assert "The trtllm engine's per-sequence cost" in text, band  # fleet.interval_note's words, as a sentence
    assert "at most 224 sequences a replica" in text and "the low end of its GPU interval stops that cost" in text
