"""Sliding-window attention: gpt-oss's windowed layers keep and read at most 128 tokens.

The registry records the window and how many layers use it (config.json of openai/gpt-oss-120b and -20b:
``sliding_window`` 128, ``layer_types`` alternating sliding and full attention). The step model prices a
windowed layer's decode and prefill attention on the window, and the one memory count (``fit``, the sizer,
the predictor, the simulator) holds a sequence of ``L`` tokens as ``L - share x max(L - window, 0)`` tokens
of every layer.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from calculator import Q_, load_registry
from calculator.performance import ENGINES, closed_loop_seconds, engine_memory_fit, step_arrays
from calculator.performance.iteration import causal_pairs, iteration_seconds, window_pairs


def test_the_registry_records_gpt_oss_windows_from_its_config():
    reg = load_registry()
    big, small = reg.model("gpt-oss-120b"), reg.model("gpt-oss-20b")
    assert (big.sliding_window, big.sliding_window_layers, big.layers) == (128, 18, 36)
    assert (small.sliding_window, small.sliding_window_layers, small.layers) == (128, 12, 24)
    assert reg.model("llama-3.1-70b").sliding_window is None


@pytest.mark.parametrize(("tokens", "prior", "window"), [(5, 0, 3), (5, 2, 3), (7, 10, 4), (300, 0, 128), (6, 1, 100)])
def test_window_pairs_count_each_querys_keys(tokens, prior, window):
    # By hand: the query at position i (1-based, after the prior cached tokens) attends to min(i, window) keys.
    expected = sum(min(i, window) for i in range(prior + 1, prior + tokens + 1))
    assert float(window_pairs(tokens, prior, window)) == expected
    assert float(window_pairs(tokens, prior, np.inf)) == float(causal_pairs(tokens, prior))


def test_a_sequence_keeps_half_its_layers_at_the_window():
    # gpt-oss-120b at FP4 on one H100 under vLLM: 4,096 tokens hold 18 full layers' 4,096 and 18 windowed layers'
    # 128, i.e. (4,096 + 128) / 2 = 2,112 tokens of all 36 layers (a multiple of vLLM's block of 16).
    fit = engine_memory_fit("gpt-oss-120b", "h100-sxm", "fp4", 4096, 1, engine="vllm")
    assert fit.block == 16 and fit.sequences == fit.kv_tokens // 2112
    # Within the window every layer keeps every token.
    assert engine_memory_fit("gpt-oss-120b", "h100-sxm", "fp4", 100, 1, engine="sglang").sequences == (
        engine_memory_fit("gpt-oss-120b", "h100-sxm", "fp4", 100, 1, engine="sglang").kv_tokens // 100
    )


def test_a_windowed_decode_step_reads_the_window_on_its_layers():
    # The roofline path (kernels=False): a decode step of 64 sequences at 32,768 tokens is bound by the bytes it
    # reads; without windows it reads every layer's 32,768 tokens, with them 18 layers' 32,768 and 18 layers' 128.
    from calculator.performance import Efficiency

    a = step_arrays("gpt-oss-120b", "h100-sxm", "fp4")
    full = dataclasses.replace(a, window_share=0.0, window=np.inf)
    eff = Efficiency(0.8, 0.65, 0.77, Q_(28e-6, "s"), Q_(0, "s"), Q_(0, "s"), kernels=False)
    args = (eff, 1.0, 64.0, 32768.0)
    saved_bytes = 64 * 0.5 * (32768 - 128) * a.kv_bytes_per_token  # the windowed layers' tokens past the window
    seconds = saved_bytes / (eff.hbm_bandwidth * a.hbm_bandwidth)
    assert float(iteration_seconds(full, *args) - iteration_seconds(a, *args)) == pytest.approx(seconds, rel=1e-6)
    # With the kernel tables the windowed step is cheaper too, and at a context inside the window no cheaper.
    priced = ENGINES["vllm"].efficiency
    assert float(iteration_seconds(a, priced, 1.0, 64.0, 32768.0)) < float(
        iteration_seconds(full, priced, 1.0, 64.0, 32768.0)
    )
    assert float(iteration_seconds(a, priced, 1.0, 64.0, 100.0)) == float(
        iteration_seconds(full, priced, 1.0, 64.0, 100.0)
    )


def test_the_closed_form_and_the_simulator_hold_the_windowed_cache_alike():
    # 64 clients of 4,096/512 tokens on gpt-oss-120b FP4 on one H100 under vLLM: about 40 windowed sequences fit
    # (fewer than 20 if every layer kept every token), so both sides queue for the cache.
    from calculator.simulation import SimulationSetup, Traffic, simulate

    clients, prompt, output = 64, 4096, 512
    setup = SimulationSetup("gpt-oss-120b", "h100-sxm", "fp4", tensor_parallel=1, engine="vllm")
    traffic = Traffic(clients=clients, input_tokens=prompt, output_tokens=output, requests=8 * clients,
                      input_cv=0.1, output_cv=0.1)  # fmt: skip
    summary = simulate(setup, traffic, seeds=1).summary.set_index(["metric", "statistic"]).value
    profile = ENGINES["vllm"]
    a = step_arrays("gpt-oss-120b", "h100-sxm", "fp4", engine=profile)
    closed = closed_loop_seconds(a, profile, 1, prompt, output, clients)
    assert bool(closed["memory_limited"])
    assert float(closed["tpot"]) == pytest.approx(summary["tpot", "mean"], rel=0.10)
    assert float(closed["ttft"]) == pytest.approx(summary["ttft", "mean"], rel=0.15)
    # Had the windows been ignored, the cache would hold about half as many sequences: a much longer wait.
    full = dataclasses.replace(a, window_share=0.0, window=np.inf)
    assert float(closed_loop_seconds(full, profile, 1, prompt, output, clients)["ttft"]) > 1.5 * float(closed["ttft"])
