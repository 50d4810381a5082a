"""How long a trial runs its step: warm-up until the step times settle, then enough timed steps.

Compilation, autotuning and allocator growth happen in the first steps; timing starts once the
last few steps agree, and runs at least ``min_steps`` steps and ``min_time_s`` seconds.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch

from autotune.trial.agreement import largest, warm_up_ends
from autotune.trial.measure import settled, time_steps
from autotune.trial.trialspec import MeasureSettings

__all__ = ["compile_seconds", "settled_ms", "timed_step_count", "warm_throughput", "warm_up"]


def warm_up(
    step: Callable[[int], None],
    device: torch.device,
    settings: MeasureSettings,
    times: list[float],
    hopeless: Callable[[list[float]], bool] | None = None,
) -> list[float]:
    """Run steps one at a time until their times settle (compilation, autotuning and growth done), or until
    ``hopeless`` says the steps so far already show the configuration cannot reach the sweep's pruning line. The
    ranks of a data-parallel trial end it at the same step: when all have settled (:mod:`autotune.trial.agreement`);
    they are never pruned."""
    assert settings.max_warmup_steps is not None and settings.settle_tolerance is not None
    start = time.perf_counter()
    while len(times) < settings.max_warmup_steps:
        times += time_steps(step, 1, device)
        if hopeless is not None and hopeless(times):
            break
        steady = len(times) >= settings.min_warmup_steps and settled(
            times, settings.settle_window, settings.settle_tolerance
        )
        if warm_up_ends(steady, time.perf_counter() - start > settings.max_warmup_s):  # a data-parallel trial's ranks
            break  # end it together (autotune.trial.agreement)
    return times


def compile_seconds(warm_ms: list[float], steady_ms: float) -> float:
    """Warm-up time spent above the steady step time, counting only steps that took more than twice
    as long (compilation, autotuning, graph capture), so ordinary jitter does not add up."""
    return sum(t - steady_ms for t in warm_ms if t > 2 * steady_ms) / 1e3


def settled_ms(warm_ms: list[float], settings: MeasureSettings) -> float:
    """The typical step time once warm: the median of the last ``settle_window`` warm-up steps."""
    recent = sorted(warm_ms[-settings.settle_window :])
    return recent[len(recent) // 2]


def timed_step_count(warm_ms: list[float], settings: MeasureSettings) -> int:
    typical_ms = max(settled_ms(warm_ms, settings), 1e-3)
    assert settings.min_time_s is not None and settings.min_steps is not None  # for_device() fills them
    wanted = math.ceil(settings.min_time_s * 1e3 / typical_ms)
    return largest(max(settings.min_steps, min(settings.max_steps, wanted)))  # a data-parallel trial's ranks agree


def warm_throughput(warm_ms: list[float], settings: MeasureSettings, items: int, behind_loader: bool) -> float:
    """Items per second of the settled warm-up: over its typical step (:func:`settled_ms`), or behind a loader over
    the mean of its last ``settle_window`` steps (there step times take turns, and the median picks one of them).

    The settled warm-up steps are within ``settle_tolerance`` of each other and of the timed steps that would follow
    (on an H200 the timed CV was 0.1-1.1%): what the pruning line after warm-up is held against.
    """
    recent_ms = warm_ms[-settings.settle_window :]
    typical_ms = statistics.fmean(recent_ms) if behind_loader else settled_ms(warm_ms, settings)
    return items / (typical_ms / 1e3)
