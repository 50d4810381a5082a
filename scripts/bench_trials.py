"""Measure a list of trial configurations on this machine's GPU, each in its own isolated trial.

    python3 scripts/bench_trials.py --out results.json            # the BENCHMARKS.md set
    python3 scripts/bench_trials.py --only resnet50 --repeats 3   # a subset

Prints a markdown table per workload (throughput, step p50/p90, CV, peak memory, energy per
sample, compile time, overhead) and writes every TrialResult to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from autotune.measurement import TrialResult
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner

RESNET: list[dict[str, Any]] = [
    {},  # PyTorch defaults: fp32 (cuDNN may use TF32), NCHW, eager, batch 128
    {"precision": "fp32"},
    {"precision": "tf32", "memory_format": "channels_last", "cudnn_benchmark": True},
    {"precision": "bf16", "memory_format": "channels_last", "batch_size": 256},
    {"precision": "fp16", "memory_format": "channels_last", "batch_size": 256, "cudnn_benchmark": True},
    {"precision": "bf16", "memory_format": "channels_last", "batch_size": 256, "compile_mode": "default"},
    {
        "precision": "bf16",
        "memory_format": "channels_last",
        "batch_size": 256,
        "compile_mode": "default",
        "fused_optimizer": True,
    },
]
GPT2: list[dict[str, Any]] = [
    {},  # PyTorch defaults: fp32 matmuls without TF32, eager, batch 16 x 1024 tokens
    {"precision": "tf32"},
    {"precision": "bf16"},
    {"precision": "bf16", "compile_mode": "default"},
    {"precision": "bf16", "compile_mode": "default", "fused_optimizer": True, "batch_size": 32},
]
REPEAT: tuple[str, dict[str, Any]] = (
    "resnet50",
    {
        "precision": "bf16",
        "memory_format": "channels_last",
        "batch_size": 256,
        "compile_mode": "default",
        "fused_optimizer": True,
    },
)


def _row(workload: str, params: dict[str, Any], result: TrialResult, wall_s: float) -> str:
    shown = " ".join(f"{k}={v}" for k, v in params.items()) or "PyTorch defaults"
    if not result.ok:
        return f"| {workload} | {shown} | {result.status.value}: {result.reason} |"
    m = result.metrics
    energy = f"{m['energy_j_per_sample']:.4f}" if "energy_j_per_sample" in m else "n/a"
    return (
        f"| {workload} | {shown} | {m['throughput']:,.0f} {m['throughput_unit']} | {m['step_ms_p50']:.2f} | "
        f"{m['step_ms_p90']:.2f} | {m['step_cv']:.2%} | {m['peak_mem_gib']:.1f} | {energy} | "
        f"{m.get('power_w_mean', float('nan')):.0f} | {m['compile_s']:.1f} | {m['overhead_s']:.2f} | "
        f"{wall_s:.0f} |"
    )


HEADER = (
    "| workload | configuration | throughput | step p50 ms | step p90 ms | step CV | peak GiB | J/sample "
    "| power W | compile s | overhead s | trial wall s |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", choices=["resnet50", "gpt2", "repeat"], action="append")
    parser.add_argument("--repeats", type=int, default=3, help="separate trials of one configuration")
    parser.add_argument("--preset", default="full")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    wanted = set(args.only or ["resnet50", "gpt2", "repeat"])
    plan = [("resnet50", p) for p in RESNET if "resnet50" in wanted] + [("gpt2", p) for p in GPT2 if "gpt2" in wanted]
    plan += [REPEAT] * (args.repeats if "repeat" in wanted else 0)
    runner, rows, records = TrialRunner(), [], []
    for workload, params in plan:
        started = time.perf_counter()
        result = runner.run(TrialSpec(workload, dict(params), preset=args.preset, device=args.device), args.timeout)
        wall = time.perf_counter() - started
        rows.append(_row(workload, params, result, wall))
        records.append({"workload": workload, "wall_s": wall, **result.to_dict()})
        print(rows[-1], flush=True)
        args.out.write_text(json.dumps(records, indent=1))
    repeats = [r["metrics"]["throughput"] for r in records[-args.repeats :] if r["status"] == "ok"]
    print("\n" + HEADER + "\n" + "\n".join(rows))
    if "repeat" in wanted and len(repeats) > 1:
        spread = statistics.pstdev(repeats) / statistics.fmean(repeats)
        print(f"\nrepeats: {', '.join(f'{t:,.0f}' for t in repeats)} -> CV {spread:.2%}")
    env: dict[str, Any] = next((r["env"] for r in records if r["env"]), {})
    print("env:", json.dumps(env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
