"""The finishing stages run once per study, however many ``autotune sweep`` processes share it.

Two real sweeps on one study (the several-workers recipe without ``--gpus``), on SQLite and on
PostgreSQL: the top is re-measured once, not once per process, one report is drawn, and both print the
same winner. Before the study's finish lease, each process ran the stages: in three runs of three the
two printed different winners, and a fourth trial was re-measured under ``--remeasure-top 3``. Last,
the process running the stages is killed, and the one waiting for it takes over.
"""

from __future__ import annotations

import re
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from postgres import POSTGRES, require_server
from study_records import measured_records
from sweep_processes import is_gone, load_study, start, wait_for_files, write_space

from autotune.records import schema
from autotune.storage.rdb import GRACE_S

BUDGET = 6
TOP = 3


def sweep_args(space: Path, *extra: str) -> list[str]:
    """Re-measure the top 3 once each, no MLflow, no pruning."""
    remeasure = ["--remeasure-top", str(TOP), "--remeasure-repeats", "1"]
    return ["sweep", space.name, "--no-mlflow", "--prune-below", "0", *remeasure, *extra]


def sweep_together(workdir: Path, args: list[str]) -> list[tuple[int, str, str]]:
    """Two sweeps started at the same moment: each one's (exit code, stdout, stderr)."""
    procs = [start(workdir, args) for _ in range(2)]
    try:
        ends = [proc.communicate(timeout=300) for proc in procs]
        return [(proc.returncode, out, err) for proc, (out, err) in zip(procs, ends, strict=True)]
    finally:
        for proc in procs:
            proc.kill()  # no-op for those that ended
            proc.wait()


def check_finished_once(study: optuna.Study, ends: list[tuple[int, str, str]]) -> None:
    for code, _, err in ends:
        assert code == 0, err
        assert "Traceback" not in err, err
    outs, errs = [out for _, out, _ in ends], [err for _, _, err in ends]
    measured = measured_records(study)
    assert len(measured) == BUDGET
    assert len({r.worker for r in measured}) == 2  # both searched, side by side

    remeasured = sorted(t.number for t in study.trials if schema.remeasured_key(t.number) in study.user_attrs)
    assert len(remeasured) == TOP
    said = "".join(errs)
    assert sorted(int(n) for n in re.findall(r"re-measuring trial (\d+)", said)) == remeasured  # each once
    assert said.count("report: ") == 1
    assert sum("finishing stages: run by" in err for err in errs) == 1  # the other one waited, and ran none
    winners = [next(line for line in out.splitlines() if line.startswith("best: ")) for out in outs]
    assert winners[0] == winners[1]


@pytest.mark.slow
def test_two_sweeps_on_one_sqlite_study_finish_it_once(tmp_path: Path) -> None:
    space = write_space(tmp_path, "twice", "noted", BUDGET, step_ms=30.0)  # trials long enough to overlap
    ends = sweep_together(tmp_path, sweep_args(space))
    check_finished_once(load_study(tmp_path, "twice"), ends)


@pytest.fixture
def postgres_study() -> Iterator[str]:
    """A study name of its own in PostgreSQL's ``test`` database, deleted afterwards."""
    name = f"finishing-{uuid.uuid4().hex[:8]}"
    require_server()
    yield name
    optuna.delete_study(study_name=name, storage=POSTGRES)


@pytest.mark.slow
def test_two_sweeps_on_one_postgresql_study_finish_it_once(tmp_path: Path, postgres_study: str) -> None:
    space = write_space(tmp_path, "twice", "noted", BUDGET, step_ms=30.0)
    ends = sweep_together(tmp_path, sweep_args(space, "--storage", POSTGRES, "--study", postgres_study))
    check_finished_once(optuna.load_study(study_name=postgres_study, storage=POSTGRES), ends)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.slow
def test_when_the_process_running_the_stages_dies_the_one_waiting_takes_over(tmp_path: Path) -> None:
    # The first process built after the search's BUDGET trials, the holder's first re-measurement, hangs.
    space = write_space(tmp_path, "takeover", "hang_at", BUDGET, index=BUDGET)
    procs = [start(tmp_path, sweep_args(space)) for _ in range(2)]
    try:
        wait_for_files([tmp_path / "hung"], procs[0])
        hung = int((tmp_path / "hung").read_text())
        holder = parent_of(parent_of(hung))  # the re-measurement <- its runner's forkserver <- the sweep
        (killed,) = [proc for proc in procs if proc.pid == holder]
        (survivor,) = [proc for proc in procs if proc is not killed]
        killed.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        out, err = survivor.communicate(timeout=300)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert survivor.returncode == 0, err
    assert time.monotonic() - killed_at < GRACE_S  # known dead by its pid: no wait for its lease to expire
    assert f"waiting for {socket.gethostname()}:{holder}, which runs this study's finishing stages" in err
    assert "finishing stages: run by" not in err  # the holder died before they completed: this one ran them
    assert len(re.findall(r"re-measuring trial \d+", err)) == TOP
    assert "report: " in err and "best: trial" in out
    assert is_gone(hung)

    study = load_study(tmp_path, "takeover")
    assert len([t for t in study.trials if schema.remeasured_key(t.number) in study.user_attrs]) == TOP
    assert study.get_trials(states=(TrialState.RUNNING,)) == []
