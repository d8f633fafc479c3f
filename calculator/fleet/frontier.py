"""What the targets trade: the closest feasible alternative (targets loosened) and the frontier (Figure 6)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import InputError
from ..performance import EngineProfile
from ..results import Result
from ..types import ModelRef, Time
from ..units import Q_, shown
from .evaluate import _evaluate
from .families import _copy_families, _families
from .inputs import DEFAULT_BATCHES, DEFAULT_TENSOR_PARALLEL, Costs, SearchSpace, ServingOptions, Targets, Workload
from .plan import FleetPlan
from .problem import _beyond_context, _named_repository, _Problem, _resolve
from .search import _size

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["RelaxedPlan", "frontier", "relax_targets"]

#: The parts of a mean TTFT that :func:`frontier`'s ``ttft_binds`` names, in the order of the TTFT rule.
TTFT_PARTS = ("prefill", "prefill queue", "slot wait")


@dataclass(frozen=True, repr=False)
class RelaxedPlan(Result):
    """The closest feasible alternative of a sizing: the binding target(s) loosened by the smallest factor.

    Attributes
    ----------
    found : bool
        Whether a factor up to the search limit admits a plan.
    factor : float
        The smallest factor (within the search tolerance) by which the loosened target(s) were
        multiplied; 1 when the original targets are feasible.
    ttft_slo, tpot_slo : Quantity [time]
        The targets of the plan (only the loosened one differs from the original).
    plan : FleetPlan
        The plan at those targets (infeasible when ``found`` is False).
    loosened : str
        ``"ttft"`` or ``"tpot"`` when loosening that target alone is enough, ``"both"`` when neither
        alone is, ``"none"`` when the original targets are feasible.
    scale : float
        The plan's GPUs over those of the same traffic with the target(s) loosened by the search's
        ``max_factor`` (what it costs when latency hardly binds); at most ``max_scale``. 1 when the
        original targets are feasible (nothing to compare).
    """

    found: bool
    factor: float
    ttft_slo: Time
    tpot_slo: Time
    plan: FleetPlan
    loosened: str = "both"
    scale: float = 1.0


def relax_targets(
    model: ModelRef,
    workload: Workload,
    targets: Targets,
    space: SearchSpace,
    *,
    engine: str | EngineProfile | None = None,
    serving: ServingOptions | None = None,
    costs: Costs | None = None,
    registry: Registry | None = None,
    max_factor: float = 100.0,
    tolerance: float = 0.01,
    max_scale: float = 10.0,
) -> RelaxedPlan:
    """The closest feasible alternative: loosen only what binds, by the smallest factor that gives a plan in proportion.

    Parameters
    ----------
    model, workload, targets, space, engine, serving, costs, registry
        As for :func:`size_fleet`.
    max_factor : float
        The largest loosening searched.
    tolerance : float
        Relative precision of the factor.
    max_scale : float
        The most GPUs the alternative may take, as a multiple of the plan with the target(s) loosened by
        ``max_factor`` (the traffic's cost when latency hardly binds). Just above a target's floor (a
        replica's TTFT with no queue, its TPOT at batch one) a plan exists only on replicas loaded next to
        nothing: the smallest loosening would then be a fleet many times what the traffic needs, which is
        not an alternative anyone takes. ``inf``: the smallest loosening whatever its size.

    Returns
    -------
    RelaxedPlan

    Notes
    -----
    Looser targets only add feasible candidates and never need more GPUs (the sizer is monotone), so
    "feasible within ``max_scale``" is monotone in the factor and a bisection on its logarithm finds the
    smallest one. The TTFT target alone, the TPOT target alone
    and both together are searched; the alternative loosens one target when that is enough (the
    smaller factor of the two), both otherwise. When nothing fits in memory no factor helps
    (``found`` is False and the plan's ``rejected`` says why). The problem is resolved once; each
    attempt searches it with the targets loosened.

    Examples
    --------
    A 5 ms TPOT is out of reach and the 1 s TTFT is not: only the TPOT target is loosened.

    >>> r = relax_targets("llama-3.1-70b", Workload(Q_(10, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(5, "ms")),
    ...                   SearchSpace("h100-sxm", "fp8"), costs=Costs(Q_(4, "USD/hour")))
    >>> r.found, r.factor > 1, r.plan.service.tpot <= r.tpot_slo, r.loosened, r.ttft_slo
    (True, True, True, 'tpot', <Quantity(1.0, 'second')>)
    """
    # Bounded work: at most about 30 sizings per loosening (a bisection in log space between 1 and max_factor).
    _check_loosening("relax_targets", max_factor, tolerance, max_scale)
    problem = _Problem.of(model, workload, targets, space, engine, serving, costs, registry)
    plan = _size(problem)
    if plan.feasible:
        return RelaxedPlan(True, 1.0, targets.ttft, targets.tpot, plan, "none")
    alone = (_loosen(problem, which, max_factor, tolerance, max_scale) for which in ("ttft", "tpot"))
    single = [found for found in alone if found.found]
    if single:
        return min(single, key=lambda found: found.factor)
    return _loosen(problem, "both", max_factor, tolerance, max_scale)


def _check_loosening(function: str, max_factor: float, tolerance: float, max_scale: float) -> None:
    """The bisection's settings of :func:`relax_targets` and :func:`~calculator.fleet.explain_infeasible`."""
    if not 1 < max_factor <= 1e6:
        raise InputError(f"{function}(): argument 'max_factor' must be in (1, 1e6], got {shown(max_factor)}")
    if not 1e-6 <= tolerance < 1:
        raise InputError(f"{function}(): argument 'tolerance' must be in [1e-6, 1), got {shown(tolerance)}")
    if not max_scale >= 1:  # NaN fails too
        raise InputError(f"{function}(): argument 'max_scale' must be at least 1 (inf: any), got {shown(max_scale)}")


#: The exponents of the factor on (TTFT, TPOT) when loosening each target, or both.
_LOOSENINGS = {"ttft": (1.0, 0.0), "tpot": (0.0, 1.0), "both": (1.0, 1.0)}


def _loosen(problem: _Problem, which: str, max_factor: float, tolerance: float, max_scale: float) -> RelaxedPlan:
    """The smallest factor on ``which`` target(s) (``"ttft"``, ``"tpot"``, ``"both"``) that gives a plan in proportion.

    A bisection on the factor's logarithm between 1 and ``max_factor``: about 30 sizings at most
    (:func:`relax_targets`).
    """
    targets = problem.targets
    ttft, tpot = targets.ttft, targets.tpot
    on_ttft, on_tpot = _LOOSENINGS[which]

    def attempt(factor: float) -> FleetPlan:
        loosened = dataclasses.replace(targets, ttft=ttft * factor**on_ttft, tpot=tpot * factor**on_tpot)
        return _size(dataclasses.replace(problem, targets=loosened))

    loose = attempt(max_factor)
    if not loose.feasible:
        return RelaxedPlan(False, max_factor, ttft * max_factor**on_ttft, tpot * max_factor**on_tpot, loose, which)
    low, high, best = 0.0, math.log(max_factor), loose
    while high - low > math.log1p(tolerance):
        middle = (low + high) / 2
        candidate = attempt(math.exp(middle))
        if candidate.feasible and candidate.gpus <= max_scale * loose.gpus:
            high, best = middle, candidate
        else:
            low = middle
    factor = math.exp(high)
    scale = best.gpus / loose.gpus
    return RelaxedPlan(True, factor, ttft * factor**on_ttft, tpot * factor**on_tpot, best, which, scale)


def frontier(
    model: ModelRef,
    accelerator: Any,
    precision: Any,
    input_tokens: float,
    output_tokens: float,
    *,
    engine: str | EngineProfile | None = None,
    tensor_parallel: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
    batches: Sequence[int] = DEFAULT_BATCHES,
    kv_precision: str | None = None,
    registry: Registry | None = None,
) -> Any:
    """The throughput-vs-interactivity frontier (Figure 6) of a model on each accelerator.

    For every (accelerator, precision, TP, batch) that fits in memory: output tokens per second per
    GPU at full load against tokens per second per user (``1 / TPOT``), with ``pareto`` marking the
    points no other point of the same accelerator beats on both axes. A mixture of experts has a row per
    expert layout (``expert_parallel``: 1 with each expert split over the TP group, the TP degree with the
    experts spread over it), the degrees each layout runs as the sizer searches them (``redundant_experts``: the
    copies an even-placement engine needs where the degree does not divide the experts). ``tpot_ms`` is the TPOT
    at a full batch; ``ttft_ms`` the mean TTFT of a fleet of that configuration sized for 1 request/s of the
    workload (the fewest replicas whose throughput carries it, loaded up to full throughput rather than the
    sizer's headroom; the queue for a slot included). ``replicas`` and ``utilization`` are that fleet's: the
    replicas round up, so the load on each replica (and with it the waits) jumps from one cap to the next and
    ``ttft_ms`` is not monotone in the cap. ``ttft_binds`` names the largest part of that TTFT: ``"prefill"``
    (the request overhead and the iterations that carry the prompt), ``"prefill queue"`` (the wait for prefill
    budget) or ``"slot wait"`` (the wait for a running slot, the cap full). Requests longer than the model's
    context are refused.

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    workload = Workload(Q_(1.0, "request/s"), input_tokens, output_tokens)
    # SearchSpace checks and normalizes any sequence of degrees and caps
    space = SearchSpace(accelerator, precision, cast(Any, tensor_parallel), cast(Any, batches), kv_precision)
    reg, profile, entry, tps, grid_batches = _resolve(model, space, engine, registry, attention_ranks=True)
    beyond = _beyond_context(entry, workload)
    if beyond:
        raise InputError(f"frontier(): {beyond}")
    tp_grid, batch_grid = np.meshgrid(tps, grid_batches, indexing="ij")
    rows = []
    named = _named_repository(model, entry)
    families = _families(entry, space, Costs(Q_(1, "USD/hour")), None, reg, profile, named)
    for family in families + _copy_families(families, tps, None):
        caps = family.caps(tp_grid, batch_grid)
        out = _evaluate(family, profile, workload, tp_grid, caps, ServingOptions())
        # as the sizer runs it: the degrees whose heads and experts the family places (with its copies)
        keep = out.fits & family.layout_ok(tp_grid)
        rows.append(
            pd.DataFrame(
                {
                    "accelerator": family.accelerator,
                    "precision": family.precision,
                    "tensor_parallel": tp_grid[keep].astype(int),
                    "expert_parallel": (np.ones_like(tp_grid) if family.moe_layout == "tensor" else tp_grid)[
                        keep
                    ].astype(int),
                    "data_parallel": family.ranks(tp_grid)[keep].astype(int),
                    "redundant_experts": np.full(int(keep.sum()), family.redundant),
                    "batch": caps[keep].astype(int),
                    "tokens_per_s_per_gpu": (out.rate * workload.output_tokens / tp_grid)[keep],
                    "tokens_per_s_per_user": (1 / out.tpot_at_batch)[keep],
                    "tpot_ms": out.tpot_at_batch[keep] * 1e3,
                    "ttft_ms": out.ttft[keep] * 1e3,
                    "replicas": out.replicas[keep].astype(int),
                    "utilization": (workload.arrival_rate.m_as("request/s") / (out.replicas * out.rate))[keep],
                    "ttft_binds": _ttft_binds(out.ttft, out.queue_wait, out.slot_wait)[keep],
                }
            )
        )
    table = pd.concat(rows, ignore_index=True)
    table["pareto"] = False
    for _, group in table.groupby("accelerator"):
        order = group.sort_values("tokens_per_s_per_user", ascending=False)
        best = -np.inf
        for index, value in zip(order.index, order.tokens_per_s_per_gpu, strict=True):
            if value > best:
                table.loc[index, "pareto"] = True
                best = value
    return table


def _ttft_binds(ttft: np.ndarray, queue_wait: np.ndarray, slot_wait: np.ndarray) -> np.ndarray:
    """The largest part of each mean TTFT (:data:`TTFT_PARTS`): its prompt's own path, or one of its two waits.

    The mean TTFT is the request overhead and the prompt's iterations plus the two waits
    (:func:`~calculator.fleet.evaluate.planned_ttft`); the first part is what the waits leave.
    """
    parts = np.stack([ttft - queue_wait - slot_wait, queue_wait, slot_wait])
    return np.asarray(TTFT_PARTS)[np.argmax(np.nan_to_num(parts, nan=-np.inf), axis=0)]
