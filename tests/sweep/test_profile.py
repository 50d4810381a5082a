"""`autotune sweep --profile`: after re-measuring, the default and the winner profiled side by side, the
table in the log and on the MLflow parent run with both traces; a resumed sweep does not profile again."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from autotune.records import load_study_info, schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.leaderboard import leaderboard
from autotune.views.profile_study import DEFAULT_STEPS
from autotune.views.progress import Progress

SPACE = """\
workload: {name: resnet50, preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 2, trial_timeout: 2m}
sampler: {name: grid}
params:
  batch_size: {choices: [2, 8], ordinal: true, default: 2}
"""


def sweep(workdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"}
    # Re-measure the top 2 (both trials) once each: the profile must come after it and name its winner.
    command = [sys.executable, "-m", "autotune", "sweep", "tiny.yaml", "--profile", "--remeasure-top", "2"]
    command += ["--remeasure-repeats", "1"]
    return subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def resume(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The same sweep again, in this process (the command line is the first run's): what it said."""
    monkeypatch.chdir(workdir)
    options = SweepOptions(
        report=False,
        storage=f"sqlite:///{workdir}/autotune.db",
        tracking_uri=f"sqlite:///{workdir}/mlflow.db",
        remeasure_top=2,
        remeasure_repeats=1,
        profile_steps=DEFAULT_STEPS,
    )
    said = io.StringIO()
    run_sweep(load_space(workdir / "tiny.yaml"), options, Progress(None, None, said))
    return said.getvalue()


@pytest.mark.slow  # two sweeps: two trials, both re-measured, two profiled
def test_a_profiled_sweep_logs_the_table_and_traces_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tiny.yaml").write_text(SPACE)
    proc = sweep(tmp_path)
    assert proc.returncode == 0, proc.stderr
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{tmp_path}/autotune.db")
    info = load_study_info(study)
    assert info is not None
    winner = next(row for row in leaderboard(study, info) if row.rank == 1)
    assert study.user_attrs[schema.STUDY_ATTR_PROFILED] == {"default": 0, "winner": winner.trial}
    log = proc.stderr
    assert log.index("re-measuring trial") < log.index("profiling the default (trial 0)")
    assert f"winner (trial {winner.trial})" in log and "top 10 ops, default (trial 0)" in log
    for label in ("default", "winner"):
        assert (tmp_path / "profiles" / "tiny" / label / "trace.json").is_file()

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("autotune/tiny")
    assert experiment is not None
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`autotune.role` = 'sweep'")
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "profile")}
    assert artifacts == {"profile/profile.md", "profile/default", "profile/winner"}
    assert parent.data.metrics["profile_winner_step_ms"] > 0
    assert parent.info.status == "FINISHED"  # the profile came before the run was finished

    again = resume(tmp_path, monkeypatch)
    assert f"profile: trials 0 and {winner.trial} were profiled already" in again
    assert "profiling the default" not in again
