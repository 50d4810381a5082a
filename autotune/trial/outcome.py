"""The :class:`~autotune.measurement.TrialResult` a training trial ends with: pruned before its one-off work, pruned
after its warm-up, or measured; what it costs besides its steps; what ``compile_scope=blocks`` compiled.

The stages before it (:mod:`autotune.trial.eagerprobe`, :mod:`autotune.trial.warmup`, the timed window of
:mod:`autotune.trial.measure`) hand it their figures; the machine's fingerprint is added by the trial job.
"""

from __future__ import annotations

from typing import Any

from autotune.kernels.autotuning import autotuning_metrics
from autotune.knobs.stepcontext import StepContext
from autotune.measurement import Status, TrialResult
from autotune.trial.compilephases import compile_phases
from autotune.trial.eagerprobe import EagerProbe
from autotune.trial.measure import GpuTelemetry
from autotune.trial.trialspec import MeasureSettings
from autotune.trial.warmup import compile_seconds, settled_ms

__all__ = ["pruned_after_warmup", "pruned_before_work", "record_blocks", "record_float8", "timed"]


def pruned_before_work(
    reason: str,
    reachable: float,
    eager: EagerProbe,
    unit: str,
    items: int,
    params: dict[str, Any],
    peak_gib: float,
) -> TrialResult:
    """Pruned before its one-off work (``reason``): ``eager`` times the most that work can gain, ``reachable`` items
    per second, stays under the line."""
    metrics = {
        "throughput": reachable,  # the most it could reach compiled: what it was pruned on
        "throughput_unit": unit,
        **eager.metrics(),
        "pruned_before_compile": 1.0,  # the name stored studies read; set before cuDNN's search too
        "compile_s": 0.0,
        "warmup_steps": 0,
        "items_per_step": items,
        "peak_mem_gib": peak_gib,
    }
    return TrialResult(Status.PRUNED, reason, params, metrics, {}, {"warmup_ms": []})


def pruned_after_warmup(
    reason: str,
    estimate: float,
    unit: str,
    warm_ms: list[float],
    settings: MeasureSettings,
    items: int,
    params: dict[str, Any],
    peak_gib: float,
) -> TrialResult:
    """Pruned after its warm-up, which settled at ``estimate`` items per second (``peak_gib`` of memory at its
    peak): its timed window is skipped."""
    metrics = {
        "throughput": estimate,
        "throughput_unit": unit,
        "compile_s": compile_seconds(warm_ms, settled_ms(warm_ms, settings)),  # what pruning came too late for
        **compile_phases(),
        **autotuning_metrics(),
        "warmup_steps": len(warm_ms),
        "items_per_step": items,
        "peak_mem_gib": peak_gib,
    }
    return TrialResult(Status.PRUNED, reason, params, metrics, {}, {"warmup_ms": warm_ms})


def timed(
    warm_ms: list[float],
    timed_ms: list[float],
    stats: dict[str, float],
    telemetry: GpuTelemetry,
    *,
    batch_size: int,
    items: int,
    unit: str,
    behind_loader: bool,
    rel_error: float | None,
    costs: dict[str, float],
    peak_gib: float,
    warm_settled: bool,
) -> dict[str, Any]:
    """The timed window's metrics: throughput (over the median step, or over the mean behind a loader: there step
    times take turns), the step statistics (``stats``, :func:`autotune.trial.measure.summarize`), the peak memory,
    the compile, the warm-up (``warm_settled``: whether it ended settled), the first loss's error, ``costs``
    (:func:`autotune.trial.training.overhead`), and the GPU's telemetry with the energy per sample of ``batch_size``."""
    typical_ms = stats["step_ms_mean"] if behind_loader else stats["step_ms_p50"]
    metrics: dict[str, Any] = {
        "throughput": items / (typical_ms / 1e3),
        "throughput_unit": unit,
        **stats,
        "peak_mem_gib": peak_gib,
        "compile_s": compile_seconds(warm_ms, stats["step_ms_p50"]),
        **compile_phases(),  # where the compile went, by the compiler's clocks (compiled trials only)
        **autotuning_metrics(),  # the unpinned Triton kernels' autotuning, where they benchmarked configs
        "first_step_s": warm_ms[0] / 1e3,
        "warmup_steps": len(warm_ms),
        "warmup_settled": float(warm_settled),
        "timed_steps": len(timed_ms),
        **({"loss_rel_error": rel_error} if rel_error is not None else {}),
        **costs,
    }
    metrics.update(telemetry.metrics)
    if "energy_j" in telemetry.metrics:
        metrics["energy_j_per_sample"] = telemetry.metrics["energy_j"] / (batch_size * len(timed_ms))
    return metrics


def record_blocks(ctx: StepContext, result: TrialResult) -> None:
    """What ``compile_scope=blocks`` compiled: ``compiled_blocks`` (how many, one by one) and ``compiled_block``
    (which); a model without repeated blocks was compiled whole, and a warning says why."""
    if ctx.blocks is None:
        return
    result.metrics["compiled_blocks"] = len(ctx.blocks)
    if ctx.blocks:
        result.metrics["compiled_block"] = ctx.blocks.describe()
    else:
        result.warnings.append(f"compile_scope=blocks: {ctx.blocks.reason}; the whole model was compiled")


def record_float8(ctx: StepContext, result: TrialResult) -> None:
    """What ``float8`` converted: ``float8_layers`` (how many Linear layers) and their names
    (``extra["float8_layers"]``, what production's ``apply()`` converts too)."""
    if ctx.float8_layers is None:
        return
    result.metrics["float8_layers"] = len(ctx.float8_layers)
    result.extra["float8_layers"] = list(ctx.float8_layers)
