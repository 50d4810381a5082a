"""GPT-2 (full) trained by hand the way an expert would set it up, outside autotune's trials: the yardstick a sweep's
winner is compared with (it should come within 2% of the best fused-head configuration measured by hand).

    python3 scripts/hand_gpt2.py BATCH [BATCH ...] [--head torch|fused] [--eager]

For each batch, in this process: bf16 autocast, fused AdamW, ``torch.compile`` (default mode) unless ``--eager``,
the head given (default ``fused``: our Triton linear+cross-entropy). It runs 10 steps to warm up (the compile and the
head's autotuning happen there), then times 50 steps with CUDA events and prints the median step's tokens/s and the
peak memory. Only autotune's workload definition is shared with the trials: model, batch and loss.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from autotune.workloads import gpt2

WARMUP_STEPS = 10
TIMED_STEPS = 50


def measure(batch: int, head: str, compiled: bool) -> None:
    """Train ``batch`` sequences a step and print the median step's throughput."""
    device = torch.device("cuda")
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    workload = gpt2.build("full", head=head)
    assert workload.make_batch is not None and workload.loss_fn is not None
    loss_fn = workload.loss_fn
    model = workload.model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model) if compiled else model
    batches = [workload.make_batch(batch, device) for _ in range(2)]

    def step(index: int) -> None:
        inputs, targets = batches[index % 2]
        with torch.autocast("cuda", torch.bfloat16):
            loss = loss_fn(forward(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    started = time.perf_counter()
    for index in range(WARMUP_STEPS):
        step(index)
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - started
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(TIMED_STEPS)]
    for index, (begin, end) in enumerate(events):
        begin.record()
        step(index)
        end.record()
    torch.cuda.synchronize()
    step_ms = statistics.median(begin.elapsed_time(end) for begin, end in events)
    tokens = batch * workload.items_per_sample
    peak_gib = torch.cuda.max_memory_allocated(device) / 2**30
    mode = "compiled" if compiled else "eager"
    print(
        f"gpt2 bf16 {mode} fused-adamw head={head} batch {batch}: {tokens / (step_ms / 1e3):,.0f} tokens/s"
        f" (median of {TIMED_STEPS} steps, {step_ms:.2f} ms), warm-up {warm_s:.1f} s, peak {peak_gib:.1f} GiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batches", nargs="+", type=int)
    parser.add_argument("--head", choices=gpt2.HEADS, default="fused")
    parser.add_argument("--eager", action="store_true", help="do not compile")
    args = parser.parse_args()
    for batch in args.batches:
        measure(batch, args.head, not args.eager)


if __name__ == "__main__":
    main()
