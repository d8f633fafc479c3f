"""Helpers every dashboard page shares (not a page: ``app.py`` leaves it out of the navigation).

* :class:`Scenario`: widgets whose values live in the URL's query parameters, so a link reproduces
  the exact what-if, and in the session, so switching pages and back keeps them;
* :func:`show_math`: a result's equation as LaTeX with the user's numbers substituted (the chapter's
  Napkin Math layout) and the chapter section it comes from;
* :func:`table`, :func:`rows`, :func:`fmt`, :func:`number`: tables with human labels and every number
  written by the library's one display formatter; every table downloads as CSV, results as JSON
  (:func:`download_json`);
* :func:`run`: the error guard; a :class:`calculator.errors.CalculatorError` (or an unknown registry
  id) becomes an ``st.error`` with the library's message, never a traceback; it also draws the page's
  inputs after the page (:meth:`Scenario._widget`), so the browser shows the answer before the inputs' code;
* :func:`registry`, :func:`extra_files`, :func:`add_registry_file`: the registry with the user's
  custom entries of this session; :func:`kept_upload`: an upload, size-limited, in the session's folder.

Pages hold widgets, calls and display only: every number comes from :mod:`calculator`, every chart
from :mod:`calculator.plots`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from calculator import ureg
from calculator.errors import CalculatorError, InputError, RegistryError, UnitsError
from calculator.export import to_csv
from calculator.precision import PRECISIONS
from calculator.registry import load_registry
from calculator.results import MISSING, format_display, format_number, human_label


def _engines() -> dict[str, str | None]:
    """The packaged registry's engines by their short names, the engine-agnostic one first (its id: None)."""
    from calculator.performance import GENERIC

    entries = sorted(load_registry().engines.values(), key=lambda entry: entry.id != GENERIC)
    return {entry.label: None if entry.id == GENERIC else entry.id for entry in entries}


#: The serving engines offered by the pages that price a step (label -> engine profile name; generic: None),
#: from the registry's engine entries (``display_name``).
ENGINES = _engines()
#: The weight precisions offered for serving.
SERVING_PRECISIONS = [p for p in ("fp16", "bf16", "fp8", "int8", "int4", "fp4") if p in PRECISIONS]
#: The KV-cache choice that follows the engine's default for the weights (kv_precision=None).
ENGINE_DEFAULT_KV = "engine default"
#: Largest registry file accepted from an upload or a form (bytes).
MAX_REGISTRY_BYTES = 256 * 1024
_CUSTOM_FILES = "_custom_registry_files"
#: Where the fleet sizer leaves the plan it shows, for the "A day in production" page to play (this session only).
SIZER_PLAN = "_fleet_sizer_plan"
_SESSION_FOLDER = "_custom_registry_folder"

# --------------------------------------------------------------------------------------------
# Text from outside (links, uploads, the registry) is shown as text

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=])")


def link_number(raw: str, low: float, high: float, integer: bool) -> Any:
    """A number from a link, in ``[low, high]``; a count may be written as an integral float (``1.0``).

    The reason a value is refused is in the calculator's words (not Python's ``invalid literal``).
    """
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("not a number") from None
    if integer:
        if not value.is_integer():
            raise ValueError("not a whole number")
        value = int(value)
    if not low <= value <= high:  # NaN fails too
        raise ValueError(f"outside {format_number(low)} to {format_number(high)}")
    return value


#: The starts of what Markdown would turn into a link by itself: ``scheme://`` and ``www.``.
_ADDRESS = re.compile(r"(?i)(?<=[a-z])://|www\.")


def plain(text: Any, limit: int = 500) -> str:
    """``text`` with every Markdown character escaped and cut to ``limit`` characters.

    Streamlit renders Markdown in ``st.error``, ``st.warning``, ``st.caption`` and the rest, so a link
    parameter, an uploaded file or a registry string shown through them could add links and images
    from any host. Everything that came from outside goes through this first.
    """
    value = str(text)
    if len(value) > limit:
        value = f"{value[: limit - 20]}... ({len(value):,} characters)"
    # Escaped Markdown still autolinks a bare address (GitHub-flavoured Markdown finds "https://" and
    # "www."); a zero-width space inside them keeps the text as shown but no longer an address.
    value = _ADDRESS.sub(lambda m: m.group(0)[:-1] + "\u200b" + m.group(0)[-1], value.replace("\n", " "))
    return _MARKDOWN.sub(r"\\\1", value)


