"""One trial as every view sees it: :class:`TrialRecord`, parsed once from its Optuna trial.

A record says what the trial was (measured, a duplicate, rejected, still running ...), how it ended,
and its numbers twice: as first measured (what Optuna was told) and as ranked. The ranked value of an
objective is the median of the trial's re-measurements in fresh processes where the sweep made them,
else its one measurement; the other metrics follow the same rule (medians of the re-measured runs
where those were kept), so a view never sets a median beside a first measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from autotune.measurement import MFU_METRIC, MODEL_FLOPS_METRIC, TFLOPS_METRIC, Status, TrialResult
from autotune.records import schema
from autotune.records.rehearsed_start import Rehearsal
from autotune.records.schema import TrialKind

__all__ = ["Remeasurement", "TrialRecord", "finite", "is_default", "is_informed", "is_twin", "read_trial"]

# Results the recorder never finishes as FAIL: on a failed trial, the record was cut short (the worker died).
_NEVER_FAIL = frozenset({Status.OK.value, Status.PRUNED.value, Status.OOM.value})
# What a record that has no result says of itself.
RUNNING, WAITING, ABANDONED = "running", "waiting", "abandoned"
INFEASIBLE = "infeasible"  # an ok trial that broke a constraint
# The metric a replayed result carries its recorded trial's duration in (autotune.search.replaytimes).
REPLAYED_DURATION = "duration_s"


def finite(value: Any) -> float | None:
    """A finite float, or None (a missing metric, a string, a bool, NaN: nothing to rank by)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class Remeasurement:
    """A trial's configuration measured again, ``len(values)`` times, each in a fresh process.

    ``metric`` is the objective re-measured, ``values`` its figures, ``median`` and ``cv`` theirs;
    ``metrics`` the median of every numeric metric those runs reported, and ``seconds`` their wall
    time together (both absent in studies written before they were kept).
    """

    metric: str
    values: tuple[float, ...]
    median: float | None = None
    cv: float | None = None
    seconds: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    first: float | None = None  # the trial's own measurement, as it was when re-measured

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], metric: str) -> Remeasurement:
        values = tuple(v for v in (finite(x) for x in data.get("values") or ()) if v is not None)
        medians = {str(k): v for k, raw in (data.get("metrics") or {}).items() if (v := finite(raw)) is not None}
        return cls(
            metric=str(data.get("metric", metric)),
            values=values,
            median=finite(data.get("median")),
            cv=finite(data.get("cv")),
            seconds=finite(data.get("seconds")),
            metrics=medians,
            first=finite(data.get("first")),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"metric": self.metric, "values": list(self.values), "first": self.first}
        extra = {"median": self.median, "cv": self.cv, "seconds": self.seconds}
        data |= {key: value for key, value in extra.items() if value is not None}
        if self.metrics:
            data["metrics"] = dict(self.metrics)
        return data

    def value_of(self, metric: str) -> float | None:
        """The re-measured median of ``metric``, or None when it was not re-measured."""
        if metric == self.metric and self.median is not None:
            return self.median
        return self.metrics.get(metric)


