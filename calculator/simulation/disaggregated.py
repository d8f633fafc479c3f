"""Checking a disaggregated plan by simulation: the prefill pool, the KV handoff, then the decode pool.

:func:`verify_disaggregated` simulates a :class:`~calculator.fleet.DisaggregatedPlan`'s two pools in turn, on the
same requests. The prefill pool's replicas serve each prompt with one output token (the pool's command runs one
prompt at a time, :meth:`~calculator.fleet.DisaggregatedPlan.pool_plan`); a request reaches the decode pool when
its prefill ends plus the plan's KV handoff, with its prompt already in the KV cache
(:attr:`~calculator.simulation.Traffic.cached_prompt`: the decode replica holds the prompt's KV from admission and
computes its last token), and streams its output there. A request's TTFT is its prefill-pool TTFT, the handoff and
its decode-pool TTFT (the decode pool's first token is the one the client sees, as the engines' routers forward
it); its TPOT and token gaps are the decode pool's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..results import Result, percentile_label
from ..types import Time
from ..units import Q_
from ._common import _Deadline, _seeds
from .inputs import TIME_LIMIT, Traffic
from .plans import _check_requests, _replica_count, default_requests, plan_setup
from .results import SimulationResult
from .run import simulate

__all__ = ["DisaggregatedVerification", "verify_disaggregated"]


@dataclass(frozen=True, repr=False)
class DisaggregatedVerification(Result):
    """A disaggregated plan's pools simulated on the same requests.

    Attributes
    ----------
    ttft : Quantity [time]
        End-to-end TTFT at the targets' statistic (their percentile, else the mean) over the measured requests
        of every seed: prefill-pool TTFT + KV handoff + decode-pool TTFT.
    ttft_statistic : str
        ``"mean"`` or ``"pNN"``.
    tpot : Quantity [time]
        Mean TPOT of the decode pool.
    prefill_ttft, decode_ttft : Quantity [time]
        The mean TTFT in each pool (the prefill pool's: its queue and prefill; the decode pool's: its queue, the
        cached prompt's last token and the engine's request path).
    kv_handoff : Quantity [time]
        The plan's handoff, added to every request.
    analytical_ttft, analytical_tpot : Quantity [time]
        The plan's own predictions.
    ttft_target, tpot_target : Quantity [time]
        The plan's targets.
    meets_targets : bool
        Whether the simulated TTFT and TPOT meet the plan's targets.
    verdict : str
    prefill, decode : SimulationResult
        The pools' simulations at the plan's counts (the last seed's), not part of the dictionary form.
    fewest_prefill_replicas, fewest_decode_replicas : int or None
        With ``search``: each pool's fewest replicas meeting the targets, the other pool as planned (None: none up
        to twice the plan's plus two, or not searched).
    searched : bool
        Whether the pools' replica counts were searched.
    """

    ttft: Time
    ttft_statistic: str
    tpot: Time
    prefill_ttft: Time
    decode_ttft: Time
    kv_handoff: Time
    analytical_ttft: Time
    analytical_tpot: Time
    ttft_target: Time
    tpot_target: Time
    meets_targets: bool
    verdict: str
    prefill: SimulationResult | None = field(default=None, repr=False)
    decode: SimulationResult | None = field(default=None, repr=False)
    fewest_prefill_replicas: int | None = None
    fewest_decode_replicas: int | None = None
    searched: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The statistics and the verdict (the simulations stay in ``prefill`` and ``decode``)."""
        return {
            name: getattr(self, name)
            for name in (
                "ttft", "ttft_statistic", "tpot", "prefill_ttft", "decode_ttft", "kv_handoff", "analytical_ttft",
                "analytical_tpot", "ttft_target", "tpot_target", "meets_targets", "verdict", "fewest_prefill_replicas",
                "fewest_decode_replicas", "searched",
            )
        }  # fmt: skip

    def rows(self) -> list[tuple[str, str, Time, Time, Time]]:
        """``(metric, statistic, simulated, analytical, target)`` for TTFT and TPOT."""
        return [
            ("ttft", self.ttft_statistic, self.ttft, self.analytical_ttft, self.ttft_target),
            ("tpot", "mean", self.tpot, self.analytical_tpot, self.tpot_target),
        ]


def verify_disaggregated(
    plan: Any,  # a fleet.DisaggregatedPlan (the simulator imports nothing of the sizer)
    *,
    requests: int | None = None,
    seeds: int | Sequence[int] = 2,
    search: bool = False,
    time_limit: float = TIME_LIMIT,
) -> DisaggregatedVerification:
    """Simulate a disaggregated plan's prefill pool, KV handoff and decode pool, and check its targets.

    Each seed draws ``requests`` requests (default :func:`~calculator.simulation.default_requests` of both pools'
    replicas) from the plan's workload; the prefill pool serves them with one output token each, and each
    reaches the decode pool when its prefill ends plus ``plan.kv_handoff``, with its prompt cached. The
    prefill pool runs one prompt at a time per replica, the decode pool the plan's batch cap. With ``search``,
    each pool's fewest replicas meeting the targets with the other pool as planned (as
    :func:`~calculator.simulation.verify_plan` searches a colocated plan's: from the plan's count, by doubling
    strides, then bisection; up to twice the plan's plus two). ``time_limit`` bounds the whole call. Left out:
    the handoff's contention (each transfer takes the plan's time whatever else crosses the link) and its spread
    over prompt lengths (every request takes the plan's, the mean prompt's).
    """
    deadline = _Deadline.start("verify_disaggregated", time_limit)
    # the plan's type by what it offers (the simulator imports nothing of the sizer): its pools as colocated plans
    if not callable(getattr(plan, "pool_plan", None)) or not hasattr(plan, "kv_handoff"):
        raise InputError(
            "verify_disaggregated(): argument 'plan' must be a DisaggregatedPlan (size_disaggregated's result), "
            f"got {type(plan).__name__}"
        )
    if not plan.feasible or plan.workload is None or plan.targets is None or plan.kv_handoff is None:
        raise InputError(f"verify_disaggregated(): the plan is infeasible ({plan.reason}); nothing to simulate")
    if not isinstance(search, bool):
        raise InputError(f"verify_disaggregated(): argument 'search' must be True or False, got {search!r}")
    pools = {pool: plan.pool_plan(pool) for pool in ("prefill", "decode")}
    for pool in pools.values():
        _replica_count("verify_disaggregated", pool.replicas)
    _check_requests("verify_disaggregated", requests)
    count = default_requests(sum(p.replicas for p in pools.values())) if requests is None else int(requests)
    sim = _Pools(pools, Traffic.from_workload(plan.workload, count), _seeds(seeds, "verify_disaggregated"),
                 plan.kv_handoff.m_as("s"), plan.targets, deadline)  # fmt: skip
    planned = {pool: p.replicas for pool, p in pools.items()}
    ttft, tpot, missed, parts, runs = sim.outcome(planned)
    fewest = {pool: sim.fewest(pool, planned) for pool in pools} if search else {}
    return DisaggregatedVerification(
        ttft=Q_(ttft, "s"), ttft_statistic=percentile_label(plan.targets.ttft_percentile), tpot=Q_(tpot, "s"),
        prefill_ttft=Q_(parts[0], "s"), decode_ttft=Q_(parts[1], "s"), kv_handoff=plan.kv_handoff,
        analytical_ttft=plan.ttft, analytical_tpot=plan.tpot, ttft_target=plan.targets.ttft,
        tpot_target=plan.targets.tpot, meets_targets=not missed, verdict=_verdict(missed, fewest, planned),
        prefill=runs[0], decode=runs[1], fewest_prefill_replicas=fewest.get("prefill"),
        fewest_decode_replicas=fewest.get("decode"), searched=search,
    )  # fmt: skip


def _verdict(missed: list[str], fewest: dict[str, int | None], planned: dict[str, int]) -> str:
    """The check in words: the targets met or missed, then each pool's fewest replicas where they were searched."""
    verdict = (
        "the pools meet the targets in simulation"
        if not missed
        else f"the pools miss the {' and '.join(missed)} target{'s' if len(missed) > 1 else ''} in simulation"
    )
    for pool, found in fewest.items():
        other = "decode" if pool == "prefill" else "prefill"
        if found is None:
            verdict += f"; no {pool} replica count up to {2 * planned[pool] + 2} meets them"
        else:
            verdict += (
                f"; {found:,} {pool} replica{'' if found == 1 else 's'} (planned {planned[pool]:,}) meet them with "
                f"the {other} pool as planned"
            )
    return verdict


class _Pools:
    """The pools simulated on the same requests per seed, at any replica counts (each pool's runs kept by count)."""

    def __init__(self, pools: dict[str, Any], traffic: Traffic, seeds: tuple[int, ...], handoff: float,
                 targets: Any, deadline: _Deadline) -> None:  # fmt: skip
        self.pools, self.seeds, self.handoff, self.targets, self.deadline = pools, seeds, handoff, targets, deadline
        self.draws = {}
        for seed in seeds:
            arrival, prompt, output = traffic.draw(seed)
            order = np.argsort(arrival, kind="stable")
            self.draws[seed] = (arrival[order], prompt[order], output[order])
        self.runs: dict[tuple[str, int, Any], SimulationResult] = {}

    def _pool(self, pool: str, replicas: int, key: Any, trace: Any, seed: int) -> SimulationResult:
        if (pool, replicas, key) not in self.runs:
            setup = dataclasses.replace(self.pools[pool], replicas=replicas)
            self.runs[pool, replicas, key] = _run(setup, trace, seed, self.deadline, pool == "decode")
        return self.runs[pool, replicas, key]

    def outcome(self, counts: dict[str, int]) -> tuple[float, float, list[str], tuple[float, float], Any]:
        """TTFT (the targets' statistic), mean TPOT, the targets missed, the mean TTFT in each pool, the last runs."""
        ttfts, pre_ttft, dec_ttft, tpots, runs = [], [], [], [], None
        for seed in self.seeds:
            arrival, prompt, output = self.draws[seed]
            trace = _trace(arrival, prompt, np.ones_like(output))
            first = self._pool("prefill", counts["prefill"], seed, trace, seed)
            before = first.requests["ttft"].to_numpy()  # rows in the trace's (arrival) order
            ready = arrival + before + self.handoff
            # the requests the prefill pool finished (not those left in it when its run ended), in arrival order
            moved = np.flatnonzero(np.isfinite(ready))
            moved = moved[np.argsort(ready[moved], kind="stable")]
            trace = _trace(ready[moved], prompt[moved], output[moved])
            second = self._pool("decode", counts["decode"], (seed, counts["prefill"]), trace, seed)
            rows = second.requests
            measured = rows["measured"].to_numpy()
            ttfts.append((before[moved] + self.handoff + rows["ttft"].to_numpy())[measured])
            pre_ttft.append(before[moved][measured])
            dec_ttft.append(rows["ttft"].to_numpy()[measured])
            tpots.append(rows["tpot"].to_numpy()[measured])
            runs = (first, second)
        every, percentile = np.concatenate(ttfts), self.targets.ttft_percentile
        ttft = float(np.mean(every)) if percentile is None else float(np.percentile(every, 100 * percentile))
        tpot = float(np.nanmean(np.concatenate(tpots)))
        met = {"TTFT": ttft <= self.targets.ttft.m_as("s"), "TPOT": tpot <= self.targets.tpot.m_as("s")}
        parts = (float(np.mean(np.concatenate(pre_ttft))), float(np.mean(np.concatenate(dec_ttft))))
        return ttft, tpot, [name for name, ok in met.items() if not ok], parts, runs

    def fewest(self, pool: str, planned: dict[str, int]) -> int | None:
        """The fewest replicas of ``pool`` meeting the targets with the other pool as planned (None: none found)."""
        from .plans import _Search

        search = _Search(lambda count: not self.outcome({**planned, pool: count})[2])
        return search.fewest_meeting(planned[pool], 2 * planned[pool] + 2)


def _trace(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray) -> Any:
    """A trace of the requests, in arrival order."""
    import pandas as pd

    return pd.DataFrame({"arrival_time": arrival, "input_tokens": prompt, "output_tokens": output})


def _run(pool: Any, trace: Any, seed: int, deadline: _Deadline, cached: bool) -> SimulationResult:
    """One pool's simulation of ``trace`` (one seed) within what is left of the call's time."""
    left = deadline.left()
    if left <= 0 or math.isnan(left):
        raise InputError("verify_disaggregated(): argument 'time_limit' left no time to simulate the pools")
    result = simulate(
        plan_setup(pool), Traffic(trace=trace, cached_prompt=cached), replicas=pool.replicas, router=pool.router,
        seeds=[seed], time_limit=left,
    )  # fmt: skip
    if result.truncated:
        raise InputError(
            f"verify_disaggregated(): the simulation stopped early ({result.truncated}); give more time (argument "
            "'time_limit') or fewer requests (argument 'requests')"
        )
    return result
