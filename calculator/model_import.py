"""A model the registry lacks, imported from its Hugging Face ``config.json`` (``servecalc registry import``).

:func:`import_model_config` reads a ``config.json`` (and optionally the ``model.safetensors.index.json`` beside it
and the checkpoint's ``hf_quant_config.json``), counts the parameters from the shapes, and returns (and writes)
a user-registry YAML document: one ``models:`` entry and the ``sources:`` entries naming the files it was read
from (kind ``model_config``). The document is validated by loading it over the registry, so
``load_registry(extra=[file])`` and ``--extra file`` accept it as it is. Architectures the registry's Model
cannot express (linear attention, Mamba layers, chunked or indexed sparse attention) are refused naming the
config field, never approximated; a vision encoder's weights are counted (``Model.vision_parameters``) and its
per-image work is left unpriced, as the entry's note says. docs/registry.md says what is read and how.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._files import load_json, read_text
from ._hf_config import (
    Counts,
    Quantization,
    Shape,
    architecture_of,
    count_parameters,
    read_quantization,
    read_shape,
    refuse_inexpressible,
    split_vision,
)
from ._support import registry_or_default
from .errors import InputError, RegistryError
from .results import Result
from .units import shown

if TYPE_CHECKING:
    from .registry import Model, Registry

__all__ = ["ImportedModel", "import_model_config"]

#: The largest file read (bytes): configs with long quantization lists run to 3 MB, a safetensors index of a
#: trillion-parameter MoE to about 12 MB.
MAX_IMPORT_BYTES = 32_000_000
#: The widest gap allowed between the parameters counted from the shapes and those the index's bytes imply.
INDEX_TOLERANCE = 0.01
#: What a model with a vision encoder's entry does and does not count (the import's note and its source link).
VISION_CAVEAT = (
    "The encoder's weights are counted in memory (at 16 bits whatever the checkpoint, split over the tensor-parallel "
    "group like the rest); text traffic is served through the language model, and each image's prefill work (the "
    "encoder's pass and the image's tokens) is not priced"
)
#: Bytes per stored parameter of an unquantized checkpoint, by the config's ``torch_dtype``.
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclasses.dataclass(frozen=True, repr=False)
class ImportedModel(Result):
    """A model imported from its ``config.json``: the validated entry, the YAML document, how it was counted.

    Attributes
    ----------
    model : Model
        The entry as the registry loads it (validated).
    text : str
        The user-registry YAML document (``load_registry(extra=[file])`` reads it).
    parameters_by_part : dict of str to int
        The counted parameters by part: ``embedding`` (input), ``lm_head`` (0 when tied), ``attention``,
        ``dense_mlp``, ``routed_experts``, ``shared_experts``, ``routers``, ``norms``; ``unused_experts`` is the
        routed experts' share a token does not read (``total - active``).
    index_parameters : float or None
        The parameters the safetensors index's ``metadata.total_size`` implies (None without an index).
    notes : tuple of str
        What was derived, assumed or left out, in words.
    """

    model: Model
    text: str
    parameters_by_part: dict[str, int]
    index_parameters: float | None
    notes: tuple[str, ...]


def import_model_config(
    config: str | Path,
    *,
    model_id: str | None = None,
    name: str | None = None,
    repo: str | None = None,
    index: str | Path | None = None,
    quant: str | Path | None = None,
    out: str | Path | None = None,
    registry: Registry | None = None,
) -> ImportedModel:
    """Import a model from its Hugging Face ``config.json`` as a validated user-registry entry.

    Parameters
    ----------
    config : str or Path
        The model's ``config.json``.
    model_id : str, optional
        The entry's id (default: the name part of ``repo``, else the file's name without ``config``). A derived
        id that is already a registry model's id or alias is refused: give one of your own.
    name : str, optional
        The entry's display name (default: ``repo``, else the id).
    repo : str, optional
        The Hugging Face repository the config belongs to, ``owner/name``: the entry's alias (where no registry
        model has it already) and the repository of the quantized checkpoint the entry lists.
    index : str or Path, optional
        The checkpoint's ``model.safetensors.index.json``: its ``metadata.total_size`` in bytes over the
        config's ``torch_dtype`` must match the counted parameters within 1 %.
    quant : str or Path, optional
        The checkpoint's ``hf_quant_config.json`` (ModelOpt), read instead of the config's ``quantization_config``.
    out : str or Path, optional
        Where to write the YAML document (not written without it).
    registry : Registry, optional
        The registry the entry must not collide with and is validated over (default: the packaged one).

    Returns
    -------
    ImportedModel

    Raises
    ------
    InputError
        A file that cannot be read or is not what it should be, a field out of range or missing, an
        architecture the import does not read or the registry cannot express (naming the field), an id that
        is taken, or an index that disagrees with the shapes.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
    ...     "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    ...     "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072}))
    >>> imported = import_model_config(folder / "config.json", repo="example/llama-8b-finetune")
    >>> imported.model.id, imported.model.parameters, imported.model.attention
    ('llama-8b-finetune', 8030261248, 'gqa')
    """
    reg = registry_or_default(registry, "import_model_config")
    path = _file("config", config)
    document, digest = _read_json(path, "config")
    label = f"config: {path.name}"
    refuse_inexpressible(document, label)
    language, vision = split_vision(document, label)
    text_label = f"{label}: text_config" if vision else label
    architecture, family = architecture_of(language, text_label)
    shape = read_shape(language, family, text_label)
    counts = count_parameters(shape)
    quantization, quant_file = _quantization(document, quant, label)
    if quantization is None and vision and quant_file is None and language.get("quantization_config") is not None:
        quantization = read_quantization(language["quantization_config"], f"{text_label}: quantization_config")
    notes = list(shape.notes) + _uncounted(language)
    index_parameters = None
    if index is not None:
        index_parameters, line = _index_check(
            _file("index", index), document, counts.total + (vision.parameters if vision else 0), quantization
        )
        notes.append(line)
    entry_id, repo_name = _entry_id(model_id, repo, path, reg), _repository(repo)
    files = [(path, digest, "config.json", "config")] + (
        [(*quant_file, "hf_quant_config.json", "quant-config")] if quant_file else []
    )
    sources = [_source(entry_id, file, sha, role, suffix, repo_name, reg) for file, sha, role, suffix in files]
    notes.append(_count_text(shape, counts))
    entry = _entry(entry_id, name or repo_name or entry_id, architecture, shape, counts, sources, notes[-1])
    if _mtp_layers(language):  # the model's own drafter for speculative decoding (Speculation(method="mtp"))
        entry["mtp_layers"] = _mtp_layers(language)
        entry["sources"][0]["fields"].append("mtp_layers")
    if vision is not None:
        notes.append(f"{vision.described}. {VISION_CAVEAT}")
        entry["vision_parameters"] = vision.parameters
        entry["sources"].append({"source": sources[0]["id"], "fields": ["vision_parameters"], "note": notes[-1]})
    _aliases_and_checkpoint(entry, repo_name, quantization, sources[-1]["id"], reg, notes)
    text = _document_text(path.name, sources, entry)
    model = _validated(text, entry_id, Path(out).name if out is not None else f"{entry_id}.yaml", reg, label)
    if out is not None:
        _write(out, text)
    parts = {f.name: getattr(counts, f.name) for f in dataclasses.fields(counts)}
    return ImportedModel(model, text, parts, index_parameters, tuple(notes))


# --------------------------------------------------------------------------------------------
# Files


def _file(argument: str, value: Any) -> Path:
    if not isinstance(value, str | Path) or not str(value):
        raise InputError(f"argument '{argument}' must be the path of a JSON file, got {shown(value)}")
    return Path(value)


def _read_json(path: Path, argument: str) -> tuple[dict[str, Any], str]:
    """The JSON object of ``path`` (bounded read, no key twice) and its text's SHA-256; errors name ``argument``."""
    text = read_text(path, MAX_IMPORT_BYTES, argument, InputError)
    document = load_json(text, f"{argument}: {path.name}", InputError)
    if not isinstance(document, dict):
        raise InputError(f"{argument}: {path.name}: expected a JSON object, found {type(document).__name__}")
    return document, hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write(out: str | Path, text: str) -> None:
    if not isinstance(out, str | Path) or not str(out):
        raise InputError(f"argument 'out' must be the path of the YAML file to write, got {shown(out)}")
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"argument 'out': cannot write {out} ({exc.strerror or type(exc).__name__})") from None


