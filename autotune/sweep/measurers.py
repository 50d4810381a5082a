"""How a sweep's trial is measured: by a real trial in its own process (:mod:`autotune.trial_process`), or answered
from recorded measurements. Each is an ``Executor`` (:mod:`autotune.sweep.options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune import trial_process as trialrunner
from autotune.measurement import TrialResult
from autotune.search.replay import ReplayRecords
from autotune.search.replaytimes import TimedReplay
from autotune.space import Space
from autotune.sweep.options import Executor, SweepOptions, study_name
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.pruning import Pruning
from autotune.trial.trialspec import TrialSpec

__all__ = ["TrialExecutor", "replay_executor", "trial_executor"]


class TrialExecutor:
    """Each call runs one trial job in a fresh process forked from a torch-preloaded server.

    Trials compile into the study's own Inductor and Triton caches (:mod:`autotune.trial.compilecache`), so a
    repeat or a re-measurement of a compiled configuration finds its kernels there.
    """

    def __init__(self, space: Space, options: SweepOptions, warm: bool = True) -> None:
        """``warm``: start the trial server now, so that its imports overlap the sweep's set-up rather than delay the
        first trial (the default's); else the first trial starts it, and a process that runs none never does."""
        # Looked up here, so a test can swap the trial processes for its own.
        self.runner = trialrunner.TrialRunner(compiles=space.compiles)
        self.space = space
        self.options = options
        self.device = options.device or space.device
        self.cache = str(study_cache_dir(options.storage, study_name(space, options)))
        if warm:
            self.runner.warm()

    def spec(self, params: dict[str, Any], pruning: Pruning | None = None) -> TrialSpec:
        """The trial job of ``params``, as this sweep runs it."""
        workload = self.space.workload
        return TrialSpec(
            workload.name,
            params,
            workload.preset,
            self.device,
            dict(workload.args),
            memory_cap_gib=self.options.memory_cap_gib,
            pruning=pruning,
            kernels=tuple(kernel.path for kernel in self.space.kernels),
            compile_cache_dir=self.cache,
            gpus_per_trial=self.space.gpus_per_trial,
        )

    def __call__(self, params: dict[str, Any], timeout_s: float, pruning: Pruning | None) -> TrialResult:
        return self.runner.run(self.spec(params, pruning), timeout_s)


def trial_executor(space: Space, options: SweepOptions, warm: bool = True) -> TrialExecutor:
    """Real trials: see :class:`TrialExecutor`."""
    return TrialExecutor(space, options, warm)


def replay_executor(path: Path) -> Executor:
    """Each call answers from the records in ``path`` (see :mod:`autotune.search.replay`); nothing runs. Records
    with trial times are answered with them, the study's compile cache and pruning included
    (:mod:`autotune.search.replaytimes`)."""
    replay = TimedReplay(ReplayRecords.load(path))
    return lambda params, _timeout, pruning: replay.answer(params, pruning)
