"""Dataset workloads (``data_workloads:...``) that the data-path tests run as real trials."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.nn import functional as F
from torch.utils.data import Dataset

from autotune.knobs import StepContext
from autotune.workloads import Workload

WIDTH = 32
# Micro-batches the accumulating step has run in this process (a trial run in the test's own process).
MICRO_BATCHES = [0]


class Points(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Random feature vectors and labels in host memory; ``delay_s`` per sample, as a slow decode would take."""

    def __init__(self, count: int, delay_s: float = 0.0) -> None:
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.randn(count, WIDTH, generator=generator, device="cpu")
        self.targets = torch.randint(0, 10, (count,), generator=generator, device="cpu")
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.inputs[index], self.targets[index]


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, 10))


def host_mlp(preset: str = "tiny", delay_ms: float = 0.0, samples: int = 256, noise: float = 0.0) -> Workload:
    """An MLP over host data; ``noise`` adds fresh random noise to every batch on the device (an augmentation)."""

    def augment(batch: Any) -> Any:
        inputs, targets = batch
        return inputs + noise * torch.randn_like(inputs), targets

    transform = augment if noise else None
    dataset = Points(samples, delay_ms / 1e3)
    return Workload(_mlp(), loss_fn=F.cross_entropy, dataset=dataset, device_transform=transform, default_batch_size=16)


def accumulating(preset: str = "tiny", micro_batches: int = 4, with_loss_fn: bool = True) -> Workload:
    """Its own step: gradient accumulation over ``micro_batches`` slices of each batch, one optimizer step."""

    def train_step(model: torch.nn.Module, batch: Any, ctx: StepContext) -> torch.Tensor:
        inputs, targets = batch
        total = torch.zeros(())
        for x, y in zip(inputs.chunk(micro_batches), targets.chunk(micro_batches), strict=True):
            with ctx.autocast():
                loss = F.cross_entropy(model(ctx.prepare_inputs(x)), y) / micro_batches
            ctx.backward(loss)
            total += loss.detach()
            MICRO_BATCHES[0] += 1
        ctx.step()
        ctx.zero_grad()
        return total  # the mean of the micro-batches' losses: the whole batch's cross-entropy

    loss_fn = F.cross_entropy if with_loss_fn else None
    return Workload(_mlp(), loss_fn=loss_fn, dataset=Points(256), train_step=train_step, default_batch_size=16)


def diverging(preset: str = "tiny", from_step: int = 3) -> Workload:
    """Its own step, no loss_fn: the loss turns NaN from step ``from_step`` on."""
    steps = [0]

    def train_step(model: torch.nn.Module, batch: Any, ctx: StepContext) -> torch.Tensor:
        inputs, targets = batch
        with ctx.autocast():
            loss = F.cross_entropy(model(inputs), targets)
        ctx.backward(loss)
        ctx.step()
        ctx.zero_grad()
        steps[0] += 1
        return loss * float("nan") if steps[0] > from_step else loss

    return Workload(_mlp(), dataset=Points(256), train_step=train_step, default_batch_size=16)
