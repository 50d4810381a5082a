"""Before the first proposal: the study opened (or resumed) for a space, its budget, and what it must run first."""

from __future__ import annotations

import time
from typing import NamedTuple

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution

from autotune.errors import AutotuneError
from autotune.records import StudyRecords, SweepState, schema
from autotune.records.schema import StudyInfo
from autotune.search.costaware import CostAwareSampler, cost_aware
from autotune.search.evidence import Evidence, load_evidence
from autotune.search.samplers import make_sampler
from autotune.search.samplerview import OrdinalView
from autotune.space import Space
from autotune.storage.rdb import close_storage, open_storage, quiet_optuna
from autotune.sweep.options import DEFAULT_TRIALS, SweepOptions, study_name
from autotune.sweep.proposals.coverage import Coverage
from autotune.views.progress import Progress

__all__ = [
    "OpenStudy",
    "enqueue_first_trials",
    "open_study",
    "prepare_study",
    "record_budget",
    "study_info",
    "trial_budget",
]


def study_info(space: Space, options: SweepOptions) -> StudyInfo:
    """What the study is made for, as stored on it."""
    return StudyInfo(
        workload=space.workload.name,
        preset=space.workload.preset,
        device=options.device or space.device,
        space_path=str(space.path),
        space_text=space.text,
        objectives=tuple((o.metric, o.direction) for o in space.objectives),
    )


class OpenStudy(NamedTuple):
    """An opened study, its storage, and the space as the study encodes it (:meth:`Space.stored_as`)."""

    study: optuna.Study
    storage: optuna.storages.BaseStorage
    space: Space


def open_study(
    space: Space,
    options: SweepOptions,
    info: StudyInfo,
    sampler: optuna.samplers.BaseSampler | None,
    progress: Progress | None = None,
) -> OpenStudy:
    """Create the study, or load it to resume; a study made for another workload is bad input.

    The sampler (``sampler``, else the space's, cost-aware where :func:`autotune.search.costaware.cost_aware`
    says) reads the study through an :class:`~autotune.search.samplerview.OrdinalView`, with the evidence of
    ``--warm-start`` if any (a resumed study keeps the warm start it recorded); ``progress`` gets the line
    saying so.
    """
    name = study_name(space, options)
    storage = open_storage(options.storage)
    try:
        # Bad input (an unknown study, say) before a study is made for it.
        evidence = load_evidence(options.warm_start, storage, space, name) if options.warm_start else None
        study = optuna.create_study(storage=storage, study_name=name, directions=space.directions, load_if_exists=True)
        _check_same_study(study, info, options.storage)
    except BaseException:
        close_storage(storage)
        raise
    _name_metrics(study, space)
    _check_same_choices(study, space)
    if any(spec.kind == "ordinal" for spec in space.params.values()):
        space = space.stored_as(study.get_trials(deepcopy=False))
    evidence = _warm_start(study, storage, space, evidence, progress)
    if sampler is None:
        seed = options.seed if options.seed is not None else space.sampler.seed
        kinds = {param.kind for param in space.params.values()}
        sampler = make_sampler(space.sampler.name, seed, kinds, evidence.trials() if evidence else ())
        if cost_aware(space.sampler, kinds):
            sampler = CostAwareSampler(sampler, seed=seed)
    study.sampler = OrdinalView(sampler, space.ordinals, evidence)
    return OpenStudy(study, storage, space)


def _check_same_choices(study: optuna.Study, space: Space) -> None:
    """Bad input: a param whose choices changed since the study began. Optuna cannot mix two sets of choices
    for one param in a study, and an ordinal stored as an index would silently mean another value."""
    seen: set[str] = set()
    for trial in study.get_trials(deepcopy=False):
        for name, distribution in trial.distributions.items():
            spec = space.params.get(name)
            if name in seen or spec is None or spec.choices is None:
                continue
            seen.add(name)
            if isinstance(distribution, CategoricalDistribution):
                before = list(distribution.choices)
            elif isinstance(distribution, IntDistribution) and spec.kind == "ordinal":
                before = [f"{distribution.high - distribution.low + 1} choices"]  # indices: only the count is known
                if distribution.high - distribution.low + 1 == len(spec.choices):
                    continue
            else:
                continue
            if before != list(spec.choices):
                raise AutotuneError(
                    f"study {study.study_name!r} searched {name} over {before}, this space over {list(spec.choices)}: "
                    "a study keeps its choices; restore them, or use --study NAME for a new study"
                )


def _name_metrics(study: optuna.Study, space: Space) -> None:
    """Name the objectives on the study, so optuna-dashboard and ``trials_dataframe()`` show the metrics."""
    names = [objective.metric for objective in space.objectives]
    if study.metric_names != names:
        with quiet_optuna():  # set_metric_names is experimental in Optuna 5
            study.set_metric_names(names)


