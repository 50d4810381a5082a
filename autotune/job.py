"""The trial job: build a workload, apply the knobs, warm up, time the training step, check numerics.

It runs inside the isolated trial process (see :mod:`autotune.runner`), knows nothing of Optuna
or MLflow, and turns every failure into a :class:`TrialResult` value.
"""

from __future__ import annotations

import math
import os
import resource
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from autotune import knobs as knobs_mod
from autotune import workloads
from autotune.errors import AutotuneError, NumericsError, first_line
from autotune.jobspec import MeasureSettings, TrialSpec
from autotune.kernels.pinning import TrialPins
from autotune.measure import GpuTelemetry, env_fingerprint, peak_memory_gib, settled, summarize, time_steps
from autotune.results import Status, TrialResult

__all__ = ["NumericsError", "check_spec", "classify", "resolve_device", "run_trial", "split_params"]

# First-step loss vs the strict-fp32 reference on the same weights and batch: relative error allowed.
LOSS_TOLERANCE = {"fp32": 1e-3, "default": 1e-2, "tf32": 1e-2, "fp16": 3e-2, "bf16": 5e-2}
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "out of resource")
_COMPILE_MODULES = ("torch._dynamo", "torch._inductor", "triton.compiler", "triton.runtime")
# Inductor's advice to turn TF32 on, printed by every compiled fp32 trial: those trials leave it off on purpose.
_TF32_HINT = "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError | MemoryError) or type(exc).__name__ == "OutOfResources":
        return True
    return isinstance(exc, RuntimeError) and any(text in str(exc).lower() for text in _OOM_TEXT)


def classify(exc: BaseException) -> tuple[Status, str]:
    """Map an exception raised by a trial to its status and a one-line reason."""
    chain = _chain(exc)
    message = first_line(exc)
    reason = f"{type(exc).__name__}: {message}"
    if any(_is_oom(e) for e in chain):  # also when compilation wraps an OOM during autotuning
        oom = next(e for e in chain if _is_oom(e))
        return Status.OOM, f"{type(oom).__name__}: {first_line(oom)}"
    if isinstance(exc, AutotuneError):
        return Status.INVALID, message
    if isinstance(exc, NumericsError):
        return Status.NUMERICS, message
    if any(type(e).__module__.startswith(_COMPILE_MODULES) for e in chain):
        return Status.COMPILE_ERROR, reason
    return Status.CRASH, reason


