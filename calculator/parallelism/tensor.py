"""Sharding triggers and step time (eq. 11-13), tensor parallelism, and KV-head placement under TP."""

from __future__ import annotations

from dataclasses import dataclass

from .._support import checked, one
from ..errors import InputError
from ..formula import formula, maximum, var
from ..memory import min_devices_for_weights
from ..memory.kv import kv_shards
from ..results import Result
from ..types import Bytes, Count
from ..units import Q_
from ._common import _ZERO_BYTES
from .collectives import ring_allreduce_time
from .nccl import NCCL_ALLREDUCE_H100  # noqa: F401 (the doctests use it)

__all__ = [
    "min_shards",
    "distributed_step_time",
    "sharding_speedup",
    "activation_message_bytes",
    "tensor_parallel_layer_time",
    "tensor_parallel_layer_time_ring",
    "tensor_parallel_speedup",
    "collective_overhead_share",
    "KvHeadPlacement",
    "kv_head_placement",
]


# --------------------------------------------------------------------------------------------
# Sharding triggers and step time (eq. 11-13)


@checked(weight_bytes="positive", device_capacity="positive")
def min_shards(weight_bytes: Bytes, device_capacity: Bytes, reserve: Bytes = _ZERO_BYTES) -> Count:
    r"""Weight-only lower bound on the number of devices that can hold a model's weights.

    Parameters
    ----------
    weight_bytes : Quantity [information]
        Weight payload (eq. 11, :func:`calculator.memory.weight_bytes`).
    device_capacity : Quantity [information]
        Memory of one device, on the basis you choose (physical or nameplate).
    reserve : Quantity [information], optional
        Memory per device kept for KV state, buffers and runtime.

    Returns
    -------
    int (or int array)

    Notes
    -----
    .. math:: n_{\min} = \left\lceil \frac{M_W}{C - r} \right\rceil

    Section 10.10.1: KV state, buffers, replication within the partition and uneven
    placement can require a larger degree; a reserve expresses the first two. The chapter's name for
    :func:`calculator.memory.min_devices_for_weights`, which it calls.

    Examples
    --------
    >>> from calculator.memory import weight_bytes
    >>> min_shards(weight_bytes(70e9, 16), Q_(80, "GB"))
    2
    """
    return min_devices_for_weights(Q_(weight_bytes, "B"), Q_(device_capacity, "B"), Q_(reserve, "B"))


@formula(
    result=var("s", r"T_{\mathrm{step}}", description="distributed step time"),
    reference="Eq. 12, section 10.10.1",
    compute_time=var("s", r"T_{\mathrm{comp}}", description="serial compute time of the step"),
    devices=var("", "n", "positive_integer", "devices in the sharding group"),
    communication_time=var("s", r"T_{\mathrm{comm}}", "nonnegative", "communication time at n devices"),
    synchronization_time=var("s", r"T_{\mathrm{sync}}", "nonnegative", "synchronization time at n devices"),
    overlap_time=var("s", r"T_{\mathrm{overlap}}", "nonnegative", "communication hidden behind compute"),
    example={"compute_time": "30 ms", "devices": 8, "communication_time": "0.6 ms"},
)
def distributed_step_time(compute_time, devices, communication_time, synchronization_time=0.0, overlap_time=0.0):
    r"""Step time of a sharded replica: divided compute plus the overhead that is not hidden.

    Parameters
    ----------
    compute_time : Quantity [time]
        Serial compute time of the step on one device.
    devices : int
        Devices in the sharding group.
    communication_time : Quantity [time]
        Communication time at ``devices``.
    synchronization_time : Quantity [time], optional
        Extra synchronization time at ``devices``.
    overlap_time : Quantity [time], optional
        Communication and synchronization hidden behind compute; overlap beyond the overhead hides
        nothing more.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{step}}(n) = \frac{T_{\mathrm{comp}}}{n}
              + \max\left(T_{\mathrm{comm}} + T_{\mathrm{sync}} - T_{\mathrm{overlap}}, 0\right)

    Eq. 12 (§10.10.1, the Fleet Law for one request). The chapter writes the subtraction without
    the clamp; hiding more than the overhead cannot make the step shorter than the divided compute.
    Sharding pays only if the non-overlapped overhead is below :math:`T_{\mathrm{comp}}(1 - 1/n)`
    (§10.10.1), i.e. :func:`sharding_speedup` > 1.

    Examples
    --------
    >>> distributed_step_time(Q_(30, "ms"), 8, Q_(0.6, "ms")).to("ms")
    <Quantity(4.35, 'millisecond')>
    """
    return compute_time / devices + maximum(communication_time + synchronization_time - overlap_time, 0)


