"""Deployable output of a disaggregated plan: each pool's server command and the router between them.

:func:`disaggregated_launch` turns a feasible :class:`~calculator.fleet.DisaggregatedPlan` into the commands
each engine documents for disaggregated serving. Each pool is a colocated plan of its own replicas
(:meth:`~calculator.fleet.DisaggregatedPlan.pool_plan`), so its command is :func:`~calculator.deploy.launch_command`'s
(the weights, KV cache, tensor parallelism and batch cap of that pool), with the engine's disaggregation settings
added:

- vLLM: ``--kv-transfer-config`` with the NixlConnector, ``kv_role`` ``kv_producer`` on the prefill replicas and
  ``kv_consumer`` on the decode replicas; the router is the proxy of vLLM's NixlConnector guide
  (``toy_proxy_server.py``: one host and port per replica).
- SGLang: ``--disaggregation-mode prefill|decode`` with ``--disaggregation-transfer-backend nixl``, the prefill
  replicas' ``--disaggregation-bootstrap-port``; the router is ``sglang_router.launch_router --pd-disaggregation``
  with each prefill replica's URL and bootstrap port and each decode replica's URL.
- TensorRT-LLM: each pool's options file adds ``cache_transceiver_config`` (and on the context servers
  ``disable_overlap_scheduler``), as the repository's disaggregated example writes them; the router is
  ``trtllm-serve disaggregated --config_file`` over a file listing the context and generation servers.

Every flag is one the registry's engine entry names with the page it was read in (``launch_flags``). The
replicas are named ``prefill-0``, ``prefill-1``, ... and ``decode-0``, ... in the router's command: addresses the
deployment resolves (host names, or a Kubernetes headless Service's pod names).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .deploy import (
    PORTS,
    TRTLLM_OPTIONS_FILE,
    LaunchConfig,
    LaunchFlags,
    engine_name,
    heredoc,
    launch_command,
    launch_flags,
    plan_registry,
    shell_comment,
    shell_line,
)
from .errors import InputError
from .results import Result

if TYPE_CHECKING:
    from .fleet import DisaggregatedPlan
    from .registry import Registry

__all__ = ["ROUTER_PORT", "DisaggregatedLaunch", "disaggregated_launch"]

#: The port the router (the clients' endpoint) listens on.
ROUTER_PORT = 8000
#: SGLang's prefill bootstrap port: the server arguments' default of ``--disaggregation-bootstrap-port``.
SGLANG_BOOTSTRAP_PORT = 8998
#: The KV transfer each engine is told to use: NIXL on vLLM (its NixlConnector) and SGLang, UCX on TensorRT-LLM.
TRANSFER = {"vllm": "NixlConnector", "sglang": "nixl", "trtllm": "UCX"}
#: Where vLLM's proxy comes from: a script of its repository, not of the installed package.
VLLM_PROXY = "toy_proxy_server.py"
#: TensorRT-LLM's disaggregated server configuration, written by the router's command.
TRTLLM_ROUTER_FILE = "disagg_config.yaml"
#: Each pool's options file on TensorRT-LLM (each pool's servers read their own).
TRTLLM_POOL_FILES = {"prefill": "prefill-" + TRTLLM_OPTIONS_FILE, "decode": "decode-" + TRTLLM_OPTIONS_FILE}


@dataclass(frozen=True, repr=False)
class DisaggregatedLaunch(Result):
    """The commands of a disaggregated plan on one engine.

    Attributes
    ----------
    engine : str
        ``"vllm"``, ``"sglang"`` or ``"trtllm"``.
    prefill, decode : LaunchConfig
        The command every replica of that pool runs (its own layout: weights, KV cache, TP, batch cap).
    router : LaunchConfig
        The router (proxy) that sends each request to a prefill replica, then a decode replica; the clients'
        endpoint, on :data:`ROUTER_PORT`.
    hosts : dict
        ``{"prefill": (...), "decode": (...)}``: the names the router reaches each pool's replicas by.
    command : str
        The three commands in one text, each after comment lines saying where it runs.
    """

    engine: str
    prefill: LaunchConfig
    decode: LaunchConfig
    router: LaunchConfig
    hosts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    command: str = ""


def disaggregated_launch(
    plan: DisaggregatedPlan, engine: str, *, registry: Registry | None = None
) -> DisaggregatedLaunch:
    """The prefill pool's, the decode pool's and the router's commands of ``plan`` on ``engine``.

    ``plan`` is a feasible :func:`~calculator.fleet.size_disaggregated` result; an infeasible plan, an unknown
    engine, or weights the engine cannot load at a pool's precision are an :class:`~calculator.errors.InputError`.
    """
    return pool_launch(plan, engine, registry, lambda pool, index: f"{pool}-{index}")


def pool_launch(
    plan: DisaggregatedPlan, engine: str, registry: Registry | None, host: Callable[[str, int], str]
) -> DisaggregatedLaunch:
    """:func:`disaggregated_launch` with the router reaching replica ``index`` of ``pool`` at ``host(pool, index)``."""
    from .fleet import DisaggregatedPlan

    if not isinstance(plan, DisaggregatedPlan):
        raise InputError(
            f"disaggregated_launch(): argument 'plan' must be a DisaggregatedPlan (size_disaggregated's result), "
            f"got {type(plan).__name__}"
        )
    if not plan.feasible or not plan.model:
        raise InputError(f"the disaggregated plan is infeasible, nothing to deploy: {plan.reason}")
    name = engine_name(engine)
    pools = {pool: plan.pool_plan(pool) for pool in ("prefill", "decode")}
    reg = plan_registry(pools["prefill"], registry)
    documented = launch_flags(reg.engine(name), reg.sources)
    f = LaunchFlags(name, {option: flag for option, (flag, _) in documented.items()})
    cited = {option: why for option, (_, why) in documented.items()}
    hosts = {pool: tuple(host(pool, i) for i in range(p.replicas)) for pool, p in pools.items()}
    for pool, pool_plan in pools.items():
        node = reg.accelerator(pool_plan.accelerator).node_gpus
        if node is not None and pool_plan.layout is not None and pool_plan.layout.gpus > node:
            raise InputError(
                f"the {pool} pool's replicas of TP {pool_plan.layout.gpus} span more than one node of {node} "
                f"{pool_plan.accelerator}; the disaggregated launch runs each replica on one node: size the pools with "
                f"tensor-parallel degrees up to {node} (CLI --tp)"
            )
    configs = {}
    for pool, pool_plan in pools.items():
        base = launch_command(pool_plan, name, registry=reg)
        configs[pool] = _pool_config(base, name, pool, f, cited)
    router = _router(name, f, cited, hosts)
    parts = []
    for pool in ("prefill", "decode"):
        record = getattr(plan, pool)
        parts.append(
            shell_comment(
                f"{pool} pool: {record['replicas']} replica(s) of TP {record['tensor_parallel']} on "
                f"{record['accelerator']} at {record['precision']}; run on each of {', '.join(hosts[pool][:3])}"
                f"{', ...' if len(hosts[pool]) > 3 else ''}"
            )
        )
        parts.append(configs[pool].command)
    parts += [shell_comment("router: the clients' endpoint, on its own host"), router.command]
    header = shell_comment(
        f"disaggregated serving on {name}: the commands of three roles, each run on its own hosts (not one script)"
    )
    command = "\n".join([header, *parts])
    return DisaggregatedLaunch(name, configs["prefill"], configs["decode"], router, hosts, command)


def _pool_config(base: LaunchConfig, engine: str, pool: str, f: LaunchFlags, cited: dict[str, str]) -> LaunchConfig:
    """A pool's command: the colocated command of its replica with the engine's disaggregation settings."""
    flags = dict(base.flags)
    files = dict(base.files)
    notes = list(base.notes)
    added: dict[str, str | None] = {}
    options: list[str] = []
    if pool == "prefill":
        notes.append("each prefill replica runs one prompt at a time, as the sizer's queue of prefills assumed")
    if engine == "vllm":
        role = "kv_producer" if pool == "prefill" else "kv_consumer"
        config = {"kv_connector": TRANSFER[engine], "kv_role": role}
        added[f["kv_transfer_config"]] = json.dumps(config, separators=(",", ":"))
        options.append("kv_transfer_config")
        notes.append(
            "NIXL moves the KV cache: set VLLM_NIXL_SIDE_CHANNEL_HOST to this host's address (vLLM's NixlConnector "
            "guide, Multi-Instance Setup)"
        )
    elif engine == "sglang":
        added[f["disaggregation_mode"]] = pool
        added[f["disaggregation_transfer_backend"]] = TRANSFER[engine]
        options += ["disaggregation_mode", "disaggregation_transfer_backend"]
        if pool == "prefill":
            added[f["disaggregation_bootstrap_port"]] = str(SGLANG_BOOTSTRAP_PORT)
            options.append("disaggregation_bootstrap_port")
    else:
        files = _trtllm_options(files, pool)
        notes.append(
            f"cache_transceiver_config sends the KV cache over {TRANSFER[engine]} (CacheTransceiverConfig.backend, "
            "tensorrt_llm/llmapi/llm_args.py; examples/disaggregated/README.md)"
        )
        flags.pop(f["options_file"], None)  # the pool's own file instead
        added[f["options_file"]] = TRTLLM_POOL_FILES[pool]
        options.append("options_file")
    flags.update(added)
    arguments = _arguments(base, flags)
    writes = [heredoc(file, text) for file, text in files.items()]
    command = "\n".join([*(shell_comment(note) for note in notes), *writes, shell_line(arguments)])
    citations = dict(base.citations) | {f[option]: cited[option] for option in options}
    return dataclasses.replace(
        base, arguments=arguments, command=command, flags=flags, citations=citations, notes=tuple(notes), files=files
    )


def _arguments(base: LaunchConfig, flags: dict[str, str | None]) -> tuple[str, ...]:
    """The executable and positional arguments of ``base`` followed by ``flags``."""
    from .deploy import flag_parts

    head = len(base.arguments) - len(flag_parts(base.flags))
    return (*base.arguments[:head], *flag_parts(flags))


def _trtllm_options(files: dict[str, str], pool: str) -> dict[str, str]:
    """TensorRT-LLM's options file of a pool: the replica's options with the cache transceiver's (and its flag)."""
    import yaml

    options = yaml.safe_load(files.pop(TRTLLM_OPTIONS_FILE, "")) or {}
    if pool == "prefill":  # as the repository's example writes the context servers' options
        options["disable_overlap_scheduler"] = True
    options["cache_transceiver_config"] = {"backend": TRANSFER["trtllm"]}
    return {**files, TRTLLM_POOL_FILES[pool]: yaml.safe_dump(options, sort_keys=False)}


