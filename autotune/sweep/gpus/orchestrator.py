"""``autotune sweep SPACE --gpus 0,1,2,3``: one worker process per GPU, one study, one progress display.

Each worker is what the one-sweep-per-GPU recipe started by hand: a process of its own
(:mod:`autotune.sweep.gpus.worker`) whose ``CUDA_VISIBLE_DEVICES`` names its GPU, so its trials see that
GPU alone, as ``cuda:0``; its own connection to the study, trial runner and name in the study
(``host:pid``). Workers share nothing in memory: the study is the truth, kept by PostgreSQL or by
SQLite (write-ahead log, busy timeout, first opens ordered by a file lock). Processes, not threads in
this one: a file lock orders processes only, signals reach only a main thread, and a worker stuck
in a driver call must not stall the others.

This process (the orchestrator) opens the study and queues the default configuration once, before
the workers start (:func:`~autotune.sweep.setup.prepare_study`); gives worker ``i`` the sampler seed
``seed + i``, so workers do not propose in lockstep from their first ask; prints every worker's lines,
each naming its GPU; once every worker has ended its search, starts one more on the first GPU whose
worker finished well, to run the finishing stages (through the study's finish lease, as any sweep:
:mod:`autotune.sweep.stages.once_per_study`); and ends with that worker's summary. Each worker checks its GPU
before each trial (:mod:`autotune.sweep.workers.device_check`): one that fails is taken out with one line, and the
others finish the budget. So is a worker that dies without a word (SIGKILL, the OOM killer): the line
says how it ended, the others fail and retry its running trial (:mod:`autotune.sweep.workers.orphaned_trials`), and
the summary notes it.

Stop signals: workers run in process groups of their own, so Ctrl-C at a terminal reaches this
process alone. It passes SIGINT or SIGTERM on to every worker, waits until each has recorded its
running trial as interrupted, then raises :class:`~autotune.interrupts.Interrupted`. A worker whose
orchestrator was killed stops the same way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import cast

import pynvml

from autotune.errors import AutotuneError
from autotune.interrupts import STOP_SIGNALS, Interrupted
from autotune.space import Space
from autotune.sweep.gpus import messages as events
from autotune.sweep.options import SweepOptions, SweepSummary
from autotune.sweep.setup import prepare_study, trial_budget
from autotune.views.progress import Progress

__all__ = ["parse_gpus", "run_on_gpus", "worker_options"]


def parse_gpus(text: str) -> tuple[str, ...]:
    """``0,1,3`` or ``all`` -> the GPUs to run workers on, as nvidia-smi names them (indices or UUIDs).

    ``all`` is the GPUs in ``CUDA_VISIBLE_DEVICES`` where it is set (a scheduler's share of the host),
    else every GPU NVML counts.
    """
    if text.strip() == "all":
        return _all_gpus()
    entries = _entries(text)
    _check_indices(text, entries)
    return entries


def _entries(text: str) -> tuple[str, ...]:
    entries = tuple(entry.strip() for entry in text.split(","))
    for entry in entries:
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            raise AutotuneError(f"--gpus {text!r}: {entry!r} is not a GPU index or UUID (e.g. --gpus 0,1 or all)")
    if len(set(entries)) < len(entries):
        raise AutotuneError(f"--gpus {text!r} names a GPU twice: one worker per GPU")
    return entries


def _check_indices(text: str, entries: tuple[str, ...]) -> None:
    """Refuse indices past the GPUs NVML counts (a typo, or a command copied from a larger box) before any worker
    starts; without NVML (a CPU machine) the workers' device checks say what is wrong."""
    try:
        count = _nvml_count()
    except Exception:  # no driver, no library
        return
    missing = [entry for entry in entries if entry.isdigit() and int(entry) >= count]
    if missing:
        have = "no GPU" if count == 0 else "1 GPU (index 0)" if count == 1 else f"{count} GPUs (indices 0-{count - 1})"
        raise AutotuneError(f"--gpus {text!r}: this machine has {have}, so no GPU {', '.join(missing)}")


def _nvml_count() -> int:
    """The GPUs NVML counts on this host, whatever CUDA_VISIBLE_DEVICES says; raises without a driver or library."""
    pynvml.nvmlInit()
    return int(pynvml.nvmlDeviceGetCount())


def _all_gpus() -> tuple[str, ...]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        return _entries(visible)
    try:
        count = _nvml_count()
    except Exception as exc:  # no driver, no library
        raise AutotuneError(f"--gpus all: NVML finds no GPU here ({type(exc).__name__}: {exc})") from exc
    if count == 0:
        raise AutotuneError("--gpus all: NVML finds no GPU here")
    return tuple(str(i) for i in range(count))


def worker_options(options: SweepOptions, space: Space, index: int) -> SweepOptions:
    """Worker ``index``'s options: no ``gpus`` of its own, and its own sampler seed (``seed + index``)."""
    seed = options.seed if options.seed is not None else space.sampler.seed
    return replace(options, gpus=(), seed=None if seed is None else seed + index)


def _device_type(space: Space, options: SweepOptions) -> str:
    """``cuda`` or ``cpu``: what each worker's device is (``auto``: cuda where NVML counts a GPU)."""
    device = options.device or space.device
    if device.startswith("cuda:"):
        raise AutotuneError(f"--gpus picks each worker's GPU: use --device cuda, not {device}")
    if device == "auto":
        with contextlib.suppress(Exception):
            return "cuda" if _nvml_count() > 0 else "cpu"
        return "cpu"
    return device


@dataclass
class _Worker:
    """One worker process as the orchestrator sees it, and how it ended."""

    label: str  # "gpu 1": what its lines start with
    process: subprocess.Popen[bytes]
    conn: Connection
    end: events.Ending | None = None  # its last word (None: it ended without one, killed)
    ended_at: float = 0.0

    def outcome(self) -> tuple[SweepSummary | None, str | None]:
        """(its summary, None) when it finished; (None, why) when it was taken out or stopped on its own."""
        match self.end:
            case events.Done(summary, None):
                return summary, None
            case events.Done(_, failure):
                return None, failure
            case events.Stopped():
                return None, "stopped by a signal sent to it alone"
            case events.BadInput(line):
                raise AutotuneError(line)
            case events.Failed(line, trace):
                if os.environ.get("AUTOTUNE_DEBUG"):
                    print(trace, file=sys.stderr)
                raise RuntimeError(f"worker {self.label} failed: {line}")
        return None, self.death()

    def death(self) -> str:
        """How a worker that ended without a word (killed: SIGKILL, the OOM killer) ended, from its exit code."""
        code = self.process.returncode
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return f"its process was killed by {signal.Signals(-code).name} (exit code {code})"
        return f"its process ended without a word (exit code {code})"


@dataclass
class _Orchestra:
    """The workers, and the stop signal this process received (passed on to each of them)."""

    workers: list[_Worker] = field(default_factory=list)
    stop: int | None = None

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.stop is None:
            self.stop = signum
        for worker in self.workers:
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signum)


