"""Every CLI error path names the command's flag, never the library's argument name.

Each command is run from a valid start with one option given a bad value (the last value of an option
wins); the message must name that option's flag as the help shows it and carry no API wording (an
``argument '...'`` or a ``function():`` prefix). The table of bad values is checked to cover every option
of the commands it lists, so an option added later without an error case fails here.
"""

import json
import re
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from calculator.cli import app
from calculator.cli._app import tokens

runner = CliRunner()
DAY_PLAN = Path(__file__).parent / "plans" / "flat-deepseek-v3-attention-dp.json"

SIZING = ["llama-3.1-8b", "--rate", "5", "--input", "500", "--output", "200", "--ttft", "1 s", "--tpot", "50 ms"]
START = {
    "size": ["size", *SIZING],
    "compare": ["compare", *SIZING],
    "simulate": ["simulate", *SIZING, "--requests", "200", "--seeds", "1"],
    "fit": ["fit", "llama-3.1-8b", "-a", "h100-sxm", "--context", "4096"],
    "predict": ["predict", "llama-3.1-8b", "--input", "500", "--output", "200", "-c", "4"],
    "frontier": ["frontier", "llama-3.1-8b", "--input", "500", "--output", "200"],
    "day": ["day", "--plan", str(DAY_PLAN), "--demand", "flat", "--duration", "1 h"],
}
#: A bad value of each option, and the flag the message must name (as the help shows it).
SIZING_BAD = {
    "--rate": ("-1", "--rate"),
    "--input": ("0", "--input"),
    "--output": ("0", "--output"),
    "--trace": ("missing.csv", "--trace"),
    "--ttft": ("500", "--ttft"),
    "--tpot": ("x ms", "--tpot"),
    "--tbt": ("5", "--tbt"),
    "--percentile": ("150", "--percentile"),
    "--tpot-percentile": ("150", "--tpot-percentile"),
    "--tbt-percentile": ("99", "--tbt-percentile"),  # without --tbt: the message names both
    "--accelerator": ("h999", "--accelerator"),
    "--precision": ("int3", "-p/--precision"),
    "--tp": ("3", "--tp"),
    "--engine": ("tgi", "--engine"),
    "--kv-precision": ("int3", "--kv-precision"),
    "--moe-layout": ("sideways", "--moe-layout"),
    "--price": ("cheap", "--price"),
    "--max-utilization": ("2", "--max-utilization"),
    "--arrival-cv": ("-1", "--arrival-cv"),
    "--input-cv": ("-1", "--input-cv"),
    "--output-cv": ("-1", "--output-cv"),
    "--prefix-hit": ("2", "--prefix-hit"),
    "--shared-prefix": ("-5", "--shared-prefix"),
    "--speculate": ("nodraft:3:0.7", "--speculate"),
    "--chunk": ("0", "--chunk"),
    "--router": ("fastest", "--router"),
    "--interconnect": ("pigeon", "--interconnect"),
}
BAD = {
    "size": {
        **SIZING_BAD,
        "--demand": ("missing.csv", "--demand"),
        "--demand-bin": ("1 s", "--demand-bin"),
        "--cold-start": ("1 s", "--cold-start"),
        "--requests": ("0", "--requests"),
        "--seeds": ("0", "--seeds"),
        "--time-limit": ("soon", "--time-limit"),
        "--emit": ("helm", "--emit"),
    },
    "compare": SIZING_BAD,
    "simulate": {
        **{flag: case for flag, case in SIZING_BAD.items() if flag != "--interconnect"},
        "--plan": ("missing.json", "--plan"),
        "--requests": ("0", "--requests"),
        "--seeds": ("0", "--seeds"),
        "--replicas": ("0", "--replicas"),
        "--max-replicas": ("0", "--max-replicas"),
        "--time-limit": ("soon", "--time-limit"),
    },
    "fit": {
        "--accelerator": ("h999", "--accelerator"),
        "--context": ("1000000", "--context"),
        "--precision": ("int3", "-p/--precision"),
        "--tp": ("3", "--tp"),
        "--batch": ("-1", "--batch"),
        "--kv-precision": ("int3", "--kv-precision"),
        "--engine": ("tgi", "--engine"),
        "--reserve": ("2 s", "--reserve"),
        "--basis": ("vibes", "--basis"),
        "--block": ("0", "--block"),
        "--data-parallel": ("3", "--data-parallel"),
    },
    "predict": {
        "--input": ("0", "--input"),
        "--output": ("0", "--output"),
        "--concurrency": ("0", "--concurrency"),
        "--accelerator": ("h999", "--accelerator"),
        "--precision": ("int3", "-p/--precision"),
        "--tp": ("3", "--tp"),
        "--engine": ("tgi", "--engine"),
        "--engine-version": ("9.9", "--engine-version"),
        "--kv-precision": ("int3", "--kv-precision"),
        "--arrivals": ("stampede", "--arrivals"),
        "--length-cv": ("-1", "--length-cv"),
        "--requests-per-client": ("0", "--requests-per-client"),
        "--data-parallel": ("3", "--data-parallel"),
        "--expert-parallel": ("3", "--expert-parallel"),
        "--redundant-experts": ("-1", "--redundant-experts"),
        "--speculate": ("nodraft:3:0.7", "--speculate"),
        "--stream-interval": ("0", "--stream-interval"),
    },
    "frontier": {
        "--input": ("0", "--input"),
        "--output": ("0", "--output"),
        "--accelerator": ("h999", "--accelerator"),
        "--precision": ("int3", "-p/--precision"),
        "--engine": ("tgi", "--engine"),
    },
    "day": {
        "--plan": ("missing.json", "--plan"),
        "--demand": ("monthly", "--demand"),
        "--peak-rate": ("-5", "--peak-rate"),
        "--autoscaler": ("magic", "--autoscaler"),
        "--metric": ("cpu", "--metric"),
        "--min-replicas": ("-1", "--min-replicas"),
        "--max-replicas": ("0", "--max-replicas"),
        "--warm-pool": ("-1", "--warm-pool"),
        "--cooldown": ("5", "--cooldown"),
        "--scale-down-window": ("5", "--scale-down-window"),
        "--step": ("5", "--step"),
        "--interval": ("0 s", "--interval"),
        "--lead-time": ("soon", "--lead-time"),
        "--fail": ("disk:1@14:00", "--fail"),
        "--region": ("us east", "--region"),
        "--round-trip": ("50", "--round-trip"),
        "--retry-timeout": ("0 s", "--retry-timeout"),
        "--max-attempts": ("0", "--max-attempts"),
        "--retry-budget": ("-1", "--retry-budget"),
        "--max-queue": ("-1", "--max-queue"),
        "--deadline": ("0 s", "--deadline"),
        "--window": ("0 min", "--window"),
        "--duration": ("-1 h", "--duration"),
        "--storage-bandwidth": ("1 s", "--storage-bandwidth"),
        "--mode": ("batch", "--mode"),
        "--seeds": ("0", "--seeds"),
    },
}
#: Options with no bad value: on/off flags, and the output options (their errors are tested in test_cli.py).
NO_BAD_VALUE = {"--json", "--format", "--out", "--extra", "--pareto", "--disaggregated", "--verify", "--streaming"}
#: What the library says that a command-line user did not write.
API_WORDING = re.compile(r"argument '|\w\(\): |\bor None\b|\b[a-z]+_[a-z_]+ \d")


