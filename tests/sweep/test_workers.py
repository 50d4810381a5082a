"""Several workers on one study, started together: the README's one-sweep-per-GPU recipe, on the CPU.

Each worker is a real ``autotune sweep`` process; they share the study through its storage (the
default SQLite file, or PostgreSQL as across hosts) and log to one MLflow store. The last test
interleaves two workers' asks in one process, to check deterministically that they do not
propose in lockstep.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from postgres import POSTGRES, require_server
from study_records import measured_records
from trial_workloads import LOCKSTEP_SPACE, lockstep_records

from autotune.records import TrialKind, schema
from autotune.space import load_space
from autotune.sweep import Sweep, SweepOptions
from autotune.sweep.measurers import replay_executor
from autotune.views.progress import Progress

REPO = Path(__file__).resolve().parents[2]
WORKERS = 2
BUDGET = 4  # shared: started together, the workers began their first trials 0.2 s apart here; a trial takes seconds


def run_workers(workdir: Path, *extra: str) -> None:
    """Start the workers at the same moment and wait for all of them: each must exit 0."""
    # Each worker runs the finishing stages too; one re-measurement keeps that stage in (its default is 9 runs).
    finish = ["--remeasure-top", "1", "--remeasure-repeats", "1", "--no-report"]
    command = [sys.executable, "-m", "autotune", "sweep", "quick.yaml", "--n-trials", str(BUDGET), *finish, *extra]
    workers = [
        subprocess.Popen(command, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(WORKERS)
    ]
    try:
        errors = [worker.communicate(timeout=600)[1] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()  # no-op for those that exited; a stuck one takes its trial down with it
            worker.wait()
    for worker, err in zip(workers, errors, strict=True):
        assert worker.returncode == 0, err
        assert "Traceback" not in err
        assert "unreachable" not in err  # MLflow worked for both from the start (no catch-up needed)


def check_shared_study(study: optuna.Study, tracking_uri: str) -> None:
    measured = measured_records(study)
    assert len(measured) == BUDGET  # the workers share one budget, not one each
    configs = {tuple(sorted(t.params.items())) for t in measured}
    assert len(configs) == BUDGET  # no configuration measured by both
    assert len({t.worker for t in measured}) == WORKERS  # both did work

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(f"autotune/{study.study_name}")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("autotune.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("autotune.role") == "trial"]
    assert len(parents) == 1  # one sweep in the UI, however many workers
    assert sorted(int(r.data.tags["autotune.trial"]) for r in children) == sorted(t.number for t in measured)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(REPO / "search_spaces" / "quick.yaml", tmp_path / "quick.yaml")
    return tmp_path


@pytest.mark.slow
def test_workers_started_together_share_the_default_sqlite_study(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both create autotune.db and mlflow.db in a fresh folder at the same moment."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_workers(workdir)
    study = optuna.load_study(study_name="quick", storage=f"sqlite:///{workdir}/autotune.db")
    check_shared_study(study, f"sqlite:///{workdir}/mlflow.db")


@pytest.fixture
def postgres_study() -> Iterator[tuple[str, str]]:
    """A study name of its own in the ``test`` database, deleted afterwards."""
    name = f"workers-{uuid.uuid4().hex[:8]}"
    require_server()
    yield POSTGRES, name
    optuna.delete_study(study_name=name, storage=POSTGRES)


@pytest.mark.slow
def test_workers_started_together_share_a_postgresql_study(
    workdir: Path, postgres_study: tuple[str, str], mlflow_server: object
) -> None:
    storage, name = postgres_study
    uri = mlflow_server.uri  # type: ignore[attr-defined]
    run_workers(workdir, "--storage", storage, "--study", name, "--tracking-uri", uri)
    check_shared_study(optuna.load_study(study_name=name, storage=storage), uri)


def test_workers_with_one_seed_stop_proposing_in_lockstep(tmp_path: Path) -> None:
    """Two workers asking in turn: with one seed, the second drew the first's last point every time.

    Deterministic: the asks alternate in this process, each worker under its own identity, so
    the only randomness left is the reseeded worker's (failing would take 5 chance
    collisions in its 9 later asks over 300 configurations: odds of about 1e-6).
    """
    records = lockstep_records()
    (tmp_path / "records.json").write_text(json.dumps(records))  # written before options name it
    (tmp_path / "lockstep.yaml").write_text(LOCKSTEP_SPACE)
    space = load_space(tmp_path / "lockstep.yaml", replay=True)
    records_file = tmp_path / "records.json"
    options = SweepOptions(
        report=False, storage=f"sqlite:///{tmp_path}/lockstep.db", replay=records_file, tracking=False
    )
    quiet = Progress(None, None, io.StringIO())
    first, second = (Sweep(space, options, replay_executor(records_file), quiet, worker=f"host:{i}") for i in (1, 2))
    for _ in range(10):
        first.one_trial()
        second.one_trial()

    study = optuna.load_study(study_name="lockstep-replay", storage=options.storage)
    duplicates = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.user_attrs[schema.ATTR_WORKER] == "host:2" and t.user_attrs.get(schema.ATTR_KIND) == TrialKind.DUPLICATE
    ]
    assert 1 <= len(duplicates) <= 5  # the collision that reseeds it; in lockstep, all 10
