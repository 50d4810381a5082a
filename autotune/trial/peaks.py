"""How far a step is from the GPU's limit: the dense peak TFLOP/s of NVIDIA GPUs by precision, and MFU.

MFU (model FLOPs utilisation) is the step's model FLOPs per second (:mod:`autotune.trial.flops`) over the GPU's dense
peak for the precision its matmuls ran in (:func:`peak_precision`): FP8 where the ``float8`` knob converted the
linear layers, bf16 or fp16 under autocast, TF32 where fp32 matmuls use TF32, else plain fp32 on the CUDA cores.
Matmuls decide: at ``precision=default`` PyTorch lets cuDNN run convolutions in TF32 while matmuls stay fp32, so a
convolutional model's MFU there is taken against the fp32 peak and reads high.

The peaks are NVIDIA's datasheet figures, DENSE: the datasheets print tensor-core figures "with sparsity" (2:4
structured sparsity, which training does not use), twice the dense rate, and those are halved here. A GPU that is
not in the table (or a MIG slice of one, a fraction of it), a CPU, or a precision the GPU has no tensor cores for
has no MFU; its TFLOP/s are still reported.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DENSE_PEAKS", "PEAK_PRECISIONS", "DensePeaks", "dense_peak", "peak_precision"]

PEAK_PRECISIONS = ("fp8", "bf16", "fp16", "tf32", "fp32")


@dataclass(frozen=True)
class DensePeaks:
    """One GPU's dense peak TFLOP/s: tensor cores for fp8, bf16, fp16 (fp32 accumulate) and tf32; CUDA cores for
    fp32. None: no such tensor cores."""

    fp32: float
    tf32: float
    bf16: float
    fp16: float
    fp8: float | None


# (what torch.cuda.get_device_name() contains, its peaks), the first that matches wins: the more specific name first.
# Sources, tensor-core figures halved from the "with sparsity" ones printed: the NVIDIA H100 Tensor Core GPU datasheet
# (H100 SXM, H100 NVL) and its earlier edition (H100 PCIe); the NVIDIA H200 Tensor Core GPU datasheet (H200 SXM,
# H200 NVL); the NVIDIA GH200 Grace Hopper Superchip datasheet; the NVIDIA A100 Tensor Core GPU datasheet (every
# A100: SXM and PCIe, 40 and 80 GB); the NVIDIA L40S datasheet; for the GeForce RTX 4090, which has no datasheet,
# NVIDIA's Ada GPU architecture whitepaper (its table of the 4090's peak rates, fp32 accumulate).
DENSE_PEAKS: tuple[tuple[str, DensePeaks], ...] = (
    ("GH200", DensePeaks(fp32=67.0, tf32=494.5, bf16=989.5, fp16=989.5, fp8=1979.0)),
    ("H200 NVL", DensePeaks(fp32=60.0, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5)),
    ("H200", DensePeaks(fp32=67.0, tf32=494.5, bf16=989.5, fp16=989.5, fp8=1979.0)),
    ("H100 PCIe", DensePeaks(fp32=51.0, tf32=378.0, bf16=756.5, fp16=756.5, fp8=1513.0)),
    ("H100 NVL", DensePeaks(fp32=60.0, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5)),
    ("H100", DensePeaks(fp32=67.0, tf32=494.5, bf16=989.5, fp16=989.5, fp8=1979.0)),  # SXM: "H100 80GB HBM3"
    ("A100", DensePeaks(fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0, fp8=None)),
    ("L40S", DensePeaks(fp32=91.6, tf32=183.0, bf16=362.05, fp16=362.05, fp8=733.0)),
    ("RTX 4090", DensePeaks(fp32=82.6, tf32=82.6, bf16=165.2, fp16=165.2, fp8=330.3)),
)


def peak_precision(precision: str, tf32_matmuls: bool, float8: str = "none") -> str:
    """The precision a step's matmuls ran in, for its peak: ``fp8`` when the ``float8`` knob is on (anything but
    ``none``), else ``bf16``/``fp16`` under autocast, ``tf32`` when fp32 matmuls use TF32, else ``fp32``."""
    if float8 != "none":
        return "fp8"
    if precision in ("bf16", "fp16"):
        return precision
    return "tf32" if tf32_matmuls or precision == "tf32" else "fp32"


def dense_peak(gpu: str, precision: str) -> float | None:
    """The dense peak TFLOP/s of the GPU named ``gpu`` (as ``torch.cuda.get_device_name()`` names it) in
    ``precision`` (one of :data:`PEAK_PRECISIONS`); None for a GPU not in :data:`DENSE_PEAKS` or a MIG slice."""
    if "MIG" in gpu:
        return None
    peaks = next((peaks for name, peaks in DENSE_PEAKS if name in gpu), None)
    return getattr(peaks, precision) if peaks is not None else None
