"""The defects of the hardening issue, one test each: no file, link or number freezes, floods or fools the calculator.

Each test names the defect it pins. Registry files and links have their own tests beside the code they
exercise (tests/test_registry.py, tests/test_app.py); this file holds the library and CLI cases.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
from typer.testing import CliRunner

import calculator as c
from calculator import Q_
from calculator.cli import app
from calculator.errors import CalculatorError, InputError, UnitsError

runner = CliRunner()
SIZING = ("llama-3.1-8b", "h100-sxm", "fp8")


def parts(rate, inputs=1024, outputs=256, ttft=None, tpot=None, **fields):
    """SIZING's model and size_fleet's parts for a workload and targets (1 s, 50 ms); ``fields`` go to Workload."""
    model, accelerator, precision = SIZING
    workload = c.Workload(rate, inputs, outputs, **fields)
    targets = c.Targets(ttft or Q_(1, "s"), tpot or Q_(50, "ms"))
    return model, workload, targets, c.SearchSpace(accelerator, precision)


def fast(function, *args, seconds=20.0, **kwargs):
    """Call and return, asserting the call took under ``seconds`` (a hang was the defect).

    A guard against hangs, not a speed target (those are benchmarks, docs/benchmarks.md): the defects took
    minutes or never ended, and the limits leave ten times what the calls take on a loaded two-core machine
    (2 s limits failed there while the suite ran beside another).
    """
    started = time.perf_counter()
    try:
        return function(*args, **kwargs)
    finally:
        assert time.perf_counter() - started < seconds, f"{function.__name__} took over {seconds} s"


# ------------------------------------------------------------------------------------------- High


def test_unit_arithmetic_cannot_freeze_the_parser():
    # `memory: "9**9**9 GiB"` froze registry validation; `--rate "9**9**9 request/s"` hung the CLI.
    with pytest.raises(UnitsError, match="expected a number and a unit"):
        fast(c.parse_quantity, "9**9**9 GiB", "GB")
    for text in ("2**1000 GB", "1e5**1e5 s", "(9)**9 ms", "9 ** 9 ** 9 request/s", "exp(999) s"):
        with pytest.raises(UnitsError):
            fast(c.parse_quantity, text, "s" if " s" in text or "ms" in text else None)


# ----------------------------------------------------------------------------------------- Medium


@pytest.mark.parametrize("rate", [Q_(5e19, "request/s"), Q_(1e300, "request/s")])
def test_an_absurd_rate_is_infeasible_with_its_reason_not_a_negative_fleet(rate):
    plan = fast(c.size_fleet, *parts(rate), seconds=30)
    assert not plan.feasible and "GPUs" in plan.reason
    assert plan.gpus >= 0 and plan.cost is None  # an infeasible plan has no cost part, never a negative one


def test_an_infinite_rate_is_an_input_error():
    with pytest.raises(InputError, match="arrival_rate"):
        c.size_fleet(*parts(Q_(math.inf, "request/s")))


def test_the_cli_does_not_print_a_negative_fleet():
    result = runner.invoke(
        app, ["size", "llama-3.1-8b", "--rate", "5e19", "--input", "1024", "--output", "256", "--ttft", "1 s",
              "--tpot", "50 ms", "-a", "h100-sxm", "-p", "fp8", "--price", "4"],
    )  # fmt: skip
    assert result.exit_code == 1 and "more than 10,000,000 GPUs" in result.stdout
    assert not re.search(r"^(gpus|replicas|cost_per_hour): -", result.stdout, re.M)


def test_predictions_for_setups_that_cannot_run_are_refused():
    # Llama-3.1-405B in BF16 on one H100: 810 GB of weights on an 80 GiB device.
    with pytest.raises(InputError, match="weights"):
        c.predict_benchmark("llama-3.1-405b", "h100-sxm", "bf16", 1, 1024, 128, 8)
    # A 10M-token prompt on a model with a 131,072-token context.
    with pytest.raises(InputError, match="context"):
        c.predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 10_000_000, 128, 8)
    with pytest.raises(InputError, match="input_tokens"):
        c.predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1e300, 128, 8)


@pytest.mark.parametrize("out", ["missing-folder/plan.json", "."])
def test_cli_out_to_a_missing_folder_or_onto_a_folder_is_a_message(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(
        app, ["size", "llama-3.1-8b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s",
              "--tpot", "50 ms", "-a", "h100-sxm", "-p", "fp8", "--price", "4", "--format", "json", "--out", out],
    )  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output and "--out" in result.output


def test_reactive_scaling_at_the_longest_horizon_answers_fast():
    # The autoscaling page at end=10000 hours took 220 s (a Python loop per step).
    times = Q_(np.linspace(0, 24, 25), "hour")
    demand = Q_(100 + 50 * np.sin(np.linspace(0, 2 * np.pi, 25)), "request/s")
    result = fast(
        c.simulate_reactive_scaling, times, demand, Q_(10, "request/s"), Q_(5, "min"),
        end=Q_(10_000, "hour"), step=Q_(1, "min"),
    )  # fmt: skip
    assert len(result.times) > 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: c.quantize(np.linspace(-1, 1, 64), bits=1e300), "bits"),
        (lambda: c.chunked_prefill_tradeoff(*SIZING[:2], prompt_tokens=1e9, chunk_size=512, decode_batch=8), "prompt"),
        (lambda: c.relax_targets(*parts(Q_(5, "request/s"), ttft=Q_(1, "ms"), tpot=Q_(1, "ms")), max_factor=math.inf),
         "max_factor"),
        (lambda: c.relax_targets(*parts(Q_(5, "request/s"), ttft=Q_(1, "ms"), tpot=Q_(1, "ms")), tolerance=1e-300),
         "tolerance"),
    ],
)  # fmt: skip
def test_iterative_routines_refuse_or_finish_fast(call, message):
    started = time.perf_counter()
    try:
        call()
    except CalculatorError as error:
        assert message in str(error)
    assert time.perf_counter() - started < 20.0  # a hang guard, as fast()'s


def test_dynamic_batching_simulation_bounds_its_work():
    # A control interval of 1e-300 s, or arrivals 1e300 s apart, made the controller loop forever.
    arrivals = Q_(np.linspace(0, 10, 50), "s")
    common = {"window": Q_(5, "ms"), "max_batch": 16, "fixed_time": Q_(5, "ms"), "marginal_time": Q_(1, "ms"),
              "slo": Q_(50, "ms")}  # fmt: skip
    with pytest.raises(InputError, match="control_interval"):
        fast(c.simulate_dynamic_batching, arrivals, control_interval=Q_(1e-300, "s"), **common)
    with pytest.raises(InputError, match="arrivals span"):
        fast(c.simulate_dynamic_batching, Q_([0.0, 1e300], "s"), control_interval=Q_(1, "s"), **common)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: c.goodput_from_requests(Q_([0.1], "s"), Q_([0.01], "s"), Q_(1, "s"), Q_(1, "s"), Q_(0, "s")), "window"),
        (lambda: c.fit_ring_allreduce(Q_([1e6, 2e6], "B"), [8, 8], Q_([1, 2], "ms"), latency=Q_(math.nan, "s")),
         "latency"),
        (lambda: c.frontier("llama-3.1-8b", [], "fp8", 1024, 256), "accelerator"),
    ],
)  # fmt: skip
def test_systemic_internal_errors_are_the_projects_errors(call, message):
    with pytest.raises(CalculatorError, match=message):
        call()


def test_a_missing_quantity_names_the_argument():
    with pytest.raises(UnitsError, match="argument 'service_time' is required"):
        c.mmc_mean_wait(Q_(1, "request/s"), None, 2)


def test_a_count_of_infinity_is_an_input_error_not_an_overflow():
    with pytest.raises(InputError, match="finite"):
        c.kv_cache_bytes(math.inf, 1024, Q_(1, "kB/token"))


# -------------------------------------------------------------------------------------------- Low


def test_silently_accepted_values_are_refused():
    with pytest.raises(InputError, match="precision"):
        c.check_precision("")
    with pytest.raises(InputError):
        c.as_count([math.nan])


ALIAS_BOMB = "models:\n  - id: bomb\n    name: x\n    " + "\n    ".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
)
SIZE = ["llama-3.1-8b", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms", "-a", "h100-sxm",
        "-p", "fp8", "--price", "4"]  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ["registry", "show", "![x](https://attacker.example/x.png)" * 50],
        ["registry", "list", "--extra", "{bomb}"],
        ["registry", "validate", "{bomb}"],
        ["registry", "show", "h100-sxm", "--extra", "{big}"],
        ["size", *SIZE, "--rate", "9**9**9 request/s"],
        ["size", *SIZE, "--rate", "1e999"],
        ["size", *SIZE, "--rate", "5", "--extra", "{bomb}"],
        ["simulate", *SIZE, "--rate", "nan request/s"],
        ["simulate", "--plan", "{bomb}"],
        ["frontier", "llama-3.1-8b", "--input", "1e999", "--output", "256", "-a", "h100-sxm"],
        ["frontier", "llama-3.1-8b", "--input", "1024", "--output", "256", "-a", "h100-sxm", "--extra", "{bomb}"],
    ],
    ids=lambda args: " ".join(args)[:40],
)
def test_every_command_answers_hostile_input_with_a_short_message(tmp_path, monkeypatch, args):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * 5000 + "\n")
    monkeypatch.setenv("SERVECALC_REGISTRY_MAX_BYTES", "4096")
    args = [a.format(bomb=bomb, big=big) for a in args]
    started = time.perf_counter()
    result = runner.invoke(app, args)
    assert time.perf_counter() - started < 20  # a hang guard, as fast()'s
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and len(result.output) < 1500, result.output[:2000]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: c.size_fleet(*parts(Q_(5, "request/s")), costs=c.Costs(electricity=Q_(-0.1, "USD/(kW*hour)"))),
         "'electricity' must be >= 0"),
        (lambda: c.size_fleet(*parts(Q_(5, "request/s")), costs=c.Costs(idle_power_fraction=-0.3)),
         "idle_power_fraction"),
        (lambda: c.check_request_caps(100, 100, execution_time=Q_(math.nan, "s")), "execution_time"),
        (lambda: c.embedding_lookup_time(1000, Q_(1, "ms"), 8, vector_bytes=Q_(512, "B"), shard_bandwidth=Q_(-1, "GB/s")),
         "shard_bandwidth"),
        (lambda: c.embedding_lookup_time(1000, Q_(1, "ms"), 8, vector_bytes=Q_(512, "B"), shard_bandwidth=Q_(0, "GB/s")),
         "shard_bandwidth"),
    ],
)  # fmt: skip
def test_values_that_were_silently_accepted_are_refused(call, message):
    with pytest.raises(CalculatorError, match=message):
        call()


def test_nearly_fixed_arrivals_are_fixed_not_nan():
    times = c.arrival_times(Q_(2, "request/s"), 5, arrival_cv=1e-300).m_as("s")
    assert np.allclose(times, [0.5, 1.0, 1.5, 2.0, 2.5])


def test_a_model_that_fits_nowhere_says_why_and_what_would_help():
    plan = c.size_fleet("llama-3.1-405b", c.Workload(Q_(1, "request/s"), 1024, 256), c.Targets(Q_(5, "s"), Q_(100, "ms")),
                        c.SearchSpace("l40s", "bf16", tensor_parallel=[1, 2]))  # fmt: skip
    assert not plan.feasible and "tensor-parallel" in plan.reason and "inf" not in plan.reason
    result = runner.invoke(app, ["frontier", "llama-3.1-405b", "--input", "1024", "--output", "256", "-a", "l40s",
                                 "-p", "bf16"])  # fmt: skip
    assert result.exit_code == 1 and "fits in memory" in result.output


def test_the_sizer_refuses_a_request_beyond_the_context_limit():
    # Llama-3.1-70B holds 131,072 tokens; a 200,000-token prompt used to give a plan of thousands of GPUs.
    plan = c.size_fleet("llama-3.1-70b", *parts(Q_(5, "request/s"), 200_000)[1:])
    assert not plan.feasible and "context limit of 131,072 tokens" in plan.reason


def test_error_messages_stay_short_for_huge_inputs():
    with pytest.raises(InputError) as error:
        c.kv_cache_bytes(np.full(100_000, -1.0), 10, Q_(1, "kB/token"))
    assert len(str(error.value)) < 300
    with pytest.raises(UnitsError) as error:
        c.kv_cache_bytes(Q_(np.ones(100_000), "s"), 10, Q_(1, "kB/token"))
    assert len(str(error.value)) < 400


def test_more_systemic_cases_are_the_projects_errors():
    times, demand = Q_([0, 6, 12], "hour"), Q_([500, 1500, 800], "request/s")
    with pytest.raises(InputError, match="step"):  # an IndexError before
        c.simulate_reactive_scaling(times, demand, Q_(100, "request/s"), Q_(7, "min"), step=Q_(math.inf, "s"))
    with pytest.raises(InputError, match="kv_precision"):  # NaN used to be ignored
        c.SearchSpace("h100-sxm", "fp8", kv_precision=math.nan)
    with pytest.raises(InputError, match=r"device_capacity|capacity"):  # a ZeroDivisionError before
        c.moe_decode_floor(671e9, 37e9, 8, 8, Q_(math.inf, "GB"), Q_(3.35, "TB/s"))


def test_a_bare_rate_in_scientific_notation_is_read_in_request_per_second():
    result = runner.invoke(app, ["size", *SIZE, "--rate", "1e2"])
    assert result.exit_code in (0, 1) and "workload: 100 request/s" in result.stdout


def test_workload_variability_and_draft_length_are_bounded():
    rate = Q_(5, "request/s")
    with pytest.raises(InputError, match="'arrival_cv' must be finite"):  # an array of infinities in the message before
        c.size_fleet(*parts(rate, arrival_cv=math.inf))
    with pytest.raises(InputError, match="'output_cv' must be at most 100"):
        c.Workload(rate, 1024, 256, output_cv=1e9)
    with pytest.raises(InputError, match="'draft_length' must be at most 256"):  # sized a 10-million-GPU fleet before
        c.Speculation("llama-3.2-1b", draft_length=10**11)
    assert c.Speculation("llama-3.2-1b", draft_length=4.0).draft_length == 4  # a whole float is a count


# ------------------------------------------------------------------------------- Hardening II: plan files


@pytest.fixture(scope="module")
def plan_json():
    args = ["size", "llama-3.1-70b", "--rate", "5", "--input", "1024", "--output", "256", "--ttft", "1 s"]
    result = runner.invoke(app, [*args, "--tpot", "50 ms", "--price", "4", "--json"])
    assert result.exit_code == 0, result.output
    import json

    return json.loads(result.stdout)


def _tampered(tmp_path, plan_json, change):
    import copy
    import json

    data = copy.deepcopy(plan_json)
    change(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # Issue 25 item 1: a unit pint would evaluate (9**9**9) hung `simulate --plan` for over 30 s.
        (lambda d: d["service"]["ttft"].update(unit="9**9**9*second"), "field 'service.ttft': '9**9**9*second' is not"),
        (lambda d: d["targets"]["ttft"].update(unit="9**9**9*second"), "field 'targets.ttft': '9**9**9*second'"),
        (
            lambda d: d["service"]["ttft"].update(unit="GB"),
            "field 'service.ttft': the unit 'GB' has the wrong dimension",
        ),
        (lambda d: d["service"]["ttft"].update(value="1"), "field 'service.ttft': the value must be a number"),
        (
            lambda d: d["cost"]["per_hour"].update(unit="s"),
            "field 'cost.per_hour': the unit 's' has the wrong dimension",
        ),
        # Item 4: a traceback for "abc" or NaN; 2.5 replicas simulated; 10**12 replicas and batch 10**9 accepted.
        (lambda d: d.update(replicas="abc"), "field 'replicas' must be a whole number in [0, 10,000,000], got 'abc'"),
        (lambda d: d.update(replicas=float("nan")), "field 'replicas' must be a whole number"),
        (lambda d: d.update(replicas=2.5), "field 'replicas' must be a whole number in [0, 10,000,000], got 2.5"),
        (lambda d: d.update(replicas=10**12), "got 1000000000000"),
        (lambda d: d.update(batch=10**9), "field 'batch' must be a whole number in [0, 1,000,000]"),
        (lambda d: d.update(replicas=-1), "field 'replicas' must be a whole number"),
        (lambda d: d.update(replicas=0), "field 'replicas' of a feasible plan must be at least 1, got 0"),
        (lambda d: d.update(gpus=d["gpus"] + 1), "field 'gpus'"),
        (lambda d: d["layout"].update(tensor_parallel=2.5), "field 'layout.tensor_parallel' must be a whole number in"),
        (
            lambda d: d["layout"].update(data_parallel=0),
            "field 'layout.data_parallel' must be a whole number in [1, 4,096]",
        ),
        (lambda d: d.update(service=None), "field 'service' of a feasible plan is missing"),
        (lambda d: d["service"].update(utilization=-1), "field 'service.utilization' must be a finite number >= 0"),
        (lambda d: d["energy"].update(watts=1), "unexpected keyword argument 'watts'"),
        (lambda d: d.update(ttft=d["service"]["ttft"]), "and the flat fields of an older file (ttft): write one shape"),
        (lambda d: d.update(feasible="yes"), "field 'feasible' must be true or false"),
        (lambda d: d["workload"].update(input_tokens="x"), "workload, targets, serving options, parts or rejections"),
        (lambda d: d["workload"].update(bogus=1), "unexpected keyword argument 'bogus'"),
    ],
)
def test_a_tampered_plan_file_is_refused_naming_plan_and_the_field(tmp_path, plan_json, change, message):
    path = _tampered(tmp_path, plan_json, change)
    started = time.perf_counter()
    result = runner.invoke(app, ["simulate", "--plan", str(path), "--replicas", "1", "--requests", "200"])
    assert time.perf_counter() - started < 10
    assert result.exit_code == 2, result.output
    assert f"error: --plan {path}: " in result.output and message in result.output
    assert "Traceback" not in result.output and len(result.output.splitlines()) <= 3


def test_a_plan_file_with_integral_float_counts_and_another_time_unit_still_loads(tmp_path, plan_json):
    from calculator.cli import _plan_from_json

    def change(d):
        d["replicas"] = float(d["replicas"])
        d["service"]["ttft"] = {"value": d["service"]["ttft"]["value"] * 1e3, "unit": "ms"}

    plan = _plan_from_json(_tampered(tmp_path, plan_json, change))
    assert isinstance(plan.replicas, int) and plan.replicas == plan_json["replicas"]
    assert plan.service.ttft.m_as("s") == pytest.approx(plan_json["service"]["ttft"]["value"])


@pytest.mark.parametrize("text", ["[" * 100_000, "{", ""])
def test_a_plan_file_that_is_not_json_is_refused_in_one_line(tmp_path, text):
    path = tmp_path / "plan.json"
    path.write_text(text)
    result = runner.invoke(app, ["simulate", "--plan", str(path), "--replicas", "1"])
    assert result.exit_code == 2 and "does not hold a plan written by 'servecalc size --json'" in result.output
    assert "Traceback" not in result.output


# ------------------------------------------------------------------------ Hardening II: the candidate grid


@pytest.mark.parametrize(
    ("batches", "message"),
    [
        ([10**9], "argument 'batches' must be at most 65,536"),  # was killed for memory (a MemoryError)
        (range(1, 200_001), "argument 'batches' must be at most 65,536"),  # asked for 298 GiB
        (range(1, 5_001), "'batches' lists 5,000 caps; at most 4,096"),
        (range(1, 4_097), "need 16,777,216 occupancy entries per TP degree; at most 16,000,000"),
    ],
)
def test_a_batch_grid_too_large_for_memory_is_refused_before_the_search(batches, message):
    from calculator.fleet import SearchSpace

    with pytest.raises(InputError, match=re.escape(message)):
        fast(SearchSpace, "h100-sxm", "fp8", batches=batches)


def test_a_repeated_candidate_is_searched_once():
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

    workload, targets = Workload(Q_(10, "request/s"), 1000, 200), Targets(Q_(1, "s"), Q_(50, "ms"))
    once = size_fleet("llama-3.1-8b", workload, targets, SearchSpace(["h100-sxm", "h200-sxm"], "fp8"))
    twice = size_fleet(
        "llama-3.1-8b", workload, targets, SearchSpace(["h100-sxm", "h200-sxm", "h100-sxm"], ["fp8"] * 2)
    )
    assert twice.candidates == once.candidates and twice.gpus == once.gpus


def test_a_simulation_whose_requests_are_all_refused_serves_zero_not_nan():
    # Issue 25 item 5: 2,000,000-token prompts on one H100 reported goodput and throughput NaN.
    from calculator.simulation import SimulationSetup, Traffic, simulate

    setup = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm")
    run = simulate(setup, Traffic(Q_(1, "request/s"), 2_000_000, 10, requests=50), ttft_slo=Q_(1, "s"))
    assert run.dropped == 50 and run.meets_targets is False
    assert run.goodput.m_as("request/s") == 0 and run.throughput.m_as("request/s") == 0
    assert run.attainment == {"ttft": 0.0, "all": 0.0}
    assert "can never fit the KV cache and were refused" in run.verdict


@pytest.mark.parametrize("text", ["9**9**9 GiB", "1e999 GB"])
def test_the_exported_quantity_constructor_reads_text_safely(text):
    # Issue 25 item 9: Q_("9**9**9 GiB"), exported at the top level, hung in pint's parser.
    with pytest.raises(UnitsError):
        fast(c.Q_, text)
    with pytest.raises(UnitsError, match="expected a unit like"):
        fast(c.Q_, 1, "9**9**9*second")
    assert c.Q_("80 GB") == c.Q_(80, "GB") and c.Q_(1, "USD/(kW*hour)").m_as("USD/(kW*hour)") == 1


@pytest.mark.parametrize("unit", ["9**9**9*s", "furlongz"])
def test_dimension_of_a_hostile_or_unknown_unit_is_the_projects_error(unit):
    from calculator.units import dimension_of

    with pytest.raises(UnitsError):
        fast(dimension_of, unit)


@pytest.mark.parametrize("degree", [0, -1, 1.5, float("nan")])
def test_iteration_seconds_refuses_a_degree_that_is_not_a_whole_number_of_gpus(degree):
    # Issue 25 item 9: tensor_parallel=0 raised ZeroDivisionError.
    from calculator.performance import engine_profile, iteration_seconds, step_arrays

    arrays = step_arrays("llama-3.1-8b", "h100-sxm", "fp8")
    with pytest.raises(InputError, match="argument 'tensor_parallel' must be whole numbers >= 1"):
        iteration_seconds(arrays, engine_profile(None).efficiency, degree, 8, 1000)


def test_the_wider_tensor_parallel_hint_counts_one_sequences_kv_cache():
    # Issue 25 item 7: where one sequence's KV cache fits nowhere (the 10^6 layers, now refused
    # by the registry's plausibility bounds), the reason said "TP 32 ... would leave room": it looked at
    # the weights alone. Here 10,000 MHA layers at a 40,000-token prompt: 6.6 TB of FP8 KV a sequence,
    # over 100 GB a device even split 64 ways.
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet
    from calculator.registry import Model

    deep = Model(
        id="deep", name="deep", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
        parameters=70e9, layers=10_000, attention_heads=64, kv_heads=64, head_dim=128, attention="mha",
    )  # fmt: skip
    workload, targets = Workload(Q_(1, "request/s"), 40_000, 200), Targets(Q_(10, "s"), Q_(50, "ms"))
    from calculator.errors import ExtrapolationWarning

    for degrees in ((1, 2, 4, 8), (1, 2, 4, 8, 16)):
        with pytest.warns(ExtrapolationWarning, match="deep.layers"):  # 10,000 layers: outside the validated range
            plan = size_fleet(deep, workload, targets, SearchSpace("h100-sxm", "fp8", tensor_parallel=degrees))
        assert not plan.feasible and "would leave room" not in plan.reason
        assert "one sequence's KV cache" in plan.reason and "a shorter context" in plan.reason
    # Where the weights alone are the problem, the hint still names the degree that holds them and the KV.
    wide = size_fleet("llama-3.1-405b", workload, targets, SearchSpace("h100-sxm", "bf16", tensor_parallel=(1, 2, 4)))
    assert "TP 16 on h100-sxm at bf16 would leave room" in wide.reason


# ---------------------------------------------------------------------- Hardening II: the smaller ones


@pytest.mark.parametrize("value", [-1, 0, 2.5, True])
def test_size_disaggregated_refuses_a_prefill_replica_limit_below_one(value):
    from calculator.fleet import size_disaggregated

    with pytest.raises(InputError, match="argument 'max_prefill_replicas'"):
        size_disaggregated(*parts(Q_(5, "request/s"), 1000, 100), max_prefill_replicas=value)


def test_a_percentile_close_to_100_is_shown_with_its_digits_not_as_p100():
    args = ["size", "llama-3.1-8b", "--rate", "5", "--input", "1000", "--output", "100", "--ttft", "1 s"]
    result = runner.invoke(app, [*args, "--tpot", "50 ms", "--price", "4", "--percentile", "99.9999999"])
    assert "TTFT 1,000 ms (p99.9999999)" in result.stdout and "p100" not in result.stdout


def test_cli_errors_name_the_option_and_refuse_empty_or_one_bin_inputs(tmp_path):
    args = ["size", "llama-3.1-8b", "--rate", "5", "--input", "1000", "--output", "100", "--ttft", "1 s"]
    args += ["--tpot", "50 ms", "--price", "4"]
    many = runner.invoke(app, [*args, "--verify", "--requests", "99999999"])
    assert many.exit_code == 2 and "--requests" in many.output and "verify_plan()" not in many.output
    trace = tmp_path / "one.csv"
    trace.write_text("arrival_time\n1.0\n")  # one arrival: one bin, as a one-row curve is refused
    one = runner.invoke(app, [*args, "--demand", str(trace)])
    assert one.exit_code == 2 and "a demand curve needs at least two bins" in one.output
    (tmp_path / "empty.yaml").write_text("")  # (/dev/null is refused as a device: tests/test_hardening_readers.py)
    empty = runner.invoke(app, ["registry", "validate", str(tmp_path / "empty.yaml")])
    assert empty.exit_code == 2 and "the file is empty" in empty.output
    folder = runner.invoke(app, [*args, "--extra", str(tmp_path)])
    assert folder.exit_code == 2 and "cli:" not in folder.output and "Traceback" not in folder.output


# --------------------------------------------------------------------- Hardening II: one deadline per call


@pytest.mark.parametrize(("start", "fewest"), [(100, 37), (5, 40), (1000, 1), (7, 7), (1, 1), (3, 200)])
def test_the_replica_search_brackets_and_bisects(start, fewest):
    # Issue 25 item 2: the search moved one replica at a time (1,000 replicas: hundreds of simulations).
    from calculator.simulation.plans import _Search

    tried = []

    def meets(count):
        tried.append(count)
        return count >= fewest

    found = _Search(meets).fewest_meeting(start, limit=max(2 * start + 2, 400))
    assert found == fewest
    assert len(tried) <= 2 * math.log2(max(start, fewest)) + 4, tried
    if fewest < start:
        assert start - 1 in tried  # "N - 1 miss them" is a simulated fact, not inferred


def test_verify_plan_keeps_one_deadline_for_the_whole_call():
    # verify_plan(replicas=1000, requests=20000, time_limit=10) ran for more than 75 s: time_limit bounded one seed.
    import dataclasses

    from calculator.fleet import size_fleet
    from calculator.simulation import verify_plan

    plan = size_fleet(*parts(Q_(20, "request/s"), 1000, 200))
    wide = dataclasses.replace(plan, replicas=400, gpus=400 * plan.layout.stage_gpus)
    started = time.perf_counter()
    checked = verify_plan(wide, requests=8000, seeds=1, time_limit=3)
    # the deadline and the summaries' few seconds under a loaded machine (the defect ran past 75 s)
    assert time.perf_counter() - started < 3 + 6
    assert checked.truncated.startswith("the search stopped at the 3 s time_limit")
    # the verdict names the limit: the search stopped after the plan's count (which fewer may meet), or, on a
    # loaded machine, the plan's own count could not finish in time
    assert (
        "the search stopped at the 3 s time_limit" in checked.verdict and "fewer may meet them" in checked.verdict
    ) or ("could not be simulated to the end: stopped after 3 s of wall clock (time_limit)" in checked.verdict)
    with pytest.raises(InputError, match="argument 'time_limit' must be a finite number of seconds > 0"):
        verify_plan(plan, time_limit=float("inf"))


@pytest.mark.parametrize("replicas", [float("inf"), True, 2.5, float("nan"), 10**9])
def test_a_replica_count_that_is_not_a_whole_number_of_replicas_is_refused(replicas):
    # Issue 25 items 9 and 10: simulate_plan(replicas=inf) raised OverflowError; simulate(replicas=True) ran.
    from calculator.fleet import size_fleet
    from calculator.simulation import SimulationSetup, Traffic, simulate, simulate_plan

    plan = size_fleet(*parts(Q_(5, "request/s"), 1000, 200))
    with pytest.raises(InputError, match="argument 'replicas'"):
        simulate_plan(plan, replicas=replicas, requests=100)
    with pytest.raises(InputError, match="argument 'replicas'"):
        simulate(SimulationSetup(*SIZING), Traffic(Q_(1, "request/s"), 100, 10, requests=50), replicas=replicas)


# --------------------------------------------------------------- Hardening II: plausible registry entries

_SOURCE = "sources:\n  - {id: mine, title: Mine, url: 'file:x', kind: user}\n"
_MODEL = (
    "models:\n  - {id: m, name: m, provenance: user, parameters: %s, layers: %s, attention_heads: 64, kv_heads: 8,"
    " head_dim: 128, attention: gqa, sources: [{source: mine, fields: [parameters, layers, attention_heads, kv_heads,"
    " head_dim, attention]}]}\n"
)
_ACCELERATOR = (
    "accelerators:\n  - {id: a, name: a, vendor: x, provenance: user, memory: 80 GB, memory_nameplate: 80 GB,"
    " memory_bandwidth: %s, dense_throughput: {bf16: 989 TFLOP/s}, tdp: 700 W, sources: [{source: mine, fields:"
    " [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]}]}\n"
)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # Issue 25 item 6: all four passed `registry validate`; size then planned 1 GPU for the tiny model.
        (_MODEL % ("70e9", "100000000000000000000000000000"), "field 'layers': 1e+29 is outside the plausible range"),
        (_MODEL % ("70e9", "1000000"), "field 'layers': 1e+06 is outside the plausible range 1 to 10000"),
        (_MODEL % ("1e-300", "80"), "field 'parameters': 1e-300 is outside the plausible range 100000 to 1e+14"),
        (_ACCELERATOR % "1e-30 TB/s", "field 'memory_bandwidth': 1e-30 TB/s is outside the plausible range"),
    ],
)
def test_a_physically_absurd_registry_entry_is_refused(tmp_path, entry, message):
    path = tmp_path / "absurd.yaml"
    path.write_text(_SOURCE + entry)
    result = runner.invoke(app, ["registry", "validate", str(path)])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    plausible = tmp_path / "plausible.yaml"
    plausible.write_text(_SOURCE + (_MODEL % ("70e9", "80") if "models" in entry else _ACCELERATOR % "3.35 TB/s"))
    assert runner.invoke(app, ["registry", "validate", str(plausible)]).exit_code == 0


def test_a_result_outside_the_validated_range_carries_a_warning():
    import warnings

    from calculator.errors import ExtrapolationWarning
    from calculator.performance import predict_benchmark
    from calculator.registry import Model

    huge = Model(
        id="huge", name="huge", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
        parameters=2e12, layers=300, attention_heads=128, kv_heads=8, head_dim=128, attention="gqa",
    )  # fmt: skip
    with pytest.warns(ExtrapolationWarning, match=r"huge.parameters = 2e\+12 .*huge.layers = 300"):
        predict_benchmark(huge, "b300-sxm", "fp4", 8, 1000, 100, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtrapolationWarning)  # a packaged model and GPU: no warning
        predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 2, 1000, 100, 1)


@pytest.mark.parametrize("bad", [True, 0, 1.5, "2", float("nan"), float("inf"), -1, [2], np.array([2, 4])])
def test_pipeline_stages_refuse_what_is_not_one_whole_number(bad):
    # The pipeline_parallel keyword of the step model, the memory fit and the simulator's setup.
    from calculator.memory import model_max_batch
    from calculator.performance import decode_step_time, predict_benchmark
    from calculator.simulation import SimulationSetup

    calls = (
        lambda: decode_step_time("llama-3.1-8b", "h100-sxm", "fp8", 1, 8, 128, pipeline_parallel=bad),
        lambda: predict_benchmark("llama-3.1-8b", "h100-sxm", "fp8", 1, 128, 128, 8, pipeline_parallel=bad),
        lambda: model_max_batch("llama-3.1-8b", "h100-sxm", 1024, "fp8", "fp8", 1, pipeline_parallel=bad),
        lambda: SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", pipeline_parallel=bad),
    )
    for call in calls:
        with pytest.raises(InputError, match="pipeline_parallel"):
            call()


# ------------------------------------------------------------- Found by fuzzing the public calls (2026-12-03)


def test_a_replica_schedule_beyond_the_simulators_replicas_is_refused():
    # A schedule asking for 1e12 replicas built a scheduler per replica before the first event: the call
    # ignored its time_limit and its memory grew without bound. `simulate(replicas=...)` had the cap already.
    from calculator.simulation import Traffic

    with pytest.raises(InputError, match=r"'replica_schedule'.*10000"):
        fast(Traffic, Q_(4, "request/s"), 64, 16, requests=50, replica_schedule=(np.array([0.0]), np.array([1e12])))


@pytest.mark.parametrize(
    "trace, message",
    [
        ({"arrival_time": [0.0, math.nan], "input_tokens": [64, 64], "output_tokens": [16, 16]}, "missing values"),
        ({"arrival_time": [0.0, 1.0], "input_tokens": [64, 0], "output_tokens": [16, 16]}, "below one token"),
        ({"input_tokens": [64], "output_tokens": [16]}, "lacks column"),
        ({"arrival_time": [], "input_tokens": [], "output_tokens": []}, "no requests"),
    ],
)
def test_a_trace_given_to_traffic_directly_is_checked_as_from_trace_checks_it(trace, message):
    # Traffic(trace=...) took any frame: a NaN arrival ended in an IndexError deep in the event loop, lengths
    # of 0 in NaN summaries, a missing column in a KeyError.
    import pandas as pd

    from calculator.simulation import Traffic

    with pytest.raises(InputError, match=message):
        Traffic(trace=pd.DataFrame(trace), requests=2)


@pytest.mark.parametrize("missing", ["ttft", "tpot"])
def test_targets_need_both_latency_bounds(missing):
    # Targets(Q_(1, "s"), None) was accepted and size_fleet then failed on `None.m_as` (only the stall bound,
    # tbt, is optional).
    bounds = {"ttft": Q_(1, "s"), "tpot": Q_(50, "ms"), missing: None}
    with pytest.raises(InputError, match=f"'{missing}'"):
        c.Targets(**bounds)


def test_predict_benchmark_names_arrays_that_do_not_broadcast():
    # Prompt and output arrays of two and three lengths ended in numpy's "operands could not be broadcast".
    with pytest.raises(InputError, match="'input_tokens' 2 values, 'output_tokens' 3 values"):
        c.predict_benchmark(*SIZING[:1], "h100-sxm", "bf16", 1, np.array([1024, 2048]), np.array([1, 2, 3]), 8)


def test_predict_benchmark_takes_numpy_numbers_for_its_settings():
    # requests_per_client=np.int64(10) and length_cv=np.float32(0.1) were refused as not numbers.
    p = c.predict_benchmark(*SIZING[:1], "h100-sxm", "bf16", 1, 1024, 128, 8, "vllm",
                            requests_per_client=np.int64(10), length_cv=np.float32(0.1))  # fmt: skip
    q = c.predict_benchmark(*SIZING[:1], "h100-sxm", "bf16", 1, 1024, 128, 8, "vllm", length_cv=0.1)
    assert p.ttft.m_as("s") == pytest.approx(q.ttft.m_as("s"), rel=1e-6)


@pytest.mark.parametrize(
    "field, bad",
    [("tensor_parallel", "abc"), ("tensor_parallel", math.nan), ("tensor_parallel", 1.5), ("tensor_parallel", True),
     ("data_parallel", 0), ("pipeline_parallel", math.inf)],
)  # fmt: skip
def test_a_simulation_setup_names_a_parallel_degree_that_is_not_a_whole_number(field, bad):
    # tensor_parallel='abc' or NaN ended in int()'s ValueError, 1.5 silently ran as 1, and data_parallel=0 in a
    # ZeroDivisionError once simulate sized the ranks.
    from calculator.simulation import SimulationSetup

    with pytest.raises(InputError, match=f"'{field}'"):
        SimulationSetup(*SIZING, **{field: bad})
    assert SimulationSetup(*SIZING, tensor_parallel=2.0).tensor_parallel == 2  # a whole float is a whole number


@pytest.mark.parametrize("seeds", [[-1], 1.5, "a", [True], [0.5]])
def test_simulate_names_seeds_that_are_not_whole_numbers(seeds):
    # seeds=[-1] ended in numpy's "expected non-negative integer", 1.5 in "'float' object is not iterable".
    from calculator.simulation import SimulationSetup, Traffic, simulate

    with pytest.raises(InputError, match="'seeds'"):
        simulate(SimulationSetup(*SIZING), Traffic(Q_(4, "request/s"), 64, 16, requests=10), seeds=seeds)


@pytest.mark.parametrize("bad", [1.0, "vllm", np.array([1, 2])])
def test_predict_benchmark_names_an_efficiency_that_is_not_one(bad):
    # efficiency=1.0 ended in AttributeError ('float' has no 'fixed_seconds'), an array in numpy's ambiguous truth.
    with pytest.raises(InputError, match="'efficiency'"):
        c.predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 128, 8, efficiency=bad)


def test_batch_caps_above_the_kv_cache_are_not_reported_as_weights_that_do_not_fit():
    # Caps of 16,000 sequences for Llama-3.1-8B FP8 on H100s: the reason said the weights and one sequence's
    # KV cache exceed the memory (1.1 GB of weights against 75 GB usable), where one sequence fits and the
    # caps searched are above what the cache holds.
    plan = c.size_fleet(
        "llama-3.1-8b", c.Workload(Q_(10, "request/s"), 1024, 256), c.Targets(Q_(1, "s"), Q_(50, "ms")),
        c.SearchSpace("h100-sxm", "fp8", batches=(16000,)),
    )  # fmt: skip
    assert not plan.feasible
    assert "search smaller caps" in plan.reason and "weights" not in plan.reason
    assert {r.code for r in plan.rejections} == {"batch"}


def test_a_workload_takes_one_arrival_rate():
    # An array of rates ended in numpy's "truth value of an array is ambiguous".
    with pytest.raises(InputError, match="'arrival_rate' must be one rate"):
        c.Workload(np.array([1.0, 2.0]) * c.ureg("request/s"), 1024, 256)


@pytest.mark.parametrize(
    "argument, value", [("decode", math.nan), ("decode", -1), ("context", math.inf), ("prefill", -5)]
)
def test_iteration_seconds_names_a_count_that_is_not_finite_and_non_negative(argument, value):
    # decode=NaN returned NaN, decode=-1 a plausible-looking 5.5 ms, None NaN.
    from calculator.performance import engine_profile, iteration_seconds, step_arrays

    a = step_arrays("llama-3.1-8b", "h100-sxm", "bf16")
    eff = engine_profile("vllm").efficiency_for("h100-sxm")
    counts = {"decode": 8, "context": 1024, "prefill": 0} | {argument: value}
    with pytest.raises(InputError, match=f"'{argument}'"):
        iteration_seconds(a, eff, 1, **counts)


def test_simulate_checks_progress_and_the_clients_before_it_runs():
    # progress=1 failed only after the whole simulation had run; Traffic(clients=True) ran one client.
    from calculator.simulation import SimulationSetup, Traffic, simulate

    with pytest.raises(InputError, match="'progress'"):
        fast(simulate, SimulationSetup(*SIZING), Traffic(Q_(4, "request/s"), 64, 16, requests=10), progress=1)
    with pytest.raises(InputError, match="'clients'"):
        Traffic(clients=True, input_tokens=64, output_tokens=16, requests=10)


def test_a_plan_that_nothing_holds_names_no_closest_values():
    # Llama-3.1-405B in BF16 on one TP-1 H100: no candidate holds the weights, and `closest` held TTFT and
    # TPOT of inf seconds (JSON has no infinity).
    plan = c.size_fleet(
        "llama-3.1-405b", c.Workload(Q_(1, "request/s"), 1024, 256), c.Targets(Q_(1, "s"), Q_(50, "ms")),
        c.SearchSpace("h100-sxm", "bf16", tensor_parallel=(1,)),
    )  # fmt: skip
    assert not plan.feasible and plan.closest == {}
    assert "holds the weights" in plan.reason
    assert plan.to_json_dict()["closest"] == {}


@pytest.mark.parametrize(
    "argument, value",
    [("input_tokens", math.nan), ("output_tokens", 0), ("concurrency", -4), ("client_overhead", math.inf),
     ("length_cv", -0.1), ("length_cv", 1e6), ("tp", math.nan)],
)  # fmt: skip
def test_closed_loop_seconds_names_an_array_that_is_not_a_count(argument, value):
    # The plain-array closed loop (exported for notebooks and the calibration) took NaN prompts and returned
    # NaN TTFTs, and a negative concurrency a plausible-looking prediction.
    from calculator.performance import closed_loop_seconds, engine_profile, step_arrays

    a = step_arrays("llama-3.1-8b", "h100-sxm", "bf16")
    arguments = {"tp": 1, "input_tokens": 1024, "output_tokens": 128, "concurrency": 8} | {argument: value}
    with pytest.raises(InputError, match=f"closed_loop_seconds\\(\\): argument '{argument}'"):
        closed_loop_seconds(a, engine_profile("vllm"), **arguments)


def test_a_benchmark_takes_the_length_spread_a_workload_takes():
    # predict_benchmark took length_cv=1e6 where Workload and the sizer stop at 100 (traces measure 0.5-5).
    arguments = ("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 128, 8)
    with pytest.raises(InputError, match=r"'length_cv' must be a number in \[0, 100\]"):
        c.predict_benchmark(*arguments, engine="vllm", length_cv=1e6)
    with pytest.raises(InputError, match="at most 100"):
        c.Workload(Q_(1, "request/s"), 1024, 128, output_cv=1e6)
    assert c.predict_benchmark(*arguments, engine="vllm", length_cv=100).ttft.m > 0


def test_iteration_seconds_wants_the_prompts_its_prefill_tokens_belong_to():
    # prefill=1024 with the default requests=0 priced one prompt of 10^12 tokens: 447,757 s for a 21 ms step.
    from calculator.performance import engine_profile, iteration_seconds, step_arrays

    a = step_arrays("llama-3.1-8b", "h100-sxm", "bf16")
    eff = engine_profile("vllm").efficiency_for("h100-sxm")
    for requests in (0, 1e-6):
        with pytest.raises(InputError, match="'requests' must be at least 1 where 'prefill' > 0"):
            iteration_seconds(a, eff, 1, 0, prefill=1024, requests=requests)
    assert float(iteration_seconds(a, eff, 1, 0, prefill=1024, requests=1)) < 0.1
    with pytest.raises(InputError, match="argument 'eff' must be of type Efficiency"):
        iteration_seconds(a, None, 1, 8, 1024)
    with pytest.raises(InputError, match="argument 'a' must be a StepArrays"):
        iteration_seconds(None, eff, 1, 8, 1024)


def test_closed_loop_seconds_names_an_empty_array_a_misshapen_arrivals_and_a_missing_profile():
    # An empty prompt array ended in numpy's zero-size reduction, arrivals over three rows of two in a broadcast
    # error, and profile=None in AttributeError.
    from calculator.performance import closed_loop_seconds, engine_profile, step_arrays

    a, profile = step_arrays("llama-3.1-8b", "h100-sxm", "bf16"), engine_profile("vllm")
    with pytest.raises(InputError, match="must not be empty"):
        closed_loop_seconds(a, profile, 1, np.array([]), 128, 8)
    with pytest.raises(InputError, match="'arrivals'"):
        closed_loop_seconds(a, profile, 1, np.array([512, 1024]), 128, 8, arrivals=np.array([True, False, True]))
    with pytest.raises(InputError, match="argument 'profile' must be of type EngineProfile"):
        closed_loop_seconds(a, None, 1, 1024, 128, 8)


def test_an_infeasible_plans_closest_values_are_one_configurations():
    # Bursty traffic (arrival CV 50) on H100s: the reason said "closest achievable: TTFT 246 ms, TPOT 2.8 ms",
    # each within its target (then 1 s, 50 ms) but reached by different batch caps, none meeting both. Since the
    # sizer adds replicas past the headroom (issue 53, monotone in the cap), a 1 s TTFT is met on enough replicas;
    # 20 ms is below any replica's unloaded TTFT here, so the plan is still infeasible.
    ttft = Q_(20, "ms")
    plan = c.size_fleet(
        "llama-3.1-8b", c.Workload(Q_(5, "request/s"), 1024, 256, arrival_cv=50), c.Targets(ttft, Q_(50, "ms")),
        c.SearchSpace("h100-sxm", "fp8"),
    )  # fmt: skip
    assert not plan.feasible and "closest achievable" in plan.reason
    ratios = plan.closest["ttft"] / ttft, plan.closest["tpot"] / Q_(50, "ms")
    assert max(float(r.m_as("")) for r in ratios) > 1  # one configuration's pair misses at least one target


# ------------------------------------------------------------------ Found by fuzzing the sweeps (2026-12-04)

FLEET_POINT = (Q_(5, "request/s"), 1024, 256, Q_(1, "s"), Q_(50, "ms"))
KV_GRID = {"layers": 80, "kv_heads": [8, 64], "head_dim": 128, "bytes_per_element": Q_([1, 2], "B")}


def test_sweep_units_are_read_by_the_safe_unit_parser():
    # units={"ttft": "9**9**9*s"} hung in pint's parser at the first conversion, in sweep and in sweep_fleet.
    from calculator.sweeps import sweep, sweep_fleet

    with pytest.raises(UnitsError, match=r"sweep_fleet\(\): units\['ttft'\]: expected a unit"):
        fast(sweep_fleet, *SIZING, *FLEET_POINT, units={"ttft": "9**9**9*s"})
    with pytest.raises(UnitsError, match=r"sweep\(\): units\['kv_bytes_per_token'\]: expected a unit"):
        fast(sweep, "memory.kv_bytes_per_token", units={"kv_bytes_per_token": "9**9**9*B/token"}, **KV_GRID)


def test_sweep_units_of_the_wrong_kind_name_the_column():
    # A unit of another dimension ended in pint's DimensionalityError, 5 or None in an AttributeError inside pint,
    # and units="ms" on sweep was read as a mapping (a substring test).
    from calculator.sweeps import sweep, sweep_fleet

    for units, error, message in [
        ({"service.ttft": "GB"}, UnitsError, r"units\['service.ttft'\] needs dimension \[time\].*got 'GB'"),
        ({"arrival_rate": "s"}, UnitsError, r"units\['arrival_rate'\] needs dimension 1 / \[time\]"),
        ({"service.ttft": 5}, UnitsError, r"units\['service.ttft'\]: expected a unit like 'GB'.*got 5"),
        ({"service.ttft": None}, UnitsError, r"units\['service.ttft'\]: expected a unit like 'GB'.*got None"),
        (["service.ttft"], InputError, "argument 'units' must be a mapping"),
    ]:
        with pytest.raises(error, match=message):
            sweep_fleet(*SIZING, *FLEET_POINT, units=units)
    with pytest.raises(UnitsError, match=r"sweep\(kv_bytes_per_token\): units\['kv_bytes_per_token'\] needs dimension"):
        sweep("memory.kv_bytes_per_token", units={"kv_bytes_per_token": "s"}, **KV_GRID)
    with pytest.raises(InputError, match="argument 'units' must be a mapping"):
        sweep("memory.kv_bytes_per_token", units="ms", **KV_GRID)


def test_sweep_units_name_a_column_and_a_range_is_an_axis():
    # A units= key that named no column (a typo) was silently ignored, and a range was taken as one value.
    from calculator.sweeps import sweep, sweep_fleet

    with pytest.raises(InputError, match=r"units= names no column: \['kv_bytes_per_tokn'\]"):
        sweep("memory.kv_bytes_per_token", units={"kv_bytes_per_tokn": "KiB/token"}, **KV_GRID)
    with pytest.raises(InputError, match=r"sweep_fleet\(\): units= names no column: \['ttf'\]"):
        sweep_fleet(*SIZING, *FLEET_POINT, units={"ttf": "s"})
    frame = sweep("memory.kv_bytes_per_token", **(KV_GRID | {"layers": range(78, 81)}))
    assert sorted(set(frame.layers)) == [78, 79, 80] and len(frame) == 12
    fleet = sweep_fleet(*SIZING, *FLEET_POINT, max_utilization=[0.7], units={"service.ttft": "s"})
    assert fleet["service.ttft [s]"].iloc[0] < 1
    with pytest.raises(InputError, match="non-empty 1-D list"):
        sweep("memory.kv_bytes_per_token", **(KV_GRID | {"layers": range(0)}))


def test_sweep_axes_are_checked_value_by_value():
    # A list axis mixing dimensions ended in pint's DimensionalityError (in sweep, even a list of one dimension
    # did), a set in a TypeError inside formula.py, an unknown option in "got an unexpected keyword argument",
    # registry="x" in an AttributeError.
    from calculator.sweeps import sweep, sweep_fleet

    rate, tokens, times = FLEET_POINT[0], FLEET_POINT[1:3], FLEET_POINT[3:]
    with pytest.raises(UnitsError, match=r"'arrival_rate' needs every value in one dimension, 1 / \[time\].*60 GB"):
        sweep_fleet(*SIZING, [Q_(1, "request/s"), Q_(60, "GB")], *tokens, *times)
    with pytest.raises(UnitsError, match=r"'ttft_slo' needs every value in one dimension, \[time\]"):
        sweep_fleet(*SIZING, rate, *tokens, [Q_(1, "s"), Q_(60, "GB")], Q_(50, "ms"))
    with pytest.raises(UnitsError, match=r"sweep\(erlang_c\): argument 'arrival_rate' needs every value"):
        sweep(c.erlang_c, arrival_rate=[Q_(1, "request/s"), Q_(1, "GB")], service_time=Q_(1, "s"), servers=4)
    with pytest.raises(InputError, match="'input_tokens': an axis must be a list, tuple or array, got a set"):
        sweep_fleet(*SIZING, rate, {512, 1024}, 256, *times)
    with pytest.raises(InputError, match=r"unknown option\(s\) \['bogus'\], not size_fleet options.*'price'"):
        sweep_fleet(*SIZING, *FLEET_POINT, bogus=1)
    with pytest.raises(InputError, match=r"argument 'registry' must be a Registry \(load_registry\(\)\) or None"):
        sweep_fleet(*SIZING, *FLEET_POINT, registry="x")
    with pytest.raises(InputError, match="'kv_heads' must be a value or a non-empty 1-D list"):
        sweep("memory.kv_bytes_per_token", **KV_GRID | {"kv_heads": [[8, 64], [1]]})  # ragged: numpy's ValueError
    # A list of quantities of one dimension is an axis, in its first value's unit.
    frame = sweep(
        c.erlang_c, arrival_rate=[Q_(1, "request/s"), Q_(120, "request/min")], service_time=Q_(1, "s"), servers=4
    )
    assert list(frame["arrival_rate [request/s]"]) == [1, 2]


def test_a_token_count_that_is_not_a_number_is_an_input_error():
    # Workload(rate, {512, 1024}, 256) (and size_fleet with a set of input_tokens) raised float()'s TypeError.
    with pytest.raises(InputError, match="'input_tokens' must be numeric"):
        c.Workload(Q_(5, "request/s"), {512, 1024}, 256)


def test_a_sweep_grid_is_bounded_before_it_is_built():
    # 1,000 values on each of three axes tried to allocate 7.45 GiB for the mesh (a MemoryError, or the machine's
    # memory); sweep_fleet built the list of every point first.
    from calculator.sweeps import sweep, sweep_fleet

    axis = list(range(1, 1001))
    with pytest.raises(
        InputError, match=r"1,000 x 1,000 x 1,000 = 1,000,000,000 points; a sweep takes at most 10,000,000"
    ):
        fast(
            sweep, "memory.kv_bytes_per_token", layers=axis, kv_heads=axis, head_dim=axis, bytes_per_element=Q_(1, "B")
        )
    with pytest.raises(InputError, match="points; a sweep takes at most"):
        fast(sweep_fleet, *SIZING, Q_(axis, "request/s"), axis, axis, *FLEET_POINT[3:])
    # a fleet sweep sizes each point (about 14 ms and 7 kB a row): 10^7 points were accepted (days, 70 GB)
    with pytest.raises(InputError, match=r"1,000 x 200 = 200,000 points; a sweep takes at most 100,000"):
        fast(sweep_fleet, *SIZING, Q_(axis, "request/s"), list(range(1, 201)), *FLEET_POINT[2:])


def test_the_frontier_refuses_requests_beyond_the_models_context():
    # 200,000-token prompts on Llama-3.1-8B (131,072 tokens of context): the frontier printed rows (TTFTs up to
    # 1,088 s) where size refuses the workload.
    from calculator.fleet import frontier

    with pytest.raises(InputError, match=r"exceeds llama-3\.1-8b's context limit of 131,072 tokens"):
        frontier("llama-3.1-8b", "h100-sxm", "fp8", 200_000, 256)
    result = CliRunner().invoke(app, ["frontier", "llama-3.1-8b", "--input", "200000", "--output", "256"])
    assert result.exit_code == 2 and "context limit" in result.output and "Traceback" not in result.output


def test_a_workload_of_almost_no_traffic_is_refused_before_its_costs_overflow():
    # --rate 1e-307 exited 0 with energy and electricity per million output tokens of Infinity (invalid JSON).
    with pytest.raises(InputError, match="'arrival_rate' must be at least 1e-06 request/s"):
        c.Workload(Q_(1e-307, "request/s"), 1024, 256)
    args = ["size", "llama-3.1-8b", "--rate", "1e-307", "--input", "1024", "--output", "256", "--ttft", "1 s"]
    result = CliRunner().invoke(app, [*args, "--tpot", "50 ms", "--json"])
    assert result.exit_code == 2 and "arrival_rate" in result.output and "Infinity" not in result.output
    plan = c.size_fleet(
        "llama-3.1-8b", c.Workload(Q_(1e-6, "request/s"), 1024, 256), c.Targets(Q_(1, "s"), Q_(50, "ms")),
        c.SearchSpace("h100-sxm", "fp8"),
    )  # fmt: skip
    assert plan.feasible and np.isfinite(plan.energy.per_million_output_tokens.magnitude)


def test_a_memory_rejection_counts_the_draft_models_weights():
    # A 405B draft for an 8B target on one H100: the reason said "8.6 GB of weights ... exceed the 75.3 GB usable",
    # false as written: the draft's weights, which the capacity did subtract, were not in it.
    from calculator.fleet import ServingOptions, Speculation

    plan = c.size_fleet(
        "llama-3.1-8b", c.Workload(Q_(5, "request/s"), 1024, 256), c.Targets(Q_(1, "s"), Q_(50, "ms")),
        c.SearchSpace("h100-sxm", "fp8", tensor_parallel=(1,)),
        serving=ServingOptions(speculation=Speculation("llama-3.1-405b")),
    )  # fmt: skip
    (rejection,) = plan.rejections
    assert rejection.code == "memory" and rejection.values["weights_per_device"] > Q_(400, "GB")


def test_a_sweep_with_an_infeasible_point_has_no_empty_interval_columns():
    # An infeasible point's intervals (None) added ttft_interval, tpot_interval and gpus_interval columns, NaN in
    # every row, beside the feasible points' .low/.high columns.
    from calculator.sweeps import sweep_fleet

    frame = sweep_fleet(
        "llama-3.1-8b", "h100-sxm", "fp8", Q_([1, 1e9], "request/s"), 1024, 256, Q_(1, "s"), Q_(50, "ms")
    )
    intervals = [name for name in frame.columns if "interval" in name]
    assert all(".low" in name or ".high" in name for name in intervals) and len(intervals) == 6
    assert frame["feasible"].tolist() == [True, False] and frame[intervals].iloc[1].isna().all()


def test_a_ragged_list_for_one_number_is_named():
    # Workload(rate, [[1, 2], [3]], 256) ended in numpy's "inhomogeneous shape" ValueError.
    with pytest.raises(InputError, match="'input_tokens' must be one number"):
        c.Workload(Q_(1, "request/s"), [[1, 2], [3]], 256)
