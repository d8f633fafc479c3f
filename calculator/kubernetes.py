"""The Kubernetes sketch of a fleet plan (:func:`kubernetes_manifest`), built on :mod:`calculator.deploy`'s command.

A Deployment of ``plan.replicas`` pods running :func:`~calculator.deploy.launch_command`'s command (a
LeaderWorkerSet where a replica spans nodes) with health probes, GPU requests, a node selector and GPU
tolerations; a ConfigMap of the engine's files mounted at ``/etc/servecalc``; a PodDisruptionBudget; and a
HorizontalPodAutoscaler on the running requests per pod. :func:`disaggregated_manifest` does the same for a
disaggregated plan's two pools (StatefulSets behind headless Services, so the router names each pod) and its
router.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from .deploy import (
    EXECUTABLES,
    HEADROOM,
    IMAGES,
    PORTS,
    SCALING_METRIC,
    LaunchConfig,
    ShellVariable,
    WeightsSource,
    flag_parts,
    launch_command,
    plan_parts,
    plan_registry,
    shell_comment,
    shell_line,
)
from .errors import InputError
from .types import Fraction

if TYPE_CHECKING:
    from .fleet import DisaggregatedPlan, FleetPlan
    from .registry import Registry

__all__ = ["disaggregated_manifest", "kubernetes_manifest"]


#: Where the Kubernetes sketch mounts the engine's options file.
_CONFIG_DIR = "/etc/servecalc"

#: Each server's health endpoint (200 when up, 503 while starting or failed). vLLM 0.14:
#: ``vllm/entrypoints/serve/instrumentator/health.py`` (GET /health, 503 when the engine's check fails); SGLang 0.5.9:
#: ``sglang/srt/entrypoints/http_server.py`` (GET /health, 503 while starting or shutting down); TensorRT-LLM:
#: ``docs/source/commands/trtllm-serve.rst`` (trtllm-serve serves /health beside /metrics and /version).
HEALTH_PATHS = {"vllm": "/health", "sglang": "/health", "trtllm": "/health"}
#: The extended resource each vendor's Kubernetes device plugin advertises, by the registry's ``vendor``
#: (NVIDIA/k8s-device-plugin: ``nvidia.com/gpu``; ROCm/k8s-device-plugin: ``amd.com/gpu``).
GPU_RESOURCES = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu"}
#: The node label the pods select their accelerator by. Its value is the registry's accelerator id, which the
#: cluster's admin sets (``kubectl label node NODE servecalc/accelerator=h100_sxm``): the product names GPU
#: feature discovery writes in ``nvidia.com/gpu.product`` depend on the driver's naming, so none is assumed.
ACCELERATOR_LABEL = "servecalc/accelerator"
#: How long the startup probe waits for the weights to load before the liveness probe takes over: 180 x 10 s.
_STARTUP_CHECKS = 180


def _mounted(argument: str, files: dict[str, str]) -> str:
    """A command argument naming one of the config's files, as the path where the pod mounts it."""
    return f"{_CONFIG_DIR}/{argument}" if argument in files else argument


def _mounted_text(text: str, files: dict[str, str]) -> str:
    """A file of the config with the values naming its other files as the paths where the pod mounts them."""
    for other in files:
        text = text.replace(f": {other}\n", f": {_CONFIG_DIR}/{other}\n")
    return text


def _weights_text(weights: WeightsSource) -> str:
    """How the weights reach the plan's precision, in a few words."""
    if weights.method == "online":
        return f"quantized to {weights.precision} at load time"
    return f"{weights.precision} checkpoint" + (f", registry source {weights.source}" if weights.source else "")