# --------------------------------------------------------------------------------------------
# The registry, with the session's custom entries


@st.cache_resource(show_spinner=False, max_entries=32)
def _registry(extra: tuple[str, ...]) -> Any:
    return load_registry(extra=extra)


def extra_files() -> tuple[str, ...]:
    """The custom registry files this session added (content-addressed paths), in order."""
    return tuple(st.session_state.get(_CUSTOM_FILES, ()))


def registry() -> Any:
    """The registry with this session's custom entries (cached per set of files)."""
    return _registry(extra_files())


def add_registry_file(text: str) -> Any:
    """Validate a registry YAML document against the registry and keep it for this session.

    The text is size-limited, written under a name derived from its content and loaded with the
    registry's own safe loader; an invalid file raises :class:`RegistryError` with the registry's
    message and is not kept.
    """
    data = text.encode("utf-8")
    if len(data) > MAX_REGISTRY_BYTES:
        raise RegistryError(f"the file has {len(data):,} bytes; the limit is {MAX_REGISTRY_BYTES:,} bytes")
    path = session_folder() / f"{hashlib.sha256(data).hexdigest()[:20]}.yaml"
    kept = path.exists()
    path.write_bytes(data)
    files = (*[f for f in extra_files() if f != str(path)], str(path))
    try:
        loaded = load_registry(extra=files)  # raises RegistryError naming file, entry and field
    except RegistryError:
        if not kept:
            path.unlink(missing_ok=True)  # an invalid file is not kept
        raise
    st.session_state[_CUSTOM_FILES] = list(files)
    return loaded


def kept_upload(
    data: bytes, limit: int, what: str, prefix: str, suffix: str, error: type[Exception] = InputError
) -> Path:
    """An uploaded file's bytes kept in this session's folder under a name derived from its content.

    Refused with ``error`` naming ``what`` when over ``limit`` bytes, before anything is written; the library
    then reads the file from the returned path with its own bounded readers (a plan, a demand curve, a config).
    """
    if len(data) > limit:
        raise error(f"{what}: {len(data):,} bytes; the limit is {limit:,} bytes")
    path = session_folder() / f"{prefix}-{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
    path.write_bytes(data)
    return path


def import_config_files(
    config: bytes, quant: bytes | None = None, *, repo: str | None = None, model_id: str | None = None
) -> Any:
    """Import a model from a ``config.json`` (and an ``hf_quant_config.json``) given as bytes, for this session.

    Each file is size-limited and kept in the session's folder under a name derived from its content, read by
    :func:`calculator.model_import.import_model_config` over the session's registry, and the entry it writes is
    added as :func:`add_registry_file` adds a file. Returns the :class:`~calculator.model_import.ImportedModel`;
    a file the importer refuses raises its :class:`~calculator.errors.CalculatorError` and nothing is kept.
    """
    from calculator.model_import import import_model_config

    paths = {
        label: kept_upload(data, MAX_REGISTRY_BYTES, label, f"import-{label}", ".json", RegistryError)
        for label, data in (("config", config), ("quant", quant))
        if data is not None
    }
    imported = import_model_config(
        paths["config"], repo=repo, model_id=model_id, quant=paths.get("quant"), registry=registry()
    )
    add_registry_file(imported.text)
    return imported


class SessionFolder:
    """A temporary folder that lives as long as the session that holds this object.

    The session keeps it in its state; when the session ends its state is dropped, this object is
    collected, and the folder with the session's registry files is deleted.
    """

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="servecalc-session-"))
        self._delete = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)

    def delete(self) -> None:
        """Delete the folder now."""
        self._delete()


def session_folder() -> Path:
    """This session's folder for its custom registry files (deleted when the session ends)."""
    holder = st.session_state.get(_SESSION_FOLDER)
    if holder is None or not holder.path.exists():
        holder = st.session_state[_SESSION_FOLDER] = SessionFolder()
    return holder.path


