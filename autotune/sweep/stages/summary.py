"""The end of a sweep: its summary rendered from the records; the study's winner attribute; the MLflow parent run
completed (missed trials, metrics, files, the description).

The summary says who won and by which figure (the re-measured median where there is one), how many faster
trials broke a constraint, and where the trials' time went (:class:`~autotune.records.TimeShares`: in all,
compiling, and in trials that ended pruned, which paid their compile and warm-up for nothing but the news
that they are slow: the sweep's aim is to keep that share at a tenth or less).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.numbers import flops_text, minutes, number
from autotune.records import StudyRecords, schema
from autotune.records.answers import kernel_never_run_warning
from autotune.storage.studies import DEFAULT_STORAGE, redact_url
from autotune.sweep.context import SweepContext
from autotune.sweep.options import SweepSummary
from autotune.views.export import export
from autotune.views.leaderboard import render, rows

__all__ = ["summarize", "summary_text", "winner_attr"]


def summarize(ctx: SweepContext, stop_reason: str, wall_s: float, resumed_with: int = 0) -> SweepSummary:
    """What the sweep found, from the whole study (every worker's trials and re-measurements); mirrored to
    the study's ``autotune.winner`` attribute and to MLflow. ``wall_s`` is this run's; ``resumed_with`` the measured
    trials the study held when it started."""
    records = ctx.records
    records.reread_remeasurements()  # every worker's, however they were shared out
    tally = records.tally()
    summary = SweepSummary(
        ctx.study.study_name, stop_reason=stop_reason, wall_s=wall_s, resumed_with=resumed_with, tally=tally
    )
    summary.skipped = records.total - tally.measured - len(records.running)
    summary.time = records.time()
    summary.faster_infeasible = len(records.faster_infeasible())
    summary.to_within_2pct = records.time_to_within(0.02)
    summary.kernels_never_run = records.kernels_never_run()
    winner = records.winner
    if winner is not None:
        summary.best_trial, summary.best_value = winner.number, winner.value
        summary.best_value_is, summary.speedup = winner.value_is, records.speedup(winner)
        summary.best_tflops, summary.best_mfu = winner.tflops, winner.mfu
        summary.start = winner.start_rehearsal
    table = rows(records)
    summary.leaderboard = render(table, ctx.info, "table", 10)
    attr = winner_attr(records)
    if ctx.study.user_attrs.get(schema.STUDY_ATTR_WINNER) != attr:
        ctx.study.set_user_attr(schema.STUDY_ATTR_WINNER, attr)
    if ctx.tracker is not None:
        _catch_up_tracking(ctx)
        with tempfile.TemporaryDirectory() as tmp:  # best_config.yaml's compile artifacts, logged beside it
            texts, files = _summary_artifacts(ctx, table, Path(tmp))
            ctx.tracker.finish(records, _summary_metrics(summary, winner), texts, files=files)
    return summary


def winner_attr(records: StudyRecords) -> dict[str, Any] | None:
    """The study attribute ``autotune.winner``: the winner where optuna-dashboard shows a study's attributes
    (Optuna's own ``best_trial`` knows only first measurements; the records rank by re-measured medians)."""
    winner = records.winner
    if winner is None:
        return None
    default = records.default
    return {
        "trial": winner.number,
        "metric": records.metric,
        "value": winner.value,
        "value_is": winner.value_is,
        "first_value": winner.first_values[0] if winner.first_values else None,
        "speedup": records.speedup(winner),
        "default_trial": default.number if default is not None else None,
    }


def _catch_up_tracking(ctx: SweepContext) -> None:
    """Log measured trials that MLflow missed (an outage, another worker that died)."""
    assert ctx.tracker is not None
    logged = ctx.tracker.logged_trial_numbers()
    if logged is None:
        return
    for record in ctx.records.measured:
        if record.number not in logged:
            ctx.tracker.log_trial(record, ctx.records.speedup(record))


def _summary_metrics(summary: SweepSummary, winner: Any) -> dict[str, float]:
    time = summary.time
    metrics: dict[str, float | None] = {
        "trials_measured": summary.tally.measured,
        "trials_pruned": summary.tally.pruned,
        "trials_failed": summary.tally.failed,
        "trials_infeasible": summary.tally.infeasible,
        "wall_s": summary.wall_s,
        "trial_s": time.trial_s,
        "compile_s": time.compile_s,
        "pruned_trial_s": time.pruned_s,
        "pruned_trial_share": time.pruned_share,
        "compile_share": time.compile_share,
        "compiled_ahead_trials": time.ahead.trials,
        "compile_ahead_wait_s": time.ahead.wait_s,
        "time_to_within_2pct_s": summary.to_within_2pct[0] if summary.to_within_2pct else None,
        "best_value": summary.best_value,
        "speedup_vs_default": summary.speedup,
        "best_tflops": summary.best_tflops,
        "best_mfu": summary.best_mfu,
    }
    if winner is not None and winner.remeasured is not None and winner.remeasured.cv is not None:
        metrics["best_remeasured_cv"] = winner.remeasured.cv
    if summary.start is not None and summary.start.ok:
        metrics["start_s"] = summary.start.start_s
    return {k: float(v) for k, v in metrics.items() if v is not None}


def _summary_artifacts(ctx: SweepContext, table: list[Any], folder: Path) -> tuple[dict[str, str], list[Path]]:
    """The parent run's text artifacts, and its files: the winner's compile artifacts (written in ``folder``)."""
    artifacts = {"leaderboard.csv": render(table, ctx.info, "csv", None)}
    files: list[Path] = []
    if ctx.records.winner is not None:
        path = folder / "best_config.yaml"
        storage = ctx.options.storage  # redacted in the file
        try:
            config = export(ctx.study, ctx.info, path, storage=storage, records=ctx.records)
        except AutotuneError:  # the winner's compile artifacts file was changed: the config is logged without it
            config = export(ctx.study, ctx.info, path, storage=storage, records=ctx.records, artifacts=None)
        artifacts["best_config.yaml"] = path.read_text()
        if config.compile_artifacts:
            files.append(folder / config.compile_artifacts["file"])
    return artifacts, files


def _outcomes(summary: SweepSummary) -> str:
    tally = summary.tally
    infeasible = f" ({tally.infeasible} broke a constraint)" if tally.infeasible else ""
    pruned = f", {tally.pruned} pruned" if tally.pruned else ""
    return f"{tally.ok} ok{infeasible}{pruned}, {tally.failed} failed"


def _this_run(summary: SweepSummary) -> str:
    """Whose time the wall time is, where the study was resumed: this run's only."""
    held = summary.resumed_with
    return f" (this run; it resumed a study of {held} measured trial{'s' if held != 1 else ''})" if held else ""


def summary_text(summary: SweepSummary, storage: str) -> str:
    """The last lines of a sweep: why it stopped, the winner, the leaderboard, what to run next."""
    lines = [
        f"sweep {summary.study_name}: {summary.stop_reason} in {minutes(summary.wall_s)}{_this_run(summary)}; "
        f"{summary.measured} measured ({_outcomes(summary)}), {summary.skipped} not run (duplicates, rejected)",
    ]
    if summary.best_trial is not None and summary.best_value is not None:
        speedup = f", {summary.speedup:.2f}x the PyTorch defaults" if summary.speedup else ""
        limit = flops_text(summary.best_tflops, summary.best_mfu)
        lines.append(
            f"best: trial {summary.best_trial} ({number(summary.best_value)}, {summary.best_value_is}{speedup})"
            + (f"; {limit}" if limit else "")
        )
    if summary.faster_infeasible:
        lines.append(f"{summary.faster_infeasible} trial(s) measured faster but broke a constraint: they do not rank")
    if economy := summary.time.line():
        lines.append(economy)
    lines += summary.time.detail_lines()
    if summary.to_within_2pct is not None:
        seconds, trials = summary.to_within_2pct
        lines.append(f"within 2% of the winner after {minutes(seconds)} of trial time ({trials} measured trials)")
    if (start := summary.start) is not None and start.ok and start.start_s is not None:
        took = "to load them and compile the first steps" if start.loaded else "to compile the first steps from scratch"
        lines.append(
            f"production start (rehearsed: a fresh process, empty compile caches, the compile artifacts that ship):"
            f" {start.start_s:.1f} s {took}"
        )
    lines += [kernel_never_run_warning(path) for path in summary.kernels_never_run]
    store = "" if storage == DEFAULT_STORAGE else f" --storage '{redact_url(storage)}'"
    lines += ["", summary.leaderboard]
    if storage != "memory":  # an in-memory study is gone when the sweep ends
        lines += ["", f"next: autotune export --study {summary.study_name}{store} -o tuned.yaml"]
    return "\n".join(lines)
