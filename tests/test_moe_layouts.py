"""Mixture-of-experts layouts (issue 23): experts split by tensor parallelism, or spread by expert parallelism.

The step model prices a layout from the engines' measured MoE layers where the kernel tables have them
(``kernels.moe_seconds``); the sizer searches both layouts for a mixture of experts; a plan records its
layout, the simulator runs it, and the launch configs carry it in each engine's own flags.
"""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

from calculator import DOCUMENTED_FLAGS, Q_, FleetPlan, kubernetes_manifest, launch_command
from calculator.errors import InputError
from calculator.fleet import SearchSpace, Targets, Workload, plan_summary, size_fleet
from calculator.performance import decode_step_time, predict_benchmark, step_arrays

WORKLOAD = Workload(Q_(20, "request/s"), 2048, 512)
TARGETS = Targets(Q_(2, "s"), Q_(50, "ms"))


def _plan(model: str, layouts: tuple[str, ...], accelerator: str = "h100-sxm", engine: str = "trtllm") -> FleetPlan:
    return size_fleet(model, WORKLOAD, TARGETS, SearchSpace(accelerator, "fp8", moe_layouts=layouts), engine=engine)


def test_the_sizer_searches_both_moe_layouts_of_a_mixture_of_experts():
    both = _plan("qwen3-235b-a22b", ("tensor", "expert"))
    assert any(key.endswith("/ep8") for key in both.rejected) or both.layout.expert_parallel > 1
    spread = _plan("qwen3-235b-a22b", ("expert",))
    assert spread.feasible and spread.layout.expert_parallel == spread.layout.stage_gpus > 1
    split = _plan("qwen3-235b-a22b", ("tensor",))
    assert split.feasible and split.layout.expert_parallel == 1
    assert both.cost.per_hour <= min(spread.cost.per_hour, split.cost.per_hour)  # the cheaper of the two


def test_a_dense_model_has_no_moe_layouts():
    plan = _plan("llama-3.1-70b", ("tensor", "expert"))
    assert plan.feasible and plan.layout.expert_parallel == 1
    assert not any("/ep" in key for key in plan.rejected)


def test_the_layout_changes_the_priced_step():
    # vLLM's measured MoE layer of Qwen3-235B is much slower with each expert split eight ways than with the
    # experts spread over eight GPUs (the expert width, 1536, leaves 192 columns per GPU: 695 against 125 us at 32
    # tokens in moe.csv); TensorRT-LLM's own kernel splits them almost as fast (131 against 121 us), and each
    # engine's step reads its own kernel.
    def step(engine, ep=1):
        return decode_step_time("qwen3-235b-a22b", "h100-sxm", "fp8", 8, 32, 2048, engine=engine, expert_parallel=ep)

    assert step("vllm", 8) < 0.5 * step("vllm")
    assert step("trtllm", 8) < step("trtllm") < 1.2 * step("trtllm", 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = predict_benchmark("qwen3-235b-a22b", "h100-sxm", "fp8", 4, 1024, 1024, 16, "trtllm", expert_parallel=4)
    assert p.tpot.m_as("ms") > 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"model": "llama-3.1-8b", "expert_parallel": 2}, "this one is dense"),
        ({"tensor_parallel": 4, "expert_parallel": 3}, "must divide tensor_parallel"),
        ({"tensor_parallel": [4, 8], "expert_parallel": 4}, "give one tensor_parallel degree"),
        ({"expert_parallel": [2, 4]}, "must be one whole number"),
        ({"model": "llama-3.1-70b", "data_parallel": 2}, "a dense model's data-parallel ranks are replicas"),
        ({"tensor_parallel": [1, 2], "data_parallel": 4}, "give one tensor_parallel degree"),
        ({"data_parallel": [2, 4]}, "must be one whole number"),
    ],
)
def test_an_invalid_layout_is_refused_with_the_reason(arguments, message):
    call = {"model": "deepseek-v3", "tensor_parallel": 8, **arguments}
    model, tp = call.pop("model"), call.pop("tensor_parallel")
    with pytest.raises(InputError, match=message):
        decode_step_time(model, "h200-sxm", "fp8", tp, 8, 1024, **call)


@pytest.fixture(scope="module")
def spread_plan():
    return _plan("qwen3-235b-a22b", ("expert",))


