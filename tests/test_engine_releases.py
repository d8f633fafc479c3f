"""Engine releases (issue 53, item 1): a profile priced as one release runs that release's dated mechanisms, and
says whether the fit saw benchmarks of it; the interval keeps its unseen-release term only where it did not."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from calculator.calibration import CALIBRATION_DIR
from calculator.cli import app
from calculator.errors import InputError
from calculator.performance import engine_profile, predict_benchmark, release_numbers
from calculator.uncertainty import prediction_interval

CASE = ("llama-3.1-70b", "h100-sxm", "fp8", 2, 1024, 1024, 32)


def test_a_release_before_the_change_runs_the_old_mechanisms():
    # vLLM's registry entry dates both changes at 0.14 (asynchronous scheduling, the checkpoint's KV declaration):
    # release 0.12 is the synchronous scheduler with a BF16 cache for FP8 weights, 0.14 the current defaults.
    old = predict_benchmark(*CASE, engine=engine_profile("vllm").for_release("0.12"))
    by_hand = predict_benchmark(*CASE, engine=engine_profile("vllm").with_async_scheduling(False), kv_precision="bf16")
    assert old.kv_precision == "bf16"
    assert old.tpot.m_as("s") == pytest.approx(by_hand.tpot.m_as("s"), rel=1e-12)
    assert old.ttft.m_as("s") == pytest.approx(by_hand.ttft.m_as("s"), rel=1e-12)
    new = predict_benchmark(*CASE, engine=engine_profile("vllm").for_release("0.14.1"))
    current = predict_benchmark(*CASE, engine="vllm")
    assert new.kv_precision == "fp8"
    assert new.tpot.m_as("s") == pytest.approx(current.tpot.m_as("s"), rel=1e-12)
    assert old.tpot > new.tpot  # the synchronous loop adds its fixed costs and reads twice the KV bytes


def test_an_engine_without_dated_changes_keeps_its_mechanisms():
    profile = engine_profile("trtllm")
    release = profile.for_release("1.3")
    assert (release.overlap_scheduler, release.efficiency, release.quantized_kv_precision) == (
        profile.overlap_scheduler,
        profile.efficiency,
        profile.quantized_kv_precision,
    )


@pytest.mark.parametrize(
    ("engine", "version", "fitted"),
    [("trtllm", "1.2", True), ("trtllm", "1.2.0", True), ("trtllm", "1.2.1", False), ("trtllm", "1.3", False),
     ("sglang", "0.5.8", True), ("sglang", "0.5.9", False), ("vllm", "0.12", True), ("vllm", "0.14", False)],
)  # fmt: skip
def test_whether_the_fit_saw_a_release(engine, version, fitted):
    assert engine_profile(engine).for_release(version).release_fitted is fitted


def test_an_unstated_release_is_not_a_fitted_one():
    assert engine_profile("vllm").release_fitted is False
    assert engine_profile("vllm").release_note() == ""


def test_the_registry_names_the_releases_of_the_fitted_campaigns():
    import pandas as pd

    rows = pd.read_csv(CALIBRATION_DIR / "serving_benchmarks_h100.csv")
    for engine, versions in rows.groupby(rows.backend.str.lower()).backend_version:
        recorded = {release_numbers(v) for v in versions.dropna().astype(str) if v[:1].isdigit()}
        assert {release_numbers(v) for v in engine_profile(engine).fitted_releases} == recorded, engine


def test_the_interval_drops_the_unseen_release_term_only_for_a_fitted_release():
    unstated = prediction_interval("vllm", "h100-sxm", True)
    fitted = prediction_interval("vllm", "h100-sxm", True, fitted_release=True)
    for metric in ("ttft", "tpot"):
        assert fitted[metric][0] > unstated[metric][0] and fitted[metric][1] < unstated[metric][1], metric
    seen = predict_benchmark(*CASE, engine=engine_profile("vllm").for_release("0.12"))
    ratio = seen.tpot_interval[1] / seen.tpot
    assert float(ratio) == pytest.approx(fitted["tpot"][1], rel=1e-12)
    unseen = predict_benchmark(*CASE, engine=engine_profile("trtllm").for_release("1.3"))
    assert float(unseen.tpot_interval[1] / unseen.tpot) == pytest.approx(
        prediction_interval("trtllm", "h100-sxm", True)["tpot"][1], rel=1e-12
    )


def test_a_release_outside_the_fit_says_so_in_the_caveats():
    unseen = predict_benchmark(*CASE, engine=engine_profile("trtllm").for_release("1.3"))
    (note,) = [c for c in unseen.caveats() if "release 1.3" in c]
    assert "no benchmark of this release is in the fit" in note and "1.0.0, 1.2.0" in note
    seen = predict_benchmark(*CASE, engine=engine_profile("trtllm").for_release("1.2"))
    assert not [c for c in seen.caveats() if "release" in c]
    assert seen.release_fitted and "fitted on its benchmarks" in seen.release_note


def test_vllm_runs_a_separate_draft_model_from_0_15():
    # config/speculative.py: 0.14.0 raises NotImplementedError for a draft model, 0.15.0 detects and runs it
    vllm = engine_profile("vllm")
    assert vllm.draft_model_speculation and vllm.for_release("0.15").draft_model_speculation
    assert not vllm.for_release("0.14.1").draft_model_speculation


def test_a_release_before_the_kv_declaration_runs_bf16_whatever_the_checkpoint_declares():
    # NVIDIA's NVFP4 Qwen3-235B declares an FP8 cache: vLLM 0.14 on takes it, 0.12 runs the model dtype
    from calculator.performance import kv_cache_precision

    vllm = engine_profile("vllm")
    assert kv_cache_precision("qwen3-235b-a22b", "b200-sxm", "fp4", vllm.for_release("0.14")) == "fp8"
    assert kv_cache_precision("qwen3-235b-a22b", "b200-sxm", "fp4", vllm.for_release("0.12")) == "bf16"


@pytest.mark.parametrize("version", ["x1", "", None, 1.2, "rc1", "1", "0"])
def test_a_release_that_is_not_one_is_refused(version):
    with pytest.raises(InputError, match="argument 'version' must"):
        engine_profile("vllm").for_release(version)


def test_the_command_line_prices_a_release():
    runner = CliRunner()
    args = ["predict", "llama-3.1-70b", "--input", "1024", "--output", "1024", "-c", "32", "-p", "fp8", "--tp", "2"]
    out = runner.invoke(app, [*args, "--engine", "vllm", "--engine-version", "0.12"])
    assert out.exit_code == 0, out.output
    assert "KV cache bf16" in out.output and "release: vllm release 0.12" in out.output
    unseen = runner.invoke(app, [*args, "--engine", "trtllm", "--engine-version", "1.3"])
    assert unseen.exit_code == 0 and "no benchmark of this release is in the fit" in unseen.output
    alone = runner.invoke(app, [*args, "--engine-version", "0.12"])
    assert alone.exit_code != 0 and "--engine-version needs --engine" in alone.output
    bad = runner.invoke(app, [*args, "--engine", "vllm", "--engine-version", "new"])
    assert bad.exit_code != 0 and "argument 'version' must be a release" in bad.output


def test_a_plan_keeps_the_release_it_was_priced_as():
    import json

    from calculator import Q_, FleetPlan, SearchSpace, Targets, Workload, launch_command, size_fleet
    from calculator.simulation import plan_setup

    workload, targets = Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms"))
    old = size_fleet("llama-3.1-8b", workload, targets, SearchSpace("h100-sxm", "fp8"),
                     engine=engine_profile("vllm").for_release("0.12"))  # fmt: skip
    assert old.feasible and old.engine == "vllm" and old.engine_release == "0.12"
    # its command asks for what it priced: 0.12's synchronous scheduling (no --async-scheduling), and the
    # simulator checks it as 0.12
    assert "--async-scheduling" not in launch_command(old, "vllm").arguments
    assert plan_setup(old).engine_release == "0.12"
    assert FleetPlan.from_json_dict(json.loads(json.dumps(old.to_json_dict()))).engine_release == "0.12"
    current = size_fleet("llama-3.1-8b", workload, targets, SearchSpace("h100-sxm", "fp8"), engine="vllm")
    assert current.engine_release is None and "--async-scheduling" in launch_command(current, "vllm").arguments


def test_the_registry_records_the_largest_batch_each_engine_was_fitted_on():
    import pandas as pd

    rows = pd.read_csv(CALIBRATION_DIR / "serving_benchmarks_h100.csv")
    for engine, batches in rows.groupby(rows.backend.str.lower()).batch_size:
        assert engine_profile(engine).fitted_batch == int(batches.max()), engine


def test_a_batch_beyond_the_fit_says_so_and_widens_the_low_end_only():
    # TensorRT-LLM's costs were fitted on at most 224 clients. Llama-3.1-8B BF16 on one H100 at 1,024/256
    # tokens: 64 clients stay inside the fit, 1,024 run beyond it (the cache holds them: 1,024 x 1,280 tokens
    # x 128 KiB is 172 GB, beyond one H100, so the batch is the cache's, still above 224).
    profile = engine_profile("trtllm")
    inside = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, 64, engine=profile)
    assert not [c for c in inside.caveats() if "fitted on benchmarks of at most" in c]
    band = prediction_interval("trtllm", "h100-sxm", True)
    assert float(inside.tpot_interval[0] / inside.tpot) == pytest.approx(band["tpot"][0], rel=1e-12)

    beyond = predict_benchmark("llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, 1024, engine=profile)
    batch = float(beyond.active_batch)
    assert batch > 224
    (note,) = [c for c in beyond.caveats() if "fitted on benchmarks of at most 224" in c]
    assert "extrapolated" in note
    # The low end: the same prediction with the per-sequence cost scaled so the batch pays what 224 sequences
    # paid, priced through the public API with that efficiency, times the band's low factor.
    eff = profile.efficiency_for("h100_sxm")
    capped = predict_benchmark(
        "llama-3.1-8b", "h100-sxm", "bf16", 1, 1024, 256, 1024, engine=profile,
        efficiency=eff.replace(sequence_overhead=eff.sequence_overhead * 224 / batch),
    )  # fmt: skip
    assert capped.tpot < beyond.tpot
    assert beyond.tpot_interval[0].m_as("s") == pytest.approx(capped.tpot.m_as("s") * band["tpot"][0], rel=1e-9)
    assert beyond.tpot_interval[1].m_as("s") == pytest.approx(beyond.tpot.m_as("s") * band["tpot"][1], rel=1e-12)


def test_a_plan_beyond_the_fit_widens_its_gpu_interval_low_end_only():
    # The sizer's interval as the predictor's: a plan whose replicas run more sequences than the engine's costs
    # were fitted on reruns its low end with the per-sequence cost stopped at the fitted batch. gpt-oss-20b FP4
    # on B200s at 500 request/s of 1,024/1,024 tokens, loaded to 95 %: about 480 (TensorRT-LLM) and 690 (SGLang)
    # running sequences a replica, beyond the 224 and 128 their costs were fitted on.
    from calculator import Q_
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

    def plans(engine, workload, targets):
        profile = engine_profile(engine)
        space = SearchSpace("b200", "fp4")
        unwidened = profile.replace(fitted_batch=None)
        return profile, *(size_fleet("gpt-oss-20b", workload, targets, space, engine=p) for p in (profile, unwidened))

    workload = Workload(Q_(500, "request/s"), 1024, 1024)
    for engine in ("trtllm", "sglang"):
        profile, plan, unwidened = plans(engine, workload, Targets(Q_(10, "s"), Q_(200, "ms"), max_utilization=0.95))
        assert plan.service.running_batch > profile.fitted_batch
        assert (plan.gpus, plan.batch) == (unwidened.gpus, unwidened.batch)  # the plan itself does not move
        assert plan.gpus_interval[0] < unwidened.gpus_interval[0] <= plan.gpus, engine
        assert plan.gpus_interval[1] == unwidened.gpus_interval[1], engine
    # Within the fit nothing moves: loaded to 80 %, TensorRT-LLM's replicas run about 210 sequences.
    profile, plan, unwidened = plans("trtllm", workload, Targets(Q_(10, "s"), Q_(200, "ms")))
    assert plan.service.running_batch <= profile.fitted_batch < plan.batch
    assert plan.gpus_interval == unwidened.gpus_interval


def test_the_widened_low_end_counts_a_ranks_sequences_and_a_per_gpu_calibration():
    from calculator import Q_
    from calculator.fleet import SearchSpace, Targets, Workload, size_fleet

    # Attention data parallelism: DeepSeek-V3 FP8 on H200s at 100 request/s runs about 790 sequences a replica over
    # eight attention ranks, about 98 each, under the 224 TensorRT-LLM's costs were fitted on: nothing widens.
    workload, targets = Workload(Q_(100, "request/s"), 1024, 1024), Targets(Q_(5, "s"), Q_(100, "ms"))
    profile = engine_profile("trtllm")
    space = SearchSpace("h200-sxm", "fp8")
    plan = size_fleet("deepseek-v3", workload, targets, space, engine=profile)
    assert plan.layout.data_parallel == 8 and plan.service.running_batch > 224 > plan.service.running_batch / 8
    unwidened = size_fleet("deepseek-v3", workload, targets, space, engine=profile.replace(fitted_batch=None))
    assert plan.gpus_interval == unwidened.gpus_interval
    from calculator.fleet import interval_note

    assert interval_note(plan) == ""  # nothing to say: each rank runs within the fit
    # A user calibration's costs for one accelerator (EngineProfile.per_accelerator) are the ones scaled: at a GPU
    # factor of 1 the widened interval is the packaged profile's.
    workload = Workload(Q_(500, "request/s"), 1024, 1024)
    targets = Targets(Q_(10, "s"), Q_(200, "ms"), max_utilization=0.95)
    packaged = size_fleet("gpt-oss-20b", workload, targets, SearchSpace("b200", "fp4"), engine=profile)
    calibrated = profile.with_gpu_time_scale(packaged.accelerator, 1.0)
    assert packaged.accelerator in calibrated.per_accelerator
    again = size_fleet("gpt-oss-20b", workload, targets, SearchSpace("b200", "fp4"), engine=calibrated)
    assert again.gpus_interval == packaged.gpus_interval and again.gpus_interval[0] < packaged.gpus


def test_a_plan_beyond_the_fit_says_why_its_interval_reaches_low():
    # interval_note, in the CLI's answer and on the Fleet sizer page: the words beside the widened low end.
    from calculator import Q_
    from calculator.fleet import SearchSpace, Targets, Workload, interval_note, size_fleet

    workload = Workload(Q_(500, "request/s"), 1024, 1024)
    loaded = Targets(Q_(10, "s"), Q_(200, "ms"), max_utilization=0.95)
    plan = size_fleet("gpt-oss-20b", workload, loaded, SearchSpace("b200", "fp4"), engine="trtllm")
    note = interval_note(plan)
    assert "at most 224 sequences a replica" in note and f"about {plan.service.running_batch:,.0f} a replica" in note
    within = size_fleet("gpt-oss-20b", workload, Targets(Q_(10, "s"), Q_(200, "ms")), SearchSpace("b200", "fp4"),
                        engine="trtllm")  # fmt: skip
    assert within.service.running_batch <= 224 and interval_note(within) == ""
    args = ["size", "gpt-oss-20b", "--rate", "500", "--input", "1024", "--output", "1024", "--ttft", "10s",
            "--tpot", "200ms", "-a", "b200", "-p", "fp4", "--engine", "trtllm", "--max-utilization", "0.95"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"note: {note}" in result.output
