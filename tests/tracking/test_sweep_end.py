"""A sweep that stops on an error or a signal ends its MLflow run (FAILED, KILLED) with why, against a real store."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from autotune.tracking import SweepTracker


def test_a_stopped_sweep_s_run_ends_with_why_and_a_resume_runs_it_again(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = SweepTracker("rn50", uri).start({"device": "cuda"})
    assert run_id is not None

    assert SweepTracker("rn50", uri).end("KILLED", "interrupted by SIGTERM")  # another process: it looks the run up
    run = MlflowClient(uri).get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["autotune.reason"] == "interrupted by SIGTERM"
    assert run.data.tags["mlflow.note.content"].startswith("**Sweep stopped** by a signal: interrupted by SIGTERM")

    assert SweepTracker("rn50", uri).start({"device": "cuda"}) == run_id
    assert MlflowClient(uri).get_run(run_id).info.status == "RUNNING"


def test_a_sweep_that_never_reached_mlflow_leaves_nothing_there(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert SweepTracker("never", uri).end("FAILED", "the disk is full") is False
    assert MlflowClient(uri).get_experiment_by_name("autotune/never") is None
