"""A winner that holds up: the top trials are measured again in fresh processes."""

from __future__ import annotations

import io
import time
from pathlib import Path

import optuna
import pytest
from study_records import measured_records
from trial_workloads import outlier_space

from autotune.records import StudyRecords, schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.context import SweepContext
from autotune.sweep.measurers import TrialExecutor
from autotune.sweep.stages.remeasure import Remeasure
from autotune.sweep.stages.time_limit import TimeLimit
from autotune.tuned.file import load
from autotune.views.export import export
from autotune.views.leaderboard import leaderboard
from autotune.views.progress import Progress


@pytest.mark.slow
def test_remeasurement_dethrones_a_lucky_first_measurement(tmp_path: Path) -> None:
    space_file = tmp_path / "outlier.yaml"
    space_file.write_text(outlier_space(tmp_path / "lucky.marker", ("steady", "lucky")))
    storage = f"sqlite:///{tmp_path}/study.db"
    options = SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=2, remeasure_repeats=2)
    log = tmp_path / "progress.log"
    with log.open("w") as stream:
        summary = run_sweep(load_space(space_file), options, Progress(None, None, stream))

    study = optuna.load_study(study_name="outlier", storage=storage)
    info = schema.load_study_info(study)
    assert info is not None
    first = {t.params["config"]: t.result for t in measured_records(study)}
    assert set(first) == {"steady", "lucky"}
    lucky_first, steady_first = (first[c].metrics["throughput"] for c in ("lucky", "steady"))  # type: ignore[union-attr]
    assert lucky_first > 2 * steady_first  # measured once, the lucky configuration looks best ...

    rows = leaderboard(study, info)
    winner = next(r for r in rows if r.rank == 1)
    assert winner.params["config"] == "steady"  # ... re-measured, it is not
    lucky = next(r for r in rows if r.params["config"] == "lucky")
    assert lucky.remeasured is not None and len(lucky.remeasured["values"]) == 2
    assert lucky.remeasured["median"] < winner.value < lucky.remeasured["first"]
    assert summary.best_trial == winner.trial
    assert "re-measuring trial" in log.read_text()

    tuned = export(study, info, tmp_path / "tuned.yaml")
    assert tuned.params == {"config": "steady"}
    assert load(tmp_path / "tuned.yaml").provenance["trial"] == winner.trial


def _sweep_outlier(
    tmp_path: Path, top: int, timeout_s: float | None = None, configs: tuple[str, ...] = ("steady", "lucky")
) -> tuple[optuna.Study, str]:
    space_file = tmp_path / "outlier.yaml"
    space_file.write_text(outlier_space(tmp_path / "lucky.marker", configs))
    storage = f"sqlite:///{tmp_path}/study.db"
    options = SweepOptions(
        report=False, storage=storage, tracking=False, remeasure_top=top, remeasure_repeats=2, timeout_s=timeout_s
    )
    log = tmp_path / "progress.log"
    with log.open("w") as stream:
        run_sweep(load_space(space_file), options, Progress(None, None, stream))
    return optuna.load_study(study_name="outlier", storage=storage), log.read_text()


@pytest.mark.slow
def test_a_leader_measured_once_is_remeasured_too(tmp_path: Path) -> None:
    # Top 1: the lucky trial is re-measured and falls below the steady one, which then leads on one measurement.
    study, log = _sweep_outlier(tmp_path, top=1)
    info = schema.load_study_info(study)
    assert info is not None
    rows = leaderboard(study, info)
    winner = next(r for r in rows if r.rank == 1)
    assert winner.params["config"] == "steady"
    assert winner.remeasured is not None and len(winner.remeasured["values"]) == 2
    assert f"trial {winner.trial} leads on one measurement now" in log
    assert log.count("re-measuring trial") == 2
    export(study, info, tmp_path / "tuned.yaml")
    assert load(tmp_path / "tuned.yaml").provenance["trial"] == winner.trial


