"""Time to the first answer of every dashboard page in a real browser, against an empty Streamlit page.

Starts two servers headless on free localhost ports (``streamlit_server`` of the browser tests,
``tests/test_browser.py``): ``streamlit run app.py``, and the empty page, a script whose only element is one
metric (:data:`EMPTY_PAGE`), served from the repository's root with the same ``.streamlit/config.toml``. Each
round opens every page once and the empty page once, each in a fresh Chromium context (empty cache and storage,
1440x900), and times from the navigation to the page's first answer being visible: the first visible
``[data-testid="stMetric"]`` (on the Registry page its count of entries since 2026-12-07, its table before; on the
empty page its metric, so its time is Streamlit's own floor for painting a metric: its front end, the websocket,
one script run and the metric's code). Rounds alternate the pages so that a change of the shared machine's load
falls on all of them. The first round is also each page's first script run on the server (its caches empty), and
the landing page's first visit is the server's first session (it pays the imports).

Prints a Markdown table for ``docs/dashboard.md``: per page the first visit, the median, the maximum and the
median's ratio to the empty page's median (the acceptance: at most 1.5).

    .venv/bin/python benchmarks/first_answer.py
    .venv/bin/python benchmarks/first_answer.py --repeats 5 --pages memory_fit cost
    .venv/bin/python benchmarks/first_answer.py --server-option server.fileWatcherType=auto  # Streamlit's default
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
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
    "registry": ("registry", METRIC),
    "goal_seek": ("goal_seek", METRIC),
    "production_day": ("production_day", METRIC),
}
#: The empty page: one metric and nothing else (no page config, no navigation, no imports but Streamlit's).
EMPTY_PAGE = 'import streamlit as st\n\nst.metric("Empty", 0)\n'
EMPTY = "empty page"
#: A page's median may be at most this multiple of the empty page's (issue 55).
WITHIN = 1.5


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


def _rounds(browser, targets: dict[str, tuple[str, str]], repeats: int) -> dict[str, list[float]]:
    """``repeats`` rounds over ``targets`` (name -> (URL, selector)): each name's times, in the rounds' order."""
    times: dict[str, list[float]] = {name: [] for name in targets}
    for round_ in range(repeats):
        for name, (url, selector) in targets.items():
            times[name].append(first_answer(browser, url, selector))
        print(f"round {round_ + 1}: " + ", ".join(f"{n} {t[-1]:.2f}" for n, t in times.items()), file=sys.stderr)
    return times


def table(times: dict[str, list[float]], repeats: int) -> list[str]:
    """The Markdown table: per page its first visit, median, maximum and the median over the empty page's."""
    floor = statistics.median(times[EMPTY])
    lines = [f"| Page | First visit | Median of {repeats} | Max | Median / empty page's |", "|---|---|---|---|---|"]
    for name, found in times.items():
        median = statistics.median(found)
        ratio = median / floor
        verdict = "" if name == EMPTY or ratio <= WITHIN else f" (over {WITHIN})"
        lines.append(f"| {name} | {found[0]:.2f} s | {median:.2f} s | {max(found):.2f} s | {ratio:.2f}{verdict} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds, each page in a fresh context (default 5)")
    parser.add_argument("--pages", nargs="*", help="page names to time (default: every page)")
    parser.add_argument(
        "--server-option", action="append", default=[], metavar="NAME=VALUE",
        help="a streamlit option for both servers, e.g. server.fileWatcherType=auto (repeatable)",
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
    with tempfile.NamedTemporaryFile("w", suffix=".py") as empty:
        empty.write(EMPTY_PAGE)
        empty.flush()
        with (
            streamlit_server(*options) as url,
            streamlit_server(*options, script=empty.name) as empty_url,
            sync_playwright() as playwright,
        ):
            targets = {EMPTY: (empty_url, METRIC)}
            targets.update({name: (f"{url}/{path}", selector) for path, (name, selector) in chosen.items()})
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
            try:
                times = _rounds(browser, targets, args.repeats)
            finally:
                browser.close()
    print("\n".join(table(times, args.repeats)))


if __name__ == "__main__":
    main()
