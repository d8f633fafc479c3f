"""The closed-loop benchmark: what a serving benchmark reports at a client concurrency (:func:`predict_benchmark`).

Engines run iteration-level continuous batching with a token budget per iteration (vLLM
``max_num_batched_tokens``, SGLang ``chunked_prefill_size``, TensorRT-LLM ``max_num_tokens``), admit
waiting requests once per iteration while KV memory allows, and either mix prefill chunks into decode
iterations (vLLM, TensorRT-LLM) or run prefill batches that pause decoding (SGLang). A closed-loop
benchmark starts all clients at once and sends about ten requests per client; the model
(:func:`closed_loop_seconds`) follows the prefill groups that burst creates through the run (see
``docs/performance-model.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import model_of
from ..errors import InputError
from ..results import Result
from ..types import AcceleratorRef, Count, ModelRef, Tokens
from ..units import Q_
from ._common import _counts, _efficiency, _tp
from .arrays import StepArrays, step_arrays
from .engines import Efficiency, EngineProfile, engine_profile, kv_capacity_tokens
from .pricing import iteration_seconds, prefill_seconds

if TYPE_CHECKING:
    from ..registry import Registry


__all__ = [
    "BenchmarkPrediction",
    "predict_benchmark",
]


# --------------------------------------------------------------------------------------------
# Closed-loop benchmark


@dataclass(frozen=True, repr=False)
class BenchmarkPrediction(Result):
    """What a closed-loop serving benchmark would report (means over the run), with its error band.

    Attributes
    ----------
    ttft, tpot : Quantity [time]
        Mean time to first token and mean time per output token after the first.
    ttft_interval, tpot_interval : tuple of Quantity
        ``(low, high)``: the range that held the measured value in 80 % of cross-validated
        predictions (``calculator.uncertainty``), wider where the accelerator has no kernel tables.
    throughput : Quantity [request / time]
        Completed requests per second.
    output_throughput : Quantity [token / time]
        Output tokens per second (whole replica).
    active_batch : float or array
        Sequences decoding together (the concurrency, or the KV-cache limit if lower).
    max_concurrency : float or array
        Sequences the KV cache admits at the benchmark's lengths under the engine's policy.
    memory_limited : bool or array
        True where clients wait for a KV slot (concurrency above ``max_concurrency``).
    prefill_time, decode_step_time : Quantity [time]
        One prompt's prefill alone and the decode step at the active batch.
    engine : str
        The engine profile used.
    measured_kernels : bool
        True when the step times come from kernel measurements of this accelerator and precision;
        False when they are the generic efficiency curve at the registry peaks.
    """

    ttft: Any
    tpot: Any
    ttft_interval: Any
    tpot_interval: Any
    throughput: Any
    output_throughput: Any
    active_batch: Any
    max_concurrency: Any
    memory_limited: Any
    prefill_time: Any
    decode_step_time: Any
    engine: str
    measured_kernels: bool


#: Requests each client sends in a benchmark run (the usual harness sends about ten times the
#: concurrency): the burst of the first wave is averaged over this many requests per client.
REQUESTS_PER_CLIENT = 10


def closed_loop_seconds(
    a: StepArrays,
    profile: EngineProfile,
    tp: Any,
    input_tokens: Any,
    output_tokens: Any,
    concurrency: Any,
    efficiency: Efficiency | None = None,
    requests_per_client: float = REQUESTS_PER_CLIENT,
) -> dict[str, Any]:
    """The closed-loop benchmark model on plain arrays (seconds); see :func:`predict_benchmark`."""
    eff = efficiency or profile.efficiency
    tp, inputs, outputs, clients = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (tp, input_tokens, output_tokens, concurrency))
    )
    decode_steps = np.maximum(outputs - 1, 1.0)
    context = inputs + outputs / 2
    # Admission: KV for the prompt plus the reserved share of the output; a sequence cap.
    reserved = inputs + profile.output_reservation * outputs
    kv_limit = np.floor(kv_capacity_tokens(a, profile, tp) / reserved)
    tokens_cap, seqs_cap = profile.limits(a.memory, a.accelerator)
    budget = float(tokens_cap)
    max_seqs = float(min(seqs_cap, tokens_cap) if profile.mixed_batching else seqs_cap)
    batch = np.maximum(np.minimum(np.minimum(clients, kv_limit), max_seqs), 1.0)
    t_dec = iteration_seconds(a, eff, tp, batch, context)
    overhead = profile.request_overhead.m_as("s")

    # The first wave: every client's prompt arrives at once and is prefilled budget by budget.
    burst_iterations = np.ceil(batch * inputs / budget)
    burst_tokens = batch * inputs / burst_iterations
    t_burst = iteration_seconds(a, eff, tp, 0, 0, burst_tokens, burst_tokens / inputs, 0)
    first_wave = overhead + (burst_iterations + 1) / 2 * t_burst

    if profile.mixed_batching:
        # Each prompt is prefilled beside the running decodes: in full-budget chunks plus a
        # remainder where the engine chunks, whole in one iteration where it does not.
        room = np.maximum(budget - batch, budget / 4)
        running = np.maximum(batch - 1, 0.0)
        if profile.chunked_prefill:
            full = np.floor(inputs / room)
            rest = inputs - full * room
            t_full = iteration_seconds(a, eff, tp, running, context, room, room / inputs, inputs / 2 * (full > 1))
        else:
            full = np.zeros_like(inputs)
            rest = inputs
            t_full = np.zeros_like(inputs)
        t_rest = iteration_seconds(a, eff, tp, running, context, rest, rest / inputs, inputs * (full > 0))
        iterations = full + (rest > 0)  # iterations one prompt's prefill takes
        t_group = full * t_full + np.where(rest > 0, t_rest, 0.0)
        extra = np.maximum(t_group - iterations * t_dec, 0.0)  # what those iterations add over decoding
        groups = batch
    else:
        # Prefill batches of up to the budget run alone and pause decoding.
        groups = burst_iterations
        iterations = np.ones_like(groups)
        t_group = t_burst
        extra = t_burst
    # The clients' prompts arrive in waves (all start together and keep their order): a request
    # waits for ``persistence x others ** exponent / 2`` of the other prefills of its wave (all of
    # the half-wave under prefill-first scheduling; large waves spread out where prefill mixes with
    # decoding); the rest of the others' prefills land in its decode steps. Beyond one prefill
    # iteration per decode step the replica is prefill bound and the groups queue.
    persistence = profile.wave_persistence if profile.mixed_batching else 1.0  # prefill-first keeps waves
    others = groups - 1
    exponent = profile.wave_exponent if profile.mixed_batching else 1.0
    ahead = np.minimum(persistence * others**exponent, others) / 2
    in_decode = np.minimum((others - ahead) * iterations, decode_steps)
    tpot = t_dec + in_decode / np.maximum(iterations, 1.0) * extra / decode_steps
    behind = np.maximum((others - ahead) * iterations - decode_steps, 0.0) / np.maximum(iterations, 1.0) * t_group
    steady = overhead + t_dec / 2 + t_group * (1 + ahead) + behind
    ttft_active = steady + np.maximum(first_wave - steady, 0.0) / requests_per_client
    throughput = batch / (ttft_active + decode_steps * tpot)
    waiting = np.maximum(clients - batch, 0.0)
    ttft = ttft_active + waiting / throughput
    return {
        "ttft": ttft,
        "tpot": tpot,
        "throughput": throughput,
        "active_batch": batch,
        "max_concurrency": kv_limit,
        "memory_limited": clients > kv_limit,
        "prefill": prefill_seconds(a, eff, tp, inputs),
        "decode_step": t_dec,
    }


def predict_benchmark(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    input_tokens: Tokens,
    output_tokens: Tokens,
    concurrency: Count,
    engine: str | EngineProfile | None = None,
    *,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
    requests_per_client: float = REQUESTS_PER_CLIENT,
    registry: Registry | None = None,
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
        Clients, each sending its next request when its last one completes; all start together.
    engine : {"vllm", "sglang", "trtllm"} or None
        The serving engine whose scheduler and costs to use; ``None`` uses the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the profile's costs and kernel pricing.
    kv_precision : str, optional
        KV-cache precision; defaults to 16-bit.
    requests_per_client : float
        Requests each client sends in the run (the first wave's burst is averaged over them).
    registry : Registry, optional
        Where ids resolve (default: the packaged registry).

    Returns
    -------
    BenchmarkPrediction
        ``.ttft``, ``.tpot`` with their 80 % intervals, throughputs, the active batch and whether
        memory limits it.

    Notes
    -----
    The engine admits ``B = min(C, KV capacity / (I + r O), max_num_seqs)`` requests (``r``: the
    output share its admission reserves). All ``C`` prompts arrive at once; a budget of ``T`` tokens
    per iteration prefills them in ``ceil(B I / T)`` iterations, and those groups re-arrive one
    cycle later. Mixing engines prefill a group in one iteration beside the running decodes (TTFT is
    that iteration; the other groups' iterations stretch TPOT); SGLang's prefill batches pause
    decoding, so a wave keeps waiting for the batches ahead of it. Clients beyond ``B`` wait
    ``(C - B) / X`` for a slot. ``docs/performance-model.md`` derives each term.

    Examples
    --------
    Qwen3-32B BF16 on 4 H100s under vLLM 0.12, 32 clients, 1024/512 tokens (measured: TTFT 199.9 ms,
    TPOT 14.2 ms); the measured values lie inside the 80 % intervals:

    >>> p = predict_benchmark("Qwen/Qwen3-32B", "h100_sxm", "bf16", 4, 1024, 512, 32, engine="vllm")
    >>> bool(p.ttft_interval[0].m_as("ms") < 199.9 < p.ttft_interval[1].m_as("ms")), p.memory_limited
    (True, False)
    >>> bool(p.tpot_interval[0].m_as("ms") < 14.2 < p.tpot_interval[1].m_as("ms"))
    True
    """
    from ..uncertainty import prediction_interval

    a = step_arrays(model, accelerator, precision, kv_precision, registry=registry)
    profile = engine_profile(engine)
    tp = _tp(model_of(model, registry), tensor_parallel, "predict_benchmark")
    inputs = _counts("predict_benchmark", "input_tokens", input_tokens)
    outputs = _counts("predict_benchmark", "output_tokens", output_tokens)
    limit = model_of(model, registry).max_context
    if limit is not None and np.any(inputs + outputs > limit):
        longest = float(np.max(inputs + outputs))
        raise InputError(
            f"predict_benchmark(): a request of {longest:,.0f} tokens (input_tokens + output_tokens) exceeds the "
            f"model's context limit of {limit:,} tokens"
        )
    result = closed_loop_seconds(
        a,
        profile,
        tp,
        inputs,
        outputs,
        _counts("predict_benchmark", "concurrency", concurrency),
        _efficiency(engine, efficiency, a.accelerator),
        requests_per_client,
    )
    if np.any(np.asarray(result["max_concurrency"]) < 1):
        weights = float(np.max(a.weight_bytes / np.asarray(tp, dtype=float)))
        raise InputError(
            f"predict_benchmark(): the weights ({weights / 1e9:,.1f} GB per device at tensor_parallel "
            f"{tensor_parallel}) leave no room for one request's KV cache on {a.accelerator} under {profile.name}'s "
            "memory policy; use a larger tensor_parallel, a smaller precision or shorter requests"
        )
    scalar = all(np.ndim(v) == 0 for v in (tensor_parallel, input_tokens, output_tokens, concurrency))

    def out(value: Any) -> Any:
        value = np.asarray(value)
        return value.item() if scalar else value

    ttft, tpot = result["ttft"], result["tpot"]
    bands = prediction_interval(profile.name, a.accelerator, a.measured)
    return BenchmarkPrediction(
        ttft=Q_(out(ttft), "s"),
        tpot=Q_(out(tpot), "s"),
        ttft_interval=(Q_(out(ttft * bands["ttft"][0]), "s"), Q_(out(ttft * bands["ttft"][1]), "s")),
        tpot_interval=(Q_(out(tpot * bands["tpot"][0]), "s"), Q_(out(tpot * bands["tpot"][1]), "s")),
        throughput=Q_(out(result["throughput"]), "request/s"),
        output_throughput=Q_(out(result["throughput"] * outputs), "token/s"),
        active_batch=out(result["active_batch"]),
        max_concurrency=out(result["max_concurrency"]),
        memory_limited=out(result["memory_limited"]),
        prefill_time=Q_(out(result["prefill"]), "s"),
        decode_step_time=Q_(out(result["decode_step"]), "s"),
        engine=profile.name,
        measured_kernels=a.measured,
    )
