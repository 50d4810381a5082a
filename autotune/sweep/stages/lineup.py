"""Which finishing stages a sweep runs, in which order, and whether any of them runs a trial: the two change together.

A new stage is listed in :func:`finishing_stages`, and counted in :func:`finishing_runs_trials` if it runs trials.
"""

from __future__ import annotations

from autotune.space import Space
from autotune.sweep.context import Stage, SweepContext
from autotune.sweep.options import SweepOptions
from autotune.sweep.stages.finalists import Finalists
from autotune.sweep.stages.profile import Profile
from autotune.sweep.stages.rehearsal import Rehearse
from autotune.sweep.stages.remeasure import Remeasure
from autotune.sweep.stages.report import Report
from autotune.sweep.stages.time_limit import TimeLimit

__all__ = ["finishing_runs_trials", "finishing_stages"]


def finishing_stages(ctx: SweepContext, time_limit: TimeLimit, deadline: float | None) -> list[Stage]:
    """The stages that run after the search, in order; ``deadline``: the sweep's time limit (time.time()), or None."""
    if ctx.options.replay:
        return [Report()]  # re-measuring recorded measurements would only repeat them
    options, finalists = ctx.options, ctx.space.finalists
    first = Remeasure(
        options.remeasure_top, options.remeasure_repeats, time_limit, finalists_after=finalists is not None
    )
    stages: list[Stage] = [first]
    if finalists is not None:
        # After re-measuring (the finalists are the re-measured top); a finalist that then ranks in the
        # top is re-measured too, so it competes by its median as the others do.
        stages += [Finalists(finalists, deadline), first.again()]
    if options.rehearse_start:
        stages.append(Rehearse(deadline))  # once the winner is settled: its artifacts are what ship
    if options.profile_steps:
        stages.append(Profile(options.profile_steps))  # after re-measuring: it names the winner
    return [*stages, Report()]  # last: it draws what the others measured


def finishing_runs_trials(space: Space, options: SweepOptions) -> bool:
    """Whether the finishing stages (:func:`finishing_stages`) may run a trial: re-measuring, finalists, profiling,
    the rehearsed start (only of a compiled winner: an eager one ships no compile artifacts to start from). A
    ``--gpus`` sweep's finishing worker starts its trial server only then."""
    if options.replay:
        return False
    rehearses = options.rehearse_start and space.compiles
    return bool(options.remeasure_top or options.profile_steps) or rehearses or space.finalists is not None
