"""Batching for particular workloads: recommendation, streaming and test-time compute.

Feature-parallel batching of embedding lookups (section 10.6.6, Example 10.3), streaming latency
budgets (10.6.7) and test-time compute budgets (10.6.9, Napkin Math 10.4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked, one
from ..errors import InputError
from ..formula import formula, per, var
from ..results import Result, as_count
from ..types import Count, Time
from ..units import Q_

__all__ = [
    "shard_lookup_rate",
    "shard_batch_size",
    "streaming_latency",
    "frames_of_delay",
    "pipeline_sustains",
    "reasoning_latency",
    "ReasoningBudget",
    "reasoning_budget",
]


# --------------------------------------------------------------------------------------------
# 10.6.6 Feature-parallel batching (Example 10.3)


@formula(
    result=var("1/s", r"\lambda_{\mathrm{shard}}", description="embedding lookups per second at one shard"),
    reference="Example 10.3, section 10.6.6",
    arrival_rate=var("request/s", r"\lambda", description="requests per second"),
    lookups_per_request=var("", "n_{L}", description="embedding lookups each request issues"),
    shards=var("", "S", "positive_integer", "embedding shards sharing the lookups"),
    example={"arrival_rate": "10e6 request/s", "lookups_per_request": 5000, "shards": 1000},
)
def shard_lookup_rate(arrival_rate, lookups_per_request, shards):
    r"""Lookups per second each embedding shard must sustain, for evenly spread lookups.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Request rate.
    lookups_per_request : float
        Embedding lookups per request.
    shards : int
        Shards the lookups spread over evenly.

    Returns
    -------
    Quantity [1 / time]
        Lookups per second per shard.

    Notes
    -----
    .. math:: \lambda_{\mathrm{shard}} = \frac{\lambda\, n_L}{S}

    Example 10.3 (§10.6.6). Skewed access (hot embeddings) concentrates load above this mean.

    Examples
    --------
    >>> shard_lookup_rate(Q_(10e6, "request/s"), 5000, 1000)
    <Quantity(50000000.0, '1 / second')>
    """
    return per(arrival_rate * lookups_per_request / shards, "1/request")


@formula(
    result=var("", r"B_{\mathrm{shard}}", "nonnegative", "lookups one shard batches per window"),
    reference="Example 10.3, section 10.6.6",
    lookup_rate=var("1/s", r"\lambda_{\mathrm{shard}}", "nonnegative", "lookups per second at the shard"),
    window=var("s", "T_{w}", "nonnegative", "accumulation window"),
    example={"lookup_rate": "50e6 1/s", "window": "1 ms"},
)
def shard_batch_size(lookup_rate, window):
    r"""Lookups a shard accumulates in one window.

    Parameters
    ----------
    lookup_rate : Quantity [1 / time]
        From :func:`shard_lookup_rate`.
    window : Quantity [time]
        Accumulation window (it spends part of the end-to-end budget).

    Returns
    -------
    float

    Notes
    -----
    .. math:: B_{\mathrm{shard}} = \lambda_{\mathrm{shard}}\, T_w

    Example 10.3 (§10.6.6): 50 M lookups/s over 1 ms gives batches of 50K, an opportunity to
    deduplicate and coalesce, not a way to make random addresses sequential.

    Examples
    --------
    >>> shard_batch_size(Q_(50e6, "1/s"), Q_(1, "ms"))
    50000.0
    """
    return lookup_rate * window


# --------------------------------------------------------------------------------------------
# 10.6.7 Streaming


@formula(
    result=var("s", r"L_{\mathrm{stream}}", "nonnegative", "end-to-end latency of one streamed input"),
    reference="section 10.6.7 (streaming end-to-end latency)",
    capture=var("s", r"t_{\mathrm{capture}}", "nonnegative", "input capture"),
    transfer=var("s", r"t_{\mathrm{transfer}}", "nonnegative", "payload transfer"),
    inference=var("s", r"t_{\mathrm{inf}}", "nonnegative", "inference"),
    action=var("s", r"t_{\mathrm{action}}", "nonnegative", "acting on the result"),
    example={"capture": "20 ms", "transfer": "5 ms", "inference": "40 ms", "action": "10 ms"},
)
def streaming_latency(capture, transfer, inference, action):
    r"""End-to-end latency of a streaming pipeline, which must fit its budget.

    Parameters
    ----------
    capture, transfer, inference, action : Quantity [time]
        Input capture, payload transfer, inference and result action.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{stream}} = t_{\mathrm{capture}} + t_{\mathrm{transfer}} + t_{\mathrm{inf}}
              + t_{\mathrm{action}}

    §10.6.7. The budget may span several frames (:func:`frames_of_delay`); a pipelined
    implementation must also keep its slowest stage faster than the frames arrive
    (:func:`pipeline_sustains`).

    Examples
    --------
    >>> streaming_latency(Q_(20, "ms"), Q_(5, "ms"), Q_(40, "ms"), Q_(10, "ms")).to("ms")
    <Quantity(75.0, 'millisecond')>
    """
    return capture + transfer + inference + action


@checked(frame_interval="positive")
def frames_of_delay(budget: Time, frame_interval: Time) -> Count:
    r"""How many frame intervals of delay a latency budget can hold.

    Parameters
    ----------
    budget : Quantity [time]
        End-to-end latency budget.
    frame_interval : Quantity [time]
        Time between input frames (1 / frame rate).

    Returns
    -------
    int or ndarray of int

    Notes
    -----
    .. math:: n = \lfloor L_{\mathrm{budget}} / \Delta t_{\mathrm{frame}} \rfloor

    §10.6.7: 20 ms frames and a 100 ms budget hold at most five frames of delay; batching ready
    frames from independent streams helps only while the added wait fits that slack.

    Examples
    --------
    >>> frames_of_delay(Q_(100, "ms"), Q_(20, "ms"))
    5
    """
    return as_count(np.floor(np.asarray(budget) / frame_interval + 1e-9))


@checked(frame_interval=one("positive"))
def pipeline_sustains(stage_times: Time, frame_interval: Time) -> bool:
    """Whether a pipeline keeps up with its input: its slowest stage is no slower than the frame interval.

    Parameters
    ----------
    stage_times : Quantity [time], array (stages,)
        Processing time per frame of each pipelined stage.
    frame_interval : Quantity [time]
        Time between frames.

    Returns
    -------
    bool

    Notes
    -----
    §10.6.7: a pipelined implementation must sustain the input arrival rate.

    Examples
    --------
    >>> pipeline_sustains(Q_([5, 18, 9], "ms"), Q_(20, "ms"))
    True
    """
    stages = np.asarray(stage_times)
    if stages.size == 0:
        raise InputError("pipeline_sustains(): argument 'stage_times' needs at least one stage")
    return bool(stages.max() <= frame_interval)


# --------------------------------------------------------------------------------------------
# 10.6.9 Test-time compute


@formula(
    result=var("s", r"L_{\mathrm{serial}}", "nonnegative", "latency of serially generated tokens"),
    reference="Napkin Math 10.4, section 10.6.9",
    serial_tokens=var("", "N", "nonnegative", "tokens generated one after another"),
    time_per_token=var("s", r"t_{\mathrm{tok}}", "positive", "time per generated token"),
    example={"serial_tokens": 128, "time_per_token": "100 ms"},
)
def reasoning_latency(serial_tokens, time_per_token):
    r"""Latency of tokens that must be generated serially (reasoning or answer).

    Parameters
    ----------
    serial_tokens : float
        Tokens generated one after another.
    time_per_token : Quantity [time]
        Time per token (TPOT).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{serial}} = N\, t_{\mathrm{tok}}

    Napkin Math 10.4 (§10.6.5): 128 reasoning tokens at 100 ms are 12.8 s.

    Examples
    --------
    >>> reasoning_latency(128, Q_(100, "ms")).to("s")
    <Quantity(12.8, 'second')>
    """
    return serial_tokens * time_per_token


@dataclass(frozen=True, repr=False)
class ReasoningBudget(Result):
    """A per-request test-time compute budget checked in latency and in capacity.

    Attributes
    ----------
    direct_latency : Quantity [time]
        Latency of the direct answer.
    reasoning_latency : Quantity [time]
        Latency of the serial reasoning response.
    latency_multiplier : float
        ``reasoning_tokens / answer_tokens``: independent of the time per token.
    max_serial_tokens : int
        Serial tokens that fit the latency budget.
    within_latency : bool
        The reasoning response fits the latency budget.
    generated_tokens : float
        Tokens the request generates over all parallel candidates (its capacity cost).
    within_capacity : bool, array of bool or None
        ``generated_tokens <= token_budget`` (an array for an array of budgets; None without a token budget).
    """

    direct_latency: Time
    reasoning_latency: Time
    latency_multiplier: float
    max_serial_tokens: Count
    within_latency: bool
    generated_tokens: Count
    within_capacity: bool | np.ndarray | None


@checked(
    time_per_token=one("positive"),
    latency_budget=one(),
    reasoning_tokens=one("nonnegative"),
    answer_tokens="positive",
    token_budget="nonnegative",
)
def reasoning_budget(
    time_per_token: Time,
    latency_budget: Time,
    reasoning_tokens: Count,
    answer_tokens: Count = 1,
    candidates: Count = 1,
    token_budget: Count | None = None,
) -> ReasoningBudget:
    """Check a reasoning request against a per-request compute budget, stated in latency and capacity.

    Parameters
    ----------
    time_per_token : Quantity [time]
        Time per generated token.
    latency_budget : Quantity [time]
        The request's latency target.
    reasoning_tokens : float
        Serial tokens of the reasoning response (its answer included).
    answer_tokens : float, default 1
        Tokens of the direct answer it is compared with.
    candidates : int, default 1
        Candidates generated in parallel (each adds compute and KV residency, not serial latency).
    token_budget : float, optional
        The request's share of fleet capacity, in generated tokens.

    Returns
    -------
    ReasoningBudget

    Notes
    -----
    Napkin Math 10.4 and section 10.6.9 (§10.6.5, answer §10.18): serial reasoning multiplies
    latency by ``reasoning_tokens / answer_tokens`` whatever each token costs; parallel candidates
    multiply capacity, not serial latency. The budget binds on whichever runs out first.

    Examples
    --------
    >>> b = reasoning_budget(Q_(100, "ms"), Q_(10, "s"), 128)
    >>> b.reasoning_latency.to("s"), b.latency_multiplier, b.max_serial_tokens, b.within_latency
    (<Quantity(12.8, 'second')>, 128.0, 100, False)
    """
    step, budget, serial = Q_(time_per_token, "s"), Q_(latency_budget, "s"), float(reasoning_tokens)
    latency = reasoning_latency(serial, step)
    generated = float(candidates * serial)
    within_capacity = None
    if token_budget is not None:
        within_capacity = generated <= token_budget
        within_capacity = bool(within_capacity) if np.ndim(within_capacity) == 0 else within_capacity
    return ReasoningBudget(
        direct_latency=reasoning_latency(answer_tokens, step),
        reasoning_latency=latency,
        latency_multiplier=float(serial / answer_tokens),
        max_serial_tokens=as_count(np.floor((budget / step).m_as("") + 1e-9)),
        within_latency=bool(latency <= budget),
        generated_tokens=generated,
        within_capacity=within_capacity,
    )
