"""What a data-parallel trial's ranks must decide together: when the warm-up ends and how many steps are timed.

Every rank runs the same stages, and every step of theirs meets the others' in the gradients' all-reduce; a rank
that ended its warm-up one step earlier than another would leave that one waiting in a collective that never comes.
So each rank's own answer (its steps settled, its step count) is reduced over the ranks, once per warm-up step and
once for the timed window: a few bytes, outside the timed steps. In a process without torch.distributed, or with
one process, each answer is its own.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from autotune.knobs.data_parallel import world_size

__all__ = ["largest", "warm_up_ends"]


def warm_up_ends(settled: bool, out_of_time: bool) -> bool:
    """Whether the warm-up ends on every rank: all of them settled, or one of them out of its warm-up time."""
    if world_size() == 1:
        return settled or out_of_time
    flags = torch.tensor([int(settled), int(not out_of_time)], device=_device())
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    all_settled, none_out_of_time = (bool(flag) for flag in flags.tolist())
    return all_settled or not none_out_of_time


def largest(count: int) -> int:
    """The largest of the ranks' ``count``: how many steps each of them times."""
    if world_size() == 1:
        return count
    value = torch.tensor([count], device=_device())
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return int(value.item())


def _device() -> torch.device:
    """Where a collective's tensor lives: NCCL's on the rank's GPU, gloo's on the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
