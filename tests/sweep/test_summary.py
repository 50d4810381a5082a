"""The sweep's summary accounts for its trials' time: in all, compiling, and in trials that ended pruned."""

from __future__ import annotations

from pathlib import Path

import optuna
from trial_workloads import outlier_space

from autotune import report, studyio
from autotune.results import Status
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.options import SweepSummary
from autotune.sweep.summary import economy_line


def test_summary_shows_the_time_in_pruned_trials(tmp_path: Path) -> None:
    space = tmp_path / "outlier.yaml"
    space.write_text(outlier_space(tmp_path / "marker", ("steady", "slow")))  # slow: 6x the steady step
    storage = f"sqlite:///{tmp_path}/study.db"
    summary = run_sweep(load_space(space), SweepOptions(storage=storage, tracking=False, remeasure_top=0))

    study = optuna.load_study(study_name="outlier", storage=storage)
    trials = {studyio.trial_params(t)["config"]: t for t in studyio.measured_trials(study)}
    slow = studyio.trial_result(trials["slow"])
    assert slow is not None and slow.status is Status.PRUNED
    assert "compile_s" in slow.metrics  # what a pruned trial paid before it was stopped is on record too
    durations = {name: t.duration.total_seconds() for name, t in trials.items() if t.duration is not None}
    assert summary.trial_s == sum(durations.values()) and summary.pruned_s == durations["slow"]
    assert 0 < summary.pruned_s < summary.trial_s
    results = [studyio.trial_result(t) for t in trials.values()]
    assert summary.compile_s == sum(r.metrics["compile_s"] for r in results if r is not None)
    share = f"in trials that ended pruned {summary.pruned_s / 60:.1f} min ({summary.pruned_s / summary.trial_s:.0%})"
    assert share in report.sweep_summary(summary, storage)


def test_economy_line_shares_of_trial_time() -> None:
    summary = SweepSummary("s", trial_s=600.0, compile_s=150.0, pruned_s=30.0)
    assert (
        economy_line(summary)
        == "trial time 10.0 min: compiling 2.5 min (25%), in trials that ended pruned 0.5 min (5%)"
    )
    assert summary.pruned_share == 0.05
    assert economy_line(SweepSummary("s")) is None and SweepSummary("s").pruned_share is None
