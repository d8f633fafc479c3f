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
#: Measured 2026-12-07 in the suite (-n 2, ``--durations=0`` summed per file) at a load average near 6 (others'
#: jobs on the two cores): about 2.4 times the quiet figures; s per file.
LONGEST_FILES = (
    "test_app.py",  # ~163 s
    "test_plan_loop.py",  # ~144 s
    "test_simulation.py",  # ~119 s
    "test_browser.py",  # ~117 s
    "test_performance.py",  # ~89 s
    "test_calibration_recovery.py",  # ~70 s
    "test_calibration_fit.py",  # ~64 s
    "test_notebooks.py",  # ~63 s
    "test_calibration_fit_engines.py",  # ~62 s
    "test_hardening_simulation.py",  # ~42 s
    "test_percentile_targets.py",  # ~30 s (13 s quiet)
    "test_helpful_answers.py",  # ~30 s (13 s quiet)
    "test_app_tables.py",  # ~33 s
    "test_fleet.py",  # ~31 s
    "test_queueing_simulation.py",  # ~30 s
    "test_moe_layouts.py",  # ~29 s
    "test_calibrate.py",  # ~25 s
    "test_routing.py",  # ~23 s
)


def pytest_collection_modifyitems(items):
    """Run the longest files first (a stable sort: the order inside each file and among the rest stays)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))
