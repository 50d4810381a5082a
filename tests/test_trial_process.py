"""Every failure class, triggered for real in an isolated trial process; the next trial still runs."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from pythonpath import child_env

from autotune.measurement import Status
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner

FAST = MeasureSettings(min_warmup_steps=2, min_steps=5, min_time_s=0.05, max_warmup_s=5)


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner()


def spec(workload: str, **params: object) -> TrialSpec:
    return TrialSpec(f"trial_workloads:{workload}", dict(params), preset="tiny", device="cpu", measure=FAST)


def assert_next_trial_ok(runner: TrialRunner) -> None:
    result = runner.run(spec("tiny_mlp"), timeout_s=60)
    assert result.status is Status.OK, result.reason
    assert result.metrics["throughput"] > 0


def test_ok_trial_reports_metrics_and_env(runner: TrialRunner) -> None:
    result = runner.run(spec("tiny_mlp", batch_size=8), timeout_s=60)
    assert result.status is Status.OK, result.reason
    metrics = result.metrics
    assert metrics["step_ms_p50"] > 0 and metrics["step_ms_p90"] >= metrics["step_ms_p50"]
    assert metrics["throughput"] == pytest.approx(8 / (metrics["step_ms_p50"] / 1e3))
    assert metrics["timed_steps"] == len(result.series["step_ms"]) >= 5
    assert 0 < metrics["overhead_s"] < 30 and metrics["peak_mem_gib"] > 0
    assert result.params["batch_size"] == 8 and result.params["precision"] == "default"
    assert result.env["device"] == "cpu" and result.env["torch"]


def test_allocation_past_memory_cap_is_oom(runner: TrialRunner) -> None:
    # 200k images of 3x32x32 fp32 need 2.3 GiB for the first batch alone: past a 0.5 GiB cap.
    capped = TrialSpec("resnet50", {"batch_size": 200_000}, "tiny", "cpu", measure=FAST, memory_cap_gib=0.5)
    result = runner.run(capped, timeout_s=60)
    assert result.status is Status.OOM, result.reason
    assert result.reason is not None and "allocate" in result.reason
    assert_next_trial_ok(runner)


def test_trial_past_its_timeout_is_killed(runner: TrialRunner, tmp_path: Path) -> None:
    pidfile = tmp_path / "helper.pid"
    started = time.monotonic()
    result = runner.run(spec("spawner", pidfile=str(pidfile)), timeout_s=3)
    assert result.status is Status.TIMEOUT
    assert time.monotonic() - started < 15
    helper_pid = int(pidfile.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{helper_pid}").exists() or "Z" in Path(f"/proc/{helper_pid}/stat").read_text().split()[2]
    assert_next_trial_ok(runner)


@pytest.mark.parametrize("signame", ["SIGKILL", "SIGSEGV"])
def test_child_killed_by_signal_is_crash(runner: TrialRunner, signame: str) -> None:
    result = runner.run(spec("killed", signame=signame), timeout_s=60)
    assert result.status is Status.CRASH
    assert result.reason == f"trial process killed by signal {signame}"
    assert_next_trial_ok(runner)


@pytest.mark.parametrize("from_step", [0, 3])
def test_nan_loss_is_numerics(runner: TrialRunner, from_step: int) -> None:
    result = runner.run(spec("nan_loss", from_step=from_step), timeout_s=60)
    assert result.status is Status.NUMERICS
    assert result.reason is not None and "nan" in result.reason
    assert_next_trial_ok(runner)


def test_contradictory_knobs_are_invalid(runner: TrialRunner) -> None:
    result = runner.run(spec("tiny_mlp", cudnn_benchmark=True, cudnn_deterministic=True), timeout_s=60)
    assert result.status is Status.INVALID
    assert result.reason is not None and "contradicts" in result.reason
    assert_next_trial_ok(runner)


def test_all_zero_inputs_are_refused(runner: TrialRunner) -> None:
    result = runner.run(spec("zeros"), timeout_s=60)
    assert result.status is Status.INVALID and result.reason is not None and "all-zero" in result.reason


def test_reduced_precision_far_from_fp32_is_numerics(runner: TrialRunner) -> None:
    # A finite loss that bf16 rounding ruins: the guard compares it with the fp32 reference.
    result = runner.run(spec("cancelling", precision="bf16"), timeout_s=60)
    assert result.status is Status.NUMERICS, result.reason
    assert result.reason is not None and "fp32 reference" in result.reason
    assert runner.run(spec("cancelling", precision="fp32"), timeout_s=60).ok


def test_trial_processes_are_fresh(runner: TrialRunner) -> None:
    first = runner.run(spec("tiny_mlp"), timeout_s=60)
    second = runner.run(spec("tiny_mlp"), timeout_s=60)
    assert first.ok and second.ok
    assert first.env["host"] == second.env["host"] == os.uname().nodename
    assert second.metrics["startup_s"] < 2.0  # forked from the warm forkserver, not a fresh interpreter


KILLED_PARENT = """
import sys
from autotune.trial.trialspec import TrialSpec
from autotune.trial_process import TrialRunner

