"""The fleet sizer's tab of disaggregated prefill and decode pools: the plan, its intervals, its commands, its check."""

from dataclasses import replace

import streamlit as st

from app_pages import _common as ui
from calculator.deploy import manifest_engine
from calculator.deploy_disaggregated import disaggregated_launch
from calculator.errors import InputError
from calculator.fleet import size_disaggregated
from calculator.kubernetes import disaggregated_manifest
from calculator.simulation import verify_disaggregated

#: The pools' launch downloads: label, engine, file name.
POOL_FILES = (
    ("vLLM pools and proxy", "vllm", "disaggregated-vllm.sh"),
    ("SGLang pools and router", "sglang", "disaggregated-sglang.sh"),
    ("TensorRT-LLM pools and server", "trtllm", "disaggregated-trtllm.sh"),
    ("Kubernetes manifest of the pools", "k8s", "disaggregated-k8s.yaml"),
)


@st.cache_data(show_spinner="Sizing prefill and decode pools...", max_entries=32)
def pools_for(request):
    """The request sized as disaggregated pools (the colocated targets' token-gap bound does not apply)."""
    parts = request.parts()
    targets = replace(parts["targets"], tbt=None, tbt_percentile=None, tpot_percentile=None)
    return size_disaggregated(
        parts["model"], parts["workload"], targets, parts["space"], engine=parts["engine"], costs=parts["costs"]
    )


def show_pools(request, colocated, requests, seeds, seconds):
    """The pools of ``request`` beside the colocated plan, their launch commands and their simulation check."""
    plan = pools_for(request)
    st.caption(
        "The same traffic served by separate prefill and decode pools (section 10.8.3; "
        "`calculator.fleet.size_disaggregated`): the decode pool runs no prefill between tokens, and TTFT adds "
        "the KV handoff over InfiniBand NDR. The pools are sized on the mean TPOT, without a token-gap bound."
    )
    if not plan.feasible:
        st.warning(f"No disaggregated plan: {ui.plain(plan.reason)}.")
        return
    prefill, decode = plan.prefill, plan.decode
    cost = plan.cost.per_hour.m_as("USD/hour")
    versus = ""
    if colocated.feasible:
        other = colocated.cost.per_hour.m_as("USD/hour")
        versus = f" (colocated: {colocated.gpus} GPUs, {ui.fmt(other)} USD/h)"
    st.info(
        f"{plan.gpus} GPUs at {ui.fmt(cost)} USD/h{versus}: prefill on {ui.plain(prefill['accelerator'])} at "
        f"{prefill['precision']}, decode on {ui.plain(decode['accelerator'])} at {decode['precision']}."
    )
    first = st.columns(3)
    prefill_help = f"{prefill['accelerator']} at {prefill['precision']}; one prompt at a time per replica"
    decode_help = f"{decode['accelerator']} at {decode['precision']}, batch cap {decode['batch']}"
    first[0].metric("Prefill replicas × TP", f"{prefill['replicas']} × {prefill['tensor_parallel']}", help=prefill_help)
    first[1].metric("Decode replicas × TP", f"{decode['replicas']} × {decode['tensor_parallel']}", help=decode_help)
    first[2].metric("KV handoff", ui.fmt(plan.kv_handoff, "ms", 3),
                    help="the prompt's KV cache over the link, per request (Eq. 10); part of TTFT")  # fmt: skip
    second = st.columns(3)
    for column, label, value, band in (
        (second[0], "Pools TTFT", plan.ttft, plan.ttft_interval),
        (second[1], "Pools TPOT", plan.tpot, plan.tpot_interval),
    ):
        column.metric(
            label, ui.fmt(value, "ms", 3),
            help=f"80% interval {ui.fmt(band[0], 'ms', 3)} to {ui.fmt(band[1], 'ms', 3)} "
            "(each pool's prediction at its accelerator's interval factors; the handoff unwidened)",
        )  # fmt: skip
    second[2].metric("Pools cost", f"{ui.fmt(cost)} USD/h")
    st.caption(
        f"80% intervals: TTFT {ui.fmt(plan.ttft_interval[0], 'ms', 3)} to "
        f"{ui.fmt(plan.ttft_interval[1], 'ms', 3)}, TPOT "
        f"{ui.fmt(plan.tpot_interval[0], 'ms', 3)} to {ui.fmt(plan.tpot_interval[1], 'ms', 3)}."
    )
    _commands(plan)
    _check(plan, request, requests, seeds, seconds)
    ui.download_json(plan, "disaggregated-plan", label="Download the pools as JSON")


def _commands(plan):
    """Downloads of each engine's disaggregated serving: the pools' commands and the router's."""
    st.caption(
        "Each engine's disaggregated serving as it documents it: every pool's server command (its own TP and batch "
        "cap) with the engine's KV-transfer settings, and the router the clients reach; and the pools as Kubernetes "
        f"StatefulSets with the router, on {manifest_engine(plan)} "
        "(docs/fleet-sizer.md, Deploying a disaggregated plan)."
    )
    ui.launch_downloads(
        POOL_FILES,
        lambda engine: (
            disaggregated_manifest(plan, manifest_engine(plan))
            if engine == "k8s"
            else disaggregated_launch(plan, engine).command + "\n"
        ),
        "pools",
    )


def _check(plan, request, requests, seeds, seconds):
    """The button that simulates the pools, and its verdict (kept in the session for reruns)."""
    checked = st.session_state.setdefault("fleet.pools_checked", {})
    key = (request, requests, seeds)
    if st.button("Check the pools by simulation", key="fleet.verify_pools",
                 help="Simulate the prefill pool on the workload's prompts (one output token each), add the KV "
                 "handoff, then the decode pool with each prompt already cached "
                 "(`calculator.simulation.verify_disaggregated`). Requests and seeds: the sidebar's."):  # fmt: skip
        try:
            checked.clear()
            with st.spinner("Simulating the prefill pool, then the decode pool..."):
                checked[key] = verify_disaggregated(plan, requests=requests, seeds=seeds, time_limit=seconds)
        except InputError as exc:
            st.warning(ui.plain(str(exc)))
    check = checked.get(key)
    if check is None:
        return
    (st.success if check.meets_targets else st.warning)(f"Simulation: {ui.plain(check.verdict)}.")
    cols = st.columns(3)
    cols[0].metric(f"Simulated TTFT ({check.ttft_statistic})", ui.fmt(check.ttft, "ms", 3),
                   help=f"target {ui.fmt(check.ttft_target, 'ms')}; the plan's "
                   f"{ui.fmt(check.analytical_ttft, 'ms', 3)}")  # fmt: skip
    cols[1].metric("Simulated TPOT (mean)", ui.fmt(check.tpot, "ms", 3),
                   help=f"target {ui.fmt(check.tpot_target, 'ms')}; the plan's "
                   f"{ui.fmt(check.analytical_tpot, 'ms', 3)}")  # fmt: skip
    cols[2].metric("Decode-pool TTFT (mean)", ui.fmt(check.decode_ttft, "ms", 3),
                   help="the wait for a decode slot and the cached prompt's last token")  # fmt: skip
    st.caption(
        f"Mean TTFT in parts: prefill pool {ui.fmt(check.prefill_ttft, 'ms', 3)} + KV handoff "
        f"{ui.fmt(check.kv_handoff, 'ms', 3)} + decode pool "
        f"{ui.fmt(check.decode_ttft, 'ms', 3)}."
    )
