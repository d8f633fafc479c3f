"""Load benchmark of the dashboard: several browser sessions change widgets against one server.

Starts ``streamlit run app.py`` on a free port and runs ``--sessions`` headless Chromium sessions (each
its own process and browser) for ``--seconds``. Each session cycles through the pages; on each it
changes a number input, waits until the script has finished, and records the time from the change to
the finished render. One session also pastes hostile registry files (an alias bomb, a unit-arithmetic
bomb) on the registry page, which the server must refuse while the others keep being served. The
main process probes the server's health endpoint every half second.

Prints the response times per session (median, p95, max), the error elements seen and the health
probe's worst latency, as a Markdown table for ``docs/benchmarks.md``.

    .venv/bin/python benchmarks/load_dashboard.py --sessions 4 --seconds 60
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'
DONE = """() => document.querySelector('[data-test-script-state="notRunning"]')
    && !document.querySelector('[data-testid="stSkeleton"]')"""
#: Page path -> (label of a number input to change, low, high).
PAGES = {
    "": ("Arrival rate [request/s]", 1, 60),
    "memory_fit": ("Context per sequence [token]", 1024, 32768),
    "batching_queueing": None,
    "cost": None,
    "autoscaling_regions": None,
}
ALIAS_BOMB = "models:\n  - id: bomb\n    name: x\n    " + "\n    ".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
)
UNIT_BOMB = "accelerators:\n  - id: gpu-x\n    name: x\n    memory: '9**9**9 GiB'\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def session(index: int, url: str, seconds: float, chromium: str, results: multiprocessing.Queue) -> None:
    """One browser session: change widgets page after page until ``seconds`` have passed."""
    from playwright.sync_api import sync_playwright

    rng = random.Random(index)
    times, errors, hostile = [], [], 0
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=chromium,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1440, "height": 900},
        )
        page = context.new_page()
        end = time.monotonic() + seconds
        paths = list(PAGES)
        while time.monotonic() < end:
            path = paths[rng.randrange(len(paths))] if index else "registry"
            started = time.monotonic()
            page.goto(f"{url}/{path}", wait_until="domcontentloaded")
            page.wait_for_function(DONE, timeout=60_000)
            times.append(time.monotonic() - started)
            if path == "registry":  # the hostile session: paste a bomb, expect a short error, not a hang
                text = ALIAS_BOMB if hostile % 2 == 0 else UNIT_BOMB
                page.get_by_role("tab", name="Upload YAML").click()
                page.get_by_label("Or paste YAML").fill(text)
                started = time.monotonic()
                page.get_by_role("button", name="Validate and add").last.click()
                page.get_by_text("not a valid registry file", exact=False).first.wait_for(timeout=30_000)
                times.append(time.monotonic() - started)
                hostile += 1
                continue
            widget = PAGES[path]
            if widget is not None:
                label, low, high = widget
                field = page.get_by_role("spinbutton", name=label)
                field.fill(str(rng.randint(low, high)))
                started = time.monotonic()
                field.press("Enter")
                page.wait_for_timeout(50)
                page.wait_for_function(DONE, timeout=60_000)
                times.append(time.monotonic() - started)
            shown = page.locator(ERRORS)
            if shown.count():
                errors.append(f"/{path}: {shown.first.inner_text()[:200]}")
        context.close()
    results.put((index, times, errors, hostile))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("needs Debian's chromium and the playwright package")
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
               str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("streamlit did not start")
                time.sleep(0.25)
        results: multiprocessing.Queue = multiprocessing.Queue()
        workers = [
            multiprocessing.Process(target=session, args=(i, url, args.seconds, chromium, results))
            for i in range(args.sessions)
        ]
        for worker in workers:
            worker.start()
        probes = []
        while any(worker.is_alive() for worker in workers):
            started = time.monotonic()
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10):
                    probes.append(time.monotonic() - started)
            except OSError:
                probes.append(float("inf"))
            time.sleep(0.5)
        rows = sorted(results.get() for _ in workers)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{args.sessions} sessions for {args.seconds:.0f} s against one server on this machine\n")
    print("| session | interactions | median [s] | p95 [s] | max [s] | error elements | hostile files refused |")
    print("|---|---|---|---|---|---|---|")
    for index, times, errors, hostile in rows:
        p95 = statistics.quantiles(times, n=20, method="inclusive")[-1] if len(times) >= 2 else times[0]
        print(f"| {index} | {len(times)} | {statistics.median(times):.2f} | {p95:.2f} | {max(times):.2f} "
              f"| {len(errors)} | {hostile} |")  # fmt: skip
        for error in errors[:3]:
            print(f"  error: {error}")
    failed = sum(p == float("inf") for p in probes)
    print(f"\nhealth probe: {len(probes)} probes, worst {max(probes):.3f} s, failed {failed}")


if __name__ == "__main__":
    main()