def _dns_name(text: str) -> str:
    """A Kubernetes object name (DNS-1123 label) from ``text``."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-") or "servecalc"


def kubernetes_manifest(
    plan: FleetPlan,
    engine: str,
    *,
    image: str | None = None,
    target_utilization: Fraction | None = None,
    registry: Registry | None = None,
) -> str:
    """A Deployment of ``plan`` on ``engine``, its disruption budget and a HorizontalPodAutoscaler, as YAML documents.

    The Deployment runs ``plan.replicas`` pods, each requesting (and limited to) ``plan.layout.gpus`` GPUs
    (``GPU_RESOURCES`` by the accelerator's vendor), on nodes labelled ``ACCELERATOR_LABEL`` with the plan's
    accelerator and tolerating the GPU taint, running :func:`launch_command`'s arguments, with startup,
    readiness and liveness probes on the server's health endpoint (``HEALTH_PATHS``). A PodDisruptionBudget lets
    voluntary disruptions take one pod at a time. The autoscaler keeps at least the
    planned replicas, allows ``HEADROOM`` times as many, and scales on the running requests per pod
    (a custom metric, ``SCALING_METRIC``) with the target ``plan.service.running_batch`` (at least 1): the running
    batch at the planned load, where the plan's TTFT and TPOT were evaluated; or, with
    ``target_utilization``, that fraction of the batch cap.
    """
    config = launch_command(plan, engine, registry=registry)
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise InputError(f"kubernetes_manifest(): argument 'image' must be a container image name, got {image!r}")
    target, why = _scaling_target(plan, target_utilization)
    running = plan_parts(plan)[1].running_batch
    import yaml

    from .fleet.plan import layout_text

    name = _dns_name(f"{plan.model}-{config.engine}")
    placement = _placement(plan, registry)
    config_map, deployment = _deployment(plan, config, name, image, placement)
    weights = config.weights
    assert weights is not None  # launch_command always says where the weights come from
    group = f"# each replica is a LeaderWorkerSet group of {config.nodes} pods, one per node (install LWS: "
    group += "kubernetes-sigs/lws; vLLM's LWS deployment page)"
    head = [
        shell_comment(
            f"servecalc fleet plan: {plan.gpus} x {plan.accelerator} at {plan.precision}, {plan.replicas} replicas "
            f"of {layout_text(plan.layout)}, batch cap {plan.batch}, engine {config.engine}"
        ),
        shell_comment(f"weights: {weights.repo} ({_weights_text(weights)}); KV cache {config.kv_precision}"),
        "# pin the image to a tested version; label the nodes with this accelerator "
        f"(kubectl label node NODE {ACCELERATOR_LABEL}={plan.accelerator})",
        *([group] if config.nodes > 1 else []),
        *(shell_comment(note) for note in config.notes),
    ]
    scaling = [
        f"# Autoscaler sketch. Signal: '{SCALING_METRIC}', the requests running on a pod (the engine's gauge of",
        "# running requests, exposed per pod by a custom-metrics adapter such as the Prometheus adapter).",
        f"# The plan loads each replica to at most {plan.max_utilization:g} of its throughput with its batch cap of",
        f"# {plan.batch} full; at the planned load about {running:.1f} sequences run on each replica.",
        *why,
    ]
    documents = [yaml.safe_dump(config_map, sort_keys=False).rstrip("\n"), "---"] if config_map else []
    return (
        "\n".join(
            [
                *head,
                *documents,
                yaml.safe_dump(deployment, sort_keys=False).rstrip("\n"),
                "---",
                *_budget_comment(plan),
                yaml.safe_dump(_disruption_budget(name), sort_keys=False).rstrip("\n"),
                "---",
                *scaling,
                yaml.safe_dump(_autoscaler(plan, name, target), sort_keys=False).rstrip("\n"),
            ]
        )
        + "\n"
    )


def _scaling_target(plan: FleetPlan, target_utilization: Fraction | None) -> tuple[float, list[str]]:
    """The running requests per pod the autoscaler holds, and the comment lines that say why."""
    from ._support import probability

    if target_utilization is None:
        target = max(plan_parts(plan)[1].running_batch, 1.0)
        return target, [
            f"# The target, {target:.4g} running requests per pod, is the running batch at the planned load",
            "# (Little's law), where the plan's TTFT and TPOT were evaluated: above it a pod runs past the",
            "# point the targets were checked at, so pods are added (never fewer than planned).",
        ]
    utilization = float(probability("kubernetes_manifest", "target_utilization", target_utilization))
    if not utilization > 0:
        raise InputError("kubernetes_manifest(): argument 'target_utilization' must be above 0")
    target = utilization * int(plan.batch)
    return target, [
        f"# The target, {utilization:g} x the batch cap of {plan.batch} = {target:.4g} running requests per",
        "# pod, was asked for (target_utilization); the plan's targets were checked at the running batch above.",
    ]


def _placement(plan: FleetPlan, registry: Registry | None) -> dict[str, Any]:
    """Where the plan's pods run: the GPU resource and count per pod, the node selector and the GPU tolerations."""
    vendor = plan_registry(plan, registry).accelerator(plan.accelerator).vendor
    if vendor not in GPU_RESOURCES:
        raise InputError(
            f"kubernetes_manifest(): accelerator '{plan.accelerator}' is from vendor {vendor!r}, whose Kubernetes "
            f"GPU resource is not known; expected one of {sorted(GPU_RESOURCES)}"
        )
    resource = GPU_RESOURCES[vendor]
    return {
        "resource": resource,
        "gpus": plan_parts(plan)[0].gpus // plan_parts(plan)[0].nodes,
        "nodeSelector": {ACCELERATOR_LABEL: plan.accelerator},
        "tolerations": [{"key": resource, "operator": "Exists", "effect": "NoSchedule"}],
    }


def _probes(engine: str) -> dict[str, Any]:
    """Startup, readiness and liveness probes on the server's health endpoint (its named port ``http``)."""
    timing = {"startupProbe": (10, _STARTUP_CHECKS), "readinessProbe": (5, 2), "livenessProbe": (10, 3)}
    return {
        probe: {"httpGet": {"path": HEALTH_PATHS[engine], "port": "http"}, "periodSeconds": p, "failureThreshold": n}
        for probe, (p, n) in timing.items()
    }


def _container(
    config: LaunchConfig, name: str, image: str | None, placement: dict[str, Any], mounts: list[Any]
) -> dict[str, Any]:
    """A container of the engine on the pod's GPUs: requests and limits both the plan's GPUs per pod."""
    gpus = {placement["resource"]: placement["gpus"]}
    return {
        "name": name,
        "image": image or IMAGES[config.engine],
        "resources": {"requests": dict(gpus), "limits": dict(gpus)},
        "volumeMounts": copy.deepcopy(mounts),
    }


def _pod(labels: dict[str, str], container: dict[str, Any], volumes: list[Any], placement: dict[str, Any]) -> Any:
    """A pod template: the container on a node with the accelerator, tolerating its GPU taint."""
    return {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [container],
            "volumes": copy.deepcopy(volumes),
            "nodeSelector": dict(placement["nodeSelector"]),
            "tolerations": copy.deepcopy(placement["tolerations"]),
        },
    }


