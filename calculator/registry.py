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

The entry models, their field types and the JSON-schema export live in :mod:`calculator._registry_schema`;
their public names are this module's, where callers import them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from ._files import cached_document, keep_document, load_yaml, read_text
from ._paths import REGISTRY_FILE
from ._registry_schema import (  # noqa: F401 (re-exported: the schema's public names are this module's)
    ALIAS_PATTERN,
    FLAG_PATTERN,
    ID_PATTERN,
    OPTION_PATTERN,
    RELEASE_PATTERN,
    REPOSITORY_PATTERN,
    SECTIONS,
    Accelerator,
    Alias,
    ByteRate,
    Bytes,
    Checkpoint,
    Count,
    Duration,
    Engine,
    EngineInterval,
    Entry,
    FlopRate,
    GraphBatchTier,
    HourlyPrice,
    Identifier,
    Interconnect,
    MemoryFractionRule,
    Model,
    PositiveInt,
    Power,
    Precision,
    Price,
    RegistryFile,
    Release,
    Source,
    SourceLink,
    TokenBudgetTier,
    registry_json_schema,
    schema_text,
)
from .errors import RegistryError, UnknownEntryError
from .results import Result
from .units import shown

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
# The loaded registry


def _normalise(name: str) -> str:
    """A name as lookups compare it: lower case, spaces and ``_`` read as ``-`` (``"RTX PRO 6000"``, ``"h100_sxm"``)."""
    return re.sub(r"\s+", "-", name.strip().lower()).replace("_", "-")


class Section(Mapping[str, Any]):
    """A read-only mapping from id to entry.

    Lookups also accept an entry's aliases, ignoring case and reading ``_`` and spaces as ``-``
    (``"meta-llama/Llama-3.1-70B"``, ``"H100_SXM"``, ``"RTX PRO 6000"``), then a model's checkpoint repositories
    (``"nvidia/Qwen3-235B-A22B-NVFP4"``), then any of those names without its organization where only one
    entry has it (``"DeepSeek-R1"``, ``"Llama-3.3-70B-Instruct"``); iteration yields ids only. A missing key
    raises :class:`UnknownEntryError` listing the known ids.
    """

    def __init__(self, kind: str, entries: Mapping[str, Any]) -> None:
        self._kind = kind
        self._entries = MappingProxyType(dict(entries))
        self._names: dict[str, str] = {}  # the ids and aliases
        for entry_id, entry in entries.items():
            for name in (entry_id, *getattr(entry, "aliases", ())):
                self._names.setdefault(_normalise(name), entry_id)
        # and the checkpoints' repositories, then every name without its organization: a name two entries share
        # names neither
        self._derived = dict(self._names)
        repositories: dict[str, set[str]] = {}
        for entry_id, entry in entries.items():
            for checkpoint in getattr(entry, "checkpoints", ()):
                repositories.setdefault(_normalise(checkpoint.repo), set()).add(entry_id)
        self._add_unshared(repositories)
        short: dict[str, set[str]] = {}
        for name, entry_id in self._derived.items():
            if "/" in name:
                short.setdefault(name.rsplit("/", 1)[1], set()).add(entry_id)
        self._add_unshared(short)

    def _add_unshared(self, owners: dict[str, set[str]]) -> None:
        """Derived names, each where one entry has it (an id or alias of another keeps it)."""
        for name, ids in owners.items():
            if len(ids) == 1:
                self._derived.setdefault(name, next(iter(ids)))

    def resolve(self, key: str, *, given: bool = False) -> str | None:
        """The id that ``key`` names, or ``None``; ``given``: only an id or an alias (not a derived name).

        An entry a user file adds takes its id and aliases from another entry's derived names.
        """
        if key in self._entries:
            return key
        if not isinstance(key, str):
            return None
        return (self._names if given else self._derived).get(_normalise(key))

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
    given twice, every parser failure a RegistryError); a text parsed before is read back from the cache
    (:func:`calculator._files.cached_document`) and checked again like a new one.
    """
    source = _read_user_text(file) if text is None else text
    document = cached_document(source)
    fresh = document is None
    if fresh:
        document = load_yaml(source, file.name, RegistryError)
    if document is None:  # an empty file (or only comments): nothing to add, most likely the wrong file
        raise RegistryError(
            f"{file.name}: the file is empty; a registry file lists accelerators, interconnects, models, prices "
            "or sources (examples/my_registry.yaml is a minimal one)"
        )
    _check_expansion(file, document)
    if fresh:
        keep_document(source, document)  # after the expansion check: JSON writes every alias out in full
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


def _check_scale_up(accelerator: Any, links: dict[str, Any], origin: dict[tuple[str, str], str]) -> None:
    """A mesh scale-up link: an intra-node interconnect, its links per GPU and domain size given, and no NVLink."""
    where = f"{origin['accelerators', accelerator.id]}: accelerators['{accelerator.id}']"
    mesh = accelerator.scale_up
    if mesh is None:
        if accelerator.scale_up_links is not None:
            raise RegistryError(f"{where}: field 'scale_up_links': given without a 'scale_up' interconnect")
        return
    if mesh not in links or links[mesh].scope != "intra_node":
        raise RegistryError(f"{where}: field 'scale_up': expected the id of an intra_node interconnect, found {mesh!r}")
    if accelerator.nvlink_bandwidth is not None:
        raise RegistryError(f"{where}: field 'scale_up': an accelerator with NVLink takes nvlink_bandwidth, not a mesh")
    for name in ("scale_up_links", "node_gpus"):
        if getattr(accelerator, name) is None:
            raise RegistryError(f"{where}: field '{name}': required with a 'scale_up' mesh (links per GPU, GPUs in it)")
    if accelerator.scale_up_links < accelerator.node_gpus - 1:
        raise RegistryError(
            f"{where}: field 'scale_up_links': a fully connected mesh of {accelerator.node_gpus} GPUs needs at least "
            f"{accelerator.node_gpus - 1} links per GPU, found {accelerator.scale_up_links}"
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
        _check_scale_up(accelerator, links, origin)
    for engine in sections["engines"].values():
        unknown = [device for device in engine.gpu_time_scale if device not in sections["accelerators"]]
        if unknown:
            raise RegistryError(
                f"{origin['engines', engine.id]}: engines['{engine.id}']: field 'gpu_time_scale': "
                f"expected accelerator ids, found {unknown[0]!r}"
            )
    for price in sections["prices"].values():
        if price.accelerator is not None and price.accelerator not in sections["accelerators"]:
            raise RegistryError(
                f"{origin['prices', price.id]}: prices['{price.id}']: field 'accelerator': "
                f"expected an accelerator id, found {price.accelerator!r}"
            )