def run_on_gpus(space: Space, options: SweepOptions, progress: Progress) -> SweepSummary:
    """Run the sweep with one worker per entry of ``options.gpus``; the summary covers every worker's trials."""
    started = time.time()
    device_type = _device_type(space, options)
    budget, measured = prepare_study(space, options)
    # One time limit for the whole sweep: every worker, the finishing one started after the search too, ends by it.
    options = replace(options, deadline=trial_budget(space, options)[1])
    progress.budget, progress.deadline = budget, options.deadline
    progress.done, progress.workers = measured, len(options.gpus)
    orchestra = _Orchestra()
    kind = "gpu" if device_type == "cuda" else "cpu"
    with _signals_to(orchestra):
        for index, entry in enumerate(options.gpus):
            if orchestra.stop is not None:
                break  # stopped while starting: start no more
            job = events.WorkerJob(space, worker_options(options, space, index), entry, device_type)
            _start(orchestra, job, f"{kind} {entry}")
        _relay(orchestra.workers, progress)
        searchers = list(orchestra.workers)
        finisher = _finishing_entry(searchers, options.gpus) if orchestra.stop is None else None
        if finisher is not None:
            job = events.WorkerJob(space, worker_options(options, space, 0), finisher, device_type, role="finish")
            _start(orchestra, job, f"{kind} {finisher}")
            _relay(orchestra.workers[len(searchers) :], progress)
    progress.close()
    if orchestra.stop is not None:
        raise Interrupted(orchestra.stop)
    return _summary(searchers, orchestra.workers[len(searchers) :], time.time() - started)


