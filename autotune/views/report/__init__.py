"""``autotune report``: a study as one self-contained HTML page of plotly figures, and the same figures as PNGs."""

from autotune.views.report.data import ReportData, gather
from autotune.views.report.study_report import StudyReport, figures_folder, write_report

__all__ = ["ReportData", "StudyReport", "figures_folder", "gather", "write_report"]
