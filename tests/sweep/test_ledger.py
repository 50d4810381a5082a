"""The worker's incremental view of a study: what it derives must match a full read, whoever wrote the trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from autotune import studyio
from autotune.results import Status, TrialResult
from autotune.studyio import TrialKind
from autotune.sweep.ledger import TrialLedger
from autotune.sweep.storage import open_storage

OBJECTIVES = (("throughput", "maximize"),)


def _study(path: Path) -> optuna.Study:
    """A study on a real SQLite file, opened as a sweep opens it (a second open is another worker)."""
    return optuna.create_study(
        storage=open_storage(f"sqlite:///{path}"), study_name="ledger", direction="maximize", load_if_exists=True
    )


def _record(study: optuna.Study, params: dict[str, Any], throughput: float | None, **attrs: Any) -> None:
    """One finished measured trial, stored as the recorder stores it."""
    trial = study.ask()
    status = Status.OK if throughput is not None else Status.CRASH
    metrics = {"throughput": throughput, "throughput_unit": "samples/s"} if throughput is not None else {}
    result = TrialResult(status, None if throughput is not None else "boom", params, metrics)
    trial.set_user_attr(studyio.ATTR_PARAMS, params)
    trial.set_user_attr(studyio.ATTR_KIND, attrs.pop("kind", TrialKind.MEASURED.value))
    trial.set_user_attr(studyio.ATTR_RESULT, result.to_dict())
    trial.set_user_attr(studyio.ATTR_STATUS, status.value)
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    if throughput is None:
        study.tell(trial, state=TrialState.FAIL)
    else:
        trial.set_user_attr(studyio.ATTR_VIOLATION, -1.0)
        study.tell(trial, throughput)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "study.db"


def test_the_ledger_sees_another_workers_trials_at_each_refresh(db: Path) -> None:
    mine, theirs = _study(db), _study(db)
    ledger = TrialLedger(mine, OBJECTIVES)
    _record(theirs, {"bs": 8}, 100.0, **{studyio.ATTR_DEFAULT: True})
    assert ledger.tally().measured == 0  # not read yet
    ledger.refresh()
    _record(theirs, {"bs": 16}, 250.0)
    _record(mine, {"bs": 32}, None)
    ledger.refresh()

    assert [m.number for m in ledger.measured] == [0, 1, 2]
    assert ledger.tally() == studyio.tally(studyio.measured_trials(mine))  # what a full read says
    assert ledger.best_feasible() == 250.0
    assert ledger.measured_with({"bs": 16}, number=99) is not None
    assert ledger.measured_with({"bs": 64}, number=99) is None
    best, value, speedup = ledger.leader()  # type: ignore[misc]
    assert (best.number, value, speedup) == (1, 250.0, 2.5)


def test_a_configuration_another_worker_is_running_is_found(db: Path) -> None:
    mine, theirs = _study(db), _study(db)
    ledger = TrialLedger(mine, OBJECTIVES)
    running = theirs.ask()
    running.set_user_attr(studyio.ATTR_PARAMS, {"bs": 8})
    ledger.refresh()
    found = ledger.measured_with({"bs": 8}, number=running.number + 1)
    assert found is not None and found.state is TrialState.RUNNING
    assert ledger.measured_with({"bs": 8}, number=running.number) is None  # itself is no repeat


def test_patience_placeholder_and_remeasured_medians(db: Path) -> None:
    study = _study(db)
    for bs, value in ((8, 100.0), (16, 300.0), (32, 200.0), (64, 150.0)):
        _record(study, {"bs": bs}, value, **({studyio.ATTR_DEFAULT: True} if bs == 8 else {}))
    _record(study, {"bs": 128}, None)
    ledger = TrialLedger(study, OBJECTIVES)
    assert ledger.trials_since_best() == 3  # 200, 150 and the crash came after the best
    assert ledger.placeholder_values() == [100.0]  # the worst feasible value
    assert ledger.leader()[0].number == 1  # type: ignore[index]

    ledger.note_remeasured(1, {"metric": "throughput", "median": 120.0})
    ledger.note_remeasured(2, {"metric": "throughput", "median": 210.0})
    best, value, _ = ledger.leader()  # type: ignore[misc]
    assert (best.number, value) == (2, 210.0)  # re-measured medians rank, as on the leaderboard


def test_duplicates_and_rejections_do_not_count_as_measured(db: Path) -> None:
    study = _study(db)
    _record(study, {"bs": 8}, 100.0)
    _record(study, {"bs": 8}, 100.0, kind=TrialKind.DUPLICATE.value)
    _record(study, {"bs": 9}, None, kind=TrialKind.REJECTED.value)
    ledger = TrialLedger(study, OBJECTIVES)
    assert ledger.total == 3
    assert [m.number for m in ledger.measured] == [0]
    assert ledger.measured_with({"bs": 8}, number=5).number == 0  # type: ignore[union-attr]
