"""The vectorized evaluation: every quantity of a plan over the candidate grid of one (accelerator, precision).

:func:`~calculator.fleet.size_fleet` and :func:`~calculator.fleet.frontier` evaluate every tensor-parallel
degree and cap ``B`` on running sequences at once with numpy, using the calibrated step model of
:mod:`calculator.performance` and the queueing models of :mod:`calculator.queueing`:

* **memory**: weights per device plus the KV cache of ``B`` sequences at the mean context must fit
  the engine's share of device memory (the KV cache shards over the tensor-parallel ranks);
* **iteration at running batch n**: where the engine mixes prefill into decoding, ``n / (O - 1)``
  prompts land in an iteration on average, each adding its chunks' cost over a plain decode step
  (averaged over the prompt-length distribution); prefill-first engines pause decoding instead;
* **throughput** at the cap: ``lambda_r(B) = B / ((O - 1) t_iter(B))``, or the token budget left by
  the decodes if prompts fill it first; replicas ``ceil(lambda / (u_max lambda_r(B)))``;
* **running batch**: the planned load per replica, ``lambda / R``, read back through the
  ``lambda_r(n)`` curve (Little's law); **TPOT** is the iteration time there;
* **TTFT**: the request overhead of the engine, half an iteration, the iterations that carry the
  prompt, and two waits: for the prefill budget (G/G/1 at full-budget iterations) and for a running
  slot when the batch is at its cap (G/G/B, holding time from Little's law); the router sets each
  replica's arrival variability (random dispatch keeps it Poisson-like, round robin smooths it); a
  percentile target combines the prompt-length tail and the wait tail;
* **headroom**: replicas are loaded to at most ``max_utilization`` of ``lambda_r(B)``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _reuse  # private: the bounded scope sweep points share grids in (calculator._reuse)
from ..performance import (
    EngineProfile,
    StepArrays,
    decode_step_seconds,
    iteration_seconds,
    kv_capacity_tokens,
    pipeline_pass_seconds,
    prefill_seconds,
    spread_over_ranks,
)
from ..performance.iteration import _overlap_expectation  # private: chunks landing together, priced as the predictor
from ..performance.scheduler import SchedulerRules, block_slack, scheduler_rules
from ..performance.speculation import Rounds, drafter_kv_share
from ..queueing import replica_demand
from ..results import ceil_count
from ._common import MAX_FLEET_GPUS
from .inputs import ServingOptions, Speculation, Workload
from .occupancy import (
    _arrived_within,
    _burst_gain,
    _company_share,
    _landing_share,
    _occupancy,
    _renewal_count,
    _replica_arrival_cv,
    _running_batch,
    _wait,
)
from .stream import Gaps, length_grid, length_nodes, length_quantile, prefill_moments, stream_tails

__all__: list[str] = []  # the sizer's own parts (Evaluation, planned_ttft, planned_tpot), not re-exported


# --------------------------------------------------------------------------------------------
# The vectorized evaluation


@dataclass
class _Family:
    """One (accelerator, precision, expert layout) with its step-model arrays and price."""

    accelerator: str
    precision: str
    arrays: StepArrays
    price: float  # USD per GPU-hour
    tdp: float  # W
    draft: StepArrays | None  # the drafter of speculative decoding: a draft model, or a head (StepArrays.draft_head)
    moe_layout: str = "tensor"  # a mixture of experts: experts split by TP, spread (EP = TP), or attention ranks
    stages: int = 1  # pipeline stages: a replica of the grid's GPUs runs them over this many stages
    #: The 16-bit weights the engine loads before quantizing them at load time (no checkpoint at the family's
    #: precision: EngineProfile.online_quantization), laid out as ``arrays``; None: it loads what it runs.
    loaded: StepArrays | None = None
    #: Copies of routed experts placed beside the logical ones (an expert-parallel load balancer's): the fewest that
    #: make the placed experts divide over the replica's GPUs where the engine needs that (:func:`_copy_families`).
    redundant: int = 0

    def key_at(self, tp: int) -> str:
        """The family at one replica size in rejections: ``accelerator/precision/tpN`` (``/dpN/epN``, ``/ppN``).

        With copies of experts, ``/redundantN`` after the expert-parallel degree.
        """
        suffix = {"expert": f"/ep{tp}", "attention-dp": f"/dp{tp}/ep{tp}"}.get(self.moe_layout, "")
        if self.stages > 1:
            return f"{self.accelerator}/{self.precision}/tp{tp // self.stages}/pp{self.stages}"
        copies = f"/redundant{self.redundant}" if self.redundant else ""
        return f"{self.accelerator}/{self.precision}/tp{tp}{suffix}{copies}"

    def stage_tp(self, tps: np.ndarray) -> np.ndarray:
        """The tensor-parallel GPUs of one pipeline stage of a replica of ``tps`` GPUs.

        At least 1 where the stages do not divide the replica (:meth:`layout_ok` rejects those sizes).
        """
        return np.maximum(np.floor(np.asarray(tps, dtype=float) / self.stages), 1.0)

    def layout_ok(self, tps: np.ndarray) -> np.ndarray:
        """Which replica sizes the layout runs (the others are another family's, or no family's).

        The attention's tensor-parallel GPUs divide the heads (attention ranks hold whole heads, so any size).
        Spread experts are placed with the family's copies: the fewest the engine needs at that degree
        (:meth:`copies_at`). Pipeline stages are one scale-up domain at most each, and only replicas over
        several domains are run as stages.
        """
        tps = np.asarray(tps, dtype=float)
        if self.stages > 1:
            per_stage = tps / self.stages
            whole = (tps % self.stages == 0) & (self.arrays.heads % self.stage_tp(tps) == 0)
            return whole & (per_stage <= self.arrays.node_gpus) & (tps > self.arrays.node_gpus)
        heads_ok = np.asarray(self.moe_layout == "attention-dp" or self.arrays.heads % tps == 0)
        if self.moe_layout == "tensor":
            return np.broadcast_to(heads_ok, np.shape(tps)).copy()
        return np.asarray(self.copies_at(tps) == self.redundant) & heads_ok

    def copies_at(self, tps: np.ndarray) -> np.ndarray:
        """The fewest copies of experts a replica of each size in ``tps`` places with the experts spread over it.

        0 where the degree divides the experts, or where the engine places them unevenly without copies
        (``EngineProfile.uneven_experts``: vLLM); else the experts' shortfall from the next multiple of the
        degree (SGLang and TensorRT-LLM need the placed experts to divide evenly): 32 for 256 experts on 72 GPUs.
        """
        tps = np.asarray(tps, dtype=float)
        if self.moe_layout == "tensor" or self.arrays.uneven_experts:
            return np.zeros(np.shape(tps))
        return -self.arrays.experts % tps

    def nodes_ok(self, tps: np.ndarray) -> np.ndarray:
        """Which degrees the accelerator can span: one scale-up domain, or several over a registered scale-out link."""
        tps = np.asarray(tps, dtype=float)
        return (tps <= self.arrays.node_gpus) | (self.arrays.scale_out_bandwidth > 0)

    def ranks(self, tp: np.ndarray) -> np.ndarray:
        """Schedulers per replica: one per attention rank (one per GPU with attention data parallelism)."""
        tp = np.asarray(tp, dtype=float)
        return tp / self.arrays.attention_group(tp)

    def caps(self, tp: np.ndarray, batch: np.ndarray) -> np.ndarray:
        """A replica's cap on running sequences: each rank's cap (the grid's batch) times its ranks."""
        return batch * self.ranks(tp)


@dataclass(frozen=True)
class Evaluation:
    """Every quantity of a plan over one family's candidate grid (TP degree x batch cap): SI arrays.

    ``fits``, ``oversized``: whether the cap's KV cache fits beside the weights, and whether the
    load needs more than :data:`~calculator.fleet._common.MAX_FLEET_GPUS`; ``capacity``: sequences
    the KV cache holds; ``usable_per_device`` and ``weights_per_device`` (bytes); ``prefill`` and
    ``decode_step`` (s): a prompt's prefill alone and a decode step at the cap; ``tpot``, ``ttft``
    and ``tbt_max`` (s) at the planned load; ``tpot_at_batch`` (s): the iteration time with the cap
    full; ``rate`` (request/s): what a replica sustains at the cap; ``replicas``; ``running``: the
    mean running batch at the planned load; ``queue_wait`` and ``slot_wait`` (s): the mean waits of
    the TTFT rule, for prefill budget and for a running slot (the rest of the mean TTFT is the request
    overhead and the iterations that carry the prompt); ``tpot_checked`` and ``tbt_checked`` (s): what the
    targets are checked against, the mean TPOT and the longest gap or their percentiles
    (:func:`~calculator.fleet.stream.stream_tails`).
    """

    fits: np.ndarray
    capacity: np.ndarray
    usable_per_device: float
    prefill: np.ndarray
    decode_step: np.ndarray
    tpot: np.ndarray
    tpot_at_batch: np.ndarray
    ttft: np.ndarray
    tbt_max: np.ndarray
    tpot_checked: np.ndarray
    tbt_checked: np.ndarray
    rate: np.ndarray
    replicas: np.ndarray
    running: np.ndarray
    weights_per_device: np.ndarray
    oversized: np.ndarray
    queue_wait: np.ndarray
    slot_wait: np.ndarray


def planned_tpot(running: Any, load: Any, own_time: Any, decode_slots: float, floor: Any) -> Any:
    """The TPOT rule: a request's time running less its own prefill iterations, per later token.

    By Little's law a request spends ``running / load`` seconds in the running batch (``running``
    sequences on average at ``load`` requests per second); less the ``own_time`` of the iterations
    that carry its prompt, the rest is spread over its ``decode_slots`` (output tokens after the
    first). Never below ``floor``, the iteration time at the running batch.

    Examples
    --------
    >>> float(planned_tpot(10.0, 2.0, 1.0, 100.0, 0.01))  # 5 s running, 1 s of it prefill: 40 ms a token
    0.04
    """
    return np.maximum((running / np.maximum(load, 1e-300) - own_time) / decode_slots, floor)


def planned_ttft(
    overhead: float, first: Any, wait: Any, first_tail: Any = None, wait_tail: Any = None, flight: Any = 0.0
) -> Any:
    """The TTFT rule: the request path, the iterations to the first token, and the waits.

    The mean is ``overhead + first + wait`` (the engine's request overhead, the iterations that carry
    the prompt from its arrival, and the waits for prefill budget and for a running slot). At a
    percentile (``first_tail`` and ``wait_tail`` given: each delay at that percentile) the sum of
    independent delays is taken as the mean plus the root-sum-square of each delay's excess over its
    mean, between the largest excess and their sum; an unbounded wait gives an infinite TTFT. ``flight``:
    the excess at that percentile of the iterations an arrival finds in flight (:func:`_in_flight`).

    Examples
    --------
    >>> float(planned_ttft(0.05, 0.1, 0.2))
    0.35000000000000003
    >>> float(planned_ttft(0.05, 0.1, 0.2, first_tail=0.13, wait_tail=0.24))  # excesses 30 and 40 ms
    0.4
    """
    ttft = overhead + first + wait
    if first_tail is None:
        return ttft
    # an unbounded wait (mean or tail) is an infinite TTFT, never inf - inf
    bounded = np.isfinite(wait_tail) & np.isfinite(ttft)
    wait_excess = np.where(bounded, wait_tail, 0.0) - np.where(bounded, wait, 0.0)
    excess = np.hypot(np.hypot(np.maximum(first_tail - first, 0.0), np.maximum(wait_excess, 0.0)), flight)
    return np.where(bounded, ttft + excess, np.inf)


def _evaluate(
    family: _Family,
    profile: EngineProfile,
    workload: Workload,
    tp: np.ndarray,
    batch: np.ndarray,
    serving: ServingOptions,
    *,
    percentile: float | None = None,
    max_utilization: float = 1.0,
    scale: tuple[float, float] = (1.0, 1.0),
    stream: tuple[float | None, float | None] = (None, None),
) -> Evaluation:
    """Every quantity of the plan for the candidate grid ``tp`` x ``batch`` (plain arrays, SI).

    ``batch`` is the replica's cap on running sequences; replicas are set by the throughput at that
    cap loaded to ``max_utilization``, and the latencies are evaluated at the running batch the
    planned load produces (Little's law on the grid); TTFT at ``percentile`` (None: the mean).
    ``scale`` multiplies prefill and decode step times (the ends of the model's error interval);
    ``stream``: the TPOT and token-gap percentiles checked (None: the mean TPOT, the longest gap).
    """
    steps = _StepGrid(family, profile, workload, tp, batch, serving, percentile, scale)
    grid = _Grid(steps, max_utilization, workload.arrival_rate.m_as("request/s"), stream=stream)
    return grid.evaluation(grid.latencies(np.ones(batch.shape, dtype=bool)))


@dataclass(frozen=True, eq=False)
class _Grid:
    """One family's candidate grid in two stages: its throughput (replicas, cost) first, its latencies on demand.

    The replicas of a candidate follow from its step times alone (:attr:`sized`); its TPOT, TTFT and
    token gap need the queueing at the planned load (:meth:`latencies`), whose values at one
    candidate do not depend on which other candidates are evaluated with it: the search evaluates the
    caps of a TP row a few at a time, in order of their cost, and stops at the first feasible one.
    """

    steps: _StepGrid  # the family's grid and what its step times read
    max_utilization: float
    arrival_rate: float  # request/s, the workload's
    fewest: float = 0.0  # replicas every candidate runs at least (:meth:`at`)
    stream: tuple[float | None, float | None] = (None, None)  # the TPOT and token-gap percentiles checked

    @functools.cached_property
    def timed(self) -> _StepTimes:
        return _reuse.shared(self.steps.key(), self.steps.times)

    @functools.cached_property
    def sized(self) -> _Sized:
        rate = self.timed.iteration.rate
        stages = self.steps.family.arrays.pipeline_parallel
        return _Sized.of(self.arrival_rate, rate, self.max_utilization, self.steps.tp, stages, self.fewest)

    def at(self, replicas: float) -> _Grid:
        """The grid with every candidate on at least ``replicas`` replicas (more than its headroom needs).

        The headroom sets the fewest replicas a cap may run (:attr:`sized`); more of them only lower
        each one's load. The step times are this grid's, not priced again.
        """
        grid = dataclasses.replace(self, fewest=float(replicas))
        grid.__dict__["timed"] = self.timed  # functools.cached_property's own slot
        return grid

    def latencies(self, where: np.ndarray, out: _Latencies | None = None) -> _Latencies:
        """TPOT, TTFT, the longest token gap and the running batch of the candidates ``where`` selects.

        Written into ``out`` (the other candidates keep theirs; NaN where none was evaluated).
        """
        shape = self.steps.batch.shape
        out = out if out is not None else _Latencies.empty(shape)
        profile, workload, timed, sized = self.steps.profile, self.steps.workload, self.timed, self.sized
        it, light = timed.iteration, timed.light
        overhead = self.constants[2]
        fixed = it.step if profile.mixed_batching else timed.per_token
        # each row's values over the caps, after its light-load limit (a request alone, knot 0): the running batch
        # below the smallest cap is interpolated toward it, not held at the smallest cap's prompts landing
        rows = [
            np.concatenate((np.broadcast_to(first, (shape[0], 1)), np.broadcast_to(v, shape)), axis=1)
            for first, v in zip(
                (light.first_mean, light.first_tail, light.service, light.tbt, light.own_time, light.prompt_time,
                 light.step, light.step),
                (it.first_mean, it.first_tail, it.service, it.tbt, it.own_time, it.prompt_time, fixed,
                 timed.per_token),
                strict=True,
            )
        ]  # fmt: skip
        for i in range(shape[0]):
            cols = np.flatnonzero(where[i])
            if cols.size == 0:
                continue
            batch, rate = self.steps.batch[i], it.rate[i]
            cap, load, replicas = batch[cols], sized.load[i, cols], sized.replicas[i, cols]
            arrival_cv = _replica_arrival_cv(workload.arrival_cv, replicas, self.steps.serving.router)
            # The running batch fluctuates: every running sequence gets a token per iteration, a symmetric
            # (processor-sharing) queue whose completion rate with n running is the rate curve at n. Its
            # birth-death distribution gives the mean running batch, the chance the cap is full and the
            # wait for a slot (exact for Poisson arrivals, whatever the output lengths, if the completion
            # rate depended on n alone); the excess over the fluid fixed point scales with the variability
            # of the batch's increments, (1 + cv^2 b + (b - 1)^2 / b cs^2) / 2 (``_burst_gain``: an arrival's
            # prefill also holds back every running sequence's token, b - 1 = rho / (1 - rho) completions on average
            # at a prefill share rho, in proportion to its prefill time, whose CV is cs).
            fluid = _running_batch(batch, rate, cap, load)
            mean_running, slot_wait, full, headroom = _occupancy(batch, rate, cap, load)
            knots = np.concatenate(([0.0], batch))
            first_mean, first_tail, service, tbt_max, own, prompt, fixed_point, plain = (
                np.interp(fluid, knots, v[i]) for v in rows
            )
            # An arrival finds the engine busier or idler than a random moment, by the replica's arrival process:
            # what the others running add to the iterations carrying its prompt is the share of them it finds.
            company = _company_share(load, arrival_cv, fluid / np.maximum(load, 1e-300))
            first_mean = rows[0][i, 0] + company * (first_mean - rows[0][i, 0])
            first_tail = rows[1][i, 0] + company * (first_tail - rows[1][i, 0])
            spread = workload.input_cv if it.service_cv is None else it.service_cv[i, cols]
            gain = _burst_gain(load, prompt)
            smooth = (1 + arrival_cv**2 * gain + (gain - 1) ** 2 / gain * spread**2) / 2
            running = fluid + smooth * np.maximum(mean_running - fluid, 0.0)
            if not profile.mixed_batching:  # the prompts' share of the engine: their mean prefill (``service``)
                fixed_point = fixed_point / (1 - np.minimum(load * service, 0.999))
            # Two queues a request can wait in: for prefill budget (one server at full-budget iterations),
            # and for a running slot when the batch is at its cap (the birth-death tail).
            queue_wait, slot_wait = _wait(load, service, arrival_cv, spread, None), smooth * slot_wait
            wait_mean = queue_wait + slot_wait
            if self.steps.percentile is None:
                ttft = planned_ttft(overhead, first_mean, wait_mean)
            else:
                wait_tail = _wait(load, service, arrival_cv, spread, self.steps.percentile)
                # A full cap drains at the cap's completion rate: P(wait > x) = P(full) exp(-headroom x).
                slot_tail = np.log(np.maximum(full, 1e-300) / (1 - self.steps.percentile)) / np.maximum(
                    headroom, 1e-300
                )
                wait_tail = wait_tail + smooth * np.where(headroom > 0, np.maximum(slot_tail, 0.0), np.inf)
                flight = _in_flight(it, (self.steps.batch, i), (running, load, arrival_cv), self.steps.percentile)
                ttft = planned_ttft(overhead, first_mean, wait_mean, first_tail, wait_tail, flight)
            tpot = planned_tpot(running, load, own, timed.decode_slots, fixed_point)
            # The prompts landing in a request's decode steps arrive after its own: the share of the stationary
            # rate it meets at the replica's arrival process (none at a light load behind round robin).
            met = _landing_share(load, arrival_cv, timed.decode_slots * tpot, own)
            out.tpot[i, cols] = plain + met * np.maximum(tpot - plain, 0.0)
            if not profile.mixed_batching:
                # Prefill first, first come first served: the prompts that arrived during the request's own wait for
                # budget and its prefill are prefilled after its first token and before its next ones, and stall its
                # decoding too, where a slot is free for them (a prompt waiting for a slot stalls no one)
                t_pf = service
                before = t_pf * _renewal_count(load * (queue_wait + t_pf), arrival_cv) * (1 - full)
                out.tpot[i, cols] += before / ((1 - np.minimum(load * t_pf, 0.999)) * timed.decode_slots)
            out.ttft[i, cols] = ttft
            out.tbt_max[i, cols] = tbt_max
            point = (fluid, met * load, running)
            tails = stream_tails(self.gaps, (self.steps.batch, i), point, out.tpot[i, cols], workload, self.stream)
            out.tpot_checked[i, cols] = out.tpot[i, cols] if tails[0] is None else tails[0]
            out.tbt_checked[i, cols] = tbt_max if tails[1] is None else tails[1]
            out.running[i, cols] = running
            out.queue_wait[i, cols] = queue_wait
            out.slot_wait[i, cols] = slot_wait
        return out

    @functools.cached_property
    def gaps(self) -> Gaps:
        """The grid's token gaps as :func:`~calculator.fleet.stream.stream_tails` reads them."""
        it = self.timed.iteration
        return Gaps(it.iteration / it.step, self.timed.per_token, it.gap_chunks, it.gap_costs)

    @functools.cached_property
    def constants(self) -> tuple[float, np.ndarray, float]:
        """Read once per grid: (usable bytes per device, weight bytes per device, the request overhead in s)."""
        family, profile = self.steps.family, self.steps.profile
        usable, weights = (
            _usable_per_device(family, profile),
            _weights_per_device(family, self.steps.tp, self.steps.serving),
        )
        return usable, weights, profile.request_overhead.m_as("s")

    def evaluation(self, latencies: _Latencies) -> Evaluation:
        """The :class:`Evaluation` of the grid with ``latencies`` (:meth:`latencies`; NaN where not evaluated)."""
        timed, sized, (usable, weights, _) = self.timed, self.sized, self.constants
        return Evaluation(
            fits=timed.fits,
            capacity=timed.capacity,
            usable_per_device=usable,
            prefill=timed.prefill,
            decode_step=timed.decode_step,
            tpot=latencies.tpot,
            tpot_at_batch=timed.iteration.step,
            ttft=latencies.ttft,
            tbt_max=latencies.tbt_max,
            tpot_checked=latencies.tpot_checked,
            tbt_checked=latencies.tbt_checked,
            rate=timed.iteration.rate,
            replicas=sized.replicas,
            running=latencies.running,
            weights_per_device=weights,
            oversized=sized.oversized,
            queue_wait=latencies.queue_wait,
            slot_wait=latencies.slot_wait,
        )


def _in_flight(
    it: _Iteration, row: tuple[np.ndarray, int], point: tuple[Any, Any, Any], percentile: float
) -> Any:  # fmt: skip
    """The excess at ``percentile`` of what an arrival waits for in flight, over the mean the TTFT carries.

    An arrival that finds the engine busy waits for the rest of the iteration in flight (uniform over it,
    the iteration found length-biased) and an overlap scheduler's iteration built ahead; one that finds it
    idle waits for neither. The TTFT's rows carry ``iteration / 2`` on average (toward none for a request
    alone below the smallest cap); the arrivals at a percentile found it busy, and often in an iteration
    carrying another prompt's chunk. The engine is busy if the request before arrived within the time a
    request runs (:func:`~calculator.fleet.occupancy._arrived_within` of the running batch's mean gaps:
    hardly ever at a light load behind round robin, ``1 - exp(-n)`` for Poisson arrivals); in an iteration
    carrying a chunk if the prompt before arrived within its chunks' iterations (``load x chunks x their
    length`` mean gaps, ``gap_chunks`` and ``gap_costs``: one class, of their time-weighted length), else in
    the mean iteration at the running batch (at least the smallest cap's). ``point``: the mean running batch
    (with its fluctuation's excess), each replica's load and its arrivals' CV. Prompts of one length behind
    round robin otherwise planned a p99 TTFT at the mean where the simulator's arrivals that met another
    request decoding ran 70-100 ms later.
    """
    batch, i = row
    running, load, arrival_cv = point
    busy = np.maximum(running, batch[i, 0])

    def at(values: Any) -> Any:  # the row's values at the running batch, at least the smallest cap's
        return np.interp(busy, batch[i], np.broadcast_to(values, batch.shape)[i])

    iteration, ahead = at(it.iteration), at(it.built_ahead)
    found = _arrived_within(running, arrival_cv)  # busy if the request before is still running
    lengths = [iteration + at(d) for d in it.gap_costs]
    shares = [load * at(k) * length for k, length in zip(it.gap_chunks, lengths, strict=True)]
    carried = sum(shares, np.zeros_like(iteration))
    # an arrival finds a chunk in flight if the prompt before arrived within its chunks' iterations: about the
    # stationary share for Poisson arrivals, next to none behind round robin at a light load
    chunked = np.minimum(_arrived_within(carried, arrival_cv), found)
    longer = sum((s * d for s, d in zip(shares, lengths, strict=True)), np.zeros_like(iteration))
    longer = np.maximum(longer / np.maximum(carried, 1e-300), iteration)  # their time-weighted length
    rest = found - chunked
    q = 1 - percentile  # P(residual > t) = chunked (1 - t / longer)+ + rest (1 - t / iteration)+ at the percentile
    beyond = chunked * (1 - iteration / longer)  # the chance of waiting longer than a mean iteration
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # where neither is kept (q >= found)
        high = longer * (1 - q / np.maximum(chunked, 1e-300))
        low = (found - q) / (chunked / longer + rest / np.maximum(iteration, 1e-300))
    residual = np.where(q >= found, 0.0, np.where(q <= beyond, high, low))
    tail = np.where(q >= found, 0.0, np.maximum(residual, 0.0) + ahead)
    return np.maximum(tail - found * (iteration / 2 + ahead), 0.0)


@dataclass(frozen=True)
class _Sized:
    """The replicas of each candidate: ``demand`` (fractional), ``replicas`` (whole), each one's ``load``."""

    oversized: np.ndarray
    replicas: np.ndarray
    load: np.ndarray

    @classmethod
    def of(
        cls, lam: float, rate: np.ndarray, max_utilization: float, tp: np.ndarray, stages: float, fewest: float = 0.0
    ) -> _Sized:
        """``lam`` over replicas of ``stages`` x ``tp`` GPUs at ``rate`` each, loaded to ``max_utilization``.

        At least ``fewest`` replicas each (a search that adds replicas past the headroom's).
        """
        demand = replica_demand.numeric(arrival_rate=lam, replica_throughput=rate, max_utilization=max_utilization)
        demand = np.maximum(demand, fewest)
        oversized = demand * tp * stages > MAX_FLEET_GPUS  # counted without overflow: infeasible
        replicas = ceil_count(np.minimum(demand, MAX_FLEET_GPUS))
        return cls(oversized, replicas, lam / replicas)  # each replica's arrival rate


@dataclass(frozen=True)
class _Latencies:
    """TPOT, TTFT, longest token gap, TTFT's mean waits (s) and the mean running batch; NaN where not evaluated."""

    tpot: np.ndarray
    ttft: np.ndarray
    tbt_max: np.ndarray
    tpot_checked: np.ndarray
    tbt_checked: np.ndarray
    running: np.ndarray
    queue_wait: np.ndarray
    slot_wait: np.ndarray

    @classmethod
    def empty(cls, shape: tuple[int, ...]) -> _Latencies:
        return cls(*(np.full(shape, np.nan) for _ in dataclasses.fields(cls)))


def _usable_per_device(family: _Family, profile: EngineProfile) -> float:
    """Bytes of a device's memory the engine uses (its utilization share less its reserve)."""
    return profile.memory_utilization * family.arrays.memory - profile.memory_reserve.m_as("B")


def _weights_per_device(family: _Family, tp: np.ndarray, serving: ServingOptions) -> np.ndarray:
    """Weight bytes per device; with speculation the drafter's weights (a draft model's, a head's) share the devices.

    (The drafter's KV cache is in the capacity, :func:`_capacity`.)
    """
    draft = family.draft if serving.speculation is not None else None
    return family.arrays.weights_per_device(tp) + (draft.weights_per_device(tp) if draft else 0.0)


def _fits(family: _Family, profile: EngineProfile, workload: Workload, tp: np.ndarray, batch: np.ndarray,
          serving: ServingOptions) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(capacity, fits): the sequences the KV cache holds on each candidate and which caps fit, before any step time."""
    draft = family.draft if serving.speculation is not None else None
    capacity = _sequences(family.arrays, draft, profile, tp, workload, serving)
    return capacity, batch <= capacity


def _sequences(a: StepArrays, draft: StepArrays | None, profile: EngineProfile, tp: np.ndarray, workload: Workload,
               serving: ServingOptions) -> np.ndarray:  # fmt: skip
    """The sequences of ``workload`` the KV cache holds per replica: what they hold, and what their admissions reserve.

    An admission reserves the prompt and the engine's share of the output (the simulator's and the predictor's
    rule, :meth:`~calculator.performance.scheduler.SchedulerRules.admission_tokens`): TensorRT-LLM's whole output,
    held until the request completes.
    """
    rules = scheduler_rules(profile, a.memory, a.accelerator, kv=a)
    reserve = rules.admission_tokens(workload.input_tokens, workload.output_tokens, workload.input_cv)
    prompt = (workload.input_tokens, workload.input_cv)
    return _capacity(a, draft, profile, tp, workload.held_context, serving, prompt, reserve)


def _rate_bound(family: _Family, profile: EngineProfile, workload: Workload, tp: np.ndarray, batch: np.ndarray,
                serving: ServingOptions, scale: tuple[float, float] = (1.0, 1.0)) -> np.ndarray:  # fmt: skip
    """An upper bound on the requests per second a replica sustains at each cap, from its decode steps alone.

    A replica at cap ``B`` completes ``rate(B) <= B / ((O - 1) t(B))`` requests per second, where
    ``t(B)`` is the iteration with the cap's decodes and their share of prompts (:func:`_mixed_iteration`)
    and ``O - 1`` the output tokens after the first; a prefill-first engine adds its prefills to the
    denominator instead (:func:`_prefill_first_iteration`). ``t(B)`` is the decode step (or the
    speculative round per token) plus the prompts' share, and that share is non-negative: each chunk's
    added time is clipped at zero, and the asynchronous engines' correction for chunks landing together
    replaces the mean chunk's cost by the expectation of clipped costs over their Poisson count, which
    stays above zero where a chunk's cost is convex in its length (``tests/test_search_bounds.py``
    checks ``rate <= bound`` at every cap of random families, engines and lengths). So ``B / ((O - 1)
    per_token(B))`` bounds the rate from above; its ``per_token`` is the one :meth:`_StepGrid.times`
    computes on the same grid. One decode-step pricing instead of the prompts' and the queueing.
    """
    grid = _StepGrid(family, profile, workload, tp, batch, serving, None, scale)

    def bound() -> np.ndarray:
        _, per_token = grid.decode_times(profile.efficiency_for(family.accelerator))
        out = batch / (max(workload.output_tokens - 1, 1.0) * per_token)
        out.flags.writeable = False  # points of a sweep share it (calculator._reuse)
        return out

    return _reuse.shared(("decode-only rate", *grid.key()), bound)


@dataclass(frozen=True)
class _StepTimes:
    """One family's candidate grid timed before any queueing: what :func:`_evaluate` reads that the rate does not set.

    ``capacity`` and ``fits``: sequences the KV cache holds and which caps fit; ``prefill`` and
    ``decode_step`` (s): a prompt's prefill alone and a decode step at the cap; ``per_token`` (s): a
    decode step or a speculative round per token; ``iteration``: the iterations with their prompts;
    ``decode_slots``: the output tokens after the first; ``light``: the iterations of a request alone, no other
    prompt landing in them (the light-load limit the running batch tends to below the smallest cap).
    """

    capacity: np.ndarray
    fits: np.ndarray
    prefill: np.ndarray
    decode_step: np.ndarray
    per_token: np.ndarray
    iteration: _Iteration
    decode_slots: float  # output tokens after the first (at least one)
    light: _Iteration  # a request alone, no other prompt landing (the light-load limit), one column per TP row


@dataclass(frozen=True, eq=False)
class _StepGrid:
    """What timing one family's candidate grid reads (:meth:`times`), and the key that stands for it (:meth:`key`)."""

    family: _Family
    profile: EngineProfile
    workload: Workload
    tp: np.ndarray
    batch: np.ndarray
    serving: ServingOptions
    percentile: float | None
    scale: tuple[float, float]

    def key(self) -> tuple[Any, ...]:
        """Everything :meth:`times` reads: the family's arrays and the profile by identity, the rest by value.

        Not the arrival rate, its variability, the router or the headroom: points that differ only
        in those share the priced grid.
        """
        family, workload, serving, tp, batch = self.family, self.workload, self.serving, self.tp, self.batch
        spec = serving.speculation
        return (
            "step times", _reuse.Same(family.arrays), _reuse.Same(family.draft) if spec is not None else None,
            family.accelerator, _reuse.Same(self.profile),
            workload.input_tokens, workload.output_tokens, workload.input_cv, workload.output_cv, self.percentile,
            serving.prefix_hit_rate, serving.shared_prefix_tokens, serving.chunk_size,
            None if spec is None else (spec.method, spec.draft_length, spec.acceptance), self.scale,
            tp.shape, tp.dtype.str, tp.tobytes(), batch.shape, batch.dtype.str, batch.tobytes(),
        )  # fmt: skip

    def times(self) -> _StepTimes:
        """The step model on the grid: memory, prefill, decode and the iterations carrying prompts (no arrival rate)."""
        family, profile, workload, serving = self.family, self.profile, self.workload, self.serving
        tp, batch, scale = self.tp, self.batch, self.scale
        a = family.arrays
        eff = profile.efficiency_for(family.accelerator)
        inputs, outputs = workload.input_tokens, workload.output_tokens
        hit, prefix = serving.prefix_hit_rate, serving.shared_prefix_tokens
        computed = max(inputs - hit * prefix, 1.0)  # prompt tokens actually prefilled
        context = workload.held_context  # prompt plus half the length-biased output
        capacity, fits = _fits(family, profile, workload, tp, batch, serving)
        t_pf = scale[0] * prefill_seconds(a, eff, tp, computed)
        t_dec, per_token = self.decode_times(eff)
        decode_slots = max(outputs - 1, 1.0)
        # Prompt lengths: quadrature nodes of the log-normal length distribution (prefill cost is
        # convex in the length), and the length at the TTFT percentile.
        nodes, weights = length_nodes(inputs, workload.input_cv)
        tail = length_quantile(inputs, workload.input_cv, self.percentile)
        prompts = _Prompts(nodes, weights, tail, computed, hit * prefix, workload.input_cv)
        grid = _Step(a, eff, tp, batch, context, scale)
        spec = serving.speculation
        per_round = self.tokens_per_round()

        def iterations(step: _Step, times: tuple[np.ndarray, ...], alone: bool = False) -> _Iteration:
            """The iterations on ``step``'s grid (prefill, decode and per-token ``times``), a prompt's lag added.

            ``alone``: a request alone (the light-load limit): no decode slots for other prompts to land in, and
            an idle engine, with no iteration in flight or built ahead for the prompt to wait for.
            """
            t_pf, t_dec, per_token = times
            slots = np.inf if alone else decode_slots
            # each attention rank schedules its own token budget; a chunk size is the budget it sets
            rules = scheduler_rules(
                profile, a.memory, a.accelerator, family.ranks(step.tp), chunk_size=serving.chunk_size, kv=a,
                decode_tokens=1 if spec is None else spec.draft_length + 1,
            )  # fmt: skip
            if rules.mixed:
                it = _mixed_iteration(step, t_dec, per_token, prompts, rules, slots, workload.input_cv, per_round)
            else:
                it = _prefill_first_iteration(step, t_pf, per_token, prompts, slots, per_round)
            # The scheduler built the next iteration before the prompt arrived (an overlap scheduler): one more
            # before its own; and over pipeline stages its micro-batch's pass through every stage outlasts the
            # round (a prefill-first engine's prefill time, prefill_seconds, holds the pass already).
            lag = (0.0 if alone else rules.lag_iterations) * it.iteration
            if alone:  # the half iteration in flight both rules add
                it = dataclasses.replace(
                    it, first_mean=it.first_mean - it.iteration / 2, first_tail=it.first_tail - it.iteration / 2
                )
            if a.pipeline_parallel > 1 and rules.mixed:
                last = np.minimum(computed, rules.chunk_size(step.batch)) if rules.chunked else computed
                lag = lag + scale[0] * pipeline_pass_seconds(
                    a, eff, step.tp, step.batch, context, last, 1.0, computed - last
                )
            if rules.overlap or (a.pipeline_parallel > 1 and rules.mixed):
                it = dataclasses.replace(it, first_mean=it.first_mean + lag, first_tail=it.first_tail + lag)
            if rules.overlap and not alone:
                it = dataclasses.replace(it, built_ahead=rules.lag_iterations * it.iteration)
            return it

        it = iterations(grid, (t_pf, t_dec, per_token))
        # A light load: the request runs alone on an idle engine, the running batch's limit below the smallest cap
        shape = np.broadcast_shapes(np.shape(tp), np.shape(batch))
        one, degree = np.ones((*shape[:-1], 1)), np.broadcast_to(tp, shape)[..., :1]
        light_times = (np.broadcast_to(t_pf, shape)[..., :1], *self.decode_times(eff, degree, one))
        light = iterations(_Step(a, eff, degree, one, context, scale), light_times, alone=True)
        for value in (
            capacity,
            t_pf,
            t_dec,
            per_token,
            *(getattr(v, f.name) for v in (it, light) for f in dataclasses.fields(v)),
        ):
            if isinstance(value, np.ndarray):
                value.flags.writeable = False  # points of a sweep share these arrays (calculator._reuse)
        return _StepTimes(capacity, fits, t_pf, t_dec, per_token, it, decode_slots, light)

    def tokens_per_round(self) -> float:
        """Output tokens a decoding sequence gets per iteration: 1, or a speculative round's expected tokens."""
        spec, draft = self.serving.speculation, self.family.draft
        if spec is None or draft is None:
            return 1.0
        tokens = max(self.workload.output_tokens - 1.0, 1.0)
        return tokens / float(Rounds.of(spec, draft).rounds_for(tokens))

    def decode_times(
        self, eff: Any, tp: np.ndarray | None = None, batch: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(decode step, seconds per output token) on the grid, or at ``tp`` and ``batch`` running sequences.

        A decode step, or a speculative round per token.
        """
        family, workload, spec = self.family, self.workload, self.serving.speculation
        tp, batch = self.tp if tp is None else tp, self.batch if batch is None else batch
        a, context, scale = family.arrays, workload.held_context, self.scale[1]
        t_dec = scale * decode_step_seconds(a, eff, tp, batch, context)
        if spec is None or family.draft is None:
            return t_dec, t_dec
        return t_dec, _per_token(a, family.draft, eff, tp, batch, context, spec, scale, workload.output_tokens)


@dataclass(frozen=True)
class _Step:
    """One family's step model on the candidate grid (TP x batch cap), step times scaled by ``scale``."""

    arrays: StepArrays
    eff: Any
    tp: np.ndarray
    batch: np.ndarray
    context: float
    scale: tuple[float, float]

    def added(self, chunk: Any, requests: Any, prior: Any, plain: np.ndarray) -> np.ndarray:
        """Seconds a ``chunk`` of prefill (``requests`` prompts after ``prior`` cached tokens) adds to ``plain``."""
        it = iteration_seconds(self.arrays, self.eff, self.tp, self.batch, self.context, chunk, requests, prior)
        return self.scale[0] * np.maximum(it - plain, 0.0)


@dataclass(frozen=True)
class _Prompts:
    """The prompt lengths priced: quadrature ``nodes`` and ``weights``, the ``tail`` length, tokens computed."""

    nodes: list[float]
    weights: list[float]
    tail: float
    computed: float  # mean prompt tokens prefilled (a prefix-cache hit is not)
    cached: float  # mean prompt tokens a prefix-cache hit saves
    spread: float = 0.0  # the prompt lengths' coefficient of variation


@dataclass(frozen=True)
class _Iteration:
    """A family's iterations on the grid before queueing: what the throughput and the TTFT/TPOT rules read.

    ``step``: an iteration with the cap's decodes and their share of prompts, per output token a sequence gets
    (``iteration`` over the tokens a round emits under speculative decoding); ``iteration``: that iteration's
    length (a speculative round's, with the prompts landing in it); ``rate``: requests per
    second a replica sustains at the cap; ``first_mean`` and ``first_tail``: arrival to first token
    without waits, for the mean prompt and the one at the TTFT percentile; ``service``: a prompt's
    time in the prefill-budget queue; ``tbt``: the longest token gap; ``own_time``: the iterations
    that carry a request's own prompt; ``prompt_time``: the seconds a prompt's prefill adds to the
    iterations every running sequence waits for; ``gap_chunks`` and ``gap_costs``: per node of the prompt
    lengths, the gaps a prompt lands in and what it adds to each (the spread of the gaps,
    :func:`~calculator.fleet.stream.stream_tails`).
    """

    step: np.ndarray
    iteration: np.ndarray
    rate: np.ndarray
    first_mean: np.ndarray
    first_tail: np.ndarray
    service: np.ndarray
    tbt: np.ndarray
    own_time: np.ndarray
    prompt_time: np.ndarray
    gap_chunks: tuple[np.ndarray, ...] = ()  # per prompt-length node: the gaps a prompt of that length lands in
    gap_costs: tuple[np.ndarray, ...] = ()  # and the seconds it adds to each of them
    built_ahead: Any = 0.0  # an overlap scheduler's iteration built before a prompt arrives, which it waits for
    service_cv: Any = None  # the service's CV in the prefill-budget queue (None: the prompt lengths')


def _capacity(a: StepArrays, draft: StepArrays | None, profile: EngineProfile, tp: np.ndarray, context: float,
              serving: ServingOptions, prompt: tuple[float, float] | None = None,
              reserve: float = 0.0) -> np.ndarray:  # fmt: skip
    """Sequences of ``context`` tokens the KV cache holds per replica beside the weights (and a drafter's).

    In whole blocks of the engine's (:meth:`EngineProfile.kv_block`). Without ``prompt``, a batch of sequences
    of ``context`` tokens each, ``ceil(context / B)`` blocks apiece (``servecalc fit``'s count). With ``prompt``
    (mean tokens, length CV), running sequences of mean ``context`` tokens that keep their prompt's last block's
    slack while they decode, the simulator's rule (:func:`~calculator.performance.scheduler.block_slack`). A
    shared prefix is shared in whole blocks (vLLM's prefix cache keeps full blocks only). ``reserve``: the KV
    tokens an admission reserves per sequence (:meth:`SchedulerRules.admission_tokens`); the reservations of the
    running sequences fit in the cache too.
    """
    hit = serving.prefix_hit_rate
    block = profile.kv_block(a.mla)
    shared = np.floor(serving.shared_prefix_tokens / block) * block
    held = a.kv_tokens(context)  # in tokens of every layer: a sliding-window layer keeps at most its window
    slack = block_slack(a.kv_tokens(prompt[0]), block, prompt[1]) if prompt else block_slack(held, block)
    private = held + slack - hit * shared  # KV tokens each sequence holds privately
    tokens = kv_capacity_tokens(a, profile, tp)
    if draft is not None:  # the drafter's weights and KV (the performance layer's rule)
        taken, factor = drafter_kv_share(a, draft, tp)
        tokens, private, reserve = tokens - taken, private * factor, reserve * factor
    held_limit = np.maximum(tokens - (shared if hit > 0 else 0.0), 0.0) / private
    return np.floor(np.minimum(held_limit, np.maximum(tokens, 0.0) / max(reserve, 1e-300)))


def _per_token(a: StepArrays, draft: StepArrays, eff: Any, tp: np.ndarray, batch: np.ndarray, context: float,
               spec: Speculation, scale: float, outputs: float) -> np.ndarray:  # fmt: skip
    """Seconds per output token with speculative decoding: a round over its expected tokens.

    The round (its verification and drafting) is the performance layer's
    (:meth:`~calculator.performance.speculation.Rounds.iteration`), as the predictor and the simulator price it.
    """
    rounds = Rounds.of(spec, draft)
    tokens = max(outputs - 1.0, 1.0)  # a request's rounds over its tokens: E on long outputs, fewer on short ones
    return scale * rounds.iteration(a, eff, tp, batch, context) * float(rounds.rounds_for(tokens)) / tokens


def _mixed_iteration(
    grid: _Step, t_dec: np.ndarray, per_token: np.ndarray, prompts: _Prompts, rules: SchedulerRules,
    decode_slots: float, length_cv: float = 0.0, per_round: float = 1.0,
) -> _Iteration:  # fmt: skip
    """Engines that mix prefill into decoding: prompts ride in decode iterations, chunked to the budget left.

    At running batch n, n / (O - 1) prompts land per iteration on average, each adding its chunks'
    cost over a plain decode step; a prompt is ``k`` chunks where the budget the decodes leave is
    smaller than it. The budget is the replica's (every attention rank's, ``rules.ranks`` of them); a prompt
    is chunked to one rank's share of what is left (:class:`~calculator.performance.scheduler.SchedulerRules`).
    Chunks landing together are not simply additive:
    priced together (``overlapped_prompt_seconds``), several cost other than their sum alone, and with
    asynchronous scheduling the first hide under the fixed costs; a synchronous engine's attention
    ranks prefill theirs side by side (``spread_over_ranks``). An engine that does not
    chunk fills an iteration with the whole prompts that fit beside the decodes, at least one however
    long (``whole_prompts``, prompt lengths spread by ``length_cv``), as the benchmark model does. Under speculative
    decoding (``per_round`` tokens a round) an iteration is a round: ``per_round`` times the per-token step, the
    length a prompt waits in and rides in and a token gap spans.
    """
    batch, computed = grid.batch, prompts.computed
    room = rules.room(batch, closed_form=True)
    plain = t_dec / grid.scale[1]

    def prompt_cost(length: float) -> tuple[np.ndarray, np.ndarray]:
        """(chunks, added seconds per chunk iteration) of a prompt of ``length`` tokens."""
        tokens = max(length - prompts.cached, 1.0)
        k = rules.chunks(tokens, batch)
        chunk = tokens / k
        return k, grid.added(chunk, 1, (k - 1) / 2 * chunk, plain)

    costs = [prompt_cost(length) for length in prompts.nodes]
    weighted = list(zip(prompts.weights, costs, strict=True))
    per_prompt = sum(w * k * d for w, (k, d) in weighted)
    chunks = sum(w * k for w, (k, _) in weighted)  # per prompt, and the mean chunk's tokens
    chunk = max(prompts.computed - prompts.cached, 1.0) / chunks
    arrivals = per_round * batch / decode_slots * chunks  # chunks landing per iteration (a round: per_round tokens)
    r = np.asarray(rules.ranks, dtype=float)
    spread = (r > 1) & (not grid.eff.overlap)  # a synchronous engine's attention ranks: chunks side by side
    priced = per_prompt
    if not np.all(spread) and np.any(arrivals > 1e-9):  # none land in a request's iterations alone
        # Chunks landing together, priced together: under asynchronous scheduling the first hide under the fixed
        # costs and the next add their GPU time, and the GPU work of several is not their sum alone. The
        # prompts' cost over their lengths keeps its convexity; the mean chunk's carries the difference.
        a, eff = grid.arrays, grid.eff
        expected, alone = _overlap_expectation(a, eff, grid.tp, batch, grid.context, chunk, 0.0, arrivals, plain)
        collided = grid.scale[0] * expected / np.maximum(arrivals, 1e-300)  # the mean chunk, priced together
        # never below the mean chunk priced together: where the chunks are many and small, a difference larger
        # than the prompts' own cost would price a prompt's chunks below nothing (and a replica's rate below 0)
        together = np.maximum(per_prompt + chunks * (collided - grid.scale[0] * alone), chunks * collided)
        priced = np.where(arrivals > 1e-9, together, per_prompt)
    if np.any(spread):
        # Chunks landing in one iteration go to different ranks and prefill side by side (the mean chunk).
        together = grid.added(r * chunk, r, 0.0, plain)
        priced = np.where(spread, per_prompt * spread_over_ranks(arrivals, r, per_prompt / chunks, together), priced)
    scaled = priced / np.maximum(per_prompt, 1e-300)  # each prompt's cost carries the pricing of collisions
    per_prompt = priced
    step = per_token + batch / decode_slots * per_prompt
    iteration = per_round * step  # a round with the prompts landing in it
    own_time = sum(w * k * (iteration + d) for w, (k, d) in weighted)
    single = prompts.tail == prompts.nodes[0] and len(prompts.nodes) == 1
    k_tail, d_tail = costs[0] if single else prompt_cost(prompts.tail)
    # a full-budget iteration packs the prompts the room takes: its share (one long prompt's chunk after its
    # earlier ones) or the whole prompts that fit, at least one
    taken = rules.prompts_taken(room, computed, computed, length_cv)
    service_cv = None  # a full-budget iteration's spread: the prompt lengths'
    if rules.chunked:
        full = grid.added(room, np.maximum(taken, 1.0), np.maximum(computed - room, 0.0) / 2, plain)
    else:
        full = grid.added(taken * computed, taken, 0.0, plain)
        if len(prompts.nodes) > 1:
            # whole prompts, each its own prefill: the mean over the lengths (attention is convex in them), and the
            # prefill times' own spread, of the sum of the prompts an iteration takes
            def whole(length: float) -> np.ndarray:  # a prompt's added seconds over all its iterations
                k, d = prompt_cost(length)
                return k * d

            mean, cv = prefill_moments(whole, prompts.nodes, prompts.weights)
            full = full * mean / np.maximum(whole(computed + prompts.cached), 1e-300)
            service_cv = np.broadcast_to(cv / np.sqrt(np.maximum(taken, 1.0)), batch.shape)
    return _Iteration(
        step=step,
        iteration=iteration,
        rate=np.minimum(batch / (decode_slots * step), taken / iteration),
        first_mean=iteration / 2 + own_time,
        first_tail=iteration / 2 + k_tail * (iteration + d_tail),
        service=(per_round * per_token + full) / taken,  # a prompt's share of full-budget iterations
        tbt=iteration + np.maximum(d_tail, costs[-1][1]),
        own_time=own_time,
        prompt_time=per_prompt,
        **_chunk_gaps(grid, rules, prompts, plain, scaled),
        service_cv=service_cv,
    )


def _chunk_gaps(
    grid: _Step, rules: SchedulerRules, prompts: _Prompts, plain: np.ndarray, scaled: np.ndarray
) -> dict[str, tuple[np.ndarray, ...]]:
    """``gap_chunks`` and ``gap_costs`` of a mixing engine: the chunks a prompt's length quantiles are cut into.

    A prompt of ``T`` tokens beside a room of ``C`` is ``ceil(T / C)`` chunks, all but the last of the
    full ``C`` (the scheduler fills the room), the last of the rest; each adds its own cost to the gap it
    lands in, times ``scaled`` (the mean pricing of chunks that collide). An engine that does not chunk
    takes the prompt whole.
    """
    chunks, costs = [], []
    nodes, weights = length_grid(prompts.computed + prompts.cached, prompts.spread)
    for length, weight in zip(nodes, weights, strict=True):
        tokens = max(length - prompts.cached, 1.0)
        room = np.minimum(rules.chunk_size(grid.batch), tokens) if rules.chunked else np.full(grid.batch.shape, tokens)
        k = np.ceil(tokens / room)
        last = tokens - (k - 1) * room
        chunks += [weight * (k - 1), np.full(grid.batch.shape, weight)]
        costs += [
            grid.added(room, 1, np.maximum(k - 2, 0.0) / 2 * room, plain) * scaled,
            grid.added(last, 1, (k - 1) * room, plain) * scaled,
        ]
    return {"gap_chunks": tuple(chunks), "gap_costs": tuple(costs)}


def _prefill_first_iteration(
    grid: _Step, t_pf: np.ndarray, per_token: np.ndarray, prompts: _Prompts, decode_slots: float,
    per_round: float = 1.0,
) -> _Iteration:  # fmt: skip
    """Prefill-first engines: prefill batches run alone and pause decoding (work conservation).

    A decode iteration is ``per_round`` times the per-token time (a speculative round), the length an arriving
    prompt waits for and a token gap spans.
    """
    a, eff, tp = grid.arrays, grid.eff, grid.tp
    tail_pf = grid.scale[0] * prefill_seconds(a, eff, tp, max(prompts.tail - prompts.cached, 1.0))
    nodes, weights = length_grid(prompts.computed + prompts.cached, prompts.spread)
    each = [grid.scale[0] * prefill_seconds(a, eff, tp, max(n - prompts.cached, 1.0)) for n in nodes]
    # The prompts are served one after another, each its own prefill: the queue's service is the prefill's mean
    # over the lengths (not the mean length's: attention is convex in it), and its CV the prefill times' own
    if len(prompts.nodes) > 1:
        t_pf, spread = prefill_moments(
            lambda n: grid.scale[0] * prefill_seconds(a, eff, tp, n), prompts.nodes, prompts.weights, prompts.cached
        )
        spread = np.broadcast_to(spread, grid.batch.shape)
    else:
        spread = np.zeros(grid.batch.shape)
    iteration = per_round * per_token
    return _Iteration(
        step=per_token,
        iteration=iteration,
        rate=grid.batch / (grid.batch * t_pf + decode_slots * per_token),
        first_mean=iteration / 2 + t_pf,
        first_tail=iteration / 2 + tail_pf,
        service=t_pf,
        tbt=iteration + np.maximum(t_pf, tail_pf),
        own_time=t_pf,
        prompt_time=t_pf,
        gap_chunks=tuple(np.full(grid.batch.shape, w) for w in weights),
        gap_costs=tuple(np.broadcast_to(t, grid.batch.shape) for t in each),
        service_cv=spread,
    )
