"""What the sweep engine costs per proposal, apart from the trials themselves, as a study grows.

    python scripts/engine_benchmark.py --trials 100 500                  # one worker, SQLite
    python scripts/engine_benchmark.py --trials 500 --workers 2          # two worker processes, one study
    python scripts/engine_benchmark.py --trials 500 --space mixed        # TPE instead of CMA-ES

A replay sweep answers every trial from records at once, so its time is all engine: Optuna's ask and
tell on the storage, the sampler, repeat detection, recording, progress. The records are synthetic
(made here, deterministic) and large enough for 500 measured trials: block-size-like ordered params,
with a smooth throughput landscape, a little deterministic noise, and an out-of-resources corner.
Two spaces: ``ordered`` (only ordered params: the default sampler is CMA-ES) and ``mixed`` (two
categorical knobs besides: TPE).

Reported per run: proposals, measured trials, wall time, proposals per second, and the mean time
per proposal overall and over the last 10% of proposals (the cost at the study's final size).
With ``--workers N``, N ``autotune sweep`` processes share the study, and the configurations that
more than one of them measured are counted (0 when they see each other's trials).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import optuna

from autotune.records import StudyRecords, schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

VALUES: dict[str, list[int]] = {
    "BLOCK_M": [16, 32, 64, 128, 256, 512],
    "BLOCK_N": [16, 32, 64, 128, 256, 512],
    "BLOCK_K": [16, 32, 64, 128, 256],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4, 5, 6],
}
CATEGORICAL: dict[str, list[str]] = {"precision": ["fp32", "tf32", "bf16", "fp16"], "layout": ["nchw", "nhwc"]}
SPEED = {"fp32": 1.0, "tf32": 2.0, "bf16": 3.5, "fp16": 3.6, "nchw": 1.0, "nhwc": 1.2}


def _throughput(params: dict[str, Any]) -> float:
    """A smooth landscape with its peak inside the grid, times a little deterministic noise."""
    log_distance = sum(
        (math.log2(params[name]) - math.log2(peak)) ** 2
        for name, peak in (("BLOCK_M", 128), ("BLOCK_N", 256), ("BLOCK_K", 64), ("num_warps", 8), ("num_stages", 4))
    )
    noise = 1 + (zlib.crc32(json.dumps(params, sort_keys=True).encode()) % 1000) / 50_000
    scale = math.prod(SPEED.get(str(v), 1.0) for v in params.values())
    return round(500.0 * scale * math.exp(-0.15 * log_distance) * noise, 3)


def records(space: str) -> list[dict[str, Any]]:
    """Every configuration of the space, answered ok or (large tiles, deep pipelines) out of resources."""
    names = [*VALUES, *(CATEGORICAL if space == "mixed" else {})]
    grids: list[list[Any]] = [*VALUES.values(), *(CATEGORICAL.values() if space == "mixed" else [])]
    out: list[dict[str, Any]] = []
    for combo in itertools.product(*grids):
        params = dict(zip(names, combo, strict=True))
        smem = params["num_stages"] * (params["BLOCK_M"] + params["BLOCK_N"]) * params["BLOCK_K"] * 2
        if smem > 232_448:
            out.append({"params": params, "status": "out_of_resources", "error": f"Required: {smem}"})
        else:
            out.append({"params": params, "status": "ok", "tflops": _throughput(params)})
    return out


def space_yaml(space: str, trials: int) -> str:
    lines = [
        "# written by scripts/engine_benchmark.py",
        "workload: {name: triton_matmul, preset: full}",
        "device: cuda",
        f"budget: {{trials: {trials}}}",
        "sampler: {name: auto, seed: 0}",
        "params:",
    ]
    lines += [f"  {name}: {{choices: {values}, ordinal: true}}" for name, values in VALUES.items()]
    if space == "mixed":
        lines += [f"  {name}: {values}" for name, values in CATEGORICAL.items()]
    return "\n".join(lines) + "\n"


class _Clock(Progress):
    """A silent progress display that notes when each proposal finished."""

    def __init__(self) -> None:
        super().__init__(None, None, io.StringIO())
        self.stamps: list[float] = []

    def finished(self, *args: Any, **kwargs: Any) -> None:
        self.stamps.append(time.perf_counter())
        super().finished(*args, **kwargs)


def one_worker(folder: Path, space: str, trials: int) -> dict[str, Any]:
    """One in-process replay sweep; times from its first ask to its last proposal."""
    options = SweepOptions(
        study_name="engine",
        storage=f"sqlite:///{folder}/engine.db",
        replay=folder / "records.json",
        tracking=False,
        n_trials=trials,
    )
    clock = _Clock()
    started = time.perf_counter()
    summary = run_sweep(load_space(folder / "space.yaml", replay=True), options, clock)
    gaps = [b - a for a, b in itertools.pairwise([started, *clock.stamps])]
    tail = gaps[-max(1, len(gaps) // 10) :]
    wall = clock.stamps[-1] - started
    return {
        "proposals": len(gaps),
        "measured": summary.measured,
        "wall_s": wall,
        "proposals_per_s": len(gaps) / wall,
        "mean_s": statistics.fmean(gaps),
        "last_10pct_s": statistics.fmean(tail),
    }


def several_workers(folder: Path, trials: int, workers: int) -> dict[str, Any]:
    """``workers`` real ``autotune sweep`` processes on one SQLite study, started together."""
    command = [sys.executable, "-m", "autotune", "sweep", str(folder / "space.yaml"), "--study", "engine"]
    command += ["--storage", f"sqlite:///{folder}/engine.db", "--replay", str(folder / "records.json")]
    command += ["--no-mlflow", "--n-trials", str(trials)]
    started = time.perf_counter()
    procs = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(workers)
    ]
    errors = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - started
    for proc, err in zip(procs, errors, strict=True):
        if proc.returncode != 0:
            raise SystemExit(f"a worker failed ({proc.returncode}):\n{err[-2000:]}")
    study = optuna.load_study(study_name="engine", storage=f"sqlite:///{folder}/engine.db")
    info = schema.load_study_info(study)
    assert info is not None, "the engine study was made by autotune sweep"
    measured = StudyRecords.read(study, info).measured
    configs = [json.dumps(r.params, sort_keys=True) for r in measured]
    proposals = len(study.get_trials(deepcopy=False))
    return {
        "proposals": proposals,
        "measured": len(measured),
        "wall_s": wall,  # process start-up (imports) included
        "proposals_per_s": proposals / wall,
        "measured_twice": len(configs) - len(set(configs)),
        "by_worker": len({r.worker for r in measured}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 500], help="measured trials per run")
    parser.add_argument("--space", choices=["ordered", "mixed"], default="ordered")
    parser.add_argument("--workers", type=int, default=1, help="worker processes sharing the study")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = []
    for trials in args.trials:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "records.json").write_text(json.dumps(records(args.space)))
            (folder / "space.yaml").write_text(space_yaml(args.space, trials))
            if args.workers == 1:
                row = one_worker(folder, args.space, trials)
            else:
                row = several_workers(folder, trials, args.workers)
        row = {"space": args.space, "trials": trials, "workers": args.workers, **row}
        rows.append(row)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
