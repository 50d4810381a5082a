"""A trial's workload built from its spec, and handed to its measurement.

The spec's params split into knobs and the workload's own tunable params (the pinned kernels' set apart), the knobs
checked together, the workload built; then a kernel workload measures itself and a training workload goes to
:mod:`autotune.trial.training`. :mod:`autotune.trial.job` calls it between what comes before anything compiles and what
is saved after; :mod:`autotune.trial.ahead` builds the same knobs for the graph it compiles ahead.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from autotune import workloads
from autotune.errors import AutotuneError
from autotune.knobs.attention import keep_refusals
from autotune.knobs.registry import KNOB_SPECS, Knobs
from autotune.measurement import Status, TrialResult
from autotune.quiet import quiet_tf32_hint
from autotune.trial.flopcache import FlopCache
from autotune.trial.training import TrainingTrial, measure_training, overhead
from autotune.trial.trialspec import TrialSpec

__all__ = ["configured", "measure_workload", "split_params"]


def split_params(params: dict[str, Any], workload: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split trial params into knobs and the own tunable parameters of ``workload`` (a built-in's name or an import
    path: bad input for :func:`autotune.workloads.resolve`)."""
    accepted = workloads.workload_params(workloads.resolve(workload))
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


def configured(spec: TrialSpec, kernel_params: dict[str, Any]) -> tuple[Knobs, dict[str, Any]]:
    """The spec's knobs and its workload's own params (``kernel_params``, the pinned kernels', set apart)."""
    plain = {name: value for name, value in spec.params.items() if name not in kernel_params}
    knob_params, workload_params = split_params(plain, spec.workload)
    return Knobs.from_params(knob_params), workload_params


def measure_workload(
    spec: TrialSpec, device: torch.device, kernel_params: dict[str, Any], started: float, requested_at: float
) -> TrialResult:
    """Build the spec's workload with its knobs (``kernel_params``: the pinned kernels', set apart) and measure it: a
    kernel workload checks its output against torch and times itself (do_bench, L2 flushed), a training workload is
    measured by :mod:`autotune.trial.training`. ``started``: when the trial began; ``requested_at``: when the parent
    asked for it (``time.time()`` stamps: what the trial cost besides its steps)."""
    knobs, workload_params = configured(spec, kernel_params)
    settings = spec.measure.for_device(device.type)
    params = {**knobs.to_params(), **workload_params, **kernel_params}
    knobs.check_combination(device.type)
    quiet_tf32_hint()
    keep_refusals()  # the reasons a pinned attention kernel cannot run: in the trial's line, not on the console
    torch.manual_seed(spec.seed)
    arguments = {**spec.workload_args, **workload_params}
    workload = workloads.build(spec.workload, spec.preset, arguments, device)
    if not isinstance(workload, workloads.Workload):
        costs = overhead(started, requested_at, time.time() - started)  # set up: what follows is the kernel's own run
        metrics = {**workload.run(device), **costs}
        return TrialResult(Status.OK, None, dict(workload.params), metrics)
    batch_size = knobs.batch_size or workload.default_batch_size
    params["batch_size"] = batch_size
    return measure_training(
        TrainingTrial(
            device,
            settings,
            knobs,
            params,
            workload,
            batch_size,
            started,
            requested_at,
            pruning=spec.pruning,
            profile_steps=spec.profile_steps,
            profile_dir=spec.profile_dir,
            flop_cache=FlopCache.in_study(spec.compile_cache_dir, _model_identity(spec, arguments)),
        )
    )


def _model_identity(spec: TrialSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """What of ``spec`` decides the model its workload builds (``arguments``: the workload's, its params included)."""
    return {"workload": spec.workload, "preset": spec.preset, "arguments": arguments, "seed": spec.seed}
