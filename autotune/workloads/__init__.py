"""Workloads: the model, batches and loss that a trial trains.

A workload is a function ``build(preset: str, **params) -> Workload`` named either by a built-in
name (``resnet50``, ``gpt2``, ``llama``, ``vit``) or as ``package.module:function``. The trial job calls it under
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

Real input: in place of ``make_batch``, give a map-style ``torch.utils.data.Dataset`` (``dataset=``).
The trial builds the ``DataLoader`` itself (``batch_size`` from the knob, ``shuffle=True``,
``drop_last=True``) from the data-path knobs (``num_workers``, ``pin_memory``, ``prefetch_factor``,
``persistent_workers``) and copies each batch to the device as ``non_blocking`` and ``gpu_prefetch``
say; ``collate_fn`` goes to the ``DataLoader`` and ``device_transform(batch)`` runs on the device
after the copy, inside the timed step (normalisation, augmentation on the GPU). The time each step
waits for its batch is reported (``data_wait_ms_p50``, ``data_wait_frac``); a trial that waits more
than a tenth of its step time is ``input_bound``. The dataset holds host data: ``build`` runs under
the trial's device, so create its tensors with ``device="cpu"``. Its length is the epoch: each
epoch restarts the loader (and its workers, unless ``persistent_workers``), so a dataset far
shorter than the real job's epoch makes restarts weigh more in a trial than in training (a
dataset may map index ``i`` to sample ``i % N`` to have the real epoch's length).

A step of your own: ``train_step(model, batch, ctx)`` replaces the built-in step (forward, loss,
backward, optimizer step) and returns the step's loss. ``ctx`` is the
:class:`~autotune.knobs.StepContext` of the trial's knobs: ``ctx.autocast()`` around forward passes,
``ctx.prepare_inputs(x)`` for the input layout, ``ctx.backward(loss)`` (through the fp16 gradient
scaler), ``ctx.step()`` (the optimizer the knobs were applied to) and ``ctx.zero_grad()``. With a
``loss_fn`` as well, the first step's loss is checked against ``loss_fn(model(inputs), targets)`` on
the same batch in strict fp32 (so return the whole batch's loss, e.g. the mean over micro-batches);
without one, the check is that the loss is finite. Example, gradient accumulation over host data::

    # my_data.py
    import torch
    from torch.nn import functional as F
    from autotune.workloads import Workload

    class Images(torch.utils.data.Dataset):
        def __init__(self, count: int, size: int) -> None:  # uint8 images in host memory
            self.images = torch.randint(0, 256, (count, 3, size, size), dtype=torch.uint8, device="cpu")
            self.labels = torch.randint(0, 10, (count,), device="cpu")

        def __len__(self) -> int:
            return len(self.labels)

        def __getitem__(self, index: int):
            return self.images[index], self.labels[index]

    def normalise(batch):  # on the device, inside the timed step
        images, labels = batch
        return images.float().div(255).sub(0.5), labels

    def accumulate(model, batch, ctx, micro_batches: int = 4):
        images, labels = batch
        total = 0.0
        for x, y in zip(images.chunk(micro_batches), labels.chunk(micro_batches)):
            with ctx.autocast():
                loss = F.cross_entropy(model(ctx.prepare_inputs(x)), y) / micro_batches
            ctx.backward(loss)
            total += loss.detach()
        ctx.step()
        ctx.zero_grad()
        return total  # the mean over the micro-batches: the whole batch's cross-entropy

    def convnet(preset: str = "full") -> Workload:
        size = {"tiny": 16, "small": 64, "full": 224}[preset]
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10),
        )
        return Workload(model, loss_fn=F.cross_entropy, dataset=Images(512, size),
                        device_transform=normalise, train_step=accumulate, default_batch_size=32)

    # autotune trial my_data:convnet --preset tiny --device cpu -p num_workers=2 -p persistent_workers=true
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch.utils.data import Dataset, IterableDataset

from autotune.errors import AutotuneError
from autotune.knobs.spec import parse_bool
from autotune.usermodules import import_user_module

__all__ = [
    "BUILTIN",
    "PRESETS",
    "KernelJob",
    "Workload",
    "build",
    "check_args",
    "check_preset",
    "coerce_param",
    "positive_size",
    "presets",
    "resolve",
    "workload_params",
]

PRESETS = ("tiny", "small", "full")
BUILTIN = {
    "resnet50": "autotune.workloads.resnet50:build",
    "gpt2": "autotune.workloads.gpt2:build",
    "llama": "autotune.workloads.llama:build",
    "vit": "autotune.workloads.vit:build",
    "triton_matmul": "autotune.workloads.triton_matmul:build",
}

Batch = tuple[Any, torch.Tensor]


@dataclass
class Workload:
    """What a trial trains.

    Batches come from exactly one of ``make_batch(batch_size, device)``, which returns ``(inputs,
    targets)`` made on ``device`` (random, never all zeros), or ``dataset``, host data the trial
    loads through a ``DataLoader`` built from the data-path knobs (``collate_fn`` is handed to it;
    ``device_transform(batch)`` runs on the device after the copy, inside the timed step). The step
    is ``loss_fn(model(inputs), targets)`` with backward and optimizer step, or the workload's own
    ``train_step(model, batch, ctx)`` returning the loss (see the module docstring). Throughput is
    reported as ``items_per_sample * batch_size / step time`` in ``unit`` (tokens/s for language models).
    """

    model: torch.nn.Module
    make_batch: Callable[[int, torch.device], Batch] | None = None
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor] | None = None
    default_batch_size: int = 32
    items_per_sample: int = 1
    unit: str = "samples/s"
    _: KW_ONLY
    dataset: Dataset[Any] | None = None
    collate_fn: Callable[[Any], Any] | None = None
    device_transform: Callable[[Any], Any] | None = None
    train_step: Callable[[torch.nn.Module, Any, Any], torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if (self.make_batch is None) == (self.dataset is None):
            raise AutotuneError("a Workload takes exactly one of make_batch and dataset")
        if self.loss_fn is None and self.train_step is None:
            raise AutotuneError("a Workload needs a loss_fn or its own train_step")
        if isinstance(self.dataset, IterableDataset):
            raise AutotuneError("a Workload's dataset must be map-style (__getitem__, __len__): the trial shuffles it")
        if self.make_batch is not None and (self.collate_fn is not None or self.device_transform is not None):
            raise AutotuneError("collate_fn and device_transform apply to a dataset, not to make_batch")


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


def presets(func: Callable[..., Any]) -> tuple[str, ...]:
    """The presets a build function takes: its own ``presets`` attribute (``llama``: also 125m, 1b, 3b), else
    :data:`PRESETS`."""
    return tuple(getattr(func, "presets", PRESETS))


def check_preset(name: str, preset: str, func: Callable[..., Any]) -> None:
    """Raise :class:`AutotuneError` for a preset a built-in workload does not take (a user's may take any)."""
    if name in BUILTIN and preset not in (known := presets(func)):
        raise AutotuneError(f"preset {preset!r} is not valid: expected one of {', '.join(known)}")


def check_args(func: Callable[..., Any], preset: str, params: dict[str, Any]) -> None:
    """Raise :class:`AutotuneError` for workload params the build function refuses, before a trial process starts:
    its own ``check_args(preset, **params)`` attribute, where it has one (``vit``: the image and patch sizes)."""
    check = getattr(func, "check_args", None)
    if callable(check):
        check(preset, **params)


def workload_params(func: Callable[..., Any]) -> dict[str, Any]:
    """The tunable parameters a build function takes beyond ``preset``, with their defaults."""
    out: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.name == "preset" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        out[param.name] = None if param.default is param.empty else param.default
    return out


def coerce_param(name: str, value: Any, default: Any) -> Any:
    """A workload param given as text (``-p delay_ms=2``) in its default's type: bool, int or float.

    Values from a space's YAML are typed already and pass through, as does text for a param whose
    default is text or None (the build function then sees what was written).
    """
    if not isinstance(value, str) or default is None or isinstance(default, str):
        return value
    try:
        if isinstance(default, bool):
            if (parsed := parse_bool(value)) is None:
                raise ValueError(value)
            return parsed
        return type(default)(value) if isinstance(default, int | float) else value
    except ValueError:
        kind = {bool: "true or false", int: "an integer"}.get(type(default), "a number")
        raise AutotuneError(f"workload param {name}={value!r} is not valid: expected {kind}") from None


def positive_size(workload: str, name: str, value: Any) -> int | None:
    """A built-in's size argument (``seq``, ``layers``, ``image`` ...) as a positive int (a ``-p`` param arrives as
    text), or None for the preset's; anything else raises :class:`AutotuneError` naming ``workload`` and ``name``."""
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool | float):
        raise AutotuneError(f"{workload}: {name}={value!r} is not valid: expected a positive integer")
    return number


def build(name: str, preset: str, params: dict[str, Any], device: torch.device) -> Workload | KernelJob:
    """Build a workload on ``device``; a tuple result is wrapped into a :class:`Workload`."""
    func = resolve(name)
    check_preset(name, preset, func)
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