@dataclass(frozen=True)
class TrialRecord:
    """One Optuna trial of an autotune study, read once (see the module docstring).

    ``kind`` is None for a trial that has no outcome: running, waiting in the queue, interrupted by a
    signal, or abandoned (its worker died; a copy of it was queued). ``objectives`` are the ranked
    values of the study's objectives, None unless the trial ended ok; ``first_values`` the values told
    to Optuna (a placeholder for an infeasible trial), None unless COMPLETE.
    """

    number: int
    state: TrialState
    kind: TrialKind | None
    params: dict[str, Any]
    result: TrialResult | None
    status: str | None
    reason: str | None
    default: bool
    violation: float | None
    objectives: tuple[float | None, ...]
    first_values: tuple[float, ...] | None
    remeasured: Remeasurement | None = None
    duplicate_of: int | None = None
    finalist_of: int | None = None
    worker: str | None = None
    gpu: str | None = None
    started: datetime | None = None
    ended: datetime | None = None
    mlflow_run_id: str | None = None
    trial_id: int | None = None  # the storage's id of the trial: for a writer that must act on it (fail, requeue)
    # the informed start: what an expert would try first here (autotune.sweep.proposals.informed_start)
    informed: bool = False
    twin: bool = False  # the informed start's twin (schema.ATTR_TWIN)
    prepared_s: float = 0.0  # device seconds spent preparing it before it started (schema.ATTR_PREPARED_S)
    rehearsed: Rehearsal | None = None  # its production start, rehearsed (autotune.records.rehearsed_start)

    # -- what the trial was --------------------------------------------------------------------
    @property
    def measured(self) -> bool:
        """Measured (or replayed) with an outcome: what costs GPU time and counts in the budget."""
        return self.kind is TrialKind.MEASURED and self.result is not None

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok

    @property
    def feasible(self) -> bool:
        """Ended ok, broke no constraint, and reported every objective: a trial that can rank."""
        within = self.violation is None or self.violation <= 0
        return self.ok and within and all(v is not None for v in self.objectives)

    @property
    def outcome(self) -> str:
        """How it ended, as every view names it: ok, infeasible, pruned, oom, crash ..., interrupted,
        or for a trial without an outcome: running, waiting, abandoned."""
        if self.kind is not None and self.result is not None:
            if self.result.ok and not self.feasible:
                return INFEASIBLE
            return self.result.status.value
        if self.status == schema.INTERRUPTED:
            return schema.INTERRUPTED
        return {TrialState.RUNNING: RUNNING, TrialState.WAITING: WAITING}.get(self.state, ABANDONED)

    @property
    def pruned(self) -> bool:
        return self.result is not None and self.result.status is Status.PRUNED

    # -- its numbers ---------------------------------------------------------------------------
    @property
    def value(self) -> float | None:
        """The first objective's ranked value (None unless ok)."""
        return self.objectives[0] if self.objectives else None

    @property
    def ran_with(self) -> dict[str, Any]:
        """The params as every view shows them: the configuration's, with the values the trial resolved them to,
        and the batch size it used where the space does not tune it (the workload's default, else unseen).

        :attr:`params` stays the configuration as proposed: what a repeat is recognised by and what runs again.
        """
        if self.result is None:
            return dict(self.params)
        resolved = self.result.params
        shown = {key: resolved.get(key, value) for key, value in self.params.items()}
        if "batch_size" not in shown and resolved.get("batch_size") is not None:
            shown["batch_size"] = resolved["batch_size"]
        return shown

    @property
    def measured_once(self) -> bool:
        """True while :attr:`value` is the trial's one measurement: not re-measured, or re-measured with no figure
        to show for it (every run failed)."""
        again = self.remeasured
        return again is None or again.value_of(again.metric) is None or not again.values

    @property
    def value_is(self) -> str:
        """Which figure :attr:`value` is: ``median of 3 re-measurements`` or ``one measurement``."""
        again = self.remeasured
        if again is None or self.measured_once:
            return "one measurement"
        return f"median of {len(again.values)} re-measurements"

    @property
    def metrics(self) -> dict[str, Any]:
        """The trial's metrics as ranked: its measurement, with the re-measured medians in place where kept."""
        metrics = dict(self.result.metrics) if self.result is not None else {}
        if self.remeasured is not None and self.ok:
            metrics |= dict(self.remeasured.metrics)
            if self.remeasured.median is not None:
                metrics[self.remeasured.metric] = self.remeasured.median
        return metrics

    # -- how far from the GPU's limit (autotune.trial.flops) ------------------------------------
    @property
    def model_flops_per_step(self) -> float | None:
        """The model FLOPs of one training step, forward and backward; None where they were not counted."""
        return finite(self.metrics.get(MODEL_FLOPS_METRIC)) if self.ok else None

    @property
    def tflops(self) -> float | None:
        """The TFLOP/s its training step achieved, as ranked (the re-measured median where there is one); None
        unless it ended ok with its model FLOPs counted (a kernel workload's TFLOP/s are its throughput)."""
        if self.model_flops_per_step is None:
            return None
        return finite(self.metrics.get(TFLOPS_METRIC))

    @property
    def mfu(self) -> float | None:
        """Its model FLOPs utilisation, a fraction of the GPU's dense peak for the precision it ran in, as ranked;
        None unless it ended ok on a GPU with a known peak."""
        return finite(self.metrics.get(MFU_METRIC)) if self.ok else None

    @property
    def first_metrics(self) -> dict[str, Any]:
        """The metrics of the trial's own measurement."""
        return dict(self.result.metrics) if self.result is not None else {}

    @property
    def compiled(self) -> bool:
        """It ran under ``torch.compile`` (the knob the trial resolved, else the one it was given)."""
        ran = self.result.params if self.result is not None else {}
        mode = ran.get("compile_mode", self.params.get("compile_mode"))
        return mode not in (None, "none")

    @property
    def compile_artifacts(self) -> dict[str, Any] | None:
        """What the trial saved of its compile (:mod:`autotune.trial.artifacts_io`): its file in the study's cache
        folder, sha256, size and env; None when it saved none (eager, failed, or swept before trials saved them)."""
        saved = self.result.extra.get("compile_artifacts") if self.result is not None else None
        return dict(saved) if isinstance(saved, Mapping) else None

    @property
    def start_rehearsal(self) -> Rehearsal | None:
        """The rehearsal of this trial's production start from its own compile artifacts (None: not rehearsed, or
        from other artifacts than those it records)."""
        own, again = self.compile_artifacts, self.rehearsed
        if own is None or again is None or again.of_sha256 != own.get("sha256"):
            return None
        return again

    @property
    def rehearsable(self) -> bool:
        """Whether its production start is still to be rehearsed: it saved compile artifacts, and no rehearsal of them
        ended ok (one that failed is tried again, by a resumed sweep)."""
        again = self.start_rehearsal
        return self.compile_artifacts is not None and (again is None or not again.ok)

    @property
    def shipped_artifacts(self) -> dict[str, Any] | None:
        """The compile artifacts that ship with this trial's configuration: what the rehearsal of its production
        start saved, where one ran ok and saved some; else the trial's own (:attr:`compile_artifacts`)."""
        again = self.start_rehearsal
        if again is not None and again.ok and again.artifacts is not None:
            return dict(again.artifacts)
        return self.compile_artifacts

    @property
    def compile_s(self) -> float:
        """Seconds it spent compiling: its ``compile_s`` when it compiled (an eager trial's warm-up above its
        steady step is not compiling), never more than the trial lasted."""
        seconds = finite(self.first_metrics.get("compile_s")) if self.compiled else None
        if seconds is None:
            return 0.0
        duration = self.duration_s
        return min(seconds, duration) if duration else seconds

    @property
    def duration_s(self) -> float:
        """From its start to its record (0 while it runs), plus what preparing it took before it started
        (:attr:`prepared_s`). A replayed trial answers in an instant: where its record carries the recorded trial's
        duration (:mod:`autotune.search.replaytimes`), that is its duration."""
        replayed = self._replayed_duration_s()
        if replayed is not None:
            return replayed
        if self.started is None or self.ended is None:
            return 0.0
        return max(0.0, (self.ended - self.started).total_seconds()) + self.prepared_s

    def _replayed_duration_s(self) -> float | None:
        if self.result is None or not self.result.env.get("replay"):
            return None
        seconds = finite(self.result.metrics.get(REPLAYED_DURATION))
        return max(0.0, seconds) if seconds is not None else None

    @property
    def input_bound(self) -> bool:
        return self.result is not None and self.result.input_bound

    def with_remeasurement(self, remeasured: Remeasurement, objectives: Sequence[tuple[str, str]]) -> TrialRecord:
        """This record ranked by ``remeasured`` from now on."""
        return replace(self, remeasured=remeasured, objectives=_objectives(self.result, remeasured, objectives))

    def with_rehearsal(self, rehearsed: Rehearsal) -> TrialRecord:
        """This record with its production start rehearsed."""
        return replace(self, rehearsed=rehearsed)