# --------------------------------------------------------------------------------------------
# What the files declare beyond the shapes


def _quantization(
    document: Mapping[str, Any], quant: Any, label: str
) -> tuple[Quantization | None, tuple[Path, str] | None]:
    """The checkpoint's precision: ``quant``'s file (with its path and hash), else the config's quantization_config."""
    if quant is not None:
        path = _file("quant", quant)
        file, digest = _read_json(path, "quant")
        return read_quantization(file, f"quant: {path.name}"), (path, digest)
    declared = document.get("quantization_config")
    if declared is None:
        return None, None
    if not isinstance(declared, Mapping):
        raise InputError(f"{label}: field 'quantization_config': expected an object, found {shown(declared)}")
    return read_quantization(declared, f"{label}: quantization_config"), None


def _mtp_layers(document: Mapping[str, Any]) -> int:
    """The multi-token-prediction layers declared (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``; 0: none)."""
    extra = document.get("num_nextn_predict_layers", document.get("mtp_num_hidden_layers"))
    return extra if isinstance(extra, int) and not isinstance(extra, bool) and extra > 0 else 0


def _uncounted(document: Mapping[str, Any]) -> list[str]:
    """What the checkpoint stores but the count leaves out (multi-token-prediction layers)."""
    extra = _mtp_layers(document)
    if extra:
        key = "num_nextn_predict_layers" if "num_nextn_predict_layers" in document else "mtp_num_hidden_layers"
        return [
            f"{key} {extra}: the multi-token-prediction layer(s) the checkpoint also stores are "
            "not counted (a speculative draft, not the served model; the published totals leave them out too)"
        ]
    return []


