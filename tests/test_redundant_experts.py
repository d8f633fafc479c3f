"""Expert placement as engines run it at scale (issue 53, item 9): redundant expert copies and expert-parallel
degrees that do not divide the experts, with each engine's placement rule read in its source."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calculator.errors import InputError
from calculator.performance import engine_memory_fit, engine_profile, predict_benchmark, step_arrays
from calculator.performance._common import replica_layout
from calculator.performance.iteration import _expert_seconds

# DeepSeek-V3 (config.json): 58 MoE layers of 256 routed experts, each three 7168 x 2048 projections; the registry
# derives one expert's parameters from the model's counts, within 0.1 % of that.
EXPERT_PARAMS = 58 * 3 * 7168 * 2048


def _layout(engine, ep, redundant=0, gpus=72, gpu="gb200"):
    a = step_arrays("deepseek-v3", gpu, "fp8", engine=engine)
    tp = np.asarray([1.0])
    return replica_layout(a, tp, gpus, ep, "test", 1, redundant)


def test_the_busiest_gpu_holds_the_experts_its_engine_places_there():
    a, group = _layout("vllm", 72)
    assert a.expert_params == pytest.approx(EXPERT_PARAMS, rel=1e-3)
    expert = a.expert_params * a.bytes_per_param  # FP8 experts: one byte a parameter
    assert a.bytes_per_param == 1.0
    rest = a.weight_bytes - 256 * expert
    # vLLM without copies: 256 = 3 x 72 + 40, so the first 40 ranks hold 4 experts (determine_expert_map)
    assert float(a.weights_per_device(group)[0]) == pytest.approx(rest + 4 * expert, rel=1e-12)
    # 32 copies: 288 placed experts, 4 on every GPU
    copies, _ = _layout("trtllm", 72, 32)
    assert float(copies.weights_per_device(group)[0]) == pytest.approx(rest + 4 * expert, rel=1e-12)
    # 32 GPUs of 8 experts each: the same count as before the change
    even, group32 = _layout("sglang", 32, gpus=32)
    assert float(even.weights_per_device(group32)[0]) == pytest.approx(rest + 8 * expert, rel=1e-12)


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_engines_that_place_evenly_refuse_a_degree_that_does_not_divide(engine):
    with pytest.raises(InputError, match=r"must divide the experts placed \(256 \+ redundant_experts 0\).*32"):
        _layout(engine, 72)
    with pytest.raises(InputError, match="must divide the experts placed"):
        _layout(engine, 72, 8)  # 264 is not a multiple of 72
    assert _layout(engine, 72, 32)[0].placed_experts == 288


def test_vllm_places_copies_evenly_only():
    # with copies vLLM runs EPLB, which asserts an even split (fused_moe/layer.py)
    with pytest.raises(InputError, match="must divide the experts placed"):
        _layout("vllm", 72, 8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"redundant_experts": -1}, "'redundant_experts' must be a whole number"),
     ({"redundant_experts": 1.5}, "'redundant_experts' must be a whole number"),
     ({"redundant_experts": 8, "expert_parallel": 1}, "needs expert parallelism")],
)  # fmt: skip
def test_bad_redundant_experts_are_refused(kwargs, message):
    args = {"data_parallel": 8, "expert_parallel": 8, "engine": "sglang"} | kwargs
    with pytest.raises(InputError, match=message):
        predict_benchmark("deepseek-v3", "h200-sxm", "fp8", 1, 1024, 1024, 64, **args)


def test_a_dense_model_has_no_experts_to_copy():
    with pytest.raises(InputError, match="redundant_experts applies to mixture-of-experts"):
        replica_layout(step_arrays("llama-3.1-70b", "h100-sxm", "fp8"), np.asarray([8.0]), 1, 1, "test", 1, 8)


def test_copies_take_a_share_of_their_experts_tokens():
    # Balanced routing over the placed experts: a token picks 8 of 256 experts and, where one has copies, one copy,
    # so each of the 288 placed experts is touched with probability 1 - (1 - 8/288)^m and takes m 8/288 tokens
    # shared among the times it is touched. With the same 4 experts on the busiest GPU, 32 copies lower the tokens
    # each grouped GEMM row carries: the layer is no slower, and at prefill sizes faster. On a GPU without kernel
    # tables, where both layouts take this estimate (measured layouts carry their routing imbalance: test_wide_ep).
    plain, group = _layout("vllm", 72, gpu="mi300x")
    copies, _ = _layout("sglang", 72, 32, gpu="mi300x")  # an even-placement engine that runs on AMD GPUs
    m = np.asarray([64.0, 8192.0, 65536.0])
    without = _expert_seconds(plain, float(group[0]), m)
    with_copies = _expert_seconds(copies, float(group[0]), m)
    assert np.all(with_copies <= without * (1 + 1e-12))
    assert with_copies[-1] < without[-1]


def test_the_predictor_and_the_memory_fit_take_the_copies():
    fit = engine_memory_fit("deepseek-v3", "gb200", "fp8", 2048, data_parallel=72, expert_parallel=72,
                            engine="sglang", redundant_experts=32)  # fmt: skip
    assert fit.sequences > 0

    def held(copies):
        return engine_memory_fit("deepseek-v3", "gb200", "fp8", 2048, data_parallel=72, expert_parallel=72,
                                 engine="vllm", redundant_experts=copies).kv_tokens  # fmt: skip

    # vLLM's busiest GPU holds ceil(256 / 72) = 4 experts without copies and 288 / 72 = 4 with 32: the same cache;
    # 104 copies put 360 / 72 = 5 on every GPU, one expert's bytes (about 2.56 GB at FP8) less cache per GPU
    assert held(0) == held(32) and held(104) < held(32)
    p = predict_benchmark("deepseek-v3", "gb200", "fp8", 1, 1024, 1024, 2048, engine="trtllm", data_parallel=72,
                          expert_parallel=72, redundant_experts=32)  # fmt: skip
    assert np.isfinite(p.tpot.m_as("s")) and p.tpot.m_as("s") > 0


def test_the_registry_states_each_engines_placement():
    assert [engine_profile(e).uneven_experts for e in ("vllm", "sglang", "trtllm")] == [True, False, False]
    assert "determine_expert_map" in engine_profile("vllm").citations["uneven_experts"]


def test_the_simulator_places_the_copies_as_the_predictor_does():
    from calculator.simulation import SimulationSetup, Traffic, simulate
    from calculator.simulation.seed import _limits

    setup = SimulationSetup("deepseek-v3", "h200-sxm", "fp8", 8, engine="sglang", data_parallel=8, expert_parallel=8,
                            redundant_experts=8)  # fmt: skip
    capacity = _limits(setup)[3]
    fit = engine_memory_fit("deepseek-v3", "h200-sxm", "fp8", 1024, 1, data_parallel=8, expert_parallel=8,
                            engine="sglang", redundant_experts=8)  # fmt: skip
    assert capacity == pytest.approx(fit.kv_tokens, rel=1e-9)  # 264 experts, 33 a GPU, in both counts
    run = simulate(setup, Traffic(clients=8, input_tokens=256, output_tokens=32, requests=16), seeds=1)
    assert run.throughput.m_as("request/s") > 0
    with pytest.raises(InputError, match="must divide the experts placed"):
        simulate(dataclasses.replace(setup, redundant_experts=3), Traffic(clients=1, requests=1))
