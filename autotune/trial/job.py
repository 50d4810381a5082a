"""The trial job: a :class:`~autotune.trial.trialspec.TrialSpec` in, a :class:`TrialResult` out.

It runs inside the isolated trial process (see :mod:`autotune.trial_process`), knows nothing of Optuna
or MLflow, and turns every failure into a :class:`TrialResult` value (:func:`classify`). In order: the device and
its memory cap; what comes before anything compiles (the study's compile caches, a tuned config's shipped
artifacts, the listed kernels pinned); the workload built and measured (:mod:`autotune.trial.build`); what comes
after (the kernels' choices, the machine's fingerprint (:mod:`autotune.trial.fingerprint`), what the trial compiled
saved).
"""

from __future__ import annotations

import os
import resource
import time

import torch

from autotune import workloads
from autotune.errors import AutotuneError, NumericsError
from autotune.kernels import autotuning
from autotune.kernels.choices import autotuned_choices
from autotune.kernels.listing import load_kernel
from autotune.kernels.pinning import TrialPins
from autotune.knobs.precision import AUTOCAST_DTYPES
from autotune.knobs.registry import Knobs
from autotune.measurement import TrialResult
from autotune.trial import artifacts_io as trialartifacts
from autotune.trial import compilecache
from autotune.trial.build import measure_workload, split_params
from autotune.trial.failures import classify
from autotune.trial.fingerprint import env_fingerprint
from autotune.trial.trialspec import TrialSpec

__all__ = [
    "NumericsError",
    "check_spec",
    "classify",
    "resolve_device",
    "run_trial",
    "use_study_cache",
]


def check_spec(spec: TrialSpec) -> None:
    """Raise :class:`AutotuneError` for bad input, before any trial process is started."""
    build = workloads.resolve(spec.workload)  # an unknown workload is named first
    workloads.check_preset(spec.workload, spec.preset, build)
    knob_params, workload_params = split_params(spec.params, spec.workload)
    Knobs.from_params(knob_params)
    workloads.check_args(build, spec.preset, workload_params)
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


def use_study_cache(spec: TrialSpec) -> None:
    """Point this process's compile caches at the spec's study folder (when it names one), in the folder of its
    autocast dtype (:mod:`autotune.trial.compilecache`)."""
    if spec.compile_cache_dir is not None:
        autocast = AUTOCAST_DTYPES.get(str(spec.params.get("precision", "default")))
        compilecache.use(spec.compile_cache_dir, autocast)


def _measure(spec: TrialSpec, device: torch.device, requested_at: float, saves: bool = True) -> TrialResult:
    """Pin the listed kernels (before the workload is built: they may launch while it is), then measure; ``saves``:
    whether what it compiled goes into the study's folder (one rank of a data-parallel trial saves it)."""
    started = time.time()
    use_study_cache(spec)  # before anything compiles: a model, or a kernel workload's Triton
    autotuning.begin_trial()  # an unpinned kernel's configs compile in parallel before it benchmarks them
    loaded = trialartifacts.load_before_compile(spec, device)  # a tuned config's, as production loads them
    pins = TrialPins.pin_all([load_kernel(path) for path in spec.kernels], spec.params)
    result = measure_workload(spec, device, pins.params, started, requested_at)
    result.env = env_fingerprint(device)  # where the numbers came from
    result.kernels = pins.record()
    if result.ok:  # and what the kernels it did not pin chose for themselves, for production to pin as they ran
        result.kernels.update(autotuned_choices(skip=result.kernels))
    if saves:
        trialartifacts.note_and_save(spec, device, result, loaded, started)  # what it compiled, into the study's folder
    return result


def run_trial(spec: TrialSpec, requested_at: float | None = None, rank: int = 0) -> TrialResult:
    """Run one trial in this process and return its result; trial failures never raise.

    ``requested_at`` (a ``time.time()`` stamp from the parent) lets start-up cost count in ``overhead_s``. ``rank``:
    this process's rank in a data-parallel trial (:mod:`autotune.trial.ranks` runs one of these in each rank; rank
    0 saves what it compiled), 0 for a trial of one process.
    """
    requested_at = time.time() if requested_at is None else requested_at
    try:
        device = resolve_device(spec.device)
        _apply_memory_cap(spec.memory_cap_gib, device)
        return _measure(spec, device, requested_at, saves=rank == 0)
    except Exception as exc:
        status, reason = classify(exc)
        return TrialResult.failed(status, reason, spec.params)
