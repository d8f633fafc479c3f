"""The SLO-driven fleet sizer: consistency, monotonicity, options, infeasible cases and bad input."""

import numpy as np
import pandas as pd
import pytest

from calculator import Q_, InputError
from calculator.errors import UnknownEntryError
from calculator.fleet import (
    Costs,
    SearchSpace,
    ServingOptions,
    Speculation,
    Targets,
    Workload,
    compare_serving_modes,
    default_price,
    demand_from_trace,
    frontier,
    plan_over_time,
    relax_targets,
    size_disaggregated,
    size_fleet,
)

PRICE = Q_(4.0, "USD/hour")


def plan(rate=20, ttft="1 s", tpot="50 ms", *, accelerator="h100-sxm", engine=None, targets=None, space=None,
         serving=None, costs=None):  # fmt: skip
    """Llama-3.1-70B at FP8 (1,024 -> 256 tokens) sized at ``rate`` request/s; the dicts add fields to each part."""
    return size_fleet(
        "llama-3.1-70b",
        Workload(Q_(rate, "request/s"), 1024, 256),
        Targets(Q_(ttft), Q_(tpot), **(targets or {})),
        SearchSpace(accelerator, "fp8", **(space or {})),
        engine=engine,
        serving=ServingOptions(**(serving or {})),
        costs=Costs(**{"gpu_hour": PRICE, **(costs or {})}),
    )


def test_plan_is_consistent():
    p = plan()
    assert p.feasible, p.reason
    assert p.gpus == p.replicas * p.layout.stage_gpus
    assert p.cost.per_hour.m_as("USD/hour") == pytest.approx(p.gpus * 4.0)
    tokens_per_hour = 20 * 256 * 3600
    assert p.cost.per_million_output_tokens.m_as("USD") == pytest.approx(p.gpus * 4.0 / tokens_per_hour * 1e6)
    assert p.cost_per_million_tokens == p.cost.per_million_output_tokens  # the chapter's name (Table 14)
    # Prompt and output tokens together: 1,024 + 256 tokens a request.
    total_per_hour = 20 * (1024 + 256) * 3600
    assert p.cost.per_million_total_tokens.m_as("USD") == pytest.approx(p.gpus * 4.0 / total_per_hour * 1e6)
    # A month of 730.5 hours (a 365.25-day year over 12).
    assert p.cost.per_month.m_as("USD/month") == pytest.approx(p.gpus * 4.0 * 730.5)
    assert p.service.ttft <= Q_(1, "s") and p.service.tpot <= Q_(50, "ms")
    assert 0 < p.service.utilization <= p.max_utilization == 0.8
    # Little's law: requests in flight fit in the planned decode slots.
    in_flight = 20 * (p.service.ttft.m_as("s") + 255 * p.service.tpot.m_as("s"))
    assert in_flight <= p.replicas * p.batch
    assert p.binding_constraint in {"memory", "tpot", "ttft", "throughput"}
    assert p.candidates >= 4 * 90


def test_doubling_traffic_about_doubles_gpus():
    small, large = plan(rate=50), plan(rate=100)
    assert large.gpus / small.gpus == pytest.approx(2.0, abs=2 * small.layout.stage_gpus / small.gpus + 0.05)


@pytest.mark.parametrize("loose,tight", [("80 ms", "40 ms"), ("40 ms", "25 ms"), ("25 ms", "15 ms")])
def test_tighter_tpot_never_cheapens_the_plan(loose, tight):
    a, b = plan(tpot=loose), plan(tpot=tight)
    assert b.cost.per_hour >= a.cost.per_hour


@pytest.mark.parametrize("loose,tight", [("2 s", "500 ms"), ("500 ms", "200 ms")])
def test_tighter_ttft_never_cheapens_the_plan(loose, tight):
    assert plan(ttft=tight).cost.per_hour >= plan(ttft=loose).cost.per_hour


def test_percentile_ttft_is_harder_than_mean():
    mean, p99 = plan(ttft="300 ms"), plan(ttft="300 ms", targets={"ttft_percentile": 0.99})
    assert p99.cost.per_hour >= mean.cost.per_hour


