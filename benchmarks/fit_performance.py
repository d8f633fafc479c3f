"""Refit the engines' behaviour parameters, cross-validate them, and write the prediction intervals.

Run from the repository root: ``python benchmarks/fit_performance.py [--write]``. It

1. fits each engine's behaviour (``calibration.FITTED``: per-iteration cost, per-sequence cost,
   per-request overhead, prefill-group coherence) on that engine's rows of
   ``calculator/data/calibration/serving_benchmarks_h100.csv``, and one engine-agnostic profile on all rows,
   and prints the constants for ``calculator/performance/engines.py``;
2. prints the median absolute errors overall and per model / engine version / precision / TP;
3. cross-validates the whole procedure leaving out one model, then one engine version, at a time;
4. checks mixture-of-experts layers on H100 benchmarks of Qwen3-235B and gpt-oss-120b (not fitted), and
   the transfer across GPU generations on the 2023 splitwise measurements (A100, H100);
5. derives the 80 % prediction intervals from the cross-validated ratios measured / predicted and,
   with ``--write``, stores them in ``calculator/data/calibration/prediction_intervals.json``.

Only H100 end-to-end measurements are fitted; hardware efficiency comes from the kernel tables.
"""

import argparse
import json
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, ".")

from calculator.calibration import CALIBRATION_DIR, FITTED, _get, fit_profiles, load_benchmarks, prediction_errors
from calculator.performance import ENGINES, iteration_seconds, step_arrays
from calculator.uncertainty import INTERVALS_FILE

COVERAGE = 0.80


def summary(errors, label):
    t = np.median(np.abs(errors.ttft_error))
    p = np.median(np.abs(errors.tpot_error))
    print(f"{label}: median |error| TTFT {t:.1%}, TPOT {p:.1%} over {len(errors)} rows")
    return t, p


def show(profile):
    return "(" + ", ".join(f"{_get(profile, name, unit):.4g}" for name, _, _, unit, _ in FITTED) + ")"


def versions(rows):
    return rows.engine + " " + rows.backend_version.fillna("unrecorded").astype(str)


def cross_validate(rows, key, label):
    """Fit without each group of ``key``; predict it with its engine's profile (or the pooled one)."""
    out = []
    for value in sorted(rows[key].unique()):
        held = rows[rows[key] == value]
        rest = rows[rows[key] != value]
        fitted = fit_profiles(rest)
        pooled = fit_profiles(rest, pooled=True)[None]
        known = {e: fitted.get(e, pooled) for e in held.engine.unique()}
        errors = prediction_errors(held, known)
        generic = prediction_errors(held, {e: pooled for e in held.engine.unique()})
        summary(errors, f"held out {label} {value}")
        out.append(
            errors.assign(
                generic_ttft_error=generic.ttft_error.to_numpy(), generic_tpot_error=generic.tpot_error.to_numpy()
            )
        )
    return pd.concat(out, ignore_index=True)


def band(ratio):
    """The central ``COVERAGE`` range of measured / predicted."""
    tail = (1 - COVERAGE) / 2
    return [round(float(np.quantile(ratio, tail)), 3), round(float(np.quantile(ratio, 1 - tail)), 3)]


def intervals(cv):
    """Per engine and for the generic profile: the central range of cross-validated ratios."""
    out = {}
    for engine, group in cv.groupby("engine"):
        out[engine] = {"ttft": band(1 / (1 + group.ttft_error)), "tpot": band(1 / (1 + group.tpot_error))}
    out["generic"] = {"ttft": band(1 / (1 + cv.generic_ttft_error)), "tpot": band(1 / (1 + cv.generic_tpot_error))}
    return out


