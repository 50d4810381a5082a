"""The batch knob: how many samples a training step takes.

The workload applies it (it builds its model and batches for that size, :mod:`autotune.workloads`), as does a tuned
config's ``DataLoader`` (:meth:`autotune.tuned.config.TunedConfig.dataloader`); :func:`autotune.knobs.apply` has
nothing to set for it.
"""

from __future__ import annotations

from autotune.knobs.spec import KnobSpec

__all__ = ["BATCH_SIZE"]

BATCH_SIZE = KnobSpec("batch_size", int, None, "samples per training step (default: the workload's)", minimum=1)
