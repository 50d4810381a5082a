"""A study read into trial records, and every question the views ask of it answered in one place.

:class:`StudyRecords` is the record model: feasibility and the ranked value come from
:class:`~autotune.records.trial.TrialRecord`, the order, the winner, the Pareto front and speedup from
:mod:`~autotune.records.ranking`, where the time went from :mod:`~autotune.records.timeshares`. The
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
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import optuna
from optuna.trial import TrialState

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.records import ranking, schema
from autotune.records.rehearsal import Rehearsal
from autotune.records.schema import StudyInfo, TrialKind
from autotune.records.timeshares import TimeShares, time_shares
from autotune.records.trial import Remeasurement, TrialRecord, read_trial

__all__ = ["StudyRecords", "Tally", "params_key"]


def _start_order(record: TrialRecord) -> tuple[float, int]:
    return (record.started.timestamp() if record.started is not None else float("inf"), record.number)


def params_key(params: Mapping[str, Any]) -> str:
    """A hashable form of decoded params, equal exactly when the params are (values of any JSON type)."""
    return json.dumps(params, sort_keys=True, default=str)


@dataclass(frozen=True)
class Tally:
    """How the measured trials ended: ok (``infeasible`` of them broke a constraint), pruned, failed."""

    measured: int
    pruned: int
    failed: int
    infeasible: int = 0

    @property
    def ok(self) -> int:
        return self.measured - self.pruned - self.failed


class _Derived:
    """What the records imply together, computed on first use and dropped at the next change."""

    def __init__(self, records: StudyRecords) -> None:
        self._records = records

    @cached_property
    def ranked(self) -> list[TrialRecord]:
        return ranking.order(self._records.measured, self._records.direction)

    @cached_property
    def ranks(self) -> dict[int, int]:
        return {record.number: i + 1 for i, record in enumerate(self.ranked)}

    @cached_property
    def default(self) -> TrialRecord | None:
        return next((r for r in self._records.measured if r.default), None)

    @cached_property
    def pareto(self) -> frozenset[int]:
        directions = [direction for _, direction in self._records.objectives]
        return ranking.pareto_front(self._records.measured, directions) if len(directions) > 1 else frozenset()


class StudyRecords:
    """Every trial of one study as a :class:`TrialRecord`, and the study-wide answers (module docstring).

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
        self._derived = _Derived(self)
        self.reread_remeasurements(refresh=False)
        self.refresh()

    @classmethod
    def read(cls, study: optuna.Study, info: StudyInfo) -> StudyRecords:
        """The records of ``study``, made for ``info``'s objectives."""
        return cls(study, info.objectives)

    @property
    def direction(self) -> str:
        return self.objectives[0][1]

    @property
    def metric(self) -> str:
        return self.objectives[0][0]

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
        self._derived = _Derived(self)

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
        self._derived = _Derived(self)

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
        """The measured trials (what the budget counts), in trial-number order."""
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

    def tally(self) -> Tally:
        """How the measured trials ended (every worker's)."""
        outcomes = Counter(r.outcome for r in self._measured)
        pruned, infeasible = outcomes["pruned"], outcomes["infeasible"]
        failed = len(self._measured) - pruned - infeasible - outcomes["ok"]
        return Tally(len(self._measured), pruned, failed, infeasible)

    def time(self) -> TimeShares:
        """Where the measured trials' time went."""
        return time_shares(self._measured)

    # -- ranking -----------------------------------------------------------------------------------
    @property
    def ranked(self) -> list[TrialRecord]:
        """The feasible measured trials, best first: the leaderboard's ranked rows."""
        return self._derived.ranked

    def rank(self, number: int) -> int | None:
        """Trial ``number``'s place among :attr:`ranked` (1 = the winner), None when it does not rank."""
        return self._derived.ranks.get(number)

    @property
    def winner(self) -> TrialRecord | None:
        """The best feasible measured trial, by its ranked value (the re-measured median where there is one)."""
        ranked = self._derived.ranked
        return ranked[0] if ranked else None

    @property
    def default(self) -> TrialRecord | None:
        """The measured PyTorch-default trial, ok or not."""
        return self._derived.default

    @property
    def baseline(self) -> float | None:
        """The ok default trial's ranked value of the first objective: the yardstick of every speedup."""
        default = self._derived.default
        return default.value if default is not None and default.ok else None

    def speedup(self, record: TrialRecord) -> float | None:
        """``record``'s ranked value over the default's (> 1 is better either way); None unless it ended ok.

        The default trial is its own yardstick, also while it is being recorded (not taken in yet).
        """
        if not record.ok:
            return None
        baseline = record.value if record.default else self.baseline
        return ranking.speedup(record.value, baseline, self.direction)

    @property
    def pareto(self) -> frozenset[int]:
        """With several objectives, the feasible trials no other one beats on every objective; else empty."""
        return self._derived.pareto

    def faster_infeasible(self) -> list[TrialRecord]:
        """Ok trials that broke a constraint yet measured better than the winner (every one, with no winner)."""
        winner = self.winner
        return [
            r
            for r in self._measured
            if r.ok
            and not r.feasible
            and r.value is not None
            and (winner is None or winner.value is None or ranking.better(r.value, winner.value, self.direction))
        ]

    def kernels_never_run(self) -> list[str]:
        """Listed kernels (the space's ``kernels:``) that no finished trial launched: likely not the ones the model
        calls. A trial whose params route around a kernel (the model's own LayerNorm, not the listed one) launches
        it zero times too, so only every finished trial together says so; empty before any finished."""
        launched: dict[str, int] = {}
        for record in self._measured:
            if record.result is None or not record.ok:
                continue
            for path, entry in record.result.kernels.items():
                if "launches" in entry:  # a listed kernel's entry; one its own autotuner chose for has none
                    launched[path] = launched.get(path, 0) + int(entry["launches"])
        return sorted(path for path, count in launched.items() if count == 0)

    def time_to_within(self, fraction: float = 0.02, target: float | None = None) -> tuple[float, int] | None:
        """Trial time (seconds, every measured trial's, in the order they started) until the first feasible trial
        within ``fraction`` of the winner's ranked value finished, and how many measured trials that took;
        None without a winner. With one GPU a worker, it is GPU time: what a sweep paid to find its answer.

        ``target`` replaces the winner's value (a benchmark's best known value: scripts/cost_benchmark.py); then
        None also when no trial came within ``fraction`` of it."""
        if target is None:
            winner = self.winner
            if winner is None or winner.value is None:
                return None
            target = winner.value
        spent = 0.0
        for count, record in enumerate(sorted(self._measured, key=_start_order), start=1):
            spent += record.duration_s
            value = record.value if record.feasible else None
            if value is not None and not ranking.better(target, value, self.direction, margin=fraction):
                return spent, count
        return None  # only with a target: the winner itself is within

    def trials_since_best(self) -> int:
        """Measured trials since the ranked value of the first objective last improved (``--patience``)."""
        best: float | None = None
        since = 0
        for record in self._measured:
            value = record.value if record.feasible else None
            if value is not None and (best is None or ranking.better(value, best, self.direction)):
                best, since = value, 0
            else:
                since += 1
        return since

    def choose(self, rule: str | None = None) -> TrialRecord:
        """The trial to export: the winner, or with ``rule`` the best-ranked feasible trial that satisfies it.

        ``rule`` is an :class:`~autotune.expr.Expression` over the trial's params and ranked metrics (e.g.
        ``peak_mem_gib <= 40``). With several objectives, Pareto trials are tried before the others.
        Raises :class:`AutotuneError` when no trial qualifies.
        """
        ranked = list(self.ranked)
        if not ranked:
            raise AutotuneError(f"no feasible ok trial to choose from ({len(self._measured)} measured trials)")
        if rule is None:
            return ranked[0]
        expression = Expression(rule)
        if len(self.objectives) > 1:
            ranked.sort(key=lambda r: r.number not in self.pareto)  # stable: rank order kept within each group
        for record in ranked:
            if expression.evaluate({**record.params, **record.metrics}):
                return record
        raise AutotuneError(f"no feasible ok trial satisfies {expression.text!r} ({len(ranked)} checked)")
