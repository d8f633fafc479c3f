"""Extract compact kernel-efficiency tables from NVIDIA's aiconfigurator-core wheel.

The wheel (PyPI ``aiconfigurator-core``, Apache-2.0, NVIDIA) ships measured kernel microbenchmarks per
GPU system and serving framework: GEMMs by shape and dtype, prefill ("context") and decode
("generation") attention, and all-reduce (NCCL and each framework's custom kernel). This script reads
them and writes the small tables the performance model interpolates (``calculator/data/calibration/kernels/``):

* ``gemm.csv``: achieved TFLOP/s of ``m x k @ k x n`` GEMMs on a grid of powers of two;
* ``attention_prefill.csv``: achieved TFLOP/s of causal prefill attention by prompt length and
  ``batch x heads`` (head_dim 128, 16-bit KV cache);
* ``attention_decode.csv``: latency of one decode-attention kernel by batch and context, for one
  KV head of width 128 at 16 bits (512 bytes per token); other layouts scale the context by bytes;
* ``allreduce.csv``: latency of one in-node all-reduce of 16-bit activations by GPU count and
  message size in bytes (the faster of NCCL and the framework's custom all-reduce; the wheel's
  ``message_size`` counts elements);
* ``mla_decode.csv``: latency of one decode-attention kernel of multi-head latent attention (DeepSeek's
  MLA: a 512-wide latent plus 64 RoPE dimensions per token, the absorbed kernel) by query heads per GPU,
  batch, context and KV-cache precision (16-bit or FP8), median over TensorRT-LLM's and SGLang's kernels;
* ``collectives.csv``: latency of one in-node NCCL all-gather, reduce-scatter and all-to-all of
  16-bit activations by GPU count and bytes of the whole buffer (gathered, or each GPU's for the
  all-to-all): the all-gather and reduce-scatter are the engines' default exchange of tokens around the
  experts under attention data parallelism, the all-to-all the chapter's expert-parallel dispatch. The
  wheel's DeepEP dispatch tables are not extracted: no engine uses them by default (opt-in wide-EP backends);
* ``moe.csv``: latency of one mixture-of-experts layer's expert computation (the grouped GEMMs of
  the routed experts, with the wheel's routing imbalance ``power_law_1.2``, else ``balanced``) by
  tokens entering the layer, for the expert shapes of the registry's mixture-of-experts models
  (hidden size, expert width, experts per token, experts) and each measured layout (expert
  tensor parallelism ``moe_tp`` x expert parallelism ``moe_ep``);
* ``moe_wide.csv``: the same under wide expert parallelism (expert parallelism alone, 2 to 256 GPUs), from the
  wheel's wide-EP tables: TensorRT-LLM's kernel by ``num_slots`` (experts placed, copies included), with the routing
  of ``moe.csv`` and with its MoE load balancer where that places copies, and SGLang's DeepEP kernels (low-latency
  "generation", normal "context"); tokens are every attention rank's tokens together;
* ``manifest.json``: the wheel version, license, and which collection (framework, version) each
  system's numbers come from.

Every value is the median over the three frameworks (TensorRT-LLM, vLLM, SGLang) of each framework's
fastest kernel for that shape, so one framework's outlier kernel does not move the table. End-to-end
serving measurements (``systems/silicon_sample.csv``) are not read: apart from the H100 rows already
in ``calculator/data/calibration/serving_benchmarks_h100.csv`` they are evaluation data.

Reproduce (needs pandas and pyarrow)::

    pip download aiconfigurator-core==0.12.0 --no-deps -d scratch/
    python tools/extract_kernel_tables.py scratch/aiconfigurator_core-0.12.0-*.whl

The argument may also be an unpacked wheel directory.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parent.parent / "calculator" / "data" / "calibration" / "kernels"

#: Systems of the wheel that map to registry accelerators (registry aliases resolve these names).
SYSTEMS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "l40s", "rtx_pro_6000_server")
FRAMEWORKS = ("trtllm", "vllm", "sglang")

#: GEMM dtypes of the wheel -> the table's dtype names. Per-tensor and block-scaled FP8 are one
#: "fp8" entry (each framework's faster kernel for the shape): the library's precision names do not
#: distinguish the scaling granularity.
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
#: MoE weight dtypes of the wheel -> the table's dtype names: MXFP4 weights with 16-bit activations
#: (gpt-oss on Hopper), MXFP4 weights with MXFP8 activations (gpt-oss on Blackwell) and NVFP4 are the
#: registry's "fp4"; INT4 weight-only is "int4". Where a framework measured both MXFP4 kernels the faster
#: one is kept, and it is the one the engines run by default on Blackwell: TensorRT-LLM quantizes the
#: activations to MXFP8 there (``examples/models/core/gpt_oss/README.md``, "MoE Support Matrix"), SGLang
#: picks ``flashinfer_mxfp4`` on SM100 for MXFP4 checkpoints (``server_args.py``) whose default precision
#: quantizes them to MXFP8 (``layers/quantization/mxfp4.py``, ``mxfp8_quantize``).
MOE_DTYPES = {**GEMM_DTYPES, "w4a16_mxfp4": "fp4", "w4a8_mxfp4_mxfp8": "fp4", "int4_wo": "int4"}
#: The routing imbalance of the MoE table: AIConfigurator prices generic MoE models at a power law of
#: exponent 1.2 (``aiconfigurator_core/sdk/models/moe.py``, ``_power_law_alpha = 1.2``).
MOE_DISTRIBUTIONS = ("power_law_1.2", "balanced")
#: Relative distance within which a measured expert width is the registry model's (the registry
#: derives it from parameter counts, which include biases and norms).
MOE_WIDTH_TOLERANCE = 0.08
#: MoE layouts kept: expert tensor parallelism up to 8 and up to 16 GPUs per layer (a node, or two).
MOE_MAX_TP, MOE_MAX_GPUS = 8, 16
MOE_COLUMNS = ("system", "framework", "dtype", "hidden", "width", "topk", "experts", "moe_tp", "moe_ep", "tokens",
               "latency_us")  # fmt: skip
POW2 = [2**i for i in range(0, 16)]  # m: 1 .. 32768
NK = [2**i for i in range(8, 17)]  # n, k: 256 .. 65536


def _version_key(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.\-a-z]+", text) if p)


def _latest(paths: list[Path]) -> Path | None:
    """The collection of the newest framework version (directory name is the version)."""
    return max(paths, key=lambda p: _version_key(p.parent.name)) if paths else None


def _tables(system_dir: Path, op: str, pattern: str) -> dict[str, Path]:
    found = {}
    for fw in FRAMEWORKS:
        path = _latest(sorted((system_dir / op / fw).glob(f"*/{pattern}")))
        if path is not None:
            found[fw] = path
    return found


def _column(frame: pd.DataFrame, name: str, default: object) -> pd.Series:
    """A column, or ``default`` everywhere where an older collection lacks it."""
    return frame[name] if name in frame.columns else pd.Series(default, index=frame.index)


def _median_over_frameworks(frames: list[pd.Series]) -> pd.Series:
    joined = pd.concat(frames, axis=1)
    return joined.median(axis=1, skipna=True)


def gemm_table(system: str, system_dir: Path, sources: dict) -> pd.DataFrame:
    """Achieved TFLOP/s of every (dtype, m, n, k) on the power-of-two grid."""
    per_fw = []
    for fw, path in _tables(system_dir, "gemm", "gemm_perf.parquet").items():
        d = pd.read_parquet(path, columns=["gemm_dtype", "m", "n", "k", "latency"])
        d = d[d.gemm_dtype.isin(GEMM_DTYPES) & d.m.isin(POW2) & d.n.isin(NK) & d.k.isin(NK)]
        d = d.assign(dtype=d.gemm_dtype.map(GEMM_DTYPES))
        per_fw.append(d.groupby(["dtype", "m", "n", "k"]).latency.min().rename(fw))
        sources.setdefault(system, {})[f"gemm/{fw}"] = path.parent.name
    if not per_fw:
        return pd.DataFrame()
    latency_ms = _median_over_frameworks(per_fw)
    out = latency_ms.reset_index(name="latency_ms")
    out["tflops"] = 2.0 * out.m * out.n * out.k / (out.latency_ms * 1e-3) / 1e12
    out.insert(0, "system", system)
    return out.drop(columns="latency_ms")


def attention_prefill_table(system: str, system_dir: Path, sources: dict) -> pd.DataFrame:
    """Achieved TFLOP/s of causal prefill attention by prompt length and batch x heads."""
    per_fw = []
    for fw, path in _tables(system_dir, "attention", "context_attention_perf.parquet").items():
        d = pd.read_parquet(path)
        keep = (
            (d.head_dim == 128)
            & (_column(d, "window_size", 0) == 0)
            & (_column(d, "kv_cache_dtype", "bfloat16") == "bfloat16")
            & (_column(d, "attn_dtype", "bfloat16") == "bfloat16")
            & (d.num_key_value_heads < d.num_heads)  # grouped-query layouts (the common case)
            & d.isl.isin(POW2)
        )
        d = d[keep]
        d = d.assign(batch_heads=d.batch_size * d.num_heads)
        d = d[d.batch_heads.isin([2**i for i in range(0, 16)])]
        flops = 2.0 * d.batch_size * d.num_heads * d.isl.astype(float) ** 2 * d.head_dim
        d = d.assign(tflops=flops / (d.latency * 1e-3) / 1e12)
        per_fw.append(d.groupby(["isl", "batch_heads"]).tflops.median().rename(fw))
        sources.setdefault(system, {})[f"attention/{fw}"] = path.parent.name
    if not per_fw:
        return pd.DataFrame()
    out = _median_over_frameworks(per_fw).reset_index(name="tflops")
    out.insert(0, "system", system)
    return out


def attention_decode_table(system: str, system_dir: Path, sources: dict) -> pd.DataFrame:
    """Decode-attention latency by batch and context for one 128-wide KV head at 16 bits."""
    per_fw = []
    for fw, path in _tables(system_dir, "attention", "generation_attention_perf.parquet").items():
        d = pd.read_parquet(path)
        keep = (
            (d.head_dim == 128)
            & (_column(d, "window_size", 0) == 0)
            & (_column(d, "kv_cache_dtype", "bfloat16") == "bfloat16")
            & (d.num_key_value_heads == 1)
            & (d.num_heads <= 8)  # one KV head serving up to 8 query heads (GQA after sharding)
        )
        d = d[keep].assign(context=lambda x: x.step + 1)
        d = d[d.context.isin(POW2 + [2**i for i in range(16, 18)])]
        per_fw.append(d.groupby(["batch_size", "context"]).latency.median().rename(fw))
        sources.setdefault(system, {})[f"attention/{fw}"] = path.parent.name
    if not per_fw:
        return pd.DataFrame()
    out = _median_over_frameworks(per_fw).reset_index(name="latency_ms")
    out = out.rename(columns={"batch_size": "batch"})
    out["latency_us"] = out.pop("latency_ms") * 1e3
    out.insert(0, "system", system)
    return out


def allreduce_table(system: str, system_dir: Path, sources: dict) -> pd.DataFrame:
    """All-reduce latency by GPU count and bytes: the faster of NCCL and the custom kernel."""
    nccl = _latest(sorted((system_dir / "comm" / "nccl").glob("*/nccl_perf.parquet")))
    if nccl is None:
        return pd.DataFrame()
    n = pd.read_parquet(nccl)
    n = n[(n.op_name == "all_reduce") & (n.nccl_dtype == "half")]
    nccl_latency = n.groupby(["num_gpus", "message_size"]).latency.min()
    sources.setdefault(system, {})["allreduce/nccl"] = nccl.parent.name
    per_fw = []
    for fw in FRAMEWORKS:
        path = _latest(sorted((system_dir / "comm" / fw).glob("*/custom_allreduce_perf.parquet")))
        if path is None:
            per_fw.append(nccl_latency.rename(fw))
            continue
        c = pd.read_parquet(path)
        c = c[c.op_name == "all_reduce"]
        custom = c.groupby(["num_gpus", "message_size"]).latency.min()
        best = pd.concat([custom, nccl_latency], axis=1).min(axis=1)
        per_fw.append(best.rename(fw))
        sources[system][f"allreduce/{fw}"] = path.parent.name
    out = _median_over_frameworks(per_fw).reset_index(name="latency_ms")
    out = out[out.message_size.isin([2**i for i in range(6, 30)])]
    # The collections' message_size counts 16-bit elements (num_tokens x hidden), not bytes.
    out = out.assign(message_size=out.message_size * 2).rename(columns={"num_gpus": "gpus", "message_size": "bytes"})
    out["latency_us"] = out.pop("latency_ms") * 1e3
    out.insert(0, "system", system)
    return out


#: The KV-cache precisions of the MLA decode table (the wheel's ``kv_cache_dtype`` -> the table's).
MLA_KV = {"bfloat16": "bf16", "fp8": "fp8"}
#: The MLA decode table keeps 4 query heads per GPU and up (128 heads over 32 GPUs) and contexts of 16 tokens
#: and up (below, the kernel's time is its floor; the step model clamps to the grid).
MLA_MIN_HEADS, MLA_MIN_CONTEXT = 4, 16


def mla_decode_table(system: str, system_dir: Path, sources: dict) -> pd.DataFrame:
    """MLA decode-attention latency by heads per GPU, batch, context and KV precision (per layer)."""
    per_fw = []
    for fw, path in _tables(system_dir, "mla", "generation_mla_perf.parquet").items():
        d = pd.read_parquet(path)
        d = d[d.kv_cache_dtype.isin(MLA_KV) & (d.mla_dtype == "bfloat16") & (d.isl == 1)]
        d = d.assign(kv=d.kv_cache_dtype.map(MLA_KV), context=d.step + 1)
        d = d[(d.num_heads >= MLA_MIN_HEADS) & (d.context >= MLA_MIN_CONTEXT)]
        per_fw.append(d.groupby(["kv", "num_heads", "batch_size", "context"]).latency.min().rename(fw))
        sources.setdefault(system, {})[f"mla/{fw}"] = path.parent.name
    if not per_fw:
        return pd.DataFrame()
    out = _median_over_frameworks(per_fw).reset_index(name="latency_ms")
    out = out.rename(columns={"num_heads": "heads", "batch_size": "batch"})
    out["latency_us"] = out.pop("latency_ms") * 1e3
    out.insert(0, "system", system)
    return out


#: The NCCL collectives of ``collectives.csv`` (the wheel's ``op_name``).
GATHER_OPS = ("all_gather", "reduce_scatter", "alltoall")


def collectives_table(system: str, system_dir: Path, sources: dict) -> pd.DataFrame:
    """NCCL all-gather, reduce-scatter and all-to-all latency by GPU count and bytes of the whole buffer."""
    nccl = _latest(sorted((system_dir / "comm" / "nccl").glob("*/nccl_perf.parquet")))
    if nccl is None:
        return pd.DataFrame()
    n = pd.read_parquet(nccl)
    n = n[n.op_name.isin(GATHER_OPS) & (n.nccl_dtype == "half") & n.message_size.isin([2**i for i in range(6, 30)])]
    out = n.groupby(["op_name", "num_gpus", "message_size"]).latency.min().reset_index()
    sources.setdefault(system, {})["collectives/nccl"] = nccl.parent.name
    # As for the all-reduce, message_size counts 16-bit elements of the whole buffer (nccl-tests' size).
    out = out.rename(columns={"op_name": "op", "num_gpus": "gpus", "message_size": "bytes"})
    out["bytes"] = out["bytes"] * 2
    out["latency_us"] = out.pop("latency") * 1e3
    out.insert(0, "system", system)
    return out


def registry_moe_shapes() -> list[tuple[int, int, int, int]]:
    """(hidden, expert width, experts per token, experts) of every mixture-of-experts model of the registry."""
    sys.path.insert(0, str(OUT.parents[3]))
    from calculator import load_registry
    from calculator.performance import step_arrays

    reg = load_registry()
    shapes = []
    for model_id in reg.models:
        model = reg.model(model_id)
        if model.kind == "transformer" and (model.experts or 1) > 1:
            a = step_arrays(model_id, "h100-sxm", "bf16", registry=reg)
            shapes.append((int(a.hidden), round(a.expert_width), int(a.experts_per_token), int(a.experts)))
    return shapes


def _moe_collections(system_dir: Path, fw: str) -> list[Path]:
    """A framework's MoE collections of one system, newest first."""
    paths = sorted((system_dir / "moe" / fw).glob("*/moe_perf.parquet"))
    return sorted(paths, key=lambda p: _version_key(p.parent.name), reverse=True)


