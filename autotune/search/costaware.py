"""A search that counts GPU seconds, not trials: expected improvement per predicted second of trial.

:class:`CostAwareSampler` wraps a sampler (TPE, as the shipped GPT-2 and ResNet-50 spaces name it) and
proposes, for each trial, the candidate with the most expected improvement (EI) over the best value so far per
predicted second of its trial: Snoek, Larochelle and Adams 2012, "Practical Bayesian Optimization of Machine
Learning Algorithms", section 3.2, "EI per second". Both figures come from the study's own trials:

- the gain: a Bayesian linear model of the log objective over one column per knob value
  (:mod:`autotune.search.surrogate`), so that eager trials, a few seconds each, teach it what precision and batch
  size do for the compiled configurations too. A feasible trial counts by its first measurement (what the
  sampler was told); a pruned one by its figure at pruning (its warm-up throughput, or the bound it was pruned
  before compiling on); an OOM or a broken constraint as the worst feasible value so far (the sweep's
  placeholder); other failures not at all; warm-start evidence by its rescaled value;
- the cost: every measured trial's :attr:`~autotune.records.TrialRecord.duration_s` and
  :attr:`~autotune.records.TrialRecord.compile_s` (:class:`autotune.search.costmodel.CostModel`: the run, a fresh
  compile, and a compile from the study's cache where the study compiled the same graph before, in a trial or
  ahead of one, and the rest of a compile ahead still running: :attr:`CostAwareSampler.pricer`, a
  :class:`~autotune.search.costmodel.StudyPricer` told both by a sweep that compiles ahead, which also reads
  :meth:`CostAwareSampler.score` to choose what to compile: :mod:`autotune.sweep.proposals.compile_ahead`).

The candidates: every untried configuration of a space that has at most :data:`ENUMERATE_UP_TO` (all of
GPT-2's 120 and ResNet-50's 480); otherwise ``draws`` proposals of the inner sampler, ``random_draws`` random
configurations and the untried graph-sharing variants of the best compiled trials. The inner sampler proposes
alone until the study has ``min_observations`` trials that say something of the gain, and in studies this
cannot read (several objectives; a study no sweep made). Only the inner sampler's draw that is chosen keeps its
state writes (CMA-ES's), as in :class:`~autotune.search.samplers.NoRepeatSampler`; a configuration tried in the study,
or running in another worker, is never proposed. Prune-before-compile is the trial job's and works as before.

The defaults were chosen on the modelled GPT-2 records and judged on the modelled ResNet-50 ones
(``scripts/cost_benchmark.py``; BENCHMARKS.md "A search that counts GPU seconds").
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.search_space import intersection_search_space
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from autotune.records import TrialRecord, schema
from autotune.records.trial import finite, read_trial
from autotune.search.costmodel import COST_PRIOR_SD, GRAPH_NEUTRAL_KNOBS, CostModel, Seconds, StudyPricer, graph_key
from autotune.search.samplers import DeferredWrites, DelegatingSampler, resolve_name
from autotune.search.surrogate import Encoding, expected_improvement, fit_linear
from autotune.space import SamplerSpec

__all__ = ["CostAwareSampler", "cost_aware"]

_TRIED_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)
# The prior spread of one knob value's effect on the log objective: a factor of e either way is unsurprising
# (bf16 against fp32: 6x on GPT-2; compiling: up to 2.5x on ResNet-50; a batch size: a few % to 2x).
GAIN_PRIOR_SD = 1.0
# A space with at most this many configurations (its params all categorical or int) is scored whole: every
# untried configuration is a candidate.
ENUMERATE_UP_TO = 2000


def cost_aware(spec: SamplerSpec, param_kinds: Collection[str]) -> bool:
    """Whether a space's sampler proposes by EI per second: as its ``sampler.cost_aware`` says, else for TPE
    (``tpe``, or what ``auto`` resolves to), where it was measured to pay (BENCHMARKS.md), and for no other."""
    if spec.cost_aware is not None:
        return spec.cost_aware
    return resolve_name(spec.name, set(param_kinds)) == "tpe"


class CostAwareSampler(DelegatingSampler):
    """Proposes the candidate with the most expected improvement per predicted second (module docstring).

    ``cost_exponent``: the score is EI / seconds ** cost_exponent (1: Snoek et al.'s; 0: plain EI);
    ``use_cache``: whether the cost model knows the study's compile cache (False prices every compile as fresh);
    ``score_all``: score every untried configuration where there are at most ENUMERATE_UP_TO; else, and in
    larger spaces, ``draws`` of ``inner``, ``random_draws`` random configurations and the graph-sharing variants
    of the ``neighbours`` best compiled trials; ``gain_prior_sd``, ``cost_prior_sd``: the prior spread of one
    knob value's effect on the log objective and on the log seconds; ``seed``: the random configurations'.
    """

    def __init__(
        self,
        inner: BaseSampler,
        *,
        draws: int = 4,
        random_draws: int = 16,
        neighbours: int = 3,
        cost_exponent: float = 1.0,
        use_cache: bool = True,
        min_observations: int = 1,
        score_all: bool = True,
        gain_prior_sd: float = GAIN_PRIOR_SD,
        cost_prior_sd: float = COST_PRIOR_SD,
        seed: int | None = None,
    ) -> None:
        if draws < 1:
            raise ValueError(f"draws must be >= 1, got {draws=}")
        if random_draws < 0 or neighbours < 0:
            raise ValueError(f"random_draws and neighbours must be >= 0, got {random_draws=}, {neighbours=}")
        if cost_exponent < 0:
            raise ValueError(f"cost_exponent must be >= 0, got {cost_exponent=}")
        if min_observations < 1:
            raise ValueError(f"min_observations must be >= 1, got {min_observations=}")
        super().__init__(inner)
        self.draws = draws
        self.random_draws = random_draws
        self.neighbours = neighbours
        self.cost_exponent = cost_exponent
        self.min_observations = min_observations
        self.score_all = score_all
        self.gain_prior_sd = gain_prior_sd
        self.pricer = StudyPricer(use_cache, cost_prior_sd)  # a sweep that compiles ahead tells it what it compiled
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._read: dict[int, tuple[FrozenTrial, TrialRecord]] = {}  # trial id -> (as read, its record)
        self._objectives: tuple[tuple[str, str], ...] | None = None
        self._logs = True

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        super().reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {**_shared_space(study), **self.inner.infer_relative_search_space(study, trial)}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        inner_space = self.inner.infer_relative_search_space(study, trial)
        observed = self._observed(study, search_space)
        if observed is None:
            return self.inner.sample_relative(study, trial, inner_space)
        history, gains = observed
        names = sorted(search_space)
        tried = self._tried(study, trial, names)
        deferred = _KeptDraws(study)
        candidates: list[tuple[dict[str, Any], dict[tuple[int, str], Any] | None]] = []
        seen = set(tried)

        def add(params: dict[str, Any], writes: dict[tuple[int, str], Any] | None) -> None:
            key = _key(params, names)
            if key not in seen:
                seen.add(key)
                candidates.append((params, writes))

        for _ in range(self.draws):
            deferred.discard()
            drawn = self.inner.sample_relative(deferred.study, trial, inner_space) if inner_space else {}
            add(self._complete(drawn, search_space), deferred.pending())
        deferred.discard()
        every = _every_configuration(search_space) if self.score_all else None
        for params in every or ():
            add(params, None)
        for _ in range(0 if every else self.random_draws):
            add(self._complete({}, search_space), None)
        for params in self._cache_neighbours(history, gains, search_space):
            add(params, None)
        if not candidates:
            return {}  # every candidate was tried: the inner sampler's independent draws decide
        configurations = [params for params, _ in candidates]
        scores = self.scores(configurations, history, gains, search_space)
        params, writes = candidates[int(np.argmax(scores))]
        if writes is not None:
            deferred.commit_writes(writes)
        return params

    def score(self, study: Study, configurations: Sequence[Mapping[str, Any]]) -> np.ndarray | None:
        """Expected improvement per predicted second of each of ``configurations`` (whole configurations, as this
        sampler sees them), as :meth:`sample_relative` scores its candidates; None while the study says nothing of
        the gain yet (or cannot be read)."""
        space = _shared_space(study)
        observed = self._observed(study, space)
        return None if observed is None else self.scores(configurations, *observed, space)

    def seconds(self, study: Study, configurations: Sequence[Mapping[str, Any]]) -> Seconds | None:
        """Predicted seconds of a trial of each of ``configurations`` (whole configurations, as this sampler sees
        them), as :meth:`scores` prices them, with the part spent waiting for a compile ahead; None before the study
        has a measured trial (or where it cannot be read)."""
        space = _shared_space(study)
        history = self._history(study) if space else None
        return self._cost_model(history, space).seconds(configurations) if history else None

    def _observed(
        self, study: Study, search_space: Mapping[str, BaseDistribution]
    ) -> tuple[list[tuple[FrozenTrial, TrialRecord]], list[tuple[Mapping[str, Any], float, bool]]] | None:
        """The study's measured trials and what they say of the gain, or None where the inner sampler proposes
        alone: no search space, several objectives, a study this cannot read, fewer than ``min_observations``."""
        history = self._history(study) if search_space and len(study.directions) == 1 else None
        if history is None:
            return None
        gains, self._logs = _gains(history, self._metric(), study.direction, _evidence(study))
        return (history, gains) if len(gains) >= self.min_observations else None

    # -- scoring ---------------------------------------------------------------------------------------------
    def scores(
        self,
        configurations: Sequence[Mapping[str, Any]],
        history: Sequence[tuple[FrozenTrial, TrialRecord]],
        gains: Sequence[tuple[Mapping[str, Any], float, bool]],
        search_space: Mapping[str, BaseDistribution],
    ) -> np.ndarray:
        """Expected improvement per predicted second ** cost_exponent of each configuration."""
        encoding = Encoding(search_space)
        rows = encoding.matrix([p for p, _, _ in gains])
        targets = [y for _, y, _ in gains]
        if self._logs:  # effects as factors: a prior in log units, whatever the spread of the first few trials
            model = fit_linear(rows, targets, self.gain_prior_sd**2, standardise=False)
        else:
            model = fit_linear(rows, targets)
        best = max(y for _, y, feasible in gains if feasible)
        mean, sd = model.predict(encoding.matrix(configurations))
        improvement = expected_improvement(mean, sd, best)
        seconds = self._cost_model(history, search_space).predict(configurations)
        return improvement / np.power(seconds, self.cost_exponent)

    def _cost_model(
        self, history: Sequence[tuple[FrozenTrial, TrialRecord]], search_space: Mapping[str, BaseDistribution]
    ) -> CostModel:
        return self.pricer.model([(trial.params, record) for trial, record in history], search_space)

    # -- the study as read ---------------------------------------------------------------------------------------
    def _metric(self) -> str:
        assert self._objectives is not None
        return self._objectives[0][0]

    def _history(self, study: Study) -> list[tuple[FrozenTrial, TrialRecord]] | None:
        """The study's measured trials (not warm-start evidence) in the order they started; None: not readable."""
        if self._objectives is None:
            info = schema.load_study_info(study)
            if info is None:
                return None
            self._objectives = info.objectives
        out = []
        for trial in study._get_trials(
            deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
        ):
            if trial.number < 0:
                continue
            known = self._read.get(trial._trial_id)
            if known is None or known[0] is not trial:
                known = (trial, read_trial(trial, self._objectives))
                self._read[trial._trial_id] = known
            if known[1].measured:
                out.append(known)
        out.sort(
            key=lambda pair: (pair[0].datetime_start.timestamp() if pair[0].datetime_start else 0.0, pair[0].number)
        )
        return out

    @staticmethod
    def _tried(study: Study, trial: FrozenTrial, names: Sequence[str]) -> set[tuple[Any, ...]]:
        trials = study._get_trials(deepcopy=False, states=_TRIED_STATES, use_cache=True)
        return {_key(t.params, names) for t in trials if t.number != trial.number and t.number >= 0}

    # -- candidates --------------------------------------------------------------------------------------------
    def _complete(self, params: Mapping[str, Any], search_space: Mapping[str, BaseDistribution]) -> dict[str, Any]:
        """``params`` with every other param of ``search_space`` drawn at random."""
        out = {name: value for name, value in params.items() if name in search_space}
        for name, distribution in search_space.items():
            if name not in out:
                out[name] = self._random_value(distribution)
        return out

    def _random_value(self, distribution: BaseDistribution) -> Any:
        if isinstance(distribution, CategoricalDistribution):
            return distribution.choices[int(self._rng.integers(len(distribution.choices)))]
        if isinstance(distribution, IntDistribution):
            if distribution.log:
                value = math.exp(self._rng.uniform(math.log(distribution.low), math.log(distribution.high + 1)))
                return int(min(max(math.floor(value), distribution.low), distribution.high))
            steps = (distribution.high - distribution.low) // distribution.step
            return distribution.low + distribution.step * int(self._rng.integers(steps + 1))
        if isinstance(distribution, FloatDistribution):
            if distribution.log:
                return float(math.exp(self._rng.uniform(math.log(distribution.low), math.log(distribution.high))))
            if distribution.step is not None:
                steps = round((distribution.high - distribution.low) / distribution.step)
                return distribution.low + distribution.step * int(self._rng.integers(steps + 1))
            return float(self._rng.uniform(distribution.low, distribution.high))
        raise TypeError(f"cannot draw from {distribution!r}")

    def _cache_neighbours(
        self,
        history: Sequence[tuple[FrozenTrial, TrialRecord]],
        gains: Sequence[tuple[Mapping[str, Any], float, bool]],
        search_space: Mapping[str, BaseDistribution],
    ) -> list[dict[str, Any]]:
        """The graph-sharing variants (other values of the graph-neutral knobs) of the best compiled trials."""
        if self.neighbours == 0:
            return []
        neutral = [
            (name, d.choices)
            for name, d in sorted(search_space.items())
            if name in GRAPH_NEUTRAL_KNOBS and isinstance(d, CategoricalDistribution)
        ]
        if not neutral:
            return []
        compiled = sorted(
            ((y, params) for params, y, feasible in gains if feasible and graph_key(params) is not None),
            key=lambda pair: -pair[0],
        )
        out = []
        for _, params in compiled[: self.neighbours]:
            variants = [dict(params)]
            for name, choices in neutral:
                variants = [{**v, name: c} for v in variants for c in choices]
            out += [{n: v[n] for n in search_space if n in v} for v in variants]
        return [v for v in out if set(v) == set(search_space)]


def _shared_space(study: Study) -> dict[str, BaseDistribution]:
    """The params every finished trial has (pruned ones included), less those with a single value."""
    trials = study._get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED), use_cache=True)
    return {n: d for n, d in intersection_search_space(trials, include_pruned=True).items() if not d.single()}


