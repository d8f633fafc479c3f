"""The CLI skeleton: registry list, show and validate."""

import json

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
