"""CSV and XLSX exports round-trip, and the workbook cites the formulas and registry sources used."""

import csv
import io

import numpy as np
import openpyxl
import pandas as pd
import pytest

from calculator import Q_
from calculator.errors import InputError
from calculator.export import (
    FORMULA_TRIGGERS,
    SHEETS,
    SOURCE_COLUMNS,
    Provenance,
    escape_cell,
    escape_formulas,
    read_xlsx,
    to_csv,
    to_xlsx,
)
from calculator.memory import kv_bytes_per_token
from calculator.queueing import mmc_mean_wait
from calculator.registry import load_registry
from calculator.sweeps import sweep, sweep_fleet


@pytest.fixture(scope="module")
def kv_sweep():
    return sweep(
        kv_bytes_per_token,
        layers=[32, 80],
        kv_heads=[8, 64],
        head_dim=128,
        bytes_per_element=Q_([1, 2], "B"),
        units={"kv_bytes_per_token": "KiB/token"},
    )


@pytest.fixture(scope="module")
def waits():
    # utilization 0.5, 0.9 and 1.0: the last queue is unstable and waits forever (inf, not NaN)
    return sweep(mmc_mean_wait, arrival_rate=Q_([5, 9, 10], "request/s"), service_time=Q_(0.1, "s"), servers=1)


def test_csv_round_trip(kv_sweep, tmp_path):
    path = tmp_path / "kv.csv"
    assert to_csv(kv_sweep, path) is None
    back = pd.read_csv(path)
    pd.testing.assert_frame_equal(back, kv_sweep)
    assert to_csv(kv_sweep) == path.read_text()


def test_csv_round_trip_keeps_infinity(waits, tmp_path):
    assert np.isinf(waits["mmc_mean_wait [s]"].iloc[-1])
    path = tmp_path / "waits.csv"
    to_csv(waits, path)
    pd.testing.assert_frame_equal(pd.read_csv(path), waits)


def test_csv_of_a_result_object(plan, tmp_path):
    path = tmp_path / "plan.csv"
    to_csv(plan, path, units={"service.ttft": "ms"})
    back = pd.read_csv(path)
    assert back.loc[0, "gpus"] == plan.gpus
    assert back.loc[0, "service.ttft [ms]"] == pytest.approx(plan.service.ttft.m_as("ms"))


def test_xlsx_round_trip_and_sheets(kv_sweep, tmp_path):
    path = to_xlsx(kv_sweep, tmp_path / "kv.xlsx")
    sheets = read_xlsx(path)
    assert tuple(sheets) == SHEETS
    pd.testing.assert_frame_equal(sheets["results"], kv_sweep, check_dtype=False)
    inputs = sheets["inputs"].set_index("name")
    assert inputs.loc["layers", "values"] == "32, 80" and inputs.loc["layers", "points"] == 2
    assert inputs.loc["bytes_per_element", "unit"] == "B"
    assert inputs.loc["head_dim", "points"] == 1 and str(inputs.loc["head_dim", "values"]) == "128"
    sources = sheets["sources"]
    assert tuple(sources.columns) == SOURCE_COLUMNS
    row = sources.iloc[0]
    assert row["kind"] == "formula" and row["id"] == "memory.kv_bytes_per_token"
    assert row["reference"] == kv_bytes_per_token.reference
    assert row["latex"] == kv_bytes_per_token.latex()


def test_xlsx_round_trip_keeps_infinity(waits, tmp_path):
    sheets = read_xlsx(to_xlsx(waits, tmp_path / "waits.xlsx"))
    pd.testing.assert_frame_equal(sheets["results"], waits, check_dtype=False)


def test_xlsx_cites_registry_sources_of_a_fleet_sweep(tmp_path):
    frame = sweep_fleet(
        "llama-3.1-8b", ["h100-sxm", "a100-sxm-80gb"], "fp8", Q_(5, "request/s"), 512, 128, Q_(1, "s"), Q_(80, "ms")
    )
    sheets = read_xlsx(to_xlsx(frame, tmp_path / "fleet.xlsx"))
    pd.testing.assert_frame_equal(sheets["results"], frame, check_dtype=False)
    sources = sheets["sources"]
    assert sources.iloc[0]["kind"] == "function" and sources.iloc[0]["id"] == "fleet.size_fleet"
    registry = sources[sources.kind == "registry"]
    reg = load_registry()
    for entry_id in ("llama-3.1-8b", "h100-sxm", "a100-sxm-80gb"):
        cited = registry[registry.id == entry_id]
        entry = reg.find(entry_id)[1]
        assert len(cited) == len(entry.sources)  # one row per source document of the entry
        assert set(cited.url) == {reg.sources[link.source].url for link in entry.sources}
    prices = [i for i in frame.attrs["provenance"].registry_ids if reg.find(i)[0] == "prices"]
    assert len(prices) == 2 and set(prices) <= set(registry.id)


