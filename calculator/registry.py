"""The hardware and model registry: sourced accelerators, interconnects, models and prices.

``hardware_registry.yaml`` (at the top of the repository; the wheel carries it in ``calculator/data/``)
holds the entries; :func:`load_registry` reads it, plus any user files, with a safe YAML loader,
validates every entry against strict frozen pydantic models and returns a :class:`Registry` whose
sections map ids to entries::

    reg = load_registry()
    reg.accelerators["h100-sxm"].memory_bandwidth      # <Quantity(3.35, 'terabyte / second')>

Quantities are written as strings (``"80 GiB"``, ``"3.35 TB/s"``), parsed by the calculator's pint
registry and checked for dimension. Every numeric field of an entry must be covered by a source
(``sources: [{source: <id>, fields: [...], note: ...}]``) that names a document listed under the
file's ``sources:`` section. Any problem raises :class:`RegistryError` naming the file, the entry,
the field, what was expected and what was found.

User files passed as ``extra`` are applied in order: an entry with a new id is added; an entry with
an existing id overrides the fields it gives (its sources are added to the entry's sources, and
must cover the fields it changes).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from ._files import load_yaml, read_text
from ._paths import REGISTRY_FILE
from .errors import RegistryError, UnitsError, UnknownEntryError
from .precision import PRECISIONS, check_precision
from .results import Result
from .units import parse_quantity, shown, ureg

__all__ = [
    "DEFAULT_REGISTRY_PATH",
    "SECTIONS",
    "Checkpoint",
    "Engine",
    "Accelerator",
    "Interconnect",
    "Model",
    "Price",
    "Registry",
    "RegistryDocument",
    "Source",
    "load_registry",
    "registry_json_schema",
]

DEFAULT_REGISTRY_PATH = REGISTRY_FILE
SCHEMA_VERSION = 1

# --------------------------------------------------------------------------------------------
# Field types


def _quantity_text(quantity: Any) -> str:
    """A registry quantity as the text it was written as: ``80 GiB``, ``3.35 TB/s`` (no trailing ``.0``)."""
    return f"{quantity.magnitude:.15g} {quantity.units:~P}"


def _quantity_type(example: str, *, positive: bool = True) -> Any:
    """A pydantic type for a quantity string of the dimension of ``example`` (e.g. ``"1 GB/s"``)."""
    dimension = ureg.parse_units(example.split(" ", 1)[1]).dimensionality

    def parse(value: Any) -> Any:
        if isinstance(value, ureg.Quantity):
            quantity = value
        elif isinstance(value, str):
            try:
                quantity = parse_quantity(value, what="value")
            except UnitsError as exc:
                reason = str(exc).removeprefix("value: ")
                raise ValueError(f"expected a quantity like {example!r}, found {shown(value)} ({reason})") from None
        else:
            raise ValueError(f"expected a quantity string like {example!r}, found {shown(value)}")
        if quantity.dimensionality != dimension:
            raise ValueError(
                f"expected dimension {dimension} (like {example!r}), found {shown(value)} "
                f"with dimension {quantity.dimensionality or 'dimensionless'}"
            )
        if not np.isfinite(quantity.magnitude):
            raise ValueError(f"expected a finite quantity (like {example!r}), found {shown(value)}")
        if positive and not quantity.magnitude > 0:
            raise ValueError(f"expected a positive quantity (like {example!r}), found {shown(value)}")
        return quantity

    return Annotated[
        Any,
        BeforeValidator(parse),
        PlainSerializer(_quantity_text, return_type=str),
        WithJsonSchema(
            {
                "type": "string",
                "description": f"quantity with dimension {dimension}, e.g. '{example}'",
                "examples": [example],
            }
        ),
    ]


def _count(value: Any) -> Any:
    """Counts may be written 70.6e9 (PyYAML reads that as a string) or 70_600_000_000."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, found {shown(value)}")
    if isinstance(value, str):
        try:
            value = float(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"expected a number, found {shown(value)}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, found {shown(value)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"expected a positive number, found {shown(value)}")
    return value


if TYPE_CHECKING:  # type checkers see quantities; pydantic sees the validating types below
    from pint import Quantity as _Quantity

    Bytes: TypeAlias = _Quantity
    ByteRate: TypeAlias = _Quantity
    FlopRate: TypeAlias = _Quantity
    Power: TypeAlias = _Quantity
    Duration: TypeAlias = _Quantity
    HourlyPrice: TypeAlias = _Quantity
else:
    Bytes = _quantity_type("80 GB")
    ByteRate = _quantity_type("3.35 TB/s")
    FlopRate = _quantity_type("989 TFLOP/s")
    Power = _quantity_type("700 W")
    Duration = _quantity_type("500 ns")
    HourlyPrice = _quantity_type("2.5 USD/hour")
Count = Annotated[
    float | int,
    BeforeValidator(_count),
    WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}]}),
]
PositiveInt = Annotated[int, Field(strict=True, gt=0)]
#: A registry id: lowercase letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit.
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=80)]
#: A model repository as Hugging Face names it, ``owner/name``: letters, digits, ``.``, ``_`` and ``-``,
#: starting with a letter or digit, at most 96 characters a part (the Hub's own rule). Launch commands
#: and manifests carry it, so nothing else (``$``, quotes, ``;``, spaces, line breaks) may be in it.
REPOSITORY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
#: Another name of an entry: a model repository (:data:`REPOSITORY_PATTERN`) or a plain name (letters,
#: digits, spaces, ``.``, ``_``, ``+``, ``-`` and parentheses, as a benchmark prints a GPU:
#: ``H100 SXM5 80GB``).
ALIAS_PATTERN = rf"^(?:{REPOSITORY_PATTERN}|[A-Za-z0-9][A-Za-z0-9 ._+()-]{{0,99}})$"


def _alias(value: str) -> str:
    if not re.fullmatch(ALIAS_PATTERN, value):
        raise ValueError(
            "expected a model repository 'owner/name' or a plain name (letters, digits, spaces, '.', '_', '+', '-' "
            f"and parentheses, at most 100 characters), found {shown(value)}"
        )
    return value


Alias = Annotated[str, AfterValidator(_alias), WithJsonSchema({"type": "string", "pattern": ALIAS_PATTERN})]
if TYPE_CHECKING:
    Precision = str
else:
    Precision = Literal[tuple(PRECISIONS)]

