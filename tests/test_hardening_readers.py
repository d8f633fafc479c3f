"""Hardening III, the readers: registry files, traces and demand curves are read bounded and checked.

A device, a pipe or a folder is refused before anything is read (``/dev/zero`` used to be read until
memory ran out, a FIFO blocked), a key given twice in a registry file is refused (the last value won
silently), a bad date, a 5,000-digit integer or a 990-deep list is a one-line error (they were
tracebacks), a non-numeric trace cell is named by column and row, and ``--demand-bin`` cannot ask for
more than MAX_DEMAND_BINS bins.
"""

from __future__ import annotations

import os
import textwrap
import threading
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from calculator import Q_
from calculator.cli import app
from calculator.errors import InputError, RegistryError
from calculator.fleet import Workload, demand_from_trace
from calculator.registry import load_registry

ROOT = Path(__file__).resolve().parent.parent

runner = CliRunner()

#: A valid user registry file: one accelerator with its source.
USER = textwrap.dedent(
    """\
    sources:
      - {id: my-lab, title: Our lab, url: "https://example.com/lab", kind: user}
    accelerators:
      - id: my-gpu
        name: My GPU 96GB
        vendor: Example
        provenance: user
        memory: 96 GiB
        memory_nameplate: 96 GB
        memory_bandwidth: 4.0 TB/s
        dense_throughput: {bf16: 900 TFLOP/s}
        tdp: 600 W
        sources: [{source: my-lab, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]}]
    """
)
SIZE = ["size", "llama-3.1-8b", "--ttft", "1 s", "--tpot", "50 ms", "--price", "4"]
DEMAND = [*SIZE, "--input", "100", "--output", "10", "--rate", "1"]
TRACE = "arrival_time,input_tokens,output_tokens\n0,100,10\n1,100,10\n3600,100,10\n"