def test_a_leader_is_not_remeasured_past_the_time_limit(tmp_path: Path) -> None:
    study, _ = _sweep_outlier(tmp_path, top=0)  # searched, nothing re-measured
    info = schema.load_study_info(study)
    assert info is not None
    space = load_space(tmp_path / "outlier.yaml")
    options = SweepOptions(storage=f"sqlite:///{tmp_path}/study.db", tracking=False)
    said = io.StringIO()
    records = StudyRecords.read(study, info)
    ctx = SweepContext(
        space, options, study, study._storage, info, records, TrialExecutor(space, options), Progress(None, None, said),
        None,
    )  # fmt: skip
    limit = TimeLimit(time.time() - 1, 60.0, space, options)
    Remeasure(top=1, repeats=2, limit=limit).run(ctx)  # the top 1 is re-measured whatever the limit

    winner = next(r for r in leaderboard(study, info) if r.rank == 1)
    assert winner.params["config"] == "steady" and winner.remeasured is None
    assert f"trial {winner.trial} leads on one measurement: re-measuring it needs about" in said.getvalue()
    assert said.getvalue().count("re-measuring trial") == 1


@pytest.mark.slow
def test_a_leader_left_on_one_measurement_after_top_more_is_said(tmp_path: Path) -> None:
    # Top 1: both lucky trials lead in turn and fall; the steady one then leads, measured once, and no more are.
    study, log = _sweep_outlier(tmp_path, top=1, configs=("steady", "lucky", "lucky2"))
    info = schema.load_study_info(study)
    assert info is not None
    winner = StudyRecords.read(study, info).ranked[0]
    assert winner.params["config"] == "steady" and winner.measured_once
    assert log.count("re-measuring trial") == 2
    assert (
        f"trial {winner.number} leads on one measurement: the leader re-measured after the top 1 fell below it" in log
    )


@pytest.mark.parametrize("top", [1, 2])
def test_a_leader_whose_remeasurement_failed_is_not_run_again(tmp_path: Path, top: int) -> None:
    # The fragile configuration fails in every process after its first. Top 1: it leads once the lucky one falls,
    # is re-measured, and fails; top 2: it was re-measured with the top and failed. Either way once, and said.
    study, log = _sweep_outlier(tmp_path, top=top, configs=("fragile", "lucky"))
    info = schema.load_study_info(study)
    assert info is not None
    winner = StudyRecords.read(study, info).ranked[0]
    assert winner.params["config"] == "fragile" and winner.measured_once
    assert winner.remeasured is not None and winner.value_is == "one measurement"
    assert log.count(f"re-measuring trial {winner.number} ") == 1
    assert f"trial {winner.number} leads on one measurement: every run of its re-measurement failed" in log


def test_the_run_after_the_finalists_does_not_say_a_leader_line_again(tmp_path: Path) -> None:
    """With ``finalists:`` the stage runs twice: a leader whose re-measurement failed in every run is said once, not
    again by the second run (the same leader, the same reason)."""
    study, _ = _sweep_outlier(tmp_path, top=1, configs=("fragile", "lucky"))
    info = schema.load_study_info(study)
    assert info is not None
    space = load_space(tmp_path / "outlier.yaml")
    options = SweepOptions(storage=f"sqlite:///{tmp_path}/study.db", tracking=False)
    said = io.StringIO()
    ctx = SweepContext(
        space, options, study, study._storage, info, StudyRecords.read(study, info), TrialExecutor(space, options),
        Progress(None, None, said), None,
    )  # fmt: skip
    first = Remeasure(top=1, repeats=2, finalists_after=True)
    first.run(ctx)
    first.again().run(ctx)
    winner = ctx.records.ranked[0]
    line = f"trial {winner.number} leads on one measurement: every run of its re-measurement failed"
    assert said.getvalue().count(line) == 1, said.getvalue()
    assert "re-measuring trial" not in said.getvalue()  # re-measured once already, by the sweep: never run again
