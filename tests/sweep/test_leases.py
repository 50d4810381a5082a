"""Leases in the study's database, on SQLite and PostgreSQL, between real processes: one winner, and a
holder that died is taken over (at once on this host, by its pid; after expiry for another host)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from postgres import POSTGRES, require_server
from pythonpath import child_env

from autotune.storage.rdb import close_storage, open_storage
from autotune.sweep.workers.leases import FINISH, LeaseTable, held, open_leases, searching

HERE = Path(__file__).resolve().parent


@pytest.fixture(params=["sqlite", "postgresql"])
def study(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(storage URL, study name): a new study on SQLite, or in PostgreSQL's ``test`` database (deleted after)."""
    name = f"lease-{uuid.uuid4().hex[:8]}"
    url = f"sqlite:///{tmp_path}/leases.db" if request.param == "sqlite" else POSTGRES
    if request.param == "postgresql":
        require_server()
    storage = open_storage(url)
    optuna.create_study(storage=storage, study_name=name)
    close_storage(storage)
    yield url, name
    if request.param == "postgresql":
        optuna.delete_study(study_name=name, storage=url)


def leases_of(url: str, name: str) -> LeaseTable:
    storage = open_storage(url)
    table = open_leases(storage, optuna.load_study(study_name=name, storage=storage))
    assert table is not None
    return table


def holders(workdir: Path, url: str, name: str, count: int) -> list[subprocess.Popen[str]]:
    """``count`` processes that try to take the lease at the same moment, then stay (see lease_holder.py)."""
    env = child_env(HERE)
    command = [sys.executable, str(HERE / "lease_holder.py"), url, name]
    procs = [subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    (workdir / "go").touch()
    return procs


def first_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


@pytest.mark.slow  # four interpreters
def test_of_processes_that_try_at_once_exactly_one_takes_the_lease(study: tuple[str, str], tmp_path: Path) -> None:
    url, name = study
    procs = holders(tmp_path, url, name, 4)  # alive until all have tried: a dead winner may be taken over
    try:
        said = [first_line(proc) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert said.count("won") == 1, said
    winner = procs[said.index("won")]
    assert all(line.endswith(f":{winner.pid}") for line in said if line != "won")  # the losers name the winner


def test_a_lease_whose_holder_was_killed_is_taken_over_at_once(study: tuple[str, str], tmp_path: Path) -> None:
    url, name = study
    (proc,) = holders(tmp_path, url, name, 1)
    assert first_line(proc) == "won"
    table = leases_of(url, name)
    holder = table.holder(FINISH)
    assert holder is not None and holder.endswith(f":{proc.pid}")
    assert table.acquire(FINISH, "host:me") == holder  # a live holder keeps it
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert table.holder(FINISH) is None  # dead on this host: known by its pid, long before the lease expires
    assert table.acquire(FINISH, "host:me") is None


def test_a_lease_of_another_host_is_taken_over_once_it_expires(study: tuple[str, str]) -> None:
    url, name = study
    table = leases_of(url, name)
    assert table.acquire(FINISH, "elsewhere:1", ttl_s=1) is None
    assert table.acquire(FINISH, "here:2") == "elsewhere:1"
    time.sleep(2.1)  # it stopped renewing (SQLite's clock counts whole seconds)
    assert table.acquire(FINISH, "here:2") is None
    assert not table.renew(FINISH, "elsewhere:1")  # the old holder learns it lost the lease
    table.release(FINISH, "elsewhere:1")  # and cannot free it for the new one
    assert table.holder(FINISH) == "here:2"


def test_a_released_lease_is_free_and_searchers_leave_with_their_search(study: tuple[str, str]) -> None:
    url, name = study
    table = leases_of(url, name)
    assert table.acquire(FINISH, "here:1") is None
    with held(table, FINISH, "here:1"), searching(table, "here:2"), searching(table, "there:3"):
        assert table.searchers() == ["here:2", "there:3"]
        assert table.acquire(FINISH, "here:2") == "here:1"
    assert table.searchers() == []
    assert table.acquire(FINISH, "here:2") is None
