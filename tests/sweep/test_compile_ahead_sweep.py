"""A sweep that compiles ahead (real trial processes, Inductor on the CPU): while one trial runs, the graph the
search wants next is compiled in the background (while the default runs: the informed start's), and the trial that
runs it later records what that saved."""

from __future__ import annotations

import io
import os
from pathlib import Path

import optuna
import pytest
from study_records import measured_records

from autotune.measurement import AHEAD_METRIC, AHEAD_WAIT_METRIC
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.sweep.proposals.compile_ahead import MIN_CPUS, wanted
from autotune.views.progress import Progress

SPACE = """
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
objective: {metric: throughput, direction: maximize}
budget: {trials: 4, trial_timeout: 5m}
sampler: {name: tpe, seed: 0}
params:
  batch_size: {choices: [16, 32], ordinal: true, default: 16}
  compile_mode: [none, default]
"""


@pytest.mark.slow
def test_a_compiled_trial_runs_the_graph_compiled_ahead_of_it(tmp_path: Path) -> None:
    space_file = tmp_path / "ahead.yaml"
    space_file.write_text(SPACE)
    storage = f"sqlite:///{tmp_path}/ahead.db"
    options = SweepOptions(
        storage=storage, tracking=False, remeasure_top=0, compile_ahead=True, prune_ratio=0, rehearse_start=False
    )
    said = io.StringIO()
    summary = run_sweep(load_space(space_file), options, Progress(None, None, said))
    assert summary.measured == 4  # the whole space: both compiled configurations ran
    assert summary.time.ahead.trials >= 1 and summary.time.ahead.line() is not None
    assert "compiled ahead, while other trials ran" in (tmp_path / "ahead_report.html").read_text()  # and the report
    records = measured_records(optuna.load_study(study_name="ahead", storage=storage))
    compiled = [r for r in records if r.compiled]
    assert len(compiled) == 2 and all(r.ok for r in compiled), [(r.params, r.reason) for r in compiled]
    # The second compiled trial's graph was compiled while the first ran (the first's, too, when an eager trial
    # ran before it): it records the compile ahead, and any wait for it counts as its compile.
    ahead = [r for r in compiled if AHEAD_METRIC in r.first_metrics]
    assert ahead, [r.first_metrics for r in compiled]
    # The informed start (compile default at the default's batch, on a CPU) was compiled while the default ran:
    # nothing had been measured for the sampler to score, and it was the next trial.
    informed = next(r for r in compiled if r.informed)
    assert informed in ahead, informed.first_metrics
    assert "while the default trial runs, the informed start's likely graph (batch 16)" in said.getvalue()
    for record in ahead:
        metrics = record.first_metrics
        assert metrics[AHEAD_METRIC] > 0
        assert metrics["compile_wall_s"] < metrics[AHEAD_METRIC], metrics  # its own compile: from the cache
        assert metrics["compile_s"] >= metrics.get(AHEAD_WAIT_METRIC, 0.0)


@pytest.mark.slow
def test_a_trial_out_of_memory_beside_a_compile_ahead_is_measured_again_alone(tmp_path: Path) -> None:
    """The workload runs out of memory in a trial while a compile ahead of the sweep runs (trial_workloads.crowded):
    the default trial, beside the informed start's compile ahead, is measured again with that compile stopped and
    recorded ok, as is every trial; none is recorded oom."""
    space_file = tmp_path / "crowded.yaml"
    space_file.write_text(SPACE.replace("tiny_mlp", "crowded").replace("trials: 4", "trials: 2"))
    storage = f"sqlite:///{tmp_path}/crowded.db"
    options = SweepOptions(
        storage=storage, tracking=False, remeasure_top=0, compile_ahead=True, prune_ratio=0, rehearse_start=False
    )
    said = io.StringIO()
    summary = run_sweep(load_space(space_file), options, Progress(None, None, said))
    out = said.getvalue()
    assert "trial 0 ran out of memory while 1 compile ahead held GPU memory: measuring it again alone" in out, out
    assert summary.measured == 2
    records = measured_records(optuna.load_study(study_name="crowded", storage=storage))
    assert [(r.number, r.ok) for r in records] == [(0, True), (1, True)], [(r.number, r.reason) for r in records]
    # The informed start's compile ahead, a guess while the default ran, was stopped for the default's second
    # measurement and compiled again for it when it came: it still ran from its compile ahead.
    informed = next(r for r in records if r.informed)
    assert informed.compiled and AHEAD_METRIC in informed.first_metrics, informed.first_metrics


@pytest.mark.parametrize(
    ("choice", "device", "workers", "expected"),
    [(True, "cpu", 1, True), (False, "cuda", 1, False), (None, "cpu", 1, False), (None, "cuda", 2, False)],
)
def test_where_a_sweep_compiles_ahead(choice: bool | None, device: str, workers: int, expected: bool) -> None:
    assert wanted(choice, device, workers) is expected


def test_a_one_gpu_sweep_compiles_ahead_on_a_host_with_cores_to_spare() -> None:
    assert wanted(None, "cuda", 1) is ((os.cpu_count() or 1) >= MIN_CPUS)