if __name__ == "__main__":
    spec = TrialSpec("trial_workloads:spawner", {"pidfile": sys.argv[1]}, "tiny", "cpu")
    TrialRunner().run(spec, timeout_s=600)
"""


def _gone(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] == "Z"


def test_trial_dies_with_a_sigkilled_parent(tmp_path: Path) -> None:
    """A killed sweep must not leave its trial running (it would compete with the resumed sweep)."""
    script, pidfile = tmp_path / "parent.py", tmp_path / "helper.pid"
    script.write_text(KILLED_PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(pidfile)], env=child_env())
    deadline = time.monotonic() + 60
    while not pidfile.exists() and time.monotonic() < deadline:
        assert parent.poll() is None, f"the sweep's stand-in exited ({parent.returncode}) before its trial started"
        time.sleep(0.1)
    helper_pid = int(pidfile.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(helper_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(helper_pid)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_trial_processes_use_cuda(runner: TrialRunner) -> None:
    """Guards the forkserver's preloads: one that touches CUDA makes every GPU trial crash."""
    for _ in range(2):
        result = runner.run(TrialSpec("trial_workloads:tiny_mlp", {}, "tiny", "cuda", measure=FAST), 120)
        assert result.status is Status.OK, result.reason
        assert result.env["gpu"]
        assert re.fullmatch(r"[0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2}\.0", result.env["gpu_pci_bus_id"])
        if _nvml_keeps_process_samples():  # else every context holder counts, pytest's own included
            # pytest holds a CUDA context here (in-process GPU tests ran before): idle, so not counted.
            assert result.metrics["gpu_other_processes"] == 0


def _nvml_keeps_process_samples() -> bool:
    from autotune.trial import fingerprint, measure

    nvml = fingerprint.open_nvml()
    if nvml is None:
        return False
    handle = fingerprint.nvml_handle(nvml, torch.device("cuda"))
    return measure._busy_processes(nvml, handle, int(time.time() * 1e6)) is not None


# Matmuls on the same GPU for up to a minute; "busy" once they run.
BUSY_LOOP = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda")
print("busy", flush=True)
end = time.time() + 60
while time.time() < end:
    a @ a
    torch.cuda.synchronize()
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_trial_timed_beside_a_busy_process_says_so(runner: TrialRunner) -> None:
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None
        assert select.select([busy.stdout], [], [], 120)[0], "the busy process never started"
        assert busy.stdout.readline().strip() == "busy"
        timed = MeasureSettings(min_warmup_steps=2, min_steps=5, min_time_s=2.0, max_warmup_s=5)
        result = runner.run(TrialSpec("trial_workloads:tiny_mlp", {}, "tiny", "cuda", measure=timed), 120)
    finally:
        busy.kill()
        busy.wait()
    assert result.status is Status.OK, result.reason
    assert result.metrics["gpu_other_processes"] >= 1


