"""The PostgreSQL server of the development and CI machines (127.0.0.1:5432, trust auth): its ``test`` database,
and databases made new for one test. A test skips only where no server answers; any other error is the test's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

SERVER = "postgresql://postgres@127.0.0.1:5432"
POSTGRES = f"{SERVER}/test"  # where the tests' studies live, each under a name of its own


def require_server() -> None:
    """Skip the calling test where no PostgreSQL server answers on loopback (CI and the dev machine have one)."""
    try:
        psycopg.connect(f"{SERVER}/postgres", connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {SERVER} is not reachable: {exc}")


@contextmanager
def new_database() -> Iterator[str]:
    """The URL of a database created empty for the caller, dropped afterwards with whatever is still connected."""
    require_server()
    name = f"autotune_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{SERVER}/{name}"
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
