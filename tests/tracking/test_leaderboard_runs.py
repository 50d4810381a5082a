"""What makes MLflow read as a leaderboard, against a real store: ``speedup`` on the trials' runs, the sweep's
description, the experiment's kind and its saved view "autotune leaderboard"."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import pytest
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient
from recorded_studies import add_trial, make_info, make_study, trial_attrs

from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo, StudyRecords, TrialKind, schema
from autotune.tracking import HTTP_ENV_DEFAULTS, SweepTracker
from autotune.tracking.ui import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, VIEW_ID, VIEW_TAG, address

DEFAULT = {"precision": "default", "batch_size": 16}


def ok(throughput: float, **params: Any) -> TrialResult:
    metrics = {"throughput": throughput, "throughput_unit": "images/s", "step_ms_p50": 1e3 / throughput}
    return TrialResult(status=Status.OK, params={**DEFAULT, **params}, metrics=metrics)


def failed(status: Status, **params: Any) -> TrialResult:
    result = TrialResult.failed(status, f"{status.value} for the test", {**DEFAULT, **params})
    if status is Status.PRUNED:
        result.metrics = {"throughput": 10.0}  # a warm-up estimate: no speedup for it
    return result


class Sweep:
    """A study recorded as a sweep records it, each trial logged to MLflow as the recorder logs it."""

    def __init__(self, tracker: SweepTracker, info: StudyInfo | None = None) -> None:
        self.tracker = tracker
        self.info = info or make_info()
        self.study = make_study(None, self.info)

    @property
    def records(self) -> StudyRecords:
        return StudyRecords.read(self.study, self.info)

    def log(self, result: TrialResult, tracker: SweepTracker | None = None, **attrs: Any) -> int:
        number = add_trial(self.study, self.info, result, **attrs)
        records = self.records
        record = records.trial(number)
        assert (tracker or self.tracker).log_trial(record, records.speedup(record)) is not None
        if record.default:
            (tracker or self.tracker).sync(records)  # as the recorder does once the yardstick is measured
        return number

    def remeasure(self, number: int, median: float) -> None:
        """What the re-measure stage stores on the study (and logs as metrics)."""
        data = {"metric": "throughput", "values": [median], "median": median, "cv": 0.01}
        self.study.set_user_attr(f"autotune.remeasured:{number}", data)
        assert self.tracker.add_trial_metrics(number, {"remeasured_throughput": median, "remeasured_cv": 0.01})

    def finish(self, metrics: dict[str, float] | None = None, artifacts: dict[str, str] | None = None) -> None:
        self.tracker.finish(self.records, metrics or {}, artifacts or {})


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
    sweep = Sweep(tracker)
    sweep.log(ok(200.0), default=True)
    sweep.log(ok(500.0, precision="bf16"))
    sweep.log(failed(Status.PRUNED, batch_size=8))
    sweep.log(failed(Status.OOM, batch_size=64))
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 2.5, 2: None, 3: None}
    # A resumed sweep (a new process) has the default in its records to compare with.
    sweep.log(ok(300.0, batch_size=32), tracker=SweepTracker(study, sqlite_uri))
    assert speedups(sqlite_uri, parent_id)[4] == 1.5
    runs = trial_runs(sqlite_uri, parent_id)
    assert runs[1].data.tags["autotune.throughput_unit"] == "images/s"
    # A pruned trial is no failure, and its warm-up estimate is not a throughput to sort by.
    assert runs[2].info.status == "FINISHED" and runs[2].data.tags["autotune.outcome"] == "pruned"
    assert runs[2].data.metrics == {"warmup_throughput": 10.0}
    assert runs[3].info.status == "FAILED"


def test_trials_logged_before_the_default_get_speedup_when_it_comes(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    default = sweep.study.ask()  # another worker measures the default meanwhile
    sweep.log(ok(300.0, precision="bf16"), tracker=SweepTracker(study, sqlite_uri))
    assert speedups(sqlite_uri, parent_id) == {1: None}
    for key, value in trial_attrs(ok(100.0), default=True).items():
        default.set_user_attr(key, value)
    sweep.study.tell(default, 100.0)
    records = sweep.records
    assert tracker.log_trial(records.trial(0), records.speedup(records.trial(0))) is not None
    tracker.sync(records)
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 3.0}


def test_a_failed_default_gives_no_speedup(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    sweep.log(failed(Status.OOM), default=True)
    sweep.log(ok(100.0, batch_size=8))
    sweep.log(ok(120.0, batch_size=4), tracker=SweepTracker(study, sqlite_uri))
    assert speedups(sqlite_uri, parent_id) == {0: None, 1: None, 2: None}
    sweep.finish()
    assert "the PyTorch defaults have no figure to compare with" in description(sqlite_uri, parent_id)


def test_runs_carry_the_trials_own_start_and_end(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    start = datetime(2026, 11, 25, 9, 0, 0)
    attrs = trial_attrs(ok(100.0), default=True)
    trial = optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, values=[100.0], user_attrs=attrs)
    trial.datetime_start, trial.datetime_complete = start, start + timedelta(seconds=18)
    sweep.study.add_trial(trial)
    records = sweep.records
    tracker.log_trial(records.trial(0), records.speedup(records.trial(0)))
    run = trial_runs(sqlite_uri, parent_id)[0]
    assert run.info.start_time == int(start.timestamp() * 1000)
    assert run.info.end_time - run.info.start_time == 18_000  # the trial's 18 s, not the time it took to log it


def test_infeasible_trials_are_marked_and_never_rank_above_the_winner(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    sweep.log(ok(100.0), default=True)
    sweep.log(ok(400.0, batch_size=256), violation=3.0, reason="peak_mem_gib <= 10 broken")  # faster, too big
    sweep.log(ok(150.0, batch_size=32))
    sweep.finish()
    runs = trial_runs(sqlite_uri, parent_id)
    assert runs[1].data.tags["autotune.feasible"] == "false" and runs[1].data.tags["autotune.outcome"] == "infeasible"
    assert runs[1].data.tags["autotune.views.status"] == "ok"  # the trial ran fine: the constraint is what it broke
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: None, 2: 1.5}  # sorted by speedup, it comes last
    ordered = MlflowClient(sqlite_uri).search_runs(
        [runs[0].info.experiment_id],
        f"tags.`mlflow.parentRunId` = '{parent_id}'",
        order_by=["metrics.`speedup` DESC"],
    )
    assert [run.data.tags["autotune.trial"] for run in ordered] == ["2", "0", "1"]  # the winner first
    text = description(sqlite_uri, parent_id)
    assert text.startswith("**Winner: trial 2**")
    assert "1 faster trial broke a constraint and do not rank (trials 1)" in text


def test_finish_describes_the_sweep_with_the_leaderboards_numbers(sqlite_uri: str, study: str, tmp_path: Path) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({"storage": "postgresql://me:***@db/autotune"})
    assert parent_id is not None
    assert description(sqlite_uri, parent_id).startswith("**Sweep running.**")
    sweep = Sweep(tracker)
    sweep.log(ok(200.0), default=True)
    sweep.log(ok(800.0, precision="bf16", batch_size=64))  # measured once high, re-measured lower
    sweep.log(ok(500.0, precision="fp32"))
    sweep.log(failed(Status.PRUNED, batch_size=8))
    sweep.log(failed(Status.OOM, batch_size=128))
    sweep.log(failed(Status.OOM, batch_size=256))
    sweep.log(failed(Status.TIMEOUT, precision="bf16", batch_size=8))
    for number, median in ((0, 250.0), (1, 600.0), (2, 450.0)):  # what the re-measure stage adds
        sweep.remeasure(number, median)
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.html").write_text("<h1>report</h1>")
    assert tracker.add_to_sweep_run({}, {}, {"": report})  # as the report stage logs it

    sweep.finish({"speedup_vs_default": 2.4}, {"leaderboard.csv": "rank,trial\n1,1\n"})

    # Speedups compare re-measured medians where there are some, as the leaderboard does.
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 2.4, 2: 1.8, 3: None, 4: None, 5: None, 6: None}
    text = description(sqlite_uri, parent_id)
    experiment_id = MlflowClient(sqlite_uri).get_run(parent_id).info.experiment_id
    winner_name = trial_runs(sqlite_uri, parent_id)[1].info.run_name
    assert text.startswith(
        f"**Winner: trial 1** `{winner_name}`: **600 images/s** throughput (median of 1 re-measurements)"
    )
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
    assert parent_id is not None
    sweep = Sweep(tracker)
    sweep.log(ok(1234.5), default=True)
    sweep.log(ok(1000.0, precision="bf16"))
    sweep.finish()
    text = description(sqlite_uri, parent_id)
    assert text.startswith(
        "**Winner: the PyTorch defaults** (trial 0): **1,234 images/s** throughput (one measurement); no feasible"
    )
    assert f"`autotune export --study {study} -o tuned.yaml`" in text  # the default storage needs no --storage
    assert speedups(sqlite_uri, parent_id) == {0: 1.0, 1: 0.81}


def test_no_winner_is_said(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    sweep.log(failed(Status.CRASH), default=True)
    sweep.finish()
    text = description(sqlite_uri, parent_id)
    assert text.startswith("**No winner:** no feasible trial finished ok.")
    assert "**Trials:** 1 measured: 0 ok, 0 pruned, 1 failed (crash 1)." in text


def test_fractions_keep_six_significant_digits(sqlite_uri: str, study: str) -> None:
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    result = ok(374.1633123712463)
    result.metrics |= {"peak_mem_gib": 0.2857627868652344, "items_per_step": 123456789, "compile_s": 0.0}
    Sweep(tracker).log(result, default=True)
    metrics = trial_runs(sqlite_uri, parent_id)[0].data.metrics
    assert (metrics["throughput"], metrics["peak_mem_gib"]) == (374.163, 0.285763)
    assert (metrics["items_per_step"], metrics["compile_s"]) == (123456789.0, 0.0)  # counts stay exact


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "server"])
def test_the_experiment_is_a_model_training_experiment_with_a_leaderboard_view(
    backend: str, sqlite_uri: str, study: str, request: pytest.FixtureRequest
) -> None:
    uri = sqlite_uri if backend == "sqlite" else request.getfixturevalue("mlflow_server").uri
    tracker = SweepTracker(study, uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    sweep.log(ok(100.0), default=True)
    sweep.log(ok(150.0, precision="bf16", memory_format="channels_last"))
    sweep.finish()
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
        "tags.`autotune.outcome`",
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
    kinds: list[str] = []
    for name in names:
        experiment = client.get_experiment_by_name(f"autotune/{name}")
        assert experiment is not None
        kinds.append(experiment.tags[EXPERIMENT_KIND_TAG])
    assert kinds == [EXPERIMENT_KIND, "finetuning"]


def test_the_ui_address_of_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    link = "#/experiments/3/runs?workflowType=machine_learning"
    assert address("http://mlflow.lan:5000/", link) == f"http://mlflow.lan:5000/{link}"
    here = f"sqlite:///{tmp_path / 'mlflow.db'}"  # MLflow's default store in this folder
    assert address(here, link) == f"http://127.0.0.1:5000/{link} (with `mlflow ui` in this folder running)"
    elsewhere = "sqlite:////data/mlflow.db"
    assert address(elsewhere, link).endswith(f"(with `mlflow ui --backend-store-uri {elsewhere}` running)")


def test_the_run_of_a_trial_whose_worker_died_while_recording_it_is_deleted(sqlite_uri: str, study: str) -> None:
    """A worker killed between logging a trial's run and finishing its record leaves a run for a trial that counts
    nowhere (its kind is cleared, its state failed, a retry measures it): the next sync deletes that run (restorable,
    as MLflow deletes), so MLflow shows no trial the records do not."""
    tracker = SweepTracker(study, sqlite_uri)
    parent_id = tracker.start({})
    assert parent_id is not None
    sweep = Sweep(tracker)
    sweep.log(ok(100.0), default=True)
    running = sweep.study.ask()  # the trial being recorded when its worker died: attributes written, no kind yet
    for key, value in trial_attrs(ok(150.0, batch_size=8)).items():
        if key != schema.ATTR_KIND:
            running.set_user_attr(key, value)
    record = replace(sweep.records.trial(running.number), kind=TrialKind.MEASURED)  # as the recorder logs it
    assert tracker.log_trial(record, None) is not None
    tracker.sync(sweep.records)  # while it is still running: another worker's trial being recorded, kept
    assert sorted(trial_runs(sqlite_uri, parent_id)) == [0, 1]
    sweep.study._storage.set_trial_state_values(running._trial_id, state=optuna.trial.TrialState.FAIL)  # abandoned
    tracker.sync(sweep.records)
    assert sorted(trial_runs(sqlite_uri, parent_id)) == [0]
    deleted = MlflowClient(sqlite_uri).search_runs(
        [MlflowClient(sqlite_uri).get_run(parent_id).info.experiment_id], run_view_type=ViewType.DELETED_ONLY
    )
    assert [run.data.tags["autotune.trial"] for run in deleted] == ["1"]  # kept by MLflow, shown nowhere
