"""An interrupted trial queued again: the informed start's mark, and its twin's, kept on its queued copy."""

from __future__ import annotations

from collections.abc import Callable

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from autotune.records import schema
from autotune.records.trial import is_informed, is_twin
from autotune.sweep.workers.interrupted_trials import record_interrupted


@pytest.mark.parametrize("queue_again", [True, False])
@pytest.mark.parametrize(("attr", "marked"), [(schema.ATTR_INFORMED, is_informed), (schema.ATTR_TWIN, is_twin)])
def test_an_interrupted_expert_trial_is_queued_again_still_marked(
    queue_again: bool, attr: str, marked: Callable[[FrozenTrial], bool]
) -> None:
    study = optuna.create_study()
    study.enqueue_trial({"x": 1}, user_attrs={attr: True})
    trial = study.ask()
    trial.suggest_int("x", 0, 3)
    record_interrupted(study, trial, "SIGINT", queue_again=queue_again)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [marked(t) for t in waiting] == ([True] if queue_again else [])
    other = is_twin if marked is is_informed else is_informed
    assert not any(other(t) for t in waiting)  # each keeps its own mark only
