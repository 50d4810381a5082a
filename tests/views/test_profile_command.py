"""`autotune profile` as a user types it: a real CPU sweep, the two trials re-run under torch.profiler in
their own processes, the table printed, the table and traces on the sweep's real MLflow run (sqlite).

The sweeps that only set a study up run in this process (:func:`sweep`; their trials in real processes all
the same): `autotune sweep` as a process is tested in tests/sweep, and each such process costs seconds of
imports and its own torch-preloading forkserver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from pythonpath import child_env

from autotune.profiling.table import WIDTH
from autotune.records import load_study_info
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.tracking import SweepTracker
from autotune.views.leaderboard import leaderboard
from autotune.views.profile_study import DEFAULT_STEPS, profile_study, space_of
from autotune.views.progress import Progress

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
RECORDS = REPO.parent / "shared" / "data" / "h200_triton_matmul_8192.json"
SPACE = """\
workload: {name: resnet50, preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 2, trial_timeout: 2m}
sampler: {name: grid}
params:
  batch_size: {choices: [2, 8], ordinal: true, default: 2}
"""
# The PyTorch-default trial (from_step=0) fails its numerics check; the other one runs fine.
BROKEN_DEFAULT = """\
workload: {name: "trial_workloads:nan_loss", preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 2, trial_timeout: 1m}
sampler: {name: grid}
params:
  from_step: {choices: [0, 1000000000], default: 0}
"""


def autotune(*args: str, cwd: Path, tracking_uri: str | None = None) -> subprocess.CompletedProcess[str]:
    env = child_env(without=["MLFLOW_TRACKING_URI"])  # trial_workloads, for trial processes too
    if tracking_uri:
        env["MLFLOW_TRACKING_URI"] = tracking_uri
    command = [sys.executable, "-m", "autotune", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("autotune: error: ")]
    assert len(errors) == 1 and fragment in errors[0], proc.stderr


def sweep(workdir: Path, space_file: str, **options: object) -> str:
    """What `autotune sweep SPACE_FILE --remeasure-top 0` does in ``workdir`` (its study in ./autotune.db), run in
    this process; ``options`` are the other :class:`SweepOptions`. Returns what the sweep said (its stderr)."""
    storage = f"sqlite:///{workdir}/autotune.db"
    log = workdir / f"{Path(space_file).stem}.log"
    with log.open("w") as stream:
        run_sweep(
            load_space(workdir / space_file, replay="replay" in options),
            SweepOptions(report=False, storage=storage, remeasure_top=0, **options),  # type: ignore[arg-type]
            Progress(None, None, stream),
        )
    return log.read_text()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished sweep of a tiny CPU space, logged to MLflow (sqlite) in its own folder."""
    workdir = tmp_path_factory.mktemp("profile-command")
    (workdir / "tiny.yaml").write_text(SPACE)
    sweep(workdir, "tiny.yaml", tracking_uri=mlflow_uri(workdir))
    return workdir


def mlflow_uri(workdir: Path) -> str:
    return f"sqlite:///{workdir}/mlflow.db"


def winner_of(workdir: Path) -> int:
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{workdir}/autotune.db")
    info = load_study_info(study)
    assert info is not None
    return next(row.trial for row in leaderboard(study, info) if row.rank == 1)


@pytest.mark.slow  # a sweep and two profiled trial processes
def test_profile_prints_the_table_and_logs_it_to_the_sweep_run(swept: Path) -> None:
    proc = autotune(
        "profile", "--study", "tiny", "--steps", "2", "--out", "prof", cwd=swept, tracking_uri=mlflow_uri(swept)
    )
    assert proc.returncode == 0, proc.stderr
    winner = winner_of(swept)
    table = proc.stdout.split("traces (open them")[0]
    assert max(len(line) for line in table.splitlines()) <= WIDTH
    assert "default (trial 0)" in table and f"winner (trial {winner})" in table
    for row in ("matmul/conv", "norm & elementwise", "data wait", "GPU idle", "top 10 ops, default (trial 0)"):
        assert row in table
    assert "profiling the default (trial 0)" in proc.stderr
    for label in ("default", "winner"):
        events = json.loads((swept / "prof" / label / "trace.json").read_text())["traceEvents"]
        assert sum(event.get("name") == "autotune.step" for event in events) == 2
    assert "logged to the sweep's MLflow run" in proc.stdout
    check_parent_run(mlflow_uri(swept), "tiny", table)