def _options(command: str) -> set[str]:
    found = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {param.opts[0] for param in found.params if param.opts[0].startswith("--")} - NO_BAD_VALUE


@pytest.mark.parametrize("command", sorted(BAD))
def test_the_table_has_a_bad_value_for_every_option(command):
    assert set(BAD[command]) == _options(command)


def _run(command: str, flag: str, value: str) -> str:
    result = runner.invoke(app, [*START[command], flag, value])
    assert result.exit_code == 2, (command, flag, result.output)
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())  # typer's own errors come boxed, wrapped


@pytest.mark.parametrize(
    ("command", "flag"), [(command, flag) for command in sorted(BAD) for flag in sorted(BAD[command])]
)
def test_a_bad_value_is_an_error_naming_the_flag(command, flag):
    value, named = BAD[command][flag]
    message = _run(command, flag, value)
    assert named in message, message
    assert not API_WORDING.search(message), message


def test_the_disaggregated_pools_errors_name_the_flags():
    # what a disaggregated plan cannot do, in the flags given: the benchmark of a colocated plan's replicas
    result = runner.invoke(app, [*START["size"], "--disaggregated", "--emit", "bench"])
    assert result.exit_code == 2 and "--emit bench" in result.output and "--disaggregated" in result.output
    result = runner.invoke(app, [*START["size"], "--disaggregated", "--chunk", "512"])
    assert result.exit_code == 2 and "leave out --chunk" in result.output
    assert not API_WORDING.search(result.output)


