"""The informed start's queue: its twin in the other half precision queued after it, on a real study."""

from __future__ import annotations

from pathlib import Path

import optuna
from expert_facts import H100, V100, default_trial
from optuna.trial import TrialState

from autotune.records import StudyRecords
from autotune.records.trial import is_twin
from autotune.space import load_space
from autotune.sweep.proposals.expert_choice import DeviceFacts, expert_params
from autotune.sweep.proposals.informed_start import queue_twin

SPACES = Path(__file__).resolve().parents[2] / "search_spaces"


def test_the_twin_is_queued_after_the_informed_start_only_where_it_has_one() -> None:
    space = load_space(SPACES / "resnet50.yaml")
    study = optuna.create_study(direction="maximize")
    records = StudyRecords(study, (("throughput", "maximize"),))
    start = expert_params(space, default_trial(space, 10.8), H100).params
    study.enqueue_trial(space.optuna_params(start))
    assert queue_twin(study, space, records, start, V100) is None  # no bf16: its start is fp16, and no twin
    queued_twin = queue_twin(study, space, records, start, H100)
    assert queued_twin is not None
    number, twin = queued_twin
    waiting = study.get_trials(states=(TrialState.WAITING,))
    queued = [t.system_attrs["fixed_params"] for t in waiting]  # what each will be asked with
    assert [t.number for t in waiting] == [0, number] and queued[1] == {**queued[0], "precision": "fp16"}
    assert [is_twin(t) for t in waiting] == [False, True]  # marked: it parks beside the informed start
    assert twin == {**start, "precision": "fp16"}  # what the progress line names (a queued trial has no params yet)


def test_facts_of_a_gpu_without_bf16_name_no_twin() -> None:
    facts = DeviceFacts("cuda", "T4", 15.0, bf16=False)
    space = load_space(SPACES / "gpt2.yaml")
    study = optuna.create_study(direction="maximize")
    start = expert_params(space, default_trial(space, 5.0), facts).params
    assert queue_twin(study, space, StudyRecords(study, (("throughput", "maximize"),)), start, facts) is None
    assert study.get_trials(states=(TrialState.WAITING,)) == []