# --------------------------------------------------------------------------------------------
# Entries


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    """A document a value was taken from."""

    id: Identifier
    title: str = Field(min_length=1)
    url: str = Field(min_length=1, description="address of the document (or 'chapter:<where>')")
    kind: Literal["vendor_datasheet", "model_config", "paper", "documentation", "price_list", "chapter", "user", "fit"]
    note: str = ""


class SourceLink(_Strict):
    """Which fields of an entry a source supports, and on what basis (dense/sparse, ...)."""

    source: Identifier
    fields: tuple[str, ...] = Field(min_length=1)
    note: str = ""


class Entry(_Strict):
    """Fields every registry entry has."""

    id: Identifier
    name: str = Field(min_length=1)
    provenance: Literal["published", "chapter_scenario", "user"] = Field(
        description="published: a vendor or model-card value; chapter_scenario: a value the chapter "
        "uses as an illustration; user: supplied by the user"
    )
    sources: tuple[SourceLink, ...] = Field(min_length=1)
    aliases: tuple[Alias, ...] = Field(
        (),
        description="other names users know it by (a Hugging Face id 'owner/name', a benchmark's system name)",
    )
    #: The registry the entry was loaded into (a weak reference), where the ids inside it resolve.
    _registry: Any = PrivateAttr(default=None)

    #: Fields that are labels, not values, and so need no source.
    UNSOURCED: ClassVar[frozenset[str]] = frozenset(
        {"id", "name", "provenance", "sources", "kind", "vendor", "architecture", "aliases"}
    )

    #: Plausible values per field, ``(low, high, unit)``: generous for hardware and models to come,
    #: but a typo's 10^29 layers or 1e-30 TB/s is an error (docs/hardening.md).
    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {}

    @model_validator(mode="after")
    def _plausible(self) -> Entry:
        for name, (low, high, unit) in self.PLAUSIBLE.items():
            value = getattr(self, name, None)
            for item in (value.values() if isinstance(value, Mapping) else [value]) if value is not None else ():
                number = item.m_as(unit) if unit else float(item)
                if not low <= number <= high:
                    written = f"{number:.4g} {unit}".strip()
                    raise ValueError(
                        f"field '{name}': {written} is outside the plausible range {low:g} to {high:g} {unit}".rstrip()
                        + " (a typo? docs/hardening.md lists the ranges)"
                    )
        return self

    def __eq__(self, other: object) -> bool:
        """Entries are equal when their fields are, whichever registry they were loaded into."""
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), self.id))

    def __getstate__(self) -> dict[Any, Any]:
        """A pickled entry leaves its registry behind (ids then resolve in the default registry)."""
        state = super().__getstate__()
        state["__pydantic_private__"] = {**(state.get("__pydantic_private__") or {}), "_registry": None}
        return state

    def sourced_fields(self) -> list[str]:
        """The fields that carry values and so must be covered by a source."""
        return [
            f for f in type(self).model_fields if f not in self.UNSOURCED and getattr(self, f) not in (None, (), {})
        ]

    def display_values(self) -> dict[str, Any]:
        """Every set field except the sources, flattened (``dense_throughput.bf16``), quantities as text."""
        out: dict[str, Any] = {}
        for field in type(self).model_fields:
            value = getattr(self, field)
            if field == "sources" or value is None:
                continue
            if isinstance(value, tuple) and value and all(isinstance(v, BaseModel) for v in value):
                value = {str(i): _record_text(v) for i, v in enumerate(value)}  # tiers, checkpoints
            elif isinstance(value, BaseModel):  # a nested rule (SGLang's memory fraction): its fields, its tiers
                value = {
                    name: "; ".join(map(_record_text, item)) if isinstance(item, tuple) else item
                    for name in type(value).model_fields
                    if (item := getattr(value, name)) is not None
                }
            items = value.items() if isinstance(value, Mapping) else [(None, value)]
            for key, item in items:
                out[field if key is None else f"{field}.{key}"] = (
                    _quantity_text(item) if isinstance(item, ureg.Quantity) else item
                )
        return out

    def source_of(self, field: str) -> list[SourceLink]:
        """The source links that cover ``field``.

        A mapping's key ``field.key`` is covered by the links that cite it or the whole field; a mapping
        ``field`` by the links that cite it or any of its keys.
        """
        whole = field.partition(".")[0]
        return [
            link
            for link in self.sources
            if any(name in (field, whole) or name.startswith(f"{field}.") for name in link.fields)
        ]


def _record_text(record: BaseModel) -> str:
    """A nested record (a token-budget tier, a checkpoint) as ``name value`` pairs of its set fields."""
    parts = []
    for name in type(record).model_fields:
        value = getattr(record, name)
        if value not in (None, ""):
            parts.append(f"{name} {_quantity_text(value) if isinstance(value, ureg.Quantity) else value}")
    return ", ".join(parts)


class Accelerator(Entry):
    """An accelerator (one GPU or accelerator package)."""

    vendor: str
    architecture: str = ""
    memory: Bytes = Field(description="physical memory in bytes (the registered byte capacity)")
    memory_nameplate: Bytes = Field(description="the marketed memory figure, as printed")
    memory_bandwidth: ByteRate
    dense_throughput: Mapping[Precision, FlopRate] = Field(
        description="dense (no structured sparsity) tensor throughput per precision; int rates as ops/s"
    )
    nvlink_bandwidth: ByteRate | None = Field(None, description="NVLink bandwidth per direction")
    nvlink_bandwidth_total: ByteRate | None = Field(None, description="NVLink bandwidth, both directions")
    host_link: Identifier | None = Field(None, description="id of the host interconnect")
    node_gpus: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None, description="GPUs in one scale-up domain (NVLink and NVSwitch): collectives inside it run on NVLink"
    )
    scale_out: Identifier | None = Field(
        None, description="id of the inter-node interconnect between scale-up domains, one link per GPU"
    )
    tdp: Power

    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "memory": (0.5, 100_000, "GB"),
        "memory_nameplate": (0.5, 100_000, "GB"),
        "memory_bandwidth": (0.01, 1_000, "TB/s"),
        "dense_throughput": (0.1, 1_000_000, "TFLOP/s"),
        "nvlink_bandwidth": (1, 100_000, "GB/s"),
        "nvlink_bandwidth_total": (1, 100_000, "GB/s"),
        "tdp": (5, 100_000, "W"),
    }

    def peak_throughput(self, precision: str) -> Any:
        """Dense peak throughput at ``precision``; :class:`RegistryError` if the part lacks it."""
        name = check_precision(precision)
        if name not in self.dense_throughput:
            raise RegistryError(
                f"accelerator '{self.id}' has no dense {name} throughput in the registry; "
                f"it lists {sorted(self.dense_throughput)}"
            )
        return self.dense_throughput[name]


