"""The attention knob: the SDPA kernel pinned for the step's forward and backward, the setting before it restored, and
a kernel that cannot run an invalid trial in a real trial process."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from aten_ops import AtenOps
from torch.nn import functional as F
from trial_workloads import AttentionStack, attention_batch

from autotune.knobs.applying import apply
from autotune.knobs.registry import Knobs
from autotune.measurement import Status
from autotune.trial.job import run_trial
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner

_CPU_FLASH = "aten._scaled_dot_product_flash_attention_for_cpu"  # the CPU's fused kernel, forward and backward


def _sdpa_flags() -> dict[str, bool]:
    cuda = torch.backends.cuda
    return {
        "flash": cuda.flash_sdp_enabled(),
        "efficient": cuda.mem_efficient_sdp_enabled(),
        "cudnn": cuda.cudnn_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
    }


def _step_ops(knobs: Knobs) -> tuple[set[str], set[str]]:
    """The ops of one training step's forward and of its backward, under ``knobs``."""
    torch.manual_seed(0)
    model, ctx = apply(AttentionStack(), None, knobs, "cpu")
    inputs, targets = attention_batch(4, torch.device("cpu"))
    forward, backward = AtenOps(), AtenOps()
    with ctx.autocast(), forward:
        loss = F.cross_entropy(model(inputs), targets)
    with backward:
        ctx.backward(loss)
    return forward.names, backward.names


def test_the_pinned_kernel_runs_forward_and_backward() -> None:
    forward, _ = _step_ops(Knobs(attention_backend="flash"))
    assert _CPU_FLASH in forward
    forward, backward = _step_ops(Knobs(attention_backend="math"))
    assert _CPU_FLASH not in forward and "aten.bmm" in forward
    # auto picks the fused kernel here; pinned to math, the checkpointed blocks' forward run again in the backward
    # stays on math too
    forward, _ = _step_ops(Knobs())
    assert _CPU_FLASH in forward
    _, backward = _step_ops(Knobs(attention_backend="math", activation_checkpointing="full"))
    assert "aten.bmm" in backward and _CPU_FLASH not in backward


def test_the_setting_before_the_step_is_restored_after_it() -> None:
    _, ctx = apply(AttentionStack(), None, Knobs(attention_backend="math"), "cpu")
    torch.backends.cuda.enable_flash_sdp(False)  # a user's own setting, not PyTorch's default
    try:
        before = _sdpa_flags()
        with ctx.autocast():
            assert _sdpa_flags() == {"flash": False, "efficient": False, "cudnn": False, "math": True}
        assert _sdpa_flags() == before
        loss = F.cross_entropy(AttentionStack()(attention_batch(2, torch.device("cpu"))[0]), torch.zeros(2).long())
        ctx.backward(loss)
        assert _sdpa_flags() == before
    finally:
        torch.backends.cuda.enable_flash_sdp(True)


def test_math_attention_trains_on_a_cpu() -> None:
    result = run_trial(TrialSpec("trial_workloads:tiny_attention", {"attention_backend": "math"}, "tiny", "cpu"))
    assert result.status is Status.OK, result.reason
    assert result.params["attention_backend"] == "math" and result.metrics["throughput"] > 0


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_a_kernel_that_cannot_run_is_an_invalid_trial(backend: str) -> None:
    spec = TrialSpec("trial_workloads:tiny_attention", {"attention_backend": backend}, "tiny", "cpu")
    result = TrialRunner(compiles=False).run(spec, timeout_s=120)
    assert result.status is Status.INVALID, result.reason
    assert result.reason == (
        "RuntimeError: No viable backend for scaled_dot_product_attention was found. "
        "This is likely due to turning off both the math kernel and the fused kernels."
    )
    after = TrialRunner(compiles=False).run(TrialSpec("trial_workloads:tiny_mlp", {}, "tiny", "cpu"), timeout_s=120)
    assert after.status is Status.OK, after.reason


# In a process of its own, as a trial: flash pinned for key/value heads fewer than the query's (no enable_gqa),
# which PyTorch refuses after warning why; then a warning of another kind.
_REFUSED = """
import warnings
import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from autotune.knobs.attention import keep_refusals, refusals
from autotune.trial.failures import classify
keep_refusals()
q, kv = torch.randn(2, 4, 16, 8), torch.randn(2, 2, 16, 8)
try:
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, kv, kv)
except RuntimeError as exc:
    status, reason = classify(exc)
    print(status.value, "|", reason)
warnings.warn("a warning of the model's own")
"""


def test_a_refused_kernel_says_why_in_the_trials_line_not_on_the_console() -> None:
    done = subprocess.run([sys.executable, "-c", _REFUSED], capture_output=True, text=True, timeout=120, check=True)
    status, reason = done.stdout.strip().split(" | ")
    assert status == "invalid"  # a CPU says "No available kernel.  Aborting execution." (two spaces): still invalid
    assert reason.startswith("RuntimeError: No available kernel.")
    assert reason.endswith(
        "(For dense input, both fused kernels require query, key and value to have the same num_heads)"
    )
    assert "sdp_utils" not in done.stderr and "num_heads" not in done.stderr  # kept for the line, not printed
    assert "a warning of the model's own" in done.stderr  # other warnings show as before


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["flash", "cudnn", "efficient"])
def test_gpu_kernels_are_measured_or_refused_never_crash(backend: str) -> None:
    spec = TrialSpec(
        "trial_workloads:tiny_attention", {"attention_backend": backend, "precision": "bf16"}, "tiny", "cuda"
    )
    result = TrialRunner(compiles=False).run(spec, timeout_s=300)
    assert result.status in (Status.OK, Status.NUMERICS, Status.INVALID), result.reason
    if result.status is Status.OK:  # the first loss was checked against the fp32 reference: the numerics guard ran
        assert "loss_rel_error" in result.metrics
