"""Calls of every public function built from its signature: the shared ground of the API-wide tests.

Each parameter's type alias (``calculator.types``: ``Time``, ``Count``, ``ModelRef``, ...) says what it
holds, so a valid argument can be made for it: a quantity of the alias's unit at a typical magnitude, a
count, a probability, a registry id. ``OVERRIDES`` gives the values a function needs beyond that (a
stable queue, a feasible plan). ``valid_call(name)`` returns the arguments of a call that succeeds, or
``None`` when the function's arguments cannot all be made from its signature.
"""

from __future__ import annotations

import atexit
import inspect
import json
import shutil
import tempfile
import typing
from functools import cache
from pathlib import Path
from typing import Any

import calculator
from calculator import Q_
from calculator.formula import Formula
from calculator.kernels import tables_for
from calculator.types import Dimension, alias_dimension

#: Typical magnitudes per unit (a value inside most functions' domains).
MAGNITUDES = {
    "s": 0.05,
    "B": 1e9,
    "B/s": 1e11,
    "request/s": 2.0,
    "token/s": 5000.0,
    "FLOP": 1e12,
    "FLOP/s": 1e14,
    "USD": 100.0,
    "USD/h": 2.0,
    "USD/request": 0.001,
    "W": 700.0,
    "J": 1e6,
    "B/token": 1e5,
}

#: Values per kind of plain argument.
PLAIN = {"count": 4, "tokens": 512, "probability": 0.5, "fraction": 0.5, "number": 2.0, "precision": "fp8"}
#: Values of parameters annotated with a plain type.
PLAIN_TYPES: dict[Any, Any] = {int: 4, float: 0.5, bool: True}
ENTRIES = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "interconnect": "nvlink4", "capacity": Q_(80, "GB")}

#: Values of parameters without an alias, by name (registry ids, precision names, engines).
BY_NAME: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "accelerator": "h100-sxm",
    "precision": "fp8",
    "engine": "vllm",
    "link": "nvlink4",
    "interconnect": "nvlink4",
}

_STABLE_QUEUE = {"arrival_rate": Q_(2, "request/s"), "service_time": Q_(1, "s"), "servers": 4}
#: size_fleet's arguments: the model and the parts (relax_targets and the disaggregated sizers take them too).
_SIZING = {
    "model": "llama-3.1-8b",
    "workload": calculator.Workload(Q_(5, "request/s"), 1024, 256),
    "targets": calculator.Targets(Q_(1, "s"), Q_(50, "ms")),
    "space": calculator.SearchSpace("h100-sxm", "fp8"),
}

#: A feasible plan as size_fleet returns one (built by hand: sizing costs a second).
_PLAN = calculator.FleetPlan(
    True,
    "cheapest",
    model="llama-3.1-8b",
    accelerator="h100-sxm",
    precision="fp8",
    engine="vllm",
    batch=64,
    replicas=2,
    gpus=2,
    kv_precision="fp8",
    layout=calculator.fleet.Layout(tensor_parallel=1),
    service=calculator.fleet.PlanService(
        ttft=Q_(0.2, "s"),
        tpot=Q_(20, "ms"),
        tbt_max=Q_(60, "ms"),
        ttft_interval=(Q_(0.15, "s"), Q_(0.3, "s")),
        tpot_interval=(Q_(17, "ms"), Q_(24, "ms")),
        replica_throughput=Q_(4, "request/s"),
        running_batch=20.0,
        utilization=0.6,
    ),
    targets=calculator.Targets(Q_(1, "s"), Q_(50, "ms")),
)

