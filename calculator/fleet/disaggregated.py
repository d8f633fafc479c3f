"""Disaggregated prefill and decode pools (section 10.8.3), and colocated against disaggregated serving.

:func:`size_disaggregated` sizes each pool for its own work and adds the KV handoff (Eq. 10) to TTFT;
:func:`compare_serving_modes` sizes a workload both ways.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import count
from ..errors import InputError
from ..performance import EngineProfile, decode_step_seconds, prefill_seconds
from ..queueing import replica_demand
from ..results import Result, ceil_count
from ..types import InterconnectRef, ModelRef, MoneyRate, Time
from ..units import Q_
from ._common import MAX_FLEET_GPUS, _fleet_costs
from .evaluate import _sequences
from .families import _families
from .inputs import Costs, SearchSpace, ServingOptions, Targets, Workload
from .occupancy import _occupancy, _replica_arrival_cv, _wait
from .plan import FleetPlan, Layout, PlanCost, PlanService
from .problem import _named_repository, _part, _resolve
from .sizing import size_fleet
from .stream import length_nodes, prefill_moments

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..registry import Registry, RegistryDocument

__all__ = ["DisaggregatedPlan", "ServingModeComparison", "compare_serving_modes", "size_disaggregated"]


# --------------------------------------------------------------------------------------------
# Disaggregated prefill and decode pools (section 10.8.3)


@dataclass(frozen=True, repr=False)
class DisaggregatedPlan(Result):
    """Separate prefill and decode pools sized for their own work.

    Attributes
    ----------
    feasible : bool
    reason : str
    prefill, decode : dict
        Each pool's accelerator, precision, KV-cache precision, tensor-parallel degree, replicas and GPUs (decode:
        batch).
    kv_handoff : Quantity [time]
        KV-cache transfer from the prefill to the decode pool (Eq. 10), part of TTFT.
    ttft, tpot : Quantity [time]
    ttft_interval, tpot_interval : tuple of Quantity [time]
        The 80 % intervals (:func:`~calculator.uncertainty.prediction_interval`) of each pool's prediction on its
        accelerator: the prefill pool's TTFT factors scale its prefill and wait, the decode pool's TPOT factors its
        step (and the half step in TTFT); the KV handoff is a transfer, not a fitted prediction, and is not
        widened. None when infeasible.
    gpus : int
    cost : PlanCost or None
        The fleet's cost per hour, per month and per million tokens, as for :class:`~calculator.fleet.FleetPlan`
        (None when infeasible).
    model, engine, served_model, engine_release, workload, targets, registry_documents
        What the pools were sized for, as a :class:`~calculator.fleet.FleetPlan` records them: what a launch
        (:func:`~calculator.deploy.disaggregated_launch`) and a simulation
        (:func:`~calculator.simulation.verify_disaggregated`) of the pools read.
    interconnect : str
        The registry id of the link the KV handoff crosses.
    """

    feasible: bool
    reason: str
    prefill: dict[str, str | int] = field(default_factory=dict)
    decode: dict[str, str | int] = field(default_factory=dict)
    kv_handoff: Time | None = None
    ttft: Time | None = None
    tpot: Time | None = None
    gpus: int = 0
    cost: PlanCost | None = None
    ttft_interval: tuple[Time, Time] | None = None
    tpot_interval: tuple[Time, Time] | None = None
    model: str = ""
    engine: str = ""
    served_model: str | None = None
    engine_release: str | None = None
    workload: Workload | None = None
    targets: Targets | None = None
    registry_documents: tuple[RegistryDocument, ...] = ()
    interconnect: str = ""

    def _frame_values(self) -> dict[str, Any]:
        """The fields without how to launch the plan (in its JSON, not its table row), as a FleetPlan's frame."""
        values = super()._frame_values()
        for name in ("served_model", "engine_release"):
            values.pop(name)
        return values

    def pool_plan(self, pool: str) -> FleetPlan:
        """One pool as a colocated plan of its replicas: what the launch commands and the simulator read of it.

        ``pool`` is ``"prefill"`` or ``"decode"``. The prefill pool's replicas take one prompt at a time (batch 1,
        the sizer's queue of prefills) and emit one token; the decode pool's run the plan's batch cap. Each keeps
        the plan's workload and targets (the prefill pool's workload has one output token).
        """
        if pool not in ("prefill", "decode"):
            raise InputError(
                f"DisaggregatedPlan.pool_plan(): argument 'pool' must be 'prefill' or 'decode', got {pool!r}"
            )
        if not self.feasible or self.workload is None or self.ttft is None or self.tpot is None:
            raise InputError(f"the disaggregated plan is infeasible or records no workload: {self.reason}")
        record = self.prefill if pool == "prefill" else self.decode
        tp, replicas = int(record["tensor_parallel"]), int(record["replicas"])
        workload = dataclasses.replace(self.workload, output_tokens=1.0, output_cv=0.0) if pool == "prefill" else None
        step = self.tpot
        service = PlanService(  # the pool's share of the plan's prediction (the handoff and wait stay the plan's)
            ttft=self.ttft, tpot=step, tbt_max=step, ttft_interval=self.ttft_interval or (self.ttft, self.ttft),
            tpot_interval=self.tpot_interval or (step, step), replica_throughput=Q_(0.0, "request/s"),
            running_batch=0.0, utilization=0.0,
        )  # fmt: skip
        return FleetPlan(
            feasible=True, reason=f"the {pool} pool of a disaggregated plan", model=self.model,
            accelerator=str(record["accelerator"]), precision=str(record["precision"]), engine=self.engine,
            kv_precision=str(record.get("kv_precision", "")), batch=int(record.get("batch", 1)), replicas=replicas,
            gpus=replicas * tp, layout=Layout(tensor_parallel=tp), service=service,
            workload=workload or self.workload, targets=self.targets, registry_documents=self.registry_documents,
            served_model=self.served_model, engine_release=self.engine_release,
        )  # fmt: skip


