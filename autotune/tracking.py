"""MLflow mirror of a sweep: one parent run per study, one child run per trial.

The Optuna study is the truth; MLflow is a mirror of it. Nothing here may make a sweep fail: when
the tracking server is restarting or unreachable, calls warn once per outage on stderr (through
``logging``) and return ``None``; the sweep keeps going and catches up later by comparing
:meth:`SweepTracker.logged_trial_numbers` with the study. Programming errors (``TypeError``,
``AttributeError`` ...) still raise.

Only :class:`mlflow.tracking.MlflowClient` is used, never MLflow's fluent API: its active-run and
tracking-URI globals would leak between sweeps and threads that share one process.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from alembic.util import CommandError
from mlflow.entities import Metric, Param, Run, RunTag, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient, get_tracking_uri
from sqlalchemy.exc import SQLAlchemyError

from autotune.results import TrialResult
from autotune.sqlitelock import first_open_lock

__all__ = ["SweepTracker", "resolve_tracking_uri", "trial_run_name"]

_logger = logging.getLogger(__name__)
_T = TypeVar("_T")

TAG_STUDY = "autotune.study"
TAG_ROLE = "autotune.role"
TAG_TRIAL = "autotune.trial"
TAG_STATUS = "autotune.status"
TAG_REASON = "autotune.reason"
TAG_PARENT = "mlflow.parentRunId"
CHANGED_PARAM_TAG_PREFIX = "autotune.param."

# MLflow's own limits (mlflow.utils.validation): longer values are rejected, so they are cut.
_MAX_PARAM_LEN = 6000
_MAX_TAG_LEN = 8000
_MAX_RUN_NAME_LEN = 60
_TERMINAL = frozenset({"FINISHED", "FAILED", "KILLED"})
_SEARCH_PAGE = 1000

# MLflow's HTTP defaults (7 retries, backoff factor 2, 120 s timeout) keep retrying one call for
# about four minutes, so a restarting server would stall the sweep that long per trial. Three quick
# tries (about 3 s when the port is closed) are enough: what fails now is caught up later.
# Applied with setdefault: a value the user exported wins.
HTTP_ENV_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
}


class _MlflowRetryWarningFilter(logging.Filter):
    """Drops urllib3's warning per retried MLflow REST call (two per call during an outage, once
    logging is configured): the tracker warns once per outage instead. Other traffic is untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (str(record.msg).startswith("Retrying") and "/api/2.0/mlflow" in record.getMessage())


_RETRY_WARNING_FILTER = _MlflowRetryWarningFilter()

# Errors from an unreachable, restarting or refusing store. requests' exceptions derive from
# OSError; MLflow wraps connection failures and most database errors in MlflowException, but not
# those of opening a local database (SQLAlchemy's, Alembic's while it builds or migrates the schema).
_MLFLOW_ERRORS = (MlflowException, OSError, SQLAlchemyError, CommandError)


def resolve_tracking_uri(uri: str | None = None) -> str:
    """The tracking URI a sweep logs to: ``uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's default.

    MLflow 3.17's default is ``sqlite:///<cwd>/mlflow.db`` as an absolute path (or ``./mlruns`` when
    a legacy file store already lives there), so ``mlflow ui`` started in the same folder shows the
    runs. Asking MLflow for it keeps the two consistent.
    """
    if uri:
        return uri
    if env_uri := os.environ.get("MLFLOW_TRACKING_URI"):
        return env_uri
    return get_tracking_uri()


