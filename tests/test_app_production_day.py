"""The "A day in production" page (issue 56, item 4): the library's day for the page's inputs, its plan sources,
a failure, the request-level button and hostile links (the suite-wide hostile-link test runs it too)."""

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from test_app import ROOT, assert_clean, charts, metric, open_page, open_tab, rendered, trace, values

from calculator import Q_
from calculator.dynamics import (
    Admission,
    Failure,
    RetryPolicy,
    day_scenario,
    demand_shape,
    plan_autoscaler,
    run_day,
)
from calculator.fleet import FleetPlan, SearchSpace, Targets, Workload, plan_summary, size_fleet
from calculator.results import format_display


def page_plan(rate: float = 10.0):
    """The page's default plan, sized here from the inputs the page documents (the fleet sizer's defaults)."""
    return size_fleet(
        "llama-3.1-70b",
        Workload(Q_(rate, "request/s"), 1024, 256),
        Targets(Q_(1000, "ms"), Q_(50, "ms")),
        SearchSpace(("h100-sxm", "h200-sxm"), ("fp8",)),
    )


def library_day(plan, failures=(), kind="reactive"):
    """The day the page's default inputs describe, built from the library's parts by hand."""
    return run_day(plan, library_scenario(plan, failures, kind))


def library_scenario(plan, failures=(), kind="reactive", **extra):
    """The scenario of the page's default inputs (``extra``: more of :class:`Scenario`'s keywords)."""
    scaler = plan_autoscaler(
        plan, kind, "utilization", warm_pool=0, interval=Q_(30, "s"), cooldown=Q_(300, "s"), lead_time=Q_(10, "min")
    )
    return day_scenario(
        plan,
        demand_shape("diurnal", plan.workload.arrival_rate),
        autoscaler=scaler,
        retry=RetryPolicy(timeout=Q_(30, "s"), max_attempts=3),
        admission=Admission(),
        failures=failures,
        storage_bandwidth=Q_(1, "GB/s"),
        window=Q_(5, "min"),
        **extra,
    )


def shown_metrics(day) -> dict:
    """The five metrics as the page must write them: the library's values through its display formatter."""
    below = day.hours_missing
    return {
        "Attainment": f"{100 * day.attainment:.2f} %",
        "Time below goal": format_display(below, "min" if below.m_as("hour") < 1 else "hour", 3),
        "Peak replicas": format_display(day.peak_replicas, digits=4),
        "GPU-hours": format_display(day.gpu_hours, "hour", 4),
        "Cost": format_display(day.cost, "USD", 4),
    }


def test_the_page_plays_the_default_plan_through_the_librarys_day():
    app = open_page("production_day")
    plan = page_plan()
    day = library_day(plan)
    assert {m.label: m.value for m in app.metric} == shown_metrics(day)
    assert any(plan_summary(plan) in rendered(c.value) for c in app.caption)
    # The first tab's chart is day_figure's: the demand trace is the library's windows, request/s.
    [load] = charts(app)
    assert values(trace(load, "demand")["y"]) == pytest.approx(day.windows["demand_rate"].to_numpy())
    # The latency tab draws the plan's targets: TTFT 1,000 ms, TPOT 50 ms (the inputs above).
    ttft, tpot = charts(open_tab(app, "Latency"))
    assert values(trace(ttft, "target (mean)")["y"]) == pytest.approx([1000, 1000])
    assert values(trace(tpot, "target (mean)")["y"]) == pytest.approx([50, 50])
    windows = open_tab(app, "Windows")
    assert len(windows.dataframe[0].value) == 288  # a day of 5-minute windows: 24 x 12


def test_a_failure_moves_attainment_as_the_library_says():
    # Two of the default plan's three replicas lost at 14:00, near the 16:00 peak, for two hours.
    app = open_page("production_day", fail="replicas", fail_count="2", fail_at="14:00", fail_hours="2")
    plan = page_plan()
    lost = library_day(plan, (Failure("replica", Q_(14, "hour"), Q_(2, "hour"), 2),))
    calm = library_day(plan)
    assert {m.label: m.value for m in app.metric} == shown_metrics(lost)
    assert lost.attainment < calm.attainment  # the requests the lost replicas held failed
    assert metric(app, "Attainment") != metric(open_page("production_day"), "Attainment")
    assert any("in windows below" in w.value for w in app.warning)  # windows missed: the verdict is a warning


