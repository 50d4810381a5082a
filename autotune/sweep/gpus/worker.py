"""One worker of a ``--gpus`` sweep: the process :mod:`autotune.sweep.gpus.orchestrator` starts for each GPU.

It is started as ``python -m autotune.sweep.gpus.worker FD`` with ``CUDA_VISIBLE_DEVICES`` naming its GPU
and the stop signals blocked. It reads its :class:`WorkerJob` from the socket ``FD``, runs a
:class:`~autotune.sweep.loop.Sweep` that checks the device before each trial, and sends back on the
same socket its progress (:class:`ProgressRelay`) and how it ended, as the events of
:mod:`autotune.sweep.gpus.messages`. Nothing it
does is printed as a traceback: the orchestrator says what matters, once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection

import optuna

from autotune.errors import AutotuneError, first_line
from autotune.interrupts import STOP_SIGNALS, Interrupted, StopSignals
from autotune.quiet import quiet_resource_tracker
from autotune.records import Tally
from autotune.sweep.gpus import messages as events
from autotune.sweep.loop import Sweep
from autotune.sweep.measurers import trial_executor
from autotune.sweep.options import SweepSummary
from autotune.sweep.stages.lineup import finishing_runs_trials
from autotune.sweep.workers.device_check import DeviceCheck
from autotune.views.progress import Progress

__all__ = ["ProgressRelay", "main"]


class ProgressRelay(Progress):
    """A worker's progress, sent to the orchestrator's display instead of printed."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(None, None)
        self._conn = conn

    def message(self, line: str, source: str = "") -> None:
        self._send(events.Said(line))

    def started(self, label: str, source: str = "") -> None:
        self._send(events.TrialStarted(label))

    def finished(
        self, label: str, outcome: str, seconds: float, measured: bool, counts: Tally, best: str, source: str = ""
    ) -> None:
        self._send(events.TrialFinished(label, outcome, seconds, measured, counts, best))

    def close(self) -> None:
        pass  # the orchestrator's display outlives its workers

    def _send(self, event: events.WorkerEvent) -> None:
        send(self._conn, event)


def send(conn: Connection, event: events.WorkerEvent) -> None:
    """Send ``event`` to the orchestrator; an orchestrator that is gone hears nothing (see :func:`_stop_with`)."""
    with contextlib.suppress(OSError):
        conn.send(event)


def main() -> None:
    """The worker process: run the job it is sent, then say how it ended."""
    # A worker is a fresh interpreter whose trials start their own resource tracker: quiet it as the CLI does.
    quiet_resource_tracker()
    conn = Connection(int(sys.argv[1]))
    with StopSignals():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a signal held since start-up lands now
        end = _run(conn)
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # from here on, a late signal changes nothing
    send(conn, end)


def _run(conn: Connection) -> events.Ending:
    try:
        job: events.WorkerJob = conn.recv()
        _stop_with(conn)
        summary, device_failure = _sweep(job, conn)
        return events.Done(summary, device_failure)
    except Interrupted:
        return events.Stopped()
    except AutotuneError as exc:
        return events.BadInput(str(exc))
    except Exception as exc:
        return events.Failed(f"{type(exc).__name__}: {first_line(exc)}", traceback.format_exc())


def _sweep(job: events.WorkerJob, conn: Connection) -> tuple[SweepSummary, str | None]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress lines say what matters
    # A finishing worker whose stages run no trial (finishing_runs_trials) never needs the trial server.
    warm = job.role != "finish" or finishing_runs_trials(job.space, job.options)
    executor = trial_executor(job.space, job.options, warm)
    check = DeviceCheck(job.entry, job.device_type)
    sweep = Sweep(job.space, job.options, executor, ProgressRelay(conn), device_check=check, role=job.role)
    return sweep.run(), sweep.device_failure


def _stop_with(conn: Connection) -> None:
    """SIGTERM this worker when the orchestrator is gone (killed): its trial is then recorded as interrupted.

    The orchestrator sends nothing after the job, so the socket turns readable only at its end.
    """

    def watch() -> None:
        with contextlib.suppress(OSError, EOFError):
            conn.poll(None)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="autotune-orchestrator-watch").start()


if __name__ == "__main__":
    main()
