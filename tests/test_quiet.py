"""The resource tracker's leaked-semaphore warning, silenced for autotune's commands: a real forkserver child that
ends without releasing a semaphore (as a trial process stopped hard does), in a real interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pythonpath import child_env

_LEAK = """
import multiprocessing, os, sys
from autotune.quiet import quiet_resource_tracker

def leak():
    held = multiprocessing.get_context("forkserver").Semaphore(1)  # held: collected, it would unregister itself
    os._exit(0 if held else 1)  # no finalizer runs: the semaphore stays registered with the tracker

if __name__ == "__main__":
    if sys.argv[1] == "quiet":
        quiet_resource_tracker()
    child = multiprocessing.get_context("forkserver").Process(target=leak)
    child.start()
    child.join()
"""


@pytest.mark.parametrize("mode", ["quiet", "loud"])
def test_the_leaked_semaphore_warning_is_silenced_only_where_asked(mode: str, tmp_path: Path) -> None:
    script = tmp_path / "leak.py"  # a file: the forkserver's child imports the target from it
    script.write_text(_LEAK)
    done = subprocess.run(
        [sys.executable, str(script), mode], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert ("leaked semaphore" in done.stderr) == (mode == "loud"), done.stderr


_COMPILE = """
import warnings
from autotune.quiet import quiet_torchao_syntax
warnings.simplefilter("always")
quiet_torchao_syntax()
source = 'doc = "an escape \\\\. Python warns of"'
compile(source, "/site-packages/torchao/quantization/quant_api.py", "exec")
compile(source, "/site-packages/users_model/layers.py", "exec")
"""


def test_the_escape_warning_of_torchaos_sources_is_silenced_and_no_other() -> None:
    done = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True, timeout=60, check=True)
    assert "torchao" not in done.stderr  # SyntaxWarning on Python 3.12, DeprecationWarning before
    assert "users_model/layers.py" in done.stderr and "invalid escape sequence" in done.stderr
