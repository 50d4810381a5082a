"""An interrupted trial: recorded as such, and its configuration queued to run first when the sweep resumes.

A trial stopped by Ctrl-C or SIGTERM says nothing about its configuration. It is told to Optuna as
FAIL (Optuna has no other finished state for it) with ``autotune.views.status`` ``interrupted`` and a reason,
and without a result or a kind, so it is not a measured trial: it does not count in the budget, and
the samplers learn nothing from it. A copy of it is queued (WAITING, as Optuna's retry of a stale
trial is), so the next ask of any worker, the resumed sweep's first, measures that configuration.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, Trial, TrialState

from autotune.records import schema
from autotune.records.trial import is_default, is_informed, is_twin
from autotune.storage.rdb import quiet_optuna

__all__ = ["record_interrupted"]


def record_interrupted(study: optuna.Study, trial: Trial, cause: str, *, queue_again: bool) -> None:
    """Finish ``trial`` as interrupted by ``cause`` (a signal's name, or what stopped it: "an error of the sweep");
    ``queue_again`` queues its configuration again.

    Leave ``queue_again`` False for a trial whose configuration was not chosen yet (nothing to re-run).
    """
    again = "; it runs again when the sweep resumes" if queue_again else ""
    trial.set_user_attr(schema.ATTR_STATUS, schema.INTERRUPTED)
    trial.set_user_attr(schema.ATTR_REASON, f"interrupted by {cause} before it finished{again}")
    with quiet_optuna():
        study.tell(trial, state=TrialState.FAIL)
    if queue_again:
        _queue_again(study, study._storage.get_trial(trial._trial_id))


def _queue_again(study: optuna.Study, trial: FrozenTrial) -> None:
    """A WAITING copy of ``trial``: its params, whether it is the default, the informed start or its twin, and Optuna's
    retry bookkeeping.

    Not the sampler's own state on the trial (CMA-ES's generation): the copy's params were not its draw.
    """
    history = [*trial.system_attrs.get("retry_history", []), trial.number]
    system_attrs = {"failed_trial": history[0], "retry_history": history}
    user_attrs: dict[str, Any] = {}
    if is_default(trial):
        user_attrs[schema.ATTR_DEFAULT] = True  # the leaderboard's baseline stays the default configuration
    if is_informed(trial):
        user_attrs[schema.ATTR_INFORMED] = True  # the informed start stays marked, and is queued once
    if is_twin(trial):
        user_attrs[schema.ATTR_TWIN] = True  # and its twin, which parks beside it (sweep.proposals.parked_trials)
    study.add_trial(
        optuna.create_trial(
            state=TrialState.WAITING,
            params=trial.params,
            distributions=trial.distributions,
            user_attrs=user_attrs,
            system_attrs=system_attrs,
        )
    )
