"""Compile time and step time of one training step, by what is compiled (``compile_scope``).

    python3 scripts/compile_scope_bench.py WORKLOAD VARIANT

WORKLOAD is ``gpt2`` or ``resnet50`` (the ``full`` preset, default batch, bf16 autocast, fused AdamW;
ResNet-50 channels_last). VARIANT is what is compiled:

- ``eager``: nothing;
- ``model``: ``torch.compile(model)`` (``compile_scope=model``);
- ``blocks``: ``block.compile()`` for each block :func:`autotune.knobs.regional.find_blocks` gives
  (``compile_scope=blocks``: GPT-2's 12 transformer blocks, ResNet-50's stage-3 bottlenecks ``stages.8 .. stages.12``);
- ``every-block``: ``block.compile()`` for every bottleneck of ResNet-50 (16, in 8 different shapes);
- ``nested``: the whole model compiled, each GPT-2 block's forward a ``torch.compiler.nested_compile_region``.

It prints the wall time of the first 3 steps (the compile happens there) and the median of 20 steps after 5 more,
timed with CUDA events. Run each variant in a fresh process with empty caches, e.g.::

    for v in eager model blocks nested; do d=$(mktemp -d); TORCHINDUCTOR_CACHE_DIR=$d/i TRITON_CACHE_DIR=$d/t \\
        PYTHONPATH=$PWD python3 scripts/compile_scope_bench.py gpt2 $v; done
"""

from __future__ import annotations

import sys
import time
import types

import torch

from autotune.knobs.regional import find_blocks
from autotune.workloads import gpt2, resnet50


def main(workload_name: str, variant: str) -> None:
    device = torch.device("cuda")
    workload = (gpt2 if workload_name == "gpt2" else resnet50).build("full")
    assert workload.make_batch is not None and workload.loss_fn is not None
    model = workload.model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    batches = [workload.make_batch(workload.default_batch_size, device) for _ in range(2)]
    if workload_name == "resnet50":
        model = model.to(memory_format=torch.channels_last)
        batches = [(x.contiguous(memory_format=torch.channels_last), y) for x, y in batches]
    if variant == "model":
        model = torch.compile(model)
    elif variant == "blocks":
        for block in find_blocks(model).modules:
            block.compile()
    elif variant == "every-block":
        for block in model.stages:
            block.compile()
    elif variant == "nested":
        blocks = find_blocks(model).modules
        region = torch.compiler.nested_compile_region(type(blocks[0]).forward)
        for block in blocks:
            block.forward = types.MethodType(region, block)
        model = torch.compile(model)

    def step(index: int) -> None:
        inputs, targets = batches[index % 2]
        with torch.autocast("cuda", torch.bfloat16):
            loss = workload.loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    started = time.perf_counter()
    for index in range(3):
        step(index)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - started
    for index in range(5):
        step(index)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for index in range(20):
        begin.record()
        step(index)
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end))
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    print(f"{workload_name} {variant}: first 3 steps {first_s:.1f} s, step {sorted(times)[10]:.2f} ms, {graphs} graphs")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
