"""What a sweep is asked to do (:class:`SweepOptions`) and what it reports at the end (:class:`SweepSummary`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from autotune.errors import AutotuneError
from autotune.measurement import TrialResult
from autotune.records import Rehearsal, Tally, TimeShares
from autotune.space import Space
from autotune.storage import studies as studyio
from autotune.trial.pruning import Pruning

__all__ = ["DEFAULT_TRIALS", "Executor", "Role", "SweepOptions", "SweepSummary", "study_name"]

DEFAULT_TRIALS = 20  # when neither the space nor the command sets a budget
# How a measured trial runs: (params, timeout in seconds, when to stop it early) -> its result.
Executor = Callable[[dict[str, Any], float, Pruning | None], TrialResult]
Role = Literal["all", "search", "finish"]  # what a worker does: search, run the finishing stages, or both


@dataclass(frozen=True)
class SweepOptions:
    """What the command line adds to a space; None means the space's own setting."""

    study_name: str | None = None
    storage: str = studyio.DEFAULT_STORAGE
    n_trials: int | None = None
    timeout_s: float | None = None
    device: str | None = None
    seed: int | None = None
    replay: Path | None = None
    tracking: bool = True
    tracking_uri: str | None = None
    memory_cap_gib: float | None = None
    remeasure_top: int = 3
    remeasure_repeats: int = 3
    patience: int | None = None  # stop after this many measured trials in a row without a new best
    prune_ratio: float = 0.5  # stop a trial after warm-up below this fraction of the best throughput; 0: never
    profile_steps: int = 0  # at the end, profile the default and the winner over this many steps; 0: don't
    # One worker process per entry, each pinned to that GPU (CUDA_VISIBLE_DEVICES): nvidia-smi indices or UUIDs.
    gpus: tuple[str, ...] = ()
    # Another study of the same storage whose measured trials the sampler starts from (autotune.search.evidence).
    warm_start: str | None = None
    # After the default, measure what an expert would try first on this device
    # (autotune.sweep.proposals.informed_start).
    informed_start: bool = True
    # At the end, run the winner's production start once, from its compile artifacts, and ship what that start saved
    # (autotune.sweep.stages.rehearsal).
    rehearse_start: bool = True
    # At the end, write the study's HTML report and its PNGs beside the storage (autotune.sweep.stages.report); the
    # `autotune report` command writes the same page at any time.
    report: bool = True
    # Compile the search's next graphs on the idle CPU while trials run (autotune.sweep.proposals.compile_ahead); None:
    # where it pays.
    compile_ahead: bool | None = None
    # The sweep's end (time.time()), where one process set it for others: a --gpus orchestrator for its workers,
    # so that a worker started later (the finishing one) keeps the sweep's time limit. None: now + the timeout.
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.profile_steps < 0:
            raise ValueError(f"profile_steps must be >= 0, got {self.profile_steps=}")
        if self.profile_steps and self.replay is not None:
            raise AutotuneError("--profile runs real trials: it cannot be combined with --replay")
        if self.gpus and self.replay is not None:
            raise AutotuneError("--gpus runs real trials: it cannot be combined with --replay")
        if self.gpus and self.storage == "memory":
            raise AutotuneError("--gpus workers share the study through its storage: use sqlite:/// or postgresql://")
        if self.warm_start is not None and self.storage == "memory":
            raise AutotuneError("--warm-start reads the other study from --storage: use sqlite:/// or postgresql://")


@dataclass
class SweepSummary:
    """How a sweep ended, for the command's last lines: the record model's answers at the end, rendered."""

    study_name: str
    stop_reason: str = ""
    wall_s: float = 0.0  # this run's wall time (a resumed study's earlier runs not counted)
    resumed_with: int = 0  # measured trials the study held when this run started: its wall time is not theirs
    tally: Tally = field(default_factory=lambda: Tally(0, 0, 0))
    skipped: int = 0  # proposals that ran nothing: duplicates, rejected, surplus
    best_trial: int | None = None
    best_value: float | None = None
    best_value_is: str = ""  # "median of 3 re-measurements" or "one measurement"
    speedup: float | None = None
    best_tflops: float | None = None  # the winner's achieved TFLOP/s (its model FLOPs counted), as ranked
    best_mfu: float | None = None  # ... as a fraction of the GPU's dense peak
    faster_infeasible: int = 0  # ok trials that measured better than the winner but broke a constraint
    leaderboard: str = ""
    time: TimeShares = field(default_factory=TimeShares)  # where the measured trials' time went (every worker's)
    # Trial time (s) and measured trials until the first within 2% of the winner: what finding the answer cost.
    to_within_2pct: tuple[float, int] | None = None
    kernels_never_run: list[str] = field(default_factory=list)  # listed kernels no finished trial launched
    start: Rehearsal | None = None  # the winner's production start, rehearsed (autotune.sweep.stages.rehearsal)

    @property
    def measured(self) -> int:
        return self.tally.measured

    @property
    def pruned(self) -> int:
        return self.tally.pruned

    @property
    def failed(self) -> int:
        return self.tally.failed

    @property
    def trial_s(self) -> float:
        return self.time.trial_s

    @property
    def compile_s(self) -> float:
        return self.time.compile_s

    @property
    def pruned_s(self) -> float:
        return self.time.pruned_s

    @property
    def pruned_share(self) -> float | None:
        """The share of trial time spent in trials that ended pruned (None before any trial ran)."""
        return self.time.pruned_share


def study_name(space: Space, options: SweepOptions) -> str:
    """``--study``, else the space file's name (``-replay`` added for a replayed sweep)."""
    return options.study_name or space.path.stem + ("-replay" if options.replay else "")
