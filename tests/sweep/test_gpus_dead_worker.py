"""``--gpus``: a worker killed mid-trial is taken out in one line; the others retry its trial and end the sweep.

Real processes on the CPU (``--device cpu --gpus 0,1``): the budget's last trial hangs
(``sweep_workloads.hang_at``), so when its worker is SIGKILLed the other worker has nothing left to
propose but the budget is not met. Without this, it ended its search counting the dead worker's running
trial, and the sweep ended in an internal error ("worker cpu 0 ended without a word"), a trial left RUNNING.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState
from study_records import measured_records
from sweep_processes import is_gone, load_study, start, sweep_args, trial_pids, wait_for_files, write_space

from autotune.records import schema
from autotune.storage.rdb import GRACE_S

BUDGET = 4


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.slow
def test_a_worker_killed_mid_trial_is_taken_out_and_the_other_retries_its_trial(tmp_path: Path) -> None:
    space = write_space(tmp_path, "dead", "hang_at", BUDGET, index=BUDGET - 1)  # the budget's last trial hangs
    proc = start(tmp_path, sweep_args(space, "--device", "cpu", "--gpus", "0,1"))
    wait_for_files([tmp_path / "hung"], proc)
    hung = int((tmp_path / "hung").read_text())
    entry = trial_pids(tmp_path)[hung]  # the --gpus entry of the worker that runs it
    worker = parent_of(parent_of(hung))  # the trial process <- its runner's forkserver <- the worker
    os.kill(worker, signal.SIGKILL)
    killed_at = time.monotonic()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert time.monotonic() - killed_at < GRACE_S  # known dead by its pid, not by its heartbeats a minute later
    assert "Traceback" not in err and "internal error" not in err, err
    assert [line for line in err.splitlines() if "taken out" in line] == [
        f"cpu {entry}: taken out: its process was killed by SIGKILL (exit code -9)"
    ]
    assert f"budget of {BUDGET} measured trials reached (cpu {entry} taken out)" in out
    assert "best: trial" in out  # the summary, as after any sweep
    assert is_gone(hung)  # the trial process died with its worker: it holds no device

    study = load_study(tmp_path, "dead")
    assert study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING)) == []
    measured = measured_records(study)
    assert len(measured) == BUDGET  # exactly: the retry took the dead trial's place
    dead_worker = f"{socket.gethostname()}:{worker}"
    # Its trial: failed with no outcome (no kind, no result), not counted as measured.
    (killed,) = [
        t
        for t in study.trials
        if t.user_attrs.get(schema.ATTR_WORKER) == dead_worker and not t.user_attrs.get(schema.ATTR_KIND)
    ]
    assert killed.state is TrialState.FAIL
    assert f"trial {killed.number} was left running by a killed worker ({dead_worker}): retrying it" in err
    (retried,) = [r for r in measured if r.params == killed.user_attrs[schema.ATTR_PARAMS]]  # measured once
    assert study.trials[retried.number].system_attrs["failed_trial"] == killed.number
    assert retried.worker != dead_worker
    assert retried.ok
