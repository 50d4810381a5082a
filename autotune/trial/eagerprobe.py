"""The eager twin of a compiled configuration, timed in the trial's own process before it compiles.

A compile costs tens of seconds to minutes on a full model, and a sweep that prunes after warm-up has
paid it already (on an H200, 28% of a vision transformer's sweep time went to trials pruned after
compiling). The same configuration without the compiler runs at once: a few eager steps give its eager
throughput. A study that has measured how much compiling gains (:mod:`autotune.sweep.proposals.compile_pruning`:
the largest ratio of a compiled trial's throughput to its own eager probe, with a margin) can then
tell that a configuration cannot reach the pruning bound even compiled, and stop it before compiling.

The probe runs without cuDNN's algorithm search (``torch.backends.cudnn.benchmark`` off while it runs: cuDNN
picks by its heuristics), the other one-off work a configuration can ask for: an eager configuration with
``cudnn_benchmark=true`` is probed the same way, and stops before the search where even the study's largest
gain leaves it under the bound. Nor does it autotune the workload's ``triton.autotune`` kernels: they run their first
configs (:func:`autotune.kernels.untuned.first_configs`, as the reference pass does), so an eager configuration
whose kernels would autotune is probed too. On an H200 the first step of GPT-2 in fp32 eager at batch 64 spent
14.6 s autotuning the fused LM head's 34 configs before the trial was pruned at a fifth of the best
(BENCHMARKS.md). What each probe leaves out is the same for every trial of a study,
so what the one-off work gained (the trial's figure over its probe's) is one bound for all of it.

Where the only one-off work is the kernels' autotuning, the probe also says how much it can gain at most: it times
each launch of those kernels (on their first configs), and were they to take no time at all the step would take the
rest (Amdahl's law, :meth:`autotune.trial.pruning.Pruning.one_off_gain`). That bound needs no evidence from other trials
and is far tighter than a compile's gain: on an H200 a GPT-2 tf32 eager draw at a third of the best passed the
study's bound (1.68x, learnt from compiles) and autotuned the fused head for 11.9 s before its warm-up pruned it
(BENCHMARKS.md). A probe whose second step already shows the configuration cannot win, even were
its later steps :data:`~autotune.trial.pruning.EAGER_ONE_OFF_MS` faster, stops there (an fp32 GPT-2 step takes 1.1 s
at batch 64).

The probe leaves the trial as it found it: the learning rates are zero while it runs, so the first
compiled step (checked against the fp32 reference loss) sees the weights untouched; the memory it
took is handed back and the peak statistics reset (:func:`autotune.trial.measure.hand_back_memory`), so the
trial's peak memory is the compiled run's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from autotune.kernels.untuned import FirstConfigs, cannot_run_here, first_configs
from autotune.knobs.registry import Knobs
from autotune.numbers import quantity
from autotune.trial.measure import hand_back_memory, time_steps
from autotune.trial.pruning import EAGER_ONE_OFF_MS, KERNELS_AUTOTUNING, Pruning
from autotune.trial.trainstep import TrainStep

__all__ = ["PROBE_STEPS", "EagerProbe", "ceiling", "eager_twin", "one_off_work", "probe_before_work"]

# The first step pays cuDNN's algorithm search and the allocator's growth; the fastest of the rest counts
# (the higher the estimate, the less a probe prunes: noise errs on the side of compiling).
PROBE_STEPS = 5


@dataclass(frozen=True)
class EagerProbe:
    """What the eager twin's steps said: items per second of its fastest step after the first and, where kernels
    that would autotune ran on their first configs, the share of the steps after the first that they took."""

    throughput: float
    autotuning_share: float | None = None
    steps: int = PROBE_STEPS  # fewer: it stopped early, and its figures are the most it could still have said

    def metrics(self) -> dict[str, float]:
        """The probe's figures as a trial records them."""
        found = {"eager_probe_throughput": self.throughput}
        if self.autotuning_share is not None:
            found["eager_probe_autotuning_share"] = self.autotuning_share
        if self.steps < PROBE_STEPS:
            found["eager_probe_steps"] = float(self.steps)
        return found

    def said(self, unit: str) -> str:
        """``eager 1.7e+05 tokens/s``, or for a probe that stopped early ``eager at most 1.7e+05 tokens/s (2 of 5
        probe steps)``."""
        if self.steps < PROBE_STEPS:
            return f"eager at most {quantity(self.throughput, unit)} ({self.steps} of {PROBE_STEPS} probe steps)"
        return f"eager {quantity(self.throughput, unit)}"


def one_off_work(knobs: Knobs, device_type: str, autotuning: frozenset[str]) -> str | None:
    """What a configuration's first steps pay once and its probe skips, in words: None when nothing. A compile;
    cuDNN's algorithm search on a GPU (on a CPU the knob does nothing); or the ``autotuning`` kernels (those the
    reference pass launched on their first configs) choosing their configs."""
    if knobs.compile_mode != "none":
        return "compiling"
    if knobs.cudnn_benchmark and device_type == "cuda":
        return "cuDNN's algorithm search"
    if autotuning:
        return KERNELS_AUTOTUNING
    return None