def _index_check(
    path: Path, document: Mapping[str, Any], total: int, quantization: Quantization | None
) -> tuple[float, str]:
    """The parameters the index's bytes imply, checked against the count within :data:`INDEX_TOLERANCE`."""
    index, _ = _read_json(path, "index")
    metadata = index.get("metadata")
    size = metadata.get("total_size") if isinstance(metadata, Mapping) else None
    if isinstance(size, bool) or not isinstance(size, int | float) or not size > 0:
        raise InputError(
            f"index: {path.name}: field 'metadata.total_size': expected a positive byte count, found {shown(size)}"
        )
    if quantization is not None:
        raise InputError(
            f"index: {path.name}: the checkpoint is quantized ({quantization.described}): its bytes mix "
            "precisions and scales and do not convert to a parameter count; give the 16-bit checkpoint's index or none"
        )
    dtype = document.get("torch_dtype", document.get("dtype"))
    if dtype not in _DTYPE_BYTES:
        raise InputError(
            f"index: {path.name}: the config's torch_dtype is {shown(dtype)}, so total_size does not convert to "
            f"parameters; expected one of {sorted(_DTYPE_BYTES)}"
        )
    implied = float(size) / _DTYPE_BYTES[dtype]
    gap = abs(total - implied) / implied
    stated = (
        f"index {path.name}: total_size {size:,.0f} B / {_DTYPE_BYTES[dtype]} B ({dtype}) = {implied:,.0f} parameters; "
        f"the shapes count {total:,} ({gap:.3%} apart)"
    )
    if gap > INDEX_TOLERANCE:
        hint = " (the index holds the multi-token-prediction layers too)" if _uncounted(document) else ""
        raise InputError(f"{stated}, more than {INDEX_TOLERANCE:.0%}: the config does not describe these weights{hint}")
    return implied, stated


# --------------------------------------------------------------------------------------------
# The entry


def _entry_id(model_id: Any, repo: Any, path: Path, registry: Registry) -> str:
    """The entry's id: ``model_id``, else derived from ``repo`` or the file name; one the registry uses is refused."""
    from .registry import ID_PATTERN

    if model_id is not None:
        if not isinstance(model_id, str) or len(model_id) > 80 or not re.fullmatch(ID_PATTERN, model_id):
            raise InputError(
                "argument 'model_id' (--id) must be a lowercase id (a-z, 0-9, '.', '_' and '-', at most 80 "
                f"characters), got {shown(model_id)}"
            )
        chosen, how = model_id, "argument 'model_id' (--id)"
    else:
        base = (
            _repository(repo).split("/")[-1]
            if repo is not None
            else re.sub(r"[-_.]?config$", "", path.stem, flags=re.I)
        )
        chosen = re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-._")[:80].strip("-._")
        how = f"the id {chosen!r}, derived from {'--repo' if repo is not None else 'the file name'},"
        if not chosen:
            raise InputError(f"config: {path.name}: no id can be derived from the file name; give one (model_id, --id)")
    for section in ("models", "accelerators", "interconnects", "prices", "engines"):
        taken = registry.section(section).resolve(chosen, given=True)
        if taken is not None:
            raise InputError(
                f"{how} already names the registry's {section}[{taken!r}]; give an id of your own (model_id, --id): "
                "an entry with a registry id would override that entry's fields instead of adding a model"
            )
    return chosen


def _repository(repo: Any) -> str:
    from .registry import REPOSITORY_PATTERN

    if repo is None:
        return ""
    if not isinstance(repo, str) or not re.fullmatch(REPOSITORY_PATTERN, repo):
        raise InputError(f"argument 'repo' (--repo) must be a Hugging Face repository 'owner/name', got {shown(repo)}")
    return repo


