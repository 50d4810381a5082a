"""GPU time until a configuration within 2% of the best is measured: samplers compared by replay with trial times.

    python scripts/cost_benchmark.py --workload gpt2 --seeds 100 --budget 20
    python scripts/cost_benchmark.py --workload resnet50 --seeds 100 --samplers tpe,cost-aware

Each sampler runs one replay sweep per seed through :func:`autotune.sweep.run_sweep` (the real engine: the
default configuration first, duplicates answered from earlier trials, pruning after warm-up and before
compiling) over a timed record set (:mod:`autotune.search.replaytimes`: every trial costs its recorded seconds,
the study's compile cache included). The record sets are MODELLED (``scripts/record_model.py``: fitted on
real H100 trials, labelled as a model in the file); what they are good for is comparing search strategies.

From each sweep's study, the record model (:class:`autotune.records.StudyRecords`) gives:

- GPU s to 2%: :meth:`~autotune.records.StudyRecords.time_to_within` ``(0.02, target=best)``: trial time,
  every measured trial's replayed duration in start order, until the first trial within 2% of the best
  record; "never" when none came within it in the budget;
- the summary line's figure, the same method without a target: to within 2% of the sweep's own winner
  (what ``time_to_within_2pct_s`` in the summary and MLflow says of this sweep);
- the trial time, its compile share, the cache hits (compiled trials whose graph the sweep had compiled
  before) and the seconds they saved, the winner as a % of the best record.

Medians over seeds, with a 95% bootstrap interval (seeds resampled, 2,000 times); "never" counts as
infinite, so a median that is infinite says most seeds never got there.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.samplers import BaseSampler
from search_benchmark import StudyCatcher, _one_torch_thread, percentile

from autotune.records import StudyRecords, params_key
from autotune.search.costaware import CostAwareSampler
from autotune.search.costmodel import graph_key
from autotune.search.replay import ReplayRecords
from autotune.search.samplers import make_sampler
from autotune.space import Space, load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = {
    "gpt2": (REPO / "scripts" / "data" / "gpt2_h100_space.yaml", REPO / "scripts" / "data" / "gpt2_h100_modelled.json"),
    "resnet50": (REPO / "search_spaces" / "resnet50.yaml", REPO / "scripts" / "data" / "resnet50_h100_modelled.json"),
}
SamplerFactory = Callable[[int], BaseSampler]


def _tpe(seed: int) -> BaseSampler:
    return make_sampler("tpe", seed)


def _cost_aware(**kwargs: Any) -> SamplerFactory:
    return lambda seed: CostAwareSampler(_tpe(seed), seed=seed, **kwargs)


SAMPLERS: dict[str, tuple[SamplerFactory | None, str]] = {
    "shipped": (None, "the space's own sampler, as autotune builds it"),
    "tpe": (_tpe, "plain TPE, the sampler gpt2.yaml and resnet50.yaml name"),
    "random": (lambda seed: optuna.samplers.RandomSampler(seed=seed), ""),
    "cost-aware": (_cost_aware(), "EI per predicted second over TPE, every configuration scored, cache known"),
}


def named_sampler(name: str) -> tuple[SamplerFactory | None, str]:
    """A sampler by name; ``cost-aware?cost_exponent=0.5&use_cache=false`` sets CostAwareSampler's arguments."""
    if name in SAMPLERS:
        return SAMPLERS[name]
    base, _, query = name.partition("?")
    if base != "cost-aware" or not query:
        raise SystemExit(f"unknown sampler {name!r}; known: {', '.join(SAMPLERS)}, or cost-aware?ARG=VALUE&...")
    kwargs: dict[str, Any] = {}
    for pair in query.split("&"):
        key, _, raw = pair.partition("=")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return _cost_aware(**kwargs), ", ".join(f"{k}={v}" for k, v in kwargs.items())


@dataclass(frozen=True)
class Outcome:
    """One seed's sweep, as the record model reads it."""

    to_best: tuple[float, int] | None  # (GPU s, measured trials) to within 2% of the best record; None: never
    to_own: tuple[float, int] | None  # the summary line's: to within 2% of the sweep's own winner
    trial_s: float
    compile_share: float
    cache_hits: int
    cache_saved_s: float
    winner_pct: float
    measured: int
    wall_s: float


