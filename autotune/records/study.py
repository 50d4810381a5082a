"""A study read into trial records; every question the views ask of it answered in one place.

:class:`StudyRecords` is the record model: it reads the study here, and answers from what it read
(:class:`~autotune.records.answers.StudyAnswers`: the order, the winner, the Pareto front, speedup, where the time
went); feasibility and the ranked value come from :class:`~autotune.records.trial.TrialRecord`. The
leaderboard, export, status, the report, the sweep's summary and progress line, MLflow's runs and
description all render these answers; none computes its own.

Reading is incremental, because a sweep asks after every trial: :meth:`StudyRecords.refresh` is one read
of the storage (Optuna's cached storage fetches only trials that are new or were unfinished at the last
read), and a finished trial is parsed once (Optuna refuses updates to finished trials, so its record
stays true). Re-measurements and rehearsed starts live on the study's attributes: they are read when the records
are made, by :meth:`~StudyRecords.reread_remeasurements`, and from :meth:`~StudyRecords.note_remeasured` and
:meth:`~StudyRecords.note_rehearsed`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.records import schema
from autotune.records.answers import StudyAnswers
from autotune.records.rehearsed_start import Rehearsal
from autotune.records.schema import StudyInfo, TrialKind
from autotune.records.trial import Remeasurement, TrialRecord, read_trial

__all__ = ["StudyRecords", "params_key"]


def params_key(params: Mapping[str, Any]) -> str:
    """A hashable form of decoded params, equal exactly when the params are (values of any JSON type)."""
    return json.dumps(params, sort_keys=True, default=str)


class StudyRecords(StudyAnswers):
    """Every trial of one study as a :class:`TrialRecord`, read incrementally, with the study-wide answers of
    :class:`StudyAnswers` over its measured ones (module docstring).

    ``objectives`` are the study's ``(metric, direction)`` pairs, the first one ranking.
    """

    def __init__(self, study: optuna.Study, objectives: Sequence[tuple[str, str]]) -> None:
        if not objectives:
            raise ValueError(f"a study needs at least one objective, got {objectives=}")
        self.study = study
        self.objectives = tuple((str(m), str(d)) for m, d in objectives)
        self._finished: dict[int, TrialRecord] = {}
        self._open: list[TrialRecord] = []  # running or waiting at the last refresh
        self._measured: list[TrialRecord] = []  # in trial-number order
        self._by_params: dict[str, int] = {}  # the first measured trial of each configuration
        self._remeasured: dict[int, dict[str, Any]] = {}
        self._rehearsed: dict[int, dict[str, Any]] = {}
        self._forget()
        self.reread_remeasurements(refresh=False)
        self.refresh()

    @classmethod
    def read(cls, study: optuna.Study, info: StudyInfo) -> StudyRecords:
        """The records of ``study``, made for ``info``'s objectives."""
        return cls(study, info.objectives)

    # -- reading -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Take in what changed in the study since the last refresh (one storage read)."""
        open_records = []
        for trial in self.study.get_trials(deepcopy=False):
            if trial.number in self._finished:
                continue
            if trial.state in schema.FINISHED_STATES:
                number = trial.number
                self._take_in(
                    read_trial(trial, self.objectives, self._remeasured.get(number), self._rehearsed.get(number))
                )
            else:
                open_records.append(read_trial(trial, self.objectives))
        self._open = open_records
        self._forget()

    def reread_remeasurements(self, *, refresh: bool = True) -> None:
        """Read the re-measurements and rehearsed starts stored on the study (one read of its attributes), e.g.
        another process's finishing stages'."""
        for key, data in self.study.user_attrs.items():
            if not isinstance(data, dict):
                continue
            if (number := schema.remeasured_number(key)) is not None:
                self.note_remeasured(number, data)
            elif (number := schema.rehearsed_number(key)) is not None:
                self.note_rehearsed(number, data)
        if refresh:
            self.refresh()

    def note_remeasured(self, number: int, data: Mapping[str, Any]) -> None:
        """Trial ``number`` was re-measured (``data`` as stored on the study): rank it by the median from now on."""
        self._remeasured[number] = dict(data)
        remeasured = Remeasurement.from_dict(data, self.metric)
        self._update(number, lambda record: record.with_remeasurement(remeasured, self.objectives))

    def note_rehearsed(self, number: int, data: Mapping[str, Any]) -> None:
        """Trial ``number``'s production start was rehearsed (``data`` as stored on the study)."""
        self._rehearsed[number] = dict(data)
        self._update(number, lambda r: r.with_rehearsal(Rehearsal.from_dict(data)))

    def _update(self, number: int, change: Callable[[TrialRecord], TrialRecord]) -> None:
        """Trial ``number``'s record, changed by ``change`` where it is finished with a result (else it is read with
        the change when it finishes)."""
        record = self._finished.get(number)
        if record is None or record.result is None:
            return
        updated = change(record)
        self._finished[number] = updated
        self._measured = [updated if r.number == number else r for r in self._measured]
        self._forget()

    def _take_in(self, record: TrialRecord) -> None:
        self._finished[record.number] = record
        if not record.measured:
            return
        self._measured.append(record)
        self._measured.sort(key=lambda r: r.number)
        key = params_key(record.params)
        if key not in self._by_params or record.number < self._by_params[key]:
            self._by_params[key] = record.number

    # -- the trials --------------------------------------------------------------------------------
    @property
    def trials(self) -> list[TrialRecord]:
        """Every trial, in number order (running and waiting ones as of the last refresh)."""
        return sorted([*self._finished.values(), *self._open], key=lambda r: r.number)

    def trial(self, number: int) -> TrialRecord:
        """The record of trial ``number``; KeyError for a number the last refresh did not see."""
        found = self._finished.get(number) or next((r for r in self._open if r.number == number), None)
        if found is None:
            raise KeyError(number)
        return found

    @property
    def measured(self) -> list[TrialRecord]:
        """The measured trials, the search's and the finalists', in trial-number order."""
        return self._measured

    @property
    def running(self) -> list[TrialRecord]:
        return [r for r in self._open if r.state is TrialState.RUNNING]

    @property
    def total(self) -> int:
        """Trials of every state and kind."""
        return len(self._finished) + len(self._open)

    def measured_with(self, params: Mapping[str, Any], excluding: int = -1) -> TrialRecord | None:
        """The first measured trial with exactly these params, else one running now (not ``excluding``), else None."""
        key = params_key(params)
        number = self._by_params.get(key)
        if number is not None and number != excluding:
            return self._finished[number]
        running = (r for r in self.running if r.number != excluding and params_key(r.params) == key)
        return next(running, None)

    def not_run(self) -> dict[str, int]:
        """Finished proposals that ran nothing, by kind (rejected, duplicate, surplus): no GPU time, no budget."""
        kinds: Counter[TrialKind | None] = Counter(
            r.kind for r in self._finished.values() if r.kind not in (None, TrialKind.MEASURED)
        )
        return {kind.value: kinds[kind] for kind in TrialKind if kinds[kind]}