def trial_run_name(number: int, params: Mapping[str, Any]) -> str:
    """A short run name for the MLflow run list, e.g. ``t012 bf16 cl compile=default bs256``.

    Default knob values are left out; other parameters show as ``key=value``. At most 60 characters.
    """
    rest = dict(params)
    parts = [f"t{number:03d}"]
    precision = rest.pop("precision", None)
    if precision not in (None, "default"):
        parts.append(str(precision))
    memory_format = rest.pop("memory_format", None)
    if memory_format == "channels_last":
        parts.append("cl")
    elif memory_format not in (None, "contiguous"):
        parts.append(f"mf={memory_format}")
    compile_mode = rest.pop("compile_mode", None)
    if compile_mode not in (None, "none"):
        parts.append(f"compile={compile_mode}")
    batch_size = rest.pop("batch_size", None)
    if batch_size is not None:
        parts.append(f"bs{batch_size}")
    parts.extend(
        f"{_SHORT_KEYS.get(key, key)}={_short_value(value)}"
        for key, value in rest.items()
        if value is not None and not _is_name_default(key, value)
    )
    return _clip(" ".join(parts), _MAX_RUN_NAME_LEN)


# Display only: knob defaults (autotune.knobs.Knobs) that a run name leaves out, and short names.
_NAME_DEFAULTS: dict[str, Any] = {"matmul_precision": "auto", "fused_optimizer": False}
_SHORT_KEYS = {
    "cudnn_benchmark": "bench",
    "cudnn_deterministic": "det",
    "fused_optimizer": "fused",
    "matmul_precision": "mm",
}


def _is_name_default(key: str, value: Any) -> bool:
    return key in _NAME_DEFAULTS and value == _NAME_DEFAULTS[key]