def test_the_fleet_sizers_plan_is_played_through_its_link():
    app = open_page("fleet_sizer", rate="20")
    [link] = [p for p in app.get("page_link") if p.proto.page == "production_day"]
    assert link.proto.query_string == "plan=sizer"
    app.switch_page("app_pages/production_day.py")
    app.query_params["plan"] = "sizer"
    app.run()
    assert_clean(app)
    plan = page_plan(20.0)  # the sizer's inputs: its defaults at 20 request/s
    assert any(plan_summary(plan) in rendered(c.value) for c in app.caption)
    assert metric(app, "Attainment") == shown_metrics(library_day(plan))["Attainment"]


def test_without_a_sizer_plan_in_the_session_the_default_is_played_and_said():
    app = open_page("production_day", plan="sizer")
    assert any("No fleet sizer plan in this session" in w.value for w in app.warning)
    assert any(plan_summary(page_plan()) in rendered(c.value) for c in app.caption)


def test_an_uploaded_plan_is_kept_size_limited_and_read_with_the_clis_reader(tmp_path):
    from app_pages import _common as ui
    from calculator.errors import InputError
    from calculator.fleet.plan import MAX_PLAN_FILE_BYTES

    plan = page_plan()
    data = json.dumps(plan.to_json_dict()).encode()
    with pytest.raises(InputError, match="the plan file: 11 bytes; the limit is 10 bytes"):
        ui.kept_upload(b"x" * 11, 10, "the plan file", "plan", ".json")
    path = ui.kept_upload(data, MAX_PLAN_FILE_BYTES, "the plan file", "plan", ".json")
    assert FleetPlan.from_json_file(path).to_json_dict() == plan.to_json_dict()
    with pytest.raises(InputError, match="does not hold a plan written by 'servecalc size --json'"):
        FleetPlan.from_json_file(ui.kept_upload(b"{not json", 100, "the plan file", "plan", ".json"))


def test_a_bad_failure_time_is_the_librarys_sentence_and_hostile_text_stays_text():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.switch_page("app_pages/production_day.py")
    app.query_params.update({"fail": "replicas", "fail_at": "[x](y)"})
    app.run()
    assert not app.exception
    [error] = [e.value for e in app.error]
    assert rendered(error).startswith("the failure time must read HH:MM") and "](" not in error
    assert not app.metric


def test_a_region_failure_without_regions_is_refused_in_words_and_with_them_fails_over():
    app = open_page("production_day", fail="region")
    assert any("Name the regions above" in w.value for w in app.warning)
    assert metric(app, "Attainment") == metric(open_page("production_day"), "Attainment")  # none played
    two = open_page("production_day", fail="region", regions="us,eu", fail_region="eu", fail_at="14:00")
    assert two.selectbox(key="day.fail_region").value == "eu"
    assert metric(two, "Attainment") != metric(open_page("production_day", regions="us,eu"), "Attainment")


def test_the_request_level_button_runs_the_librarys_request_mode():
    # A quarter of an hour of the default day (the diurnal curve from midnight), one seed: the table's rows are the
    # library's fluid and request-level days of the same scenario, run here.
    app = open_tab(open_page("production_day", req_hours="0.25"), "Request by request")
    app.button(key="day.run_requests").click().run()
    assert_clean(app)
    plan = page_plan()
    scenario = library_scenario(plan, duration=Q_(0.25, "hour"))
    days = {mode: run_day(plan, scenario, mode=mode) for mode in ("fluid", "requests")}
    table = app.dataframe[0].value
    assert list(table["Mode"]) == ["fluid", "requests"]
    for row, day in zip(table.to_dict("records"), days.values(), strict=True):
        assert row["Attainment [%]"] == pytest.approx(100 * day.attainment)
        assert row["Cost [USD]"] == pytest.approx(day.cost.m)


def test_the_request_level_button_refuses_a_run_beyond_the_pages_cap():
    # At a peak of 1,000 request/s the diurnal day's first 4 hours (from midnight, between its low and its
    # mean) hold far more than the page's 200,000 requests: the page says so and runs nothing.
    from app_pages.production_day import MAX_PAGE_REQUESTS

    app = open_tab(open_page("production_day", peak="1000", req_hours="4"), "Request by request")
    app.button(key="day.run_requests").click().run()
    assert not app.exception and not app.dataframe[1:]
    scenario = library_scenario(page_plan(), duration=Q_(4, "hour"))
    expected = demand_shape("diurnal", Q_(1000, "request/s")).mean_between(np.array([0.0]), np.array([14_400.0]))[0]
    expected *= 14_400
    assert expected > MAX_PAGE_REQUESTS and scenario.seconds == 14_400
    [error] = app.error
    assert rendered(error.value).startswith(f"The request-level run would simulate about {expected:,.0f} requests")
    assert f"at most {MAX_PAGE_REQUESTS:,}" in error.value
