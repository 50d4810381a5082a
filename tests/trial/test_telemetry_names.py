"""A process seen computing on the GPU while a trial is timed keeps the name it had when seen: a compile ahead may
have ended, and its pid been reused, by the time the window closes and the warning is written."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from pythonpath import child_env

from autotune.host import process_name
from autotune.trial.measure import GpuTelemetry
from autotune.trial_process import AHEAD_PROCESS

pytestmark = pytest.mark.skipif(not Path("/proc/self/comm").exists(), reason="no /proc process names here")


def test_a_process_is_named_as_first_seen_even_once_it_is_gone() -> None:
    code = f"from autotune.host import name_process; name_process({AHEAD_PROCESS!r}); input()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, env=child_env())
    named = f"pid {child.pid} ({AHEAD_PROCESS})"
    telemetry = GpuTelemetry(torch.device("cpu"))
    try:
        deadline = time.monotonic() + 30
        while process_name(child.pid) != named and time.monotonic() < deadline:
            time.sleep(0.05)  # the child names itself once its imports are done
        assert telemetry._name(child.pid) == named  # seen while it runs
    finally:
        child.communicate(b"\n", timeout=30)
    assert process_name(child.pid) == f"pid {child.pid}"  # what a read at the window's end would say now
    assert telemetry._name(child.pid) == named