class Interconnect(Entry):
    """A link between devices or nodes."""

    scope: Literal["intra_node", "inter_node", "host"]
    bandwidth: ByteRate = Field(description="bandwidth per direction")
    bandwidth_total: ByteRate | None = Field(None, description="bandwidth summed over both directions")
    startup_latency: Duration | None = Field(None, description="per-message startup latency (alpha)")

    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "bandwidth": (0.001, 100_000, "GB/s"),
        "bandwidth_total": (0.001, 100_000, "GB/s"),
        "startup_latency": (1e-3, 1e6, "us"),
    }

    UNSOURCED: ClassVar[frozenset[str]] = Entry.UNSOURCED | {"scope"}


class Checkpoint(_Strict):
    """A published checkpoint of a model's weights at one precision (the repository a launch config loads).

    ``kv_cache`` is the KV-cache precision the checkpoint declares (ModelOpt ``kv_cache_quant_algo``,
    compressed-tensors ``kv_cache_scheme``); ``None`` where it declares none or the declaration was not
    verified (engines then follow their own rule: ``performance.kv_cache_precision``).
    """

    precision: Precision
    repo: str = Field(pattern=rf"^{REPOSITORY_PATTERN}$")
    format: Literal["modelopt", "compressed-tensors", "awq", "gptq", "fp8-block", "mxfp4"] = Field(
        description="the quantization format: ModelOpt (hf_quant_config.json), compressed-tensors (llm-compressor), "
        "AWQ or GPTQ INT4, block-scaled FP8 (DeepSeek/Qwen native), MXFP4 (gpt-oss native)"
    )
    kv_cache: Precision | None = None
    source: Identifier
    note: str = ""


class Model(Entry):
    """A model architecture (transformer LLM, recommendation model or vision model)."""

    kind: Literal["transformer", "recommendation", "vision"] = "transformer"
    parameters: Count
    active_parameters: Count | None = Field(None, description="parameters used per token; defaults to parameters")
    layers: PositiveInt | None = None
    hidden_size: PositiveInt | None = None
    intermediate_size: PositiveInt | None = None
    attention_heads: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    attention: Literal["mha", "gqa", "mqa", "mla"] | None = None
    vocab_size: PositiveInt | None = None
    max_context: PositiveInt | None = Field(None, description="longest context in tokens")
    experts: PositiveInt = 1
    experts_per_token: PositiveInt = 1
    shared_experts: Annotated[int, Field(strict=True, ge=0)] = 0
    kv_lora_rank: PositiveInt | None = Field(None, description="MLA: latent KV width cached per token and layer")
    qk_rope_head_dim: PositiveInt | None = Field(None, description="MLA: decoupled RoPE key width cached")
    q_lora_rank: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    checkpoints: tuple[Checkpoint, ...] = Field(
        (), description="quantized checkpoints of the weights, each with its own source (the launch configs load them)"
    )

    #: ``checkpoints`` carry a source each (checked against the file's sources when the file is read).
    UNSOURCED: ClassVar[frozenset[str]] = Entry.UNSOURCED | {
        "experts",
        "experts_per_token",
        "shared_experts",
        "checkpoints",
    }

    def checkpoint(self, precision: str) -> Checkpoint | None:
        """The registry's checkpoint of these weights at ``precision`` (the first listed), if any."""
        name = check_precision(precision)
        return next((c for c in self.checkpoints if c.precision == name), None)

    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "parameters": (1e5, 1e14, ""),
        "active_parameters": (1e5, 1e14, ""),
        "layers": (1, 10_000, ""),
        "hidden_size": (8, 1_000_000, ""),
        "intermediate_size": (8, 10_000_000, ""),
        "attention_heads": (1, 100_000, ""),
        "kv_heads": (1, 100_000, ""),
        "head_dim": (1, 65_536, ""),
        "vocab_size": (2, 100_000_000, ""),
        "max_context": (16, 1_000_000_000, ""),
        "experts": (1, 1_000_000, ""),
        "experts_per_token": (1, 100_000, ""),
        "kv_lora_rank": (1, 1_000_000, ""),
        "qk_rope_head_dim": (1, 65_536, ""),
    }

    @model_validator(mode="after")
    def _consistent(self) -> Model:
        if self.active_parameters is not None and self.active_parameters > self.parameters:
            raise ValueError(
                f"active_parameters ({self.active_parameters}) cannot exceed parameters ({self.parameters})"
            )
        if self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) exceeds experts ({self.experts})")
        if self.kind != "transformer":
            return self
        needed = ["layers", "attention_heads", "kv_heads", "head_dim", "attention"]
        missing = [f for f in needed if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a transformer model needs {missing}")
        heads, kv = self.attention_heads, self.kv_heads
        assert heads is not None and kv is not None  # checked above
        rules = {
            "mha": (kv == heads, f"mha needs kv_heads == attention_heads, found {kv} and {heads}"),
            "mqa": (kv == 1, f"mqa needs kv_heads == 1, found {kv}"),
            "gqa": (
                heads % kv == 0 and kv < heads,
                f"gqa needs kv_heads < attention_heads dividing them, found {kv}/{heads}",
            ),
            "mla": (
                self.kv_lora_rank is not None and self.qk_rope_head_dim is not None,
                "mla needs kv_lora_rank and qk_rope_head_dim",
            ),
        }
        ok, message = rules[self.attention]  # type: ignore[index]
        if not ok:
            raise ValueError(message)
        return self

    @property
    def active(self) -> float:
        """Parameters used per token (equal to ``parameters`` for a dense model)."""
        return self.active_parameters if self.active_parameters is not None else self.parameters


class TokenBudgetTier(_Strict):
    """An engine's token budget and sequence cap on devices with at least ``min_device_memory``."""

    min_device_memory: Bytes | None = Field(None, description="smallest device memory of the tier (none: any)")
    max_num_tokens: PositiveInt
    max_num_seqs: PositiveInt


class EngineInterval(_Strict):
    """An engine's own 80 % prediction interval (factors on the prediction), fitted on its benchmarks."""

    ttft: tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]]
    tpot: tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]]
    accelerators: tuple[Identifier, ...] = Field(
        (), description="accelerators the benchmarks ran on (elsewhere the interval widens)"
    )


