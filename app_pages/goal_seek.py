"""Goal seek: pick any closed-form model, fix every input but one, and solve for it."""

import math

import streamlit as st

from app_pages import _common as ui
from calculator.errors import InputError, UnitsError
from calculator.formula import catalog

#: A starting value per domain for an input that neither the formula's example nor its signature gives.
STARTS = {"probability": 0.5, "fraction_open": 0.5, "positive_integer": 1.0}
#: What a value of each domain is, in words (the error of a target no value reaches).
DOMAIN_WORDS = {
    "positive": "a positive number",
    "nonnegative": "a number of at least 0",
    "probability": "a probability between 0 and 1",
    "fraction_open": "a fraction of at least 0 and below 1",
    "positive_integer": "a whole number of at least 1",
    "precision": "a positive precision",
    "any": "a number",
}
RESULT = "(the result: just evaluate)"
#: Formulas whose target the user has set (a typed value or a shared link); the others follow the inputs.
EDITED = "goal.edited"


@st.cache_resource(show_spinner="Loading the formula catalogue...")
def formulas():
    return catalog()


def _words(formula, name):
    spec = formula.result if name == formula.name else formula.variables[name]
    return spec.description or name.replace("_", " ")


def _describe(formula, name):
    """A variable's label: its description, capitalized (the name is in the input's help)."""
    words = _words(formula, name)
    return words[:1].upper() + words[1:]


def _start(formula, example, name):
    """The input's first value in its declared unit: the formula's worked example, else a value of its domain."""
    spec = formula.variables[name]
    if name in example:
        return _magnitude(example[name], spec.unit)
    return STARTS.get(spec.domain, 1.0)


def main():
    st.title("Goal seek")
    st.caption(
        "Every closed form of the library, solved for any of its inputs: fix the others and the result you want "
        "(in the sidebar). The inputs start from the chapter's worked example of the formula (a real model's "
        "values); the target follows the inputs until you type one. Symbolic roots where sympy finds them, "
        "otherwise a bracketing root finder on the model's domain (`calculator.formula.Formula.solve_for`)."
    )
    sc = ui.Scenario("goal")
    table = formulas()
    # The answer comes first: the formula, its unknown and every input sit in the sidebar (collapsed on a phone),
    # the solved value at the top of the page; a problem with the inputs is shown in its place.
    alert = st.empty()
    with st.sidebar:
        modules = sorted({key.split(".")[0] for key in table})
        module = sc.select("Chapter module", "module", modules, "memory")
        names = [key for key in table if key.startswith(f"{module}.")]
        # "Formula", not "Model": every other page's "Model" is the LLM. The link parameter stays "formula".
        key = sc.select(
            "Formula", "formula", names, "memory.kv_bytes_per_token",
            format_func=lambda k: f"{table[k].result.description or table[k].name} ({table[k].name})",
        )  # fmt: skip
        formula = table[key]
        for name in list(st.query_params):  # the previous formula's inputs are not this scenario's
            if name not in ("module", "formula") and not name.startswith(f"{formula.name}."):
                del st.query_params[name]
        unknown = sc.select(
            "Solve for", f"{formula.name}.unknown", [*formula.inputs, RESULT], formula.inputs[0],
            format_func=lambda n: n if n == RESULT else _describe(formula, n),
        )  # fmt: skip
        example = formula.example
        st.markdown("**Fix the others**")
        known = {}
        for name in formula.inputs:
            if name == unknown:
                continue
            known[name] = _input(sc, formula, name, _start(formula, example, name))
        target = None if unknown == RESULT else _target(sc, formula, unknown, known, example, alert)
    if unknown == RESULT:
        value = formula(**known)
        st.metric(_describe(formula, formula.name), ui.fmt(value, digits=6))
        sc.answered()
        _formula(formula, known)
        return
    if target is None:
        _formula(formula)
        return
    try:
        solution = formula.solve_for(unknown, **known, **{formula.name: target})
    except InputError:
        alert.error(_no_solution(formula, unknown, target))
        _formula(formula)
        return
    spec = formula.variables[unknown]
    solved = solution.to(spec.unit) if hasattr(solution, "to") else solution
    cols = st.columns(2)
    cols[0].metric(_describe(formula, unknown), ui.fmt(solved, digits=6), help=f"`{unknown}` of the formula")
    sc.answered()
    if spec.domain == "positive_integer" and float(solution) != math.floor(float(solution)):
        nearest = sorted({max(math.floor(float(solution)), 1), max(math.ceil(float(solution)), 1)})
        st.warning(
            f"{_describe(formula, unknown)} is a whole number in the model and no whole value gives the target "
            "exactly: the closest "
            f"feasible {'values are' if len(nearest) > 1 else 'value is'} {' and '.join(map(str, nearest))}; "
            f"the check below uses {nearest[-1]}."
        )
        solution = nearest[-1]
    check = formula(**known, **{unknown: solution})
    shown = check.to(target.units) if hasattr(check, "to") else check
    cols[1].metric(
        f"Check: {_words(formula, formula.name)}", ui.fmt(shown, digits=6),
        help="the formula evaluated at the solution",
    )  # fmt: skip
    _formula(formula, {**known, unknown: solution})


