"""Sweeps over grids: equal to point-by-point calls, unit-labelled, tidy, with provenance."""

import itertools
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from calculator import Q_
from calculator.errors import InputError, UnitsError
from calculator.formula import catalog
from calculator.memory import kv_bytes_per_token, memory_fit
from calculator.performance import predict_benchmark
from calculator.results import parse_label
from calculator.sweeps import sweep, sweep_fleet

# Two in-domain values per argument (one for the fourth argument on): a grid of at most 8 points.
DOMAIN_VALUES = {
    "positive": [0.7, 2.0],
    "nonnegative": [0.0, 2.0],
    "probability": [0.3, 0.6],
    "fraction_open": [0.3, 0.6],
    "positive_integer": [3, 5],
    "any": [0.7, -1.3],
    "precision": [4.0, 16.0],
}


def grids_for(formula):
    grids = {}
    for i, (name, spec) in enumerate(formula.variables.items()):
        values = DOMAIN_VALUES[spec.domain][: 2 if i < 3 else 1]
        if spec.unit:
            grids[name] = Q_(values, spec.unit)
        else:
            grids[name] = values if i < 3 else values[0]
    return grids


def points(grids):
    """Every grid point as keyword arguments, the last axis fastest (a fixed value is an axis of one)."""
    axes = {n: list(v) if np.ndim(getattr(v, "magnitude", v)) else [v] for n, v in grids.items()}
    for combination in itertools.product(*axes.values()):
        yield dict(zip(axes, combination, strict=True))


def point_value(formula, point):
    """The formula at one point (in its result unit), or None where it is undefined there."""
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            value = formula(**point)
    except (InputError, ZeroDivisionError):  # a scalar 0/0 raises ZeroDivisionError
        return None
    return value.m_as(formula.result.unit) if formula.result.unit else value


@pytest.mark.parametrize("key", sorted(catalog()))
def test_every_formula_sweep_equals_point_by_point_calls(key):
    formula = catalog()[key]
    grids = grids_for(formula)
    expected = [point_value(formula, point) for point in points(grids)]
    defined = np.array([v is not None for v in expected])
    try:
        frame = sweep(formula, **grids)
    except InputError as exc:
        # undefined (NaN), impossible (a negative size) or overflowing to infinity somewhere on the grid: the sweep
        # says so
        assert any(words in str(exc) for words in ("undefined", "impossible case", "overflow")) and not defined.all()
        return
    result = [c for c in frame.columns if parse_label(c)[0] == formula.name]
    assert len(result) == 1 and parse_label(result[0])[1] in ("", f"{Q_(1, formula.result.unit).units:~P}")
    values = frame[result[0]].to_numpy()
    assert len(values) == len(expected)
    np.testing.assert_allclose(values[defined], np.array([v for v in expected if v is not None], float), rtol=1e-12)
    assert not np.isfinite(values[~defined]).any()  # where a scalar call fails, the sweep has no finite number
    assert list(frame.columns[: len(formula.inputs)]) == [
        c for c in frame.columns if parse_label(c)[0] in formula.inputs
    ]


def test_undefined_point_is_an_error_naming_it():
    with pytest.raises(InputError, match=r"undefined \(NaN\) at \{'useful_tokens': <Quantity\(0, 'token'\)>"):
        sweep("routing.wasted_token_fraction", useful_tokens=Q_([0, 5], "token"), wasted_tokens=Q_([0, 1], "token"))


