"""First opens of a SQLite database are ordered between processes (tests/test_workers.py shows why)."""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from autotune.storage.sqlitelock import database_lock, sqlite_path


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///autotune.db", Path("autotune.db")),
        ("sqlite:////srv/sweeps/mlflow.db", Path("/srv/sweeps/mlflow.db")),
        ("sqlite:///runs/a.db?timeout=60", Path("runs/a.db")),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("postgresql://u:p@db-host/autotune", None),
        ("http://127.0.0.1:5000", None),
        ("memory", None),
    ],
)
def test_only_a_local_sqlite_file_is_locked(url: str, path: Path | None) -> None:
    assert sqlite_path(url) == path


def _hold(url: str, seconds: float, started: Event) -> None:
    with database_lock(url):
        started.set()
        time.sleep(seconds)


def test_a_second_process_waits_for_the_first(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    started = multiprocessing.get_context("spawn").Event()
    holder = multiprocessing.get_context("spawn").Process(target=_hold, args=(url, 1.0, started))
    holder.start()
    try:
        assert started.wait(60)
        begun = time.monotonic()
        with database_lock(url):
            waited = time.monotonic() - begun
    finally:
        holder.join(60)
    assert waited > 0.5
    assert (tmp_path / "new.db").stat().st_size == 0  # created empty: SQLite takes it for a new database


def test_an_unwritable_location_runs_unlocked(tmp_path: Path) -> None:
    with database_lock(f"sqlite:///{tmp_path}/missing-folder/x.db"):
        pass  # the store's own error, not the lock's, is what the user sees
    assert not (tmp_path / "missing-folder").exists()
