"""The study's storage: a queued trial goes to one worker, however many ask at the same moment; workers started
together on a new PostgreSQL database all open it.

Real processes on one SQLite file, as ``--gpus`` workers on one host share the default ``autotune.db``, and on a real
PostgreSQL server, as workers of several hosts share a study there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from postgres import new_database
from pythonpath import child_env

from autotune.storage.rdb import open_storage

OPENERS = 6  # on a new database, 2 to 5 of 6 failed before the opens retried
QUEUED = 40
WORKERS = 4
ASKS = 15  # each: more than its share of the queue, so every worker pops while the others do

ASK = """
import json, sys, time, optuna
from autotune.storage.rdb import open_storage, quiet_optuna
url, start_at, asks = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
study = optuna.load_study(study_name="queue", storage=open_storage(url))
time.sleep(max(0.0, start_at - time.time() - 0.05))  # then spin: every worker asks from the same moment on
while time.time() < start_at:
    pass
with quiet_optuna():
    numbers = [study.ask().number for _ in range(asks)]
print(json.dumps(numbers))
"""


@pytest.mark.slow
def test_each_queued_trial_is_asked_by_one_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(study_name="queue", storage=open_storage(url))
    for value in range(QUEUED):
        study.enqueue_trial({"x": value})
    start_at = time.time() + 8  # past every worker's imports and storage open
    workers = [
        subprocess.Popen([sys.executable, "-c", ASK, url, str(start_at), str(ASKS)], stdout=subprocess.PIPE, text=True)
        for _ in range(WORKERS)
    ]
    try:
        asked = Counter(number for worker in workers for number in json.loads(worker.communicate(timeout=300)[0]))
    finally:
        for worker in workers:
            worker.kill()  # a no-op for the ones that ended
    twice = sorted(number for number, count in asked.items() if count > 1)
    assert not twice, f"trials asked by more than one worker: {twice}"
    assert all(number in asked for number in range(QUEUED))  # the whole queue was served
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 0


OPEN = """
import sys, time, optuna
from autotune.storage.rdb import open_storage
url, start_at = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, start_at - time.time() - 0.05))
while time.time() < start_at:
    pass
study = optuna.create_study(study_name="shared", storage=open_storage(url), load_if_exists=True)
print(study.study_name)
"""


@pytest.mark.slow
def test_workers_started_together_on_a_new_postgresql_database_all_open_it() -> None:
    with new_database() as url:
        start_at = time.time() + 6  # past every worker's imports
        command = [sys.executable, "-c", OPEN, url]
        workers = [
            subprocess.Popen(
                [*command, str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
            )
            for _ in range(OPENERS)
        ]
        ends = [worker.communicate(timeout=120) for worker in workers]
        failed = [
            err.strip().splitlines()[-1] for worker, (_, err) in zip(workers, ends, strict=True) if worker.returncode
        ]
        assert not failed, f"{len(failed)} of {OPENERS} workers could not open the new database: {failed[0]}"
        assert [out.strip() for out, _ in ends] == ["shared"] * OPENERS
        assert [summary.study_name for summary in optuna.get_all_study_summaries(url)] == ["shared"]
