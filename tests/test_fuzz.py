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
