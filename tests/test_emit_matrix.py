"""Issue 54, item 4: every engine x precision x model with checkpoints emits the checkpoint, the quantization and the
KV cache its plan priced (or refuses in words where the engine cannot load it)."""

from __future__ import annotations

import pytest
import yaml

from calculator import Q_, SearchSpace, Targets, Workload, launch_command, size_fleet
from calculator.errors import InputError
from calculator.registry import load_registry

ENGINES = ("vllm", "sglang", "trtllm")
#: (model, precision) of every packaged checkpoint, each on an accelerator that computes its precision natively.
CASES = sorted(
    {
        (model.id, checkpoint.precision)
        for model in load_registry().models.values()
        for checkpoint in model.checkpoints
        if checkpoint.precision in ("fp8", "fp4", "int4")
    }
)
ACCELERATOR = {"fp8": "h200-sxm", "fp4": "b200-sxm", "int4": "h200-sxm"}
#: Each engine's KV-cache dtype values for an FP8 and a 16-bit cache (deploy's flags; TensorRT-LLM's options file).
KV_VALUES = {"vllm": {"fp8": "fp8", "bf16": "bfloat16"}, "sglang": {"fp8": "fp8_e4m3", "bf16": "bf16"}}


def _plan(model, precision, engine):
    workload, targets = Workload(Q_(2, "request/s"), 1024, 256), Targets(Q_(5, "s"), Q_(200, "ms"))
    return size_fleet(model, workload, targets, SearchSpace(ACCELERATOR[precision], precision), engine=engine)


@pytest.mark.filterwarnings("ignore::calculator.errors.ExtrapolationWarning")  # Kimi K2's 1.03T parameters
@pytest.mark.parametrize(("model", "precision"), CASES)
def test_each_engine_serves_the_plans_checkpoint_and_kv(model, precision):
    reg = load_registry()
    checkpoint = reg.models[model].checkpoint(precision)
    for engine in ENGINES:
        plan = _plan(model, precision, engine)
        if not plan.feasible:
            continue  # nothing to launch (the reason is the sizer's)
        try:
            config = launch_command(plan, engine)
        except InputError as error:  # an engine that cannot load it says why
            assert engine == "trtllm" and checkpoint.format not in ("modelopt",), (engine, str(error))
            assert "TensorRT-LLM" in str(error) or "checkpoint" in str(error)
            continue
        assert config.weights.repo == checkpoint.repo and config.weights.method == "checkpoint", engine
        assert not any(flag == "--quantization" for flag in config.flags)  # a checkpoint is not quantized again
        if engine == "trtllm":
            options = yaml.safe_load(config.files.get("extra-llm-api-config.yml", "{}")) or {}
            declared = options.get("kv_cache_config", {}).get("dtype", "auto")
            assert declared == ("fp8" if plan.kv_precision == "fp8" else "auto"), (model, precision)
            if declared == "auto":  # 'auto' runs the checkpoint's declaration, which must be the plan's
                assert (checkpoint.kv_cache or plan.kv_precision) == plan.kv_precision
            continue
        value = config.flags.get("--kv-cache-dtype")
        if value is not None:
            assert value == KV_VALUES[engine][plan.kv_precision if plan.kv_precision == "fp8" else "bf16"], engine
        else:  # the engine's default for this checkpoint is the plan's KV cache
            assert (checkpoint.kv_cache or plan.kv_precision) == plan.kv_precision, (model, precision, engine)


def test_the_matrix_covers_the_packaged_checkpoints():
    assert {precision for _, precision in CASES} >= {"fp8", "fp4", "int4"}
    assert len(CASES) >= 8
