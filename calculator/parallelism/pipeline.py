"""Pipeline parallelism: hybrid TP x PP layouts, and the latency, throughput and bubble of a pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked, one
from ..errors import InputError
from ..formula import formula, var
from ..results import Result
from ..types import Count, Rate, Time
from ..units import Q_
from ._common import _ZERO_SECONDS

__all__ = [
    "PipelineStage",
    "HybridLayout",
    "hybrid_layout",
    "PipelinePerformance",
    "pipeline_performance",
    "pipeline_bubble_fraction",
]


# --------------------------------------------------------------------------------------------
# Placement: hybrid TP x PP layouts


@dataclass(frozen=True, repr=False)
class PipelineStage(Result):
    """One pipeline stage: its inclusive 1-based layer range and the devices of its TP group."""

    index: int
    first_layer: int
    last_layer: int
    devices: tuple[int, ...]


@dataclass(frozen=True, repr=False)
class HybridLayout(Result):
    """A pipeline-by-tensor-parallel layout: ``devices = pipeline_parallel x tensor_parallel``.

    ``layers_per_stage`` is the most layers any stage holds: stages differ by at most one layer when
    the pipeline degree does not divide the layer count (the first stages take the extra layers).
    """

    pipeline_parallel: int
    tensor_parallel: int
    devices: int
    layers_per_stage: int
    stages: tuple[PipelineStage, ...]


@checked(layers=one(), pipeline_parallel=one(), tensor_parallel=one(), attention_heads=one())
def hybrid_layout(
    layers: Count, pipeline_parallel: Count, tensor_parallel: Count, attention_heads: Count | None = None
) -> HybridLayout:
    """Lay out a model as pipeline stages of contiguous layers, each a tensor-parallel group.

    Parameters
    ----------
    layers : int
        Transformer layers, at least ``pipeline_parallel``; when the degree does not divide them, the
        contiguous stages differ by one layer (DeepSeek-V3's 61 layers on 4 stages: 16, 15, 15, 15).
    pipeline_parallel : int
        Pipeline stages.
    tensor_parallel : int
        Devices per stage.
    attention_heads : int, optional
        If given, checked to be divisible by ``tensor_parallel``.

    Returns
    -------
    HybridLayout

    Notes
    -----
    Section 10.10.6: the tensor split cuts per-layer compute by up to the TP degree;
    the pipeline stages complete the memory distribution and add no per-request latency benefit.

    Examples
    --------
    The chapter's 2 x 4 layout of an 80-layer model:

    >>> layout = hybrid_layout(80, 2, 4)
    >>> [(s.first_layer, s.last_layer, s.devices) for s in layout.stages]
    [(1, 40, (0, 1, 2, 3)), (41, 80, (4, 5, 6, 7))]

    A layer count the pipeline degree does not divide:

    >>> [(s.first_layer, s.last_layer) for s in hybrid_layout(61, 4, 8).stages]
    [(1, 16), (17, 31), (32, 46), (47, 61)]
    """
    count, stages, degree = int(layers), int(pipeline_parallel), int(tensor_parallel)
    if stages > count:
        raise InputError(
            f"hybrid_layout(): argument 'pipeline_parallel' ({stages}) must not exceed layers ({count}): "
            "every stage holds at least one layer"
        )
    heads = None if attention_heads is None else int(attention_heads)
    if heads is not None and heads % degree:
        raise InputError(
            f"hybrid_layout(): argument 'tensor_parallel' ({degree}) must divide attention_heads ({heads})"
        )
    per, extra = divmod(count, stages)
    bounds = [0]
    for i in range(stages):
        bounds.append(bounds[-1] + per + (1 if i < extra else 0))
    return HybridLayout(
        pipeline_parallel=stages,
        tensor_parallel=degree,
        devices=stages * degree,
        layers_per_stage=per + (1 if extra else 0),
        stages=tuple(
            PipelineStage(
                index=i,
                first_layer=bounds[i] + 1,
                last_layer=bounds[i + 1],
                devices=tuple(range(i * degree, (i + 1) * degree)),
            )
            for i in range(stages)
        ),
    )


# --------------------------------------------------------------------------------------------
# Pipeline parallelism


@dataclass(frozen=True, repr=False)
class PipelinePerformance(Result):
    """Single-request latency, steady-state throughput, makespan and bubble of a pipeline."""

    stages: int
    requests: int
    latency: Time
    throughput: Rate
    makespan: Time
    bubble_fraction: float


@checked(stage_times="positive", requests=one())
def pipeline_performance(
    stage_times: Time, requests: Count = 1, transfer_time: Time = _ZERO_SECONDS
) -> PipelinePerformance:
    r"""Latency, throughput and bubble of a pipeline of stages serving ``requests`` identical requests.

    Parameters
    ----------
    stage_times : Quantity [time], 1-D array
        Execution time of each stage for one request (or micro-batch).
    requests : int, optional
        Requests in flight over the window.
    transfer_time : Quantity [time], scalar or array of ``stages - 1``
        Activation transfer between consecutive stages (:func:`point_to_point_time`), on links that
        run concurrently with compute.

    Returns
    -------
    PipelinePerformance
        ``latency`` (one request: the sum of stages and transfers), ``throughput`` (requests per
        second at saturation: one over the slowest stage or link), ``makespan`` of the ``requests``
        and ``bubble_fraction`` (idle share of the stage devices over the makespan).

    Notes
    -----
    .. math:: L = \sum_i T_i + \sum_j X_j, \quad X = 1/\max(T_i, X_j), \quad
              T_{\mathrm{make}} = L + (m - 1)\max(T_i, X_j)

    A request still traverses every stage, so staging alone gives no latency reduction (seed
    §10.10.3); throughput is limited by the slowest stage (§10.10.3). The makespan is exact for
    identical requests through a flow shop; for balanced stages the bubble is
    :func:`pipeline_bubble_fraction`.

    Examples
    --------
    Four balanced 5 ms stages: a lone request keeps three of four devices idle; 12 in flight
    amortize the fill.

    >>> pipeline_performance(Q_([5, 5, 5, 5], "ms")).bubble_fraction
    0.75
    >>> round(pipeline_performance(Q_([5, 5, 5, 5], "ms"), requests=12).bubble_fraction, 4)
    0.2
    """
    times = np.atleast_1d(stage_times)
    if times.ndim != 1:
        raise InputError("pipeline_performance(): argument 'stage_times' must be a non-empty 1-D array")
    count = int(requests)
    transfers = np.broadcast_to(np.asarray(transfer_time), (times.size - 1,))
    bottleneck = max(times.max(), transfers.max(initial=0.0))
    latency = times.sum() + transfers.sum()
    makespan = latency + (count - 1) * bottleneck
    return PipelinePerformance(
        stages=times.size,
        requests=count,
        latency=Q_(latency, "s").to("ms"),
        throughput=Q_(1 / bottleneck, "request/s"),
        makespan=Q_(makespan, "s").to("ms"),
        bubble_fraction=float(1 - count * times.sum() / (times.size * makespan)),
    )


@formula(
    result=var("", "b", description="idle fraction of a balanced pipeline"),
    reference="section 10.10.3 (Figure 17); standard fill-and-drain bubble (not written in the chapter)",
    stages=var("", "P", "positive_integer", "pipeline stages"),
    requests=var("", "m", "positive_integer", "requests (micro-batches) in flight"),
    example={"stages": 4, "requests": 1},
)
def pipeline_bubble_fraction(stages, requests):
    r"""Idle fraction of ``stages`` balanced stages over the fill and drain of ``requests`` requests.

    Parameters
    ----------
    stages : int
        Pipeline stages.
    requests : int
        Requests (or micro-batches) in flight.

    Returns
    -------
    float

    Notes
    -----
    .. math:: b = \frac{P - 1}{m + P - 1}

    The balanced special case of :func:`pipeline_performance` with no transfer time. The chapter
    describes the fill (Figure 17: every stage busy from slot :math:`t_4` with four stages) but
    writes no fraction; this is the standard form.

    Examples
    --------
    >>> pipeline_bubble_fraction(4, 1)
    0.75
    """
    return (stages - 1) / (requests + stages - 1)
