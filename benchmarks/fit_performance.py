"""Refit the engines' costs, cross-validate them, and write the prediction intervals.

Run from the repository root: ``python benchmarks/fit_performance.py [--write] [--quick]``. It

1. fits each engine's three costs (``calibration.FITTED``: per-iteration cost, per-sequence cost,
   per-request overhead) on that engine's rows of ``calculator/data/calibration/serving_benchmarks_h100.csv``,
   pulled toward one behaviour shared by all engines, and prints them (``--write`` stores them in the
   ``engines`` section of ``hardware_registry.yaml``);
2. prints the median absolute errors overall and per campaign (model, engine version, precision, TP);
3. cross-validates the whole procedure leaving out one campaign at a time, then one engine version
   at a time (refitting everything without it, predicting it with its engine's refit profile);
4. checks mixture-of-experts layers on H100 benchmarks of Qwen3-235B and gpt-oss-120b (not fitted), and
   the transfer across GPU generations on the 2023 splitwise measurements (A100, H100);
5. derives the 80 % prediction intervals from the leave-one-campaign-out ratios measured / predicted
   (their 10th and 90th percentiles: bias and spread), measures how much an unseen engine version
   and an unseen GPU widen them, prints the coverage of each on held-out rows, and with ``--write``
   stores them in ``calculator/data/calibration/prediction_intervals.json``.

Only H100 end-to-end measurements are fitted; hardware efficiency comes from the kernel tables.
``--quick`` skips the cross-validation refits (about five of the six minutes on one core); ``--held-out FILE``
writes the held-out-campaign predictions for ``benchmarks/compare_aiconfigurator.py --held-out FILE``.
"""

import argparse
import json
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, ".")

from calculator import uncertainty
from calculator._paths import REGISTRY_FILE
from calculator.calibration import (
    CALIBRATION_DIR,
    FITTED,
    HARNESS_FILE,
    _get,
    _harness_parts,
    calibrate,
    load_benchmarks,
    prediction_errors,
)
from calculator.performance import ENGINES, iteration_seconds, step_arrays
from calculator.uncertainty import INTERVALS_FILE


def summary(errors, label):
    t = np.median(np.abs(errors.ttft_error))
    p = np.median(np.abs(errors.tpot_error))
    print(f"{label}: median |error| TTFT {t:.1%}, TPOT {p:.1%} over {len(errors)} rows")
    return t, p


def show(profile):
    return "(" + ", ".join(f"{_get(profile, name, unit):.4g}" for name, _, _, unit, _ in FITTED) + ")"


def label(rows):
    """Engine version and campaign (model, engine version, precision, TP) of every row."""
    version = rows.engine + " " + rows.backend_version.fillna("unrecorded").astype(str)
    campaign = (
        rows.model + " | " + version + " | " + rows.precision + " | TP" + rows.tensor_parallel.astype(int).astype(str)
    )
    return rows.assign(engine_version=version, campaign=campaign)


def cross_validate(rows, key, title):
    """Refit without each group of ``key``; predict it with its engine's refit profile (or the shared one)."""
    out = []
    for value in sorted(rows[key].unique()):
        held = rows[rows[key] == value]
        fit = calibrate(rows[rows[key] != value])
        # the held-out rows' harness overhead as fitted on the rest (none for a part the rest does not have)
        held = fit.apply(held, unknown="zero")
        errors = prediction_errors(held, {e: fit.profiles.get(e, fit.pooled) for e in held.engine.unique()})
        out.append(errors.assign(row=held.index.to_numpy()))
    cv = pd.concat(out, ignore_index=True).assign(cv=key)
    summary(cv, title)
    for engine, group in cv.groupby("engine"):
        summary(group, f"  {engine}")
    return cv


def ratios(errors, metric):
    """log(measured / predicted) of each row."""
    return -np.log1p(errors[f"{metric}_error"].to_numpy())


def joint_bands(rows, versions=None):
    """TTFT and TPOT bands of ``rows`` (``uncertainty.joint_bands``) and the coverage each holds alone.

    ``versions``: the held-out engine versions' rows, which neither band may hold more than 85 % of either.
    """

    def logs(frame):
        return {metric: ratios(frame, metric) for metric in ("ttft", "tpot")}

    return uncertainty.joint_bands(logs(rows), () if versions is None else (logs(versions),))


def widening(log_ratio, low, high, coverage):
    """The smallest symmetric widening (log) of ``[low, high]`` that holds ``coverage`` of ``log_ratio``.

    Where one step of the widening takes several rows in at once and the coverage past
    ``uncertainty.WIDEST_COVERAGE``, the step before it (the band may not be wider than the widest
    coverage allowed, as the campaign band may not).
    """
    extras = np.arange(0.0, 3.0, 0.005)
    held = [np.mean((log_ratio >= low - extra) & (log_ratio <= high + extra)) for extra in extras]
    for index, (extra, share) in enumerate(zip(extras, held, strict=True)):
        if share >= coverage:
            if share > uncertainty.WIDEST_COVERAGE and index > 0:
                return float(extras[index - 1])
            return float(extra)
    return 3.0


