"""An action repeated on a thread of its own while a block of code runs: heartbeats, lease renewals."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["beating"]


@contextmanager
def beating(beat: Callable[[], bool], every_s: float, name: str, *, at_once: bool = False) -> Iterator[None]:
    """Call ``beat`` every ``every_s`` seconds (first at once with ``at_once``) while the body runs, until it
    returns False; the thread is stopped and joined when the body ends. ``beat`` handles its own errors."""
    stop = threading.Event()

    def run() -> None:
        if at_once and not beat():
            return
        while not stop.wait(every_s):
            if not beat():
                return

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
