"""Mixture of experts: resident and active weights, expert placement, the decode floor, expert capacity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import checked, one, random_seed
from ..errors import InputError
from ..formula import check_domain, formula, var
from ..memory import weight_bytes
from ..results import Result, as_count, plain
from ..types import Bandwidth, Bytes, Count, Number, Precision, Time, TokenRate
from ..units import Q_
from ._common import _ZERO_SECONDS
from .tensor import min_shards

__all__ = [
    "MoeWeights",
    "moe_weights",
    "ExpertPlacement",
    "expert_placement",
    "MoeDecodeFloor",
    "moe_decode_floor",
    "expert_capacity",
    "moe_dispatch_bytes",
    "simulate_expert_overflow",
]


# --------------------------------------------------------------------------------------------
# Mixture of experts


@formula(
    result=var("B", "M_{\\mathrm{A2A}}", description="bytes one device sends in a MoE layer's dispatch all-to-all"),
    reference="section 10.10.4 (MoE AllToAll routing)",
    tokens=var("", "N_{t}", "positive_integer", "tokens in the step"),
    hidden_size=var("", "d", "positive_integer", "hidden width"),
    experts_per_token=var("", "k", "positive_integer", "experts each token is routed to"),
    devices=var("", "n", "positive_integer", "expert-parallel devices"),
    bytes_per_element=var("B", "s", description="bytes per activation element"),
    example={"tokens": 256, "hidden_size": 4096, "experts_per_token": 8, "devices": 8, "bytes_per_element": "2 B"},
)
def moe_dispatch_bytes(tokens, hidden_size, experts_per_token, devices, bytes_per_element):
    r"""Bytes one device sends in the dispatch all-to-all of a MoE layer (the combine returns as many).

    Parameters
    ----------
    tokens : int
        Tokens in the step over all the expert-parallel devices.
    hidden_size : int
        Hidden width of the model.
    experts_per_token : int
        Experts each token's gate selects (each gets a copy of its representation).
    devices : int
        Expert-parallel devices; each holds ``1/n`` of the tokens before the dispatch.
    bytes_per_element : Quantity [information]
        Bytes per activation element (2 B for FP16/BF16).

    Returns
    -------
    Quantity [information]

    Notes
    -----
    .. math:: M_{\mathrm{A2A}} = \frac{N_t}{n}\, k\, d\, s

    "One AllToAll dispatches its representation to the ranks hosting its experts, and a second returns
    their outputs" (§10.10.4). Uniform routing; a popular expert's host receives more (the incast point),
    which :func:`~calculator.parallelism.alltoall_time` takes as its busiest buffer.

    Examples
    --------
    >>> moe_dispatch_bytes(256, 4096, 8, 8, Q_(2, "B")).to("MB")
    <Quantity(2.097152, 'megabyte')>
    """
    return tokens / devices * experts_per_token * hidden_size * bytes_per_element


@dataclass(frozen=True, repr=False)
class MoeWeights(Result):
    """Resident (all experts) and per-token active weight bytes of a mixture of experts."""

    resident_bytes: Bytes
    active_bytes: Bytes
    total_to_active_ratio: float


def _check_parameters(function: str, total: Any, active: Any) -> None:
    """The active parameters are not more than the total."""
    if active > total:
        raise InputError(f"{function}(): argument 'active_parameters' ({active}) exceeds total_parameters ({total})")


@checked(total_parameters=one("positive"), active_parameters=one("positive"))
def moe_weights(total_parameters: Number, active_parameters: Number, bits_per_weight: Precision) -> MoeWeights:
    r"""Resident and active weight bytes of a mixture-of-experts model.

    Parameters
    ----------
    total_parameters : float
        All parameters, every expert included (they are all resident).
    active_parameters : float
        Parameters used per token (shared layers plus the selected experts).
    bits_per_weight : float
        Stored bits per weight.

    Returns
    -------
    MoeWeights

    Notes
    -----
    .. math:: M_{\mathrm{res}} = N_{\mathrm{tot}} b / 8, \quad M_{\mathrm{act}} = N_{\mathrm{act}} b / 8

    Section 10.10.4.1 (§10.10.4, footnote 5 §10.10.4): total parameters set storage; active
    parameters estimate weight traffic and arithmetic per token at batch size 1.

    Examples
    --------
    DeepSeek-V3 at FP16 (§10.10.4: "approximately 74 GB", "approximately 1342 GB"):

    >>> w = moe_weights(671e9, 37e9, 16)
    >>> w.resident_bytes.to("GB"), w.active_bytes.to("GB")
    (<Quantity(1342.0, 'gigabyte')>, <Quantity(74.0, 'gigabyte')>)
    """
    _check_parameters("moe_weights", total_parameters, active_parameters)
    return MoeWeights(
        resident_bytes=weight_bytes(total_parameters, bits_per_weight).to("GB"),
        active_bytes=weight_bytes(active_parameters, bits_per_weight).to("GB"),
        total_to_active_ratio=plain(np.asarray(total_parameters) / np.asarray(active_parameters)),
    )


@dataclass(frozen=True, repr=False)
class ExpertPlacement(Result):
    """Per-device weights under expert parallelism, with the implied per-expert and shared parameters."""

    expert_parameters: float
    shared_parameters: float
    experts_per_device: int
    even: bool
    device_weight_bytes: Bytes
    replicated_weight_bytes: Bytes


@checked(total_parameters=one("positive"), active_parameters=one("positive"), experts=one(), experts_per_token=one())
def expert_placement(
    total_parameters: Number,
    active_parameters: Number,
    experts: Count,
    experts_per_token: Count,
    expert_parallel: Count,
    bits_per_weight: Precision,
) -> ExpertPlacement:
    r"""Weights each device holds when ``expert_parallel`` devices split the experts (shared layers replicated).

    Parameters
    ----------
    total_parameters, active_parameters : float
        Total and per-token active parameters.
    experts : int
        Routed experts per MoE layer.
    experts_per_token : int
        Experts the gate selects per token (top-k); must be fewer than ``experts``.
    expert_parallel : int
        Devices in the expert-parallel group.
    bits_per_weight : float
        Stored bits per weight.

    Returns
    -------
    ExpertPlacement
        The implied parameters per expert :math:`e` and shared parameters :math:`s`, the experts on the
        busiest device, its weight bytes, and the bytes if every device held every expert.

    Notes
    -----
    .. math:: e = \frac{N_{\mathrm{tot}} - N_{\mathrm{act}}}{E - k}, \quad s = N_{\mathrm{act}} - k e,
              \quad M_{\mathrm{dev}} = \left(s + \lceil E/D \rceil e\right) b / 8

    Implied by Example 10.7 (§10.10.4): each device holds "the shared attention layers plus its
    local experts". Uneven splits put :math:`\lceil E/D \rceil` experts on the busiest device.

    Examples
    --------
    Example 10.7, Mixtral-8x7B over 4 GPUs ("about 25.8 GB" vs "93.4 GB" replicated):

    >>> p = expert_placement(46.7e9, 12.9e9, 8, 2, 4, 16)
    >>> round(p.device_weight_bytes.m_as("GB"), 1), round(p.replicated_weight_bytes.m_as("GB"), 1)
    (25.8, 93.4)
    """
    function = "expert_placement"
    _check_parameters(function, total_parameters, active_parameters)
    total_parameters, active_parameters = float(total_parameters), float(active_parameters)
    routed, top_k, devices = int(experts), int(experts_per_token), as_count(expert_parallel)
    if top_k >= routed:
        raise InputError(f"{function}(): argument 'experts_per_token' ({top_k}) must be below experts ({routed})")
    per_expert = (total_parameters - active_parameters) / (routed - top_k)
    shared = active_parameters - top_k * per_expert
    if shared < -1e-9 * total_parameters:
        raise InputError(
            f"{function}(): active_parameters ({active_parameters:.4g}) is below experts_per_token x the implied "
            f"expert size ({top_k} x {per_expert:.4g}); the counts are inconsistent"
        )
    shared = max(shared, 0.0)
    local = -(-routed // devices)
    return ExpertPlacement(
        expert_parameters=per_expert,
        shared_parameters=shared,
        experts_per_device=local,
        even=plain(routed % devices == 0),
        device_weight_bytes=weight_bytes(shared + local * per_expert, bits_per_weight).to("GB"),
        replicated_weight_bytes=weight_bytes(total_parameters, bits_per_weight).to("GB"),
    )


@dataclass(frozen=True, repr=False)
class MoeDecodeFloor(Result):
    """Napkin Math 10.8: nodes for the resident weights and the batch-one decode floor."""

    resident_bytes: Bytes
    nodes: int
    node_capacity: Bytes
    devices: int
    read_bytes_per_device: Bytes
    read_time: Time
    token_time: Time
    tokens_per_second: TokenRate


@checked(
    total_parameters=one("positive"),
    active_parameters=one("positive"),
    device_capacity="positive",
    memory_bandwidth="positive",
    devices=one(),
)
def moe_decode_floor(
    total_parameters: Number,
    active_parameters: Number,
    bits_per_weight: Precision,
    devices_per_node: Count,
    device_capacity: Bytes,
    memory_bandwidth: Bandwidth,
    routing_time: Time = _ZERO_SECONDS,
    devices: Count | None = None,
) -> MoeDecodeFloor:
    r"""Nodes needed to hold an MoE model's weights and its optimistic batch-one decode floor.

    Parameters
    ----------
    total_parameters, active_parameters : float
        Total (resident) and per-token active parameters.
    bits_per_weight : float
        Stored bits per weight.
    devices_per_node : int
        Accelerators per node.
    device_capacity : Quantity [information]
        Memory per accelerator, on the basis you choose (the chapter uses the 80 GB nameplate).
    memory_bandwidth : Quantity [information / time]
        HBM bandwidth per accelerator.
    routing_time : Quantity [time], optional
        Routing and dispatch overhead per token.
    devices : int, optional
        Devices sharing the active reads; defaults to every device of the nodes needed.

    Returns
    -------
    MoeDecodeFloor

    Notes
    -----
    .. math:: \text{nodes} = \left\lceil \frac{M_{\mathrm{res}}}{g\,C} \right\rceil, \quad
              t_{\mathrm{read}} = \frac{M_{\mathrm{act}} / n}{B_{\mathrm{HBM}}}, \quad
              t_{\mathrm{token}} = t_{\mathrm{read}} + t_{\mathrm{route}}

    Napkin Math 10.8 (§10.10.4). Assumes reads spread evenly over the devices, which expert
    placement and routing do not guarantee at batch one; compute, KV traffic, synchronization and
    imbalance are left out, so this is an optimistic estimate, not a bound. The remaining memory
    must still hold KV state and buffers.

    Examples
    --------
    >>> floor = moe_decode_floor(671e9, 37e9, 8, 8, Q_(80, "GB"), Q_(3.35, "TB/s"), Q_(0.3, "ms"))
    >>> floor.nodes, round(floor.read_time.m_as("ms"), 2)
    (2, 0.69)
    """
    function = "moe_decode_floor"
    _check_parameters(function, total_parameters, active_parameters)
    per_node = as_count(devices_per_node)
    resident = weight_bytes(total_parameters, bits_per_weight)
    node_capacity = per_node * Q_(plain(device_capacity), "B")
    nodes = min_shards(resident, node_capacity)
    count = nodes * per_node if devices is None else as_count(devices)
    per_device = weight_bytes(active_parameters, bits_per_weight) / count
    read = (per_device / Q_(plain(memory_bandwidth), "B/s")).to("ms")
    token = (read + Q_(plain(routing_time), "s")).to("ms")
    return MoeDecodeFloor(
        resident_bytes=resident.to("GB"),
        nodes=nodes,
        node_capacity=node_capacity.to("GB"),
        devices=as_count(count),
        read_bytes_per_device=per_device.to("GB"),
        read_time=read,
        token_time=token,
        tokens_per_second=(1 / token).to("1/s") * Q_(1, "token"),
    )


@checked(capacity_factor="positive")
def expert_capacity(tokens: Count, experts_per_token: Count, experts: Count, capacity_factor: Number = 1.25) -> Count:
    r"""Token slots per expert under a capacity factor.

    Parameters
    ----------
    tokens : int
        Tokens in the batch routed through the MoE layer.
    experts_per_token : int
        Experts selected per token (top-k).
    experts : int
        Experts in the layer.
    capacity_factor : float
        Slack over the even share (1.25 is the chapter's illustrative setting, §10.10.4).

    Returns
    -------
    int

    Notes
    -----
    .. math:: C = \left\lceil \mathrm{CF} \cdot \frac{T k}{E} \right\rceil

    The standard form (the chapter names the capacity factor but writes no formula). Tokens beyond
    an expert's capacity are dropped or rerouted (which changes the computation) or buffered (latency).

    Examples
    --------
    >>> expert_capacity(4096, 2, 8)
    1280
    """
    share = np.asarray(tokens) * experts_per_token / experts
    return as_count(np.ceil(capacity_factor * share * (1 - 1e-12)))


@checked(capacity_factor=one("positive"), tokens=one(), experts=one(), experts_per_token=one(), trials=one())
def simulate_expert_overflow(
    tokens: Count,
    experts: Count,
    experts_per_token: Count,
    capacity_factor: Number = 1.25,
    popularity: Any = None,
    trials: Count = 200,
    seed: int = 0,
) -> float:
    """Mean fraction of token-to-expert assignments that exceed expert capacity (seeded simulation).

    Parameters
    ----------
    tokens, experts, experts_per_token, capacity_factor
        As for :func:`expert_capacity`.
    popularity : array of float, optional
        Relative routing probability of each expert (skew); uniform if omitted.
    trials : int
        Simulated batches.
    seed : int
        Random seed.

    Returns
    -------
    float
        Dropped (or buffered) assignments over all assignments.

    Notes
    -----
    Each token picks ``experts_per_token`` distinct experts with probability proportional to
    ``popularity`` (Gumbel top-k sampling). Even a uniform router overflows some experts at a
    capacity factor near 1, and skew makes the popular expert's host an incast point (§10.10.4).

    Examples
    --------
    >>> simulate_expert_overflow(512, 8, 2, 1.25, trials=50) < 0.01
    True
    """
    tokens, experts, experts_per_token, trials = int(tokens), int(experts), int(experts_per_token), int(trials)
    capacity = expert_capacity(tokens, experts_per_token, experts, capacity_factor)
    weights = np.ones(experts) if popularity is None else np.asarray(popularity, dtype=float)
    if weights.shape != (experts,):
        raise InputError(f"simulate_expert_overflow(): argument 'popularity' needs {experts} values")
    check_domain("simulate_expert_overflow", "popularity", weights, "nonnegative")
    if np.count_nonzero(weights) < experts_per_token:
        raise InputError("simulate_expert_overflow(): fewer experts with positive popularity than experts_per_token")
    rng = np.random.default_rng(random_seed("simulate_expert_overflow", "seed", seed))
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights / weights.sum())
    dropped = 0
    for _ in range(trials):
        keys = log_weights + rng.gumbel(size=(tokens, experts))
        chosen = np.argpartition(-keys, experts_per_token - 1, axis=1)[:, :experts_per_token]
        load = np.bincount(chosen.ravel(), minlength=experts)
        dropped += np.maximum(load - capacity, 0).sum()
    return float(dropped / (trials * tokens * experts_per_token))