def test_xlsx_of_a_result_object_cites_what_its_cells_name(plan, tmp_path):
    path = to_xlsx(
        plan,
        tmp_path / "plan.xlsx",
        models=["fleet.size_fleet"],
        inputs={"arrival_rate": Q_(20, "request/s"), "ttft_slo": Q_(1, "s")},
        units={"service.ttft": "ms"},
    )
    sheets = read_xlsx(path)
    assert sheets["results"].loc[0, "service.ttft [ms]"] == pytest.approx(plan.service.ttft.m_as("ms"))
    assert set(sheets["inputs"].name) == {"arrival_rate", "ttft_slo"}
    cited = set(sheets["sources"].id)
    assert {"fleet.size_fleet", "llama-3.1-70b", "h100-sxm"} <= cited


def test_long_axes_show_their_range_on_the_inputs_sheet():
    inputs = Provenance(inputs={"rate": Q_(np.arange(1.0, 1001.0), "request/s"), "names": ["a", "b"]}).inputs_frame()
    assert list(inputs["values"]) == ["1, 2, ..., 1000", "a, b"]
    assert list(inputs["points"]) == [1000, 2]
    assert list(inputs["unit"]) == ["request/s", ""]


def test_export_errors(tmp_path, monkeypatch):
    import calculator.export

    with pytest.raises(InputError, match="expected a pandas DataFrame or a result object"):
        to_csv([1, 2, 3])
    with pytest.raises(InputError, match=r"no formula or library function 'memory\.nothing'"):
        to_xlsx(pd.DataFrame({"a": [1]}), tmp_path / "x.xlsx", models=["memory.nothing"])
    monkeypatch.setattr(calculator.export, "MAX_SHEET_ROWS", 3)
    with pytest.raises(InputError, match="write CSV instead"):
        to_xlsx(pd.DataFrame({"a": range(4)}), tmp_path / "y.xlsx")


def test_provenance_merge_keeps_order_without_duplicates():
    a = Provenance(("m.a",), ("x", "y"), {"p": 1})
    b = Provenance(("m.a", "m.b"), ("y", "z"), {"p": 2, "q": 3})
    merged = a.merge(b)
    assert merged.models == ("m.a", "m.b") and merged.registry_ids == ("x", "y", "z")
    assert merged.inputs == {"p": 1, "q": 3}


def test_a_sweep_of_the_callers_own_function_cites_it_and_the_library_models_named(tmp_path):
    from calculator.memory import device_share, memory_fit

    def fit(weight_bits, tensor_parallel, context):
        share = device_share("llama-3.1-70b", tensor_parallel, weight_bits, "fp16")
        return memory_fit(Q_(80, "GiB"), share.weights, share.kv_per_token, context)

    frame = sweep(fit, weight_bits=["bf16", "fp8"], tensor_parallel=[2, 4], context=[8192, 32768])
    assert frame.attrs["provenance"].models == (f"user:{__name__}.{fit.__qualname__}",)
    sheets = read_xlsx(to_xlsx(frame, tmp_path / "fit.xlsx", models=["memory.device_share", "memory.memory_fit"]))
    sources = sheets["sources"].set_index("id")
    assert sources.loc["memory.memory_fit", "kind"] == "function"
    assert sources.loc[f"{__name__}.{fit.__qualname__}", "reference"] == "the caller's own code"
    pd.testing.assert_frame_equal(sheets["results"], frame, check_dtype=False)


# ---------------------------------------------------------------------------------------------- formula injection

#: A user registry file whose free text would run in a spreadsheet: source titles and notes, an entry's name.
HOSTILE_REGISTRY = """
sources:
  - id: hostile-quote
    title: "=cmd|' /C calc'!A0"
    url: "https://example.com/datasheet"
    kind: user
  - id: hostile-tab
    title: "\\t=1+1"
    url: "https://example.com/tab"
    kind: user
    note: "\\r=2+2"
accelerators:
  - id: hostile-gpu
    name: "@SUM(1+1)*cmd|' /C calc'!A0"
    vendor: Example
    provenance: user
    memory: 96 GiB
    memory_nameplate: 96 GB
    memory_bandwidth: 4.0 TB/s
    dense_throughput: {bf16: 900 TFLOP/s, fp8: 1800 TFLOP/s}
    tdp: 600 W
    sources: [{source: hostile-quote, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp], note: "-2+3"}]
"""
HOSTILE_TEXT = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(1+1)", "\t=1+1", "\r=2+2", "\n=3+3"]
#: The same, as written: quoted, and a carriage return as a line feed (a bare one would start a new CSV row).
INERT_TEXT = ["'=cmd|' /C calc'!A0", "'+1+1", "'-2+3", "'@SUM(1+1)", "'\t=1+1", "'\n=2+2", "'\n=3+3"]


