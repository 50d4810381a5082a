"""Search efficiency of samplers, measured by replaying real GPU measurements through the sweep engine.

    python scripts/search_benchmark.py --records ../shared/data/h200_triton_matmul_8192.json \\
        --space search_spaces/triton_matmul.yaml --seeds 10 --budget 60
    python scripts/search_benchmark.py ... --samplers random,tpe,tpe-startup5   # a subset

Every sampler configuration runs one replay sweep per seed through :func:`autotune.sweep.run_sweep`
(the real ask/tell loop: the default configuration first, duplicates answered from earlier
trials, feasibility rules rejecting before running, OOM told as infeasible). From each sweep's
measured trials, in order, it takes:

- trials to 2%: measured trials until one is within 2% of the best record (">N" if none in N);
- best at the fixed budget (20 measured trials, the shipped space's), as a % of the best record;
- infeasible configurations run: measured trials that the shipped space's feasibility rules
  reject (0 whenever the rules are in the space; the "no rule" row shows what they save).

The space's encoding is compared too: the same TPE over the shipped space with every ordinal
param turned into a plain categorical, and over the shipped space without its feasibility rules
(both written to temporary files from the shipped YAML).
"""

from __future__ import annotations

import argparse
import io
import math
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import torch
import yaml
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from autotune.records import StudyRecords, Tally
from autotune.search.replay import ReplayRecords
from autotune.search.samplers import DelegatingSampler, NoRepeatSampler, make_sampler
from autotune.space import Space, load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

# Some TPE variants below use arguments Optuna 4.9 deprecated (gamma, consider_endpoints): the
# warning would repeat once per sweep. The table's notes say which rows use them.
warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")
# Experimental arguments (group, with_margin) would repeat too.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

TARGET = 0.98  # "within 2% of the best record"
SPACES = ("shipped", "categorical", "no-rule")
SamplerFactory = Callable[[int], BaseSampler]


@dataclass(frozen=True)
class SamplerConfig:
    """One row of the table: a sampler (built per seed) over one variant of the space.

    ``make`` None stands for the shipped space's own sampler, as autotune builds it
    (:func:`autotune.search.samplers.make_sampler`). ``seeds`` and ``budget`` cap the command line's for
    samplers too slow for the five minutes a benchmark run should take; the table says so.
    """

    name: str
    make: SamplerFactory | None
    space: str = "shipped"  # one of SPACES
    note: str = ""
    seeds: int | None = None
    budget: int | None = None


def _tpe(**kwargs: Any) -> SamplerFactory:
    return lambda seed: optuna.samplers.TPESampler(seed=seed, **kwargs)


def _gp(**kwargs: Any) -> SamplerFactory:
    return lambda seed: optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False, **kwargs)


def _cmaes(**kwargs: Any) -> SamplerFactory:
    return lambda seed: optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False, **kwargs)


def _no_repeat(make: SamplerFactory) -> SamplerFactory:
    return lambda seed: NoRepeatSampler(make(seed))


def _hyperopt_gamma(n: int) -> int:
    """Hyperopt's split: fewer trials count as "good" than Optuna's 10% (more exploitation early)."""
    return min(math.ceil(0.25 * math.sqrt(n)), 25)


