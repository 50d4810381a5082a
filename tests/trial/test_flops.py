"""Model FLOPs of a training step, counted on fake meta tensors: exact hand counts, and nothing touched."""

from __future__ import annotations

import torch
from flop_models import CPU, ReadsBack, mlp_workload
from torch.nn import functional as F

from autotune.trial.flops import FlopCount, count_step_flops, rate_metrics
from autotune.workloads import Workload, gpt2


def test_a_linear_model_counts_what_its_matmuls_do_by_hand() -> None:
    work, batch = mlp_workload(batch=8)
    # Forward: 2 FLOPs per multiply-add, batch x in x out per layer. Backward: the weight's gradient (as much again)
    # for both layers, the input's gradient only for the second (the batch needs none): 6 and 4 x batch x weights.
    first, second = 8 * 32 * 64, 8 * 64 * 10
    assert count_step_flops(work, batch) == FlopCount(4.0 * first + 6.0 * second)


def test_the_count_scales_with_the_batch_it_is_given() -> None:
    work, small = mlp_workload(batch=4)
    _, large = mlp_workload(batch=12)
    small_flops, large_flops = count_step_flops(work, small).flops, count_step_flops(work, large).flops
    assert small_flops is not None and large_flops == 3 * small_flops


def test_the_model_is_left_as_it_was() -> None:
    work, batch = mlp_workload()
    before = {name: p.detach().clone() for name, p in work.model.named_parameters()}
    rng = torch.get_rng_state()
    assert count_step_flops(work, batch).flops
    assert all(p.grad is None and p.device == CPU for p in work.model.parameters())
    assert all(torch.equal(before[name], p) for name, p in work.model.named_parameters())
    assert torch.equal(rng, torch.get_rng_state())


def test_a_workload_with_its_own_step_is_not_counted() -> None:
    work, batch = mlp_workload()
    work.train_step = lambda model, batch, ctx: torch.zeros(())
    assert count_step_flops(work, batch) == FlopCount(None, "the workload's own train_step is not counted")


def test_a_model_that_cannot_run_on_fake_tensors_says_why() -> None:
    batch = (torch.randn(3, 4), torch.randint(0, 2, (3,)))
    work = Workload(ReadsBack(), lambda size, device: batch, F.cross_entropy)
    count = count_step_flops(work, batch)
    assert count.flops is None and count.reason is not None and count.reason.startswith("DataDependentOutputException")


def test_rate_metrics_on_a_known_gpu_a_cpu_and_without_a_count() -> None:
    count = FlopCount(494.75e12)  # half a second at the H200's dense bf16 peak
    on_h200 = rate_metrics(count, 1000.0, "NVIDIA H200", "bf16")
    assert on_h200 == {
        "model_flops_per_step": 494.75e12, "tflops": 494.75, "mfu": 0.5, "peak_tflops": 989.5, "peak_precision": "bf16"
    }  # fmt: skip
    assert rate_metrics(count, 1000.0, None, "bf16") == {"model_flops_per_step": 494.75e12, "tflops": 494.75}
    assert rate_metrics(FlopCount(None, "why"), 1000.0, "NVIDIA H200", "bf16") == {"flops_not_counted": "why"}


def test_autotunes_triton_kernels_count_as_the_torch_ops_they_replace() -> None:
    # No Triton kernel runs on the meta device: the fused LM head counts as the logits' matmuls and the Triton
    # LayerNorm as torch's, so a step with them counts what the same step with torch's head and norm does.
    counts = []
    for norm, head in (("torch", "torch"), ("triton", "fused")):
        work = gpt2.build("tiny", norm=norm, head=head)
        torch.manual_seed(0)
        assert work.make_batch is not None
        counts.append(count_step_flops(work, work.make_batch(4, CPU)))
    assert counts[0].flops and counts[1] == counts[0]
