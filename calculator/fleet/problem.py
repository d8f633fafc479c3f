"""One sizing, checked and resolved once (:class:`_Problem`): what the fleet search takes as it is.

:func:`~calculator.fleet.size_fleet`, :func:`~calculator.fleet.frontier`, :func:`~calculator.fleet.relax_targets`
and :func:`~calculator.fleet.size_disaggregated` check their parts (:func:`_part`), resolve the registry, the
engine profile, the model and the candidate grid (:func:`_resolve`), and hand the search the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..performance import EngineProfile, engine_profile
from ..performance.speculation import check_speculation
from ..types import ModelRef
from ..units import shown
from ._common import _model_id, _registry_for
from .evaluate import _Family
from .families import _copy_families, _families, _multi_node_degrees, _pipeline_families
from .inputs import DEFAULT_TENSOR_PARALLEL, Costs, SearchSpace, ServingOptions, Targets, Workload

if TYPE_CHECKING:
    from ..registry import Model, Registry

__all__: list[str] = []  # the sizer's own parts


def _part(name: str, value: Any, kind: type, example: str, function: str = "size_fleet") -> Any:
    """``value`` if it is a ``kind`` (one of the sizer's parts), else an InputError naming the argument."""
    if not isinstance(value, kind):
        raise InputError(f"{function}(): argument '{name}' must be a {kind.__name__} ({example}), got {shown(value)}")
    return value


def _resolve(
    model: ModelRef,
    space: SearchSpace,
    engine: str | EngineProfile | None,
    registry: Registry | None,
    attention_ranks: bool = False,
) -> tuple[Registry, EngineProfile, Model, np.ndarray, np.ndarray]:
    """The registry, the engine profile, the model, and the TP degrees (those that divide its heads) and batch caps.

    ``space`` is a checked :class:`SearchSpace`; its degrees and caps are taken as they are. ``attention_ranks``
    (the sizer, whose families check their own degrees, :meth:`~calculator.fleet.evaluate._Family.layout_ok`):
    a mixture of experts searched with attention ranks also keeps the degrees that do not divide its heads,
    since each rank holds whole heads (DeepSeek-V3's 128 heads on 72 GPUs).
    """
    reg = _registry_for(registry, model, list(space.accelerators))
    profile = engine_profile(engine, reg)
    entry = reg.model(model)
    heads = entry.attention_heads
    if heads is None:
        raise InputError(f"size_fleet(): model '{_model_id(entry)}' is not a transformer LLM")
    tps = np.unique(np.asarray(space.tensor_parallel, dtype=float))
    if not (attention_ranks and _ranked(entry, space)):
        tps = tps[heads % tps == 0]
    if tps.size == 0:
        degrees = list(space.tensor_parallel)
        raise InputError(
            f"size_fleet(): argument 'tensor_parallel': no tensor-parallel degree in {degrees} divides {heads} heads"
        )
    return reg, profile, entry, tps, np.unique(np.asarray(space.batches, dtype=float))


def _ranked(entry: Model, space: SearchSpace) -> bool:
    """Whether the sizer searches ``entry`` with attention ranks (a mixture of experts, the layout in the space)."""
    return bool(entry.experts > 1 and "attention-dp" in space.moe_layouts)


@dataclass(frozen=True, eq=False)
class _Problem:
    """One sizing, checked and resolved once: the parts, the registry entries and the candidate grid.

    The search (:func:`~calculator.fleet.search._size`) takes it as it is. ``beyond`` is why no engine
    serves the workload's requests on the model (longer than its context), or "" (then ``families``
    holds every (accelerator, precision, layout) searched, pipeline families included, and ``tps``
    every replica size: the degrees of the space that divide the model's heads, with replicas of
    two and four scale-up domains where one cannot hold the model and a request).
    """

    model: Model
    workload: Workload
    targets: Targets
    space: SearchSpace
    serving: ServingOptions
    costs: Costs
    registry: Registry
    profile: EngineProfile
    tps: np.ndarray
    batches: np.ndarray
    families: tuple[_Family, ...]
    beyond: str = ""
    named: str = ""  # the Hugging Face repository the model was named by (one of its aliases), served as named

    @classmethod
    def of(
        cls,
        model: ModelRef,
        workload: Workload,
        targets: Targets,
        space: SearchSpace,
        engine: str | EngineProfile | None = None,
        serving: ServingOptions | None = None,
        costs: Costs | None = None,
        registry: Registry | None = None,
    ) -> _Problem:
        """The problem of :func:`size_fleet`'s arguments (each part checks its own fields when built)."""
        _part("workload", workload, Workload, "Workload(Q_(10, 'request/s'), 1024, 256)")
        _part("targets", targets, Targets, "Targets(Q_(1, 's'), Q_(50, 'ms'))")
        _part("space", space, SearchSpace, "SearchSpace('h100-sxm', 'fp8')")
        serving = _part("serving", ServingOptions() if serving is None else serving, ServingOptions, "ServingOptions()")
        costs = _part("costs", Costs() if costs is None else costs, Costs, "Costs(Q_(3, 'USD/hour'))")
        if serving.shared_prefix_tokens > workload.input_tokens:
            raise InputError(
                f"size_fleet(): the shared prefix ({serving.shared_prefix_tokens:g} tokens, ServingOptions) must be "
                f"at most the workload's mean prompt ({workload.input_tokens:g} tokens)"
            )
        reg, profile, entry, tps, batches = _resolve(model, space, engine, registry, attention_ranks=True)
        if serving.speculation is not None:
            check_speculation("size_fleet", serving.speculation, entry, profile)
        beyond = _beyond_context(entry, workload)
        named = _named_repository(model, entry)
        families = [] if beyond else _families(entry, space, costs, serving.speculation, reg, profile, named)
        if families and space.tensor_parallel == DEFAULT_TENSOR_PARALLEL:
            # replicas over several nodes where one is not enough
            wider = [d for d in _multi_node_degrees(families, profile, workload) if d not in tps]
            usable = [d for d in wider if entry.attention_heads % d == 0 or _ranked(entry, space)]  # type: ignore[operator]
            tps = np.unique(np.concatenate([tps, np.asarray(usable, dtype=float)]))
            families += _pipeline_families(families, wider)
        method = serving.speculation.method if serving.speculation is not None else None
        families += _copy_families(families, tps, method)
        parts = (entry, workload, targets, space, serving, costs, reg, profile, tps, batches, tuple(families))
        return cls(*parts, beyond, named)


def _named_repository(model: ModelRef, entry: Model) -> str:
    """The Hugging Face repository ``model`` names, as the registry spells it, where it is one of ``entry``'s aliases.

    ``meta-llama/Llama-3.1-70B-Instruct`` resolves to the entry ``llama-3.1-70b``, whose first repository alias is
    the base model: the plan serves the instruct checkpoint it was asked about. A quantized checkpoint's repository
    (an alias too) picks that checkpoint (``performance.CHECKPOINT_RULE``). "" for an id or an object.
    """
    if not isinstance(model, str) or "/" not in model:
        return ""
    return next((alias for alias in entry.aliases if "/" in alias and alias.lower() == model.lower()), "")


def _beyond_context(model: Any, workload: Workload) -> str:
    """Why no engine serves the workload's requests on ``model`` (resolved), or "" where they fit its context."""
    longest = workload.input_tokens + workload.output_tokens
    if model.max_context is None or longest <= model.max_context:
        return ""
    return (
        f"a request of {longest:,.0f} tokens (input + output) exceeds {model.id}'s context limit of "
        f"{model.max_context:,} tokens; no engine serves it"
    )
