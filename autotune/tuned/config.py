"""The tuned configuration as production uses it: apply the knobs, build the loader, hand it to a framework.

``autotune.load("tuned.yaml")`` returns a :class:`TunedConfig`: :mod:`autotune.tuned.file` reads the
file, :mod:`autotune.views.export` writes it. Every method calls the code the trials ran (:func:`autotune.knobs.apply`,
:func:`autotune.data.build_loader`), so what was measured is what ships.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from autotune.data import build_loader
from autotune.errors import AutotuneError
from autotune.kernels.pinning import pin_tuned
from autotune.knobs.applying import apply as apply_knobs  # `apply` is also a TunedConfig method
from autotune.knobs.registry import Knobs
from autotune.knobs.stepcontext import StepContext
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned import frameworks

__all__ = ["SCHEMA_VERSION", "TunedConfig", "shape_key", "user_stacklevel"]

SCHEMA_VERSION = 1
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


@dataclass
class TunedConfig:
    """A tuned configuration: knobs to apply, the workload's params, kernel block sizes, provenance."""

    knobs: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # The winner's compile, shipped beside the file (autotune.tuned.artifacts): {} when none was.
    compile_artifacts: dict[str, Any] = field(default_factory=dict)
    source: Path | None = field(default=None, repr=False, compare=False)  # the file it was loaded from
    # What apply() did with the compile artifacts (None before it, or without any).
    artifacts_load: compileartifacts.Loaded | None = field(default=None, init=False, repr=False, compare=False)
    # load() warned already that this machine is not the one that measured it, artifacts included.
    artifacts_warned: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def batch_size(self) -> int | None:
        """The tuned batch size, for the user's data loader (``apply`` cannot change it)."""
        return self.knobs.get("batch_size")

    def to_knobs(self) -> Knobs:
        """The knobs as :class:`autotune.knobs.Knobs` (unknown names raise AutotuneError)."""
        return Knobs.from_params(self.knobs)

    def apply(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        device_type: str | None = None,
    ) -> tuple[torch.nn.Module, StepContext]:
        """Apply the knobs to ``model`` (and ``optimizer``) exactly as the trials did.

        Call it once the model is on its device and before the optimizer's first step.
        ``device_type`` defaults to the device of the model's parameters. Returns the model to
        train (compiled, if the config says so) and the :class:`~autotune.knobs.StepContext` that
        the training step uses for autocast, backward and the optimizer step. Inductor options
        (``knobs.inductor``, a finalist's) go to ``torch.compile`` with the compile mode, as in the trial.

        A compiled config's shipped compile artifacts are loaded first (:mod:`autotune.tuned.artifacts`):
        a file whose sha256 is not the recorded one raises AutotuneError; one written by another torch,
        Triton, GPU or CPU warns in one line and the model compiles from scratch. A compiled config also
        makes this process's compile-cache keys the trials' (:func:`~autotune.tuned.artifacts.stable_cache_keys`).
        """
        first = next(model.parameters(), None)
        if device_type is None:
            device_type = first.device.type if first is not None else "cpu"
        device = first.device if first is not None and first.device.type == device_type else torch.device(device_type)
        knobs = self.to_knobs()
        if knobs.compile_mode != "none":
            compileartifacts.stable_cache_keys()  # the compile caches' keys the trials computed
            if self.compile_artifacts:
                self.artifacts_load = self._load_artifacts(device)
        applied = apply_knobs(model, optimizer, knobs, device_type)
        pin_tuned(self.kernels)  # listed Triton kernels launch their tuned configs, without autotuning
        return applied

    def _load_artifacts(self, device: torch.device) -> compileartifacts.Loaded:
        """Load the shipped compile artifacts into this process's compile caches (see :meth:`apply`)."""
        name = self.source.name if self.source is not None else "the tuned config"
        artifacts = compileartifacts.Artifacts.from_dict(self.compile_artifacts, f"{name}: {compileartifacts.SECTION}")
        folder = self.source.parent if self.source is not None else Path.cwd()
        level = user_stacklevel()
        warn = not self.artifacts_warned
        return compileartifacts.load_shipped(artifacts, folder, device, recorded_in=name, warn=warn, stacklevel=level)

    def dataloader(
        self, dataset: Dataset[Any], *, device: str | torch.device | None = None, **kwargs: Any
    ) -> DataLoader[Any]:
        """The ``DataLoader`` the trials measured over ``dataset``: the tuned batch size, workers,
        pinning, prefetch factor and persistent workers, shuffled, full batches only (``drop_last``).

        Built by the function the trials used (:func:`autotune.data.build_loader`). ``kwargs`` go to
        ``DataLoader`` over the tuned values (``collate_fn``, ``batch_size``, ``shuffle`` ...).
        ``device`` is where the batches will go (default: CUDA when this machine has it): pinned
        memory only helps copies to a GPU, so it is off for any other device. The copy knobs are
        the training loop's to apply: ``autotune.data.device_batches(loader, device,
        non_blocking=..., gpu_prefetch=...)`` copies as the trials did.
        """
        batch_size = kwargs.pop("batch_size", self.batch_size)
        if batch_size is None:
            raise AutotuneError("this tuned config has no batch_size: pass dataloader(dataset, batch_size=...)")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        return build_loader(dataset, batch_size, self.to_knobs(), torch.device(device).type, **kwargs)

    def hf_training_args(self) -> dict[str, Any]:
        """Keyword arguments for ``transformers.TrainingArguments``: precision, TF32, torch.compile and its
        mode, fused AdamW, batch size, DataLoader settings. What it cannot express is named in one
        :class:`autotune.tuned.frameworks.FrameworkWarning`, with what to do instead."""
        return frameworks.hf_training_args(self.knobs, kernels=self.kernels)

    def lightning_trainer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``lightning.Trainer`` (precision, cudnn.benchmark). Lightning leaves
        torch.compile, channels_last, the backend flags, the fused optimizer and the DataLoader to you:
        :meth:`apply` and :meth:`dataloader` do them; the warning names each one that applies."""
        return frameworks.lightning_trainer_kwargs(self.knobs, kernels=self.kernels)

    def kernel_config(self, kernel: str, M: int, N: int, K: int, dtype: str | torch.dtype) -> dict[str, Any] | None:
        """The tuned block sizes (and variant) of ``kernel`` for this shape and dtype, or None when not tuned for it."""
        dtype_name = _DTYPE_NAMES.get(dtype, str(dtype)) if isinstance(dtype, torch.dtype) else dtype
        found = self.kernels.get(kernel, {}).get(shape_key(M, N, K, dtype_name))
        return dict(found) if found is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "workload": self.workload,
            "knobs": self.knobs,
            "params": self.params,
            "kernels": self.kernels,
            "provenance": self.provenance,
            **({compileartifacts.SECTION: self.compile_artifacts} if self.compile_artifacts else {}),
        }


def user_stacklevel() -> int:
    """The stacklevel, for a warning the caller issues, of the first frame outside this package: the user's line."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "autotune":
        frame, level = frame.f_back, level + 1
    return level


def shape_key(M: int, N: int, K: int, dtype: str) -> str:
    """How a tuned kernel config is keyed: ``"MxNxK:dtype"``."""
    return f"{M}x{N}x{K}:{dtype}"
