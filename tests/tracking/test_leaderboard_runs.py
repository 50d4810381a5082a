"""What makes MLflow read as a leaderboard, against a real store: ``speedup`` on the trials' runs, the sweep's
description, the experiment's kind and its saved view "autotune leaderboard"."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient

from autotune.results import Status, TrialResult
from autotune.tracking import HTTP_ENV_DEFAULTS, SweepTracker
from autotune.tracking.ui import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, VIEW_ID, VIEW_TAG, address

DEFAULT = {"precision": "default", "batch_size": 16}
DEFAULT_TAGS = {"autotune.default": "true"}  # what the sweep's recorder tags the PyTorch-default trial with


def ok(throughput: float, **params: Any) -> TrialResult:
    metrics = {"throughput": throughput, "throughput_unit": "images/s", "step_ms_p50": 1e3 / throughput}
    return TrialResult(status=Status.OK, params={**DEFAULT, **params}, metrics=metrics)


def failed(status: Status, **params: Any) -> TrialResult:
    result = TrialResult.failed(status, f"{status.value} for the test", {**DEFAULT, **params})
    if status is Status.PRUNED:
        result.metrics = {"throughput": 10.0}  # a warm-up estimate: no speedup for it
    return result


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow-leaderboard') / 'mlflow.db'}"


@pytest.fixture
def study() -> str:
    return f"lb-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _restore_http_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """SweepTracker sets MLflow's HTTP retry variables for the process; undo that after each test."""
    for name in HTTP_ENV_DEFAULTS:
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)


def log(tracker: SweepTracker, number: int, result: TrialResult, tags: dict[str, str] | None = None) -> None:
    assert tracker.log_trial(number, result, result.params, tags) is not None


def trial_runs(uri: str, parent_id: str) -> dict[int, Run]:
    client = MlflowClient(uri)
    experiment_id = client.get_run(parent_id).info.experiment_id
    runs = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'", ViewType.ACTIVE_ONLY)
    return {int(run.data.tags["autotune.trial"]): run for run in runs}


def speedups(uri: str, parent_id: str) -> dict[int, float | None]:
    return {n: run.data.metrics.get("speedup") for n, run in sorted(trial_runs(uri, parent_id).items())}


def description(uri: str, parent_id: str) -> str:
    return MlflowClient(uri).get_run(parent_id).data.tags["mlflow.note.content"]


def test_ok_trials_get_speedup_over_the_default(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({"storage": "sqlite:///autotune.db"})
    assert parent_id is not None
    log(tracker, 0, ok(200.0), DEFAULT_TAGS)
    log(tracker, 1, ok(500.0, precision="bf16"))
    log(tracker, 2, failed(Status.PRUNED, batch_size=8))
    log(tracker, 3, failed(Status.OOM, batch_size=64))
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 2.5, 2: None, 3: None}
    # A resumed sweep (a new process) finds the default's run to compare with.
    log(SweepTracker(study, sqlite_uri), 4, ok(300.0, batch_size=32))
    assert speedups(sqlite_uri, parent_id)[4] == 1.5
    assert trial_runs(sqlite_uri, parent_id)[1].data.tags["autotune.throughput_unit"] == "images/s"


def test_trials_logged_before_the_default_get_speedup_when_it_comes(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    other_worker = SweepTracker(study, sqlite_uri)
    log(other_worker, 1, ok(300.0, precision="bf16"))
    assert speedups(sqlite_uri, parent_id) == {1: None}
    log(tracker, 0, ok(100.0), DEFAULT_TAGS)
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 3.0}


def test_a_failed_default_gives_no_speedup(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    log(tracker, 0, failed(Status.OOM), DEFAULT_TAGS)
    log(tracker, 1, ok(100.0, batch_size=8))
    log(SweepTracker(study, sqlite_uri), 2, ok(120.0, batch_size=4))
    assert speedups(sqlite_uri, parent_id) == {0: None, 1: None, 2: None}
    tracker.finish({}, {}, winner=2)
    assert "the PyTorch defaults have no throughput to compare with" in description(sqlite_uri, parent_id)


def test_finish_describes_the_sweep_with_the_leaderboards_numbers(sqlite_uri: str, study: str, tmp_path: Path) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({"storage": "postgresql://me:***@db/autotune"})
    assert parent_id is not None
    assert description(sqlite_uri, parent_id).startswith("**Sweep running.**")
    log(tracker, 0, ok(200.0), DEFAULT_TAGS)
    log(tracker, 1, ok(800.0, precision="bf16", batch_size=64))  # measured once high, re-measured lower
    log(tracker, 2, ok(500.0, precision="fp32"))
    log(tracker, 3, failed(Status.PRUNED, batch_size=8))
    log(tracker, 4, failed(Status.OOM, batch_size=128))
    log(tracker, 5, failed(Status.OOM, batch_size=256))
    log(tracker, 6, failed(Status.TIMEOUT, precision="bf16", batch_size=8))
    for number, median in ((0, 250.0), (1, 600.0), (2, 450.0)):  # what the re-measure stage adds
        assert tracker.add_trial_metrics(number, {"remeasured_throughput": median, "remeasured_cv": 0.01})
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.html").write_text("<h1>report</h1>")
    assert tracker.add_to_sweep_run({}, {}, {"": report})  # as the report stage logs it

    tracker.finish({"speedup_vs_default": 2.4}, {"leaderboard.csv": "rank,trial\n1,1\n"}, winner=1)

    # Speedups compare re-measured medians where there are some, as the leaderboard does.
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 2.4, 2: 1.8, 3: None, 4: None, 5: None, 6: None}
    text = description(sqlite_uri, parent_id)
    experiment_id = MlflowClient(sqlite_uri).get_run(parent_id).info.experiment_id
    winner_name = trial_runs(sqlite_uri, parent_id)[1].info.run_name
    assert text.startswith(f"**Winner: trial 1** `{winner_name}`: **600 images/s** (median of its re-measurements)")
    assert "**2.40x** the PyTorch defaults (trial 0: 250 images/s)." in text
    assert "`precision` default → **bf16**, `batch_size` 16 → **64**." in text
    assert "**Trials:** 7 measured: 3 ok, 1 pruned, 3 failed (oom 2, timeout 1)." in text
    assert "`autotune export --study " + study + " --storage 'postgresql://me:***@db/autotune' -o tuned.yaml`" in text
    report_link = f"#/experiments/{experiment_id}/runs/{parent_id}/artifacts/report/report.html"
    assert f"[report/report.html]({report_link}?workflowType=machine_learning)" in text
    view_link = f"#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_ID}"
    assert f"]({view_link})" in text
    assert tracker.ui_link == view_link


