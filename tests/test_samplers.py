"""The samplers' wrappers: re-drawing avoids repeats, and only the draw that stands is written to the storage."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from optuna._transform import _SearchSpaceTransform

from autotune.samplers import NoRepeatSampler, make_sampler


class CountingStorage(optuna.storages.InMemoryStorage):
    """A real in-memory storage that counts the trial system-attribute writes samplers make."""

    def __init__(self) -> None:
        super().__init__()
        self.system_writes = 0

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self.system_writes += 1
        super().set_trial_system_attr(trial_id, key, value)


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 3)
    y = trial.suggest_int("y", 0, 3)
    return float(-((x - 2) ** 2) - (y - 1) ** 2)


def test_no_repeat_cmaes_writes_one_draw_per_ask_and_tells_what_it_proposed() -> None:
    """16 configurations, 40 asks: most asks re-draw many times near the end, yet each writes once."""
    storage = CountingStorage()
    sampler = make_sampler("cmaes", seed=0, param_kinds={"int"})
    assert isinstance(sampler, NoRepeatSampler)
    study = optuna.create_study(storage=storage, sampler=sampler, direction="maximize")
    study.optimize(_objective, n_trials=40)
    relative = [t for t in study.trials if "x_for_tell" in t.system_attrs]
    assert relative, "CMA-ES never sampled jointly"
    optimizer_chunks = sum(1 for t in study.trials for key in t.system_attrs if ":optimizer:" in key)
    # Per joint draw that stands: x_for_tell and the generation (plus the optimizer once a generation).
    assert storage.system_writes <= 2 * len(relative) + optimizer_chunks + len(study.trials)
    # The point CMA-ES will be told is the one that was proposed (the last draw's, not a discarded one).
    # CMA-ES keeps its point in [0, 1] per param (Optuna's transform); mapped back, it is the proposal.
    space = {name: optuna.distributions.IntDistribution(0, 3) for name in ("x", "y")}
    transform = _SearchSpaceTransform(space, transform_step=False, transform_0_1=True)
    for trial in relative:
        assert transform.untransform(np.array(trial.system_attrs["x_for_tell"])) == trial.params


def test_no_repeat_cmaes_tries_new_configurations() -> None:
    """36 configurations, 24 asks: bare CMA-ES measured 9-12 distinct ones (seeds 0-4), wrapped 22-24."""

    def objective(trial: optuna.Trial) -> float:
        x, y = trial.suggest_int("x", 0, 5), trial.suggest_int("y", 0, 5)
        return float(-((x - 4) ** 2) - (y - 1) ** 2)

    study = optuna.create_study(sampler=make_sampler("cmaes", seed=0, param_kinds={"int"}), direction="maximize")
    study.optimize(objective, n_trials=24)
    assert len({(t.params["x"], t.params["y"]) for t in study.trials}) >= 20
