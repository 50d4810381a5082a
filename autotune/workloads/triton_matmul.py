"""The Triton matmul as a trial workload: its block sizes are the tunable parameters.

Unlike the training workloads, ``build`` returns a :class:`KernelWorkload`: a trial checks the
kernel's output against torch and then times it, there is no model to train. Run it as
``autotune.workloads.triton_matmul:build``; on CPU it needs ``TRITON_INTERPRET=1`` set before the
process starts (use ``--preset tiny`` there). A configuration that needs more shared memory than
the GPU has raises ``triton.runtime.errors.OutOfResources``, which this module lets through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from autotune.errors import AutotuneError, NumericsError
from autotune.kernels import matmul as mm

__all__ = ["DTYPES", "SHAPES", "KernelWorkload", "NumericsError", "build"]

#: (M, N, K) per preset: full is the shape of the recorded H200 measurements.
SHAPES = {"full": (8192, 8192, 8192), "small": (2048, 2048, 2048), "tiny": (64, 64, 64)}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True)
class KernelWorkload:
    """One kernel configuration on one problem: ``run(device)`` checks it, then times it."""

    name: str
    params: dict[str, Any]
    shape: tuple[int, int, int]
    dtype: torch.dtype
    config: dict[str, Any] = field(repr=False)

    def run(self, device: torch.device | str) -> dict[str, Any]:
        """Check against torch (raising :class:`NumericsError` past tolerance), then benchmark.

        Returns ``throughput`` (TFLOP/s) with ``throughput_unit``, ``tflops``, ``ms`` (median),
        ``ms_p90``, ``rel_error`` and the ``shared_mem_bytes`` estimate.
        """
        M, N, K = self.shape
        error = mm.check(self.config, M, N, K, self.dtype, device)
        tolerance = mm.TOLERANCE[self.dtype]
        if not error <= tolerance:  # also catches NaN
            raise NumericsError(f"relative error {error:.3g} exceeds {tolerance:g} for {self.params['dtype']}")
        timing = mm.bench(self.config, M, N, K, self.dtype, device)
        smem = mm.shared_memory_bytes(
            self.config["BLOCK_M"], self.config["BLOCK_N"], self.config["BLOCK_K"],
            self.config["num_stages"], dtype_bytes=self.dtype.itemsize, kernel=self.config["kernel"],
        )  # fmt: skip
        return {
            "throughput": timing["tflops"],
            "throughput_unit": "TFLOP/s",
            **timing,
            "rel_error": error,
            "shared_mem_bytes": float(smem),
        }


def _as_int(name: str, value: Any) -> int:
    """An integer parameter; "64" (from ``-p BLOCK_M=64``) and 64.0 are accepted, 64.5 is not."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not number.is_integer() or isinstance(value, bool):
        raise AutotuneError(f"triton_matmul: {name}={value!r} must be an integer")
    return int(number)


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _validate(config: dict[str, int], dtype: str, kernel: str) -> None:
    """Reject values Triton can never compile, naming them (tl.arange needs powers of two, tl.dot >= 16)."""
    problems = [
        f"{key}={config[key]} must be a power of two >= 16"
        for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K")
        if config[key] < 16 or not _power_of_two(config[key])
    ]
    if not _power_of_two(config["num_warps"]):
        problems.append(f"num_warps={config['num_warps']} must be a power of two")
    problems += [f"{key}={config[key]} must be >= 1" for key in ("num_stages", "GROUP_M") if config[key] < 1]
    if dtype not in DTYPES:
        problems.append(f"dtype={dtype!r} must be one of {', '.join(DTYPES)}")
    if kernel not in mm.KERNELS:
        problems.append(f"kernel={kernel!r} must be one of {', '.join(mm.KERNELS)}")
    if problems:
        raise AutotuneError("triton_matmul: " + "; ".join(problems))


def build(
    preset: str = "full",
    BLOCK_M: int = 128,
    BLOCK_N: int = 128,
    BLOCK_K: int = 64,
    num_warps: int = 8,
    num_stages: int = 3,
    GROUP_M: int = 8,
    dtype: str = "bf16",
    kernel: str = "tiled",
    M: int | None = None,
    N: int | None = None,
    K: int | None = None,
) -> KernelWorkload:
    """The matmul workload for one configuration, on ``M x K @ K x N`` when given (a space's ``args``
    or params), else on ``preset``'s shape (full 8192^3, small 2048^3, tiny 64^3). ``kernel`` is
    the variant: ``tiled`` (the tutorial's) or ``tma_persistent`` (Hopper and newer)."""
    if preset not in SHAPES:
        raise AutotuneError(f"preset {preset!r} is not valid: expected one of {', '.join(SHAPES)}")
    shape = _shape(preset, M, N, K)
    given = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K,
             "num_warps": num_warps, "num_stages": num_stages, "GROUP_M": GROUP_M}  # fmt: skip
    config = {key: _as_int(key, value) for key, value in given.items()}
    _validate(config, dtype, kernel)
    explicit = {"M": shape[0], "N": shape[1], "K": shape[2]} if (M, N, K) != (None, None, None) else {}
    return KernelWorkload(
        name="triton_matmul",
        params={**config, "kernel": kernel, "dtype": dtype, **explicit},
        shape=shape,
        dtype=DTYPES[dtype],
        config={**config, "kernel": kernel},
    )


def _shape(preset: str, M: int | None, N: int | None, K: int | None) -> tuple[int, int, int]:
    """The problem size: all of M, N, K given, or none (the preset's)."""
    given = {"M": M, "N": N, "K": K}
    if all(v is None for v in given.values()):
        return SHAPES[preset]
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise AutotuneError(f"triton_matmul: give M, N and K together (missing {', '.join(missing)})")
    sizes = {name: _as_int(name, value) for name, value in given.items()}
    bad = [f"{name}={value}" for name, value in sizes.items() if value < 1]
    if bad:
        raise AutotuneError(f"triton_matmul: sizes must be >= 1, got {', '.join(bad)}")
    return sizes["M"], sizes["N"], sizes["K"]
