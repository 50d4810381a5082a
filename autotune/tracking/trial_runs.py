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
    SPEEDUP,
    TAG_DEFAULT,
    TAG_INPUT_BOUND,
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
    clip,
    finite_metrics,
)
from autotune.tracking.speedup import baseline, speedup, stale_speedups
from autotune.tracking.store import GuardedStore
from autotune.tracking.sweep_run import SweepRun

__all__ = ["TrialBatch", "TrialRuns", "series_json"]

_SEARCH_PAGE = 1000


@dataclass(frozen=True)
class TrialBatch:
    """The params, metrics and tags of one trial run, built (and type-checked) before any I/O.

    ``throughput`` (ok trials only) is what its ``speedup`` is computed from; ``default`` marks the
    PyTorch-default trial, whose throughput is the yardstick.
    """

    run_name: str
    params: list[Param]
    metrics: list[Metric]
    tags: list[RunTag]
    run_status: str
    throughput: float | None = None
    default: bool = False

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
        if isinstance(unit := result.metrics.get("throughput_unit"), str):
            tags[TAG_UNIT] = unit
        metrics = finite_metrics(result.metrics)
        throughput = next((m.value for m in metrics if m.key == THROUGHPUT), None) if result.ok else None
        return cls(
            run_name=trial_run_name(number, params),
            params=[Param(str(key), clip(str(value), MAX_PARAM_LEN)) for key, value in params.items()],
            metrics=metrics,
            tags=[RunTag(key, clip(value, MAX_TAG_LEN)) for key, value in tags.items()],
            run_status="FINISHED" if result.ok else "FAILED",
            throughput=throughput if throughput is not None and throughput > 0 else None,
            default=tags.get(TAG_DEFAULT) == "true",
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
        # The default trial's throughput once this process has seen its run; settled once that run is
        # complete, ok or not (a default that failed, an OOM at its batch size, is not looked up per trial).
        self._baseline: float | None = None
        self._baseline_settled = False

    def log(self, number: int, batch: TrialBatch, series_text: str | None) -> str:
        """Log trial ``number`` unless it already has a complete run; returns the run id.

        An ok trial gets ``speedup`` once the default trial's run is logged; the default's own logging
        gives it to the ok trials logged before it (by other workers).
        """
        client = self.store.client()
        parent_id = self.sweep_run.ensure()
        existing = self._find(parent_id, number)
        if existing is not None and existing.info.status in TERMINAL:
            return existing.info.run_id
        # A run left RUNNING (an outage between its creation and its end) is completed, not doubled.
        run_id = existing.info.run_id if existing is not None else self._create(parent_id, number, batch)
        metrics = batch.metrics + self._speedup_metric(parent_id, batch)
        client.log_batch(run_id, metrics=metrics, params=batch.params, tags=batch.tags)
        if series_text is not None:
            client.log_text(run_id, series_text, "series.json")
        client.set_terminated(run_id, status=batch.run_status)
        if batch.default:  # its params are the view's columns; ok trials logged before it get their speedup
            self.experiment.save_view(self.refresh_speedups(parent_id))
        return run_id

    def refresh_speedups(self, parent_id: str | None = None) -> list[Run]:
        """Give every ok trial run its ``speedup`` from the runs as they are now (re-measured medians
        included); returns the trial runs. The sweep's end calls it, so the last word is the leaderboard's."""
        runs = self.runs(parent_id or self.sweep_run.ensure())
        now = int(time.time() * 1000)
        for run_id, value in stale_speedups(runs).items():
            self.store.client().log_batch(run_id, metrics=[Metric(SPEEDUP, value, now, 0)])
        return runs

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

    def _speedup_metric(self, parent_id: str, batch: TrialBatch) -> list[Metric]:
        """``speedup`` of an ok trial whose default is known (looked up once per process), else nothing."""
        if batch.throughput is None:
            return []
        if batch.default:
            self._baseline, self._baseline_settled = batch.throughput, True
        elif not self._baseline_settled:
            self._find_baseline(parent_id)
        if self._baseline is None:
            return []
        return [Metric(SPEEDUP, speedup(batch.throughput, self._baseline), int(time.time() * 1000), 0)]

    def _find_baseline(self, parent_id: str) -> None:
        runs = self.store.client().search_runs(
            [self.experiment.id()],
            f"tags.`{TAG_PARENT}` = '{parent_id}' and tags.`{TAG_DEFAULT}` = 'true'",
            ViewType.ACTIVE_ONLY,
            max_results=10,
        )
        complete = [run for run in runs if run.info.status in TERMINAL]
        self._baseline, self._baseline_settled = baseline(complete), bool(complete)

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
