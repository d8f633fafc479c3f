"""What the fleet sizer plans for: the traffic, the targets, the search space, serving features and costs.

:func:`~calculator.fleet.size_fleet` takes its inputs as named parts: the traffic
(:class:`Workload`), what every plan must meet (:class:`Targets`), the configurations searched
(:class:`SearchSpace`), the serving features assumed (:class:`ServingOptions`: prefix caching,
speculative decoding with :class:`Speculation`, chunked prefill, the router) and the prices
(:class:`Costs`). Each validates its own fields when built, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import MAX_CV, count, scalar
from ..errors import InputError
from ..precision import check_precision
from ..results import Result
from ..simulation.inputs import DEFAULT_ROUTER, router_name
from ..types import AcceleratorRef, EnergyPrice, Fraction, MoneyRate, Precision, Probability, Rate, Time, Tokens
from ..units import Q_, shown, ureg
from ._common import _as_list, _read_trace

if TYPE_CHECKING:
    from ..registry import Price, Registry

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_TENSOR_PARALLEL",
    "Costs",
    "SearchSpace",
    "ServingOptions",
    "Speculation",
    "Targets",
    "Workload",
    "default_price",
    "default_price_entry",
]

DEFAULT_TENSOR_PARALLEL = (1, 2, 4, 8)
#: The lowest arrival rate a fleet is sized for, request/s (one request in about twelve days): below it the costs
#: per million tokens of even one replica pass what a float holds.
MIN_RATE = 1e-6
#: The longest draft a speculation round proposes (engines use 1 to about 10; the gain peaks well below this).
MAX_DRAFT_LENGTH = 256
#: Operating batches searched: every size to 16, then steps that keep the grid about 90 points.
DEFAULT_BATCHES = tuple(sorted({*range(1, 17), *range(18, 65, 2), *range(68, 257, 4), *range(264, 1025, 8)}))
#: The largest batch cap searched: sequences one replica (or one attention rank) runs at once. Engines
#: default to 256-2,048 (vLLM ``max_num_seqs``, TensorRT-LLM ``max_batch_size``); this leaves room.
MAX_BATCH = 65_536
#: The most batch caps one search takes, and the most (caps x largest cap) entries of the running-batch
#: occupancy table of one TP degree (its memory: 8 bytes each, 128 MB at the limit).
MAX_BATCH_VALUES = 4_096
MAX_OCCUPANCY_ENTRIES = 16_000_000


# --------------------------------------------------------------------------------------------
# Inputs


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
        return self.input_tokens + self.output_tokens * (1 + self.output_cv**2) / 2

    @classmethod
    def from_trace(
        cls, trace: Any, *, time: str = "arrival_time", inputs: str = "input_tokens", outputs: str = "output_tokens"
    ) -> Workload:
        """A workload from a request trace (CSV path or DataFrame with arrival times in seconds).

        The rate is the number of requests over the span of arrivals, the lengths' means and CVs
        come from the columns, and the arrival CV from the inter-arrival times.
        """
        frame = _read_trace(trace, (time, inputs, outputs))
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


@dataclass(frozen=True, repr=False)
class Speculation(Result):
    """Speculative decoding with a draft model (section 10.7.6).

    Attributes
    ----------
    draft_model : str
        Registry id of the draft model (it runs on the same devices as the target).
    draft_length : int
        Draft tokens proposed per round, ``K``.
    acceptance : float
        Per-token acceptance probability, ``alpha``.
    """

    draft_model: str
    draft_length: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "draft_length", count("Speculation", "draft_length", self.draft_length, 1, MAX_DRAFT_LENGTH)
        )
        object.__setattr__(self, "acceptance", scalar("Speculation", "acceptance", self.acceptance, "", "probability"))


def _time(owner: str, name: str, value: object) -> Time:
    """A target time, checked (a positive pint time) and held in seconds."""
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
        raise InputError(f"{owner}: '{name}' must be a time such as Q_(200, 'ms'), got {shown(value)}")
    if np.ndim(value.magnitude):  # one target per plan: an array made the comparison below ambiguous
        raise InputError(f"{owner}: '{name}' must be one time (size each target separately), got {shown(value)}")
    if not value.magnitude > 0:
        raise InputError(f"{owner}: '{name}' must be > 0, got {shown(value)}")
    return value.to("s")


@dataclass(frozen=True, repr=False)
class Targets(Result):
    """What every plan must meet: the latency targets and the load headroom.

    Attributes
    ----------
    ttft : Quantity [time]
        TTFT target: the mean, or the ``ttft_percentile`` when one is given.
    tpot : Quantity [time]
        Mean time per output token after the first.
    tbt : Quantity [time], optional
        A bound on the longest gap between streamed tokens (a prefill landing in a decode step).
    ttft_percentile : float, optional
        Plan TTFT at this percentile (e.g. 0.99) instead of the mean; in (0, 1).
    max_utilization : float
        Load each replica to at most this fraction of its throughput at the batch cap; in (0, 1].

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

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot", "tbt"):
            if getattr(self, name) is None and name != "tbt":  # only the stall bound is optional
                raise InputError(
                    f"Targets: argument '{name}' must be a time (a quantity such as Q_(500, 'ms')), got None"
                )
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _time("Targets", name, getattr(self, name)))
        if self.ttft_percentile is not None:
            percentile = scalar("Targets", "ttft_percentile", self.ttft_percentile, "", "probability")
            if not 0 < percentile < 1:
                raise InputError(f"Targets: 'ttft_percentile' must be in (0, 1), got {shown(self.ttft_percentile)}")
            object.__setattr__(self, "ttft_percentile", float(percentile))
        headroom = scalar("Targets", "max_utilization", self.max_utilization, "", "probability")
        if not headroom > 0:
            raise InputError(f"Targets: 'max_utilization' must be in (0, 1], got {shown(self.max_utilization)}")
        object.__setattr__(self, "max_utilization", float(headroom))