def _objectives(
    result: TrialResult | None, remeasured: Remeasurement | None, objectives: Sequence[tuple[str, str]]
) -> tuple[float | None, ...]:
    """Each objective's ranked value: re-measured median, else the measurement; None unless ok."""
    if result is None or not result.ok:
        return tuple(None for _ in objectives)
    values = []
    for metric, _ in objectives:
        again = remeasured.value_of(metric) if remeasured is not None else None
        values.append(again if again is not None else finite(result.metrics.get(metric)))
    return tuple(values)


def is_default(trial: FrozenTrial) -> bool:
    """Whether ``trial`` is (or is a queued copy of) the PyTorch-default configuration: for code that holds
    Optuna's trial rather than its record (a sampler's view, a requeue), without parsing its result."""
    return bool(trial.user_attrs.get(schema.ATTR_DEFAULT))


def is_informed(trial: FrozenTrial) -> bool:
    """Whether ``trial`` is (or is a queued copy of) the informed start, for code that holds Optuna's trial."""
    return bool(trial.user_attrs.get(schema.ATTR_INFORMED))


def is_twin(trial: FrozenTrial) -> bool:
    """Whether ``trial`` is (or is a queued copy of) the informed start's twin, for code that holds Optuna's trial."""
    return bool(trial.user_attrs.get(schema.ATTR_TWIN))


