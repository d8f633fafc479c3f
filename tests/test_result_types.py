"""Every field of a public result names what it holds: no bare ``Any``, no ``dict[str, Any]``.

A result's fields are what a reader (and a type checker) learns of a call's outcome, so each one
carries the alias of its dimension (``Time``, ``Bytes``, ``Rate``, ...; ``calculator.types``), a plain
type (``float``, ``bool | np.ndarray``, ``pd.DataFrame``) or a typed mapping (``dict[str, Rate]``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from collections.abc import Mapping
from typing import Any

import calculator
from calculator.results import Result
from calculator.types import Rate

#: Packages and modules that are not models: the command line (it needs its optional extras) and ``python -m``.
SKIPPED = {"calculator.cli", "calculator.__main__"}

#: An untyped mapping inside an annotation: ``dict[str, Any]``, ``Mapping[str, Any]``.
UNTYPED_MAPPING = re.compile(r"\b(dict|Mapping)\[str, Any\]")


def public_modules() -> list[str]:
    """Every public module of ``calculator`` (no ``_private`` part), the command line excepted."""
    names = []
    for info in pkgutil.walk_packages(calculator.__path__, "calculator."):
        if any(info.name == skipped or info.name.startswith(f"{skipped}.") for skipped in SKIPPED):
            continue
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        names.append(info.name)
    return names


def public_results() -> list[type]:
    """Every public dataclass subclass of :class:`Result` a public module holds (defined there or re-exported)."""
    found: dict[str, type] = {}
    for name in public_modules():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, Result)
                and dataclasses.is_dataclass(value)
                and value.__module__.startswith("calculator.")
                and not attribute.startswith("_")
                and not value.__name__.startswith("_")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[key] for key in sorted(found)]


def untyped_fields(cls: type) -> list[tuple[str, str]]:
    """``(field, annotation)`` of each field annotated ``Any`` or an untyped mapping."""
    out = []
    for field in dataclasses.fields(cls):
        # A string under postponed evaluation (every module of the package); an evaluated type otherwise.
        annotation = field.type if isinstance(field.type, str) else repr(field.type).replace("typing.", "")
        if annotation == "Any" or UNTYPED_MAPPING.search(annotation):
            out.append((field.name, annotation))
    return out


def test_the_walk_finds_the_results():
    results = {cls.__name__ for cls in public_results()}
    assert {"MemoryFit", "QueueMetrics", "SimulationResult", "BenchmarkPrediction", "FleetPlan", "Targets"} <= results
    assert len(results) > 50


def test_no_result_field_is_annotated_any():
    untyped = [
        f"{cls.__module__}.{cls.__qualname__}.{name}: {annotation}"
        for cls in public_results()
        for name, annotation in untyped_fields(cls)
    ]
    assert not untyped, "result fields annotated Any or an untyped mapping:\n" + "\n".join(untyped)


def test_the_check_sees_an_untyped_field():
    @dataclasses.dataclass(frozen=True)
    class Loose(Result):
        typed: float
        loose: Any
        records: dict[str, Any]
        nested: Mapping[str, Any] | None
        rates: dict[str, Rate]

    assert untyped_fields(Loose) == [
        ("loose", "Any"),
        ("records", "dict[str, Any]"),
        ("nested", "Mapping[str, Any] | None"),
    ]


def test_the_check_reads_evaluated_annotations_too():
    fields = {"typed": float, "loose": Any, "records": dict[str, Any], "nested": Mapping[str, Any], "rate": Rate}
    evaluated = dataclasses.make_dataclass("Evaluated", list(fields.items()), bases=(Result,), frozen=True)

    assert [name for name, _ in untyped_fields(evaluated)] == ["loose", "records", "nested"]
