"""The attention knob: ``attention_backend``, the kernel ``F.scaled_dot_product_attention`` runs on.

A model that calls ``torch.nn.functional.scaled_dot_product_attention`` (Hugging Face transformers' ``sdpa``
attention included) leaves PyTorch to pick one of its kernels per call; this knob pins one, with
``torch.nn.attention.sdpa_kernel`` around each training step:

- ``auto``: no pin, PyTorch chooses (its default);
- ``flash``: FlashAttention (fp16/bf16 on the GPU; PyTorch has a CPU flash kernel too);
- ``cudnn``: cuDNN's fused attention (GPU);
- ``efficient``: the memory-efficient kernel (xFormers'; GPU);
- ``math``: the composite of matmuls and softmax, which runs everywhere and keeps the whole attention matrix.

The pin is entered by the step context (:meth:`autotune.knobs.stepcontext.StepContext.autocast` for the forward,
``backward`` for the backward, where checkpointed blocks run their forward again), so the trial and a production
loop that uses the step context run the same kernel, and the setting before the step is restored after it. A
backend that cannot run the model's shapes, dtype or device raises a RuntimeError in the step
(:data:`CANNOT_RUN`), which the trial records as ``invalid`` (:mod:`autotune.trial.failures`). A model that calls no
SDPA is unaffected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.knobs.spec import KnobSpec

__all__ = ["ATTENTION_BACKEND", "ATTENTION_BACKENDS", "CANNOT_RUN", "backend_context", "cannot_run", "kernel_setting"]

_BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}
ATTENTION_BACKENDS = ("auto", *_BACKENDS)
ATTENTION_BACKEND = KnobSpec(
    "attention_backend",
    str,
    ATTENTION_BACKENDS,
    "the kernel F.scaled_dot_product_attention runs on (auto: PyTorch chooses)",
)
# What PyTorch says when no allowed SDPA kernel can run a call (aten's attention.cpp; on a GPU each refused kernel's
# reason comes before it as a warning): the configuration cannot run, it did not crash.
CANNOT_RUN = ("no viable backend for scaled_dot_product_attention", "no available kernel. aborting execution")


def cannot_run(reason: str | None) -> bool:
    """Whether a failed trial's reason is PyTorch saying the pinned attention kernel cannot run its calls."""
    return reason is not None and any(text in reason.lower() for text in CANNOT_RUN)


def kernel_setting(params: Mapping[str, Any]) -> tuple[str, str] | None:
    """The pinned attention kernel of ``params`` and the precision its attention computes in, which together decide
    whether it can run a model's calls (flash takes half precision only; efficient and flash no grouped-query heads):
    a setting that failed so once fails so again. None where no kernel is pinned."""
    backend = str(params.get("attention_backend", "auto"))
    if backend == "auto":
        return None
    precision = str(params.get("precision", "default"))
    return backend, precision if precision in ("bf16", "fp16") else "fp32"


def backend_context(backend: str) -> contextlib.AbstractContextManager[Any]:
    """``sdpa_kernel`` pinning ``backend`` for the duration (the previous setting restored after); nothing for
    ``auto``."""
    if backend == "auto":
        return contextlib.nullcontext()
    return sdpa_kernel(_BACKENDS[backend])
