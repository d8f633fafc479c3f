"""Hardening of the serving economics and the CLI's --price: one test per defect, each naming what happened before."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import calculator as c
from calculator import Q_
from calculator.cli import app
from calculator.errors import InputError

runner = CliRunner()


def test_a_cost_curve_of_ten_billion_points_is_refused():
    # points=10**10 asked linspace for 74.5 GiB and raised MemoryError.
    with pytest.raises(InputError, match=r"'points' must be at most 1,000,000"):
        c.cumulative_cost_curve(Q_(2e6, "USD"), Q_(1, "USD/request"), Q_(1, "request/s"), Q_(1, "day"), points=10**10)


def test_piecewise_intervals_of_different_lengths_name_the_arguments():
    # Intervals of 2 unit costs and 3 durations raised numpy's "operands could not be broadcast" ValueError.
    with pytest.raises(InputError, match=r"'cost_per_query' 2 values, 'duration' 3 values, 'arrival_rate' 1 value"):
        c.piecewise_lifetime_cost(
            Q_(2e6, "USD"), Q_([0.001, 0.002], "USD/request"), Q_([1e6, 1, 3], "s"), Q_([1000], "request/s")
        )


def test_size_refuses_a_price_whose_costs_overflow():
    # --price 1e308 exited 0 with "cost_per_month": {"value": Infinity} (invalid JSON) and "inf USD/hour" in notes.
    args = ["size", "llama-3.1-8b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s"]
    result = runner.invoke(app, [*args, "--tpot", "50 ms", "--price", "1e308", "--json"])
    assert result.exit_code == 2 and "'gpu_hour' (the GPU-hour price) must be at most 10,000 USD/hour" in result.output
    with pytest.raises(InputError, match="must be at most 10,000 USD/hour"):  # the library's own check
        c.Costs(Q_(1e308, "USD/hour"))
    plan = runner.invoke(app, [*args, "--tpot", "50 ms", "--price", "10000", "--json"])
    assert plan.exit_code == 0 and json.loads(plan.stdout, parse_constant=pytest.fail)["feasible"]


def test_cost_per_million_tokens_refuses_an_infinite_result():
    # Finite arguments (1e300 GPUs at 1e300 USD/hour over 1e-300 token/s) returned inf USD/megatoken.
    with pytest.raises(
        InputError,
        match=r"cost_per_million_tokens\(\): the arguments overflow the cost per million useful tokens to infinity",
    ):
        c.cost_per_million_tokens(1e300, Q_(1e300, "USD/hour"), Q_(1e-300, "token/s"))


def test_a_sweep_refuses_what_a_call_refuses_an_overflowing_cost():
    # The same arguments swept returned a column holding inf where the call now refuses them.
    from calculator.sweeps import sweep

    with pytest.raises(InputError, match="overflow the cost per million useful tokens to infinity"):
        sweep("cost_per_million_tokens", gpus=[1, 1e300], price_per_gpu_hour=Q_(1e300, "USD/hour"),
              throughput=Q_(1e-300, "token/s"))  # fmt: skip
