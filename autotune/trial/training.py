"""Measuring a training workload: its batches, its step, warm-up, the timed window, the metrics.

Two sources of batches: ``make_batch`` batches made on the device before timing (the model-only
measurement, rotated), or the workload's dataset through the ``DataLoader`` and copy that the data
knobs describe, each step timed waiting for its batch (``data_wait_ms_p50``, ``data_wait_frac``).

Throughput is items over the median step time for synthetic batches (robust to a stray slow step),
but over the mean step time behind a loader: there step times take turns (two workers' batches
arrive together, the next step waits for both to make more; measured on a CPU: 16 ms, 2 ms, 16 ms
...), and the median picks one of the two modes instead of the rate the loop runs at.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autotune import workloads
from autotune.data import LoaderBatches, SyntheticBatches, build_loader, data_noops, wait_metrics
from autotune.errors import AutotuneError, first_line
from autotune.jobspec import KERNELS_AUTOTUNING, MeasureSettings, TrialSpec, Unreachable
from autotune.kernels.autotuning import autotuning_metrics
from autotune.knobs.applying import apply
from autotune.knobs.registry import Knobs
from autotune.knobs.stepcontext import StepContext
from autotune.results import Status, TrialResult
from autotune.trial.compilephases import compile_phases
from autotune.trial.eagerprobe import EagerProbe, eager_twin
from autotune.trial.flops import FlopCount, count_step_flops, rate_metrics
from autotune.trial.measure import GpuTelemetry, env_fingerprint, peak_memory_gib, settled, summarize, time_steps
from autotune.trial.numerics import Reference, check_first_loss, check_losses, reference_pass
from autotune.trial.peaks import peak_precision
from autotune.trial.trainstep import TrainStep, prepare_pair
from autotune.trial.warmup import EAGER_ONE_OFF_MS, compile_seconds, settled_ms, timed_step_count, warm_up

__all__ = ["TrainingTrial", "measure_training", "overhead"]


def _check_random(batch: Any) -> None:
    """Timing on zeros flatters kernels and hides bugs: refuse all-zero synthetic inputs."""
    tensors = [t for t in (batch if isinstance(batch, tuple | list) else [batch]) if isinstance(t, torch.Tensor)]
    if tensors and tensors[0].is_floating_point() and not tensors[0].any():
        raise AutotuneError("the workload's make_batch returned all-zero inputs; use random data")


@dataclass
class TrainingTrial:
    """One training trial, its workload built: what every stage of its measurement needs."""

    spec: TrialSpec
    device: torch.device
    settings: MeasureSettings
    knobs: Knobs
    params: dict[str, Any]
    workload: workloads.Workload
    batch_size: int
    started: float
    requested_at: float

    @property
    def items(self) -> int:
        """Items (samples, tokens) per step: what throughput counts."""
        return self.batch_size * self.workload.items_per_sample

    @property
    def behind_loader(self) -> bool:
        """Batches from the workload's dataset through a DataLoader (not made on the device)."""
        return self.workload.dataset is not None


# How far under the pruning line a warm-up must be to stop before its steps settle: even this many times its fastest
# step after the first (compile, autotuning) would stay under it. Eager steps settle within a few percent after
# the first; a slow configuration's settling steps are its most expensive part (GPT-2 in fp32 at batch 128: 2.3 s
# a step, a 16.6 s pruned trial on an H100).
HOPELESS_MARGIN = 2.0
HOPELESS_AFTER = 2  # steps after the first before the warm-up may be judged hopeless


def _hopeless(trial: TrainingTrial, ctx: StepContext) -> Callable[[list[float]], bool] | None:
    """Whether the warm-up's steps so far already put the configuration out of the pruning line's reach.

    None where the sweep does not prune; behind a loader, whose first steps wait for its workers to start; and where
    the step runs in CUDA graphs: their first calls run eager to warm up, then record (cuDNN's search too), over
    more steps than the first. On an H100 a ResNet-50 ``reduce-overhead`` trial's two steps after the first ran at
    1,289-1,558 images/s, a fifth to a quarter of its default-mode twin's 5,890, and it was pruned on them; in the
    recorded H100 trials, CUDA-graph steps did up to 16 steady steps' worth of one-off work after their first step,
    other modes under 4. An eager step (nothing compiled) may be judged one step after the first, less
    ``EAGER_ONE_OFF_MS``.
    """
    below = trial.spec.pruning.below if trial.spec.pruning else None
    if below is None or trial.behind_loader or ctx.cudagraphs:
        return None
    eager = trial.knobs.compile_mode == "none"

    def hopeless(times: list[float]) -> bool:
        after_first = times[1:]
        if len(after_first) >= HOPELESS_AFTER:
            fastest_ms = min(after_first)
        elif eager and after_first:
            fastest_ms = after_first[0] - EAGER_ONE_OFF_MS
        else:
            return False
        return fastest_ms > 0 and trial.items / (fastest_ms / 1e3) * HOPELESS_MARGIN < below

    return hopeless


