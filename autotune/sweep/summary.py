"""The end of a sweep: its summary from the study; the MLflow parent run completed (missed trials, metrics, files).

The summary says where the trials' time went: in all (each measured trial from its start to its
record, every worker's, so with one GPU per worker it is GPU time), compiling (``compile_s`` of each
trial), and in trials that ended pruned. Those paid their compile and warm-up for nothing but the
news that they are slow: the sweep's aim is to keep that share at a tenth or less.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autotune import studyio
from autotune.results import Status
from autotune.sweep.context import SweepContext
from autotune.sweep.ledger import MeasuredTrial
from autotune.sweep.options import SweepSummary
from autotune.sweep.recorder import trial_tags

__all__ = ["account_time", "economy_line", "summarize"]


def summarize(ctx: SweepContext, stop_reason: str, wall_s: float) -> SweepSummary:
    """What the sweep found, from the whole study (every worker's trials); mirrored to MLflow."""
    from autotune.leaderboard import leaderboard, render

    rows = leaderboard(ctx.study, ctx.info)
    ctx.ledger.refresh()
    counts = ctx.ledger.tally()
    summary = SweepSummary(ctx.study.study_name, stop_reason=stop_reason, wall_s=wall_s)
    summary.measured, summary.pruned, summary.failed = counts.measured, counts.pruned, counts.failed
    summary.skipped = ctx.ledger.total - counts.measured
    best = next((r for r in rows if r.rank == 1), None)
    if best is not None:
        summary.best_trial, summary.best_value, summary.speedup = best.trial, best.value, best.speedup
    summary.leaderboard = render(rows, ctx.info, "table", 10)
    account_time(ctx.ledger.measured, summary)
    if ctx.tracker is not None:
        _catch_up_tracking(ctx)
        ctx.tracker.finish(_summary_metrics(ctx, summary), _summary_artifacts(ctx, rows), winner=summary.best_trial)
    return summary


def account_time(measured: Iterable[MeasuredTrial], summary: SweepSummary) -> None:
    """Add up trial time, compile time and time in pruned trials over ``measured`` (a study's measured trials)."""
    for entry in measured:
        duration = entry.trial.duration
        seconds = duration.total_seconds() if duration is not None else 0.0
        summary.trial_s += seconds
        compile_s = entry.result.metrics.get("compile_s")
        if isinstance(compile_s, int | float):
            summary.compile_s += float(compile_s)
        if entry.result.status is Status.PRUNED:
            summary.pruned_s += seconds


def economy_line(summary: SweepSummary) -> str | None:
    """``trial time 12.4 min: compiling 3.1 min (25%), in trials that ended pruned 0.8 min (6%)``; None before any."""
    if summary.trial_s <= 0:
        return None
    total = summary.trial_s

    def part(seconds: float) -> str:
        return f"{seconds / 60:.1f} min ({seconds / total:.0%})"

    return (
        f"trial time {total / 60:.1f} min: compiling {part(summary.compile_s)}, "
        f"in trials that ended pruned {part(summary.pruned_s)}"
    )


def _catch_up_tracking(ctx: SweepContext) -> None:
    """Log measured trials that MLflow missed (an outage, another worker that died)."""
    assert ctx.tracker is not None
    logged = ctx.tracker.logged_trial_numbers()
    if logged is None:
        return
    for entry in ctx.ledger.measured:
        if entry.number not in logged:
            trial = entry.trial
            ctx.tracker.log_trial(trial.number, entry.result, studyio.trial_params(trial), trial_tags(trial.user_attrs))


def _summary_metrics(ctx: SweepContext, summary: SweepSummary) -> dict[str, float]:
    metrics: dict[str, float] = {
        "trials_measured": summary.measured,
        "trials_pruned": summary.pruned,
        "trials_failed": summary.failed,
        "wall_s": summary.wall_s,
        "trial_s": summary.trial_s,
        "compile_s": summary.compile_s,
        "pruned_trial_s": summary.pruned_s,
    }
    if summary.pruned_share is not None:
        metrics["pruned_trial_share"] = summary.pruned_share
    if summary.best_trial is not None:
        best = ctx.study.get_trials(deepcopy=False)[summary.best_trial]
        again = studyio.remeasured(ctx.study, best) or {}
        if "cv" in again:
            metrics["best_remeasured_cv"] = again["cv"]
    if summary.best_value is not None:
        metrics["best_value"] = summary.best_value
    if summary.speedup is not None:
        metrics["speedup_vs_default"] = summary.speedup
    return {k: float(v) for k, v in metrics.items()}


def _summary_artifacts(ctx: SweepContext, rows: list[Any]) -> dict[str, str]:
    from autotune.export import export
    from autotune.leaderboard import render

    artifacts = {"leaderboard.csv": render(rows, ctx.info, "csv", None)}
    if any(r.rank == 1 for r in rows):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "best_config.yaml"
            export(ctx.study, ctx.info, path, storage=ctx.options.storage)  # export redacts it
            artifacts["best_config.yaml"] = path.read_text()
    return artifacts
