"""Result objects in notebooks and spreadsheets: to_frame, _repr_html_, column labels; display text and labels."""

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calculator import Q_
from calculator.errors import InputError
from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet
from calculator.memory import memory_fit
from calculator.performance import predict_benchmark
from calculator.results import (
    Result,
    column_label,
    flatten,
    format_display,
    format_number,
    human_label,
    parse_label,
)


@pytest.fixture(scope="module")
def infeasible():
    return size_fleet(
        "llama-3.1-70b",
        Workload(Q_(20, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(0.1, "ms")),
        SearchSpace("h100-sxm", "fp8"),
        costs=Costs(Q_(4, "USD/hour")),
    )


def test_column_labels_round_trip():
    for name, unit in [("kv_per_token", "B/token"), ("cost_per_hour", "USD/hour"), ("rate", "request/s"), ("n", "")]:
        label = column_label(name, unit)
        parsed_name, parsed_unit = parse_label(label)
        assert parsed_name == name
        assert (Q_(1, parsed_unit) == Q_(1, unit)) if unit else parsed_unit == ""
    assert column_label("kv_per_token", "B/token") == "kv_per_token [B/token]"
    assert column_label("x", "dimensionless") == "x"


def test_fleet_plan_to_frame_is_one_row_with_unit_labels(plan):
    frame = plan.to_frame()
    assert len(frame) == 1
    assert frame.loc[0, "gpus"] == plan.gpus
    assert frame.loc[0, "cost.per_hour [USD/h]"] == pytest.approx(plan.cost.per_hour.m_as("USD/hour"))
    assert frame.loc[0, "service.ttft [s]"] == pytest.approx(plan.service.ttft.m_as("s"))
    assert frame.loc[0, "layout.tensor_parallel"] == plan.layout.tensor_parallel  # the parts flatten to dotted names
    # dicts flatten to dotted names
    assert any(c.startswith("rejected.h100-sxm/fp8/tp") for c in frame.columns)
    shown = plan.to_frame(units={"service.ttft": "ms", "cost.per_hour": "USD/day"})
    assert shown.loc[0, "service.ttft [ms]"] == pytest.approx(plan.service.ttft.m_as("ms"))
    assert shown.loc[0, "cost.per_hour [USD/d]"] == pytest.approx(plan.cost.per_hour.m_as("USD/day"))
    assert plan.to_dict()["gpus"] == plan.gpus  # to_dict unchanged


def test_infeasible_plan_frame_lines_up_with_feasible_ones(plan, infeasible):
    units = {"service.ttft": "ms", "service.tpot": "ms", "cost.per_hour": "USD/hour", "closest.tpot": "ms"}
    alone = infeasible.to_frame(units)
    # an infeasible plan's parts are columns too, of missing values (never zeros)
    assert "service" not in alone.columns and {"service.tpot [ms]", "layout.tensor_parallel"} <= set(alone.columns)
    assert alone.loc[0, "layout.tensor_parallel"] is None and np.isnan(alone.loc[0, "service.tpot [ms]"])
    both = pd.concat([plan.to_frame(units), alone], ignore_index=True)
    assert both.loc[0, "service.tpot [ms]"] == pytest.approx(plan.service.tpot.m_as("ms"))
    assert np.isnan(both.loc[1, "service.tpot [ms]"]) and np.isnan(both.loc[1, "cost.per_hour [USD/h]"])
    assert both.loc[1, "closest.tpot [ms]"] == pytest.approx(infeasible.closest["tpot"].m_as("ms"))
    assert not both.loc[1, "feasible"]


def test_memory_fit_over_arrays_gives_one_row_per_element():
    context = np.array([1000, 4000, 16000])
    batch = np.array([[1], [8]])
    fit = memory_fit(Q_(80, "GB"), Q_(70, "GB"), Q_(327680, "B/token"), context, batch=batch)
    frame = fit.to_frame(units={"kv": "GB"})
    assert len(frame) == 6
    assert list(frame["context"]) == [1000, 4000, 16000] * 2
    assert list(frame["batch"]) == [1, 1, 1, 8, 8, 8]
    for _, row in frame.iterrows():
        point = memory_fit(Q_(80, "GB"), Q_(70, "GB"), Q_(327680, "B/token"), int(row.context), batch=int(row.batch))
        assert row.fits == point.fits and row.max_batch == point.max_batch
        assert row["kv [GB]"] == pytest.approx(point.kv.m_as("GB"))
    assert frame["capacity [B]"].nunique() == 1  # scalar fields repeat


def test_benchmark_prediction_frame():
    prediction = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, np.array([1, 8, 64]))
    frame = prediction.to_frame(units={"ttft": "ms"})
    assert list(frame.columns[:2]) == ["ttft [ms]", "tpot [s]"]
    assert np.allclose(frame["ttft [ms]"], prediction.ttft.m_as("ms"))
    assert set(frame["engine"]) == {prediction.engine}


def test_unbroadcastable_fields_stay_whole_in_one_row():
    @dataclass(frozen=True, repr=False)
    class Ragged(Result):
        times: object
        levels: object
        label: str

    ragged = Ragged(Q_([0.0, 1.0, 2.0], "hour"), np.array([1, 2]), "x")
    frame = ragged.to_frame()
    assert len(frame) == 1 and list(frame.columns) == ["times [h]", "levels", "label"]
    assert list(frame.loc[0, "times [h]"]) == [0.0, 1.0, 2.0]
    even = Ragged(Q_([0.0, 1.0], "hour"), np.array([1, 2]), "x").to_frame()
    assert len(even) == 2 and list(even["levels"]) == [1, 2] and list(even["label"]) == ["x", "x"]


