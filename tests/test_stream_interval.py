"""A streamed run that sends a response every few iterations (TensorRT-LLM's ``stream_interval``).

TensorRT-LLM builds a streamed request's response (and its server detokenizes it) once in ``stream_interval``
iterations; its guide sets 2 to 4 at large batches, saying that closes the gap to a run without streaming
(``hardware_registry.yaml``: trtllm-stream-interval). The response's share of the fitted streamed per-sequence cost
is what a run without streaming does not pay (its ``offline_sequence_overhead``).
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from calculator import Q_
from calculator.cli import app
from calculator.errors import InputError
from calculator.performance import engine_profile, predict_benchmark
from calculator.simulation import SimulationSetup, Traffic, simulate
from calculator.uncertainty import prediction_interval

LLAMA = ("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 1024)


def test_a_response_every_n_iterations_pays_its_share_of_the_fitted_cost_once_in_n():
    streamed = engine_profile("trtllm")
    fitted = streamed.efficiency.sequence_overhead.m_as("us")  # 32.6 us, fitted on streamed H100 benchmarks
    loop = streamed.offline_sequence_overhead.m_as("us")  # 11.3 us, cited: the loop's work without responses
    for n in (2, 4, 20):
        every = streamed.with_stream_interval(n)
        # the loop's own cost every iteration, the response's (fitted minus the loop's) once in n
        assert every.efficiency.sequence_overhead.m_as("us") == pytest.approx(loop + (fitted - loop) / n)
        assert every.efficiency.overlap == streamed.efficiency.overlap  # added, as the streamed runs showed
        assert every.efficiency.step_overhead == streamed.efficiency.step_overhead
        assert every.stream_interval == n and every.streaming
    assert streamed.with_stream_interval(1) is streamed
    four = streamed.with_stream_interval(4.0)
    assert four.with_stream_interval(4) is four
    # a run without streaming has no interval: it pays the loop's cost, hidden as before
    assert four.for_streaming(False) == streamed.for_streaming(False)
    costs = streamed.with_gpu_time_scale("b200-sxm", 1.2).with_stream_interval(4).efficiency_for("b200-sxm")
    assert costs.gpu_time_scale == 1.2 and costs.sequence_overhead == four.efficiency.sequence_overhead
    later = four.with_gpu_time_scale("b200-sxm", 1.2).efficiency_for("b200-sxm")  # the other order
    assert later.sequence_overhead == four.efficiency.sequence_overhead and later.gpu_time_scale == 1.2
    # a calibration's cost at or below the loop's own has no response share to spread: left as it is
    low = streamed.replace(efficiency=streamed.efficiency.replace(sequence_overhead=Q_(5, "us")))
    assert low.with_stream_interval(4).efficiency.sequence_overhead == Q_(5, "us")


def test_the_prediction_moves_from_the_streamed_run_toward_the_one_without_streaming():
    base = predict_benchmark(*LLAMA, 256, "trtllm")
    runs = {n: predict_benchmark(*LLAMA, 256, "trtllm", stream_interval=n) for n in (1, 2, 4, 20)}
    offline = predict_benchmark(*LLAMA, 256, "trtllm", streaming=False)
    assert runs[1].tpot == base.tpot and runs[1].streaming_note == ""
    tpot = [runs[n].tpot.m for n in (1, 2, 4, 20)]
    assert tpot == sorted(tpot, reverse=True) and tpot[-1] > offline.tpot.m
    low_factor = prediction_interval("trtllm", "h100-sxm", True)["tpot"][0]
    for n in (2, 4, 20):
        # the guide: an interval of 2 to 4 closes the gap, so the interval's fast end is the offline run's low end
        assert runs[n].tpot_interval[0].m == pytest.approx(offline.tpot.m * low_factor, rel=1e-9)
        assert offline.tpot.m < runs[n].tpot.m
        assert runs[n].output_throughput_interval[1].m >= offline.output_throughput.m
        assert f"Streamed every {n} iterations (trtllm stream_interval {n})" in runs[n].streaming_note
    assert base.tpot_interval[0].m > offline.tpot.m  # at an interval of 1 the fast end stays the streamed run's


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_engines_that_build_responses_outside_their_loop_keep_their_costs(engine):
    every = predict_benchmark(*LLAMA, [8, 256], engine, stream_interval=4)
    each = predict_benchmark(*LLAMA, [8, 256], engine)
    np.testing.assert_array_equal(every.tpot.m, each.tpot.m)
    np.testing.assert_array_equal(every.tpot_interval[0].m, each.tpot_interval[0].m)
    assert "changes none of its costs" in every.streaming_note


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda p: p.with_stream_interval(0),
            r"with_stream_interval\(\): argument 'stream_interval' must be an integer >= 1",
        ),
        (lambda p: p.with_stream_interval(2.5), "argument 'stream_interval' must be a"),
        (lambda p: p.with_stream_interval(True), "argument 'stream_interval'"),
        (lambda p: p.with_stream_interval(float("nan")), "argument 'stream_interval'"),
        (lambda p: p.with_stream_interval(10**6), "argument 'stream_interval' must be at most 1,000"),
        (lambda p: p.with_stream_interval([2, 4]), "argument 'stream_interval' must be one whole number"),
        (lambda p: p.replace(stream_interval=0), "EngineProfile: 'stream_interval' must be a whole number"),
        (lambda p: p.for_streaming(False).with_stream_interval(4), "a stream interval applies to a streamed run"),
        (lambda p: p.with_stream_interval(4).with_stream_interval(2), "already streams every 4 iterations"),
    ],
)
def test_bad_intervals_are_refused_in_words(call, message):
    with pytest.raises(InputError, match=message):
        call(engine_profile("trtllm"))


def test_costs_given_are_priced_as_given_and_said_so():
    given = engine_profile("trtllm").efficiency_for("h100-sxm")
    every = predict_benchmark(*LLAMA, 256, "trtllm", efficiency=given, stream_interval=4)
    each = predict_benchmark(*LLAMA, 256, "trtllm", efficiency=given)
    assert every.tpot == each.tpot and every.tpot_interval == each.tpot_interval
    assert every.streaming_note == (
        "Streamed every 4 iterations (trtllm): priced with the costs given (efficiency), not the engine's own"
    )


def test_predict_benchmark_names_its_argument():
    with pytest.raises(InputError, match=r"predict_benchmark\(\): argument 'stream_interval' must be"):
        predict_benchmark(*LLAMA, 8, "trtllm", stream_interval=-1)
    with pytest.raises(InputError, match=r"predict_benchmark\(\): a run without streaming sends no response"):
        predict_benchmark(*LLAMA, 8, "trtllm", streaming=False, stream_interval=4)


def test_the_cli_prints_the_librarys_row_and_refuses_a_bad_interval():
    runner = CliRunner()
    args = ["predict", "llama-3.1-8b", "-a", "h100-sxm", "-p", "bf16", "--input", "1024", "--output", "1024",
            "--concurrency", "256", "--engine", "trtllm", "--stream-interval", "4", "--format", "csv"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    fields = pd.read_csv(io.StringIO(result.output)).iloc[0]
    expected = predict_benchmark(*LLAMA, 256, "trtllm", stream_interval=4)
    assert float(fields["tpot [ms]"]) == pytest.approx(expected.tpot.m_as("ms"), rel=1e-6)
    assert fields["stream_interval"] == 4 and "Streamed every 4 iterations" in fields["streaming_note"]
    bad = runner.invoke(app, [*args[:-4], "--stream-interval", "0"])
    assert bad.exit_code == 2 and "--stream-interval must be an integer >= 1" in bad.output
    offline = runner.invoke(app, [*args[:-4], "--stream-interval", "4", "--no-streaming"])
    assert offline.exit_code == 2 and "--stream-interval applies to a streamed run; --no-streaming" in offline.output
    default = pd.read_csv(io.StringIO(runner.invoke(app, [*args[:-4], "--format", "csv"]).output)).iloc[0]
    assert default["stream_interval"] == 1


def test_the_simulator_runs_the_same_costs_as_the_predictor():
    traffic = Traffic(clients=256, input_tokens=1024, output_tokens=256, requests=1536, input_cv=0.05, output_cv=0.05)
    simulated = {}
    for n in (1, 4):
        run = simulate(SimulationSetup(*LLAMA[:3], engine="trtllm", stream_interval=n), traffic, seeds=1)
        simulated[n] = run.summary.set_index(["metric", "statistic"]).value["tpot", "mean"]
    every = predict_benchmark(*LLAMA[:5], 256, 256, "trtllm", stream_interval=4, length_cv=0.05)
    each = predict_benchmark(*LLAMA[:5], 256, 256, "trtllm", length_cv=0.05)
    assert simulated[4] == pytest.approx(every.tpot.m, rel=0.10)
    # the simulator's own saving from the interval is the predictor's, within a fifth of it (about 9 %)
    assert 1 - simulated[4] / simulated[1] == pytest.approx(1 - every.tpot.m / each.tpot.m, rel=0.2)
    assert SimulationSetup(*LLAMA[:3], stream_interval=np.int64(4)).stream_interval == 4
    assert type(SimulationSetup(*LLAMA[:3], stream_interval=4.0).stream_interval) is int
    with pytest.raises(InputError, match=r"SimulationSetup\(\): argument 'stream_interval' must be"):
        SimulationSetup(*LLAMA[:3], engine="trtllm", stream_interval=0)
    with pytest.raises(InputError, match="applies to a streamed run"):
        SimulationSetup(*LLAMA[:3], engine="trtllm", streaming=False, stream_interval=2)