def _warm_start(
    study: optuna.Study,
    storage: optuna.storages.BaseStorage,
    space: Space,
    evidence: Evidence | None,
    progress: Progress | None,
) -> Evidence | None:
    """``evidence`` (of ``--warm-start``), else that of the warm start the study recorded; recorded and announced.

    A resumed sweep keeps proposing as it began, so it reads the same evidence without the flag; if
    that study is gone, it says so and goes on without.
    """
    recorded = study.user_attrs.get(schema.STUDY_ATTR_WARM_START)
    if evidence is None and recorded:
        try:
            evidence = load_evidence(recorded["study"], storage, space, study.study_name)
        except AutotuneError as exc:
            if progress is not None:
                progress.message(f"warm start: {exc}; this resumed sweep goes on without that evidence")
            return None
    if evidence is None:
        return None
    if recorded != evidence.provenance():
        study.set_user_attr(schema.STUDY_ATTR_WARM_START, evidence.provenance())
    if progress is not None:
        progress.message(evidence.summary())
    return evidence


def _check_same_study(study: optuna.Study, info: StudyInfo, storage: str) -> None:
    stored = schema.load_study_info(study)
    if stored is None:
        study.set_user_attr(schema.STUDY_ATTR_INFO, info.to_dict())
        return
    if (stored.workload, stored.preset, stored.objectives) != (info.workload, info.preset, info.objectives):
        raise AutotuneError(
            f"study {study.study_name!r} in {storage} was made for {stored.workload} "
            f"({stored.preset}, objectives {list(stored.objectives)}); use --study NAME for a new one"
        )


def trial_budget(space: Space, options: SweepOptions) -> tuple[int | None, float | None]:
    """Measured trials in all (None: no limit) and the wall-clock deadline (None: none): ``options.deadline``
    where a process set it for the sweep (a ``--gpus`` orchestrator), else the time limit from now."""
    budget = options.n_trials or space.budget.trials
    timeout = options.timeout_s or space.budget.timeout_s
    if budget is None and timeout is None:
        budget = DEFAULT_TRIALS
    if options.deadline is not None:
        return budget, options.deadline
    return budget, time.time() + timeout if timeout else None


def enqueue_first_trials(study: optuna.Study, space: Space, budget: int | None) -> int | None:
    """Queue the PyTorch-default configuration first (every leaderboard shows the speedup over it)
    and, for a grid sampler, every point of the grid; returns the budget, capped by the grid's size
    (also when resuming, or when another process queued the grid) and by what a finite space can
    still measure (:meth:`~autotune.sweep.proposals.coverage.Coverage.budget_cap`)."""
    trials = study.get_trials(deepcopy=False)
    objectives = [(objective.metric, objective.direction) for objective in space.objectives]
    if not any(record.default for record in StudyRecords(study, objectives).trials):  # queued ones too
        study.enqueue_trial(space.optuna_params(space.default_params()), user_attrs={schema.ATTR_DEFAULT: True})
    if space.sampler.name == "grid":
        grid = space.grid()
        if not trials:
            for params in grid:
                study.enqueue_trial(space.optuna_params(params), skip_if_exists=True)
        if budget is None or budget > len(grid):
            budget = len(grid)
    return _capped_by_space(study, space, budget)


def record_budget(study: optuna.Study, space: Space, options: SweepOptions, budget: int | None) -> None:
    """Store the budget this sweep runs with (the command's ``--n-trials`` and ``--timeout`` over the space's, capped
    by what the space can measure) on the study, where ``autotune status`` reads it from another terminal."""
    timeout = options.timeout_s or space.budget.timeout_s
    value = SweepState.budget_attr(budget, timeout)
    if study.user_attrs.get(schema.STUDY_ATTR_BUDGET) != value:
        study.set_user_attr(schema.STUDY_ATTR_BUDGET, value)


def _capped_by_space(study: optuna.Study, space: Space, budget: int | None) -> int | None:
    """``budget``, no larger than the measured trials a finite space's study can have once every configuration is."""
    coverage = Coverage.of(space)
    if coverage is None:
        return budget
    objectives = [(objective.metric, objective.direction) for objective in space.objectives]
    cap = coverage.budget_cap([record.params for record in StudyRecords(study, objectives).measured])
    return cap if budget is None else min(budget, cap)


def prepare_study(space: Space, options: SweepOptions) -> tuple[int | None, int]:
    """Open (or create) the study once and queue its first trials, before several workers start on it.

    Workers started together would otherwise each find no default configuration queued, and each
    queue one. Returns the budget (capped as :func:`enqueue_first_trials` does) and the measured
    trials so far; a study made for another workload is bad input, said once.
    """
    study, storage, space = open_study(space, options, study_info(space, options), None)
    try:
        budget = enqueue_first_trials(study, space, trial_budget(space, options)[0])
        return budget, len(StudyRecords(study, study_info(space, options).objectives).measured)
    finally:
        close_storage(storage)