def test_the_defaults_can_win(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    log(tracker, 0, ok(1234.5), DEFAULT_TAGS)
    log(tracker, 1, ok(1000.0, precision="bf16"))
    tracker.finish({}, {}, winner=0)
    text = description(sqlite_uri, parent_id)
    assert text.startswith("**Winner: the PyTorch defaults** (trial 0): **1,234 images/s**; no configuration")
    assert f"`autotune export --study {study} -o tuned.yaml`" in text  # the default storage needs no --storage
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 0.81}


def test_no_winner_is_said(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    log(tracker, 0, failed(Status.CRASH), DEFAULT_TAGS)
    tracker.finish({}, {}, winner=None)
    text = description(sqlite_uri, parent_id)
    assert text.startswith("**No winner:** no feasible trial finished ok.")
    assert "**Trials:** 1 measured: 0 ok, 0 pruned, 1 failed (crash 1)." in text


def test_fractions_keep_six_significant_digits(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    result = ok(374.1633123712463)
    result.metrics |= {"peak_mem_gib": 0.2857627868652344, "items_per_step": 123456789, "compile_s": 0.0}
    log(tracker, 0, result, DEFAULT_TAGS)
    metrics = trial_runs(sqlite_uri, parent_id)[0].data.metrics
    assert (metrics["throughput"], metrics["peak_mem_gib"]) == (374.163, 0.285763)
    assert (metrics["items_per_step"], metrics["compile_s"]) == (123456789.0, 0.0)  # counts stay exact


@pytest.mark.parametrize("backend", ["sqlite", "server"])
def test_the_experiment_is_a_model_training_experiment_with_a_leaderboard_view(
    backend: str, sqlite_uri: str, study: str, request: pytest.FixtureRequest
) -> None:
    uri = sqlite_uri if backend == "sqlite" else request.getfixturevalue("mlflow_server").uri
    tracker = SweepTracker(study, uri)
    parent_id = tracker.start({})
    log(tracker, 0, ok(100.0), DEFAULT_TAGS)
    log(tracker, 1, ok(150.0, precision="bf16", memory_format="channels_last"))
    tracker.finish({}, {}, winner=1)
    client = MlflowClient(uri)
    experiment = client.get_experiment(client.get_run(parent_id).info.experiment_id)
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    view = json.loads(experiment.tags[VIEW_TAG])
    assert view["name"] == "autotune leaderboard" and isinstance(view["createdAt"], int)
    state = json.loads(view["state"])
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`speedup`", False)
    assert state["selectedColumns"] == [
        "metrics.`speedup`",
        "metrics.`throughput`",
        "metrics.`step_ms_p50`",
        "params.`precision`",
        "params.`batch_size`",
        "params.`memory_format`",
        "tags.`autotune.status`",
    ]
    assert state["columnOrder"] == state["selectedColumns"]


def test_an_existing_experiment_is_marked_unless_marked_for_training(sqlite_uri: str, study: str) -> None:
    client = MlflowClient(sqlite_uri)
    # Made by an autotune from before the mark, and one a user marked by hand in MLflow's UI.
    client.create_experiment(f"autotune/{study}", tags={"autotune.study": study})
    client.create_experiment(f"autotune/{study}-ft", tags={EXPERIMENT_KIND_TAG: "finetuning"})
    names = (study, f"{study}-ft")
    for name in names:
        SweepTracker(name, sqlite_uri).start({})
    kinds = [client.get_experiment_by_name(f"autotune/{name}").tags[EXPERIMENT_KIND_TAG] for name in names]
    assert kinds == [EXPERIMENT_KIND, "finetuning"]


def test_the_ui_address_of_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    link = "#/experiments/3/runs?workflowType=machine_learning"
    assert address("http://mlflow.lan:5000/", link) == f"http://mlflow.lan:5000/{link}"
    here = f"sqlite:///{tmp_path / 'mlflow.db'}"  # MLflow's default store in this folder
    assert address(here, link) == f"http://127.0.0.1:5000/{link} (with `mlflow ui` in this folder running)"
    elsewhere = "sqlite:////data/mlflow.db"
    assert address(elsewhere, link).endswith(f"(with `mlflow ui --backend-store-uri {elsewhere}` running)")
