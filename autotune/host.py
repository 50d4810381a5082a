"""What this machine is, as the records of a trial and of shipped compile artifacts name it."""

from __future__ import annotations

import contextlib
import platform

__all__ = ["cpu_model", "name_process", "process_name"]


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
