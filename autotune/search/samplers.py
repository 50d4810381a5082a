"""Optuna samplers by the names a search space uses, all seedable.

Constraints reach them through ``Trial.set_constraint`` (Optuna 5's way; TPE and GP read them),
so nothing here needs a constraints function.

The default, ``auto``, is chosen by measurement (``scripts/search_benchmark.py`` replays real GPU
measurements through each sampler; BENCHMARKS.md has the tables): for a space of ordered params only
(block sizes as ordinal indices, int and float ranges) it is ``cmaes``, CMA-ES with margin, 12 per
generation, never re-proposing a configuration already tried (median 16 trials to within 2% of the
best H200 matmul record over 100 seeds, against 32.5 for TPE); with any categorical param it is
``tpe`` with Optuna 5's defaults, because CMA-ES samples categoricals at random (median 47 there).

Every sampler reads the study through :class:`autotune.search.samplerview.OrdinalView` (ordinal params as
indices, warm-start evidence added). CMA-ES learns nothing from trials it did not propose itself,
so evidence reaches it differently: its first distribution is estimated from the evidence.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import AutotuneError

if TYPE_CHECKING:
    from optuna._transform import _SearchSpaceTransform
    from optuna.study import StudyDirection

__all__ = ["DEFAULT_SAMPLER", "SAMPLER_NAMES", "DeferredWrites", "DelegatingSampler", "NoRepeatSampler", "make_sampler"]

DEFAULT_SAMPLER = "auto"
SAMPLER_NAMES = ("auto", "tpe", "gp", "cmaes", "random", "grid")
ORDERED_KINDS = frozenset({"ordinal", "int", "float", "fixed"})  # what CMA-ES can move through
CMAES_POPSIZE = 12  # Optuna's default is 8 for five params; 12 found the best sooner (BENCHMARKS.md)
# Warm-started CMA-ES starts from the best 10% of the evidence (Optuna's source_trials, via cmaes'
# get_warm_start_mgd): fewer than 10 usable trials leave no best 10%, and it starts cold.
CMAES_MIN_EVIDENCE = 10


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
    sweep stops as exhausted. Re-drawing costs little for CMA-ES (a draw from its Gaussian); for
    TPE and GP the re-draw mostly lands on the same point. After ``tries`` draws that were all tried,
    the trial is sampled independently instead (at random, for CMA-ES): a warm-started CMA-ES, whose
    first distribution can be narrow, otherwise stopped as exhausted in 6 of 50 replayed sweeps
    (BENCHMARKS.md).

    A draw of CMA-ES also writes its state on the trial (the point to tell it later, its
    generation, the optimizer itself): a dozen storage writes, which for discarded draws are
    wasted, and were most of the engine's time per proposal near the end of a sweep. So the
    draws go through :class:`DeferredWrites`, and only the draw that stands is written.
    """

    def __init__(self, inner: BaseSampler, tries: int = 20) -> None:
        if tries < 1:
            raise ValueError(f"tries must be >= 1, got {tries=}")
        super().__init__(inner)
        self.tries = tries

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        names = sorted(search_space)
        states = (TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING)
        # The trials every sampler of this ask reads (Optuna caches them per ask): no extra storage read.
        trials = study._get_trials(deepcopy=False, states=states, use_cache=True)
        # Warm-start evidence (numbered below zero, autotune.search.samplerview) was measured by another study,
        # not here: its configurations are still to be tried.
        tried = {
            tuple(t.params.get(name, _ABSENT) for name in names)
            for t in trials
            if t.number != trial.number and t.number >= 0
        }
        deferred = DeferredWrites(study)
        for _ in range(self.tries):
            deferred.discard()
            params = self.inner.sample_relative(deferred.study, trial, search_space)
            if tuple(params.get(name, _ABSENT) for name in names) not in tried:
                deferred.commit()
                return params
        # Every draw was tried already: the inner sampler has closed in on measured ground. A repeat would be
        # answered from the earlier trial and told again, closing it in further (CMA-ES then stops proposing
        # anything new); instead the trial is sampled independently (at random for CMA-ES), outside the inner
        # sampler's state: its draw is not written, so CMA-ES never counts the trial among its solutions.
        deferred.discard()
        return {}


_ABSENT = object()  # a param a trial lacks (a relative draw always has every name of its space)


