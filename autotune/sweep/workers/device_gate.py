"""A ``--gpus`` worker's device check before each trial: once at the start, then after each trial that used it.

A device that fails its check is taken out: the worker stops searching, and runs no finishing stage on it.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.interrupts import StopSignals
from autotune.views.progress import Progress

__all__ = ["DeviceGate"]


class DeviceGate:
    """Whether the device is fit for the next trial, by ``check`` (None: fit, else why not; no check: always fit)."""

    def __init__(self, check: Callable[[], str | None] | None, signals: StopSignals, progress: Progress) -> None:
        self.check = check
        self.signals = signals
        self.progress = progress
        self.failure: str | None = None  # why the device was taken out, once it was
        self._ready = False  # checked, and not used since

    def used(self) -> None:
        """A trial ran on the device: check it again before the next one."""
        self._ready = False

    def unfit(self) -> str | None:
        """Check the device unless it was checked and not used since; why it is unfit (it is then taken out)."""
        if self.check is None or self._ready:
            return None
        with self.signals.interruptible():  # a stop signal ends a check that hangs
            failure = self.check()
        if failure is None:
            self._ready = True
            return None
        self.failure = failure
        self.progress.message(f"taken out: its device check failed: {failure}; no more trials run on it")
        return failure
