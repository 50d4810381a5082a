"""One sweep worker: the proposal loop, then the finishing stages, then the summary.

Per turn (:mod:`autotune.sweep.trial_turn`): the proposer asks and decides how it is answered -> the executor measures
what must run (meanwhile the CPU compiles the search's next graphs: :mod:`autotune.sweep.proposals.compile_ahead`; a
trial whose graph is still compiling steps aside for others: :mod:`autotune.sweep.proposals.parked_trials`) -> the
recorder writes the outcome to the study and MLflow -> the progress line. The loop stops
at the budget (every worker's measured trials count), the time limit, ``--patience``, an exhausted
space, or (``--gpus`` workers) a device that fails its check. While trials other workers are running
take the rest of the budget, it waits for them instead: one whose worker died is failed and retried
(:mod:`autotune.sweep.workers.orphaned_trials`, at every stop check), and measured here. SIGINT and SIGTERM end it
cleanly: the trial they stop is recorded as interrupted and runs again on resume.

The finishing stages run once per study, however many processes share it, under a lease in the
study's storage (:mod:`autotune.sweep.stages.once_per_study`); every worker then prints its summary from the study.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna

from autotune.interrupts import Interrupted, StopSignals
from autotune.records import StudyRecords
from autotune.search.costmodel import Seconds
from autotune.search.eagerrun import floored
from autotune.search.samplerview import OrdinalView
from autotune.space import Space
from autotune.storage.rdb import close_storage, worker_id
from autotune.storage.studies import redact_url
from autotune.sweep.context import Stage, SweepContext
from autotune.sweep.faults.ended_on_error import sweep_ended
from autotune.sweep.faults.full_disk import GuardedRecorder
from autotune.sweep.options import Executor, Role, SweepOptions, SweepSummary
from autotune.sweep.proposals.batch_step import BatchStep
from autotune.sweep.proposals.compile_ahead import compile_ahead_for
from autotune.sweep.proposals.informed_start import InformedStart
from autotune.sweep.proposals.parked_trials import Predict
from autotune.sweep.proposals.proposer import Proposer
from autotune.sweep.recorder import Recorder
from autotune.sweep.setup import enqueue_first_trials, open_study, record_budget, study_info, trial_budget
from autotune.sweep.stages.lineup import finishing_stages
from autotune.sweep.stages.once_per_study import Finishing, pause
from autotune.sweep.stages.summary import summarize
from autotune.sweep.stages.time_limit import TimeLimit
from autotune.sweep.trial_turn import TrialTurns
from autotune.sweep.workers.device_gate import DeviceGate
from autotune.sweep.workers.leases import open_leases
from autotune.sweep.workers.orphaned_trials import OrphanWatch
from autotune.views.progress import Progress

__all__ = ["MAX_SKIPS_IN_A_ROW", "Sweep"]

# Proposals in a row that need no run (duplicates, rejected): the space is taken as exhausted. A space that can be
# listed ends sooner, when every configuration is measured (Proposer.exhausted); this is for the others.
MAX_SKIPS_IN_A_ROW = 100


class Sweep:
    """One worker of a study: proposes, measures, records, until the budget or the time is spent."""

    def __init__(
        self,
        space: Space,
        options: SweepOptions,
        executor: Executor,
        progress: Progress,
        sampler: optuna.samplers.BaseSampler | None = None,
        *,
        worker: str | None = None,
        device_check: Callable[[], str | None] | None = None,
        role: Role = "all",
    ) -> None:
        """``device_check`` (``--gpus`` workers) says whether the device is fit for the next trial: None, or why not.

        ``role``: ``all`` searches and then runs the finishing stages; a ``--gpus`` sweep gives its workers
        ``search`` and, once they have all ended, one worker ``finish``, so the top configurations are
        re-measured once and one report is drawn, from every worker's trials. Either way the stages go
        through the study's finish lease, which other sweeps on the study share.
        """
        info = study_info(space, options)
        study, storage, space = open_study(space, options, info, sampler, progress)  # space: as the study encodes it
        tracker = None
        if options.tracking:
            # deferred: it imports mlflow (~1.5 s), which a sweep run with --no-mlflow never needs
            from autotune.tracking import SweepTracker

            tracker = SweepTracker(study.study_name, options.tracking_uri, objective=info.objectives[0][0])
        records = StudyRecords.read(study, info)
        self.ctx = SweepContext(space, options, study, storage, info, records, executor, progress, tracker)
        self.budget, self.deadline = trial_budget(space, options)
        self.time_limit = TimeLimit.of(self.deadline, space, options)
        self.proposer = Proposer(study, space, records, worker or worker_id(), self.budget)
        # A full disk neither loses the trial it measured nor leaves it RUNNING (autotune/sweep/faults/full_disk.py).
        self.recorder = GuardedRecorder(Recorder(study, space, info.objectives, records, tracker), self.ctx)
        self.signals = StopSignals()
        self.device = DeviceGate(device_check, self.signals, progress)
        self.role = role
        # What other processes on the study need of this one: its dead workers' trials retried, its finishing
        # stages run once for all of them (autotune.sweep.workers.orphaned_trials,
        # autotune.sweep.stages.once_per_study).
        leases = open_leases(storage, study)
        self.orphans = OrphanWatch(study, storage, leases, progress, self.proposer.worker)
        self.finishing = Finishing(self.ctx, leases, self.orphans, self.signals, self.proposer.worker)
        # Queued once the default is measured (autotune/sweep/proposals/informed_start.py).
        self.informed = InformedStart(self.ctx, leases, self.proposer.worker, self.signals)
        # Queued once the informed start and its twin are measured (autotune/sweep/proposals/batch_step.py).
        self.batch_step = BatchStep(self.ctx, leases, self.proposer.worker, self.informed.device, self.informed.enabled)
        ahead = compile_ahead_for(self.ctx, executor, role)  # None: this worker compiles nothing ahead
        self.turns = TrialTurns(
            self.ctx, self.proposer, self.recorder, self.signals, self.device, self.informed, ahead, _predict(self.ctx)
        )
        self._waiting = False  # for other workers' trials that take the rest of the budget (said once per wait)

    def run(self) -> SweepSummary:
        """Run (or resume) this worker's share of the sweep; the summary covers every worker's trials.

        SIGINT and SIGTERM raise :class:`~autotune.interrupts.Interrupted` (see :meth:`one_trial` for the
        trial they stop); the caller says how to resume.
        """
        ctx, started, ahead = self.ctx, time.time(), self.turns.ahead
        resumed_with = ctx.records.tally().measured  # a resumed study's earlier trials: not this run's wall time
        try:
            with self.signals:
                if self.role == "finish":
                    reason = self._join()
                else:
                    with self.finishing.searching():  # every process's finishing stages wait for this search
                        try:
                            reason = self._search()
                        finally:
                            if ahead is not None:
                                ahead.stop()  # the finishing stages run alone
                if self.device.failure is None and self.role != "search":  # a failed device runs nothing more
                    self.finishing.run(self._stages(), searched=ctx.records.budgeted)
            ctx.progress.close()
            return summarize(ctx, reason, time.time() - started, resumed_with)
        except BaseException as exc:
            ctx.progress.close()  # the status line gives way to what ends the command
            sweep_ended(ctx, exc)  # the MLflow run ended, not left RUNNING; a storage fault raised as its one line
            raise
        finally:
            self.recorder.close()
            close_storage(ctx.storage)

    def _search(self) -> str:
        """Set up, then propose, measure and record until a stop reason, which it returns.

        A stop signal lands between storage writes, never inside one: each step is a deferred block,
        and only the waits (a trial process, a device check) are interruptible.
        """
        ctx = self.ctx
        if ctx.tracker is not None:
            ctx.tracker.start(self._run_params(), ctx.space.path)
        with self.signals.deferred():
            self.recorder.start()  # the disk reserve; measurements a full disk kept, recorded before orphans retry
            self._retry_orphans()  # a killed sweep's, when resuming
            self.budget = self.proposer.budget = enqueue_first_trials(ctx.study, ctx.space, self.budget)
            record_budget(ctx.study, ctx.space, ctx.options, self.budget)
            ctx.records.refresh()
        ctx.progress.budget, ctx.progress.deadline = self.budget, self.deadline
        ctx.progress.done = ctx.records.tally().budgeted
        skips = 0
        try:
            while True:
                with self.signals.deferred():
                    self._retry_orphans()
                    if reason := self._stop_reason(skips):
                        self.turns.end_parked(measure=self.device.failure is None)
                        return reason
                    if self.turns.take_parked(urgent=skips > 0 or self._budget_held_by_others()):
                        # a trial parked while its graph compiled ahead (autotune.sweep.proposals.parked_trials)
                        continue
                    if self._budget_held_by_others():
                        self._wait_for_others()
                        continue
                    self._waiting = False
                    self.informed.queue()
                    self.batch_step.queue()
                    skips = 0 if self.one_trial() else skips + 1
        except Interrupted as stop:
            self.turns.release_parked(stop.signame)
            raise
        except BaseException:
            self.turns.release_parked("an error of the sweep")
            raise

    def _join(self) -> str:
        """A finishing worker's start: the search is the other workers' and has ended; take in what they found."""
        if self.ctx.tracker is not None:
            self.ctx.tracker.start(self._run_params(), self.ctx.space.path)
        self.ctx.records.refresh()
        self.ctx.progress.done = self.ctx.records.tally().budgeted
        return "the search workers have ended"

    def _stages(self) -> list[Stage]:
        return finishing_stages(self.ctx, self.time_limit, self.deadline)

    def one_trial(self) -> bool:
        """One turn: propose, then measure (or park while its graph compiles ahead), record
        (:class:`~autotune.sweep.trial_turn.TrialTurns`). True when the trial counts in the budget."""
        return self.turns.take()

    @property
    def device_failure(self) -> str | None:
        """Why this worker's device was taken out (None: it was not)."""
        return self.device.failure

    def _stop_reason(self, skips: int) -> str:
        records, patience = self.ctx.records, self.ctx.options.patience
        if exhausted := self.proposer.exhausted():  # before the budget: a finite space caps it (setup.py)
            return exhausted
        if self.budget is not None and records.budgeted >= self.budget:
            return f"budget of {self.budget} measured trials reached"
        if over := self.time_limit.search_over(records):  # the limit, less what the finishing stages will take
            return over
        if patience and records.trials_since_best() >= patience:
            return f"no improvement of the ranked {records.metric} in the last {patience} measured trials"
        if skips >= MAX_SKIPS_IN_A_ROW:
            return f"search space exhausted ({skips} proposals in a row were already measured or infeasible)"
        if failure := self.device.unfit():
            return f"taken out: {failure}"
        return ""

    # -- other workers: their dead workers' trials, their running trials (autotune.sweep.workers.orphaned_trials)
    # ---------------------
    def _retry_orphans(self) -> None:
        """Fail and queue again the trials of workers that died (this host's at once, by pid; others' by heartbeat)."""
        if self.orphans.check(self.ctx.records.running):
            self.ctx.records.refresh()

    def _budget_held_by_others(self) -> bool:
        """Whether trials other workers run now take the rest of the budget: they count once measured."""
        records = self.ctx.records
        return self.budget is not None and records.budgeted + len(records.running) >= self.budget

    def _wait_for_others(self) -> None:
        """Wait rather than end the search: a trial of theirs that fails (its worker died) is retried here."""
        if not self._waiting:
            running = [str(trial.number) for trial in self.ctx.records.running]
            said = f"trial {running[0]}: it takes" if len(running) == 1 else f"trials {', '.join(running)}: they take"
            self.ctx.progress.message(f"waiting for other workers' {said} the rest of the budget")
            self._waiting = True
        pause(self.signals)
        self.ctx.records.refresh()

    def _run_params(self) -> dict[str, str]:
        ctx = self.ctx
        return {
            "space_file": str(ctx.space.path),
            "workload": ctx.info.workload,
            "preset": ctx.info.preset,
            "device": ctx.info.device,
            "sampler": ctx.space.sampler.name,
            "objectives": ",".join(f"{m}:{d}" for m, d in ctx.info.objectives),
            "storage": redact_url(ctx.options.storage),
        }


def _predict(ctx: SweepContext) -> Predict:
    """The sampler's predicted seconds of trials, where it predicts them (a cost-aware sampler), each at least the
    run an eager full-precision trial needs at its batch (:func:`autotune.search.eagerrun.eager_run_s`, from the
    default's steps): parking reads them."""
    sampler, study = ctx.study.sampler, ctx.study
    if not isinstance(sampler, OrdinalView):
        return lambda configurations: None

    def predict(configurations: Sequence[Mapping[str, Any]]) -> Seconds | None:
        seconds = sampler.seconds(study, configurations)
        return floored(seconds, ctx.records.default, configurations) if seconds is not None else None

    return predict
