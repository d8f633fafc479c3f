"""The CLI skeleton: registry list, show and validate."""

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calculator.cli import app
from calculator.results import format_number

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


#: The sizing options every size test starts from; SIZE_ARGS adds a price (no registry price is looked up).
SIZING = [
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
]
SIZE_ARGS = [*SIZING, "--price", "4"]


def test_size_command_table_and_json():
    args = [*SIZE_ARGS, "-a", "h100-sxm", "-p", "fp8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert re.search(r"^feasible +yes$", result.output, re.MULTILINE) and {"gpus", "service.tpot"} <= _named(
        result.output
    )
    # The answer line comes first and carries the GPU count at the ends of the model's error.
    answer = next(line for line in result.output.splitlines() if line.startswith("answer: "))
    assert "GPUs at the ends of the model's 80% error interval" in answer
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert data["feasible"] is True and data["service"]["tpot"]["unit"] == "s" and data["gpus"] >= 1
    low, high = data["gpus_interval"]
    assert low <= data["gpus"] <= high and f"{low}-{high} GPUs" in answer
    assert data["service"]["ttft_interval"][0]["unit"] == "s"


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
    assert bad.exit_code == 2 and "option --tpot: unknown unit in 'fast'" in bad.output
    bare = runner.invoke(app, [*base, "--tpot", "40"])  # not 40 s: a time needs its unit
    assert bare.exit_code == 2 and "option --tpot: '40' has no unit; write it with one, like '1 s'" in bare.output
    hostile = runner.invoke(app, [*base, "--tpot", "50 ms", "--rate", "9**9**9 request/s"])  # used to hang
    assert hostile.exit_code == 2 and "option --rate: expected a number and a unit" in hostile.output
    unknown = runner.invoke(app, [*base, "--tpot", "50 ms", "-a", "h999"])
    assert unknown.exit_code == 2 and "unknown accelerator id 'h999'" in unknown.output


