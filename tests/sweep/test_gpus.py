"""``autotune sweep SPACE --gpus LIST``: one worker per entry, one study, one display, devices checked.

On a CPU, ``--device cpu --gpus 0,1`` runs two CPU workers through the same orchestration as GPUs:
each worker's trials are started with ``CUDA_VISIBLE_DEVICES`` set to its entry (the workload notes it),
and a device that fails its check is provoked for real by holding its device lock, as another sweep
using that device would.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import optuna
import pytest
import torch
from study_records import measured_records
from sweep_processes import load_study, run, sweep_args, trial_pids, write_space
from trial_workloads import LOCKSTEP_SPACE, lockstep_records

from autotune.errors import AutotuneError
from autotune.records import TrialKind, schema
from autotune.space import load_space
from autotune.sweep import Sweep, SweepOptions, run_sweep
from autotune.sweep.gpus.orchestrator import parse_gpus, worker_options
from autotune.sweep.measurers import replay_executor
from autotune.sweep.workers.device_check import DeviceLock, probe
from autotune.views.progress import Progress

BUDGET = 4


def check_no_traceback(err: str) -> None:
    assert "Traceback" not in err, err


@pytest.mark.slow
def test_one_worker_per_entry_runs_into_one_study(tmp_path: Path) -> None:
    space = write_space(tmp_path, "noted", "noted", BUDGET, step_ms=50.0)  # trials long enough for both to start
    done = run(tmp_path, sweep_args(space, "--device", "cpu", "--gpus", "0,1"))
    assert done.returncode == 0, done.stderr
    check_no_traceback(done.stderr)
    assert f"budget of {BUDGET} measured trials reached" in done.stdout

    measured = measured_records(load_study(tmp_path, "noted"))
    assert len(measured) == BUDGET  # one budget for all workers
    assert len({tuple(sorted(t.params.items())) for t in measured}) == BUDGET
    assert len({t.worker for t in measured}) == 2  # both measured
    assert set(trial_pids(tmp_path).values()) == {"0", "1"}  # each trial pinned to its worker's device
    lines = done.stderr.splitlines()
    for worker in ("cpu 0", "cpu 1"):  # one display: each trial's line names its worker
        assert any(f"] {worker} t0" in line for line in lines), done.stderr


@pytest.mark.slow
def test_a_device_that_fails_its_check_is_taken_out_and_the_others_finish(tmp_path: Path) -> None:
    space = write_space(tmp_path, "noted", "noted", BUDGET)
    held = DeviceLock("cpu-1", tmp_path / "autotune-devices")  # what another sweep on that device holds
    assert held.acquire() is None
    try:
        done = run(tmp_path, sweep_args(space, "--device", "cpu", "--gpus", "0,1"))
    finally:
        held.release()
    assert done.returncode == 0, done.stderr
    check_no_traceback(done.stderr)
    taken_out = [line for line in done.stderr.splitlines() if "taken out" in line]
    assert taken_out == [
        f"cpu 1: taken out: its device check failed: another autotune sweep (pid {os.getpid()}) is using it;"
        " no more trials run on it"
    ]
    assert f"budget of {BUDGET} measured trials reached (cpu 1 taken out)" in done.stdout

    study = load_study(tmp_path, "noted")
    assert len(measured_records(study)) == BUDGET
    assert len({t.user_attrs[schema.ATTR_WORKER] for t in study.trials}) == 1  # cpu 1 never asked for one
    assert set(trial_pids(tmp_path).values()) == {"0"}


@pytest.mark.slow
def test_a_sweep_whose_every_device_fails_says_so_in_one_line(tmp_path: Path) -> None:
    space = write_space(tmp_path, "noted", "noted", BUDGET)
    locks = [DeviceLock(f"cpu-{i}", tmp_path / "autotune-devices") for i in (0, 1)]
    assert [lock.acquire() for lock in locks] == [None, None]
    done = run(tmp_path, sweep_args(space, "--device", "cpu", "--gpus", "0,1"))
    assert done.returncode == 2
    check_no_traceback(done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("autotune: error: no worker could finish the sweep: cpu 0: another autotune sweep (pid")
    assert "; cpu 1: another autotune sweep" in last
    assert trial_pids(tmp_path) == {}


def test_a_device_lock_is_held_against_every_other_holder(tmp_path: Path) -> None:
    first, second = DeviceLock("gpu-x", tmp_path), DeviceLock("gpu-x", tmp_path)
    assert first.acquire() is None and first.held
    assert second.acquire() == f"another autotune sweep (pid {os.getpid()}) is using it"
    first.release()
    assert second.acquire() is None  # released: free for the next sweep


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_the_probe_says_why_a_device_cannot_run_trials() -> None:
    assert probe("cpu") is None  # initialises, the small kernels give exact numbers
    assert probe("cuda") == "CUDA sees no GPU (CUDA_VISIBLE_DEVICES names no usable device)"


def test_gpus_lists_are_parsed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_gpus("0, 1,3") == ("0", "1", "3")
    assert parse_gpus("GPU-8f2c") == ("GPU-8f2c",)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # a scheduler's share of the host
    assert parse_gpus("all") == ("2", "3")
    with pytest.raises(AutotuneError, match="names a GPU twice"):
        parse_gpus("0,0")
    with pytest.raises(AutotuneError, match="'x' is not a GPU index or UUID"):
        parse_gpus("0,x")


def test_gpus_need_real_trials_and_a_shared_storage(tmp_path: Path) -> None:
    with pytest.raises(AutotuneError, match="cannot be combined with --replay"):
        SweepOptions(gpus=("0", "1"), replay=tmp_path / "records.json")
    with pytest.raises(AutotuneError, match="share the study through its storage"):
        SweepOptions(gpus=("0", "1"), storage="memory")


def test_gpus_refuse_a_space_whose_trials_take_several_gpus(tmp_path: Path) -> None:
    space = tmp_path / "ranks.yaml"
    space.write_text(
        "workload: {name: gpt2, preset: tiny}\ndevice: cpu\ngpus_per_trial: 2\nparams:\n  data_parallel: [ddp]\n"
    )
    options = SweepOptions(gpus=("0", "1"), storage=f"sqlite:///{tmp_path / 'study.db'}", tracking=False)
    with pytest.raises(AutotuneError, match="trials take 2 GPUs each"):
        run_sweep(load_space(space), options)


def collisions(tmp_path: Path, name: str, first: SweepOptions, second: SweepOptions) -> int:
    """Two workers asking in turn, 10 asks each: how often the second proposed what the first had."""
    records = lockstep_records()
    (tmp_path / "records.json").write_text(json.dumps(records))
    space = load_space(tmp_path / "lockstep.yaml", replay=True)
    quiet = Progress(None, None, io.StringIO())
    executor = replay_executor(tmp_path / "records.json")
    workers = [Sweep(space, options, executor, quiet, worker=f"host:{i}") for i, options in enumerate((first, second))]
    for _ in range(10):
        for worker in workers:
            worker.one_trial()
    study = optuna.load_study(study_name=name, storage=first.storage)
    return sum(
        1
        for t in study.trials
        if t.user_attrs[schema.ATTR_WORKER] == "host:1" and t.user_attrs.get(schema.ATTR_KIND) == TrialKind.DUPLICATE
    )


def test_gpu_workers_do_not_propose_in_lockstep_from_their_first_ask(tmp_path: Path) -> None:
    """Same space, same seed: plain workers collide on their first asks; --gpus workers never do."""
    (tmp_path / "lockstep.yaml").write_text(LOCKSTEP_SPACE)
    (tmp_path / "records.json").write_text("[]")  # named by the options before collisions() fills it
    space = load_space(tmp_path / "lockstep.yaml", replay=True)

    def options(study: str) -> SweepOptions:
        storage = f"sqlite:///{tmp_path}/lockstep.db"
        return SweepOptions(
            report=False, study_name=study, storage=storage, replay=tmp_path / "records.json", tracking=False
        )

    plain = options("plain")
    assert collisions(tmp_path, "plain", plain, plain) >= 1  # in lockstep until the collision reseeds one
    gpus = options("gpus")
    assert collisions(tmp_path, "gpus", worker_options(gpus, space, 0), worker_options(gpus, space, 1)) == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpus_past_the_machine_count_are_bad_input() -> None:
    count = torch.cuda.device_count()
    assert parse_gpus(",".join(str(i) for i in range(count))) == tuple(str(i) for i in range(count))
    with pytest.raises(AutotuneError, match=f"this machine has {count} GPU.*so no GPU {count}$"):
        parse_gpus(",".join(str(i) for i in range(count + 1)))
