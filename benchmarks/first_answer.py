"""Time to the first answer of every dashboard page in a real browser.

Starts ``streamlit run app.py`` once, headless on a free localhost port (``streamlit_server`` of the browser
tests, ``tests/test_browser.py``). For each page it opens a fresh Chromium context (empty cache and storage,
1440x900), navigates to the page and times from the navigation to the page's first answer being visible:
the first visible ``[data-testid="stMetric"]`` (the Registry page answers with its first table). Each page
is opened ``--repeats`` times, each in a new context; the first visit of a page is also the first run of
its script on the server (its caches empty), the others find the server's caches warm. The first page
opened is also the server's first session (it pays the imports).

Prints a Markdown table for ``docs/dashboard.md``: per page the first visit, the median and the maximum.

    .venv/bin/python benchmarks/first_answer.py
    .venv/bin/python benchmarks/first_answer.py --repeats 5 --pages memory_fit cost
    .venv/bin/python benchmarks/first_answer.py --server-option server.fileWatcherType=auto  # Streamlit's default
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
# The browser tests' setup: the same server command, Chromium and its flags.
from test_browser import CHROMIUM_ARGS, ERRORS, chromium_path, streamlit_server

METRIC = '[data-testid="stMetric"]'
#: URL path -> (the page's name in the table, the selector of its first answer).
PAGES = {
    "": ("fleet_sizer", METRIC),
    "memory_fit": ("memory_fit", METRIC),
    "benchmark": ("benchmark", METRIC),
    "cost": ("cost", METRIC),
    "batching_queueing": ("batching_queueing", METRIC),
    "decode_speedups": ("decode_speedups", METRIC),
    "sharding": ("sharding", METRIC),
    "routing_tails": ("routing_tails", METRIC),
    "autoscaling_regions": ("autoscaling_regions", METRIC),
    "registry": ("registry", '[data-testid="stDataFrame"]'),
    "goal_seek": ("goal_seek", METRIC),
}


#: Polled on every animation frame: the time (ms since the navigation started) at which the first element
#: matching the selector has a non-empty box (Playwright's "visible"), else ``false``.
VISIBLE_AT = """(selector) => {
    for (const element of document.querySelectorAll(selector)) {
        const box = element.getBoundingClientRect();
        if (box.width > 0 && box.height > 0 && getComputedStyle(element).visibility !== "hidden") {
            return performance.now();
        }
    }
    return false;
}"""


def first_answer(browser, url: str, selector: str) -> float:
    """Seconds from navigating a fresh context to ``url`` until ``selector`` is visible.

    Measured in the page (``performance.now()`` counts from the navigation's start), polled on every frame:
    Playwright's own waits poll at growing intervals (up to a second), too coarse for this.
    """
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page = context.new_page()
        page.goto(url, wait_until="commit")
        shown = page.wait_for_function(VISIBLE_AT, arg=selector, polling="raf", timeout=60_000).json_value()
        page.wait_for_function(
            "() => document.querySelector('[data-test-script-state=\"notRunning\"]')", timeout=60_000
        )
        if page.locator(ERRORS).count():
            raise SystemExit(f"{url}: {page.locator(ERRORS).first.inner_text()[:300]}")
        return shown / 1000
    finally:
        context.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh contexts per page (default 3)")
    parser.add_argument("--pages", nargs="*", help="page names to time (default: every page)")
    parser.add_argument(
        "--server-option", action="append", default=[], metavar="NAME=VALUE",
        help="a streamlit option for the server, e.g. server.fileWatcherType=auto (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("Chromium is not installed (Debian package 'chromium')")
    chosen = {path: spec for path, spec in PAGES.items() if not args.pages or spec[0] in args.pages}
    options = [
        part for option in args.server_option for part in ("--" + option.partition("=")[0], option.partition("=")[2])
    ]
    rows = []
    with streamlit_server(*options) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            for path, (name, selector) in chosen.items():
                times = [first_answer(browser, f"{url}/{path}", selector) for _ in range(args.repeats)]
                rows.append((name, times))
                print(f"{name}: " + ", ".join(f"{t:.2f}" for t in times), file=sys.stderr, flush=True)
        finally:
            browser.close()
    print(f"| Page | First visit | Median of {args.repeats} | Max |")
    print("|---|---|---|---|")
    for name, times in rows:
        print(f"| {name} | {times[0]:.2f} s | {statistics.median(times):.2f} s | {max(times):.2f} s |")


if __name__ == "__main__":
    main()
