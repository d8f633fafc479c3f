"""Each argument is declared once; the docstring's Parameters section is checked against the declaration.

A formula declares its arguments with :func:`~calculator.formula.var` (unit, symbol, domain); a plain
function with its signature's aliases and one :func:`~calculator._support.checked` decorator. The
docstrings repeat what a reader needs (the dimension, in words) and these tests hold them to the
declaration: every parameter documented, nothing documented that the signature lacks, and the
dimension in brackets (``Quantity [request / time]``) the dimension the boundary enforces.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import calculator
from calculator import ureg
from calculator._support import checked_arguments
from calculator.formula import Formula, catalog

#: Words of the docstrings' dimension brackets and the unit each stands for.
WORDS = {
    "time": "s",
    "information": "B",
    "request": "request",
    "token": "token",
    "currency": "USD",
    "compute": "FLOP",
    "energy": "J",
    "power": "W",
    "1": "",
}


def _library_functions():
    """Every formula, and every function of the library decorated with ``checked``, by qualified name."""
    found = {f"{f.func.__module__}.{f.name}": f for f in catalog().values()}
    for module in pkgutil.walk_packages(calculator.__path__, "calculator."):
        if module.name.endswith("__main__") or ".cli" in module.name:
            continue
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if hasattr(value, "__checked__") and value.__module__ == module.name:
                found[f"{module.name}.{name}"] = value
    return dict(sorted(found.items()))


FUNCTIONS = _library_functions()


def _documented(function) -> dict[str, str]:
    """Parameter name -> the type text of its entry in the numpydoc Parameters section.

    An entry without a type whose description reads "As for :func:`other`" takes ``other``'s types.
    """
    body = function.func if isinstance(function, Formula) else function
    doc = inspect.getdoc(body) or ""
    match = re.search(r"^Parameters\n-+\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)", doc, flags=re.S | re.M)
    if match is None:
        return {}
    out, lines = {}, match.group(1).splitlines()
    for number, line in enumerate(lines):
        if not line or line[0].isspace():
            continue  # a description line
        names, _, kind = line.partition(" : ")
        described = lines[number + 1] if number + 1 < len(lines) else ""
        other = re.match(r"\s+As for :(?:func|meth):`~?([\w.]+)`", described)
        source = _documented(_named(other.group(1), body)) if other and not kind else {}
        for name in names.split(","):
            name = name.strip().lstrip("*")
            out[name] = source.get(name, kind.strip())
    return out


def _named(reference: str, near):
    """The function a docstring names, looked up in the module of ``near``, then in the flat namespace."""
    module = importlib.import_module(near.__module__)
    found = getattr(module, reference.rsplit(".", 1)[-1], None) or getattr(calculator, reference.rsplit(".", 1)[-1])
    return found


def _parameters(function) -> list[str]:
    return [p.name for p in inspect.signature(function).parameters.values()]


def _declared_units(function) -> dict[str, str]:
    if isinstance(function, Formula):
        return {name: spec.unit for name, spec in function.variables.items()}
    return {name: unit for name, (unit, _) in checked_arguments(function).items()}


def _bracket_dimension(kind: str):
    """The dimension a docstring's ``[information / time]`` names, or None where it names none."""
    found = re.search(r"\[([^\]]+)\]", kind)
    if found is None:
        return None
    text = re.sub(r"[A-Za-z1]+", lambda m: WORDS.get(m.group(0), m.group(0)) or "1", found.group(1))
    return ureg.parse_units(text.replace(" ", "")).dimensionality if text.strip() != "1" else {}


def test_the_walk_finds_the_library_declarations():
    assert sum(isinstance(f, Formula) for f in FUNCTIONS.values()) >= 80
    assert sum(not isinstance(f, Formula) for f in FUNCTIONS.values()) >= 60


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_the_parameters_section_documents_the_signature(name):
    function = FUNCTIONS[name]
    documented = _documented(function)
    assert documented, f"{name}: no Parameters section"
    parameters = _parameters(function)
    assert set(documented) == set(parameters), (
        f"{name}: documented {sorted(set(documented) - set(parameters))} not in the signature; "
        f"undocumented {sorted(set(parameters) - set(documented))}"
    )


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_the_documented_dimension_is_the_declared_one(name):
    function = FUNCTIONS[name]
    documented = _documented(function)
    counts = (ureg.dimensionless.dimensionality, ureg.token.dimensionality)
    for argument, unit in _declared_units(function).items():
        needed = ureg.parse_units(unit).dimensionality if unit else ureg.dimensionless.dimensionality
        kind = documented.get(argument, "")
        written = _bracket_dimension(kind)
        if needed in counts and (written is None or written in counts):
            continue  # a count reads as a plain number or a quantity of tokens or requests alike
        assert written is not None, f"{name}({argument}): declared in {unit!r}, documented as {kind!r}"
        assert written == needed, f"{name}({argument}): declared in {unit!r}, documented as {kind!r}"


def test_a_wrong_bracket_is_caught():
    # The test's own reading of the brackets: a byte rate is not a time.
    assert _bracket_dimension("Quantity [information / time]") == ureg.parse_units("B/s").dimensionality
    assert _bracket_dimension("Quantity [time]") != ureg.parse_units("B/s").dimensionality
    assert _bracket_dimension("float") is None
