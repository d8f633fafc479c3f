"""Speculative decoding in the step model: a round's price, the tokens it emits and its drafter's memory.

One rule, read by the fleet sizer (``calculator.fleet.evaluate``), the closed-loop predictor
(:func:`~calculator.performance.closed_loop_seconds`) and the simulator (``calculator.simulation``). A round
verifies ``k + 1`` tokens of every decoding sequence in one iteration of the target and drafts ``k``:
``k`` decode steps of a draft model, each an iteration of its own with the engine's fixed costs, or ``k``
passes of a head built into the target (:meth:`~calculator.performance.StepArrays.draft_head`), which run
inside the target's iteration: their GPU work alone, the round's fixed costs paid once by the verification.
Each decoding sequence emits the accepted prefix of its drafts and one token of the target's, ``E`` tokens
a round on average (Eq. 6, or its per-position form). A drafter's weights share the target's devices and
it caches KV for every token the target holds (``docs/fleet-sizer.md``, "Speculative decoding").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import InputError
from ..units import Q_
from .iteration import _iteration_seconds

if TYPE_CHECKING:
    from ..registry import Registry
    from ..serving import Speculation
    from .arrays import StepArrays
    from .engines import Efficiency, EngineProfile

__all__: list[str] = []  # the speculative round shared by the predictor, the sizer and the simulator

#: No fixed cost: a head's passes run inside the target's iteration.
_NO_TIME = Q_(0.0, "s")


@dataclass(frozen=True, eq=False)
class Rounds:
    """How a replica's decode iterations run: plain decode steps (:data:`PLAIN`), or speculative rounds.

    Attributes
    ----------
    drafter : StepArrays or None
        The draft model's step arrays, or a head's (:meth:`~calculator.performance.StepArrays.draft_head`);
        None: plain decoding.
    draft_length : int
        Drafted tokens a round, ``k`` (0: plain decoding).
    method : str
        ``"draft"`` (a draft model: its steps are iterations of their own) or ``"mtp"`` / ``"eagle"`` (a head).
    acceptance : float or tuple of float
        One acceptance probability for every drafted position, or one per position (conditional on the
        positions before it passing), as :class:`~calculator.serving.Speculation` holds it.
    """

    drafter: StepArrays | None = None
    draft_length: int = 0
    method: str = "draft"
    acceptance: float | tuple[float, ...] = 0.0

    @classmethod
    def of(cls, speculation: Speculation, drafter: StepArrays) -> Rounds:
        """The rounds ``speculation`` runs with ``drafter`` (its draft model's or its head's step arrays)."""
        acceptance = cast("float | tuple[float, ...]", speculation.acceptance)  # Speculation fills in its default
        return cls(drafter, speculation.draft_length, speculation.method, acceptance)

    @property
    def verified(self) -> int:
        """Tokens a decoding sequence carries through the target's iteration: ``k + 1``."""
        return self.draft_length + 1

    @functools.cached_property
    def tokens(self) -> float:
        """``E``: the tokens a decoding sequence emits a round on average (1 for plain decoding).

        Eq. 6 for one acceptance, its per-position form for one per drafted position
        (:func:`~calculator.speculative.expected_tokens_per_round_by_position`).
        """
        if self.drafter is None:
            return 1.0
        from ..speculative import expected_tokens_per_round, expected_tokens_per_round_by_position

        if isinstance(self.acceptance, tuple):
            return float(expected_tokens_per_round_by_position(self.acceptance))
        return float(expected_tokens_per_round.numeric(acceptance=self.acceptance, draft_length=self.draft_length))

    @property
    def positions(self) -> tuple[float, ...]:
        """The acceptance probability of each drafted position (``k`` of them; none for plain decoding)."""
        if isinstance(self.acceptance, tuple):
            return self.acceptance
        return (float(self.acceptance),) * self.draft_length

    @property
    def token_variance(self) -> float:
        """The variance of the tokens a sequence emits a round: its accepted prefix's (0 for plain decoding).

        The prefix reaches position ``i`` with probability ``p_i``, the product of the first ``i`` acceptances:
        ``E[A] = sum p_i`` and ``E[A^2] = sum (2 i - 1) p_i``.
        """
        reach = np.cumprod(self.positions)
        if reach.size == 0:
            return 0.0
        return float(np.sum((2 * np.arange(1, reach.size + 1) - 1) * reach) - np.sum(reach) ** 2)

    def rounds_for(self, tokens: Any) -> Any:
        """Mean rounds a sequence takes to emit ``tokens`` (array) tokens, the last round cut at the length.

        The renewal count ``f(L) = 1 + sum_j P(T = j) f(L - j)``, ``f(L <= 0) = 0``, where a round emits ``T = 1 + i``
        tokens when positions ``1..i`` pass and ``i + 1`` fails. At least one round for any token left, so a short
        output does not take a fraction of one (``(L) / E`` would); it tends to ``L / E`` plus a constant. Plain
        decoding: ``tokens`` itself.
        """
        tokens = np.asarray(tokens, dtype=float)
        if self.drafter is None:
            return tokens
        reach = np.concatenate([[1.0], np.cumprod(self.positions), [0.0]])
        emitted = reach[:-1] - reach[1:]  # P(T = 1), ..., P(T = k + 1)
        longest = int(np.ceil(np.max(tokens, initial=0.0)))
        f = np.zeros(longest + 1)
        for left in range(1, longest + 1):
            back = np.maximum(left - np.arange(1, emitted.size + 1), 0)
            f[left] = 1.0 + float(emitted @ f[back])
        return np.interp(tokens, np.arange(longest + 1), f)

    def iteration(
        self, a: StepArrays, eff: Efficiency, tp: Any, decode: Any, context: Any = 0, prefill: Any = 0,
        requests: Any = 0, prior: Any = 0,
    ) -> Any:  # fmt: skip
        """Seconds of an iteration whose ``decode`` sequences run a round: :meth:`verify` and :meth:`drafting`.

        Plain decoding: the iteration itself.
        """
        verify = self.verify(a, eff, tp, decode, context, prefill, requests, prior)
        return verify if self.drafter is None else verify + self.drafting(eff, tp, decode, context)

    def verify(
        self, a: StepArrays, eff: Efficiency, tp: Any, decode: Any, context: Any = 0, prefill: Any = 0,
        requests: Any = 0, prior: Any = 0,
    ) -> Any:  # fmt: skip
        """The target's iteration (:func:`~calculator.performance.iteration_seconds`), ``k + 1`` tokens a sequence.

        The verification of a round, with any prompt tokens scheduled beside it.
        """
        return _iteration_seconds(a, eff, tp, decode, context, prefill, requests, prior, self.verified)

    def drafting(self, eff: Efficiency, tp: Any, decode: Any, context: Any) -> Any:
        """Seconds the drafter takes a round: ``k`` steps of ``decode`` sequences of ``context`` tokens (0: none).

        A draft model's steps are iterations with the engine's fixed costs; a head's passes are GPU work
        alone. None where no sequence decodes.
        """
        decode = np.asarray(decode, dtype=float)
        if self.drafter is None:
            return np.zeros(np.broadcast_shapes(decode.shape, np.shape(tp), np.shape(context)))
        passes = eff if self.method == "draft" else eff.replace(step_overhead=_NO_TIME, sequence_overhead=_NO_TIME)
        step = _iteration_seconds(self.drafter, passes, tp, decode, context)
        return np.where(decode > 0, self.draft_length * step, 0.0)

    def kv_tokens(self, a: StepArrays, tp: Any, tokens: Any) -> Any:
        """The target's ``tokens`` of KV cache as the tokens it holds beside the drafter (:func:`drafter_kv_share`)."""
        if self.drafter is None:
            return tokens
        taken, factor = drafter_kv_share(a, self.drafter, tp)
        return (tokens - taken) / factor


