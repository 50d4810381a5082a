"""Fused LM head + cross-entropy that never materialises the whole ``tokens x vocab`` logits.

``fused_linear_cross_entropy(hidden, weight, targets)`` equals
``F.cross_entropy(hidden @ weight.T, targets)`` (mean over tokens) and its gradients. It walks the
tokens in chunks of ``chunk`` rows, all in the forward pass:

1. ``logits = hidden_chunk @ weight.T`` (a torch matmul: cuBLAS is hard to beat there);
2. ``cross_entropy_fwd_bwd``, one program per row, finds the row's log-sum-exp online over the vocab
   in ``BLOCK_V`` steps, writes the row's loss, and overwrites the logits in place with the loss's
   gradient, ``softmax - onehot``;
3. ``grad_hidden_chunk = grad_logits @ weight`` and ``grad_weight += grad_logits.T @ hidden_chunk``.

The backward only scales the saved gradients by ``grad_output / tokens``. The mean's ``1/tokens`` is
applied there and not in the kernel: ``softmax / 16384`` underflows fp16 for most of a 50k vocab,
``softmax`` alone does not. So only one chunk of logits (``chunk x V``) is alive at a time, in
the matmul's dtype, instead of the whole logits in that dtype plus an fp32 copy and its gradient.

Numerics: the dtype of the matmuls is autocast's where autocast is on (fp32 weights, bf16
matmuls), else that of the inputs; the kernel does its math in fp32 and the loss is fp32;
``grad_weight`` is accumulated over the chunks in fp32. Every target must be a class index in
``[0, V)`` (no ``ignore_index``). Any vocabulary size works: the last ``BLOCK_V`` step is masked
(GPT-2's padded 50304 = 12 x 4096 + 1152; the tiny preset's 512).

The kernel overwrites its input, so its autotuner restores the logits after each benchmarked config
(``restore_value``): unpinned on a GPU it picks a config on the real values. In Triton's CPU
interpreter (``TRITON_INTERPRET=1`` before ``triton`` is first imported) pin it to one config first.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch.nn import functional as F

from autotune.errors import AutotuneError
from autotune.kernels.declare import tunable

__all__ = ["DEFAULT_CHUNK", "cross_entropy_fwd_bwd", "fused_linear_cross_entropy", "reference"]

#: Tokens per chunk: GPT-2's 50304-word vocabulary makes that 412 MB of bf16 logits at a time.
DEFAULT_CHUNK = 4096


@triton.jit
def _cross_entropy_fwd_bwd(logits_ptr, stride_row, targets_ptr, losses_ptr, V, BLOCK_V: tl.constexpr):
    # int64: row * stride passes 2**31 for chunks of more than 42k rows of a 50k vocab.
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    target = tl.load(targets_ptr + row)
    # Online log-sum-exp: running max m and sum d of exp(x - m), rescaled when m grows.
    m = float("-inf")
    d = 0.0
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(base + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    # Read the target's logit before the second pass overwrites the row with gradients.
    tl.store(losses_ptr + row, lse - tl.load(base + target).to(tl.float32))
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        mask = cols < V
        x = tl.load(base + cols, mask=mask, other=0.0).to(tl.float32)
        grad = tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)
        tl.store(base + cols, grad.to(logits_ptr.dtype.element_ty), mask=mask)


# Feasibility: at least one element per thread (below that, threads only duplicate work), at most 128
# fp32 per thread (a tile and its exp already fill a thread's 255 registers: bigger tiles spill).
_declared = tunable(
    key=["V"],
    BLOCK_V=[256, 512, 1024, 2048, 4096, 8192, 16384, 32768],
    num_warps=[2, 4, 8, 16, 32],
    feasibility="32 * num_warps <= BLOCK_V and BLOCK_V <= 4096 * num_warps",
)(_cross_entropy_fwd_bwd)

#: The kernel a space lists (``autotune.kernels.cross_entropy:cross_entropy_fwd_bwd``): ``tunable``'s
#: configs and ordered values, in an autotuner that restores the logits it overwrites while benchmarking.
cross_entropy_fwd_bwd = triton.autotune(configs=_declared.configs, key=["V"], restore_value=["logits_ptr"])(
    _cross_entropy_fwd_bwd
)
cross_entropy_fwd_bwd.autotune_values = _declared.autotune_values
cross_entropy_fwd_bwd.autotune_feasibility = _declared.autotune_feasibility


def _interpreted() -> bool:
    """Whether the kernel runs in Triton's CPU interpreter (``TRITON_INTERPRET=1`` at import)."""
    return not isinstance(cross_entropy_fwd_bwd.fn, triton.runtime.JITFunction)