RECOMMENDED = _no_repeat(_cmaes(with_margin=True, popsize=12))
CONFIGS: tuple[SamplerConfig, ...] = (
    SamplerConfig("shipped", None, note="the space's own sampler, as autotune.search.samplers.make_sampler builds it"),
    SamplerConfig("random", lambda seed: optuna.samplers.RandomSampler(seed=seed)),
    SamplerConfig("tpe", _tpe(), note="Optuna 5 defaults: multivariate, 10 start-up trials, 24 EI candidates"),
    SamplerConfig("tpe-startup5", _tpe(n_startup_trials=5)),
    SamplerConfig("tpe-independent", _tpe(multivariate=False), note="one Parzen estimator per param"),
    SamplerConfig("tpe-group", _tpe(group=True), note="same as multivariate here: no conditional params"),
    SamplerConfig("tpe-endpoints", _tpe(consider_endpoints=True), note="deprecated argument"),
    SamplerConfig("tpe-hyperopt-gamma", _tpe(gamma=_hyperopt_gamma), note="deprecated argument"),
    SamplerConfig("tpe-ei64", _tpe(n_ei_candidates=64)),
    SamplerConfig("tpe+norepeat", _no_repeat(_tpe()), note="re-draws of TPE mostly repeat its argmax"),
    SamplerConfig("gp", _gp(), note="slow: 0.1-0.3 s a proposal", budget=40),
    SamplerConfig("cmaes", _cmaes(), note="ordinal indices as rounded reals; no constraints, infeasible = worst"),
    SamplerConfig("cmaes-margin", _cmaes(with_margin=True), note="margin keeps discrete params from freezing"),
    SamplerConfig("cmaes-margin-pop12+norepeat", RECOMMENDED, note="proposed default for ordinal spaces"),
    SamplerConfig(
        "cmaes-margin-pop100+norepeat",
        _no_repeat(_cmaes(with_margin=True, popsize=100)),
        note="control: never adapts in 60 trials, i.e. draws from the initial Gaussian (centre of the ranges)",
    ),
    SamplerConfig("tpe@categorical", _tpe(), "categorical", note="ordinal params declared as categoricals"),
    SamplerConfig(
        "cmaes-margin-pop12+norepeat@categorical",
        RECOMMENDED,
        "categorical",
        note="CMA-ES samples categoricals at random",
    ),
    SamplerConfig("tpe@no-rule", _tpe(), "no-rule", note="no feasibility rule: OOM configs run"),
)


# --- running one sweep ------------------------------------------------------------------------


class StudyCatcher(DelegatingSampler):
    """Delegates to ``inner`` and keeps the study it samples for.

    run_sweep returns a summary, not the study, and an in-memory study cannot be reopened; the
    sampler is the one object of ours the engine hands its study to.
    """

    def __init__(self, inner: BaseSampler) -> None:
        super().__init__(inner)
        self.study: Study | None = None

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.study = study
        super().before_trial(study, trial)


class _Answered(Exception):
    """Raised from the progress hook to end a sweep whose questions are answered."""


class _StopWhenAnswered(Progress):
    """Progress that ends the sweep once ``answered()`` holds after a measured trial.

    The engine calls ``finished`` after the trial is told to Optuna, and no sampler here knows the
    budget, so the trials up to the stop are exactly those a full-length sweep runs: stopping
    only saves time (GP spends about 0.15 s per proposal on this CPU).
    """

    def __init__(self, answered: Callable[[], bool]) -> None:
        super().__init__(None, None, stream=io.StringIO())
        self._answered = answered

    def finished(
        self, label: str, outcome: str, seconds: float, measured: bool, counts: Tally, best: str, source: str = ""
    ) -> None:
        super().finished(label, outcome, seconds, measured, counts, best, source)
        if measured and self._answered():
            raise _Answered


@dataclass(frozen=True)
class Goal:
    """What a sweep is judged by: the best record's value, its direction, the fixed budget."""

    best: float
    maximize: bool
    fixed_budget: int

    def reached(self, value: float | None) -> bool:
        """Whether ``value`` is within 2% of the best record."""
        if value is None:
            return False
        return value >= TARGET * self.best if self.maximize else value <= self.best / TARGET

    def percent(self, value: float | None) -> float:
        """``value`` as a % of the best record (100 is the best; higher is better either way)."""
        if value is None:
            return 0.0
        return 100.0 * (value / self.best if self.maximize else self.best / value)


