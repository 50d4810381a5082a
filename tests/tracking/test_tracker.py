"""SweepTracker against a local sqlite store and a real MLflow server (conftest's ``mlflow_server``)."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
import pytest
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient
from recorded_studies import THROUGHPUT, make_info, make_study, trial_attrs

from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords, TrialRecord
from autotune.records.trial import read_trial
from autotune.tracking import HTTP_ENV_DEFAULTS, SweepTracker, resolve_tracking_uri, trial_run_name

if TYPE_CHECKING:
    from conftest import MlflowServer

ENV = {"gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "cudnn": 91900, "host": "box"}
PARAMS = {"batch_size": 256, "precision": "bf16", "memory_format": "channels_last", "compile_mode": "default"}


def ok_result(throughput: float = 6664.0) -> TrialResult:
    return TrialResult(
        status=Status.OK,
        params=PARAMS,
        metrics={
            "throughput": throughput,
            "throughput_unit": "samples/s",
            "step_ms_p50": 38.4,
            "compile_s": 27,
            "energy_j_per_sample": float("nan"),
            "power_w_mean": float("inf"),
            "cudagraphs": True,
        },
        env=ENV,
    )


def failed_result() -> TrialResult:
    return TrialResult.failed(Status.OOM, "CUDA out of memory.\n Tried to allocate 2.00 GiB", PARAMS)


def record(number: int, result: TrialResult) -> TrialRecord:
    """Trial ``number`` as the records read it once the recorder wrote ``result``."""
    complete = optuna.trial.TrialState.COMPLETE
    values = [result.metrics["throughput"]] if result.ok else [-1.0]
    trial = optuna.trial.create_trial(state=complete, values=values, user_attrs=trial_attrs(result))
    trial.number = number
    return read_trial(trial, THROUGHPUT)


def no_records() -> StudyRecords:
    """The records of a study with no trials."""
    return StudyRecords.read(make_study(None, make_info()), make_info())


@pytest.fixture(scope="session")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    # One database for the session: creating MLflow's schema costs about a second per database.
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow-sqlite') / 'mlflow.db'}"


@pytest.fixture(params=["sqlite", "server"])
def tracking_uri(request: pytest.FixtureRequest, sqlite_uri: str) -> str:
    if request.param == "sqlite":
        return sqlite_uri
    return request.getfixturevalue("mlflow_server").uri


@pytest.fixture
def study() -> str:
    """A fresh study name: all tests of a backend share one store."""
    return f"study-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def space_file(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text("# autotune sweep space.yaml\nworkload: tiny_mlp\n")
    return path


@pytest.fixture(autouse=True)
def _restore_http_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """SweepTracker sets MLflow's HTTP retry variables for the process; undo that after each test."""
    for name in HTTP_ENV_DEFAULTS:
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)


def child_runs(client: MlflowClient, parent_id: str) -> list[Run]:
    experiment_id = client.get_run(parent_id).info.experiment_id
    return client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'", ViewType.ACTIVE_ONLY)


# --------------------------------------------------------------------------- pure functions


def test_trial_run_name_abbreviates_knobs() -> None:
    assert trial_run_name(12, PARAMS) == "t012 bf16 cl compile=default bs256"


def test_trial_run_name_says_blocks_with_the_compile_mode() -> None:
    assert trial_run_name(5, {**PARAMS, "compile_scope": "blocks"}) == "t005 bf16 cl compile=default/blocks bs256"
    assert trial_run_name(5, {**PARAMS, "compile_scope": "model"}) == "t005 bf16 cl compile=default bs256"


def test_trial_run_name_leaves_out_defaults_and_shows_other_params() -> None:
    params = {
        "precision": "default",
        "memory_format": "contiguous",
        "compile_mode": "none",
        "fused_optimizer": False,
        "matmul_precision": "auto",
        "cudnn_benchmark": True,
        "cudnn_deterministic": None,
        "batch_size": 64,
    }
    assert trial_run_name(3, params) == "t003 bs64 bench=1"
    assert trial_run_name(1234, {"BLOCK_M": 128, "lr": 0.001}) == "t1234 BLOCK_M=128 lr=0.001"


