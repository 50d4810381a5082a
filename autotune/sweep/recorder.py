"""Recording: a finished trial's outcome written to the study (the truth) and told to Optuna, then mirrored to MLflow.

How outcomes reach the sampler (Optuna's samplers learn only from COMPLETE trials):

- ok: COMPLETE with the objective values; a broken metric constraint makes it infeasible;
- oom, and configurations rejected by a feasibility rule: COMPLETE and infeasible (the value is a
  placeholder: the worst feasible value so far), so TPE/GP learn where the boundary is;
- pruned after warm-up: PRUNED, with the warm-up steps' throughputs as intermediate values;
- crash, timeout, compile_error, numerics, invalid: FAIL, with status and reason as attributes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import Trial, TrialState

from autotune import studyio
from autotune.errors import AutotuneError
from autotune.results import Status, TrialResult
from autotune.space import Space
from autotune.studyio import TrialKind
from autotune.sweep.ledger import TrialLedger
from autotune.sweep.proposals import Proposal
from autotune.sweep.storage import quiet_optuna

if TYPE_CHECKING:
    from autotune.tracking import SweepTracker

__all__ = ["INFEASIBLE_STATUSES", "Recorder", "trial_tags"]

log = logging.getLogger(__name__)

INFEASIBLE_STATUSES = (Status.OOM,)  # failures that teach the sampler a boundary


def trial_tags(trial_attrs: dict[str, Any]) -> dict[str, str]:
    """The MLflow tags a trial's child run carries besides its outcome."""
    return {"autotune.default": "true"} if trial_attrs.get(studyio.ATTR_DEFAULT) else {}


class Recorder:
    """Writes finished trials of one worker to the study, tells Optuna, and logs measured ones to MLflow."""

    def __init__(
        self,
        study: optuna.Study,
        space: Space,
        objectives: tuple[tuple[str, str], ...],
        ledger: TrialLedger,
        tracker: SweepTracker | None,
    ) -> None:
        self.study = study
        self.space = space
        self.objectives = objectives
        self.ledger = ledger
        self.tracker = tracker

    def record(self, proposal: Proposal, result: TrialResult) -> None:
        """Store ``result`` as the outcome of ``proposal`` and finish its trial."""
        trial, kind, source = proposal.trial, proposal.kind, proposal.source
        violation = source.user_attrs.get(studyio.ATTR_VIOLATION) if source else self._violation(kind, result)
        values = self._objective_values(result) if result.ok else None
        if result.ok and values is None:
            missing = [m for m, _ in self.objectives if m not in result.metrics]
            result = TrialResult.failed(Status.INVALID, f"objective metric not reported: {missing}", proposal.params)
            violation = None
        for key, value in self._attrs(proposal, result, violation).items():
            trial.set_user_attr(key, value)
        with quiet_optuna():
            if result.status is Status.PRUNED and kind is TrialKind.MEASURED:
                self._tell_pruned(trial, result)
            elif violation is None:
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                trial.set_constraint("feasibility", violation)  # what the samplers learn the boundary from
                self.study.tell(trial, values if values is not None else self.ledger.placeholder_values())

    def _attrs(self, proposal: Proposal, result: TrialResult, violation: float | None) -> dict[str, Any]:
        stored = result.to_dict()
        stored.pop("series", None)  # per-step series go to MLflow artifacts, not the study database
        attrs: dict[str, Any] = {
            studyio.ATTR_KIND: proposal.kind.value,
            studyio.ATTR_RESULT: stored,
            studyio.ATTR_STATUS: result.status.value,
            studyio.ATTR_REASON: result.reason,
        }
        if violation is not None:
            attrs[studyio.ATTR_VIOLATION] = violation
        if result.input_bound:
            attrs[studyio.ATTR_INPUT_BOUND] = True
        if proposal.source is not None:
            attrs[studyio.ATTR_DUPLICATE_OF] = proposal.source.number
        if proposal.kind is TrialKind.MEASURED and self.tracker is not None:
            tags = trial_tags(proposal.trial.user_attrs)
            run_id = self.tracker.log_trial(proposal.trial.number, result, proposal.params, tags, result.series)
            if run_id:
                attrs[studyio.ATTR_MLFLOW_RUN] = run_id
        return attrs

    def _violation(self, kind: TrialKind, result: TrialResult) -> float | None:
        """> 0 infeasible, <= 0 feasible, None for outcomes that are told as FAIL."""
        if kind is TrialKind.REJECTED or result.status in INFEASIBLE_STATUSES:
            return 1.0
        if not result.ok:
            return None
        worst = -1.0
        for constraint in self.space.constraints:
            try:
                worst = max(worst, constraint.violation(result.metrics))
            except AutotuneError as exc:
                log.warning("constraint %r not checked: %s", constraint.text, exc)
        return worst

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
