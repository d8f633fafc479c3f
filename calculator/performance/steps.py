"""Public, unit-carrying step times: one decode step and one prompt's prefill of a tensor-parallel replica."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..types import AcceleratorRef, Count, ModelRef, Tokens
from ..units import Q_
from ._common import _counts, _efficiency, checked_tp, replica_layout
from .arrays import step_arrays
from .engines import Efficiency, EngineProfile
from .iteration import decode_step_seconds, prefill_seconds

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "decode_step_time",
    "expert_exchange_time",
    "prefill_time",
]


# --------------------------------------------------------------------------------------------
# Public, unit-carrying step times


def _seconds(values: Any) -> Any:
    """Seconds as a quantity; a 0-d result becomes a plain float."""
    return Q_(float(values) if np.ndim(values) == 0 else values, "s")


def decode_step_time(  # noqa: PLR0913  # public entry point: its keyword options are the API
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    batch: Count,
    context: Tokens,
    *,
    engine: str | EngineProfile | None = None,
    efficiency: Efficiency | None = None,
    kv_precision: str | None = None,
    data_parallel: Count = 1,
    expert_parallel: Count = 1,
    pipeline_parallel: Count = 1,
    redundant_experts: Count = 0,
    registry: Registry | None = None,
) -> Any:
    r"""Time of one decode step of a tensor-parallel replica.

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
        Whose per-iteration costs to use; ``None`` for the engine-agnostic default.
    efficiency : Efficiency, optional
        Overrides the engine's costs and pricing (``ROOFLINE`` gives the pure roofline bound).
    kv_precision : str, optional
        KV-cache precision; defaults to the one ``engine`` runs for these weights
        (:func:`~calculator.performance.kv_cache_precision`).
    data_parallel : int, default 1
        For a mixture of experts: attention ranks of ``tensor_parallel`` GPUs each (attention data
        parallelism), each with its own share of the ``batch`` and its KV cache; the replica is
        ``tensor_parallel x data_parallel`` GPUs and the routed experts span all of them. A scheduled
        prompt runs on one rank, and the ranks wait for the busiest at the experts. At most ``batch``.
    expert_parallel : int, default 1
        For a mixture of experts: GPUs of the replica the routed experts are spread over (expert
        parallelism); the replica's other factor splits each expert. Needs one ``tensor_parallel``
        degree, and divides the replica's GPUs.
    pipeline_parallel : int, default 1
        Pipeline stages, each of ``tensor_parallel x data_parallel`` GPUs holding its share of the layers
        (their weights and KV cache); the batch runs as that many micro-batches, and a step lasts the
        longer of their stage times summed and the slowest one's pass through every stage, with the
        hand-offs between stages (NVLink inside a node, the scale-out link across). At most the
        model's layers; priced from the kernel tables.
    redundant_experts : int, default 0
        For a mixture of experts under expert parallelism: copies of routed experts an expert-parallel load
        balancer places beside the logical ones (vLLM's EPLB ``num_redundant_experts``, SGLang's
        ``--ep-num-redundant-experts``, TensorRT-LLM's ``num_slots`` minus the experts); each GPU then holds
        ``(experts + redundant_experts) / expert_parallel`` of them, and SGLang and TensorRT-LLM need that sum to
        divide evenly (vLLM places experts unevenly without copies).
    registry : Registry, optional
        Where the ids resolve (default: the packaged registry).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    With measured kernels, ``t = t_0 + c B + L [g(B) + a_dec(B, S) + 2 r(B H b_a)] + h(B)``: the
    iteration cost, the per-sequence cost, and per layer the matrix products ``g`` at ``B`` tokens,
    decode attention, two all-reduces, plus the LM head. With ``kernels=False`` the pricing is the
    roofline with efficiencies:

    .. math::
        t_{\mathrm{step}} = t_0 + \max\!\left(\frac{W_s/t + B S m_{\mathrm{tok}}/t_{kv}}{f_{bw} BW},
        \frac{B (2 N_a + 4 S d_a L)/t}{f_c R}\right) + 2 L \left(\alpha + \frac{2(t-1)}{t}
        \frac{B H b_a}{f_l B_l}\right)

    Examples
    --------
    The chapter's bandwidth floor of the reference replica (70B FP16 over 8 H100s, §10.15.1):

    >>> from calculator.performance import ROOFLINE
    >>> step = decode_step_time("chapter-70b-mha", "h100-sxm", "fp16", 8, 1, 1, efficiency=ROOFLINE)
    >>> round(step.m_as("ms"), 1)
    5.2
    """
    a = step_arrays(model, accelerator, precision, kv_precision, engine=engine, registry=registry)
    tp = checked_tp(model, tensor_parallel, "decode_step_time", registry)
    a, tp = replica_layout(
        a, tp, data_parallel, expert_parallel, "decode_step_time", pipeline_parallel, redundant_experts
    )
    sequences = _counts("decode_step_time", "batch", batch)
    ranks = int(data_parallel)
    if ranks > 1 and np.any(sequences < ranks):
        raise InputError(
            f"decode_step_time(): argument 'batch' ({int(np.min(sequences))}) must be at least data_parallel "
            f"({ranks}): every attention rank decodes its own sequences"
        )
    seconds = decode_step_seconds(
        a,
        _efficiency(engine, efficiency, a.accelerator, registry),
        tp,
        sequences,
        _counts("decode_step_time", "context", context, 0),
    )
    return _seconds(seconds)


def prefill_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    precision: str,
    tensor_parallel: Count,
    prompt_tokens: Tokens,
    *,
    engine: str | EngineProfile | None = None,
    efficiency: Efficiency | None = None,
    data_parallel: Count = 1,
    expert_parallel: Count = 1,
    pipeline_parallel: Count = 1,
    redundant_experts: Count = 0,
    registry: Registry | None = None,
) -> Any:
    """Time to prefill one prompt alone on a tensor-parallel replica.

    Arguments as for :func:`decode_step_time` (``data_parallel``, ``expert_parallel`` and ``redundant_experts``
    included; with
    attention ranks the prompt runs on one of them).

    Examples
    --------
    >>> prefill_time("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024).to("ms")  # doctest: +ELLIPSIS
    <Quantity(..., 'millisecond')>
    """
    a = step_arrays(model, accelerator, precision, engine=engine, registry=registry)
    tp = checked_tp(model, tensor_parallel, "prefill_time", registry)
    a, tp = replica_layout(a, tp, data_parallel, expert_parallel, "prefill_time", pipeline_parallel, redundant_experts)
    prompt = _counts("prefill_time", "prompt_tokens", prompt_tokens)
    seconds = prefill_seconds(a, _efficiency(engine, efficiency, a.accelerator, registry), tp, prompt)
    return _seconds(seconds)


def expert_exchange_time(
    model: ModelRef,
    accelerator: AcceleratorRef,
    gpus: Count,
    tokens: Tokens,
    *,
    engine: str | EngineProfile | None = None,
    with_prompt: bool = False,
    registry: Registry | None = None,
) -> Any:
    """Time per MoE layer of attention ranks exchanging their tokens with the experts, as the engine does by default.

    A replica of ``gpus`` attention ranks (one GPU each) sends every rank's tokens to the experts and
    their outputs back: an all-gather and a reduce-scatter of ``tokens x hidden`` 16-bit activations
    (vLLM, TensorRT-LLM), or SGLang's padded gather and scatter, two all-reduces of the summed buffer
    when a prompt is in the iteration (``with_prompt``); see ``EngineProfile.expert_exchange``. Each
    collective is the measured in-node NCCL time (``kernels.collective_seconds``) and, beyond the
    accelerator's scale-up domain, hierarchical over its scale-out link.

    Parameters
    ----------
    model, accelerator : str or registry object
        A mixture-of-experts model and the accelerator.
    gpus : int or array
        Attention ranks of the replica (GPUs the experts span), at least 2.
    tokens : int or array
        Tokens of every rank together in the iteration.
    engine : str or EngineProfile, optional
        Whose exchange (default: the engine-agnostic profile's, an all-gather and a reduce-scatter).
    with_prompt : bool
        Whether a prompt is in the iteration (SGLang's exchange changes with it).

    Examples
    --------
    >>> expert_exchange_time("deepseek-v3", "h200-sxm", 8, 1024).to("us")  # doctest: +ELLIPSIS
    <Quantity(..., 'microsecond')>
    """
    from .iteration import _expert_exchange_seconds

    if not isinstance(with_prompt, bool | np.bool_):
        raise InputError(f"expert_exchange_time(): argument 'with_prompt' must be True or False, got {with_prompt!r}")
    a = step_arrays(model, accelerator, "bf16", engine=engine, registry=registry)
    if a.experts <= 1:
        raise InputError(f"expert_exchange_time(): model '{getattr(model, 'id', model)}' is not a mixture of experts")
    ranks = _counts("expert_exchange_time", "gpus", gpus, minimum=2)
    count = _counts("expert_exchange_time", "tokens", tokens)
    ranks, count = np.broadcast_arrays(ranks, count)
    a = a.with_expert_tensor_parallel(1).with_attention_data_parallel(1)
    out = np.zeros(ranks.shape)
    for r in np.unique(ranks):
        mask = ranks == r
        out[mask] = _expert_exchange_seconds(a, float(r), count[mask], count[mask], float(with_prompt))
    return _seconds(out)
