"""Small models whose step FLOPs a test can count by hand, and one that cannot be counted."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from autotune.workloads import Workload

CPU = torch.device("cpu")


def mlp_workload(batch: int = 8) -> tuple[Workload, tuple[torch.Tensor, torch.Tensor]]:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))

    def make_batch(size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(size, 32, device=device), torch.randint(0, 10, (size,), device=device)

    return Workload(model, make_batch, F.cross_entropy), make_batch(batch, CPU)


class ReadsBack(nn.Module):
    """A model whose forward reads a value back from its tensors: fake tensors hold none."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * float(x.abs().max())
