"""Proposals: ask the sampler for a configuration and decide whether it must run.

A proposal that repeats a measured configuration is answered from that measurement; one that
another worker is measuring right now is answered as a duplicate without waiting; one that breaks
a feasibility rule of the space is rejected. Neither costs GPU time or counts in the budget. Only
the rest reach the executor.

In a finite space (:mod:`autotune.sweep.proposals.coverage`) the proposer also says when every configuration
is measured, and after a proposal that needs no run it queues an untried configuration where the
budget left covers them all, so that a budget larger than the space ends in few repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import Trial, TrialState

from autotune.knobs.attention import cannot_run, kernel_setting
from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords, TrialKind, TrialRecord, schema
from autotune.space import Space
from autotune.storage.rdb import quiet_optuna
from autotune.sweep.proposals.coverage import Coverage

__all__ = ["Proposal", "Proposer", "failed_kernels", "kernel_failed", "would_reject"]


@dataclass(frozen=True)
class Proposal:
    """A configuration the sampler proposed for ``trial``, and how it will be answered.

    ``answer`` is the outcome of a proposal that does not run (a duplicate, a rejected
    configuration); None means the executor measures it. ``source`` is the earlier trial a
    duplicate was answered from.
    """

    trial: Trial
    params: dict[str, Any]
    kind: TrialKind
    answer: TrialResult | None = None
    source: TrialRecord | None = None


class Proposer:
    """Asks the study's sampler for trials on behalf of one worker, named ``worker`` in the study."""

    def __init__(
        self, study: optuna.Study, space: Space, records: StudyRecords, worker: str, budget: int | None = None
    ) -> None:
        self.study = study
        self.space = space
        self.records = records
        self.worker = worker
        self.budget = budget  # measured trials in all, every worker's (None: no limit)
        # Trials numbered from here on were created while this worker runs: a single worker's own,
        # or another worker's beside it. Earlier ones (a resumed sweep's) never count as concurrent.
        self.first_new_trial = records.total
        self.coverage = Coverage.of(space)  # None: an infinite space, or one too large to list

    def ask(self) -> Trial:
        """A new RUNNING trial of this worker (a queued one first: the default, a retried orphan)."""
        with quiet_optuna():
            trial = self.study.ask()
        trial.set_user_attr(schema.ATTR_WORKER, self.worker)
        return trial

    def propose(self, trial: Trial) -> Proposal:
        """Sample ``trial``'s params and decide how it is answered; after one that needs no run, queue an
        untried configuration where the budget left covers them all (:meth:`_queue_untried`)."""
        proposal = self._answer(trial)
        if proposal.kind in (TrialKind.DUPLICATE, TrialKind.REJECTED):
            self._queue_untried(proposal)
        return proposal

    def exhausted(self) -> str | None:
        """Why the sweep stops once a finite space has no configuration left untried; else None."""
        if self.coverage is None or len(self.records.measured) + len(self.records.running) < self.coverage.size:
            return None  # too few trials to have covered the space: spare reading their params (every stop check)
        return self.coverage.exhausted(*self._trial_params())

    def _answer(self, trial: Trial) -> Proposal:
        params = self.space.suggest(trial)
        trial.set_user_attr(schema.ATTR_PARAMS, params)
        self.records.refresh()  # other workers' trials up to this moment
        if self._budget_taken(trial.number):
            reason = "the budget is taken by trials other workers are running"
            return Proposal(trial, params, TrialKind.SURPLUS, TrialResult.failed(Status.INVALID, reason, params))
        earlier = self.records.measured_with(params, trial.number)
        if earlier is not None and self._by_a_concurrent_worker(earlier):
            # Workers started with the same seed propose in lockstep (TPE's random start-up ignores
            # the history): the one that collided draws from fresh entropy from now on.
            self.study.sampler.reseed_rng()
        if earlier is not None and earlier.state is TrialState.RUNNING:
            reason = (
                # parked: autotune.sweep.proposals.parked_trials
                f"parked as trial {earlier.number} until its graph is compiled ahead"
                if earlier.worker == self.worker
                else f"being measured by trial {earlier.number} (another worker)"
            )
            return Proposal(trial, params, TrialKind.DUPLICATE, TrialResult.failed(Status.INVALID, reason, params))
        if earlier is not None:
            assert earlier.result is not None  # measured trials have a result
            return Proposal(trial, params, TrialKind.DUPLICATE, earlier.result, earlier)
        feasible, rule = self.space.is_feasible(params)
        if not feasible:
            answer = TrialResult.failed(Status.INVALID, f"rejected by rule: {rule}", params)
            return Proposal(trial, params, TrialKind.REJECTED, answer)
        if (failed := kernel_failed(self.records, params)) is not None:
            backend, precision = kernel_setting(failed.params) or ("", "")
            said = f"attention_backend={backend} cannot run this model's attention in {precision}"
            reason = f"{said} (trial {failed.number})"
            return Proposal(trial, params, TrialKind.REJECTED, TrialResult.failed(Status.INVALID, reason, params))
        return Proposal(trial, params, TrialKind.MEASURED)

    def _queue_untried(self, proposal: Proposal) -> None:
        """Queue the untried configuration nearest to ``proposal``'s, so the next ask measures it.

        Only where the budget left covers every untried configuration (the sampler's choice then decides
        nothing: all of them will be measured), and only while no trial is queued already (that one is
        the next ask's, whoever asks): several workers hitting repeats at once queue one, not one each.
        """
        if self.coverage is None:
            return
        # Counts alone first: in a space larger than the budget (a benchmark's), the untried outnumber the budget left.
        at_least_untried = self.coverage.size - len(self.records.measured) - len(self.records.running)
        if not self._budget_covers(at_least_untried, proposal.trial.number):
            return
        untried = self.coverage.untried(*self._trial_params())
        if not untried or not self._budget_covers(len(untried), proposal.trial.number):
            return
        if self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return
        chosen = self.coverage.nearest(untried, proposal.params, proposal.trial.number)
        self.study.enqueue_trial(self.space.optuna_params(chosen))

    def _budget_covers(self, trials: int, number: int) -> bool:
        """Whether the budget left has room for ``trials`` more, every worker's trials counted (``number``'s,
        which needs no run, aside)."""
        if self.budget is None:
            return True
        running = sum(1 for r in self.records.running if r.number != number)
        return trials <= self.budget - self.records.budgeted - running

    def _trial_params(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The params of every worker's measured trials, and of those running now (as of the last refresh).

        A running trial is known by its params once proposed; one asked an instant ago is not yet,
        which at worst queues a configuration twice (the second ask then answers a duplicate).
        """
        measured = [record.params for record in self.records.measured]
        running = [record.params for record in self.records.running if record.params]
        return measured, running

    def _budget_taken(self, number: int) -> bool:
        """Whether measured trials and those that other workers asked for before ``number`` fill the budget.

        Two workers can both pass the stop check and ask at the same moment; the later-numbered
        trial then stands down instead of measuring one trial past the budget.
        """
        if self.budget is None:
            return False
        earlier_running = sum(1 for r in self.records.running if r.number < number)
        return self.records.budgeted + earlier_running >= self.budget

    def _by_a_concurrent_worker(self, trial: TrialRecord) -> bool:
        """True for a trial another worker is running, or one another worker created since this one started.

        A single worker never sees one, so its proposals stay exactly those of its seed; a resumed
        sweep's earlier trials, orphans of a killed run included, were created before it started.
        """
        if trial.state is TrialState.RUNNING:
            # this worker's own: a trial it parked (autotune.sweep.proposals.parked_trials)
            return trial.worker != self.worker
        return trial.number >= self.first_new_trial and trial.worker != self.worker


def failed_kernels(records: StudyRecords) -> dict[tuple[str, str], TrialRecord]:
    """Each pinned attention kernel and precision (:func:`~autotune.knobs.attention.kernel_setting`) that a measured
    trial found cannot run this model, with the first such trial: the same setting fails again."""
    failed: dict[tuple[str, str], TrialRecord] = {}
    for record in records.measured:
        if record.result is None or record.result.status is not Status.INVALID or not cannot_run(record.result.reason):
            continue
        if (setting := kernel_setting(record.params)) is not None:
            failed.setdefault(setting, record)
    return failed


def kernel_failed(records: StudyRecords, params: Mapping[str, Any]) -> TrialRecord | None:
    """The measured trial whose pinned attention kernel could not run this model in the precision ``params`` ask for:
    the proposer answers ``params`` without a run (free, like a rule's rejection)."""
    setting = kernel_setting(params)
    return None if setting is None else failed_kernels(records).get(setting)


def would_reject(records: StudyRecords) -> Callable[[Mapping[str, Any]], bool]:
    """Whether the proposer would answer a configuration without a run for its failed kernel, as ``records`` stand
    now: the compile ahead leaves such a graph alone. The failed settings are read once, for many configurations."""
    failed = failed_kernels(records)
    return lambda params: kernel_setting(params) in failed
