"""Test the generic efficiency curve by leaving each measured GPU out, and record the result.

For every GPU with measured kernel tables, the generic curve is rebuilt from the other GPUs and prices the
left-out one: its GEMMs, decode and prefill attention against its own tables, and the decode steps and
prefills of Llama-3.1-8B at BF16 on one GPU against the same iterations priced from its own tables
(``calculator.kernel_holdout``). The log ratios pooled over the GPUs widen the interval of every answer that
rests on the curve (``calculator.uncertainty``).

Run from the repository root: ``python benchmarks/generic_curve_holdout.py [--write]`` (a second). Without
``--write`` it prints the table; with it, it also rewrites ``calculator/data/calibration/generic_curve_holdout.json``.
"""

from __future__ import annotations

import json
import math
import sys

sys.path.insert(0, ".")

from calculator.kernel_holdout import holdout_summary
from calculator.uncertainty import HOLDOUT_FILE


def _cells(stats: list[dict]) -> str:
    """Median (10th-90th percentile) of each stats' measured/priced, as table cells."""
    return " | ".join(
        f"{math.exp(c['median']):.2f}x ({math.exp(c['p10']):.2f}-{math.exp(c['p90']):.2f})" for c in stats
    )


def _pooled(label: str, pooled: dict) -> str:
    return (
        f"\n{label}: {pooled['points']} points, median {math.exp(pooled['median']):.3f}x, median size "
        f"{100 * (math.exp(pooled['median_abs']) - 1):.1f} %, "
        f"10th-90th {math.exp(pooled['p10']):.3f}x-{math.exp(pooled['p90']):.3f}x"
    )


def main(write: bool) -> None:
    summary = holdout_summary()
    print("| GPU left out | GEMM | decode attention | prefill attention | decode steps | prefills |")
    print("|---|---|---|---|---|---|")
    for result in summary["per_gpu"].values():
        cells = [result["kernels"][k] for k in ("gemm", "decode", "prefill")]
        cells += [result["iterations"][k] for k in ("decode", "prefill")]
        print(f"| {result['accelerator']} | {_cells(cells)} |")
    print(_pooled("pooled iterations", summary["pooled_iterations"]))
    print("\n| generation left out | iterations | median | 10th-90th | inside the band |")
    print("|---|---|---|---|---|")
    for generation, stats in summary["per_generation"].items():
        print(
            f"| {generation} | {stats['points']} | {math.exp(stats['median']):.3f}x | "
            f"{math.exp(stats['p10']):.2f}x-{math.exp(stats['p90']):.2f}x | {100 * stats['inside_band']:.0f} % |"
        )
    anchored = summary["anchored"]
    print("\n| GPU left out, curve anchored to its GEMMs | scales (compute/bandwidth) | decode steps | prefills |")
    print("|---|---|---|---|")
    for result in anchored["per_gpu"].values():
        scales = ", ".join(f"{d} {c:.2f}/{b:.2f}" for d, (c, b) in result["scales"].items())
        iterations = [result["iterations"][k] for k in ("decode", "prefill")]
        print(f"| {result['accelerator']} | {scales} | {_cells(iterations)} |")
    print(_pooled("anchored, pooled iterations", anchored["pooled_iterations"]))
    if write:
        HOLDOUT_FILE.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {HOLDOUT_FILE.name}")


if __name__ == "__main__":
    main("--write" in sys.argv[1:])
