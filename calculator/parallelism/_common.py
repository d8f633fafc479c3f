"""Helpers the parallelism submodules share: zero defaults and the check of a count argument."""

from __future__ import annotations

from .._support import count as _check_count  # noqa: F401 (the library's one count check, shared here)
from ..units import Q_

__all__: list[str] = []


_ZERO_SECONDS = Q_(0.0, "s")
_ZERO_BYTES = Q_(0.0, "B")
