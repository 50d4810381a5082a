"""The record model over a study, as the tests read it: what every view of autotune reads."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords, TrialRecord, load_study_info

_THROUGHPUT = (("throughput", "maximize"),)


def records_of(study: optuna.Study) -> StudyRecords:
    """``study``'s records, by the objectives it was made for (throughput when it does not say)."""
    info = load_study_info(study)
    return StudyRecords(study, info.objectives if info is not None else _THROUGHPUT)


def measured_records(study: optuna.Study) -> list[TrialRecord]:
    """The study's measured trials, in trial-number order."""
    return records_of(study).measured


def measured_default(
    params: dict[str, Any],
    metrics: dict[str, Any],
    *,
    status: Status = Status.OK,
    env: dict[str, Any] | None = None,
    duration_s: float | None = None,
) -> TrialRecord:
    """The default configuration's record, measured (ok, or as ``status``) with ``metrics`` (a throughput among
    them, its objective) in ``env``; lasting ``duration_s`` from a fixed start where given, else without times."""
    result = TrialResult(status, None if status is Status.OK else "no", params, metrics, dict(env or {}))
    started = datetime(2026, 11, 27, 17, 55, 43) if duration_s is not None else None
    value = float(metrics["throughput"])
    return TrialRecord(
        number=0,
        state=TrialState.COMPLETE,
        kind=None,
        params=params,
        result=result,
        status=status.value,
        reason=None,
        default=True,
        violation=None,
        objectives=(value,),
        first_values=(value,),
        started=started,
        ended=started + timedelta(seconds=duration_s) if started is not None and duration_s is not None else None,
    )