def _short_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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

    def __init__(self, study_name: str, tracking_uri: str | None = None, *, retry_after_s: float = 30.0):
        if not study_name:
            raise ValueError(f"study_name must not be empty, got {study_name=}")
        if retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, got {retry_after_s=}")
        self.study_name = study_name
        self.experiment_name = f"autotune/{study_name}"
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        self.retry_after_s = retry_after_s
        if self.tracking_uri.startswith(("http://", "https://")):
            for name, value in HTTP_ENV_DEFAULTS.items():
                os.environ.setdefault(name, value)
            logging.getLogger("urllib3.connectionpool").addFilter(_RETRY_WARNING_FILTER)  # no duplicates
        self._lock = threading.Lock()
        # The client is made on first use: for a sqlite URI, making it opens (and may create or
        # migrate) the database, which can fail like any other store call.
        self._client_obj: MlflowClient | None = None
        self._experiment_id: str | None = None
        self._parent_id: str | None = None
        self._start_params: dict[str, str] = {}
        self._space_text: str | None = None
        self._down_since: float | None = None
        self._last_failure = 0.0

    @property
    def parent_run_id(self) -> str | None:
        """The sweep's parent run id, once known."""
        return self._parent_id

    @property
    def reachable(self) -> bool:
        """False from a failed store call until the next successful one."""
        with self._lock:
            return self._down_since is None

    # ----------------------------------------------------------------- public API

    def start(self, params: Mapping[str, str], space_path: Path | None = None) -> str | None:
        """Find or create the sweep's parent run, log ``params`` and the space file, mark it RUNNING.

        A resumed sweep reuses its parent run (tags ``autotune.study`` and ``autotune.role=sweep``).
        MLflow params are immutable, so only new ones are logged; a changed value goes to the tag
        ``autotune.param.<key>`` instead. Returns the parent run id, or ``None`` if MLflow is
        unreachable (later calls retry the start).
        """
        space_text = space_path.read_text() if space_path is not None else None
        self._start_params = {str(key): str(value) for key, value in params.items()}
        self._space_text = space_text
        return self._guarded("starting the sweep run", self._start_parent)

    def log_trial(
        self,
        number: int,
        result: TrialResult,
        params: Mapping[str, Any],
        tags: Mapping[str, str] | None = None,
        series: Mapping[str, list[float]] | None = None,
    ) -> str | None:
        """Log one trial as a child run and return its id (``None`` if MLflow is unreachable).

        Params are the trial's ``params``; metrics the finite numeric entries of ``result.metrics``;
        tags its status, reason, number, env fingerprint (``env.<key>``) and ``tags``, all in one
        ``log_batch``. ``series`` (e.g. step times) becomes the artifact ``series.json``. The run
        ends FINISHED for an ok trial, FAILED otherwise. Idempotent: a trial already logged under
        this sweep is not logged again, and one left half-logged by an outage is completed.
        """
        batch = _TrialBatch.build(number, result, params, tags)
        series_text = _series_json(series) if series else None
        return self._guarded(f"logging trial {number}", lambda: self._log_trial(number, batch, series_text))

    def add_trial_metrics(self, number: int, metrics: Mapping[str, float]) -> bool:
        """Add metrics (e.g. a re-measurement) to the child run of trial ``number``; False if not possible."""
        return bool(self._guarded(f"metrics of trial {number}", lambda: self._add_trial_metrics(number, metrics)))

    def _add_trial_metrics(self, number: int, metrics: Mapping[str, float]) -> bool:
        run = self._find_trial_run(self._ensure_parent(), number)
        if run is None:
            return False
        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, 0) for key, value in metrics.items() if math.isfinite(value)]
        self._client().log_batch(run.info.run_id, metrics=batch)
        return True

    def logged_trial_numbers(self) -> set[int] | None:
        """Numbers of the trials with a complete child run (``None`` if MLflow is unreachable).

        A run left RUNNING by an outage does not count: logging that trial again completes it.
        """
        return self._guarded("listing logged trials", self._logged_numbers)

    def finish(self, metrics: Mapping[str, float], artifacts: Mapping[str, str], status: str = "FINISHED") -> None:
        """Log summary ``metrics`` and text ``artifacts`` (``{file name: text}``) on the parent run
        and end it with ``status`` (FINISHED, FAILED or KILLED)."""
        if status not in _TERMINAL:
            raise ValueError(f"status must be one of {sorted(_TERMINAL)}, got {status=}")
        entries = _metrics(metrics)
        self._guarded("finishing the sweep run", lambda: self._finish(entries, dict(artifacts), status))

    # ----------------------------------------------------------------- parent run

    def _start_parent(self) -> str:
        client = self._client()
        run = self._find_or_create_parent(self._experiment())
        run_id = run.info.run_id
        params, tags = _parent_param_changes(run, self._start_params)
        client.log_batch(run_id, params=params, tags=tags)
        if self._space_text is not None:
            client.log_text(run_id, self._space_text, "space.yaml")
        if run.info.status != "RUNNING":
            client.update_run(run_id, status="RUNNING")
        self._parent_id = run_id
        return run_id

    def _ensure_parent(self) -> str:
        """The parent run id; (re)does the start when MLflow was down at start()."""
        return self._parent_id or self._start_parent()

    def _find_or_create_parent(self, experiment_id: str) -> Run:
        parents = self._search_parents(experiment_id)
        if parents:
            return parents[0]
        created = self._client().create_run(
            experiment_id,
            run_name=f"sweep {self.study_name}",
            tags={TAG_STUDY: self.study_name, TAG_ROLE: "sweep"},
        )
        # Two workers starting the same sweep at once may both create a parent. Everyone keeps the
        # oldest; a worker whose own parent lost deletes it, so the UI shows one sweep.
        parents = self._search_parents(experiment_id)
        if not parents or parents[0].info.run_id == created.info.run_id:
            return created
        self._client().delete_run(created.info.run_id)
        return parents[0]

    def _search_parents(self, experiment_id: str) -> list[Run]:
        """Parent runs of this study, oldest first (the study name is compared here, not quoted
        into the filter, so any study name is safe)."""
        runs = self._client().search_runs(
            [experiment_id], f"tags.`{TAG_ROLE}` = 'sweep'", ViewType.ACTIVE_ONLY, max_results=100
        )
        parents = [run for run in runs if run.data.tags.get(TAG_STUDY) == self.study_name]
        return sorted(parents, key=lambda run: (run.info.start_time, run.info.run_id))

    def _lookup_parent_id(self) -> str | None:
        if self._parent_id is None:
            parents = self._search_parents(self._experiment())
            self._parent_id = parents[0].info.run_id if parents else None
        return self._parent_id

    def _experiment(self) -> str:
        """The experiment id, creating the experiment if needed (another worker may win the race)."""
        if self._experiment_id is not None:
            return self._experiment_id
        client = self._client()
        experiment = client.get_experiment_by_name(self.experiment_name)
        if experiment is None:
            try:
                experiment_id = client.create_experiment(
                    self.experiment_name,
                    artifact_location=_local_artifact_location(self.tracking_uri, self.study_name),
                    tags={TAG_STUDY: self.study_name},
                )
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                experiment = client.get_experiment_by_name(self.experiment_name)
                if experiment is None:
                    raise
                experiment_id = experiment.experiment_id
        else:
            experiment_id = experiment.experiment_id
            if experiment.lifecycle_stage == "deleted":
                # A deleted experiment still holds its name: creating it again would fail forever.
                _logger.warning("MLflow experiment %r was deleted; restoring it", self.experiment_name)
                client.restore_experiment(experiment_id)
        self._experiment_id = experiment_id
        return experiment_id

    def _finish(self, metrics: list[Metric], artifacts: dict[str, str], status: str) -> None:
        client = self._client()
        run_id = self._ensure_parent()
        client.log_batch(run_id, metrics=metrics)
        for name, text in artifacts.items():
            client.log_text(run_id, text, name)
        client.set_terminated(run_id, status=status)

    # ----------------------------------------------------------------- trial runs

    def _log_trial(self, number: int, batch: _TrialBatch, series_text: str | None) -> str:
        client = self._client()
        parent_id = self._ensure_parent()
        existing = self._find_trial_run(parent_id, number)
        if existing is not None and existing.info.status in _TERMINAL:
            return existing.info.run_id
        # A run left RUNNING (an outage between its creation and its end) is completed, not doubled.
        run_id = existing.info.run_id if existing is not None else self._create_trial_run(parent_id, number, batch)
        client.log_batch(run_id, metrics=batch.metrics, params=batch.params, tags=batch.tags)
        if series_text is not None:
            client.log_text(run_id, series_text, "series.json")
        client.set_terminated(run_id, status=batch.run_status)
        return run_id

    def _create_trial_run(self, parent_id: str, number: int, batch: _TrialBatch) -> str:
        tags = {TAG_PARENT: parent_id, TAG_STUDY: self.study_name, TAG_ROLE: "trial", TAG_TRIAL: str(number)}
        run = self._client().create_run(self._experiment(), run_name=batch.run_name, tags=tags)
        return run.info.run_id

    def _find_trial_run(self, parent_id: str, number: int) -> Run | None:
        runs = self._client().search_runs(
            [self._experiment()],
            f"tags.`{TAG_PARENT}` = '{parent_id}' and tags.`{TAG_TRIAL}` = '{number}'",
            ViewType.ACTIVE_ONLY,
            max_results=10,
        )
        # Several runs only after a race between two loggers: prefer a complete one.
        return min(runs, key=lambda run: run.info.status not in _TERMINAL, default=None)

    def _logged_numbers(self) -> set[int]:
        parent_id = self._lookup_parent_id()
        if parent_id is None:
            return set()
        numbers: set[int] = set()
        token: str | None = None
        while True:
            page = self._client().search_runs(
                [self._experiment()],
                f"tags.`{TAG_PARENT}` = '{parent_id}'",
                ViewType.ACTIVE_ONLY,
                max_results=_SEARCH_PAGE,
                page_token=token,
            )
            for run in page:
                trial = run.data.tags.get(TAG_TRIAL, "")
                if run.info.status in _TERMINAL and trial.isdigit():
                    numbers.add(int(trial))
            token = page.token
            if not token:
                break
        return numbers

    # ----------------------------------------------------------------- outage handling

    def _client(self) -> MlflowClient:
        if self._client_obj is None:
            with first_open_lock(self.tracking_uri):  # makes (or migrates) a sqlite database
                self._client_obj = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client_obj

    def _guarded(self, what: str, call: Callable[[], _T]) -> _T | None:
        """Run ``call``; turn a store failure into a warning and ``None``. Bugs still raise."""
        with self._lock:
            cooling = self._down_since is not None and time.monotonic() - self._last_failure < self.retry_after_s
        if cooling:
            _logger.debug("MLflow still unreachable: skipped %s", what)
            return None
        try:
            result = call()
        except _MLFLOW_ERRORS as exc:
            self._record_failure(what, exc)
            return None
        self._record_success()
        return result

    def _record_failure(self, what: str, exc: BaseException) -> None:
        message = " ".join(str(exc).split())[:300]
        if not _is_outage(exc):
            # The store answered but refused this call (e.g. an invalid value): not an outage.
            _logger.warning("MLflow refused %s: %s", what, message)
            return
        with self._lock:
            self._last_failure = time.monotonic()
            first = self._down_since is None
            if first:
                self._down_since = self._last_failure
        if first:
            _logger.warning(
                "MLflow at %s is unreachable (%s: %s); the sweep goes on and runs are logged once it is back",
                self.tracking_uri,
                what,
                message,
            )
        else:
            _logger.debug("MLflow still unreachable (%s): %s", what, message)

    def _record_success(self) -> None:
        with self._lock:
            down_since, self._down_since = self._down_since, None
        if down_since is not None:
            _logger.info(
                "MLflow at %s is reachable again after %.0f s",
                self.tracking_uri,
                time.monotonic() - down_since,
            )


