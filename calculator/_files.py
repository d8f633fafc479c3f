"""Reading the files a user hands the calculator: bounded, regular files only, no duplicate keys.

Every file the calculator reads on a user's behalf (registry files, plans, traces, demand curves,
benchmark results for calibration) goes through :func:`read_bytes` or :func:`read_text`: the file is
opened once, refused unless it is a regular file (``/dev/zero``, a FIFO or a directory would read
forever, block or fail later), and at most ``limit + 1`` bytes are read, so a file over its cap is
refused without being loaded. YAML and JSON documents are parsed by :func:`load_yaml` and
:func:`load_json`, which refuse a key given twice in one mapping (the last value would win silently),
and turn every parser failure (deep nesting, an integer of thousands of digits, an invalid date) into
the caller's error class with a one-line reason: the line and column, and at most the key at fault
(cut to 80 characters), never the file's lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError

#: PyYAML's safe loader, in C (libyaml) where PyYAML was built with it: the same constructors as
#: ``yaml.safe_load``, ten times faster on the packaged registry (about 14 ms against 140 ms).
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: The largest CSV table read from a user's file (bytes): a request trace or a demand curve; a larger
#: file is refused before it is parsed. 100 MB holds the simulator's 2,000,000 requests
#: (``simulation.MAX_REQUESTS``) at 50 bytes a row (a time, two lengths and a few more columns); a 99 MB
#: trace of 1.8 million rows (four columns) is read and checked in about 3 s and 250 MB.
MAX_TABLE_BYTES = 100_000_000
#: How much :func:`read_bytes` reads at a time.
_PIECE = 1 << 20


def read_bytes(
    path: str | Path, limit: int, what: str, error: type[Exception] = InputError, *, raise_limit: str = ""
) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; anything else raises ``error`` naming ``what``.

    ``raise_limit`` says, in the message for a file over the limit, how a user raises it.

    The size is read from what arrives, not from ``stat`` (which says 0 for a device), and the file is
    checked through the descriptor that is read (no window between the check and the read).

    Examples
    --------
    >>> read_bytes("/dev/zero", 10, "the trace")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calculator.errors.InputError: the trace: /dev/zero is not a regular file (a device, a pipe or a folder ...)
    """
    name = str(path)
    try:
        descriptor = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise error(f"{what}: cannot read {name} ({exc.strerror or type(exc).__name__})") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise error(f"{what}: {name} is not a regular file (a device, a pipe or a folder cannot be read)")
        with os.fdopen(descriptor, "rb") as handle:  # in pieces: no buffer of the cap's size up front
            pieces, size = [], 0
            while size <= limit:
                piece = handle.read(min(_PIECE, limit + 1 - size))
                if not piece:
                    break
                pieces.append(piece)
                size += len(piece)
            data = b"".join(pieces)
    except OSError as exc:
        raise error(f"{what}: cannot read {name} ({exc.strerror or type(exc).__name__})") from None
    if len(data) > limit:
        more = f" ({raise_limit})" if raise_limit else ""
        raise error(f"{what}: {name} has more than {limit:,} bytes, the most that is read{more}")
    return data


def read_text(
    path: str | Path, limit: int, what: str, error: type[Exception] = InputError, *, raise_limit: str = ""
) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark is dropped); other bytes raise ``error``."""
    data = read_bytes(path, limit, what, error, raise_limit=raise_limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{what}: {path} is not UTF-8 text (byte {exc.start:,} cannot be decoded)") from None


class _UniqueKeyLoader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader, refusing a key given twice in one mapping."""


def _unique_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # '<<' merges: later explicit keys may override them
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: the constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {str(key)[:80]!r} is given twice in one mapping", key_node.start_mark
            )
    return loader.construct_mapping(node, deep=deep)


def _unique_yaml_mapping(loader: Any, node: yaml.MappingNode) -> Any:
    data: dict[Any, Any] = {}
    yield data
    data.update(_unique_mapping(loader, node))


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:map", _unique_yaml_mapping)


def _cached_path(text: str) -> Path | None:
    from .units import cache_folder

    folder = cache_folder()
    return folder / "yaml" / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}.json" if folder else None


def cached_document(text: str) -> Any | None:
    """The document of ``text`` as :func:`keep_document` kept it, or None.

    A YAML document that JSON holds exactly (the registry files: mappings with text keys, lists, text,
    numbers, booleans) is kept as JSON in the calculator's cache folder (:func:`calculator.units.cache_folder`)
    under the hash of its text: the packaged registry takes 50 ms to construct from YAML, under 1 ms from
    JSON. JSON is data only: a cached file cannot run code.
    """
    path = _cached_path(text)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not kept yet, or a file another process is still writing
        return None


def keep_document(text: str, document: Any) -> None:
    """Keep ``document`` (parsed from ``text`` and checked) as JSON if JSON gives it back unchanged.

    Call it only on a document whose size is bounded (the registry's expansion check): JSON writes out
    every alias of a YAML document in full.
    """
    path = _cached_path(text)
    try:
        encoded = json.dumps(document, allow_nan=False)
        if path is None or json.loads(encoded) != document:  # integer keys, tuples: JSON would change them
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(encoded, encoding="utf-8")
        os.replace(partial, path)
    except (TypeError, ValueError, OSError):  # dates, NaN, a read-only folder
        return


def load_yaml(text: str, what: str, error: type[Exception] = InputError) -> Any:
    """One YAML document (safe tags only), refusing duplicate keys; any failure raises ``error`` naming ``what``."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = str(getattr(exc, "problem", None) or type(exc).__name__)
        raise error(f"{what}: malformed YAML{where}: {problem[:200]}") from None
    except RecursionError:
        raise error(f"{what}: the YAML is nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # an invalid date, an integer of over 4,300 digits
        raise error(f"{what}: a value cannot be read ({_reason(exc)})") from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key[:80]!r} is given twice in one object")
        out[key] = value
    return out


def load_json(text: str, what: str, error: type[Exception] = InputError) -> Any:
    """One JSON document, refusing duplicate keys; any failure raises ``error`` naming ``what``."""
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise error(f"{what}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise error(f"{what}: the JSON is nested too deeply") from None
    except ValueError as exc:  # a duplicate key, an integer of over 4,300 digits
        raise error(f"{what}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    """A parser's complaint in a few words (Python's own text for a huge integer names an interpreter setting)."""
    text = str(exc)
    if "integer string conversion" in text:
        return f"an integer written with more than {sys.get_int_max_str_digits():,} digits"
    return text[:200]


def read_csv(path: str | Path, limit: int, what: str, error: type[Exception] = InputError) -> Any:
    """The CSV file ``path`` as a pandas DataFrame: :func:`read_bytes` with ``limit``, then parsed in memory.

    Parsed from the bytes read (a ``BytesIO`` shares them; a ``StringIO`` would copy the text at four
    bytes a character). Every failure (not UTF-8, not a table, an empty file) raises ``error`` naming ``what``.
    """
    import io

    import pandas as pd

    data = read_bytes(path, limit, what, error)
    try:
        return pd.read_csv(io.BytesIO(data), encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{what}: {path} is not UTF-8 text") from None
    except (ValueError, OverflowError, MemoryError) as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise error(f"{what}: {path} is not a CSV table ({' '.join(str(exc).split())[:160]})") from None
