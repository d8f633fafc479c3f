"""Benchmark prediction: what a closed-loop serving benchmark would report, per client concurrency."""

import numpy as np
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.fleet.inputs import MOE_LAYOUTS
from calculator.kernels import tables_for
from calculator.memory import tensor_parallel_valid
from calculator.performance import ARRIVALS, BENCHMARK_UNITS, MAX_STREAM_INTERVAL, engine_profile, predict_benchmark
from calculator.plots import benchmark_prediction_figure

DEGREES = (1, 2, 4, 8, 16)
#: How the caption names a mixture of experts' layout (nothing for a dense model's tensor parallelism).
LAYOUT_NOTES = {
    "tensor": "",
    "expert": " (experts spread over the GPUs)",
    "attention-dp": " (an attention rank per GPU)",
}
#: The length spread that mixes the clients after the first burst (and lengthens the running sequences' mean
#: context); "none" is mixed at once.
MIXED_AT_ONCE = 0.0


def main():
    st.title("Benchmark prediction")
    st.caption(
        "What a closed-loop serving benchmark would report: every client sends its next request when its last one "
        "completes, all start together, every request has the same prompt and output lengths. The engine's "
        "scheduler priced iteration by iteration on measured kernel tables, its costs fitted on H100 benchmarks, "
        "with 80 % intervals from cross-validation (`calculator.performance.predict_benchmark`; "
        "docs/performance-model.md)."
    )
    sc = ui.Scenario("benchmark")
    reg = ui.registry()
    with st.sidebar:
        model_id, accelerator_id, precision, tp, layout, engine, kv_choice = _replica(sc, reg)
        release, copies = _release_and_copies(sc, model_id, layout, reg)
        prompt, output, text, arrivals, spread, rounds, (streaming, interval) = _benchmark(sc)
    clients = np.array(sorted(set(ui.parse_numbers(text, "Clients", integer=True, minimum=1))), dtype=float)
    model, accelerator = reg.model(model_id), reg.accelerator(accelerator_id)
    kv = None if kv_choice == ui.ENGINE_DEFAULT_KV else kv_choice  # None: the engine's default, stated in the result
    length_cv = spread if (arrivals == "dispersed" and spread > MIXED_AT_ONCE) else None
    # the layout's (tensor-parallel degree, attention ranks, expert parallelism) on the replica's `tp` GPUs
    degree, ranks, spread_over = {"tensor": (tp, 1, 1), "expert": (tp, 1, tp), "attention-dp": (1, tp, tp)}[layout]
    profile = engine_profile(engine, reg).for_release(release) if release else engine
    prediction = predict_benchmark(
        model, accelerator, precision, degree, prompt, output, clients, profile, kv_precision=kv,
        requests_per_client=rounds, arrivals=arrivals, length_cv=length_cv, data_parallel=ranks,
        expert_parallel=spread_over, redundant_experts=copies, streaming=streaming, stream_interval=interval,
        registry=reg,
    )  # fmt: skip
    _headline(prediction, clients)
    sc.answered()
    basis = "the engine's default for these weights" if kv_choice == ui.ENGINE_DEFAULT_KV else "chosen"
    kernels = "measured kernel tables" if prediction.measured_kernels else "the generic efficiency curve (no tables)"
    if not prediction.measured_kernels and tables_for(accelerator, registry=reg).anchors:
        kernels = "the generic efficiency curve anchored to this GPU's own GEMM measurements (AMD's aiter tuner)"
    st.caption(
        f"{model_id} {precision} on {tp} × {ui.plain(accelerator_id)}{LAYOUT_NOTES[layout]} under the "
        f"{prediction.engine} profile; KV "
        f"cache {prediction.kv_precision} ({basis}); step times from {kernels}. The intervals held the measured "
        "value in 80-85 % of cross-validated predictions, and are wider away from the H100."
    )
    if prediction.release_note and prediction.release_fitted:
        st.caption(f"Release: {prediction.release_note}.")
    if arrivals == "waves" and spread > MIXED_AT_ONCE:
        st.info("The length spread applies to dispersed arrivals only; identical requests in waves have none.")
    _limits(prediction, clients)
    left, right = st.columns(2)
    left.plotly_chart(benchmark_prediction_figure(prediction, clients, "ttft"), key="ttft-chart")
    right.plotly_chart(benchmark_prediction_figure(prediction, clients, "tpot"), key="tpot-chart")
    shown = ["engine", "kv_precision", "measured_kernels", "release_note", "release_fitted", "load_note"]
    frame = prediction.to_frame(BENCHMARK_UNITS).drop(columns=shown)
    frame.insert(0, "clients", clients.astype(int))
    ui.table(_readable(frame), "benchmark-prediction", download=frame)
    ui.download_json(prediction, "benchmark-prediction")


