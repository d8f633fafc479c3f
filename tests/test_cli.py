"""The CLI skeleton: registry list, show and validate."""

import json

import pytest
from typer.testing import CliRunner

from calculator.cli import app

runner = CliRunner()


def test_registry_list_shows_every_section():
    result = runner.invoke(app, ["registry", "list"])
    assert result.exit_code == 0, result.output
    for heading in ("accelerators", "interconnects", "models", "prices"):
        assert heading in result.output
    assert "h100-sxm" in result.output


def test_registry_list_json():
    result = runner.invoke(app, ["registry", "list", "models", "--json"])
    ids = {row["id"] for row in json.loads(result.output)["models"]}
    assert "llama-3.1-70b" in ids


def test_registry_show_prints_values_with_units_and_sources():
    result = runner.invoke(app, ["registry", "show", "h100-sxm"])
    assert result.exit_code == 0, result.output
    assert "memory_bandwidth: 3.35 TB/s" in result.output
    assert "memory: 80 GiB" in result.output
    assert "sources:" in result.output and "http" in result.output


def test_registry_show_unknown_id_exits_2():
    result = runner.invoke(app, ["registry", "show", "h999"])
    assert result.exit_code == 2
    assert "no registry entry has id 'h999'" in result.output


def test_registry_validate_good_and_bad_files(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(
        "sources:\n  - {id: mine, title: Mine, url: 'file:x', kind: user}\n"
        "prices:\n  - {id: my-h100, name: Ours, provenance: user, accelerator: h100-sxm, price: 1.9 USD/hour,"
        " market: reserved, as_of: '2026-11', sources: [{source: mine, fields: [price]}]}\n"
    )
    result = runner.invoke(app, ["registry", "validate", str(good)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output

    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("1.9 USD/hour", "1.9 USD"))
    result = runner.invoke(app, ["registry", "validate", str(bad)])
    assert result.exit_code == 2
    assert "bad.yaml: prices['my-h100']: field 'price': expected dimension [currency] / [time]" in result.output
    assert "Traceback" not in result.output


def test_size_command_table_and_json():
    args = [
        "size",
        "llama-3.1-70b",
        "--rate",
        "20",
        "--input",
        "1024",
        "--output",
        "256",
        "--ttft",
        "1 s",
        "--tpot",
        "50 ms",
        "-a",
        "h100-sxm",
        "-p",
        "fp8",
        "--price",
        "4",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "feasible: True" in result.output and "gpus: " in result.output and "tpot: " in result.output
    # The answer line comes first and carries the GPU count at the ends of the model's error.
    answer = next(line for line in result.output.splitlines() if line.startswith("answer: "))
    assert "GPUs at the ends of the model's 80% error interval" in answer
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert data["feasible"] is True and data["tpot"]["unit"] == "s" and data["gpus"] >= 1
    low, high = data["gpus_interval"]
    assert low <= data["gpus"] <= high and f"{low}-{high} GPUs" in answer
    assert data["ttft_interval"][0]["unit"] == "s"


def test_size_command_infeasible_exits_1_and_bad_input_exits_2():
    base = [
        "size",
        "llama-3.1-70b",
        "--rate",
        "20",
        "--input",
        "1024",
        "--output",
        "256",
        "--ttft",
        "1 s",
        "--price",
        "4",
    ]
    infeasible = runner.invoke(app, [*base, "--tpot", "0.1 ms"])
    assert infeasible.exit_code == 1 and "closest tpot" in infeasible.output
    bad = runner.invoke(app, [*base, "--tpot", "fast"])
    assert bad.exit_code == 2 and "--tpot expects a quantity" in bad.output
    unknown = runner.invoke(app, [*base, "--tpot", "50 ms", "-a", "h999"])
    assert unknown.exit_code == 2 and "unknown accelerator id 'h999'" in unknown.output


def test_frontier_command_json():
    result = runner.invoke(app, ["frontier", "llama-3.1-8b", "--input", "1024", "--output", "512", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and all(row["pareto"] for row in rows)


SIZE_ARGS = [
    "size",
    "llama-3.1-70b",
    "--rate",
    "20",
    "--input",
    "1024",
    "--output",
    "256",
    "--ttft",
    "1 s",
    "--tpot",
    "50 ms",
    "--price",
    "4",
]


def test_registry_list_csv_and_xlsx(tmp_path):
    import io

    import pandas as pd

    from calculator.export import read_xlsx

    result = runner.invoke(app, ["registry", "list", "models", "--format", "csv"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(io.StringIO(result.output))
    assert list(frame.columns) == ["section", "id", "name", "provenance"]
    assert "llama-3.1-70b" in set(frame.id) and set(frame.section) == {"models"}
    path = tmp_path / "models.xlsx"
    result = runner.invoke(app, ["registry", "list", "models", "-f", "xlsx", "-o", str(path)])
    assert result.exit_code == 0, result.output
    sheets = read_xlsx(path)
    pd.testing.assert_frame_equal(sheets["results"], frame)
    assert set(frame.id) <= set(sheets["sources"].id)  # every listed entry cites its sources


def test_size_formats(tmp_path):
    import io

    import pandas as pd

    from calculator.export import read_xlsx

    result = runner.invoke(app, [*SIZE_ARGS, "--format", "csv"])
    assert result.exit_code == 0, result.output
    row = pd.read_csv(io.StringIO(result.output)).iloc[0]
    assert bool(row["feasible"]) and row["gpus"] >= 1 and "ttft [ms]" in row.index and "tpot [ms]" in row.index
    as_json = json.loads(runner.invoke(app, [*SIZE_ARGS, "--format", "json"]).output)
    assert as_json == json.loads(runner.invoke(app, [*SIZE_ARGS, "--json"]).output)  # --json is an alias
    assert as_json["gpus"] == row["gpus"]
    path = tmp_path / "plan.xlsx"
    result = runner.invoke(app, [*SIZE_ARGS, "-f", "xlsx", "--out", str(path)])
    assert result.exit_code == 0, result.output
    sheets = read_xlsx(path)
    assert sheets["results"].loc[0, "gpus"] == row["gpus"]
    inputs = sheets["inputs"].set_index("name")
    assert inputs.loc["arrival_rate", "unit"] == "request/s" and inputs.loc["tpot_slo", "values"] == "0.05"
    assert {"fleet.size_fleet", "llama-3.1-70b", "h100-sxm"} <= set(sheets["sources"].id)


def test_frontier_csv_to_file(tmp_path):
    import pandas as pd

    path = tmp_path / "frontier.csv"
    args = ["frontier", "llama-3.1-8b", "--input", "1024", "--output", "512"]
    result = runner.invoke(app, [*args, "-f", "csv", "-o", str(path)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(path)
    rows = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert len(frame) == len(rows) and frame["pareto"].all()
    assert frame["tokens_per_s_per_gpu"].tolist() == pytest.approx([r["tokens_per_s_per_gpu"] for r in rows])


def test_format_errors_exit_2():
    no_file = runner.invoke(app, [*SIZE_ARGS, "--format", "xlsx"])
    assert no_file.exit_code == 2 and "--format xlsx needs --out FILE" in no_file.output
    conflict = runner.invoke(app, ["registry", "list", "--json", "--format", "csv"])
    assert conflict.exit_code == 2 and "--json conflicts with --format csv" in conflict.output
    unknown = runner.invoke(app, ["registry", "list", "--format", "pdf"])
    assert unknown.exit_code == 2
