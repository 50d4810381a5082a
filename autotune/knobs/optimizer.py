"""The optimizer knob: a fused optimizer step, one kernel for all parameters instead of one per tensor."""

from __future__ import annotations

import torch

from autotune.errors import AutotuneError, InvalidCombination
from autotune.knobs.spec import KnobSpec

__all__ = ["FUSABLE_OPTIMIZERS", "FUSED_OPTIMIZER", "set_fused"]

# Optimizers whose constructors take ``fused=True`` (torch.optim with a fused kernel).
FUSABLE_OPTIMIZERS = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad)

FUSED_OPTIMIZER = KnobSpec("fused_optimizer", bool, (True, False), "fused optimizer step (Adam, AdamW, SGD, Adagrad)")


def set_fused(optimizer: torch.optim.Optimizer) -> None:
    """Switch an existing optimizer to its fused kernel, as ``fused=True`` at construction would."""
    if not isinstance(optimizer, FUSABLE_OPTIMIZERS):
        raise InvalidCombination(f"fused_optimizer=true: {type(optimizer).__name__} has no fused step")
    if optimizer.state:
        raise AutotuneError("fused_optimizer: apply the config before the optimizer's first step")
    optimizer.defaults["fused"] = True
    for group in optimizer.param_groups:
        group["fused"] = True
        group["foreach"] = None
    # What torch.optim's constructors set for fused=True, so GradScaler hands over unscaling.
    optimizer._step_supports_amp_scaling = True
