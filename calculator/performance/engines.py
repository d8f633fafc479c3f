"""Serving engines: the costs of the engine loop and each engine's scheduler defaults.

:class:`Efficiency` holds the fixed costs of one iteration and of one running sequence, and the kernel
pricing (measured tables, or fixed fractions of the peaks: ``ROOFLINE`` is the chapter's pure bound).
:class:`EngineProfile` holds each engine's documented scheduler defaults with their citations and its
fitted costs; ``ENGINES`` has vLLM, SGLang, TensorRT-LLM and the engine-agnostic default. The KV
cache a replica holds follows the engine's memory policy (:func:`kv_capacity_tokens`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from .. import _reuse  # private: the bounded scope a sweep's points share engine profiles in
from .._support import count, registry_or_none
from ..errors import InputError
from ..results import Result
from ..types import Bytes, Time
from ..units import Q_, ureg

if TYPE_CHECKING:
    from ..registry import EngineInterval, MemoryFractionRule

__all__ = [
    "ENGINES",
    "GENERIC",
    "profile_from_entry",
    "EngineProfile",
    "Efficiency",
    "engine_profile",
]


# --------------------------------------------------------------------------------------------
# Engine costs and profiles: the fixed costs, the kernel pricing, the scheduler defaults


@dataclass(frozen=True, repr=False)
class Efficiency(Result):
    """Fixed costs of the engine loop, and the kernel pricing of the step model.

    Attributes
    ----------
    hbm_bandwidth, compute, link_bandwidth : float
        Achieved fractions of HBM bandwidth, dense tensor peak and per-direction link bandwidth.
        Used only when ``kernels`` is False (the roofline-with-efficiencies pricing).
    collective_latency : Quantity [time]
        Latency floor of one all-reduce when ``kernels`` is False.
    step_overhead : Quantity [time]
        Fixed cost of one scheduler iteration (scheduling, launches, sampling), independent of size.
    sequence_overhead : Quantity [time]
        Cost per running sequence per iteration (scheduler bookkeeping, sampling and detokenizing
        one token): what makes small models CPU bound at hundreds of sequences.
    kernels : bool
        True: price kernels from the accelerator's measured tables (or the generic efficiency curve
        at its peaks). False: at the fractions above of the registry peaks.
    overlap : bool
        True: the engine schedules the next iteration on the CPU while the GPU runs this one
        (asynchronous scheduling), so an iteration takes the longer of the two, the GPU work or the
        fixed costs above, instead of their sum.
    gpu_time_scale : float
        Factor on the GPU work of every iteration (kernels, collectives, hand-offs), before the fixed
        costs are added or overlapped: 1 prices the kernels as measured; a user calibration fits it on the
        accelerator its benchmarks ran on (``EngineProfile.per_accelerator``, registry ``gpu_time_scale``).
    """

    hbm_bandwidth: float
    compute: float
    link_bandwidth: float
    collective_latency: Time
    step_overhead: Time
    sequence_overhead: Time = field(default_factory=lambda: Q_(0.0, "s"))
    kernels: bool = True
    overlap: bool = False
    gpu_time_scale: float = 1.0

    def __post_init__(self) -> None:
        scale = self.gpu_time_scale
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not (math.isfinite(scale) and scale > 0):
            raise InputError(f"Efficiency: 'gpu_time_scale' must be a finite number > 0, got {scale!r}")
        for name in ("hbm_bandwidth", "compute", "link_bandwidth"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InputError(f"Efficiency: '{name}' must be a fraction in (0, 1], got {value!r}")
        for name in ("collective_latency", "step_overhead", "sequence_overhead"):
            value = getattr(self, name)
            if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
                raise InputError(f"Efficiency: '{name}' must be a time quantity, got {value!r}")
            if not value.magnitude >= 0:
                raise InputError(f"Efficiency: '{name}' must be >= 0, got {value!r}")

    @functools.cached_property
    def fixed_seconds(self) -> tuple[float, float]:
        """``(step_overhead, sequence_overhead)`` in seconds (plain floats for the inner loops)."""
        return float(self.step_overhead.m_as("s")), float(self.sequence_overhead.m_as("s"))

    def replace(self, **changes: Any) -> Efficiency:
        """A copy with some parameters changed."""
        return dataclasses.replace(self, **changes)


#: The roofline: every peak reached, no fixed costs. A lower bound on any real step time.
ROOFLINE = Efficiency(1.0, 1.0, 1.0, Q_(0.0, "s"), Q_(0.0, "s"), kernels=False)


#: Fractions of the peaks an engine profile uses when asked to price kernels without tables
#: (``kernels=False``): round values read off the measured tables (a GEMV streams weights at about
#: 0.8 of HBM bandwidth; large GEMMs reach 0.45-0.85 of the dense peak by generation and dtype) and the
#: NCCL fit of calculator/data/calibration (0.77 of the link, 28 us floor).
class GenericFractions(NamedTuple):
    """The peaks' fractions of :data:`GENERIC_FRACTIONS`, by name."""

    hbm: float
    compute: float
    link: float
    link_floor: float


GENERIC_FRACTIONS = GenericFractions(hbm=0.80, compute=0.65, link=0.77, link_floor=28e-6)


class BudgetTier(NamedTuple):
    """One of an engine's token-budget tiers: from ``min_memory_gb`` of device memory, these defaults."""

    min_memory_gb: float
    max_num_tokens: int
    max_num_seqs: int


