"""The trial job: build a workload, apply the knobs, warm up, time the training step, check numerics.

It runs inside the isolated trial process (see :mod:`autotune.runner`), knows nothing of Optuna
or MLflow, and turns every failure into a :class:`TrialResult` value (:func:`classify`). This
module checks the spec, builds the workload with its knobs and hands it on: a training workload to
:mod:`autotune.trial.training` (its batches from :mod:`autotune.data`, its step from
:mod:`autotune.trial.trainstep`, the numerics guard in :mod:`autotune.trial.numerics`, warm-up in
:mod:`autotune.trial.warmup`), a kernel workload to its own ``run``.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from typing import Any

import torch

from autotune import workloads
from autotune.errors import AutotuneError, NumericsError
from autotune.jobspec import TrialSpec
from autotune.kernels import autotuning
from autotune.kernels.choices import autotuned_choices
from autotune.kernels.pinning import TrialPins
from autotune.knobs.precision import AUTOCAST_DTYPES
from autotune.knobs.registry import KNOB_SPECS, Knobs
from autotune.quiet import quiet_tf32_hint
from autotune.results import Status, TrialResult
from autotune.trial import artifacts as trialartifacts
from autotune.trial import compilecache
from autotune.trial.failures import classify
from autotune.trial.measure import env_fingerprint
from autotune.trial.training import TrainingTrial, measure_training, overhead

__all__ = [
    "NumericsError",
    "check_spec",
    "classify",
    "configured",
    "resolve_device",
    "run_trial",
    "split_params",
    "use_study_cache",
]


def split_params(params: dict[str, Any], build: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split trial params into knobs and the workload's own tunable parameters."""
    accepted = workloads.workload_params(build)
    knob_params, workload_params = {}, {}
    for name, value in params.items():
        if name in KNOB_SPECS:
            knob_params[name] = value
        elif name in accepted:
            workload_params[name] = workloads.coerce_param(name, value, accepted[name])
        else:
            options = ", ".join([*KNOB_SPECS, *accepted])
            raise AutotuneError(f"unknown parameter {name!r}; this workload takes: {options}")
    return knob_params, workload_params


def check_spec(spec: TrialSpec) -> None:
    """Raise :class:`AutotuneError` for bad input, before any trial process is started."""
    build = workloads.resolve(spec.workload)
    workloads.check_preset(spec.workload, spec.preset, build)
    knob_params, _ = split_params(spec.params, build)
    Knobs.from_params(knob_params)
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


def _measure_kernel(
    kernel: workloads.KernelJob, device: torch.device, started: float, requested_at: float
) -> TrialResult:
    """A kernel workload: it checks its output against torch and times itself (do_bench, L2 flushed)."""
    setup_s = time.time() - started
    metrics = {**kernel.run(device), **overhead(started, requested_at, setup_s)}
    return TrialResult(Status.OK, None, dict(kernel.params), metrics, env_fingerprint(device))


def use_study_cache(spec: TrialSpec) -> None:
    """Point this process's compile caches at the spec's study folder (when it names one), in the folder of its
    autocast dtype (:mod:`autotune.trial.compilecache`)."""
    if spec.compile_cache_dir is not None:
        autocast = AUTOCAST_DTYPES.get(str(spec.params.get("precision", "default")))
        compilecache.use(spec.compile_cache_dir, autocast)


def configured(spec: TrialSpec, kernel_params: dict[str, Any]) -> tuple[Knobs, dict[str, Any]]:
    """The spec's knobs and its workload's own params (``kernel_params``, the pinned kernels', set apart)."""
    plain = {name: value for name, value in spec.params.items() if name not in kernel_params}
    knob_params, workload_params = split_params(plain, workloads.resolve(spec.workload))
    return Knobs.from_params(knob_params), workload_params


def _measure(spec: TrialSpec, device: torch.device, requested_at: float) -> TrialResult:
    """Pin the listed kernels (before the workload is built: they may launch while it is), then measure."""
    started = time.time()
    use_study_cache(spec)  # before anything compiles: a model, or a kernel workload's Triton
    autotuning.begin_trial()  # an unpinned kernel's configs compile in parallel before it benchmarks them
    loaded = trialartifacts.load_before_compile(spec, device)  # a tuned config's, as production loads them
    pins = TrialPins.pin_all(spec.kernels, spec.params)
    result = _measure_pinned(spec, device, started, requested_at, pins.params)
    result.kernels = pins.record()
    if result.ok:  # and what the kernels it did not pin chose for themselves, for production to pin as they ran
        result.kernels.update(autotuned_choices(skip=result.kernels))
    trialartifacts.record(spec, device, result, loaded, started)  # what this trial compiled, into the study's folder
    return result


def _measure_pinned(
    spec: TrialSpec, device: torch.device, started: float, requested_at: float, kernel_params: dict[str, Any]
) -> TrialResult:
    settings = spec.measure.for_device(device.type)
    knobs, workload_params = configured(spec, kernel_params)
    params = {**knobs.to_params(), **workload_params, **kernel_params}
    knobs.check_combination(device.type)
    quiet_tf32_hint()
    torch.manual_seed(spec.seed)
    workload = workloads.build(spec.workload, spec.preset, {**spec.workload_args, **workload_params}, device)
    if not isinstance(workload, workloads.Workload):
        return _measure_kernel(workload, device, started, requested_at)
    batch_size = knobs.batch_size or workload.default_batch_size
    params["batch_size"] = batch_size
    return measure_training(
        TrainingTrial(spec, device, settings, knobs, params, workload, batch_size, started, requested_at)
    )


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
