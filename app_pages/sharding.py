"""Sharding and communication: TP layer time per interconnect, collectives, pipeline bubbles, MoE memory and reads."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.kernels import collective_seconds, tables_for
from calculator.parallelism import (
    COLLECTIVES,
    NCCL_ALLREDUCE_A100,
    NCCL_ALLREDUCE_H100,
    activation_message_bytes,
    collective_time,
    expert_placement,
    moe_decode_floor,
    moe_dispatch_bytes,
    moe_weights,
    pipeline_bubble_fraction,
    pipeline_performance,
    ring_allreduce_time,
    tensor_parallel_layer_time,
    tensor_parallel_speedup,
)
from calculator.performance import expert_exchange_time, step_arrays
from calculator.plots import curves_figure, tp_layer_time_figure
from calculator.precision import PRECISIONS, bits_per_element, bytes_per_element

DEGREES = np.array([1, 2, 4, 8, 16, 32, 64])
FLOORS = {"none": None, "nccl-h100": NCCL_ALLREDUCE_H100, "nccl-a100": NCCL_ALLREDUCE_A100}
FLOOR_LABELS = {
    "none": "none (alpha-beta only)",
    "nccl-h100": "NCCL fit, H100 (27.9 µs)",
    "nccl-a100": "NCCL fit, A100 (35.1 µs)",
}


def main():
    st.title("Sharding and communication")
    st.caption(
        "What splitting a model over devices costs in communication: tensor-parallel layer time per interconnect, "
        "collectives, pipeline bubbles, and the memory and reads of a mixture of experts "
        "(section 10.10; `calculator.parallelism`)."
    )
    sc = ui.Scenario("sharding")
    tp_tab, collective_tab, pipeline_tab, moe_tab = sc.tabs(
        ["Tensor-parallel layer time", "Collectives", "Pipeline bubbles", "Mixture of experts"]
    )
    if tp_tab.open:
        with tp_tab:
            _tensor_parallel(sc)
    if collective_tab.open:
        with collective_tab:
            _collectives(sc)
    if pipeline_tab.open:
        with pipeline_tab:
            _pipeline(sc)
    if moe_tab.open:
        with moe_tab:
            _moe(sc)


def _links(sc, where):
    reg = ui.registry()
    links = sc.multiselect(
        "Interconnects", "links", list(reg.interconnects), ["chapter-nvlink-h100", "chapter-pcie-gen5",
        "chapter-infiniband-hdr", "chapter-ethernet-100g"], where=where,
    )  # fmt: skip
    alpha = sc.number(
        "Startup latency α for links without one [µs]", "alpha", 1.0, min_value=0.0, max_value=1e4, step=0.5,
        where=where,
    )  # fmt: skip
    floor_name = sc.select(
        "Per-collective floor", "floor", list(FLOORS), "none", where=where, format_func=FLOOR_LABELS.get
    )
    calibration = FLOORS[floor_name]
    floor = calibration.floor if calibration is not None else Q_(0, "us")
    resolved = {}
    for name in links:
        link = reg.interconnect(name)
        resolved[name] = (link, link.startup_latency if link.startup_latency is not None else Q_(alpha, "us"))
    return resolved, floor


def _tensor_parallel(sc):
    reg = ui.registry()
    answer = st.container()  # the metrics above the inputs (first on a phone, where the columns stack)
    left, right = st.columns([1, 2])
    with left:
        model = reg.model(sc.model("Model", "model", "llama-3.1-70b"))
        tokens = sc.number(
            "Tokens per step (decode batch)", "tokens", 32, min_value=1, max_value=10_000_000, integer=True
        )
        precision = sc.select("Activation precision", "act", ["fp16", "bf16", "fp8", "fp32"], "fp16")
        compute_ms = sc.number(
            "Layer compute on one device [ms]", "compute", 0.4, min_value=1e-4, max_value=1e4, step=0.1,
            help="sequential compute time of one layer; Example 10.6 uses 30 ms",
        )  # fmt: skip
        links, floor = _links(sc, st)
        degree = sc.select("Your degree", "degree", [int(d) for d in DEGREES[1:]], 8)
    if model.hidden_size is None:
        st.warning(f"Model {model.id} has no hidden size in the registry; choose another model.")
        return
    at = DEGREES.tolist().index(degree)
    message = activation_message_bytes(tokens, model.hidden_size, bytes_per_element(precision))
    compute = Q_(compute_ms, "ms")
    times, allreduce = {}, {}
    for name, (link, latency) in links.items():
        allreduce[name] = ring_allreduce_time(message, DEGREES, link.bandwidth, latency, floor)
        times[name] = tensor_parallel_layer_time(compute, DEGREES, allreduce[name])
    with right:
        if not times:
            st.info("Choose at least one interconnect.")
            return
        first = next(iter(times))  # the answer first: the chosen degree on the first interconnect chosen
        cols = answer.columns(3)
        cols[0].metric(f"Layer time at TP {degree}", ui.fmt(times[first][at], "us", 4), help=f"over {first}")
        cols[1].metric("All-reduce per collective", ui.fmt(allreduce[first][at], "us", 4), help="two per layer")
        speedup = tensor_parallel_speedup(compute, degree, allreduce[first][at])
        cols[2].metric("Speedup over one device", f"{ui.number(speedup, 3)}×", help=f"of {degree}× ideal")
        sc.answered()
        st.plotly_chart(tp_layer_time_figure(DEGREES, times, unit="us"), key="tp-layer-time")
        rows = [
            {
                "interconnect": name,
                "all-reduce [µs]": allreduce[name][at].m_as("us"),
                "layer time [µs]": times[name][at].m_as("us"),
                "speedup": tensor_parallel_speedup(compute, degree, allreduce[name][at]),
            }
            for name in times
        ]
        st.markdown(f"At TP {degree}, all-reduce message {ui.fmt(message, 'kB')} per collective, two per layer:")
        ui.table(pd.DataFrame(rows), "tensor-parallel")
    name, (link, latency) = next(iter(links.items()))
    ui.show_math(
        ring_allreduce_time, message.to("kB"), degree, link.bandwidth.to("GB/s"), latency.to("us"), floor.to("us"),
        title=f"ring all-reduce on {name}",
    )  # fmt: skip
    ui.show_math(
        tensor_parallel_layer_time, compute, degree, allreduce[name][at].to("us"),
        title="tensor-parallel layer time (Eq. 13)",
    )  # fmt: skip


def _collectives(sc):
    reg = ui.registry()
    a, b, c = st.columns(3)
    link_name = sc.select("Interconnect", "coll_link", list(reg.interconnects), "chapter-nvlink-h100", where=a)
    devices = sc.number("Ranks", "ranks", 8, min_value=2, max_value=100_000, integer=True, where=b)
    size_mb = sc.number("Message [MB]", "message", 8.0, min_value=1e-6, max_value=1e6, step=1.0, where=c)
    d, e = st.columns(2)
    alpha = sc.number("α if the link has none [µs]", "coll_alpha", 1.0, min_value=0.0, max_value=1e4, where=d)
    floor_name = sc.select(
        "Per-collective floor", "coll_floor", list(FLOORS), "none", where=e, format_func=FLOOR_LABELS.get
    )
    link = reg.interconnect(link_name)
    latency = link.startup_latency if link.startup_latency is not None else Q_(alpha, "us")
    floor = FLOORS[floor_name].floor if FLOORS[floor_name] is not None else Q_(0, "us")
    sizes = Q_(np.geomspace(1e3, 1e9, 61), "B")
    series, rows = {}, []
    for kind in COLLECTIVES:
        series[kind] = collective_time(kind, sizes, devices, link, floor=floor, latency=latency)
        at = collective_time(kind, Q_(size_mb, "MB"), devices, link, floor=floor, latency=latency)
        rows.append({"collective": kind, f"time for {ui.number(size_mb)} MB [µs]": at.m_as("us")})
    ui.table(pd.DataFrame(rows), "collectives")
    figure = curves_figure(
        sizes.to("MB"), series, x_name="Message", y_name="Time", x_unit="MB", y_unit="us",
        title=f"Collectives over {devices} ranks on {link_name}", log_x=True, log_y=True,
    )  # fmt: skip
    st.plotly_chart(figure, key="collectives")
    st.caption(
        "Alpha-beta model on the per-direction bandwidth (Table 17); the NCCL floors were fitted on measured "
        "single-node all-reduces (docs/models-10.10-10.16.md)."
    )


def _pipeline(sc):
    a, b, c, d = st.columns(4)
    stages = sc.number("Stages P", "stages", 4, min_value=1, max_value=1024, integer=True, where=a)
    stage_ms = sc.number("Time per stage [ms]", "stage_time", 5.0, min_value=1e-4, max_value=1e6, step=1.0, where=b)
    requests = sc.number(
        "Requests in flight m", "requests", 12, min_value=1, max_value=1_000_000, integer=True, where=c
    )
    transfer_us = sc.number("Transfer between stages [µs]", "transfer", 0.0, min_value=0.0, max_value=1e7, where=d)
    result = pipeline_performance(Q_(np.full(stages, stage_ms), "ms"), requests, Q_(transfer_us, "us"))
    cols = st.columns(4)
    cols[0].metric("Latency of one request", ui.fmt(result.latency, "ms"))
    cols[1].metric("Throughput", ui.fmt(result.throughput, "request/s"))
    cols[2].metric("Makespan", ui.fmt(result.makespan, "ms"))
    cols[3].metric("Bubble (idle share)", f"{ui.number(100 * result.bubble_fraction, 3)} %")
    in_flight = np.arange(1, 129)
    bubbles = {f"P = {p}": pipeline_bubble_fraction(p, in_flight) for p in sorted({2, 4, 8, stages})}
    figure = curves_figure(
        in_flight, bubbles, x_name="Requests in flight [requests]", y_name="Bubble [fraction of time idle]",
        title="Pipeline bubble", log_x=True, powers_of_two=True,
    )  # fmt: skip
    st.plotly_chart(figure, key="pipeline-bubble")
    ui.show_math(pipeline_bubble_fraction, stages, requests, title="bubble of balanced stages (Figure 17)")


def _moe(sc):
    reg = ui.registry()
    experts = [key for key, model in reg.models.items() if model.experts > 1] or ui.transformer_models()
    a, b, c = st.columns(3)
    model = reg.model(sc.select("Mixture-of-experts model", "moe_model", experts, experts[-1], where=a))
    precision = sc.select("Weight precision", "moe_precision", ["fp16", "fp8", "int4", "fp4"], "fp8", where=b)
    accelerator = reg.accelerator(sc.select("Accelerator", "moe_gpu", list(reg.accelerators), "h100-sxm", where=c))
    d, e, f = st.columns(3)
    per_node = sc.number("Devices per node", "per_node", 8, min_value=1, max_value=1024, integer=True, where=d)
    basis = sc.select("Capacity basis", "moe_basis", ["nameplate", "physical"], "nameplate", where=e)
    routing_ms = sc.number("Routing overhead per token [ms]", "routing", 0.3, min_value=0.0, max_value=1e3, where=f)
    bits = bits_per_element(precision)
    weights = moe_weights(model.parameters, model.active, bits)
    capacity = accelerator.memory_nameplate if basis == "nameplate" else accelerator.memory
    floor = moe_decode_floor(
        model.parameters, model.active, bits, per_node, capacity, accelerator.memory_bandwidth, Q_(routing_ms, "ms")
    )
    cols = st.columns(4)
    cols[0].metric("Resident weights", ui.fmt(weights.resident_bytes, "GB"))
    cols[1].metric("Active per token", ui.fmt(weights.active_bytes, "GB"))
    cols[2].metric("Nodes to hold it", ui.fmt(floor.nodes))
    cols[3].metric("Batch-one token time (floor)", ui.fmt(floor.token_time, "ms"))
    values = {**weights.to_dict(), **floor.to_dict()}
    if model.experts > 1:
        placement = expert_placement(
            model.parameters, model.active, model.experts, model.experts_per_token, floor.devices, bits
        )
        values.update({f"placement: {k}": v for k, v in placement.to_dict().items()})
    ui.table(ui.rows(values), "moe")
    st.caption(
        f"Napkin Math 10.8: {PRECISIONS[precision]:g}-bit weights on {floor.devices} × {accelerator.name}; reads "
        "spread evenly over the devices, so the token time is optimistic, not a bound."
    )
    _moe_collectives(sc, model, accelerator)


def _moe_collectives(sc, model, accelerator):
    """Per MoE layer: tensor parallelism's all-reduce against expert parallelism's dispatch and combine."""
    reg = ui.registry()
    st.markdown("**The MoE layer's collectives: all-reduce (experts split) or all-to-all (experts spread)**")
    a, b, c = st.columns(3)
    link = reg.interconnect(sc.select("Interconnect", "moe_link", list(reg.interconnects), "nvlink4", where=a))
    gpus = sc.number("GPUs of the layer", "moe_gpus", 8, min_value=2, max_value=4096, integer=True, where=b)
    tokens = sc.number("Tokens in the step", "moe_tokens", 256, min_value=1, max_value=1_000_000, integer=True, where=c)
    latency = link.startup_latency if link.startup_latency is not None else Q_(1, "us")  # alpha where none is listed
    hidden = model.hidden_size or model.attention_heads * model.head_dim
    activations = activation_message_bytes(tokens, hidden, Q_(2, "B"))  # 16-bit hidden states
    # Experts split: every GPU holds all tokens; one all-reduce combines the experts' partial outputs.
    allreduce = collective_time("allreduce", activations, gpus, link, latency=latency)
    # Experts spread: the dispatch all-to-all and the combine that returns the outputs.
    routed = moe_dispatch_bytes(tokens, hidden, model.experts_per_token, gpus, Q_(2, "B"))
    alltoall = 2 * collective_time("alltoall", routed, gpus, link, latency=latency)
    rows = [
        {"layout": "experts split (tensor parallel)", "collective": "all-reduce of the step's activations",
         "message [MB]": activations.m_as("MB"), "time [µs]": allreduce.m_as("us")},
        {"layout": "experts spread (expert parallel)", "collective": "all-to-all dispatch + combine",
         "message [MB]": routed.m_as("MB"), "time [µs]": alltoall.m_as("us")},
    ]  # fmt: skip
    if model.experts > 1:
        # Measured on the accelerator: NCCL's all-to-all of the routed tokens (dispatch and combine), and what
        # the engines run by default for attention ranks.
        measured = 2 * collective_seconds(
            tables_for(accelerator),
            "alltoall",
            gpus,
            routed.m_as("B"),
            step_arrays(model, accelerator, "bf16").link_bandwidth,
        )
        rows.append(
            {"layout": f"experts spread on {accelerator.name} (measured)",
             "collective": "NCCL all-to-all dispatch + combine", "message [MB]": routed.m_as("MB"),
             "time [µs]": float(measured) * 1e6}
        )  # fmt: skip
        exchange = expert_exchange_time(model, accelerator, gpus, tokens)
        rows.append(
            {"layout": f"attention ranks on {accelerator.name} (engines' default)",
             "collective": "all-gather + reduce-scatter of every rank's tokens (measured NCCL)",
             "message [MB]": activations.m_as("MB"), "time [µs]": exchange.m_as("us")}
        )  # fmt: skip
    ui.table(pd.DataFrame(rows), "moe-collectives")
    st.caption(
        f"Per MoE layer of {model.id} ({hidden} hidden, top-{model.experts_per_token}) at 16-bit activations: "
        "the alpha-beta model of the Collectives tab on the link's per-direction bandwidth (alpha 1 µs where the "
        "registry lists none), a non-blocking "
        "fabric and uniform routing (skew raises the busiest GPU's share, section 10.10.4). The step model "
        "prices the expert computation of both layouts from measured kernels. The last rows are measured on the "
        "accelerator (NCCL in one node; another GPU count scales the nearest measured one): the all-to-all of "
        "the chapter's expert-parallel dispatch, and the attention ranks' exchange as vLLM and TensorRT-LLM run "
        "it by default, an all-gather and a reduce-scatter (hierarchical beyond the node; docs/performance-model.md)."
    )


ui.run(main)
