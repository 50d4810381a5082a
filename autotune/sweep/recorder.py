"""Recording: a finished trial's outcome written to the study (the truth) and told to Optuna, then mirrored to MLflow.

How outcomes reach the sampler (Optuna's samplers learn only from COMPLETE trials):

- ok: COMPLETE with the objective values; a broken metric constraint makes it infeasible, and so does one its
  metrics cannot answer (a metric it did not report);
- oom, and configurations rejected by a feasibility rule: COMPLETE and infeasible (the value is a
  placeholder: the worst feasible value so far), so TPE/GP learn where the boundary is;
- pruned after warm-up: PRUNED, with the warm-up steps' throughputs as intermediate values;
- crash, timeout, compile_error, numerics, invalid: FAIL, with status and reason as attributes;
- a duplicate (a configuration measured before): its source's state, values and constraint, and
  ``autotune.duplicate_of`` naming the source, so Optuna (and optuna-dashboard) tell the same story.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import Trial, TrialState

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords, TrialKind, TrialRecord, schema
from autotune.records.trial import read_trial
from autotune.space import Space
from autotune.storage.rdb import quiet_optuna
from autotune.sweep.proposals.proposer import Proposal

if TYPE_CHECKING:
    from autotune.tracking import SweepTracker

__all__ = ["INFEASIBLE_STATUSES", "Recorder", "placeholder_values"]

INFEASIBLE_STATUSES = (Status.OOM,)  # failures that teach the sampler a boundary


def placeholder_values(records: StudyRecords) -> list[float]:
    """For infeasible trials: the worst value told for a feasible trial so far, per objective, a floor the
    samplers never prefer (0.0 before any)."""
    told = [r.first_values for r in records.measured if r.feasible and r.first_values is not None]
    if not told:
        return [0.0] * len(records.objectives)
    worst = []
    for i, (_, direction) in enumerate(records.objectives):
        column = [values[i] for values in told]
        worst.append(min(column) if direction == "maximize" else max(column))
    return worst


class Recorder:
    """Writes finished trials of one worker to the study, tells Optuna, and logs measured ones to MLflow."""

    def __init__(
        self,
        study: optuna.Study,
        space: Space,
        objectives: tuple[tuple[str, str], ...],
        records: StudyRecords,
        tracker: SweepTracker | None,
    ) -> None:
        self.study = study
        self.space = space
        self.objectives = objectives
        self.records = records
        self.tracker = tracker

    def record(self, proposal: Proposal, result: TrialResult) -> None:
        """Store ``result`` as the outcome of ``proposal`` and finish its trial."""
        if proposal.source is not None:
            self._record_duplicate(proposal, proposal.source)
            return
        trial, kind = proposal.trial, proposal.kind
        violation, unchecked = self._violation(kind, result)
        values = self._objective_values(result) if result.ok else None
        if result.ok and values is None:
            missing = [m for m, _ in self.objectives if m not in result.metrics]
            reason = f"objective metric not reported: {missing}{_closest(missing, result.metrics)}"
            result = TrialResult.failed(Status.INVALID, reason, proposal.params)
            violation = None
        elif unchecked:
            result = replace(result, reason=unchecked)  # why it broke a constraint: every view shows the reason
        self._set_attrs(trial, self._attrs(proposal, result, violation))
        logged = self._log_to_mlflow(trial, result, kind) if kind is TrialKind.MEASURED else None
        trial.set_user_attr(schema.ATTR_KIND, kind.value)  # last: the record is whole (see _set_attrs)
        with quiet_optuna():
            if result.status is Status.PRUNED and kind is TrialKind.MEASURED:
                self._tell_pruned(trial, result)
            elif violation is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                trial.set_constraint("feasibility", violation)  # what the samplers learn the boundary from
                self.study.tell(trial, values if values is not None else placeholder_values(self.records))
        if logged is not None and logged.default and self.tracker is not None:
            # The yardstick is known now: trials other workers logged before it get their speedup.
            self.records.refresh()
            self.tracker.sync(self.records)

    def _record_duplicate(self, proposal: Proposal, source: TrialRecord) -> None:
        """Answer ``proposal`` from ``source``: the same result, state, values and constraint."""
        assert source.result is not None  # a source is a measured trial
        trial = proposal.trial
        attrs = self._attrs(proposal, source.result, source.violation)
        attrs[schema.ATTR_DUPLICATE_OF] = source.number
        self._set_attrs(trial, attrs)
        trial.set_user_attr(schema.ATTR_KIND, proposal.kind.value)  # last: the record is whole (see _set_attrs)
        with quiet_optuna():
            if source.state is TrialState.COMPLETE and source.first_values is not None:
                if source.violation is not None:
                    trial.set_constraint("feasibility", source.violation)
                self.study.tell(trial, list(source.first_values))
            elif source.state is TrialState.PRUNED:
                trial.set_constraint("feasibility", -1.0)
                self.study.tell(trial, state=TrialState.PRUNED)
            else:
                self.study.tell(trial, state=TrialState.FAIL)

    @staticmethod
    def _set_attrs(trial: Trial, attrs: dict[str, Any]) -> None:
        """Every attribute but the kind, which the caller writes last: a worker killed between these writes and the
        trial's end leaves a trial without a kind, which no view counts as measured, and whose retry measures it."""
        for key, value in attrs.items():
            if key != schema.ATTR_KIND:
                trial.set_user_attr(key, value)

    def _attrs(self, proposal: Proposal, result: TrialResult, violation: float | None) -> dict[str, Any]:
        stored = result.to_dict()
        stored.pop("series", None)  # per-step series go to MLflow artifacts, not the study database
        attrs: dict[str, Any] = {
            schema.ATTR_KIND: proposal.kind.value,
            schema.ATTR_RESULT: stored,
            schema.ATTR_STATUS: result.status.value,
            schema.ATTR_REASON: result.reason,
        }
        if violation is not None:
            attrs[schema.ATTR_VIOLATION] = violation
        if result.input_bound:
            attrs[schema.ATTR_INPUT_BOUND] = True
        return attrs

    def _log_to_mlflow(self, trial: Trial, result: TrialResult, kind: TrialKind) -> TrialRecord | None:
        """Log the trial's run as the records read it, ending now; keep its run id on the trial. Returns the record
        logged (None without MLflow)."""
        if self.tracker is None:
            return None
        frozen = self.study._storage.get_trial(trial._trial_id)
        record = replace(read_trial(frozen, self.objectives), kind=kind, ended=datetime.now())
        run_id = self.tracker.log_trial(record, self.records.speedup(record), result.series)
        if run_id:
            trial.set_user_attr(schema.ATTR_MLFLOW_RUN, run_id)
        return record

    def _violation(self, kind: TrialKind, result: TrialResult) -> tuple[float | None, str | None]:
        """> 0 infeasible, <= 0 feasible, None for outcomes that are told as FAIL; with it, what could not be checked.

        A constraint the trial's metrics cannot answer (a name it did not report, a figure that is not a number)
        counts as broken: a limit nobody checked is not a limit kept, and a misspelt metric would otherwise rank
        every trial as if it held."""
        if kind is TrialKind.REJECTED or result.status in INFEASIBLE_STATUSES:
            return 1.0, None
        if not result.ok:
            return None, None
        worst, unchecked = -1.0, []
        for constraint in self.space.constraints:
            try:
                worst = max(worst, constraint.violation(result.metrics))
            except AutotuneError as exc:
                worst = max(worst, 1.0)
                unchecked.append(_unchecked(constraint, result.metrics, exc))
        return worst, "; ".join(unchecked) or None

    def _objective_values(self, result: TrialResult) -> list[float] | None:
        try:
            return [float(result.metrics[metric]) for metric, _ in self.objectives]
        except (KeyError, TypeError, ValueError):
            return None

    def _tell_pruned(self, trial: Trial, result: TrialResult) -> None:
        """Report the warm-up steps as intermediate throughputs, then tell Optuna the trial was pruned."""
        items = float(result.metrics.get("items_per_step", 0.0))
        for step, ms in enumerate(result.series.get("warmup_ms", [])):
            if ms > 0:
                trial.report(items / (ms / 1e3), step)
        trial.set_constraint("feasibility", -1.0)
        self.study.tell(trial, state=TrialState.PRUNED)


def _unchecked(constraint: Expression, metrics: dict[str, Any], error: AutotuneError) -> str:
    """Why ``constraint`` could not be checked on ``metrics``, with the reported metric its name is closest to."""
    missing = sorted(constraint.names - metrics.keys())
    if not missing:
        return f"constraint {constraint.text!r} not checked: {error}"
    reported = ", ".join(map(repr, missing))
    return f"constraint {constraint.text!r} not checked: the trial reported no {reported}{_closest(missing, metrics)}"


def _closest(missing: list[str], metrics: dict[str, Any]) -> str:
    """A hint for a misspelt metric: the reported one closest to the first missing name."""
    close = difflib.get_close_matches(missing[0], sorted(metrics), n=1) if missing else []
    return f" (did you mean {close[0]!r}?)" if close else ""
