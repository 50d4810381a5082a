"""The eager twin a trial times before its one-off work (a compile, cuDNN's search, its kernels' autotuning), and the
early stop it allows."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
import torch
from pythonpath import TESTS, child_env
from torch.nn import functional as F

from autotune import knobs, workloads
from autotune.measurement import Status
from autotune.trial.eagerprobe import PROBE_STEPS, EagerProbe, ceiling, eager_twin
from autotune.trial.job import run_trial
from autotune.trial.pruning import EAGER_ONE_OFF_MS, PROBE_SPREAD, Pruning
from autotune.trial.trainstep import TrainStep
from autotune.trial.trialspec import TrialSpec

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
    probe = eager_twin(step, items=4, device=torch.device("cpu"))
    assert probe is not None and probe.throughput > 0
    assert probe.autotuning_share is None  # no kernel of its would autotune
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
        assert eager_twin(step, items=4, device=torch.device("cpu")) is not None
        assert torch.backends.cudnn.benchmark is True  # the trial's own setting, back for its first steps
    finally:
        torch.backends.cudnn.benchmark = saved
    assert model.searching and not any(model.searching)  # heuristics only while the probe ran


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
from autotune.trial.pruning import PROBE_SPREAD, Pruning
from autotune.trial.trialspec import TrialSpec
from autotune.trial.job import run_trial

below = float(sys.argv[1]) if sys.argv[1] != "none" else None
gain = None if sys.argv[2] == "none" else float(sys.argv[2])
pruning = Pruning(below=below, compile_gain=gain)
args = json.loads(sys.argv[4])
result = run_trial(TrialSpec(sys.argv[3], {"compile_mode": "none"}, "tiny", "cpu", args, pruning=pruning))
print(json.dumps({"status": result.status.value, "reason": result.reason, "metrics": result.metrics,
                  "cache": len(uk.last_wins_add.cache), "block": uk.LAST_BLOCK[0]}))
"""


def _kernel_trial(
    below: str, gain: str = "1.5", workload: str = "user_kernels:last_wins_mlp", **workload_args: Any
) -> dict[str, Any]:
    """An eager trial of a workload whose Triton kernel autotunes (its last config always wins), in Triton's CPU
    interpreter, pruned on ``below`` and the study's ``gain`` (``none``: not known yet)."""
    env = child_env(TESTS / "kernels", TESTS, TRITON_INTERPRET="1")
    gain = gain if below != "none" else "none"
    args = [sys.executable, "-c", KERNEL_PROBE, below, gain, workload, json.dumps(workload_args)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
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


def test_an_eager_trial_whose_kernels_are_a_small_share_of_the_step_stops_on_that_share_alone() -> None:
    # No study evidence yet (no gain learnt): the probe's own share of its steps spent in the kernel bounds what
    # autotuning it can gain (Amdahl), and that bound alone leaves it under the line.
    pruned = _kernel_trial("1e12", gain="none", workload="user_kernels:slow_last_wins_mlp")
    assert pruned["status"] == "pruned", pruned["reason"]
    metrics, reason = pruned["metrics"], pruned["reason"]
    share = metrics["eager_probe_autotuning_share"]
    # The model's own 50 ms wait is outside the kernel, so the share stays well under 1 (counted in, it would be near
    # 1); the kernel runs in Triton's interpreter, though: 0.57 of the probe's steps in a full suite here (2 cores).
    assert 0 < share < 0.9
    assert reason.startswith("before the kernels' autotuning: eager ")
    assert f"the most autotuning can gain where the kernels took {share:.1%} of the probe's steps" in reason
    assert metrics["throughput"] == pytest.approx(metrics["eager_probe_throughput"] * PROBE_SPREAD / (1 - share))
    assert pruned["cache"] == 0 and pruned["block"] == 16  # the kernel ran its first config and never benchmarked
    assert "eager_probe_steps" not in metrics  # a short step: the probe ran all its steps


def test_a_long_step_that_cannot_win_is_pruned_after_two_probe_steps_on_what_they_could_still_say() -> None:
    # Each step waits 0.4 s besides the kernel: the second step less the eager allowance already shows the trial
    # cannot reach the line; it stops there, and its reason and record say it was a ceiling of two steps.
    wait_s = EAGER_ONE_OFF_MS / 1e3 + 0.15
    pruned = _kernel_trial("1e12", gain="none", workload="user_kernels:slow_last_wins_mlp", wait_s=wait_s)
    assert pruned["status"] == "pruned", pruned["reason"]
    metrics, reason = pruned["metrics"], pruned["reason"]
    assert metrics["eager_probe_steps"] == 2
    assert reason.startswith("before the kernels' autotuning: eager at most ")
    assert f"(2 of {PROBE_STEPS} probe steps) x " in reason
    ceiling = metrics["eager_probe_throughput"]
    assert ceiling < 16 / (wait_s - EAGER_ONE_OFF_MS / 1e3)  # batch 16 over the step less the allowance, at most
    share = metrics["eager_probe_autotuning_share"]
    assert metrics["throughput"] == pytest.approx(ceiling * PROBE_SPREAD / (1 - share))
    assert pruned["cache"] == 0


def test_the_ceiling_after_two_steps_keeps_the_kernels_time_whole() -> None:
    # A 600 ms second step, 50 ms of it in the kernels: later steps take at least 350 ms, the kernels' 50 ms among
    # them; were the kernels free, 300 ms. So the ceiling times its share's bound is items x PROBE_SPREAD / 0.3 s.
    at_most = ceiling(items=30, second_ms=600.0, kernel_ms=50.0)
    assert at_most.steps == 2 and at_most.throughput == pytest.approx(30 / 0.35)
    bound = Pruning(below=1.0).one_off_gain(at_most.autotuning_share)
    assert bound is not None and at_most.throughput * bound[0] == pytest.approx(30 * PROBE_SPREAD / 0.3)
    assert ceiling(30, 600.0, 450.0).autotuning_share == 1.0  # kernels that may be all of the rest: no bound
    assert ceiling(30, 600.0, None).autotuning_share is None  # no kernel that would autotune ran


class _Slow(torch.nn.Module):
    """A linear layer whose forward waits ``wait_s``: a long step, as fp32 GPT-2's 1.1 s at batch 64."""

    def __init__(self, wait_s: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 3)
        self.wait_s = wait_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.wait_s)
        return self.linear(x)


