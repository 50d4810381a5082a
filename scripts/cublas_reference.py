"""cuBLAS (``torch.matmul``) timed exactly as the Triton matmul trials are, for the BENCHMARKS comparison.

python scripts/cublas_reference.py 4096 8192 --dtype bf16
"""

from __future__ import annotations

import argparse
import functools

import torch

from autotune.kernels import matmul as mm
from autotune.kernels.timing import settled_timing
from autotune.workloads.triton_matmul import DTYPES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", type=int, nargs="+", help="square sizes: M = N = K")
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    args = parser.parse_args(argv)
    for size in args.sizes:
        a = torch.randn(size, size, device="cuda", dtype=DTYPES[args.dtype])
        b = torch.randn(size, size, device="cuda", dtype=DTYPES[args.dtype])
        timing = settled_timing(functools.partial(torch.matmul, a, b))
        tflops = mm.flops(size, size, size) / (timing["ms"] * 1e-3) / 1e12
        print(f"cublas {args.dtype} {size}^3: {tflops:.1f} TFLOP/s ms={timing['ms']:.4f} "
              f"windows={timing['windows']:.0f} window_cv={timing['window_cv']:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
