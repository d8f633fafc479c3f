"""Speculative decoding in the simulator: the tokens each decoding sequence emits a round, drawn per position.

A round's drafted positions pass the target's check with their acceptance probabilities, each once the positions
before it have passed (:class:`~calculator.serving.Speculation`); a sequence emits the accepted prefix and the
target's own token (:func:`~calculator.speculative.emitted_tokens`). The draws do not depend on the batch, so a
request's rounds are drawn when it starts decoding (:class:`_Acceptance`), which fixes the round it finishes in,
and each replica keeps the tokens its decoding sequences add to the KV cache round by round (:class:`_RoundTokens`).
"""

from __future__ import annotations

import numpy as np

__all__: list[str] = []


class _Acceptance:
    """The seed's acceptance draws (its own generator, seeded from the seed's)."""

    __slots__ = ("alphas", "mean", "rng")

    def __init__(self, positions: tuple[float, ...], mean: float, seed: int):
        self.alphas = np.asarray(positions, dtype=float)
        self.mean = mean  # the expected tokens a round, to size the draws
        self.rng = np.random.default_rng(seed)

    def rounds(self, tokens: int) -> np.ndarray:
        """The tokens of each round a sequence takes to emit ``tokens``, the last round cut at what is left."""
        from ..speculative import emitted_tokens

        drawn = np.zeros(0, dtype=np.int64)
        while drawn.sum() < tokens:  # draw a few more rounds than the mean needs, again while short
            more = int((tokens - drawn.sum()) / self.mean * 1.25) + 4
            drawn = np.concatenate([drawn, emitted_tokens(self.rng.random((more, self.alphas.size)) < self.alphas)])
        total = np.cumsum(drawn)
        last = int(np.searchsorted(total, tokens))  # the first round that reaches the tokens
        out = drawn[: last + 1].copy()
        out[-1] -= int(total[last]) - tokens
        return out


class _RoundTokens:
    """One replica's (or attention rank's) decoding sequences under speculation: their tokens, round by round.

    ``growth[d]``: the tokens the decoding sequences add in round ``d`` (the replica's ``d``-th decode iteration);
    ``tokens[req]``: the round a sequence started decoding after and its tokens per round.
    """

    __slots__ = ("acceptance", "growth", "tokens")

    def __init__(self, acceptance: _Acceptance):
        self.acceptance = acceptance
        self.growth = np.zeros(1024, dtype=np.int64)
        self.tokens: dict[int, tuple[int, np.ndarray]] = {}

    def join(self, req: int, start: int, tokens: int) -> int:
        """``req`` decodes from round ``start + 1`` until it has emitted ``tokens``; returns its rounds."""
        drawn = self.acceptance.rounds(tokens)
        end = start + 1 + drawn.size
        if end > self.growth.size:
            self.growth = np.concatenate([self.growth, np.zeros(max(end, self.growth.size), dtype=np.int64)])
        self.growth[start + 1 : end] += drawn
        self.tokens[req] = (start, drawn)
        return int(drawn.size)

    def at(self, round_: int) -> int:
        """The tokens the decoding sequences add in round ``round_``."""
        return int(self.growth[round_]) if round_ < self.growth.size else 0

    def within(self, round_: int, rounds: int, room: float) -> list[int]:
        """The tokens of at most ``rounds`` rounds from ``round_`` on, as long as their sum stays within ``room``."""
        ahead = self.growth[round_ : round_ + max(rounds, 0)]
        fits = int(np.searchsorted(np.cumsum(ahead), room, side="right"))
        return ahead[:fits].tolist()

    def leave(self, req: int, done: int) -> int:
        """``req`` stops decoding after round ``done`` (finished or preempted); returns the tokens it emitted."""
        start, drawn = self.tokens.pop(req)
        ran = done - start
        self.growth[done + 1 : start + 1 + drawn.size] -= drawn[ran:]
        return int(drawn[:ran].sum())
