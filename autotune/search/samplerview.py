"""What the sampler reads: the study with its ordinal params as indices, and warm-start evidence added.

Optuna stores an ordinal param by its real value, a categorical over its choices, so the storage,
optuna-dashboard and ``trials_dataframe()`` show a batch of 16. A categorical has no order, though,
and the order is what an ordinal param is for (CMA-ES moves through it; TPE and GP model it). So
the sampler is wrapped in :class:`OrdinalView`: every study it is handed is a view whose trials
(and the trial being sampled) carry each ordinal as the ``IntDistribution`` index of its choice,
as Optuna stored them before, and every index it proposes is mapped back to the choice.

The view also carries another study's trials as evidence (:mod:`autotune.search.evidence`): appended to
the trials the sampler reads, numbered below zero (they collide with no trial of the study, and
:class:`~autotune.search.samplers.NoRepeatSampler` tells them apart), and never written anywhere. So they
are not in the storage, the budget, the leaderboard or the export: only the sampler sees them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Container, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from autotune.search.costmodel import Seconds, StudyPricer
from autotune.search.samplers import DelegatingSampler

if TYPE_CHECKING:
    from autotune.search.evidence import Evidence

__all__ = ["OrdinalView", "is_evidence"]


def is_evidence(trial: FrozenTrial) -> bool:
    """Whether ``trial`` is warm-start evidence from another study, not a trial of this one."""
    return trial.number < 0


class _Ordinal:
    """One ordinal param: its choices as stored (a categorical) and as the sampler sees them (an index)."""

    def __init__(self, choices: Sequence[Any]) -> None:
        self.stored = CategoricalDistribution(list(choices))
        self.index = IntDistribution(0, len(choices) - 1)


class OrdinalView(DelegatingSampler):
    """Hands ``inner`` the study as described in the module docstring.

    ``ordinals`` maps each ordinal param that the study stores by value to its choices (an ordinal
    stored as an index already, by a study made before values were stored, passes through as it
    is). ``evidence`` gives the warm-start trials, in the view's encoding, to read beside the study's.
    """

    def __init__(
        self, inner: BaseSampler, ordinals: Mapping[str, Sequence[Any]], evidence: Evidence | None = None
    ) -> None:
        super().__init__(inner)
        self.ordinals = {name: _Ordinal(choices) for name, choices in ordinals.items()}
        self.evidence = evidence
        self._converted: dict[int, tuple[FrozenTrial, FrozenTrial]] = {}  # trial id -> (as read, as converted)

    # --- the sampler interface, translated ------------------------------------------------------

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        space = self.inner.infer_relative_search_space(self._view(study), self.convert(trial))
        return {name: self._stored(name, distribution) for name, distribution in space.items()}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        indexed = {name: self._indexed(name, distribution) for name, distribution in search_space.items()}
        params = self.inner.sample_relative(self._view(study), self.convert(trial), indexed)
        return {name: self._value(name, search_space.get(name), value) for name, value in params.items()}

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        indexed = self._indexed(param_name, param_distribution)
        value = self.inner.sample_independent(self._view(study), self.convert(trial), param_name, indexed)
        return self._value(param_name, param_distribution, value)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(self._view(study), self.convert(trial))

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self.inner.after_trial(self._view(study), self.convert(trial), state, values)

    # --- what a sweep that compiles ahead asks of a cost-aware sampler (autotune.sweep.proposals.compile_ahead)
    # ---------------------

    def score(self, study: Study, configurations: Sequence[Mapping[str, Any]]) -> Any:
        """The inner sampler's score of each configuration (given and scored as stored: ordinals by value), where it
        scores configurations (:meth:`autotune.search.costaware.CostAwareSampler.score`); else None."""
        score = getattr(self.inner, "score", None)
        return score(self._view(study), [self.encode(c) for c in configurations]) if score is not None else None

    def seconds(self, study: Study, configurations: Sequence[Mapping[str, Any]]) -> Seconds | None:
        """The inner sampler's predicted seconds of a trial of each configuration (given as stored), with the part
        waiting for a compile ahead (:meth:`autotune.search.costaware.CostAwareSampler.seconds`); else None."""
        seconds = getattr(self.inner, "seconds", None)
        return seconds(self._view(study), [self.encode(c) for c in configurations]) if seconds is not None else None

    def set_compiled_ahead(
        self,
        configurations: Callable[[], Sequence[Mapping[str, Any]]],
        compiling: Callable[[], Sequence[tuple[Mapping[str, Any], float]]] = tuple,
    ) -> bool:
        """Tell the inner sampler which configurations' graphs were compiled ahead, and which are being compiled
        ahead with the seconds each compile has run (configurations as stored); False where it does not price
        compiles."""
        pricer = getattr(self.inner, "pricer", None)
        if not isinstance(pricer, StudyPricer):
            return False
        pricer.compiled_ahead = lambda: [self.encode(c) for c in configurations()]
        pricer.compiling_ahead = lambda: [(self.encode(c), s) for c, s in compiling()]
        return True

    # --- encodings ------------------------------------------------------------------------------

    def encode(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A configuration as stored (ordinals by value) as the sampler sees it: each ordinal its choice's index."""
        out = dict(params)
        for name, ordinal in self.ordinals.items():
            if name in out and out[name] in ordinal.stored.choices:
                out[name] = int(ordinal.stored.to_internal_repr(out[name]))
        return out

    def _is_stored_ordinal(self, name: str, distribution: BaseDistribution | None) -> bool:
        ordinal = self.ordinals.get(name)
        return ordinal is not None and distribution == ordinal.stored

    def _indexed(self, name: str, distribution: BaseDistribution) -> BaseDistribution:
        return self.ordinals[name].index if self._is_stored_ordinal(name, distribution) else distribution

    def _stored(self, name: str, distribution: BaseDistribution) -> BaseDistribution:
        """The storage's distribution for one the sampler saw (an ordinal's index -> its categorical)."""
        ordinal = self.ordinals.get(name)
        return ordinal.stored if ordinal is not None and distribution == ordinal.index else distribution

    def _value(self, name: str, distribution: BaseDistribution | None, proposed: Any) -> Any:
        if not self._is_stored_ordinal(name, distribution):
            return proposed
        return self.ordinals[name].stored.choices[int(proposed)]

    def convert(self, trial: FrozenTrial) -> FrozenTrial:
        """``trial`` as the sampler sees it: each ordinal stored by value as the index of its choice."""
        names = [n for n, d in trial.distributions.items() if self._is_stored_ordinal(n, d)]
        if not names:
            return trial
        params, distributions = dict(trial.params), dict(trial.distributions)
        for name in names:
            ordinal = self.ordinals[name]
            params[name], distributions[name] = int(ordinal.stored.to_internal_repr(params[name])), ordinal.index
        converted = copy.copy(trial)  # shares system_attrs: a trial being sampled keeps reading them lazily
        converted.params, converted.distributions = params, distributions
        return converted

    def converted_trials(self, trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
        """The study's trials as the sampler sees them; a finished trial is converted once, then remembered.

        Optuna hands out the same object for a finished trial at every read (it never changes), so the
        memo is checked by identity: a cheap test, several times per ask, over every trial of the study.
        """
        if not self.ordinals:
            return list(trials)
        out: list[FrozenTrial] = []
        for trial in trials:
            known = self._converted.get(trial._trial_id)
            if known is not None and known[0] is trial:
                out.append(known[1])
                continue
            converted = self.convert(trial)
            if trial.state.is_finished():
                self._converted[trial._trial_id] = (trial, converted)
            out.append(converted)
        return out

    def _view(self, study: Study) -> Study:
        # A view of a view works (the inner one finds nothing left to convert, and may add evidence).
        return _ViewStudy(study, self)


class _ViewStudy(Study):
    """A study whose trial reads go through an :class:`OrdinalView`; everything else is the study's own.

    Built without ``Study.__init__``: it shares the study's storage (so a sampler's state writes
    reach the trial, or a deferring storage wrapping it), its directions and its per-ask trial cache.
    """

    def __init__(self, study: Study, view: OrdinalView) -> None:
        self.__dict__.update(study.__dict__)
        self._source = study
        self._ordinal_view = view

    def _get_trials(
        self,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
        use_cache: bool = False,
    ) -> list[FrozenTrial]:
        view = self._ordinal_view
        trials = view.converted_trials(self._source._get_trials(deepcopy=False, states=states, use_cache=use_cache))
        if view.evidence is not None:
            # Rescaled to this study's default trial, which is among ``trials`` whenever evidence (COMPLETE) is.
            evidence = [t for t in view.evidence.beside(trials) if states is None or t.state in states]
            trials = [*evidence, *trials]  # numbered below zero: the list stays in trial-number order
        return copy.deepcopy(trials) if deepcopy else trials
