"""The data-parallel knobs: ``data_parallel`` (how the model's gradients are shared between processes) and the
settings of each wrapper.

A data-parallel job runs one process per GPU (a trial with ``gpus_per_trial`` above 1, or a ``torchrun`` launch in
production), each on its own share of the batches:

- ``none``: the model is not wrapped (one process, or a job that wraps the model itself);
- ``ddp``: ``torch.nn.parallel.DistributedDataParallel``, a full replica on every rank, gradients all-reduced in
  buckets during the backward. ``ddp_bucket_cap_mb`` is the bucket size (DDP's default 25 MB: smaller starts the
  communication earlier, larger sends fewer messages), ``ddp_gradient_as_bucket_view`` makes the gradients views
  of the buckets (no copy, less memory), ``ddp_static_graph`` tells DDP the graph and the parameters used are the
  same every step (it can then skip the search for unused parameters and reorder buckets after the first step);
- ``fsdp``: FSDP2 (``torch.distributed.fsdp.fully_shard``), parameters, gradients and optimizer state sharded over
  the ranks, each repeated block (:func:`autotune.knobs.regional.find_blocks`) its own unit and then the root, as
  torchtitan does. ``fsdp_reshard_after_forward`` frees a block's gathered parameters after its forward (gathered
  again for the backward: less memory, more communication); false keeps them until the backward.

The wrapping needs ``torch.distributed`` initialised with more than one process; without it a data-parallel setting
is an invalid combination (:func:`check`), as is a wrapper's setting given to the other wrapper. Where the wrapping
sits among the other knobs (:func:`autotune.knobs.apply`), following torchtitan: float8, then activation
checkpointing, then the compile, then ``fully_shard`` over the compiled blocks. DDP goes in before a whole-model
compile (``torch.compile(DDP(model))``): Dynamo then splits the graph at DDP's buckets so that their all-reduce
overlaps the rest of the backward, where a compiled model inside DDP would hand all its gradients over at once at
the end of one backward node. Regionally compiled blocks are compiled in place, so DDP around them is the same
either way. FSDP2's sharding is :mod:`autotune.knobs.fsdp`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from autotune.errors import InvalidCombination
from autotune.knobs.spec import KnobSpec

__all__ = [
    "DATA_PARALLEL",
    "DATA_PARALLEL_MODES",
    "DATA_PARALLEL_SPECS",
    "DDP_BUCKET_CAP_MB",
    "DDP_GRADIENT_AS_BUCKET_VIEW",
    "DDP_STATIC_GRAPH",
    "DEFAULT_BUCKET_CAP_MB",
    "FSDP_RESHARD_AFTER_FORWARD",
    "DdpSettings",
    "check",
    "world_size",
    "wrap_ddp",
]

DATA_PARALLEL_MODES = ("none", "ddp", "fsdp")
DEFAULT_BUCKET_CAP_MB = 25  # DistributedDataParallel's own default

DATA_PARALLEL = KnobSpec(
    "data_parallel",
    str,
    DATA_PARALLEL_MODES,
    "how the model's gradients are shared between processes: DDP replicas or FSDP2 shards (torch.distributed)",
)
DDP_BUCKET_CAP_MB = KnobSpec(
    "ddp_bucket_cap_mb",
    int,
    None,
    "size of DDP's gradient all-reduce buckets in MB (25: DDP's default; data_parallel=ddp only)",
    minimum=1,
)
DDP_GRADIENT_AS_BUCKET_VIEW = KnobSpec(
    "ddp_gradient_as_bucket_view",
    bool,
    (True, False),
    "gradients are views of DDP's buckets: no copy into them, less memory (data_parallel=ddp only)",
)
DDP_STATIC_GRAPH = KnobSpec(
    "ddp_static_graph",
    bool,
    (True, False),
    "tell DDP the graph and used parameters are the same every step (data_parallel=ddp only)",
)
FSDP_RESHARD_AFTER_FORWARD = KnobSpec(
    "fsdp_reshard_after_forward",
    bool,
    (True, False),
    "free each block's gathered parameters after its forward, gathered again for backward (data_parallel=fsdp only)",
)
DATA_PARALLEL_SPECS = (
    DATA_PARALLEL,
    DDP_BUCKET_CAP_MB,
    DDP_GRADIENT_AS_BUCKET_VIEW,
    DDP_STATIC_GRAPH,
    FSDP_RESHARD_AFTER_FORWARD,
)


@dataclass(frozen=True)
class DdpSettings:
    """The DDP knobs, as :class:`~torch.nn.parallel.DistributedDataParallel` takes them."""

    bucket_cap_mb: int = DEFAULT_BUCKET_CAP_MB
    gradient_as_bucket_view: bool = False
    static_graph: bool = False

    @property
    def changed(self) -> list[str]:
        """The settings away from their defaults, as ``name=value``."""
        changed = []
        if self.bucket_cap_mb != DEFAULT_BUCKET_CAP_MB:
            changed.append(f"ddp_bucket_cap_mb={self.bucket_cap_mb}")
        if self.gradient_as_bucket_view:
            changed.append("ddp_gradient_as_bucket_view=true")
        if self.static_graph:
            changed.append("ddp_static_graph=true")
        return changed


def world_size() -> int:
    """How many processes this one trains with: torch.distributed's world size, 1 where it is not initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def check(mode: str, ddp: DdpSettings, reshard_after_forward: bool, processes: int) -> None:
    """Raise :class:`InvalidCombination` for a data-parallel setting that cannot run with ``processes`` processes, or
    a wrapper's setting given where the other wrapper (or none) is chosen."""
    if mode != "none" and processes < 2:
        raise InvalidCombination(
            f"data_parallel={mode} needs torch.distributed initialised with 2 or more processes, and this one has "
            f"{processes} (a space's gpus_per_trial: 2 or more, or a torchrun launch)"
        )
    if mode != "ddp" and ddp.changed:
        raise InvalidCombination(
            f"{ddp.changed[0]} acts on data_parallel=ddp only, not {mode} "
            "(in a space: add when: {data_parallel: [ddp]})"
        )
    if mode != "fsdp" and not reshard_after_forward:
        raise InvalidCombination(
            f"fsdp_reshard_after_forward=false acts on data_parallel=fsdp only, not {mode} "
            "(in a space: add when: {data_parallel: [fsdp]})"
        )


def wrap_ddp(model: torch.nn.Module, ddp: DdpSettings, device_type: str) -> torch.nn.Module:
    """``model`` in :class:`~torch.nn.parallel.DistributedDataParallel` with the DDP knobs; on a GPU, the rank's
    current device (``torch.cuda.set_device`` chose it)."""
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [torch.cuda.current_device()] if device_type == "cuda" else None
    return DistributedDataParallel(
        model,
        device_ids=device_ids,
        bucket_cap_mb=ddp.bucket_cap_mb,
        gradient_as_bucket_view=ddp.gradient_as_bucket_view,
        static_graph=ddp.static_graph,
    )
