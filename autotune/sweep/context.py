"""What the parts of one sweep worker share: the study and its records, the space, the executor, the mirrors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import optuna

from autotune.records import StudyInfo, StudyRecords
from autotune.space import Space
from autotune.sweep.options import Executor, SweepOptions
from autotune.views.progress import Progress

if TYPE_CHECKING:
    from autotune.tracking import SweepTracker

__all__ = ["Stage", "SweepContext"]


@dataclass(frozen=True)
class SweepContext:
    """One worker's sweep: everything its proposal loop and finishing stages read or write."""

    space: Space
    options: SweepOptions
    study: optuna.Study
    storage: optuna.storages.BaseStorage
    info: StudyInfo
    records: StudyRecords  # the worker's incremental read of the study: every figure it shows comes from here
    executor: Executor
    progress: Progress
    tracker: SweepTracker | None


class Stage(Protocol):
    """A finishing stage: runs once after the proposal loop, over what the study holds.

    Stages run in order (re-measure first, so later ones see re-measured ranks); each must tolerate
    a study that other workers finish too, and a sweep resumed after it already ran.
    """

    name: str

    def run(self, ctx: SweepContext) -> None: ...
