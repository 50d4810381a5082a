"""A sweep whose study's disk fills up mid-sweep: one line, exit 2, nothing measured lost or measured twice.

Real ``autotune sweep`` processes on a real small disk (a tmpfs); a trial of
:func:`storage_workloads.fills_disk` fills it while it runs, so the trial's record is the write that meets
the full disk. Its trial processes are counted in ``marks`` (another disk): a trial measured again shows.

- the reserve beside the study gives that record room: the trial is recorded, none is left RUNNING, the
  MLflow run (its store on the same disk) ends FAILED with the reason; the same command resumes once
  space is freed, without measuring that trial again;
- where the reserve's space does not come back (the test holds the file open, as a backup tool reading
  it would), the measurement is kept on another disk and recorded onto its trial when the sweep resumes;
- a disk without room for the reserve refuses the sweep before it measures anything.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from replay_records import MATMUL_RECORDS
from study_records import measured_records
from sweep_processes import environment, sweep_args
from tmpfs import fill, mounted_tmpfs

from autotune.records import TrialKind, schema
from autotune.sweep.faults.disk_reserve import RESERVE_PREFIX
from autotune.sweep.faults.full_disk import RESUME

BUDGET = 3
STUDY = "fill"
REPO = Path(__file__).resolve().parents[2]


def write_space(disk: Path, marks: Path) -> Path:
    """A CPU space whose second trial process fills ``disk``."""
    path = disk / f"{STUDY}.yaml"
    path.write_text(
        f"""\
workload: {{name: "storage_workloads:fills_disk", preset: tiny, args: {{disk: "{disk}", marks: "{marks}"}}}}
device: cpu
budget: {{trials: {BUDGET}, trial_timeout: 2m}}
sampler: {{name: random, seed: 0}}
params:
  batch_size: {{choices: [4, 8, 16, 32], default: 8}}
  precision: [default, fp32]
"""
    )
    return path


def start(disk: Path, tmp_path: Path, args: list[str]) -> subprocess.Popen[str]:
    """``autotune ARGS`` in ``disk`` (its study and MLflow store there); anything else it keeps, on another disk."""
    env = {**environment(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    command = [sys.executable, "-m", "autotune", *args]
    return subprocess.Popen(command, cwd=disk, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def error_line(err: str) -> str:
    """The command's one error line: its last, and the only one (no traceback above it)."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("autotune: error:")]
    assert errors == [err.splitlines()[-1]], err
    return errors[0].removeprefix("autotune: error: ")


def processes(marks: Path) -> int:
    return len(list(marks.iterdir()))


