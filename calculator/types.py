"""Type aliases for the quantities of the public API: what a parameter is, in its signature.

``def mmc_mean_wait(arrival_rate: Rate, service_time: Time, servers: Count) -> Time`` says what each
argument is and in which dimension. Each alias is ``Annotated`` with a :class:`Dimension` that holds an
example unit; ``alias_unit(alias)`` reads it back, and a test checks every public signature's
aliases against the units its boundary check enforces.

The aliases are ``Any`` to a type checker on purpose: pint's quantity type does not carry its
dimension, a vectorized function takes arrays as well as scalars, and a count takes a plain number
as well as a quantity of tokens or requests (docs/ARCHITECTURE.md, "Conventions"). The dimension is
checked when the function is called (``_support.checked``, which reads these aliases, and
``formula.magnitude``), not statically.

>>> from calculator.types import Time, alias_unit
>>> alias_unit(Time)
's'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

__all__ = [
    "AcceleratorRef",
    "Bandwidth",
    "Bytes",
    "BytesPerToken",
    "Capacity",
    "Compute",
    "ComputeRate",
    "Count",
    "Dimension",
    "Energy",
    "EnergyPrice",
    "Fraction",
    "InterconnectRef",
    "ModelRef",
    "Money",
    "MoneyPerRequest",
    "MoneyRate",
    "Number",
    "Power",
    "Precision",
    "Probability",
    "Rate",
    "Time",
    "TokenRate",
    "Tokens",
    "alias_dimension",
    "alias_for",
    "alias_unit",
]


@dataclass(frozen=True)
class Dimension:
    """What an alias holds: an example ``unit`` (``"s"`` for a time, ``""`` for a plain number) and its ``kind``.

    Kinds: ``"model"``, ``"accelerator"``, ``"interconnect"`` (a registry id or entry), ``"capacity"`` (bytes or
    an accelerator), ``"quantity"`` (a pint quantity of ``unit``), ``"count"`` and ``"tokens"`` (a plain number or
    a count quantity), ``"probability"`` and ``"fraction"`` (plain floats in [0, 1]), ``"number"`` (a
    plain non-negative number: a factor, a coefficient of variation), ``"precision"`` (a name, bits or
    bytes per element).
    """

    unit: str
    kind: str = "quantity"


Time = Annotated[Any, Dimension("s")]
"""A duration: a pint quantity of time (``Q_(40, "ms")``)."""
Bytes = Annotated[Any, Dimension("B")]
"""An amount of information: bytes (``Q_(80, "GiB")``)."""
Bandwidth = Annotated[Any, Dimension("B/s")]
"""Bytes per second (``Q_(3.35, "TB/s")``, ``Q_(400, "Gb/s")``)."""
Rate = Annotated[Any, Dimension("request/s")]
"""Requests (or events) per second; ``1/s`` and ``request/s`` are the same rate."""
TokenRate = Annotated[Any, Dimension("token/s")]
"""Tokens per second."""
Compute = Annotated[Any, Dimension("FLOP")]
"""Floating-point operations."""
ComputeRate = Annotated[Any, Dimension("FLOP/s")]
"""Floating-point operations per second."""
Money = Annotated[Any, Dimension("USD")]
"""US dollars."""
MoneyRate = Annotated[Any, Dimension("USD/h")]
"""US dollars per unit of time (``Q_(2.5, "USD/h")`` per GPU-hour)."""
MoneyPerRequest = Annotated[Any, Dimension("USD/request")]
"""US dollars per request (``Q_(0.001, "USD/request")``, a unit cost per query)."""
EnergyPrice = Annotated[Any, Dimension("USD/kWh")]
"""US dollars per unit of energy (``Q_(0.10, "USD/(kW*hour)")``, an electricity price)."""
Power = Annotated[Any, Dimension("W")]
"""Watts."""
Energy = Annotated[Any, Dimension("J")]
"""Joules (or kWh)."""
BytesPerToken = Annotated[Any, Dimension("B/token")]
"""Bytes per token (the KV cache's footprint)."""
Tokens = Annotated[Any, Dimension("token", "tokens")]
"""A number of tokens: a plain number or a quantity of tokens."""
Count = Annotated[Any, Dimension("", "count")]
"""A count (requests, sequences, layers, heads, GPUs): a plain number or a quantity of tokens/requests."""
Probability = Annotated[Any, Dimension("", "probability")]
"""A probability in [0, 1], a plain float (or array)."""
Fraction = Annotated[Any, Dimension("", "fraction")]
"""A fraction (share, utilization, efficiency), a plain float (or array)."""
Precision = Annotated[Any, Dimension("", "precision")]
"""A numeric precision: a name (``"fp8"``), bits per element (``8``) or bytes per element (``Q_(1, "B")``)."""
Number = Annotated[Any, Dimension("", "number")]
"""A plain number: a count that need not be whole (parameters), a factor, a speedup, a coefficient of variation."""


Capacity = Annotated[Any, Dimension("B", "capacity")]
"""Memory per device: a byte quantity, or an accelerator (id or object) whose memory is read on the capacity basis."""
ModelRef = Annotated[Any, Dimension("", "model")]
"""A registry model: its id (``"llama-3.1-70b"``, a Hugging Face id) or a :class:`~calculator.registry.Model`."""
AcceleratorRef = Annotated[Any, Dimension("", "accelerator")]
"""A registry accelerator: its id (``"h100-sxm"``) or an :class:`~calculator.registry.Accelerator`."""
InterconnectRef = Annotated[Any, Dimension("", "interconnect")]
"""A registry interconnect: its id (``"nvlink4"``) or an :class:`~calculator.registry.Interconnect`."""


def alias_dimension(alias: Any) -> Dimension | None:
    """The :class:`Dimension` an alias declares, or ``None`` for a type that is not a quantity alias."""
    for extra in getattr(alias, "__metadata__", ()):
        if isinstance(extra, Dimension):
            return extra
    return None


def alias_unit(alias: Any) -> str | None:
    """The example unit an alias declares, or ``None`` for a type that is not a quantity alias."""
    found = alias_dimension(alias)
    return None if found is None else found.unit


#: The aliases by (unit, kind), to annotate a formula's arguments from its declared units.
_BY_UNIT = {
    (found.unit, found.kind): alias
    for alias in (
        Time,
        Bytes,
        Bandwidth,
        Rate,
        TokenRate,
        Compute,
        ComputeRate,
        Money,
        MoneyRate,
        MoneyPerRequest,
        EnergyPrice,
        Power,
        Energy,
        BytesPerToken,
        Tokens,
        Count,
        Probability,
        Fraction,
        Precision,
        Number,
    )
    for found in [alias_dimension(alias)]
    if found is not None
}
_KIND_OF_DOMAIN = {
    "probability": "probability",
    "fraction_open": "fraction",
    "precision": "precision",
    "positive_integer": "count",
}


def alias_for(unit: str, domain: str = "positive") -> Any:
    """The alias of a formula variable declared with ``unit`` and ``domain`` (``Time`` for ``"ms"``).

    A unit without an alias of its own gets ``Annotated[Any, Dimension(unit)]``.
    """
    from .units import ureg

    kind = _KIND_OF_DOMAIN.get(domain, "quantity" if unit else "number")
    if unit == "token":
        kind = "tokens"
    if (unit, kind) in _BY_UNIT:
        return _BY_UNIT[(unit, kind)]
    if kind == "precision":
        return Precision
    if unit and kind == "quantity":
        wanted = ureg.parse_units(unit).dimensionality
        for (known, known_kind), alias in _BY_UNIT.items():
            if known and known_kind == "quantity" and ureg.parse_units(known).dimensionality == wanted:
                return alias
    return Annotated[Any, Dimension(unit, kind)]
