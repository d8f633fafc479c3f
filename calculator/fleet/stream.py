"""The spread of the stream: a request's TPOT and the token gaps at a percentile, in closed form.

The fleet sizer's mean TPOT and longest gap (:mod:`calculator.fleet.evaluate`) say nothing of how the
requests' TPOT and the gaps between tokens spread; service contracts bound their percentiles. The
derivation and its measured agreement with the simulator are in ``docs/fleet-sizer.md`` ("Percentile
targets for the stream"). Also the log-normal prompt and output lengths both read: their quantiles, quadrature
nodes, and a prompt's prefill seconds' mean and CV over them (:func:`prefill_moments`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .inputs import Workload

__all__: list[str] = []


@dataclass(frozen=True)
class Gaps:
    """What a family's grid says of its token gaps (arrays over the grid, SI).

    ``per_round``: tokens a gap (an iteration, a speculative round) emits per sequence; ``per_token``: the
    decode step per token without prompts; ``chunks`` and ``costs``: per class of prompt chunk, the chunks a
    prompt brings on average and the seconds each adds to the gap it lands in.
    """

    per_round: np.ndarray
    per_token: np.ndarray
    chunks: tuple[np.ndarray, ...]
    costs: tuple[np.ndarray, ...]


def length_grid(mean: float, cv: float, points: int = 24) -> tuple[list[float], list[float]]:
    """Equal-weight quantiles of a log-normal length (the midpoints of ``points`` equal-probability bins).

    Quantile nodes rather than Gauss-Hermite ones: the token-gap tail reads the length distribution's
    tail, which five Gauss-Hermite nodes place too coarsely (:func:`stream_tails`).
    """
    if cv <= 0:
        return [mean], [1.0]
    probabilities = (np.arange(points) + 0.5) / points
    return [length_quantile(mean, cv, float(p)) for p in probabilities], [1.0 / points] * points


def prefill_moments(
    prefill: Callable[[float], Any], nodes: list[float], weights: list[float], cached: float = 0.0
) -> tuple[Any, Any]:
    """The mean and CV of a prompt's prefill seconds over its lengths' quadrature ``nodes`` and ``weights``.

    ``prefill(tokens)`` prices the tokens a prompt computes (its length less the ``cached`` ones, at least one).
    A queue of prompts served one by one (a prefill-first engine, a disaggregated prefill pool) has this service:
    attention is convex in the length, so the mean prompt's prefill is below the mean prefill.

    Examples
    --------
    >>> nodes, weights = length_nodes(1000.0, 0.5)
    >>> mean, cv = prefill_moments(lambda n: 1e-3 * n, nodes, weights)  # linear: the mean prompt's, the lengths' CV
    >>> round(float(mean), 6), round(float(cv), 3)
    (1.0, 0.5)
    >>> mean, cv = prefill_moments(lambda n: 1e-6 * n * n, nodes, weights)  # quadratic: E[L^2] = (1 + cv^2) L^2
    >>> round(float(mean), 3), float(cv) > 0.5
    (1.25, True)
    """
    times = [prefill(max(n - cached, 1.0)) for n in nodes]
    mean = sum(w * t for w, t in zip(weights, times, strict=True))
    second = sum(w * t * t for w, t in zip(weights, times, strict=True))
    return mean, np.sqrt(np.maximum(second / (mean * mean) - 1.0, 0.0))


def length_nodes(mean: float, cv: float, points: int = 5) -> tuple[list[float], list[float]]:
    """Gauss-Hermite nodes and weights of a log-normal length with ``mean`` and ``cv`` (one node if fixed)."""
    if cv <= 0:
        return [mean], [1.0]
    sigma = math.sqrt(math.log1p(cv**2))
    z, w = np.polynomial.hermite_e.hermegauss(points)
    w = w / w.sum()
    return [float(v) for v in mean * np.exp(sigma * z - sigma**2 / 2)], [float(v) for v in w]


def length_quantile(mean: float, cv: float, quantile: float | None) -> float:
    """The ``quantile`` of a log-normal length (the mean when fixed or when no quantile is asked)."""
    if cv <= 0 or quantile is None:
        return mean
    from scipy.stats import norm

    sigma = math.sqrt(math.log1p(cv**2))
    return float(mean * math.exp(sigma * norm.ppf(quantile) - sigma**2 / 2))


def stream_tails(
    gaps: Gaps, row: tuple[np.ndarray, int], point: tuple[np.ndarray, np.ndarray, np.ndarray],
    tpot: np.ndarray, workload: Workload, stream: tuple[float | None, float | None],
) -> tuple[np.ndarray | None, np.ndarray | None]:  # fmt: skip
    """The TPOT of a request and the token gap at the ``stream`` percentiles (None where none is asked).

    A gap is one iteration (a speculative round): the decodes at the running batch plus what the prompts
    landing in it add. A prompt of the length node ``w`` (weight ``p_w``) lands in ``k_w`` iterations,
    each ``d_w`` longer; prompts arrive ``load`` a second, so over a gap of mean ``g`` the landings of
    node ``w`` are Poisson with mean ``m_w = load g p_w k_w`` (an M/G/inf count of prompts in flight).
    The gap is ``g - sum m_w d_w`` plus that compound Poisson sum: its tail sums over ``j`` landings,
    ``j = 1`` exactly over the nodes and ``j >= 2`` as a normal of ``j`` costs. A request's TPOT is the
    mean of its ``(O - 1) / r`` gaps (``r`` tokens a round): the planned TPOT plus the landings over its life,
    clustered (a landing lengthens the life, in which more prompts land), and the running batch's wander;
    :func:`_tpot_tail` takes its quantile. ``point``: the running batch's fixed point, each replica's load
    and the mean running batch. See ``docs/fleet-sizer.md``.
    """
    from scipy.stats import norm, poisson

    tpot_p, gap_p = stream
    if tpot_p is None and gap_p is None:
        return None, None
    grid, i = row  # the candidate grid's caps, and the row (TP degree) evaluated
    fluid, load, running = point  # the running batch's fixed point, each replica's load, the mean running batch

    def at(values: np.ndarray) -> np.ndarray:  # the row's values at the running batch
        return np.interp(fluid, grid[i], np.broadcast_to(values, grid.shape)[i])

    per_round = at(gaps.per_round)
    gap = tpot * per_round
    costs = [at(d) for d in gaps.costs]
    rates = [load * gap * at(k) for k in gaps.chunks]
    landings = sum(rates)
    added = sum(m * d for m, d in zip(rates, costs, strict=True))
    second = sum(m * d**2 for m, d in zip(rates, costs, strict=True))
    base = np.maximum(gap - added, 0.0)
    tpot_tail = gap_tail = None
    if tpot_p is not None:
        # A landing lengthens the request's life, and prompts arrive in that time too: landings come in
        # clusters (a branching process of mean rho, the prompts' share of a gap), which scale the
        # second moment by b^2 and the third by (1 + 2 rho) b^4 (the Borel distribution's), b = 1 / (1 - rho).
        rho = np.minimum(added / np.maximum(gap, 1e-300), 0.95)
        third = sum(m * d**3 for m, d in zip(rates, costs, strict=True)) * (1 + 2 * rho) / (1 - rho) ** 4
        # The decode step grows with the running batch, which wanders over a request's life: Poisson-like
        # (variance its mean) in a clustered stream, b^2 more.
        slope = at(np.gradient(np.broadcast_to(gaps.per_token, grid.shape)[i], grid[i]))
        steady = slope**2 * running / (1 - rho) ** 2
        moments = (second / (1 - rho) ** 2 / per_round, third / per_round)
        tpot_tail = _tpot_tail(tpot, moments, steady, workload, tpot_p)
    if gap_p is not None:
        mean = added / np.maximum(landings, 1e-300)
        sd = np.sqrt(np.maximum(second / np.maximum(landings, 1e-300) - mean**2, 0.0))
        most = int(min(np.max(landings) + 10 * np.sqrt(np.max(landings)) + 10, 200))

        def gap_cdf(x: np.ndarray) -> np.ndarray:
            y = x - base
            one = sum(m * (d <= y) for m, d in zip(rates, costs, strict=True)) / np.maximum(landings, 1e-300)
            total = poisson.pmf(0, landings) * (y >= 0) + poisson.pmf(1, landings) * one
            for j in range(2, most + 1):
                total = total + poisson.pmf(j, landings) * norm.cdf((y - j * mean) / np.maximum(np.sqrt(j) * sd, 1e-12))
            return total

        gap_tail = _bisect(gap_cdf, base, base + (most + 1) * max(costs, key=np.max) + gap, gap_p)
    return tpot_tail, gap_tail


def _tpot_tail(
    tpot: np.ndarray, moments: tuple[np.ndarray, np.ndarray], steady: np.ndarray, workload: Workload, p: float
) -> np.ndarray:
    """The ``p`` quantile of a request's TPOT: a shifted gamma per output length, mixed over the lengths.

    A request of ``O`` tokens spends ``(O - 1) / r`` gaps decoding; the prompts landing in them add a compound
    Poisson sum, over ``O - 1`` tokens: its variance is ``moments[0] / (O - 1)`` and its third cumulant
    ``moments[1] / (O - 1)^2`` (``moments``: per token of a gap, the landings' second and third moments over
    ``r``). A gamma with those three moments keeps the skew a few long prompts give a short request.
    """
    from scipy.stats import gamma

    outputs, shares = length_grid(workload.output_tokens, workload.output_cv)
    fits = []
    for o in outputs:
        slots = max(o - 1.0, 1.0)
        variance, skew = moments[0] / slots + steady, moments[1] / slots**2
        scale = np.maximum(skew, 1e-300) / np.maximum(2 * variance, 1e-300)
        shape = variance / np.maximum(scale, 1e-300) ** 2
        fits.append((shape, scale, tpot - shape * scale))

    def cdf(x: np.ndarray) -> np.ndarray:
        return sum(w * gamma.cdf(x - shift, a, scale=s) for w, (a, s, shift) in zip(shares, fits, strict=True))

    widest = max(np.max(np.sqrt(moments[0] / max(o - 1.0, 1.0))) for o in outputs)
    return _bisect(cdf, tpot, tpot + 20 * widest + 1e-9, p)


def _bisect(cdf: Any, low: Any, high: Any, p: float, steps: int = 50) -> np.ndarray:
    """The smallest ``x`` in ``[low, high]`` with ``cdf(x) >= p`` (a non-decreasing ``cdf``), elementwise."""
    low, high = np.array(low, dtype=float), np.broadcast_to(np.asarray(high, dtype=float), np.shape(low)).copy()
    for _ in range(steps):
        mid = (low + high) / 2
        below = cdf(mid) < p
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return high