def test_the_library_names_read_as_the_flags():
    # the four messages issue 55 found, each as the library phrased it and as the CLI must
    assert "option -p/--precision must be one of" in _run("size", "-p", "int3")  # library: 'precisions'
    assert "or generic, got 'tgi'" in _run("predict", "--engine", "tgi")  # library: 'or None'
    assert _run("fit", "--context", "1000000").startswith("error: --context 1000000 exceeds")  # model_memory_fit()
    # both precisions reach the library as 'precision'; the value quoted tells which flag gave it
    assert "option --kv-precision must be one of" in _run("fit", "--kv-precision", "int3")
    assert "option -a/--accelerator: unknown accelerator id 'h999'" in _run("fit", "-a", "h999")


@pytest.mark.parametrize(
    ("text", "whole", "count"),
    [
        ("4096", True, 4096),
        ("128K", True, 128 * 1024),  # vLLM's human_readable_int: upper case is binary
        ("128k", True, 128_000),  # lower case decimal
        ("1M", True, 1024 * 1024),
        ("2m", True, 2_000_000),
        ("25.6k", True, 25_600),
        ("256.5", False, 256.5),  # a mean length may be fractional
    ],
)
def test_token_counts_take_vllms_suffixes(text, whole, count):
    assert tokens(whole=whole)(text) == count


@pytest.mark.parametrize(
    ("text", "whole", "message"),
    [
        ("1.5K", True, "a binary suffix takes a whole number; did you mean '1.5k'?"),
        ("256.5", True, "expected a whole number of tokens"),
        ("0", True, "expected 1 or more tokens"),
        ("-5", True, "expected a token count such as 4096"),
        ("12 G", True, "expected a token count such as 4096"),
    ],
)
def test_bad_token_counts_are_refused(text, whole, message):
    with pytest.raises(typer.BadParameter, match=re.escape(message)):
        tokens(whole=whole)(text)


def test_the_commands_read_token_suffixes():
    fit = runner.invoke(app, ["fit", "llama-3.1-8b", "-a", "h100-sxm", "--context", "128K"])
    assert fit.exit_code == 0 and "1 sequence of 131,072 tokens fit" in fit.output  # 128 x 1,024
    predict = runner.invoke(app, [*START["predict"], "--input", "2k", "--output", "0.2k"])
    assert predict.exit_code == 0 and "2,000/200 tokens per request" in predict.output
    message = _run("fit", "--context", "1.5K")
    assert "Invalid value for '--context'" in message and "did you mean '1.5k'?" in message


CALIBRATE_BAD = {
    "--model": ("bogus", "--model"),
    "--accelerator": ("h999", "-a/--accelerator"),
    "--engine": ("tgi", "--engine"),
    "--precision": ("int3", "-p/--precision"),
    "--tp": ("0", "--tp"),
    "--concurrency": ("0", "--concurrency"),
    "--arrivals": ("stampede", "--arrivals"),
    "--length-cv": ("-1", "--length-cv"),
    "--write": ("no-such-folder/mine.yaml", "--write"),
}


@pytest.fixture(scope="module")
def benchmark_files(tmp_path_factory):
    from test_calibrate import CASES, _files, _runs

    kind, engine, version, precision, tp, _ = CASES[0]
    paths = _files(tmp_path_factory.mktemp("runs"), kind, _runs(engine, version, precision, tp))
    return [
        "calibrate",
        *map(str, paths),
        "--model",
        "qwen3-32b",
        "-a",
        "h100-sxm",
        "--engine",
        engine,
        "-p",
        precision,
        "--tp",
        str(tp),  # the runs' (4); another degree is refused, see test_calibrate_refuses_a_tp_the_runs_contradict
    ]


def test_calibrates_table_has_a_bad_value_for_every_option():
    assert set(CALIBRATE_BAD) == _options("calibrate")


@pytest.mark.parametrize("flag", sorted(CALIBRATE_BAD))
def test_calibrate_names_the_flag(benchmark_files, flag):
    value, named = CALIBRATE_BAD[flag]
    result = runner.invoke(app, [*benchmark_files, flag, value])
    assert result.exit_code == 2, (flag, result.output)
    message = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert named in message and not API_WORDING.search(message), message


