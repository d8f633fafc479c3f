"""Copies of experts in the fleet sizer: the fewest an even-placement engine needs, priced, recorded and launched.

Qwen3-Coder-480B has 160 routed experts and 96 attention heads, so the sizer may search 12 GPUs a replica (12
divides 96) while 12 does not divide 160: SGLang asserts num_physical_experts % ep_size == 0
(srt/eplb/expert_location.py, 0.5.9) and TensorRT-LLM num_slots % ep_size == 0 (MoeLoadBalancerConfig.setup),
so each needs 160 + R divisible by 12; the fewest R is 8 (160 = 13 x 12 + 4, 12 - 4 = 8; 168 = 14 x 12).
vLLM without EPLB gives the first 160 mod 12 ranks one expert more (determine_expert_map), so it needs none.
"""

from __future__ import annotations

import json

import pytest
import yaml

from calculator.deploy import TRTLLM_LOAD_BALANCER_FILE, TRTLLM_OPTIONS_FILE, launch_command
from calculator.errors import InputError
from calculator.fleet import FleetPlan, SearchSpace, Targets, Workload, size_fleet
from calculator.fleet.plan import plan_summary
from calculator.fleet.problem import _Problem
from calculator.kubernetes import kubernetes_manifest
from calculator.performance import engine_profile, step_arrays
from calculator.simulation import plan_setup
from calculator.units import Q_

MODEL = "qwen3-coder-480b-a35b"
WORKLOAD = Workload(Q_(2, "request/s"), 1024, 256)
TARGETS = Targets(Q_(5, "s"), Q_(100, "ms"))
# one routed expert of Qwen3-Coder over its 62 MoE layers: gate, up and down of 6144 x 2560, at 2 bytes (bf16)
EXPERT_BYTES = 3 * 6144 * 2560 * 62 * 2  # 5,851,054,080


def _space(accelerator: str = "h200-sxm", layouts: tuple[str, ...] = ("expert",)) -> SearchSpace:
    return SearchSpace(accelerator, "bf16", tensor_parallel=(12,), moe_layouts=layouts)


@pytest.fixture(scope="module")
def plans() -> dict[str, FleetPlan]:
    return {engine: size_fleet(MODEL, WORKLOAD, TARGETS, _space(), engine=engine) for engine in ("sglang", "trtllm")}


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_even_placement_engines_place_the_fewest_copies(plans: dict[str, FleetPlan], engine: str) -> None:
    plan = plans[engine]
    assert plan.feasible and plan.layout is not None
    assert (plan.layout.expert_parallel, plan.layout.redundant_experts) == (12, 8)
    assert "EP 12 with 8 redundant experts" in plan_summary(plan)
    assert plan_setup(plan).redundant_experts == 8  # the simulator runs the plan's copies


def test_vllm_places_uneven_experts_without_copies() -> None:
    plan = size_fleet(MODEL, WORKLOAD, TARGETS, _space(), engine="vllm")
    assert plan.feasible and plan.layout is not None
    assert (plan.layout.expert_parallel, plan.layout.redundant_experts) == (12, 0)


def test_the_copies_family_prices_the_placed_experts() -> None:
    problem = _Problem.of(MODEL, WORKLOAD, TARGETS, _space(), engine="sglang")
    (family,) = [f for f in problem.families if f.redundant]
    assert family.redundant == 8 and family.arrays.placed_experts == 168
    assert float(family.arrays.experts_per_gpu(12.0)) == 14  # 168 / 12 on every GPU, the busiest included
    # a copy costs one expert's weights on the GPU that holds it: 8 copies over 8 GPUs put 21 (not 20) on each
    laid = step_arrays(MODEL, "h200-sxm", "bf16", engine=engine_profile("sglang")).with_expert_tensor_parallel(1.0)
    added = laid.with_redundant_experts(8).weights_per_device(8.0) - laid.weights_per_device(8.0)
    assert float(added) == pytest.approx(EXPERT_BYTES, rel=1e-12)


def test_default_degrees_need_no_copies() -> None:
    # 1, 2, 4 and 8 all divide 160: the sizer builds no family with copies, and the plan places none
    problem = _Problem.of(MODEL, WORKLOAD, TARGETS, SearchSpace("h200-sxm", "bf16"), engine="sglang")
    assert not any(f.redundant for f in problem.families)


def test_plan_file_round_trip_and_older_files(plans: dict[str, FleetPlan]) -> None:
    data = json.loads(json.dumps(plans["sglang"].to_json_dict()))
    assert data["layout"]["redundant_experts"] == 8
    assert FleetPlan.from_json_dict(data).layout.redundant_experts == 8
    del data["layout"]["redundant_experts"]  # written before the field
    assert FleetPlan.from_json_dict(data).layout.redundant_experts == 0
    data["layout"]["redundant_experts"] = -1
    with pytest.raises(InputError, match=r"layout\.redundant_experts"):
        FleetPlan.from_json_dict(data)


def test_table_row_names_copies_only_where_placed(plans: dict[str, FleetPlan]) -> None:
    plan = plans["sglang"]
    assert any("redundant_experts" in str(c) for c in plan.to_frame().columns)
    vllm = size_fleet(MODEL, WORKLOAD, TARGETS, _space(), engine="vllm")
    assert not any("redundant_experts" in str(c) for c in vllm.to_frame().columns)


