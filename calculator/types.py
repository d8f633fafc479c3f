"""Type aliases for the quantities of the public API: what a parameter is, in its signature.

``def mmc_mean_wait(arrival_rate: Rate, service_time: Time, servers: Count) -> Time`` says what each
argument is and in which dimension. Each alias is ``Annotated`` with a :class:`Dimension` that holds an
example unit; ``alias_unit(alias)`` reads it back, and a test checks every public signature's
aliases against the units its boundary check enforces.

The aliases are ``Any`` to a type checker on purpose: pint's quantity type does not carry its
dimension, a vectorized function takes arrays as well as scalars, and a count takes a plain number
as well as a quantity of tokens or requests (docs/ARCHITECTURE.md, "Conventions"). The dimension is
checked when the function is called (``check_units``, ``formula.magnitude``), not statically.

>>> from calculator.types import Time, alias_unit
>>> alias_unit(Time)
's'
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

__all__ = [
    "Bandwidth",
    "Bytes",
    "BytesPerToken",
    "Compute",
    "ComputeRate",
    "Count",
    "Dimension",
    "Energy",
    "Fraction",
    "Money",
    "MoneyPerRequest",
    "MoneyRate",
    "Power",
    "Precision",
    "Probability",
    "Rate",
    "Time",
    "TokenRate",
    "Tokens",
    "alias_unit",
]


class Dimension(str):
    """The example unit of a quantity alias (``"s"`` for a time); ``""`` for a plain number."""

    __slots__ = ()


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
Power = Annotated[Any, Dimension("W")]
"""Watts."""
Energy = Annotated[Any, Dimension("J")]
"""Joules (or kWh)."""
BytesPerToken = Annotated[Any, Dimension("B/token")]
"""Bytes per token (the KV cache's footprint)."""
Tokens = Annotated[Any, Dimension("token")]
"""A number of tokens: a plain number or a quantity of tokens."""
Count = Annotated[Any, Dimension("")]
"""A count (requests, sequences, layers, heads, GPUs): a plain number or a quantity of tokens/requests."""
Probability = Annotated[Any, Dimension("")]
"""A probability in [0, 1], a plain float (or array)."""
Fraction = Annotated[Any, Dimension("")]
"""A fraction (share, utilization, efficiency), a plain float (or array)."""
Precision = Annotated[Any, Dimension("")]
"""A numeric precision: a name (``"fp8"``), bits per element (``8``) or bytes per element (``Q_(1, "B")``)."""


def alias_unit(alias: Any) -> str | None:
    """The example unit an alias declares, or ``None`` for a type that is not a quantity alias."""
    for extra in get_args(alias)[1:]:
        if isinstance(extra, Dimension):
            return str(extra)
    return None
