"""Disaggregation (section 10.8.3): a model's KV handoff and the two pools' sizes; preemption's costs (10.7.7).

The handoff time of Eq. 10 itself (:func:`calculator.memory.kv_handoff_time`) is a transfer of KV bytes
over a link, defined with the memory tiers; it is re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import checked, magnitude, one, registry_or_default, renamed
from ..errors import InputError
from ..memory import kv_cache_bytes, kv_handoff_time, model_kv_bytes_per_token
from ..results import Result, ceil_count
from ..types import (
    AcceleratorRef,
    Bytes,
    Count,
    Fraction,
    InterconnectRef,
    ModelRef,
    Precision,
    Rate,
    Time,
    TokenRate,
    Tokens,
)
from ..units import Q_, ureg
from ._common import _device_setup
from .roofline import roofline_prefill_time

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "model_kv_handoff_time",
    "PreemptionCosts",
    "preemption_costs",
    "PoolSizes",
    "disaggregated_pool_sizes",
]


# ============================================================================================
# Disaggregation (section 10.8.3) and preemption (section 10.7.7)


def _link(function: str, link: Any, registry: Any) -> tuple[float, float]:
    """(bandwidth B/s, startup latency s) from a bandwidth quantity or an interconnect (id in ``registry``)."""
    if isinstance(link, ureg.Quantity):
        return magnitude(function, "link", link, "B/s", "positive"), 0.0
    if isinstance(link, str):
        link = registry_or_default(registry, function).interconnect(link)
    if not hasattr(link, "bandwidth"):
        raise InputError(f"{function}(): argument 'link' must be a bandwidth or an interconnect, got {link!r}")
    latency = link.startup_latency.m_as("s") if getattr(link, "startup_latency", None) is not None else 0.0
    return link.bandwidth.m_as("B/s"), latency


@renamed(kv_dtype="kv_precision")
@checked(prompt_tokens="positive_integer")
def model_kv_handoff_time(
    model: ModelRef,
    prompt_tokens: Tokens,
    link: InterconnectRef,
    kv_precision: Precision = "fp16",
    parallel_links: Count = 1,
    startup_latency: Time | None = None,
    *,
    registry: Registry | None = None,
) -> Any:
    """Eq. 10 for a registry model: hand a prompt's KV cache over a link.

    Parameters
    ----------
    model : str or Model
    prompt_tokens : int or array
    link : Quantity [information / time] or str or Interconnect
        A bandwidth per direction, or a registry interconnect (its ``bandwidth`` and
        ``startup_latency``).
    kv_precision : str
    parallel_links : int
    startup_latency : Quantity [time], optional
        Overrides the interconnect's startup latency (set it to the loaded operating point).
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    Quantity [time]

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> round(model_kv_handoff_time(m, 131_072, Q_(450, "GB/s")).m_as("ms"), 1)
    95.4
    """
    name = "model_kv_handoff_time"
    bandwidth, latency = _link(name, link, registry)
    if startup_latency is not None:
        latency = startup_latency
    kv = kv_cache_bytes.numeric(
        batch=1,
        context=np.asarray(prompt_tokens),
        kv_per_token=model_kv_bytes_per_token(model, kv_precision, registry=registry).m_as("B/token"),
    )
    return kv_handoff_time(Q_(kv, "B"), Q_(bandwidth, "B/s"), Q_(latency, "s"), parallel_links)


@dataclass(frozen=True, repr=False)
class PreemptionCosts(Result):
    """The three ways to free a running sequence's KV cache (section 10.7.7)."""

    retain_bytes: Bytes
    swap_time: Time
    recompute_time: Time


