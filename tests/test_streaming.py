"""Streamed and offline runs: what returning each output whole changes for each engine (``for_streaming``).

TensorRT-LLM's executor builds a response for a streaming request every iteration and none for an unfinished
request otherwise, and its overlap loop updates the previous batch while the GPU runs the next
(``hardware_registry.yaml``: trtllm-executor-source, trtllm-pr-11983). vLLM and SGLang build their responses in
other processes, so their costs do not move.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from calculator import Q_
from calculator.cli import app
from calculator.errors import InputError
from calculator.performance import engine_profile, predict_benchmark
from calculator.uncertainty import prediction_interval

GPT_OSS = ("gpt-oss-20b", "b200", "fp4", 1, 1024, 1024)


def test_tensorrt_llm_without_streaming_pays_its_cited_sampler_cost_hidden_behind_the_gpu():
    streamed = engine_profile("trtllm")
    offline = streamed.for_streaming(False)
    # the registry's figure: #11983's 11.3 ms an iteration of TorchSampler host work at a batch of 1,000
    assert offline.efficiency.sequence_overhead.m_as("us") == pytest.approx(11.3)
    assert streamed.efficiency.sequence_overhead.m_as("us") > 30  # the streamed fit, 32.6 us
    assert offline.efficiency.overlap and not streamed.efficiency.overlap
    assert offline.efficiency.step_overhead == streamed.efficiency.step_overhead
    assert offline.prices_offline_cost(offline.efficiency) and not streamed.prices_offline_cost(streamed.efficiency)
    assert "#11983" in offline.citations["offline_sequence_overhead"]
    assert not offline.streaming and streamed.for_streaming(True) is streamed
    assert streamed.for_streaming(np.False_) == offline
    with pytest.raises(InputError, match=r"for_streaming\(\): the engine profile was made for a run without"):
        offline.for_streaming(True)
    # a release first, then the run: the other order would leave the release's scheduling stale
    assert streamed.for_release("1.2").for_streaming(False).release == "1.2"
    with pytest.raises(InputError, match=r"for_release\(\): .* take the release first"):
        offline.for_release("1.2")
    # costs on a particular GPU (a calibration's GPU factor) take the offline costs too
    scaled = streamed.with_gpu_time_scale("b200-sxm", 1.2).for_streaming(False).efficiency_for("b200-sxm")
    assert scaled.gpu_time_scale == 1.2 and scaled.overlap and scaled.sequence_overhead == Q_(11.3, "us")


@pytest.mark.parametrize("engine", ["vllm", "sglang", "generic"])
def test_engines_that_answer_outside_their_loop_keep_their_costs(engine):
    profile = engine_profile(engine)
    offline = profile.for_streaming(False)
    assert offline.efficiency == profile.efficiency and not offline.streaming
    assert "apply unchanged" in offline.streaming_note()
    a = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, [8, 128], engine)
    b = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, [8, 128], engine, streaming=False)
    np.testing.assert_allclose(a.tpot.m, b.tpot.m)
    np.testing.assert_allclose(a.tpot_interval[1].m, b.tpot_interval[1].m)
    assert b.streaming_note and not a.streaming_note


def test_an_offline_iteration_is_the_longer_of_the_gpu_work_and_the_loop():
    offline = engine_profile("trtllm").for_streaming(False)
    eff = offline.efficiency
    clients = np.array([16, 256, 2048])
    run = predict_benchmark(*GPT_OSS, clients, offline)
    gpu = predict_benchmark(*GPT_OSS, clients, offline, efficiency=eff.replace(step_overhead=Q_(0, "s"),
                            sequence_overhead=Q_(0, "s")))  # fmt: skip
    loop = eff.step_overhead.m_as("s") + run.active_batch * eff.sequence_overhead.m_as("s")
    # the decode step: the GPU's work where it is longer, the loop's host work where that is
    np.testing.assert_allclose(run.decode_step_time.m_as("s"), np.maximum(gpu.decode_step_time.m_as("s"), loop),
                               rtol=1e-9)  # fmt: skip
    # both regimes occur: the GPU's at 16 sequences, the loop's at 2,048
    assert gpu.decode_step_time.m_as("s")[0] > loop[0] and loop[-1] > gpu.decode_step_time.m_as("s")[-1]


def test_offline_is_faster_than_streamed_and_its_range_keeps_the_costs_added():
    clients = np.array([64, 2048])
    streamed = predict_benchmark(*GPT_OSS, clients, "trtllm")
    offline = predict_benchmark(*GPT_OSS, clients, "trtllm", streaming=False)
    assert np.all(offline.output_throughput.m > streamed.output_throughput.m)
    # at 2,048 sequences the streamed cost is 67 ms an iteration, the offline one 23 ms and hidden
    assert offline.output_throughput.m[-1] > 2 * streamed.output_throughput.m[-1]
    # the high end of the TPOT holds the same run with the loop's costs added (as the streamed benchmarks show them)
    eff = engine_profile("trtllm").for_streaming(False).efficiency
    added = predict_benchmark(*GPT_OSS, clients, "trtllm", efficiency=eff.replace(overlap=False), streaming=False)
    assert np.all(added.tpot.m > offline.tpot.m)
    # the high ends are the added run at the band's high factors (the band of a GPU with measured kernels)
    bands = prediction_interval("trtllm", "b200-sxm", True, None, False)
    for name in ("ttft", "tpot"):
        np.testing.assert_allclose(getattr(offline, f"{name}_interval")[1].m, getattr(added, name).m * bands[name][1])
        np.testing.assert_allclose(getattr(offline, f"{name}_interval")[0].m, getattr(offline, name).m * bands[name][0])
    for value, (low, high) in ((offline.output_throughput, offline.output_throughput_interval),):
        assert np.all(low.m < value.m) and np.all(value.m < high.m)
        assert np.all(low.m <= added.output_throughput.m)
    assert "11.3 us" in offline.caveats()[-1] and "hidden behind the GPU" in offline.caveats()[-1]
    # no extrapolation note: the offline cost was read at a batch of 1,000, not fitted on 224
    assert not offline.batch_note and streamed.batch_note
    assert not offline.streaming and streamed.streaming
    # costs given replace the profile's, and the result says so (and keeps the fitted batch's low end)
    given = predict_benchmark(*GPT_OSS, clients, "trtllm", efficiency=engine_profile("trtllm").efficiency,
                              streaming=False)  # fmt: skip
    np.testing.assert_allclose(given.tpot.m, streamed.tpot.m)
    np.testing.assert_allclose(given.tpot_interval[0].m, streamed.tpot_interval[0].m)
    assert "costs given" in given.streaming_note and given.batch_note


def test_streaming_must_be_true_or_false():
    with pytest.raises(InputError, match=r"predict_benchmark\(\): argument 'streaming' must be True or False"):
        predict_benchmark(*GPT_OSS, 16, "trtllm", streaming="no")


def test_the_cli_prices_a_run_without_streaming():
    runner = CliRunner()
    args = ["predict", "gpt-oss-20b", "-a", "b200", "--precision", "fp4", "--input", "1024", "--output", "1024",
            "-c", "2048", "--engine", "trtllm"]  # fmt: skip
    streamed = runner.invoke(app, [*args, "--format", "csv"])
    offline = runner.invoke(app, [*args, "--no-streaming", "--format", "csv"])
    assert streamed.exit_code == 0 and offline.exit_code == 0, offline.output
    header = offline.output.splitlines()[0].split(",")
    row = dict(zip(header, offline.output.splitlines()[1].split(","), strict=False))
    assert row["streaming"] == "False"
    expected = predict_benchmark(*GPT_OSS, 2048, "trtllm", streaming=False)
    assert float(row["output_throughput [token/s]"]) == pytest.approx(expected.output_throughput.m, rel=1e-6)
    table = runner.invoke(app, [*args, "--no-streaming"])
    assert "Without streaming (trtllm)" in table.output


def test_the_simulator_runs_the_offline_mechanism_as_the_predictor_prices_it():
    from calculator.simulation import SimulationSetup, Traffic, simulate

    # gpt-oss-20b at 2,048 clients, where the loop's host work is as long as the GPU's: hidden and added differ by
    # a third of the rate, so a simulator that added them would miss the predictor by far more than 10 %
    args = ("gpt-oss-20b", "b200-sxm", "fp4", 1)
    traffic = Traffic(clients=2048, input_tokens=1024, output_tokens=256, requests=4096, input_cv=0.1, output_cv=0.1)
    offline = simulate(SimulationSetup(*args, engine="trtllm", streaming=False), traffic)
    predicted = predict_benchmark(*args, 1024, 256, 2048, "trtllm", length_cv=0.1, streaming=False)
    eff = engine_profile("trtllm").for_streaming(False).efficiency
    added = predict_benchmark(*args, 1024, 256, 2048, "trtllm", length_cv=0.1, efficiency=eff.replace(overlap=False))
    assert added.throughput.m < 0.75 * predicted.throughput.m
    assert offline.throughput.m_as("request/s") == pytest.approx(predicted.throughput.m_as("request/s"), rel=0.10)
    assert offline.value("tpot").m_as("s") < 0.8 * added.tpot.m_as("s")
    with pytest.raises(InputError, match="SimulationSetup: 'streaming' must be True or False"):
        SimulationSetup(*args, engine="trtllm", streaming="off")
