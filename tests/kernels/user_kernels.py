"""A user's Triton kernels, as a space would list them: ``triton.autotune``-decorated and declared with ``tunable``.

Each kernel also writes the BLOCK_SIZE it was launched with to ``meta_ptr``, so a test can tell
which config ran.
"""

from __future__ import annotations

import dataclasses
import time

import torch
import triton
import triton.language as tl

from autotune.kernels.declare import tunable


# A @triton.jit kernel's parameters are device pointers and tl.constexpr values, which no Python annotation describes
# (the package's kernels are exempted in pyproject.toml for the same reason).
@triton.jit
def _scaled_add(x_ptr, y_ptr, out_ptr, meta_ptr, n, BLOCK_SIZE: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, 2.0 * x + y, mask=mask)
    if tl.program_id(0) == 0:
        tl.store(meta_ptr, BLOCK_SIZE)


scaled_add = triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 16}, num_warps=1, num_stages=1),
        triton.Config({"BLOCK_SIZE": 32}, num_warps=2, num_stages=1),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=4, num_stages=2),
    ],
    key=["n"],
)(_scaled_add)


def _cpu_bench(kernel_call: object, quantiles: object) -> list[float]:
    """Triton's own do_bench needs a GPU driver; under the CPU interpreter, one timed call per config will do."""
    import time

    started = time.perf_counter()
    kernel_call()  # type: ignore[operator]
    seconds = time.perf_counter() - started
    return [seconds, seconds, seconds]


# The same kernel, left to choose its config itself (a space that does not list it), as on a GPU it would.
self_tuned_add = triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 16}, num_warps=1, num_stages=1),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=4, num_stages=2),
    ],
    key=["n"],
    do_bench=_cpu_bench,
)(_scaled_add)

_LAST_WINS = [0.0]


def _last_wins_bench(kernel_call: object, quantiles: object) -> list[float]:
    """Each config timed faster than the one before: the last config benchmarked wins, whatever the CPU does."""
    kernel_call()  # type: ignore[operator]
    _LAST_WINS[0] -= 1.0
    return [1e6 + _LAST_WINS[0]] * 3


# A listed kernel whose own autotuner, when left unpinned, always chooses its last config (BLOCK_SIZE=64).
last_wins_add = triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 16}, num_warps=1, num_stages=1),
        triton.Config({"BLOCK_SIZE": 32}, num_warps=2, num_stages=1),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=4, num_stages=2),
    ],
    key=["n"],
    do_bench=_last_wins_bench,
)(_scaled_add)

declared_add = tunable(
    key=["n"], BLOCK_SIZE=[16, 32, 64, 128], num_warps=[1, 2, 4], feasibility="BLOCK_SIZE >= 16 * num_warps"
)(_scaled_add)


def launch(kernel: object, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``2x + y`` through ``kernel``, and the BLOCK_SIZE that ran."""
    out = torch.empty_like(x)
    meta = torch.zeros(1, dtype=torch.int32)
    n = x.numel()
    kernel[lambda meta_args: (triton.cdiv(n, meta_args["BLOCK_SIZE"]),)](x, y, out, meta, n)  # type: ignore[index]
    return out, int(meta.item())


LAST_BLOCK: list[int | None] = [None]  # the BLOCK_SIZE of the latest launch through the model below
KERNEL: list[object] = [scaled_add]  # what the model below launches


class _ScaledAdd(torch.autograd.Function):
    """``2x + y`` forward in Triton, backward in torch: a user's kernel inside a training step."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out, LAST_BLOCK[0] = launch(KERNEL[0], x.contiguous(), y.contiguous())
        return out

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 2 * grad, grad


class KernelMLP(torch.nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(width, width)
        self.shift = torch.nn.Parameter(torch.randn(width))
        self.fc2 = torch.nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = _ScaledAdd.apply(h, self.shift.expand_as(h))
        return self.fc2(torch.relu(h))


def kernel_mlp(preset: str = "tiny") -> object:
    """A user workload whose model calls the listed kernel ``scaled_add`` in every forward pass."""
    from torch.nn import functional as F

    from autotune.workloads import Workload

    def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, 32, device=device), torch.randint(0, 10, (batch_size,), device=device)

    return Workload(KernelMLP(), make_batch, F.cross_entropy, default_batch_size=16)


def last_wins_mlp(preset: str = "tiny") -> object:
    """:func:`kernel_mlp` launching :data:`last_wins_add`."""
    KERNEL[0] = last_wins_add
    return kernel_mlp(preset)


def self_tuned_mlp(preset: str = "tiny") -> object:
    """:func:`kernel_mlp` with the kernel that chooses its own config, :data:`self_tuned_add`."""
    KERNEL[0] = self_tuned_add
    return kernel_mlp(preset)


SLOW_FORWARD_S = 0.05  # what the slow model's forward spends besides the kernel, unless told


class SlowKernelMLP(KernelMLP):
    """:class:`KernelMLP` whose forward also waits ``wait_s``: the kernel is a small share of its step, as a loss
    kernel is of a large model's."""

    def __init__(self, wait_s: float) -> None:
        super().__init__()
        self.wait_s = wait_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.wait_s)
        return super().forward(x)


def slow_last_wins_mlp(preset: str = "tiny", wait_s: float = SLOW_FORWARD_S) -> object:
    """:func:`last_wins_mlp` with the slow model: its kernel a few percent of the step."""
    workload = last_wins_mlp(preset)
    return dataclasses.replace(workload, model=SlowKernelMLP(wait_s))  # type: ignore[type-var]
