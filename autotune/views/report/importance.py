"""Which knobs the first objective depends on: optuna.importance over the real knob values.

Optuna's own params hold an ordinal's index and leave out infeasible trials' real objective (a sweep
tells Optuna a placeholder for those), so the importances are computed on an in-memory study rebuilt
from the feasible ok trials: numeric knobs as ranges (order kept), the rest as categories, the
objective as the leaderboard ranks it.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from autotune.views.report.data import ReportData, TrialPoint

__all__ = ["knob_importances", "varying_knobs"]

MIN_TRIALS = 3  # fewer than this and there is nothing to learn which knob mattered


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def varying_knobs(points: list[TrialPoint]) -> list[str]:
    """Knobs that took more than one value among ``points``, in first-seen order."""
    names = list(dict.fromkeys(k for p in points for k in p.params))
    return [k for k in names if len({repr(p.params.get(k)) for p in points}) > 1]


def _distribution(values: list[Any]) -> BaseDistribution:
    if all(_is_number(v) for v in values):
        return FloatDistribution(float(min(values)), float(max(values)))
    return CategoricalDistribution(sorted({repr(v) for v in values}))


def _encode(value: Any, distribution: BaseDistribution) -> Any:
    return float(value) if isinstance(distribution, FloatDistribution) else repr(value)


def _feasible_study(data: ReportData, knobs: list[str]) -> optuna.Study:
    points = [p for p in data.points if p.feasible and p.value is not None]
    distributions = {k: _distribution([p.params.get(k) for p in points]) for k in knobs}
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # not "A new study created in memory" in the report's output
    try:
        study = optuna.create_study(direction="maximize" if data.direction == "maximize" else "minimize")
    finally:
        optuna.logging.set_verbosity(verbosity)
    for p in points:
        params = {k: _encode(p.params.get(k), d) for k, d in distributions.items()}
        study.add_trial(optuna.trial.create_trial(value=p.value, params=params, distributions=distributions))
    return study


def knob_importances(data: ReportData, seed: int = 0) -> dict[str, float]:
    """Knob -> fANOVA importance of the first objective (summing to 1), most important first; empty when
    fewer than :data:`MIN_TRIALS` feasible trials or no knob varied among them."""
    feasible = [p for p in data.points if p.feasible and p.value is not None]
    knobs = varying_knobs(feasible)
    if len(feasible) < MIN_TRIALS or not knobs:
        return {}
    study = _feasible_study(data, knobs)
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=seed)
    return dict(optuna.importance.get_param_importances(study, evaluator=evaluator))
