"""Deployable output of a plan: engine command lines with documented flags, the Kubernetes manifest, the CLI."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shlex

import pytest
import yaml
from typer.testing import CliRunner

from calculator import (
    DOCUMENTED_FLAGS,
    Q_,
    FleetPlan,
    SearchSpace,
    ServingOptions,
    Targets,
    Workload,
    kubernetes_manifest,
    launch_command,
    size_fleet,
    weights_source,
)
from calculator.cli import app
from calculator.errors import InputError
from calculator.performance import engine_profile
from calculator.performance.engines import sglang_memory_fraction
from calculator.registry import load_registry

ENGINES = ("vllm", "sglang", "trtllm")
#: The flag of each engine that carries each plan value.
FLAG = {
    "vllm": {
        "tp": "--tensor-parallel-size",
        "batch": "--max-num-seqs",
        "memory": "--gpu-memory-utilization",
        "budget": "--max-num-batched-tokens",
        "kv": "--kv-cache-dtype",
    },
    "sglang": {
        "tp": "--tp-size",
        "batch": "--max-running-requests",
        "memory": "--mem-fraction-static",
        "budget": "--chunked-prefill-size",
        "kv": "--kv-cache-dtype",
    },
    "trtllm": {
        "tp": "--tp_size",
        "batch": "--max_batch_size",
        "memory": "--kv_cache_free_gpu_memory_fraction",
        "budget": "--max_num_tokens",
        "kv": None,
    },
}
SIZING = ["llama-3.1-70b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms"]
#: A model the registry lists FP8, FP4 and INT4 checkpoints of (each engine can load every plan of it).
SIZING_8B = ["llama-3.1-8b", *SIZING[1:]]


def _plan(model="llama-3.1-8b", *, engine, kv_precision=None, **serving):
    """A plan on H100s at FP8 of 5 request/s (1,024 -> 256 tokens, 1 s, 50 ms); ``serving``: ServingOptions fields."""
    return size_fleet(
        model, Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8", kv_precision=kv_precision), engine=engine, serving=ServingOptions(**serving),
    )  # fmt: skip


@pytest.fixture(scope="module")
def fp8_plan():
    plan = _plan(engine="vllm", kv_precision="fp8")
    assert plan.feasible
    return plan


@pytest.fixture(scope="module")
def chunked_plan():
    plan = _plan(engine="sglang", chunk_size=2048)
    assert plan.feasible
    return plan


@pytest.mark.parametrize("engine", ENGINES)
def test_every_flag_is_documented_and_carries_the_plans_values(fp8_plan, engine):
    config = launch_command(fp8_plan, engine)
    assert set(config.flags) <= set(DOCUMENTED_FLAGS[engine])
    assert config.citations == {flag: DOCUMENTED_FLAGS[engine][flag] for flag in config.flags}
    assert all(flag in config.arguments for flag in config.flags)
    assert shlex.split(config.command.splitlines()[-1]) == list(config.arguments)  # after notes and files
    flags, names = config.flags, FLAG[engine]
    assert int(flags[names["tp"]]) == fp8_plan.layout.stage_gpus
    assert int(flags[names["batch"]]) == fp8_plan.batch
    profile = engine_profile(engine)
    memory = load_registry().accelerator("h100-sxm").memory.m_as("B")
    budget = profile.limits(memory, "h100-sxm")[0]
    assert int(flags[names["budget"]]) == budget
    expected = (
        float(sglang_memory_fraction(memory, budget, fp8_plan.layout.stage_gpus))
        if engine == "sglang"
        else profile.memory_utilization
    )
    assert float(flags[names["memory"]]) == pytest.approx(expected, abs=1e-3)
    if names["kv"]:
        assert flags[names["kv"]].startswith("fp8")
    else:  # TensorRT-LLM: kv_cache_config in the options YAML the command writes first
        assert yaml.safe_load(config.files["extra-llm-api-config.yml"])["kv_cache_config"] == {"dtype": "fp8"}
        assert flags["--extra_llm_api_options"] == "extra-llm-api-config.yml"
    # the registry's FP8 checkpoint of Llama-3.1-8B (a Hugging Face name, not the registry id)
    assert "nvidia/Llama-3.1-8B-Instruct-FP8" in config.arguments


@pytest.mark.parametrize("engine", ENGINES)
def test_the_plans_chunk_size_is_the_token_budget_and_no_fp8_kv_unless_planned(chunked_plan, engine):
    config = launch_command(chunked_plan, engine)
    assert int(config.flags[FLAG[engine]["budget"]]) == 2048
    assert not any(value.startswith("fp8") for value in config.flags.values() if value is not None)


@pytest.fixture(scope="module")
def speculative_plan():
    from calculator.fleet import Speculation

    plan = _plan(engine="sglang", speculation=Speculation("llama-3.2-1b", 3, 0.7))
    assert plan.feasible
    return plan


def test_vllm_runs_with_the_asynchronous_scheduling_the_plan_priced(chunked_plan):
    # The vLLM profile overlaps the engine's fixed costs with the GPU work (0.14.0's default); the command
    # says so, so that 0.11-0.13 run the same way.
    config = launch_command(chunked_plan, "vllm")
    assert "--async-scheduling" in config.arguments and config.flags["--async-scheduling"] is None
    assert "--async-scheduling" not in launch_command(chunked_plan, "sglang").arguments


def test_vllm_runs_a_draft_model_from_0_15(speculative_plan):
    import json

    from calculator.fleet import Speculation

    # 0.14.0's SpeculativeConfig raises NotImplementedError for a draft model; 0.15.0 runs it (config/speculative.py)
    with pytest.raises(InputError, match="vllm does not run a separate draft model"):
        _plan(engine=engine_profile("vllm").for_release("0.14"), speculation=Speculation("llama-3.2-1b", 3, 0.7))
    assert _plan(engine=engine_profile("vllm").for_release("0.15"), speculation=Speculation("llama-3.2-1b", 3, 0.7))
    vllm = launch_command(speculative_plan, "vllm")
    assert json.loads(vllm.flags["--speculative-config"]) == {
        "model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 3, "method": "draft_model"
    }  # fmt: skip
    assert shlex.split(vllm.command, comments=True) == list(vllm.arguments)  # the JSON survives the shell
    assert "--async-scheduling" not in vllm.arguments  # a draft model rules vLLM's asynchronous scheduling out


def test_a_speculative_plan_emits_each_engines_draft_model_settings(speculative_plan):
    draft = "meta-llama/Llama-3.2-1B"  # the registry's Hugging Face name of llama-3.2-1b
    sglang = launch_command(speculative_plan, "sglang").flags
    assert sglang["--speculative-algorithm"] == "STANDALONE" and sglang["--speculative-draft-model-path"] == draft
    # a chain of 3 drafted tokens, one candidate each: the server verifies 3 + 1 tokens
    assert (sglang["--speculative-num-steps"], sglang["--speculative-eagle-topk"]) == ("3", "1")
    assert sglang["--speculative-num-draft-tokens"] == "4"
    for engine in ("sglang",):
        config = launch_command(speculative_plan, engine)
        assert set(config.flags) <= set(DOCUMENTED_FLAGS[engine])
        assert not any("speculative" in note for note in config.notes)
    trtllm = launch_command(speculative_plan, "trtllm")  # trtllm-serve reads speculation from its options YAML
    assert not any("specul" in flag for flag in trtllm.flags)
    options = yaml.safe_load(trtllm.files["extra-llm-api-config.yml"])
    assert options["speculative_config"] == {
        "decoding_type": "DraftTarget", "max_draft_len": 3, "speculative_model_dir": draft
    }  # fmt: skip
    assert trtllm.flags["--extra_llm_api_options"] == "extra-llm-api-config.yml"


def test_size_emit_carries_the_speculate_flag():
    result = CliRunner().invoke(
        app, ["size", *SIZING, "--price", "4", "--speculate", "llama-3.2-1b:3:0.7", "--emit", "sglang"]
    )
    assert result.exit_code == 0, result.output
    assert "--speculative-draft-model-path meta-llama/Llama-3.2-1B --speculative-num-steps 3" in result.stdout


@pytest.mark.parametrize("engine", ENGINES)
def test_the_manifest_parses_with_the_plans_replicas_gpus_and_arguments(fp8_plan, engine):
    text = kubernetes_manifest(fp8_plan, engine)
    *config_maps, deployment, _budget, autoscaler = yaml.safe_load_all(text)
    assert deployment["kind"] == "Deployment" and autoscaler["kind"] == "HorizontalPodAutoscaler"
    assert deployment["spec"]["replicas"] == fp8_plan.replicas
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == fp8_plan.layout.stage_gpus
    config = launch_command(fp8_plan, engine)
    mounted = [f"/etc/servecalc/{a}" if a in config.files else a for a in config.arguments]
    assert container["command"] + container["args"] == mounted
    # TensorRT-LLM's options file travels as a ConfigMap mounted where the argument points
    assert [c["data"] for c in config_maps] == ([config.files] if config.files else [])
    if config.files:
        (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
        assert volume["configMap"]["name"] == config_maps[0]["metadata"]["name"]
    spec = autoscaler["spec"]
    assert spec["minReplicas"] == fp8_plan.replicas and spec["maxReplicas"] == 2 * fp8_plan.replicas
    assert spec["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    target = float(spec["metrics"][0]["pods"]["target"]["averageValue"])
    assert target == pytest.approx(max(fp8_plan.service.running_batch, 1.0), rel=1e-3)


def test_a_target_utilization_scales_the_batch_cap(fp8_plan):
    text = kubernetes_manifest(fp8_plan, "vllm", image="example/vllm:v1", target_utilization=0.5)
    deployment, _budget, autoscaler = yaml.safe_load_all(text)
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "example/vllm:v1"
    target = float(autoscaler["spec"]["metrics"][0]["pods"]["target"]["averageValue"])
    assert target == pytest.approx(0.5 * fp8_plan.batch, rel=1e-3)
    with pytest.raises(InputError):
        kubernetes_manifest(fp8_plan, "vllm", target_utilization=1.5)


FLAGS_OVERRIDE = """\
sources:
  - {id: our-trtllm, title: "Our TensorRT-LLM build's command line", url: "https://example.com/trtllm", kind: user}