class GraphBatchTier(_Strict):
    """The CUDA-graph batch an engine captures on devices with at least ``min_device_memory``."""

    min_device_memory: Bytes | None = Field(None, description="smallest device memory of the tier (none: any)")
    batch: PositiveInt = Field(description="the graph batch below the rule's graph_tensor_parallel")
    batch_from_tensor_parallel: PositiveInt = Field(
        description="the graph batch from the rule's graph_tensor_parallel GPUs up"
    )


class MemoryFractionRule(_Strict):
    """A memory fraction an engine computes from the device (``memory_policy: sglang``).

    SGLang's default ``mem_fraction_static`` is ``(M - reserved) / M`` of the device memory ``M``, with
    ``reserved = base + per_prefill_token x max(chunk, min_prefill_tokens) + per_graph_sequence x graph
    batch + per_tensor_parallel_rank x TP``, at least ``floor`` on devices above ``floor_above``; the chunk
    is the engine's token budget on the device, the graph batch its tier's (``graph_batch``).
    """

    base: Bytes = Field(description="memory kept for constant metadata (the attention backend's)")
    per_prefill_token: Bytes = Field(description="activation memory per token of the prefill chunk")
    min_prefill_tokens: PositiveInt = Field(description="the chunk counted is at least this many tokens")
    per_graph_sequence: Bytes = Field(description="CUDA-graph memory per sequence of the graph batch")
    graph_batch: tuple[GraphBatchTier, ...] = Field(
        min_length=1, description="the CUDA-graph batch by device memory (smallest first)"
    )
    graph_tensor_parallel: PositiveInt = Field(description="from this tensor-parallel degree, the larger graph batch")
    per_tensor_parallel_rank: Bytes = Field(description="memory per tensor-parallel rank (communication)")
    floor: Bytes = Field(description="the least memory kept back on devices above floor_above")
    floor_above: Bytes = Field(description="devices with more memory keep at least floor")

    @model_validator(mode="after")
    def _tiers_ascend(self) -> MemoryFractionRule:
        memory = [t.min_device_memory.m_as("B") if t.min_device_memory else 0.0 for t in self.graph_batch]
        if memory != sorted(memory):
            raise ValueError("graph_batch tiers must be listed from the smallest min_device_memory up")
        return self


#: An engine release, ``major.minor`` (or ``major.minor.patch``).
RELEASE_PATTERN = r"^[0-9]{1,4}(\.[0-9]{1,4}){1,2}$"
Release = Annotated[str, Field(pattern=RELEASE_PATTERN)]
#: An engine's command-line flag: ``--name`` (letters, digits, ``-`` and ``_``).
FLAG_PATTERN = r"^--[A-Za-z0-9][A-Za-z0-9_-]{0,79}$"
#: An option of :attr:`Engine.launch_flags`: a lowercase name.
OPTION_PATTERN = r"^[a-z][a-z0-9_]{0,79}$"


class Engine(Entry):
    """A serving engine's scheduler defaults (each cited) and its fitted costs.

    Fields covered by a source of kind ``fit`` are fitted (``benchmarks/fit_performance.py``, or
    ``servecalc calibrate`` on the user's own benchmarks); every other field is the engine's documented
    default. ``performance.engine_profile`` turns an entry into the :class:`EngineProfile` the step
    model, the sizer, the simulator and the launch configs use.
    """

    versions: str = Field("", description="the engine versions the defaults were read in")
    token_budget: tuple[TokenBudgetTier, ...] = Field(
        min_length=1, description="token budget and sequence cap by device memory (smallest first)"
    )
    small_tier_accelerators: tuple[str, ...] = Field(
        (), description="accelerator ids (substrings) that always get the first tier"
    )
    chunked_prefill: bool
    mixed_batching: bool = Field(description="prefill chunks share iterations with decodes (False: prefill first)")
    memory_policy: Literal["device", "free", "sglang"]
    memory_utilization: Annotated[float, Field(ge=0, le=1)]
    memory_reserve: Bytes = Field(description="memory per device beyond the policy (activations, graphs, buffers)")
    output_reservation: Annotated[float, Field(ge=0, le=1)] = Field(
        description="share of the output the admission reserves KV for"
    )
    quantized_kv_precision: Literal["fp8", "bf16", "fp16"] = Field(
        description="KV-cache precision for FP8/FP4 weights whose checkpoint declares none in the registry"
    )
    async_scheduling: bool | None = Field(
        None,
        description="the CPU schedules the next iteration while the GPU runs this one, hiding the fixed costs "
        "(None: not documented, the costs add to the GPU's work)",
    )
    overlap_scheduler: bool | None = Field(
        None,
        description="the scheduler builds the next iteration while the GPU runs this one (an overlap or asynchronous "
        "scheduler), so a request that arrives while an iteration runs waits for one more iteration before its own "
        "(None: not documented, a synchronous scheduler)",
    )
    expert_exchange: Literal["gather_scatter", "padded_or_summed"] = Field(
        "gather_scatter",
        description="how attention data-parallel ranks exchange tokens around the experts: 'gather_scatter', an "
        "all-gather of every rank's tokens and a reduce-scatter of the outputs; 'padded_or_summed', the same over "
        "buffers padded to the busiest rank in decode-only iterations, and in iterations with a prompt an all-reduce "
        "of the summed buffer to gather and another to combine",
    )
    memory_fraction_rule: MemoryFractionRule | None = Field(
        None,
        description="how the engine computes its memory fraction from the device (required with memory_policy "
        "'sglang': SGLang's default mem_fraction_static)",
    )
    async_scheduling_since: Release | None = Field(
        None,
        description="the first release that schedules asynchronously by default (a benchmark row of an older "
        "release is priced with the fixed costs added to the GPU's work); none: no release changed it",
    )
    kv_declaration_since: Release | None = Field(
        None,
        description="the first release whose automatic KV-cache dtype takes the KV cache a quantized checkpoint "
        "declares (a benchmark row of an older release runs the model dtype, BF16); none: no release changed it",
    )
    launch_flags: Mapping[
        Annotated[str, Field(pattern=OPTION_PATTERN)], Annotated[str, Field(pattern=FLAG_PATTERN)]
    ] = Field(
        default_factory=dict,
        description="the engine's command-line flag for each option a launch command sets "
        "(calculator.deploy: tensor_parallel, max_sequences, token_budget, ...); cite each as "
        "'launch_flags.<option>' or all as 'launch_flags'",
    )
    display_name: str = Field(
        "", max_length=40, description="the short name front ends list the engine by (empty: its name)"
    )
    step_overhead: Duration = Field(description="fixed cost of one iteration")
    sequence_overhead: Duration = Field(description="cost per running sequence per iteration")
    request_overhead: Duration = Field(description="time every request spends outside the GPU before its first token")

    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "memory_reserve": (0, 10_000, "GB"),
        "step_overhead": (0, 10, "s"),
        "sequence_overhead": (0, 1, "s"),
        "request_overhead": (0, 60, "s"),
    }
    prediction_interval: EngineInterval | None = Field(
        None, description="the engine's own 80 % interval, from its calibration's held-out errors"
    )

    UNSOURCED: ClassVar[frozenset[str]] = Entry.UNSOURCED | {"versions", "display_name"}

    @model_validator(mode="after")
    def _tiers_ascend(self) -> Engine:
        memory = [tier.min_device_memory.m_as("B") if tier.min_device_memory else 0.0 for tier in self.token_budget]
        if memory != sorted(memory):
            raise ValueError("token_budget tiers must be listed from the smallest min_device_memory up")
        if self.memory_policy == "sglang" and self.memory_fraction_rule is None:
            raise ValueError(
                "field 'memory_fraction_rule': memory_policy 'sglang' computes the fraction from the device by this "
                "rule; give it (the packaged sglang entry's is SGLang's default)"
            )
        return self

    @property
    def label(self) -> str:
        """The short name front ends list the engine by: ``display_name``, else ``name``."""
        return self.display_name or self.name

    def fitted_fields(self, sources: Mapping[str, Source]) -> tuple[str, ...]:
        """The fields a source of kind ``fit`` covers."""
        return tuple(field for link in self.sources if sources[link.source].kind == "fit" for field in link.fields)