def run_one(
    space: Space, records_path: Path, records: ReplayRecords, sampler: BaseSampler, seed: int, budget: int, best: float
) -> Outcome:
    catcher = StudyCatcher(sampler)
    options = SweepOptions(
        study_name=f"cost-{seed}", storage="memory", replay=records_path, tracking=False, n_trials=budget, seed=seed
    )
    started = time.monotonic()
    run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()), sampler=catcher)
    assert catcher.study is not None
    study = StudyRecords(catcher.study, [(o.metric, o.direction) for o in space.objectives])
    time_shares = study.time()
    hits, saved, compiled = 0, 0.0, set()
    for record in sorted(study.measured, key=lambda r: r.number):
        key = graph_key(record.params)
        if key is None or record.compile_s <= 0:
            continue
        if key in compiled:
            hits += 1
            fresh = (records.record(record.params) or {}).get("compile_s", record.compile_s)
            saved += float(fresh) - record.compile_s
        compiled.add(key)
    winner = study.winner
    return Outcome(
        to_best=study.time_to_within(0.02, target=best),
        to_own=study.time_to_within(0.02),
        trial_s=time_shares.trial_s,
        compile_share=time_shares.compile_share or 0.0,
        cache_hits=hits,
        cache_saved_s=saved,
        winner_pct=100.0 * (winner.value or 0.0) / best if winner is not None else 0.0,
        measured=len(study.measured),
        wall_s=time.monotonic() - started,
    )


def _landscape(
    records_path: Path, sigma: float, seed: int, folder: Path, metric: str
) -> tuple[Path, ReplayRecords, float]:
    """Seed ``seed``'s record set (jittered when ``sigma``), its records and its best value."""
    if not sigma:
        records = ReplayRecords.load(records_path)
    else:
        records_path = jittered(records_path, sigma, seed, folder)
        records = ReplayRecords.load(records_path)
    return records_path, records, float(records.lookup(records.best(metric)["params"]).metrics[metric])


def jittered(records_path: Path, sigma: float, seed: int, folder: Path) -> Path:
    """The record set with every ok record's throughput times a log-normal factor (``sigma``) drawn from ``seed``:
    one of the landscapes the model's error allows. A compiled record's eager probe is its eager twin's figure."""
    data = json.loads(records_path.read_text())
    rng = random.Random(seed)
    by_key: dict[str, dict[str, Any]] = {}
    for record in data["records"]:
        if record["status"] == "ok":
            record["throughput"] *= math.exp(rng.gauss(0.0, sigma))
        by_key[params_key(record["params"])] = record
    for record in data["records"]:
        if "eager_probe_throughput" in record:
            twin = by_key.get(params_key({**record["params"], "compile_mode": "none"}))
            if twin is not None and twin["status"] == "ok":
                record["eager_probe_throughput"] = twin["throughput"]
    path = folder / f"{records_path.stem}-jitter{sigma:g}-seed{seed}.json"
    path.write_text(json.dumps(data))
    return path


# --- statistics --------------------------------------------------------------------------------------------


def median_ci(values: Sequence[float], rng: random.Random, rounds: int = 2000) -> tuple[float, float, float]:
    """The median and a 95% bootstrap interval of it (seeds resampled)."""
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return statistics.median(values), medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def ratio_ci(
    a: Sequence[float], b: Sequence[float], rng: random.Random, rounds: int = 2000
) -> tuple[float, float, float]:
    """median(a) / median(b), and a 95% bootstrap interval of it (each resampled on its own)."""

    def ratio(x: Sequence[float], y: Sequence[float]) -> float:
        mx, my = statistics.median(x), statistics.median(y)
        return mx / my if my and math.isfinite(mx) and math.isfinite(my) else math.inf

    ratios = sorted(ratio(rng.choices(a, k=len(a)), rng.choices(b, k=len(b))) for _ in range(rounds))
    return ratio(a, b), ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1]


def _s(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:.0f}"


