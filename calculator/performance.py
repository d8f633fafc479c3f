"""Calibrated step-time model and closed-loop benchmark predictor.

The chapter's roofline reasoning is the skeleton (sections 10.2, 10.8, 10.10): a decode step streams
the weights and the KV cache through HBM, a prefill is a pass of matrix products bound by compute,
and tensor parallelism divides both while adding two all-reduces per layer. Serving stacks reach
only part of the peaks and pay fixed costs the roofline ignores, so the model carries a few named
efficiency parameters (:class:`Efficiency`) fitted on public measurements
(``data/calibration/``; ``docs/performance-model.md`` has the fit and its error):

* ``hbm_bandwidth``: the fraction of HBM bandwidth a decode step achieves;
* ``compute``: the fraction of the dense tensor peak that prefill matrix products achieve;
* ``link_bandwidth`` and ``collective_latency``: the all-reduce cost ``floor + 2 (t-1)/t m / (f B)``;
* ``step_overhead``: a fixed cost per decode step (scheduling, kernel launches, sampling).

A benchmark at client concurrency ``C`` (closed loop: each client sends its next request when the
last one ends) adds the serving engine's behaviour (:class:`EngineProfile`): how much KV memory it
claims, how far the prefills of a wave of arrivals run back to back (raising TTFT) rather than
interleaved with decode steps (raising TPOT), and any admission delay. When the KV cache holds fewer
than ``C`` sequences, the rest wait for a slot, and TTFT grows by that wait.

Everything here is vectorized: the :func:`decode_step_time`, :func:`prefill_time` and
:func:`predict_benchmark` arguments broadcast, and the fleet sizer evaluates about 10**6
configurations per second through :func:`step_arrays`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._support import accelerator_of, count, model_of
from .errors import InputError
from .memory import (
    check_tensor_parallel,
    effective_bits_per_weight,
    kv_shard_limit,
    kv_shards,
    model_kv_bytes_per_token,
    weight_bytes,
)
from .parallelism import ring_allreduce_time
from .phases import attention_flops_per_pair, decode_flops, prefill_flops, roofline_time
from .precision import PRECISIONS, check_precision
from .results import Result
from .units import Q_, ureg

__all__ = [
    "ENGINES",
    "WEIGHT_BITS",
    "BenchmarkPrediction",
    "EngineProfile",
    "Efficiency",
    "compute_precision",
    "decode_step_time",
    "engine_profile",
    "predict_benchmark",
    "prefill_time",
    "step_arrays",
]

#: Stored bits per weight of each serving precision, scales included: FP8 keeps one scale per
#: 128x128 block (negligible), INT4 one FP16 scale per group of 128 weights (AWQ/GPTQ layout),
#: FP4 one FP8 scale per 16 weights (NVFP4). Embeddings stay at 16 bits (see ``step_arrays``).
WEIGHT_BITS: dict[str, float] = {
    "fp64": 64.0,
    "fp32": 32.0,
    "tf32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": effective_bits_per_weight.numeric(bits=4, block_size=128, scale_bits=16),
    "fp4": effective_bits_per_weight.numeric(bits=4, block_size=16, scale_bits=8),
}

#: Where an accelerator lacks tensor throughput at a precision, weights are dequantized and the
#: matrix products run at the first of these it has (W8A16 on an A100, W4A16 on an H100).
_COMPUTE_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp8", "bf16", "fp16"),
    "int4": ("int4", "fp8", "bf16", "fp16"),
    "fp8": ("fp8", "bf16", "fp16"),
    "int8": ("int8", "bf16", "fp16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "tf32": ("tf32", "fp32"),
    "fp32": ("fp32", "tf32"),
    "fp64": ("fp64",),
}
# int4/fp4 weights multiply as 16-bit activations on GPUs whose int4/fp4 rate is for int4 activations.
_WEIGHT_ONLY = {"int4"}

ACTIVATION_BYTES = 2.0  # all-reduce payloads are BF16/FP16 activations


@dataclass(frozen=True, repr=False)
class Efficiency(Result):
    """The performance model's named parameters (achieved fractions and fixed costs).

    Attributes
    ----------
    hbm_bandwidth : float
        Achieved fraction of HBM bandwidth when a decode step streams weights and KV cache.
    compute : float
        Achieved fraction of the dense tensor peak in prefill matrix products.
    link_bandwidth : float
        Achieved fraction of the per-direction link bandwidth in a ring all-reduce.
    collective_latency : Quantity [time]
        Latency floor of one all-reduce (launch and synchronization), paid twice per layer.
    step_overhead : Quantity [time]
        Fixed cost of one decode step (scheduling, launches, sampling), independent of size.
    """

    hbm_bandwidth: float
    compute: float
    link_bandwidth: float
    collective_latency: Any
    step_overhead: Any

    def __post_init__(self) -> None:
        for name in ("hbm_bandwidth", "compute", "link_bandwidth"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InputError(f"Efficiency: '{name}' must be a fraction in (0, 1], got {value!r}")
        for name in ("collective_latency", "step_overhead"):
            value = getattr(self, name)
            if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
                raise InputError(f"Efficiency: '{name}' must be a time quantity, got {value!r}")
            if value.magnitude < 0:
                raise InputError(f"Efficiency: '{name}' must be >= 0, got {value!r}")

    def replace(self, **changes: Any) -> Efficiency:
        """A copy with some parameters changed."""
        return dataclasses.replace(self, **changes)


#: The roofline: every peak reached, no fixed costs. A lower bound on any real step time.
ROOFLINE = Efficiency(1.0, 1.0, 1.0, Q_(0.0, "s"), Q_(0.0, "s"))


@dataclass(frozen=True, repr=False)
class EngineProfile(Result):
    """How a serving engine turns the step times into benchmark TTFT and TPOT.

    Attributes
    ----------
    name : str
        Engine name (``"vllm"``, ``"sglang"``, ``"trtllm"``, or ``"generic"``).
    efficiency : Efficiency
        Its fitted step-time parameters.
    prefill_batching : float
        In [0, 1]. 0: each arriving request's prefill interleaves with the other requests' decode
        steps (TTFT is one prefill; TPOT absorbs the others' prefills). 1: the prefills of a wave of
        arrivals run back to back before decoding resumes (TTFT waits for the wave; TPOT does not).
    admission_delay : float
        Mean wait before a request is admitted, in units of the mean time between the other active
        requests' completions (``(B-1)/B`` of the cycle divided by ``B``).
    memory_utilization : float
        Fraction of device memory the engine claims for weights, activations and KV cache.
    memory_reserve : Quantity [information]
        Memory per device kept for activations, graphs and workspaces (not KV cache).
    request_overhead : Quantity [time]
        Fixed time every request spends outside the GPU before its first token (API server,
        tokenization, scheduling, the client's round trip).
    source : str
        What it was fitted on.
    per_accelerator : mapping of str to Efficiency
        Step-time parameters measured on particular accelerators (registry ids), used instead of
        ``efficiency`` there; see :meth:`efficiency_for`.
        What it was fitted on.
    """

    name: str
    efficiency: Efficiency
    prefill_batching: float
    admission_delay: float
    memory_utilization: float
    memory_reserve: Any
    request_overhead: Any
    source: str
    per_accelerator: Mapping[str, Efficiency] = field(default_factory=dict)

    def efficiency_for(self, accelerator: str | None) -> Efficiency:
        """The step-time parameters on ``accelerator`` (its own if measured, else the profile's)."""
        return self.per_accelerator.get(accelerator, self.efficiency) if accelerator else self.efficiency

    def replace(self, **changes: Any) -> EngineProfile:
        """A copy with some parameters changed (``efficiency=...`` included)."""
        return dataclasses.replace(self, **changes)


def _profile(
    name: str,
    eff: tuple[float, float, float, float, float],
    behaviour: tuple[float, float, float, float, float],
    source: str,
) -> EngineProfile:
    hbm, comp, link, floor_us, overhead_ms = eff
    batching, delay, util, reserve_gb, request_ms = behaviour
    return EngineProfile(
        name=name,
        efficiency=Efficiency(hbm, comp, link, Q_(floor_us, "us"), Q_(overhead_ms, "ms")),
        prefill_batching=batching,
        admission_delay=delay,
        memory_utilization=util,
        memory_reserve=Q_(reserve_gb, "GB"),
        request_overhead=Q_(request_ms, "ms"),
        source=source,
    )


_FIT_SOURCE = (
    "fitted by benchmarks/fit_performance.py on data/calibration/serving_benchmarks_h100.csv "
    "(aiconfigurator silicon samples, H100 SXM) and the NCCL floor of nccl_allreduce_single_node.csv"
)

#: Fitted engine profiles; ``None`` is the engine-agnostic default (one profile fitted on all rows).
ENGINES: dict[str | None, EngineProfile] = {
    None: _profile("generic", (0.774, 0.673, 0.479, 29.8, 0.10), (0.108, 0.000, 0.900, 2.00, 101.1), _FIT_SOURCE),
    "vllm": _profile("vllm", (0.777, 0.675, 0.445, 27.1, 0.74), (0.070, 0.000, 0.900, 2.00, 43.7), _FIT_SOURCE),
    "sglang": _profile("sglang", (0.777, 0.675, 0.445, 27.1, 0.00), (0.513, 0.176, 0.818, 2.66, 36.0), _FIT_SOURCE),
    "trtllm": _profile("trtllm", (0.777, 0.675, 0.445, 27.1, 0.29), (0.089, 0.512, 0.950, 1.30, 60.3), _FIT_SOURCE),
}


def engine_profile(engine: str | EngineProfile | None) -> EngineProfile:
    """The profile of ``engine`` (a name, a profile, or ``None`` for the engine-agnostic default)."""
    if isinstance(engine, EngineProfile):
        return engine
    key = engine.lower().replace("-", "").replace("_", "") if isinstance(engine, str) else engine
    aliases = {"tensorrtllm": "trtllm", "trt": "trtllm", "generic": None}
    key = aliases.get(key, key)
    if key not in ENGINES:
        known = ", ".join(sorted(str(k) for k in ENGINES if k))
        raise InputError(f"argument 'engine' must be one of {known} or None, got {engine!r}")
    return ENGINES[key]


# --------------------------------------------------------------------------------------------
# Resolving registry objects into the arrays the step model needs


def _registry() -> Any:
    from .registry import load_registry

    return load_registry()


def compute_precision(accelerator: Any, precision: str) -> str:
    """The precision the matrix products run at for weights stored at ``precision``.

    The accelerator's own rate where it has one (FP8 on an H100); otherwise the weights are
    dequantized to the first precision the accelerator supports (FP8 weights on an A100 run W8A16
    at the BF16 rate). INT4 weights always multiply as 16-bit activations (W4A16).

    Examples
    --------
    >>> compute_precision("a100-sxm-80gb", "fp8"), compute_precision("h100-sxm", "fp8")
    ('bf16', 'fp8')
    """
    device = accelerator_of(accelerator)
    name = check_precision(precision)
    chain = _COMPUTE_FALLBACK[name][1:] if name in _WEIGHT_ONLY else _COMPUTE_FALLBACK[name]
    for candidate in chain:
        if candidate in device.dense_throughput:
            return candidate
    raise InputError(
        f"accelerator '{device.id}' has no tensor throughput usable for {name} weights "
        f"(it lists {sorted(device.dense_throughput)})"
    )


def step_arrays(model: Any, accelerator: Any, precision: str, kv_precision: str | None = None) -> dict[str, float]:
    """The numbers the step model needs for one (model, accelerator, precision), in SI units.

    Returns a dict of floats: ``weight_bytes`` (resident, whole model), ``streamed_params``
    (parameters read by a decode step of one token: all but the input embedding),
    ``shared_params`` and ``expert_params`` (for mixture-of-experts streaming), ``experts``,
    ``experts_per_token``,
    ``bytes_per_param``, ``kv_bytes_per_token``, ``kv_shards_max`` (KV is split over at most this
    many tensor-parallel ranks), ``attention_flops_per_pair``, ``layers``, ``hidden``,
    and the accelerator's ``memory``, ``hbm_bandwidth``, ``peak_flops`` and ``link_bandwidth``
    (NVLink per direction, or the host link where there is none).

    Examples
    --------
    >>> step_arrays("llama-3.1-70b", "h100-sxm", "fp8")["kv_bytes_per_token"]
    327680.0
    """
    spec = model_of(model)
    device = accelerator_of(accelerator)
    name = check_precision(precision)
    if spec.kind != "transformer":
        raise InputError(f"the performance model covers transformer LLMs; model '{spec.id}' is a {spec.kind} model")
    kv_name = check_precision(kv_precision or ("bf16" if PRECISIONS[name] < 16 else name), "kv_precision")
    hidden = spec.hidden_size or spec.attention_heads * spec.head_dim
    embedding = float(spec.vocab_size * hidden) if spec.vocab_size else 0.0
    bits = WEIGHT_BITS[name]
    quantized = spec.parameters - embedding
    resident = weight_bytes.numeric(parameters=quantized, bits_per_weight=bits) + weight_bytes.numeric(
        parameters=embedding, bits_per_weight=max(bits, 16.0)
    )
    active = spec.active - embedding
    k, experts = spec.experts_per_token, spec.experts
    per_expert = (spec.parameters - spec.active) / (experts - k) if experts > k else 0.0
    shared = active - k * per_expert
    kv = model_kv_bytes_per_token(spec, kv_name).m_as("B/token")
    link = device.nvlink_bandwidth
    if link is None:
        link = _registry().interconnect(device.host_link).bandwidth if device.host_link else Q_(16, "GB/s")
    return {
        "weight_bytes": float(resident),
        "streamed_params": float(active),
        "shared_params": float(shared),
        "expert_params": float(per_expert),
        "experts": float(experts),
        "experts_per_token": float(k),
        "bytes_per_param": bits / 8,
        "kv_bytes_per_token": float(kv),
        "kv_shards_max": float(kv_shard_limit(spec)),
        "attention_flops_per_pair": attention_flops_per_pair(spec).m_as("FLOP"),
        "layers": float(spec.layers),
        "hidden": float(hidden),
        "memory": device.memory.m_as("B"),
        "hbm_bandwidth": device.memory_bandwidth.m_as("B/s"),
        "peak_flops": device.peak_throughput(compute_precision(device, name)).m_as("FLOP/s"),
        "link_bandwidth": link.m_as("B/s"),
    }


# --------------------------------------------------------------------------------------------
# Step times on plain arrays (seconds); the public functions below wrap them with units.


def _allreduce_seconds(a: dict[str, Any], eff: Efficiency, tp: Any, message_bytes: Any) -> Any:
    """One ring all-reduce of ``message_bytes`` over ``tp`` ranks at the achieved link bandwidth."""
    return ring_allreduce_time.numeric(
        message=message_bytes,
        devices=tp,
        bandwidth=eff.link_bandwidth * a["link_bandwidth"],
        latency=0.0,
        floor=eff.collective_latency.m_as("s"),
    )


def _streamed_bytes(a: dict[str, Any], batch: Any) -> Any:
    """Weight bytes one decode step reads: shared weights plus the experts the batch touches."""
    if a["experts"] <= 1:
        return a["streamed_params"] * a["bytes_per_param"]
    e, k = a["experts"], a["experts_per_token"]
    touched = e * (1 - (1 - k / e) ** batch)
    return (a["shared_params"] + touched * a["expert_params"]) * a["bytes_per_param"]


def decode_step_seconds(a: dict[str, Any], eff: Efficiency, tp: Any, batch: Any, context: Any, tokens: Any = 1) -> Any:
    """One decode step of ``batch`` sequences holding ``context`` tokens each (plain arrays).

    ``tokens`` new tokens per sequence are processed in the step (more than one when a speculative
    round verifies its draft): compute and all-reduce payloads scale with it, weight and KV traffic
    do not.
    """
    shards = kv_shards(tp, a["kv_shards_max"])
    memory_bytes = _streamed_bytes(a, batch * tokens) / tp + batch * context * a["kv_bytes_per_token"] / shards
    flops = (
        decode_flops.numeric(
            active_parameters=a["streamed_params"],
            batch=batch * tokens,
            context=context,
            attention_flops=a["attention_flops_per_pair"],
        )
        / tp
    )
    step = roofline_time.numeric(
        flops=flops,
        bytes_moved=memory_bytes,
        peak_throughput=eff.compute * a["peak_flops"],
        memory_bandwidth=eff.hbm_bandwidth * a["hbm_bandwidth"],
    )
    t_comm = 2 * a["layers"] * _allreduce_seconds(a, eff, tp, batch * tokens * a["hidden"] * ACTIVATION_BYTES)
    return eff.step_overhead.m_as("s") + step + t_comm


def prefill_seconds(a: dict[str, Any], eff: Efficiency, tp: Any, prompt: Any) -> Any:
    """Prefill of one prompt of ``prompt`` tokens (plain arrays; causal attention included)."""
    flops = (
        prefill_flops.numeric(
            active_parameters=a["streamed_params"],
            prompt_tokens=prompt,
            attention_flops=a["attention_flops_per_pair"],
            cached_tokens=0,
        )
        / tp
    )
    step = roofline_time.numeric(
        flops=flops,
        bytes_moved=_streamed_bytes(a, prompt) / tp,
        peak_throughput=eff.compute * a["peak_flops"],
        memory_bandwidth=eff.hbm_bandwidth * a["hbm_bandwidth"],
    )
    t_comm = 2 * a["layers"] * _allreduce_seconds(a, eff, tp, prompt * a["hidden"] * ACTIVATION_BYTES)
    return step + t_comm


def kv_capacity_tokens(a: dict[str, Any], profile: EngineProfile, tp: Any) -> Any:
    """KV-cache tokens a replica of ``tp`` devices holds under ``profile``'s memory policy."""
    per_device = profile.memory_utilization * a["memory"] - a["weight_bytes"] / tp - profile.memory_reserve.m_as("B")
    return np.maximum(per_device, 0.0) * kv_shards(tp, a["kv_shards_max"]) / a["kv_bytes_per_token"]


# --------------------------------------------------------------------------------------------
# Public, unit-carrying functions


def _seconds(values: Any) -> Any:
    """Seconds as a quantity; a 0-d result becomes a plain float."""
    return Q_(float(values) if np.ndim(values) == 0 else values, "s")


def _efficiency(engine: Any, efficiency: Efficiency | None, accelerator: Any = None) -> Efficiency:
    if efficiency is not None:
        return efficiency
    device = accelerator_of(accelerator).id if accelerator is not None else None
    return engine_profile(engine).efficiency_for(device)


def _counts(function: str, argument: str, value: Any, minimum: int = 1) -> np.ndarray:
    return np.asarray(count(function, argument, value, minimum), dtype=float)


def _tp(model: Any, tensor_parallel: Any, function: str) -> np.ndarray:
    return np.asarray(check_tensor_parallel(model_of(model), tensor_parallel, function), dtype=float)


def decode_step_time(
    model: Any,
    accelerator: Any,
    precision: str,
    tensor_parallel: Any,
    batch: Any,
    context: Any,
    *,
    engine: str | EngineProfile | None = None,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
) -> Any:
    r"""Time of one decode step of a tensor-parallel replica (calibrated).

    Parameters
    ----------
    model, accelerator : str or registry object
        Registry ids (or aliases such as ``"meta-llama/Llama-3.1-70B"``) or objects.
    precision : str
        Weight precision (``"bf16"``, ``"fp8"``, ``"int4"``, ``"fp4"``, ...).
    tensor_parallel, batch : int or array
        Devices per replica and sequences in the batch.
    context : int or array
        Tokens held per sequence (prompt plus tokens generated so far).
    engine : str, EngineProfile or None
        Whose fitted efficiency to use; ``None`` for the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the engine's parameters (``ROOFLINE`` gives the pure roofline bound).
    kv_precision : str, optional
        KV-cache precision; defaults to 16-bit.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math::
        t_{\mathrm{step}} = t_0 + \max\!\left(\frac{W_s/t + B S m_{\mathrm{tok}}/t_{kv}}{f_{bw} BW},
        \frac{B (2 N_a + 4 S d_a L)/t}{f_c R}\right) + 2 L \left(\alpha + \frac{2(t-1)}{t}
        \frac{B H b_a}{f_l B_l}\right)

    Examples
    --------
    The chapter's bandwidth floor of the reference replica (70B FP16 over 8 H100s, seed L2210):

    >>> from calculator.performance import ROOFLINE
    >>> step = decode_step_time("chapter-70b-mha", "h100-sxm", "fp16", 8, 1, 1, efficiency=ROOFLINE)
    >>> round(step.m_as("ms"), 1)
    5.2
    """
    a = step_arrays(model, accelerator, precision, kv_precision)
    tp = _tp(model, tensor_parallel, "decode_step_time")
    seconds = decode_step_seconds(
        a,
        _efficiency(engine, efficiency, accelerator),
        tp,
        _counts("decode_step_time", "batch", batch),
        _counts("decode_step_time", "context", context, 0),
    )
    return _seconds(seconds)


def prefill_time(
    model: Any,
    accelerator: Any,
    precision: str,
    tensor_parallel: Any,
    prompt_tokens: Any,
    *,
    engine: str | EngineProfile | None = None,
    efficiency: Efficiency | None = None,
) -> Any:
    """Time to prefill one prompt on a tensor-parallel replica (calibrated; compute bound).

    Examples
    --------
    >>> prefill_time("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024).to("ms")  # doctest: +ELLIPSIS
    <Quantity(..., 'millisecond')>
    """
    a = step_arrays(model, accelerator, precision)
    tp = _tp(model, tensor_parallel, "prefill_time")
    prompt = _counts("prefill_time", "prompt_tokens", prompt_tokens)
    seconds = prefill_seconds(a, _efficiency(engine, efficiency, accelerator), tp, prompt)
    return _seconds(seconds)


# --------------------------------------------------------------------------------------------
# Closed-loop benchmark


@dataclass(frozen=True, repr=False)
class BenchmarkPrediction(Result):
    """What a closed-loop serving benchmark would report (means over the run).

    Attributes
    ----------
    ttft, tpot : Quantity [time]
        Mean time to first token and mean time per output token after the first.
    throughput : Quantity [request / time]
        Completed requests per second.
    output_throughput : Quantity [token / time]
        Output tokens per second (whole replica).
    active_batch : float or array
        Sequences decoding together (the concurrency, or the KV-cache limit if lower).
    max_concurrency : float or array
        Sequences the KV cache holds at the benchmark's lengths.
    memory_limited : bool or array
        True where clients wait for a KV slot (concurrency above ``max_concurrency``).
    prefill_time, decode_step_time : Quantity [time]
        The step model's prefill of one prompt and decode step at the active batch.
    engine : str
        The engine profile used.
    """

    ttft: Any
    tpot: Any
    throughput: Any
    output_throughput: Any
    active_batch: Any
    max_concurrency: Any
    memory_limited: Any
    prefill_time: Any
    decode_step_time: Any
    engine: str


def closed_loop_seconds(
    a: dict[str, Any],
    profile: EngineProfile,
    tp: Any,
    input_tokens: Any,
    output_tokens: Any,
    concurrency: Any,
    efficiency: Efficiency | None = None,
) -> dict[str, Any]:
    """The closed-loop benchmark model on plain arrays (seconds); see :func:`predict_benchmark`."""
    eff = efficiency or profile.efficiency
    mean_context = input_tokens + output_tokens / 2
    capacity = np.floor(kv_capacity_tokens(a, profile, tp) / mean_context)
    batch = np.maximum(np.minimum(concurrency, capacity), 1.0)
    t_pf = prefill_seconds(a, eff, tp, input_tokens)
    t_dec = decode_step_seconds(a, eff, tp, batch, mean_context)
    decode_steps = np.maximum(output_tokens - 1, 1.0)
    work = batch * t_pf + decode_steps * t_dec  # busy time per cycle of the active set
    # Admission delay: a fraction of the mean time between the other active requests' completions
    # (zero for a lone client, whose request never waits behind others).
    wait = profile.admission_delay * (batch - 1) / batch * work / batch
    s = profile.prefill_batching
    ttft_active = t_pf * (1 + s * (batch - 1)) + t_dec / 2 + wait + profile.request_overhead.m_as("s")
    tpot = t_dec + (1 - s) * (batch - 1) * t_pf / decode_steps
    throughput = batch / (ttft_active + decode_steps * tpot)  # Little's law on the active set
    ttft = ttft_active + np.maximum(concurrency - batch, 0.0) / throughput
    return {
        "ttft": ttft,
        "tpot": tpot,
        "throughput": throughput,
        "active_batch": batch,
        "max_concurrency": capacity,
        "memory_limited": concurrency > capacity,
        "prefill": t_pf,
        "decode_step": t_dec,
    }


def predict_benchmark(
    model: Any,
    accelerator: Any,
    precision: str,
    tensor_parallel: Any,
    input_tokens: Any,
    output_tokens: Any,
    concurrency: Any,
    engine: str | EngineProfile | None = None,
    *,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
) -> BenchmarkPrediction:
    """Mean TTFT and TPOT a closed-loop serving benchmark reports at client concurrency ``C``.

    Parameters
    ----------
    model, accelerator : str or registry object
        Registry ids or aliases (``"Qwen/Qwen3-32B"``, ``"h100_sxm"``) or objects.
    precision : str
        Weight precision (``"bf16"``, ``"fp8"``, ``"int4"``, ``"fp4"``).
    tensor_parallel : int or array
        Devices per replica.
    input_tokens, output_tokens : int or array
        Fixed prompt and output lengths of every request.
    concurrency : int or array
        Clients, each sending its next request when its last one completes.
    engine : {"vllm", "sglang", "trtllm"} or None
        The serving engine whose fitted profile to use; ``None`` uses the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the profile's step-time parameters.
    kv_precision : str, optional
        KV-cache precision; defaults to 16-bit.

    Returns
    -------
    BenchmarkPrediction
        ``.ttft``, ``.tpot``, throughputs, the active batch and whether memory limits it.

    Notes
    -----
    Per cycle of the ``B`` active requests (``B = min(C, KV capacity)``) the replica does ``B``
    prefills and ``O - 1`` decode steps, so the cycle lasts ``B t_pf + (O-1) t_dec`` plus any
    admission delay. The engine's ``prefill_batching`` ``s`` splits the others' prefills between
    the waiting for the first token and the decode gaps:
    ``TTFT = t_pf (1 + s (B-1)) + t_dec/2``, ``TPOT = t_dec + (1-s)(B-1) t_pf / (O-1)``.
    Clients beyond the KV capacity wait ``(C - B)/X`` for a slot, ``X`` being the throughput.

    Examples
    --------
    Llama-3.1-70B FP8 on 8 H100s under vLLM, 16 clients (measured: TTFT 93 ms, TPOT 11.4 ms):

    >>> p = predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 8, 1024, 1024, 16, engine="vllm")
    >>> round(p.ttft.m_as("ms")), round(p.tpot.m_as("ms")), p.memory_limited
    (133, 10, False)
    """
    a = step_arrays(model, accelerator, precision, kv_precision)
    profile = engine_profile(engine)
    tp = _tp(model, tensor_parallel, "predict_benchmark")
    result = closed_loop_seconds(
        a,
        profile,
        tp,
        _counts("predict_benchmark", "input_tokens", input_tokens),
        _counts("predict_benchmark", "output_tokens", output_tokens),
        _counts("predict_benchmark", "concurrency", concurrency),
        _efficiency(engine, efficiency, accelerator),
    )
    scalar = all(np.ndim(v) == 0 for v in (tensor_parallel, input_tokens, output_tokens, concurrency))

    def out(value: Any) -> Any:
        return np.asarray(value).item() if scalar else value

    return BenchmarkPrediction(
        ttft=Q_(out(result["ttft"]), "s"),
        tpot=Q_(out(result["tpot"]), "s"),
        throughput=Q_(out(result["throughput"]), "request/s"),
        output_throughput=Q_(out(result["throughput"] * np.asarray(output_tokens, dtype=float)), "token/s"),
        active_batch=out(result["active_batch"]),
        max_concurrency=out(result["max_concurrency"]),
        memory_limited=out(result["memory_limited"]),
        prefill_time=Q_(out(result["prefill"]), "s"),
        decode_step_time=Q_(out(result["decode_step"]), "s"),
        engine=profile.name,
    )