def test_trial_run_name_stays_short() -> None:
    name = trial_run_name(7, {f"kernel.block_{i}": 128 for i in range(20)})
    assert len(name) <= 60
    assert name.startswith("t007 kernel.block_0=128") and name.endswith("...")


def test_resolve_tracking_uri_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # MLflow 3.17's own default, as an absolute path, so `mlflow ui` in this folder shows the runs.
    assert resolve_tracking_uri(None) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://example:5000")
    assert resolve_tracking_uri(None) == "http://example:5000"
    assert resolve_tracking_uri("sqlite:////x/y.db") == "sqlite:////x/y.db"


def test_http_retry_defaults_do_not_override_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    SweepTracker("s", "http://127.0.0.1:1")  # makes no request
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"
    assert os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == HTTP_ENV_DEFAULTS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"]


# --------------------------------------------------------------------------- both backends


def test_start_reuses_the_parent_run(tracking_uri: str, study: str, space_file: Path) -> None:
    client = MlflowClient(tracking_uri)
    parent_id = SweepTracker(study, tracking_uri).start({"workload": "tiny_mlp", "device": "cpu"}, space_file)
    assert parent_id is not None
    SweepTracker(study, tracking_uri).finish(no_records(), {"trials_done": 0}, {})
    assert client.get_run(parent_id).info.status == "FINISHED"

    # The same command again: the same sweep, RUNNING again; a changed param becomes a tag.
    resumed = SweepTracker(study, tracking_uri).start({"workload": "tiny_mlp", "device": "cuda"}, space_file)
    assert resumed == parent_id
    run = client.get_run(parent_id)
    assert run.info.status == "RUNNING"
    assert run.info.run_name == f"sweep {study}"
    assert run.data.params == {"workload": "tiny_mlp", "device": "cpu"}
    assert run.data.tags["autotune.param.device"] == "cuda"
    assert run.data.tags["autotune.role"] == "sweep"
    experiment = client.get_experiment_by_name(f"autotune/{study}")
    assert experiment is not None and run.info.experiment_id == experiment.experiment_id
    space = Path(client.download_artifacts(parent_id, "space.yaml", str(space_file.parent / "dl")))
    assert space.read_text() == space_file.read_text()


def test_log_trial_makes_one_child_run_per_trial(tracking_uri: str, study: str, space_file: Path) -> None:
    tracker = SweepTracker(study, tracking_uri)
    parent_id = tracker.start({"workload": "tiny_mlp"}, space_file)
    assert parent_id is not None
    ok_id = tracker.log_trial(record(0, ok_result()), 2.5, series={"step_ms": [38.0, 38.5]})
    failed_id = tracker.log_trial(record(1, failed_result()), None)
    assert ok_id and failed_id and ok_id != failed_id

    client = MlflowClient(tracking_uri)
    ok_run, failed_run = client.get_run(ok_id), client.get_run(failed_id)
    assert ok_run.info.status == "FINISHED"
    assert ok_run.info.run_name == "t000 bf16 cl compile=default bs256"
    assert ok_run.data.params == {
        "batch_size": "256",
        "precision": "bf16",
        "memory_format": "channels_last",
        "compile_mode": "default",
    }
    # Only finite numbers become metrics: no unit string, no flag, no NaN/inf.
    assert ok_run.data.metrics == {"throughput": 6664.0, "step_ms_p50": 38.4, "compile_s": 27.0, "speedup": 2.5}
    tags = ok_run.data.tags
    assert tags["mlflow.parentRunId"] == parent_id
    assert (tags["autotune.views.status"], tags["autotune.trial"], tags["autotune.role"]) == ("ok", "0", "trial")
    assert (tags["autotune.outcome"], tags["autotune.feasible"]) == ("ok", "true")
    assert (tags["env.gpu"], tags["env.cudnn"]) == ("NVIDIA H200", "91900")
    assert "autotune.reason" not in tags
    series = Path(client.download_artifacts(ok_id, "series.json", str(space_file.parent / "dl")))
    assert json.loads(series.read_text()) == {"step_ms": [38.0, 38.5]}

    assert failed_run.info.status == "FAILED"
    assert failed_run.data.tags["autotune.views.status"] == failed_run.data.tags["autotune.outcome"] == "oom"
    assert failed_run.data.tags["autotune.reason"] == "CUDA out of memory. Tried to allocate 2.00 GiB"
    assert failed_run.data.metrics == {}
    assert client.list_artifacts(failed_id) == []
    assert tracker.logged_trial_numbers() == {0, 1}


