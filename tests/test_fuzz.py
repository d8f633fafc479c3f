"""Every public function against hostile arguments, and the user-text parsers against arbitrary text.

For each function the fuzz harness can call (``tests/public_calls.py``: about three quarters of the public
API), each argument in turn becomes None, NaN, infinity, zero, a negative, 1e300, 1e-300, a string,
an empty list, a boolean or a quantity of the wrong dimension (``tests/fuzz_calls.py``). The call may
raise one of the project's errors or return; it may not raise anything else, take over 10 s, or return
NaN when every argument was a finite number of the right type. (An infeasible plan's row in a frame
has no values, by design.)
"""

from __future__ import annotations

import warnings

import pytest
from fuzz_calls import CallTimeoutError, cases, has_nan, time_limit
from hypothesis import given, settings
from hypothesis import strategies as st
from public_calls import public_functions, valid_call

import calculator as c
from calculator._support import count
from calculator.errors import CalculatorError, InputError, UnitsError

FUNCTIONS = public_functions()
CASES: dict[str, list] = {}
for _name, _argument, _label, _value, _finite in cases():
    CASES.setdefault(_name, []).append((_argument, _label, _value, _finite))


def test_the_fuzz_reaches_most_of_the_api():
    assert len(CASES) >= 0.75 * len(FUNCTIONS) and sum(map(len, CASES.values())) > 8000


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_arguments_give_the_projects_errors_or_honest_results(name):
    problems = []
    for argument, label, value, finite in CASES[name]:
        call = {**valid_call(name), argument: value}
        try:
            with warnings.catch_warnings(), time_limit(10):
                warnings.simplefilter("ignore")
                result = FUNCTIONS[name](**call)
        except CalculatorError:
            continue
        except CallTimeoutError:
            problems.append(f"{argument}={label}: over 10 s")
            continue
        except Exception as error:
            problems.append(f"{argument}={label}: {type(error).__name__}: {str(error)[:120]}")
            continue
        if finite and has_nan(result):
            problems.append(f"{argument}={label}: NaN in the result")
    assert not problems, f"{name}: " + "; ".join(problems)


@settings(max_examples=300, deadline=1000)
@given(st.text(max_size=150))
def test_the_quantity_parser_takes_any_text_quickly(text):
    try:
        value = c.parse_quantity(text, "GB")
    except UnitsError as error:
        assert len(str(error)) < 1000
    else:
        assert value.dimensionality == c.ureg.parse_units("GB").dimensionality


@settings(max_examples=300, deadline=1000)
@given(
    st.one_of(
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.none(),
        st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    )
)
def test_a_count_is_a_whole_number_in_range_or_an_input_error(value):
    try:
        result = count("f", "n", value)
    except (InputError, UnitsError) as error:
        assert "'n'" in str(error)
    else:
        values = [result] if isinstance(result, int) else list(result)
        assert all(isinstance(v, int | type(values[0])) and 1 <= v <= 2**53 for v in values)


#: Building blocks that take trusted, already checked values by design (not user input): the math helpers
#: formula bodies are written with, the plain-array kernel pricing of the step model, result rendering,
#: type-alias helpers and the calibration fit over the project's own tables. Their callers check the input.
BUILDING_BLOCKS = frozenset(
    {
        "ceil", "exp", "floor", "log", "sqrt", "minimum", "maximum", "per", "var", "check_domain",
        "gemm_seconds", "grouped_gemm_seconds", "moe_seconds", "prefill_attention_seconds", "decode_attention_seconds",
        "allreduce_seconds", "iteration_seconds", "max_batch_numeric",
        "flatten", "frame_columns", "parse_label", "column_label", "plain", "describe_value", "shown",
        "alias_for", "alias_unit", "alias_dimension", "dimension_of", "fit_profiles", "prediction_errors", "calibrate",
        "fit_client_overheads",
    }
)  # fmt: skip


@pytest.mark.parametrize("name", sorted(set(FUNCTIONS) - set(CASES) - BUILDING_BLOCKS))
def test_functions_without_a_generated_call_refuse_hostile_arguments(name):
    # Every required argument at once: missing, text, NaN, an empty list. Only the project's errors.
    import inspect

    function = FUNCTIONS[name]
    parameters = [
        p for p in inspect.signature(function).parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]  # fmt: skip
    for hostile in (None, "abc", float("nan"), []):
        positional = [hostile for p in parameters if p.kind is p.POSITIONAL_ONLY]
        keywords = {p.name: hostile for p in parameters if p.kind is not p.POSITIONAL_ONLY}
        try:
            with warnings.catch_warnings(), time_limit(10):
                warnings.simplefilter("ignore")
                FUNCTIONS[name](*positional, **keywords)
        except CalculatorError:
            continue
        except CallTimeoutError:
            pytest.fail(f"{name}: {hostile!r} ran over 10 s")
        except Exception as error:
            pytest.fail(f"{name}({hostile!r}): {type(error).__name__}: {str(error)[:160]}")