@renamed(kv_dtype="kv_precision")
@checked(context=one("positive_integer"), tensor_parallel=one())
def preemption_costs(
    model: ModelRef,
    accelerator: AcceleratorRef,
    context: Tokens,
    host_link: InterconnectRef,
    precision: str = "fp16",
    tensor_parallel: Count = 1,
    kv_precision: Precision = "fp16",
    *,
    registry: Registry | None = None,
) -> PreemptionCosts:
    """Cost of keeping, swapping or recomputing a preempted sequence's KV cache.

    Parameters
    ----------
    model, accelerator, precision, tensor_parallel, kv_precision
        As for :func:`roofline_prefill_time`.
    context : int
        Tokens the sequence holds.
    host_link : Quantity [information / time] or str or Interconnect
        Device-host path (PCIe), per direction; each device of the group has its own.
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    PreemptionCosts
        ``retain_bytes``: HBM per device the sequence keeps; ``swap_time``: out and back in over the
        host link (twice Eq. 10); ``recompute_time``: the roofline prefill of ``context`` tokens.
        Section 10.7.7 compares these with the waiting request's deadline; the chapter gives no
        formula, this is the direct reading.

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> c = preemption_costs(m, h100, 8192, Q_(64, "GB/s"), tensor_parallel=8)
    >>> c.retain_bytes.to("MB"), c.swap_time.to("ms")
    (<Quantity(335.54432, 'megabyte')>, <Quantity(10.48576, 'millisecond')>)
    """
    name = "preemption_costs"
    setup = _device_setup(name, model, accelerator, precision, tensor_parallel, None, kv_precision, registry=registry)
    tokens = int(context)
    bandwidth, latency = _link(name, host_link, registry)
    held = kv_cache_bytes.numeric(batch=1, context=tokens, kv_per_token=setup["kv_per_token"])
    one_way = kv_handoff_time.numeric(kv_bytes=held, link_bandwidth=bandwidth, startup_latency=latency)
    rebuild = roofline_prefill_time(
        model, accelerator, tokens, precision, tensor_parallel, kv_precision=kv_precision
    ).time
    return PreemptionCosts(
        retain_bytes=Q_(float(held), "B"), swap_time=Q_(2 * float(one_way), "s"), recompute_time=rebuild
    )


@dataclass(frozen=True, repr=False)
class PoolSizes(Result):
    """Instances of each pool of a disaggregated deployment (see :func:`disaggregated_pool_sizes`)."""

    prefill_instances: Count
    decode_instances: Count
    prefill_utilization: Fraction
    decode_utilization: Fraction


@checked(prefill_throughput="positive", decode_throughput="positive")
def disaggregated_pool_sizes(
    arrival_rate: Rate,
    prompt_tokens: Tokens,
    output_tokens: Tokens,
    prefill_throughput: TokenRate,
    decode_throughput: TokenRate,
    max_utilization: Fraction = 0.8,
) -> PoolSizes:
    """Size the prefill and decode pools of a disaggregated deployment by their token rates.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
    prompt_tokens, output_tokens : float
        Mean prompt and output tokens per request.
    prefill_throughput, decode_throughput : Quantity [token / time]
        Sustained SLO-compliant token rate of one prefill and one decode instance.
    max_utilization : float
        Planned utilization ceiling (headroom for the length distribution).

    Returns
    -------
    PoolSizes
        ``ceil(lambda P / (r_pre u))`` prefill and ``ceil(lambda O / (r_dec u))`` decode instances
        and their resulting utilizations.

    Notes
    -----
    Section 10.8.3: "the prefill pool must sustain the admitted prompt-token rate, the decode pool
    must sustain the admitted output-token rate, and both pools need headroom". Queueing delays at
    that utilization are priced separately.

    Examples
    --------
    >>> s = disaggregated_pool_sizes(Q_(10, "request/s"), 2000, 500, Q_(20_000, "token/s"), Q_(2_000, "token/s"))
    >>> s.prefill_instances, s.decode_instances
    (2, 4)
    """
    if np.any(np.asarray(max_utilization) == 0):
        raise InputError("disaggregated_pool_sizes(): argument 'max_utilization' must be > 0")
    demand_prefill = arrival_rate * prompt_tokens / prefill_throughput
    demand_decode = arrival_rate * output_tokens / decode_throughput
    n_prefill = np.maximum(ceil_count(demand_prefill / max_utilization), 1)
    n_decode = np.maximum(ceil_count(demand_decode / max_utilization), 1)

    def out(x):
        return x.item() if np.ndim(x) == 0 else x

    return PoolSizes(
        prefill_instances=out(n_prefill),
        decode_instances=out(n_decode),
        prefill_utilization=out(demand_prefill / n_prefill),
        decode_utilization=out(demand_decode / n_decode),
    )
