"""``speedup`` of the trials' runs: a trial's throughput over the PyTorch-default trial's, read from the runs.

The leaderboard ranks a trial by its re-measured median when it has one (``remeasured_throughput``),
else by its own measurement; speedup compares the same numbers, so that, once the sweep has ended,
MLflow's ``speedup`` column is the leaderboard's. Only ok trials get one: a pruned trial's throughput is
a warm-up estimate, and a failed trial has none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from mlflow.entities import Run

from autotune import leaderboard
from autotune.tracking.schema import REMEASURED_THROUGHPUT, SPEEDUP, TAG_DEFAULT, TAG_STATUS, THROUGHPUT

__all__ = ["baseline", "is_default", "is_ok", "ranked_throughput", "speedup", "stale_speedups"]


def ranked_throughput(metrics: Mapping[str, float]) -> float | None:
    """The throughput a trial is ranked by: its re-measured median if it has one, else its own; None if neither."""
    for key in (REMEASURED_THROUGHPUT, THROUGHPUT):
        value = metrics.get(key)
        if value is not None and math.isfinite(value) and value > 0:
            return value
    return None


def speedup(throughput: float, baseline_throughput: float) -> float:
    """``throughput`` over the default's (the leaderboard's ratio), to 4 decimals (finer is below any noise)."""
    ratio = leaderboard.speedup(throughput, baseline_throughput, "maximize")
    assert ratio is not None, f"{baseline_throughput=} must be positive"  # baseline() gives only positive ones
    return round(ratio, 4)


def is_ok(run: Run) -> bool:
    """The trial of ``run`` finished ok (its run carries ``autotune.status=ok``)."""
    return run.data.tags.get(TAG_STATUS) == "ok"


def is_default(run: Run) -> bool:
    """``run`` is the PyTorch-default trial's."""
    return run.data.tags.get(TAG_DEFAULT) == "true"


def baseline(runs: Iterable[Run]) -> float | None:
    """The ranked throughput of the ok PyTorch-default trial among ``runs``; None before it is logged."""
    for run in runs:
        if is_default(run) and is_ok(run):
            return ranked_throughput(run.data.metrics)
    return None


def stale_speedups(runs: Iterable[Run]) -> dict[str, float]:
    """Run id -> speedup, for the ok trials' runs whose ``speedup`` is missing or out of date."""
    runs = list(runs)
    base = baseline(runs)
    if base is None:
        return {}
    stale: dict[str, float] = {}
    for run in runs:
        value = ranked_throughput(run.data.metrics) if is_ok(run) else None
        if value is not None and run.data.metrics.get(SPEEDUP) != (new := speedup(value, base)):
            stale[run.info.run_id] = new
    return stale
