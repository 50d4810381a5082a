"""Profile a study: its PyTorch-default trial and its winner, each run again in an isolated process.

The trials are chosen from the leaderboard (the winner is rank 1, re-measured medians respected) and
run as the sweep runs them (same workload, preset, device, workload args and listed kernels), with
``profile_steps`` asking the trial job to profile that many steps after its timed window. Each run's
Chrome trace is written to ``<out>/<label>/trace.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError
from autotune.profiling.table import ProfiledTrial, markdown, render, speedup
from autotune.records import StudyInfo
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner
from autotune.views.leaderboard import LeaderboardRow, leaderboard

if TYPE_CHECKING:
    import optuna

    from autotune.space import Space
    from autotune.tracking import SweepTracker

__all__ = ["DEFAULT_STEPS", "ProfileFailed", "StudyProfile", "pick_trials", "profile_study", "space_of"]

DEFAULT_STEPS = 5


class ProfileFailed(Exception):
    """A profile run ended without a profile (oom, timeout, crash ...): one line says which and why."""


@dataclass(frozen=True)
class StudyProfile:
    """The default and the winner profiled, the table and where the traces are."""

    title: str
    before: ProfiledTrial
    after: ProfiledTrial
    table: str
    folder: Path

    def text(self) -> str:
        """The table and where the traces are, for a terminal."""
        return f"{self.table}traces (open them in https://ui.perfetto.dev): {self.folder}"

    def log(self, tracker: SweepTracker) -> bool:
        """The table (``profile/profile.md``), the traces (``profile/<label>/trace.json``) and the key
        figures onto the study's MLflow parent run; False when there is none or MLflow is unreachable."""
        files = {f"profile/{label}": path for label, path in self.traces().items()}
        texts = {"profile/profile.md": markdown(self.table, self.title)}
        return tracker.add_to_sweep_run(self.key_figures(), texts, files)

    def traces(self) -> dict[str, Path]:
        """Label -> the Chrome trace file the run wrote (missing files left out)."""
        paths = {side.label: side.profile.get("trace") for side in (self.before, self.after)}
        return {label: Path(path) for label, path in paths.items() if path and Path(path).is_file()}

    def key_figures(self) -> dict[str, float]:
        """Step times, each category's share of the step, and the speedup: metrics for the parent run."""
        figures: dict[str, float] = {}
        gain = speedup(self.before, self.after)
        if gain is not None:
            figures["profile_speedup"] = gain
        for side in (self.before, self.after):
            step_ms = float(side.profile["step_ms"])
            figures[f"profile_{side.label}_step_ms"] = step_ms
            for key, ms in side.profile["categories_ms"].items():
                if ms is not None and step_ms > 0:
                    figures[f"profile_{side.label}_{key}_share"] = ms / step_ms
        return figures


def _is_kernel_workload(info: StudyInfo, rows: list[LeaderboardRow]) -> bool:
    """A kernel workload times itself (no training step, no ``step_ms_p50``)."""
    return info.workload == "triton_matmul" or any(r.ok and "step_ms_p50" not in r.metrics for r in rows)


def pick_trials(study: optuna.Study, info: StudyInfo) -> tuple[LeaderboardRow, LeaderboardRow]:
    """The study's ok PyTorch-default trial and its winner; :class:`AutotuneError` when either is missing."""
    name = study.study_name
    rows = leaderboard(study, info)
    if _is_kernel_workload(info, rows):
        raise AutotuneError(
            f"study {name!r} tunes a kernel workload ({info.workload}): it has no training step to profile"
        )
    default = next((row for row in rows if row.default), None)
    if default is None:
        raise AutotuneError(f"study {name!r} has no measured PyTorch-default trial to profile against")
    if not default.ok:
        raise AutotuneError(
            f"the PyTorch-default trial {default.trial} of study {name!r} did not succeed "
            f"({default.status}: {default.reason}): there is no baseline to profile"
        )
    winner = next((row for row in rows if row.rank == 1), None)
    if winner is None:
        raise AutotuneError(f"study {name!r} has no winner (no feasible ok trial) to profile")
    return default, winner


def space_of(info: StudyInfo) -> Space:
    """The study's space from the text stored on it (see :meth:`StudyInfo.space`)."""
    return info.space()


def _spec(info: StudyInfo, space: Space, params: dict[str, Any], steps: int, folder: Path) -> TrialSpec:
    return TrialSpec(
        info.workload,
        params,
        info.preset,
        info.device,
        dict(space.workload.args),
        kernels=tuple(kernel.path for kernel in space.kernels),
        profile_steps=steps,
        profile_dir=str(folder),
    )


def profile_study(
    study: optuna.Study,
    info: StudyInfo,
    space: Space,
    out_dir: Path,
    *,
    steps: int = DEFAULT_STEPS,
    runner: TrialRunner | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> StudyProfile:
    """Profile the default and the winner of ``study`` (see the module docstring); ``say`` hears progress.

    Raises :class:`AutotuneError` when the study has nothing to profile and :class:`ProfileFailed`
    when a profile run fails.
    """
    if steps < 1:
        raise AutotuneError(f"steps={steps} is not valid: expected a whole number >= 1")
    runner = runner or TrialRunner()
    out_dir, sides, device = out_dir.absolute(), [], info.device
    for label, row in zip(("default", "winner"), pick_trials(study, info), strict=True):
        say(f"profiling the {label} (trial {row.trial}): {steps} steps after its timed window, in a fresh process")
        spec = _spec(info, space, row.params, steps, out_dir / label)
        # Twice the trial timeout: the run measures as a trial does, then profiles and writes its trace.
        result = runner.run(spec, 2 * space.budget.trial_timeout_s)
        profile = result.extra.get("profile") if result.ok else None
        if not profile:
            why = f"{result.status.value}: {result.reason}" if not result.ok else "; ".join(result.warnings)
            raise ProfileFailed(f"profiling the {label} (trial {row.trial}) failed: {why or 'no profile came back'}")
        sides.append(ProfiledTrial(label, row.trial, dict(result.params), dict(result.metrics), profile))
        device = result.env.get("gpu") or result.env.get("cpu") or info.device
    title = f"profile of study {study.study_name}: {info.workload} ({info.preset}) on {device}, {steps} steps each"
    return StudyProfile(title, sides[0], sides[1], render(sides[0], sides[1], title), out_dir)
