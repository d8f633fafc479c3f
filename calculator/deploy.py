"""Deployable output of a fleet plan: each engine's server command line and a Kubernetes sketch.

:func:`launch_command` turns a feasible :class:`~calculator.fleet.FleetPlan` into the command that
starts one replica on vLLM, SGLang or TensorRT-LLM: the weights the plan fitted, the KV-cache precision
it assumed, its tensor-parallel degree and batch cap, the engine profile's memory fraction and the
token budget (the plan's chunk size, else the profile's default for the accelerator). Every flag is one
the engine documents: the registry's engine entry names it (``launch_flags``, option -> flag) with the page
it was read in (its sources; ``DOCUMENTED_FLAGS`` for the packaged engines).

The weights (:func:`weights_source`): the model's own checkpoint at 16 bits, the registry's checkpoint at a
quantized precision (``Model.checkpoints``), or for FP8 without one the 16-bit checkpoint quantized at load
time (vLLM, SGLang). Anything else is an :class:`~calculator.errors.InputError` saying how to add a checkpoint,
never a command that loads other weights than the plan fitted. The KV cache is set wherever the engine's
default could differ from the plan. :func:`kubernetes_manifest` wraps the command into a Deployment of
``plan.replicas`` pods (a ConfigMap carries TensorRT-LLM's options file) and a HorizontalPodAutoscaler sketch.
Speculative decoding gets the engine's settings for its method and draft length: the draft model, the model's
own multi-token-prediction layers, or an EAGLE-3 head (its repository left to fill in, :data:`EAGLE_HEAD`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .results import Result
from .types import ModelRef

if TYPE_CHECKING:
    from .fleet import FleetPlan, Layout, PlanService
    from .registry import Registry

__all__ = [
    "DEPLOY_TARGETS",
    "DOCUMENTED_FLAGS",
    "EAGLE_HEAD",
    "LaunchConfig",
    "WeightsSource",
    "launch_command",
    "weights_source",
]

#: TensorRT-LLM over several nodes: one MPI world started once (its DeepSeek-V3 example, and Dynamo's multinode guide).
TRTLLM_MULTI_NODE = (
    "a replica over several nodes runs in one MPI world: mpirun over the nodes of a hostfile starts "
    "trtllm-llmapi-launch trtllm-serve on every GPU (TensorRT-LLM examples/models/core/deepseek_v3/README.md, "
    "multi-node; docs.nvidia.com/dynamo, Multinode Examples: 'launched together in the same MPI world, such as "
    "via mpirun or srun')"
)
#: The environment variables a multi-node command reads on each node: the first node's address and this node's rank.
NODE_VARIABLES = ("LEADER_ADDRESS", "NODE_RANK")
_SGLANG_DIST_PORT = 20000  # the port of SGLang's multi-node example
_VLLM_DP_RPC_PORT = 13345  # the port of vLLM's data parallel example

#: TensorRT-LLM's attention data parallelism, an LLM API option of the options file.
TRTLLM_ATTENTION_DP = (
    "enable_attention_dp: true in the options file (LlmArgs.enable_attention_dp, tensorrt_llm/llmapi/llm_args.py): one "
    "attention rank per GPU of --tp_size, each with its own batch (max_batch_size per rank)"
)


def launch_flags(entry: Any, sources: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """An engine entry's launch flags: each option's flag and the documentation it was read in.

    ``entry`` is a registry ``Engine`` (its ``launch_flags``, each cited by a source link on
    ``launch_flags.<option>`` or on ``launch_flags``), ``sources`` the registry's sources by id.
    """
    out: dict[str, tuple[str, str]] = {}
    for option, flag in entry.launch_flags.items():
        cited = [
            f"{link.note} ({sources[link.source].title})" if link.note else sources[link.source].title
            for link in entry.source_of(f"launch_flags.{option}")
        ]
        out[option] = (flag, "; ".join(cited))
    return out


class _DocumentedFlags(Mapping[str, Mapping[str, str]]):
    """``DOCUMENTED_FLAGS``: each packaged engine's launch flags and the page each was read in, by engine.

    Read from the packaged registry (each engine's ``launch_flags``) on first use.
    """

    def __init__(self) -> None:
        self._flags: dict[str, dict[str, str]] | None = None

    def _load(self) -> dict[str, dict[str, str]]:
        if self._flags is None:
            from .registry import load_registry

            reg = load_registry()
            self._flags = {
                entry.id: dict(launch_flags(entry, reg.sources).values())
                for entry in reg.engines.values()
                if entry.launch_flags
            }
        return self._flags

    def __getitem__(self, engine: str) -> Mapping[str, str]:
        return self._load()[engine]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


#: The flags each engine documents that :func:`launch_command` may emit, with the page each was read from:
#: the packaged registry's ``launch_flags`` of each engine and their sources (``launch_flags``).
DOCUMENTED_FLAGS: Mapping[str, Mapping[str, str]] = _DocumentedFlags()


class LaunchFlags(dict[str, str]):
    """One engine's option -> flag (its registry entry's ``launch_flags``); a missing option is an InputError."""

    def __init__(self, engine: str, flags: Mapping[str, str]) -> None:
        super().__init__(flags)
        self.engine = engine

    def __missing__(self, option: str) -> str:
        raise InputError(
            f"the registry's engine '{self.engine}' names no launch flag for '{option}': add it under the engine's "
            "'launch_flags' with the documentation it comes from (docs/fleet-sizer.md, Deployable output)"
        )


#: TensorRT-LLM's options file, written by the command before the server starts.
TRTLLM_OPTIONS_FILE = "extra-llm-api-config.yml"
#: TensorRT-LLM's MoE load balancer configuration, a file the options file names (``moe_config.load_balancer``).
TRTLLM_LOAD_BALANCER_FILE = "moe-load-balancer.yml"
#: How TensorRT-LLM places copies of experts, LLM API options of the options file.
TRTLLM_LOAD_BALANCER = (
    "moe_config.load_balancer names a file of MoeLoadBalancerConfig (num_slots: the experts and their copies, "
    "divisible by --ep_size; layer_updates_per_iter > 0: the online balancer moves the copies as the load shifts), "
    "read by TorchLlmArgs.validate_load_balancer (tensorrt_llm/llmapi/llm_args.py), and the balancer runs only in "
    "the WIDEEP MoE backend (moe_config.backend; _torch/modules/fused_moe/create_moe.py); as in the repository's "
    "examples/wide_ep (ep_load_balancer/README.md, slurm_scripts/gen_yaml.py)"
)

#: The engines :func:`launch_command` writes for, and ``k8s`` (:func:`kubernetes_manifest`).
DEPLOY_TARGETS = ("vllm", "sglang", "trtllm", "k8s")

#: Each engine's executable (the model is a positional argument of vLLM and TensorRT-LLM).
EXECUTABLES = {
    "vllm": ("vllm", "serve"),
    "sglang": ("python3", "-m", "sglang.launch_server"),
    "trtllm": ("trtllm-serve",),
}
#: The port each server listens on (vLLM's default; SGLang and TensorRT-LLM are told).
PORTS = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}
#: Default container images (pin a version tag before deploying).
IMAGES = {
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
        Each flag set and its value (text; ``None`` for a switch such as vLLM's ``--enable-expert-parallel``).
    citations : dict
        Each flag and the documentation it was confirmed in (``DOCUMENTED_FLAGS``).
    notes : tuple of str
        What the command cannot settle by itself or differs from the plan's assumptions.
    weights : WeightsSource
        The checkpoint the command loads and how it reaches the plan's weight precision.
    kv_precision : str
        The KV-cache precision the command runs (the plan's).
    files : dict
        Files the command needs beside it, by name (TensorRT-LLM's options YAML); ``command`` writes
        them first.
    nodes : int
        Nodes one replica spans (``plan.layout.nodes``). Above one, vLLM and SGLang run the command
        on every node with the environment variables :data:`NODE_VARIABLES` set (the first node's address,
        this node's rank from 0), the nodes after the first adding ``worker_flags``; TensorRT-LLM's
        command starts all of them at once from the first node (``mpirun`` over a hostfile).
    worker_flags : dict
        What the nodes after the first add or change (vLLM: ``--headless``, and the first data-parallel
        rank they hold).
    """

    engine: str
    arguments: tuple[str, ...]
    command: str
    flags: dict[str, str | None] = field(default_factory=dict)
    citations: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    weights: WeightsSource | None = None
    kv_precision: str = ""
    files: dict[str, str] = field(default_factory=dict)
    nodes: int = 1
    worker_flags: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, repr=False)
