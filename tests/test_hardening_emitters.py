"""Emitted text is inert: launch commands and manifests run nothing but the engine, whatever a registry holds.

A registry file's model alias became the served repository, and the emitted command wrapped an argument
starting with ``$`` in double quotes, so the alias ``$(touch${IFS}/tmp/x)/x`` ran a command when the
printed line was run; a newline in an alias broke out of the manifest's ``# weights:`` comment and added
a document. Two defences, each tested on its own here: the registry refuses such names, and the emitters
quote every argument and comment whatever reaches them (the tests force hostile names past the registry).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from calculator import Q_, kubernetes_manifest, launch_command, size_fleet
from calculator.cli import app
from calculator.errors import RegistryError
from calculator.fleet import SearchSpace, ServingOptions, Speculation, Targets, Workload
from calculator.registry import load_registry

ENGINES = ("vllm", "sglang", "trtllm")
MARKER = "servecalc-was-here"


def hostile_names(marker: Path) -> list[str]:
    """Repository names that run ``touch marker`` if a shell ever reads them as code."""
    m = shlex.quote(str(marker))
    return [
        f"$(touch {m})/x",
        "$(touch${IFS}" + str(marker) + ")/x",
        f"`touch {m}`/x",
        f"x/y;touch {m}",
        f"x/y\ntouch {m}",
        f"x/y' ; touch {m} ; '",
        f'x/y" ; touch {m} ; "',
        "$LEADER_ADDRESS",
        f"x/y && touch {m} #",
        f"x/y\u2028---\napiVersion: v1\nkind: Pod\nmetadata: {{name: evil}}\n# {m}",
    ]


def _plan(engine, speculation=None):
    plan = size_fleet(
        "llama-3.1-8b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"), engine=engine, serving=ServingOptions(speculation=speculation),
    )  # fmt: skip
    assert plan.feasible
    return plan


@pytest.fixture(scope="module")
def plans():
    """Plans covering each emitter's branches: one node, a draft model, two nodes, two nodes of ranks."""
    one = _plan(engine="vllm")
    draft = _plan(engine="vllm", speculation=Speculation("llama-3.2-1b", 3, 0.7))
    two_nodes = dataclasses.replace(
        one, layout=dataclasses.replace(one.layout, tensor_parallel=2, nodes=2), gpus=2 * one.replicas
    )
    ranks = dataclasses.replace(two_nodes, layout=dataclasses.replace(one.layout, data_parallel=2, nodes=2))
    return {"one node": one, "draft": draft, "two nodes": two_nodes, "ranks over two nodes": ranks}


@pytest.fixture
def stubs(tmp_path):
    """A folder of stand-in engines, each recording its arguments (NUL-separated) in a file of its own per run."""
    folder, log = tmp_path / "bin", tmp_path / "calls"
    folder.mkdir()
    log.mkdir()
    for name in ("vllm", "python3", "trtllm-serve", "mpirun"):
        script = folder / name
        script.write_text(
            textwrap.dedent(
                f"""\
                #!/bin/sh
                out=$(mktemp {shlex.quote(str(log))}/call.XXXXXX)
                for a in "$0" "$@"; do printf '%s\\0' "$a" >> "$out"; done
                """
            )
        )
        script.chmod(0o755)
    return folder, log


def _calls(log: Path) -> list[list[str]]:
    """The argument vectors the stand-ins received since the last call, and forget them."""
    calls = []
    for file in sorted(log.iterdir()):
        calls.append(file.read_text().split("\0")[:-1])
        file.unlink()
    return calls


def _run(command: str, folder: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{folder}:/usr/bin:/bin",
        "LEADER_ADDRESS": "10.0.0.1",  # what a user sets on each node (documented in the command's note)
        "NODE_RANK": "1",
        "HOME": str(cwd),
    }
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=30)