def size_disaggregated(
    model: ModelRef,
    workload: Workload,
    targets: Targets,
    space: SearchSpace,
    *,
    interconnect: InterconnectRef = "infiniband-ndr",
    engine: str | EngineProfile | None = None,
    costs: Costs | None = None,
    registry: Registry | None = None,
    max_prefill_replicas: int = 4096,
) -> DisaggregatedPlan:
    """Size disaggregated prefill and decode pools for a workload (compare with :func:`size_fleet`).

    The parts are :func:`size_fleet`'s. The decode pool runs only decode steps, so ``TPOT = t_dec(B)``
    with no prefill interference and a replica sustains ``B / ((O - 1) t_dec)`` requests per second.
    The prefill pool is ``c`` G/G/1 queues of prefills (its ``c`` replicas behind round robin, each prompt its own
    prefill time, :func:`_prefill_pool`); TTFT adds its
    wait, the KV handoff of Eq. 10 over ``interconnect`` (per-direction bandwidth and startup latency
    from the registry), and the decode side's first token: a second request path (the router hands the
    request to a decode replica), the mean wait for a slot in the decode batch (its running batch as a
    birth-death queue, the colocated sizer's), and one and a half decode steps (the rest of the
    iteration it arrives in and the one that computes the token); a percentile TTFT target takes the
    decode side at its mean. The pools are the cheapest pair: each decode pool that meets the TPOT target and
    whose first token comes sooner than a cheaper one's, with the cheapest prefill pool in what it leaves of the
    TTFT target; the KV handoff bandwidth is per request (one path). Each pool's experts are split by tensor
    parallelism (``space.moe_layouts`` is not searched), the decode pool's running sequences hold the
    length-biased context of spread outputs (``Workload.held_context``, as the colocated sizer's), and a
    token-gap bound (``targets.tbt``) is refused: a decode pool runs no prefill between tokens.
    """
    from ..phases import kv_handoff_time

    here = "size_disaggregated"
    _part("workload", workload, Workload, "Workload(Q_(10, 'request/s'), 1024, 256)", here)
    _part("targets", targets, Targets, "Targets(Q_(1, 's'), Q_(50, 'ms'))", here)
    _part("space", space, SearchSpace, "SearchSpace('h100-sxm', 'fp8')", here)
    costs = _part("costs", Costs() if costs is None else costs, Costs, "Costs(Q_(3, 'USD/hour'))", here)
    if targets.tbt is not None:
        raise InputError(
            "size_disaggregated(): a decode pool runs no prefill between two tokens; leave Targets.tbt out "
            "(it bounds colocated serving)"
        )
    max_prefill_replicas = count("size_disaggregated", "max_prefill_replicas", max_prefill_replicas, 1, MAX_FLEET_GPUS)
    # each pool's experts split by tensor parallelism: the pools' records carry no expert layout yet
    space = dataclasses.replace(space, moe_layouts=("tensor",))
    reg, profile, entry, tps, grid_batches = _resolve(model, space, engine, registry)
    ttft_target, tpot_target = targets.ttft.m_as("s"), targets.tpot.m_as("s")
    max_utilization = targets.max_utilization
    link = reg.interconnect(interconnect)
    named = _named_repository(model, entry)
    record: dict[str, Any] = {
        "model": entry.id, "engine": profile.name, "served_model": named or None, "engine_release": profile.release,
        "workload": workload, "targets": targets, "registry_documents": reg.user_documents, "interconnect": link.id,
    }  # fmt: skip
    latency = link.startup_latency.m_as("s") if link.startup_latency is not None else 0.0
    lam = workload.arrival_rate.m_as("request/s")
    families = _families(entry, space, costs, None, reg, profile, named)
    tp_grid, batch_grid = np.meshgrid(tps, grid_batches, indexing="ij")
    overhead = profile.request_overhead.m_as("s")

    def handoff_of(arrays: Any) -> float:
        kv_bytes = arrays.kv_tokens(workload.input_tokens) * arrays.kv_bytes_per_token  # the prompt's KV, handed over
        return float(
            kv_handoff_time.numeric(
                kv_bytes=kv_bytes, link_bandwidth=link.bandwidth.m_as("B/s"), startup_latency=latency, parallel_links=1
            )
        )

    def room(arrays: Any) -> float:
        """What the decode side may take of TTFT: all but the two request paths and the handoff (and > 0 more)."""
        return ttft_target - 2 * overhead - handoff_of(arrays)

    front, (soonest, left) = _decode_front(
        families, profile, workload, tp_grid, batch_grid, tpot_target, max_utilization, room
    )
    if not front:
        return DisaggregatedPlan(False, _no_decode_pool(soonest, left, ttft_target, overhead), **record)

    def prefill_after(decode: _Pool) -> tuple[_Pool | None, bool]:
        """The cheapest prefill pool in what ``decode``'s first token and handoff leave of the TTFT target."""
        budget = ttft_target - handoff_of(decode.family.arrays) - (overhead + decode.wait + 1.5 * decode.time)
        return _prefill_pool(
            families, profile, workload, tps, budget - overhead, max_utilization, targets.ttft_percentile,
            max_prefill_replicas,
        )  # fmt: skip

    decode, prefill, too_many = _cheapest_pair(front, prefill_after)
    # the decode side of TTFT: a second request path, a slot in the decode batch, the iteration it joins
    decode_first = overhead + decode.wait + 1.5 * decode.time
    handoff = handoff_of(decode.family.arrays)
    if prefill is None:
        limit = f"{max_prefill_replicas:,} prefill replicas (max_prefill_replicas)"
        why = f"the TTFT target needs more than {limit}" if too_many else ""
        why = why or f"no configuration meets the TTFT target after a {handoff * 1e3:.1f} ms KV handoff"
        return DisaggregatedPlan(False, f"prefill pool: {why}", kv_handoff=Q_(handoff, "s"), **record)
    ttft = overhead + prefill.time + handoff + decode_first
    first, step = _band(profile, prefill)["ttft"], _band(profile, decode)["tpot"]
    cost_hour = prefill.cost + decode.cost
    gpus = prefill.replicas * prefill.tensor_parallel + decode.replicas * decode.tensor_parallel
    return DisaggregatedPlan(
        feasible=True,
        reason="the cheapest pair of pools meeting the targets",
        prefill=prefill.record(),
        decode=decode.record(batch=True),
        kv_handoff=Q_(handoff, "s"),
        ttft=Q_(float(ttft), "s"),
        tpot=Q_(float(decode.time), "s"),
        gpus=gpus,
        cost=_fleet_costs(gpus, cost_hour, lam, workload.input_tokens, workload.output_tokens),
        ttft_interval=(
            Q_(2 * overhead + prefill.time * first[0] + handoff + (decode_first - overhead) * step[0], "s"),
            Q_(2 * overhead + prefill.time * first[1] + handoff + (decode_first - overhead) * step[1], "s"),
        ),
        tpot_interval=(Q_(decode.time * step[0], "s"), Q_(decode.time * step[1], "s")),
        **record,
    )


