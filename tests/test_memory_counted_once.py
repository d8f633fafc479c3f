"""Memory counted once: `fit`, the benchmark predictor, the fleet sizer and the simulator hold the same sequences.

`servecalc fit llama-3.1-70b -a h100-sxm -p fp8 --tp 1 --context 2300 --engine vllm` answered 35 sequences
(device memory less the weights and a 2 GB reserve) where the predictor and the sizer held 10 (vLLM claims
0.9 of the device and keeps its activation reserve inside it). `performance.engine_memory_fit` is the one
count; this grid holds the others to it, to the sequence.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from calculator.cli import app
from calculator.fleet import ServingOptions
from calculator.fleet.evaluate import _capacity
from calculator.performance import engine_memory_fit, engine_profile, predict_benchmark, step_arrays
from calculator.simulation import SimulationSetup
from calculator.simulation.seed import _limits

SETUPS = [  # model, accelerator, precision, tensor parallel
    ("llama-3.1-70b", "h100-sxm", "fp8", 1),
    ("llama-3.1-70b", "h200-sxm", "bf16", 2),
    ("llama-3.1-8b", "h100-sxm", "bf16", 1),
    ("qwen3-32b", "h200-sxm", "fp8", 1),
    ("gpt-oss-120b", "h100-sxm", "fp4", 1),  # half its layers keep a 128-token window
]
ENGINES = ["vllm", "sglang", "trtllm", None]
CONTEXTS = [2300, 8192, 32768]
GRID = [(*s, e, c) for s in SETUPS for e in ENGINES for c in CONTEXTS]


def _fit(model, accelerator, precision, tp, engine, context):
    return engine_memory_fit(model, accelerator, precision, context, tp, engine=engine)


@pytest.mark.parametrize(("model", "accelerator", "precision", "tp", "engine", "context"), GRID)
def test_the_sizer_and_the_simulator_hold_what_fit_says(model, accelerator, precision, tp, engine, context):
    fit = _fit(model, accelerator, precision, tp, engine, context)
    profile = engine_profile(engine)
    a = step_arrays(model, accelerator, precision, fit.kv_precision, engine=profile)
    sized = _capacity(a, None, profile, np.array([float(tp)]), float(context), ServingOptions())
    assert int(sized[0]) == fit.sequences
    setup = SimulationSetup(model, accelerator, precision, tp, engine=engine, kv_precision=fit.kv_precision)
    _, _, rules, capacity, _ = _limits(setup)
    assert rules.kv_block == fit.block and capacity == fit.kv_tokens
    assert int(math.floor(capacity) // rules.admission_tokens(context, 0)) == fit.sequences


@pytest.mark.parametrize(
    ("model", "accelerator", "precision", "tp", "engine"), [(*s, e) for s in SETUPS for e in ENGINES]
)
def test_the_predictor_is_memory_limited_one_client_past_what_fit_says(model, accelerator, precision, tp, engine):
    """The predictor admits a prompt with its share of the output reserved (``output_reservation``)."""
    profile = engine_profile(engine)
    prompt, output = 4096, 2
    per_sequence = prompt + int(profile.output_reservation * output)
    fit = _fit(model, accelerator, precision, tp, engine, per_sequence)
    memory = step_arrays(model, accelerator, precision, fit.kv_precision, engine=profile).memory
    if not fit.weights_fit or not 1 <= fit.sequences < profile.limits(memory, accelerator)[1] - 1:
        pytest.skip("the sequence cap, not the KV cache, binds here")
    kwargs = dict(engine=engine, kv_precision=fit.kv_precision)
    inside = predict_benchmark(model, accelerator, precision, tp, prompt, output, fit.sequences, **kwargs)
    beyond = predict_benchmark(model, accelerator, precision, tp, prompt, output, fit.sequences + 1, **kwargs)
    assert not inside.memory_limited and beyond.memory_limited


def test_fit_answers_the_issues_question_with_the_engines_policy_and_names_it():
    args = ["fit", "llama-3.1-70b", "-a", "h100-sxm", "-p", "fp8", "--tp", "1", "--context", "2300", "--engine", "vllm"]
    result = CliRunner().invoke(app, [*args, "--json"])
    fields = json.loads(result.output)
    fit = _fit("llama-3.1-70b", "h100-sxm", "fp8", 1, "vllm", 2300)
    assert fields["engine"] == "vllm" and fields["engine_max_batch"] == fit.sequences < fields["max_batch"]
    assert "0.9 of each device" in fields["memory_policy"]
    table = CliRunner().invoke(app, args).output.splitlines()
    assert table[0].startswith("answer: 1 sequence of 2,300 tokens fit on 1 x h100-sxm (TP 1) served by vllm: up to ")
    assert f"up to {fit.sequences:,} sequences at this context" in table[0]
    assert table[1].startswith("the chapter's formula (device memory less the weights and a 2 GB reserve)")


def test_fit_says_when_the_weights_alone_do_not_fit_under_the_engine():
    args = [
        "fit",
        "llama-3.1-405b",
        "-a",
        "h100-sxm",
        "-p",
        "fp8",
        "--tp",
        "1",
        "--context",
        "2300",
        "--engine",
        "vllm",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert "do not fit on 1 x h100-sxm (TP 1) served by vllm: the weights alone do not fit: each GPU is" in first
    assert "0 sequences" not in first


@pytest.mark.parametrize(
    ("model", "engine", "block"),
    [
        ("llama-3.1-70b", "vllm", 16),  # vLLM's block_size on CUDA
        ("llama-3.1-70b", "trtllm", 32),  # TensorRT-LLM's tokens_per_block
        ("llama-3.1-70b", "sglang", 1),  # SGLang's page_size
        ("deepseek-v3", "vllm", 64),  # FlashMLA's block, which vLLM forces for latent attention before Blackwell
    ],
)
def test_a_sequence_takes_whole_kv_blocks_of_its_engine(model, engine, block):
    precision, tp = ("fp8", 8) if model == "deepseek-v3" else ("fp8", 1)
    accelerator = "h200-sxm"
    fit = _fit(model, accelerator, precision, tp, engine, 4000)
    assert fit.block == block and fit.kv_tokens % block == 0
    whole = -(-4000 // block) * block  # 4000 tokens in whole blocks
    assert fit.sequences == fit.kv_tokens // whole
    # One token more than whole blocks takes another block; up to the block boundary, none.
    assert _fit(model, accelerator, precision, tp, engine, whole).sequences == fit.sequences
    after = _fit(model, accelerator, precision, tp, engine, whole + 1).sequences
    assert after == fit.kv_tokens // (whole + block)