def test_impossible_targets_are_infeasible_with_closest_values():
    p = plan(tpot="0.5 ms")
    assert not p.feasible
    assert "closest achievable" in p.reason
    assert p.closest["tpot"] > Q_(0.5, "ms")
    assert all("TPOT" in why for why in p.rejected.values())


def test_memory_rejection_explains_itself():
    p = size_fleet(
        "llama-3.1-405b",
        Workload(Q_(1, "request/s"), 512, 128),
        Targets(Q_(10, "s"), Q_(1, "s")),
        SearchSpace("l4", "bf16", tensor_parallel=[1, 2, 4, 8]),
        costs=Costs(Q_(1, "USD/hour")),
    )
    assert not p.feasible
    assert p.rejected["l4/bf16/tp8"].startswith("memory: ")
    (l4,) = [r for r in p.rejections if r.family == "l4/bf16/tp8"]
    assert l4.code == "memory" and l4.values["weights_per_device"] > l4.values["usable_per_device"] * 0


def test_several_accelerators_pick_the_cheapest():
    prices = {"h100-sxm": Q_(4, "USD/hour"), "h200-sxm": Q_(4.5, "USD/hour"), "a100-sxm-80gb": Q_(2, "USD/hour")}
    p = size_fleet(
        "llama-3.1-8b",
        Workload(Q_(30, "request/s"), 2048, 256),
        Targets(Q_(1, "s"), Q_(40, "ms")),
        SearchSpace(list(prices), ["bf16", "fp8"]),
        costs=Costs(prices),
    )
    assert p.feasible
    costlier = [r for r in p.rejections if r.code in ("costlier", "bound")]  # bound: at least that cost
    chosen = p.cost.per_hour.m_as("USD/hour")
    assert costlier and {r.family for r in p.rejections} == set(p.rejected)
    for record in costlier:
        assert record.values["cost_per_hour"].m_as("USD/hour") >= chosen - 1e-9
        assert p.rejected[record.family] == record.text


def test_default_price_comes_from_the_registry(tmp_path):
    from calculator.registry import load_registry

    reg = load_registry()
    on_demand = [p.price for p in reg.prices.values() if p.accelerator == "h100-sxm" and p.market == "on_demand"]
    assert default_price("h100-sxm") == min(on_demand, key=lambda q: q.m_as("USD/hour"))
    with pytest.raises(InputError, match="no on-demand price for accelerator 'a100-40gb'"):
        default_price("a100-40gb", registry=_without_prices(tmp_path))


def _without_prices(folder):
    from calculator.registry import DEFAULT_REGISTRY_PATH, load_registry

    text = DEFAULT_REGISTRY_PATH.read_text(encoding="utf-8").split("\nprices:", 1)[0]
    path = folder / "no_prices.yaml"
    path.write_text(text, encoding="utf-8")
    return load_registry(path)


def test_fp8_kv_cache_and_prefix_caching_never_cost_more():
    base = plan(rate=40, tpot="60 ms")
    assert plan(rate=40, tpot="60 ms", space={"kv_precision": "fp8"}).cost.per_hour <= base.cost.per_hour
    cached = plan(rate=40, tpot="60 ms", serving={"prefix_hit_rate": 0.8, "shared_prefix_tokens": 768})
    assert cached.cost.per_hour <= base.cost.per_hour


def test_chunked_prefill_bounds_the_token_gap():
    whole = plan(rate=10)
    chunked = plan(rate=10, serving={"chunk_size": 256})
    assert chunked.service.tbt_max < whole.service.tbt_max
    bound = {"tbt": Q_(whole.service.tbt_max.m_as("ms") * 0.9, "ms")}
    assert plan(rate=10, serving={"chunk_size": 256}, targets=bound).feasible


def test_speculative_decoding_helps_a_tight_tpot():
    spec = Speculation("llama-3.1-8b", draft_length=4, acceptance=0.8)
    without = plan(rate=5, tpot="12 ms", space={"tensor_parallel": [4, 8]})
    with_spec = plan(rate=5, tpot="12 ms", space={"tensor_parallel": [4, 8]}, serving={"speculation": spec})
    assert with_spec.feasible
    assert (not without.feasible) or with_spec.cost.per_hour <= without.cost.per_hour


