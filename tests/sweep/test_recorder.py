"""How a real sweep records a metric constraint: one its trials' metrics cannot answer counts as broken, with why."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_records import records_of
from sweep_processes import load_study, run, sweep_args, write_space

from autotune.records import TrialRecord


def constrained_sweep(workdir: Path, constraint: str) -> tuple[list[str], TrialRecord | None]:
    """Two trials of a CPU space under ``constraint``: each measured trial's outcome, and the study's winner."""
    space = write_space(workdir, "capped", "noted", budget=2)
    space.write_text(space.read_text() + f"constraints: [{constraint!r}]\n")
    done = run(workdir, sweep_args(space))
    assert done.returncode == 0, done.stderr
    records = records_of(load_study(workdir, "capped"))
    assert len(records.measured) == 2
    return [f"{r.outcome}: {r.reason}" for r in records.measured], records.winner


def test_a_constraint_on_a_metric_the_trials_report_is_checked(tmp_path: Path) -> None:
    outcomes, winner = constrained_sweep(tmp_path, "peak_mem_gib <= 1000")
    assert outcomes == ["ok: None", "ok: None"]
    assert winner is not None


@pytest.mark.parametrize(
    ("constraint", "why"),
    [
        # misspelt: the trials report peak_mem_gib
        ("peak_mem <= 1000", "constraint 'peak_mem <= 1000' not checked: the trial reported no 'peak_mem' "
         "(did you mean 'peak_mem_gib'?)"),
        # a figure no CPU trial has: the GPU's energy
        ("energy_j_per_sample <= 1", "constraint 'energy_j_per_sample <= 1' not checked: the trial reported no "
         "'energy_j_per_sample'"),
    ],
)  # fmt: skip
def test_a_constraint_the_trials_cannot_answer_ranks_no_trial(tmp_path: Path, constraint: str, why: str) -> None:
    outcomes, winner = constrained_sweep(tmp_path, constraint)
    assert all(outcome.startswith(f"infeasible: {why}") for outcome in outcomes), outcomes
    assert winner is None
