"""The samplers' wrappers: re-drawing avoids repeats, and only the draw that stands is written to the storage."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
import pytest
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from autotune.search.samplers import NoRepeatSampler, make_sampler
from autotune.search.samplerview import OrdinalView


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
    space: dict[str, BaseDistribution] = {name: optuna.distributions.IntDistribution(0, 3) for name in ("x", "y")}
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


def test_no_repeat_samples_at_random_when_cmaes_only_repeats() -> None:
    """Four configurations, 16 asks: once CMA-ES draws only tried ones, trials are drawn outside its state."""

    def objective(trial: optuna.Trial) -> float:
        x, y = trial.suggest_int("x", 0, 1), trial.suggest_int("y", 0, 1)
        return float(x + y)

    study = optuna.create_study(sampler=make_sampler("cmaes", seed=0, param_kinds={"int"}), direction="maximize")
    study.optimize(objective, n_trials=16)
    assert len({(t.params["x"], t.params["y"]) for t in study.trials}) == 4
    outside = [t for t in study.trials[1:] if not any(k.endswith(":generation") for k in t.system_attrs)]
    assert outside, "every trial was CMA-ES's own draw, though only 4 configurations exist"
    assert all("x_for_tell" not in t.system_attrs for t in outside)  # CMA-ES is never told of them


# --- the ordinal view: real values in the storage, indices for the sampler --------------------------

CHOICES = {"x": (16, 32, 64, 128), "y": (1, 2, 4, 8)}


def _score(x: int, y: int) -> float:
    return float(-((x - 64) ** 2) / 100 - (y - 2) ** 2)


def _by_index(trial: optuna.Trial) -> float:
    """Optuna holds the index of each choice: what the sampler inside ``OrdinalView`` sees."""
    x, y = (CHOICES[name][trial.suggest_int(name, 0, 3)] for name in ("x", "y"))
    return _score(x, y)


def _by_value(trial: optuna.Trial) -> float:
    x, y = (trial.suggest_categorical(name, list(CHOICES[name])) for name in ("x", "y"))
    return _score(x, y)


def _configs(study: optuna.Study) -> list[tuple[int, int]]:
    def value(trial: optuna.trial.FrozenTrial, name: str) -> int:
        stored = trial.params[name]
        return CHOICES[name][stored] if isinstance(trial.distributions[name], IntDistribution) else stored

    return [(value(t, "x"), value(t, "y")) for t in study.trials]


@pytest.mark.parametrize("name", ["tpe", "cmaes", "gp", "random"])
def test_the_view_proposes_exactly_what_the_index_encoding_did(name: str) -> None:
    """Stored by value and read through the view, every sampler sees what it saw before: same seed, same trials."""
    n_trials = 12 if name == "gp" else 30
    before = optuna.create_study(sampler=make_sampler(name, seed=3, param_kinds={"ordinal"}), direction="maximize")
    before.optimize(_by_index, n_trials=n_trials)
    view = OrdinalView(make_sampler(name, seed=3, param_kinds={"ordinal"}), CHOICES)
    after = optuna.create_study(sampler=view, direction="maximize")
    after.optimize(_by_value, n_trials=n_trials)
    assert _configs(after) == _configs(before)
    assert len(set(_configs(after))) > 5  # the samplers moved: the comparison says something
    stored = after.trials[-1]
    assert stored.distributions["x"] == CategoricalDistribution(CHOICES["x"])  # the storage: real values
    assert stored.params["x"] in CHOICES["x"]


class _Recording(optuna.samplers.RandomSampler):
    """A real random sampler that remembers the trials and distributions it was handed."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.seen: list[tuple[list[optuna.trial.FrozenTrial], BaseDistribution]] = []

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
        self.seen.append((study.get_trials(deepcopy=False), param_distribution))
        return super().sample_independent(study, trial, param_name, param_distribution)


def test_the_sampler_reads_indices_and_the_storage_keeps_values() -> None:
    inner = _Recording()
    study = optuna.create_study(sampler=OrdinalView(inner, CHOICES), direction="maximize")
    study.optimize(_by_value, n_trials=5)
    last_seen, distribution = inner.seen[-1]
    assert distribution == IntDistribution(0, 3)
    finished = [t for t in last_seen if t.state.is_finished()]
    assert len(finished) == 4
    stored = optuna.load_study(study_name=study.study_name, storage=study._storage).trials
    for seen, kept in zip(finished, stored, strict=False):
        for name in ("x", "y"):
            assert seen.distributions[name] == IntDistribution(0, 3)
            assert kept.distributions[name] == CategoricalDistribution(CHOICES[name])
            assert CHOICES[name][seen.params[name]] == kept.params[name]
