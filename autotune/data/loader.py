"""The ``DataLoader`` built from the data-path knobs: one function for the trials and for production."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader, Dataset

from autotune.knobs.data_path import DATA_KNOBS
from autotune.knobs.registry import Knobs

__all__ = ["build_loader", "data_noops", "loader_kwargs"]

# DataLoader refuses these without worker processes (a ValueError): without workers they do nothing.
_WORKER_ONLY = ("prefetch_factor", "persistent_workers")
# These act on copies to a GPU: on a CPU the batch is already where the step computes.
_GPU_ONLY = ("pin_memory", "non_blocking", "gpu_prefetch")


def loader_kwargs(knobs: Knobs, batch_size: int, device_type: str) -> dict[str, Any]:
    """``DataLoader`` keyword arguments for ``knobs`` on ``device_type``: what applies there, and nothing else.

    Shuffled, full batches only (``drop_last``): every step the same size, as the trial times them.
    """
    kwargs: dict[str, Any] = {
        "batch_size": batch_size,
        "shuffle": True,
        "drop_last": True,
        "num_workers": knobs.num_workers,
        "pin_memory": bool(knobs.pin_memory) and device_type == "cuda",
    }
    if knobs.num_workers > 0:
        kwargs["prefetch_factor"] = knobs.prefetch_factor
        kwargs["persistent_workers"] = bool(knobs.persistent_workers)
    return kwargs


def build_loader(
    dataset: Dataset[Any],
    batch_size: int,
    knobs: Knobs,
    device_type: str,
    *,
    collate_fn: Callable[[Any], Any] | None = None,
    **overrides: Any,
) -> DataLoader[Any]:
    """The ``DataLoader`` over ``dataset`` that the knobs describe; ``overrides`` are passed on as given.

    An override of ``num_workers`` to 0 drops the tuned worker-only settings (``prefetch_factor``,
    ``persistent_workers``), which ``DataLoader`` refuses without workers, unless they are overridden too.
    """
    kwargs = {**loader_kwargs(knobs, batch_size, device_type), "collate_fn": collate_fn, **overrides}
    if not kwargs.get("num_workers"):
        for name in _WORKER_ONLY:
            if name not in overrides:
                kwargs.pop(name, None)
    return DataLoader(dataset, **kwargs)


def data_noops(knobs: Knobs, device_type: str, *, has_dataset: bool) -> list[str]:
    """The data knobs set away from PyTorch's defaults that do nothing here, in :data:`DATA_KNOBS` order.

    All of them for a workload that makes its batches on the device (no loader, no copy); on a CPU
    the GPU-copy knobs; without workers the worker-only ones.
    """
    return [name for name in DATA_KNOBS if getattr(knobs, name) and not _applies(name, knobs, device_type, has_dataset)]


def _applies(name: str, knobs: Knobs, device_type: str, has_dataset: bool) -> bool:
    if not has_dataset:
        return False
    if name in _GPU_ONLY:
        return device_type == "cuda"
    if name in _WORKER_ONLY:
        return knobs.num_workers > 0
    return True
