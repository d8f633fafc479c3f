"""Compare the calculator's answers at another git revision with the working tree's, in one run.

A refactor that means to change no answer must show none moved; one that unifies a rule lists what moved.
Probed on both sides (each in its own process, the older one from a temporary checkout):

* the calibration table: predicted TTFT and TPOT of every packaged benchmark row
  (``calibration.prediction_errors``);
* the plans of ``benchmarks/verify_plans.py``'s scenarios: feasibility, replicas, layout, batch cap and
  the predicted TTFT/TPOT (``size_fleet``, no simulation);
* simulations: vLLM, SGLang and TensorRT-LLM on one H100 (closed and open loop), mean and p99 TTFT/TPOT;
* the worked examples are the tests' (``tests/test_cases.py`` and the formula tests pin the chapter's
  printed values on both sides).

Run from the repository root: ``python benchmarks/compare_revisions.py --base main [--markdown]``
(about 3 minutes). Exit status 0; the table lists every number that moved by more than ``--tolerance``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Simulated setups: engine, model, precision, input and output tokens, clients (closed loop) or rate (open).
SIMULATIONS = [
    ("vllm", "llama-3.1-8b", "bf16", 1024, 128, 64, None),
    ("trtllm", "llama-3.1-8b", "bf16", 2048, 128, 128, None),
    ("sglang", "llama-3.1-8b", "bf16", 1024, 256, None, 20.0),
    ("vllm", "llama-3.1-70b", "fp8", 4096, 128, None, 4.0),
]


def probe() -> dict[str, float | str]:
    """Every probed number of this checkout, by a stable key."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    from verify_plans import SCENARIOS

    from calculator.calibration import load_benchmarks, prediction_errors
    from calculator.fleet import Costs, SearchSpace, ServingOptions, Targets, Workload, size_fleet
    from calculator.simulation import SimulationSetup, Traffic, simulate
    from calculator.units import Q_

    out: dict[str, float | str] = {}
    rows = prediction_errors(load_benchmarks())
    for i, row in rows.iterrows():
        name = f"calibration {row.engine} {row.model} {row.precision} TP{int(row.tensor_parallel)} c{row.concurrency:g}"
        out[f"{name} #{i} ttft"] = float(row.ttft_pred)
        out[f"{name} #{i} tpot"] = float(row.tpot_pred)
    for scenario in SCENARIOS:
        model, gpu, precision, rate, inputs, outputs, ttft, tpot, pct, engine, router, icv, ocv = scenario
        plan = size_fleet(
            model,
            Workload(Q_(rate, "request/s"), inputs, outputs, input_cv=icv, output_cv=ocv),
            Targets(Q_(ttft, "ms"), Q_(tpot, "ms"), ttft_percentile=pct, max_utilization=0.8),
            SearchSpace(gpu, precision),
            engine=engine,
            serving=ServingOptions(router=router),
            costs=Costs(Q_(3, "USD/hour")),
        )
        name = f"plan {model} {gpu} {precision} {rate}/s {engine or 'generic'}"
        if not plan.feasible:
            out[f"{name} feasible"] = "no"
            continue
        # a plan in parts (issue 52), or the flat plan of an older revision: the same numbers on both sides
        parts = hasattr(plan, "service")
        service = plan.service if parts else plan
        tp, dp, pp = (
            (plan.layout.stage_gpus, plan.layout.data_parallel, plan.layout.pipeline_parallel)
            if parts
            else (plan.tensor_parallel, plan.data_parallel, plan.pipeline_parallel)
        )
        out[f"{name} layout"] = f"{plan.replicas} x TP{tp} DP{dp} PP{pp} cap {plan.batch}"
        out[f"{name} ttft"] = float(service.ttft.m_as("s"))
        out[f"{name} tpot"] = float(service.tpot.m_as("s"))
    for engine, model, precision, inputs, outputs, clients, rate in SIMULATIONS:
        setup = SimulationSetup(model, "h100-sxm", precision, 1 if model.endswith("8b") else 4, engine=engine)
        arrival = None if rate is None else Q_(rate, "request/s")
        traffic = Traffic(arrival, inputs, outputs, input_cv=0.3, output_cv=0.3, requests=600, clients=clients)
        run = simulate(setup, traffic, seeds=2)
        name = f"simulation {engine} {model} {precision} {inputs}/{outputs} {clients or rate}"
        for metric in ("ttft", "tpot"):
            for stat in ("mean", "p99"):
                out[f"{name} {metric} {stat}"] = float(run.value(metric, stat).m_as("s"))
    return out


def _run_probe(checkout: Path) -> dict[str, float | str]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--probe"],
        cwd=checkout, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"the probe failed in {checkout.name}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def _moved(before: float | str, after: float | str, tolerance: float) -> bool:
    if isinstance(before, str) or isinstance(after, str):
        return before != after
    if math.isnan(before) and math.isnan(after):
        return False
    return not math.isclose(before, after, rel_tol=tolerance, abs_tol=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the git revision to compare the working tree with")
    parser.add_argument("--tolerance", type=float, default=1e-9, help="relative change below which a number stays")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe()))
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.base], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        # the probe itself and the scenarios it reads are the working tree's on both sides
        (base / "benchmarks").mkdir(exist_ok=True)
        for name in ("verify_plans.py",):
            (base / "benchmarks" / name).write_text((ROOT / "benchmarks" / name).read_text())
        before = _run_probe(base)
    after = _run_probe(ROOT)
    keys = sorted(set(before) | set(after))
    moved = [k for k in keys if k not in before or k not in after or _moved(before[k], after[k], args.tolerance)]
    print(f"{len(keys)} numbers probed at {args.base} and in the working tree; {len(moved)} moved.\n")
    if moved:
        print("| Probe | Before | After | Change |" if args.markdown else "probe | before | after | change")
        if args.markdown:
            print("|---|---|---|---|")
    for key in moved:
        old, new = before.get(key, "absent"), after.get(key, "absent")
        change = f"{new / old - 1:+.2e}" if isinstance(old, float) and isinstance(new, float) and old else ""
        cells = [key, f"{old:.6g}" if isinstance(old, float) else old, f"{new:.6g}" if isinstance(new, float) else new]
        print(("| " + " | ".join([*cells, change]) + " |") if args.markdown else " | ".join([*cells, change]))


if __name__ == "__main__":
    main()
