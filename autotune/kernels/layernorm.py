"""LayerNorm (with weight and bias) forward and backward in Triton, with its torch reference.

:class:`TritonLayerNorm` is a drop-in ``nn.LayerNorm`` (same constructor, parameters ``weight`` and
``bias``, same ``state_dict``) whose forward and backward run the two kernels below, which a space
can list (``kernels: [autotune.kernels.layernorm:layernorm_fwd, autotune.kernels.layernorm:layernorm_bwd]``).

- ``layernorm_fwd``: each program normalises ``ROWS`` rows at once, a ``ROWS x BLOCK_N`` tile held in
  registers; it writes ``y`` and saves each row's mean and 1/std (fp32) for the backward.
- ``layernorm_bwd``: each program walks its own contiguous range of rows, ``ROWS`` at a time, writes
  ``dx`` and accumulates its partial ``dw``/``db`` in registers; the host sums the programs' partials.

What is tuned, and why it is legal everywhere: ``BLOCK_N`` is not tuned but computed at launch as
the power of two covering a whole row (768 -> 1024, 384 -> 512, 64 -> 64 for the GPT-2 presets), so
no config can be too small for a row; rows up to :data:`MAX_N` features are accepted. Tuned are the
rows per program (``ROWS``: 1 to 16) and ``num_warps`` (1 to 16), each value legal for every
width: a wide tile with few warps only costs registers (slow, not wrong). The tuning key is the row
width ``N`` (then the tensors' dtypes, as Triton forms it), so one config serves every batch size.

Numerics: inputs may be fp32, bf16 or fp16 (weight and bias may differ from ``x``, as with fp32
parameters under autocast); statistics and gradients are computed in fp32 inside the kernels, the
output has the input's dtype and each gradient its tensor's dtype. Unlike torch, whose autocast
runs layer norm in fp32 and returns fp32, the output keeps ``x``'s dtype.

On CUDA tensors the kernels are compiled; on CPU tensors they run in Triton's interpreter, which needs
``TRITON_INTERPRET=1`` before the process first imports ``triton`` and, having no GPU to benchmark
configs with, a kernel pinned to one config (:func:`autotune.kernels.pinning.pin`).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch import nn
from torch.nn import functional as F

from autotune.errors import AutotuneError
from autotune.kernels.declare import tunable

__all__ = ["MAX_N", "TritonLayerNorm", "layer_norm", "layernorm_bwd", "layernorm_fwd", "reference"]

#: Widest row accepted: a whole row (rounded up to a power of two) is held in registers.
MAX_N = 16384

_ROWS = (1, 2, 4, 8, 16)  # rows per tile; the backward rounds each program's share up to a multiple of the largest
_WARPS = (1, 2, 4, 8, 16)
_CPU_PROGRAMS = 4  # backward programs in the interpreter: few, so tests cover ranges that split unevenly


@tunable(key=["N"], ROWS=_ROWS, num_warps=_WARPS)
@triton.jit
def layernorm_fwd(
    x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr,
    stride_x, stride_y, M, N, eps,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):  # fmt: skip
    # int64 row offsets: rows * stride passes 2**31 on large activations.
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / N
    # Two passes over the registers (mean, then centred squares): no cancellation, unlike E[x^2] - E[x]^2.
    diff = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / N + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = diff * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + rows, mean, mask=row_mask)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)


@tunable(key=["N"], ROWS=_ROWS, num_warps=_WARPS)
@triton.jit
def layernorm_bwd(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr,
    stride_dy, stride_x, stride_dx, M, N, rows_per_program,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    end = tl.minimum(first + rows_per_program, M)
    for start in range(0, rows_per_program, ROWS):
        rows = first + start + tl.arange(0, ROWS)
        row_mask = rows < end
        mask = row_mask[:, None] & col_mask[None, :]
        # Masked rows load x = dy = mean = rstd = 0, so they add nothing to dw, db or the row sums.
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        xhat = (x - mean[:, None]) * rstd[:, None]
        wdy = w[None, :] * dy
        c1 = tl.sum(xhat * wdy, axis=1) / N
        c2 = tl.sum(wdy, axis=1) / N
        dx = (wdy - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
        tl.store(dx_ptr + rows[:, None] * stride_dx + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += tl.sum(dy * xhat, axis=0)
        db += tl.sum(dy, axis=0)
    tl.store(dw_ptr + pid * N + cols, dw, mask=col_mask)
    tl.store(db_ptr + pid * N + cols, db, mask=col_mask)


def _interpreted() -> bool:
    """Whether the kernels run in Triton's CPU interpreter (``TRITON_INTERPRET=1`` at import)."""
    return not isinstance(layernorm_fwd.fn, triton.runtime.JITFunction)