class WeightsSource(Result):
    """Where a launch config's weights come from.

    Attributes
    ----------
    repo : str
        The Hugging Face repository the engine loads.
    precision : str
        The precision the weights run at (the plan's).
    method : str
        ``"checkpoint"`` (16-bit weights, or the registry's quantized checkpoint at that precision) or
        ``"online"`` (the 16-bit checkpoint quantized at load time by the engine's ``--quantization``).
    kv_declared : str or None
        The KV-cache precision the checkpoint declares, where the registry records it.
    source : str
        The registry source of the checkpoint (empty for the model's own 16-bit checkpoint).
    """

    repo: str
    precision: str
    method: str
    kv_declared: str | None = None
    source: str = ""
    format: str = ""


def engine_name(engine: Any) -> str:
    from .performance import engine_profile

    profile = engine_profile(engine) if isinstance(engine, str) else None
    if profile is None or profile.name not in EXECUTABLES:
        raise InputError(f"argument 'engine' must be one of vllm, sglang or trtllm, got {engine!r}")
    return profile.name


def manifest_engine(plan: Any) -> str:
    """The engine a plan's Kubernetes manifest runs: the plan's own, or vLLM for the engine-agnostic profile."""
    return plan.engine if plan.engine in EXECUTABLES else "vllm"


