"""Optuna samplers by the names a search space uses, all seedable.

Constraints reach them through ``Trial.set_constraint`` (Optuna 5's way; TPE and GP read them),
so nothing here needs a constraints function.

The default is TPE with Optuna 5's defaults (multivariate, constant liar). Choices are
measured, not assumed: ``scripts/search_benchmark.py`` replays real GPU measurements through
each sampler; BENCHMARKS.md has the table behind the default.
"""

from __future__ import annotations

import optuna
from optuna.samplers import BaseSampler

from autotune.errors import AutotuneError

__all__ = ["DEFAULT_SAMPLER", "SAMPLER_NAMES", "make_sampler"]

DEFAULT_SAMPLER = "tpe"
SAMPLER_NAMES = ("tpe", "gp", "cmaes", "random", "grid")


def _cmaes(seed: int | None) -> BaseSampler:
    try:
        import cmaes  # noqa: F401  (optuna imports it lazily; fail here with a useful message)
    except ImportError as exc:
        raise AutotuneError("sampler cmaes needs the cmaes package: pip install 'autotune[cmaes]'") from exc
    # CMA-ES has no notion of constraints: infeasible trials still carry the worst value seen,
    # which pushes its distribution away from them.
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


def make_sampler(name: str, seed: int | None) -> BaseSampler:
    """A sampler by name. ``grid`` is random sampling here: the sweep enqueues the grid's points."""
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)
    if name == "cmaes":
        return _cmaes(seed)
    if name in ("random", "grid"):
        return optuna.samplers.RandomSampler(seed=seed)
    raise AutotuneError(f"unknown sampler {name!r}: expected one of {', '.join(SAMPLER_NAMES)}")