def load(disk: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{disk}/autotune.db")


def files_on(disk: Path) -> set[str]:
    """Every file left on the disk (folders aside), relative to it."""
    return {str(path.relative_to(disk)) for path in disk.rglob("*") if not path.is_dir()}


def mlflow_parent(disk: Path) -> tuple[str, str | None]:
    """The sweep's MLflow run: its status and ``autotune.reason``."""
    with sqlite3.connect(f"file:{disk}/mlflow.db?mode=ro", uri=True) as db:
        (run_id, status) = db.execute(
            "SELECT r.run_uuid, r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
            "WHERE t.key = 'autotune.role' AND t.value = 'sweep'"
        ).fetchone()
        reason = db.execute(
            "SELECT value FROM tags WHERE run_uuid = ? AND key = 'autotune.reason'", (run_id,)
        ).fetchone()
    return status, reason[0] if reason else None


def check_resumed(disk: Path, tmp_path: Path, args: list[str], marks: Path) -> str:
    """The same command again, the ballast removed: the budget is measured, trial 1 once, by one process."""
    (disk / "ballast").unlink()
    code, out, err = finish(start(disk, tmp_path, args))
    assert code == 0, err
    assert f"budget of {BUDGET} measured trials reached" in out
    study = load(disk)
    measured = measured_records(study)
    assert len(measured) == BUDGET
    assert 1 in {t.number for t in measured}
    assert all(t.system_attrs.get("failed_trial") is None for t in study.trials)  # nothing retried
    assert processes(marks) == BUDGET  # each measured trial ran once: trial 1 was not measured again
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    return err


@pytest.mark.slow
def test_a_disk_filled_during_a_trial_keeps_that_trial_and_resumes(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    with mounted_tmpfs(tmp_path / "disk", "16m") as disk:
        args = ["sweep", write_space(disk, marks).name, "--remeasure-top", "0", "--prune-below", "0"]  # with MLflow
        code, _, err = finish(start(disk, tmp_path, args))
        assert code == 2, err
        line = (
            f"the disk holding {disk}/autotune.db is full (the file system mounted at {disk}); trial 1, measured "
            "as the disk filled, is recorded, as is every trial measured before it; free space there and re-run "
            "the same command to resume"
        )
        assert error_line(err) == line
        # No reserve, no temporary file, no write-ahead log left: the study's file is whole and alone.
        left = {name for name in files_on(disk) if not name.startswith("mlruns/")}  # MLflow's artifacts: whole files
        counts = {name for name in left if name.startswith(f".autotune-cache/{STUDY}/flops/")}  # the study's FLOPs
        assert all(json.loads((disk / name).read_text())["flops"] for name in counts)  # each count whole
        assert left - counts == {"autotune.db", "mlflow.db", "ballast", f"{STUDY}.yaml"}
        study = load(disk)
        assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.COMPLETE]  # none left RUNNING
        assert [t.number for t in measured_records(study)] == [0, 1]
        assert processes(marks) == 2
        assert mlflow_parent(disk) == ("FAILED", line)

        check_resumed(disk, tmp_path, args, marks)
        assert mlflow_parent(disk)[0] == "FINISHED"
        assert not any(name.endswith(".tmp") or RESERVE_PREFIX in name for name in files_on(disk))


@pytest.mark.slow
def test_where_the_reserve_cannot_help_the_measurement_is_kept_elsewhere_and_recorded_on_resume(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    with mounted_tmpfs(tmp_path / "disk", "16m") as disk:
        args = sweep_args(write_space(disk, marks))
        proc = start(disk, tmp_path, args)
        reserve = wait_for_reserve(disk / ".autotune-cache" / STUDY, proc)
        with reserve.open("rb"):  # an open file's space is not freed when it is deleted
            code, _, err = finish(proc)
        assert code == 2, err
        (kept,) = (tmp_path / "state" / "autotune" / "kept").iterdir()
        assert kept.name.endswith("-trial1.json")
        assert error_line(err) == (
            f"the disk holding {disk}/autotune.db is full (the file system mounted at {disk}); trial 1's "
            f"measurement is kept in {kept}, to be recorded when the sweep resumes; the trials measured before it "
            "are in the study; free space there and re-run the same command to resume"
        )
        assert load(disk).trials[1].state is TrialState.RUNNING  # until the resumed sweep records it
        assert processes(marks) == 2

        err = check_resumed(disk, tmp_path, args, marks)
        assert "trial 1: its measurement, kept while the disk was full, is recorded now" in err
        assert not kept.exists()
        assert load(disk).trials[1].user_attrs[schema.ATTR_KIND] == TrialKind.MEASURED


def wait_for_reserve(folder: Path, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list(folder.glob(f"{RESERVE_PREFIX}*")) if folder.exists() else []
        if found:
            return found[0]
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended before it set its reserve aside: {proc.communicate()[1]}")
        time.sleep(0.02)
    proc.kill()
    pytest.fail("no reserve within 120 s")


@pytest.mark.slow
def test_a_disk_without_room_for_the_reserve_refuses_the_sweep_before_a_trial(tmp_path: Path) -> None:
    space = REPO / "search_spaces" / "triton_matmul.yaml"
    with mounted_tmpfs(tmp_path / "disk", "16m") as disk:
        args = ["sweep", str(space), "--study", "m", "--replay", str(MATMUL_RECORDS), "--no-mlflow", "--n-trials"]
        code, _, err = finish(start(disk, tmp_path, [*args, "1"]))
        assert code == 0, err
        ballast = fill(disk)
        os.truncate(ballast, ballast.stat().st_size - (1 << 20))  # 1 MiB free: the study opens, the reserve won't fit
        code, _, err = finish(start(disk, tmp_path, [*args, "2"]))
        assert code == 2, err
        full = f"the disk holding {disk}/autotune.db is full (the file system mounted at {disk}); "
        needs = r"a sweep needs 4 MiB free beside its study to start, \d+\.\d KiB are; "  # SQLite's files took some
        assert re.fullmatch(re.escape(full) + needs + re.escape(RESUME), error_line(err))
        study = optuna.load_study(study_name="m", storage=f"sqlite:///{disk}/autotune.db")
        assert len(measured_records(study)) == 1
