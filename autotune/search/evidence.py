"""Warm-start evidence: another study's measured trials, as this study's sampler reads them.

``autotune sweep SPACE --warm-start OTHER`` starts the sampler from what OTHER measured (another
GPU, another model version, a neighbouring shape). OTHER's trials are evidence, not measurements of
this study: they reach the sampler only, through :class:`autotune.search.samplerview.OrdinalView` (and as
CMA-ES's starting distribution, :mod:`autotune.search.samplers`), and are written nowhere, so the budget,
the leaderboard, the export and ``best`` never see them.

Which trials: OTHER's measured trials that Optuna holds as COMPLETE (ok ones, and out-of-memory ones,
which teach the sampler a boundary), with their params as OTHER recorded them (``autotune.params``,
fixed params included). A param of this space that OTHER did not search takes this space's
``default`` (what a study that does not search a knob runs with); a trial whose value lies outside
this space, or that lacks a param with no default, is skipped and counted. Evidence with no searched
param in common with this space is refused. Values are the result's metrics for this space's
objectives; feasibility is judged by this space's constraints.

Scale: another GPU measures on another scale. Every sweep measures the PyTorch-default
configuration first, so the evidence is rescaled by the ratio of the two studies' default values
(per objective) once this study's default is measured: both studies then speak in speedups over
their default. Without a default on either side the values stay as measured.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import AutotuneError
from autotune.expr import Expression
from autotune.records import StudyRecords, TrialRecord, schema
from autotune.records.trial import is_default
from autotune.space import Space

__all__ = ["Evidence", "load_evidence"]


@dataclass(frozen=True)
class _Point:
    """One usable trial of the other study, in this space's sampler view."""

    params: dict[str, Any]
    distributions: dict[str, BaseDistribution]
    values: tuple[float, ...] | None  # None: infeasible without values (out of memory)
    violation: float  # > 0 infeasible, as this study's recorder would judge it
    started: datetime.datetime | None
    completed: datetime.datetime | None


@dataclass(frozen=True)
class Evidence:
    """Another study's measured trials, ready for a sampler (see the module docstring).

    ``measured`` counts the other study's measured COMPLETE trials, ``points`` the usable ones;
    ``anchor`` is its default configuration's objective values (None: it has no feasible one).
    ``normalise`` False keeps the values as measured (the benchmark compares both).
    """

    source: str
    measured: int
    points: tuple[_Point, ...]
    anchor: tuple[float, ...] | None
    directions: tuple[str, ...]
    normalise: bool = True
    _cache: dict[Any, tuple[FrozenTrial, ...]] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def skipped(self) -> int:
        """Measured trials of the other study that could not be placed in this space."""
        return self.measured - len(self.points)

    def summary(self) -> str:
        """The line a warm-started sweep prints."""
        skipped = f"; {self.skipped} skipped: outside this space" if self.skipped else ""
        return f"warm start: the sampler starts from {len(self.points)} trials of study {self.source!r}{skipped}"

    def provenance(self) -> dict[str, Any]:
        """What the study records about its warm start (``autotune.warm_start``)."""
        return {"study": self.source, "trials": len(self.points), "skipped": self.skipped}

    def trials(self, anchor: Sequence[float] | None = None) -> tuple[FrozenTrial, ...]:
        """The evidence as finished trials numbered ``-n .. -1``, rescaled to ``anchor`` (this study's
        default values) where both studies have one; each objective's worst feasible value stands in
        for infeasible trials' values, as the sweep tells its own infeasible trials."""
        ratio = self._ratio(anchor)
        if ratio not in self._cache:
            self._cache[ratio] = self._build(ratio)
        return self._cache[ratio]

    def beside(self, trials: Sequence[FrozenTrial]) -> tuple[FrozenTrial, ...]:
        """:meth:`trials`, anchored to the default configuration among ``trials`` (this study's)."""
        default = next(
            (
                t
                for t in trials
                if t.number >= 0
                and t.state is TrialState.COMPLETE
                and is_default(t)
                and all(c <= 0 for c in t.constraints.values())
            ),
            None,
        )
        return self.trials(tuple(default.values) if default is not None else None)

    def _ratio(self, anchor: Sequence[float] | None) -> tuple[float, ...]:
        ones = tuple(1.0 for _ in self.directions)
        if not self.normalise or anchor is None or self.anchor is None:
            return ones
        return tuple(
            mine / theirs if mine > 0 and theirs > 0 else 1.0 for mine, theirs in zip(anchor, self.anchor, strict=True)
        )

    def _build(self, ratio: tuple[float, ...]) -> tuple[FrozenTrial, ...]:
        feasible = [p.values for p in self.points if p.values is not None and p.violation <= 0]
        worst = tuple(
            (min if direction == "maximize" else max)(v[i] for v in feasible) * ratio[i] if feasible else 0.0
            for i, direction in enumerate(self.directions)
        )
        out = []
        for i, point in enumerate(self.points):
            values = [v * r for v, r in zip(point.values, ratio, strict=True)] if point.values else list(worst)
            trial = optuna.trial.create_trial(
                state=TrialState.COMPLETE,
                values=values,
                params=point.params,
                distributions=point.distributions,
                system_attrs={"autotune.search.evidence": self.source},
                constraints={"feasibility": point.violation},
            )
            trial.number = trial._trial_id = i - len(self.points)  # below zero: no trial of the study has it
            trial.datetime_start, trial.datetime_complete = point.started, point.completed
            out.append(trial)
        return tuple(out)