def _source(
    entry_id: str, path: Path, digest: str, role: str, suffix: str, repo: str, registry: Registry
) -> dict[str, Any]:
    source_id = f"{entry_id}-{suffix}"
    if source_id in registry.sources:
        raise InputError(f"the source id {source_id!r} is the registry's already; give another id (model_id, --id)")
    of = f"Hugging Face repository {repo}" if repo else "the imported model"
    return {
        "id": source_id,
        "title": f"{role} of {of}, read by servecalc registry import",
        "url": f"https://huggingface.co/{repo}/blob/main/{role}" if repo else f"file:{path.name}",
        "kind": "model_config",
        "note": f"Read from the file {path.name} (the SHA-256 of its text: {digest}).",
    }


def _entry(
    entry_id: str, name: str, architecture: str, s: Shape, counts: Counts, sources: list[dict[str, Any]], counted: str
) -> dict[str, Any]:
    """The ``models:`` entry of the shapes and counts, its values cited to the config's source."""
    mla = s.architecture.mla
    attention = "mla" if mla else "mha" if s.kv_heads == s.heads else "mqa" if s.kv_heads == 1 else "gqa"
    fields: dict[str, Any] = {
        "layers": s.layers, "hidden_size": s.hidden,
        "intermediate_size": s.expert_intermediate if s.moe_layers else s.intermediate,
        "attention_heads": s.heads, "kv_heads": s.kv_heads, "head_dim": s.head_dim, "attention": attention,
        "vocab_size": s.vocab, "max_context": s.max_context,
    }  # fmt: skip
    if mla:
        fields |= {
            "kv_lora_rank": s.kv_lora,
            "qk_rope_head_dim": s.rope,
            "qk_nope_head_dim": s.nope,
            "v_head_dim": s.value,
        }
        fields |= {"q_lora_rank": s.q_lora} if s.q_lora else {}
    if s.window is not None:
        fields |= {"sliding_window": s.window, "sliding_window_layers": s.window_layers}
    if s.chunk is not None:
        fields |= {"attention_chunk": s.chunk, "chunked_layers": s.chunk_layers}
    if s.index_topk:
        fields |= {"index_topk": s.index_topk, "index_heads": s.index_heads, "index_head_dim": s.index_head_dim}
    if s.hybrid is not None:
        fields |= _hybrid_fields(s)
    if s.global_layers:
        fields |= {"global_kv_heads": s.global_kv_heads, "global_head_dim": s.global_head_dim}
    shaped = [key for key, value in fields.items() if value is not None]
    return {
        "id": entry_id, "name": name, "provenance": "user", "kind": "transformer",
        "parameters": counts.total, "active_parameters": counts.active,
        **{key: fields[key] for key in shaped},
        "experts": s.experts, "experts_per_token": s.experts_per_token, "shared_experts": s.shared_experts,
        "sources": [
            {"source": sources[0]["id"], "fields": shaped, "note": _shape_text(architecture, s, attention)},
            {"source": sources[0]["id"], "fields": ["parameters", "active_parameters"], "note": counted},
        ],
    }  # fmt: skip


def _hybrid_fields(s: Shape) -> dict[str, Any]:
    """A hybrid's state fields: its attention and state layers and the state's shapes."""
    hy = s.hybrid
    return {
        "attention_layers": hy.kinds["*"], "state_kind": hy.kind, "state_layers": hy.kinds["M"],
        "state_heads": hy.state_heads, "state_head_dim": hy.state_head_dim, "state_key_dim": hy.state_key_dim,
        "state_groups": hy.state_groups, "conv_kernel": hy.conv_kernel, "state_precision": hy.state_precision,
    }  # fmt: skip


