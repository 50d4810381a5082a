"""What a ``--gpus`` worker process tells the orchestrator, over the socket between them.

Life cycle: the orchestrator sends the worker its :class:`WorkerJob`; the worker
then sends any number of progress events (:data:`Progressed`: a line, a trial started, a trial finished),
then exactly one :data:`Ending` (how it ended), and closes the socket. A worker killed before its ending
sends none: the orchestrator learns how it died from its exit code. Events are pickled dataclasses, so both
sides agree on their fields and a type checker checks every use.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.records import Tally
from autotune.space import Space
from autotune.sweep.options import Role, SweepOptions, SweepSummary

__all__ = [
    "BadInput",
    "Done",
    "Ending",
    "Failed",
    "Progressed",
    "Role",
    "Said",
    "Stopped",
    "TrialFinished",
    "TrialStarted",
    "WorkerEvent",
    "WorkerJob",
]


@dataclass(frozen=True)
class WorkerJob:
    """What one worker runs: the space, its own options (its seed), its device, and its part of the sweep."""

    space: Space
    options: SweepOptions
    entry: str  # the --gpus entry: this process's CUDA_VISIBLE_DEVICES
    device_type: str  # cuda, or cpu (CPU workers, as the tests run them)
    role: Role = "search"  # search; or finish: the finishing stages, once every search worker has ended


@dataclass(frozen=True)
class Said:
    """A line for the display (a retried orphan, a finishing stage's message)."""

    line: str


@dataclass(frozen=True)
class TrialStarted:
    """The worker started measuring the trial ``label`` names."""

    label: str


@dataclass(frozen=True)
class TrialFinished:
    """A trial ended: its progress line's parts, the study's tally and the winner as the worker read them."""

    label: str
    outcome: str
    seconds: float
    measured: bool
    counts: Tally
    best: str


@dataclass(frozen=True)
class Done:
    """The worker's part of the sweep ended: its summary, and why its device was taken out (None: it was not)."""

    summary: SweepSummary
    device_failure: str | None


@dataclass(frozen=True)
class Stopped:
    """A stop signal sent to the worker alone ended it (its running trial is recorded as interrupted)."""


@dataclass(frozen=True)
class BadInput:
    """The worker met bad input (a study made for another workload, say): one line for the user."""

    line: str


@dataclass(frozen=True)
class Failed:
    """The worker ended on a bug: its one line and, for AUTOTUNE_DEBUG, the traceback."""

    line: str
    traceback: str


Progressed = Said | TrialStarted | TrialFinished
Ending = Done | Stopped | BadInput | Failed
WorkerEvent = Progressed | Ending
