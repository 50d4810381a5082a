"""A training trial's batches: made on the device before timing, or the workload's dataset through the loader.

``make_batch`` batches are made before timing (the model-only measurement), rotated by step index so no cache sees
the same data twice in a row; a workload with a dataset is fed through the ``DataLoader`` and copy that the data knobs
describe, each step waiting for its batch (:mod:`autotune.data`).
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import torch

from autotune import workloads
from autotune.data import LoaderBatches, SyntheticBatches, build_loader
from autotune.errors import AutotuneError
from autotune.knobs.registry import Knobs

__all__ = ["batch_source", "loader_batches"]


def batch_source(
    workload: workloads.Workload, batch_size: int, knobs: Knobs, device: torch.device, count: int
) -> SyntheticBatches | LoaderBatches:
    """The workload's dataset through the loader (:func:`loader_batches`), or ``count`` batches made on ``device``
    by ``make_batch`` (checked not to be zeros), as they come: the step lays them out."""
    if workload.dataset is not None:
        return loader_batches(workload, batch_size, knobs, device)
    assert workload.make_batch is not None
    batches = [workload.make_batch(batch_size, device) for _ in range(count)]
    _check_random(batches[0])
    return SyntheticBatches(batches)


def _check_random(batch: Any) -> None:
    """Timing on zeros flatters kernels and hides bugs: refuse all-zero synthetic inputs."""
    tensors = [t for t in (batch if isinstance(batch, tuple | list) else [batch]) if isinstance(t, torch.Tensor)]
    if tensors and tensors[0].is_floating_point() and not tensors[0].any():
        raise AutotuneError("the workload's make_batch returned all-zero inputs; use random data")


def loader_batches(workload: workloads.Workload, batch_size: int, knobs: Knobs, device: torch.device) -> LoaderBatches:
    """The workload's dataset through the DataLoader and the copy to ``device`` that the data knobs describe (a trial's,
    and :mod:`autotune.trial.firststeps`' production start)."""
    assert workload.dataset is not None
    loader = build_loader(
        workload.dataset, batch_size, knobs, device.type, collate_fn=workload.collate_fn, **_worker_start(knobs)
    )
    return LoaderBatches(
        loader,
        device,
        non_blocking=bool(knobs.non_blocking),
        gpu_prefetch=bool(knobs.gpu_prefetch),
        transform=workload.device_transform,
    )


def _worker_start(knobs: Knobs) -> dict[str, Any]:
    """Start the loader's workers the way a training script on this platform does (fork on Linux).

    A trial process comes from a forkserver, so its own default is forkserver: each worker would be
    started by a server that re-imports the workload and unpickles the dataset (2-3 s a worker on
    a CPU, at every epoch without persistent workers), and a dataset that cannot be pickled would fail.
    """
    if knobs.num_workers == 0:
        return {}
    return {"multiprocessing_context": multiprocessing.get_all_start_methods()[0]}  # the platform's default
