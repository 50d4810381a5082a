"""The runtime side of the knobs: :class:`StepContext`, what a training step needs from them, step after step.

:func:`autotune.knobs.apply` sets the knobs up once and returns one; the trial's training loop and a production
training loop (``model, step_ctx = cfg.apply(model, optimizer)``) then call it in every step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from autotune.errors import AutotuneError
from autotune.knobs.attention import backend_context
from autotune.knobs.checkpointing import DEFAULT_BUDGET, memory_budget
from autotune.knobs.regional import Blocks

__all__ = ["StepContext"]


@dataclass
class StepContext:
    """What a training step needs from the knobs: input layout, autocast, (fp16) a grad scaler, the attention kernel
    and the compiler's activation memory budget.

    A training step with it::

        with step_ctx.autocast():
            loss = loss_fn(model(step_ctx.prepare_inputs(x)), y)
        step_ctx.backward(loss)
        step_ctx.step()  # the optimizer given to apply(); or step_ctx.step(optimizer)
        step_ctx.zero_grad()
    """

    device_type: str
    autocast_dtype: torch.dtype | None = None
    channels_last_inputs: bool = False
    cudagraphs: bool = False
    scaler: torch.amp.GradScaler | None = None
    noops: list[str] = field(default_factory=list)
    optimizer: torch.optim.Optimizer | None = None  # the one the knobs were applied to
    # compile_scope=blocks: the blocks compiled one by one; empty (its reason says why) when the model has none.
    blocks: Blocks | None = None
    # activation_checkpointing: the blocks whose forward is checkpointed; None when it is none.
    checkpointed: Blocks | None = None
    attention_backend: str = "auto"  # the SDPA kernel pinned during the step (auto: none)
    activation_memory_budget: float = DEFAULT_BUDGET  # the compiler's, while this model's graphs compile
    # float8: the Linear layers converted to float8 training, by name (empty: none passed the filter); None: off.
    float8_layers: tuple[str, ...] | None = None

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Opens the forward pass of a step: autocast if the precision asks for it, the attention kernel and the
        activation memory budget if the knobs set them; each restored when the forward is done."""
        if self.cudagraphs:
            # A new iteration for CUDA-graph trees, so last step's graph outputs may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        return self._forward()

    @contextlib.contextmanager
    def _forward(self) -> Iterator[None]:
        autocast = (
            contextlib.nullcontext()
            if self.autocast_dtype is None
            else torch.autocast(self.device_type, dtype=self.autocast_dtype)
        )
        # The compile happens in the first forward (the backward's too: compile.compile_backward_with_forward).
        with autocast, memory_budget(self.activation_memory_budget), backend_context(self.attention_backend):
            yield

    def prepare_inputs(self, inputs: Any) -> Any:
        """Put 4-D input tensors in channels_last when the weights are, so no conversion runs per step."""
        if self.channels_last_inputs and isinstance(inputs, torch.Tensor) and inputs.dim() == 4:
            return inputs.contiguous(memory_format=torch.channels_last)
        return inputs

    def backward(self, loss: torch.Tensor) -> None:
        """Backward from ``loss`` (scaled under fp16), on the forward's attention kernel: a checkpointed block runs
        its forward again here, and checkpointing replays autocast but not the kernel pin."""
        with backend_context(self.attention_backend):
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Step ``optimizer`` (default: the one given to :func:`apply`), through the scaler under fp16."""
        optimizer = self._optimizer(optimizer)
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

    def zero_grad(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Drop the gradients (``set_to_none``) of ``optimizer``, by default the one given to :func:`apply`."""
        self._optimizer(optimizer).zero_grad(set_to_none=True)

    def _optimizer(self, optimizer: torch.optim.Optimizer | None) -> torch.optim.Optimizer:
        chosen = optimizer if optimizer is not None else self.optimizer
        if chosen is None:
            raise AutotuneError("StepContext has no optimizer: pass one, or give apply() the optimizer")
        return chosen
