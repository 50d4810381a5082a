"""Space set aside beside a SQLite study, given back the moment its database finds the disk full.

When a disk fills, the write that fails is most often the one that records the trial just measured:
the trial process ran for minutes while something else filled the disk. Without room for that record
the measurement is lost (the trial is measured again on resume) and the trial is left RUNNING. So each
worker of a SQLite study keeps a file of :data:`RESERVE_BYTES` in the study's cache folder (beside the
database, on its disk) while it runs, and deletes it at the first "database or disk is full" its
engine sees (a SQLAlchemy ``handle_error`` listener: whichever write meets the full disk first, the
trial's record, a heartbeat or a clean-up). The space freed is what the pending record, the failed
trials' states and the closing writes (the write-ahead log folded back, MLflow's run ended when its
store shares the disk) are written with; the sweep then stops, saying the disk is full
(:mod:`autotune.sweep.faults.full_disk`).

4 MiB: a trial's record is a few KiB of attributes in a handful of small transactions, and SQLite folds
at most its auto-checkpoint's 1000 pages (4 MiB) of write-ahead log back into the database file at a
time; in tests/sweep/test_full_disk.py it held the record, the closing writes and MLflow's run ended
in a store on the same disk. The bytes are random: a file of zeros takes no space on file systems that
compress (ZFS, btrfs) or detect zero blocks, and would free none.

A PostgreSQL study has no reserve here: its disk is the server's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from pathlib import Path

import sqlalchemy
from sqlalchemy.engine import ExceptionContext

from autotune.storage.faults import FaultKind, find_fault
from autotune.storage.sqlitelock import sqlite_path
from autotune.trial.compilecache import study_cache_dir

__all__ = ["RESERVE_BYTES", "RESERVE_PREFIX", "DiskReserve"]

RESERVE_BYTES = 4 << 20
RESERVE_PREFIX = "disk-reserve-"  # + "<pid>-<n>": one per worker (several may share a process), each its own
_CHUNK = 1 << 20
_SERIALS = itertools.count()


class DiskReserve:
    """One worker's reserve file for the SQLite study at ``storage``; see the module docstring."""

    def __init__(self, storage: str, path: Path) -> None:
        self.storage = storage
        self.path = path
        self._lock = threading.Lock()
        self._released = False
        self._engine: sqlalchemy.engine.Engine | None = None

    @classmethod
    def for_study(cls, storage: str, study: str) -> DiskReserve | None:
        """This process's reserve for ``study`` in ``storage``; None for a storage that is not a SQLite file."""
        if sqlite_path(storage) is None:
            return None
        name = f"{RESERVE_PREFIX}{os.getpid()}-{next(_SERIALS)}"
        return cls(storage, study_cache_dir(storage, study) / name)

    @property
    def released(self) -> bool:
        """Whether the disk was found full and the reserve given back."""
        return self._released

    def fill(self) -> None:
        """Set the space aside (and delete reserves that killed workers left).

        Raises ``OSError`` (``ENOSPC``) when the disk has not that much free, leaving no part of the file.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _remove_dead_workers_reserves(self.path.parent)
        try:
            with self.path.open("wb") as handle:
                for _ in range(RESERVE_BYTES // _CHUNK):
                    handle.write(os.urandom(_CHUNK))
                handle.flush()
                os.fsync(handle.fileno())  # a file system that allocates late says "full" here, not later
        except OSError as exc:
            self.path.unlink(missing_ok=True)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc  # a failed write names no file

    def watch(self, engine: sqlalchemy.engine.Engine) -> None:
        """Release the reserve at the first full-disk error of ``engine`` (any thread, any write)."""
        sqlalchemy.event.listen(engine, "handle_error", self._on_error)
        self._engine = engine

    def release(self) -> bool:
        """Delete the reserve file; True for the call that freed it."""
        with self._lock:
            if self._released:
                return False
            self._released = True
        self.path.unlink(missing_ok=True)
        return True

    def close(self) -> None:
        """Stop watching and delete the file: the reserve lives as long as its worker's sweep."""
        if self._engine is not None:
            with contextlib.suppress(sqlalchemy.exc.InvalidRequestError):  # not listening (any more)
                sqlalchemy.event.remove(self._engine, "handle_error", self._on_error)
            self._engine = None
        self.path.unlink(missing_ok=True)

    def _on_error(self, context: ExceptionContext) -> None:
        fault = find_fault(context.original_exception, self.storage)
        if fault is not None and fault.kind is FaultKind.FULL:
            self.release()


def _remove_dead_workers_reserves(folder: Path) -> None:
    """Reserves of workers that were killed (a SQLite study's workers all run on this host)."""
    for path in folder.glob(f"{RESERVE_PREFIX}*"):
        pid = path.name.removeprefix(RESERVE_PREFIX).split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
