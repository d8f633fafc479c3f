"""Helpers the parallelism submodules share: zero defaults and the check of a count argument."""

from __future__ import annotations

from typing import Any

from ..formula import check_domain
from ..results import as_count
from ..units import Q_

__all__: list[str] = []


_ZERO_SECONDS = Q_(0.0, "s")
_ZERO_BYTES = Q_(0.0, "B")


def _check_count(function: str, argument: str, value: Any) -> Any:
    check_domain(function, argument, value, "positive_integer")
    return as_count(value)