class Price(Entry):
    """A GPU-hour price (per accelerator, per hour)."""

    accelerator: Identifier | None = None
    price: HourlyPrice = Field(description="price per accelerator-hour")

    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {"price": (1e-4, 10_000, "USD/hour")}
    market: Literal["on_demand", "spot", "reserved"]
    region: str = ""
    provider: str = ""
    as_of: str = Field(min_length=1, description="date or year the price applies to")

    UNSOURCED: ClassVar[frozenset[str]] = Entry.UNSOURCED | {"market", "region", "provider", "as_of", "accelerator"}


SECTIONS: dict[str, type[Entry]] = {
    "accelerators": Accelerator,
    "interconnects": Interconnect,
    "models": Model,
    "prices": Price,
    "engines": Engine,
}


class RegistryFile(_Strict):
    """The layout of a registry YAML file (used for the exported JSON schema)."""

    schema_version: Literal[1] = 1
    sources: tuple[Source, ...] = ()
    accelerators: tuple[Accelerator, ...] = ()
    interconnects: tuple[Interconnect, ...] = ()
    models: tuple[Model, ...] = ()
    prices: tuple[Price, ...] = ()
    engines: tuple[Engine, ...] = ()


def registry_json_schema() -> dict[str, Any]:
    """The JSON schema of a registry file."""
    schema = RegistryFile.model_json_schema(mode="validation")
    schema["title"] = "Serving capacity calculator registry"
    return schema


# --------------------------------------------------------------------------------------------
# The loaded registry


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