def _readable(frame):
    """The table as read: each 80 % interval as one text column beside its value, the step times left to the CSV.

    Every column of the prediction (eleven) ran to 2,550 px, cut mid-way through the throughput column at 1440 px.
    """
    table = frame[["clients", "ttft [ms]", "tpot [ms]", "throughput [request/s]", "output_throughput [token/s]"]]
    table = table.copy()
    for name, at in (("ttft", 2), ("tpot", 4)):
        low, high = frame[f"{name}_interval.low [ms]"], frame[f"{name}_interval.high [ms]"]
        spans = [f"{ui.number(a)} to {ui.number(b)}" for a, b in zip(low, high, strict=True)]
        table.insert(at, f"{name} 80 % interval [ms]", spans)
    return table


def _replica(sc, reg):
    """The sidebar's replica: model, accelerator, precision, tensor-parallel degree, MoE layout, engine, KV cache."""
    st.subheader("Model and hardware")
    model_id = sc.model("Model", "model", "llama-3.1-70b")
    accelerator_id = sc.select("Accelerator", "gpu", list(reg.accelerators), "h100-sxm")
    precision = sc.select("Weight precision", "precision", ui.SERVING_PRECISIONS, "fp8")
    model = reg.model(model_id)
    degrees = [int(d) for d in np.array(DEGREES)[np.atleast_1d(tensor_parallel_valid(model, np.array(DEGREES)))]]
    tp = sc.select("Tensor-parallel degree", "tp", degrees, 4, help="degrees that split the model's heads")
    layout = "tensor"
    if (model.experts or 1) > 1:
        layout = sc.select(
            "Expert layout (mixture of experts)", "moe_layout", list(MOE_LAYOUTS), "tensor",
            help="How the replica's GPUs hold the experts: 'tensor' splits each expert over them, 'expert' "
            "spreads whole experts over them (expert parallelism over the TP degree), 'attention-dp' gives each "
            "GPU its own attention rank and sequences with the experts spread (attention data parallelism)",
        )  # fmt: skip
    engine = ui.ENGINES[sc.select("Serving engine", "engine", list(ui.ENGINES), "vLLM")]
    kv_choice = sc.select(
        "KV-cache precision", "kv", [ui.ENGINE_DEFAULT_KV, "fp16", "bf16", "fp8"], ui.ENGINE_DEFAULT_KV,
        help="The engine's default for the checkpoint: FP8 for FP8/FP4 weights under vLLM, TensorRT-LLM and "
        "the generic profile (on GPUs with FP8), 16-bit otherwise (calculator.performance.KV_PRECISION_RULE).",
    )  # fmt: skip
    return model_id, accelerator_id, precision, tp, layout, engine, kv_choice


def _release_and_copies(sc, model_id, layout, reg):
    """The engine release to price (blank: the current defaults) and, for experts spread over the GPUs, their copies."""
    release = sc.text(
        "Engine release (optional)", "release", "",
        help="e.g. 0.12 or 1.2.0: the release's dated mechanisms (vLLM schedules synchronously and runs a BF16 cache "
        "for FP8 weights before 0.14), and whether the costs were fitted on its benchmarks (EngineProfile.for_release)",
    ).strip()  # fmt: skip
    copies = 0
    if (reg.model(model_id).experts or 1) > 1 and layout != "tensor":
        copies = sc.number(
            "Redundant experts", "redundant", 0, min_value=0, max_value=4096, integer=True,
            help="copies of the busiest experts an expert-parallel load balancer places beside the experts (vLLM's "
            "EPLB, SGLang's --ep-num-redundant-experts, TensorRT-LLM's num_slots); SGLang and TensorRT-LLM need the "
            "experts plus copies to divide over the GPUs",
        )  # fmt: skip
    return release, int(copies)


