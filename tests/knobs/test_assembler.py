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

from autotune import knobs
from autotune.knobs import Knobs, assembler
from autotune.tuned import artifacts

REPO = Path(__file__).resolve().parents[2]

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
    if device == "cuda":  # the entry Triton's keys read: its arch is major * 10 + minor (sm_90: 90, sm_89: 89)
        from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version
        major, minor = torch.cuda.get_device_capability()
        found["version"] = get_ptxas_version(major * 10 + minor).strip().splitlines()[-1]
        found["chosen"] = get_ptxas(major * 10 + minor).path  # the ptxas Triton would pick now
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


def test_knobs_and_the_stable_cache_keys_choose_the_ptxas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(assembler, "pin", lambda: calls.append("pin"))
    knobs.apply(torch.nn.Linear(4, 4), None, Knobs(), "cpu")
    assert calls == ["pin"]
    artifacts.stable_cache_keys()
    assert calls == ["pin", "pin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_triton_keys_name_the_ptxas_triton_uses_after_apply() -> None:
    torch_ptxas = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
    if not os.path.exists(torch_ptxas):
        pytest.skip("this torch ships no ptxas of its own")
    found = _probe("cuda")
    # The version in the keys is that of the ptxas Triton uses for this GPU: torch's where Triton reads
    # TRITON_PTXAS_PATH for it (an H100 with Triton 3.6), no cached answer from another one.
    chosen = subprocess.run([str(found["chosen"]), "--version"], capture_output=True, text=True, check=True).stdout
    assert found["path"] == torch_ptxas and found["version"] == chosen.strip().splitlines()[-1]