def _slow_step(wait_s: float) -> tuple[TrainStep, torch.nn.Module, torch.optim.Optimizer]:
    model = _Slow(wait_s)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    batch = (torch.randn(4, 8), torch.randint(0, 3, (4,)))
    workload = workloads.Workload(model, lambda n, d: batch, F.cross_entropy)
    ctx = knobs.apply(model, optimizer, knobs.Knobs(), "cpu")[1]
    return TrainStep(workload, model, ctx, optimizer, lambda i: batch), model, optimizer


def test_a_long_probe_that_cannot_win_after_its_second_step_stops_there() -> None:
    step, model, optimizer = _slow_step(EAGER_ONE_OFF_MS / 1e3 + 0.1)
    asked: list[EagerProbe] = []

    def cannot_win_yet(at_most: EagerProbe) -> bool:
        asked.append(at_most)
        return True

    probe = eager_twin(step, items=4, device=torch.device("cpu"), cannot_win_yet=cannot_win_yet)
    assert probe is not None and len(asked) == 1
    assert optimizer.state[next(model.parameters())]["step"] == 2  # two steps, not PROBE_STEPS
    # What it was asked about is what it says: its second step less the eager allowance, a ceiling of two steps.
    assert probe is asked[0] and probe.steps == 2 and probe.metrics()["eager_probe_steps"] == 2
    assert probe.throughput > 4 / (EAGER_ONE_OFF_MS / 1e3 + 0.1)  # over 4 items in the 0.35 s step's own time


def test_a_probe_that_may_still_win_or_whose_steps_are_short_runs_all_its_steps() -> None:
    step, model, optimizer = _slow_step(EAGER_ONE_OFF_MS / 1e3 + 0.1)
    assert eager_twin(step, items=4, device=torch.device("cpu"), cannot_win_yet=lambda at_most: False) is not None
    assert optimizer.state[next(model.parameters())]["step"] == PROBE_STEPS
    short, model, optimizer = _slow_step(0.0)  # a short step less the allowance bounds nothing: never asked
    asked: list[EagerProbe] = []

    def may_win(at_most: EagerProbe) -> bool:
        asked.append(at_most)
        return False

    assert eager_twin(short, items=4, device=torch.device("cpu"), cannot_win_yet=may_win) is not None
    assert not asked and optimizer.state[next(model.parameters())]["step"] == PROBE_STEPS