def _force(monkeypatch, name: str) -> None:
    """Past the registry's check: ``name`` as the served weights and as any draft model's repository."""
    import calculator.deploy as deploy

    monkeypatch.setattr(deploy, "_hf_name", lambda model: name)
    monkeypatch.setattr(
        deploy,
        "weights_source",
        lambda model, precision, engine, registry=None, served="": deploy.WeightsSource(name, precision, "checkpoint"),
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_printed_launch_lines_run_only_the_engine_whatever_the_repository(engine, plans, stubs, tmp_path, monkeypatch):
    folder, log = stubs
    marker = tmp_path / MARKER
    ran = 0
    for name in hostile_names(marker):
        _force(monkeypatch, name)
        for label, plan in plans.items():
            if engine == "trtllm" and label == "ranks over two nodes":
                continue  # TensorRT-LLM refuses attention ranks of several GPUs (an InputError, tested elsewhere)
            config = launch_command(plan, engine)
            result = _run(config.command, folder, tmp_path)
            assert result.returncode == 0, (label, name, result.stderr)
            assert not marker.exists(), f"{engine}, {label}: the repository {name!r} ran a command"
            calls = _calls(log)
            assert len(calls) == 1, f"{engine}, {label}: {len(calls)} programs ran"
            argv = calls[0]
            assert name in argv, (label, name)  # one argument, verbatim
            ran += 1
    assert ran >= 3 * len(hostile_names(marker))


def test_the_node_variables_the_calculator_writes_still_expand(plans, stubs, tmp_path):
    folder, log = stubs
    for engine in ("vllm", "sglang"):
        _run(launch_command(plans["two nodes"], engine).command, folder, tmp_path)
        [argv] = _calls(log)
        assert "10.0.0.1" in argv or "10.0.0.1:20000" in argv, engine
        assert "$LEADER_ADDRESS" not in argv


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_manifest_holds_exactly_the_documents_meant_whatever_the_repository(engine, plans, tmp_path, monkeypatch):
    for name in hostile_names(tmp_path / MARKER):
        _force(monkeypatch, name)
        for label, plan in plans.items():
            text = kubernetes_manifest(plan, engine)
            documents = [d for d in yaml.safe_load_all(text) if d is not None]
            kinds = [d["kind"] for d in documents]
            workload = "LeaderWorkerSet" if plan.layout.nodes > 1 else "Deployment"
            assert kinds == [workload, "PodDisruptionBudget", "HorizontalPodAutoscaler"], (label, name, kinds)
            if workload == "Deployment":
                args = documents[0]["spec"]["template"]["spec"]["containers"][0]["args"]
                assert name in args, (label, name)  # carried as data, verbatim
            else:
                leader = documents[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
                assert leader["command"][:2] == ["sh", "-c"]
                assert name in shlex.split(leader["command"][2]), (label, name)


def test_a_comment_never_carries_a_line_break():
    from calculator.deploy import shell_comment

    for text in ("a\nb", "a\r\nb", "a\x85b", "a\u2028b", "a\u2029b", "a\x0bb", "a\x0cb", "a\x00b", "a\x1b]0;x\x07b"):
        line = shell_comment(text)
        assert len(line.splitlines()) == 1 and line.startswith("# "), repr(text)
        assert line.isprintable(), repr(text)  # no terminal escape sequence, nothing YAML refuses
        assert yaml.safe_load(line + "\nkey: 1") == {"key": 1}


HOSTILE_ALIAS_FILE = """\
sources:
  - id: my-notes
    title: My notes
    url: https://example.com/notes
    kind: user
models:
  - id: evil-8b
    name: Evil 8B
    provenance: user
    aliases: [{alias}]
    parameters: 8.0e9
    layers: 32
    hidden_size: 4096
    attention_heads: 32
    kv_heads: 8
    head_dim: 128
    attention: gqa
    vocab_size: 128256
    max_context: 131072
    sources:
      - source: my-notes
        fields: [parameters, layers, hidden_size, attention_heads, kv_heads, head_dim, attention, vocab_size, max_context]
"""


@pytest.mark.parametrize(
    "alias",
    [
        '"$(touch${IFS}/tmp/x)/x"',
        '"`id`/x"',
        '"org/name\\n  - id: pwned"',
        '"org/name; rm -rf ~"',
        '"org/name\'"',
        '"-rf"',
        '"a/b/c"',
        '"' + "a" * 101 + '"',
    ],
)
def test_the_registry_refuses_an_alias_that_is_neither_a_repository_nor_a_plain_name(alias, tmp_path):
    file = tmp_path / "evil.yaml"
    file.write_text(HOSTILE_ALIAS_FILE.format(alias=alias))
    with pytest.raises(RegistryError, match=r"field 'aliases.0': expected a model repository 'owner/name'"):
        load_registry(extra=[file])


@pytest.mark.parametrize("alias", ["my-org/Evil-8B.v2", "Evil 8B (preview)", "evil_8b+chat"])
def test_repositories_and_plain_names_are_still_aliases(alias, tmp_path):
    file = tmp_path / "good.yaml"
    file.write_text(HOSTILE_ALIAS_FILE.format(alias=f'"{alias}"'))
    assert load_registry(extra=[file]).model(alias).id == "evil-8b"


def test_the_cli_refuses_the_issues_alias_before_emitting_anything(tmp_path):
    from typer.testing import CliRunner

    file = tmp_path / "evil.yaml"
    file.write_text(HOSTILE_ALIAS_FILE.format(alias='"$(touch${IFS}' + str(tmp_path / MARKER) + ')/x"'))
    args = ["size", "evil-8b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms"]
    result = CliRunner().invoke(app, [*args, "-a", "h100-sxm", "--extra", str(file), "--emit", "vllm"])
    assert result.exit_code == 2
    assert "expected a model repository" in result.output and "vllm serve" not in result.output
    assert not (tmp_path / MARKER).exists()
    assert os.listdir(tmp_path) == ["evil.yaml"]


@pytest.fixture(scope="module")
def pools():
    """A disaggregated plan of two prefill replicas and one decode replica."""
    from calculator.fleet import size_disaggregated

    plan = size_disaggregated(
        "llama-3.1-8b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"), engine="vllm",
    )  # fmt: skip
    assert plan.feasible
    return plan


@pytest.mark.parametrize("engine", ENGINES)
def test_the_disaggregated_commands_run_only_the_pools_and_the_router_whatever_the_repository(
    engine, pools, stubs, tmp_path, monkeypatch
):
    from calculator.deploy_disaggregated import disaggregated_launch

    folder, log = stubs
    marker = tmp_path / MARKER
    for name in hostile_names(marker):
        _force(monkeypatch, name)
        launch = disaggregated_launch(pools, engine)
        result = _run(launch.command, folder, tmp_path)
        assert result.returncode == 0, (name, result.stderr)
        assert not marker.exists(), f"{engine}: the repository {name!r} ran a command"
        calls = _calls(log)
        # the text lists three roles: one prefill replica's command, one decode replica's, the router's
        assert len(calls) == 3, f"{engine}: {len(calls)} programs ran"
        # the two pools' servers received the name as one argument, verbatim (the stand-ins' logs are unordered)
        assert sorted(name in argv for argv in calls) == [False, True, True], name


@pytest.mark.parametrize("engine", ENGINES)
def test_the_disaggregated_manifest_holds_exactly_the_objects_meant_whatever_the_repository(
    engine, pools, tmp_path, monkeypatch
):
    from calculator.kubernetes import disaggregated_manifest

    for name in hostile_names(tmp_path / MARKER):
        _force(monkeypatch, name)
        documents = [d for d in yaml.safe_load_all(disaggregated_manifest(pools, engine)) if d is not None]
        pool = ["Service", "StatefulSet", "PodDisruptionBudget"]
        files = ["ConfigMap"] if engine == "trtllm" else []
        router = ["Deployment", "Service"]
        assert [d["kind"] for d in documents] == [*files, *pool, *files, *pool, *files, *router], name
        for stateful_set in (d for d in documents if d["kind"] == "StatefulSet"):
            assert name in stateful_set["spec"]["template"]["spec"]["containers"][0]["command"]  # data, verbatim
