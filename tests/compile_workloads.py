"""A model whose compile is worth shipping, as a trial workload and in a production loop.

``python compile_workloads.py TUNED.yaml`` is that production loop (tests/tuned/test_compile_artifacts.py runs it in
fresh processes): the two lines of the README, then the first steps, and one JSON line with what they took.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import torch
from torch.nn import functional as F

from autotune.workloads import Workload

# Identical Linear+ReLU blocks: much graph for AOTAutograd and Inductor to trace, lower and generate code for
# (what the artifacts save), few distinct C++ kernels (what a CPU builds again with or without them).
BLOCKS = 128
WIDTH = 32
BATCH = 32
FIRST_STEPS = 3


def deep_mlp_model(blocks: int = BLOCKS, width: int = WIDTH) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, WIDTH, device=device), torch.randint(0, 10, (batch_size,), device=device)


def deep_mlp(preset: str = "tiny") -> Workload:
    """The trial workload: its compile from empty caches took 23-36 s on the shared 2-core development machine."""
    return Workload(deep_mlp_model(), make_batch, F.cross_entropy, default_batch_size=BATCH)


def production_loop(tuned: str) -> dict[str, object]:
    """Load the tuned config, apply it, run the first steps; what they took and what apply() said."""
    import autotune

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = autotune.load(tuned)
        model = deep_mlp_model()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        started = time.perf_counter()
        model, step_ctx = cfg.apply(model, optimizer)  # loads the compile artifacts, if any, before compiling
        applied = time.perf_counter()
        for _ in range(FIRST_STEPS):
            inputs, targets = make_batch(cfg.batch_size or BATCH, torch.device("cpu"))
            with step_ctx.autocast():
                loss = F.cross_entropy(model(inputs), targets)
            step_ctx.backward(loss)
            step_ctx.step()
            step_ctx.zero_grad()
        done = time.perf_counter()
    load = cfg.artifacts_load
    from torch._dynamo.utils import counters

    return {
        "cache_hits": {  # whether the compile found the artifacts' entries in the (otherwise empty) caches
            "fx_graph": counters["inductor"]["fxgraph_cache_hit"],
            "aot_autograd": counters["aot_autograd"]["autograd_cache_hit"],
        },
        "first_steps_s": done - started,  # apply() (the artifacts' load included) and the first steps' compile
        "apply_s": applied - started,
        "loss": float(loss),
        "artifacts_loaded": load.loaded if load is not None else None,
        "artifacts_entries": load.entries if load is not None else None,
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught if "autotune" in w.category.__module__],
    }


if __name__ == "__main__":
    from autotune.errors import AutotuneError

    try:
        print(json.dumps(production_loop(sys.argv[1])))
    except AutotuneError as exc:  # as the CLI says it: one line, exit 2
        print(f"autotune: error: {exc}", file=sys.stderr)
        sys.exit(2)
