"""The serving vocabulary the fleet sizer and the simulator share, below both.

What is served and how well: the traffic (:class:`Workload`), the targets (:class:`Targets`), the serving
features a replica runs with (:class:`ServingOptions`, speculative decoding with :class:`Speculation`), how a
replica's GPUs run the model (:class:`Layout`), the router policies (:data:`ROUTERS`, :func:`router_name`) and
the reader of request traces (:func:`read_trace`).
:class:`ServingPlan` is what a check of a plan reads of it (a :class:`~calculator.fleet.FleetPlan` is one)
and :class:`PlanCheck` what a plan records of its check by simulation (a
:class:`~calculator.simulation.PlanVerification` is one), so that :mod:`calculator.fleet` and
:mod:`calculator.simulation` import this module and never each other (``docs/ARCHITECTURE.md``, "Layers").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ._support import MAX_CV, count, scalar
from .errors import InputError
from .results import Result
from .types import Fraction, Probability, Rate, Time, Tokens
from .units import Q_, shown, ureg

if TYPE_CHECKING:
    import pandas as pd

    from .registry import RegistryDocument

__all__ = [
    "DEFAULT_ACCEPTANCE",
    "DEFAULT_ROUTER",
    "Layout",
    "ROUTERS",
    "PlanCheck",
    "ServingOptions",
    "ServingPlan",
    "SPECULATION_METHODS",
    "Speculation",
    "Targets",
    "TRACE_COLUMNS",
    "Workload",
    "read_trace",
    "router_name",
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


#: The lowest arrival rate a fleet is sized for, request/s (one request in about twelve days): below it the costs
#: per million tokens of even one replica pass what a float holds.
MIN_RATE = 1e-6
#: The longest draft a speculation round proposes (engines use 1 to about 10; the gain peaks well below this).
MAX_DRAFT_LENGTH = 256
#: The columns of a request trace: arrival time (s), prompt and output lengths (tokens).
TRACE_COLUMNS = ("arrival_time", "input_tokens", "output_tokens")


def router_name(router: str) -> str:
    """The canonical name of a router policy (``"join_shortest_queue"`` is ``"least_connections"``)."""
    key = str(router).lower().replace("-", "_").replace(" ", "_")
    if key not in ROUTERS:
        raise InputError(f"argument 'router' must be one of {', '.join(sorted(ROUTERS))}, got {router!r}")
    return ROUTERS[key]


def read_trace(trace: Any, columns: tuple[str, ...] = TRACE_COLUMNS) -> Any:
    """A request trace (a DataFrame, or the path of a CSV file) with ``columns`` checked and made floats.

    The first column is a time (s, at least 0), the others token counts (at least 1); a cell that is
    not such a number is an InputError naming its column and row. The fleet's demand curves and
    workloads and the simulator's replayed traffic read traces with it.

    Examples
    --------
    >>> import pandas as pd
    >>> read_trace(pd.DataFrame({"arrival_time": [0, 1.5], "input_tokens": [100, 200], "output_tokens": ["8", 9]}))
       arrival_time  input_tokens  output_tokens
    0           0.0         100.0            8.0
    1           1.5         200.0            9.0
    """
    import pandas as pd

    if not isinstance(columns, tuple) or not columns or not all(isinstance(c, str) for c in columns):
        raise InputError(
            f"read_trace(): argument 'columns' must be a non-empty tuple of column names, got {shown(columns)}"
        )

    from ._files import MAX_TABLE_BYTES, read_csv

    if isinstance(trace, pd.DataFrame):
        frame, what = trace, "the trace"
    elif isinstance(trace, str | Path):
        what = f"the trace {trace}"
        frame = read_csv(trace, MAX_TABLE_BYTES, what)
    else:
        raise InputError(f"a trace is a DataFrame or a CSV file path, got {shown(trace)}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"the trace lacks column(s) {missing}; it has {shown(list(frame.columns))}")
    twice = [c for c in columns if list(frame.columns).count(c) > 1]
    if twice:
        raise InputError(f"{what} has column(s) {twice} more than once")
    if len(frame) < 1:
        raise InputError("the trace has no requests")
    checked = {column: _trace_column(frame, column, index == 0, what) for index, column in enumerate(columns)}
    return frame.assign(**checked)


def _trace_column(frame: Any, column: str, is_time: bool, what: str) -> np.ndarray:
    """A trace column as floats: times at least 0 s, lengths at least one token; else the first bad cell named."""
    import pandas as pd

    cells = frame[column]
    try:
        values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):  # complex numbers, objects pandas cannot coerce
        raise InputError(f"{what}: column {column!r} holds {cells.dtype} values; expected numbers") from None
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= (0.0 if is_time else 1.0))))
    if not bad.size:
        return values
    row = int(bad[0])
    cell, found = cells.iloc[row], shown(cells.iloc[row], 80)
    if pd.api.types.is_scalar(cell) and pd.isna(cell):
        problem = "an empty cell (missing values cannot be replayed)"
    elif np.isnan(values[row]):
        problem = f"expected a number, found {found}"
    elif is_time:
        problem = f"expected a time of at least 0 s, found {found}"
    else:
        problem = f"found {found}, a length below one token"
    raise InputError(f"{what}: column {column!r}, row {row + 1:,} (counting from 1 below the header): {problem}")


# --------------------------------------------------------------------------------------------
# Records


def held_output(output_tokens: Any, output_cv: Any) -> Any:
    """Output tokens a running sequence holds on average: half its output, length-biased where the lengths spread.

    A request is among the running sequences for as long as it decodes, so a long output is there longer: the
    time-average is ``E[O^2] / (2 E[O]) = O (1 + cv^2) / 2``. A non-finite ``output_cv`` (none given) counts as 0.
    Arrays broadcast.
    """
    cv = np.asarray(output_cv, dtype=float)
    return output_tokens * (1.0 + np.where(np.isfinite(cv), cv, 0.0) ** 2) / 2


@dataclass(frozen=True, repr=False)
class Workload(Result):
    """Traffic as a capacity planner has it: a rate and request lengths with their variability.

    Attributes
    ----------
    arrival_rate : Quantity [request / time]
        Mean request rate to serve (at least :data:`MIN_RATE` request/s).
    input_tokens, output_tokens : float
        Mean prompt and output lengths.
    input_cv, output_cv : float
        Coefficients of variation of the lengths (0 for fixed lengths).
    arrival_cv : float
        Coefficient of variation of inter-arrival times (1 for Poisson, > 1 for bursty traffic).
    """

    arrival_rate: Rate
    input_tokens: float
    output_tokens: float
    input_cv: float = 0.0
    output_cv: float = 0.0
    arrival_cv: float = 1.0

    def __post_init__(self) -> None:
        rate = self.arrival_rate
        if not isinstance(rate, ureg.Quantity) or rate.dimensionality != ureg.parse_units("request/s").dimensionality:
            raise InputError(f"Workload: 'arrival_rate' must be a rate in request/s, got {rate!r}")
        if np.ndim(rate.magnitude) != 0:
            raise InputError(f"Workload: 'arrival_rate' must be one rate (a scalar quantity), got {rate!r}")
        if not rate.magnitude > 0 or not np.isfinite(rate.magnitude):
            raise InputError(f"Workload: 'arrival_rate' must be a finite rate > 0, got {rate!r}")
        if not rate.m_as("request/s") >= MIN_RATE:
            raise InputError(
                f"Workload: 'arrival_rate' must be at least {MIN_RATE:g} request/s (one request in about twelve "
                f"days), got {rate!r}"
            )
        for name in ("input_tokens", "output_tokens"):
            # A length is a token count: a plain number or a quantity of tokens.
            tokens = scalar("Workload", name, getattr(self, name), "token", "positive")
            if not tokens >= 1:
                raise InputError(f"Workload: '{name}' must be >= 1 token, got {getattr(self, name)!r}")
            object.__setattr__(self, name, tokens)
        for name in ("input_cv", "output_cv", "arrival_cv"):
            cv = scalar("Workload", name, getattr(self, name))
            if not cv <= MAX_CV:
                raise InputError(f"Workload(): argument '{name}' must be at most {MAX_CV:g}, got {cv:g}")
            object.__setattr__(self, name, cv)

    @property
    def held_context(self) -> float:
        """Tokens a running sequence holds on average: its prompt and half its output, length-biased.

        A long output stays longer in the batch, so the time-average is ``E[O^2] / (2 E[O]) = O (1 + cv^2) / 2``
        of the output beside the prompt.

        Examples
        --------
        >>> from calculator import Q_
        >>> Workload(Q_(1, "request/s"), 1000, 200, output_cv=1.0).held_context
        1200.0
        """
        return self.input_tokens + float(held_output(self.output_tokens, self.output_cv))

    @classmethod
    def from_trace(
        cls, trace: Any, *, time: str = "arrival_time", inputs: str = "input_tokens", outputs: str = "output_tokens"
    ) -> Workload:
        """A workload from a request trace (CSV path or DataFrame with arrival times in seconds).

        The rate is the number of requests over the span of arrivals, the lengths' means and CVs
        come from the columns, and the arrival CV from the inter-arrival times.
        """
        frame = read_trace(trace, (time, inputs, outputs))
        times = np.sort(frame[time].to_numpy(dtype=float))
        span = times[-1] - times[0]
        if len(times) < 2 or span <= 0:
            raise InputError("Workload.from_trace(): the trace needs at least two distinct arrival times")
        gaps = np.diff(times)
        lengths_in = frame[inputs].to_numpy(dtype=float)
        lengths_out = frame[outputs].to_numpy(dtype=float)
        return cls(
            arrival_rate=Q_((len(times) - 1) / span, "request/s"),
            input_tokens=float(lengths_in.mean()),
            output_tokens=float(lengths_out.mean()),
            input_cv=float(lengths_in.std() / lengths_in.mean()),
            output_cv=float(lengths_out.std() / lengths_out.mean()),
            arrival_cv=float(gaps.std() / gaps.mean()) if gaps.mean() > 0 else 0.0,
        )


#: The acceptance probability a :class:`Speculation` assumes per drafted position unless
#: given, by method. ``draft``: 0.7, the chapter's middle case (section 10.7.6 works alpha = 0.9, 0.7 and
#: 0.5); a separate draft model's acceptance depends on the pair. ``mtp``: 0.85, the low end of the 85-90 %
#: acceptance of the second-token prediction across generation topics in the DeepSeek-V3 technical report
#: (arXiv:2412.19437, section 5.4.3), measured on the one position its MTP module was trained for; using it
#: for every position is a judgment (a layer reused for later positions accepts less, as vLLM warns). ``eagle``:
#: 0.68, the per-position value that gives, by Eq. 6, the acceptance length of 2.45 tokens per round that
#: lmsys/sglang-EAGLE3-Llama-4-Maverick-17B-128E-Instruct-v1's model card reports for 3 steps, top-1, 4 draft
#: tokens (SGLang counts the verified token in the length, as E[N] does); one EAGLE-3 head on one target, so a
#: judgment for others (docs/fleet-sizer.md, "Speculative decoding").
DEFAULT_ACCEPTANCE = {"draft": 0.7, "mtp": 0.85, "eagle": 0.68}


#: How a speculation round drafts its tokens: a separate draft model from the registry, the model's own
#: multi-token-prediction layers, or an EAGLE-3-style head (one decoder layer and an LM head).
SPECULATION_METHODS = ("draft", "mtp", "eagle")


@dataclass(frozen=True, repr=False)
class Speculation(Result):
    """Speculative decoding (section 10.7.6): a draft model, the model's MTP layers, or an EAGLE head.

    Attributes
    ----------
    draft_model : str, optional
        Registry id of the draft model (it runs on the same devices as the target); required for
        ``method="draft"`` and refused for the others (their drafter is part of the target or a head
        trained for it).
    draft_length : int
        Draft tokens proposed per round, ``K``.
    acceptance : float or sequence of float, optional
        The per-position acceptance probability ``alpha`` (every drafted position alike, Eq. 6), or ``K``
        conditional probabilities, the ``i``-th that position ``i`` is accepted once the positions before it
        were. Default: the method's (:data:`DEFAULT_ACCEPTANCE`).
    method : str
        ``"draft"``, ``"mtp"`` (the target's own multi-token-prediction layers; the registry model must
        declare them, ``Model.mtp_layers``) or ``"eagle"`` (an EAGLE-3-style head).

    Examples
    --------
    >>> Speculation("llama-3.2-1b", 3, 0.6).acceptance
    0.6
    >>> Speculation(method="mtp", draft_length=2, acceptance=[0.9, 0.8]).acceptance
    (0.9, 0.8)
    """

    draft_model: str | None = None
    draft_length: int = 4
    acceptance: float | tuple[float, ...] | None = None
    method: str = "draft"

    def __post_init__(self) -> None:
        if self.method not in SPECULATION_METHODS:
            methods = ", ".join(SPECULATION_METHODS)
            raise InputError(f"Speculation: argument 'method' must be one of {methods}, got {shown(self.method)}")
        if self.method == "draft" and self.draft_model is None:
            raise InputError("Speculation: argument 'draft_model' (a registry model id) is required for method 'draft'")
        if self.method != "draft" and self.draft_model is not None:
            drafter = {"mtp": "the model's own MTP layers", "eagle": "a head trained for the model"}[self.method]
            raise InputError(
                f"Speculation: argument 'draft_model' applies to method 'draft' only; method '{self.method}' drafts "
                f"with {drafter}, got draft_model={shown(self.draft_model)}"
            )
        length = count("Speculation", "draft_length", self.draft_length, 1, MAX_DRAFT_LENGTH)
        object.__setattr__(self, "draft_length", length)
        given = DEFAULT_ACCEPTANCE[self.method] if self.acceptance is None else self.acceptance
        object.__setattr__(self, "acceptance", _acceptance(given, int(length)))


def _acceptance(value: Any, length: int) -> float | tuple[float, ...]:
    """One acceptance probability (a float), or ``length`` per-position ones (a tuple of floats), checked."""
    if isinstance(value, str) or np.ndim(value) == 0:
        return scalar("Speculation", "acceptance", value, "", "probability")
    try:
        values = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        values = None
    if values is None or values.ndim != 1 or values.size != length:
        raise InputError(
            f"Speculation: argument 'acceptance' must be one probability or {length} (one per drafted position, "
            f"draft_length), got {shown(value)}"
        )
    for number in values:
        scalar("Speculation", "acceptance", float(number), "", "probability")
    return tuple(float(v) for v in values)


def _time(owner: str, name: str, value: object) -> Time:
    """A target time, checked (a positive pint time) and held in seconds."""
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
        raise InputError(f"{owner}: '{name}' must be a time such as Q_(200, 'ms'), got {shown(value)}")
    if np.ndim(value.magnitude):  # one target per plan: an array made the comparison below ambiguous
        raise InputError(f"{owner}: '{name}' must be one time (size each target separately), got {shown(value)}")
    if not value.magnitude > 0:
        raise InputError(f"{owner}: '{name}' must be > 0, got {shown(value)}")
    return value.to("s")


def _percentile(owner: str, name: str, value: object) -> float:
    """A target's percentile as a fraction, checked to lie in (0, 1)."""
    percentile = scalar(owner, name, value, "", "probability")
    if not 0 < percentile < 1:
        raise InputError(f"{owner}: '{name}' must be in (0, 1), got {shown(value)}")
    return float(percentile)