def _check_inputs(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> int:
    """The row width; bad shapes or devices raise before any launch."""
    n = x.shape[-1]
    if weight.shape != (n,) or bias.shape != (n,):
        raise ValueError(f"layer_norm: weight {tuple(weight.shape)} and bias {tuple(bias.shape)} must be ({n},)")
    if n > MAX_N:
        raise ValueError(f"layer_norm: rows of {n} features are wider than MAX_N={MAX_N}")
    if x.device.type == "cpu" and not _interpreted():
        raise AutotuneError("the Triton layer norm runs on CPU only with TRITON_INTERPRET=1 set before Python starts")
    return n


_SM_COUNT: dict[int, int] = {}


def _programs(device: torch.device) -> int:
    """How many backward programs to start: a few per SM, each with its own partial dw/db row."""
    if device.type != "cuda":
        return _CPU_PROGRAMS
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SM_COUNT:
        _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return 4 * _SM_COUNT[index]


def _forward(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(y, mean, rstd)`` for a 2-D ``x`` whose rows are contiguous."""
    m, n = x.shape
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)
    mean = torch.empty(m, device=x.device, dtype=torch.float32)
    rstd = torch.empty(m, device=x.device, dtype=torch.float32)
    if m == 0:
        return y, mean, rstd
    layernorm_fwd[lambda meta: (triton.cdiv(m, meta["ROWS"]),)](
        x, y, weight, bias, mean, rstd, x.stride(0), y.stride(0), m, n, eps, BLOCK_N=triton.next_power_of_2(n)
    )
    return y, mean, rstd


def _backward(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dx, dw, db)`` in fp32 partial sums reduced by torch; ``dw``/``db`` still fp32."""
    m, n = x.shape
    dx = torch.empty((m, n), device=x.device, dtype=x.dtype)
    # Each program's share is a multiple of every ROWS value, so only the last program has a ragged tail.
    per_program = triton.cdiv(triton.cdiv(max(m, 1), _programs(x.device)), _ROWS[-1]) * _ROWS[-1]
    programs = triton.cdiv(m, per_program)
    dw = torch.empty((programs, n), device=x.device, dtype=torch.float32)
    db = torch.empty((programs, n), device=x.device, dtype=torch.float32)
    if m > 0:
        layernorm_bwd[(programs,)](
            dy, x, weight, mean, rstd, dx, dw, db,
            dy.stride(0), x.stride(0), dx.stride(0), m, n, per_program,
            BLOCK_N=triton.next_power_of_2(n),
        )  # fmt: skip
    return dx, dw.sum(dim=0), db.sum(dim=0)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """``t`` as a 2-D ``(rows, n)`` view (a copy only where its last dimension is strided)."""
    t = t.reshape(-1, n)
    return t if t.stride(-1) == 1 else t.contiguous()


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        n = _check_inputs(x, weight, bias)
        x2 = _rows(x, n)
        y, mean, rstd = _forward(x2, weight.contiguous(), bias.contiguous(), eps)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.bias_dtype = bias.dtype
        return y.view(x.shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        x2, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = _backward(_rows(dy, x2.shape[1]), x2, weight.contiguous(), mean, rstd)
        return dx.view(dy.shape), dw.to(weight.dtype), db.to(ctx.bias_dtype), None


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``F.layer_norm(x, (N,), weight, bias, eps)`` over the last dimension, through the Triton kernels."""
    if x.device.type == "meta":  # shapes alone, no kernel (a step's FLOPs counted on meta: autotune/trial/flops.py)
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    return _LayerNorm.apply(x, weight, bias, eps)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """torch's layer norm of the same inputs upcast to fp32, returned in fp32: what the kernels approximate."""
    return F.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps)


class TritonLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` over the last dimension whose forward and backward run the Triton kernels.

    Same constructor, parameters and ``state_dict`` as ``nn.LayerNorm`` (a subclass, so code that
    looks for ``nn.LayerNorm``, e.g. to exempt it from weight decay, still finds it); it needs one
    normalised dimension and both ``weight`` and ``bias``.
    """

    def __init__(self, normalized_shape: int | list[int] | tuple[int, ...], *args: Any, **kwargs: Any) -> None:
        super().__init__(normalized_shape, *args, **kwargs)
        if len(self.normalized_shape) != 1 or self.weight is None or self.bias is None:
            raise ValueError(
                f"TritonLayerNorm needs one normalised dimension with weight and bias, got {self.normalized_shape=}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)
