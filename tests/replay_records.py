"""Replay records for the matmul space (``search_spaces/triton_matmul.yaml``), made here so CI needs no data files.

The shape of ``../shared/data/h200_triton_matmul_8192.json`` (108 configurations, ``tflops`` per ok record,
``out_of_resources`` where the tiles need more shared memory than an H200 has), with a smooth made-up
TFLOP/s surface whose best is where the real records' is (256, 128, 64, 8 warps, 3 stages, 727.3).
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from pathlib import Path
from typing import Any

SHARED_MEMORY_BYTES = 232448  # an H200's per-block limit, as the real records' errors say


def _tflops(m: int, n: int, k: int, warps: int, stages: int) -> float:
    """Best at (256, 128, 64, 8, 3); every step away costs, so rankings have structure a sampler can learn."""
    cost = 90 * abs(math.log2(m / 256)) + 70 * abs(math.log2(n / 128)) + 50 * abs(math.log2(k / 64))
    cost += 40 * (warps != 8) + 15 * (stages != 3) + (m * 7 + n * 3 + k) % 11  # a little deterministic jitter
    return round(727.3 - cost, 1)


def matmul_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for m, n, k, warps, stages in itertools.product((64, 128, 256), (64, 128, 256), (32, 64, 128), (4, 8), (3, 4)):
        params = {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_warps": warps, "num_stages": stages}
        required = (m * k + k * n) * 2 * stages
        if required > SHARED_MEMORY_BYTES:
            error = f"OutOfResources: out of resource: shared memory, Required: {required}, Hardware limit: 232448."
            records.append({"params": params, "status": "out_of_resources", "error": error})
            continue
        tflops = _tflops(m, n, k, warps, stages)
        records.append({"params": params, "status": "ok", "ms": round(2 * 8192**3 / tflops / 1e9, 5), "tflops": tflops})
    return records


def write_matmul_records(path: Path) -> Path:
    path.write_text(json.dumps({"what": "synthetic matmul records for tests", "records": matmul_records()}))
    return path


MATMUL_RECORDS = write_matmul_records(Path(tempfile.mkdtemp(prefix="autotune-records-")) / "matmul.json")
