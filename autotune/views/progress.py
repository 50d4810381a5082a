"""Sweep progress: a live status line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from autotune.numbers import duration, quantity

if TYPE_CHECKING:
    from autotune.records import StudyRecords, Tally

__all__ = ["Progress", "winner_text"]


def winner_text(records: StudyRecords) -> str:
    """The winner as the progress line shows it: ``t012 341.8 images/s (2.10x default)``, and ``median of 3
    re-measurements`` in the brackets once it was re-measured."""
    winner = records.winner
    if winner is None or winner.value is None:
        return "none yet"
    unit = winner.metrics.get("throughput_unit", "") if records.metric == "throughput" else ""
    speedup = records.speedup(winner)
    notes = [f"{speedup:.2f}x default"] if speedup else []
    if winner.remeasured is not None:
        notes.append(winner.value_is)
    text = f"t{winner.number:03d} {quantity(winner.value, unit)}"
    return f"{text} ({', '.join(notes)})" if notes else text


@dataclass
class Progress:
    """Counts trials and prints one line per finished trial.

    On a terminal a status line under the log (done/failed, best so far and its speedup, ETA,
    the trials running now) is redrawn in place; in a log file every line stays plain text.

    With several workers behind one display (``--gpus``), each call names its ``source`` (``gpu 1``):
    lines say which worker they are about, and ``workers`` measuring at once shorten the ETA.
    """

    budget: int | None
    deadline: float | None
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    pruned: int = 0
    failed: int = 0
    skipped: int = 0
    best: str = "none yet"
    workers: int = 1
    _started: float = field(default_factory=time.monotonic)
    _measured_s: float = 0.0
    _own_measured: int = 0
    _status: str = ""
    _running: dict[str, str] = field(default_factory=dict)  # source -> the label of its trial running now
    # What proposals that ran nothing were answered, said once each: an H200 llama sweep's search printed 44 lines of
    # one attention kernel's refusal; the repeats are counted (``skipped``, the summary's "not run"), not printed.
    _said_unrun: set[str] = field(default_factory=set)

    @property
    def live(self) -> bool:
        return self.stream.isatty()

    def eta(self) -> str:
        remaining = []
        if self.budget is not None and self._own_measured:
            per_trial = self._measured_s / self._own_measured / max(1, self.workers)
            remaining.append(per_trial * max(0, self.budget - self.done))
        if self.deadline is not None:
            remaining.append(self.deadline - time.time())
        return duration(min(remaining)) if remaining else "?"

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

    def message(self, line: str, source: str = "") -> None:
        self._emit(f"{source}: {line}" if source else line)

    def started(self, label: str, source: str = "") -> None:
        """A trial starts: redraw the status line (terminal only)."""
        self._running[source] = label
        self._status = self._status_line()
        self._redraw()

    def _redraw(self) -> None:
        """The status line drawn again (terminal only)."""
        if self.live:
            width = shutil.get_terminal_size().columns
            self.stream.write("\r\x1b[2K" + self._status[: width - 1])
            self.stream.flush()

    def finished(
        self, label: str, outcome: str, seconds: float, measured: bool, counts: Tally, best: str, source: str = ""
    ) -> None:
        """A trial ended. ``counts`` tally the study's measured trials (every worker's);
        the ETA uses the measured trials' times of the workers behind this display."""
        if measured:
            self._own_measured += 1
            self._measured_s += seconds
        else:
            self.skipped += 1
        self.done, self.pruned, self.failed = counts.measured, counts.pruned, counts.failed
        self.best = best
        self._running.pop(source, None)
        self._status = self._status_line()
        if not measured and outcome in self._said_unrun:
            self._redraw()
            return
        if not measured:
            self._said_unrun.add(outcome)
        who = f"{source} {label}" if source else label
        self._emit(f"{self._counts()} {who}: {outcome} ({duration(seconds)}) | best {best}")

    def _status_line(self) -> str:
        running = ", ".join(f"{source} {label}" if source else label for source, label in self._running.items())
        return f"{self._counts()} best {self.best}{f' | running {running}' if running else ''} | ETA {self.eta()}"

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
