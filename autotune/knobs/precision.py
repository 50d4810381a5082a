"""The precision knob: the number format a training step computes in.

- ``default``: PyTorch's own defaults, untouched (fp32 weights; cuDNN convolutions may use TF32,
  matmuls do not);
- ``fp32``: strict IEEE fp32, TF32 off for matmuls and cuDNN;
- ``tf32``: TF32 on for matmuls and cuDNN;
- ``bf16`` / ``fp16``: fp32 weights with autocast; fp16 adds a gradient scaler.

The TF32 flags that ``fp32`` and ``tf32`` set are torch's backend flags, set with the others in
:mod:`autotune.knobs.backends`; here are autocast and the gradient scaler, which the step context carries.
"""

from __future__ import annotations

import torch

from autotune.errors import InvalidCombination
from autotune.knobs.spec import KnobSpec

__all__ = ["AUTOCAST_DTYPES", "PRECISION", "PRECISIONS", "autocast_dtype", "check", "grad_scaler"]

PRECISIONS = ("default", "fp32", "tf32", "bf16", "fp16")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

PRECISION = KnobSpec("precision", str, PRECISIONS, "numeric precision of the training step")


def check(precision: str, device_type: str) -> None:
    """Raise :class:`InvalidCombination` for a precision this device cannot compute in."""
    if device_type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise InvalidCombination("precision=bf16 needs a GPU with bf16 support (Ampere or newer)")


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The dtype the forward pass autocasts to; None where the precision computes without autocast."""
    return AUTOCAST_DTYPES.get(precision)


def grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler | None:
    """fp16's gradient scaler (its small range would flush gradients to zero); None for every other precision."""
    return torch.amp.GradScaler(device_type) if precision == "fp16" else None
