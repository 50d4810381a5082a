"""The trials' child runs under the sweep's parent run: logged idempotently, completed, found, listed."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mlflow.entities import Metric, Param, Run, RunTag, ViewType

from autotune.labels import trial_run_name
from autotune.results import TrialResult
from autotune.tracking.experiment import SweepExperiment
from autotune.tracking.schema import (
    MAX_PARAM_LEN,
    MAX_TAG_LEN,
    TAG_INPUT_BOUND,
    TAG_PARENT,
    TAG_REASON,
    TAG_ROLE,
    TAG_STATUS,
    TAG_STUDY,
    TAG_TRIAL,
    TAG_WARNINGS,
    TERMINAL,
    clip,
    finite_metrics,
)
from autotune.tracking.store import GuardedStore
from autotune.tracking.sweep_run import SweepRun

__all__ = ["TrialBatch", "TrialRuns", "series_json"]

_SEARCH_PAGE = 1000


@dataclass(frozen=True)
class TrialBatch:
    """The params, metrics and tags of one trial run, built (and type-checked) before any I/O."""

    run_name: str
    params: list[Param]
    metrics: list[Metric]
    tags: list[RunTag]
    run_status: str

    @classmethod
    def build(
        cls,
        number: int,
        result: TrialResult,
        params: Mapping[str, Any],
        extra_tags: Mapping[str, str] | None,
    ) -> TrialBatch:
        tags = {f"env.{key}": str(value) for key, value in result.env.items() if value is not None}
        tags.update({str(key): str(value) for key, value in (extra_tags or {}).items()})
        tags[TAG_STATUS] = result.status.value
        if result.reason:
            tags[TAG_REASON] = result.reason
        if result.warnings:
            tags[TAG_WARNINGS] = "; ".join(result.warnings)
        if result.input_bound:
            tags[TAG_INPUT_BOUND] = "true"
        return cls(
            run_name=trial_run_name(number, params),
            params=[Param(str(key), clip(str(value), MAX_PARAM_LEN)) for key, value in params.items()],
            metrics=finite_metrics(result.metrics),
            tags=[RunTag(key, clip(value, MAX_TAG_LEN)) for key, value in tags.items()],
            run_status="FINISHED" if result.ok else "FAILED",
        )


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

    def log(self, number: int, batch: TrialBatch, series_text: str | None) -> str:
        """Log trial ``number`` unless it already has a complete run; returns the run id."""
        client = self.store.client()
        parent_id = self.sweep_run.ensure()
        existing = self._find(parent_id, number)
        if existing is not None and existing.info.status in TERMINAL:
            return existing.info.run_id
        # A run left RUNNING (an outage between its creation and its end) is completed, not doubled.
        run_id = existing.info.run_id if existing is not None else self._create(parent_id, number, batch)
        client.log_batch(run_id, metrics=batch.metrics, params=batch.params, tags=batch.tags)
        if series_text is not None:
            client.log_text(run_id, series_text, "series.json")
        client.set_terminated(run_id, status=batch.run_status)
        return run_id

    def add_metrics(self, number: int, values: Mapping[str, float]) -> bool:
        """Add the finite ``values`` to the run of trial ``number``; False if it has none."""
        run = self._find(self.sweep_run.ensure(), number)
        if run is None:
            return False
        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, 0) for key, value in values.items() if math.isfinite(value)]
        self.store.client().log_batch(run.info.run_id, metrics=batch)
        return True

    def logged_numbers(self) -> set[int]:
        """Numbers of the trials with a complete run (none before the parent run exists)."""
        parent_id = self.sweep_run.lookup()
        if parent_id is None:
            return set()
        numbers: set[int] = set()
        token: str | None = None
        while True:
            page = self.store.client().search_runs(
                [self.experiment.id()],
                f"tags.`{TAG_PARENT}` = '{parent_id}'",
                ViewType.ACTIVE_ONLY,
                max_results=_SEARCH_PAGE,
                page_token=token,
            )
            numbers.update(_complete_trial_numbers(page))
            token = page.token
            if not token:
                break
        return numbers

    def _create(self, parent_id: str, number: int, batch: TrialBatch) -> str:
        study_name = self.experiment.study_name
        tags = {TAG_PARENT: parent_id, TAG_STUDY: study_name, TAG_ROLE: "trial", TAG_TRIAL: str(number)}
        run = self.store.client().create_run(self.experiment.id(), run_name=batch.run_name, tags=tags)
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


def _complete_trial_numbers(runs: list[Run]) -> set[int]:
    """Trial numbers of the finished (or failed, or killed) runs among ``runs``."""
    numbers: set[int] = set()
    for run in runs:
        trial = run.data.tags.get(TAG_TRIAL, "")
        if run.info.status in TERMINAL and trial.isdigit():
            numbers.add(int(trial))
    return numbers
