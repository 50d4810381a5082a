"""Sweep progress: a live status line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from autotune.studyio import Tally

__all__ = ["Progress", "format_duration"]


def format_duration(seconds: float) -> str:
    """``42s``, ``7m05s``, ``3h12m``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class Progress:
    """Counts trials and prints one line per finished trial.

    On a terminal a status line under the log (done/failed, best so far and its speedup, ETA,
    the trial running now) is redrawn in place; in a log file every line stays plain text.
    """

    budget: int | None
    deadline: float | None
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    pruned: int = 0
    failed: int = 0
    skipped: int = 0
    best: str = "none yet"
    _started: float = field(default_factory=time.monotonic)
    _measured_s: float = 0.0
    _own_measured: int = 0
    _status: str = ""

    @property
    def live(self) -> bool:
        return self.stream.isatty()

    def eta(self) -> str:
        remaining = []
        if self.budget is not None and self._own_measured:
            remaining.append(self._measured_s / self._own_measured * max(0, self.budget - self.done))
        if self.deadline is not None:
            remaining.append(self.deadline - time.time())
        return format_duration(min(remaining)) if remaining else "?"

    def _counts(self) -> str:
        total = f"/{self.budget}" if self.budget is not None else ""
        pruned = f", {self.pruned} pruned" if self.pruned else ""
        return f"[{self.done}{total} done{pruned}, {self.failed} failed]"

    def _emit(self, line: str) -> None:
        if self.live:
            width = shutil.get_terminal_size().columns
            self.stream.write("\r\x1b[2K" + line + "\n")
            self.stream.write(self._status[: width - 1])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def message(self, line: str) -> None:
        self._emit(line)

    def started(self, label: str) -> None:
        """A trial starts: redraw the status line (terminal only)."""
        self._status = f"{self._counts()} best {self.best} | running {label} | ETA {self.eta()}"
        if self.live:
            width = shutil.get_terminal_size().columns
            self.stream.write("\r\x1b[2K" + self._status[: width - 1])
            self.stream.flush()

    def finished(self, label: str, outcome: str, seconds: float, measured: bool, counts: Tally, best: str) -> None:
        """A trial ended. ``counts`` tally the study's measured trials (every worker's);
        the ETA uses this worker's measured trials' times."""
        if measured:
            self._own_measured += 1
            self._measured_s += seconds
        else:
            self.skipped += 1
        self.done, self.pruned, self.failed = counts.measured, counts.pruned, counts.failed
        self.best = best
        self._status = f"{self._counts()} best {self.best} | ETA {self.eta()}"
        self._emit(f"{self._counts()} {label}: {outcome} ({format_duration(seconds)}) | best {best}")

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
