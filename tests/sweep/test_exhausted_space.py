"""A budget larger than the space: the sweep measures every configuration once, then stops, writing few extra rows.

Without this, a 3-configuration space with ``--n-trials 100`` printed 106 "not run again" lines and wrote 109
trial rows: the sweep stopped only after 100 proposals in a row had needed no run. Here each proposal that
needs no run queues an untried configuration (where the budget covers them all), so a finite space of N
configurations costs at most N - 1 such rows, and the sweep stops once all N are measured.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.samplers import BaseSampler
from replay_records import MATMUL_RECORDS
from study_records import measured_records
from sweep_processes import load_study, run, sweep_args

from autotune.measurement import Status, TrialResult
from autotune.records import TrialKind, schema
from autotune.search.samplers import DelegatingSampler, make_sampler
from autotune.space import load_space
from autotune.sweep import Sweep, SweepOptions, SweepSummary, run_sweep
from autotune.trial.pruning import Pruning
from autotune.views.progress import Progress

THREE = """\
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
budget: {trials: 20, trial_timeout: 2m}
sampler: {name: random, seed: 0}
params:
  batch_size: {choices: [4, 8, 16], default: 8}
"""


def measured_configurations(study: optuna.Study) -> Counter[tuple[tuple[str, Any], ...]]:
    return Counter(tuple(sorted(r.params.items())) for r in measured_records(study))


@pytest.mark.slow
def test_a_budget_of_100_on_3_configurations_measures_each_once_and_stops(tmp_path: Path) -> None:
    (tmp_path / "three.yaml").write_text(THREE)
    done = run(tmp_path, sweep_args(tmp_path / "three.yaml", "--n-trials", "100"))
    assert done.returncode == 0, done.stderr
    assert "sweep three: search space exhausted: all 3 configurations measured" in done.stdout
    assert "[3/3 done" in done.stderr  # the budget shown is the space's size, not 100
    study = load_study(tmp_path, "three")
    assert set(measured_configurations(study).values()) == {1} and len(measured_configurations(study)) == 3
    # At most one proposal that needs no run per configuration measured after the first (before: 109 rows).
    assert len(study.trials) <= 2 * 3 - 1
    assert done.stderr.count("not run again") <= 2  # before: 106
    assert not (tmp_path / "three_report.html").exists()  # a quick sweep's --no-report


@pytest.mark.slow
def test_gpu_workers_share_the_count(tmp_path: Path) -> None:
    """Two workers (``--gpus``, on the CPU): every configuration once, whichever worker measured it."""
    (tmp_path / "three.yaml").write_text(THREE)
    done = run(tmp_path, sweep_args(tmp_path / "three.yaml", "--n-trials", "100", "--device", "cpu", "--gpus", "0,1"))
    assert done.returncode == 0, done.stderr
    assert "sweep three: search space exhausted: all 3 configurations measured" in done.stdout
    assert "/3 done" in done.stderr and "/100 done" not in done.stderr  # the parent's display is capped too
    study = load_study(tmp_path, "three")
    assert set(measured_configurations(study).values()) == {1} and len(measured_configurations(study)) == 3
    # Workers asking at once may each need no run before the same measurement, and each once at the end
    # (autotune.sweep.proposals.coverage): at most one such row per worker per configuration. CI's loaded machine
    # wrote 9 rows in all, so a bound on the total alone (7) failed there; before: 109 rows.
    # A row a worker asked for as the space ran out, and ended without measuring, carries no kind: not a no-run row.
    no_run = Counter(
        t.user_attrs[schema.ATTR_WORKER]
        for t in study.trials
        if t.user_attrs.get(schema.ATTR_KIND, TrialKind.MEASURED) != TrialKind.MEASURED
    )
    assert len(no_run) <= 2 and all(rows <= 3 for rows in no_run.values()), no_run


def sweep(tmp_path: Path, text: str, **options: Any) -> tuple[optuna.Study, str]:
    """An in-process sweep of ``text`` whose trials are answered at once (throughput: the batch size)."""
    (tmp_path / "space.yaml").write_text(text)

    def executor(params: dict[str, Any], _timeout: float, _pruning: Pruning | None) -> TrialResult:
        return TrialResult(Status.OK, None, params, {"throughput": float(params["batch_size"])})

    storage = f"sqlite:///{tmp_path}/study.db"
    settings = SweepOptions(
        report=False, storage=storage, tracking=False, remeasure_top=0, prune_ratio=0.0, rehearse_start=False, **options
    )
    summary = Sweep(load_space(tmp_path / "space.yaml"), settings, executor, Progress(None, None, io.StringIO())).run()
    return optuna.load_study(study_name="space", storage=storage), summary.stop_reason


FEASIBILITY = """\
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
sampler: {name: random, seed: 1}
feasibility:
  - batch_size <= 16           # rules out 32 and 64
