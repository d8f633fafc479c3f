"""Every dashboard page in a real browser: ``streamlit run app.py`` on localhost, opened in headless Chromium.

Starts the app as a subprocess on a free port, waits for its health endpoint, opens each page with Playwright
driving Debian's ``chromium`` (no downloaded browser), waits for the script to finish, checks that no error or
exception element is shown, and saves a full-page screenshot under ``test-artifacts/screenshots/``.

Without Chromium or Playwright the test is skipped, unless ``CI_REQUIRE_BROWSER=1`` (set by ``.ci/run``), in
which case it fails.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: URL path -> the page's title (the URL path of a page is its file name; the landing page is "/").
PAGES = {
    "": "Fleet sizer",
    "memory_fit": "Memory fit",
    "benchmark": "Benchmark prediction",
    "cost": "Cost",
    "production_day": "A day in production",
    "batching_queueing": "Batching and queueing",
    "decode_speedups": "Decode speedups",
    "sharding": "Sharding and communication",
    "routing_tails": "Routing and tails",
    "autoscaling_regions": "Autoscaling and regions",
    "registry": "Registry",
    "goal_seek": "Goal seek",
}
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'


#: Requests Streamlit's own client makes that answer 404 and are not the app's errors: opened on a page's
#: URL (``/cost``), the client first looks for the server's endpoints under that path (``/cost/_stcore/health``,
#: ``/cost/_stcore/host-config``) to find its base path, then uses the root. Nothing else may answer 4xx/5xx.
KNOWN_PROBES = ("_stcore/health", "_stcore/host-config")


def _known_probe(url: str, server: str) -> bool:
    """Whether ``url`` is one of Streamlit's base-path probes (:data:`KNOWN_PROBES`) under a page's path."""
    parts = url.removeprefix(server).strip("/").split("/", 1)
    return len(parts) == 2 and parts[0] in PAGES and parts[1] in KNOWN_PROBES


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable(reason: str) -> None:
    if os.environ.get("CI_REQUIRE_BROWSER") == "1":
        pytest.fail(f"the browser test is required (CI_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def chromium() -> str:
    """The Chromium executable, once Playwright is importable (skip, or fail under CI_REQUIRE_BROWSER=1)."""
    executable = chromium_path()
    if executable is None:
        unavailable("Chromium is not installed (Debian package 'chromium')")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the Python package 'playwright' is not installed")
    return executable


@pytest.fixture(scope="module")
def server(chromium):
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser(chromium):
    """One headless Chromium for the module's checks, each on its own page (a fresh load is a new session of the
    app). A persistent profile, so that the pages share its HTTP and code caches; launching it once instead of
    once per check saves a few seconds a launch."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield context
        finally:
            context.close()


def new_page(browser, width: int, height: int):
    """A new page of ``browser`` with a ``width`` x ``height`` viewport, before anything is loaded in it."""
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": height})
    return page


