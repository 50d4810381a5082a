"""What this machine is, as the records of a trial and of shipped compile artifacts name it."""

from __future__ import annotations

import contextlib
import platform

__all__ = ["cpu_model"]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``), else what ``platform`` says."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
