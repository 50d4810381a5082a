"""A study storage's faults named so that the user can fix them: a full disk, a corrupt SQLite file, a read-only one.

The database's own words sit deep in an exception's chain. Optuna wraps every database error in a
``StorageInternalError`` that blames "invalid data in the commit, e.g. exceeding max length" (seen for SQLite's
"database or disk is full" and "database disk image is malformed" alike); SQLAlchemy keeps the driver's error in
``orig``; SQLite answers "unable to open database file" for a folder it may not write its journal to.
:func:`find_fault` walks the chain (``__cause__``, ``__context__``, ``orig``) in this one place, for the sweep, the
views and the MLflow store alike, and reads the driver's code where it has one (sqlite3's ``sqlite_errorname``,
PostgreSQL's SQLSTATE, ``errno``) before its text.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.errors import AutotuneError, first_line
from autotune.storage.sqlitelock import sqlite_path

__all__ = [
    "FaultKind",
    "StorageFault",
    "StorageFaultError",
    "fault_error",
    "faults_named",
    "find_fault",
    "free_space",
    "size_text",
]


class FaultKind(StrEnum):
    """What is wrong with the storage; each asks the user for something else."""

    FULL = "full"  # free space (or raise the quota), then run the command again
    CORRUPT = "corrupt"  # restore the file from a backup, or start another one
    READ_ONLY = "read-only"  # make the file and its folder writable


# sqlite3's error names, extended codes folded to their primary one (SQLITE_READONLY_DBMOVED -> SQLITE_READONLY).
_SQLITE_CODES = {
    "SQLITE_FULL": FaultKind.FULL,
    "SQLITE_CORRUPT": FaultKind.CORRUPT,
    "SQLITE_NOTADB": FaultKind.CORRUPT,
    "SQLITE_READONLY": FaultKind.READ_ONLY,
}
# PostgreSQL's SQLSTATEs (psycopg 3's ``sqlstate``, psycopg2's ``pgcode``): disk_full, read_only_sql_transaction,
# data_corrupted, index_corrupted.
_SQLSTATES = {
    "53100": FaultKind.FULL,
    "25006": FaultKind.READ_ONLY,
    "XX001": FaultKind.CORRUPT,
    "XX002": FaultKind.CORRUPT,
}
_ERRNOS = {errno.ENOSPC: FaultKind.FULL, errno.EDQUOT: FaultKind.FULL, errno.EROFS: FaultKind.READ_ONLY}
# The same faults by their text, for a driver that gives no code (lower case).
_TEXTS = (
    ("database or disk is full", FaultKind.FULL),
    ("no space left on device", FaultKind.FULL),
    ("could not extend file", FaultKind.FULL),  # PostgreSQL, when a table's file cannot grow
    ("database disk image is malformed", FaultKind.CORRUPT),
    ("file is not a database", FaultKind.CORRUPT),
    ("attempt to write a readonly database", FaultKind.READ_ONLY),
)
_ADVICE = {
    FaultKind.FULL: "free space there and run the command again",
    FaultKind.CORRUPT: "restore it from a backup or use another --storage",
    FaultKind.READ_ONLY: "make it writable or use another --storage",
}
# SQLite writes a journal (or write-ahead log) beside the database, even to read a study left in WAL mode.
_SQLITE_READ_ONLY_ADVICE = (
    "SQLite writes the file and its journal beside it: make both writable or use another --storage"
)
# How a database server words each fault, after its URL.
_SERVER_WORDS = {
    FaultKind.FULL: "has no space left",
    FaultKind.CORRUPT: "reports corrupt data",
    FaultKind.READ_ONLY: "is read-only",
}


@dataclass(frozen=True)
class StorageFault:
    """A fault of the storage at ``url``, and the database's (or the system's) own words for it."""

    kind: FaultKind
    url: str
    detail: str

    def line(self, advice: str | None = None) -> str:
        """One line: what is wrong with which storage, then ``advice`` (default: what fixes it)."""
        if advice is None:
            sqlite_read_only = self.kind is FaultKind.READ_ONLY and sqlite_path(self.url) is not None
            advice = _SQLITE_READ_ONLY_ADVICE if sqlite_read_only else _ADVICE[self.kind]
        return f"{self.describe()}; {advice}"

    def describe(self) -> str:
        """What is wrong, naming the file (SQLite) or the storage's URL without its password."""
        database = sqlite_path(self.url)
        if database is None:
            return f"the database of storage {_shown(self.url)} {_SERVER_WORDS[self.kind]}: {self.detail}"
        database = database.absolute()
        if self.kind is FaultKind.FULL:
            return f"the disk holding {database} is full (the file system mounted at {_mount_point(database.parent)})"
        if self.kind is FaultKind.CORRUPT:
            return f"{database} is not a usable SQLite database: {self.detail}"
        why = unwritable(database) or self.detail
        return f"{database} is read-only: {why}"