class Section(Mapping[str, Any]):
    """A read-only mapping from id to entry.

    Lookups also accept an entry's aliases and ignore case and ``_`` vs ``-``
    (``"meta-llama/Llama-3.1-70B"`` or ``"H100_SXM"``); iteration yields ids only. A missing key
    raises :class:`UnknownEntryError` listing the known ids.
    """

    def __init__(self, kind: str, entries: Mapping[str, Any]) -> None:
        self._kind = kind
        self._entries = MappingProxyType(dict(entries))
        self._names: dict[str, str] = {}
        for entry_id, entry in entries.items():
            for name in (entry_id, *getattr(entry, "aliases", ())):
                self._names.setdefault(_normalise(name), entry_id)

    def resolve(self, key: str) -> str | None:
        """The id that ``key`` names (an id or an alias), or ``None``."""
        if key in self._entries:
            return key
        return self._names.get(_normalise(key)) if isinstance(key, str) else None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.resolve(key) is not None

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str):
            raise UnknownEntryError(f"a {self._kind} is named by its id (a string), got {shown(key)}")
        entry_id = self.resolve(key)
        if entry_id is None:
            known = ", ".join(sorted(self._entries))
            raise UnknownEntryError(f"unknown {self._kind} id {shown(key)}; known ids: {known}")
        return self._entries[entry_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<{self._kind}s: {', '.join(self._entries)}>"


@dataclasses.dataclass(frozen=True, repr=False)
class RegistryDocument(Result):
    """The text of a user registry file, named and fingerprinted: how a plan carries its registry.

    A plan records the registry it was sized with by content, never by path, so loading a plan opens no
    file the plan names (a tampered plan cannot make the calculator read ``/etc/shadow``).
    :func:`load_registry` takes documents in ``extra=`` as it takes files; the simulator's worker
    processes receive them with the plan.

    Parameters
    ----------
    name : str
        The file name it was read from, a label only (no folder: ``mine.yaml``).
    text : str
        The file's text, as read.
    sha256 : str
        Its SHA-256 in hex; computed when not given, and checked when given (a plan file edited by
        hand after it was written is refused).
    """

    name: str
    text: str
    sha256: str = ""

    def __post_init__(self) -> None:
        name, text = self.name, self.text
        if not isinstance(name, str) or not re.fullmatch(r"[^/\\\x00-\x1f]{1,255}", name):
            raise RegistryError(f"a registry document's 'name' must be a file name without folders, got {shown(name)}")
        if not isinstance(text, str):
            raise RegistryError(f"registry document {name}: 'text' must be the file's text, got {shown(text)}")
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if self.sha256 and self.sha256 != digest:
            raise RegistryError(
                f"registry document {name}: its text does not match its recorded SHA-256 (changed after it was written)"
            )
        object.__setattr__(self, "sha256", digest)

    def __repr__(self) -> str:
        return f"RegistryDocument({self.name!r}, sha256={self.sha256[:12]!r}, {len(self.text):,} characters)"

    @classmethod
    def read(cls, path: str | Path) -> RegistryDocument:
        """The document of the user registry file ``path`` (bounded read: :func:`calculator._files.read_text`)."""
        return cls(Path(path).name, _read_user_text(Path(path)))


class Registry:
    """Validated registry content.

    ``accelerators``, ``interconnects``, ``models``, ``prices`` and ``sources`` are each a mapping by
    id; ``files`` are the files it was read from (a document's name for one given as a
    :class:`RegistryDocument`); ``user_documents`` the texts of all but the packaged file, in order, as a
    plan records them.
    """

    def __init__(
        self,
        sections: dict[str, dict[str, Any]],
        sources: dict[str, Source],
        files: tuple[Path, ...],
        documents: tuple[RegistryDocument, ...] = (),
    ):
        self.accelerators = Section("accelerator", sections["accelerators"])
        self.interconnects = Section("interconnect", sections["interconnects"])
        self.models = Section("model", sections["models"])
        self.prices = Section("price", sections["prices"])
        self.engines = Section("engine", sections["engines"])
        self.sources = Section("source", sources)
        self.files = files
        self.user_documents = documents
        home = weakref.ref(self)
        for name in SECTIONS:
            for entry in getattr(self, name).values():
                entry._registry = home

    def __repr__(self) -> str:
        counts = ", ".join(f"{len(getattr(self, s))} {s}" for s in (*SECTIONS, "sources"))
        return f"<Registry {counts} from {[f.name for f in self.files]}>"

    def section(self, name: str) -> Section:
        """One section by name (``"models"``)."""
        if name not in (*SECTIONS, "sources"):
            raise RegistryError(f"unknown registry section {name!r}; sections: {', '.join((*SECTIONS, 'sources'))}")
        return getattr(self, name)

    def find(self, entry_id: str) -> tuple[str, Any]:
        """Look an id up in every section; returns ``(section, entry)``."""
        for name in (*SECTIONS, "sources"):
            section = getattr(self, name)
            if entry_id in section:
                return name, section[entry_id]
        raise UnknownEntryError(f"no registry entry has id {shown(entry_id)}")

    def accelerator(self, value: Any) -> Accelerator:
        """An accelerator from an id or an :class:`Accelerator` (passed through)."""
        return value if isinstance(value, Accelerator) else self.accelerators[value]

    def model(self, value: Any) -> Model:
        """A model from an id or a :class:`Model` (passed through)."""
        return value if isinstance(value, Model) else self.models[value]

    def interconnect(self, value: Any) -> Interconnect:
        """An interconnect from an id or an :class:`Interconnect` (passed through)."""
        return value if isinstance(value, Interconnect) else self.interconnects[value]

    def engine(self, value: Any) -> Engine:
        """An engine from an id or an :class:`Engine` (passed through)."""
        return value if isinstance(value, Engine) else self.engines[value]


def registry_of(entry: Any, registry: Registry | None = None) -> Registry:
    """The registry an entry object came from, to resolve the ids inside it (a host link, a price's GPU).

    ``registry`` wins when given; otherwise the registry the entry was loaded into (each entry keeps a
    weak reference to it), or the default registry (:func:`load_registry`) for an object made by hand.
    """
    if registry is not None:
        return registry
    home = getattr(entry, "_registry", None)
    found = home() if home is not None else None
    return found if found is not None else load_registry()


# --------------------------------------------------------------------------------------------
# Loading


def load_registry(path: str | Path | None = None, extra: Iterable[str | Path | RegistryDocument] = ()) -> Registry:
    """Load and validate the registry (cached per file set and modification time, and per document text).

    Parameters
    ----------
    path : str or Path, optional
        The base registry file; defaults to the packaged ``hardware_registry.yaml``.
    extra : iterable of str, Path or RegistryDocument
        User files (or their documents, as a plan carries them: :class:`RegistryDocument`) applied after
        the base, in order; they add entries or override fields.

    Returns
    -------
    Registry

    Raises
    ------
    RegistryError
        On any invalid file, naming the file, the entry id, the field, what was expected and what
        was found.

    Examples
    --------
    >>> reg = load_registry()
    >>> reg.accelerators["h100-sxm"].memory_bandwidth
    <Quantity(3.35, 'terabyte / second')>
    """
    if isinstance(extra, str | Path | RegistryDocument):
        raise RegistryError(f"argument 'extra' must be a list of files or documents, got one: {shown(str(extra))}")
    stamps: list[tuple[str, int] | RegistryDocument] = []
    for item in (path or DEFAULT_REGISTRY_PATH, *extra):
        if isinstance(item, RegistryDocument):
            stamps.append(item)
            continue
        if not isinstance(item, str | Path):
            raise RegistryError(f"argument 'extra' must list files or registry documents, got {shown(item)}")
        file = Path(item)
        try:
            stamps.append((str(file.resolve()), file.stat().st_mtime_ns))
        except OSError as exc:
            raise RegistryError(f"{file}: cannot read the registry file ({exc.strerror})") from None
    return _load_cached(tuple(stamps))


@functools.lru_cache(maxsize=32)
def _load_cached(stamps: tuple[tuple[str, int] | RegistryDocument, ...]) -> Registry:
    files: list[Path] = []
    documents: list[RegistryDocument] = []
    raw_sections: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {s: {} for s in SECTIONS}
    sources: dict[str, Source] = {}
    for index, stamp in enumerate(stamps):
        text: str | None
        if isinstance(stamp, RegistryDocument):
            file, text = Path(stamp.name), stamp.text
            _check_size(stamp.name, text, _max_registry_bytes())
        else:
            file = Path(stamp[0])
            text = None if index == 0 and _is_packaged(file) else _read_user_text(file)
        files.append(file)
        if text is not None:
            documents.append(RegistryDocument(file.name, text))
        document = _read_yaml(file, text)
        sources.update(_read_sources(file, document.get("sources") or []))
        for section in SECTIONS:
            seen: set[str] = set()
            for position, raw in enumerate(_as_list(file, section, document.get(section))):
                entry_id = _entry_id(file, section, position, raw)
                if entry_id in seen:
                    raise RegistryError(f"{file.name}: {section}['{entry_id}']: duplicate id in the same file")
                seen.add(entry_id)
                if entry_id in raw_sections[section] and index > 0:
                    base, _ = raw_sections[section][entry_id]
                    _check_override(file, section, entry_id, raw)
                    merged = {**base, **raw, "sources": [*base.get("sources", []), *raw.get("sources", [])]}
                    raw_sections[section][entry_id] = (merged, file)
                else:
                    raw_sections[section][entry_id] = (raw, file)
    sections = {
        section: {
            entry_id: _validate(file, section, entry_id, raw, sources) for entry_id, (raw, file) in entries.items()
        }
        for section, entries in raw_sections.items()
    }
    origin = {
        (section, entry_id): file.name
        for section, entries in raw_sections.items()
        for entry_id, (_, file) in entries.items()
    }
    _check_references(sections, origin)
    _check_unique_ids(sections, origin)
    return Registry(sections, sources, tuple(files), tuple(documents))


def _is_packaged(file: Path) -> bool:
    """Whether ``file`` is the packaged registry (read without the user files' size limit, kept as no document)."""
    return file.resolve() == DEFAULT_REGISTRY_PATH.resolve()


def _check_override(file: Path, section: str, entry_id: str, raw: dict[str, Any]) -> None:
    """An override cites a source of its own for every field it changes (docs/registry.md)."""
    labels = SECTIONS[section].UNSOURCED | {"sources"}
    links = raw.get("sources") or []
    cited = {str(f) for link in links if isinstance(link, dict) for f in (link.get("fields") or [])}
    uncited = sorted(str(field) for field in raw if str(field) not in labels and str(field).split(".")[0] not in cited)
    if uncited:
        raise RegistryError(
            f"{file.name}: {section}['{entry_id}']: the override changes {shown(uncited)} without a source of its "
            "own for them; list the document each new value comes from under this entry's 'sources'"
        )


#: The largest user registry file read (bytes); a larger one is refused before it is parsed. Set the
#: environment variable SERVECALC_REGISTRY_MAX_BYTES to change it. (The packaged registry is not limited.)
MAX_REGISTRY_BYTES = 4 * 1024 * 1024
#: The most values a registry file may expand to: YAML aliases can make a small file expand to
#: billions of values (an "alias bomb"); such a file is refused.
MAX_REGISTRY_VALUES = 200_000
#: The deepest nesting of lists and mappings in a registry file (the packaged one has six levels);
#: a deeper one is refused before it is validated or quoted in a message.
MAX_REGISTRY_DEPTH = 20


def _max_registry_bytes() -> int:
    import os

    text = os.environ.get("SERVECALC_REGISTRY_MAX_BYTES", "")
    return int(text) if text.isdigit() else MAX_REGISTRY_BYTES


def _check_expansion(file: Path, document: Any) -> None:
    """Refuse a document too big or too deep to validate and quote in a message.

    It may expand (through YAML aliases) to at most MAX_REGISTRY_VALUES values, and nest lists and
    mappings at most MAX_REGISTRY_DEPTH levels deep (a deeper value cannot be shown: ``repr`` recurses).
    """
    stack, seen = [(document, 0)], 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_REGISTRY_VALUES:
            raise RegistryError(
                f"{file.name}: the file expands to more than {MAX_REGISTRY_VALUES:,} values (YAML aliases "
                "repeating other values); write the entries out instead"
            )
        if isinstance(item, dict | list) and depth >= MAX_REGISTRY_DEPTH:
            raise RegistryError(
                f"{file.name}: lists and mappings nested more than {MAX_REGISTRY_DEPTH} levels deep; a registry "
                "entry needs at most six (sections, entries, fields, their sources)"
            )
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in (*item.keys(), *item.values()))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def _read_yaml(file: Path, text: str | None = None) -> dict[str, Any]:
    """The registry document of ``file`` (or of ``text``, a :class:`RegistryDocument`'s, labelled ``file``).

    Read by :func:`_read_user_text` and parsed by :func:`calculator._files.load_yaml` (safe tags, no key
    given twice, every parser failure a RegistryError).
    """
    document = load_yaml(_read_user_text(file) if text is None else text, file.name, RegistryError)
    if document is None:  # an empty file (or only comments): nothing to add, most likely the wrong file
        raise RegistryError(
            f"{file.name}: the file is empty; a registry file lists accelerators, interconnects, models, prices "
            "or sources (examples/my_registry.yaml is a minimal one)"
        )
    _check_expansion(file, document)
    if not isinstance(document, dict):
        raise RegistryError(f"{file.name}: expected a mapping of sections at the top, found {type(document).__name__}")
    allowed = {"schema_version", "sources", *SECTIONS}
    unknown = sorted(set(map(str, document)) - allowed)
    if unknown and len(unknown) == len(document):  # another kind of file: say so, without quoting it
        raise RegistryError(
            f"{file.name}: not a registry file (none of its top-level keys is one of {sorted(allowed)})"
        )
    if unknown:
        raise RegistryError(
            f"{file.name}: unknown top-level key(s) {shown(unknown)}; expected some of {sorted(allowed)}"
        )
    version = document.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise RegistryError(f"{file.name}: schema_version: expected {SCHEMA_VERSION}, found {shown(version)}")
    return document


