"""User workloads (``module:function``) for sweeps that the tests interrupt, or spread over several workers.

Each trial process leaves a file in ``folder``: ``devices/<pid>`` holds its ``CUDA_VISIBLE_DEVICES``
(which worker's device it was pinned to). ``hang-<i>`` files mark the trials that hang; ``built-<i>`` files
count the processes that built :func:`hang_at`, and ``hung`` holds the pid of the one that hangs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch.nn import functional as F

from autotune.workloads import Workload


class _Sleeper(torch.nn.Module):
    """Sleeps ``seconds`` in each forward pass, then behaves like its inner module."""

    def __init__(self, inner: torch.nn.Module, seconds: float) -> None:
        super().__init__()
        self.inner, self.seconds = inner, seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.seconds)
        return self.inner(x)


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))


def _make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 32, device=device), torch.randint(0, 10, (batch_size,), device=device)


def _note_device(folder: Path) -> None:
    (folder / "devices").mkdir(parents=True, exist_ok=True)
    (folder / "devices" / str(os.getpid())).write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))


def _claim_hang_slot(folder: Path, count: int) -> bool:
    """True for one of the first ``count`` processes to ask (each creates ``hang-<i>``, atomically)."""
    for slot in range(count):
        try:
            os.close(os.open(folder / f"hang-{slot}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return True
    return False


def _claim_next_slot(folder: Path, prefix: str) -> int:
    """The number of this process among those that asked (each creates ``<prefix>-<i>``, atomically)."""
    slot = 0
    while True:
        try:
            os.close(os.open(folder / f"{prefix}-{slot}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            slot += 1
            continue
        return slot


def noted(preset: str = "tiny", folder: str = "", step_ms: float = 0.0) -> Workload:
    """A tiny MLP whose steps take at least ``step_ms``; notes the device its process was pinned to."""
    _note_device(Path(folder))
    return Workload(_Sleeper(_mlp(), step_ms / 1e3), _make_batch, F.cross_entropy, default_batch_size=16)


def hang_first(preset: str = "tiny", folder: str = "", count: int = 1) -> Workload:
    """The first ``count`` processes that build it hang in their first step (a trial to interrupt: its
    ``hang-<i>`` file says it is running); every later one is a tiny MLP that runs at once."""
    _note_device(Path(folder))
    hangs = _claim_hang_slot(Path(folder), count)
    return Workload(_Sleeper(_mlp(), 600.0 if hangs else 0.0), _make_batch, F.cross_entropy, default_batch_size=16)


def hang_at(preset: str = "tiny", folder: str = "", index: int = 0) -> Workload:
    """The ``index``-th process to build it (0: the first) hangs in its first step, its pid written to ``hung``
    (a trial whose worker a test kills, late in the budget); every other one is a tiny MLP that runs at once."""
    _note_device(Path(folder))
    hangs = _claim_next_slot(Path(folder), "built") == index
    if hangs:
        (Path(folder) / "hung.tmp").write_text(str(os.getpid()))
        (Path(folder) / "hung.tmp").rename(Path(folder) / "hung")  # whole, once it exists
    return Workload(_Sleeper(_mlp(), 600.0 if hangs else 0.0), _make_batch, F.cross_entropy, default_batch_size=16)
