"""What autotune writes into MLflow, shared by the sweep's parent run and the trial runs: tag keys, run
statuses, MLflow's value limits and the numbers that become metrics."""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

from mlflow.entities import Metric

__all__ = [
    "CHANGED_PARAM_TAG_PREFIX",
    "MAX_PARAM_LEN",
    "MAX_TAG_LEN",
    "REMEASURED_THROUGHPUT",
    "SPEEDUP",
    "TAG_DEFAULT",
    "TAG_FEASIBLE",
    "TAG_INPUT_BOUND",
    "TAG_NOTE",
    "TAG_OUTCOME",
    "TAG_PARENT",
    "TAG_REASON",
    "TAG_ROLE",
    "TAG_STATUS",
    "TAG_STUDY",
    "TAG_TRIAL",
    "TAG_UNIT",
    "TAG_WARNINGS",
    "TERMINAL",
    "THROUGHPUT",
    "WARMUP_PREFIX",
    "clip",
    "finite_metrics",
]

TAG_STUDY = "autotune.study"
TAG_ROLE = "autotune.role"
TAG_WARNINGS = "autotune.warnings"  # things to know about an ok trial (its compile artifacts not saved, ...)
TAG_INPUT_BOUND = "autotune.input_bound"  # "true" on a trial that waited for input > 10% of its step time
TAG_TRIAL = "autotune.trial"
TAG_STATUS = "autotune.views.status"  # the trial's result status: ok, pruned, oom, crash ...
# How the trial ended as every view names it (the record model's): ok, infeasible, pruned, oom, crash ...
TAG_OUTCOME = "autotune.outcome"
TAG_FEASIBLE = "autotune.feasible"  # "false" on an ok trial that broke a constraint: it has no speedup, never ranks
TAG_REASON = "autotune.reason"
TAG_DEFAULT = "autotune.default"  # "true" on the PyTorch-default trial, the yardstick of speedup
TAG_UNIT = "autotune.throughput_unit"  # images/s, tokens/s ...: a metric is a number, its unit a tag
TAG_PARENT = "mlflow.parentRunId"
TAG_NOTE = "mlflow.note.content"  # MLflow shows it, as markdown, as the run's description
CHANGED_PARAM_TAG_PREFIX = "autotune.param."

# MLflow's own limits (mlflow.utils.validation): longer values are rejected, so they are cut.
MAX_PARAM_LEN = 6000
MAX_TAG_LEN = 8000
TERMINAL = frozenset({"FINISHED", "FAILED", "KILLED"})

# The usual objective, its re-measured median (the re-measure stage logs ``remeasured_<metric>``), and
# speedup over the PyTorch defaults, which the record model computes for the first objective whatever it is.
THROUGHPUT = "throughput"
REMEASURED_THROUGHPUT = f"remeasured_{THROUGHPUT}"
SPEEDUP = "speedup"
# A pruned trial's objective metrics are warm-up estimates, logged as warmup_<metric> (never beside real ones).
WARMUP_PREFIX = "warmup_"


def clip(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters (ending in ``...``) if longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def finite_metrics(values: Mapping[str, Any]) -> list[Metric]:
    """Finite numbers only: units (strings), flags (bools), NaN and inf are not sortable columns.

    Fractions to 6 significant digits: MLflow's table prints every digit it is given (``374.1633123712463``)
    and cuts the column, while no measurement here is finer than about 0.1% (none is a timestamp).
    Whole numbers (counts such as ``items_per_step``) stay exact.
    """
    now = int(time.time() * 1000)
    return [
        Metric(str(key), _six_digits(float(value)), now, 0)
        for key, value in values.items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ]


def _six_digits(value: float) -> float:
    return value if value.is_integer() else float(f"{value:.6g}")
