"""A production training loop written by hand around a tuned config, timed against the figure the sweep recorded.

    python scripts/production_loop.py tuned.yaml [--warmup 10] [--steps 50] [--device auto] [--json]

It does what docs/production.md tells a user to do, and nothing of the trial's own step code: builds the config's
built-in workload (its model, random batches and loss), makes an AdamW optimizer, calls ``cfg.apply(model,
optimizer)``, then runs ``--warmup`` steps (compile included) and times ``--steps`` more as one stretch of wall time,
the device synchronised at both ends only, as a training loop runs. It prints the loop's throughput, the figure in
the file's provenance (``metrics.throughput``) and their ratio. Bad input: one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

import autotune
from autotune import workloads
from autotune.errors import AutotuneError
from autotune.trial.job import resolve_device


def timed_loop(tuned: str, device_name: str, warmup: int, steps: int) -> dict[str, Any]:
    """The hand-written loop over ``tuned``'s workload: its throughput and the recorded one."""
    cfg = autotune.load(tuned)
    device = resolve_device(device_name)
    spec = cfg.workload
    workload = workloads.build(spec["name"], spec.get("preset", "full"), {**spec.get("args", {}), **cfg.params}, device)
    if not isinstance(workload, workloads.Workload) or workload.make_batch is None or workload.loss_fn is None:
        raise AutotuneError(f"{tuned}: workload {spec['name']!r} has no model, random batches and loss to loop over")
    batch_size = cfg.batch_size or workload.default_batch_size
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-4)
    model, step_ctx = cfg.apply(workload.model, optimizer)
    batches = [workload.make_batch(batch_size, device) for _ in range(3)]
    loss_fn = workload.loss_fn

    def train(count: int) -> None:
        for index in range(count):
            inputs, targets = batches[index % len(batches)]
            with step_ctx.autocast():
                loss = loss_fn(model(step_ctx.prepare_inputs(inputs)), targets)
            step_ctx.backward(loss)
            step_ctx.step()
            step_ctx.zero_grad()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    began = time.perf_counter()
    train(warmup)
    sync()
    warmed = time.perf_counter()
    train(steps)
    sync()
    ended = time.perf_counter()
    throughput = workload.items_per_sample * batch_size * steps / (ended - warmed)
    recorded = float(cfg.provenance.get("metrics", {}).get("throughput", float("nan")))
    return {
        "tuned": tuned,
        "knobs": cfg.knobs,
        "batch_size": batch_size,
        "warmup_s": round(warmed - began, 2),
        "steps": steps,
        "throughput": round(throughput, 1),
        "unit": workload.unit,
        "recorded": round(recorded, 1),
        "ratio": round(throughput / recorded, 4),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tuned", help="a tuned config written by autotune export")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--warmup", type=int, default=10, help="steps before the timing (compile included)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        if args.warmup < 1 or args.steps < 1:
            raise AutotuneError(f"--warmup and --steps must be at least 1, got {args.warmup} and {args.steps}")
        found = timed_loop(args.tuned, args.device, args.warmup, args.steps)
    except (AutotuneError, OSError) as exc:
        print(f"production_loop: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(found))
    else:
        print(
            f"{found['throughput']:,.0f} {found['unit']} in the hand-written loop; recorded {found['recorded']:,.0f}: "
            f"{found['ratio']:.1%} ({found['device']}, batch {found['batch_size']}, {found['steps']} steps timed "
            f"after {found['warmup_s']} s of warm-up)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
