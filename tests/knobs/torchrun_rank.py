"""One rank of a torchrun-style job, for tests/knobs/test_data_parallel.py: the tiny GPT-2 with a tuned config's knobs
applied by ``cfg.apply()`` (given as JSON in argv), two training steps, then what wraps the model printed as JSON.

Run as ``python torchrun_rank.py KNOBS_JSON`` with the environment torchrun sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from autotune import workloads
from autotune.tuned.config import TunedConfig


def described(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What wraps ``model``: DDP's settings, or FSDP's units and whether the parameters (the optimizer's too) are
    the sharded ones."""
    inner = getattr(model, "_orig_mod", model)  # a compiled model's own module
    if isinstance(inner, DistributedDataParallel):
        return {
            "wrapper": "ddp",
            "bucket_cap_mb": inner.bucket_bytes_cap / 2**20,
            "gradient_as_bucket_view": inner.gradient_as_bucket_view,
            "static_graph": inner.static_graph,
        }
    trained = [param for group in optimizer.param_groups for param in group["params"]]
    return {
        "wrapper": "fsdp" if isinstance(inner, FSDPModule) else type(inner).__name__,
        "units": sum(isinstance(module, FSDPModule) for module in inner.modules()),
        "sharded": all(isinstance(param, DTensor) for param in inner.parameters()),
        "optimizer_sharded": {id(param) for param in trained} == {id(param) for param in inner.parameters()},
    }


def main(knobs_json: str) -> None:
    dist.init_process_group("gloo")  # env://, as under torchrun
    torch.manual_seed(0)
    device = torch.device("cpu")
    workload = workloads.build("gpt2", "tiny", {}, device)
    assert isinstance(workload, workloads.Workload) and workload.loss_fn and workload.make_batch
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-4)
    model, ctx = TunedConfig(knobs=json.loads(knobs_json)).apply(workload.model, optimizer)
    inputs, targets = workload.make_batch(2, device)
    for _ in range(2):
        with ctx.autocast():
            loss = workload.loss_fn(model(inputs), targets)
        ctx.backward(loss)
        ctx.step(optimizer)
        optimizer.zero_grad(set_to_none=True)
    print(json.dumps({"rank": dist.get_rank(), **described(model, optimizer), "loss": float(loss)}), flush=True)
    # Every rank at the end before any tears its group down, as torch's docs advise: a rank 0 that destroyed its
    # group (and the store it hosts) while the other was still in its last step once hung past the test's limit.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