def intervals(campaign_cv, version_cv):
    """Per engine and for the generic profile: each metric's band and the widening an unseen version needs.

    The bands come from the leave-one-campaign-out predictions (:func:`joint_bands`), the widening
    from the leave-one-version-out ones (to the same coverage alone).
    """
    out = {}
    for engine in [*sorted(campaign_cv.engine.unique()), "generic"]:
        chosen = campaign_cv if engine == "generic" else campaign_cv[campaign_cv.engine == engine]
        versions = version_cv if engine == "generic" else version_cv[version_cv.engine == engine]
        bands, alone = joint_bands(chosen, versions)
        entry = {}
        for metric in ("ttft", "tpot"):
            low, high = bands[metric]
            entry[metric] = [round(float(np.exp(low)), 3), round(float(np.exp(high)), 3)]
            entry[f"{metric}_version_widening"] = round(widening(ratios(versions, metric), low, high, alone[metric]), 3)
        out[engine] = entry
    return out


def nested_coverage(campaign_cv):
    """Coverage of the band on each campaign when the band is built without that campaign's rows."""
    hits = {"ttft": [], "tpot": [], "both": []}
    for campaign, group in campaign_cv.groupby("campaign"):
        rest = campaign_cv[(campaign_cv.campaign != campaign) & (campaign_cv.engine == group.engine.iloc[0])]
        if len(rest) < 20:
            rest = campaign_cv[campaign_cv.campaign != campaign]
        bands, _ = joint_bands(rest)
        held = [(ratios(group, m) >= bands[m][0]) & (ratios(group, m) <= bands[m][1]) for m in ("ttft", "tpot")]
        for metric, hit in zip(("ttft", "tpot", "both"), (*held, held[0] & held[1]), strict=True):
            hits[metric].append(hit.sum())
    return {metric: sum(v) / len(campaign_cv) for metric, v in hits.items()}