def test_sweep_rows_carry_their_inputs_in_the_callers_units():
    frame = sweep(
        kv_bytes_per_token,
        layers=[32, 80],
        kv_heads=8,
        head_dim=128,
        bytes_per_element=Q_([8, 16], "bit"),
        units={"kv_bytes_per_token": "KiB/token"},
    )
    assert list(frame.columns) == [
        "layers",
        "kv_heads",
        "head_dim",
        "bytes_per_element [b]",  # b is the bit
        "kv_bytes_per_token [KiB/token]",
    ]
    assert frame["layers"].dtype == np.int64 and frame["kv_heads"].dtype == np.int64  # counts stay ints
    assert list(frame["layers"]) == [32, 32, 80, 80]  # the last axis varies fastest
    assert list(frame["bytes_per_element [b]"]) == [8, 16, 8, 16]
    # Llama-3.1-70B at FP16: 2 * 80 * 8 * 128 * 2 B = 327,680 B/token = 320 KiB/token
    assert frame["kv_bytes_per_token [KiB/token]"].iloc[3] == 320.0


def test_sweep_by_catalog_name_and_bare_name():
    by_key = sweep("memory.weight_bytes", parameters=[8e9, 70e9], bits_per_weight=[4, 16])
    by_name = sweep("weight_bytes", parameters=[8e9, 70e9], bits_per_weight=[4, 16])
    assert by_key.equals(by_name)
    assert list(by_key["weight_bytes [B]"]) == [4e9, 16e9, 35e9, 140e9]


def test_sweep_errors_name_the_problem():
    with pytest.raises(InputError, match="no formula named 'kv_per_tokn'"):
        sweep("kv_per_tokn", layers=1)
    with pytest.raises(InputError, match=r"missing \['head_dim', 'bytes_per_element'\]"):
        sweep(kv_bytes_per_token, layers=[1, 2], kv_heads=8)
    with pytest.raises(UnitsError, match="'bytes_per_element' is a precision"):
        sweep(kv_bytes_per_token, layers=[1, 2], kv_heads=8, head_dim=128, bytes_per_element=Q_(2, "s"))
    with pytest.raises(InputError, match="'layers' must be an integer >= 1"):
        sweep(kv_bytes_per_token, layers=[0, 2], kv_heads=8, head_dim=128, bytes_per_element=Q_(2, "B"))
    with pytest.raises(InputError, match="non-empty 1-D list"):
        sweep(kv_bytes_per_token, layers=[[1, 2]], kv_heads=8, head_dim=128, bytes_per_element=Q_(2, "B"))
    with pytest.raises(InputError, match="non-empty 1-D list"):
        sweep(kv_bytes_per_token, layers=[], kv_heads=8, head_dim=128, bytes_per_element=Q_(2, "B"))


def test_ambiguous_formula_name_lists_the_keys(monkeypatch):
    import calculator.sweeps

    twins = {"memory.kv_bytes_per_token": kv_bytes_per_token, "other.kv_bytes_per_token": kv_bytes_per_token}
    monkeypatch.setattr(calculator.sweeps, "catalog", lambda: twins)
    with pytest.raises(InputError, match="ambiguous; use one of"):
        sweep("kv_bytes_per_token", layers=1)


def test_function_sweep_equals_point_by_point_memory_fit():
    grids = {
        "capacity": Q_(80, "GB"),
        "weights": Q_([35, 70], "GB"),
        "kv_per_token": Q_(327680, "B/token"),
        "context": [1000, 8000, 32000],
        "batch": [1, 16],
    }
    frame = sweep(memory_fit, units={"kv": "GB", "free": "GB"}, **grids)
    assert len(frame) == 12
    # inputs the result repeats (capacity, weights, context, batch) appear once, as inputs
    assert "capacity [GB]" in frame.columns and "capacity [B]" not in frame.columns
    for (_, row), point in zip(frame.iterrows(), points(grids), strict=True):
        fit = memory_fit(**point)
        assert row["weights [GB]"] == point["weights"].m_as("GB") and row["context"] == point["context"]
        assert row["fits"] == fit.fits and row["max_batch"] == fit.max_batch and row["max_context"] == fit.max_context
        assert row["kv [GB]"] == pytest.approx(fit.kv.m_as("GB"), rel=1e-12)
        assert row["free [GB]"] == pytest.approx(fit.free.m_as("GB"), rel=1e-12, abs=1e-12)
    # defined in calculator.memory.fit, cited by the package that exports it
    assert memory_fit.__module__ == "calculator.memory.fit"
    assert frame.attrs["provenance"].models == ("memory.memory_fit",)


