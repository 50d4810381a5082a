"""Proposals of two workers on one study: the later-numbered one stands down when the budget is taken."""

from __future__ import annotations

from pathlib import Path

import optuna

from autotune.records import StudyRecords, TrialKind
from autotune.space import load_space
from autotune.storage.rdb import open_storage
from autotune.sweep.proposals.proposer import Proposer

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
