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
#: hands whole files to its two workers in collection order (``--dist loadfile``; :func:`pytest_configure` keeps
#: pytest-xdist from reordering them); starting the longest first lets both workers finish together
#: (longest-first scheduling) instead of one waiting on a long file picked up last.
#: Measured 2026-12-07 (third session) in the suite (-n 2, ``--durations=0`` summed per file), 6:03 of wall time
#: at a load average of 1.2-2.9; s per file (a range: two runs). test_package.py's mypy takes 12 s of its
#: 20 s without a .mypy_cache (a fresh checkout), under 1 s with one. The notebooks ranged 19-48 s.
LONGEST_FILES = (
    "test_browser.py",  # ~89-100 s (the fixture's two widths side by side: ~75 s)
    "test_plan_loop.py",  # ~51-79 s (three calibrations through the CLI, 22-31 s each)
    "test_app.py",  # ~62 s
    "test_performance.py",  # ~48 s
    "test_notebooks.py",  # ~19-48 s
    "test_calibration_fit_engines.py",  # ~28-32 s
    "test_simulation.py",  # ~30-33 s
    "test_calibration_recovery.py",  # ~29-30 s
    "test_calibration_fit.py",  # ~24-28 s
    "test_package.py",  # ~20-22 s
    "test_hardening_simulation.py",  # ~14-15 s
    "test_cli.py",  # ~12 s
    "test_day_modes_agree.py",  # ~9-10 s
    "test_queueing_simulation.py",  # ~10-13 s
    "test_cli_day.py",  # ~10-11 s
    "test_app_production_day.py",  # ~9 s
    "test_moe_layouts.py",  # ~9-10 s
    "test_app_tables.py",  # ~7-9 s
    "test_calibrate.py",  # ~8-16 s
    "test_fuzz.py",  # ~8 s
    "test_imports.py",  # ~8-9 s
    "test_cli_errors.py",  # ~7-8 s
    "test_search_bounds.py",  # ~8 s
    "test_simulation_dynamics.py",  # ~8 s
    "test_hardening.py",  # ~7 s
    "test_executors.py",  # ~6-7 s
    "test_dynamics_fluid.py",  # ~6 s
)


def pytest_configure(config):
    """Have pytest-xdist hand out the files in collection order, :data:`LONGEST_FILES` first.

    Since pytest-xdist 3.6, ``--dist loadfile`` sorts the files by how many tests each holds unless told not to
    (``--no-loadscope-reorder``), most first: the order above was ignored, and the browser's file, the longest
    with 7 tests, was handed out among the last.
    """
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    """Run the longest files first (a stable sort: the order inside each file and among the rest stays)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))