def _message(result) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())


def test_calibrate_refuses_a_tp_the_runs_contradict(benchmark_files, tmp_path):
    # The fixture's runs are Qwen3-32B at BF16 on 4 x H100 (their mean TPOTs from 11.8 ms). On one H100 each
    # decode step reads the whole 65.6 GB of weights (32.8e9 parameters x 2 bytes) at 3.35 TB/s: at least
    # 65.6 / 3,350 s = 19.6 ms per token, so a run at 11.8 ms cannot have been served on one GPU.
    one = _message(runner.invoke(app, [*benchmark_files, "--tp", "1"]))
    assert one.startswith("error: option --tp 1 contradicts") and "11.8 ms, is below the 19.6 ms" in one, one
    # Llama 3.1 405B at BF16 is 405.9e9 parameters x 2 bytes / 4 = 203 GB per GPU on TP 4, over an H100's 80 GiB;
    # 16 GPUs hold 50.7 GB each (8 would be 101 GB).
    model = benchmark_files.index("--model") + 1
    large = [*benchmark_files[:model], "llama-3.1-405b", *benchmark_files[model + 1 :]]
    fits = _message(runner.invoke(app, large))
    assert "option --tp 4: llama-3.1-405b's weights at bf16 take 202.9 GB per GPU" in fits and "at least 16" in fits
    # a degree that does not split the model's 64 heads and 8 KV heads
    assert "--tp 3 does not split model 'qwen3-32b'" in _message(runner.invoke(app, [*benchmark_files, "--tp", "3"]))
    # a result that states its degree (vLLM's --metadata tp=8 writes "tp": "8" at the top of the JSON)
    first = Path(benchmark_files[1])
    stated = tmp_path / "stated.json"
    stated.write_text(json.dumps({**json.loads(first.read_text()), "tp": "8"}), encoding="utf-8")
    recorded = runner.invoke(app, [*benchmark_files[:1], str(stated), *benchmark_files[2:]])
    assert recorded.exit_code == 2 and f"option --tp is 4, but {stated} records a degree of 8" in _message(recorded)


#: The commands not sized above, each from a valid start (``{plan}``, ``{config}``: files the fixture makes), and
#: per option or argument a bad value and what the message must name. Arguments are keyed by their name in
#: the help; their bad value replaces the valid one, which follows the command's words in the start.
OTHER_STARTS = {
    ("registry", "list"): ["registry", "list", "models"],
    ("registry", "show"): ["registry", "show", "h100-sxm"],
    ("registry", "validate"): ["registry", "validate", "{registry_file}"],
    ("registry", "import"): ["registry", "import", "{config}"],
    ("registry", "schema"): ["registry", "schema"],
    ("bench",): ["bench", "--plan", "{plan}"],
    ("check",): ["check", "{results}", "--plan", "{plan}"],
}
OTHER_BAD = {
    ("registry", "list"): {
        "SECTION": ("bogus", "SECTION: unknown registry section 'bogus'"),
        "--registry": ("{missing}", "--registry: "),
        "--extra": ("{malformed}", "--extra: malformed.yaml: malformed YAML"),
        "--out": ("{folder}", "error: --out "),
    },
    ("registry", "show"): {
        "ID": ("h999", "ID: no registry entry has id 'h999'"),
        "--registry": ("{malformed}", "--registry: malformed.yaml"),
        "--extra": ("{missing}", "--extra: "),
    },
    ("registry", "validate"): {"FILE": ("{malformed}", "FILE: malformed.yaml: malformed YAML")},
    ("registry", "import"): {
        "CONFIG": ("{missing}", "CONFIG: cannot read"),
        "--id": ("Bad_Id!", "option --id must be a lowercase id"),
        "--repo": ("notarepo", "option --repo must be a Hugging Face repository"),
        "--index": ("{missing}", "--index: cannot read"),
        "--quant": ("{empty}", "--quant: empty.json: field 'quant_method'"),
        "--out": ("{folder}", "is a folder; give a file name such as"),
        "--registry": ("{missing}", "--registry: "),
        "--extra": ("{malformed}", "--extra: malformed.yaml"),
    },
    ("registry", "schema"): {},
    ("bench",): {
        "--plan": ("{empty}", "--plan "),
        "--tool": ("genai-perf", "option --tool must be one of vllm, sglang, trtllm, got 'genai-perf'"),
    },
    ("check",): {
        "RESULTS": ("{empty}", "RESULTS: "),
        "--plan": ("{missing}", "--plan "),
    },
}
#: Options that take any value: a display name (an empty one falls back to the id).
ANY_VALUE = {("registry", "import"): {"--name"}}


