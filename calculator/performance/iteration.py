"""Kernel pricing and the time of one scheduler iteration (:func:`iteration_seconds`).

One scheduler iteration runs the decode tokens of the running sequences and any prefill tokens
scheduled with them through every layer: the matrix products at their actual shapes (QKV, output,
MLP or the experts a batch touches, the LM head), prefill and decode attention, two all-reduces per
layer under tensor parallelism, and the activation traffic of norms and residuals. Kernel times come
from measured tables (:mod:`calculator.kernels`), or, for an accelerator without tables, from its
registry peaks times a generic efficiency curve; ``Efficiency(..., kernels=False)`` prices every
kernel at fixed fractions of the peaks instead. The GPU work is multiplied by the efficiency's
``gpu_time_scale`` (1 unless a calibration fitted it), and the engine's fixed costs per iteration and per
running sequence are added on top.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .._support import renamed
from ..errors import InputError
from ..memory.kv import kv_shards
from ..parallelism import ring_allreduce_time
from ..phases import decode_flops, prefill_flops, roofline_time
from ..types import Count, Tokens
from ._common import _plain_arrays, _step_inputs
from .arrays import StepArrays
from .engines import Efficiency

__all__ = [
    "iteration_seconds",
]


# --------------------------------------------------------------------------------------------
# Kernel pricing: per-layer linear time over a grid of token counts, per tensor-parallel degree


ACTIVATION_BYTES = 2.0  # all-reduce payloads and activations are BF16/FP16
#: Reads and writes of a hidden-size activation per layer and token outside the matrix products and
#: attention (two RMSNorms, two residual adds, RoPE and the activation quantization): HBM traffic.
ELEMENTWISE_PASSES = 8
#: Decode attention of a latent (MLA) cache is compute bound at this fraction of the 16-bit peak.
MLA_DECODE_COMPUTE_FRACTION = 0.5
#: Log2-spaced token counts on which an iteration's per-layer linear time is tabulated.
_M_GRID = np.arange(0.0, 17.01, 0.25)
#: The iterations' GPU work a :class:`StepArrays` keeps (:func:`_kernel_iteration`), of calls with at most
#: :data:`_PRICED_SIZE` rows (a closed loop's group; a sweep's long arrays seldom repeat): 15 MB at most.
_PRICED_KEPT, _PRICED_SIZE = 2048, 128


def _layer_gemms(a: StepArrays, tp: float) -> list[tuple[float, float, float]]:
    """(n, k, share) of the dense matrix products of one layer on one rank (tokens are the m dimension).

    ``share``: the share of the layers that run the product (a hybrid's attention runs on its attention
    layers only, its state layers' projections on the others; 1 for every product of a transformer).
    """
    h, heads, hd = a.hidden, a.heads, a.head_dim
    heads_r = heads / tp
    if a.mla:
        nope, rope, value, lora = a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim, a.kv_lora_rank
        q_lora = a.q_lora_rank
        shapes = [(lora + rope, h)]  # KV down-projection (replicated)
        shapes += [(q_lora, h), (heads_r * (nope + rope), q_lora)] if q_lora else [(heads_r * (nope + rope), h)]
        shapes += [(heads_r * (nope + value), lora), (h, heads_r * value)]
    else:
        kv_r = max(a.kv_heads / tp, 1.0)
        shapes = [((heads_r + 2 * kv_r) * hd, h), (h, heads_r * hd)]
    out = [(n, k, a.attention_share * (1.0 - a.global_share)) for n, k in shapes]
    if a.global_share:  # full-attention layers of their own widths (Gemma 4; vLLM computes V even where K equals V)
        kv_r, wide = max(a.global_kv_heads / tp, 1.0), a.global_head_dim
        out += [(n, k, a.global_share) for n, k in [((heads_r + 2 * kv_r) * wide, h), (h, heads_r * wide)]]
    if a.state_share:
        out += [(a.state_in / tp, h, a.state_share), (h, a.state_inner / tp, a.state_share)]
    for width in (a.mlp_width / tp, a.shared_expert_width / tp):
        if width > 0:
            out += [(2 * width, h, 1.0), (h, width, 1.0)]
    return out


def _curves(a: StepArrays, tp: float) -> dict[str, np.ndarray]:
    """Per-layer time of the token-proportional work at the token counts of ``_M_GRID`` (cached).

    ``dense``: one attention rank's matrix products (``a.attention_group(tp)`` GPUs), the router and the
    activation traffic; ``experts``: the routed experts over the replica's ``tp`` GPUs (zero for a dense
    model); ``lm_head``: the LM head of one attention rank.
    """
    cache = a.curves
    if tp in cache:
        return cache[tp]
    from ..kernels import gemm_seconds

    tables, dtype = a.tables, a.dtype
    group = float(a.attention_group(tp))
    m = 2.0**_M_GRID
    dense = np.zeros_like(m)
    for n, k, share in _layer_gemms(a, group):
        dense += share * gemm_seconds(tables, dtype, m, max(n, 1.0), max(k, 1.0))
    experts = np.zeros_like(m)
    if a.experts > 1:
        experts = _expert_seconds(a, tp, m)
        dense += gemm_seconds(tables, "bf16", m, a.experts, a.hidden)  # the router
    dense += m * ELEMENTWISE_PASSES * a.hidden * ACTIVATION_BYTES / a.hbm_bandwidth
    lm_head = gemm_seconds(tables, dtype, m, max(a.vocab / group, 1.0), a.hidden) if a.vocab else np.zeros_like(m)
    out = {
        "dense": np.log2(dense),
        "experts": np.log2(np.maximum(experts, 1e-12)),
        "lm_head": np.log2(np.maximum(lm_head, 1e-12)),
    }
    cache[tp] = out
    return out


def _expert_seconds(a: StepArrays, tp: float, m: np.ndarray) -> np.ndarray:
    """Per-layer time of the routed experts on one GPU at ``m`` tokens entering the layer.

    Each expert is split over ``a.expert_tensor_parallel`` of the replica's ``tp`` GPUs (default all
    of them) and the experts are spread over the other factor, ``ep = tp / expert_tensor_parallel``
    (expert parallelism). ``m`` counts every attention rank's tokens: the experts see them all. Where the
    engine's MoE layer was measured at this shape and layout, with the routing imbalance of the
    measurements, that time: ``kernels.moe_seconds`` for the logical experts (up to 16 GPUs), else, with
    expert parallelism alone, ``kernels.wide_moe_seconds`` (up to 256 GPUs; with copies, the load
    balancer's tables at the slots placed; a degree that does not divide the experts reads the even degree
    whose GPUs hold as many experts as its busiest one). Otherwise one grouped GEMM per projection over the
    experts this GPU holds that the tokens touch, at the tokens each of them gets (balanced routing).
    """
    from ..kernels import grouped_gemm_seconds, moe_seconds, wide_moe_seconds

    moe_tp = tp if a.expert_tensor_parallel is None else a.expert_tensor_parallel
    ep = tp / moe_tp
    if tp % moe_tp:
        raise InputError(
            f"an expert tensor-parallel degree of {moe_tp:g} must divide the tensor-parallel degree ({tp:g})"
        )
    shape = (a.hidden, a.expert_width, a.experts_per_token, a.experts)
    copies = a.physical_experts is not None
    if not copies:  # moe.csv places the logical experts only
        measured = moe_seconds(a.tables, a.precision, m, shape, (int(moe_tp), int(ep)), a.engine)
        if measured is not None:
            return measured
    if moe_tp == 1 and ep > 1:
        held = float(a.experts_per_gpu(tp))
        wide = wide_moe_seconds(
            a.tables, a.precision, m, shape, a.placed_experts / held, slots=a.placed_experts,
            load_balancer=copies, engine=a.engine,
        )  # fmt: skip
        if wide is not None:
            return wide
    # Placed experts: with redundant copies a token routed to a replicated expert goes to one of its copies, so under
    # balanced routing each placed expert takes a share top / placed of the tokens.
    e, top, h = a.placed_experts, a.experts_per_token, a.hidden
    hit = 1 - (1 - top / e) ** m  # the chance that the tokens touch a given expert
    per_expert_tokens = m * top / (e * hit)
    width = a.expert_width / moe_tp
    out = np.zeros_like(m)
    for n, k in ((2 * width, h), (h, width)):
        # an expert-parallel degree that does not divide the experts leaves the busiest GPU ceil(E / ep)
        out = out + grouped_gemm_seconds(a.tables, a.dtype, per_expert_tokens, n, k, a.experts_per_gpu(tp) * hit)
    return out


def _interp_curve(curve: np.ndarray, tokens: Any) -> np.ndarray:
    """Seconds at ``tokens`` (array) on a per-token-count curve; linear beyond the grid."""
    lm = np.log2(np.maximum(np.asarray(tokens, dtype=float), 1.0))
    beyond = np.maximum(lm - _M_GRID[-1], 0.0)
    return 2.0 ** (np.interp(lm, _M_GRID, curve) + beyond)


def _kernel_iteration(
    a: StepArrays,
    tp: float,
    decode: Any,
    context: Any,
    tokens: Any,
    prefill: Any,
    requests: Any,
    prior: Any,
) -> np.ndarray:
    """Seconds of the GPU work of one iteration on one tensor-parallel degree (measured kernels).

    Over pipeline stages (``a.pipeline_parallel``): :func:`_pipeline`'s round. The counts are flat float
    arrays of one size. The GPU work does not depend on the engine's costs, so ``a`` keeps the answers
    (:attr:`StepArrays.priced`, read-only; up to :data:`_PRICED_KEPT` calls of at most :data:`_PRICED_SIZE`
    rows, then cleared): a fit's evaluations and a search's steps meet the same iterations again (a refit
    of the H100 benchmarks prices about half of its iterations more than once).
    """
    counts = (decode, context, tokens, prefill, requests, prior)
    key = (tp, *(c.tobytes() for c in counts)) if decode.size <= _PRICED_SIZE else None
    out = a.priced.get(key)
    if out is not None:
        return out
    out = _stage_seconds(a, tp, a.layers, *counts) if a.pipeline_parallel <= 1 else _pipeline(a, tp, *counts)[0]
    if key is not None:
        out.flags.writeable = False
        if len(a.priced) >= _PRICED_KEPT:
            a.priced.clear()  # one step, safe where threads share the arrays (the dashboard's sessions)
        a.priced[key] = out
    return out


def _pipeline(
    a: StepArrays, tp: float, decode: Any, context: Any, tokens: Any, prefill: Any, requests: Any, prior: Any
) -> tuple[np.ndarray, np.ndarray]:
    """A pipeline's round and what a prompt's pass adds to its first token: ``(round, pass beyond it)``.

    The batch runs as ``a.pipeline_parallel`` micro-batches, the decodes spread evenly and the prompts over
    as many of them as there are prompts. Each stage computes its share of the layers for every micro-batch
    in turn, and the engines keep every stage busy with other micro-batches (vLLM's virtual engines,
    TensorRT-LLM's and SGLang's micro-batches), with no barrier between rounds: a round lasts the busiest
    stage's work, the micro-batches' stage times summed, plus one pass's hand-offs between stages; every
    sequence advances once a round. A micro-batch carrying a prompt is slower at each stage than the
    others, and its pass through every stage (its first token) ends ``stages x its stage time`` after it
    started: what that exceeds the round by is latency of that prompt, not work of the round (it was
    counted in the round before, when a lone prompt's pass set the round and throughput fell as 1/PP).
    """
    stages = a.pipeline_parallel
    layers = a.layers / stages
    carrying = np.minimum(requests, stages)  # micro-batches with prompts
    share = np.maximum(carrying, 1.0)
    decodes = decode / stages
    loaded = _stage_seconds(a, tp, layers, decodes, context, tokens, prefill / share, requests / share, prior)
    idle = np.zeros_like(prefill)  # a micro-batch of decodes only
    plain = _stage_seconds(a, tp, layers, decodes, context, tokens, idle, idle, prior)
    total = carrying * loaded + (stages - carrying) * plain
    handoffs = (stages - 1) * _handoff_seconds(a, tp, decode * tokens / stages + prefill / share)
    beyond = np.where(prefill > 0, np.maximum(stages * loaded - total, 0.0), 0.0)
    return total + handoffs, beyond


def _handoff_seconds(a: StepArrays, tp: float, tokens: Any) -> Any:
    """One micro-batch's activations (``tokens`` x hidden, 16-bit) sent to the next pipeline stage.

    Each GPU sends its ``1 / tp`` share over its own link: NVLink while the stages share a scale-up
    domain, the scale-out link once the replica spans several; at the generic achieved fraction and
    the collective latency floor.
    """
    from ..kernels import generic_efficiency

    generic = generic_efficiency()
    across = tp * a.pipeline_parallel > a.node_gpus and a.scale_out_bandwidth > 0
    link = a.scale_out_bandwidth if across else a.link_bandwidth
    payload = np.asarray(tokens, dtype=float) * a.hidden * ACTIVATION_BYTES / tp
    return generic["allreduce_floor"] + payload / (generic["allreduce_fraction"] * link)


def causal_pairs(tokens: Any, prior: Any) -> Any:
    """(query, key) pairs of a chunk of ``tokens`` after ``prior`` cached ones: each attends to all before it.

    ``tokens x prior + tokens (tokens + 1) / 2`` (:func:`~calculator.phases.prefill_flops`' pairs).
    """
    return tokens * prior + tokens * (tokens + 1) / 2


def window_pairs(tokens: Any, prior: Any, window: Any) -> Any:
    """:func:`causal_pairs` in a sliding-window layer: the query at position ``i`` attends to ``min(i, window)``.

    Positions up to the window add ``i`` each, the ones beyond it ``window`` each; an infinite window gives
    :func:`causal_pairs`.
    """
    end = np.asarray(prior, dtype=float) + tokens
    low, high = np.minimum(prior, window), np.minimum(end, window)
    inside = (high * (high + 1) - low * (low + 1)) / 2
    beyond = np.maximum(end - np.maximum(prior, window), 0.0)
    return inside + np.where(beyond > 0, beyond * np.minimum(window, 1e300), 0.0)


def window_reads(context: Any, window: Any, chunked: bool) -> Any:
    """Tokens a windowed layer's decode query reads at ``context``: ``min(context, window)`` for a sliding window.

    A chunked-local layer reads the tokens since its chunk began: the context within the first chunk, and half
    a chunk on average beyond it (a sequence's position within its chunk is spread evenly over the chunk).
    """
    if chunked:
        return np.where(np.asarray(context) <= window, context, window / 2)
    return np.minimum(context, window)


def chunk_pairs(tokens: Any, prior: Any, chunk: Any) -> Any:
    """:func:`causal_pairs` in a chunked-local layer: the query at position ``i`` attends to ``i mod chunk + 1``.

    The first ``n`` positions make ``floor(n / C) C (C + 1) / 2 + r (r + 1) / 2`` pairs (``r = n mod C``): each
    whole chunk its own causal pairs, and the chunk begun its remainder's.
    """

    def before(n: Any) -> Any:
        rest = np.mod(n, chunk)
        return np.floor(n / chunk) * chunk * (chunk + 1) / 2 + rest * (rest + 1) / 2

    start = np.asarray(prior, dtype=float)
    return before(start + tokens) - before(start)


def _stage_seconds(
    a: StepArrays,
    tp: float,
    layers: float,
    decode: Any,
    context: Any,
    tokens: Any,
    prefill: Any,
    requests: Any,
    prior: Any,
) -> np.ndarray:
    """Seconds of ``layers`` of the model's layers on one iteration's work (the whole model: ``a.layers``)."""
    curves = _curves(a, tp)
    group = float(a.attention_group(tp))
    ranks = tp / group  # data-parallel attention ranks, each with 1/ranks of the decoding sequences
    m = decode * tokens + prefill
    rank_decode = decode / ranks
    # A prompt runs on one rank and the ranks wait for each other at the experts: the busiest rank carries
    # ceil(requests / ranks) of the scheduled prompts (all of them alone; one per rank at most when few).
    rank_requests = np.where(requests > 0, np.ceil(requests / ranks - 1e-9), 0.0) if ranks > 1 else requests
    rank_prefill = prefill / np.maximum(requests, 1e-9) * rank_requests if ranks > 1 else prefill
    rank_m = rank_decode * tokens + rank_prefill
    logits = rank_decode * tokens + rank_requests
    t = layers * _interp_curve(curves["dense"], rank_m)
    if a.experts > 1:
        t = t + layers * _interp_curve(curves["experts"], m)  # the experts see every rank's tokens
    t = t + np.where(logits > 0, _interp_curve(curves["lm_head"], np.maximum(logits, 1.0)), 0.0)
    decode_att = _decode_attention(a, group, rank_decode, tokens, context)
    t = t + layers * a.attention_share * np.where(decode > 0, decode_att, 0.0)
    per_request = prefill / np.maximum(requests, 1e-9)
    att = _prefill_attention(a, group, rank_prefill, rank_requests, per_request, prior)
    t = t + layers * a.attention_share * np.where(prefill > 0, att, 0.0)
    if a.state_share:
        t = t + layers * a.state_share * _state_layer_seconds(a, group, rank_decode, rank_prefill)
    if ranks == 1 and tp > 1:
        t = t + 2 * layers * _collective_seconds(a, tp, m * a.hidden * ACTIVATION_BYTES)
    elif ranks > 1:
        # Attention ranks: an all-reduce inside a rank of several GPUs, then the experts' exchange of every
        # rank's tokens over the replica.
        if group > 1:
            t = t + layers * _collective_seconds(a, group, rank_m * a.hidden * ACTIVATION_BYTES)
        t = t + layers * _expert_exchange_seconds(a, tp, m, ranks * rank_m, prefill)
    return t


def _decode_attention(a: StepArrays, group: float, rank_decode: Any, tokens: Any, context: Any) -> Any:
    """One layer's decode attention on a rank: the KV its sequences read, and the indexer's scoring (DSA).

    The measured MLA kernel at the rank's query heads where the tables have it, else bandwidth bound on the
    KV bytes read (measured), and compute bound for MLA. A windowed layer reads :func:`window_reads`; an
    indexed sparse layer the ``index_topk`` tokens its indexer selects, after scoring every cached key.
    """
    from ..kernels import DECODE_REFERENCE_BYTES, decode_attention_seconds, mla_decode_seconds

    tables = a.tables
    shards = kv_shards(group, a.kv_shards_max)
    attending = a.layers * a.attention_share  # a hybrid's attention layers (every layer of a transformer)
    per_token_layer = (a.kv_bytes_per_token - a.index_bytes_per_token) / attending / shards
    pair_flops = a.attention_flops_per_pair / attending / group
    attended = np.minimum(context, a.index_topk)
    measured = mla_decode_seconds(tables, a.kv_precision, a.heads / group, rank_decode, attended) if a.mla else None
    per_sequence = np.maximum(rank_decode, 1.0)
    if measured is None:
        reads = decode_attention_seconds(tables, per_sequence, attended * per_token_layer / DECODE_REFERENCE_BYTES)
        if a.window_share:
            within = window_reads(context, a.window, a.chunked) * per_token_layer / DECODE_REFERENCE_BYTES
            reads = reads + a.window_share * (decode_attention_seconds(tables, per_sequence, within) - reads)
    else:
        reads = measured
    if a.mla:
        compute = rank_decode * tokens * attended * pair_flops / (MLA_DECODE_COMPUTE_FRACTION * a.bf16_flops)
        reads = np.maximum(reads, compute)
    if not a.index_bytes_per_token:
        return reads
    # The indexer reads every cached key of its sequences and scores it against its heads (a memory-bound
    # read priced on the decode-attention table, or its FLOP at the MLA decode fraction of the BF16 peak).
    keys = context * a.index_bytes_per_token / a.layers / DECODE_REFERENCE_BYTES
    scoring = rank_decode * tokens * context * a.index_flops_per_pair / a.layers
    index = np.maximum(
        decode_attention_seconds(tables, per_sequence, keys), scoring / (MLA_DECODE_COMPUTE_FRACTION * a.bf16_flops)
    )
    return reads + index


def _prefill_attention(
    a: StepArrays, group: float, rank_prefill: Any, rank_requests: Any, per_request: Any, prior: Any
) -> Any:
    """One layer's prefill attention on a rank: the causal pairs of the scheduled chunk after ``prior`` tokens.

    A windowed layer's query attends to at most the window's keys (:func:`window_pairs`), a chunked one to its
    chunk's (:func:`chunk_pairs`); an indexed sparse layer's to at most ``index_topk``, after its indexer
    scores every causal pair at its own width.
    """
    from ..kernels import prefill_attention_seconds

    tables = a.tables
    pair_flops = a.attention_flops_per_pair / (a.layers * a.attention_share) / group
    chunks = rank_prefill / np.maximum(per_request, 1e-9)  # the rank's prompts
    batch_heads = np.maximum(rank_requests, 1.0) * a.heads / group
    seen = per_request + prior
    topk = a.index_topk
    pairs = rank_prefill * prior + rank_prefill * (per_request + 1) / 2  # the rank's prompts' causal_pairs
    if topk < np.inf:
        pairs = chunks * window_pairs(per_request, prior, topk)
    att = prefill_attention_seconds(tables, pairs * pair_flops, np.minimum(seen, topk), batch_heads)
    if a.window_share:
        local = chunk_pairs if a.chunked else window_pairs
        flops = chunks * local(per_request, prior, a.window) * pair_flops
        att = att + a.pair_share * (
            prefill_attention_seconds(tables, flops, np.minimum(seen, a.window), batch_heads) - att
        )
    if a.index_flops_per_pair:
        scoring = chunks * causal_pairs(per_request, prior) * a.index_flops_per_pair / a.layers
        att = att + prefill_attention_seconds(tables, scoring, seen, batch_heads)
    return att


#: A state layer's chunked scan in prefill runs at this fraction of the 16-bit peak (an assumption, not measured:
#: its products are small, head widths of 64-128 over chunks of 64-256 tokens, beside elementwise gating).
STATE_SCAN_COMPUTE_FRACTION = 0.25


def _state_layer_seconds(a: StepArrays, group: float, decode: Any, prefill: Any) -> Any:
    """One state layer's recurrence on one rank (its projections are in the GEMM list): decode and prefill.

    Decode reads and writes each sequence's state once a token, at the HBM bandwidth (memory bound); prefill
    runs the chunked scan, linear in the tokens, at :data:`STATE_SCAN_COMPUTE_FRACTION` of the 16-bit peak.
    The state and the scan split over the rank's ``group`` GPUs by heads.
    """
    per_layer = a.state_bytes / (a.layers * a.state_share) / group
    reads = np.asarray(decode, dtype=float) * 2 * per_layer / a.hbm_bandwidth
    scan = np.asarray(prefill, dtype=float) * a.state_flops / group / (STATE_SCAN_COMPUTE_FRACTION * a.bf16_flops)
    return reads + scan


def _expert_exchange_seconds(a: StepArrays, tp: float, tokens: Any, padded: Any, prefill: Any) -> Any:
    """One layer's exchange of the attention ranks' ``tokens`` with the experts, by ``a.expert_exchange``.

    ``"gather_scatter"`` (vLLM, TensorRT-LLM): an all-gather of every rank's tokens before the experts (at
    ``a.gather_value_bytes`` a value: quantized for NVFP4 experts by TensorRT-LLM) and a reduce-scatter of their
    16-bit outputs. ``"padded_or_summed"`` (SGLang): the same over 16-bit buffers padded to the
    busiest rank (``padded`` tokens in all) where only decodes run; where a prompt is in the iteration, an
    all-reduce of a buffer of the summed tokens gathers them and another all-reduce combines the outputs.
    """
    width = a.hidden * ACTIVATION_BYTES
    if a.expert_exchange == "gather_scatter":
        gathered = tokens * a.hidden * a.gather_value_bytes
        return _collective_seconds(a, tp, gathered, "all_gather") + _collective_seconds(
            a, tp, tokens * width, "reduce_scatter"
        )
    size = padded * width
    decode_only = _collective_seconds(a, tp, size, "all_gather") + _collective_seconds(a, tp, size, "reduce_scatter")
    return np.where(prefill > 0, 2 * _collective_seconds(a, tp, tokens * width), decode_only)


def _collective_seconds(a: StepArrays, tp: Any, message_bytes: Any, op: str = "all_reduce") -> Any:
    """One ``op`` (all-reduce, all-gather, reduce-scatter) of ``message_bytes`` over ``tp`` GPUs.

    Measured inside a scale-up domain. Over more GPUs than one domain holds (``a.node_gpus``),
    hierarchical: the collective inside each domain (measured), and between the domains a ring over each
    GPU's ``1 / node_gpus`` share on its own scale-out link (rail-optimized NICs, one per GPU), at the
    generic achieved fraction of that link and its latency floor (the alpha-beta model). Without a
    registered scale-out link the in-domain curve is extrapolated (as for any count the tables lack).
    """
    from ..kernels import COLLECTIVE_PASSES, collective_times, generic_efficiency

    node = a.node_gpus
    size = np.maximum(message_bytes, 1.0)  # as collective_seconds takes it (the step model's values are valid)
    if a.scale_out_bandwidth <= 0 or np.max(tp) <= node:
        return collective_times(a.tables, op, tp, size, a.link_bandwidth, a.mesh_links)
    tp = np.asarray(tp, dtype=float)
    inner = collective_times(a.tables, op, np.minimum(tp, node), size, a.link_bandwidth, a.mesh_links)
    domains = np.maximum(tp / node, 1.0)
    generic = generic_efficiency()
    ring = COLLECTIVE_PASSES[op] * (domains - 1) / domains * np.asarray(message_bytes, dtype=float) / node
    outer = generic["allreduce_floor"] + ring / (generic["allreduce_fraction"] * a.scale_out_bandwidth)
    return inner + np.where(tp > node, outer, 0.0)


def _streamed_bytes(a: StepArrays, batch: Any) -> Any:
    """Weight bytes one decode step reads: shared weights plus the experts the batch touches."""
    if a.experts <= 1:
        return a.streamed_params * a.bytes_per_param
    e, k = a.experts, a.experts_per_token
    touched = e * (1 - (1 - k / e) ** batch)
    return (a.shared_params + touched * a.expert_params) * a.bytes_per_param


def _allreduce_seconds(a: StepArrays, eff: Efficiency, tp: Any, message_bytes: Any) -> Any:
    """One ring all-reduce of ``message_bytes`` over ``tp`` ranks at the achieved link bandwidth.

    In a scale-up mesh the ranks move on the links between them (:func:`~calculator.kernels.mesh_lanes`). Over
    more GPUs than a scale-up domain, a ring inside each domain plus one between the domains of each GPU's
    ``1 / node_gpus`` share on the scale-out link (as :func:`_collective_seconds`).
    """
    from ..kernels import mesh_lanes

    tp = np.asarray(tp, dtype=float)
    across = a.scale_out_bandwidth > 0
    inside = np.minimum(tp, a.node_gpus) if across else tp
    floor = eff.collective_latency.m_as("s")
    t = ring_allreduce_time.numeric(
        message=message_bytes,
        devices=inside,
        bandwidth=eff.link_bandwidth * a.link_bandwidth * mesh_lanes(inside, a.mesh_links),
        latency=0.0,
        floor=floor,
    )
    if not across or not np.any(tp > a.node_gpus):
        return t
    domains = np.maximum(tp / a.node_gpus, 1.0)
    ring = 2 * (domains - 1) / domains * np.asarray(message_bytes, dtype=float) / a.node_gpus
    return t + np.where(tp > a.node_gpus, floor + ring / (eff.link_bandwidth * a.scale_out_bandwidth), 0.0)


def _roofline_iteration(
    a: StepArrays,
    eff: Efficiency,
    tp: Any,
    decode: Any,
    context: Any,
    tokens: Any,
    prefill: Any,
    requests: Any,
    prior: Any,
) -> Any:
    """Seconds of one iteration priced at fixed fractions of the peaks (``kernels=False``)."""
    shards = kv_shards(tp, a.kv_shards_max)
    m = decode * tokens + prefill
    # the keys a sequence's decode attends to, in tokens of every layer (a windowed layer's window_reads, an
    # indexed sparse layer's index_topk), and the indexer's cached keys it scores: every token's
    within = context - window_reads(context, a.window, a.chunked)  # the keys past a windowed layer's reach
    read = np.minimum(context - a.window_share * within, a.index_topk)
    kv_read = read * (a.kv_bytes_per_token - a.index_bytes_per_token) + context * a.index_bytes_per_token
    attended = np.minimum(context - a.pair_share * within, a.index_topk)  # the same, weighted by attention FLOP
    memory_bytes = _streamed_bytes(a, np.maximum(m, 1.0)) / tp + decode * kv_read / shards
    memory_bytes = memory_bytes + decode * 2 * a.state_bytes / tp  # a hybrid's state, read and written once a token
    scan = np.asarray(prefill, dtype=float) * a.layers * a.state_share * a.state_flops  # a hybrid's state layers
    per_request = prefill / np.maximum(requests, 1e-9)
    causal = causal_pairs(per_request, prior)
    local = chunk_pairs if a.chunked else window_pairs
    # the pairs a prompt's query does not attend to, per layer of every layer's (windowed: their share)
    unseen = a.pair_share * (causal - local(per_request, prior, a.window)) if a.window_share else 0.0
    if a.index_topk < np.inf:
        unseen = causal - window_pairs(per_request, prior, a.index_topk)
    scoring = (decode * tokens * context + np.maximum(requests, 0.0) * causal * (prefill > 0)) * a.index_flops_per_pair
    flops = (
        decode_flops.numeric(
            active_parameters=a.streamed_params,
            batch=decode * tokens,
            context=attended,
            attention_flops=a.attention_flops_per_pair,
        )
        + np.maximum(requests, 0.0)
        * prefill_flops.numeric(
            active_parameters=a.streamed_params,
            prompt_tokens=np.maximum(per_request, 1.0),
            attention_flops=a.attention_flops_per_pair,
            cached_tokens=prior,
        )
        * (prefill > 0)
        - np.maximum(requests, 0.0) * unseen * a.attention_flops_per_pair * (prefill > 0)
        + scoring
        + scan
    ) / tp
    step = roofline_time.numeric(
        flops=flops,
        bytes_moved=memory_bytes,
        peak_throughput=eff.compute * a.peak_flops,
        memory_bandwidth=eff.hbm_bandwidth * a.hbm_bandwidth,
    )
    return step + 2 * a.layers * _allreduce_seconds(a, eff, tp, m * a.hidden * ACTIVATION_BYTES)


@renamed(tp="tensor_parallel")
def iteration_seconds(
    a: StepArrays,
    eff: Efficiency,
    tensor_parallel: Count,
    decode: Count,
    context: Tokens = 0,
    prefill: Tokens = 0,
    requests: Count = 0,
    prior: Tokens = 0,
    tokens: Tokens = 1,
) -> Any:
    """Seconds of one scheduler iteration (plain arrays, broadcast).

    Parameters
    ----------
    a : StepArrays
        From :func:`step_arrays`.
    eff : Efficiency
        Fixed costs and kernel pricing.
    tensor_parallel : int or array
        Tensor-parallel degree.
    decode, context : array
        Decoding sequences and the tokens each holds.
    prefill, requests, prior : array
        Prompt tokens scheduled in the iteration, over how many requests, and the tokens of those
        requests already cached (earlier chunks).
    tokens : array
        Tokens each decoding sequence adds (``k + 1`` when a speculative round verifies ``k``).
    """
    _step_inputs("iteration_seconds", a, eff, "eff", Efficiency)
    counts = {"decode": decode, "context": context, "prefill": prefill, "requests": requests, "prior": prior}
    given = {"tensor_parallel": (tensor_parallel, None)} | {n: (v, 0.0) for n, v in counts.items()}
    tp, decode, context, prefill, requests, prior, tokens = _plain_arrays(
        "iteration_seconds", given | {"tokens": (tokens, 0.0)}
    )
    if np.any((prefill > 0) & (requests < 1)):
        raise InputError(
            "iteration_seconds(): argument 'requests' must be at least 1 where 'prefill' > 0 (the prompts the "
            "prefill tokens belong to)"
        )
    return _iteration_seconds(a, eff, tp, decode, context, prefill, requests, prior, tokens)


def _iteration_seconds(
    a: StepArrays,
    eff: Efficiency,
    tensor_parallel: Count,
    decode: Count,
    context: Tokens = 0,
    prefill: Tokens = 0,
    requests: Count = 0,
    prior: Tokens = 0,
    tokens: Tokens = 1,
) -> Any:
    """:func:`iteration_seconds` without its checks of the counts (the closed loop's hot path).

    The closed loop's and the fluid's counts are finite and >= 0 by construction; the checks cost a fifth
    of ``closed_loop_seconds``.
    """
    given = tuple(
        np.asarray(v, dtype=float) for v in (tensor_parallel, decode, context, prefill, requests, prior, tokens)
    )
    if any(v.ndim for v in given):  # one iteration (the simulator's case) needs no broadcasting
        given = np.broadcast_arrays(*given)
    tp, decode, context, prefill, requests, prior, tokens = given
    # one degree (the closed loop's and the fluid's case) without sorting: np.unique costs more than the check
    if not tp.ndim:
        degrees = tp.reshape(1)
    else:
        degrees = np.unique(tp) if not tp.size or np.any(tp != tp.flat[0]) else tp.ravel()[:1]
    if degrees.size and not (degrees[0] >= 1 and np.isfinite(degrees[-1]) and np.all(degrees == np.round(degrees))):
        raise InputError(
            f"iteration_seconds(): argument 'tensor_parallel' must be whole numbers >= 1, got {degrees[:8]}"
        )
    step_cost, sequence_cost = eff.fixed_seconds
    if a.attention_tensor_parallel is None:
        fixed = step_cost + sequence_cost * (decode + requests)
    else:  # attention ranks each run their own scheduler, side by side: the busiest one's sequences
        ranks = tp / np.asarray(a.attention_group(tp), dtype=float)
        rank_requests = np.where(requests > 0, np.ceil(requests / ranks - 1e-9), 0.0)
        fixed = step_cost + sequence_cost * np.where(ranks > 1, decode / ranks + rank_requests, decode + requests)
    if not eff.kernels:
        if a.pipeline_parallel > 1:
            raise InputError(
                "iteration_seconds(): pipeline stages are priced from the kernel tables (Efficiency(kernels=True))"
            )
        out = _roofline_iteration(a, eff, tp, decode, context, tokens, prefill, requests, prior)
    elif degrees.size == 1:  # one degree: the whole arrays, flat as the masks below would select them
        flat = (v.ravel() for v in (decode, context, tokens, prefill, requests, prior))
        out = _kernel_iteration(a, float(degrees[0]), *flat).reshape(tp.shape)
    else:
        out = np.empty(tp.shape)
        for degree in degrees:
            mask = tp == degree
            out[mask] = _kernel_iteration(
                a, float(degree), decode[mask], context[mask], tokens[mask], prefill[mask], requests[mask], prior[mask]
            )
    if eff.gpu_time_scale != 1.0:  # a calibration's factor on the GPU work of this accelerator
        out = out * eff.gpu_time_scale
    # Asynchronous scheduling hides the fixed costs behind the GPU's work; else they add to it.
    total = np.maximum(fixed, out) if eff.overlap else fixed + out
    return total if total.ndim else float(total)


def pipeline_pass_seconds(
    a: StepArrays,
    eff: Efficiency,
    tensor_parallel: Any,
    decode: Any,
    context: Any = 0,
    prefill: Any = 0,
    requests: Any = 0,
    prior: Any = 0,
) -> Any:
    """What a prompt's first token waits beyond its iteration's end when the replica has pipeline stages.

    The micro-batch that carries the prompt crosses every stage, each slower than the round's other
    micro-batches: ``stages x its stage time`` less the round (:func:`_pipeline`); 0 without stages or
    without a prompt. The iteration (:func:`iteration_seconds`) is the round; TTFT adds this.
    """
    if a.pipeline_parallel <= 1 or not eff.kernels:
        return 0.0 * np.asarray(prefill, dtype=float)
    tp, decode, context, prefill, requests, prior = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (tensor_parallel, decode, context, prefill, requests, prior))
    )
    out = np.empty(tp.shape)
    ones = np.ones(tp.shape)
    for degree in np.unique(tp):
        mask = tp == degree
        out[mask] = _pipeline(
            a, float(degree), decode[mask], context[mask], ones[mask], prefill[mask], requests[mask], prior[mask]
        )[1]
    return out * eff.gpu_time_scale


def overlapped_prompt_seconds(
    a: StepArrays,
    eff: Efficiency,
    tensor_parallel: Any,
    decode: Any,
    context: Any,
    chunk: Any,
    prior: Any,
    arrivals: Any,
    idle: Any,
    tokens: Any = 1,
) -> Any:
    """Seconds prompt chunks add to an iteration on average, ``J ~ Poisson(arrivals)`` chunks of ``chunk`` tokens.

    ``E[iteration_seconds(decode, J chunks) - idle]``, ``idle`` the iteration without them (its decoding
    sequences carrying ``tokens`` each). Where the
    engine schedules asynchronously an iteration lasts ``max(fixed costs, GPU work)``: the first chunks
    hide under the fixed costs and the next add their GPU time in full, so their cost is not the first
    chunk's times their number. With attention ranks the ``J`` chunks also spread over the ranks
    (``iteration_seconds`` puts ``ceil(J / ranks)`` on the busiest).
    """
    function = "overlapped_prompt_seconds"
    _step_inputs(function, a, eff, "eff", Efficiency)
    counts = {"decode": decode, "context": context, "chunk": chunk, "prior": prior, "arrivals": arrivals}
    given = {"tensor_parallel": (tensor_parallel, 1.0)} | {n: (v, 0.0) for n, v in counts.items()}
    checked = _plain_arrays(function, given | {"idle": (idle, 0.0), "tokens": (tokens, 0.0)})
    return _overlap_expectation(a, eff, *checked)[0]


def _overlap_expectation(
    a: StepArrays, eff: Efficiency, tp: Any, decode: Any, context: Any, chunk: Any, prior: Any, arrivals: Any,
    idle: Any, tokens: Any = 1,
) -> tuple[Any, Any]:  # fmt: skip
    """:func:`overlapped_prompt_seconds` and what one chunk alone adds (priced on the way)."""
    mu = np.asarray(arrivals, dtype=float)
    decode, context, chunk, prior, idle = (np.asarray(v, dtype=float) for v in (decode, context, chunk, prior, idle))
    top = int(max(min(np.ceil(np.max(mu) + 5 * np.sqrt(np.max(mu)) + 4), _OVERLAP_SAMPLES[-1]), 1))
    shape = (-1,) + (1,) * max(np.ndim(mu), np.ndim(chunk), np.ndim(decode), np.ndim(tp))
    j = np.arange(top + 1, dtype=float).reshape(shape)
    safe = np.maximum(mu, 1e-300)
    log_factorial = np.array([math.lgamma(k + 1) for k in range(top + 1)]).reshape(shape)
    weights = np.exp(j * np.log(safe) - safe - log_factorial)
    # The last term stands for J >= top: its mass, at its conditional mean (priced on the last slope).
    weights[-1] = np.maximum(1 - weights[:-1].sum(axis=0), 0.0)
    tail_mean = np.where(
        weights[-1] > 1e-12, (mu - (j[:-1] * weights[:-1]).sum(axis=0)) / np.maximum(weights[-1], 1e-300), top
    )
    # The iteration priced at a few chunk counts, linear in between (the kink where the GPU work passes the
    # fixed costs falls between two of them at most); none costs nothing.
    sampled = np.array([c for c in _OVERLAP_SAMPLES if 0 < c < top] + [top], dtype=float)
    priced = _iteration_seconds(  # the callers' counts are valid (the public function checks its own)
        a, eff, tp, decode, context, sampled.reshape(shape) * chunk, sampled.reshape(shape), prior, tokens
    )
    cost = np.concatenate([np.zeros_like(priced[:1]), np.maximum(priced - idle, 0.0)])
    sampled = np.concatenate([[0.0], sampled])
    upper = np.minimum(np.searchsorted(sampled, j.ravel(), side="left"), len(sampled) - 1)
    lower = np.maximum(upper - 1, 0)
    span = np.where(upper > lower, sampled[upper] - sampled[lower], 1.0)
    w = ((j.ravel() - sampled[lower]) / span).reshape(shape)
    between = cost[lower] * (1 - w) + cost[upper] * w
    slope = (cost[-1] - cost[-2]) / (sampled[-1] - sampled[-2])
    between[-1] = cost[-1] + slope * np.maximum(tail_mean - top, 0.0)
    return np.sum(weights * between, axis=0), cost[1]


#: Chunk counts at which :func:`overlapped_prompt_seconds` prices the iteration (at most the last).
_OVERLAP_SAMPLES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def spread_over_ranks(arrivals: Any, ranks: Any, alone: Any, together: Any) -> Any:
    """The factor on ``arrivals x alone`` when prompt chunks landing in one iteration spread over attention ranks.

    ``alone``: seconds one chunk adds to an iteration; ``together``: seconds ``ranks`` chunks add when each
    goes to a rank of its own (they prefill side by side; the experts and their exchange run them all).
    The part paid on the chunk's own rank is ``r = alone - (together - alone) / (ranks - 1)``. With
    ``J ~ Poisson(arrivals)`` chunks per iteration, a request going to the rank with the fewest
    outstanding puts ``ceil(J / ranks)`` of them on the busiest rank, so an iteration adds
    ``arrivals (alone - r) + E[ceil(J / ranks)] r`` on average instead of ``arrivals x alone``.
    Exactly 1 for one rank.
    """
    ranks = np.asarray(ranks, dtype=float)
    arrivals, alone, together = (np.asarray(v, dtype=float) for v in (arrivals, alone, together))
    shape = np.broadcast_shapes(arrivals.shape, ranks.shape, alone.shape, together.shape)
    if np.all(ranks <= 1):
        return np.ones(shape)
    ranks, arrivals, alone, together = np.broadcast_arrays(ranks, arrivals, alone, together)
    factor = np.ones(shape)
    for r in np.unique(ranks[ranks > 1]):
        mask = ranks == r
        own = np.clip(alone[mask] - (together[mask] - alone[mask]) / (r - 1), 0.0, alone[mask])
        mu = np.clip(arrivals[mask], _SPREAD_MU[0], _SPREAD_MU[-1])
        busiest_share = np.interp(np.log(mu), np.log(_SPREAD_MU), _busiest_share(float(r)))
        factor[mask] = 1 - own / np.maximum(alone[mask], 1e-300) * (1 - busiest_share)
    return factor


#: Mean chunks per iteration on which ``E[ceil(J / R)] / mu`` is tabulated (interpolated in log mu).
_SPREAD_MU = np.geomspace(1e-4, 1e3, 701)


@functools.lru_cache(maxsize=32)
def _busiest_share(ranks: float) -> np.ndarray:
    """``E[ceil(J / ranks)] / mu`` for ``J ~ Poisson(mu)`` on ``_SPREAD_MU``: sum over m of P(J > m ranks)."""
    from scipy.special import gammainc

    mu = _SPREAD_MU
    terms = int(np.ceil((mu[-1] + 10 * np.sqrt(mu[-1]) + 10) / ranks))
    m = np.arange(terms + 1, dtype=float)[:, None]
    return np.sum(gammainc(m * ranks + 1, mu[None, :]), axis=0) / mu  # P(J >= j) = gammainc(j, mu)


def decode_step_seconds(
    a: StepArrays, eff: Efficiency, tensor_parallel: Any, batch: Any, context: Any, tokens: Any = 1
) -> Any:
    """One decode step of ``batch`` sequences holding ``context`` tokens each (plain arrays).

    ``tokens`` new tokens per sequence are processed in the step (more than one when a speculative
    round verifies its draft): compute and all-reduce payloads scale with it, weight and KV traffic
    do not.
    """
    return iteration_seconds(a, eff, tensor_parallel, batch, context, tokens=tokens)


def prefill_seconds(a: StepArrays, eff: Efficiency, tensor_parallel: Any, prompt: Any) -> Any:
    """Prefill of one prompt of ``prompt`` tokens alone in an iteration, to its first token (plain arrays).

    Over pipeline stages, the iteration (the round) and the prompt's pass through every stage beyond it
    (:func:`pipeline_pass_seconds`): a lone prompt's latency.
    """
    seconds = iteration_seconds(a, eff, tensor_parallel, 0, 0, prefill=prompt, requests=1)
    if a.pipeline_parallel <= 1:
        return seconds
    return seconds + pipeline_pass_seconds(a, eff, tensor_parallel, 0, 0, prompt, 1)
