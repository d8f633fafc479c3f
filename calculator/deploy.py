"""Deployable output of a fleet plan: each engine's server command line and a Kubernetes sketch.

:func:`launch_command` turns a feasible :class:`~calculator.fleet.FleetPlan` into the command that
starts one replica on vLLM, SGLang or TensorRT-LLM: the plan's tensor-parallel degree and batch cap,
the engine profile's memory fraction, the token budget (the plan's chunk size, else the profile's
default for the accelerator), an FP8 KV cache when the plan assumed one, and the model's Hugging
Face name. Every flag is one the engine documents (``DOCUMENTED_FLAGS`` holds the page each was read
from). :func:`kubernetes_manifest` wraps that command into a Deployment of ``plan.replicas`` pods with
``plan.tensor_parallel`` GPUs each and a HorizontalPodAutoscaler sketch. Settings the plan assumed
but no flag of the command carries (TensorRT-LLM's KV-cache dtype and speculative decoding, which live in
its options file) are stated in the result's ``notes`` and as comment lines, never invented. A plan
sized with speculative decoding gets the engine's draft-model flags (vLLM's ``--speculative-config``,
SGLang's STANDALONE algorithm) with the plan's draft model and draft length.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .results import Result
from .types import Fraction

if TYPE_CHECKING:
    from .fleet import FleetPlan
    from .registry import Registry

__all__ = ["DEPLOY_TARGETS", "DOCUMENTED_FLAGS", "LaunchConfig", "kubernetes_manifest", "launch_command"]

_VLLM_DOCS = "vLLM engine arguments, usage of vllm serve (docs.vllm.ai/en/v0.5.3/models/engine_args.html)"
_SGLANG_DOCS = (
    "SGLang server arguments (docs.sglang.io/advanced_features/server_arguments.html; "
    "sgl-project/sglang docs/advanced_features/server_arguments.md)"
)
_TRTLLM_DOCS = "trtllm-serve command reference (nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html)"
_VLLM_DRAFT_DOCS = (
    "vLLM speculative decoding with a draft model, online serving with --speculative-config "
    "(docs.vllm.ai/en/latest/features/speculative_decoding/draft_model/)"
)
_SGLANG_DRAFT_DOCS = (
    _SGLANG_DOCS + "; speculative decoding with a separate draft model is --speculative-algorithm STANDALONE, and "
    "with --speculative-eagle-topk 1 the server sets --speculative-num-draft-tokens to --speculative-num-steps + 1 "
    "(sgl-project/sglang python/sglang/srt/server_args.py)"
)

#: The flags each engine documents that :func:`launch_command` may emit, with the page each was read from.
DOCUMENTED_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--tensor-parallel-size": _VLLM_DOCS,
        "--max-num-seqs": _VLLM_DOCS,
        "--gpu-memory-utilization": _VLLM_DOCS,
        "--max-num-batched-tokens": _VLLM_DOCS,
        "--kv-cache-dtype": _VLLM_DOCS + "; choices auto, fp8, fp8_e5m2, fp8_e4m3",
        "--speculative-config": _VLLM_DRAFT_DOCS,
    },
    "sglang": {
        "--model-path": _SGLANG_DOCS,
        "--host": _SGLANG_DOCS,
        "--port": _SGLANG_DOCS,
        "--tp-size": _SGLANG_DOCS + "; alias of --tensor-parallel-size",
        "--max-running-requests": _SGLANG_DOCS,
        "--mem-fraction-static": _SGLANG_DOCS,
        "--chunked-prefill-size": _SGLANG_DOCS,
        "--kv-cache-dtype": _SGLANG_DOCS + "; choices include fp8_e4m3 and fp8_e5m2",
        "--speculative-algorithm": _SGLANG_DRAFT_DOCS,
        "--speculative-draft-model-path": _SGLANG_DRAFT_DOCS,
        "--speculative-num-steps": _SGLANG_DRAFT_DOCS,
        "--speculative-eagle-topk": _SGLANG_DRAFT_DOCS,
        "--speculative-num-draft-tokens": _SGLANG_DRAFT_DOCS,
    },
    "trtllm": {
        "--host": _TRTLLM_DOCS,
        "--port": _TRTLLM_DOCS,
        "--tp_size": _TRTLLM_DOCS,
        "--max_batch_size": _TRTLLM_DOCS,
        "--max_num_tokens": _TRTLLM_DOCS,
        "--kv_cache_free_gpu_memory_fraction": _TRTLLM_DOCS,
    },
}

#: The engines :func:`launch_command` writes for, and ``k8s`` (:func:`kubernetes_manifest`).
DEPLOY_TARGETS = ("vllm", "sglang", "trtllm", "k8s")

#: Each engine's executable (the model is a positional argument of vLLM and TensorRT-LLM).
_EXECUTABLE = {
    "vllm": ("vllm", "serve"),
    "sglang": ("python3", "-m", "sglang.launch_server"),
    "trtllm": ("trtllm-serve",),
}
#: The port each server listens on (vLLM's default; SGLang and TensorRT-LLM are told).
_PORT = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}
#: Default container images (pin a version tag before deploying).
_IMAGE = {
    "vllm": "vllm/vllm-openai:latest",
    "sglang": "lmsysorg/sglang:latest",
    "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:latest",
}
#: How many times the planned replicas the autoscaler may reach.
HEADROOM = 2
#: The per-pod metric the autoscaler sketch reads (served by a custom-metrics adapter).
SCALING_METRIC = "running_requests"


@dataclass(frozen=True, repr=False)
class LaunchConfig(Result):
    """One replica's server command line for an engine.

    Attributes
    ----------
    engine : str
        ``"vllm"``, ``"sglang"`` or ``"trtllm"``.
    arguments : tuple of str
        The command as an argument list (executable first).
    command : str
        The command as a shell line, after one ``#`` comment line per note.
    flags : dict
        Each flag set and its value (text).
    citations : dict
        Each flag and the documentation it was confirmed in (``DOCUMENTED_FLAGS``).
    notes : tuple of str
        What must be configured by hand (speculative decoding, TensorRT-LLM's FP8 KV cache) or
        differs from the plan's assumptions.
    """

    engine: str
    arguments: tuple[str, ...]
    command: str
    flags: dict[str, str] = field(default_factory=dict)
    citations: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _engine_name(engine: Any) -> str:
    from .performance import engine_profile

    profile = engine_profile(engine) if isinstance(engine, str) else None
    if profile is None or profile.name not in _EXECUTABLE:
        raise InputError(f"argument 'engine' must be one of vllm, sglang or trtllm, got {engine!r}")
    return profile.name


def _feasible(plan: Any) -> Any:
    from .fleet import FleetPlan

    if not isinstance(plan, FleetPlan):
        raise InputError(f"argument 'plan' must be a FleetPlan (size_fleet's result), got {type(plan).__name__}")
    if not plan.feasible:
        raise InputError(f"the plan is infeasible, nothing to deploy: {plan.reason}")
    return plan


def _registry(plan: Any, registry: Any) -> Any:
    from .registry import load_registry

    return registry if registry is not None else load_registry(extra=tuple(plan.targets.get("registry_files", ())))


def _hf_name(model: Any) -> str:
    """The model's Hugging Face name: its first alias of the form ``org/name``, else its id."""
    return next((alias for alias in getattr(model, "aliases", ()) if "/" in alias), model.id)


def _fp8_kv(plan: Any) -> bool:
    from .precision import check_precision

    kv = plan.targets.get("kv_precision")
    return bool(kv) and check_precision(kv, "kv_precision") == "fp8"


def launch_command(plan: FleetPlan, engine: str, *, registry: Registry | None = None) -> LaunchConfig:
    """The command that starts one replica of ``plan`` on ``engine`` (``"vllm"``, ``"sglang"``, ``"trtllm"``).

    Tensor parallelism is ``plan.tensor_parallel``, the sequence cap ``plan.batch``, the memory fraction
    the engine profile's (SGLang: the ``mem_fraction_static`` its default formula gives on the
    accelerator), the token budget ``plan.targets["chunk_size"]`` or the profile's default for the
    accelerator, and the KV cache FP8 when the plan assumed it. An infeasible plan or an unknown engine
    is an :class:`~calculator.errors.InputError`.
    """
    from .performance import engine_profile
    from .performance.engines import sglang_memory_fraction

    plan = _feasible(plan)
    name = _engine_name(engine)
    profile = engine_profile(name)
    reg = _registry(plan, registry)
    model = reg.model(plan.model)
    memory = reg.accelerator(plan.accelerator).memory.m_as("B")
    default_budget = profile.limits(memory, plan.accelerator)[0]
    budget = int(plan.targets.get("chunk_size") or default_budget)
    tp, batch = int(plan.tensor_parallel), int(plan.batch)
    hf = _hf_name(model)
    notes: list[str] = []
    if name == "vllm":
        flags = {
            "--tensor-parallel-size": str(tp),
            "--max-num-seqs": str(batch),
            "--gpu-memory-utilization": f"{profile.memory_utilization:g}",
            "--max-num-batched-tokens": str(budget),
        }
        if _fp8_kv(plan):
            flags["--kv-cache-dtype"] = "fp8"
        positional: tuple[str, ...] = (hf,)
    elif name == "sglang":
        fraction = float(sglang_memory_fraction(memory, default_budget, tp))
        flags = {
            "--model-path": hf,
            "--host": "0.0.0.0",
            "--port": str(_PORT[name]),
            "--tp-size": str(tp),
            "--max-running-requests": str(batch),
            "--mem-fraction-static": f"{fraction:.3f}",
            "--chunked-prefill-size": str(budget),
        }
        if _fp8_kv(plan):
            flags["--kv-cache-dtype"] = "fp8_e4m3"
        positional = ()
    else:
        flags = {
            "--host": "0.0.0.0",
            "--port": str(_PORT[name]),
            "--tp_size": str(tp),
            "--max_batch_size": str(batch),
            "--max_num_tokens": str(budget),
            "--kv_cache_free_gpu_memory_fraction": f"{profile.memory_utilization:g}",
        }
        if _fp8_kv(plan):
            notes.append(
                "FP8 KV cache: set kv_cache_config.dtype: fp8 in the TensorRT-LLM options YAML by hand "
                "(trtllm-serve takes no KV-dtype flag)"
            )
        positional = (hf,)
    draft = plan.targets.get("draft")
    if draft:
        _speculative_flags(name, flags, notes, _hf_name(reg.model(draft["model"])), int(draft["length"]))
    elif plan.targets.get("speculation"):  # a plan that records no draft (written by an older version)
        notes.append("the plan assumes speculative decoding: configure the draft model and draft length by hand")
    if plan.engine != name:
        notes.append(f"the plan was sized with the {plan.engine} engine profile, not {name}'s")
    arguments = (*_EXECUTABLE[name], *positional, *(part for pair in flags.items() for part in pair))
    command = "\n".join([*(f"# {note}" for note in notes), shlex.join(arguments)])
    citations = {flag: DOCUMENTED_FLAGS[name][flag] for flag in flags}
    return LaunchConfig(name, arguments, command, flags, citations, tuple(notes))


def _speculative_flags(engine: str, flags: dict[str, str], notes: list[str], draft: str, length: int) -> None:
    """The plan's draft model proposing ``length`` tokens a round, as the engine's flags (TensorRT-LLM: a note).

    vLLM takes one JSON flag; SGLang runs a separate draft model as its STANDALONE algorithm, a chain of
    ``length`` steps with one candidate each (top-k 1, so ``length + 1`` tokens are verified); trtllm-serve
    reads speculation from its options YAML, which the note spells out.
    """
    import json

    if engine == "vllm":
        config = {"model": draft, "num_speculative_tokens": length, "method": "draft_model"}
        flags["--speculative-config"] = json.dumps(config, separators=(",", ":"))
    elif engine == "sglang":
        flags |= {
            "--speculative-algorithm": "STANDALONE",
            "--speculative-draft-model-path": draft,
            "--speculative-num-steps": str(length),
            "--speculative-eagle-topk": "1",
            "--speculative-num-draft-tokens": str(length + 1),
        }
    else:
        notes.append(
            "speculative decoding: write extra-llm-api-config.yml with speculative_config: {decoding_type: "
            f"DraftTarget, max_draft_len: {length}, speculative_model_dir: {draft}}} and add "
            "--extra_llm_api_options extra-llm-api-config.yml (TensorRT-LLM speculative decoding docs)"
        )


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
    """A Deployment of ``plan`` on ``engine`` and a HorizontalPodAutoscaler sketch, as YAML documents.

    The Deployment runs ``plan.replicas`` pods, each with ``plan.tensor_parallel`` GPUs
    (``nvidia.com/gpu``) and :func:`launch_command`'s arguments. The autoscaler keeps at least the
    planned replicas, allows ``HEADROOM`` times as many, and scales on the running requests per pod
    (a custom metric, ``SCALING_METRIC``) with the target ``plan.running_batch`` (at least 1): the running
    batch at the planned load, where the plan's TTFT and TPOT were evaluated; or, with
    ``target_utilization``, that fraction of the batch cap.
    """
    from ._support import probability

    config = launch_command(plan, engine, registry=registry)
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise InputError(f"kubernetes_manifest(): argument 'image' must be a container image name, got {image!r}")
    if target_utilization is None:
        target = max(float(plan.running_batch), 1.0)
        why = [
            f"# The target, {target:.4g} running requests per pod, is the running batch at the planned load",
            "# (Little's law), where the plan's TTFT and TPOT were evaluated: above it a pod runs past the",
            "# point the targets were checked at, so pods are added (never fewer than planned).",
        ]
    else:
        utilization = float(probability("kubernetes_manifest", "target_utilization", target_utilization))
        if not utilization > 0:
            raise InputError("kubernetes_manifest(): argument 'target_utilization' must be above 0")
        target = utilization * int(plan.batch)
        why = [
            f"# The target, {utilization:g} x the batch cap of {plan.batch} = {target:.4g} running requests per",
            "# pod, was asked for (target_utilization); the plan's targets were checked at the running batch above.",
        ]
    import yaml

    name = _dns_name(f"{plan.model}-{config.engine}")
    executable = len(_EXECUTABLE[config.engine])
    container = {
        "name": config.engine,
        "image": image or _IMAGE[config.engine],
        "command": list(config.arguments[:executable]),
        "args": list(config.arguments[executable:]),
        "ports": [{"name": "http", "containerPort": _PORT[config.engine]}],
        "resources": {"limits": {"nvidia.com/gpu": int(plan.tensor_parallel)}},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": int(plan.replicas),
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]},
            },
        },
    }
    autoscaler = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
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
    head = [
        f"# servecalc fleet plan: {plan.gpus} x {plan.accelerator} at {plan.precision}, {plan.replicas} replicas "
        f"of TP {plan.tensor_parallel}, batch cap {plan.batch}, engine {config.engine}",
        "# pin the image to a tested version and schedule the pods on nodes with this accelerator",
        *(f"# {note}" for note in config.notes),
    ]
    scaling = [
        f"# Autoscaler sketch. Signal: '{SCALING_METRIC}', the requests running on a pod (the engine's gauge of",
        "# running requests, exposed per pod by a custom-metrics adapter such as the Prometheus adapter).",
        f"# The plan loads each replica to at most {plan.max_utilization:g} of its throughput with its batch cap of",
        f"# {plan.batch} full; at the planned load about {plan.running_batch:.1f} sequences run on each replica.",
        *why,
    ]
    return (
        "\n".join(
            [
                *head,
                yaml.safe_dump(deployment, sort_keys=False).rstrip("\n"),
                "---",
                *scaling,
                yaml.safe_dump(autoscaler, sort_keys=False).rstrip("\n"),
            ]
        )
        + "\n"
    )