def _evidence(study: Study) -> list[tuple[Mapping[str, Any], float | None, bool]]:
    """Warm-start evidence (:mod:`autotune.search.samplerview`: trials numbered below zero, values rescaled to this
    study's default) as (params, value, feasible): an infeasible one's value is None."""
    trials = study._get_trials(deepcopy=False, states=(TrialState.COMPLETE,), use_cache=True)
    out: list[tuple[Mapping[str, Any], float | None, bool]] = []
    for trial in trials:
        if trial.number >= 0 or not trial.values:
            continue
        feasible = all(c <= 0 for c in trial.constraints.values())
        out.append((trial.params, finite(trial.values[0]) if feasible else None, feasible))
    return out


def _gains(
    history: Sequence[tuple[FrozenTrial, TrialRecord]],
    metric: str,
    direction: StudyDirection,
    evidence: Sequence[tuple[Mapping[str, Any], float | None, bool]] = (),
) -> tuple[list[tuple[Mapping[str, Any], float, bool]], bool]:
    """(params as the sampler sees them, the objective made a maximum, feasible) of each informative trial (the
    study's, and ``evidence``'s), and whether the objective is in log units (every value above zero)."""
    raw: list[tuple[Mapping[str, Any], float | None, bool]] = list(evidence)
    for trial, record in history:
        if record.feasible:
            raw.append((trial.params, finite(record.first_metrics.get(metric)), True))
        elif record.pruned:
            raw.append((trial.params, finite(record.first_metrics.get(metric)), False))
        elif record.ok or record.outcome == "oom":
            raw.append((trial.params, None, False))  # infeasible: the worst feasible value, below
    known = [v for _, v, _ in raw if v is not None]
    if not known:
        return [], False
    logs = all(v > 0 for v in known)
    sign = 1.0 if direction == StudyDirection.MAXIMIZE else -1.0

    def y(value: float) -> float:
        return sign * (math.log(value) if logs else value)

    feasible = [y(v) for _, v, f in raw if f and v is not None]
    if not feasible:
        return [], logs
    worst = min(feasible)
    return [(p, y(v) if v is not None else worst, f) for p, v, f in raw if v is not None or f is False], logs


