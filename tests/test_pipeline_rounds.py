"""Pipeline stages keep every stage busy: a round is the busiest stage's work, a prompt's pass is its latency.

Issue 53: with long prompts the closed form and the simulator priced an iteration as at least one prompt's
pass through every stage, so throughput per GPU fell about as 1/PP, where engines that interleave
micro-batches (vLLM's virtual engines, TensorRT-LLM's and SGLang's micro-batches) hold it nearly flat.
"""

from __future__ import annotations

import pytest

from calculator.performance import predict_benchmark, step_arrays
from calculator.performance.iteration import _stage_seconds, iteration_seconds, pipeline_pass_seconds
from calculator.simulation import SimulationSetup, Traffic, simulate

MODEL, GPU, PRECISION = "llama-3.1-8b", "h100-sxm", "bf16"


def test_a_round_is_the_stages_work_and_a_prompts_pass_is_its_latency():
    # Four stages, 64 decodes and one 4,096-token prompt: the round is the prompt's micro-batch at one stage plus
    # three plain micro-batches (16 decodes each) on a quarter of the layers; the pass is four of the loaded one.
    a = step_arrays(MODEL, GPU, PRECISION).with_pipeline_parallel(4)
    from calculator.performance import ENGINES

    eff = ENGINES["vllm"].efficiency.replace(step_overhead=ENGINES["vllm"].efficiency.step_overhead * 0)
    eff = eff.replace(sequence_overhead=eff.sequence_overhead * 0)
    quarter = a.layers / 4
    loaded = float(_stage_seconds(a, 1.0, quarter, 16.0, 2048.0, 1.0, 4096.0, 1.0, 0.0))
    plain = float(_stage_seconds(a, 1.0, quarter, 16.0, 2048.0, 1.0, 0.0, 0.0, 0.0))
    round_ = float(iteration_seconds(a, eff, 1, 64, 2048, prefill=4096, requests=1))
    assert round_ == pytest.approx(loaded + 3 * plain, rel=0.02)  # plus three small hand-offs
    assert round_ >= loaded + 3 * plain
    beyond = float(pipeline_pass_seconds(a, eff, 1, 64, 2048, 4096, 1))
    assert beyond == pytest.approx(4 * loaded - (loaded + 3 * plain), rel=1e-9)


def test_offline_throughput_per_gpu_holds_at_pp8_and_the_closed_form_follows_the_simulator():
    # 8,192/512-token prompts under vLLM, clients in proportion to the GPUs: the simulator's output tokens per
    # second per GPU at PP 8 stay within 25 % of PP 1 (the acceptance), and the closed form is within 10 %
    # of the simulator on both.
    per_gpu = {}
    for stages, clients in ((1, 32), (8, 256)):
        setup = SimulationSetup(MODEL, GPU, PRECISION, tensor_parallel=1, engine="vllm", pipeline_parallel=stages)
        traffic = Traffic(clients=clients, input_tokens=8192, output_tokens=512, requests=4 * clients,
                          input_cv=0.1, output_cv=0.1)  # fmt: skip
        requests = simulate(setup, traffic, seeds=1).requests
        simulated = 512 * len(requests) / (requests.finish.max() - requests.arrival.min()) / stages
        closed = predict_benchmark(MODEL, GPU, PRECISION, 1, 8192, 512, clients, "vllm", pipeline_parallel=stages,
                                   length_cv=0.1, requests_per_client=4)  # fmt: skip
        assert closed.output_throughput.m_as("token/s") / stages == pytest.approx(simulated, rel=0.10)
        per_gpu[stages] = simulated
    assert per_gpu[8] >= 0.75 * per_gpu[1]
