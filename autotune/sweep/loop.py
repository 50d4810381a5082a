"""One sweep worker: the proposal loop, then the finishing stages, then the summary.

Per proposal: the proposer asks and decides how it is answered -> the executor measures what must
run -> the recorder writes the outcome to the study and MLflow -> the progress line. The loop stops
at the budget (every worker's measured trials, and those running now, count), the time limit,
``--patience`` or an exhausted space.
"""

from __future__ import annotations

import time

import optuna
from optuna.trial import TrialState

from autotune.progress import Progress
from autotune.results import TrialResult
from autotune.space import Space
from autotune.studyio import TrialKind, redact_url
from autotune.sweep.context import Stage, SweepContext
from autotune.sweep.executors import replay_executor, trial_executor
from autotune.sweep.ledger import TrialLedger
from autotune.sweep.options import Executor, SweepOptions, SweepSummary
from autotune.sweep.profile import Profile
from autotune.sweep.proposals import Proposal, Proposer
from autotune.sweep.recorder import Recorder
from autotune.sweep.remeasure import Remeasure
from autotune.sweep.setup import (
    enqueue_first_trials,
    fail_stale_trials,
    open_study,
    recover_orphans,
    study_info,
    trial_budget,
)
from autotune.sweep.storage import HEARTBEAT_S, close_storage, heartbeat, quiet_optuna, worker_id
from autotune.sweep.summary import summarize

__all__ = ["MAX_SKIPS_IN_A_ROW", "Sweep", "run_sweep"]

MAX_SKIPS_IN_A_ROW = 100  # proposals that need no run (duplicates, rejected): the space is exhausted


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
    ) -> None:
        info = study_info(space, options)
        study, storage = open_study(space, options, info, sampler)
        tracker = None
        if options.tracking:
            from autotune.tracking import SweepTracker

            tracker = SweepTracker(study.study_name, options.tracking_uri)
        ledger = TrialLedger(study, info.objectives)
        self.ctx = SweepContext(space, options, study, storage, info, ledger, executor, progress, tracker)
        self.budget, self.deadline = trial_budget(space, options)
        self.proposer = Proposer(study, space, ledger, worker or worker_id(), self.budget)
        self.recorder = Recorder(study, space, info.objectives, ledger, tracker)
        self._stale_checked = 0.0

    def run(self) -> SweepSummary:
        """Run (or resume) this worker's share of the sweep; the summary covers every worker's trials."""
        ctx, started = self.ctx, time.time()
        if ctx.tracker is not None:
            ctx.tracker.start(self._run_params(), ctx.space.path)
        recover_orphans(ctx.study, ctx.storage, ctx.progress)
        self.budget = self.proposer.budget = enqueue_first_trials(ctx.study, ctx.space, self.budget)
        ctx.ledger.refresh()
        ctx.progress.budget, ctx.progress.deadline = self.budget, self.deadline
        ctx.progress.done = ctx.ledger.tally().measured
        skips = 0
        while not (reason := self._stop_reason(skips)):
            skips = 0 if self.one_trial() else skips + 1
            self._fail_stale_trials()
        for stage in self._stages():
            stage.run(ctx)
        ctx.progress.close()
        summary = summarize(ctx, reason, time.time() - started)
        close_storage(ctx.storage)
        return summary

    def _stages(self) -> list[Stage]:
        if self.ctx.options.replay:
            return []  # recorded measurements would only repeat themselves
        options = self.ctx.options
        stages: list[Stage] = [Remeasure(options.remeasure_top, options.remeasure_repeats)]
        if options.profile_steps:
            stages.append(Profile(options.profile_steps))  # after re-measuring: it names the winner
        return stages

    def one_trial(self) -> bool:
        """Propose, answer or measure, record. True when the trial was measured (it counts in the budget)."""
        ctx = self.ctx
        trial = self.proposer.ask()
        started = time.monotonic()
        try:
            with heartbeat(ctx.storage, trial._trial_id):
                proposal = self.proposer.propose(trial)
                label = _label(trial.number, proposal.params)
                ctx.progress.started(label)
                result = proposal.answer or self._measure(proposal)
        except BaseException:
            with quiet_optuna():
                ctx.study.tell(trial, state=TrialState.FAIL)  # bad input or an interrupt: leave nothing RUNNING
            raise
        self.recorder.record(proposal, result)
        ctx.ledger.refresh()
        self._report(label, proposal, result, time.monotonic() - started)
        return proposal.kind is TrialKind.MEASURED

    def _measure(self, proposal: Proposal) -> TrialResult:
        return self.ctx.executor(proposal.params, self.ctx.space.budget.trial_timeout_s, self._prune_below())

    def _prune_below(self) -> float | None:
        """The throughput under which a trial is stopped after warm-up: a fraction of the best so far."""
        objectives, ratio = self.ctx.info.objectives, self.ctx.options.prune_ratio
        if not ratio or len(objectives) > 1 or objectives[0] != ("throughput", "maximize"):
            return None
        best = self.ctx.ledger.best_feasible()
        return ratio * best if best is not None else None

    def _stop_reason(self, skips: int) -> str:
        ledger, patience = self.ctx.ledger, self.ctx.options.patience
        # Trials other workers are running now will count once they finish: don't start more than the budget.
        if self.budget is not None and len(ledger.measured) + len(ledger.running) >= self.budget:
            return f"budget of {self.budget} measured trials reached"
        if self.deadline is not None and time.time() >= self.deadline:
            return "sweep time limit reached"
        if patience and ledger.trials_since_best() >= patience:
            return f"no improvement in the last {patience} measured trials"
        if skips >= MAX_SKIPS_IN_A_ROW:
            return f"search space exhausted ({skips} proposals in a row were already measured or infeasible)"
        return ""

    def _fail_stale_trials(self) -> None:
        """Check other workers' heartbeats once per heartbeat interval (a trial goes stale after a minute)."""
        if time.monotonic() - self._stale_checked >= HEARTBEAT_S:
            self._stale_checked = time.monotonic()
            fail_stale_trials(self.ctx.study, self.ctx.storage)

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

    def _report(self, label: str, proposal: Proposal, result: TrialResult, seconds: float) -> None:
        measured = proposal.kind is TrialKind.MEASURED
        outcome = _outcome(proposal, result, self.ctx.info.objectives[0][0])
        self.ctx.progress.finished(label, outcome, seconds, measured, self.ctx.ledger.tally(), self._best_text())

    def _best_text(self) -> str:
        leader = self.ctx.ledger.leader()
        if leader is None:
            return "none yet"
        best, value, speedup = leader
        unit = best.result.metrics.get("throughput_unit", "") if self.ctx.info.objectives[0][0] == "throughput" else ""
        speedup_text = f" ({speedup:.2f}x default)" if speedup else ""
        return f"t{best.number:03d} {value:,.4g} {unit}{speedup_text}".replace("  ", " ")