def test_function_sweep_takes_registry_ids_like_the_direct_call():
    # issue 15 item 7: an accelerator id for a capacity raised pint's UndefinedUnitError in the sweep
    from calculator.memory import model_memory_fit

    frame = sweep(
        model_memory_fit, model="llama-3.1-70b", capacity="h100-sxm", context=8192, weight_bits=["fp8", "bf16"]
    )
    assert list(frame["weight_bits"]) == ["fp8", "bf16"]
    for bits, fits in zip(["fp8", "bf16"], frame["fits"], strict=True):
        assert fits == model_memory_fit("llama-3.1-70b", "h100-sxm", 8192, weight_bits=bits).fits
    assert list(frame["fits"]) == [True, False]  # 70 GB of FP8 weights fit in 80 GiB, 140 GB of BF16 do not


def test_function_sweep_names_an_unknown_argument():
    from calculator.memory import model_memory_fit

    with pytest.raises(InputError, match=r"unknown argument\(s\) \['precision'\].*'weight_bits'"):
        sweep(model_memory_fit, model="llama-3.1-70b", capacity="h100-sxm", context=8192, precision=["fp8", "bf16"])


def test_function_sweep_with_named_axes_equals_point_by_point_predict_benchmark():
    grids = {
        "model": "llama-3.1-8b",
        "accelerator": ["h100-sxm", "a100-sxm-80gb"],
        "precision": ["bf16", "fp8"],
        "tensor_parallel": [1, 2],
        "input_tokens": 1024,
        "output_tokens": 256,
        "concurrency": [1, 32],
    }
    frame = sweep(predict_benchmark, units={"ttft": "ms", "tpot": "ms"}, **grids)
    assert len(frame) == 16
    assert list(frame.columns[:7]) == list(grids)
    for (_, row), point in zip(frame.iterrows(), points(grids), strict=True):
        assert row["accelerator"] == point["accelerator"] and row["concurrency"] == point["concurrency"]
        expected = predict_benchmark(**point)
        assert row["ttft [ms]"] == pytest.approx(expected.ttft.m_as("ms"), rel=1e-12)
        assert row["tpot [ms]"] == pytest.approx(expected.tpot.m_as("ms"), rel=1e-12)
    provenance = frame.attrs["provenance"]
    # defined in calculator.performance.benchmark, cited by the package that exports it
    assert predict_benchmark.__module__ == "calculator.performance.benchmark"
    assert provenance.models == ("performance.predict_benchmark",)
    assert provenance.registry_ids == ("llama-3.1-8b", "h100-sxm", "a100-sxm-80gb")
    assert provenance.inputs["concurrency"] == [1, 32]


def test_function_returning_a_quantity():
    from calculator.queueing import ggc_mean_wait

    frame = sweep(
        ggc_mean_wait,
        arrival_rate=Q_([5, 9], "request/s"),
        service_time=Q_(0.1, "s"),
        servers=1,
        arrival_cv=[0.5, 1.0],
        service_cv=1.0,
        units={"ggc_mean_wait": "ms"},
    )
    assert "ggc_mean_wait [ms]" in frame.columns and len(frame) == 4
    for _, row in frame.iterrows():
        expected = ggc_mean_wait(
            Q_(row["arrival_rate [request/s]"], "request/s"), Q_(0.1, "s"), 1, row["arrival_cv"], 1.0
        )
        assert row["ggc_mean_wait [ms]"] == pytest.approx(expected.m_as("ms"), rel=1e-12)
    # defined in calculator.queueing.ggc, cited by the package that exports it
    assert ggc_mean_wait.__module__ == "calculator.queueing.ggc"
    assert frame.attrs["provenance"].models == ("queueing.ggc_mean_wait",)