@contextlib.contextmanager
def streamlit_server(*options: str, script: str = "app.py"):
    """``streamlit run <script>`` headless on a free localhost port, plus ``options``; yields its URL once healthy.

    Run from the repository's root, so ``.streamlit/config.toml`` applies to any script. Also used by
    ``benchmarks/first_answer.py`` (the dashboard, and a one-metric script as the empty page).
    """
    port = free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true", "--server.port", str(port),
        "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", *options,
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield wait_until_healthy(f"http://127.0.0.1:{port}", process, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_until_healthy(url, process, log) -> str:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.read().strip() == b"ok":
                    return url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            pytest.fail(f"streamlit did not start:\n{log.read().decode(errors='replace')[-3000:]}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def rendered(at_both_widths):
    """Every page loaded once, fully drawn: its errors, the requests that failed, and what the first screen holds.

    Returns ``failures`` (error elements by page), ``offline`` (requests to other hosts that failed), ``refused``
    (responses with an error status) and ``seen`` (by page, :data:`FIRST_ANSWER_ORDER`); a screenshot of each
    page is saved. Taken on the fresh loads at 1440 of :func:`at_both_widths` (one pass over the pages).
    """
    return at_both_widths["rendered"]


def test_every_page_renders_in_headless_chromium_without_errors(browser, server, rendered):
    failures = list(rendered["failures"])
    page = new_page(browser, 1400, 2600)
    try:
        # A shared link reproduces the what-if: the inputs start from the address's parameters.
        page.goto(f"{server}/memory_fit?context=8192&batch=3", wait_until="domcontentloaded")
        field = page.get_by_role("spinbutton", name="Context per sequence [token]")
        field.wait_for(timeout=30_000)
        linked = (field.input_value(), page.get_by_role("spinbutton", name="Batch [sequences]").input_value())
        # The fleet sizer's plan checked by simulation: the verdict and the latency charts appear.
        # the sidebar's fewest requests and one seed: the verdict and the charts are tested, not their precision
        page.goto(f"{server}/?sim_requests=200&sim_seeds=1", wait_until="domcontentloaded")
        button = page.get_by_role("button", name="Check by simulation")
        button.wait_for(timeout=30_000)
        button.click()
        page.get_by_text("Simulation:", exact=False).first.wait_for(timeout=90_000)
        page.wait_for_function(
            """() => document.querySelector('[data-test-script-state="notRunning"]')
                && document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length >= 3""",
            timeout=60_000,
        )
        if page.locator(ERRORS).count():
            failures.append(f"verify by simulation: {page.locator(ERRORS).first.inner_text()[:300]}")
        page.screenshot(path=str(SCREENSHOTS / "fleet_sizer_verified.png"), full_page=True)
        simulation_labels = page.evaluate(CUT_LABELS)  # "Goodput at the plan's replicas [re…" was cut
        # The plan's link opens the cost page with its volume: the default 10 request/s is 864,000 a day.
        page.get_by_role("link", name="Lifetime cost of this plan", exact=False).click()
        volume = page.get_by_role("spinbutton", name="Queries per day [request/day]")
        volume.wait_for(timeout=30_000)
        page.wait_for_function(
            "() => document.querySelector('[data-test-script-state=\"notRunning\"]')", timeout=60_000
        )
        per_day = float(volume.input_value())
    finally:
        page.close()
    assert not failures, failures
    assert linked == ("8192", "3")
    assert simulation_labels == [] and per_day == 864_000
    assert not rendered["offline"], f"requests that failed (external resources?): {rendered['offline'][:5]}"
    assert not rendered["refused"], f"responses with an error status: {rendered['refused'][:5]}"
    assert len(list(SCREENSHOTS.glob("*.png"))) >= len(PAGES)


#: URL path -> (the page's title, the label of its headline metric): pages whose answer comes first.
ANSWER_FIRST = {
    "": ("Fleet sizer", "GPUs"),
    "memory_fit": ("Memory fit", "Fits"),
    "benchmark": ("Benchmark prediction", "TTFT"),
    "cost": ("Cost", "Lifetime cost"),
    "production_day": ("A day in production", "Attainment"),
    "batching_queueing": ("Batching and queueing", "Knee batch"),
    "decode_speedups": ("Decode speedups", "Speedup"),
    "sharding": ("Sharding and communication", "Layer time"),
    "routing_tails": ("Routing and tails", "Requests slowed"),
    "autoscaling_regions": ("Autoscaling and regions", "Cold start"),
    "registry": ("Registry", "in the registry"),  # the entries of the section chosen above it, then their table
    "goal_seek": ("Goal seek", "Transformer layers"),  # the default formula solved for its first input
}
#: Pages whose answer may follow an input: the registry's section picker chooses what it counts and lists.
PICKER_FIRST = {"registry"}
#: The tabs after the first, counted in the pages' sources (sc.tabs, st.tabs): fleet sizer 2, memory fit 4, cost 3,
#: batching 4, decode speedups 3, sharding 3, routing 3, autoscaling 4, registry 4, production day 4; benchmark and
#: goal seek none.
TABS_AFTER_FIRST = 2 + 4 + 3 + 4 + 3 + 3 + 3 + 4 + 4 + 4
#: The metrics whose value text does not fit its box (the value or an element inside it cut off, with "…").
CUT_OFF = """() => [...document.querySelectorAll('[data-testid="stMetric"]')]
    .filter((metric) => metric.offsetParent !== null)
    .filter((metric) => [...metric.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricValue"] *')]
        .some((element) => element.scrollWidth > element.clientWidth))
    .map((metric) => metric.innerText.replace(/\\s+/g, " "))"""
#: The visible metrics whose label does not fit its box (cut off with "…": the unit is what gets lost).
CUT_LABELS = """() => [...document.querySelectorAll('[data-testid="stMetricLabel"]')]
    .filter((label) => label.offsetParent !== null)
    .filter((label) => [label, ...label.querySelectorAll('*')]
        .some((element) => element.scrollWidth > element.clientWidth + 1))
    .map((label) => label.innerText.replace(/\\s+/g, " "))"""
#: The navigation's page icons: the text of each and the font it is drawn in.
NAV_ICONS = """() => [...document.querySelectorAll('[data-testid="stSidebarNavLink"] [data-testid="stIconMaterial"]')]
    .map((icon) => [icon.innerText, getComputedStyle(icon).fontFamily])"""
#: Whether the open tab's panel has been drawn: a page draws only its open tab, so a tab just clicked is drawn
#: once the rerun has put elements in its panel and finished.
TAB_DRAWN = """() => document.querySelector('[data-test-script-state="notRunning"]')
    && !document.querySelector('[data-testid="stSkeleton"]')
    && [...document.querySelectorAll('[data-testid="stTabPanel"]')]
        .some((panel) => panel.offsetParent !== null && panel.querySelector('[data-testid="stElementContainer"]'))"""


def _measure_tabs(page, path, width, cut, labels, pools) -> int:
    """Open each further tab of the page (the first is open) and record its cut values and labels by tab.

    Returns the tabs opened. The navigation's tabs are links, not ``role=tab``; the page's tabs are. The fleet
    sizer's pools tab is also checked whole (:func:`_check_pools`) into ``pools``.
    """
    tabs = page.locator('[data-testid="stTabs"] [role="tab"]')
    for index in range(1, tabs.count()):
        tab = tabs.nth(index)
        name = tab.inner_text().strip()
        tab.click()
        if (path, name) == POOLS_TAB:
            _wait_for_pools(page)
        page.wait_for_function(TAB_DRAWN, timeout=60_000)
        cut[path, width, name] = page.evaluate(CUT_OFF)
        labels[path, width, name] = page.evaluate(CUT_LABELS)
        if (path, name) == POOLS_TAB:
            pools[width] = _check_pools(page, width)
    return max(tabs.count() - 1, 0)


#: The fleet sizer's tab of disaggregated pools (path, tab), checked whole as the fixture's pass opens it.
POOLS_TAB = ("", "Disaggregated pools")


def _wait_for_pools(page) -> None:
    """Wait for the pools' metrics and their downloads, the last drawn before the pools' check button."""
    page.locator('[data-testid="stMetric"]', has_text="Decode replicas").first.wait_for(timeout=60_000)
    page.get_by_role("button", name="Check the pools by simulation").wait_for(timeout=60_000)


def _check_pools(page, width) -> dict:
    """The pools tab, drawn: its download buttons and a screenshot (at 1440), and the error shown if any."""
    found = {"downloads": [], "errors": []}
    if width == 1440:
        found["downloads"] = [b.inner_text() for b in page.locator('[data-testid="stDownloadButton"]').all()]
        page.screenshot(path=str(SCREENSHOTS / "fleet_sizer_pools.png"), full_page=True)
    if page.locator(ERRORS).count():
        found["errors"].append(page.locator(ERRORS).first.inner_text()[:300])
    return found


#: Done drawing: the script has finished, no lazy element is still a skeleton, and Plotly has drawn every
#: visible chart.
DRAWN = """() => document.querySelector('[data-test-script-state="notRunning"]')
    && !document.querySelector('[data-testid="stSkeleton"]')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
        .filter((chart) => chart.offsetParent !== null)
        .every((chart) => chart.querySelector('.main-svg'))"""
#: The screenshots' viewport height: a page drawn whole in one screen.
SCREENSHOT_HEIGHT = 2600
#: Resolves once the browser has painted what is drawn now (two animation frames), instead of a fixed pause.
NEXT_PAINT = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def _watch_requests(page, server, rendered, listening) -> None:
    """Record on ``rendered`` the requests of ``page`` that fail while ``listening[0]`` is true.

    The dashboard must not need the internet (fonts, icons, scripts): a failed request to another host is
    ``offline``. Requests to the app's own server may fail when a rerun replaces a download button's file while
    the page fetches it. A response with an error status is ``refused``, unless it is one of Streamlit's probes.
    """
    page.on(
        "requestfailed",
        lambda request: (
            rendered["offline"].append(request.url) if listening[0] and not request.url.startswith(server) else None
        ),
    )
    page.on(
        "response",
        lambda response: (
            rendered["refused"].append(f"{response.status} {response.url}")
            if listening[0] and response.status >= 400 and not _known_probe(response.url, server)
            else None
        ),
    )


def _check_fresh_load(page, path, width, rendered) -> None:
    """On a page just loaded, once drawn whole (:data:`DRAWN`, at :data:`SCREENSHOT_HEIGHT`): record its errors
    and :data:`FIRST_ANSWER_ORDER` on ``rendered``, save its screenshot; then restore the viewport's height."""
    height = page.viewport_size["height"]
    page.set_viewport_size({"width": width, "height": SCREENSHOT_HEIGHT})
    page.wait_for_function(DRAWN, timeout=60_000)
    page.evaluate(NEXT_PAINT)
    errors = page.locator(ERRORS)
    if errors.count():
        rendered["failures"].append(f"/{path}: {errors.first.inner_text()[:300]}")
    rendered["seen"][path] = page.evaluate(FIRST_ANSWER_ORDER)
    page.screenshot(path=str(SCREENSHOTS / f"{path or 'fleet_sizer'}.png"), full_page=True)
    page.set_viewport_size({"width": width, "height": height})


def _place_answer(page, path, width, height):
    """The headline's box, the screen's height and the first input's top (:data:`ANSWER_FIRST`)."""
    headline = ANSWER_FIRST[path][1]
    metric = page.locator('[data-testid="stMetric"]', has_text=headline).first
    metric.wait_for(timeout=30_000)
    inputs = [
        b["y"]
        for b in (field.bounding_box() for field in page.locator("input").all())
        if b is not None and b["width"] > 0 and b["x"] >= 0 and b["x"] < width
    ]
    return metric.bounding_box(), height, min(inputs) if inputs else None


@pytest.fixture(scope="module")
def at_both_widths(chromium, browser, server):
    """Every page loaded at 1440x900 and at 390x844 (a phone): where its headline answer and first input are,
    which metric values and labels are cut off on every tab, and the navigation's icons; at 1440 also what
    :func:`rendered` returns.

    One page per width opens the pages in turn (:func:`_pass_over_pages`); on each page the open (first) tab is
    measured, then (at 1440) the fresh load is checked whole (:func:`_check_fresh_load`), then each other tab is
    clicked once and measured. The two widths' passes run side by side, the phone's in a thread with its own
    Chromium (Playwright's objects belong to the thread that made them): each pass waits on the server and its
    browser most of the time. Returns ``places`` ((path, width) -> (the headline's box, the screen's height, the
    first input's top)), ``cut`` and ``labels`` ((path, width) for the first tab, (path, width, tab) for the
    others -> the metrics cut off), ``tabs`` (tabs opened by click, per width), ``icons`` (on the first page at
    1440), ``pools`` (width -> the fleet sizer's pools tab, :func:`_check_pools`) and ``rendered``.
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    found = {"places": {}, "cut": {}, "labels": {}, "icons": [], "tabs": {}, "pools": {}}
    found["rendered"] = {"failures": [], "offline": [], "refused": [], "seen": {}}
    raised = []
    phone = threading.Thread(target=_phone_pass, args=(chromium, server, found, raised), daemon=True)
    phone.start()
    try:
        page = new_page(browser, 1440, 900)
        try:
            _pass_over_pages(page, server, 1440, 900, found, found["rendered"])
        finally:
            page.close()
    finally:
        phone.join(timeout=900)
    assert not phone.is_alive(), "the pass at 390 did not finish"
    if raised:
        raise raised[0]
    return found


def _phone_pass(chromium, server, found, raised) -> None:
    """:func:`_pass_over_pages` at 390x844 in a Chromium of its own (run in a thread); an exception is kept."""
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
                _pass_over_pages(page, server, 390, 844, found)
            finally:
                browser.close()
    except BaseException as exc:  # re-raised by the fixture, in the test's thread
        raised.append(exc)


def _pass_over_pages(page, server, width, height, found, rendered=None) -> None:
    """Open every page in turn on ``page`` and record into ``found`` (see :func:`at_both_widths`).

    With ``rendered`` (the pass at 1440) each fresh load is also checked whole and its failed requests recorded.
    """
    listening = [False]  # the fresh loads at 1440, as the screenshots' pass did on its own
    if rendered is not None:
        _watch_requests(page, server, rendered, listening)
    for path, title in PAGES.items():  # each a fresh load: a new session of the app
        listening[0] = rendered is not None
        page.goto(f"{server}/{path}", wait_until="domcontentloaded")
        page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=30_000)
        page.wait_for_function(
            """() => document.querySelector('[data-test-script-state="notRunning"]')
                && !document.querySelector('[data-testid="stSkeleton"]')""",
            timeout=60_000,
        )
        if path in ANSWER_FIRST:
            found["places"][path, width] = _place_answer(page, path, width, height)
        found["cut"][path, width] = page.evaluate(CUT_OFF)
        found["labels"][path, width] = page.evaluate(CUT_LABELS)
        if rendered is not None:
            found["icons"] = found["icons"] or page.evaluate(NAV_ICONS)
            _check_fresh_load(page, path, width, rendered)
        listening[0] = False
        opened = _measure_tabs(page, path, width, found["cut"], found["labels"], found["pools"])
        found["tabs"][width] = found["tabs"].get(width, 0) + opened


def test_the_answer_comes_first(at_both_widths):
    # At 1440x900 each page's headline metric is inside the first screen; on a phone (390x844) it comes before
    # any input (the inputs sit in the sidebar, collapsed on a phone, or below the answer). Batching, decode
    # speedups, sharding and autoscaling put their inputs first, the answer at 909 to 1,137 px on a phone.
    places = at_both_widths["places"]
    for path in ANSWER_FIRST:
        desktop, desktop_height, _ = places[path, 1440]
        assert desktop["y"] + desktop["height"] <= desktop_height, (path, desktop)
        phone, phone_height, first_input = places[path, 390]
        assert phone["y"] < phone_height, (path, places[path, 390])  # above the fold
        if path not in PICKER_FIRST:
            assert first_input is None or phone["y"] < first_input, (path, places[path, 390])
    assert set(ANSWER_FIRST) == set(PAGES)


def test_metric_values_and_labels_fit(at_both_widths):
    # The metrics' values and labels are whole on every page at both sizes: in a row of four the lifetime cost,
    # "20.26 million USD", was cut to "20.26 million…" at 1440x900; labels lost their units ("Goodput at the
    # plan's replicas [re…", "Gap between deliveries (…").
    # Every tab of every page, each opened by a click (the AppTest suite saw them only as text).
    offenders = {
        (kind, *where): metrics
        for kind in ("cut", "labels")
        for where, metrics in at_both_widths[kind].items()
        if metrics
    }
    assert {key[:2] for key in at_both_widths["labels"]} == {(path, width) for path in PAGES for width in (1440, 390)}
    assert at_both_widths["tabs"] == {1440: TABS_AFTER_FIRST, 390: TABS_AFTER_FIRST}
    assert not offenders, offenders


def test_the_page_icons_are_drawn_in_the_bundled_material_font(at_both_widths):
    # Emoji icons showed as empty boxes in a browser without an emoji font; Material icons are ligatures of the
    # Material Symbols font that Streamlit serves itself.
    icons = at_both_widths["icons"]
    assert len(icons) == len(PAGES), icons
    assert all(text and "Material Symbols" in font for text, font in icons), icons


#: Pages that draw every tab (the registry's forms and upload keep their input when hidden).
EAGER_TABS = {"registry"}
#: The page's metrics and charts in document order, and the elements each hidden tab panel holds.
FIRST_ANSWER_ORDER = """() => ({
    order: [...document.querySelectorAll('[data-testid="stMetric"], [data-testid="stPlotlyChart"]')]
        .map((element) => element.dataset.testid),
    hidden: [...document.querySelectorAll('[data-testid="stTabPanel"]')]
        .filter((panel) => panel.offsetParent === null)
        .map((panel) => panel.querySelectorAll('[data-testid="stElementContainer"]').length),
})"""


def test_the_first_answer_is_not_held_back_by_charts_or_hidden_tabs(rendered):
    # Issue 24, item 8: the browser reveals a page's first metric only after drawing what arrived with it, and
    # pages that drew every tab made it draw the hidden tabs' charts and tables first (docs/dashboard.md,
    # "Speed"). On a fresh load of each page the first metric precedes every chart, and the hidden tabs are empty.
    seen = rendered["seen"]
    assert set(seen) == set(PAGES)
    for path, found in seen.items():
        assert found["order"] and found["order"][0] == "stMetric", (path, found["order"])
        if path not in EAGER_TABS:
            assert not any(found["hidden"]), (path, found["hidden"])
    assert any(seen[path]["hidden"] for path in EAGER_TABS)  # the check sees what a hidden tab holds


def test_a_link_parameter_with_addresses_shows_no_clickable_link(browser, server):
    # Issue 25 item 8: the Markdown was escaped, but both bare URLs became clickable links in the "Ignored the
    # link's parameter" warning (fleet sizer, memory fit, goal seek).
    from urllib.parse import quote

    hostile = "![p](http://127.0.0.1:9/qp.png) [click me](http://evil.example/phish) www.evil.example"
    found = {}
    page = new_page(browser, 1280, 720)  # Playwright's default viewport
    try:
        for path, name in (("", "rate"), ("memory_fit", "model"), ("goal_seek", "module")):
            page.goto(f"{server}/{path}?{name}={quote(hostile)}", wait_until="domcontentloaded")
            warning = page.locator('[data-testid="stAlertContentWarning"]', has_text="Ignored the link").first
            warning.wait_for(timeout=60_000)
            found[path] = (warning.inner_text(), warning.locator("a, img").count())
    finally:
        page.close()
    for path, (text, links) in found.items():
        assert links == 0, (path, text)
        assert "evil" in text and "click me" in text, (path, text)  # shown as typed, inert


def test_the_fleet_sizers_disaggregated_pools_fit_and_offer_their_commands(at_both_widths):
    # Issue 55 item 4 on the dashboard: the pools' tab draws its metrics whole at both widths and offers each
    # engine's commands and the manifest. Its simulation check's verdict and numbers are test_app.py's
    # (test_fleet_sizer_shows_disaggregated_pools_...): clicked here, the check timed out on a loaded machine.
    # The tab is opened on the fleet sizer's default plan by the pass over every page's tabs (:func:`at_both_widths`),
    # which checks it whole there: its metrics, then its downloads, are waited for before it is measured.
    pools = at_both_widths["pools"]
    assert set(pools) == {1440, 390}, pools
    failures = [error for width in (1440, 390) for error in pools[width]["errors"]]
    path, tab = POOLS_TAB
    labels = {width: at_both_widths["labels"][path, width, tab] for width in (1440, 390)}
    cut = {width: at_both_widths["cut"][path, width, tab] for width in (1440, 390)}
    downloads = pools[1440]["downloads"]
    assert not failures, failures
    assert labels == {1440: [], 390: []} and cut == {1440: [], 390: []}, (labels, cut)
    assert {"vLLM pools and proxy", "SGLang pools and router", "TensorRT-LLM pools and server"} <= set(downloads)
    assert "Kubernetes manifest of the pools" in downloads
