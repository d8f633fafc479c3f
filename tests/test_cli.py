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


# ---------------------------------------------------------------------------------------------- simulate

PLAN_ARGS = [
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
    "--ttft-percentile",
    "0.99",
    "--price",
    "4",
]
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
    from calculator.fleet import size_fleet
    from calculator.simulation import verify_plan

    result = runner.invoke(app, ["simulate", *PLAN_ARGS, *FAST])
    assert result.exit_code == 0, result.output
    plan = size_fleet(
        "llama-3.1-70b", "h100-sxm", "fp8", Q_(20, "request/s"), 1024, 256, Q_(1, "s"), Q_(50, "ms"),
        ttft_percentile=0.99, price=Q_(4, "USD/hour"),
    )  # fmt: skip
    expected = verify_plan(plan, requests=600, seeds=1)  # the simulation is seeded: the same numbers
    lines = result.stdout.splitlines()
    assert f"verdict: {expected.verdict}" in lines
    assert f"analytical replicas: {plan.replicas}" in lines
    assert f"simulated replicas: {expected.simulated_replicas}" in lines
    for count in expected.table.replicas:  # the table of replica counts and each count's verdict
        assert f"  {count} replicas: {expected.results[count].verdict}" in lines
    # The summary at the plan's replicas: mean, p50, p90 and p99 of TTFT, TPOT and the token gap, with intervals.
    summary = expected.results[plan.replicas].summary.set_index(["metric", "statistic"])
    assert f"summary at {plan.replicas} replicas" in result.stdout
    for metric in ("ttft", "tpot", "token_gap"):
        for statistic in ("mean", "p50", "p90", "p99"):
            row = summary.loc[(metric, statistic)]
            line = next(x for x in lines if x.split()[:2] == [metric, statistic])
            assert f"{row.value * 1e3:.2f} ms" in line and f"({row.low * 1e3:.2f} to {row.high * 1e3:.2f})" in line


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
        (["--router", "fastest"], 2, "argument 'router' must be one of"),
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
    assert result.exit_code == 2 and "does not record the plan's workload and targets" in result.output
    speculative = tmp_path / "speculative.json"
    speculative.write_text(json.dumps({**saved, "targets": {**saved["targets"], "speculation": True}}))
    result = runner.invoke(app, ["simulate", "--plan", str(speculative)])
    assert result.exit_code == 2 and "speculative decoding and prefix caching are not simulated" in result.output
    infeasible = tmp_path / "infeasible.json"
    infeasible.write_text(json.dumps({**saved, "feasible": False, "reason": "no configuration fits"}))
    result = runner.invoke(app, ["simulate", "--plan", str(infeasible)])
    assert result.exit_code == 1 and "infeasible" in result.output
    assert all("Traceback" not in r.output for r in (missing, both, result))


def test_size_starts_with_the_workload_targets_and_prices_as_understood():
    result = runner.invoke(app, [*SIZING, "-a", "h100-sxm", "-a", "h200-sxm", "--price", "h100-sxm=3"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("workload: 20 request/s; 1,024 prompt tokens -> 256 output tokens")
    assert lines[1].startswith("targets: TTFT 1,000 ms (mean), TPOT 50 ms")
    # The given price for one accelerator, the registry's for the other, with the entry it came from.
    assert lines[2].startswith("prices: h100-sxm 3 USD/hour, h200-sxm ") and "(registry entries: " in lines[2]


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
    assert result.exit_code == 0 and json.loads(result.stdout)["tensor_parallel"] == 4
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("servecalc ")


def test_a_request_beyond_the_context_limit_is_infeasible_with_that_reason():
    args = [*SIZING[:4], "--input", "200000", *SIZING[6:], "-a", "h100-sxm", "--price", "4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "context limit of 131,072 tokens" in result.output


def test_size_takes_the_sizer_options_and_echoes_them():
    base = [*SIZING, "-a", "h100-sxm", "--price", "4"]
    options = ["--output-cv", "0.5", "--chunk", "2048", "--tbt", "200 ms", "--prefix-hit", "0.3", "--shared-prefix", "512"]
    result = runner.invoke(app, [*base, *options, "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["workload"]["output_cv"] == 0.5 and plan["targets"]["chunk_size"] == 2048
    assert plan["targets"]["tbt"]["value"] == pytest.approx(0.2) and plan["targets"]["prefix_caching"] is True
    echoed = runner.invoke(app, [*base, *options]).stdout.splitlines()
    assert "prefix-cache hit rate 0.3 on a 512-token shared prefix; chunked prefill at 2,048 tokens" in echoed[0]
    assert "token gap 200 ms" in echoed[1]
    bare = runner.invoke(app, [*base, "--tbt", "200"])
    assert bare.exit_code == 2 and "option --tbt: '200' has no unit" in bare.output


def test_an_infeasible_plan_prints_no_zero_configuration_and_token_costs_say_output():
    infeasible = runner.invoke(app, [*SIZING[:4], "--input", "200000", *SIZING[6:], "--price", "4"])
    assert infeasible.exit_code == 1 and "feasible: False" in infeasible.stdout
    assert "tensor_parallel: 0" not in infeasible.stdout and "gpus: 0" not in infeasible.stdout
    feasible = runner.invoke(app, [*SIZING, "--price", "4"])
    assert "cost_per_million_output_tokens: " in feasible.stdout and "cost_per_million_tokens" not in feasible.stdout