#: A day in production (calculator.dynamics): an hour of flat demand over the plan's fixed fleet.
_DAY_CURVE = calculator.demand_shape("flat", Q_(5, "request/s"), duration=Q_(1, "hour"))
_DAY = calculator.Scenario(
    _DAY_CURVE, autoscaler=calculator.Autoscaler(kind="fixed", min_replicas=2), price=Q_(2, "USD/h")
)
_DAY_CALLS: dict[str, dict[str, Any]] = {
    "demand_shape": {"shape": "diurnal", "peak_rate": Q_(100, "request/s")},
    "demand_from_file": {"source": __import__("pandas").DataFrame({"time": [0, 60], "rate": [1, 2]})},
    "parse_failure": {"text": "region:us-east@14:00+2h"},
    "parse_clock": {"text": "1d14:00"},
    "run_fluid": {"plan": _PLAN, "scenario": _DAY},
    "run_day": {"plan": _PLAN, "scenario": _DAY},
    "day_scenario": {"plan": _PLAN, "demand": _DAY_CURVE},
    "plan_autoscaler": {"plan": _PLAN},
    "attainment_goal": {"plan": _PLAN, "scenario": _DAY},
}

#: Arguments a function needs beyond its signature's kinds (a stable queue, a feasible plan).
#: A benchmark result file of vLLM's layout, for the readers of the user's own benchmarks.
_RESULTS = Path(tempfile.mkdtemp(prefix="servecalc-fuzz-")) / "run.json"
atexit.register(shutil.rmtree, _RESULTS.parent, True)  # the folder leaves with the process
_RESULTS.write_text(
    json.dumps(
        {"completed": 80, "total_input_tokens": 81920, "total_output_tokens": 20480, "mean_ttft_ms": 150.0,
         "mean_tpot_ms": 12.0, "max_concurrency": 8}
    ),
    encoding="utf-8",
)  # fmt: skip
_CALIBRATION = calculator.UserCalibration(
    calculator.ENGINES["vllm"], (0.1, 0.05), (0.12, 0.06), {"ttft": (0.8, 1.3), "tpot": (0.9, 1.1)}, 5
)

#: The kernel tables of a measured GPU, and an interconnect with a startup latency (the chapter's NVLink).
_KERNELS = tables_for("h100-sxm")
_LINK = "chapter-nvlink-h100"

