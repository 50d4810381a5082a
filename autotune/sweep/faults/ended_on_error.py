"""A sweep worker that ends on an exception: the storage fault behind it named in one line, its MLflow run ended.

Without this, a full disk surfaced as Optuna's "invalid data in the commit, e.g. exceeding max length"
(exit code 1, an internal error), and the sweep's MLflow run stayed RUNNING for ever.
"""

from __future__ import annotations

from autotune.errors import AutotuneError, first_line
from autotune.interrupts import Interrupted
from autotune.storage.faults import FaultKind, StorageFaultError, find_fault
from autotune.sweep.context import SweepContext
from autotune.sweep.faults.full_disk import RESUME

__all__ = ["sweep_ended"]


def sweep_ended(ctx: SweepContext, exc: BaseException) -> None:
    """The worker ends on ``exc``: its MLflow run is ended, and a storage fault behind ``exc`` (a full disk, a
    corrupt or read-only file) is raised as its one-line error instead; the caller re-raises anything else.

    The run ends KILLED (a stop signal) or FAILED, with why: best effort, as MLflow's store may be on the
    disk that is full.
    """
    named = _named(ctx.options.storage, exc)
    if ctx.tracker is not None:
        status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
        ctx.tracker.end(status, _reason(named or exc))
    if named is not None:
        raise named from exc


def _named(storage: str, exc: BaseException) -> StorageFaultError | None:
    if not isinstance(exc, Exception) or isinstance(exc, AutotuneError):
        return None  # a stop signal, or already said in words the user can act on
    fault = find_fault(exc, storage)
    if fault is None:
        return None
    return StorageFaultError(fault, RESUME if fault.kind is FaultKind.FULL else None)


def _reason(error: BaseException) -> str:
    if isinstance(error, Interrupted):
        return f"interrupted by {error.signame}"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    if isinstance(error, AutotuneError):
        return str(error)
    return f"{type(error).__name__}: {first_line(error)}"