def _read_user_text(file: Path) -> str:
    """The text of registry file ``file``, through :func:`calculator._files.read_text`.

    A regular file of at most :data:`MAX_REGISTRY_BYTES` (``SERVECALC_REGISTRY_MAX_BYTES``): a device, a
    pipe or a folder is refused before anything is read. The packaged registry is trusted with its size.
    """
    limit = _max_registry_bytes()
    if _is_packaged(file):
        limit = max(limit, DEFAULT_REGISTRY_PATH.stat().st_size)  # a regular file; its size is known
    return read_text(file, limit, "cannot read the registry file", RegistryError, raise_limit=_RAISE_LIMIT)


#: How a user reads a larger registry file.
_RAISE_LIMIT = "set SERVECALC_REGISTRY_MAX_BYTES to raise it"


def _check_size(name: str, text: str, limit: int) -> None:
    """Refuse a plan's registry document of more than ``limit`` bytes, as :func:`_read_user_text` refuses a file."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise RegistryError(
            f"cannot read the registry file: {name} has more than {limit:,} bytes, the most that is read "
            f"({_RAISE_LIMIT})"
        )


def _as_list(file: Path, section: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RegistryError(f"{file.name}: {section}: expected a list of entries, found {type(value).__name__}")
    return value


def _entry_id(file: Path, section: str, position: int, raw: Any) -> str:
    if not isinstance(raw, dict):
        raise RegistryError(f"{file.name}: {section}[{position}]: expected a mapping of fields, found {shown(raw)}")
    entry_id = raw.get("id")
    if not isinstance(entry_id, str) or len(entry_id) > 80 or not re.fullmatch(ID_PATTERN, entry_id):
        raise RegistryError(
            f"{file.name}: {section}[{position}]: field 'id': expected a lowercase id, found {shown(entry_id)} "
            "(a-z, 0-9, '.', '_' and '-', at most 80 characters)"
        )
    return entry_id


def _read_sources(file: Path, raw_sources: Any) -> dict[str, Source]:
    out: dict[str, Source] = {}
    for position, raw in enumerate(_as_list(file, "sources", raw_sources)):
        source_id = _entry_id(file, "sources", position, raw)
        if source_id in out:
            raise RegistryError(f"{file.name}: sources['{source_id}']: duplicate id in the same file")
        try:
            out[source_id] = Source.model_validate(raw)
        except ValidationError as exc:
            raise _registry_error(file, "sources", source_id, exc) from None
    return out


def _validate(file: Path, section: str, entry_id: str, raw: dict[str, Any], sources: dict[str, Source]) -> Entry:
    model = SECTIONS[section]
    if not raw.get("sources"):
        raise RegistryError(
            f"{file.name}: {section}['{entry_id}']: field 'sources': expected at least one source "
            f"(a document each value was taken from), found none"
        )
    try:
        entry = model.model_validate(raw)
    except ValidationError as exc:
        raise _registry_error(file, section, entry_id, exc) from None
    covered: set[str] = set()
    for link in entry.sources:
        if link.source not in sources:
            raise RegistryError(
                f"{file.name}: {section}['{entry_id}']: field 'sources': source '{link.source}' is not "
                f"listed under the file's top-level 'sources'"
            )
        unknown = sorted(f for f in link.fields if f not in model.model_fields and not _is_key_of(entry, f))
        if unknown:
            raise RegistryError(
                f"{file.name}: {section}['{entry_id}']: field 'sources': source '{link.source}' covers "
                f"unknown field(s) {shown(unknown)}"
            )
        covered.update(link.fields)
    for checkpoint in getattr(entry, "checkpoints", ()):
        if checkpoint.source not in sources:
            raise RegistryError(
                f"{file.name}: {section}['{entry_id}']: field 'checkpoints': the {checkpoint.precision} checkpoint "
                f"'{checkpoint.repo}' cites source '{checkpoint.source}', which is not listed under the file's "
                "top-level 'sources'"
            )
    for field in entry.sourced_fields():
        value = getattr(entry, field)
        keys = [f"{field}.{key}" for key in value] if isinstance(value, Mapping) and field not in covered else []
        cited_by_key = [key for key in keys if key in covered]
        missing = [key for key in keys if key not in covered] if cited_by_key else [field]  # cited one by one: each
        if field not in covered and missing:
            raise RegistryError(
                f"{file.name}: {section}['{entry_id}']: field '{missing[0]}': missing source; expected a "
                f"sources entry listing '{missing[0]}' in its fields, found none"
            )
    return entry


def _is_key_of(entry: Entry, name: str) -> bool:
    """Whether ``name`` is ``field.key`` of a mapping field of ``entry`` (a source may cite one key of it).

    The key need not be present: an override that drops a key leaves the base's citation of it behind.
    """
    field, dot, key = name.partition(".")
    value = getattr(entry, field, None) if field in type(entry).model_fields else None
    return bool(dot and key) and isinstance(value, Mapping)


def _registry_error(file: Path, section: str, entry_id: str, exc: ValidationError) -> RegistryError:
    """One line naming the file and the entry, then up to five of the entry's problems (field, expected, found)."""
    problems = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "(whole entry)"
        field = field if len(field) <= 80 else field[:77] + "..."  # a key of the file: quoted short
        found = error.get("input")
        if error["type"] == "extra_forbidden":
            message = f"field '{field}': unknown field (not part of the {section} schema), found {shown(found)}"
        elif error["type"] == "missing":
            message = f"field '{field}': required field is missing"
        else:
            text = error["msg"].removeprefix("Value error, ")
            # An entry-wide check that names its field itself ("field 'layers': ...") keeps that name.
            message = text if not error["loc"] and text.startswith("field '") else f"field '{field}': {text}"
            if "found" not in text and not isinstance(found, dict):
                message += f", found {shown(found)}"
        problems.append(" ".join(message.split("\n"))[:400])
    more = f" (and {len(problems) - 5} more problems in this entry)" if len(problems) > 5 else ""
    return RegistryError(f"{file.name}: {section}['{entry_id}']: {'; '.join(problems[:5])}{more}")


