"""What the kernel tests share: how far a result is from its reference."""

from __future__ import annotations

import torch


def rel_error(out: torch.Tensor | None, ref: torch.Tensor | None) -> float:
    """``||out - ref|| / ||ref||`` in float64."""
    assert out is not None and ref is not None
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()
