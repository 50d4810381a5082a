"""Finishing stage (``--profile``): torch.profiler over the PyTorch-default trial and the winner, side by side.

Runs after re-measuring, so the winner is the one the leaderboard names. The table goes to the log
and, with the Chrome traces, to the MLflow parent run; the traces stay in ``profiles/<study>/``. A
pair profiled already (by an earlier run of this sweep, or another worker) is not profiled again.
"""

from __future__ import annotations

from pathlib import Path

from autotune.errors import AutotuneError
from autotune.records import schema
from autotune.sweep.context import SweepContext
from autotune.views.profile_study import ProfileFailed, pick_trials, profile_study

__all__ = ["Profile", "profile_folder"]


def profile_folder(study_name: str) -> Path:
    """Where a study's profile traces go unless told otherwise: ``profiles/<study>`` here."""
    return Path("profiles") / study_name


class Profile:
    """Profiles the default and the winner over ``steps`` steps each, in fresh processes."""

    name = "profile"

    def __init__(self, steps: int) -> None:
        if steps < 1:
            raise ValueError(f"profiling needs steps >= 1, got {steps=}")
        self.steps = steps

    def run(self, ctx: SweepContext) -> None:
        folder = profile_folder(ctx.study.study_name).absolute()
        try:
            default, winner = pick_trials(ctx.study, ctx.info)
            pair = {"default": default.trial, "winner": winner.trial}
            if ctx.study.user_attrs.get(schema.STUDY_ATTR_PROFILED) == pair:
                name = ctx.study.study_name
                ctx.progress.message(
                    f"profile: trials {default.trial} and {winner.trial} were profiled already "
                    f"(autotune profile --study {name} profiles them again)"
                )
                return
            profile = profile_study(ctx.study, ctx.info, ctx.space, folder, steps=self.steps, say=ctx.progress.message)
        except (AutotuneError, ProfileFailed) as exc:
            ctx.progress.message(f"profile: not made: {exc}")
            return
        ctx.progress.message(profile.text())
        if ctx.tracker is not None:
            profile.log(ctx.tracker)
        ctx.study.set_user_attr(schema.STUDY_ATTR_PROFILED, pair)