@formula(
    result=var("", "S", description="speedup of the sharded step over one device"),
    reference="Eq. 12, section 10.10.1",
    compute_time=var("s", r"T_{\mathrm{comp}}"),
    devices=var("", "n", "positive_integer"),
    communication_time=var("s", r"T_{\mathrm{comm}}", "nonnegative"),
    synchronization_time=var("s", r"T_{\mathrm{sync}}", "nonnegative"),
    overlap_time=var("s", r"T_{\mathrm{overlap}}", "nonnegative"),
    example={"compute_time": "30 ms", "devices": 8, "communication_time": "0.6 ms"},
)
def sharding_speedup(compute_time, devices, communication_time, synchronization_time=0.0, overlap_time=0.0):
    r"""Speedup of a sharded step over the serial compute time; above 1 only when sharding pays.

    Parameters
    ----------
    compute_time, devices, communication_time, synchronization_time, overlap_time
        As for :func:`distributed_step_time`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: S = T_{\mathrm{comp}} / T_{\mathrm{step}}(n)

    Examples
    --------
    >>> round(sharding_speedup(Q_(30, "ms"), 8, Q_(0.6, "ms")), 1)
    6.9
    """
    return compute_time / distributed_step_time.func(
        compute_time, devices, communication_time, synchronization_time, overlap_time
    )


@formula(
    result=var("B", "M", description="activation bytes each rank contributes to a tensor-parallel all-reduce"),
    reference="section 10.10.2",
    tokens=var("", "N_{t}", "positive_integer", "tokens in the step (batch x new tokens per sequence)"),
    hidden_size=var("", "d", "positive_integer", "hidden width"),
    bytes_per_element=var("B", "s", description="bytes per activation element"),
    example={"tokens": 64, "hidden_size": 8192, "bytes_per_element": "2 B"},
)
def activation_message_bytes(tokens, hidden_size, bytes_per_element):
    r"""Payload of one tensor-parallel all-reduce: the full activation of the step.

    Parameters
    ----------
    tokens : int
        Tokens in the step: the batch for decode, the prompt tokens for prefill.
    hidden_size : int
        Hidden width of the model.
    bytes_per_element : Quantity [information]
        Bytes per activation element (2 B for FP16/BF16).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M = N_t \, d \, s

    The reduced activation keeps its full shape whatever the tensor-parallel degree (§10.10.2).

    Examples
    --------
    A batch of 64 decode tokens of an 8,192-wide model at FP16:

    >>> activation_message_bytes(64, 8192, Q_(2, "B")).to("MiB")
    <Quantity(1.0, 'mebibyte')>
    """
    return tokens * hidden_size * bytes_per_element


@formula(
    result=var("s", r"T_{\mathrm{TP}}", description="tensor-parallel layer time"),
    reference="Eq. 13, section 10.10.2; Example 10.6",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}", description="sequential compute time of one layer"),
    tensor_parallel=var("", "t", "positive_integer", "tensor-parallel degree"),
    allreduce_time=var("s", r"T_{\mathrm{AR}}", "nonnegative", "time of one all-reduce"),
    example={"layer_compute_time": "30 ms", "tensor_parallel": 8, "allreduce_time": "0.3 ms"},
)
def tensor_parallel_layer_time(layer_compute_time, tensor_parallel, allreduce_time):
    r"""Time of one transformer layer under tensor parallelism, with two all-reduces per layer.

    Parameters
    ----------
    layer_compute_time : Quantity [time]
        Sequential compute time of one layer on one device.
    tensor_parallel : int
        Tensor-parallel degree.
    allreduce_time : Quantity [time]
        Time of one all-reduce (a fixed assumption as in Example 10.6, or
        :func:`ring_allreduce_time`; see :func:`tensor_parallel_layer_time_ring`).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{TP}} = \frac{T_{\mathrm{comp}}}{t} + 2\,T_{\mathrm{AR}}

    Eq. 13 (§10.10.2): one all-reduce after attention, one after the feed-forward sublayer. Compute
    divides ideally; the collectives do not shrink with :math:`t`. With :math:`t = 1` pass a zero
    all-reduce time (or use the ring version, which gives zero by itself).

    Examples
    --------
    Example 10.6: 30 ms of layer compute over 8 GPUs with 0.3 ms all-reduces.

    >>> tensor_parallel_layer_time(Q_(30, "ms"), 8, Q_(0.3, "ms")).to("ms")
    <Quantity(4.35, 'millisecond')>
    """
    return layer_compute_time / tensor_parallel + 2 * allreduce_time


