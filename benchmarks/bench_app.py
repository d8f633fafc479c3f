"""Speed of the dashboard: first load of every page, and a widget change that reruns it.

Run from the repository root: ``python benchmarks/bench_app.py``. Results go in ``docs/dashboard.md``.

Each page is timed with Streamlit's ``AppTest`` (the script run on the server; the browser's drawing is
not included):

* **first load, fresh process**: a new Python process opens the page directly, so the run pays every
  import the page needs (calculator modules, pandas, plotly, sympy for "Show the math") and empty caches:
  the first visitor of a freshly started server;
* **first visit, warm process**: a new session in a process that has already served another page
  (imports done, this page's caches empty);
* **widget change**: one input of the page set to a new value (every value distinct, so every rerun
  misses the cache and recomputes), median and maximum over ``REPEATS`` reruns.
"""

import statistics
import subprocess
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 15
#: page -> (widget kind, widget key, value of the i-th change)
CHANGES = {
    "fleet_sizer": ("number_input", "fleet.rate", lambda i: 10.0 + 0.5 * i),
    "memory_fit": ("number_input", "memory.batch", lambda i: 8 + i),
    "cost": ("number_input", "cost.training", lambda i: 2e6 + 1e5 * i),
    "batching_queueing": ("number_input", "batching.t0", lambda i: 40.0 + i),
    "decode_speedups": ("slider", "decode.alpha", lambda i: round(0.5 + 0.02 * i, 2)),
    "sharding": ("number_input", "sharding.tokens", lambda i: 32 + i),
    "routing_tails": ("number_input", "routing.fanout", lambda i: 100 + i),
    "autoscaling_regions": ("number_input", "autoscaling.provision", lambda i: 60.0 + i),  # the open first tab
    "registry": ("selectbox", "registry.entry", lambda i: ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "l4"][i % 4]),
    "goal_seek": ("number_input", "goal.kv_bytes_per_token.kv_bytes_per_token", lambda i: 4096.0 * (70 + i)),
}


def open_page(page: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.switch_page(f"app_pages/{page}.py")
    return app


def timed_run(app: AppTest) -> float:
    start = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - start
    if app.exception or app.error:
        raise SystemExit(f"the page failed: {app.exception or [e.value for e in app.error]}")
    return elapsed


def first_load_fresh(page: str) -> float:
    """Time of the first run of ``page`` in a new process (printed by the child)."""
    code = f"import bench_app as b; print(b.timed_run(b.open_page({page!r})))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT / "benchmarks", capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def widget_changes(app: AppTest, kind: str, key: str, value) -> list[float]:
    times = []
    for i in range(1, REPEATS + 1):
        getattr(app, kind)(key=key).set_value(value(i))
        times.append(timed_run(app))
    return times


def main() -> None:
    warm = open_page("registry")
    timed_run(warm)  # imports and the registry, as a server that has served a page
    print("| Page | First load, fresh process | First visit, warm process | Widget change, median | max |")
    print("|---|---|---|---|---|")
    for page, (kind, key, value) in CHANGES.items():
        fresh = first_load_fresh(page)
        app = open_page(page)
        visit = timed_run(app)
        changes = widget_changes(app, kind, key, value)
        print(
            f"| {page} | {fresh * 1e3:.0f} ms | {visit * 1e3:.0f} ms | "
            f"{statistics.median(changes) * 1e3:.0f} ms | {max(changes) * 1e3:.0f} ms |"
        )


if __name__ == "__main__":
    main()