def test_a_formula_of_a_package_keeps_its_package_key():
    from calculator.batching import batch_service_time
    from calculator.memory import kv_pool_size
    from calculator.phases import roofline_time

    frame = sweep("batching.batch_service_time", batch_size=[1, 8], fixed_time=Q_(10, "ms"), marginal_time=Q_(1, "ms"))
    assert batch_service_time.__module__ == "calculator.batching.service"
    assert frame.attrs["provenance"].models == ("batching.batch_service_time",)
    assert sweep(batch_service_time, batch_size=8, fixed_time=Q_(10, "ms"), marginal_time=Q_(1, "ms")).attrs[
        "provenance"
    ].models == ("batching.batch_service_time",)
    frame = sweep(
        "memory.kv_pool_size",
        total=Q_(80, "GB"),
        weights=Q_([35, 70], "GB"),
        activations=Q_(3, "GB"),
        overhead=Q_(2, "GB"),
        headroom=0.1,
    )
    assert kv_pool_size.__module__ == "calculator.memory.hierarchy"
    assert frame.attrs["provenance"].models == ("memory.kv_pool_size",)
    frame = sweep(
        "phases.roofline_time",
        flops=Q_([140, 280], "GFLOP"),
        bytes_moved=Q_(140, "GB"),
        peak_throughput=Q_(989, "TFLOP/s"),
        memory_bandwidth=Q_(3.35, "TB/s"),
    )
    assert roofline_time.__module__ == "calculator.phases.flops"
    assert frame.attrs["provenance"].models == ("phases.roofline_time",)


def test_sweep_fleet_rows_equal_size_fleet():
    from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet

    grids = dict(
        model="llama-3.1-70b",
        accelerator=["h100-sxm", "h200-sxm"],
        precision="fp8",
        arrival_rate=Q_([5, 40], "request/s"),
        input_tokens=1024,
        output_tokens=256,
        ttft_slo=Q_(1, "s"),
        tpot_slo=[Q_(50, "ms"), Q_(0.1, "ms")],
    )
    frame = sweep_fleet(**grids, price=Q_(4, "USD/hour"))
    assert len(frame) == 8
    assert "tpot_slo [ms]" in frame.columns and "arrival_rate [request/s]" in frame.columns
    assert not any(c.startswith("rejected.") for c in frame.columns)
    for _, row in frame.iterrows():
        plan = size_fleet(
            "llama-3.1-70b",
            Workload(Q_(row["arrival_rate [request/s]"], "request/s"), 1024, 256),
            Targets(Q_(1, "s"), Q_(row["tpot_slo [ms]"], "ms")),
            SearchSpace(row["accelerator"], "fp8"),
            costs=Costs(Q_(4, "USD/hour")),
        )
        assert row["feasible"] == plan.feasible and row["reason"] == plan.reason
        if plan.feasible:
            assert row["gpus"] == plan.gpus and row["layout.tensor_parallel"] == plan.layout.tensor_parallel
            assert row["cost.per_hour [USD/h]"] == pytest.approx(plan.cost.per_hour.m_as("USD/hour"))
            assert row["service.ttft [ms]"] == pytest.approx(plan.service.ttft.m_as("ms"))
        else:  # no parts: their columns are missing values, never zeros
            assert np.isnan(row["cost.per_hour [USD/h]"]) and np.isnan(row["service.ttft [ms]"])
            assert pd.isna(row["layout.tensor_parallel"]) and pd.isna(row["service.utilization"])
            assert row["closest.tpot [ms]"] == pytest.approx(plan.closest["tpot"].m_as("ms"))
    provenance = frame.attrs["provenance"]
    assert provenance.models == ("fleet.size_fleet",)
    assert provenance.registry_ids == ("llama-3.1-70b", "h100-sxm", "h200-sxm")


