"""Refit the performance model's default parameters and print them with the fit error.

Run from the repository root: ``python benchmarks/fit_performance.py``. It fits the shared physics
and one behaviour set per engine on ``data/calibration/serving_benchmarks_h100.csv``, then one pooled
engine-agnostic profile, and prints (1) the constants to paste into ``calculator/performance.py``,
(2) the median absolute errors per model / engine / precision / TP for ``docs/performance-model.md``,
and (3) a leave-one-group-out cross-validation of the whole procedure.
"""

import sys
import time

import numpy as np

sys.path.insert(0, ".")

from calculator.calibration import CALIBRATION_DIR, fit_profiles, load_benchmarks, prediction_errors
from calculator.performance import decode_step_seconds, prefill_seconds, step_arrays
from calculator.units import Q_


def summary(errors, label):
    t = np.median(np.abs(errors.ttft_error))
    p = np.median(np.abs(errors.tpot_error))
    print(f"{label}: median |error| TTFT {t:.1%}, TPOT {p:.1%} over {len(errors)} rows")


def show(profile):
    e = profile.efficiency
    return (
        f"({e.hbm_bandwidth:.3f}, {e.compute:.3f}, {e.link_bandwidth:.3f}, {e.collective_latency.m_as('us'):.1f}, "
        f"{e.step_overhead.m_as('ms'):.2f}), ({profile.prefill_batching:.3f}, {profile.admission_delay:.3f}, "
        f"{profile.memory_utilization:.3f}, {profile.memory_reserve.m_as('GB'):.2f}, "
        f"{profile.request_overhead.m_as('ms'):.1f})"
    )


def main():
    start = time.perf_counter()
    rows = load_benchmarks()
    per_engine = fit_profiles(rows)
    pooled = fit_profiles(rows, pooled=True)
    print("# constants for calculator/performance.py ENGINES")
    print(f"None: {show(pooled[None])}")
    for name, profile in per_engine.items():
        print(f"{name!r}: {show(profile)}")
    errors = prediction_errors(rows, per_engine)
    summary(errors, "per-engine profiles")
    summary(prediction_errors(rows, pooled, use_engine=False), "engine-agnostic profile")
    table = (
        errors.assign(ttft_abs=errors.ttft_error.abs(), tpot_abs=errors.tpot_error.abs())
        .groupby(["model", "engine", "precision", "tensor_parallel"])[["ttft_abs", "tpot_abs"]]
        .median()
    )
    print(table.map(lambda v: f"{v:.1%}").to_string())
    print("\n# leave-one-group-out cross-validation (fit without the group, predict it)")
    for key in ("tensor_parallel", "model"):
        for value in sorted(rows[key].unique()):
            held = rows[rows[key] == value]
            fitted = fit_profiles(rows[rows[key] != value])
            known = {e: fitted.get(e, pooled[None]) for e in held.engine.unique()}
            summary(prediction_errors(held, known), f"held out {key}={value}")
    transfer_check(per_engine["vllm"].efficiency)
    print(f"\n(took {time.perf_counter() - start:.1f} s)")


def transfer_check(efficiency):
    """Fit only a per-step overhead on the 2023 stack's H100 rows; predict its A100 rows."""
    import pandas as pd

    raw = pd.read_csv(CALIBRATION_DIR / "splitwise_perf_model.csv")
    rows = (
        raw[raw.model == "llama2-70b"]
        .groupby(["hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size"], as_index=False)[
            ["prompt_time", "token_time"]
        ]
        .median()
    )
    hardware = {"h100-80gb": "h100-sxm", "a100-80gb": "a100-sxm-80gb"}
    rows = rows[rows.hardware.isin(hardware)]
    no_overhead = efficiency.replace(step_overhead=Q_(0, "s"))
    decode = np.empty(len(rows))
    prefill = np.empty(len(rows))
    for hw, group in rows.groupby("hardware"):
        a = step_arrays("llama-2-70b", hardware[hw], "fp16")
        index = rows.index.get_indexer(group.index)
        context = group.prompt_size + group.token_size / 2
        decode[index] = decode_step_seconds(a, no_overhead, group.tensor_parallel, group.batch_size, context)
        prefill[index] = group.batch_size * prefill_seconds(a, no_overhead, group.tensor_parallel, group.prompt_size)
    on_h100 = (rows.hardware == "h100-80gb").to_numpy()
    overhead = np.median(rows.token_time.to_numpy()[on_h100] / 1e3 - decode[on_h100])
    print(
        f"\n# transfer check: 2023 stack (splitwise), Llama-2-70B FP16; per-step overhead fitted on H100 = "
        f"{overhead * 1e3:.1f} ms, shared physics from the fit above"
    )
    for hw in hardware:
        mask = (rows.hardware == hw).to_numpy()
        token = np.median(np.abs((decode[mask] + overhead) / (rows.token_time.to_numpy()[mask] / 1e3) - 1))
        single = mask & (rows.batch_size == 1).to_numpy()
        prompt = np.median(np.abs(prefill[single] / (rows.prompt_time.to_numpy()[single] / 1e3) - 1))
        print(
            f"{hw}: median |error| token time {token:.1%} ({mask.sum()} configs), "
            f"single-prompt prefill {prompt:.1%} ({single.sum()} configs)"
        )


if __name__ == "__main__":
    main()