def _benchmark(sc):
    """The sidebar's benchmark: lengths, the clients of each run, arrivals, length spread, requests per client."""
    st.subheader("Benchmark")
    prompt = sc.number("Prompt [token]", "prompt", 1024, min_value=1, max_value=1_000_000, integer=True)
    output = sc.number("Output [token]", "output", 128, min_value=1, max_value=1_000_000, integer=True)
    text = sc.text(
        "Clients (comma-separated)", "clients", "1, 4, 16, 64, 256, 1024",
        help="each a separate benchmark run of that many concurrent clients",
    )  # fmt: skip
    arrivals = sc.select(
        "Arrivals", "arrivals", list(ARRIVALS), "dispersed",
        help="dispersed: requests vary a little in length or timing, so after the first burst the clients meet "
        "by chance; waves: identical requests started together stay together",
    )  # fmt: skip
    spread = sc.number(
        "Output length spread (CV)", "length_cv", MIXED_AT_ONCE, min_value=0.0, max_value=0.5, step=0.05,
        help="the coefficient of variation of the output lengths that mixes the clients again after the first "
        "burst (0: mixed at once); dispersed arrivals only",
    )  # fmt: skip
    rounds = sc.number(
        "Requests per client", "rounds", 10, min_value=1, max_value=1_000_000, integer=True,
        help="the first burst weighs one request in this many",
    )  # fmt: skip
    streaming = sc.toggle(
        "Tokens streamed to the clients", "streaming", True,
        help="on: each token is streamed, as serving benchmarks do (the costs were fitted on such runs); off: each "
        "output returned whole, as an offline throughput benchmark does (TensorRT-LLM's loop then builds no response "
        "a token and its overlap scheduler hides its costs behind the GPU; EngineProfile.for_streaming)",
    )  # fmt: skip
    interval = sc.number(
        "Stream interval [iterations]", "stream_interval", 1, min_value=1, max_value=MAX_STREAM_INTERVAL,
        integer=True, disabled=not streaming,
        help="iterations between a streamed request's responses (TensorRT-LLM's stream_interval, 1 by default; its "
        "guide sets 2 to 4 at large batches): the response's share of the engine's per-sequence cost is paid once in "
        "that many iterations (EngineProfile.with_stream_interval); vLLM and SGLang build responses outside their loop",
    )  # fmt: skip
    return prompt, output, text, arrivals, spread, rounds, (streaming, int(interval) if streaming else None)


def _limits(prediction, clients):
    """Where the KV cache or the sequence cap holds fewer requests than there are clients, and the caveats."""
    limited = np.atleast_1d(prediction.memory_limited)
    if limited.any():
        first = int(clients[limited][0])
        st.warning(
            f"From {first:,} clients the KV cache holds fewer requests than there are clients "
            f"({int(np.atleast_1d(prediction.max_concurrency)[0]):,} at these lengths): the others wait for a slot."
        )
    capped = np.atleast_1d(prediction.sequence_limited)
    if capped.any():
        first = int(clients[capped][0])
        held = int(np.broadcast_to(prediction.active_batch, clients.shape)[capped][0])
        st.warning(
            f"From {first:,} clients the engine's sequence cap holds {held:,} requests at once, fewer than the KV "
            f"cache would ({int(np.atleast_1d(prediction.max_concurrency)[0]):,}): the others wait for a slot, and "
            "more memory would not hold more."
        )
    for caveat in prediction.caveats():
        st.info(f"{caveat} (docs/performance-model.md, 'Decisions and limits')")


def _headline(prediction, clients):
    """The metrics of the largest concurrency: TTFT and TPOT (their intervals in the help), the throughputs."""

    def at(value):  # the largest concurrency's value of a (possibly array) quantity
        return Q_(np.atleast_1d(value.magnitude)[-1], value.units)

    st.subheader(f"At {int(clients[-1]):,} clients")
    cols = st.columns(4)
    for col, label, name in ((cols[0], "TTFT", "ttft"), (cols[1], "TPOT", "tpot")):
        low, high = (ui.fmt(at(end)) for end in getattr(prediction, f"{name}_interval"))
        col.metric(label, ui.fmt(at(getattr(prediction, name))), help=f"80 % interval: {low} to {high}")
    cols[2].metric("Requests/s", ui.number(at(prediction.throughput).m_as("1/s")))
    low, high = (ui.number(at(end).m_as("token/s")) for end in prediction.output_throughput_interval)
    cols[3].metric(
        "Output tokens/s",
        ui.number(at(prediction.output_throughput).m_as("token/s")),
        help=f"Range with TTFT and TPOT at their intervals' ends together (about 75 %): {low} to {high}",
    )


ui.run(main)
