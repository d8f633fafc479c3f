"""Every table and metric the dashboard shows is readable: human labels, formatted numbers, no raw values.

Each page runs headless (AppTest) at its defaults, once per tab (a page draws only its open tab), and, where
cheap, in a second scenario that shows other tables (an infeasible fleet, a batch that does not fit, each
registry section, a verified plan). Every
dataframe is walked cell by cell in the text the reader sees: the display value the page sent (a pandas
Styler's, ``_common.table``), or else the raw value as text. The rules (:func:`problems`):

* a column label is human: no ``_``, and its first letter is not a lower-case ASCII letter (``wait_probability``
  and ``ttft [ms]`` fail, ``Wait probability`` and ``TTFT [ms]`` pass);
* no cell is empty or reads ``None``, ``nan``, ``NaN``, ``<NA>``, ``inf``, ``True`` or ``False``;
* every number in a cell (a whitespace-separated word that is a number once brackets, ``%``, ``×`` and
  trailing punctuation are stripped) is readable: a decimal fraction has at most 4 significant digits; a
  whole number of 10,000 or more has thousands separators (``10,176``; exact counts may keep every digit);
  separators are in their places; an exponent appears only outside the readable range (below 1e-4 or from
  1e15 on), with at most 4 significant digits.

Metric values follow the same number rules, and metric labels the label rule. The Registry page is the one exception to the digit limit:
it lists each value as written in its source (``1978.9 TFLOP/s``, a datasheet figure), so only its labels,
missing values and thousands separators are checked.
"""

import math
import re
from pathlib import Path

import pytest
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest
from test_app import each_tab

ROOT = Path(__file__).resolve().parent.parent
SIGNIFICANT = 4
RAW_WORDS = {"none", "nan", "<na>", "nat", "inf", "-inf", "true", "false"}
NUMBER = re.compile(r"^[-−+]?(?P<int>\d[\d,]*)(?P<frac>\.\d+)?(?:[eE](?P<exp>[-+]?\d+))?$")
STRIP = "()[]{}%×x,;:"


#: Pages whose cells show values as written in their sources (no limit on significant digits).
AS_WRITTEN = {"registry"}


def number_problem(word: str, significant: int | None = SIGNIFICANT) -> str | None:
    """Why a number written as ``word`` is not readable (``None`` if it is, or if it is not a number)."""
    token = word.strip(STRIP)
    match = NUMBER.match(token)
    if not match:
        return None
    whole, fraction, exponent = match["int"], match["frac"] or "", match["exp"]
    if "," in whole and not re.fullmatch(r"\d{1,3}(,\d{3})+", whole):
        return f"misplaced thousands separators in {word!r}"
    digits = whole.replace(",", "")
    value = float(f"{digits}{fraction}")
    if exponent is not None:
        scaled = value * 10.0 ** int(exponent)
        if scaled != 0 and 1e-4 <= abs(scaled) < 1e15:
            return f"exponent inside the readable range in {word!r}"
    if fraction or exponent is not None:
        written = (digits + fraction[1:]).lstrip("0")
        if significant is not None and len(written) > significant:
            return f"more than {significant} significant digits in {word!r}"
    elif value >= 10_000 and "," not in whole:
        return f"no thousands separators in {word!r}"
    return None


def text_problems(text: str, significant: int | None = SIGNIFICANT) -> list[str]:
    """Problems of one cell's or metric's text."""
    stripped = text.strip()
    if not stripped:
        return ["an empty cell"]
    if stripped.lower() in RAW_WORDS:
        return [f"a raw value {stripped!r}"]
    found = [number_problem(word, significant) for word in stripped.split()]
    return [problem for problem in found if problem]


def label_problem(label: str) -> str | None:
    """Why a column label is not a human label (``None`` if it is)."""
    text = str(label)
    if "_" in text:
        return f"a field name {text!r}"
    letters = [c for c in text if c.isalpha()]
    if re.match(r"p\d", text):  # a percentile as written (p99 wait)
        return None
    if letters and "a" <= letters[0] <= "z" and text[0] == letters[0]:
        return f"a lower-case label {text!r}"
    return None