def _every_configuration(search_space: Mapping[str, BaseDistribution]) -> list[dict[str, Any]] | None:
    """Every configuration of a space of categorical and int params, if it has at most ENUMERATE_UP_TO; else None."""
    values: list[tuple[str, Sequence[Any]]] = []
    size = 1
    for name, distribution in sorted(search_space.items()):
        if isinstance(distribution, CategoricalDistribution):
            choices: Sequence[Any] = distribution.choices
        elif isinstance(distribution, IntDistribution) and not distribution.log:
            choices = range(distribution.low, distribution.high + 1, distribution.step)
        else:
            return None
        size *= len(choices)
        if size > ENUMERATE_UP_TO:
            return None
        values.append((name, choices))
    configurations: list[dict[str, Any]] = [{}]
    for name, choices in values:
        configurations = [{**c, name: v} for c in configurations for v in choices]
    return configurations


def _key(params: Mapping[str, Any], names: Sequence[str]) -> tuple[Any, ...]:
    return tuple(params.get(name, _ABSENT) for name in names)


_ABSENT = object()


class _KeptDraws(DeferredWrites):
    """Deferred sampler-state writes, whose pending set can be taken per draw and committed later."""

    def pending(self) -> dict[tuple[int, str], Any]:
        return dict(self._pending)

    def commit_writes(self, writes: Mapping[tuple[int, str], Any]) -> None:
        self._pending = dict(writes)
        self.commit()
