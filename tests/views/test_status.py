"""``autotune status`` from another terminal, on a real sweep's SQLite study: running, then its worker killed."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pythonpath import child_env

HERE = Path(__file__).resolve().parents[1]
SPACE = """\
workload: {name: "trial_workloads:sleepy", preset: tiny, args: {seconds: 600.0}}
device: cpu
budget: {trials: 3, trial_timeout: 10m}
sampler: {name: random, seed: 0}
params:
  precision: [default, fp32]
"""


def _env() -> dict[str, str]:
    return child_env(HERE)


def _status(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "status", "--study", "hang"],
        cwd=folder, env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# A running trial that the sweep has also given its worker and its params (each its own write after the trial's).
_RUNNING_AND_DESCRIBED = """
select count(*) from trials t where t.state = 'RUNNING' and (
    select count(*) from trial_user_attributes a
    where a.trial_id = t.trial_id and a.key in ('autotune.worker', 'autotune.params')
) = 2
"""


def _wait_for_a_running_trial(db: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
                if con.execute(_RUNNING_AND_DESCRIBED).fetchone()[0]:
                    return
        except sqlite3.OperationalError:  # no file, or its tables not created yet
            pass
        time.sleep(0.05)
    raise AssertionError("no trial started running")


@pytest.mark.slow
def test_status_shows_the_running_trial_then_that_its_worker_is_gone(tmp_path: Path) -> None:
    (tmp_path / "hang.yaml").write_text(SPACE)
    sweep = subprocess.Popen(
        [sys.executable, "-m", "autotune", "sweep", "hang.yaml", "--no-mlflow"],
        cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for_a_running_trial(tmp_path / "autotune.db", time.monotonic() + 120)
        running = _status(tmp_path)
    finally:
        os.killpg(sweep.pid, signal.SIGKILL)  # the sweep and its trial process, as a lost terminal would
        sweep.wait(timeout=30)
    # The budget the sweep runs with: the space's 3 trials, capped by its 2 configurations.
    assert (
        running.splitlines()[0]
        == "study hang (trial_workloads:sleepy): 0 of 2 measured (0 ok, 0 pruned, 0 failed), 1 running"
    )
    assert "best so far: none yet" in running
    line = next(line for line in running.splitlines() if line.startswith("running:"))
    assert re.fullmatch(r"running: trial 0 on [^ ]+:\d+ for \d+s: precision=default", line), line
    assert "its worker is gone" not in line

    gone = _status(tmp_path)
    assert "(its worker is gone: retried when a sweep resumes)" in gone


def test_status_without_a_running_trial_says_whether_the_sweep_ended_or_stopped(tmp_path: Path) -> None:
    """No ETA once nothing runs: a sweep that finished before its budget (a time limit) reads as finished, one cut
    off without finishing (a kill) as stopped, and a measured budget as finished once its finishing stages ran."""
    from recorded_studies import add_trial, make_study, ok_result

    from autotune.records import StudyInfo, schema
    from autotune.views.status import sweep_status

    info = StudyInfo("trial_workloads:sleepy", "tiny", "cpu", "hang.yaml", SPACE, (("throughput", "maximize"),))
    study = make_study(tmp_path, info, name="hang")
    for throughput in (100.0, 150.0):
        add_trial(study, info, ok_result(throughput))

    stopped = sweep_status(study, info).lines()
    assert not any(line.startswith("eta:") for line in stopped)
    assert re.fullmatch(
        r"stopped: no trial is running and the sweep did not finish with 1 of its 3 trials left "
        r"\(about \d+s at the measured trials' pace\); the same `autotune sweep` command resumes it",
        stopped[-1],
    ), stopped[-1]

    study.set_user_attr(schema.STUDY_ATTR_FINISHED, {"measured": 2, "by": "host:1"})
    ended = sweep_status(study, info).lines()
    assert ended[-1] == "finished with 1 of its 3 trials left; the same `autotune sweep` command resumes it"

    add_trial(study, info, ok_result(120.0))
    assert (
        sweep_status(study, info)
        .lines()[-1]
        .startswith("done: the budget is measured; its finishing stages did not complete")
    )
    study.set_user_attr(schema.STUDY_ATTR_FINISHED, {"measured": 3, "by": "host:1"})
    assert sweep_status(study, info).lines()[-1] == "finished: its budget of 3 trials is measured"


def test_status_counts_the_budget_the_sweep_ran_with_over_the_space_s(tmp_path: Path) -> None:
    """``--n-trials`` and ``--timeout`` on the command line win over the space's budget (3 trials here)."""
    from recorded_studies import add_trial, make_study, ok_result

    from autotune.records import StudyInfo, SweepState, schema
    from autotune.views.status import sweep_status

    info = StudyInfo("trial_workloads:sleepy", "tiny", "cpu", "hang.yaml", SPACE, (("throughput", "maximize"),))
    study = make_study(tmp_path, info, name="overridden")
    for throughput in (100.0, 150.0):
        add_trial(study, info, ok_result(throughput))
    study.set_user_attr(schema.STUDY_ATTR_BUDGET, SweepState.budget_attr(2, 5400.0))
    study.set_user_attr(schema.STUDY_ATTR_FINISHED, {"measured": 2, "by": "host:1"})
    lines = sweep_status(study, info).lines()
    assert lines[0].startswith("study overridden (trial_workloads:sleepy): 2 of 2 measured")
    assert lines[0].endswith("0 running, time limit 1h30m")
    assert lines[-1] == "finished: its budget of 2 trials is measured"