def _pruned(trial: TrainingTrial, warm_ms: list[float]) -> TrialResult | None:
    """A pruned result when the settled warm-up throughput is below the sweep's bound, else None.

    The settled warm-up steps are within ``settle_tolerance`` of each other and of the timed steps
    that would follow (on an H200 the timed CV was 0.1-1.1%), so a configuration under half the
    best cannot come near it: its timed window is skipped.
    """
    pruning = trial.spec.pruning
    if pruning is None or pruning.below is None:
        return None
    recent_ms = warm_ms[-trial.settings.settle_window :]
    typical_ms = statistics.fmean(recent_ms) if trial.behind_loader else settled_ms(warm_ms, trial.settings)
    estimate = trial.items / (typical_ms / 1e3)
    unit = trial.workload.unit
    reason = pruning.after_warmup(estimate, unit)
    if reason is None:
        return None
    metrics = {
        "throughput": estimate,
        "throughput_unit": unit,
        "compile_s": compile_seconds(warm_ms, settled_ms(warm_ms, trial.settings)),  # what pruning came too late for
        **compile_phases(),
        **autotuning_metrics(),
        "warmup_steps": len(warm_ms),
        "items_per_step": trial.items,
        "peak_mem_gib": peak_memory_gib(trial.device),
    }
    env = env_fingerprint(trial.device)
    return TrialResult(Status.PRUNED, reason, trial.params, metrics, env, {"warmup_ms": warm_ms})


def _eager_probe(trial: TrainingTrial, step: TrainStep, work: str | None) -> EagerProbe | None:
    """The eager twin's figures, for a trial of a sweep on synthetic batches with one-off ``work`` to skip; else
    None. Behind a loader the probe would take the loader's first batches, which the first step is checked on; and a
    trial run alone (``autotune trial``) has nothing to prune against."""
    if trial.spec.pruning is None or trial.behind_loader or work is None:
        return None
    return eager_twin(step, trial.items, trial.device, lambda at_most: _cannot_win(trial, at_most, work) is not None)


def _one_off_work(trial: TrainingTrial, autotuning: frozenset[str]) -> str | None:
    """What the trial's first steps pay once and its probe skips, in words: None when nothing. A compile; cuDNN's
    algorithm search on a GPU (on a CPU the knob does nothing); or the ``autotuning`` kernels (those the reference
    pass launched on their first configs) choosing their configs."""
    if trial.knobs.compile_mode != "none":
        return "compiling"
    if trial.knobs.cudnn_benchmark and trial.device.type == "cuda":
        return "cuDNN's algorithm search"
    if autotuning:
        return KERNELS_AUTOTUNING
    return None


def _cannot_win(trial: TrainingTrial, eager: EagerProbe, work: str | None) -> Unreachable | None:
    """How ``eager`` times the most ``work`` can gain stays under the pruning line (:meth:`Pruning.unreachable`);
    else None. The share of the probe's steps its autotuning kernels took bounds only the autotuning's gain."""
    pruning = trial.spec.pruning
    if pruning is None:
        return None
    return pruning.unreachable(eager.throughput, eager.autotuning_share if work == KERNELS_AUTOTUNING else None)


def _pruned_before_compile(trial: TrainingTrial, eager: EagerProbe, work: str | None) -> TrialResult | None:
    """A pruned result, ``work`` not paid, when ``eager`` times the most ``work`` can gain cannot reach the line."""
    unreachable = _cannot_win(trial, eager, work)
    if unreachable is None or work is None:
        return None
    unit = trial.workload.unit
    reason = unreachable.reason(work, eager.said(unit))
    metrics = {
        "throughput": unreachable.reachable,  # the most it could reach compiled: what it was pruned on
        "throughput_unit": unit,
        **eager.metrics(),
        "pruned_before_compile": 1.0,  # the name stored studies read; set before cuDNN's search too
        "compile_s": 0.0,
        "warmup_steps": 0,
        "items_per_step": trial.items,
        "peak_mem_gib": peak_memory_gib(trial.device),
    }
    return TrialResult(Status.PRUNED, reason, trial.params, metrics, env_fingerprint(trial.device), {"warmup_ms": []})


def overhead(started: float, requested_at: float, setup_s: float) -> dict[str, float]:
    """What a trial costs besides its steps: process start, then building the workload."""
    return {"startup_s": started - requested_at, "setup_s": setup_s, "overhead_s": started - requested_at + setup_s}


