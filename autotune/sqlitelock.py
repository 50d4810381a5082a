"""One process at a time opens a SQLite database for the first time.

Optuna and MLflow both build (or migrate) their schema when they first open a database. Workers
started together on one host, one per GPU on the default ``sqlite:///autotune.db`` and
``mlflow.db``, would race through that: seen here, two sweeps started at once both died in
MLflow's Alembic migration ("table _alembic_tmp_tags already exists"). Later reads and writes need
no help: SQLite's own locking and the busy timeout queue them.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["first_open_lock", "sqlite_path"]


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


@contextlib.contextmanager
def first_open_lock(url: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the database file of a SQLite ``url`` while the body runs.

    The file is created empty if missing (SQLite takes an empty file for a new database). flock
    and SQLite's own POSIX record locks do not interact on Linux, so this only orders first opens.
    Anything but a local SQLite file, or a file that cannot be opened for writing, runs unlocked:
    the store's own error, if any, is then the one the user sees.
    """
    path = sqlite_path(url)
    handle = None
    if path is not None:
        with contextlib.suppress(OSError):
            handle = path.open("ab")
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
