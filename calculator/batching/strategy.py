"""Selecting a batching strategy (section 10.6.10): the decision tree of Table 9."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..results import Result

__all__ = [
    "BatchingStrategy",
    "TABLE_9",
    "BatchingRecommendation",
    "select_batching_strategy",
]


# --------------------------------------------------------------------------------------------
# 10.6.10 Selecting a batching strategy (decision tree, Table 9)


@dataclass(frozen=True, repr=False)
class BatchingStrategy(Result):
    """A row of Table 9: the batching policy a model class starts from."""

    model_type: str
    strategy: str
    typical_batch: str
    key_constraint: str
    key_parameters: str
    tuning_goal: str


#: Table 9 (§10.6.6). Typical batches are starting ranges, not requirements; they may lie
#: below or above the knee of :func:`knee_batch_size`.
TABLE_9 = (
    BatchingStrategy(
        "Vision (CNN)",
        "Static/Dynamic",
        "32-256",
        "GPU compute",
        "Batch size; window and max batch",
        "Balance latency vs. throughput",
    ),
    BatchingStrategy(
        "LLM (prefill)", "Dynamic", "1-64", "GPU compute", "Window, max batch", "Balance latency vs. throughput"
    ),
    BatchingStrategy(
        "LLM (decode)",
        "Continuous",
        "Tens-hundreds (KV-limited)",
        "Memory bandwidth",
        "Chunk size, max batch",
        "Minimize decode latency variance",
    ),
    BatchingStrategy(
        "RecSys",
        "Feature-parallel",
        "1000-10000s",
        "Embedding lookup",
        "Accumulation window",
        "Match embedding shard capacity",
    ),
    BatchingStrategy("Speech", "Streaming", "1", "Real-time", "Pipeline depth", "Meet real-time deadline"),
)


@dataclass(frozen=True, repr=False)
class BatchingRecommendation(Result):
    """The decision tree's answer and the Table 9 rows that describe it."""

    strategy: str
    rows: tuple[BatchingStrategy, ...]


def select_batching_strategy(
    autoregressive: bool, realtime_streaming: bool = False, embedding_dominated: bool = False
) -> BatchingRecommendation:
    """Walk the chapter's batching-strategy decision tree (section 10.6.10).

    Parameters
    ----------
    autoregressive : bool
        Autoregressive text generation?
    realtime_streaming : bool, default False
        Real-time streaming speech, video or robotics?
    embedding_dominated : bool, default False
        Do embedding lookups dominate latency?

    Returns
    -------
    BatchingRecommendation

    Notes
    -----
    §10.6.6, the questions asked in order; Table 9 (§10.6.6) gives each outcome's typical
    batch, binding constraint and tuning parameter. A starting point for measurement: memory
    admission, arrivals and the remaining latency budget set the usable settings.

    Examples
    --------
    >>> select_batching_strategy(autoregressive=True).strategy
    'continuous batching with chunked prefill'
    >>> select_batching_strategy(False, embedding_dominated=True).rows[0].typical_batch
    '1000-10000s'
    """
    for argument, value in (
        ("autoregressive", autoregressive),
        ("realtime_streaming", realtime_streaming),
        ("embedding_dominated", embedding_dominated),
    ):
        if not isinstance(value, bool | np.bool_):
            raise InputError(f"select_batching_strategy(): argument '{argument}' must be True or False, got {value!r}")
    rows = {row.model_type: row for row in TABLE_9}
    if autoregressive:
        return BatchingRecommendation(
            "continuous batching with chunked prefill", (rows["LLM (prefill)"], rows["LLM (decode)"])
        )
    if realtime_streaming:
        return BatchingRecommendation("streaming pipeline with minimal or no batching", (rows["Speech"],))
    if embedding_dominated:
        return BatchingRecommendation("feature-parallel batching", (rows["RecSys"],))
    return BatchingRecommendation("dynamic batching with adaptive parameters", (rows["Vision (CNN)"],))