def load_evidence(name: str, storage: optuna.storages.BaseStorage, space: Space, this_study: str) -> Evidence:
    """The evidence of study ``name`` (in the sweep's own ``storage``) for a sweep of ``space``.

    Bad input raises AutotuneError: an unknown study, the sweep's own study, one that autotune did
    not make, one with no param in common with ``space``.
    """
    if name == this_study:
        raise AutotuneError(f"--warm-start {name}: a study cannot warm-start from itself")
    names = sorted(s.study_name for s in storage.get_all_studies())
    if name not in names:
        raise AutotuneError(f"--warm-start {name}: no such study in this storage (studies there: {', '.join(names)})")
    other = optuna.load_study(study_name=name, storage=storage)
    if schema.load_study_info(other) is None:
        raise AutotuneError(f"--warm-start {name}: that study was not made by autotune sweep")
    return from_study(other, space)


def from_study(other: optuna.Study, space: Space) -> Evidence:
    """The evidence in ``other`` for a sweep of ``space`` (see the module docstring)."""
    info = schema.load_study_info(other)
    objectives = info.objectives if info is not None else tuple((o.metric, o.direction) for o in space.objectives)
    measured = [r for r in StudyRecords(other, objectives).measured if r.state is TrialState.COMPLETE]
    searched = {name for name, spec in space.params.items() if spec.kind != "fixed"}
    theirs = {name for r in measured for name in r.params}
    if measured and not searched & theirs:
        raise AutotuneError(
            f"--warm-start {other.study_name}: it has no param in common with this space's searched params "
            f"(its params: {', '.join(sorted(theirs)) or 'none'}; this space's: {', '.join(sorted(searched))})"
        )
    points = tuple(p for t in measured if (p := _point(t, space)) is not None)
    return Evidence(
        source=other.study_name,
        measured=len(measured),
        points=points,
        anchor=_default_values(measured, space),
        directions=tuple(o.direction for o in space.objectives),
    )


def _default_values(measured: list[TrialRecord], space: Space) -> tuple[float, ...] | None:
    """The objective values of the other study's default configuration (None: it has no feasible one)."""
    for record in measured:
        if record.default:
            point = _point(record, space, in_space=False)  # its default need not lie in this space
            if point is not None and point.values is not None and point.violation <= 0:
                return point.values
    return None


def _point(record: TrialRecord, space: Space, *, in_space: bool = True) -> _Point | None:
    """``record`` as evidence for ``space``; None if it cannot be placed there (or lacks an objective)."""
    result = record.result
    assert result is not None  # a measured record has one
    view = space.sampler_params(record.params)
    if view is None and in_space:
        return None
    params, distributions = view if view is not None else ({}, {})
    if not result.ok:
        if (record.violation or 0.0) <= 0:
            return None  # COMPLETE but neither ok nor infeasible: nothing to learn from
        return _Point(params, distributions, None, 1.0, record.started, record.ended)
    try:
        values = tuple(float(result.metrics[o.metric]) for o in space.objectives)
    except (KeyError, TypeError, ValueError):
        return None
    violation = max((_violation(c, result.metrics) for c in space.constraints), default=-1.0)
    return _Point(params, distributions, values, violation, record.started, record.ended)


def _violation(constraint: Expression, metrics: dict[str, Any]) -> float:
    """A metric constraint of this space on the other study's metrics; one it cannot judge does not count."""
    try:
        return constraint.violation(metrics)
    except AutotuneError:  # a metric the other study's trials did not report
        return -1.0
