"""A user workload (``module:function``) whose trial fills the study's disk, as a log or a checkpoint filling it would.

Each trial process claims the next ``trial-<i>`` file in ``marks`` (another disk) and writes its pid there:
the marks count the trial processes that ever ran, so a trial measured twice shows. The process that
claims ``trial-<fill_at>`` fills ``disk`` with a ballast file before it measures; the trial itself runs
fine, and its record is the first write that meets the full disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from tmpfs import fill
from torch.nn import functional as F

from autotune.workloads import Workload


def _claim_mark(marks: Path) -> int:
    """The number of this trial process: the first ``trial-<i>`` it creates (atomically) in ``marks``."""
    marks.mkdir(parents=True, exist_ok=True)
    number = 0
    while True:
        try:
            fd = os.open(marks / f"trial-{number}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            number += 1
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return number


def fills_disk(preset: str = "tiny", disk: str = "", marks: str = "", fill_at: int = 1) -> Workload:
    """A tiny MLP; trial process number ``fill_at`` fills ``disk`` first."""
    if _claim_mark(Path(marks)) == fill_at:
        fill(Path(disk))
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, 32, device=device), torch.randint(0, 10, (batch_size,), device=device)

    return Workload(model, make_batch, F.cross_entropy, default_batch_size=16)
