"""The registry's schema: the pydantic models of its entries, their field types, and the JSON-schema export.

:mod:`calculator.registry` reads the files and holds the loaded registry; this module declares what an
entry is (:class:`Entry` and its sections' subclasses, :data:`SECTIONS`) and exports the layout of a
registry file as a JSON schema (:func:`registry_json_schema`, :func:`schema_text`). Every public name
here is re-exported by :mod:`calculator.registry`, where callers import it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
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
    WithJsonSchema,
    model_validator,
)

from .errors import RegistryError, UnitsError
from .precision import PRECISIONS, check_precision
from .units import parse_quantity, shown, ureg

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
        if isinstance(value, tuple) and all(isinstance(v, BaseModel) for v in value):  # a release range's tiers
            value = "[" + "; ".join(map(_record_text, value)) + "]"
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
    scale_up: Identifier | None = Field(
        None,
        description="id of the intra-node interconnect between the GPUs of a scale-up domain where that is not NVLink: "
        "a fully connected mesh, one such link between each pair of GPUs (AMD Infinity Fabric)",
    )
    scale_up_links: Annotated[int, Field(ge=1, le=1_000)] | None = Field(
        None, description="links of the scale_up mesh per GPU (a collective over k GPUs uses k - 1 of them)"
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


#: How a checkpoint stores quantized weights (``Checkpoint.format``, ``Engine.checkpoint_format``).
CheckpointFormat = Literal["modelopt", "compressed-tensors", "awq", "gptq", "fp8-block", "mxfp4"]


class Checkpoint(_Strict):
    """A published checkpoint of a model's weights at one precision (the repository a launch config loads).

    ``kv_cache`` is the KV-cache precision the checkpoint declares (ModelOpt ``kv_cache_quant_algo``,
    compressed-tensors ``kv_cache_scheme``); ``None`` where it declares none or the declaration was not
    verified (engines then follow their own rule: ``performance.kv_cache_precision``).
    """

    precision: Precision
    repo: str = Field(pattern=rf"^{REPOSITORY_PATTERN}$")
    format: CheckpointFormat = Field(
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
    sliding_window: PositiveInt | None = Field(
        None, description="tokens a sliding-window attention layer attends to and keeps in its KV cache"
    )
    sliding_window_layers: PositiveInt | None = Field(
        None, description="how many of the layers attend through the sliding window (the others attend to everything)"
    )
    # ---- fields added by sparse: chunked-local attention (Llama 4) and indexed sparse attention (DSA)
    attention_chunk: PositiveInt | None = Field(
        None,
        description="tokens of an attention chunk: a chunked-local layer's query attends only to the tokens of its "
        "own chunk, and the layer keeps at most one chunk in its KV cache (Llama 4's attention_chunk_size)",
    )
    chunked_layers: PositiveInt | None = Field(
        None, description="how many of the layers attend within chunks (the others attend to everything)"
    )
    index_topk: PositiveInt | None = Field(
        None,
        description="indexed sparse attention (DeepSeek Sparse Attention): the tokens an indexer selects for each "
        "query to attend to; the KV cache keeps every token",
    )
    index_heads: PositiveInt | None = Field(None, description="the indexer's query heads (index_n_heads)")
    index_head_dim: PositiveInt | None = Field(
        None, description="the width of the indexer's key (one per token and layer, cached) and of its query heads"
    )
    # ---- end of the fields added by sparse
    # ---- fields added by gemma4: full-attention layers with a KV shape of their own beside the sliding ones
    global_kv_heads: PositiveInt | None = Field(
        None,
        description="KV heads of the full-attention layers of a sliding-window model whose full layers have a shape of "
        "their own (Gemma 4's num_global_key_value_heads); kv_heads and head_dim are then the windowed layers'",
    )
    global_head_dim: PositiveInt | None = Field(
        None, description="head width of those full-attention layers' queries, keys and values (global_head_dim)"
    )
    # ---- end of the fields added by gemma4
    checkpoints: tuple[Checkpoint, ...] = Field(
        (), description="quantized checkpoints of the weights, each with its own source (the launch configs load them)"
    )
    mtp_layers: PositiveInt | None = Field(
        None,
        description="multi-token-prediction layers the checkpoint holds beside the model's own (config.json "
        "num_nextn_predict_layers); speculative decoding can draft with them (Speculation method 'mtp')",
    )
    # ---- added by models (issue 54): a multimodal model's vision encoder
    vision_parameters: PositiveInt | None = Field(
        None,
        description="weights of the model's vision encoder and projector, beside parameters (the language model): "
        "held in memory at 16 bits; text is served through the language model and per-image prefill work is not "
        "priced",
    )
    # ---- hybrid models (helper "hybrid"): layers that keep a fixed state per sequence instead of a KV cache
    attention_layers: PositiveInt | None = Field(
        None,
        description="hybrid models: how many of the layers attend and keep a KV cache (None: all of them)",
    )
    state_kind: Literal["mamba2", "gated_deltanet"] | None = Field(
        None,
        description="hybrid models: the state layers' mixer. mamba2 (Nemotron-H): each layer is one block, a Mamba-2 "
        "mixer, an attention or an MLP/MoE block; gated_deltanet (Qwen3-Next, Qwen3.5): every layer has an MLP/MoE "
        "after its attention or its Gated DeltaNet",
    )
    state_layers: PositiveInt | None = Field(
        None, description="hybrid models: how many layers keep a fixed state per sequence (Mamba-2, Gated DeltaNet)"
    )
    state_heads: PositiveInt | None = Field(
        None, description="state layers: heads (Mamba-2 mamba_num_heads; Gated DeltaNet linear_num_value_heads)"
    )
    state_head_dim: PositiveInt | None = Field(
        None, description="state layers: a head's width (Mamba-2 mamba_head_dim; Gated DeltaNet linear_value_head_dim)"
    )
    state_key_dim: PositiveInt | None = Field(
        None,
        description="state layers: the state's other dimension per head (Mamba-2 ssm_state_size; Gated DeltaNet "
        "linear_key_head_dim)",
    )
    state_groups: PositiveInt | None = Field(
        None,
        description="state layers: groups sharing the B/C (key/query) projections (Mamba-2 n_groups; Gated DeltaNet "
        "linear_num_key_heads)",
    )
    conv_kernel: PositiveInt | None = Field(
        None, description="state layers: the short convolution's width (its state keeps the last kernel - 1 inputs)"
    )
    state_precision: Precision | None = Field(
        None,
        description="the recurrent state's precision as the engines keep it (vLLM: config mamba_ssm_cache_dtype for "
        "Nemotron-H, else float16; the model's dtype for Gated DeltaNet, mamba_ssm_dtype for Qwen3.5's multimodal "
        "classes); the convolution state is 16-bit",
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
        "mtp_layers": (1, 64, ""),
        "vision_parameters": (1e5, 1e11, ""),
        "global_kv_heads": (1, 100_000, ""),
        "global_head_dim": (1, 65_536, ""),
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
        if (self.sliding_window is None) != (self.sliding_window_layers is None):
            raise ValueError("sliding_window and sliding_window_layers go together: give both or neither")
        if (
            self.sliding_window_layers is not None
            and self.layers is not None
            and self.sliding_window_layers > self.layers
        ):
            raise ValueError(
                f"sliding_window_layers ({self.sliding_window_layers}) cannot exceed layers ({self.layers})"
            )
        self._sparse_consistent()
        self._hybrid_consistent()
        self._global_consistent()
        return self

    def _global_consistent(self) -> None:
        """Full-attention layers of their own shape (added by gemma4): both fields, beside sliding-window layers."""
        if (self.global_kv_heads is None) != (self.global_head_dim is None):
            raise ValueError("global_kv_heads and global_head_dim go together: give both or neither")
        if self.global_kv_heads is None:
            return
        if self.sliding_window_layers is None or self.sliding_window_layers == self.layers:
            raise ValueError(
                "global_kv_heads and global_head_dim shape the full-attention layers beside sliding-window ones: they "
                "need sliding_window and sliding_window_layers below layers"
            )
        heads = self.attention_heads
        assert heads is not None  # a transformer's (checked before)
        if heads % self.global_kv_heads:
            raise ValueError(f"global_kv_heads ({self.global_kv_heads}) must divide attention_heads ({heads})")
        if self.attention == "mla":
            raise ValueError("global_kv_heads and global_head_dim need attention mha, gqa or mqa, found 'mla'")

    @property
    def global_layers(self) -> int:
        """Full-attention layers with a KV shape of their own (``global_kv_heads``); 0 without one."""
        if self.global_kv_heads is None:
            return 0
        return int(self.kv_layers - (self.sliding_window_layers or 0))

    def _sparse_consistent(self) -> None:
        """Chunked-local and indexed sparse attention: their fields go together (added by sparse)."""
        if (self.attention_chunk is None) != (self.chunked_layers is None):
            raise ValueError("attention_chunk and chunked_layers go together: give both or neither")
        if self.chunked_layers is not None and self.layers is not None and self.chunked_layers > self.layers:
            raise ValueError(f"chunked_layers ({self.chunked_layers}) cannot exceed layers ({self.layers})")
        if self.attention_chunk is not None and self.sliding_window is not None:
            raise ValueError("a model has either sliding_window or attention_chunk, not both")
        index = (self.index_topk, self.index_heads, self.index_head_dim)
        if any(v is not None for v in index) and any(v is None for v in index):
            raise ValueError("index_topk, index_heads and index_head_dim go together: give all three or none")
        if self.index_topk is not None and self.attention != "mla":
            raise ValueError(f"index_topk (indexed sparse attention) needs attention 'mla', found {self.attention!r}")

    _STATE_FIELDS: ClassVar[tuple[str, ...]] = (
        "attention_layers", "state_kind", "state_layers", "state_heads", "state_head_dim", "state_key_dim",
        "state_groups", "conv_kernel", "state_precision",
    )  # fmt: skip

    def _hybrid_consistent(self) -> None:
        """A hybrid's state fields all given or none, and its attention and state layers within ``layers``."""
        given = [f for f in self._STATE_FIELDS if getattr(self, f) is not None]
        if not given:
            return
        missing = [f for f in self._STATE_FIELDS if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a hybrid model gives every state field: {given} given, {missing} missing")
        assert self.attention_layers is not None and self.state_layers is not None and self.layers is not None
        if self.attention_layers + self.state_layers > self.layers:
            raise ValueError(
                f"attention_layers ({self.attention_layers}) and state_layers ({self.state_layers}) cannot exceed "
                f"layers ({self.layers})"
            )
        if self.sliding_window is not None:
            raise ValueError("a hybrid model with sliding-window layers is not expressed (state fields and windows)")

    @property
    def kv_layers(self) -> int:
        """The layers that keep a KV cache: ``attention_layers`` of a hybrid, else every layer."""
        return int(self.attention_layers or self.layers or 0)

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
        _ascending(self.graph_batch, "graph_batch")
        return self


#: An engine release, ``major.minor`` (or ``major.minor.patch``).
RELEASE_PATTERN = r"^[0-9]{1,4}(\.[0-9]{1,4}){1,2}$"
Release = Annotated[str, Field(pattern=RELEASE_PATTERN)]


def _ascending(tiers: tuple[Any, ...] | None, what: str) -> None:
    """Refuse tiers (token budget, graph batch) not listed from the smallest ``min_device_memory`` up."""
    memory = [t.min_device_memory.m_as("B") if t.min_device_memory else 0.0 for t in tiers or ()]
    if memory != sorted(memory):
        raise ValueError(f"{what} tiers must be listed from the smallest min_device_memory up")


class EngineRelease(_Strict):
    """An engine's defaults from release ``since`` until the next range's (each stated where it was read).

    A field left out keeps the entry's own value (``token_budget``, ``chunked_prefill``, ``overlap_scheduler``, or
    the scheduling its ``async_scheduling_since`` dates); ``note`` names the file and function read and the
    releases it was read in.
    """

    since: Release = Field(description="the first release read with these defaults")
    token_budget: tuple[TokenBudgetTier, ...] | None = Field(
        None, description="token budget and sequence cap by device memory (none: the entry's token_budget)"
    )
    chunked_prefill: bool | None = Field(
        None, description="a prompt longer than the budget is split (none: the entry's)"
    )
    overlap_scheduler: bool | None = Field(
        None,
        description="the scheduler builds the next iteration while the GPU runs this one by default (vLLM's "
        "asynchronous scheduling, SGLang's and TensorRT-LLM's overlap schedulers; none: the entry's, or by its "
        "async_scheduling_since)",
    )
    cuda_graph_batch: tuple[GraphBatchTier, ...] | None = Field(
        None,
        description="the largest decode batch captured in a CUDA graph by device memory (batch_from_tensor_parallel "
        "from graph_tensor_parallel GPUs); a larger batch runs without a graph",
    )
    graph_tensor_parallel: PositiveInt | None = Field(
        None, description="from this tensor-parallel degree, cuda_graph_batch's batch_from_tensor_parallel"
    )
    graph_padding: bool | None = Field(
        None,
        description="a batch below the largest captured runs padded to the next captured size (False: only the "
        "captured sizes run a graph, any other runs without one)",
    )
    note: str = Field(min_length=1, description="the file and function read, and the releases read")

    @model_validator(mode="after")
    def _tiers_ascend(self) -> EngineRelease:
        _ascending(self.token_budget, "token_budget")
        _ascending(self.cuda_graph_batch, "cuda_graph_batch")
        return self


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
    kv_block_tokens: Annotated[int, Field(ge=1, le=4096)] | None = Field(
        None,
        description="tokens per KV-cache block (page): a sequence holds whole blocks (none: not documented, "
        "counted in tokens as blocks of 1)",
    )
    mla_kv_block_tokens: Annotated[int, Field(ge=1, le=4096)] | None = Field(
        None,
        description="tokens per KV-cache block for a model with multi-head latent attention (none: kv_block_tokens)",
    )
    quantized_kv_precision: Literal["fp8", "bf16", "fp16"] = Field(
        description="KV-cache precision for FP8/FP4 weights whose checkpoint declares none in the registry"
    )
    checkpoint_format: CheckpointFormat | None = Field(
        None,
        description="the checkpoint format the engine's documentation runs quantized weights from, preferred where "
        "a model has checkpoints of one precision in several formats (None: none documented, the first listed)",
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
    fp4_gather: bool | None = Field(
        None,
        description="with 'gather_scatter', the ranks' tokens are all-gathered already quantized for NVFP4 experts "
        "(half a byte a value and an FP8 scale per 16 values) instead of at 16 bits; the outputs are reduce-scattered "
        "at 16 bits either way (None: not documented, 16 bits)",
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
    online_quantization: list[Precision] | None = Field(
        None,
        description="weight precisions the engine reaches from a 16-bit checkpoint at load time (its --quantization), "
        "loading the 16-bit weights first (None: none, it loads pre-quantized checkpoints only)",
    )
    draft_model_speculation: bool | None = Field(
        None,
        description="the engine runs speculative decoding with a separate draft model (None: not documented, it does)",
    )
    draft_model_since: Release | None = Field(
        None,
        description="the first release that runs a separate draft model (an older release is refused one); none: "
        "no release changed it",
    )
    uneven_experts: bool | None = Field(
        None,
        description="an expert-parallel degree that does not divide the routed experts runs without redundant copies, "
        "the first ranks holding one expert more (None: not documented, the placed experts must divide evenly)",
    )
    fitted_releases: list[Release] | None = Field(
        None,
        description="the releases whose benchmarks the fitted costs were fitted on (the campaigns' recorded "
        "versions); a prediction for another release says so and keeps the interval's unseen-release term",
    )
    releases: tuple[EngineRelease, ...] = Field(
        (),
        description="the defaults by release range, oldest first: for_release(version) takes the last range from "
        "its since on (a release before the first takes the first, and says so); none: one set for every release",
    )
    accelerator_vendors: tuple[str, ...] = Field(
        (), description="the vendors of the accelerators the engine runs on (empty: any); another vendor's is refused"
    )
    fitted_batch: int | None = Field(
        None,
        ge=1,
        description="the most sequences one replica ran in the benchmarks the fitted costs were fitted on; a "
        "prediction that runs more says its per-sequence cost is extrapolated and widens its low end",
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
    offline_sequence_overhead: Duration | None = Field(
        None,
        description="cost per running sequence per iteration of a run that does not stream its tokens (no response a "
        "token: the loop's host work alone), hidden behind the GPU where the scheduler overlaps it; none: streaming "
        "changes no cost (the engine builds its responses outside its loop)",
    )
    gpu_time_scale: Mapping[Identifier, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="factor on the GPU work of an iteration on an accelerator (by accelerator id), fitted by "
        "'servecalc calibrate' on benchmarks run there (none: 1, the kernels as measured)",
    )

    PLAUSIBLE: ClassVar[Mapping[str, tuple[float, float, str]]] = {
        "memory_reserve": (0, 10_000, "GB"),
        "step_overhead": (0, 10, "s"),
        "sequence_overhead": (0, 1, "s"),
        "offline_sequence_overhead": (0, 1, "s"),
        "request_overhead": (0, 60, "s"),
        "gpu_time_scale": (0.1, 10, ""),
    }
    prediction_interval: EngineInterval | None = Field(
        None, description="the engine's own 80 % interval, from its calibration's held-out errors"
    )

    UNSOURCED: ClassVar[frozenset[str]] = Entry.UNSOURCED | {"versions", "display_name"}

    @model_validator(mode="after")
    def _tiers_ascend(self) -> Engine:
        _ascending(self.token_budget, "token_budget")
        since = [tuple(int(x) for x in r.since.split(".")) for r in self.releases]
        if since != sorted(set(since)):
            raise ValueError("field 'releases': the ranges must be listed oldest first, each from its own 'since'")
        stated = self.async_scheduling_since
        for release in self.releases:
            if stated is not None and release.overlap_scheduler is not None:
                after = tuple(int(x) for x in release.since.split(".")) >= tuple(int(x) for x in stated.split("."))
                if after != release.overlap_scheduler:
                    raise ValueError(
                        f"field 'releases': the range from {release.since} says overlap_scheduler "
                        f"{release.overlap_scheduler}, against async_scheduling_since {stated}"
                    )
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


def schema_text() -> str:
    """The JSON schema as the text written to ``docs/registry.schema.json``."""
    return json.dumps(registry_json_schema(), indent=2, sort_keys=True) + "\n"
