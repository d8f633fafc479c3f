"""Extract AMD Instinct GEMM measurements from AMD's aiter kernel library, to anchor the generic curve.

AMD's AI Tensor Engine for ROCm (``ROCm/aiter``, MIT license) ships, in ``aiter/configs/``, the results of its
GEMM tuner: for each GEMM shape (``M`` tokens, ``N`` x ``K`` weights) on each GPU (``gfx`` architecture and
``cu_num`` compute units), the kernel it picked and the time that kernel took (``us``). vLLM and SGLang on ROCm
call these kernels. They are kernel microbenchmarks of the GPUs the performance model has no aiconfigurator tables
for, and this script keeps them as ``calculator/data/calibration/kernels/anchor_gemm.csv``:

* ``system``: ``gfx942_cu304`` (CDNA 3 with 304 compute units: the MI300X, and the MI325X, which has the same
  compute) or ``gfx950_cu256`` (CDNA 4 with 256: the MI355X);
* ``dtype``: ``bf16``; ``fp8`` (FP8 weights and activations, block-scaled or per token); ``fp4`` (MXFP4 weights
  and activations); INT8 and the mixed-precision kernels are not kept;
* ``batch``: GEMMs run as one batched launch (1 for a plain GEMM);
* ``m``, ``n``, ``k``, ``us``: the shape and the fastest time any of the files records for it.

Rows whose ``M`` is not a power of two are dropped (the tuner samples many token counts of each shape; the powers
of two span them), which keeps the file small. The performance model reads the rows to scale
the generic curve's compute and bandwidth to what these GPUs reach (``calculator.kernels``, "anchored").

Reproduce (the snapshot of ``ROCm/aiter`` whose commit ``SOURCE_COMMIT`` names)::

    git clone https://github.com/ROCm/aiter && git -C aiter checkout <SOURCE_COMMIT>
    python tools/extract_anchor_gemms.py aiter
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "calculator" / "data" / "calibration" / "kernels" / "anchor_gemm.csv"

#: The ``ROCm/aiter`` commit the committed table was extracted from (2026-08-22).
SOURCE_COMMIT = "e4048607a535ace3a2b51ded31b1c8c2d45c0879"

#: (gfx, compute units) -> the table's system name.
SYSTEMS = {("gfx942", "304"): "gfx942_cu304", ("gfx950", "256"): "gfx950_cu256"}

#: Weight dtypes of the ``a8w8`` files that are FP8 (the ``fnuz`` variant is CDNA 3's FP8).
FP8_WEIGHTS = {"torch.float8_e4m3fnuz", "torch.float8_e4m3fn"}


def _dtype(name: str, row: dict[str, str]) -> str | None:
    """The registry precision of one tuned row, or None for a kernel not kept."""
    if name.startswith("bf16_") or "_bf16_tuned_gemm" in name:
        return "bf16" if row.get("dtype", "torch.bfloat16") == "torch.bfloat16" else None
    if name.startswith("a8w8_") or "_a8w8_" in name or name.startswith("asm_a8w8"):
        if "mxfp8" in name:
            return None
        weights = row.get("q_dtype_w")
        if weights is None:  # the block-scaled kernels are FP8 only
            return "fp8" if "blockscale" in name else None
        return "fp8" if weights in FP8_WEIGHTS else None
    if name.startswith("a4w4_") or "_a4w4_" in name:
        return "fp4"
    return None


def _rows(configs: Path) -> dict[tuple[str, str, int, int, int, int], float]:
    """(system, dtype, batch, m, n, k) -> the fastest time (us) over every tuned GEMM file of ``configs``."""
    best: dict[tuple[str, str, int, int, int, int], float] = {}
    for path in sorted(configs.rglob("*.csv")):
        name = path.name
        if "untuned" in name or "comparison" in name or "tuned" not in name or "gemm" not in name:
            continue
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                system = SYSTEMS.get((row.get("gfx", ""), row.get("cu_num", "")))
                dtype = _dtype(name, row) if system else None
                if system is None or dtype is None:
                    continue
                try:
                    shape = (
                        tuple(int(row[c]) for c in ("B", "M", "N", "K"))
                        if "B" in row
                        else (1, int(row["M"]), int(row["N"]), int(row["K"]))
                    )
                    us = float(row["us"])
                except (KeyError, ValueError):
                    continue
                m = shape[1]
                if not (math.isfinite(us) and us > 0) or m & (m - 1):
                    continue
                key = (system, dtype, *shape)
                best[key] = min(us, best.get(key, math.inf))
    return best


def main(argv: list[str] | None = None) -> int:
    """Read an aiter checkout's tuned GEMM files and write ``anchor_gemm.csv``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("aiter", type=Path, help="a checkout of ROCm/aiter (or its aiter/configs folder)")
    parser.add_argument("--out", type=Path, default=OUT, help="the table to write (default: the packaged one)")
    args = parser.parse_args(argv)
    configs = args.aiter / "aiter" / "configs" if (args.aiter / "aiter" / "configs").is_dir() else args.aiter
    best = _rows(configs)
    if not best:
        print(f"no tuned GEMM rows of {sorted(SYSTEMS.values())} under the given folder", file=sys.stderr)
        return 1
    with args.out.open("w", newline="") as fh:
        fh.write(
            f"# AMD aiter tuned GEMMs (github.com/ROCm/aiter, aiter/configs, commit {SOURCE_COMMIT[:12]}, MIT license);"
            " tools/extract_anchor_gemms.py\n"
        )
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(("system", "dtype", "batch", "m", "n", "k", "us"))
        for key in sorted(best):
            writer.writerow((*key, f"{best[key]:.4g}"))
    print(f"{len(best)} rows -> {args.out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
