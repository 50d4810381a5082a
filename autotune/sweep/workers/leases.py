"""Leases in the study's own database: what must happen once per study, and which processes still search it.

Several processes may share a study (``--gpus`` workers, sweeps on several hosts, two sweeps started in
two terminals), and its storage is all they share. Beside Optuna's tables, autotune keeps one of its own
in the same database (SQLite or PostgreSQL), ``autotune_leases``: one row per study and lease name,
naming its holder (``host:pid``), when it expires, and a version that every write bumps.

Life cycle of a lease:

1. **acquire**: the first process INSERTs the row; the primary key lets exactly one of several win. A row
   that exists is taken over by an UPDATE conditioned on the version read (compare-and-swap: its
   rowcount says who won) when it is free: released, expired (its holder stopped renewing it: a dead
   host), or held by a dead process of this host (known at once by its pid). Otherwise the caller
   learns who holds it, and may try again later.
2. **hold**: while the holder works, a thread renews the lease every ``HEARTBEAT_S``, to ``GRACE_S``
   ahead (:func:`held`). A holder that dies stops renewing; ``GRACE_S`` later anyone may take it over.
3. **release**: the holder frees the row when it is done, or when it stops (Ctrl-C, an error); the
   next process takes it at once.

Times are the database's clock (``CURRENT_TIMESTAMP``, as Optuna's heartbeats), so hosts need not agree.

The leases a sweep takes (names): ``finish``, the study's finishing stages
(:mod:`autotune.sweep.stages.once_per_study`); ``informed start`` and ``batch step``, the decisions :func:`decide_once`
takes (:mod:`autotune.sweep.proposals.informed_start`, :mod:`autotune.sweep.proposals.batch_step`);
``search host:pid``, held by each process while it searches, so the finishing stages wait for every search
(:func:`searching`); ``orphan <trial id>``, taken once by the worker that fails and retries a dead worker's trial,
never released (:mod:`autotune.sweep.workers.orphaned_trials`).

With ``--storage memory`` one process has the study to itself: :func:`open_leases` returns None, and
every caller then acts as the holder of every lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import optuna
import sqlalchemy
from optuna.storages import RDBStorage
from sqlalchemy import Column, Float, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from autotune.errors import first_line
from autotune.storage.beats import beating
from autotune.storage.rdb import GRACE_S, HEARTBEAT_S, is_dead_local_worker

__all__ = ["FINISH", "LeaseTable", "decide_once", "held", "open_leases", "search_lease", "searching"]

log = logging.getLogger(__name__)

FINISH = "finish"  # the study's finishing stages
_SEARCH = "search "  # + host:pid: a process searching the study

_METADATA = MetaData()
_LEASES = Table(
    "autotune_leases",
    _METADATA,
    Column("study_id", Integer, primary_key=True, autoincrement=False),  # Optuna's study id
    Column("name", String(255), primary_key=True),
    Column("holder", String(255), nullable=False),  # host:pid
    Column("expires_at", Float, nullable=False),  # the database's clock, in seconds since the epoch; 0: released
    Column("version", Integer, nullable=False),  # bumped by every write: what a take-over compares
)


def search_lease(holder: str) -> str:
    """The name of the lease ``holder`` holds while it searches."""
    return _SEARCH + holder


class LeaseTable:
    """The leases of one study, in the database of its storage (see the module docstring)."""

    def __init__(self, engine: Engine, study_id: int) -> None:
        self._engine = engine
        self._study_id = study_id
        _create_table(engine)

    def acquire(self, name: str, holder: str, ttl_s: float = GRACE_S) -> str | None:
        """Take lease ``name`` for ``holder`` for ``ttl_s`` seconds: None when taken, else who holds it.

        ``holder`` re-acquiring its own lease renews it.
        """
        for _ in range(3):  # an INSERT lost to another, then a row that changed under the compare-and-swap
            with self._engine.begin() as conn:
                now = _now(conn)
                row = conn.execute(
                    select(_LEASES.c.holder, _LEASES.c.expires_at, _LEASES.c.version).where(*self._key(name))
                ).first()
            if row is None:
                if self._insert(name, holder, ttl_s):
                    return None
                continue
            if row.holder != holder and row.expires_at >= now and not is_dead_local_worker(row.holder):
                return str(row.holder)
            if self._swap(name, row.version, holder, ttl_s):
                return None
        return self.holder(name) or "another process"

    def renew(self, name: str, holder: str, ttl_s: float = GRACE_S) -> bool:
        """Push ``holder``'s lease ``name`` ``ttl_s`` seconds ahead; False when it is no longer theirs."""
        with self._engine.begin() as conn:
            now = _now(conn)
            changed = conn.execute(
                _LEASES.update()
                .where(*self._key(name), _LEASES.c.holder == holder, _LEASES.c.expires_at > 0)
                .values(expires_at=now + ttl_s, version=_LEASES.c.version + 1)
            )
        return changed.rowcount == 1

    def release(self, name: str, holder: str) -> None:
        """Free ``holder``'s lease ``name`` (nothing, if another took it over)."""
        with self._engine.begin() as conn:
            conn.execute(
                _LEASES.update()
                .where(*self._key(name), _LEASES.c.holder == holder)
                .values(expires_at=0.0, version=_LEASES.c.version + 1)
            )

    def remove(self, name: str, holder: str) -> None:
        """Delete ``holder``'s lease ``name``: for leases named after their holder, which no one else takes."""
        with self._engine.begin() as conn:
            conn.execute(_LEASES.delete().where(*self._key(name), _LEASES.c.holder == holder))

    def holder(self, name: str) -> str | None:
        """Who holds lease ``name`` now (not expired, not a dead process of this host); None if no one."""
        with self._engine.begin() as conn:
            now = _now(conn)
            row = conn.execute(select(_LEASES.c.holder, _LEASES.c.expires_at).where(*self._key(name))).first()
        if row is None or row.expires_at < now or is_dead_local_worker(row.holder):
            return None
        return str(row.holder)

    def searchers(self) -> list[str]:
        """The processes that hold a search lease now (:func:`searching`), dead ones of this host left out."""
        with self._engine.begin() as conn:
            now = _now(conn)
            rows = conn.execute(
                select(_LEASES.c.holder).where(
                    _LEASES.c.study_id == self._study_id,
                    _LEASES.c.name.startswith(_SEARCH, autoescape=True),
                    _LEASES.c.expires_at >= now,
                )
            ).all()
        return sorted(str(row.holder) for row in rows if not is_dead_local_worker(row.holder))

    def _insert(self, name: str, holder: str, ttl_s: float) -> bool:
        try:
            with self._engine.begin() as conn:
                now = _now(conn)
                values = {"study_id": self._study_id, "name": name, "holder": holder, "version": 0}
                conn.execute(_LEASES.insert().values(**values, expires_at=now + ttl_s))
        except IntegrityError:  # another process inserted it first
            return False
        return True

    def _swap(self, name: str, version: int, holder: str, ttl_s: float) -> bool:
        """Take the row over if it is still at ``version`` (no one renewed or took it since it was read)."""
        with self._engine.begin() as conn:
            now = _now(conn)
            changed = conn.execute(
                _LEASES.update()
                .where(*self._key(name), _LEASES.c.version == version)
                .values(holder=holder, expires_at=now + ttl_s, version=version + 1)
            )
        return changed.rowcount == 1

    def _key(self, name: str) -> tuple[sqlalchemy.ColumnElement[bool], ...]:
        return (_LEASES.c.study_id == self._study_id, _LEASES.c.name == name)


