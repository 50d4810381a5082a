"""Finishing stage: the study's report (``autotune report``), written beside its storage and logged to MLflow.

Runs last, so the page shows the re-measured ranks and the profiled winner's sweep as it ends. A
report is a by-product: one that cannot be made is said in a line and never fails the sweep. Its
lines say where to read the sweep: the page, and the MLflow UI's leaderboard of the trials. A sweep run with
``--no-report`` writes no page (about 4-5 CPU-s, most of it importing scikit-learn for fANOVA); the MLflow line stays.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.errors import AutotuneError
from autotune.storage.studies import redact_url
from autotune.sweep.context import SweepContext

if TYPE_CHECKING:
    from autotune.views.report import StudyReport

__all__ = ["Report", "report_path"]


def report_path(study_name: str, storage: str) -> Path:
    """``<study>_report.html`` in the folder of an SQLite storage file, else in the current folder."""
    name = f"{study_name}_report.html"
    try:
        url = make_url(storage)
    except ArgumentError:  # "memory" and the like: no file to sit beside
        return Path(name).absolute()
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database).absolute().parent / name
    return Path(name).absolute()


class Report:
    """Writes the report page and its PNGs, and logs them to the sweep's MLflow parent run."""

    name = "report"

    def run(self, ctx: SweepContext) -> None:
        report = self._write(ctx) if ctx.options.report else None  # --no-report: the MLflow line still says where
        if ctx.tracker is None:
            return
        if report is not None:
            report.log(ctx.tracker)
        if (link := ctx.tracker.ui_link) is not None:  # MLflow 3.17 would open the experiment on GenAI pages
            # deferred: it imports mlflow (~1.5 s), which a sweep run with --no-mlflow never needs
            from autotune.tracking.ui import address

            ctx.progress.message(f"MLflow: {address(redact_url(ctx.tracker.tracking_uri), link)}")

    def _write(self, ctx: SweepContext) -> StudyReport | None:
        # deferred: it imports matplotlib and plotly (~0.5 s); only this last stage draws, and only once
        from autotune.views.report import write_report

        path = report_path(ctx.study.study_name, ctx.options.storage)
        try:
            report = write_report(ctx.study, ctx.info, path, ctx.options.storage, ctx.records)
        except AutotuneError as exc:  # a file it could not write (a full disk): said in its own words
            ctx.progress.message(f"report: not made: {exc}")
            return None
        except Exception as exc:  # a bug in drawing must not cost the sweep its summary and MLflow run
            ctx.progress.message(f"report: not made: {type(exc).__name__}: {exc}")
            return None
        ctx.progress.message(f"report: {report.html}")
        return report