@pytest.fixture(scope="module")
def hostile_registry(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile.yaml"
    path.write_text(HOSTILE_REGISTRY)
    return load_registry(extra=[path])


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_escape_cell_quotes_text_a_spreadsheet_would_run_and_keeps_numbers():
    assert [escape_cell(text) for text in HOSTILE_TEXT] == INERT_TEXT
    assert {text[0] for text in HOSTILE_TEXT} == set(FORMULA_TRIGGERS)
    assert escape_cell("x\r=1+1") == escape_cell("x\r\n=1+1") == "x\n=1+1"  # no new row inside a cell
    assert escape_cell("-1.5") == "'-1.5"  # text that reads as a number is text: escaped (docs/hardening.md)
    assert escape_cell(-1.5) == -1.5 and escape_cell("h100-sxm") == "h100-sxm" and escape_cell(None) is None
    assert escape_cell("'=1+1") == "'=1+1"  # already inert
    frame = pd.DataFrame({"=label": ["@SUM(A1)", None, "ok"], "delta [ms]": [-1.5, 0.0, 2.0], "n": [-1, 2, 3]})
    escaped = escape_formulas(frame)
    assert list(escaped.columns) == ["'=label", "delta [ms]", "n"] and frame.columns[0] == "=label"
    assert escaped.iloc[0, 0] == "'@SUM(A1)" and pd.isna(escaped.iloc[1, 0]) and escaped.iloc[2, 0] == "ok"
    pd.testing.assert_frame_equal(escaped.iloc[:, 1:], frame.iloc[:, 1:])  # numbers stay numbers, dtypes kept


def test_csv_writes_text_a_spreadsheet_would_run_as_inert_text_and_numbers_as_numbers(hostile_registry):
    deltas = [-1.5, -2.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    frame = pd.DataFrame({"note": [*HOSTILE_TEXT[:-1], "x\r=1+1"], "delta [ms]": deltas, "-n": range(-3, 4)})
    text = to_csv(frame)
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == 1 + len(frame)  # a carriage return starts no row of its own
    for cell in (cell for row in rows for cell in row):
        assert not cell.startswith(FORMULA_TRIGGERS) or _is_number(cell), cell
    back = pd.read_csv(io.StringIO(text))
    assert list(back["note"]) == [*INERT_TEXT[:-1], "x\n=1+1"] and list(back.columns)[2] == "'-n"
    assert list(back["delta [ms]"]) == deltas and list(back["'-n"]) == list(range(-3, 4))
    # A plan's sources, as the table of the registry's free text they are.
    sources = to_csv(Provenance(registry_ids=("hostile-gpu", "hostile-tab")).sources_frame(hostile_registry))
    cells = [cell for row in csv.reader(io.StringIO(sources)) for cell in row]
    assert "'=cmd|' /C calc'!A0" in cells and "'@SUM(1+1)*cmd|' /C calc'!A0" in cells and "'\t=1+1" in cells
    assert not [cell for cell in cells if cell.startswith(FORMULA_TRIGGERS)]


def test_xlsx_holds_no_formula_from_a_hostile_registry_inputs_or_labels(hostile_registry, tmp_path):
    frame = pd.DataFrame({"accelerator": ["hostile-gpu"], "delta [ms]": [-1.5], "=note": ["-2 ms"]})
    inputs = {"+rate": "=1+1", "shift": Q_(-1.5, "ms")}
    path = to_xlsx(frame, tmp_path / "hostile.xlsx", registry=hostile_registry, registry_ids=["hostile-tab"],
                   inputs=inputs)  # fmt: skip
    workbook = openpyxl.load_workbook(path)
    cells = [cell for sheet in workbook for row in sheet.iter_rows() for cell in row if cell.value is not None]
    assert not [(cell.parent.title, cell.coordinate) for cell in cells if cell.data_type == "f"]
    texts = {cell.value for cell in cells if cell.data_type == "s"}
    assert not [text for text in texts if text.startswith(FORMULA_TRIGGERS)]
    expected = {"'=cmd|' /C calc'!A0", "'@SUM(1+1)*cmd|' /C calc'!A0", "'\t=1+1", "'-2+3", "'=note", "'-2 ms"}
    assert expected | {"'+rate", "'=1+1", "'-1.5"} <= texts
    assert "'\n=2+2" in texts  # the carriage return written as a line feed, as in CSV
    results = workbook["results"]
    assert results["B2"].value == -1.5 and results["B2"].data_type == "n"  # a negative number stays a number
    sheets = read_xlsx(path)
    assert sheets["results"].loc[0, "delta [ms]"] == -1.5 and sheets["results"].loc[0, "'=note"] == "'-2 ms"
