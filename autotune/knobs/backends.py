"""The cuDNN and matmul knobs: torch's process-wide backend flags (``torch.backends.cudnn``,
``torch.backends.cuda.matmul``), with the TF32 setting that ``precision=fp32`` or ``tf32`` implies.

TF32 is set through PyTorch's ``fp32_precision`` API only: mixing it with the legacy ``allow_tf32`` flags is an error
in PyTorch >= 2.9.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from autotune.errors import InvalidCombination
from autotune.knobs.spec import KnobSpec

__all__ = [
    "CUDNN_BENCHMARK",
    "CUDNN_DETERMINISTIC",
    "MATMUL_PRECISION",
    "MATMUL_PRECISIONS",
    "check",
    "set_flags",
    "strict_fp32",
]

MATMUL_PRECISIONS = ("auto", "highest", "high")
# torch.backends.cudnn as the knobs use it: its conv/rnn fp32_precision settings are missing from torch's stubs.
_CUDNN: Any = torch.backends.cudnn
# The fp32 mode of cuDNN and matmuls that a precision sets, and the matmul_precision it implies.
_FP32_MODES = {"fp32": "ieee", "tf32": "tf32"}
_IMPLIED_MATMUL = {"fp32": "highest", "tf32": "high"}

CUDNN_BENCHMARK = KnobSpec("cudnn_benchmark", bool, (True, False), "let cuDNN time its algorithms (None: untouched)")
CUDNN_DETERMINISTIC = KnobSpec("cudnn_deterministic", bool, (True, False), "deterministic cuDNN algorithms only")
MATMUL_PRECISION = KnobSpec("matmul_precision", str, MATMUL_PRECISIONS, "fp32 matmul precision; auto follows precision")


def check(
    cudnn_benchmark: bool | None, cudnn_deterministic: bool | None, precision: str, matmul_precision: str
) -> None:
    """Raise :class:`InvalidCombination` for flags that contradict each other or the precision."""
    if cudnn_benchmark and cudnn_deterministic:
        raise InvalidCombination("cudnn_benchmark=true contradicts cudnn_deterministic=true")
    implied = _IMPLIED_MATMUL.get(precision)
    if implied and matmul_precision not in ("auto", implied):
        raise InvalidCombination(f"precision={precision} implies matmul_precision={implied}, got {matmul_precision}")


def set_flags(
    cudnn_benchmark: bool | None, cudnn_deterministic: bool | None, precision: str, matmul_precision: str, device: str
) -> list[str]:
    """Set the backend flags the knobs ask for (None: untouched); return the knobs that were no-ops on ``device``."""
    noops: list[str] = []
    cudnn_flags = {"cudnn_benchmark": cudnn_benchmark, "cudnn_deterministic": cudnn_deterministic}
    for name, value in cudnn_flags.items():
        if value is None:
            continue
        if device != "cuda":
            noops.append(name)  # cuDNN does not run on this device: recorded, not an error
            continue
        setattr(torch.backends.cudnn, name.removeprefix("cudnn_"), value)
    tf32 = _FP32_MODES.get(precision)
    if tf32 is not None:
        _CUDNN.conv.fp32_precision = tf32
        _CUDNN.rnn.fp32_precision = tf32
        torch.backends.cuda.matmul.fp32_precision = tf32
    if matmul_precision != "auto":
        torch.backends.cuda.matmul.fp32_precision = "ieee" if matmul_precision == "highest" else "tf32"
    if device != "cuda" and (tf32 is not None or matmul_precision != "auto"):
        noops.append("tf32")  # TF32 is a tensor-core mode; CPUs compute plain fp32
    return noops


@contextlib.contextmanager
def strict_fp32() -> Iterator[None]:
    """Strict IEEE fp32 for the duration (the numerics guard's reference pass), flags restored after."""
    saved = (torch.backends.cuda.matmul.fp32_precision, _CUDNN.conv.fp32_precision)
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    _CUDNN.conv.fp32_precision = "ieee"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision, _CUDNN.conv.fp32_precision = saved