#: Plain decoding: an iteration advances every decoding sequence by one token.
PLAIN = Rounds()


def drafter_kv_share(a: StepArrays, drafter: StepArrays, tp: Any) -> tuple[Any, Any]:
    """What a drafter takes of the target's KV cache: ``(tokens its weights displace, factor on a token)``.

    Its weights share the target's devices, displacing their bytes' worth of the target's KV tokens, and it
    caches its own KV for every token the target holds: a target token costs ``1 + drafter / target`` of its
    bytes.
    """
    taken = drafter.weights_per_device(tp) * a.kv_spread(tp) / a.kv_bytes_per_token
    return taken, 1 + drafter.kv_bytes_per_token / a.kv_bytes_per_token


def check_speculation(function: str, speculation: Any, model: Any, profile: EngineProfile | None = None) -> None:
    """Refuse a ``speculation`` the model or the engine cannot run.

    What is not a :class:`~calculator.serving.Speculation`, MTP for a model without MTP layers, and a draft model
    under an engine that runs none (``EngineProfile.draft_model_speculation``: vLLM 0.14).
    """
    from ..serving import Speculation

    if not isinstance(speculation, Speculation):
        raise InputError(
            f"{function}(): argument 'speculation' must be a Speculation (calculator.serving) or None, "
            f"got {type(speculation).__name__}"
        )
    if speculation.method == "draft" and profile is not None and not profile.draft_model_speculation:
        raise InputError(
            f"{function}(): speculation with a draft model: {profile.name} does not run a separate draft model "
            "(EngineProfile.draft_model_speculation, cited in the registry); use method 'mtp' or 'eagle', or an "
            "engine that does (SGLang STANDALONE, TensorRT-LLM DraftTarget)"
        )
    if speculation.method == "mtp" and not model.mtp_layers:
        raise InputError(
            f"{function}(): speculation method 'mtp' drafts with the model's multi-token-prediction layers, and "
            f"{model.id} declares none (Model.mtp_layers); use method 'eagle' or a draft model"
        )


def speculative_rounds(
    function: str, speculation: Speculation | None, model: Any, arrays: StepArrays, precision: str,
    kv_precision: str | None, profile: EngineProfile, registry: Registry | None,
) -> Rounds:  # fmt: skip
    """The :class:`Rounds` of ``speculation`` on the target ``model`` laid out as ``arrays`` (:data:`PLAIN`: None).

    A draft model's arrays at the target's precision and KV precision, on the same accelerator (not laid out:
    it runs on the replica's devices as the sizer prices it); a head of the laid-out target without its
    pipeline stages (a head is one layer).
    """
    if speculation is None:
        return PLAIN
    check_speculation(function, speculation, model, profile)
    if speculation.method == "draft":
        from .arrays import step_arrays

        drafter = step_arrays(
            speculation.draft_model, arrays.accelerator, precision, kv_precision, engine=profile, registry=registry
        )
    else:
        whole = arrays if arrays.pipeline_parallel <= 1 else arrays.with_pipeline_parallel(1)
        drafter = whole.draft_head(speculation.method)
    return Rounds.of(speculation, drafter)
