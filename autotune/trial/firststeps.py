"""A production start, in this process: a tuned config loaded, its workload built, ``apply()``, the first steps timed.

What production pays before its steady steps: ``apply()`` (the compile artifacts loaded there) and the first steps
(compiling, tuning, graph capture), less those steps' steady time. The sweep's rehearsal of the winner's start
(:mod:`autotune.sweep.stages.rehearsal`) runs it in a fresh interpreter with empty compile caches and then saves what
the start compiled and read (``save_to``): a production start, not a trial, because on an H100 (torch 2.11, Triton 3.6)
the kernels a trial process built had other Triton cache keys than those every production process built, whatever
its Inductor folder was called (BENCHMARKS.md): shipped from a trial, 35 of GPT-2's were built again
at each start. ``scripts/compile_artifacts_benchmark.py`` times the same start. Not a trial, then, though it lives
beside the trial process's code: a process of its own, started by the sweep and the benchmark.

Run as ``python -m autotune.trial.firststeps TUNED.yaml [--device auto] [--steps 3] [--steady 5] [--save-to DIR]``:
the last line it prints is one JSON object (:class:`FirstSteps` and, with ``--save-to``, ``saved``: the artifacts'
record as a trial's result holds it, their file in DIR). Bad input: one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.knobs.registry import Knobs
from autotune.knobs.stepcontext import StepContext
from autotune.quiet import quiet_tf32_hint
from autotune.trial.batches import loader_batches
from autotune.trial.job import resolve_device
from autotune.trial.trainstep import TrainStep, prepare_pair
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned.file import load as load_config

__all__ = ["FirstSteps", "run"]


@dataclass(frozen=True)
class FirstSteps:
    """A start, timed: ``apply_s`` for ``apply()``, ``step_s`` each first step, ``first_steps_s`` both together,
    ``steady_step_ms`` the median step after them, ``start_s`` the first steps less their steady time (what the start
    cost); whether the compile artifacts loaded and in how long; the device."""

    first_steps_s: float
    apply_s: float
    steady_step_ms: float
    start_s: float
    step_s: list[float]
    artifacts_loaded: bool | None
    artifacts_load_s: float | None
    device: str
    saved: dict[str, Any] | None = field(default=None)


def run(
    tuned: str, device_name: str = "auto", steps: int = 3, steady: int = 5, save_to: str | None = None
) -> FirstSteps:
    """Start ``tuned``'s workload as production does and time it; ``save_to``: a folder where what this process
    compiled and read is saved as a trial saves it (:func:`autotune.tuned.artifacts.save`)."""
    began_wall = time.time()  # before apply() installs the shipped Triton files: a rehearsal ships them too
    if steps < 1 or steady < 1:
        raise AutotuneError(f"--steps and --steady must be at least 1, got {steps} and {steady}")
    cfg = load_config(tuned)
    device = resolve_device(device_name)
    spec = cfg.workload
    if not spec.get("name"):
        raise AutotuneError(f"{tuned}: names no workload to start (workload.name)")
    if not isinstance(spec.get("args", {}), dict):
        raise AutotuneError(f"{tuned}: workload.args must be a mapping, got {spec['args']!r}")
    args = {**spec.get("args", {}), **cfg.params}
    try:
        workload = workloads.build(spec["name"], spec.get("preset", "full"), args, device)
    except TypeError as exc:  # a param its build function does not take: the config is not this workload's
        raise AutotuneError(f"{tuned}: workload {spec['name']!r} cannot be built with {sorted(args)}: {exc}") from None
    if not isinstance(workload, workloads.Workload):
        raise AutotuneError(f"{tuned}: workload {spec['name']!r} is a kernel, not a training step to start")
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-4)  # the trials' optimizer
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    sync()
    started = time.perf_counter()
    model, ctx = cfg.apply(workload.model, optimizer)
    applied = time.perf_counter()
    batch_for = _batches(workload, cfg.batch_size or workload.default_batch_size, cfg.to_knobs(), device, ctx)
    step = TrainStep(workload, model, ctx, optimizer, batch_for)
    step_s = [_timed(step, index, sync) for index in range(steps)]
    first_s = time.perf_counter() - started
    steady_ms = statistics.median(_timed(step, index, sync) * 1e3 for index in range(steps, steps + steady))
    load = cfg.artifacts_load
    saved = None
    if save_to is not None:
        artifacts = compileartifacts.save(save_to, device, since=began_wall)
        saved = artifacts.to_dict() if artifacts is not None else None
    return FirstSteps(
        first_steps_s=first_s,
        apply_s=applied - started,
        steady_step_ms=steady_ms,
        start_s=max(0.0, first_s - steps * steady_ms / 1e3),
        step_s=[round(s, 3) for s in step_s],
        artifacts_loaded=load.loaded if load is not None else None,
        artifacts_load_s=load.seconds if load is not None and load.loaded else None,
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        saved=saved,
    )


def _timed(step: Callable[[int], None], index: int, sync: Callable[[], None]) -> float:
    begun = time.perf_counter()
    step(index)
    sync()
    return time.perf_counter() - begun


def _batches(
    workload: workloads.Workload, batch_size: int, knobs: Knobs, device: torch.device, ctx: StepContext
) -> Callable[[int], Any]:
    """Step ``i``'s batch, as a trial lays it out: three made on the device in turn, or the dataset's through the
    loader the knobs describe."""
    if workload.make_batch is not None:
        made = [prepare_pair(ctx, workload.make_batch(batch_size, device)) for _ in range(3)]
        return lambda index: made[index % len(made)]
    source = loader_batches(workload, batch_size, knobs, device)
    return lambda index: prepare_pair(ctx, source.batch(index))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autotune.trial.firststeps", description=__doc__.split("\n")[0])
    parser.add_argument("tuned", help="a tuned config (its compile artifacts beside it, if it ships them)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, default=3, help="first steps timed (compile included)")
    parser.add_argument("--steady", type=int, default=5, help="steps after them, for the steady step time")
    parser.add_argument("--save-to", help="a folder: save what this start compiled and read there")
    args = parser.parse_args(argv)
    quiet_tf32_hint()  # the rehearsed start's output goes to the sweep's terminal
    try:
        found = run(args.tuned, args.device, args.steps, args.steady, args.save_to)
    except AutotuneError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
