"""Compiling a configuration ahead of its trial (real processes, Inductor on the CPU): the trial then compiles
from the study's cache, forward and backward, and the job that compiled ahead ran nothing."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from autotune.errors import AutotuneError
from autotune.quiet import quiet_tf32_hint
from autotune.trial.compilecache import CACHE_FOLDER
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner


@pytest.mark.slow
def test_a_trial_compiled_ahead_finds_its_graphs_in_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / CACHE_FOLDER / "study"
    spec = TrialSpec(
        "trial_workloads:tiny_mlp", {"compile_mode": "default"}, "tiny", "cpu", compile_cache_dir=str(cache)
    )
    runner = TrialRunner()
    ahead = runner.compile_ahead(spec).wait(300)
    assert ahead.value is not None and ahead.value["ok"], ahead
    assert ahead.value["graphs"] == 1 and ahead.value["seconds"] > 0
    assert "held_gib" not in ahead.value  # no GPU held: nothing to limit the compiles ahead by
    # Forward and backward, both in the cache (the backward is compiled with the forward, not at a first backward).
    graphs = [entry for folder in (cache / "inductor" / "fxgraph").iterdir() for entry in folder.iterdir()]
    assert len(graphs) == 2, graphs
    trial = runner.run(spec, 300)
    assert trial.ok, trial.reason
    # Both graphs came from the cache: Inductor hardly ran and built no kernel (cold, on the 2-core development
    # machine: about 13 s of compile; after compiling ahead about 2 s).
    assert trial.metrics["compile_inductor_s"] < ahead.value["seconds"] / 3, (trial.metrics, ahead.value)
    assert trial.metrics["compile_kernel_wait_s"] < 0.5, trial.metrics


def test_a_configuration_that_cannot_be_compiled_ahead_says_why(tmp_path: Path) -> None:
    eager = TrialSpec("trial_workloads:tiny_mlp", {"compile_mode": "none"}, "tiny", "cpu")
    outcome = TrialRunner().compile_ahead(eager).wait(300)
    assert outcome.value is not None and not outcome.value["ok"], outcome
    assert outcome.value["reason"] == "an eager configuration has no graph to compile"
    broken = TrialSpec("trial_workloads:tiny_mlp", {"compile_mode": "default", "batch_size": "many"}, "tiny", "cpu")
    outcome = TrialRunner().compile_ahead(broken).wait(300)
    assert outcome.value is not None and not outcome.value["ok"] and "batch_size" in outcome.value["reason"]


def test_a_compile_ahead_can_be_stopped(tmp_path: Path) -> None:
    spec = TrialSpec("trial_workloads:sleepy", {"compile_mode": "default"}, "tiny", "cpu")
    running = TrialRunner().compile_ahead(spec)
    assert not running.ready()
    running.kill()
    assert running.ready() and running.outcome is not None and running.outcome.failure == "killed"


def test_a_compile_ahead_gives_way_when_the_gpu_memory_runs_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial measured beside it may need the memory: under MIN_FREE_SHARE free, the job stops (decision only:
    this machine has no GPU, so the free figure is given)."""
    from autotune.trial import ahead

    total = 80 * 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda _device: (0.5 * total, total))
    ahead._check_free_memory(torch.device("cuda"))  # half free: goes on
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda _device: (0.3 * total, total))
    with pytest.raises(AutotuneError, match=r"only 24\.0 of the GPU.s 80\.0 GiB are free"):
        ahead._check_free_memory(torch.device("cuda"))
    ahead._check_free_memory(torch.device("cpu"))  # no GPU memory to share


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_compile_ahead_on_a_gpu_says_how_much_of_it_it_held(tmp_path: Path) -> None:
    """What the sweep limits its compiles ahead at once by (autotune.sweep.proposals.compile_ahead.memory_slots)."""
    cache = tmp_path / CACHE_FOLDER / "study"
    spec = TrialSpec(
        "trial_workloads:tiny_mlp", {"compile_mode": "default"}, "tiny", "cuda", compile_cache_dir=str(cache)
    )
    outcome = TrialRunner().compile_ahead(spec).wait(300)
    assert outcome.value is not None and outcome.value["ok"], outcome
    assert 0 < outcome.value["held_gib"] < 1  # a tiny MLP's weights and one batch, in the allocator's blocks
    total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    assert outcome.value["gpu_gib"] == pytest.approx(total_gib, rel=0.01)


def test_a_compile_is_quiet_about_tf32_in_its_process() -> None:
    """Inductor advises turning TF32 on at every graph it compiles on a GPU without it (an H200 sweep printed it for
    each graph compiled ahead, fp32 and bf16 alike); a trial's, a compile ahead's or a rehearsed start's process
    silences that advice, since the precision knob decides TF32 on purpose. Other warnings still show."""
    hint = "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled. Consider ..."
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_tf32_hint()
        warnings.warn(hint, UserWarning, stacklevel=1)
        warnings.warn("another library's advice", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["another library's advice"]
