"""Real ``autotune sweep`` processes for the tests: a space over :mod:`sweep_workloads`, started, waited for."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from pythonpath import child_env

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent


def write_space(workdir: Path, name: str, workload: str, budget: int, **args: object) -> Path:
    """A CPU space of ``budget`` trials over batch sizes and precisions; ``args`` go to the workload."""
    arguments = ", ".join(f"{key}: {value!r}" for key, value in {"folder": str(workdir), **args}.items())
    path = workdir / f"{name}.yaml"
    path.write_text(
        f"""\
workload: {{name: "sweep_workloads:{workload}", preset: tiny, args: {{{arguments}}}}}
device: cpu
budget: {{trials: {budget}, trial_timeout: 2m}}
sampler: {{name: random, seed: 0}}
params:
  batch_size: {{choices: [4, 8, 16, 32], default: 8}}
  precision: [default, fp32]
"""
    )
    return path


def environment(workdir: Path) -> dict[str, str]:
    """The workloads importable by trial processes; device locks in ``workdir`` (TMPDIR); no MLflow server."""
    return child_env(HERE, TESTS, without=["MLFLOW_TRACKING_URI"], TMPDIR=str(workdir))


def sweep_args(space: Path, *extra: str) -> list[str]:
    """What follows ``autotune``: a quick sweep (no MLflow, no re-measuring, no report) of ``space``."""
    return ["sweep", space.name, "--no-mlflow", "--remeasure-top", "0", "--prune-below", "0", "--no-report", *extra]


def start(workdir: Path, args: list[str], **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", *args],
        cwd=workdir,
        env=environment(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[call-overload]
    )


def run(workdir: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        cwd=workdir,
        env=environment(workdir),
        capture_output=True,
        text=True,
        timeout=300,
    )


def wait_for_files(paths: list[Path], proc: subprocess.Popen[str], timeout: float = 120) -> None:
    """Until every path exists; fail at once if the sweep ended first."""
    deadline = time.monotonic() + timeout
    while not all(path.exists() for path in paths):
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the sweep ended (exit code {proc.returncode}) before its trials hung:\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no trial hung within {timeout:g} s")
        time.sleep(0.05)


def load_study(workdir: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{workdir}/autotune.db")


def trial_pids(workdir: Path) -> dict[int, str]:
    """Every trial process that ran so far, with the CUDA_VISIBLE_DEVICES it was started with."""
    folder = workdir / "devices"
    return {int(p.name): p.read_text() for p in folder.iterdir()} if folder.exists() else {}


def is_gone(pid: int) -> bool:
    """A process that exited (a zombie not yet reaped by its parent counts as gone)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True