def test_the_launch_configs_carry_the_layout_in_each_engines_documented_flags(spread_plan):
    ep = str(spread_plan.layout.expert_parallel)
    vllm = launch_command(spread_plan, "vllm")
    assert "--enable-expert-parallel" in vllm.arguments and vllm.flags["--enable-expert-parallel"] is None
    at = vllm.arguments.index("--enable-expert-parallel")
    assert at == len(vllm.arguments) - 1 or vllm.arguments[at + 1].startswith("--")  # a switch, no value
    assert launch_command(spread_plan, "sglang").flags["--ep-size"] == ep
    assert launch_command(spread_plan, "trtllm").flags["--ep_size"] == ep
    for engine in ("vllm", "sglang", "trtllm"):
        config = launch_command(spread_plan, engine)
        assert set(config.flags) <= set(DOCUMENTED_FLAGS[engine])


def test_a_plan_keeps_its_layout_through_json_and_simulation(spread_plan):
    from calculator.simulation import plan_setup, simulate_plan

    again = FleetPlan.from_json_dict(json.loads(json.dumps(spread_plan.to_json_dict())))
    assert again.layout.expert_parallel == spread_plan.layout.expert_parallel
    assert plan_setup(spread_plan).expert_parallel == spread_plan.layout.expert_parallel
    result = simulate_plan(spread_plan, requests=300, seeds=1)
    assert result.throughput.m_as("request/s") > 0


def test_attention_data_parallelism_holds_each_ranks_own_sequences():
    # DeepSeek-V3's MLA latent is whole on every rank of a tensor-parallel group; eight attention ranks
    # each hold their own sequences, so the replica's KV cache holds several times more, while every GPU
    # keeps a copy of the attention and dense weights.
    from calculator.performance import ENGINES, kv_capacity_tokens, step_arrays

    split = step_arrays("deepseek-v3", "h200-sxm", "fp8")
    ranks = split.with_attention_data_parallel(1.0)
    assert ranks.weights_per_device(8) > split.weights_per_device(8)
    assert kv_capacity_tokens(ranks, ENGINES["trtllm"], 8) > 5 * kv_capacity_tokens(split, ENGINES["trtllm"], 8)


def test_attention_ranks_price_a_large_batch_lower_and_a_lone_prompt_higher():
    from calculator.performance import prefill_time

    def step(dp, tp, batch):
        return decode_step_time(
            "deepseek-v3", "h200-sxm", "fp8", tp, batch, 4096, engine="trtllm", data_parallel=dp, expert_parallel=8
        )

    assert step(8, 1, 1024) < 0.8 * step(1, 8, 1024)  # each rank's attention reads an eighth of the caches
    alone = {dp: prefill_time("deepseek-v3", "h200-sxm", "fp8", 8 // dp, 4096, engine="trtllm", data_parallel=dp,
                              expert_parallel=8) for dp in (1, 8)}  # fmt: skip
    assert alone[8] > alone[1]  # one rank carries the whole prompt through attention and the dense layers


@pytest.fixture(scope="module")
def ranks_plan():
    # A high-throughput DeepSeek-V3 load with a relaxed TPOT, where attention ranks pay off (their KV cache
    # holds eight times the sequences of TP 8's replicated latent).
    return size_fleet(
        "deepseek-v3", Workload(Q_(100, "request/s"), 1024, 1024), Targets(Q_(5, "s"), Q_(100, "ms")),
        SearchSpace("h200-sxm", "fp8"), engine="trtllm",
    )  # fmt: skip


def test_the_sizer_chooses_attention_ranks_where_they_are_cheaper(ranks_plan):
    assert ranks_plan.feasible and ranks_plan.layout.data_parallel == ranks_plan.layout.stage_gpus == 8
    assert ranks_plan.layout.expert_parallel == 8
    assert ranks_plan.batch % ranks_plan.layout.data_parallel == 0  # each rank's cap times the ranks
    tensor_only = size_fleet(
        "deepseek-v3", Workload(Q_(100, "request/s"), 1024, 1024), Targets(Q_(5, "s"), Q_(100, "ms")),
        SearchSpace("h200-sxm", "fp8", moe_layouts=("tensor",)), engine="trtllm",
    )  # fmt: skip
    assert tensor_only.gpus > ranks_plan.gpus
    from calculator.fleet import plan_summary

    assert f"({ranks_plan.replicas} replicas of TP 8, attention DP 8, EP 8)" in plan_summary(ranks_plan)


