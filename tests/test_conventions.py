"""The public API's conventions (docs/ARCHITECTURE.md), checked over every declared formula.

Counts take a plain number or a quantity of their count unit, probabilities carry no unit, and every
rate a formula returns feeds every rate a formula takes (``request`` is a dimensionless count, so
``request/s`` and ``1/s`` are one rate).
"""

from __future__ import annotations

import inspect

import pytest

import calculator
from calculator import Q_, ureg
from calculator.formula import catalog, magnitude

FORMULAS = catalog()
PER_SECOND = ureg.parse_units("1/s").dimensionality
TOKENS = ureg.token.dimensionality


def _variables():
    for name, spec in FORMULAS.items():
        for argument, var in spec.variables.items():
            yield name, argument, var


@pytest.mark.parametrize(("name", "argument", "var"), list(_variables()), ids=lambda v: str(v)[:40])
def test_every_formula_argument_follows_the_conventions(name, argument, var):
    dimension = ureg.parse_units(var.unit).dimensionality if var.unit else {}
    if var.domain in ("probability", "fraction_open"):
        assert not dimension, f"{name}({argument}): a probability or fraction carries no unit, got {var.unit}"
    if dimension == TOKENS:
        # A token count takes a plain number as well as a quantity of tokens.
        assert magnitude(name, argument, 5, var.unit, var.domain) == magnitude(
            name, argument, Q_(5, "token"), var.unit, var.domain
        )
    if not dimension and var.domain in ("positive_integer", "nonnegative", "positive"):
        # A plain count takes a quantity of tokens or requests as well as a number.
        for count in (Q_(5, "token"), Q_(5, "request")):
            assert magnitude(name, argument, count, var.unit, var.domain) == 5
    if dimension == PER_SECOND:
        # Rates: a bare per-second rate and a rate of requests are the same argument.
        assert magnitude(name, argument, Q_(3, "1/s"), var.unit, var.domain) == magnitude(
            name, argument, Q_(3, "request/s"), var.unit, var.domain
        )


def test_every_rate_a_formula_returns_feeds_every_rate_a_formula_takes():
    produced = {spec.result.unit for spec in FORMULAS.values() if spec.result.unit}
    taken = {var.unit for _, _, var in _variables() if var.unit}
    rates_out = [u for u in produced if ureg.parse_units(u).dimensionality == PER_SECOND]
    rates_in = [u for u in taken if ureg.parse_units(u).dimensionality == PER_SECOND]
    assert rates_out and rates_in
    for out in rates_out:
        for into in rates_in:
            assert Q_(1, out).to(into).magnitude > 0, (out, into)


def test_public_signatures_use_one_name_per_concept():
    # kv_dtype is the old name of kv_precision (kept for one release by _support.renamed, not in signatures).
    # (The plain-array step functions of performance.py still call the degree ``tp``: open work.)
    old_names = {"kv_dtype": "kv_precision", "weight_precision": "precision"}
    for name in calculator.__all__:
        value = getattr(calculator, name)
        if not callable(value) or isinstance(value, type):
            continue
        try:
            parameters = inspect.signature(value).parameters
        except (TypeError, ValueError):
            continue
        for old, new in old_names.items():
            assert old not in parameters, f"{name}() takes '{old}'; the API's name is '{new}'"