def _feasible(plan: Any) -> Any:
    from .fleet import FleetPlan

    if not isinstance(plan, FleetPlan):
        raise InputError(f"argument 'plan' must be a FleetPlan (size_fleet's result), got {type(plan).__name__}")
    plan_parts(plan)
    return plan


def plan_parts(plan: FleetPlan) -> tuple[Layout, PlanService]:
    """A feasible plan's layout and predicted service; an infeasible plan has none, so nothing to deploy."""
    if not plan.feasible or plan.layout is None or plan.service is None:
        raise InputError(f"the plan is infeasible, nothing to deploy: {plan.reason}")
    return plan.layout, plan.service


def plan_registry(plan: Any, registry: Any) -> Any:
    """The registry given (checked), else the plan's: the packaged one with the plan's user documents."""
    from ._support import registry_or_none
    from .registry import load_registry

    given = registry_or_none(registry, "launch_command")
    return given if given is not None else load_registry(extra=plan.registry_documents)


def _hf_name(model: Any) -> str:
    """The model's Hugging Face name: its first alias of the form ``org/name``, else its id."""
    return next((alias for alias in getattr(model, "aliases", ()) if "/" in alias), model.id)


def weights_source(
    model: ModelRef, precision: str, engine: str, *, registry: Registry | None = None, served: str = ""
) -> WeightsSource:
    """The checkpoint ``engine`` loads to run ``model``'s weights at ``precision``, and how.

    16-bit weights: the model's own checkpoint (``served``: the repository the plan was named by, one of the
    model's aliases; default its first). Quantized: the checkpoint at that precision the plan assumes
    (``performance.CHECKPOINT_RULE``: ``served`` where it names one), else (FP8 on vLLM and SGLang) the 16-bit
    checkpoint quantized at load time. Anything else is an :class:`~calculator.errors.InputError` saying how to add
    a checkpoint.

    Examples
    --------
    >>> from calculator import load_registry
    >>> reg = load_registry()
    >>> weights_source("llama-3.1-8b", "fp8", "trtllm").repo
    'nvidia/Llama-3.1-8B-Instruct-FP8'
    >>> source = weights_source(reg.model("llama-3.3-70b"), "fp8", "vllm")
    >>> source.repo, source.method
    ('meta-llama/Llama-3.3-70B-Instruct', 'online')
    """
    from ._support import model_of
    from .precision import PRECISIONS, check_precision

    model = model_of(model, registry)
    engine = engine_name(engine)
    name = check_precision(precision)
    if not isinstance(served, str) or (served and served not in model.aliases):
        raise InputError(f"weights_source(): argument 'served' must be one of {model.id}'s aliases, got {served!r:.80}")
    own = served or _hf_name(model)  # the repository the plan was named by, else the entry's
    if PRECISIONS[name] >= 16:
        native = next((c for c in model.checkpoints if c.repo == own), None)
        if native is not None:  # the model is published quantized (DeepSeek-V3 in FP8, gpt-oss in MXFP4)
            raise InputError(
                f"the plan runs {model.id} at {name}, but its published checkpoint {own} holds {native.precision} "
                f"weights: size the plan at {native.precision}, or add a {name} checkpoint under the model's "
                "'checkpoints' in a registry file (--extra; docs/fleet-sizer.md, Deployable output)"
            )
        return WeightsSource(own, name, "checkpoint")
    from .performance import checkpoint_for, engine_profile

    checkpoint = checkpoint_for(model, name, engine, served=served, registry=registry)  # CHECKPOINT_RULE
    if checkpoint is not None:
        kv, source, form = checkpoint.kv_cache, checkpoint.source, checkpoint.format
        return WeightsSource(checkpoint.repo, name, "checkpoint", kv, source, form)
    if name in engine_profile(engine, registry).online_quantization:
        return WeightsSource(own, name, "online")
    label = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}[engine]
    how = (
        "TensorRT-LLM loads pre-quantized checkpoints only"
        if engine == "trtllm"
        else f"{label} quantizes to fp8 only at load time"
    )
    raise InputError(
        f"the plan runs {model.id} at {name}, but the registry lists no {name} checkpoint of it and {how}: quantize "
        f"it (NVIDIA Model Optimizer: examples/llm_ptq/hf_ptq.py --qformat {_MODELOPT_QFORMAT.get(name, name)}) or "
        f"pick a published one, and add it under the model's 'checkpoints' in a registry file (--extra; "
        "docs/fleet-sizer.md, Deployable output)"
    )