def user_entry_document(section: str, entry: dict[str, Any]) -> str:
    """A registry YAML document holding one user entry, with a ``user`` source covering its values.

    Parameters
    ----------
    section : str
        ``"accelerators"`` or ``"models"`` (any registry section).
    entry : dict
        The entry's fields (``id``, ``name`` and values; quantities as text such as ``"80 GiB"``).
    """
    import yaml

    from calculator.registry import SECTIONS

    source = f"user-{entry['id']}"
    labels = SECTIONS[section].UNSOURCED if section in SECTIONS else frozenset({"id", "name"})
    values = [field for field, value in entry.items() if field not in labels and value is not None]
    document = {
        "schema_version": 1,
        "sources": [{"id": source, "title": f"Entered in the dashboard: {entry['name']}", "url": "dashboard:session",
                     "kind": "user"}],
        section: [{**{k: v for k, v in entry.items() if v is not None}, "provenance": "user",
                   "sources": [{"source": source, "fields": values or ["name"]}]}],
    }  # fmt: skip
    return yaml.safe_dump(document, sort_keys=False)


def clear_registry_files() -> None:
    """Forget this session's custom registry entries and delete their files."""
    st.session_state[_CUSTOM_FILES] = []
    holder = st.session_state.pop(_SESSION_FOLDER, None)
    if holder is not None:
        holder.delete()


def transformer_models() -> list[str]:
    """Ids of the registry's transformer LLMs (the models the serving pages size), by family and then by size.

    The session's imported and uploaded models are among them (:func:`registry`); the pickers show each with
    :func:`model_picker`'s labels and search them as typed.
    """
    models = registry().models
    ids = [key for key, model in models.items() if model.kind == "transformer"]
    return sorted(ids, key=lambda key: (model_family(key), float(models[key].parameters)))


#: A size token of a model id: ``70b``, ``0.6b``, ``8x7b``, ``1t``.
_SIZE_TOKEN = re.compile(r"^(\d+x)?\d+(\.\d+)?[bmt]$")


def model_family(model_id: str) -> str:
    """The family part of a model id: what comes before its size (``llama-3.1`` of ``llama-3.1-70b``).

    Without a size token, the id less a last versioned part (``deepseek`` of ``deepseek-v3.1``), else the id.
    """
    tokens = model_id.split("-")
    for i, token in enumerate(tokens):
        if i and _SIZE_TOKEN.match(token):
            return "-".join(tokens[:i])
    if len(tokens) > 1 and any(c.isdigit() for c in tokens[-1]):
        return "-".join(tokens[:-1])
    return model_id


def model_picker() -> tuple[list[str], Any]:
    """The model pickers' choices (:func:`transformer_models`) and how each is shown (a ``format_func``).

    A choice reads as its name, its parameters and its family (searchable as typed); the labels are fixed when the
    page runs, so a widget redrawn later shows the session's models as they were.
    """
    models, ids = registry().models, transformer_models()
    labels = {}
    for key in ids:
        count = float(models[key].parameters)
        size = f"{count / 1e12:.3g}T" if count >= 1e12 else f"{count / 1e9:.3g}B"
        labels[key] = f"{models[key].name} · {size} parameters · {model_family(key)}"
    return ids, lambda key: labels.get(key, str(key))


#: Seconds a session's first run of a page holds the rest of the page after its answer (:meth:`Scenario.answered`);
#: the environment variable ``SERVECALC_FIRST_PAINT_PAUSE`` overrides it (the tests set 0).
FIRST_PAINT_PAUSE = 0.5


def first_paint_pause() -> float:
    """:data:`FIRST_PAINT_PAUSE`, or the seconds ``SERVECALC_FIRST_PAINT_PAUSE`` gives (a number >= 0)."""
    raw = os.environ.get("SERVECALC_FIRST_PAINT_PAUSE", "")
    try:
        value = float(raw) if raw.strip() else FIRST_PAINT_PAUSE
    except ValueError:
        return FIRST_PAINT_PAUSE
    return value if math.isfinite(value) and value >= 0 else FIRST_PAINT_PAUSE


# --------------------------------------------------------------------------------------------
# Scenario state in the URL


