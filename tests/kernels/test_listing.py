"""Listed kernels as search params, pinned to one config, in Triton's CPU interpreter (a fresh process each)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pythonpath import child_env

from autotune.errors import AutotuneError
from autotune.kernels.listing import load_kernel

HERE = Path(__file__).resolve().parent

_SCRIPT = """
import json, sys, warnings, torch
from autotune.kernels.listing import load_kernel
from autotune.kernels.pinning import KernelWarning, pin, pin_measured
import user_kernels as uk

out = {}
listed = load_kernel("user_kernels:scaled_add")
out["params"] = [[p.name, list(p.values), p.ordinal] for p in listed.params()]
declared = load_kernel("user_kernels:declared_add")
out["declared"] = [[p.name, list(p.values), p.ordinal] for p in declared.params()]
out["declared_configs"] = len(declared.autotuner.configs)

config = listed.config_for({"scaled_add": "BLOCK_SIZE=32 num_warps=2 num_stages=1"})
launches = pin(listed.autotuner, config)
x, y = torch.randn(100), torch.randn(100)
result, block = uk.launch(uk.scaled_add, x, y)
out["pinned_block"] = block
out["pinned_ok"] = bool(torch.allclose(result, 2 * x + y))
uk.launch(uk.scaled_add, torch.randn(7), torch.randn(7))
uk.launch(uk.scaled_add, torch.randn(7), torch.randn(7))
out["launches"] = [launches.count, [list(k) for k in launches.keys]]

from autotune.kernels.pinning import pinned
before = len(uk.declared_add.configs)
with pinned(uk.declared_add, uk.declared_add.configs[-1]) as scoped:
    scoped_block = uk.launch(uk.declared_add, torch.randn(50), torch.randn(50))[1]
out["scoped"] = [scoped_block, scoped.count, len(uk.declared_add.configs) == before, "run" not in vars(uk.declared_add)]

chosen = declared.config_for({"declared_add.BLOCK_SIZE": 128, "declared_add.num_warps": 4})
out["declared_choice"] = [chosen.kwargs, chosen.num_warps, chosen.num_stages]

# Production: pinned for the measured key n=100; n=7 was never measured: warn once, kernel's own config.
import triton
uk.scaled_add.configs = [triton.Config({"BLOCK_SIZE": 16}, num_warps=1, num_stages=1)]  # one: no GPU bench
pin_measured(uk.scaled_add, config, [(100, "torch.float32", "torch.float32", "torch.float32", "torch.int32")], "k")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    measured_block = uk.launch(uk.scaled_add, torch.randn(100), torch.randn(100))[1]
    new_block = uk.launch(uk.scaled_add, torch.randn(7), torch.randn(7))[1]
    uk.launch(uk.scaled_add, torch.randn(7), torch.randn(7))
out["production"] = [measured_block, new_block, sum(issubclass(w.category, KernelWarning) for w in caught)]
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def interpreted() -> dict[str, Any]:
    env = child_env(HERE, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_autotune_configs_become_one_readable_categorical_param(interpreted: dict[str, Any]) -> None:
    labels = ["BLOCK_SIZE=16 num_warps=1 num_stages=1", "BLOCK_SIZE=32 num_warps=2 num_stages=1",
              "BLOCK_SIZE=64 num_warps=4 num_stages=2"]  # fmt: skip
    assert interpreted["params"] == [["scaled_add", labels, False]]


def test_a_declared_kernel_gets_one_ordered_param_per_name(interpreted: dict[str, Any]) -> None:
    assert interpreted["declared"] == [
        ["declared_add.BLOCK_SIZE", [16, 32, 64, 128], True],
        ["declared_add.num_warps", [1, 2, 4], True],
    ]  # num_stages has one value: not searched
    assert interpreted["declared_configs"] == 4 + 3 + 2  # the feasibility rule dropped 3 of 12
    assert interpreted["declared_choice"] == [{"BLOCK_SIZE": 128}, 4, 2]


def test_a_pinned_kernel_launches_only_its_config_and_records_shapes(interpreted: dict[str, Any]) -> None:
    assert interpreted["pinned_block"] == 32 and interpreted["pinned_ok"]
    count, keys = interpreted["launches"]
    assert count == 3
    dtypes = ["torch.float32"] * 3 + ["torch.int32"]
    assert keys == [[100, *dtypes], [7, *dtypes]]


def test_a_kernel_pinned_for_a_block_gets_its_own_configs_back(interpreted: dict[str, Any]) -> None:
    assert interpreted["scoped"] == [128, 1, True, True]  # the last declared config, launched once


def test_production_warns_once_for_a_shape_never_measured_and_falls_back(interpreted: dict[str, Any]) -> None:
    assert interpreted["production"] == [32, 16, 1]


def test_kernels_that_cannot_be_listed_are_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plain_kernels.py").write_text("import triton\n@triton.jit\ndef k(x):\n    pass\nvalue = 3\n")
    for path, problem in [
        ("plain_kernels", "expected package.module:kernel"),
        ("no_such_module:k", "cannot import 'no_such_module'"),
        ("plain_kernels:missing", "has no 'missing'"),
        ("plain_kernels:k", "is not tunable"),
        ("plain_kernels:value", "is not tunable"),
    ]:
        with pytest.raises(AutotuneError, match=problem):
            load_kernel(path)