@dataclass(frozen=True, repr=False)
class Targets(Result):
    """What every plan must meet: the latency targets and the load headroom.

    Attributes
    ----------
    ttft : Quantity [time]
        TTFT target: the mean, or the ``ttft_percentile`` when one is given.
    tpot : Quantity [time]
        Time per output token after the first: the mean, or the ``tpot_percentile`` of the requests' TPOT.
    tbt : Quantity [time], optional
        A bound on the gap between streamed tokens: the longest gap (a prefill landing in a decode step), or
        the ``tbt_percentile`` of the gaps over all tokens.
    ttft_percentile : float, optional
        Plan TTFT at this percentile (e.g. 0.99) instead of the mean; in (0, 1).
    max_utilization : float
        Load each replica to at most this fraction of its throughput at the batch cap; in (0, 1].
    tpot_percentile : float, optional
        Plan each request's TPOT at this percentile (e.g. 0.99) instead of the mean; in (0, 1).
    tbt_percentile : float, optional
        Plan the token gap at this percentile of all gaps instead of the longest; in (0, 1); needs ``tbt``.

    Examples
    --------
    >>> Targets(Q_(500, "ms"), Q_(40, "ms"), ttft_percentile=0.99).ttft
    <Quantity(0.5, 'second')>
    """

    ttft: Time
    tpot: Time
    tbt: Time | None = None
    ttft_percentile: Probability | None = None
    max_utilization: Fraction = 0.8
    tpot_percentile: Probability | None = None  # after max_utilization: plan files and positional calls keep theirs
    tbt_percentile: Probability | None = None

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot", "tbt"):
            if getattr(self, name) is None and name != "tbt":  # only the stall bound is optional
                raise InputError(
                    f"Targets: argument '{name}' must be a time (a quantity such as Q_(500, 'ms')), got None"
                )
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _time("Targets", name, getattr(self, name)))
        for name in ("ttft_percentile", "tpot_percentile", "tbt_percentile"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _percentile("Targets", name, getattr(self, name)))
        if self.tbt_percentile is not None and self.tbt is None:
            raise InputError(
                f"Targets: argument 'tbt_percentile' ({self.tbt_percentile}) needs 'tbt', the gap at that percentile"
            )
        headroom = scalar("Targets", "max_utilization", self.max_utilization, "", "probability")
        if not headroom > 0:
            raise InputError(f"Targets: 'max_utilization' must be in (0, 1], got {shown(self.max_utilization)}")
        object.__setattr__(self, "max_utilization", float(headroom))


