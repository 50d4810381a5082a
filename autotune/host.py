"""What this machine is, as the records of a trial and of shipped compile artifacts name it, and what its processes
are called and how they ended."""

from __future__ import annotations

import contextlib
import platform
import signal

__all__ = ["cpu_model", "how_it_ended", "name_process", "process_name"]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``), else what ``platform`` says."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def name_process(name: str) -> None:
    """Give this process ``name`` in the kernel's process table (``/proc/self/comm``, 15 bytes kept), so another
    process that sees it on the GPU can say what it is; nothing where the system keeps no such name."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write(name[:15])


def process_name(pid: int) -> str:
    """``pid 123 (autotune-ahead)``: a process as the kernel names it (:func:`name_process`), else its pid alone."""
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return f"pid {pid} ({comm.read().strip()})"
    except OSError:
        return f"pid {pid}"


def how_it_ended(exitcode: int | None) -> str:
    """``killed by signal SIGKILL``, ``exited with code 3 before reporting a result``: how a child process (a trial,
    a rank) ended without its answer."""
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(-exitcode).name}"
        return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode} before reporting a result"