def _shape_text(architecture: str, s: Shape, attention: str) -> str:
    """How the entry's shape fields were read, in words (the source link's note)."""
    parts = [f"{architecture} ({s.architecture.label}): {s.layers} layers, hidden {s.hidden}"]
    if s.architecture.mla:
        parts.append(
            f"MLA: {s.heads} heads, latent kv_lora_rank {s.kv_lora} + rotary key qk_rope_head_dim {s.rope} cached per "
            f"token and layer; head_dim records qk_nope_head_dim {s.nope}"
        )
    else:
        parts.append(f"{s.heads} heads and {s.kv_heads} KV heads of {s.head_dim} => {attention}")
    if s.moe_layers:
        dense = s.hybrid.kinds["-"] if s.hybrid is not None else s.layers - s.moe_layers
        parts.append(
            f"{s.moe_layers} MoE layers of {s.experts} routed experts ({s.experts_per_token} per token, "
            f"{s.shared_experts} shared) of width {s.expert_intermediate} (intermediate_size records it)"
            + (f", {dense} dense layers of width {s.intermediate}" if dense else "")
        )
    if s.index_topk:
        parts.append(
            f"indexed sparse attention: an indexer of {s.index_heads} heads of {s.index_head_dim} picks "
            f"index_topk {s.index_topk} tokens per query"
        )
    if s.chunk is not None:
        parts.append(f"{s.chunk_layers} layers attend within attention_chunk_size {s.chunk}-token chunks")
    if s.hybrid is not None:
        hy = s.hybrid
        kinds, mixer = hy.kinds, "Mamba-2" if hy.kind == "mamba2" else "Gated DeltaNet"
        parts.append(
            f"layers: {kinds['M']} {mixer}, {kinds['*']} attention; {kinds['-']} MLP, {kinds['E']} MoE; state "
            f"{hy.state_heads} heads x {hy.state_head_dim} x {hy.state_key_dim} at {hy.state_precision}, "
            f"{hy.state_groups} groups (key heads), conv_kernel {hy.conv_kernel}"
        )
    parts.append(f"tie_word_embeddings {str(s.tied).lower()}")
    parts += list(s.notes)
    return "; ".join(parts) + "."


def _count_text(s: Shape, c: Counts) -> str:
    """The parameter count by part, in words (the parameters' source link note)."""
    parts = ", ".join(
        f"{label} {value:,}"
        for label, value in (
            ("embedding", c.embedding), ("LM head", c.lm_head), ("attention", c.attention), ("dense MLP", c.dense_mlp),
            ("routed experts", c.routed_experts), ("shared experts", c.shared_experts), ("routers", c.routers),
            ("norms", c.norms), ("state mixers", c.state), ("latent projections", c.latent),
        )
        if value
    )  # fmt: skip
    active = (
        f"active {c.active:,}: all but the routed experts a token skips ({s.experts - s.experts_per_token} of "
        f"{s.experts} in each of {s.moe_layers} MoE layers), the input embedding included ({c.active - c.embedding:,} "
        "without it, as some model cards count active parameters)"
        if s.moe_layers
        else f"active {c.active:,} (dense: all of them)"
    )
    return f"Counted from the config's shapes: {parts}; total {c.total:,}; {active}."


def _aliases_and_checkpoint(
    entry: dict[str, Any],
    repo: str,
    quantization: Quantization | None,
    source: str,
    registry: Registry,
    notes: list[str],
) -> None:
    """The repository as the entry's alias, and the quantized checkpoint it names (both need ``repo``)."""
    if repo:
        taken, derived = registry.models.resolve(repo, given=True), registry.models.resolve(repo)
        if taken is None:
            entry["aliases"] = [repo]
            if derived is not None:  # a checkpoint's repository, or a name without its organization
                notes.append(f"{repo} named the registry's model {derived!r} too (not an id or alias): now this entry")
        else:
            notes.append(f"{repo} already names the registry's model {taken!r}: not added as this entry's alias")
    if quantization is None:
        return
    if not repo:
        notes.append(
            f"the checkpoint is quantized ({quantization.described}) but no repository was given (repo, --repo): "
            f"the entry lists no {quantization.precision} checkpoint, so a launch config would quantize online"
        )
        return
    checkpoint = {"precision": quantization.precision, "repo": repo, "format": quantization.format, "source": source,
                  "note": quantization.described}  # fmt: skip
    if quantization.kv_cache is not None:
        checkpoint["kv_cache"] = quantization.kv_cache
    entry["checkpoints"] = [checkpoint]
    kv = quantization.kv_cache or "not declared"
    notes.append(f"checkpoint {repo}: {quantization.precision} weights, KV cache {kv}")


def _document_text(file_name: str, sources: list[dict[str, Any]], entry: dict[str, Any]) -> str:
    import yaml

    header = (
        f"# {entry['id']}: imported from {file_name} by servecalc registry import (docs/registry.md).\n"
        "# Load it with --extra FILE (load_registry(extra=[FILE])).\n"
    )
    body = {"schema_version": 1, "sources": sources, "models": [entry]}
    return header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110, default_flow_style=None)


def _validated(text: str, entry_id: str, file_name: str, registry: Registry, label: str) -> Model:
    """The entry of ``text`` as the registry loads it over ``registry`` (which it must not break)."""
    from .registry import RegistryDocument, load_registry

    try:
        loaded = load_registry(registry.files[0], [*registry.user_documents, RegistryDocument(file_name, text)])
    except RegistryError as exc:
        raise InputError(f"{label}: the entry imported from it is not a valid registry entry: {exc}") from None
    return loaded.models[entry_id]
