"""What a simulation runs: the replica setup and the traffic (arrivals and lengths).

The router policies (:data:`ROUTERS`, :data:`DEFAULT_ROUTER`, :func:`router_name`) are the serving
vocabulary's (:mod:`calculator.serving`), shared with the fleet sizer and re-exported here.

Traffic is open loop (Poisson, gamma renewal with a coefficient of variation, a trace, or a demand
curve with a replica schedule from :mod:`calculator.autoscaling`) or closed loop (``clients``
sending their next request when the last one completes, as a serving benchmark does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import count
from ..errors import InputError
from ..performance.engines import MAX_STREAM_INTERVAL
from ..results import Result
from ..serving import DEFAULT_ROUTER, ROUTERS, TRACE_COLUMNS, Speculation, read_trace, router_name
from ..types import Rate, Time
from ..units import ureg
from ._common import _time_seconds

if TYPE_CHECKING:
    import pandas as pd

    from ..registry import RegistryDocument

__all__ = ["ROUTERS", "DEFAULT_ROUTER", "SimulationSetup", "Traffic", "router_name"]

#: Requests one seed may simulate.
MAX_REQUESTS = 2_000_000
#: Seeds x requests one simulation (one replica count) may ask for: at the simulator's 10,000-150,000 requests
#: per second and core, 20,000,000 are minutes of work, beyond what any ``time_limit`` a caller waits for covers.
MAX_SIMULATED_REQUESTS = 20_000_000
#: A seed draws at most this many requests per second of its call's ``time_limit`` left when it starts: a little
#: above the fastest the simulator runs, setup and summary included (160,000 requests/s on one core with
#: one-token outputs; 10,000-50,000 for chat lengths). More could not be simulated in time, and drawing them
#: and their per-request state (about 2 us and 0.8 kB each) would spend the time and the memory for nothing.
REQUESTS_PER_SECOND = 200_000
#: Per-request rows a call keeps in ``SimulationResult.requests`` (over its seeds and, for ``verify_plan``, its
#: replica counts), about 120 bytes each: every seed keeps an even share, by a regular stride over its
#: requests. Attainment, goodput, stability, one seed's statistics and the means come from every request of
#: every seed; percentiles over several seeds from the rows kept (the verdict says when they are a sample).
MAX_KEPT_REQUESTS = 200_000
#: Rows of the replicas' KV-occupancy series a call keeps (``SimulationResult.occupancy``), shared likewise.
MAX_KEPT_POINTS = 200_000
#: Most replicas one simulation runs (each is a scheduler in the event loop): ``simulate(replicas=...)``, a
#: ``replica_schedule``'s counts.
MAX_REPLICAS = 10_000
#: Wall-clock seconds a whole ``simulate`` / ``simulate_plan`` / ``verify_plan`` call may run, unless told.
TIME_LIMIT = 120.0


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, repr=False)
class SimulationSetup(Result):
    """What runs on every replica: the model, the hardware, the engine and its limits.

    Attributes
    ----------
    model, accelerator, precision : str
        Registry ids (or aliases) and the weight precision.
    tensor_parallel : int
        Devices per replica.
    expert_parallel : int
        For a mixture of experts: the replica's GPUs its routed experts are spread over (1: each
        expert split by tensor parallelism); it divides ``tensor_parallel``.
    redundant_experts : int
        For spread experts: copies a load balancer places beside them (``performance.predict_benchmark``'s).
    engine_release : str, optional
        The engine release to run (``EngineProfile.for_release``: its dated scheduling and KV declaration).
    data_parallel : int
        For a mixture of experts: attention ranks of the replica (attention data parallelism), each of
        ``tensor_parallel / data_parallel`` GPUs. Each rank has its own scheduler, its share of the
        sequence cap, token budget and KV cache, and gets a replica's request when it has the fewest
        outstanding; the ranks iterate together, each iteration lasting the busiest rank's attention
        and dense work plus the experts over every rank's tokens (the imbalance shows in the tail).
    pipeline_parallel : int
        Pipeline stages of ``tensor_parallel`` GPUs each (a replica of ``tensor_parallel x
        pipeline_parallel`` GPUs), iterations priced by the step model's micro-batches
        (:func:`~calculator.performance.decode_step_time`).
    engine : str or None
        Engine profile name (``None``: the engine-agnostic default).
    kv_precision : str or None
        KV-cache precision (16-bit by default).
    max_num_seqs, max_num_tokens : int or None
        Override the engine's sequence cap and token budget (``None``: its defaults on this GPU).
    step_scale : float
        Multiplies every iteration time (the ends of the model's error interval).
    step_time : Quantity [time] or None
        A fixed time for every iteration in place of the performance model: for what-ifs and for
        checking the scheduler against queueing theory (``None``: priced by the step model).
    registry_files : tuple of str or RegistryDocument
        Registry files of your own, or their documents (``load_registry(extra=...)``; a plan's
        ``registry_documents``), the ids resolve in besides the packaged one (not a registry object, so
        worker processes can load them too).
    speculation : Speculation or None
        Speculative decoding (:class:`~calculator.serving.Speculation`): every decode iteration is a round,
        priced as the predictor and the sizer price it (:class:`~calculator.performance.speculation.Rounds`),
        in which each decoding sequence emits its accepted drafts and one token of the target's, the drafted
        positions passing with their acceptance probabilities (drawn from the seed). The drafter's weights and
        KV take their share of the cache. ``None``: plain decoding.
    streaming : bool
        Whether every token is streamed to its client (True, as the serving benchmarks the costs were fitted on);
        False: each output returned whole, the engine's costs as ``EngineProfile.for_streaming(False)`` prices them.
    stream_interval : int
        For a streamed run, the iterations between a request's responses (TensorRT-LLM's ``stream_interval``; 1,
        a response every token): the engine's costs as ``EngineProfile.with_stream_interval`` prices them.
    """

    model: str
    accelerator: str
    precision: str
    tensor_parallel: int = 1
    engine: str | None = None
    kv_precision: str | None = None
    expert_parallel: int = 1
    data_parallel: int = 1
    pipeline_parallel: int = 1
    max_num_seqs: int | None = None
    max_num_tokens: int | None = None
    step_scale: float = 1.0
    step_time: Time | None = None
    registry_files: tuple[str | RegistryDocument, ...] = ()
    speculation: Speculation | None = None
    redundant_experts: int = 0
    engine_release: str | None = None
    streaming: bool = True
    stream_interval: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.streaming, bool):
            raise InputError(f"SimulationSetup: 'streaming' must be True or False, got {self.streaming!r:.80}")
        if np.ndim(self.stream_interval) != 0:
            raise InputError(
                f"SimulationSetup: 'stream_interval' must be one whole number, got {self.stream_interval!r}"
            )
        interval = count("SimulationSetup", "stream_interval", self.stream_interval, 1, MAX_STREAM_INTERVAL)
        object.__setattr__(self, "stream_interval", interval)
        if interval != 1 and not self.streaming:
            raise InputError("SimulationSetup: 'stream_interval' applies to a streamed run (streaming=True)")
        for name in ("tensor_parallel", "expert_parallel", "data_parallel", "pipeline_parallel"):
            value = getattr(self, name)
            if np.ndim(value) != 0:
                raise InputError(f"SimulationSetup: '{name}' must be one whole number >= 1, got {value!r}")
            object.__setattr__(self, name, int(count("SimulationSetup", name, value)))
        if self.tensor_parallel % self.data_parallel:
            raise InputError(
                f"SimulationSetup: 'tensor_parallel' ({self.tensor_parallel}) must be a multiple of 'data_parallel' "
                f"({self.data_parallel}): it counts a replica's GPUs, data_parallel attention ranks of "
                "tensor_parallel / data_parallel GPUs each"
            )
        for name in ("max_num_seqs", "max_num_tokens"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | np.integer) and value >= 1):
                raise InputError(f"SimulationSetup: '{name}' must be a whole number >= 1, got {value!r}")
        scale = self.step_scale
        if isinstance(scale, bool) or not (
            isinstance(scale, int | float | np.number) and math.isfinite(scale) and scale > 0
        ):
            raise InputError(f"SimulationSetup: 'step_scale' must be > 0, got {self.step_scale!r}")
        if self.step_time is not None:
            _time_seconds("SimulationSetup", "step_time", self.step_time)
        if self.speculation is not None and not isinstance(self.speculation, Speculation):
            raise InputError(
                "SimulationSetup: 'speculation' must be a Speculation (calculator.serving) or None, got "
                f"{type(self.speculation).__name__}"
            )


@dataclass(frozen=True, repr=False)
class Traffic(Result):
    """The requests to simulate: arrivals and lengths.

    Attributes
    ----------
    arrival_rate : Quantity [request / time] or None
        Mean rate of an open-loop stream (``None`` for a trace or closed loop).
    input_tokens, output_tokens : float
        Mean lengths.
    input_cv, output_cv : float
        Coefficients of variation of the lengths (0: fixed).
    arrival_cv : float
        Of the inter-arrival times: 1 Poisson, otherwise a gamma renewal process (0: evenly spaced).
    length_distribution : {"lognormal", "gamma"}
        Shape of variable lengths.
    requests : int
        Requests to draw (open loop) or prompts to send (closed loop).
    clients : int or None
        Closed loop: this many clients, each sending its next request when its last completes.
    trace : DataFrame or None
        Columns ``arrival_time`` (s), ``input_tokens``, ``output_tokens``: replayed as is.
    demand : tuple of arrays or None
        ``(times in s, rates in request/s)``: a piecewise-linear demand curve (non-homogeneous
        Poisson arrivals).
    replica_schedule : tuple of arrays, ScalingPlan or None
        ``(times in s, ready replicas)``: a step function of the replicas that take traffic, or an
        :class:`~calculator.autoscaling.ScalingPlan` (its ``ready`` series, cold starts included).
        Replicas taken out drain. Times are measured from the first arrival.
    request_path_spread : float
        Closed loop: each request's path to the engine (the profile's ``request_overhead``: HTTP,
        tokenization) drawn uniformly within plus or minus this share of it, in [0, 1] (0: every path
        the same). A fixed path returns each client's next prompt a fixed time after an iteration's end,
        which can lock the arrivals to the iterations' phase (``docs/performance-model.md``, "Against the
        simulator").
    cached_prompt : bool
        Each request arrives with its prompt in the KV cache but its last token, as at a disaggregated decode
        pool (the prefill pool computed and sent the rest): the replica holds the prompt's KV from admission on
        and computes that one token before decoding (``verify_disaggregated``).
    """

    arrival_rate: Rate = None
    input_tokens: float = 1.0
    output_tokens: float = 1.0
    input_cv: float = 0.0
    output_cv: float = 0.0
    arrival_cv: float = 1.0
    length_distribution: str = "lognormal"
    requests: int = 10_000
    clients: int | None = None
    trace: pd.DataFrame | None = None
    demand: tuple[np.ndarray, np.ndarray] | None = None
    replica_schedule: tuple[np.ndarray, np.ndarray] | None = None
    request_path_spread: float = 0.0
    cached_prompt: bool = False

    def __post_init__(self) -> None:
        name = "Traffic"
        modes = sum(x is not None for x in (self.arrival_rate, self.clients, self.trace, self.demand))
        if modes != 1:
            raise InputError(f"{name}: give exactly one of 'arrival_rate', 'clients', 'trace' or 'demand', got {modes}")
        if self.arrival_rate is not None:
            rate = self.arrival_rate
            per_second = ureg.parse_units("request/s").dimensionality
            if not isinstance(rate, ureg.Quantity) or rate.dimensionality != per_second:
                raise InputError(f"{name}: 'arrival_rate' must be a rate in request/s, got {rate!r}")
            if not (math.isfinite(rate.m_as("request/s")) and rate.m_as("request/s") > 0):
                raise InputError(f"{name}: 'arrival_rate' must be a finite rate > 0, got {rate!r}")
        if self.trace is not None:  # checked as Traffic.from_trace reads it
            frame = read_trace(self.trace)
            if len(frame) > MAX_REQUESTS:
                raise InputError(f"{name}: the trace has {len(frame)} requests, more than {MAX_REQUESTS}")
            object.__setattr__(self, "trace", frame[list(TRACE_COLUMNS)].reset_index(drop=True))
        for key in ("input_tokens", "output_tokens"):
            value = getattr(self, key)
            if not (isinstance(value, int | float | np.number) and math.isfinite(value) and value >= 1):
                raise InputError(f"{name}: '{key}' must be a finite number of tokens >= 1, got {value!r}")
        for key in ("input_cv", "output_cv", "arrival_cv"):
            value = getattr(self, key)
            if not (isinstance(value, int | float | np.number) and math.isfinite(value) and 0 <= value <= 20):
                raise InputError(f"{name}: '{key}' must be in [0, 20], got {value!r}")
        if self.length_distribution not in ("lognormal", "gamma"):
            raise InputError(
                f"{name}: 'length_distribution' must be 'lognormal' or 'gamma', got {self.length_distribution!r}"
            )
        if isinstance(self.requests, bool) or not (
            isinstance(self.requests, int | np.integer) and 1 <= self.requests <= MAX_REQUESTS
        ):
            raise InputError(f"{name}: 'requests' must be a whole number in [1, {MAX_REQUESTS}], got {self.requests!r}")
        if self.clients is not None and (
            isinstance(self.clients, bool) or not (isinstance(self.clients, int | np.integer) and self.clients >= 1)
        ):
            raise InputError(f"{name}: 'clients' must be a whole number >= 1, got {self.clients!r}")
        if not isinstance(self.cached_prompt, bool):
            raise InputError(f"{name}: 'cached_prompt' must be True or False, got {self.cached_prompt!r}")
        spread = self.request_path_spread
        if isinstance(spread, bool) or not (isinstance(spread, int | float | np.number) and 0 <= spread <= 1):
            raise InputError(f"{name}: 'request_path_spread' must be a share in [0, 1], got {spread!r}")
        if spread and self.clients is None:
            raise InputError(f"{name}: 'request_path_spread' applies to closed-loop traffic (give 'clients')")
        if self.demand is not None:
            times, rates = _series(name, "demand", self.demand, "request/s")
            if times.size < 2 or np.any(np.diff(times) <= 0):
                raise InputError(f"{name}: 'demand' needs at least two points with increasing times")
            if np.any(rates < 0) or not rates.max() > 0:
                raise InputError(f"{name}: 'demand' rates must be >= 0 request/s and not all zero")
            object.__setattr__(self, "demand", (times, rates))
        if self.replica_schedule is not None:
            schedule: Any = self.replica_schedule  # a pair, or a ScalingPlan until replaced below
            if hasattr(schedule, "ready") and hasattr(schedule, "times"):  # an autoscaling ScalingPlan
                schedule = (schedule.times, schedule.ready)
            times, ready = _series(name, "replica_schedule", schedule, "")
            if times.size == 0 or np.any(np.diff(times) < 0) or not np.all((ready >= 0) & (ready <= MAX_REPLICAS)):
                raise InputError(
                    f"{name}: 'replica_schedule' needs sorted times and replica counts in [0, {MAX_REPLICAS}], "
                    f"got {len(times)} points"
                )
            object.__setattr__(self, "replica_schedule", (times, np.floor(ready).astype(np.int64)))

    @classmethod
    def from_workload(cls, workload: Any, requests: int = 10_000, **changes: Any) -> Traffic:
        """Open-loop traffic with a :class:`~calculator.fleet.Workload`'s rate, lengths and variability."""
        return cls(
            arrival_rate=workload.arrival_rate,
            input_tokens=workload.input_tokens,
            output_tokens=workload.output_tokens,
            input_cv=workload.input_cv,
            output_cv=workload.output_cv,
            arrival_cv=workload.arrival_cv,
            requests=requests,
        ).replace(**changes)

    @classmethod
    def from_trace(cls, trace: Any, **changes: Any) -> Traffic:
        """Replay a trace (CSV path or DataFrame with ``arrival_time``, ``input_tokens``, ``output_tokens``)."""
        frame = read_trace(trace)
        return cls(
            trace=frame,
            input_tokens=float(frame["input_tokens"].mean()),
            output_tokens=float(frame["output_tokens"].mean()),
            requests=len(frame),
        ).replace(**changes)

    def replace(self, **changes: Any) -> Traffic:
        """A copy with some fields changed (checked again)."""
        import dataclasses

        return dataclasses.replace(self, **changes)

    def draw(self, seed: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(arrival times in s, prompt lengths, output lengths)`` for one seed (closed loop: times 0).

        ``limit``: at most this many requests, the first to arrive (the simulator's bound on what a seed can
        simulate in the time left; the lengths then come from another stretch of the random stream).
        """
        rng = np.random.default_rng(seed)
        if self.trace is not None:
            frame = self.trace.sort_values("arrival_time", kind="stable")
            start = float(frame["arrival_time"].min())
            frame = frame.iloc[:limit] if limit is not None else frame
            return (
                frame["arrival_time"].to_numpy(dtype=float) - start,
                np.round(frame["input_tokens"].to_numpy(dtype=float)).astype(np.int64),
                np.round(frame["output_tokens"].to_numpy(dtype=float)).astype(np.int64),
            )
        n = int(self.requests) if limit is None else max(min(int(self.requests), int(limit)), 1)
        inputs = _lengths(rng, self.input_tokens, self.input_cv, n, self.length_distribution)
        outputs = _lengths(rng, self.output_tokens, self.output_cv, n, self.length_distribution)
        if self.clients is not None:
            times = np.zeros(n)
        elif self.demand is not None:
            times = _demand_arrivals(rng, self.demand, n)
            inputs, outputs = inputs[: times.size], outputs[: times.size]
        else:
            times = _renewal(rng, self.arrival_rate.m_as("request/s"), self.arrival_cv, n)
        return times, inputs, outputs


def _series(function: str, argument: str, value: Any, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """``(times in s, values)`` from a pair of arrays or quantities, checked finite and of one length."""
    try:
        times, values = value
    except (TypeError, ValueError):
        raise InputError(f"{function}: '{argument}' must be a pair (times, values), got {value!r}") from None
    times = np.asarray(times.m_as("s") if isinstance(times, ureg.Quantity) else times, dtype=float)
    if isinstance(values, ureg.Quantity):
        values = values.m_as(unit) if unit else values.magnitude
    values = np.asarray(values, dtype=float)
    if times.ndim != 1 or times.shape != values.shape or not np.all(np.isfinite(times) & np.isfinite(values)):
        raise InputError(f"{function}: '{argument}' must be two finite 1-D arrays of one length")
    return times - (times[0] if times.size else 0.0), values


#: A coefficient of variation below this draws fixed values: the spread is below one part in a million,
#: and a gamma shape of 1/cv**2 would overflow (or divide by zero) for a CV such as 1e-300.
DETERMINISTIC_CV = 1e-6


def _lengths(rng: np.random.Generator, mean: float, cv: float, n: int, shape: str) -> np.ndarray:
    if cv < DETERMINISTIC_CV:
        return np.full(n, max(round(mean), 1), dtype=np.int64)
    if shape == "gamma":
        k = 1 / cv**2
        values = rng.gamma(k, mean / k, n)
    else:
        sigma2 = math.log1p(cv**2)
        values = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), n)
    return np.maximum(np.round(values), 1).astype(np.int64)


def _renewal(rng: np.random.Generator, rate: float, cv: float, n: int) -> np.ndarray:
    if cv < DETERMINISTIC_CV:
        gaps = np.full(n, 1 / rate)
    elif cv == 1:
        gaps = rng.exponential(1 / rate, n)
    else:
        k = 1 / cv**2
        gaps = rng.gamma(k, 1 / (rate * k), n)
    return np.cumsum(gaps) - gaps[0]


def _demand_arrivals(rng: np.random.Generator, demand: Any, n: int) -> np.ndarray:
    """Non-homogeneous Poisson arrivals over a piecewise-linear demand curve (thinning), at most ``n``."""
    times, rates = demand
    area = np.concatenate([[0.0], np.cumsum((rates[1:] + rates[:-1]) / 2 * np.diff(times))])
    expected = float(area[-1])  # requests the curve asks
    end = _demand_horizon(times, rates, area, n + 6 * math.sqrt(n) + 10)
    inside = times <= end
    peak = float(max(rates[inside].max(), np.interp(end, times, rates)))
    count = rng.poisson(min(peak * (end - times[0]), 50.0 * MAX_REQUESTS))
    candidates = np.sort(rng.uniform(times[0], end, count))
    keep = rng.uniform(0, peak, count) < np.interp(candidates, times, rates)
    arrivals = candidates[keep][:n] - times[0]
    if arrivals.size == 0:
        raise InputError(f"Traffic: the demand curve yields no arrivals (expected {expected:.3g} requests)")
    return arrivals


def _demand_horizon(times: np.ndarray, rates: np.ndarray, area: np.ndarray, wanted: float) -> float:
    """The time by which the curve has asked for ``wanted`` requests (its end when it asks for fewer).

    Only the first ``n`` arrivals are kept: drawing candidates up to where the curve has asked for ``n`` plus six
    standard deviations bounds the work by the requests kept, not by the curve's length.
    """
    if area[-1] <= wanted:
        return float(times[-1])
    k = int(np.searchsorted(area, wanted))  # area[k - 1] < wanted <= area[k]
    lo, hi = float(times[k - 1]), float(times[k])
    r0, r1 = float(rates[k - 1]), float(rates[k])
    for _ in range(60):  # bisection: the area grows monotonically inside the segment
        mid = (lo + hi) / 2
        rate = r0 + (r1 - r0) * (mid - times[k - 1]) / (times[k] - times[k - 1])
        if area[k - 1] + (r0 + rate) / 2 * (mid - times[k - 1]) < wanted:
            lo = mid
        else:
            hi = mid
    return hi