engines:
  - id: trtllm
    launch_flags: {host: --host, port: --port, tensor_parallel: --tensor_parallel_size, max_sequences: --max_batch_size,
                   token_budget: --max_num_tokens, memory_fraction: --kv_cache_free_gpu_memory_fraction,
                   options_file: --extra_llm_api_options}
    sources: [{source: our-trtllm, fields: [launch_flags], note: "our build renames --tp_size"}]
"""


def test_the_flags_are_the_registrys_engine_data(fp8_plan, tmp_path):
    # The engine entry's launch_flags name each flag: a registry file that renames one changes the command, and
    # the citation is the file's source; an option it leaves out is an error naming it, never a guessed flag.
    path = tmp_path / "flags.yaml"
    path.write_text(FLAGS_OVERRIDE, encoding="utf-8")
    reg = load_registry(extra=[path])
    config = launch_command(fp8_plan, "trtllm", registry=reg)
    assert config.flags["--tensor_parallel_size"] == str(fp8_plan.layout.stage_gpus) and "--tp_size" not in config.flags
    cited = config.citations["--tensor_parallel_size"]  # the file's source (after the packaged entry's, appended)
    assert cited.endswith("; our build renames --tp_size (Our TensorRT-LLM build's command line)")
    assert "--tp_size" in launch_command(fp8_plan, "trtllm").flags  # the packaged registry's
    staged = dataclasses.replace(
        fp8_plan, layout=dataclasses.replace(fp8_plan.layout, pipeline_parallel=2), gpus=fp8_plan.gpus * 2
    )  # stages need --pp_size
    with pytest.raises(InputError, match="engine 'trtllm' names no launch flag for 'pipeline_parallel'"):
        launch_command(staged, "trtllm", registry=reg)


def test_vllm_with_pipeline_stages_gets_no_asynchronous_scheduling_flag(chunked_plan):
    # vLLM 0.14 refuses --async-scheduling with pipeline parallelism (config/vllm.py); its batch queue of a batch per
    # stage overlaps the scheduling instead (max_concurrent_batches, v1/executor/multiproc_executor.py)
    staged = dataclasses.replace(
        chunked_plan, layout=dataclasses.replace(chunked_plan.layout, pipeline_parallel=2), gpus=chunked_plan.gpus * 2
    )
    config = launch_command(staged, "vllm")
    assert config.flags["--pipeline-parallel-size"] == "2" and "--async-scheduling" not in config.arguments
    assert "--async-scheduling" in launch_command(chunked_plan, "vllm").arguments


def test_an_infeasible_plan_or_an_unknown_engine_is_an_input_error(fp8_plan):
    with pytest.raises(InputError, match="infeasible"):
        launch_command(FleetPlan(False, "no accelerator fits"), "vllm")
    with pytest.raises(InputError, match="FleetPlan"):
        launch_command("plan", "vllm")  # type: ignore[arg-type]
    for engine in ("generic", "tgi", None):
        with pytest.raises(InputError):
            launch_command(fp8_plan, engine)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["vllm", "sglang", "trtllm", "k8s"])
def test_cli_emit_prints_a_parseable_command_or_manifest(target, tmp_path):
    result = CliRunner().invoke(app, ["size", *SIZING_8B, "--engine", "sglang", "--emit", target])
    assert result.exit_code == 0, result.output
    if target == "k8s":
        deployment, _budget, autoscaler = yaml.safe_load_all(result.stdout)
        assert deployment["spec"]["template"]["spec"]["containers"][0]["name"] == "sglang"
        assert autoscaler["kind"] == "HorizontalPodAutoscaler"
    else:
        arguments = shlex.split(result.stdout.splitlines()[-1])
        assert set(a for a in arguments if a.startswith("--")) <= set(DOCUMENTED_FLAGS[target])
    out = tmp_path / "deploy.txt"
    written = CliRunner().invoke(app, ["size", *SIZING_8B, "--emit", target, "--out", str(out)])
    assert written.exit_code == 0 and out.read_text(encoding="utf-8").strip()


def test_cli_emit_of_an_infeasible_plan_exits_1_with_the_reason():
    tight = ["llama-3.1-70b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 ms", "--tpot", "1 ms"]
    result = CliRunner().invoke(app, ["size", *tight, "--emit", "vllm"])
    assert result.exit_code == 1
    assert "infeasible" in result.output or "no feasible" in result.output
    assert "vllm serve" not in result.stdout


# --------------------------------------------------------------------------------------------
# The weights and the KV cache a launch config loads are the ones the plan fitted


def _parse(command: str, engine: str) -> tuple[str, str | None, str, dict]:
    """(repository loaded, --quantization value, KV dtype asked for, files written) read off a command."""
    lines, files, current = command.splitlines(), {}, None
    for line in lines[:-1]:
        if current is not None:
            if line == "SERVECALC_EOF":
                current = None
            else:
                files[current] += line + "\n"
        elif line.startswith("cat > "):
            current = shlex.split(line.split("<<")[0])[2]
            files[current] = ""
    arguments = shlex.split(lines[-1])
    value = {a: b for a, b in itertools.pairwise(arguments) if a.startswith("--")}
    repo = value["--model-path"] if engine == "sglang" else arguments[2 if engine == "vllm" else 1]
    if engine == "trtllm":
        options = yaml.safe_load(files[value["--extra_llm_api_options"]]) if "--extra_llm_api_options" in value else {}
        kv = options.get("kv_cache_config", {}).get("dtype", "auto")
    else:
        kv = value.get("--kv-cache-dtype", "auto")
    return repo, value.get("--quantization"), kv, files


@pytest.fixture(scope="module")
def base_plan():
    plan = _plan(engine="vllm")
    assert plan.feasible
    return plan


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b", "deepseek-v3", "gpt-oss-120b"])
@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp4", "int4"])
def test_a_launch_config_loads_the_weights_and_kv_cache_the_plan_fitted(base_plan, engine, model, precision):
    import dataclasses

    from calculator.performance import kv_cache_precision

    reg = load_registry()
    entry = reg.model(model)
    kv = kv_cache_precision(model, "b200-sxm", precision, engine)
    plan = dataclasses.replace(
        base_plan, model=model, accelerator="b200-sxm", precision=precision, engine=engine, kv_precision=kv
    )  # fmt: skip
    own = next(alias for alias in entry.aliases if "/" in alias)
    published = [c.repo for c in entry.checkpoints if c.precision == precision]
    native = [c.precision for c in entry.checkpoints if c.repo == own]  # published quantized (DeepSeek-V3, gpt-oss)
    if precision == "bf16" and native:
        with pytest.raises(InputError, match=f"holds {native[0]} weights"):
            launch_command(plan, engine)
        return
    if precision != "bf16" and not published and not (precision == "fp8" and engine != "trtllm"):
        # no checkpoint and no way to quantize at load time: refused, with the way out
        with pytest.raises(InputError, match="checkpoints"):
            launch_command(plan, engine)
        return
    config = launch_command(plan, engine)
    assert set(config.flags) <= set(DOCUMENTED_FLAGS[engine])
    repo, quantization, kv_asked, files = _parse(config.command, engine)
    assert files == config.files
    if precision == "bf16":
        assert (repo, quantization) == (own, None)
    elif published:
        assert (repo, quantization) == (published[0], None)  # the checkpoint declares its own quantization
    else:
        assert (repo, quantization) == (own, "fp8")  # quantized as the 16-bit checkpoint loads
    sixteen = {"vllm": ("auto", "bfloat16"), "sglang": ("auto", "bf16"), "trtllm": ("auto",)}[engine]
    fp8 = {"vllm": "fp8", "sglang": "fp8_e4m3", "trtllm": "fp8"}[engine]
    assert kv_asked == fp8 if kv == "fp8" else kv_asked in sixteen
    assert config.kv_precision == kv and config.weights.precision == precision


@pytest.mark.parametrize(
    ("model", "weights"),
    [
        # the registry's ModelOpt FP8 checkpoint, which declares its own quantization (no --quantization)
        ("llama-3.1-70b", ("nvidia/Llama-3.1-70B-Instruct-FP8", None)),
        # no FP8 checkpoint of Llama 3.3 70B in the registry: the 16-bit one, quantized to FP8 as it loads
        ("llama-3.3-70b", ("meta-llama/Llama-3.3-70B-Instruct", "fp8")),
    ],
)
def test_the_issue_command_emits_the_fp8_weights_it_planned(model, weights):
    # The defect: FP8 weights on TP 2 were emitted as the BF16 checkpoint with no quantization flag,
    # which loads 141 GB onto two 80 GB GPUs.
    arguments = [
        "size", model, "--rate", "20", "--input", "2000", "--output", "300", "--ttft", "2s", "--tpot", "50ms",
        "--percentile", "99", "-a", "h100-sxm", "-a", "h200-sxm", "-p", "fp8", "-p", "bf16",
    ]  # fmt: skip
    planned = CliRunner().invoke(app, [*arguments, "--json"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    result = CliRunner().invoke(app, [*arguments, "--emit", "vllm"])
    assert result.exit_code == 0, result.output
    repo, quantization, kv, _ = _parse(result.stdout.strip(), "vllm")
    assert plan["precision"] == "fp8" and (repo, quantization) == weights
    assert kv == {"fp8": "fp8"}.get(plan["kv_precision"], "auto")
    trt = CliRunner().invoke(app, [*arguments, "--emit", "trtllm"])
    if weights[1] is None:  # TensorRT-LLM loads the same pre-quantized checkpoint
        assert trt.exit_code == 0, trt.output
        assert _parse(trt.stdout.strip(), "trtllm")[0] == weights[0]
    else:  # and quantizes nothing at load time
        assert trt.exit_code != 0 and "checkpoints" in trt.output and "Traceback" not in trt.output


def test_the_command_serves_the_repository_the_plan_was_named_by():
    # Issue 54, item 4: named by its instruct repository, Llama-3.1-70B resolves to the registry entry whose first
    # repository alias is the base model; the plan keeps the name, and 16-bit and load-time FP8 weights serve it.
    named = size_fleet(
        "meta-llama/Llama-3.1-70B-Instruct", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "bf16"), engine="vllm",
    )  # fmt: skip
    assert named.feasible and named.served_model == "meta-llama/Llama-3.1-70B-Instruct"
    assert launch_command(named, "vllm").arguments[2] == "meta-llama/Llama-3.1-70B-Instruct"
    assert "meta-llama/Llama-3.1-70B-Instruct" in kubernetes_manifest(named, "vllm")
    again = FleetPlan.from_json_dict(json.loads(json.dumps(named.to_json_dict())))
    assert again.served_model == "meta-llama/Llama-3.1-70B-Instruct"
    by_id = _plan("llama-3.1-70b", engine="vllm")
    assert (
        by_id.served_model is None and weights_source("llama-3.2-1b", "fp8", "vllm").repo == "meta-llama/Llama-3.2-1B"
    )
    online = weights_source("llama-3.2-1b", "fp8", "vllm", served="meta-llama/Llama-3.2-1B-Instruct")
    assert (online.repo, online.method) == ("meta-llama/Llama-3.2-1B-Instruct", "online")
    # at FP8 a name that is no FP8 checkpoint's serves the registry's FP8 checkpoint (performance.CHECKPOINT_RULE)
    fp8 = weights_source("llama-3.1-70b", "fp8", "vllm", served="meta-llama/Llama-3.1-70B-Instruct")
    assert (fp8.repo, fp8.method) == ("nvidia/Llama-3.1-70B-Instruct-FP8", "checkpoint")
    # a plan file whose name is not one of the model's aliases launches nothing
    tampered = dataclasses.replace(named, served_model="evil/model; rm -rf /")
    with pytest.raises(InputError, match=r"argument 'served' must be one of llama-3\.1-70b's aliases"):
        launch_command(tampered, "vllm")


def test_size_emit_serves_the_named_instruct_model():
    args = ["size", "meta-llama/Llama-3.1-70B-Instruct", *SIZING[1:], "--price", "4", "--engine", "vllm"]
    result = CliRunner().invoke(app, [*args, "-p", "bf16", "--emit", "vllm"])
    assert result.exit_code == 0, result.output
    assert "vllm serve meta-llama/Llama-3.1-70B-Instruct " in result.stdout


def test_the_sizer_chooses_no_plan_its_launch_cannot_load():
    # Issue 54, item 4: Llama-3.3-70B has no FP8 checkpoint in the registry, so vLLM and SGLang load the 16-bit
    # weights and quantize them as they load: 141.1 GB of them (70.55e9 parameters x 2 bytes) on one H200 exceed
    # what either memory policy uses (vLLM: 0.9 x 150.3 GB less 2 GB; SGLang: its static fraction), so one GPU is
    # rejected for that reason and the plan takes two, which its command can load.
    workload, targets = Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms"))
    for engine in ("vllm", "sglang"):
        plan = size_fleet("llama-3.3-70b", workload, targets, SearchSpace("h200-sxm", "fp8"), engine=engine)
        assert plan.feasible and plan.layout.tensor_parallel >= 2, engine
        reason = plan.rejected["h200-sxm/fp8/tp1"]
        assert reason.startswith("load: the engine loads the 16-bit checkpoint (no fp8 checkpoint in the registry)")
        assert "141.1 GB of 16-bit weights per device" in reason
        assert weights_source("llama-3.3-70b", "fp8", engine).method == "online"
    # A model with an FP8 checkpoint loads it as it runs: no such rejection (Llama-3.1-70B, the same shapes, has
    # NVIDIA's ModelOpt one: 70.55 GB of FP8 weights, plus 16-bit embeddings, fit one H200).
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        fitted = size_fleet(model, workload, targets, SearchSpace("h200-sxm", "fp8"), engine="vllm")
        assert not any(r.code == "load" for r in fitted.rejections), model


def test_size_says_which_weights_the_plan_loads_or_that_none_exist():
    # Issue 54, item 4: the plan says what its engine loads, and where the checkpoint it needs does not exist.
    args = ["size", "meta-llama/Llama-3.3-70B-Instruct", *SIZING[1:], "--price", "4"]
    vllm = CliRunner().invoke(app, [*args, "--engine", "vllm"])
    assert vllm.exit_code == 0, vllm.output
    assert "note: the engine loads meta-llama/Llama-3.3-70B-Instruct, the 16-bit checkpoint, quantized to fp8" in (
        vllm.stdout
    )
    trtllm = CliRunner().invoke(app, [*args, "--engine", "trtllm"])
    assert trtllm.exit_code == 0, trtllm.output
    assert "note: no weights to load: the plan runs llama-3.3-70b at fp8, but the registry lists no fp8 checkpoint" in (
        trtllm.stdout
    )
    small = CliRunner().invoke(app, ["size", *SIZING_8B[:1], *SIZING[1:], "--price", "4", "--engine", "trtllm"])
    assert "note: the engine loads the checkpoint nvidia/Llama-3.1-8B-Instruct-FP8" in small.stdout


def test_the_predictor_says_when_its_replica_cannot_load_what_it_priced():
    from calculator.performance import predict_benchmark

    one = predict_benchmark("llama-3.3-70b", "h200-sxm", "fp8", 1, 1024, 256, 8, "vllm")
    (note,) = [c for c in one.caveats() if "16-bit checkpoint" in c]
    assert "141.1 GB of 16-bit weights per device exceed" in note and one.load_note == note
    assert predict_benchmark("llama-3.3-70b", "h200-sxm", "fp8", 2, 1024, 256, 8, "vllm").load_note == ""
    assert predict_benchmark("llama-3.3-70b", "h200-sxm", "fp8", 1, 1024, 256, 8, "trtllm").load_note == ""
    # Llama-3.1-70B, the same shapes, loads NVIDIA's FP8 checkpoint: nothing 16-bit to hold
    assert predict_benchmark("llama-3.1-70b", "h200-sxm", "fp8", 1, 1024, 256, 8, "vllm").load_note == ""
