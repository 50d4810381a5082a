"""Timing a GPU kernel the way ``triton.testing.do_bench`` does, long enough for a median that holds.

On an H100 a bf16 8192^3 matmul runs at the board's 700 W power cap, and the SM clock moves in
steps between 200 ms windows: one process's window medians read 628 to 686 TFLOP/s, and a rule that
stopped as soon as two consecutive windows agreed landed on whichever level it met first (699 in one
fresh process, 672 in the next; BENCHMARKS.md). So the power first settles in a discarded
window of half a second (NVML's power reading averages over about that), and timing stops only
when the last three windows agree, else after ``max_windows``; the result is the median of every
run of every window, pooled, never of one lucky window.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from triton.testing import do_bench

__all__ = ["host_timing", "settled_timing"]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def settled_timing(
    run: Callable[[], object],
    warmup_ms: float = 500,
    rep_ms: float = 200,
    max_windows: int = 10,
    tolerance: float = 0.005,
    min_windows: int = 3,
) -> dict[str, float]:
    """Time ``run`` in ``do_bench`` windows (L2 flushed before each run) until three agree within ``tolerance``.

    Returns ``ms`` (median of all runs pooled), ``ms_p90``, ``windows`` (how many were timed) and
    ``window_cv`` (spread of the windows' medians: large under a power cap). What the matmul trials,
    the cuBLAS reference and the kernel comparisons are all timed with, so their figures compare.
    """
    do_bench(run, warmup=min(warmup_ms, 100), rep=warmup_ms)  # discarded: clocks, power and caches settle
    runs: list[float] = []
    medians: list[float] = []
    while len(medians) < max_windows:
        times = do_bench(run, warmup=1, rep=rep_ms, return_mode="all")
        runs += times
        medians.append(statistics.median(times))
        recent = medians[-min_windows:]
        if len(medians) >= min_windows and max(recent) - min(recent) <= tolerance * statistics.median(recent):
            break
    return {
        "ms": statistics.median(runs),
        "ms_p90": _quantile(runs, 0.9),
        "windows": float(len(medians)),
        "window_cv": statistics.pstdev(medians) / statistics.fmean(medians),
    }


def host_timing(fn: Callable[[], None], warmup_ms: float, rep_ms: float) -> dict[str, float]:
    """``settled_timing``'s result timed with the host clock, for Triton's CPU interpreter (no driver to time with)."""
    warm_until = time.perf_counter() + warmup_ms / 1e3
    fn()  # at least once: the first call pays for the interpreter's rewrite of the kernel
    while time.perf_counter() < warm_until:
        fn()
    times: list[float] = []
    while not times or sum(times) < rep_ms:
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1e3)
    found = torch.quantile(torch.tensor(times, dtype=torch.float64), torch.tensor([0.5, 0.9], dtype=torch.float64))
    p50, p90 = found.tolist()
    return {"ms": p50, "ms_p90": p90, "windows": 1.0, "window_cv": 0.0}
