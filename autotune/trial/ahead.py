"""Compile a configuration's graphs ahead of its trial, into the study's compile cache, without running them.

A sweep on one GPU is compile-bound: on an H100 a fresh ResNet-50 graph took 33-42 s to compile for 10 s of
measuring, and the GPU waited all that time while 15 of the host's 16 cores sat idle. A compile needs the CPU,
not the GPU: Dynamo and AOTAutograd trace with fake tensors, Inductor generates and builds its kernels in worker
processes. So while one trial is measured, the sweep has this job compile the graphs of a configuration it
expects to measure soon (:mod:`autotune.sweep.proposals.compile_ahead`), into the study's Inductor and Triton folders;
when that configuration's trial comes, its compile is a cache hit (a tiny MLP on a 2-core CPU: 31.7 s fresh, 2.7 s after
compiling ahead).

The job builds the workload and applies the knobs with the trial's own code (:func:`autotune.knobs.apply`), so
the graphs and Inductor's options are the trial's. Only the compiler differs: :class:`CompileOnly` hands each
graph to the very Inductor backend ``torch.compile`` would build, then returns a function that raises
:class:`CompiledAhead` instead of running: nothing executes on the GPU and no activation memory is taken (the
job holds the CUDA context, the model's parameters and one batch). The backward is compiled with the forward
(:func:`autotune.knobs.compile.compile_backward_with_forward`), as the trial and production compile it, so both graphs
land in the cache under the keys the trial will look up. A model with graph breaks is compiled up to its first
graph; the trial compiles the rest. Kernels that Inductor benchmarks at their first launch (and CUDA graph capture,
cuDNN's search) are the trial's: they need the GPU.

The job runs at low CPU priority with half the host's cores for Inductor's kernel builds, so the trial being
measured meanwhile keeps its cores; and it gives up, before it builds the model and after, where less than
:data:`MIN_FREE_SHARE` of the GPU's memory is free (a model whose weights fill the GPU is not compiled ahead). That
check cannot protect the trial beside it: the sweep starts the job just before the trial, whose memory then still
grows. So the job gives back its allocator's cache once the model and batch are built, and answers how much of the
GPU it held at most (``held_gib``, of ``gpu_gib``): the sweep runs no more compiles ahead at once than fit in a small
share of the GPU (:func:`autotune.sweep.proposals.compile_ahead.memory_slots`), and measures a trial that ran out of
memory beside them again, alone.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.kernels.listing import load_kernel
from autotune.kernels.pinning import TrialPins
from autotune.knobs.applying import apply
from autotune.knobs.attention import keep_refusals
from autotune.quiet import quiet_tf32_hint
from autotune.trial.build import configured
from autotune.trial.failures import classify
from autotune.trial.job import resolve_device, use_study_cache
from autotune.trial.trainstep import TrainStep, prepare_pair
from autotune.trial.trialspec import TrialSpec
from autotune.tuned import artifacts as compileartifacts

__all__ = ["MIN_FREE_SHARE", "NICENESS", "CompileOnly", "CompiledAhead", "compile_ahead"]

NICENESS = 10  # added to the job's CPU niceness: the measured trial (niceness 0) comes first
# The share of the GPU's memory that must be free, before the model is built and after, for the job to go on: the
# trial being measured beside it may need the rest (an OOM there would be the configuration's, wrongly). The free
# figure is the device's, so what other compiles ahead hold when it is read is counted already; what it cannot see is
# the trial's memory still to come (it starts beside the job) and the compiles ahead that build after the check: the
# sweep's cap on compiles ahead by the memory each holds covers those (autotune.sweep.proposals.compile_ahead).
MIN_FREE_SHARE = 0.4


class CompiledAhead(Exception):
    """Raised where a graph compiled ahead would run: its compile is done, and nothing is to execute."""


class CompileOnly:
    """A ``torch.compile`` backend: Inductor as ``torch.compile(mode=..., options=...)`` builds it, but the
    compiled graph raises :class:`CompiledAhead` instead of running."""

    def __init__(self, mode: str | None = None, options: dict[str, Any] | None = None) -> None:
        self.inductor = torch._TorchCompileInductorWrapper(mode, options, None)
        self.compiler_name = "inductor"
        self.graphs = 0

    def __call__(self, graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.inductor(graph, example_inputs)
        self.graphs += 1

        def compiled_ahead(*_args: Any, **_kwargs: Any) -> Any:
            raise CompiledAhead

        return compiled_ahead

    def get_compiler_config(self) -> dict[str, Any]:
        return self.inductor.get_compiler_config()

    def reset(self) -> None:
        self.inductor.reset()


def compile_ahead(spec: TrialSpec) -> dict[str, Any]:
    """Compile ``spec``'s graphs into its ``compile_cache_dir``; never raises.

    Returns ``{"ok": True, "seconds": ..., "graphs": N}``, or ``{"ok": False, "seconds": ..., "reason": ...}``
    (the trial then compiles as it would have: nothing is lost but the idle CPU's time); on a GPU either also says
    what the job held of it at most, ``held_gib`` of ``gpu_gib`` (:func:`_gpu_memory`).
    """
    started = time.perf_counter()
    try:
        graphs = _compile(spec)
    except Exception as exc:  # a failure here is the trial's to meet and classify, with the GPU to run it
        _, reason = classify(exc)
        answer: dict[str, Any] = {"ok": False, "seconds": time.perf_counter() - started, "reason": reason}
    else:
        seconds = time.perf_counter() - started
        answer = {"ok": True, "seconds": seconds, "graphs": graphs}
        if not graphs:
            answer = {"ok": False, "seconds": seconds, "reason": "no graph was compiled"}
    return answer | _gpu_memory(spec.device)


def _gpu_memory(device_name: str) -> dict[str, float]:
    """The most GPU memory this job held once its model and batch were built (its allocator's peak reservation from
    then on, or over the whole job where it failed before; the CUDA context, a few hundred MiB, is not counted) and the
    GPU's whole memory, in GiB; nothing where the job never used a GPU."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    try:
        device = resolve_device(device_name)
    except AutotuneError:
        return {}
    if device.type != "cuda":
        return {}
    _, total = torch.cuda.mem_get_info(device)
    return {"held_gib": torch.cuda.max_memory_reserved(device) / 2**30, "gpu_gib": total / 2**30}


def _check_free_memory(device: torch.device) -> None:
    """Give way to the trial being measured when the GPU's memory runs short (see :data:`MIN_FREE_SHARE`)."""
    if device.type != "cuda":
        return
    free, total = torch.cuda.mem_get_info(device)
    if free < MIN_FREE_SHARE * total:
        raise AutotuneError(
            f"only {free / 2**30:.1f} of the GPU's {total / 2**30:.1f} GiB are free: the trial measured beside it"
            " may need them"
        )


def _compile(spec: TrialSpec) -> int:
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    device = resolve_device(spec.device)
    compileartifacts.stable_cache_keys()  # the cache keys the trial computes, ptxas included, before any kernel runs
    use_study_cache(spec)
    pins = TrialPins.pin_all([load_kernel(path) for path in spec.kernels], spec.params)
    knobs, workload_params = configured(spec, pins.params)
    if knobs.compile_mode == "none":
        raise AutotuneError("an eager configuration has no graph to compile")
    quiet_tf32_hint()
    keep_refusals()  # the reasons a pinned attention kernel cannot run: in the trial's line, not on the console
    _check_free_memory(device)
    torch.manual_seed(spec.seed)
    workload = workloads.build(spec.workload, spec.preset, {**spec.workload_args, **workload_params}, device)
    _check_free_memory(device)
    if not isinstance(workload, workloads.Workload) or workload.make_batch is None:
        raise AutotuneError("only a training workload that makes its batches on the device is compiled ahead")
    batch = workload.make_batch(knobs.batch_size or workload.default_batch_size, device)
    if device.type == "cuda":
        # What building left in the allocator's cache is the trial's to use while this compiles, and what this job
        # holds from here on is what it holds beside the trial (its answer's held_gib).
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    workload.model.train()
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-4)  # the trial's optimizer (not stepped)
    backends: list[CompileOnly] = []

    def compile_only(model: Any, **arguments: Any) -> Any:  # what knobs.apply hands torch.compile, compiled only
        backends.append(CompileOnly(**arguments))
        return torch.compile(model, backend=backends[-1])

    model, ctx = apply(workload.model, optimizer, knobs, device.type, compile_fn=compile_only)
    laid_out = prepare_pair(ctx, batch)
    with contextlib.suppress(CompiledAhead):
        TrainStep(workload, model, ctx, optimizer, lambda _index: laid_out)(0)
    return sum(backend.graphs for backend in backends)
