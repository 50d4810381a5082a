"""Persistent matmul with TMA descriptors: the Hopper-era variant of :mod:`autotune.kernels.matmul`.

One program per SM walks the output tiles in the same grouped order as the tiled kernel; tiles of
A and B arrive by the Tensor Memory Accelerator (host-side descriptors: no address arithmetic, and
out-of-bounds reads are zeros, so any M, N, K works), and C leaves through one too. On an H100 at
bf16 4096^3 it read 712.9 TFLOP/s against the tiled kernel's best 691.8 and cuBLAS's 717-735
(BENCHMARKS.md): the tiled kernel pays a launch-wide tail that a persistent one spreads.

Needs a GPU of compute capability 9.0 or newer, and row strides that are multiples of 16 bytes (a
TMA rule); Triton's CPU interpreter runs it as well.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from autotune.errors import AutotuneError, InvalidCombination

__all__ = ["matmul_tma_persistent"]

_CPU_PROGRAMS = 4  # programs in the interpreter: few, so each walks several tiles, as on a GPU


@triton.jit
def _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _persistent_kernel(
    a_desc, b_desc, c_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS: tl.constexpr, INPUT_PRECISION: tl.constexpr, DOT_IN_FP32: tl.constexpr,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    # flatten: the tile loop and the K loop form one software pipeline, so the next tile's first
    # loads are in flight while this tile's epilogue stores.
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, PROGRAMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            if DOT_IN_FP32:  # the interpreter's bf16 tl.dot multiplies bit patterns (see matmul.py)
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def _check_tma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    if a.is_cuda and torch.cuda.get_device_capability(a.device) < (9, 0):
        raise InvalidCombination("kernel=tma_persistent needs a GPU of compute capability 9.0 or newer (Hopper)")
    for name, t in (("A", a), ("B", b), ("C", c)):
        if t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16:
            raise AutotuneError(
                f"kernel=tma_persistent: {name} rows must be contiguous and a multiple of 16 bytes "
                f"(shape {tuple(t.shape)}, {t.dtype}); use kernel=tiled"
            )


def matmul_tma_persistent(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
    GROUP_M: int, num_warps: int, num_stages: int, input_precision: str, dot_in_fp32: bool,
) -> torch.Tensor:  # fmt: skip
    """Write ``a @ b`` into ``c`` (shapes and dtypes checked by the caller) and return it."""
    _check_tma(a, b, c)
    M, K = a.shape
    N = b.shape[1]
    programs = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else _CPU_PROGRAMS
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    _persistent_kernel[(min(programs, tiles),)](
        TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K]),
        TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N]),
        TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N]),
        M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        PROGRAMS=programs, INPUT_PRECISION=input_precision, DOT_IN_FP32=dot_in_fp32,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return c
