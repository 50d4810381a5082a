"""A study storage's faults named as such: a corrupt SQLite file, a read-only one, a full disk.

First what :func:`~autotune.storage.faults.find_fault` makes of the errors real SQLite files raise, then the
commands: ``autotune sweep`` and ``autotune leaderboard`` on a corrupt or read-only study say so in one
line and exit 2 (without this, "invalid data in the commit, e.g. exceeding max length" or "unable to open
database file"). The study is a real one, swept from replayed records.
"""

from __future__ import annotations

import errno
import io
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from optuna.exceptions import StorageInternalError
from pythonpath import child_env
from replay_records import MATMUL_RECORDS
from tmpfs import fill, mounted_tmpfs, remount_read_only

from autotune.space import load_space
from autotune.storage.faults import FaultKind, StorageFaultError, faults_named, find_fault
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "search_spaces" / "triton_matmul.yaml"
STUDY = "matmul"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study made by a sweep (its SQLite file left in write-ahead-log mode, as every sweep leaves it)."""
    database = tmp_path_factory.mktemp("swept") / "autotune.db"
    url = f"sqlite:///{database}"
    options = SweepOptions(
        report=False, study_name=STUDY, storage=url, n_trials=3, replay=MATMUL_RECORDS, tracking=False
    )
    run_sweep(load_space(SPACE, replay=True), options, Progress(None, None, io.StringIO()))
    return database


def copy_study(swept: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(swept, folder / "autotune.db"))


def overwrite_trials_page(database: Path) -> None:
    """Garbage over the first page of the ``trials`` table: a valid SQLite file with one page destroyed."""
    with sqlite3.connect(database) as connection:
        (root,) = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'trials'").fetchone()
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    connection.close()
    with database.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xa5" * page_size)


def error_of(action: Callable[[], object]) -> BaseException:
    with pytest.raises(Exception) as caught:
        action()
    return caught.value


def read_study(database: Path) -> Callable[[], object]:
    url = f"sqlite:///{database}"
    return lambda: optuna.load_study(study_name=STUDY, storage=url).get_trials()


# --- what find_fault makes of real errors ----------------------------------------------------------


def test_a_file_of_garbage_is_corrupt(tmp_path: Path) -> None:
    database = tmp_path / "autotune.db"
    database.write_bytes(os.urandom(20000))
    fault = find_fault(error_of(read_study(database)), f"sqlite:///{database}")
    assert fault is not None and fault.kind is FaultKind.CORRUPT
    assert fault.line() == (
        f"{database} is not a usable SQLite database: file is not a database; "
        "restore it from a backup or use another --storage"
    )


def test_an_overwritten_page_is_corrupt_where_optuna_blames_the_data(swept: Path, tmp_path: Path) -> None:
    database = copy_study(swept, tmp_path)
    overwrite_trials_page(database)
    error = error_of(read_study(database))
    assert isinstance(error, StorageInternalError) and "exceeding max length" in str(error)  # Optuna's words
    fault = find_fault(error, f"sqlite:///{database}")
    assert fault is not None and fault.kind is FaultKind.CORRUPT
    assert fault.detail == "database disk image is malformed"


def test_a_full_disk_is_full(swept: Path, tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "2m") as disk:
        database = copy_study(swept, disk)
        study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{database}")
        fill(disk)

        def write_notes() -> None:
            for i in range(100):
                study.set_user_attr(f"note{i}", "x" * 4000)

        error = error_of(write_notes)
        fault = find_fault(error, f"sqlite:///{database}")
        assert fault is not None and fault.kind is FaultKind.FULL
        assert fault.line() == (
            f"the disk holding {database} is full (the file system mounted at {disk}); "
            "free space there and run the command again"
        )


def test_a_read_only_mount_is_read_only(swept: Path, tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "2m") as disk:
        database = copy_study(swept, disk)
        remount_read_only(disk)
        error = error_of(read_study(database))
        assert "unable to open database file" in str(error)  # SQLite's words: it cannot make its WAL index
        fault = find_fault(error, f"sqlite:///{database}")
        assert fault is not None and fault.kind is FaultKind.READ_ONLY
        assert fault.line() == (
            f"{database} is read-only: the file system holding {disk} is mounted read-only; "
            "SQLite writes the file and its journal beside it: make both writable or use another --storage"
        )


def test_no_space_on_another_disk_is_not_the_study_s(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/autotune.db"
    beside = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / ".autotune-cache" / "x"))
    elsewhere = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/proc/self/x")  # procfs: not tmp_path's disk
    unnamed = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    fault = find_fault(beside, url)
    assert fault is not None and fault.kind is FaultKind.FULL
    assert find_fault(elsewhere, url) is None
    assert find_fault(unnamed, url) is None
    assert find_fault(RuntimeError("no such table: trials"), url) is None


def test_a_database_server_s_full_disk_is_said_without_its_password() -> None:
    url = "postgresql://tuner:s3cret@db.example/autotune"
    try:
        try:
            raise RuntimeError('could not extend file "base/16384/2619": No space left on device')
        except RuntimeError as server:
            raise StorageInternalError("An exception is raised during the commit.") from server
    except StorageInternalError as exc:
        fault = find_fault(exc, url)
    assert fault is not None and fault.kind is FaultKind.FULL
    assert "s3cret" not in fault.line()
    assert fault.line().startswith("the database of storage postgresql://tuner:***@db.example/autotune has no space")


def test_faults_named_passes_other_errors_through(tmp_path: Path) -> None:
    with pytest.raises(KeyError), faults_named(f"sqlite:///{tmp_path}/autotune.db"):
        raise KeyError("a bug, not a fault")
    database = tmp_path / "autotune.db"
    database.write_bytes(b"not a database, not at all" * 1000)
    named = faults_named(f"sqlite:///{database}")
    with pytest.raises(StorageFaultError, match="is not a usable SQLite database"), named:
        read_study(database)()


# --- the commands ----------------------------------------------------------------------------------


def autotune(folder: Path, *args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    """``autotune ARGS`` in ``folder``; ``unprivileged``: bound by file modes, as root is not (see below)."""
    env = child_env()
    command = [sys.executable, "-m", "autotune", *args]
    if unprivileged and os.geteuid() == 0:
        command = _without_root_privileges(command)
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def _without_root_privileges(command: list[str]) -> list[str]:
    """Root, without the capabilities that let it write through file modes (uid 0 still owns the venv and files)."""
    capsh = shutil.which("capsh")
    if capsh is None:
        pytest.skip("root writes through file modes, and capsh (libcap) is missing to drop that privilege")
    return [capsh, "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", shlex.join(command)]


COMMANDS = {
    "sweep": ["sweep", str(SPACE), "--study", STUDY, "--replay", str(MATMUL_RECORDS), "--no-mlflow"],
    "leaderboard": ["leaderboard", "--study", STUDY],
}


def check_one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"autotune: error: {expected}"]
    assert done.stdout == ""


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("damage", ["garbage", "page"])
def test_a_corrupt_study_is_one_line(swept: Path, tmp_path: Path, command: str, damage: str) -> None:
    database = copy_study(swept, tmp_path)
    if damage == "garbage":
        database.write_bytes(os.urandom(database.stat().st_size))
    else:
        overwrite_trials_page(database)
    detail = "file is not a database" if damage == "garbage" else "database disk image is malformed"
    done = autotune(tmp_path, *COMMANDS[command], "--storage", f"sqlite:///{database}")
    check_one_line(
        done,
        f"{database} is not a usable SQLite database: {detail}; restore it from a backup or use another --storage",
    )


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_read_only_study_is_one_line(swept: Path, tmp_path: Path, command: str) -> None:
    with mounted_tmpfs(tmp_path / "disk", "2m") as disk:
        database = copy_study(swept, disk)
        remount_read_only(disk)
        done = autotune(tmp_path, *COMMANDS[command], "--storage", f"sqlite:///{database}")
    check_one_line(
        done,
        f"{database} is read-only: the file system holding {disk} is mounted read-only; "
        "SQLite writes the file and its journal beside it: make both writable or use another --storage",
    )


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_folder_without_write_permission_is_one_line(swept: Path, tmp_path: Path, command: str) -> None:
    database = copy_study(swept, tmp_path / "locked")
    database.parent.chmod(0o555)  # SQLite cannot make its write-ahead log and index beside the file
    try:
        done = autotune(tmp_path, *COMMANDS[command], "--storage", f"sqlite:///{database}", unprivileged=True)
    finally:
        database.parent.chmod(0o755)
    user = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    check_one_line(
        done,
        f"{database} is read-only: its folder {database.parent} is not writable by {user}; "
        "SQLite writes the file and its journal beside it: make both writable or use another --storage",
    )
