"""The ptxas in Triton's keys: torch's own, chosen before anything compiles, in every process that applies knobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

# A fresh interpreter applies the knobs, then says which ptxas Triton's keys name (the variable; the version Triton
# caches at its first key, asked after the compiled step when there is a GPU).
_PROBE = textwrap.dedent(
    """
    import json, os, sys
    import torch
    from autotune import knobs
    from autotune.knobs import Knobs
    device = sys.argv[1]
    model = torch.nn.Linear(64, 64).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # on a CPU nothing compiles (no ptxas to name): the knobs' start alone is what the test is about
    model, ctx = knobs.apply(model, optimizer, Knobs(compile_mode="default" if device == "cuda" else "none"), device)
    ctx.backward(model(torch.randn(8, 64, device=device)).pow(2).mean())
    found = {"path": os.environ.get("TRITON_PTXAS_PATH")}
    if device == "cuda":
        from triton.backends.nvidia.compiler import get_ptxas_version
        found["version"] = get_ptxas_version(torch.cuda.get_device_capability()[0] * 10).strip().splitlines()[-1]
    print(json.dumps(found))
    """
)


def _probe(device: str, **env: str) -> dict[str, str | None]:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, device],
        cwd=REPO,
        env={**{k: v for k, v in os.environ.items() if k != "TRITON_PTXAS_PATH"}, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_a_ptxas_the_user_chose_stays() -> None:
    assert _probe("cpu", TRITON_PTXAS_PATH="/opt/cuda/bin/ptxas")["path"] == "/opt/cuda/bin/ptxas"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_triton_keys_name_torchs_ptxas_after_apply() -> None:
    found = _probe("cuda")
    torch_ptxas = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
    if not os.path.exists(torch_ptxas):
        pytest.skip("this torch ships no ptxas of its own")
    version = subprocess.run([torch_ptxas, "--version"], capture_output=True, text=True, check=True).stdout
    assert found == {"path": torch_ptxas, "version": version.strip().splitlines()[-1]}