def transfer_check(profile):
    """Fit one per-step overhead on the 2023 stack's H100 rows; predict its A100 rows.

    Returns the spread (half the 10-90 % range of log error) of the A100 token-time prediction beyond
    the H100 one: the error a GPU adds when the model transfers to it without end-to-end data.
    """
    raw = pd.read_csv(CALIBRATION_DIR / "splitwise_perf_model.csv")
    rows = (
        raw[raw.model == "llama2-70b"]
        .groupby(["hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size"], as_index=False)[
            ["prompt_time", "token_time"]
        ]
        .median()
    )
    hardware = {"h100-80gb": "h100-sxm", "a100-80gb": "a100-sxm-80gb"}
    rows = rows[rows.hardware.isin(hardware)].reset_index(drop=True)
    bare = profile.efficiency.replace(step_overhead=profile.efficiency.step_overhead * 0)
    decode = np.empty(len(rows))
    prefill = np.empty(len(rows))
    for hw, group in rows.groupby("hardware"):
        a = step_arrays("llama-2-70b", hardware[hw], "fp16")
        index = group.index.to_numpy()
        context = group.prompt_size + group.token_size / 2
        decode[index] = iteration_seconds(a, bare, group.tensor_parallel, group.batch_size, context)
        prefill[index] = iteration_seconds(
            a, bare, group.tensor_parallel, 0, 0, group.batch_size * group.prompt_size, group.batch_size, 0
        )
    on_h100 = (rows.hardware == "h100-80gb").to_numpy()
    token = rows.token_time.to_numpy() / 1e3
    overhead = np.median(token[on_h100] - decode[on_h100])
    print(
        "\n# transfer check: 2023 stack (splitwise), Llama-2-70B FP16; one per-step overhead fitted on its H100 "
        f"rows = {overhead * 1e3:.1f} ms; kernels from the tables"
    )
    spreads = {}
    for hw in hardware:
        mask = (rows.hardware == hw).to_numpy()
        log_error = np.log((decode[mask] + overhead) / token[mask])
        single = mask & (rows.batch_size == 1).to_numpy()
        prompt = np.median(np.abs(prefill[single] / (rows.prompt_time.to_numpy()[single] / 1e3) - 1))
        spreads[hw] = (np.quantile(log_error, 0.9) - np.quantile(log_error, 0.1)) / 2
        print(
            f"{hw}: median |error| token time {np.median(np.abs(np.expm1(log_error))):.1%} ({mask.sum()} configs), "
            f"single-prompt prefill {prompt:.1%} ({single.sum()} configs)"
        )
    extra = float(np.sqrt(max(spreads["a100-80gb"] ** 2 - spreads["h100-80gb"] ** 2, 0.0)))
    bias = float(
        np.median(np.log((decode[~on_h100] + overhead) / token[~on_h100]))
        - np.median(np.log((decode[on_h100] + overhead) / token[on_h100]))
    )
    print(f"cross-generation spread beyond the fitted GPU: {extra:.3f} (log), shift of the median {bias:+.3f} (log)")
    return max(extra, abs(bias))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="write calculator/data/calibration/prediction_intervals.json"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    rows = load_benchmarks()
    rows = rows.assign(engine_version=versions(rows))
    per_engine = fit_profiles(rows)
    pooled = fit_profiles(rows, pooled=True)
    print("# fitted behaviour for calculator/performance/engines.py ENGINES:", ", ".join(n for n, *_ in FITTED))
    print(f"None: {show(pooled[None])}")
    for name, profile in per_engine.items():
        print(f"{name!r}: {show(profile)}")
    errors = prediction_errors(rows, per_engine)
    summary(errors, "per-engine profiles")
    summary(prediction_errors(rows, pooled, use_engine=False), "engine-agnostic profile")
    table = (
        errors.assign(ttft_abs=errors.ttft_error.abs(), tpot_abs=errors.tpot_error.abs())
        .groupby(["model", "engine_version", "precision", "tensor_parallel"])[["ttft_abs", "tpot_abs"]]
        .median()
    )
    print(table.map(lambda v: f"{v:.1%}").to_string())
    print("\n# cross-validation: leave one model out, then one engine version out")
    cv = pd.concat(
        [cross_validate(rows, "model", "model"), cross_validate(rows, "engine_version", "engine version")],
        ignore_index=True,
    )
    summary(cv, "all held-out predictions")
    moe = load_benchmarks(CALIBRATION_DIR / "serving_benchmarks_h100_moe.csv")
    moe_errors = prediction_errors(moe, per_engine)
    print("\n# check, not fitted: H100 mixture-of-experts benchmarks (serving_benchmarks_h100_moe.csv)")
    summary(moe_errors, "mixture-of-experts rows")
    for (model, engine), group in moe_errors.groupby(["model", "engine"]):
        summary(group, f"  {model} {engine}")
    spread = transfer_check(per_engine.get("vllm", ENGINES["vllm"]))
    bands = intervals(cv)
    print("\n# 80% prediction intervals on the H100 (factors on the prediction); other GPUs widen by the spread")
    for engine, value in bands.items():
        print(f"{engine}: TTFT {value['ttft']}, TPOT {value['tpot']}")
    inside = {}
    for metric in ("ttft", "tpot"):
        ratio = 1 / (1 + cv[f"{metric}_error"])
        limits = {e: bands.get(e, bands["generic"])[metric] for e in cv.engine.unique()}
        low, high = cv.engine.map(lambda e, m=limits: m[e][0]), cv.engine.map(lambda e, m=limits: m[e][1])
        inside[metric] = float(((ratio >= low) & (ratio <= high)).mean())
    print(f"held-out rows inside their interval: TTFT {inside['ttft']:.0%}, TPOT {inside['tpot']:.0%}")
    if args.write:
        payload = {
            "coverage": COVERAGE,
            "method": "10th-90th percentile of measured/predicted over leave-one-model-out and "
            "leave-one-engine-version-out predictions of the H100 benchmarks; on other GPUs each end widens "
            "in log space by the cross-generation spread of the splitwise transfer check "
            "(benchmarks/fit_performance.py)",
            "calibrated_accelerators": sorted(rows.accelerator.unique().tolist()),
            "cross_gpu_spread": round(spread, 4),
            "intervals": bands,
        }
        INTERVALS_FILE.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"wrote {INTERVALS_FILE.name}")
    print(f"\n(took {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
