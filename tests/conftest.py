"""Fixtures shared by several test files."""

import pytest

from calculator import Q_
from calculator.fleet import size_fleet


@pytest.fixture(scope="module")
def plan():
    """A feasible fleet plan: Llama-3.1-70B FP8 on H100s at 20 request/s, 1 s TTFT, 50 ms TPOT."""
    return size_fleet(
        "llama-3.1-70b",
        "h100-sxm",
        "fp8",
        Q_(20, "request/s"),
        1024,
        256,
        Q_(1, "s"),
        Q_(50, "ms"),
        price=Q_(4, "USD/hour"),
    )