@dataclass(frozen=True, repr=False)
class ServingOptions(Result):
    """Serving features the plan assumes: prefix caching, speculative decoding, chunked prefill, the router.

    Attributes
    ----------
    prefix_hit_rate : float
        The fraction of requests that reuse a shared prefix.
    shared_prefix_tokens : float
        Tokens of that prefix (at most the workload's mean prompt; checked by the sizer).
    speculation : Speculation, optional
        Speculative decoding with a draft model.
    chunk_size : int, optional
        Chunked prefill: prompt tokens per iteration (bounds the token gap, lengthens TTFT); default
        the engine's token budget.
    router : str
        How requests are spread over the replicas (``"round_robin"``, ``"random"``,
        ``"join_shortest_queue"``, ``"least_outstanding_tokens"``, ``"power_of_two"``); it sets the
        arrival variability each replica sees.
    """

    prefix_hit_rate: Probability = 0.0
    shared_prefix_tokens: Tokens = 0.0
    speculation: Speculation | None = None
    chunk_size: int | None = None
    router: str = DEFAULT_ROUTER

    def __post_init__(self) -> None:
        hit = scalar("ServingOptions", "prefix_hit_rate", self.prefix_hit_rate, "", "probability")
        object.__setattr__(self, "prefix_hit_rate", float(hit))
        shared = scalar("ServingOptions", "shared_prefix_tokens", self.shared_prefix_tokens, "token", "nonnegative")
        object.__setattr__(self, "shared_prefix_tokens", shared)
        if self.speculation is not None and not isinstance(self.speculation, Speculation):
            raise InputError(f"ServingOptions: 'speculation' must be a Speculation, got {shown(self.speculation)}")
        if self.chunk_size is not None:
            object.__setattr__(self, "chunk_size", int(count("ServingOptions", "chunk_size", self.chunk_size)))
        object.__setattr__(self, "router", router_name(self.router))


