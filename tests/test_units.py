"""The unit system: information is a dimension, decimal and binary prefixes, custom units, check_units."""

import numpy as np
import pint
import pytest

from calculator import Q_, UnitsError, check_units, ureg


def test_information_is_a_real_dimension():
    with pytest.raises(pint.DimensionalityError):
        Q_(80, "GB") + 1
    assert Q_(80, "GB").dimensionality == ureg.parse_units("B").dimensionality
    assert Q_(80, "GB").dimensionality != ureg.dimensionless.dimensionality


def test_application_registry_is_ours():
    assert pint.get_application_registry().Quantity(1, "GB").dimensionality == Q_(1, "B").dimensionality


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (Q_(1, "GB"), "B", 1e9),
        (Q_(1, "GiB"), "B", 2**30),
        (Q_(80, "GiB"), "GB", 85.89934592),  # the chapter's "registered byte capacity" per H100
        (Q_(8 * 80, "GiB"), "GB", 687.19476736),  # Napkin Math 10.5 prints 687.2 GB for 8 GPUs
        (Q_(1, "TB/s"), "GB/s", 1000),
        (Q_(1, "TiB"), "GiB", 1024),
        (Q_(100, "Gb/s"), "GB/s", 12.5),  # network rates in gigabits (Table 17: 100 Gb/s = 12.5 GB/s)
        (Q_(200, "Gbit/s"), "GB/s", 25),
        (Q_(8, "bit"), "B", 1),
    ],
)
def test_decimal_and_binary_prefixes(value, unit, expected):
    assert value.to(unit).magnitude == pytest.approx(expected, rel=1e-12)


def test_custom_units_have_their_own_dimensions():
    assert Q_(989, "TFLOP/s").to("FLOP/s").magnitude == pytest.approx(989e12)
    assert Q_(1, "query/s").to("request/hour").magnitude == pytest.approx(3600)
    assert Q_(2, "USD/hour").to("USD/day").magnitude == pytest.approx(48)
    for a, b in [("FLOP", "B"), ("token", "request"), ("USD", ""), ("token", "")]:
        with pytest.raises(pint.DimensionalityError):
            Q_(1, a).to(b)


def test_year_is_julian_so_cost_formulas_take_days_explicitly():
    assert Q_(1, "year").to("day").magnitude == pytest.approx(365.25)


@check_units(arrival_rate="request/s", service_time="s")
def _utilization(arrival_rate, service_time):
    return (arrival_rate * service_time).to("request")


def test_check_units_accepts_any_unit_of_the_dimension():
    assert _utilization(Q_(100, "request/s"), Q_(5, "ms")).magnitude == pytest.approx(0.5)
    assert _utilization(Q_(6000, "request/min"), Q_(0.005, "s")).magnitude == pytest.approx(0.5)
    arrays = _utilization(Q_(np.array([100, 200]), "request/s"), Q_(5, "ms"))
    assert arrays.magnitude == pytest.approx([0.5, 1.0])


def test_check_units_error_names_function_argument_dimension_and_value():
    with pytest.raises(UnitsError) as info:
        _utilization(Q_(100, "request/s"), Q_(5, "GB"))
    message = str(info.value)
    assert "_utilization()" in message
    assert "'service_time'" in message
    assert "[time]" in message
    assert "5 GB" in message and "[information]" in message


def test_check_units_rejects_plain_numbers_for_dimensional_arguments():
    with pytest.raises(UnitsError, match=r"argument 'arrival_rate' needs dimension 1 / \[time\].*request/s.*plain int"):
        _utilization(100, Q_(5, "ms"))


def test_units_error_is_a_type_error():
    assert issubclass(UnitsError, TypeError)