def open_leases(storage: optuna.storages.BaseStorage, study: optuna.Study) -> LeaseTable | None:
    """The lease table of ``study`` in ``storage``'s database; None for a storage only this process sees."""
    if not isinstance(storage, RDBStorage):
        return None
    return LeaseTable(storage.engine, storage.get_study_id_from_name(study.study_name))


@contextmanager
def held(table: LeaseTable, name: str, holder: str) -> Iterator[None]:
    """Renew ``holder``'s lease ``name`` (acquired already) while the body runs, then release it."""
    try:
        with _renewed(table, name, holder):
            yield
    finally:
        _let_go(table.release, name, holder)


def decide_once(
    table: LeaseTable | None, name: str, holder: str, decided: Callable[[], bool], decide: Callable[[], None]
) -> bool:
    """Run ``decide`` once per study under lease ``name``, unless ``decided()`` says the study holds its decision
    already (asked again under the lease: another process may have decided meanwhile). True once the decision is
    the study's; False while another process holds the lease (ask again later)."""
    if decided():
        return True
    if table is None:
        decide()
        return True
    if table.acquire(name, holder) is not None:
        return False
    with held(table, name, holder):
        if not decided():
            decide()
    return True


@contextmanager
def searching(table: LeaseTable | None, holder: str) -> Iterator[None]:
    """``holder`` searches the study while the body runs: every process's finishing stages wait for it."""
    if table is None:
        yield
        return
    name = search_lease(holder)
    table.acquire(name, holder)  # named after its holder: no one else holds it
    try:
        with _renewed(table, name, holder):
            yield
    finally:
        _let_go(table.remove, name, holder)


def _let_go(free: Callable[[str, str], None], name: str, holder: str) -> None:
    """Free a lease on the way out, best effort: one the database cannot free now (a full disk, a lost server)
    expires ``GRACE_S`` after its last renewal anyway, and the error that ends the body must not be masked."""
    try:
        free(name, holder)
    except SQLAlchemyError as exc:
        log.warning("lease %r of %s not freed (%s): it expires within %s s", name, holder, first_line(exc), GRACE_S)


@contextmanager
def _renewed(table: LeaseTable, name: str, holder: str) -> Iterator[None]:
    """A thread renews the lease every ``HEARTBEAT_S`` while the body runs."""

    def renew() -> bool:
        try:
            if not table.renew(name, holder):
                log.warning("lease %r of %s was taken over: it was not renewed for %s s", name, holder, GRACE_S)
                return False
        except SQLAlchemyError as exc:  # a database hiccup: the next beat tries again
            log.debug("lease renewal failed: %s", exc)
        return True

    with beating(renew, HEARTBEAT_S, f"autotune-lease-{name}"):
        yield


def _now(conn: Connection) -> float:
    """The database's clock, in seconds since the epoch (SQLite's ``CURRENT_TIMESTAMP`` is UTC, to the second)."""
    value = conn.execute(select(func.now())).scalar_one()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _create_table(engine: Engine) -> None:
    """Create the lease table if missing; another process creating it at the same moment is no error."""
    try:
        _METADATA.create_all(engine, checkfirst=True)
    except SQLAlchemyError:  # "already exists": another process won the race between the check and the CREATE
        if not sqlalchemy.inspect(engine).has_table(_LEASES.name):
            raise
