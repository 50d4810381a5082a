"""The trial server's first import: NVML-based device queries for it and its trials, and Inductor's compiler loaded
where that leaves fork usable (a torch without CUDA, as here and in CI, always)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

_IMPORTED = """
import json, os, sys
import autotune.trial.preload as preload
print(json.dumps({
    "variable": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
    "loaded": [m for m in preload.COMPILER_MODULES if m in sys.modules],
    "preloadable": preload.compiler_preloadable(),
    "cuda_initialized": __import__("torch").cuda.is_initialized(),
}))
"""


def _import_in_fresh_interpreter(variable: str | None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PYTORCH_NVML_BASED_CUDA_CHECK"}
    if variable is not None:
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = variable
    proc = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_importing_it_sets_nvml_based_queries_and_loads_the_compiler_where_fork_stays_usable() -> None:
    found = _import_in_fresh_interpreter("0")  # set to something else first: the server's must be NVML's
    assert found["variable"] == "1"
    assert found["cuda_initialized"] is False
    modules = ["torch._dynamo.repro.after_dynamo", "torch._inductor.compile_fx"]
    assert found["loaded"] == (modules if found["preloadable"] else [])
    if not torch.backends.cuda.is_built():
        assert found["preloadable"] is True, "a torch without CUDA cannot spoil fork: the compiler is preloaded"