OVERRIDES: dict[str, dict[str, Any]] = {
    "read_benchmark_files": {
        "paths": [_RESULTS],
        "model": "qwen3-32b",
        "accelerator": "h100-sxm",
        "engine": "vllm",
        "tensor_parallel": 4,
    },
    "read_result_records": {"paths": [_RESULTS]},
    "result_number": {"where": "run.json", "field": "mean_ttft_ms", "value": 150.0},
    "tie_lines": {"plan": _PLAN},
    "percentile_label": {"fraction": 0.99},
    "router_name": {"router": "round_robin"},
    "vendor_tested": {"accelerator_id": "h100_sxm"},
    "engine_entry_yaml": {
        "calibration": _CALIBRATION,
        "engine": "vllm",
        "accelerator": "h100-sxm",
        "files": ["a.json"],
    },
    "profile_from_entry": {
        "entry": calculator.load_registry().engines["vllm"],
        "sources": calculator.load_registry().sources,
    },
    "launch_command": {"plan": _PLAN, "engine": "vllm"},
    "kv_cache_precision": {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "precision": "fp8", "engine": "vllm"},
    "tensor_precision": {"device": calculator.load_registry().accelerator("h100-sxm"), "precision": "fp8"},
    "weights_source": {"model": "llama-3.1-8b", "precision": "fp8", "engine": "vllm"},
    "kubernetes_manifest": {"plan": _PLAN, "engine": "vllm"},
    **{name: _STABLE_QUEUE for name in ("erlang_c", "mmc_mean_wait", "queue_stable")},
    "plan_summary": {"plan": _PLAN},
    "interval_note": {"plan": _PLAN},
    **_DAY_CALLS,
    "acceptance_for_speedup": {"target_speedup": 2.0, "draft_length": 4, "draft_cost_ratio": 0.05},
    "acceptance_rate": {"target_probs": [0.5, 0.3, 0.2], "draft_probs": [0.4, 0.4, 0.2]},
    "speculative_sample": {
        "target_probs": [0.5, 0.3, 0.2],
        "draft_probs": [0.4, 0.4, 0.2],
        "draft_length": 4,
        "rounds": 200,
        "seed": 1,
    },
    "simulate_tokens_per_round": {"acceptance": 0.5, "draft_length": 4, "rounds": 200, "seed": 1},
    "emitted_tokens": {"accepted": [True, True, False, True]},
    "expected_tokens_per_round_by_position": {"acceptance": [0.9, 0.7, 0.5]},
    "coordination_latency": {"branch_latencies": Q_([10, 20, 15], "ms"), "join_overhead": Q_(1, "ms")},
    "padding_waste": {"output_lengths": [100, 200, 50, 400]},
    "static_batch_accounting": {"output_lengths": [100, 200, 50, 400], "iteration_time": Q_(20, "ms")},
    "slot_timeline": {"output_lengths": [5, 3, 8, 2]},
    "stream_metrics": {"token_times": Q_([0.2, 0.25, 0.3, 0.36], "s"), "request_start": Q_(0, "s")},
    "piecewise_lifetime_cost": {
        "training_cost": Q_(2e6, "USD"),
        "cost_per_query": Q_(0.001, "USD/request"),
        "duration": Q_(1e6, "s"),
        "arrival_rate": Q_(1000, "request/s"),
    },
    "fit_ring_allreduce": {
        "message": Q_([1e6, 4e6, 16e6, 64e6], "B"),
        "devices": [8, 8, 8, 8],
        "measured_time": Q_([0.05, 0.1, 0.3, 1.1], "ms"),
    },
    "pool_admission": {"pool_tokens": 100_000, "sequence_tokens": 4096},
    "reservation_vs_paging": {"pool_tokens": 100_000, "reserved_tokens": 8192, "used_tokens": 3000},
    "prefix_cache_memory": {
        "users": 100,
        "prefix_tokens": 2000,
        "unique_tokens": 500,
        "kv_per_token": Q_(160, "kB/token"),
    },
    "quantization_overhead": {"bits": 4, "block_size": 128},
    "quantize": {"values": [0.2, -0.1, 0.05, 0.01, 58.7, 0.35, -0.12, 0.05]},
    "max_min_fair": {"demands": [2.0, 5.0, 9.0], "capacity": 12.0},
    "priority_allocation": {
        "capacity": Q_(100, "request/s"),
        "critical": Q_(30, "request/s"),
        "standard": Q_([40, 20], "request/s"),
        "best_effort": Q_(50, "request/s"),
    },
    "replicas_for_phases": {
        "demands": {"prefill": Q_(100, "request/s")},
        "per_replica": {"prefill": Q_(30, "request/s")},
    },
    "saturating_surge": {"utilization": 0.5},
    "schedule_iteration": {
        "decode_batch": 8,
        "prefill_queue": [(1000, 0), (500, 0)],
        "token_budget": 512,
        "chunk_size": 256,
    },
    "simulate_chunked_prefill": {
        "prompt_lengths": [1000, 500],
        "decode_batch": 8,
        "token_budget": 512,
        "chunk_size": 256,
    },
    "slot_map": {"slots": "[A][a][ ][B]"},
    "tenant_burst": {"rates": Q_([10, 20, 30], "request/s"), "bursting_tenant": 1, "multiplier": 3.0},
    "least_connections": {"active": [3, 1, 2]},
    "latency_budget": {"components": {"network": Q_(20, "ms"), "inference": Q_(100, "ms")}, "budget": Q_(200, "ms")},
    "tier_budget_check": {
        "latencies": {"edge": Q_(5, "ms"), "origin": Q_(50, "ms")},
        "budgets": {"edge": Q_(10, "ms"), "origin": Q_(100, "ms")},
    },
    "speculation_contract": {
        "acceptance": 0.78,
        "draft_length": 5,
        "verify_time": Q_(49.6, "ms"),
        "draft_cost_ratio": 4 / 5 / 49.6,
    },
    "compare_routing_policies": {
        "arrival_rate": Q_(50, "request/s"),
        "output_tokens": 100,
        "replicas": 4,
        "step_time": Q_(20, "ms"),
        "step_time_per_request": Q_(0.2, "ms"),
        "requests": 200,
    },
    "failover_headroom": {
        "capacities": {"a": Q_(100, "request/s"), "b": Q_(100, "request/s")},
        "loads": {"a": Q_(50, "request/s"), "b": Q_(40, "request/s")},
        "failed": "a",
    },
    "dominant_resource_fairness": {
        "capacities": {"gpu": 10.0, "memory": 100.0},
        "demands": [{"gpu": 1.0, "memory": 4.0}, {"gpu": 3.0, "memory": 1.0}],
    },
    "draft_memory_fit": {
        "target": "llama-3.1-70b",
        "draft": "llama-3.1-8b",
        "capacity": Q_(80, "GB"),
        "context": 4096,
        "weight_bits": "fp8",
        "tensor_parallel": 2,
    },
    "capacity_ready_within": {
        "pool": {"warm": 2, "cold": 3},
        "activation_delay": {"warm": Q_(10, "s"), "cold": Q_(5, "min")},
        "deadline": Q_(1, "min"),
    },
    "mmc_wait_exceedance": {**_STABLE_QUEUE, "threshold": Q_(0.1, "s")},
    "mmc_wait_quantile": {**_STABLE_QUEUE, "quantile": 0.9},
    "mg1_mean_wait": {"arrival_rate": Q_(2, "request/s"), "service_time": Q_(0.1, "s"), "service_cv": 1.0},
    "ggc_mean_wait": {**_STABLE_QUEUE, "arrival_cv": 1.0, "service_cv": 1.0},
    "ggc_wait_exceedance": {**_STABLE_QUEUE, "arrival_cv": 1.0, "service_cv": 1.0, "threshold": Q_(0.1, "s")},
    "ggc_wait_quantile": {**_STABLE_QUEUE, "arrival_cv": 1.0, "service_cv": 1.0, "quantile": 0.9},
    "replicas_for_load": {"arrival_rate": Q_(20, "request/s"), "replica_throughput": Q_(3, "request/s")},
    **{name: _SIZING for name in ("size_fleet", "relax_targets", "size_disaggregated", "compare_serving_modes")},
    "frontier": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "input_tokens": 1024,
        "output_tokens": 256,
    },
    "predict_benchmark": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "tensor_parallel": 1,
        "input_tokens": 1024,
        "output_tokens": 256,
        "concurrency": 16,
    },
    # the plain-number kernel and memory functions the step model and the searches call (checked since issue 57)
    "max_batch_numeric": {
        "capacity": 80e9,
        "weights": 16e9,
        "kv_per_token": 131072.0,
        "context": 4096,
        "reserve": 2e9,
        "block_size": 16,
    },
    **{
        name: {"tables": _KERNELS, "dtype": "bf16", "m": 512.0, "n": 4096.0, "k": 4096.0, "groups": 8}
        for name in ("gemm_seconds", "grouped_gemm_seconds")
    },
    "allreduce_seconds": {"tables": _KERNELS, "gpus": 8, "message_bytes": 1e6, "link_bandwidth": 450e9},
    "collective_time": {"collective": "allreduce", "message": Q_(1e9, "B"), "devices": 4, "link": _LINK},
    "link_latency": {"link": _LINK},
    "expert_exchange_time": {"model": "deepseek-v3", "accelerator": "h100-sxm", "gpus": 4, "tokens": 512},
    "decode_step_time": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "tensor_parallel": 1,
        "batch": 16,
        "context": 2048,
    },
    "prefill_time": {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "precision": "fp8",
        "tensor_parallel": 1,
        "prompt_tokens": 1024,
    },
}

