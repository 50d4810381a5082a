"""The training step a trial times: one batch, forward and loss, backward, optimizer step.

The built-in step is ``loss_fn(model(inputs), targets)`` under the knobs' autocast, backward
through the fp16 scaler, the optimizer step and ``zero_grad``; a workload's own
``train_step(model, batch, ctx)`` replaces it (gradient accumulation, several losses ...). Either
way the step takes its batch inside the call, so a step that waits for input is timed waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autotune import workloads
from autotune.data import LoaderBatches, SyntheticBatches
from autotune.errors import AutotuneError
from autotune.knobs.stepcontext import StepContext
from autotune.trial.numerics import pair

__all__ = ["TrainStep", "prepare_pair", "prepared_step"]


def prepare_pair(ctx: StepContext, batch: Any) -> Any:
    """An ``(inputs, targets)`` batch with its inputs in the knobs' layout; any other batch as it is."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return ctx.prepare_inputs(batch[0]), batch[1]
    return batch


class TrainStep:
    """``step(i)`` runs training step ``i`` on ``batch_for(i)``; every loss is kept, detached, for the checks."""

    def __init__(
        self,
        workload: workloads.Workload,
        model: torch.nn.Module,
        ctx: StepContext,
        optimizer: torch.optim.Optimizer,
        batch_for: Callable[[int], Any],
    ) -> None:
        self.workload = workload
        self.model = model
        self.ctx = ctx
        self.optimizer = optimizer
        self.batch_for = batch_for
        self.losses: list[torch.Tensor] = []

    def __call__(self, index: int) -> None:
        batch = self.batch_for(index)
        loss = self._own_step(batch) if self.workload.train_step is not None else self._loss_step(batch)
        self.losses.append(loss.detach())

    def _loss_step(self, batch: Any) -> torch.Tensor:
        assert self.workload.loss_fn is not None  # Workload refuses neither loss_fn nor train_step
        inputs, targets = pair(batch)
        with self.ctx.autocast():
            loss = self.workload.loss_fn(self.model(inputs), targets)
        self.ctx.backward(loss)
        self.ctx.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def _own_step(self, batch: Any) -> torch.Tensor:
        assert self.workload.train_step is not None
        loss = self.workload.train_step(self.model, batch, self.ctx)
        if not isinstance(loss, torch.Tensor):
            raise AutotuneError(f"train_step returned a {type(loss).__name__}: it must return the step's loss tensor")
        return loss


def prepared_step(
    workload: workloads.Workload,
    model: torch.nn.Module,
    ctx: StepContext,
    optimizer: torch.optim.Optimizer,
    source: SyntheticBatches | LoaderBatches,
) -> TrainStep:
    """The step a trial times, ``model`` with the knobs applied (``ctx``, from :func:`autotune.knobs.apply`), on
    ``source``'s batches in the knobs' layout: batches made before timing laid out once, not per step; a loader's as
    they come."""
    if isinstance(source, LoaderBatches):
        return TrainStep(workload, model, ctx, optimizer, lambda index: prepare_pair(ctx, source.batch(index)))
    laid_out = SyntheticBatches([prepare_pair(ctx, batch) for batch in source.batches])
    return TrainStep(workload, model, ctx, optimizer, laid_out.batch)
