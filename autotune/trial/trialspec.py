"""What a trial job is asked to run: :class:`TrialSpec` and its :class:`MeasureSettings`. Plain data, no torch
import, so a parent that builds one stays light."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from autotune.trial.pruning import Pruning

__all__ = ["MeasureSettings", "TrialSpec"]


@dataclass(frozen=True)
class MeasureSettings:
    """How long to warm up and time. Defaults suit full-size models on a GPU.

    Warm-up ends once the last ``settle_window`` steps lie within ``settle_tolerance`` of their
    median (compilation, cuDNN autotuning and allocator growth are over), or at the caps. Timing
    then runs at least ``min_steps`` steps and at least ``min_time_s`` seconds. Left as None, the
    settings follow the device: GPU steps are steady to a few tenths of a percent once warm, CPU
    steps of a tiny model jitter by 10% or more with the rest of the machine.
    """

    min_warmup_steps: int = 3
    max_warmup_steps: int | None = None
    max_warmup_s: float = 120.0
    settle_window: int = 5
    settle_tolerance: float | None = None
    min_steps: int | None = None
    max_steps: int = 300
    min_time_s: float | None = None
    batches: int = 3  # distinct input batches, rotated so no cache sees the same data twice in a row

    def for_device(self, device_type: str) -> MeasureSettings:
        """These settings with the device's defaults filled in."""
        gpu = device_type == "cuda"

        def pick(value: Any, on_gpu: Any, on_cpu: Any) -> Any:
            return value if value is not None else (on_gpu if gpu else on_cpu)

        return replace(
            self,
            min_steps=pick(self.min_steps, 30, 10),
            min_time_s=pick(self.min_time_s, 3.0, 1.0),
            max_warmup_steps=pick(self.max_warmup_steps, 60, 20),
            settle_tolerance=pick(self.settle_tolerance, 0.05, 0.15),
        )


@dataclass(frozen=True)
class TrialSpec:
    """One trial: a workload, its knobs and workload params, the device and how to measure.

    ``memory_cap_gib`` caps the trial's memory for real (CUDA: the allocator's per-process
    fraction; CPU: the address-space limit above what the process already maps), so an
    over-large configuration fails as ``oom`` exactly as it would on a smaller device.
    ``pruning`` lets a sweep stop a trial that cannot win: after warm-up, or before compiling (:class:`Pruning`).
    ``kernels`` names the space's listed Triton kernels: each is pinned to the config its params
    choose before the workload is built. ``profile_steps > 0`` has the trial, after its timed window,
    run that many more steps under the profiler (:func:`autotune.profiling.capture`) and put what
    it returns in ``result.extra["profile"]``, with the Chrome trace in ``<profile_dir>/trace.json``
    when ``profile_dir`` is given. ``compile_cache_dir`` is where the trial keeps Inductor's and
    Triton's compile caches (:mod:`autotune.trial.compilecache`: every trial of a study given the study's
    folder, a repeat compiles from the cache); None leaves their defaults. A trial given one saves what it
    compiled there (:mod:`autotune.trial.artifacts_io`). ``compile_artifacts`` are a tuned config's shipped compile
    artifacts, loaded before anything compiles as production's ``apply()`` loads them (``autotune verify``).
    ``gpus_per_trial`` above 1 runs the trial as that many ranks of torch.distributed (:mod:`autotune.trial.ranks`),
    the ``data_parallel`` knob's processes; its throughput is theirs together.
    """

    workload: str
    params: dict[str, Any] = field(default_factory=dict)
    preset: str = "full"
    device: str = "auto"
    workload_args: dict[str, Any] = field(default_factory=dict)
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    memory_cap_gib: float | None = None
    seed: int = 0
    pruning: Pruning | None = None  # a sweep's early stop (None: the trial runs to its timed window)
    kernels: tuple[str, ...] = ()  # import paths of listed Triton kernels; their configs are in params
    profile_steps: int = 0  # steps profiled after the timed window (0: none)
    profile_dir: str | None = None  # where the profiled steps' Chrome trace goes (None: no trace file)
    compile_cache_dir: str | None = None  # the study's compile caches (None: Inductor's and Triton's defaults)
    compile_artifacts: dict[str, Any] | None = None  # shipped ones to load first (trialartifacts.shipped_spec_field)
    gpus_per_trial: int = 1  # ranks of a data-parallel trial, one process and one GPU each (autotune.trial.ranks)
