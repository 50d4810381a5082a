"""Measured trials in one search window with one GPU and with several: what `autotune sweep --gpus` buys.

    python scripts/gpus_benchmark.py SPACE --gpus 0 --gpus 0,1 [--window 400] [--seed 0] [--out DIR] [--json]
    # on a CPU, to try it: CPU workers (--device cpu), a short window
    python scripts/gpus_benchmark.py search_spaces/quick.yaml --device cpu --gpus 0 --gpus 0,1 --window 30

For each ``--gpus`` list, one after the other, it runs the real command in a fresh folder, on a study of its own:
``autotune sweep SPACE --gpus LIST --timeout WINDOW --seed SEED`` with the space's ``finalists:`` section left out,
no re-measurement, no rehearsed start, no report and no MLflow, so the window is the search alone. Then it reads
the study: the measured trials (the ones that cost device time and count in a budget), how many each GPU measured
(by the bus id each trial records, else by the worker that ran it), the best figure, and the ratio of measured
trials to the first run's. The sweeps' own output goes to ``DIR/RUN/sweep.log``. Exit code 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune.records import StudyRecords  # noqa: E402  (the repository's package, whatever is installed)
from autotune.records.schema import load_study_info  # noqa: E402

STUDY = "gpus"


def search_only(space: Path, folder: Path) -> Path:
    """The space without its ``finalists:`` section (a top-level key to the file's end or the next top-level key)."""
    kept, skipping = [], False
    for line in space.read_text().splitlines():
        if re.match(r"^[A-Za-z_]", line):
            skipping = line.startswith("finalists:")
        if not skipping:
            kept.append(line)
    path = folder / space.name
    path.write_text("\n".join(kept) + "\n")
    return path


def sweep(space: Path, gpus: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One window of ``autotune sweep --gpus GPUS`` in ``folder``; what its study holds after."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "autotune", "sweep", str(search_only(space, folder)), "--study", STUDY,
        "--gpus", gpus, "--timeout", f"{args.window}s", "--seed", str(args.seed), "--remeasure-top", "0",
        "--no-rehearse-start", "--no-report", "--no-mlflow",
        *(["--device", args.device] if args.device else []),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    began = time.monotonic()
    with (folder / "sweep.log").open("w") as log:
        done = subprocess.run(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    wall_s = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"gpus_benchmark: the sweep with --gpus {gpus} exited {done.returncode}: see {log.name}")
    return {"gpus": gpus, "wall_s": round(wall_s, 1), **read_study(f"sqlite:///{folder}/autotune.db")}


def read_study(storage: str) -> dict[str, Any]:
    """The measured trials of the study, by the GPU (bus id) or worker that measured them, and the best figure."""
    study = optuna.load_study(study_name=STUDY, storage=storage)
    info = load_study_info(study)
    if info is None:
        raise SystemExit(f"gpus_benchmark: {storage} holds no study autotune made")
    records = StudyRecords.read(study, info)
    measured = records.measured
    by_device = Counter(_device_of(record) for record in measured)
    winner = records.winner
    return {
        "measured": len(measured),
        "ok": sum(1 for record in measured if record.ok),
        "by_device": dict(sorted(by_device.items())),
        "best": winner.value if winner is not None else None,
        "unit": (winner.metrics.get("throughput_unit") if winner is not None else None) or "",
    }


def _device_of(record: Any) -> str:
    env = record.result.env if record.result is not None else {}
    return str(env.get("gpu_pci_bus_id") or record.gpu or record.worker or "unknown")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("space", type=Path)
    parser.add_argument("--gpus", action="append", required=True, help="a --gpus list; give it once per run")
    parser.add_argument("--window", type=int, default=400, help="seconds of search, each run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="override the space's device (cpu: CPU workers)")
    parser.add_argument("--out", type=Path, default=Path("gpus_benchmark"), help="a folder per run under it")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if not args.space.is_file():
        print(f"gpus_benchmark: error: no space file {args.space}", file=sys.stderr)
        return 2
    if args.window < 1:
        print(f"gpus_benchmark: error: --window must be at least 1 s, got {args.window}", file=sys.stderr)
        return 2
    runs = []
    for index, gpus in enumerate(args.gpus):
        runs.append(sweep(args.space.resolve(), gpus, args, args.out.resolve() / f"run{index}"))
    first = runs[0]["measured"] or 1
    for run in runs:
        run["vs_first"] = round(run["measured"] / first, 2)
    if args.json:
        print(json.dumps({"space": str(args.space), "window_s": args.window, "seed": args.seed, "runs": runs}))
        return 0
    for run in runs:
        best = f"{run['best']:,.1f} {run['unit']}" if run["best"] is not None else "none ok"
        devices = ", ".join(f"{device}: {count}" for device, count in run["by_device"].items())
        print(
            f"--gpus {run['gpus']}: {run['measured']} measured trials in a {args.window} s window "
            f"({run['vs_first']:.2f}x the first run; {devices}), best {best}, the command {run['wall_s']:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