class Scenario:
    """Widgets whose values are kept in the URL's query parameters and in the session.

    A widget's first value comes from the query parameter of its name (a shared link), else from
    the value this session last had on the page, else from the default. After each widget the
    query parameter is rewritten, so the address bar always reproduces the what-if. A parameter that
    does not parse or lies outside the widget's bounds is ignored with a warning.

    Parameters
    ----------
    page : str
        Prefix of the widget keys (``fleet.rate``), so pages do not share widget state.
    """

    def __init__(self, page: str) -> None:
        self.page = page
        visited = st.session_state.setdefault("_visited", set())
        self.first_run = page not in visited  # the session's first run of this page (:meth:`answered`)
        visited.add(page)
        self.saved: dict[str, Any] = st.session_state.setdefault("_scenarios", {}).setdefault(page, {})
        written = st.session_state.setdefault("_scenario_written", {})
        if st.session_state.get("_scenario_page", page) != page:
            # Moved in the navigation, the address still holds the previous page's scenario: cleared. A link to
            # this page (the fleet sizer's to the cost page) brings parameters of its own: kept and read.
            if all(written.get(name) == value for name, value in st.query_params.to_dict().items()):
                st.query_params.clear()
            written.clear()
        st.session_state["_scenario_page"] = page

    def key(self, name: str) -> str:
        """The widget key of parameter ``name``."""
        return f"{self.page}.{name}"

    def answered(self) -> None:
        """Mark the page's answer as drawn: on the session's first run of the page, hold the rest for a moment.

        The browser loads each element type's code on first use, and React shows nothing of a group of elements
        until the code of all of them has arrived, then waits out 500 ms after the latest placeholder (its
        Suspense throttle): a first visit's metric waited for the charting, table and widget code of the rest
        of the page. Holding the rest for :func:`first_paint_pause` seconds lets the metric's own code arrive
        and the answer paint first; later runs of the page (every edit) are not held (docs/dashboard.md, "First
        answer in a real browser").
        """
        if self.first_run:  # a first run that stopped before its answer (no price yet, an error) holds no later run
            self.first_run = False
            time.sleep(first_paint_pause())

    def _start(self, name: str, default: Any, parse: Callable[[str], Any], valid: Callable[[Any], bool]) -> str:
        key = self.key(name)
        stale = key in st.session_state and not valid(st.session_state[key])
        if stale:
            del st.session_state[key]  # the choices changed under it (another model's TP degrees)
        if key not in st.session_state:
            value = self.saved.get(name, default)
            if not valid(value):
                value = default
            # A stale widget's parameter is this page's own last value, not a shared link: not read again.
            raw = None if stale else st.query_params.get(name)
            if raw is not None:
                try:
                    value = parse(raw)
                except (ValueError, TypeError) as exc:  # every parse raises with the reason in our words
                    st.warning(f"Ignored the link's parameter {plain(name, 80)}={plain(raw, 120)}: {plain(exc)}")
            st.session_state[key] = value
        return key

    @staticmethod
    def _widget(where: Any, kind: str, *args: Any, key: str, **kwargs: Any) -> Any:
        """The widget ``kind`` (``number_input``, ...) at its place, ``where`` or the current container.

        While :func:`run` runs a page, the place is held by an empty placeholder and the widget is drawn into it
        after the page, so the page's answer reaches the browser before its inputs: the browser loads each
        widget's code (about 20 files for a select box) before it reveals what arrived with it, which held the
        first metric back (docs/dashboard.md, "Speed"). The value is the session's, which :meth:`_start` set
        (or the user's last change), the value the widget returns.
        """
        pending = getattr(_INPUTS, "pending", None)
        place = where or st
        if pending is None:
            return getattr(place, kind)(*args, key=key, **kwargs)
        slot = place.empty()
        pending.append(lambda: getattr(slot, kind)(*args, key=key, **kwargs))
        return st.session_state[key]

    def _keep(self, name: str, value: Any, text: str) -> Any:
        self.saved[name] = value
        st.query_params[name] = st.session_state["_scenario_written"][name] = text
        return value

    def number(
        self,
        label: str,
        name: str,
        default: float,
        *,
        min_value: float,
        max_value: float,
        step: float | None = None,
        integer: bool = False,
        where: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A number input bounded to ``[min_value, max_value]`` (an int input when ``integer``).

        A ``None`` default leaves the input empty until the user types a value (it returns ``None``).
        """
        cast = int if integer else float

        def parse(raw: str) -> Any:
            if raw == "" and default is None:
                return None
            return link_number(raw, min_value, max_value, integer)

        def valid(value: Any) -> bool:
            return (value is None and default is None) or (value is not None and min_value <= value <= max_value)

        key = self._start(name, None if default is None else cast(default), parse, valid)
        bounds = {"min_value": cast(min_value), "max_value": cast(max_value)}
        if step is not None:
            bounds["step"] = cast(step)
        if not integer:
            kwargs.setdefault("format", "%g")  # the default "%0.2f" would show 0.001 as 0.00
        value = self._widget(where, "number_input", label, key=key, **bounds, **kwargs)
        return self._keep(name, value, "" if value is None else str(value))

    def slider(
        self,
        label: str,
        name: str,
        default: float,
        *,
        min_value: float,
        max_value: float,
        step: float,
        integer: bool = False,
        where: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A slider over ``[min_value, max_value]``."""
        cast = int if integer else float

        def parse(raw: str) -> Any:
            return link_number(raw, min_value, max_value, integer)

        key = self._start(name, cast(default), parse, lambda value: min_value <= value <= max_value)
        value = self._widget(
            where,
            "slider",
            label,
            key=key,
            min_value=cast(min_value),
            max_value=cast(max_value),
            step=cast(step),
            **kwargs,
        )
        return self._keep(name, value, str(value))

    def select(
        self, label: str, name: str, options: Sequence[Any], default: Any, *, where: Any = None, **kwargs: Any
    ) -> Any:
        """A select box over ``options`` (strings or numbers)."""
        return self._choice("selectbox", label, name, options, default, where, kwargs)

    def model(self, label: str, name: str, default: str, *, where: Any = None) -> Any:
        """A model picker: the registry's transformer LLMs by family and size, labelled (:func:`model_picker`)."""
        ids, shown = model_picker()
        return self.select(label, name, ids, default, where=where, format_func=shown)

    def radio(
        self, label: str, name: str, options: Sequence[Any], default: Any, *, where: Any = None, **kwargs: Any
    ) -> Any:
        """Radio buttons over ``options``."""
        return self._choice("radio", label, name, options, default, where, kwargs)

    def _choice(
        self,
        widget: str,
        label: str,
        name: str,
        options: Sequence[Any],
        default: Any,
        where: Any,
        kwargs: dict[str, Any],
    ) -> Any:
        by_text = {str(option): option for option in options}

        def parse(raw: str) -> Any:
            if raw not in by_text:
                raise ValueError("not one of the choices")
            return by_text[raw]

        key = self._start(name, default if default in options else options[0], parse, lambda v: v in options)
        value = self._widget(where, widget, label, options, key=key, **kwargs)
        return self._keep(name, value, str(value))

    def multiselect(
        self, label: str, name: str, options: Sequence[str], default: Sequence[str], *, where: Any = None, **kwargs: Any
    ) -> list[str]:
        """A multi-select over string ``options``; the URL holds them comma-separated.

        The chosen chips wrap onto more rows (``wrap=True``): in a column Streamlit would otherwise keep them on
        one scrolling row and cut the names off (three accelerators, four interconnects).
        """

        def parse(raw: str) -> list[str]:
            chosen = list(dict.fromkeys(item for item in raw.split(",") if item))  # a repeated item once
            unknown = [item for item in chosen if item not in options]
            if unknown:
                raise ValueError(f"unknown {unknown}")
            return chosen

        key = self._start(
            name, [d for d in default if d in options], parse, lambda chosen: all(c in options for c in chosen)
        )
        value = self._widget(where, "multiselect", label, options, key=key, **{"wrap": True, **kwargs})
        return self._keep(name, list(value), ",".join(value))

    def text(
        self, label: str, name: str, default: str, *, max_chars: int = 2000, where: Any = None, **kwargs: Any
    ) -> str:
        """A single-line text input (lists of numbers and the like; the page parses and validates it)."""

        def parse(raw: str) -> str:
            if len(raw) > max_chars:
                raise ValueError(f"longer than {max_chars} characters")
            return raw

        key = self._start(name, default, parse, lambda value: isinstance(value, str) and len(value) <= max_chars)
        value = self._widget(where, "text_input", label, key=key, max_chars=max_chars, **kwargs)
        return self._keep(name, value, value)

    def tabs(self, labels: Sequence[str]) -> Sequence[Any]:
        """Tabs of which a page runs only the open one (``if tab.open:``); switching tabs reruns the page.

        A page that drew every tab made the browser draw the hidden tabs' charts and tables before it showed
        the first answer (docs/dashboard.md, "Speed"). A hidden tab's inputs keep this session's values, and a
        link's parameters for them apply when the tab is opened. The open tab is in the session (key
        ``<page>.tab``), not in the link.
        """
        return st.tabs(list(labels), key=self.key("tab"), on_change="rerun")

    def toggle(self, label: str, name: str, default: bool, *, where: Any = None, **kwargs: Any) -> bool:
        """An on/off toggle (``true``/``false`` in the URL)."""

        def parse(raw: str) -> bool:
            if raw.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return raw.lower() == "true"

        key = self._start(name, bool(default), parse, lambda value: isinstance(value, bool))
        value = self._widget(where, "toggle", label, key=key, **kwargs)
        return self._keep(name, bool(value), "true" if value else "false")


def parse_numbers(text: str, what: str, *, integer: bool = False, minimum: float = 0.0) -> list[Any]:
    """Comma-separated numbers typed by the user; :class:`InputError` names the field and the bad item."""
    items = [item.strip() for item in text.replace(";", ",").split(",") if item.strip()]
    if not items:
        raise InputError(f"{what}: enter at least one number")
    values = []
    for item in items:
        try:
            value = int(item) if integer else float(item)
        except ValueError:
            kind = "whole numbers" if integer else "numbers"
            raise InputError(f"{what}: expected {kind} separated by commas, found {item!r}") from None
        if not math.isfinite(value) or value < minimum:
            raise InputError(f"{what}: every value must be at least {minimum:g}, found {item!r}")
        values.append(value)
    return values


def parse_quantity(value: float, unit: str, what: str) -> Any:
    """A typed value and unit as a quantity, read by the library's strict parser (``units.parse_quantity``).

    :class:`UnitsError` names the field when the unit is unknown or the text is not a plain unit
    expression (a typed exponent cannot make the parser evaluate a huge power).
    """
    from calculator.units import parse_quantity as parse

    if not math.isfinite(value):
        raise UnitsError(f"{what}: the number must be finite, got {value!r}")
    return parse(f"{value!r} {unit.strip()}", None, what=what)


# --------------------------------------------------------------------------------------------
# Display


#: A number as text (``calculator.results.format_number``): 4 significant digits, thousands separators.
number = format_number

#: Any value as text (``calculator.results.format_display``): a quantity in the unit asked for (else a
#: readable one) with its symbol, counts with separators, yes/no, ``—`` for a missing value.
fmt = format_display


def rows(values: Mapping[str, Any], units: Mapping[str, str] | None = None, digits: int = 4) -> pd.DataFrame:
    """A two-column table of named results: ``Quantity`` (a human label) and ``Value`` (text with its unit).

    ``units`` maps a name to the unit to show: a quantity is converted to it; a plain number (a count)
    gets it in brackets after its name (``Max context at this batch [token]``). ``None`` values are left out.
    """
    units = units or {}
    shown = []
    for name, value in values.items():
        if value is None:
            continue
        unit = units.get(name)
        if unit is None or isinstance(value, ureg.Quantity):
            shown.append({"Quantity": human_label(name), "Value": format_display(value, unit, digits)})
        else:
            shown.append({"Quantity": human_label(name, unit), "Value": format_display(value, digits=digits)})
    return pd.DataFrame(shown, columns=["Quantity", "Value"])


def display_frame(frame: pd.DataFrame, digits: int = 4) -> tuple[pd.DataFrame, Any]:
    """A table for reading: the frame with human column labels, and a Styler that shows every cell as text.

    Columns are relabelled with ``human_label``; a float column whose values are all whole numbers (an
    integer column with gaps, such as a registry field some entries lack) becomes a nullable integer
    column, so its counts stay exact. The Styler writes each cell with ``format_display`` (``digits``
    significant digits, separators, yes/no, ``—`` for a gap) while the frame keeps the numbers, so the
    dashboard sorts numerically and the CSV download has full precision.
    """
    labelled = frame.rename(columns=lambda column: human_label(str(column)))
    for column in labelled.columns:
        values = labelled[column]
        if values.dtype.kind == "f" and values.notna().any():
            present = values.dropna()
            if np.all(np.isfinite(present)) and np.all(present == np.round(present)) and present.abs().max() < 2**53:
                labelled[column] = values.astype("Int64")

    def cell(value: Any) -> str:
        if pd.api.types.is_scalar(value) and pd.isna(value):
            return MISSING
        return format_display(value, digits=digits)

    return labelled, labelled.style.format(cell)


def table(
    frame: pd.DataFrame,
    name: str,
    *,
    where: Any = None,
    digits: int = 4,
    download: pd.DataFrame | None = None,
    **kwargs: Any,
) -> None:
    """Show a table for reading (:func:`display_frame`) and a button that downloads it as CSV.

    ``download`` is the frame the CSV holds when it is more than the table shows (every configuration
    behind a table of the best ones); its columns get the same human labels. The CSV is the library's
    (``calculator.export.to_csv``): text a spreadsheet would run as a formula is written as text.
    """
    place = where or st
    labelled, styled = display_frame(frame, digits)
    place.dataframe(styled, hide_index=True, **kwargs)
    if download is not None:
        labelled = download.rename(columns=lambda column: human_label(str(column)))
    place.download_button(
        "Download CSV",
        (to_csv(labelled) or "").encode("utf-8"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv.{name}",
    )


def download_json(result: Any, name: str, *, label: str = "Download JSON", where: Any = None) -> None:
    """A button that downloads a library result (``to_json_dict()``) as JSON."""
    (where or st).download_button(
        label,
        json.dumps(result.to_json_dict(), indent=2, default=str).encode("utf-8"),
        file_name=f"{name}.json",
        mime="application/json",
        key=f"json.{name}",
    )


def show_math(formula: Any, *args: Any, title: str | None = None, where: Any = None, **kwargs: Any) -> None:
    """An expander with a formula's equation, the user's numbers substituted, and its chapter reference.

    Parameters
    ----------
    formula : calculator.formula.Formula
        A closed form of the library.
    *args, **kwargs
        Its arguments (quantities), as for calling it.
    title : str, optional
        Expander label; defaults to the formula's result description.
    """
    label = title or formula.result.description or formula.name.replace("_", " ")
    with (where or st).expander(f"Show the math: {label}"):
        st.latex(formula.latex(*args, **kwargs))
        st.caption(f"{formula.reference} · `{formula.__module__}.{formula.name}`")


# --------------------------------------------------------------------------------------------
# The error guard


def message(exc: BaseException) -> str:
    """The text to show for a library error (an unknown id's message without KeyError quotes)."""
    if isinstance(exc, KeyError) and not isinstance(exc, CalculatorError):
        return f"unknown id {exc.args[0]!r}" if exc.args else "unknown id"
    return str(exc)


#: The inputs of the page :func:`run` is running, drawn after it (:meth:`Scenario._widget`); per script thread,
#: as each session runs its script in a thread of its own.
_INPUTS = threading.local()


def run(page: Callable[[], None]) -> None:
    """Run a page, then draw its inputs (:meth:`Scenario._widget`); errors become error boxes, never tracebacks."""
    _INPUTS.pending = []
    try:
        _guarded(page)
    finally:
        pending, _INPUTS.pending = _INPUTS.pending, None
    _guarded(lambda: [draw() for draw in pending])


def _guarded(call: Callable[[], Any]) -> None:
    """Call ``call``; a library error (or an unknown registry id) becomes an error box, never a traceback."""
    try:
        call()
    except (CalculatorError, KeyError) as exc:
        st.error(plain(message(exc)))
    except Exception as exc:  # the last guard: a page never shows a traceback
        st.error(f"This page could not finish with these inputs: {plain(exc)}")


def launch_downloads(files: Sequence[tuple[str, str, str]], text_of: Callable[[str], str], key: str) -> None:
    """A row of downloads, one per ``(label, target, file name)``: ``text_of(target)`` (a launch command or, for
    ``"k8s"``, a Kubernetes manifest); a target the library refuses shows its reason in its column instead."""
    for column, (label, target, file_name) in zip(st.columns(len(files)), files, strict=True):
        try:
            text = text_of(target)
        except InputError as exc:
            column.warning(f"{label}: {plain(str(exc))}")
            continue
        mime = "text/yaml" if target == "k8s" else "text/x-shellscript"
        column.download_button(label, text.encode("utf-8"), file_name=file_name, mime=mime, key=f"{key}.{target}")
