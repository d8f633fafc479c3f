"""Decode speedups: speculative decoding, chunked prefill, disaggregation's KV handoff, quantization ceilings."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.memory import kv_cache_bytes, model_kv_bytes_per_token, quantization_overhead
from calculator.phases import (
    chunked_prefill_tradeoff,
    disaggregated_pool_sizes,
    kv_handoff_time,
    model_kv_handoff_time,
    quantization_ceilings,
)
from calculator.plots import curves_figure, speculative_speedup_figure
from calculator.registry import load_registry
from calculator.speculative import (
    acceptance_for_speedup,
    best_draft_length,
    expected_tokens_per_round,
    speculative_timing,
    speedup,
)

DRAFT_LENGTHS = (1, 2, 3, 5, 8)
#: A better draft length is worth a change when it adds at least this share of speedup.
MATERIAL_GAIN = 0.005
CHUNKS = (128, 256, 512, 1024, 2048, 4096)
#: Table 12's formats: (name, stored weight precision, precision of the matrix arithmetic).
FORMATS = (
    ("W8A16", "int8", "fp16"),
    ("W4A16", "int4", "fp16"),
    ("W8A8 (FP8)", "fp8", "fp8"),
    ("W8A8 (INT8)", "int8", "int8"),
    ("W4A4 (FP4)", "fp4", "fp4"),
)


@st.cache_data(show_spinner="Sweeping chunk sizes...", max_entries=32)
def chunk_sweep(extra, model, accelerator, prompt, decode_batch, precision, tp):
    reg = load_registry(extra=extra)
    model, accelerator = reg.model(model), reg.accelerator(accelerator)
    rows = []
    for chunk in (c for c in CHUNKS if c <= prompt):
        result = chunked_prefill_tradeoff(model, accelerator, prompt, chunk, decode_batch, precision, tp)
        rows.append(
            {
                "chunk [token]": chunk,
                "iterations": result.iterations,
                "largest gap [ms]": result.chunked_tbt.m_as("ms"),
                "prompt's TTFT [ms]": result.chunked_ttft.m_as("ms"),
            }
        )
    return pd.DataFrame(rows)


def main():
    st.title("Decode speedups")
    st.caption(
        "What speculative decoding, chunked prefill, disaggregated prefill/decode and quantization buy, and what "
        "they cost (sections 10.7.6, 10.8 and 10.9; `calculator.speculative`, `calculator.phases`)."
    )
    sc = ui.Scenario("decode")
    speculative, chunked, handoff, quant = sc.tabs(
        ["Speculative decoding", "Chunked prefill", "Disaggregation handoff", "Quantization ceilings"]
    )
    if speculative.open:
        with speculative:
            _speculative(sc)
    if chunked.open:
        with chunked:
            _chunked(sc)
    if handoff.open:
        with handoff:
            _handoff(sc)
    if quant.open:
        with quant:
            _quantization(sc)


def _speculative(sc):
    answer = st.container()  # the metrics above the inputs
    a, b, c, d = st.columns(4)
    alpha = sc.slider("Acceptance α", "alpha", 0.7, min_value=0.0, max_value=1.0, step=0.01, where=a)
    k = sc.number("Draft length K", "k", 5, min_value=1, max_value=64, integer=True, where=b)
    ratio = sc.number(
        "Draft step / target step", "draft_ratio", 0.05, min_value=0.0, max_value=2.0, step=0.01, where=c,
        help="1/20 for a draft 20× faster than the target",
    )  # fmt: skip
    verify = sc.number(
        "Verification / target step", "verify_ratio", 1.0, min_value=0.01, max_value=10.0, step=0.1, where=d,
        help="above 1 when a loaded batch makes verification cost more than a plain step",
    )  # fmt: skip
    e, f, g = st.columns(3)
    step_ms = sc.number("Plain target step [ms]", "step", 20.0, min_value=0.01, max_value=1e5, step=1.0, where=e)
    tpot_target = sc.number("TPOT target [ms]", "tpot", 20.0, min_value=0.01, max_value=1e5, step=1.0, where=f)
    tbt_target = sc.number("TBT (per gap) target [ms]", "tbt", 50.0, min_value=0.01, max_value=1e5, step=1.0, where=g)
    timing = speculative_timing(alpha, k, Q_(step_ms, "ms"), ratio, verify)
    best_k, best = best_draft_length(alpha, ratio, max(32, k), verify)  # the search includes the user's K
    gap_ratio = (timing.tbt_gap / Q_(tpot_target, "ms")).m_as("")
    gain = best / timing.speedup - 1
    tpot_ok, tbt_ok = timing.tpot <= Q_(tpot_target, "ms"), timing.tbt_gap <= Q_(tbt_target, "ms")
    cols = answer.columns(5)
    cols[0].metric("Speedup", f"{ui.number(timing.speedup, 3)}×")
    cols[1].metric("Tokens per round", ui.number(timing.tokens_per_round, 3))
    cols[2].metric("TPOT", ui.fmt(timing.tpot, "ms"))
    cols[3].metric(
        "TBT, longest gap", ui.fmt(timing.tbt_gap, "ms"),
        # Red only when the per-gap TBT target is missed: a gap above the TPOT target alone is not a miss.
        delta=f"{ui.fmt(gap_ratio, digits=2)}× the TPOT target" if gap_ratio > 1 else None,
        delta_color="off" if tbt_ok else "inverse",
        help="the longest wait for the next token (time between tokens): a whole round, since a round's tokens "
        "arrive together",
    )  # fmt: skip
    cols[4].metric(
        "Best K at this α", f"K = {best_k}" if best_k != k else f"K = {k} (yours)",
        delta=(
            None if best_k == k
            else f"+{ui.fmt(100 * gain, digits=2)} % speedup over K = {k}" if gain >= MATERIAL_GAIN
            else f"within {MATERIAL_GAIN:.1%} of K = {k}"
        ),
        delta_color="normal" if gain >= MATERIAL_GAIN else "off",
    )  # fmt: skip
    sc.answered()
    if best_k != k:
        st.caption(
            f"Best K = {best_k} gives {ui.fmt(best, digits=4)}×; you have K = {k} at "
            f"{ui.fmt(timing.speedup, digits=4)}×"
            + (f": within {MATERIAL_GAIN:.1%}, no reason to change." if gain < MATERIAL_GAIN else ".")
        )
    verdict = f"TPOT target {'met' if tpot_ok else 'missed'}, per-gap TBT target {'met' if tbt_ok else 'missed'}"
    if gap_ratio > 1:
        verdict += (
            f"; the gap between deliveries ({ui.fmt(timing.tbt_gap, 'ms')}) is {ui.fmt(gap_ratio, digits=2)}× "
            "the TPOT target"
        )
    (st.success if tpot_ok and tbt_ok else st.warning)(
        f"{verdict}: tokens arrive in blocks, so the gap is a whole round even when the average per token is short "
        "(section 10.7.6)."
    )
    if timing.speedup < 1:
        break_even = acceptance_for_speedup(1.0, k, ratio, verify)
        st.warning(
            f"Slower than plain decoding: acceptance must exceed {ui.number(break_even, 3)} for K = {k} to gain."
        )
    grid = np.linspace(0, 1, 101)
    lengths = sorted({*DRAFT_LENGTHS, k})
    figure = speculative_speedup_figure(grid, {n: speedup(grid, n, ratio, verify) for n in lengths})
    st.plotly_chart(figure, key="speculative-speedup")
    ui.show_math(expected_tokens_per_round, alpha, k, title="expected tokens per round (Eq. 6)")
    ui.show_math(speedup, alpha, k, ratio, verify, title="speedup")


def _chunked(sc):
    reg = ui.registry()
    a, b, c = st.columns(3)
    model = sc.model("Model", "model", "llama-3.1-70b", where=a)
    accelerator = sc.select("Accelerator", "gpu", list(reg.accelerators), "h100-sxm", where=b)
    precision = sc.select("Precision", "precision", ["fp16", "bf16", "fp8"], "fp16", where=c)
    d, e, f, g = st.columns(4)
    tp = sc.select("Tensor-parallel degree", "tp", [1, 2, 4, 8], 4, where=d)
    prompt = sc.number(
        "Arriving prompt [token]", "prompt", 8192, min_value=1, max_value=1_000_000, integer=True, where=e
    )
    chunk = sc.number("Chunk size [token]", "chunk", 512, min_value=1, max_value=1_000_000, integer=True, where=f)
    batch = sc.number("Streams decoding", "streams", 32, min_value=0, max_value=100_000, integer=True, where=g)
    model_entry, device = reg.model(model), reg.accelerator(accelerator)
    result = chunked_prefill_tradeoff(model_entry, device, prompt, chunk, batch, precision, tp)
    cols = st.columns(4)
    cols[0].metric("Largest gap, monolithic", ui.fmt(result.monolithic_tbt, "ms"))
    cols[1].metric("Largest gap, chunked", ui.fmt(result.chunked_tbt, "ms"))
    cols[2].metric("Prompt's TTFT, monolithic", ui.fmt(result.monolithic_ttft, "ms"))
    cols[3].metric("Prompt's TTFT, chunked", ui.fmt(result.chunked_ttft, "ms"))
    st.caption(
        f"{result.iterations} hybrid iterations (Eq. 9 roofline lower bound on one device of the TP group; "
        "Figure 13): chunking bounds the streams' gap and lengthens the prompt's own TTFT."
    )
    sweep = chunk_sweep(ui.extra_files(), model, accelerator, prompt, batch, precision, tp)
    if len(sweep):
        figure = curves_figure(
            sweep["chunk [token]"],
            {
                "largest gap (TBT)": Q_(sweep["largest gap [ms]"].to_numpy(), "ms"),
                "prompt's TTFT": Q_(sweep["prompt's TTFT [ms]"].to_numpy(), "ms"),
            },
            x_name="Chunk size", y_name="Time", x_unit="token", y_unit="ms", title="Chunked prefill trade",
            log_x=True, mode="lines+markers", powers_of_two=True,
        )  # fmt: skip
        st.plotly_chart(figure, key="chunked-prefill")
        ui.table(sweep, "chunked-prefill")


def _handoff(sc):
    reg = ui.registry()
    a, b, c = st.columns(3)
    model = sc.model("Model", "handoff_model", "llama-3.1-70b", where=a)
    link = sc.select("Interconnect", "link", list(reg.interconnects), "infiniband-ndr", where=b)
    kv = sc.select("KV precision", "handoff_kv", ["fp16", "fp8"], "fp16", where=c)
    d, e = st.columns(2)
    prompt = sc.number(
        "Prompt [token]", "handoff_prompt", 4096, min_value=1, max_value=10_000_000, integer=True, where=d
    )
    paths = sc.number("Parallel links", "paths", 1, min_value=1, max_value=64, integer=True, where=e)
    model_entry, interconnect = reg.model(model), reg.interconnect(link)
    latency = interconnect.startup_latency if interconnect.startup_latency is not None else Q_(0, "us")
    time = model_kv_handoff_time(model_entry, prompt, interconnect, kv, paths, latency)
    per_token = model_kv_bytes_per_token(model_entry, kv)
    kv_bytes = kv_cache_bytes(1, prompt, per_token)
    cols = st.columns(3)
    cols[0].metric("KV cache to move", ui.fmt(kv_bytes, "GB"))
    cols[1].metric("Handoff time (Eq. 10)", ui.fmt(time, "ms"))
    cols[2].metric("Link bandwidth per direction", ui.fmt(interconnect.bandwidth, "GB/s"))
    if interconnect.startup_latency is None:
        st.caption("This registry link has no startup latency; the handoff is bandwidth only.")
    ui.show_math(kv_handoff_time, kv_bytes.to("GB"), interconnect.bandwidth.to("GB/s"), latency, paths,
                 title="KV handoff (Eq. 10)")  # fmt: skip
    prompts = np.unique(np.geomspace(256, max(prompt, 131_072), 40).astype(int))
    links = [
        name
        for name in ("nvlink4", "infiniband-ndr", "ethernet-400g-roce", "pcie-gen5-x16")
        if name in reg.interconnects
    ]
    series = {
        name: model_kv_handoff_time(model_entry, prompts, reg.interconnect(name), kv, paths) for name in {*links, link}
    }
    figure = curves_figure(
        prompts, series, x_name="Prompt", y_name="Handoff time", x_unit="token", y_unit="ms",
        title="KV handoff against prompt length", log_x=True, log_y=True,
    )  # fmt: skip
    st.plotly_chart(figure, key="handoff")

    st.markdown("**Pool sizes of a disaggregated deployment (section 10.8.3)**")
    f, g, h = st.columns(3)
    rate = sc.number("Arrival rate [request/s]", "pool_rate", 10.0, min_value=0.001, max_value=1e7, where=f)
    output = sc.number(
        "Mean output [token]", "pool_output", 500, min_value=1, max_value=1_000_000, integer=True, where=g
    )
    cap = sc.slider("Utilization cap", "pool_cap", 0.8, min_value=0.05, max_value=1.0, step=0.05, where=h)
    i, j = st.columns(2)
    prefill_rate = sc.number(
        "Prefill instance [token/s]", "prefill_rate", 20_000.0, min_value=1.0, max_value=1e9, step=1000.0, where=i
    )
    decode_rate = sc.number(
        "Decode instance [token/s]", "decode_rate", 2_000.0, min_value=1.0, max_value=1e9, step=100.0, where=j
    )
    pools = disaggregated_pool_sizes(
        Q_(rate, "request/s"), prompt, output, Q_(prefill_rate, "token/s"), Q_(decode_rate, "token/s"), cap
    )
    cols = st.columns(4)
    cols[0].metric("Prefill instances", ui.fmt(pools.prefill_instances))
    cols[1].metric("Decode instances", ui.fmt(pools.decode_instances))
    cols[2].metric("Prefill utilization", f"{ui.number(100 * pools.prefill_utilization, 3)} %")
    cols[3].metric("Decode utilization", f"{ui.number(100 * pools.decode_utilization, 3)} %")


def _quantization(sc):
    reg = ui.registry()
    a, b = st.columns(2)
    accelerator = sc.select("Accelerator", "quant_gpu", list(reg.accelerators), "h100-sxm", where=a)
    block = sc.number("Quantization block [weight]", "block", 128, min_value=1, max_value=1_000_000, integer=True,
                      where=b)  # fmt: skip
    device = reg.accelerator(accelerator)
    rows = []
    for name, weights, arithmetic in FORMATS:
        try:
            ceilings = quantization_ceilings(weights, arithmetic, device)
        except (KeyError, ValueError) as exc:  # this accelerator lacks the arithmetic precision
            rows.append({"format": name, "note": ui.message(exc)})
            continue
        overhead = quantization_overhead(weights, block)
        rows.append(
            {
                "format": name,
                "weight bytes ratio": ceilings.weight_bytes_ratio,
                "decode traffic ceiling": ceilings.decode_traffic_ceiling,
                "prefill compute ceiling": ceilings.prefill_compute_ceiling,
                "effective bits per weight": overhead.effective_bits,
                "note": "",
            }
        )
    st.caption(
        f"Table 12 on {device.name}: ceilings against FP16, not measured gains. Decode is bound by weight traffic; "
        "prefill by the arithmetic precision's peak (1 for weight-only formats, which dequantize to FP16)."
    )
    ui.table(pd.DataFrame(rows), "quantization-ceilings")


ui.run(main)
