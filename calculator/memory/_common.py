"""Helpers the memory submodules share: the KV precision in bytes, lists that must not be empty, plain floats."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._support import magnitude
from ..precision import bits_per_element
from ..units import ureg

__all__: list[str] = []


def _kv_precision_bytes(kv_precision: Any) -> float:
    """Bytes per cached element for a precision name (or a byte quantity)."""
    if isinstance(kv_precision, ureg.Quantity):
        return magnitude("model_kv_bytes_per_token", "kv_precision", kv_precision, "B", "positive")
    return bits_per_element(kv_precision) / 8


def _float(x: Any) -> Any:
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x
