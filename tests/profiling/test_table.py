"""The before/after table: readable in 100 columns, shares of each step, speedup from the timed windows."""

from __future__ import annotations

from typing import Any

from autotune.profiling.kernel_categories import CATEGORIES
from autotune.profiling.table import WIDTH, ProfiledTrial, markdown, render, speedup

GEMM = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8::Params)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>>(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
)


def gpu_profile(step_ms: float, gemm_ms: float, idle_ms: float) -> dict[str, Any]:
    """What capture() returns on a GPU (as the trial sends it back: plain JSON data)."""
    categories: dict[str, float | None] = dict.fromkeys(CATEGORIES, 0.0)
    categories |= {"matmul_conv": gemm_ms, "norm_elementwise": 1.0, "copy_h2d": 0.5, "gpu_idle": idle_ms}
    categories["other"] = step_ms - gemm_ms - 1.5 - idle_ms
    top = [
        {"name": GEMM, "ms": gemm_ms, "calls": 12.0, "category": "matmul_conv"},
        {"name": ADD, "ms": 1.0, "calls": 40.0, "category": "norm_elementwise"},
        {"name": "Memcpy HtoD (Pageable -> Device)", "ms": 0.5, "calls": 2.0, "category": "copy_h2d"},
    ]
    return {"device": "cuda", "steps": 5, "step_ms": step_ms, "categories_ms": categories, "top": top, "trace": None}


def side(label: str, trial: int, batch_size: int, throughput: float, profile: dict[str, Any]) -> ProfiledTrial:
    params = {"batch_size": batch_size, "precision": "bf16" if label == "winner" else "default"}
    metrics = {"throughput": throughput, "throughput_unit": "images/s", "step_ms_p50": profile["step_ms"] * 0.9}
    return ProfiledTrial(label, trial, params, metrics, profile)


BEFORE = side("default", 0, 128, 2100.0, gpu_profile(60.0, 30.0, 20.0))
AFTER = side("winner", 17, 256, 7300.0, gpu_profile(35.0, 20.0, 2.0))


def test_the_table_fits_100_columns_and_shows_both_sides() -> None:
    text = render(BEFORE, AFTER, "profile of study resnet50: resnet50 (full) on NVIDIA H200, 5 steps each")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert "default (trial 0)" in lines[2] and "winner (trial 17)" in lines[2]
    assert "3.48x speedup" in text  # 7300 / 2100: throughput, not per-step times (the batch sizes differ)
    idle = next(line for line in lines if line.strip().startswith("GPU idle"))
    assert idle.split()[2:] == ["20.00", "33.3%", "2.000", "5.7%"]
    assert "winner's knobs that differ: batch_size=256 precision=bf16" in text
    assert "top 10 kernels, default (trial 0)" in text and "top 10 kernels, winner (trial 17)" in text


def test_kernel_names_lose_return_type_and_arguments_and_are_clipped() -> None:
    text = render(BEFORE, AFTER, "t")
    gemm_line = next(line for line in text.splitlines() if "cutlass::Kernel2<" in line)
    assert "void " not in gemm_line and "::Params" not in gemm_line
    assert "..." in gemm_line and gemm_line.rstrip().endswith("matmul/conv")
    assert "  vectorized_elementwise_kernel<4, CUDAFunctor" in text  # at::native:: dropped
    assert "Memcpy HtoD (Pageable -> Device)" in text


def test_cpu_profiles_say_what_does_not_apply() -> None:
    categories = dict.fromkeys(CATEGORIES, 1.0) | {"copy_h2d": None, "copy_d2h": None, "gpu_idle": None}
    profile = {"device": "cpu", "steps": 2, "step_ms": 5.0, "categories_ms": categories, "top": []}
    cpu = side("default", 0, 8, 100.0, profile)
    text = render(cpu, side("winner", 3, 8, 90.0, profile), "t")
    assert next(line for line in text.splitlines() if "GPU idle" in line).split()[2:] == ["n/a", "n/a"]
    assert "0.90x speedup" in text  # a winner re-run slower than the default says so
    assert "top 10 ops, default (trial 0)" in text and "On a CPU" in text


def test_speedup_needs_both_throughputs() -> None:
    assert speedup(BEFORE, AFTER) == 7300.0 / 2100.0
    failed = ProfiledTrial("winner", 1, {}, {}, BEFORE.profile)
    assert speedup(BEFORE, failed) is None


def test_markdown_keeps_the_table_verbatim() -> None:
    text = render(BEFORE, AFTER, "title")
    assert markdown(text, "title") == f"# title\n\n```\n{text}```\n"