_MODELOPT_QFORMAT = {"fp8": "fp8", "fp4": "nvfp4", "int4": "int4_awq", "int8": "int8_sq"}


def _kv_flag(engine: str, plan_kv: str, weights: WeightsSource) -> str | None:
    """The engine's KV-cache dtype value for the plan's KV precision, or None where its default is the plan's.

    FP8: always explicit. 16-bit: explicit where the checkpoint may declare an FP8 KV cache that the
    engine would otherwise pick up (a ModelOpt or compressed-tensors checkpoint not recorded as
    declaring none).
    """
    from .precision import PRECISIONS

    if PRECISIONS[plan_kv] == 8:
        return {"vllm": "fp8", "sglang": "fp8_e4m3"}[engine]
    may_declare = weights.format in ("modelopt", "compressed-tensors") and weights.kv_declared != "bf16"
    if weights.method == "checkpoint" and may_declare:
        return {"vllm": "bfloat16", "sglang": "bf16"}[engine]
    return None


def launch_command(plan: FleetPlan, engine: str, *, registry: Registry | None = None) -> LaunchConfig:
    """The command that starts one replica of ``plan`` on ``engine`` (``"vllm"``, ``"sglang"``, ``"trtllm"``).

    The weights are the plan's (:func:`weights_source`), the KV cache at the plan's precision, tensor
    parallelism ``plan.layout.stage_gpus``, the sequence cap ``plan.batch``, the memory fraction the engine
    profile's (SGLang: the ``mem_fraction_static`` its default formula gives on the accelerator), and the
    token budget ``plan.serving.chunk_size`` or the profile's default for the accelerator. An
    infeasible plan, an unknown engine, or weights the engine cannot load at the plan's precision are an
    :class:`~calculator.errors.InputError`.
    """
    from .performance import engine_profile
    from .precision import check_precision

    plan = _feasible(plan)
    name = engine_name(engine)
    reg = plan_registry(plan, registry)
    profile = engine_profile(name, reg)
    release = getattr(plan, "engine_release", None)
    if release and plan.engine == name:  # the release the plan was priced as
        profile = profile.for_release(release)
    documented = launch_flags(reg.engine(name), reg.sources)
    f = LaunchFlags(name, {option: flag for option, (flag, _) in documented.items()})
    model = reg.model(plan.model)
    device = reg.accelerator(plan.accelerator)
    weights = weights_source(model, plan.precision, name, registry=reg, served=plan.served_model or "")
    kv = check_precision(plan.kv_precision or "bf16", "kv_precision")
    notes = [_online_note(model, plan, device)] if weights.method == "online" else []
    options: dict[str, Any] = {}
    flags, positional = _replica_flags(name, f, plan, profile, device, weights.repo)
    _precision_flags(name, f, kv, weights, flags, options, notes)
    _layout_flags(name, f, plan, reg, flags, options, notes)
    files = _options_file(f, options, flags, plan, reg)
    if plan.engine != name:
        notes.append(f"the plan was sized with the {plan.engine} engine profile, not {name}'s")
    layout, _ = plan_parts(plan)
    stages = layout.pipeline_parallel
    if stages > 1:  # pipeline stages of the tensor-parallel GPUs, each with its share of the layers
        flags[f["pipeline_parallel"]] = str(stages)
    nodes = layout.nodes
    executable = EXECUTABLES[name]
    worker: dict[str, str | None] = {}
    if nodes > 1:
        executable, worker = _multi_node(name, f, nodes, layout.gpus, layout.data_parallel, flags, notes)
    arguments = (*executable, *positional, *flag_parts(flags))
    writes = [heredoc(file, text) for file, text in files.items()]
    command = "\n".join([*(shell_comment(note) for note in notes), *writes, shell_line(arguments)])
    cited = dict(documented.values())
    citations = {flag: cited[flag] for flag in (*flags, *worker)}
    return LaunchConfig(name, arguments, command, flags, citations, tuple(notes), weights, kv, files, nodes, worker)


