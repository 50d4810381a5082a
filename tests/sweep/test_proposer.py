"""Proposals of two workers on one study: the later-numbered one stands down when the budget is taken."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from study_records import measured_records, records_of
from sweep_processes import load_study, run, sweep_args

from autotune.measurement import Status
from autotune.records import StudyRecords, TrialKind
from autotune.space import load_space
from autotune.storage.rdb import open_storage
from autotune.sweep.proposals.proposer import Proposer, would_reject

SPACE = """\
workload: {name: triton_matmul, preset: full}
device: cuda
sampler: {name: random, seed: 0}
params:
  BLOCK_M: [16, 32, 64, 128, 256]
  BLOCK_N: [16, 32, 64, 128, 256]
"""


def _proposer(path: Path, worker: str, budget: int | None) -> Proposer:
    space = load_space(path / "space.yaml", replay=True)
    study = optuna.create_study(
        storage=open_storage(f"sqlite:///{path}/study.db"),
        study_name="proposals",
        sampler=optuna.samplers.RandomSampler(seed=0),
        load_if_exists=True,
    )
    return Proposer(study, space, StudyRecords(study, (("throughput", "maximize"),)), worker, budget)


def test_a_proposal_past_a_budget_other_workers_fill_is_not_run(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE)
    first, second = _proposer(tmp_path, "host:1", budget=1), _proposer(tmp_path, "host:2", budget=1)
    running = first.propose(first.ask())  # asked first: it runs (still RUNNING)
    surplus = second.propose(second.ask())  # both passed the stop check; this one came second
    assert running.kind is TrialKind.MEASURED and running.answer is None
    assert surplus.kind is TrialKind.SURPLUS
    assert surplus.answer is not None and "budget is taken" in str(surplus.answer.reason)


def test_without_a_budget_both_run(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE)
    first, second = _proposer(tmp_path, "host:1", None), _proposer(tmp_path, "host:2", None)
    first.propose(first.ask())
    assert second.propose(second.ask()).kind is not TrialKind.SURPLUS


KERNELS = """\
workload: {name: "trial_workloads:tiny_attention", preset: tiny}
device: cpu
budget: {trials: 4, trial_timeout: 2m}
sampler: {name: random, seed: 0}
params:
  batch_size: {choices: [4, 8, 12], default: 8}
  attention_backend: {choices: [efficient, math], default: math}
"""


@pytest.mark.slow
def test_an_attention_kernel_that_cannot_run_is_measured_once(tmp_path: Path) -> None:
    (tmp_path / "kernels.yaml").write_text(KERNELS)
    done = run(tmp_path, sweep_args(tmp_path / "kernels.yaml"))
    assert done.returncode == 0, done.stderr
    measured = measured_records(load_study(tmp_path, "kernels"))
    efficient = [r for r in measured if r.params["attention_backend"] == "efficient"]
    # the CPU has no memory-efficient kernel: one trial learns it, and the budget goes to the kernel that runs
    assert len(efficient) == 1 and efficient[0].result is not None
    assert efficient[0].result.status is Status.INVALID
    assert len(measured) == 4
    assert "attention_backend=efficient cannot run this model's attention in fp32 (trial" in done.stderr
    rejected = would_reject(records_of(load_study(tmp_path, "kernels")))  # what the compile ahead leaves alone
    assert rejected({"batch_size": 12, "attention_backend": "efficient"})
    assert not rejected({"batch_size": 12, "attention_backend": "efficient", "precision": "bf16"})  # not tried
    assert not rejected({"batch_size": 12, "attention_backend": "math"})
