"""What a trial job is asked to run. Plain data, no torch import, so a parent stays light."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from autotune.numbers import number, quantity

__all__ = ["KERNELS_AUTOTUNING", "PROBE_SPREAD", "MeasureSettings", "Pruning", "TrialSpec", "Unreachable"]


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


# The one-off work of an eager configuration whose Triton kernels autotune, in a pruned trial's reason (the trial job's
# words, which a replay repeats).
KERNELS_AUTOTUNING = "the kernels' autotuning"
# How far a trial's timed throughput may stand above its eager probe's for reasons other than its kernels'
# autotuning: eager trials' timed figures over their probes' were 0.82-1.094 in the recorded H100 and H200
# trials (scripts/data; cuDNN's search among the reasons).
PROBE_SPREAD = 1.15


@dataclass(frozen=True)
class Unreachable:
    """A probed configuration that cannot reach the pruning line: its eager throughput times the most its one-off
    work can gain (``gain``, ``why`` in words) is ``reachable``, under ``below``; ``basis`` says what the line is."""

    gain: float
    why: str
    reachable: float
    below: float
    basis: str | None = None

    def reason(self, work: str, eager: str) -> str:
        """The pruned trial's reason, ``work`` (the one-off work not paid) and ``eager`` (the probe's figure) in
        words: ``before compiling: eager 1,000 images/s x 1.50 (...) = 1,500 is below 2,000 (0.5 x trial 4's ...)``."""
        return (
            f"before {work}: {eager} x {self.gain:.2f} ({self.why}) = {number(self.reachable)} "
            f"is below {number(self.below)}"
            f"{_basis(self.basis)}"
        )


@dataclass(frozen=True)
class Pruning:
    """When a sweep stops a trial early: the throughput a trial must reach, and what its one-off work can add.

    ``below``: a trial whose settled warm-up throughput is under it stops there (status pruned); None
    before the sweep has a best. ``compile_gain``: the most the first steps' one-off work (a compile, cuDNN's
    algorithm search, the workload's kernels autotuning) may multiply a configuration's eager throughput by in
    this study (:mod:`autotune.sweep.proposals.compile_pruning`); None until the study has measured enough probed trials
    to say. A trial with such work, given a ``Pruning``, first times a few steps of its eager twin without cuDNN's
    search and with its kernels on their first configs (:mod:`autotune.trial.eagerprobe`): that figure is recorded
    either way, and a configuration whose eager throughput times the most its work can gain (:meth:`one_off_gain`)
    cannot reach ``below`` stops before that work.
    """

    below: float | None = None
    compile_gain: float | None = None
    basis: str | None = None  # what ``below`` is, for the pruned trial's reason: "0.5 x trial 12's 341.8, ..."

    def one_off_gain(self, autotuning_share: float | None = None) -> tuple[float, str] | None:
        """The most the first steps' one-off work may multiply a probe's throughput by, and why, in words; None while
        nothing bounds it.

        ``compile_gain``, or, for a configuration whose only one-off work is its kernels' autotuning, what
        ``autotuning_share`` (the share of the probe's steps those kernels took on their first configs) allows,
        whichever is lower: were the kernels free, the step would take the rest (Amdahl's law), and
        :data:`PROBE_SPREAD` covers the probe's own error.
        """
        bounds = []
        if self.compile_gain is not None:
            bounds.append(
                (self.compile_gain, "the most the first steps' one-off work gained in this study, with margin")
            )
        if autotuning_share is not None:
            amdahl = PROBE_SPREAD / max(1.0 - autotuning_share, 1e-3)
            why = f"the most autotuning can gain where the kernels took {autotuning_share:.1%} of the probe's steps"
            bounds.append((amdahl, f"{why}, with margin"))
        return min(bounds, default=None)

    def unreachable(self, eager_throughput: float, autotuning_share: float | None = None) -> Unreachable | None:
        """How a configuration whose eager twin ran at ``eager_throughput`` cannot reach the line even with the most
        its one-off work can gain (:meth:`one_off_gain`; ``autotuning_share`` for one whose only one-off work is its
        kernels' autotuning); None where it may, or nothing bounds the gain or draws the line. The trial job and a
        timed replay both decide by it."""
        bound = self.one_off_gain(autotuning_share)
        if self.below is None or bound is None:
            return None
        gain, why = bound
        reachable = eager_throughput * gain
        return Unreachable(gain, why, reachable, self.below, self.basis) if reachable < self.below else None

    def after_warmup(self, throughput: float, unit: str = "") -> str | None:
        """Why a trial whose settled warm-up ran at ``throughput`` (``unit`` for the reason) stops there: it is under
        the line; None where it goes on to be timed. The trial job and a timed replay both decide by it."""
        if self.below is None or throughput >= self.below:
            return None
        shown = quantity(throughput, unit)
        return f"warm-up throughput {shown} is below {number(self.below)}{_basis(self.basis)}"


@dataclass(frozen=True)
class TrialSpec:
    """One trial: a workload, its knobs and workload params, the device and how to measure.

    ``memory_cap_gib`` caps the trial's memory for real (CUDA: the allocator's per-process
    fraction; CPU: the address-space limit above what the process already maps), so an
    over-large configuration fails as ``oom`` exactly as it would on a smaller device.
    ``pruning`` lets a sweep stop a trial that cannot win: after warm-up, or before compiling (:class:`Pruning`).
    ``kernels`` names the space's listed Triton kernels: each is pinned to the config its params
    choose before the workload is built. ``profile_steps > 0`` has the trial, after its timed window,
    run that many more steps under the profiler (:func:`autotune.trial.profiler`) and put what
    it returns in ``result.extra["profile"]``, with the Chrome trace in ``<profile_dir>/trace.json``
    when ``profile_dir`` is given. ``compile_cache_dir`` is where the trial keeps Inductor's and
    Triton's compile caches (:mod:`autotune.trial.compilecache`: every trial of a study given the study's
    folder, a repeat compiles from the cache); None leaves their defaults. A trial given one saves what it
    compiled there (:mod:`autotune.trial.artifacts`). ``compile_artifacts`` are a tuned config's shipped compile
    artifacts, loaded before anything compiles as production's ``apply()`` loads them (``autotune verify``).
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


def _basis(basis: str | None) -> str:
    """`` (0.5 x trial 12's 341.8, one measurement)``: what the pruning line is, where the sweep said."""
    return f" ({basis})" if basis else ""