def _label(number: int, params: dict[str, object]) -> str:
    from autotune.labels import trial_run_name

    return trial_run_name(number, params)


def _outcome(proposal: Proposal, result: TrialResult, metric: str) -> str:
    """What the progress line says of a finished proposal."""
    if proposal.kind is TrialKind.DUPLICATE:
        source = proposal.source
        return f"same as trial {source.number}, not run again" if source else str(result.reason)
    if proposal.kind in (TrialKind.REJECTED, TrialKind.SURPLUS):
        return str(result.reason)
    if not result.ok:
        return f"{result.status.value}: {result.reason}"
    unit = result.metrics.get("throughput_unit", "") if metric == "throughput" else ""
    outcome = f"ok {metric} {result.metrics.get(metric, float('nan')):,.4g} {unit}".rstrip()
    if result.metrics.get("gpu_other_processes"):
        outcome += " (WARNING: other processes used the GPU while it was timed: not trustworthy)"
    return "".join([outcome, *(f" (WARNING: {warning})" for warning in result.warnings)])


def run_sweep(
    space: Space,
    options: SweepOptions,
    progress: Progress | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
) -> SweepSummary:
    """Run (or resume) the sweep of ``space`` until its budget, its time limit or exhaustion.

    ``sampler`` overrides the space's (the search benchmark compares samplers this way).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress lines say what matters
    executor = replay_executor(options.replay) if options.replay else trial_executor(space, options)
    return Sweep(space, options, executor, progress or Progress(None, None), sampler).run()
