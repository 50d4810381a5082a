"""Measuring a training workload, stage by stage: each stage a module of its own, handed the values it needs.

1. the batches (:mod:`autotune.trial.batches`), the fp32 reference pass on the first (:mod:`autotune.trial.numerics`),
   the step with the knobs applied (:mod:`autotune.trial.trainstep`);
2. the eager probe, for a trial of a sweep with one-off work to skip (:mod:`autotune.trial.eagerprobe`): pruned
   there where even the most that work can gain leaves it under the line (:mod:`autotune.trial.pruning`);
3. the first step, its loss checked; the warm-up until the steps settle (:mod:`autotune.trial.warmup`): pruned there
   where its settled throughput is under the line;
4. the timed window with the GPU's telemetry (:mod:`autotune.trial.measure`), the losses checked;
5. the result (:mod:`autotune.trial.outcome`), then the profile if the spec asks for one
   (:mod:`autotune.profiling.capture`).

Behind a loader each step is timed waiting for its batch (``data_wait_ms_p50``, ``data_wait_frac``), and throughput
is items over the mean step time, not the median: there step times take turns (two workers' batches arrive together,
the next step waits for both to make more; measured on a CPU: 16 ms, 2 ms, 16 ms ...), and the median picks one of
the two modes instead of the rate the loop runs at.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from autotune import workloads
from autotune.data import LoaderBatches, data_noops, wait_metrics
from autotune.knobs.applying import apply
from autotune.knobs.registry import Knobs
from autotune.measurement import Status, TrialResult
from autotune.trial.batches import batch_source
from autotune.trial.eagerprobe import one_off_work, probe_before_work
from autotune.trial.flopcache import FlopCache
from autotune.trial.flops import FlopCount, count_step_flops, rate_metrics
from autotune.trial.measure import GpuTelemetry, peak_memory_gib, settled, summarize, time_steps
from autotune.trial.numerics import Reference, check_first_loss, check_losses, reference_pass
from autotune.trial.outcome import pruned_after_warmup, pruned_before_work, record_blocks, record_float8, timed
from autotune.trial.pruning import Pruning, warmup_judge
from autotune.trial.trainstep import TrainStep, prepared_step
from autotune.trial.trialspec import MeasureSettings
from autotune.trial.warmup import timed_step_count, warm_throughput, warm_up

__all__ = ["TrainingTrial", "measure_training", "overhead"]


@dataclass(frozen=True)
class TrainingTrial:
    """One training trial, its workload built: the plain values every stage of its measurement needs.

    ``pruning``: a sweep's early stop (None: timed to the end); ``profile_steps`` more steps under the profiler after
    the timed window, their Chrome trace in ``profile_dir`` when it is given; ``flop_cache``: the study's counts of
    model FLOPs (None: counted here).
    """

    device: torch.device
    settings: MeasureSettings
    knobs: Knobs
    params: dict[str, Any]
    workload: workloads.Workload
    batch_size: int
    started: float
    requested_at: float
    pruning: Pruning | None = None
    profile_steps: int = 0
    profile_dir: str | None = None
    flop_cache: FlopCache | None = None

    @property
    def items(self) -> int:
        """Items (samples, tokens) per step: what throughput counts."""
        return self.batch_size * self.workload.items_per_sample

    @property
    def behind_loader(self) -> bool:
        """Batches from the workload's dataset through a DataLoader (not made on the device)."""
        return self.workload.dataset is not None


def overhead(started: float, requested_at: float, setup_s: float) -> dict[str, float]:
    """What a trial costs besides its steps: process start, then building the workload."""
    return {"startup_s": started - requested_at, "setup_s": setup_s, "overhead_s": started - requested_at + setup_s}


def measure_training(trial: TrainingTrial) -> TrialResult:
    """Measure ``trial`` on its batches (:mod:`autotune.trial.batches`: made on the device by ``make_batch``, or the
    workload's dataset through the loader): the fp32 reference pass on the first, the knobs applied to the model and
    its AdamW (:func:`autotune.knobs.apply`), the step on those batches, then the stages."""
    source = batch_source(trial.workload, trial.batch_size, trial.knobs, trial.device, trial.settings.batches)
    try:
        trial.workload.model.train()
        first = source.first()  # the very batch the first step trains on
        reference = reference_pass(trial.workload, first)
        cache = trial.flop_cache  # the FLOPs: counted on the untouched model, before any knob
        flops = count_step_flops(trial.workload, first) if cache is None else cache.count(trial.workload, first)
        if trial.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(trial.device)  # the peak from here on: the trial's own
        optimizer = torch.optim.AdamW(trial.workload.model.parameters(), lr=1e-4)
        model, ctx = apply(trial.workload.model, optimizer, trial.knobs, trial.device.type)
        step = prepared_step(trial.workload, model, ctx, optimizer, source)
        return _run_steps(trial, step, reference, flops, source if isinstance(source, LoaderBatches) else None)
    finally:
        if isinstance(source, LoaderBatches):
            source.close()


