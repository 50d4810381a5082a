"""Kernel and op names as cuBLAS, cuDNN, CUTLASS, FlashAttention, PyTorch, Inductor and the profiler spell them."""

from __future__ import annotations

import pytest

from autotune.profiling.kernel_categories import CATEGORIES, KERNEL_CATEGORIES, classify

NAMES = {
    "matmul_conv": [  # cuBLAS, CUTLASS, cuDNN convolutions, Inductor's templates, Triton, PyTorch's CPU ops
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off",
        "ampere_sgemm_128x64_nn",
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN",
        "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
        "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)",
        "void splitKreduce_kernel<32, 16, int, float, float, float, float, true>(cublasSplitKParams<float>)",
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4",
        "sm86_xmma_dgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nchw",
        "void cudnn::cnn::wgrad2d_grouped_direct_kernel<float, float, float>(cudnn::cnn::WgradGroupedDirectParams)",
        "triton_tem_fused_addmm_0",
        "_matmul_kernel",
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::linear",
        "aten::mkldnn_convolution",
        "aten::convolution_backward",
    ],
    "attention": [  # CUTLASS-built or not
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, cutlass::bfloat16_t>>",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>::Params)",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
    ],
    "norm_elementwise": [  # norms (never GEMMs, even when named GammaBeta...), elementwise, reductions, Inductor's
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<float, float>(long, long)",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3>>(int)",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>",
        "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>",
        "triton_poi_fused__to_copy_convert_element_type_0",
        "triton_per_fused_native_layer_norm_1",
        "triton_red_fused_convolution_backward_sum_2",
        "layernorm_fwd",
        "_cross_entropy_fwd_bwd",
        "aten::native_batch_norm",
        "aten::add_",
        "aten::mul",
        "aten::threshold_backward",
        "aten::_foreach_lerp_",
        "aten::max_pool2d_with_indices",
    ],
    "copy_h2d": ["Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pageable -> Device)"],
    "copy_d2h": ["Memcpy DtoH (Device -> Pageable)"],
    "other": ["Memcpy DtoD (Device -> Device)", "Memset (Device)", "aten::empty_strided", "some_custom_kernel"],
}
CASES = [(name, category) for category, names in NAMES.items() for name in names]


@pytest.mark.parametrize(("name", "category"), CASES, ids=[name[:40] for name, _ in CASES])
def test_names_land_in_their_category(name: str, category: str) -> None:
    assert classify(name) == category


def test_every_kernel_category_is_reachable_and_labelled() -> None:
    assert set(KERNEL_CATEGORIES) <= set(CATEGORIES)
    assert set(NAMES) == set(KERNEL_CATEGORIES)
