"""SLO-driven fleet sizing: :func:`size_fleet`, the cheapest fleet that serves a workload within its targets.

:func:`size_fleet` takes the traffic (:class:`~calculator.fleet.inputs.Workload`), the targets
(:class:`~calculator.fleet.inputs.Targets`) and the configurations to search
(:class:`~calculator.fleet.inputs.SearchSpace`: accelerator x precision x TP degree x cap ``B`` on
running sequences), with the serving features (:class:`~calculator.fleet.inputs.ServingOptions`)
and prices (:class:`~calculator.fleet.inputs.Costs`). It resolves them once into a :class:`_Problem`
(the registry, the engine profile, the model and the candidate grid), which the search of
:mod:`calculator.fleet.search` takes as it is. :func:`calculator.simulation.verify_plan` checks a
plan request by request.

The parts are the only form: the flat form of the first releases (``size_fleet(model, accelerator,
precision, arrival_rate, ...)``) raises an :class:`~calculator.errors.InputError` that says where
each of its arguments goes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..performance import EngineProfile
from ..types import ModelRef
from ..units import shown
from .inputs import Costs, SearchSpace, ServingOptions, Targets, Workload
from .plan import FleetPlan
from .problem import _Problem
from .search import _size

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["size_fleet"]


#: The arguments of the flat form of the first releases, by the part (an argument of :func:`size_fleet`) and the
#: field that hold each now; :func:`~calculator.sweeps.sweep_fleet` names its axes by them.
FLAT_FIELDS = {
    "accelerator": ("space", "accelerators"),
    "precision": ("space", "precisions"),
    "tensor_parallel": ("space", "tensor_parallel"),
    "batches": ("space", "batches"),
    "kv_precision": ("space", "kv_precision"),
    "moe_layouts": ("space", "moe_layouts"),
    "arrival_rate": ("workload", "arrival_rate"),
    "input_tokens": ("workload", "input_tokens"),
    "output_tokens": ("workload", "output_tokens"),
    "input_cv": ("workload", "input_cv"),
    "output_cv": ("workload", "output_cv"),
    "arrival_cv": ("workload", "arrival_cv"),
    "ttft_slo": ("targets", "ttft"),
    "tpot_slo": ("targets", "tpot"),
    "tbt_slo": ("targets", "tbt"),
    "ttft_percentile": ("targets", "ttft_percentile"),
    "tpot_percentile": ("targets", "tpot_percentile"),
    "tbt_percentile": ("targets", "tbt_percentile"),
    "max_utilization": ("targets", "max_utilization"),
    "prefix_hit_rate": ("serving", "prefix_hit_rate"),
    "shared_prefix_tokens": ("serving", "shared_prefix_tokens"),
    "speculation": ("serving", "speculation"),
    "chunk_size": ("serving", "chunk_size"),
    "router": ("serving", "router"),
    "price": ("costs", "gpu_hour"),
    "electricity_price": ("costs", "electricity"),
    "idle_power_fraction": ("costs", "idle_power_fraction"),
}
#: The class of each part, by its argument name.
PARTS = {"workload": Workload, "targets": Targets, "space": SearchSpace, "serving": ServingOptions, "costs": Costs}


def _home(name: str) -> str:
    """Where a flat-form argument goes now: ``costs=Costs(gpu_hour=...)``, ``Workload(arrival_rate=...)``."""
    if name in ("verify", "verify_options"):
        return "calculator.simulation.verify_plan(plan, ...)"
    part, field = FLAT_FIELDS[name]
    keyword = "" if part in ("workload", "targets", "space") else f"{part}="
    return f"{keyword}{PARTS[part].__name__}({field}=...)"


#: What to pass instead of the flat form, with a one-line example.
PARTS_FORM = (
    "size_fleet() takes the named parts: size_fleet(model, Workload(...), Targets(...), SearchSpace(...), "
    "engine=..., serving=ServingOptions(...), costs=Costs(...), registry=...); e.g. "
    "size_fleet('llama-3.1-70b', Workload(Q_(10, 'request/s'), 1024, 256), Targets(Q_(1, 's'), Q_(50, 'ms')), "
    "SearchSpace('h100-sxm', 'fp8'), costs=Costs(Q_(4, 'USD/hour')))"
)


def _parts_only(function: Callable[..., FleetPlan]) -> Callable[..., FleetPlan]:
    """``function``; a call in the flat form of the first releases is an InputError saying what to pass."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def size_fleet(*args: Any, **kwargs: Any) -> FleetPlan:
        flat = [name for name in kwargs if name in FLAT_FIELDS or name in ("verify", "verify_options")]
        if flat:
            homes = "; ".join(f"'{name}' goes in {_home(name)}" for name in flat)
            raise InputError(f"{PARTS_FORM}. {homes}")
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InputError(f"{PARTS_FORM} ({exc})") from None
        if len(args) > 1 and not isinstance(args[1], Workload):
            raise InputError(f"{PARTS_FORM}; the second argument is the Workload, got {shown(args[1])}")
        return function(*args, **kwargs)

    return size_fleet


@_parts_only
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
    The flat form of the first releases (``size_fleet(model, accelerator, precision, arrival_rate,
    input_tokens, output_tokens, ttft_slo, tpot_slo, price=..., ...)``) is gone: such a call raises an
    :class:`~calculator.errors.InputError` naming the part each argument belongs in. Its
    ``verify=True`` is :func:`calculator.simulation.verify_plan` on the plan.

    Examples
    --------
    >>> from calculator import Q_
    >>> plan = size_fleet("llama-3.1-70b", Workload(Q_(10, "request/s"), 1024, 256),
    ...                   Targets(Q_(1, "s"), Q_(50, "ms")), SearchSpace("h100-sxm", "fp8"),
    ...                   costs=Costs(Q_(4, "USD/hour")))
    >>> plan.feasible, plan.gpus > 0, plan.binding_constraint in {"memory", "tpot", "ttft", "throughput"}
    (True, True, True)
    """
    return _size(_Problem.of(model, workload, targets, space, engine, serving, costs, registry))
