"""Request-level simulation of continuous-batching replicas behind a router (issue 12).

The fleet sizer answers with closed forms; this module checks its answers by simulating every
request. Each replica runs the continuous-batching scheduler of :mod:`calculator.performance`
(an iteration-level loop: a token budget per iteration, chunked prefill where the engine chunks,
prefill mixed into decoding or run alone, admission by free KV cache and a sequence cap, and
preemption with recompute when the cache runs out); every iteration is priced by
:func:`calculator.performance.iteration_seconds`, read from tables of that function (exact in the
decode count, within 1 % in context length, interpolated in the prefill tokens). A router spreads
the requests over the replicas with one of the policies of :mod:`calculator.routing`.

Traffic is open loop (Poisson, gamma renewal with a coefficient of variation, a trace, or a demand
curve with a replica schedule from :mod:`calculator.autoscaling`) or closed loop (``clients``
sending their next request when the last one completes, as a serving benchmark does). Results are a
per-request DataFrame and a summary with confidence intervals over seeds; seeds run in parallel
through any :class:`concurrent.futures.Executor`.

:func:`verify_plan` simulates a :class:`~calculator.fleet.FleetPlan` and searches the smallest
replica count that meets its targets in simulation. ``docs/simulation.md`` states the design, the
scheduler assumptions and the validation against queueing theory and the benchmark model.
"""

from __future__ import annotations

import heapq
import math
import os
import time as _time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..results import Result
from ..types import Time
from ..units import Q_, ureg

if TYPE_CHECKING:
    from ..fleet import FleetPlan
    from ..performance import StepArrays

__all__ = [
    "ROUTERS",
    "DEFAULT_ROUTER",
    "SimulationSetup",
    "Traffic",
    "SimulationResult",
    "PlanVerification",
    "default_requests",
    "plan_setup",
    "simulate_plan",
    "verify_plan",
    "router_name",
    "simulate",
]

#: Router policies, by the names of :data:`calculator.routing.SIMULATED_POLICIES`, and their aliases.
ROUTERS = {
    "round_robin": "round_robin",
    "random": "random",
    "least_connections": "least_connections",
    "join_shortest_queue": "least_connections",
    "jsq": "least_connections",
    "least_work": "least_work",
    "least_outstanding_tokens": "least_work",
    "two_choices": "two_choices",
    "power_of_two": "two_choices",
}
#: The router the sizer and the simulator assume unless told: round robin, the default of common
#: HTTP load balancers (NGINX upstreams, Envoy clusters, Kubernetes IPVS).
DEFAULT_ROUTER = "round_robin"

#: Requests one simulation may hold, and wall-clock seconds one seed may run, unless told.
MAX_REQUESTS = 2_000_000
TIME_LIMIT = 120.0

_CTX_RATIO = 1.01  # context-length bins of the decode table
_PREFILL_RATIO = 1.08  # prefill-token grid of the mixed-iteration table (interpolated)
_PRIOR_RATIO = 1.05  # cached-prefix bins of the mixed-iteration table
_N_RATIO = 1.12  # decode-count bins of the mixed-iteration table (the prefill increment varies slowly)


def router_name(router: str) -> str:
    """The canonical name of a router policy (``"join_shortest_queue"`` is ``"least_connections"``)."""
    key = str(router).lower().replace("-", "_").replace(" ", "_")
    if key not in ROUTERS:
        raise InputError(f"argument 'router' must be one of {', '.join(sorted(ROUTERS))}, got {router!r}")
    return ROUTERS[key]


# --------------------------------------------------------------------------------------------
# Inputs


def _time_seconds(function: str, name: str, value: Any) -> float:
    """A finite positive time in seconds, or an InputError naming ``function`` and ``name``."""
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
        raise InputError(f"{function}: argument '{name}' must be a time such as Q_(200, 'ms'), got {value!r}")
    seconds = float(value.m_as("s"))
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"{function}: argument '{name}' must be a finite time > 0, got {value!r}")
    return seconds


@dataclass(frozen=True, repr=False)
class SimulationSetup(Result):
    """What runs on every replica: the model, the hardware, the engine and its limits.

    Attributes
    ----------
    model, accelerator, precision : str
        Registry ids (or aliases) and the weight precision.
    tensor_parallel : int
        Devices per replica.
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
    registry_files : tuple of str
        Registry files of your own (``load_registry(extra=...)``) the ids resolve in, besides the
        packaged one (files, not a registry object, so worker processes can load them too).
    """

    model: str
    accelerator: str
    precision: str
    tensor_parallel: int = 1
    engine: str | None = None
    kv_precision: str | None = None
    max_num_seqs: int | None = None
    max_num_tokens: int | None = None
    step_scale: float = 1.0
    step_time: Any = None
    registry_files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not int(self.tensor_parallel) >= 1:
            raise InputError(f"SimulationSetup: 'tensor_parallel' must be >= 1, got {self.tensor_parallel!r}")
        for name in ("max_num_seqs", "max_num_tokens"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | np.integer) and value >= 1):
                raise InputError(f"SimulationSetup: '{name}' must be a whole number >= 1, got {value!r}")
        if not (math.isfinite(self.step_scale) and self.step_scale > 0):
            raise InputError(f"SimulationSetup: 'step_scale' must be > 0, got {self.step_scale!r}")
        if self.step_time is not None:
            _time_seconds("SimulationSetup", "step_time", self.step_time)


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
    """

    arrival_rate: Any = None
    input_tokens: float = 1.0
    output_tokens: float = 1.0
    input_cv: float = 0.0
    output_cv: float = 0.0
    arrival_cv: float = 1.0
    length_distribution: str = "lognormal"
    requests: int = 10_000
    clients: int | None = None
    trace: Any = None
    demand: Any = None
    replica_schedule: Any = None

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
        if self.clients is not None and not (isinstance(self.clients, int | np.integer) and self.clients >= 1):
            raise InputError(f"{name}: 'clients' must be a whole number >= 1, got {self.clients!r}")
        if self.demand is not None:
            times, rates = _series(name, "demand", self.demand, "request/s")
            if times.size < 2 or np.any(np.diff(times) <= 0):
                raise InputError(f"{name}: 'demand' needs at least two points with increasing times")
            if np.any(rates < 0) or not rates.max() > 0:
                raise InputError(f"{name}: 'demand' rates must be >= 0 request/s and not all zero")
            object.__setattr__(self, "demand", (times, rates))
        if self.replica_schedule is not None:
            schedule = self.replica_schedule
            if hasattr(schedule, "ready") and hasattr(schedule, "times"):  # an autoscaling ScalingPlan
                schedule = (schedule.times, schedule.ready)
            times, ready = _series(name, "replica_schedule", schedule, "")
            if times.size == 0 or np.any(np.diff(times) < 0) or not np.all(ready >= 0):
                raise InputError(
                    f"{name}: 'replica_schedule' needs sorted times and replica counts >= 0, got {len(times)} points"
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
        from ..fleet._common import _read_trace

        frame = _read_trace(trace, ("arrival_time", "input_tokens", "output_tokens"))
        if len(frame) > MAX_REQUESTS:
            raise InputError(f"Traffic.from_trace(): the trace has {len(frame)} requests, more than {MAX_REQUESTS}")
        values = frame[["arrival_time", "input_tokens", "output_tokens"]].to_numpy(dtype=float)
        if not np.all(np.isfinite(values)) or np.any(values[:, 0] < 0) or np.any(values[:, 1:] < 1):
            raise InputError(
                "Traffic.from_trace(): arrival times must be finite and >= 0 s, and lengths finite and >= 1 token"
            )
        table = frame[["arrival_time", "input_tokens", "output_tokens"]].reset_index(drop=True)
        return cls(
            trace=table,
            input_tokens=float(values[:, 1].mean()),
            output_tokens=float(values[:, 2].mean()),
            requests=len(frame),
        ).replace(**changes)

    def replace(self, **changes: Any) -> Traffic:
        """A copy with some fields changed (checked again)."""
        import dataclasses

        return dataclasses.replace(self, **changes)

    def draw(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(arrival times in s, prompt lengths, output lengths)`` for one seed (closed loop: times 0)."""
        rng = np.random.default_rng(seed)
        if self.trace is not None:
            frame = self.trace.sort_values("arrival_time", kind="stable")
            return (
                frame["arrival_time"].to_numpy(dtype=float) - float(frame["arrival_time"].min()),
                np.round(frame["input_tokens"].to_numpy(dtype=float)).astype(np.int64),
                np.round(frame["output_tokens"].to_numpy(dtype=float)).astype(np.int64),
            )
        n = int(self.requests)
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


