"""Warm start on replayed GPU measurements: trials to within 2% of the best record, with and without.

    python scripts/warm_start_benchmark.py --records ../shared/data/h200_triton_matmul_8192.json \\
        --space search_spaces/triton_matmul.yaml --seeds 50 --budget 60 --evidence-trials 30

The target is the real record set (``--records``). The evidence comes from a neighbouring record set,
made from the real one by a documented transformation (there is one real data file), as a stand-in
for "another GPU" or "a neighbouring shape":

- ``same``: the records themselves. The evidence study is another seed's sweep of the same
  measurements: the best case (the same GPU measured before).
- ``gpu-0.8x-5%``: every ok record's throughput times 0.8 and a log-normal factor (sigma 5%), drawn
  once from a fixed seed: a slower GPU of the same architecture whose ranking mostly agrees.
- ``gpu-1.3x-15%``: times 1.3, sigma 15%: a faster GPU whose ranking agrees less (the best record
  there is not the target's best).
- ``shuffled``: the ok records' throughputs permuted at random: evidence that says nothing true
  (the control: warm start must not cost much when the other study is unrelated).

The out-of-resources records stay as they are in every set (the same shared-memory limit). For
each target seed ``s`` an evidence study is swept first over the neighbouring set (the space's own
sampler, seed ``1000 + s``, ``--evidence-trials`` measured trials), then the target sweep runs with
seed ``s``, cold and warm-started from that study. Both use the real sweep engine in memory; the
warm one is handed a sampler that reads the evidence as ``--warm-start`` builds it
(:func:`autotune.search.evidence.from_study`, :class:`autotune.search.samplerview.OrdinalView`, and CMA-ES's
start from :func:`autotune.search.samplers.make_sampler`): ``--warm-start`` itself needs a shared
database, which would make this 50 times slower; tests/test_warm_start.py runs that path.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
from search_benchmark import Goal, StudyCatcher, SweepOutcome, _one_torch_thread, percentile, run_one

from autotune.search import evidence as evidence_mod
from autotune.search.replay import ReplayRecords
from autotune.search.samplers import make_sampler
from autotune.search.samplerview import OrdinalView
from autotune.space import Space, load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

Records = list[dict[str, Any]]


def _scaled(scale: float, sigma: float) -> Callable[[Records, random.Random], Records]:
    def transform(records: Records, rng: random.Random) -> Records:
        out = []
        for record in records:
            record = dict(record)
            if record["status"] == "ok":
                factor = scale * math.exp(rng.gauss(0.0, sigma))
                record["tflops"], record["ms"] = round(record["tflops"] * factor, 1), round(record["ms"] / factor, 5)
            out.append(record)
        return out

    return transform


def _shuffled(records: Records, rng: random.Random) -> Records:
    ok = [r["tflops"] for r in records if r["status"] == "ok"]
    rng.shuffle(ok)
    values = iter(ok)
    return [{**r, "tflops": next(values)} if r["status"] == "ok" else dict(r) for r in records]


NEIGHBOURS: dict[str, Callable[[Records, random.Random], Records]] = {
    "same": lambda records, _rng: [dict(r) for r in records],
    "gpu-0.8x-5%": _scaled(0.8, 0.05),
    "gpu-1.3x-15%": _scaled(1.3, 0.15),
    "shuffled": _shuffled,
}


@dataclass(frozen=True)
class Variant:
    """One row: a sampler, cold or warm-started from one neighbouring record set."""

    sampler: str  # "shipped" (the space's own, CMA-ES here) or "tpe"
    neighbour: str | None  # None: cold
    normalise: bool = True

    @property
    def name(self) -> str:
        if self.neighbour is None:
            return f"{self.sampler}, cold"
        raw = ", values as measured" if not self.normalise else ""
        return f"{self.sampler}, warm from {self.neighbour}{raw}"


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = float(rank)
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Rank correlation (no ties expected in throughputs of this precision to matter)."""
    ra, rb = _ranks(a), _ranks(b)
    mean = (len(a) - 1) / 2
    cov = sum((x - mean) * (y - mean) for x, y in zip(ra, rb, strict=True))
    var = sum((x - mean) ** 2 for x in ra)
    return cov / var


def describe(name: str, records: Records, target: Records) -> str:
    """How a neighbouring set relates to the target: rank correlation, where the target's best ranks."""
    ok = [i for i, r in enumerate(target) if r["status"] == "ok"]
    corr = spearman([target[i]["tflops"] for i in ok], [records[i]["tflops"] for i in ok])
    best = max(ok, key=lambda i: target[i]["tflops"])
    rank = 1 + sum(records[i]["tflops"] > records[best]["tflops"] for i in ok)
    top = max(records[i]["tflops"] for i in ok)
    return f"{name}: rank correlation {corr:.2f} with the target; the target's best ranks {rank} there; best {top:g}"


