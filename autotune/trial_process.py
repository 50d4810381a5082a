"""A trial's own process, from the parent's side: start the trial job in it, with a hard timeout, and classify how
it ended.

Each trial is a fresh process forked from a *forkserver* that has already imported torch and
the trial job (but never touched CUDA). That costs about half a second per trial instead of the
~4 s of a fresh interpreter, while every trial still gets its own CUDA context, its own
allocator and its own compile caches in memory, so one trial's crash, leak or OOM cannot
affect the next. The parent never imports CUDA state of a trial and never blocks forever: on
timeout the trial's whole process group (compile workers included) is killed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from autotune.host import how_it_ended, name_process
from autotune.measurement import Status, TrialResult
from autotune.quiet import quiet_torchao_syntax
from autotune.trial.trialspec import TrialSpec

__all__ = ["AHEAD_PROCESS", "TRIAL_PROCESS", "ChildOutcome", "Running", "TrialRunner"]

# Modules the forkserver imports once, so each trial process starts with them loaded. torch._dynamo
# is imported by every optimizer's constructor (1.6-1.8 s). None of these may initialise CUDA: a forked trial could
# not use it. That is checked on a GPU by `scripts/trial_setup.py --imports` and
# tests/test_trial_process.py::test_trial_processes_use_cuda.
PRELOAD = [
    "autotune.trial.job",
    "autotune.workloads.resnet50",
    "autotune.workloads.gpt2",
    "torch._dynamo",
    "triton",
]
# Imported first, where trials may compile: Inductor's compiler, with torch's device queries answered by NVML (3.8-4.6
# s of every compiled trial on an H100 host). A server whose trials never compile leaves it out: it would add 2.2-2.7 s
# to the server's start on the 2-core development machine (the preloads imported with it and without, twice each).
COMPILER_PRELOAD = "autotune.trial.preload"
# What a trial's and a compile ahead's processes are called in the process table: a trial that sees another process
# on the GPU while it is timed names it (GpuTelemetry), and a compile ahead is then told apart from a stranger.
TRIAL_PROCESS = "autotune-trial"
AHEAD_PROCESS = "autotune-ahead"
_GRACE_S = 10.0  # after a result arrives, how long the child may take to exit on its own


def _exit_with_parent() -> None:
    """Kill this trial's process group as soon as the process that asked for it dies.

    Without this, a trial of a SIGKILLed sweep would run on (it has its own session, and the
    forkserver is not its requester), competing for the GPU with the sweep that resumes the study.
    """
    requester = multiprocessing.parent_process()
    if requester is None:
        return

    def watch() -> None:
        requester.join()  # returns when the requester's end of the sentinel pipe closes
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="autotune-parent-watch").start()


def _child_main(target: Callable[..., Any], args: tuple[Any, ...], conn: Connection) -> None:
    """Entry point of an isolated process: own process group, run ``target(*args)``, send the value back."""
    os.setsid()  # the parent can then kill this trial and every process it started, together
    # Ctrl-C is the sweep's to handle: it kills this process when it stops. Only the moment before
    # setsid() is in the terminal's process group, and a KeyboardInterrupt there printed a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent()
    quiet_torchao_syntax()  # before the target's imports: transformers imports torchao where it is installed
    value = target(*args)
    with contextlib.suppress(BrokenPipeError):  # the requester is gone (killed): nobody to tell
        conn.send(value)
        conn.close()


def _run_trial(spec: TrialSpec, requested_at: float) -> dict[str, Any]:
    """The trial, in the trial's process (the forkserver's child): the job itself, or for a data-parallel space its
    ranks, this process the first (:mod:`autotune.trial.ranks`)."""
    name_process(TRIAL_PROCESS)
    if spec.gpus_per_trial > 1:
        from autotune.trial.ranks import run_ranks  # in the child; only a data-parallel trial needs it

        return run_ranks(spec, requested_at).to_dict()
    from autotune.trial.job import run_trial  # in the child, not in the parent

    return run_trial(spec, requested_at).to_dict()


def _compile_ahead(spec: TrialSpec) -> dict[str, Any]:
    name_process(AHEAD_PROCESS)  # first: a trial started just after it can tell it apart already
    from autotune.trial.ahead import compile_ahead  # in the child, as the trial job is

    return compile_ahead(spec)


@dataclass(frozen=True)
class ChildOutcome:
    """How an isolated call ended: its value, or why there is none."""

    value: Any = None
    timed_out: bool = False
    failure: str | None = None  # the process died without a value: "killed by signal SIGSEGV", ...


class TrialRunner:
    """Runs trials one at a time in isolated processes; reuse one runner for many trials."""

    def __init__(self, compiles: bool = True) -> None:
        """``compiles``: whether its trials may compile (``torch.compile``); the server then preloads Inductor's
        compiler too (:data:`COMPILER_PRELOAD`). The server is the process's one forkserver: the preloads of the
        runner that starts it hold for every runner of the process. A trial the server did not preload for still
        runs, importing what it needs itself."""
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload([COMPILER_PRELOAD, *PRELOAD] if compiles else PRELOAD)

    def warm(self) -> None:
        """Start the trial server now: it imports torch and :data:`PRELOAD` in its own process (2.5 s on the 2-core
        development machine, more with a CUDA build) while the caller goes on, and the first trial then forks at once.
        A sweep calls it before its own set-up (the study, MLflow), which the imports then overlap."""
        from multiprocessing import forkserver

        forkserver.ensure_running()

    def run(self, spec: TrialSpec, timeout_s: float) -> TrialResult:
        """Run ``spec`` in a new process; ``timeout_s`` bounds the whole trial, start-up included."""
        outcome = self.call(_run_trial, (spec, time.time()), timeout_s)
        if outcome.timed_out:
            return TrialResult.failed(Status.TIMEOUT, f"no result within {timeout_s:g} s; killed", spec.params)
        if outcome.failure is not None:
            return TrialResult.failed(Status.CRASH, f"trial process {outcome.failure}", spec.params)
        return TrialResult.from_dict(outcome.value)

    def compile_ahead(self, spec: TrialSpec) -> Running:
        """Start compiling ``spec``'s graphs into its compile cache without running them
        (:mod:`autotune.trial.ahead`); the outcome's value is that job's answer."""
        return self.start(_compile_ahead, (spec,))

    def call(self, target: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> ChildOutcome:
        """``target(*args)`` in a new process forked from the torch-preloaded server, killed after ``timeout_s``.

        ``target`` and its value must pickle. An exception here (an interrupt: Ctrl-C, SIGTERM) kills
        the process and everything it started before it propagates.
        """
        return self.start(target, args).wait(timeout_s)

    def start(self, target: Callable[..., Any], args: tuple[Any, ...]) -> Running:
        """``target(*args)`` in a new process, as :meth:`call` runs it, without waiting: the caller waits or kills."""
        receiver, sender = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(target=_child_main, args=(target, args, sender), name="autotune-trial")
        try:
            process.start()
        except BaseException:
            receiver.close()
            _kill(process)
            raise
        finally:
            sender.close()  # only the child writes; EOF on the pipe then means the child is gone
        return Running(process, receiver)


class Running:
    """A call started by :meth:`TrialRunner.start`: wait for its outcome, or kill it."""

    def __init__(self, process: multiprocessing.process.BaseProcess, receiver: Connection) -> None:
        self._process = process
        self._receiver = receiver
        self.outcome: ChildOutcome | None = None  # set once it has ended (waited for, or killed)

    def ready(self) -> bool:
        """Whether its value (or its death) is there to take without waiting."""
        return self.outcome is not None or self._receiver.poll(0)

    def wait(self, timeout_s: float) -> ChildOutcome:
        """Its outcome; after ``timeout_s`` the process is killed and the outcome says it timed out. An exception
        while waiting (an interrupt) kills the process before it propagates."""
        if self.outcome is not None:
            return self.outcome
        try:
            data = _receive(self._receiver, time.time() + timeout_s)
        except BaseException:
            self.kill()  # before the pipe closes: a child never finds its reader gone
            raise
        if data is _TIMEOUT:
            self.kill()
            self.outcome = ChildOutcome(timed_out=True)
            return self.outcome
        self._process.join(_GRACE_S)
        self._close()  # leftovers (compile workers) and a child stuck in exit
        failure = how_it_ended(self._process.exitcode) if data is _NOTHING else None
        self.outcome = ChildOutcome(value=None if data is _NOTHING else data, failure=failure)
        return self.outcome

    def kill(self) -> None:
        """Kill it and everything it started (no outcome to take afterwards: it reads as killed)."""
        if self.outcome is None:
            self.outcome = ChildOutcome(failure="killed")
        self._close()

    def _close(self) -> None:
        _kill(self._process)
        self._receiver.close()


def _receive(receiver: Connection, deadline: float) -> Any:
    """The child's value, _NOTHING if it died without one, or _TIMEOUT."""
    if not receiver.poll(max(0.0, deadline - time.time())):  # at the deadline, what has arrived is still taken
        return _TIMEOUT
    try:
        return receiver.recv()
    except EOFError:
        return _NOTHING


def _kill(process: multiprocessing.process.BaseProcess) -> None:
    """SIGKILL the trial's process group, then reap the trial process (if it was started at all)."""
    if process.pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.is_alive():  # killed before it could call setsid()
        process.kill()
    process.join()


_TIMEOUT: Any = object()
_NOTHING: Any = object()
