"""What a report shows, gathered once from a study: per-trial facts, the winner, the default, where time went.

Everything is read from the Optuna storage (the study is the truth) through the leaderboard, so the
report ranks, re-measures and marks the Pareto front exactly as ``autotune leaderboard`` does. Knob
values are the real ones (``autotune.params``), never Optuna's ordinal indices.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune import studyio
from autotune.leaderboard import LeaderboardRow, leaderboard
from autotune.results import Status
from autotune.studyio import DEFAULT_STORAGE, StudyInfo, TrialKind, redact_url

__all__ = ["ReportData", "TimeSpent", "TrialPoint", "gather"]

INFEASIBLE = "infeasible"  # an ok trial that broke a metric constraint: a class of its own in the failure counts


@dataclass(frozen=True)
class TrialPoint:
    """One measured trial as the figures draw it."""

    number: int
    status: str  # ok, pruned, oom, crash ... or "infeasible"
    value: float | None  # the first objective (re-measured median where there is one); None unless ok
    objectives: tuple[float | None, ...]
    params: dict[str, Any]
    feasible: bool
    default: bool
    pareto: bool
    duration_s: float
    compile_s: float


@dataclass(frozen=True)
class TimeSpent:
    """Where the measured trials' time went, in disjoint parts (seconds); with one GPU per worker, GPU time."""

    ok_s: float  # measuring ok trials, compile excluded
    pruned_s: float  # trials stopped after their warm-up, compile excluded
    failed_s: float  # oom, crash, timeout ..., compile excluded
    compile_s: float  # ``compile_s`` of every measured trial
    remeasure_s: float  # re-measurement runs, each counted at its trial's own duration (not timed itself)
    remeasure_runs: int

    def parts(self) -> dict[str, float]:
        """Label -> seconds, in the order the figures stack them."""
        return {
            "measured (ok)": self.ok_s,
            "compile": self.compile_s,
            "pruned": self.pruned_s,
            "failed": self.failed_s,
            f"re-measure ({self.remeasure_runs} runs, est.)": self.remeasure_s,
        }

    @property
    def total_s(self) -> float:
        return sum(self.parts().values())


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
    time: TimeSpent
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


def _status_class(row: LeaderboardRow) -> str:
    return INFEASIBLE if row.ok and not row.feasible else row.status


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _objectives(row: LeaderboardRow, info: StudyInfo) -> tuple[float | None, ...]:
    """The first objective as ranked (re-measured median where there is one), the others from the metrics."""
    others = tuple(_number(row.metrics[m]) if m in row.metrics else None for m, _ in info.objectives[1:])
    return (row.value, *others)


def _points(study: optuna.Study, rows: list[LeaderboardRow], info: StudyInfo) -> list[TrialPoint]:
    trials = study.get_trials(deepcopy=False)  # numbered 0..n-1: a trial's number is its index
    points = []
    for row in sorted(rows, key=lambda r: r.trial):
        duration = trials[row.trial].duration
        points.append(
            TrialPoint(
                number=row.trial,
                status=_status_class(row),
                value=row.value,
                objectives=_objectives(row, info),
                params=row.params,
                feasible=row.feasible,
                default=row.default,
                pareto=row.pareto,
                duration_s=duration.total_seconds() if duration is not None else 0.0,
                compile_s=_number(row.metrics.get("compile_s")),
            )
        )
    return points


def _time_spent(study: optuna.Study, points: list[TrialPoint]) -> TimeSpent:
    parts = {"ok": 0.0, "pruned": 0.0, "failed": 0.0}
    compile_total = 0.0
    for p in points:
        compile_s = min(p.compile_s, p.duration_s) if p.duration_s > 0 else p.compile_s
        compile_total += compile_s
        key = "ok" if p.status in (Status.OK.value, INFEASIBLE) else p.status if p.status == "pruned" else "failed"
        parts[key] += max(0.0, p.duration_s - compile_s)
    remeasure_s, runs = 0.0, 0
    attrs = study.user_attrs
    trials = study.get_trials(deepcopy=False)
    durations = {p.number: p.duration_s for p in points}
    for p in points:
        again = studyio.remeasured(study, trials[p.number], attrs)
        if again:
            count = len(again.get("values") or [])
            runs += count
            remeasure_s += count * durations[p.number]
    return TimeSpent(parts["ok"], parts["pruned"], parts["failed"], compile_total, remeasure_s, runs)


def _not_run(study: optuna.Study) -> dict[str, int]:
    kinds = Counter(studyio.trial_kind(t) for t in study.get_trials(deepcopy=False, states=studyio.FINISHED_STATES))
    return {kind.value: kinds[kind] for kind in TrialKind if kind is not TrialKind.MEASURED and kinds[kind]}


def _export_command(study_name: str, storage: str) -> str:
    store = "" if storage == DEFAULT_STORAGE else f" --storage '{redact_url(storage)}'"
    return f"autotune export --study {study_name}{store} -o tuned.yaml"


def _env(study: optuna.Study, row: LeaderboardRow | None) -> dict[str, Any]:
    if row is None:
        return {}
    result = studyio.trial_result(study.get_trials(deepcopy=False)[row.trial])
    return dict(result.env) if result is not None else {}


def gather(study: optuna.Study, info: StudyInfo, storage: str = DEFAULT_STORAGE) -> ReportData:
    """Read ``study`` once into a :class:`ReportData`; ``storage`` only goes into the export command shown."""
    rows = leaderboard(study, info)
    points = _points(study, rows, info)
    default = next((r for r in rows if r.default), None)
    baseline = default.value if default is not None and default.ok else None
    winner = next((r for r in rows if r.rank == 1), None)
    unit_source = winner or next((r for r in rows if r.ok), None)
    unit = str(unit_source.metrics.get(f"{info.objectives[0][0]}_unit", "")) if unit_source else ""
    return ReportData(
        study_name=study.study_name,
        info=info,
        points=points,
        baseline=baseline,
        winner=winner,
        default=default,
        unit=unit,
        time=_time_spent(study, points),
        not_run=_not_run(study),
        export_command=_export_command(study.study_name, storage),
        status_counts=dict(Counter(p.status for p in points).most_common()),
        env=_env(study, winner or default),
    )
