"""The disk reserve beside a SQLite study (:mod:`autotune.sweep.faults.disk_reserve`), on real files and a real full
disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

import optuna
import pytest
from optuna.exceptions import StorageInternalError
from tmpfs import fill, mounted_tmpfs

from autotune.storage.rdb import close_storage, open_storage
from autotune.sweep.faults.disk_reserve import RESERVE_BYTES, RESERVE_PREFIX, DiskReserve


def test_a_reserve_lives_beside_a_sqlite_study_only(tmp_path: Path) -> None:
    reserve = DiskReserve.for_study(f"sqlite:///{tmp_path}/autotune.db", "night/1")
    assert reserve is not None and reserve.path.parent == tmp_path / ".autotune-cache" / "night_1"
    reserve.fill()
    assert reserve.path.stat().st_size == RESERVE_BYTES
    reserve.close()
    assert not reserve.path.exists()
    assert DiskReserve.for_study("postgresql://u@host/autotune", "night") is None
    assert DiskReserve.for_study("memory", "night") is None


def test_reserves_of_killed_workers_are_removed(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    folder = tmp_path / ".autotune-cache" / "s"
    folder.mkdir(parents=True)
    (folder / f"{RESERVE_PREFIX}{gone.pid}-0").write_bytes(b"x" * 100)
    reserve = DiskReserve.for_study(f"sqlite:///{tmp_path}/autotune.db", "s")
    assert reserve is not None
    reserve.fill()
    assert [p.name for p in folder.iterdir()] == [reserve.path.name]
    reserve.close()


def test_the_first_full_disk_error_gives_the_space_back_for_the_write_that_follows(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "8m") as disk:
        url = f"sqlite:///{disk}/autotune.db"
        storage = open_storage(url)
        try:
            study = optuna.create_study(storage=storage, study_name="s")
            trial = study.ask()
            reserve = DiskReserve.for_study(url, "s")
            assert reserve is not None
            reserve.fill()
            reserve.watch(storage.engine)  # type: ignore[attr-defined]
            fill(disk)
            with pytest.raises(StorageInternalError):  # the write that met the full disk ...
                for i in range(1000):
                    trial.set_user_attr(f"note{i}", "x" * 4000)
            assert reserve.released and not reserve.path.exists()
            study.tell(trial, 1.0)  # ... and the one after it, in the space given back
            assert study.trials[0].state is optuna.trial.TrialState.COMPLETE
            reserve.close()
        finally:
            close_storage(storage)
