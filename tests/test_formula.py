"""The formula mechanism: one declaration gives a checked numeric function, LaTeX and a solver."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculator import Q_, InputError, UnitsError
from calculator.formula import Formula, catalog, formula, var
from calculator.units import ureg


@formula(
    result=var("s", "t"),
    reference="test: a formula sympy cannot invert in closed form",
    size=var("B", "x"),
    rate=var("B/s", "r"),
)
def _transcendental(size, rate):
    # x/r + (x/r)^(1/3) * e^(x / (r * 1 s)) has no closed-form inverse in x.
    ratio = size / rate
    from calculator.formula import exp

    return ratio + ratio ** (1 / 3) * exp(ratio)


def test_every_library_formula_has_coherent_units():
    formulas = catalog()
    assert {"economics.lifetime_cost", "memory.kv_bytes_per_token", "memory.weight_bytes"} <= set(formulas)
    for declared in formulas.values():
        declared.check_dimensions()


def test_catalog_keys_name_the_module_or_package_directly_under_calculator():
    import importlib

    formulas = catalog()
    assert all(key.count(".") == 1 for key in formulas)
    # Formulas defined in a package's submodules keep the package's key (docs and links cite these).
    for key, module in [
        ("batching.batch_service_time", "calculator.batching.service"),
        ("batching.window_batch_size", "calculator.batching.dynamic"),
        ("memory.kv_bytes_per_token", "calculator.memory.kv"),
        ("memory.weight_bytes", "calculator.memory.weights"),
        ("memory.precision_dividend", "calculator.memory.dividend"),
        ("memory.prefix_cache_tokens", "calculator.memory.prefix"),
        ("parallelism.ring_allreduce_time", "calculator.parallelism.collectives"),
        ("phases.ridge_point", "calculator.phases.intensity"),
        ("phases.roofline_time", "calculator.phases.flops"),
        ("phases.hybrid_iteration_time", "calculator.phases.chunked"),
        ("memory.kv_handoff_time", "calculator.memory.hierarchy"),
        ("queueing.kingman_wait", "calculator.queueing.ggc"),
        ("routing.wasted_token_fraction", "calculator.routing.resilience"),
    ]:
        assert formulas[key].__module__ == module
        package, name = key.split(".")
        assert getattr(importlib.import_module(f"calculator.{package}"), name) is formulas[key]


def test_check_dimensions_catches_incoherent_declarations():
    @formula(result=var("GB", "y"), reference="test", size=var("B", "x"))
    def wrong_scale(size):
        return size

    @formula(result=var("s", "y"), reference="test", size=var("B", "x"))
    def wrong_dimension(size):
        return size

    with pytest.raises(UnitsError, match="not coherent"):
        wrong_scale.check_dimensions()
    with pytest.raises(UnitsError, match="dimension"):
        wrong_dimension.check_dimensions()


def test_declaration_must_match_the_signature():
    with pytest.raises(TypeError, match="do not match"):

        @formula(result=var("s", "t"), reference="test", a=var("s", "a"))
        def mismatched(b):
            return b


def test_numeric_function_broadcasts_and_converts_units():
    from calculator.memory import kv_bytes_per_token

    layers = np.array([32, 80])[:, None]
    bytes_per_element = Q_(np.array([16, 8]), "bit")  # 2 B and 1 B, given in bits
    out = kv_bytes_per_token(layers, 8, 128, bytes_per_element)
    assert out.units == ureg.parse_units("B/token")
    assert out.shape == (2, 2)
    assert out.magnitude == pytest.approx(np.array([[131072, 65536], [327680, 163840]]))


def test_bad_inputs_name_the_argument():
    from calculator.memory import kv_bytes_per_token

    # A precision takes a name, bits (a plain number) or bytes; a time is none of them.
    with pytest.raises(UnitsError, match=r"kv_bytes_per_token\(\): argument 'bytes_per_element' is a precision"):
        kv_bytes_per_token(80, 8, 128, Q_(2, "s"))
    with pytest.raises(UnitsError, match=r"argument 'layers' needs dimension dimensionless"):
        kv_bytes_per_token(Q_(80, "s"), 8, 128, Q_(2, "B"))
    with pytest.raises(InputError, match="argument 'kv_heads' must be an integer >= 1, got 0"):
        kv_bytes_per_token(80, 0, 128, Q_(2, "B"))
    with pytest.raises(InputError, match=r"argument 'head_dim' must be an integer >= 1, got 1\.5"):
        kv_bytes_per_token(80, 8, np.array([128, 1.5]), Q_(2, "B"))
    with pytest.raises(InputError, match=r"argument 'layers' contains NaN"):
        kv_bytes_per_token(np.nan, 8, 128, Q_(2, "B"))
    with pytest.raises(InputError, match="must be a number"):
        kv_bytes_per_token("80", 8, 128, Q_(2, "B"))


def test_latex_symbolic_and_substituted():
    from calculator.economics import lifetime_cost
    from calculator.memory import weight_bytes

    assert lifetime_cost.latex() == r"C_{\mathrm{life}} = C_{\mathrm{train}} + c_{q} T_{\mathrm{deploy}} \lambda"
    text = lifetime_cost.latex(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(365, "day"), Q_(5e7, "request/day"))
    # An aligned block, so that display math (KaTeX, notebooks) breaks the Napkin Math lines.
    assert text.startswith("\\begin{aligned}\n") and text.endswith("\n\\end{aligned}")
    lines = text.split("\n")[1:-1]
    assert len(lines) == 3
    assert lines[0].startswith(r"C_{\mathrm{life}} &= C_{\mathrm{train}}")
    assert r"2\times 10^{6}\ \mathrm{USD}" in lines[1]
    assert r"365\ \mathrm{d}" in lines[1]
    assert lines[2] == r"&= 2.025\times 10^{7}\ \mathrm{USD}"
    assert weight_bytes.latex(70e9, 16).split("\n")[-2] == r"&= 140\ \mathrm{GB}"
    with pytest.raises(TypeError, match="missing"):
        lifetime_cost.latex(Q_(2e6, "USD"))


def test_solve_uses_the_numeric_root_finder_when_sympy_has_no_closed_form():
    size = Q_(3.0, "B")
    rate = Q_(1.5, "B/s")
    t = _transcendental(size, rate)
    assert _transcendental._closed_forms("size") == ()
    back = _transcendental.solve_for("size", _transcendental=t, rate=rate)
    assert back.to("B").magnitude == pytest.approx(3.0, rel=1e-9)


def test_solve_reports_no_solution_in_the_domain():
    from calculator.economics import lifetime_cost

    with pytest.raises(InputError, match="no value of arrival_rate"):
        lifetime_cost.solve_for(
            "arrival_rate",
            lifetime_cost=Q_(1e6, "USD"),  # less than the training cost alone
            training_cost=Q_(2e6, "USD"),
            cost_per_query=Q_(0.001, "USD/request"),
            duration=Q_(365, "day"),
        )


def test_solve_checks_its_arguments():
    from calculator.economics import lifetime_cost

    with pytest.raises(InputError, match="unknown 'speed'"):
        lifetime_cost.solve_for("speed", lifetime_cost=Q_(1, "USD"))
    with pytest.raises(TypeError, match="give exactly"):
        lifetime_cost.solve_for("duration", lifetime_cost=Q_(1, "USD"))


positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(share=st.floats(min_value=1e-3, max_value=0.999), unit_cost=positive, days=positive, rate=positive)
def test_lifetime_cost_round_trips_through_every_input(share, unit_cost, days, rate):
    from calculator.economics import lifetime_cost

    # Each term must be visible in the total at float precision for its inputs to be recoverable: the training
    # cost is drawn as a share of the total (filtering random totals instead rejected most examples, and
    # Hypothesis can fail a run that filters too much).
    train = share / (1 - share) * unit_cost * 1e-6 * rate * days * 86_400
    inputs = {
        "training_cost": Q_(train, "USD"),
        "cost_per_query": Q_(unit_cost * 1e-6, "USD/request"),
        "duration": Q_(days, "day"),
        "arrival_rate": Q_(rate, "request/s"),
    }
    total = lifetime_cost(**inputs)
    assert train / total.m_as("USD") == pytest.approx(share, rel=1e-9)
    for name, value in inputs.items():
        others = {k: v for k, v in inputs.items() if k != name}
        solved = lifetime_cost.solve_for(name, lifetime_cost=total, **others)
        assert solved.to(value.units).magnitude == pytest.approx(value.magnitude, rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    layers=st.integers(1, 200),
    kv_heads=st.integers(1, 128),
    head_dim=st.sampled_from([32, 64, 96, 128, 256]),
    element=st.sampled_from([0.5, 1, 2, 4]),
)
def test_kv_bytes_per_token_round_trips_through_every_input(layers, kv_heads, head_dim, element):
    from calculator.memory import kv_bytes_per_token

    inputs = {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim, "bytes_per_element": Q_(element, "B")}
    per_token = kv_bytes_per_token(**inputs)
    for name, value in inputs.items():
        others = {k: v for k, v in inputs.items() if k != name}
        solved = kv_bytes_per_token.solve_for(name, kv_bytes_per_token=per_token, **others)
        expected = value.magnitude if hasattr(value, "magnitude") else value
        got = solved.to("B").magnitude if hasattr(solved, "magnitude") else solved
        assert got == pytest.approx(expected, rel=1e-9)


def test_solve_broadcasts_over_arrays():
    from calculator.memory import kv_bytes_per_token

    per_token = Q_(np.array([327680, 163840, 2621440]), "B/token")
    layers = kv_bytes_per_token.solve_for(
        "kv_heads", kv_bytes_per_token=per_token, layers=80, head_dim=128, bytes_per_element=Q_(2, "B")
    )
    assert layers == pytest.approx([8, 4, 64])


def test_formula_object_describes_itself():
    from calculator.memory import kv_bytes_per_token

    assert isinstance(kv_bytes_per_token, Formula)
    assert kv_bytes_per_token.inputs == ("layers", "kv_heads", "head_dim", "bytes_per_element")
    assert "Eq. 5" in kv_bytes_per_token.reference
    assert "KV-cache bytes per token" in kv_bytes_per_token.__doc__
    assert kv_bytes_per_token.numeric(layers=80, kv_heads=8, head_dim=128, bytes_per_element=2) == 327680


def test_solving_for_a_count_never_returns_less_than_one():
    from calculator.memory import kv_bytes_per_token

    with pytest.raises(InputError, match=r"no value of layers in its domain \(positive_integer\)"):
        kv_bytes_per_token.solve_for(
            "layers", kv_bytes_per_token=Q_(100, "B/token"), kv_heads=8, head_dim=128, bytes_per_element=Q_(2, "B")
        )


def test_a_result_outside_its_range_is_an_impossible_case():
    from calculator.cases import saturating_surge

    assert saturating_surge(0.8) == pytest.approx(0.25)
    with pytest.raises(InputError, match=r"saturating_surge\(\): the arguments give -0.5, outside the range"):
        saturating_surge(2.0)  # a fleet at 200 % utilization has no surge left to absorb


def test_latex_of_an_impossible_case_still_shows_the_substitution():
    from calculator.cases import saturating_surge

    text = saturating_surge.latex(2.0)
    assert r"\left(2\right)" in text
    assert r"\text{the arguments give -0.5, outside the range" in text


def test_token_counts_accept_a_plain_number_or_a_quantity_of_tokens():
    from calculator import kv_cache_bytes, wasted_token_fraction
    from calculator.errors import UnitsError

    per_token = Q_(320, "kB/token")
    assert kv_cache_bytes(batch=8, context=Q_(4096, "token"), kv_per_token=per_token) == kv_cache_bytes(
        batch=8, context=4096, kv_per_token=per_token
    )
    assert wasted_token_fraction(10, 100) == wasted_token_fraction(Q_(10, "token"), Q_(100, "token"))
    with pytest.raises(UnitsError, match="'useful_tokens'"):
        wasted_token_fraction(Q_(10, "B"), 100)


def test_every_library_formula_has_a_worked_example_of_every_argument_that_evaluates():
    # Front ends (the Goal seek page) start from the example: every argument needs a value with the declared
    # dimension, inside its domain, and the example must give a value of the result (not an impossible case).
    for key, declared in catalog().items():
        example = declared.example
        assert list(example) == list(declared.variables), key
        result = declared(**example)
        assert np.isfinite(np.asarray(result.m_as(declared.result.unit or "") if hasattr(result, "m_as") else result))


def test_the_kv_example_is_llama_3_1_70b_of_the_registry():
    from calculator.memory import kv_bytes_per_token
    from calculator.registry import load_registry

    model = load_registry().model("llama-3.1-70b")
    example = kv_bytes_per_token.example
    assert (example["layers"], example["kv_heads"], example["head_dim"]) == (
        model.layers,
        model.kv_heads,
        model.head_dim,
    )
    assert example["bytes_per_element"] == Q_(2, "B")  # BF16
    assert kv_bytes_per_token(**example) == Q_(2 * 80 * 8 * 128 * 2, "B/token")  # Napkin Math 10.5: 327,680 B


def test_an_example_may_only_name_arguments_and_falls_back_to_the_defaults():
    with pytest.raises(TypeError, match="example names no argument"):
        formula(result=var("s", "t"), reference="test", size=var("B", "x"), example={"sise": "1 B"})(lambda size: size)

    @formula(result=var("s", "t"), reference="test", size=var("B", "x"), rate=var("B/s", "r"), example={"size": "2 kB"})
    def _transfer(size, rate=4.0):
        return size / rate

    assert _transfer.example == {"size": Q_(2, "kB"), "rate": Q_(4.0, "B/s")}
    assert _transfer(**_transfer.example) == Q_(500, "s")


def test_a_whole_number_unknown_solves_to_the_integer_not_a_rounding_error():
    from calculator.parallelism import ring_allreduce_time

    args = {"message": Q_(8, "MB"), "bandwidth": Q_(450, "GB/s"), "latency": Q_(0.5, "us"), "floor": Q_(0, "s")}
    time = ring_allreduce_time(devices=8, **args)
    devices = ring_allreduce_time.solve_for("devices", ring_allreduce_time=time, **args)
    assert devices == 8 and float(devices).is_integer()  # 7.999999999999838 before
    # a genuinely fractional answer stays fractional (the page then offers the nearest whole values)
    between = ring_allreduce_time.solve_for("devices", ring_allreduce_time=time * 0.99, **args)
    assert not float(between).is_integer()


def test_a_closed_form_with_a_special_function_falls_back_to_the_root_finder():
    # sympy solves speedup for the draft length with LambertW, which numpy cannot evaluate (a NameError before)
    from calculator.speculative import speedup

    gain = speedup(0.7, 5, 0.05)
    k = speedup.solve_for(
        "draft_length", speedup=gain, acceptance=0.7, draft_cost_ratio=0.05, verification_cost_ratio=1
    )
    assert speedup(0.7, k, 0.05) == pytest.approx(gain, rel=1e-9)
