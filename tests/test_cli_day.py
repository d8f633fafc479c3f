"""``servecalc day``: a plan file played through a day, as a table, CSV and JSON."""

import io
import json
import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from calculator.cli import _plan_from_json, app
from calculator.dynamics import WINDOW_COLUMNS

runner = CliRunner()

SIZE = ["size", "llama-3.1-8b", "--rate", "20", "--input", "500", "--output", "200", "--ttft", "1 s", "--tpot", "50 ms"]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    result = runner.invoke(app, [*SIZE, "--price", "4", "--json"])
    assert result.exit_code == 0, result.output
    path.write_text(result.stdout)
    return path


def day(plan_file, *args):
    result = runner.invoke(app, ["day", "--plan", str(plan_file), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_table_has_an_hour_a_row_and_the_verdict(plan_file):
    text = day(plan_file, "--demand", "diurnal")
    lines = text.splitlines()
    assert lines[0].startswith("A day in production (fluid mode):") and "met every target" in lines[0]
    assert "TTFT p99 [ms]" in lines[1]
    assert sum(line[:5] in {f"{h:02d}:00" for h in range(24)} for line in lines) == 24


def test_csv_has_the_window_columns_and_the_shapes_mean(plan_file):
    frame = pd.read_csv(io.StringIO(day(plan_file, "--demand", "diurnal", "--format", "csv")))
    assert list(frame.columns) == list(WINDOW_COLUMNS)
    assert len(frame) == 24 * 12  # five-minute windows
    # The diurnal shape peaks at the plan's 20 request/s and averages (1 + 0.3) / 2 of it.
    assert frame["demand_rate"].mean() == pytest.approx(20 * 0.65, rel=1e-9)


def test_a_fixed_fleet_bills_the_plans_gpus_all_day(plan_file):
    plan = _plan_from_json(plan_file)
    frame = pd.read_csv(io.StringIO(day(plan_file, "--demand", "flat", "--autoscaler", "fixed", "--format", "csv")))
    assert (frame["ready"] == plan.replicas).all()
    assert frame["gpu_hours"].sum() == pytest.approx(plan.gpus * 24)
    assert frame["cost"].sum() == pytest.approx(plan.gpus * 24 * 4)  # --price 4 USD per GPU-hour


def test_json_matches_the_windows(plan_file):
    data = json.loads(day(plan_file, "--demand", "spike", "--peak-rate", "30", "--json"))
    windows = pd.DataFrame(data["windows"])
    arrived = windows["demand_rate"] * 300
    assert data["mode"] == "fluid"
    # The spike's first window: the curve's knots five minutes apart, 30/s at 09:00 and 7.5 + 22.5 e^(-300/7200) after.
    assert windows["demand_rate"].max() == pytest.approx((30 + 7.5 + 22.5 * math.exp(-300 / 7200)) / 2, rel=1e-9)
    assert data["attainment"] == pytest.approx((windows["attainment"] * arrived).sum() / arrived.sum())
    assert data["gpu_hours"]["value"] == pytest.approx(windows["gpu_hours"].sum())


def test_a_region_outage_moves_its_demand_to_the_other(plan_file):
    plan = _plan_from_json(plan_file)
    args = ["--demand", "flat", "--autoscaler", "fixed", "--region", "us", "--region", "eu"]
    frame = pd.read_csv(
        io.StringIO(day(plan_file, *args, "--fail", "region:eu@12:00+1h", "--round-trip", "80 ms", "--format", "csv"))
    )
    frame = frame.set_index("start_s")
    per_region = math.ceil(plan.replicas / 2)  # the plan's replicas split over the two regions
    assert frame.loc[6 * 3600, "ready"] == 2 * per_region
    assert frame.loc[12.5 * 3600, "ready"] == per_region  # eu down
    assert frame.loc[12.5 * 3600, "served"] == pytest.approx(20 * 300, rel=1e-6)  # us serves it all
    assert frame.loc[12.5 * 3600, "ttft_p99_s"] > frame.loc[6 * 3600, "ttft_p99_s"] + 0.07  # the 80 ms round trip


def test_a_demand_file(plan_file, tmp_path):
    path = tmp_path / "demand.csv"
    pd.DataFrame({"time": [0, 1800, 3600], "rate": [5, 15, 5]}).to_csv(path, index=False)
    frame = pd.read_csv(io.StringIO(day(plan_file, "--demand", str(path), "--format", "csv")))
    assert len(frame) == 12
    assert frame["demand_rate"].sum() * 300 == pytest.approx(3600 * 10)  # a triangle averaging 10/s over the hour


def test_the_request_mode_or_a_clear_error(plan_file):
    import calculator.simulation as simulation

    args = ["day", "--plan", str(plan_file), "--demand", "flat", "--duration", "10 min", "--mode", "requests"]
    result = runner.invoke(app, [*args, "--format", "csv"])
    if hasattr(simulation, "simulate_day"):
        assert result.exit_code == 0, result.output
        assert list(pd.read_csv(io.StringIO(result.stdout)).columns)[: len(WINDOW_COLUMNS)] == list(WINDOW_COLUMNS)
    else:
        assert result.exit_code == 2 and "request-level mode" in result.output


def test_the_scale_down_window_reaches_the_autoscaler(plan_file):
    # The CLI's day is the library's, built here from the CLI's documented defaults, with the window given; the
    # diurnal day peaks at 300 request/s, so the fleet grows and shrinks and a longer window costs more.
    from calculator import Q_
    from calculator.dynamics import Admission, RetryPolicy, day_scenario, demand_shape, plan_autoscaler, run_day

    plan = _plan_from_json(plan_file)
    costs = []
    for window in ("0 s", "300 s", "20 min"):
        scaler = plan_autoscaler(plan, "reactive", "utilization", interval=Q_(30, "s"), cooldown=Q_(5, "min"),
                                 lead_time=Q_(10, "min"), warm_pool=0, stabilization=Q_(window))  # fmt: skip
        scenario = day_scenario(plan, demand_shape("diurnal", Q_(300, "request/s")), autoscaler=scaler,
                                retry=RetryPolicy(timeout=Q_(30, "s"), max_attempts=3), admission=Admission(),
                                storage_bandwidth=Q_(1, "GB/s"), window=Q_(5, "min"))  # fmt: skip
        expected = run_day(plan, scenario).windows
        args = ("--demand", "diurnal", "--peak-rate", "300", "--scale-down-window", window, "--format", "csv")
        frame = pd.read_csv(io.StringIO(day(plan_file, *args)))
        assert frame["ready"].to_numpy() == pytest.approx(expected["ready"].to_numpy())
        costs.append(frame["cost"].sum())
    assert costs[0] < costs[1] < costs[2]  # the fleet held longer after each fall


@pytest.mark.parametrize(
    ("args", "says"),
    [
        # a day of 5 s steps is 17,280; a 10,000-day run is 172,800,000, over the 2,000,000 the fluid mode takes
        (["--duration", "10000d"], ["172,800,000 steps", "--duration at most", "--step"]),
        # a window of 1e9 s holds 2e8 steps by itself: only a shorter window (or a longer step) helps
        (["--window", "1e9 s"], ["--window at most 1e+07 s", "--step"]),
        (["--window", "1 ns"], ["--window (1e-09 s) must be at least", "--step (5 s)"]),
        (["--step", "1 min", "--mode", "requests"], ["--step is the fluid mode's"]),
    ],
)
def test_a_run_too_fine_or_too_long_says_which_flag_to_change(plan_file, args, says):
    result = runner.invoke(app, ["day", "--plan", str(plan_file), "--demand", "diurnal", *args])
    assert result.exit_code != 0
    assert all(part in result.output for part in says), result.output
    assert "argument '" not in result.output  # the API's names are the flags here


def test_a_longer_step_runs_a_week_in_fewer_steps_with_the_same_demand(plan_file):
    fine = pd.read_csv(io.StringIO(day(plan_file, "--demand", "weekly", "--format", "csv")))
    coarse = pd.read_csv(io.StringIO(day(plan_file, "--demand", "weekly", "--format", "csv", "--step", "60 s")))
    assert len(fine) == len(coarse) == 7 * 24 * 12  # five-minute windows either way
    assert coarse["demand_rate"].to_numpy() == pytest.approx(fine["demand_rate"].to_numpy(), rel=1e-9)


def test_a_failure_written_without_its_target_is_the_first_region_or_one_replica(plan_file):
    # The issue's own spelling, --fail region@14:00: the first --region given; replicas@14:00 is one replica.
    def frame(*args):
        return pd.read_csv(io.StringIO(day(plan_file, "--demand", "diurnal", "--format", "csv", *args)))

    regions = ["--region", "us", "--region", "eu"]
    assert frame(*regions, "--fail", "region@14:00+2h").equals(frame(*regions, "--fail", "region:us@14:00+2h"))
    assert frame("--fail", "replicas@14:00").equals(frame("--fail", "replicas:1@14:00"))
    refused = runner.invoke(app, ["day", "--plan", str(plan_file), "--demand", "diurnal", "--fail", "region@14:00"])
    assert refused.exit_code != 0 and "give --region" in refused.output
