"""What SQLite does not order between processes: first opens of a database, and taking a queued trial.

Optuna and MLflow both build (or migrate) their schema when they first open a database. Workers
started together on one host, one per GPU on the default ``sqlite:///autotune.db`` and
``mlflow.db``, would race through that: seen here, two sweeps started at once both died in
MLflow's Alembic migration ("table _alembic_tmp_tags already exists"). And Optuna takes a queued
trial by reading it WAITING and writing it RUNNING, which a server's row lock makes one step and
SQLite does not (:mod:`autotune.storage.rdb`). Other reads and writes need no help: SQLite's own
locking and the busy timeout queue them.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["database_lock", "sqlite_path"]


def sqlite_path(url: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL (relative to the working folder, or absolute);
    ``None`` for any other URL, an in-memory database or a ``file:`` URI."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    if parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


# One open handle per database file for the life of the process: closing a file descriptor drops
# every POSIX lock the process holds on that file, SQLite's own included, so these are never closed.
_HANDLES: dict[Path, BinaryIO] = {}


@contextlib.contextmanager
def database_lock(url: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the database file of a SQLite ``url`` while the body runs.

    The file is created empty if missing (SQLite takes an empty file for a new database). On a
    local disk flock and SQLite's own POSIX record locks do not interact, so this only orders
    what holds it (first opens; taking a queued trial). Between processes only: one process holds
    one handle per file, and a nested hold would be released by the inner one, so callers never
    nest it. Anything but a local SQLite file, a file that cannot be opened for writing, or
    a file system without flock runs unlocked: the store's own error, if any, is then the one
    the user sees.
    """
    handle = _handle(url)
    locked = False
    if handle is not None:
        with contextlib.suppress(OSError):  # ENOLCK, EOPNOTSUPP on some network file systems
            fcntl.flock(handle, fcntl.LOCK_EX)
            locked = True
    try:
        yield
    finally:
        if locked:
            assert handle is not None
            fcntl.flock(handle, fcntl.LOCK_UN)


def _handle(url: str) -> BinaryIO | None:
    path = sqlite_path(url)
    if path is None:
        return None
    key = path.resolve()
    if key not in _HANDLES:
        try:
            _HANDLES[key] = path.open("ab")
        except OSError:
            return None
    return _HANDLES[key]
