"""SLO-driven fleet sizing: :func:`size_fleet`, the cheapest fleet that serves a workload within its targets.

:func:`size_fleet` takes the traffic (:class:`~calculator.fleet.inputs.Workload`), the targets
(:class:`~calculator.fleet.inputs.Targets`) and the configurations to search
(:class:`~calculator.fleet.inputs.SearchSpace`: accelerator x precision x TP degree x cap ``B`` on
running sequences), with the serving features (:class:`~calculator.fleet.inputs.ServingOptions`)
and prices (:class:`~calculator.fleet.inputs.Costs`); the search is :mod:`calculator.fleet.search`.
:func:`calculator.simulation.verify_plan` checks a plan request by request.

The flat form of earlier releases (``size_fleet(model, accelerator, precision, arrival_rate,
input_tokens, output_tokens, ttft_slo, tpot_slo, price=..., ...)``) still works for this release and
warns (:mod:`calculator.fleet.flat`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..performance import EngineProfile
from ..types import ModelRef
from .flat import _size_fleet_flat
from .inputs import Costs, SearchSpace, ServingOptions, Targets, Workload
from .plan import FleetPlan
from .search import _size

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["size_fleet"]


#: The flat form's keyword arguments, by the part of the new form that holds each.
_FLAT_HOMES = {
    "price": "costs=Costs(gpu_hour=...)",
    "electricity_price": "costs=Costs(electricity=...)",
    "idle_power_fraction": "costs=Costs(idle_power_fraction=...)",
    "max_utilization": "Targets(max_utilization=...)",
    "ttft_percentile": "Targets(ttft_percentile=...)",
    "tbt_slo": "Targets(tbt=...)",
    "tensor_parallel": "SearchSpace(tensor_parallel=...)",
    "batches": "SearchSpace(batches=...)",
    "kv_precision": "SearchSpace(kv_precision=...)",
    "moe_layouts": "SearchSpace(moe_layouts=...)",
    "input_cv": "Workload(input_cv=...)",
    "output_cv": "Workload(output_cv=...)",
    "arrival_cv": "Workload(arrival_cv=...)",
    "prefix_hit_rate": "serving=ServingOptions(prefix_hit_rate=...)",
    "shared_prefix_tokens": "serving=ServingOptions(shared_prefix_tokens=...)",
    "speculation": "serving=ServingOptions(speculation=...)",
    "chunk_size": "serving=ServingOptions(chunk_size=...)",
    "router": "serving=ServingOptions(router=...)",
    "verify": "calculator.simulation.verify_plan(plan)",
    "verify_options": "calculator.simulation.verify_plan(plan, ...)",
    "progress": "nothing (the flat form's callback)",
}

#: Arguments only the new form has: a call naming any of them is of the new form.
_NEW_KEYWORDS = frozenset({"workload", "targets", "space", "serving", "costs"})

#: The warning of the flat form (one release; then it goes).
FLAT_FORM_WARNING = (
    "size_fleet(model, accelerator, precision, arrival_rate, input_tokens, output_tokens, ttft_slo, tpot_slo, ...) "
    "is deprecated and goes in the next release: pass size_fleet(model, Workload(...), Targets(...), "
    "SearchSpace(...), engine=..., serving=ServingOptions(...), costs=Costs(...), registry=...)"
)


def _with_flat_form(function: Callable[..., FleetPlan]) -> Callable[..., FleetPlan]:
    """``function`` (the new form), also taking the flat form of earlier releases with a DeprecationWarning."""

    @functools.wraps(function)
    def size_fleet(*args: Any, **kwargs: Any) -> FleetPlan:
        if set(kwargs) & _NEW_KEYWORDS or (len(args) > 1 and isinstance(args[1], Workload)):
            flat = sorted(set(kwargs) & set(_FLAT_HOMES))
            if flat:
                raise InputError(
                    f"size_fleet(): with a Workload (the new form), '{flat[0]}' belongs in {_FLAT_HOMES[flat[0]]}"
                )
            return function(*args, **kwargs)
        warnings.warn(FLAT_FORM_WARNING, DeprecationWarning, stacklevel=2)
        return _size_fleet_flat(*args, **kwargs)

    return size_fleet


@_with_flat_form
def size_fleet(
    model: ModelRef,
    workload: Workload,
    targets: Targets,
    space: SearchSpace,
    *,
    engine: str | EngineProfile | None = None,
    serving: ServingOptions | None = None,
    costs: Costs | None = None,
    registry: Registry | None = None,
) -> FleetPlan:
    """Size the cheapest fleet that serves a workload within its targets.

    Parameters
    ----------
    model : str or Model
        Registry id or alias.
    workload : Workload
        The traffic: rate, mean prompt and output lengths and their variability.
    targets : Targets
        TTFT (mean or a percentile), TPOT, optionally the longest token gap, and the load headroom.
    space : SearchSpace
        Candidate accelerators, precisions, tensor-parallel degrees and batch caps (and the KV
        cache's precision).
    engine : str or EngineProfile, optional
        Serving engine profile (scheduler, memory policy, costs); ``None`` for the generic default.
    serving : ServingOptions, optional
        Prefix caching, speculative decoding, chunked prefill and the router (default: none of the
        features, round robin).
    costs : Costs, optional
        GPU-hour prices (default: the registry's, :func:`default_price`), the electricity price and
        the idle power of a GPU.
    registry : Registry, optional
        Where ids resolve (``load_registry(extra=[...])`` for your own hardware, models and prices);
        default: the registry the given objects came from, or the packaged one.

    Returns
    -------
    FleetPlan

    Notes
    -----
    The flat form of earlier releases (``size_fleet(model, accelerator, precision, arrival_rate,
    input_tokens, output_tokens, ttft_slo, tpot_slo, *, engine, price, max_utilization, ...)``) still
    works in this release and raises a ``DeprecationWarning``; its ``verify=True`` is
    :func:`calculator.simulation.verify_plan` on the plan.

    Examples
    --------
    >>> from calculator import Q_
    >>> plan = size_fleet("llama-3.1-70b", Workload(Q_(10, "request/s"), 1024, 256),
    ...                   Targets(Q_(1, "s"), Q_(50, "ms")), SearchSpace("h100-sxm", "fp8"),
    ...                   costs=Costs(Q_(4, "USD/hour")))
    >>> plan.feasible, plan.gpus > 0, plan.binding_constraint in {"memory", "tpot", "ttft", "throughput"}
    (True, True, True)
    """
    return _size(model, workload, targets, space, engine, serving, costs, registry)