def test_frontier_command_json():
    result = runner.invoke(app, ["frontier", "llama-3.1-8b", "--input", "1024", "--output", "512", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and all(row["pareto"] for row in rows)


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
    assert (
        bool(row["feasible"])
        and row["gpus"] >= 1
        and "service.ttft [ms]" in row.index
        and "service.tpot [ms]" in row.index
    )
    as_json = json.loads(runner.invoke(app, [*SIZE_ARGS, "--format", "json"]).output)
    assert as_json == json.loads(runner.invoke(app, [*SIZE_ARGS, "--json"]).output)  # --json is an alias
    assert as_json["gpus"] == row["gpus"]
    path = tmp_path / "plan.xlsx"
    result = runner.invoke(app, [*SIZE_ARGS, "-f", "xlsx", "--out", str(path)])
    assert result.exit_code == 0, result.output
    sheets = read_xlsx(path)
    assert sheets["results"].loc[0, "gpus"] == row["gpus"]
    inputs = sheets["inputs"].set_index("name")
    assert inputs.loc["workload.arrival_rate", "unit"] == "request/s" and inputs.loc["targets.tpot", "values"] == "0.05"
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


# ---------------------------------------------------------------------------------------------- simulate

PLAN_ARGS = [*SIZING[1:], "--ttft-percentile", "0.99", "--price", "4"]  # the sizing options without the command
FAST = ["--requests", "600", "--seeds", "1"]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    result = runner.invoke(app, ["size", *PLAN_ARGS, "--json"])
    assert result.exit_code == 0, result.output
    path.write_text(result.stdout)
    return path


def test_simulate_verifies_a_plan_sized_from_the_size_options():
    from calculator import Q_
    from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet
    from calculator.simulation import verify_plan

    result = runner.invoke(app, ["simulate", *PLAN_ARGS, *FAST])
    assert result.exit_code == 0, result.output
    plan = size_fleet(
        "llama-3.1-70b", Workload(Q_(20, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms"), ttft_percentile=0.99),
        SearchSpace("h100-sxm", "fp8"), costs=Costs(Q_(4, "USD/hour")),
    )  # fmt: skip
    expected = verify_plan(plan, requests=600, seeds=1)  # the simulation is seeded: the same numbers
    lines = result.stdout.splitlines()
    assert f"verdict: {expected.verdict}" in lines
    assert f"analytical replicas: {plan.replicas}" in lines
    assert f"simulated replicas: {expected.simulated_replicas}" in lines
    for count in expected.table.replicas:  # the table of replica counts and each count's verdict
        assert f"  {count} replica{'s' * (count != 1)}: {expected.results[count].verdict}" in lines
    # The summary at the plan's replicas: mean, p50, p90 and p99 of TTFT, TPOT and the token gap, with intervals.
    summary = expected.results[plan.replicas].summary.set_index(["metric", "statistic"])
    assert f"summary at {plan.replicas} replica{'s' * (plan.replicas != 1)}" in result.stdout
    # GPUs are written "N x accelerator" everywhere; replicas are counted in words.
    assert lines[0].startswith(
        f"plan: {plan.gpus} x h100-sxm at fp8 ({plan.replicas} replicas of TP {plan.layout.stage_gpus})"
    )
    assert "metric              statistic   value [ms]   95 % interval [ms]" in lines
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("tbt_max", "longest token gap")):
        for statistic in ("mean", "p50", "p90", "p99"):
            row = summary.loc[(metric, statistic)]
            line = next(x for x in lines if x.startswith(label) and x.split()[-3] == statistic)
            low, high = (format_number(row[end] * 1e3) for end in ("low", "high"))
            assert line.split()[-2:] == [format_number(row.value * 1e3), f"{low}-{high}"]


def test_simulate_round_trips_the_json_of_size(plan_file):
    from calculator.cli import _plan_from_json

    saved = json.loads(plan_file.read_text())
    assert _plan_from_json(plan_file).to_json_dict() == saved  # the plan is rebuilt field for field
    count = saved["replicas"]
    args = ["--replicas", str(count), *FAST, "--json"]
    from_file = runner.invoke(app, ["simulate", "--plan", str(plan_file), *args])
    assert from_file.exit_code == 0, from_file.output
    from_options = runner.invoke(app, ["simulate", *PLAN_ARGS, *args])
    data = json.loads(from_file.stdout)  # standard output holds the JSON alone
    assert data == json.loads(from_options.stdout)
    assert data["plan"]["replicas"] == data["replicas"] == count
    run = data["runs"][str(count)]
    assert data["verdict"] == run["verdict"] and data["requests_per_seed"] == {str(count): 600}
    assert {(row["metric"], row["statistic"]) for row in run["summary"]} >= {("ttft", "p99"), ("tpot", "mean")}


def test_simulate_verify_json_and_csv_with_two_seeds_and_another_router(plan_file):
    import io

    import pandas as pd

    args = ["simulate", "--plan", str(plan_file), "--requests", "500", "--router", "jsq"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["router"] == "least_connections" and data["seeds"] == [0, 1]
    planned = json.loads(plan_file.read_text())["replicas"]
    assert data["analytical_replicas"] == planned and isinstance(data["verdict"], str)
    counts = [row["replicas"] for row in data["table"]]
    assert planned in counts and sorted(data["runs"]) == sorted(str(c) for c in counts)
    frame = pd.read_csv(io.StringIO(runner.invoke(app, [*args, "--format", "csv"]).stdout))
    assert frame.replicas.tolist() == counts and "ttft_p99_ms" in frame.columns


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--rate", "0"], 2, "option --rate: must be greater than zero, got '0'"),
        (["--router", "fastest"], 2, "option --router must be one of"),
        (["--tpot", "0.1 ms"], 1, "the plan is infeasible, there is nothing to simulate: no configuration"),
        (["--replicas", "2", "--verify"], 2, "give --replicas N (simulate N replicas) or --verify"),
        (["--requests", "0"], 2, "Invalid value for '--requests'"),
        (["--tpot", "soon"], 2, "option --tpot: unknown unit"),
    ],
)
def test_simulate_bad_input_is_a_message_and_an_exit_status(args, code, message):
    result = runner.invoke(app, ["simulate", *PLAN_ARGS, *FAST, *args])  # the last value of an option wins
    assert result.exit_code == code, result.output
    assert message in result.output and "Traceback" not in result.output


def test_simulate_plan_file_errors(plan_file, tmp_path):
    missing = runner.invoke(app, ["simulate", "llama-3.1-70b", "--rate", "3"])
    assert missing.exit_code == 2 and "missing --input, --output, --ttft, --tpot" in missing.output
    both = runner.invoke(app, ["simulate", "--plan", str(plan_file), "llama-3.1-8b"])
    assert both.exit_code == 2 and "leave out the sizing options (MODEL)" in both.output
    junk = tmp_path / "junk.json"
    junk.write_text("not json")
    result = runner.invoke(app, ["simulate", "--plan", str(junk)])
    assert result.exit_code == 2 and "does not hold a plan written by 'servecalc size --json'" in result.output
    saved = json.loads(plan_file.read_text())
    old = tmp_path / "old.json"
    old.write_text(json.dumps({k: v for k, v in saved.items() if k not in ("workload", "targets")}))
    result = runner.invoke(app, ["simulate", "--plan", str(old)])
    assert result.exit_code == 2 and "does not record the plan's workload, targets and serving" in result.output
    cached = tmp_path / "cached.json"
    prefix = {"prefix_hit_rate": 0.3, "shared_prefix_tokens": 512}
    cached.write_text(json.dumps({**saved, "serving": {**saved["serving"], **prefix}}))
    result = runner.invoke(app, ["simulate", "--plan", str(cached)])
    assert result.exit_code == 2 and "prefix caching is not simulated" in result.output
    infeasible = tmp_path / "infeasible.json"
    parts = dict.fromkeys(("layout", "service", "cost", "energy"))  # an infeasible plan has none
    infeasible.write_text(json.dumps({**saved, **parts, "feasible": False, "reason": "no configuration fits"}))
    result = runner.invoke(app, ["simulate", "--plan", str(infeasible)])
    assert result.exit_code == 1 and "infeasible" in result.output
    infeasible.write_text(json.dumps({**saved, "feasible": False, "reason": "no configuration fits"}))
    result = runner.invoke(app, ["simulate", "--plan", str(infeasible)])  # yet with a layout, service, cost
    assert result.exit_code == 2 and "an infeasible plan has no parts" in result.output
    assert all("Traceback" not in r.output for r in (missing, both, result))


def test_size_starts_with_the_workload_targets_and_prices_as_understood():
    result = runner.invoke(app, [*SIZING, "-a", "h100-sxm", "-a", "h200-sxm", "--price", "h100-sxm=3"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("workload: 20 request/s; 1,024 prompt tokens -> 256 output tokens")
    assert lines[1].startswith("targets: TTFT 1,000 ms (mean), TPOT 50 ms")
    # The given price for one accelerator, the registry's for the other, with the entry it came from.
    assert lines[2].startswith("prices: h100-sxm 3 USD/hour, h200-sxm ") and "(registry entries: " in lines[2]


def test_gb300_is_sized_without_a_price_flag():
    # Issue 54: GB300 used to be refused without --price. It is priced from the registry now: Oracle's list
    # price for BM.GPU.GB300.4, 18 USD per GPU-hour, so the plan costs 18 USD an hour per GPU.
    text = runner.invoke(app, [*SIZING, "-a", "gb300"])
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[2] == "prices: gb300 18 USD/hour (registry entries: oci-gb300-on-demand)"
    plan = json.loads(runner.invoke(app, [*SIZING, "-a", "gb300", "--json"]).stdout)
    assert plan["accelerator"] == "gb300"
    assert plan["cost"]["per_hour"]["value"] == pytest.approx(18.0 * plan["gpus"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--price", "3", "--price", "4"], "give one --price for all accelerators"),
        (["--price", "h100-sxm=3", "--price", "h100-sxm=4"], "--price names h100-sxm twice"),
        (["--price", "b200=3"], "--price names b200, not a candidate"),
        (["--price", "h100-sxm=3", "--price", "4"], "mix of 'GPU=PRICE' and a bare price"),
    ],
)
def test_price_flags_are_checked(extra, message):
    result = runner.invoke(app, [*SIZING, "-a", "h100-sxm", *extra])
    assert result.exit_code == 2 and message in result.output


def test_tensor_parallel_degrees_and_version():
    result = runner.invoke(app, [*SIZING, "-a", "h100-sxm", "--price", "4", "--tp", "4", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["layout"]["tensor_parallel"] == 4
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("servecalc ")


def test_a_request_beyond_the_context_limit_is_infeasible_with_that_reason():
    args = [*SIZING[:4], "--input", "200000", *SIZING[6:], "-a", "h100-sxm", "--price", "4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "context limit of 131,072 tokens" in result.output


def test_size_takes_the_sizer_options_and_echoes_them():
    base = [*SIZING, "-a", "h100-sxm", "--price", "4"]
    options = [
        "--output-cv",
        "0.5",
        "--chunk",
        "2048",
        "--tbt",
        "200 ms",
        "--prefix-hit",
        "0.3",
        "--shared-prefix",
        "512",
    ]
    result = runner.invoke(app, [*base, *options, "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["workload"]["output_cv"] == 0.5 and plan["serving"]["chunk_size"] == 2048
    assert plan["targets"]["tbt"]["value"] == pytest.approx(0.2) and plan["serving"]["prefix_hit_rate"] == 0.3
    echoed = runner.invoke(app, [*base, *options]).stdout.splitlines()
    assert "prefix-cache hit rate 0.3 on a 512-token shared prefix; chunked prefill at 2,048 tokens" in echoed[0]
    assert "token gap 200 ms" in echoed[1]
    bare = runner.invoke(app, [*base, "--tbt", "200"])
    assert bare.exit_code == 2 and "option --tbt: '200' has no unit" in bare.output


def test_an_infeasible_plan_prints_no_zero_configuration_and_token_costs_say_output():
    infeasible = runner.invoke(app, [*SIZING[:4], "--input", "200000", *SIZING[6:], "--price", "4"])
    assert infeasible.exit_code == 1 and re.search(r"^feasible +no$", infeasible.stdout, re.MULTILINE)
    assert "tensor_parallel" not in infeasible.stdout and "gpus" not in _named(infeasible.stdout)
    assert "layout: " not in infeasible.stdout and "cost" not in _named(infeasible.stdout)  # no parts, no zeros
    feasible = runner.invoke(app, [*SIZING, "--price", "4"])
    assert (
        "cost.per_million_output_tokens" in _named(feasible.stdout) and "cost_per_million_tokens" not in feasible.stdout
    )


# ---------------------------------------------------------------------------- issue 15: CLI parity and help

#: A small workload every new-flag test sizes (a fixed price: no registry price is looked up).
SMALL = ["llama-3.1-70b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms"]
SMALL_SIZE = ["size", *SMALL, "--price", "4"]


def _commands(command=None, path=()):
    """Every command path of the app (groups included), walked from the click command typer builds."""
    import typer

    command = command or typer.main.get_command(app)
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_help_of_every_command_shows_plain_flags_capital_arguments_and_typed_metavars():
    paths = list(_commands())
    assert {("size",), ("simulate",), ("compare",), ("frontier",), ("registry", "show")} <= set(paths)
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        usage = next(line for line in result.output.splitlines() if "Usage:" in line)
        assert "<bool>" not in result.output and "{" not in usage and "}" not in usage, (path, result.output)
        assert "<str>" not in result.output, (path, result.output)  # an argument's name says what it is
    # A docstring's paragraph is one paragraph in help, wrapped to the terminal (typer kept its line breaks).
    lines = runner.invoke(app, ["size", "--help"]).output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("The output starts with"))
    end = next(i for i, line in enumerate(lines) if line.startswith("╭─ Arguments"))
    paragraph = [line.strip() for line in lines[start:end] if line.strip()]
    assert len(paragraph) > 2 and all(len(line) > 60 for line in paragraph[:-1]), paragraph
    for path, argument in ((("size",), " MODEL"), (("simulate",), " [MODEL]"), (("registry", "show"), " ID")):
        usage = next(line for line in runner.invoke(app, [*path, "--help"]).output.splitlines() if "Usage:" in line)
        assert usage.rstrip().endswith(argument), usage
    rows: dict[str, str] = {}  # each option's row of the table, with its wrapped lines
    for line in runner.invoke(app, ["size", "--help"], terminal_width=200).output.splitlines():
        if line.startswith("│ --"):
            flag = line.split()[1]
            rows[flag] = line
        elif rows and line.startswith("│ "):
            rows[flag] += line
    metavars = {"--ttft": "TIME", "--rate": "RATE", "--price": "[GPU=]USD/h", "--tp": "INT",
                "--speculate": "DRAFT:K:ALPHA", "--trace": "FILE", "--input": "TOKENS", "--demand": "FILE"}  # fmt: skip
    for flag, metavar in metavars.items():
        assert rows[flag].split()[2] == metavar, rows[flag]
    assert "[default: 0.8]" in rows["--max-utilization"] and "[0<=x<=1]" in rows["--max-utilization"]
    assert rows["--verify"].split()[2] == "Also"  # a flag: its help follows the name, no type


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rate", "-5"], "option --rate: must be greater than zero, got '-5'"),
        (["--rate", "0"], "option --rate: must be greater than zero, got '0'"),
        (["--input", "-3"], "Invalid value for '--input'"),
        (["--max-utilization", "2"], "Invalid value for '--max-utilization'"),
        (["--max-utilization", "0"], "option --max-utilization: must be greater than zero"),
        (["--percentile", "120"], "option --percentile: expected a percentile between 0 and 100"),
        (["--arrival-cv", "-1"], "Invalid value for '--arrival-cv'"),
        (["--output-cv", "-0.5"], "Invalid value for '--output-cv'"),
        (["--ttft", "-1 s"], "option --ttft: must be greater than zero"),
        (["--speculate", "llama-3.2-1b:four"], "option --speculate: expected DRAFT:K:ALPHA such as"),
        (["--speculate", "a:1:2:3"], "option --speculate: expected DRAFT:K:ALPHA such as"),
        (
            ["--speculate", "llama-3.2-1b:4:1.5"],
            "option --speculate: Speculation(): argument 'acceptance' must be a prob",
        ),
        (["--speculate", "llama-3.2-1b:99999999999:0.7"], "argument 'draft_length' must be at most 256"),
        (["--arrival-cv", "inf"], "option --arrival-cv must be finite"),
        (["--input-cv", "1e9"], "option --input-cv must be at most 100"),
        (["--speculate", "no-such-draft"], "option --speculate: unknown model id 'no-such-draft'"),
        (["--prefix-hit", "0.5"], "--prefix-hit and --shared-prefix go together"),
        (["--requests", "100"], "--requests, --seeds and --time-limit set up --verify; add --verify"),
        (["--cold-start", "5 min"], "--demand-bin and --cold-start apply to a --demand curve"),
        (["--interconnect", "nvlink"], "--interconnect is the KV handoff link of --disaggregated"),
    ],
)
def test_bad_sizing_flags_are_named_before_any_sizing(extra, message):
    result = runner.invoke(app, [*SMALL_SIZE, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert "workload:" not in result.output  # nothing was sized


def test_speculate_sizes_with_the_draft_model_and_is_echoed():
    from calculator import Q_
    from calculator.fleet import Costs, SearchSpace, ServingOptions, Speculation, Targets, Workload, size_fleet

    result = runner.invoke(app, [*SMALL_SIZE, "--speculate", "llama-3.2-1b:3:0.6", "--json"])
    assert result.exit_code == 0, result.output
    expected = size_fleet(
        "llama-3.1-70b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"), serving=ServingOptions(speculation=Speculation("llama-3.2-1b", 3, 0.6)),
        costs=Costs(Q_(4, "USD/hour")),
    )  # fmt: skip
    plan = json.loads(result.stdout)
    assert plan["serving"]["speculation"] == {
        "draft_model": "llama-3.2-1b",
        "draft_length": 3,
        "acceptance": 0.6,
        "method": "draft",
    }
    assert plan["gpus"] == expected.gpus and plan["service"]["tpot"]["value"] == pytest.approx(
        expected.service.tpot.m_as("s")
    )
    plain = json.loads(runner.invoke(app, [*SMALL_SIZE, "--json"]).stdout)
    assert plain["serving"]["speculation"] is None and plain["service"]["tpot"] != plan["service"]["tpot"]
    echoed = runner.invoke(app, [*SMALL_SIZE, "--speculate", "llama-3.2-1b"]).stdout.splitlines()[0]
    assert echoed.endswith("speculative decoding with draft llama-3.2-1b (4 tokens per round, acceptance 0.7)")


def test_trace_gives_the_workload_and_excludes_the_traffic_flags(tmp_path):
    import pandas as pd

    # 102 arrivals 0.5 s apart: 101 gaps over 50.5 s, 2 request/s with no variability; prompts alternate
    # 800 and 1,200 tokens (mean 1,000, standard deviation 200: CV 0.2); outputs are 200 tokens.
    trace = tmp_path / "trace.csv"
    pd.DataFrame(
        {
            "arrival_time": [0.5 * i for i in range(102)],
            "input_tokens": [800 if i % 2 else 1200 for i in range(102)],
            "output_tokens": [200] * 102,
        }
    ).to_csv(trace, index=False)
    args = ["size", "llama-3.1-70b", "--trace", str(trace), "--ttft", "1 s", "--tpot", "50 ms", "--price", "4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    workload = result.stdout.splitlines()[0]
    assert workload.startswith("workload: 2 request/s; 1,000 prompt tokens -> 200 output tokens (arrival CV 0, ")
    assert "prompt-length CV 0.2, output-length CV 0)" in workload
    assert workload.endswith("read from the trace trace.csv")
    both = runner.invoke(app, [*args, "--rate", "3", "--input-cv", "0.5"])
    assert (
        both.exit_code == 2
        and "--trace gives the rate, the lengths and their CVs; leave out --rate, --input-cv" in (both.output)
    )
    pd.read_csv(trace).drop(columns="output_tokens").to_csv(trace, index=False)
    missing = runner.invoke(app, args)
    assert missing.exit_code == 2 and "the trace lacks column(s) ['output_tokens']" in missing.output


def test_disaggregated_prints_a_prefill_and_a_decode_pool():
    result = runner.invoke(app, [*SMALL_SIZE, "--disaggregated", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["gpus"] == plan["prefill"]["gpus"] + plan["decode"]["gpus"]
    assert plan["cost"]["per_hour"]["value"] == pytest.approx(4 * plan["gpus"])  # 4 USD per GPU-hour
    lines = runner.invoke(app, [*SMALL_SIZE, "--disaggregated"]).stdout.splitlines()
    assert lines[3] == "KV handoff over: infiniband-ndr"  # after the workload, the targets and the prices
    decode = plan["decode"]
    pool = f"{decode['replicas']} replica{'s' * (decode['replicas'] != 1)} of TP {decode['tensor_parallel']}"
    assert f"decode {decode['gpus']} x h100-sxm at fp8 ({pool}, batch cap " in lines[4]
    assert any(line.startswith("prefill: accelerator h100-sxm") for line in lines)
    assert _fields("\n".join(lines))["kv_handoff"].endswith(" ms")
    refused = runner.invoke(app, [*SMALL_SIZE, "--disaggregated", "--chunk", "512"])
    assert refused.exit_code == 2 and "--disaggregated sizes prefill and decode pools; leave out --chunk" in (
        refused.output
    )


def test_compare_prints_both_modes_side_by_side_and_the_cheaper():
    result = runner.invoke(app, ["compare", *SMALL, "--price", "4", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    costs = {mode: data[mode]["cost"]["per_hour"]["value"] for mode in ("colocated", "disaggregated")}
    assert data["cheaper"] == min(costs, key=costs.get)
    text = runner.invoke(app, ["compare", *SMALL, "--price", "4", "--chunk", "512"]).stdout
    assert ["colocated", "disaggregated"] in [line.split() for line in text.splitlines()]
    assert "colocated only: --chunk" in text
    gpus = next(line for line in text.splitlines() if line.startswith("GPUs "))
    assert gpus.split()[1:] == [str(data["colocated"]["gpus"]), str(data["disaggregated"]["gpus"])]
    assert f"cheaper: {data['cheaper']}" in text
    cost = next(line for line in text.splitlines() if line.startswith("Cost per hour [USD/h] "))
    assert [float(x) for x in cost.split()[4:]] == pytest.approx(list(costs.values()), rel=5e-4)
    import io

    import pandas as pd

    frame = pd.read_csv(io.StringIO(runner.invoke(app, ["compare", *SMALL, "--price", "4", "-f", "csv"]).stdout))
    assert frame["mode"].tolist() == ["colocated", "disaggregated"]
    assert frame["cost_per_hour [USD/h]"].tolist() == pytest.approx(list(costs.values()))
    neither = runner.invoke(app, ["compare", *SMALL, "--price", "4", "--tpot", "1 ms"])
    assert neither.exit_code == 1 and "cheaper: neither mode is feasible" in neither.stdout


def test_demand_curve_schedules_the_plan_over_it(tmp_path):
    import pandas as pd

    curve = tmp_path / "curve.csv"
    rates = [2.0, 4.0, 8.0, 4.0]
    pd.DataFrame({"time": [0, 3600, 7200, 10800], "rate": rates}).to_csv(curve, index=False)
    args = ["size", "llama-3.1-70b", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms"]
    result = runner.invoke(app, [*args, "--price", "4", "--demand", str(curve), "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["workload"]["arrival_rate"]["value"] == 8.0  # without --rate: sized at the curve's peak
    steps = plan["demand"]["steps"]
    assert [row["demand [request/s]"] for row in steps] == rates
    assert [row["start [h]"] for row in steps] == [0, 1, 2, 3]
    tp = plan["layout"]["tensor_parallel"] * plan["layout"]["data_parallel"] * plan["layout"]["pipeline_parallel"]
    assert all(row["predictive GPUs"] % tp == 0 and row["predictive GPUs"] <= plan["gpus"] for row in steps)
    assert steps[2]["predictive GPUs"] == plan["gpus"]  # the peak step needs the plan sized for the peak
    assert plan["demand"]["cost"]["value"] <= plan["demand"]["static_cost"]["value"]
    # The static fleet holds the peak's GPUs for the four hours at 4 USD per GPU-hour.
    assert plan["demand"]["static_cost"]["value"] == pytest.approx(plan["demand"]["peak_gpus"] * 4 * 4)
    text = runner.invoke(app, [*args, "--price", "4", "--demand", str(curve), "--rate", "2"]).stdout
    assert text.startswith("workload: 2 request/s")  # a given rate is the one sized
    assert "over the demand curve of curve.csv (4 steps, 4 h;" in text and "static fleet at the peak: " in text
    wrong = tmp_path / "wrong.csv"
    pd.DataFrame({"hour": [0, 1], "load": [1, 2]}).to_csv(wrong, index=False)
    bad = runner.invoke(app, [*args, "--demand", str(wrong)])
    assert bad.exit_code == 2 and "expected a request trace (column arrival_time, in s) or a demand curve" in bad.output


def test_demand_from_a_trace_is_binned(tmp_path):
    import pandas as pd

    trace = tmp_path / "arrivals.csv"
    # 10 arrivals in the first 10 s, 30 in the next 10 s: 1 and 3 request/s.
    times = [i for i in range(10)] + [10 + i / 3 for i in range(30)]
    pd.DataFrame({"arrival_time": times}).to_csv(trace, index=False)
    args = [*SMALL_SIZE, "--demand", str(trace), "--demand-bin", "10 s", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["demand"]["steps"]
    assert [row["demand [request/s]"] for row in steps] == pytest.approx([1.0, 3.0])


def test_verify_prints_the_simulation_verdict_next_to_the_plan():
    from calculator import Q_
    from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet
    from calculator.simulation import verify_plan

    result = runner.invoke(app, [*SMALL_SIZE, "--verify", "--requests", "300", "--seeds", "1"])
    assert result.exit_code == 0, result.output
    plan = size_fleet(
        "llama-3.1-70b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms")),
        SearchSpace("h100-sxm", "fp8"), costs=Costs(Q_(4, "USD/hour")),
    )  # fmt: skip
    expected = verify_plan(plan, requests=300, seeds=1)  # seeded: the same simulation
    lines = result.stdout.splitlines()
    assert f"simulation check: {expected.verdict}" in lines
    assert _fields(result.stdout)["simulated_replicas"] == f"{expected.simulated_replicas}"
    assert "check it request by request" not in result.stdout
    hint = runner.invoke(app, SMALL_SIZE).stdout.splitlines()[-1]
    assert hint == "check it request by request: add --verify, or run 'servecalc simulate' with these options"


@pytest.mark.parametrize("spelling", [["--percentile", "99"], ["--percentile", "p99"], ["--ttft-percentile", "0.99"]])
def test_percentile_spellings_are_one_target(spelling):
    result = runner.invoke(app, [*SMALL_SIZE, *spelling])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("targets: TTFT 1,000 ms (p99), TPOT 50 ms")
    assert (
        json.loads(runner.invoke(app, [*SMALL_SIZE, *spelling, "--json"]).stdout)["targets"]["ttft_percentile"] == 0.99
    )


def test_prefix_caching_needs_the_hit_rate_and_the_prefix_and_shortens_the_prefill():
    cached = runner.invoke(app, [*SMALL_SIZE, "--prefix-hit", "1", "--shared-prefix", "1000", "--tp", "2", "--json"])
    assert cached.exit_code == 0, cached.output
    plain = json.loads(runner.invoke(app, [*SMALL_SIZE, "--tp", "2", "--json"]).stdout)
    with_cache = json.loads(cached.stdout)
    assert with_cache["serving"]["prefix_hit_rate"] == 1 and plain["serving"]["prefix_hit_rate"] == 0
    # Every request reuses 1,000 of its 1,024 prompt tokens: each prefill computes 24 tokens, not 1,024.
    assert with_cache["service"]["ttft"]["value"] < plain["service"]["ttft"]["value"]
    alone = runner.invoke(app, [*SMALL_SIZE, "--shared-prefix", "512"])
    assert alone.exit_code == 2 and "--prefix-hit and --shared-prefix go together" in alone.output


def test_the_size_table_shows_fixed_units_digits_and_thousands_separators():
    import re

    args = ["size", "llama-3.1-8b", "--rate", "0.05", "--input", "512", "--output", "128"]
    args += ["--ttft", "2 s", "--tpot", "100 ms", "--price", "4"]
    small = runner.invoke(app, args)
    assert small.exit_code == 0, small.output
    fields = _fields(small.stdout)
    assert fields["service.replica_throughput"].endswith(" request/s")  # not mrequest/s or krequest/s
    assert not set("⁰¹²³⁴⁵⁶⁷⁸⁹⁻×·") & set(small.stdout)
    big_args = [*args[:2], "--rate", "3000", *args[4:-1], "20", "-a", "h100-sxm"]  # 20 USD per GPU-hour
    big = runner.invoke(app, big_args)
    data = json.loads(runner.invoke(app, [*big_args, "--json"]).stdout)
    fields = _fields(big.stdout)
    cost = data["cost"]["per_hour"]["value"]
    assert cost >= 1000 and re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)? USD/h", fields["cost.per_hour"])
    assert float(fields["cost.per_hour"].split()[0].replace(",", "")) == pytest.approx(cost, rel=5e-4)
    tokens_per_hour = 3000 * 128 * 3600
    shown = float(fields["cost.per_million_output_tokens"].split()[0])
    assert shown == pytest.approx(cost / tokens_per_hour * 1e6, rel=5e-4)


def test_simulate_takes_the_new_sizing_flags(plan_file, tmp_path):
    cached = runner.invoke(app, ["simulate", *PLAN_ARGS, *FAST, "--prefix-hit", "0.3", "--shared-prefix", "512"])
    assert cached.exit_code == 2 and "prefix caching is not simulated" in cached.output
    both = runner.invoke(app, ["simulate", "--plan", str(plan_file), "--percentile", "99", "--chunk", "512"])
    assert both.exit_code == 2 and "leave out the sizing options (--percentile, --chunk)" in both.output
    p99 = runner.invoke(app, ["simulate", *PLAN_ARGS, "--percentile", "p99", "--replicas", "2", *FAST, "--json"])
    alias = runner.invoke(app, ["simulate", *PLAN_ARGS, "--replicas", "2", *FAST, "--json"])
    assert p99.exit_code == 0, p99.output
    assert json.loads(p99.stdout) == json.loads(alias.stdout)  # PLAN_ARGS says --ttft-percentile 0.99


def test_the_remaining_sizing_flags_reach_the_plan():
    flags = ["--arrival-cv", "1.5", "--input-cv", "0.4", "--kv-precision", "fp8", "--engine", "vllm"]
    flags += ["--router", "power_of_two", "--max-utilization", "0.6"]
    result = runner.invoke(app, [*SMALL_SIZE, *flags, "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert (plan["workload"]["arrival_cv"], plan["workload"]["input_cv"]) == (1.5, 0.4)
    assert (
        plan["kv_precision"] == "fp8" and plan["engine"] == "vllm" and plan["serving"]["router"] == "two_choices"
    )  # power_of_two is its alias
    assert plan["targets"]["max_utilization"] == 0.6 and plan["service"]["utilization"] <= 0.6
    echoed = runner.invoke(app, [*SMALL_SIZE, *flags]).stdout.splitlines()
    assert "(arrival CV 1.5, prompt-length CV 0.4, output-length CV 0)" in echoed[0]
    assert echoed[1].endswith("utilization at most 0.6")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,5\n3600,nan\n", "every time and rate must be a number"),
        ("0,5\n3600,\n", "every time and rate must be a number"),
        ("0,5\n3600,-4\n", "the rates (request/s) must be at least 0"),
        ("0,0\n3600,0\n", "one of them above 0"),
        ("0,5\n0,6\n", "the times (s) must increase from row to row"),
    ],
)
def test_a_bad_demand_curve_is_named(tmp_path, rows, message):
    curve = tmp_path / "curve.csv"
    curve.write_text("time,rate\n" + rows, encoding="utf-8")
    args = ["size", "llama-3.1-8b", "--input", "100", "--output", "10", "--ttft", "1 s", "--tpot", "50 ms"]
    result = runner.invoke(app, [*args, "--price", "4", "--demand", str(curve)])
    assert result.exit_code == 2 and f"--demand {curve}: " in result.stderr and message in result.stderr


# ------------------------------------------------------------------------------------------------ fit


def test_fit_answers_the_405b_long_context_question_from_the_registry_fields():
    """Llama 3.1 405B FP8 at 128K tokens on 8 x H200: the KV cache recomputed from the model's shape."""
    from calculator import load_registry

    reg = load_registry()
    llama, h200 = reg.model("llama-3.1-405b"), reg.accelerator("h200-sxm")
    args = ["fit", "llama-3.1-405b", "-a", "h200-sxm", "-p", "fp8", "--tp", "8", "--context", "131072"]
    result = runner.invoke(app, [*args, "--kv-precision", "bf16", "--json"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.output)
    # K and V, every layer, the KV heads split over the 8 GPUs (8 KV heads), 2 bytes each.
    per_token = 2 * llama.layers * (llama.kv_heads // 8) * llama.head_dim * 2
    assert fit["kv_per_token"] == {"value": per_token, "unit": "B/token"}
    assert fit["kv_per_request"]["value"] == per_token * 131072  # whole 16-token pages
    assert fit["capacity"]["value"] == h200.memory.m_as("B") and fit["capacity_basis"] == "physical"
    available = fit["capacity"]["value"] - fit["weights"]["value"] - 2e9  # the default 2 GB reserve
    assert fit["max_batch"] == int(available // (per_token * 131072)) > 1
    assert fit["fits"] is True and fit["gpus"] == 8 and fit["kv_precision_basis"] == "given"
    assert fit["max_context"] == llama.max_context  # one sequence: capped at the model's limit

    table = runner.invoke(app, [*args, "--kv-precision", "bf16"]).output
    assert table.startswith("answer: 1 sequence of 131,072 tokens fit on 8 x h200-sxm (TP 8)")
    assert "(the model's limit)" in table
    assert table.splitlines()[1].startswith("the chapter's formula")
    # Per-device figures are labelled so, beside the whole model's: the KV heads of one device, and all 8.
    whole = 2 * llama.layers * llama.kv_heads * llama.head_dim * 2
    row = next(line for line in table.splitlines() if line.startswith("KV cache per token [kB/token]"))
    assert row.split()[-2:] == [format_number(per_token / 1e3), format_number(whole / 1e3)]
    assert re.search(r"^ +per device +whole model$", table, re.MULTILINE)


def test_fit_that_does_not_fit_exits_1_with_what_is_missing_and_the_largest_batch():
    args = ["fit", "llama-3.1-405b", "-a", "h200-sxm", "-p", "fp8", "--tp", "8", "--context", "131072"]
    result = runner.invoke(app, [*args, "--batch", "64", "--format", "csv"])
    assert result.exit_code == 1, result.output
    header, row = csv.reader(io.StringIO(result.output.strip()))  # the memory policy's text holds commas
    values = dict(zip(header, row, strict=True))
    assert values["fits"] == "False" and int(values["max_batch"]) < 64
    assert float(values["missing [GB]"]) > 0 and int(values["max_context"]) < 131072
    table = runner.invoke(app, [*args, "--batch", "64"]).output
    assert "do not fit on 8 x h200-sxm" in table and "short per device" in table


def test_fit_kv_precision_default_follows_the_engine_rule():
    from calculator.performance import kv_cache_precision

    for engine in ("trtllm", "sglang"):
        args = ["fit", "llama-3.1-70b", "-a", "h100-sxm", "-p", "fp8", "--context", "8192", "--engine", engine]
        fit = json.loads(runner.invoke(app, [*args, "--json"]).output)
        assert fit["kv_precision"] == kv_cache_precision("llama-3.1-70b", "h100-sxm", "fp8", engine)
        assert fit["kv_precision_basis"] == f"{engine} engine default"
    # TensorRT-LLM reads the FP8 checkpoint's FP8 KV cache; SGLang before 0.5.4 runs BF16 (KV_PRECISION_RULE).
    assert kv_cache_precision("llama-3.1-70b", "h100-sxm", "fp8", "trtllm") == "fp8"


def test_fit_attention_ranks_of_a_mixture_of_experts_hold_every_ranks_sequences():
    base = ["fit", "deepseek-v3", "-a", "h200-sxm", "-p", "fp8", "--tp", "8", "--context", "8192", "--json"]
    one = json.loads(runner.invoke(app, base).output)
    ranks = json.loads(runner.invoke(app, [*base, "--data-parallel", "8"]).output)
    assert ranks["gpus"] == 64 and ranks["data_parallel"] == 8
    assert ranks["weights"]["value"] < one["weights"]["value"]  # the routed experts spread over 64 GPUs
    assert ranks["max_batch"] > 8 * one["max_batch"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--context", "999999"], "exceeds the context limit of model 'llama-3.1-70b'"),
        (["--context", "1000", "--tp", "3"], "error: --tp 3 does not split model 'llama-3.1-70b'"),
        (["--context", "1000", "--reserve", "2"], "option --reserve: '2' has no unit"),
        (["--context", "1000", "-p", "fp9"], "option -p/--precision must be one of"),
        (["--context", "1000", "--data-parallel", "2"], "error: --data-parallel applies to the attention of a mixture"),
        (["--context", "0"], "--context"),
    ],
)
def test_fit_bad_input_exits_2_with_one_line(extra, message):
    result = runner.invoke(app, ["fit", "llama-3.1-70b", "-a", "h100-sxm", *extra])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


# -------------------------------------------------------------------------------------------- predict


def test_predict_prints_the_benchmark_model_per_concurrency_with_its_basis():
    """Llama-3.1-70B FP8 on four H100s under vLLM: one row per --concurrency, the library's prediction."""
    from calculator.performance import predict_benchmark

    args = ["predict", "llama-3.1-70b", "-a", "h100-sxm", "-p", "fp8", "--tp", "4", "--engine", "vllm",
            "--input", "1024", "--output", "128", "-c", "1", "-c", "64", "-c", "4096"]  # fmt: skip
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["concurrency"] for row in rows] == [1, 64, 4096]
    expected = predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 4, 1024, 128, 64, "vllm")
    row = rows[1]
    assert row["ttft [ms]"] == pytest.approx(expected.ttft.m_as("ms"))
    assert row["tpot_interval.high [ms]"] == pytest.approx(expected.tpot_interval[1].m_as("ms"))
    assert row["kv_precision"] == expected.kv_precision == "fp8" and row["kv_precision_basis"] == "vllm engine default"
    assert row["engine"] == "vllm" and row["gpus"] == 4 and row["measured_kernels"] is True
    # Beyond what the engine holds the clients queue: at 4,096 clients the sequence cap (1,024) binds before the
    # KV cache (1,288 at these lengths), so more memory would not help.
    assert [row["sequence_limited"] for row in rows] == [False, False, True]
    assert not any(row["memory_limited"] for row in rows) and rows[2]["active_batch"] < rows[2]["max_concurrency"]
    assert rows[2]["ttft [ms]"] > 100 * rows[0]["ttft [ms]"]

    table = runner.invoke(app, args).output
    assert table.startswith("answer: llama-3.1-70b fp8 on 4 x h100-sxm (TP 4) under vllm, 1,024/128 tokens")
    assert "KV cache fp8 (vllm engine default)" in table and "measured kernel tables" in table
    # answer, header, 3 rows, note, and the caveat of the 1,024 sequences beyond the 144 vLLM's costs were fitted on
    assert "TTFT ms (80 % range)" in table and len(table.strip().splitlines()) == 7
    assert "fitted on benchmarks of at most 144 sequences" in table.strip().splitlines()[-1]
    header, *body = table.strip().splitlines()[1:5]
    assert header.endswith("limited by") and [line.split()[-1] for line in body] == ["-", "-", "cap"]

    csv = runner.invoke(app, [*args, "--format", "csv"]).output.strip().splitlines()
    assert len(csv) == 4 and "ttft [ms]" in csv[0].split(",")
    # Where the cache limits the batch the table ends with the library's caveats.
    limited = ["predict", "llama-3.1-70b", "-a", "h100-sxm", "-p", "fp8", "--tp", "2", "--engine", "vllm",
               "--kv-precision", "bf16", "--input", "1024", "--output", "8192", "-c", "64"]  # fmt: skip
    expected = predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 2, 1024, 8192, 64, "vllm", kv_precision="bf16")
    lines = runner.invoke(app, limited).output.strip().splitlines()
    assert lines[2].endswith("KV cache") and any(
        line.startswith("Where the KV cache limits the batch") for line in lines
    )
    assert lines[-len(expected.caveats()) :] == list(expected.caveats())


def test_predict_offers_the_librarys_arrivals_and_its_run_length():
    from calculator.cli.predict import Arrivals
    from calculator.performance import ARRIVALS, REQUESTS_PER_CLIENT

    assert tuple(Arrivals) == ARRIVALS  # the CLI does not import the library to build its help
    args = ["predict", "llama-3.1-8b", "--input", "1024", "--output", "128", "-c", "8", "--json"]
    assert json.loads(runner.invoke(app, args).output)[0]["requests_per_client"] == REQUESTS_PER_CLIENT


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--arrivals", "waves", "--length-cv", "0.1"], "--length-cv applies to dispersed arrivals"),
        (["--tp", "3"], "error: --tp 3 does not split model 'llama-3.1-8b'"),
        (["--input", "200000"], "exceeds the model's context limit"),
        (["-a", "h300"], "unknown accelerator id 'h300'"),
        (["--engine", "tgi"], "option --engine must be one of"),
    ],
)
def test_predict_bad_input_exits_2_with_one_line(extra, message):
    args = ["predict", "llama-3.1-8b", "--input", "1024", "--output", "128", "-c", "8"]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


# ------------------------------------------------------------------------------------- one vocabulary


def _fields(text):
    """Each table row's field name -> its value and unit (``22.68 USD/h``); each ``name: value`` line's too."""
    found = {}
    for line in text.splitlines():
        if match := re.match(r"^([a-z_.]+)(?:: (.*)|  +(\S.*))$", line):
            found[match[1]] = match[2] if match[2] is not None else " ".join(re.split(r"  +", match[3])[:2])
    return found


def _named(text):
    """The field names of a table's rows and ``name: value`` lines (not the indented family notes or sentences)."""
    return {m.group(1) for m in map(re.compile(r"^([a-z_.]+)(?:: |  +\S)").match, text.splitlines()) if m}


@pytest.mark.parametrize("mode", [[], ["--disaggregated"]], ids=["colocated", "disaggregated"])
def test_size_table_json_csv_and_the_api_share_one_name_per_field(mode):
    from calculator.fleet import DisaggregatedPlan, FleetPlan
    from calculator.results import parse_label

    args = [*SMALL_SIZE, *mode]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    header = runner.invoke(app, [*args, "--format", "csv"]).stdout.splitlines()[0]
    dotted = {parse_label(label)[0] for label in header.split(",")}
    columns = {name.split(".")[0] for name in dotted}
    api = {f.name for f in dataclasses.fields(DisaggregatedPlan if mode else FleetPlan)}
    lines = _named(result.stdout) - {"workload", "targets", "prices", "answer", "note"}  # the echoed inputs
    named = {name.split(".")[0] for name in lines}  # a part's fields are 'part.name' lines
    assert set(data) == api
    assert named <= api and named <= columns, named - columns
    # The token costs say which tokens they count, in every output alike: the cost part's fields.
    costs = {"cost.per_hour", "cost.per_month", "cost.per_million_output_tokens", "cost.per_million_total_tokens"}
    assert costs <= lines and costs == {f"cost.{name}" for name in data["cost"]} and costs <= dotted
    if not mode:
        assert {"energy.per_million_output_tokens", "energy.electricity_cost_per_million_output_tokens"} <= lines
    assert not any("per_million_tokens" in name for name in (*lines, *data, *dotted))
    month = data["cost"]["per_month"]
    assert month["unit"] == "USD/month"
    assert month["value"] == pytest.approx(data["cost"]["per_hour"]["value"] * 730.5)


def test_a_plan_file_of_an_older_version_reads_its_cost_fields(tmp_path):
    """Files written before the token costs said 'output' (and before the plan had parts) still load."""
    from calculator.cli import _plan_from_json

    data = json.loads((Path(__file__).parent / "plans" / "flat-deepseek-v3-attention-dp.json").read_text())
    data["cost_per_million_tokens"] = data.pop("cost_per_million_output_tokens")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    plan = _plan_from_json(old)
    assert plan.cost.per_million_output_tokens.m_as("USD") == data["cost_per_million_tokens"]["value"]


def test_size_verify_prints_each_simulated_statistic_beside_the_analytical_one():
    from calculator import Q_
    from calculator.fleet import Costs, SearchSpace, Targets, Workload, size_fleet
    from calculator.simulation import verify_plan

    args = [*SMALL_SIZE, "--percentile", "99", "--tbt", "300 ms", "--verify", "--requests", "600", "--seeds", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    plan = size_fleet(
        "llama-3.1-70b", Workload(Q_(5, "request/s"), 1024, 256),
        Targets(Q_(1, "s"), Q_(50, "ms"), tbt=Q_(300, "ms"), ttft_percentile=0.99), SearchSpace("h100-sxm", "fp8"),
        costs=Costs(Q_(4, "USD/hour")),
    )  # fmt: skip
    run = verify_plan(plan, requests=600, seeds=1).results[plan.replicas]  # seeded: the same simulation
    lines = result.stdout.splitlines()
    at = f"at {plan.replicas} replica{'s' * (plan.replicas != 1)}"
    for metric, statistic, analytical, target in (
        ("ttft", "p99", plan.service.ttft, "1,000 ms"),
        ("tpot", "mean", plan.service.tpot, "50 ms"),
        ("tbt_max", "p99", plan.service.tbt_max, "300 ms"),
    ):
        line = next(x for x in lines if x.startswith(f"simulated {statistic} {metric} {at}: "))
        simulated = run.value(metric, statistic).m_as("ms")
        assert line.endswith(
            f": {format_number(simulated)} ms (analytical {format_number(analytical.m_as('ms'))} ms, target {target})"
        )


def test_csv_and_xlsx_write_a_hostile_registry_as_text_not_formulas(tmp_path):
    # Issue 57 item 4: a source title or entry name beginning with `=` landed as a live formula in the
    # workbook and unescaped in the CSV.
    import csv
    import io

    import openpyxl
    from test_export import HOSTILE_REGISTRY

    from calculator.export import FORMULA_TRIGGERS

    extra = tmp_path / "hostile.yaml"
    extra.write_text(HOSTILE_REGISTRY)
    result = runner.invoke(app, ["registry", "list", "sources", "--extra", str(extra), "--format", "csv"])
    assert result.exit_code == 0, result.output
    cells = [cell for row in csv.reader(io.StringIO(result.stdout)) for cell in row]
    assert "'=cmd|' /C calc'!A0" in cells and "'\t=1+1" in cells
    assert not [cell for cell in cells if cell.startswith(FORMULA_TRIGGERS)]
    path = tmp_path / "accelerators.xlsx"
    args = ["registry", "list", "accelerators", "--extra", str(extra), "-f", "xlsx", "-o", str(path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    workbook = openpyxl.load_workbook(path)
    cells = [cell for sheet in workbook for row in sheet.iter_rows() for cell in row if cell.value is not None]
    assert not [(cell.parent.title, cell.coordinate) for cell in cells if cell.data_type == "f"]
    texts = {cell.value for cell in cells if cell.data_type == "s"}
    assert {"'@SUM(1+1)*cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0", "'-2+3"} <= texts
    assert not [text for text in texts if text.startswith(FORMULA_TRIGGERS)]