def _lengths(rng: np.random.Generator, mean: float, cv: float, n: int, shape: str) -> np.ndarray:
    if cv == 0:
        return np.full(n, max(round(mean), 1), dtype=np.int64)
    if shape == "gamma":
        k = 1 / cv**2
        values = rng.gamma(k, mean / k, n)
    else:
        sigma2 = math.log1p(cv**2)
        values = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), n)
    return np.maximum(np.round(values), 1).astype(np.int64)


def _renewal(rng: np.random.Generator, rate: float, cv: float, n: int) -> np.ndarray:
    if cv == 0:
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
    peak = float(rates.max())
    span = float(times[-1] - times[0])
    expected = float(np.sum((rates[1:] + rates[:-1]) / 2 * np.diff(times)))  # requests the curve asks
    count = rng.poisson(min(peak * span, 50.0 * MAX_REQUESTS))
    candidates = np.sort(rng.uniform(times[0], times[-1], count))
    keep = rng.uniform(0, peak, count) < np.interp(candidates, times, rates)
    arrivals = candidates[keep][:n] - times[0]
    if arrivals.size == 0:
        raise InputError(f"Traffic: the demand curve yields no arrivals (expected {expected:.3g} requests)")
    return arrivals


# --------------------------------------------------------------------------------------------
# Iteration times: tables of performance.iteration_seconds


