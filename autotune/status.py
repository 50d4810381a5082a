"""``autotune status --study NAME``: a running sweep seen from another terminal, read from its storage.

Everything comes from the Optuna storage (the study is the truth, wherever its workers run): the
measured trials and how they ended, the trials running now with their worker and for how long, the
best so far, and an estimate of the time left from the budget and the measured trials' pace.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune import studyio
from autotune.errors import AutotuneError
from autotune.progress import format_duration
from autotune.report import format_params
from autotune.studyio import StudyInfo

__all__ = ["SweepStatus", "sweep_status"]

GPU_ATTR = "autotune.gpu"  # the GPU a worker pinned its trial to, where the sweep records one


@dataclass(frozen=True)
class Running:
    """A trial running now."""

    trial: int
    params: dict[str, Any]
    worker: str
    gpu: str | None
    seconds: float
    worker_gone: bool


@dataclass(frozen=True)
class SweepStatus:
    """What ``autotune status`` prints."""

    study: str
    workload: str
    tally: studyio.Tally
    budget: int | None
    running: list[Running]
    best: str | None
    eta_s: float | None
    warm_start: dict[str, Any] | None = None  # the study's autotune.warm_start: where the sampler started from

    def lines(self) -> list[str]:
        budget = f" of {self.budget}" if self.budget else ""
        t = self.tally
        out = [
            f"study {self.study} ({self.workload}): {t.measured}{budget} measured "
            f"({t.ok} ok, {t.pruned} pruned, {t.failed} failed), {len(self.running)} running",
            f"best so far: {self.best}" if self.best else "best so far: none yet",
        ]
        if self.warm_start:
            w = self.warm_start
            out.append(f"warm start: the sampler started from {w['trials']} trials of study {w['study']!r} (evidence)")
        for run in self.running:
            where = f"GPU {run.gpu}, " if run.gpu is not None else ""
            gone = " (its worker is gone: retried when a sweep resumes)" if run.worker_gone else ""
            out.append(
                f"running: trial {run.trial} on {where}{run.worker} for {format_duration(run.seconds)}{gone}: "
                f"{format_params(run.params)}"
            )
        if self.eta_s is not None:
            out.append(f"eta: about {format_duration(self.eta_s)} at the measured trials' pace")
        elif self.budget and t.measured >= self.budget and not self.running:
            out.append("done: the budget is measured")
        return out


def _running(study: optuna.Study, now: datetime) -> list[Running]:
    from autotune.sweep.storage import is_dead_local_worker

    out = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = str(trial.user_attrs.get(studyio.ATTR_WORKER, "?"))
        started = trial.datetime_start or now
        out.append(
            Running(
                trial.number,
                studyio.trial_params(trial),
                worker,
                trial.user_attrs.get(GPU_ATTR),
                (now - started).total_seconds(),
                is_dead_local_worker(worker),
            )
        )
    return out


def _best(study: optuna.Study, info: StudyInfo) -> str | None:
    from autotune.leaderboard import leaderboard

    row = next((r for r in leaderboard(study, info) if r.rank == 1), None)
    if row is None or row.value is None:
        return None
    unit = row.metrics.get(f"{info.objectives[0][0]}_unit", "")
    speedup = f", {row.speedup:.2f}x the PyTorch defaults" if row.speedup else ""
    return f"trial {row.trial}, {info.objectives[0][0]} {row.value:,.4g} {unit}{speedup}".replace(" ,", ",")


def _eta(measured: list[FrozenTrial], budget: int | None, running: list[Running]) -> float | None:
    """Trials left times the median trial's wall time, shared among the workers running now."""
    durations = [
        (t.datetime_complete - t.datetime_start).total_seconds()
        for t in measured
        if t.datetime_complete is not None and t.datetime_start is not None
    ]
    if budget is None or not durations:
        return None
    left = budget - len(measured)
    if left <= 0:
        return None
    workers = max(1, len({run.worker for run in running if not run.worker_gone}))
    return left * statistics.median(durations) / workers


def sweep_status(study: optuna.Study, info: StudyInfo, now: datetime | None = None) -> SweepStatus:
    """The study's state now (``now`` for tests)."""
    now = now or datetime.now()
    measured = studyio.measured_trials(study)
    running = _running(study, now)
    try:
        budget = info.space().budget.trials
    except AutotuneError:  # a space that no longer loads here: status still shows what the storage holds
        budget = None
    return SweepStatus(
        study.study_name,
        info.workload,
        studyio.tally(measured),
        budget,
        running,
        _best(study, info),
        _eta(measured, budget, running),
        study.user_attrs.get(studyio.STUDY_ATTR_WARM_START),
    )
