"""The finishing stage that writes a sweep's report beside its storage and logs it to the parent run."""

from __future__ import annotations

import io
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from report_studies import make_info, synthetic_study

from autotune.sweep.context import SweepContext
from autotune.sweep.options import SweepOptions
from autotune.sweep.stages.report import Report, report_path
from autotune.tracking import SweepTracker
from autotune.views.progress import Progress

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_report_path_sits_beside_an_sqlite_file_else_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert report_path("q", f"sqlite:///{tmp_path}/db/a.db") == tmp_path / "db" / "q_report.html"
    assert report_path("q", "sqlite:///autotune.db") == tmp_path / "q_report.html"
    assert report_path("q", "memory") == tmp_path / "q_report.html"
    assert report_path("q", "postgresql://u:secret@host/db") == tmp_path / "q_report.html"


def context(
    study: optuna.Study, storage: str, tracker: SweepTracker | None, stream: io.StringIO, report: bool = True
) -> SweepContext:
    """What the stage reads of a sweep: the study, its info, the storage URL and whether to report, the progress,
    the tracker."""
    options = SweepOptions(storage=storage, report=report)
    info = make_info()
    progress = Progress(None, None, stream=stream)
    return SweepContext(None, options, study, study._storage, info, None, None, progress, tracker)  # type: ignore[arg-type]


def tracked_study(tmp_path: Path, trials: int) -> tuple[optuna.Study, str, SweepTracker, str]:
    """A synthetic study of ``trials`` in ``tmp_path``, its storage URL, and a tracker with its sweep run started."""
    study = synthetic_study(tmp_path / "autotune.db", trials)
    tracker = SweepTracker("rn50", f"sqlite:///{tmp_path}/mlflow.db")
    run_id = tracker.start({})
    assert run_id is not None
    return study, f"sqlite:///{tmp_path}/autotune.db", tracker, run_id


def test_the_stage_writes_and_logs_the_report(tmp_path: Path) -> None:
    study, storage, tracker, run_id = tracked_study(tmp_path, 20)
    stream = io.StringIO()
    Report().run(context(study, storage, tracker, stream))
    assert (tmp_path / "rn50_report.html").is_file()
    assert f"report: {tmp_path / 'rn50_report.html'}" in stream.getvalue()
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert "report/report.html" in {a.path for a in client.list_artifacts(run_id, "report")}


def test_no_report_writes_no_page_and_still_says_where_mlflow_shows_the_sweep(tmp_path: Path) -> None:
    study, storage, tracker, run_id = tracked_study(tmp_path, 5)
    stream = io.StringIO()
    Report().run(context(study, storage, tracker, stream, report=False))
    assert not (tmp_path / "rn50_report.html").exists() and "report: " not in stream.getvalue()
    assert "MLflow: " in stream.getvalue()
    assert MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").list_artifacts(run_id, "report") == []


def test_a_report_that_cannot_be_written_is_a_line_not_a_failed_sweep(tmp_path: Path) -> None:
    study = synthetic_study(tmp_path / "autotune.db", 5)
    (tmp_path / "rn50_report.html").mkdir()  # a folder where the page should go
    stream = io.StringIO()
    Report().run(context(study, f"sqlite:///{tmp_path}/autotune.db", None, stream))
    assert f"report: not made: cannot write {tmp_path}/rn50_report.html: Is a directory" in stream.getvalue()
