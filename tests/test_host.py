"""The process names a trial and a compile ahead give themselves, read back as another process would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pythonpath import child_env

from autotune.host import name_process, process_name
from autotune.trial_process import AHEAD_PROCESS, TRIAL_PROCESS

pytestmark = pytest.mark.skipif(not Path("/proc/self/comm").exists(), reason="no /proc process names here")


def test_a_named_process_is_named_so_to_others() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", f"from autotune.host import name_process; name_process({AHEAD_PROCESS!r}); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
    )
    try:
        for _ in range(200):  # the child names itself once its imports are done
            if process_name(child.pid) == f"pid {child.pid} ({AHEAD_PROCESS})":
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert process_name(child.pid) == f"pid {child.pid} (autotune-ahead)"
    finally:
        child.communicate(b"\n", timeout=30)


def test_a_long_name_keeps_what_the_kernel_keeps() -> None:
    code = f"from autotune.host import name_process; name_process({TRIAL_PROCESS + '-and-more'!r});"
    code += " print(open('/proc/self/comm').read().strip())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True)
    assert out.stdout.strip() == (TRIAL_PROCESS + "-and-more")[:15]


def test_a_process_that_is_gone_is_its_pid() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert process_name(child.pid) == f"pid {child.pid}"


def test_naming_this_process_leaves_it_running() -> None:
    before = Path("/proc/self/comm").read_text()
    try:
        name_process("autotune-test")
        assert Path("/proc/self/comm").read_text().strip() == "autotune-test"
    finally:
        name_process(before.strip())