def test_workload_params_given_as_text_take_their_defaults_type() -> None:
    from autotune.errors import AutotuneError
    from autotune.workloads import coerce_param

    assert coerce_param("delay_ms", "2", 0.0) == 2.0
    assert coerce_param("micro_batches", "4", 4) == 4
    assert coerce_param("with_loss_fn", "false", True) is False
    assert coerce_param("norm", "triton", "torch") == "triton"
    assert coerce_param("M", "4096", None) == "4096"  # no default to go by: the build function decides
    assert coerce_param("delay_ms", 2, 0.0) == 2  # typed already (a space's YAML)
    with pytest.raises(AutotuneError, match=r"with_loss_fn='maybe' is not valid: expected true or false"):
        coerce_param("with_loss_fn", "maybe", True)
    with pytest.raises(AutotuneError, match=r"workload param micro_batches='four' is not valid: expected an integer"):
        coerce_param("micro_batches", "four", 4)


_WARMED = """
import json, os, sys, time
from multiprocessing import forkserver
from autotune.trial_process import TrialRunner

began = time.perf_counter()
TrialRunner().warm()
returned = time.perf_counter() - began
pid = forkserver._forkserver._forkserver_pid  # the trial server, started by warm() before any trial was asked
loaded = False
while not loaded and time.perf_counter() - began < 60:
    with open(f"/proc/{pid}/maps") as maps:
        loaded = "libtorch" in maps.read()
    time.sleep(0.1)
print(json.dumps({"warm_s": returned, "torch_in_server": loaded}))
"""


@pytest.mark.slow
def test_warm_starts_the_trial_server_importing_torch_while_the_caller_goes_on() -> None:
    """A sweep calls warm() before its own set-up: it returns at once, and the server (one per process: a fresh
    interpreter here) imports torch in its own process before the first trial is asked for."""
    proc = subprocess.run([sys.executable, "-c", _WARMED], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["torch_in_server"], found
    assert found["warm_s"] < 1.0, found  # torch's import (seconds) was not the caller's


def _server_state() -> dict[str, object]:
    """In a trial process: what it was forked with, the compiler read before this imports autotune.trial.preload
    (which loads it where it was not)."""
    compiler_loaded = "torch._inductor.compile_fx" in sys.modules
    from autotune.trial import preload

    return {
        "variable": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
        "compiler_loaded": compiler_loaded,
        "preloadable": preload.compiler_preloadable(),
    }


_SERVER_STATE = """
import json, sys
from autotune.trial_process import TrialRunner
from test_trial_process import _server_state

outcome = TrialRunner(compiles=sys.argv[1] == "compiles").call(_server_state, (), 120)
assert outcome.failure is None and not outcome.timed_out, outcome
print(json.dumps(outcome.value))
"""


@pytest.mark.slow
@pytest.mark.parametrize("compiles", [True, False])
def test_trials_start_with_the_servers_preloads(compiles: bool) -> None:
    """Each forked trial has what autotune.trial.preload imported in the trial server where its trials may compile,
    and the caller's environment: PYTORCH_NVML_BASED_CUDA_CHECK was set for that import only. A server whose trials
    never compile leaves the compiler out. In a fresh interpreter: a process has one server, started by its first
    runner (here the one under test)."""
    argv = [sys.executable, "-c", _SERVER_STATE, "compiles" if compiles else "eager"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=child_env())
    assert proc.returncode == 0, proc.stderr
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state["variable"] == os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    if not compiles:
        assert state["compiler_loaded"] is False
        return
    assert state["compiler_loaded"] == state["preloadable"]
    if not torch.backends.cuda.is_built() or torch.cuda.is_available():
        # No CUDA in torch cannot spoil fork; a GPU machine's NVML answers (else the ~4 s saving is silently lost)
        assert state["compiler_loaded"], "the trial server did not preload Inductor's compiler"
