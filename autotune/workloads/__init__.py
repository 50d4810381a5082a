"""Workloads: the model, batches and loss that a trial trains.

A workload is a function ``build(preset: str, **params) -> Workload`` named either by a built-in
name (``resnet50``, ``gpt2``) or as ``package.module:function``. The trial job calls it under
``with torch.device(device):``, so tensors created with the default device land on the GPU
directly. It may also return a ``(model, make_batch, loss_fn)`` tuple. Example::

    # my_models.py
    import torch
    from autotune.workloads import Workload

    def mlp(preset: str = "full") -> Workload:
        width = {"tiny": 64, "small": 256, "full": 4096}[preset]
        model = torch.nn.Sequential(torch.nn.Linear(width, 10))

        def make_batch(batch_size: int, device: torch.device):
            x = torch.randn(batch_size, width, device=device)
            y = torch.randint(0, 10, (batch_size,), device=device)
            return x, y

        return Workload(model, make_batch, torch.nn.functional.cross_entropy, default_batch_size=64)

    # autotune trial my_models:mlp --preset tiny --device cpu -p precision=bf16

Extra keyword parameters of ``build`` (beyond ``preset``) become tunable parameters of the workload.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from autotune.errors import AutotuneError

__all__ = ["BUILTIN", "PRESETS", "KernelJob", "Workload", "build", "import_user_module", "resolve", "workload_params"]

PRESETS = ("tiny", "small", "full")
BUILTIN = {
    "resnet50": "autotune.workloads.resnet50:build",
    "gpt2": "autotune.workloads.gpt2:build",
    "triton_matmul": "autotune.workloads.triton_matmul:build",
}

Batch = tuple[Any, torch.Tensor]


@dataclass
class Workload:
    """What a trial trains.

    ``make_batch(batch_size, device)`` returns ``(inputs, targets)`` made on ``device``, random and
    never all zeros; ``loss_fn(model(inputs), targets)`` is the scalar loss. Throughput is reported
    as ``items_per_sample * batch_size / step time`` in ``unit`` (tokens/s for language models).
    """

    model: torch.nn.Module
    make_batch: Callable[[int, torch.device], Batch]
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor]
    default_batch_size: int = 32
    items_per_sample: int = 1
    unit: str = "samples/s"


@runtime_checkable
class KernelJob(Protocol):
    """A kernel workload (e.g. ``triton_matmul``): no training step; ``run`` checks and times it."""

    params: dict[str, Any]

    def run(self, device: torch.device) -> dict[str, Any]: ...


def resolve(name: str) -> Callable[..., Any]:
    """The build function of a built-in workload or of ``package.module:function``."""
    target = BUILTIN.get(name, name)
    module_name, sep, func_name = target.partition(":")
    if not sep or not module_name or not func_name:
        known = ", ".join(BUILTIN)
        raise AutotuneError(f"unknown workload {name!r}: use one of {known} or package.module:function")
    try:
        module = import_user_module(module_name)
    except ImportError as exc:
        raise AutotuneError(f"workload {name!r}: cannot import {module_name!r} ({exc})") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise AutotuneError(f"workload {name!r}: {module_name!r} has no function {func_name!r}")
    return func


def import_user_module(name: str) -> Any:
    """Import a user's module (workload or kernel) as ``python -m`` would: modules next to the command first."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)


def workload_params(func: Callable[..., Any]) -> dict[str, Any]:
    """The tunable parameters a build function takes beyond ``preset``, with their defaults."""
    out: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.name == "preset" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        out[param.name] = None if param.default is param.empty else param.default
    return out


def build(name: str, preset: str, params: dict[str, Any], device: torch.device) -> Workload | KernelJob:
    """Build a workload on ``device``; a tuple result is wrapped into a :class:`Workload`."""
    func = resolve(name)
    if name in BUILTIN and preset not in PRESETS:
        raise AutotuneError(f"preset {preset!r} is not valid: expected one of {', '.join(PRESETS)}")
    with torch.device(device):
        made = func(preset=preset, **params)
    if isinstance(made, tuple):
        made = Workload(*made)
    if isinstance(made, KernelJob):
        return made
    if not isinstance(made, Workload):
        raise AutotuneError(f"workload {name!r} returned {type(made).__name__}, expected a Workload")
    made.model.to(device)
    return made
