"""Roofline estimates of a prefill and of a decode step of a registry model (section 10.8.1).

FLOPs per device and bytes per device (weights per device plus every sequence's KV cache per device)
on one device of a tensor-parallel group; a step takes ``max(FLOPs / peak, bytes / bandwidth)``. They
are lower bounds (no kernel inefficiency, communication or scheduling overhead); a calibrated
step-time model builds on them (``performance.prefill_time`` and ``performance.decode_step_time``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import checked, renamed
from ..memory import kv_cache_bytes
from ..results import Result
from ..types import AcceleratorRef, Bytes, Compute, Count, ModelRef, Precision, Time, Tokens
from ..units import Q_
from ._common import _device_setup
from .flops import decode_flops, prefill_flops, roofline_time

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "RooflineEstimate",
    "roofline_prefill_time",
    "roofline_decode_step_time",
]


# ============================================================================================
# Roofline time of a prefill and of a decode step


@dataclass(frozen=True, repr=False)
class RooflineEstimate(Result):
    """Roofline estimate of a prefill or decode step on one device (arrays broadcast).

    Attributes
    ----------
    time : Quantity [time]
        ``max(compute_time, memory_time)``: a lower bound.
    compute_time, memory_time : Quantity [time]
    flops : Quantity [compute]
        FLOPs per device.
    bytes_moved : Quantity [information]
        Bytes per device (weights + KV).
    tokens : float or array
        Tokens the step produces (prefill: prompt tokens x batch; decode: batch).
    compute_bound : bool or array of bool
    """

    time: Time
    compute_time: Time
    memory_time: Time
    flops: Compute
    bytes_moved: Bytes
    tokens: Tokens
    compute_bound: bool | np.ndarray

    @property
    def tokens_per_second(self) -> Any:
        """Tokens per second at this step time (decode: batch / step time)."""
        return (self.tokens / self.time).to("1/s") * Q_(1, "token")

    @property
    def arithmetic_intensity(self) -> Any:
        """FLOPs per byte moved, with KV traffic included."""
        return (self.flops / self.bytes_moved).to("FLOP/B")


def _estimate(flops, bytes_moved, tokens, peak, bandwidth) -> RooflineEstimate:
    compute = np.asarray(flops / peak, dtype=float)
    memory = np.asarray(bytes_moved / bandwidth, dtype=float)
    time = roofline_time.numeric(flops=flops, bytes_moved=bytes_moved, peak_throughput=peak, memory_bandwidth=bandwidth)

    def out(x):
        x = np.asarray(x)
        return x.item() if x.ndim == 0 else x

    return RooflineEstimate(
        time=Q_(out(time), "s"),
        compute_time=Q_(out(compute), "s"),
        memory_time=Q_(out(memory), "s"),
        flops=Q_(out(np.asarray(flops, dtype=float) + 0 * memory), "FLOP"),
        bytes_moved=Q_(out(np.asarray(bytes_moved, dtype=float) + 0 * compute), "B"),
        tokens=out(np.asarray(tokens) + 0 * compute),
        compute_bound=out(compute >= memory),
    )


@renamed(kv_dtype="kv_precision")
@checked(prompt_tokens="positive_integer", cached_tokens="nonnegative_integer")
def roofline_prefill_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    prompt_tokens: Tokens,
    precision: str = "fp16",
    tensor_parallel: Count = 1,
    batch: Count = 1,
    cached_tokens: Tokens = 0,
    weight_bits: Precision = None,
    kv_precision: Precision = "fp16",
    *,
    registry: Registry | None = None,
) -> RooflineEstimate:
    """Roofline time to prefill ``batch`` prompts of ``prompt_tokens`` on a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    accelerator : str or Accelerator
    prompt_tokens : int or array
        Tokens per prompt.
    precision : str
        Compute precision (sets the peak throughput) and, unless ``weight_bits`` is given, the
        weight precision.
    tensor_parallel : int or array
        Degree ``t``: FLOPs, weights and KV divide as in :mod:`calculator.memory`.
    batch : int or array
        Prompts prefilled together.
    cached_tokens : int or array
        Tokens already cached before each prompt (prefix-cache hit, earlier chunks).
    weight_bits : str or float, optional
        Weight storage when it differs from ``precision`` (``"int4"`` for W4A16).
    kv_precision : str
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    RooflineEstimate
        FLOPs per device = batch x :func:`prefill_flops` / t; bytes per device = weights / t +
        batch x (P + c_0) x KV bytes per token per device (KV written and prefix read).

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> est = roofline_prefill_time(m, h100, 4096, tensor_parallel=8)
    >>> round(est.time.m_as("ms"), 1), est.compute_bound
    (75.3, True)
    """
    name = "roofline_prefill_time"
    setup = _device_setup(
        name, model, accelerator, precision, tensor_parallel, weight_bits, kv_precision, registry=registry
    )
    prompt, sequences, cached = np.asarray(prompt_tokens), np.asarray(batch), np.asarray(cached_tokens)
    flops = (
        sequences
        * prefill_flops.numeric(
            active_parameters=setup["model"].active,
            prompt_tokens=prompt,
            attention_flops=setup["attention"],
            cached_tokens=cached,
        )
        / setup["degree"]
    )
    bytes_moved = setup["weights"] + kv_cache_bytes.numeric(
        batch=sequences, context=prompt + cached, kv_per_token=setup["kv_per_token"]
    )
    return _estimate(flops, bytes_moved, sequences * prompt, setup["peak"], setup["bandwidth"])


@renamed(kv_dtype="kv_precision")
@checked(context="positive_integer")
def roofline_decode_step_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    batch: Count,
    context: Tokens,
    precision: str = "fp16",
    tensor_parallel: Count = 1,
    weight_bits: Precision = None,
    kv_precision: Precision = "fp16",
    *,
    registry: Registry | None = None,
) -> RooflineEstimate:
    """Roofline time of one decode step of ``batch`` sequences at ``context`` tokens each.

    Parameters
    ----------
    model : str or Model
    accelerator : str or Accelerator
    batch : int or array
    context : int or array
        Tokens each sequence holds (its new token attends to all of them).
    precision, tensor_parallel, weight_bits, kv_precision
        As for :func:`roofline_prefill_time`.
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    RooflineEstimate
        FLOPs per device = :func:`decode_flops` / t; bytes per device = weights / t + batch x
        context x KV bytes per token per device. ``tokens_per_second`` is the decode throughput
        bound (at batch 1, about memory bandwidth / weight bytes: section 10.9.3).

    Examples
    --------
    >>> from calculator.registry import Accelerator, Model
    >>> h100 = Accelerator(id="h100", name="H100", provenance="user", vendor="NVIDIA",
    ...     sources=[{"source": "u", "fields": ["memory"]}], memory="80 GiB", memory_nameplate="80 GB",
    ...     memory_bandwidth="3.35 TB/s", dense_throughput={"fp16": "989 TFLOP/s"}, tdp="700 W")
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> step = roofline_decode_step_time(m, h100, batch=np.array([1, 64]), context=4096, tensor_parallel=8)
    >>> step.time.to("ms")
    <Quantity([5.27396184 8.42908007], 'millisecond')>
    """
    name = "roofline_decode_step_time"
    setup = _device_setup(
        name, model, accelerator, precision, tensor_parallel, weight_bits, kv_precision, registry=registry
    )
    sequences, tokens = np.asarray(batch), np.asarray(context)
    flops = (
        decode_flops.numeric(
            active_parameters=setup["model"].active, batch=sequences, context=tokens, attention_flops=setup["attention"]
        )
        / setup["degree"]
    )
    bytes_moved = setup["weights"] + kv_cache_bytes.numeric(
        batch=sequences, context=tokens, kv_per_token=setup["kv_per_token"]
    )
    return _estimate(flops, bytes_moved, sequences, setup["peak"], setup["bandwidth"])