def _replica_flags(
    name: str, f: LaunchFlags, plan: Any, profile: Any, device: Any, repo: str
) -> tuple[dict[str, str | None], tuple[str, ...]]:
    """One replica's flags (parallelism, sequence cap, memory fraction, token budget) and positional arguments."""
    from .performance.engines import sglang_memory_fraction

    memory = device.memory.m_as("B")
    default_budget = profile.limits(memory, plan.accelerator)[0]
    budget = int(plan.serving.chunk_size or default_budget)
    tp, batch = plan.layout.stage_gpus, int(plan.batch)
    flags: dict[str, str | None]
    if name == "vllm":
        flags = {
            f["tensor_parallel"]: str(tp),
            f["max_sequences"]: str(batch),
            f["memory_fraction"]: f"{profile.memory_utilization:g}",
            f["token_budget"]: str(budget),
        }
        spec = plan.serving.speculation
        staged = plan.layout.pipeline_parallel > 1
        if profile.efficiency.overlap and (spec is None or spec.method != "draft") and not staged:
            # the plan's step times assume asynchronous scheduling: the 0.14.0 default (with EAGLE and MTP drafting
            # too, not with a draft model), explicit for 0.11-0.13. vLLM refuses it with pipeline parallelism, where its
            # batch queue holds a batch per stage (max_concurrent_batches, v1/executor/multiproc_executor.py) and
            # schedules the next while the others run: the overlap the plan priced
            flags[f["async_scheduling"]] = None
        return flags, (repo,)
    if name == "sglang":
        fraction = float(sglang_memory_fraction(memory, default_budget, tp, profile.memory_fraction_rule))
        flags = {
            f["model"]: repo,
            f["host"]: "0.0.0.0",
            f["port"]: str(PORTS[name]),
            f["tensor_parallel"]: str(tp),
            f["max_sequences"]: str(batch),
            f["memory_fraction"]: f"{fraction:.3f}",
            f["token_budget"]: str(budget),
        }
        return flags, ()
    flags = {
        f["host"]: "0.0.0.0",
        f["port"]: str(PORTS[name]),
        f["tensor_parallel"]: str(tp),
        f["max_sequences"]: str(batch),
        f["token_budget"]: str(budget),
        f["memory_fraction"]: f"{profile.memory_utilization:g}",
    }
    return flags, (repo,)


def _precision_flags(
    name: str,
    f: LaunchFlags,
    kv: str,
    weights: WeightsSource,
    flags: dict[str, str | None],
    options: dict[str, Any],
    notes: list[str],
) -> None:
    """The weights' load-time quantization and the KV-cache dtype (TensorRT-LLM: in its options file)."""
    if name == "trtllm":
        _trtllm_kv(kv, weights, options, notes)
        return
    if weights.method == "online":
        flags[f["quantization"]] = weights.precision
    value = _kv_flag(name, kv, weights)
    if value is not None:
        flags[f["kv_cache_dtype"]] = value


def _layout_flags(
    name: str,
    f: LaunchFlags,
    plan: Any,
    registry: Any,
    flags: dict[str, str | None],
    options: dict[str, Any],
    notes: list[str],
) -> None:
    """Expert parallelism, attention data-parallel ranks and the drafter of speculative decoding."""
    tp = plan.layout.stage_gpus
    if plan.layout.expert_parallel > 1:  # the routed experts spread over the replica's GPUs (expert parallelism)
        flags.update(_expert_parallel_flags(name, f, plan.layout.expert_parallel, tp))
        _placement_flags(name, f, plan, registry, flags, options, notes)
    if plan.layout.data_parallel > 1:  # attention ranks, each with its own share of the batch cap
        _data_parallel_flags(name, f, plan.layout.data_parallel, tp, int(plan.batch), flags, options, notes)
    spec = plan.serving.speculation
    if spec is None:
        return
    from .performance import engine_profile

    if spec.method == "draft" and not engine_profile(name, registry).draft_model_speculation:
        raise InputError(
            f"the plan drafts with a separate model ({spec.draft_model}), which {name} does not run "
            "(EngineProfile.draft_model_speculation, cited in the registry): emit it for sglang or trtllm, or size "
            "the plan with speculation method 'mtp' or 'eagle'"
        )
    drafter = None  # MTP: the model's own layers, in its checkpoint
    if spec.method == "draft":
        drafter = _hf_name(registry.model(spec.draft_model))
    elif spec.method == "eagle":
        drafter = EAGLE_HEAD
        notes.append(
            f"speculative decoding with an EAGLE-3 head: put the Hugging Face repository of a head trained for "
            f"{_hf_name(registry.model(plan.model))} in place of {EAGLE_HEAD} (the plan priced one decoder layer and "
            "an LM head at 16 bits)"
        )
    _speculative_flags(name, f, flags, options, spec.method, drafter, spec.draft_length)


def _options_file(f: LaunchFlags, options: dict[str, Any], flags: dict[str, str | None], plan: Any,
                  registry: Any) -> dict[str, str]:  # fmt: skip
    """TensorRT-LLM's extra options as the file the command writes (and its flag), if there are any.

    With copies of experts, the MoE load balancer's file beside it (:data:`TRTLLM_LOAD_BALANCER`).
    """
    if not options:
        return {}
    import yaml

    flags[f["options_file"]] = TRTLLM_OPTIONS_FILE
    files = {TRTLLM_OPTIONS_FILE: yaml.safe_dump(options, sort_keys=False)}
    if "moe_config" in options:
        experts = int(registry.model(plan.model).experts or 1)
        slots = {"num_slots": experts + plan.layout.redundant_experts, "layer_updates_per_iter": 1}
        files[TRTLLM_LOAD_BALANCER_FILE] = yaml.safe_dump(slots, sort_keys=False)
    return files


