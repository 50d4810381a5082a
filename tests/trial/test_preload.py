"""The trial server's first import: Inductor's compiler loaded where torch answers its device queries from NVML (a
torch without CUDA, as here and in CI, always), and the environment left as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from autotune.trial import preload

_IMPORTED = """
import json, os, sys
import autotune.trial.preload as preload
print(json.dumps({
    "variable": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
    "loaded": [m for m in preload.COMPILER_MODULES if m in sys.modules],
    "preloadable": preload.compiler_preloadable(),
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


@pytest.mark.parametrize("variable", [None, "0"])
def test_importing_it_loads_the_compiler_and_leaves_the_environment_as_it_was(variable: str | None) -> None:
    found = _import_in_fresh_interpreter(variable)
    assert found["variable"] == variable
    assert found["loaded"] == (list(preload.COMPILER_MODULES) if found["preloadable"] else [])
    if not torch.backends.cuda.is_built():
        assert found["preloadable"] is True, "a torch without CUDA cannot spoil fork: the compiler is preloaded"


@pytest.mark.parametrize(
    ("built", "count_by_nvml", "preloadable"),
    [
        (False, None, True),  # no CUDA in torch: nothing to spoil
        (True, lambda: 1, True),  # NVML counts a GPU
        (True, lambda: 0, True),  # NVML answers: no GPU here (CUDA_VISIBLE_DEVICES="" too)
        (True, lambda: -1, False),  # NVML failed or names MIG devices: torch would ask the CUDA runtime
        (True, None, False),  # a torch without the NVML count
    ],
)
def test_the_compiler_is_preloaded_only_where_nvml_answers_torch(
    monkeypatch: pytest.MonkeyPatch, built: bool, count_by_nvml: object, preloadable: bool
) -> None:
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: built)
    if count_by_nvml is None:
        monkeypatch.delattr(torch.cuda, "_device_count_nvml", raising=False)
    else:
        monkeypatch.setattr(torch.cuda, "_device_count_nvml", count_by_nvml)
    assert preload.compiler_preloadable() is preloadable
    assert preload.preload_compiler() is preloadable


def test_the_nvml_variable_is_set_only_while_the_compiler_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []
    monkeypatch.setattr(preload.importlib, "import_module", lambda _: seen.append(os.environ.get(preload._NVML_CHECK)))
    monkeypatch.setenv(preload._NVML_CHECK, "0")
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    assert preload.preload_compiler() is True
    assert seen == ["1", "1"]
    assert os.environ[preload._NVML_CHECK] == "0"