def _run_steps(
    trial: TrainingTrial, step: TrainStep, reference: Reference, flops: FlopCount, loader: LoaderBatches | None
) -> TrialResult:
    """The stages, each handed what it needs: the eager probe (pruned before the one-off work?), the first step
    (checked), the warm-up (pruned after it?), the timed window, the result; then the profile if one is asked for."""
    device, settings, items, unit, ctx = trial.device, trial.settings, trial.items, trial.workload.unit, step.ctx
    setup_s = time.time() - trial.started
    work = None if trial.behind_loader else one_off_work(trial.knobs, device.type, reference.autotuning)
    eager = probe_before_work(step, items, device, trial.pruning, work)
    probed_peak_gib = peak_memory_gib(device)  # what a trial pruned before its one-off work reports
    judge = warmup_judge(
        trial.pruning,
        items,
        eager=trial.knobs.compile_mode == "none",
        cudagraphs=ctx.cudagraphs,
        behind_loader=trial.behind_loader,
    )
    if eager is not None and trial.pruning is not None and work is not None:
        unreachable = trial.pruning.before_work(work, eager.throughput, eager.autotuning_share)
        if unreachable is not None:
            why = unreachable.reason(work, eager.said(unit))
            return pruned_before_work(why, unreachable.reachable, eager, unit, items, trial.params, probed_peak_gib)
    first_ms = time_steps(step, 1, device)  # compiles, autotunes: checked before any more time is spent
    rel_error = check_first_loss(float(step.losses[0]), reference.loss, trial.knobs.precision, trial.knobs.float8)
    warm_ms = warm_up(step, device, settings, first_ms, judge)
    warm_peak_gib = peak_memory_gib(device)  # what a trial pruned after its warm-up reports
    estimate = warm_throughput(warm_ms, settings, items, trial.behind_loader)
    reason = trial.pruning.after_warmup(estimate, unit) if trial.pruning is not None else None
    if reason is not None:
        pruned = pruned_after_warmup(reason, estimate, unit, warm_ms, settings, items, trial.params, warm_peak_gib)
        if eager is not None:
            pruned.metrics.update(eager.metrics())  # a compiled figure too: evidence of the gain
        record_blocks(ctx, pruned)
        record_float8(ctx, pruned)
        return pruned
    telemetry = GpuTelemetry(device)
    with telemetry.window():
        timed_ms = time_steps(step, timed_step_count(warm_ms, settings), device)
    stats, peak_gib = summarize(timed_ms), peak_memory_gib(device)
    warm_settled = settled(warm_ms, settings.settle_window, settings.settle_tolerance or 0.0)
    check_losses(step.losses, trial.knobs.precision)
    costs = overhead(trial.started, trial.requested_at, setup_s)
    metrics = timed(
        warm_ms,
        timed_ms,
        stats,
        telemetry,
        batch_size=trial.batch_size,
        items=items,
        unit=unit,
        behind_loader=trial.behind_loader,
        rel_error=rel_error,
        costs=costs,
        peak_gib=peak_gib,
        warm_settled=warm_settled,
    )
    step_ms = items / metrics["throughput"] * 1e3  # the step time the throughput was taken at
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    knobs = trial.knobs
    metrics.update(rate_metrics(flops, step_ms, gpu, knobs.precision, knobs.matmul_precision == "high", knobs.float8))
    if eager is not None:
        metrics.update(eager.metrics())  # what the study learns compiling's gain from
    series = {"step_ms": timed_ms}
    if loader is not None:
        waits_ms = loader.waits_ms()[-len(timed_ms) :]  # one wait per step; the timed steps came last
        metrics.update(wait_metrics(waits_ms, timed_ms))
        series["data_wait_ms"] = waits_ms
    noops = [*ctx.noops, *data_noops(trial.knobs, device.type, has_dataset=loader is not None)]
    if noops:
        metrics["noop_knobs"] = ",".join(noops)
    result = TrialResult(Status.OK, None, trial.params, metrics, {}, series)
    if telemetry.others:
        result.warnings.append(f"computing on the GPU while it was timed: {telemetry.others}")
    record_blocks(ctx, result)
    record_float8(ctx, result)
    if trial.profile_steps > 0:
        from autotune.profiling.capture import capture_into  # here: only trials that profile pay for torch.profiler

        capture_into(result, step, trial.profile_steps, device, trial.profile_dir)
    return result