def test_vllm_flags_carry_the_copies(plans: dict[str, FleetPlan]) -> None:
    # vLLM 0.14-0.18: --enable-eplb and --eplb-config, parsed as JSON into EPLBConfig (engine/arg_utils.py)
    flags = launch_command(plans["sglang"], "vllm").flags
    assert "--enable-eplb" in flags and flags["--enable-eplb"] is None
    assert json.loads(flags["--eplb-config"]) == {"num_redundant_experts": 8}
    assert "--enable-expert-parallel" in flags


def test_sglang_flags_carry_the_copies(plans: dict[str, FleetPlan]) -> None:
    # SGLang 0.5.9: --ep-num-redundant-experts (int) and the --enable-eplb switch (srt/server_args.py)
    config = launch_command(plans["sglang"], "sglang")
    assert config.flags["--ep-size"] == "12" and config.flags["--ep-num-redundant-experts"] == "8"
    assert "--enable-eplb" in config.flags and config.flags["--enable-eplb"] is None
    assert "--ep-num-redundant-experts 8 --enable-eplb" in config.command


def test_trtllm_load_balancer_carries_the_slots(plans: dict[str, FleetPlan]) -> None:
    # TensorRT-LLM: moe_config.load_balancer names a MoeLoadBalancerConfig file, num_slots 160 + 8 = 168 (divisible
    # by --ep_size 12), and the balancer runs in the WIDEEP backend only (create_moe.py)
    config = launch_command(plans["trtllm"], "trtllm")
    options = yaml.safe_load(config.files[TRTLLM_OPTIONS_FILE])
    assert options["moe_config"] == {"backend": "WIDEEP", "load_balancer": TRTLLM_LOAD_BALANCER_FILE}
    balancer = yaml.safe_load(config.files[TRTLLM_LOAD_BALANCER_FILE])
    assert balancer["num_slots"] == 168 and balancer["layer_updates_per_iter"] > 0
    assert f"cat > {TRTLLM_LOAD_BALANCER_FILE}" in config.command


def test_kubernetes_config_map_names_the_mounted_balancer() -> None:
    plan = size_fleet(MODEL, WORKLOAD, TARGETS, _space("gb200"), engine="trtllm")  # 12 GPUs of one NVL72 domain
    assert plan.layout is not None and plan.layout.redundant_experts == 8
    text = kubernetes_manifest(plan, "trtllm")
    assert f"load_balancer: /etc/servecalc/{TRTLLM_LOAD_BALANCER_FILE}" in text


def test_a_plan_without_copies_is_refused_where_the_engine_places_evenly() -> None:
    plan = size_fleet(MODEL, WORKLOAD, TARGETS, _space(), engine="vllm")  # 160 experts unevenly over 12 GPUs
    with pytest.raises(InputError, match="places 8 copies there"):
        launch_command(plan, "sglang")
    assert "--enable-eplb" not in launch_command(plan, "vllm").flags


def test_attention_ranks_run_a_degree_that_does_not_divide_the_heads():
    # DeepSeek-V3: 128 attention heads, 256 routed experts. On one GB200 NVL72 domain of 72 GPUs, TP 72 would split
    # 128 heads unevenly, but 72 attention ranks each hold whole heads; the experts need 256 + R divisible by 72
    # under SGLang and TensorRT-LLM: 256 = 3 x 72 + 40, so R = 72 - 40 = 32 (288 slots, 4 a GPU).
    workload, targets = Workload(Q_(40, "request/s"), 1024, 1024), Targets(Q_(2, "s"), Q_(80, "ms"))
    space = SearchSpace("gb200", "fp8", tensor_parallel=(72,))
    for engine, copies in (("trtllm", 32), ("sglang", 32), ("vllm", 0)):
        plan = size_fleet("deepseek-v3", workload, targets, space, engine=engine)
        assert plan.feasible, (engine, plan.reason)
        layout = plan.layout
        assert (layout.tensor_parallel, layout.data_parallel, layout.expert_parallel) == (1, 72, 72), engine
        assert layout.redundant_experts == copies, engine
    # the layouts that split the heads over the replica's GPUs still need a degree that divides them
    with pytest.raises(InputError, match="divides 128 heads"):
        size_fleet(
            "deepseek-v3",
            workload,
            targets,
            SearchSpace("gb200", "fp8", tensor_parallel=(72,), moe_layouts=("expert",)),
        )
    with pytest.raises(InputError, match="divides 64 heads"):
        size_fleet("llama-3.1-70b", workload, targets, SearchSpace("gb200", "fp8", tensor_parallel=(72,)))


def test_the_frontier_runs_the_degrees_as_the_sizer_does():
    # The frontier's rows of DeepSeek-V3 at 72 GPUs under SGLang: only attention ranks hold 128 heads on 72 GPUs,
    # with the 32 copies that make 288 experts divide over them (4 a GPU); TP 8 keeps its three layouts uncopied.
    from calculator.fleet import frontier

    table = frontier("deepseek-v3", "gb200", "fp8", 1024, 1024, engine="sglang", tensor_parallel=(8, 72))
    wide = table[table.tensor_parallel == 72]
    assert not wide.empty
    assert set(zip(wide.expert_parallel, wide.data_parallel, wide.redundant_experts, strict=True)) == {(72, 72, 32)}
    narrow = table[table.tensor_parallel == 8]
    assert set(narrow.redundant_experts) == {0}
    assert set(zip(narrow.expert_parallel, narrow.data_parallel, strict=True)) == {(1, 1), (8, 1), (8, 8)}
