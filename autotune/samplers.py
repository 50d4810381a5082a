"""Optuna samplers by the names a search space uses, all seedable.

Constraints reach them through ``Trial.set_constraint`` (Optuna 5's way; TPE and GP read them),
so nothing here needs a constraints function.

The default, ``auto``, is chosen by measurement (``scripts/search_benchmark.py`` replays real GPU
measurements through each sampler; BENCHMARKS.md has the tables): for a space of ordered params only
(block sizes as ordinal indices, int and float ranges) it is ``cmaes``, CMA-ES with margin, 12 per
generation, never re-proposing a configuration already tried (median 16 trials to within 2% of the
best H200 matmul record over 100 seeds, against 32.5 for TPE); with any categorical param it is
``tpe`` with Optuna 5's defaults, because CMA-ES samples categoricals at random (median 47 there).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import AutotuneError

__all__ = ["DEFAULT_SAMPLER", "SAMPLER_NAMES", "DelegatingSampler", "NoRepeatSampler", "make_sampler"]

DEFAULT_SAMPLER = "auto"
SAMPLER_NAMES = ("auto", "tpe", "gp", "cmaes", "random", "grid")
ORDERED_KINDS = frozenset({"ordinal", "int", "float", "fixed"})  # what CMA-ES can move through
CMAES_POPSIZE = 12  # Optuna's default is 8 for five params; 12 found the best sooner (BENCHMARKS.md)


class DelegatingSampler(BaseSampler):
    """A sampler that passes every call to ``inner``: subclass it and override what changes."""

    def __init__(self, inner: BaseSampler) -> None:
        self.inner = inner

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


class NoRepeatSampler(DelegatingSampler):
    """Wraps a sampler so that its joint (relative) proposals avoid configurations already tried.

    The sweep never re-runs a measured configuration, but a repeat still costs an ask and, told
    again with the earlier values, pulls the sampler further onto the same point: CMA-ES, whose
    distribution collapses onto one point of a discrete grid, then proposes nothing new until the
    sweep stops as exhausted. Re-drawing costs nothing for CMA-ES (a draw from its Gaussian); for
    TPE and GP the re-draw mostly lands on the same point. After ``tries`` draws the last one stands.
    """

    def __init__(self, inner: BaseSampler, tries: int = 20) -> None:
        if tries < 1:
            raise ValueError(f"tries must be >= 1, got {tries=}")
        super().__init__(inner)
        self.tries = tries

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        states = (TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING)
        tried = [t.params for t in study.get_trials(deepcopy=False, states=states) if t.number != trial.number]
        params = self.inner.sample_relative(study, trial, search_space)
        for _ in range(self.tries - 1):
            if not any(params.items() <= other.items() for other in tried):
                break
            params = self.inner.sample_relative(study, trial, search_space)
        return params


def _cmaes(seed: int | None) -> BaseSampler:
    try:
        import cmaes  # noqa: F401  (optuna imports it lazily; fail here with a useful message)
    except ImportError as exc:
        raise AutotuneError("sampler cmaes needs the cmaes package: pip install cmaes") from exc
    # CMA-ES has no notion of constraints: infeasible trials still carry the worst value seen,
    # which pushes its distribution away from them. The margin keeps ordinal/int params from
    # freezing on one value; categorical params are sampled at random (use tpe for those).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # with_margin
        inner = optuna.samplers.CmaEsSampler(
            seed=seed, with_margin=True, popsize=CMAES_POPSIZE, warn_independent_sampling=False
        )
    return NoRepeatSampler(inner)


def resolve_name(name: str, param_kinds: set[str]) -> str:
    """``auto`` made concrete for a space whose params are of ``param_kinds``."""
    if name != "auto":
        return name
    return "cmaes" if param_kinds <= ORDERED_KINDS else "tpe"


def make_sampler(name: str, seed: int | None, param_kinds: Collection[str] = ()) -> BaseSampler:
    """A sampler by name; ``auto`` is resolved for a space whose params are of ``param_kinds``.

    ``grid`` is random sampling here: the sweep enqueues the grid's points.
    """
    name = resolve_name(name, set(param_kinds))
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)
    if name == "cmaes":
        return _cmaes(seed)
    if name in ("random", "grid"):
        return optuna.samplers.RandomSampler(seed=seed)
    raise AutotuneError(f"unknown sampler {name!r}: expected one of {', '.join(SAMPLER_NAMES)}")