@dataclass(frozen=True)
class _TrialBatch:
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
    ) -> _TrialBatch:
        tags = {f"env.{key}": str(value) for key, value in result.env.items() if value is not None}
        tags.update({str(key): str(value) for key, value in (extra_tags or {}).items()})
        tags[TAG_STATUS] = result.status.value
        if result.reason:
            tags[TAG_REASON] = result.reason
        return cls(
            run_name=trial_run_name(number, params),
            params=[Param(str(key), _clip(str(value), _MAX_PARAM_LEN)) for key, value in params.items()],
            metrics=_metrics(result.metrics),
            tags=[RunTag(key, _clip(value, _MAX_TAG_LEN)) for key, value in tags.items()],
            run_status="FINISHED" if result.ok else "FAILED",
        )


def _metrics(values: Mapping[str, Any]) -> list[Metric]:
    """Finite numbers only: units (strings), flags (bools), NaN and inf are not sortable columns."""
    now = int(time.time() * 1000)
    return [
        Metric(str(key), float(value), now, 0)
        for key, value in values.items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ]


def _series_json(series: Mapping[str, list[float]]) -> str:
    # Strict JSON has no NaN/inf; a lost sample becomes null.
    return json.dumps({key: [float(v) if math.isfinite(v) else None for v in values] for key, values in series.items()})


