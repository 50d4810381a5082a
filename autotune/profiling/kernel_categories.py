"""Where a kernel's or an op's time goes: one category per name, by patterns that hold across libraries.

Names come from the CUDA side (cuBLAS ``sm90_xmma_gemm_...``, ``ampere_sgemm_...``, ``nvjet_...``;
cuDNN ``..._fprop_implicit_gemm``, ``bn_fw_tr_...``; CUTLASS; FlashAttention; PyTorch's
``vectorized_elementwise_kernel``; Inductor's ``triton_poi_fused_...``, ``triton_per_...``,
``triton_red_...``, ``triton_tem_...``; the profiler's ``Memcpy HtoD (Pinned -> Device)``) and from the
CPU side (``aten::mm``, ``aten::mkldnn_convolution``, ``aten::native_layer_norm`` ...). Patterns are
tried in order, so an attention kernel built from CUTLASS GEMMs counts as attention, and a layer-norm
backward (``GammaBetaBackward``) never as a GEMM.
"""

from __future__ import annotations

import re

__all__ = ["CATEGORIES", "DATA_WAIT", "GPU_IDLE", "KERNEL_CATEGORIES", "OTHER", "classify"]

# Category key -> what a table calls it. Keys are stable: they name metrics and JSON fields.
CATEGORIES = {
    "matmul_conv": "matmul/conv",
    "attention": "attention",
    "norm_elementwise": "norm & elementwise",
    "copy_h2d": "copy host-to-device",
    "copy_d2h": "copy device-to-host",
    "data_wait": "data wait",
    "gpu_idle": "GPU idle",
    "other": "other",
}
DATA_WAIT = "data_wait"  # host time inside the job's ``autotune.data_wait`` ranges, not a kernel
GPU_IDLE = "gpu_idle"  # step time with no kernel or copy running, not a kernel
OTHER = "other"
KERNEL_CATEGORIES = tuple(key for key in CATEGORIES if key not in (DATA_WAIT, GPU_IDLE))

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        ("copy_h2d", r"^memcpy htod"),
        ("copy_d2h", r"^memcpy dtoh"),
        ("other", r"^mem(cpy|set)\b"),  # device-to-device, peer-to-peer, memset
        ("attention", r"flash|fmha|attention|attn|sdpa|scaled_dot_product"),
        # Before the GEMMs: norm backward kernels are named GammaBeta..., some fused with CUTLASS epilogues.
        ("norm_elementwise", r"norm|welford|gammabeta|\bbn_(fw|bw)|triton_(poi|per|red)_"),
        (
            "matmul_conv",
            r"gemm|gemv|matmul|xmma|[ghw]mma|cutlass|cublas|nvjet|splitkreduce|triton_tem_"
            r"|conv(?!ert)|[dw]grad|fprop|winograd|mkldnn|\b(aten::)?(mm|bmm|addmm|baddbmm|linear|_scaled_mm)\b",
        ),
        (
            "norm_elementwise",
            r"elementwise|vectori[sz]ed|unrolled|reduce|softmax|multi_tensor_apply|foreach|dropout|pool"
            r"|relu|gelu|silu|sigmoid|tanh|threshold|clamp|where|copy|fill|zero|cat\b|index|embedding|gather"
            r"|scatter|cross_entropy|nll_loss|nchwtonhwc|nhwctonchw|transpose|adam|lerp|addc|sqrt|exp|log"
            r"|pow|neg|\b(aten::)?(add|sub|mul|div|sum|mean|max|min|abs)_?\b",
        ),
    )
)


def classify(name: str) -> str:
    """The category key (one of :data:`KERNEL_CATEGORIES`) of a kernel, copy or op name."""
    for category, pattern in _PATTERNS:
        if pattern.search(name):
            return category
    return OTHER
