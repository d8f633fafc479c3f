"""Fixtures shared by several test files."""

import pytest

from calculator import Q_
from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet


@pytest.fixture(scope="module")
def plan():
    """A feasible fleet plan: Llama-3.1-70B FP8 on H100s at 20 request/s, 1 s TTFT, 50 ms TPOT."""
    return size_fleet(
        "llama-3.1-70b",
        Workload(Q_(20, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"),
        costs=Costs(Q_(4, "USD/hour")),
    )


#: The files that take longest (seconds on this project's two-core machine, ``--durations=0``). The suite
#: hands whole files to its two workers in collection order (``--dist loadfile``); starting the longest
#: first lets both workers finish together (longest-first scheduling) instead of one waiting on a long
#: file picked up last.
LONGEST_FILES = (  # measured 2026-12-07 (a slow phase of the machine: about 1.5x the 2026-12-06 figures), s per file
    "test_browser.py",  # ~86 s
    "test_performance.py",  # ~75 s
    "test_calibration_fit.py",  # ~74 s
    "test_app.py",  # ~73 s
    "test_calibration_fit_engines.py",  # ~68 s
    "test_calibration_recovery.py",  # ~54 s
    "test_simulation.py",  # ~48 s
    "test_notebooks.py",  # ~32 s
    "test_hardening_simulation.py",  # ~21 s
    "test_calibrate.py",  # ~21 s
    "test_queueing_simulation.py",  # ~15 s
    "test_app_tables.py",  # ~15 s
    "test_cli.py",  # ~14 s
    "test_moe_layouts.py",  # ~11 s
)


def pytest_collection_modifyitems(items):
    """Run the longest files first (a stable sort: the order inside each file and among the rest stays)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))
