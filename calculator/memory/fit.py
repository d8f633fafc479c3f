"""Memory fit (section 10.7.1, Napkin Math 10.5): KV footprint, max batch, max context, per-device share.

Every capacity function takes the memory it may use as an argument, so each calculation states its
basis: the registered byte capacity of an accelerator (``Accelerator.memory``, 80 GiB for an H100)
or the conservative decimal budget of its nameplate (``Accelerator.memory_nameplate``, 80 GB).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import MAX_COUNT, checked, count, device_capacity, plain_number, renamed, transformer_of
from ..errors import InputError
from ..formula import formula, per, var
from ..results import Result, as_count, floor_whole
from ..types import Bytes, BytesPerToken, Capacity, Count, ModelRef, Precision, Tokens
from ..units import Q_, shown, ureg
from .kv import _check_splits, kv_bytes_per_token_per_device, tensor_parallel_valid
from .state import state_bytes_per_sequence
from .weights import NO_BYTES, model_weight_bytes, routed_expert_parameters, vision_weight_bytes

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "kv_cache_bytes",
    "memory_footprint",
    "max_batch",
    "max_batch_numeric",
    "max_context",
    "MemoryFit",
    "memory_fit",
    "DeviceShare",
    "device_share",
    "model_memory_fit",
    "MaxBatch",
    "MaxBatches",
    "model_max_batch",
    "min_tensor_parallel",
]


# ============================================================================================
# KV footprint, memory fit, max batch and max context


@formula(
    result=var("B", r"M_{\mathrm{KV}}", "nonnegative", "KV-cache bytes of a batch"),
    reference="section 10.7.1 (M_KV = B S m_tok); Napkin Math 10.5",
    batch=var("", "B", "nonnegative", "concurrent sequences"),
    context=var("", "S", "nonnegative", "tokens held per sequence"),
    kv_per_token=var("B/token", r"m_{\mathrm{tok}}", "positive", "KV bytes per token"),
    example={"batch": 1, "context": 131072, "kv_per_token": "327680 B/token"},
)
def kv_cache_bytes(batch, context, kv_per_token):
    r"""KV-cache bytes of ``batch`` sequences of ``context`` tokens each.

    Parameters
    ----------
    batch : int
        Concurrent sequences (1 for one request's cache).
    context : int
        Tokens held per sequence (prompt plus generated so far).
    kv_per_token : Quantity [information / token]

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_{\mathrm{KV}} = B \, S \, m_{\mathrm{tok}}

    Section 10.7.1.

    Examples
    --------
    Napkin Math 10.5: one 131,072-token request of the 70B GQA model at FP16:

    >>> kv_cache_bytes(1, 131_072, Q_(327_680, "B/token")).to("GB")
    <Quantity(42.949673, 'gigabyte')>
    """
    return per(batch * context * kv_per_token, "token")


@formula(
    result=var("B", r"M_{\mathrm{total}}", "nonnegative", "device memory in use"),
    reference="Napkin Math 10.5 (M_total = M_W + M_KV), section 10.7.1",
    weights=var("B", r"M_{W}", "nonnegative", "resident weight bytes"),
    batch=var("", "B", "nonnegative", "concurrent sequences"),
    context=var("", "S", "nonnegative", "tokens held per sequence"),
    kv_per_token=var("B/token", r"m_{\mathrm{tok}}", "positive", "KV bytes per token"),
    reserve=var("B", r"M_{\mathrm{res}}", "nonnegative", "runtime allocations and headroom"),
    example={"weights": "35 GB", "batch": 2, "context": 128000, "kv_per_token": "327680 B/token"},
)
def memory_footprint(weights, batch, context, kv_per_token, reserve=0):
    r"""Memory in use: weights, the batch's KV cache and a runtime reserve.

    Parameters
    ----------
    weights : Quantity [information]
    batch : int
    context : int
    kv_per_token : Quantity [information / token]
    reserve : Quantity [information], optional
        Runtime buffers, activations and headroom ("System" in Napkin Math 10.5).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_{\mathrm{total}} = M_W + M_{\mathrm{res}} + B \, S \, m_{\mathrm{tok}}

    Napkin Math 10.5 and Figure 9 (the KV cache wall). A configuration fits when this is at most
    the device capacity (see :func:`memory_fit`).

    Examples
    --------
    Figure 9: 35 GB of INT4 weights plus two 128,000-token requests exceed an 80 GB H100:

    >>> memory_footprint(Q_(35, "GB"), 2, 128_000, Q_(327_680, "B/token")).to("GB")
    <Quantity(118.88608, 'gigabyte')>
    """
    return weights + reserve + kv_cache_bytes.func(batch, context, kv_per_token)


def max_batch_numeric(
    capacity: Any,
    weights: Any,
    kv_per_token: Any,
    context: Any,
    reserve: Any = 0.0,
    block_size: Any = 1,
    state_bytes: Any = 0.0,
) -> Any:
    """:func:`max_batch` on plain magnitudes (bytes, bytes/token, tokens), for vectorized searches.

    ``state_bytes``: what each sequence holds besides its tokens' KV (a hybrid model's fixed state, bytes).

    Arguments broadcast and are plain numbers (no units): ``capacity`` finite (below the weights and
    reserve it gives 0), ``weights`` and ``reserve`` >= 0, ``kv_per_token`` and ``context`` > 0,
    ``block_size`` a whole number >= 1; anything else (NaN included) is an :class:`InputError` naming
    the argument. Returns an int64 array (or int) in ``[0, MAX_COUNT]``: a batch beyond 2**53 (no float
    counts it exactly) is reported as 2**53.
    """
    name = "max_batch_numeric"
    capacity = plain_number(name, "capacity", capacity, "any")
    weights, reserve = (plain_number(name, a, v) for a, v in (("weights", weights), ("reserve", reserve)))
    per_token = plain_number(name, "kv_per_token", kv_per_token, "positive")
    tokens = plain_number(name, "context", context, "positive")
    blocks = plain_number(name, "block_size", block_size, "positive_integer")
    held = np.ceil(tokens / blocks) * blocks  # tokens rounded up to whole blocks
    with np.errstate(over="ignore"):  # 1e300 bytes over 1e-300 bytes per token: at most MAX_COUNT
        batch = np.clip(floor_whole((capacity - weights - reserve) / (held * per_token + state_bytes)), 0, MAX_COUNT)
    batch = batch.astype(np.int64)
    return int(batch) if batch.ndim == 0 else batch


@checked(capacity="positive", kv_per_token="positive", context="positive_integer")
def max_batch(
    capacity: Bytes,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    context: Tokens,
    reserve: Bytes = NO_BYTES,
    block_size: Count = 1,
) -> Any:
    """Largest number of sequences of ``context`` tokens whose KV cache fits beside the weights.

    Parameters
    ----------
    capacity : Quantity [information]
        Memory of the device (or of the group, with group totals for the other arguments).
    weights : Quantity [information]
        Resident weight bytes on that memory.
    kv_per_token : Quantity [information / token]
        KV bytes per token on that memory.
    context : int
        Tokens held per sequence.
    reserve : Quantity [information], optional
        Runtime allocations and headroom.
    block_size : int, optional
        Tokens per KV page; each sequence holds whole pages (1 = exact token accounting; vLLM's
        PagedAttention default is 16).

    Returns
    -------
    int or array of int
        ``floor((capacity - weights - reserve) / (ceil(S / b) b m_tok))``, and 0 (never negative)
        when the weights and reserve leave no room; at most 2**53 (``MAX_COUNT``), the largest count a
        float holds exactly. Arguments broadcast.

    Notes
    -----
    Section 10.7.1 and Napkin Math 10.5. The bound is optimistic: it ignores future growth of the
    admitted sequences, activations not counted in ``reserve`` and allocator waste.

    Examples
    --------
    Napkin Math 10.5: 8 x 80 GiB node, 141.2 GB of weights, 20 GB reserved, 131,072 tokens:

    >>> max_batch(8 * Q_(80, "GiB"), Q_(141.2, "GB"), Q_(327_680, "B/token"), 131_072, Q_(20, "GB"))
    12
    """
    return max_batch_numeric(capacity, weights, kv_per_token, context, reserve, block_size)


@checked(capacity="positive", kv_per_token="positive")
def max_context(
    capacity: Bytes,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    batch: Count = 1,
    reserve: Bytes = NO_BYTES,
    block_size: Count = 1,
) -> Any:
    """Longest context (tokens per sequence) at which ``batch`` sequences fit beside the weights.

    Parameters
    ----------
    capacity, weights, kv_per_token, reserve, block_size
        As for :func:`max_batch`.
    batch : int
        Concurrent sequences.

    Returns
    -------
    int or array of int
        ``floor(free / (B m_tok))`` tokens rounded down to whole blocks; 0 when nothing fits, at most
        2**53 (``MAX_COUNT``) as for :func:`max_batch`.

    Notes
    -----
    The inverse of :func:`max_batch` in the context (Figure 9's boundary points). A model's own
    context limit is not applied here; :func:`model_memory_fit` applies it.

    Examples
    --------
    Section 10.7.1: 35 GB of weights on an 80 GB (decimal) H100, GQA 70B at FP16, batch 8:
    "roughly 17K tokens per sequence".

    >>> max_context(Q_(80, "GB"), Q_(35, "GB"), Q_(327_680, "B/token"), 8)
    17166
    """
    free = np.asarray(capacity - weights - reserve, dtype=float)
    tokens = floor_whole(free / (batch * kv_per_token * block_size)) * block_size
    tokens = np.clip(tokens, 0, MAX_COUNT).astype(np.int64)
    return int(tokens) if tokens.ndim == 0 else tokens


@dataclass(frozen=True, repr=False)
class MemoryFit(Result):
    """Per-device memory budget of a configuration (see :func:`memory_fit`).

    Attributes
    ----------
    fits : bool or array of bool
        Whether weights + reserve + the batch's KV cache fit in ``capacity``.
    capacity, weights, reserve, kv : Quantity [information]
        Per-device capacity, resident weights, reserve and KV cache of ``batch`` sequences.
    available : Quantity [information]
        ``capacity - weights - reserve``: the KV budget (negative if the weights do not fit).
    free : Quantity [information]
        Memory left after the KV cache (0 when it does not fit).
    missing : Quantity [information]
        Bytes short of fitting (0 when it fits).
    kv_per_token : Quantity [information / token]
        KV bytes per token on one device.
    kv_per_request : Quantity [information]
        KV bytes of one sequence of ``context`` tokens on one device (whole blocks).
    batch, context, tensor_parallel : int or array of int
    max_batch : int or array of int
        Sequences of ``context`` tokens that fit (0 if none).
    max_context : int or array of int
        Longest context at which ``batch`` sequences (at least one) fit.
    capacity_basis : str
        Which memory figure ``capacity`` is: ``"physical"`` or ``"nameplate"`` when it was read from an
        accelerator, ``"as given"`` when it was passed as a quantity.
    """

    fits: bool | np.ndarray
    capacity: Bytes
    weights: Bytes
    reserve: Bytes
    kv: Bytes
    available: Bytes
    free: Bytes
    missing: Bytes
    kv_per_token: BytesPerToken
    kv_per_request: Bytes
    batch: Count
    context: Tokens
    tensor_parallel: Count
    max_batch: Count
    max_context: Tokens
    capacity_basis: str = "as given"


def _fit(capacity, weights, kv_per_token, context, batch, reserve, block_size, tensor_parallel, context_limit=None,
         state=0.0):  # fmt: skip
    """MemoryFit from checked magnitudes (bytes, B/token, tokens); every field broadcast to one shape.

    ``state``: the bytes each sequence holds whatever its length (a hybrid's fixed state on this device).
    """
    arrays = np.broadcast_arrays(
        *(
            np.asarray(x, dtype=float)
            for x in (capacity, weights, kv_per_token, context, batch, reserve, tensor_parallel)
        )
    )
    capacity, weights, kv_per_token, context, batch, reserve, tensor_parallel = arrays
    kv_request = np.ceil(context / block_size) * block_size * kv_per_token + state
    kv = batch * kv_request
    available = capacity - weights - reserve
    slack = available - kv
    fits = slack >= -1e-12 * capacity
    with np.errstate(divide="ignore"):  # batch 0 asks for the longest context of one sequence
        room = np.maximum(available / np.maximum(batch, 1) - state, 0.0)
        longest = floor_whole(room / (kv_per_token * block_size)) * block_size
    if context_limit is not None:
        longest = np.minimum(longest, context_limit)

    def out(x, unit=None, kind=float):
        x = np.asarray(x).astype(kind)
        x = x.item() if x.ndim == 0 else x
        return Q_(x, unit) if unit else x

    return MemoryFit(
        fits=out(fits, kind=bool),
        capacity=out(capacity, "B"),
        weights=out(weights, "B"),
        reserve=out(reserve, "B"),
        kv=out(kv, "B"),
        available=out(available, "B"),
        free=out(np.maximum(slack, 0), "B"),
        missing=out(np.where(fits, 0.0, -slack), "B"),
        kv_per_token=out(kv_per_token, "B/token"),
        kv_per_request=out(kv_request, "B"),
        batch=out(batch, kind=np.int64),
        context=out(context, kind=np.int64),
        tensor_parallel=out(tensor_parallel, kind=np.int64),
        max_batch=out(
            max_batch_numeric(capacity, weights, kv_per_token, context, reserve, block_size, state), kind=np.int64
        ),
        max_context=out(np.clip(longest, 0, MAX_COUNT), kind=np.int64),
    )


@checked(capacity="positive", kv_per_token="positive", context="positive_integer", batch="nonnegative_integer")
def memory_fit(
    capacity: Bytes,
    weights: Bytes,
    kv_per_token: BytesPerToken,
    context: Tokens,
    batch: Count = 1,
    reserve: Bytes = NO_BYTES,
    block_size: Count = 1,
) -> MemoryFit:
    """Does a batch fit on one device? The per-device budget, max batch and what is missing.

    Parameters
    ----------
    capacity : Quantity [information]
        Memory of one device.
    weights : Quantity [information]
        Resident weight bytes on that device.
    kv_per_token : Quantity [information / token]
        KV bytes per token on that device (see :func:`max_batch`).
    context : int
        Tokens per sequence.
    batch : int, optional
        Sequences to hold (0 checks the weights alone).
    reserve : Quantity [information], optional
    block_size : int, optional
        KV page size in tokens.

    Returns
    -------
    MemoryFit
        ``fits`` is False (never an error) when the configuration does not fit, and ``missing``
        says by how many bytes.

    Examples
    --------
    Section 10.9.4: FP16 weights of a 70B model (140 GB) do not fit on one 80 GB A100:

    >>> fit = memory_fit(Q_(80, "GB"), Q_(140, "GB"), Q_(2_621_440, "B/token"), 1000, batch=0)
    >>> fit.fits, fit.missing.to("GB"), fit.max_batch
    (False, <Quantity(60.0, 'gigabyte')>, 0)
    """
    return _fit(capacity, weights, kv_per_token, context, batch, reserve, block_size, 1)


@dataclass(frozen=True, repr=False)
class DeviceShare(Result):
    """What one device of a tensor-parallel group holds of a model (see :func:`device_share`)."""

    tensor_parallel: Count
    weights: Bytes
    kv_per_token: BytesPerToken
    #: A hybrid model's fixed state per sequence on the device (its state layers', split by heads; 0 B: none).
    state_per_sequence: Bytes = NO_BYTES


@renamed(kv_dtype="kv_precision")
@checked()
def device_share(
    model: ModelRef,
    tensor_parallel: Count = 1,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    *,
    data_parallel: Count = 1,
    pipeline_parallel: Count = 1,
    registry: Registry | None = None,
) -> DeviceShare:
    """Weights and KV bytes per token on one device of a tensor-parallel group (vectorized over ``t``).

    Parameters
    ----------
    model : str or Model
    tensor_parallel : int or array of int
    weight_bits : str or float
        Weight precision name or stored bits per weight.
    kv_precision : str or Quantity
        KV-cache precision name or bytes per element.
    data_parallel : int, optional
        For a mixture of experts: attention ranks of ``tensor_parallel`` GPUs each (attention data
        parallelism). Each rank keeps a copy of the attention and dense weights, and the routed experts
        (:func:`~calculator.memory.routed_expert_parameters`) spread over all ``tensor_parallel x
        data_parallel`` GPUs.
    pipeline_parallel : int, optional
        Pipeline stages of the group's GPUs: each device holds its stage's ``1 / pipeline_parallel`` of
        the layers, their weights and their KV cache (at most the model's layers).
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Returns
    -------
    DeviceShare
        ``weights`` = :func:`model_weight_bytes` / t (with ranks: the rank's share plus the experts'
        over the replica) and ``kv_per_token`` = :func:`kv_bytes_per_token_per_device`; the degree is
        checked (:func:`check_tensor_parallel`).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> share = device_share(m, 8)
    >>> share.weights.to("GB"), share.kv_per_token
    (<Quantity(17.5, 'gigabyte')>, <Quantity(40960.0, 'byte / token')>)
    """
    resolved = transformer_of(model, "device_share", registry=registry)
    _check_splits(resolved, tensor_parallel, "device_share")
    degree = as_count(tensor_parallel)
    weights = model_weight_bytes(resolved, weight_bits, degree)
    if data_parallel > 1:
        if (resolved.experts or 1) <= 1:
            raise InputError(
                "device_share(): data_parallel applies to the attention of a mixture of experts (its ranks share "
                "the experts); a dense model's data-parallel ranks are replicas"
            )
        language = weights - vision_weight_bytes(resolved) / degree  # the routed experts' share is of these
        routed = language * routed_expert_parameters(resolved) / resolved.parameters  # per device of one rank
        weights = weights - routed + routed / data_parallel
    if np.ndim(pipeline_parallel):
        raise InputError(
            f"device_share(): argument 'pipeline_parallel' must be one whole number, got {shown(pipeline_parallel)}"
        )
    stages = count("device_share", "pipeline_parallel", pipeline_parallel)
    if stages > resolved.layers:
        raise InputError(
            f"device_share(): argument 'pipeline_parallel' ({stages}) must not exceed the model's "
            f"{resolved.layers} layers"
        )
    return DeviceShare(
        tensor_parallel=degree,
        weights=weights / stages,
        kv_per_token=kv_bytes_per_token_per_device(model, kv_precision, degree, registry=registry) / stages,
        state_per_sequence=state_bytes_per_sequence(resolved) / degree / stages,
    )


def _model_budget(
    function,
    model,
    capacity,
    context,
    weight_bits,
    kv_precision,
    tensor_parallel,
    reserve,
    capacity_basis,
    *,
    data_parallel=1,
    pipeline_parallel=1,
    registry=None,
):
    """Per-device magnitudes: (model, capacity, weights, kv/token, context, t, reserve, state per sequence).

    ``context``, ``tensor_parallel`` and ``reserve`` are the caller's checked magnitudes; the degree is
    checked against the model's heads, the context against its limit, and ``capacity`` read (bytes or an
    accelerator's memory on ``capacity_basis``).
    """
    resolved = transformer_of(model, function, registry=registry)
    _check_splits(resolved, tensor_parallel, function)
    share = device_share(
        resolved, tensor_parallel, weight_bits, kv_precision, data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
    )  # fmt: skip
    cap = device_capacity(function, capacity, capacity_basis, registry=registry)
    limit = getattr(resolved, "max_context", None)
    if limit is not None and np.any(np.asarray(context) > limit):
        raise InputError(
            f"{function}(): context {int(np.max(context))} exceeds the context limit of model '{resolved.id}' "
            f"({limit} tokens)"
        )
    weights, per_token = share.weights.m_as("B"), share.kv_per_token.m_as("B/token")
    state = share.state_per_sequence.m_as("B")  # a hybrid's fixed state per sequence
    return resolved, cap, weights, per_token, context, share.tensor_parallel, reserve, state


@renamed(kv_dtype="kv_precision")
@checked(context="positive_integer", batch="nonnegative_integer")
def model_memory_fit(  # noqa: PLR0913  # public entry point: its keyword options are the API
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    batch: Count = 1,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    tensor_parallel: Count = 1,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    block_size: Count = 1,
    *,
    data_parallel: Count = 1,
    pipeline_parallel: Count = 1,
    registry: Registry | None = None,
) -> MemoryFit:
    """Memory fit of a registry model on one device of a tensor-parallel group.

    Parameters
    ----------
    model : str or Model
    capacity : Quantity [information] or str or Accelerator
        Memory per device, or an accelerator whose memory is used on ``capacity_basis``.
    context : int
        Tokens per sequence; must not exceed the model's ``max_context`` when it is known.
    batch : int, optional
        Sequences to hold.
    weight_bits : str or float, optional
        Weight precision name or stored bits per weight (metadata included).
    kv_precision : str or Quantity, optional
        KV-cache precision.
    tensor_parallel : int or array of int, optional
        Tensor-parallel degree ``t``: weights divide by ``t``, KV as in the package notes.
    reserve : Quantity [information], optional
        Reserve per device.
    capacity_basis : {"physical", "nameplate"}
        For an accelerator: registered bytes (80 GiB) or the nameplate's decimal budget (80 GB).
    block_size : int, optional
        KV page size in tokens.
    data_parallel : int, optional
        For a mixture of experts: attention ranks of ``tensor_parallel`` GPUs (:func:`device_share`),
        each holding its own share of the sequences. ``batch`` and the result's ``batch`` and
        ``max_batch`` are then the replica's (every rank's); the other fields are one device's.
    pipeline_parallel : int, optional
        Pipeline stages (:func:`device_share`): each device holds its stage's layers and their KV cache.
    registry : Registry, optional
        Where the model and accelerator ids resolve (default: the packaged registry).

    Returns
    -------
    MemoryFit
        Per-device budget. ``max_context`` is also capped at the model's limit.

    Examples
    --------
    Napkin Math 10.7 (MHA baseline, 8 GPUs, 80 GB each, 4,096 tokens, all FP16):

    >>> from calculator.registry import Model
    >>> mha = Model(id="mha", name="70B MHA", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=64, head_dim=128, attention="mha")
    >>> model_memory_fit(mha, Q_(80, "GB"), 4096, tensor_parallel=8).max_batch
    46
    """
    name = "model_memory_fit"
    resolved, cap, weights, per_token, tokens, degree, res, state = _model_budget(
        name,
        model,
        capacity,
        context,
        weight_bits,
        kv_precision,
        tensor_parallel,
        reserve,
        capacity_basis,
        data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
        registry=registry,
    )
    ranks = float(data_parallel)
    per_rank = np.ceil(np.asarray(batch, dtype=float) / ranks)
    fit = _fit(cap, weights, per_token, tokens, per_rank, res, block_size, degree, resolved.max_context, state)
    basis = "as given" if isinstance(capacity, ureg.Quantity) else capacity_basis
    if ranks == 1:
        return dataclasses.replace(fit, capacity_basis=basis)
    return dataclasses.replace(fit, capacity_basis=basis, batch=as_count(batch), max_batch=fit.max_batch * int(ranks))


@renamed(kv_dtype="kv_precision")
@checked(context="positive_integer")
def model_max_batch(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    tensor_parallel: Count = 1,
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    block_size: Count = 1,
    *,
    data_parallel: Count = 1,
    pipeline_parallel: Count = 1,
    registry: Registry | None = None,
) -> Any:
    """Max batch of a registry model per tensor-parallel group, vectorized over the numeric arguments.

    Same arguments as :func:`model_memory_fit` (without ``batch``). ``capacity``, ``context``,
    ``tensor_parallel`` and ``reserve`` broadcast, so a sizer can evaluate many candidates at once;
    filter the degrees first with :func:`tensor_parallel_valid` (an invalid one is an error).

    Parameters
    ----------
    model, capacity, context, weight_bits, kv_precision, tensor_parallel, reserve
        As for :func:`model_memory_fit`.
    capacity_basis, block_size, data_parallel, pipeline_parallel, registry
        As for :func:`model_memory_fit` (with ``data_parallel``, the replica's max batch: every rank's).

    Returns
    -------
    MaxBatch or MaxBatches
        An ``int`` (or an int array) carrying ``capacity_basis``: ``"physical"`` or ``"nameplate"`` when
        ``capacity`` is an accelerator, ``"as given"`` when it is a quantity.

    Examples
    --------
    >>> from calculator.registry import Model
    >>> gqa = Model(id="gqa", name="70B GQA", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=70e9, layers=80, attention_heads=64, kv_heads=8, head_dim=128, attention="gqa")
    >>> batches = model_max_batch(gqa, Q_(80, "GB"), 4096, tensor_parallel=np.array([2, 4, 8]))
    >>> batches.tolist(), batches.capacity_basis
    ([14, 134, 372], 'as given')
    """
    name = "model_max_batch"
    _, cap, weights, per_token, tokens, _, res, state = _model_budget(
        name,
        model,
        capacity,
        context,
        weight_bits,
        kv_precision,
        tensor_parallel,
        reserve,
        capacity_basis,
        data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
        registry=registry,
    )
    batch = max_batch_numeric(cap, weights, per_token, tokens, res, block_size, state) * int(data_parallel)
    basis = "as given" if isinstance(capacity, ureg.Quantity) else capacity_basis
    if np.ndim(batch):
        out = np.asarray(batch).view(MaxBatches)
        out.capacity_basis = basis
        return out
    return MaxBatch(int(batch), basis)


class MaxBatch(int):
    """A max batch (an ``int``) that says which capacity basis it was computed on (``capacity_basis``)."""

    capacity_basis: str

    def __new__(cls, value: int, capacity_basis: str) -> MaxBatch:
        """A max batch of ``value`` computed on ``capacity_basis``."""
        out = super().__new__(cls, value)
        out.capacity_basis = capacity_basis
        return out


class MaxBatches(np.ndarray):
    """Max batches (an int array) that say which capacity basis they were computed on (``capacity_basis``)."""

    capacity_basis: str = "as given"

    def __array_finalize__(self, obj: Any) -> None:
        self.capacity_basis = getattr(obj, "capacity_basis", "as given")


@renamed(kv_dtype="kv_precision")
@checked(context="positive_integer")
def min_tensor_parallel(
    model: ModelRef,
    capacity: Capacity,
    context: Tokens,
    batch: Count = 1,
    weight_bits: Precision = "fp16",
    kv_precision: Precision = "fp16",
    reserve: Bytes = NO_BYTES,
    capacity_basis: str = "physical",
    block_size: Count = 1,
    degrees: Count = (1, 2, 4, 8, 16, 32, 64),
    *,
    registry: Registry | None = None,
) -> int:
    """The smallest tensor-parallel degree at which ``batch`` sequences of ``context`` tokens fit.

    Parameters
    ----------
    model, capacity, context, weight_bits, kv_precision, reserve, capacity_basis, block_size
        As for :func:`model_memory_fit`; ``context``, ``reserve`` and ``block_size`` one number each.
    batch : int
        Sequences to hold (one number).
    degrees : sequence of int
        Candidate degrees; those that do not split the model (:func:`tensor_parallel_valid`) are
        skipped.
    registry : Registry, optional
        Where the model and accelerator ids resolve (default: the packaged registry).

    Returns
    -------
    int
        The smallest valid candidate whose :func:`model_max_batch` reaches ``batch``; 0 when none
        does (more devices than the candidates, or a lower precision, are needed).

    Notes
    -----
    The closest feasible alternative of a configuration that does not fit: weights divide by the
    degree, the KV cache by :func:`kv_shards`, so the max batch grows with the degree until the KV
    heads are replicated.

    Examples
    --------
    Llama 3.1 70B at FP16 with 4,096-token sequences on 80 GiB devices:

    >>> min_tensor_parallel("llama-3.1-70b", Q_(80, "GiB"), 4096, batch=32)
    4
    >>> min_tensor_parallel("llama-3.1-405b", Q_(24, "GB"), 131_072, batch=64, degrees=(1, 2))
    0
    """
    name = "min_tensor_parallel"
    ones = {"capacity": getattr(capacity, "magnitude", 0), "context": context, "batch": batch, "reserve": reserve}
    for argument, value in (*ones.items(), ("block_size", block_size)):
        if np.ndim(value):
            raise InputError(f"{name}(): argument '{argument}' must be one number, got {shown(value)}")
    candidates = np.unique(np.atleast_1d(degrees)).astype(np.int64)
    valid = candidates[np.atleast_1d(tensor_parallel_valid(model, candidates, registry=registry))]
    if valid.size == 0:
        return 0
    batches = np.atleast_1d(
        model_max_batch(
            model,
            capacity,
            context,
            weight_bits,
            kv_precision,
            valid,
            Q_(reserve, "B"),
            capacity_basis,
            block_size,
            registry=registry,
        )
    )
    fitting = valid[batches >= batch]
    return int(fitting[0]) if fitting.size else 0
