"""The memory-format knob: the layout of 4-D weights and inputs (``channels_last`` lets cuDNN pick NHWC kernels).

The model's weights are converted once by :func:`lay_out`; its 4-D inputs, step by step, by the step context
(:meth:`autotune.knobs.stepcontext.StepContext.prepare_inputs`), so no conversion runs inside the step.
"""

from __future__ import annotations

import torch

from autotune.knobs.spec import KnobSpec

__all__ = ["MEMORY_FORMAT", "MEMORY_FORMATS", "lay_out"]

MEMORY_FORMATS = ("contiguous", "channels_last")

MEMORY_FORMAT = KnobSpec("memory_format", str, MEMORY_FORMATS, "layout of 4-D weights and inputs")


def lay_out(model: torch.nn.Module, memory_format: str) -> tuple[torch.nn.Module, bool, list[str]]:
    """The model in ``memory_format``; whether its inputs go channels_last too; the knob when it was a no-op."""
    if memory_format != "channels_last":
        return model, False, []
    if not any(p.dim() == 4 for p in model.parameters()):
        return model, False, ["memory_format"]  # no 4-D weights (e.g. a transformer): nothing to re-lay out
    return model.to(memory_format=torch.channels_last), True, []  # type: ignore[call-overload]
