"""Stop signals end a run cleanly: SIGINT (Ctrl-C) and SIGTERM (how schedulers stop jobs) raise :class:`Interrupted`.

Left to Python, SIGINT raises ``KeyboardInterrupt`` wherever it lands and SIGTERM kills the process on
the spot: a sweep then left its trial RUNNING, or half-recorded, and printed tracebacks. With
:class:`StopSignals` installed, both raise :class:`Interrupted`, which the command turns into one line
and exit code 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).

A sweep marks where a signal may land: inside :meth:`StopSignals.deferred` (recording a trial, asking
the sampler: a few storage writes) the first signal is held until the block ends, so a record is never
half-written; inside :meth:`StopSignals.interruptible` (waiting for a trial process) it raises at once.
A second signal raises at once wherever it lands: a person who presses Ctrl-C twice means it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

__all__ = ["STOP_SIGNALS", "Interrupted", "StopSignals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived. A ``KeyboardInterrupt``, so no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(self.signame)

    @property
    def signame(self) -> str:
        """``SIGINT``, ``SIGTERM``."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


class StopSignals:
    """While entered (a context manager), SIGINT and SIGTERM raise :class:`Interrupted`; see the module docstring.

    Handlers can only be installed from the main thread; entered elsewhere (a test running a sweep
    in a thread), it changes nothing and the blocks below are plain blocks.
    """

    def __init__(self) -> None:
        self.pending: int | None = None  # the first stop signal received, once one was
        self._deferring = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        first = self.pending is None
        if first:
            self.pending = signum
        if first and self._deferring:
            return  # raised when the deferred block ends
        raise Interrupted(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """A first stop signal that arrives inside this block is raised when it ends (if it ends normally)."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if not self._deferring and self.pending is not None:
            raise Interrupted(self.pending)

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Inside a deferred block: a stop signal raises at once here, one that is pending already on entry."""
        saved, self._deferring = self._deferring, 0
        try:
            if self.pending is not None:
                raise Interrupted(self.pending)
            yield
        finally:
            self._deferring = saved