def _no_decode_pool(soonest: float, left: float, ttft_target: float, overhead: float) -> str:
    """Why no decode pool: none meets the TPOT target within memory, or none leaves the prefill pool any TTFT.

    ``soonest``: the soonest first token of the pools that meet the TPOT target (inf: none), against the ``left``
    seconds its family had.
    """
    if not np.isfinite(soonest):
        return "decode pool: no configuration meets the TPOT target within memory"
    handoff = ttft_target - 2 * overhead - left
    return (
        f"decode pool: no configuration meets the TTFT target after a {handoff * 1e3:.1f} ms KV handoff and two "
        f"request paths of {overhead * 1e3:.1f} ms: the decode pool's first token takes at least "
        f"{soonest * 1e3:.1f} ms and the target leaves it {max(left, 0.0) * 1e3:.1f} ms"
    )


def _band(profile: EngineProfile, pool: _Pool) -> dict[str, tuple[float, float]]:
    """The 80 % interval factors of a pool's predictions on its accelerator (the colocated plan's, per pool)."""
    from ..uncertainty import prediction_interval

    family = pool.family
    return prediction_interval(
        profile.name, family.accelerator, family.arrays.measured, profile.interval, profile.release_fitted
    )


@dataclass(frozen=True)
class _Pool:
    """The cheapest configuration of one pool: its family, layout, replicas, cost per hour and time."""

    family: Any
    tensor_parallel: int
    replicas: int
    cost: float
    time: float  # the decode step (decode pool) or the prefill and its queueing wait (prefill pool)
    batch: int = 1
    wait: float = 0.0  # the decode pool's mean wait for a slot in its batch (s)

    def record(self, *, batch: bool = False) -> dict[str, Any]:
        family = self.family
        layout = {"accelerator": family.accelerator, "precision": family.precision,
                  "kv_precision": family.arrays.kv_precision}  # fmt: skip
        layout["tensor_parallel"] = self.tensor_parallel
        return {**layout, **({"batch": self.batch} if batch else {}), "replicas": self.replicas,
                "gpus": self.replicas * self.tensor_parallel}  # fmt: skip