class _FixedStep:
    """Every iteration takes the same time (``SimulationSetup.step_time``)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def decode(self, n: int, context: float) -> float:
        return self.seconds

    def prefill(self, n: int, tokens: float, requests: int, prior: float) -> float:
        return 0.0


class _StepTable:
    """Iteration times of one replica, read from tables of :func:`performance.iteration_seconds`.

    A decode iteration of ``n`` sequences holding ``c`` tokens on average is a row per ``n`` over
    context bins 1 % apart. Prompt tokens add ``iteration_seconds(n, c, P, r, q) -
    iteration_seconds(n, c, 0)``, which under kernel pricing does not depend on ``c`` (decode
    attention is the same on both sides): a table per ``(r, q)`` bin over ``n`` bins and a grid of
    ``P``, interpolated linearly in ``P``. Rows are computed on first use, vectorized.
    """

    def __init__(self, arrays: StepArrays, efficiency: Any, tp: int, max_context: float, max_prefill: float):
        from ..performance import iteration_seconds

        self._price = iteration_seconds
        self.a, self.eff, self.tp = arrays, efficiency, tp
        self._kc = 1 / math.log(_CTX_RATIO)
        self._ctx = np.exp(np.arange(int(math.log(max(max_context, 2.0)) * self._kc) + 3) / self._kc)
        self._rows: dict[int, list[float]] = {}
        self._kp = 1 / math.log(_PREFILL_RATIO)
        self._p = np.exp(np.arange(int(math.log(max(max_prefill, 2.0)) * self._kp) + 3) / self._kp)
        self._kq = 1 / math.log(_PRIOR_RATIO)
        self._kn = 1 / math.log(_N_RATIO)
        self._n_of_bin: list[float] = []
        self._mixed: dict[tuple[int, int], list[list[float]]] = {}

    def decode(self, n: int, context: float) -> float:
        row = self._rows.get(n)
        if row is None:
            row = self._price(self.a, self.eff, self.tp, n, self._ctx).tolist()
            self._rows[n] = row
        k = int(math.log(context) * self._kc + 0.5) if context >= 1 else 0
        return row[k] if k < len(row) else row[-1] * context / self._ctx[-1]

    def _n_bin(self, n: int) -> int:
        return 0 if n <= 0 else (n if n <= 8 else 8 + int(math.log(n / 8) * self._kn + 0.5))

    def _bin_n(self, k: int) -> float:
        return float(k) if k <= 8 else 8 * math.exp((k - 8) / self._kn)

    def prefill(self, n: int, tokens: float, requests: int, prior: float) -> float:
        """What ``tokens`` prompt tokens over ``requests`` requests after ``prior`` cached tokens add."""
        r_bin = requests if requests <= 8 else 8 + int(math.log(requests / 8) * self._kn + 0.5)
        q_bin = 0 if prior < 1 else 1 + int(math.log(prior) * self._kq + 0.5)
        table = self._mixed.get((r_bin, q_bin))
        if table is None:
            table = self._mixed_table(r_bin, q_bin)
        nb = self._n_bin(n)
        if nb >= len(table):
            table = self._extend(table, nb, r_bin, q_bin)
        row = table[nb]
        x = math.log(tokens) * self._kp if tokens >= 1 else 0.0
        i = int(x)
        if i + 1 >= len(row):
            return row[-1] * tokens / self._p[-1]
        f = x - i
        return row[i] + f * (row[i + 1] - row[i])

    def _mixed_table(self, r_bin: int, q_bin: int) -> list[list[float]]:
        table: list[list[float]] = []
        self._mixed[r_bin, q_bin] = table
        return self._extend(table, 16, r_bin, q_bin)

    def _extend(self, table: list[list[float]], upto: int, r_bin: int, q_bin: int) -> list[list[float]]:
        requests = self._bin_n(r_bin)
        prior = 0.0 if q_bin == 0 else math.exp((q_bin - 1) / self._kq)
        bins = np.arange(len(table), upto + 1)
        n = np.array([self._bin_n(int(k)) for k in bins])[:, None]
        p = np.maximum(self._p[None, :], requests)
        ref = 1024.0
        with_prompt = self._price(self.a, self.eff, self.tp, n, ref, p, requests, prior)
        without = self._price(self.a, self.eff, self.tp, n, ref)
        table.extend(np.maximum(with_prompt - without, 0.0).tolist())
        return table


# --------------------------------------------------------------------------------------------
# One seed


_WAIT, _PREFILL, _DECODE, _DONE, _DROPPED = 0, 1, 2, 3, 4


class _Replica:
    __slots__ = (
        "arrivals",
        "arrived",
        "arrived_at_start",
        "batch",
        "busy",
        "dec_kv",
        "decode_count",
        "decoded",
        "ends",
        "finish_heap",
        "in_iteration",
        "index",
        "kv",
        "n",
        "outstanding",
        "outstanding_tokens",
        "pf_kv",
        "population",
        "prefilling",
        "reserved",
        "running",
        "scheduled",
        "starts",
        "waiting",
    )

    def __init__(self, index: int):
        self.index = index
        self.busy = 0.0
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}  # admission order (preemption takes the last)
        self.prefilling: list[int] = []
        self.n = 0  # decoding sequences
        self.dec_kv = 0.0  # KV tokens of the decoding sequences
        self.pf_kv = 0.0  # KV tokens of the partly prefilled ones
        self.reserved = 0.0  # KV the admission policy has promised the running requests
        self.decode_count = 0  # decode iterations run (a decoding request advances one token in each)
        self.finish_heap: list[tuple[int, int]] = []
        self.ends: list[float] = []  # iteration end times
        self.decoded: list[bool] = []  # whether the iteration emitted decode tokens
        self.kv: list[float] = []  # KV tokens in use during the iteration
        self.batch: list[int] = []  # sequences running during the iteration
        self.outstanding = 0
        self.outstanding_tokens = 0
        self.in_iteration = False
        self.scheduled: list[tuple[int, int]] = []  # (request, chunk) of the iteration under way
        self.starts: list[float] = []  # iteration start times
        self.population: list[int] = []  # requests in the replica when the iteration starts
        self.arrived = 0  # requests routed here so far
        self.arrived_at_start = 0
        self.arrivals: list[int] = []  # requests routed here during the iteration


@dataclass
class _Run:
    """Everything one seed needs (plain values, picklable for a process pool)."""

    setup: SimulationSetup
    traffic: Traffic
    replicas: int
    router: str
    seed: int
    time_limit: float


def _limits(setup: SimulationSetup) -> tuple[StepArrays, Any, int, int, float]:
    from ..performance import _tp, engine_profile, kv_capacity_tokens, step_arrays
    from ..registry import load_registry

    registry = load_registry(extra=setup.registry_files)
    _tp(registry.model(setup.model), setup.tensor_parallel, "simulate")
    a = step_arrays(setup.model, setup.accelerator, setup.precision, setup.kv_precision, registry=registry)
    profile = engine_profile(setup.engine)
    budget, seqs = profile.limits(a.memory, a.accelerator)
    budget = int(setup.max_num_tokens or budget)
    seqs = int(setup.max_num_seqs or seqs)
    capacity = float(kv_capacity_tokens(a, profile, setup.tensor_parallel))
    return a, profile, budget, seqs, capacity


def _simulate_seed(run: _Run, progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Simulate one seed; returns per-request arrays and per-replica series."""
    setup, traffic = run.setup, run.traffic
    a, profile, budget, max_seqs, capacity = _limits(setup)
    if capacity < 1:
        raise InputError(
            f"simulate(): the weights of {setup.model} at {setup.precision} leave no KV cache on "
            f"{setup.tensor_parallel} x {setup.accelerator} under the {profile.name} engine's memory policy"
        )
    eff = profile.efficiency_for(a.accelerator)
    arrival, prompt, output = traffic.draw(run.seed)
    total = arrival.size
    overhead = profile.request_overhead.m_as("s")
    scale = setup.step_scale
    chunked, mixed, reservation = profile.chunked_prefill, profile.mixed_batching, profile.output_reservation
    if setup.step_time is not None:
        table: Any = _FixedStep(setup.step_time.m_as("s"))
    else:
        table = _StepTable(
            a, eff, int(setup.tensor_parallel), float((prompt + output).max()) + 1, float(max(budget, prompt.max()))
        )
    prompt_l = prompt.tolist()
    output_l = output.tolist()

    # Per-request state.
    state = [_WAIT] * total
    todo = prompt_l[:]  # prompt tokens still to prefill (prompt plus generated after a preemption)
    filled = [0] * total  # prefilled tokens (KV held while prefilling)
    need = [0.0] * total  # KV the admission reserved
    join = [0] * total  # decode_count when the request started decoding
    base = [0] * total  # KV held when it started decoding
    remaining = output_l[:]  # tokens still to emit
    first = [math.nan] * total
    finish = [math.nan] * total
    started = [math.nan] * total  # first scheduled
    replica_of = [-1] * total
    stall = [0.0] * total
    last_token = [0.0] * total
    preempted = [0] * total

    # Arrivals at the engine (after the request overhead); closed loop releases them as clients free up.
    closed = traffic.clients is not None
    if closed:
        clients = min(int(traffic.clients or 0), total)
        pending = deque(range(clients, total))
        sent = [math.nan] * total
        for i in range(clients):
            sent[i] = 0.0
        events: list[tuple[float, int]] = [(overhead, i) for i in range(clients)]
        heapq.heapify(events)
    else:
        sent = arrival.tolist()
        events = []
        pending = deque()
    next_arrival = 0  # open loop: index of the next arrival

    schedule = traffic.replica_schedule
    if schedule is not None:
        count = max(int(schedule[1].max()), 1)
        s_times, s_ready = schedule[0].tolist(), schedule[1].tolist()
    else:
        count = run.replicas
    reps = [_Replica(i) for i in range(count)]
    rng = np.random.default_rng(run.seed + 7_919)
    router = run.router
    rr = 0
    iterations: list[tuple[float, int]] = []  # heap of (end time, replica)
    # Round robin and random dispatch of an open-loop stream do not depend on the replicas' state:
    # route every request up front, so each replica knows when its own next request lands.
    preroute = not closed and schedule is None and router in ("round_robin", "random")
    if preroute:
        targets = np.arange(total) % count if router == "round_robin" else rng.integers(count, size=total)
        routed = targets.tolist()
        own_arrivals = [[*(arrival[targets == r] + overhead).tolist(), math.inf] for r in range(count)]
        own_next = [0] * count
    too_big = [p + o > capacity for p, o in zip(prompt_l, output_l, strict=True)]
    done = 0
    started_wall = _time.perf_counter()
    truncated = ""
    steps = 0

    def ready_replicas(now: float) -> int:
        if schedule is None:
            return count
        k = int(np.searchsorted(s_times, now, side="right")) - 1
        return s_ready[k] if k >= 0 else s_ready[0]

    def route(req: int, now: float) -> int:
        nonlocal rr
        live = ready_replicas(now)
        if live <= 0:
            live = 1  # no replica ready: the request waits on the first one
        if router == "round_robin":
            target = rr % live
            rr += 1
        elif router == "random":
            target = int(rng.integers(live))
        elif router == "least_connections":
            target = min(range(live), key=lambda k: reps[k].outstanding)
        elif router == "least_work":
            target = min(range(live), key=lambda k: reps[k].outstanding_tokens)
        else:  # two_choices
            x, y = int(rng.integers(live)), int(rng.integers(live))
            target = x if reps[x].outstanding <= reps[y].outstanding else y
        return target

    def start_iteration(rep: _Replica, now: float) -> None:
        """Schedule the next iteration of ``rep`` at ``now`` (if it has work) and push its end."""
        waiting, running = rep.waiting, rep.running
        # Prefill-first (no mixing): a prefill batch runs alone when a prompt can be scheduled.
        prefill_only = not mixed and bool(
            rep.prefilling or (waiting and len(running) < max_seqs and _admissible(rep, waiting[0]))
        )
        if not prefill_only:
            # Decodes first: each needs one more KV slot; preempt the latest admitted until they fit.
            while rep.n and rep.dec_kv + rep.pf_kv + rep.n > capacity:
                _preempt(rep, now)
        n = rep.n
        scheduled = rep.scheduled
        scheduled.clear()
        tokens = 0
        pairs = 0.0
        room = budget - n if mixed else (budget if prefill_only else 0)
        # Continue partly prefilled prompts (admission order), then admit waiting ones.
        for req in rep.prefilling:
            if room <= 0:
                break
            chunk = todo[req] if not chunked else min(todo[req], room)
            if not chunked and chunk > room and tokens > 0:
                break
            scheduled.append((req, chunk))
            pairs += chunk * filled[req] + chunk * (chunk + 1) / 2
            tokens += chunk
            room -= chunk
        while waiting and room > 0 and len(running) < max_seqs:
            req = waiting[0]
            if too_big[req]:
                waiting.popleft()
                state[req] = _DROPPED
                rep.outstanding -= 1
                rep.outstanding_tokens -= prompt_l[req] + output_l[req]
                release(req, now)
                continue
            if not _admissible(rep, req):
                break
            chunk = todo[req] if not chunked else min(todo[req], room)
            if not chunked and chunk > room and tokens > 0:
                break
            waiting.popleft()
            running[req] = None
            rep.prefilling.append(req)
            state[req] = _PREFILL
            need[req] = todo[req] + reservation * remaining[req]
            rep.reserved += need[req]
            if started[req] != started[req]:
                started[req] = now
            scheduled.append((req, chunk))
            pairs += chunk * chunk / 2 + chunk / 2
            tokens += chunk
            room -= chunk
        decodes = 0 if prefill_only else n
        if decodes == 0 and tokens == 0:
            rep.in_iteration = False
            return
        for req, chunk in scheduled:
            filled[req] += chunk
            rep.pf_kv += chunk
        if decodes:
            rep.dec_kv += decodes
        r = len(scheduled)
        t = table.decode(decodes, rep.dec_kv / decodes if decodes else 0.0)
        if tokens:
            prior = max((pairs - tokens * (tokens / r + 1) / 2) / tokens, 0.0)
            t += table.prefill(decodes, tokens, r, prior)
        t *= scale
        end = now + t
        rep.busy += t
        rep.in_iteration = True
        rep.ends.append(end)
        rep.starts.append(now)
        rep.population.append(len(running) + len(waiting))
        rep.arrived_at_start = rep.arrived
        rep.decoded.append(decodes > 0)
        rep.kv.append(rep.dec_kv + rep.pf_kv)
        rep.batch.append(len(running))
        heapq.heappush(iterations, (end, rep.index))

    def _admissible(rep: _Replica, req: int) -> bool:
        want = todo[req] + reservation * remaining[req]
        used = rep.dec_kv + rep.pf_kv
        return max(rep.reserved, used) + want <= capacity or not rep.running

    def _preempt(rep: _Replica, now: float) -> None:
        req, _ = rep.running.popitem()
        rep.reserved -= need[req]
        if state[req] == _DECODE:
            emitted = rep.decode_count - join[req]
            rep.dec_kv -= base[req] + emitted
            rep.n -= 1
            remaining[req] -= emitted
            last_token[req] = now
            todo[req] = prompt_l[req] + output_l[req] - remaining[req]  # recompute prompt and output so far
        else:
            rep.prefilling.remove(req)
            rep.pf_kv -= filled[req]
            todo[req] += filled[req]
        filled[req] = 0
        state[req] = _WAIT
        preempted[req] += 1
        rep.waiting.appendleft(req)

    def release(req: int, now: float) -> None:
        """A request left the system: in closed loop its client sends the next one."""
        nonlocal done
        done += 1
        if closed and pending:
            nxt = pending.popleft()
            sent[nxt] = now
            heapq.heappush(events, (now + overhead, nxt))

    def end_iteration(rep: _Replica, now: float) -> None:
        k = len(rep.ends) - 1
        rep.arrivals.append(rep.arrived - rep.arrived_at_start)
        if rep.decoded[k]:
            rep.decode_count += 1
            heap = rep.finish_heap
            while heap and heap[0][0] <= rep.decode_count:
                _, req = heapq.heappop(heap)
                if state[req] != _DECODE or join[req] + remaining[req] != rep.decode_count:
                    continue  # preempted since (a stale entry)
                held = base[req] + remaining[req]
                rep.dec_kv -= held
                rep.n -= 1
                rep.reserved -= need[req]
                del rep.running[req]
                state[req] = _DONE
                remaining[req] = 0
                finish[req] = now
                rep.outstanding -= 1
                rep.outstanding_tokens -= prompt_l[req] + output_l[req]
                release(req, now)
        for req, _chunk in rep.scheduled:
            todo[req] -= _chunk
            if todo[req] > 0 or state[req] != _PREFILL:
                continue
            # Prompt done: the iteration's end emits a token.
            rep.prefilling.remove(req)
            rep.pf_kv -= filled[req]
            if first[req] != first[req]:
                first[req] = now
                remaining[req] -= 1
            else:
                stall[req] = max(stall[req], now - last_token[req])
                remaining[req] -= 1
            if remaining[req] <= 0:
                del rep.running[req]
                rep.reserved -= need[req]
                state[req] = _DONE
                finish[req] = now
                rep.outstanding -= 1
                rep.outstanding_tokens -= prompt_l[req] + output_l[req]
                release(req, now)
                continue
            state[req] = _DECODE
            base[req] = filled[req]
            join[req] = rep.decode_count
            rep.dec_kv += filled[req]
            rep.n += 1
            heapq.heappush(rep.finish_heap, (rep.decode_count + remaining[req], req))
        rep.scheduled.clear()

    def fast_forward(rep: _Replica, now: float, horizon: float) -> tuple[float, int]:
        """Run plain decode iterations inline while nothing can change the replica's state.

        Only the running decodes, no prompt waiting: up to (not including) the iteration in which
        a request finishes, the KV cache would need a preemption, or the next arrival could land
        (that iteration and everything after go through the event loop). Returns the new time and
        the iterations run.
        """
        n = rep.n
        heap = rep.finish_heap
        limit = (heap[0][0] if heap else rep.decode_count + 1) - rep.decode_count - 1
        limit = min(limit, int((capacity - rep.dec_kv - rep.pf_kv) // n) - 1)
        if limit <= 0:
            return now, 0
        running = len(rep.running)
        decode = table.decode
        ends, starts, kv = rep.ends, rep.starts, rep.kv
        dec_kv, pf_kv, busy = rep.dec_kv, rep.pf_kv, rep.busy
        done_here = 0
        while done_here < limit:
            t = decode(n, (dec_kv + n) / n) * scale
            end = now + t
            if end >= horizon:
                break
            dec_kv += n
            starts.append(now)
            ends.append(end)
            kv.append(dec_kv + pf_kv)
            busy += t
            now = end
            done_here += 1
        if done_here:
            rep.dec_kv, rep.busy = dec_kv, busy
            rep.decode_count += done_here
            rep.decoded.extend([True] * done_here)
            rep.batch.extend([running] * done_here)
            rep.population.extend([running] * done_here)
            rep.arrivals.extend([0] * done_here)
        return now, done_here

    inf = math.inf
    checked = 0
    while True:
        if closed:
            t_arrival = events[0][0] if events else inf
        else:
            t_arrival = arrival[next_arrival] + overhead if next_arrival < total else inf
        t_iter = iterations[0][0] if iterations else inf
        if t_arrival == inf and t_iter == inf:
            break
        if t_arrival <= t_iter:
            if closed:
                now, req = heapq.heappop(events)
            else:
                now, req = t_arrival, next_arrival
                next_arrival += 1
            if preroute:
                target = routed[req]
                own_next[target] += 1
            else:
                target = route(req, now)
            rep = reps[target]
            replica_of[req] = target
            rep.outstanding += 1
            rep.outstanding_tokens += prompt_l[req] + output_l[req]
            rep.arrived += 1
            rep.waiting.append(req)
            if not rep.in_iteration:
                start_iteration(rep, now)
        else:
            now, index = heapq.heappop(iterations)
            rep = reps[index]
            end_iteration(rep, now)
            if rep.n and not rep.waiting and not rep.prefilling:
                if preroute:
                    horizon = own_arrivals[index][own_next[index]]
                elif closed:
                    horizon = events[0][0] if events else inf
                else:
                    horizon = arrival[next_arrival] + overhead if next_arrival < total else inf
                now, inline = fast_forward(rep, now, horizon)
                steps += inline
            start_iteration(rep, now)
            steps += 1
            if steps & 4095 == 0 or steps - checked > 4096:
                checked = steps
                if _time.perf_counter() - started_wall > run.time_limit:
                    truncated = f"stopped after {run.time_limit:g} s of wall clock (time_limit)"
                    break
                if progress is not None:
                    progress(done / total)
    if progress is not None:
        progress(1.0)
    unfinished = sum(1 for s in state if s not in (_DONE, _DROPPED))
    if unfinished and not truncated:
        truncated = f"{unfinished} requests never finished (the scheduler could not admit them)"
    return {
        "sent": np.array(sent),
        "arrival": np.array(sent) + overhead,
        "prompt": prompt,
        "output": output,
        "first": np.array(first),
        "finish": np.array(finish),
        "started": np.array(started),
        "replica": np.array(replica_of),
        "stall": np.array(stall),
        "preemptions": np.array(preempted),
        "dropped": np.array([s == _DROPPED for s in state]),
        "ends": [np.array(r.ends) for r in reps],
        "decoded": [np.array(r.decoded, dtype=bool) for r in reps],
        "kv": [np.array(r.kv) for r in reps],
        "batch": [np.array(r.batch) for r in reps],
        "busy": np.array([r.busy for r in reps]),
        "in_system": [np.array(r.population[: len(r.arrivals)]) + np.array(r.arrivals) / 2 for r in reps],
        "starts": [np.array(r.starts[: len(r.arrivals)]) for r in reps],
        "capacity": capacity,
        "truncated": truncated,
    }


# --------------------------------------------------------------------------------------------
# Results


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(values[lo:hi + 1])`` per pair (``-inf`` where the range is empty), by a sparse table."""
    out = np.full(lo.shape, -np.inf)
    ok = (hi >= lo) & (lo >= 0) & (hi < values.size)
    if values.size == 0 or not ok.any():
        return out
    levels = [values]
    while 2 ** len(levels) <= values.size:
        prev, step = levels[-1], 2 ** (len(levels) - 1)
        levels.append(np.maximum(prev[:-step], prev[step:]))
    lo_ok, hi_ok = lo[ok], hi[ok]
    span = hi_ok - lo_ok + 1
    level = np.floor(np.log2(span)).astype(int)
    result = np.empty(lo_ok.size)
    for k in np.unique(level):
        m = level == k
        table = levels[k]
        result[m] = np.maximum(table[lo_ok[m]], table[hi_ok[m] - 2**k + 1])
    out[ok] = result
    return out


def _frame(raw: dict[str, Any], seed: int, warmup: float, cooldown: float) -> Any:
    """The per-request DataFrame of one seed."""
    import pandas as pd

    n = raw["sent"].size
    first, finish, replica = raw["first"], raw["finish"], raw["replica"]
    gap = np.full(n, np.nan)
    for r, (ends, decoded) in enumerate(zip(raw["ends"], raw["decoded"], strict=True)):
        mine = np.flatnonzero((replica == r) & np.isfinite(finish) & (raw["output"] > 1))
        if mine.size == 0:
            continue
        emits = ends[decoded]
        k0 = np.searchsorted(emits, first[mine], side="right")
        k1 = np.searchsorted(emits, finish[mine], side="right") - 1
        lead = np.where(k0 < emits.size, emits[np.minimum(k0, emits.size - 1)] - first[mine], 0.0)
        inner = _range_max(np.diff(emits), k0, k1 - 1)
        gap[mine] = np.maximum(np.maximum(lead, inner), raw["stall"][mine])
    order = np.argsort(raw["sent"], kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    measured = (rank >= math.floor(warmup * n)) & (rank < n - math.floor(cooldown * n))
    outputs = raw["output"]
    ttft = first - raw["sent"]
    tpot = np.where(outputs > 1, (finish - first) / np.maximum(outputs - 1, 1), np.nan)
    return pd.DataFrame(
        {
            "seed": seed,
            "request": np.arange(n),
            "replica": replica,
            "arrival": raw["sent"],
            "input_tokens": raw["prompt"],
            "output_tokens": outputs,
            "first_token": first,
            "finish": finish,
            "ttft": ttft,
            "tpot": tpot,
            "token_gap": gap,
            "e2e": finish - raw["sent"],
            "queue_wait": raw["started"] - raw["arrival"],
            "preemptions": raw["preemptions"],
            "dropped": raw["dropped"],
            "measured": measured & np.isfinite(finish),
        }
    )


def _replica_series(raw: dict[str, Any], seed: int, points: int = 2000) -> tuple[Any, np.ndarray]:
    """KV occupancy and running batch over time (at most ``points`` per replica) and utilization."""
    import pandas as pd

    frames = []
    start = float(np.nanmin(raw["sent"])) if raw["sent"].size else 0.0
    end = float(np.nanmax(raw["finish"])) if np.isfinite(raw["finish"]).any() else start
    span = max(end - start, 1e-12)
    for r, (ends, kv, batch) in enumerate(zip(raw["ends"], raw["kv"], raw["batch"], strict=True)):
        if ends.size == 0:
            continue
        pick = np.unique(np.linspace(0, ends.size - 1, min(points, ends.size)).astype(int))
        frames.append(
            pd.DataFrame(
                {
                    "seed": seed,
                    "replica": r,
                    "time": ends[pick],
                    "kv_occupancy": kv[pick] / raw["capacity"],
                    "running": batch[pick],
                }
            )
        )
    series = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return series, raw["busy"] / span


#: The statistics of the summary, by metric.
STATISTICS = ("mean", "p50", "p90", "p95", "p99")
METRICS = ("ttft", "tpot", "token_gap", "e2e", "queue_wait")


def _interval(samples: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval of independent estimates."""
    from scipy import stats

    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(samples.mean())
    if samples.size < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, samples.size - 1) * samples.std(ddof=1) / math.sqrt(samples.size))
    return mean, mean - half, mean + half