@formula(
    result=var("s", r"T_{\mathrm{TP}}", description="tensor-parallel layer time with ring all-reduces"),
    reference="Eq. 13 with the ring all-reduce cost model (§10.10.2)",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}", description="sequential compute time of one layer"),
    tensor_parallel=var("", "t", "positive_integer", "tensor-parallel degree"),
    message=var("B", "M", "nonnegative", "activation bytes per all-reduce"),
    bandwidth=var("B/s", r"\beta", description="link bandwidth per direction"),
    latency=var("s", r"\alpha", "nonnegative", "startup latency per ring step"),
    floor=var("s", r"T_{0}", "nonnegative", "per-collective latency floor"),
    example={
        "layer_compute_time": "0.4 ms",
        "tensor_parallel": 8,
        "message": "1 MiB",
        "bandwidth": "450 GB/s",
        "latency": "0.5 us",
    },
)
def tensor_parallel_layer_time_ring(layer_compute_time, tensor_parallel, message, bandwidth, latency, floor=0.0):
    r"""Eq. 13 with each all-reduce priced by the ring model; broadcasts over configurations.

    Parameters
    ----------
    layer_compute_time : Quantity [time]
        Sequential compute time of one layer.
    tensor_parallel : int
        Tensor-parallel degree (also the ring size); 1 means no collectives.
    message : Quantity [information]
        Activation bytes per all-reduce (:func:`activation_message_bytes`).
    bandwidth : Quantity [information / time]
        Link bandwidth per direction.
    latency : Quantity [time]
        Startup latency per ring step.
    floor : Quantity [time], optional
        Per-collective latency floor.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: T_{\mathrm{TP}} = \frac{T_{\mathrm{comp}}}{t} + 2\,T_{\mathrm{AR}}(M, t, \beta, \alpha, T_0)

    Examples
    --------
    A 1 MiB decode all-reduce at TP 1, 2, 4, 8 with the fitted H100 NCCL floor:

    >>> import numpy as np
    >>> cal = NCCL_ALLREDUCE_H100
    >>> tensor_parallel_layer_time_ring(Q_(0.4, "ms"), np.array([1, 2, 4, 8]), Q_(1, "MiB"), cal.bandwidth,
    ...                                 cal.latency, cal.floor).to("us")
    <Quantity([400.         261.82629885 164.83944828 116.34602299], 'microsecond')>
    """
    allreduce = ring_allreduce_time.func(message, tensor_parallel, bandwidth, latency, floor)
    return tensor_parallel_layer_time.func(layer_compute_time, tensor_parallel, allreduce)


@formula(
    result=var("", "S", description="layer speedup over one device"),
    reference="Example 10.6 (§10.10.2)",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}"),
    tensor_parallel=var("", "t", "positive_integer"),
    allreduce_time=var("s", r"T_{\mathrm{AR}}", "nonnegative"),
    example={"layer_compute_time": "30 ms", "tensor_parallel": 8, "allreduce_time": "0.3 ms"},
)
def tensor_parallel_speedup(layer_compute_time, tensor_parallel, allreduce_time):
    r"""Speedup of a tensor-parallel layer over its serial compute time.

    Parameters
    ----------
    layer_compute_time, tensor_parallel, allreduce_time
        As for :func:`tensor_parallel_layer_time`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: S = T_{\mathrm{comp}} / T_{\mathrm{TP}}, \qquad \text{efficiency} = S / t

    Examples
    --------
    Example 10.6, "a 6.9x reduction":

    >>> round(tensor_parallel_speedup(Q_(30, "ms"), 8, Q_(0.3, "ms")), 1)
    6.9
    """
    return layer_compute_time / tensor_parallel_layer_time.func(layer_compute_time, tensor_parallel, allreduce_time)


