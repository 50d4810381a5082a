"""A pinned ``triton.autotune`` kernel inside ``torch.compile`` on a GPU: correct, one graph, nothing benchmarked.

``fullgraph=True`` turns any graph break into an error, so a passing compile is the proof that
dynamo traced the user kernel in place. Each compile mode runs in a fresh process: the kernel's
launches, its benchmarking and inductor's caches must not leak between modes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pythonpath import child_env

HERE = Path(__file__).resolve().parent

_SCRIPT = """
import json, sys, torch, triton
from triton.runtime.autotuner import Autotuner
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
from autotune.kernels.pinning import pin
import user_kernels as uk

# Benchmarking of configs, by Triton's autotuner (eager) or by inductor's (its own launcher; it
# also tunes the kernels it generates, such as the fused relu * 1.5 below): kernel names recorded.
benched = []
def kernel_name(fn):
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "?")
def counting(cls, name):
    original = getattr(cls, name)
    def wrapper(self, *args, **kwargs):
        benched.append(kernel_name(self.fn))
        return original(self, *args, **kwargs)
    setattr(cls, name, wrapper)
counting(Autotuner, "_bench")
counting(CachingAutotuner, "benchmark_all_configs")

mode, pinned_block = sys.argv[1], int(sys.argv[2])
if pinned_block:
    config = next(c for c in uk.scaled_add.configs if c.kwargs["BLOCK_SIZE"] == pinned_block)
    pin(uk.scaled_add, config)

def step(x, y):
    out = torch.empty_like(x)
    meta = torch.zeros(1, dtype=torch.int32, device=x.device)
    n = x.numel()
    uk.scaled_add[lambda m: (triton.cdiv(n, m["BLOCK_SIZE"]),)](x, y, out, meta, n)
    return out.relu() * 1.5, meta

compiled = torch.compile(step, mode=mode, fullgraph=True)
x, y = torch.randn(4099, device="cuda"), torch.randn(4099, device="cuda")
out, meta = compiled(x, y)
out, meta = compiled(x, y)
torch.cuda.synchronize()
print(json.dumps({
    "correct": bool(torch.allclose(out, (2 * x + y).relu() * 1.5, atol=1e-5)),
    "block": int(meta.item()),
    "benchmarked": "_scaled_add" in benched,
    "others": sorted(set(benched) - {"_scaled_add"}),
}))
"""


def _run(mode: str, block: int) -> dict[str, Any]:
    env = child_env(HERE)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode, str(block)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["default", "max-autotune-no-cudagraphs"])
def test_a_pinned_kernel_runs_its_config_in_one_compiled_graph_without_benchmarking(mode: str) -> None:
    found = _run(mode, block=32)
    assert (found["correct"], found["block"], found["benchmarked"]) == (True, 32, False), found


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_unpinned_the_same_compiled_kernel_benchmarks_its_configs() -> None:
    """The control: the counter above does see benchmarking when the kernel is not pinned."""
    found = _run("default", block=0)
    assert found["correct"] and found["benchmarked"], found
