"""The leaderboard's rows: each measured trial's record as the leaderboard shows it.

Only measured trials appear (rejected and duplicate trials cost no GPU time and repeat nothing new).
Rows come in three groups, as :class:`~autotune.records.StudyRecords` ranks them:

1. feasible ok trials, ranked by the first objective (a trial re-measured in fresh processes ranks
   by the median of those runs, and its other metrics are those runs' medians);
2. ok trials that broke a metric constraint, unranked;
3. pruned and failed trials (oom, crash, timeout ...), unranked, oldest first.

Nothing here decides what is feasible, what ranks first or by which number: the rows only render it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from autotune.records import StudyInfo, StudyRecords, TrialRecord

__all__ = ["LeaderboardRow", "leaderboard", "rows"]


@dataclass(frozen=True)
class LeaderboardRow:
    """One measured trial as the leaderboard shows it: its record, rendered.

    ``value`` is the first objective's ranked value (the re-measured median when there is one, as
    ``value_is`` says), ``metrics`` the trial's metrics as ranked; ``rank`` is None for trials that do not
    rank; ``outcome`` is ok, infeasible, pruned, oom, crash ...; ``tflops`` and ``mfu`` how far its step was
    from the GPU's limit (None where not counted).
    """

    rank: int | None
    trial: int
    params: dict[str, Any]
    status: str
    reason: str | None
    metrics: dict[str, Any]
    value: float | None
    speedup: float | None
    remeasured: dict[str, Any] | None
    pareto: bool
    default: bool
    feasible: bool
    input_bound: bool = False
    outcome: str = ""
    value_is: str = ""
    tflops: float | None = None  # achieved TFLOP/s, as ranked
    mfu: float | None = None  # a fraction of the GPU's dense peak

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _row(records: StudyRecords, record: TrialRecord) -> LeaderboardRow:
    assert record.result is not None  # measured trials have a result
    return LeaderboardRow(
        rank=records.rank(record.number),
        trial=record.number,
        params=record.ran_with,
        status=record.result.status.value,
        reason=record.reason,
        metrics=record.metrics,
        value=record.value,
        speedup=records.speedup(record),
        remeasured=record.remeasured.to_dict() if record.remeasured is not None else None,
        pareto=record.number in records.pareto,
        default=record.default,
        feasible=record.feasible,
        input_bound=record.input_bound,
        outcome=record.outcome,
        value_is=record.value_is if record.ok else "",
        tflops=record.tflops,
        mfu=record.mfu,
    )


def rows(records: StudyRecords) -> list[LeaderboardRow]:
    """Every measured trial as a row: ranked ones first, then ok trials that broke a constraint, then the rest."""
    ranked = records.ranked
    shown = {r.number for r in ranked}
    infeasible = [r for r in records.measured if r.number not in shown and r.ok]
    rest = [r for r in records.measured if r.number not in shown and not r.ok]
    return [_row(records, record) for record in [*ranked, *infeasible, *rest]]


def leaderboard(study: optuna.Study, info: StudyInfo) -> list[LeaderboardRow]:
    """The study's measured trials as rows, read from the storage (see :func:`rows`)."""
    return rows(StudyRecords.read(study, info))