def moe_table(system: str, system_dir: Path, sources: dict, shapes: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """Expert-computation latency per MoE layer by tokens, for the registry's expert shapes and each layout.

    Unlike the other tables these keep each framework's own numbers (its fastest kernel per shape):
    the engines' MoE kernels differ by up to 3x on one GPU (SGLang's Triton MXFP4 kernel against
    vLLM's and TensorRT-LLM's on an H100), and each engine runs its own. A framework's newer collections
    can be partial (TensorRT-LLM 1.3.0rc23 measured one or two MoE dtypes, none at the registry's shapes), so each
    layer (dtype, shape, layout) comes from the newest collection that measured it, not the newest
    collection alone.
    """
    per_fw = []
    layer = ["dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    for fw in FRAMEWORKS:
        found = [(path, _moe_layers(path, shapes)) for path in _moe_collections(system_dir, fw)]
        found = [(path, d) for path, d in found if not d.empty]
        if not found:
            continue
        kept, seen, versions = [], set(), []
        for path, d in found:
            keys = d[layer].apply(tuple, axis=1)
            new = d[~keys.isin(seen)]
            if not new.empty:
                kept.append(new)
                versions.append(path.parent.name)
            seen |= set(keys)
        d = pd.concat(kept)
        keys = [*layer, "num_tokens"]
        per_fw.append(d.groupby(keys).latency.min().reset_index(name="latency_ms").assign(framework=fw))
        sources.setdefault(system, {})[f"moe/{fw}"] = ", ".join(versions)
    if not per_fw:
        return pd.DataFrame()
    out = pd.concat(per_fw)
    out = out.rename(
        columns={"hidden_size": "hidden", "inter_size": "width", "num_experts": "experts", "moe_tp_size": "moe_tp",
                 "moe_ep_size": "moe_ep", "num_tokens": "tokens"}
    )  # fmt: skip
    out["latency_us"] = out.pop("latency_ms") * 1e3
    out.insert(0, "system", system)
    return out


def _moe_layers(path: Path, shapes: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """One collection's rows of the registry's expert shapes (empty where it measured none of them).

    At the first measured routing of ``MOE_DISTRIBUTIONS``, with the table's dtype names.
    """
    d = pd.read_parquet(path)
    d = d[d.moe_dtype.isin(MOE_DTYPES) & d.num_tokens.isin(POW2) & (d.moe_tp_size <= MOE_MAX_TP)]
    d = d[d.moe_tp_size * d.moe_ep_size <= MOE_MAX_GPUS]
    keep = []
    for hidden, width, topk, experts in shapes:
        same = (d.hidden_size == hidden) & (d.topk == topk) & (d.num_experts == experts)
        close = same & ((d.inter_size - width).abs() <= MOE_WIDTH_TOLERANCE * width)
        keep.append(d[close])
    d = pd.concat(keep) if keep else d.iloc[:0]
    for distribution in MOE_DISTRIBUTIONS:  # the imbalanced rows where measured, else the balanced ones
        found = d[d.distribution == distribution]
        if not found.empty:
            d = found
            break
    return d.assign(dtype=d.moe_dtype.map(MOE_DTYPES))


#: The wide expert-parallel MoE tables: TensorRT-LLM's (one kernel for both phases, with and without its MoE load
#: balancer, by ``num_slots``) and SGLang's DeepEP ones (low-latency decode "generation", normal-mode "context").
WIDE_TABLES = {"trtllm": {"any": "wideep_moe_perf.parquet"},
               "sglang": {"generation": "wideep_generation_moe_perf.parquet",
                          "context": "wideep_context_moe_perf.parquet"}}  # fmt: skip
#: The routing of ``moe_wide.csv``: moe.csv's imbalance, and the same with the expert-parallel load balancer.
WIDE_DISTRIBUTIONS = (MOE_DISTRIBUTIONS[0], f"{MOE_DISTRIBUTIONS[0]}_eplb")
WIDE_COLUMNS = ("system", "framework", "phase", "dtype", "distribution", "hidden", "width", "topk", "experts", "slots",
                "moe_ep", "tokens", "latency_us")  # fmt: skip


def moe_wide_table(
    system: str, system_dir: Path, sources: dict, shapes: list[tuple[int, int, int, int]]
) -> pd.DataFrame:
    """Wide expert-parallel MoE latency by tokens, slots and degree (no expert TP), for the registry's MoE shapes.

    ``tokens`` are every attention rank's tokens together (the wheel's ``num_tokens``, which aiconfigurator queries
    at a rank's tokens times the attention data-parallel ranks); ``slots`` the experts placed (``num_slots``: the
    logical ones plus the load balancer's copies; SGLang's tables place the logical ones). Powers of two of tokens
    only, each framework's fastest kernel per point.
    """
    per_table = []
    for fw, phases in WIDE_TABLES.items():
        for phase, name in phases.items():
            path = _latest(sorted((system_dir / "moe" / fw).glob(f"*/{name}")))
            if path is None:
                continue
            d = pd.read_parquet(path)
            d = d.assign(num_slots=_column(d, "num_slots", 0)).query("moe_tp_size == 1")
            d = d.assign(num_slots=d.num_slots.where(d.num_slots > 0, d.num_experts))
            d = d[d.moe_dtype.isin(MOE_DTYPES) & d.num_tokens.isin(POW2 + [2**i for i in range(16, 20)])]
            # The balancer's tables where it places copies: without them the step model prices the plain routing.
            eplb = d.distribution == WIDE_DISTRIBUTIONS[1]
            d = d[(d.distribution == WIDE_DISTRIBUTIONS[0]) | (eplb & (d.num_slots > d.num_experts))]
            keep = [
                (d.hidden_size == hidden) & (d.topk == topk) & (d.num_experts == experts)
                & ((d.inter_size - width).abs() <= MOE_WIDTH_TOLERANCE * width)
                for hidden, width, topk, experts in shapes
            ]  # fmt: skip
            d = d[pd.concat(keep, axis=1).any(axis=1)] if keep else d.iloc[:0]
            if d.empty:
                continue
            d = d.assign(dtype=d.moe_dtype.map(MOE_DTYPES), phase=phase, framework=fw)
            keys = ["framework", "phase", "dtype", "distribution", "hidden_size", "inter_size", "topk", "num_experts",
                    "num_slots", "moe_ep_size", "num_tokens"]  # fmt: skip
            per_table.append(d.groupby(keys).latency.min().reset_index(name="latency_ms"))
            sources.setdefault(system, {})[f"moe_wide/{fw}/{phase}"] = path.parent.name
    if not per_table:
        return pd.DataFrame()
    out = pd.concat(per_table).rename(
        columns={"hidden_size": "hidden", "inter_size": "width", "num_experts": "experts", "num_slots": "slots",
                 "moe_ep_size": "moe_ep", "num_tokens": "tokens"}
    )  # fmt: skip
    out["latency_us"] = out.pop("latency_ms") * 1e3
    out.insert(0, "system", system)
    return out


def _unpacked(source: Path) -> tuple[Path, str]:
    if source.is_dir():
        root = source
    else:
        tmp = Path(tempfile.mkdtemp(prefix="aic-wheel-"))
        with zipfile.ZipFile(source) as wheel:
            wheel.extractall(tmp)
        root = tmp
    meta = next(root.glob("aiconfigurator_core-*.dist-info/METADATA"))
    version = re.search(r"^Version: (.+)$", meta.read_text(), re.M).group(1).strip()
    return root / "aiconfigurator_core" / "systems" / "data", version


def _write(frame: pd.DataFrame, name: str, header: str, digits: int) -> None:
    path = OUT / name
    value_cols = [c for c in frame.columns if frame[c].dtype.kind == "f"]
    frame = frame.copy()
    for col in value_cols:
        frame[col] = frame[col].map(lambda v: f"{v:.{digits}g}")
    with path.open("w") as fh:
        for line in header.strip().splitlines():
            fh.write(f"# {line}\n")
        frame.to_csv(fh, index=False)
    print(f"wrote {path.relative_to(OUT.parent.parent.parent)}: {len(frame)} rows, {path.stat().st_size / 1e3:.0f} kB")


def main(argv: list[str] | None = None) -> int:
    """Read the wheel and write the tables and the manifest."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="aiconfigurator_core wheel file or unpacked directory")
    args = parser.parse_args(argv)
    data, version = _unpacked(args.wheel)
    OUT.mkdir(parents=True, exist_ok=True)
    sources: dict = {}
    names = ("gemm", "prefill", "decode", "allreduce", "collectives", "mla", "moe", "moe_wide")
    tables: dict[str, list[pd.DataFrame]] = {name: [] for name in names}
    shapes = registry_moe_shapes()
    for system in SYSTEMS:
        system_dir = data / system
        if not system_dir.is_dir():
            print(f"skip {system}: not in the wheel", file=sys.stderr)
            continue
        tables["gemm"].append(gemm_table(system, system_dir, sources))
        tables["prefill"].append(attention_prefill_table(system, system_dir, sources))
        tables["decode"].append(attention_decode_table(system, system_dir, sources))
        tables["allreduce"].append(allreduce_table(system, system_dir, sources))
        tables["collectives"].append(collectives_table(system, system_dir, sources))
        tables["mla"].append(mla_decode_table(system, system_dir, sources))
        tables["moe"].append(moe_table(system, system_dir, sources, shapes))
        tables["moe_wide"].append(moe_wide_table(system, system_dir, sources, shapes))
    origin = f"aiconfigurator-core {version} (PyPI wheel, Apache-2.0, NVIDIA); tools/extract_kernel_tables.py"
    _write(
        pd.concat(tables["gemm"]).sort_values(["system", "dtype", "m", "n", "k"]),
        "gemm.csv",
        f"Achieved GEMM throughput (m x k by k x n), TFLOP/s = 2 m n k / latency.\n{origin}",
        4,
    )
    _write(
        pd.concat(tables["prefill"]).sort_values(["system", "isl", "batch_heads"]),
        "attention_prefill.csv",
        "Causal prefill attention, TFLOP/s = 2 batch heads isl^2 head_dim / latency "
        f"(head_dim 128, BF16 KV).\n{origin}",
        4,
    )
    _write(
        pd.concat(tables["decode"]).sort_values(["system", "batch", "context"]),
        "attention_decode.csv",
        f"Decode attention latency per layer, one KV head of width 128 at 16 bits (512 B per token).\n{origin}",
        4,
    )
    _write(
        pd.concat(tables["allreduce"]).sort_values(["system", "gpus", "bytes"]),
        "allreduce.csv",
        f"In-node all-reduce latency, the faster of NCCL and the framework's custom all-reduce.\n{origin}",
        4,
    )
    _write(
        pd.concat(tables["collectives"]).sort_values(["system", "op", "gpus", "bytes"]),
        "collectives.csv",
        f"In-node NCCL all-gather, reduce-scatter and all-to-all latency, bytes of the whole buffer.\n{origin}",
        4,
    )
    _write(
        pd.concat(tables["mla"]).sort_values(["system", "kv", "heads", "batch", "context"]),
        "mla_decode.csv",
        "Decode attention of multi-head latent attention (absorbed kernel) per layer, by query heads per GPU, "
        f"batch, context and KV-cache precision.\n{origin}",
        4,
    )
    moe = pd.concat(tables["moe"]).pivot_table(index=list(MOE_COLUMNS[:-2]), columns="tokens", values="latency_us")
    moe.columns = [f"t{int(tokens)}" for tokens in moe.columns]
    _write(
        moe.reset_index().sort_values([*MOE_COLUMNS[:2], "dtype", "hidden", "width", "moe_tp", "moe_ep"]),
        "moe.csv",
        "Expert computation of one mixture-of-experts layer (routed experts' grouped GEMMs), latency in us by tokens "
        f"entering the layer (column tN: N tokens; nan: not measured), routing imbalance {MOE_DISTRIBUTIONS[0]} "
        f"(else balanced). One row per measured layer.\n{origin}",
        4,
    )
    _write(
        pd.concat(tables["moe_wide"]).sort_values(list(WIDE_COLUMNS[:-1]))[list(WIDE_COLUMNS)],
        "moe_wide.csv",
        "Wide expert-parallel MoE layer (routed experts only, expert parallelism moe_ep, no expert tensor "
        "parallelism), latency by tokens of every attention rank together; slots = experts placed (logical + "
        f"copies); routing {WIDE_DISTRIBUTIONS[0]}, with _eplb the load balancer's placement.\n{origin}",
        4,
    )
    manifest = {
        "source": "aiconfigurator-core",
        "version": version,
        "license": "Apache-2.0",
        "author": "NVIDIA",
        "url": "https://pypi.org/project/aiconfigurator-core/",
        "aggregation": "median over frameworks of each framework's fastest kernel per shape",
        "collections": sources,
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(sources)} systems to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
