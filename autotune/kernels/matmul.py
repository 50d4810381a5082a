"""Grouped-ordering matmul ``C = A @ B`` in Triton, with its torch reference, check and benchmark.

The kernel follows the structure of Triton's matmul tutorial: each program computes one
``BLOCK_M x BLOCK_N`` tile of C, walking K in ``BLOCK_K`` steps with an fp32 accumulator; programs
are ordered in groups of ``GROUP_M`` tile rows so that neighbouring programs reuse the same
tiles of A and B from L2. Edge tiles are handled as the tutorial does (K masked, rows and
columns wrapped, the store masked), so any M, N, K works.

On CUDA tensors the kernel is compiled; on CPU tensors it runs in Triton's interpreter, which
needs ``TRITON_INTERPRET=1`` in the environment before the process first imports ``triton``:
Triton decides at ``@triton.jit`` time whether a function is compiled or interpreted, and its
own library functions (``tl.cdiv``, ...) are decorated when ``triton`` is imported.

A configuration that needs more shared memory (or more threads) than the GPU has fails at its
first launch with ``triton.runtime.errors.OutOfResources`` (also ``triton.OutOfResources``), in
Triton 3.6 as in 3.9; nothing here catches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from autotune.errors import AutotuneError
from autotune.kernels.matmul_tma import matmul_tma_persistent
from autotune.kernels.timing import host_timing, settled_timing

__all__ = [
    "CONFIG_KEYS",
    "KERNELS",
    "TOLERANCE",
    "bench",
    "check",
    "flops",
    "interpreted",
    "matmul",
    "shared_memory_bytes",
]

#: The keys of a kernel configuration (``GROUP_M`` may be left out; it defaults to 8).
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "GROUP_M")

#: The kernel variants: the tutorial's one program per tile, or one per SM fed by TMA (:mod:`.matmul_tma`).
KERNELS = ("tiled", "tma_persistent")

#: Largest acceptable relative error ``||out - ref|| / ||ref||`` per input dtype.
TOLERANCE: dict[torch.dtype, float] = {
    torch.bfloat16: 2e-2,
    torch.float16: 2e-2,
    torch.float32: 1e-4,
}


@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    # Grouped ordering: consecutive program ids sweep GROUP_M tile rows column by column, so the
    # tiles they load stay hot in L2 instead of streaming the whole of B for every row of C.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows and columns past M and N wrap around (modulo) instead of being masked: their loads stay
    # in bounds, their results are dropped by the store mask, and the loads need only the K mask.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # Past the end of K, load zeros: they add nothing to the dot product.
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        if DOT_IN_FP32:
            # Only in the CPU interpreter: its tl.dot multiplies bf16 bit patterns, not values
            # (triton-lang/triton#11584), so upcast there; compiled kernels never take this branch.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def interpreted() -> bool:
    """Whether the kernel runs in Triton's CPU interpreter (``TRITON_INTERPRET=1`` at import)."""
    return not isinstance(_matmul_kernel, triton.runtime.JITFunction)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    BLOCK_M: int,
    BLOCK_N: int,
    BLOCK_K: int,
    num_warps: int,
    num_stages: int,
    GROUP_M: int = 8,
    kernel: str = "tiled",
) -> torch.Tensor:
    """``a @ b`` for 2-D ``a`` (M x K) and ``b`` (K x N) of one dtype; the result has that dtype.

    ``kernel`` picks the variant (:data:`KERNELS`). fp32 inputs are multiplied in full fp32
    (``input_precision="ieee"``), not TF32, so that the result can be checked against fp32 tolerances.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"matmul needs one dtype, got {a.dtype} and {b.dtype}")
    if a.device.type == "cpu" and not interpreted():
        raise AutotuneError("the Triton matmul runs on CPU only with TRITON_INTERPRET=1 set before Python starts")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if c.numel() == 0:
        return c  # nothing to compute; the kernel's "% M" would divide by zero
    dot_in_fp32 = interpreted() and a.dtype == torch.bfloat16
    # "tf32" is Triton's default and is ignored for 16-bit inputs, so bf16/fp16 compile exactly
    # as in the tutorial (and as in the recorded H200 measurements).
    precision = "ieee" if a.dtype == torch.float32 else "tf32"
    if kernel == "tma_persistent":
        return matmul_tma_persistent(
            a, b, c, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
            num_warps=num_warps, num_stages=num_stages, input_precision=precision, dot_in_fp32=dot_in_fp32,
        )  # fmt: skip
    if kernel != "tiled":
        raise AutotuneError(f"matmul kernel={kernel!r} is not valid: expected one of {', '.join(KERNELS)}")
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        INPUT_PRECISION=precision, DOT_IN_FP32=dot_in_fp32,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return c


def shared_memory_bytes(
    BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, num_stages: int, dtype_bytes: int = 2, kernel: str = "tiled"
) -> int:
    """Shared memory the kernel needs: ``num_stages`` buffered tiles of A and of B (TMA: and the C tile it stores).

    It equals the "Required" figure Triton reported for every configuration measured on an H200
    (``shared/data/h200_triton_matmul_8192.json``), so a sampler can reject configurations that
    cannot launch before running them. Compare it with the device's limit (232448 on H100/H200).
    """
    staged = num_stages * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * dtype_bytes
    # Triton asked for 262176 bytes for 128/256/64 with 4 stages on an H100: staged (196608) plus C (65536) and 32.
    return staged + (BLOCK_M * BLOCK_N * dtype_bytes if kernel == "tma_persistent" else 0)


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of one ``M x K @ K x N`` product (a multiply and an add each)."""
    return 2 * M * N * K


