"""The input pipeline of a training job, built from the data-path knobs.

The trial job and production (:meth:`autotune.tuned.config.TunedConfig.dataloader`) call the same code,
so the loader that was measured is the loader that ships:

- ``loader``: the ``DataLoader`` built from the knobs (workers, pinning, prefetch factor,
  persistent workers), and which data knobs are no-ops where they cannot apply;
- ``transfer``: batches copied to the device (``non_blocking``), or the next one copied on a side
  CUDA stream while the current step runs (``gpu_prefetch``);
- ``source``: where a trial's step takes its batch from, timing how long it waits for it.
"""

from __future__ import annotations

from autotune.data.loader import build_loader, data_noops, loader_kwargs
from autotune.data.source import INPUT_WAIT_LABEL, LoaderBatches, SyntheticBatches, wait_metrics
from autotune.data.transfer import batch_tensors, device_batches, to_device

__all__ = [
    "INPUT_WAIT_LABEL",
    "LoaderBatches",
    "SyntheticBatches",
    "batch_tensors",
    "build_loader",
    "data_noops",
    "device_batches",
    "loader_kwargs",
    "to_device",
    "wait_metrics",
]
