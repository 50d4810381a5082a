"""``autotune status --study NAME``: a running sweep seen from another terminal, read from its storage.

Everything comes from the Optuna storage through the record model (the study is the truth, wherever
its workers run): the measured trials and how they ended, the trials running now with their worker and
for how long, the winner so far as every other view names it, where the trial time went, and an
estimate of the time left from the budget and the measured trials' pace.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import optuna

from autotune.errors import AutotuneError
from autotune.numbers import duration
from autotune.records import StudyInfo, StudyRecords, SweepState, Tally
from autotune.records.answers import kernel_never_run_warning
from autotune.storage.rdb import is_dead_local_worker
from autotune.views.progress import winner_text
from autotune.views.text import format_params

__all__ = ["SweepStatus", "sweep_status"]


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
    tally: Tally
    budget: int | None
    running: list[Running]
    best: str | None
    eta_s: float | None
    warm_start: dict[str, Any] | None = None  # the study's autotune.warm_start: where the sampler started from
    time_line: str | None = None  # where the trial time went, as the summary says it
    finished_over: int | None = None  # measured trials when a sweep's finishing stages last completed
    kernels_never_run: tuple[str, ...] = ()  # listed kernels no finished trial launched
    timeout_s: float | None = None  # the sweep's time limit, as its command set it

    def lines(self) -> list[str]:
        budget = f" of {self.budget}" if self.budget else ""
        limit = f", time limit {duration(self.timeout_s)}" if self.timeout_s else ""
        t = self.tally
        infeasible = f" ({t.infeasible} broke a constraint)" if t.infeasible else ""
        finalists = f" and {t.finalists} finalists" if t.finalists else ""
        out = [
            f"study {self.study} ({self.workload}): {t.budgeted}{budget} measured{finalists} "
            f"({t.ok} ok{infeasible}, {t.pruned} pruned, {t.failed} failed), {len(self.running)} running{limit}",
            f"best so far: {self.best}" if self.best else "best so far: none yet",
        ]
        if self.time_line:
            out.append(self.time_line)
        out.extend(kernel_never_run_warning(path) for path in self.kernels_never_run)
        if self.warm_start:
            w = self.warm_start
            out.append(f"warm start: the sampler started from {w['trials']} trials of study {w['study']!r} (evidence)")
        for run in self.running:
            where = f"GPU {run.gpu}, " if run.gpu is not None else ""
            gone = " (its worker is gone: retried when a sweep resumes)" if run.worker_gone else ""
            out.append(
                f"running: trial {run.trial} on {where}{run.worker} for {duration(run.seconds)}{gone}: "
                f"{format_params(run.params)}"
            )
        out.extend(self._progress_lines())
        return out

    def _progress_lines(self) -> list[str]:
        """Time left while trials run; once none runs, whether the sweep finished, and how it can go on."""
        measured, pace = self.tally.budgeted, self.eta_s
        if self.running:
            return [f"eta: about {duration(pace)} at the measured trials' pace"] if pace is not None else []
        finished = self.finished_over is not None and self.finished_over >= measured
        if self.budget and measured >= self.budget:
            return (
                [f"finished: its budget of {self.budget} trials is measured"]
                if finished
                else [
                    "done: the budget is measured; its finishing stages did not complete (the same `autotune sweep` "
                    "command runs them)"
                ]
            )
        left = f" with {self.budget - measured} of its {self.budget} trials left" if self.budget else ""
        resume = "the same `autotune sweep` command resumes it"
        if finished:
            return [f"finished{left}; {resume}" if left else "finished"]
        after = f" (about {duration(pace)} at the measured trials' pace)" if pace is not None else ""
        return [f"stopped: no trial is running and the sweep did not finish{left}{after}; {resume}"]


def _running(records: StudyRecords, now: datetime) -> list[Running]:
    return [
        Running(
            record.number,
            record.params,
            record.worker or "?",
            record.gpu,
            (now - (record.started or now)).total_seconds(),
            is_dead_local_worker(record.worker),
        )
        for record in records.running
    ]


def _best(records: StudyRecords) -> str | None:
    """The winner as the progress line names it (the same text, the same figures)."""
    return winner_text(records) if records.winner is not None else None


def _eta(records: StudyRecords, budget: int | None, running: list[Running]) -> float | None:
    """Trials left times the median trial's wall time, shared among the workers running now (one when none runs)."""
    durations = [r.duration_s for r in records.measured if r.ended is not None and r.started is not None]
    if budget is None or not durations:
        return None
    left = budget - records.budgeted
    if left <= 0:
        return None
    workers = max(1, len({run.worker for run in running if not run.worker_gone}))
    return left * statistics.median(durations) / workers


def sweep_status(study: optuna.Study, info: StudyInfo, now: datetime | None = None) -> SweepStatus:
    """The study's state now (``now`` for tests)."""
    now = now or datetime.now()
    records = StudyRecords.read(study, info)
    state = SweepState.read(study)
    running = _running(records, now)
    budget = state.budget if state.budget is not None else _space_budget(info)
    return SweepStatus(
        study.study_name,
        info.workload,
        records.tally(),
        budget,
        running,
        _best(records),
        _eta(records, budget, running),
        state.warm_start,
        records.time().line(),
        state.finished_over,
        tuple(records.kernels_never_run()),
        state.timeout_s,
    )


def _space_budget(info: StudyInfo) -> int | None:
    """The space's own budget, for a study whose sweep recorded none (one made before the budget was recorded)."""
    try:
        return info.space().budget.trials
    except AutotuneError:  # a space that no longer loads here: status still shows what the storage holds
        return None
