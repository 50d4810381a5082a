"""The MLflow client behind an outage guard: a store failure becomes one warning per outage and ``None``.

Also where the tracking URI is resolved, MLflow's HTTP retries are shortened and urllib3's warning per
retried call is muted.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from alembic.util import CommandError
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient, get_tracking_uri
from sqlalchemy.exc import SQLAlchemyError

from autotune.storage.faults import find_fault
from autotune.storage.sqlitelock import database_lock

__all__ = ["HTTP_ENV_DEFAULTS", "GuardedStore", "resolve_tracking_uri"]

_logger = logging.getLogger(__name__)
_T = TypeVar("_T")

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


class _MlflowDatabaseErrorFilter(logging.Filter):
    """Drops MLflow's own report of a failed call to its database (an ERROR with a traceback of some 50 lines,
    seen when the disk of ``mlflow.db`` was full): the call fails into the guard, which warns once per outage."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


_DATABASE_ERROR_FILTER = _MlflowDatabaseErrorFilter()

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


def _is_outage(exc: BaseException) -> bool:
    """Connection errors, timeouts, 5xx and 429 are outages; other MLflow errors are refusals."""
    if isinstance(exc, MlflowException):
        status = exc.get_http_status_code()
        return status >= 500 or status == 429
    return True


class GuardedStore:
    """One tracking URI's :class:`MlflowClient`, and the outage state of the calls made through it.

    :meth:`guarded` runs a call, turns a store failure into a warning and ``None``, and after an outage
    skips calls for ``retry_after_s``. Safe to share between threads.
    """

    def __init__(self, tracking_uri: str, retry_after_s: float):
        if retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, got {retry_after_s=}")
        self.tracking_uri = tracking_uri
        self.retry_after_s = retry_after_s
        if tracking_uri.startswith(("http://", "https://")):
            for name, value in HTTP_ENV_DEFAULTS.items():
                os.environ.setdefault(name, value)
            logging.getLogger("urllib3.connectionpool").addFilter(_RETRY_WARNING_FILTER)  # no duplicates
        logging.getLogger("mlflow.store.db.utils").addFilter(_DATABASE_ERROR_FILTER)
        self._lock = threading.Lock()
        # The client is made on first use: for a sqlite URI, making it opens (and may create or
        # migrate) the database, which can fail like any other store call.
        self._client_obj: MlflowClient | None = None
        self._down_since: float | None = None
        self._last_failure = 0.0

    @property
    def reachable(self) -> bool:
        """False from a failed store call until the next successful one."""
        with self._lock:
            return self._down_since is None

    def client(self) -> MlflowClient:
        """The client, made on first use (call it inside :meth:`guarded`: making it can fail)."""
        if self._client_obj is None:
            with database_lock(self.tracking_uri):  # makes (or migrates) a sqlite database
                self._client_obj = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client_obj

    def guarded(self, what: str, call: Callable[[], _T]) -> _T | None:
        """Run ``call``; turn a store failure into a warning and ``None``. Bugs still raise."""
        if self._cooling():
            _logger.debug("MLflow still unreachable: skipped %s", what)
            return None
        try:
            result = call()
        except _MLFLOW_ERRORS as exc:
            self._record_failure(what, exc)
            return None
        self._record_success()
        return result

    def _cooling(self) -> bool:
        """True while down and the last failure is less than ``retry_after_s`` ago."""
        with self._lock:
            return self._down_since is not None and time.monotonic() - self._last_failure < self.retry_after_s

    def _record_failure(self, what: str, exc: BaseException) -> None:
        fault = find_fault(exc, self.tracking_uri)  # a full disk is said as such, not as a page of SQL
        message = fault.describe() if fault is not None else " ".join(str(exc).split())[:300]
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