def _check_inputs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int) -> None:
    if hidden.ndim != 2 or weight.ndim != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"hidden (T, D) and weight (V, D) expected, got {tuple(hidden.shape)}, {tuple(weight.shape)}")
    if targets.shape != (hidden.shape[0],) or targets.dtype != torch.long:
        raise ValueError(
            f"targets must be int64 of shape ({hidden.shape[0]},), got {targets.dtype} {tuple(targets.shape)}"
        )
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk=}")
    if hidden.device.type == "cpu" and not _interpreted():
        raise AutotuneError(
            "the Triton cross-entropy runs on CPU only with TRITON_INTERPRET=1 set before Python starts"
        )


def _matmul_dtype(hidden: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    """autocast's dtype where it is on (what ``hidden @ weight.T`` would give), else the inputs' common dtype."""
    device = hidden.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return torch.promote_types(hidden.dtype, weight.dtype)


def _losses_and_grads(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int, need_hidden: bool, need_weight: bool
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Per-token losses (fp32), and the unscaled gradients of their sum wrt ``hidden`` and ``weight`` if needed."""
    tokens, vocab = hidden.shape[0], weight.shape[0]
    dtype = _matmul_dtype(hidden, weight)
    h, w = hidden.to(dtype), weight.to(dtype)
    losses = torch.empty(tokens, device=hidden.device, dtype=torch.float32)
    grad_hidden = torch.empty_like(hidden) if need_hidden else None
    grad_weight = torch.zeros(weight.shape, device=weight.device, dtype=torch.float32) if need_weight else None
    with torch.autocast(hidden.device.type, enabled=False):  # the dtypes are chosen above, once
        for start in range(0, tokens, chunk):
            end = min(start + chunk, tokens)
            h_chunk = h[start:end]
            logits = h_chunk @ w.T  # (rows, V), contiguous: the kernel assumes unit column stride
            cross_entropy_fwd_bwd[(end - start,)](
                logits, logits.stride(0), targets[start:end], losses[start:end], vocab
            )
            if grad_hidden is not None:
                grad_hidden[start:end] = logits @ w
            if grad_weight is not None and dtype == torch.float32:
                grad_weight.addmm_(logits.T, h_chunk)
            elif grad_weight is not None:
                grad_weight += logits.T @ h_chunk  # fp32 sum of the chunks' bf16/fp16 products
    return losses, grad_hidden, grad_weight


class _FusedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int
    ) -> torch.Tensor:
        need_hidden, need_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        losses, grad_hidden, grad_weight = _losses_and_grads(hidden, weight, targets, chunk, need_hidden, need_weight)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.tokens, ctx.weight_dtype = hidden.shape[0], weight.dtype
        return losses.sum() / max(hidden.shape[0], 1)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None]:
        grad_hidden, grad_weight = ctx.saved_tensors
        scale = grad_output / ctx.tokens  # the mean's 1/tokens, kept out of the kernel (see the module docstring)
        dh = grad_hidden * scale.to(grad_hidden.dtype) if grad_hidden is not None else None
        dw = (grad_weight * scale).to(ctx.weight_dtype) if grad_weight is not None else None
        return dh, dw, None, None


def fused_linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int = DEFAULT_CHUNK
) -> torch.Tensor:
    """``F.cross_entropy(hidden @ weight.T, targets)`` (fp32 scalar, mean over tokens), ``chunk`` tokens at a time.

    ``hidden`` is ``(tokens, D)``, ``weight`` ``(V, D)`` (an LM head's, tied to the embedding or not),
    ``targets`` ``(tokens,)`` int64 in ``[0, V)``. Gradients are computed during this call when grad
    mode is on and ``hidden`` or ``weight`` requires them; ``backward()`` then only scales them.
    """
    _check_inputs(hidden, weight, targets, chunk)
    if hidden.device.type == "meta":
        # Shapes alone, no kernel (a step's FLOPs are counted on the meta device: autotune/trial/flops.py): the same
        # matmuls as the fused path, the logits' forward and the two gradients'.
        return F.cross_entropy(hidden @ weight.T, targets)
    targets = targets.contiguous()
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
        return _FusedLinearCrossEntropy.apply(hidden, weight, targets, chunk)
    losses, _, _ = _losses_and_grads(hidden, weight, targets, chunk, need_hidden=False, need_weight=False)
    return losses.sum() / max(hidden.shape[0], 1)


def reference(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``F.cross_entropy(hidden @ weight.T, targets)`` of the inputs upcast to fp32: what the fused path computes."""
    return F.cross_entropy(hidden.float() @ weight.float().T, targets)
