"""Memory fit: weights + KV cache + reserve per device, the KV wall, the precision dividend, prefix caching, paging."""

from typing import Any, NamedTuple

import numpy as np
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.memory import (
    compare_precisions,
    kv_bytes_per_token,
    kv_wall,
    max_batch,
    memory_footprint,
    min_tensor_parallel,
    model_memory_fit,
    paged_allocation,
    precision_dividend,
    prefix_cache_memory,
    prefix_cache_tokens,
    reservation_vs_paging,
    tensor_parallel_valid,
)
from calculator.performance import engine_memory_fit
from calculator.plots import kv_wall_figure, memory_breakdown_figure
from calculator.precision import PRECISIONS, bits_per_element, bytes_per_element

WEIGHT_PRECISIONS = [p for p in ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4") if p in PRECISIONS]
KV_PRECISIONS = ["fp16", "bf16", "fp8", "int8", "int4"]
BASES = {
    "physical": "physical (registered bytes, e.g. 80 GiB)",
    "nameplate": "nameplate (the label's decimal figure, e.g. 80 GB)",
}
DEGREES = (1, 2, 4, 8, 16, 32, 64)
WALL_BATCHES = (1, 2, 4, 8, 16, 32, 64)


def main():
    st.title("Memory fit")
    st.caption(
        "Does it fit? Weights, the KV cache of the batch and a reserve against one device's memory, on the capacity "
        "basis you choose (sections 10.7 and 10.9; `calculator.memory`)."
    )
    sc = ui.Scenario("memory")
    reg = ui.registry()
    left = middle = right = st.sidebar  # the inputs in the sidebar, the answer first (collapsed on a phone)
    with left:
        model_id = sc.model("Model", "model", "llama-3.1-70b")
        accelerator_id = sc.select("Accelerator", "gpu", list(reg.accelerators), "h100-sxm")
        basis = sc.select("Capacity basis", "basis", list(BASES), "physical", format_func=BASES.get)
        unit = sc.select("Show memory in", "unit", ["GB", "GiB"], "GB", help="GB = 10^9 B, GiB = 2^30 B")
    model = reg.model(model_id)
    degrees = [int(d) for d in np.array(DEGREES)[np.atleast_1d(tensor_parallel_valid(model, np.array(DEGREES)))]]
    with middle:
        weights = sc.select("Weight precision", "weights", WEIGHT_PRECISIONS, "fp16")
        kv = sc.select("KV-cache precision", "kv", KV_PRECISIONS, "fp16")
        tp = sc.select("Tensor-parallel degree", "tp", degrees, 2, help="degrees that split the model's heads")
        ranks = 1
        if (model.experts or 1) > 1:
            ranks = sc.select(
                "Attention ranks (mixture of experts)", "ranks", [1, 2, 4, 8], 1,
                help="attention data parallelism: ranks of TP GPUs each, with their own sequences and KV cache "
                "and a copy of the attention and dense weights, the routed experts spread over all the GPUs; "
                "batch and max batch are then the replica's",
            )  # fmt: skip
        block = sc.number("KV page size [token]", "block", 16, min_value=1, max_value=4096, integer=True)
    with right:
        context = sc.number(
            "Context per sequence [token]", "context", 4096, min_value=1, max_value=model.max_context or 10_000_000,
            integer=True, help="at most the model's context limit",
        )  # fmt: skip
        batch = sc.number("Batch [sequences]", "batch", 8, min_value=1, max_value=100_000, integer=True)
        reserve_gb = sc.number(
            "Reserve per device [GB]", "reserve", 2.0, min_value=0.0, max_value=1e4, step=0.5,
            help="activations, CUDA graphs, allocator slack",
        )  # fmt: skip
        engine = sc.select(
            "Serving engine", "engine", list(ui.ENGINES), "generic",
            help="an engine's memory policy answers first (what it claims of each device and keeps back: what the "
            "predictor, the fleet sizer and the simulator hold), the chapter's formula with your reserve second; "
            "generic: the chapter's formula first",
        )  # fmt: skip
    reserve = Q_(reserve_gb, "GB")
    accelerator = reg.accelerator(accelerator_id)
    fit = model_memory_fit(
        model, accelerator, context, batch, weights, kv, tp, reserve, capacity_basis=basis, block_size=block,
        data_parallel=ranks,
    )  # fmt: skip
    if ranks > 1:
        st.caption(f"{ranks} attention ranks of TP {tp}: {tp * ranks} GPUs; each holds {-(-batch // ranks)} of the "
                   f"{batch} sequences, and the per-device figures below are one GPU's.")  # fmt: skip

    st.divider()
    held = engine_memory_fit(
        model, accelerator, weights, context, tp, batch=batch, engine=ui.ENGINES[engine], kv_precision=kv,
        data_parallel=ranks,
    )  # fmt: skip
    chosen = _Chosen(model, accelerator, tp, ranks, context, batch, weights, kv, reserve, basis, block)
    if ui.ENGINES[engine] is None:
        _fit_summary(fit, unit, chosen)
        _served(held, context)
    else:  # the engine's own memory policy first; the chapter's formula second, labelled as the chapter's
        _engine_summary(held, engine, context, batch)
        st.markdown(
            "**The chapter's formula** (section 10.7.1, Napkin Math 10.5): the device's memory less the weights "
            "and the reserve you set, the KV cache in pages of the page size"
        )
        _fit_summary(fit, unit, chosen)
    sc.answered()
    _tabs(sc, fit, unit, chosen)


class _Chosen(NamedTuple):
    """What the page's inputs chose: the model and accelerator (registry entries), the layout and the memory."""

    model: Any
    accelerator: Any
    tp: int
    ranks: int
    context: int
    batch: int
    weights: str
    kv: str
    reserve: Any
    basis: str
    block: int


def _tabs(sc, fit, unit, chosen):
    """The tabs under the answer: budget, KV wall, precision dividend, prefix caching, paging waste."""
    model, accelerator, tp, ranks, context, batch, weights, kv, reserve, basis, block = chosen
    fit_tab, wall_tab, dividend_tab, prefix_tab, paging_tab = sc.tabs(
        ["Budget", "KV wall (Figure 9)", "Precision dividend", "Prefix caching", "Paging waste"]
    )
    if fit_tab.open:
        with fit_tab:
            _budget(fit, unit, model, accelerator.id, tp, batch, ranks, context, kv)
    if wall_tab.open:
        with wall_tab:
            _kv_wall(fit, model, batch, unit)
    if dividend_tab.open:
        with dividend_tab:
            _dividend(sc, model, accelerator, context, weights, kv, tp, reserve, basis)
    if prefix_tab.open:
        with prefix_tab:
            _prefix(sc, fit, unit, block)
    if paging_tab.open:
        with paging_tab:
            _paging(sc, fit, context, block)


def _budget(fit, unit, model, accelerator_id, tp, batch, ranks, context, kv):
    """The budget tab: the breakdown chart, the table of the fit, its JSON and the math."""
    st.plotly_chart(memory_breakdown_figure({f"{accelerator_id}, TP {tp}": fit}, unit=unit), key="breakdown")
    values = {
        "capacity per device": fit.capacity,
        "weights per device": fit.weights,
        "reserve": fit.reserve,
        "KV cache of the batch": fit.kv,
        "KV per token per device": fit.kv_per_token,
        "KV per sequence per device": fit.kv_per_request,
        "free": fit.free,
        "missing": fit.missing,
        "max batch at this context": fit.max_batch,
        "max context at this batch": fit.max_context,
    }
    units = dict.fromkeys(values, unit)
    units.update(
        {"KV per token per device": "kB/token", "max batch at this context": "sequences",
         "max context at this batch": "tokens"}
    )  # fmt: skip
    ui.table(ui.rows(values, units), "memory-fit")
    ui.download_json(fit, "memory-fit")
    ui.show_math(
        memory_footprint,
        fit.weights.to(unit),
        -(-batch // ranks),
        context,
        fit.kv_per_token.to("kB/token"),
        fit.reserve.to(unit),
        title="memory in use per device (Napkin Math 10.5)",
    )
    if model.attention != "mla":
        ui.show_math(
            kv_bytes_per_token,
            model.layers,
            model.kv_heads,
            model.head_dim,
            bytes_per_element(kv),
            title="KV bytes per token of the whole model (Eq. 5; a device holds its TP share)",
        )


def _served(held, context):
    """What the engine-agnostic profile holds under its memory policy, below the chapter's figures."""
    if not held.weights_fit:
        st.warning(ui.plain(f"Served by {held.engine}: {held.reason}."))
        return
    st.info(
        ui.plain(
            f"Served by {held.engine}: {held.sequences:,} sequences of {context:,} tokens at once, or "
            f"{held.max_context:,} tokens at this batch, under its memory policy ({held.memory_policy}); the "
            "benchmark prediction, the fleet sizer and the simulator hold the same. The figures above are the "
            "chapter's formula with the reserve you set.",
            limit=1000,
        )
    )


def _engine_summary(held, label, context, batch):
    """The headline under the engine's memory policy (``engine_memory_fit``): fits, max batch, max context."""
    cols = st.columns(4)
    fits = held.weights_fit and batch <= held.sequences
    cols[0].metric(f"Fits ({label})", "yes" if fits else "no")
    if not held.weights_fit:  # no KV cache at all: say why, not "0 sequences"
        cols[1].metric(f"Max batch at this context ({label})", "weights do not fit")
        cols[2].metric(f"Max context at this batch ({label})", "weights do not fit")
        cols[3].metric(f"KV cache ({label})", "weights do not fit")
        st.warning(ui.plain(f"Does not fit served by {held.engine}: {held.reason}.", limit=1000))
        return
    cols[1].metric(f"Max batch at this context ({label})", ui.fmt(held.sequences))
    cols[2].metric(f"Max context at this batch ({label})", f"{ui.fmt(held.max_context)} tokens")
    cols[3].metric(f"KV cache ({label})", f"{ui.fmt(held.kv_tokens)} tokens")
    policy = (
        f"under {held.engine}'s memory policy ({held.memory_policy}, KV cache {held.kv_precision} in blocks of "
        f"{held.block} token{'s' if held.block != 1 else ''}), as the benchmark "
        "prediction, the fleet sizer and the simulator hold it"
    )
    if fits:
        st.success(
            ui.plain(
                f"{batch:,} sequences of {context:,} tokens fit {policy}: up to {held.sequences:,} sequences at this "
                f"context, or {held.max_context:,} tokens at this batch.",
                limit=1000,
            )
        )
        return
    st.warning(
        ui.plain(
            f"Does not fit {policy}: the KV cache holds {held.sequences:,} sequences of {context:,} tokens, fewer "
            f"than {batch:,}; {batch:,} sequences fit at most {held.max_context:,} tokens each.",
            limit=1000,
        )
    )


def _fit_summary(fit, unit, chosen):
    model, accelerator, _, _, context, batch, weights, kv, reserve, basis, block = chosen
    cols = st.columns(5)
    cols[0].metric("Fits", "yes" if fit.fits else "no")
    cols[1].metric("Capacity / device", ui.fmt(fit.capacity, unit, 4))
    cols[2].metric("Weights / device", ui.fmt(fit.weights, unit, 4))
    cols[3].metric("KV cache / device", ui.fmt(fit.kv, unit, 4))
    cols[4].metric("Max batch at this context", ui.fmt(fit.max_batch))
    if fit.fits:
        st.success(
            f"{batch} sequences of {context:,} tokens fit with {ui.fmt(fit.free, unit, 4)} free; up to "
            f"{fit.max_batch:,} sequences at this context, or {fit.max_context:,} tokens at this batch."
        )
        return
    smallest_tp = min_tensor_parallel(
        model, accelerator, context, batch, weights, kv, reserve, capacity_basis=basis, block_size=block
    )
    alternatives = []
    if fit.max_batch > 0:
        alternatives.append(f"a batch of {fit.max_batch} at {context:,} tokens")
    if fit.max_context > 0:
        alternatives.append(f"{batch} sequences of at most {fit.max_context:,} tokens")
    if smallest_tp:
        alternatives.append(f"tensor parallelism over {smallest_tp} devices")
    closest = "; ".join(alternatives) if alternatives else "none at this precision: lower the weight precision"
    st.warning(
        f"Does not fit: {ui.fmt(fit.missing, unit, 4)} missing per device "
        f"(weights {ui.fmt(fit.weights, unit, 4)} + reserve + KV {ui.fmt(fit.kv, unit, 4)} > "
        f"{ui.fmt(fit.capacity, unit, 4)}). Closest feasible alternatives: {closest}."
    )


def _kv_wall(fit, model, batch, unit):
    longest = model.max_context or 131_072
    contexts = np.unique(np.geomspace(256, longest, 80).astype(int))
    batches = sorted({*WALL_BATCHES, batch})
    wall = kv_wall(fit.capacity, fit.weights, fit.kv_per_token, contexts, batches, fit.reserve)
    st.plotly_chart(kv_wall_figure(wall, unit=unit), key="kv-wall")
    st.caption(
        "Memory in use per device against context, one line per batch (log scale); where a line crosses the "
        "capacity (a circle) the batch hits the wall (Figure 9, section 10.7.1). The boundary is the longest "
        "context each batch fits."
    )
    ui.table(
        ui.rows({f"batch {b}": f"{int(c):,} tokens" for b, c in zip(wall.batches, wall.boundary, strict=True)}),
        "kv-wall-boundaries",
    )


def _dividend(sc, model, accelerator, context, weights, kv, tp, reserve, basis):
    st.caption("Napkin Math 10.7: lower precision frees weight memory and shrinks every token's KV bytes.")
    a, b = st.columns(2)
    new_weights = sc.select("New weight precision", "new_weights", WEIGHT_PRECISIONS, "int4", where=a)
    new_kv = sc.select("New KV precision", "new_kv", KV_PRECISIONS, "int8", where=b)
    result = compare_precisions(model, accelerator, context, (weights, kv), (new_weights, new_kv), tp, reserve, basis)
    cols = st.columns(3)
    cols[0].metric(f"Max batch at {weights}/{kv}", ui.fmt(result.before.max_batch))
    cols[1].metric(f"Max batch at {new_weights}/{new_kv}", ui.fmt(result.after.max_batch))
    if result.before.max_batch > 0:
        cols[2].metric("Dividend (continuous)", f"{ui.number(result.dividend, 3)}×")
    else:
        cols[2].metric("Dividend (continuous)", "n/a")
        st.info(f"Nothing fits at {weights}/{kv}, so there is no batch to multiply; compare the max batches instead.")
    ui.show_math(
        precision_dividend,
        result.before.capacity.to("GB"),
        result.before.weights.to("GB"),
        result.before.reserve.to("GB"),
        bits_per_element(weights),
        bits_per_element(new_weights),
        bits_per_element(kv),
        bits_per_element(new_kv),
        title="the precision dividend",
    )


def _prefix(sc, fit, unit, block):
    st.caption("Napkin Math 10.6 and Table 10: requests that share a prompt prefix share its KV blocks.")
    a, b, c, d = st.columns(4)
    users = sc.number("Concurrent requests", "users", 1000, min_value=1, max_value=10_000_000, integer=True, where=a)
    shared = sc.number("Shared prefix [token]", "prefix", 2000, min_value=0, max_value=1_000_000, integer=True, where=b)
    private = sc.number("Private tokens each", "private", 500, min_value=0, max_value=1_000_000, integer=True, where=c)
    hit = sc.slider("Hit rate", "hit", 1.0, min_value=0.0, max_value=1.0, step=0.05, where=d)
    result = prefix_cache_memory(users, shared, private, fit.kv_per_token, hit, block)
    cols = st.columns(3)
    cols[0].metric("KV without sharing", ui.fmt(result.bytes_without, unit, 4))
    cols[1].metric("KV with sharing", ui.fmt(result.bytes_with, unit, 4))
    cols[2].metric("Memory saved", f"{ui.number(100 * result.reduction, 3)} %")
    ui.show_math(prefix_cache_tokens, users, shared, private, hit, block, title="token slots held")
    ui.download_json(result, "prefix-caching")


def _paging(sc, fit, context, block):
    st.caption(
        "Section 10.7.2-10.7.3: a contiguous allocator reserves the maximum length per sequence; paging allocates "
        "blocks on demand and wastes at most one partial block."
    )
    a, b = st.columns(2)
    reserved = sc.number(
        "Reserved per sequence (max length) [token]", "reserved", 8192, min_value=1, max_value=10_000_000,
        integer=True, where=a,
    )  # fmt: skip
    used = sc.number(
        "Actually used per sequence [token]", "used", 1024, min_value=1, max_value=10_000_000, integer=True, where=b
    )
    if used > reserved:
        st.warning(f"A sequence cannot use more than it reserved: the closest feasible value is {reserved:,} tokens.")
        return
    pool = int(max_batch(fit.capacity, fit.weights, fit.kv_per_token, 1, fit.reserve))
    if pool == 0:
        st.warning("No KV pool: the weights and reserve fill the device. Use more devices or a lower precision.")
        return
    result = reservation_vs_paging(pool, reserved, used, block)
    pages = paged_allocation(context, block)
    cols = st.columns(4)
    cols[0].metric("KV pool [token slots]", f"{pool:,}")
    cols[1].metric("Sequences, reserved", f"{result.reserved_sequences:,}")
    cols[2].metric("Sequences, paged", f"{result.paged_sequences:,}")
    cols[3].metric("Capacity gain", f"{ui.number(result.capacity_gain, 3)}×")
    values = {
        "reservation waste (unused share of reserved slots)": result.reservation_waste,
        "paged waste (unused share of the last page)": result.paged_waste,
        "idle reserved token slots": result.idle_reserved_tokens,
        f"pages for one {context:,}-token sequence": pages.blocks,
        "tokens wasted in its last page": pages.waste_tokens,
    }
    ui.table(ui.rows(values), "paging-waste")


ui.run(main)
