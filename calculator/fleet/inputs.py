"""What the fleet sizer plans for: the traffic, the targets, the search space, serving features and costs.

:func:`~calculator.fleet.size_fleet` takes its inputs as named parts: the traffic
(:class:`Workload`), what every plan must meet (:class:`Targets`), the configurations searched
(:class:`SearchSpace`), the serving features assumed (:class:`ServingOptions`: prefix caching,
speculative decoding with :class:`Speculation`, chunked prefill, the router) and the prices
(:class:`Costs`). Each validates its own fields when built, naming the field. The traffic, the targets
and the serving features are :mod:`calculator.serving`'s, which the simulator shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import count, scalar
from ..errors import InputError
from ..precision import check_precision
from ..results import Result
from ..serving import ServingOptions, Speculation, Targets, Workload
from ..types import AcceleratorRef, EnergyPrice, Fraction, MoneyRate, Precision
from ..units import shown, ureg
from ._common import _as_list

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
# Inputs (the traffic, the targets and the serving features are the serving vocabulary's, re-exported)


#: The default ``SearchSpace.near_tie``: alternatives within 2 % of the plan's cost are listed beside it.
NEAR_TIE = 0.02

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
    near_tie : float
        The plan lists the cheapest candidate of each other (accelerator, precision, TP, layout) whose cost is
        within this fraction of its own (``plan.alternatives``, :func:`~calculator.fleet.tie_lines`); 0: none.
        Default :data:`NEAR_TIE` (2 %).

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
    near_tie: float = NEAR_TIE

    def __post_init__(self) -> None:
        object.__setattr__(self, "accelerators", _distinct(_as_list(self.accelerators, "accelerators")))
        tie = self.near_tie
        if isinstance(tie, bool) or not isinstance(tie, int | float) or not 0 <= tie < 1:
            raise InputError(f"SearchSpace: 'near_tie' must be a fraction in [0, 1) such as 0.02, got {shown(tie)}")
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
