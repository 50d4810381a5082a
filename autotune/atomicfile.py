"""Files written whole or not at all: to a temporary file in the target's folder, then renamed over the target.

A rename within one folder is atomic on POSIX file systems, so a reader, or the user after a full disk, a
kill or a crash, finds the old file or the new one, never the first half of the new one. The temporary file
is flushed to disk before the rename (some file systems report a full disk only then) and removed when
writing fails. Every file autotune writes for the user goes through here: tuned configs, reports and their
figures, profiler traces.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autotune.errors import AutotuneError

__all__ = ["TEMPORARY_SUFFIX", "replaced_atomically", "write_atomically"]

TEMPORARY_SUFFIX = ".tmp"  # a temporary file is ``.<name>.<random>.tmp`` beside its target
_MODE = 0o644  # mkstemp makes files 0600; what autotune writes is meant to be read by others (a shared config)


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or leave ``path`` as it was.

    Raises :class:`~autotune.errors.AutotuneError` naming the file when the system refuses (a full disk, a
    read-only folder).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with replaced_atomically(path) as temporary:
        temporary.write_bytes(payload)


@contextlib.contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write (``savefig``, a profiler's trace export).

    When the block ends, the file is flushed to disk and renamed over ``path``; when it raises, the file is
    removed. An ``OSError`` (from the block or the rename) becomes an :class:`~autotune.errors.AutotuneError`
    naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    except OSError as exc:
        raise AutotuneError(f"cannot write {path}: {exc.strerror or exc}") from None
    temporary = Path(name)
    try:
        try:
            os.fchmod(fd, _MODE)
        finally:
            os.close(fd)
        yield temporary
        _flush_to_disk(temporary)
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError):
            raise AutotuneError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def _flush_to_disk(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