class ReleaseRange(NamedTuple):
    """An engine's defaults from release ``since`` on (registry ``releases``); ``None``: the profile's own."""

    since: tuple[int, ...]
    tiers: tuple[BudgetTier, ...] | None
    chunked_prefill: bool | None
    overlap_scheduler: bool | None


#: How attention data-parallel ranks can exchange tokens around the experts (``EngineProfile.expert_exchange``).
EXPERT_EXCHANGES = ("gather_scatter", "padded_or_summed")


#: The largest stream interval :meth:`EngineProfile.with_stream_interval` takes (iterations between responses).
MAX_STREAM_INTERVAL = 1000


@dataclass(frozen=True, repr=False)
class EngineProfile(Result):
    """A serving engine: its scheduler defaults (cited) and its fitted per-iteration costs.

    Attributes
    ----------
    name : str
        ``"vllm"``, ``"sglang"``, ``"trtllm"`` or ``"generic"``.
    efficiency : Efficiency
        Fixed costs per iteration and per running sequence (fitted), and the kernel pricing.
    memory_utilization : float
        Fraction of memory the engine claims: of the whole device (``memory_policy="device"``:
        vLLM ``gpu_memory_utilization``) or of what the weights leave free (``"free"``:
        TensorRT-LLM ``free_gpu_memory_fraction``). ``"sglang"`` computes SGLang's
        ``mem_fraction_static`` from the device memory, token budget and TP degree instead
        (``memory_fraction_rule``).
    memory_policy : str
        ``"device"``, ``"free"`` or ``"sglang"``, as above.
    memory_reserve : Quantity [information]
        Memory per device the engine keeps beyond its policy (activations, CUDA graphs,
        communication buffers), not available to the KV cache. Fitted within bounds.
    max_num_tokens : int
        Token budget of one iteration (decode tokens count against it where batching is mixed), on
        the largest memory tier; see ``tiers``.
    max_num_seqs : int
        Most sequences running at once (largest memory tier).
    tiers : tuple of BudgetTier
        ``(min_memory_gb, max_num_tokens, max_num_seqs)``: engines pick smaller defaults on smaller
        GPUs. Empty: the two fields above everywhere.
    small_tier_devices : tuple of str
        Accelerator ids (substrings) that always get the first tier (vLLM treats any A100 so).
    chunked_prefill : bool
        Whether a prompt longer than the remaining budget is split over iterations.
    mixed_batching : bool
        True: prefill chunks share iterations with the running decodes. False: a prefill batch runs
        alone and pauses decoding while requests wait (SGLang's default).
    output_reservation : float
        Fraction of each request's output the admission policy reserves KV for (1: TensorRT-LLM's
        guaranteed-no-evict; 0.5: admit on the prompt and preempt when the cache fills).
    kv_block_tokens : int
        Tokens per KV-cache block (page): a sequence holds whole blocks (vLLM 16, TensorRT-LLM 32,
        SGLang 1) and the cache whole blocks (:meth:`kv_block`).
    mla_kv_block_tokens : int or None
        The block of a model with multi-head latent attention where the engine's MLA kernels force
        another (vLLM's FlashMLA: 64); ``None``: ``kv_block_tokens``.
    request_overhead : Quantity [time]
        Time every request spends outside the GPU before its first token (HTTP, tokenization,
        the client's round trip). Fitted.
    overlap_scheduler : bool
        The scheduler builds iteration ``k + 1`` while the GPU runs ``k`` (SGLang's and TensorRT-LLM's
        overlap schedulers, vLLM's asynchronous scheduling), so a request that arrives while an iteration
        runs is first scheduled in the iteration after the next one: one iteration more to its first
        token than a synchronous scheduler gives it. Whether the fixed costs also hide behind the GPU's
        work is :attr:`Efficiency.overlap`.
    quantized_kv_precision : str
        The KV-cache precision the engine runs, with no KV flag, for FP8/FP4 weights whose checkpoint's own
        KV declaration is not in the registry (``performance.KV_PRECISION_RULE``).
    expert_exchange : str
        How attention data-parallel ranks exchange tokens around the experts: ``"gather_scatter"`` (an
        all-gather of every rank's tokens, a reduce-scatter of the outputs: vLLM, TensorRT-LLM) or
        ``"padded_or_summed"`` (SGLang: the same over buffers padded to the busiest rank when only decodes
        run, two all-reduces of the summed buffer when a prompt is in the iteration).
    fp4_gather : bool
        Whether, with ``"gather_scatter"``, the ranks' tokens are all-gathered already quantized for NVFP4 experts
        (:data:`~calculator.performance.arrays.NVFP4_GATHER_BYTES` a value) instead of at 16 bits (TensorRT-LLM);
        the outputs' reduce-scatter stays 16-bit.
    uneven_experts : bool
        Whether an expert-parallel degree that does not divide the experts runs without redundant copies (the first
        ranks holding one more: vLLM); False: the placed experts must divide evenly (SGLang, TensorRT-LLM).
    draft_model_speculation : bool
        Whether the engine runs speculative decoding with a separate draft model (vLLM from 0.15,
        ``draft_model_since``; 0.14 raises ``NotImplementedError``).
    reads_kv_declaration : bool
        Whether the automatic KV dtype takes the KV cache a quantized checkpoint declares (False for a release
        before ``kv_declaration_since``: it runs the model dtype whatever the checkpoint declares).
    online_quantization : tuple of str
        Weight precisions the engine reaches from a 16-bit checkpoint at load time, loading the 16-bit weights
        first (vLLM's and SGLang's ``--quantization fp8``); empty: pre-quantized checkpoints only (TensorRT-LLM).
    checkpoint_format : str or None
        The checkpoint format the engine's documentation runs quantized weights from (registry
        ``checkpoint_format``: ``modelopt`` for TensorRT-LLM), preferred among a model's checkpoints of one
        precision (``performance.CHECKPOINT_RULE``); ``None``: none documented.
    fitted_releases : tuple of str
        The releases whose benchmarks the fitted costs came from (registry ``fitted_releases``).
    fitted_batch : int or None
        The most sequences one replica ran in those benchmarks (registry ``fitted_batch``): beyond it the
        per-sequence cost is extrapolated (:func:`~calculator.performance.predict_benchmark` says so and widens
        the low end of its interval). ``None``: not recorded.
    accelerator_vendors : tuple of str
        The vendors of the accelerators the engine runs on (registry ``accelerator_vendors``; empty: any):
        :func:`~calculator.performance.step_arrays` refuses another vendor's accelerator under it.
    releases : tuple of ReleaseRange
        The defaults by release range, oldest first (registry ``releases``): :meth:`for_release` takes the
        budget tiers, chunking and overlap scheduling of the range a release falls in.
    async_scheduling_since, kv_declaration_since : str or None
        The first release that schedules asynchronously by default, and the first whose automatic KV dtype takes a
        quantized checkpoint's declaration (registry fields of the same names); ``None``: no release changed it.
    release : str or None
        The release this profile prices (:meth:`for_release`); ``None``: the current defaults, release unstated.
    offline_sequence_overhead : Quantity [time] or None
        The cost per running sequence of a run that does not stream its tokens (registry
        ``offline_sequence_overhead``): the loop's host work without a response a token, hidden behind the GPU by
        the overlap scheduler (:meth:`for_streaming`). ``None``: streaming changes none of the engine's costs.
    streaming : bool
        Whether the run this profile prices streams every token to its client (the benchmarks the costs were fitted
        on did); False after ``for_streaming(False)``.
    stream_interval : int
        The iterations between a streamed request's responses (TensorRT-LLM's ``stream_interval``; 1, the
        default, a response every token), set with its costs by :meth:`with_stream_interval` (``replace`` sets the
        field alone and reprices nothing).
    memory_fraction_rule : registry.MemoryFractionRule or None
        How ``memory_policy="sglang"`` computes the fraction (:func:`sglang_memory_fraction`); ``None``: the
        packaged ``sglang`` entry's.
    interval : registry.EngineInterval or None
        The engine's own prediction interval (``servecalc calibrate``); ``None``: the packaged intervals.
    source : str
        Where the defaults and fitted values come from.
    citations : mapping of str to str
        The documentation or source line of each default.
    per_accelerator : mapping of str to Efficiency
        Costs measured on particular accelerators (registry ids), used there instead of
        ``efficiency`` (:meth:`efficiency_for`): the registry's ``gpu_time_scale`` of an accelerator
        (:meth:`with_gpu_time_scale`).
    """

    name: str
    efficiency: Efficiency
    memory_utilization: float
    memory_policy: str
    memory_reserve: Bytes
    max_num_tokens: int
    max_num_seqs: int
    tiers: tuple[BudgetTier, ...]
    small_tier_devices: tuple[str, ...]
    chunked_prefill: bool
    mixed_batching: bool
    output_reservation: float
    request_overhead: Time
    source: str
    citations: Mapping[str, str] = field(default_factory=dict)
    per_accelerator: Mapping[str, Efficiency] = field(default_factory=dict)
    quantized_kv_precision: str = "fp8"
    interval: EngineInterval | None = None
    expert_exchange: str = "gather_scatter"
    overlap_scheduler: bool = False
    memory_fraction_rule: MemoryFractionRule | None = None
    kv_block_tokens: int = 1
    mla_kv_block_tokens: int | None = None
    fitted_releases: tuple[str, ...] = ()
    fitted_batch: int | None = None
    accelerator_vendors: tuple[str, ...] = ()
    fp4_gather: bool = False
    uneven_experts: bool = False
    draft_model_speculation: bool = True
    online_quantization: tuple[str, ...] = ()
    checkpoint_format: str | None = None
    reads_kv_declaration: bool = True
    async_scheduling_since: str | None = None
    kv_declaration_since: str | None = None
    draft_model_since: str | None = None
    releases: tuple[ReleaseRange, ...] = ()
    release: str | None = None
    offline_sequence_overhead: Time | None = None
    streaming: bool = True
    stream_interval: int = 1

    def __post_init__(self) -> None:
        if self.quantized_kv_precision not in ("fp8", "bf16", "fp16"):
            raise InputError(
                "EngineProfile: 'quantized_kv_precision' must be 'fp8', 'bf16' or 'fp16', "
                f"got {self.quantized_kv_precision!r}"
            )
        if self.expert_exchange not in EXPERT_EXCHANGES:
            raise InputError(
                f"EngineProfile: 'expert_exchange' must be one of {EXPERT_EXCHANGES}, got {self.expert_exchange!r}"
            )
        if self.memory_policy not in ("device", "free", "sglang"):
            raise InputError(
                f"EngineProfile: 'memory_policy' must be 'device', 'free' or 'sglang', got {self.memory_policy!r}"
            )
        for name in ("memory_utilization", "output_reservation"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise InputError(f"EngineProfile: '{name}' must be in [0, 1], got {value!r}")
        for name in ("max_num_tokens", "max_num_seqs", "kv_block_tokens"):
            if not int(getattr(self, name)) >= 1:
                raise InputError(f"EngineProfile: '{name}' must be >= 1, got {getattr(self, name)!r}")
        interval = self.stream_interval
        if isinstance(interval, bool) or not isinstance(interval, int) or not 1 <= interval <= MAX_STREAM_INTERVAL:
            raise InputError(
                f"EngineProfile: 'stream_interval' must be a whole number from 1 to {MAX_STREAM_INTERVAL}, "
                f"got {interval!r:.80}"
            )

    def limits(self, memory_bytes: float, accelerator: str = "") -> tuple[int, int]:
        """``(max_num_tokens, max_num_seqs)`` on a device of ``memory_bytes`` (the engine's tiers)."""
        if not self.tiers:
            return int(self.max_num_tokens), int(self.max_num_seqs)
        tier = self.tiers[0]
        if not any(name in accelerator for name in self.small_tier_devices):
            for candidate in self.tiers:
                if memory_bytes >= candidate.min_memory_gb * 1e9:
                    tier = candidate
        return int(tier.max_num_tokens), int(tier.max_num_seqs)

    def kv_block(self, mla: Any = False) -> int:
        """Tokens per KV-cache block for a model with (``mla``) or without multi-head latent attention."""
        return int(self.mla_kv_block_tokens if (mla and self.mla_kv_block_tokens) else self.kv_block_tokens)

    def efficiency_for(self, accelerator: str | None) -> Efficiency:
        """The costs on ``accelerator`` (its own if measured, else the profile's)."""
        return self.per_accelerator.get(accelerator, self.efficiency) if accelerator else self.efficiency

    def replace(self, **changes: Any) -> EngineProfile:
        """A copy with some parameters changed (``efficiency=...`` included)."""
        return dataclasses.replace(self, **changes)

    def with_gpu_time_scale(self, accelerator: str, scale: float) -> EngineProfile:
        """A copy whose GPU work on ``accelerator`` (a registry id) is ``scale`` times the kernels' time.

        Only there: the costs on other accelerators stay as they were (:attr:`Efficiency.gpu_time_scale`).
        """
        if not isinstance(accelerator, str) or not accelerator:
            raise InputError(
                f"with_gpu_time_scale(): argument 'accelerator' must be an accelerator id, got {accelerator!r:.80}"
            )
        scaled = self.efficiency_for(accelerator).replace(gpu_time_scale=float(scale))
        return self.replace(per_accelerator={**self.per_accelerator, accelerator: scaled})

    def with_async_scheduling(self, enabled: bool) -> EngineProfile:
        """A copy that schedules asynchronously or not on every accelerator.

        Asynchronous: the fixed costs hide behind the GPU's work (:attr:`Efficiency.overlap`) and the
        scheduler runs an iteration ahead (:attr:`overlap_scheduler`). For an engine release on the other
        side of the change: vLLM schedules asynchronously by default from 0.14.0, so
        ``engine_profile("vllm").with_async_scheduling(False)`` is vLLM 0.11-0.13.
        """
        if not isinstance(enabled, bool):
            raise InputError(f"with_async_scheduling(): argument 'enabled' must be True or False, got {enabled!r}")
        return self._with_costs(lambda eff: eff.replace(overlap=enabled)).replace(overlap_scheduler=enabled)

    def _with_costs(self, change: Callable[[Efficiency], Efficiency]) -> EngineProfile:
        """A copy with ``change`` applied to the costs of every accelerator (``efficiency`` and ``per_accelerator``)."""
        return self.replace(
            efficiency=change(self.efficiency),
            per_accelerator={k: change(v) for k, v in self.per_accelerator.items()},
        )

    def for_release(self, version: str) -> EngineProfile:
        """The engine as ``version`` runs it: the mechanisms its registry entry dates, applied by release.

        A release before ``async_scheduling_since`` schedules synchronously (its fixed costs add to the GPU's work
        and an arriving request waits one iteration less), one from it on asynchronously; a release before
        ``kv_declaration_since`` runs a BF16 KV cache for FP8/FP4 weights; one before ``draft_model_since`` runs no
        separate draft model. The costs stay the fitted ones, and
        :attr:`release_fitted` says whether benchmarks of this release were among those they were fitted on.

        Examples
        --------
        >>> old = engine_profile("vllm").for_release("0.12")
        >>> old.overlap_scheduler, old.efficiency.overlap, old.quantized_kv_precision, old.release_fitted
        (False, False, 'bf16', True)
        >>> engine_profile("trtllm").for_release("1.3.0").release_fitted
        False
        """
        numbers = release_numbers(version, "for_release")
        if self.offline_sequence_overhead is not None and not self.streaming:
            raise InputError(
                "for_release(): the engine profile was made for a run without streaming; take the release first: "
                "engine_profile(...).for_release(version).for_streaming(False)"
            )
        if len(numbers) < 2:
            raise InputError(
                f"for_release(): argument 'version' must name at least a major and a minor release ('0.14', "
                f"'1.2.0'), got {version!r:.80}"
            )
        profile = self.replace(release=".".join(map(str, numbers)))
        if self.releases:  # the last range from its since on; a release before the first takes the first
            found = [r for r in self.releases if numbers >= r.since] or [self.releases[0]]
            profile = profile._with_range(found[-1])
        if self.async_scheduling_since is not None:
            profile = profile.with_async_scheduling(numbers >= release_numbers(self.async_scheduling_since))
        if self.kv_declaration_since is not None and numbers < release_numbers(self.kv_declaration_since):
            profile = profile.replace(quantized_kv_precision="bf16", reads_kv_declaration=False)
        if self.draft_model_since is not None:
            profile = profile.replace(draft_model_speculation=numbers >= release_numbers(self.draft_model_since))
        return profile

    def for_streaming(self, streaming: bool, function: str = "for_streaming") -> EngineProfile:
        """The engine for a run that streams its tokens (True: the profile as fitted) or returns each output whole.

        Without streaming, an engine whose registry entry states an ``offline_sequence_overhead`` (TensorRT-LLM:
        its executor loop builds a response for every streaming request every iteration, a finished one's only
        otherwise) pays that cost a running sequence instead of the fitted one, and where its scheduler overlaps
        the GPU (:attr:`overlap_scheduler`) the loop's costs hide behind the GPU's work
        (:attr:`Efficiency.overlap`): the mechanism ``docs/performance-model.md`` ("Streamed and offline runs")
        cites. The other engines build their responses outside the loop (another process), so only the flag
        changes. Take the release first (``for_release(...).for_streaming(False)``): :meth:`for_release` refuses a
        profile made for an offline run.

        Examples
        --------
        >>> offline = engine_profile("trtllm").for_streaming(False)
        >>> offline.efficiency.overlap, round(offline.efficiency.sequence_overhead.m_as("us"), 1)
        (True, 11.3)
        >>> engine_profile("vllm").for_streaming(False).efficiency == engine_profile("vllm").efficiency
        True
        """
        if not isinstance(streaming, bool | np.bool_):
            raise InputError(f"{function}(): argument 'streaming' must be True or False, got {streaming!r:.80}")
        streaming = bool(streaming)
        if streaming == self.streaming:
            return self
        if not streaming and self.offline_sequence_overhead is not None:
            cost, hidden = self.offline_sequence_overhead, self.overlap_scheduler

            def unstreamed(eff: Efficiency) -> Efficiency:
                return eff.replace(sequence_overhead=cost, overlap=eff.overlap or hidden)

            return self._with_costs(unstreamed).replace(streaming=False, stream_interval=1)
        if streaming and self.offline_sequence_overhead is not None:
            raise InputError(
                f"{function}(): the engine profile was made for a run without streaming; take the engine's profile "
                "again (engine_profile) for a streamed one"
            )
        return self.replace(streaming=streaming, stream_interval=1)

    def with_stream_interval(self, interval: Any, function: str = "with_stream_interval") -> EngineProfile:
        """The engine streaming a response every ``interval`` iterations instead of every token.

        TensorRT-LLM's ``stream_interval`` (default 1): its executor loop builds a streamed request's response
        (and its server detokenizes it) once in ``interval`` iterations, the tokens of the others accumulating
        (``docs/performance-model.md``, "Streamed and offline runs", cites the source). Of the fitted
        per-sequence cost of a streamed run, the part a run without streaming does not pay (the response; the
        rest, :attr:`offline_sequence_overhead`, is the loop's own work) is paid once in ``interval`` iterations,
        added to the GPU's work as the streamed benchmarks showed it. An engine without an
        ``offline_sequence_overhead`` builds its responses outside its loop: only the field changes. The costs
        were fitted at an interval of 1, so a profile already at another interval is refused (take the engine's
        profile again), as is a run without streaming.

        Examples
        --------
        >>> four = engine_profile("trtllm").with_stream_interval(4)
        >>> four.stream_interval, round(four.efficiency.sequence_overhead.m_as("us"), 1)
        (4, 16.6)
        """
        if np.ndim(interval):
            raise InputError(f"{function}(): argument 'stream_interval' must be one whole number, got {interval!r:.80}")
        interval = count(function, "stream_interval", interval, 1, MAX_STREAM_INTERVAL)
        if interval == self.stream_interval:
            return self
        if not self.streaming:
            raise InputError(f"{function}(): a run without streaming sends no response until its output ends; "
                             "a stream interval applies to a streamed run")  # fmt: skip
        if self.stream_interval != 1:
            raise InputError(
                f"{function}(): the engine profile already streams every {self.stream_interval} iterations; take "
                "the engine's profile again (engine_profile) for another interval"
            )
        if self.offline_sequence_overhead is None:
            return self.replace(stream_interval=interval)
        loop = self.offline_sequence_overhead

        def spread(eff: Efficiency) -> Efficiency:
            if eff.sequence_overhead <= loop:  # (a calibration's) cost no larger than the loop's: no response share
                return eff
            return eff.replace(sequence_overhead=loop + (eff.sequence_overhead - loop) / interval)

        return self._with_costs(spread).replace(stream_interval=interval)

    def prices_offline_cost(self, efficiency: Efficiency) -> bool:
        """Whether ``efficiency`` charges this profile's cited cost of a run without streaming (not the fitted one).

        True for a profile from ``for_streaming(False)`` of an engine with an ``offline_sequence_overhead``, unless
        the costs were overridden: the fitted batch then no longer bounds the per-sequence cost, and the interval's
        high end adds the hidden costs back (``predict_benchmark``).
        """
        return (
            not self.streaming
            and self.offline_sequence_overhead is not None
            and efficiency.sequence_overhead == self.offline_sequence_overhead
        )

    def streaming_note(self) -> str:
        """What a run without streaming, or streamed every few iterations, changes for this engine, in a sentence.

        Empty for a run streaming every token.
        """
        if self.streaming:
            return self._interval_note()
        if self.offline_sequence_overhead is None:
            return (
                f"Without streaming ({self.name}): no cost of a run without streaming is registered for this engine "
                "(vLLM and SGLang build their responses outside their loop), so the costs fitted on streamed "
                "benchmarks apply unchanged"
            )
        cost = float(self.offline_sequence_overhead.m_as("us"))
        hidden = "hidden behind the GPU's work by the overlap scheduler" if self.overlap_scheduler else "added"
        return (
            f"Without streaming ({self.name}): no response a token, so each running sequence costs the loop "
            f"{cost:.3g} us (its sampler's host work, cited, not fitted) instead of the fitted streaming cost, "
            f"{hidden}; the interval's high end keeps that cost added to the GPU's work, as the streamed benchmarks "
            "showed it"
        )

    def _interval_note(self) -> str:
        """What :meth:`with_stream_interval` changed, in a sentence (empty at an interval of 1)."""
        n = self.stream_interval
        if n == 1:
            return ""
        if self.offline_sequence_overhead is None:
            return (
                f"Streamed every {n} iterations ({self.name}): the engine builds its responses outside its loop, so "
                "the stream interval changes none of its costs"
            )
        cost = float(self.efficiency.sequence_overhead.m_as("us"))
        return (
            f"Streamed every {n} iterations ({self.name} stream_interval {n}): a response is built once in {n} "
            f"iterations, so each running sequence costs the loop {cost:.3g} us an iteration instead of the fitted "
            "streaming cost; the interval's low end is the run without streaming (the engine's guide: an interval "
            "of 2 to 4 closes the gap to it)"
        )

    def _with_range(self, found: ReleaseRange) -> EngineProfile:
        """A copy with the budget tiers, chunking and overlap scheduler a release range states."""
        changes: dict[str, Any] = {}
        if found.tiers is not None:
            changes.update(tiers=found.tiers, max_num_tokens=found.tiers[-1][1], max_num_seqs=found.tiers[-1][2])
        if found.chunked_prefill is not None:
            changes["chunked_prefill"] = found.chunked_prefill
        if found.overlap_scheduler is not None:
            changes["overlap_scheduler"] = found.overlap_scheduler
        return self.replace(**changes)

    @property
    def release_before_ranges(self) -> bool:
        """Whether :attr:`release` precedes the first release range read (its defaults are then the first's)."""
        return bool(self.release and self.releases and release_numbers(self.release) < self.releases[0].since)

    @property
    def release_fitted(self) -> bool:
        """Whether benchmarks of :attr:`release` were among the fitted ones (False where the release is unstated).

        A release matches a fitted one on the parts both name: ``"1.2"`` matches ``"1.2.0"``, ``"1.2.1"`` does not.
        """
        if self.release is None:
            return False
        numbers = release_numbers(self.release)
        for fitted in self.fitted_releases:
            other = release_numbers(fitted)
            common = min(len(numbers), len(other))
            if numbers[:common] == other[:common]:
                return True
        return False

    def release_note(self) -> str:
        """What the costs of this profile rest on, in a sentence (empty where no release is stated)."""
        if self.release is None:
            return ""
        fitted = ", ".join(self.fitted_releases) or "none"
        if self.release_fitted:
            note = f"{self.name} release {self.release}: its mechanisms, and costs fitted on its benchmarks ({fitted})"
        else:
            note = (
                f"{self.name} release {self.release}: no benchmark of this release is in the fit (fitted: {fitted}); "
                "its own mechanisms (scheduling, KV declaration) with the costs fitted on the others, and the interval "
                "keeps its unseen-release term"
            )
        if self.release_before_ranges:
            first = ".".join(map(str, self.releases[0].since))
            note += f"; it precedes {first}, the first release whose defaults were read, and runs its defaults"
        return note


def release_numbers(version: Any, function: str = "release_numbers") -> tuple[int, ...]:
    """A release's numbers: ``"0.14.0"`` -> ``(0, 14, 0)``, ``"1.2.0rc6.post1"`` -> ``(1, 2, 0)``.

    Raises :class:`~calculator.errors.InputError` naming ``version`` where it starts with no number.
    """
    import re

    found = re.match(r"\d+(?:\.\d+)*", str(version)) if isinstance(version, str) else None
    if found is None:
        raise InputError(
            f"{function}(): argument 'version' must be a release such as '0.14' or '1.2.0', got {version!r:.80}"
        )
    return tuple(int(part) for part in found[0].split("."))


def profile_from_entry(entry: Any, sources: Mapping[str, Any]) -> EngineProfile:
    """The :class:`EngineProfile` of a registry engine entry (``registry.Engine``).

    ``citations`` maps each documented field to its source's note and title; the fields a source of
    kind ``fit`` covers are named in ``source``.
    """
    from ..registry import Engine

    if not isinstance(entry, Engine) or not isinstance(sources, Mapping):
        raise InputError(
            "profile_from_entry(): needs a registry Engine entry and the registry's sources, "
            f"got {type(entry).__name__}"
        )
    tiers = _budget_tiers(entry.token_budget)
    citations: dict[str, str] = {}
    for link_ in entry.sources:
        if sources[link_.source].kind == "fit":
            continue
        for name in link_.fields:
            text = f"{link_.note} ({sources[link_.source].title})"
            citations[name] = f"{citations[name]}; {text}" if name in citations else text
    fitted = entry.fitted_fields(sources)
    fit_titles = sorted({sources[x.source].title for x in entry.sources if sources[x.source].kind == "fit"})
    source = (
        f"registry engine '{entry.id}' ({entry.versions}): documented defaults cited per field; "
        f"{', '.join(fitted) or 'nothing'} fitted ({'; '.join(fit_titles) or 'no fit'})"
    )
    efficiency = Efficiency(
        GENERIC_FRACTIONS.hbm,
        GENERIC_FRACTIONS.compute,
        GENERIC_FRACTIONS.link,
        Q_(GENERIC_FRACTIONS.link_floor, "s"),
        entry.step_overhead,
        entry.sequence_overhead,
        overlap=bool(entry.async_scheduling),
    )
    return EngineProfile(
        name=entry.id,
        efficiency=efficiency,
        per_accelerator={
            device: efficiency.replace(gpu_time_scale=float(scale)) for device, scale in entry.gpu_time_scale.items()
        },
        memory_utilization=entry.memory_utilization,
        memory_policy=entry.memory_policy,
        memory_reserve=entry.memory_reserve,
        max_num_tokens=tiers[-1][1],
        max_num_seqs=tiers[-1][2],
        tiers=tiers,
        small_tier_devices=tuple(entry.small_tier_accelerators),
        chunked_prefill=entry.chunked_prefill,
        mixed_batching=entry.mixed_batching,
        output_reservation=entry.output_reservation,
        kv_block_tokens=entry.kv_block_tokens or 1,
        mla_kv_block_tokens=entry.mla_kv_block_tokens,
        request_overhead=entry.request_overhead,
        source=source,
        citations=citations,
        quantized_kv_precision=entry.quantized_kv_precision,
        interval=entry.prediction_interval,
        expert_exchange=entry.expert_exchange,
        fp4_gather=bool(entry.fp4_gather),
        overlap_scheduler=bool(entry.overlap_scheduler),
        memory_fraction_rule=entry.memory_fraction_rule,
        fitted_releases=tuple(entry.fitted_releases or ()),
        fitted_batch=entry.fitted_batch,
        accelerator_vendors=tuple(entry.accelerator_vendors),
        uneven_experts=bool(entry.uneven_experts),
        draft_model_speculation=entry.draft_model_speculation is not False,
        online_quantization=tuple(entry.online_quantization or ()),
        checkpoint_format=entry.checkpoint_format,
        async_scheduling_since=entry.async_scheduling_since,
        kv_declaration_since=entry.kv_declaration_since,
        draft_model_since=entry.draft_model_since,
        offline_sequence_overhead=entry.offline_sequence_overhead,
        releases=tuple(
            ReleaseRange(
                release_numbers(r.since),
                _budget_tiers(r.token_budget) if r.token_budget else None,
                r.chunked_prefill,
                r.overlap_scheduler,
            )
            for r in entry.releases
        ),
    )


def _budget_tiers(token_budget: Any) -> tuple[BudgetTier, ...]:
    """A registry token budget (``TokenBudgetTier`` records, smallest memory first) as :class:`BudgetTier` tuples."""
    return tuple(
        BudgetTier(
            tier.min_device_memory.m_as("GB") if tier.min_device_memory else 0.0, tier.max_num_tokens, tier.max_num_seqs
        )
        for tier in token_budget
    )


class _PackagedEngines(Mapping[Any, EngineProfile]):
    """``ENGINES``: the packaged registry's engine profiles by name (``None``: the engine-agnostic one).

    Read from the registry on first use, so that ``import calculator.performance`` reads no file.
    """

    def __init__(self) -> None:
        self._profiles: dict[Any, EngineProfile] | None = None

    def _load(self) -> dict[Any, EngineProfile]:
        if self._profiles is None:
            from ..registry import load_registry

            reg = load_registry()
            profiles = {e.id: profile_from_entry(e, reg.sources) for e in reg.engines.values()}
            self._profiles = {None if key == GENERIC else key: value for key, value in profiles.items()}
        return self._profiles

    def __getitem__(self, key: Any) -> EngineProfile:
        return self._load()[key]

    def __iter__(self) -> Any:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"<engine profiles: {', '.join(str(k) for k in self._load())}>"


#: The registry id of the engine-agnostic profile (``engine=None``).
GENERIC = "generic"

#: Engine profiles of the packaged registry (``hardware_registry.yaml``, section ``engines``): documented
#: scheduler defaults plus fitted costs. ``None`` is the engine-agnostic default (vLLM's scheduler, costs
#: fitted on all rows). A user registry file overrides or adds engines (:func:`engine_profile`).
ENGINES: Mapping[Any, EngineProfile] = _PackagedEngines()


def engine_profile(engine: str | EngineProfile | None, registry: Any = None) -> EngineProfile:
    """The profile of ``engine`` (a name, a profile, or ``None`` for the engine-agnostic default).

    Names resolve in ``registry``'s ``engines`` section (default: the packaged registry), so that a
    user file's engine entries, or overrides of the packaged ones, apply.

    Examples
    --------
    >>> engine_profile("TensorRT-LLM").name, engine_profile(None).name
    ('trtllm', 'generic')
    """
    if isinstance(engine, EngineProfile):
        return engine
    if not isinstance(engine, str | None):
        raise InputError(f"argument 'engine' must be an engine name or None, got {engine!r}")
    key = GENERIC if engine is None else engine.lower().replace("_", "-")
    key = {"tensorrt-llm": "trtllm", "tensorrtllm": "trtllm", "trt": "trtllm", "trt-llm": "trtllm"}.get(key, key)
    if registry_or_none(registry) is None:
        profiles = ENGINES
        found = profiles.get(None if key == GENERIC else key)
        if found is not None:
            return found
        names = [str(k) for k in profiles if k]
    else:
        section = registry.engines
        entry_id = section.resolve(key)
        if entry_id is not None:  # one profile object per registry and entry in a sweep (its points share it)
            return _reuse.shared(
                ("engine_profile", _reuse.Same(registry), entry_id),
                lambda: profile_from_entry(section[entry_id], registry.sources),
            )
        names = [k for k in section if k != GENERIC]
    raise InputError(f"argument 'engine' must be one of {', '.join(sorted(names))} or None, got {engine!r}")


# --------------------------------------------------------------------------------------------
# The KV cache a replica holds under an engine's memory policy


class _ReplicaMemory(Protocol):
    """What a memory policy reads of a model on an accelerator (a :class:`~calculator.performance.StepArrays`).

    A protocol, so that this module, which :mod:`~calculator.performance.arrays` reads engine profiles
    from, does not import it back.
    """

    memory: float
    kv_bytes_per_token: float
    mla: float

    def weights_per_device(self, tp: Any) -> Any: ...  # StepArrays documents both
    def kv_spread(self, tp: Any) -> Any: ...


def kv_capacity_tokens(a: _ReplicaMemory, profile: EngineProfile, tensor_parallel: Any) -> Any:
    """KV-cache tokens a replica of ``tensor_parallel`` devices holds under ``profile``'s memory policy.

    Whole blocks (:meth:`EngineProfile.kv_block`): vLLM's cache is ``available memory // page size`` blocks.
    """
    per_device = usable_kv_bytes(a, profile, tensor_parallel)
    block = profile.kv_block(a.mla)
    return np.floor(np.maximum(per_device, 0.0) * a.kv_spread(tensor_parallel) / a.kv_bytes_per_token / block) * block


def usable_kv_bytes(a: _ReplicaMemory, profile: EngineProfile, tensor_parallel: Any) -> Any:
    """KV-cache bytes per device under the engine's memory policy (negative: the weights do not fit)."""
    tp = np.asarray(tensor_parallel, dtype=float)
    weights = a.weights_per_device(tp)
    reserve = profile.memory_reserve.m_as("B")
    if profile.memory_policy == "free":
        free = a.memory - weights - reserve
        return np.where(free > 0, profile.memory_utilization * free, free)
    fraction = (
        sglang_memory_fraction(a.memory, profile.limits(a.memory)[0], tp, profile.memory_fraction_rule)
        if (profile.memory_policy == "sglang")
        else profile.memory_utilization
    )
    return fraction * a.memory - weights - reserve


def sglang_memory_fraction(memory: float, chunk: float, tp: Any, rule: MemoryFractionRule | None = None) -> Any:
    """SGLang's default ``mem_fraction_static`` on a device of ``memory`` bytes, by ``rule``.

    ``(M - reserved) / M`` with ``reserved = base + per_prefill_token x max(chunk, min_prefill_tokens) +
    per_graph_sequence x g + per_tensor_parallel_rank x t``, ``g`` the CUDA-graph batch of the device's
    tier (the larger one from ``graph_tensor_parallel`` GPUs), and at least ``floor`` on devices above
    ``floor_above``. ``rule`` is a registry ``MemoryFractionRule`` (default: the packaged ``sglang``
    entry's, SGLang's ``server_args.py`` of 0.5.3-0.5.9: 512 MiB, 1.5 MiB per chunk token, 2 MiB per graph
    sequence, 128 MiB per TP rank, at least 10 GiB above 60 GiB).

    Examples
    --------
    >>> round(float(sglang_memory_fraction(81559 * 2**20, 8192, 1)), 3)  # H100 80GB, TP 1
    0.835
    """
    if rule is None:
        rule = ENGINES["sglang"].memory_fraction_rule
        assert rule is not None  # the packaged sglang entry declares its rule (the registry checks it)
    tier = rule.graph_batch[0]
    for candidate in rule.graph_batch:
        if candidate.min_device_memory is not None and memory >= candidate.min_device_memory.m_as("B"):
            tier = candidate
    tp = np.asarray(tp, dtype=float)
    graphs = np.where(tp >= rule.graph_tensor_parallel, float(tier.batch_from_tensor_parallel), float(tier.batch))
    reserved = (
        rule.base.m_as("B")
        + rule.per_prefill_token.m_as("B") * max(chunk, rule.min_prefill_tokens)
        + rule.per_graph_sequence.m_as("B") * graphs
        + rule.per_tensor_parallel_rank.m_as("B") * tp
    )
    reserved = np.where(memory > rule.floor_above.m_as("B"), np.maximum(reserved, rule.floor.m_as("B")), reserved)
    return (memory - reserved) / memory
