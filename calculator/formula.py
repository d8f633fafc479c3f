"""Declare a closed-form model once; get a numeric function, its LaTeX and a solver from it.

A formula is an ordinary Python function over arithmetic operators (and the few functions of this
module: :func:`sqrt`, :func:`exp`, :func:`log`, :func:`ceil`, :func:`floor`, :func:`minimum`,
:func:`maximum`). The :func:`formula` decorator records the unit, symbol and domain of each
argument and turns the function into a :class:`Formula`:

* calling it checks units and domains at the boundary, converts every argument to its declared unit,
  runs the function on plain numpy arrays (so it broadcasts), and returns a quantity in the declared
  result unit;
* :meth:`Formula.expression` calls the same function with sympy symbols to get its expression, from
  which :meth:`Formula.latex` prints the equation, with or without the caller's numbers substituted;
* :meth:`Formula.solve_for` solves for any argument given the result and the others: symbolically
  with sympy where it can, otherwise with a bracketing root finder on the numeric function.

The declared units must be coherent: evaluating the body on magnitudes in the declared units must
give the result in the declared result unit. :meth:`Formula.check_dimensions` verifies that with
pint quantities, and the test suite runs it on every formula of the library. A body that needs a
unit which no argument carries (bytes *per token* from counts of layers and heads) writes it with
:func:`per`.

sympy is imported only by :meth:`~Formula.expression`, :meth:`~Formula.latex` and
:meth:`~Formula.solve_for`, never by ``import calculator``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InputError, UnitsError
from .units import Q_, describe_value, dimension_of, ureg
from .units import shown as _quoted

__all__ = [
    "Formula",
    "Var",
    "catalog",
    "ceil",
    "check_domain",
    "exp",
    "floor",
    "formula",
    "log",
    "maximum",
    "minimum",
    "per",
    "sqrt",
    "var",
]

#: The modules (directly under ``calculator``; a package counts as one) that declare formulas: the ones
#: :func:`catalog` imports, by name. ``tests/test_imports.py`` checks the list against the ``@formula``
#: declarations and counts its edges in the import graph.
FORMULA_MODULES = (
    "autoscaling",
    "batching",
    "cases",
    "economics",
    "memory",
    "parallelism",
    "phases",
    "queueing",
    "regions",
    "routing",
    "speculative",
)

_REGISTRY: dict[str, Formula] = {}

#: A whole-number unknown solved within this relative distance of an integer is that integer (the floating-point
#: error of a closed form or of the root finder, not a fractional answer).
INTEGER_SNAP = 1e-9

#: ``precision`` is a positive number of bits (unit ``""``) or bytes (unit ``"B"``) per element that also
#: takes a precision name (``"fp8"``) or a quantity of information (``Q_(1, "B")``); a plain number is in
#: the variable's own unit (``PLAIN_PRECISION_RULE``).
DOMAINS = ("positive", "nonnegative", "probability", "fraction_open", "positive_integer", "any", "precision")


# --------------------------------------------------------------------------------------------
# Functions usable inside a formula body: numpy on numbers, sympy on symbols, numpy on quantities.


def _is_symbolic(*values: Any) -> bool:
    return any(type(v).__module__.startswith("sympy") for v in values)


def _sympy() -> Any:
    return importlib.import_module("sympy")


def sqrt(x: Any) -> Any:
    """Square root that works on numbers, arrays, quantities and sympy expressions."""
    return _sympy().sqrt(x) if _is_symbolic(x) else np.sqrt(x)


def exp(x: Any) -> Any:
    """Exponential that works on numbers, arrays and sympy expressions."""
    return _sympy().exp(x) if _is_symbolic(x) else np.exp(x)


def log(x: Any) -> Any:
    """Natural logarithm that works on numbers, arrays and sympy expressions."""
    return _sympy().log(x) if _is_symbolic(x) else np.log(x)


def ceil(x: Any) -> Any:
    """Ceiling that works on numbers, arrays and sympy expressions."""
    return _sympy().ceiling(x) if _is_symbolic(x) else np.ceil(x)


def floor(x: Any) -> Any:
    """Floor that works on numbers, arrays and sympy expressions."""
    return _sympy().floor(x) if _is_symbolic(x) else np.floor(x)


def minimum(a: Any, b: Any) -> Any:
    """Element-wise minimum that works on numbers, arrays and sympy expressions."""
    return _sympy().Min(a, b) if _is_symbolic(a, b) else np.minimum(a, b)


def maximum(a: Any, b: Any) -> Any:
    """Element-wise maximum that works on numbers, arrays and sympy expressions."""
    return _sympy().Max(a, b) if _is_symbolic(a, b) else np.maximum(a, b)


def per(value: Any, unit: str) -> Any:
    """Attach a unit of magnitude one that no argument carries (``per(n_bytes, "1/token")``).

    On plain numbers and sympy expressions this is the identity (the declared result unit already
    says it); on pint quantities it multiplies by ``1 unit`` so that :meth:`Formula.check_dimensions`
    sees the body's true dimension.
    """
    if isinstance(value, ureg.Quantity):
        return value * Q_(1, unit)
    return value


# --------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True)
class Var:
    """One argument (or the result) of a formula.

    Attributes
    ----------
    unit : str
        A unit of the dimension it needs; the body sees magnitudes in this unit. ``""`` marks a
        plain number (a count or a ratio).
    symbol : str
        The LaTeX symbol used in printed equations.
    domain : str
        ``positive``, ``nonnegative``, ``probability`` ([0, 1]), ``fraction_open`` ([0, 1)),
        ``positive_integer`` or ``any``.
    description : str
        What it is, in words (shown in the dashboard and in errors).
    infinite : bool
        Whether infinity is a meaningful value (an unstable queue's wait); NaN never is, and
        infinity is an input error everywhere else.
    """

    unit: str
    symbol: str
    domain: str = "positive"
    description: str = ""
    infinite: bool = False

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {self.domain!r}")
        dimension_of(self.unit)  # fail at declaration on a unit pint does not know


def var(unit: str, symbol: str, domain: str = "positive", description: str = "", *, infinite: bool = False) -> Var:
    """Shorthand for :class:`Var`."""
    return Var(unit=unit, symbol=symbol, domain=domain, description=description, infinite=infinite)


def check_domain(function: str, argument: str, magnitude: Any, domain: str, *, infinite: bool = False) -> None:
    """Raise :class:`InputError` if ``magnitude`` (number or array) leaves ``domain``.

    NaN is always an error; infinity too unless ``infinite`` (or the domain is ``"any"``).
    """
    values = np.asarray(magnitude)
    if values.dtype == object or not np.issubdtype(values.dtype, np.number):
        raise InputError(f"{function}(): argument '{argument}' must be numeric, got {magnitude!r}")
    if np.iscomplexobj(values):
        raise InputError(f"{function}(): argument '{argument}' must be real, got {magnitude!r}")
    if np.any(np.isnan(values)):
        raise InputError(f"{function}(): argument '{argument}' contains NaN")
    if domain != "any" and not infinite and np.any(np.isinf(values)):
        raise InputError(f"{function}(): argument '{argument}' must be finite, got {_quoted(magnitude)}")
    rules: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
        "positive": (lambda v: v > 0, "must be > 0"),
        "precision": (lambda v: v > 0, "must be a positive precision (a name like 'fp8', or a number in its unit)"),
        "nonnegative": (lambda v: v >= 0, "must be >= 0"),
        "probability": (lambda v: (v >= 0) & (v <= 1), "must be a probability in [0, 1]"),
        "fraction_open": (lambda v: (v >= 0) & (v < 1), "must be a fraction in [0, 1)"),
        "positive_integer": (lambda v: (v >= 1) & (v == np.round(v)), "must be an integer >= 1"),
        "nonnegative_integer": (lambda v: (v >= 0) & (v == np.round(v)), "must be a whole number >= 0"),
        "any": (lambda v: np.isfinite(v) | np.isinf(v), ""),
    }
    test, expected = rules[domain]
    ok = test(values)
    if not np.all(ok):
        shown = (values[~ok] if values.ndim else values).flat[0].item()
        raise InputError(f"{function}(): argument '{argument}' {expected}, got {shown!r}")


class Formula:
    """A closed-form model declared once (see the module docstring).

    Parameters
    ----------
    func : callable
        The body: arithmetic over its arguments, in the declared units.
    result : Var
        Unit, symbol and description of the value it returns.
    variables : mapping of str to Var
        One entry per argument of ``func``, in its order.
    reference : str
        Where the equation comes from (chapter section, equation or example).
    name : str, optional
        Name of the result; defaults to ``func.__name__``. It is also the keyword that
        :meth:`solve_for` takes for the result.
    example : mapping of str to number or str, optional
        A worked example: a realistic value of each argument (the chapter's example where it has
        one), a plain number for a plain argument and a quantity as text (``"140 GB"``) for the
        others. Read through :attr:`example`; front ends start their inputs from it.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        result: Var,
        variables: Mapping[str, Var],
        reference: str,
        name: str | None = None,
        example: Mapping[str, float | str] | None = None,
    ) -> None:
        parameters = list(inspect.signature(func).parameters)
        if parameters != list(variables):
            raise TypeError(
                f"formula {func.__name__}: declared variables {list(variables)} do not match the "
                f"function's arguments {parameters}"
            )
        self.func = func
        self.name = name or func.__name__
        self.result = result
        self.variables = dict(variables)
        self.reference = reference
        self.__doc__ = func.__doc__
        self.__name__ = self.name
        self.__qualname__ = func.__qualname__
        self.__module__ = func.__module__
        self.__wrapped__ = func
        self._signature = inspect.signature(func)
        self._symbols: dict[str, Any] | None = None
        unknown = set(example or ()) - set(variables)
        if unknown:
            raise TypeError(f"formula {self.name}: the example names no argument {sorted(unknown)}")
        self._example = dict(example or {})

    def __repr__(self) -> str:
        args = ", ".join(f"{n} [{v.unit or '1'}]" for n, v in self.variables.items())
        return f"<Formula {self.name}({args}) -> [{self.result.unit or '1'}]; {self.reference}>"

    @property
    def __signature__(self) -> inspect.Signature:  # type: ignore[override]
        """The body's signature annotated with the quantity aliases of the declared units (``Time``, ``Count``)."""
        from .types import alias_for

        parameters = [
            p.replace(annotation=alias_for(self.variables[p.name].unit, self.variables[p.name].domain))
            for p in self._signature.parameters.values()
        ]
        return self._signature.replace(
            parameters=parameters, return_annotation=alias_for(self.result.unit, self.result.domain)
        )

    @property
    def inputs(self) -> tuple[str, ...]:
        """Names of the arguments, in order."""
        return tuple(self.variables)

    @property
    def example(self) -> dict[str, Any]:
        """The worked example's arguments as the formula takes them (quantities, plain numbers), in order.

        The declared example over the signature's defaults (a default is a magnitude in the declared
        unit); an argument with neither is absent.

        >>> from calculator.memory import kv_bytes_per_token
        >>> kv_bytes_per_token.example
        {'layers': 80, 'kv_heads': 8, 'head_dim': 128, 'bytes_per_element': <Quantity(2, 'byte')>}
        >>> kv_bytes_per_token(**kv_bytes_per_token.example)
        <Quantity(327680.0, 'byte / token')>
        """
        values = {
            n: Q_(p.default, self.variables[n].unit) if self.variables[n].unit else p.default
            for n, p in self._signature.parameters.items()
            if p.default is not p.empty
        }
        values.update({n: Q_(v) if isinstance(v, str) else v for n, v in self._example.items()})
        return {n: values[n] for n in self.variables if n in values}

    # ---------------------------------------------------------------- numeric evaluation

    def magnitudes(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Check units and domains of the arguments and return their magnitudes in declared units."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}(): {exc}") from None
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            spec = self.variables[name]
            out[name] = _to_magnitude(self.name, name, value, spec)
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Evaluate with unit and domain checks; returns a quantity in the result unit."""
        values = self.magnitudes(*args, **kwargs)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            try:
                result = self.func(**values)
            except ZeroDivisionError:
                raise InputError(
                    f"{self.name}(): the result is undefined (division by zero) for these arguments"
                ) from None
        self.check_overflow(result, values)
        return self._wrap(result)

    def check_overflow(self, result: Any, values: Mapping[str, Any]) -> None:
        """An :class:`InputError` where finite arguments overflow a result not declared ``infinite`` to infinity.

        An infinite argument may give an infinite result (an unstable queue's wait carried on); finite ones
        that give one are beyond the range the result can be shown in (JSON has no infinity).
        """
        if self.result.infinite or self.result.domain == "any" or not np.any(np.isinf(result)):
            return
        if all(np.all(np.isfinite(v)) for v in values.values() if np.asarray(v).dtype.kind in "biuf"):
            what = self.result.description or self.name
            raise InputError(
                f"{self.name}(): the arguments overflow the {what} to infinity; give arguments of a finite result"
            )

    def numeric(self, **magnitudes: Any) -> Any:
        """Evaluate the body on plain magnitudes in the declared units (no checks; fastest path)."""
        return self.func(**magnitudes)

    def invalid_results(self, values: Any) -> tuple[np.ndarray, str]:
        """Where body results are not a value of the result: NaN, or outside its declared range.

        Returns a boolean mask and the reason of the first such point (``""`` if none). A
        ``positive``/``nonnegative`` result may be zero (a degenerate case such as one device) but
        not negative; a probability must lie in [0, 1]. Negative results mean the arguments
        describe an impossible case (weights larger than the memory, utilization above one).
        """
        values = np.asarray(values, dtype=float)
        nan = np.isnan(values)
        if self.result.domain in ("positive", "nonnegative", "probability"):
            finite = np.abs(values[np.isfinite(values)])
            tolerance = 1e-12 * max(float(finite.max(initial=1.0)), 1.0)
            outside = (values < -tolerance) | ((values > 1 + 1e-12) if self.result.domain == "probability" else False)
        else:
            outside = np.zeros(values.shape, dtype=bool)
        mask = nan | outside
        if not mask.any():
            return mask, ""
        first = values[mask].flat[0]
        if np.isnan(first):
            return mask, "the result is undefined (NaN)"
        what = self.result.description or self.name
        return mask, f"the arguments give {first:.4g}, outside the range of {what}: an impossible case"

    def _wrap(self, magnitude: Any) -> Any:
        magnitude = np.asarray(magnitude, dtype=float) if np.ndim(magnitude) else float(magnitude)
        _, reason = self.invalid_results(magnitude)
        if reason:
            raise InputError(f"{self.name}(): {reason} for these arguments")
        return Q_(magnitude, self.result.unit) if self.result.unit else magnitude

    def check_dimensions(self) -> None:
        """Verify that the declared units are coherent with the body; raise :class:`UnitsError`."""
        samples = {n: _sample(v) for n, v in self.variables.items()}
        with_units = {n: Q_(samples[n], v.unit) for n, v in self.variables.items()}
        symbolic = self.func(**with_units)
        plain = self.func(**samples)
        expected = Q_(1, self.result.unit or "")
        got = symbolic if isinstance(symbolic, ureg.Quantity) else Q_(symbolic, "")
        if got.dimensionality != expected.dimensionality:
            raise UnitsError(
                f"formula {self.name}: body has dimension {got.dimensionality}, declared result unit "
                f"{self.result.unit!r} has {expected.dimensionality}"
            )
        if not math.isclose(got.m_as(self.result.unit or ""), float(plain), rel_tol=1e-9):
            raise UnitsError(
                f"formula {self.name}: declared units are not coherent (body on magnitudes gives {plain}, "
                f"with units {got.to(self.result.unit or '')})"
            )

    # ---------------------------------------------------------------- symbolic side

    def symbols(self) -> dict[str, Any]:
        """The sympy symbols of the arguments and the result (keyed by name)."""
        if self._symbols is None:
            sp = _sympy()
            # Symbol names sort in declaration order, so printed equations keep the declared order.
            symbols = {
                n: sp.Symbol(f"x{i:02d}_{n}", **_assumptions(v.domain))
                for i, (n, v) in enumerate(self.variables.items())
            }
            symbols[self.name] = sp.Symbol(self.name, real=True)
            self._symbols = symbols
        return self._symbols

    def expression(self) -> Any:
        """The body as a sympy expression of the argument symbols."""
        symbols = self.symbols()
        return _sympy().sympify(self.func(**{n: symbols[n] for n in self.variables}))

    def latex(self, *args: Any, digits: int = 4, **kwargs: Any) -> str:
        r"""The equation as LaTeX.

        With no arguments, the symbolic equation. With the formula's arguments, an ``aligned``
        block (so that display math, KaTeX and notebooks break its lines): the equation, a line
        with the arguments substituted with their units, and the result (the chapter's "Napkin
        Math" layout).

        Examples
        --------
        >>> from calculator.economics import lifetime_cost
        >>> print(lifetime_cost.latex())
        C_{\mathrm{life}} = C_{\mathrm{train}} + c_{q} T_{\mathrm{deploy}} \lambda
        >>> from calculator.memory import weight_bytes
        >>> print(weight_bytes.latex(70e9, 16))
        \begin{aligned}
        M_{W} &= \frac{N b}{8} \\
        &= \frac{\left(7\times 10^{10}\right) \times \left(16\right)}{8} \\
        &= 140\ \mathrm{GB}
        \end{aligned}
        """
        sp = _sympy()
        symbols = self.symbols()
        names = {symbols[n]: v.symbol for n, v in self.variables.items()}
        expr = self.expression()
        equation = sp.latex(expr, symbol_names=names)
        if not args and not kwargs:
            return f"{self.result.symbol} = {equation}"
        bound = self._signature.bind(*args, **kwargs)
        missing = [n for n in self.variables if n not in bound.arguments]
        if missing:
            raise TypeError(f"{self.name}.latex(): give every argument or none; missing {missing}")
        given = {
            n: _to_magnitude(self.name, n, v, spec) if spec.domain == "precision" and isinstance(v, str) else v
            for n, spec in self.variables.items()
            for v in [bound.arguments[n]]
        }
        filled = {symbols[n]: r"\left(" + _format_latex(given[n], digits) + r"\right)" for n in self.variables}
        substituted = sp.latex(expr, symbol_names=filled, mul_symbol="times")
        try:
            result = self(*args, **kwargs)
        except InputError as exc:  # the substitution still shows why there is no value
            reason = str(exc).split("): ", 1)[-1].replace(" for these arguments", "")
            outcome = r"\text{" + reason.replace("%", r"\%").replace("_", r"\_") + "}"
        else:
            shown = result
            if (
                isinstance(result, ureg.Quantity)
                and np.ndim(result.magnitude) == 0
                and "[currency]" not in result.dimensionality
            ):
                shown = result.to_compact()  # 140 GB rather than 1.4e11 B; but never "MUSD"
            outcome = _format_latex(shown, digits)
        lines = [f"{self.result.symbol} &= {equation}", f"&= {substituted}", f"&= {outcome}"]
        return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"

    # ---------------------------------------------------------------- solving

    def solve_for(self, unknown: str, /, **known: Any) -> Any:
        """Solve for one argument given the result (keyword ``self.name``) and the other arguments.

        Broadcasts over arrays. Uses sympy's closed form where it finds one that reproduces the
        result; otherwise a bracketing root finder (Brent) on the numeric function, searching the
        unknown's domain on a logarithmic grid for a sign change.

        Examples
        --------
        >>> from calculator.economics import lifetime_cost
        >>> lifetime_cost.solve_for("arrival_rate", lifetime_cost=Q_(3e6, "USD"),
        ...     training_cost=Q_(2e6, "USD"), cost_per_query=Q_(0.001, "USD/request"),
        ...     duration=Q_(1e6, "s")).to("request/s")
        <Quantity(1000.0, 'request / second')>
        """
        if unknown == self.name:
            return self(**known)
        if unknown not in self.variables:
            raise InputError(f"{self.name}.solve_for(): unknown {unknown!r}; choose one of {list(self.variables)}")
        expected = set(self.variables) - {unknown} | {self.name}
        if set(known) != expected:
            raise TypeError(f"{self.name}.solve_for({unknown!r}): give exactly {sorted(expected)}; got {sorted(known)}")
        spec = self.variables[unknown]
        values = {n: _to_magnitude(self.name, n, known[n], self.variables[n]) for n in self.variables if n != unknown}
        target = _to_magnitude(self.name, self.name, known[self.name], replace_domain(self.result, "any"))
        arrays = np.broadcast_arrays(target, *values.values())
        target_b, others = arrays[0], dict(zip(values, arrays[1:], strict=True))
        solution = self._solve_symbolic(unknown, target_b, others)
        todo = ~np.isfinite(solution)
        if np.any(todo):
            for index in zip(*np.nonzero(np.atleast_1d(todo)), strict=False):
                idx = index if solution.ndim else ()
                point = {n: v[idx] for n, v in others.items()}
                solution[idx] = self._solve_numeric(unknown, float(target_b[idx]), point)
        if spec.domain == "positive_integer":  # a count solved in floating point: 7.999999999999838 is 8
            whole = np.round(solution)
            solution = np.where(np.abs(solution - whole) <= INTEGER_SNAP * np.maximum(whole, 1.0), whole, solution)
        solution = solution if solution.ndim else float(solution)  # type: ignore[assignment]
        if np.any(np.isnan(solution)):
            raise InputError(
                f"{self.name}.solve_for({unknown!r}): no value of {unknown} in its domain ({spec.domain}) "
                f"gives {self.name} = {known[self.name]}"
            )
        return Q_(solution, spec.unit) if spec.unit else solution

    @functools.cache  # noqa: B019 - formulas live for the whole process; the cache is per (formula, unknown)
    def _closed_forms(self, unknown: str) -> tuple[Callable[..., Any], ...]:
        sp = _sympy()
        symbols = self.symbols()
        try:
            roots = sp.solve(sp.Eq(symbols[self.name], self.expression()), symbols[unknown], dict=False)
        except (NotImplementedError, TypeError, ValueError):
            return ()
        order = [symbols[self.name]] + [symbols[n] for n in self.variables if n != unknown]
        return tuple(sp.lambdify(order, root, modules="numpy") for root in roots if root.is_real is not False)

    def _solve_symbolic(self, unknown: str, target: np.ndarray, others: dict[str, np.ndarray]) -> np.ndarray:
        result = np.full(np.shape(target), np.nan)
        spec = self.variables[unknown]
        for root in self._closed_forms(unknown):
            with np.errstate(all="ignore"):
                try:
                    candidate = np.asarray(root(target, *others.values()), dtype=complex)
                except (TypeError, ValueError, ZeroDivisionError, NameError):  # NameError: a special function
                    continue  # numpy lacks (LambertW); the root finder takes over
                candidate = np.broadcast_to(candidate, np.shape(target))
                real = np.where(np.abs(candidate.imag) <= 1e-12 * np.abs(candidate.real), candidate.real, np.nan)
                valid = _in_domain(real, spec.domain)
                back = np.full(np.shape(target), np.nan)
                if np.any(valid):
                    back = np.asarray(self.func(**{unknown: np.where(valid, real, 1.0), **others}), dtype=float)
                matches = valid & np.isclose(back, target, rtol=1e-9, atol=1e-300)
            result = np.where(np.isnan(result) & matches, real, result)
        return result

    def _solve_numeric(self, unknown: str, target: float, point: dict[str, Any]) -> float:
        from scipy.optimize import brentq

        spec = self.variables[unknown]

        def gap(x: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                return np.asarray(self.func(**{unknown: x, **point}), dtype=float) - target

        if spec.domain in ("probability", "fraction_open"):
            grid = np.linspace(0.0, 1.0 if spec.domain == "probability" else 1 - 1e-12, 2001)
        elif spec.domain == "any":
            positive = np.logspace(-15, 15, 1201)
            grid = np.concatenate([-positive[::-1], [0.0], positive])
        elif spec.domain == "positive_integer":
            grid = np.logspace(0, 15, 601)  # the real-valued root at or above 1
        else:
            grid = np.logspace(-15, 15, 1201)
            if spec.domain == "nonnegative":
                grid = np.concatenate([[0.0], grid])
        values = gap(grid)
        exact = np.nonzero(values == 0)[0]
        if exact.size:
            return float(grid[exact[0]])
        finite = np.isfinite(values)
        signs = np.sign(values)
        change = np.nonzero(finite[:-1] & finite[1:] & (signs[:-1] * signs[1:] < 0))[0]
        if not change.size:
            return math.nan
        i = change[0]
        root = brentq(lambda x: float(gap(np.asarray(x))), grid[i], grid[i + 1], xtol=1e-300, rtol=1e-13)
        return float(root)


def replace_domain(spec: Var, domain: str) -> Var:
    """A copy of ``spec`` with another domain."""
    return dataclasses.replace(spec, domain=domain)


def formula(
    *,
    result: Var,
    reference: str,
    name: str | None = None,
    example: Mapping[str, float | str] | None = None,
    **variables: Var,
) -> Callable[..., Formula]:
    """Declare a closed-form model (see the module docstring); ``example`` as for :class:`Formula`.

    Examples
    --------
    >>> @formula(result=var("m", "d"), reference="kinematics",
    ...          speed=var("m/s", "v"), duration=var("s", "t"))
    ... def distance(speed, duration):
    ...     return speed * duration
    >>> distance(Q_(3, "m/s"), Q_(2, "min"))
    <Quantity(360.0, 'meter')>
    >>> distance.solve_for("duration", distance=Q_(360, "m"), speed=Q_(3, "m/s"))
    <Quantity(120.0, 'second')>
    """

    def decorate(func: Callable[..., Any]) -> Formula:
        declared = Formula(func, result=result, variables=variables, reference=reference, name=name, example=example)
        key = f"{catalog_module(func.__module__)}.{declared.name}"
        # The library's formulas, not one a doctest declares in a module's namespace (its file is "<doctest ...>").
        if func.__module__.startswith("calculator.") and not func.__code__.co_filename.startswith("<"):
            _REGISTRY[key] = declared
        return declared

    return decorate


def catalog_module(module: str) -> str:
    """The module part of a catalog key: the module or package directly under ``calculator``.

    A formula keeps the key of the package that exports it when its code lives in a submodule
    (``calculator.batching.service`` gives ``batching``, so the key stays ``batching.batch_service_time``).

    >>> catalog_module("calculator.batching.service"), catalog_module("calculator.memory"), catalog_module("mine")
    ('batching', 'memory', 'mine')
    """
    parts = module.split(".")
    return parts[1] if parts[0] == "calculator" and len(parts) > 1 else parts[-1]


def catalog() -> dict[str, Formula]:
    """Every formula the library declares, keyed ``module.name`` (imports the :data:`FORMULA_MODULES`)."""
    for module in FORMULA_MODULES:
        importlib.import_module(f"calculator.{module}")
    return dict(sorted(_REGISTRY.items()))


# --------------------------------------------------------------------------------------------
# helpers


#: Domains of counts: where a plain count is asked, a quantity of tokens gives its number.
_COUNT_DOMAINS = frozenset({"positive_integer", "nonnegative_integer", "nonnegative", "positive"})


def magnitude(
    function: str, argument: str, value: Any, unit: str, domain: str = "nonnegative", *, infinite: bool = False
) -> Any:
    """The magnitude of ``value`` in ``unit`` after checking its dimension and ``domain``.

    The boundary check of every formula and of the plain functions: a quantity of the wrong
    dimension raises :class:`UnitsError`, a plain number is accepted only where ``unit`` is
    dimensionless (``""``), and a value outside ``domain`` raises :class:`InputError`, each naming
    ``function`` and ``argument``. Arrays stay arrays; scalars become floats.

    Token counts follow the API's count convention: where a count of tokens is asked (``unit``
    ``"token"``) a plain number is a number of tokens, and where a plain count is asked a quantity of
    tokens gives its number. (Requests are dimensionless already.)
    """
    needed = dimension_of(unit)
    tokens = ureg.token.dimensionality
    if domain == "precision":
        value = _precision(function, argument, value, unit)
    if isinstance(value, ureg.Quantity):
        if value.dimensionality == tokens and not needed and domain in _COUNT_DOMAINS:
            out = value.m_as("token")
        elif value.dimensionality != needed:
            raise UnitsError(
                f"{function}(): argument '{argument}' needs dimension {needed if needed else 'dimensionless'}"
                f" (for example {unit or 'a plain number'}), got {describe_value(value)}"
            )
        else:
            out = value.m_as(unit or "")
    elif needed == tokens and not isinstance(value, bool | str) and value is not None:
        try:
            out = ureg.Quantity(np.asarray(value, dtype=float), "token").m_as(unit)
        except (TypeError, ValueError):  # a set, a list of names, a ragged list: float() refuses them
            raise InputError(f"{function}(): argument '{argument}' must be numeric, got {_quoted(value)}") from None
    elif needed:
        raise UnitsError(
            f"{function}(): argument '{argument}' needs dimension {needed} (for example {unit}),"
            f" got {describe_value(value)}"
        )
    elif isinstance(value, bool) or value is None or isinstance(value, str):
        raise InputError(f"{function}(): argument '{argument}' must be a number, got {_quoted(value)}")
    else:
        out = value
    # numpy scalars, not Python floats: a division by zero in a body gives inf or NaN (reported by
    # Formula._wrap) rather than a bare ZeroDivisionError.
    raw = np.asarray(out)
    if raw.dtype.kind in "USbMm" or (
        raw.dtype.kind == "O" and any(v is None or isinstance(v, str | bool) for v in raw.flat)
    ):
        raise InputError(f"{function}(): argument '{argument}' must be numeric, got {_quoted(value)}")
    try:
        out = np.asarray(out, dtype=float) if raw.ndim else np.float64(out)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{function}(): argument '{argument}' must be numeric, got {_quoted(value)}") from None
    check_domain(function, argument, out, domain, infinite=infinite)
    return out


def _precision(function: str, argument: str, value: Any, unit: str) -> Any:
    """A precision argument as a quantity of ``unit``: a name, a plain number in the variable's unit, or a quantity.

    A plain number is read in the unit of the formula's variable (:data:`PLAIN_PRECISION_RULE`): bytes per
    element where the variable is bytes (``kv_bytes_per_token(80, 8, 128, 2)``: 2 bytes, FP16, as the
    chapter writes it), bits where it is bits (``weight_bytes(70e9, 16)``). A number that reads as an
    unlikely precision in that unit but a common one in the other is refused, showing both readings.
    """
    if isinstance(value, str):
        value = ureg.Quantity(_bits(function, argument, value, unit), "bit")
    elif isinstance(value, ureg.Quantity):
        if value.dimensionality != ureg.bit.dimensionality:
            raise UnitsError(
                f"{function}(): argument '{argument}' is a precision: a name ('fp8'), {_plain_text(unit)} or a "
                f"quantity (Q_(1, 'B'), Q_(8, 'bit')), got {describe_value(value)}"
            )
    elif isinstance(value, bool) or value is None:
        raise InputError(
            f"{function}(): argument '{argument}' is a precision (a name like 'fp8', or {_plain_text(unit)}), "
            f"got {_quoted(value)}"
        )
    elif np.ndim(value):
        if np.size(value) == 0:
            raise InputError(f"{function}(): argument '{argument}' is empty; give a precision or a non-empty array")
        value = ureg.Quantity(
            np.array([_bits(function, argument, v, unit) for v in np.ravel(value)]).reshape(np.shape(value)), "bit"
        )
    else:
        value = ureg.Quantity(_bits(function, argument, value, unit), "bit")
    return value.to(unit or "bit") if unit else value.m_as("bit")


#: How a plain number given for a precision reads (one rule for every formula; docs/ARCHITECTURE.md).
PLAIN_PRECISION_RULE = (
    "a plain number is in the unit of the formula's variable: bytes per element where the variable is bytes "
    "(kv_bytes_per_token's bytes_per_element: 2 is FP16, as the chapter writes it), bits where it is bits "
    "(weight_bytes' bits_per_weight: 16 is FP16); more than 8 bytes, or fewer than 3 bits, is refused as "
    "ambiguous, with both readings; a name ('fp8') or a quantity (Q_(1, 'B'), Q_(4, 'bit')) is never ambiguous"
)


def _plain_text(unit: str) -> str:
    return "bytes per element (2)" if unit == "B" else "bits per element (8)"


def _bits(function: str, argument: str, value: Any, unit: str) -> float:
    """One precision as bits: a name, or a plain number in the variable's unit (``PLAIN_PRECISION_RULE``)."""
    if isinstance(value, str):
        from .precision import bits_per_element, check_precision

        return float(bits_per_element(check_precision(value, argument)))
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise InputError(
            f"{function}(): argument '{argument}' holds {value!r}; a precision is a name like 'fp8' or "
            f"{_plain_text(unit)}"
        )
    number = float(value)
    if unit == "B":
        if number > 8:
            raise InputError(
                f"{function}(): argument '{argument}' is bytes per element, and {number:g} bytes is no precision; "
                f"if {number:g} bits was meant ({number / 8:g} bytes), write Q_({number:g}, 'bit') or a name such "
                "as 'fp16'"
            )
        return number * 8
    if 0 < number < 3:
        raise InputError(
            f"{function}(): argument '{argument}' is bits per element: {number:g} reads as {number:g} bits, but as "
            f"{number:g} bytes it would be {number * 8:g} bits; write Q_({number:g}, 'bit'), Q_({number:g}, 'B') or a "
            "name such as 'fp16'"
        )
    return number


def _to_magnitude(function: str, argument: str, value: Any, spec: Var) -> Any:
    return magnitude(function, argument, value, spec.unit, spec.domain, infinite=spec.infinite)


def _in_domain(values: np.ndarray, domain: str) -> np.ndarray:
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):
        return {
            "positive": finite & (values > 0),
            "precision": finite & (values > 0),
            "nonnegative": finite & (values >= 0),
            "probability": finite & (values >= 0) & (values <= 1),
            "fraction_open": finite & (values >= 0) & (values < 1),
            "positive_integer": finite & (values >= 1),
            "any": finite,
        }[domain]


def _assumptions(domain: str) -> dict[str, bool]:
    if domain in ("positive", "positive_integer", "precision"):
        return {"positive": True}
    if domain in ("nonnegative", "probability", "fraction_open"):
        return {"nonnegative": True}
    return {"real": True}


def _sample(spec: Var) -> float:
    return {"positive_integer": 3.0, "probability": 0.3, "fraction_open": 0.3}.get(spec.domain, 0.7)


def _format_latex(value: Any, digits: int) -> str:
    if isinstance(value, ureg.Quantity):
        if np.ndim(value.magnitude):
            return _format_latex(value.magnitude, digits) + r"\ " + f"{value.units:~L}"
        return f"{value:.{digits}g~L}"
    if np.ndim(value):
        return r"\left[" + ", ".join(_format_latex(float(v), digits) for v in np.ravel(value)[:4]) + r", \dots\right]"
    return f"{Q_(float(value), ''):.{digits}g~L}".strip()
