"""A Triton autotuner's round with its configs compiled in parallel first (autotune.kernels.autotuning).

The rounds are real: Triton's autotuner over the fused LM head's configs, compiled by Triton for sm_90 (its wheel
ships ptxas), in a fresh process with an empty cache (``scripts/autotune_compile_round.py``); only the launch is
missing, there being no GPU, and the benchmark is injected, as in Triton's own tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from autotune.kernels import autotuning
from autotune.measurement import AUTOTUNE_COMPILE_METRIC, AUTOTUNE_METRIC

REPO = Path(__file__).resolve().parents[2]


def _rounds(configs: int, *flags: str) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "autotune_compile_round.py"), "--configs", str(configs), *flags],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {found["mode"]: found for found in rounds}


@pytest.mark.slow
def test_a_round_compiles_its_configs_in_parallel_before_the_first_benchmark_and_chooses_as_triton() -> None:
    rounds = _rounds(configs=4)
    serial, parallel = rounds["serial"], rounds["parallel"]
    # Triton alone: each config compiles in its own benchmark, one after another, in the launching thread.
    assert serial["compiled_before_first_benchmark"] == 0 and serial["compiles"] == 4, serial
    assert serial["threads"] == ["MainThread"] and AUTOTUNE_METRIC not in serial, serial
    # Installed: all four compiled before the first benchmark, each once (the benchmarks found them compiled).
    assert parallel["installed"] and parallel["compiled_before_first_benchmark"] == 4, parallel
    assert parallel["compiles"] == 4, parallel
    if len(os.sched_getaffinity(0)) > 1:
        assert len(parallel["threads"]) > 1, parallel
        assert all(thread.startswith("autotune-compile") for thread in parallel["threads"]), parallel
    # The choice is the benchmark's, in both.
    assert serial["chosen"] == parallel["chosen"] == parallel["expected"], rounds
    assert 0 < parallel[AUTOTUNE_COMPILE_METRIC] <= parallel[AUTOTUNE_METRIC] <= parallel["round_s"], parallel


@pytest.mark.slow
def test_a_config_with_a_pre_hook_compiles_in_its_benchmark_as_in_triton() -> None:
    """A hook may set what the kernel is specialized on (a tensor descriptor's block shape): compiled before it
    runs, the kernel would be compiled for the wrong one, then again."""
    parallel = _rounds(2, "--config-hooks")["parallel"]
    assert parallel["installed"] and parallel["compiled_before_first_benchmark"] == 0, parallel
    assert parallel["compiles"] == 2 and parallel["threads"] == ["MainThread"], parallel
    assert parallel["chosen"] == parallel["expected"] and parallel[AUTOTUNE_COMPILE_METRIC] == 0, parallel


@pytest.fixture
def triton_as_it_is() -> Iterator[None]:
    """Triton's autotuner with its own methods for the test (an in-process trial of another test on this worker
    installed the hooks), and as it was after."""
    pytest.importorskip("triton")
    was_installed = autotuning.installed()
    autotuning.uninstall()
    yield
    autotuning.uninstall()
    if was_installed:
        autotuning.install()


@pytest.mark.usefixtures("triton_as_it_is")
def test_install_is_idempotent_and_uninstall_gives_triton_its_methods_back() -> None:
    from triton.runtime.autotuner import Autotuner

    own = (Autotuner.prune_configs, Autotuner._bench)
    assert autotuning.install() and autotuning.install()
    wrapped = (Autotuner.prune_configs, Autotuner._bench)
    assert wrapped[0] is not own[0] and wrapped[1] is not own[1]
    assert autotuning.begin_trial() and (Autotuner.prune_configs, Autotuner._bench) == wrapped  # not wrapped twice
    autotuning.uninstall()
    assert (Autotuner.prune_configs, Autotuner._bench) == own


@pytest.mark.usefixtures("triton_as_it_is")
def test_a_trial_that_autotuned_nothing_records_nothing_and_threads_follow_the_cores() -> None:
    assert autotuning.begin_trial() and autotuning.autotuning_metrics() == {}
    cores = len(os.sched_getaffinity(0))
    assert autotuning.compile_threads(1) == 1
    assert autotuning.compile_threads(10_000) == cores


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_gpu_trial_records_its_fused_heads_autotuning_and_its_parallel_compile(tmp_path: Path) -> None:
    """GPT-2 (tiny) with the fused head, eager bf16, in a fresh Triton cache: its head's 34 configs are compiled in
    parallel, then benchmarked, in the trial's first step; the trial says how long each part took."""
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "trial", "gpt2", "--preset", "tiny", "--device", "cuda",
         "-p", "head=fused", "-p", "precision=bf16", "--json"],
        capture_output=True, text=True, timeout=600, check=False, cwd=REPO,
        env={**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    metrics = result["metrics"]
    assert result["status"] == "ok", result["reason"]
    assert 0 < metrics[AUTOTUNE_COMPILE_METRIC] < metrics[AUTOTUNE_METRIC] <= metrics["first_step_s"], metrics
    print({name: metrics[name] for name in (AUTOTUNE_METRIC, AUTOTUNE_COMPILE_METRIC, "first_step_s")})
