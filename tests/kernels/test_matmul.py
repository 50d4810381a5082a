"""The Triton matmul kernel and its workload, on CPU.

Triton reads ``TRITON_INTERPRET`` when a function is decorated with ``@triton.jit``, and its own
library functions (``tl.cdiv``, ...) are decorated when ``triton`` is imported; so the variable
has to be set before the first ``import triton`` of a process. Another test may already have
imported triton into this one, so the kernel runs in a fresh interpreter process, once per module.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pythonpath import child_env
from triton.runtime.errors import OutOfResources

from autotune.errors import AutotuneError, NumericsError
from autotune.kernels import matmul as mm
from autotune.workloads import triton_matmul

REPO = Path(__file__).resolve().parents[2]
H200_RECORDS = REPO.parent / "shared" / "data" / "h200_triton_matmul_8192.json"
H200_SMEM_LIMIT = 232448

# Runs in the interpreter process: edge tiles in every dimension, and GROUP_M=2 over 5 tile rows
# leaves a short last group, so the grouped ordering's remainder path is exercised too.
_SCRIPT = """
import json, sys, torch
from autotune.kernels import matmul as mm
from autotune.workloads import triton_matmul
torch.manual_seed(0)
odd = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=4, num_stages=2, GROUP_M=2)
out = {"interpreted": mm.interpreted(), "errors": {}}
for name in ("fp32", "bf16", "fp16"):
    out["errors"][name] = mm.check(odd, 65, 33, 47, triton_matmul.DTYPES[name], "cpu")
a, b = torch.randn(65, 47, dtype=torch.bfloat16), torch.randn(47, 33, dtype=torch.bfloat16)
c = mm.matmul(a, b, **odd)
out["out"] = [str(c.dtype), list(c.shape)]
out["metrics"] = triton_matmul.build("tiny").run("cpu")
out["any_shape"] = triton_matmul.build("tiny", M=48, N=40, K=24, dtype="fp32").run("cpu")
# The persistent TMA variant: 7 x 5 tiles over the interpreter's 4 programs, each walking several,
# the last ones partial in M and N (TMA reads zeros past the edge and clips the store).
tma = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=4, num_stages=2, GROUP_M=2, kernel="tma_persistent")
out["tma_errors"] = {name: mm.check(tma, 100, 72, 56, triton_matmul.DTYPES[name], "cpu") for name in ("fp32", "bf16")}
out["tma_metrics"] = triton_matmul.build("tiny", kernel="tma_persistent", M=64, N=64, K=48).run("cpu")
try:
    mm.matmul(torch.randn(8, 5), torch.randn(5, 9), **tma)