def _random_inputs(
    M: int, N: int, K: int, dtype: torch.dtype, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    # Normal inputs: never all zeros, so a kernel that writes nothing cannot pass the check.
    a = torch.randn((M, K), device=device, dtype=dtype)
    b = torch.randn((K, N), device=device, dtype=dtype)
    return a, b


def _kernel_args(config: Mapping[str, Any]) -> dict[str, Any]:
    missing = [key for key in CONFIG_KEYS[:-1] if key not in config]
    if missing:
        raise ValueError(f"matmul config lacks {missing}: got {dict(config)}")
    args: dict[str, Any] = {key: int(config[key]) for key in CONFIG_KEYS if key in config}
    return {**args, "kernel": config.get("kernel", "tiled")}


def check(config: Mapping[str, Any], M: int, N: int, K: int, dtype: torch.dtype, device: torch.device | str) -> float:
    """Relative error ``||out - ref|| / ||ref||`` of ``config`` against torch.matmul in float64.

    Inputs are fresh random normals of ``dtype``; the reference multiplies the same (rounded)
    inputs in float64, so the error measures the kernel alone. Compare with ``TOLERANCE[dtype]``.
    """
    a, b = _random_inputs(M, N, K, dtype, device)
    out = matmul(a, b, **_kernel_args(config))
    ref = torch.matmul(a.double(), b.double())
    return (torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref)).item()


def bench(
    config: Mapping[str, Any],
    M: int,
    N: int,
    K: int,
    dtype: torch.dtype,
    device: torch.device | str,
    warmup_ms: float = 500,
    rep_ms: float = 200,
    max_windows: int = 10,
    tolerance: float = 0.005,
) -> dict[str, float]:
    """Time ``config`` with :func:`autotune.kernels.timing.settled_timing` (``do_bench`` windows, L2 flushed).

    Returns its ``ms`` (median of all runs), ``ms_p90``, ``windows`` and ``window_cv``, and ``tflops``.
    In the CPU interpreter, which has no Triton driver to time with, runs are timed with the host
    clock: those numbers only show that the code path works.
    """
    a, b = _random_inputs(M, N, K, dtype, device)
    kwargs = _kernel_args(config)

    def run() -> None:
        matmul(a, b, **kwargs)

    if interpreted():
        timing = host_timing(run, warmup_ms=warmup_ms / 20, rep_ms=rep_ms / 2)
    else:
        timing = settled_timing(run, warmup_ms, rep_ms, max_windows, tolerance)
    return {**timing, "tflops": flops(M, N, K) / (timing["ms"] * 1e-3) / 1e12}
