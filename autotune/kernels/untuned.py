"""One config per ``triton.autotune`` kernel, for a pass whose speed nobody reads: the trial's fp32 reference loss.

A Triton autotuner compiles and times every config the first time it launches on a shape key. In a trial the first
launch of a workload's kernel is the reference pass (:func:`autotune.trial.numerics.reference_pass`: strict fp32, no
knob), which only yields the loss the first step is checked against, yet chose the kernel's fp32 config for it. On
an H100 the first GPT-2 trial of a sweep with the fused LM head (its kernel has 34 configs) took 16.6-23.9 s to
set up, against 3.8-4.6 s where the space pinned that kernel to one config (``gpt2_kernels.yaml``), and that trial
is the sweep's informed start, which the search waits for (BENCHMARKS.md).

So inside :func:`first_configs` each loaded autotuner that would benchmark runs its first config and chooses
nothing: its configs are given back after the block and its cache was never touched, so the trial's own steps, at
the trial's precision, benchmark as ever (an fp32 trial's included: it then pays for the fp32 choice it uses). A
first config that cannot run there (:func:`cannot_run_here`) sends the pass back to the kernels' own choices.
Left to choose: a kernel pinned to one config already (a space's listed kernel, :mod:`autotune.kernels.pinning`),
and one with a pruning rule (``prune_configs_by``: a rule may drop configs that are wrong for a shape, not only
slow ones). A kernel that is not a module global (one made in a function, or an autotuner wrapped again by
``triton.heuristics``), or whose module is first imported inside the block, is not found
(:func:`autotune.kernels.choices.loaded_autotuners`) and benchmarks as before.

The block notes which of the cut kernels launched (:class:`FirstConfigs`): those the reference pass launched are the
ones the trial's first steps will autotune, one-off work that the trial's eager probe, run inside the block too,
skips (:mod:`autotune.trial.eagerprobe`). The reference pass runs the forward only: a kernel launched in the backward
alone is not named, and an eager trial whose only autotuning kernels are such is not probed (it autotunes as before).
Asked to (``first_configs(time_on=device)``), the block also times each launch of a cut kernel (:class:`LaunchTimes`):
the probe's share of its steps spent in the kernels that would autotune bounds what their autotuning can gain.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from autotune.kernels.choices import loaded_autotuners

__all__ = ["FirstConfigs", "LaunchTimes", "cannot_run_here", "first_configs"]

_PRUNING_RULES = ("early_config_prune", "perf_model")  # Triton's Autotuner attributes set by prune_configs_by


class LaunchTimes:
    """The cut kernels' launches inside a timed block, each read in ms once the device has finished it: on a GPU
    between CUDA events on the current stream (a launch only queues the kernel), on a CPU by the host's clock
    (Triton's interpreter runs the kernel inside the call)."""

    def __init__(self, device: torch.device) -> None:
        self._on_gpu = device.type == "cuda"
        self._readers: list[Callable[[], float]] = []

    def __len__(self) -> int:
        return len(self._readers)

    def ms(self, since: int = 0) -> float:
        """The launches' time from the ``since``-th on; on a GPU, after the device has synchronised."""
        return sum(read() for read in self._readers[since:])

    def timing(self, run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``run(*args, **kwargs)``, timed."""
        if self._on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                return run(*args, **kwargs)
            finally:
                end.record()
                self._readers.append(lambda: start.elapsed_time(end))
        began = time.perf_counter()
        try:
            return run(*args, **kwargs)
        finally:
            host_ms = (time.perf_counter() - began) * 1e3
            self._readers.append(lambda: host_ms)


@dataclass
class FirstConfigs:
    """What :func:`first_configs` cut (the autotuners that would have benchmarked, by import path), which of those
    launched inside the block (the kernels whose first launch at the trial's own steps autotunes) and, in a timed
    block, how long their launches took."""

    cut: list[str] = field(default_factory=list)
    launched: set[str] = field(default_factory=set)
    launches: LaunchTimes | None = None  # None: not timed


@contextmanager
def first_configs(time_on: torch.device | None = None) -> Iterator[FirstConfigs]:
    """Inside the block, every loaded autotuner that would benchmark runs its first config; yields what was cut and,
    as the block runs, which of those launched and (given the device they run on, ``time_on``) their launches'
    times (nothing cut: the block runs as it would have)."""
    seen = FirstConfigs(launches=LaunchTimes(time_on) if time_on is not None else None)
    cut: list[tuple[Any, list[Any], Any]] = []  # (autotuner, its configs, its own instance-level run or None)
    try:
        for path, autotuner in loaded_autotuners():
            configs = autotuner.configs
            if len(configs) < 2 or _prunes(autotuner):
                continue  # it would not benchmark: a lone config, or a pruning rule that chooses
            cut.append((autotuner, configs, vars(autotuner).get("run")))
            seen.cut.append(path)
            autotuner.configs = configs[:1]  # Triton launches a lone config without benchmarking or caching it
            autotuner.run = _noting_launches(autotuner.run, path, seen)  # an instance attribute, for now
        yield seen
    finally:
        for autotuner, configs, own_run in cut:
            autotuner.configs = configs
            if own_run is None:
                vars(autotuner).pop("run", None)  # the class's own run again
            else:
                autotuner.run = own_run  # one set on the instance before (another library's patch)


def _noting_launches(run: Callable[..., Any], path: str, seen: FirstConfigs) -> Callable[..., Any]:
    """``run`` (Triton's ``Autotuner.run``, which every launch of the kernel goes through), adding ``path`` to
    ``seen.launched`` at each call, and timing the call where ``seen`` is timed."""

    def noted(*args: Any, **kwargs: Any) -> Any:
        seen.launched.add(path)
        if seen.launches is None:
            return run(*args, **kwargs)
        return seen.launches.timing(run, args, kwargs)

    return noted


def cannot_run_here(error: BaseException) -> bool:
    """Whether ``error`` is one Triton's autotuner skips a config for (too much shared memory, a compile-time
    assertion, ptxas refusing it): the config cannot run on this device or shape; another may."""
    # Imported here: a module of a workload without Triton kernels never needs them.
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime import errors

    ptxas = getattr(errors, "PTXASError", None)  # Triton 3.2 and later
    skipped = (errors.OutOfResources, CompileTimeAssertionFailure, *([ptxas] if ptxas is not None else []))
    return isinstance(error, skipped)


def _prunes(autotuner: Any) -> bool:
    return any(getattr(autotuner, rule, None) is not None for rule in _PRUNING_RULES)