@dataclass(frozen=True)
class SweepOutcome:
    """One seed's sweep: the objective of each measured trial in order (None: not ok)."""

    values: list[float | None]
    infeasible_run: int
    exhausted: bool  # the engine stopped it: every proposal was a duplicate or rejected
    seconds: float

    def trials_to_target(self, goal: Goal) -> float:
        """Measured trials until one is within 2% of the best record; inf if none."""
        return next((i + 1 for i, v in enumerate(self.values) if goal.reached(v)), math.inf)

    def best_percent_at(self, goal: Goal, budget: int) -> float:
        """The best of the first ``budget`` measured trials, as a % of the best record."""
        return max((goal.percent(v) for v in self.values[:budget]), default=0.0)


def _measured(study: Study, space: Space, metric: str) -> tuple[list[float | None], int]:
    """Objective values of the measured trials in order, and how many broke the shipped rules."""
    measured = StudyRecords(study, [(metric, "maximize")]).measured  # first measurements: what the search saw
    values = [record.first_metrics.get(metric) if record.ok else None for record in measured]
    infeasible = sum(1 for record in measured if not space.is_feasible(record.params)[0])
    return [float(v) if v is not None else None for v in values], infeasible


def run_one(
    space: Space, shipped: Space, records: Path, sampler: BaseSampler, seed: int, budget: int, goal: Goal
) -> SweepOutcome:
    """One replay sweep of at most ``budget`` measured trials, stopped once its answers are known."""
    catcher = StudyCatcher(sampler)
    metric = space.objectives[0].metric

    def answered() -> bool:
        assert catcher.study is not None
        values, _ = _measured(catcher.study, shipped, metric)
        return len(values) >= goal.fixed_budget and any(goal.reached(v) for v in values)

    options = SweepOptions(
        study_name=f"bench-{seed}", storage="memory", replay=records, tracking=False, n_trials=budget, seed=seed
    )
    started = time.monotonic()
    exhausted = False
    try:
        summary = run_sweep(space, options, progress=_StopWhenAnswered(answered), sampler=catcher)
        exhausted = summary.stop_reason.startswith("search space exhausted")
    except _Answered:
        pass
    assert catcher.study is not None
    values, infeasible = _measured(catcher.study, shipped, metric)
    return SweepOutcome(values, infeasible, exhausted, time.monotonic() - started)


# --- space variants ---------------------------------------------------------------------------


def variant_text(shipped_text: str, variant: str) -> str:
    """The shipped YAML, with ordinal params made categorical or the feasibility rules dropped."""
    data = yaml.safe_load(shipped_text)
    if variant == "categorical":
        for raw in data["params"].values():
            if isinstance(raw, dict):
                raw.pop("ordinal", None)
    elif variant == "no-rule":
        data.pop("feasibility", None)
    elif variant != "shipped":
        raise ValueError(f"unknown space variant {variant=}")
    return yaml.safe_dump(data, sort_keys=False)


def load_variants(path: Path, folder: Path) -> dict[str, Space]:
    """Every space variant, loaded as a replay sweep loads its space."""
    shipped_text = path.read_text()
    spaces = {"shipped": load_space(path, replay=True)}
    for variant in SPACES[1:]:
        file = folder / f"{path.stem}-{variant}.yaml"
        file.write_text(variant_text(shipped_text, variant))
        spaces[variant] = load_space(file, replay=True)
    return spaces


# --- statistics and the table -----------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of values that may include inf."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _trials(value: float, budget: int) -> str:
    return f">{budget}" if math.isinf(value) else f"{value:g}"