def measure_training(trial: TrainingTrial) -> TrialResult:
    """Measure ``trial``: synthetic batches (``make_batch``) or the workload's dataset through the loader."""
    return _measure_loader(trial) if trial.behind_loader else _measure_synthetic(trial)


def _apply_knobs(trial: TrainingTrial) -> tuple[torch.nn.Module, StepContext, torch.optim.Optimizer]:
    """The model to train, its step context and optimizer, with every model knob applied."""
    if trial.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(trial.device)
    optimizer = torch.optim.AdamW(trial.workload.model.parameters(), lr=1e-4)
    model, ctx = apply(trial.workload.model, optimizer, trial.knobs, trial.device.type)
    return model, ctx, optimizer


def _measure_synthetic(trial: TrainingTrial) -> TrialResult:
    """Batches made on the device by ``make_batch`` before timing, rotated: the model-only measurement."""
    workload = trial.workload
    assert workload.make_batch is not None
    batches = [workload.make_batch(trial.batch_size, trial.device) for _ in range(trial.settings.batches)]
    _check_random(batches[0])
    workload.model.train()
    reference = reference_pass(workload, batches[0])
    flops = count_step_flops(workload, batches[0])  # on the untouched model, before any knob
    model, ctx, optimizer = _apply_knobs(trial)
    source = SyntheticBatches([prepare_pair(ctx, batch) for batch in batches])  # laid out once, not per step
    return _run_steps(trial, TrainStep(workload, model, ctx, optimizer, source.batch), reference, flops, ctx, None)


def _measure_loader(trial: TrainingTrial) -> TrialResult:
    """Batches from the workload's dataset through the DataLoader and copy the data knobs describe."""
    workload = trial.workload
    source = loader_batches(workload, trial.batch_size, trial.knobs, trial.device)
    try:
        workload.model.train()
        reference = reference_pass(workload, source.first())  # the very batch the first step trains on
        flops = count_step_flops(workload, source.first())  # on the untouched model, before any knob
        model, ctx, optimizer = _apply_knobs(trial)
        step = TrainStep(workload, model, ctx, optimizer, lambda index: prepare_pair(ctx, source.batch(index)))
        return _run_steps(trial, step, reference, flops, ctx, source)
    finally:
        source.close()


def loader_batches(workload: workloads.Workload, batch_size: int, knobs: Knobs, device: torch.device) -> LoaderBatches:
    """The workload's dataset through the DataLoader and the copy to ``device`` that the data knobs describe (a trial's,
    and :mod:`autotune.trial.firststeps`' production start)."""
    assert workload.dataset is not None
    loader = build_loader(
        workload.dataset, batch_size, knobs, device.type, collate_fn=workload.collate_fn, **_worker_start(knobs)
    )
    return LoaderBatches(
        loader,
        device,
        non_blocking=bool(knobs.non_blocking),
        gpu_prefetch=bool(knobs.gpu_prefetch),
        transform=workload.device_transform,
    )


def _worker_start(knobs: Knobs) -> dict[str, Any]:
    """Start the loader's workers the way a training script on this platform does (fork on Linux).

    A trial process comes from a forkserver, so its own default is forkserver: each worker would be
    started by a server that re-imports the workload and unpickles the dataset (2-3 s a worker on
    a CPU, at every epoch without persistent workers), and a dataset that cannot be pickled would fail.
    """
    if knobs.num_workers == 0:
        return {}
    return {"multiprocessing_context": multiprocessing.get_all_start_methods()[0]}  # the platform's default


def _run_steps(
    trial: TrainingTrial,
    step: TrainStep,
    reference: Reference,
    flops: FlopCount,
    ctx: StepContext,
    source: LoaderBatches | None,
) -> TrialResult:
    """First step (checked), warm-up, timed window, metrics; then the profile if the spec asks for one."""
    device, settings, precision = trial.device, trial.settings, trial.knobs.precision
    setup_s = time.time() - trial.started
    work = _one_off_work(trial, reference.autotuning)
    eager = _eager_probe(trial, step, work)
    if eager is not None and (early := _pruned_before_compile(trial, eager, work)) is not None:
        return early
    first_ms = time_steps(step, 1, device)  # compiles, autotunes: checked before any more time is spent
    rel_error = check_first_loss(float(step.losses[0]), reference.loss, precision)
    warm_ms = warm_up(step, device, settings, first_ms, _hopeless(trial, ctx))
    pruned = _pruned(trial, warm_ms)
    if pruned is not None:
        if eager is not None:
            pruned.metrics.update(eager.metrics())  # a compiled figure too: evidence of the gain
        _record_blocks(ctx, pruned)
        return pruned
    telemetry = GpuTelemetry(device)
    with telemetry.window():
        timed_ms = time_steps(step, timed_step_count(warm_ms, settings), device)
    check_losses(step.losses, precision)
    metrics = _metrics(trial, warm_ms, timed_ms, setup_s, rel_error, telemetry)
    metrics.update(_flops_metrics(trial, flops, metrics["throughput"]))
    if eager is not None:
        metrics.update(eager.metrics())  # what the study learns compiling's gain from
    series = {"step_ms": timed_ms}
    if source is not None:
        waits_ms = source.waits_ms()[-len(timed_ms) :]  # one wait per step; the timed steps came last
        metrics.update(wait_metrics(waits_ms, timed_ms))
        series["data_wait_ms"] = waits_ms
    noops = [*ctx.noops, *data_noops(trial.knobs, device.type, has_dataset=source is not None)]
    if noops:
        metrics["noop_knobs"] = ",".join(noops)
    result = TrialResult(Status.OK, None, trial.params, metrics, env_fingerprint(device), series)
    if telemetry.others:
        result.warnings.append(f"computing on the GPU while it was timed: {telemetry.others}")
    _record_blocks(ctx, result)
    if trial.spec.profile_steps > 0:
        _profile(trial, step, result)
    return result