@dataclass
class Row:
    name: str
    note: str
    outcomes: list[Outcome]

    def to_best_s(self) -> list[float]:
        return [o.to_best[0] if o.to_best else math.inf for o in self.outcomes]

    def cells(self, baseline: Row | None, rng: random.Random) -> list[str]:
        seconds = self.to_best_s()
        med, lo, hi = median_ci(seconds, rng)
        trials = [float(o.to_best[1]) if o.to_best else math.inf for o in self.outcomes]
        own = [o.to_own[0] if o.to_own else math.inf for o in self.outcomes]
        never = sum(math.isinf(s) for s in seconds)
        saved = statistics.mean(o.cache_saved_s for o in self.outcomes)
        if baseline is not None and baseline is not self:
            r, rlo, rhi = ratio_ci(seconds, baseline.to_best_s(), rng)
            vs = f"{r:.2f} [{rlo:.2f}, {rhi:.2f}]"
        else:
            vs = "1"
        return [
            self.name,
            f"**{_s(med)}** [{_s(lo)}, {_s(hi)}]",
            _s(percentile(seconds, 90)),
            f"{never}/{len(seconds)}",
            vs,
            _s(statistics.median(trials)),
            _s(statistics.median(own)),
            f"{statistics.median(o.trial_s for o in self.outcomes):.0f}",
            f"{100 * statistics.median(o.compile_share for o in self.outcomes):.0f}%",
            f"{statistics.mean(o.cache_hits for o in self.outcomes):.1f} ({saved:.0f} s)",
            f"{statistics.median(o.winner_pct for o in self.outcomes):.1f}%",
            f"{statistics.mean(o.wall_s for o in self.outcomes):.1f}",
            self.note,
        ]


HEADER = [
    "sampler",
    "median GPU s to 2% of best [95% CI]",
    "p90",
    "never",
    "vs first row (median ratio [95% CI])",
    "median trials to 2%",
    "summary-line figure (to 2% of own winner), median s",
    "sweep trial time, median s",
    "compile share",
    "cache hits a sweep (s saved)",
    "winner, median % of best",
    "CPU s/sweep",
    "notes",
]


def render(rows: list[Row], rng: random.Random) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(row.cells(rows[0], rng)) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--records", type=Path, help="a timed replay file (default: the workload's modelled one)")
    parser.add_argument("--seeds", type=int, default=20, help="sweeps per sampler (seeds first..first+N-1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=20, help="measured trials per sweep")
    parser.add_argument(
        "--samplers",
        default="tpe,cost-aware",
        help=f"comma-separated: {', '.join(SAMPLERS)}, or cost-aware?ARG=VALUE&... (CostAwareSampler's arguments)",
    )
    parser.add_argument("--json", type=Path, help="write every sweep's outcome here")
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="each seed's landscape: throughputs times exp(N(0, JITTER)), drawn from the seed",
    )
    args = parser.parse_args(argv)
    factories = {name: named_sampler(name) for name in args.samplers.split(",")}
    space_path, default_records = WORKLOADS[args.workload]
    records_path = args.records or default_records
    space = load_space(space_path, replay=True)
    records = ReplayRecords.load(records_path)
    objective = space.objectives[0]
    best = float(
        records.lookup(records.best(objective.metric, objective.direction)["params"]).metrics[objective.metric]
    )
    rows = []
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    kinds = {param.kind for param in space.params.values()}
    with _one_torch_thread(), tempfile.TemporaryDirectory() as tmp:
        landscapes = {seed: _landscape(records_path, args.jitter, seed, Path(tmp), objective.metric) for seed in seeds}
        for name, (make, note) in factories.items():
            outcomes = []
            for seed in seeds:
                path, replayed, target = landscapes[seed] if args.jitter else (records_path, records, best)
                sampler = make(seed) if make else make_sampler(space.sampler.name, seed, kinds)
                outcomes.append(run_one(space, path, replayed, sampler, seed, args.budget, target))
            rows.append(Row(name, note, outcomes))
            print(f"{name}: done ({sum(o.wall_s for o in outcomes):.0f}s)", file=sys.stderr, flush=True)
    what = records.meta.get("what", "")
    landscape = (
        f" (unjittered; each seed's throughputs jittered by a log-normal factor, sigma {args.jitter:g}, and judged by "
        "its own best)"
        if args.jitter
        else ""
    )
    print(
        f"{records_path.name} ({what[:60]}...): best record {best:,.0f} {objective.metric}{landscape}; seeds "
        f"{seeds.start}..{seeds.stop - 1}; {args.budget} measured trials per sweep\n"
    )
    print(render(rows, random.Random(0)))
    if args.json:
        args.json.write_text(json.dumps({r.name: [o.__dict__ for o in r.outcomes] for r in rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