def test_disaggregated_pools():
    d = size_disaggregated(
        "llama-3.1-70b",
        Workload(Q_(20, "request/s"), 4096, 256),
        Targets(Q_(1.5, "s"), Q_(40, "ms")),
        SearchSpace("h100-sxm", "fp8"),
        costs=Costs(PRICE),
        interconnect="infiniband-ndr",
    )
    assert d.feasible, d.reason
    assert d.gpus == d.prefill["gpus"] + d.decode["gpus"]
    assert d.cost.per_hour.m_as("USD/hour") == pytest.approx(d.gpus * 4.0)
    assert d.cost.per_month.m_as("USD/hour") == pytest.approx(d.gpus * 4.0)  # the same cost, per month
    output_cost = d.cost.per_million_output_tokens.m_as("USD")
    assert output_cost == pytest.approx(d.gpus * 4.0 / (20 * 256 * 3600) * 1e6)
    assert d.cost.per_million_total_tokens.m_as("USD") == pytest.approx(output_cost * 256 / (4096 + 256))
    assert d.ttft > d.kv_handoff > Q_(0, "s")
    # FP8 weights run an FP8 KV cache under the engine-agnostic profile (performance.KV_PRECISION_RULE):
    # 4096 tokens x 163,840 B of KV over one 50 GB/s NDR direction: about 13 ms.
    assert d.kv_handoff.m_as("ms") == pytest.approx(4096 * 163840 / 50e9 * 1e3, rel=0.05)
    assert d.tpot <= Q_(40, "ms") and d.ttft <= Q_(1.5, "s")


def test_energy_is_between_idle_and_full_power():
    p = plan()
    tdp = 0.7 * p.gpus  # kW
    assert 0.3 * tdp <= p.energy.power.m_as("kW") <= tdp
    assert p.energy.per_million_output_tokens.m_as("kWh") > 0
    assert p.energy.electricity_cost_per_million_output_tokens.m_as("USD") == pytest.approx(
        p.energy.per_million_output_tokens.m_as("kWh") * 0.10
    )


def test_workload_from_a_trace():
    rng = np.random.default_rng(1)
    arrivals = np.cumsum(rng.exponential(0.1, 5000))
    trace = pd.DataFrame(
        {
            "arrival_time": arrivals,
            "input_tokens": rng.integers(100, 2000, 5000),
            "output_tokens": rng.integers(50, 500, 5000),
        }
    )
    w = Workload.from_trace(trace)
    assert w.arrival_rate.m_as("request/s") == pytest.approx(10, rel=0.05)
    assert w.arrival_cv == pytest.approx(1.0, abs=0.05)
    assert w.input_tokens == pytest.approx(1050, rel=0.03)
    with pytest.raises(InputError, match="lacks column"):
        Workload.from_trace(trace.drop(columns="output_tokens"))


def test_demand_curve_from_a_trace():
    # 3,600 arrivals in the first hour, 7,200 in the second: 1 and 2 request/s.
    arrivals = np.concatenate([np.linspace(0, 3599, 3600), 3600 + np.linspace(0, 3599, 7200)])
    times, rates = demand_from_trace(pd.DataFrame({"arrival_time": arrivals}))
    assert times.m_as("hour").tolist() == [0, 1]
    assert rates.m_as("request/s").tolist() == pytest.approx([1.0, 2.0])


