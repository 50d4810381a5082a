"""The data-path knobs: DataLoader workers, pinning, prefetching, and how batches are copied to the device.

They are applied where the data flows: :mod:`autotune.data` builds the ``DataLoader`` from them and copies each batch
to the device as they say, for the trials and for production alike; they are no-ops for a workload that makes its
batches on the device. :func:`autotune.knobs.apply` has nothing to set for them.
"""

from __future__ import annotations

from autotune.knobs.spec import KnobSpec

__all__ = ["DATA_KNOBS", "DATA_SPECS"]

DATA_SPECS = (
    KnobSpec("num_workers", int, None, "DataLoader worker processes (0: load in the training process)", minimum=0),
    KnobSpec("pin_memory", bool, (True, False), "DataLoader returns batches in pinned host memory (GPU only)"),
    KnobSpec("prefetch_factor", int, None, "batches each worker loads ahead (None: torch's)", minimum=1, nullable=True),
    KnobSpec("persistent_workers", bool, (True, False), "keep the workers alive from one epoch to the next"),
    KnobSpec("non_blocking", bool, (True, False), "copy batches with tensor.to(device, non_blocking=True)"),
    KnobSpec("gpu_prefetch", bool, (True, False), "copy the next batch on a side CUDA stream during this step"),
)
# The knobs of the input pipeline: applied by autotune.data, no-ops for a workload that makes its batches on the device.
DATA_KNOBS = tuple(spec.name for spec in DATA_SPECS)