def test_checked_converts_by_the_signatures_aliases_and_checks_domains():
    from collections.abc import Sequence

    import numpy as np

    from calculator._support import arg, checked, checked_arguments, one
    from calculator.errors import InputError
    from calculator.types import Count, Rate, Time

    @checked(service_time="positive", rounds=one(), queue=arg(empty=True), deadline="positive+inf")
    def f(
        arrival_rate: Rate,
        service_time: Time,
        rounds: Count,
        queue: Count = (),
        deadline: Time | None = None,
        times: Sequence[Time] = (),
    ):
        return arrival_rate, service_time, rounds, queue, deadline, times

    rate, service, rounds, queue, deadline, times = f(Q_(2, "1/s"), Q_(40, "ms"), 3)
    assert (rate, service, rounds) == (2.0, 0.04, 3.0) and np.size(queue) == 0 and deadline is None
    assert times == ()  # a sequence of times is not one time: left to the body
    assert f(Q_(2, "1/s"), Q_(40, "ms"), 3, deadline=Q_(np.inf, "s"))[4] == np.inf
    assert set(checked_arguments(f)) == {"arrival_rate", "service_time", "rounds", "queue", "deadline"}
    with pytest.raises(UnitsError, match="'service_time' needs dimension"):
        f(Q_(2, "1/s"), Q_(40, "GB"), 3)
    with pytest.raises(InputError, match="'service_time' must be > 0"):
        f(Q_(2, "1/s"), Q_(0, "ms"), 3)
    with pytest.raises(InputError, match="'rounds' must be one number"):
        f(Q_(2, "1/s"), Q_(40, "ms"), [3, 4])
    with pytest.raises(InputError, match="'rounds' must be an integer >= 1"):
        f(Q_(2, "1/s"), Q_(40, "ms"), 2.5)
    with pytest.raises(InputError, match="'arrival_rate' must be a number or a non-empty array"):
        f(Q_([], "1/s"), Q_(40, "ms"), 3)
    with pytest.raises(UnitsError, match="'arrival_rate' is required"):
        f(None, Q_(40, "ms"), 3)
    with pytest.raises(InputError, match="'arrival_rate' contains NaN"):
        f(Q_(np.nan, "1/s"), Q_(40, "ms"), 3)
    with pytest.raises(TypeError, match="no arguments named"):
        checked(nothing="positive")(f.__wrapped__)


def _table(registry, names):
    """The root units and factor of each of ``names``, and every dimension, as plain values to compare."""
    from pint.util import UnitsContainer

    out = {}
    for name in names:
        factor, root = registry._get_root_units(UnitsContainer({name: 1}))
        out[name] = (factor, str(root))
    return out, sorted(registry._dimensions)


def test_the_cached_registry_is_the_parsed_one(tmp_path):
    from calculator.units import _build_registry

    parsed = _build_registry(None)
    first = _build_registry(tmp_path)  # writes pint's cache
    assert sorted(p.suffix for p in (tmp_path / "pint").iterdir()) == [".json", ".json", ".pickle", ".pickle"]
    again = _build_registry(tmp_path)  # reads it
    # Building pint's cache also records the prefixed units it met on the way (kilometer...): compare the
    # units the text defines.
    names = list(parsed._units)
    expected = _table(parsed, names)
    assert _table(first, names) == expected and _table(again, names) == expected
    assert again.Quantity(100, "Gb/s").to("GB/s").magnitude == pytest.approx(12.5)
    assert str(again.Quantity(1, "token/request").dimensionality) == "[token]"


def test_a_damaged_cache_falls_back_to_parsing(tmp_path):
    from calculator.units import _build_registry

    _build_registry(tmp_path)
    for pickle_file in (tmp_path / "pint").glob("*.pickle"):
        pickle_file.write_bytes(pickle_file.read_bytes()[:100])  # as another process half-way through writing it
    registry = _build_registry(tmp_path)
    assert registry.Quantity(1, "GiB").to("byte").magnitude == 2**30
    (tmp_path / "ro").write_text("a file where the folder should be")
    assert _build_registry(tmp_path / "ro").Quantity(8, "bit").to("byte").magnitude == 1


def test_the_cache_folder_is_chosen_by_the_environment(monkeypatch, tmp_path):
    from calculator.units import CACHE_ENV, cache_folder

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert cache_folder() == tmp_path
    monkeypatch.setenv(CACHE_ENV, "")
    assert cache_folder() is None
    monkeypatch.delenv(CACHE_ENV)
    assert cache_folder().name == "servecalc"