# --------------------------------------------------------------------------------------------
# What a check of a plan reads of it, and what a plan records of its check


@dataclass(frozen=True, repr=False)
class Layout(Result):
    """How one replica's GPUs run the model: the value the step model, the simulator and the launch configs read.

    Attributes
    ----------
    tensor_parallel : int
        GPUs of one attention rank (the attention and dense layers split by tensor parallelism).
    data_parallel : int
        Attention ranks of a pipeline stage, each with its own sequences and KV cache (a mixture of experts).
    expert_parallel : int
        GPUs of a stage the routed experts are spread over (1: each expert split over the stage's GPUs).
    pipeline_parallel : int
        Pipeline stages, each ``tensor_parallel x data_parallel`` GPUs with its share of the layers.
    nodes : int
        Scale-up domains (NVLink nodes) the replica spans.
    redundant_experts : int
        Copies of routed experts placed beside the logical ones over the ``expert_parallel`` GPUs (an
        expert-parallel load balancer's: vLLM's EPLB, SGLang's and TensorRT-LLM's); 0: none (plan files
        written before the field read as 0).

    Examples
    --------
    >>> layout = Layout(tensor_parallel=1, data_parallel=8, expert_parallel=8)
    >>> layout.gpus, layout.stage_gpus, layout.keywords()  # doctest: +NORMALIZE_WHITESPACE
    (8, 8, {'tensor_parallel': 1, 'data_parallel': 8, 'expert_parallel': 8, 'pipeline_parallel': 1,
            'redundant_experts': 0})
    """

    tensor_parallel: int
    data_parallel: int = 1
    expert_parallel: int = 1
    pipeline_parallel: int = 1
    nodes: int = 1
    redundant_experts: int = 0

    @property
    def stage_gpus(self) -> int:
        """GPUs of one pipeline stage, ``tensor_parallel x data_parallel``: the outputs' ``TP`` of a replica."""
        return self.tensor_parallel * self.data_parallel

    @property
    def gpus(self) -> int:
        """GPUs of the replica: ``tensor_parallel x data_parallel x pipeline_parallel``."""
        return self.stage_gpus * self.pipeline_parallel

    def keywords(self) -> dict[str, int]:
        """The layout as the keywords of ``predict_benchmark``, ``decode_step_time`` and ``prefill_time``."""
        return {
            "tensor_parallel": self.tensor_parallel,
            "data_parallel": self.data_parallel,
            "expert_parallel": self.expert_parallel,
            "pipeline_parallel": self.pipeline_parallel,
            "redundant_experts": self.redundant_experts,
        }


