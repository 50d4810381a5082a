"""The sweep's one door to MLflow: :class:`SweepTracker` puts every call through the outage guard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from autotune.records import StudyRecords, TrialRecord
from autotune.tracking import description
from autotune.tracking.experiment import SweepExperiment
from autotune.tracking.fields import (
    CHANGED_PARAM_TAG_PREFIX,
    MAX_TAG_LEN,
    TAG_NOTE,
    TAG_REASON,
    TERMINAL,
    clip,
    finite_metrics,
)
from autotune.tracking.store import GuardedStore, resolve_tracking_uri
from autotune.tracking.sweep_run import SweepRun
from autotune.tracking.trial_runs import TrialBatch, TrialRuns, series_json
from autotune.tracking.ui import runs_link

__all__ = ["SweepTracker"]


class SweepTracker:
    """Logs one sweep (an Optuna study) to MLflow: experiment ``autotune/<study>``, a parent run for
    the sweep and a child run per trial.

    Every public method swallows store outages: it returns ``None`` (or does nothing), warns once per
    outage, and after a failure skips calls for ``retry_after_s`` so that a sweep of fast trials does
    not pay a timeout per trial while the server is down. Catch-up is the caller's job: after a
    successful call, log the study's finished trials missing from :meth:`logged_trial_numbers`;
    :meth:`log_trial` is idempotent, so logging a trial twice is harmless.

    Safe to share between threads; several trackers (processes, hosts) may log the same study.
    """

    def __init__(
        self,
        study_name: str,
        tracking_uri: str | None = None,
        *,
        retry_after_s: float = 30.0,
        objective: str = "throughput",
    ):
        """``objective`` is the study's first objective metric: the saved view shows it and its re-measured median."""
        if not study_name:
            raise ValueError(f"study_name must not be empty, got {study_name=}")
        self._store = GuardedStore(resolve_tracking_uri(tracking_uri), retry_after_s)
        self._experiment = SweepExperiment(self._store, study_name)
        self._sweep_run = SweepRun(self._store, self._experiment)
        self._trial_runs = TrialRuns(self._store, self._experiment, self._sweep_run)
        self.study_name = study_name
        self._objective = objective
        self.experiment_name = self._experiment.name
        self.tracking_uri = self._store.tracking_uri

    @property
    def retry_after_s(self) -> float:
        """Seconds to skip calls after a failed one while MLflow is unreachable."""
        return self._store.retry_after_s

    @retry_after_s.setter
    def retry_after_s(self, value: float) -> None:
        self._store.retry_after_s = value

    @property
    def parent_run_id(self) -> str | None:
        """The sweep's parent run id, once known."""
        return self._sweep_run.run_id

    @property
    def reachable(self) -> bool:
        """False from a failed store call until the next successful one."""
        return self._store.reachable

    @property
    def ui_link(self) -> str | None:
        """The experiment's runs page in MLflow's UI, as the saved view "autotune leaderboard" (trials by
        speedup), relative to the UI's root (``http://127.0.0.1:5000/`` + it); None before the experiment
        was looked up."""
        experiment_id = self._experiment.known_id
        return runs_link(experiment_id) if experiment_id is not None else None

    def start(self, params: Mapping[str, str], space_path: Path | None = None) -> str | None:
        """Find or create the sweep's parent run, log ``params`` and the space file, mark it RUNNING.

        A resumed sweep reuses its parent run (tags ``autotune.study`` and ``autotune.role=sweep``).
        MLflow params are immutable, so only new ones are logged; a changed value goes to the tag
        ``autotune.param.<key>`` instead. The experiment is marked as a model-training experiment and
        gets (or updates) the saved view "autotune leaderboard". Returns the parent run id, or ``None``
        if MLflow is unreachable (later calls retry the start).
        """
        space_text = space_path.read_text() if space_path is not None else None
        self._sweep_run.prepare(params, space_text)
        return self._store.guarded("starting the sweep run", self._start)

    def log_trial(
        self, record: TrialRecord, speedup: float | None, series: Mapping[str, list[float]] | None = None
    ) -> str | None:
        """Log one measured trial's record as a child run and return its id (``None`` if MLflow is unreachable).

        Params are the trial's params; metrics the finite numeric entries of its result's metrics (a pruned
        trial's throughput as ``warmup_throughput``), its re-measured medians and, for a feasible trial,
        ``speedup`` (the record model's); tags its status and outcome, reason, number, env fingerprint
        (``env.<key>``), all in one ``log_batch``; the run starts and ends when the trial did. ``series``
        (e.g. step times) becomes the artifact ``series.json``. The run ends FINISHED for an ok or pruned
        trial, FAILED otherwise. Idempotent: a trial already logged under this sweep is not logged again,
        and one left half-logged by an outage is completed.
        """
        batch = TrialBatch.build(record, speedup)
        series_text = series_json(series) if series else None
        return self._store.guarded(f"logging trial {record.number}", lambda: self._trial_runs.log(batch, series_text))

    def sync(self, records: StudyRecords) -> None:
        """Bring the trial runs' ``speedup``, re-measured medians and outcome tags up to ``records``, and the
        saved view's columns with them (e.g. once the default trial, the yardstick, is measured)."""
        self._store.guarded("updating the trial runs", lambda: self._sync(records))

    def add_trial_metrics(self, number: int, metrics: Mapping[str, float]) -> bool:
        """Add metrics (e.g. a re-measurement) to the child run of trial ``number``; False if not possible."""
        return bool(
            self._store.guarded(f"metrics of trial {number}", lambda: self._trial_runs.add_metrics(number, metrics))
        )

    def logged_trial_numbers(self) -> set[int] | None:
        """Numbers of the trials with a complete child run (``None`` if MLflow is unreachable).

        A run left RUNNING by an outage does not count: logging that trial again completes it.
        """
        return self._store.guarded("listing logged trials", self._trial_runs.logged_numbers)

    def finish(
        self,
        records: StudyRecords,
        metrics: Mapping[str, float],
        artifacts: Mapping[str, str],
        status: str = "FINISHED",
        *,
        files: Sequence[Path] = (),
    ) -> None:
        """Log summary ``metrics``, text ``artifacts`` (``{file name: text}``) and ``files`` (at the run's root,
        by their names: the winner's compile artifacts) on the parent run and end it with ``status`` (FINISHED,
        FAILED or KILLED).

        Then bring the runs up to the sweep's end from ``records``: every feasible trial's ``speedup`` (re-measured
        medians included), the saved view's columns, and the parent's description around the records' winner.
        """
        if status not in TERMINAL:
            raise ValueError(f"status must be one of {sorted(TERMINAL)}, got {status=}")
        entries = finite_metrics(metrics)
        texts, paths = dict(artifacts), [str(path) for path in files]
        self._store.guarded("finishing the sweep run", lambda: self._sweep_run.finish(entries, texts, status, paths))
        self._store.guarded("describing the sweep run", lambda: self._describe(records))

    def end(self, status: str, reason: str) -> bool:
        """End the sweep's parent run early, ``status`` FAILED (an error) or KILLED (a stop signal), with
        ``reason`` as its ``autotune.reason`` tag and in its description: no run is left RUNNING by a sweep
        that stopped. Tries once, even during an outage's pause. False when MLflow is unreachable or the
        sweep has no parent run (none is created)."""
        if status not in TERMINAL - {"FINISHED"}:
            raise ValueError(f"status must be FAILED or KILLED, got {status=}")
        self._store.retry_after_s, pause = 0.0, self._store.retry_after_s  # the last call: nothing to spare
        try:
            return bool(self._store.guarded("ending the sweep run", lambda: self._end(status, reason)))
        finally:
            self._store.retry_after_s = pause

    def add_to_sweep_run(
        self, metrics: Mapping[str, float], texts: Mapping[str, str], files: Mapping[str, Path]
    ) -> bool:
        """Add summary ``metrics``, text artifacts (``{artifact path: text}``) and files (``{artifact
        folder: local file}``) to the sweep's parent run, finished or not (``autotune profile`` adds
        its table and traces after the sweep). False when MLflow is unreachable or the study has no
        parent run; none is created."""
        entries = finite_metrics(metrics)
        paths = {folder: str(path) for folder, path in files.items()}
        added = self._store.guarded("adding to the sweep run", lambda: self._sweep_run.add(entries, dict(texts), paths))
        return bool(added)

    def _start(self) -> str:
        run_id = self._sweep_run.start()
        # A resumed sweep's trials have columns; the objective is known again at the first sync.
        self._experiment.save_view(self._trial_runs.runs(run_id), self._objective)
        return run_id

    def _sync(self, records: StudyRecords) -> None:
        trials = self._trial_runs.sync(records)
        self._experiment.save_view(trials, self._objective)

    def _end(self, status: str, reason: str) -> bool:
        if self._sweep_run.run_id is None and self._client().get_experiment_by_name(self.experiment_name) is None:
            return False  # never started: make no experiment just to end nothing in it
        run_id = self._sweep_run.lookup()
        if run_id is None:
            return False
        text = clip(reason, MAX_TAG_LEN)
        tags = [RunTag(TAG_REASON, text), RunTag(TAG_NOTE, clip(description.ended(status, text), MAX_TAG_LEN))]
        self._client().log_batch(run_id, tags=tags)
        self._client().set_terminated(run_id, status=status)
        return True

    def _describe(self, records: StudyRecords) -> None:
        trials = self._trial_runs.sync(records)
        self._experiment.save_view(trials, self._objective)
        parent = self._client().get_run(self._sweep_run.ensure())
        facts = description.SweepFacts(
            study=self.study_name,
            experiment_id=self._experiment.id(),
            run_id=parent.info.run_id,
            records=records,
            # The storage of the last start: a resumed sweep's changed param is a tag (see start()).
            storage=parent.data.tags.get(f"{CHANGED_PARAM_TAG_PREFIX}storage", parent.data.params.get("storage")),
            pages=self._sweep_run.pages(),
        )
        self._sweep_run.describe(description.finished(facts))

    def _client(self) -> MlflowClient:
        """The shared client (tests patch it); made on first use."""
        return self._store.client()