def _deployment(
    plan: FleetPlan, config: LaunchConfig, name: str, image: str | None, placement: dict[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The ConfigMap of the engine's files (None without files) and the Deployment of the plan's pods."""
    executable = len(EXECUTABLES[config.engine])
    arguments = [_mounted(part, config.files) for part in config.arguments[executable:]]
    mounts: list[dict[str, Any]] = [{"name": "shm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    config_map = None
    if config.files:
        mounts.append({"name": "engine-config", "mountPath": _CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "engine-config", "configMap": {"name": f"{name}-config"}})
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "labels": {"app": name}},
            "data": {file: _mounted_text(text, config.files) for file, text in config.files.items()},
        }
    if config.nodes > 1:
        return config_map, _leader_worker_set(plan, config, name, image, (mounts, volumes), placement)
    container = {
        **_container(config, config.engine, image, placement, mounts),
        "command": list(config.arguments[:executable]),
        "args": arguments,
        "ports": [{"name": "http", "containerPort": PORTS[config.engine]}],
        **_probes(config.engine),
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": int(plan.replicas),
            "selector": {"matchLabels": {"app": name}},
            "template": _pod({"app": name}, container, volumes, placement),
        },
    }
    return config_map, deployment


def _budget_comment(plan: FleetPlan) -> list[str]:
    """What the disruption budget allows, for the plan's replicas."""
    if int(plan.replicas) == 1:
        return ["# Disruption budget: with one replica, a drain or upgrade stops the service until the pod returns."]
    return [
        "# Disruption budget: a drain or upgrade takes down one replica at a time; meanwhile the other",
        f"# {int(plan.replicas) - 1} carry the load the plan spread over {plan.replicas}.",
    ]


def _disruption_budget(name: str) -> dict[str, Any]:
    """A PodDisruptionBudget letting voluntary disruptions (drains, upgrades) take one of the plan's pods at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}},
    }


#: The LeaderWorkerSet API a replica over several nodes runs as (kubernetes-sigs/lws; vLLM's LWS deployment page).
LWS_API = "leaderworkerset.x-k8s.io/v1"
#: What LWS sets in each pod of a group: the leader pod's address and the pod's index in its group (0: the leader).
_LWS_VARIABLES = {"LEADER_ADDRESS": "LWS_LEADER_ADDRESS", "NODE_RANK": "LWS_WORKER_INDEX"}


def _leader_worker_set(
    plan: FleetPlan,
    config: LaunchConfig,
    name: str,
    image: str | None,
    storage: tuple[list[Any], list[Any]],
    placement: dict[str, Any],
) -> dict[str, Any]:
    """A LeaderWorkerSet of ``plan.replicas`` groups of ``config.nodes`` pods: one replica over several nodes.

    Each pod runs the engine's command through ``sh -c`` with LWS's own variables in place of
    :data:`NODE_VARIABLES` (the leader's address, the pod's index in its group), the worker pods with
    ``config.worker_flags``; only the leader exposes the HTTP port and is probed on the health endpoint
    (the workers run no server).
    """
    mounts, volumes = storage
    if config.engine == "trtllm":
        raise InputError(
            f"the plan's replica spans {config.nodes} nodes; TensorRT-LLM starts them as one MPI world (mpirun or "
            "srun), which the Kubernetes sketch does not cover: emit for vllm or sglang, or use the trtllm command"
        )
    arguments = [_mounted(part, config.files) for part in config.arguments]

    def lws(argument: str) -> str:  # the node variables, renamed to LWS's own; nothing else is touched
        if not isinstance(argument, ShellVariable):
            return argument
        for ours, theirs in _LWS_VARIABLES.items():
            argument = argument.replace(f"${ours}", f"${theirs}").replace(f"$(({ours}", f"$(({theirs}")
        return ShellVariable(argument)

    def line(extra: dict[str, str | None]) -> str:
        return shell_line([lws(a) for a in (*arguments, *flag_parts(extra))])

    def pod(role: str, extra: dict[str, str | None]) -> dict[str, Any]:
        container = _container(config, f"{config.engine}-{role}", image, placement, mounts)
        container["command"] = ["sh", "-c", line(extra)]
        if role == "leader":
            container["ports"] = [{"name": "http", "containerPort": PORTS[config.engine]}]
            container.update(_probes(config.engine))
        return _pod({"app": name, "role": role}, container, volumes, placement)

    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": int(plan.replicas),
            "leaderWorkerTemplate": {
                "size": config.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod("leader", {}),
                "workerTemplate": pod("worker", config.worker_flags),
            },
        },
    }


def _autoscaler(plan: FleetPlan, name: str, target: float) -> dict[str, Any]:
    """A HorizontalPodAutoscaler on the running requests per pod: the planned replicas up to HEADROOM times."""
    several = plan_parts(plan)[0].nodes > 1
    reference = (
        {"apiVersion": LWS_API, "kind": "LeaderWorkerSet"}
        if several
        else {"apiVersion": "apps/v1", "kind": "Deployment"}
    )
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {**reference, "name": name},
            "minReplicas": int(plan.replicas),
            "maxReplicas": HEADROOM * int(plan.replicas),
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": SCALING_METRIC},
                        "target": {"type": "AverageValue", "averageValue": f"{target:.4g}"},
                    },
                }
            ],
        },
    }


def disaggregated_manifest(
    plan: DisaggregatedPlan, engine: str, *, image: str | None = None, registry: Registry | None = None
) -> str:
    """A disaggregated plan's pools and router on ``engine`` as Kubernetes objects, as YAML documents.

    Each pool is a StatefulSet of its replicas behind a headless Service of the same name, so that pod ``i`` is
    ``<name>-i.<name>``, the address the router lists (:func:`~calculator.deploy_disaggregated.disaggregated_launch`'s
    commands); its pods are placed, probed and sized as :func:`kubernetes_manifest`'s, with a PodDisruptionBudget
    and a ConfigMap of the engine's files. On vLLM each pod sets ``VLLM_NIXL_SIDE_CHANNEL_HOST`` to its own IP.
    The router is a Deployment of one pod (no GPU) behind a Service on its port: the clients' endpoint. No
    autoscaler: the pools scale separately, and the plan sized each for its own load.
    """
    import yaml

    from .deploy import engine_name
    from .deploy_disaggregated import ROUTER_PORT, pool_launch

    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise InputError(f"disaggregated_manifest(): argument 'image' must be a container image name, got {image!r}")
    name = engine_name(engine)
    names = {pool: _dns_name(f"{plan.model}-{name}-{pool}") for pool in ("prefill", "decode")}
    launch = pool_launch(plan, name, registry, lambda pool, index: f"{names[pool]}-{index}.{names[pool]}")
    head = [
        shell_comment(f"servecalc disaggregated plan: {plan.gpus} GPUs, engine {name}; router on port {ROUTER_PORT}"),
        "# pin the image to a tested version; label the nodes with their accelerator (kubectl label node NODE "
        + ", ".join(sorted({f"{ACCELERATOR_LABEL}={getattr(plan, pool)['accelerator']}" for pool in names}))
        + ")",
    ]
    documents: list[dict[str, Any]] = []
    for pool in ("prefill", "decode"):
        config = getattr(launch, pool)
        head += [shell_comment(f"{pool} pool: {note}") for note in config.notes]
        documents += _pool_objects(plan.pool_plan(pool), config, names[pool], image, registry)
    head += [shell_comment(f"router: {note}") for note in launch.router.notes]
    documents += _router_objects(launch.router, _dns_name(f"{plan.model}-{name}-router"), image, ROUTER_PORT)
    return "\n".join([*head, "\n---\n".join(yaml.safe_dump(d, sort_keys=False).rstrip("\n") for d in documents)]) + "\n"


def _config_map(name: str, files: dict[str, str]) -> tuple[dict[str, Any] | None, list[Any], list[Any]]:
    """The ConfigMap of a command's files (None without files), and the pod's volume mounts and volumes."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    if not files:
        return None, mounts, volumes
    mounts.append({"name": "engine-config", "mountPath": _CONFIG_DIR, "readOnly": True})
    volumes.append({"name": "engine-config", "configMap": {"name": f"{name}-config"}})
    data = {file: _mounted_text(text, files) for file, text in files.items()}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "labels": {"app": name}},
        "data": data,
    }
    return config_map, mounts, volumes


