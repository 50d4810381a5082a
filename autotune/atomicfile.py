"""Files written whole or not at all: to a temporary file in the target's folder, then renamed over the target.

A rename within one folder is atomic on POSIX file systems, so a reader, or the user after a full disk, a
kill or a crash, finds the old file or the new one, never the first half of the new one. The temporary file
is flushed to disk before the rename (some file systems report a full disk only then) and removed when
writing fails. Every file autotune writes for the user goes through here: tuned configs, reports and their
figures, profiler traces.

A compile cache's files (:func:`write_cache_file`) are written whole the same way, for the readers beside the
writer (another process on the same cache folder), but not flushed: a lost one is a cache miss, rebuilt, which is
how Triton and Inductor write their own. A production start installs a thousand of them before it compiles
(ResNet-50's coordinate-descent finalist ships 3,278 files): flushing each, in a temporary file made and reopened
for it, took 1.8 s of it on a CPU machine where this way takes 0.35 s (BENCHMARKS.md). Both write through one
open of the temporary file; ``replaced_atomically`` is for writers that take a path (``savefig``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autotune.errors import AutotuneError

__all__ = ["TEMPORARY_SUFFIX", "replaced_atomically", "write_atomically", "write_cache_file"]

TEMPORARY_SUFFIX = ".tmp"  # a temporary file is ``.<name>.<random>.tmp`` beside its target
_MODE = 0o644  # mkstemp makes files 0600; what autotune writes is meant to be read by others (a shared config)


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or leave ``path`` as it was.

    Raises :class:`~autotune.errors.AutotuneError` naming the file when the system refuses (a full disk, a
    read-only folder).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AutotuneError(f"cannot write {path}: {exc.strerror or exc}") from None
    _write_whole(path, data.encode("utf-8") if isinstance(data, str) else data, flush=True)


def write_cache_file(path: Path, data: bytes) -> None:
    """Write a cache's file ``path`` whole (a temporary file renamed over it) without flushing it to disk; its
    folder must exist.

    For files that are rebuilt when lost (see the module's docstring); what autotune writes for the user goes
    through :func:`write_atomically`. Raises :class:`~autotune.errors.AutotuneError` naming the file when the
    system refuses, the temporary file removed.
    """
    _write_whole(path, data, flush=False)


def _write_whole(path: Path, data: bytes, *, flush: bool) -> None:
    """``data`` into a temporary file beside ``path`` (one open), flushed to disk if ``flush``, renamed over
    ``path``; on an OSError the temporary file is removed and an AutotuneError names ``path``."""
    temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}{TEMPORARY_SUFFIX}")  # unique across hosts too
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE)
        try:
            view = memoryview(data)
            while view:  # os.write may write less than it was given (a signal, a pipe): the rest follows
                view = view[os.write(fd, view) :]
            if flush:
                os.fsync(fd)  # some file systems report a full disk only here
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise AutotuneError(f"cannot write {path}: {exc.strerror or exc}") from None


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
