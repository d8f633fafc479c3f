"""Iteration times of one replica: :func:`calculator.performance.iteration_seconds` read from tables.

Exact in the decode count, within 1 % in context length, interpolated in the prefill tokens; or one
fixed time for every iteration (``SimulationSetup.step_time``). Under speculative decoding an iteration is
a round (:class:`~calculator.performance.speculation.Rounds`): the verification's tables carry ``k + 1``
tokens a decoding sequence, and the drafting is a table of its own.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..performance import StepArrays
    from ..performance.speculation import Rounds

__all__: list[str] = []

_CTX_RATIO = 1.01  # context-length bins of the decode table
_PREFILL_RATIO = 1.08  # prefill-token grid of the mixed-iteration table (interpolated)
_PRIOR_RATIO = 1.05  # cached-prefix bins of the mixed-iteration table
_N_RATIO = 1.12  # decode-count bins of the mixed-iteration table (the prefill increment varies slowly)


# --------------------------------------------------------------------------------------------
# Iteration times: tables of performance.iteration_seconds


class _FixedStep:
    """Every iteration takes the same time (``SimulationSetup.step_time``)."""

    fixed = (0.0, 0.0, False)  # no engine costs beyond the fixed time

    def __init__(self, seconds: float):
        self.seconds = seconds

    def decode(self, n: int, context: float) -> float:
        return self.seconds

    def prefill(self, n: int, tokens: float, requests: int, prior: float) -> float:
        return 0.0

    def pass_beyond(self, n: int, tokens: float, requests: int, prior: float) -> float:
        return 0.0

    def total(self, gpu: float, sequences: int) -> float:
        return gpu

    def drafting(self, n: int, context: float) -> float:
        return 0.0

    def together(self, tokens: float, padded: float, prefill: bool) -> float:
        return 0.0


class _StepTable:
    """Iteration times of one replica, read from tables of :func:`performance.iteration_seconds`.

    The tables hold the GPU work; :meth:`total` adds the engine's fixed costs (or, where the engine
    schedules asynchronously, takes the longer of the two), as :func:`iteration_seconds` does. A
    decode iteration of ``n`` sequences holding ``c`` tokens on average is a row per ``n`` over
    context bins 1 % apart. Prompt tokens add ``iteration_seconds(n, c, P, r, q) -
    iteration_seconds(n, c, 0)``, which under kernel pricing does not depend on ``c`` (decode
    attention is the same on both sides): a table per ``(r, q)`` bin over ``n`` bins and a grid of
    ``P``, interpolated linearly in ``P``. Rows are computed on first use, vectorized. Under ``speculative``
    rounds the tables are the verification's (``k + 1`` tokens a decoding sequence) and :meth:`drafting` the
    drafter's ``k`` steps or passes, added to the round beside the fixed costs (its own fixed costs included).
    """

    def __init__(
        self, arrays: StepArrays, efficiency: Any, tp: int, max_context: float, max_prefill: float,
        speculative: Rounds | None = None,
    ):  # fmt: skip
        from ..performance.speculation import PLAIN
        from ..units import Q_

        self.speculative = speculative or PLAIN
        self._price = self.speculative.verify
        self._efficiency = efficiency  # the drafter's steps carry the engine's fixed costs (a draft model's)
        self._drafts: dict[int, list[float]] = {}
        step, per_sequence = efficiency.fixed_seconds
        #: (per-iteration cost, per-sequence cost, whether they overlap the GPU work)
        self.fixed = (step, per_sequence, bool(efficiency.overlap))
        gpu_only = efficiency.replace(step_overhead=Q_(0.0, "s"), sequence_overhead=Q_(0.0, "s"), overlap=False)
        self.a, self.eff, self.tp = arrays, gpu_only, tp
        self._kc = 1 / math.log(_CTX_RATIO)
        self._ctx = np.exp(np.arange(int(math.log(max(max_context, 2.0)) * self._kc) + 3) / self._kc)
        self._rows: dict[int, list[float]] = {}
        self._kp = 1 / math.log(_PREFILL_RATIO)
        self._p = np.exp(np.arange(int(math.log(max(max_prefill, 2.0)) * self._kp) + 3) / self._kp)
        self._kq = 1 / math.log(_PRIOR_RATIO)
        self._kn = 1 / math.log(_N_RATIO)
        self._n_of_bin: list[float] = []
        self._mixed: dict[tuple[int, int], list[list[float]]] = {}
        self._together: dict[tuple[float, float, bool], float] = {}  # seconds of the ranks' shared work

    def decode(self, n: int, context: float) -> float:
        row = self._rows.get(n)
        if row is None:
            row = self._price(self.a, self.eff, self.tp, n, self._ctx).tolist()
            self._rows[n] = row
        k = int(math.log(context) * self._kc + 0.5) if context >= 1 else 0
        return row[k] if k < len(row) else row[-1] * context / self._ctx[-1]

    def drafting(self, n: int, context: float) -> float:
        """Seconds the drafter takes a round of ``n`` decoding sequences holding ``context`` tokens on average."""
        row = self._drafts.get(n)
        if row is None:
            row = self.speculative.drafting(self._efficiency, self.tp, n, self._ctx).tolist()
            self._drafts[n] = row
        k = int(math.log(context) * self._kc + 0.5) if context >= 1 else 0
        return row[k] if k < len(row) else row[-1] * context / self._ctx[-1]

    def together(self, tokens: float, padded: float, prefill: bool) -> float:
        """Seconds of the work that runs every attention rank's ``tokens`` at once (0 for a dense model).

        The routed experts' layers, and with attention ranks their exchange of the tokens
        (``pricing._expert_exchange_seconds``; ``padded``: the ranks' tokens padded to the busiest rank's,
        ``prefill``: whether a prompt is in the iteration).
        """
        if self.a.experts <= 1 or tokens <= 0:
            return 0.0
        key = (tokens, padded, prefill)
        found = self._together.get(key)
        if found is None:
            # private: the iteration model's kernel curves, tabulated once per seed (the step table is its cache)
            from ..performance.iteration import _curves, _expert_exchange_seconds, _interp_curve

            tp = float(self.tp)
            found = float(self.a.layers * _interp_curve(_curves(self.a, tp)["experts"], np.array([tokens]))[0])
            if self.a.attention_group(tp) < tp:
                found += float(self.a.layers * _expert_exchange_seconds(self.a, tp, tokens, padded, float(prefill)))
            found *= self.eff.gpu_time_scale  # as iteration_seconds scales the GPU work
            self._together[key] = found
        return found

    def pass_beyond(self, n: int, tokens: float, requests: int, prior: float) -> float:
        """What the prompts' first tokens wait beyond the iteration's end: their pass through pipeline stages."""
        if self.a.pipeline_parallel <= 1:
            return 0.0
        from ..performance.iteration import pipeline_pass_seconds

        return float(pipeline_pass_seconds(self.a, self.eff, self.tp, n, 1024.0, tokens, requests, prior))

    def total(self, gpu: float, sequences: int) -> float:
        """The iteration's time: its GPU work and the engine's fixed costs for ``sequences`` sequences."""
        step, per_sequence, overlap = self.fixed
        fixed = step + per_sequence * sequences
        return max(fixed, gpu) if overlap else fixed + gpu

    def _n_bin(self, n: int) -> int:
        return 0 if n <= 0 else (n if n <= 8 else 8 + int(math.log(n / 8) * self._kn + 0.5))

    def _bin_n(self, k: int) -> float:
        return float(k) if k <= 8 else 8 * math.exp((k - 8) / self._kn)

    def prefill(self, n: int, tokens: float, requests: int, prior: float) -> float:
        """What ``tokens`` prompt tokens over ``requests`` requests after ``prior`` cached tokens add."""
        r_bin = requests if requests <= 8 else 8 + int(math.log(requests / 8) * self._kn + 0.5)
        q_bin = 0 if prior < 1 else 1 + int(math.log(prior) * self._kq + 0.5)
        table = self._mixed.get((r_bin, q_bin))
        if table is None:
            table = self._mixed_table(r_bin, q_bin)
        nb = self._n_bin(n)
        if nb >= len(table):
            table = self._extend(table, nb, r_bin, q_bin)
        row = table[nb]
        x = math.log(tokens) * self._kp if tokens >= 1 else 0.0
        i = int(x)
        if i + 1 >= len(row):
            return row[-1] * tokens / self._p[-1]
        f = x - i
        return row[i] + f * (row[i + 1] - row[i])

    def _mixed_table(self, r_bin: int, q_bin: int) -> list[list[float]]:
        table: list[list[float]] = []
        self._mixed[r_bin, q_bin] = table
        return self._extend(table, 16, r_bin, q_bin)

    def _extend(self, table: list[list[float]], upto: int, r_bin: int, q_bin: int) -> list[list[float]]:
        requests = self._bin_n(r_bin)
        prior = 0.0 if q_bin == 0 else math.exp((q_bin - 1) / self._kq)
        bins = np.arange(len(table), upto + 1)
        n = np.array([self._bin_n(int(k)) for k in bins])[:, None]
        p = np.maximum(self._p[None, :], requests)
        ref = 1024.0
        with_prompt = self._price(self.a, self.eff, self.tp, n, ref, p, requests, prior)
        without = self._price(self.a, self.eff, self.tp, n, ref)
        table.extend(np.maximum(with_prompt - without, 0.0).tolist())
        return table