def _check_unique_ids(sections: dict[str, dict[str, Any]], origin: dict[tuple[str, str], str]) -> None:
    owner: dict[str, str] = {}
    for section, entries in sections.items():
        for entry_id in entries:
            if entry_id in owner:
                raise RegistryError(
                    f"{origin[section, entry_id]}: {section}['{entry_id}']: duplicate id: it is already used "
                    f"in {owner[entry_id]}; ids must be unique across sections"
                )
            owner[entry_id] = section
        names: dict[str, str] = {}
        for entry_id, entry in entries.items():
            for name in {_normalise(n) for n in (entry_id, *entry.aliases)}:
                if names.setdefault(name, entry_id) != entry_id:
                    raise RegistryError(
                        f"{origin[section, entry_id]}: {section}['{entry_id}']: field 'aliases': the name "
                        f"{name!r} already names {section}['{names[name]}']"
                    )


def _check_references(sections: dict[str, dict[str, Any]], origin: dict[tuple[str, str], str]) -> None:
    links = sections["interconnects"]
    for accelerator in sections["accelerators"].values():
        if accelerator.host_link is not None and accelerator.host_link not in links:
            raise RegistryError(
                f"{origin['accelerators', accelerator.id]}: accelerators['{accelerator.id}']: field 'host_link': "
                f"expected an interconnect id, found {accelerator.host_link!r}"
            )
        scale_out = accelerator.scale_out
        if scale_out is not None and (scale_out not in links or links[scale_out].scope != "inter_node"):
            raise RegistryError(
                f"{origin['accelerators', accelerator.id]}: accelerators['{accelerator.id}']: field 'scale_out': "
                f"expected the id of an inter_node interconnect, found {scale_out!r}"
            )
    for price in sections["prices"].values():
        if price.accelerator is not None and price.accelerator not in sections["accelerators"]:
            raise RegistryError(
                f"{origin['prices', price.id]}: prices['{price.id}']: field 'accelerator': "
                f"expected an accelerator id, found {price.accelerator!r}"
            )


def schema_text() -> str:
    """The JSON schema as the text written to ``docs/registry.schema.json``."""
    return json.dumps(registry_json_schema(), indent=2, sort_keys=True) + "\n"
