"""FSDP2's sharding of a model, for ``data_parallel: fsdp`` (:mod:`autotune.knobs.data_parallel` holds the knobs).

:func:`autotune.knobs.apply` shards after the compile, over the blocks it compiled (torchtitan's order): each of the
model's repeated blocks (:func:`autotune.knobs.regional.find_blocks`) a unit of its own, then the root, on a mesh of
every rank, with ``torch.distributed.fsdp.fully_shard``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["shard"]


def shard(
    model: torch.nn.Module,
    blocks: Sequence[torch.nn.Module],
    reshard_after_forward: bool,
    optimizer: torch.optim.Optimizer | None,
    device_type: str,
) -> None:
    """FSDP2 over ``model`` in place: each of its repeated ``blocks`` a unit of its own, then the root (what no
    block holds), on a mesh of every rank; ``optimizer``'s parameters are pointed at the sharded ones.

    The root keeps its parameters gathered after the forward (torchtitan's choice too): the backward needs them
    first, at once.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    names = {id(param): name for name, param in model.named_parameters()}
    mesh = init_device_mesh(device_type, (dist.get_world_size(),))
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    if optimizer is not None:
        _point_at(optimizer, names, dict(model.named_parameters()))


def _point_at(optimizer: torch.optim.Optimizer, names: dict[int, str], sharded: dict[str, Any]) -> None:
    """Replace ``optimizer``'s parameters (``names``: their names in the model, by id) with the sharded ones of the
    same name: ``fully_shard`` registers new parameters, and an optimizer made before it would train the old ones.
    Nothing has stepped yet, so there is no state to carry over."""
    for group in optimizer.param_groups:
        group["params"] = [sharded.get(names.get(id(param), ""), param) for param in group["params"]]