def _parent_param_changes(run: Run, params: Mapping[str, str]) -> tuple[list[Param], list[RunTag]]:
    """New params to log, and tags for params whose value changed since the first start."""
    logged, tags = run.data.params, run.data.tags
    new: list[Param] = []
    changed: list[RunTag] = []
    for key, raw in params.items():
        value = _clip(raw, _MAX_PARAM_LEN)
        tag_key = CHANGED_PARAM_TAG_PREFIX + key
        if key not in logged:
            new.append(Param(key, value))
        elif logged[key] != value or tag_key in tags:
            changed.append(RunTag(tag_key, value))
    return new, changed


def _is_outage(exc: BaseException) -> bool:
    """Connection errors, timeouts, 5xx and 429 are outages; other MLflow errors are refusals."""
    if isinstance(exc, MlflowException):
        status = exc.get_http_status_code()
        return status >= 500 or status == 429
    return True


def _local_artifact_location(tracking_uri: str, study_name: str) -> str | None:
    """For a local sqlite store: artifacts next to the database, not in whatever folder the sweep
    was started from (MLflow's client-side default is ``./mlruns`` of the current folder)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    db_path = unquote(tracking_uri.removeprefix("sqlite:///").split("?", 1)[0])
    if not db_path or db_path == ":memory:":
        return None
    safe_name = re.sub(r"[^\w.-]+", "_", study_name)
    return str(Path(db_path).absolute().parent / "mlruns" / "autotune" / safe_name)
