"""The families the sizer searches: (accelerator, precision, layout) with their step arrays, drafter and price.

:func:`_families` builds one family per accelerator, precision and expert layout of a search space;
:func:`_copy_families` and :func:`_pipeline_families` add the families with copies of experts and with pipeline
stages that some replica sizes need; :func:`_multi_node_degrees` says which replica sizes beyond one scale-up
domain to search. The evaluation of a family over the candidate grid is :mod:`calculator.fleet.evaluate`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import _reuse  # private: the bounded scope sweep points share grids in (calculator._reuse)
from ..errors import InputError
from ..performance import EngineProfile, StepArrays, kv_cache_precision, kv_capacity_tokens, step_arrays
from ..performance.capacity import loads_online
from ..precision import check_precision
from .evaluate import _Family
from .inputs import Costs, SearchSpace, Speculation, Workload, default_price

__all__: list[str] = []  # the sizer's own parts, not re-exported


def _families(model: Any, space: SearchSpace, costs: Costs, speculation: Speculation | None, reg: Any,
              engine: EngineProfile, served: str = "") -> list[_Family]:  # fmt: skip
    """The (accelerator, precision) families of ``space``, each with its step arrays and GPU-hour price.

    The KV cache is ``space``'s, else the one ``engine`` runs on the checkpoint the plan assumes (``served``: the
    repository the model was named by; :func:`~calculator.performance.kv_cache_precision`).

    A mixture of experts gets one family per expert layout of ``space`` (the experts split by tensor
    parallelism, or spread whole over the group). With speculation each family carries its drafter: the
    draft model's arrays, or a head of the laid-out model's (:meth:`StepArrays.draft_head`).
    """
    out = []
    method = None if speculation is None else speculation.method
    draft_model = speculation.draft_model if speculation is not None else None  # method "draft" only
    for accelerator in space.accelerators:
        device = reg.accelerator(accelerator)
        hourly = _price_for(device.id, accelerator, costs.gpu_hour, reg)
        for precision in space.precisions:
            kv = space.kv_precision
            served_kv = kv or kv_cache_precision(model, device, precision, engine, served=served, registry=reg)
            arrays = _shared_arrays(model, device, precision, served_kv, engine, reg)
            draft = _shared_arrays(draft_model, device, precision, kv, engine, reg) if draft_model else None
            name, tdp = check_precision(precision), device.tdp.m_as("W")
            sixteen = (
                _shared_arrays(model, device, "bf16", kv, engine, reg) if loads_online(model, name, engine) else None
            )
            for layout in space.moe_layouts if arrays.experts > 1 else ("tensor",):
                laid = _laid_out(arrays, layout)
                drafter = _head(laid, method) if method in ("mtp", "eagle") else draft
                loaded = _laid_out(sixteen, layout) if sixteen is not None else None
                out.append(_Family(device.id, name, laid, hourly, tdp, drafter, layout, loaded=loaded))
    return out


def _copy_families(families: list[_Family], tps: np.ndarray, method: str | None) -> list[_Family]:
    """Families with copies of experts, for the replica sizes whose spread layouts need them.

    An engine that places experts evenly (SGLang, TensorRT-LLM) runs an expert-parallel degree that does not
    divide the experts only with copies beside them, as its load balancer is launched at scale (TensorRT-LLM's
    288 slots for DeepSeek's 256 experts on 72 GPUs). For each spread family, one family per copy count the
    replica sizes ``tps`` need (:meth:`_Family.copies_at`), its arrays placing that many more experts (so the
    busiest GPU's weights and the expert time, balanced where the wide tables measured the balancer, count them).
    A drafter built into the model (speculation ``method`` "mtp" or "eagle") is the laid-out model's head again.
    """
    out = []
    for family in families:
        if family.moe_layout == "tensor" or family.stages > 1:
            continue
        for copies in sorted({int(c) for c in family.copies_at(tps) if c > 0}):
            loaded = family.loaded.with_redundant_experts(copies) if family.loaded is not None else None
            arrays = family.arrays.with_redundant_experts(copies)
            draft = _head(arrays, method) if method in ("mtp", "eagle") else family.draft
            out.append(dataclasses.replace(family, arrays=arrays, draft=draft, loaded=loaded, redundant=copies))
    return out


def _head(arrays: StepArrays, method: str) -> StepArrays:
    """:meth:`StepArrays.draft_head` of ``arrays``, once per sweep (its kernel cache shared by the points)."""
    return _reuse.shared(("draft_head", _reuse.Same(arrays), method), lambda: arrays.draft_head(method))


def _pipeline_families(families: list[_Family], degrees: list[int]) -> list[_Family]:
    """Pipeline families for replicas over several scale-up domains: one stage per domain.

    For each tensor-layout family whose accelerator has a scale-out link, one family per stage count
    the replica sizes ``degrees`` give (two and four nodes): each stage a node's tensor-parallel GPUs
    with its share of the layers, only the stages' hand-offs crossing the scale-out link.
    """
    out = []
    for family in families:
        a = family.arrays
        if family.moe_layout != "tensor" or a.scale_out_bandwidth <= 0 or not np.isfinite(a.node_gpus):
            continue
        for stages in sorted({int(d // a.node_gpus) for d in degrees if d % a.node_gpus == 0 and d > a.node_gpus}):
            loaded = family.loaded.with_pipeline_parallel(stages) if family.loaded is not None else None
            out.append(
                dataclasses.replace(family, arrays=a.with_pipeline_parallel(stages), stages=stages, loaded=loaded)
            )
    return out


def _multi_node_degrees(families: list[_Family], profile: EngineProfile, workload: Workload) -> list[int]:
    """Replica sizes of two and four scale-up domains, for families whose model does not fit in one.

    Searched only where the accelerator has a scale-out link in the registry and one domain's KV cache
    cannot hold one request (the weights fill it): DeepSeek-V3 at FP8 on eight H100s, for instance.
    """
    longest = workload.input_tokens + workload.output_tokens
    extra: set[int] = set()
    for family in families:
        a = family.arrays
        if a.scale_out_bandwidth <= 0 or not np.isfinite(a.node_gpus):
            continue
        node = float(a.node_gpus)
        if float(kv_capacity_tokens(a, profile, node)) < longest:
            extra |= {int(2 * node), int(4 * node)}
    return sorted(extra)


def _shared_arrays(model: Any, device: Any, precision: str, kv: str | None, engine: EngineProfile,
                   reg: Any) -> StepArrays:  # fmt: skip
    """:func:`~calculator.performance.step_arrays`, once per sweep for the same inputs.

    The entry objects, the engine profile and the registry are keyed by identity (a user's model or
    registry never stands for the packaged one), ids and precisions by name.
    """
    entry = model if isinstance(model, str) else _reuse.Same(model)
    key = ("step_arrays", entry, _reuse.Same(device), precision, kv, _reuse.Same(engine), _reuse.Same(reg))
    return _reuse.shared(key, lambda: step_arrays(model, device, precision, kv, engine=engine, registry=reg))


def _laid_out(arrays: StepArrays, layout: str) -> StepArrays:
    """A mixture of experts' arrays in an expert ``layout``: split by TP, spread (EP = TP), or attention ranks."""
    if layout == "tensor":
        return arrays

    def build() -> StepArrays:
        laid = arrays.with_expert_tensor_parallel(1.0)
        return laid.with_attention_data_parallel(1.0) if layout == "attention-dp" else laid

    return _reuse.shared(("laid_out", _reuse.Same(arrays), layout), build)


def _price_for(accelerator_id: str, given_name: Any, price: Any, reg: Any) -> float:
    """USD per GPU-hour of one accelerator: the one price, its entry in a per-accelerator dict, or the registry's."""
    if price is None:
        return default_price(accelerator_id, reg).m_as("USD/hour")
    if isinstance(price, Mapping):
        hourly = price.get(accelerator_id, price.get(given_name) if isinstance(given_name, str) else None)
        if hourly is None:
            raise InputError(f"size_fleet(): the GPU-hour prices (Costs.gpu_hour) have no entry for '{accelerator_id}'")
        return hourly.m_as("USD/hour")
    return price.m_as("USD/hour")
