"""The sweep's summary accounts for its trials' time: in all, compiling, and in trials that ended pruned."""

from __future__ import annotations

from pathlib import Path

import optuna
from study_records import measured_records
from trial_workloads import outlier_space

from autotune.measurement import Status
from autotune.records import Rehearsal
from autotune.records.timeshares import OutcomeTime, TimeShares
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.options import SweepSummary
from autotune.sweep.stages.summary import summary_text


def test_summary_shows_the_time_in_pruned_trials(tmp_path: Path) -> None:
    space = tmp_path / "outlier.yaml"
    space.write_text(outlier_space(tmp_path / "marker", ("steady", "slow")))  # slow: 6x the steady step
    storage = f"sqlite:///{tmp_path}/study.db"
    summary = run_sweep(load_space(space), SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=0))

    study = optuna.load_study(study_name="outlier", storage=storage)
    trials = {t.params["config"]: t for t in measured_records(study)}
    slow = trials["slow"].result
    assert slow is not None and slow.status is Status.PRUNED
    assert "compile_s" in slow.metrics  # what a pruned trial paid before it was stopped is on record too
    durations = {name: t.duration_s for name, t in trials.items()}
    assert summary.trial_s == sum(durations.values()) and summary.pruned_s == durations["slow"]
    assert 0 < summary.pruned_s < summary.trial_s
    # These trials run eagerly: their warm-up above the steady step is not compile time.
    assert summary.compile_s == sum(t.compile_s for t in trials.values()) == 0
    share = f"in trials that ended pruned {summary.pruned_s / 60:.1f} min ({summary.pruned_s / summary.trial_s:.0%})"
    assert share in summary_text(summary, storage)
    assert summary.resumed_with == 0 and "this run" not in summary_text(summary, storage)
    # run again on the study: its wall time is this run's, and the summary says so
    again = run_sweep(load_space(space), SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=0))
    measured = summary.tally.measured
    assert again.resumed_with == measured > 0 and again.tally.measured == measured
    assert f"(this run; it resumed a study of {measured} measured trials)" in summary_text(again, storage)


def test_economy_line_shares_of_trial_time() -> None:
    time = TimeShares(ok=OutcomeTime(570.0, 140.0), pruned=OutcomeTime(30.0, 10.0))
    summary = SweepSummary("s", time=time)
    assert time.line() == "trial time 10.0 min: compiling 2.5 min (25%), in trials that ended pruned 0.5 min (5%)"
    assert summary.pruned_share == 0.05
    assert SweepSummary("s").time.line() is None and SweepSummary("s").pruned_share is None


def test_the_summary_says_what_the_rehearsed_start_took() -> None:
    summary = SweepSummary("s", start=Rehearsal("a" * 64, "ok", loaded=True, start_s=9.75, load_s=1.5))
    assert (
        "production start (rehearsed: a fresh process, empty compile caches, the compile artifacts that ship):"
        " 9.8 s to load them and compile the first steps"
    ) in summary_text(summary, "memory")
    failed = SweepSummary("s", start=Rehearsal("a" * 64, "timeout", reason="the start took more than 1 s"))
    assert "production start" not in summary_text(failed, "memory")  # the stage said why when it ran