def test_plan_over_a_demand_curve():
    from calculator.autoscaling import cold_start_time

    p = plan(rate=50)
    hours = np.arange(24)
    demand = Q_(25 + 25 * np.sin(hours / 24 * 2 * np.pi) ** 2, "request/s")
    startup = cold_start_time(Q_(2, "min"), Q_(70, "GB"), Q_(0.5, "GB/s"), Q_(1, "min"))
    day = plan_over_time(p, Q_(hours, "hour"), demand, startup_time=startup, end=Q_(24, "hour"))
    assert day.peak_gpus <= p.gpus + p.layout.stage_gpus  # the 50 request/s plan covers the 50 request/s peak
    assert day.cost <= day.static_cost
    assert day.predictive.deficit.m_as("request") == 0  # replicas start one cold start ahead
    # A step from 5 to 50 request/s at 09:00: the reactive controller sees it late and waits a cold start.
    step = Q_(np.where(hours < 9, 5.0, 50.0), "request/s")
    jump = plan_over_time(p, Q_(hours, "hour"), step, startup_time=startup, end=Q_(24, "hour"))
    assert jump.predictive.deficit.m_as("request") == 0 < jump.reactive.deficit.m_as("request")
    per_replica = p.service.replica_throughput.m_as("request/s") * p.max_utilization
    assert day.predictive.ready.max() == int(np.ceil(demand.m_as("request/s").max() / per_replica - 1e-9))
    with pytest.raises(InputError):
        plan_over_time(p, Q_(hours, "hour"), Q_(-np.ones(24), "request/s"))


def test_plan_over_a_curve_shorter_than_one_step():
    # 20 s of demand on the default one-minute grid: one step, billed for that minute (it raised an IndexError)
    p = plan(rate=5)
    short = plan_over_time(p, Q_([0, 10], "s"), Q_([2, 4], "request/s"))
    assert short.predictive.times.size == 1
    price = p.cost.per_hour / p.gpus
    assert short.static_cost.m_as("USD") == pytest.approx((short.peak_gpus * Q_(1, "min") * price).m_as("USD"))


def test_frontier_trades_interactivity_for_throughput():
    table = frontier("llama-3.1-70b", ["h100-sxm", "h200-sxm"], "fp8", 1024, 1024)
    assert set(table.accelerator) == {"h100-sxm", "h200-sxm"}
    best = table[table.pareto].sort_values(["accelerator", "tokens_per_s_per_user"])
    for _, group in best.groupby("accelerator"):
        assert np.all(np.diff(group.tokens_per_s_per_gpu) <= 1e-9)


def test_bad_inputs():
    with pytest.raises(InputError, match="Workload: 'arrival_rate' must be a finite rate > 0"):
        plan(rate=0)
    with pytest.raises(InputError, match="Targets: 'tpot' must be > 0"):
        plan(tpot="0 ms")
    with pytest.raises(InputError, match="'max_utilization' must be"):
        plan(targets={"max_utilization": 1.5})
    with pytest.raises(UnknownEntryError, match="unknown accelerator id 'h999'"):
        plan(accelerator="h999")
    with pytest.raises(InputError, match=r"'gpu_hour' \(the GPU-hour price\) must be a quantity in USD/hour"):
        plan(costs={"gpu_hour": 4})
    with pytest.raises(InputError, match="no tensor-parallel degree"):
        plan(space={"tensor_parallel": [3, 5]})
    with pytest.raises(InputError, match="acceptance"):
        Speculation("llama-3.1-8b", acceptance=1.5)


def test_disaggregated_pools_beyond_the_prefill_replica_limit_say_so():
    traffic, space, costs = Workload(Q_(20, "request/s"), 4096, 256), SearchSpace("h100-sxm", "fp8"), Costs(PRICE)
    targets = Targets(Q_(1.5, "s"), Q_(40, "ms"))
    assert size_disaggregated("llama-3.1-70b", traffic, targets, space, costs=costs).feasible
    # 20 prompts of 4,096 tokens a second do not fit one prefill replica: the limit is the reason, not the target
    capped = size_disaggregated("llama-3.1-70b", traffic, targets, space, costs=costs, max_prefill_replicas=1)
    assert not capped.feasible and "needs more than 1 prefill replicas (max_prefill_replicas)" in capped.reason
    tight = Targets(Q_(20, "ms"), Q_(40, "ms"))  # below one prefill's time
    unreachable = size_disaggregated("llama-3.1-70b", traffic, tight, space, costs=costs)
    assert not unreachable.feasible and "no configuration meets the TTFT target after" in unreachable.reason