def test_sweep_fleet_cites_the_default_prices():
    from calculator.fleet import default_price, default_price_entry

    frame = sweep_fleet("llama-3.1-8b", "h100-sxm", "fp8", Q_(5, "request/s"), 512, 128, Q_(1, "s"), Q_(50, "ms"))
    entry = default_price_entry("h100-sxm")
    assert entry.price == default_price("h100-sxm")
    assert entry.id in frame.attrs["provenance"].registry_ids
    # defined in calculator.fleet.inputs, cited by the package that exports it
    assert default_price.__module__ == "calculator.fleet.inputs"
    assert sweep(default_price, accelerator=["h100-sxm", "h200-sxm"]).attrs["provenance"].models == (
        "fleet.default_price",
    )


def test_million_point_sweep_stays_within_memory():
    # 100 x 100 x 100 points; the frame itself is 5 columns x 8 B x 10^6 = 40 MB. The sweep may use
    # about twice that (the columns, then the DataFrame's copy), never a per-point Python object.
    grids = dict(
        layers=np.arange(1, 101),
        kv_heads=np.arange(1, 101),
        head_dim=np.arange(1, 101) * 8,
        bytes_per_element=Q_([2.0], "B"),
    )
    tracemalloc.start()
    try:
        frame = sweep(kv_bytes_per_token, **grids)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(frame) == 1_000_000
    assert peak < 3 * frame.memory_usage(deep=True).sum()
    row = frame.iloc[123_456]  # layers 13, kv_heads 35, head_dim 57 * 8
    assert (row["layers"], row["kv_heads"], row["head_dim"]) == (13, 35, 456)
    assert row["kv_bytes_per_token [B/token]"] == 2 * 13 * 35 * 456 * 2


def test_empty_named_axis_is_an_error():
    with pytest.raises(InputError, match="'precision' must be a value or a non-empty 1-D list"):
        sweep(
            predict_benchmark,
            model="llama-3.1-8b",
            accelerator="h100-sxm",
            precision=[],
            tensor_parallel=1,
            input_tokens=128,
            output_tokens=16,
            concurrency=1,
        )


def test_sweep_fleet_rejects_empty_axes():
    with pytest.raises(InputError, match="'arrival_rate' must be a value or a non-empty 1-D list"):
        sweep_fleet("llama-3.1-8b", "h100-sxm", "fp8", Q_([], "request/s"), 512, 128, Q_(1, "s"), Q_(50, "ms"))
    with pytest.raises(InputError, match="'accelerator' must be a value or a non-empty 1-D list"):
        sweep_fleet("llama-3.1-8b", [], "fp8", Q_(5, "request/s"), 512, 128, Q_(1, "s"), Q_(50, "ms"))


def _plan_cells(plan):
    """A plan's fields as the cells of a sweep row (the sweep's labels and units), by label.

    Not the ones the row shows as its inputs (an infeasible plan names no accelerator; its row does).
    """
    from calculator.results import flatten, frame_columns
    from calculator.sweeps import PLAN_UNITS

    fields = {k: v for k, v in flatten(plan.to_dict()).items() if k not in {"model", "accelerator", "precision"}}
    return {label: values[0] for label, values in frame_columns(fields, PLAN_UNITS).items()}


def _same_cell(a, b):
    """Equal cells; a missing value (None, or NaN where the frame's column holds numbers) equals another."""

    def missing(value):
        return value is None or (isinstance(value, float) and np.isnan(value))

    return (missing(a) and missing(b)) or (not missing(a) and not missing(b) and a == b)