def transfer_check(profile):
    """Fit one per-step overhead on the 2023 stack's H100 rows; predict its A100 rows.

    Returns the spread (half the 10-90 % range of log error) of the A100 token-time prediction beyond
    the H100 one, or the shift of its median if larger: the error a GPU adds when the model transfers
    to it without end-to-end data.
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
    # the 2023 stack schedules synchronously: its per-step overhead adds to the GPU work
    bare = profile.efficiency.replace(step_overhead=profile.efficiency.step_overhead * 0, overlap=False)
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


def write_costs(profiles):
    """Store each engine's fitted costs in the registry file's ``engines`` section (the lines of its entry)."""
    import re

    text = REGISTRY_FILE.read_text(encoding="utf-8")
    head, engines = text.split("\nengines:\n", 1)
    blocks = re.split(r"(?m)^(?=  - id: )", engines)
    for index, block in enumerate(blocks):
        found = re.match(r"  - id: (\S+)", block)
        if not found or found.group(1) not in profiles:
            continue
        for name, _, _, unit, _ in FITTED:
            value = f"{_get(profiles[found.group(1)], name, unit):.4g}"
            block = re.sub(rf"(?m)^(    {name}: )\S+", rf"\g<1>{value}", block)
        blocks[index] = block
    REGISTRY_FILE.write_text(head + "\nengines:\n" + "".join(blocks), encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="write calculator/data/calibration/prediction_intervals.json"
    )
    parser.add_argument("--quick", action="store_true", help="skip the leave-one-campaign-out refits")
    parser.add_argument(
        "--held-out", metavar="FILE.csv", help="write the held-out-campaign predictions (for compare_aiconfigurator.py)"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    rows = label(load_benchmarks())
    fit = calibrate(rows)
    per_engine = fit.profiles
    print("# fitted costs (hardware_registry.yaml, engines):", ", ".join(n for n, *_ in FITTED))
    print(f"None: {show(fit.pooled)}")
    for name, profile in per_engine.items():
        print(f"{name!r}: {show(profile)}")
    print(
        "# fitted harness client overheads (benchmark_harness.csv):",
        {k: round(v * 1e3, 1) for k, v in fit.client_overheads.items()},
    )
    rows = fit.apply(rows)
    errors = prediction_errors(rows, per_engine)
    summary(errors, "per-engine profiles")
    summary(prediction_errors(rows, {None: fit.pooled}, use_engine=False), "engine-agnostic profile")
    table = (
        errors.assign(ttft_abs=errors.ttft_error.abs(), tpot_abs=errors.tpot_error.abs())
        .groupby(["model", "engine_version", "precision", "tensor_parallel"])[["ttft_abs", "tpot_abs"]]
        .median()
    )
    print(table.map(lambda v: f"{v:.1%}").to_string())
    moe = fit.apply(load_benchmarks(CALIBRATION_DIR / "serving_benchmarks_h100_moe.csv"))
    moe_errors = prediction_errors(moe, per_engine)
    print("\n# check, not fitted: H100 mixture-of-experts benchmarks (serving_benchmarks_h100_moe.csv)")
    summary(moe_errors, "mixture-of-experts rows")
    for (model, engine), group in moe_errors.groupby(["model", "engine"]):
        summary(group, f"  {model} {engine}")
    spread = transfer_check(per_engine.get("vllm", ENGINES["vllm"]))
    if args.quick:
        print(f"\n(quick: no cross-validation; took {time.perf_counter() - start:.1f} s)")
        return
    print("\n# cross-validation: each campaign left out, then each engine version left out (refit without it)")
    campaign_cv = cross_validate(rows, "campaign", "held-out campaigns")
    version_cv = cross_validate(rows, "engine_version", "held-out engine versions")
    if args.held_out:
        campaign_cv[["row", "ttft_error", "tpot_error"]].to_csv(args.held_out, index=False)
    bands = intervals(campaign_cv, version_cv)
    print("\n# 80% prediction intervals (factors on the prediction) from the held-out campaigns;")
    print("# an unseen engine version widens each end by the version term, an unseen GPU by the GPU term")
    for engine, value in bands.items():
        print(
            f"{engine}: TTFT {value['ttft']} (+{value['ttft_version_widening']}), "
            f"TPOT {value['tpot']} (+{value['tpot_version_widening']})"
        )
    nested = nested_coverage(campaign_cv)
    print("\n# coverage of the stated intervals on held-out rows")
    print("| rows | interval | TTFT | TPOT | both |")
    print("|---|---|---|---|---|")
    for name, cv, widen in (("held-out campaigns", campaign_cv, False), ("held-out engine versions", version_cv, True)):
        hit = {}
        for metric in ("ttft", "tpot"):
            r = ratios(cv, metric)
            low = np.array([np.log(bands[e][metric][0]) for e in cv.engine])
            high = np.array([np.log(bands[e][metric][1]) for e in cv.engine])
            if widen:
                extra = np.array([bands[e][f"{metric}_version_widening"] for e in cv.engine])
                low, high = low - extra, high + extra
            hit[metric] = (r >= low) & (r <= high)
        both = float(np.mean(hit["ttft"] & hit["tpot"]))
        kind = "campaign band + version term" if widen else "campaign band"
        print(f"| {name} | {kind} | {hit['ttft'].mean():.0%} | {hit['tpot'].mean():.0%} | {both:.0%} |")
    print(
        f"| held-out campaigns, band built without the campaign | campaign band | {nested['ttft']:.0%} | "
        f"{nested['tpot']:.0%} | {nested['both']:.0%} |"
    )
    if args.write:
        payload = {
            "coverage": uncertainty.COVERAGE,
            "joint_coverage": uncertainty.JOINT_COVERAGE,
            "method": "10th-90th percentile of measured/predicted over leave-one-campaign-out predictions of the "
            "H100 benchmarks (a campaign: model, engine version, precision, TP), each metric's percentiles moved "
            "out by its own tail (to at most 7.5th-92.5th) until TTFT and TPOT hold together on "
            f"{uncertainty.JOINT_COVERAGE:.0%} of those rows, neither holding more than "
            f"{uncertainty.WIDEST_COVERAGE:.0%} alone of those or of the held-out engine versions' rows (where no "
            "pair does, the pair that holds the most together within that); an "
            "unseen engine version widens each end (log) by the smallest term that holds as much of the "
            "leave-one-engine-version-out predictions; "
            "other GPUs widen by the cross-generation spread of the splitwise transfer check "
            "(benchmarks/fit_performance.py)",
            "calibrated_accelerators": sorted(rows.accelerator.unique().tolist()),
            "cross_gpu_spread": round(spread, 4),
            "intervals": bands,
        }
        INTERVALS_FILE.write_text(json.dumps(payload, indent=1) + "\n")
        harness = pd.read_csv(HARNESS_FILE, dtype=str).fillna("")
        for index, row in harness.iterrows():
            parts = _harness_parts(row.harness)
            if row.fit_client_overhead == "yes" and parts and all(p in fit.client_overheads for p in parts):
                values = (f"{fit.client_overheads[p] * 1e3:.1f}" for p in parts)
                harness.loc[index, "client_overhead_ms"] = " + ".join(values)
        harness.to_csv(HARNESS_FILE, index=False)
        write_costs({**per_engine, "generic": fit.pooled})
        print(f"wrote {INTERVALS_FILE.name}, {HARNESS_FILE.name} and the engines' costs in {REGISTRY_FILE.name}")
    print(f"\n(took {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
