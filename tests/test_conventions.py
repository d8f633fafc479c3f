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
def test_every_precision_argument_takes_a_name_bits_or_bytes(name):
    spec = FORMULAS[name]
    precision = [a for a, v in spec.variables.items() if v.domain == "precision"]
    others = {a: (Q_(1, v.unit) if v.unit else 3) for a, v in spec.variables.items() if a not in precision}
    by_name = spec(**others, **dict.fromkeys(precision, "fp8"))
    by_bits = spec(**others, **dict.fromkeys(precision, 8))
    by_bytes = spec(**others, **dict.fromkeys(precision, Q_(1, "B")))
    assert by_name == by_bits == by_bytes
    with pytest.raises(calculator.InputError, match=precision[0]):
        spec(**others, **dict.fromkeys(precision, "fp9"))


def test_weight_and_kv_bytes_take_the_same_precision_forms():
    # Section 10.2: a 70B model at FP16 is 140 GB; eq. 5: Llama-3.1-70B's KV is 320 KiB per token at 2 B.
    for bits in ("fp16", 16, Q_(2, "B"), Q_(16, "bit")):
        assert calculator.weight_bytes(70e9, bits).m_as("GB") == pytest.approx(140)
        assert calculator.kv_bytes_per_token(80, 8, 128, bits).m_as("KiB/token") == pytest.approx(320)


@pytest.mark.parametrize("empty", ["", "  ", None, float("nan")])
def test_a_missing_precision_is_an_error_not_bf16(empty):
    with pytest.raises(calculator.InputError, match="precision"):
        calculator.check_precision(empty)


def test_the_step_arrays_are_a_typed_structure_and_item_access_warns():
    arrays = calculator.step_arrays("llama-3.1-70b", "h100-sxm", "fp8")
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