def test_sweep_fleet_rows_are_exactly_the_plans_of_separate_size_fleet_calls():
    # Issue 24, item 9: the points of a sweep share their step arrays and priced candidate grids
    # (calculator._reuse); every field of every row stays the plan size_fleet makes alone.
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

    accelerators, rates, prompts, tpots = ["h100-sxm", "a100-sxm-80gb"], [3.0, 60.0], [512, 4096], [50.0, 8.0]
    frame = sweep_fleet("llama-3.1-70b", accelerators, "fp8", Q_(rates, "request/s"), prompts, 256, Q_(2, "s"),
                        Q_(tpots, "ms"), engine="vllm", ttft_percentile=0.9)  # fmt: skip
    points = list(itertools.product(accelerators, rates, prompts, tpots))
    assert len(frame) == len(points)
    compared = 0
    for row, (accelerator, rate, prompt, tpot) in zip(frame.to_dict("records"), points, strict=True):
        plan = size_fleet(
            "llama-3.1-70b", Workload(Q_(rate, "request/s"), prompt, 256),
            Targets(Q_(2, "s"), Q_(tpot, "ms"), ttft_percentile=0.9), SearchSpace(accelerator, "fp8"), engine="vllm",
        )  # fmt: skip
        cells = {label: value for label, value in _plan_cells(plan).items() if label in row}
        assert all(_same_cell(row[label], value) for label, value in cells.items()), (accelerator, rate, prompt, tpot)
        compared += len(cells)
    assert frame["feasible"].any() and not frame["feasible"].all()  # both kinds of row compared
    assert compared > 20 * len(points)


def test_sweep_fleet_of_a_mixture_of_experts_equals_size_fleet_per_layout():
    # The expert layouts are separate families of arrays; the sweep reuses each one's own.
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

    layouts = ("tensor", "expert", "attention-dp")
    frame = sweep_fleet("qwen3-235b-a22b", "h200-sxm", "fp8", Q_([4.0, 30.0], "request/s"), 2048, 256, Q_(2, "s"),
                        Q_(60, "ms"), moe_layouts=layouts, tensor_parallel=[4, 8], engine="sglang")  # fmt: skip
    for row, rate in zip(frame.to_dict("records"), [4.0, 30.0], strict=True):
        plan = size_fleet(
            "qwen3-235b-a22b", Workload(Q_(rate, "request/s"), 2048, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
            SearchSpace("h200-sxm", "fp8", tensor_parallel=(4, 8), moe_layouts=layouts), engine="sglang",
        )  # fmt: skip
        assert plan.feasible
        assert all(_same_cell(row[k], v) for k, v in _plan_cells(plan).items() if k in row)


def test_sweep_fleet_keeps_model_objects_with_the_same_id_apart():
    # Reuse is keyed by the object given, not its id: a user's variant of a packaged model (or a
    # user registry's entry) never takes the packaged one's step arrays.
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet
    from calculator.registry import load_registry

    packaged = load_registry().model("llama-3.1-70b")
    heavier = packaged.model_copy(update={"parameters": int(packaged.parameters * 1.3)})
    arguments = ("h100-sxm", "fp8", Q_(20, "request/s"), 1024, 256, Q_(1, "s"), Q_(50, "ms"))
    frame = sweep_fleet([packaged, heavier, packaged], *arguments)
    assert list(frame["model"]) == ["llama-3.1-70b"] * 3
    parts = (
        Workload(Q_(20, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"),
    )
    for row, model in zip(frame.to_dict("records"), [packaged, heavier, packaged], strict=True):
        plan = size_fleet(model, *parts)
        assert (row["batch"], row["gpus"]) == (plan.batch, plan.gpus)
    assert frame["batch"][0] == frame["batch"][2] != frame["batch"][1]  # the heavier weights leave less KV room


def test_a_reuse_scope_is_bounded_and_ends_with_its_call():
    from calculator._reuse import reusing, shared

    made = []
    with reusing(size=2):
        for key in ("a", "b", "a", "c", "a", "b"):
            shared(key, lambda key=key: made.append(key))
    # "a" is used again, so "c" pushes out "b" (the least recently used), which is made again
    assert made == ["a", "b", "c", "b"]
    shared("a", lambda: made.append("outside"))
    assert made[-1] == "outside"
