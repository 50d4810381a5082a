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
(:data:`CANNOT_RUN`), which the trial records as ``invalid`` (:mod:`autotune.trial.failures`), with PyTorch's reasons
for refusing each kernel (:func:`keep_refusals`) in its one line. A model that calls no SDPA is unaffected.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping
from typing import Any, TextIO

from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.knobs.spec import KnobSpec

__all__ = [
    "ATTENTION_BACKEND",
    "ATTENTION_BACKENDS",
    "CANNOT_RUN",
    "backend_context",
    "cannot_run",
    "keep_refusals",
    "kernel_setting",
    "refusals",
]

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
# Where those warnings come from (aten's transformers/sdp_utils*.cpp, named in each one's "Triggered internally at"),
# and the ones that give no reason: a kernel's heading, and the pin itself disabling the other kernels.
_SDP_SOURCE = "sdp_utils"
_NOT_REASONS = ("not used because", "has been runtime disabled")
_refused: list[str] = []  # this process's reasons, in the order PyTorch gave them


def keep_refusals() -> None:
    """In this process (a trial's, a compile ahead's): PyTorch's warnings on refusing an attention kernel are kept
    for :func:`refusals` instead of printed, other warnings shown as before. On an H200 a llama sweep printed six
    such lines for every trial whose pinned kernel could not run, while its record said only "No available kernel"."""
    shown = warnings.showwarning
    if getattr(shown, "keeps_refusals", False):
        return

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = str(message)
        if _SDP_SOURCE not in text:
            shown(message, category, filename, lineno, file, line)
            return
        reason = text.split(" (Triggered internally at")[0].split(". ")[0].strip().rstrip(".")
        if reason and not any(part in reason for part in _NOT_REASONS) and reason not in _refused:
            _refused.append(reason)

    show.keeps_refusals = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def refusals() -> list[str]:
    """PyTorch's reasons, so far in this process, for refusing the attention kernels it was asked for (after
    :func:`keep_refusals`): e.g. "Flash Attention does not support non-null attn_mask"."""
    return list(_refused)


def cannot_run(reason: str | None) -> bool:
    """Whether a failed trial's reason is PyTorch saying the pinned attention kernel cannot run its calls."""
    said = " ".join(reason.lower().split()) if reason is not None else ""  # a CPU's says "kernel.  Aborting"
    return any(text in said for text in CANNOT_RUN)


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
