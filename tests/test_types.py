"""The type check, as part of the suite: ``mypy`` over the package, the measuring scripts and the tests, at the
settings of ``[tool.mypy]`` in pyproject.toml (every function typed, bodies checked).

It runs as one test among the others, so the suite's workers overlap its half-minute of one core with the rest
instead of CI waiting for it before the first test starts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_finds_no_type_errors() -> None:
    pytest.importorskip("mypy")  # in the test extra; a GPU machine's copy of the repository may run without it
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-8000:]
