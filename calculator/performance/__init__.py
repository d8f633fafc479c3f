"""Step-time model on measured kernels, and the continuous-batching scheduler of a serving engine.

Two layers, each physical:

**Iteration time** (:func:`iteration_seconds`). One scheduler iteration runs the decode tokens of
the running sequences and any prefill tokens scheduled with them through every layer: the matrix
products at their actual shapes (QKV, output, MLP or the experts a batch touches, the LM head),
prefill and decode attention, two all-reduces per layer under tensor parallelism, and the
activation traffic of norms and residuals. Kernel times come from measured tables
(:mod:`calculator.kernels`; aiconfigurator-core microbenchmarks per GPU and dtype), or, for an
accelerator without tables, from its registry peaks times a generic efficiency curve. The serving
engine adds a fixed cost per iteration and a cost per running sequence (scheduling, sampling,
detokenization), the :class:`Efficiency` fields fitted on the H100 benchmarks. ``Efficiency(...,
kernels=False)`` prices every kernel at fixed fractions of the peaks instead (``ROOFLINE``: the
chapter's pure bound).

**Scheduler** (:func:`closed_loop_seconds`). Engines run iteration-level continuous batching with a
token budget per iteration (vLLM ``max_num_batched_tokens``, SGLang ``chunked_prefill_size``,
TensorRT-LLM ``max_num_tokens``), admit waiting requests once per iteration while KV memory allows,
and either mix prefill chunks into decode iterations (vLLM, TensorRT-LLM) or run prefill batches
that pause decoding (SGLang). :class:`EngineProfile` holds each engine's documented defaults with
their citations. A closed-loop benchmark starts all clients at once and sends about ten requests per
client; the model follows the prefill groups that burst creates through the run (see
``docs/performance-model.md``). Every function is vectorized over its array arguments.

The submodules, each re-exported here:

* :mod:`~calculator.performance.engines`: the costs of the engine loop and the kernel pricing
  (:class:`Efficiency`, ``ROOFLINE``), each engine's cited scheduler defaults and fitted costs
  (:class:`EngineProfile`, ``ENGINES``), and the KV cache a replica holds under an engine's memory policy.
* :mod:`~calculator.performance.arrays`: resolving registry objects into the arrays the step model needs
  (:class:`StepArrays`, ``WEIGHT_BITS``, :func:`compute_precision`).
* :mod:`~calculator.performance.iteration`: the time of one scheduler iteration, kernel by kernel
  (:func:`iteration_seconds`, and its decode-step and prefill cases on plain arrays).
* :mod:`~calculator.performance.steps`: the public, unit-carrying step times (:func:`decode_step_time`,
  :func:`prefill_time`).
* :mod:`~calculator.performance.benchmark`: the closed-loop benchmark (:func:`predict_benchmark`).
* :mod:`~calculator.performance.capacity`: the sequences of a length a replica holds under an engine's
  memory policy (:func:`engine_memory_fit`), the one count the predictor, the sizer and the simulator use.

The package also serves the public names its submodules use from one another, outside ``__all__``: the
plain-array step functions (``decode_step_seconds``, ``prefill_seconds``, ``closed_loop_seconds``), the
KV capacity under an engine's memory policy (``kv_capacity_tokens``, ``usable_kv_bytes``,
``sglang_memory_fraction``), an engine release's numbers (``release_numbers``), ``ROOFLINE`` and the model's constants.
"""

from __future__ import annotations

from ..memory import WEIGHT_BITS as WEIGHT_BITS  # stored bits per weight (defined with the weights)
from .arrays import (
    CHECKPOINT_RULE,
    KV_PRECISION_RULE,
    StepArrays,
    checkpoint_for,
    compute_precision,
    kv_cache_precision,
    outside_validated_range,
    step_arrays,
)
from .benchmark import ARRIVALS, BENCHMARK_UNITS, BenchmarkPrediction, predict_benchmark
from .benchmark import REQUESTS_PER_CLIENT as REQUESTS_PER_CLIENT
from .benchmark import closed_loop_seconds as closed_loop_seconds
from .capacity import EngineMemoryFit, engine_memory_fit
from .engines import ENGINES, GENERIC, Efficiency, EngineProfile, engine_profile, profile_from_entry
from .engines import GENERIC_FRACTIONS as GENERIC_FRACTIONS
from .engines import MAX_STREAM_INTERVAL as MAX_STREAM_INTERVAL
from .engines import ROOFLINE as ROOFLINE
from .engines import kv_capacity_tokens as kv_capacity_tokens
from .engines import release_numbers as release_numbers
from .engines import sglang_memory_fraction as sglang_memory_fraction
from .engines import usable_kv_bytes as usable_kv_bytes
from .iteration import ACTIVATION_BYTES as ACTIVATION_BYTES
from .iteration import ELEMENTWISE_PASSES as ELEMENTWISE_PASSES
from .iteration import MLA_DECODE_COMPUTE_FRACTION as MLA_DECODE_COMPUTE_FRACTION
from .iteration import decode_step_seconds as decode_step_seconds
from .iteration import iteration_seconds
from .iteration import overlapped_prompt_seconds as overlapped_prompt_seconds
from .iteration import pipeline_pass_seconds as pipeline_pass_seconds
from .iteration import prefill_seconds as prefill_seconds
from .iteration import spread_over_ranks as spread_over_ranks
from .steps import decode_step_time, expert_exchange_time, prefill_time

__all__ = [
    "ARRIVALS",
    "BENCHMARK_UNITS",
    "ENGINES",
    "GENERIC",
    "profile_from_entry",
    "KV_PRECISION_RULE",
    "CHECKPOINT_RULE",
    "BenchmarkPrediction",
    "EngineMemoryFit",
    "EngineProfile",
    "Efficiency",
    "checkpoint_for",
    "compute_precision",
    "decode_step_time",
    "engine_memory_fit",
    "engine_profile",
    "expert_exchange_time",
    "iteration_seconds",
    "kv_cache_precision",
    "outside_validated_range",
    "predict_benchmark",
    "prefill_time",
    "StepArrays",
    "step_arrays",
]
