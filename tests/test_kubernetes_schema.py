"""The Kubernetes manifests a cluster admits: every emitted object validated against the Kubernetes OpenAPI schema.

The schema is ``kubernetes-validate``'s bundled copy of the Kubernetes JSON schemas (strict: unknown fields
fail), not a hand-written check. LeaderWorkerSet is a CRD the package has no schema for: its two pod
templates are validated as the core ``PodTemplate``'s ``template`` (a PodTemplateSpec); only the CRD's own
wrapper (``size``, ``restartPolicy``) is left to LWS's admission webhook.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
import yaml

from calculator import Q_, SearchSpace, Targets, Workload, kubernetes_manifest, size_fleet

#: The Kubernetes release whose schema the objects are checked against (the HPA's autoscaling/v2 and the
#: PDB's policy/v1 are both GA there).
KUBERNETES = "1.30"
WORKLOAD, TARGETS = Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms"))


def _validate(document: dict) -> None:
    kubernetes_validate.validate(document, KUBERNETES, strict=True)


def _as_pod_template(name: str, template: dict) -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": template}


def _documents(plan, engine: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(kubernetes_manifest(plan, engine)) if d]


@pytest.fixture(scope="module")
def one_node_plans():
    space = SearchSpace("h100-sxm", "fp8")
    return {e: size_fleet("llama-3.1-8b", WORKLOAD, TARGETS, space, engine=e) for e in ("vllm", "sglang", "trtllm")}


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_object_of_a_one_node_plan_passes_the_kubernetes_schema(one_node_plans, engine):
    plan = one_node_plans[engine]
    documents = _documents(plan, engine)
    kinds = [d["kind"] for d in documents]
    # TensorRT-LLM's options file travels in a ConfigMap; vLLM's and SGLang's commands need no file.
    expected = ["Deployment", "PodDisruptionBudget", "HorizontalPodAutoscaler"]
    assert kinds == (["ConfigMap", *expected] if engine == "trtllm" else expected)
    for document in documents:
        _validate(document)
    pod = documents[kinds.index("Deployment")]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # GPUs per pod: the plan's layout on one node; requests equal limits (extended resources cannot overcommit).
    gpus = {"nvidia.com/gpu": plan.layout.gpus}
    assert container["resources"] == {"requests": gpus, "limits": gpus}
    # Each server answers GET /health (vLLM 0.14 serve/instrumentator/health.py, SGLang 0.5.9
    # http_server.py, trtllm-serve's documented endpoints), on the container's named port.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert {"name": "http", "containerPort": 30000 if engine == "sglang" else 8000} in container["ports"]
    assert pod["nodeSelector"] == {"servecalc/accelerator": "h100-sxm"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    budget = documents[kinds.index("PodDisruptionBudget")]["spec"]
    assert budget["selector"]["matchLabels"] == documents[kinds.index("Deployment")]["spec"]["selector"]["matchLabels"]


def test_the_schema_check_rejects_a_broken_pod(one_node_plans):
    """The validator is a real check: a list where the schema wants a map, and an unknown field, both fail."""
    deployment = next(d for d in _documents(one_node_plans["vllm"], "vllm") if d["kind"] == "Deployment")
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = ["nvidia.com/gpu"]
    unknown = copy.deepcopy(deployment)
    unknown["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    for broken in (wrong_type, unknown):
        with pytest.raises(kubernetes_validate.ValidationError):
            _validate(broken)


def test_an_amd_plan_requests_amd_gpus():
    plan = size_fleet("llama-3.1-8b", WORKLOAD, TARGETS, SearchSpace("mi300x", "fp8"), engine="vllm")
    deployment = next(d for d in _documents(plan, "vllm") if d["kind"] == "Deployment")
    _validate(deployment)
    pod = deployment["spec"]["template"]["spec"]
    # ROCm's device plugin advertises amd.com/gpu; no nvidia.com/gpu anywhere in the pod.
    assert pod["containers"][0]["resources"]["limits"] == {"amd.com/gpu": plan.layout.gpus}
    assert pod["tolerations"][0]["key"] == "amd.com/gpu" and pod["nodeSelector"] == {"servecalc/accelerator": "mi300x"}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_leader_worker_set_has_schema_valid_pod_templates(engine):
    # DeepSeek-V3 at FP8 on H100s, tensor parallel: a replica spans two nodes of eight GPUs.
    workload, targets = Workload(Q_(50, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms"))
    space = SearchSpace("h100-sxm", "fp8", moe_layouts=("tensor",))
    plan = size_fleet("deepseek-v3", workload, targets, space, engine=engine)
    assert plan.layout.nodes == 2
    documents = _documents(plan, engine)
    group = next(d for d in documents if d["kind"] == "LeaderWorkerSet")
    for document in documents:
        if document is not group:
            _validate(document)
    templates = group["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        _validate(_as_pod_template(f"{group['metadata']['name']}-{role.lower()}", templates[role]))
        container = templates[role]["spec"]["containers"][0]
        assert container["resources"]["requests"] == {"nvidia.com/gpu": 8}  # 16 GPUs over two nodes
    leader, worker = (templates[r]["spec"]["containers"][0] for r in ("leaderTemplate", "workerTemplate"))
    assert leader["readinessProbe"]["httpGet"]["path"] == "/health" and "readinessProbe" not in worker
    kinds = {d["kind"] for d in documents}
    assert {"PodDisruptionBudget", "HorizontalPodAutoscaler"} <= kinds


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_disaggregated_plans_pools_and_router_pass_the_schema_and_the_router_names_each_pod(engine):
    from calculator.deploy_disaggregated import ROUTER_PORT
    from calculator.fleet import size_disaggregated
    from calculator.kubernetes import disaggregated_manifest

    workload, targets = Workload(Q_(20, "request/s"), 2048, 256), Targets(Q_(1, "s"), Q_(40, "ms"))
    plan = size_disaggregated("llama-3.1-70b", workload, targets, SearchSpace("h100-sxm", "fp8"), engine="vllm")
    documents = [d for d in yaml.safe_load_all(disaggregated_manifest(plan, engine)) if d]
    for document in documents:
        _validate(document)
    sets = [d for d in documents if d["kind"] == "StatefulSet"]
    services = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"}
    assert len(sets) == 2
    router = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    listed = " ".join(router["command"]) + " ".join(
        d["data"].get("disagg_config.yaml", "") for d in documents if d["kind"] == "ConfigMap"
    )
    for stateful_set, pool in zip(sets, ("prefill", "decode"), strict=True):
        spec = stateful_set["spec"]
        assert spec["replicas"] == getattr(plan, pool)["replicas"]
        # each pod is <set>-<i>.<service>: the headless Service the set names, which selects its pods
        service = services[spec["serviceName"]]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
        for index in range(spec["replicas"]):
            assert f"{stateful_set['metadata']['name']}-{index}.{spec['serviceName']}" in listed
        container = spec["template"]["spec"]["containers"][0]
        gpus = {"nvidia.com/gpu": getattr(plan, pool)["tensor_parallel"]}
        assert container["resources"] == {"requests": gpus, "limits": gpus}
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
        assert spec["template"]["spec"]["nodeSelector"] == {"servecalc/accelerator": "h100-sxm"}
    assert router["ports"] == [{"name": "http", "containerPort": ROUTER_PORT}] and "resources" not in router
    assert [d["kind"] for d in documents].count("PodDisruptionBudget") == 2