def flag_parts(flags: dict[str, str | None]) -> list[str]:
    """Flags as arguments (a ``None`` value is a switch)."""
    return [part for flag, value in flags.items() for part in ((flag,) if value is None else (flag, value))]


#: The forms of the node variables the calculator writes into a command (``$LEADER_ADDRESS``,
#: ``$LEADER_ADDRESS:20000``, ``$((NODE_RANK * 4))``): the only arguments the shell may expand.
_EXPANDABLE = re.compile(r"\$(?:[A-Z][A-Z_]*(?::[0-9]{1,5})?|\(\([A-Z][A-Z_]* \* [0-9]{1,6}\)\))")


class ShellVariable(str):
    """An argument the calculator wrote with a node variable in it, left for the shell to expand."""

    __slots__ = ()

    def __new__(cls, text: str) -> ShellVariable:
        if not _EXPANDABLE.fullmatch(text):
            raise ValueError(f"not a node variable form: {text!r}")
        return super().__new__(cls, text)


def shell_line(arguments: Any) -> str:
    """The arguments as one POSIX shell line, each a single word that runs nothing.

    Only the node variables the calculator writes (:class:`ShellVariable`) stay expandable, in double
    quotes; any other argument, whatever it holds (``$(...)``, backquotes, ``;``, line breaks, a
    ``$NAME`` of its own), is quoted with :func:`shlex.quote`, so the shell hands it to the engine as it is.

    Examples
    --------
    >>> print(shell_line(["vllm", "serve", "$(touch /tmp/x)/x", "--master-addr", ShellVariable("$LEADER_ADDRESS")]))
    vllm serve '$(touch /tmp/x)/x' --master-addr "$LEADER_ADDRESS"
    """
    return " ".join(f'"{a}"' if isinstance(a, ShellVariable) else shlex.quote(a) for a in arguments)


def shell_comment(text: str) -> str:
    """``text`` as one comment line of a shell script or a YAML file: every control character becomes a space.

    YAML and POSIX shells end a comment at a line break (YAML also at NEL, LS and PS), so a value
    carrying one would start a line of its own: a command, or a document of a manifest; the other C0 and
    C1 controls are not allowed in YAML at all, and would reach a terminal as escape sequences.
    """
    return "# " + re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", text)


def _multi_node(
    engine: str, f: LaunchFlags, nodes: int, tp: int, ranks: int, flags: dict[str, str | None], notes: list[str]
) -> tuple[tuple[str, ...], dict[str, str | None]]:
    """A replica over ``nodes`` nodes: each engine's flags (in ``flags``), its executable, the other nodes' flags."""
    leader, rank = (ShellVariable(f"${name}") for name in NODE_VARIABLES)
    per_node = tp // nodes
    worker: dict[str, str | None] = {}
    if engine == "trtllm":
        notes.append(f"the replica spans {nodes} nodes of {per_node} GPUs: {TRTLLM_MULTI_NODE}")
        notes.append(f"run once, on the first node; list the {nodes} nodes with {per_node} slots each in 'hostfile'")
        launcher = ("mpirun", "--hostfile", "hostfile", "-np", str(tp), "trtllm-llmapi-launch")
        return (*launcher, *EXECUTABLES[engine]), worker
    if engine == "vllm" and ranks > 1:
        local = ranks // nodes
        flags.update({
            f["data_parallel_local"]: str(local),
            f["data_parallel_address"]: leader,
            f["data_parallel_rpc_port"]: str(_VLLM_DP_RPC_PORT),
        })  # fmt: skip
        worker = {f["headless"]: None, f["data_parallel_start_rank"]: ShellVariable(f"$(({rank[1:]} * {local}))")}
    elif engine == "vllm":
        flags.update({f["nodes"]: str(nodes), f["node_rank"]: rank, f["leader_address"]: leader})
        worker = {f["headless"]: None}
    else:
        flags.update(
            {
                f["nodes"]: str(nodes),
                f["node_rank"]: rank,
                f["leader_address"]: ShellVariable(f"{leader}:{_SGLANG_DIST_PORT}"),
            }
        )
    added = f"; the other nodes add {' '.join(flag_parts(worker))}" if worker else ""
    notes.append(
        f"the replica spans {nodes} nodes of {per_node} GPUs: run this on each with {NODE_VARIABLES[0]} set to the "
        f"first node's address and {NODE_VARIABLES[1]} to 0-{nodes - 1}{added}; only the first node serves HTTP"
    )
    return EXECUTABLES[engine], worker