def _finishing_entry(searchers: list[_Worker], entries: tuple[str, ...]) -> str | None:
    """The GPU the finishing stages run on: the first whose worker finished its search; None if none did."""
    for worker, entry in zip(searchers, entries, strict=False):
        if isinstance(worker.end, events.Done) and worker.end.device_failure is None:
            return entry
    return None


@contextlib.contextmanager
def _signals_to(orchestra: _Orchestra) -> Iterator[None]:
    """While the workers run, a stop signal to this process goes on to them (see the module docstring).

    Only a main thread can install handlers; run from another, the workers stop only when this process ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, orchestra.on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _start(orchestra: _Orchestra, job: events.WorkerJob, label: str) -> None:
    """Start a worker in a process group of its own, stop signals held until it can handle them, and send its job."""
    ours, theirs = socket.socketpair()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": job.entry, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # nvidia-smi's order
    command = [sys.executable, "-m", "autotune.sweep.gpus.worker", str(theirs.fileno())]
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # the child starts with them blocked
    try:
        process = subprocess.Popen(command, env=env, pass_fds=(theirs.fileno(),), process_group=0)
        worker = _Worker(label, process, Connection(ours.detach()))
        orchestra.workers.append(worker)  # before a held signal lands here: it must reach this worker too
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        theirs.close()
    with contextlib.suppress(OSError):  # a worker that died at once says so by its exit
        worker.conn.send(job)


def _relay(workers: list[_Worker], progress: Progress) -> None:
    """Show every worker's progress on one display until all of them have ended."""
    live = {worker.conn: worker for worker in workers}
    while live:
        for ready in wait(list(live)):
            worker = live[cast(Connection, ready)]
            try:
                event = worker.conn.recv()
            except (EOFError, OSError):
                del live[worker.conn]
                worker.process.wait()
                worker.conn.close()
                # killed: the other workers fail and retry its trial (autotune.sweep.workers.orphaned_trials)
                if worker.end is None:
                    progress.message(f"taken out: {worker.death()}", source=worker.label)
                continue
            _show(worker, event, progress)


def _show(worker: _Worker, event: events.WorkerEvent, progress: Progress) -> None:
    match event:
        case events.Said(line):
            progress.message(line, source=worker.label)
        case events.TrialStarted(label):
            progress.started(label, source=worker.label)
        case events.TrialFinished(label, outcome, seconds, measured, counts, best):
            progress.finished(label, outcome, seconds, measured, counts, best, source=worker.label)
        case _:
            worker.end, worker.ended_at = event, time.monotonic()


def _summary(searchers: list[_Worker], finishers: list[_Worker], wall_s: float) -> SweepSummary:
    """The finishing worker's summary (it covers every worker's trials and what the stages added), with the
    search's stop reason; the last search worker's when no finishing worker ended well; or why none could."""
    outcomes = [(worker, *worker.outcome()) for worker in searchers]
    taken_out = [(worker.label, why) for worker, _, why in outcomes if why is not None]
    finished = [(worker.ended_at, summary) for worker, summary, _ in outcomes if summary is not None]
    if not finished:
        reasons = "; ".join(f"{label}: {why}" for label, why in taken_out)
        raise AutotuneError(f"no worker could finish the sweep: {reasons}")
    searched = max(finished, key=lambda pair: pair[0])[1]
    final = next((summary for worker in finishers if (summary := worker.outcome()[0]) is not None), None)
    summary = replace(final or searched, wall_s=wall_s, stop_reason=searched.stop_reason)
    if taken_out:
        summary.stop_reason += f" ({', '.join(label for label, _ in taken_out)} taken out)"
    if finishers and final is None:
        summary.stop_reason += f"; the finishing stages did not complete: {finishers[0].outcome()[1]}"
    return summary
