"""Goal seek: pick any closed-form model, fix every input but one, and solve for it."""

import inspect
import math

import streamlit as st

from app_pages import _common as ui
from calculator.formula import catalog

#: A starting value per domain for inputs without a default in the formula's signature.
STARTS = {"probability": 0.5, "fraction_open": 0.5, "positive_integer": 1.0}
RESULT = "(the result: just evaluate)"


@st.cache_resource(show_spinner="Loading the formula catalogue...")
def formulas():
    return catalog()


def _start(formula, name):
    default = inspect.signature(formula.func).parameters[name].default
    if default is not inspect.Parameter.empty:
        return float(default)
    return STARTS.get(formula.variables[name].domain, 1.0)


def _describe(formula, name):
    spec = formula.result if name == formula.name else formula.variables[name]
    words = spec.description or name.replace("_", " ")
    return f"{name}: {words}"


def main():
    st.title("Goal seek")
    st.caption(
        "Every closed form of the library, solved for any of its inputs: fix the others and the result you want. "
        "Symbolic roots where sympy finds them, otherwise a bracketing root finder on the model's domain "
        "(`calculator.formula.Formula.solve_for`)."
    )
    sc = ui.Scenario("goal")
    table = formulas()
    modules = sorted({key.split(".")[0] for key in table})
    a, b = st.columns([1, 2])
    module = sc.select("Chapter module", "module", modules, "memory", where=a)
    names = [key for key in table if key.startswith(f"{module}.")]
    key = sc.select(
        "Model", "formula", names, "memory.kv_bytes_per_token", where=b,
        format_func=lambda k: f"{table[k].result.description or table[k].name} ({table[k].name})",
    )  # fmt: skip
    formula = table[key]
    st.latex(formula.latex())
    st.caption(f"{formula.reference} · `{formula.__module__}.{formula.name}`")

    unknown = sc.select(
        "Solve for", f"{formula.name}.unknown", [*formula.inputs, RESULT], formula.inputs[0],
        format_func=lambda n: n if n == RESULT else _describe(formula, n),
    )  # fmt: skip
    st.markdown("**Fix the others**")
    known = {}
    for name in formula.inputs:
        if name == unknown:
            continue
        known[name] = _input(sc, formula, name, _start(formula, name))
    if unknown == RESULT:
        value = formula(**known)
        st.metric(f"{formula.name}", ui.fmt(value, digits=6))
        with st.expander("Show the math", expanded=True):
            st.latex(formula.latex(**known))
        return

    default_target = formula(**{**known, unknown: _default_quantity(formula, unknown)})
    target = _input(sc, formula, formula.name, _magnitude(default_target, formula.result.unit), result=True)
    solution = formula.solve_for(unknown, **known, **{formula.name: target})
    spec = formula.variables[unknown]
    solved = solution.to(spec.unit) if hasattr(solution, "to") else solution
    cols = st.columns(2)
    cols[0].metric(f"{unknown}", ui.fmt(solved, digits=6))
    if spec.domain == "positive_integer" and float(solution) != math.floor(float(solution)):
        nearest = sorted({max(math.floor(float(solution)), 1), max(math.ceil(float(solution)), 1)})
        st.warning(
            f"{unknown} is a whole number in the model and no whole value gives the target exactly: the closest "
            f"feasible {'values are' if len(nearest) > 1 else 'value is'} {' and '.join(map(str, nearest))}; "
            f"the check below uses {nearest[-1]}."
        )
        solution = nearest[-1]
    check = formula(**known, **{unknown: solution})
    shown = check.to(target.units) if hasattr(check, "to") else check
    cols[1].metric(f"check: {formula.name}", ui.fmt(shown, digits=6))
    with st.expander("Show the math", expanded=True):
        st.latex(formula.latex(**known, **{unknown: solution}))
        st.caption(f"{formula.reference}")


def _default_quantity(formula, name):
    spec = formula.variables[name]
    start = _start(formula, name)
    return ui.parse_quantity(start, spec.unit, name) if spec.unit else start


def _magnitude(value, unit):
    return float(value.m_as(unit)) if hasattr(value, "m_as") else float(value)


def _input(sc, formula, name, default, result=False):
    spec = formula.result if result else formula.variables[name]
    label = f"{'Target ' if result else ''}{_describe(formula, name)}"
    prefix = f"{formula.name}.{name}"
    if not spec.unit:
        integer = spec.domain == "positive_integer" and not result
        bounds = {"min_value": 1, "max_value": 10**12} if integer else {"min_value": -1e300, "max_value": 1e300}
        if spec.domain in ("probability", "fraction_open") and not result:
            bounds = {"min_value": 0.0, "max_value": 1.0}
        return sc.number(label, prefix, int(default) if integer else default, integer=integer, **bounds)
    value_column, unit_column = st.columns([3, 1])
    value = sc.number(label, prefix, default, min_value=-1e300, max_value=1e300, where=value_column)
    unit = sc.text("unit", f"{prefix}.unit", spec.unit, max_chars=40, where=unit_column)
    return ui.parse_quantity(value, unit, name)


ui.run(main)
