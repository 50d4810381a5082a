"""A sweep whose study's disk fills up: nothing measured is lost or measured twice, and it stops in one line.

:class:`GuardedRecorder` wraps the worker's :class:`~autotune.sweep.recorder.Recorder`:

- :meth:`~GuardedRecorder.start`, before the first proposal: set the worker's reserve aside beside a
  SQLite study (:mod:`autotune.sweep.faults.disk_reserve`; a disk without that much free refuses the sweep at once,
  before a trial is measured that could not be recorded), then record the measurements an earlier full
  disk kept outside the study (:mod:`autotune.sweep.faults.kept_measurements`) onto their trials, before orphans are
  retried;
- :meth:`~GuardedRecorder.record`: a record that fails because the disk is full is written again, in
  the space the reserve gave back; where it fails again, the outcome is kept outside the study for the
  resumed sweep. Either way the sweep stops: a :class:`~autotune.storage.faults.StorageFaultError` whose
  one line names the disk, says what is kept, and that re-running the same command resumes. A record
  that went through in the reserve's space (a heartbeat met the full disk first) stops it the same way:
  the next trial would measure into a disk that cannot take its record.
"""

from __future__ import annotations

import logging

from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RDBStorage
from optuna.trial import Trial, TrialState

from autotune.errors import AutotuneError
from autotune.measurement import TrialResult
from autotune.records import TrialKind
from autotune.records.trial import read_trial
from autotune.storage.faults import FaultKind, StorageFault, StorageFaultError, find_fault, free_space, size_text
from autotune.sweep.context import SweepContext
from autotune.sweep.faults.disk_reserve import RESERVE_BYTES, DiskReserve
from autotune.sweep.faults.kept_measurements import KeptMeasurement, keep, kept_measurements
from autotune.sweep.proposals.proposer import Proposal
from autotune.sweep.recorder import Recorder

__all__ = ["RESUME", "GuardedRecorder"]

log = logging.getLogger(__name__)

RESUME = "free space there and re-run the same command to resume"


class GuardedRecorder:
    """The worker's recorder, guarded against a full disk (see the module docstring)."""

    def __init__(self, recorder: Recorder, ctx: SweepContext) -> None:
        self.recorder = recorder
        self.ctx = ctx
        self.storage_url = ctx.options.storage
        self.reserve = DiskReserve.for_study(self.storage_url, ctx.study.study_name)

    def start(self) -> None:
        """Set the reserve aside, then record what an earlier full disk kept outside the study."""
        if self.reserve is not None and isinstance(self.ctx.storage, RDBStorage):
            self._fill_reserve(self.reserve)
            self.reserve.watch(self.ctx.storage.engine)
        for measurement in kept_measurements(self.storage_url, self.ctx.study.study_name):
            self._record_kept(measurement)

    def _fill_reserve(self, reserve: DiskReserve) -> None:
        """A disk without room for the reserve cannot take a trial's record either: the sweep does not start."""
        try:
            reserve.fill()
        except OSError as exc:
            fault = find_fault(exc, self.storage_url)
            if fault is None:  # not the disk's fault (a cache folder it may not write): sweep without a reserve
                log.debug("no disk reserve: %s", exc)
                self.reserve = None
                return
            if fault.kind is not FaultKind.FULL:
                raise StorageFaultError(fault) from exc
            free = free_space(reserve.path.parent)
            has = f", {size_text(free)} are" if free is not None else ""
            needs = f"a sweep needs {RESERVE_BYTES >> 20} MiB free beside its study to start{has}"
            raise StorageFaultError(fault, f"{needs}; {RESUME}") from exc

    def record(self, proposal: Proposal, result: TrialResult) -> None:
        """Record ``proposal``'s outcome; on a full disk, rescue it and stop the sweep (see the module docstring)."""
        try:
            self.recorder.record(proposal, result)
        except Exception as exc:
            fault = self._full_disk(exc)
            if fault is None:
                raise
            raise self._rescue(proposal, result, fault) from exc
        if self.reserve is not None and self.reserve.released:
            fault = StorageFault(FaultKind.FULL, self.storage_url, "database or disk is full")
            raise StorageFaultError(fault, f"{_recorded(proposal)}; {RESUME}")

    def close(self) -> None:
        """Give the reserve's space back: it is kept only while the worker runs."""
        if self.reserve is not None:
            self.reserve.close()

    def _rescue(self, proposal: Proposal, result: TrialResult, fault: StorageFault) -> StorageFaultError:
        """Record again in the reserve's space, else keep a measured outcome outside the study; what to stop with."""
        if self.reserve is not None:
            self.reserve.release()  # the engine's listener has, unless the failure was not the database's own
        try:
            self.recorder.record(proposal, result)
            return StorageFaultError(fault, f"{_recorded(proposal)}; {RESUME}")
        except Exception as again:
            if self._full_disk(again) is None:
                raise
        if proposal.kind is not TrialKind.MEASURED:
            return StorageFaultError(fault, f"the study keeps every trial measured so far; {RESUME}")
        trial = proposal.trial
        pending = KeptMeasurement(trial._trial_id, trial.number, proposal.params, result)
        try:
            kept = keep(self.storage_url, self.ctx.study.study_name, pending)
        except AutotuneError as refused:
            lost = f"trial {trial.number}'s measurement could not be kept anywhere ({refused}) and runs again"
            return StorageFaultError(fault, f"{lost}; {RESUME}")
        where = f"trial {trial.number}'s measurement is kept in {kept.path}, to be recorded when the sweep resumes"
        return StorageFaultError(fault, f"{where}; the trials measured before it are in the study; {RESUME}")

    def _record_kept(self, kept: KeptMeasurement) -> None:
        """Record a kept measurement onto its trial if that still runs (left so by the full disk); then forget it."""
        say = self.ctx.progress.message
        try:
            stored = self.ctx.study._storage.get_trial(kept.trial_id)
        except KeyError:
            stored = None
        record = read_trial(stored, self.ctx.records.objectives) if stored is not None else None
        if record is None or (record.number, record.params) != (kept.number, kept.params):
            # The study was replaced since (restored from a backup, say): the trial it was measured for is gone.
            say(f"trial {kept.number}: its kept measurement ({kept.path}) matches no trial of the study; not recorded")
            kept.forget()
            return
        if record.state is TrialState.RUNNING:
            proposal = Proposal(Trial(self.ctx.study, kept.trial_id), kept.params, TrialKind.MEASURED)
            try:
                self.recorder.record(proposal, kept.result)
                say(f"trial {kept.number}: its measurement, kept while the disk was full, is recorded now")
            except UpdateFinishedTrialError:
                pass  # another worker of the study recorded it first
        elif record.result is None:
            say(f"trial {kept.number} was ended by another worker while its measurement was kept; not recorded")
        kept.forget()

    def _full_disk(self, exc: BaseException) -> StorageFault | None:
        fault = find_fault(exc, self.storage_url)
        return fault if fault is not None and fault.kind is FaultKind.FULL else None


def _recorded(proposal: Proposal) -> str:
    number = proposal.trial.number
    if proposal.kind is TrialKind.MEASURED:
        return f"trial {number}, measured as the disk filled, is recorded, as is every trial measured before it"
    return "the study keeps every trial measured so far"