@runtime_checkable
class ServingPlan(Protocol):
    """What a simulation of a plan reads of it: the replica, its count, the traffic, the targets, the router.

    A :class:`~calculator.fleet.FleetPlan` is one; :func:`calculator.simulation.verify_plan` takes any.
    """

    @property
    def feasible(self) -> bool:
        """Whether the plan meets its targets in closed form."""

    @property
    def reason(self) -> str:
        """Why it does not (empty when it does)."""

    @property
    def model(self) -> str:
        """The model's registry id."""

    @property
    def accelerator(self) -> str:
        """The accelerator's registry id."""

    @property
    def precision(self) -> str:
        """The weights' precision."""

    @property
    def engine(self) -> str:
        """The engine profile's name (``generic``: none)."""

    @property
    def kv_precision(self) -> str:
        """The KV cache's precision (empty: 16-bit)."""

    @property
    def layout(self) -> Layout | None:
        """How a replica's GPUs run the model (None: an infeasible plan has none)."""

    @property
    def batch(self) -> int:
        """The cap on running sequences per replica."""

    @property
    def replicas(self) -> int:
        """Replicas of the plan."""

    @property
    def router(self) -> str:
        """The router policy spreading requests over the replicas."""

    @property
    def workload(self) -> Workload | None:
        """The traffic planned for (None: not recorded)."""

    @property
    def targets(self) -> Targets | None:
        """The targets planned for (None: not recorded)."""

    @property
    def serving(self) -> ServingOptions:
        """The serving features assumed (chunked prefill, speculation, prefix caching)."""

    @property
    def registry_documents(self) -> tuple[RegistryDocument, ...]:
        """The user's registry documents its ids resolve in."""


class PlanCheck(Protocol):
    """What a plan records of its check by simulation (a :class:`~calculator.simulation.PlanVerification` is one)."""

    @property
    def analytical_replicas(self) -> int:
        """The plan's replica count (closed forms)."""

    @property
    def simulated_replicas(self) -> int | None:
        """The fewest replicas meeting the targets in simulation (None: none found)."""

    @property
    def meets_targets(self) -> bool:
        """Whether the plan as sized meets its targets in simulation."""

    @property
    def verdict(self) -> str:
        """The check in a sentence."""

    @property
    def table(self) -> pd.DataFrame:
        """One row per replica count simulated."""

    @property
    def results(self) -> Mapping[int, Any]:
        """The simulations, by replica count."""
