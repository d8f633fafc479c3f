"""The request and output rates' 80 % ranges of a benchmark prediction, from its TTFT and TPOT intervals."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from calculator.cli import app
from calculator.performance import predict_benchmark


def ratios(prediction):
    """The ends of each interval over its value (TTFT, TPOT, request rate, output rate)."""
    out = {}
    for name in ("ttft", "tpot", "throughput", "output_throughput"):
        value = getattr(prediction, name)
        out[name] = tuple(np.asarray((end / value).m_as("")) for end in getattr(prediction, f"{name}_interval"))
    return out


@pytest.mark.parametrize(
    ("model", "gpu", "precision", "engine"),
    [("llama-3.1-8b", "h100-sxm", "bf16", "vllm"), ("qwen3-32b", "h200-sxm", "fp8", "sglang"),
     ("llama-3.1-70b", "mi300x", "fp8", "sglang"), ("llama-3.1-70b", "b200", "fp4", "trtllm")],
)  # fmt: skip
def test_the_rates_range_lies_between_what_each_interval_alone_allows(model, gpu, precision, engine):
    clients = np.array([1, 16, 64, 256, 1024])
    p = predict_benchmark(model, gpu, precision, 2 if "70b" in model else 1, 2048, 512, clients, engine)
    r = ratios(p)
    for rate in ("throughput", "output_throughput"):
        low, high = r[rate]
        assert np.all(low <= 1) and np.all(high >= 1)
        # The cycle mixes a first-token part and a decoding part: its slow end is between the two slow ends alone.
        slowest = np.maximum(r["ttft"][1], r["tpot"][1])
        fastest = np.minimum(r["ttft"][0], r["tpot"][0])
        assert np.all(low >= 1 / slowest - 1e-12) and np.all(low <= 1 / np.minimum(r["ttft"][1], r["tpot"][1]) + 1e-12)
        assert np.all(high <= 1 / fastest + 1e-12) and np.all(
            high >= 1 / np.maximum(r["ttft"][0], r["tpot"][0]) - 1e-12
        )
    assert np.allclose(r["throughput"][0], r["output_throughput"][0]) and np.allclose(
        r["throughput"][1], r["output_throughput"][1]
    )


def test_one_output_token_makes_the_cycle_all_first_token():
    p = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 1, 32, "vllm")
    r = ratios(p)
    assert float(r["throughput"][0]) == pytest.approx(1 / float(r["ttft"][1]), rel=1e-9)
    assert float(r["throughput"][1]) == pytest.approx(1 / float(r["ttft"][0]), rel=1e-9)


def test_long_outputs_make_the_rate_follow_the_tpot_interval():
    p = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 128, 4096, 8, "vllm")
    r = ratios(p)
    assert float(r["output_throughput"][0]) == pytest.approx(1 / float(r["tpot"][1]), rel=0.02)
    assert float(r["output_throughput"][1]) == pytest.approx(1 / float(r["tpot"][0]), rel=0.02)


def test_the_cli_prints_the_output_rates_range():
    args = ["predict", "llama-3.1-8b", "--accelerator", "h100-sxm", "--precision", "bf16", "--input", "1024",
            "--output", "256", "-c", "64", "--engine", "vllm"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "output tokens/s (range)" in result.output
    expected = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, 64, "vllm")
    low, high = (f"{end.m_as('token/s'):,.0f}" for end in expected.output_throughput_interval)
    assert f"({low}-{high})" in result.output
    shown = CliRunner().invoke(app, [*args, "--format", "csv"])
    assert "output_throughput_interval.low [token/s]" in shown.output
