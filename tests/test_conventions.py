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
    old_names = {"kv_dtype": "kv_precision", "weight_precision": "precision", "tp": "tensor_parallel"}
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


@pytest.mark.parametrize(
    "name", [n for n, spec in FORMULAS.items() for v in spec.variables.values() if v.domain == "precision"]
)
def test_every_precision_argument_takes_a_name_a_plain_number_or_a_quantity(name):
    # One rule (formula.PLAIN_PRECISION_RULE): a plain number is in the variable's own unit, bytes per
    # element where the formula's variable is bytes (the chapter's "2" for FP16), bits where it is bits.
    spec = FORMULAS[name]
    precision = [a for a, v in spec.variables.items() if v.domain == "precision"]
    others = {a: (Q_(1, v.unit) if v.unit else 3) for a, v in spec.variables.items() if a not in precision}
    plain = {a: (1 if spec.variables[a].unit == "B" else 8) for a in precision}  # FP8 in the variable's unit
    by_name = spec(**others, **dict.fromkeys(precision, "fp8"))
    by_plain = spec(**others, **plain)
    by_bytes = spec(**others, **dict.fromkeys(precision, Q_(1, "B")))
    by_bits = spec(**others, **dict.fromkeys(precision, Q_(8, "bit")))
    assert by_name == by_plain == by_bytes == by_bits
    # the other unit's reading of a common precision is refused, with both readings
    ambiguous = {a: (16 if spec.variables[a].unit == "B" else 2) for a in precision}
    with pytest.raises(calculator.InputError, match="bits"):
        spec(**others, **ambiguous)
    with pytest.raises(calculator.InputError, match=precision[0]):
        spec(**others, **dict.fromkeys(precision, "fp9"))


def test_weight_and_kv_bytes_take_the_same_precision_forms():
    # Section 10.2: a 70B model at FP16 is 140 GB; eq. 5: Llama-3.1-70B's KV is 320 KiB per token at 2 B.
    for bits in ("fp16", Q_(2, "B"), Q_(16, "bit")):
        assert calculator.weight_bytes(70e9, bits).m_as("GB") == pytest.approx(140)
        assert calculator.kv_bytes_per_token(80, 8, 128, bits).m_as("KiB/token") == pytest.approx(320)
    # plain numbers in each variable's unit: 16 bits per weight, 2 bytes per cached element (eq. 5 as printed)
    assert calculator.weight_bytes(70e9, 16).m_as("GB") == pytest.approx(140)
    assert calculator.kv_bytes_per_token(80, 8, 128, 2).m_as("B/token") == 327_680  # not 40,960 (2 bits)
    with pytest.raises(calculator.InputError, match="if 16 bits was meant"):
        calculator.kv_bytes_per_token(80, 8, 128, 16)


@pytest.mark.parametrize("empty", ["", "  ", None, float("nan")])
def test_a_missing_precision_is_an_error_not_bf16(empty):
    with pytest.raises(calculator.InputError, match="precision"):
        calculator.check_precision(empty)


def test_the_step_arrays_are_a_typed_structure_and_item_access_warns():
    arrays = calculator.step_arrays("llama-3.1-70b", "h100-sxm", "fp8", "bf16")
    assert isinstance(arrays, calculator.StepArrays)
    assert arrays.kv_bytes_per_token == 327680.0  # eq. 5: 2 x 80 layers x 8 heads x 128 x 2 B
    with pytest.warns(DeprecationWarning, match="attributes"):
        assert arrays["kv_bytes_per_token"] == 327680.0


def test_the_tensor_parallel_degree_has_one_name():
    arrays = calculator.step_arrays("llama-3.1-8b", "h100-sxm", "bf16")
    eff = calculator.engine_profile("vllm").efficiency_for("h100-sxm")
    new = calculator.iteration_seconds(arrays, eff, tensor_parallel=2, decode=8, context=1000)
    with pytest.warns(DeprecationWarning, match="tensor_parallel"):
        old = calculator.iteration_seconds(arrays, eff, tp=2, decode=8, context=1000)
    assert new == old > 0


# Quantity aliases (calculator.types) on the public signatures: the dimension an alias declares is the
# one the function's boundary check enforces. The model packages below annotate every argument whose
# check has a dimension; elsewhere an alias, where there is one, must match.
ANNOTATED_PACKAGES = ("batching", "memory", "parallelism", "queueing", "routing")


def _alias_units(function):
    import types
    import typing

    from calculator.types import alias_unit

    out = {}
    from public_calls import hints

    for argument, hint in hints(function).items():
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        units = [alias_unit(member) for member in (typing.get_args(hint) if union else (hint,))]
        units = [unit for unit in units if unit is not None]
        if units:
            out[argument] = units[0]
    return out


def _enforced_units(function):
    """Argument -> units its boundary enforces in ``magnitude(fn, "arg", arg, "unit", ...)`` calls.

    (A ``checked`` function's units are its aliases: one declaration, nothing to compare.)
    """
    import re

    source = inspect.getsource(inspect.unwrap(function))
    found = re.findall(r'magnitude\(\s*[^,()]+,\s*"(\w+)",\s*(?:\w+),\s*"([^"]*)"', source)
    parameters = inspect.signature(function).parameters
    return [(argument, unit) for argument, unit in found if argument in parameters]


def _public_functions():
    from calculator.formula import Formula

    for name in calculator.__all__:
        value = getattr(calculator, name)
        if callable(value) and not isinstance(value, type | Formula) and value.__module__.startswith("calculator."):
            yield name, value


@pytest.mark.parametrize(("name", "function"), list(_public_functions()), ids=lambda v: v if isinstance(v, str) else "")
def test_quantity_aliases_declare_the_dimension_the_boundary_checks(name, function):
    aliases = _alias_units(function)
    package = function.__module__.split(".")[1]
    for argument, unit in _enforced_units(function):
        if package in ANNOTATED_PACKAGES and Q_(1, unit).dimensionality:
            assert argument in aliases, f"{name}({argument}) is checked as {unit!r} but its annotation has no alias"
        if argument in aliases:
            declared, enforced = Q_(1, aliases[argument]), Q_(1, unit)
            counts = (ureg.dimensionless.dimensionality, ureg.token.dimensionality)
            if declared.dimensionality in counts and enforced.dimensionality in counts:
                continue  # a count of tokens is a plain number or a quantity of tokens alike
            assert declared.dimensionality == enforced.dimensionality, (
                f"{name}({argument}): the alias says {aliases[argument]!r}, the boundary checks {unit!r}"
            )


def test_the_model_packages_annotate_their_quantities():
    # A spot check that the aliases are there (the test above checks that they agree with the units).
    from calculator.queueing import mmc_mean_wait, queue_metrics
    from calculator.routing import kv_migration

    assert _alias_units(mmc_mean_wait) == {
        "arrival_rate": "request/s",
        "service_time": "s",
        "servers": "",
        "return": "s",
    }
    assert _alias_units(kv_migration)["context_tokens"] == "token"
    assert _alias_units(queue_metrics)["arrival_rate"] == "request/s"