class DeferredWrites:
    """A view of ``study`` whose storage keeps trial system-attribute writes until :meth:`commit`.

    Samplers write their state through ``study._storage`` (CMA-ES does); everything else, reads
    included, goes to the real storage. The view shares the study's per-ask trial cache.
    """

    def __init__(self, study: Study) -> None:
        self._storage = study._storage
        self._pending: dict[tuple[int, str], Any] = {}
        self.study = copy.copy(study)  # a copy gets a thread-local trial cache of its own: share the study's
        self.study._storage = self  # type: ignore[assignment]
        self.study._thread_local = study._thread_local

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._pending[(trial_id, key)] = value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    def discard(self) -> None:
        self._pending.clear()

    def commit(self) -> None:
        for (trial_id, key), value in self._pending.items():
            self._storage.set_trial_system_attr(trial_id, key, value)
        self._pending.clear()


class _WarmStartedCmaEs(optuna.samplers.CmaEsSampler):
    """CMA-ES whose first distribution is estimated from another study's trials (``evidence``).

    This is Optuna's ``source_trials`` (warm-starting CMA-ES, Nomura et al. 2021: the mean and
    covariance of the source's best 10%, with cmaes' default prior). Optuna takes a source trial
    only if its params are exactly the space CMA-ES samples (the ordered params), which is known
    only when the optimizer is first made, so the evidence is fitted to that space there;
    infeasible trials are left out (their values are placeholders, or break a constraint). With
    fewer than 10 left there is no best 10%, and it starts cold.
    """

    def __init__(self, evidence: Sequence[FrozenTrial], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._evidence = tuple(evidence)

    def _init_optimizer(self, trans: _SearchSpaceTransform, direction: StudyDirection) -> Any:
        names = set(trans._search_space)
        fitting = [
            _restricted(t, names)
            for t in self._evidence
            if t.state is TrialState.COMPLETE
            and names <= t.distributions.keys()
            and all(c <= 0 for c in t.constraints.values())
        ]
        self._source_trials = fitting if len(fitting) >= CMAES_MIN_EVIDENCE else None
        return super()._init_optimizer(trans, direction)


def _restricted(trial: FrozenTrial, names: Collection[str]) -> FrozenTrial:
    """A copy of ``trial`` with only the params ``names``."""
    out = copy.copy(trial)
    out.params = {n: v for n, v in trial.params.items() if n in names}
    out.distributions = {n: d for n, d in trial.distributions.items() if n in names}
    return out


def _cmaes(seed: int | None, evidence: Sequence[FrozenTrial] = ()) -> BaseSampler:
    try:
        # deferred: cmaes costs ~0.8 s and only this sampler needs it (optuna imports it lazily: fail here, clearly)
        import cmaes  # noqa: F401
    except ImportError as exc:
        raise AutotuneError("sampler cmaes needs the cmaes package: pip install cmaes") from exc
    # CMA-ES has no notion of constraints: infeasible trials still carry the worst value seen,
    # which pushes its distribution away from them. The margin keeps ordinal/int params from
    # freezing on one value; categorical params are sampled at random (use tpe for those).
    kwargs: dict[str, Any] = {
        "seed": seed,
        "with_margin": True,
        "popsize": CMAES_POPSIZE,
        "warn_independent_sampling": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # with_margin
        inner = _WarmStartedCmaEs(evidence, **kwargs) if evidence else optuna.samplers.CmaEsSampler(**kwargs)
    return NoRepeatSampler(inner)


def resolve_name(name: str, param_kinds: set[str]) -> str:
    """``auto`` made concrete for a space whose params are of ``param_kinds``."""
    if name != "auto":
        return name
    return "cmaes" if param_kinds <= ORDERED_KINDS else "tpe"


def make_sampler(
    name: str, seed: int | None, param_kinds: Collection[str] = (), evidence: Sequence[FrozenTrial] = ()
) -> BaseSampler:
    """A sampler by name; ``auto`` is resolved for a space whose params are of ``param_kinds``.

    ``grid`` is random sampling here: the sweep enqueues the grid's points. ``evidence`` (warm-start
    trials, in the sampler's view of the space: see :mod:`autotune.search.samplerview`) starts CMA-ES's
    distribution; the other samplers read evidence among the study's trials, through the view.
    """
    name = resolve_name(name, set(param_kinds))
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)
    if name == "cmaes":
        return _cmaes(seed, evidence)
    if name in ("random", "grid"):
        return optuna.samplers.RandomSampler(seed=seed)
    raise AutotuneError(f"unknown sampler {name!r}: expected one of {', '.join(SAMPLER_NAMES)}")
