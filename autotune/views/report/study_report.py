"""A study's report: gather the facts, draw the figures, write the page and the PNGs, log them to MLflow."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
import plotly.graph_objects as go

from autotune.atomicfile import write_atomically
from autotune.records import StudyInfo, StudyRecords
from autotune.storage.studies import DEFAULT_STORAGE
from autotune.views.report import figures
from autotune.views.report.data import ReportData, gather
from autotune.views.report.html import page
from autotune.views.report.importance import knob_importances, varying_knobs
from autotune.views.report.png import write_pngs

if TYPE_CHECKING:
    from autotune.tracking import SweepTracker

__all__ = ["ARTIFACT_FOLDER", "StudyReport", "figures_folder", "write_report"]

ARTIFACT_FOLDER = "report"  # on the MLflow parent run: report/report.html and report/figures/*.png


@dataclass(frozen=True)
class StudyReport:
    """A written report: the page and its PNGs."""

    html: Path
    pngs: list[Path]

    def log(self, tracker: SweepTracker) -> bool:
        """The page and the PNGs onto the study's MLflow parent run (``report/report.html``,
        ``report/figures/*.png``); False when there is no parent run or MLflow is unreachable."""
        with tempfile.TemporaryDirectory() as tmp:
            staged = Path(tmp) / ARTIFACT_FOLDER
            (staged / "figures").mkdir(parents=True)
            shutil.copy(self.html, staged / "report.html")
            for png in self.pngs:
                shutil.copy(png, staged / "figures" / png.name)
            # A folder logged under "" keeps its own name: the artifacts land in report/.
            return tracker.add_to_sweep_run({}, {}, {"": staged})


def figures_folder(html: Path) -> Path:
    """Where the PNGs of the page ``html`` go: ``<stem>_figures/`` beside it."""
    return html.with_name(f"{html.stem}_figures")


def _plotly_figures(data: ReportData, importances: dict[str, float], knobs: list[str]) -> dict[str, go.Figure | None]:
    """Section title -> figure, in page order; None leaves a section out."""
    return {
        f"{data.metric} per trial": figures.throughput_figure(data),
        "Which knobs mattered": figures.importance_figure(importances) if importances else None,
        "Each knob's effect": figures.slices_figure(data, knobs) if knobs else None,
        "Pareto front": figures.pareto_figure(data),
        "How the trials ended": figures.failures_figure(data),
        "Where the trial time went": figures.gpu_time_figure(data),
    }


def write_report(
    study: optuna.Study,
    info: StudyInfo,
    output: Path,
    storage: str = DEFAULT_STORAGE,
    records: StudyRecords | None = None,
) -> StudyReport:
    """Write ``output`` (the HTML page) and its PNGs (:func:`figures_folder`) for ``study`` (``records``: its
    records, when the caller has them).

    Each file is written whole or left as it was (:mod:`autotune.atomicfile`); a file that cannot be written (a
    full disk) raises :class:`~autotune.errors.AutotuneError` naming it.
    """
    data = gather(study, info, storage, records)
    importances = knob_importances(data)
    feasible = [p for p in data.points if p.feasible]
    knobs = varying_knobs(feasible)
    knobs.sort(key=lambda k: -importances.get(k, 0.0))  # stable: unranked knobs keep their order
    write_atomically(output, page(data, _plotly_figures(data, importances, knobs), data.env))  # whole, or as it was
    pngs = write_pngs(data, importances, knobs, figures_folder(output))
    return StudyReport(output, pngs)
