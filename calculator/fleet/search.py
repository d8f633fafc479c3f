"""The fleet sizer's search: the cheapest feasible candidate, its binding constraint and its error band.

:func:`_size` (behind :func:`~calculator.fleet.size_fleet`) searches the candidates of the
:class:`~calculator.fleet.inputs.SearchSpace` (:mod:`calculator.fleet.evaluate` prices them) best
first under lower bounds on their cost, evaluating only those that could still win (:class:`_Search`).
The cheapest feasible candidate wins (the largest cap among equals); the rows whose cost is within a
slack of it (``SearchSpace.near_tie``) are evaluated too, their cheapest candidates listed as its near ties. The
plan reports its binding constraint (what keeps it from one replica fewer), why each rejected family
failed, the closest
achievable values when nothing is feasible, and the GPUs its configuration needs at the ends of the
model's error interval.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..performance import EngineProfile
from ..performance.capacity import load_shortfall
from ..uncertainty import kernel_basis, prediction_interval
from ..units import Q_
from ._common import HOURS, MAX_FLEET_GPUS, _fleet_costs
from .evaluate import (
    Evaluation,
    _Family,
    _fits,
    _Grid,
    _rate_bound,
    _Sized,
    _StepGrid,
    _usable_per_device,
    _weights_per_device,
)
from .inputs import Costs, ServingOptions, Targets, Workload
from .plan import Alternative, FleetPlan, Layout, PlanEnergy, PlanService, Rejection

if TYPE_CHECKING:
    from .problem import _Problem

__all__: list[str] = []

#: The fraction of a plan's cost within which the plan lists other configurations beside it (near ties).

#: The electricity price of the energy estimate when none is given (a scenario value).
DEFAULT_ELECTRICITY_PRICE = Q_(0.10, "USD/(kW*hour)")


# --------------------------------------------------------------------------------------------
# The search


@dataclass(frozen=True)
class _Masks:
    """Which candidates of one family's grid fit in memory and meet each target."""

    fits: np.ndarray
    tpot: np.ndarray
    ttft: np.ndarray
    tbt: np.ndarray

    @classmethod
    def of(cls, e: Evaluation, limits: tuple[float, float, float]) -> _Masks:
        """The masks of ``e`` against the TTFT, TPOT and token-gap targets in seconds (:attr:`_Search.limits`)."""
        ttft, tpot, tbt = limits
        return cls(e.fits, e.tpot_checked <= tpot, e.ttft <= ttft, e.tbt_checked <= tbt)

    @property
    def feasible(self) -> np.ndarray:
        return self.fits & self.tpot & self.ttft & self.tbt


@dataclass(frozen=True)
class _Level:
    """One TP row on ``replicas`` replicas: the caps whose headroom allows that many, evaluated there.

    ``allowed``: the caps that may run on ``replicas`` (their throughput at ``max_utilization`` needs no
    more); ``evaluation`` and ``masks`` hold the latencies of those that fit (NaN for the others), shape
    ``(1, caps)``.
    """

    replicas: int
    allowed: np.ndarray
    evaluation: Evaluation
    masks: _Masks

    @property
    def feasible(self) -> np.ndarray:
        """The caps that may run on these replicas and meet every target there (one row)."""
        return self.allowed[0] & self.masks.feasible[0] & ~self.evaluation.oversized[0]


@dataclass(frozen=True)
class _Candidate:
    """The cheapest feasible batch cap of one family at one TP degree: column ``j`` of row ``i`` of the grid.

    ``evaluation`` and ``masks`` are the row's at the candidate's replicas (shape ``(1, caps)``);
    ``fewer`` is the row on one replica fewer (None where no cap's headroom allows that many);
    :attr:`order` orders candidates as the search prefers them: the rank (cost per hour, GPUs, TP
    degree), then the family's (``f``) and the row's place in the grid (the first of equals wins).
    """

    rank: tuple[float, float, float]  # cost per hour, GPUs, TP degree
    family: _Family
    key: str
    f: int
    i: int
    j: int
    evaluation: Evaluation
    masks: _Masks
    fewer: _Level | None

    @property
    def order(self) -> tuple[tuple[float, float, float], int, int]:
        return self.rank, self.f, self.i

    @property
    def replicas(self) -> int:
        return int(self.evaluation.replicas[0, self.j])


@dataclass(frozen=True)
class _Outcome:
    """What a search found: the best candidate (None if nothing is feasible) and why the others are not it."""

    best: _Candidate | None
    rejected: dict[str, Rejection]
    closest_ttft: float
    closest_tpot: float
    closest_where: tuple[str, float] = ("", np.inf)  # the nearest candidate's family and GPUs
    ties: tuple[_Candidate, ...] = ()  # other rows' cheapest candidates within the search's slack of the best


