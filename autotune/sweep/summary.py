"""The end of a sweep: its summary from the study; the MLflow parent run completed (missed trials, metrics, files)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from autotune import studyio
from autotune.sweep.context import SweepContext
from autotune.sweep.options import SweepSummary
from autotune.sweep.recorder import trial_tags

__all__ = ["summarize"]


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
    if ctx.tracker is not None:
        _catch_up_tracking(ctx)
        ctx.tracker.finish(_summary_metrics(ctx, summary), _summary_artifacts(ctx, rows))
    return summary


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
    }
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
