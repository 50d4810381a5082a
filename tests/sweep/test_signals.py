"""Ctrl-C (SIGINT) and SIGTERM end a sweep cleanly: the running trial recorded as interrupted, no traceback,
one line saying how to resume, exit 130 / 143; the resumed sweep runs the interrupted trial's configuration.

End to end with real ``autotune sweep`` processes whose first trial hangs (``sweep_workloads.hang_first``),
so the signal always lands mid-trial; and :class:`~autotune.interrupts.StopSignals` with real signals. The
--gpus sweep resumes by its command again; a plain one by the same sweep in this process (its trials in real
processes all the same), which spares an interpreter and its forkserver (seconds each on a CI machine).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
from pathlib import Path

import pytest
from optuna.trial import TrialState
from study_records import measured_records
from sweep_processes import (
    is_gone,
    load_study,
    run,
    start,
    sweep_args,
    trial_pids,
    wait_for_files,
    write_space,
)

from autotune.interrupts import Interrupted, StopSignals
from autotune.records import schema
from autotune.space import load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

BUDGET = 3


def check_clean_stop(proc: subprocess.Popen[str], signum: int, args: list[str]) -> str:
    """The sweep ended with 128 + the signal, no traceback, and its last line says how to resume."""
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and "Error" not in err, err
    name = signal.Signals(signum).name
    assert err.strip().splitlines()[-1] == f"autotune: interrupted by {name}; resume with: autotune {' '.join(args)}"
    return err


def check_interrupted(trial: object, signum: int) -> None:
    """Recorded as interrupted (FAIL, with why), not as a measured trial: it does not count in the budget."""
    assert trial.state is TrialState.FAIL  # type: ignore[attr-defined]
    attrs = trial.user_attrs  # type: ignore[attr-defined]
    assert attrs[schema.ATTR_STATUS] == schema.INTERRUPTED
    assert attrs[schema.ATTR_REASON].startswith(f"interrupted by {signal.Signals(signum).name}")
    assert schema.ATTR_RESULT not in attrs and schema.ATTR_KIND not in attrs


def resume_here(workdir: Path, space: Path) -> str:
    """What ``autotune sweep SPACE`` with :func:`sweep_args` does, in this process: its stop reason."""
    options = SweepOptions(
        report=False, storage=f"sqlite:///{workdir}/autotune.db", tracking=False, remeasure_top=0, prune_ratio=0
    )
    return run_sweep(load_space(space), options, Progress(None, None, io.StringIO())).stop_reason


def check_resumed(workdir: Path, name: str, args: list[str], interrupted: list[int], signum: int) -> None:
    """The same command again finishes the budget, and measures each interrupted trial's configuration first."""
    again = run(workdir, args)
    assert again.returncode == 0, again.stderr
    assert f"budget of {BUDGET} measured trials reached" in again.stdout
    check_retried(workdir, name, interrupted, signum)


def check_retried(workdir: Path, name: str, interrupted: list[int], signum: int) -> None:
    """The budget is measured, each interrupted trial's configuration among it."""
    study = load_study(workdir, name)
    measured = measured_records(study)
    assert len(measured) == BUDGET
    retried = {study.trials[t.number].system_attrs.get("failed_trial"): t for t in measured}
    for number in interrupted:
        check_interrupted(study.trials[number], signum)  # still there, as it was
        assert retried[number].params == study.trials[number].user_attrs[schema.ATTR_PARAMS]
        assert retried[number].ok


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_trial_records_it_interrupted_and_the_resumed_sweep_runs_it(
    tmp_path: Path, signum: int
) -> None:
    space = write_space(tmp_path, "hang", "hang_first", BUDGET, count=1)
    args = sweep_args(space)
    proc = start(tmp_path, args)
    wait_for_files([tmp_path / "hang-0"], proc)
    proc.send_signal(signum)
    err = check_clean_stop(proc, signum, args)
    assert f"trial 0 interrupted by {signal.Signals(signum).name}: not counted" in err
    (hung_pid,) = trial_pids(tmp_path)
    assert is_gone(hung_pid)  # the sweep took its trial process down with it

    study = load_study(tmp_path, "hang")
    check_interrupted(study.trials[0], signum)
    assert measured_records(study) == []
    (queued,) = study.get_trials(states=(TrialState.WAITING,))
    assert queued.params == study.trials[0].params
    assert queued.user_attrs == {schema.ATTR_DEFAULT: True}  # still the default configuration, the baseline

    assert resume_here(tmp_path, space) == f"budget of {BUDGET} measured trials reached"
    check_retried(tmp_path, "hang", [0], signum)


@pytest.mark.slow
def test_ctrl_c_stops_every_gpu_worker(tmp_path: Path) -> None:
    """Ctrl-C at a terminal signals the foreground process group: here the orchestrator's alone."""
    space = write_space(tmp_path, "hang2", "hang_first", BUDGET, count=2)
    args = sweep_args(space, "--device", "cpu", "--gpus", "0,1")
    proc = start(tmp_path, args, start_new_session=True)  # its own group, as a terminal's foreground job
    wait_for_files([tmp_path / "hang-0", tmp_path / "hang-1"], proc)
    os.killpg(proc.pid, signal.SIGINT)
    err = check_clean_stop(proc, signal.SIGINT, args)
    assert all(is_gone(pid) for pid in trial_pids(tmp_path))

    study = load_study(tmp_path, "hang2")
    interrupted = [t for t in study.trials if t.user_attrs.get(schema.ATTR_STATUS) == schema.INTERRUPTED]
    assert len(interrupted) == 2  # each worker's running trial
    assert len({t.user_attrs[schema.ATTR_WORKER] for t in interrupted}) == 2
    for trial in interrupted:
        check_interrupted(trial, signal.SIGINT)
        assert f"{trial.number} interrupted by SIGINT: not counted" in err
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 2

    check_resumed(tmp_path, "hang2", args, [t.number for t in interrupted], signal.SIGINT)


def test_a_signal_in_a_deferred_block_lands_when_the_block_ends() -> None:
    reached_the_end = False
    with StopSignals() as signals, pytest.raises(Interrupted) as stop, signals.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        reached_the_end = True  # a record in progress is finished first
    assert reached_the_end
    assert stop.value.signum == signal.SIGTERM and stop.value.exit_code == 143


def test_a_signal_is_raised_at_once_where_the_sweep_waits() -> None:
    with StopSignals() as signals, pytest.raises(Interrupted) as stop, signals.deferred(), signals.interruptible():
        os.kill(os.getpid(), signal.SIGINT)
        pytest.fail("still running after the signal")  # pragma: no cover
    assert stop.value.exit_code == 130


def test_a_second_signal_is_raised_at_once_even_in_a_deferred_block() -> None:
    after_the_second = False
    with StopSignals() as signals, pytest.raises(Interrupted), signals.deferred():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # a person who presses Ctrl-C twice means it
        after_the_second = True
    assert not after_the_second


def test_stop_signals_leave_the_previous_handlers_behind() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
