"""The sweep's entry: one worker in this process, or (``--gpus``) one worker process per GPU under an orchestrator.

Above both :class:`~autotune.sweep.loop.Sweep` and :mod:`autotune.sweep.gpus.orchestrator`, so that a worker never
imports the launcher that starts it.
"""

from __future__ import annotations

import optuna

from autotune.errors import AutotuneError
from autotune.space import Space, machine_problems
from autotune.sweep.gpus.orchestrator import run_on_gpus
from autotune.sweep.loop import Sweep
from autotune.sweep.measurers import replay_executor, trial_executor
from autotune.sweep.options import SweepOptions, SweepSummary
from autotune.views.progress import Progress

__all__ = ["run_sweep"]


def run_sweep(
    space: Space,
    options: SweepOptions,
    progress: Progress | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
) -> SweepSummary:
    """Run (or resume) the sweep of ``space`` until its budget, its time limit or exhaustion.

    ``sampler`` overrides the space's (the search benchmark compares samplers this way). With
    ``options.gpus``, one worker process per GPU runs the sweep (:mod:`autotune.sweep.gpus.orchestrator`). A space
    whose trials this machine cannot run (float8 without torchao, or on a GPU without FP8), or ``--gpus`` with trials
    of several GPUs (``gpus_per_trial``), raises AutotuneError before the study opens.
    """
    if options.replay is None and (problems := machine_problems(space, options.device)):
        raise AutotuneError("\n".join(problems))
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress lines say what matters
    if options.gpus:
        if space.gpus_per_trial > 1:  # each worker sees one GPU; its trials' ranks need one each
            raise AutotuneError(
                f"--gpus runs one worker per GPU, and this space's trials take {space.gpus_per_trial} GPUs each "
                f"(gpus_per_trial: {space.gpus_per_trial}): run the sweep without --gpus"
            )
        if sampler is not None:
            raise ValueError("a sampler object cannot reach --gpus workers (other processes): name it in the space")
        return run_on_gpus(space, options, progress or Progress(None, None))
    executor = replay_executor(options.replay) if options.replay else trial_executor(space, options)
    return Sweep(space, options, executor, progress or Progress(None, None), sampler).run()