def test_attention_ranks_launch_with_each_ranks_cap(ranks_plan):
    import math

    per_rank = str(math.ceil(ranks_plan.batch / 8))
    vllm = launch_command(ranks_plan, "vllm")
    assert vllm.flags["--tensor-parallel-size"] == "1" and vllm.flags["--data-parallel-size"] == "8"
    assert vllm.flags["--max-num-seqs"] == per_rank and "--enable-expert-parallel" in vllm.flags
    trtllm = launch_command(ranks_plan, "trtllm")
    assert trtllm.flags["--max_batch_size"] == per_rank and trtllm.flags["--ep_size"] == "8"
    assert "enable_attention_dp: true" in trtllm.files["extra-llm-api-config.yml"]
    sglang = launch_command(ranks_plan, "sglang")
    assert (sglang.flags["--tp-size"], sglang.flags["--dp-size"], sglang.flags["--ep-size"]) == ("8", "8", "8")
    assert sglang.flags["--enable-dp-attention"] is None  # a switch
    assert int(sglang.flags["--max-running-requests"]) == 8 * int(per_rank)  # SGLang's total over the ranks
    for config in (vllm, trtllm, sglang):
        assert set(config.flags) <= set(DOCUMENTED_FLAGS[config.engine])
    from calculator import kubernetes_manifest

    manifest = kubernetes_manifest(ranks_plan, "trtllm")
    assert "enable_attention_dp: true" in manifest and "nvidia.com/gpu: 8" in manifest


def test_the_simulator_runs_the_attention_ranks_and_confirms_the_plan(ranks_plan):
    # The simulator's ranks each schedule their own requests; when one rank prefills a prompt, the others
    # wait for it, and the experts and their exchange run the replica's actual tokens (not the busiest
    # rank's times the ranks). The plan's replica count is then what the simulation needs, within one.
    from calculator.simulation import plan_setup, verify_plan

    setup = plan_setup(ranks_plan)
    assert (setup.data_parallel, setup.expert_parallel, setup.max_num_seqs) == (8, 8, ranks_plan.batch)
    check = verify_plan(ranks_plan, seeds=1)
    assert check.simulated_replicas is not None
    assert abs(check.simulated_replicas - ranks_plan.replicas) <= 1


def test_the_benchmark_model_runs_attention_ranks_with_their_own_caches_and_budgets():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        split, ranks = (
            predict_benchmark("deepseek-v3", "h200-sxm", "fp8", tp, 1024, 1024, 512, "trtllm", data_parallel=dp,
                              expert_parallel=8)
            for tp, dp in ((8, 1), (1, 8))
        )  # fmt: skip
    assert ranks.max_concurrency > 5 * split.max_concurrency  # eight ranks' caches against a replicated latent
    assert ranks.output_throughput > split.output_throughput
    assert ranks.ttft < split.ttft  # 512 clients fit at once instead of queueing for the cache