@dataclass(frozen=True, repr=False)
class SimulationResult(Result):
    """A simulated run: every request, the summary with confidence intervals, and the verdict.

    Attributes
    ----------
    requests : DataFrame
        One row per request and seed: ``arrival``, ``first_token``, ``finish`` (s from the start),
        ``ttft``, ``tpot`` (NaN for one-token outputs), ``token_gap`` (longest gap between streamed
        tokens), ``e2e``, ``queue_wait`` (arrival at the engine to first scheduled), ``replica``,
        ``preemptions``, ``dropped`` and ``measured`` (inside the warm-up/cool-down window).
    summary : DataFrame
        Rows ``metric`` x ``statistic`` (mean, p50-p99) with ``value`` (s) and a 95 % interval:
        over seeds when there are several, over ten consecutive batches of requests otherwise.
    attainment : dict
        Share of measured requests meeting each target given (``ttft``, ``tpot``, ``token_gap``)
        and all of them (``all``).
    goodput : Quantity [request / time]
        Measured requests meeting every target, per second of the measured window.
    throughput : Quantity [request / time]
        Measured requests completed per second of the measured window.
    utilization : ndarray
        Busy fraction of each replica (mean over seeds).
    occupancy : DataFrame
        ``seed``, ``replica``, ``time``, ``kv_occupancy`` (fraction of the KV cache) and ``running``.
    in_flight, littles_law : float
        Time-average requests in the engines (from the replicas' iterations) and arrival rate x
        mean time in the engine (from the requests): Little's law says they agree.
    meets_targets : bool or None
        Whether the run meets every target given at its percentile (``None`` without targets).
    verdict : str
        The targets checked and the values reached, or why the run is not trustworthy.
    stable : bool
        False when the backlog grows through the run (the offered load exceeds what it serves).
    truncated : str
        Why the run stopped early ("" when it ran to the end).
    dropped : int
        Requests refused because they can never fit the KV cache.
    seeds : tuple of int
    replicas : int
    router : str
    """

    requests: Any = field(repr=False)
    summary: Any = field(repr=False)
    attainment: dict[str, float]
    goodput: Any
    throughput: Any
    utilization: Any
    occupancy: Any = field(repr=False)
    in_flight: float
    littles_law: float
    meets_targets: bool | None
    verdict: str
    stable: bool
    truncated: str
    dropped: int
    seeds: tuple[int, ...]
    replicas: int
    router: str

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain records and the verdict (the per-request frame stays in ``requests``)."""
        return {
            "summary": self.summary.to_dict(orient="records"),
            "attainment": dict(self.attainment),
            "goodput": self.goodput,
            "throughput": self.throughput,
            "utilization": [float(u) for u in np.atleast_1d(self.utilization)],
            "in_flight": self.in_flight,
            "littles_law": self.littles_law,
            "meets_targets": self.meets_targets,
            "verdict": self.verdict,
            "stable": self.stable,
            "truncated": self.truncated,
            "dropped": self.dropped,
            "seeds": list(self.seeds),
            "replicas": self.replicas,
            "router": self.router,
        }

    def value(self, metric: str, statistic: str = "mean") -> Any:
        """One summary value as a quantity (``result.value("ttft", "p99")``)."""
        row = self.summary[(self.summary.metric == metric) & (self.summary.statistic == statistic)]
        if row.empty:
            raise InputError(
                f"SimulationResult.value(): no {metric!r}/{statistic!r}; metrics {METRICS}, statistics {STATISTICS}"
            )
        return Q_(float(row.value.iloc[0]), "s")


def _statistic_name(percentile: float | None) -> str:
    if percentile is None:
        return "mean"
    return f"p{percentile * 100:g}"


def _percentile_value(values: np.ndarray, statistic: str) -> float:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan
    if statistic == "mean":
        return float(values.mean())
    return float(np.quantile(values, float(statistic[1:]) / 100))


def _summarize(
    frames: list[Any],
    series: list[Any],
    utilization: list[np.ndarray],
    raws: list[dict[str, Any]],
    targets: dict[str, tuple[float, str]],
    replicas: int,
    router: str,
    seeds: tuple[int, ...],
) -> SimulationResult:
    import pandas as pd

    requests = pd.concat(frames, ignore_index=True)
    measured = requests[requests.measured]
    rows = []
    extra = sorted({s for _, s in targets.values()} - set(STATISTICS) - {"mean"})
    for metric in METRICS:
        for statistic in (*STATISTICS, *extra):
            # The value pools every seed's measured requests (the verdict reads the same); the
            # interval's half-width comes from the spread of independent estimates: the seeds, or
            # ten consecutive batches of requests when there is one seed.
            values = measured[metric].to_numpy(dtype=float)
            value = _percentile_value(values, statistic)
            if len(frames) >= 2:
                parts = [f.loc[f.measured, metric].to_numpy(dtype=float) for f in frames]
            else:
                parts = np.array_split(values, 10) if values.size >= 20 else [values]
            center, low, high = _interval(np.array([_percentile_value(part, statistic) for part in parts]))
            low, high = value - (center - low), value + (high - center)
            low, high = max(min(low, value), 0.0), max(high, value)  # latencies are >= 0
            rows.append({"metric": metric, "statistic": statistic, "value": value, "low": low, "high": high})
    summary = pd.DataFrame(rows)

    attainment: dict[str, float] = {}
    ok_all = np.ones(len(measured), dtype=bool)
    for metric, (target, _) in targets.items():
        values = measured[metric].to_numpy(dtype=float)
        ok = ~(values > target)  # NaN (one-token outputs have no TPOT) counts as met
        attainment[metric] = float(ok.mean()) if ok.size else math.nan
        ok_all &= ok
    if targets:
        attainment["all"] = float(ok_all.mean()) if ok_all.size else math.nan

    window = 0.0
    completed = 0
    in_flight = 0.0
    little = 0.0
    stable = True
    for frame, raw in zip(frames, raws, strict=True):
        m = frame[frame.measured]
        if len(m) >= 2:
            window += float(m.finish.max() - m.arrival.min())
            completed += len(m)
        # Little's law over the whole run: the replicas' time-average population vs rate x time.
        engine_arrival = raw["arrival"]
        ok = np.isfinite(raw["finish"])
        span = float(np.nanmax(raw["finish"]) - engine_arrival.min()) if ok.any() else 0.0
        if span > 0:
            area = 0.0
            for ends, starts, population in zip(raw["ends"], raw["starts"], raw["in_system"], strict=True):
                area += float(np.sum(population * (ends[: starts.size] - starts)))
            in_flight += area / span / len(frames)
            little += float(np.sum(raw["finish"][ok] - engine_arrival[ok])) / span / len(frames)
        stable &= _stable(raw)
    goodput_count = int(ok_all.sum()) if targets else completed
    throughput = completed / window if window > 0 else math.nan
    goodput = goodput_count / window if window > 0 else math.nan
    occupancy = pd.concat(series, ignore_index=True) if series else pd.DataFrame()
    truncated = "; ".join(sorted({r["truncated"] for r in raws if r["truncated"]}))
    dropped = int(requests.dropped.sum())

    meets = None
    parts = []
    if targets:
        meets = True
        for metric, (target, statistic) in targets.items():
            value = _percentile_value(measured[metric].to_numpy(dtype=float), statistic)
            if math.isnan(value):
                # No value: no request was measured, or none emitted a second token (no TPOT or gap).
                good = len(measured) > 0 and metric != "ttft"
                parts.append(
                    f"{statistic} {metric}: no request emitted a second token"
                    if good
                    else f"{statistic} {metric}: no request was measured"
                )
            else:
                good = bool(value <= target)
                parts.append(f"{statistic} {metric} {value * 1e3:.1f} ms {'<=' if good else '>'} {target * 1e3:.1f} ms")
            meets &= good
    verdict = "; ".join(parts) if parts else "no targets given"
    problems = []
    if truncated:
        problems.append(f"run incomplete: {truncated}")
    if not stable:
        problems.append("the backlog grows through the run: the load exceeds what the replicas serve")
    if dropped:
        problems.append(f"{dropped} requests can never fit the KV cache and were refused")
    if problems:
        meets = False if meets is not None else None
        verdict = "; ".join([*problems, verdict])
    return SimulationResult(
        requests=requests,
        summary=summary,
        attainment=attainment,
        goodput=Q_(goodput, "request/s"),
        throughput=Q_(throughput, "request/s"),
        utilization=np.mean(np.array(utilization), axis=0),
        occupancy=occupancy,
        in_flight=in_flight,
        littles_law=little,
        meets_targets=meets,
        verdict=verdict,
        stable=stable,
        truncated=truncated,
        dropped=dropped,
        seeds=seeds,
        replicas=replicas,
        router=router,
    )


def _stable(raw: dict[str, Any]) -> bool:
    """False when the requests in the system keep growing while arrivals last.

    A stable fleet holds about as many requests at the last arrival as when a fifth of them had
    arrived; an overloaded one holds more and more (starting empty, about five times as many). The
    run is unstable when the count at the end exceeds twice the earlier count plus ten and the
    growth is over 5 % of the arrivals in between.
    """
    arrival = np.sort(raw["arrival"][~raw["dropped"]])
    if arrival.size < 50:
        return True
    finish = raw["finish"][~raw["dropped"]]
    start, end = arrival[arrival.size // 5], arrival[-1]

    def in_system(t: float) -> int:
        return int(np.count_nonzero(arrival <= t) - np.count_nonzero(finish <= t))

    before, after = in_system(start), in_system(end)
    arrived = np.count_nonzero((arrival > start) & (arrival <= end))
    return not (after > 2 * before + 10 and after - before > 0.05 * arrived)


# --------------------------------------------------------------------------------------------
# Entry points


def _seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(seeds, int | np.integer):
        if not 1 <= seeds <= 1000:
            raise InputError(f"simulate(): argument 'seeds' must be a count in [1, 1000] or a list, got {seeds!r}")
        return tuple(range(int(seeds)))
    out = tuple(int(s) for s in seeds)
    if not out:
        raise InputError("simulate(): argument 'seeds' must name at least one seed")
    return out


def _targets(
    ttft_slo: Any, tpot_slo: Any, tbt_slo: Any, ttft_percentile: float | None, tpot_percentile: float | None
) -> dict[str, tuple[float, str]]:
    for name, value in (("ttft_percentile", ttft_percentile), ("tpot_percentile", tpot_percentile)):
        if value is not None and not (isinstance(value, int | float) and 0 < value < 1):
            raise InputError(f"simulate(): argument '{name}' must be in (0, 1), got {value!r}")
    targets = {}
    if ttft_slo is not None:
        targets["ttft"] = (_time_seconds("simulate()", "ttft_slo", ttft_slo), _statistic_name(ttft_percentile))
    if tpot_slo is not None:
        targets["tpot"] = (_time_seconds("simulate()", "tpot_slo", tpot_slo), _statistic_name(tpot_percentile))
    if tbt_slo is not None:
        targets["token_gap"] = (_time_seconds("simulate()", "tbt_slo", tbt_slo), "p99")
    return targets


def simulate(
    setup: SimulationSetup,
    traffic: Traffic,
    *,
    replicas: int = 1,
    router: str = DEFAULT_ROUTER,
    seeds: int | Sequence[int] = 1,
    ttft_slo: Time = None,
    tpot_slo: Time = None,
    tbt_slo: Time = None,
    ttft_percentile: float | None = None,
    tpot_percentile: float | None = None,
    warmup: float = 0.1,
    cooldown: float = 0.05,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    time_limit: float = TIME_LIMIT,
) -> SimulationResult:
    """Simulate ``replicas`` continuous-batching replicas behind a router, request by request.

    Parameters
    ----------
    setup : SimulationSetup
        Model, accelerator, precision, tensor-parallel degree, engine and its limits.
    traffic : Traffic
        Arrivals and lengths (open loop, trace, demand curve, or closed loop with ``clients``).
    replicas : int
        Replicas behind the router (ignored when ``traffic.replica_schedule`` is given).
    router : str
        ``"round_robin"`` (default), ``"random"``, ``"join_shortest_queue"`` (fewest outstanding
        requests), ``"least_outstanding_tokens"`` (fewest prompt plus output tokens assigned and not
        finished) or ``"power_of_two"`` (the less loaded of two random replicas).
    seeds : int or sequence of int
        Independent runs (a count, or the seeds themselves); the summary's intervals are over them.
    ttft_slo, tpot_slo, tbt_slo : Quantity [time], optional
        Targets: TTFT at ``ttft_percentile`` (mean if ``None``), TPOT at ``tpot_percentile`` (mean
        if ``None``), and the p99 of each request's longest token gap.
    warmup, cooldown : float
        Fractions of the requests (by arrival) left out of the summary at the start and the end
        of an open-loop run (the fleet starts empty and drains at the end); closed loop keeps all.
    executor : concurrent.futures.Executor, optional
        Runs the seeds (default: a process pool over this machine's cores when there are several
        seeds; any Executor works, a ``dask.distributed`` client's included).
    progress : callable, optional
        Called with the fraction done, in [0, 1].
    time_limit : float
        Wall-clock seconds a seed may run before it stops and says so (``truncated``).

    Returns
    -------
    SimulationResult

    Examples
    --------
    Llama-3.1-8B at FP8 on one H100 under vLLM, 4 requests/s of 1024/128 tokens:

    >>> from calculator import Q_
    >>> setup = SimulationSetup("llama-3.1-8b", "h100_sxm", "fp8", engine="vllm")
    >>> run = simulate(setup, Traffic(Q_(4, "request/s"), 1024, 128, requests=400), ttft_slo=Q_(1, "s"))
    >>> run.meets_targets, run.stable, run.dropped
    (True, True, 0)
    """
    if not isinstance(setup, SimulationSetup):
        raise InputError(f"simulate(): argument 'setup' must be a SimulationSetup, got {type(setup).__name__}")
    if not isinstance(traffic, Traffic):
        raise InputError(f"simulate(): argument 'traffic' must be a Traffic, got {type(traffic).__name__}")
    if not (isinstance(replicas, int | np.integer) and 1 <= replicas <= 10_000):
        raise InputError(f"simulate(): argument 'replicas' must be a whole number in [1, 10000], got {replicas!r}")
    for name, value in (("warmup", warmup), ("cooldown", cooldown)):
        if not (isinstance(value, int | float) and 0 <= value < 0.5):
            raise InputError(f"simulate(): argument '{name}' must be in [0, 0.5), got {value!r}")
    if not (isinstance(time_limit, int | float) and time_limit > 0):
        raise InputError(f"simulate(): argument 'time_limit' must be > 0 seconds, got {time_limit!r}")
    policy = router_name(router)
    seed_list = _seeds(seeds)
    targets = _targets(ttft_slo, tpot_slo, tbt_slo, ttft_percentile, tpot_percentile)
    if traffic.clients is not None:
        warmup = cooldown = 0.0
    _limits(setup)  # resolve the registry ids here, so bad input fails before any process starts
    runs = [_Run(setup, traffic, int(replicas), policy, seed, float(time_limit)) for seed in seed_list]
    raws = _run_all(runs, executor, progress)
    frames, series, utilization = [], [], []
    for run, raw in zip(runs, raws, strict=True):
        frames.append(_frame(raw, run.seed, warmup, cooldown))
        occupancy, busy = _replica_series(raw, run.seed)
        series.append(occupancy)
        utilization.append(busy)
    count = int(max(np.asarray(traffic.replica_schedule[1]).max(), 1)) if traffic.replica_schedule else replicas
    return _summarize(frames, series, utilization, raws, targets, count, policy, seed_list)


def _process_pool(jobs: int) -> Executor:
    """The default executor: a process pool over this machine's cores (no more workers than jobs)."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=max(1, min(jobs, os.cpu_count() or 1)))


def _run_all(runs: list[_Run], executor: Executor | None, progress: Callable[[float], None] | None) -> list[dict]:
    if len(runs) == 1 and executor is None:
        return [_simulate_seed(runs[0], progress)]
    from concurrent.futures import as_completed

    pool = executor or _process_pool(len(runs))
    try:
        futures = {pool.submit(_simulate_seed, run): k for k, run in enumerate(runs)}
        out: list[dict | None] = [None] * len(runs)
        for done, future in enumerate(as_completed(futures), start=1):
            out[futures[future]] = future.result()
            if progress is not None:
                progress(done / len(runs))
    finally:
        if executor is None:
            pool.shutdown(cancel_futures=True)
    return out  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# Checking a fleet plan


def plan_setup(plan: FleetPlan, step_scale: float = 1.0) -> SimulationSetup:
    """The replica a :class:`~calculator.fleet.FleetPlan` describes (its cap on running sequences included)."""
    targets = plan.targets or {}
    return SimulationSetup(
        model=plan.model,
        accelerator=plan.accelerator,
        precision=plan.precision,
        tensor_parallel=int(plan.tensor_parallel),
        engine=None if plan.engine == "generic" else plan.engine,
        kv_precision=targets.get("kv_precision"),
        max_num_seqs=int(plan.batch),
        max_num_tokens=targets.get("chunk_size"),
        step_scale=step_scale,
        registry_files=tuple(targets.get("registry_files", ())),
    )


def _check_plan(plan: Any, function: str) -> None:
    from ..fleet import FleetPlan

    if not isinstance(plan, FleetPlan):
        raise InputError(f"{function}(): argument 'plan' must be a FleetPlan, got {type(plan).__name__}")
    if not plan.feasible:
        raise InputError(f"{function}(): the plan is infeasible ({plan.reason}); there is nothing to simulate")
    if plan.workload is None or not plan.targets:
        raise InputError(f"{function}(): the plan does not record its workload and targets (make it with size_fleet)")
    if plan.targets.get("speculation") or plan.targets.get("prefix_caching"):
        raise InputError(
            f"{function}(): speculative decoding and prefix caching are not simulated; size the plan without them"
        )


def _check_requests(function: str, requests: Any) -> None:
    if requests is not None and not (isinstance(requests, int | np.integer) and 1 <= requests <= MAX_REQUESTS):
        raise InputError(
            f"{function}(): argument 'requests' must be a whole number in [1, {MAX_REQUESTS}], got {requests!r}"
        )


def default_requests(replicas: int) -> int:
    """Requests a plan check simulates: 2,000 per replica, at least 6,000 and at most 60,000."""
    return int(min(max(2_000 * replicas, 6_000), 60_000))


def simulate_plan(
    plan: FleetPlan,
    *,
    replicas: int | None = None,
    requests: int | None = None,
    seeds: int | Sequence[int] = 2,
    router: str | None = None,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    time_limit: float = TIME_LIMIT,
) -> SimulationResult:
    """Simulate a :class:`~calculator.fleet.FleetPlan` at its (or another) replica count, against its targets.

    The plan's workload drives open-loop arrivals (Poisson, or gamma renewal with its arrival CV;
    log-normal lengths with its CVs); its router unless ``router`` is given; each replica capped at
    the plan's batch. The targets are the plan's: TTFT at its percentile (or mean), mean TPOT,
    and the token-gap bound at p99 when one was given.
    """
    _check_plan(plan, "simulate_plan")
    count = int(replicas if replicas is not None else plan.replicas)
    _check_requests("simulate_plan", requests)
    traffic = Traffic.from_workload(plan.workload, default_requests(count) if requests is None else int(requests))
    targets = plan.targets
    return simulate(
        plan_setup(plan),
        traffic,
        replicas=count,
        router=router or plan.router,
        seeds=seeds,
        ttft_slo=targets["ttft"],
        tpot_slo=targets["tpot"],
        tbt_slo=targets.get("tbt"),
        ttft_percentile=targets.get("ttft_percentile"),
        executor=executor,
        progress=progress,
        time_limit=time_limit,
    )


@dataclass(frozen=True, repr=False)
class PlanVerification(Result):
    """A plan checked by simulation: the analytical replica count and the simulated minimum.

    Attributes
    ----------
    analytical_replicas : int
        The plan's replicas (closed forms).
    simulated_replicas : int or None
        The fewest replicas meeting every target in simulation (None: none up to ``max_replicas``).
    meets_targets : bool
        Whether the plan as sized meets its targets in simulation.
    tight : bool
        Whether one replica less misses a target in simulation.
    table : DataFrame
        Per replica count simulated: the target statistics reached, attainment and the verdict.
    results : dict of int to SimulationResult
        The simulations, by replica count.
    verdict : str
    """

    analytical_replicas: int
    simulated_replicas: int | None
    meets_targets: bool
    tight: bool
    table: Any = field(repr=False)
    results: dict[int, SimulationResult] = field(repr=False)
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        """The replica counts, the table as records and the verdict (the runs stay in ``results``)."""
        return {
            "analytical_replicas": self.analytical_replicas,
            "simulated_replicas": self.simulated_replicas,
            "meets_targets": self.meets_targets,
            "tight": self.tight,
            "table": self.table.to_dict(orient="records"),
            "verdict": self.verdict,
        }


def verify_plan(
    plan: FleetPlan,
    *,
    requests: int | None = None,
    seeds: int | Sequence[int] = 2,
    router: str | None = None,
    max_replicas: int | None = None,
    executor: Executor | None = None,
    progress: Callable[[float], None] | None = None,
    time_limit: float = TIME_LIMIT,
) -> PlanVerification:
    """Simulate a plan and search the smallest replica count that meets its targets in simulation.

    Starts at the plan's replicas; if they meet the targets, tries one fewer until a count misses,
    otherwise one more until a count meets them (up to ``max_replicas``, default twice the plan's
    plus two). Each count runs ``seeds`` seeds of ``requests`` requests (default
    :func:`default_requests`), in parallel through ``executor``.

    Returns
    -------
    PlanVerification
    """
    import pandas as pd

    _check_plan(plan, "verify_plan")
    start = int(plan.replicas)
    _check_requests("verify_plan", requests)
    if max_replicas is not None and not isinstance(max_replicas, int | np.integer):
        raise InputError(f"verify_plan(): argument 'max_replicas' must be a whole number, got {max_replicas!r}")
    limit = int(max_replicas) if max_replicas is not None else 2 * start + 2
    if limit < 1:
        raise InputError(f"verify_plan(): argument 'max_replicas' must be >= 1, got {max_replicas!r}")

    seed_list = _seeds(seeds)
    own = executor is None and len(seed_list) > 1
    pool = _process_pool(len(seed_list)) if own else executor
    results: dict[int, SimulationResult] = {}
    steps = [0]

    def run(count: int) -> bool:
        results[count] = simulate_plan(
            plan,
            replicas=count,
            requests=requests,
            seeds=seed_list,
            router=router,
            executor=pool,
            time_limit=time_limit,
        )
        steps[0] += 1
        if progress is not None:
            progress(min(steps[0] / 4, 0.95))
        return bool(results[count].meets_targets)

    try:
        if run(start):
            count = start
            while count > 1 and run(count - 1):
                count -= 1
            simulated: int | None = count
        else:
            count = start
            simulated = None
            while count < limit:
                count += 1
                if run(count):
                    simulated = count
                    break
    finally:
        if own and pool is not None:
            pool.shutdown(cancel_futures=True)
    if progress is not None:
        progress(1.0)
    rows = []
    targets = plan.targets
    ttft_stat = _statistic_name(targets.get("ttft_percentile"))
    for count, result in sorted(results.items()):
        rows.append(
            {
                "replicas": count,
                f"ttft_{ttft_stat}_ms": result.value("ttft", ttft_stat).m_as("ms"),
                "tpot_mean_ms": result.value("tpot", "mean").m_as("ms"),
                **({} if ttft_stat == "p99" else {"ttft_p99_ms": result.value("ttft", "p99").m_as("ms")}),
                "attainment": result.attainment.get("all", math.nan),
                "meets_targets": bool(result.meets_targets),
                "verdict": result.verdict,
            }
        )
    table = pd.DataFrame(rows)
    meets = bool(results[start].meets_targets)
    tight = meets and ((start - 1 in results and not results[start - 1].meets_targets) or start == 1)
    if simulated is None:
        verdict = f"no replica count up to {limit} meets the targets in simulation"
    elif simulated == start:
        verdict = f"the plan's {start} replicas meet the targets in simulation; {start - 1} miss them"
        if start == 1:
            verdict = "the plan's single replica meets the targets in simulation"
    elif simulated < start:
        verdict = f"{simulated} replicas meet the targets in simulation; the plan's {start} over-provision"
    else:
        verdict = f"the plan's {start} replicas miss the targets in simulation; {simulated} meet them"
    return PlanVerification(
        analytical_replicas=start,
        simulated_replicas=simulated,
        meets_targets=meets,
        tight=bool(tight),
        table=table,
        results=results,
        verdict=verdict,
    )