def _rank(replicas: Any, tp: float, price: float) -> tuple[float, float, float]:
    """A candidate's rank: (cost per hour, GPUs, TP degree), for ``replicas`` of ``tp`` GPUs at ``price`` each."""
    return float(replicas * tp * price), float(replicas * tp), float(tp)


@dataclass(frozen=True)
class _RowResult:
    """One TP row searched: its best candidate (or None), its rejection and its nearest-to-targets score."""

    found: _Candidate | None
    rejection: Rejection
    score: float = np.inf
    ttft: float = np.inf
    tpot: float = np.inf
    where: tuple[str, float] = ("", np.inf)  # the nearest candidate's family and GPUs


@dataclass(frozen=True)
class _Search:
    """The cheapest feasible candidate over every family, with step times optionally scaled.

    The search is best first over the TP rows of every family: each row waits in a queue under a lower
    bound on the rank of anything it holds, and a row is evaluated only when its bound comes first
    and could still beat the best candidate found; once the queue's first bound cannot, neither can
    any other, and the rest are rejected as ``bound`` with that bound. A row's bound is first its
    degree alone (one replica of ``tp`` GPUs; rows whose KV cache holds no cap are rejected before),
    then the replicas its decode steps alone allow (:func:`~calculator.fleet.evaluate._rate_bound`:
    one decode-step pricing of the row, no prompt and no queueing). Both are true lower bounds: the
    replicas of a cap only grow as its rate falls, and its rate is at most its decode-only rate.

    Within an evaluated row a candidate is a cap and its replicas. The headroom gives each cap the
    fewest replicas it may run (its throughput loaded to ``max_utilization``); it may run on more, each
    replica less loaded, and the plan is the fewest replicas on which some cap meets every target
    (:meth:`_row`: the levels of replicas tried upward, then bisected). A larger cap on utilization
    only allows fewer replicas, so it never makes a plan infeasible or dearer. Feasibility is not
    monotone in the batch cap (a larger cap waits less for a slot but runs on fewer, busier
    replicas), so every cap a level allows is evaluated there. ``exhaustive`` evaluates every row
    whatever its bound, and every level of a row up to its first feasible one whatever the best
    found (kept for the test that the bounded search gives the same plan). ``slack`` keeps evaluating rows
    whose bound is within that fraction of the best cost: their cheapest candidates are the near ties
    (:attr:`_Outcome.ties`) a plan lists beside itself.
    """

    families: list[_Family]
    profile: EngineProfile
    workload: Workload
    targets: Targets
    serving: ServingOptions
    tps: np.ndarray
    tp_grid: np.ndarray
    batch_grid: np.ndarray
    exhaustive: bool = False
    slack: float = 0.0

    @functools.cached_property
    def limits(self) -> tuple[float, float, float]:
        """The TTFT, TPOT and token-gap targets in seconds (no token-gap target: infinite)."""
        targets = self.targets
        tbt = targets.tbt.m_as("s") if targets.tbt is not None else np.inf
        return targets.ttft.m_as("s"), targets.tpot.m_as("s"), tbt

    @functools.cached_property
    def arrival_rate(self) -> float:
        return float(self.workload.arrival_rate.m_as("request/s"))

    @functools.cached_property
    def memory(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per family: (capacity, fits) on its grid, the sequences its KV cache holds and which caps fit."""
        out = []
        for family in self.families:
            tp = family.stage_tp(self.tp_grid)
            out.append(_fits(family, self.profile, self.workload, tp, family.caps(tp, self.batch_grid), self.serving))
        return out

    def grid(self, f: int, i: int, scale: tuple[float, float]) -> _Grid:
        """Row ``i`` (one TP degree) of family ``f``'s candidate grid."""
        family = self.families[f]
        tp = family.stage_tp(self.tp_grid[i : i + 1])
        batch = family.caps(tp, self.batch_grid[i : i + 1])
        steps = _StepGrid(
            family, self.profile, self.workload, tp, batch, self.serving, self.targets.ttft_percentile, scale
        )
        stream = (self.targets.tpot_percentile, self.targets.tbt_percentile)
        return _Grid(steps, self.targets.max_utilization, self.arrival_rate, stream=stream)

    def run(self, scales: dict[tuple[str, str], tuple[float, float]] | None = None, progress: Any = None) -> _Outcome:
        """Search every family; ``scales`` multiply the step times per (accelerator, precision)."""
        rejected: dict[tuple[int, int], Rejection] = {}
        queue: list[tuple[tuple[float, float, float], int, int, bool]] = []  # (bound, family, row, decode-bounded)
        for f, family in enumerate(self.families):
            rows, unsearchable = self._rows(f)
            rejected.update(unsearchable)
            queue += [(_rank(1, self.tps[i], family.price), f, i, False) for i in rows]
        left = [sum(1 for entry in queue if entry[1] == f) for f in range(len(self.families))]  # rows to settle
        if progress is not None:
            for done in range(1, left.count(0) + 1):  # families with no row to search
                progress(done, len(self.families))

        def settled(f: int) -> None:
            left[f] -= 1
            if left[f] == 0 and progress is not None:
                progress(left.count(0), len(self.families))

        heapq.heapify(queue)
        best: _Candidate | None = None
        found: list[_Candidate] = []
        # the candidate nearest to meeting both targets: (score, family, row, TTFT, TPOT, (family, GPUs)), the first
        # of equals
        nearest: tuple[float, int, int, float, float, tuple[str, float]] = (np.inf, 0, 0, np.inf, np.inf, ("", np.inf))
        while queue:
            bound, f, i, decode_bounded = heapq.heappop(queue)
            family = self.families[f]
            scale = scales[family.accelerator, family.precision] if scales else (1.0, 1.0)
            if not self.exhaustive and self._beyond(bound, f, i, best):
                rejected[f, i] = self._bounded(f, i, bound)
                settled(f)
                continue
            if not self.exhaustive and not decode_bounded:
                heapq.heappush(queue, (self._decode_bound(f, i, scale), f, i, True))
                continue
            row = self._row(f, i, scale, None if self.exhaustive else best)
            rejected[f, i] = row.rejection
            nearest = min(nearest, (row.score, f, i, row.ttft, row.tpot, row.where))
            if row.found is not None:
                found.append(row.found)
                best = row.found if best is None or row.found.order < best.order else best
            settled(f)
        ordered = {rejected[row].family: rejected[row] for row in sorted(rejected)}  # in the grid's order
        ties = () if best is None else tuple(
            sorted((c for c in found if c is not best and not self._beyond(c.rank, c.f, c.i, best)),
                   key=lambda c: c.order)
        )  # fmt: skip
        return _Outcome(best, ordered, nearest[3], nearest[4], nearest[5], ties)

    def _beyond(self, rank: tuple[float, float, float], f: int, i: int, best: _Candidate | None) -> bool:
        """Whether ``rank`` at family ``f``'s row ``i`` can neither beat ``best`` nor tie it within the slack."""
        if best is None or (rank, f, i) <= best.order:
            return False
        return self.slack == 0 or rank[0] > best.rank[0] * (1 + self.slack)

    def _rows(self, f: int) -> tuple[list[int], dict[tuple[int, int], Rejection]]:
        """The rows of family ``f`` to search, and those rejected without a step time.

        Rejected: a span it cannot run, or no cap that fits in memory. Pipeline families exist for
        replicas of several whole nodes only, and a spread layout's family for the sizes its copies of
        experts place evenly (another family holds the others, :func:`~calculator.fleet.families._copy_families`):
        their other rows are neither.
        """
        family, tps = self.families[f], self.tps
        layout_ok, nodes_ok = family.layout_ok(tps), family.nodes_ok(tps)
        stage_tp = family.stage_tp(self.tp_grid)
        capacity, fits = self.memory[f]
        rows, out = [], {}
        for i, tp in enumerate(tps):
            key = family.key_at(int(tp))
            if not layout_ok[i]:
                continue
            if not nodes_ok[i]:
                values = {"node_gpus": int(family.arrays.node_gpus)}
                out[f, i] = Rejection(key, family.accelerator, family.precision, int(tp), "nodes", values)
            elif family.loaded is not None and (load := _load_rejection(family, int(tp), self.profile)) is not None:
                out[f, i] = load
            elif not fits[i].any():
                weights = _weights_per_device(family, stage_tp[i], self.serving)
                usable = _usable_per_device(family, self.profile)
                out[f, i] = _memory_rejection(family, int(tp), capacity[i], weights[0], usable, self.workload)
            else:
                rows.append(i)
        return rows, out

    def _decode_bound(self, f: int, i: int, scale: tuple[float, float]) -> tuple[float, float, float]:
        """A rank no cap of family ``f``'s row ``i`` beats: its replicas at the best decode-only rate of a cap."""
        family, g = self.families[f], self.grid(f, i, scale)
        fits = self.memory[f][1][i : i + 1]
        rate = np.where(
            fits, _rate_bound(family, self.profile, self.workload, g.steps.tp, g.steps.batch, self.serving, scale), 0.0
        )
        fewest = _Sized.of(self.arrival_rate, np.max(rate), self.targets.max_utilization, g.steps.tp[0, 0],
                           family.arrays.pipeline_parallel).replicas  # fmt: skip
        return _rank(fewest, self.tps[i], family.price)

    def _bounded(self, f: int, i: int, bound: tuple[float, float, float]) -> Rejection:
        family, tp = self.families[f], int(self.tps[i])
        values = {"gpus": int(bound[1]), "cost_per_hour": Q_(bound[0], "USD/hour")}
        return Rejection(family.key_at(tp), family.accelerator, family.precision, tp, code="bound", values=values)

    def _row(self, f: int, i: int, scale: tuple[float, float], best: _Candidate | None) -> _RowResult:
        """Row ``i`` of family ``f``: its fewest replicas that meet the targets (beating ``best``), or why none do.

        The headroom sets the fewest replicas each cap may run (``sized.replicas``); a cap may always
        run on more, each then less loaded. Level ``r`` of the row is every cap allowed ``r`` replicas,
        evaluated on ``r``. The levels are tried from the fewest any cap is allowed, ``r0``, at
        ``r0 + 2^k - 1`` until one meets the targets (or the fleet limit, or ``best``, stops the
        row), then bisected down to the first that does: more replicas of one cap never raise its
        latencies, and a level holds every cap the one below holds. So a larger ``max_utilization``
        (each cap allowed fewer replicas, never forbidden more) never needs more replicas.
        """
        family, tp, g = self.families[f], float(self.tps[i]), self.grid(f, i, scale)
        headroom = g.sized.replicas
        fits = g.timed.fits

        def level(r: int) -> _Level:
            grid, allowed = g.at(r), headroom <= r
            e = grid.evaluation(grid.latencies(fits & allowed))
            return _Level(r, allowed, e, _Masks.of(e, self.limits))

        def pruned(r: int) -> bool:  # the row on r replicas or more cannot beat (or tie) the best found
            return self._beyond(_rank(r, tp, family.price), f, i, best)

        most = int(MAX_FLEET_GPUS // tp)  # replicas within the fleet limit
        low = int(headroom[fits].min())
        if pruned(low):
            return _RowResult(None, self._bounded(f, i, _rank(low, tp, family.price)))
        below, above = None, level(low)  # the last level that fails, the first that meets the targets
        while not above.feasible.any():
            if above.replicas >= most:  # the lightest load the fleet limit allows: nothing meets the targets
                return self._chosen(f, i, above, None)
            r = min(low + 2 * (above.replicas - low) + 1, most)
            while pruned(r) and r > above.replicas + 1:  # the levels between may still beat the best
                r = (above.replicas + r) // 2
            if pruned(r):
                return _RowResult(None, self._bounded(f, i, _rank(r, tp, family.price)))
            below, above = above, level(r)
        while below is not None and above.replicas - below.replicas > 1:
            middle = level((below.replicas + above.replicas) // 2)
            below, above = (below, middle) if middle.feasible.any() else (middle, above)
        return self._chosen(f, i, above, below)

    def _chosen(self, f: int, i: int, at: _Level, below: _Level | None) -> _RowResult:
        """Row ``i`` of family ``f`` at level ``at`` (the last one below: ``below``): its choice or its rejection."""
        family, tp, e, ok = self.families[f], int(self.tps[i]), at.evaluation, at.masks
        ttft_target, tpot_target, _ = self.limits
        # The candidate nearest to meeting both targets: the smallest of the larger ratio to its target.
        with np.errstate(invalid="ignore"):
            score = np.maximum(e.ttft[0] / ttft_target, e.tpot_checked[0] / tpot_target)
        score = np.where(e.fits[0] & np.isfinite(score), score, np.inf)
        k = int(np.argmin(score))
        near = (
            float(score[k]),
            float(e.ttft[0, k]),
            float(e.tpot_checked[0, k]),
            (family.key_at(tp), float(at.replicas * tp)),
        )
        feasible = at.feasible
        if not feasible.any():
            return _RowResult(None, _why(family, tp, e, ok, self.targets, self.workload), *near)
        # The largest cap on these replicas: room for bursts.
        j = int(np.flatnonzero(feasible)[-1])
        cost = float(at.replicas * tp * family.price)
        key = family.key_at(tp)
        values = {
            "gpus": int(at.replicas * tp),
            "batch": int(family.caps(family.stage_tp(self.tp_grid), self.batch_grid)[i, j]),
            "cost_per_hour": Q_(cost, "USD/hour"),
        }
        rejection = Rejection(key, family.accelerator, family.precision, tp, code="costlier", values=values)
        fewer = below if below is not None and below.replicas == at.replicas - 1 else None
        candidate = _Candidate(_rank(at.replicas, float(tp), family.price), family, key, f, i, j, e, ok, fewer)
        return _RowResult(candidate, rejection, *near)

    def _beyond_fit(self, best: _Candidate) -> EngineProfile:
        """The profile of the interval's low end where the plan runs more sequences than the engine's fitted batch.

        As :func:`~calculator.performance.predict_benchmark`'s low end (``EngineProfile.fitted_batch``): the
        per-sequence cost was fitted on at most ``fitted_batch`` sequences a rank, so where the plan's running batch
        (a rank's) is beyond them it is scaled to charge that batch what the fitted batch paid (the cost stopping
        there); elsewhere the profile as it is.
        """
        profile, family = self.profile, best.family
        eff = profile.efficiency_for(family.accelerator)
        running = float(best.evaluation.running[0, best.j])  # the plan's running sequences, as the predictor's batch
        per_rank = running / _plan_layout(family, int(self.tps[best.i])).data_parallel
        fitted = profile.fitted_batch
        if fitted is None or eff.sequence_overhead.m <= 0 or per_rank <= fitted:
            return profile
        lowered = eff.replace(sequence_overhead=eff.sequence_overhead * (fitted / per_rank))
        if family.accelerator in profile.per_accelerator:
            return profile.replace(per_accelerator={**profile.per_accelerator, family.accelerator: lowered})
        return profile.replace(efficiency=lowered)

    def gpus_at(self, end: int, best: _Candidate) -> int | None:
        """GPUs the plan's own configuration needs with step times at one end (0 low, 1 high) of the interval.

        The interval of the plan itself (its family at its TP, the batch cap re-chosen), not of
        whichever configuration would win there; the low end also with the per-sequence cost stopped at the
        engine's fitted batch where the plan's cap runs beyond it (:meth:`_beyond_fit`).
        """
        family, i = best.family, best.i
        profile = self.profile
        bands = prediction_interval(
            profile.name, family.accelerator, family.arrays.measured, profile.interval, profile.release_fitted
        )
        # Step times (prefill and decode) scale by the TPOT band: it measures the step model. The
        # TTFT band is wider because it carries a benchmark's queueing, which the sizer models itself.
        scales = {(family.accelerator, family.precision): (bands["tpot"][end], bands["tpot"][end])}
        rows = slice(i, i + 1)
        own = dataclasses.replace(
            self,
            slack=0.0,
            families=[family],
            profile=self._beyond_fit(best) if end == 0 else profile,
            tps=self.tps[rows],
            tp_grid=self.tp_grid[rows],
            batch_grid=self.batch_grid[rows],
        )
        found = own.run(scales).best
        return None if found is None else found.replicas * int(own.tps[0])


# --------------------------------------------------------------------------------------------
# Why a family is not the plan


def _why(family: _Family, tp: int, e: Evaluation, ok: _Masks, targets: Targets, workload: Workload) -> Rejection:
    """The reason code (and its values) no batch cap of one family's TP row (``e``, one row) meets the targets."""
    ok_tpot, ok_ttft, ok_tbt = ok.tpot[0], ok.ttft[0], ok.tbt[0]
    fits = e.fits[0]
    record: dict[str, Any] = {
        "accelerator": family.accelerator,
        "precision": family.precision,
        "tensor_parallel": int(tp),
    }
    key = family.key_at(int(tp))
    if fits.any() and e.oversized[0][fits].all():
        return Rejection(key, **record, code="fleet_size", values={"limit": MAX_FLEET_GPUS})
    if not fits.any():
        return _memory_rejection(family, tp, e.capacity[0], e.weights_per_device[0, 0], e.usable_per_device, workload)
    # the least of the caps evaluated (those allowed the replicas of the row's last level)
    if not (fits & ok_tpot).any():
        best = Q_(float(np.fmin.reduce(e.tpot_checked[0][fits])), "s")
        return Rejection(key, **record, code="tpot", values={"best": best, "target": targets.tpot})
    if not (fits & ok_ttft).any():
        best = Q_(float(np.fmin.reduce(e.ttft[0][fits])), "s")
        return Rejection(key, **record, code="ttft", values={"best": best, "target": targets.ttft})
    if not (fits & ok_tbt).any():
        return Rejection(key, **record, code="tbt")
    return Rejection(key, **record, code="joint")


def _load_rejection(family: _Family, tp: int, profile: EngineProfile) -> Rejection | None:
    """Why a replica of ``tp`` GPUs cannot load the 16-bit weights it quantizes at load time, or None where it can.

    The engine loads the 16-bit checkpoint and quantizes it as it loads (no checkpoint at the family's precision);
    its memory policy must hold the 16-bit weights (:func:`~calculator.performance.capacity.load_shortfall`).
    """
    assert family.loaded is not None
    short = load_shortfall(family.loaded, profile, float(family.stage_tp(np.asarray([float(tp)]))[0]))
    if short is None:
        return None
    values = {"weights_per_device": Q_(short[0], "B"), "usable_per_device": Q_(short[1], "B")}
    return Rejection(family.key_at(tp), family.accelerator, family.precision, tp, code="load", values=values)


def _memory_rejection(
    family: _Family, tp: int, capacity: np.ndarray, weights_per_device: float, usable: float, workload: Workload
) -> Rejection:
    """Why no cap of a TP row fits: the KV cache holds fewer sequences than every cap, or not even one."""
    key, record = family.key_at(int(tp)), (family.accelerator, family.precision, int(tp))
    if np.max(capacity) >= 1:  # one sequence fits: every cap searched is above the cache
        return Rejection(key, *record, code="batch", values={"capacity": int(np.max(capacity))})
    a = family.arrays
    values = {
        "weights_per_device": Q_(float(weights_per_device), "B"),
        "usable_per_device": Q_(float(usable), "B"),
        # One sequence's KV cache at the workload's context, whole (before the shards of a wider group; a
        # sliding-window layer's part capped at its window).
        "kv_per_sequence": Q_(float(a.kv_bytes_per_token * a.kv_tokens(workload.held_context)), "B"),
        "kv_shards_max": int(a.kv_shards_max),
    }
    return Rejection(key, *record, code="memory", values=values)


def _binding(best: _Candidate) -> str:
    """What keeps the plan from one replica fewer: the constraint every cap allowed that many misses there."""
    fewer = best.fewer
    if fewer is None or not fewer.allowed[0].any():
        return "throughput"  # no cap on the grid sustains the load on fewer replicas within the headroom
    left = fewer.allowed[0].copy()
    ok = fewer.masks
    for name, mask in (("memory", ok.fits[0]), ("tpot", ok.tpot[0]), ("ttft", ok.ttft[0]), ("tbt", ok.tbt[0])):
        if not mask[left].any():
            return name
        left &= mask
    return "throughput"


def _infeasible_reason(
    rejected: dict[str, Rejection], outcome: _Outcome, targets: Targets, heads: int | None = None
) -> str:
    """Why no candidate is feasible, in the terms of what blocks every one of them."""
    codes = {r.code for r in rejected.values()}
    if codes == {"fleet_size"}:
        return f"the load needs more than {MAX_FLEET_GPUS:,} GPUs on every candidate; no plan is made for it"
    if codes == {"memory"}:
        widest = max(rejected.values(), key=lambda r: r.tensor_parallel)
        return (
            f"no candidate tensor-parallel degree holds the weights and one sequence's KV cache (up to TP "
            f"{widest.tensor_parallel}: {widest.text.removeprefix('memory: ')}); {_wider(rejected, heads)}"
        )
    if codes <= {"batch", "memory"} and "batch" in codes:
        most = max((r for r in rejected.values() if r.code == "batch"), key=lambda r: r.values["capacity"])
        return (
            f"every batch cap searched is above what the KV cache holds (at most {most.values['capacity']:,} "
            f"sequences, {most.family}); search smaller caps"
        )
    ttft, tpot = outcome.closest_ttft, outcome.closest_tpot
    meets = {"TTFT": ttft <= targets.ttft.m_as("s"), "TPOT": tpot <= targets.tpot.m_as("s")}
    if not np.isfinite(ttft) or not np.isfinite(tpot) or all(meets.values()):
        # nothing fits, or the nearest candidate meets TTFT and TPOT and fails on something else (the token gap, size)
        return "no configuration meets every target: " + "; ".join(sorted({r.text for r in rejected.values()}))[:400]
    family, gpus = outcome.closest_where
    shown = {
        name: f"{name} {value * 1e3:,.{digits}f} ms {'within' if meets[name] else 'over'} the {target:,g} ms target"
        for name, value, target, digits in (
            ("TTFT", ttft, targets.ttft.m_as("ms"), 0),
            ("TPOT", tpot, targets.tpot.m_as("ms"), 1),
        )
    }
    missed = " and ".join(name for name, ok in meets.items() if not ok)
    return (
        f"no configuration meets every target; closest achievable ({family} on {gpus:,.0f} GPUs, the lightest load "
        f"the fleet limit allows): {shown['TTFT']}, {shown['TPOT']}; it gives up the {missed} target"
        f"{'s' if ' and ' in missed else ''}"
    )


def _wider(rejected: dict[str, Rejection], heads: int | None) -> str:
    """Which larger tensor-parallel degree would hold each family's weights and one sequence's KV cache.

    A degree ``t`` holds ``weights / t`` and ``kv / min(t, kv_shards_max)`` of one sequence per device
    (the KV heads split until each rank holds one); it is named only if both fit in 80% of the usable
    memory, else the hint says what else to try.
    """
    from ..memory.kv import kv_shards

    hints = []
    for family in {(r.accelerator, r.precision) for r in rejected.values()}:
        widest = max((r for r in rejected.values() if (r.accelerator, r.precision) == family),
                     key=lambda r: r.tensor_parallel)  # fmt: skip
        weights = widest.values["weights_per_device"].m_as("B") * widest.tensor_parallel
        usable = widest.values["usable_per_device"].m_as("B")
        kv, shards = widest.values["kv_per_sequence"].m_as("B"), widest.values["kv_shards_max"]
        for degree in (2**k for k in range(1, 8)):  # up to 128 devices
            if (
                degree > widest.tensor_parallel
                and (heads is None or heads % degree == 0)
                and weights / degree + kv / kv_shards(degree, shards) < 0.8 * usable
            ):
                per_device = weights / degree / 1e9
                hints.append(
                    f"TP {degree} on {family[0]} at {family[1]} would leave room ({per_device:,.1f} GB per device)"
                )
                break
    if hints:
        return "; ".join(sorted(hints)) + " (pass tensor_parallel=[...], CLI --tp)"
    return "try a smaller weight or KV-cache precision, a shorter context, or an accelerator with more memory"


# --------------------------------------------------------------------------------------------
# The plan


def _feasible_plan(
    search: _Search, best: _Candidate, outcome: _Outcome, costs: Costs, record: dict[str, Any]
) -> FleetPlan:
    """The plan of the best candidate: its numbers, interval, cost, energy and why not one replica fewer."""
    family, e, i, j = best.family, best.evaluation, best.i, best.j
    rejected = {key: r for key, r in outcome.rejected.items() if key != best.key}
    binding = _binding(best)
    profile = search.profile
    bands = prediction_interval(
        profile.name, family.accelerator, family.arrays.measured, profile.interval, profile.release_fitted
    )
    tp, replicas = int(search.tps[i]), best.replicas
    gpus = replicas * tp
    low, high = (search.gpus_at(end, best) for end in (0, 1))
    # the interval holds the plan: faster steps never need more GPUs of the same configuration
    gpus_interval = (min(low, gpus) if low is not None else gpus, max(high, gpus) if high is not None else None)
    lam = search.workload.arrival_rate.m_as("request/s")
    tokens_per_hour = lam * search.workload.output_tokens * HOURS
    rate = float(e.rate[0, j])
    utilization = lam / (replicas * rate)
    power = gpus * family.tdp * (costs.idle_power_fraction + (1 - costs.idle_power_fraction) * utilization)
    energy = Q_(power * HOURS / tokens_per_hour * 1e6, "J")  # per million output tokens
    kwh = costs.electricity if costs.electricity is not None else DEFAULT_ELECTRICITY_PRICE
    ttft, tpot = float(e.ttft[0, j]), float(e.tpot[0, j])
    return FleetPlan(
        feasible=True,
        reason=f"cheapest of {record['candidates']} configurations; {_BINDING_REASONS[binding]}",
        accelerator=family.accelerator,
        precision=family.precision,
        kv_precision=family.arrays.kv_precision,
        batch=int(family.caps(family.stage_tp(search.tp_grid), search.batch_grid)[i, j]),
        replicas=replicas,
        gpus=gpus,
        binding_constraint="tpot" if binding == "tbt" else binding,
        layout=_plan_layout(family, tp),
        service=PlanService(
            ttft=Q_(ttft, "s"),
            tpot=Q_(tpot, "s"),
            tbt_max=Q_(float(e.tbt_max[0, j]), "s"),
            ttft_interval=(Q_(ttft * bands["ttft"][0], "s"), Q_(ttft * bands["ttft"][1], "s")),
            tpot_interval=(Q_(tpot * bands["tpot"][0], "s"), Q_(tpot * bands["tpot"][1], "s")),
            replica_throughput=Q_(rate, "request/s"),
            running_batch=float(e.running[0, j]),
            utilization=float(utilization),
            kernel_basis=kernel_basis(family.accelerator, family.arrays.measured, family.arrays.tables.anchors),
            tpot_tail=Q_(float(e.tpot_checked[0, j]), "s") if search.targets.tpot_percentile is not None else None,
            tbt_tail=Q_(float(e.tbt_checked[0, j]), "s") if search.targets.tbt_percentile is not None else None,
        ),
        cost=_fleet_costs(gpus, gpus * family.price, lam, search.workload.input_tokens, search.workload.output_tokens),
        energy=PlanEnergy(
            power=Q_(power, "W").to("kW"),
            per_million_output_tokens=energy.to("kWh"),
            electricity_cost_per_million_output_tokens=(energy * kwh).to("USD"),
        ),
        gpus_interval=gpus_interval,
        rejected={key: r.text for key, r in rejected.items()},
        rejections=tuple(rejected.values()),
        alternatives=tuple(_alternative(search, tie) for tie in outcome.ties),
        **record,
    )


def _alternative(search: _Search, tie: _Candidate) -> Alternative:
    """A near tie of the plan as the plan lists it: its configuration, counts, cost and latencies."""
    family, e, i, j = tie.family, tie.evaluation, tie.i, tie.j
    tp = int(search.tps[i])
    return Alternative(
        family=tie.key,
        accelerator=family.accelerator,
        precision=family.precision,
        layout=_plan_layout(family, tp),
        batch=int(family.caps(family.stage_tp(search.tp_grid), search.batch_grid)[i, j]),
        replicas=tie.replicas,
        gpus=tie.replicas * tp,
        cost_per_hour=Q_(tie.rank[0], "USD/hour"),
        ttft=Q_(float(e.ttft[0, j]), "s"),
        tpot=Q_(float(e.tpot[0, j]), "s"),
    )


def _plan_layout(family: Any, tp: int) -> Layout:
    """The layout of a replica of ``tp`` GPUs of a family: its stages, attention ranks, experts and nodes."""
    stage = tp // family.stages
    ranks = int(family.ranks(np.asarray(float(tp))))
    return Layout(
        tensor_parallel=max(stage // ranks, 1),
        data_parallel=ranks,
        expert_parallel=1 if family.moe_layout == "tensor" else tp,
        pipeline_parallel=family.stages,
        nodes=int(np.ceil(tp / family.arrays.node_gpus)) if np.isfinite(family.arrays.node_gpus) else 1,
        redundant_experts=family.redundant,
    )


_BINDING_REASONS = {
    "memory": "one replica fewer would need a larger batch cap than the KV cache holds",
    "tpot": "with one replica fewer the running batch would exceed the TPOT target",
    "ttft": "with one replica fewer TTFT would exceed its target",
    "tbt": "with one replica fewer the token gap would exceed its target",
    "throughput": "one replica fewer would run above the max_utilization headroom",
}


def _size(problem: _Problem, progress: Callable[[int, int], Any] | None = None) -> FleetPlan:
    """:func:`size_fleet` of a resolved problem, with a ``progress(done, total)`` callback per family.

    ``problem.space.near_tie``: the fraction of the plan's cost within which other families' cheapest candidates
    are listed.
    """
    workload, targets = problem.workload, problem.targets
    record: dict[str, Any] = {
        "model": problem.model.id, "served_model": problem.named or None, "engine": problem.profile.name,
        "engine_release": problem.profile.release,
        "workload": workload, "targets": targets,
        "serving": problem.serving, "registry_documents": problem.registry.user_documents,
    }  # fmt: skip
    if problem.beyond:
        return FleetPlan(feasible=False, reason=problem.beyond, **record)
    families, tps = list(problem.families), problem.tps
    tp_grid, batch_grid = np.meshgrid(tps, problem.batches, indexing="ij")
    search = _Search(
        families,
        problem.profile,
        workload,
        targets,
        problem.serving,
        tps,
        tp_grid,
        batch_grid,
        slack=problem.space.near_tie,
    )
    outcome = search.run(progress=progress)
    # a spread layout's family holds the replica sizes its copies of experts place evenly (_copy_families)
    rows = [tps.size if f.stages > 1 else int(f.layout_ok(tps).sum()) for f in families]
    record["candidates"] = sum(rows) * problem.batches.size
    if outcome.best is not None:
        return _feasible_plan(search, outcome.best, outcome, problem.costs, record)
    rejected = outcome.rejected
    return FleetPlan(
        feasible=False,
        reason=_infeasible_reason(rejected, outcome, targets, problem.model.attention_heads),
        rejected={key: r.text for key, r in rejected.items()},
        rejections=tuple(rejected.values()),
        # nothing achievable to name where no candidate holds the weights and a sequence
        closest=(
            {"ttft": Q_(outcome.closest_ttft, "s"), "tpot": Q_(outcome.closest_tpot, "s")}
            if np.isfinite(outcome.closest_ttft) and np.isfinite(outcome.closest_tpot)
            else {}
        ),
        **record,
    )