def test_disaggregated_pools_refuse_a_token_gap_bound_and_the_comparison_keeps_it_for_colocated_serving():
    traffic, space, costs = Workload(Q_(20, "request/s"), 4096, 256), SearchSpace("h100-sxm", "fp8"), Costs(PRICE)
    bounded = Targets(Q_(1.5, "s"), Q_(40, "ms"), tbt=Q_(10, "ms"))
    with pytest.raises(InputError, match=r"size_disaggregated\(\): a decode pool runs no prefill .* Targets\.tbt"):
        size_disaggregated("llama-3.1-70b", traffic, bounded, space, costs=costs)
    with pytest.raises(InputError, match=r"size_disaggregated\(\): argument 'targets' must be a Targets"):
        size_disaggregated("llama-3.1-70b", traffic, (Q_(1, "s"), Q_(40, "ms")), space)
    c = compare_serving_modes("llama-3.1-70b", traffic, bounded, space, costs=costs)
    assert c.colocated.targets.tbt == Q_(10, "ms") and (
        not c.colocated.feasible or c.colocated.service.tbt_max <= Q_(10, "ms")
    )
    unbounded = size_disaggregated("llama-3.1-70b", traffic, Targets(Q_(1.5, "s"), Q_(40, "ms")), space, costs=costs)
    assert c.disaggregated == unbounded


def test_compare_colocated_and_disaggregated():
    c = compare_serving_modes(
        "llama-3.1-70b", Workload(Q_(20, "request/s"), 4096, 256), Targets(Q_(1.5, "s"), Q_(40, "ms")),
        SearchSpace("h100-sxm", "fp8"), costs=Costs(PRICE),
    )  # fmt: skip
    assert c.colocated.feasible and c.disaggregated.feasible
    cheaper = c.colocated.cost.per_hour if c.cheaper == "colocated" else c.disaggregated.cost.per_hour
    other = c.disaggregated.cost.per_hour if c.cheaper == "colocated" else c.colocated.cost.per_hour
    assert cheaper <= other and c.saving == other - cheaper


def test_relax_targets_finds_the_smallest_common_loosening():
    traffic, space, costs = Workload(Q_(10, "request/s"), 1024, 256), SearchSpace("h100-sxm", "fp8"), Costs(PRICE)
    relaxed = relax_targets("llama-3.1-70b", traffic, Targets(Q_(50, "ms"), Q_(5, "ms")), space, costs=costs)
    assert relaxed.found and relaxed.plan.feasible and relaxed.factor > 1
    assert relaxed.tpot_slo.m_as("ms") == pytest.approx(5 * relaxed.factor)
    assert relaxed.plan.service.tpot <= relaxed.tpot_slo and relaxed.plan.service.ttft <= relaxed.ttft_slo
    # One step tighter than the tolerance is out of proportion: more than 10x the GPUs of the loosest targets
    # (x100), or infeasible. Without that rule (max_scale=inf) the factor is the smallest feasible one.
    loosest = size_fleet("llama-3.1-70b", traffic, Targets(Q_(50, "ms") * 100, Q_(5, "ms") * 100), space, costs=costs)
    for factor, rule in ((relaxed.factor, 10.0), (None, float("inf"))):
        if factor is None:
            unbounded = relax_targets(
                "llama-3.1-70b", traffic, Targets(Q_(50, "ms"), Q_(5, "ms")), space, costs=costs, max_scale=rule
            )
            assert unbounded.factor <= relaxed.factor
            factor = unbounded.factor
        tighter = Targets(Q_(50 * factor / 1.011, "ms"), Q_(5 * factor / 1.011, "ms"))
        closer = size_fleet("llama-3.1-70b", traffic, tighter, space, costs=costs)
        assert not closer.feasible or closer.gpus > rule * loosest.gpus
    # Feasible targets need no loosening; a model that fits nowhere cannot be rescued by loosening.
    loose = Targets(Q_(1, "s"), Q_(50, "ms"))
    assert relax_targets("llama-3.1-70b", traffic, loose, space, costs=costs).factor == 1.0
    stuck = relax_targets("llama-3.1-405b", Workload(Q_(1, "request/s"), 1024, 256), loose,
                          SearchSpace("l4", "fp16", tensor_parallel=(1, 2)), costs=costs)  # fmt: skip
    assert not stuck.found and "memory" in next(iter(stuck.plan.rejected.values()))
    with pytest.raises(InputError, match="max_factor"):
        relax_targets("llama-3.1-70b", traffic, loose, space, costs=costs, max_factor=1)


