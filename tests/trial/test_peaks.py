"""Dense peaks by GPU and precision, and MFU against the right one."""

from __future__ import annotations

import pytest

from autotune.trial.flops import FlopCount, rate_metrics
from autotune.trial.peaks import DENSE_PEAKS, PEAK_PRECISIONS, dense_peak, peak_precision


@pytest.mark.parametrize(
    ("precision", "tf32_matmuls", "float8", "expected"),
    [
        ("bf16", False, "tensorwise", "fp8"),  # float8's layers run their matmuls in fp8, whatever autocast does
        ("bf16", False, "rowwise", "fp8"),
        ("bf16", False, "none", "bf16"),
        ("fp16", True, "none", "fp16"),  # autocast's matmuls are half precision, TF32 or not
        ("tf32", False, "none", "tf32"),
        ("default", True, "none", "tf32"),  # matmul_precision=high
        ("default", False, "none", "fp32"),  # PyTorch's defaults: fp32 matmuls without TF32
        ("fp32", False, "none", "fp32"),
    ],
)
def test_peak_precision(precision: str, tf32_matmuls: bool, float8: str, expected: str) -> None:
    assert peak_precision(precision, tf32_matmuls, float8) == expected


def test_peak_precision_without_a_float8_knob_reads_none() -> None:
    assert peak_precision("bf16", False) == "bf16"


@pytest.mark.parametrize(
    ("gpu", "precision", "peak"),
    [
        ("NVIDIA H200", "bf16", 989.5),
        ("NVIDIA H200", "fp8", 1979.0),
        ("NVIDIA H200", "tf32", 494.5),
        ("NVIDIA H200", "fp32", 67.0),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.5),  # the SXM part
        ("NVIDIA H100 PCIe", "bf16", 756.5),
        ("NVIDIA H100 NVL", "fp16", 835.5),
        ("NVIDIA H200 NVL", "fp8", 1670.5),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
        ("NVIDIA A100 80GB PCIe", "tf32", 156.0),
        ("NVIDIA L40S", "fp8", 733.0),
        ("NVIDIA GeForce RTX 4090", "bf16", 165.2),
    ],
)
def test_dense_peaks(gpu: str, precision: str, peak: float) -> None:
    assert dense_peak(gpu, precision) == peak


def test_no_peak_for_an_unknown_gpu_a_mig_slice_or_fp8_without_its_tensor_cores() -> None:
    assert dense_peak("NVIDIA GeForce GTX 1080", "fp32") is None
    assert dense_peak("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16") is None  # a seventh of the GPU
    assert dense_peak("NVIDIA A100-SXM4-40GB", "fp8") is None


def test_every_gpu_has_a_dense_figure_under_each_sparse_one() -> None:
    # Dense tensor-core rates: fp16 and bf16 the same, tf32 half of them, fp8 twice (to the datasheets' rounding:
    # the L40S sheet prints 362.05 for bf16 beside 183 for tf32); fp32 on CUDA cores no faster than tf32.
    for name, peaks in DENSE_PEAKS:
        assert peaks.bf16 == peaks.fp16 and peaks.fp32 <= peaks.tf32 < peaks.bf16, name
        assert peaks.tf32 == pytest.approx(peaks.bf16 / 2, rel=0.02), name
        assert peaks.fp8 is None or peaks.fp8 == pytest.approx(2 * peaks.bf16, rel=0.02), name
    assert set(PEAK_PRECISIONS) == {"fp8", "bf16", "fp16", "tf32", "fp32"}


def test_mfu_is_against_the_peak_of_the_precision_that_ran() -> None:
    def mfu(tflops: float, gpu: str, precision: str, float8: str = "none") -> float | None:
        """MFU as a trial reports it, of ``tflops`` achieved (a second's step of that many TFLOPs)."""
        return rate_metrics(FlopCount(tflops * 1e12), 1000.0, gpu, precision, float8=float8).get("mfu")

    assert mfu(420.0, "NVIDIA H200", "bf16") == pytest.approx(420.0 / 989.5)  # the 0.3B decoder's winner: ~42%
    assert mfu(420.0, "NVIDIA H200", "bf16", float8="tensorwise") == pytest.approx(420.0 / 1979.0)
    assert mfu(40.0, "NVIDIA H200", "fp32") == pytest.approx(40.0 / 67.0)
    assert mfu(420.0, "a CPU", "bf16") is None
