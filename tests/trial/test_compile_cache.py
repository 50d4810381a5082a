"""A study's compile cache: where it lives, and that a repeated compiled trial compiles from it (real processes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from pytest import MonkeyPatch

from autotune.trial import compilecache
from autotune.trial.compilecache import CACHE_FOLDER, study_cache_dir
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner


def test_cache_folder_sits_beside_a_sqlite_study(tmp_path: Path) -> None:
    assert (
        study_cache_dir(f"sqlite:///{tmp_path}/db/autotune.db", "resnet50")
        == tmp_path / "db" / CACHE_FOLDER / "resnet50"
    )
    assert study_cache_dir("postgresql://u@host/autotune", "night/1") == Path.cwd() / CACHE_FOLDER / "night_1"


@pytest.mark.slow
def test_a_repeated_trial_compiles_from_the_study_cache(tmp_path: Path) -> None:
    cache = tmp_path / CACHE_FOLDER / "study"
    params = {"compile_mode": "default", "precision": "bf16"}
    spec = TrialSpec("trial_workloads:tiny_mlp", params, "tiny", "cpu", compile_cache_dir=str(cache))
    runner = TrialRunner()
    first, again = runner.run(spec, 300), runner.run(spec, 300)
    assert first.ok and again.ok, (first.reason, again.reason)
    # The graphs went to the study's folder, into Inductor's folder for bf16 autocast; Triton's is shared.
    assert list((cache / "inductor-bfloat16" / "fxgraph").iterdir())
    assert not (cache / "inductor").exists()
    # Measured on the 2-core development machine: 13.4 s cold, 2.2 s from the cache.
    assert again.metrics["compile_s"] < first.metrics["compile_s"] / 2, (first.metrics, again.metrics)
    # The compiler's own clocks: its wall time within the first steps', Inductor within it, the kernel builds it
    # waited for within that; from the cache, Inductor hardly runs and no kernel is built.
    cold, warm = first.metrics, again.metrics
    assert 0 < cold["compile_kernel_wait_s"] <= cold["compile_inductor_s"] <= cold["compile_wall_s"], cold
    assert 0 < warm["compile_wall_s"] <= warm["compile_s"] + 0.5, warm
    assert warm["compile_inductor_s"] < cold["compile_inductor_s"] / 2, (cold, warm)
    assert warm["compile_kernel_wait_s"] < cold["compile_kernel_wait_s"] / 2, (cold, warm)


def test_each_autocast_dtype_compiles_into_its_own_inductor_folder(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    """AOTAutograd's cache once keyed graphs on autocast being on, not on its dtype (pytorch/pytorch#181564): an
    fp16 trial must never find a bf16 trial's graph, so each autocast dtype has its own Inductor folder."""
    folders = {}
    for dtype in (None, torch.bfloat16, torch.float16):
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        compilecache.use(tmp_path, dtype)
        folders[dtype] = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    assert folders == {
        None: str(tmp_path / "inductor"),
        torch.bfloat16: str(tmp_path / "inductor-bfloat16"),
        torch.float16: str(tmp_path / "inductor-float16"),
    }


REMEMBER = """
import json, os, sys
import triton, triton.language as tl

@triton.jit
def _copy(x_ptr, BLOCK: tl.constexpr):
    pass

configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
preloaded = triton.autotune(configs=configs, key=[])(_copy)  # as a trial process is forked with it
from autotune.trial import compilecache
compilecache.use(sys.argv[1])
later = triton.autotune(configs=configs, key=[])(_copy)
json.dump({"preloaded": preloaded.cache_results, "later": later.cache_results,
           "triton_cache": os.environ["TRITON_CACHE_DIR"]}, sys.stdout)
"""


def test_the_autotuners_of_a_trial_keep_their_choices_in_the_study_folder(tmp_path: Path) -> None:
    """Triton's autotuners, those the trial process was forked with and those decorated later, remember their
    choices in the study's Triton folder (its own CPU interpreter has nothing to remember)."""
    import json
    import os
    import subprocess
    import sys

    def run(interpret: str) -> dict[str, object]:
        (tmp_path / "probe.py").write_text(REMEMBER)
        env = {**os.environ, "TRITON_INTERPRET": interpret}
        env.pop("TRITON_CACHE_AUTOTUNING", None)
        done = subprocess.run(
            [sys.executable, "probe.py", str(tmp_path / "study")], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return dict(json.loads(done.stdout))

    assert run("0") == {"preloaded": True, "later": True, "triton_cache": str(tmp_path / "study" / "triton")}
    interpreted = run("1")
    assert interpreted["preloaded"] is False and interpreted["later"] is False