def test_repr_html_shows_fields_and_escapes(plan):
    html = plan._repr_html_()
    assert html.startswith("<div><strong>FleetPlan</strong><table>")
    assert "<th style='text-align:left'>gpus</th>" in html
    assert f"<td style='text-align:left'>{plan.gpus}</td>" in html
    assert "ms</td>" in html  # quantities shown compactly
    assert "rejected.h100-sxm/fp8/tp1" in html
    # every field is escaped: no raw markup from the values
    assert "<Quantity" not in html


def test_repr_html_of_array_result_has_a_table_of_rows():
    fit = memory_fit(Q_(80, "GB"), Q_(70, "GB"), Q_(327680, "B/token"), np.array([1000, 2000]))
    html = fit._repr_html_()
    assert "<strong>MemoryFit</strong>" in html
    assert "<th>max_batch</th>" in html and "<th>kv [B]</th>" in html


def test_flatten_nested():
    assert flatten({"a": 1, "b": {"c": 2, "d": {"e": 3}}}) == {"a": 1, "b.c": 2, "b.d.e": 3}


# ---------------------------------------------------------------------------------------------- display text


def significant_digits(text: str) -> int:
    """Significant digits written in a plain decimal (separators and a trailing integer's zeros not counted)."""
    digits = text.lstrip("-").replace(",", "")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0"))
    return len(digits.lstrip("0").rstrip("0")) or 1


@given(st.floats(min_value=1e-4, max_value=1e14) | st.floats(min_value=-1e14, max_value=-1e-4))
def test_a_float_is_written_at_four_significant_digits_with_separators(value):
    text = format_number(value)
    assert "e" not in text and significant_digits(text) <= 4
    assert float(text.replace(",", "")) == pytest.approx(value, rel=5e-4)  # rounded, not truncated
    whole = text.lstrip("-").split(".")[0]
    assert whole == f"{int(whole.replace(',', '')):,}"  # separators every three digits


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_an_int_count_is_exact_with_separators(value):
    text = format_number(value)
    assert int(text.replace(",", "")) == value and "." not in text


def test_numbers_outside_the_readable_range_and_special_values():
    assert format_number(0.082783) == "0.08278" and format_number(2.0001) == "2"  # the examples
    assert format_number(1.5e-05) == "1.5e-05" and float(format_number(2.5e20)) == 2.5e20
    assert format_number(0.0) == "0" and format_number(-1e-9, 2) == "-1e-09"
    assert (format_number(math.nan), format_number(math.inf), format_number(-math.inf)) == ("—", "∞", "-∞")
    assert format_number(np.float32(0.5)) == "0.5" and format_number(np.int64(123456)) == "123,456"
    for bad in (True, "1", None, Q_(1, "s")):
        with pytest.raises(InputError, match="'value'"):
            format_number(bad)
    with pytest.raises(InputError, match="'digits'"):
        format_number(1.0, 0)


def test_display_text_of_quantities_flags_gaps_and_records():
    # A time without a unit asked for is shown in s, ms or µs by its size; the unit asked for wins.
    assert format_display(Q_(0.082783, "s")) == "82.78 ms" and format_display(Q_(0.082783, "s"), "s") == "0.08278 s"
    assert format_display(Q_(2.5e-6, "s")) == "2.5 µs" and format_display(Q_(90, "s")) == "90 s"
    assert format_display(Q_(7, "min")) == "7 min"  # a unit chosen by the caller stays
    assert format_display(Q_(2_621_440, "B")) == "2.621 MB" and format_display(Q_(1.5, "GiB")) == "1.5 GiB"
    assert format_display(Q_(12_345.6, "USD")) == "12,350 USD"
    assert format_display(Q_([1, 2], "ms")) == "1 ms, 2 ms"
    assert (format_display(True), format_display(np.bool_(False))) == ("yes", "no")
    assert [format_display(v) for v in (None, math.nan, "", (), "h100-sxm")] == ["—", "—", "—", "—", "h100-sxm"]
    assert format_display(10176) == "10,176" and format_display((1, 2.345678)) == "1, 2.346"


@pytest.mark.parametrize(
    ("name", "unit", "label"),
    [
        ("wait_probability", None, "Wait probability"),
        ("ttft [ms]", None, "TTFT [ms]"),
        ("tpot_ms", None, "TPOT [ms]"),
        ("tokens_per_s_per_gpu", None, "Tokens/s per GPU"),
        ("max_context", "tokens", "Max context [tokens]"),
        ("kv_bytes_per_token", Q_(1, "B/token").units, "KV bytes per token [B/token]"),
        ("dense_throughput.fp8", None, "Dense throughput (FP8)"),
        ("ttft_interval.low [s]", None, "TTFT interval (low) [s]"),
        ("capacity per device (Napkin Math 10.5)", None, "Capacity per device (Napkin Math 10.5)"),
        ("Already human [ms]", "s", "Already human [ms]"),
    ],
)
def test_human_labels_of_field_names(name, unit, label):
    assert human_label(name, unit) == label


def test_a_human_label_needs_text():
    with pytest.raises(InputError, match="'name'"):
        human_label(3)
