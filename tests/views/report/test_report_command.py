"""`autotune report` as a user types it, in a real process, logging to a real MLflow store (sqlite)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from report_studies import synthetic_study

from autotune.tracking import SweepTracker

optuna.logging.set_verbosity(optuna.logging.WARNING)


def autotune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    command = [sys.executable, "-m", "autotune", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 30-trial study in ./autotune.db and its sweep's parent run in ./mlflow.db, made once (MLflow's sqlite
    schema takes seconds to create): only the first test logs to that run, the others write elsewhere."""
    folder = tmp_path_factory.mktemp("report-command")
    synthetic_study(folder / "autotune.db", 30)
    SweepTracker("rn50", f"sqlite:///{folder}/mlflow.db").start({"space": "resnet50.yaml"})
    return folder


@pytest.mark.slow
def test_report_writes_the_page_and_pngs_and_logs_them_to_the_parent_run(workdir: Path) -> None:
    uri = f"sqlite:///{workdir}/mlflow.db"
    proc = autotune("report", "--study", "rn50", "-o", "out/rn50.html", "--tracking-uri", uri, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "logged to the sweep's MLflow run" in proc.stdout
    pngs = sorted(p.name for p in (workdir / "out" / "rn50_figures").iterdir())
    assert pngs == ["failures.png", "gpu_time.png", "importance.png", "slices.png", "throughput.png"]
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("autotune/rn50")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id], "tags.`autotune.role` = 'sweep'")
    assert {a.path for a in client.list_artifacts(run.info.run_id, "report")} == {
        "report/report.html",
        "report/figures",
    }
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "report/figures")}
    assert logged == {f"report/figures/{name}" for name in pngs}
    page = Path(client.download_artifacts(run.info.run_id, "report/report.html")).read_text()
    assert page == (workdir / "out" / "rn50.html").read_text()


@pytest.mark.slow
def test_report_without_a_sweep_run_logs_nowhere(workdir: Path) -> None:
    elsewhere = f"sqlite:///{workdir}/other.db"
    (workdir / "report.html").unlink(missing_ok=True)  # the default output, which another test writes too
    proc = autotune("report", "--study", "rn50", "--tracking-uri", elsewhere, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "not logged: no sweep run in" in proc.stdout
    assert (workdir / "report.html").is_file()
    assert MlflowClient(elsewhere).get_experiment_by_name("autotune/rn50") is None


def test_report_no_mlflow_and_an_unknown_study(workdir: Path) -> None:
    proc = autotune("report", "--study", "rn50", "--no-mlflow", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "logged" not in proc.stdout
    proc = autotune("report", "--study", "nope", "--no-mlflow", cwd=workdir)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "autotune: error: no study 'nope'" in proc.stderr
