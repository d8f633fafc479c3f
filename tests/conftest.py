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
#: Measured 2026-12-07 (second session) in the suite (-n 2, ``--durations=0`` summed per file) beside others' jobs
#: (15 minutes of wall time, about twice the quiet figures); s per file.
LONGEST_FILES = (
    "test_browser.py",  # ~205 s before its one pass at 1440 (~125 s alone after)
    "test_app.py",  # ~157 s
    "test_simulation.py",  # ~128 s
    "test_plan_loop.py",  # ~111 s
    "test_calibration_recovery.py",  # ~82 s
    "test_performance.py",  # ~74 s
    "test_package.py",  # ~52 s
    "test_notebooks.py",  # ~45 s
    "test_hardening_simulation.py",  # ~42 s
    "test_calibration_fit_engines.py",  # ~42 s
    "test_calibration_fit.py",  # ~39 s
    "test_formula.py",  # ~39 s
    "test_dynamics_fluid.py",  # ~33 s
    "test_moe_layouts.py",  # ~31 s
    "test_simulation_dynamics.py",  # ~30 s
    "test_calibrate.py",  # ~27 s
    "test_app_tables.py",  # ~25 s
    "test_imports.py",  # ~25 s
)


def pytest_collection_modifyitems(items):
    """Run the longest files first (a stable sort: the order inside each file and among the rest stays)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))
