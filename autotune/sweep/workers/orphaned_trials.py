"""Trials whose worker is gone: failed, and their configurations queued again for the workers that remain.

A worker of this host that died (SIGKILL, the OOM killer, a killed sweep) is known at once by its pid
(:func:`~autotune.storage.rdb.is_dead_local_worker`), so every worker looks at the running trials at
every stop check, and while it waits: a ``kill(pid, 0)`` per running trial, no storage read. A worker on
another host is known by its heartbeats, ``GRACE_S`` after its last (Optuna's stale-trial check, run
once per ``HEARTBEAT_S``). Either way the trial is failed and a WAITING copy of it queued
(:class:`~autotune.storage.rdb.RetryStaleTrial`, at most ``MAX_RETRIES`` times for one configuration),
which the next ask of any worker runs.

Several workers may see one orphan at the same moment. Each first claims it in the study's lease table
(``orphan <trial id>``, :mod:`autotune.sweep.workers.leases`): exactly one fails it and queues it again, so a
configuration is never queued twice. A claimer that dies before it fails the trial loses the claim
after ``GRACE_S``, and the heartbeat check catches the trial anyway.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import optuna
from optuna.storages import RDBStorage

from autotune.records import TrialRecord, schema
from autotune.storage.rdb import HEARTBEAT_S, MAX_RETRIES, RetryStaleTrial, is_dead_local_worker, quiet_optuna
from autotune.sweep.workers.leases import LeaseTable
from autotune.views.progress import Progress

__all__ = ["OrphanWatch", "fail_stale_trials"]


class OrphanWatch:
    """One worker's eye on the other workers' running trials (see the module docstring)."""

    def __init__(
        self,
        study: optuna.Study,
        storage: optuna.storages.BaseStorage,
        leases: LeaseTable | None,
        progress: Progress,
        worker: str,
    ) -> None:
        self.study = study
        self.storage = storage
        self.leases = leases
        self.progress = progress
        self.worker = worker  # this worker's name: what its claims are held by
        self._stale_checked = 0.0
        with quiet_optuna():
            self._retry = RetryStaleTrial(max_retry=MAX_RETRIES)

    def check(self, running: Iterable[TrialRecord]) -> bool:
        """Retry the trials among ``running`` whose worker died on this host; once per ``HEARTBEAT_S``, also
        those of any host whose heartbeats stopped. True when trials may have changed state: read them again."""
        changed = False
        for trial in running:
            if trial.trial_id is not None and is_dead_local_worker(trial.worker) and self._claim(trial.trial_id):
                changed |= self._fail_and_retry(trial.trial_id, trial.number, str(trial.worker))
        if time.monotonic() - self._stale_checked >= HEARTBEAT_S:
            self._stale_checked = time.monotonic()
            fail_stale_trials(self.study, self.storage)
            changed = True
        return changed

    def _claim(self, trial_id: int) -> bool:
        """Whether this worker is the one to fail the trial (see the module docstring)."""
        return self.leases is None or self.leases.acquire(f"orphan {trial_id}", self.worker) is None

    def _fail_and_retry(self, trial_id: int, number: int, worker: str) -> bool:
        try:
            # A worker killed while recording may have written its kind already: the retry measures it instead.
            self.storage.set_trial_user_attr(trial_id, schema.ATTR_KIND, None)
            self.storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:  # it ended after all (a claimer that died after failing it)
            return False
        failed = self.storage.get_trial(trial_id)
        retried = len(failed.system_attrs.get("retry_history", [])) < MAX_RETRIES
        self._retry(self.study, failed)
        outcome = "retrying it" if retried else f"not retried: this configuration lost {MAX_RETRIES + 1} workers"
        self.progress.message(f"trial {number} was left running by a killed worker ({worker}): {outcome}")
        return True


def fail_stale_trials(study: optuna.Study, storage: optuna.storages.BaseStorage) -> None:
    """Fail (and retry) trials whose worker stopped sending heartbeats, on any host."""
    if isinstance(storage, RDBStorage):
        with quiet_optuna():
            optuna.storages.fail_stale_trials(study)