def _decode_front(
    families: list[Any],
    profile: EngineProfile,
    workload: Workload,
    tp_grid: np.ndarray,
    batch_grid: np.ndarray,
    tpot_target: float,
    max_utilization: float,
    room: Callable[[Any], float],
) -> tuple[list[_Pool], tuple[float, float]]:
    """The decode pools worth pairing with a prefill pool: cheapest first, each one's first token sooner.

    A pool's step meets the TPOT target with the batch in the KV cache, and its first token (the mean wait for a
    slot in the batch and one and a half steps) takes less than ``room(arrays)`` seconds, what the TTFT target
    leaves the decode side. Of those, the ones no cheaper pool's first token comes as soon as (the prefill pool
    gets what the first token leaves: at a low rate every batch cap fits one replica, the smallest cap keeps it
    full, and its slot wait can take the whole target). Also returns the soonest first token of the pools that
    meet the TPOT target within memory (inf: none does) and the room its family had, for the reason where none
    leaves the prefill pool any.
    """
    lam = workload.arrival_rate.m_as("request/s")
    decode_slots = max(workload.output_tokens - 1, 1.0)
    context = workload.held_context  # the running sequences' length-biased mean, as the colocated sizer's
    candidates: list[tuple[float, float, _Pool]] = []
    soonest = (float("inf"), 0.0)
    for family in families:
        a = family.arrays
        # a sequence's KV (its mean tokens and its prompt's last block's slack) and its admission's reservation
        capacity = _sequences(a, None, profile, tp_grid, workload, ServingOptions())
        t_dec = decode_step_seconds(a, profile.efficiency_for(family.accelerator), tp_grid, batch_grid, context)
        rate = batch_grid / (decode_slots * t_dec)
        ok = (batch_grid <= capacity) & (t_dec <= tpot_target)
        replicas = ceil_count(
            replica_demand.numeric(arrival_rate=lam, replica_throughput=rate, max_utilization=max_utilization)
        )
        # the batch as a birth-death queue over each TP row's rate curve (the colocated sizer's slot wait)
        load = lam / np.maximum(replicas, 1)
        wait = np.stack([_occupancy(batch_grid[r], rate[r], batch_grid[r], load[r])[1] for r in range(len(rate))])
        first = wait + 1.5 * t_dec
        if np.any(ok) and np.min(first[ok]) < soonest[0]:
            soonest = (float(np.min(first[ok])), room(a))
        cost = replicas * tp_grid * family.price
        for i in zip(*np.nonzero(ok & (first < room(a))), strict=True):
            pool = _Pool(
                family, int(tp_grid[i]), int(replicas[i]), float(cost[i]), float(t_dec[i]), int(batch_grid[i]),
                float(wait[i]),
            )  # fmt: skip
            candidates.append((float(cost[i]), float(first[i]), pool))
    front: list[_Pool] = []
    for _, first_token, pool in sorted(candidates, key=lambda c: (c[0], c[1])):
        if not front or first_token < front[-1].wait + 1.5 * front[-1].time:
            front.append(pool)
    return front, soonest