def _formula(formula, values=None):
    """The formula, its reference and, given its values, the equation with them substituted."""
    st.latex(formula.latex())
    st.caption(f"{formula.reference} · `{formula.__module__}.{formula.name}`")
    if values is not None:
        with st.expander("Show the math", expanded=True):
            st.latex(formula.latex(**values))


def _target(sc, formula, unknown, known, example, alert):
    """The target: the result of the current inputs (the unknown at its example) until the user types one.

    Returns ``None`` (with an error box in ``alert``, the page's answer place) when the inputs give no value of
    the result.
    """
    prefix = f"{formula.name}.{formula.name}"
    key, computed = sc.key(prefix), f"goal.computed.{formula.name}"
    edited = st.session_state.setdefault(EDITED, set())
    if formula.name not in edited:
        if key not in st.session_state and prefix in st.query_params:
            edited.add(formula.name)  # a shared link's target (the page leaves a computed one out of the link)
        elif key in st.session_state and st.session_state[key] != st.session_state.get(computed):
            edited.add(formula.name)  # typed by the user
    if formula.name not in edited:
        start = example[unknown] if unknown in example else _default_quantity(formula, unknown)
        try:
            value = formula(**known, **{unknown: start})
        except InputError as exc:
            alert.error(
                f"These inputs give no {_words(formula, formula.name)} with {_words(formula, unknown)} at "
                f"{ui.fmt(start)}: {ui.plain(_reason(exc))}. Change one of the inputs."
            )
            return None
        unit = st.session_state.get(sc.key(f"{prefix}.unit"), sc.saved.get(f"{prefix}.unit", formula.result.unit))
        st.session_state[key] = st.session_state[computed] = _magnitude(value, _unit_or(value, unit))
    target = _input(sc, formula, formula.name, st.session_state.get(key, 0.0), result=True)
    if formula.name in edited:
        st.button(
            "Recompute the target from the inputs", key=f"goal.recompute.{formula.name}",
            on_click=_recompute, args=(formula.name, key, computed),
        )  # fmt: skip
    elif prefix in st.query_params:
        del st.query_params[prefix]  # a computed target is not part of the shared scenario
    return target


def _recompute(name, key, computed):
    """Hand the target back to the inputs: forget the user's value."""
    st.session_state[EDITED].discard(name)
    st.session_state[computed] = st.session_state.get(key)


def _unit_or(value, unit):
    """``unit`` if ``value`` converts to it (the unit the user typed for the target), else the value's own unit."""
    if not hasattr(value, "to"):
        return None
    try:
        value.to(ui.parse_quantity(1.0, unit, "unit").units)
    except (UnitsError, InputError, ValueError, TypeError, AttributeError, KeyError):
        return str(value.units)
    return unit


def _no_solution(formula, unknown, target):
    spec = formula.variables[unknown]
    kind = DOMAIN_WORDS.get(spec.domain, "a number")
    return (
        f"No value of {ui.plain(_words(formula, unknown))} ({kind}) gives a {ui.plain(_words(formula, formula.name))} "
        f"of {ui.plain(ui.fmt(target))} with these values. Change the target or one of the other inputs, or "
        f"solve for another input."
    )


def _reason(exc):
    """A library error without the function and argument names it starts with."""
    return str(exc).split("): ", 1)[-1].replace(" for these arguments", "")


def _default_quantity(formula, name):
    spec = formula.variables[name]
    start = STARTS.get(spec.domain, 1.0)
    return ui.parse_quantity(start, spec.unit, name) if spec.unit else start


def _magnitude(value, unit):
    if hasattr(value, "m_as"):
        return float(value.m_as(unit)) if unit else float(value.m_as(value.units))
    return float(value)


def _input(sc, formula, name, default, result=False):
    spec = formula.result if result else formula.variables[name]
    label = f"Target: {_words(formula, name)}" if result else _describe(formula, name)
    tip = f"`{name}` of the formula"
    prefix = f"{formula.name}.{name}"
    if not spec.unit:
        integer = spec.domain == "positive_integer" and not result
        bounds = {"min_value": 1, "max_value": 10**12} if integer else {"min_value": -1e300, "max_value": 1e300}
        if spec.domain in ("probability", "fraction_open") and not result:
            bounds = {"min_value": 0.0, "max_value": 1.0}
        return sc.number(label, prefix, int(default) if integer else default, integer=integer, help=tip, **bounds)
    value_column, unit_column = st.columns([2, 1])  # in the sidebar: room for a unit such as byte/token
    value = sc.number(label, prefix, default, min_value=-1e300, max_value=1e300, where=value_column, help=tip)
    unit = sc.text("unit", f"{prefix}.unit", spec.unit, max_chars=40, where=unit_column)
    return ui.parse_quantity(value, unit, _words(formula, name))


ui.run(main)