@dataclass(frozen=True)
class Row:
    """The summary of one sampler configuration over all seeds."""

    config: SamplerConfig
    outcomes: list[SweepOutcome]
    budget: int  # the most measured trials each sweep had

    def cells(self, goal: Goal) -> list[str]:
        hits = [o.trials_to_target(goal) for o in self.outcomes]
        at_budget = [o.best_percent_at(goal, goal.fixed_budget) for o in self.outcomes]
        never = sum(math.isinf(h) for h in hits)
        exhausted = sum(o.exhausted and math.isinf(h) for o, h in zip(self.outcomes, hits, strict=True))
        notes = [self.config.note] if self.config.note else []
        if self.config.seeds is not None:
            notes.append(f"capped for time: {len(self.outcomes)} seeds")
        if self.config.budget is not None:
            notes.append(f"capped for time: at most {self.budget} trials")
        if exhausted:
            notes.append(f"{exhausted} stopped early: space exhausted")
        return [
            self.config.name,
            _trials(statistics.median(hits), self.budget),
            _trials(percentile(hits, 90), self.budget),
            f"{never}/{len(hits)}",
            f"{statistics.median(at_budget):.1f}%",
            str(sum(o.infeasible_run for o in self.outcomes)),
            f"{statistics.mean(o.seconds for o in self.outcomes):.1f}",
            "; ".join(notes),
        ]


def render(rows: list[Row], goal: Goal) -> str:
    """The markdown table."""
    header = [
        "sampler config",
        "median trials-to-2%",
        "p90",
        "seeds that never got there",
        f"best at {goal.fixed_budget} trials (median % of best)",
        "infeasible configs run",
        "s/sweep",
        "notes",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row.cells(goal)) + " |" for row in rows]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


def run_config(
    config: SamplerConfig, spaces: dict[str, Space], records: Path, seeds: int, budget: int, goal: Goal
) -> Row:
    """Every seed's sweep for one sampler configuration (its caps applied)."""
    shipped = spaces["shipped"]
    seeds = min(seeds, config.seeds or seeds)
    budget = min(budget, config.budget or budget)
    outcomes = []
    for seed in range(seeds):
        kinds = {param.kind for param in shipped.params.values()}
        sampler = config.make(seed) if config.make else make_sampler(shipped.sampler.name, seed, kinds)
        outcomes.append(run_one(spaces[config.space], shipped, records, sampler, seed, budget, goal))
    print(f"{config.name}: done ({sum(o.seconds for o in outcomes):.0f}s)", file=sys.stderr, flush=True)
    return Row(config, outcomes, budget)


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """GP's tensors are tiny: a second thread only fights the others on a shared CPU (5x slower here)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _pick(names: str | None) -> list[SamplerConfig]:
    if not names:
        return list(CONFIGS)
    known = {c.name: c for c in CONFIGS}
    unknown = [n for n in names.split(",") if n not in known]
    if unknown:
        raise SystemExit(f"unknown sampler config(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, required=True, help="replay file (JSON records)")
    parser.add_argument("--space", type=Path, required=True, help="the shipped search space (YAML)")
    parser.add_argument("--seeds", type=int, default=10, help="sweeps per sampler config (seeds 0..N-1)")
    parser.add_argument("--budget", type=int, default=60, help="most measured trials per sweep")
    parser.add_argument("--samplers", help=f"comma-separated subset of: {', '.join(c.name for c in CONFIGS)}")
    args = parser.parse_args(argv)
    configs = _pick(args.samplers)

    with tempfile.TemporaryDirectory() as tmp:
        spaces = load_variants(args.space, Path(tmp))
    shipped = spaces["shipped"]
    objective = shipped.objectives[0]
    records = ReplayRecords.load(args.records)
    best = records.lookup(records.best(objective.metric, objective.direction)["params"])  # derives throughput
    fixed = min(shipped.budget.trials or 20, args.budget)
    goal = Goal(float(best.metrics[objective.metric]), objective.direction == "maximize", fixed)

    with _one_torch_thread():
        rows = [run_config(config, spaces, args.records, args.seeds, args.budget, goal) for config in configs]
    print(
        f"{args.records.name}: best record {goal.best:g} {objective.metric}; seeds 0..{args.seeds - 1}; "
        f"at most {args.budget} measured trials per sweep; shipped sampler: {shipped.sampler.name}\n"
    )
    print(render(rows, goal))
    return 0


if __name__ == "__main__":
    sys.exit(main())