def _command(path: tuple[str, ...]):
    found = typer.main.get_command(app)
    for name in path:
        found = found.commands[name]  # type: ignore[attr-defined]
    return found


@pytest.mark.parametrize("path", sorted(OTHER_BAD))
def test_the_other_commands_table_covers_every_option_and_argument(path):
    # every command of `servecalc --help` (and of `servecalc registry --help`) is covered here or above
    top = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert top == {*START, "calibrate", "registry", *(p[0] for p in OTHER_BAD if len(p) == 1)}
    assert set(_command(("registry",)).commands) == {p[1] for p in OTHER_BAD if p[0] == "registry"}
    params = _command(path).params
    named = {param.opts[0] if param.opts[0].startswith("-") else param.metavar.rstrip(".") for param in params}
    # --extra and --out are tested here (the sizing commands leave them to test_cli.py); --over-base is a switch
    unchecked = (NO_BAD_VALUE - {"--extra", "--out"}) | {"--over-base"} | ANY_VALUE.get(path, set())
    assert set(OTHER_BAD[path]) == named - unchecked


@pytest.fixture(scope="module")
def other_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("files")
    plan = folder / "plan.json"
    sized = runner.invoke(app, ["size", *SIZING, "-a", "h100-sxm", "--engine", "vllm", "--json", "--out", str(plan)])
    assert sized.exit_code == 0, sized.output
    (folder / "empty.json").write_text("{}", encoding="utf-8")
    (folder / "malformed.yaml").write_text("a: [\n", encoding="utf-8")
    (folder / "registry.yaml").write_text("models: {}\n", encoding="utf-8")
    (folder / "out").mkdir()
    from test_model_import import config

    return {
        "plan": str(plan),
        "config": str(config("Qwen--Qwen3-8B")),
        "registry_file": str(folder / "registry.yaml"),
        "results": str(folder / "empty.json"),
        "missing": str(folder / "missing.json"),
        "empty": str(folder / "empty.json"),
        "malformed": str(folder / "malformed.yaml"),
        "folder": str(folder / "out"),
    }


@pytest.mark.parametrize(
    ("path", "name"), [(path, name) for path in sorted(OTHER_BAD) for name in sorted(OTHER_BAD[path])]
)
def test_the_other_commands_name_the_flag_or_argument(other_files, path, name):
    value, expected = (text.format(**other_files) for text in OTHER_BAD[path][name])
    start = [part.format(**other_files) for part in OTHER_STARTS[path]]
    # an option is appended; an argument's valid value, right after the command's words, is replaced
    options = name.startswith("-")
    args = [*start, name, value] if options else [*start[: len(path)], value, *start[len(path) + 1 :]]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (args, result.output)
    message = _message(result)
    assert message.startswith("error: ") and expected in message, message
    assert not API_WORDING.search(message), message


def test_check_refers_to_the_commands_not_the_library(other_files, tmp_path):
    # The plan serves SIZING's 5 request/s on one replica (llama-3.1-8b on an H100); a run at 100 request/s is
    # 1,900 % off, beyond check's tolerance; the library's message names check_plan() and benchmark_command().
    run = tmp_path / "run.json"
    run.write_text(
        json.dumps(
            {"completed": 80, "total_input_tokens": 40000, "total_output_tokens": 16000, "mean_ttft_ms": 150.0,
             "mean_tpot_ms": 12.0, "request_rate": 100, "request_throughput": 5, "mean_e2el_ms": 900}
        ),
        encoding="utf-8",
    )  # fmt: skip
    message = _message(runner.invoke(app, ["check", str(run), "--plan", other_files["plan"]]))
    assert message.startswith("error: RESULTS: no run at the plan's rate per replica"), message
    assert "5 request/s" in message and "is 1900% off" in message, message  # 100 / 5 - 1 = 19
    assert "run the 'servecalc bench' runs" in message and not API_WORDING.search(message), message
    empty = _message(runner.invoke(app, ["check", other_files["empty"], "--plan", other_files["plan"]]))
    assert "servecalc check expects the 'servecalc bench' runs" in empty, empty
