"""The Optuna storage a sweep writes to, and how workers show they are alive.

Several workers (processes, hosts) share a study through its storage. A worker records a heartbeat
while one of its trials runs; a trial whose worker stopped beating is failed by the others and its
configuration retried. A worker of this host that died (a killed sweep) is recognised at once by
its pid, without waiting for the grace period.

SQLite is opened in write-ahead-log mode with ``synchronous=NORMAL``: a sweep commits a few dozen
small transactions per trial, and in the default rollback-journal mode each one waits for the
disk (about 0.6-0.9 ms each on the development machine, most of an engine's time per proposal).
In WAL mode a commit appends to the log; a crashed or killed process loses nothing it committed,
and readers (``autotune leaderboard`` beside a running sweep) no longer block writers. Only a
power cut can roll back the last transactions, and the study stays consistent. WAL needs the
database's folder on a local disk, which SQLite studies already need (README: one host only).

A queued trial (the default, a retried orphan) goes to the first worker that asks: Optuna reads it
WAITING and sets it RUNNING, row-locked with ``SELECT ... FOR UPDATE`` on a server. SQLite has no row
locks, so two workers asking at once both took it (four processes on a 40-trial queue: 5 to 9 trials
asked twice; a ``--gpus`` sweep then died recording the default a second time). On SQLite that step
holds the database file's lock (:func:`~autotune.storage.sqlitelock.database_lock`).

The first open of a new database creates Optuna's tables. On a server, workers of several hosts started together
race to create them: PostgreSQL refuses all but one (``duplicate key value violates unique constraint
"pg_type_typname_nsp_index"``; six processes on a fresh database here: two to five of them failed). Its DDL is
transactional, so a loser left nothing behind, and opening again finds the winner's tables:
:func:`open_storage` does that, a few times, before it gives up.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import socket
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.exc import IntegrityError, ProgrammingError

from autotune.records import schema
from autotune.storage import studies as studyio
from autotune.storage.beats import beating
from autotune.storage.sqlitelock import database_lock, sqlite_path

__all__ = [
    "GRACE_S",
    "HEARTBEAT_S",
    "MAX_RETRIES",
    "RetryStaleTrial",
    "close_storage",
    "heartbeat",
    "is_dead_local_worker",
    "open_storage",
    "quiet_optuna",
    "worker_id",
]

log = logging.getLogger(__name__)

HEARTBEAT_S = 10  # a worker's running trial reports in this often ...
GRACE_S = 60  # ... and is presumed dead (its config retried) after this long without a beat
MAX_RETRIES = 3  # a configuration whose worker died this many times in a row is not queued again
_SQLITE_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")
CREATE_RACE_TRIES = 5  # opens of a server database whose tables another worker is creating at the same moment


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Silence Optuna's warnings about what the sweep does on purpose: heartbeats outside
    study.optimize (it records them itself, see :func:`heartbeat`), and constraints told to CMA-ES."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
        # CMA-ES learns infeasible trials from the worst-value placeholder instead (see samplers.py).
        warnings.filterwarnings("ignore", message="Constraints have been set, but CmaEsSampler")
        yield


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """An Optuna storage with worker heartbeats, so configurations of dead workers get retried."""
    if url == "memory":
        return optuna.storages.InMemoryStorage()
    engine: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine = {"connect_args": {"timeout": 60}}  # several local workers queue on the file lock
    storage_type = _SQLiteStorage if sqlite_path(url) is not None else RDBStorage
    with quiet_optuna(), database_lock(url):  # the first open makes (or migrates) a SQLite database
        for attempt in range(1, CREATE_RACE_TRIES + 1):
            try:
                storage = storage_type(
                    url,
                    engine_kwargs=engine,
                    heartbeat_interval=HEARTBEAT_S,
                    grace_period=GRACE_S,
                    heartbeat_stale_trial_callback=RetryStaleTrial(max_retry=MAX_RETRIES),
                )
                break
            except (IntegrityError, ProgrammingError) as exc:  # another worker is creating the tables (see above)
                if attempt == CREATE_RACE_TRIES or sqlite_path(url) is not None:
                    raise studyio.storage_error(url, exc) from exc
                log.debug("opening %s raced another worker's table creation: %s", url, exc)
                time.sleep(random.uniform(0.1, 0.5) * attempt)  # apart, so the retries do not race each other again
            except Exception as exc:  # bad URL, missing driver, unreachable server
                raise studyio.storage_error(url, exc) from exc
        if sqlite_path(url) is not None:
            _use_write_ahead_log(storage.engine)
    return storage


class _SQLiteStorage(RDBStorage):
    """Optuna's RDB storage on a SQLite file whose queued trials each go to one worker (see the module docstring)."""

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        if state != TrialState.RUNNING:
            # Not locked: a trial's end racing another worker's failing it as stale ends with one of the two written,
            # as before; only two workers taking one queued trial would each measure it.
            return super().set_trial_state_values(trial_id, state, values)
        with database_lock(self.url):  # the read of WAITING and the write of RUNNING: one step among processes
            return super().set_trial_state_values(trial_id, state, values)


class RetryStaleTrial(RetryHeartbeatStaleTrialCallback):
    """Optuna's retry of a trial whose worker is gone (a WAITING copy), without that worker's name.

    The copy keeps the trial's user attributes (whether it is the default configuration, above all),
    but not ``autotune.worker``: between another worker's ask of the copy and its naming itself, a check
    by pid (:func:`is_dead_local_worker`) would take the copy for the dead worker's and fail it again.
    """

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        trial = copy.copy(trial)
        trial.user_attrs = {k: v for k, v in trial.user_attrs.items() if k != schema.ATTR_WORKER}
        super().__call__(study, trial)


def _use_write_ahead_log(engine: sqlalchemy.engine.Engine) -> None:
    """Every connection of ``engine`` from now on runs the WAL pragmas (see the module docstring)."""

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        for pragma in _SQLITE_PRAGMAS:
            dbapi_connection.execute(pragma)

    sqlalchemy.event.listen(engine, "connect", on_connect)
    engine.dispose()  # connections opened while Optuna built the schema are replaced by new ones


def close_storage(storage: optuna.storages.BaseStorage) -> None:
    """Close the storage's connections: SQLite then folds its write-ahead log into the database
    file, so a copy of ``autotune.db`` alone holds the whole study."""
    if isinstance(storage, RDBStorage):
        storage.engine.dispose()


def worker_id() -> str:
    """This worker's name in the study: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def is_dead_local_worker(worker: str | None) -> bool:
    """True for a worker of this host whose process is gone (a killed sweep), or dead and not yet reaped."""
    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """A process that exited but whose parent has not waited for it yet (Linux; elsewhere: False)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


@contextmanager
def heartbeat(storage: optuna.storages.BaseStorage, trial_id: int) -> Iterator[None]:
    """Record heartbeats while a trial runs (Optuna does this only inside study.optimize)."""
    if not isinstance(storage, RDBStorage):
        yield
        return

    def beat() -> bool:
        try:
            storage.record_heartbeat(trial_id)
        except Exception as exc:  # a database hiccup must not kill the trial
            log.debug("heartbeat failed: %s", exc)
        return True

    with beating(beat, HEARTBEAT_S, "autotune-heartbeat", at_once=True):
        yield