#: How a mixture of experts sits on a replica's GPUs (``SearchSpace.moe_layouts``): experts split by tensor
#: parallelism; experts spread (expert parallelism); one attention rank per GPU with the experts spread.
MOE_LAYOUTS = ("tensor", "expert", "attention-dp")


@dataclass(frozen=True, repr=False)
class SearchSpace(Result):
    """The configurations the sizer searches: accelerators x precisions x TP degrees x batch caps.

    Attributes
    ----------
    accelerators : tuple of str or Accelerator
        Candidate accelerators (registry ids, aliases or entries); one is accepted as is.
    precisions : tuple of str
        Candidate weight precisions; one is accepted as is.
    tensor_parallel : tuple of int
        Tensor-parallel degrees (those that do not divide the model's heads are skipped). With the
        default degrees, replicas of two and four scale-up domains (``Accelerator.node_gpus``) are added
        for an accelerator with a scale-out link where one domain cannot hold the model and one request.
    batches : tuple of int
        Caps on running sequences per replica (the engine's ``max_num_seqs``): each at most
        :data:`MAX_BATCH`, at most :data:`MAX_BATCH_VALUES` of them, and (caps x the largest cap) at
        most :data:`MAX_OCCUPANCY_ENTRIES`, so the search fits in memory.
    kv_precision : str, optional
        The KV cache's precision; default: the engine's for the weights
        (:func:`~calculator.performance.kv_cache_precision`).
    moe_layouts : tuple of str
        For a mixture of experts, how a replica's GPUs (the TP degree) hold the model: ``"tensor"``
        (each routed expert split over them), ``"expert"`` (whole experts spread over them: expert
        parallelism of the replica's size, vLLM's ``--enable-expert-parallel``) and ``"attention-dp"``
        (one attention rank per GPU with its own sequences and KV cache, the experts spread: attention
        data parallelism). All are searched by default; dense models ignore it.

    Examples
    --------
    >>> SearchSpace("h100-sxm", ["fp8", "bf16"]).precisions
    ('fp8', 'bf16')
    """

    accelerators: tuple[AcceleratorRef, ...]
    precisions: tuple[Precision, ...]
    tensor_parallel: tuple[int, ...] = DEFAULT_TENSOR_PARALLEL
    batches: tuple[int, ...] = DEFAULT_BATCHES
    kv_precision: Precision | None = None
    moe_layouts: tuple[str, ...] = MOE_LAYOUTS

    def __post_init__(self) -> None:
        object.__setattr__(self, "accelerators", _distinct(_as_list(self.accelerators, "accelerators")))
        layouts = tuple(_as_list(self.moe_layouts, "moe_layouts"))
        if not layouts or any(layout not in MOE_LAYOUTS for layout in layouts):
            wanted = " and/or ".join(repr(layout) for layout in MOE_LAYOUTS)
            raise InputError(f"SearchSpace: 'moe_layouts' must list {wanted}, got {shown(self.moe_layouts)}")
        object.__setattr__(self, "moe_layouts", layouts)
        precisions = tuple(_as_list(self.precisions, "precisions"))
        for precision in precisions:
            check_precision(precision, "precisions")
        object.__setattr__(self, "precisions", _distinct(precisions))
        for name in ("tensor_parallel", "batches"):
            values = getattr(self, name)
            if isinstance(values, str) or not hasattr(values, "__len__") or not len(values):
                raise InputError(
                    f"SearchSpace: '{name}' must be a non-empty list of integers >= 1, got {shown(values)}"
                )
            limit = MAX_BATCH if name == "batches" else 4096
            object.__setattr__(self, name, tuple(int(v) for v in count("SearchSpace", name, list(values), 1, limit)))
        _check_grid_size(self.batches)
        if self.kv_precision is not None:
            check_precision(self.kv_precision, "kv_precision")


