"""What a report shows, gathered once from a study's records: per-trial facts, the winner, the default, where time went.

Everything comes from the record model (:mod:`autotune.records`), so the report ranks, re-measures, marks
the Pareto front and adds up time exactly as ``autotune leaderboard``, the sweep's summary and MLflow do.
Knob values are the real ones (``autotune.params``), never Optuna's ordinal indices.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune.records import StudyInfo, StudyRecords, TimeShares, TrialRecord
from autotune.storage.studies import DEFAULT_STORAGE, redact_url
from autotune.views.leaderboard import LeaderboardRow, rows

__all__ = ["ReportData", "TrialPoint", "gather"]


@dataclass(frozen=True)
class TrialPoint:
    """One measured trial as the figures draw it."""

    number: int
    status: str  # the record's outcome: ok, infeasible, pruned, oom, crash ...
    value: float | None  # the first objective's ranked value (re-measured median where there is one); None unless ok
    objectives: tuple[float | None, ...]
    params: dict[str, Any]
    feasible: bool
    default: bool
    pareto: bool
    duration_s: float
    compile_s: float


@dataclass(frozen=True)
class ReportData:
    """The facts every figure, page and PNG of one report draws from."""

    study_name: str
    info: StudyInfo
    points: list[TrialPoint]
    baseline: float | None  # the ok PyTorch-default trial's first objective
    winner: LeaderboardRow | None
    default: LeaderboardRow | None
    unit: str
    time: TimeShares
    not_run: dict[str, int]  # rejected / duplicate / surplus proposals: no GPU time, not in the budget
    export_command: str
    status_counts: dict[str, int] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)  # the winner's env fingerprint (else the default's)

    @property
    def metric(self) -> str:
        return self.info.objectives[0][0]

    @property
    def direction(self) -> str:
        return self.info.objectives[0][1]


def _point(records: StudyRecords, record: TrialRecord) -> TrialPoint:
    return TrialPoint(
        number=record.number,
        status=record.outcome,
        value=record.value,
        objectives=record.objectives,
        params=record.ran_with,
        feasible=record.feasible,
        default=record.default,
        pareto=record.number in records.pareto,
        duration_s=record.duration_s,
        compile_s=record.compile_s,
    )


def _export_command(study_name: str, storage: str) -> str:
    store = "" if storage == DEFAULT_STORAGE else f" --storage '{redact_url(storage)}'"
    return f"autotune export --study {study_name}{store} -o tuned.yaml"


def gather(
    study: optuna.Study, info: StudyInfo, storage: str = DEFAULT_STORAGE, records: StudyRecords | None = None
) -> ReportData:
    """Read ``study`` once (or take its ``records``) into a :class:`ReportData`; ``storage`` only goes into the
    export command shown."""
    records = records if records is not None else StudyRecords.read(study, info)
    table = rows(records)
    by_number = {row.trial: row for row in table}
    winner = records.winner
    default = records.default
    unit_source = winner or next((r for r in records.measured if r.ok), None)
    unit = str(unit_source.metrics.get(f"{records.metric}_unit", "")) if unit_source is not None else ""
    env_source = winner or default
    return ReportData(
        study_name=study.study_name,
        info=info,
        points=[_point(records, record) for record in records.measured],
        baseline=records.baseline,
        winner=by_number[winner.number] if winner is not None else None,
        default=by_number[default.number] if default is not None else None,
        unit=unit,
        time=records.time(),
        not_run=records.not_run(),
        export_command=_export_command(study.study_name, storage),
        status_counts=dict(Counter(record.outcome for record in records.measured).most_common()),
        env=dict(env_source.result.env) if env_source is not None and env_source.result is not None else {},
    )