def split_params(params: dict[str, Any], build: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split trial params into knobs and the workload's own tunable parameters."""
    accepted = workloads.workload_params(build)
    knob_params, workload_params = {}, {}
    for name, value in params.items():
        if name in knobs_mod.KNOB_SPECS:
            knob_params[name] = value
        elif name in accepted:
            workload_params[name] = value
        else:
            options = ", ".join([*knobs_mod.KNOB_SPECS, *accepted])
            raise AutotuneError(f"unknown parameter {name!r}; this workload takes: {options}")
    return knob_params, workload_params


def check_spec(spec: TrialSpec) -> None:
    """Raise :class:`AutotuneError` for bad input, before any trial process is started."""
    build = workloads.resolve(spec.workload)
    if spec.workload in workloads.BUILTIN and spec.preset not in workloads.PRESETS:
        raise AutotuneError(f"preset {spec.preset!r} is not valid: expected one of {', '.join(workloads.PRESETS)}")
    knob_params, _ = split_params(spec.params, build)
    knobs_mod.Knobs.from_params(knob_params)
    resolve_device(spec.device)


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else CPU; asking for CUDA without a GPU is bad input."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise AutotuneError(f"device {name!r} is not valid: expected auto, cpu, cuda or cuda:N") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise AutotuneError("device cuda asked for, but no CUDA GPU is visible")
    return device


def _apply_memory_cap(cap_gib: float | None, device: torch.device) -> None:
    """Make allocations past ``cap_gib`` fail for real, as on a device with that much memory."""
    if cap_gib is None:
        return
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * 2**30 / total), device)
        return
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = mapped + int(cap_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _check_random(batch: Any) -> None:
    """Timing on zeros flatters kernels and hides bugs: refuse all-zero synthetic inputs."""
    tensors = [t for t in (batch if isinstance(batch, tuple | list) else [batch]) if isinstance(t, torch.Tensor)]
    if tensors and tensors[0].is_floating_point() and not tensors[0].any():
        raise AutotuneError("the workload's make_batch returned all-zero inputs; use random data")


def _reference_loss(workload: workloads.Workload, batch: tuple[Any, torch.Tensor]) -> float:
    """The loss of the untouched model in strict fp32 on ``batch``: the numerics guard's yardstick."""
    with knobs_mod.strict_fp32(), torch.no_grad():
        return float(workload.loss_fn(workload.model(batch[0]), batch[1]))


def _check_first_loss(first: float, reference: float, precision: str) -> float:
    if not math.isfinite(first):
        raise NumericsError(f"loss is {first} at the first step (precision={precision})")
    rel = abs(first - reference) / max(abs(reference), 1e-6)
    tolerance = LOSS_TOLERANCE[precision]
    if rel > tolerance:
        raise NumericsError(
            f"first-step loss {first:.6g} vs fp32 reference {reference:.6g}: "
            f"relative error {rel:.2g} > {tolerance:g} allowed for precision={precision}"
        )
    return rel


def _warm_up(
    step: Callable[[int], None], device: torch.device, settings: MeasureSettings, times: list[float]
) -> list[float]:
    """Run steps one at a time until their times settle (compilation, autotuning and growth done)."""
    assert settings.max_warmup_steps is not None and settings.settle_tolerance is not None
    start = time.perf_counter()
    while len(times) < settings.max_warmup_steps:
        times += time_steps(step, 1, device)
        if len(times) >= settings.min_warmup_steps and settled(
            times, settings.settle_window, settings.settle_tolerance
        ):
            break
        if time.perf_counter() - start > settings.max_warmup_s:
            break
    return times


def _compile_seconds(warm_ms: list[float], steady_ms: float) -> float:
    """Warm-up time spent above the steady step time, counting only steps that took more than twice
    as long (compilation, autotuning, graph capture), so ordinary jitter does not add up."""
    return sum(t - steady_ms for t in warm_ms if t > 2 * steady_ms) / 1e3


def _pruned(
    spec: TrialSpec,
    warm_ms: list[float],
    items: int,
    settings: MeasureSettings,
    params: dict[str, Any],
    unit: str,
    device: torch.device,
) -> TrialResult | None:
    """A pruned result when the settled warm-up throughput is below ``spec.prune_below``, else None.

    The settled warm-up steps are within ``settle_tolerance`` of each other and of the timed steps
    that would follow (on an H200 the timed CV was 0.1-1.1%), so a configuration under half the
    best cannot come near it: its timed window is skipped.
    """
    if spec.prune_below is None:
        return None
    estimate = items / (_settled_ms(warm_ms, settings) / 1e3)
    if estimate >= spec.prune_below:
        return None
    reason = f"warm-up throughput {estimate:,.4g} {unit} is below {spec.prune_below:,.4g}"
    metrics = {
        "throughput": estimate,
        "throughput_unit": unit,
        "warmup_steps": len(warm_ms),
        "items_per_step": items,
        "peak_mem_gib": peak_memory_gib(device),
    }
    return TrialResult(Status.PRUNED, reason, params, metrics, env_fingerprint(device), {"warmup_ms": warm_ms})


def _settled_ms(warm_ms: list[float], settings: MeasureSettings) -> float:
    """The typical step time once warm: the median of the last ``settle_window`` warm-up steps."""
    recent = sorted(warm_ms[-settings.settle_window :])
    return recent[len(recent) // 2]


def _timed_step_count(warm_ms: list[float], settings: MeasureSettings) -> int:
    typical_ms = max(_settled_ms(warm_ms, settings), 1e-3)
    assert settings.min_time_s is not None and settings.min_steps is not None  # for_device() fills them
    wanted = math.ceil(settings.min_time_s * 1e3 / typical_ms)
    return max(settings.min_steps, min(settings.max_steps, wanted))


def _overhead(started: float, requested_at: float, setup_s: float) -> dict[str, float]:
    """What a trial costs besides its steps: process start, then building the workload."""
    return {"startup_s": started - requested_at, "setup_s": setup_s, "overhead_s": started - requested_at + setup_s}


def _measure_kernel(
    kernel: workloads.KernelJob, device: torch.device, started: float, requested_at: float
) -> TrialResult:
    """A kernel workload: it checks its output against torch and times itself (do_bench, L2 flushed)."""
    setup_s = time.time() - started
    metrics = {**kernel.run(device), **_overhead(started, requested_at, setup_s)}
    return TrialResult(Status.OK, None, dict(kernel.params), metrics, env_fingerprint(device))


def _measure(spec: TrialSpec, device: torch.device, requested_at: float) -> TrialResult:
    """Pin the listed kernels (before the workload is built: they may launch while it is), then measure."""
    started = time.time()
    pins = TrialPins.pin_all(spec.kernels, spec.params)
    result = _measure_pinned(spec, device, started, requested_at, pins.params)
    result.kernels, result.warnings = pins.record()
    return result


def _measure_pinned(
    spec: TrialSpec, device: torch.device, started: float, requested_at: float, kernel_params: dict[str, Any]
) -> TrialResult:
    settings = spec.measure.for_device(device.type)
    build = workloads.resolve(spec.workload)
    plain = {name: value for name, value in spec.params.items() if name not in kernel_params}
    knob_params, workload_params = split_params(plain, build)
    knobs = knobs_mod.Knobs.from_params(knob_params)
    params = {**knobs.to_params(), **workload_params, **kernel_params}
    knobs.check_combination(device.type)
    if knobs.precision in ("default", "fp32"):
        warnings.filterwarnings("ignore", message=_TF32_HINT)  # this process runs this one trial only
    torch.manual_seed(spec.seed)
    workload = workloads.build(spec.workload, spec.preset, {**spec.workload_args, **workload_params}, device)
    if not isinstance(workload, workloads.Workload):
        return _measure_kernel(workload, device, started, requested_at)
    batch_size = knobs.batch_size or workload.default_batch_size
    params["batch_size"] = batch_size
    batches = [workload.make_batch(batch_size, device) for _ in range(settings.batches)]
    _check_random(batches[0])
    workload.model.train()
    reference = _reference_loss(workload, batches[0])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-4)
    model, ctx = knobs_mod.apply(workload.model, optimizer, knobs, device.type)
    batches = [(ctx.prepare_inputs(inputs), targets) for inputs, targets in batches]
    losses: list[torch.Tensor] = []

    def step(i: int) -> None:
        inputs, targets = batches[i % len(batches)]
        with ctx.autocast():
            loss = workload.loss_fn(model(inputs), targets)
        ctx.backward(loss)
        ctx.step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    setup_s = time.time() - started
    first_ms = time_steps(step, 1, device)  # compiles, autotunes: checked before any more time is spent
    rel_error = _check_first_loss(float(losses[0]), reference, knobs.precision)
    warm_ms = _warm_up(step, device, settings, first_ms)
    items = batch_size * workload.items_per_sample
    pruned = _pruned(spec, warm_ms, items, settings, params, workload.unit, device)
    if pruned is not None:
        return pruned
    telemetry = GpuTelemetry(device)
    with telemetry.window():
        timed_ms = time_steps(step, _timed_step_count(warm_ms, settings), device)
    if not bool(torch.isfinite(torch.stack(losses)).all()):
        bad = next(i for i, loss in enumerate(losses) if not math.isfinite(float(loss)))
        raise NumericsError(f"loss became {float(losses[bad])} at step {bad} (precision={knobs.precision})")
    stats = summarize(timed_ms)
    metrics: dict[str, Any] = {
        "throughput": items / (stats["step_ms_p50"] / 1e3),
        "throughput_unit": workload.unit,
        **stats,
        "peak_mem_gib": peak_memory_gib(device),
        "compile_s": _compile_seconds(warm_ms, stats["step_ms_p50"]),
        "first_step_s": warm_ms[0] / 1e3,
        "warmup_steps": len(warm_ms),
        "warmup_settled": float(settled(warm_ms, settings.settle_window, settings.settle_tolerance or 0.0)),
        "timed_steps": len(timed_ms),
        "loss_rel_error": rel_error,
        **_overhead(started, requested_at, setup_s),
    }
    metrics.update(telemetry.metrics)
    if "energy_j" in telemetry.metrics:
        metrics["energy_j_per_sample"] = telemetry.metrics["energy_j"] / (batch_size * len(timed_ms))
    if ctx.noops:
        metrics["noop_knobs"] = ",".join(ctx.noops)
    return TrialResult(Status.OK, None, params, metrics, env_fingerprint(device), {"step_ms": timed_ms})


def run_trial(spec: TrialSpec, requested_at: float | None = None) -> TrialResult:
    """Run one trial in this process and return its result; trial failures never raise.

    ``requested_at`` (a ``time.time()`` stamp from the parent) lets start-up cost count in ``overhead_s``.
    """
    requested_at = time.time() if requested_at is None else requested_at
    try:
        device = resolve_device(spec.device)
        _apply_memory_cap(spec.memory_cap_gib, device)
        return _measure(spec, device, requested_at)
    except Exception as exc:
        status, reason = classify(exc)
        return TrialResult.failed(status, reason, spec.params)
