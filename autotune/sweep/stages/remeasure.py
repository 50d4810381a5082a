"""Finishing stage: measure the top k again in fresh processes; every view then ranks them by their medians.

The best of many noisy measurements is biased upwards: a configuration can lead because its one
measurement was lucky. Re-measured medians keep such outliers from winning. The medians of every
numeric metric the runs report are kept too, so a view shows the step time of the same runs as the
throughput it ranks by. A trial re-measured already (by an earlier run of this sweep, or by another
worker) is left as it is.

A re-measured median can fall below a trial measured once, which then leads on that one measurement: on an H200
(BENCHMARKS.md) GPT-2's best single figure, re-measured, came 0.08% under the informed start's, and without this
the sweep exported and rehearsed a winner it had measured once. So while the leader is measured once
(:attr:`~autotune.records.TrialRecord.measured_once`) it is re-measured too, up to k more trials, each where the
sweep's time limit leaves room for its runs and for the stages after it
(:meth:`~autotune.sweep.stages.time_limit.TimeLimit.after_remeasuring`). A leader left on one measurement (no room, k
more did not settle it, or its own re-measurement failed in every run) is said in one line. With ``finalists:`` the
stage runs twice, before and after them, so up to 2k leaders may be re-measured; a line the first run said is not said
again by the second (the same leader, left on one measurement for the same reason).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from autotune.measurement import TrialResult
from autotune.numbers import duration
from autotune.records import Remeasurement, TrialRecord, schema
from autotune.records.trial import finite
from autotune.sweep.context import SweepContext
from autotune.sweep.stages.time_limit import TimeLimit, remeasure_run_s

__all__ = ["Remeasure", "medians"]


def medians(results: Sequence[TrialResult]) -> dict[str, float]:
    """The median of each numeric metric that every one of ``results`` reports."""
    if not results:
        return {}
    names = set.intersection(*(set(r.metrics) for r in results))
    out = {}
    for name in sorted(names):
        values = [finite(r.metrics[name]) for r in results]
        if all(v is not None for v in values):
            out[name] = statistics.median(v for v in values if v is not None)
    return out


class Remeasure:
    """Re-measures the ``top`` ranked trials ``repeats`` times each, then a leader measured once (see the module
    docstring); ``limit``: the sweep's time limit (None: none), which only the leaders heed, keeping time for the
    stages after this one (the finalists' too where ``finalists_after``)."""

    name = "re-measure"

    def __init__(
        self,
        top: int,
        repeats: int,
        limit: TimeLimit | None = None,
        *,
        finalists_after: bool = False,
        said: set[str] | None = None,
    ) -> None:
        if top < 0 or repeats < 0:
            raise ValueError(f"re-measure needs top >= 0 and repeats >= 0, got {top=}, {repeats=}")
        self.top = top
        self.repeats = repeats
        self.limit = limit
        self.finalists_after = finalists_after  # the finalists stage comes after this one: the limit keeps it time
        self.said = said if said is not None else set()  # the leader lines said, shared with the run after finalists

    def again(self) -> Remeasure:
        """This stage's second run, after the finalists: it does not say again a leader line this one said."""
        return Remeasure(self.top, self.repeats, self.limit, said=self.said)

    def run(self, ctx: SweepContext) -> None:
        if self.top == 0 or self.repeats == 0:
            return
        ctx.records.reread_remeasurements()  # another process may have re-measured some already
        for record in ctx.records.ranked[: self.top]:
            if record.remeasured is None:
                self._note(ctx, record)
        self._settle_leader(ctx)

    def _settle_leader(self, ctx: SweepContext) -> None:
        """Re-measure the leader while it leads on one measurement: at most ``top`` more trials, within the limit."""
        for _ in range(self.top):
            leader = self._leader_measured_once(ctx)
            if leader is None:
                return
            why_not = self._why_not_remeasured(ctx, leader)
            if why_not is not None:
                self._say(ctx, f"trial {leader.number} leads on one measurement: {why_not}")
                return
            ctx.progress.message(f"trial {leader.number} leads on one measurement now")
            self._note(ctx, leader)
        if (leader := self._leader_measured_once(ctx)) is not None:
            leaders = "the leader" if self.top == 1 else f"each of the {self.top} leaders"
            why = self._failed(leader) or f"{leaders} re-measured after the top {self.top} fell below it"
            self._say(ctx, f"trial {leader.number} leads on one measurement: {why}")

    def _say(self, ctx: SweepContext, line: str) -> None:
        """Say ``line`` unless this stage's first run said it."""
        if line not in self.said:
            self.said.add(line)
            ctx.progress.message(line)

    @staticmethod
    def _leader_measured_once(ctx: SweepContext) -> TrialRecord | None:
        ranked = ctx.records.ranked
        return ranked[0] if ranked and ranked[0].measured_once else None

    @staticmethod
    def _failed(record: TrialRecord) -> str | None:
        """Why ``record`` is measured once though it was re-measured (never run again: it would fail again)."""
        return None if record.remeasured is None else "every run of its re-measurement failed"

    def _why_not_remeasured(self, ctx: SweepContext, leader: TrialRecord) -> str | None:
        """Why ``leader`` is not re-measured now: it was and failed, or the limit leaves no room; else None."""
        if (failed := self._failed(leader)) is not None:
            return failed
        if self.limit is None or self.limit.deadline is None:
            return None
        runs = self.repeats * remeasure_run_s(leader, ctx.records)
        left = self.limit.deadline - time.time()
        later = self.limit.after_remeasuring(ctx.records, self.finalists_after, left - runs)
        if runs + later <= left:
            return None
        after = f", and the stages after it {duration(later)}" if later else ""
        return f"re-measuring it needs about {duration(runs)}{after}: more than the sweep's time limit leaves"

    def _note(self, ctx: SweepContext, record: TrialRecord) -> None:
        """Re-measure ``record`` and store it on the study, the records and the tracker."""
        ctx.progress.message(f"re-measuring trial {record.number} ({self.repeats}x in fresh processes)")
        data = self._remeasure(ctx, record).to_dict()
        ctx.study.set_user_attr(schema.remeasured_key(record.number), data)
        ctx.records.note_remeasured(record.number, data)
        if ctx.tracker is not None and data.get("median") is not None:
            again = {f"remeasured_{ctx.records.metric}": data["median"], "remeasured_cv": data["cv"]}
            ctx.tracker.add_trial_metrics(record.number, again)

    def _remeasure(self, ctx: SweepContext, record: TrialRecord) -> Remeasurement:
        metric = ctx.records.metric
        started = time.monotonic()
        results = [r for r in self._runs(ctx, record.params) if r.ok and finite(r.metrics.get(metric)) is not None]
        values = tuple(float(r.metrics[metric]) for r in results)
        summary: dict[str, Any] = {}
        if values:
            median = statistics.median(values)
            cv = statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
            summary = {"median": median, "cv": cv, "metrics": medians(results)}
        seconds = time.monotonic() - started
        return Remeasurement(metric, values, first=record.value, seconds=seconds, **summary)

    def _runs(self, ctx: SweepContext, params: dict[str, Any]) -> list[TrialResult]:
        results = []
        for _ in range(self.repeats):
            result = ctx.executor(params, ctx.space.budget.trial_timeout_s, None)
            if not result.ok:
                ctx.progress.message(f"  re-measurement {result.status.value}: {result.reason}")
            results.append(result)
        return results