def _expert_parallel_flags(engine: str, f: LaunchFlags, expert_parallel: int, tp: int) -> dict[str, str | None]:
    """The flags that spread a mixture of experts' routed experts over ``expert_parallel`` of a replica's GPUs."""
    if engine == "vllm":
        if expert_parallel != tp:  # vLLM's switch spreads them over the whole group (tensor x data parallel)
            raise InputError(
                f"vLLM spreads the experts over all {tp} GPUs of the replica ({f['expert_parallel']}); "
                f"the plan's expert_parallel {expert_parallel} has no vLLM flag"
            )
        return {f["expert_parallel"]: None}
    return {f["expert_parallel"]: str(expert_parallel)}


def _placement_flags(
    engine: str,
    f: LaunchFlags,
    plan: Any,
    registry: Any,
    flags: dict[str, str | None],
    options: dict[str, Any],
    notes: list[str],
) -> None:
    """The plan's copies of experts (``layout.redundant_experts``) as the engine's expert-parallel load balancer.

    vLLM: ``--enable-eplb`` with ``--eplb-config`` naming the copies; SGLang: ``--ep-num-redundant-experts`` and
    ``--enable-eplb`` (its balancer moves the copies to the busiest experts); TensorRT-LLM: its MoE load
    balancer at ``num_slots`` = experts + copies (a file the options file names, :data:`TRTLLM_LOAD_BALANCER`).
    Without copies, an engine that places experts evenly (``EngineProfile.uneven_experts`` false) needs a degree
    that divides them: a plan sized for vLLM's uneven placement is an :class:`InputError` there.
    """
    from .performance import engine_profile

    layout = plan.layout
    ep, copies = layout.expert_parallel, layout.redundant_experts
    experts = int(registry.model(plan.model).experts or 1)
    if (experts + copies) % ep and (copies or not engine_profile(engine, registry).uneven_experts):
        fill = -experts % ep
        raise InputError(
            f"{engine} places the experts evenly: {experts} experts and {copies} redundant copies do not divide over "
            f"expert_parallel {ep}; size the plan for {engine} (it places {fill} copies there) or emit it for vllm"
        )
    if not copies:
        return
    if engine == "vllm":
        flags[f["expert_load_balancer"]] = None
        flags[f["expert_load_balancer_config"]] = json.dumps({"num_redundant_experts": copies})
    elif engine == "sglang":
        flags[f["redundant_experts"]] = str(copies)
        flags[f["expert_load_balancer"]] = None
    else:
        options["moe_config"] = {"backend": "WIDEEP", "load_balancer": TRTLLM_LOAD_BALANCER_FILE}
        notes.append(f"{copies} redundant experts ({experts + copies} slots): {TRTLLM_LOAD_BALANCER}")
        return
    notes.append(f"{copies} redundant experts beside the {experts} (the engine's expert-parallel load balancer)")