def shown_cells(element) -> tuple[list[str], list[list[str]]]:
    """Column labels and the cells' text as the reader sees them."""
    raw = element.value
    styler = element.proto.arrow_data.styler
    if styler.display_values:
        shown = dataframe_util.convert_arrow_bytes_to_pandas_df(styler.display_values)
        rows = [[str(v) for v in row] for row in shown.itertuples(index=False)]
    else:
        rows = [[_raw_text(v) for v in row] for row in raw.itertuples(index=False)]
    return [str(c) for c in raw.columns], rows


def _raw_text(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return str(value)


def problems(app: AppTest, significant: int | None = SIGNIFICANT) -> list[str]:
    """Every unreadable label, cell and metric value on the page."""
    found = []
    for index, element in enumerate(app.dataframe):
        labels, rows = shown_cells(element)
        found += [f"table {index}: {p}" for p in map(label_problem, labels) if p]
        for row in rows:
            for label, cell in zip(labels, row, strict=True):
                found += [f"table {index}, column {label!r}: {p}" for p in text_problems(cell, significant)]
    for item in app.metric:
        found += [f"metric {item.label!r}: {p}" for p in text_problems(str(item.value))]
        found += [f"metric label: {p}" for p in [label_problem(item.label)] if p]
    return found


def open_page(page: str, **params: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.switch_page(f"app_pages/{page}.py")
    for name, value in params.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    return app


# ------------------------------------------------------------------------------------------ the rules


@pytest.mark.parametrize(
    "word",
    ["82.78", "0.08278", "10,176", "1,234,567", "3", "1.5e-05", "2.5e+20", "llama-3.1-70b", "h100", "(80", "×2.4"],
)
def test_readable_numbers_pass(word):
    assert number_problem(word) is None


@pytest.mark.parametrize("word", ["0.082783", "10176", "2.0001", "1,23,456", "1.2e-03", "82.783", "12345.6"])
def test_unreadable_numbers_fail(word):
    assert number_problem(word) is not None


@pytest.mark.parametrize("label", ["wait_probability", "ttft [ms]", "closest.ttft [s]", "tokens_per_s"])
def test_field_names_are_not_labels(label):
    assert label_problem(label) is not None


@pytest.mark.parametrize("label", ["Wait probability", "TTFT [ms]", "P99 wait [ms]", "GPUs", "α [µs]"])
def test_human_labels_pass(label):
    assert label_problem(label) is None


@pytest.mark.parametrize("cell", ["None", "nan", "True", "False", "", "<NA>"])
def test_raw_cells_fail(cell):
    assert text_problems(cell)


# ------------------------------------------------------------------------------------------ every page

PAGES = sorted(p.stem for p in (ROOT / "app_pages").glob("*.py") if not p.stem.startswith("_"))
SCENARIOS = [(page, {}) for page in PAGES] + [
    ("fleet_sizer", {"tpot": "5.0"}),  # infeasible: the rejected configurations, the closest alternative
    ("memory_fit", {"batch": "64"}),  # a batch that does not fit
    ("registry", {"section": "interconnects"}),
    ("registry", {"section": "models"}),
    ("registry", {"section": "prices"}),
]


@pytest.mark.parametrize(
    ("page", "params"),
    SCENARIOS,
    ids=[f"{p}-{'-'.join(f'{k}={v}' for k, v in q.items()) or 'default'}" for p, q in SCENARIOS],
)
def test_every_table_and_metric_of_every_page_is_readable(page, params):
    tables, found = 0, []
    for app in each_tab(open_page(page, **params)):
        tables += len(app.dataframe)
        found += problems(app, None if page in AS_WRITTEN else SIGNIFICANT)
    if page != "goal_seek":
        assert tables, f"{page} shows no table"
    assert found == []


def test_the_tables_of_a_verified_fleet_plan_are_readable():
    app = open_page("fleet_sizer", sim_requests="600")
    app.button(key="fleet.verify").click().run()
    assert not app.exception
    assert any("Replicas" in element.value.columns for element in app.dataframe)
    assert problems(app) == []
