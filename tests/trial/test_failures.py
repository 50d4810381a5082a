"""How an exception raised in a trial becomes its status: an attention kernel that cannot run is ``invalid``, eager or
compiled, with PyTorch's own one-line reason."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.measurement import Status
from autotune.trial.failures import classify

_NO_KERNEL = "RuntimeError: No viable backend for scaled_dot_product_attention was found."


def _attend(x: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(x, x, x, is_causal=True)


@pytest.mark.parametrize("compiled", [False, True])
def test_an_attention_kernel_that_cannot_run_is_invalid(compiled: bool) -> None:
    attend = torch.compile(_attend) if compiled else _attend
    with pytest.raises(RuntimeError) as raised, sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):  # a GPU's kernel alone
        attend(torch.randn(1, 2, 4, 8))
    status, reason = classify(raised.value)
    assert status is Status.INVALID
    assert reason.startswith(_NO_KERNEL) and len(reason.splitlines()) == 1


def test_other_runtime_errors_stay_crashes() -> None:
    assert classify(RuntimeError("shape mismatch in viable code")) == (
        Status.CRASH,
        "RuntimeError: shape mismatch in viable code",
    )