def test_a_model_larger_than_one_node_is_sized_over_several_with_the_scale_out_link():
    # Issue 23: DeepSeek-V3 at FP8 (672 GB) does not fit in one node of eight H100s. The sizer adds replicas of
    # two and four nodes (the H100's registered scale-out link: 400 Gb/s InfiniBand per GPU, HGX reference
    # architecture), whose collectives cross that link: slower than one NVLink domain would be.
    from calculator.performance.iteration import _collective_seconds

    plan = size_fleet(
        "deepseek-v3", Workload(Q_(50, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
        SearchSpace("h100-sxm", "fp8"), engine="sglang",
    )  # fmt: skip
    assert plan.feasible and plan.layout.gpus == 16 and plan.layout.nodes == 2  # TP 16, or TP 8 x PP 2
    assert "over 2 nodes" in plan_summary(plan)
    families = {"h100-sxm/fp8/tp16", "h100-sxm/fp8/tp16/ep16", "h100-sxm/fp8/tp16/dp16/ep16", "h100-sxm/fp8/tp8/pp2"}
    assert len(families - set(plan.rejected)) == 1  # every layout searched, one of them the plan
    a = step_arrays("deepseek-v3", "h100-sxm", "fp8")
    assert a.node_gpus == 8 and a.scale_out_bandwidth == pytest.approx(50e9)
    message = 256 * a.hidden * 2
    one_domain = dataclasses.replace(a, scale_out_bandwidth=0.0)  # the NVLink curve extrapolated
    assert _collective_seconds(a, 16.0, message) > 1.5 * _collective_seconds(one_domain, 16.0, message)
    assert _collective_seconds(a, 8.0, message) == _collective_seconds(one_domain, 8.0, message)
    # B300 registers its eight-GPU node but no scale-out link: wider replicas are refused, with the reason.
    b300 = size_fleet(
        "deepseek-v3", Workload(Q_(50, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
        SearchSpace("b300-sxm", "fp8", tensor_parallel=(8, 16)), engine="sglang",
    )  # fmt: skip
    assert "no scale-out link" in b300.rejected["b300-sxm/fp8/tp16"] and b300.layout.stage_gpus == 8


@pytest.fixture(scope="module")
def two_node_plans():
    # DeepSeek-V3 at FP8 on H100s: replicas over several nodes, tensor parallel and attention ranks.
    workload, targets = Workload(Q_(50, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms"))
    space = {layout: SearchSpace("h100-sxm", "fp8", moe_layouts=(layout,)) for layout in ("tensor", "attention-dp")}
    return {layout: size_fleet("deepseek-v3", workload, targets, s, engine="vllm") for layout, s in space.items()}


def test_a_replica_over_two_nodes_launches_on_each_with_each_engines_documented_flags(two_node_plans):
    import yaml

    tensor, ranks = two_node_plans["tensor"], two_node_plans["attention-dp"]
    nodes = ranks.layout.nodes  # two or four nodes of eight ranks, whichever is cheaper
    assert tensor.layout.nodes == 2 and nodes in (2, 4) and ranks.layout.data_parallel == 8 * nodes
    vllm = launch_command(tensor, "vllm")
    assert vllm.nodes == 2 and vllm.flags["--nnodes"] == "2" and vllm.flags["--node-rank"] == "$NODE_RANK"
    assert vllm.worker_flags == {"--headless": None} and '--master-addr "$LEADER_ADDRESS"' in vllm.command
    dp = launch_command(ranks, "vllm")
    assert dp.flags["--data-parallel-size"] == str(8 * nodes) and dp.flags["--data-parallel-size-local"] == "8"
    assert dp.worker_flags["--data-parallel-start-rank"] == "$((NODE_RANK * 8))"
    sglang = launch_command(ranks, "sglang")
    assert sglang.flags["--dist-init-addr"] == "$LEADER_ADDRESS:20000" and sglang.flags["--nnodes"] == str(nodes)
    for config in (vllm, dp, sglang):  # every flag, the other nodes' too, is one the engine documents
        assert set(config.flags) | set(config.worker_flags) <= set(DOCUMENTED_FLAGS[config.engine])
    trtllm = launch_command(tensor, "trtllm")
    assert trtllm.arguments[:6] == ("mpirun", "--hostfile", "hostfile", "-np", "16", "trtllm-llmapi-launch")
    # Kubernetes: a LeaderWorkerSet group of two pods of eight GPUs per replica, LWS's variables in the command.
    documents = [d for d in yaml.safe_load_all(kubernetes_manifest(ranks, "vllm")) if d]
    group = next(d for d in documents if d["kind"] == "LeaderWorkerSet")
    template = group["spec"]["leaderWorkerTemplate"]
    assert group["spec"]["replicas"] == ranks.replicas and template["size"] == nodes
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 8 and worker["command"][:2] == ["sh", "-c"]
    assert '"$((LWS_WORKER_INDEX * 8))"' in worker["command"][2] and "--headless" in worker["command"][2]
    assert "ports" in template["leaderTemplate"]["spec"]["containers"][0] and "ports" not in worker
    scaler = next(d for d in documents if d["kind"] == "HorizontalPodAutoscaler")
    assert scaler["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
    with pytest.raises(InputError, match="one MPI world"):
        kubernetes_manifest(tensor, "trtllm")


def test_attention_ranks_schedule_their_own_requests_and_wait_for_the_slowest():
    # Issue 23 item 6: each attention rank has its own scheduler and KV pool behind the replica's router, and
    # a replica's iteration lasts as long as its busiest rank's attention plus the experts over every rank's
    # tokens (the MoE layers run the ranks together).
    from calculator.performance import engine_profile, iteration_seconds
    from calculator.performance.iteration import _curves, _interp_curve
    from calculator.simulation import SimulationSetup, Traffic, simulate

    setup = SimulationSetup(
        "deepseek-v3", "h200-sxm", "fp8", tensor_parallel=8, engine="trtllm", expert_parallel=8, data_parallel=8
    )
    traffic = {n: Traffic(clients=n, input_tokens=64, output_tokens=257, requests=2 * n) for n in (1, 8)}
    runs = {n: simulate(setup, t, seeds=1) for n, t in traffic.items()}
    assert sorted(set(runs[8].requests["rank"])) == list(range(8))  # one client per rank, the least loaded
    a = step_arrays("deepseek-v3", "h200-sxm", "fp8", engine="trtllm")
    a = a.with_expert_tensor_parallel(1).with_attention_data_parallel(1)
    eff = engine_profile("trtllm").efficiency_for("h200-sxm")
    step, per_sequence = eff.fixed_seconds
    gpu = iteration_seconds(a, eff.replace(step_overhead=Q_(0, "s"), sequence_overhead=Q_(0, "s")), 8, 8, 64 + 128)
    experts = {m: a.layers * float(_interp_curve(_curves(a, 8.0)["experts"], np.array([m]))[0]) for m in (1, 8)}
    fixed = step + per_sequence  # each rank's scheduler runs its own one sequence, side by side
    every_rank = gpu + fixed  # eight ranks of one sequence each: the balanced step
    one_rank = gpu - experts[8] + experts[1] + fixed  # one busy rank: its attention, the experts at one token
    assert runs[8].value("tpot").m_as("s") == pytest.approx(every_rank, rel=0.03)
    assert runs[1].value("tpot").m_as("s") == pytest.approx(one_rank, rel=0.03)
    assert one_rank < every_rank


def test_each_attention_rank_pays_the_per_sequence_cost_of_its_own_sequences():
    # Each rank's scheduler runs side by side with the others': the per-sequence cost counts one rank's
    # share of the decodes (and its prompts), not the replica's.
    from calculator.performance import engine_profile, iteration_seconds

    a = step_arrays("deepseek-v3", "h200-sxm", "fp8").with_expert_tensor_parallel(1)
    eff = engine_profile("trtllm").efficiency_for("h200-sxm")
    free = eff.replace(sequence_overhead=Q_(0, "s"))
    per_sequence = eff.fixed_seconds[1]
    ranks = a.with_attention_data_parallel(1)
    assert iteration_seconds(ranks, eff, 8, 1024, 2048) - iteration_seconds(ranks, free, 8, 1024, 2048) == (
        pytest.approx(per_sequence * 1024 / 8)
    )
    with_prompts = iteration_seconds(ranks, eff, 8, 1024, 2048, 3 * 512, 3) - iteration_seconds(
        ranks, free, 8, 1024, 2048, 3 * 512, 3
    )
    assert with_prompts == pytest.approx(per_sequence * (1024 / 8 + 1))  # three prompts, one on the busiest rank
    assert iteration_seconds(a, eff, 8, 1024, 2048) - iteration_seconds(a, free, 8, 1024, 2048) == (
        pytest.approx(per_sequence * 1024)  # one scheduler for the whole replica
    )


def test_a_model_larger_than_one_node_is_also_sized_as_pipeline_stages():
    # Issue 23: dense models that do not fit in one node search pipeline stages (one node each) beside
    # tensor parallelism over the scale-out link; the launch configs carry the stages.
    import yaml

    plan = size_fleet(
        "llama-3.1-405b", Workload(Q_(5, "request/s"), 1024, 256), Targets(Q_(2, "s"), Q_(60, "ms")),
        SearchSpace("h100-sxm", "bf16"), engine="vllm",
    )  # fmt: skip
    assert plan.feasible and plan.layout.nodes == 2
    searched = ("feasible but not the cheapest", "no cheaper than the plan")  # evaluated, or bounded by the plan
    assert plan.rejected["h100-sxm/bf16/tp8/pp2"].startswith(searched)
    assert not any(key.startswith("h100-sxm/bf16/tp0") for key in plan.rejected)  # no stage smaller than a GPU
    staged = dataclasses.replace(
        plan, layout=dataclasses.replace(plan.layout, tensor_parallel=8, pipeline_parallel=2), gpus=plan.replicas * 16
    )
    assert staged.layout.gpus == 16 and "TP 8, PP 2 over 2 nodes" in plan_summary(staged)
    vllm, sglang, trtllm = (launch_command(staged, engine) for engine in ("vllm", "sglang", "trtllm"))
    assert vllm.flags["--pipeline-parallel-size"] == "2" and vllm.flags["--tensor-parallel-size"] == "8"
    assert sglang.flags["--pp-size"] == "2" and trtllm.flags["--pp_size"] == "2"
    assert trtllm.arguments[:5] == ("mpirun", "--hostfile", "hostfile", "-np", "16")
    for config in (vllm, sglang, trtllm):
        assert set(config.flags) | set(config.worker_flags) <= set(DOCUMENTED_FLAGS[config.engine])
    group = next(
        d for d in yaml.safe_load_all(kubernetes_manifest(staged, "vllm")) if d and d["kind"] == "LeaderWorkerSet"
    )
    assert group["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["resources"] == {
        "requests": {"nvidia.com/gpu": 8},
        "limits": {"nvidia.com/gpu": 8},
    }
    from calculator.simulation import plan_setup

    assert plan_setup(staged).pipeline_parallel == 2
    # a plan file with stages checks its GPUs against them
    restored = FleetPlan.from_json_dict(json.loads(json.dumps(staged.to_json_dict())))
    assert restored.layout.pipeline_parallel == 2 and restored.layout.gpus == 16
    one_stage = json.loads(json.dumps(staged.to_json_dict()))
    one_stage["layout"]["pipeline_parallel"] = 1
    with pytest.raises(InputError, match=r"must be replicas x the layout's GPUs \(\d+ x 8: tensor_parallel x"):
        FleetPlan.from_json_dict(one_stage)


def test_every_plan_carries_its_layout_as_one_value(ranks_plan, two_node_plans):
    # Issue 23 item 1: a Layout on every plan, read back by the step model's keywords.
    from calculator.fleet import Layout

    for plan in (ranks_plan, *two_node_plans.values()):
        layout = plan.layout
        assert isinstance(layout, Layout) and layout.gpus == plan.layout.gpus == plan.gpus // plan.replicas
        assert layout.nodes == plan.layout.nodes
        prediction = predict_benchmark(plan.model, plan.accelerator, plan.precision, input_tokens=1024,
                                       output_tokens=1024, concurrency=64, engine=plan.engine, **layout.keywords())  # fmt: skip
        assert prediction.tpot.m_as("s") > 0
    assert ranks_plan.layout == Layout(tensor_parallel=1, data_parallel=8, expert_parallel=8)


def test_attention_ranks_beyond_the_batch_are_refused_with_the_reason():
    # Issue 23 item 1: an invalid layout gets a clear error (here: more attention ranks than sequences).
    with pytest.raises(InputError, match="'batch' \\(4\\) must be at least data_parallel \\(8\\)"):
        decode_step_time("deepseek-v3", "h200-sxm", "fp8", 1, 4, 1024, data_parallel=8, expert_parallel=8)
    assert decode_step_time("deepseek-v3", "h200-sxm", "fp8", 1, 8, 1024, data_parallel=8, expert_parallel=8) > Q_(
        0, "s"
    )


def test_attention_ranks_exchange_tokens_with_the_experts_as_each_engine_does():
    # Issue 23 item 3: the dispatch and combine around the experts are the engines' own collectives, from the
    # measured NCCL tables: an all-gather and a reduce-scatter (vLLM's default all2all backend, TensorRT-LLM's
    # fused MoE), or SGLang's two padding modes (gather and scatter over padded buffers when only decodes run,
    # two all-reduces of the summed buffer when a prompt is in the iteration).
    from calculator.kernels import collective_seconds
    from calculator.performance import engine_profile, iteration_seconds

    assert engine_profile("vllm").expert_exchange == engine_profile("trtllm").expert_exchange == "gather_scatter"
    assert engine_profile("sglang").expert_exchange == "padded_or_summed"
    assert "all2all_backend" in engine_profile("vllm").citations["expert_exchange"]
    a = step_arrays("deepseek-v3", "h200-sxm", "fp8").with_expert_tensor_parallel(1).with_attention_data_parallel(1)
    sglang = dataclasses.replace(a, expert_exchange="padded_or_summed")
    eff = engine_profile("trtllm").efficiency_for("h200-sxm")
    decode = iteration_seconds(a, eff, 8, 512, 2048)
    assert iteration_seconds(sglang, eff, 8, 512, 2048) == pytest.approx(decode)  # balanced ranks: no padding
    prompt = 4096
    tokens = 512 + prompt
    gathered = tokens * a.hidden * 2  # BF16 activations of every rank's tokens
    per_layer = {
        op: float(collective_seconds(a.tables, op, 8, gathered, a.link_bandwidth))
        for op in ("all_reduce", "all_gather", "reduce_scatter")
    }
    gather_scatter = iteration_seconds(a, eff, 8, 512, 2048, prompt, 1)
    summed = iteration_seconds(sglang, eff, 8, 512, 2048, prompt, 1)
    expected = a.layers * (2 * per_layer["all_reduce"] - per_layer["all_gather"] - per_layer["reduce_scatter"])
    assert summed - gather_scatter == pytest.approx(expected, rel=1e-6)
    with pytest.raises(InputError, match="expert_exchange"):
        dataclasses.replace(engine_profile("vllm"), expert_exchange="alltoall")


def test_tensorrt_llm_gathers_the_ranks_tokens_quantized_for_fp4_experts():
    # TensorRT-LLM's fused MoE quantizes the ranks' tokens for NVFP4 experts before it all-gathers them (half a byte a
    # value and an FP8 scale per 16 values: 0.5625 bytes) and reduce-scatters the 16-bit outputs; its FP8 experts and
    # the other engines gather 16-bit tokens (fused_moe_cutlass.py, forward_chunk's run_post_quant_allgather).
    from calculator.kernels import collective_seconds
    from calculator.performance import engine_profile, iteration_seconds

    assert engine_profile("trtllm").fp4_gather and not engine_profile("vllm").fp4_gather
    assert "run_post_quant_allgather" in engine_profile("trtllm").citations["fp4_gather"]

    def arrays(precision: str, engine: str):
        a = step_arrays("deepseek-v3", "b200", precision, engine=engine)
        return a.with_expert_tensor_parallel(1).with_attention_data_parallel(1)

    assert arrays("fp4", "trtllm").gather_value_bytes == 0.5625
    assert arrays("fp8", "trtllm").gather_value_bytes == arrays("fp4", "vllm").gather_value_bytes == 2.0
    a = arrays("fp4", "trtllm")
    sixteen = dataclasses.replace(a, gather_value_bytes=2.0)
    eff = engine_profile("trtllm").efficiency_for("b200")
    tokens = 1536  # 192 decodes on each of eight ranks
    quantized, plain = iteration_seconds(a, eff, 8, tokens, 2650), iteration_seconds(sixteen, eff, 8, tokens, 2650)
    gathered = [float(collective_seconds(a.tables, "all_gather", 8, tokens * a.hidden * b, a.link_bandwidth))
                for b in (2.0, 0.5625)]  # fmt: skip
    assert plain - quantized == pytest.approx(a.layers * (gathered[0] - gathered[1]), rel=1e-6)
    assert gathered[1] < gathered[0] / 2  # a message of 3.5 times fewer bytes, on the tables' bandwidth part


def test_prompts_landing_together_prefill_side_by_side_on_the_attention_ranks():
    # A request goes to the rank with the fewest outstanding, so J prompt chunks landing in one iteration put
    # ceil(J / ranks) on the busiest rank: the rank part of their cost is paid that often, the experts' part J
    # times. With Poisson arrivals of mean mu: E[ceil(J / R)] = sum_j P(J = j) ceil(j / R).
    import math

    from calculator.performance.iteration import spread_over_ranks

    for mu in (0.2, 1.0, 6.0, 30.0):
        busiest = sum(math.exp(j * math.log(mu) - mu - math.lgamma(j + 1)) * math.ceil(j / 8) for j in range(200))
        assert spread_over_ranks(mu, 8, 1.0, 1.0) == pytest.approx(
            busiest / mu, rel=1e-4
        )  # all on the rank (tabulated)
        assert spread_over_ranks(mu, 8, 1.0, 8.0) == pytest.approx(1.0)  # all shared: nothing runs side by side
        assert spread_over_ranks(mu, 1, 1.0, 1.0) == 1.0  # one scheduler: the prompts' costs add
    # The sizer's open-loop operating point against the simulator's ranks, one replica of DeepSeek-V3 on eight
    # H200s at 5 request/s of 1,024/1,024 tokens (about 0.4 prompts per iteration): TPOT and TTFT agree.
    from calculator.simulation import SimulationSetup, Traffic, simulate

    rate = 5.0
    targets = Targets(Q_(5, "s"), Q_(300, "ms"), max_utilization=1.0)
    space = SearchSpace("h200-sxm", "fp8", tensor_parallel=(8,), moe_layouts=("attention-dp",))
    plan = size_fleet("deepseek-v3", Workload(Q_(rate, "request/s"), 1024, 1024), targets, space, engine="trtllm")
    assert plan.replicas == 1 and plan.layout.data_parallel == 8
    setup = SimulationSetup(
        "deepseek-v3", "h200-sxm", "fp8", tensor_parallel=8, engine="trtllm", expert_parallel=8, data_parallel=8,
        max_num_seqs=int(plan.batch),
    )  # fmt: skip
    run = simulate(setup, Traffic(Q_(rate, "request/s"), 1024, 1024, requests=3500), seeds=1)
    steady = run.requests[(run.requests.arrival > 150) & (run.requests.arrival < run.requests.arrival.max() - 100)]
    assert steady.tpot.mean() == pytest.approx(plan.service.tpot.m_as("s"), rel=0.03)
    assert steady.ttft.mean() == pytest.approx(plan.service.ttft.m_as("s"), rel=0.05)


def test_the_expert_exchange_time_is_the_engines_collectives_per_layer():
    # The public form of the attention ranks' exchange: per MoE layer, an all-gather and a reduce-scatter of
    # every rank's 16-bit tokens from the measured NCCL tables (DeepSeek-V3: 7,168 hidden), SGLang's two
    # all-reduces when a prompt is in the iteration; hostile arguments are refused by name.
    from calculator.kernels import collective_seconds, tables_for
    from calculator.performance import expert_exchange_time

    h200 = tables_for("h200-sxm")
    size = 1024 * 7168 * 2
    link = step_arrays("deepseek-v3", "h200-sxm", "fp8").link_bandwidth
    expected = sum(collective_seconds(h200, op, 8, size, link) for op in ("all_gather", "reduce_scatter"))
    assert expert_exchange_time("deepseek-v3", "h200-sxm", 8, 1024).m_as("s") == pytest.approx(float(expected))
    summed = 2 * collective_seconds(h200, "all_reduce", 8, size, link)
    sglang = expert_exchange_time("deepseek-v3", "h200-sxm", 8, 1024, engine="sglang", with_prompt=True)
    assert sglang.m_as("s") == pytest.approx(float(summed))
    over_nodes = expert_exchange_time("deepseek-v3", "h200-sxm", [8, 16], 1024).m_as("s")
    assert over_nodes[1] > over_nodes[0]  # the second node's share crosses the scale-out link
    for arguments, message in (
        (("llama-3.1-8b", "h200-sxm", 8, 1024), "not a mixture of experts"),
        (("deepseek-v3", "h200-sxm", 1, 1024), "'gpus'"),
        (("deepseek-v3", "h200-sxm", 8, -5), "'tokens'"),
    ):
        with pytest.raises(InputError, match=message):
            expert_exchange_time(*arguments)
    with pytest.raises(InputError, match="'with_prompt'"):
        expert_exchange_time("deepseek-v3", "h200-sxm", 8, 1024, with_prompt="yes")
