"""The KV cache by checkpoint (issue 53, item 4): a ModelOpt checkpoint's hf_quant_config.json declares its KV
cache, the registry records it with the checkpoint, and every engine that reads the declaration runs it."""

from __future__ import annotations

import pytest

from calculator.deploy import weights_source
from calculator.performance import engine_memory_fit, kv_cache_precision
from calculator.registry import load_registry


def test_the_nvfp4_checkpoint_of_qwen3_235b_declares_an_fp8_cache():
    # nvidia/Qwen3-235B-A22B-NVFP4's hf_quant_config.json: quant_algo NVFP4, kv_cache_quant_algo FP8
    checkpoint = load_registry().models["qwen3-235b-a22b"].checkpoint("fp4")
    assert (checkpoint.repo, checkpoint.format, checkpoint.kv_cache) == (
        "nvidia/Qwen3-235B-A22B-NVFP4",
        "modelopt",
        "fp8",
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_engine_runs_the_declared_cache(engine):
    # SGLang's own rule for FP4 weights is a BF16 cache; the checkpoint's declaration comes first (SGLang reads
    # ModelOpt's kv_cache_quant_algo from 0.5.4, vLLM from 0.14, TensorRT-LLM's 'auto').
    assert kv_cache_precision("qwen3-235b-a22b", "b200-sxm", "fp4", engine) == "fp8"
    fit = engine_memory_fit("qwen3-235b-a22b", "b200-sxm", "fp4", 2048, 4, engine=engine)
    assert fit.kv_precision == "fp8"


def test_qwens_own_fp8_checkpoint_keeps_a_16_bit_cache():
    # Qwen/Qwen3-235B-A22B-FP8 (block-scaled FP8) declares no KV quantization
    assert kv_cache_precision("qwen3-235b-a22b", "h100-sxm", "fp8", "trtllm") == "bf16"


def test_the_launch_loads_the_checkpoint_the_plan_priced():
    source = weights_source("qwen3-235b-a22b", "fp4", "trtllm")
    assert (source.repo, source.method, source.kv_declared) == ("nvidia/Qwen3-235B-A22B-NVFP4", "checkpoint", "fp8")