def _distinct(items: Any) -> tuple[Any, ...]:
    """Candidates in order, each once (an id or a registry entry named twice is searched once)."""
    seen: dict[Any, Any] = {}
    for item in items:
        seen.setdefault(getattr(item, "id", item), item)
    return tuple(seen.values())


def _check_grid_size(batches: tuple[int, ...]) -> None:
    """A batch grid the sizer can hold in memory (:data:`MAX_BATCH_VALUES`, :data:`MAX_OCCUPANCY_ENTRIES`)."""
    if len(batches) > MAX_BATCH_VALUES:
        raise InputError(
            f"SearchSpace: 'batches' lists {len(batches):,} caps; at most {MAX_BATCH_VALUES:,} are searched at once "
            "(the default grid has about 90)"
        )
    entries = len(set(batches)) * max(batches)
    if entries > MAX_OCCUPANCY_ENTRIES:
        raise InputError(
            f"SearchSpace: 'batches' of {len(set(batches)):,} caps up to {max(batches):,} need {entries:,} occupancy "
            f"entries per TP degree; at most {MAX_OCCUPANCY_ENTRIES:,} (fewer caps, or a smaller largest cap)"
        )


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


@dataclass(frozen=True, repr=False)
class Costs(Result):
    """What the fleet costs to run: GPU-hour prices and the electricity behind the energy estimate.

    Attributes
    ----------
    gpu_hour : Quantity [currency / time] or dict, optional
        Price per GPU-hour: one for every accelerator, or per accelerator id; default the registry's
        cheapest published on-demand price (:func:`default_price`).
    electricity : Quantity [currency / energy], optional
        For the electricity cost per million tokens; default 0.10 USD/kWh (a scenario value).
    idle_power_fraction : float
        Power an idle GPU draws as a fraction of its TDP (energy estimate).
    """

    gpu_hour: MoneyRate | Mapping[str, MoneyRate] | None = None
    electricity: EnergyPrice | None = None
    idle_power_fraction: Fraction = 0.3

    def __post_init__(self) -> None:
        from ..registry import Price

        highest = Price.PLAUSIBLE["price"][1]  # the registry's plausible range for a price entry
        prices = self.gpu_hour.values() if isinstance(self.gpu_hour, Mapping) else [self.gpu_hour]
        for price in prices:
            if price is None and not isinstance(self.gpu_hour, Mapping):
                continue
            if not isinstance(price, ureg.Quantity) or price.dimensionality != _PRICE_DIMENSION:
                raise InputError(
                    f"Costs: 'gpu_hour' (the GPU-hour price) must be a quantity in USD/hour per GPU, got {shown(price)}"
                )
            if not price.magnitude > 0 or not np.isfinite(price.magnitude):
                raise InputError(f"Costs: 'gpu_hour' (the GPU-hour price) must be finite and > 0, got {shown(price)}")
            if not price.m_as("USD/hour") <= highest:  # 1e308 USD/hour made every cost infinite
                raise InputError(
                    f"Costs: 'gpu_hour' (the GPU-hour price) must be at most {highest:,g} USD/hour (the "
                    f"registry's plausible range for one GPU), got {shown(price)}"
                )
        fraction = scalar("Costs", "idle_power_fraction", self.idle_power_fraction, "", "probability")
        object.__setattr__(self, "idle_power_fraction", float(fraction))
        if self.electricity is not None:
            scalar("Costs", "electricity", self.electricity, "USD/(kW*hour)", "nonnegative")


_PRICE_DIMENSION = ureg.parse_units("USD/hour").dimensionality


def default_price(accelerator: AcceleratorRef, registry: Registry | None = None) -> MoneyRate:
    """A GPU-hour price for ``accelerator`` from the registry: the cheapest published on-demand price.

    Falls back to the chapter's scenario prices; raises :class:`InputError` when the registry has
    none (pass ``price=`` to :func:`size_fleet`). :func:`default_price_entry` gives the entry.
    ``registry`` defaults to :func:`~calculator.registry.load_registry`.
    """
    return default_price_entry(accelerator, registry).price


def default_price_entry(accelerator: AcceleratorRef, registry: Registry | None = None) -> Price:
    """The registry price entry :func:`default_price` reads (to cite it as a source)."""
    from .._support import registry_or_default

    reg = registry_or_default(registry, "default_price")
    device = reg.accelerator(accelerator)
    prices = [p for p in reg.prices.values() if p.accelerator == device.id and p.market == "on_demand"]
    published = [p for p in prices if p.provenance == "published"] or prices
    if not published:
        raise InputError(
            f"the registry has no on-demand price for accelerator '{device.id}'; pass price= (USD/hour per GPU)"
        )
    return min(published, key=lambda p: p.price.m_as("USD/hour"))