def evidence_study(space: Space, records: Path, seed: int, trials: int) -> optuna.Study:
    """A replay sweep of the neighbouring set: the study a warm start reads."""
    kinds = {p.kind for p in space.params.values()}
    catcher = StudyCatcher(make_sampler(space.sampler.name, seed, kinds))
    options = SweepOptions(storage="memory", replay=records, tracking=False, n_trials=trials, seed=seed)
    run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()), sampler=catcher)
    assert catcher.study is not None
    return catcher.study


def sampler_for(variant: Variant, space: Space, seed: int, evidence: evidence_mod.Evidence | None) -> Any:
    kinds = {p.kind for p in space.params.values()}
    if variant.sampler == "shipped":
        inner = make_sampler(space.sampler.name, seed, kinds, evidence.trials() if evidence else ())
    else:
        inner = make_sampler(variant.sampler, seed, kinds)
    if evidence is None:
        return inner
    # The sweep wraps every sampler in the ordinal view; this inner view only adds the evidence.
    return OrdinalView(inner, {}, replace(evidence, normalise=variant.normalise))


def row(variant: Variant, outcomes: list[SweepOutcome], goal: Goal, budget: int) -> str:
    """One markdown row: trials to within 2% (median, p75, p90), misses, the best after 10 trials."""
    hits = [o.trials_to_target(goal) for o in outcomes]
    never = sum(math.isinf(h) for h in hits)
    exhausted = sum(o.exhausted and math.isinf(h) for o, h in zip(outcomes, hits, strict=True))

    def cell(value: float) -> str:
        return f">{budget}" if math.isinf(value) else f"{value:g}"

    cells = [
        variant.name,
        cell(statistics.median(hits)),
        cell(percentile(hits, 75)),
        cell(percentile(hits, 90)),
        f"{never}/{len(hits)}" + (f" ({exhausted} stopped: space exhausted)" if exhausted else ""),
        f"{statistics.median(o.best_percent_at(goal, 10) for o in outcomes):.1f}%",
        f"{statistics.mean(o.seconds for o in outcomes):.2f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--space", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--evidence-trials", type=int, default=30)
    parser.add_argument("--neighbours", default=",".join(NEIGHBOURS))
    parser.add_argument("--samplers", default="shipped,tpe")
    parser.add_argument("--raw", action="store_true", help="add rows whose evidence keeps its values as measured")
    args = parser.parse_args(argv)

    space = load_space(args.space, replay=True)
    target: Records = json.loads(args.records.read_text())["records"]
    real = ReplayRecords.load(args.records)
    objective = space.objectives[0]
    best = real.lookup(real.best(objective.metric, objective.direction)["params"])
    goal = Goal(float(best.metrics[objective.metric]), objective.direction == "maximize", 10)

    with tempfile.TemporaryDirectory() as tmp, _one_torch_thread():
        files: dict[str, Path] = {}
        for index, name in enumerate(args.neighbours.split(",")):
            records = NEIGHBOURS[name](target, random.Random(index))
            files[name] = Path(tmp) / f"{name}.json"
            files[name].write_text(json.dumps({"records": records}))
            print(describe(name, records, target))
        variants = [Variant(s, None) for s in args.samplers.split(",")]
        for name in files:
            for sampler in args.samplers.split(","):
                variants.append(Variant(sampler, name))
                if args.raw and sampler != "shipped":
                    variants.append(Variant(sampler, name, normalise=False))
        results: dict[Variant, list[SweepOutcome]] = {v: [] for v in variants}
        for seed in range(args.seeds):
            evidences = {
                name: evidence_mod.from_study(evidence_study(space, path, 1000 + seed, args.evidence_trials), space)
                for name, path in files.items()
            }
            for variant in variants:
                ev = evidences[variant.neighbour] if variant.neighbour else None
                sampler = sampler_for(variant, space, seed, ev)
                outcome = run_one(space, space, args.records, sampler, seed, args.budget, goal)
                results[variant].append(outcome)
            print(f"seed {seed} done", file=sys.stderr, flush=True)

    print(
        f"\n{args.records.name}: best record {goal.best:g}; target seeds 0..{args.seeds - 1}; at most {args.budget}"
        f" measured trials; evidence: {args.evidence_trials} measured trials of a sweep of the neighbouring set\n"
    )
    header = ["sampler, start", "median trials-to-2%", "p75", "p90", "never within budget", "best at 10", "s/sweep"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for variant, outcomes in results.items():
        print(row(variant, outcomes, goal, args.budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