params:
  batch_size: {choices: [4, 8, 16, 32, 64], default: 8}
  precision: [default, fp32]
"""


def test_a_feasibility_rule_leaves_fewer_configurations_to_measure(tmp_path: Path) -> None:
    study, reason = sweep(tmp_path, FEASIBILITY, n_trials=100)
    assert reason == "search space exhausted: all 6 configurations measured (4 more ruled out by the feasibility rules)"
    measured = measured_configurations(study)
    assert len(measured) == 6 and set(measured.values()) == {1}
    assert all(dict(config)["batch_size"] <= 16 for config in measured)
    assert len(study.trials) <= 2 * 6 - 1  # before: 125 rows, stopped by 100 rejected or repeated in a row


CONDITIONAL = """\
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
sampler: {name: tpe, seed: 0}
params:
  compile_mode: [none, default]
  cudnn_deterministic: {choices: [true, false], when: {compile_mode: [none]}}
  batch_size: {choices: [8, 16], default: 8}
"""


def test_a_conditional_param_counts_only_where_it_applies(tmp_path: Path) -> None:
    study, reason = sweep(tmp_path, CONDITIONAL, timeout_s=3600.0)  # no trial budget: the space's size is one
    assert reason == "search space exhausted: all 6 configurations measured"  # (2 flags + default) x 2 sizes
    measured = measured_configurations(study)
    assert len(measured) == 6 and set(measured.values()) == {1}
    assert len(study.trials) <= 2 * 6 - 1  # before: 115


def test_workers_sharing_a_study_count_each_others_trials_and_queue_once(tmp_path: Path) -> None:
    """Two workers of one seed propose in lockstep: they collide, and each collision queues one configuration."""
    (tmp_path / "space.yaml").write_text(FEASIBILITY.replace("seed: 1", "seed: 0"))
    space = load_space(tmp_path / "space.yaml")
    storage = f"sqlite:///{tmp_path}/study.db"
    options = SweepOptions(report=False, study_name="shared", storage=storage, tracking=False, n_trials=100)

    def executor(params: dict[str, Any], _timeout: float, _pruning: Pruning | None) -> TrialResult:
        return TrialResult(Status.OK, None, params, {"throughput": float(params["batch_size"])})

    quiet = Progress(None, None, io.StringIO())
    workers = [Sweep(space, options, executor, quiet, worker=f"host:{i}") for i in (1, 2)]
    study = optuna.load_study(study_name="shared", storage=storage)
    for _ in range(20):
        for worker in workers:
            if worker.proposer.exhausted() is None:
                worker.one_trial()
                assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) <= 1
    assert [worker.proposer.exhausted() for worker in workers] == [
        "search space exhausted: all 6 configurations measured (4 more ruled out by the feasibility rules)"
    ] * 2
    measured = measured_configurations(study)
    assert len(measured) == 6 and set(measured.values()) == {1}
    # Which worker measured what is not fixed: a collision reseeds the sampler from fresh entropy (proposals.py).
    assert {r.worker for r in measured_records(study)} <= {"host:1", "host:2"}
    assert len(study.trials) <= 2 * 6


MATMUL = Path(__file__).resolve().parents[2] / "search_spaces" / "triton_matmul.yaml"  # 84 feasible configurations


class _Catcher(DelegatingSampler):
    """Delegates to ``inner`` and keeps the study it samples for (an in-memory study cannot be reopened)."""

    study: optuna.Study | None = None

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.study = study
        super().before_trial(study, trial)


def matmul_sweep(sampler: BaseSampler, budget: int) -> tuple[optuna.Study, SweepSummary]:
    catcher = _Catcher(sampler)
    options = SweepOptions(
        report=False, storage="memory", replay=MATMUL_RECORDS, tracking=False, n_trials=budget, seed=0
    )
    summary = run_sweep(load_space(MATMUL, replay=True), options, Progress(None, None, io.StringIO()), catcher)
    assert catcher.study is not None
    return catcher.study, summary


def queued(study: optuna.Study) -> list[int]:
    """Trials that ran a queued configuration, the default (trial 0) aside."""
    return [t.number for t in study.trials if "fixed_params" in t.system_attrs and t.number > 0]


def skipped(study: optuna.Study) -> int:
    return sum(
        1 for t in study.trials if t.user_attrs.get(schema.ATTR_KIND) in (TrialKind.DUPLICATE, TrialKind.REJECTED)
    )


def test_workers_that_repeat_at_once_queue_one_configuration(tmp_path: Path) -> None:
    """Two workers both propose a measured configuration before either asks again: one untried one is queued."""
    (tmp_path / "three.yaml").write_text(THREE)
    options = SweepOptions(report=False, storage=f"sqlite:///{tmp_path}/study.db", tracking=False, n_trials=100)

    def executor(params: dict[str, Any], _timeout: float, _pruning: Pruning | None) -> TrialResult:
        return TrialResult(Status.OK, None, params, {"throughput": float(params["batch_size"])})

    quiet = Progress(None, None, io.StringIO())
    first, second = (
        Sweep(load_space(tmp_path / "three.yaml"), options, executor, quiet, worker=f"host:{i}") for i in (1, 2)
    )
    study = first.ctx.study
    for _ in range(3):  # batch size 8, measured by the first; then asked by both, as a sampler may propose it
        study.enqueue_trial({"batch_size": 8})
    assert first.one_trial()
    repeats = [worker.proposer.ask() for worker in (first, second)]  # both asked before either proposed
    for worker, trial in zip((first, second), repeats, strict=True):
        assert worker.proposer.propose(trial).kind is TrialKind.DUPLICATE
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.system_attrs["fixed_params"]["batch_size"] in (4, 16) for t in waiting] == [True]  # one untried, once


@pytest.mark.parametrize(
    "make",
    [
        lambda: optuna.samplers.RandomSampler(seed=0),
        lambda: optuna.samplers.TPESampler(seed=0),
        lambda: make_sampler("auto", 0, {"ordinal"}),  # the shipped space's own: CMA-ES, never repeating
    ],
    ids=["random", "tpe", "auto"],
)
def test_a_budget_smaller_than_the_space_leaves_the_samplers_proposals_alone(make: Callable[[], BaseSampler]) -> None:
    """The search benchmark's ground (60 trials of 84 configurations): repeats are answered, nothing is queued."""
    study, summary = matmul_sweep(make(), budget=60)
    assert summary.stop_reason == "budget of 60 measured trials reached"
    assert skipped(study) > 0 and queued(study) == []


def test_a_budget_larger_than_the_space_queues_untried_configurations() -> None:
    study, summary = matmul_sweep(optuna.samplers.RandomSampler(seed=0), budget=500)
    assert summary.stop_reason == (
        "search space exhausted: all 84 configurations measured (24 more ruled out by the feasibility rules)"
    )
    assert summary.measured == 84 and len(measured_configurations(study)) == 84
    assert skipped(study) <= 84 - 1  # before: 380 of 462 rows, and 2 configurations never measured
    assert len(queued(study)) == skipped(study)  # each skip queued the next trial's configuration
