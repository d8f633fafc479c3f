"""Compare the calculator's TTFT/TPOT predictions with NVIDIA AIConfigurator's on the H100 benchmarks.

This is a benchmark, not a test: it prints how far each estimator is from what the closed-loop serving
benchmarks of ``calculator/data/calibration/serving_benchmarks_h100.csv`` measured. Run from the repository root::

    python benchmarks/compare_aiconfigurator.py --aic-python PATH/TO/venv-with-aiconfigurator/bin/python [--jobs 2]

AIConfigurator (PyPI ``aiconfigurator==0.12.0``, Apache-2.0) is not a dependency of the project and
runs in its own interpreter; create that venv with::

    python3 -m venv scratch/aic && scratch/aic/bin/pip install aiconfigurator==0.12.0

and pass ``--aic-python scratch/aic/bin/python``. The script then runs itself under that interpreter
(hidden ``--estimate IN.csv OUT.csv`` mode, which imports only pandas and aiconfigurator), and
AIConfigurator estimates every row with ``cli_estimate(mode="agg")`` on its "current" database of each
engine. Back in this interpreter it joins those estimates with
``prediction_errors(load_benchmarks())`` by row order and prints the median |predicted / measured - 1|
of both on the rows both estimate: overall, per engine and per model, and why AIConfigurator skipped
the others.

Only the H100 rows are used. The rows of the AIConfigurator wheel's own ``silicon_sample.csv`` for
other GPUs are evaluation data for the calculator and must never be read, here or anywhere.
The calculator's engine behaviour is fitted on these same rows (in-sample); its held-out errors come
from ``benchmarks/fit_performance.py``.
"""

import argparse
import logging
import math
import re
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

sys.path.insert(0, ".")

SYSTEM = "h100_sxm"
#: The benchmark columns AIConfigurator needs (its silicon-sample layout).
COLUMNS = ["model_path", "system", "backend", "gemm_quant_mode", "isl", "osl", "batch_size", "tp_size", "pp_size"]
#: Hugging Face ids whose config.json the wheel does not bundle -> a bundled one of identical architecture.
MODEL_MAP = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
}
#: Benchmark GEMM quantization modes -> AIConfigurator's names (empty means the BF16 checkpoint).
QUANT_MAP = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "fp8_static": "fp8_static",
}


# --- AIConfigurator side: runs under --aic-python, imports only pandas and aiconfigurator -------------


def _quiet():
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def _blank(value):
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def estimate_row(task):
    """AIConfigurator's TTFT and TPOT (ms) of one benchmark row, or the reason it gave none.

    Parameters
    ----------
    task : tuple
        ``(index, row)`` with ``row`` a dict of :data:`COLUMNS`.

    Returns
    -------
    dict
        ``idx``, ``aic_ttft_ms``, ``aic_tpot_ms`` (NaN when skipped), ``aic_error`` (empty when
        estimated) and ``aic_database`` (the engine version of the performance database used).
    """
    index, row = task
    _quiet()
    from aiconfigurator.cli.api import cli_estimate

    out = {"idx": index, "aic_ttft_ms": math.nan, "aic_tpot_ms": math.nan, "aic_error": "", "aic_database": ""}
    try:
        if row["system"] != SYSTEM:
            raise ValueError(f"system {row['system']} is not used (H100 rows only)")
        quant = None
        if not _blank(row["gemm_quant_mode"]):
            quant = QUANT_MAP.get(str(row["gemm_quant_mode"]).lower())
            if quant is None:
                raise ValueError(f"unknown gemm_quant_mode {row['gemm_quant_mode']}")
        result = cli_estimate(
            MODEL_MAP.get(row["model_path"], row["model_path"]),
            SYSTEM,
            mode="agg",
            backend_name=row["backend"],
            backend_version="current",
            isl=int(row["isl"]),
            osl=int(row["osl"]),
            batch_size=int(row["batch_size"]),
            tp_size=int(row["tp_size"]),
            pp_size=int(row["pp_size"]),
            gemm_quant_mode=quant,
        )
        out.update(
            aic_ttft_ms=float(result.ttft),
            aic_tpot_ms=float(result.tpot),
            aic_database=str(result.raw.get("version", result.backend_version)),
        )
    except Exception as error:
        lines = str(error).splitlines() or [""]
        out["aic_error"] = f"{type(error).__name__}: {lines[0][:300]}"
    return out


def estimate(source, target, jobs):
    """Estimate every row of the CSV ``source`` with AIConfigurator and write the results to ``target``."""
    from importlib.metadata import version

    rows = pd.read_csv(source)
    tasks = [(i, {c: row[c] for c in COLUMNS}) for i, row in rows.iterrows()]
    with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=_quiet) as pool:
        results = pd.DataFrame(list(pool.map(estimate_row, tasks, chunksize=8)))
    results["aic_version"] = version("aiconfigurator")
    results.sort_values("idx").to_csv(target, index=False)


# --- calculator side: runs in the project's environment ----------------------------------------------


