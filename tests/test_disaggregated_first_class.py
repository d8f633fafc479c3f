"""Disaggregated plans carry the predictor's error interval, and --verify says why it cannot check them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from calculator import Q_, SearchSpace, Targets, Workload
from calculator.cli import app
from calculator.fleet import size_disaggregated
from calculator.uncertainty import prediction_interval


@pytest.fixture(scope="module")
def plan():
    workload, targets = Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms"))
    sized = size_disaggregated("llama-3.1-70b", workload, targets, SearchSpace("h100-sxm", "fp8"), engine="vllm")
    assert sized.feasible and sized.prefill["accelerator"] == sized.decode["accelerator"] == "h100-sxm"
    return sized


def test_the_intervals_scale_each_pools_prediction_by_its_80_percent_factors(plan):
    # The packaged factors for vLLM on H100s with measured kernels (the colocated plan's table).
    bands = prediction_interval("vllm", "h100-sxm", True)
    tpot, handoff, ttft = plan.tpot.m_as("s"), plan.kv_handoff.m_as("s"), plan.ttft.m_as("s")
    low, high = (end.m_as("s") for end in plan.tpot_interval)
    assert low == pytest.approx(tpot * bands["tpot"][0]) and high == pytest.approx(tpot * bands["tpot"][1])
    # TTFT = prefill (with its wait) + handoff + half a decode step; the handoff is a transfer, kept as is.
    prefill = ttft - handoff - tpot / 2
    for end, index in zip(plan.ttft_interval, (0, 1), strict=True):
        expected = prefill * bands["ttft"][index] + handoff + tpot / 2 * bands["tpot"][index]
        assert end.m_as("s") == pytest.approx(expected)
    assert plan.ttft_interval[0] < plan.ttft < plan.ttft_interval[1]
    assert plan.tpot_interval[0] < plan.tpot < plan.tpot_interval[1]


def test_an_infeasible_plan_has_no_interval():
    workload, targets = Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(1, "ms"))
    sized = size_disaggregated("llama-3.1-70b", workload, targets, SearchSpace("h100-sxm", "fp8"), engine="vllm")
    assert not sized.feasible and sized.ttft_interval is None and sized.tpot_interval is None


def test_verify_with_disaggregated_says_the_simulator_has_no_pools():
    arguments = ["size", "llama-3.1-8b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s"]
    result = CliRunner().invoke(app, [*arguments, "--tpot", "50 ms", "--disaggregated", "--verify"])
    assert result.exit_code == 2, result.output
    assert "simulator" in result.output and "colocated replicas only" in result.output
