"""The record model over a study, as the tests read it: what every view of autotune reads."""

from __future__ import annotations

import optuna

from autotune.records import StudyRecords, TrialRecord, load_study_info

_THROUGHPUT = (("throughput", "maximize"),)


def records_of(study: optuna.Study) -> StudyRecords:
    """``study``'s records, by the objectives it was made for (throughput when it does not say)."""
    info = load_study_info(study)
    return StudyRecords(study, info.objectives if info is not None else _THROUGHPUT)


def measured_records(study: optuna.Study) -> list[TrialRecord]:
    """The study's measured trials, in trial-number order."""
    return records_of(study).measured
