"""Fixtures shared by several test files."""

import os

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


# A session's first run of a dashboard page holds the rest of the page 0.5 s after its answer so that a browser
# paints the answer first (app_pages/_common.py, Scenario.answered); every AppTest and test server session is a
# first run, and the tests check what is drawn, not when. tests/test_app.py checks the pause itself.
os.environ.setdefault("SERVECALC_FIRST_PAINT_PAUSE", "0")

#: The files that take longest (seconds on this project's two-core machine, ``--durations=0``). The suite
#: hands whole files to its two workers in collection order (``--dist loadfile``); starting the longest
#: first lets both workers finish together (longest-first scheduling) instead of one waiting on a long
#: file picked up last.
#: Measured 2026-12-07 (second session) in the suite (-n 2, ``--durations=0`` summed per file), 431 s of wall
#: time at a load average of 2-5 (others' jobs); s per file.
LONGEST_FILES = (
    "test_browser.py",  # ~207 s (95 s of it a timed-out pools check; ~112 s when it passes)
    "test_app.py",  # ~62 s
    "test_plan_loop.py",  # ~56 s
    "test_performance.py",  # ~49 s
    "test_notebooks.py",  # ~33 s
    "test_simulation.py",  # ~33 s
    "test_calibration_recovery.py",  # ~31 s
    "test_calibration_fit_engines.py",  # ~28 s
    "test_calibration_fit.py",  # ~25 s
    "test_hardening_simulation.py",  # ~15 s
    "test_calibrate.py",  # ~14 s
    "test_queueing_simulation.py",  # ~13 s
    "test_cli.py",  # ~13 s
    "test_app_tables.py",  # ~12 s
    "test_day_modes_agree.py",  # ~11 s
    "test_package.py",  # ~10 s
    "test_simulation_dynamics.py",  # ~10 s
    "test_app_production_day.py",  # ~9 s
)


def pytest_collection_modifyitems(items):
    """Run the longest files first (a stable sort: the order inside each file and among the rest stays)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))
