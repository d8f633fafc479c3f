"""The KV cache by checkpoint (issue 53, item 4): a ModelOpt checkpoint's hf_quant_config.json declares its KV
cache, the registry records it with the checkpoint, and every engine that reads the declaration runs it."""

from __future__ import annotations

import pytest

from calculator.deploy import weights_source
from calculator.errors import InputError
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


# --- Llama-3.1-70B's FP8 checkpoint (issue 53, item 4) and which checkpoint a plan assumes (CHECKPOINT_RULE) ---

#: A user file giving Llama-3.1-70B a second FP8 checkpoint, listed first: a compressed-tensors export that declares
#: no KV cache (a made-up repository), beside NVIDIA's ModelOpt one.
TWO_FP8_CHECKPOINTS = """\
sources:
  - {id: our-fp8, title: "Our compressed-tensors FP8 export of Llama 3.1 70B", url: "https://example.com/fp8", kind: user}
models:
  - id: llama-3.1-70b
    aliases: ["meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct", "nvidia/Llama-3.1-70B-Instruct-FP8",
              "example/Llama-3.1-70B-Instruct-FP8-CT"]
    checkpoints:
      - {precision: fp8, repo: example/Llama-3.1-70B-Instruct-FP8-CT, format: compressed-tensors, source: our-fp8}
      - {precision: fp8, repo: nvidia/Llama-3.1-70B-Instruct-FP8, format: modelopt, kv_cache: fp8,
         source: aiconfigurator-model-configs}
    sources: [{source: our-fp8, fields: [aliases], note: "our export's repository"}]
"""


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    path = tmp_path_factory.mktemp("registry") / "two_fp8.yaml"
    path.write_text(TWO_FP8_CHECKPOINTS, encoding="utf-8")
    return load_registry(extra=[path])


def test_llama_70b_lists_nvidias_modelopt_fp8_checkpoint():
    # nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json: producer modelopt 0.23.0, quant_algo FP8,
    # kv_cache_quant_algo FP8, exclude_modules [lm_head]
    (checkpoint,) = load_registry().models["llama-3.1-70b"].checkpoints
    assert (checkpoint.precision, checkpoint.repo, checkpoint.format, checkpoint.kv_cache) == (
        "fp8", "nvidia/Llama-3.1-70B-Instruct-FP8", "modelopt", "fp8",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("accelerator", "engine", "kv"),
    [
        # KV_PRECISION_RULE, FP8 weights whose checkpoint declares its cache: as declared under every engine that
        # reads the declaration, FP8 only where the accelerator has FP8 tensor throughput (not the A100)
        ("h100-sxm", "vllm", "fp8"),
        ("h100-sxm", "sglang", "fp8"),  # SGLang's own rule (no declaration) would be BF16
        ("h100-sxm", "trtllm", "fp8"),
        ("h100-sxm", None, "fp8"),
        ("a100-sxm-80gb", "vllm", "bf16"),
        ("a100-sxm-80gb", "sglang", "bf16"),
        ("a100-sxm-80gb", "trtllm", "bf16"),
    ],
)
def test_llama_70b_fp8_runs_the_declared_cache_per_engine(accelerator, engine, kv):
    assert kv_cache_precision("llama-3.1-70b", accelerator, "fp8", engine) == kv


def test_a_release_that_ignores_the_declaration_runs_bf16_and_sglang_without_a_checkpoint_too():
    from calculator.performance import engine_profile

    # vLLM before kv_declaration_since (0.14) runs the model dtype whatever the checkpoint declares
    assert kv_cache_precision("llama-3.1-70b", "h100-sxm", "fp8", engine_profile("vllm").for_release("0.12")) == "bf16"
    # Llama-3.3-70B (same shapes, no FP8 checkpoint in the registry): SGLang quantizes online and keeps BF16
    assert kv_cache_precision("llama-3.3-70b", "h100-sxm", "fp8", "sglang") == "bf16"


@pytest.mark.parametrize(
    ("engine", "repo", "kv"),
    [
        # vLLM and SGLang document no preference: the first listed, which declares no cache, so each engine's own
        # rule for an undeclared FP8 checkpoint (vLLM FP8, SGLang BF16)
        ("vllm", "example/Llama-3.1-70B-Instruct-FP8-CT", "fp8"),
        ("sglang", "example/Llama-3.1-70B-Instruct-FP8-CT", "bf16"),
        # TensorRT-LLM's documentation runs ModelOpt exports (checkpoint_format modelopt): NVIDIA's, declared FP8
        ("trtllm", "nvidia/Llama-3.1-70B-Instruct-FP8", "fp8"),
    ],
)
def test_the_engine_picks_among_checkpoints_of_one_precision(two_checkpoints, engine, repo, kv):
    from calculator.performance import checkpoint_for

    assert checkpoint_for("llama-3.1-70b", "fp8", engine, registry=two_checkpoints).repo == repo
    assert weights_source("llama-3.1-70b", "fp8", engine, registry=two_checkpoints).repo == repo
    assert kv_cache_precision("llama-3.1-70b", "h100-sxm", "fp8", engine, registry=two_checkpoints) == kv


def test_the_name_the_plan_was_given_picks_the_checkpoint(two_checkpoints):
    from calculator import Q_, SearchSpace, Targets, Workload, size_fleet
    from calculator.deploy import launch_command
    from calculator.performance import checkpoint_for

    nvidia, ours = "nvidia/Llama-3.1-70B-Instruct-FP8", "example/Llama-3.1-70B-Instruct-FP8-CT"
    reg = two_checkpoints
    # the user's choice over SGLang's first-listed default: NVIDIA's checkpoint and the FP8 cache it declares
    assert checkpoint_for("llama-3.1-70b", "fp8", "sglang", served=nvidia, registry=reg).repo == nvidia
    assert kv_cache_precision(nvidia, "h100-sxm", "fp8", "sglang", registry=reg) == "fp8"  # named by it
    assert weights_source("llama-3.1-70b", "fp8", "sglang", served=nvidia, registry=reg).kv_declared == "fp8"
    # and over TensorRT-LLM's ModelOpt preference
    assert checkpoint_for(ours, "fp8", "trtllm", registry=reg).repo == ours
    # a name that is no checkpoint at the precision leaves the rule's choice
    assert checkpoint_for("llama-3.1-70b", "fp4", "sglang", served=nvidia, registry=reg) is None
    with pytest.raises(InputError, match="checkpoint_for\\(\\): argument 'served' must be a repository name"):
        checkpoint_for("llama-3.1-70b", "fp8", "sglang", served=3, registry=reg)
    # the sizer keeps the name (FleetPlan.served_model): the plan prices the cache of the checkpoint it launches
    args = (Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")), SearchSpace("h100-sxm", "fp8"))
    named = size_fleet(nvidia, *args, engine="sglang", registry=reg)
    default = size_fleet("llama-3.1-70b", *args, engine="sglang", registry=reg)
    assert (named.served_model, named.kv_precision, default.kv_precision) == (nvidia, "fp8", "bf16")
    assert launch_command(named, "sglang", registry=reg).flags["--model-path"] == nvidia
    assert launch_command(default, "sglang", registry=reg).flags["--model-path"] == ours
