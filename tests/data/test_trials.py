"""Trials of workloads with real input: the wait for data measured, a user's own step measured, data
knobs recorded as no-ops where they cannot apply. Real trial processes (TrialRunner) or ``run_trial``
in this process where the test counts what the step did."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import data_workloads
import pytest

import autotune.workloads
from autotune.errors import AutotuneError
from autotune.measurement import Status
from autotune.trial.job import run_trial
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner

HERE = Path(__file__).resolve().parent
FAST = MeasureSettings(min_warmup_steps=2, min_steps=5, min_time_s=0.05, max_warmup_s=5)


def spec(workload: str, **params: object) -> TrialSpec:
    return TrialSpec(workload, dict(params), preset="tiny", device="cpu", measure=FAST)


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner()


def test_a_slow_dataset_is_input_bound(runner: TrialRunner) -> None:
    result = runner.run(spec("data_workloads:host_mlp", delay_ms=2.0, batch_size=8), timeout_s=60)
    assert result.status is Status.OK, result.reason
    metrics = result.metrics
    assert metrics["data_wait_frac"] > 0.5 and result.input_bound
    assert metrics["data_wait_ms_p50"] >= 8 * 2.0  # 8 samples of 2 ms, read by the training process itself
    assert metrics["data_wait_ms_p50"] <= metrics["step_ms_p50"]
    assert len(result.series["data_wait_ms"]) == metrics["timed_steps"]


def test_workers_load_in_parallel_and_a_fast_dataset_is_not_input_bound(runner: TrialRunner) -> None:
    # 48 ms of sleeping per batch: far above what a busy 2-core machine adds to a step (2 ms a sample let a loaded
    # CI machine measure two workers at 1.25x one)
    slow = runner.run(spec("data_workloads:host_mlp", delay_ms=6.0, batch_size=8), timeout_s=60)
    workers = runner.run(
        spec("data_workloads:host_mlp", delay_ms=6.0, batch_size=8, num_workers=2, persistent_workers=True),
        timeout_s=60,
    )
    assert slow.ok and workers.ok, (slow.reason, workers.reason)
    assert workers.metrics["throughput"] > 1.4 * slow.metrics["throughput"]  # two workers sleep side by side
    assert workers.params["num_workers"] == 2 and "noop_knobs" not in workers.metrics
    fast = runner.run(spec("data_workloads:host_mlp"), timeout_s=60)
    assert fast.ok and 0 <= fast.metrics["data_wait_frac"] < 1 and "data_wait_ms_p50" in fast.metrics


def test_data_knobs_on_a_make_batch_workload_are_noops(runner: TrialRunner) -> None:
    knobs = {"num_workers": 2, "pin_memory": True, "gpu_prefetch": True, "precision": "fp32"}
    result = runner.run(spec("trial_workloads:tiny_mlp", **knobs), timeout_s=60)
    assert result.status is Status.OK, result.reason
    assert result.metrics["noop_knobs"].split(",") == ["tf32", "num_workers", "pin_memory", "gpu_prefetch"]
    assert "data_wait_frac" not in result.metrics and not result.input_bound  # batches made on the device
    assert result.params["num_workers"] == 2  # recorded as asked for


def test_a_profiled_trial_carries_its_profile_with_the_data_wait_labelled(runner: TrialRunner, tmp_path: Path) -> None:
    profiled = TrialSpec(
        "data_workloads:host_mlp", {"delay_ms": 1.0}, "tiny", "cpu", measure=FAST, profile_steps=2,
        profile_dir=str(tmp_path),
    )  # fmt: skip
    result = runner.run(profiled, timeout_s=60)
    assert result.status is Status.OK and not result.warnings, (result.reason, result.warnings)
    assert result.extra["profile"]  # what autotune.profiling.capture returned, back through the process pipe
    assert "autotune.data_wait" in (tmp_path / "trace.json").read_text()  # each step's wait, named in the trace


def test_gradient_accumulation_in_a_users_step_is_what_is_measured() -> None:
    data_workloads.MICRO_BATCHES[0] = 0
    result = run_trial(spec("data_workloads:accumulating", micro_batches=4))
    assert result.status is Status.OK, result.reason
    steps = result.metrics["warmup_steps"] + result.metrics["timed_steps"]
    assert data_workloads.MICRO_BATCHES[0] == 4 * steps  # every step ran the user's four micro-batches
    assert result.metrics["throughput"] == pytest.approx(16 / (result.metrics["step_ms_mean"] / 1e3))  # behind a loader
    assert result.metrics["loss_rel_error"] < 1e-5  # the mean of the micro-batches vs loss_fn on the whole batch


def test_a_users_step_without_loss_fn_is_checked_finite() -> None:
    result = run_trial(spec("data_workloads:accumulating", with_loss_fn=False))
    assert result.status is Status.OK, result.reason
    assert "loss_rel_error" not in result.metrics  # no loss_fn: nothing to recompute in fp32
    diverged = run_trial(spec("data_workloads:diverging", from_step=3))
    assert diverged.status is Status.NUMERICS and "nan at step 3" in str(diverged.reason)


def test_the_fp32_reference_sees_the_first_steps_augmented_batch() -> None:
    # Noise as large as the data: a reference on another draw of it would be far off the first step's loss.
    result = run_trial(spec("data_workloads:host_mlp", noise=1.0, precision="fp32"))
    assert result.status is Status.OK, result.reason
    assert result.metrics["loss_rel_error"] < 1e-3


def test_a_batch_larger_than_the_dataset_is_invalid() -> None:
    result = run_trial(spec("data_workloads:host_mlp", samples=10, batch_size=16))
    assert result.status is Status.INVALID and "larger than the dataset (10 samples)" in str(result.reason)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "exactly one of make_batch and dataset"),
        ({"make_batch": print, "dataset": data_workloads.Points(4), "loss_fn": print}, "exactly one of"),
        ({"dataset": data_workloads.Points(4)}, "needs a loss_fn or its own train_step"),
    ],
)
def test_a_workload_says_what_it_lacks(fields: dict[str, object], message: str) -> None:
    with pytest.raises(AutotuneError, match=message):
        autotune.workloads.Workload(data_workloads._mlp(), **fields)  # type: ignore[arg-type]


def _docstring_example() -> tuple[str, list[str]]:
    """The ``my_data.py`` example of autotune.workloads' docstring, and the command it says to run."""
    doc = ast.get_docstring(ast.parse(Path(autotune.workloads.__file__).read_text())) or ""
    block = doc[doc.index("    # my_data.py") :]
    lines = [line[4:] for line in block.splitlines()]
    command = next(line for line in lines if line.startswith("# autotune trial"))
    return "\n".join(lines), command.removeprefix("# autotune ").split()


@pytest.mark.slow  # a fresh `autotune trial` process: imports, forkserver, a default-length trial
def test_the_documented_dataset_example_runs(tmp_path: Path) -> None:
    source, args = _docstring_example()
    (tmp_path / "my_data.py").write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "autotune", *args, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["params"]["num_workers"] == 2
    assert 0 <= result["metrics"]["data_wait_frac"] <= 1 and result["metrics"]["loss_rel_error"] < 1e-3


@pytest.mark.slow  # a fresh `autotune trial` process
def test_the_trial_summary_says_how_long_steps_waited_and_that_they_were_input_bound() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "trial", "data_workloads:host_mlp", "--preset", "tiny", "--device", "cpu",
         "-p", "delay_ms=2", "--steps", "3"],
        cwd=HERE, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    wait = next(line for line in done.stdout.splitlines() if line.strip().startswith("data wait"))
    assert re.search(r"p50 \d+\.\d\d ms per step, \d+\.\d% of the step  input-bound$", wait), wait
