"""A user registry (new accelerator, its new interconnect, its price) flows through the API and the CLI."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from calculator import Q_, Costs, SearchSpace, Targets, Workload, load_registry, predict_benchmark, size_fleet
from calculator.cli import app
from calculator.simulation import verify_plan

USER = textwrap.dedent(
    """\
    sources:
      - id: my-lab
        title: "Our lab's measurements"
        url: "https://example.com/lab"
        kind: user
    interconnects:
      - id: my-fabric
        name: My host fabric
        scope: host
        provenance: user
        bandwidth: 48 GB/s
        sources: [{source: my-lab, fields: [scope, bandwidth]}]
    accelerators:
      - id: my-gpu
        name: My GPU 96GB
        vendor: Example
        provenance: user
        memory: 96 GiB
        memory_nameplate: 96 GB
        memory_bandwidth: 4.0 TB/s
        dense_throughput: {bf16: 900 TFLOP/s, fp8: 1800 TFLOP/s}
        host_link: my-fabric
        tdp: 600 W
        sources: [{source: my-lab, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, host_link, tdp]}]
    prices:
      - id: my-gpu-on-demand
        name: Our contract price
        provenance: user
        accelerator: my-gpu
        price: 2.75 USD/hour
        market: on_demand
        as_of: "2026"
        sources: [{source: my-lab, fields: [price]}]
    """
)


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(USER, encoding="utf-8")
    return path


def _size(accelerator="my-gpu", registry=None):
    """Llama-3.1-8B at FP8 on ``accelerator``: 20 request/s of 1,024 -> 256 tokens within 1 s and 50 ms."""
    return size_fleet(
        "llama-3.1-8b", Workload(Q_(20, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace(accelerator, "fp8"), registry=registry,
    )  # fmt: skip


def test_a_user_registry_sizes_a_fleet_through_the_api(user_file):
    registry = load_registry(extra=[user_file])
    plan = _size(registry=registry)
    assert plan.feasible and plan.accelerator == "my-gpu"
    # The price is the user's own, found in the registry the sizer was given.
    assert plan.cost.per_hour.m_as("USD/hour") == pytest.approx(plan.gpus * 2.75)
    # An accelerator object carries its registry: its host link resolves there, no registry= needed.
    same = _size(accelerator=registry.accelerator("my-gpu"))
    assert same.gpus == plan.gpus and same.cost.per_hour == plan.cost.per_hour
    # The default registry knows nothing of it.
    with pytest.raises(KeyError, match="my-gpu"):
        _size()
    predicted = predict_benchmark("llama-3.1-8b", "my-gpu", "fp8", 1, 1024, 256, 16, registry=registry)
    assert predicted.measured_kernels is False and predicted.tpot.m_as("ms") > 0
    # The plan records the user file, so its simulation (in worker processes too) resolves the ids.
    check = verify_plan(plan, seeds=2, requests=3000)
    assert check.simulated_replicas is not None


def test_a_user_registry_sizes_and_simulates_from_the_cli(user_file, tmp_path):
    runner = CliRunner()
    args = ["llama-3.1-8b", "--rate", "20", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms",
            "-a", "my-gpu", "--extra", str(user_file)]  # fmt: skip
    sized = runner.invoke(app, ["size", *args, "--json"])
    assert sized.exit_code == 0, sized.output
    plan = json.loads(sized.stdout)
    assert plan["accelerator"] == "my-gpu" and plan["cost"]["per_hour"]["value"] == pytest.approx(plan["gpus"] * 2.75)
    (tmp_path / "plan.json").write_text(sized.stdout, encoding="utf-8")
    simulated = runner.invoke(
        app, ["simulate", "--plan", str(tmp_path / "plan.json"), "--requests", "2000", "--seeds", "1"]
    )
    assert simulated.exit_code == 0, simulated.output
    frontier = runner.invoke(app, ["frontier", "llama-3.1-8b", "--input", "512", "--output", "128", "-a", "my-gpu",
                                   "--extra", str(user_file), "--json"])  # fmt: skip
    assert frontier.exit_code == 0 and {row["accelerator"] for row in json.loads(frontier.stdout)} == {"my-gpu"}
    missing = runner.invoke(app, ["size", *args[:-2]])
    assert missing.exit_code == 2 and "my-gpu" in missing.output


USER_MODEL = textwrap.dedent(
    """\
    models:
      - id: my-model
        name: Our 8B model
        provenance: user
        parameters: 8.0e9
        layers: 32
        attention_heads: 32
        kv_heads: 8
        head_dim: 128
        hidden_size: 4096
        vocab_size: 128256
        max_context: 32768
        attention: gqa
        sources: [{source: my-lab, fields: [parameters, layers, attention_heads, kv_heads, head_dim, hidden_size, attention,
                                            vocab_size, max_context]}]
    """
)


def test_every_function_that_resolves_an_id_takes_the_registry(user_file, tmp_path):
    import calculator as c

    model_file = tmp_path / "model.yaml"
    model_file.write_text(USER.split("interconnects:")[0] + USER_MODEL, encoding="utf-8")
    reg = load_registry(extra=[user_file, model_file])
    with pytest.raises(KeyError):
        c.model_memory_fit("my-model", "my-gpu", 4096)  # the packaged registry has neither
    fit = c.model_memory_fit("my-model", "my-gpu", 4096, registry=reg)
    assert fit.fits and fit.capacity_basis == "physical"
    assert c.model_max_batch("my-model", "my-gpu", 4096, registry=reg) > 0
    assert c.min_tensor_parallel("my-model", "my-gpu", 4096, registry=reg) == 1
    assert c.compare_precisions("my-model", "my-gpu", 4096, registry=reg).batch_ratio > 1
    assert c.model_kv_bytes_per_token("my-model", registry=reg).m_as("B/token") == 2 * 32 * 8 * 128 * 2
    assert (
        c.roofline_decode_step_time("my-model", "my-gpu", 8, 2048, precision="bf16", registry=reg).time.m_as("ms") > 0
    )
    assert c.accelerator_ridge_point("my-gpu", "bf16", registry=reg).magnitude > 0
    assert c.device_share("my-model", registry=reg).weights.m_as("GB") > 0


def test_every_public_function_that_takes_a_registry_reference_takes_registry():
    # A function that resolves a model, accelerator or interconnect id (or a capacity that may be an
    # accelerator id) takes registry= and passes it on (docs/ARCHITECTURE.md).
    import inspect

    from public_calls import kinds, public_functions

    missing = []
    for name, function in public_functions().items():
        references = [a for a, d in kinds(function).items() if d.kind in ("model", "accelerator", "interconnect")]
        if references and "registry" not in inspect.signature(function).parameters:
            missing.append(f"{name}({', '.join(references)})")
    assert not missing, missing


def test_an_accelerator_without_a_price_asks_for_the_cli_flag(tmp_path):
    # The same accelerator without its price entry: the CLI names its own flag, not the API's price= argument.
    path = tmp_path / "no-price.yaml"
    path.write_text(USER.split("prices:")[0], encoding="utf-8")
    args = ["size", "llama-3.1-8b", "-a", "my-gpu", "--rate", "20", "--input", "1024", "--output", "256"]
    args += ["--ttft", "1 s", "--tpot", "50 ms", "--extra", str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "no on-demand price for my-gpu; give one with --price my-gpu=USD/h" in result.stderr
    assert "price=" not in result.stderr.replace("--price my-gpu=", "")
    priced = CliRunner().invoke(app, [*args, "--price", "my-gpu=2 USD/hour", "--json"])
    assert priced.exit_code == 0, priced.output
    assert json.loads(priced.stdout)["cost"]["per_hour"]["value"] == pytest.approx(
        2.0 * json.loads(priced.stdout)["gpus"]
    )


@pytest.mark.parametrize(
    "accelerators", [["h100-sxm", "my-gpu"], ["my-gpu"], ["a100-sxm-80gb", "h200-sxm"], ["b200-sxm", "my-gpu"]]
)
def test_the_gpu_interval_of_a_plan_contains_its_gpus(user_file, accelerators):
    # Issue 21: a plan of 18 GPUs of a user accelerator sized beside an H100 reported "8-14 GPUs":
    # the ends picked another configuration. The ends now keep the plan's own configuration.
    reg = load_registry(extra=[user_file])
    for rate, model in ((20, "llama-3.1-70b"), (60, "llama-3.1-8b")):
        plan = size_fleet(
            model, Workload(Q_(rate, "request/s"), 2000, 300), Targets(Q_(3, "s"), Q_(50, "ms")),
            SearchSpace(accelerators, ["fp8", "bf16"]), costs=Costs({a: Q_(3, "USD/hour") for a in accelerators}),
            registry=reg,
        )  # fmt: skip
        assert plan.feasible, plan.reason
        low, high = plan.gpus_interval
        assert low <= plan.gpus and (high is None or plan.gpus <= high), (accelerators, model, plan.gpus_interval)


ENGINE_OVERRIDE = textwrap.dedent(
    """\
    sources:
      - id: our-vllm-config
        title: "Our vLLM deployment's settings"
        url: "https://example.com/vllm-config"
        kind: user
    engines:
      - id: vllm
        token_budget:
          - {max_num_tokens: 2048, max_num_seqs: 96}
        sources: [{source: our-vllm-config, fields: [token_budget]}]
    """
)


def test_an_engine_default_changed_in_a_user_file_reaches_the_sizer_and_the_launch_config(tmp_path):
    path = tmp_path / "engines.yaml"
    path.write_text(ENGINE_OVERRIDE, encoding="utf-8")
    reg = load_registry(extra=[path])
    assert reg.engines["vllm"].token_budget[0].max_num_seqs == 96
    args = ("llama-3.1-8b", Workload(Q_(10, "request/s"), 4096, 256), Targets(Q_(2, "s"), Q_(50, "ms")),
            SearchSpace("h100-sxm", "fp8"))  # fmt: skip
    packaged = size_fleet(*args, engine="vllm", costs=Costs(Q_(3, "USD/hour")))
    ours = size_fleet(*args, engine="vllm", costs=Costs(Q_(3, "USD/hour")), registry=reg)
    # the sizer prices the user's token budget: smaller prefill chunks, shorter gaps between tokens
    assert ours.service.tbt_max < packaged.service.tbt_max
    from calculator.deploy import launch_command

    assert launch_command(packaged, "vllm").flags["--max-num-batched-tokens"] == "8192"
    assert launch_command(ours, "vllm", registry=reg).flags["--max-num-batched-tokens"] == "2048"
    # the CLI with --extra: the same plan and command
    result = CliRunner().invoke(
        app,
        ["size", "llama-3.1-8b", "--rate", "10", "--input", "4096", "--output", "256", "--ttft", "2 s", "--tpot",
         "50 ms", "-a", "h100-sxm", "--engine", "vllm", "--price", "3", "--extra", str(path), "--emit", "vllm"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--max-num-batched-tokens 2048" in result.stdout


def test_every_public_function_resolves_ids_that_only_a_user_file_defines(user_file, tmp_path):
    # Issue 22, item 1: each public function resolves ids once, in the registry it was given. Every
    # function the harness can call (tests/public_calls.py) is called with the user's model, accelerator
    # and interconnect, which the packaged registry lacks: no "unknown id" error may come back.
    import inspect

    from public_calls import ENTRIES, kinds, public_functions, valid_call

    from calculator.errors import UnknownEntryError

    model_file = tmp_path / "model.yaml"
    model_file.write_text(USER.split("interconnects:")[0] + USER_MODEL, encoding="utf-8")
    reg = load_registry(extra=[user_file, model_file])
    ours = {"model": "my-model", "accelerator": "my-gpu", "interconnect": "my-fabric"}
    called: list[str] = []
    unknown: list[str] = []
    for name, function in sorted(public_functions().items()):
        if "registry" not in inspect.signature(function).parameters:
            continue
        call = valid_call(name)
        if call is None:
            continue
        swapped = {a: ours[d.kind] for a, d in kinds(function).items() if d.kind in ours and a in call}
        swapped |= {a: "my-gpu" for a, d in kinds(function).items() if d.kind == "capacity" and a in call}
        if not swapped:
            continue
        called.append(name)
        try:
            function(**{**call, **swapped, "registry": reg})
        except UnknownEntryError as error:
            unknown.append(f"{name}: {error}")
        except Exception:  # another error (the user's model may not fit there) is not the point
            pass
    assert not unknown, unknown
    assert {"decode_step_time", "prefill_time", "predict_benchmark", "size_fleet", "frontier", "model_memory_fit",
            "step_arrays", "kv_cache_precision", "weights_source", "draft_memory_fit"} <= set(called), sorted(called)  # fmt: skip
    assert set(ENTRIES) >= {"model", "accelerator"}
    # a plan of the user's ids: its simulation and its launch config resolve them too (the plan records the files)
    from calculator.deploy import launch_command

    plan = size_fleet(
        "my-model", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
        SearchSpace("my-gpu", "bf16"), registry=reg,
    )  # fmt: skip
    assert plan.feasible, plan.reason
    assert launch_command(plan, "vllm").weights.repo == "my-model"  # no Hugging Face alias: the registry id
    assert verify_plan(plan, seeds=1, requests=1000).simulated_replicas is not None


def test_an_entry_knows_its_registry_and_compares_by_its_fields(user_file):
    # an entry finds the registry it was loaded into (to resolve the ids inside it) without changing
    # what it is: the packaged H100 in a user's registry equals the packaged one and keeps its kernel
    # tables; a pickled entry (a process pool, a dashboard cache) leaves the registry behind
    import pickle

    from calculator.kernels import tables_for
    from calculator.registry import registry_of

    base, mine = load_registry(), load_registry(extra=[user_file])
    ours, packaged = mine.accelerators["h100-sxm"], base.accelerators["h100-sxm"]
    assert registry_of(ours) is mine and registry_of(packaged) is base
    assert ours == packaged and hash(ours) == hash(packaged)
    assert tables_for(ours, registry=mine).measured
    assert registry_of(mine.accelerators["my-gpu"]) is mine
    again = pickle.loads(pickle.dumps(mine.accelerators["my-gpu"]))  # our own bytes
    assert again == mine.accelerators["my-gpu"] and registry_of(again) is base


def test_a_fleet_sweep_over_a_user_accelerator_cites_the_users_price(user_file):
    from calculator.sweeps import sweep_fleet

    registry = load_registry(extra=[user_file])
    frame = sweep_fleet(
        "llama-3.1-8b", ["my-gpu", "h100-sxm"], "fp8", Q_([10, 20], "request/s"), 1024, 256,
        Q_(1, "s"), Q_(50, "ms"), registry=registry,
    )  # fmt: skip
    assert len(frame) == 4
    cited = frame.attrs["provenance"].registry_ids
    assert {"my-gpu", "my-gpu-on-demand", "llama-3.1-8b"} <= set(cited), cited


def test_the_example_user_file_is_valid_and_sizes_a_fleet(tmp_path):
    # Issue 24, item 7: a minimal user file to start from (examples/my_registry.yaml, named in the README).
    from pathlib import Path

    from calculator.errors import RegistryError

    example = Path(__file__).resolve().parent.parent / "examples" / "my_registry.yaml"
    reg = load_registry(extra=[example])
    assert reg.accelerator("example-gpu").memory == Q_(96, "GiB")
    plan = size_fleet("llama-3.1-8b", Workload(Q_(20, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
                      SearchSpace("example-gpu", "fp8"), registry=reg)  # fmt: skip
    assert plan.feasible and plan.accelerator == "example-gpu"
    assert plan.cost.per_hour.m_as("USD/hour") == pytest.approx(plan.gpus * 2.75)  # the file's price
    broken = tmp_path / "broken.yaml"
    broken.write_text(example.read_text(encoding="utf-8").replace("    kind: user\n", ""), encoding="utf-8")
    with pytest.raises(RegistryError, match="kind"):
        load_registry(extra=[broken])


def test_a_registry_text_read_twice_is_parsed_once_and_checked_each_time(tmp_path, monkeypatch):
    """The parsed document of a registry text is kept as JSON in the cache folder (calculator._files)."""
    import calculator._files as files
    import calculator.registry as registry_module
    from calculator.errors import RegistryError
    from calculator.units import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    parsed = []
    monkeypatch.setattr(registry_module, "load_yaml", lambda text, *a: parsed.append(text) or files.load_yaml(text, *a))
    path = tmp_path / "mine.yaml"
    path.write_text(USER, encoding="utf-8")
    first = registry_module._read_yaml(path)
    assert len(parsed) == 1 and len(list((tmp_path / "cache" / "yaml").glob("*.json"))) == 1
    assert registry_module._read_yaml(path) == first and len(parsed) == 1  # read back, not parsed
    # A cached document is checked again: a schema version the code no longer reads is refused both times.
    path.write_text("schema_version: 99\n" + USER, encoding="utf-8")
    for _ in range(2):
        with pytest.raises(RegistryError, match="schema_version: expected"):
            registry_module._read_yaml(path)
    assert len(parsed) == 2
    # A file half-written by another process is parsed again; a document JSON would change is never kept.
    for kept in (tmp_path / "cache" / "yaml").glob("*.json"):
        kept.write_text('{"accel', encoding="utf-8")
    path.write_text(USER, encoding="utf-8")
    assert registry_module._read_yaml(path) == first and len(parsed) == 3
    dated = USER.replace('as_of: "2026"', "as_of: 2026-01-05")  # a YAML date: JSON has none
    path.write_text(dated, encoding="utf-8")
    registry_module._read_yaml(path)
    registry_module._read_yaml(path)
    assert len(parsed) == 5
    monkeypatch.setenv(CACHE_ENV, "")  # no cache folder: parsed every time
    registry_module._read_yaml(path.with_name("mine.yaml"))
    assert len(parsed) == 6