def test_plan_reports_gpus_at_the_ends_of_the_model_error():
    from calculator.fleet import plan_summary

    p = plan(engine="vllm")
    low, high = p.gpus_interval
    assert low <= p.gpus <= high
    assert p.service.ttft_interval[0] < p.service.ttft < p.service.ttft_interval[1]
    assert p.service.tpot_interval[0] < p.service.tpot < p.service.tpot_interval[1]
    assert f"{low}-{high} GPUs" in plan_summary(p)
    # Loose targets: the interval still brackets the plan.
    loose = plan(ttft="5 s", tpot="500 ms", engine="vllm")
    assert loose.gpus_interval[0] <= loose.gpus <= loose.gpus_interval[1]
    columns = {
        "gpus_interval.low",
        "gpus_interval.high",
        "service.ttft_interval.low [s]",
        "service.tpot_interval.high [s]",
    }
    assert columns <= set(p.to_frame().columns)


@pytest.mark.parametrize(
    ("part", "field", "value", "message"),
    [
        ("targets", "max_utilization", "0.8", "max_utilization' must be a number"),
        ("targets", "max_utilization", float("nan"), "max_utilization' contains NaN"),
        ("serving", "prefix_hit_rate", float("nan"), "prefix_hit_rate' contains NaN"),
        ("serving", "chunk_size", float("inf"), "chunk_size' must be finite"),
        ("space", "tensor_parallel", [float("inf")], "tensor_parallel' must be finite"),
        ("space", "batches", ["8"], "batches' must be numeric"),
    ],
)
def test_sizing_options_go_through_the_one_validation_layer(part, field, value, message):
    # Strings, NaN and infinity used to reach a comparison or int() and leak TypeError/OverflowError.
    with pytest.raises(InputError, match=message):
        plan(**{part: {field: value}})


def test_the_closest_feasible_alternative_loosens_only_the_binding_target():
    # A 5 ms TPOT binds and a 1 s TTFT does not: the TTFT target stays as given.
    traffic, space, costs = Workload(Q_(10, "request/s"), 1024, 256), SearchSpace("h100-sxm", "fp8"), Costs(PRICE)
    only_tpot = relax_targets("llama-3.1-70b", traffic, Targets(Q_(1, "s"), Q_(5, "ms")), space, costs=costs)
    assert only_tpot.loosened == "tpot" and only_tpot.ttft_slo == Q_(1, "s") and only_tpot.tpot_slo > Q_(5, "ms")
    # A 20 ms TTFT binds and a 100 ms TPOT does not.
    only_ttft = relax_targets("llama-3.1-70b", traffic, Targets(Q_(20, "ms"), Q_(100, "ms")), space, costs=costs)
    assert only_ttft.loosened == "ttft" and only_ttft.tpot_slo == Q_(100, "ms") and only_ttft.plan.feasible


def test_when_nothing_fits_the_reason_names_the_tensor_parallel_degree_that_would():
    # DeepSeek-V3 in BF16 (about 1.3 TB of weights) on H100s: no degree of one node (up to TP 8) holds it.
    args = ("deepseek-v3", Workload(Q_(1, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(100, "ms")))

    def on_h100s(**space):
        return size_fleet(*args, SearchSpace("h100-sxm", "bf16", **space), costs=Costs(PRICE))

    plan = on_h100s(tensor_parallel=[4, 8])  # degrees given: searched as given
    assert not plan.feasible and "TP 32 on h100-sxm at bf16 would leave room" in plan.reason
    assert "inf" not in plan.reason
    assert on_h100s(tensor_parallel=[32]).feasible
    # With the default degrees the sizer adds replicas of two and four nodes itself (the H100's scale-out link).
    wide = on_h100s()
    assert wide.feasible and wide.layout.stage_gpus == 32 and wide.layout.nodes == 4