def _pool_objects(
    pool: FleetPlan, config: LaunchConfig, name: str, image: str | None, registry: Registry | None
) -> list[dict[str, Any]]:
    """One pool: its ConfigMap (if any), headless Service, StatefulSet and disruption budget."""
    placement = _placement(pool, registry)
    config_map, mounts, volumes = _config_map(name, config.files)
    mounts.insert(0, {"name": "shm", "mountPath": "/dev/shm"})
    volumes.insert(0, {"name": "shm", "emptyDir": {"medium": "Memory"}})
    container = {
        **_container(config, config.engine, image, placement, mounts),
        "command": [_mounted(part, config.files) for part in config.arguments],
        "ports": [{"name": "http", "containerPort": PORTS[config.engine]}],
        **_probes(config.engine),
    }
    if config.engine == "vllm":  # NIXL's side channel on the pod's own address (vLLM's NixlConnector guide)
        container["env"] = [
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
        ]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": PORTS[config.engine], "targetPort": "http"}],
        },
    }
    stateful_set = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "serviceName": name,
            "replicas": int(pool.replicas),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": _pod({"app": name}, container, volumes, placement),
        },
    }
    return [*([config_map] if config_map else []), service, stateful_set, _disruption_budget(name)]


def _router_objects(config: LaunchConfig, name: str, image: str | None, port: int) -> list[dict[str, Any]]:
    """The router: its ConfigMap (TensorRT-LLM's server file), a Deployment of one pod and its Service."""
    config_map, mounts, volumes = _config_map(name, config.files)
    container = {
        "name": "router",
        "image": image or IMAGES[config.engine],
        "command": [_mounted(part, config.files) for part in config.arguments],
        "ports": [{"name": "http", "containerPort": port}],
        "volumeMounts": mounts,
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "volumes": volumes},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
    }
    return [*([config_map] if config_map else []), deployment, service]
