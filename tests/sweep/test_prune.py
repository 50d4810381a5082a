"""Pruning: a trial already far slower than the best after warm-up is stopped before its timing."""

from __future__ import annotations

import io
import os
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from study_records import measured_records
from trial_workloads import outlier_space

from autotune.records import TrialRecord, schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, SweepSummary, run_sweep
from autotune.views.progress import Progress


def sweep(tmp_path: Path, prune_ratio: float) -> tuple[optuna.Study, SweepSummary, str]:
    """The study, the summary and the progress log of a sweep over ``steady`` and ``slow``."""
    space_file = tmp_path / "prune.yaml"
    space_file.write_text(outlier_space(tmp_path / "marker", ("steady", "slow")))
    storage = f"sqlite:///{tmp_path}/prune-{prune_ratio}.db"
    options = SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=0, prune_ratio=prune_ratio)
    log = io.StringIO()
    summary = run_sweep(load_space(space_file), options, Progress(None, None, log))
    return optuna.load_study(study_name="prune", storage=storage), summary, log.getvalue()


def run(tmp_path: Path, prune_ratio: float) -> optuna.Study:
    return sweep(tmp_path, prune_ratio)[0]


@pytest.fixture(scope="module")
def pruning(tmp_path_factory: pytest.TempPathFactory) -> tuple[optuna.Study, SweepSummary, str]:
    """One sweep with pruning at half the best, which the tests below only read."""
    return sweep(tmp_path_factory.mktemp("prune"), prune_ratio=0.5)


def by_config(study: optuna.Study) -> dict[str, optuna.trial.FrozenTrial]:
    """The measured trials as Optuna holds them, by their configuration."""
    return {r.params["config"]: study.trials[r.number] for r in measured_records(study)}


def records_by_config(study: optuna.Study) -> dict[str, TrialRecord]:
    """The measured trials as every view reads them, by their configuration."""
    return {r.params["config"]: r for r in measured_records(study)}


def test_a_trial_far_below_the_best_is_pruned_after_warm_up(pruning: tuple[optuna.Study, SweepSummary, str]) -> None:
    trials = by_config(pruning[0])
    assert trials["steady"].state is TrialState.COMPLETE
    slow = trials["slow"]
    assert slow.state is TrialState.PRUNED
    assert slow.user_attrs[schema.ATTR_STATUS] == "pruned"
    assert "below" in slow.user_attrs[schema.ATTR_REASON]
    assert len(slow.intermediate_values) >= 3  # the warm-up steps, reported to Optuna
    # Six times slower than the best: two steps after the first showed it (even twice as fast, under half the best),
    # so its warm-up stopped there rather than wait for five steps to settle.
    assert records_by_config(pruning[0])["slow"].first_metrics["warmup_steps"] == 3
    records = records_by_config(pruning[0])
    steady_throughput = records["steady"].first_metrics["throughput"]
    assert max(slow.intermediate_values.values()) < 0.5 * steady_throughput
    pruned = records["slow"].result
    assert pruned is not None and "timed_steps" not in pruned.metrics
    assert pruned.env["device"] == "cpu" and pruned.metrics["peak_mem_gib"] > 0  # where it ran, what it took


def test_a_pruned_trial_is_counted_as_pruned_not_failed(pruning: tuple[optuna.Study, SweepSummary, str]) -> None:
    _, summary, log = pruning
    assert (summary.measured, summary.pruned, summary.failed) == (2, 1, 0)
    assert "[2/2 done, 1 pruned, 0 failed]" in log


def test_pruning_can_be_turned_off(tmp_path: Path) -> None:
    trials = records_by_config(run(tmp_path, prune_ratio=0.0))
    assert trials["slow"].state is TrialState.COMPLETE
    assert trials["slow"].first_metrics["timed_steps"] >= 10


def test_a_pruned_configuration_is_not_measured_again(tmp_path: Path) -> None:
    """Pruned trials were measured (up to their warm-up): proposing them again must not re-run them."""
    space_file = tmp_path / "prune.yaml"
    text = (
        outlier_space(tmp_path / "marker", ("steady", "slow"))
        .replace("trials: 2", "trials: 3")
        .replace("grid", "random")
    )
    space_file.write_text(text)  # random re-proposes both configurations; a grid would stop at its size
    storage = f"sqlite:///{tmp_path}/again.db"
    options = SweepOptions(report=False, storage=storage, tracking=False, remeasure_top=0, prune_ratio=0.5, seed=0)
    with open(os.devnull, "w") as quiet:
        summary = run_sweep(load_space(space_file), options, Progress(None, None, quiet))
    study = optuna.load_study(study_name="prune", storage=storage)
    configs = [t.params["config"] for t in measured_records(study)]
    assert sorted(configs) == ["slow", "steady"]  # two configurations, each measured once
    assert summary.stop_reason.startswith("search space exhausted")