#: Public functions whose arguments are plain SI magnitudes by design (vectorized inner loops).
PLAIN_ARRAY_FUNCTIONS = frozenset(
    {"iteration_seconds", "max_batch_numeric", "gemm_seconds", "grouped_gemm_seconds", "allreduce_seconds"}
)


def public_functions() -> dict[str, Any]:
    """Every public function and formula of the flat namespace (classes excluded)."""
    out = {}
    for name in calculator.__all__:
        value = getattr(calculator, name)
        if isinstance(value, Formula) or inspect.isfunction(value):
            out[name] = value
    return out


def hints(function: Any) -> dict[str, Any]:
    """Each parameter's annotation with its ``Annotated`` metadata (aliases resolved)."""
    if isinstance(function, Formula):
        return {p.name: p.annotation for p in inspect.signature(function).parameters.values()}
    return typing.get_type_hints(function, include_extras=True, localns=_TYPE_CHECKING_NAMES)


#: Classes some signatures name only for the type checker (imported under ``TYPE_CHECKING``).
_TYPE_CHECKING_NAMES = {
    "Registry": calculator.Registry,
    "Price": calculator.registry.Price,
    "FleetPlan": calculator.FleetPlan,
    "DisaggregatedPlan": calculator.fleet.DisaggregatedPlan,
    "StepArrays": calculator.StepArrays,
    "Speculation": calculator.serving.Speculation,
}


