"""An interrupted trial queued again: the informed start's mark kept on its queued copy."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from autotune.records import schema
from autotune.records.trial import is_informed
from autotune.sweep.requeue import record_interrupted


@pytest.mark.parametrize("queue_again", [True, False])
def test_an_interrupted_informed_trial_is_queued_again_still_marked(queue_again: bool) -> None:
    study = optuna.create_study()
    study.enqueue_trial({"x": 1}, user_attrs={schema.ATTR_INFORMED: True})
    trial = study.ask()
    trial.suggest_int("x", 0, 3)
    record_interrupted(study, trial, "SIGINT", queue_again=queue_again)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [is_informed(t) for t in waiting] == ([True] if queue_again else [])
