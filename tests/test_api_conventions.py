"""The conventions table (docs/ARCHITECTURE.md) over every public function of the flat namespace.

Each public signature says what its parameters hold through the aliases of ``calculator.types``. These
tests check the aliases against what each function enforces, then call every function whose arguments
can be built from its signature (``tests/public_calls.py``) and check that a count takes a plain number
and a quantity of its count unit alike, and that a rate takes ``1/s`` and ``request/s`` alike.
"""

from __future__ import annotations

import warnings

import pytest
from public_calls import PLAIN_ARRAY_FUNCTIONS, kinds, public_functions, same, valid_call

from calculator import Q_, ureg
from calculator.formula import Formula

FUNCTIONS = public_functions()
PLAIN_KINDS = {"count", "tokens", "probability", "fraction", "number", "precision"}


def _callable_names():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [name for name in FUNCTIONS if name not in PLAIN_ARRAY_FUNCTIONS and valid_call(name) is not None]


CALLABLE = _callable_names()


def test_most_public_functions_can_be_called_from_their_signatures():
    # The API-wide checks below are only as wide as the calls they can make; this keeps them wide.
    assert len(CALLABLE) >= 0.75 * len(FUNCTIONS), f"only {len(CALLABLE)} of {len(FUNCTIONS)} callable"


def _arguments_of(kind_names, dimension_of_unit=None):
    for name in CALLABLE:
        for argument, dimension in kinds(FUNCTIONS[name]).items():
            if dimension.kind not in kind_names or argument not in valid_call(name):
                continue
            if dimension_of_unit is None or ureg.parse_units(dimension.unit).dimensionality == dimension_of_unit:
                yield name, argument


def _call(name, **changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FUNCTIONS[name](**{**valid_call(name), **changes})


@pytest.mark.parametrize(("name", "argument"), list(_arguments_of({"count", "tokens"})))
def test_a_count_takes_a_plain_number_and_a_quantity_of_its_unit(name, argument):
    value = valid_call(name)[argument]
    plain = (
        value.m_as("token" if kinds(FUNCTIONS[name])[argument].kind == "tokens" else "")
        if hasattr(value, "magnitude")
        else value
    )
    unit = "token" if kinds(FUNCTIONS[name])[argument].kind == "tokens" else "request"
    assert same(_call(name, **{argument: plain}), _call(name, **{argument: Q_(plain, unit)}))


@pytest.mark.parametrize(
    ("name", "argument"), list(_arguments_of({"quantity"}, ureg.parse_units("1/s").dimensionality))
)
def test_a_rate_takes_per_second_and_requests_per_second_alike(name, argument):
    per_second = valid_call(name)[argument].m_as("1/s")
    assert same(
        _call(name, **{argument: Q_(per_second, "1/s")}), _call(name, **{argument: Q_(per_second, "request/s")})
    )


def test_every_formula_signature_names_its_kinds():
    for name, function in FUNCTIONS.items():
        if isinstance(function, Formula):
            assert set(kinds(function)) == set(function.variables), name
