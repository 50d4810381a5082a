"""The eager twin a trial times before its one-off work (a compile, cuDNN's search, its kernels' autotuning), and the
early stop it allows."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import torch
from pythonpath import TESTS, child_env
from torch.nn import functional as F

from autotune import knobs, workloads
from autotune.jobspec import Pruning, TrialSpec
from autotune.results import Status
from autotune.trial.eagerprobe import PROBE_STEPS, cannot_win, eager_twin_throughput
from autotune.trial.job import run_trial
from autotune.trial.trainstep import TrainStep

TINY = "tests.trial_workloads:tiny_mlp"


def _compiled_step(lr: float = 0.1) -> tuple[TrainStep, torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    wrapped, ctx = knobs.apply(model, optimizer, knobs.Knobs(compile_mode="default"), "cpu")
    batches = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(2)]
    workload = workloads.Workload(model, lambda n, d: batches[0], F.cross_entropy)
    return TrainStep(workload, wrapped, ctx, optimizer, lambda i: batches[i % 2]), model, optimizer


def test_the_probe_runs_the_eager_module_and_leaves_the_weights_and_rates_as_they_were() -> None:
    step, model, optimizer = _compiled_step()
    before = [p.detach().clone() for p in model.parameters()]
    throughput = eager_twin_throughput(step, items=4, device=torch.device("cpu"))
    assert throughput is not None and throughput > 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))  # learning rate 0
    assert optimizer.param_groups[0]["lr"] == 0.1
    assert optimizer.state[next(model.parameters())]["step"] == PROBE_STEPS  # the steps did run
    assert step.losses == []  # the compiled step's own record (its first loss is checked) is untouched


class _SeesCudnnSearch(torch.nn.Module):
    """A linear layer that notes, at each call, whether cuDNN would search for algorithms."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 3)
        self.searching: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.searching.append(bool(torch.backends.cudnn.benchmark))
        return self.linear(x)


def test_an_eager_model_is_probed_as_it_is_without_cudnn_search_and_the_flag_comes_back() -> None:
    model = _SeesCudnnSearch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    batch = (torch.randn(4, 8), torch.randint(0, 3, (4,)))
    workload = workloads.Workload(model, lambda n, d: batch, F.cross_entropy)
    ctx = knobs.apply(model, optimizer, knobs.Knobs(), "cpu")[1]
    step = TrainStep(workload, model, ctx, optimizer, lambda i: batch)
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True  # what cudnn_benchmark=true set for the trial
    try:
        assert eager_twin_throughput(step, items=4, device=torch.device("cpu")) is not None
        assert torch.backends.cudnn.benchmark is True  # the trial's own setting, back for its first steps
    finally:
        torch.backends.cudnn.benchmark = saved
    assert model.searching and not any(model.searching)  # heuristics only while the probe ran


def test_cannot_win_only_when_even_the_largest_gain_stays_under_the_bound() -> None:
    assert cannot_win(100.0, 1.5, 151.0)
    assert not cannot_win(100.0, 1.5, 150.0)


def test_a_compiled_trial_that_cannot_reach_the_bound_stops_before_compiling() -> None:
    spec = TrialSpec(TINY, {"compile_mode": "default"}, "tiny", "cpu", pruning=Pruning(below=1e12, compile_gain=1.5))
    result = run_trial(spec)
    assert result.status is Status.PRUNED
    assert result.reason is not None and result.reason.startswith("before compiling: eager ")
    eager = result.metrics["eager_probe_throughput"]
    assert result.metrics["pruned_before_compile"] == 1.0 and result.metrics["compile_s"] == 0.0
    assert result.metrics["throughput"] == eager * 1.5  # the most it could reach: what it was pruned on


def test_an_eager_trial_without_one_off_work_is_never_probed() -> None:
    # cudnn_benchmark does nothing on a CPU: no search to spare, so no probe either
    params = {"compile_mode": "none", "cudnn_benchmark": True}
    eager_spec = TrialSpec(TINY, params, "tiny", "cpu", pruning=Pruning(below=1e12, compile_gain=9))
    eager = run_trial(eager_spec)
    assert eager.status is Status.PRUNED and eager.reason is not None and eager.reason.startswith("warm-up ")
    assert "eager_probe_throughput" not in eager.metrics


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_eager_gpu_trial_that_asks_for_cudnn_search_stops_before_it() -> None:
    params = {"compile_mode": "none", "cudnn_benchmark": True, "memory_format": "channels_last"}
    spec = TrialSpec("resnet50", params, "tiny", "cuda", pruning=Pruning(below=1e12, compile_gain=1.5))
    result = run_trial(spec)
    assert result.status is Status.PRUNED
    assert result.reason is not None and result.reason.startswith("before cuDNN's algorithm search: eager ")
    assert result.metrics["throughput"] == result.metrics["eager_probe_throughput"] * 1.5


KERNEL_PROBE = """
import json, sys, torch
import user_kernels as uk
from autotune.jobspec import Pruning, TrialSpec
from autotune.trial.job import run_trial

below = float(sys.argv[1]) if sys.argv[1] != "none" else None
pruning = Pruning(below=below, compile_gain=1.5 if below else None)
result = run_trial(TrialSpec("user_kernels:last_wins_mlp", {"compile_mode": "none"}, "tiny", "cpu", pruning=pruning))
print(json.dumps({"status": result.status.value, "reason": result.reason, "metrics": result.metrics,
                  "cache": len(uk.last_wins_add.cache), "block": uk.LAST_BLOCK[0]}))
"""


def _kernel_trial(below: str) -> dict[str, Any]:
    """An eager trial of a workload whose Triton kernel autotunes (its last config always wins), in Triton's CPU
    interpreter, pruned on ``below`` (``none``: no bound yet)."""
    env = child_env(TESTS / "kernels", TESTS, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", KERNEL_PROBE, below], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_an_eager_trial_whose_kernels_would_autotune_stops_before_they_do() -> None:
    pruned = _kernel_trial("1e12")
    assert pruned["status"] == "pruned", pruned["reason"]
    assert pruned["reason"].startswith("before the kernels' autotuning: eager ")
    probe = pruned["metrics"]["eager_probe_throughput"]
    assert pruned["metrics"]["throughput"] == probe * 1.5
    assert pruned["cache"] == 0 and pruned["block"] == 16  # the kernel ran its first config and never benchmarked


def test_an_eager_trial_whose_kernels_autotune_is_probed_on_first_configs_then_autotunes() -> None:
    measured = _kernel_trial("none")
    assert measured["status"] == "ok", measured["reason"]
    assert measured["metrics"]["eager_probe_throughput"] > 0  # evidence of what the autotuning gained
    assert measured["cache"] == 1 and measured["block"] == 64  # the trial's own steps benchmarked: the last won