def _data_parallel_flags(
    engine: str,
    f: LaunchFlags,
    ranks: int,
    tp: int,
    batch: int,
    flags: dict[str, str | None],
    options: dict[str, Any],
    notes: list[str],
) -> None:
    """Attention data parallelism: ``ranks`` attention ranks of ``tp / ranks`` GPUs, each capped at its share."""
    import math

    per_rank = str(math.ceil(batch / ranks))
    if engine == "vllm":
        flags[f["tensor_parallel"]] = str(tp // ranks)
        flags[f["data_parallel"]] = str(ranks)
        flags[f["max_sequences"]] = per_rank
    elif engine == "sglang":
        flags[f["data_parallel"]] = str(ranks)
        flags[f["attention_data_parallel"]] = None
        flags[f["max_sequences"]] = str(int(per_rank) * ranks)  # SGLang's total, split evenly over the ranks
    elif engine == "trtllm" and ranks == tp:
        options["enable_attention_dp"] = True
        flags[f["max_sequences"]] = per_rank
        notes.append(f"attention data parallel: {TRTLLM_ATTENTION_DP}")
    else:
        raise InputError(
            f"the plan runs {ranks} attention ranks of {tp // ranks} GPUs; TensorRT-LLM's attention data "
            "parallelism has one rank per GPU: size with moe_layouts 'attention-dp' (one rank per GPU) or emit "
            "for vllm or sglang"
        )
    notes.append(f"each of the {ranks} attention ranks caps its running sequences at {per_rank} ({batch} in all)")


def heredoc(file: str, text: str) -> str:
    """Shell lines that write ``text`` to ``file`` verbatim (a quoted here-document: nothing is expanded)."""
    end = "SERVECALC_EOF"
    if end in text.splitlines():  # cannot happen with YAML's indented scalars; refuse rather than truncate
        raise InputError(f"the options file {file} holds a line '{end}', which would end its here-document")
    return f"cat > {shlex.quote(file)} <<'{end}'\n{text}{end}"


def _online_note(model: Any, plan: Any, device: Any) -> str:
    """What loading the 16-bit checkpoint and quantizing it at load time asks of each GPU."""
    from .precision import check_precision

    sixteen = 2.0 * model.parameters / plan.layout.stage_gpus
    note = (
        f"the engine quantizes the 16-bit checkpoint to {check_precision(plan.precision)} as it loads it (no "
        f"{plan.precision} checkpoint of {model.id} in the registry)"
    )
    if sixteen > 0.9 * device.memory.m_as("B"):
        note += (
            f"; the 16-bit weights are {sixteen / 1e9:,.1f} GB per GPU before quantization, close to or above the "
            f"{device.memory.m_as('GB'):,.1f} GB of a {device.id}: if loading runs out of memory, add a pre-quantized "
            "checkpoint under the model's 'checkpoints' in a registry file"
        )
    return note


def _trtllm_kv(kv: str, weights: WeightsSource, options: dict[str, Any], notes: list[str]) -> None:
    """TensorRT-LLM's KV dtype: ``kv_cache_config.dtype`` in the options YAML ('auto' follows the checkpoint)."""
    from .precision import PRECISIONS

    if PRECISIONS[kv] == 8:
        options["kv_cache_config"] = {"dtype": "fp8"}
        return
    if weights.kv_declared == "fp8":
        raise InputError(
            f"the plan assumes a {kv} KV cache, but {weights.repo} declares an FP8 KV cache and TensorRT-LLM cannot "
            "override a checkpoint's KV quantization: size the plan with kv_precision='fp8'"
        )
    if (
        weights.method == "checkpoint"
        and weights.format in ("modelopt", "compressed-tensors")
        and not weights.kv_declared
    ):
        notes.append(
            f"TensorRT-LLM runs the KV cache {weights.repo} declares ('auto'); if it declares FP8, the replica holds "
            f"about twice the KV cache the plan assumed ({kv})"
        )


#: What a command names the EAGLE-3 head by: the plan priced a head's shape, not a checkpoint, so the repository of
#: one trained for the model (the engines load it as the drafter) is the user's to fill in.
EAGLE_HEAD = "<eagle3-head>"
#: Each speculation method by the names the engines give it: vLLM's ``SpeculativeConfig.method`` (mtp, eagle3;
#: config/speculative.py), SGLang's ``--speculative-algorithm`` (NEXTN, EAGLE3; server_args.py), TensorRT-LLM's
#: ``speculative_config.decoding_type`` (MTP, Eagle3; llmapi/llm_args.py).
_METHOD_NAMES = {
    "vllm": {"draft": "draft_model", "mtp": "mtp", "eagle": "eagle3"},
    "sglang": {"draft": "STANDALONE", "mtp": "NEXTN", "eagle": "EAGLE3"},
    "trtllm": {"draft": "DraftTarget", "mtp": "MTP", "eagle": "Eagle3"},
}


def _speculative_flags(
    engine: str,
    f: LaunchFlags,
    flags: dict[str, str | None],
    options: dict[str, Any],
    method: str,
    draft: str | None,
    length: int,
) -> None:
    """The plan's drafter proposing ``length`` tokens a round, as the engine's settings.

    ``draft`` is the draft model's or the head's repository, None for the model's own MTP layers. vLLM
    takes one JSON flag (``method``, ``model``, ``num_speculative_tokens``); SGLang runs a chain of
    ``length`` steps with one candidate each (top-k 1, so ``length + 1`` tokens are verified), a draft model
    as its STANDALONE algorithm, MTP layers as NEXTN (the target's own checkpoint), a head as EAGLE3;
    trtllm-serve reads speculation from its options YAML (``speculative_config``: ``max_draft_len``, or for
    MTP ``num_nextn_predict_layers``, and the drafter's checkpoint as ``speculative_model_dir``).
    """
    import json

    name = _METHOD_NAMES[engine][method]
    if engine == "vllm":
        config = ({} if draft is None else {"model": draft}) | {"num_speculative_tokens": length, "method": name}
        flags[f["speculative_config"]] = json.dumps(config, separators=(",", ":"))
    elif engine == "sglang":
        flags[f["speculative_algorithm"]] = name
        if draft is not None:
            flags[f["speculative_draft_model"]] = draft
        flags |= {
            f["speculative_steps"]: str(length),
            f["speculative_topk"]: "1",
            f["speculative_draft_tokens"]: str(length + 1),
        }
    elif method == "mtp":
        options["speculative_config"] = {"decoding_type": name, "num_nextn_predict_layers": length}
    else:
        options["speculative_config"] = {"decoding_type": name, "max_draft_len": length, "speculative_model_dir": draft}