def _cheapest_pair(
    front: list[_Pool], prefill_after: Callable[[_Pool], tuple[_Pool | None, bool]]
) -> tuple[_Pool, _Pool | None, bool]:
    """The decode pool of ``front`` and its prefill pool (``prefill_after``) that cost least together.

    Returns the pair (the decode pool whose first token comes soonest and no prefill pool where none has one)
    and whether a prefill pool needed more replicas than allowed.
    """
    best: tuple[_Pool, _Pool | None] = (front[-1], None)
    too_many = False
    for decode in front:
        prefill, beyond = prefill_after(decode)
        too_many = too_many or beyond
        if prefill is not None and (best[1] is None or decode.cost + prefill.cost < best[0].cost + best[1].cost):
            best = (decode, prefill)
    return best[0], best[1], too_many


def _prefill_pool(
    families: list[Any],
    profile: EngineProfile,
    workload: Workload,
    tps: np.ndarray,
    budget: float,
    max_utilization: float,
    ttft_percentile: float | None,
    max_prefill_replicas: int,
) -> tuple[_Pool | None, bool]:
    """The cheapest prefill pool within the TTFT budget: each replica a G/G/1 queue of prefills.

    The pool's router (round robin, a plan's default) gives each of ``c`` replicas every ``c``-th request, so each
    queues its own prompts (the colocated sizer's wait for prefill budget, ``occupancy._wait``, at the replica's
    arrival CV), not one queue that any free replica serves (a G/G/c queue, which the simulator's pools are not).
    Also whether a pool meets the budget only with more than ``max_prefill_replicas`` replicas.
    """
    lam = workload.arrival_rate.m_as("request/s")
    best: _Pool | None = None
    too_many = False
    nodes, weights = length_nodes(workload.input_tokens, workload.input_cv)
    for family in families:
        eff = profile.efficiency_for(family.accelerator)
        # one prompt at a time: the service is a prefill's mean over the prompt lengths, with its own spread
        t_pf, spread = prefill_moments(lambda n: prefill_seconds(family.arrays, eff, tps, n), nodes, weights)  # noqa: B023  # called here, in this iteration
        least = np.ceil(lam * t_pf / max_utilization)
        # Pool sizes from the utilization floor upward; the TTFT wait shrinks as replicas are added.
        counts = least[:, None] + np.arange(64)[None, :]
        arrival_cv = _replica_arrival_cv(workload.arrival_cv, counts, "round_robin")
        wait = _wait(lam / counts, t_pf[:, None], arrival_cv, spread[:, None], ttft_percentile)
        in_time = t_pf[:, None] + wait <= budget
        too_many = too_many or bool((in_time & (counts > max_prefill_replicas)).any())
        ok = in_time & (counts <= max_prefill_replicas)
        cost = np.where(ok, counts * tps[:, None] * family.price, np.inf)
        i = np.unravel_index(np.argmin(cost), cost.shape)
        if np.isfinite(cost[i]) and (best is None or cost[i] < best.cost):
            best = _Pool(family, int(tps[i[0]]), int(counts[i]), float(cost[i]), float(t_pf[i[0]] + wait[i]))
    return best, too_many


