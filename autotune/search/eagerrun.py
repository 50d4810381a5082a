"""An eager trial's run in full precision, predicted from the default trial's steps and the measuring rule.

Before the informed start is measured the cost model has one trial to go on, the default, and it prices every
configuration's run at about the default's (its knob effects start at zero). A trial's run grows with its step time,
and an eager trial in full precision steps at the default's per-sample pace: on an H100 GPT-2's sampler drew fp32 eager
at 4x the default's batch, priced at the default's 20 s, and it ran 58.6 s while the informed start's graph compiled
ahead (in two sweeps, BENCHMARKS.md), so the sweep's likeliest best was measured a minute later.
The parking rule that measures the informed start first reads this figure as a floor under the cost model's
(:func:`floored`, in the sweep loop's predictions; :meth:`autotune.sweep.proposals.parked_trials.Parking.outlasts`). The
sampler's own pricing is left as it is: a step-time model for every configuration priced GPT-2's compiled winners at
their eager step and found them later in replay (BENCHMARKS.md).

The run is the default's fixed part (process start, set-up: its duration less its steps) plus the trial's steps at the
default's step time scaled by the batch: the warm-up the default needed, then the timed steps the measuring rule asks
for (:func:`autotune.trial.warmup.timed_step_count`). Other knobs (memory format, cuDNN flags, a fused head) move the
step either way and are not modelled: the figure is an estimate of order, not a measurement.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from autotune.records import TrialRecord
from autotune.records.trial import finite
from autotune.search.costmodel import Seconds, compiles
from autotune.trial.trialspec import MeasureSettings
from autotune.trial.warmup import timed_step_count

__all__ = ["FULL_MATMULS", "FULL_PRECISION", "eager_run_s", "floored"]

# PyTorch's default precision is fp32 arithmetic without TF32 (autotune.knobs): the same per-sample pace as fp32.
FULL_PRECISION = frozenset({"default", "fp32"})
# The fp32 matmul precisions that keep that pace: "high" runs TF32 matmuls, faster
# (autotune.knobs.backends.MATMUL_PRECISIONS).
FULL_MATMULS = frozenset({"auto", "highest"})


def eager_run_s(default: TrialRecord, params: Mapping[str, Any]) -> float | None:
    """Seconds of run of an eager trial of ``params`` in full precision, from the measured ``default`` trial (see
    the module docstring); None for a compiled or lower-precision configuration, or a default without step figures."""
    if compiles(params) or not default.ok or not (_full_precision(params) and _full_precision(default.params)):
        return None
    metrics = default.first_metrics
    step_ms, warmup, first_s, window_s = (
        finite(metrics.get(name)) for name in ("step_ms_p50", "warmup_steps", "first_step_s", "window_s")
    )
    if step_ms is None or step_ms <= 0 or warmup is None or warmup < 1 or first_s is None or window_s is None:
        return None
    default_step_s = step_ms / 1e3
    fixed_s = max(0.0, default.duration_s - first_s - (warmup - 1) * default_step_s - window_s)
    step_s = default_step_s * _batch_ratio(default.params, params)
    timed = timed_step_count([step_s * 1e3], MeasureSettings().for_device(_device(default)))
    return fixed_s + (warmup + timed) * step_s


def floored(seconds: Seconds, default: TrialRecord | None, configurations: Sequence[Mapping[str, Any]]) -> Seconds:
    """``seconds`` (predicted for ``configurations``) with each trial's at least its eager run from the ``default``
    (:func:`eager_run_s`), where one is predicted; the waiting part as it was."""
    if default is None:
        return seconds
    floors = [eager_run_s(default, params) or 0.0 for params in configurations]
    return Seconds(np.maximum(seconds.trial, floors), seconds.waiting)


def _full_precision(params: Mapping[str, Any]) -> bool:
    """Whether ``params`` compute in full fp32 (no autocast, no TF32 matmuls)."""
    precision, matmuls = params.get("precision", "default"), params.get("matmul_precision", "auto")
    return str(precision) in FULL_PRECISION and str(matmuls) in FULL_MATMULS


def _batch_ratio(default: Mapping[str, Any], params: Mapping[str, Any]) -> float:
    """The trial's batch over the default's (1 where either has none, or a batch that is not a positive number)."""
    ours, theirs = _positive(params.get("batch_size")), _positive(default.get("batch_size"))
    return ours / theirs if ours is not None and theirs is not None else 1.0


def _positive(value: Any) -> float | None:
    """``value`` as a float where it is a positive number (not a bool), else None."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value) > 0:
        return float(value)
    return None


def _device(record: TrialRecord) -> str:
    """The device type the trial ran on, as its result's environment names it ("cuda" or "cpu")."""
    env = record.result.env if record.result is not None else {}
    return str(env.get("device", "cuda")).split(":")[0]
