"""The flat form of :func:`~calculator.fleet.size_fleet` of earlier releases, as the named parts.

``size_fleet(model, accelerator, precision, arrival_rate, input_tokens, output_tokens, ttft_slo,
tpot_slo, *, engine, price, max_utilization, ...)`` keeps working for one release with a
``DeprecationWarning``; :func:`flat_parts` turns its arguments into the new form's
(:class:`~calculator.fleet.inputs.Workload`, :class:`~calculator.fleet.inputs.Targets`,
:class:`~calculator.fleet.inputs.SearchSpace`, :class:`~calculator.fleet.inputs.ServingOptions`,
:class:`~calculator.fleet.inputs.Costs`). The front ends whose own options are flat (the CLI,
:func:`~calculator.sweeps.sweep_fleet`, :func:`~calculator.fleet.relax_targets`) build the parts
with it.

Examples
--------
>>> from calculator import Q_
>>> parts = flat_parts("llama-3.1-8b", "h100-sxm", "fp8", Q_(5, "request/s"), 1024, 256, Q_(1, "s"), Q_(50, "ms"),
...                    price=Q_(3, "USD/hour"), max_utilization=0.7)
>>> parts["targets"].max_utilization, parts["space"].accelerators, parts["costs"].gpu_hour
(0.7, ('h100-sxm',), <Quantity(3, 'USD / hour')>)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..performance import EngineProfile
from ..simulation.inputs import DEFAULT_ROUTER
from ..types import ModelRef, Rate, Time
from ..units import Q_
from ._common import _rate, _seconds
from .inputs import (
    DEFAULT_BATCHES,
    DEFAULT_TENSOR_PARALLEL,
    MOE_LAYOUTS,
    Costs,
    SearchSpace,
    ServingOptions,
    Speculation,
    Targets,
    Workload,
)
from .plan import FleetPlan
from .search import _size

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["flat_parts"]

#: The keyword arguments of :func:`calculator.simulation.verify_plan` that ``verify_options`` may give.
_VERIFY_OPTIONS = frozenset({"requests", "seeds", "router", "max_replicas", "executor", "progress", "time_limit"})


def _workload(rate: Any, inputs: Any, outputs: Any, input_cv: float, output_cv: float, arrival_cv: float) -> Workload:
    """The traffic: a :class:`Workload` given whole, or built from the flat arguments."""
    if isinstance(rate, Workload):
        given = [n for n, v in (("input_tokens", inputs), ("output_tokens", outputs)) if v is not None]
        given += [n for n, v, d in (("input_cv", input_cv, 0.0), ("output_cv", output_cv, 0.0),
                                    ("arrival_cv", arrival_cv, 1.0)) if v != d]  # fmt: skip
        if given:
            raise InputError(f"size_fleet(): a Workload carries the traffic; leave out {', '.join(given)}")
        return rate
    for name, value in (("input_tokens", inputs), ("output_tokens", outputs)):
        if value is None:
            raise InputError(f"size_fleet(): argument '{name}' is required (or pass a Workload as 'arrival_rate')")
    return Workload(_rate(rate), inputs, outputs, input_cv, output_cv, arrival_cv)


def flat_parts(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    arrival_rate: Rate,
    input_tokens: float | None = None,
    output_tokens: float | None = None,
    ttft_slo: Time = None,
    tpot_slo: Time = None,
    *,
    engine: str | EngineProfile | None = None,
    max_utilization: float = 0.8,
    ttft_percentile: float | None = None,
    price: Any = None,
    tensor_parallel: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
    batches: Sequence[int] = DEFAULT_BATCHES,
    input_cv: float = 0.0,
    output_cv: float = 0.0,
    arrival_cv: float = 1.0,
    kv_precision: str | None = None,
    moe_layouts: Sequence[str] = MOE_LAYOUTS,
    prefix_hit_rate: float = 0.0,
    shared_prefix_tokens: float = 0.0,
    speculation: Speculation | None = None,
    chunk_size: int | None = None,
    tbt_slo: Time = None,
    idle_power_fraction: float = 0.3,
    electricity_price: Any = None,
    router: str = DEFAULT_ROUTER,
    registry: Registry | None = None,
) -> dict[str, Any]:
    """The keyword arguments of :func:`~calculator.fleet.size_fleet`'s new form for a flat-form call.

    The arguments are those of the flat form (see :func:`~calculator.fleet.size_fleet`'s Notes);
    each part validates its own fields, and the times are checked under their flat names
    (``ttft_slo``, ``tpot_slo``, ``tbt_slo``).
    """
    workload = _workload(arrival_rate, input_tokens, output_tokens, input_cv, output_cv, arrival_cv)
    if ttft_slo is None or tpot_slo is None:
        missing = "ttft_slo" if ttft_slo is None else "tpot_slo"
        raise InputError(f"size_fleet(): argument '{missing}' is required (a time such as Q_(500, 'ms'))")
    given = {"ttft_slo": ttft_slo, "tpot_slo": tpot_slo, "tbt_slo": tbt_slo}
    times = {name: Q_(_seconds(name, value), "s") for name, value in given.items() if value is not None}
    targets = Targets(times["ttft_slo"], times["tpot_slo"], times.get("tbt_slo"), ttft_percentile, max_utilization)
    if isinstance(tensor_parallel, str | int) or isinstance(batches, str | int):
        raise InputError("size_fleet(): 'tensor_parallel' and 'batches' must be non-empty lists of integers >= 1")
    return {
        "model": model,
        "workload": workload,
        "targets": targets,
        "space": SearchSpace(
            accelerator, precision, tuple(tensor_parallel), tuple(batches), kv_precision, tuple(moe_layouts)
        ),
        "engine": engine,
        "serving": ServingOptions(prefix_hit_rate, shared_prefix_tokens, speculation, chunk_size, router),
        "costs": Costs(price, electricity_price, idle_power_fraction),
        "registry": registry,
    }


def _size_fleet_flat(
    *args: Any,
    progress: Callable[[int, int], Any] | None = None,
    verify: bool = False,
    verify_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> FleetPlan:
    """:func:`~calculator.fleet.size_fleet` in the flat form, without the warning (for the flat front ends).

    ``progress(done, total)`` is called after each (accelerator, precision) family; ``verify`` also
    simulates the plan (:func:`calculator.simulation.verify_plan` with ``verify_options``) and
    records the simulated replica count on it.
    """
    options = dict(verify_options or {})
    unknown = sorted(set(options) - _VERIFY_OPTIONS)
    if unknown:
        raise InputError(f"size_fleet(): 'verify_options' takes {sorted(_VERIFY_OPTIONS)}, got unknown {unknown}")
    plan = _size(**flat_parts(*args, **kwargs), progress=progress)
    if verify:
        from ..simulation import verify_plan

        checked = verify_plan(plan, **options)
        plan = dataclasses.replace(plan, simulated_replicas=checked.simulated_replicas, verification=checked)
    return plan