class StorageFaultError(AutotuneError):
    """A storage fault as the CLI says it: one line, exit code 2 (the user must act)."""

    def __init__(self, fault: StorageFault, advice: str | None = None) -> None:
        super().__init__(fault.line(advice))
        self.fault = fault


def find_fault(exc: BaseException, url: str) -> StorageFault | None:
    """The storage fault behind ``exc`` (anywhere in its chain), if it is one; ``url`` is the storage's.

    A driver's code is trusted before any text, so the detail quoted is the driver's own message.
    """
    chain = list(_chain(exc))
    for judge in (_coded_kind, _worded_kind):
        for link in chain:
            kind = judge(link, url)
            if kind is not None:
                return StorageFault(kind, url, first_line(link))
    return None


def fault_error(url: str, exc: BaseException, advice: str | None = None) -> StorageFaultError | None:
    """The one-line error for ``exc`` if a storage fault is behind it, else None."""
    fault = find_fault(exc, url)
    return None if fault is None else StorageFaultError(fault, advice)


@contextlib.contextmanager
def faults_named(url: str, advice: str | None = None) -> Iterator[None]:
    """Inside the block, an exception caused by a fault of the storage at ``url`` becomes its one-line error."""
    try:
        yield
    except AutotuneError:
        raise  # already says what is wrong
    except Exception as exc:
        error = fault_error(url, exc, advice)
        if error is None:
            raise
        raise error from exc


def unwritable(database: Path) -> str | None:
    """Why SQLite cannot write ``database`` (the file, its folder, a read-only mount), or None if it can.

    ``os.access`` answers for the running user (root included: it reports a read-only mount, not file modes).
    """
    folder = database.absolute().parent
    if not folder.is_dir():
        return None  # a missing folder is not a permission problem
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        return f"the file system holding {folder} is mounted read-only"
    if database.exists() and not os.access(database, os.W_OK):
        return f"the file is not writable by {_user()}"
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} is not writable by {_user()}"
    return None


def free_space(folder: Path) -> int | None:
    """Bytes free to this user in ``folder``'s file system; None if it cannot be read."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or during, breadth first, each once."""
    queue, seen = [exc], set()
    while queue:
        link = queue.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        for nxt in (link.__cause__, link.__context__, getattr(link, "orig", None)):
            if isinstance(nxt, BaseException):
                queue.append(nxt)


def _coded_kind(exc: BaseException, url: str) -> FaultKind | None:
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        primary = "_".join(name.split("_")[:2])
        return _cannot_open(url) if primary == "SQLITE_CANTOPEN" else _SQLITE_CODES.get(primary)
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if isinstance(state, str):
        return _SQLSTATES.get(state)
    if isinstance(exc, OSError) and exc.errno in _ERRNOS and _on_the_database_disk(exc.filename, url):
        return _ERRNOS[exc.errno]
    return None


def _worded_kind(exc: BaseException, _url: str) -> FaultKind | None:
    if isinstance(exc, OSError):
        return None  # a file's error names its own disk: judged by errno and file name alone
    text = str(exc).lower()
    return next((kind for words, kind in _TEXTS if words in text), None)


def _on_the_database_disk(filename: object, url: str) -> bool:
    """Whether the file an OSError names is on the SQLite database's file system (another disk is not the study's)."""
    database = sqlite_path(url)
    if database is None or not isinstance(filename, str | bytes | os.PathLike):
        return False
    path = Path(os.fsdecode(filename)).absolute()
    try:
        folder = next(p for p in (path, *path.parents) if p.exists())
        return folder.stat().st_dev == database.absolute().parent.stat().st_dev
    except (OSError, StopIteration):
        return False


def _cannot_open(url: str) -> FaultKind | None:
    """SQLite's "unable to open database file": read-only where the file or its folder is not writable."""
    database = sqlite_path(url)
    return FaultKind.READ_ONLY if database is not None and unwritable(database) else None


def _mount_point(folder: Path) -> Path:
    """The mount point of ``folder``'s file system: the disk the user must free space on."""
    path = folder.absolute()
    with contextlib.suppress(OSError):
        device = path.stat().st_dev
        while path.parent != path and path.parent.stat().st_dev == device:
            path = path.parent
    return path


def size_text(n: int) -> str:
    """``0 B``, ``512 B``, ``3.2 MiB``: a size as ``df -h`` would round it."""
    value, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def _user() -> str:
    return "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"


def _shown(url: str) -> str:
    """``url`` without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