def kinds(function: Any) -> dict[str, Dimension]:
    """Parameter -> the :class:`Dimension` of its alias, for the parameters that have one."""
    out = {}
    for name, hint in hints(function).items():
        found = alias_dimension(hint)
        if found is None:
            for member in typing.get_args(hint):  # an optional alias: Time | None
                found = found or alias_dimension(member)
        if found is not None and name != "return":
            out[name] = found
    return out


def value_for(dimension: Dimension, scale: float = 1.0) -> Any:
    """A valid argument of ``dimension`` (``scale`` multiplies a quantity's typical magnitude)."""
    if dimension.kind in ENTRIES:
        return ENTRIES[dimension.kind]
    if dimension.kind in PLAIN:
        return PLAIN[dimension.kind]
    return Q_(MAGNITUDES.get(dimension.unit, 1.0) * scale, dimension.unit)


@cache
def valid_call(name: str) -> dict[str, Any] | None:
    """Keyword arguments of a call of ``name`` that succeeds, or ``None``."""
    function = public_functions()[name]
    parameters = inspect.signature(function).parameters
    known = kinds(function)
    arguments: dict[str, Any] = {}
    for parameter in parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name in OVERRIDES.get(name, {}):
            arguments[parameter.name] = OVERRIDES[name][parameter.name]
        elif parameter.default is parameter.empty:
            if parameter.name in known:
                arguments[parameter.name] = value_for(known[parameter.name])
            elif parameter.name in BY_NAME:
                arguments[parameter.name] = BY_NAME[parameter.name]
            elif hints(function).get(parameter.name) in PLAIN_TYPES:
                arguments[parameter.name] = PLAIN_TYPES[hints(function)[parameter.name]]
            else:
                return None
    try:
        function(**arguments)
    except Exception:  # a call the signature alone cannot make valid
        return None
    return arguments


def same(a: Any, b: Any) -> bool:
    """Whether two results are equal: quantities, arrays, frames and result objects, field by field."""
    import dataclasses

    import numpy as np
    import pandas as pd

    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a)  # type: ignore[arg-type]
        )
    if isinstance(a, pd.DataFrame):
        return (
            isinstance(b, pd.DataFrame)
            and list(a.columns) == list(b.columns)
            and all(same(list(a[c]), list(b[c])) for c in a.columns)
        )
    if isinstance(a, pd.Series):
        return isinstance(b, pd.Series) and same(list(a), list(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, calculator.ureg.Quantity):
        if not isinstance(b, calculator.ureg.Quantity) or a.dimensionality != b.dimensionality:
            return False
        return same(a.magnitude, b.to(a.units).magnitude)
    if isinstance(a, np.ndarray | float | int | np.number) and not isinstance(a, bool):
        try:
            return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True))
        except (TypeError, ValueError):
            return False
    return bool(a == b) if not isinstance(a, np.ndarray) else False