def refused(args: list[str]) -> str:
    """The one line a command prints on standard error when it refuses its input with status 2."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.exit_code, result.output[-2000:])
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.output, result.output[-2000:]
    return line


@pytest.fixture
def fifo(tmp_path):
    """A named pipe with a writer waiting: a reader that opened it would get a valid file and no end of it."""
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)

    def write() -> None:
        try:
            with open(path, "w", encoding="utf-8") as handle:  # blocks until a reader opens the pipe
                handle.write(USER)
        except OSError:  # the reader closed the pipe first (as a refusal does)
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield path
    os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))  # let a writer still waiting finish
    writer.join(5)


def special_files(tmp_path, fifo):
    return {"/dev/zero": "/dev/zero", "a FIFO": str(fifo), "a folder": str(tmp_path)}


# ------------------------------------------------------------------------------------------------ registry


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO", "a folder"])
def test_a_registry_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, fifo, kind):
    path = special_files(tmp_path, fifo)[kind]
    for args in (["registry", "validate", path], ["registry", "list", "models", "--extra", path]):
        line = refused(args)
        assert f"cannot read the registry file: {path} is not a regular file" in line, line
    with pytest.raises(RegistryError, match="not a regular file"):
        load_registry(extra=[path])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (("    memory: 96 GiB\n", "    memory: 96 GiB\n    memory: 960 GiB\n"), "memory"),  # a field twice
        ((None, "accelerators: []\n"), "accelerators"),  # a section twice: the entries above were dropped
        (("  - id: my-gpu\n", "  - id: my-gpu\n    id: my-gpu-2\n"), "id"),
    ],
    ids=["field", "section", "id"],
)
def test_a_key_given_twice_in_a_registry_file_is_refused(tmp_path, change, key):
    old, new = change
    user = tmp_path / "twice.yaml"
    user.write_text(USER + new if old is None else USER.replace(old, new), encoding="utf-8")
    line = refused(["registry", "validate", str(user)])
    assert "twice.yaml: malformed YAML at line " in line and f"the key '{key}' is given twice" in line, line
    # the same sentence, each naming where the file was given (the argument FILE, the flag --extra)
    assert line.startswith("error: FILE: twice.yaml: ")
    assert refused(["registry", "list", "--extra", str(user)]) == line.replace("error: FILE: ", "error: --extra: ", 1)
    (tmp_path / "once.yaml").write_text(USER, encoding="utf-8")
    assert load_registry(extra=[tmp_path / "once.yaml"]).accelerators["my-gpu"].memory == Q_(96, "GiB")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (USER.replace("url: ", "accessed: 2024-13-01, url: "), "a value cannot be read (month must be in 1..12)"),
        (
            USER.replace("tdp: 600 W", "tdp: " + "9" * 5000),
            "a value cannot be read (an integer written with more than 4,300 digits)",
        ),
        ("accelerators: " + "[" * 990 + "]" * 990 + "\n", "nested more than 20 levels deep"),
        (USER.replace("vendor: Example", "vendor: " + "[" * 990 + "]" * 990), "nested more than 20 levels deep"),
    ],
    ids=["date", "5000-digit integer", "990-deep section", "990-deep field"],
)
def test_unreadable_registry_values_are_one_line_errors(tmp_path, text, message):
    user = tmp_path / "odd.yaml"
    user.write_text(text, encoding="utf-8")
    line = refused(["registry", "validate", str(user)])
    assert line.startswith("error: FILE: odd.yaml: ") and message in line and len(line) < 400, line


def test_a_duplicate_key_pasted_on_the_registry_page_is_shown_as_an_error_not_added():
    from streamlit.testing.v1 import AppTest

    app_test = AppTest.from_file(str(Path(__file__).parents[1] / "app.py"), default_timeout=60)
    app_test.switch_page("app_pages/registry.py")
    app_test.run()
    app_test.text_area[0].set_value(USER + "accelerators: []\n")
    next(b for b in app_test.button if b.proto.form_id == "paste-yaml").click()
    app_test.run()
    assert not app_test.exception
    assert any("is given twice" in error.value for error in app_test.error), [e.value for e in app_test.error]
    assert not any("added" in success.value for success in app_test.success)


# ------------------------------------------------------------------------------------------ traces, demand


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO"])
@pytest.mark.parametrize("option", ["--trace", "--demand"])
def test_a_trace_that_is_not_a_regular_file_is_refused_at_once(tmp_path, fifo, kind, option):
    path = special_files(tmp_path, fifo)[kind]
    args = [*SIZE, "--trace", path] if option == "--trace" else [*DEMAND, "--demand", path]
    line = refused(args)
    assert f"{path} is not a regular file (a device, a pipe or a folder cannot be read)" in line, line
    assert option == "--trace" or line.startswith(f"error: --demand {path}: "), line


def test_a_trace_folder_or_a_trace_over_the_size_limit_is_refused(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="is not a regular file"):
        Workload.from_trace(tmp_path)
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE, encoding="utf-8")
    monkeypatch.setattr("calculator._files.MAX_TABLE_BYTES", 40)
    with pytest.raises(InputError, match=r"has more than 40 bytes"):
        Workload.from_trace(trace)
    assert "has more than 40 bytes" in refused([*DEMAND, "--demand", str(trace)])


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ([*SIZE, "--trace", "{trace}"], "the trace {trace}: column 'input_tokens', row 2"),
        (["simulate", *SIZE[1:], "--trace", "{trace}"], "the trace {trace}: column 'input_tokens', row 2"),
        ([*DEMAND, "--demand", "{arrivals}"], "--demand {arrivals}: the trace: column 'arrival_time', row 3"),
    ],
    ids=["size --trace", "simulate --trace", "size --demand"],
)
def test_a_non_numeric_trace_cell_is_named_by_column_and_row(tmp_path, args, where):
    trace, arrivals = tmp_path / "cells.csv", tmp_path / "arrivals.csv"
    trace.write_text(TRACE.replace("1,100,10", "1,many,10"), encoding="utf-8")
    arrivals.write_text("arrival_time\n0\n1\nsoon\n3600\n", encoding="utf-8")
    line = refused([a.format(trace=trace, arrivals=arrivals) for a in args])
    assert where.format(trace=trace, arrivals=arrivals) in line, line
    assert "found 'many'" in line or "found 'soon'" in line, line


def test_a_trace_cell_out_of_range_or_empty_is_named_too():
    frame = pd.DataFrame({"arrival_time": [0.0, 1.0, 2.0], "input_tokens": [10, 0, 10], "output_tokens": [5, 5, None]})
    with pytest.raises(InputError, match=r"column 'input_tokens', row 2 .*: found 0, a length below one token$"):
        Workload.from_trace(frame)
    with pytest.raises(InputError, match=r"column 'output_tokens', row 3 .*: an empty cell \(missing values"):
        Workload.from_trace(frame.assign(input_tokens=10))
    with pytest.raises(InputError, match=r"column 'arrival_time', row 1 .*: expected a time of at least 0 s, found -1"):
        Workload.from_trace(frame.assign(arrival_time=[-1, 0, 1], output_tokens=5))


def test_demand_bins_are_capped_with_the_smallest_bin_the_trace_allows(tmp_path):
    from calculator.fleet.demand import MAX_DEMAND_BINS

    trace = tmp_path / "hour.csv"
    trace.write_text(TRACE, encoding="utf-8")  # arrivals over 3,600 s
    line = refused([*DEMAND, "--demand", str(trace), "--demand-bin", "1 ns"])
    assert f"--demand {trace} --demand-bin 1 ns: " in line and "3,600,000,000,001 bins" in line, line
    assert f"more than {MAX_DEMAND_BINS:,}" in line and "give 'bin_width' at least 0.0361 s" in line, line
    with pytest.raises(InputError, match="100,001 bins"):
        demand_from_trace(trace, Q_(0.036, "s"))  # 3,600 / 0.036 + 1 bins: one too many
    times, _ = demand_from_trace(trace, Q_(0.0361, "s"))  # the smallest bin offered fits
    assert times.size <= MAX_DEMAND_BINS


def test_a_demand_curve_longer_than_the_schedules_follow_names_demand(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("time,rate\n0,5\n1e15,5\n")
    sizing = ["size", "llama-3.1-8b", "--rate", "5", "--input", "512", "--output", "128", "--ttft", "1 s"]
    result = CliRunner().invoke(app, [*sizing, "--tpot", "50 ms", "--demand", str(curve)])
    assert result.exit_code == 2
    assert "--demand: the curve spans" in result.output and "predictive_schedule" not in result.output


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_benchmark_tables_and_workbooks_are_read_as_regular_files_only(device):
    from calculator.calibration import load_benchmarks
    from calculator.export import read_xlsx

    for read in (load_benchmarks, read_xlsx):
        with pytest.raises(InputError, match="is not a regular file"):
            read(device)


@pytest.mark.parametrize("at", ["id: example-gpu", "bf16: 900 TFLOP/s", "fields: [price]"])
def test_a_registry_error_quotes_a_files_long_keys_and_values_short(at):
    from calculator.registry import RegistryDocument

    text = (ROOT / "examples" / "my_registry.yaml").read_text(encoding="utf-8")
    assert at in text
    hostile = text.replace(at, at[:3] + "9" * 5000 + at[3:], 1)
    with pytest.raises(RegistryError) as error:
        load_registry(extra=[RegistryDocument("mine.yaml", hostile)])
    assert len(str(error.value)) < 1000, str(error.value)[:300]
