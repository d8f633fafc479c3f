"""Plan files carry no paths: a plan records its user registry by content, and loading one opens no file it names.

A plan's ``registry_files`` was loaded as given, so ``"registry_files": ["../../../../etc/shadow"]`` in a
plan file made ``servecalc simulate --plan`` read that file and print its lines inside the error, and
``FleetPlan.from_json_dict`` then ``launch_command`` did the same from the API.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calculator import Q_, FleetPlan, SearchSpace, Targets, Workload, launch_command, size_fleet
from calculator.cli import app
from calculator.errors import CalculatorError, InputError, RegistryError
from calculator.fleet import Layout
from calculator.registry import RegistryDocument, load_registry

#: A user registry adding an accelerator and its price (examples/my_registry.yaml).
USER_FILE = "examples/my_registry.yaml"
SECRET = "root:$6$not-a-real-hash:19000:0:99999:7:::"


@pytest.fixture(scope="module")
def user_registry(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user")
    path = folder / "mine.yaml"
    shutil.copy(USER_FILE, path)
    return path, load_registry(extra=[path])


@pytest.fixture(scope="module")
def user_plan(user_registry):
    _, registry = user_registry
    gpu = next(a for a in registry.accelerators if a not in load_registry().accelerators)
    plan = size_fleet(
        "llama-3.1-8b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace(gpu, "fp8"), registry=registry, engine="vllm",
    )  # fmt: skip
    assert plan.feasible
    return plan


def test_a_plan_records_its_user_registry_by_content_not_by_path(user_registry, user_plan):
    path, _ = user_registry
    [document] = user_plan.registry_documents
    assert document.name == "mine.yaml" and document.text == path.read_text(encoding="utf-8")
    text = json.dumps(user_plan.to_json_dict())
    assert str(path.parent) not in text and "registry_files" not in text
    assert FleetPlan.from_json_dict(json.loads(text)).registry_documents == (document,)


def test_a_plan_file_works_after_its_registry_file_is_gone(user_registry, user_plan, tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(user_plan.to_json_dict()))
    path, _ = user_registry
    moved = tmp_path / "elsewhere.yaml"
    shutil.move(path, moved)
    try:
        plan = FleetPlan.from_json_dict(json.loads(plan_file.read_text()))
        assert launch_command(plan, "vllm").flags["--tensor-parallel-size"] == str(plan.layout.stage_gpus)
        result = CliRunner().invoke(app, ["simulate", "--plan", str(plan_file), "--requests", "300"])
        assert result.exit_code == 0, result.output
    finally:
        shutil.move(moved, path)


@pytest.fixture
def foreign_file(tmp_path):
    """A file outside the project that a tampered plan names: its content must never be shown."""
    secret = tmp_path / "shadow"
    secret.write_text(f"{SECRET}\ndaemon: x\nbin: {SECRET}\n")
    return secret


def _tampered(plan: FleetPlan, **fields) -> dict:
    data = plan.to_json_dict()
    data.update(fields)
    return data


def test_a_plan_naming_registry_files_by_path_is_refused_without_opening_them(user_plan, foreign_file, monkeypatch):
    opened = []

    def spying(real):
        def spy(path, *args, **kwargs):
            opened.append(str(path))
            return real(path, *args, **kwargs)

        return spy

    import builtins
    import io
    import os

    for module in (os, io, builtins):
        monkeypatch.setattr(module, "open", spying(module.open))
    for files in ([str(foreign_file)], ["../../../../../../" + str(foreign_file)]):
        with pytest.raises(InputError, match="a plan's paths are not opened: give the files with --extra") as error:
            FleetPlan.from_json_dict(_tampered(user_plan, registry_files=files))
        assert SECRET not in str(error.value)
    assert not any("shadow" in path for path in opened)


def test_the_cli_refuses_a_plan_naming_a_foreign_file_and_prints_none_of_it(user_plan, foreign_file, tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(_tampered(user_plan, registry_files=["../../../../../../" + str(foreign_file)])))
    result = CliRunner().invoke(app, ["simulate", "--plan", str(plan_file)])
    assert result.exit_code == 2
    assert "--extra" in result.output and SECRET not in result.output and "daemon" not in result.output


@pytest.mark.parametrize("name", ["../../etc/shadow", "/etc/shadow", "a\nb", "", "x" * 256, 42])
def test_a_document_name_is_a_label_never_a_path(user_plan, name):
    [document] = user_plan.registry_documents
    record = {"name": name, "text": document.text, "sha256": document.sha256}
    with pytest.raises(CalculatorError, match="must be a file name without folders"):
        FleetPlan.from_json_dict(_tampered(user_plan, registry_documents=[record]))


def test_a_document_edited_after_the_plan_was_written_is_refused(user_plan):
    [document] = user_plan.registry_documents
    record = {"name": document.name, "text": document.text.replace("2.75", "0.01"), "sha256": document.sha256}
    with pytest.raises(RegistryError, match="does not match its recorded SHA-256"):
        FleetPlan.from_json_dict(_tampered(user_plan, registry_documents=[record]))


def test_a_documents_content_is_checked_as_a_registry_file_is(user_plan):
    text = "accelerators: []\naccelerators: []\n"
    plan = FleetPlan.from_json_dict(_tampered(user_plan, registry_documents=[{"name": "mine.yaml", "text": text}]))
    with pytest.raises(RegistryError, match="given twice"):
        launch_command(plan, "vllm")


def test_extra_files_replace_a_plans_documents_on_the_command_line(user_registry, user_plan, tmp_path):
    path, _ = user_registry
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(_tampered(user_plan, registry_documents=[])))
    lost = CliRunner().invoke(app, ["simulate", "--plan", str(plan_file), "--requests", "300"])
    assert lost.exit_code == 2  # the plan's GPU is the user's, unknown without its registry
    given = CliRunner().invoke(app, ["simulate", "--plan", str(plan_file), "--requests", "300", "--extra", str(path)])
    assert given.exit_code == 0, given.output


def test_an_older_plan_without_registry_files_still_loads(user_plan):
    data = _tampered(user_plan, registry_files=[])
    data.pop("registry_documents")
    assert FleetPlan.from_json_dict(data).registry_documents == ()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_plan_file_is_refused_at_once(device):
    result = CliRunner().invoke(app, ["simulate", "--plan", device])
    assert result.exit_code == 2 and "is not a regular file" in result.output


def test_a_registry_document_reads_a_user_file_with_the_registry_limits(tmp_path):
    with pytest.raises(RegistryError, match="is not a regular file"):
        RegistryDocument.read("/dev/zero")
    foreign = tmp_path / "passwd.yaml"
    foreign.write_text(f"root: '{SECRET}'\ndaemon: x\n")
    with pytest.raises(RegistryError, match="not a registry file") as error:
        load_registry(extra=[RegistryDocument.read(foreign)])
    assert SECRET not in str(error.value) and "daemon" not in str(error.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"feasible": true, "model": 1' + b"0" * 5000 + b', "replicas": 1}', "more than 4,300 digits"),
        (b'{"feasible": true, "model": ' + b"[" * 990 + b"]" * 990 + b', "replicas": 1}', "nested too deeply"),
        (b'{"feasible": true, "feasible": false, "model": "x", "replicas": 1}', "'feasible' is given twice"),
        (b'{"feasible": true, "model": "\xff", "replicas": 1}', "is not UTF-8 text"),
    ],
    ids=["5000 digits", "990 deep", "key twice", "not UTF-8"],
)
def test_a_plan_file_the_json_reader_cannot_take_is_one_line(tmp_path, content, message):
    plan_file = tmp_path / "plan.json"
    plan_file.write_bytes(content)
    result = CliRunner().invoke(app, ["simulate", "--plan", str(plan_file)])
    assert result.exit_code == 2 and message in result.output and len(result.output.splitlines()) == 1


@pytest.mark.parametrize("field", ["model", "accelerator", "precision", "engine", "kv_precision"])
@pytest.mark.parametrize("value", ["vllm\x00", "x\x1b]0;pwned\x07", "a\nb", "$(id)", "H100"])
def test_a_plans_ids_are_registry_ids(user_plan, field, value):
    with pytest.raises(InputError, match=f"field '{field}' must be a registry id"):
        FleetPlan.from_json_dict(_tampered(user_plan, **{field: value}))


def test_a_plans_registry_document_has_a_registry_files_size_limit(monkeypatch):
    monkeypatch.setenv("SERVECALC_REGISTRY_MAX_BYTES", "4096")
    document = RegistryDocument("mine.yaml", "# " + "x" * 5000 + "\n")
    with pytest.raises(RegistryError, match=r"mine\.yaml has more than 4,096 bytes"):
        load_registry(extra=[document])


# ------------------------------------------------------------------ plan files of the flat shape (issue 52)

#: Plan files written by the sizer before the plan had parts (``servecalc size --json``, every field at the top).
FLAT_PLANS = Path(__file__).parent / "plans"


def test_a_flat_plan_file_loads_into_the_parts_as_the_sizer_plans_it_today():
    old = json.loads((FLAT_PLANS / "flat-deepseek-v3-attention-dp.json").read_text())
    assert {"tensor_parallel", "ttft", "cost_per_hour", "power"} <= set(old) and "layout" not in old  # the old shape
    plan = FleetPlan.from_json_dict(old)
    # The flat file counted TP 8 over 8 attention ranks; the layout's TP is a rank's, one GPU.
    assert plan.layout == Layout(tensor_parallel=1, data_parallel=8, expert_parallel=8)
    assert plan.gpus == plan.replicas * plan.layout.gpus == old["gpus"]
    assert plan.service.ttft.m_as("s") == old["ttft"]["value"] and plan.service.utilization == old["utilization"]
    assert plan.service.tpot_interval[1].m_as("s") == old["tpot_interval"][1]["value"]
    assert plan.cost.per_hour.m_as("USD/hour") == old["cost_per_hour"]["value"]
    assert plan.energy.per_million_output_tokens.m_as("kWh") == old["energy_per_million_output_tokens"]["value"]
    # the same inputs sized now give the same plan, in parts
    now = size_fleet(plan.model, plan.workload, plan.targets, SearchSpace("h200-sxm", "fp8"), engine="trtllm")
    # what the step times rest on was not recorded in the flat files: the loaded plan does not claim it
    assert plan.service.kernel_basis == "" and now.service.kernel_basis.startswith("measured kernel tables")
    # The same fleet and service; the batch cap is the largest feasible on these replicas since the sizer became
    # monotone in the utilization cap (issue 53), 3,328 where the file has 1,984, so a replica's throughput at its
    # cap and its load differ from the file's.
    # Since 2026-12-07 TensorRT-LLM's MoE layers are priced with its own measured kernel (the file's plan used the
    # median of vLLM's and SGLang's): the same layout, on fewer replicas, each faster per token.
    assert now.layout == plan.layout and now.replicas < plan.replicas
    assert now.service.tpot < plan.service.tpot and now.cost.per_hour < plan.cost.per_hour
    assert now.batch >= plan.batch
    # the launch command of the loaded plan is the file's (its batch cap per attention rank: 1,984 / 8 = 248)
    flags = launch_command(plan, "vllm").flags
    assert flags["--max-num-seqs"] == str(plan.batch // 8) and flags["--data-parallel-size"] == "8"


def test_a_flat_infeasible_plan_file_loads_without_parts():
    old = json.loads((FLAT_PLANS / "flat-infeasible.json").read_text())
    assert old["feasible"] is False and old["tensor_parallel"] == 0 and old["cost_per_hour"] is None
    plan = FleetPlan.from_json_dict(old)
    assert not plan.feasible and plan.reason == old["reason"]
    assert plan.layout is plan.service is plan.cost is plan.energy is None  # no zeros that read as answers
    assert plan.closest["tpot"].m_as("s") == old["closest"]["tpot"]["value"]


def test_a_plan_in_parts_round_trips_and_refuses_parts_when_infeasible(user_plan):
    plan = user_plan
    again = FleetPlan.from_json_dict(json.loads(json.dumps(plan.to_json_dict())))
    assert again.to_json_dict() == plan.to_json_dict()
    assert (again.layout, again.service, again.cost, again.energy) == (
        plan.layout,
        plan.service,
        plan.cost,
        plan.energy,
    )
    tampered = {**json.loads(json.dumps(plan.to_json_dict())), "feasible": False}
    with pytest.raises(InputError, match="an infeasible plan has no parts"):
        FleetPlan.from_json_dict(tampered)
