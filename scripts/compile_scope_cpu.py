"""Compile time of one training step, ``compile_scope=model`` against ``blocks``, on a model of identical blocks.

A CPU benchmark, not a test (its figures are timings): ``python3 scripts/compile_scope_cpu.py [BLOCKS]`` prints one
JSON line: for each scope, the wall and CPU seconds (this process and the compiler processes it started) of the first
two training steps, which is where the compile happens, how many blocks were compiled, and blocks' CPU seconds over
the whole model's. It runs alone in a fresh process with a fresh Inductor cache folder and one compile
thread, so every C++ build is a child process whose CPU time counts. Inductor is first warmed up on an unrelated
tiny step: its one-off start-up (imports, the CPU's vector ISA check, the C++ prelude) is paid whatever the scope.
The scopes compile models of different widths, so no kernel source of one serves the other from the cache.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time

import torch
from torch import nn
from torch.nn import functional as F

from autotune import knobs


class Block(nn.Module):
    """A pre-norm MLP block with a residual: a transformer layer's shape without the attention."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Stack(nn.Module):
    """``depth`` identical blocks between an input and an output layer."""

    def __init__(self, depth: int, width: int) -> None:
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.out = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _first_steps(model: nn.Module, scope: str, width: int) -> dict[str, float]:
    """Wall and CPU seconds of the first two training steps of ``model`` with ``compile_scope=scope``."""
    optimizer = torch.optim.AdamW(model.parameters())
    model, ctx = knobs.apply(model, optimizer, knobs.Knobs(compile_mode="default", compile_scope=scope), "cpu")
    x, y = torch.randn(8, width), torch.randint(0, 4, (8,))
    wall, cpu = time.perf_counter(), _cpu_s()
    for _ in range(2):
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    blocks = len(ctx.blocks) if ctx.blocks is not None else 0
    return {"wall_s": time.perf_counter() - wall, "cpu_s": _cpu_s() - cpu, "compiled_blocks": blocks}


def main(depth: int) -> None:
    torch.manual_seed(0)
    _first_steps(nn.Sequential(nn.Linear(4, 4)), "model", 4)  # Inductor's one-off start-up
    figures = {"model": _first_steps(Stack(depth, 16), "model", 16)}
    figures["blocks"] = _first_steps(Stack(depth, 24), "blocks", 24)
    ratio = figures["blocks"]["cpu_s"] / figures["model"]["cpu_s"]
    print(json.dumps({"depth": depth, **figures, "blocks_over_model_cpu": round(ratio, 3)}))


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
