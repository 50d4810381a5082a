"""The record model: a study read once into typed trial records, and every figure the views show.

- ``schema``: what autotune keeps on Optuna trials and studies (attribute names, trial kinds, the
  study's info). Writers take the names from here; only this package reads them back.
- ``trial``: :class:`TrialRecord`, one trial parsed: its kind, outcome, params, first and ranked values,
  feasibility, worker, start and end.
- ``rehearsal``: :class:`Rehearsal`, a trial's production start run once more as production runs it.
- ``ranking``: which trial is better, speedup over the default, the Pareto front.
- ``timeshares``: where the trial time went.
- ``sweepstate``: :class:`SweepState`, what the study says of its sweeps (budget, finished, warm start).
- ``study``: :class:`StudyRecords`, the study's records read incrementally; ``answers``: what it answers from
  them, for every view to render (:class:`StudyAnswers`): the ranked trials, the winner, speedups, the tally, the
  time shares, the pick of an export rule.

It may import optuna, :mod:`autotune.measurement`, :mod:`autotune.expr` and :mod:`autotune.errors`; nothing
that runs trials or renders views (and the space package only to rebuild a study's space on demand).
"""

from autotune.records.answers import StudyAnswers, Tally
from autotune.records.rehearsed_start import Rehearsal
from autotune.records.schema import StudyInfo, TrialKind, load_study_info
from autotune.records.study import StudyRecords, params_key
from autotune.records.sweepstate import SweepState
from autotune.records.timeshares import TimeShares
from autotune.records.trial import Remeasurement, TrialRecord

__all__ = [
    "Rehearsal",
    "Remeasurement",
    "StudyAnswers",
    "StudyInfo",
    "StudyRecords",
    "SweepState",
    "Tally",
    "TimeShares",
    "TrialKind",
    "TrialRecord",
    "load_study_info",
    "params_key",
]