@formula(
    result=var("", r"\phi", description="share of the layer time spent in collectives"),
    reference="section 10.10.7",
    layer_compute_time=var("s", r"T_{\mathrm{comp}}"),
    tensor_parallel=var("", "t", "positive_integer"),
    allreduce_time=var("s", r"T_{\mathrm{AR}}", "nonnegative"),
    example={"layer_compute_time": "30 ms", "tensor_parallel": 8, "allreduce_time": "0.3 ms"},
)
def collective_overhead_share(layer_compute_time, tensor_parallel, allreduce_time):
    r"""Fraction of a tensor-parallel layer spent in its two all-reduces.

    Parameters
    ----------
    layer_compute_time, tensor_parallel, allreduce_time
        As for :func:`tensor_parallel_layer_time`.

    Returns
    -------
    float

    Notes
    -----
    .. math:: \phi = \frac{2 T_{\mathrm{AR}}}{T_{\mathrm{comp}}/t + 2 T_{\mathrm{AR}}}

    The share grows as per-device compute shrinks, which is why decode, with little compute per layer,
    feels the fixed collective latency most (§10.10.2, §10.10.7).

    Examples
    --------
    >>> round(collective_overhead_share(Q_(30, "ms"), 8, Q_(0.3, "ms")), 3)
    0.138
    """
    return 2 * allreduce_time / tensor_parallel_layer_time.func(layer_compute_time, tensor_parallel, allreduce_time)


# --------------------------------------------------------------------------------------------
# Placement: KV heads under TP


@dataclass(frozen=True, repr=False)
class KvHeadPlacement(Result):
    """Attention and KV heads per tensor-parallel rank.

    ``kv_head_ranges[d]`` is the inclusive ``(first, last)`` KV head held by device ``d``; with more
    ranks than KV heads each KV head is replicated on ``kv_replication`` consecutive devices.
    ``kv_fraction_per_device`` is the share of one sequence's KV cache each device stores.
    """

    tensor_parallel: int
    heads_per_device: int
    kv_heads_per_device: int
    kv_replication: int
    kv_head_ranges: tuple[tuple[int, int], ...]
    kv_fraction_per_device: float


@checked(attention_heads=one(), kv_heads=one(), tensor_parallel=one())
def kv_head_placement(attention_heads: Count, kv_heads: Count, tensor_parallel: Count) -> KvHeadPlacement:
    """Place attention heads and KV-cache heads across tensor-parallel ranks (section 10.10.2).

    Parameters
    ----------
    attention_heads : int
        Query heads per layer; must be divisible by ``tensor_parallel``.
    kv_heads : int
        Key/value heads per layer (equal to ``attention_heads`` for MHA, fewer for GQA, 1 for MQA).
    tensor_parallel : int
        Tensor-parallel degree.

    Returns
    -------
    KvHeadPlacement

    Raises
    ------
    InputError
        If the degree divides neither the KV heads nor is divided by them, or does not divide the
        attention heads.

    Notes
    -----
    Each device computes attention for :math:`H/t` heads and stores the KV cache of its own heads
    (§10.10.2). When :math:`t` exceeds the KV heads (GQA/MQA), each KV head is replicated on
    :math:`t / H_{kv}` devices, so per-device KV memory stops shrinking at one head.

    Examples
    --------
    The chapter's 64-KV-head MHA layout at TP 8 (device 0 holds heads 0-7, device 7 heads 56-63):

    >>> placement = kv_head_placement(64, 64, 8)
    >>> placement.kv_head_ranges[0], placement.kv_head_ranges[7]
    ((0, 7), (56, 63))
    >>> kv_head_placement(64, 8, 8).kv_heads_per_device
    1
    """
    heads, kv, degree = int(attention_heads), int(kv_heads), int(tensor_parallel)
    if kv > heads or heads % kv:
        raise InputError(
            f"kv_head_placement(): argument 'kv_heads' ({kv}) must divide attention_heads ({heads}) (MHA/GQA/MQA)"
        )
    if heads % degree:
        raise InputError(
            f"kv_head_placement(): argument 'tensor_parallel' ({degree}) must divide attention_heads ({heads})"
        )
    if kv % degree and degree % kv:
        raise InputError(
            f"kv_head_placement(): argument 'tensor_parallel' ({degree}) must divide kv_heads ({kv}) or be a "
            "multiple of it"
        )
    shards = int(kv_shards(degree, kv))
    per, replication = kv // shards, degree // shards
    ranges = tuple(((d // replication) * per, (d // replication) * per + per - 1) for d in range(degree))
    return KvHeadPlacement(
        tensor_parallel=degree,
        heads_per_device=heads // degree,
        kv_heads_per_device=per,
        kv_replication=replication,
        kv_head_ranges=ranges,
        kv_fraction_per_device=per / kv,
    )
