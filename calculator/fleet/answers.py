"""Answers that help when nothing is feasible: the closest plan meeting each target alone, and the rate that is.

:func:`explain_infeasible` runs the sizer's own search (:func:`~calculator.fleet.search._size`) on loosened
inputs: the TPOT target loosened with the TTFT target kept (the closest plan that meets TTFT alone, and the
TPOT the TTFT target allows), the reverse, and the arrival rate lowered with both targets kept. Every value
it reports over a target names the target it gives up (:meth:`InfeasibleAnswers.lines`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..performance import EngineProfile
from ..results import Result
from ..types import ModelRef, Rate, Time
from ..units import Q_
from .frontier import RelaxedPlan, _check_loosening, _loosen
from .inputs import Costs, SearchSpace, ServingOptions, Targets, Workload
from .plan import FleetPlan, plan_summary
from .problem import _Problem
from .search import _size

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["InfeasibleAnswers", "RateRelief", "TargetAlone", "explain_infeasible"]

#: The names of the targets as the answers write them.
NAMES = {"ttft": "TTFT", "tpot": "TPOT"}


@dataclass(frozen=True, repr=False)
class TargetAlone(Result):
    """The closest plan that meets one target alone: the other target loosened by the smallest factor that gives one.

    Attributes
    ----------
    kept : str
        ``"ttft"`` or ``"tpot"``: the target the plan meets as asked.
    found : bool
        Whether loosening the other target (up to the search's ``max_factor``) gives a plan in proportion.
    allows : Quantity [time]
        The cheapest relaxation: the smallest value of the other target that a plan meets with ``kept`` kept
        (within the search's tolerance); the largest value tried when ``found`` is False.
    target : Quantity [time]
        The other target as asked (the one given up).
    plan : FleetPlan
        The plan at the kept target and ``allows`` (infeasible when ``found`` is False).
    scale : float
        The plan's GPUs over those of the same traffic with the other target loosened by ``max_factor``
        (:attr:`~calculator.fleet.RelaxedPlan.scale`).
    """

    kept: str
    found: bool
    allows: Time
    target: Time
    plan: FleetPlan
    scale: float = 1.0

    @property
    def given_up(self) -> str:
        """The target the plan does not meet: ``"tpot"`` when it keeps TTFT, and the reverse."""
        return "tpot" if self.kept == "ttft" else "ttft"

    def line(self, targets: Targets) -> str:
        """The answer in a line; a value over its target names the target it gives up."""
        kept, other = NAMES[self.kept], NAMES[self.given_up]
        head = f"meets the {kept} target ({_ms(getattr(targets, self.kept))}) alone"
        if not self.found:
            return f"{head}: no plan, even with the {other} target loosened to {_ms(self.allows)}"
        plan = self.plan
        assert plan.service is not None and plan.cost is not None
        achieved = getattr(plan.service, self.given_up)
        return (
            f"{head}: {plan_summary(plan).split(';')[0]}, batch {plan.batch}: {kept} "
            f"{_ms(getattr(plan.service, self.kept))}, {other} {_ms(achieved)}, over the {_ms(self.target)} {other} "
            f"target (gives it up; the tightest {other} target the {kept} target allows is {_ms(self.allows)}), "
            f"{plan.cost.per_hour.m_as('USD/hour'):,.2f} USD/hour"
        )


@dataclass(frozen=True, repr=False)
class RateRelief(Result):
    """The arrival rate the searched configurations serve within both targets as asked.

    Attributes
    ----------
    found : bool
        Whether a rate down to ``low`` (a thousandth of the one asked) gives a plan.
    rate : Quantity [request / time]
        The largest rate found with a plan (a bisection on its logarithm), or the lowest tried when ``found`` is
        False.
    plan : FleetPlan
        The plan at that rate (infeasible when ``found`` is False).
    """

    found: bool
    rate: Rate
    plan: FleetPlan

    def line(self) -> str:
        """The answer in a line."""
        if not self.found:
            return f"rate: no rate down to {self.rate.m_as('request/s'):,.3g} request/s meets both targets"
        return (
            f"rate: up to {self.rate.m_as('request/s'):,.3g} request/s meets both targets, on "
            f"{plan_summary(self.plan).split(';')[0]}"
        )


@dataclass(frozen=True, repr=False)
class InfeasibleAnswers(Result):
    """What helps when a sizing is infeasible: the plan, the closest plan meeting each target alone, and the rate.

    Attributes
    ----------
    plan : FleetPlan
        The sizing as asked.
    meets_ttft, meets_tpot : TargetAlone or None
        The closest plan that meets the TTFT (TPOT) target alone, with the TPOT (TTFT) that target allows;
        None when ``plan`` is feasible.
    rate : RateRelief or None
        The rate the searched configurations serve within both targets; None when ``plan`` is feasible.
    relaxed : RelaxedPlan or None
        The closest feasible alternative as :func:`~calculator.fleet.relax_targets` gives it: the one of
        ``meets_ttft`` and ``meets_tpot`` with the smaller loosening, else both targets loosened together.
    """

    plan: FleetPlan
    meets_ttft: TargetAlone | None = None
    meets_tpot: TargetAlone | None = None
    rate: RateRelief | None = None
    relaxed: RelaxedPlan | None = None

    def lines(self) -> list[str]:
        """The answers in lines (none for a feasible plan)."""
        targets = self.plan.targets
        if self.meets_ttft is None or self.meets_tpot is None or self.rate is None or targets is None:
            return []
        return [self.meets_ttft.line(targets), self.meets_tpot.line(targets), self.rate.line()]


def explain_infeasible(
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
) -> InfeasibleAnswers:
    """The answers that help when no configuration meets every target, from the sizer's own search.

    Parameters
    ----------
    model, workload, targets, space, engine, serving, costs, registry
        As for :func:`~calculator.fleet.size_fleet`.
    max_factor, tolerance, max_scale
        As for :func:`~calculator.fleet.relax_targets`: the largest loosening of a target, the precision of the
        factor (and of the rate), and the most GPUs an answer may take over the traffic's when latency hardly
        binds.

    Returns
    -------
    InfeasibleAnswers
        For a feasible sizing, the plan alone.

    Notes
    -----
    Meeting the TTFT target alone: the TPOT target loosened by the smallest factor that gives a plan within
    ``max_scale`` (:func:`~calculator.fleet.relax_targets`' bisection), so the plan is the closest one in
    proportion and the loosened target is the cheapest relaxation, the TPOT the TTFT target allows; the reverse
    for TPOT. The rate: the sizing with both targets kept at a thousandth of the rate, then, if that has a plan,
    a bisection on the rate's logarithm between it and the rate asked (a plan at a rate is taken to mean plans
    at the rates below it). About 20 to 40 sizings in all.

    Examples
    --------
    A 3 ms TPOT is below what any replica reaches; the 1 s TTFT is not.

    >>> answers = explain_infeasible("llama-3.1-70b", Workload(Q_(10, "request/s"), 1024, 256),
    ...                              Targets(Q_(1, "s"), Q_(3, "ms")), SearchSpace("h100-sxm", "fp8"))
    >>> answers.meets_ttft.found, answers.meets_ttft.allows > Q_(3, "ms"), answers.rate.found
    (True, True, False)
    """
    _check_loosening("explain_infeasible", max_factor, tolerance, max_scale)
    problem = _Problem.of(model, workload, targets, space, engine, serving, costs, registry)
    plan = _size(problem)
    if plan.feasible:
        return InfeasibleAnswers(plan)
    alone, loosenings = {}, []
    for kept, loosened in (("ttft", "tpot"), ("tpot", "ttft")):
        relaxed = _loosen(problem, loosened, max_factor, tolerance, max_scale)
        allows = relaxed.tpot_slo if loosened == "tpot" else relaxed.ttft_slo
        alone[kept] = TargetAlone(kept, relaxed.found, allows, getattr(targets, loosened), relaxed.plan, relaxed.scale)
        loosenings += [relaxed] if relaxed.found else []
    closest = (
        min(loosenings, key=lambda found: found.factor)
        if loosenings
        else _loosen(problem, "both", max_factor, tolerance, max_scale)
    )
    return InfeasibleAnswers(plan, alone["ttft"], alone["tpot"], _rate_relief(problem, tolerance), closest)


def _rate_relief(problem: _Problem, tolerance: float) -> RateRelief:
    """The largest rate down to a thousandth of the one asked at which the search finds a plan within both targets."""
    asked = problem.workload.arrival_rate.m_as("request/s")

    def attempt(rate: float) -> FleetPlan:
        workload = dataclasses.replace(problem.workload, arrival_rate=Q_(rate, "request/s"))
        return _size(dataclasses.replace(problem, workload=workload))

    low = asked / 1000
    best = attempt(low)
    if not best.feasible:
        return RateRelief(False, Q_(low, "request/s"), best)
    below, above = math.log(low), math.log(asked)  # a plan at exp(below), none at exp(above)
    while above - below > math.log1p(tolerance):
        middle = (below + above) / 2
        candidate = attempt(math.exp(middle))
        if candidate.feasible:
            below, best = middle, candidate
        else:
            above = middle
    return RateRelief(True, Q_(math.exp(below), "request/s"), best)


def _ms(value: Time) -> str:
    """A time in milliseconds, as the answers write it: ``1,000 ms``, ``7.3 ms``."""
    ms = value.m_as("ms")
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"