def _record_blocks(ctx: StepContext, result: TrialResult) -> None:
    """What ``compile_scope=blocks`` compiled: ``compiled_blocks`` (how many, one by one) and ``compiled_block``
    (which); a model without repeated blocks was compiled whole, and a warning says why."""
    if ctx.blocks is None:
        return
    result.metrics["compiled_blocks"] = len(ctx.blocks)
    if ctx.blocks:
        result.metrics["compiled_block"] = ctx.blocks.describe()
    else:
        result.warnings.append(f"compile_scope=blocks: {ctx.blocks.reason}; the whole model was compiled")


def _metrics(
    trial: TrainingTrial,
    warm_ms: list[float],
    timed_ms: list[float],
    setup_s: float,
    rel_error: float | None,
    telemetry: GpuTelemetry,
) -> dict[str, Any]:
    settings = trial.settings
    stats = summarize(timed_ms)
    typical_ms = stats["step_ms_mean"] if trial.behind_loader else stats["step_ms_p50"]
    metrics: dict[str, Any] = {
        "throughput": trial.items / (typical_ms / 1e3),
        "throughput_unit": trial.workload.unit,
        **stats,
        "peak_mem_gib": peak_memory_gib(trial.device),
        "compile_s": compile_seconds(warm_ms, stats["step_ms_p50"]),
        **compile_phases(),  # where the compile went, by the compiler's clocks (compiled trials only)
        **autotuning_metrics(),  # the unpinned Triton kernels' autotuning, where they benchmarked configs
        "first_step_s": warm_ms[0] / 1e3,
        "warmup_steps": len(warm_ms),
        "warmup_settled": float(settled(warm_ms, settings.settle_window, settings.settle_tolerance or 0.0)),
        "timed_steps": len(timed_ms),
        **({"loss_rel_error": rel_error} if rel_error is not None else {}),
        **overhead(trial.started, trial.requested_at, setup_s),
    }
    metrics.update(telemetry.metrics)
    if "energy_j" in telemetry.metrics:
        metrics["energy_j_per_sample"] = telemetry.metrics["energy_j"] / (trial.batch_size * len(timed_ms))
    return metrics


def _flops_metrics(trial: TrainingTrial, flops: FlopCount, throughput: float) -> dict[str, Any]:
    """Model FLOPs, TFLOP/s and MFU at the step time ``throughput`` was taken at (:mod:`autotune.trial.flops`)."""
    step_ms = trial.items / throughput * 1e3
    knobs = trial.knobs
    tf32 = knobs.precision == "tf32" or knobs.matmul_precision == "high"
    # float8 is read by name: a setting without that knob computes in what precision says.
    precision = peak_precision(knobs.precision, tf32, str(getattr(knobs, "float8", "none")))
    gpu = torch.cuda.get_device_name(trial.device) if trial.device.type == "cuda" else None
    return rate_metrics(flops, step_ms, gpu, precision)


def _profile(trial: TrainingTrial, step: TrainStep, result: TrialResult) -> None:
    """Profile ``spec.profile_steps`` more whole steps (data wait included) into ``result.extra["profile"]``.

    The measurement is already made: a profile that cannot be captured is a warning on the result,
    not a failed trial.
    """
    spec = trial.spec
    trace_path = str(Path(spec.profile_dir) / "trace.json") if spec.profile_dir else None
    try:
        from autotune.trial import profiler  # imported here: only trials that profile pay for torch.profiler

        result.extra["profile"] = profiler.capture(step, spec.profile_steps, trial.device, trace_path)
    except Exception as exc:
        result.warnings.append(f"profile not captured: {type(exc).__name__}: {first_line(exc)}")