def read_trial(
    trial: FrozenTrial,
    objectives: Sequence[tuple[str, str]],
    remeasured: Mapping[str, Any] | None = None,
    rehearsed: Mapping[str, Any] | None = None,
) -> TrialRecord:
    """Parse ``trial`` of a study with these ``(metric, direction)`` objectives; ``remeasured`` and ``rehearsed``
    are its re-measurement and the rehearsal of its start as stored on the study, if any."""
    attrs = trial.user_attrs
    data = attrs.get(schema.ATTR_RESULT)
    result = TrialResult.from_dict(data) if data else None
    kind = attrs.get(schema.ATTR_KIND)
    if trial.state is TrialState.FAIL and data and data.get("status") in _NEVER_FAIL:
        kind = None  # its worker died between writing the result and finishing the trial: retried, not counted
    stored_again = remeasured or attrs.get(schema.ATTR_REMEASURED)
    again = Remeasurement.from_dict(stored_again, objectives[0][0]) if stored_again and result is not None else None
    complete = trial.state is TrialState.COMPLETE and trial.values is not None
    return TrialRecord(
        number=trial.number,
        state=trial.state,
        kind=TrialKind(kind) if kind else None,
        params=dict(attrs.get(schema.ATTR_PARAMS, trial.params)),
        result=result,
        status=attrs.get(schema.ATTR_STATUS),
        reason=attrs.get(schema.ATTR_REASON) or (result.reason if result is not None else None),
        default=bool(attrs.get(schema.ATTR_DEFAULT)),
        violation=finite(attrs.get(schema.ATTR_VIOLATION)),
        objectives=_objectives(result, again, objectives),
        first_values=tuple(trial.values) if complete else None,
        remeasured=again,
        duplicate_of=attrs.get(schema.ATTR_DUPLICATE_OF),
        finalist_of=attrs.get(schema.ATTR_FINALIST_OF),
        worker=attrs.get(schema.ATTR_WORKER),
        gpu=attrs.get(schema.ATTR_GPU),
        started=_taken_up(trial.datetime_start, attrs),
        ended=trial.datetime_complete,
        mlflow_run_id=attrs.get(schema.ATTR_MLFLOW_RUN),
        trial_id=trial._trial_id,
        informed=bool(attrs.get(schema.ATTR_INFORMED)),
        twin=bool(attrs.get(schema.ATTR_TWIN)),
        prepared_s=max(0.0, finite(attrs.get(schema.ATTR_PREPARED_S)) or 0.0),
        rehearsed=Rehearsal.from_dict(rehearsed) if rehearsed and result is not None else None,
    )


def _taken_up(started: datetime | None, attrs: Mapping[str, Any]) -> datetime | None:
    """When the trial began to run: Optuna's start, or after it stood parked (schema.ATTR_PARKED_S) that much later."""
    parked = finite(attrs.get(schema.ATTR_PARKED_S))
    return started + timedelta(seconds=parked) if started is not None and parked else started