def probe_before_work(
    step: TrainStep, items: int, device: torch.device, pruning: Pruning | None, work: str | None
) -> EagerProbe | None:
    """The eager twin's figures, for a trial of a sweep (``pruning``) with one-off ``work`` to skip; None without a
    probe. It stops after two steps where they already show the configuration cannot reach the line even with the
    most that work can gain (:meth:`Pruning.before_work`), which the caller then asks of the figures. The caller leaves
    out a trial behind a loader: the probe would take the loader's first batches, which the first step is checked on."""
    if pruning is None or work is None:
        return None
    return eager_twin(
        step,
        items,
        device,
        lambda at_most: pruning.before_work(work, at_most.throughput, at_most.autotuning_share) is not None,
    )


def eager_twin(
    step: TrainStep, items: int, device: torch.device, cannot_win_yet: Callable[[EagerProbe], bool] | None = None
) -> EagerProbe | None:
    """``step`` run eager, without cuDNN's algorithm search or its kernels' autotuning; None when eager runs out of
    memory. ``cannot_win_yet`` is asked, after a second step longer than :data:`EAGER_ONE_OFF_MS`, of the most the
    probe could still say (:func:`ceiling`): True ends the probe there, with that.

    A model compiled whole runs its wrapped module; one whose blocks are compiled in place (``compile_scope=blocks``)
    runs itself with torch.compile told to run eager (``torch.compiler.set_stance("force_eager")``); an eager one
    runs as it is.
    """
    eager = getattr(step.model, "_orig_mod", None)  # torch.compile's wrapper keeps the module it wraps here
    stance: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if not isinstance(eager, torch.nn.Module):
        eager = step.model
        if step.ctx.blocks:
            stance = torch.compiler.set_stance("force_eager")
    try:
        with _learning_rates_zero(step.optimizer), stance, _no_cudnn_search():
            return _untuned_probe(_Probe(step, eager, items, device, cannot_win_yet))
    except torch.OutOfMemoryError:
        return None  # eager can need more memory than compiled: no estimate, the trial compiles as usual
    finally:
        hand_back_memory(device)


@dataclass
class _Probe:
    step: TrainStep
    eager: torch.nn.Module  # the model the twin runs
    items: int
    device: torch.device
    cannot_win_yet: Callable[[EagerProbe], bool] | None


def _untuned_probe(probe: _Probe) -> EagerProbe:
    """The twin's steps with each autotuning kernel on its first config; where a first config cannot run here (what
    Triton's autotuner skips a config for), with the kernels choosing as ever (and no share to tell)."""
    step = probe.step
    with first_configs(time_on=probe.device) as cut:
        twin = TrainStep(step.workload, probe.eager, step.ctx, step.optimizer, step.batch_for)
        try:
            return _timed_steps(twin, probe, cut)
        except Exception as exc:
            if not cut.cut or not cannot_run_here(exc):
                raise
    times = time_steps(twin, PROBE_STEPS, probe.device)
    return EagerProbe(probe.items / (min(times[1:]) / 1e3))


def _timed_steps(twin: TrainStep, probe: _Probe, cut: FirstConfigs) -> EagerProbe:
    """Two steps of ``twin``, then (unless their :func:`ceiling` already shows the configuration cannot win) the rest of
    :data:`PROBE_STEPS`, on the batches that follow."""
    launches = cut.launches
    assert launches is not None  # a timed block
    starts: list[int] = []  # the launches made before each step

    def step(index: int) -> None:
        starts.append(len(launches))
        twin(index)

    def kernel_ms() -> float | None:
        """The launches' time from the second step on; None where no kernel that would autotune ran."""
        return launches.ms(since=starts[1]) if cut.launched else None

    times = time_steps(step, 2, probe.device)
    if probe.cannot_win_yet is not None and times[1] > EAGER_ONE_OFF_MS:
        at_most = ceiling(probe.items, times[1], kernel_ms())
        if probe.cannot_win_yet(at_most):
            return at_most
    times += time_steps(lambda index: step(index + 2), PROBE_STEPS - 2, probe.device)
    kernels = kernel_ms()
    share = None if kernels is None else kernels / sum(times[1:])
    return EagerProbe(probe.items / (min(times[1:]) / 1e3), share)


def ceiling(items: int, second_ms: float, kernel_ms: float | None) -> EagerProbe:
    """The most a probe could still say after its second step took ``second_ms``, ``kernel_ms`` of it in the kernels
    that would autotune (None: none ran): every later step :data:`EAGER_ONE_OFF_MS` faster, the kernels' time in it
    as it was (their first configs take what they take), so the share is of that faster step. Its figures, times
    what they allow, bound what all :data:`PROBE_STEPS` could have shown."""
    steady_ms = second_ms - EAGER_ONE_OFF_MS
    share = None if kernel_ms is None else min(kernel_ms / steady_ms, 1.0)
    return EagerProbe(items / (steady_ms / 1e3), share, steps=2)


@contextlib.contextmanager
def _no_cudnn_search() -> Iterator[None]:
    """cuDNN by its heuristics while the probe runs; the trial's own setting after (a global flag, read per call)."""
    cudnn: Any = torch.backends.cudnn  # the module's flags are set by assignment, which its stubs do not declare
    saved = cudnn.benchmark
    cudnn.benchmark = False
    try:
        yield
    finally:
        cudnn.benchmark = saved


@contextlib.contextmanager
def _learning_rates_zero(optimizer: torch.optim.Optimizer) -> Iterator[None]:
    """Optimizer steps that leave the weights as they are (AdamW's decay is scaled by the rate too)."""
    saved = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = torch.zeros_like(group["lr"]) if isinstance(group["lr"], torch.Tensor) else 0.0
    try:
        yield
    finally:
        for group, lr in zip(optimizer.param_groups, saved, strict=True):
            group["lr"] = lr
