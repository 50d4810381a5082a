"""A Dataset workload swept over data-path knobs, end to end: real trial processes, a sqlite study,
MLflow, the leaderboard, export, and the tuned DataLoader rebuilt from the exported file."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import optuna
import pytest
from data_workloads import Points
from mlflow.tracking import MlflowClient
from study_records import measured_records

import autotune
from autotune.records import schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.export import export
from autotune.views.progress import Progress

# 1 ms a sample, batches of 16: without workers the loop waits ~16 ms a step for a ~1 ms step.
SPACE = """\
workload: {name: "data_workloads:host_mlp", preset: tiny, args: {delay_ms: 1.0}}
device: cpu
budget: {trials: 2, trial_timeout: 2m}
sampler: {name: grid, seed: 0}
params:
  batch_size: 16
  num_workers: [0, 2]
  prefetch_factor: 4        # a no-op without workers
  pin_memory: true          # a no-op on a CPU; exported all the same, for the GPU box
"""


@pytest.mark.slow  # two sweep trials of a second or more each, MLflow's sqlite store created
def test_data_knobs_are_swept_input_bound_trials_flagged_and_the_winner_loader_exported(tmp_path: Path) -> None:
    (tmp_path / "data.yaml").write_text(SPACE)
    storage, tracking_uri = f"sqlite:///{tmp_path}/autotune.db", f"sqlite:///{tmp_path}/mlflow.db"
    options = SweepOptions(report=False, storage=storage, tracking_uri=tracking_uri, remeasure_top=0, prune_ratio=0.0)
    summary = run_sweep(load_space(tmp_path / "data.yaml"), options, Progress(None, None, io.StringIO()))

    study = optuna.load_study(study_name="data", storage=storage)
    trials = {t.params["num_workers"]: t for t in measured_records(study)}
    assert sorted(trials) == [0, 2]
    no_workers = trials[0].result
    assert no_workers is not None and no_workers.ok and no_workers.metrics["data_wait_frac"] > 0.5
    assert trials[0].input_bound and study.trials[0].user_attrs[schema.ATTR_INPUT_BOUND] is True
    assert no_workers.metrics["noop_knobs"] == "pin_memory,prefetch_factor"
    assert "input-bound" in summary.leaderboard
    assert summary.best_trial == trials[2].number  # two workers read side by side: the faster loop

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("autotune/data")
    assert experiment is not None
    runs = {r.data.tags.get("autotune.trial"): r for r in client.search_runs([experiment.experiment_id])}
    assert runs[str(trials[0].number)].data.tags["autotune.input_bound"] == "true"
    assert runs[str(trials[0].number)].data.metrics["data_wait_frac"] > 0.5

    info = schema.load_study_info(study)
    assert info is not None
    export(study, info, tmp_path / "tuned.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # measured on this very machine: no environment warning
        cfg = autotune.load(tmp_path / "tuned.yaml")
    loader = cfg.dataloader(Points(64), device="cuda")
    assert (loader.batch_size, loader.num_workers, loader.prefetch_factor) == (16, 2, 4)
    assert loader.pin_memory and loader.drop_last
