"""Small real file systems for the tests: a tmpfs mounted on a folder, filled up, or remounted read-only.

Mounting needs root (CI runs as root); where it is refused, the test is skipped, saying so. A tmpfs is a
real file system: SQLite and the kernel say "full" or "read-only" on it exactly as on a disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "mounted_tmpfs", "remount_read_only"]


@contextlib.contextmanager
def mounted_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``16m``) mounted on ``folder`` (made if missing) while the block runs."""
    folder.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mount.returncode != 0:
        pytest.skip(f"mounting a tmpfs was refused ({mount.stderr.strip()}): this test needs a small real disk")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)  # lazy: a straggling process may hold it


def fill(folder: Path, name: str = "ballast") -> Path:
    """Write ``folder/name`` until its file system is full; the file."""
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    chunk = b"\xff" * 65536
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return path
                chunk = chunk[: len(chunk) // 2]  # down to the last byte the disk has
    finally:
        os.close(fd)


def remount_read_only(folder: Path) -> None:
    """Make the tmpfs on ``folder`` read-only (for root too, who writes through any file mode)."""
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
