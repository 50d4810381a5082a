"""A worker's running account of its study: what each proposal asks, without re-reading the study.

Every proposal needs the same facts: was this configuration measured already (or is another worker
measuring it now), how many trials count in the budget, the best value so far (the pruning bound,
the progress line, patience), the worst feasible values (what an infeasible trial is told). Read
from scratch, each is a pass over every trial, and a sweep of hundreds of trials paid several such
passes per proposal (0.2-0.3 s per proposal at 80 trials on SQLite, growing with the study).

:meth:`TrialLedger.refresh` is one read of the storage, and Optuna's cached storage makes it
incremental (it fetches only the trials that are new or were unfinished at the last read). Each
finished trial is then taken in once: a finished trial never changes (Optuna refuses updates to
it), so what the ledger derived from it stays true. Other workers' trials arrive the same way, so
several workers on one study still see each other's work at every refresh.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune import studyio
from autotune.leaderboard import objective_value, speedup
from autotune.results import Status, TrialResult
from autotune.studyio import Tally, TrialKind

__all__ = ["MeasuredTrial", "TrialLedger", "params_key"]

_Key = tuple[tuple[str, Any], ...]


def params_key(params: Mapping[str, Any]) -> _Key:
    """A hashable form of decoded params that is equal exactly when the dicts are (``==``)."""
    return tuple(sorted(params.items()))


@dataclass(frozen=True)
class MeasuredTrial:
    """A finished measured trial, parsed once: its result and its first objective's feasible value."""

    trial: FrozenTrial
    result: TrialResult
    value: float | None  # None unless ok, within every constraint and reporting the metric

    @property
    def number(self) -> int:
        return self.trial.number


class TrialLedger:
    """Incremental view of a study's trials for one worker (see the module docstring).

    ``objectives`` are the study's ``(metric, direction)`` pairs. Re-measured medians are read
    once, when the ledger is made, and from :meth:`note_remeasured`: they come from finishing
    stages, which run after the proposal loop.
    """

    def __init__(self, study: optuna.Study, objectives: Sequence[tuple[str, str]]) -> None:
        self.study = study
        self.objectives = tuple(objectives)
        self.running: list[FrozenTrial] = []
        self.total = 0  # trials of every state and kind
        self._seen: set[int] = set()
        self._measured: list[MeasuredTrial] = []  # in trial-number order
        self._by_params: dict[_Key, FrozenTrial] = {}
        self._statuses: dict[str, int] = {}
        self._worst: list[float] | None = None
        self._study_attrs = study.user_attrs  # re-measurements stored before this worker started
        self._remeasured: dict[int, dict[str, Any]] = {}
        self.refresh()

    # -- reading -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Take in what changed in the study since the last refresh (one storage read)."""
        trials = self.study.get_trials(deepcopy=False)
        self.total = len(trials)
        self.running = [t for t in trials if t.state is TrialState.RUNNING]
        for trial in trials:
            if trial.number not in self._seen and trial.state in studyio.FINISHED_STATES:
                self._seen.add(trial.number)
                self._take_in(trial)

    def _take_in(self, trial: FrozenTrial) -> None:
        violation = trial.user_attrs.get(studyio.ATTR_VIOLATION, 0.0)
        if trial.state is TrialState.COMPLETE and trial.values and violation <= 0:
            self._note_feasible_values(trial.values)
        if studyio.trial_kind(trial) is not TrialKind.MEASURED:
            return
        result = studyio.trial_result(trial)
        if result is None:
            return
        metric = self.objectives[0][0]
        entry = MeasuredTrial(trial, result, studyio.feasible_value(trial, metric))
        bisect.insort(self._measured, entry, key=lambda m: m.number)
        status = str(trial.user_attrs.get(studyio.ATTR_STATUS))
        self._statuses[status] = self._statuses.get(status, 0) + 1
        key = params_key(studyio.trial_params(trial))
        if key not in self._by_params or trial.number < self._by_params[key].number:
            self._by_params[key] = trial

    def _note_feasible_values(self, values: Sequence[float]) -> None:
        if self._worst is None:
            self._worst = list(values)
            return
        for i, (value, (_, direction)) in enumerate(zip(values, self.objectives, strict=True)):
            worse = value < self._worst[i] if direction == "maximize" else value > self._worst[i]
            if worse:
                self._worst[i] = value

    def note_remeasured(self, number: int, data: Mapping[str, Any]) -> None:
        """A finishing stage re-measured trial ``number``: rank it by the median from now on."""
        self._remeasured[number] = dict(data)

    # -- what proposals ask ------------------------------------------------------------------------
    @property
    def measured(self) -> list[MeasuredTrial]:
        """The measured trials (what the budget counts), in trial-number order."""
        return self._measured

    def tally(self) -> Tally:
        """How the measured trials ended (every worker's)."""
        pruned = self._statuses.get(Status.PRUNED.value, 0)
        failed = len(self._measured) - pruned - self._statuses.get(Status.OK.value, 0)
        return Tally(len(self._measured), pruned, failed)

    def measured_with(self, params: Mapping[str, Any], number: int) -> FrozenTrial | None:
        """A finished measured trial with exactly these params, else one running now (not ``number``), else None."""
        finished = self._by_params.get(params_key(params))
        if finished is not None and finished.number != number:
            return finished
        running = (
            t for t in self.running if t.number != number and t.user_attrs.get(studyio.ATTR_PARAMS) == dict(params)
        )
        return next(running, None)

    def placeholder_values(self) -> list[float]:
        """For infeasible trials: the worst feasible value so far, a floor the samplers never prefer."""
        return list(self._worst) if self._worst is not None else [0.0] * len(self.objectives)

    def best_feasible(self) -> float | None:
        """The best measured feasible value of the first objective, as first measured."""
        values = [m.value for m in self._measured if m.value is not None]
        if not values:
            return None
        return max(values) if self.objectives[0][1] == "maximize" else min(values)

    def trials_since_best(self) -> int:
        """Measured trials since the first objective last improved (feasible trials only)."""
        sign = 1.0 if self.objectives[0][1] == "maximize" else -1.0
        best, since = None, 0
        for entry in self._measured:
            if entry.value is not None and (best is None or sign * entry.value > best):
                best, since = sign * entry.value, 0
            else:
                since += 1
        return since

    def leader(self) -> tuple[MeasuredTrial, float, float | None] | None:
        """The leaderboard's rank 1 (re-measured medians rank), its value, and its speedup over the default."""
        sign = -1.0 if self.objectives[0][1] == "maximize" else 1.0
        ranked = [(v, m) for m in self._measured if m.value is not None and (v := self._ranking_value(m)) is not None]
        if not ranked:
            return None
        value, best = min(ranked, key=lambda pair: (sign * pair[0], pair[1].number))
        default = next((m for m in self._measured if m.trial.user_attrs.get(studyio.ATTR_DEFAULT)), None)
        baseline = self._ranking_value(default) if default is not None and default.result.ok else None
        return best, value, speedup(value, baseline, self.objectives[0][1])

    def _ranking_value(self, entry: MeasuredTrial) -> float | None:
        """The value the leaderboard ranks by: the re-measured median, else the first measurement."""
        again = self._remeasured.get(entry.number) or studyio.remeasured(self.study, entry.trial, self._study_attrs)
        return objective_value(self.objectives[0][0], entry.result, again)