@dataclass(frozen=True, repr=False)
class ServingModeComparison(Result):
    """Colocated against disaggregated serving for one workload.

    Attributes
    ----------
    colocated : FleetPlan
    disaggregated : DisaggregatedPlan
    cheaper : str
        ``"colocated"``, ``"disaggregated"``, or ``"neither"`` when both are infeasible.
    saving : Quantity [currency / time]
        What the cheaper mode saves per hour (zero when only one is feasible).
    """

    colocated: FleetPlan
    disaggregated: DisaggregatedPlan
    cheaper: str
    saving: MoneyRate


def compare_serving_modes(
    model: ModelRef,
    workload: Workload,
    targets: Targets,
    space: SearchSpace,
    *,
    interconnect: InterconnectRef = "infiniband-ndr",
    engine: str | EngineProfile | None = None,
    serving: ServingOptions | None = None,
    costs: Costs | None = None,
    registry: Registry | None = None,
) -> ServingModeComparison:
    """Size the workload both colocated (:func:`size_fleet`) and disaggregated (:func:`size_disaggregated`).

    The parts are :func:`size_fleet`'s; what only colocated serving has (``serving``'s prefix caching,
    speculation, chunked prefill and router, the token-gap bound ``targets.tbt``, the expert layouts
    beyond ``"tensor"``) applies to the colocated plan only.
    """
    colocated = size_fleet(model, workload, targets, space, engine=engine, serving=serving, costs=costs,
                           registry=registry)  # fmt: skip
    disaggregated = size_disaggregated(
        model, workload, dataclasses.replace(targets, tbt=None), space, interconnect=interconnect, engine=engine,
        costs=costs, registry=registry,
    )  # fmt: skip
    hourly = {
        "colocated": colocated.cost.per_hour if colocated.cost is not None else None,
        "disaggregated": disaggregated.cost.per_hour if disaggregated.cost is not None else None,
    }
    feasible = {k: v for k, v in hourly.items() if v is not None}
    if not feasible:
        return ServingModeComparison(colocated, disaggregated, "neither", Q_(0.0, "USD/hour"))
    cheaper = min(feasible, key=lambda k: feasible[k].m_as("USD/hour"))
    saving = (max(feasible.values()) - feasible[cheaper]) if len(feasible) == 2 else Q_(0.0, "USD/hour")
    return ServingModeComparison(colocated, disaggregated, cheaper, saving)