except Exception as exc:
    out["tma_unaligned"] = f"{type(exc).__name__}: {exc}"
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def interpreted() -> dict[str, Any]:
    """What the kernel computed in a process started with ``TRITON_INTERPRET=1``."""
    env = child_env(REPO, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_interpreter_is_on_in_the_child(interpreted: dict[str, Any]) -> None:
    assert interpreted["interpreted"] is True


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_odd_shape_matches_torch(interpreted: dict[str, Any], dtype: str) -> None:
    error = interpreted["errors"][dtype]
    assert 0 <= error <= mm.TOLERANCE[triton_matmul.DTYPES[dtype]], f"{dtype}: relative error {error}"


def test_output_has_input_dtype_and_shape(interpreted: dict[str, Any]) -> None:
    assert interpreted["out"] == ["torch.bfloat16", [65, 33]]


def test_tiny_workload_reports_metrics(interpreted: dict[str, Any]) -> None:
    metrics = interpreted["metrics"]
    assert metrics["throughput_unit"] == "TFLOP/s"
    assert metrics["throughput"] == metrics["tflops"] > 0
    assert 0 < metrics["ms"] <= metrics["ms_p90"]
    assert metrics["rel_error"] <= mm.TOLERANCE[torch.bfloat16]
    assert metrics["shared_mem_bytes"] == mm.shared_memory_bytes(128, 128, 64, 3)


def test_a_workload_on_a_shape_of_its_own_runs_and_checks(interpreted: dict[str, Any]) -> None:
    metrics = interpreted["any_shape"]
    assert metrics["rel_error"] <= mm.TOLERANCE[torch.float32]
    assert metrics["tflops"] == pytest.approx(mm.flops(48, 40, 24) / (metrics["ms"] * 1e-3) / 1e12)


@pytest.mark.skipif(not H200_RECORDS.exists(), reason=f"{H200_RECORDS} is not there")
def test_shared_memory_estimate_matches_triton_on_h200() -> None:
    records = json.loads(H200_RECORDS.read_text())["records"]
    assert {r["status"] for r in records} == {"ok", "out_of_resources"}
    for record in records:
        p = record["params"]
        estimate = mm.shared_memory_bytes(p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"], p["num_stages"])
        if record["status"] == "ok":
            assert estimate <= H200_SMEM_LIMIT, p
        else:
            found = re.search(r"Required: (\d+)", record["error"])
            assert found is not None, record["error"]
            required = int(found.group(1))
            assert estimate == required > H200_SMEM_LIMIT, p


def test_shared_memory_scales_with_dtype_size() -> None:
    assert mm.shared_memory_bytes(128, 128, 32, 4, dtype_bytes=4) == 2 * mm.shared_memory_bytes(128, 128, 32, 4)


def test_flops_counts_multiply_and_add() -> None:
    assert mm.flops(8192, 8192, 8192) == 2 * 8192**3


@pytest.mark.skipif(mm.interpreted(), reason="this process runs Triton's interpreter")
def test_cpu_without_interpreter_is_bad_input() -> None:
    a = torch.randn(16, 16)
    with pytest.raises(AutotuneError, match="TRITON_INTERPRET=1"):
        mm.matmul(a, a, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=4, num_stages=2)


def test_matmul_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(3, 4\) @ \(5, 6\)"):
        mm.matmul(torch.ones(3, 4), torch.ones(5, 6), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=4, num_stages=2)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_persistent_tma_kernel_matches_torch_on_partial_tiles(interpreted: dict[str, Any], dtype: str) -> None:
    assert 0 <= interpreted["tma_errors"][dtype] <= mm.TOLERANCE[triton_matmul.DTYPES[dtype]]


def test_the_persistent_tma_kernel_runs_as_a_workload(interpreted: dict[str, Any]) -> None:
    metrics = interpreted["tma_metrics"]
    assert metrics["rel_error"] <= mm.TOLERANCE[torch.bfloat16]
    assert metrics["shared_mem_bytes"] == mm.shared_memory_bytes(128, 128, 64, 3) + 128 * 128 * 2  # and C's tile


def test_the_persistent_tma_kernel_names_the_rows_tma_cannot_address(interpreted: dict[str, Any]) -> None:
    assert interpreted["tma_unaligned"].startswith("AutotuneError: kernel=tma_persistent: A rows must be")


# The workload around the kernel; its run() is exercised in the interpreter above.


def test_build_presets_and_params() -> None:
    # from the command line ("-p BLOCK_M=64") or a space, a value may be a string or a float: build takes whole ones
    work = triton_matmul.build("small", BLOCK_M="64", num_stages=4.0, dtype="fp16")  # type: ignore[arg-type]
    assert work.shape == (2048, 2048, 2048)
    assert work.dtype == torch.float16
    config = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "GROUP_M": 8}
    assert work.params == {**config, "kernel": "tiled", "dtype": "fp16"}
    assert triton_matmul.build().shape == (8192, 8192, 8192)


def test_build_takes_any_shape_from_the_space() -> None:
    work = triton_matmul.build("full", M=4096, N="1024", K=512.0)  # type: ignore[arg-type]
    assert work.shape == (4096, 1024, 512)
    assert (work.params["M"], work.params["N"], work.params["K"]) == (4096, 1024, 512)  # exported with the config


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preset": "huge"}, "preset 'huge'"),
        ({"BLOCK_M": 48}, "BLOCK_M=48 must be a power of two"),
        ({"BLOCK_K": 8}, "BLOCK_K=8 must be a power of two >= 16"),
        ({"num_warps": 6}, "num_warps=6"),
        ({"num_stages": 0}, "num_stages=0"),
        ({"BLOCK_N": 64.5}, "BLOCK_N=64.5 must be an integer"),
        ({"dtype": "fp8"}, "dtype='fp8'"),
        ({"kernel": "cutlass"}, "kernel='cutlass' must be one of tiled, tma_persistent"),
        ({"M": 64, "N": 64}, "give M, N and K together (missing K)"),
        ({"M": 0, "N": 64, "K": 64}, "sizes must be >= 1, got M=0"),
    ],
)
def test_build_rejects_impossible_configs(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(AutotuneError, match=re.escape(message)):
        triton_matmul.build(**kwargs)


def test_run_raises_numerics_error_before_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mm, "check", lambda *args: math.nan)
    monkeypatch.setattr(mm, "bench", lambda *args: pytest.fail("timed a wrong kernel"))
    with pytest.raises(NumericsError, match=r"relative error nan exceeds 0\.02 for bf16"):
        triton_matmul.build("tiny").run("cpu")


def test_run_lets_out_of_resources_through(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_big(*args: Any) -> float:
        raise OutOfResources(245760, H200_SMEM_LIMIT, "shared memory")

    monkeypatch.setattr(mm, "check", too_big)
    with pytest.raises(OutOfResources, match="Required: 245760"):
        triton_matmul.build("tiny", BLOCK_N=256, BLOCK_K=128).run("cpu")