def check_parent_run(uri: str, study: str, table: str) -> None:
    """The sweep's one parent run holds the table, both traces and the key figures."""
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(f"autotune/{study}")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], "tags.`autotune.role` = 'sweep'")
    assert len(runs) == 1
    run_id = runs[0].info.run_id
    files = {a.path for a in client.list_artifacts(run_id, "profile")}
    assert files == {"profile/profile.md", "profile/default", "profile/winner"}
    for label in ("default", "winner"):
        assert [a.path for a in client.list_artifacts(run_id, f"profile/{label}")] == [f"profile/{label}/trace.json"]
    markdown = Path(client.download_artifacts(run_id, "profile/profile.md")).read_text()
    assert table.splitlines()[3] in markdown  # the throughput row
    metrics = client.get_run(run_id).data.metrics
    assert metrics["profile_default_step_ms"] > 0 and metrics["profile_winner_step_ms"] > 0
    assert metrics["profile_speedup"] > 0
    assert 0 < metrics["profile_winner_matmul_conv_share"] < 1
    assert "profile_winner_gpu_idle_share" not in metrics  # not on a CPU


@pytest.mark.slow  # a sweep and two profiled trial processes
def test_profile_logs_nowhere_when_the_store_has_no_sweep_run(swept: Path) -> None:
    # What `autotune profile --study tiny --steps 1 --tracking-uri ELSEWHERE` does, in this process (its two
    # trials in real processes): the command line is the test above's.
    elsewhere = f"sqlite:///{swept}/other-mlflow.db"
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{swept}/autotune.db")
    info = load_study_info(study)
    assert info is not None
    result = profile_study(study, info, space_of(info), swept / "prof1", steps=1)
    assert result.log(SweepTracker("tiny", elsewhere)) is False  # the command then says "not logged: ..."
    assert MlflowClient(elsewhere).get_experiment_by_name("autotune/tiny") is None  # nothing created


@pytest.mark.slow  # a sweep of two trial processes
def test_a_failed_default_is_one_line_from_profile_and_a_note_from_sweep(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN_DEFAULT)
    said = sweep(tmp_path, "broken.yaml", profile_steps=DEFAULT_STEPS, tracking=False)  # autotune sweep --profile
    assert "profile: not made: the PyTorch-default trial 0 of study 'broken' did not succeed (numerics" in said
    proc = autotune("profile", "--study", "broken", cwd=tmp_path)
    assert_one_line_error(proc, "the PyTorch-default trial 0 of study 'broken' did not succeed (numerics: loss is nan")


@pytest.mark.slow  # a replayed sweep, two autotune processes
@pytest.mark.skipif(not RECORDS.exists(), reason="needs ../shared/data")
def test_a_kernel_workload_cannot_be_profiled(tmp_path: Path) -> None:
    space = str(REPO / "search_spaces" / "triton_matmul.yaml")
    sweep(tmp_path, space, replay=RECORDS, n_trials=3, tracking=False, study_name="kernels")
    assert_one_line_error(autotune("profile", "--study", "kernels", cwd=tmp_path), "kernel workload (triton_matmul)")
    replay = ("--replay", str(RECORDS), "--n-trials", "3", "--no-mlflow", "--study", "kernels")
    assert_one_line_error(
        autotune("sweep", space, *replay, "--profile", cwd=tmp_path), "cannot be combined with --replay"
    )


def test_an_unknown_study_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(autotune("profile", "--study", "nope", cwd=tmp_path), "no study 'nope'")
