"""The simulator and the closed form against the measured H100 benchmarks.

Run from the repository root: ``python benchmarks/simulate_calibration.py [--jobs 2]``.

Every row of ``calculator/data/calibration/serving_benchmarks_h100.csv`` is simulated in closed loop
(``simulation.simulate``: its clients, ten requests each, one seed) with the engine profile and the
release's scheduling and KV cache the fit uses (``calibration.load_benchmarks``), twice: with request
lengths varying by a coefficient of variation of 0.1 (the jitter that disperses the clients, the
reference of ``benchmarks/validate_closed_loop.py``), with identical requests (the clients stay in
waves), and with each campaign's recorded length spread (``length_cv``, 0.1 where none is recorded).
The campaign's recorded harness latency (``benchmark_harness.csv``) is added to the simulated
TTFT. It prints the median |error| of TTFT and TPOT and the signed median TTFT error by campaign for
both, beside the closed form's (``calibration.prediction_errors``), and the time taken: the simulator
as ``predict_benchmark``'s engine would have to price the whole calibration set in under a minute.
``docs/performance-model.md`` ("Against the measurements") records the output.
"""

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")

#: A registry override for the releases of vLLM before 0.14.0, which schedule synchronously.
SYNCHRONOUS_VLLM = """\
sources:
  - id: vllm-before-0-14
    title: "vLLM 0.11-0.13: synchronous scheduling (config/vllm.py)"
    url: "https://github.com/vllm-project/vllm"
    kind: user
engines:
  - id: vllm
    async_scheduling: false
    overlap_scheduler: false
    sources: [{source: vllm-before-0-14, fields: [async_scheduling, overlap_scheduler]}]
"""


def simulated(case):
    """Mean TTFT and TPOT of one closed-loop simulation of a benchmark row."""
    from calculator.simulation import SimulationSetup, Traffic, simulate

    model, accelerator, precision, tp, engine, kv, registry, prompt, output, clients, jitter = case
    setup = SimulationSetup(
        model, accelerator, precision, tensor_parallel=tp, engine=engine, kv_precision=kv,
        registry_files=registry,
    )  # fmt: skip
    traffic = Traffic(
        clients=clients, input_tokens=prompt, output_tokens=output, requests=10 * clients,
        input_cv=jitter, output_cv=jitter,
    )  # fmt: skip
    stats = simulate(setup, traffic, seeds=1, time_limit=120).summary.set_index(["metric", "statistic"]).value
    return stats["ttft", "mean"], stats["tpot", "mean"]


def report(label, rows, ttft, tpot):
    t_err, p_err = ttft / rows.ttft - 1, tpot / rows.tpot - 1
    print(
        f"{label}: median |error| TTFT {np.median(np.abs(t_err)):.1%} (signed {np.median(t_err):+.1%}), "
        f"TPOT {np.median(np.abs(p_err)):.1%}"
    )
    frame = rows.assign(t=t_err, p=p_err).fillna({"backend_version": "unrecorded"})
    for (engine, version), group in frame.groupby(["engine", "backend_version"]):
        print(
            f"  {engine} {version}: TTFT {np.median(np.abs(group.t)):.1%} (signed {np.median(group.t):+.1%}), "
            f"TPOT {np.median(np.abs(group.p)):.1%}, {len(group)} rows"
        )


def main():
    from calculator.calibration import _release_kv_precision, load_benchmarks, prediction_errors

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = load_benchmarks()
    closed = prediction_errors(rows)
    report("closed form", rows, closed.ttft_pred, closed.tpot_pred)
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        sync = Path(folder) / "vllm_before_0_14.yaml"
        sync.write_text(SYNCHRONOUS_VLLM, encoding="utf-8")
        recorded = np.where(np.isfinite(rows.length_cv), rows.length_cv, 0.1)
        passes = (
            ("dispersed", np.full(len(rows), 0.1), "simulator, lengths CV 0.1 (dispersed)"),
            ("identical", np.zeros(len(rows)), "simulator, identical requests"),
            ("spread", recorded, "simulator, each campaign's length spread (0.1 where none is recorded)"),
        )
        for key, jitters, label in passes:
            cases = [
                (
                    r.model, r.accelerator, r.precision, int(r.tensor_parallel), r.engine,
                    _release_kv_precision(r.kv_declaration),
                    (str(sync),) if r.engine == "vllm" and r.async_scheduling is False else (),
                    int(r.input_tokens), int(r.output_tokens), int(r.concurrency), float(jitter),
                )
                for r, jitter in zip(rows.itertuples(), jitters, strict=True)
            ]  # fmt: skip
            start = time.perf_counter()
            with ProcessPoolExecutor(args.jobs) as pool:
                out = np.array(list(pool.map(simulated, cases, chunksize=8)))
            took = time.perf_counter() - start
            runs[key] = out[:, 0] + rows.client_overhead, out[:, 1]
            print()
            report(f"{label} ({took:.0f} s, {args.jobs} jobs)", rows, *runs[key])
    # Each campaign as its harness runs it (benchmark_harness.csv): identical requests where it keeps waves,
    # else its length spread.
    waves = (rows.arrivals == "waves").to_numpy()
    print()
    report(
        "simulator, each campaign's recorded arrivals and spread", rows,
        *(np.where(waves, same, spread) for spread, same in zip(runs["spread"], runs["identical"], strict=True)),
    )  # fmt: skip


if __name__ == "__main__":
    main()