def _router(engine: str, f: LaunchFlags, cited: dict[str, str], hosts: dict[str, tuple[str, ...]]) -> LaunchConfig:
    """The router's command: vLLM's proxy, SGLang's router in PD mode, or trtllm-serve disaggregated."""
    port = PORTS[engine]
    flags: dict[str, str | None] = {}
    files: dict[str, str] = {}
    notes: list[str] = []
    if engine == "vllm":
        executable: tuple[str, ...] = ("python3", VLLM_PROXY)
        options = ["router_port", "router_prefill_hosts", "router_prefill_ports", "router_decode_hosts"]
        options.append("router_decode_ports")
        tail = [f["router_port"], str(ROUTER_PORT)]
        for pool in ("prefill", "decode"):
            names = hosts[pool]
            tail += [f[f"router_{pool}_hosts"], *names, f[f"router_{pool}_ports"], *[str(port)] * len(names)]
        notes.append(
            f"{VLLM_PROXY} is vLLM's proxy for trying disaggregated serving (tests/v1/kv_connector/nixl_integration/ "
            "in its repository, not in the package): copy it beside this command, or use a production router"
        )
    elif engine == "sglang":
        executable = ("python3", "-m", "sglang_router.launch_router")
        options = ["router_pd", "router_prefill", "router_decode", "router_host", "router_port"]
        tail = [f["router_pd"]]
        for host in hosts["prefill"]:
            tail += [f["router_prefill"], f"http://{host}:{port}", str(SGLANG_BOOTSTRAP_PORT)]
        for host in hosts["decode"]:
            tail += [f["router_decode"], f"http://{host}:{port}"]
        tail += [f["router_host"], "0.0.0.0", f["router_port"], str(ROUTER_PORT)]
    else:
        import yaml

        executable = ("trtllm-serve", "disaggregated")
        options = ["router_config"]
        tail = [f["router_config"], TRTLLM_ROUTER_FILE]
        servers = {pool: {"num_instances": len(names), "urls": [f"{h}:{port}" for h in names]}
                   for pool, names in hosts.items()}  # fmt: skip
        config = {"hostname": "0.0.0.0", "port": ROUTER_PORT, "backend": "pytorch",
                  "context_servers": servers["prefill"], "generation_servers": servers["decode"]}  # fmt: skip
        files[TRTLLM_ROUTER_FILE] = yaml.safe_dump(config, sort_keys=False)
    arguments = (*executable, *tail)
    flags = _flag_values(tail)
    writes = [heredoc(file, text) for file, text in files.items()]
    command = "\n".join([*(shell_comment(note) for note in notes), *writes, shell_line(arguments)])
    citations = {f[option]: cited[option] for option in options}
    return LaunchConfig(engine, arguments, command, flags, citations, tuple(notes), files=files)


def _flag_values(tail: list[str]) -> dict[str, Any]:
    """The router's flags and their values (a repeated or many-valued flag's values joined by spaces)."""
    flags: dict[str, Any] = {}
    current = None
    for part in tail:
        if part.startswith("--"):
            current = part
            flags.setdefault(current, None)
        elif current is not None:
            flags[current] = part if flags[current] is None else f"{flags[current]} {part}"
    return flags
