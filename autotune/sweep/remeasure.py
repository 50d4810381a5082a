"""Finishing stage: measure the top k again in fresh processes; the leaderboard then ranks by their medians.

The best of many noisy measurements is biased upwards: a configuration can lead because its one
measurement was lucky. Re-measured medians keep such outliers from winning. A trial re-measured
already (by an earlier run of this sweep, or by another worker) is left as it is.
"""

from __future__ import annotations

import statistics
from typing import Any

from autotune import studyio
from autotune.sweep.context import SweepContext

__all__ = ["Remeasure"]


class Remeasure:
    """Re-measures the ``top`` ranked trials ``repeats`` times each."""

    name = "re-measure"

    def __init__(self, top: int, repeats: int) -> None:
        if top < 0 or repeats < 0:
            raise ValueError(f"re-measure needs top >= 0 and repeats >= 0, got {top=}, {repeats=}")
        self.top = top
        self.repeats = repeats

    def run(self, ctx: SweepContext) -> None:
        from autotune.leaderboard import leaderboard

        if self.top == 0 or self.repeats == 0:
            return
        rows = [r for r in leaderboard(ctx.study, ctx.info) if r.rank is not None and r.rank <= self.top]
        metric = ctx.info.objectives[0][0]
        trials = ctx.study.get_trials(deepcopy=False)  # numbered 0..n-1: a trial's number is its index
        study_attrs = ctx.study.user_attrs
        for row in rows:
            trial = trials[row.trial]
            if studyio.remeasured(ctx.study, trial, study_attrs) is not None:
                continue
            ctx.progress.message(f"re-measuring trial {row.trial} ({self.repeats}x in fresh processes)")
            values = self._measure(ctx, studyio.trial_params(trial), metric)
            data: dict[str, Any] = {"metric": metric, "values": values, "first": row.value}
            if values:
                median = statistics.median(values)
                cv = statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
                data.update(median=median, cv=cv)
                if ctx.tracker is not None:
                    ctx.tracker.add_trial_metrics(row.trial, {f"remeasured_{metric}": median, "remeasured_cv": cv})
            studyio.store_remeasured(ctx.study, row.trial, data)
            ctx.ledger.note_remeasured(row.trial, data)

    def _measure(self, ctx: SweepContext, params: dict[str, Any], metric: str) -> list[float]:
        values = []
        for _ in range(self.repeats):
            result = ctx.executor(params, ctx.space.budget.trial_timeout_s, None)
            if result.ok and metric in result.metrics:
                values.append(float(result.metrics[metric]))
            else:
                ctx.progress.message(f"  re-measurement {result.status.value}: {result.reason}")
        return values
