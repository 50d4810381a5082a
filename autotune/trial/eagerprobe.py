"""The eager twin of a compiled configuration, timed in the trial's own process before it compiles.

A compile costs tens of seconds to minutes on a full model, and a sweep that prunes after warm-up has
paid it already (on an H200, 28% of a vision transformer's sweep time went to trials pruned after
compiling). The same configuration without the compiler runs at once: a few eager steps give its eager
throughput. A study that has measured how much compiling gains (:mod:`autotune.sweep.compilegain`:
the largest ratio of a compiled trial's throughput to its own eager probe, with a margin) can then
tell that a configuration cannot reach the pruning bound even compiled, and stop it before compiling.

The probe runs without cuDNN's algorithm search (``torch.backends.cudnn.benchmark`` off while it runs: cuDNN
picks by its heuristics), the other one-off work a configuration can ask for: an eager configuration with
``cudnn_benchmark=true`` is probed the same way, and stops before the search where even the study's largest
gain leaves it under the bound. Nor does it autotune the workload's ``triton.autotune`` kernels: they run their first
configs (:func:`autotune.kernels.untuned.first_configs`, as the reference pass does), so an eager configuration
whose kernels would autotune is probed too. On an H200 the first step of GPT-2 in fp32 eager at batch 64 spent
14.6 s autotuning the fused LM head's 34 configs before the trial was pruned at a fifth of the best
(BENCHMARKS.md, issue 19's seventeenth session). What each probe leaves out is the same for every trial of a study,
so what the one-off work gained (the trial's figure over its probe's) is one bound for all of it.

The probe leaves the trial as it found it: the learning rates are zero while it runs, so the first
compiled step (checked against the fp32 reference loss) sees the weights untouched; the memory it
took is handed back and the peak statistics reset, so the trial's peak memory is the compiled run's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from autotune.kernels.untuned import cannot_run_here, first_configs
from autotune.trial.measure import time_steps
from autotune.trial.trainstep import TrainStep

__all__ = ["PROBE_STEPS", "cannot_win", "eager_twin_throughput"]

# The first step pays cuDNN's algorithm search and the allocator's growth; the fastest of the rest counts
# (the higher the estimate, the less a probe prunes: noise errs on the side of compiling).
PROBE_STEPS = 5


def eager_twin_throughput(step: TrainStep, items: int, device: torch.device) -> float | None:
    """Items per second of ``step`` run eager, without cuDNN's algorithm search; None when eager runs out of memory.

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
    twin = TrainStep(step.workload, eager, step.ctx, step.optimizer, step.batch_for)
    try:
        with _learning_rates_zero(step.optimizer), stance, _no_cudnn_search():
            times = _untuned_times(twin, device)
    except torch.OutOfMemoryError:
        return None  # eager can need more memory than compiled: no estimate, the trial compiles as usual
    finally:
        del twin
        _hand_back_memory(device)
    return items / (min(times[1:]) / 1e3)


def _untuned_times(twin: TrainStep, device: torch.device) -> list[float]:
    """The probe's step times with each autotuning kernel on its first config; where a first config cannot run here
    (what Triton's autotuner skips a config for), with the kernels choosing as ever."""
    with first_configs() as cut:
        try:
            return time_steps(twin, PROBE_STEPS, device)
        except Exception as exc:
            if not cut.cut or not cannot_run_here(exc):
                raise
    return time_steps(twin, PROBE_STEPS, device)


def cannot_win(eager_throughput: float, compile_gain: float, prune_below: float) -> bool:
    """Whether even the largest gain the one-off work gave in this study leaves the configuration under the bound."""
    return eager_throughput * compile_gain < prune_below


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


def _hand_back_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
