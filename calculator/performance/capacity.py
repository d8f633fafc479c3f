"""How many sequences of a length fit on a replica under an engine's memory policy: memory counted once.

The chapter's memory fit (:func:`~calculator.memory.model_memory_fit`, section 10.7.1) takes a device's
memory less the weights and a reserve the user names. A serving engine keeps more back: vLLM claims a
fraction of the device (``gpu_memory_utilization``) and reserves activations and CUDA graphs inside it,
SGLang sizes ``mem_fraction_static`` from the device and its chunk. :func:`engine_memory_fit` answers with
the engine's policy (:func:`~calculator.performance.engines.kv_capacity_tokens`), the same numbers the
benchmark predictor, the fleet sizer and the simulator hold (``tests/test_memory_counted_once.py``), and
``servecalc fit`` and the Memory fit page show it beside the chapter's formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import count, model_of
from ..results import Result

__all__ = ["EngineMemoryFit", "engine_memory_fit"]


def loads_online(model: Any, precision: str, profile: Any) -> bool:
    """Whether ``profile``'s engine reaches ``precision`` by quantizing the 16-bit checkpoint as it loads it.

    The engine quantizes at load time (``EngineProfile.online_quantization``: vLLM's and SGLang's FP8) and the
    registry lists no checkpoint of ``model`` (resolved) at that precision: it loads the 16-bit weights first.
    """
    return precision in profile.online_quantization and model.checkpoint(precision) is None


def load_shortfall(loaded: Any, profile: Any, stage_tp: float) -> tuple[float, float] | None:
    """Where ``profile`` cannot hold the 16-bit weights it quantizes at load time: what they and its policy take.

    ``(16-bit weights per device, bytes the memory policy uses)`` for ``loaded``, the 16-bit step arrays laid out
    as the replica; None where the policy holds them (:func:`~calculator.performance.engines.usable_kv_bytes` of
    them above zero), as a launch command that quantizes online needs. The sizer rejects such a replica (code
    ``load``); the predictor and the memory fit say so.
    """
    from .engines import usable_kv_bytes

    left = float(np.asarray(usable_kv_bytes(loaded, profile, stage_tp)).reshape(-1)[0])
    if left > 0:
        return None
    weights = float(np.asarray(loaded.weights_per_device(stage_tp)).reshape(-1)[0])
    return weights, weights + left


@dataclass(frozen=True, repr=False)
class EngineMemoryFit(Result):
    """Sequences that fit on one replica under an engine's memory policy (:func:`engine_memory_fit`).

    Attributes
    ----------
    engine : str
        The engine profile whose memory policy was applied (``generic`` without one).
    memory_policy : str
        The policy in words: what the engine claims of each device and keeps back.
    kv_precision : str
        The KV cache's precision.
    weights_fit : bool
        Whether the weights fit beside the engine's reserve at all (else ``sequences`` is 0 and ``reason`` says so).
    kv_tokens : int
        KV-cache tokens the replica holds (whole blocks).
    sequences : int
        Sequences of ``context`` tokens held at once (the KV cache alone; the engine's sequence cap aside),
        each in whole blocks of ``block`` tokens.
    max_context : int
        The longest context ``batch`` sequences can each hold (whole blocks, capped at the model's context limit).
    reason : str
        Empty where the weights fit; else why nothing fits.
    block : int
        Tokens per KV-cache block under the engine (a sequence holds whole blocks).
    """

    engine: str
    memory_policy: str
    kv_precision: str
    weights_fit: bool
    kv_tokens: int
    sequences: int
    max_context: int
    reason: str = ""
    block: int = 1


def engine_memory_fit(
    model: Any,
    accelerator: Any,
    precision: str,
    context: int,
    tensor_parallel: int = 1,
    *,
    batch: int = 1,
    engine: Any = None,
    kv_precision: str | None = None,
    data_parallel: int = 1,
    expert_parallel: int = 1,
    redundant_experts: int = 0,
    registry: Any = None,
) -> EngineMemoryFit:
    """Sequences of ``context`` tokens one replica holds in its KV cache under ``engine``'s memory policy.

    The replica is ``tensor_parallel`` GPUs (``x data_parallel`` attention ranks of a mixture of experts);
    the KV cache at ``kv_precision`` (default: what the engine runs for these weights); ``redundant_experts``
    as for :func:`~calculator.performance.predict_benchmark`. The count is the
    one the benchmark predictor, the fleet sizer and the simulator hold for the same setup.

    Examples
    --------
    >>> fit = engine_memory_fit("llama-3.1-70b", "h100-sxm", "fp8", 2300, 1, engine="vllm")
    >>> fit.engine, fit.kv_precision, fit.block, fit.sequences == fit.kv_tokens // 2304, fit.sequences < 35
    ('vllm', 'fp8', 16, True, True)
    """
    from ._common import replica_layout
    from .arrays import kv_cache_precision, step_arrays
    from .engines import engine_profile, kv_capacity_tokens, usable_kv_bytes
    from .scheduler import block_slack

    name = "engine_memory_fit"
    tokens = count(name, "context", context, 1)
    held = count(name, "batch", batch, 1)
    tp = count(name, "tensor_parallel", tensor_parallel, 1)
    profile = engine_profile(engine, registry)
    kv = kv_precision or kv_cache_precision(model, accelerator, precision, profile.name, registry=registry)
    a = step_arrays(model, accelerator, precision, kv, engine=profile, registry=registry)
    a, group = replica_layout(a, np.asarray([float(tp)]), data_parallel, expert_parallel, name, 1, redundant_experts)
    policy = _policy_text(profile)
    usable = float(usable_kv_bytes(a, profile, group)[0])
    if usable <= 0:
        short = -usable / 1e9
        reason = (
            f"the weights alone do not fit: each GPU is {short:,.2f} GB short under the {profile.name} engine's "
            f"memory policy ({policy}); use more GPUs (tensor_parallel), a smaller precision or a larger accelerator"
        )
        return EngineMemoryFit(profile.name, policy, kv, False, 0, 0, 0, reason, profile.kv_block(a.mla))
    kv_tokens = int(np.floor(float(kv_capacity_tokens(a, profile, group)[0])))
    block = profile.kv_block(a.mla)
    limit = model_of(model, registry).max_context or kv_tokens
    longest = int(min(_longest(a, kv_tokens // held // block * block), limit))
    kept = a.kv_tokens(tokens)  # in tokens of every layer: a sliding-window layer keeps at most its window
    sequences = int(kv_tokens // (kept + block_slack(kept, block)))
    return EngineMemoryFit(profile.name, policy, kv, True, kv_tokens, sequences, longest, block=block)


def _longest(a: Any, tokens: float) -> float:
    """The longest sequence whose KV is ``tokens`` of every layer: :meth:`StepArrays.kv_tokens` inverted."""
    tokens = max(tokens - a.state_tokens, 0.0)  # a hybrid's fixed state first
    if not a.window_share or tokens <= a.window:
        return tokens
    return a.window + (tokens - a.window) / (1 - a.window_share) if a.window_share < 1 else float("inf")


def _policy_text(profile: Any) -> str:
    """What the engine claims of each device and keeps back, in words."""
    reserve = f"{profile.memory_reserve.m_as('GB'):g} GB kept back for activations and CUDA graphs"
    if profile.memory_policy == "free":
        return f"{profile.memory_utilization:g} of the memory the weights leave, after {reserve}"
    if profile.memory_policy == "sglang":
        return (
            f"SGLang's mem_fraction_static of the device for its chunk and CUDA graphs, less the weights and {reserve}"
        )
    return f"{profile.memory_utilization:g} of each device, less the weights and {reserve}"