def test_log_trial_is_idempotent(tracking_uri: str, study: str) -> None:
    tracker = SweepTracker(study, tracking_uri)
    parent_id = tracker.start({}, None)
    assert parent_id is not None
    first = tracker.log_trial(record(5, ok_result()), None)
    # A resumed sweep (a new tracker, a new process) logging the same trial again.
    again = SweepTracker(study, tracking_uri).log_trial(record(5, ok_result(throughput=1.0)), None)
    assert again == first
    runs = child_runs(MlflowClient(tracking_uri), parent_id)
    assert [run.info.run_id for run in runs] == [first]
    assert runs[0].data.metrics["throughput"] == 6664.0


def test_log_trial_completes_a_run_left_running_by_an_outage(tracking_uri: str, study: str) -> None:
    tracker = SweepTracker(study, tracking_uri)
    parent_id = tracker.start({}, None)
    assert parent_id is not None
    client = MlflowClient(tracking_uri)
    experiment_id = client.get_run(parent_id).info.experiment_id
    # What an outage between create_run and log_batch leaves behind.
    half = client.create_run(
        experiment_id, tags={"mlflow.parentRunId": parent_id, "autotune.trial": "2", "autotune.role": "trial"}
    )
    assert tracker.logged_trial_numbers() == set()
    assert tracker.log_trial(record(2, ok_result()), None) == half.info.run_id
    run = client.get_run(half.info.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["throughput"] == 6664.0
    assert tracker.logged_trial_numbers() == {2}


def test_finish_logs_summary_and_artifacts(tracking_uri: str, study: str, tmp_path: Path) -> None:
    tracker = SweepTracker(study, tracking_uri)
    parent_id = tracker.start({"workload": "tiny_mlp"}, None)
    assert parent_id is not None
    tracker.log_trial(record(0, ok_result()), None)
    tracker.finish(
        no_records(),
        {"best_value": 6664.0, "speedup_vs_default": 3.2, "trials_done": 1, "trials_failed": 0},
        {"best_config.yaml": "schema_version: 1\n", "leaderboard.csv": "rank,trial\n1,0\n"},
    )
    client = MlflowClient(tracking_uri)
    run = client.get_run(parent_id)
    assert run.info.status == "FINISHED"
    assert run.data.metrics == {
        "best_value": 6664.0,
        "speedup_vs_default": 3.2,
        "trials_done": 1.0,
        "trials_failed": 0.0,
    }
    assert sorted(f.path for f in client.list_artifacts(parent_id)) == ["best_config.yaml", "leaderboard.csv"]
    board = Path(client.download_artifacts(parent_id, "leaderboard.csv", str(tmp_path)))
    assert board.read_text() == "rank,trial\n1,0\n"


def test_a_trial_run_carries_its_model_flops_tflops_and_mfu(tracking_uri: str, study: str) -> None:
    tracker = SweepTracker(study, tracking_uri)
    assert tracker.start({}, None) is not None
    result = ok_result()
    flops = {"model_flops_per_step": 134.67e12, "tflops": 632.8, "mfu": 0.6395, "peak_tflops": 989.5}
    result.metrics |= {**flops, "peak_precision": "bf16"}
    run = MlflowClient(tracking_uri).get_run(tracker.log_trial(record(0, result), None) or "")
    assert flops.items() <= run.data.metrics.items()  # sortable columns, the model FLOPs exact
    assert "peak_precision" not in run.data.metrics  # text is no metric


# --------------------------------------------------------------------------- sqlite only


def test_duplicate_parents_resolve_to_the_oldest(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    oldest = tracker.start({}, None)
    assert oldest is not None
    client = MlflowClient(sqlite_uri)
    experiment_id = client.get_run(oldest).info.experiment_id
    # What two workers starting the same sweep at the same moment could leave behind.
    client.create_run(experiment_id, tags={"autotune.study": study, "autotune.role": "sweep"})
    assert SweepTracker(study, sqlite_uri).start({}, None) == oldest


def test_sqlite_artifacts_live_next_to_the_database(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({}, None)
    assert parent_id is not None
    artifact_uri = MlflowClient(sqlite_uri).get_run(parent_id).info.artifact_uri
    db_dir = Path(sqlite_uri.removeprefix("sqlite:///")).parent
    assert artifact_uri.startswith(str(db_dir / "mlruns" / "autotune" / study))


def test_experiment_create_race_is_tolerated(sqlite_uri: str, study: str, monkeypatch: pytest.MonkeyPatch) -> None:
    winner = SweepTracker(study, sqlite_uri)
    winner_parent = winner.start({}, None)
    loser = SweepTracker(study, sqlite_uri)
    # The loser looked the experiment up just before the winner created it.
    monkeypatch.setattr(loser._client(), "get_experiment_by_name", _none_once(loser._client().get_experiment_by_name))
    assert loser.start({}, None) == winner_parent


def _none_once(lookup: Callable[[str], Any]) -> Callable[[str], Any]:
    calls: list[str] = []

    def wrapper(name: str) -> Any:
        calls.append(name)
        return None if len(calls) == 1 else lookup(name)

    return wrapper


def test_programming_errors_still_raise(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    with pytest.raises(AttributeError):
        tracker.log_trial(None, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status"):
        tracker.finish(no_records(), {}, {}, status="DONE")


# --------------------------------------------------------------------------- outage


@pytest.mark.slow
def test_outage_does_not_fail_the_sweep_and_is_caught_up(
    mlflow_server: MlflowServer, study: str, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = SweepTracker(study, mlflow_server.uri, retry_after_s=1.0)
    parent_id = tracker.start({"workload": "tiny_mlp"}, None)
    assert tracker.log_trial(record(0, ok_result()), None) is not None

    caplog.set_level(logging.INFO, logger="autotune.tracking")
    with mlflow_server.stopped():
        started = time.monotonic()
        assert tracker.log_trial(record(1, ok_result()), None) is None
        assert time.monotonic() - started < 15
        assert not tracker.reachable
        # Within retry_after_s, calls are skipped at once instead of waiting for MLflow's retries.
        started = time.monotonic()
        assert tracker.log_trial(record(2, failed_result()), None) is None
        assert tracker.logged_trial_numbers() is None
        assert time.monotonic() - started < 0.5
        time.sleep(1.0)
        assert tracker.log_trial(record(2, failed_result()), None) is None  # tried again, still down
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "unreachable" in r.message]
    assert len(warnings) == 1, "one warning per outage"
    assert not [r for r in caplog.records if r.name.startswith("urllib3")], "urllib3 retry warnings are muted"

    time.sleep(1.0)  # past retry_after_s: the next call goes to the restarted server
    assert tracker.logged_trial_numbers() == {0}
    assert tracker.reachable
    assert any("reachable again" in r.message for r in caplog.records)
    for number, result in ((1, ok_result()), (2, failed_result())):  # the sweep's catch-up
        assert tracker.log_trial(record(number, result), None) is not None
    assert tracker.logged_trial_numbers() == {0, 1, 2}
    assert len(child_runs(MlflowClient(mlflow_server.uri), parent_id)) == 3