def run_aiconfigurator(python, rows, jobs):
    """Run this file under ``python`` (a venv with aiconfigurator) on ``rows``; AIC's estimates by row."""
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "rows.csv", Path(tmp) / "aic.csv"
        rows[COLUMNS].to_csv(source, index=False)
        command = [python, str(Path(__file__).resolve()), "--estimate", str(source), str(target), "--jobs", str(jobs)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not target.exists():
            sys.stderr.write(done.stderr[-4000:])
            sys.exit(f"the AIConfigurator run under {python} failed (exit status {done.returncode})")
        result = pd.read_csv(target, keep_default_na=False, na_values=[""])
    result = result.set_index("idx").sort_index()
    if list(result.index) != list(range(len(rows))):
        sys.exit("AIConfigurator returned a different set of rows")
    result["aic_error"] = result["aic_error"].fillna("").astype(str)
    return result


def medians(errors):
    """Row count and median |relative error| of TTFT and TPOT: ours fitted, ours held out, AIConfigurator's."""
    out = {"n": len(errors), "TTFT ours": errors.ttft_error.abs().median()}
    if "held_ttft_error" in errors:
        out["TTFT ours held-out"] = errors.held_ttft_error.abs().median()
    out["TTFT AIC"] = errors.aic_ttft_error.abs().median()
    out["TPOT ours"] = errors.tpot_error.abs().median()
    if "held_tpot_error" in errors:
        out["TPOT ours held-out"] = errors.held_tpot_error.abs().median()
    out["TPOT AIC"] = errors.aic_tpot_error.abs().median()
    return pd.Series(out)


def reason(message):
    """AIConfigurator's error message without names and numbers, so that equal causes group together."""
    if "OOM" in message:
        return "AIConfigurator's own memory check: the model does not fit (OOM)"
    message = message.split(". ")[0]
    message = re.sub(r" '[^']*'", "", message)
    return re.sub(r"\s*\([^)]*\)", "", message)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aic-python", help="python of a venv with aiconfigurator==0.12.0 installed")
    parser.add_argument("--jobs", type=int, default=2, help="AIConfigurator worker processes (default 2)")
    parser.add_argument("--estimate", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--held-out", metavar="FILE.csv", help="our held-out-campaign predictions (fit_performance.py --held-out)"
    )
    args = parser.parse_args()
    if args.estimate:
        estimate(*args.estimate, args.jobs)
        return
    if not args.aic_python:
        parser.error("--aic-python is required")

    from calculator.calibration import load_benchmarks, prediction_errors

    start = time.perf_counter()
    rows = load_benchmarks()
    rows = rows[rows.system == SYSTEM].reset_index(drop=True)
    errors = prediction_errors(rows)
    aic_start = time.perf_counter()
    aic = run_aiconfigurator(args.aic_python, rows, args.jobs)
    aic_seconds = time.perf_counter() - aic_start
    errors = errors.join(aic)
    if args.held_out:
        held = pd.read_csv(args.held_out).set_index("row")
        errors = errors.join(held.add_prefix("held_"))
    errors["aic_ttft_error"] = errors.aic_ttft_ms / errors.silicon_ttft_ms - 1
    errors["aic_tpot_error"] = errors.aic_tpot_ms / errors.silicon_tpot_ms - 1
    both = errors[errors.aic_error == ""]
    skipped = errors[errors.aic_error != ""]

    databases = ", ".join(f"{e} {'/'.join(sorted(v.unique()))}" for e, v in both.groupby("engine").aic_database)
    print(
        f"# {len(rows)} H100 benchmark rows; AIConfigurator {aic.aic_version.iloc[0]} estimated {len(both)} "
        f"(databases: {databases})"
    )
    print(
        "# median |predicted / measured - 1| on the rows both estimate (ours: fitted on these rows; held-out: each "
        "campaign predicted by a fit without it)"
    )
    table = {"all": medians(both)}
    for key in ("engine", "model"):
        for value, group in both.groupby(key):
            table[f"{key} {value}"] = medians(group)
    table = pd.DataFrame(table).T
    text = table.drop(columns="n").map(lambda v: f"{v:.1%}")
    text.insert(0, "n", table.n.astype(int))
    print(text.to_string())
    print(
        f"median predicted / measured: ours TTFT {(1 + both.ttft_error).median():.2f}, "
        f"TPOT {(1 + both.tpot_error).median():.2f}; AIC TTFT {(1 + both.aic_ttft_error).median():.2f}, "
        f"TPOT {(1 + both.aic_tpot_error).median():.2f}"
    )
    print(
        f"ours on all {len(errors)} rows: TTFT {errors.ttft_error.abs().median():.1%}, "
        f"TPOT {errors.tpot_error.abs().median():.1%}"
    )
    if len(skipped):
        print(f"\n# {len(skipped)} rows AIConfigurator could not estimate")
        causes = skipped.assign(
            reason=skipped.aic_error.map(reason), tp=skipped.tp_size.astype(int), precision=skipped.precision
        )
        for cause, group in causes.groupby("reason"):
            counts = group.groupby(["model", "engine", "precision", "tp"]).size()
            detail = ", ".join(f"{m} {e} {p} TP{t}: {n}" for (m, e, p, t), n in counts.items())
            print(f"{len(group)} x {cause}\n    {detail}")
    print(
        f"\n(took {time.perf_counter() - start:.1f} s, of which AIConfigurator {aic_seconds:.1f} s with "
        f"{args.jobs} jobs)"
    )


if __name__ == "__main__":
    main()
