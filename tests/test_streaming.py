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

GPT_OSS = ("gpt-oss-20b", "b200", "fp4", 1, 1024, 1024)


def test_tensorrt_llm_without_streaming_pays_its_cited_sampler_cost_hidden_behind_the_gpu():
    streamed = engine_profile("trtllm")
    offline = streamed.for_streaming(False)
    # the registry's figure: #11983's 11.3 ms an iteration of TorchSampler host work at a batch of 1,000
    assert offline.efficiency.sequence_overhead.m_as("us") == pytest.approx(11.3)
    assert streamed.efficiency.sequence_overhead.m_as("us") > 30  # the streamed fit, 32.6 us
    assert offline.efficiency.overlap and not streamed.efficiency.overlap
    assert offline.efficiency.step_overhead == streamed.efficiency.step_overhead
    assert offline.fitted_batch is None and streamed.fitted_batch == 224
    assert "#11983" in offline.citations["offline_sequence_overhead"]
    assert not offline.streaming and streamed.for_streaming(True) is streamed
    with pytest.raises(InputError, match="take the engine's profile again"):
        offline.for_streaming(True)


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
    # the decode step: the GPU's work where it is longer, the loop's host work where that is (at 2,048 sequences
    # 0.77 ms + 2,048 x 11.3 us = 23.9 ms)
    np.testing.assert_allclose(run.decode_step_time.m_as("s"), np.maximum(gpu.decode_step_time.m_as("s"), loop),
                               rtol=1e-9)  # fmt: skip
    assert loop[-1] == pytest.approx(0.7651e-3 + 2048 * 11.3e-6)


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
    band = (offline.tpot_interval[1] / offline.tpot).m_as("")
    assert np.all(offline.tpot_interval[1].m >= added.tpot.m * 1.2)
    assert np.all(band > 1.2)
    for value, (low, high) in ((offline.output_throughput, offline.output_throughput_interval),):
        assert np.all(low.m < value.m) and np.all(value.m < high.m)
        assert np.all(low.m <= added.output_throughput.m)
    assert "11.3 us" in offline.caveats()[-1] and "hidden behind the GPU" in offline.caveats()[-1]
    # no extrapolation note: the offline cost was read at a batch of 1,000, not fitted on 224
    assert not offline.batch_note and streamed.batch_note


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

    # Llama-3.1-70B FP8 on two H100s at 128 clients: the loop's costs hidden behind the GPU in both
    args = ("llama-3.1-70b", "h100-sxm", "fp8", 2)
    traffic = Traffic(clients=128, input_tokens=1024, output_tokens=512, requests=1280, input_cv=0.1, output_cv=0.1)
    offline = simulate(SimulationSetup(*args, engine="trtllm", streaming=False), traffic)
    streamed = simulate(SimulationSetup(*args, engine="trtllm"), traffic)
    predicted = predict_benchmark(*args, 1024, 512, 128, "trtllm", length_cv=0.1, streaming=False)
    assert offline.value("tpot").m_as("s") == pytest.approx(predicted.tpot.m_as("s"), rel=0.10)
    assert offline.throughput.m_as("request/s") == pytest.approx(predicted.throughput.m_as("request/s"), rel=0.10)
    assert offline.value("tpot") < streamed.value("tpot")
    with pytest.raises(InputError, match="SimulationSetup: 'streaming' must be True or False"):
        SimulationSetup(*args, engine="trtllm", streaming="off")
