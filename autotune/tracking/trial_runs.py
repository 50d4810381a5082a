"""The trials' child runs under the sweep's parent run: logged idempotently, completed, found, listed."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mlflow.entities import Metric, Param, Run, RunTag, ViewType

from autotune.labels import trial_run_name
from autotune.records import StudyRecords, TrialRecord
from autotune.records.trial import ABANDONED
from autotune.tracking.experiment import SweepExperiment
from autotune.tracking.fields import (
    MAX_PARAM_LEN,
    MAX_TAG_LEN,
    SPEEDUP,
    TAG_DEFAULT,
    TAG_FEASIBLE,
    TAG_INPUT_BOUND,
    TAG_OUTCOME,
    TAG_PARENT,
    TAG_REASON,
    TAG_ROLE,
    TAG_STATUS,
    TAG_STUDY,
    TAG_TRIAL,
    TAG_UNIT,
    TAG_WARNINGS,
    TERMINAL,
    THROUGHPUT,
    WARMUP_PREFIX,
    clip,
    finite_metrics,
)
from autotune.tracking.store import GuardedStore
from autotune.tracking.sweep_run import SweepRun

__all__ = ["TrialBatch", "TrialRuns", "series_json"]

_SEARCH_PAGE = 1000
_RANKING_TAGS = (TAG_OUTCOME, TAG_FEASIBLE)  # what sync brings up to the records besides metrics


def _ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment is not None else None


@dataclass(frozen=True)
class TrialBatch:
    """The params, metrics and tags of one trial run, built (and type-checked) before any I/O: the trial's
    record rendered. ``start_ms``/``end_ms`` are the trial's own start and end, so MLflow's duration is the trial's.
    """

    number: int
    run_name: str
    params: list[Param]
    metrics: list[Metric]
    tags: list[RunTag]
    run_status: str
    start_ms: int | None = None
    end_ms: int | None = None

    @classmethod
    def build(cls, record: TrialRecord, speedup: float | None) -> TrialBatch:
        """``record`` as a run; ``speedup`` is the record model's, logged only for a feasible trial, so the
        view sorted by it never lists a trial that broke a constraint above one that did not."""
        result = record.result
        assert result is not None, f"trial {record.number} has no result to log"
        tags = {f"env.{key}": str(value) for key, value in result.env.items() if value is not None}
        tags[TAG_STATUS] = result.status.value
        tags[TAG_OUTCOME] = record.outcome
        if record.ok:
            tags[TAG_FEASIBLE] = str(record.feasible).lower()
        if record.default:
            tags[TAG_DEFAULT] = "true"
        if record.reason:
            tags[TAG_REASON] = record.reason
        if result.warnings:
            tags[TAG_WARNINGS] = "; ".join(result.warnings)
        if record.input_bound:
            tags[TAG_INPUT_BOUND] = "true"
        if isinstance(unit := result.metrics.get("throughput_unit"), str):
            tags[TAG_UNIT] = unit
        return cls(
            number=record.number,
            run_name=trial_run_name(record.number, record.params),
            params=[Param(str(key), clip(str(value), MAX_PARAM_LEN)) for key, value in record.ran_with.items()],
            metrics=finite_metrics(_metrics(record, speedup)),
            tags=[RunTag(key, clip(value, MAX_TAG_LEN)) for key, value in tags.items()],
            run_status="FINISHED" if record.ok or record.pruned else "FAILED",
            start_ms=_ms(record.started),
            end_ms=_ms(record.ended),
        )


def _metrics(record: TrialRecord, speedup: float | None) -> dict[str, Any]:
    """The measurement's metrics (a pruned trial's throughput under ``warmup_throughput``: a warm-up estimate),
    the re-measured medians where there are some, and ``speedup`` for a feasible trial."""
    metrics = dict(record.first_metrics)
    if record.pruned and THROUGHPUT in metrics:
        metrics[WARMUP_PREFIX + THROUGHPUT] = metrics.pop(THROUGHPUT)
    again = record.remeasured
    if again is not None and again.median is not None:
        metrics[f"remeasured_{again.metric}"] = again.median
        metrics["remeasured_cv"] = again.cv
    if speedup is not None and record.feasible:
        metrics[SPEEDUP] = round(speedup, 4)  # finer is below any noise
    return metrics


def series_json(series: Mapping[str, list[float]]) -> str:
    """The text of the ``series.json`` artifact."""
    # Strict JSON has no NaN/inf; a lost sample becomes null.
    return json.dumps({key: [float(v) if math.isfinite(v) else None for v in values] for key, values in series.items()})


class TrialRuns:
    """One child run per trial under the sweep's parent run, found by the tags ``mlflow.parentRunId``
    and ``autotune.trial``. Every method talks to the store: call it inside :meth:`GuardedStore.guarded`.
    """

    def __init__(self, store: GuardedStore, experiment: SweepExperiment, sweep_run: SweepRun):
        self.store = store
        self.experiment = experiment
        self.sweep_run = sweep_run

    def log(self, batch: TrialBatch, series_text: str | None) -> str:
        """Log the batch's trial unless it already has a complete run; returns the run id."""
        client = self.store.client()
        parent_id = self.sweep_run.ensure()
        existing = self._find(parent_id, batch.number)
        if existing is not None and existing.info.status in TERMINAL:
            return existing.info.run_id
        # A run left RUNNING (an outage between its creation and its end) is completed, not doubled.
        run_id = existing.info.run_id if existing is not None else self._create(parent_id, batch)
        client.log_batch(run_id, metrics=batch.metrics, params=batch.params, tags=batch.tags)
        if series_text is not None:
            client.log_text(run_id, series_text, "series.json")
        client.set_terminated(run_id, status=batch.run_status, end_time=batch.end_ms)
        return run_id

    def sync(self, records: StudyRecords, parent_id: str | None = None) -> list[Run]:
        """Bring every trial run up to the records: ``speedup`` of the feasible trials (re-measured medians
        and the default's figure included), the re-measured medians, the outcome tags; returns the trial runs.
        The sweep's end calls it, so the last word is the record model's."""
        runs = self.runs(parent_id or self.sweep_run.ensure())
        client = self.store.client()
        kept = []
        for run in runs:
            number = run.data.tags.get(TAG_TRIAL, "")
            if _abandoned(records, number):
                # Its worker died between logging the run and finishing the record: the trial counts nowhere and
                # a retry measured its configuration. Deleted, as MLflow deletes (restorable), so no view shows it.
                client.delete_run(run.info.run_id)
                continue
            kept.append(run)
            record = _record(records, number)
            if record is None or record.result is None:
                continue
            want = TrialBatch.build(record, records.speedup(record))
            metrics = [m for m in want.metrics if run.data.metrics.get(m.key) != m.value and _ranking(m.key)]
            tags = [t for t in want.tags if t.key in _RANKING_TAGS and run.data.tags.get(t.key) != t.value]
            if metrics or tags:
                client.log_batch(run.info.run_id, metrics=metrics, tags=tags)
        return kept

    def runs(self, parent_id: str) -> list[Run]:
        """Every trial run under the parent run ``parent_id``."""
        found: list[Run] = []
        token: str | None = None
        while True:
            page = self.store.client().search_runs(
                [self.experiment.id()],
                f"tags.`{TAG_PARENT}` = '{parent_id}'",
                ViewType.ACTIVE_ONLY,
                max_results=_SEARCH_PAGE,
                page_token=token,
            )
            found.extend(page)
            token = page.token
            if not token:
                return found

    def add_metrics(self, number: int, values: Mapping[str, float]) -> bool:
        """Add the finite ``values`` to the run of trial ``number``; False if it has none."""
        run = self._find(self.sweep_run.ensure(), number)
        if run is None:
            return False
        self.store.client().log_batch(run.info.run_id, metrics=finite_metrics(values))
        return True

    def logged_numbers(self) -> set[int]:
        """Numbers of the trials with a complete run (none before the parent run exists)."""
        parent_id = self.sweep_run.lookup()
        if parent_id is None:
            return set()
        return _complete_trial_numbers(self.runs(parent_id))

    def _create(self, parent_id: str, batch: TrialBatch) -> str:
        study_name = self.experiment.study_name
        tags = {TAG_PARENT: parent_id, TAG_STUDY: study_name, TAG_ROLE: "trial", TAG_TRIAL: str(batch.number)}
        run = self.store.client().create_run(
            self.experiment.id(), start_time=batch.start_ms, run_name=batch.run_name, tags=tags
        )
        return run.info.run_id

    def _find(self, parent_id: str, number: int) -> Run | None:
        runs = self.store.client().search_runs(
            [self.experiment.id()],
            f"tags.`{TAG_PARENT}` = '{parent_id}' and tags.`{TAG_TRIAL}` = '{number}'",
            ViewType.ACTIVE_ONLY,
            max_results=10,
        )
        # Several runs only after a race between two loggers: prefer a complete one.
        return min(runs, key=lambda run: run.info.status not in TERMINAL, default=None)


def _trial(records: StudyRecords, number: str) -> TrialRecord | None:
    """The trial of a run's ``autotune.trial`` tag, or None."""
    if not number.isdigit():
        return None
    try:
        return records.trial(int(number))
    except KeyError:
        return None


def _record(records: StudyRecords, number: str) -> TrialRecord | None:
    """The measured trial of a run's ``autotune.trial`` tag, or None."""
    record = _trial(records, number)
    return record if record is not None and record.measured else None


def _abandoned(records: StudyRecords, number: str) -> bool:
    """Whether the run's trial was abandoned: its worker died before its record was whole (never a running one)."""
    record = _trial(records, number)
    return record is not None and record.outcome == ABANDONED


def _ranking(key: str) -> bool:
    """The metrics the record model may change after a trial was logged: speedup and re-measured medians."""
    return key == SPEEDUP or key.startswith("remeasured_")


def _complete_trial_numbers(runs: list[Run]) -> set[int]:
    """Trial numbers of the finished (or failed, or killed) runs among ``runs``."""
    numbers: set[int] = set()
    for run in runs:
        trial = run.data.tags.get(TAG_TRIAL, "")
        if run.info.status in TERMINAL and trial.isdigit():
            numbers.add(int(trial))
    return numbers
